/* SPDX-License-Identifier: Apache-2.0 */
/*
 * placement's capacity measure, cluster view and cluster term (place.h).  A view is
 * immutable once place_view_new() returns: per node its class, free GPUs and capacity
 * vector, cluster totals and learnt weights, and per level the domains sorted by name.
 * It keeps no reference on the score classes it was given: its owner (the extender's
 * cluster snapshot) holds them for as long as the view lives.  All counts are bounded by
 * TOPO_MAX_GPUS per node, so the per-class loops are short.
 */
#include "place.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/str.h"

/* Capacities by (class, free GPUs): a node's capacity never changes for one class mix, so
 * one table serves every view of a cluster and every request.  Open addressing, bounded:
 * when it is three quarters full it starts over.  Entries hold a reference on their class,
 * so a freed class's address cannot be mistaken for a new one. */
#define PLACE_MEMO_SLOTS 16384
#define PLACE_MEMO_PROBES 8

struct memo_entry {
        struct score_class *cls; /* NULL: empty */
        struct topo_mask free;
        uint16_t cap[PLACE_MAX_CLASSES];
};

struct place_memo {
        unsigned n_ref;
        pthread_mutex_t lock;
        struct place_class classes[PLACE_MAX_CLASSES]; /* the mix its entries are for */
        unsigned n_classes;
        size_t used;
        uint64_t hits, misses;
        struct memo_entry e[PLACE_MEMO_SLOTS];
};

#define PLACE_DOMAIN_SLOTS (PLACE_MAX_LEVELS + PLACE_MAX_KEYS) /* levels with named domains */

struct view_node {
        const char *name; /* borrowed, may be NULL */
        struct score_class *cls;
        struct topo_mask free;
        uint16_t cap[PLACE_MAX_CLASSES];
        uint16_t cap_all[PLACE_MAX_CLASSES]; /* drained: every healthy GPU free (only with
                                              * drain_weight > 0) */
        int32_t domain[PLACE_DOMAIN_SLOTS]; /* per slot (level_slot()), -1: none */
};

struct place_view {
        unsigned n_ref;
        struct place_config cfg;
        size_t n_nodes;
        struct view_node *nodes;
        uint64_t total[PLACE_MAX_CLASSES];
        double weight[PLACE_MAX_CLASSES];
        size_t computed;
        struct place_memo *memo;
        size_t n_domains[PLACE_DOMAIN_SLOTS];
        struct place_domain *domains[PLACE_DOMAIN_SLOTS];
        /* Slot l's domain d has the nodes members[l][first[l][d] .. first[l][d + 1]), in
         * node order (NULL when the slot has no domains), so a domain's sum visits its own
         * nodes, not every node of the view. */
        uint32_t *members[PLACE_DOMAIN_SLOTS];
        uint32_t *first[PLACE_DOMAIN_SLOTS];
        /* Node names by hash: 1 + the node's index, 0 for a free slot; name_cap slots, a
         * power of two at least twice the nodes (NULL: none named, or no memory: then
         * lookups go node by node).  A lookup by node name was a walk over every node, on
         * every candidate node of every request while a gang held a single node. */
        uint32_t *name_slots;
        size_t name_cap;
};

/* The slot of a level with named domains: 0..PLACE_MAX_LEVELS-1 as they are, the key levels
 * after them; -1 for PLACE_LEVEL_NODE and ids out of range. */
static int
level_slot(unsigned level)
{
        if (level < PLACE_MAX_LEVELS)
                return (int)level;
        if (level > PLACE_LEVEL_NODE && level < PLACE_N_LEVELS)
                return (int)level - 1;
        return -1;
}

static unsigned
slot_level(unsigned slot)
{
        return slot < PLACE_MAX_LEVELS ? slot : slot + 1;
}

static const char *
node_slot_name(const struct place_node *n, unsigned slot)
{
        return slot < PLACE_MAX_LEVELS ? n->domain[slot] : n->key_domain[slot - PLACE_MAX_LEVELS];
}

void
place_config_default(struct place_config *cfg)
{
        *cfg = (struct place_config){
                .n_classes = 5,
                .classes = {
                        { .size = 8, .require = SCORE_REQUIRE_NVLINK, .weight = 0.1 },
                        { .size = 4, .require = SCORE_REQUIRE_NVLINK, .weight = 0.075 },
                        { .size = 4, .require = SCORE_REQUIRE_NUMA, .weight = 0.075 },
                        { .size = 2, .require = 0, .weight = 0.2 },
                        { .size = 1, .require = 0, .weight = 0.55 },
                },
                .prior_pods = PLACE_PRIOR_PODS,
                .cluster_share = PLACE_CLUSTER_SHARE,
                .quality_band = PLACE_QUALITY_BAND,
                .drain_weight = PLACE_DRAIN_WEIGHT,
        };
}

int
place_config_check(const struct place_config *cfg, const char **ret_why)
{
        double sum = 0;

        if (!cfg || cfg->n_classes == 0 || cfg->n_classes > PLACE_MAX_CLASSES)
                return set_why(ret_why, "the class mix needs 1 to 8 classes"), -EINVAL;
        for (unsigned k = 0; k < cfg->n_classes; k++) {
                const struct place_class *c = &cfg->classes[k];

                if (c->size == 0 || c->size > TOPO_MAX_GPUS)
                        return set_why(ret_why, "a class size is 0 or over 128 GPUs"), -EINVAL;
                if (!isfinite(c->weight) || c->weight < 0)
                        return set_why(ret_why, "a class weight is negative or not finite"),
                               -EINVAL;
                sum += c->weight;
        }
        if (!(sum > 0))
                return set_why(ret_why, "every class weight is 0"), -EINVAL;
        if (!isfinite(cfg->prior_pods) || cfg->prior_pods < 0)
                return set_why(ret_why, "the prior pod count is negative or not finite"), -EINVAL;
        if (!(cfg->cluster_share >= 0 && cfg->cluster_share <= 1))
                return set_why(ret_why, "the cluster share is not within 0..1"), -EINVAL;
        if (!(cfg->quality_band >= 0 && cfg->quality_band <= 1))
                return set_why(ret_why, "the quality band is not within 0..1"), -EINVAL;
        if (!(cfg->drain_weight >= 0 && cfg->drain_weight <= 1))
                return set_why(ret_why, "the drain weight is not within 0..1"), -EINVAL;
        return 0;
}

/* --- capacity ------------------------------------------------------------------------- */

static void
mask_in_node(struct topo_mask *m, const struct topo *t)
{
        for (size_t k = 0; k < ELEMENTSOF(m->w); k++)
                if (t->n_gpus <= 64 * k)
                        m->w[k] = 0;
                else if (t->n_gpus < 64 * (k + 1))
                        m->w[k] &= (UINT64_C(1) << (t->n_gpus - 64 * k)) - 1;
        for (unsigned g = 0; g < t->n_gpus; g++)
                if (!t->gpus[g].healthy)
                        topo_mask_unset(m, g);
}

/* The best bus bandwidth class k reaches on an empty node of cls's type; < 0 when no set
 * of the node meets it.  score_best memoizes the answer per class. */
static double
class_ideal(struct score_class *cls, const struct place_class *k)
{
        const struct topo *t = score_class_topo(cls);
        struct score_request req = { .count = k->size, .require = k->require };
        struct score_choice ch;
        struct topo_mask all;

        topo_mask_fill(&all, t->n_gpus);
        mask_in_node(&all, t);
        if (score_best(cls, &all, &req, &ch, NULL) < 0)
                return -1;
        return ch.busbw_gbps;
}

static unsigned
class_capacity(struct score_class *cls, const struct topo_mask *free, const struct place_class *k)
{
        const struct topo *t = score_class_topo(cls);
        struct score_request req = { .count = k->size, .require = k->require };
        struct topo_mask f = *free;
        unsigned n = 0;
        double ideal;

        mask_in_node(&f, t);
        if (topo_mask_count(&f) < k->size)
                return 0;
        /* One GPU without a constraint: every free GPU is one. */
        if (k->size == 1 && k->require == 0)
                return topo_mask_count(&f);
        ideal = class_ideal(cls, k);
        if (ideal < 0)
                return 0;
        while (topo_mask_count(&f) >= k->size) {
                struct score_choice ch;

                if (score_best(cls, &f, &req, &ch, NULL) < 0)
                        break;
                if (k->size > 1 && ch.busbw_gbps < ideal * (1 - PLACE_QUALITY_EPS))
                        break;
                n++;
                topo_mask_andnot(&f, &ch.set);
        }
        return n;
}

int
place_capacity(const struct place_config *cfg, struct score_class *cls,
               const struct topo_mask *free, uint16_t ret[PLACE_MAX_CLASSES])
{
        if (!cfg || !cls || !free || cfg->n_classes > PLACE_MAX_CLASSES)
                return -EINVAL;
        for (unsigned k = 0; k < cfg->n_classes; k++)
                ret[k] = (uint16_t)class_capacity(cls, free, &cfg->classes[k]);
        return 0;
}

unsigned
place_count_sets(struct score_class *cls, const struct topo_mask *free, unsigned count,
                 unsigned require)
{
        struct score_request req = { .count = count, .require = require };
        struct topo_mask f;
        unsigned n = 0;

        if (!cls || !free || count == 0)
                return 0;
        f = *free;
        mask_in_node(&f, score_class_topo(cls));
        if (require == 0)
                return topo_mask_count(&f) / count;
        while (topo_mask_count(&f) >= count) {
                struct score_choice ch;

                if (score_best(cls, &f, &req, &ch, NULL) < 0)
                        break;
                n++;
                topo_mask_andnot(&f, &ch.set);
        }
        return n;
}

static struct place_memo *
memo_new(const struct place_config *cfg)
{
        struct place_memo *m = calloc(1, sizeof(*m));

        if (!m)
                return NULL;
        m->n_ref = 1;
        pthread_mutex_init(&m->lock, NULL);
        m->n_classes = cfg->n_classes;
        memcpy(m->classes, cfg->classes, sizeof(m->classes));
        return m;
}

static void
memo_clear_locked(struct place_memo *m)
{
        for (size_t k = 0; k < PLACE_MEMO_SLOTS; k++)
                if (m->e[k].cls) {
                        score_class_unref(m->e[k].cls);
                        m->e[k].cls = NULL;
                }
        m->used = 0;
}

static struct place_memo *
memo_unref(struct place_memo *m)
{
        if (!m || __atomic_sub_fetch(&m->n_ref, 1, __ATOMIC_ACQ_REL) > 0)
                return NULL;
        memo_clear_locked(m);
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
}

static bool
memo_fits(const struct place_memo *m, const struct place_config *cfg)
{
        return m && m->n_classes == cfg->n_classes &&
               memcmp(m->classes, cfg->classes, sizeof(m->classes)) == 0;
}

static size_t
memo_slot(const struct score_class *cls, const struct topo_mask *free)
{
        uint64_t h = (uint64_t)(uintptr_t)cls * 0x9e3779b97f4a7c15ull;

        for (size_t k = 0; k < ELEMENTSOF(free->w); k++)
                h = (h ^ free->w[k]) * 0x100000001b3ull;
        return (size_t)(h ^ (h >> 31)) & (PLACE_MEMO_SLOTS - 1);
}

/* place_capacity() through the memo (m may be NULL); free already within the node. */
static void
capacity_memo(struct place_memo *m, const struct place_config *cfg, struct score_class *cls,
              const struct topo_mask *free, uint16_t ret[PLACE_MAX_CLASSES])
{
        size_t k0 = memo_slot(cls, free);

        if (m) {
                pthread_mutex_lock(&m->lock);
                for (size_t p = 0, k = k0; p < PLACE_MEMO_PROBES; p++, k = (k + 1) & (PLACE_MEMO_SLOTS - 1)) {
                        const struct memo_entry *e = &m->e[k];

                        if (!e->cls)
                                break;
                        if (e->cls == cls && topo_mask_equal(&e->free, free)) {
                                memcpy(ret, e->cap, sizeof(e->cap));
                                m->hits++;
                                pthread_mutex_unlock(&m->lock);
                                return;
                        }
                }
                m->misses++;
                pthread_mutex_unlock(&m->lock);
        }
        /* Computed outside the lock: two threads may both compute it, to the same value. */
        (void)place_capacity(cfg, cls, free, ret);
        if (!m)
                return;
        pthread_mutex_lock(&m->lock);
        if (m->used >= PLACE_MEMO_SLOTS / 4 * 3)
                memo_clear_locked(m);
        for (size_t p = 0, k = k0; p < PLACE_MEMO_PROBES; p++, k = (k + 1) & (PLACE_MEMO_SLOTS - 1)) {
                struct memo_entry *e = &m->e[k];

                if (e->cls && !(e->cls == cls && topo_mask_equal(&e->free, free)))
                        continue;
                if (!e->cls) {
                        e->cls = score_class_ref(cls);
                        m->used++;
                }
                e->free = *free;
                memcpy(e->cap, ret, sizeof(e->cap));
                break;
        }
        pthread_mutex_unlock(&m->lock);
}

void
place_view_memo_stats(const struct place_view *v, uint64_t *ret_hits, uint64_t *ret_misses)
{
        uint64_t h = 0, mi = 0;

        if (v && v->memo) {
                pthread_mutex_lock(&v->memo->lock);
                h = v->memo->hits;
                mi = v->memo->misses;
                pthread_mutex_unlock(&v->memo->lock);
        }
        if (ret_hits)
                *ret_hits = h;
        if (ret_misses)
                *ret_misses = mi;
}

/* --- the view ------------------------------------------------------------------------- */

struct place_view *
place_view_ref(struct place_view *v)
{
        if (v)
                __atomic_add_fetch(&v->n_ref, 1, __ATOMIC_RELAXED);
        return v;
}

struct place_view *
place_view_unref(struct place_view *v)
{
        if (!v || __atomic_sub_fetch(&v->n_ref, 1, __ATOMIC_ACQ_REL) > 0)
                return NULL;
        for (unsigned l = 0; l < PLACE_DOMAIN_SLOTS; l++) {
                free(v->domains[l]);
                free(v->members[l]);
                free(v->first[l]);
        }
        free(v->name_slots);
        memo_unref(v->memo);
        free(v->nodes);
        free(v);
        return NULL;
}

/* Weights: the configured ones counted as prior_pods pods, plus the live pods' sizes, each
 * pod counted for the classes of the smallest class size that holds it (split evenly
 * among them), pods larger than every class for the largest; normalized to sum 1. */
static void
learn_weights(struct place_view *v, const unsigned *hist, size_t hist_len)
{
        const struct place_config *cfg = &v->cfg;
        double seen[PLACE_MAX_CLASSES] = { 0 }, pods = 0, wsum = 0, sum = 0;

        for (unsigned k = 0; k < cfg->n_classes; k++)
                wsum += cfg->classes[k].weight;
        for (size_t s = 1; hist && s < hist_len && cfg->prior_pods > 0; s++) {
                unsigned best = UINT32_MAX, n_at = 0;

                if (hist[s] == 0)
                        continue;
                for (unsigned k = 0; k < cfg->n_classes; k++)
                        if (cfg->classes[k].size >= s && cfg->classes[k].size < best)
                                best = cfg->classes[k].size;
                if (best == UINT32_MAX)
                        for (unsigned k = 0; k < cfg->n_classes; k++)
                                best = best == UINT32_MAX ? cfg->classes[k].size
                                                          : MAX(best, cfg->classes[k].size);
                for (unsigned k = 0; k < cfg->n_classes; k++)
                        n_at += cfg->classes[k].size == best;
                for (unsigned k = 0; k < cfg->n_classes; k++)
                        if (cfg->classes[k].size == best)
                                seen[k] += (double)hist[s] / n_at;
                pods += hist[s];
        }
        for (unsigned k = 0; k < cfg->n_classes; k++) {
                double prior = cfg->classes[k].weight / wsum;

                v->weight[k] = cfg->prior_pods > 0
                                       ? (cfg->prior_pods * prior + seen[k]) / (cfg->prior_pods + pods)
                                       : prior;
                sum += v->weight[k];
        }
        for (unsigned k = 0; k < cfg->n_classes; k++)
                v->weight[k] /= sum;
}

static int
domain_cmp(const void *a, const void *b)
{
        return strcmp(((const struct place_domain *)a)->name, ((const struct place_domain *)b)->name);
}

static ssize_t
find_domain(const struct place_domain *d, size_t n, const char *name)
{
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(d[mid].name, name);

                if (c == 0)
                        return (ssize_t)mid;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return -1;
}

/* Slot l's domains (level_slot()): distinct names sorted, then each node's index and the sums. */
static int
build_domains(struct place_view *v, const struct place_node *nodes, unsigned l)
{
        struct place_domain *d;
        size_t n = 0;

        for (size_t i = 0; i < v->n_nodes; i++)
                n += node_slot_name(&nodes[i], l) && node_slot_name(&nodes[i], l)[0];
        if (n == 0) {
                for (size_t i = 0; i < v->n_nodes; i++)
                        v->nodes[i].domain[l] = -1;
                return 0; /* no domains at this level: nothing to allocate */
        }
        d = calloc(n, sizeof(*d));
        n = 0;
        if (!d)
                return -ENOMEM;
        for (size_t i = 0; i < v->n_nodes; i++) {
                const char *name = node_slot_name(&nodes[i], l);

                if (!name || !name[0])
                        continue;
                str_copy(d[n].name, sizeof(d[n].name), name, strnlen(name, PLACE_NAME_MAX - 1));
                d[n].level = slot_level(l);
                n++;
        }
        if (n > 0)
                qsort(d, n, sizeof(*d), domain_cmp);
        /* Drop repeats (sorted, so they are adjacent). */
        size_t u = 0;
        for (size_t i = 0; i < n; i++)
                if (u == 0 || strcmp(d[u - 1].name, d[i].name) != 0)
                        d[u++] = d[i];
        if (u > PLACE_MAX_DOMAINS) {
                free(d);
                return -E2BIG;
        }
        for (size_t i = 0; i < v->n_nodes; i++) {
                struct view_node *vn = &v->nodes[i];
                char name[PLACE_NAME_MAX];
                ssize_t x;

                const char *from = node_slot_name(&nodes[i], l);

                vn->domain[l] = -1;
                if (!from || !from[0])
                        continue;
                str_copy(name, sizeof(name), from, strnlen(from, PLACE_NAME_MAX - 1));
                x = find_domain(d, u, name);
                if (x < 0)
                        continue; /* not reached: every name was added above */
                vn->domain[l] = (int32_t)x;
                d[x].n_nodes++;
                d[x].free_gpus += vn->cls ? topo_mask_count(&vn->free) : 0;
                d[x].n_gpus += vn->cls ? score_class_topo(vn->cls)->n_gpus : 0;
                for (unsigned k = 0; k < v->cfg.n_classes; k++)
                        d[x].capacity[k] += vn->cap[k];
        }
        v->domains[l] = d;
        v->n_domains[l] = u;
        /* The members of each domain, by counting then placing. */
        v->first[l] = calloc(u + 1, sizeof(*v->first[l]));
        v->members[l] = malloc(MAX(v->n_nodes, (size_t)1) * sizeof(*v->members[l]));
        if (!v->first[l] || !v->members[l])
                return -ENOMEM; /* freed with the view */
        for (size_t x = 0; x < u; x++)
                v->first[l][x + 1] = v->first[l][x] + d[x].n_nodes;
        {
                CLEANUP(freep) uint32_t *at = malloc(MAX(u, (size_t)1) * sizeof(*at));

                if (!at)
                        return -ENOMEM;
                memcpy(at, v->first[l], u * sizeof(*at));
                for (size_t i = 0; i < v->n_nodes; i++)
                        if (v->nodes[i].domain[l] >= 0)
                                v->members[l][at[v->nodes[i].domain[l]]++] = (uint32_t)i;
        }
        return 0;
}

static uint64_t
name_hash(const char *s)
{
        return str_hash_fnv1a(14695981039346656037ull, s);
}

/* The hash index of the nodes' names; without memory, lookups walk the nodes. */
static void
build_name_index(struct place_view *v)
{
        size_t cap = 16;

        while (cap < 2 * v->n_nodes)
                cap *= 2;
        v->name_slots = calloc(cap, sizeof(*v->name_slots));
        if (!v->name_slots)
                return;
        v->name_cap = cap;
        for (size_t i = 0; i < v->n_nodes; i++) {
                size_t k;

                if (!v->nodes[i].name)
                        continue;
                k = (size_t)name_hash(v->nodes[i].name) & (cap - 1);
                while (v->name_slots[k])
                        k = (k + 1) & (cap - 1);
                v->name_slots[k] = (uint32_t)i + 1;
        }
}

/* The first node named name (node order), -1 when none. */
static ssize_t
find_node(const struct place_view *v, const char *name)
{
        if (!v->name_slots) {
                for (size_t i = 0; i < v->n_nodes; i++)
                        if (v->nodes[i].name && strcmp(v->nodes[i].name, name) == 0)
                                return (ssize_t)i;
                return -1;
        }
        /* Names may repeat in a view built by hand: nodes went in in order and slots are
         * probed in the order they were taken, so the first hit is the first such node, as
         * the walk's. */
        for (size_t k = (size_t)name_hash(name) & (v->name_cap - 1); v->name_slots[k];
             k = (k + 1) & (v->name_cap - 1)) {
                size_t i = v->name_slots[k] - 1;

                if (strcmp(v->nodes[i].name, name) == 0)
                        return (ssize_t)i;
        }
        return -1;
}

int
place_view_new(const struct place_config *cfg, const struct place_node *nodes, size_t n,
               const unsigned *size_hist, size_t hist_len, const struct place_view *base,
               const ssize_t *base_index, struct place_view **ret)
{
        CLEANUP(place_view_unrefp) struct place_view *v = NULL;
        int r;

        if (place_config_check(cfg, NULL) < 0 || (n > 0 && !nodes))
                return -EINVAL;
        v = calloc(1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        v->n_ref = 1;
        v->cfg = *cfg;
        v->n_nodes = n;
        v->nodes = calloc(MAX(n, (size_t)1), sizeof(*v->nodes));
        if (!v->nodes)
                return -ENOMEM;
        /* base's capacities are for base's class mix: only lend them when it is ours. */
        if (base && memcmp(&base->cfg.classes, &cfg->classes, sizeof(cfg->classes)) != 0)
                base = NULL;
        if (base && memo_fits(base->memo, cfg)) {
                v->memo = base->memo;
                __atomic_add_fetch(&v->memo->n_ref, 1, __ATOMIC_RELAXED);
        } else
                v->memo = memo_new(cfg); /* NULL: works without, only slower */
        for (size_t i = 0, last = SIZE_MAX; i < n; i++) {
                struct view_node *vn = &v->nodes[i];
                const struct view_node *old = NULL;

                vn->name = nodes[i].name;
                vn->cls = nodes[i].cls;
                vn->free = nodes[i].free;
                if (!vn->cls)
                        continue;
                mask_in_node(&vn->free, score_class_topo(vn->cls));
                if (base && base_index && base_index[i] >= 0 &&
                    (size_t)base_index[i] < base->n_nodes)
                        old = &base->nodes[base_index[i]];
                if (old && old->cls == vn->cls && topo_mask_equal(&old->free, &vn->free))
                        memcpy(vn->cap, old->cap, sizeof(vn->cap));
                else {
                        capacity_memo(v->memo, &v->cfg, vn->cls, &vn->free, vn->cap);
                        v->computed++;
                }
                for (unsigned k = 0; k < cfg->n_classes; k++)
                        v->total[k] += vn->cap[k];
                /* The drained capacity depends on the class only: from the base's node or
                 * the last node of the class, else through the memo. */
                if (cfg->drain_weight <= 0)
                        continue;
                if (old && old->cls == vn->cls && base->cfg.drain_weight > 0)
                        memcpy(vn->cap_all, old->cap_all, sizeof(vn->cap_all));
                else if (last != SIZE_MAX && v->nodes[last].cls == vn->cls)
                        memcpy(vn->cap_all, v->nodes[last].cap_all, sizeof(vn->cap_all));
                else {
                        struct topo_mask all;

                        topo_mask_fill(&all, score_class_topo(vn->cls)->n_gpus);
                        mask_in_node(&all, score_class_topo(vn->cls));
                        capacity_memo(v->memo, &v->cfg, vn->cls, &all, vn->cap_all);
                }
                last = i;
        }
        learn_weights(v, size_hist, hist_len);
        for (unsigned l = 0; l < PLACE_DOMAIN_SLOTS; l++) {
                r = build_domains(v, nodes, l);
                if (r < 0)
                        return r;
        }
        build_name_index(v);
        *ret = TAKE_PTR(v);
        return 0;
}

const struct place_config *
place_view_config(const struct place_view *v)
{
        return &v->cfg;
}

size_t
place_view_n_nodes(const struct place_view *v)
{
        return v ? v->n_nodes : 0;
}

const uint16_t *
place_view_capacity(const struct place_view *v, size_t i)
{
        return v && i < v->n_nodes ? v->nodes[i].cap : NULL;
}

uint64_t
place_view_total(const struct place_view *v, unsigned k)
{
        return v && k < v->cfg.n_classes ? v->total[k] : 0;
}

double
place_view_weight(const struct place_view *v, unsigned k)
{
        return v && k < v->cfg.n_classes ? v->weight[k] : 0;
}

size_t
place_view_computed(const struct place_view *v)
{
        return v ? v->computed : 0;
}

struct score_class *
place_view_node_class(const struct place_view *v, size_t i)
{
        return v && i < v->n_nodes ? v->nodes[i].cls : NULL;
}

const struct topo_mask *
place_view_node_free(const struct place_view *v, size_t i)
{
        return v && i < v->n_nodes ? &v->nodes[i].free : NULL;
}

size_t
place_view_n_domains(const struct place_view *v, unsigned level)
{
        int l = level_slot(level);

        return v && l >= 0 ? v->n_domains[l] : 0;
}

const struct place_domain *
place_view_domain(const struct place_view *v, unsigned level, size_t d)
{
        int l = level_slot(level);

        return v && l >= 0 && d < v->n_domains[l] ? &v->domains[l][d] : NULL;
}

ssize_t
place_view_node_domain(const struct place_view *v, size_t i, unsigned level)
{
        int l = level_slot(level);

        if (!v || i >= v->n_nodes)
                return -1;
        if (level == PLACE_LEVEL_NODE)
                return v->nodes[i].name ? (ssize_t)i : -1;
        return l >= 0 ? v->nodes[i].domain[l] : -1;
}

ssize_t
place_view_find_domain(const struct place_view *v, unsigned level, const char *name)
{
        int l = level_slot(level);

        if (!v || !name)
                return -1;
        if (level == PLACE_LEVEL_NODE)
                return find_node(v, name);
        if (l < 0)
                return -1;
        return find_domain(v->domains[l], v->n_domains[l], name);
}

size_t
place_view_domain_nodes(const struct place_view *v, unsigned level, size_t d,
                        const uint32_t **ret)
{
        int l = level_slot(level);

        *ret = NULL;
        if (!v || l < 0 || d >= v->n_domains[l] || !v->members[l])
                return 0;
        *ret = v->members[l] + v->first[l][d];
        return v->first[l][d + 1] - v->first[l][d];
}

const char *
place_view_node_name(const struct place_view *v, size_t i)
{
        return v && i < v->n_nodes ? v->nodes[i].name : NULL;
}

/* --- the cluster term ----------------------------------------------------------------- */

double
place_view_domain_free(const struct place_view *v, size_t i)
{
        if (!v || i >= v->n_nodes)
                return 0;
        for (unsigned l = 0; l < PLACE_MAX_LEVELS; l++) {
                int32_t x = v->nodes[i].domain[l];

                if (x >= 0 && v->domains[l] && v->domains[l][x].n_gpus > 0)
                        return (double)v->domains[l][x].free_gpus / v->domains[l][x].n_gpus;
        }
        return 0;
}

bool
place_view_has_domains(const struct place_view *v)
{
        for (unsigned l = 0; v && l < PLACE_MAX_LEVELS; l++)
                if (v->n_domains[l] > 0)
                        return true;
        return false;
}

double
place_loss(const struct place_view *v, size_t i, struct score_class *cls,
           const struct topo_mask *free, const struct topo_mask *set)
{
        uint16_t before[PLACE_MAX_CLASSES], after[PLACE_MAX_CLASSES];
        const struct view_node *vn = NULL;
        struct topo_mask f, left;
        double loss = 0;

        if (!v || !cls || !free || !set)
                return -1;
        if (i != PLACE_NO_NODE) {
                if (i >= v->n_nodes || v->nodes[i].cls != cls)
                        return -1;
                vn = &v->nodes[i];
        }
        f = *free;
        mask_in_node(&f, score_class_topo(cls));
        if (vn && topo_mask_equal(&f, &vn->free))
                memcpy(before, vn->cap, sizeof(before));
        else
                capacity_memo(v->memo, &v->cfg, cls, &f, before);
        left = f;
        topo_mask_andnot(&left, set);
        capacity_memo(v->memo, &v->cfg, cls, &left, after);
        for (unsigned k = 0; k < v->cfg.n_classes; k++) {
                /* The cluster's capacity as this request sees it: at least this node's. */
                double total = (double)MAX(v->total[k], (uint64_t)before[k]);

                if (before[k] > after[k] && total > 0)
                        loss += v->weight[k] * (before[k] - after[k]) / total;
        }
        /* Only in a view without multi-node domains: the same for every node, so a node
         * with a domain label never loses less than one without for its label alone. */
        if (v->cfg.drain_weight > 0 && !place_view_has_domains(v)) {
                /* The node drained: every healthy GPU free (an empty node: as now). */
                struct topo_mask all;

                topo_mask_fill(&all, score_class_topo(cls)->n_gpus);
                mask_in_node(&all, score_class_topo(cls));
                if (!topo_mask_equal(&all, &f)) {
                        if (vn)
                                memcpy(before, vn->cap_all, sizeof(before));
                        else
                                capacity_memo(v->memo, &v->cfg, cls, &all, before);
                        left = all;
                        topo_mask_andnot(&left, set);
                        capacity_memo(v->memo, &v->cfg, cls, &left, after);
                }
                for (unsigned k = 0; k < v->cfg.n_classes; k++)
                        if (before[k] > after[k])
                                loss += v->cfg.drain_weight * v->weight[k] *
                                        (before[k] - after[k]) /
                                        (double)MAX(v->total[k], (uint64_t)1);
        }
        return loss;
}

unsigned
place_tier(const struct score_choice *ch)
{
        if (!ch || ch->n <= 1 || ch->all_nvlink_ring)
                return 2;
        return ch->p2p ? 1 : 0;
}

/* Eligible for the cluster score: fitting, of the best tier, within the quality band of
 * its best bandwidth.  The cost: the loss, and the domain's free share weighted far below
 * any lost set, so it only orders candidates whose losses tie. */
static bool
rank_eligible(const struct place_config *cfg, const struct place_rank_bounds *b,
              const struct place_candidate *c)
{
        return c->fits && c->tier == b->top && c->busbw >= cfg->quality_band * b->top_bw;
}

static double
rank_cost(const struct place_candidate *c)
{
        return c->loss + PLACE_DOMAIN_TIEBREAK * MIN(MAX(c->domain_free, 0.0), 1.0);
}

void
place_rank_bounds(const struct place_config *cfg, const struct place_candidate *c, size_t n,
                  struct place_rank_bounds *ret)
{
        struct place_rank_bounds b = { .lo = INFINITY, .hi = -INFINITY };
        bool any = false;

        if (cfg && c && cfg->cluster_share > 0) {
                b.active = true;
                b.share = MIN(cfg->cluster_share, 1.0);
                for (size_t i = 0; i < n; i++)
                        if (c[i].fits) {
                                b.top = any ? MAX(b.top, c[i].tier) : c[i].tier;
                                any = true;
                        }
                for (size_t i = 0; i < n; i++)
                        if (c[i].fits && c[i].tier == b.top)
                                b.top_bw = MAX(b.top_bw, c[i].busbw);
                for (size_t i = 0; i < n; i++)
                        if (rank_eligible(cfg, &b, &c[i])) {
                                b.lo = MIN(b.lo, rank_cost(&c[i]));
                                b.hi = MAX(b.hi, rank_cost(&c[i]));
                        }
        }
        *ret = b;
}

int
place_rank_one(const struct place_config *cfg, const struct place_rank_bounds *b,
               const struct place_candidate *c)
{
        double cluster = 0, p;

        if (!b->active || !c->fits)
                return c->priority;
        if (rank_eligible(cfg, b, c))
                cluster = b->hi - b->lo > 1e-12
                                  ? PLACE_PRIORITY_MAX * (b->hi - rank_cost(c)) / (b->hi - b->lo)
                                  : PLACE_PRIORITY_MAX;
        p = (1 - b->share) * c->priority + b->share * cluster;
        return (int)MIN((double)PLACE_PRIORITY_MAX, MAX(0.0, floor(p + 0.5)));
}

void
place_rank(const struct place_config *cfg, struct place_candidate *c, size_t n)
{
        struct place_rank_bounds b;

        if (!cfg || !c || cfg->cluster_share <= 0)
                return;
        place_rank_bounds(cfg, c, n, &b);
        for (size_t i = 0; i < n; i++)
                if (c[i].fits)
                        c[i].priority = place_rank_one(cfg, &b, &c[i]);
}
