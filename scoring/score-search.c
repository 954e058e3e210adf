/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The set search.  GPUs whose relations to every other GPU are equal (twins: same pair
 * rows, NUMA node, NIC affinity and ports) are interchangeable, so a candidate is a count
 * per twin class and its members are the lowest-indexed free GPUs of each class.  A depth-
 * first walk over the classes enumerates those count vectors, pruned by bounds on each
 * tie-break key (ideal bandwidth, NUMA nodes, NIC GPUs, fragmentation).  Results are
 * memoised per (free mask, count, constraints, mode) in the class's bounded FIFO table,
 * the only shared mutable state, under the class lock; nothing here allocates.
 */
#include <math.h>
#include <string.h>

#include "score-private.h"

#define SCORE_TOP_MAX 32u /* candidates score_top() keeps */

/* Exactness up to SCORE_EXACT_MAX_GPUS: a walk over that many singleton classes has fewer
 * than 2^(n+1) nodes, so the cap never cuts it. */
_Static_assert(SCORE_SEARCH_MAX_NODES >= (2u << SCORE_EXACT_MAX_GPUS), "search cap below exact size");

struct cand {
        struct topo_mask set;
        double busbw;
        unsigned numa;
        unsigned nic;
        double frag;
        bool frag_done;
};

struct search {
        struct score_class *c;
        unsigned k;
        unsigned require;
        enum score_mode mode;
        bool collect;            /* score_top: keep the best few, no pruning */
        struct topo_mask free;
        double ub_bw;
        unsigned lb_numa;
        double frag_ub;
        unsigned suffix_free[TOPO_MAX_GPUS + 1];
        unsigned suffix_nic[TOPO_MAX_GPUS + 1];
        /* partial candidate */
        struct topo_mask set;
        struct topo_mask numa_seen;
        unsigned nic;
        double min_port;
        /* results */
        bool have;
        struct cand best;
        struct cand top[SCORE_TOP_MAX];
        unsigned top_k;
        unsigned n_top;
        unsigned budget;
};

static bool
eq(double a, double b)
{
        return fabs(a - b) <= SCORE_EPS * MAX(1.0, fabs(b));
}

/* <0 when a's sorted index list is lexicographically smaller than b's (same size). */
static int
cmp_index(const struct topo_mask *a, const struct topo_mask *b)
{
        for (size_t w = 0; w < ELEMENTSOF(a->w); w++) {
                uint64_t x = a->w[w] ^ b->w[w];
                if (x) {
                        uint64_t low = x & -x;
                        return (a->w[w] & low) ? -1 : 1;
                }
        }
        return 0;
}

static void
cand_frag(struct search *s, struct cand *x)
{
        struct topo_mask left;

        if (x->frag_done)
                return;
        left = s->free;
        topo_mask_andnot(&left, &x->set);
        x->frag = score__frag(s->c, &left);
        x->frag_done = true;
}

/* <0: a ranks before b, in the documented order. */
static int
cand_cmp(struct search *s, struct cand *a, struct cand *b)
{
        if (!eq(a->busbw, b->busbw))
                return a->busbw > b->busbw ? -1 : 1;
        if (s->mode == SCORE_MODE_FULL) {
                if (a->numa != b->numa)
                        return a->numa < b->numa ? -1 : 1;
                if (a->nic != b->nic)
                        return a->nic > b->nic ? -1 : 1;
                cand_frag(s, a);
                cand_frag(s, b);
                if (!eq(a->frag, b->frag))
                        return a->frag > b->frag ? -1 : 1;
        }
        return cmp_index(&a->set, &b->set);
}

static bool
meets(struct search *s, const struct cand *x)
{
        if ((s->require & SCORE_REQUIRE_NUMA) && x->numa != 1)
                return false;
        if ((s->require & SCORE_REQUIRE_NIC) && x->nic != s->k)
                return false;
        if ((s->require & SCORE_REQUIRE_PCIE_SWITCH) && !score__set_pcie_switch(s->c, &x->set))
                return false;
        if ((s->require & SCORE_REQUIRE_NVLINK) && !score__set_has_ring(s->c, &x->set, s->c->nvl))
                return false;
        return true;
}

static void
leaf(struct search *s)
{
        struct cand x = {
                .set = s->set,
                .numa = topo_mask_count(&s->numa_seen),
                .nic = s->nic,
        };

        x.busbw = score__cached_busbw(s->c, &x.set);
        if (!meets(s, &x))
                return;
        if (s->collect) {
                unsigned at = s->n_top;

                if (s->mode == SCORE_MODE_FULL)
                        cand_frag(s, &x);
                while (at > 0 && cand_cmp(s, &x, &s->top[at - 1]) < 0)
                        at--;
                if (at >= s->top_k)
                        return;
                unsigned keep = MIN(s->n_top, s->top_k - 1);
                memmove(&s->top[at + 1], &s->top[at], (keep - at) * sizeof(s->top[0]));
                s->top[at] = x;
                s->n_top = keep + 1;
                return;
        }
        if (!s->have || cand_cmp(s, &x, &s->best) < 0) {
                s->best = x;
                s->have = true;
        }
}

/* The fewest NUMA nodes any completion of the partial candidate spans: those it spans,
 * plus as many unused ones, fullest first, as the GPUs still to pick need beyond the room
 * left in the used ones.  UINT32_MAX when the undecided classes cannot supply r GPUs. */
static unsigned
numa_lower_bound(const struct search *s, unsigned x, unsigned r)
{
        const struct score_class *c = s->c;
        unsigned cnt[TOPO_MAX_GPUS] = { 0 }, seen = topo_mask_count(&s->numa_seen);
        unsigned room = 0, extra = 0, got = 0;

        for (unsigned i = 0; i < c->n; i++)
                if (c->twin[i] >= x && topo_mask_test(&s->free, i))
                        cnt[c->numa_idx[i]]++;
        for (unsigned u = 0; u < c->n; u++)
                if (topo_mask_test(&s->numa_seen, u)) {
                        room += cnt[u];
                        cnt[u] = 0;
                }
        if (r <= room)
                return seen;
        while (got < r - room) {
                unsigned most = 0, at = 0;
                for (unsigned u = 0; u < c->n; u++)
                        if (cnt[u] > most) {
                                most = cnt[u];
                                at = u;
                        }
                if (most == 0)
                        return UINT32_MAX;
                got += most;
                cnt[at] = 0;
                extra++;
        }
        return seen + extra;
}

/* True when no completion of the partial candidate can rank before the best so far.
 * With contiguous twin classes the walk meets candidates in index order, so a tie on
 * every key already loses. */
static bool
prune(struct search *s, unsigned x, unsigned r)
{
        double ub = s->ub_bw;
        unsigned lb_numa, ub_nic;
        bool tie_loses = s->c->twins_contiguous;

        if (!s->have || s->collect)
                return false;
        if (s->c->fabric_all)
                ub = MIN(ub, s->min_port);
        if (ub < s->best.busbw && !eq(ub, s->best.busbw))
                return true;
        if (!eq(ub, s->best.busbw))
                return false;
        if (s->mode == SCORE_MODE_BUSBW)
                return tie_loses;
        lb_numa = MAX(numa_lower_bound(s, x, r), s->lb_numa);
        if (lb_numa != s->best.numa)
                return lb_numa > s->best.numa;
        ub_nic = s->nic + MIN(r, s->suffix_nic[x]);
        if (ub_nic != s->best.nic)
                return ub_nic < s->best.nic;
        cand_frag(s, &s->best);
        if (!eq(s->frag_ub, s->best.frag))
                return s->frag_ub < s->best.frag;
        return tie_loses;
}

static void
walk(struct search *s, unsigned x, unsigned r)
{
        struct score_class *c = s->c;
        struct topo_mask cf, saved_set = s->set, saved_numa = s->numa_seen;
        unsigned saved_nic = s->nic, avail, members[TOPO_MAX_GPUS];
        double saved_port = s->min_port;

        if (s->budget == 0)
                return;
        s->budget--;
        if (r == 0) {
                leaf(s);
                return;
        }
        if (x >= c->n_twins || s->suffix_free[x] < r || prune(s, x, r))
                return;

        avail = 0;
        for (size_t w = 0; w < ELEMENTSOF(cf.w); w++)
                cf.w[w] = c->twin_mask[x].w[w] & s->free.w[w];
        for (size_t w = 0; w < ELEMENTSOF(cf.w); w++)
                for (uint64_t bits = cf.w[w]; bits; bits &= bits - 1)
                        members[avail++] = (unsigned)(w * 64 + (unsigned)__builtin_ctzll(bits));
        if (avail > 0 && (s->require & SCORE_REQUIRE_NIC) && !c->has_nic[members[0]])
                avail = 0;

        /* Most of this class first: with contiguous classes that is index order. */
        for (unsigned take = MIN(avail, r) + 1; take-- > 0;) {
                s->set = saved_set;
                s->numa_seen = saved_numa;
                s->nic = saved_nic;
                s->min_port = saved_port;
                for (unsigned a = 0; a < take; a++)
                        topo_mask_set(&s->set, members[a]);
                if (take > 0) {
                        if ((s->require & SCORE_REQUIRE_NUMA) &&
                            topo_mask_count(&s->numa_seen) > 0 &&
                            !topo_mask_test(&s->numa_seen, c->numa_idx[members[0]]))
                                continue;
                        topo_mask_set(&s->numa_seen, c->numa_idx[members[0]]);
                        s->nic += c->has_nic[members[0]] ? take : 0;
                        s->min_port = MIN(s->min_port, c->port_fabric[members[0]]);
                }
                walk(s, x + 1, r - take);
                if (s->budget == 0)
                        break;
        }
        s->set = saved_set;
        s->numa_seen = saved_numa;
        s->nic = saved_nic;
        s->min_port = saved_port;
}

static void
search_init(struct search *s, struct score_class *c, const struct topo_mask *free, unsigned k,
            unsigned require, enum score_mode mode, double ub_bw)
{
        unsigned n_free = topo_mask_count(free);

        *s = (struct search){
                .c = c, .k = k, .require = require, .mode = mode, .free = *free,
                .ub_bw = ub_bw, .min_port = INFINITY, .budget = SCORE_SEARCH_MAX_NODES,
        };
        s->lb_numa = c->max_per_numa ? (k + c->max_per_numa - 1) / c->max_per_numa : 1;
        for (unsigned j = 0; j < c->cfg.n_sizes; j++)
                if (c->cfg.size_of[j] >= 1 && c->cfg.size_of[j] <= n_free - k)
                        s->frag_ub += c->cfg.weight_of[j];
        unsigned f[TOPO_MAX_GPUS + 1] = { 0 }, nic[TOPO_MAX_GPUS + 1] = { 0 };
        for (unsigned i = 0; i < c->n; i++)
                if (topo_mask_test(free, i)) {
                        f[c->twin[i]]++;
                        nic[c->twin[i]] += c->has_nic[i];
                }
        s->suffix_free[c->n_twins] = s->suffix_nic[c->n_twins] = 0;
        for (unsigned x = c->n_twins; x-- > 0;) {
                s->suffix_free[x] = s->suffix_free[x + 1] + f[x];
                s->suffix_nic[x] = s->suffix_nic[x + 1] + nic[x];
        }
}

/* Best modeled bandwidth of any k of the GPUs in free (no constraints). */
static double
best_busbw(struct score_class *c, const struct topo_mask *free, unsigned k, bool for_ideal)
{
        struct score_memo_entry e;
        struct search s;

        if (k == 0 || topo_mask_count(free) < k)
                return 0;
        if (k == 1)
                return 0;
        if (score__memo_get(c, free, k, 0, SCORE_MODE_BUSBW, &e))
                return e.busbw;
        search_init(&s, c, free, k, 0, SCORE_MODE_BUSBW, for_ideal ? INFINITY : score__ideal(c, k));
        walk(&s, 0, k);
        e = (struct score_memo_entry){
                .free = *free, .count = k, .mode = SCORE_MODE_BUSBW,
                .r = s.have ? 0 : -EAGAIN, .set = s.best.set, .busbw = s.have ? s.best.busbw : 0,
        };
        score__memo_put(c, &e);
        return e.busbw;
}

double
score__ideal(struct score_class *c, unsigned k)
{
        uint64_t bits;
        double v;

        if (k > c->n)
                return 0;
        bits = __atomic_load_n(&c->ideal[k], __ATOMIC_RELAXED);
        if (bits != UINT64_MAX) {
                memcpy(&v, &bits, sizeof(v));
                return v;
        }
        struct topo_mask all;
        topo_mask_fill(&all, c->n);
        v = best_busbw(c, &all, k, true);
        memcpy(&bits, &v, sizeof(bits));
        __atomic_store_n(&c->ideal[k], bits, __ATOMIC_RELAXED);
        return v;
}

double
score__frag(struct score_class *c, const struct topo_mask *left)
{
        unsigned n_left = topo_mask_count(left);
        double f = 0;

        for (unsigned j = 0; j < c->cfg.n_sizes; j++) {
                unsigned size = c->cfg.size_of[j];
                double ideal;

                if (size == 0 || size > n_left)
                        continue;
                ideal = score__ideal(c, size);
                if (ideal <= 0)
                        f += c->cfg.weight_of[j];
                else
                        f += c->cfg.weight_of[j] * MIN(1.0, best_busbw(c, left, size, false) / ideal);
        }
        return f;
}

void
score__fill_choice(struct score_class *c, const struct topo_mask *set, const struct topo_mask *free,
                   struct score_choice *ret)
{
        struct score_choice x = { .set = *set };

        x.n = topo_mask_count(set);
        x.busbw_gbps = score__cached_busbw(c, set);
        x.ideal_gbps = score__ideal(c, x.n);
        x.numa_spanned = score__set_numa(c, set);
        x.nic_gpus = score__set_nic(c, set);
        if (free) {
                struct topo_mask left;
                for (size_t w = 0; w < ELEMENTSOF(left.w); w++)
                        left.w[w] = free->w[w] & ~set->w[w];
                x.frag_left = score__frag(c, &left);
        }
        x.p2p = score__set_has_ring(c, set, c->p2p);
        x.all_nvlink_ring = score__set_has_ring(c, set, c->nvl);
        *ret = x;
}

int
score__search(struct score_class *c, const struct topo_mask *free, unsigned k, unsigned require,
              enum score_mode mode, struct score_choice *top, unsigned top_k, const char **ret_why)
{
        struct search s;

        search_init(&s, c, free, k, require, mode, k > 1 ? score__ideal(c, k) : INFINITY);
        if (top_k > 1) {
                s.collect = true;
                s.top_k = MIN(top_k, SCORE_TOP_MAX);
        }
        walk(&s, 0, k);
        if (s.collect) {
                for (unsigned a = 0; a < s.n_top; a++)
                        score__fill_choice(c, &s.top[a].set, free, &top[a]);
                return (int)s.n_top;
        }
        if (!s.have)
                return 0;
        score__fill_choice(c, &s.best.set, free, &top[0]);
        return 1;
}

/* --- memo --------------------------------------------------------------------------------- */

static uint32_t
memo_hash(const struct topo_mask *free, unsigned count, unsigned require, unsigned mode)
{
        uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)count << 32) ^ ((uint64_t)require << 8) ^ mode;

        for (size_t w = 0; w < ELEMENTSOF(free->w); w++) {
                h ^= free->w[w];
                h *= 0xff51afd7ed558ccdull;
                h ^= h >> 33;
        }
        return (uint32_t)(h % SCORE_MEMO_BUCKETS);
}

static bool
memo_key_eq(const struct score_memo_entry *e, const struct topo_mask *free, unsigned count,
            unsigned require, unsigned mode)
{
        return e->count == count && e->require == require && e->mode == mode &&
               topo_mask_equal(&e->free, free);
}

int
score__memo_init(struct score_class *c)
{
        c->memo = calloc(SCORE_MEMO_MAX_ENTRIES, sizeof(c->memo[0]));
        c->bucket = malloc(SCORE_MEMO_BUCKETS * sizeof(c->bucket[0]));
        if (!c->memo || !c->bucket)
                return -ENOMEM;
        for (unsigned b = 0; b < SCORE_MEMO_BUCKETS; b++)
                c->bucket[b] = -1;
        return 0;
}

bool
score__memo_get(struct score_class *c, const struct topo_mask *free, unsigned count,
                unsigned require, enum score_mode mode, struct score_memo_entry *ret)
{
        uint32_t h = memo_hash(free, count, require, mode);
        bool found = false;

        pthread_mutex_lock(&c->lock);
        for (int32_t i = c->bucket[h]; i >= 0; i = c->memo[i].next)
                if (memo_key_eq(&c->memo[i], free, count, require, mode)) {
                        *ret = c->memo[i];
                        found = true;
                        break;
                }
        if (found)
                c->hits++;
        else
                c->misses++;
        pthread_mutex_unlock(&c->lock);
        return found;
}

void
score__memo_put(struct score_class *c, const struct score_memo_entry *e)
{
        uint32_t h = memo_hash(&e->free, e->count, e->require, e->mode);
        unsigned slot;

        pthread_mutex_lock(&c->lock);
        for (int32_t i = c->bucket[h]; i >= 0; i = c->memo[i].next)
                if (memo_key_eq(&c->memo[i], &e->free, e->count, e->require, e->mode))
                        goto out; /* another thread got here first: same answer */

        /* Evict the oldest entry: unlink it from its chain. */
        slot = c->memo_cursor;
        c->memo_cursor = (c->memo_cursor + 1) % SCORE_MEMO_MAX_ENTRIES;
        if (c->memo[slot].used) {
                struct score_memo_entry *old = &c->memo[slot];
                int32_t *p = &c->bucket[memo_hash(&old->free, old->count, old->require, old->mode)];
                while (*p >= 0 && *p != (int32_t)slot)
                        p = &c->memo[*p].next;
                if (*p == (int32_t)slot)
                        *p = old->next;
        } else
                c->memo_entries++;
        c->memo[slot] = *e;
        c->memo[slot].used = true;
        c->memo[slot].next = c->bucket[h];
        c->bucket[h] = (int32_t)slot;
out:
        pthread_mutex_unlock(&c->lock);
}
