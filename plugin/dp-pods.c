/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes Pod JSON -> struct dp_pod, for the node-local pod cache.  The plugin's pod
 * source (a kube-client watch with fieldSelector=spec.nodeName=<node>, or the --pods-file
 * static list) hands whole Pod objects here.  Only what the admission match needs is kept:
 * identity, whether the pod is still waiting to start, and its topofit.io/gpus sets
 * resolved against this node's devices (untrusted input: see dp_parse_gpus_annotation).
 */
#include <cjson/cJSON.h>
#include <string.h>

#include "../common/str.h"
#include "dp.h"

#define DP_MAX_PODLIST_BYTES (64u << 20) /* a --pods-file */

DEFINE_CLEANUP_FUNC(cJSON, cJSON_Delete)

static const char *
dp__get_str(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
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
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        const cJSON *status = cJSON_GetObjectItemCaseSensitive(obj, "status");
        const cJSON *ann;
        const char *uid, *ns, *name, *phase, *gpus;
        struct dp_pod p = { 0 };
        int r;

        if (!cJSON_IsObject(obj) || !cJSON_IsObject(meta))
                return set_why(ret_why, "pod has no metadata"), -EINVAL;
        uid = dp__get_str(meta, "uid");
        ns = dp__get_str(meta, "namespace");
        name = dp__get_str(meta, "name");
        if (!uid || !name)
                return set_why(ret_why, "pod has no uid or name"), -EINVAL;
        if (dp__copy(p.uid, sizeof(p.uid), uid) < 0 || dp__copy(p.ns, sizeof(p.ns), ns) < 0 ||
            dp__copy(p.name, sizeof(p.name), name) < 0)
                return set_why(ret_why, "pod name, namespace or uid too long"), -EINVAL;
        phase = cJSON_IsObject(status) ? dp__get_str(status, "phase") : NULL;
        p.live = cJSON_GetObjectItemCaseSensitive(meta, "deletionTimestamp") == NULL &&
                 !(phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0));
        p.pending = p.live && (!phase || strcmp(phase, "Pending") == 0);

        ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
        gpus = cJSON_IsObject(ann) ? dp__get_str(ann, DP_GPUS_ANNOTATION) : NULL;
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
        CLEANUP(cJSON_Deletep) cJSON *root = NULL;
        const cJSON *items, *e;
        CLEANUP(freep) struct dp_pod *p = NULL;
        int r;

        if (len > DP_MAX_PODLIST_BYTES)
                return set_why(ret_why, "pod list too large"), -E2BIG;
        root = cJSON_ParseWithLength(json, len);
        if (!root)
                return set_why(ret_why, "pod list is not valid JSON"), -EINVAL;
        items = cJSON_IsArray(root) ? root : cJSON_GetObjectItemCaseSensitive(root, "items");
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
