/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The extender's verbs as pure functions: filter, prioritize, bind, preempt over a cluster
 * snapshot (borrowed, immutable), the ledger (the one locked mutable place) and a clock
 * value passed in.  Every decision goes through decide(): free GPUs in, a verdict out,
 * using scoring's score_best / score_node_priority.  bind is the commit point: it checks
 * and records a set in one critical section of the ledger, so no GPU is ever committed to
 * two pods.  No I/O, no logging: the caller logs the verdicts.
 */
#include "ext-core-private.h"

#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "str.h"

static const char *const placement_names[_EXT_PLACEMENT_MAX] = {
        [EXT_PLACEMENT_BEST_EFFORT] = "best-effort",
        [EXT_PLACEMENT_NVLINK_REQUIRED] = "nvlink-required",
        [EXT_PLACEMENT_NVLINK_PREFERRED] = "nvlink-preferred",
        [EXT_PLACEMENT_NUMA] = "numa",
        [EXT_PLACEMENT_PCIE_SWITCH] = "pcie-switch",
        [EXT_PLACEMENT_NIC] = "nic",
        [EXT_PLACEMENT_NONE] = "none",
};

static const unsigned placement_require[_EXT_PLACEMENT_MAX] = {
        [EXT_PLACEMENT_NVLINK_REQUIRED] = SCORE_REQUIRE_NVLINK,
        [EXT_PLACEMENT_NUMA] = SCORE_REQUIRE_NUMA,
        [EXT_PLACEMENT_PCIE_SWITCH] = SCORE_REQUIRE_PCIE_SWITCH,
        [EXT_PLACEMENT_NIC] = SCORE_REQUIRE_NIC,
};

const char *
ext_placement_to_string(enum ext_placement p)
{
        return p >= 0 && p < _EXT_PLACEMENT_MAX ? placement_names[p] : NULL;
}

enum ext_placement
ext_placement_from_string(const char *s)
{
        return (enum ext_placement)str_table_index(placement_names, _EXT_PLACEMENT_MAX, s);
}

unsigned
ext_placement_require(enum ext_placement p)
{
        return p >= 0 && p < _EXT_PLACEMENT_MAX ? placement_require[p] : 0;
}

static const char *const unannotated_names[_EXT_UNANNOTATED_MAX] = {
        [EXT_UNANNOTATED_PCIE] = "pcie",
        [EXT_UNANNOTATED_REJECT] = "reject",
};

const char *
ext_unannotated_to_string(enum ext_unannotated u)
{
        return u >= 0 && u < _EXT_UNANNOTATED_MAX ? unannotated_names[u] : NULL;
}

enum ext_unannotated
ext_unannotated_from_string(const char *s)
{
        return (enum ext_unannotated)str_table_index(unannotated_names, _EXT_UNANNOTATED_MAX, s);
}

void
ext_config_default(struct ext_config *cfg)
{
        *cfg = (struct ext_config){
                .n_resources = 1,
                .resources = { EXT_DEFAULT_RESOURCE },
                .unannotated = EXT_UNANNOTATED_PCIE,
                .reservation_ttl_ns = EXT_RESERVATION_TTL_NS,
                .committed_ttl_ns = EXT_COMMITTED_TTL_NS,
        };
        score_config_default(&cfg->score);
}

bool
ext_verdict_unresolvable(const struct ext_verdict *v)
{
        return v->r == -ENOEXEC || v->r == -ENOENT || v->r == -EINVAL;
}

/* GPUs of n free for req: healthy, not on a live pod, not held by another pod. */
static void
free_gpus_locked(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_request *req,
                 const struct ext_node *n, uint64_t now_ns, struct topo_mask *ret)
{
        struct topo_mask held;

        ext__ledger_held_node_locked(l, n, req->uid[0] ? req->uid : NULL, c ? c->generation : 0,
                                now_ns, &held);
        for (size_t k = 0; k < ELEMENTSOF(ret->w); k++)
                ret->w[k] = n->healthy.w[k] & ~n->used.w[k] & ~held.w[k];
}

/* The lowest-indexed count GPUs of free, for placement "none". */
static int
lowest_free(const struct ext_node *n, const struct topo_mask *free, unsigned count,
            struct score_choice *ret)
{
        struct topo_mask set = { 0 };
        unsigned k = 0;

        for (unsigned i = 0; i < n->n_gpus && k < count; i++)
                if (topo_mask_test(free, i)) {
                        topo_mask_set(&set, i);
                        k++;
                }
        if (k < count)
                return -ENOSPC;
        return score_evaluate(n->cls, &set, free, ret);
}

/* One node's verdict for req given its free GPUs; with_priority adds the 0..10 score. */
static void
decide(const struct ext_config *cfg, const struct ext_request *req, const struct ext_node *n,
       const struct topo_mask *free, bool with_priority, struct ext_verdict *v)
{
        struct score_request sreq = { .count = req->count, .require = req->require };
        const char *why = NULL;
        int r, prio;

        *v = (struct ext_verdict){ .free = *free };
        if (req->count == 0)
                return; /* nothing asked: every node fits, priority 0 */
        if (!n->cls) {
                v->r = -ENOEXEC;
                v->why = "the node has no GPUs";
                return;
        }
        if (!n->annotated && req->require && cfg->unannotated == EXT_UNANNOTATED_REJECT) {
                v->r = -EMEDIUMTYPE;
                v->why = "the node has no usable topofit.io/topology annotation and the pod "
                         "requires a topology (unannotated-nodes policy: reject)";
                return;
        }
        if (req->count > n->n_gpus) {
                v->r = -ENOEXEC;
                v->why = "the node has fewer GPUs than the pod requests";
                return;
        }

        switch (req->placement) {
        case EXT_PLACEMENT_NONE:
                r = lowest_free(n, free, req->count, &v->choice);
                if (r == -ENOSPC)
                        why = "not enough free GPUs";
                break;
        case EXT_PLACEMENT_NVLINK_PREFERRED:
                sreq.require = SCORE_REQUIRE_NVLINK;
                r = score_best(n->cls, free, &sreq, &v->choice, &why);
                if (r == -EAGAIN || r == -ENOEXEC) {
                        sreq.require = 0;
                        r = score_best(n->cls, free, &sreq, &v->choice, &why);
                }
                break;
        default:
                r = score_best(n->cls, free, &sreq, &v->choice, &why);
                break;
        }
        if (r < 0) {
                v->r = r;
                v->why = why ? why
                       : r == -ENOSPC ? "not enough free GPUs"
                       : r == -EAGAIN ? "no free GPU set meets the placement now"
                       : r == -ENOEXEC ? "no GPU set of this node can meet the placement"
                                       : "the request cannot be scored";
                return;
        }
        if (!with_priority)
                return;
        prio = score_node_priority(n->cls, free, &v->choice);
        if (req->placement == EXT_PLACEMENT_NVLINK_PREFERRED && !v->choice.all_nvlink_ring)
                prio /= 2;
        v->priority = MAX(0, MIN(prio, EXT_PRIORITY_MAX));
}

static const char *const why_unknown_node = "the node is not in the extender's cluster view";

/* Nodes of one topology class with the same free GPUs get the same verdict: one request
 * decides each distinct (class, annotated, free) once.  An open-addressing table of a power
 * of two slots, about twice the request's nodes and at most EXT_REQUEST_MEMO_SLOTS, so its
 * memory is bounded and a small request does not clear a large table; when it is full the
 * rest is decided node by node. */
#define EXT_REQUEST_MEMO_SLOTS 4096
#define EXT_REQUEST_MEMO_MIN_NODES 9 /* below this, deciding each node costs less */

struct memo_slot {
        const struct score_class *cls; /* NULL: empty */
        bool annotated;
        struct topo_mask free;
        size_t verdict; /* index into the request's verdicts */
};

struct memo {
        struct memo_slot *slots;
        size_t mask; /* slots - 1 */
};

/* A table sized for n nodes; .slots NULL when n is small or memory is short. */
static struct memo
memo_new(size_t n)
{
        size_t size = 16;

        if (n < EXT_REQUEST_MEMO_MIN_NODES)
                return (struct memo){ 0 };
        while (size < 2 * n && size < EXT_REQUEST_MEMO_SLOTS)
                size *= 2;
        return (struct memo){ .slots = calloc(size, sizeof(struct memo_slot)), .mask = size - 1 };
}

static uint64_t
memo_hash(const struct ext_node *node, const struct topo_mask *free)
{
        uint64_t h = (uint64_t)(uintptr_t)node->cls * 0x9e3779b97f4a7c15ull ^ node->annotated;

        for (size_t k = 0; k < ELEMENTSOF(free->w); k++)
                h = (h ^ free->w[k]) * 0x100000001b3ull;
        return h ^ (h >> 29);
}

/* The slot for (node, free): a match, an empty slot to fill, or NULL when the probe
 * found neither within a short run (then decide directly). */
static struct memo_slot *
memo_find(const struct memo *memo, const struct ext_node *node, const struct topo_mask *free)
{
        size_t k = (size_t)memo_hash(node, free) & memo->mask;

        for (unsigned probe = 0; probe < 16; probe++, k = (k + 1) & memo->mask) {
                struct memo_slot *m = &memo->slots[k];

                if (!m->cls || (m->cls == node->cls && m->annotated == node->annotated &&
                                topo_mask_equal(&m->free, free)))
                        return m;
        }
        return NULL;
}

static int
filter_common(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
              const struct ext_request *req, const struct ext_node *const *nodes, size_t n,
              uint64_t now_ns, bool with_priority, struct ext_verdict *ret)
{
        struct memo memo = memo_new(n);
        bool holds = !ext__ledger_maybe_empty(l);
        int fits = 0;

        /* First the free GPUs of every node, in one short critical section (bind rechecks
         * under the lock, so a hold added after it only costs a retry), none while the
         * ledger is empty; ret[i].free carries them to the second pass. */
        if (holds)
                ext__ledger_lock(l);
        for (size_t i = 0; i < n; i++) {
                struct topo_mask *free = &ret[i].free;

                if (!nodes[i])
                        continue;
                if (holds)
                        free_gpus_locked(c, l, req, nodes[i], now_ns, free);
                else
                        for (size_t k = 0; k < ELEMENTSOF(free->w); k++)
                                free->w[k] = nodes[i]->healthy.w[k] & ~nodes[i]->used.w[k];
        }
        if (holds)
                ext__ledger_unlock(l);

        for (size_t i = 0; i < n; i++) {
                struct memo_slot *m = NULL;
                struct topo_mask free;

                if (!nodes[i]) {
                        ret[i] = (struct ext_verdict){ .r = -ENOENT, .why = why_unknown_node };
                        continue;
                }
                free = ret[i].free;
                if (memo.slots && nodes[i]->cls)
                        m = memo_find(&memo, nodes[i], &free);
                if (m && m->cls)
                        ret[i] = ret[m->verdict];
                else {
                        decide(cfg, req, nodes[i], &free, with_priority, &ret[i]);
                        if (m)
                                *m = (struct memo_slot){ .cls = nodes[i]->cls,
                                                         .annotated = nodes[i]->annotated,
                                                         .free = free, .verdict = i };
                }
                if (ret[i].r == 0)
                        fits++;
        }
        free(memo.slots);
        return fits;
}

int
ext_filter(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
           const struct ext_request *req, const struct ext_node *const *nodes, size_t n,
           uint64_t now_ns, struct ext_verdict *ret)
{
        return filter_common(c, l, cfg, req, nodes, n, now_ns, false, ret);
}

int
ext_prioritize(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
               const struct ext_request *req, const struct ext_node *const *nodes, size_t n,
               uint64_t now_ns, struct ext_verdict *ret)
{
        int fits = filter_common(c, l, cfg, req, nodes, n, now_ns, true, ret);
        ssize_t best = -1;
        double top = 0;

        if (fits <= 0 || req->count == 0)
                return fits;
        /* scoring's priority compares a set with the best its own node could give; across
         * nodes the bandwidth itself matters too: average it with the set's bandwidth
         * relative to the best fitting node of this request (docs/annotations.md, "Priority"). */
        for (size_t i = 0; i < n; i++)
                if (ret[i].r == 0)
                        top = MAX(top, ret[i].choice.busbw_gbps);
        for (size_t i = 0; i < n && top > 0; i++)
                if (ret[i].r == 0) {
                        double rel = ret[i].choice.busbw_gbps / top;
                        int p = (int)(((double)ret[i].priority + EXT_PRIORITY_MAX * rel) / 2 + 0.5);

                        ret[i].priority = MAX(0, MIN(p, EXT_PRIORITY_MAX));
                }
        if (!req->uid[0])
                return fits;
        for (size_t i = 0; i < n; i++) {
                if (ret[i].r != 0)
                        continue;
                if (best < 0 || ret[i].priority > ret[best].priority ||
                    (ret[i].priority == ret[best].priority &&
                     strcmp(nodes[i]->name, nodes[best]->name) < 0))
                        best = (ssize_t)i;
        }
        /* Tentative: bind takes it if it is still free, or picks afresh; a failure to record
         * it (ledger full) only costs that guarantee, never correctness. */
        ext__ledger_lock(l);
        (void)ext__ledger_put_locked(l, req->uid, nodes[best]->name, &ret[best].choice.set,
                                     EXT_HOLD_RESERVED, now_ns);
        ext__ledger_unlock(l);
        return fits;
}

static bool
mask_subset(const struct topo_mask *a, const struct topo_mask *b)
{
        for (size_t k = 0; k < ELEMENTSOF(a->w); k++)
                if (a->w[k] & ~b->w[k])
                        return false;
        return true;
}

int
ext_bind(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
         const struct ext_request *req, const char *node, uint64_t now_ns,
         struct score_choice *ret, const char **ret_why)
{
        const struct ext_node *n = ext_cluster_find_node(c, node);
        const struct ext_pod *p = req->uid[0] ? ext_cluster_find_pod(c, req->uid) : NULL;
        const struct topo_mask *mine;
        struct ext_verdict v;
        struct topo_mask free;
        int r;

        if (!n)
                return set_why(ret_why, why_unknown_node), -ENOENT;
        if (!req->uid[0])
                return set_why(ret_why, "the pod has no UID"), -EINVAL;
        if (p && p->node >= 0 && topo_mask_count(&p->gpus) > 0) {
                if (score_evaluate(n->cls, &p->gpus, NULL, ret) < 0)
                        return set_why(ret_why, "the pod's recorded GPUs are invalid"), -EINVAL;
                return set_why(ret_why, "the pod already has GPUs"), -EALREADY;
        }
        if (req->count == 0) {
                *ret = (struct score_choice){ 0 };
                return 0;
        }

        ext__ledger_lock(l);
        /* A repeated bind (the scheduler retried) gets the set already committed. */
        mine = ext__ledger_find_locked(l, req->uid, n->name, EXT_HOLD_COMMITTED, now_ns);
        if (mine) {
                r = score_evaluate(n->cls, mine, NULL, ret);
                ext__ledger_unlock(l);
                return r < 0 ? (set_why(ret_why, "the committed set is invalid"), r) : 0;
        }
        free_gpus_locked(c, l, req, n, now_ns, &free);
        mine = ext__ledger_find_locked(l, req->uid, n->name, EXT_HOLD_RESERVED, now_ns);
        if (mine && topo_mask_count(mine) == req->count && mask_subset(mine, &free)) {
                v = (struct ext_verdict){ 0 };
                v.r = score_evaluate(n->cls, mine, &free, &v.choice);
        } else
                decide(cfg, req, n, &free, false, &v);
        /* Committed on success; on failure the pod's reservations go too (the scheduler
         * starts over with filter). */
        r = ext__ledger_put_locked(l, req->uid, n->name, v.r == 0 ? &v.choice.set : NULL,
                                   EXT_HOLD_COMMITTED, now_ns);
        if (v.r == 0)
                v.r = r;
        ext__ledger_unlock(l);

        if (v.r < 0)
                return set_why(ret_why, v.why ? v.why : "the GPU set cannot be recorded"), v.r;
        *ret = v.choice;
        return 0;
}

int
ext_preempt(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
            const struct ext_request *req, const struct ext_node *node,
            const char *const *victims, size_t n, uint64_t now_ns, bool *needed,
            struct ext_verdict *ret)
{
        struct topo_mask free, freed = { 0 }, with;
        struct ext_verdict v;

        if (!node) {
                *ret = (struct ext_verdict){ .r = -ENOENT, .why = why_unknown_node };
                return -ENOENT;
        }
        ext__ledger_lock(l);
        free_gpus_locked(c, l, req, node, now_ns, &free);
        ext__ledger_unlock(l);

        for (size_t i = 0; i < n; i++) {
                const struct ext_pod *p = ext_cluster_find_pod(c, victims[i]);

                if (p && p->node >= 0 && &c->nodes[p->node] == node)
                        for (size_t k = 0; k < ELEMENTSOF(freed.w); k++)
                                freed.w[k] |= p->gpus.w[k] & node->healthy.w[k];
        }

        /* Fewest evictions first: does it fit without the GPU victims at all? */
        decide(cfg, req, node, &free, true, &v);
        if (v.r != 0) {
                for (size_t k = 0; k < ELEMENTSOF(with.w); k++)
                        with.w[k] = free.w[k] | freed.w[k];
                decide(cfg, req, node, &with, true, &v);
        }
        if (v.r != 0) {
                *ret = v;
                return v.r;
        }
        for (size_t i = 0; i < n; i++) {
                const struct ext_pod *p = ext_cluster_find_pod(c, victims[i]);
                bool gpu_victim = p && p->node >= 0 && &c->nodes[p->node] == node &&
                                  topo_mask_count(&p->gpus) > 0;
                bool overlaps = false;

                if (gpu_victim)
                        for (size_t k = 0; k < ELEMENTSOF(p->gpus.w); k++)
                                overlaps |= (p->gpus.w[k] & v.choice.set.w[k]) != 0;
                needed[i] = !gpu_victim || overlaps;
        }
        *ret = v;
        return 0;
}
