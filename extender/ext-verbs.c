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

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "str.h"

static const struct placement_row {
        const char *name; /* first: DEFINE_ROW_TABLE */
        unsigned require;
        unsigned prefer;
        bool lowest_free;
} placements[_EXT_PLACEMENT_MAX] = {
#define PLACEMENT_ROW(id, name_, require_, prefer_, lowest_free_)                            \
        [EXT_PLACEMENT_##id] = { .name = name_, .require = require_, .prefer = prefer_,       \
                                 .lowest_free = lowest_free_ },
        EXT_PLACEMENTS(PLACEMENT_ROW)
#undef PLACEMENT_ROW
};

DEFINE_ROW_TABLE(ext_placement, enum ext_placement, placements)

unsigned
ext_placement_require(enum ext_placement p)
{
        return (size_t)p < ELEMENTSOF(placements) ? placements[p].require : 0;
}

unsigned
ext_placement_prefer(enum ext_placement p)
{
        return (size_t)p < ELEMENTSOF(placements) ? placements[p].prefer : 0;
}

bool
ext_placement_lowest_free(enum ext_placement p)
{
        return (size_t)p < ELEMENTSOF(placements) && placements[p].lowest_free;
}

static const char *const unannotated_names[_EXT_UNANNOTATED_MAX] = {
        [EXT_UNANNOTATED_PCIE] = "pcie",
        [EXT_UNANNOTATED_REJECT] = "reject",
};

DEFINE_STRING_TABLE(ext_unannotated, enum ext_unannotated, unannotated_names)

/* Node labels naming domains, by level, first listed first (docs/placement.md). */
static const struct {
        unsigned level;
        const char *key;
} default_domain_labels[] = {
        { 0, "nvidia.com/gpu.clique" },                   /* GPU Feature Discovery */
        { 0, "accelerator.topograph.run/domain" },        /* NVIDIA Topograph >= 1.0 */
        { 0, "network.topology.nvidia.com/accelerator" }, /* NVIDIA Topograph < 1.0 */
        { 1, "fabric.topograph.run/tier-0" },             /* switch closest to the node */
        { 1, "network.topology.nvidia.com/leaf" },
        { 1, "topology.k8s.aws/network-node-layer-3" },   /* EKS: bottom layer */
        { 1, "cloud.google.com/gce-topology-subblock" },  /* GKE */
        { 2, "fabric.topograph.run/tier-1" },
        { 2, "network.topology.nvidia.com/spine" },
        { 2, "topology.k8s.aws/network-node-layer-2" },
        { 2, "cloud.google.com/gce-topology-block" },
        { 3, "fabric.topograph.run/tier-2" },
        { 3, "network.topology.nvidia.com/core" },
        { 3, "topology.k8s.aws/network-node-layer-1" },
};
_Static_assert(ELEMENTSOF(default_domain_labels) <= EXT_MAX_DOMAIN_LABELS, "too many labels");

void
ext_config_default(struct ext_config *cfg)
{
        *cfg = (struct ext_config){
                .n_resources = 1,
                .resources = { EXT_DEFAULT_RESOURCE },
                .unannotated = EXT_UNANNOTATED_PCIE,
                .reservation_ttl_ns = EXT_RESERVATION_TTL_NS,
                .committed_ttl_ns = EXT_COMMITTED_TTL_NS,
                .group_ttl_ns = PLACE_GROUP_TTL_NS,
        };
        score_config_default(&cfg->score);
        place_config_default(&cfg->place);
        for (size_t i = 0; i < ELEMENTSOF(default_domain_labels); i++) {
                cfg->domain_labels[i].level = default_domain_labels[i].level;
                str_copy(cfg->domain_labels[i].key, sizeof(cfg->domain_labels[i].key),
                         default_domain_labels[i].key, strlen(default_domain_labels[i].key));
        }
        cfg->n_domain_labels = ELEMENTSOF(default_domain_labels);
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
        *ret = n->healthy;
        topo_mask_andnot(ret, &n->used);
        topo_mask_andnot(ret, &held);
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
        unsigned prefer;
        bool fell_back = false;
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

        /* The placement's row says how (EXT_PLACEMENTS in ext-core.h). */
        prefer = ext_placement_prefer(req->placement);
        if (ext_placement_lowest_free(req->placement)) {
                r = lowest_free(n, free, req->count, &v->choice);
                if (r == -ENOSPC)
                        why = "not enough free GPUs";
        } else if (prefer) {
                sreq.require |= prefer;
                r = score_best(n->cls, free, &sreq, &v->choice, &why);
                if (r == -EAGAIN || r == -ENOEXEC) {
                        sreq.require &= ~prefer;
                        fell_back = true; /* no set meets prefer: the best other one */
                        r = score_best(n->cls, free, &sreq, &v->choice, &why);
                }
        } else
                r = score_best(n->cls, free, &sreq, &v->choice, &why);
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
        if (fell_back)
                prio /= 2;
        v->priority = MAX(0, MIN(prio, EXT_PRIORITY_MAX));
}

static const char *const why_unknown_node = "the node is not in the extender's cluster view";

/* Nodes of one topology class with the same free GPUs get the same verdict: one request
 * decides each distinct (class, annotated, free) once.  An open-addressing table of a power
 * of two slots kept at most half full: it starts at EXT_REQUEST_MEMO_START slots and
 * doubles, up to about twice the request's nodes and at most EXT_REQUEST_MEMO_SLOTS, so its
 * memory is bounded and a request clears only what its distinct verdicts need (a 5,000-node
 * request over one 8-GPU class has at most 256; clearing 4,096 slots up front was a tenth
 * of its decision); when it is full the rest is decided node by node.  For the snapshot's
 * own nodes that no ledger hold changes, the snapshot's node states (ext_cluster.node_state,
 * numbered once per view) give the same sharing by index, without hashing each node's key;
 * this table then serves the rest: nodes with a hold, nodes from outside the view. */
/* Holds gathered at once for a request of at least EXT_HELD_GATHER_MIN_NODES nodes (a walk
 * over the ledger's 1,024 buckets costs about what 50 per-node lookups do), when at most
 * EXT_HELD_GATHER count. */
#define EXT_HELD_GATHER 32
#define EXT_HELD_GATHER_MIN_NODES 64
#define EXT_REQUEST_MEMO_SLOTS 4096
#define EXT_REQUEST_MEMO_START 256
#define EXT_REQUEST_MEMO_MIN_NODES 9 /* below this, deciding each node costs less */

/* The key is all a verdict depends on besides the request: the node's class, whether its
 * topology is annotated, its free GPUs.  (The cluster term's loss too: place_loss reads
 * nothing else of a node; test memo_keeps_each_nodes_loss_in_a_partly_labelled_cluster.) */
struct memo_slot {
        const struct score_class *cls; /* NULL: empty */
        bool annotated;
        struct topo_mask free;
        size_t verdict; /* index into the request's verdicts */
};

struct memo {
        struct memo_slot *slots;
        size_t mask;  /* slots - 1 */
        size_t used;  /* slots filled */
        size_t limit; /* the most slots it may grow to */
};

/* A table for n nodes; .slots NULL when n is small or memory is short. */
static struct memo
memo_new(size_t n)
{
        size_t size = 16, limit = 16;

        if (n < EXT_REQUEST_MEMO_MIN_NODES)
                return (struct memo){ 0 };
        while (limit < 2 * n && limit < EXT_REQUEST_MEMO_SLOTS)
                limit *= 2;
        size = MIN(limit, (size_t)EXT_REQUEST_MEMO_START);
        return (struct memo){ .slots = calloc(size, sizeof(struct memo_slot)), .mask = size - 1,
                              .limit = limit };
}

static uint64_t
memo_key_hash(const struct score_class *cls, bool annotated, const struct topo_mask *free)
{
        uint64_t h = (uint64_t)(uintptr_t)cls * 0x9e3779b97f4a7c15ull ^ annotated;

        for (size_t k = 0; k < ELEMENTSOF(free->w); k++)
                h = (h ^ free->w[k]) * 0x100000001b3ull;
        return h ^ (h >> 29);
}

static uint64_t
memo_hash(const struct ext_node *node, const struct topo_mask *free)
{
        return memo_key_hash(node->cls, node->annotated, free);
}

static uint64_t
memo_slot_hash(const struct memo_slot *m)
{
        return memo_key_hash(m->cls, m->annotated, &m->free);
}

/* Twice the slots, when the table is half full and may grow; on a failed allocation it
 * stays as it is (a full table only decides more nodes directly). */
static void
memo_grow(struct memo *memo)
{
        size_t size = 2 * (memo->mask + 1);
        struct memo_slot *slots;

        if (!memo->slots || 2 * memo->used < memo->mask + 1 || size > memo->limit)
                return;
        slots = calloc(size, sizeof(*slots));
        if (!slots)
                return;
        for (size_t i = 0; i <= memo->mask; i++) {
                size_t k;

                if (!memo->slots[i].cls)
                        continue;
                k = memo_slot_hash(&memo->slots[i]) & (size - 1);
                while (slots[k].cls)
                        k = (k + 1) & (size - 1);
                slots[k] = memo->slots[i];
        }
        free(memo->slots);
        memo->slots = slots;
        memo->mask = size - 1;
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

/* The cluster term of v's set on node (placement/): against the snapshot's view, using
 * its cached capacity when node is one of the snapshot's own nodes. */
static double
node_loss(const struct ext_cluster *c, const struct ext_node *node, const struct ext_verdict *v)
{
        size_t i = node >= c->nodes && node < c->nodes + c->n_nodes ? (size_t)(node - c->nodes)
                                                                   : PLACE_NO_NODE;
        double loss = place_loss(c->place, i, node->cls, &v->free, &v->choice.set);

        return loss > 0 ? loss : 0;
}

/* The pod's group with its size: the request's (topofit.io/group-size, or a source that
 * puts the size on the pod) when known, else the PodGroup's gang minCount from the view
 * (a group from spec.schedulingGroup; docs/placement.md, "Groups"); and the PodGroup's
 * topology constraint, a requirement (as kube-scheduler's Topology-Aware Workload
 * Scheduling takes it): the group's domain lies within one domain of its level, and its
 * pods keep to it (domain-required).  Returns req's own group or buf, filled. */
static const struct place_group_request *
group_of(const struct ext_cluster *c, const struct ext_request *req,
         struct place_group_request *buf)
{
        const struct ext_group_size *pg;

        if (!req->group.id[0])
                return &req->group;
        pg = ext_cluster_group(c, req->group.id);
        if (!pg || (req->group.size > 0 && !pg->has_within))
                return &req->group;
        *buf = req->group;
        if (buf->size == 0)
                buf->size = pg->size;
        if (pg->has_within) {
                buf->has_within = true;
                buf->within = pg->within;
                if (buf->mode != PLACE_DOMAIN_OFF)
                        buf->mode = PLACE_DOMAIN_REQUIRED;
        }
        return buf;
}

/* Whether apply_groups() may change any verdict of req: groups are live in the ledger's
 * table, or req's pod is grouped with a domain mode.  When not, it returns at once. */
static bool
groups_may_act(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_request *req,
               uint64_t now_ns)
{
        struct place_groups *g = ext__ledger_groups(l);

        if (!c || !c->place || !g || req->count == 0)
                return false;
        return place_groups_live(g, now_ns) > 0 ||
               (req->group.id[0] && req->group.mode != PLACE_DOMAIN_OFF);
}

/* domain-preferred, a group given a domain that could not hold it whole (none could): once no
 * node of that domain fits this pod, the domain to steer it to instead is the one where the
 * fitting nodes give the most sets of the group's shape (place_spill_domain), so the members
 * that spill pack into the fewest domains rather than spreading over nodes that tie on the
 * cluster term (issue 11).  Leaves *level and *dom as they are while a node of the domain
 * fits, or when no fitting node in a domain has a set. */
static void
spill_domain(const struct ext_cluster *c, const struct place_group_request *grp,
             const struct ext_node *const *nodes, size_t n, const struct ext_verdict *ret,
             const uint32_t *rep, unsigned *level, ssize_t *dom)
{
        CLEANUP(freep) const struct topo_mask **cand = NULL;
        unsigned l;
        ssize_t d;

        cand = calloc(MAX(c->n_nodes, (size_t)1), sizeof(*cand));
        if (!cand)
                return; /* steered to the group's own domain, as before */
        for (size_t i = 0; i < n; i++) {
                const struct ext_verdict *v = ext_verdict_at(ret, rep, i);
                size_t idx;

                if (v->r != 0 || !nodes[i] || nodes[i] < c->nodes ||
                    nodes[i] >= c->nodes + c->n_nodes)
                        continue;
                idx = (size_t)(nodes[i] - c->nodes);
                if (place_view_node_domain(c->place, idx, *level) == *dom)
                        return; /* the group's domain still has room for this pod */
                cand[idx] = &v->free;
        }
        if (place_spill_domain(c->place, cand, grp->count, grp->require, &l, &d) == 1) {
                *level = l;
                *dom = d;
        }
}

/* Node i's verdict copied from its representative's, for every i, and rep made the identity:
 * each entry then stands alone (a step that changes one node's verdict needs that). */
static void
expand(struct ext_verdict *ret, uint32_t *rep, size_t n)
{
        for (size_t i = 0; rep && i < n; i++)
                if (rep[i] != i) {
                        ret[i] = ret[rep[i]];
                        rep[i] = (uint32_t)i;
                }
}

/* What the group step does to one node's verdict (apply_groups), one byte: off_domain,
 * planned, and the reason it no longer fits (GROUP_TURN: 0 it still does). */
#define GROUP_OFF_DOMAIN 0x1u
#define GROUP_PLANNED 0x2u
#define GROUP_NO_ROOM (1u << 2)
#define GROUP_OUTSIDE (2u << 2)
#define GROUP_HELD (3u << 2)
#define GROUP_TURN(o) ((o) >> 2)

/* prioritize, a grouped pod whose group has a node plan (placement/: made with its domain):
 * marks the pod's planned node among those that still fit (out[i] not turned;
 * place_group_plan_pick) as GROUP_PLANNED (its verdict itself when out is NULL, rep then
 * NULL too), which rank_plan() puts first, so the gang's
 * members pack onto the nodes planned for them instead of spreading over nodes that tie
 * (the scheduler's assumed members hold nothing in the extender's view). */
static void
plan_node(const struct ext_cluster *c, struct place_groups *g, const struct ext_request *req,
          const struct ext_node *const *nodes, size_t n, uint64_t now_ns,
          struct ext_verdict *ret, const uint32_t *rep, uint8_t *out)
{
        CLEANUP(freep) bool *fits = calloc(MAX(c->n_nodes, (size_t)1), sizeof(*fits));
        size_t at;

        if (!fits || !req->uid[0])
                return; /* ranked without the plan */
        for (size_t i = 0; i < n; i++)
                if (ext_verdict_at(ret, rep, i)->r == 0 && !(out && GROUP_TURN(out[i])) &&
                    nodes[i] && nodes[i] >= c->nodes && nodes[i] < c->nodes + c->n_nodes)
                        fits[nodes[i] - c->nodes] = true;
        if (place_group_plan_pick(g, c->place, req->group.id, req->uid, fits, now_ns, &at) != 1)
                return;
        for (size_t i = 0; i < n; i++)
                if (ext_verdict_at(ret, rep, i)->r == 0 && !(out && GROUP_TURN(out[i])) &&
                    nodes[i] == &c->nodes[at]) {
                        if (out)
                                out[i] |= GROUP_PLANNED;
                        else
                                ret[i].planned = true; /* rep is NULL: its own verdict */
                }
}

static void
group_outcome_apply(struct ext_verdict *v, uint8_t o)
{
        static const char *const why[] = {
                [GROUP_TURN(GROUP_NO_ROOM)] = "no domain has room for the pod's group "
                                              "(domain-required)",
                [GROUP_TURN(GROUP_OUTSIDE)] = "the node is outside the domain the pod's group "
                                              "was given (domain-required)",
                [GROUP_TURN(GROUP_HELD)] = "the node's GPUs are held for another pod group's "
                                           "pods that are not bound yet",
        };

        if (o & GROUP_OFF_DOMAIN)
                v->off_domain = true;
        if (o & GROUP_PLANNED)
                v->planned = true;
        if (GROUP_TURN(o)) {
                v->r = -EAGAIN;
                v->why = why[GROUP_TURN(o)];
        }
}

/* The group step's outcomes applied with the verdicts kept compact: nodes that share a
 * verdict and an outcome share the changed verdict, the first of them holding it (rep[i]
 * <= i still), so prioritize can still rank the distinct verdicts only (a gang member's
 * domain or a live group's holds had every verdict copied out, 5,000 of them, and ranked one
 * by one).  A representative whose own outcome changes its entry in place has the entry's
 * earlier bytes saved for the sharers whose outcome differs.  Without rep each node's
 * entry is its own.  false when memory is short (nothing changed: the caller expands). */
static bool
apply_outcomes(struct ext_verdict *ret, uint32_t *rep, size_t n, const uint8_t *out)
{
        struct slot {
                uint32_t rep, at; /* at: the entry holding (rep, o); UINT32_MAX empty */
                uint8_t o;
        };
        CLEANUP(freep) struct slot *t = NULL;
        CLEANUP(freep) struct ext_verdict *saved = NULL;
        CLEANUP(freep) uint32_t *saved_at = NULL;
        size_t cap = 16, n_saved = 0, n_apart = 0, k = 0;

        if (!rep) {
                for (size_t i = 0; i < n; i++)
                        group_outcome_apply(&ret[i], out[i]);
                return true;
        }
        for (size_t i = 0; i < n; i++) {
                n_saved += rep[i] == i && out[i];
                n_apart += rep[i] != i && out[i] != out[rep[i]];
        }
        while (cap < 2 * n_apart)
                cap *= 2;
        t = malloc(cap * sizeof(*t));
        saved = malloc(MAX(n_saved, (size_t)1) * sizeof(*saved));
        saved_at = n_saved ? malloc(n * sizeof(*saved_at)) : NULL;
        if (!t || !saved || (n_saved && !saved_at))
                return false;
        for (size_t j = 0; j < cap; j++)
                t[j].at = UINT32_MAX;
        for (size_t i = 0; i < n; i++) {
                uint32_t r = rep[i];
                uint8_t o = out[i];
                const struct ext_verdict *orig;
                uint64_t h;
                size_t j;

                if (r == i) {
                        /* Its sharers come after it: keep what they may need. */
                        if (o) {
                                saved_at[i] = (uint32_t)k;
                                saved[k++] = ret[i];
                                group_outcome_apply(&ret[i], o);
                        }
                        continue;
                }
                if (o == out[r])
                        continue; /* its representative's entry, changed alike */
                orig = out[r] ? &saved[saved_at[r]] : &ret[r];
                h = ((uint64_t)r << 8 | o) * 0x9E3779B97F4A7C15ull;
                for (j = (size_t)(h >> 32) & (cap - 1);
                     t[j].at != UINT32_MAX && (t[j].rep != r || t[j].o != o);
                     j = (j + 1) & (cap - 1))
                        ;
                if (t[j].at != UINT32_MAX) {
                        rep[i] = t[j].at;
                        continue;
                }
                ret[i] = *orig;
                group_outcome_apply(&ret[i], o);
                rep[i] = (uint32_t)i;
                t[j] = (struct slot){ .rep = r, .at = (uint32_t)i, .o = o };
        }
        return true;
}

/* The pod-group pass (placement/'s groups), after the per-node verdicts: a grouped pod
 * gets its group's domain (chosen now for the group's first pod) and is kept in it
 * (domain-required) or steered to it (domain-preferred: off_domain), and in prioritize
 * its planned node marked (plan_node); every pod is kept off GPUs that another group's
 * domain holds for its pods not yet bound.  Per node (nodes of one class differ in
 * domain), each node's outcome first, then applied with the verdicts kept compact
 * (apply_outcomes).  Returns how many verdicts it turned. */
static int
apply_groups(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_request *req,
             const struct ext_node *const *nodes, size_t n, uint64_t now_ns, bool with_priority,
             struct ext_verdict *ret, uint32_t *rep)
{
        struct place_groups *g = ext__ledger_groups(l);
        struct place_group_request sized;
        const struct place_group_request *grp = group_of(c, req, &sized);
        CLEANUP(freep) const struct topo_mask **free_of = NULL;
        CLEANUP(freep) struct topo_mask *others = NULL;
        CLEANUP(freep) uint8_t *out = NULL;
        static const struct topo_mask no_gpus;
        struct place_group_domain d;
        bool live, required = grp->mode == PLACE_DOMAIN_REQUIRED;
        ssize_t dom = -1;
        int x = 0, turned = 0;

        if (!groups_may_act(c, l, req, now_ns))
                return 0;
        /* Without room for the outcomes, each node's verdict of its own, changed at once. */
        out = calloc(MAX(n, (size_t)1), sizeof(*out));
        if (!out) {
                expand(ret, rep, n);
                rep = NULL;
        }
        live = place_groups_live(g, now_ns) > 0;
        /* Domains and holds count the free GPUs this request saw (ledger holds applied: GPUs
         * bound or reserved since the snapshot was built are not free), not the snapshot's;
         * on the nodes the request does not name (the scheduler's own filter left them out:
         * full, or assumed for a gang member) the snapshot's less the ledger's holds, so a
         * gang bound a moment ago through this extender is not taken for free room while the
         * watch catches up. */
        free_of = calloc(MAX(c->n_nodes, (size_t)1), sizeof(*free_of));
        for (size_t i = 0; free_of && i < n; i++)
                if (nodes[i] && nodes[i] >= c->nodes && nodes[i] < c->nodes + c->n_nodes)
                        free_of[nodes[i] - c->nodes] = &ext_verdict_at(ret, rep, i)->free;
        if (free_of && n < c->n_nodes && !ext__ledger_maybe_empty(l))
                others = malloc(c->n_nodes * sizeof(*others));
        if (others) {
                ext__ledger_lock(l);
                for (size_t i = 0; i < c->n_nodes; i++)
                        if (!free_of[i] && c->nodes[i].cls) {
                                free_gpus_locked(c, l, req, &c->nodes[i], now_ns, &others[i]);
                                free_of[i] = &others[i];
                        }
                ext__ledger_unlock(l);
        }
        /* A closed node (cordoned, not Ready) has no room for a group: a domain is not chosen
         * for, nor held on, GPUs that kube-scheduler will not hand to the gang.  Pods bound
         * there still count (they are in the view's used GPUs). */
        for (size_t i = 0; free_of && i < c->n_nodes; i++)
                if (c->nodes[i].closed)
                        free_of[i] = &no_gpus;
        if (grp->id[0] && grp->mode != PLACE_DOMAIN_OFF) {
                x = place_group_domain(g, c->place, grp, free_of, now_ns, &d);
                if (x == 1)
                        dom = place_view_find_domain(c->place, d.level, d.name);
        }
        live = live || x == 1;
        if (x == 0 && !live)
                return 0;
        if (x == 1 && !required && !d.whole && dom >= 0)
                spill_domain(c, grp, nodes, n, ret, rep, &d.level, &dom);
        for (size_t i = 0; i < n; i++) {
                const struct ext_node *node = nodes[i];
                const struct ext_verdict *v = ext_verdict_at(ret, rep, i);
                uint8_t o = 0;
                size_t idx;

                if (v->r != 0 || !node)
                        continue;
                idx = node >= c->nodes && node < c->nodes + c->n_nodes ? (size_t)(node - c->nodes)
                                                                       : PLACE_NO_NODE;
                if (x < 0 && required)
                        o = GROUP_NO_ROOM;
                else if (x == 1 && (idx == PLACE_NO_NODE ||
                                    place_view_node_domain(c->place, idx, d.level) != dom))
                        o = required ? GROUP_OUTSIDE : GROUP_OFF_DOMAIN;
                if (!GROUP_TURN(o) && live && idx != PLACE_NO_NODE &&
                    place_group_check(g, c->place, idx, &v->free, &v->choice.set, grp->id,
                                      free_of, now_ns, NULL) == -EBUSY)
                        o |= GROUP_HELD;
                if (out)
                        out[i] = o;
                else
                        group_outcome_apply(&ret[i], o);
                turned += GROUP_TURN(o) != 0;
        }
        if (x == 1 && with_priority)
                plan_node(c, g, req, nodes, n, now_ns, ret, rep, out);
        if (out && !apply_outcomes(ret, rep, n, out)) {
                expand(ret, rep, n);
                (void)apply_outcomes(ret, NULL, n, out);
        }
        return turned;
}

/* Filter and prioritize's common part: the verdicts of the n nodes.  Without rep, each into
 * ret[i].  With rep, compact: node i's verdict is ret[rep[i]], where rep[i] <= i; a node
 * whose (class, annotated, free GPUs) repeats an earlier node's gets only rep[i] (nodes of
 * one class with the same free GPUs share a verdict, and 5,000 112-byte copies were most of
 * the request's memory traffic), the others ret[i] with rep[i] == i.  The group step keeps
 * them compact (apply_outcomes). */
static int
filter_common(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
              const struct ext_request *req, const struct ext_node *const *nodes, size_t n,
              uint64_t now_ns, bool with_priority, struct ext_verdict *ret, uint32_t *rep)
{
        struct memo memo = memo_new(n);
        bool holds = !ext__ledger_maybe_empty(l);
        struct ext_held held[EXT_HELD_GATHER];
        char held_names[EXT_HELD_GATHER][EXT_NAME_MAX];
        int n_held = -1, fits = 0;
        /* Each node's free GPUs between the two passes when they are looked up node by node
         * under the ledger's lock: beside the verdicts in compact mode, so the copies'
         * verdicts are never touched; in ret[i].free without. */
        CLEANUP(freep) struct topo_mask *freev = NULL;
        CLEANUP(ext__verdict_table_unrefp) struct ext_verdict_table *kept = NULL;
        uint32_t *first = NULL;

        for (size_t i = 0; rep && i < n; i++)
                rep[i] = (uint32_t)i;
        /* First the holds that count against the pod, in one short critical section (bind
         * rechecks under the lock, so a hold added after it only costs a retry), none while
         * the ledger is empty.  A large request gathers them once (their node names copied
         * out, so they may be read after the lock) and each node's free GPUs are summed in
         * the pass that decides it, its record read once; a small one, or one with more
         * holds than the gathering takes, looks each node up in the ledger here. */
        if (holds) {
                /* The node-by-node lookup's array, for a request too small to gather; a
                 * larger one with more holds than the gathering takes (rare) goes without
                 * and keeps a verdict per node, as when memory is short (rep the
                 * identity). */
                if (rep && n < EXT_HELD_GATHER_MIN_NODES)
                        freev = malloc(MAX(n, (size_t)1) * sizeof(*freev));
                ext__ledger_lock(l);
                if (n >= EXT_HELD_GATHER_MIN_NODES)
                        n_held = ext__ledger_holds_locked(l, req->uid[0] ? req->uid : NULL,
                                                          c ? c->generation : 0, now_ns, held,
                                                          ELEMENTSOF(held));
                if (n_held < 0 && !freev)
                        rep = NULL;
                for (int k = 0; k < n_held; k++) {
                        size_t len = strnlen(held[k].node, EXT_NAME_MAX - 1);

                        memcpy(held_names[k], held[k].node, len);
                        held_names[k][len] = '\0';
                        held[k].node = held_names[k];
                }
                for (size_t i = 0; n_held < 0 && i < n; i++)
                        if (nodes[i])
                                free_gpus_locked(c, l, req, nodes[i], now_ns,
                                                 freev ? &freev[i] : &ret[i].free);
                ext__ledger_unlock(l);
        }

        /* The snapshot's node states stand in for the memo's hashing for its own nodes
         * without a hold: first[s] is the node whose verdict state s's nodes share. */
        if (c && c->node_state && memo.slots && (!holds || n_held >= 0)) {
                first = malloc(MAX((size_t)c->n_states, (size_t)1) * sizeof(*first));
                if (first) {
                        struct ext_verdict_key key = {
                                .count = req->count, .require = req->require,
                                .placement = (int)req->placement, .with_priority = with_priority,
                                .reject_unannotated = cfg->unannotated == EXT_UNANNOTATED_REJECT,
                                .loss = with_priority && c->place && cfg->place.cluster_share > 0,
                        };

                        memset(first, 0xff, c->n_states * sizeof(*first));
                        /* The states' verdicts that earlier requests of this shape decided. */
                        kept = ext__verdict_table_get(c->verdicts, &key, c->n_states);
                }
        }
        for (size_t i = 0; i < n; i++) {
                struct memo_slot *m = NULL;
                struct topo_mask free;

                if (!nodes[i]) {
                        ret[i] = (struct ext_verdict){ .r = -ENOENT, .why = why_unknown_node };
                        continue;
                }
                if (first) {
                        /* Its index in the snapshot (a node from elsewhere lands past the
                         * end), and its state unless a hold changes its free GPUs. */
                        size_t at = ((uintptr_t)nodes[i] - (uintptr_t)c->nodes) /
                                    sizeof(*nodes[i]);
                        uint32_t state = at < c->n_nodes ? c->node_state[at] : EXT_NO_STATE;

                        for (int k = 0; state != EXT_NO_STATE && k < n_held; k++)
                                if (held[k].node_hash == nodes[i]->name_hash &&
                                    strcmp(held[k].node, nodes[i]->name) == 0)
                                        state = EXT_NO_STATE;
                        if (state != EXT_NO_STATE && first[state] != UINT32_MAX) {
                                uint32_t f = first[state];

                                if (rep)
                                        rep[i] = f;
                                else
                                        ret[i] = ret[f];
                                fits += ret[f].r == 0;
                                continue;
                        }
                        if (state != EXT_NO_STATE) {
                                if (!ext__verdict_table_read(kept, state, &ret[i])) {
                                        free = nodes[i]->healthy;
                                        topo_mask_andnot(&free, &nodes[i]->used);
                                        decide(cfg, req, nodes[i], &free, with_priority,
                                               &ret[i]);
                                        if (with_priority && ret[i].r == 0 && c->place &&
                                            cfg->place.cluster_share > 0)
                                                ret[i].loss = node_loss(c, nodes[i], &ret[i]);
                                        ext__verdict_table_write(kept, state, &ret[i]);
                                }
                                first[state] = (uint32_t)i;
                                fits += ret[i].r == 0;
                                continue;
                        }
                }
                if (n_held < 0 && holds) {
                        free = freev ? freev[i] : ret[i].free;
                } else {
                        free = nodes[i]->healthy;
                        topo_mask_andnot(&free, &nodes[i]->used);
                        for (int k = 0; k < n_held; k++)
                                if (held[k].node_hash == nodes[i]->name_hash &&
                                    strcmp(held[k].node, nodes[i]->name) == 0)
                                        topo_mask_andnot(&free, &held[k].set);
                }
                if (memo.slots && nodes[i]->cls) {
                        memo_grow(&memo);
                        m = memo_find(&memo, nodes[i], &free);
                }
                if (m && m->cls) {
                        if (rep)
                                rep[i] = (uint32_t)m->verdict;
                        else
                                ret[i] = ret[m->verdict];
                        fits += ret[m->verdict].r == 0;
                        continue;
                }
                decide(cfg, req, nodes[i], &free, with_priority, &ret[i]);
                if (with_priority && ret[i].r == 0 && c && c->place && cfg->place.cluster_share > 0)
                        ret[i].loss = node_loss(c, nodes[i], &ret[i]);
                if (m) {
                        *m = (struct memo_slot){ .cls = nodes[i]->cls,
                                                 .annotated = nodes[i]->annotated, .free = free,
                                                 .verdict = i };
                        memo.used++;
                }
                fits += ret[i].r == 0;
        }
        free(memo.slots);
        free(first);
        if (groups_may_act(c, l, req, now_ns))
                fits -= apply_groups(c, l, req, nodes, n, now_ns, with_priority, ret, rep);
        return fits;
}

int
ext_filter(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
           const struct ext_request *req, const struct ext_node *const *nodes, size_t n,
           uint64_t now_ns, struct ext_verdict *ret)
{
        return filter_common(c, l, cfg, req, nodes, n, now_ns, false, ret, NULL);
}

int
ext_filter_rep(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
               const struct ext_request *req, const struct ext_node *const *nodes, size_t n,
               uint64_t now_ns, struct ext_verdict *ret, uint32_t *rep)
{
        if (n > UINT32_MAX)
                return -E2BIG;
        return filter_common(c, l, cfg, req, nodes, n, now_ns, false, ret, rep);
}

/* Whether the cluster term enters req's priorities (rank_cluster() acts). */
static bool
cluster_term_acts(const struct ext_cluster *c, const struct ext_config *cfg,
                  const struct ext_request *req)
{
        return c && c->place && cfg->place.cluster_share > 0 &&
               req->placement != EXT_PLACEMENT_NONE;
}

/* The node's domain share as the cluster term reads it (0 outside the view). */
static double
node_domain_free(const struct ext_cluster *c, const struct ext_node *node)
{
        if (!node || node < c->nodes || node >= c->nodes + c->n_nodes)
                return 0;
        return place_view_domain_free(c->place, (size_t)(node - c->nodes));
}

/* A verdict as the cluster term ranks it (place_rank), with its node's domain share. */
static struct place_candidate
candidate_of(const struct ext_verdict *v, double domain_free)
{
        return (struct place_candidate){ .fits = v->r == 0, .priority = v->priority,
                                         .tier = place_tier(&v->choice),
                                         .busbw = v->choice.busbw_gbps, .loss = v->loss,
                                         .domain_free = domain_free };
}

/* Folds the cluster term into the priorities (place_rank): among the nodes whose set is of
 * the best link class on offer, those taking least of the cluster's scarce capacity score
 * higher.  Pods that name no topology (placement none) are left as they are. */
static void
rank_cluster(const struct ext_cluster *c, const struct ext_config *cfg,
             const struct ext_request *req, const struct ext_node *const *nodes,
             struct ext_verdict *ret, size_t n)
{
        CLEANUP(freep) struct place_candidate *cand = NULL;
        bool domains;

        if (!cluster_term_acts(c, cfg, req))
                return;
        cand = malloc(MAX(n, (size_t)1) * sizeof(*cand)); /* every entry is written below */
        if (!cand)
                return; /* the per-node priorities stand */
        domains = place_view_has_domains(c->place);
        for (size_t i = 0; i < n; i++)
                cand[i] = candidate_of(&ret[i], domains ? node_domain_free(c, nodes[i]) : 0);
        place_rank(&cfg->place, cand, n);
        for (size_t i = 0; i < n; i++)
                if (ret[i].r == 0)
                        ret[i].priority = cand[i].priority;
}

/* domain-preferred: while some node of the group's domain fits, the others score 0 and
 * the domain's at least 1, so a tie never sends a pod out of its domain. */
static void
rank_domain(struct ext_verdict *ret, const uint32_t *at, size_t n)
{
        bool inside = false, outside = false;

        for (size_t j = 0; j < n; j++) {
                const struct ext_verdict *v = &ret[at ? at[j] : j];

                inside |= v->r == 0 && !v->off_domain;
                outside |= v->r == 0 && v->off_domain;
        }
        for (size_t j = 0; j < n && inside && outside; j++) {
                struct ext_verdict *v = &ret[at ? at[j] : j];

                if (v->r == 0)
                        v->priority = v->off_domain ? 0 : MAX(v->priority, 1);
        }
}

/* A grouped pod's planned node (plan_node) first: it gets the top priority, every other
 * node at most one less, so kube-scheduler's pick, the highest score, follows the plan
 * unless its own scores say otherwise. */
static void
rank_plan(struct ext_verdict *ret, const uint32_t *at, size_t n)
{
        bool planned = false;

        for (size_t j = 0; j < n; j++)
                planned |= ret[at ? at[j] : j].r == 0 && ret[at ? at[j] : j].planned;
        for (size_t j = 0; j < n && planned; j++) {
                struct ext_verdict *v = &ret[at ? at[j] : j];

                if (v->r == 0)
                        v->priority = v->planned ? EXT_PRIORITY_MAX
                                                 : MIN(v->priority, EXT_PRIORITY_MAX - 1);
        }
}

/* scoring's priority compares a set with the best its own node could give; across nodes
 * the bandwidth itself matters too: average it with the set's bandwidth relative to the
 * best fitting node of this request (docs/annotations.md, "Priority").  Over the entries
 * at[0..n) (ret[0..n) without at), as rank_domain() and rank_plan() below. */
static void
rank_bandwidth(struct ext_verdict *ret, const uint32_t *at, size_t n)
{
        double top = 0;

        for (size_t j = 0; j < n; j++)
                if (ret[at ? at[j] : j].r == 0)
                        top = MAX(top, ret[at ? at[j] : j].choice.busbw_gbps);
        for (size_t j = 0; j < n && top > 0; j++) {
                struct ext_verdict *v = &ret[at ? at[j] : j];

                if (v->r == 0) {
                        double rel = v->choice.busbw_gbps / top;
                        int p = (int)(((double)v->priority + EXT_PRIORITY_MAX * rel) / 2 + 0.5);

                        v->priority = MAX(0, MIN(p, EXT_PRIORITY_MAX));
                }
        }
}

/* The per-node priorities of the fitting verdicts turned into the request's: the bandwidth
 * relative to the best node, the cluster term, the group's domain, the group's plan. */
static void
rank(const struct ext_cluster *c, const struct ext_config *cfg, const struct ext_request *req,
     const struct ext_node *const *nodes, struct ext_verdict *ret, size_t n)
{
        rank_bandwidth(ret, NULL, n);
        rank_cluster(c, cfg, req, nodes, ret, n);
        rank_domain(ret, NULL, n);
        rank_plan(ret, NULL, n);
}

/* Whether node a's name sorts before node b's.  The view's nodes are sorted by name and
 * unique, so for two of them the addresses say it. */
static inline bool
name_before(const struct ext_cluster *c, const struct ext_node *a, const struct ext_node *b)
{
        if (c && a >= c->nodes && a < c->nodes + c->n_nodes && b >= c->nodes &&
            b < c->nodes + c->n_nodes)
                return a < b;
        return strcmp(a->name, b->name) < 0;
}


/* rank() over the distinct verdicts only (compact: rep[i] == i), giving every node the
 * priority it would get alone.  Each step reads a verdict's own fields (the group step's
 * flags too: apply_outcomes() gave nodes of one verdict but different outcomes their own)
 * and maxima and minima over the fitting nodes, which copies do not change; the cluster
 * term also reads each node's domain share.  With multi-node domains, then, the term's
 * bounds come from each verdict at the least and the most share among its nodes
 * (place_rank_bounds), each fitting node's priority from its own share (place_rank_one),
 * and nodes of one verdict that end at different priorities get one entry per priority
 * (copied out for the first node of each; at most PLACE_PRIORITY_MAX + 1 a verdict).
 * Returns false (nothing done) when memory is short or nothing fits. */
static bool
rank_distinct(const struct ext_cluster *c, const struct ext_config *cfg,
              const struct ext_request *req, const struct ext_node *const *nodes,
              struct ext_verdict *ret, size_t n, uint32_t *rep)
{
        CLEANUP(freep) uint32_t *at = NULL;   /* the fitting entries, rep[i] == i */
        CLEANUP(freep) uint32_t *slot = NULL; /* with domains: an entry's place in at */
        CLEANUP(freep) struct place_candidate *cand = NULL;
        CLEANUP(freep) double *share = NULL;
        CLEANUP(freep) uint32_t(*by_prio)[PLACE_PRIORITY_MAX + 1] = NULL;
        struct place_rank_bounds b;
        bool term = cluster_term_acts(c, cfg, req);
        bool domains = term && place_view_has_domains(c->place);
        size_t k = 0, m;

        if (n < 2)
                return false;
        at = malloc(n * sizeof(*at));
        if (!at)
                return false;
        for (size_t i = 0; i < n; i++)
                if (rep[i] == i && ret[i].r == 0)
                        at[k++] = (uint32_t)i;
        if (k == 0)
                return false;
        m = k;
        if (term) {
                cand = malloc(2 * k * sizeof(*cand));
                slot = domains ? malloc(n * sizeof(*slot)) : NULL;
                share = domains ? malloc(n * sizeof(*share)) : NULL;
                by_prio = domains ? malloc(k * sizeof(*by_prio)) : NULL;
                if (!cand || (domains && (!slot || !share || !by_prio)))
                        return false;
        }
        rank_bandwidth(ret, at, k);
        if (term) {
                /* Two candidates per verdict: at its least share and its most (0 and 0
                 * without domains). */
                for (size_t j = 0; j < k; j++) {
                        if (domains)
                                slot[at[j]] = (uint32_t)j;
                        cand[2 * j] = candidate_of(&ret[at[j]], domains ? INFINITY : 0);
                        cand[2 * j + 1] = candidate_of(&ret[at[j]], domains ? -INFINITY : 0);
                }
                for (size_t i = 0; domains && i < n; i++) {
                        struct place_candidate *lo, *hi;

                        if (ret[rep[i]].r != 0)
                                continue;
                        lo = &cand[2 * slot[rep[i]]];
                        hi = lo + 1;
                        share[i] = node_domain_free(c, nodes[i]);
                        lo->domain_free = MIN(lo->domain_free, share[i]);
                        hi->domain_free = MAX(hi->domain_free, share[i]);
                }
                place_rank_bounds(&cfg->place, cand, 2 * k, &b);
                if (!domains) {
                        for (size_t j = 0; j < k; j++)
                                ret[at[j]].priority = place_rank_one(&cfg->place, &b,
                                                                     &cand[2 * j]);
                } else {
                        memset(by_prio, 0xff, k * sizeof(*by_prio));
                        /* In node order: a verdict's own entry comes before its copies'. */
                        for (size_t i = 0; i < n; i++) {
                                uint32_t r = rep[i], s_ = slot[r], *to;
                                struct place_candidate one;
                                int p;

                                if (ret[r].r != 0)
                                        continue;
                                one = cand[2 * s_];
                                one.domain_free = share[i];
                                p = place_rank_one(&cfg->place, &b, &one);
                                to = &by_prio[s_][MAX(0, MIN(p, PLACE_PRIORITY_MAX))];
                                if (*to != UINT32_MAX) {
                                        rep[i] = *to;
                                        continue;
                                }
                                if (r != i) {
                                        ret[i] = ret[r];
                                        rep[i] = (uint32_t)i;
                                        at[m++] = (uint32_t)i; /* m <= n: one per node */
                                }
                                ret[i].priority = p;
                                *to = (uint32_t)i;
                        }
                }
        }
        rank_domain(ret, at, m);
        rank_plan(ret, at, m);
        return true;
}

/* Whether fitting node i ranks before fitting node j: the higher priority, then the name
 * first in order: prioritize's choice of the pod's best node, and the deciding filter's
 * order. */
static inline bool
ranks_before(const struct ext_cluster *c, const struct ext_node *const *nodes,
             const struct ext_verdict *ret, const uint32_t *rep, size_t i, size_t j)
{
        int pi = ext_verdict_at(ret, rep, i)->priority, pj = ext_verdict_at(ret, rep, j)->priority;

        return pi != pj ? pi > pj : name_before(c, nodes[i], nodes[j]);
}

/* The fitting node that ranks_before() every other (n when none fits), in two passes: the
 * top priority, over the distinct verdicts only when they are compact; then, among the
 * nodes with it, the first by name, which for nodes of the view is the lowest address
 * (name_before()), kept without a branch per node.  ranks_before() called per node, its
 * tie on the priority unpredictable, was a tenth of a 5,000-node prioritize's CPU. */
static size_t
best_node(const struct ext_cluster *c, const struct ext_node *const *nodes,
          const struct ext_verdict *ret, const uint32_t *rep, size_t n)
{
        uintptr_t lo = c ? (uintptr_t)c->nodes : 0, hi = c ? (uintptr_t)(c->nodes + c->n_nodes) : 0;
        uintptr_t best_at = UINTPTR_MAX;
        size_t best = n;
        bool outside = false;
        int top = INT_MIN;

        for (size_t i = 0; i < n; i++)
                if ((!rep || rep[i] == i) && ret[i].r == 0 && ret[i].priority > top)
                        top = ret[i].priority;
        if (top == INT_MIN)
                return n;
        for (size_t i = 0; i < n; i++) {
                const struct ext_verdict *v = ext_verdict_at(ret, rep, i);
                uintptr_t at = (uintptr_t)nodes[i];
                bool is_top = v->r == 0 && v->priority == top;

                outside |= is_top & (at < lo || at >= hi);
                at = is_top ? at : UINTPTR_MAX;
                best = at < best_at ? i : best;
                best_at = at < best_at ? at : best_at;
        }
        if (!outside)
                return best;
        /* A node outside the view has the top priority: names decide. */
        best = n;
        for (size_t i = 0; i < n; i++) {
                const struct ext_verdict *v = ext_verdict_at(ret, rep, i);

                if (v->r == 0 && v->priority == top &&
                    (best == n || name_before(c, nodes[i], nodes[best])))
                        best = i;
        }
        return best;
}

/* Prioritize into ret, compact with rep (filter_common), else one verdict per node. */
static int
prioritize(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
           const struct ext_request *req, const struct ext_node *const *nodes, size_t n,
           uint64_t now_ns, struct ext_verdict *ret, uint32_t *rep)
{
        int fits = filter_common(c, l, cfg, req, nodes, n, now_ns, true, ret, rep);
        const struct ext_verdict *bv = NULL;
        size_t best = 0;

        if (fits <= 0 || req->count == 0)
                return fits;
        if (!rep || !rank_distinct(c, cfg, req, nodes, ret, n, rep)) {
                expand(ret, rep, n);
                rank(c, cfg, req, nodes, ret, n);
        }
        best = best_node(c, nodes, ret, rep, n);
        bv = ext_verdict_at(ret, rep, best);
        if (!req->uid[0])
                return fits;
        /* Tentative: bind takes it if it is still free, or picks afresh; a failure to record
         * it (ledger full) only costs that guarantee, never correctness.  A gang member's
         * pick holds nothing (ext__ledger_put_group_locked says why). */
        ext__ledger_lock(l);
        (void)ext__ledger_put_group_locked(l, req->uid, nodes[best]->name, &bv->choice.set,
                                           EXT_HOLD_RESERVED, req->group.id, now_ns);
        ext__ledger_unlock(l);
        return fits;
}

int
ext__prioritize(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
                const struct ext_request *req, const struct ext_node *const *nodes, size_t n,
                uint64_t now_ns, bool distinct_ok, struct ext_verdict *ret)
{
        CLEANUP(freep) uint32_t *rep = distinct_ok && n > 0 && n <= UINT32_MAX
                                               ? malloc(n * sizeof(*rep))
                                               : NULL;
        int fits = prioritize(c, l, cfg, req, nodes, n, now_ns, ret, rep);

        expand(ret, rep, n);
        return fits;
}

int
ext_prioritize(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
               const struct ext_request *req, const struct ext_node *const *nodes, size_t n,
               uint64_t now_ns, struct ext_verdict *ret)
{
        return ext__prioritize(c, l, cfg, req, nodes, n, now_ns, true, ret);
}

int
ext_prioritize_rep(const struct ext_cluster *c, struct ext_ledger *l,
                   const struct ext_config *cfg, const struct ext_request *req,
                   const struct ext_node *const *nodes, size_t n, uint64_t now_ns,
                   struct ext_verdict *ret, uint32_t *rep)
{
        if (n > UINT32_MAX)
                return -E2BIG;
        return prioritize(c, l, cfg, req, nodes, n, now_ns, ret, rep);
}

static int
index_cmp(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

        return (x > y) - (x < y);
}

int
ext_filter_best_rep(const struct ext_cluster *c, struct ext_ledger *l,
                    const struct ext_config *cfg, const struct ext_request *req,
                    const struct ext_node *const *nodes, size_t n, uint64_t now_ns,
                    struct ext_verdict *ret, uint32_t *rep, uint32_t *ret_pass,
                    size_t *ret_n_pass)
{
        size_t k = MIN((size_t)cfg->filter_best, (size_t)EXT_FILTER_BEST_MAX), m = 0;
        int fits;

        *ret_n_pass = SIZE_MAX;
        if (n > UINT32_MAX)
                return -E2BIG;
        fits = prioritize(c, l, cfg, req, nodes, n, now_ns, ret, rep);
        if (fits <= 0 || req->count == 0 || k == 0 || (size_t)fits <= k)
                return fits;
        /* The k best so far in ret_pass, best first: one insertion step per fitting node
         * that beats the last of them (k is small, n up to EXT_MAX_NODES). */
        for (size_t i = 0; i < n; i++) {
                size_t at;

                if (ext_verdict_at(ret, rep, i)->r != 0 ||
                    (m == k && !ranks_before(c, nodes, ret, rep, i, ret_pass[m - 1])))
                        continue;
                at = m < k ? m++ : k - 1;
                while (at > 0 && ranks_before(c, nodes, ret, rep, i, ret_pass[at - 1])) {
                        ret_pass[at] = ret_pass[at - 1];
                        at--;
                }
                ret_pass[at] = (uint32_t)i;
        }
        qsort(ret_pass, m, sizeof(*ret_pass), index_cmp);
        *ret_n_pass = m;
        return fits;
}

/* The domain of node i for a group that has no record when one of its pods binds there:
 * in placement's order (the multi-node NVLink domain, the node itself, the network tiers
 * innermost first), the first domain of the node that holds the whole group (its free sets
 * counting the GPUs this pod takes: the view predates the bind), else the node's first
 * domain (not whole).  With a topology constraint, only the node (when it holds the group)
 * or the node's domain of the constraint's level.  0 and *ret, or -ENOENT (no domain). */
static int
adopted_domain(const struct place_view *v, size_t i, const struct place_group_request *g,
               struct place_group_domain *ret)
{
        /* The last entry: a constraint's key level (else a repeat of level 3, harmless). */
        unsigned order[] = { 0, PLACE_LEVEL_NODE, 1, 2, 3,
                             g->has_within && g->within > PLACE_LEVEL_NODE ? g->within : 3 };
        unsigned need = MAX(g->size, 1u);
        ssize_t first_d = -1;
        unsigned first_l = 0;
        const char *name;

        for (size_t k = 0; k < ELEMENTSOF(order); k++) {
                unsigned l = order[k];
                ssize_t d = place_view_node_domain(v, i, l);
                bool whole;

                if (d < 0 || (l == PLACE_LEVEL_NODE && !place_view_node_name(v, i)))
                        continue;
                if (g->has_within && l != g->within && l != PLACE_LEVEL_NODE)
                        continue;
                if (l == PLACE_LEVEL_NODE && g->size <= 1 &&
                    !(g->has_within && g->within == PLACE_LEVEL_NODE))
                        continue;
                whole = g->size > 0 && place_domain_sets(v, l, d, g->count, g->require) >= need;
                if (!whole) {
                        if (first_d < 0 && l != PLACE_LEVEL_NODE) {
                                first_d = d;
                                first_l = l;
                        }
                        /* One node is taken not whole only when the constraint says so. */
                        if (!(l == PLACE_LEVEL_NODE && g->has_within && g->within == l))
                                continue;
                }
                *ret = (struct place_group_domain){ .level = l, .whole = whole };
                name = l == PLACE_LEVEL_NODE ? place_view_node_name(v, i)
                                             : place_view_domain(v, l, (size_t)d)->name;
                str_copy(ret->name, sizeof(ret->name), name, strlen(name));
                return 0;
        }
        if (first_d < 0)
                return -ENOENT;
        *ret = (struct place_group_domain){ .level = first_l };
        name = place_view_domain(v, first_l, (size_t)first_d)->name;
        str_copy(ret->name, sizeof(ret->name), name, strlen(name));
        return 0;
}

/* A grouped pod bound while its group has no record: the group table lives in memory, so a
 * restarted extender binds gang members that its predecessor's filter kept to a domain (a
 * PodGroup cycle's binds follow its filters; a topofit.io/group gang's pods bind one by
 * one).  The group adopts the domain of the node the pod binds to (adopted_domain), with
 * the pod counted bound, so the binding carries the record, the rest of the gang follows
 * it rather than choosing afresh (which could split the gang: the domain now holds one pod
 * less than the whole group), and others are held out of its room. */
static void
adopt_group(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_request *req,
            const struct ext_node *n, uint64_t now_ns)
{
        struct place_group_request sized;
        const struct place_group_request *grp = group_of(c, req, &sized);
        struct place_groups *g = ext__ledger_groups(l);
        struct place_group_domain d;
        const char *uid = req->uid;

        if (!grp->id[0] || grp->mode == PLACE_DOMAIN_OFF || grp->count == 0 || !c || !c->place ||
            n < c->nodes || n >= c->nodes + c->n_nodes ||
            place_group_get(g, grp->id, now_ns, NULL, NULL) != 0 ||
            adopted_domain(c->place, (size_t)(n - c->nodes), grp, &d) < 0)
                return;
        (void)place_group_restore(g, grp, &d, &uid, 1, now_ns);
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
        if (mine && topo_mask_count(mine) == req->count && topo_mask_subset(mine, &free)) {
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
        /* A bound member stops counting against its group's hold (no record: nothing held). */
        if (req->group.id[0]) {
                struct place_group_request sized;

                if (place_group_bound(ext__ledger_groups(l), group_of(c, req, &sized), req->uid,
                                      n->name, now_ns) == -ENOENT)
                        adopt_group(c, l, req, n, now_ns);
        }
        *ret = v.choice;
        return 0;
}

int
ext_group_record_for(const struct ext_cluster *c, struct ext_ledger *l,
                     const struct ext_request *req, uint64_t now_ns, char **ret_json)
{
        struct place_group_request sized;
        const struct place_group_request *grp = group_of(c, req, &sized);
        struct ext_group_record rec = { 0 };
        unsigned size = 0;
        int r;

        *ret_json = NULL;
        if (!grp->id[0] || grp->mode == PLACE_DOMAIN_OFF)
                return 0;
        r = place_group_get(ext__ledger_groups(l), grp->id, now_ns, &rec.domain, &size);
        if (r <= 0)
                return 0;
        rec.group = *grp;
        rec.group.size = size;
        rec.domain.sets = 0;
        r = ext_group_record_encode(&rec, ret_json);
        return r == -ENOMEM ? r : 0;
}

/* One member of ext_groups_restore, decoded and checked. */
struct restored {
        struct ext_group_record rec;
        const char *uid;
};

static int
restored_cmp(const void *a, const void *b)
{
        return strcmp(((const struct restored *)a)->rec.group.id,
                      ((const struct restored *)b)->rec.group.id);
}

/* Checks member m against c's view: 0 and *ret, or -EINVAL. */
static int
restore_member(const struct ext_cluster *c, const struct ext_group_member *m,
               struct restored *ret)
{
        const struct ext_pod *p = m->uid ? ext_cluster_find_pod(c, m->uid) : NULL;
        ssize_t d;

        if (!p || p->node < 0 || !m->record ||
            ext_group_record_decode(m->record, m->record_len, &ret->rec, NULL) < 0 ||
            !ext__id_in_namespace(ret->rec.group.id, m->ns) ||
            topo_mask_count(&p->gpus) != ret->rec.group.count || ret->rec.group.count == 0)
                return -EINVAL;
        d = place_view_find_domain(c->place, ret->rec.domain.level, ret->rec.domain.name);
        /* A key level's index is the restarted view's: its domain names carry the key. */
        for (unsigned k = 0;
             d < 0 && ret->rec.domain.level > PLACE_LEVEL_NODE && k < PLACE_MAX_KEYS; k++) {
                d = place_view_find_domain(c->place, PLACE_LEVEL_KEY(k), ret->rec.domain.name);
                if (d >= 0)
                        ret->rec.domain.level = PLACE_LEVEL_KEY(k);
        }
        if (d < 0 || place_view_node_domain(c->place, (size_t)p->node, ret->rec.domain.level) != d)
                return -EINVAL;
        ret->uid = m->uid;
        return 0;
}

int
ext_groups_restore(const struct ext_cluster *c, struct ext_ledger *l,
                   const struct ext_group_member *m, size_t n, uint64_t now_ns,
                   unsigned *ret_refused)
{
        CLEANUP(freep) struct restored *ok = NULL;
        CLEANUP(freep) const char **uids = NULL;
        size_t n_ok = 0;
        unsigned refused = 0;
        int restored = 0;

        if (ret_refused)
                *ret_refused = 0;
        if (!c || !c->place || n == 0)
                return 0;
        ok = calloc(n, sizeof(*ok));
        uids = calloc(MIN(n, (size_t)PLACE_MAX_GROUP_PODS), sizeof(*uids));
        if (!ok || !uids)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (restore_member(c, &m[i], &ok[n_ok]) < 0)
                        refused++;
                else
                        n_ok++;
        }
        qsort(ok, n_ok, sizeof(*ok), restored_cmp);
        for (size_t i = 0, j; i < n_ok; i = j) {
                const struct ext_group_record *first = &ok[i].rec;
                struct place_group_request req = first->group;
                const struct ext_group_size *pg = ext_cluster_group(c, req.id);
                size_t k = 0;
                int x;

                for (j = i; j < n_ok && strcmp(ok[j].rec.group.id, req.id) == 0; j++) {
                        if (ok[j].rec.domain.level != first->domain.level ||
                            strcmp(ok[j].rec.domain.name, first->domain.name) != 0 ||
                            k >= PLACE_MAX_GROUP_PODS) {
                                refused++; /* another domain: not this group's now */
                                continue;
                        }
                        uids[k++] = ok[j].uid;
                }
                if (pg && pg->size > 0)
                        req.size = pg->size;
                if (req.size == 0 || k >= req.size)
                        continue; /* nothing known to hold, or nothing left to hold */
                req.mode = PLACE_DOMAIN_REQUIRED; /* a record: only the table reads it */
                x = place_group_restore(ext__ledger_groups(l), &req, &first->domain, uids, k,
                                        now_ns);
                if (x == -ENOMEM)
                        return x;
                restored += x == 1;
        }
        if (ret_refused)
                *ret_refused = refused;
        return restored;
}

/* Preempt's check for a gang member: false when the pod's group is domain-required, has a
 * live domain, and node lies outside it (evicting pods there would free room the member may
 * not take).  No record yet (the group's first pod), or domain-preferred: true; preempt does
 * not choose a domain. */
static bool
in_group_domain(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_request *req,
                const struct ext_node *node, uint64_t now_ns)
{
        struct place_group_request sized;
        const struct place_group_request *grp = group_of(c, req, &sized);
        struct place_group_domain d;
        ssize_t dom;

        if (!grp->id[0] || grp->mode != PLACE_DOMAIN_REQUIRED || !c || !c->place ||
            place_group_get(ext__ledger_groups(l), grp->id, now_ns, &d, NULL) != 1)
                return true;
        dom = place_view_find_domain(c->place, d.level, d.name);
        if (node < c->nodes || node >= c->nodes + c->n_nodes || dom < 0)
                return false;
        return place_view_node_domain(c->place, (size_t)(node - c->nodes), d.level) == dom;
}

/* One victim of a preempt call, as the view knows it. */
struct preempt_victim {
        const struct ext_pod *p; /* NULL: not in the view */
        bool here;               /* bound to the candidate node */
        bool split;              /* in a group that may not lose members here */
};

static int
pod_index_cmp(const void *a, const void *b)
{
        const struct ext_pod *x = *(const struct ext_pod *const *)a,
                             *y = *(const struct ext_pod *const *)b;

        return x < y ? -1 : x > y;
}

/* Preempt's gang check.  A bound gang (pods of one group record, ext_pod.group) may lose all
 * its bound members or none: a victim set that evicts some of them strands the rest (they
 * hold GPUs and wait for peers that are gone).  Per group among the victims: whole when
 * every bound member is on this node and among the scheduler's victims (then the set takes
 * all of them or none: they were the scheduler's own choices, so its priority and PDB
 * checks hold for each), else split (none of its members may be taken here).  Sets
 * pv[i].split; 0 or -ENOMEM.  O(victims x pods) per group among them: preempt is rare. */
static int
gang_split(const struct ext_cluster *c, struct preempt_victim *pv, size_t n)
{
        CLEANUP(freep) const struct ext_pod **here = calloc(MAX(n, (size_t)1), sizeof(*here));
        size_t n_here = 0;

        if (!here)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (pv[i].p && pv[i].here)
                        here[n_here++] = pv[i].p;
        qsort(here, n_here, sizeof(*here), pod_index_cmp);
        for (size_t i = 0; i < n; i++) {
                uint32_t g = pv[i].p ? pv[i].p->group : 0;
                bool split = false, seen = false;

                if (g == 0)
                        continue;
                for (size_t k = 0; k < i && !seen; k++)
                        if (pv[k].p && pv[k].p->group == g) {
                                pv[i].split = pv[k].split;
                                seen = true;
                        }
                if (seen)
                        continue;
                for (size_t q = 0; q < c->n_pods && !split; q++) {
                        const struct ext_pod *m = &c->pods[q];

                        if (m->group != g || m->node < 0)
                                continue;
                        split = !bsearch(&m, here, n_here, sizeof(*here), pod_index_cmp);
                }
                pv[i].split = split;
        }
        return 0;
}

static const char why_split[] = "the victims would split a bound pod group (its other members "
                                "are on other nodes or are not victims here)";
static const char why_remote[] = "the victims include pods on other nodes (a pod group evicted "
                                 "whole), which the preemption answer cannot name";

int
ext_preempt(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
            const struct ext_request *req, const struct ext_node *node,
            const char *const *victims, size_t n, uint64_t now_ns, bool *needed,
            struct ext_verdict *ret)
{
        CLEANUP(freep) struct preempt_victim *pv = NULL;
        struct topo_mask free, freed = { 0 }, withheld = { 0 }, with;
        struct ext_verdict v;
        bool any_split = false;
        int r;

        if (!node) {
                *ret = (struct ext_verdict){ .r = -ENOENT, .why = why_unknown_node };
                return -ENOENT;
        }
        if (!in_group_domain(c, l, req, node, now_ns)) {
                *ret = (struct ext_verdict){ .r = -EAGAIN,
                                             .why = "the node is outside the domain the pod's "
                                                    "group was given (domain-required)" };
                return -EAGAIN;
        }
        pv = calloc(MAX(n, (size_t)1), sizeof(*pv));
        if (!pv) {
                *ret = (struct ext_verdict){ .r = -ENOMEM, .why = "out of memory" };
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                pv[i].p = ext_cluster_find_pod(c, victims[i]);
                pv[i].here = pv[i].p && pv[i].p->node >= 0 && &c->nodes[pv[i].p->node] == node;
                /* kube-scheduler 1.37 evicts a PodGroup with disruptionMode All whole and lists
                 * its members on every node as this node's victims; its extender client looks
                 * the answer's victims up on this node only (an error for the others), and
                 * leaving them out would split the group. */
                if (pv[i].p && pv[i].p->node >= 0 && !pv[i].here) {
                        *ret = (struct ext_verdict){ .r = -EAGAIN, .why = why_remote };
                        return -EAGAIN;
                }
        }
        r = gang_split(c, pv, n);
        if (r < 0) {
                *ret = (struct ext_verdict){ .r = r, .why = "out of memory" };
                return r;
        }
        ext__ledger_lock(l);
        free_gpus_locked(c, l, req, node, now_ns, &free);
        ext__ledger_unlock(l);

        /* GPUs the victims free, less those of gangs that may not lose members here. */
        for (size_t i = 0; i < n; i++)
                if (pv[i].here) {
                        topo_mask_or(pv[i].split ? &withheld : &freed, &pv[i].p->gpus);
                        any_split = any_split || pv[i].split;
                }
        topo_mask_and(&freed, &node->healthy);

        /* Fewest evictions first: does it fit without the GPU victims at all? */
        decide(cfg, req, node, &free, true, &v);
        if (v.r != 0) {
                with = free;
                topo_mask_or(&with, &freed);
                decide(cfg, req, node, &with, true, &v);
        }
        if (v.r != 0) {
                if (any_split && topo_mask_count(&withheld) > 0)
                        v.why = why_split;
                *ret = v;
                return v.r;
        }
        for (size_t i = 0; i < n; i++) {
                bool gpu_victim = pv[i].here && topo_mask_count(&pv[i].p->gpus) > 0;

                needed[i] = !gpu_victim || topo_mask_intersects(&pv[i].p->gpus, &v.choice.set);
        }
        /* A gang is taken whole or not at all: one needed member takes its members here
         * (every one of them is a victim here, else it is split). */
        for (size_t i = 0; i < n; i++) {
                if (!needed[i] || !pv[i].p || pv[i].p->group == 0)
                        continue;
                if (pv[i].split) {
                        *ret = (struct ext_verdict){ .r = -EAGAIN, .why = why_split };
                        return -EAGAIN;
                }
                for (size_t k = 0; k < n; k++)
                        if (pv[k].p && pv[k].p->group == pv[i].p->group)
                                needed[k] = true;
        }
        *ret = v;
        return 0;
}
