/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU pickers for the baseline policies: the device plugin's first free GPUs, NVIDIA's
 * best-effort pair-score partitioning (go-gpuallocator's BestEffortPolicy re-implemented from
 * its code, with NVML's link view; bench-peer.c checks it against the real thing), and an
 * exhaustive search over the scoring model for the oracle.  Pure: they read a borrowed
 * topology or score class and a free mask and write the chosen set into caller storage;
 * no allocation, bounded work (named caps), ties by GPU index.
 */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static const char *const p2p_names[_BENCH_P2P_MAX] = {
        [BENCH_P2P_CROSS_CPU] = "P2PLinkCrossCPU",
        [BENCH_P2P_SAME_CPU] = "P2PLinkSameCPU",
        [BENCH_P2P_HOST_BRIDGE] = "P2PLinkHostBridge",
        [BENCH_P2P_MULTI_SWITCH] = "P2PLinkMultiSwitch",
        [BENCH_P2P_SINGLE_SWITCH] = "P2PLinkSingleSwitch",
        [BENCH_P2P_SAME_BOARD] = "P2PLinkSameBoard",
        [BENCH_P2P_NVLINK1 + 0] = "SingleNVLINKLink",
        [BENCH_P2P_NVLINK1 + 1] = "TwoNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 2] = "ThreeNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 3] = "FourNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 4] = "FiveNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 5] = "SixNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 6] = "SevenNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 7] = "EightNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 8] = "NineNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 9] = "TenNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 10] = "ElevenNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 11] = "TwelveNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 12] = "ThirteenNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 13] = "FourteenNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 14] = "FifteenNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 15] = "SixteenNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 16] = "SeventeenNVLINKLinks",
        [BENCH_P2P_NVLINK1 + 17] = "EighteenNVLINKLinks",
};

const char *
bench_p2p_to_string(enum bench_p2p l)
{
        return l > BENCH_P2P_UNKNOWN && l < _BENCH_P2P_MAX ? p2p_names[l] : NULL;
}

/* The PCIe relation as NVML's GetTopologyCommonAncestor level, by our link class. */
static const enum bench_p2p pcie_p2p[_TOPO_LINK_MAX] = {
        [TOPO_LINK_PIX] = BENCH_P2P_SINGLE_SWITCH,
        [TOPO_LINK_PXB] = BENCH_P2P_MULTI_SWITCH,
        [TOPO_LINK_PCIE] = BENCH_P2P_MULTI_SWITCH, /* rocm-smi PCIe of unknown depth */
        [TOPO_LINK_PHB] = BENCH_P2P_HOST_BRIDGE,
        [TOPO_LINK_NODE] = BENCH_P2P_SAME_CPU,
        [TOPO_LINK_SYS] = BENCH_P2P_CROSS_CPU,
};

unsigned
bench_p2p_links(const struct topo *t, unsigned i, unsigned j, enum bench_p2p ret[2])
{
        const struct topo_pair *p;
        unsigned n = 0;

        if (i == j || i >= t->n_gpus || j >= t->n_gpus)
                return 0;
        p = topo_pair(t, i, j);
        if (p->link == TOPO_LINK_NVLINK || p->link == TOPO_LINK_XGMI) {
                int a = t->gpus[i].numa, b = t->gpus[j].numa;

                ret[n++] = a >= 0 && a == b ? BENCH_P2P_SAME_CPU : BENCH_P2P_CROSS_CPU;
                if (!t->nvswitch)
                        ret[n++] = BENCH_P2P_NVLINK1 + MIN(MAX((unsigned)p->links, 1u), 18u) - 1;
                return n;
        }
        if (p->link < _TOPO_LINK_MAX && pcie_p2p[p->link] != BENCH_P2P_UNKNOWN)
                ret[n++] = pcie_p2p[p->link];
        return n;
}

unsigned
bench_pair_score(const struct topo *t, unsigned i, unsigned j)
{
        enum bench_p2p l[2];
        unsigned n = bench_p2p_links(t, i, j, l), s = 0;

        /* go-gpuallocator's calculateGPUPairScore: 10 per PCIe level, 100 per NVLink. */
        for (unsigned k = 0; k < n; k++)
                s += l[k] >= BENCH_P2P_NVLINK1 ? 100u * (l[k] - BENCH_P2P_NVLINK1 + 1) : 10u * l[k];
        return s;
}

static unsigned
free_list(const struct topo *t, const struct topo_mask *free, uint8_t *ret)
{
        unsigned n = 0;

        for (unsigned i = 0; i < t->n_gpus; i++)
                if (topo_mask_test(free, i))
                        ret[n++] = (uint8_t)i;
        return n;
}

int
bench_pick_first(const struct topo *t, const struct topo_mask *free, unsigned count,
                 struct topo_mask *ret)
{
        struct topo_mask m;
        unsigned n = 0;

        if (count == 0)
                return -EINVAL;
        topo_mask_clear(&m);
        for (unsigned i = 0; i < t->n_gpus && n < count; i++)
                if (topo_mask_test(free, i)) {
                        topo_mask_set(&m, i);
                        n++;
                }
        if (n < count)
                return -ENOSPC;
        *ret = m;
        return 0;
}

/* --- best-effort partitioning ----------------------------------------------------------- */

#define NIL 0xff /* a padding slot */

struct part {
        unsigned k;                       /* set size */
        unsigned n;                       /* real GPUs */
        uint8_t gpu[TOPO_MAX_GPUS];       /* local index -> GPU index */
        uint16_t score[TOPO_MAX_GPUS][TOPO_MAX_GPUS];
        unsigned max_pair;
        bool used[TOPO_MAX_GPUS];
        uint8_t cur[TOPO_MAX_GPUS + BENCH_GEN_MAX_SIZES * 16]; /* sets laid end to end */
        unsigned cur_len;
        uint8_t best[TOPO_MAX_GPUS + BENCH_GEN_MAX_SIZES * 16];
        unsigned best_len;
        uint64_t best_score;
        bool have_best;
        uint64_t visits;
};

static uint64_t
pairs_upper_bound(const struct part *p, unsigned reals)
{
        uint64_t full = reals / p->k, rest = reals % p->k;

        return (uint64_t)p->max_pair *
               (full * p->k * (p->k - 1) / 2 + rest * (rest ? rest - 1 : 0) / 2);
}

static uint64_t
set_score(const struct part *p, const uint8_t *set)
{
        uint64_t s = 0;

        for (unsigned a = 0; a < p->k; a++)
                for (unsigned b = a + 1; b < p->k; b++)
                        if (set[a] != NIL && set[b] != NIL)
                                s += p->score[set[a]][set[b]];
        return s;
}

static bool
has_full_set(const uint8_t *sets, unsigned len, unsigned k)
{
        for (unsigned s = 0; s < len; s += k) {
                bool full = true;

                for (unsigned a = 0; a < k; a++)
                        full = full && sets[s + a] != NIL;
                if (full)
                        return true;
        }
        return false;
}

static void partition(struct part *p, unsigned reals, unsigned nils, uint64_t partial);

/* Completes the set anchored at cur[base] with `need` more members chosen from the unused
 * real GPUs above `from`, or with all the nils at once (nils are interchangeable, so each
 * partition is produced once). */
static void
complete_set(struct part *p, unsigned base, unsigned need, unsigned from, unsigned reals,
             unsigned nils, unsigned nils_taken, uint64_t partial)
{
        if (p->visits >= BENCH_PARTITION_MAX_VISITS)
                return;
        if (need == 0) {
                unsigned taken_reals = p->k - nils_taken;

                partition(p, reals - taken_reals, nils - nils_taken,
                          partial + set_score(p, &p->cur[base]));
                return;
        }
        for (unsigned i = from; i < p->n; i++) {
                if (p->used[i])
                        continue;
                p->used[i] = true;
                p->cur[p->cur_len++] = (uint8_t)i;
                complete_set(p, base, need - 1, i + 1, reals, nils, nils_taken, partial);
                p->cur_len--;
                p->used[i] = false;
        }
        /* Nils sort after every real GPU, as padding appended to the device list does, and
         * a set takes all the padding or none (go-gpuallocator's iterateGPUPartitions skips
         * sets with some of it): so the nils go in only when they fill the set exactly. */
        if (nils_taken == 0 && nils > 0 && need == nils) {
                for (unsigned a = 0; a < nils; a++)
                        p->cur[p->cur_len++] = NIL;
                complete_set(p, base, 0, p->n, reals, nils, nils, partial);
                p->cur_len -= nils;
        }
}

static void
partition(struct part *p, unsigned reals, unsigned nils, uint64_t partial)
{
        unsigned anchor;

        p->visits++;
        if (p->have_best && partial + pairs_upper_bound(p, reals) <= p->best_score)
                return; /* cannot beat the first best strictly: its order is kept */
        if (reals == 0) {
                if (!has_full_set(p->cur, p->cur_len, p->k))
                        return;
                /* The remaining nils form sets of their own: score 0. */
                if (!p->have_best || partial > p->best_score) {
                        memcpy(p->best, p->cur, p->cur_len);
                        p->best_len = p->cur_len;
                        p->best_score = partial;
                        p->have_best = true;
                }
                return;
        }
        for (anchor = 0; p->used[anchor]; anchor++)
                ;
        p->used[anchor] = true;
        p->cur[p->cur_len++] = (uint8_t)anchor;
        complete_set(p, p->cur_len - 1, p->k - 1, anchor + 1, reals, nils, 0, partial);
        p->cur_len--;
        p->used[anchor] = false;
}

int
bench_pick_pairscore(const struct topo *t, const struct topo_mask *free, unsigned count,
                     struct topo_mask *ret)
{
        static _Thread_local struct part p; /* 40 KiB of scratch: not for the stack */
        const uint8_t *bestset = NULL;
        uint64_t bestscore = 0;
        struct topo_mask m;

        if (count == 0)
                return -EINVAL;
        memset(&p, 0, offsetof(struct part, score));
        p.k = count;
        p.n = free_list(t, free, p.gpu);
        if (p.n < count)
                return -ENOSPC;
        if (count == 1 || p.n == count)
                return bench_pick_first(t, free, count, ret);
        p.max_pair = 0;
        for (unsigned a = 0; a < p.n; a++)
                for (unsigned b = 0; b < p.n; b++) {
                        p.score[a][b] = (uint16_t)MIN(bench_pair_score(t, p.gpu[a], p.gpu[b]),
                                                      UINT16_MAX);
                        p.max_pair = MAX(p.max_pair, p.score[a][b]);
                }
        memset(p.used, 0, sizeof(p.used));
        p.cur_len = 0;
        p.have_best = false;
        p.visits = 0;
        partition(&p, p.n, (count - p.n % count) % count, 0);
        if (!p.have_best)
                return -ENOSPC; /* unreachable: the first partition always has a full set */
        for (unsigned s = 0; s < p.best_len; s += count) {
                bool full = true;
                uint64_t sc;

                for (unsigned a = 0; a < count; a++)
                        full = full && p.best[s + a] != NIL;
                if (!full)
                        continue;
                sc = set_score(&p, &p.best[s]);
                if (!bestset || sc > bestscore) {
                        bestset = &p.best[s];
                        bestscore = sc;
                }
        }
        topo_mask_clear(&m);
        for (unsigned a = 0; a < count; a++)
                topo_mask_set(&m, p.gpu[bestset[a]]);
        *ret = m;
        return 0;
}

/* --- exhaustive search over the scoring model ------------------------------------------- */

static uint64_t
binomial(unsigned n, unsigned k)
{
        uint64_t r = 1;

        if (k > n)
                return 0;
        for (unsigned i = 1; i <= k; i++) {
                r = r * (n - k + i) / i;
                if (r > UINT32_MAX)
                        return UINT64_MAX;
        }
        return r;
}

struct exh {
        const struct score_class *c;
        uint8_t gpu[TOPO_MAX_GPUS];
        unsigned n, k;
        uint8_t pick[TOPO_MAX_GPUS];
        struct topo_mask best;
        double best_gbps;
        unsigned best_numa;
        bool have;
};

static void
exh_walk(struct exh *e, unsigned from, unsigned depth)
{
        struct score_choice ch;
        struct topo_mask m;

        if (depth == e->k) {
                topo_mask_clear(&m);
                for (unsigned a = 0; a < e->k; a++)
                        topo_mask_set(&m, e->gpu[e->pick[a]]);
                if (score_evaluate(e->c, &m, NULL, &ch) < 0)
                        return;
                if (!e->have || ch.busbw_gbps > e->best_gbps * (1 + 1e-9) ||
                    (ch.busbw_gbps >= e->best_gbps * (1 - 1e-9) && ch.numa_spanned < e->best_numa)) {
                        e->best = m;
                        e->best_gbps = ch.busbw_gbps;
                        e->best_numa = ch.numa_spanned;
                        e->have = true;
                }
                return;
        }
        for (unsigned i = from; i + (e->k - depth) <= e->n; i++) {
                e->pick[depth] = (uint8_t)i;
                exh_walk(e, i + 1, depth + 1);
        }
}

int
bench_pick_exhaustive(const struct score_class *c, const struct topo_mask *free, unsigned count,
                      struct topo_mask *ret, double *ret_gbps)
{
        struct exh e = { .c = c, .k = count };

        if (count == 0)
                return -EINVAL;
        e.n = free_list(score_class_topo(c), free, e.gpu);
        if (e.n < count)
                return -ENOSPC;
        if (binomial(e.n, count) > BENCH_EXHAUSTIVE_MAX_SETS)
                return -E2BIG;
        exh_walk(&e, 0, 0);
        if (!e.have)
                return -EINVAL;
        *ret = e.best;
        *ret_gbps = e.best_gbps;
        return 0;
}
