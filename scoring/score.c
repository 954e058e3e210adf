/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scoring's public API: the per-topology-class state (pair model from score-model.c, twin
 * classes for the search in score-search.c, lazily filled caches, the memo), the request
 * checks and error reasons, and the node priority.  A class is immutable after
 * score_class_new() except for its caches, which are filled with atomic stores (the same
 * value whoever computes it) and the memo, which is under the class lock.  The class owns a
 * reference on its topology; callers own their score_choice structs.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../common/str.h"
#include "score-private.h"

#define SCORE_PRIO_MAX 10

void
score_config_default(struct score_config *cfg)
{
        *cfg = (struct score_config){
                .n_sizes = 4,
                .size_of = { 1, 2, 4, 8 },
                .weight_of = { 0.55, 0.2, 0.15, 0.1 },
        };
}

static bool
pair_same(const struct score_class *c, unsigned i, unsigned k, unsigned j, unsigned l)
{
        unsigned a = score__idx(c, i, k), b = score__idx(c, j, l);
        const struct topo_pair *p = topo_pair(c->topo, i, k), *q = topo_pair(c->topo, j, l);

        return c->cap[a] == c->cap[b] && c->link_rate[a] == c->link_rate[b] &&
               c->edge[a] == c->edge[b] && c->nvl[a] == c->nvl[b] && c->p2p[a] == c->p2p[b] &&
               p->link == q->link;
}

/* i and j are twins: swapping them maps the scoring model onto itself. */
static bool
twins(const struct score_class *c, unsigned i, unsigned j)
{
        if (c->numa_idx[i] != c->numa_idx[j] || c->has_nic[i] != c->has_nic[j] ||
            c->port_fabric[i] != c->port_fabric[j] || c->port_pcie[i] != c->port_pcie[j])
                return false;
        for (unsigned k = 0; k < c->n; k++) {
                if (k == i || k == j)
                        continue;
                if (!pair_same(c, i, k, j, k) || !pair_same(c, k, i, k, j))
                        return false;
        }
        return true;
}

/* The NUMA node, or where the matrix has none, the CPU affinity list standing in for it
 * (nvidia-smi prints one list per socket); neither known: one shared "unknown". */
static bool
same_numa(const struct topo_gpu *a, const struct topo_gpu *b)
{
        if (a->numa >= 0 || b->numa >= 0)
                return a->numa == b->numa;
        return strcmp(a->cpu_affinity, b->cpu_affinity) == 0;
}

static int
build_classes(struct score_class *c)
{
        const struct topo *t = c->topo;
        unsigned numa_rep[TOPO_MAX_GPUS]; /* a GPU of each dense NUMA index */
        unsigned n_numa = 0, per_numa[TOPO_MAX_GPUS] = { 0 };

        for (unsigned i = 0; i < c->n; i++) {
                unsigned x;
                for (x = 0; x < n_numa; x++)
                        if (same_numa(&t->gpus[numa_rep[x]], &t->gpus[i]))
                                break;
                if (x == n_numa)
                        numa_rep[n_numa++] = i;
                c->numa_idx[i] = x;
                per_numa[x]++;
                c->max_per_numa = MAX(c->max_per_numa, per_numa[x]);

                c->has_nic[i] = false;
                for (unsigned nic = 0; nic < t->n_nics; nic++) {
                        enum topo_link l = topo_nic_link(t, nic, i);
                        if (l == TOPO_LINK_PIX || l == TOPO_LINK_PXB || l == TOPO_LINK_NVLINK)
                                c->has_nic[i] = true;
                }
        }

        c->n_twins = 0;
        for (unsigned i = 0; i < c->n; i++) {
                unsigned x;
                for (x = 0; x < c->n_twins; x++) {
                        unsigned rep = 0;
                        while (!topo_mask_test(&c->twin_mask[x], rep))
                                rep++;
                        if (twins(c, rep, i))
                                break;
                }
                if (x == c->n_twins)
                        topo_mask_clear(&c->twin_mask[c->n_twins++]);
                topo_mask_set(&c->twin_mask[x], i);
                c->twin[i] = x;
        }
        /* Contiguous: each class spans exactly as many indices as it has members. */
        c->twins_contiguous = true;
        for (unsigned x = 0; x < c->n_twins; x++) {
                unsigned lo = UINT32_MAX, hi = 0;
                for (unsigned i = 0; i < c->n; i++)
                        if (c->twin[i] == x) {
                                lo = MIN(lo, i);
                                hi = MAX(hi, i);
                        }
                if (hi - lo + 1 != topo_mask_count(&c->twin_mask[x]))
                        c->twins_contiguous = false;
        }
        return 0;
}

static void
class_free(struct score_class *c)
{
        if (!c)
                return;
        topo_unref(c->topo);
        free(c->cap);
        free(c->link_rate);
        free(c->edge);
        free(c->nvl);
        free(c->p2p);
        free(c->port_cost);
        free(c->port_fabric);
        free(c->port_pcie);
        free(c->numa_idx);
        free(c->has_nic);
        free(c->twin);
        free(c->twin_mask);
        free(c->set_busbw);
        free(c->ideal);
        free(c->memo);
        free(c->bucket);
        pthread_mutex_destroy(&c->lock);
        free(c);
}

struct score_class *
score_class_new(struct topo *t, const struct score_config *cfg)
{
        struct score_class *c;
        size_t n, nn;

        if (!t || t->n_gpus > TOPO_MAX_GPUS)
                return NULL;
        if (cfg && cfg->n_sizes > SCORE_MAX_SIZES)
                return NULL;
        for (unsigned j = 0; cfg && j < cfg->n_sizes; j++)
                if (cfg->size_of[j] == 0 || !(cfg->weight_of[j] >= 0) || !isfinite(cfg->weight_of[j]))
                        return NULL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        pthread_mutex_init(&c->lock, NULL);
        c->n_ref = 1;
        c->topo = topo_ref(t);
        if (cfg)
                c->cfg = *cfg;
        else
                score_config_default(&c->cfg);
        n = c->n = t->n_gpus;
        nn = MAX(n * n, (size_t)1);
        c->cap = calloc(nn, sizeof(*c->cap));
        c->link_rate = calloc(nn, sizeof(*c->link_rate));
        c->edge = calloc(nn, 1);
        c->nvl = calloc(nn, 1);
        c->p2p = calloc(nn, 1);
        c->port_cost = calloc(nn, sizeof(*c->port_cost));
        c->port_fabric = calloc(n + 1, sizeof(float));
        c->port_pcie = calloc(n + 1, sizeof(float));
        c->numa_idx = calloc(n + 1, sizeof(unsigned));
        c->has_nic = calloc(n + 1, sizeof(bool));
        c->twin = calloc(n + 1, sizeof(unsigned));
        c->twin_mask = calloc(n + 1, sizeof(struct topo_mask));
        c->ideal = malloc((n + 1) * sizeof(uint64_t));
        if (n <= SCORE_SET_CACHE_MAX_GPUS)
                c->set_busbw = malloc(((size_t)1 << n) * sizeof(uint32_t));
        if (!c->cap || !c->link_rate || !c->edge || !c->nvl || !c->p2p || !c->port_cost || !c->port_fabric ||
            !c->port_pcie || !c->numa_idx || !c->has_nic || !c->twin || !c->twin_mask || !c->ideal ||
            (n <= SCORE_SET_CACHE_MAX_GPUS && !c->set_busbw) || score__memo_init(c) < 0) {
                class_free(c);
                return NULL;
        }
        memset(c->ideal, 0xff, (n + 1) * sizeof(uint64_t));
        if (c->set_busbw)
                memset(c->set_busbw, 0xff, ((size_t)1 << n) * sizeof(uint32_t));
        score__fill_pairs(c);
        build_classes(c);
        /* The best any set of each size gets on an empty node: every decision's bound and
         * the fragmentation yardstick, so it is paid here, once per class. */
        for (unsigned k = 2; k <= n; k++)
                score__ideal(c, k);
        return c;
}

struct score_class *
score_class_ref(struct score_class *c)
{
        if (c)
                __atomic_add_fetch(&c->n_ref, 1, __ATOMIC_RELAXED);
        return c;
}

struct score_class *
score_class_unref(struct score_class *c)
{
        if (c && __atomic_sub_fetch(&c->n_ref, 1, __ATOMIC_ACQ_REL) == 0)
                class_free(c);
        return NULL;
}

const struct topo *
score_class_topo(const struct score_class *c)
{
        return c->topo;
}

double
score_pair_gbps(const struct score_class *c, unsigned i, unsigned j)
{
        if (i >= c->n || j >= c->n || i == j)
                return 0;
        return c->cap[score__idx(c, i, j)];
}

static bool
mask_in_range(const struct score_class *c, const struct topo_mask *m)
{
        for (unsigned i = c->n; i < TOPO_MAX_GPUS; i++)
                if (topo_mask_test(m, i))
                        return false;
        return true;
}

int
score_evaluate(const struct score_class *c, const struct topo_mask *set,
               const struct topo_mask *free, struct score_choice *ret)
{
        /* The caches and memo are logically const: they only remember what is computed. */
        struct score_class *mc = (struct score_class *)c;

        if (!c || !set || !ret || topo_mask_count(set) == 0 || !mask_in_range(c, set))
                return -EINVAL;
        score__fill_choice(mc, set, free, ret);
        return 0;
}

/* Reasons, by constraint bit, for "not now" and "never on this node". */
static const struct {
        unsigned bit;
        const char *name;
        const char *again;
        const char *never;
} require_table[] = {
        { SCORE_REQUIRE_NVLINK, "nvlink",
          "require nvlink: no free GPU set of this size has an all-NVLink/XGMI ring",
          "require nvlink: no GPU set of this size on this node has an all-NVLink/XGMI ring" },
        { SCORE_REQUIRE_NUMA, "numa",
          "require numa: not enough free GPUs on one NUMA node",
          "require numa: no NUMA node of this node has that many GPUs" },
        { SCORE_REQUIRE_PCIE_SWITCH, "pcie-switch",
          "require pcie-switch: not enough free GPUs under one PCIe switch",
          "require pcie-switch: no PCIe switch of this node has that many GPUs" },
        { SCORE_REQUIRE_NIC, "nic",
          "require nic: not enough free GPUs with a GPUDirect-capable NIC (PIX/PXB)",
          "require nic: this node has too few GPUs with a GPUDirect-capable NIC (PIX/PXB)" },
};

/* Why nothing met req on free: the first constraint that fails on its own. */
static const char *
why_not(struct score_class *c, const struct topo_mask *free, const struct score_request *req,
        bool never)
{
        struct score_choice one;

        for (size_t i = 0; i < ELEMENTSOF(require_table); i++) {
                if (!(req->require & require_table[i].bit))
                        continue;
                if (score__search(c, free, req->count, require_table[i].bit, SCORE_MODE_BUSBW, &one,
                                  1, NULL) == 0)
                        return never ? require_table[i].never : require_table[i].again;
        }
        return never ? "the combined constraints cannot be met together by any GPU set of this node"
                     : "the combined constraints cannot be met together by any free GPU set";
}

static int
check_request(const struct score_class *c, const struct topo_mask *free,
              const struct score_request *req, struct topo_mask *ret_free, const char **ret_why)
{
        struct topo_mask f;
        unsigned known = 0;

        if (!c || !free || !req || req->count == 0)
                return set_why(ret_why, "bad request: count must be at least 1"), -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(require_table); i++)
                known |= require_table[i].bit;
        if (req->require & ~known)
                return set_why(ret_why, "bad request: unknown constraint bits"), -EINVAL;
        if (req->count > c->n)
                return set_why(ret_why, "the node has fewer GPUs than requested"), -ENOEXEC;
        /* Unhealthy GPUs and bits past the node's GPUs are never candidates. */
        topo_mask_clear(&f);
        for (unsigned i = 0; i < c->n; i++)
                if (topo_mask_test(free, i) && c->topo->gpus[i].healthy)
                        topo_mask_set(&f, i);
        if (topo_mask_count(&f) < req->count)
                return set_why(ret_why, "fewer healthy GPUs are free than requested"), -ENOSPC;
        *ret_free = f;
        return 0;
}

static int
search_or_why(struct score_class *c, const struct topo_mask *f, const struct score_request *req,
              struct score_choice *ret, unsigned k, const char **ret_why)
{
        struct topo_mask all;
        struct score_choice one;
        int r;

        r = score__search(c, f, req->count, req->require, SCORE_MODE_FULL, ret, k, NULL);
        if (r > 0)
                return r;
        topo_mask_fill(&all, c->n);
        if (score__search(c, &all, req->count, req->require, SCORE_MODE_BUSBW, &one, 1, NULL) == 0)
                return set_why(ret_why, why_not(c, &all, req, true)), -ENOEXEC;
        return set_why(ret_why, why_not(c, f, req, false)), -EAGAIN;
}

int
score_best(struct score_class *c, const struct topo_mask *free, const struct score_request *req,
           struct score_choice *ret, const char **ret_why)
{
        struct score_memo_entry e;
        struct score_choice x;
        struct topo_mask f;
        int r;

        r = check_request(c, free, req, &f, ret_why);
        if (r < 0)
                return r;
        if (score__memo_get(c, &f, req->count, req->require, SCORE_MODE_FULL, &e)) {
                if (e.r < 0)
                        return set_why(ret_why, e.why), e.r;
                x = (struct score_choice){
                        .set = e.set, .busbw_gbps = e.busbw, .ideal_gbps = score__ideal(c, req->count),
                        .numa_spanned = e.numa, .nic_gpus = e.nic, .frag_left = e.frag,
                        .p2p = e.p2p, .all_nvlink_ring = e.all_nvlink,
                };
                x.n = topo_mask_count(&e.set);
                *ret = x;
                return 0;
        }

        const char *why = NULL;
        r = search_or_why(c, &f, req, &x, 1, &why);
        e = (struct score_memo_entry){
                .free = f, .count = req->count, .require = req->require, .mode = SCORE_MODE_FULL,
                .r = r < 0 ? r : 0, .why = why,
        };
        if (r > 0) {
                e.set = x.set;
                e.busbw = x.busbw_gbps;
                e.numa = x.numa_spanned;
                e.nic = x.nic_gpus;
                e.frag = x.frag_left;
                e.p2p = x.p2p;
                e.all_nvlink = x.all_nvlink_ring;
        }
        score__memo_put(c, &e);
        if (r < 0)
                return set_why(ret_why, why), r;
        *ret = x;
        return 0;
}

int
score_top(struct score_class *c, const struct topo_mask *free, const struct score_request *req,
          struct score_choice *ret, unsigned k, const char **ret_why)
{
        struct topo_mask f;
        int r;

        if (k == 0)
                return 0;
        r = check_request(c, free, req, &f, ret_why);
        if (r < 0)
                return r;
        return search_or_why(c, &f, req, ret, k, ret_why);
}

/* --- node priority: a table of terms (docs/scoring.md, "Node priority") -------------------
 * Each term is a value in [0, 1] for the chosen set on this node; the priority is
 * SCORE_PRIO_MAX times their weighted sum (weights sum to 1, which test-score checks).
 * Adding a term: its function and its row here, its line in docs/scoring.md section 6,
 * a test (docs/scoring.md, "How to add a scoring term"). */

struct prio_ctx {
        const struct score_class *c;
        const struct score_choice *choice;
        unsigned n_left; /* healthy free GPUs left once the pod lands */
};

/* Modeled bandwidth relative to the best set of this size on an empty node. */
static double
term_bandwidth(const struct prio_ctx *x)
{
        const struct score_choice *ch = x->choice;

        return ch->ideal_gbps > 0 ? MIN(1.0, ch->busbw_gbps / ch->ideal_gbps) : 1.0;
}

/* Share of the node in use once the pod lands: tight fits first, whole nodes last. */
static double
term_packing(const struct prio_ctx *x)
{
        return (double)(x->c->n - x->n_left) / x->c->n;
}

/* How well what is left serves the size mix, against the best any leftover of that many
 * GPUs could do; nothing left is nothing fragmented. */
static double
term_fragmentation(const struct prio_ctx *x)
{
        double wsum = 0;

        for (unsigned j = 0; j < x->c->cfg.n_sizes; j++)
                if (x->c->cfg.size_of[j] >= 1 && x->c->cfg.size_of[j] <= x->n_left)
                        wsum += x->c->cfg.weight_of[j];
        return wsum > 0 ? MIN(1.0, x->choice->frag_left / wsum) : 1.0;
}

static const struct prio_term {
        const char *name;
        double weight;
        double (*value)(const struct prio_ctx *x);
} prio_terms[] = {
        { "bandwidth", 0.5, term_bandwidth },
        { "packing", 0.3, term_packing },
        { "fragmentation", 0.2, term_fragmentation },
};

double
score__prio_weight_sum(void)
{
        double sum = 0;

        for (size_t i = 0; i < ELEMENTSOF(prio_terms); i++)
                sum += prio_terms[i].weight;
        return sum;
}

int
score_node_priority(const struct score_class *c, const struct topo_mask *free,
                    const struct score_choice *choice)
{
        struct prio_ctx x = { .c = c, .choice = choice };
        unsigned n_free = 0;
        double p = 0;

        if (!c || !free || !choice || c->n == 0)
                return 0;
        for (unsigned i = 0; i < c->n; i++)
                n_free += topo_mask_test(free, i) && c->topo->gpus[i].healthy;
        x.n_left = n_free > choice->n ? n_free - choice->n : 0;
        for (size_t i = 0; i < ELEMENTSOF(prio_terms); i++)
                p += prio_terms[i].weight * prio_terms[i].value(&x);
        p *= SCORE_PRIO_MAX;
        return (int)MIN((double)SCORE_PRIO_MAX, MAX(0.0, floor(p + 0.5)));
}

int
score_best_ring(const struct score_class *c, const struct topo_mask *set, uint8_t *ret_order,
                double *ret_hop_gbps)
{
        uint8_t order[TOPO_MAX_GPUS];
        unsigned m;

        if (!c || !set || !mask_in_range(c, set) || (m = topo_mask_count(set)) == 0)
                return -EINVAL;
        score__set_busbw(c, set, order);
        for (unsigned a = 0; a < m; a++) {
                if (ret_order)
                        ret_order[a] = order[a];
                if (ret_hop_gbps)
                        ret_hop_gbps[a] = m > 1 ? score_pair_gbps(c, order[a], order[(a + 1) % m]) : 0;
        }
        return (int)m;
}

void
score_class_memo_stats(const struct score_class *c, struct score_memo_stats *ret)
{
        struct score_class *mc = (struct score_class *)c;

        pthread_mutex_lock(&mc->lock);
        *ret = (struct score_memo_stats){
                .hits = c->hits, .misses = c->misses, .entries = c->memo_entries,
        };
        pthread_mutex_unlock(&mc->lock);
}

int
score_require_parse(const char *s, unsigned *ret)
{
        unsigned bits = 0;

        if (!s || !ret)
                return -EINVAL;
        while (*s) {
                const char *end = strchrnul(s, ',');
                size_t len = (size_t)(end - s), i;

                for (i = 0; i < ELEMENTSOF(require_table); i++)
                        if (str_eq_n(s, len, require_table[i].name))
                                break;
                if (i == ELEMENTSOF(require_table))
                        return -EINVAL;
                bits |= require_table[i].bit;
                s = *end ? end + 1 : end;
                if (*end && !*s)
                        return -EINVAL; /* trailing comma */
        }
        *ret = bits;
        return 0;
}

const char *
score_require_to_string(unsigned require, char *buf, size_t size)
{
        size_t len = 0;

        if (!buf || size == 0)
                return NULL;
        buf[0] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(require_table); i++) {
                if (!(require & require_table[i].bit))
                        continue;
                int w = snprintf(buf + len, size - len, "%s%s", len ? "," : "", require_table[i].name);
                if (w < 0 || (size_t)w >= size - len)
                        return NULL;
                len += (size_t)w;
        }
        return buf;
}
