/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scoring: choose the GPU set for a request on one node and score it in physical units
 * (modeled all-reduce bus bandwidth, GB/s), NCCL-style: a path is as fast as its slowest
 * link, a ring as fast as its slowest hop.  docs/scoring.md documents every constant.
 *
 * PURE: no sockets, clocks, env, randomness or globals; depends on topology/ and common/.
 * A `struct score_class` is built once per topology class (nodes with equal
 * topo_class_hash() share one) and holds the precomputed pair bandwidths and a bounded
 * memo of decisions.  All functions taking a class are safe to call from many threads at
 * once (the memo has its own lock).
 */
#pragma once

#include "../topology/topo.h"

#define SCORE_MAX_SIZES 8         /* request sizes in the fragmentation mix */
#define SCORE_MEMO_MAX_ENTRIES 4096 /* per class; oldest evicted first */
#define SCORE_EXACT_MAX_GPUS 16   /* exhaustive search up to this many free GPUs */

/* Constraints a pod may ask for (topofit.io/placement). */
enum score_require {
        SCORE_REQUIRE_NVLINK = 1u << 0,      /* the set has a ring whose every hop is NVLink/XGMI */
        SCORE_REQUIRE_NUMA = 1u << 1,        /* all GPUs on one NUMA node */
        SCORE_REQUIRE_PCIE_SWITCH = 1u << 2, /* all pairs PIX or PXB (or better) */
        SCORE_REQUIRE_NIC = 1u << 3,         /* every GPU has a GPUDirect NIC (<= PXB) */
};

struct score_config {
        /* Weights of future request sizes for the fragmentation tie-breaker: size_of[k] GPUs
         * with weight weight_of[k].  Defaults (score_config_default): 1, 2, 4, 8 GPUs with
         * weights 0.55, 0.2, 0.15, 0.1, after the size mixes of public cluster traces. */
        unsigned n_sizes;
        unsigned size_of[SCORE_MAX_SIZES];
        double weight_of[SCORE_MAX_SIZES];
};
void score_config_default(struct score_config *cfg);

struct score_request {
        unsigned count;   /* GPUs wanted, >= 1 */
        unsigned require; /* enum score_require bits */
};

/* One candidate set and the values that ranked it, in tie-break order. */
struct score_choice {
        struct topo_mask set;
        unsigned n;                     /* == request count: the GPUs in set */
        double busbw_gbps;              /* modeled all-reduce bus bandwidth of the set */
        double ideal_gbps;              /* best busbw any set of this size gets on an empty node */
        unsigned numa_spanned;          /* distinct NUMA nodes (unknown counts as one) */
        unsigned nic_gpus;              /* GPUs with a GPUDirect-capable NIC path (<= PXB) */
        double frag_left;               /* weighted best-achievable score left for the mix */
        bool p2p;                       /* every ring hop can use direct peer-to-peer */
        bool all_nvlink_ring;           /* some ring through the set is all NVLink/XGMI */
};

struct score_class;

/* Builds the class for t (borrowed; the class keeps its own reference); cfg NULL means
 * score_config_default().  NULL on OOM or a bad cfg (more than SCORE_MAX_SIZES sizes, a
 * size 0, a negative or non-finite weight). */
struct score_class *score_class_new(struct topo *t, const struct score_config *cfg);
struct score_class *score_class_ref(struct score_class *c);
struct score_class *score_class_unref(struct score_class *c);
DEFINE_CLEANUP_FUNC(struct score_class, score_class_unref)
const struct topo *score_class_topo(const struct score_class *c);

/* Modeled bandwidth (GB/s, one direction) of the path between GPUs i and j. */
double score_pair_gbps(const struct score_class *c, unsigned i, unsigned j);

/* Evaluates an arbitrary set (any policy's choice, for benchmarks and explain): fills
 * every field of *ret but frag_left unless free is non-NULL (then frag_left is what free
 * minus set leaves).  Returns 0 or -EINVAL (empty set, GPU out of range). */
int score_evaluate(const struct score_class *c, const struct topo_mask *set,
                   const struct topo_mask *free, struct score_choice *ret);

/* The best free set for req, ties broken in the documented order, then by GPU index.
 * Returns 0 and *ret; -ENOSPC when fewer GPUs are free than requested; -EAGAIN when enough
 * are free but no free set meets the constraints (it might after others leave); -ENOEXEC
 * when no set of this node can meet them even when empty (never satisfiable here); -EINVAL
 * for a bad request.  *ret_why names the failed constraint in words. */
int score_best(struct score_class *c, const struct topo_mask *free, const struct score_request *req,
               struct score_choice *ret, const char **ret_why);

/* The best k sets (ret[0] is score_best's), for explain; returns how many it wrote. */
int score_top(struct score_class *c, const struct topo_mask *free, const struct score_request *req,
              struct score_choice *ret, unsigned k, const char **ret_why);

/* The node priority for kube-scheduler, an integer 0..10 (documented formula): modeled
 * bandwidth relative to ideal, packing (tight fits first), and fragmentation. */
int score_node_priority(const struct score_class *c, const struct topo_mask *free,
                        const struct score_choice *choice);

/* Ring detail for explain: writes the best ring's order (n entries) and each hop's GB/s. */
int score_best_ring(const struct score_class *c, const struct topo_mask *set, uint8_t *ret_order,
                    double *ret_hop_gbps);

/* Memo statistics, for metrics and benchmarks. */
struct score_memo_stats {
        uint64_t hits;
        uint64_t misses;
        unsigned entries;
};
void score_class_memo_stats(const struct score_class *c, struct score_memo_stats *ret);

/* Parses "nvlink", "numa", "pcie-switch", "nic" (comma-separated) into require bits. */
int score_require_parse(const char *s, unsigned *ret);
const char *score_require_to_string(unsigned require, char *buf, size_t size);
