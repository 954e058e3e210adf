/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reservation ledger: (pod UID, node) -> GPU set, tentative (prioritize, short TTL) or
 * committed (bind, held until the cluster view shows the pod or a long TTL passes).  The
 * only mutable state of the extender core, behind one mutex; time is a parameter.
 * A committed entry outlives the first view that shows its pod: requests still working on an
 * older view (taken before the bind) must go on seeing the GPUs as held, or they would hand
 * them out again.  So prune() only marks the entry with that view's generation; a view of
 * that generation or newer ignores it (it shows the pod, or its later deletion), older views
 * subtract it, and the entry goes once LEDGER_SEEN_GRACE_NS has passed, far longer than any
 * request (kube-scheduler's extender timeout is 5 s).
 * Invariant: a pod has at most one entry, and a committed set never overlaps another live
 * entry's set on the same node (ext_bind checks it under this lock).  Entries hang off a
 * fixed table of node-name buckets so lookups for one node cost its entries only, and are
 * chained again by UID hash so a pod's own entry is found without walking them all
 * (committed entries stay LEDGER_SEEN_GRACE_NS after their view: under a stream of
 * bindings that is thousands, and every prioritize and bind replaces its pod's entry).
 * Beside the holds, the ledger owns the two other things that outlive a request, each a
 * bounded ring under its own small lock (never taken with the holds' lock): the decoded
 * requests that filter and prioritize saw (bind names only the pod) and the preemption
 * grants (whose victims the view has not yet seen leave).
 */
#include "ext-core-private.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "str.h"

#define LEDGER_BUCKETS 1024
#define LEDGER_SEEN_GRACE_NS (60ull * 1000000000ull)

struct entry {
        struct entry *next;       /* in its node bucket */
        struct entry *uid_next;   /* in its UID bucket */
        uint64_t uid_hash;        /* uid_hash(uid) */
        char uid[EXT_UID_MAX];
        char node[EXT_NAME_MAX];
        uint32_t node_hash;       /* ext__name_hash(node) */
        struct topo_mask set;
        enum ext_hold hold;
        uint64_t expires_ns;
        uint64_t seen_gen; /* generation of the first view showing the pod; 0: none yet */
        uint64_t seen_ns;  /* when that view was pruned with */
        /* A reservation of a pod of this group ("": none) holds nothing: a gang member's
         * pick, which bind takes if the scheduler chose that node too (see
         * ext__ledger_put_group_locked; placement/'s group hold keeps the gang's room). */
        char group[PLACE_NAME_MAX];
};

struct grant {
        char uid[EXT_UID_MAX];
        char node[EXT_NAME_MAX];
        struct topo_mask gpus;
        uint64_t until_ns;
};

struct ext_ledger {
        pthread_mutex_t lock;
        uint64_t reservation_ttl_ns;
        uint64_t committed_ttl_ns;
        unsigned n_entries;
        struct entry *buckets[LEDGER_BUCKETS];
        struct entry *by_uid[LEDGER_BUCKETS]; /* the same entries, by uid_hash */
        /* The rings, under ring_lock: oldest evicted.  request_hash[i] is the hash of
         * requests[i]'s UID (0 for an empty slot): a scan (every filter, prioritize and
         * bind makes one) reads one 8 KiB array and compares strings only where the hashes
         * match, instead of following 1,024 pointers to separately allocated requests. */
        pthread_mutex_t ring_lock;
        struct ext_request *requests[EXT_MAX_PENDING];
        uint64_t request_hash[EXT_MAX_PENDING];
        unsigned request_next;
        struct grant grants[EXT_MAX_GRANTS];
        unsigned grant_next;
        struct place_groups *groups; /* group domains and holds (placement/), own lock */
};

static unsigned
bucket_of(const char *node)
{
        return ext__name_hash(node) % LEDGER_BUCKETS;
}

struct ext_ledger *
ext_ledger_new(const struct ext_config *cfg)
{
        struct ext_ledger *l = calloc(1, sizeof(*l));

        if (!l)
                return NULL;
        l->groups = place_groups_new(cfg->group_ttl_ns);
        if (!l->groups) {
                free(l);
                return NULL;
        }
        pthread_mutex_init(&l->lock, NULL);
        pthread_mutex_init(&l->ring_lock, NULL);
        l->reservation_ttl_ns = cfg->reservation_ttl_ns;
        l->committed_ttl_ns = cfg->committed_ttl_ns;
        return l;
}

struct ext_ledger *
ext_ledger_free(struct ext_ledger *l)
{
        if (!l)
                return NULL;
        for (size_t b = 0; b < LEDGER_BUCKETS; b++)
                for (struct entry *e = l->buckets[b], *next; e; e = next) {
                        next = e->next;
                        free(e);
                }
        for (size_t i = 0; i < EXT_MAX_PENDING; i++)
                free(l->requests[i]);
        place_groups_free(l->groups);
        pthread_mutex_destroy(&l->lock);
        pthread_mutex_destroy(&l->ring_lock);
        free(l);
        return NULL;
}

void
ext__ledger_lock(struct ext_ledger *l)
{
        pthread_mutex_lock(&l->lock);
}

void
ext__ledger_unlock(struct ext_ledger *l)
{
        pthread_mutex_unlock(&l->lock);
}

bool
ext__ledger_maybe_empty(struct ext_ledger *l)
{
        return __atomic_load_n(&l->n_entries, __ATOMIC_RELAXED) == 0;
}

static bool
live(const struct entry *e, uint64_t now_ns)
{
        return now_ns < e->expires_ns;
}

/* A gang member's tentative pick: it holds nothing. */
static bool
holds_nothing(const struct entry *e)
{
        return e->hold == EXT_HOLD_RESERVED && e->group[0];
}

/* Whether e's GPUs count against a request of uid (NULL: anyone) on a view of view_gen. */
static bool
counts_against(const struct entry *e, const char *uid, uint64_t view_gen, uint64_t now_ns)
{
        if (!live(e, now_ns) || holds_nothing(e))
                return false;
        /* The view already accounts for this pod (or its deletion). */
        if (e->seen_gen != 0 && view_gen >= e->seen_gen)
                return false;
        return !uid || strcmp(e->uid, uid) != 0;
}

/* The GPUs held on node (of hash ext__name_hash(node)) against uid; lock held. */
static void
held_in_bucket(struct ext_ledger *l, uint32_t hash, const char *node, const char *uid,
               uint64_t view_gen, uint64_t now_ns, struct topo_mask *ret)
{
        topo_mask_clear(ret);
        if (l->n_entries == 0)
                return;
        for (const struct entry *e = l->buckets[hash % LEDGER_BUCKETS]; e; e = e->next)
                if (e->node_hash == hash && strcmp(e->node, node) == 0 &&
                    counts_against(e, uid, view_gen, now_ns))
                        topo_mask_or(ret, &e->set);
}

int
ext__ledger_holds_locked(struct ext_ledger *l, const char *uid, uint64_t view_gen,
                         uint64_t now_ns, struct ext_held *ret, size_t max)
{
        size_t n = 0;

        if (l->n_entries > 4 * max)
                return -E2BIG; /* not worth the walk: most of them would count */
        for (size_t b = 0; b < LEDGER_BUCKETS; b++)
                for (const struct entry *e = l->buckets[b]; e; e = e->next) {
                        if (!counts_against(e, uid, view_gen, now_ns))
                                continue;
                        if (n == max)
                                return -E2BIG;
                        ret[n++] = (struct ext_held){ .node_hash = e->node_hash,
                                                      .node = e->node, .set = e->set };
                }
        return (int)n;
}

void
ext__ledger_held_locked(struct ext_ledger *l, const char *node, const char *uid,
                        uint64_t view_gen, uint64_t now_ns, struct topo_mask *ret)
{
        held_in_bucket(l, ext__name_hash(node), node, uid, view_gen, now_ns, ret);
}

void
ext__ledger_held_node_locked(struct ext_ledger *l, const struct ext_node *node,
                             const char *uid, uint64_t view_gen, uint64_t now_ns,
                             struct topo_mask *ret)
{
        held_in_bucket(l, node->name_hash, node->name, uid, view_gen, now_ns, ret);
}

const struct topo_mask *
ext__ledger_find_locked(struct ext_ledger *l, const char *uid, const char *node,
                        enum ext_hold hold, uint64_t now_ns)
{
        for (const struct entry *e = l->buckets[bucket_of(node)]; e; e = e->next)
                if (e->hold == hold && live(e, now_ns) && strcmp(e->uid, uid) == 0 &&
                    strcmp(e->node, node) == 0)
                        return &e->set;
        return NULL;
}

/* A pod UID's hash, for the entries' UID chains and the request ring: never 0, which marks
 * the ring's empty slots. */
static uint64_t
uid_hash(const char *uid)
{
        uint64_t h = str_hash_fnv1a(14695981039346656037ull, uid);

        return h ? h : 1;
}

/* Takes e out of its UID bucket; lock held.  (Its node bucket is the caller's.) */
static void
unlink_uid(struct ext_ledger *l, const struct entry *e)
{
        for (struct entry **pp = &l->by_uid[e->uid_hash % LEDGER_BUCKETS]; *pp;
             pp = &(*pp)->uid_next)
                if (*pp == e) {
                        *pp = e->uid_next;
                        return;
                }
}

/* Removes the entries for which drop() is true; lock held. */
static void
remove_if(struct ext_ledger *l, bool (*drop)(struct entry *e, const void *arg),
          const void *arg)
{
        for (size_t b = 0; b < LEDGER_BUCKETS; b++) {
                struct entry **pp = &l->buckets[b];

                while (*pp) {
                        struct entry *e = *pp;

                        if (drop(e, arg)) {
                                *pp = e->next;
                                unlink_uid(l, e);
                                free(e);
                                __atomic_sub_fetch(&l->n_entries, 1, __ATOMIC_RELAXED);
                        } else
                                pp = &e->next;
                }
        }
}

/* Removes uid's entries (one, by the invariant) through the UID buckets; lock held. */
static void
remove_uid(struct ext_ledger *l, const char *uid)
{
        uint64_t h = uid_hash(uid);
        struct entry **up = &l->by_uid[h % LEDGER_BUCKETS];

        while (*up) {
                struct entry *e = *up;

                if (e->uid_hash != h || strcmp(e->uid, uid) != 0) {
                        up = &e->uid_next;
                        continue;
                }
                *up = e->uid_next;
                for (struct entry **pp = &l->buckets[e->node_hash % LEDGER_BUCKETS]; *pp;
                     pp = &(*pp)->next)
                        if (*pp == e) {
                                *pp = e->next;
                                break;
                        }
                free(e);
                __atomic_sub_fetch(&l->n_entries, 1, __ATOMIC_RELAXED);
        }
}

int
ext__ledger_put_locked(struct ext_ledger *l, const char *uid, const char *node,
                       const struct topo_mask *set, enum ext_hold hold, uint64_t now_ns)
{
        return ext__ledger_put_group_locked(l, uid, node, set, hold, NULL, now_ns);
}

int
ext__ledger_put_group_locked(struct ext_ledger *l, const char *uid, const char *node,
                             const struct topo_mask *set, enum ext_hold hold, const char *group,
                             uint64_t now_ns)
{
        struct entry *e;
        unsigned b;

        if (l->n_entries > 0)
                remove_uid(l, uid);
        if (!set)
                return 0;
        if (l->n_entries >= EXT_LEDGER_MAX_ENTRIES)
                return -E2BIG;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        str_copy(e->uid, sizeof(e->uid), uid, strlen(uid));
        str_copy(e->node, sizeof(e->node), node, strlen(node));
        e->node_hash = ext__name_hash(e->node);
        e->set = *set;
        e->hold = hold;
        if (group && hold == EXT_HOLD_RESERVED)
                str_copy(e->group, sizeof(e->group), group, strnlen(group, PLACE_NAME_MAX - 1));
        e->expires_ns = now_ns + (hold == EXT_HOLD_COMMITTED ? l->committed_ttl_ns
                                                             : l->reservation_ttl_ns);
        b = e->node_hash % LEDGER_BUCKETS;
        e->next = l->buckets[b];
        l->buckets[b] = e;
        e->uid_hash = uid_hash(e->uid);
        e->uid_next = l->by_uid[e->uid_hash % LEDGER_BUCKETS];
        l->by_uid[e->uid_hash % LEDGER_BUCKETS] = e;
        __atomic_add_fetch(&l->n_entries, 1, __ATOMIC_RELAXED);
        return 0;
}

void
ext_ledger_held(struct ext_ledger *l, const char *node, const char *uid, uint64_t now_ns,
                struct topo_mask *ret)
{
        ext__ledger_lock(l);
        ext__ledger_held_locked(l, node, uid, 0, now_ns, ret);
        ext__ledger_unlock(l);
}

struct prune_arg {
        const struct ext_cluster *c;
        uint64_t now_ns;
};

/* Marks committed entries that the view shows (see the top of the file) and tells which
 * entries can go: expired ones, and marked ones past the grace period. */
static bool
drop_stale(struct entry *e, const void *arg)
{
        const struct prune_arg *a = arg;
        const struct ext_pod *p;

        if (!live(e, a->now_ns))
                return true;
        if (e->hold != EXT_HOLD_COMMITTED)
                return false;
        if (e->seen_gen != 0)
                return a->now_ns - e->seen_ns > LEDGER_SEEN_GRACE_NS;
        if (!a->c)
                return false;
        /* The view shows the pod on that node: its own GPUs count as used there. */
        p = ext_cluster_find_pod(a->c, e->uid);
        if (p && p->node >= 0 && strcmp(a->c->nodes[p->node].name, e->node) == 0) {
                e->seen_gen = a->c->generation ? a->c->generation : 1;
                e->seen_ns = a->now_ns;
        }
        return false;
}

void
ext_ledger_prune(struct ext_ledger *l, const struct ext_cluster *c, uint64_t now_ns)
{
        struct prune_arg a = { .c = c, .now_ns = now_ns };

        ext__ledger_lock(l);
        if (l->n_entries > 0)
                remove_if(l, drop_stale, &a);
        ext__ledger_unlock(l);
}

void
ext_ledger_release(struct ext_ledger *l, const char *uid)
{
        ext__ledger_lock(l);
        if (l->n_entries > 0)
                remove_uid(l, uid);
        ext__ledger_unlock(l);
}

void
ext_ledger_stats(struct ext_ledger *l, uint64_t now_ns, struct ext_ledger_stats *ret)
{
        struct ext_ledger_stats s = { 0 };

        ext__ledger_lock(l);
        for (size_t b = 0; b < LEDGER_BUCKETS && l->n_entries > 0; b++)
                for (const struct entry *e = l->buckets[b]; e; e = e->next) {
                        /* Marked entries are in the current view already (as allocated). */
                        if (!live(e, now_ns) || e->seen_gen != 0)
                                continue;
                        if (e->hold == EXT_HOLD_COMMITTED)
                                s.committed++;
                        else
                                s.reserved++;
                        if (!holds_nothing(e))
                                s.gpus_held += topo_mask_count(&e->set);
                }
        ext__ledger_unlock(l);
        *ret = s;
}

/* --- the rings: requests awaiting bind, preemption grants ------------------------------- */

/* The ring slot at or after from holding uid (of hash h), EXT_MAX_PENDING when none; ring
 * lock held. */
static size_t
find_request_locked(const struct ext_ledger *l, const char *uid, uint64_t h, size_t from)
{
        for (size_t i = from; i < EXT_MAX_PENDING; i++)
                if (l->request_hash[i] == h && strcmp(l->requests[i]->uid, uid) == 0)
                        return i;
        return EXT_MAX_PENDING;
}

int
ext_ledger_remember_request(struct ext_ledger *l, const struct ext_request *req)
{
        struct ext_request *copy;
        uint64_t h;
        size_t i;

        if (!req->uid[0])
                return -EINVAL;
        copy = malloc(sizeof(*copy));
        if (!copy)
                return -ENOMEM;
        *copy = *req;
        h = uid_hash(req->uid);
        pthread_mutex_lock(&l->ring_lock);
        i = find_request_locked(l, req->uid, h, 0);
        if (i == EXT_MAX_PENDING)
                i = l->request_next++ % EXT_MAX_PENDING;
        free(l->requests[i]);
        l->requests[i] = copy;
        l->request_hash[i] = h;
        pthread_mutex_unlock(&l->ring_lock);
        return 0;
}

int
ext_ledger_lookup_request(struct ext_ledger *l, const char *uid, struct ext_request *ret)
{
        uint64_t h = uid_hash(uid);
        int r = -ENOENT;
        size_t i;

        pthread_mutex_lock(&l->ring_lock);
        i = find_request_locked(l, uid, h, 0);
        if (i < EXT_MAX_PENDING) {
                *ret = *l->requests[i];
                r = 0;
        }
        pthread_mutex_unlock(&l->ring_lock);
        return r;
}

void
ext_ledger_forget_request(struct ext_ledger *l, const char *uid)
{
        uint64_t h = uid_hash(uid);

        pthread_mutex_lock(&l->ring_lock);
        for (size_t i = find_request_locked(l, uid, h, 0); i < EXT_MAX_PENDING;
             i = find_request_locked(l, uid, h, i + 1)) {
                free(l->requests[i]);
                l->requests[i] = NULL;
                l->request_hash[i] = 0;
        }
        pthread_mutex_unlock(&l->ring_lock);
}

void
ext_ledger_grant(struct ext_ledger *l, const char *uid, const char *node,
                 const struct topo_mask *gpus, uint64_t now_ns)
{
        struct grant *g = NULL;

        if (!uid[0])
                return;
        pthread_mutex_lock(&l->ring_lock);
        for (size_t i = 0; i < EXT_MAX_GRANTS && !g; i++)
                if (strcmp(l->grants[i].uid, uid) == 0 && strcmp(l->grants[i].node, node) == 0)
                        g = &l->grants[i];
        if (!g)
                g = &l->grants[l->grant_next++ % EXT_MAX_GRANTS];
        *g = (struct grant){ .gpus = *gpus, .until_ns = now_ns + EXT_GRANT_NS };
        (void)str_copy(g->uid, sizeof(g->uid), uid, strlen(uid));
        (void)str_copy(g->node, sizeof(g->node), node, strlen(node));
        pthread_mutex_unlock(&l->ring_lock);
}

bool
ext_ledger_grant_waiting(struct ext_ledger *l, const char *uid, const struct ext_node *n,
                         uint64_t now_ns)
{
        bool waiting = false;

        if (!uid[0] || !n)
                return false;
        pthread_mutex_lock(&l->ring_lock);
        for (size_t i = 0; i < EXT_MAX_GRANTS && !waiting; i++) {
                const struct grant *g = &l->grants[i];

                if (g->until_ns <= now_ns || strcmp(g->uid, uid) != 0 || strcmp(g->node, n->name) != 0)
                        continue;
                waiting = topo_mask_intersects(&g->gpus, &n->used);
        }
        pthread_mutex_unlock(&l->ring_lock);
        return waiting;
}

struct place_groups *
ext__ledger_groups(struct ext_ledger *l)
{
        return l ? l->groups : NULL;
}
