/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench internals shared by the simulator and its policies: the live cluster state, the
 * decision memo, and the policy table.  Not for use outside bench/.
 */
#pragma once

#include "bench.h"

struct bench_sim_node {
        unsigned type; /* index into the cluster's types */
        unsigned n_gpus;
        unsigned n_free;
        struct topo_mask free;
        char name[BENCH_MAX_NAME + 16];
};

/* A direct-mapped cache of decisions keyed by (kind, node type, request size, free mask):
 * a colliding entry is overwritten, so memory stays at 2^BENCH_MEMO_BITS entries. */
enum bench_memo_kind {
        BENCH_MEMO_PAIRSCORE,  /* value: the picked set */
        BENCH_MEMO_EXHAUSTIVE, /* value: the best set and its busbw */
        BENCH_MEMO_EVALUATE,   /* key mask is the set; value: busbw, p2p */
};

struct bench_memo_entry {
        bool valid;
        uint8_t kind;
        uint16_t type;
        uint16_t count;
        struct topo_mask key;
        struct topo_mask set;
        double gbps;
        bool p2p;
};

struct bench_memo {
        struct bench_memo_entry e[1u << BENCH_MEMO_BITS];
};

struct bench_memo_entry *bench__memo_slot(struct bench_memo *m, enum bench_memo_kind kind,
                                         unsigned type, unsigned count,
                                         const struct topo_mask *key, bool *ret_hit);

struct bench_sim {
        const struct bench_cluster *cl;
        const struct bench_trace *trace;
        unsigned n_nodes;
        struct bench_sim_node *nodes;
        double now;
        uint64_t generation;      /* bumped on every placement and completion */
        unsigned *running;        /* job indices of running jobs (heap order) */
        unsigned n_running;
        struct bench_job_result *results;
        struct bench_memo *memo;
        bool have_last;           /* the state since the last event, for the integrals */
        double last_t;
        unsigned last_allocated, last_stranded;
        bool last_sat;            /* a waiting job fitted the free GPUs by count */
};

/* The best set of `count` GPUs among free on a node of type `type`: exhaustive search,
 * falling back to score_best() where exhaustive is over its cap.  Memoized. */
int bench__best(struct bench_sim *s, unsigned type, const struct topo_mask *free, unsigned count,
                struct topo_mask *ret_set, double *ret_gbps);

struct bench_policy_ops {
        int (*init)(struct bench_sim *s, void **ret_state);
        void (*done)(void *state);
        /* Optional: brings the policy's view up to date with the simulated cluster before a
         * decision (not counted as decision time: an informer does it in a real cluster). */
        int (*prepare)(struct bench_sim *s, void *state);
        /* Chooses a node and a set for job `job` of `gpus` GPUs.  -ENOSPC when no node
         * can take it now. */
        int (*place)(struct bench_sim *s, void *state, unsigned job, unsigned gpus,
                     unsigned *ret_node, struct topo_mask *ret_set);
};

/* The topofit policy (bench-topofit.c): the extender's decision path. */
extern const struct bench_policy_ops bench__topofit_ops;
