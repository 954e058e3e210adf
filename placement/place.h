/* SPDX-License-Identifier: Apache-2.0 */
/*
 * placement: the cluster above one node.  scoring/ picks the best GPU set inside a node;
 * this library says what a placement costs the rest of the cluster, so the node priority
 * can keep scarce capability whole.  Three parts:
 *
 *   - capacity: for a mix of request classes (size x constraint: 8 GPUs all-NVLink, 4 GPUs
 *     all-NVLink, 4 GPUs on one NUMA node, 2, 1), how many requests of each class a node's
 *     free GPUs can serve at that node type's best quality (disjoint sets, each as good as
 *     the best set of that class on an empty node of the type);
 *   - the view: per node its free GPUs and capacity, cluster totals, per multi-node domain
 *     (NVLink clique or network tier) the free GPUs and capacity; immutable, refcounted,
 *     built once per cluster-snapshot generation, reusing the capacities of nodes whose
 *     free GPUs did not change since the base view;
 *   - the cluster term: the weighted share of the cluster's best-quality capacity a
 *     candidate placement destroys, and the rule that folds it into the node priority.
 *
 * The idea of scoring a placement by what it takes from the workload mix the cluster can
 * still serve follows Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
 * Workloads with Fragmentation Gradient Descent" (USENIX ATC 2023); their measure counts
 * GPUs, ours counts servable GPU sets, so it knows links.  docs/placement.md has the
 * formulas.
 *
 * PURE: no I/O, clocks or globals; depends on scoring/, topology/ and common/ only.  Time
 * comes in as a parameter (group holds).  Views are safe to share between threads; the
 * group table (place_groups) has its own lock.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../scoring/score.h"

#define PLACE_MAX_CLASSES 8          /* request classes in the mix */
#define PLACE_MAX_LEVELS 4           /* domain levels: NVLink domain + network tiers */
#define PLACE_LEVEL_NODE PLACE_MAX_LEVELS /* a group's "domain" that is one node (its own
                                           * NVLink/NVSwitch domain): named by the node */
/* Levels named by any other node label key (a PodGroup's topology constraint): nodes that
 * share the key's value form one domain.  Level ids PLACE_LEVEL_KEY(0..PLACE_MAX_KEYS-1),
 * after PLACE_LEVEL_NODE, so the ids of the levels above keep their values (records carry
 * them). */
#define PLACE_MAX_KEYS 4
#define PLACE_LEVEL_KEY(k) (PLACE_LEVEL_NODE + 1 + (k))
#define PLACE_N_LEVELS PLACE_LEVEL_KEY(PLACE_MAX_KEYS) /* every level id is below it */
#define PLACE_NAME_MAX 96            /* a domain or group name, NUL included */
#define PLACE_MAX_DOMAINS 20000      /* distinct domains per level in one view */
#define PLACE_QUALITY_EPS 1e-6       /* "as good as the best": relative busbw tolerance */
#define PLACE_PRIOR_PODS 20.0        /* default: the configured weights count as 20 pods */
#define PLACE_CLUSTER_SHARE 0.5      /* default share of the cluster term in the priority */
#define PLACE_QUALITY_BAND 0.5       /* default: competes on the term within half the best busbw */
#define PLACE_DRAIN_WEIGHT 1.0       /* default weight of the drained-node loss (place_loss) */
#define PLACE_PRIORITY_MAX 10        /* kube-scheduler's MaxExtenderPriority */
#define PLACE_DOMAIN_TIEBREAK 1e-6   /* place_rank: weight of the domain's free share next to
                                      * losses (a lost 8-GPU set of 512 weighs ~2e-4) */

/* One request class of the mix. */
struct place_class {
        unsigned size;    /* GPUs, 1..TOPO_MAX_GPUS */
        unsigned require; /* enum score_require bits */
        double weight;    /* prior weight, >= 0 */
};

struct place_config {
        unsigned n_classes;
        struct place_class classes[PLACE_MAX_CLASSES];
        /* How many pods the configured weights count as against the sizes of the live
         * pods the cluster shows (the weights learnt are (prior * w + seen) / (prior +
         * pods)); 0 keeps the configured weights as they are. */
        double prior_pods;
        /* Share of the cluster term in the final node priority, 0..1; 0 turns it off. */
        double cluster_share;
        /* A candidate competes on the cluster term only when its set's modeled bandwidth is
         * at least this share of the best set of its link class on offer, 0..1: capacity is
         * never bought with a much slower set. */
        double quality_band;
        /* Weight of the drained-node loss in place_loss(), 0..1: what the set keeps from
         * the node's capacity once the node's other pods have ended; 0 turns it off. */
        double drain_weight;
};

/* Classes 8 all-NVLink, 4 all-NVLink, 4 one-NUMA, 2, 1 with the size mix of
 * score_config_default() (1: 0.55, 2: 0.2, 4: 0.15 split over its two classes, 8: 0.1),
 * prior_pods PLACE_PRIOR_PODS, cluster_share PLACE_CLUSTER_SHARE, quality_band
 * PLACE_QUALITY_BAND, drain_weight PLACE_DRAIN_WEIGHT. */
void place_config_default(struct place_config *cfg);
/* 0, or -EINVAL with *ret_why: no classes or more than PLACE_MAX_CLASSES, a size 0 or over
 * TOPO_MAX_GPUS, a weight negative or not finite or all zero, prior_pods negative,
 * cluster_share, quality_band or drain_weight outside 0..1. */
int place_config_check(const struct place_config *cfg, const char **ret_why);

/* --- capacity ------------------------------------------------------------------------- */

/* How many disjoint sets of each class of cfg the GPUs in free can serve, each at the best
 * quality its class reaches on an empty node of cls's type (satisfies the class's
 * constraint, bus bandwidth within PLACE_QUALITY_EPS of the empty node's best).  Greedy:
 * the best set (score_best), then the best of the rest, while one is as good as the best.
 * Writes n_classes counts to ret.  Returns 0, -EINVAL (NULL cls or free). */
int place_capacity(const struct place_config *cfg, struct score_class *cls,
                   const struct topo_mask *free, uint16_t ret[PLACE_MAX_CLASSES]);

/* How many disjoint sets of count GPUs meeting require the GPUs in free hold (any
 * quality): what a node can give a gang whose pods ask for count GPUs each. */
unsigned place_count_sets(struct score_class *cls, const struct topo_mask *free, unsigned count,
                          unsigned require);

/* --- the view ------------------------------------------------------------------------- */

/* One node as the view is given it.  Borrowed for the call. */
struct place_node {
        const char *name;         /* the node's name, NULL when unknown; borrowed for the
                                   * view's whole life (the snapshot that owns both keeps it) */
        struct score_class *cls;  /* NULL: no GPUs */
        struct topo_mask free;    /* healthy GPUs not on live pods */
        /* The node's domain at each level, "" or NULL when none: level 0 is the multi-node
         * NVLink domain (clique), levels 1.. the network tiers innermost first (rack, then
         * block...).  At most PLACE_NAME_MAX - 1 bytes each; longer names are cut. */
        const char *domain[PLACE_MAX_LEVELS];
        /* Its domain at level PLACE_LEVEL_KEY(k), "" or NULL when none (the key's label is
         * not on the node); cut like domain[]. */
        const char *key_domain[PLACE_MAX_KEYS];
};

struct place_domain {
        char name[PLACE_NAME_MAX];
        unsigned level;
        unsigned n_nodes;
        unsigned free_gpus;
        unsigned n_gpus;                      /* GPUs of its nodes, free or not */
        uint32_t capacity[PLACE_MAX_CLASSES]; /* sum over its nodes */
};

struct place_view;

/* Builds the view of n nodes.  size_hist[s] (s < hist_len; may be NULL) is how many live
 * pods hold s GPUs: the "seen" part of the weights.  base (may be NULL) and base_index[i]
 * (its index of node i, or -1; NULL: none) lend capacities of nodes whose class and free
 * GPUs are unchanged, so a new generation only computes the nodes that changed.  cfg is
 * copied.  Returns 0 and *ret (one reference), -EINVAL (bad cfg), -E2BIG (more than
 * PLACE_MAX_DOMAINS domains at a level), -ENOMEM. */
int place_view_new(const struct place_config *cfg, const struct place_node *nodes, size_t n,
                   const unsigned *size_hist, size_t hist_len, const struct place_view *base,
                   const ssize_t *base_index, struct place_view **ret);
struct place_view *place_view_ref(struct place_view *v);
struct place_view *place_view_unref(struct place_view *v); /* accepts NULL, returns NULL */
DEFINE_CLEANUP_FUNC(struct place_view, place_view_unref)

const struct place_config *place_view_config(const struct place_view *v);
size_t place_view_n_nodes(const struct place_view *v);
/* Node i's capacity per class (n_classes entries), NULL when i is out of range. */
const uint16_t *place_view_capacity(const struct place_view *v, size_t i);
/* The cluster's capacity of class k (sum over nodes); 0 when k is out of range. */
uint64_t place_view_total(const struct place_view *v, unsigned k);
/* The effective (learnt, normalized to sum 1) weight of class k. */
double place_view_weight(const struct place_view *v, unsigned k);
/* How many node capacities this view computed rather than took from its base. */
size_t place_view_computed(const struct place_view *v);
/* The capacity memo's hits and misses so far; views of one lineage (each built from the
 * last as its base) share one memo of (class, free GPUs) -> capacity. */
void place_view_memo_stats(const struct place_view *v, uint64_t *ret_hits, uint64_t *ret_misses);

/* Domains at level (sorted by name); node i's domain index at level, -1 when none.  At
 * PLACE_LEVEL_NODE every named node is its own domain, indexed like the nodes: n_domains and
 * domain() say nothing there (0, NULL), node_domain(i) is i, find_domain finds the node by
 * name (a linear scan).  Levels are 0..PLACE_MAX_LEVELS-1, PLACE_LEVEL_NODE and
 * PLACE_LEVEL_KEY(k). */
size_t place_view_n_domains(const struct place_view *v, unsigned level);
const struct place_domain *place_view_domain(const struct place_view *v, unsigned level, size_t d);
ssize_t place_view_node_domain(const struct place_view *v, size_t i, unsigned level);
/* The index of the domain named name at level, -1 when absent. */
ssize_t place_view_find_domain(const struct place_view *v, unsigned level, const char *name);
/* The nodes of domain d at a named level (not PLACE_LEVEL_NODE, whose domain d is node d),
 * in node order: their count and *ret; 0 and NULL when there are none. */
size_t place_view_domain_nodes(const struct place_view *v, unsigned level, size_t d,
                               const uint32_t **ret);

/* --- the cluster term ----------------------------------------------------------------- */

/* The free share (free GPUs / GPUs) of node i's innermost multi-node domain (the lowest
 * level it has one at), in 0..1; 0 when it has none or i is out of range.  What
 * place_rank() breaks ties of the cluster term by. */
double place_view_domain_free(const struct place_view *v, size_t i);

/* true when some node of the view is in a multi-node domain (else every node's
 * place_view_domain_free() is 0, and a caller can skip asking). */
bool place_view_has_domains(const struct place_view *v);

/* What placing set on node i costs the cluster: sum over classes k of weight_k x (node i's
 * capacity of k with free minus its capacity with free minus set) / (the cluster's capacity
 * of k), in 0..1, plus drain_weight x the same for the node drained (its capacity with
 * every healthy GPU free minus that without set, over the cluster's capacity of k, at least
 * 1; so the sum may reach 1 + drain_weight, place_rank normalises it): what the set keeps
 * from the node when its other pods end.  Two nodes that lose alike
 * now differ there: a 4-GPU set on half an 8-GPU node keeps that node from serving an
 * 8-GPU set when its other half ends, on a 4-GPU node it does not.  Not in a view with
 * any multi-node domain (of levels 0..PLACE_MAX_LEVELS-1): a node's GPUs are then also its
 * domain's room for gangs, which one node drained does not see, and a rule per node would
 * make the labelled nodes of a partly labelled cluster lose less (docs/placement.md).  free is the node's free
 * GPUs for this request (the view's, less holds: when it equals the view's, the view's
 * capacity is used rather than recomputed).
 * i == PLACE_NO_NODE scores a node the view does not hold (a Node the scheduler sent) against
 * the view's totals.  -1 when i is out of range, cls does not match the view's node, or an
 * argument is NULL. */
#define PLACE_NO_NODE SIZE_MAX
double place_loss(const struct place_view *v, size_t i, struct score_class *cls,
                  const struct topo_mask *free, const struct topo_mask *set);

/* A candidate of one request, for place_rank(). */
struct place_candidate {
        bool fits;        /* false: left at priority 0 */
        int priority;     /* in: the per-node priority, 0..PLACE_PRIORITY_MAX; out: final */
        unsigned tier;    /* place_tier() of its set */
        double busbw;     /* its set's modeled bus bandwidth (GB/s; 0 for one GPU) */
        double loss;      /* place_loss() */
        double domain_free; /* place_view_domain_free() of its node */
};

/* The quality tier of a chosen set for the ranking: 2 all-NVLink ring, 1 direct
 * peer-to-peer, 0 otherwise; single GPUs are all tier 2 (no links to compare). */
unsigned place_tier(const struct score_choice *ch);

/* Folds the cluster term into the priorities of n candidates of one request.  Eligible: the
 * fitting candidates of the best tier whose busbw is at least quality_band x the best busbw
 * among them.  Of those, the one losing least gets cluster score 10 and the one losing most
 * 0 (linear between; all 10 when they lose alike); the others get 0, so neither a worse
 * link class nor a much slower set is chosen to spare capacity.  Final = round((1 - share)
 * x priority + share x cluster score), share = cfg->cluster_share.  Candidates whose losses
 * tie (within PLACE_DOMAIN_TIEBREAK) are told apart by their domain's free share: the
 * fuller domain scores higher, so pods that take the same from their node fill a started
 * NVLink domain or leaf before an emptier one, which stays whole for a gang (best fit at
 * the domain level, as Kueue's Topology Aware Scheduling packs a rack). */
void place_rank(const struct place_config *cfg, struct place_candidate *c, size_t n);

/* place_rank() in two steps, for a caller that ranks many candidates that share all but
 * their domain's free share (the extender's nodes of one verdict): the bounds the ranking
 * reads of the whole request (the top tier and bandwidth, the eligible candidates' least
 * and most cost), then one candidate's final priority against them.  The bounds of a set of
 * candidates are those of any set with the same fitting tiers and bandwidths and the same
 * least and most cost, so one candidate per verdict at its least share and one at its most
 * stand for all its nodes.  place_rank() is place_rank_bounds() then place_rank_one() per
 * fitting candidate. */
struct place_rank_bounds {
        bool active; /* cluster_share > 0: otherwise place_rank_one() keeps the priority */
        unsigned top;
        double top_bw, lo, hi, share;
};
void place_rank_bounds(const struct place_config *cfg, const struct place_candidate *c,
                       size_t n, struct place_rank_bounds *ret);
int place_rank_one(const struct place_config *cfg, const struct place_rank_bounds *b,
                   const struct place_candidate *c);

/* --- groups (gangs) ----------------------------------------------------------------------
 * Pods of one group (a PodGroup, a LeaderWorkerSet replica, a Kueue pod group, ...; the
 * extender's codec names it) should land in one domain.  The first pod of a group to be
 * decided chooses, at the innermost level where some domain can hold the whole group, the
 * domain that holds it with the least to spare (best fit: larger domains stay whole for
 * larger groups), ties by name; a multi-node NVLink domain (level 0) comes before one node
 * (both NVLink; a whole node is what pods as large as the node need).  The choice is recorded with a TTL; while it lives, the
 * domain's sets for the group's pods not yet bound are held: a pod of another group, or of
 * none, may not take a node's GPUs there when that leaves the domain fewer sets than the
 * group still needs.  A group given a domain that could not hold it whole (none could)
 * holds it against ungrouped pods only: another gang that fits there whole may backfill.
 * With its domain a group gets a node plan, the nodes its pods take, packed fullest first
 * (place_group_plan_pick), which the extender ranks first for each member.
 * The table is the one mutable part of placement/, with its own lock; time is a
 * parameter. */

#define PLACE_MAX_GROUPS 4096        /* live group records; the oldest expire first */
#define PLACE_MAX_GROUP_PODS 1024    /* pods of one group tracked as bound */
#define PLACE_GROUP_TTL_NS (300ull * 1000000000ull) /* kube-scheduler's gang wait is 5 min */

enum place_domain_mode {
        PLACE_DOMAIN_OFF,       /* not grouped, or "domain" not asked */
        PLACE_DOMAIN_PREFERRED, /* one domain when one fits; spill over otherwise */
        PLACE_DOMAIN_REQUIRED,  /* only the group's domain; wait when none holds it */
        _PLACE_DOMAIN_MAX,
        _PLACE_DOMAIN_INVALID = -EINVAL,
};
const char *place_domain_mode_to_string(enum place_domain_mode m);

/* One pod's group, as the codec found it. */
struct place_group_request {
        char id[PLACE_NAME_MAX]; /* "" : not grouped (then every call below is a no-op) */
        unsigned size;           /* pods in the group; 0 when unknown */
        unsigned count;          /* GPUs per pod */
        unsigned require;        /* enum score_require bits of its pods */
        enum place_domain_mode mode;
        /* A topology constraint (a PodGroup's spec.schedulingConstraints.topology key, which
         * the extender maps to a level): the group lands within one domain of level within
         * (PLACE_LEVEL_NODE: one node).  A domain inside one (a node, or an inner level's
         * domain whose nodes all lie in one domain of that level) may be chosen; none of an
         * outer level, nor a node or inner domain outside every domain of that level. */
        bool has_within;
        unsigned within;
};

/* The domain a group was given. */
struct place_group_domain {
        unsigned level;
        char name[PLACE_NAME_MAX];
        unsigned sets;          /* sets of the group's shape the domain had when chosen */
        bool whole;             /* the domain could hold the whole group then */
};

struct place_groups;
struct place_groups *place_groups_new(uint64_t ttl_ns); /* 0: PLACE_GROUP_TTL_NS */
struct place_groups *place_groups_free(struct place_groups *g);
DEFINE_CLEANUP_FUNC(struct place_groups, place_groups_free)

/* The domain of req's group at now_ns: the recorded one while it lives, or else chosen now
 * from v and recorded (its TTL refreshed by each pod bound).  A recorded domain that no
 * member has been bound to yet and that can no longer hold the group (it failed to start
 * there, others took the room) is chosen afresh.  free_of (may be NULL) as in
 * place_group_check: the free GPUs to count instead of the view's.  Returns 1 and *ret when
 * the group has a domain; 0 when req is not grouped, its mode is off, or no node of v is in
 * any domain (nothing to choose); -ENOSPC when no domain has room for even one pod of the
 * group, or, with req->has_within, no node has a domain at its level (no node may host
 * it); -E2BIG when PLACE_MAX_GROUPS live groups are recorded; -EINVAL. */
int place_group_domain(struct place_groups *g, const struct place_view *v,
                       const struct place_group_request *req,
                       const struct topo_mask *const *free_of, uint64_t now_ns,
                       struct place_group_domain *ret);

/* Where a spilt group's pod goes once its domain is full.  A group that no domain could hold
 * whole keeps to the domain with the most room while a node there fits its pod; after that,
 * this is the domain, at any level (level 0 first on a tie, then by name), whose candidate
 * nodes give the most sets of count GPUs (meeting require): cand_free[i] is the free GPUs of
 * the view's node i when it is a candidate (fits the pod), NULL when not.  So the members
 * that spill pack into the fewest domains instead of spreading over nodes that tie.  Returns
 * 1 and *ret_level, *ret_domain; 0 when no candidate in any domain has a set; -ENOMEM,
 * -EINVAL. */
int place_spill_domain(const struct place_view *v, const struct topo_mask *const *cand_free,
                       unsigned count, unsigned require, unsigned *ret_level,
                       ssize_t *ret_domain);

/* Records that pod uid of req's group was bound on node (NULL: not known; it stops
 * counting against the hold and refreshes the TTL; the group's plan notes where it went,
 * see place_group_plan_pick).  Idempotent per uid.  0, or -ENOENT when the group has no
 * record. */
int place_group_bound(struct place_groups *g, const struct place_group_request *req,
                      const char *uid, const char *node, uint64_t now_ns);

/* The node plan: when a group's domain is chosen (place_group_domain), its pods are planned
 * on the domain's nodes (a domain-preferred group that no domain holds whole, and without a
 * topology constraint: on every node), each in turn on the node it leaves with the fewest
 * free GPUs, then the smaller node, the fuller innermost domain, the view's order; other
 * groups' planned pods count as taken.  So pods fill a node's free half before an empty
 * node, and a second pod follows the first.  This is member uid's planned node: its own
 * claim while that node fits (fits[i] for the view's node i), else the first unclaimed slot
 * whose node fits, which it then claims.  Returns 1 and *ret_node (the view's index); 0
 * when the group has no record or plan, or no planned node fits; -EINVAL.  The extender
 * ranks that node first (a preference: kube-scheduler may bind elsewhere; place_group_bound
 * then moves the slot). */
int place_group_plan_pick(struct place_groups *g, const struct place_view *v, const char *id,
                          const char *uid, const bool *fits, uint64_t now_ns, size_t *ret_node);

/* The live record of group id at now_ns: its domain and size (either out-pointer may be
 * NULL).  1 when there is one, 0 when not; -EINVAL. */
int place_group_get(struct place_groups *g, const char *id, uint64_t now_ns,
                    struct place_group_domain *ret, unsigned *ret_size);

/* Restores a group's record after a restart of its owner (the table lives in memory): req's
 * group was given domain d and its pods uids[0..n) are bound.  Without a live record, one is
 * made (TTL from now_ns) and returns 1; with one, the uids are added to it (its domain is
 * kept) and returns 0.  -EINVAL (req not grouped, n over PLACE_MAX_GROUP_PODS), -E2BIG (the
 * table is full), -ENOMEM. */
int place_group_restore(struct place_groups *g, const struct place_group_request *req,
                        const struct place_group_domain *d, const char *const *uids, size_t n,
                        uint64_t now_ns);

/* Sets of count GPUs meeting require on the nodes of domain d at level (PLACE_LEVEL_NODE: d
 * is the node), with the view's free GPUs. */
unsigned place_domain_sets(const struct place_view *v, unsigned level, ssize_t d, unsigned count,
                           unsigned require);
/* Whether taking set from node i of v (free: its free GPUs for this request) keeps every
 * other live group's hold on i's domains: returns 0 when it does, -EBUSY with *ret_group
 * (the group's id, copied into a PLACE_NAME_MAX buffer when non-NULL) when the domain would
 * be left fewer sets than that group still needs.  group_id is the requesting pod's own
 * group ("" or NULL: none), which its own hold never blocks; a grouped pod is not blocked
 * by a group whose domain was not whole either (backfill, docs/placement.md).  free_of
 * (may be NULL) gives, per node of v, the free GPUs to count instead of the view's (NULL
 * entries: the view's): the caller's fresher knowledge, such as GPUs bound since the view
 * was built. */
int place_group_check(struct place_groups *g, const struct place_view *v, size_t i,
                      const struct topo_mask *free, const struct topo_mask *set,
                      const char *group_id, const struct topo_mask *const *free_of,
                      uint64_t now_ns, char *ret_group);

/* Live groups recorded at now_ns (for metrics and tests). */
unsigned place_groups_live(struct place_groups *g, uint64_t now_ns);

/* The view's node i: its name (NULL when not given), class and free GPUs. */
const char *place_view_node_name(const struct place_view *v, size_t i);
struct score_class *place_view_node_class(const struct place_view *v, size_t i);
const struct topo_mask *place_view_node_free(const struct place_view *v, size_t i);
