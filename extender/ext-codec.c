/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The codec: kube-scheduler's extender JSON (Go field names, no JSON tags) and the
 * Kubernetes objects inside it, to and from the core's plain structs.  The only cJSON user
 * in the extender and the one place its failures become sentences for a 400.  Every input
 * is capped before parsing (EXT_MAX_BODY bytes, EXT_MAX_JSON_DEPTH nesting, EXT_MAX_NODES
 * nodes, field lengths); a wrong type is an error naming the field.  Decoded structs own
 * their strings.  ExtenderArgs are read by ext-args.c's scanner instead (no tree); the tree
 * decoder they had stays below as its oracle, and the answers are encoded here.
 */
#include "ext-core-private.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "str.h"

#define EXT_MAX_DOC_MEMORY (16u * EXT_MAX_BODY) /* a request's parsed tree */

/* The sentence of a 400 for a JSON reader's failure r (json_parse() or the scanner of
 * ext-args.c, common/json.h), and the code to return; 0 and -ENOMEM pass through. */
int
ext__json_why(int r, const char **ret_why)
{
        switch (r) {
        case 0:
        case -ENOMEM:
                return r;
        case -ENODATA:
                return set_why(ret_why, "the request body is empty"), -EINVAL;
        case -ELOOP:
                return set_why(ret_why, "the JSON is nested deeper than the limit"), r;
        case -EILSEQ:
                return set_why(ret_why, "a JSON string holds \\u0000, which is refused"), -EINVAL;
        case -E2BIG:
                return set_why(ret_why, "the JSON has more values than the limit"), -E2BIG;
        case -EBADMSG:
                return set_why(ret_why, "the request body has bytes after the JSON value"), -EINVAL;
        default:
                return set_why(ret_why, "the request body is not valid JSON"), -EINVAL;
        }
}

/* Parses json into *ret (free with json_doc_free, never cJSON_Delete): common/json.h's
 * reader, its failures turned into the sentences of a 400 here.  cap bounds the bytes
 * accepted, doc_cap the tree's memory. */
static int
parse_doc_capped(const char *json, size_t len, size_t cap, size_t doc_cap,
                 struct json_doc **ret, const char **ret_why)
{
        int r;

        if (len > cap)
                return set_why(ret_why, "the request body is larger than the limit"), -EMSGSIZE;
        r = json_parse(json, len, doc_cap, EXT_MAX_JSON_DEPTH, ret, NULL);
        return ext__json_why(r, ret_why);
}

static int
parse_doc(const char *json, size_t len, struct json_doc **ret, const char **ret_why)
{
        return parse_doc_capped(json, len, EXT_MAX_BODY, EXT_MAX_DOC_MEMORY, ret, ret_why);
}

/* set_why() and an error code in one expression, for "r = why_err(...)". */
static int
why_err(const char **ret_why, const char *why, int r)
{
        set_why(ret_why, why);
        return r;
}

/* --- repeated keys ------------------------------------------------------------------------
 * The project's rule (common/json.h): a request in which an object repeats a key that we
 * read is refused.  get() notes a repeat in tl_repeated (thread-local: the decoders below
 * run on the server's threads); each request decoder clears it first and refuses at the
 * end if set.  Checking every object of the document instead cost 15-20% of a 4.5 MB
 * full-mode filter. */
static __thread bool tl_repeated;

static const cJSON *
get(const cJSON *o, const char *key)
{
        return json_get(o, key, &tl_repeated);
}

/* The end of a request decoder: r, or -EINVAL when a key it read was repeated. */
static int
refuse_repeats(int r, const char **ret_why)
{
        bool repeated = tl_repeated;

        tl_repeated = false;
        if (r >= 0 && repeated)
                return set_why(ret_why, EXT_WHY_REPEATED), -EINVAL;
        return r;
}

static bool
is_null_or_absent(const cJSON *j)
{
        return !j || cJSON_IsNull(j);
}

/* Copies an optional string field into dst; -EINVAL when it is not a string or too long. */
static int
copy_string(const cJSON *j, char *dst, size_t size, bool required)
{
        size_t n;

        if (is_null_or_absent(j)) {
                dst[0] = 0;
                return required ? -EINVAL : 0;
        }
        if (!cJSON_IsString(j))
                return -EINVAL;
        n = strlen(j->valuestring);
        if (n >= size || (required && n == 0))
                return -EINVAL;
        memcpy(dst, j->valuestring, n + 1);
        return 0;
}

/* A pod UID as we accept it: printable ASCII without space, '"' or '\\' (the API server's
 * are UUIDs), so it can be logged and echoed as it is. */
static bool
is_uid(const char *s)
{
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s <= ' ' || *s >= 0x7f || *s == '"' || *s == '\\')
                        return false;
        return true;
}

/* The pod names every verb reads: name a DNS-1123 subdomain, namespace a DNS-1123 label
 * (what the API server allows), uid printable; each may be absent (""), as in tests and
 * older captures, but what is there must be valid. */
static int
check_pod_names(const char *name, const char *namespace, const char *uid, const char **ret_why)
{
        if (name[0] && !str_is_dns_subdomain(name))
                return set_why(ret_why, "the Pod name is not a valid Kubernetes name (DNS-1123 "
                                        "subdomain: lowercase letters, digits, '-', '.', at most "
                                        "253)"),
                       -EINVAL;
        if (namespace[0] && !str_is_dns_label(namespace))
                return set_why(ret_why, "the Pod namespace is not a valid Kubernetes namespace "
                                        "(DNS-1123 label: lowercase letters, digits, '-', at most "
                                        "63)"),
                       -EINVAL;
        if (uid[0] && !is_uid(uid))
                return set_why(ret_why, "the Pod UID is not printable ASCII without spaces or "
                                        "quotes"),
                       -EINVAL;
        return 0;
}

int
ext__quantity_text(const char *s, size_t n, unsigned *ret)
{
        int64_t v;

        if (n == 0 || n > EXT_MAX_QUANTITY_LEN)
                return -EINVAL;
        if (str_to_quantity_count(s, n, TOPO_MAX_GPUS * 64, &v) < 0)
                return -EINVAL;
        *ret = (unsigned)v;
        return 0;
}

int
ext__quantity_number(double d, unsigned *ret)
{
        if (!(d >= 0 && d <= TOPO_MAX_GPUS * 64) || d != (double)(int64_t)d)
                return -EINVAL;
        *ret = (unsigned)d;
        return 0;
}

/* A resource quantity that must be a whole count, by Kubernetes' quantity grammar
 * (str_to_quantity_count, the rule kube-client's decoder uses too: "2", "2000m", "1k");
 * a JSON integer is tolerated. */
static int
quantity_count(const cJSON *j, unsigned *ret)
{
        if (cJSON_IsString(j))
                return ext__quantity_text(j->valuestring, strlen(j->valuestring), ret);
        if (cJSON_IsNumber(j))
                return ext__quantity_number(j->valuedouble, ret);
        return -EINVAL;
}

/* Sum of the configured resource names in a resource list (limits, allocatable). */
static int
resource_sum(const struct ext_config *cfg, const cJSON *list, unsigned *ret)
{
        unsigned sum = 0;

        if (is_null_or_absent(list)) {
                *ret = 0;
                return 0;
        }
        if (!cJSON_IsObject(list))
                return -EINVAL;
        for (unsigned i = 0; i < cfg->n_resources; i++) {
                const cJSON *q = get(list, cfg->resources[i]);
                unsigned v;

                if (!q)
                        continue;
                if (quantity_count(q, &v) < 0)
                        return -EINVAL;
                sum += v;
        }
        *ret = sum;
        return 0;
}

static int
decode_containers(const struct ext_config *cfg, const cJSON *arr, bool init,
                  struct ext_request *req, unsigned *ret_sum, unsigned *ret_max,
                  const char **ret_why)
{
        const cJSON *c;

        *ret_sum = *ret_max = 0;
        if (is_null_or_absent(arr))
                return 0;
        if (!cJSON_IsArray(arr))
                return set_why(ret_why, init ? "Pod.spec.initContainers is not an array"
                                             : "Pod.spec.containers is not an array"),
                       -EINVAL;
        cJSON_ArrayForEach(c, arr) {
                struct ext_container *ct;
                unsigned count;

                if (!cJSON_IsObject(c))
                        return set_why(ret_why, "a Pod container is not an object"), -EINVAL;
                if (resource_sum(cfg, get(get(c, "resources"), "limits"), &count) < 0)
                        return set_why(ret_why, "a container's GPU limit is not a whole number"),
                               -EINVAL;
                if (count == 0)
                        continue;
                if (req->n_containers >= EXT_MAX_CONTAINERS)
                        return set_why(ret_why, "the Pod has too many GPU containers"), -E2BIG;
                ct = &req->containers[req->n_containers];
                if (copy_string(get(c, "name"), ct->name, sizeof(ct->name), false) < 0)
                        return set_why(ret_why, "a container name is not a valid string"),
                               -EINVAL;
                ct->count = count;
                ct->init = init;
                req->n_containers++;
                *ret_sum += count;
                *ret_max = MAX(*ret_max, count);
        }
        return 0;
}

/* Where a pod's group comes from, after Kubernetes' own spec.schedulingGroup and before
 * nothing: the first source whose key the pod carries wins.  Each names the group by a
 * label or annotation (plus, for LeaderWorkerSet, the replica's group index) and, where the
 * source puts it on the pod, the group's size.  topofit.io/group-size overrides the size
 * for every source.  docs/placement.md lists them with what each says about the size. */
static const struct group_source {
        const char *source;     /* the id's prefix */
        const char *key;        /* names the group */
        bool annotation;        /* key is an annotation (else a label) */
        const char *key2;       /* a label appended to the id, NULL: none */
        const char *size;       /* annotation holding the group's pod count, NULL: unknown */
} group_sources[] = {
        { "topofit", EXT_GROUP_ANNOTATION, false, NULL, NULL },
        { "topofit", EXT_GROUP_ANNOTATION, true, NULL, NULL },
        { "lws", "leaderworkerset.sigs.k8s.io/name", false, "leaderworkerset.sigs.k8s.io/group-index",
          "leaderworkerset.sigs.k8s.io/size" },
        { "kueue", "kueue.x-k8s.io/pod-group-name", false, NULL, "kueue.x-k8s.io/pod-group-total-count" },
        { "coscheduling", "scheduling.x-k8s.io/pod-group", false, NULL, NULL },
        { "coscheduling", "pod-group.scheduling.sigs.k8s.io", false, NULL, NULL },
        { "volcano", "scheduling.k8s.io/group-name", true, NULL, NULL },
        { "jobset", "jobset.sigs.k8s.io/jobset-name", false, NULL, NULL },
        { "kubeflow", "training.kubeflow.org/job-name", false, NULL, NULL },
};

static const char *
string_at(const cJSON *obj, const char *key)
{
        const cJSON *j = get(obj, key);

        return cJSON_IsString(j) && j->valuestring[0] ? j->valuestring : NULL;
}

/* A group size from a label/annotation value: 1..PLACE_MAX_GROUP_PODS, else 0. */
static unsigned
group_size(const char *v)
{
        int x;

        if (!v || str_to_int(v, strlen(v), 1, PLACE_MAX_GROUP_PODS, &x) < 0)
                return 0;
        return (unsigned)x;
}

void
ext_pod_group_id(const void *pod, ext_pod_key_fn get_key, const char *ns,
                 const char *scheduling_group, char id[PLACE_NAME_MAX],
                 const char **ret_size_key)
{
        id[0] = 0;
        if (ret_size_key)
                *ret_size_key = NULL;
        if (scheduling_group && scheduling_group[0]) {
                ext_group_id(id, "podgroup", ns, scheduling_group, NULL);
                return;
        }
        for (size_t k = 0; k < ELEMENTSOF(group_sources); k++) {
                const struct group_source *src = &group_sources[k];
                const char *name = get_key(pod, src->key, src->annotation);

                if (!name || !name[0])
                        continue;
                ext_group_id(id, src->source, ns, name,
                             src->key2 ? get_key(pod, src->key2, false) : NULL);
                if (ret_size_key)
                        *ret_size_key = src->size;
                return;
        }
}

size_t
ext_group_keys(bool annotation, const char **keys, size_t max)
{
        size_t n = 0;

        for (size_t k = 0; k < ELEMENTSOF(group_sources); k++) {
                const struct group_source *src = &group_sources[k];
                const char *const mine[] = { src->annotation == annotation ? src->key : NULL,
                                             annotation ? NULL : src->key2 };

                for (size_t j = 0; j < ELEMENTSOF(mine); j++) {
                        bool seen = false;

                        for (size_t i = 0; mine[j] && i < MIN(n, max); i++)
                                seen = seen || strcmp(keys[i], mine[j]) == 0;
                        if (!mine[j] || seen)
                                continue;
                        if (n < max)
                                keys[n] = mine[j];
                        n++;
                }
        }
        return n;
}

/* ext_pod_key_fn over a pod's metadata in JSON: a non-empty string value, else NULL. */
static const char *
json_key(const void *meta, const char *key, bool annotation)
{
        return string_at(get(meta, annotation ? "annotations" : "labels"), key);
}

/* The pod's group id from its metadata and spec (ext_pod_group_id). */
static void
group_id_of(const cJSON *meta, const cJSON *spec, const char *ns, char id[PLACE_NAME_MAX],
            const char **ret_size_key)
{
        ext_pod_group_id(meta, json_key, ns, string_at(get(spec, "schedulingGroup"),
                                                       "podGroupName"),
                         id, ret_size_key);
}

/* The pod's group: spec.schedulingGroup.podGroupName, else the first of group_sources.
 * -EINVAL only for our own keys' bad values (a foreign size that does not parse counts as
 * unknown). */
static int
decode_group(const cJSON *meta, const cJSON *spec, const char *ns, struct place_group_request *g,
             const char **ret_why)
{
        const cJSON *labels = get(meta, "labels"), *annotations = get(meta, "annotations");
        const char *own_size = string_at(annotations, EXT_GROUP_SIZE_ANNOTATION);
        const char *size_key;

        if (!own_size)
                own_size = string_at(labels, EXT_GROUP_SIZE_ANNOTATION);
        if (!is_null_or_absent(labels) && !cJSON_IsObject(labels))
                return set_why(ret_why, "Pod.metadata.labels is not an object"), -EINVAL;
        if (own_size && group_size(own_size) == 0)
                return set_why(ret_why, "the topofit.io/group-size value is not a whole number "
                                        "from 1 to 1024"),
                       -EINVAL;
        group_id_of(meta, spec, ns, g->id, &size_key);
        if (size_key)
                g->size = group_size(string_at(annotations, size_key));
        if (g->id[0] && own_size)
                g->size = group_size(own_size);
        if (g->id[0])
                g->mode = PLACE_DOMAIN_PREFERRED;
        return 0;
}

/* topofit.io/placement: a comma-separated list of at most one in-node placement and at most
 * one of domain-required / domain-preferred. */
static int
decode_placement(const char *v, struct ext_request *req, enum place_domain_mode *ret_mode,
                 const char **ret_why)
{
        static const char *const why = "the topofit.io/placement annotation is not a list of at "
                                       "most one of:" EXT_PLACEMENT_NAMES " and at most one of: "
                                       "domain-required domain-preferred";
        bool have_node = false, have_domain = false;
        const char *p = v;

        *ret_mode = PLACE_DOMAIN_OFF;
        for (;;) {
                const char *end = strchr(p, ',');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                char tok[32];
                int r;

                if (len == 0 || len >= sizeof(tok))
                        return set_why(ret_why, why), -EINVAL;
                memcpy(tok, p, len);
                tok[len] = 0;
                if (strcmp(tok, "domain-required") == 0 || strcmp(tok, "domain-preferred") == 0) {
                        if (have_domain)
                                return set_why(ret_why, why), -EINVAL;
                        have_domain = true;
                        *ret_mode = tok[7] == 'r' ? PLACE_DOMAIN_REQUIRED : PLACE_DOMAIN_PREFERRED;
                } else {
                        r = ext_placement_from_string(tok);
                        if (r < 0 || have_node)
                                return set_why(ret_why, why), -EINVAL;
                        have_node = true;
                        req->placement = (enum ext_placement)r;
                }
                if (!end)
                        return 0;
                p = end + 1;
        }
}

static int
request_from_pod(const cJSON *pod, const struct ext_config *cfg, struct ext_request *ret,
                 const char **ret_why)
{
        struct ext_request req = { 0 };
        const cJSON *meta, *spec, *placement;
        unsigned sum, max_app, sum_init, max_init;
        enum place_domain_mode mode = PLACE_DOMAIN_OFF;
        int r;

        if (!cJSON_IsObject(pod))
                return set_why(ret_why, "Pod is missing or not an object"), -EINVAL;
        meta = get(pod, "metadata");
        if (!cJSON_IsObject(meta))
                return set_why(ret_why, "Pod.metadata is missing or not an object"), -EINVAL;
        if (copy_string(get(meta, "uid"), req.uid, sizeof(req.uid), false) < 0 ||
            copy_string(get(meta, "name"), req.name, sizeof(req.name), false) < 0 ||
            copy_string(get(meta, "namespace"), req.namespace, sizeof(req.namespace), false) < 0)
                return set_why(ret_why, "Pod.metadata name, namespace or uid is not a valid "
                                        "string"),
                       -EINVAL;
        r = check_pod_names(req.name, req.namespace, req.uid, ret_why);
        if (r < 0)
                return r;

        placement = get(get(meta, "annotations"), EXT_PLACEMENT_ANNOTATION);
        if (!is_null_or_absent(get(meta, "annotations")) && !cJSON_IsObject(get(meta, "annotations")))
                return set_why(ret_why, "Pod.metadata.annotations is not an object"), -EINVAL;
        if (placement) {
                if (!cJSON_IsString(placement))
                        return set_why(ret_why, "the topofit.io/placement annotation is not a "
                                                "string"),
                               -EINVAL;
                r = decode_placement(placement->valuestring, &req, &mode, ret_why);
                if (r < 0)
                        return r;
        }
        req.require = ext_placement_require(req.placement);

        spec = get(pod, "spec");
        if (!is_null_or_absent(spec) && !cJSON_IsObject(spec))
                return set_why(ret_why, "Pod.spec is not an object"), -EINVAL;
        r = decode_group(meta, spec, req.namespace, &req.group, ret_why);
        if (r < 0)
                return r;
        if (req.group.id[0] && mode != PLACE_DOMAIN_OFF)
                req.group.mode = mode;
        r = decode_containers(cfg, get(spec, "containers"), false, &req, &sum, &max_app, ret_why);
        if (r < 0)
                return r;
        r = decode_containers(cfg, get(spec, "initContainers"), true, &req, &sum_init, &max_init,
                              ret_why);
        if (r < 0)
                return r;
        req.count = MAX(sum, max_init);
        if (req.count > TOPO_MAX_GPUS)
                return set_why(ret_why, "the Pod requests more GPUs than any node can hold"),
                       -EINVAL;
        req.group.count = req.count;
        req.group.require = req.require;
        *ret = req;
        return 0;
}

int
ext_request_decode(const char *json, size_t len, const struct ext_config *cfg,
                   struct ext_request *ret, const char **ret_why)
{
        struct ext_request req;
        struct json_doc *jd = NULL;
        cJSON *doc = NULL;
        int r;

        tl_repeated = false;
        r = parse_doc(json, len, &jd, ret_why);
        doc = jd ? jd->root : NULL;
        if (r < 0)
                return r;
        r = refuse_repeats(request_from_pod(doc, cfg, &req, ret_why), ret_why);
        json_doc_free(jd);
        if (r >= 0)
                *ret = req;
        return r;
}

/* Whether a Node is closed to new groups (ext_node.closed): spec.unschedulable, or a Ready
 * condition whose status is not "True".  A file without conditions (written by hand) counts
 * as ready; the live cache, which sees the API server's objects, counts that as not Ready. */
static bool
node_closed(const cJSON *node)
{
        const cJSON *cond;

        if (cJSON_IsTrue(get(get(node, "spec"), "unschedulable")))
                return true;
        cJSON_ArrayForEach(cond, get(get(node, "status"), "conditions")) {
                const char *type = string_at(cond, "type"), *st = string_at(cond, "status");

                if (type && strcmp(type, "Ready") == 0)
                        return !st || strcmp(st, "True") != 0;
        }
        return false;
}

/* One Node object: its name, topology annotation and GPU capacity. */
static int
node_fields(const cJSON *node, const struct ext_config *cfg, const char **ret_name,
            const char **ret_topo, size_t *ret_topo_len, unsigned *ret_gpus, const char **ret_why)
{
        const cJSON *meta = get(node, "metadata"), *name, *annotations, *topo, *status, *alloc;
        unsigned gpus = 0;

        if (!cJSON_IsObject(node) || !cJSON_IsObject(meta))
                return set_why(ret_why, "a Node is not an object with metadata"), -EINVAL;
        name = get(meta, "name");
        if (!cJSON_IsString(name) || name->valuestring[0] == 0 ||
            strlen(name->valuestring) >= EXT_NAME_MAX)
                return set_why(ret_why, "a Node's metadata.name is not a valid string"), -EINVAL;
        annotations = get(meta, "annotations");
        if (!is_null_or_absent(annotations) && !cJSON_IsObject(annotations))
                return set_why(ret_why, "a Node's metadata.annotations is not an object"),
                       -EINVAL;
        topo = get(annotations, TOPO_ANNOTATION_KEY);
        if (topo && !cJSON_IsString(topo))
                return set_why(ret_why, "a Node's topofit.io/topology annotation is not a string"),
                       -EINVAL;
        status = get(node, "status");
        alloc = get(status, "allocatable");
        if (is_null_or_absent(alloc))
                alloc = get(status, "capacity");
        if (resource_sum(cfg, alloc, &gpus) < 0)
                return set_why(ret_why, "a Node's GPU allocatable is not a whole number"), -EINVAL;
        *ret_name = name->valuestring;
        *ret_topo = topo ? topo->valuestring : NULL;
        *ret_topo_len = topo ? strlen(topo->valuestring) : 0;
        *ret_gpus = gpus;
        return 0;
}

/* --- the tree decoder of ExtenderArgs: the oracle of ext-args.c (ext-core-private.h) ----- */

/* Which list the request carries (NodeNames or Nodes.items) and how long it is. */
static int
tree_node_list(const cJSON *doc, struct ext__args_tree *a, const cJSON **ret_list,
               size_t *ret_n, const char **ret_why)
{
        const cJSON *names = get(doc, "NodeNames"), *nodes = get(doc, "Nodes"), *list;

        if (!is_null_or_absent(names)) {
                if (!cJSON_IsArray(names))
                        return why_err(ret_why, "NodeNames is not an array", -EINVAL);
                a->node_names = true;
                list = names;
        } else if (!is_null_or_absent(nodes)) {
                list = get(nodes, "items");
                if (!cJSON_IsArray(list))
                        return why_err(ret_why, "Nodes is not a NodeList with an items array",
                                       -EINVAL);
                a->items = list;
        } else
                return why_err(ret_why, "ExtenderArgs has neither NodeNames nor Nodes", -EINVAL);
        *ret_n = (size_t)cJSON_GetArraySize(list);
        if (*ret_n > EXT_MAX_NODES)
                return why_err(ret_why, "the request names more nodes than the limit", -E2BIG);
        *ret_list = list;
        return 0;
}

/* The per-node arrays, n entries each (at least one). */
static int
tree_alloc(struct ext__args_tree *a, size_t n)
{
        a->names = calloc(MAX(n, (size_t)1), sizeof(*a->names));
        a->topo = calloc(MAX(n, (size_t)1), sizeof(*a->topo));
        a->topo_len = calloc(MAX(n, (size_t)1), sizeof(*a->topo_len));
        a->gpu_capacity = calloc(MAX(n, (size_t)1), sizeof(*a->gpu_capacity));
        return a->names && a->topo && a->topo_len && a->gpu_capacity ? 0 : -ENOMEM;
}

/* The nodes of the list, by name (NodeNames) or as Node objects (Nodes). */
static int
tree_nodes(const cJSON *list, const struct ext_config *cfg, struct ext__args_tree *a,
           const char **ret_why)
{
        const cJSON *e;
        int r;

        cJSON_ArrayForEach(e, list) {
                const char *name;

                if (a->node_names) {
                        if (!cJSON_IsString(e) || e->valuestring[0] == 0 ||
                            strlen(e->valuestring) >= EXT_NAME_MAX)
                                return why_err(ret_why, "a NodeNames entry is not a valid node name",
                                               -EINVAL);
                        a->names[a->n++] = e->valuestring;
                        continue;
                }
                r = node_fields(e, cfg, &name, &a->topo[a->n], &a->topo_len[a->n],
                                &a->gpu_capacity[a->n], ret_why);
                if (r < 0)
                        return r;
                a->names[a->n++] = name;
        }
        return 0;
}

void
ext__args_tree_release(struct ext__args_tree *a)
{
        if (!a)
                return;
        free(a->names);
        free(a->topo);
        free(a->topo_len);
        free(a->gpu_capacity);
        json_doc_free(a->doc);
        *a = (struct ext__args_tree){ 0 };
}

int
ext__args_decode_tree(const char *json, size_t len, const struct ext_config *cfg,
                      struct ext__args_tree *ret, const char **ret_why)
{
        struct ext__args_tree a = { 0 };
        const cJSON *list = NULL;
        struct json_doc *jd = NULL;
        cJSON *doc;
        size_t n = 0;
        int r;

        tl_repeated = false;
        r = parse_doc(json, len, &jd, ret_why);
        if (r < 0)
                return r;
        a.doc = jd;
        doc = jd->root;
        if (!cJSON_IsObject(doc))
                r = why_err(ret_why, "ExtenderArgs is not a JSON object", -EINVAL);
        if (r >= 0)
                r = request_from_pod(get(doc, "Pod"), cfg, &a.req, ret_why);
        if (r >= 0)
                r = tree_node_list(doc, &a, &list, &n, ret_why);
        if (r >= 0)
                r = tree_alloc(&a, n);
        if (r >= 0)
                r = tree_nodes(list, cfg, &a, ret_why);
        r = refuse_repeats(r, ret_why);
        if (r < 0) {
                ext__args_tree_release(&a);
                return r;
        }
        *ret = a;
        return 0;
}

/* The byte-wise test of plain(). */
static bool
plain_bytes(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x80 || s[i] == '"' ||
                    s[i] == '\\')
                        return false;
        return true;
}

/* true when s is printable ASCII that needs no escaping in a JSON string.  Eight bytes a
 * step: every node name of every answer passes here. */
static bool
plain(const char *s, size_t n)
{
        const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
        size_t i = 0;

        for (; i + 8 <= n; i += 8) {
                uint64_t w, q, b;

                memcpy(&w, s + i, 8);
                q = w ^ (ones * '"');
                b = w ^ (ones * '\\');
                /* A byte below 0x20, a zero byte of q or of b, or a byte with its top bit
                 * set: never missed; a borrow can flag a byte above a real hit, which the
                 * byte-wise test then settles. */
                if ((((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b) | w) & high &&
                    !plain_bytes(s + i, 8))
                        return false;
        }
        /* The tail: the last 8 bytes, overlapping the words before, when there are 8. */
        return i == n || n < 8 ? plain_bytes(s + i, n - i) : plain(s + n - 8, 8);
}

/* A JSON string literal: a plain ASCII string (node names almost always are one) appended
 * whole, anything else through buf_put_json_string(), which escapes what JSON requires and
 * turns bytes that are not UTF-8 into U+FFFD. */
static int
put_string(struct buf *out, const char *s, size_t n)
{
        int r;

        if (!plain(s, n)) {
                char text[EXT_NAME_MAX]; /* a name (not NUL-terminated) as a C string */

                if (n >= sizeof(text))
                        return -EINVAL;
                memcpy(text, s, n);
                text[n] = 0;
                return buf_put_json_string(out, text);
        }
        r = buf_append(out, "\"", 1);
        if (r >= 0)
                r = buf_append(out, s, n);
        return r < 0 ? r : buf_append(out, "\"", 1);
}

/* --- answers with one entry per node: staged in a small stack buffer and appended a few
 * KiB at a time, since a bounded-buffer append per piece (three or four per node) was most
 * of the cost of encoding a 5,000-node answer. */

#define EXT_STAGE_BYTES 8192

struct stage {
        struct buf *out;
        int r; /* the first append's error; later puts do nothing */
        size_t n;
        char d[EXT_STAGE_BYTES];
};

/* A stage writing to out.  Its 8 KiB buffer is not cleared: only bytes put are read. */
static inline void
stage_init(struct stage *st, struct buf *out)
{
        st->out = out;
        st->r = 0;
        st->n = 0;
}

static void
stage_flush(struct stage *st)
{
        if (st->n > 0 && st->r >= 0)
                st->r = buf_append(st->out, st->d, st->n);
        st->n = 0;
}

/* Copies a short string (a node name) with fixed-size moves and returns its end.  For a
 * variable length GCC inlines `rep movsq`, which costs tens of cycles to start on Intel
 * cores (not on AMD's): on a Xeon the prioritize answer's per-name copies took half of a
 * 5,000-name request (docs/performance.md, "A second machine"). */
static inline char *
copy_short(char *restrict p, const char *restrict s, size_t len)
{
        if (len >= 16) {
                size_t k = 0;

                for (; k + 16 <= len; k += 16)
                        memcpy(p + k, s + k, 16);
                if (k < len)
                        memcpy(p + len - 16, s + len - 16, 16);
        } else if (len >= 8) {
                memcpy(p, s, 8);
                memcpy(p + len - 8, s + len - 8, 8);
        } else if (len >= 4) {
                memcpy(p, s, 4);
                memcpy(p + len - 4, s + len - 4, 4);
        } else if (len >= 2) {
                memcpy(p, s, 2);
                memcpy(p + len - 2, s + len - 2, 2);
        } else if (len == 1) {
                *p = *s;
        }
        return p + len;
}

/* Room for n more bytes in the stage (n <= EXT_STAGE_BYTES), flushing it when needed. */
static char *
stage_room(struct stage *st, size_t n)
{
        if (st->n + n > sizeof(st->d))
                stage_flush(st);
        return st->d + st->n;
}

static void
stage_put(struct stage *st, const char *s, size_t n)
{
        if (n > sizeof(st->d)) {
                stage_flush(st);
                if (st->r >= 0)
                        st->r = buf_append(st->out, s, n);
                return;
        }
        memcpy(stage_room(st, n), s, n);
        st->n += n;
}

/* About the bytes an answer takes to name every node of a, with per more bytes each: an
 * encoder reserves them once (growing by doubling copied the answer five times over). */
static size_t
names_bytes(const struct ext_args *a, size_t per)
{
        size_t n = 0;

        for (size_t i = 0; i < a->n; i++)
                n += ext_args_name_len(a, i) + per;
        return n;
}

/* A JSON string literal, as put_string() writes it. */
static void
stage_put_string(struct stage *st, const char *s, size_t n, bool known_plain)
{
        if (n + 2 <= sizeof(st->d) && (known_plain || plain(s, n))) {
                char *p = stage_room(st, n + 2);

                *p++ = '"';
                p = copy_short(p, s, n);
                *p = '"';
                st->n += n + 2;
                return;
        }
        stage_flush(st);
        if (st->r >= 0)
                st->r = put_string(st->out, s, n);
}

/* {"node":"reason",...} of the failed nodes at[0..n); with only_unresolvable, of those that
 * no preemption can fix.  FailedNodes carries every failed node, unresolvable ones too:
 * kube-scheduler 1.20 has no FailedAndUnresolvableNodes field and would drop them without a
 * reason, while 1.21+ lets FailedAndUnresolvableNodes take precedence for a node in both. */
static int
failed_map(const struct ext_args *a, const struct ext_verdict *vs, const uint32_t *rep,
           const size_t *at, size_t n, bool only_unresolvable, struct buf *out)
{
        bool first = true;
        int r = buf_puts(out, "{");

        for (size_t k = 0; r >= 0 && k < n; k++) {
                size_t i = at[k];
                const struct ext_verdict *v = ext_verdict_at(vs, rep, i);

                if (only_unresolvable && !ext_verdict_unresolvable(v))
                        continue;
                if (!first)
                        r = buf_puts(out, ",");
                first = false;
                if (r >= 0)
                        r = put_string(out, a->names[i], ext_args_name_len(a, i));
                if (r >= 0)
                        r = buf_puts(out, ":");
                if (r >= 0)
                        r = buf_put_json_string(out, v->why ? v->why : "does not fit");
        }
        return r < 0 ? r : buf_puts(out, "}");
}

/* The indices of a's failed nodes, in order, for both maps: one pass over the verdicts
 * instead of one per map.  *ret NULL when none failed. */
static int
failed_nodes(const struct ext_args *a, const struct ext_verdict *vs, const uint32_t *rep,
             size_t **ret, size_t *ret_n)
{
        size_t n = 0, cap = 0;
        size_t *at = NULL;

        for (size_t i = 0; i < a->n; i++) {
                if (ext_verdict_at(vs, rep, i)->r == 0)
                        continue;
                if (n == cap) {
                        size_t *m;

                        cap = cap ? 2 * cap : 16;
                        m = realloc(at, cap * sizeof(*at));
                        if (!m) {
                                free(at);
                                return -ENOMEM;
                        }
                        at = m;
                }
                at[n++] = i;
        }
        *ret = at;
        *ret_n = n;
        return 0;
}

int
ext_filter_result_encode(const struct ext_args *a, const struct ext_verdict *v,
                         const uint32_t *rep, const char *error, struct buf *out)
{
        return ext_filter_result_encode_pass(a, v, rep, NULL, 0, error, out);
}

int
ext_filter_result_encode_pass(const struct ext_args *a, const struct ext_verdict *v,
                              const uint32_t *rep, const uint32_t *pass, size_t n_pass,
                              const char *error, struct buf *out)
{
#define FITS(i) (keep ? keep[i] : ext_verdict_at(v, rep, (i))->r == 0)
        CLEANUP(freep) size_t *failed = NULL;
        CLEANUP(freep) bool *keep = NULL; /* with pass: the nodes listed */
        size_t n_failed = 0;
        bool first = true;
        int r;

        if (pass) {
                keep = calloc(MAX(a->n, (size_t)1), sizeof(*keep));
                if (!keep)
                        return -ENOMEM;
                for (size_t k = 0; k < n_pass; k++)
                        if (pass[k] < a->n)
                                keep[pass[k]] = true;
        }

        if (a->node_names) {
                bool echo_run = a->names_in_body && a->name_plain;
                struct stage st;

                stage_init(&st, out);
                (void)buf_reserve(out, names_bytes(a, 3) + 256); /* an error shows below */
                static const char head[] = "{\"Nodes\":null,\"NodeNames\":[";

                stage_put(&st, head, sizeof(head) - 1);
                for (size_t i = 0; st.r >= 0 && i < a->n; i++) {
                        size_t j = i;

                        if (!FITS(i))
                                continue;
                        if (!first)
                                stage_put(&st, ",", 1);
                        first = false;
                        /* A run of fitting plain names, as the body's NodeNames has them
                         * (commas and blanks between included): one copy for the run. */
                        while (echo_run && a->name_plain[j] && j + 1 < a->n && FITS(j + 1) &&
                               a->name_plain[j + 1])
                                j++;
                        if (j > i) {
                                const char *from = a->names[i] - 1;
                                const char *to = a->names[j] + ext_args_name_len(a, j) + 1;

                                stage_put(&st, from, (size_t)(to - from));
                                i = j;
                                continue;
                        }
                        stage_put_string(&st, a->names[i], ext_args_name_len(a, i),
                                 a->name_plain && a->name_plain[i]);
                }
                stage_put(&st, "]", 1);
                stage_flush(&st);
                r = st.r;
        } else {
                /* Each kept Node echoed byte for byte from the body (its span). */
                r = buf_puts(out, "{\"Nodes\":{\"metadata\":{},\"items\":[");
                for (size_t i = 0; r >= 0 && i < a->n; i++) {
                        if (!FITS(i))
                                continue;
                        if (!first)
                                r = buf_puts(out, ",");
                        first = false;
                        if (r >= 0)
                                r = buf_append(out, a->nodes[i].span, a->nodes[i].span_len);
                }
                if (r >= 0)
                        r = buf_puts(out, "]},\"NodeNames\":null");
        }
        if (r >= 0)
                r = failed_nodes(a, v, rep, &failed, &n_failed);
        if (r >= 0)
                r = buf_puts(out, ",\"FailedNodes\":");
        if (r >= 0)
                r = failed_map(a, v, rep, failed, n_failed, false, out);
        if (r >= 0)
                r = buf_puts(out, ",\"FailedAndUnresolvableNodes\":");
        if (r >= 0)
                r = failed_map(a, v, rep, failed, n_failed, true, out);
        if (r >= 0)
                r = buf_puts(out, ",\"Error\":");
        if (r >= 0)
                r = buf_put_json_string(out, error ? error : "");
        if (r >= 0)
                r = buf_puts(out, "}");
        return r;
#undef FITS
}

int
ext_priorities_encode(const struct ext_args *a, const struct ext_verdict *vs, const uint32_t *rep,
                      struct buf *out)
{
        /* {"Host":"name","Score":N}: a plain name's entry is put in one piece, from the
         * separator before it to its brace; another's name goes through stage_put_string.
         * The separator is the array's bracket for the first entry, a comma after: written
         * as one fixed-size copy either way (a copy of a length known only at run time was
         * a fifth of this encoder's instructions), its first byte set after. */
        static const char open[] = ",{\"Host\":\"", mid[] = "\",\"Score\":";
        struct stage st;

        stage_init(&st, out);
        (void)buf_reserve(out, names_bytes(a, sizeof(open) + sizeof(mid) + 4) + 16);
        if (a->n == 0)
                stage_put(&st, "[", 1);
        for (size_t i = 0; st.r >= 0 && i < a->n; i++) {
                const struct ext_verdict *v = ext_verdict_at(vs, rep, i);
                unsigned score = v->r == 0 ? (unsigned)MAX(v->priority, 0) : 0;
                size_t len = ext_args_name_len(a, i);
                char *p;

                if (a->name_plain && a->name_plain[i] &&
                    len + sizeof(open) + sizeof(mid) + STR_UINT_DIGITS + 1 <= sizeof(st.d)) {
                        p = stage_room(&st, len + sizeof(open) + sizeof(mid) + STR_UINT_DIGITS + 1);
                        p = mempcpy(p, open, sizeof(open) - 1);
                        p[-(ptrdiff_t)sizeof(open) + 1] = i == 0 ? '[' : ',';
                        p = copy_short(p, a->names[i], len);
                        p = mempcpy(p, mid, sizeof(mid) - 1);
                } else {
                        p = stage_room(&st, sizeof(open) - 2);
                        memcpy(p, open, sizeof(open) - 2); /* not the quote */
                        *p = i == 0 ? '[' : ',';
                        st.n += sizeof(open) - 2;
                        stage_put_string(&st, a->names[i], len, a->name_plain && a->name_plain[i]);
                        p = stage_room(&st, sizeof(mid) - 2 + STR_UINT_DIGITS + 1);
                        p = mempcpy(p, mid + 1, sizeof(mid) - 2); /* the quote was the string's */
                }
                /* The score and the closing brace, without printf. */
                if (score < 10) {
                        *p++ = (char)('0' + score);
                } else if (score < 100) { /* kube-scheduler's scores are 0-10 */
                        *p++ = (char)('0' + score / 10);
                        *p++ = (char)('0' + score % 10);
                } else
                        p += str_format_uint(p, score);
                *p++ = '}';
                st.n = (size_t)(p - st.d);
        }
        stage_put(&st, "]", 1);
        stage_flush(&st);
        return st.r;
}

int
ext_binding_decode(const char *json, size_t len, struct ext_binding *ret, const char **ret_why)
{
        struct ext_binding b = { 0 };
        struct json_doc *jd = NULL;
        cJSON *doc = NULL;
        int r;

        tl_repeated = false;
        r = parse_doc(json, len, &jd, ret_why);
        doc = jd ? jd->root : NULL;
        if (r < 0)
                return r;
        if (!cJSON_IsObject(doc))
                r = why_err(ret_why, "ExtenderBindingArgs is not a JSON object", -EINVAL);
        else if (copy_string(get(doc, "PodName"), b.pod_name, sizeof(b.pod_name), true) < 0)
                r = why_err(ret_why, "PodName is missing or not a valid string", -EINVAL);
        else if (copy_string(get(doc, "PodNamespace"), b.pod_namespace, sizeof(b.pod_namespace),
                             true) < 0)
                r = why_err(ret_why, "PodNamespace is missing or not a valid string", -EINVAL);
        else if (copy_string(get(doc, "PodUID"), b.pod_uid, sizeof(b.pod_uid), true) < 0)
                r = why_err(ret_why, "PodUID is missing or not a valid string", -EINVAL);
        else if (copy_string(get(doc, "Node"), b.node, sizeof(b.node), true) < 0)
                r = why_err(ret_why, "Node is missing or not a valid string", -EINVAL);
        else if (!str_is_dns_subdomain(b.node))
                r = why_err(ret_why, "Node is not a valid Kubernetes node name (DNS-1123 "
                                     "subdomain)", -EINVAL);
        else
                r = check_pod_names(b.pod_name, b.pod_namespace, b.pod_uid, ret_why);
        json_doc_free(jd);
        r = refuse_repeats(r, ret_why);
        if (r < 0)
                return r;
        *ret = b;
        return 0;
}

int
ext_binding_result_encode(const char *error, struct buf *out)
{
        int r = buf_puts(out, "{\"Error\":");

        if (r >= 0)
                r = buf_put_json_string(out, error ? error : "");
        return r < 0 ? r : buf_puts(out, "}");
}

void
ext_preempt_args_release(struct ext_preempt_args *a)
{
        if (!a)
                return;
        for (size_t i = 0; a->nodes && i < a->n; i++) {
                free(a->nodes[i].node);
                for (size_t j = 0; j < a->nodes[i].n_victims; j++)
                        free(a->nodes[i].victims[j]);
                free(a->nodes[i].victims);
        }
        free(a->nodes);
        *a = (struct ext_preempt_args){ 0 };
}

/* Victims{Pods: [Pod]} or MetaVictims{Pods: [{UID}]} into n->victims. */
static int
decode_victims(const cJSON *victims, bool meta, struct ext_preempt_node *n, const char **ret_why)
{
        const cJSON *pods = get(victims, "Pods"), *pdb = get(victims, "NumPDBViolations"), *p;

        if (!cJSON_IsObject(victims))
                return set_why(ret_why, "a victims entry is not an object"), -EINVAL;
        if (!is_null_or_absent(pdb)) {
                /* json_get_int64 checks the range before converting: a cast of 1e300 to
                 * int64_t is undefined behaviour (found by fuzz-ext-codec). */
                int64_t v;
                if (json_get_int64(pdb, INT64_MIN, INT64_MAX, &v) < 0)
                        return set_why(ret_why, "NumPDBViolations is not an integer"), -EINVAL;
                n->pdb_violations = v;
        }
        if (is_null_or_absent(pods))
                return 0;
        if (!cJSON_IsArray(pods))
                return set_why(ret_why, "victims' Pods is not an array"), -EINVAL;
        if ((size_t)cJSON_GetArraySize(pods) > EXT_MAX_VICTIMS)
                return set_why(ret_why, "a node has more victims than the limit"), -E2BIG;
        n->victims = calloc(MAX((size_t)cJSON_GetArraySize(pods), (size_t)1), sizeof(char *));
        if (!n->victims)
                return -ENOMEM;
        cJSON_ArrayForEach(p, pods) {
                const cJSON *uid = meta ? get(p, "UID") : get(get(p, "metadata"), "uid");

                if (!cJSON_IsString(uid) || uid->valuestring[0] == 0 ||
                    strlen(uid->valuestring) >= EXT_UID_MAX)
                        return set_why(ret_why, "a victim has no valid UID"), -EINVAL;
                n->victims[n->n_victims] = strdup(uid->valuestring);
                if (!n->victims[n->n_victims])
                        return -ENOMEM;
                n->n_victims++;
        }
        return 0;
}

int
ext_preempt_args_decode(const char *json, size_t len, const struct ext_config *cfg,
                        struct ext_preempt_args *ret, const char **ret_why)
{
        struct ext_preempt_args a = { 0 };
        const cJSON *map, *e;
        struct json_doc *jd = NULL;
        cJSON *doc = NULL;
        bool meta;
        int r;

        tl_repeated = false;
        r = parse_doc(json, len, &jd, ret_why);
        doc = jd ? jd->root : NULL;
        if (r < 0)
                return r;
        if (!cJSON_IsObject(doc)) {
                r = why_err(ret_why, "ExtenderPreemptionArgs is not a JSON object", -EINVAL);
                goto out;
        }
        r = request_from_pod(get(doc, "Pod"), cfg, &a.req, ret_why);
        if (r < 0)
                goto out;
        map = get(doc, "NodeNameToMetaVictims");
        meta = !is_null_or_absent(map);
        if (!meta)
                map = get(doc, "NodeNameToVictims");
        if (is_null_or_absent(map))
                goto done; /* no candidates: an empty answer */
        if (!cJSON_IsObject(map)) {
                r = why_err(ret_why, "the victims map is not an object", -EINVAL);
                goto out;
        }
        r = json_keys_unique(map);
        if (r < 0) {
                if (r == -EINVAL)
                        set_why(ret_why, EXT_WHY_REPEATED);
                goto out;
        }
        if ((size_t)cJSON_GetArraySize(map) > EXT_MAX_NODES) {
                r = why_err(ret_why, "the request names more nodes than the limit", -E2BIG);
                goto out;
        }
        a.nodes = calloc(MAX((size_t)cJSON_GetArraySize(map), (size_t)1), sizeof(*a.nodes));
        if (!a.nodes) {
                r = -ENOMEM;
                goto out;
        }
        cJSON_ArrayForEach(e, map) {
                struct ext_preempt_node *n = &a.nodes[a.n];

                if (!e->string || e->string[0] == 0 || strlen(e->string) >= EXT_NAME_MAX) {
                        r = why_err(ret_why, "a victims map key is not a valid node name", -EINVAL);
                        goto out;
                }
                n->node = strdup(e->string);
                if (!n->node) {
                        r = -ENOMEM;
                        goto out;
                }
                a.n++;
                r = decode_victims(e, meta, n, ret_why);
                if (r < 0)
                        goto out;
        }
done:
        r = refuse_repeats(0, ret_why);
        if (r < 0)
                goto out;
        *ret = a;
        a = (struct ext_preempt_args){ 0 };
        r = 0;
out:
        ext_preempt_args_release(&a);
        json_doc_free(jd);
        return r;
}

int
ext_preempt_result_encode(const struct ext_preempt_args *a, const bool *keep,
                          bool *const *needed, struct buf *out)
{
        bool first = true;
        int r = buf_puts(out, "{\"NodeNameToMetaVictims\":{");

        for (size_t i = 0; r >= 0 && i < a->n; i++) {
                const struct ext_preempt_node *n = &a->nodes[i];
                bool first_pod = true;

                if (!keep[i])
                        continue;
                if (!first)
                        r = buf_puts(out, ",");
                first = false;
                if (r >= 0)
                        r = buf_put_json_string(out, n->node);
                if (r >= 0)
                        r = buf_puts(out, ":{\"Pods\":[");
                for (size_t j = 0; r >= 0 && j < n->n_victims; j++) {
                        if (!needed[i][j])
                                continue;
                        if (!first_pod)
                                r = buf_puts(out, ",");
                        first_pod = false;
                        if (r >= 0)
                                r = buf_puts(out, "{\"UID\":");
                        if (r >= 0)
                                r = buf_put_json_string(out, n->victims[j]);
                        if (r >= 0)
                                r = buf_puts(out, "}");
                }
                if (r >= 0)
                        r = buf_printf(out, "],\"NumPDBViolations\":%lld}",
                                       (long long)n->pdb_violations);
        }
        return r < 0 ? r : buf_puts(out, "}}");
}

int
ext_gpus_annotation_encode(const struct ext_request *req, const struct ext_node *node,
                           const struct score_choice *set, char **ret_json)
{
        struct topo_gpus_out out[EXT_MAX_CONTAINERS];
        uint8_t gpus[TOPO_MAX_GPUS];
        unsigned next = 0, n = 0;

        if (req->n_containers > EXT_MAX_CONTAINERS)
                return -E2BIG;
        for (unsigned i = 0; i < TOPO_MAX_GPUS; i++) /* the set's GPUs, ascending */
                if (topo_mask_test(&set->set, i))
                        gpus[n++] = (uint8_t)i;
        for (unsigned c = 0; c < req->n_containers; c++) {
                const struct ext_container *ct = &req->containers[c];
                /* Init containers run before the others and reuse the set's first GPUs. */
                unsigned from = ct->init ? 0 : next;

                if (!ct->init)
                        next += ct->count;
                if (from + ct->count > n)
                        return -EINVAL;
                out[c] = (struct topo_gpus_out){ .name = ct->name, .init = ct->init,
                                                 .count = ct->count, .gpus = gpus + from };
        }
        return topo_gpus_encode(node->name, out, req->n_containers,
                                node->cls ? score_class_topo(node->cls) : NULL, ret_json);
}

int
ext_gpus_annotation_decode(const char *json, size_t len, unsigned n_gpus, struct topo_mask *ret,
                           const char **ret_why)
{
        CLEANUP(freep) struct topo_gpus *g = malloc(sizeof(*g));
        int r;

        if (!g)
                return -ENOMEM;
        r = topo_gpus_decode(json, len, n_gpus, NULL, NULL, g, ret_why);
        if (r < 0)
                return r;
        topo_gpus_union(g, ret);
        return 0;
}

/* Node or Pod, for List items that carry no kind (a NodeList's or PodList's items). */
static bool
item_is_pod(const cJSON *item, const char *list_kind)
{
        const cJSON *kind = get(item, "kind");

        if (cJSON_IsString(kind))
                return strcmp(kind->valuestring, "Pod") == 0;
        if (list_kind && strcmp(list_kind, "PodList") == 0)
                return true;
        if (list_kind && strcmp(list_kind, "NodeList") == 0)
                return false;
        return get(get(item, "spec"), "containers") != NULL;
}

static bool
item_is_podgroup(const cJSON *item, const char *list_kind)
{
        const cJSON *kind = get(item, "kind");

        if (cJSON_IsString(kind))
                return strcmp(kind->valuestring, "PodGroup") == 0;
        return list_kind && strcmp(list_kind, "PodGroupList") == 0;
}

/* A PodGroup (scheduling.k8s.io, as `kubectl get podgroups -o json` lists it): its gang
 * minCount and first topology key, as the live cache reads them (kube-client's decoder).  A
 * minCount that is not a whole number in 1..PLACE_MAX_GROUP_PODS leaves the size unknown. */
/* A PodGroup's topology constraint key (the first), NULL when none. */
static const char *
podgroup_key(const cJSON *pg)
{
        const cJSON *topo = get(get(get(pg, "spec"), "schedulingConstraints"), "topology");

        if (cJSON_IsArray(topo) && cJSON_GetArraySize(topo) > 0)
                return string_at(cJSON_GetArrayItem(topo, 0), "key");
        return NULL;
}

static int
add_podgroup_item(struct ext_cluster_builder *b, const cJSON *pg, const char **ret_why)
{
        const cJSON *meta = get(pg, "metadata"), *spec = get(pg, "spec");
        char ns[EXT_NAME_MAX], name[EXT_NAME_MAX];
        const char *key = NULL;
        int64_t min = 0;

        if (copy_string(get(meta, "namespace"), ns, sizeof(ns), true) < 0 ||
            copy_string(get(meta, "name"), name, sizeof(name), true) < 0)
                return set_why(ret_why, "a PodGroup's metadata name or namespace is not a valid "
                                        "string"),
                       -EINVAL;
        if (json_get_int64(get(get(get(spec, "schedulingPolicy"), "gang"), "minCount"), 1,
                           PLACE_MAX_GROUP_PODS, &min) < 0)
                min = 0;
        key = podgroup_key(pg);
        return ext_cluster_builder_add_podgroup(b, ns, name, (unsigned)min, key);
}

/* The node added last gets its domain labels (cfg->domain_labels), as the live cache keeps
 * them. */
static int
add_node_labels(struct ext_cluster_builder *b, const struct ext_config *cfg, const cJSON *node)
{
        const cJSON *labels = get(get(node, "metadata"), "labels");

        for (unsigned k = 0; k < cfg->n_domain_labels && k < EXT_MAX_DOMAIN_LABELS; k++) {
                const char *v = string_at(labels, cfg->domain_labels[k].key);

                if (v && strlen(v) < PLACE_NAME_MAX) {
                        int r = ext_cluster_builder_node_label(b, cfg->domain_labels[k].key, v);

                        if (r < 0)
                                return r;
                }
        }
        /* The PodGroups' topology keys (registered before the nodes). */
        for (unsigned k = 0; k < PLACE_MAX_KEYS; k++) {
                const char *key = ext_cluster_builder_key(b, k);
                const char *v = key ? string_at(labels, key) : NULL;

                if (v && strlen(v) < EXT_LABEL_VALUE_MAX) {
                        int r = ext_cluster_builder_node_label(b, key, v);

                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int
add_pod_item(struct ext_cluster_builder *b, const cJSON *pod, const char **ret_why)
{
        const cJSON *meta = get(pod, "metadata"), *phase, *gpus_a, *node, *rec;
        char uid[EXT_UID_MAX], ns[EXT_NAME_MAX], name[EXT_NAME_MAX];
        struct topo_mask gpus = { 0 };
        int r;

        if (copy_string(get(meta, "uid"), uid, sizeof(uid), true) < 0 ||
            copy_string(get(meta, "namespace"), ns, sizeof(ns), false) < 0 ||
            copy_string(get(meta, "name"), name, sizeof(name), false) < 0)
                return set_why(ret_why, "a Pod has no valid metadata uid, name or namespace"),
                       -EINVAL;
        phase = get(get(pod, "status"), "phase");
        if (cJSON_IsString(phase) && (strcmp(phase->valuestring, "Succeeded") == 0 ||
                                      strcmp(phase->valuestring, "Failed") == 0))
                return 0;
        node = get(get(pod, "spec"), "nodeName");
        if (node && !is_null_or_absent(node) &&
            (!cJSON_IsString(node) || strlen(node->valuestring) >= EXT_NAME_MAX))
                return set_why(ret_why, "a Pod's spec.nodeName is not a valid string"), -EINVAL;
        gpus_a = get(get(meta, "annotations"), TOPO_GPUS_KEY);
        /* A damaged record cannot say which GPUs the pod holds: it counts as none, and the
         * device plugin refuses to hand out GPUs twice on the node itself. */
        if (cJSON_IsString(gpus_a))
                (void)ext_gpus_annotation_decode(gpus_a->valuestring, strlen(gpus_a->valuestring),
                                                 TOPO_MAX_GPUS, &gpus, NULL);
        r = ext_cluster_builder_add_pod(b, uid, ns, name,
                                        cJSON_IsString(node) ? node->valuestring : NULL, &gpus);
        /* Its gang, for preempt: the group record topofit bound it with, else the group id
         * it was bound with (its group had no record), else the group the pod's own labels,
         * annotations and spec.schedulingGroup name, as a request's (bound by another
         * scheduler); a bad record or id: the next source. */
        rec = get(get(meta, "annotations"), EXT_GROUP_RECORD_ANNOTATION);
        if (r >= 0) {
                bool repeated = tl_repeated; /* the record's own decode resets it */
                const cJSON *gid_a = get(get(meta, "annotations"), EXT_GROUP_ID_ANNOTATION);
                char gid[PLACE_NAME_MAX];
                int x = -EINVAL;

                if (cJSON_IsString(rec))
                        x = ext_cluster_builder_pod_group(b, ns, rec->valuestring,
                                                          strlen(rec->valuestring));
                tl_repeated = repeated;
                if (x == -EINVAL && cJSON_IsString(gid_a))
                        x = ext_cluster_builder_pod_group_id(b, ns, gid_a->valuestring);
                if (x == -EINVAL) {
                        group_id_of(meta, get(pod, "spec"), ns, gid, NULL);
                        if (gid[0])
                                x = ext_cluster_builder_pod_group_id(b, ns, gid);
                }
                if (x == -ENOMEM)
                        r = -ENOMEM;
        }
        return r;
}

int
ext_cluster_decode(const char *json, size_t len, const struct ext_config *cfg,
                   const struct ext_cluster *base, uint64_t gen, struct ext_cluster **ret,
                   const char **ret_why)
{
        CLEANUP(ext_cluster_builder_freep) struct ext_cluster_builder *b = NULL;
        const cJSON *items, *item, *kind;
        const char *list_kind;
        struct json_doc *jd = NULL;
        cJSON *doc = NULL;
        int r;

        /* A cluster file is not a request: allow up to the cluster caps, not EXT_MAX_BODY. */
        r = parse_doc_capped(json, len, EXT_MAX_CLUSTER_BYTES, 16 * (size_t)EXT_MAX_CLUSTER_BYTES,
                             &jd, ret_why);
        if (r < 0)
                return r;
        doc = jd->root;
        items = get(doc, "items");
        kind = get(doc, "kind");
        list_kind = cJSON_IsString(kind) ? kind->valuestring : NULL;
        if (!cJSON_IsArray(items)) {
                r = why_err(ret_why, "the cluster file is not a List with an items array", -EINVAL);
                goto out;
        }
        b = ext_cluster_builder_new(cfg, base);
        if (!b) {
                r = -ENOMEM;
                goto out;
        }
        r = 0;
        /* The PodGroups' topology keys first: nodes keep their values of them as they come
         * (a key over PLACE_MAX_KEYS, or not a label key, is ignored). */
        cJSON_ArrayForEach(item, items) {
                const char *key = cJSON_IsObject(item) && item_is_podgroup(item, list_kind)
                                          ? podgroup_key(item)
                                          : NULL;

                if (key && key[0])
                        (void)ext_cluster_builder_group_key(b, key);
        }
        cJSON_ArrayForEach(item, items) {
                if (!cJSON_IsObject(item)) {
                        r = why_err(ret_why, "a List item is not an object", -EINVAL);
                        goto out;
                }
                if (item_is_podgroup(item, list_kind)) {
                        r = add_podgroup_item(b, item, ret_why);
                } else if (item_is_pod(item, list_kind)) {
                        r = add_pod_item(b, item, ret_why);
                } else {
                        const char *name, *topo;
                        size_t topo_len;
                        unsigned gpus;

                        r = node_fields(item, cfg, &name, &topo, &topo_len, &gpus, ret_why);
                        if (r >= 0)
                                r = ext_cluster_builder_add_node(b, name, topo, topo_len, gpus,
                                                                 NULL);
                        if (r >= 0)
                                r = ext_cluster_builder_node_closed(b, node_closed(item));
                        if (r >= 0)
                                r = add_node_labels(b, cfg, item);
                }
                if (r == -EEXIST)
                        set_why(ret_why, "the cluster file lists a node or pod twice");
                else if (r == -E2BIG)
                        set_why(ret_why, "the cluster file has more nodes or pods than the limit");
                if (r < 0)
                        goto out;
        }
        r = ext_cluster_builder_finish(TAKE_PTR(b), gen, ret);
        if (r == -EEXIST)
                set_why(ret_why, "the cluster file lists a node or pod twice");
out:
        json_doc_free(jd);
        return r;
}

/* --- the group record (EXT_GROUP_RECORD_ANNOTATION) ------------------------------------- */

int
ext_group_record_encode(const struct ext_group_record *rec, char **ret_json)
{
        struct buf b;
        int r;

        if (!rec->group.id[0] || !rec->domain.name[0] ||
            rec->domain.level >= PLACE_N_LEVELS)
                return -EINVAL;
        buf_init(&b, EXT_GROUP_RECORD_MAX);
        r = buf_puts(&b, "{\"version\":1,\"group\":");
        if (r >= 0)
                r = buf_put_json_string(&b, rec->group.id);
        if (r >= 0)
                r = buf_printf(&b, ",\"level\":%u,\"domain\":", rec->domain.level);
        if (r >= 0)
                r = buf_put_json_string(&b, rec->domain.name);
        if (r >= 0)
                r = buf_printf(&b, ",\"size\":%u,\"count\":%u,\"require\":%u,\"whole\":%s}",
                               rec->group.size, rec->group.count, rec->group.require,
                               rec->domain.whole ? "true" : "false");
        if (r < 0) {
                buf_release(&b);
                return r == -ENOMEM ? r : -EINVAL;
        }
        *ret_json = buf_steal(&b, NULL);
        return *ret_json ? 0 : -ENOMEM;
}

/* true when s is printable ASCII, as the group ids (Kubernetes names and label values) and
 * domain names (NVLink clique ids, label values, node names) a record carries all are.  So a
 * record that decodes encodes back to the same bytes: fuzz-ext-codec found a group id of
 * bytes that are not UTF-8, which the encoder writes as U+FFFD, so the record read back was
 * another (test/fuzz/corpus/fuzz-ext-codec/finding-group-record-utf8.json). */
static bool
printable_ascii(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
                        return false;
        return true;
}

/* A whole number in min..max from a JSON number; -EINVAL else. */
static int
record_uint(const cJSON *j, unsigned max, unsigned *ret)
{
        int64_t x;

        if (json_get_int64(j, 0, max, &x) < 0)
                return -EINVAL;
        *ret = (unsigned)x;
        return 0;
}

int
ext_group_record_decode(const char *json, size_t len, struct ext_group_record *ret,
                        const char **ret_why)
{
        struct ext_group_record rec = { 0 };
        struct json_doc *jd = NULL;
        const cJSON *doc, *whole;
        unsigned version = 0;
        int r;

        if (len > EXT_GROUP_RECORD_MAX)
                return set_why(ret_why, "the group record is larger than the limit"), -EMSGSIZE;
        tl_repeated = false;
        r = parse_doc(json, len, &jd, ret_why);
        if (r < 0)
                return r;
        doc = jd->root;
        whole = get(doc, "whole");
        if (!cJSON_IsObject(doc))
                r = why_err(ret_why, "the group record is not a JSON object", -EINVAL);
        else if (record_uint(get(doc, "version"), 1000, &version) < 0 || version != 1)
                r = why_err(ret_why, "the group record is not version 1", -EINVAL);
        else if (copy_string(get(doc, "group"), rec.group.id, sizeof(rec.group.id), true) < 0 ||
                 !rec.group.id[0] ||
                 copy_string(get(doc, "domain"), rec.domain.name, sizeof(rec.domain.name),
                             true) < 0 ||
                 !rec.domain.name[0] || !printable_ascii(rec.group.id) ||
                 !printable_ascii(rec.domain.name))
                r = why_err(ret_why, "the group record's group or domain is not a valid string "
                                     "of printable ASCII", -EINVAL);
        else if (record_uint(get(doc, "level"), PLACE_N_LEVELS - 1, &rec.domain.level) < 0 ||
                 record_uint(get(doc, "size"), PLACE_MAX_GROUP_PODS, &rec.group.size) < 0 ||
                 record_uint(get(doc, "count"), TOPO_MAX_GPUS, &rec.group.count) < 0 ||
                 record_uint(get(doc, "require"), 0xffff, &rec.group.require) < 0 ||
                 !cJSON_IsBool(whole))
                r = why_err(ret_why, "the group record's level, size, count, require or whole is "
                                     "missing or out of range", -EINVAL);
        rec.domain.whole = cJSON_IsTrue(whole);
        json_doc_free(jd);
        r = refuse_repeats(r, ret_why);
        if (r < 0)
                return r;
        *ret = rec;
        return 0;
}
