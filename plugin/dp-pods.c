/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes Pod JSON -> struct dp_pod, for the node-local pod cache.  The plugin's pod
 * source (a kube-client watch with fieldSelector=spec.nodeName=<node>, or the --pods-file
 * static list) hands whole Pod objects here.  Only what the admission match needs is kept:
 * identity, whether the pod is still waiting to start, and its topofit.io/gpus sets
 * resolved against this node's devices (untrusted input: see dp_parse_gpus_annotation).
 * The duplicate-key rule (common/json.h): a pod that repeats a key read here is refused.
 */
#include <string.h>

#include "../common/json.h"
#include "../common/str.h"
#include "dp.h"

#define DP_MAX_PODLIST_BYTES (64u << 20) /* a --pods-file */
#define DP_MAX_PODLIST_MEMORY (16u * DP_MAX_PODLIST_BYTES)

static const cJSON *
dp__get(const cJSON *o, const char *key, bool *repeated)
{
        return json_get(o, key, repeated);
}

static const char *
dp__get_str(const cJSON *o, const char *key, bool *repeated)
{
        const cJSON *v = dp__get(o, key, repeated);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int
dp__copy(char *dst, size_t size, const char *s)
{
        return str_copy(dst, size, s ? s : "", s ? strlen(s) : 0);
}

int
dp_pod_from_json(const struct dp_cache *c, const struct cJSON *obj, struct dp_pod *ret,
                 const char **ret_why)
{
        bool rep = false;
        const cJSON *meta = dp__get(obj, "metadata", &rep);
        const cJSON *status = dp__get(obj, "status", &rep);
        const cJSON *ann;
        const char *uid, *ns, *name, *phase, *gpus;
        struct dp_pod p = { 0 };
        int r;

        if (!cJSON_IsObject(obj) || !cJSON_IsObject(meta))
                return set_why(ret_why, "pod has no metadata"), -EINVAL;
        uid = dp__get_str(meta, "uid", &rep);
        ns = dp__get_str(meta, "namespace", &rep);
        name = dp__get_str(meta, "name", &rep);
        if (!uid || !name)
                return set_why(ret_why, "pod has no uid or name"), -EINVAL;
        if (dp__copy(p.uid, sizeof(p.uid), uid) < 0 || dp__copy(p.ns, sizeof(p.ns), ns) < 0 ||
            dp__copy(p.name, sizeof(p.name), name) < 0)
                return set_why(ret_why, "pod name, namespace or uid too long"), -EINVAL;
        phase = cJSON_IsObject(status) ? dp__get_str(status, "phase", &rep) : NULL;
        p.live = dp__get(meta, "deletionTimestamp", &rep) == NULL &&
                 !(phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0));
        p.pending = p.live && (!phase || strcmp(phase, "Pending") == 0);

        ann = dp__get(meta, "annotations", &rep);
        gpus = cJSON_IsObject(ann) ? dp__get_str(ann, TOPO_GPUS_KEY, &rep) : NULL;
        if (rep)
                return set_why(ret_why, "pod repeats a key that is read (refused: readers "
                                        "disagree on which copy counts)"),
                       -EINVAL;
        if (!gpus) {
                *ret = p;
                return 0;
        }
        r = dp_parse_gpus_annotation(c, gpus, strlen(gpus), p.sets, &p.n_sets, ret_why);
        if (r < 0)
                return r;
        *ret = p;
        return 1;
}

int
dp_cache_load_podlist(struct dp_cache *c, const char *json, size_t len, const char **ret_why)
{
        CLEANUP(json_doc_freep) struct json_doc *doc = NULL;
        const cJSON *root, *items, *e;
        CLEANUP(freep) struct dp_pod *p = NULL;
        int r;

        if (len > DP_MAX_PODLIST_BYTES)
                return set_why(ret_why, "pod list too large"), -E2BIG;
        r = json_parse(json, len, DP_MAX_PODLIST_MEMORY, 0, &doc, NULL);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set_why(ret_why, "pod list is not valid JSON"), -EINVAL;
        root = doc->root;
        items = cJSON_IsArray(root) ? root : json_doc_get(doc, root, "items");
        if (json_doc_repeated(doc))
                return set_why(ret_why, "pod list repeats its items key"), -EINVAL;
        if (!cJSON_IsArray(items))
                return set_why(ret_why, "pod list has no items array"), -EINVAL;
        p = malloc(sizeof(*p));
        if (!p)
                return -ENOMEM;
        for (unsigned i = 0; i < c->n_pods; i++)
                c->pods[i].mark = false;
        cJSON_ArrayForEach(e, items) {
                r = dp_pod_from_json(c, e, p, ret_why);
                if (r < 0) {
                        c->rejected++; /* one bad pod never hides the others */
                        continue;
                }
                if (r == 0)
                        continue;
                p->mark = true;
                r = dp_cache_upsert(c, p);
                if (r < 0)
                        return set_why(ret_why, "pod cache full"), r;
        }
        /* Pods gone from the list leave the cache; the others keep their age and offers. */
        for (unsigned i = c->n_pods; i-- > 0;)
                if (!c->pods[i].mark)
                        (void)dp_cache_remove(c, c->pods[i].uid);
        return 0;
}
