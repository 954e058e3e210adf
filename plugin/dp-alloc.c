/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node-local pod cache and the preferred-allocation decision.  PURE: no sockets, clocks
 * or globals (time is a parameter), so the decision is tested with
 * tables.  GetPreferredAllocation carries no pod identity: the answer is the set of the
 * oldest bound, not-yet-running pod whose topofit.io/gpus set fits exactly in what the
 * kubelet offers; otherwise the best set by scoring/.  Annotation content is untrusted:
 * every UUID must be a device of this node, and sets are bounded by named caps.
 * The cache is caller-owned (dp_cache_init/dp_cache_release) and not locked here.
 */
#include <string.h>

#include "../common/str.h"
#include "../scoring/score.h"
#include "dp.h"

int
dp_cache_init_sized(struct dp_cache *c, const struct dp_device *devs, unsigned n,
                    unsigned max_pods)
{
        if (n > TOPO_MAX_GPUS)
                return -E2BIG;
        if (max_pods == 0 || max_pods > DP_MAX_PODS)
                return -EINVAL;
        *c = (struct dp_cache){ .max_pods = max_pods };
        c->device_ids = calloc(n ? n : 1, sizeof(*c->device_ids));
        c->pods = calloc(max_pods, sizeof(*c->pods));
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

int
dp_cache_init(struct dp_cache *c, const struct dp_device *devs, unsigned n)
{
        return dp_cache_init_sized(c, devs, n, DP_MAX_PODS);
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

int
dp_parse_gpus_annotation(const struct dp_cache *c, const char *value, size_t len,
                         struct dp_pod_set *ret_sets, unsigned *ret_n, const char **ret_why)
{
        CLEANUP(freep) struct topo_gpus *g = malloc(sizeof(*g));
        int r;

        if (!g)
                return -ENOMEM;
        /* The one codec (topology/topo-gpus.c): UUIDs resolve against this node's devices,
         * a record naming another node is refused. */
        r = topo_gpus_decode(value, len, c->n_devices, (const char (*)[TOPO_ID_MAX])c->device_ids,
                             c->node, g, ret_why);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < g->n; i++) {
                ret_sets[i] = (struct dp_pod_set){ .init = g->c[i].init, .gpus = g->c[i].gpus };
                memcpy(ret_sets[i].container, g->c[i].name, sizeof(ret_sets[i].container));
        }
        *ret_n = g->n;
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
        if (c->n_pods >= c->max_pods)
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
                            !topo_mask_subset(&s->gpus, available) || !topo_mask_subset(must, &s->gpus))
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
