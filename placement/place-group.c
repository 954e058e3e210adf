/* SPDX-License-Identifier: Apache-2.0 */
/*
 * placement's groups (place.h, "groups"): which domain a gang goes to, which nodes its pods
 * take (the node plan), and the hold that keeps room there for its pods not yet bound.  The
 * table is a bounded array of records under one mutex, scanned linearly (live groups are
 * few next to nodes); records expire at their TTL, refreshed by each bound member.  Domains
 * are recorded by level and name, so a record outlives the view it was chosen in and is
 * resolved again in each new one.  Pure: time comes in as now_ns; no I/O, no globals.
 */
#include "place.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/str.h"

/* One pod's place in a group's node plan (place_group_plan_pick).  Node and member are
 * kept by a 64-bit hash of their names (never 0), so a plan costs 32 bytes a pod: a
 * collision can only misdirect a preference, never a GPU (the plan filters nothing). */
struct plan_slot {
        uint64_t node;                 /* hash of the node's name */
        uint64_t uid;                  /* hash of the member that claimed it; 0: unclaimed */
        size_t hint;                   /* the node's index in the view it was planned in */
        bool bound;
};

struct group_record {
        char id[PLACE_NAME_MAX];       /* "": free slot */
        struct place_group_domain domain;
        unsigned size;                 /* 0: unknown */
        unsigned count, require;
        uint64_t expires_ns;
        unsigned n_bound;
        char (*bound)[64];             /* uids bound, n_bound of them (malloc'd) */
        unsigned n_plan;
        struct plan_slot *plan;        /* the nodes its pods take (malloc'd; the node plan),
                                        * n_plan of them */
};

struct place_groups {
        pthread_mutex_t lock;
        uint64_t ttl_ns;
        unsigned n_used;    /* records in use: scans stop after seeing them all */
        struct group_record rec[PLACE_MAX_GROUPS];
};

static const char *const mode_names[_PLACE_DOMAIN_MAX] = {
        [PLACE_DOMAIN_OFF] = "off",
        [PLACE_DOMAIN_PREFERRED] = "domain-preferred",
        [PLACE_DOMAIN_REQUIRED] = "domain-required",
};

const char *
place_domain_mode_to_string(enum place_domain_mode m)
{
        return m >= 0 && m < _PLACE_DOMAIN_MAX ? mode_names[m] : NULL;
}

struct place_groups *
place_groups_new(uint64_t ttl_ns)
{
        struct place_groups *g = calloc(1, sizeof(*g));

        if (!g)
                return NULL;
        pthread_mutex_init(&g->lock, NULL);
        g->ttl_ns = ttl_ns ? ttl_ns : PLACE_GROUP_TTL_NS;
        return g;
}

static void
record_clear(struct group_record *r)
{
        free(r->bound);
        free(r->plan);
        *r = (struct group_record){ 0 };
}

/* Lock held.  Clears a record in use. */
static void
record_drop(struct place_groups *g, struct group_record *r)
{
        record_clear(r);
        g->n_used--;
}

struct place_groups *
place_groups_free(struct place_groups *g)
{
        if (!g)
                return NULL;
        for (size_t k = 0; k < PLACE_MAX_GROUPS; k++)
                record_clear(&g->rec[k]);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return NULL;
}

/* Lock held.  An unused record, or NULL when all PLACE_MAX_GROUPS are in use. */
static struct group_record *
free_slot_locked(struct place_groups *g)
{
        for (size_t k = 0; k < PLACE_MAX_GROUPS; k++)
                if (!g->rec[k].id[0])
                        return &g->rec[k];
        return NULL;
}

/* Lock held.  The live record of id, or NULL; expired records are cleared on the way. */
static struct group_record *
find_locked(struct place_groups *g, const char *id, uint64_t now_ns)
{
        for (size_t k = 0, seen = 0; k < PLACE_MAX_GROUPS && seen < g->n_used; k++) {
                struct group_record *r = &g->rec[k];

                if (!r->id[0])
                        continue;
                seen++;
                if (r->expires_ns <= now_ns) {
                        record_drop(g, r);
                        seen--;
                        continue;
                }
                if (strcmp(r->id, id) == 0)
                        return r;
        }
        return NULL;
}

/* Lock held.  Sets that live groups other than except hold in domain d at level of v
 * against another group: their pods not yet bound, for every group whose domain lies inside
 * d (a hierarchy: one of its nodes is in d) and holds the whole group (see gang_backfills).
 * Rough where shapes differ: a pod of another shape counts as one set. */
/* Whether another gang may take the room r holds: when r's domain could not hold r's whole
 * group when it was given (no domain could; r keeps the one with the most room), r cannot
 * start there now, and a gang that fits a domain whole now runs at full speed at once
 * rather than split or waiting behind r.  Single pods stay held off: they are what
 * fragments a domain (a gang leaves its room whole when it ends, single pods trickle). */
static bool
gang_backfills(const struct group_record *r)
{
        return !r->domain.whole;
}

static unsigned
held_locked(const struct place_groups *g, const struct place_view *v, unsigned level, ssize_t d,
            const char *except, uint64_t now_ns)
{
        unsigned held = 0;

        for (size_t k = 0, seen = 0; k < PLACE_MAX_GROUPS && seen < g->n_used; k++) {
                const struct group_record *r = &g->rec[k];
                const uint32_t *members;
                ssize_t rd, first;

                if (!r->id[0])
                        continue;
                seen++;
                if (r->expires_ns <= now_ns || r->size <= r->n_bound ||
                    (except && strcmp(r->id, except) == 0) || gang_backfills(r))
                        continue;
                rd = place_view_find_domain(v, r->domain.level, r->domain.name);
                if (rd < 0)
                        continue;
                /* Where the held domain lies: its first node's domain at this level. */
                if (r->domain.level == PLACE_LEVEL_NODE)
                        first = rd;
                else if (place_view_domain_nodes(v, r->domain.level, (size_t)rd, &members) > 0)
                        first = members[0];
                else
                        continue;
                if (place_view_node_domain(v, (size_t)first, level) == d)
                        held += r->size - r->n_bound;
        }
        return held;
}

static unsigned
minus(unsigned a, unsigned b)
{
        return a > b ? a - b : 0;
}

/* Sets of the group's shape (count GPUs meeting require) on the nodes of domain d at
 * level; node skip (may be PLACE_NO_NODE) counts with its free GPUs replaced by *skip_free. */
static unsigned
domain_sets(const struct place_view *v, unsigned level, ssize_t d, unsigned count,
            unsigned require, size_t skip, const struct topo_mask *skip_free,
            const struct topo_mask *const *free_of)
{
        unsigned sets = 0;
        const uint32_t *members;
        uint32_t node = (uint32_t)d;
        size_t n;

        /* A node's own domain is the node; a named one lists its nodes. */
        if (level == PLACE_LEVEL_NODE) {
                members = &node;
                n = d >= 0 && place_view_node_name(v, (size_t)d) != NULL;
        } else
                n = d >= 0 ? place_view_domain_nodes(v, level, (size_t)d, &members) : 0;
        for (size_t k = 0; k < n; k++) {
                size_t i = members[k];
                struct score_class *cls = place_view_node_class(v, i);
                const struct topo_mask *f = place_view_node_free(v, i);

                if (!cls)
                        continue;
                if (i == skip)
                        f = skip_free;
                else if (free_of && free_of[i])
                        f = free_of[i];
                sets += place_count_sets(cls, f, count, require);
        }
        return sets;
}

unsigned
place_domain_sets(const struct place_view *v, unsigned level, ssize_t d, unsigned count,
                  unsigned require)
{
        return domain_sets(v, level, d, count, require, PLACE_NO_NODE, NULL, NULL);
}

/* With a topology constraint at a level (req->has_within, not PLACE_LEVEL_NODE): for each
 * domain of the inner level l, the domain of that level all its nodes lie in, or -1 when
 * they lie in several or a node in none (such a domain may not be chosen).  NULL on OOM. */
static ssize_t *
within_of(const struct place_view *v, unsigned l, unsigned within, size_t n)
{
        ssize_t *outer = malloc(MAX(n, (size_t)1) * sizeof(*outer));

        if (!outer)
                return NULL;
        for (size_t d = 0; d < n; d++)
                outer[d] = -2; /* no node seen yet */
        for (size_t i = 0; i < place_view_n_nodes(v); i++) {
                ssize_t d = place_view_node_domain(v, i, l), o;

                if (d < 0)
                        continue;
                o = place_view_node_domain(v, i, within);
                outer[d] = outer[d] == -2 || outer[d] == o ? o : -1;
        }
        return outer;
}

/* The state of one choice across levels: the fallback (the domain with the most sets at the
 * first level that has domains, or at the constraint's level) for a group that no domain
 * holds whole. */
struct choice_state {
        struct place_group_domain most;
        bool any_level, have_most;
};

/* One node that holds the whole group (its own NVLink domain), the one with the fewest sets
 * to spare; with a constraint to one node (on_node), the node with the most sets when none
 * holds it (not whole).  Returns 1 and *ret, 0 when none does, -ENOSPC (on_node: no node
 * has a set). */
static int
choose_node(const struct place_groups *g, const struct place_view *v,
            const struct place_group_request *req, const struct topo_mask *const *free_of,
            uint64_t now_ns, struct place_group_domain *ret)
{
        bool on_node = req->has_within && req->within == PLACE_LEVEL_NODE;
        unsigned need = MAX(req->size, 1u), best_sets = UINT32_MAX, most_sets = 0;
        ssize_t best_node = -1, most_node = -1;
        const char *name;

        for (size_t i = 0; (req->size > 1 || on_node) && i < place_view_n_nodes(v); i++) {
                struct score_class *cls = place_view_node_class(v, i);
                unsigned sets;

                if (!cls || !place_view_node_name(v, i))
                        continue;
                if (req->has_within && !on_node && place_view_node_domain(v, i, req->within) < 0)
                        continue; /* outside every domain of the constraint's level */
                sets = place_count_sets(cls, free_of && free_of[i] ? free_of[i]
                                                                    : place_view_node_free(v, i),
                                        req->count, req->require);
                if (g->n_used > 0 && (sets >= need || (on_node && sets > 0)))
                        sets = minus(sets, held_locked(g, v, PLACE_LEVEL_NODE, (ssize_t)i, req->id,
                                                       now_ns));
                if (sets >= need && req->size > 1 && sets < best_sets) {
                        best_sets = sets;
                        best_node = (ssize_t)i;
                }
                if (sets > most_sets) {
                        most_sets = sets;
                        most_node = (ssize_t)i;
                }
        }
        if (on_node && best_node < 0)
                best_node = most_node, best_sets = most_sets; /* not whole: -ENOSPC below */
        if (on_node && best_node < 0)
                return -ENOSPC;
        if (best_node < 0)
                return 0;
        name = place_view_node_name(v, (size_t)best_node);
        *ret = (struct place_group_domain){ .level = PLACE_LEVEL_NODE, .sets = best_sets,
                                            .whole = best_sets >= need && req->size > 0 };
        str_copy(ret->name, sizeof(ret->name), name, strlen(name));
        return 1;
}

/* At level l: the domain that holds the whole group with the fewest sets to spare (size
 * unknown: the most room), within the constraint's domain when there is one; notes the
 * fallback in st.  Returns 1 and *ret, 0 when none holds it, -ENOMEM. */
static int
choose_at_level(const struct place_groups *g, const struct place_view *v,
                const struct place_group_request *req, const struct topo_mask *const *free_of,
                uint64_t now_ns, unsigned l, struct choice_state *st,
                struct place_group_domain *ret)
{
        size_t n = place_view_n_domains(v, l);
        unsigned need = MAX(req->size, 1u);
        CLEANUP(freep) unsigned *sets = NULL;
        CLEANUP(freep) ssize_t *outer = NULL;
        /* Where the fallback (the most room) is taken: the first level that has domains, or
         * the constraint's level. */
        bool most_here = req->has_within ? l == req->within : !st->any_level;
        const struct place_domain *pd;
        ssize_t best = -1;

        if (n == 0 || (req->has_within && l > req->within))
                return 0;
        sets = calloc(n, sizeof(*sets));
        if (!sets)
                return -ENOMEM;
        if (req->has_within && l < req->within) {
                outer = within_of(v, l, req->within, n);
                if (!outer)
                        return -ENOMEM;
        }
        /* One pass over the nodes for every domain of the level. */
        for (size_t i = 0; i < place_view_n_nodes(v); i++) {
                ssize_t d = place_view_node_domain(v, i, l);
                struct score_class *cls = place_view_node_class(v, i);

                if (d >= 0 && cls)
                        sets[d] += place_count_sets(cls, free_of && free_of[i]
                                                                 ? free_of[i]
                                                                 : place_view_node_free(v, i),
                                                    req->count, req->require);
        }
        for (size_t d = 0; d < n && g->n_used > 0; d++)
                sets[d] = minus(sets[d], held_locked(g, v, l, (ssize_t)d, req->id, now_ns));
        for (size_t d = 0; d < n; d++) {
                if (outer && outer[d] < 0)
                        continue; /* spans domains of the constraint's level */
                if (sets[d] >= need && req->size > 0 && (best < 0 || sets[d] < sets[best]))
                        best = (ssize_t)d;
                /* Size unknown: the domain with the most room. */
                if (sets[d] >= need && req->size == 0 && (best < 0 || sets[d] > sets[best]))
                        best = (ssize_t)d;
                if (most_here && sets[d] > 0 && (!st->have_most || sets[d] > st->most.sets)) {
                        st->most = (struct place_group_domain){ .level = l, .sets = sets[d] };
                        str_copy(st->most.name, sizeof(st->most.name),
                                 place_view_domain(v, l, d)->name,
                                 strlen(place_view_domain(v, l, d)->name));
                        st->have_most = true;
                }
        }
        st->any_level = st->any_level || !req->has_within || l == req->within;
        if (best < 0)
                return 0;
        pd = place_view_domain(v, l, (size_t)best);
        *ret = (struct place_group_domain){ .level = l, .sets = sets[best], .whole = true };
        str_copy(ret->name, sizeof(ret->name), pd->name, strlen(pd->name));
        return 1;
}

/* Chooses the domain for a group of size pods (0: unknown) of count GPUs: a multi-node
 * NVLink domain (level 0) that holds them all, the one with the fewest sets to spare; else
 * one node that holds them all (its NVSwitch is an NVLink domain too); else, at the
 * innermost network tier where some domain holds them all, the one with the fewest sets to
 * spare; when none does at any level, the one with the most sets at level 0 (or the first
 * level that has domains).  Level 0 before one node: both are NVLink, and a whole node is
 * the one thing a pod as large as the node can use, so a group that a multi-node domain
 * holds as well leaves it whole.  A topology constraint (req->has_within) keeps the choice
 * inside one domain of its level: no outer level, inner domains only when nested in one,
 * and the fallback at that level (one node: the node with the most sets).  Returns 1 and
 * *ret, 0 when no level has domains, -ENOSPC when none has a set. */
static int
choose(const struct place_groups *g, const struct place_view *v,
       const struct place_group_request *req, const struct topo_mask *const *free_of,
       uint64_t now_ns, struct place_group_domain *ret)
{
        struct choice_state st = { 0 };
        int x;

        if (req->has_within && req->within == PLACE_LEVEL_NODE)
                return choose_node(g, v, req, free_of, now_ns, ret);
        x = choose_at_level(g, v, req, free_of, now_ns, 0, &st, ret);
        if (x != 0)
                return x;
        x = choose_node(g, v, req, free_of, now_ns, ret);
        if (x != 0)
                return x;
        for (unsigned l = 1; l < PLACE_MAX_LEVELS; l++) {
                x = choose_at_level(g, v, req, free_of, now_ns, l, &st, ret);
                if (x != 0)
                        return x;
        }
        /* A constraint to a label key's level: its domains come last (their nesting with the
         * levels above is unknown; those inside one of them were tried first). */
        if (req->has_within && req->within > PLACE_LEVEL_NODE) {
                x = choose_at_level(g, v, req, free_of, now_ns, req->within, &st, ret);
                if (x != 0)
                        return x;
        }
        /* A constraint to a level no node carries: no node may host the group. */
        if (!st.any_level)
                return req->has_within ? -ENOSPC : 0;
        if (!st.have_most)
                return -ENOSPC;
        *ret = st.most;
        return 1;
}

int
place_spill_domain(const struct place_view *v, const struct topo_mask *const *cand_free,
                   unsigned count, unsigned require, unsigned *ret_level, ssize_t *ret_domain)
{
        unsigned best_sets = 0, best_level = 0;
        ssize_t best = -1;

        if (!v || !cand_free || count == 0 || !ret_level || !ret_domain)
                return -EINVAL;
        for (unsigned l = 0; l < PLACE_MAX_LEVELS; l++) {
                size_t n = place_view_n_domains(v, l);
                CLEANUP(freep) unsigned *sets = NULL;

                if (n == 0)
                        continue;
                sets = calloc(n, sizeof(*sets));
                if (!sets)
                        return -ENOMEM;
                for (size_t i = 0; i < place_view_n_nodes(v); i++) {
                        ssize_t d = place_view_node_domain(v, i, l);
                        struct score_class *cls = place_view_node_class(v, i);

                        if (d >= 0 && cls && cand_free[i])
                                sets[d] += place_count_sets(cls, cand_free[i], count, require);
                }
                /* Strictly more: a tie keeps the inner level and the name that sorts first. */
                for (size_t d = 0; d < n; d++)
                        if (sets[d] > best_sets) {
                                best_sets = sets[d];
                                best_level = l;
                                best = (ssize_t)d;
                        }
        }
        if (best < 0)
                return 0;
        *ret_level = best_level;
        *ret_domain = best;
        return 1;
}

/* --- the node plan ------------------------------------------------------------------------
 * A group given a domain also gets a plan: which nodes its pods take.  Without one,
 * kube-scheduler's PodGroup cycle sends the members one by one and the extender sees each
 * against the same view (the members the scheduler assumed earlier hold nothing here), so
 * members spread over the nodes that tie: two 4-GPU pods on two empty 8-GPU nodes, half of
 * each left, where one node would do; a half-free node passed over for an empty one.  The
 * plan packs as Kueue's rack packing does inside its domain: each pod in turn on the node
 * it leaves with the fewest free GPUs, then the smaller node (it serves fewer shapes), then
 * the fuller innermost domain, then the name.  So a node's free half is used before an
 * empty node, and a second pod follows the first.  A group whose domain holds it whole is
 * planned inside that domain; a domain-preferred group that no domain holds (it spills) is
 * planned over every node, as rack packing's fallback bin-packs such a gang: it fills the
 * holes and leaves whole nodes and domains whole.  prioritize ranks a member's planned node
 * first (a preference, never a filter); bind records where a member went. */

/* FNV-1a, never 0 (0 marks an unclaimed slot). */
static uint64_t
name_hash(const char *s)
{
        uint64_t h = 0xcbf29ce484222325ull;

        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
        return h ? h : 1;
}

/* Lock held.  The view's index of slot's node, -1 when the view has no such node. */
static ssize_t
slot_node(const struct place_view *v, struct plan_slot *s)
{
        const char *name = s->hint < place_view_n_nodes(v) ? place_view_node_name(v, s->hint)
                                                           : NULL;

        if (name && name_hash(name) == s->node)
                return (ssize_t)s->hint;
        for (size_t i = 0; i < place_view_n_nodes(v); i++) {
                name = place_view_node_name(v, i);
                if (name && name_hash(name) == s->node) {
                        s->hint = i;
                        return (ssize_t)i;
                }
        }
        return -1;
}

/* A node the plan may use: its view index, the sets of the group's shape it has left, the
 * free GPUs it would keep, its GPUs and its innermost domain's free share. */
struct plan_node {
        size_t i;
        unsigned sets, left, gpus;
        double domain_free;
};

/* Whether node a comes before node b in the plan's order (see above). */
static bool
plan_before(const struct plan_node *a, const struct plan_node *b)
{
        if (a->left != b->left)
                return a->left < b->left;
        if (a->gpus != b->gpus)
                return a->gpus < b->gpus;
        if (a->domain_free != b->domain_free)
                return a->domain_free < b->domain_free;
        return a->i < b->i;
}

/* Lock held.  Plans r's pods (see above): on the nodes of its domain in v, or on every node
 * (global).  Other live groups' planned, unbound pods count as taken on their nodes (one
 * set each, their GPUs).  r keeps no plan on OOM, or when its domain is not in v.  Time
 * O(nodes + pods x nodes with a set). */
static void
plan_make_locked(struct place_groups *g, const struct place_view *v, struct group_record *r,
                 const struct topo_mask *const *free_of, uint64_t now_ns, bool global)
{
        size_t n = place_view_n_nodes(v), m = 0;
        ssize_t dom = place_view_find_domain(v, r->domain.level, r->domain.name);
        CLEANUP(freep) struct plan_node *cand = NULL;
        CLEANUP(freep) ssize_t *at = NULL; /* view node -> its index in cand, -1 */
        unsigned k, total = 0;

        if ((dom < 0 && !global) || r->size == 0 || r->count == 0 || n == 0)
                return;
        cand = calloc(n, sizeof(*cand));
        at = malloc(n * sizeof(*at));
        if (!cand || !at)
                return;
        for (size_t i = 0; i < n; i++) {
                struct score_class *cls = place_view_node_class(v, i);
                const struct topo_mask *f = free_of && free_of[i] ? free_of[i]
                                                                  : place_view_node_free(v, i);
                unsigned sets;

                at[i] = -1;
                if (!cls || !place_view_node_name(v, i) ||
                    (!global && place_view_node_domain(v, i, r->domain.level) != dom))
                        continue;
                sets = place_count_sets(cls, f, r->count, r->require);
                if (sets == 0)
                        continue;
                at[i] = (ssize_t)m;
                cand[m++] = (struct plan_node){ .i = i, .sets = sets,
                                                .left = topo_mask_count(f),
                                                .gpus = score_class_topo(cls)->n_gpus,
                                                .domain_free = place_view_domain_free(v, i) };
        }
        for (size_t j = 0, seen = 0; j < PLACE_MAX_GROUPS && seen < g->n_used; j++) {
                struct group_record *o = &g->rec[j];

                if (!o->id[0])
                        continue;
                seen++;
                if (o == r || o->expires_ns <= now_ns)
                        continue;
                for (unsigned q = 0; q < o->n_plan; q++) {
                        ssize_t i = o->plan[q].bound ? -1 : slot_node(v, &o->plan[q]);
                        struct plan_node *c = i >= 0 && at[i] >= 0 ? &cand[at[i]] : NULL;

                        if (c && c->sets > 0) {
                                c->sets--;
                                c->left = minus(c->left, o->count);
                        }
                }
        }
        for (size_t c = 0; c < m; c++)
                total = MIN(total + cand[c].sets, r->size);
        if (total == 0)
                return;
        r->plan = calloc(total, sizeof(*r->plan));
        if (!r->plan)
                return;
        for (k = 0; k < total; k++) {
                struct plan_node *best = NULL;

                for (size_t c = 0; c < m; c++)
                        if (cand[c].sets > 0 && (!best || plan_before(&cand[c], best)))
                                best = &cand[c];
                if (!best)
                        break;
                best->sets--;
                best->left = minus(best->left, r->count);
                r->plan[k].node = name_hash(place_view_node_name(v, best->i));
                r->plan[k].hint = best->i;
        }
        r->n_plan = k;
}

int
place_group_plan_pick(struct place_groups *g, const struct place_view *v, const char *id,
                      const char *uid, const bool *fits, uint64_t now_ns, size_t *ret_node)
{
        struct group_record *r;
        uint64_t me;
        ssize_t i;
        int x = 0;

        if (!g || !v || !id || !uid || !fits || !ret_node)
                return -EINVAL;
        if (!id[0] || !uid[0])
                return 0;
        me = name_hash(uid);
        pthread_mutex_lock(&g->lock);
        r = find_locked(g, id, now_ns);
        /* Its own claim first, while its node fits; else it lets the claim go. */
        for (unsigned k = 0; r && k < r->n_plan; k++) {
                struct plan_slot *s = &r->plan[k];

                if (s->bound || s->uid != me)
                        continue;
                i = slot_node(v, s);
                if (i >= 0 && fits[i]) {
                        *ret_node = (size_t)i;
                        x = 1;
                        goto out;
                }
                s->uid = 0;
        }
        /* The first unclaimed slot whose node fits: the plan's order. */
        for (unsigned k = 0; r && k < r->n_plan; k++) {
                struct plan_slot *s = &r->plan[k];

                if (s->bound || s->uid)
                        continue;
                i = slot_node(v, s);
                if (i >= 0 && fits[i]) {
                        s->uid = me;
                        *ret_node = (size_t)i;
                        x = 1;
                        goto out;
                }
        }
out:
        pthread_mutex_unlock(&g->lock);
        return x;
}

/* Lock held.  Member uid was bound on node (NULL: not known): its slot there becomes bound.
 * A member bound off its claim takes an unbound slot on that node (an unclaimed one first,
 * else another member's claim, which that member loses) and lets its own claim go; bound
 * where no slot is left, it uses up its claim or else the last unclaimed slot, so the plan
 * keeps one slot per pod still to come. */
static void
plan_bound_locked(struct group_record *r, const char *uid, const char *node)
{
        uint64_t me = name_hash(uid), at = node ? name_hash(node) : 0;
        struct plan_slot *mine = NULL, *there = NULL;

        for (unsigned k = 0; k < r->n_plan; k++)
                if (r->plan[k].uid == me) {
                        if (r->plan[k].bound)
                                return; /* bound already */
                        mine = &r->plan[k];
                }
        for (unsigned k = 0; at && k < r->n_plan; k++) {
                struct plan_slot *s = &r->plan[k];

                if (s->bound || s->node != at)
                        continue;
                if (s == mine) {
                        there = s;
                        break;
                }
                if (!there || (there->uid && !s->uid))
                        there = s;
        }
        if (!there)
                there = mine;
        for (unsigned k = r->n_plan; !there && k-- > 0;)
                if (!r->plan[k].bound && !r->plan[k].uid)
                        there = &r->plan[k];
        if (!there)
                return; /* every slot left is claimed by others: they keep them */
        if (mine && mine != there)
                mine->uid = 0;
        there->uid = me;
        there->bound = true;
}

int
place_group_domain(struct place_groups *g, const struct place_view *v,
                   const struct place_group_request *req,
                   const struct topo_mask *const *free_of, uint64_t now_ns,
                   struct place_group_domain *ret)
{
        struct place_group_domain d;
        struct group_record *r, *slot = NULL;
        CLEANUP(freep) struct plan_slot *old_plan = NULL;
        unsigned n_old = 0;
        int x;

        if (!g || !v || !req)
                return -EINVAL;
        if (!req->id[0] || req->mode == PLACE_DOMAIN_OFF || req->count == 0)
                return 0;
        pthread_mutex_lock(&g->lock);
        r = find_locked(g, req->id, now_ns);
        if (r && r->n_bound == 0) {
                ssize_t dom = place_view_find_domain(v, r->domain.level, r->domain.name);

                /* Nobody started there yet: keep it only while it still holds the group.  Its
                 * own pods' picks hold nothing (the extender's ledger), so the sets they
                 * picked, and the nodes kube-scheduler assumed them on, still count free. */
                if (dom < 0 ||
                    minus(domain_sets(v, r->domain.level, dom, r->count, r->require, PLACE_NO_NODE,
                                      NULL, free_of),
                          held_locked(g, v, r->domain.level, dom, r->id, now_ns)) <
                            MAX(r->size, 1u) ||
                    !r->domain.whole)
                        slot = r;
        }
        if (r && !slot) {
                *ret = r->domain;
                pthread_mutex_unlock(&g->lock);
                return 1;
        }
        /* Chosen under the lock, so two pods of one group never choose apart. */
        x = choose(g, v, req, free_of, now_ns, &d);
        if (x <= 0) {
                pthread_mutex_unlock(&g->lock);
                return x;
        }
        if (!slot)
                slot = free_slot_locked(g);
        if (!slot) {
                pthread_mutex_unlock(&g->lock);
                return -E2BIG;
        }
        if (!slot->id[0])
                g->n_used++;
        old_plan = TAKE_PTR(slot->plan);
        n_old = slot->n_plan;
        record_clear(slot);
        *slot = (struct group_record){ .domain = d, .size = req->size, .count = req->count,
                                       .require = req->require, .expires_ns = now_ns + g->ttl_ns };
        str_copy(slot->id, sizeof(slot->id), req->id, strlen(req->id));
        /* The node plan: over every node for a group that may spill and that no domain
         * holds; else inside its domain (a group kept to a domain that does not hold it
         * whole: as many pods as the domain has sets for). */
        plan_make_locked(g, v, slot, free_of, now_ns,
                         !d.whole && req->mode == PLACE_DOMAIN_PREFERRED && !req->has_within);
        /* Chosen afresh (a group not given its domain whole is, at each pod until one is
         * bound): the members' claims carry over to slots on the same nodes, so the pods the
         * scheduler assumed earlier in this cycle keep theirs. */
        for (unsigned k = 0; k < n_old; k++) {
                if (!old_plan[k].uid || old_plan[k].bound)
                        continue;
                for (unsigned j = 0; j < slot->n_plan; j++)
                        if (!slot->plan[j].uid && slot->plan[j].node == old_plan[k].node) {
                                slot->plan[j].uid = old_plan[k].uid;
                                break;
                        }
        }
        *ret = d;
        pthread_mutex_unlock(&g->lock);
        return 1;
}

/* Adds uid to a record's list once; lock held. */
static int
list_add(char (**list)[64], unsigned *n, const char *uid)
{
        for (unsigned k = 0; k < *n; k++)
                if (strcmp((*list)[k], uid) == 0)
                        return 0;
        if (*n >= PLACE_MAX_GROUP_PODS)
                return -E2BIG;
        if (*n % 16 == 0) {
                void *q = reallocarray(*list, *n + 16, sizeof(**list));

                if (!q)
                        return -ENOMEM;
                *list = q;
        }
        str_copy((*list)[*n], sizeof((*list)[0]), uid, strnlen(uid, 63));
        (*n)++;
        return 0;
}

int
place_group_bound(struct place_groups *g, const struct place_group_request *req,
                  const char *uid, const char *node, uint64_t now_ns)
{
        struct group_record *r;
        int x;

        if (!g || !req || !uid || !req->id[0])
                return -EINVAL;
        pthread_mutex_lock(&g->lock);
        r = find_locked(g, req->id, now_ns);
        if (!r) {
                pthread_mutex_unlock(&g->lock);
                return -ENOENT;
        }
        r->expires_ns = now_ns + g->ttl_ns;
        x = list_add(&r->bound, &r->n_bound, uid);
        if (x == 0)
                plan_bound_locked(r, uid, node);
        pthread_mutex_unlock(&g->lock);
        return x;
}

int
place_group_get(struct place_groups *g, const char *id, uint64_t now_ns,
                struct place_group_domain *ret, unsigned *ret_size)
{
        struct group_record *r;

        if (!g || !id)
                return -EINVAL;
        if (!id[0])
                return 0;
        pthread_mutex_lock(&g->lock);
        r = find_locked(g, id, now_ns);
        if (r && ret)
                *ret = r->domain;
        if (r && ret_size)
                *ret_size = r->size;
        pthread_mutex_unlock(&g->lock);
        return r != NULL;
}

int
place_group_restore(struct place_groups *g, const struct place_group_request *req,
                    const struct place_group_domain *d, const char *const *uids, size_t n,
                    uint64_t now_ns)
{
        struct group_record *r, *slot = NULL;
        int x = 0, made = 0;

        if (!g || !req || !d || (n > 0 && !uids) || !req->id[0] || n > PLACE_MAX_GROUP_PODS)
                return -EINVAL;
        pthread_mutex_lock(&g->lock);
        r = find_locked(g, req->id, now_ns);
        if (!r) {
                slot = free_slot_locked(g);
                if (!slot) {
                        pthread_mutex_unlock(&g->lock);
                        return -E2BIG;
                }
                g->n_used++;
                *slot = (struct group_record){ .domain = *d, .size = req->size,
                                               .count = req->count, .require = req->require,
                                               .expires_ns = now_ns + g->ttl_ns };
                str_copy(slot->id, sizeof(slot->id), req->id, strlen(req->id));
                r = slot;
                made = 1;
        }
        for (size_t k = 0; k < n && x == 0; k++)
                x = list_add(&r->bound, &r->n_bound, uids[k]);
        pthread_mutex_unlock(&g->lock);
        return x < 0 ? x : made;
}

int
place_group_check(struct place_groups *g, const struct place_view *v, size_t i,
                  const struct topo_mask *free, const struct topo_mask *set,
                  const char *group_id, const struct topo_mask *const *free_of,
                  uint64_t now_ns, char *ret_group)
{
        struct score_class *cls = place_view_node_class(v, i);
        int x = 0;

        if (!g || !v || !cls || !free || !set)
                return 0;
        pthread_mutex_lock(&g->lock);
        for (size_t k = 0, seen = 0; k < PLACE_MAX_GROUPS && seen < g->n_used && x == 0; k++) {
                struct group_record *r = &g->rec[k];
                struct topo_mask left;
                unsigned need, have;
                ssize_t d;

                if (!r->id[0])
                        continue;
                seen++;
                if (r->expires_ns <= now_ns) {
                        record_drop(g, r);
                        seen--;
                        continue;
                }
                if (group_id && group_id[0] && (strcmp(r->id, group_id) == 0 || gang_backfills(r)))
                        continue;
                if (r->size == 0 || r->n_bound >= r->size)
                        continue; /* nothing known to hold, or nothing left to hold */
                d = place_view_find_domain(v, r->domain.level, r->domain.name);
                if (d < 0 || place_view_node_domain(v, i, r->domain.level) != d)
                        continue;
                need = r->size - r->n_bound;
                left = *free;
                topo_mask_andnot(&left, set);
                /* Only a placement that lowers this node's sets can break the hold. */
                if (place_count_sets(cls, &left, r->count, r->require) ==
                    place_count_sets(cls, free, r->count, r->require))
                        continue;
                have = domain_sets(v, r->domain.level, d, r->count, r->require, i, &left, free_of);
                if (have < need) {
                        x = -EBUSY;
                        if (ret_group)
                                str_copy(ret_group, PLACE_NAME_MAX, r->id, strlen(r->id));
                }
        }
        pthread_mutex_unlock(&g->lock);
        return x;
}

unsigned
place_groups_live(struct place_groups *g, uint64_t now_ns)
{
        unsigned n = 0;

        if (!g)
                return 0;
        pthread_mutex_lock(&g->lock);
        for (size_t k = 0, seen = 0; k < PLACE_MAX_GROUPS && seen < g->n_used; k++)
                if (g->rec[k].id[0]) {
                        seen++;
                        n += g->rec[k].expires_ns > now_ns;
                }
        pthread_mutex_unlock(&g->lock);
        return n;
}
