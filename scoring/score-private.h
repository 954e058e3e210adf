/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scoring internals shared by score.c (class, public API), score-model.c (bandwidth
 * constants, ring packing) and score-search.c (set search, memo).  Not installed, not
 * used outside scoring/.
 */
#pragma once

#include <pthread.h>

#include "score.h"

#define SCORE_RING_DFS_BUDGET 20000u   /* DFS nodes per ring search; exact for sets <= 8 */
#define SCORE_MAX_RINGS 32u            /* directed rings packed per speed (NCCL MAXCHANNELS) */
#define SCORE_MAX_LEVELS 12u           /* ring speeds tried per set */
#define SCORE_SET_CACHE_MAX_GPUS 16u   /* per-set busbw cache (2^n entries) up to this size */
#define SCORE_SEARCH_MAX_NODES 200000u /* set-search DFS nodes per decision */
#define SCORE_MEMO_BUCKETS (2 * SCORE_MEMO_MAX_ENTRIES)
#define SCORE_EPS 1e-9

/* How a directed hop i->j consumes bandwidth. */
enum score_edge {
        SCORE_EDGE_DIRECT,   /* dedicated NVLink bundle / XGMI link(s): per-pair capacity */
        SCORE_EDGE_FABRIC,   /* NVSwitch: draws on each GPU's fabric ports */
        SCORE_EDGE_PCIE,     /* PCIe (P2P or host-staged): draws on each GPU's PCIe link */
        SCORE_EDGE_PCIE_SYS, /* as PCIE, and also on the CPU interconnect */
        _SCORE_EDGE_MAX,
        _SCORE_EDGE_INVALID = -EINVAL,
};

/* Searches: full tie-break order, or modeled bandwidth only (fragmentation, ideal). */
enum score_mode {
        SCORE_MODE_FULL,
        SCORE_MODE_BUSBW,
        _SCORE_MODE_MAX,
        _SCORE_MODE_INVALID = -EINVAL,
};

struct score_memo_entry {
        /* key */
        struct topo_mask free;
        uint32_t count;
        uint32_t require;
        uint32_t mode;
        /* value */
        int r;            /* 0 or the negative errno the search returned */
        const char *why;  /* static string when r < 0 */
        struct topo_mask set;
        double busbw;
        double frag;
        unsigned numa;
        unsigned nic;
        bool p2p;
        bool all_nvlink;
        /* chain */
        int32_t next;
        bool used;
};

struct score_class {
        unsigned n_ref;               /* atomic */
        struct topo *topo;            /* own reference */
        struct score_config cfg;
        unsigned n;
        float *cap;                   /* n*n: path GB/s per direction (min over its links) */
        float *link_rate;             /* n*n: GB/s of one link of the path (ring speeds) */
        uint8_t *edge;                /* n*n: enum score_edge */
        uint8_t *nvl;                 /* n*n: 1 when NVLink or XGMI */
        uint8_t *p2p;                 /* n*n: 1 when NCCL would use direct P2P */
        float *port_cost;             /* n*n: PCIe link GB/s a hop uses per GB/s delivered */
        float *port_fabric;           /* n: NVSwitch port GB/s per direction */
        float *port_pcie;             /* n: PCIe link GB/s per direction */
        float cpu_gbps;               /* CPU interconnect GB/s per direction */
        unsigned *numa_idx;           /* n: dense NUMA index, unknown is its own index */
        bool *has_nic;                /* n: a NIC at most PXB away (GPUDirect RDMA) */
        unsigned *twin;               /* n: twin class of each GPU */
        unsigned n_twins;
        struct topo_mask *twin_mask;  /* n_twins, ordered by lowest member */
        bool twins_contiguous;        /* every twin class is a contiguous index range */
        bool fabric_all;              /* every pair is SCORE_EDGE_FABRIC */
        unsigned max_per_numa;        /* most GPUs on one NUMA index */
        uint32_t *set_busbw;          /* 2^n float bits (n <= 16), UINT32_MAX = not yet */
        uint64_t *ideal;              /* n+1 double bits, UINT64_MAX = not yet (atomic) */

        pthread_mutex_t lock;         /* guards everything below */
        struct score_memo_entry *memo;
        int32_t *bucket;
        unsigned memo_cursor;
        unsigned memo_entries;
        uint64_t hits;
        uint64_t misses;
};

static inline unsigned
score__idx(const struct score_class *c, unsigned i, unsigned j)
{
        return i * c->n + j;
}

/* score-model.c */
int score__fill_pairs(struct score_class *c);
/* The node priority terms' weights summed (1 by construction; test-score checks). */
double score__prio_weight_sum(void);
double score__set_busbw(const struct score_class *c, const struct topo_mask *set,
                        uint8_t *ret_order);
bool score__set_has_ring(const struct score_class *c, const struct topo_mask *set,
                         const uint8_t *ok);
unsigned score__set_numa(const struct score_class *c, const struct topo_mask *set);
unsigned score__set_nic(const struct score_class *c, const struct topo_mask *set);
bool score__set_pcie_switch(const struct score_class *c, const struct topo_mask *set);
double score__cached_busbw(struct score_class *c, const struct topo_mask *set);

/* score-search.c */
double score__ideal(struct score_class *c, unsigned k);
double score__frag(struct score_class *c, const struct topo_mask *left);
int score__search(struct score_class *c, const struct topo_mask *free, unsigned k,
                  unsigned require, enum score_mode mode, struct score_choice *top,
                  unsigned top_k, const char **ret_why);
void score__fill_choice(struct score_class *c, const struct topo_mask *set,
                        const struct topo_mask *free, struct score_choice *ret);
bool score__memo_get(struct score_class *c, const struct topo_mask *free, unsigned count,
                     unsigned require, enum score_mode mode, struct score_memo_entry *ret);
void score__memo_put(struct score_class *c, const struct score_memo_entry *e);
int score__memo_init(struct score_class *c);
