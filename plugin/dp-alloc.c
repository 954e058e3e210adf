/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node-local pod cache and the preferred-allocation decision.  PURE apart from cJSON:
 * no sockets, clocks or globals (time is a parameter), so the decision is tested with
 * tables.  GetPreferredAllocation carries no pod identity: the answer is the set of the
 * oldest bound, not-yet-running pod whose topofit.io/gpus set fits exactly in what the
 * kubelet offers; otherwise the best set by scoring/.  Annotation content is untrusted:
 * every UUID must be a device of this node, and sets are bounded by named caps.
 * The cache is caller-owned (dp_cache_init/dp_cache_release) and not locked here.
 */
#include <cjson/cJSON.h>
#include <string.h>

#include "../common/str.h"
#include "../scoring/score.h"
#include "dp.h"

DEFINE_CLEANUP_FUNC(cJSON, cJSON_Delete)

int
dp_cache_init(struct dp_cache *c, const struct dp_device *devs, unsigned n)
{
        if (n > TOPO_MAX_GPUS)
                return -E2BIG;
        *c = (struct dp_cache){ 0 };
        c->device_ids = calloc(n ? n : 1, sizeof(*c->device_ids));
        c->pods = calloc(DP_MAX_PODS, sizeof(*c->pods));
        if (!c->device_ids || !c->pods) {
                dp_cache_release(c);
                return -ENOMEM;
        }
        for (unsigned i = 0; i < n; i++)
                memcpy(c->device_ids[i], devs[i].id, TOPO_ID_MAX);
        c->n_devices = n;
        c->next_seq = 1;
        c->next_offer = 1;
        return 0;
}

void
dp_cache_release(struct dp_cache *c)
{
        free(c->device_ids);
        free(c->pods);
        *c = (struct dp_cache){ 0 };
}

int
dp_cache_device_index(const struct dp_cache *c, const char *id)
{
        for (unsigned i = 0; i < c->n_devices; i++)
                if (strcmp(c->device_ids[i], id) == 0)
                        return (int)i;
        return -ENODEV;
}

/* Adds one UUID token to a set; rejects unknown and repeated devices. */
static int
dp__set_add(const struct dp_cache *c, struct topo_mask *set, const char *s, size_t len,
            const char **ret_why)
{
        char id[TOPO_ID_MAX];
        int i;

        str_trim(&s, &len);
        if (len == 0)
                return set_why(ret_why, "empty GPU ID in topofit.io/gpus"), -EINVAL;
        if (str_copy(id, sizeof(id), s, len) < 0)
                return set_why(ret_why, "GPU ID in topofit.io/gpus is too long"), -EINVAL;
        i = dp_cache_device_index(c, id);
        if (i < 0)
                return set_why(ret_why, "topofit.io/gpus names a GPU this node does not have"),
                       -EINVAL;
        if (topo_mask_test(set, (unsigned)i))
                return set_why(ret_why, "topofit.io/gpus lists a GPU twice"), -EINVAL;
        topo_mask_set(set, (unsigned)i);
        return 0;
}

static int
dp__set_from_list(const struct dp_cache *c, const char *s, size_t len, struct topo_mask *ret,
                  const char **ret_why)
{
        struct topo_mask set;
        size_t start = 0;
        int r;

        topo_mask_clear(&set);
        for (size_t i = 0; i <= len; i++) {
                if (i < len && s[i] != ',')
                        continue;
                r = dp__set_add(c, &set, s + start, i - start, ret_why);
                if (r < 0)
                        return r;
                start = i + 1;
        }
        *ret = set;
        return 0;
}

static int
dp__set_from_json(const struct dp_cache *c, const cJSON *v, struct topo_mask *ret,
                  const char **ret_why)
{
        struct topo_mask set;
        const cJSON *e;
        int r;

        if (cJSON_IsString(v))
                return dp__set_from_list(c, v->valuestring, strlen(v->valuestring), ret, ret_why);
        if (!cJSON_IsArray(v))
                return set_why(ret_why, "topofit.io/gpus values must be arrays or strings"),
                       -EINVAL;
        topo_mask_clear(&set);
        cJSON_ArrayForEach(e, v) {
                if (!cJSON_IsString(e))
                        return set_why(ret_why, "topofit.io/gpus arrays hold strings only"),
                               -EINVAL;
                r = dp__set_add(c, &set, e->valuestring, strlen(e->valuestring), ret_why);
                if (r < 0)
                        return r;
        }
        if (topo_mask_count(&set) == 0)
                return set_why(ret_why, "empty GPU set in topofit.io/gpus"), -EINVAL;
        *ret = set;
        return 0;
}

/* One container of the extender's format: UUIDs when given, else topology indices. */
static int
dp__set_from_ext(const struct dp_cache *c, const cJSON *ct, struct dp_pod_set *ret,
                 const char **ret_why)
{
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(ct, "name");
        const cJSON *init = cJSON_GetObjectItemCaseSensitive(ct, "init");
        const cJSON *uuids = cJSON_GetObjectItemCaseSensitive(ct, "uuids");
        const cJSON *indices = cJSON_GetObjectItemCaseSensitive(ct, "indices");
        const cJSON *e;
        bool have_uuids = cJSON_IsArray(uuids) && cJSON_GetArraySize(uuids) > 0;
        int r;

        if (!cJSON_IsObject(ct) || (name && !cJSON_IsString(name)) || (init && !cJSON_IsBool(init)))
                return set_why(ret_why, "a topofit.io/gpus container is malformed"), -EINVAL;
        *ret = (struct dp_pod_set){ .init = cJSON_IsTrue(init) };
        if (name && str_copy(ret->container, sizeof(ret->container), name->valuestring,
                             strlen(name->valuestring)) < 0)
                return set_why(ret_why, "container name too long"), -EINVAL;
        cJSON_ArrayForEach(e, uuids) {
                if (!cJSON_IsString(e) || !e->valuestring[0]) {
                        have_uuids = false; /* the topology had no UUIDs: use indices */
                        break;
                }
        }
        if (have_uuids)
                return dp__set_from_json(c, uuids, &ret->gpus, ret_why);
        if (!cJSON_IsArray(indices))
                return set_why(ret_why, "a topofit.io/gpus container has neither uuids nor indices"),
                       -EINVAL;
        topo_mask_clear(&ret->gpus);
        cJSON_ArrayForEach(e, indices) {
                double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
                if (d < 0 || d >= c->n_devices || d != (double)(unsigned)d)
                        return set_why(ret_why, "a topofit.io/gpus index is not a GPU of this node"),
                               -EINVAL;
                if (topo_mask_test(&ret->gpus, (unsigned)d))
                        return set_why(ret_why, "topofit.io/gpus lists a GPU twice"), -EINVAL;
                topo_mask_set(&ret->gpus, (unsigned)d);
        }
        r = topo_mask_count(&ret->gpus) > 0 ? 0 : -EINVAL;
        if (r < 0)
                set_why(ret_why, "empty GPU set in topofit.io/gpus");
        return r;
}

static int
dp__parse_ext(const struct dp_cache *c, const cJSON *root, struct dp_pod_set *sets, unsigned *ret_n,
              const char **ret_why)
{
        const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
        const cJSON *node = cJSON_GetObjectItemCaseSensitive(root, "node");
        const cJSON *containers = cJSON_GetObjectItemCaseSensitive(root, "containers");
        const cJSON *ct;
        unsigned n = 0;
        int r;

        if (!cJSON_IsNumber(version) || version->valuedouble != DP_GPUS_ANNOTATION_VERSION)
                return set_why(ret_why, "topofit.io/gpus has an unknown version"), -EPROTONOSUPPORT;
        if (node && !cJSON_IsString(node))
                return set_why(ret_why, "topofit.io/gpus node is not a string"), -EINVAL;
        if (node && c->node[0] && strcmp(node->valuestring, c->node) != 0)
                return set_why(ret_why, "topofit.io/gpus names another node"), -EINVAL;
        if (!cJSON_IsArray(containers))
                return set_why(ret_why, "topofit.io/gpus has no containers array"), -EINVAL;
        cJSON_ArrayForEach(ct, containers) {
                if (n >= DP_MAX_POD_SETS)
                        return set_why(ret_why, "too many containers in topofit.io/gpus"), -E2BIG;
                r = dp__set_from_ext(c, ct, &sets[n], ret_why);
                if (r < 0)
                        return r;
                n++;
        }
        *ret_n = n;
        return 0;
}

int
dp_parse_gpus_annotation(const struct dp_cache *c, const char *value, size_t len,
                         struct dp_pod_set *ret_sets, unsigned *ret_n, const char **ret_why)
{
        CLEANUP(freep) struct dp_pod_set *sets = NULL;
        struct topo_mask all;
        unsigned n = 0;
        const char *s = value;
        int r;

        if (len > DP_MAX_ANNOTATION_BYTES)
                return set_why(ret_why, "topofit.io/gpus is too large"), -E2BIG;
        str_trim(&s, &len);
        sets = calloc(DP_MAX_POD_SETS, sizeof(*sets));
        if (!sets)
                return -ENOMEM;
        if (len > 0 && (s[0] == '{' || s[0] == '[')) {
                CLEANUP(cJSON_Deletep) cJSON *root = cJSON_ParseWithLength(s, len);
                const cJSON *e;

                if (!root)
                        return set_why(ret_why, "topofit.io/gpus is not valid JSON"), -EINVAL;
                if (cJSON_IsArray(root)) {
                        r = dp__set_from_json(c, root, &sets[0].gpus, ret_why);
                        if (r < 0)
                                return r;
                        n = 1;
                } else if (cJSON_GetObjectItemCaseSensitive(root, "containers") ||
                           cJSON_GetObjectItemCaseSensitive(root, "version")) {
                        r = dp__parse_ext(c, root, sets, &n, ret_why);
                        if (r < 0)
                                return r;
                } else {
                        cJSON_ArrayForEach(e, root) {
                                if (n >= DP_MAX_POD_SETS)
                                        return set_why(ret_why, "too many containers in topofit.io/gpus"),
                                               -E2BIG;
                                if (str_copy(sets[n].container, sizeof(sets[n].container),
                                             e->string, strlen(e->string)) < 0)
                                        return set_why(ret_why, "container name too long"), -EINVAL;
                                r = dp__set_from_json(c, e, &sets[n].gpus, ret_why);
                                if (r < 0)
                                        return r;
                                n++;
                        }
                }
        } else {
                r = dp__set_from_list(c, s, len, &sets[0].gpus, ret_why);
                if (r < 0)
                        return r;
                n = 1;
        }
        if (n == 0)
                return set_why(ret_why, "topofit.io/gpus names no GPU"), -EINVAL;
        /* Containers of one pod never share a GPU (init containers run first and reuse). */
        topo_mask_clear(&all);
        for (unsigned i = 0; i < n; i++)
                for (unsigned g = 0; g < c->n_devices && !sets[i].init; g++)
                        if (topo_mask_test(&sets[i].gpus, g)) {
                                if (topo_mask_test(&all, g))
                                        return set_why(ret_why, "two containers share a GPU in topofit.io/gpus"),
                                               -EINVAL;
                                topo_mask_set(&all, g);
                        }
        memcpy(ret_sets, sets, n * sizeof(*sets));
        *ret_n = n;
        return 0;
}

static struct dp_pod *
dp__find_uid(struct dp_cache *c, const char *uid)
{
        for (unsigned i = 0; i < c->n_pods; i++)
                if (strcmp(c->pods[i].uid, uid) == 0)
                        return &c->pods[i];
        return NULL;
}

int
dp_cache_upsert(struct dp_cache *c, const struct dp_pod *p)
{
        struct dp_pod *old = dp__find_uid(c, p->uid);

        if (old) {
                uint64_t seq = old->seq;
                int64_t offered = old->offered_ms;
                uint64_t offer_seq = old->offer_seq;
                bool reported = old->mismatch_reported;
                *old = *p;
                old->seq = seq;
                old->offered_ms = offered;
                old->offer_seq = offer_seq;
                old->mismatch_reported = reported;
                return 0;
        }
        if (c->n_pods >= DP_MAX_PODS)
                return -ENOSPC;
        c->pods[c->n_pods] = *p;
        c->pods[c->n_pods].seq = c->next_seq++;
        c->pods[c->n_pods].offered_ms = 0;
        c->pods[c->n_pods].offer_seq = 0;
        c->n_pods++;
        return 0;
}

int
dp_cache_remove(struct dp_cache *c, const char *uid)
{
        struct dp_pod *p = dp__find_uid(c, uid);

        if (!p)
                return -ENOENT;
        *p = c->pods[--c->n_pods];
        return 0;
}

const struct dp_pod *
dp_cache_find(const struct dp_cache *c, const char *ns, const char *name)
{
        for (unsigned i = 0; i < c->n_pods; i++)
                if (strcmp(c->pods[i].ns, ns) == 0 && strcmp(c->pods[i].name, name) == 0)
                        return &c->pods[i];
        return NULL;
}

static bool
dp__mask_subset(const struct topo_mask *a, const struct topo_mask *b)
{
        for (size_t k = 0; k < ELEMENTSOF(a->w); k++)
                if (a->w[k] & ~b->w[k])
                        return false;
        return true;
}

int
dp_cache_match(struct dp_cache *c, const struct topo_mask *available,
               const struct topo_mask *must, unsigned size, int64_t now_ms,
               struct topo_mask *ret, const char **ret_pod)
{
        struct dp_pod *best = NULL;
        const struct dp_pod_set *best_set = NULL;
        bool best_fresh = false;

        for (unsigned i = 0; i < c->n_pods; i++) {
                struct dp_pod *p = &c->pods[i];
                bool fresh = p->offer_seq == 0 || now_ms - p->offered_ms >= DP_OFFER_TTL_MS;

                if (!p->pending || !p->live)
                        continue;
                for (unsigned k = 0; k < p->n_sets; k++) {
                        const struct dp_pod_set *s = &p->sets[k];
                        if (topo_mask_count(&s->gpus) != size ||
                            !dp__mask_subset(&s->gpus, available) || !dp__mask_subset(must, &s->gpus))
                                continue;
                        /* Not-yet-offered pods first, oldest first (the kubelet admits pods
                         * in the order it learns about them); then the least recently
                         * offered, so racing admissions spread over the candidates. */
                        if (!best || (fresh && !best_fresh) ||
                            (fresh && best_fresh && p->seq < best->seq) ||
                            (!fresh && !best_fresh && p->offer_seq < best->offer_seq)) {
                                best = p;
                                best_set = s;
                                best_fresh = fresh;
                        }
                        break;
                }
        }
        if (!best)
                return -ENOENT;
        best->offered_ms = now_ms;
        best->offer_seq = c->next_offer++;
        *ret = best_set->gpus;
        if (ret_pod)
                *ret_pod = best->name;
        return 0;
}

void
dp_cache_forget_offers(struct dp_cache *c)
{
        for (unsigned i = 0; i < c->n_pods; i++) {
                c->pods[i].offered_ms = 0;
                c->pods[i].offer_seq = 0;
        }
}

int
dp_fallback_set(struct score_class *sc, const struct topo_mask *available,
                const struct topo_mask *must, unsigned size, unsigned n_devices,
                struct topo_mask *ret)
{
        struct topo_mask set = *must;
        unsigned have = topo_mask_count(must);

        if (topo_mask_count(available) < size || have > size)
                return -ENOSPC;
        if (sc && have == 0) {
                struct score_request req = { .count = size };
                struct score_choice ch;
                if (size > 0 && score_best(sc, available, &req, &ch, NULL) == 0) {
                        *ret = ch.set;
                        return 0;
                }
        }
        /* Grow from must-include: each step adds the available GPU with the highest sum of
         * modeled pair bandwidth to the set so far (lowest index on ties). */
        while (have < size) {
                int pick = -1;
                double pick_bw = -1;
                for (unsigned g = 0; g < n_devices; g++) {
                        double bw = 0;
                        if (!topo_mask_test(available, g) || topo_mask_test(&set, g))
                                continue;
                        if (sc)
                                for (unsigned h = 0; h < n_devices; h++)
                                        if (topo_mask_test(&set, h))
                                                bw += score_pair_gbps(sc, g, h);
                        if (bw > pick_bw) {
                                pick = (int)g;
                                pick_bw = bw;
                        }
                }
                if (pick < 0)
                        return -ENOSPC;
                topo_mask_set(&set, (unsigned)pick);
                have++;
        }
        *ret = set;
        return 0;
}

int
dp_join_ids(const char *const *ids, unsigned n, char *buf, size_t size)
{
        size_t at = 0;

        if (size == 0)
                return -E2BIG;
        buf[0] = '\0';
        for (unsigned i = 0; i < n; i++) {
                size_t l = strlen(ids[i]);
                if (at + l + (i > 0) + 1 > size)
                        return -E2BIG;
                if (i > 0)
                        buf[at++] = ',';
                memcpy(buf + at, ids[i], l);
                at += l;
                buf[at] = '\0';
        }
        return 0;
}
