/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The physical model: per-GPU link rates from the GPU model (docs/scoring.md cites every
 * constant), the GB/s of each pair's path (NCCL style: the minimum over its links), and
 * the all-reduce bus bandwidth of a set: the best packing of directed rings at one ring
 * speed (as NCCL's search keeps one speed for all its channels), where a direct NVLink or
 * XGMI bundle is a per-pair capacity and NVSwitch ports, PCIe links and the CPU
 * interconnect are per-GPU / per-direction budgets that every ring through them shares.
 * Pure: reads the class's arrays, writes only caller-provided memory and the stack.
 */
#include <math.h>
#include <string.h>

#include "score-private.h"

#define SCORE_DIRECT_NVLINK_MAX 18     /* most NVLinks one GPU wires (H100, B200) */
#define SCORE_HOST_STAGED_FACTOR 0.8f  /* host-memory staging vs. P2P at the same PCIe rate */
#define SCORE_PACK_MAX_GPUS 32u        /* residual per-pair capacities tracked up to this */
#define SCORE_DEFAULT_NVLINK_GBPS 25.0f /* one link, generation unknown (NVLink 2-4) */
#define SCORE_DEFAULT_XGMI_GBPS 46.0f  /* one link, AMD generation unknown (oldest) */
#define SCORE_DEFAULT_PCIE_GEN 3

/* The ring search is exhaustive for sets of 8: Hamiltonian paths from a fixed start on 8
 * vertices form a tree of sum(7!/(7-k)!, k = 0..7) = 13,700 nodes. */
_Static_assert(SCORE_RING_DFS_BUDGET >= 13700u, "ring search budget below an 8-GPU set");

/* GB/s per direction of one NVLink, by generation (index = generation). */
static const float nvlink_gen_gbps[] = {
        [0] = SCORE_DEFAULT_NVLINK_GBPS,
        [1] = 20.0f, /* P100: 4 links, 160 GB/s bidirectional */
        [2] = 25.0f, /* V100: 6 links, 300 GB/s bidirectional */
        [3] = 25.0f, /* A100: 12 links, 600 GB/s bidirectional */
        [4] = 25.0f, /* H100/H200/H800/H20: 18 (H800: 8) links, 900 GB/s bidirectional */
        [5] = 50.0f, /* B200/GB200/B300: 18 links, 1.8 TB/s bidirectional */
};

/* PCIe generation when only the NVLink generation is known. */
static const uint8_t nvlink_gen_pcie_gen[] = {
        [0] = SCORE_DEFAULT_PCIE_GEN, [1] = 3, [2] = 3, [3] = 4, [4] = 5, [5] = 5,
};

/* GB/s per direction of a x16 link, by PCIe generation (achievable, not raw). */
static const float pcie_gen_gbps[] = {
        [0] = 12.0f, [1] = 3.0f, [2] = 6.0f, [3] = 12.0f, [4] = 24.0f, [5] = 48.0f, [6] = 96.0f,
};

/* GB/s per direction across the CPU interconnect, by enum topo_cpu_link. */
static const float cpu_link_gbps[_TOPO_CPU_LINK_MAX] = {
        [TOPO_CPU_LINK_UNKNOWN] = 10.0f,    /* conservative: the slowest common (Skylake UPI) */
        [TOPO_CPU_LINK_INTEL_UPI] = 10.0f,  /* Skylake..Ice Lake UPI as GPUs see it */
        [TOPO_CPU_LINK_INTEL_UPI2] = 22.0f, /* Sapphire Rapids UPI 2.0 */
        [TOPO_CPU_LINK_AMD_IF] = 16.0f,     /* EPYC socket-to-socket Infinity Fabric */
        [TOPO_CPU_LINK_POWER_XBUS] = 32.0f, /* POWER9 X-bus, 64 GB/s bidirectional */
        [TOPO_CPU_LINK_ARM_C2C] = 450.0f,   /* Grace NVLink-C2C, 900 GB/s bidirectional */
};

/* What the GPU model name tells when the topology does not: matched as a case-insensitive
 * substring, first match wins, so more specific names come first.  0 = not known here. */
static const struct gpu_spec {
        const char *match;
        uint8_t nvlink_gen;
        uint8_t pcie_gen;
        float nvlink_gbps; /* per link, overrides the generation's rate (bridges) */
        float xgmi_gbps;   /* per link */
} gpu_specs[] = {
        { "GB200", 5, 5, 0, 0 },     { "B300", 5, 6, 0, 0 },      { "B200", 5, 5, 0, 0 },
        { "B100", 5, 5, 0, 0 },      { "GH200", 4, 5, 0, 0 },     { "H100", 4, 5, 0, 0 },
        { "H200", 4, 5, 0, 0 },      { "H800", 4, 5, 0, 0 },      { "H20", 4, 5, 0, 0 },
        { "A100", 3, 4, 0, 0 },      { "A800", 3, 4, 0, 0 },      { "A30", 3, 4, 0, 0 },
        /* NVLink bridges of GeForce/workstation Ampere: 112.5 GB/s over 4 links, both ways */
        { "RTX 3090", 3, 4, 14.0f, 0 }, { "A6000", 3, 4, 14.0f, 0 }, { "A40", 3, 4, 14.0f, 0 },
        { "RTX 4090", 0, 4, 0, 0 },  { "RTX 5090", 0, 5, 0, 0 },  { "L40", 0, 4, 0, 0 },
        { "V100", 2, 3, 0, 0 },      { "P100", 1, 3, 0, 0 },      { "T4", 0, 3, 0, 0 },
        { "P40", 0, 3, 0, 0 },       { "P4", 0, 3, 0, 0 },        { "K80", 0, 3, 0, 0 },
        /* AMD Instinct: per-link Infinity Fabric GB/s per direction */
        { "MI300", 0, 5, 0, 64.0f }, { "MI308", 0, 5, 0, 64.0f }, { "MI325", 0, 5, 0, 64.0f },
        { "0x74a", 0, 5, 0, 64.0f }, { "gfx942", 0, 5, 0, 64.0f }, { "MI250", 0, 4, 0, 50.0f },
        { "MI210", 0, 4, 0, 50.0f }, { "gfx90a", 0, 4, 0, 50.0f }, { "0x740", 0, 4, 0, 50.0f },
        { "MI100", 0, 4, 0, 46.0f }, { "gfx908", 0, 4, 0, 46.0f }, { "0x738", 0, 4, 0, 46.0f },
        { "MI50", 0, 4, 0, 46.0f },  { "MI60", 0, 4, 0, 46.0f },  { "gfx906", 0, 4, 0, 46.0f },
        { "0x66a", 0, 4, 0, 46.0f },
};

static const struct gpu_spec *
spec_lookup(const char *model)
{
        if (!model || !model[0])
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(gpu_specs); i++)
                if (strcasestr(model, gpu_specs[i].match))
                        return &gpu_specs[i];
        return NULL;
}

struct gpu_rates {
        float nvlink; /* one NVLink */
        float xgmi;   /* one XGMI link */
        float pcie;   /* the GPU's PCIe link */
};

static struct gpu_rates
gpu_rates(const struct topo_gpu *g)
{
        const struct gpu_spec *s = spec_lookup(g->model);
        unsigned nvgen = g->nvlink_gen ? g->nvlink_gen : s ? s->nvlink_gen : 0;
        unsigned pgen = g->pcie_gen ? g->pcie_gen : s && s->pcie_gen ? s->pcie_gen : 0;
        struct gpu_rates r;

        if (nvgen >= ELEMENTSOF(nvlink_gen_gbps))
                nvgen = 0;
        if (pgen == 0)
                pgen = nvlink_gen_pcie_gen[nvgen];
        if (pgen >= ELEMENTSOF(pcie_gen_gbps))
                pgen = ELEMENTSOF(pcie_gen_gbps) - 1;
        r.nvlink = s && s->nvlink_gbps > 0 ? s->nvlink_gbps : nvlink_gen_gbps[nvgen];
        r.xgmi = s && s->xgmi_gbps > 0 ? s->xgmi_gbps : SCORE_DEFAULT_XGMI_GBPS;
        r.pcie = pcie_gen_gbps[pgen];
        if (g->pcie_width > 0 && g->pcie_width < 16)
                r.pcie = r.pcie * (float)g->pcie_width / 16.0f;
        return r;
}

/* Relations NCCL/RCCL use direct peer-to-peer for (NCCL_P2P_LEVEL defaults to PXB). */
static const bool link_p2p[_TOPO_LINK_MAX] = {
        [TOPO_LINK_NVLINK] = true, [TOPO_LINK_XGMI] = true, [TOPO_LINK_PIX] = true,
        [TOPO_LINK_PXB] = true,    [TOPO_LINK_PCIE] = true,
};

int
score__fill_pairs(struct score_class *c)
{
        const struct topo *t = c->topo;
        unsigned n = c->n;
        struct gpu_rates rates[TOPO_MAX_GPUS];
        bool fabric = t->nvswitch;
        float cpu;

        cpu = t->cpu_link < _TOPO_CPU_LINK_MAX ? cpu_link_gbps[t->cpu_link]
                                               : cpu_link_gbps[TOPO_CPU_LINK_UNKNOWN];
        c->cpu_gbps = cpu;
        for (unsigned i = 0; i < n; i++) {
                unsigned total = 0, most = 0;

                rates[i] = gpu_rates(&t->gpus[i]);
                for (unsigned j = 0; j < n; j++) {
                        const struct topo_pair *p = topo_pair(t, i, j);
                        if (i == j || p->link != TOPO_LINK_NVLINK)
                                continue;
                        unsigned l = p->links ? p->links : 1;
                        total += l;
                        most = MAX(most, l);
                }
                /* More NVLinks than any GPU wires directly: an NVSwitch fabric. */
                if (total > SCORE_DIRECT_NVLINK_MAX)
                        fabric = true;
                c->port_fabric[i] = (float)most * rates[i].nvlink;
                c->port_pcie[i] = rates[i].pcie;
        }

        c->fabric_all = n > 1;
        for (unsigned i = 0; i < n; i++)
                for (unsigned j = 0; j < n; j++) {
                        const struct topo_pair *p = topo_pair(t, i, j);
                        unsigned k = score__idx(c, i, j);
                        float pcie = MIN(rates[i].pcie, rates[j].pcie);
                        unsigned l = p->links ? p->links : 1;
                        enum topo_link link = p->link < _TOPO_LINK_MAX ? p->link : TOPO_LINK_UNKNOWN;

                        c->nvl[k] = link == TOPO_LINK_NVLINK || link == TOPO_LINK_XGMI;
                        c->port_cost[k] = link_p2p[link] ? 1.0f : 1.0f / SCORE_HOST_STAGED_FACTOR;
                        c->p2p[k] = link_p2p[link];
                        if (i == j) {
                                c->cap[k] = 0;
                                c->link_rate[k] = 0;
                                c->edge[k] = SCORE_EDGE_DIRECT;
                                continue;
                        }
                        switch (link) {
                        case TOPO_LINK_NVLINK:
                                c->link_rate[k] = MIN(rates[i].nvlink, rates[j].nvlink);
                                if (fabric) {
                                        c->edge[k] = SCORE_EDGE_FABRIC;
                                        c->cap[k] = MIN(c->port_fabric[i], c->port_fabric[j]);
                                } else {
                                        c->edge[k] = SCORE_EDGE_DIRECT;
                                        c->cap[k] = (float)l * c->link_rate[k];
                                }
                                break;
                        case TOPO_LINK_XGMI:
                                /* A multi-hop XGMI path is still as fast as one link. */
                                c->edge[k] = SCORE_EDGE_DIRECT;
                                c->link_rate[k] = MIN(rates[i].xgmi, rates[j].xgmi);
                                c->cap[k] = (float)l * c->link_rate[k];
                                break;
                        case TOPO_LINK_PIX:
                        case TOPO_LINK_PXB:
                        case TOPO_LINK_PCIE:
                                c->edge[k] = SCORE_EDGE_PCIE;
                                c->cap[k] = pcie;
                                c->link_rate[k] = pcie;
                                break;
                        case TOPO_LINK_PHB:
                        case TOPO_LINK_NODE:
                                c->edge[k] = SCORE_EDGE_PCIE;
                                c->cap[k] = pcie * SCORE_HOST_STAGED_FACTOR;
                                c->link_rate[k] = c->cap[k];
                                break;
                        default: /* SYS, UNKNOWN: assume the worst, a socket crossing */
                                c->edge[k] = SCORE_EDGE_PCIE_SYS;
                                c->cap[k] = MIN(pcie * SCORE_HOST_STAGED_FACTOR, cpu);
                                c->link_rate[k] = c->cap[k];
                                break;
                        }
                        if (c->edge[k] != SCORE_EDGE_FABRIC)
                                c->fabric_all = false;
                }
        return 0;
}

/* --- set properties -------------------------------------------------------------------- */

static unsigned
set_members(const struct score_class *c, const struct topo_mask *set, unsigned *idx)
{
        unsigned m = 0;

        for (unsigned i = 0; i < c->n; i++)
                if (topo_mask_test(set, i))
                        idx[m++] = i;
        return m;
}

unsigned
score__set_numa(const struct score_class *c, const struct topo_mask *set)
{
        struct topo_mask seen;

        topo_mask_clear(&seen);
        for (unsigned i = 0; i < c->n; i++)
                if (topo_mask_test(set, i))
                        topo_mask_set(&seen, c->numa_idx[i]);
        return topo_mask_count(&seen);
}

unsigned
score__set_nic(const struct score_class *c, const struct topo_mask *set)
{
        unsigned k = 0;

        for (unsigned i = 0; i < c->n; i++)
                if (topo_mask_test(set, i) && c->has_nic[i])
                        k++;
        return k;
}

bool
score__set_pcie_switch(const struct score_class *c, const struct topo_mask *set)
{
        unsigned idx[TOPO_MAX_GPUS], m = set_members(c, set, idx);

        for (unsigned a = 0; a < m; a++)
                for (unsigned b = a + 1; b < m; b++) {
                        enum topo_link l = topo_pair(c->topo, idx[a], idx[b])->link;
                        if (l != TOPO_LINK_NVLINK && l != TOPO_LINK_XGMI && l != TOPO_LINK_PIX &&
                            l != TOPO_LINK_PXB)
                                return false;
                }
        return true;
}

/* --- rings ------------------------------------------------------------------------------- */

struct ring {
        const struct score_class *c;
        unsigned m;
        const unsigned *idx;   /* local -> GPU index */
        float v;               /* ring speed being packed */
        float *rcap;           /* m*m residual per-pair capacity, NULL: not tracked */
        float out_f[TOPO_MAX_GPUS], in_f[TOPO_MAX_GPUS];
        float out_p[TOPO_MAX_GPUS], in_p[TOPO_MAX_GPUS];
        float cpu[3];          /* per direction: lower NUMA index -> higher, back, none */
        const uint8_t *ok;     /* n*n predicate instead of capacities (has_ring) */
        uint8_t order[TOPO_MAX_GPUS];
        bool used[TOPO_MAX_GPUS];
        unsigned budget;
};

/* The CPU interconnect direction a hop crosses: 0 up the NUMA order, 1 down, 2 none known
 * (same or unknown NUMA node: the pair's path rate already carries the CPU limit). */
static unsigned
ring_cpu_dir(const struct ring *r, unsigned a, unsigned b)
{
        unsigned na = r->c->numa_idx[r->idx[a]], nb = r->c->numa_idx[r->idx[b]];

        return na < nb ? 0 : na > nb ? 1 : 2;
}

/* What is left of the tightest resource once hop a->b carries the ring at this speed;
 * negative when the hop cannot carry it. */
static float
ring_slack(const struct ring *r, unsigned a, unsigned b)
{
        const struct score_class *c = r->c;
        unsigned k = score__idx(c, r->idx[a], r->idx[b]);
        float v = r->v, pv, s;

        if (r->ok)
                return r->ok[k] ? 1.0f : -1.0f;
        if (c->cap[k] + SCORE_EPS < v)
                return -1.0f;
        s = r->rcap ? r->rcap[a * r->m + b] - v : c->cap[k] - v;
        switch (c->edge[k]) {
        case SCORE_EDGE_DIRECT:
                break;
        case SCORE_EDGE_FABRIC:
                s = MIN(r->out_f[a], r->in_f[b]) - v;
                break;
        case SCORE_EDGE_PCIE_SYS:
                s = MIN(s, r->cpu[ring_cpu_dir(r, a, b)] - v);
                __attribute__((fallthrough));
        default:
                pv = v * c->port_cost[k];
                s = MIN(s, MIN(r->out_p[a], r->in_p[b]) - pv);
                break;
        }
        return s >= -(float)SCORE_EPS * MAX(1.0f, v) ? MAX(s, 0.0f) : -1.0f;
}

static void
ring_use(struct ring *r, unsigned a, unsigned b, float v)
{
        const struct score_class *c = r->c;
        unsigned k = score__idx(c, r->idx[a], r->idx[b]);

        if (r->ok)
                return;
        switch (c->edge[k]) {
        case SCORE_EDGE_FABRIC:
                r->out_f[a] -= v;
                r->in_f[b] -= v;
                return;
        case SCORE_EDGE_PCIE_SYS:
                r->cpu[ring_cpu_dir(r, a, b)] -= v;
                __attribute__((fallthrough));
        case SCORE_EDGE_PCIE:
                r->out_p[a] -= v * c->port_cost[k];
                r->in_p[b] -= v * c->port_cost[k];
                break;
        default:
                break;
        }
        if (r->rcap)
                r->rcap[a * r->m + b] -= v;
}

/* Extends the path order[0..pos) to a ring; neighbours are tried most slack first, then by
 * index, so the packing spreads over the links and stays deterministic. */
static bool
ring_dfs(struct ring *r, unsigned pos)
{
        unsigned a = r->order[pos - 1], n_cand = 0;
        uint8_t cand[SCORE_PACK_MAX_GPUS];
        float slack[SCORE_PACK_MAX_GPUS];
        bool can_close = false;

        if (r->budget == 0)
                return false;
        r->budget--;
        if (pos == r->m) {
                if (ring_slack(r, a, r->order[0]) < 0)
                        return false;
                ring_use(r, a, r->order[0], r->v);
                return true;
        }
        /* Someone still unvisited must be able to close the ring. */
        for (unsigned b = 0; b < r->m && !can_close; b++)
                can_close = !r->used[b] && ring_slack(r, b, r->order[0]) >= 0;
        if (!can_close)
                return false;
        if (r->m > SCORE_PACK_MAX_GPUS) {
                /* large sets: the first feasible neighbour by index, one ring only */
                for (unsigned b = 0; b < r->m; b++) {
                        if (r->used[b] || ring_slack(r, a, b) < 0)
                                continue;
                        r->used[b] = true;
                        r->order[pos] = (uint8_t)b;
                        ring_use(r, a, b, r->v);
                        if (ring_dfs(r, pos + 1))
                                return true;
                        ring_use(r, a, b, -r->v);
                        r->used[b] = false;
                        if (r->budget == 0)
                                return false;
                }
                return false;
        }
        for (unsigned b = 0; b < r->m; b++) {
                float sl;
                unsigned at;

                if (r->used[b] || (sl = ring_slack(r, a, b)) < 0)
                        continue;
                /* insertion by (slack desc, index asc) */
                for (at = n_cand; at > 0 && slack[at - 1] < sl; at--) {
                        slack[at] = slack[at - 1];
                        cand[at] = cand[at - 1];
                }
                slack[at] = sl;
                cand[at] = (uint8_t)b;
                n_cand++;
        }
        for (unsigned i = 0; i < n_cand; i++) {
                unsigned b = cand[i];

                r->used[b] = true;
                r->order[pos] = (uint8_t)b;
                ring_use(r, a, b, r->v);
                if (ring_dfs(r, pos + 1))
                        return true;
                ring_use(r, a, b, -r->v);
                r->used[b] = false;
                if (r->budget == 0)
                        return false;
        }
        return false;
}

/* A ring needs every GPU reachable from GPU 0 and back over hops that can carry it:
 * a cheap test that spares the exhaustive search where the hops fall apart. */
static bool
ring_connected(struct ring *r)
{
        for (unsigned dir = 0; dir < 2; dir++) {
                uint8_t queue[TOPO_MAX_GPUS];
                bool seen[TOPO_MAX_GPUS] = { [0] = true };
                unsigned head = 0, tail = 0, reached = 1;

                queue[tail++] = 0;
                while (head < tail) {
                        unsigned a = queue[head++];
                        for (unsigned b = 0; b < r->m; b++) {
                                if (seen[b] || (dir == 0 ? ring_slack(r, a, b) : ring_slack(r, b, a)) < 0)
                                        continue;
                                seen[b] = true;
                                reached++;
                                queue[tail++] = (uint8_t)b;
                        }
                }
                if (reached != r->m)
                        return false;
        }
        return true;
}

static bool
ring_find(struct ring *r)
{
        if (!ring_connected(r))
                return false;
        memset(r->used, 0, sizeof(r->used));
        r->order[0] = 0;
        r->used[0] = true;
        r->budget = SCORE_RING_DFS_BUDGET;
        return ring_dfs(r, 1);
}

bool
score__set_has_ring(const struct score_class *c, const struct topo_mask *set, const uint8_t *ok)
{
        unsigned idx[TOPO_MAX_GPUS];
        struct ring r = { .c = c, .idx = idx, .ok = ok };

        r.m = set_members(c, set, idx);
        if (r.m <= 1)
                return true;
        return ring_find(&r);
}

static int
cmp_float_desc(const void *a, const void *b)
{
        float x = *(const float *)a, y = *(const float *)b;
        return x < y ? 1 : x > y ? -1 : 0;
}

static void
ring_reset(struct ring *r)
{
        const struct score_class *c = r->c;

        for (unsigned a = 0; a < r->m; a++) {
                r->out_f[a] = r->in_f[a] = c->port_fabric[r->idx[a]];
                r->out_p[a] = r->in_p[a] = c->port_pcie[r->idx[a]];
                if (r->rcap)
                        for (unsigned b = 0; b < r->m; b++)
                                r->rcap[a * r->m + b] = c->cap[score__idx(c, r->idx[a], r->idx[b])];
        }
        r->cpu[0] = r->cpu[1] = c->cpu_gbps;
        r->cpu[2] = INFINITY;
}

double
score__set_busbw(const struct score_class *c, const struct topo_mask *set, uint8_t *ret_order)
{
        unsigned idx[TOPO_MAX_GPUS];
        float rcap[SCORE_PACK_MAX_GPUS * SCORE_PACK_MAX_GPUS];
        float levels[3 * SCORE_PACK_MAX_GPUS * SCORE_PACK_MAX_GPUS / 2 + 8];
        struct ring r = { .c = c, .idx = idx };
        unsigned m = set_members(c, set, idx), n_levels = 0;
        double best = 0, ub = INFINITY;
        bool fabric = true;

        r.m = m;
        if (ret_order)
                for (unsigned a = 0; a < m; a++)
                        ret_order[a] = (uint8_t)idx[a];
        if (m <= 1)
                return 0;

        /* Upper bound: what each GPU can send at all. */
        for (unsigned a = 0; a < m; a++) {
                double out = 0;
                bool any_f = false, any_p = false;

                for (unsigned b = 0; b < m; b++) {
                        unsigned k = score__idx(c, idx[a], idx[b]);
                        if (a == b)
                                continue;
                        switch (c->edge[k]) {
                        case SCORE_EDGE_DIRECT:
                                out += c->cap[k];
                                fabric = false;
                                break;
                        case SCORE_EDGE_FABRIC:
                                any_f = true;
                                break;
                        default:
                                any_p = true;
                                fabric = false;
                                break;
                        }
                }
                out += (any_f ? c->port_fabric[idx[a]] : 0) + (any_p ? c->port_pcie[idx[a]] : 0);
                ub = MIN(ub, out);
        }

        /* A non-blocking NVSwitch fabric: one ring at the slowest GPU's port rate fills it. */
        if (fabric) {
                double v = INFINITY;
                for (unsigned a = 0; a < m; a++)
                        v = MIN(v, c->port_fabric[idx[a]]);
                return (float)v;
        }

        /* Large non-fabric sets: one ring per speed, capacities not tracked per pair. */
        r.rcap = m <= SCORE_PACK_MAX_GPUS ? rcap : NULL;

        for (unsigned a = 0; a < m && m <= SCORE_PACK_MAX_GPUS; a++)
                for (unsigned b = a + 1; b < m; b++) {
                        unsigned k = score__idx(c, idx[a], idx[b]);
                        levels[n_levels++] = c->cap[k];
                        levels[n_levels++] = c->link_rate[k];
                }
        for (unsigned a = 0; a < m && n_levels + 2 < ELEMENTSOF(levels); a++) {
                if (c->port_pcie[idx[a]] > 0)
                        levels[n_levels++] = c->port_pcie[idx[a]];
                if (c->port_fabric[idx[a]] > 0)
                        levels[n_levels++] = c->port_fabric[idx[a]];
        }
        levels[n_levels++] = c->cpu_gbps;
        if (m > SCORE_PACK_MAX_GPUS)
                for (unsigned a = 0; a < m && n_levels < ELEMENTSOF(levels); a++)
                        for (unsigned b = a + 1; b < m && n_levels < ELEMENTSOF(levels); b++)
                                levels[n_levels++] = c->cap[score__idx(c, idx[a], idx[b])];
        qsort(levels, n_levels, sizeof(levels[0]), cmp_float_desc);

        unsigned tried = 0;
        for (unsigned l = 0; l < n_levels && tried < SCORE_MAX_LEVELS; l++) {
                float v = levels[l];
                unsigned count = 0, most;
                uint8_t first[TOPO_MAX_GPUS];

                if (v <= 0 || (l > 0 && v == levels[l - 1]) || v > ub + SCORE_EPS)
                        continue;
                most = MIN(SCORE_MAX_RINGS, (unsigned)floor(ub / v + SCORE_EPS));
                if (r.rcap == NULL)
                        most = MIN(most, 2); /* a ring and its reverse */
                if ((double)v * most <= best + SCORE_EPS)
                        continue;
                tried++;
                r.v = v;
                ring_reset(&r);
                while (count < most && ring_find(&r)) {
                        if (count == 0)
                                memcpy(first, r.order, m);
                        count++;
                }
                if ((double)v * count > best + SCORE_EPS) {
                        best = (double)v * count;
                        if (ret_order)
                                for (unsigned a = 0; a < m; a++)
                                        ret_order[a] = (uint8_t)idx[first[a]];
                }
                if (best >= ub - SCORE_EPS)
                        break;
        }
        return (float)best; /* the precision the per-set cache keeps */
}

double
score__cached_busbw(struct score_class *c, const struct topo_mask *set)
{
        uint32_t bits;
        float f;

        if (!c->set_busbw)
                return score__set_busbw(c, set, NULL);
        uint64_t key = set->w[0];
        bits = __atomic_load_n(&c->set_busbw[key], __ATOMIC_RELAXED);
        if (bits != UINT32_MAX) {
                memcpy(&f, &bits, sizeof(f));
                return f;
        }
        f = (float)score__set_busbw(c, set, NULL);
        memcpy(&bits, &f, sizeof(bits));
        __atomic_store_n(&c->set_busbw[key], bits, __ATOMIC_RELAXED);
        return f;
}
