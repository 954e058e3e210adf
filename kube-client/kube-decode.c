/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decoders: a Node, Pod or PodGroup as cJSON into the compact struct the cache keeps.  Only what
 * topofit needs survives (see kube.h); everything else of the object is dropped here, so
 * the cache's memory is one allocation per object: a refcounted header, the public struct,
 * its key/value array and its string bytes, packed.  cJSON failures and bad values are
 * translated here into -EINVAL with a static reason.  Pure: no I/O, no locks.  The
 * project's duplicate-key rule (common/json.h): an object that repeats a key read here is
 * refused; jget() notes repeats in a thread-local flag that each decoder clears first.
 */
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "kube-private.h"
#include "str.h"

#define KUBE_MAX_KEPT_ANNOTATIONS 32 /* topofit.io/ annotations kept per pod, beside the
                                      * listed ones (kube__decode_opts.pod_annotations) */

static __thread bool tl_repeated;

static const cJSON *
jget(const cJSON *o, const char *key)
{
        return json_get(o, key, &tl_repeated);
}

static const char *
jstr(const cJSON *o, const char *key)
{
        const cJSON *v = jget(o, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *
jobj(const cJSON *o, const char *key)
{
        const cJSON *v = jget(o, key);
        return cJSON_IsObject(v) ? v : NULL;
}

struct kube__obj *
kube__obj_ref(struct kube__obj *o)
{
        if (o)
                __atomic_add_fetch(&o->refs, 1, __ATOMIC_RELAXED);
        return o;
}

struct kube__obj *
kube__obj_unref(struct kube__obj *o)
{
        if (o && __atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) == 0)
                free(o);
        return NULL;
}

uint64_t
kube__key_hash(const char *ns, const char *name)
{
        uint64_t h = str_hash_fnv1a(1469598103934665603ull, ns); /* FNV-1a */

        h = (h ^ '/') * 1099511628211ull;
        return str_hash_fnv1a(h, name);
}

/* The largest GPU quantity a Node or Pod may carry here (more is an error, not a count). */
#define KUBE_MAX_GPU_QUANTITY INT64_C(1000000000000)

/* A Kubernetes quantity as a GPU count, by the one rule the extender's codec uses too
 * (str_to_quantity_count: a whole count in Kubernetes' quantity grammar, as the API server
 * requires of extended resources); a JSON number is tolerated when whole. */
static int
quantity_parse(const cJSON *v, int64_t *ret)
{
        if (cJSON_IsNumber(v)) {
                double d = v->valuedouble;

                if (d < 0 || d > (double)KUBE_MAX_GPU_QUANTITY || d != (double)(int64_t)d)
                        return -EINVAL;
                *ret = (int64_t)d;
                return 0;
        }
        if (!cJSON_IsString(v))
                return -EINVAL;
        return str_to_quantity_count(v->valuestring, strlen(v->valuestring),
                                     KUBE_MAX_GPU_QUANTITY, ret) < 0 ? -EINVAL : 0;
}

/* The sum over gpu_resources of map[resource]; 0 when none are present. */
static int
gpu_sum(const cJSON *map, const char *const *res, int64_t *ret)
{
        int64_t sum = 0, n;

        for (; map && *res; res++) {
                const cJSON *v = jget(map, *res);
                if (!v)
                        continue;
                if (quantity_parse(v, &n) < 0)
                        return -EINVAL;
                sum += n;
        }
        *ret = sum;
        return 0;
}

/* A container's GPU count: limits, or requests when it has no limit for them. */
static int
container_gpus(const cJSON *ctr, const char *const *res, int64_t *ret)
{
        const cJSON *resources = jobj(ctr, "resources");
        int64_t lim = 0, req = 0;

        if (gpu_sum(jobj(resources, "limits"), res, &lim) < 0 ||
            gpu_sum(jobj(resources, "requests"), res, &req) < 0)
                return -EINVAL;
        *ret = lim > 0 ? lim : req;
        return 0;
}

/* The pod's effective request: max(sum of containers, largest init container). */
static int
pod_gpus(const cJSON *spec, const char *const *res, int64_t *ret)
{
        const cJSON *c;
        int64_t sum = 0, init_max = 0, n;

        cJSON_ArrayForEach(c, jget(spec, "containers")) {
                if (container_gpus(c, res, &n) < 0)
                        return -EINVAL;
                sum += n;
        }
        cJSON_ArrayForEach(c, jget(spec, "initContainers")) {
                if (container_gpus(c, res, &n) < 0)
                        return -EINVAL;
                init_max = MAX(init_max, n);
        }
        *ret = MAX(sum, init_max);
        return 0;
}

/* A string packer over one allocation. */
struct packer {
        char *next;
};

static const char *
pack(struct packer *p, const char *s)
{
        size_t n = strlen(s) + 1;
        char *d = p->next;

        memcpy(d, s, n);
        p->next += n;
        return d;
}

static const struct kube__decode_opts default_opts = {
        .gpu_resources = (const char *const[]){ KUBE_GPU_RESOURCE_DEFAULT, NULL },
};

static bool
name_valid(const char *s)
{
        return s && *s && strlen(s) <= KUBE_MAX_NAME;
}

/* Whether the NULL-terminated list v (may be NULL) holds s. */
static bool
strv_has(const char *const *v, const char *s)
{
        for (; v && *v; v++)
                if (strcmp(*v, s) == 0)
                        return true;
        return false;
}

static int
decode_node(const cJSON *o, const struct kube__decode_opts *d, struct kube__obj **ret,
                  const char **ret_why)
{
        const cJSON *meta = jobj(o, "metadata"), *spec = jobj(o, "spec"),
                    *status = jobj(o, "status"), *labels, *annotations, *cond;
        const char *name = jstr(meta, "name"), *rv = jstr(meta, "resourceVersion"), *topo;
        const char *kept_key[KUBE_MAX_ALL_LABELS], *kept_val[KUBE_MAX_ALL_LABELS];
        const cJSON *label, *all;
        size_t n_kept = 0, strings = 0;
        int64_t alloc = 0, cap = 0;
        bool ready = false;
        struct kube__obj *obj;
        struct packer p;

        if (!d)
                d = &default_opts;
        if (!name_valid(name))
                return set_why(ret_why, "node has no valid metadata.name"), -EINVAL;
        if (!rv)
                rv = "";
        annotations = jobj(meta, "annotations");
        topo = jstr(annotations, KUBE_TOPOLOGY_ANNOTATION);
        if (topo && strlen(topo) > KUBE_MAX_ANNOTATION)
                topo = NULL; /* over the cap: treated as absent, the node scores as unknown */
        labels = jobj(meta, "labels");
        all = d->node_labels_all && cJSON_IsObject(labels) ? labels : NULL;
        cJSON_ArrayForEach(label, all) {
                if (n_kept >= KUBE_MAX_ALL_LABELS)
                        break;
                if (!cJSON_IsString(label) || !label->string ||
                    strlen(label->string) > KUBE_MAX_LABEL_KEY ||
                    strlen(label->valuestring) > KUBE_MAX_NAME)
                        continue;
                kept_key[n_kept] = label->string;
                kept_val[n_kept++] = label->valuestring;
        }
        for (const char *const *k = d->node_labels_all ? NULL : d->node_labels;
             k && *k && n_kept < KUBE_MAX_KEPT_LABELS; k++) {
                const char *v = jstr(labels, *k);
                if (!v || strlen(v) > KUBE_MAX_NAME)
                        continue;
                kept_key[n_kept] = *k;
                kept_val[n_kept++] = v;
        }
        if (gpu_sum(jobj(status, "allocatable"), d->gpu_resources ?: default_opts.gpu_resources,
                    &alloc) < 0 ||
            gpu_sum(jobj(status, "capacity"), d->gpu_resources ?: default_opts.gpu_resources,
                    &cap) < 0)
                return set_why(ret_why, "node has a GPU quantity that is not a whole number"),
                       -EINVAL;
        cJSON_ArrayForEach(cond, jget(status, "conditions")) {
                const char *type = jstr(cond, "type"), *st = jstr(cond, "status");
                if (type && st && strcmp(type, "Ready") == 0)
                        ready = strcmp(st, "True") == 0;
        }

        strings = strlen(name) + 1 + strlen(rv) + 1 + (topo ? strlen(topo) + 1 : 0);
        for (size_t i = 0; i < n_kept; i++)
                strings += strlen(kept_key[i]) + strlen(kept_val[i]) + 2;
        obj = calloc(1, sizeof(*obj) + n_kept * sizeof(struct kube_kv) + strings);
        if (!obj)
                return -ENOMEM;
        struct kube_kv *kv = (struct kube_kv *)(obj + 1);
        p.next = (char *)(kv + n_kept);
        obj->refs = 1;
        obj->kind = KUBE__NODE;
        obj->node.name = pack(&p, name);
        obj->node.resource_version = pack(&p, rv);
        if (topo) {
                obj->node.topology = pack(&p, topo);
                obj->node.topology_len = (uint32_t)strlen(topo);
        }
        for (size_t i = 0; i < n_kept; i++) {
                kv[i].key = pack(&p, kept_key[i]);
                kv[i].value = pack(&p, kept_val[i]);
        }
        obj->node.labels = kv;
        obj->node.n_labels = (uint32_t)n_kept;
        obj->node.gpu_allocatable = alloc;
        obj->node.gpu_capacity = cap;
        obj->node.ready = ready;
        obj->node.unschedulable = cJSON_IsTrue(jget(spec,
                                                                                "unschedulable"));
        obj->key_ns = "";
        obj->key_name = obj->node.name;
        obj->hash = kube__key_hash("", name);
        *ret = obj;
        return 0;
}

static const char *const phase_table[_KUBE_POD_PHASE_MAX] = {
        [KUBE_POD_PENDING] = "Pending",     [KUBE_POD_RUNNING] = "Running",
        [KUBE_POD_SUCCEEDED] = "Succeeded", [KUBE_POD_FAILED] = "Failed",
        [KUBE_POD_UNKNOWN] = "Unknown",
};

DEFINE_STRING_TABLE_TO_STRING(kube_pod_phase, enum kube_pod_phase, phase_table)

enum kube_pod_phase
kube_pod_phase_from_string(const char *s)
{
        int i = str_table_index(phase_table, _KUBE_POD_PHASE_MAX, s);

        if (i >= 0)
                return (enum kube_pod_phase)i;
        /* A pod without status yet is Pending; text we do not know is Unknown. */
        return s ? KUBE_POD_UNKNOWN : KUBE_POD_PENDING;
}

static int
decode_pod(const cJSON *o, const struct kube__decode_opts *d, struct kube__obj **ret,
                 const char **ret_why)
{
        const cJSON *meta = jobj(o, "metadata"), *spec = jobj(o, "spec"),
                    *status = jobj(o, "status"), *a;
        const char *uid = jstr(meta, "uid"), *ns = jstr(meta, "namespace"),
                   *name = jstr(meta, "name"), *rv = jstr(meta, "resourceVersion"),
                   *node = jstr(spec, "nodeName"),
                   *group = jstr(jobj(spec, "schedulingGroup"), "podGroupName");
        const cJSON *kept[KUBE_MAX_KEPT_ANNOTATIONS + KUBE_MAX_KEPT_LABELS];
        const cJSON *labels = jobj(meta, "labels");
        const char *label_key[KUBE_MAX_KEPT_LABELS], *label_val[KUBE_MAX_KEPT_LABELS];
        size_t n_kept = 0, n_listed = 0, n_labels = 0, strings;
        int64_t gpus = 0;
        struct kube__obj *obj;
        struct packer p;

        if (!d)
                d = &default_opts;
        if (!name_valid(name) || !name_valid(ns))
                return set_why(ret_why, "pod has no valid metadata.name or namespace"), -EINVAL;
        if (!uid || strlen(uid) > KUBE_MAX_NAME)
                return set_why(ret_why, "pod has no valid metadata.uid"), -EINVAL;
        if (node && strlen(node) > KUBE_MAX_NAME)
                return set_why(ret_why, "pod has an invalid spec.nodeName"), -EINVAL;
        if (!node)
                node = "";
        if (!rv)
                rv = "";
        if (!name_valid(group))
                group = ""; /* not a PodGroup's name: the pod is no member of one */
        if (pod_gpus(spec, d->gpu_resources ?: default_opts.gpu_resources, &gpus) < 0)
                return set_why(ret_why, "pod has a GPU quantity that is not a whole number"),
                       -EINVAL;
        /* The annotations are read whole (every topofit.io/ key): no key twice. */
        if (json_keys_unique(jobj(meta, "annotations")) < 0)
                return set_why(ret_why, "pod repeats an annotation key"), -EINVAL;
        /* The listed keys always (the reader's own: the GPU record, the group's); other
         * topofit.io/ ones up to KUBE_MAX_KEPT_ANNOTATIONS, the rest passed over.  Never
         * the pod refused for their number: a pod left out of the cache would have its
         * GPUs look free. */
        cJSON_ArrayForEach(a, jobj(meta, "annotations")) {
                bool listed;

                if (!cJSON_IsString(a) || !a->string || strlen(a->valuestring) > KUBE_MAX_ANNOTATION)
                        continue;
                listed = strv_has(d->pod_annotations, a->string);
                if (listed ? n_listed == KUBE_MAX_KEPT_LABELS
                           : !str_has_prefix(a->string, KUBE_ANNOTATION_PREFIX) ||
                                     n_kept - n_listed == KUBE_MAX_KEPT_ANNOTATIONS)
                        continue;
                n_listed += listed;
                kept[n_kept++] = a;
        }

        /* The pod's labels by key, the keys the cache was asked for (group names). */
        for (const char *const *k = d->pod_labels; k && *k && n_labels < KUBE_MAX_KEPT_LABELS;
             k++) {
                const char *v = jstr(labels, *k);

                if (!v || strlen(v) > KUBE_MAX_NAME)
                        continue;
                label_key[n_labels] = *k;
                label_val[n_labels++] = v;
        }

        strings = strlen(uid) + strlen(ns) + strlen(name) + strlen(node) + strlen(rv) +
                  strlen(group) + 6;
        for (size_t i = 0; i < n_kept; i++)
                strings += strlen(kept[i]->string) + strlen(kept[i]->valuestring) + 2;
        for (size_t i = 0; i < n_labels; i++)
                strings += strlen(label_key[i]) + strlen(label_val[i]) + 2;
        obj = calloc(1, sizeof(*obj) + (n_kept + n_labels) * sizeof(struct kube_kv) + strings);
        if (!obj)
                return -ENOMEM;
        struct kube_kv *kv = (struct kube_kv *)(obj + 1);
        p.next = (char *)(kv + n_kept + n_labels);
        obj->refs = 1;
        obj->kind = KUBE__POD;
        obj->pod.uid = pack(&p, uid);
        obj->pod.ns = pack(&p, ns);
        obj->pod.name = pack(&p, name);
        obj->pod.node_name = pack(&p, node);
        obj->pod.resource_version = pack(&p, rv);
        for (size_t i = 0; i < n_kept; i++) {
                kv[i].key = pack(&p, kept[i]->string);
                kv[i].value = pack(&p, kept[i]->valuestring);
        }
        obj->pod.annotations = kv;
        obj->pod.n_annotations = (uint32_t)n_kept;
        for (size_t i = 0; i < n_labels; i++) {
                kv[n_kept + i].key = pack(&p, label_key[i]);
                kv[n_kept + i].value = pack(&p, label_val[i]);
        }
        obj->pod.labels = kv + n_kept;
        obj->pod.n_labels = (uint32_t)n_labels;
        obj->pod.scheduling_group = pack(&p, group);
        obj->pod.phase = (uint8_t)kube_pod_phase_from_string(jstr(status, "phase"));
        obj->pod.deleting = jstr(meta, "deletionTimestamp") != NULL;
        obj->pod.gpu_request = gpus;
        obj->key_ns = obj->pod.ns;
        obj->key_name = obj->pod.name;
        obj->hash = kube__key_hash(ns, name);
        *ret = obj;
        return 0;
}

int64_t
kube__creation_ms(const cJSON *o)
{
        const char *ts = jstr(jobj(o, "metadata"), "creationTimestamp");
        struct tm tm = { 0 };
        const char *end;

        if (!ts)
                return -1;
        end = strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!end || (*end != 'Z' && *end != '.'))
                return -1;
        return (int64_t)timegm(&tm) * 1000;
}

/* The decoders under the duplicate-key rule: a repeat of a key they read is -EINVAL. */
static int
refuse_repeats(int r, struct kube__obj **obj, const char **ret_why)
{
        bool repeated = tl_repeated;

        tl_repeated = false;
        if (r >= 0 && repeated) {
                *obj = kube__obj_unref(*obj);
                return set_why(ret_why, "the object repeats a key that is read (refused: "
                                        "readers disagree on which copy counts)"),
                       -EINVAL;
        }
        return r;
}

int
kube__decode_node(const cJSON *o, const struct kube__decode_opts *d, struct kube__obj **ret,
                  const char **ret_why)
{
        struct kube__obj *obj = NULL;
        int r;

        tl_repeated = false;
        r = refuse_repeats(decode_node(o, d, &obj, ret_why), &obj, ret_why);
        if (r >= 0)
                *ret = obj;
        return r;
}

int
kube__decode_pod(const cJSON *o, const struct kube__decode_opts *d, struct kube__obj **ret,
                 const char **ret_why)
{
        struct kube__obj *obj = NULL;
        int r;

        tl_repeated = false;
        r = refuse_repeats(decode_pod(o, d, &obj, ret_why), &obj, ret_why);
        if (r >= 0)
                *ret = obj;
        return r;
}

/* A PodGroup (scheduling.k8s.io v1beta1 / v1alpha3 / v1alpha2: the same fields): its key,
 * spec.schedulingPolicy.gang.minCount (0 for a basic policy: no gang) and the first
 * spec.schedulingConstraints.topology[].key.  A minCount outside 1..KUBE_MAX_GROUP_MIN_COUNT
 * or a topology key that is not a string is refused. */
static int
decode_podgroup(const cJSON *o, struct kube__obj **ret, const char **ret_why)
{
        const cJSON *meta = jobj(o, "metadata"), *spec = jobj(o, "spec");
        const cJSON *policy = jobj(spec, "schedulingPolicy");
        const cJSON *gang = jobj(policy, "gang"), *min = jget(gang, "minCount");
        const cJSON *topology = jget(jobj(spec, "schedulingConstraints"), "topology");
        const char *ns = jstr(meta, "namespace"), *name = jstr(meta, "name"),
                   *rv = jstr(meta, "resourceVersion"), *key = "";
        struct kube__obj *obj;
        struct packer p;
        int64_t count = 0;

        if (!name_valid(name) || !name_valid(ns))
                return set_why(ret_why, "PodGroup has no valid metadata.name or namespace"),
                       -EINVAL;
        if (gang) {
                /* The range first: the cast of a number out of range is undefined. */
                if (!cJSON_IsNumber(min) || !(min->valuedouble >= 1) ||
                    min->valuedouble > KUBE_MAX_GROUP_MIN_COUNT ||
                    min->valuedouble != (double)(int64_t)min->valuedouble)
                        return set_why(ret_why, "PodGroup's spec.schedulingPolicy.gang.minCount "
                                                "is not a whole number from 1 to 1048576"),
                               -EINVAL;
                count = (int64_t)min->valuedouble;
        }
        if (topology && !cJSON_IsNull(topology)) {
                const cJSON *first = cJSON_GetArrayItem(topology, 0);
                const cJSON *k = first ? jget(first, "key") : NULL;

                if (!cJSON_IsArray(topology) || (first && (!cJSON_IsString(k) ||
                                                           strlen(k->valuestring) > KUBE_MAX_PATH)))
                        return set_why(ret_why, "PodGroup's spec.schedulingConstraints.topology "
                                                "is not a list of {key}"),
                               -EINVAL;
                if (k)
                        key = k->valuestring;
        }
        if (!rv)
                rv = "";
        obj = calloc(1, sizeof(*obj) + strlen(ns) + strlen(name) + strlen(rv) + strlen(key) + 4);
        if (!obj)
                return -ENOMEM;
        p.next = (char *)(obj + 1);
        obj->refs = 1;
        obj->kind = KUBE__PODGROUP;
        obj->podgroup.ns = pack(&p, ns);
        obj->podgroup.name = pack(&p, name);
        obj->podgroup.resource_version = pack(&p, rv);
        obj->podgroup.topology_key = pack(&p, key);
        obj->podgroup.min_count = (uint32_t)count;
        obj->key_ns = obj->podgroup.ns;
        obj->key_name = obj->podgroup.name;
        obj->hash = kube__key_hash(ns, name);
        *ret = obj;
        return 0;
}

int
kube__decode_podgroup(const cJSON *o, struct kube__obj **ret, const char **ret_why)
{
        struct kube__obj *obj = NULL;
        int r;

        tl_repeated = false;
        r = refuse_repeats(decode_podgroup(o, &obj, ret_why), &obj, ret_why);
        if (r >= 0)
                *ret = obj;
        return r;
}
