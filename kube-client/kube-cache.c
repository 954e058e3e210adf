/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster cache: a thread per resource runs LIST, then WATCH from the list's version,
 * forever (PodGroups first find their API version by discovery; none served: no thread
 * work, synced, never an error); 410 (status or ERROR event) or a lost event => relist; a broken stream => resume
 * from the last version; every failure => jittered exponential backoff (an interruptible
 * sleep).  `lock` guards stores, generation, stats and the cached snapshot, held only to
 * apply one event, swap in a relisted store, or copy object pointers for a snapshot (pods
 * stay grouped by node and sorted as they change, so no sort of pods is ever needed).
 * Objects are immutable and refcounted (the store holds one reference, each snapshot one),
 * so a snapshot outlives changes and its cache.  `build_lock` gives one build per
 * generation.  The change callback runs with no lock held.
 */
#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kube-private.h"

#define KUBE_STORE_MIN_BUCKETS 64

/* --- the store: a chained hash of objects keyed by (namespace, name) --------------------- */

/* The pods bound to one node name ("" = unscheduled), sorted by (namespace, name).  The
 * pod store keeps these up to date on every change, so a snapshot is a concatenation of
 * already sorted runs instead of a sort of every pod (see docs/performance.md). */
struct group {
        char *node;
        struct kube__obj **objs;
        size_t n, alloc;
};

struct store {
        struct kube__obj **buckets;
        size_t n_buckets;
        size_t n;
        bool grouped;           /* pods: keep `groups` */
        struct group **groups;  /* sorted by node name */
        size_t n_groups, alloc_groups;
};

static int
obj_key_cmp(const struct kube__obj *a, const struct kube__obj *b)
{
        int r = strcmp(a->key_ns, b->key_ns);
        return r ? r : strcmp(a->key_name, b->key_name);
}

/* The index of the group for node, or where it would go (*found false). */
static size_t
group_find(const struct store *s, const char *node, bool *found)
{
        size_t lo = 0, hi = s->n_groups;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int r = strcmp(s->groups[mid]->node, node);
                if (r == 0) {
                        *found = true;
                        return mid;
                }
                if (r < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = false;
        return lo;
}

/* The index of o in g, or where it would go (*found false). */
static size_t
group_pos(const struct group *g, const struct kube__obj *o, bool *found)
{
        size_t lo = 0, hi = g->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int r = obj_key_cmp(g->objs[mid], o);
                if (r == 0) {
                        *found = true;
                        return mid;
                }
                if (r < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = false;
        return lo;
}

static int
groups_add(struct store *s, struct kube__obj *o)
{
        const char *node = o->pod.node_name;
        struct group *g;
        bool found;
        size_t gi = group_find(s, node, &found), pi;

        if (!found) {
                if (s->n_groups == s->alloc_groups) {
                        size_t na = s->alloc_groups ? s->alloc_groups * 2 : 64;
                        struct group **v = realloc(s->groups, na * sizeof(*v));
                        if (!v)
                                return -ENOMEM;
                        s->groups = v;
                        s->alloc_groups = na;
                }
                g = calloc(1, sizeof(*g));
                if (!g || !(g->node = strdup(node))) {
                        free(g);
                        return -ENOMEM;
                }
                memmove(s->groups + gi + 1, s->groups + gi, (s->n_groups - gi) * sizeof(*s->groups));
                s->groups[gi] = g;
                s->n_groups++;
        }
        g = s->groups[gi];
        if (g->n == g->alloc) {
                size_t na = g->alloc ? g->alloc * 2 : 8;
                struct kube__obj **v = realloc(g->objs, na * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                g->objs = v;
                g->alloc = na;
        }
        pi = group_pos(g, o, &found);
        assert(!found);
        memmove(g->objs + pi + 1, g->objs + pi, (g->n - pi) * sizeof(*g->objs));
        g->objs[pi] = o;
        g->n++;
        return 0;
}

static void
groups_remove(struct store *s, const struct kube__obj *o)
{
        bool found;
        size_t gi = group_find(s, o->pod.node_name, &found), pi;
        struct group *g;

        if (!found)
                return;
        g = s->groups[gi];
        pi = group_pos(g, o, &found);
        if (!found || g->objs[pi] != o)
                return;
        memmove(g->objs + pi, g->objs + pi + 1, (g->n - pi - 1) * sizeof(*g->objs));
        if (--g->n > 0)
                return;
        free(g->objs);
        free(g->node);
        free(g);
        memmove(s->groups + gi, s->groups + gi + 1, (s->n_groups - gi - 1) * sizeof(*s->groups));
        s->n_groups--;
}

static void
store_release(struct store *s)
{
        bool grouped = s->grouped;

        for (size_t i = 0; i < s->n_buckets; i++)
                for (struct kube__obj *o = s->buckets[i], *next; o; o = next) {
                        next = o->next;
                        kube__obj_unref(o);
                }
        for (size_t i = 0; i < s->n_groups; i++) {
                free(s->groups[i]->objs);
                free(s->groups[i]->node);
                free(s->groups[i]);
        }
        free(s->groups);
        free(s->buckets);
        *s = (struct store){ .grouped = grouped };
}

static struct kube__obj **
store_find(struct store *s, const char *ns, const char *name, uint64_t hash)
{
        struct kube__obj **link;

        if (s->n_buckets == 0)
                return NULL;
        for (link = &s->buckets[hash & (s->n_buckets - 1)]; *link; link = &(*link)->next)
                if ((*link)->hash == hash && strcmp((*link)->key_name, name) == 0 &&
                    strcmp((*link)->key_ns, ns) == 0)
                        return link;
        return NULL;
}

static int
store_grow(struct store *s)
{
        size_t nb = s->n_buckets ? s->n_buckets * 2 : KUBE_STORE_MIN_BUCKETS;
        struct kube__obj **b = calloc(nb, sizeof(*b));

        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_buckets; i++)
                for (struct kube__obj *o = s->buckets[i], *next; o; o = next) {
                        next = o->next;
                        o->next = b[o->hash & (nb - 1)];
                        b[o->hash & (nb - 1)] = o;
                }
        free(s->buckets);
        s->buckets = b;
        s->n_buckets = nb;
        return 0;
}

/* Takes ownership of o (its one reference), replacing an object with the same key. */
static int
store_put(struct store *s, struct kube__obj *o)
{
        struct kube__obj **link;

        if (s->n + 1 > s->n_buckets && store_grow(s) < 0) {
                kube__obj_unref(o);
                return -ENOMEM;
        }
        link = store_find(s, o->key_ns, o->key_name, o->hash);
        if (link) {
                struct kube__obj *old = *link;
                if (s->grouped)
                        groups_remove(s, old);
                o->next = old->next;
                *link = o;
                kube__obj_unref(old);
        } else {
                o->next = s->buckets[o->hash & (s->n_buckets - 1)];
                s->buckets[o->hash & (s->n_buckets - 1)] = o;
                s->n++;
        }
        if (s->grouped && groups_add(s, o) < 0) {
                /* Keep the hash and the groups in step: drop the object from both. */
                link = store_find(s, o->key_ns, o->key_name, o->hash);
                *link = o->next;
                s->n--;
                kube__obj_unref(o);
                return -ENOMEM;
        }
        return 0;
}

static bool
store_remove(struct store *s, const char *ns, const char *name)
{
        struct kube__obj **link = store_find(s, ns, name, kube__key_hash(ns, name)), *o;

        if (!link)
                return false;
        o = *link;
        *link = o->next;
        if (s->grouped)
                groups_remove(s, o);
        kube__obj_unref(o);
        s->n--;
        return true;
}

/* --- the cache ---------------------------------------------------------------------- */

struct snap {
        struct kube_snapshot pub;
        unsigned refs; /* atomic */
};

struct resource {
        struct kube_cache *cache;
        uint8_t kind; /* enum kube__kind */
        const char *collection;
        char collection_buf[128]; /* PodGroups: the discovered version's collection */
        char *field_selector;
        pthread_t thread;
        bool started;
        bool synced; /* under cache->lock */
        bool enabled;
};

struct kube_cache {
        struct kube_client *client;
        struct kube_cache_options opts;
        char **gpu_resources; /* NULL-terminated copies */
        char **node_labels;
        char **pod_labels;
        char **pod_annotations;
        struct kube__decode_opts dopts;

        pthread_mutex_t lock;
        pthread_cond_t cond; /* CLOCK_MONOTONIC; stop and synced */
        pthread_mutex_t build_lock;
        atomic_bool stop;
        struct store stores[_KUBE__KIND_MAX];
        uint64_t generation;
        struct snap *snap;      /* the snapshot of `generation`, or older, or NULL */
        struct kube_cache_stats stats;
        struct resource res[_KUBE__KIND_MAX];
        const char *podgroup_api; /* under lock: see kube_cache_stats.podgroup_api */
};

static int64_t
now_ms(clockid_t clock)
{
        struct timespec ts;

        clock_gettime(clock, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define OBJ_OF(p, field) ((struct kube__obj *)((char *)(p) - offsetof(struct kube__obj, field)))

struct kube_snapshot *
kube_snapshot_ref(struct kube_snapshot *s)
{
        if (s)
                __atomic_add_fetch(&((struct snap *)s)->refs, 1, __ATOMIC_RELAXED);
        return s;
}

struct kube_snapshot *
kube_snapshot_unref(struct kube_snapshot *s)
{
        struct snap *sn = (struct snap *)s;

        if (!sn || __atomic_sub_fetch(&sn->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return NULL;
        for (size_t i = 0; i < s->n_nodes; i++)
                kube__obj_unref(OBJ_OF(s->nodes[i], node));
        for (size_t i = 0; i < s->n_pods; i++)
                kube__obj_unref(OBJ_OF(s->pods[i], pod));
        for (size_t i = 0; i < s->n_podgroups; i++)
                kube__obj_unref(OBJ_OF(s->podgroups[i], podgroup));
        free((void *)s->podgroups);
        free((void *)s->nodes);
        free((void *)s->pods);
        free(sn);
        return NULL;
}

static int
node_cmp(const void *a, const void *b)
{
        return strcmp((*(const struct kube_node *const *)a)->name,
                      (*(const struct kube_node *const *)b)->name);
}

const struct kube_node *
kube_snapshot_node(const struct kube_snapshot *s, const char *name)
{
        struct kube_node key = { .name = name };
        const struct kube_node *kp = &key, *const *hit;

        hit = bsearch(&kp, s->nodes, s->n_nodes, sizeof(*s->nodes), node_cmp);
        return hit ? *hit : NULL;
}

size_t
kube_snapshot_pods_on_node(const struct kube_snapshot *s, const char *node, size_t *ret_first)
{
        size_t lo = 0, hi = s->n_pods, first;

        while (lo < hi) { /* the first pod whose node_name >= node */
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(s->pods[mid]->node_name, node) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        first = lo;
        while (lo < s->n_pods && strcmp(s->pods[lo]->node_name, node) == 0)
                lo++;
        if (lo > first)
                *ret_first = first;
        return lo - first;
}

static int
podgroup_cmp(const void *a, const void *b)
{
        const struct kube_podgroup *x = *(const struct kube_podgroup *const *)a,
                                   *y = *(const struct kube_podgroup *const *)b;
        int r = strcmp(x->ns, y->ns);

        return r ? r : strcmp(x->name, y->name);
}

const struct kube_podgroup *
kube_snapshot_podgroup(const struct kube_snapshot *s, const char *ns, const char *name)
{
        struct kube_podgroup key = { .ns = ns, .name = name };
        const struct kube_podgroup *kp = &key, *const *hit;

        if (s->n_podgroups == 0)
                return NULL;
        hit = bsearch(&kp, s->podgroups, s->n_podgroups, sizeof(*s->podgroups), podgroup_cmp);
        return hit ? *hit : NULL;
}

const struct kube_pod *
kube_snapshot_pod(const struct kube_snapshot *s, const char *ns, const char *name)
{
        for (size_t i = 0; i < s->n_pods; i++)
                if (strcmp(s->pods[i]->name, name) == 0 && strcmp(s->pods[i]->ns, ns) == 0)
                        return s->pods[i];
        return NULL;
}

static bool
synced_locked(struct kube_cache *c)
{
        for (size_t i = 0; i < ELEMENTSOF(c->res); i++)
                if (c->res[i].enabled && !c->res[i].synced)
                        return false;
        return true;
}

/* Copies the stores' object pointers (taking references) under the lock, sorts outside. */
static struct snap *
snap_build(struct kube_cache *c)
{
        struct snap *sn = calloc(1, sizeof(*sn));
        const struct kube_node **nodes = NULL;
        const struct kube_pod **pods = NULL;
        const struct kube_podgroup **groups = NULL;
        size_t nn = 0, np = 0, ng = 0;

        if (!sn)
                return NULL;
        pthread_mutex_lock(&c->lock);
        nodes = malloc(MAX(c->stores[KUBE__NODE].n, 1) * sizeof(*nodes));
        pods = malloc(MAX(c->stores[KUBE__POD].n, 1) * sizeof(*pods));
        groups = malloc(MAX(c->stores[KUBE__PODGROUP].n, 1) * sizeof(*groups));
        if (!nodes || !pods || !groups) {
                pthread_mutex_unlock(&c->lock);
                free(nodes);
                free(pods);
                free(groups);
                free(sn);
                return NULL;
        }
        {
                const struct store *s = &c->stores[KUBE__NODE];
                for (size_t i = 0; i < s->n_buckets; i++)
                        for (struct kube__obj *o = s->buckets[i]; o; o = o->next)
                                nodes[nn++] = &kube__obj_ref(o)->node;
        }
        {
                const struct store *s = &c->stores[KUBE__PODGROUP];
                for (size_t i = 0; i < s->n_buckets; i++)
                        for (struct kube__obj *o = s->buckets[i]; o; o = o->next)
                                groups[ng++] = &kube__obj_ref(o)->podgroup;
        }
        /* Pods come out of their groups already in snapshot order. */
        for (size_t g = 0; g < c->stores[KUBE__POD].n_groups; g++) {
                const struct group *grp = c->stores[KUBE__POD].groups[g];
                for (size_t i = 0; i < grp->n; i++)
                        pods[np++] = &kube__obj_ref(grp->objs[i])->pod;
        }
        sn->pub.generation = c->generation;
        sn->pub.synced = synced_locked(c);
        pthread_mutex_unlock(&c->lock);

        qsort(nodes, nn, sizeof(*nodes), node_cmp);
        qsort(groups, ng, sizeof(*groups), podgroup_cmp);
        sn->refs = 1;
        sn->pub.podgroups = groups;
        sn->pub.n_podgroups = ng;
        sn->pub.nodes = nodes;
        sn->pub.n_nodes = nn;
        sn->pub.pods = pods;
        sn->pub.n_pods = np;
        return sn;
}

struct kube_snapshot *
kube_cache_snapshot(struct kube_cache *c)
{
        struct kube_snapshot *s = NULL;
        struct snap *sn, *old = NULL;

        pthread_mutex_lock(&c->build_lock);
        pthread_mutex_lock(&c->lock);
        if (c->snap && c->snap->pub.generation == c->generation &&
            c->snap->pub.synced == synced_locked(c))
                s = kube_snapshot_ref(&c->snap->pub);
        pthread_mutex_unlock(&c->lock);
        if (s) {
                pthread_mutex_unlock(&c->build_lock);
                return s;
        }
        sn = snap_build(c);
        if (sn) {
                pthread_mutex_lock(&c->lock);
                old = c->snap;
                c->snap = (struct snap *)kube_snapshot_ref(&sn->pub);
                pthread_mutex_unlock(&c->lock);
        }
        pthread_mutex_unlock(&c->build_lock);
        kube_snapshot_unref(old ? &old->pub : NULL);
        return sn ? &sn->pub : NULL;
}

uint64_t
kube_cache_generation(struct kube_cache *c)
{
        uint64_t g;

        pthread_mutex_lock(&c->lock);
        g = c->generation;
        pthread_mutex_unlock(&c->lock);
        return g;
}

bool
kube_cache_synced(struct kube_cache *c)
{
        bool s;

        pthread_mutex_lock(&c->lock);
        s = synced_locked(c);
        pthread_mutex_unlock(&c->lock);
        return s;
}

static struct timespec
deadline_in(unsigned ms)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
        }
        return ts;
}

int
kube_cache_wait_synced(struct kube_cache *c, unsigned timeout_ms)
{
        struct timespec until = deadline_in(timeout_ms);
        int r = 0;

        pthread_mutex_lock(&c->lock);
        while (!synced_locked(c) && r != ETIMEDOUT)
                r = pthread_cond_timedwait(&c->cond, &c->lock, &until);
        r = synced_locked(c) ? 0 : -ETIMEDOUT;
        pthread_mutex_unlock(&c->lock);
        return r;
}

void
kube_cache_stats(struct kube_cache *c, struct kube_cache_stats *ret)
{
        pthread_mutex_lock(&c->lock);
        *ret = c->stats;
        ret->n_nodes = c->stores[KUBE__NODE].n;
        ret->n_pods = c->stores[KUBE__POD].n;
        ret->n_podgroups = c->stores[KUBE__PODGROUP].n;
        ret->podgroup_api = c->podgroup_api;
        pthread_mutex_unlock(&c->lock);
}

static void
changed(struct kube_cache *c, uint64_t gen)
{
        if (c->opts.on_change)
                c->opts.on_change(gen, c->opts.userdata);
}

/* Sleeps ms unless stopped first; true when stopped. */
static bool
sleep_or_stop(struct kube_cache *c, unsigned ms)
{
        struct timespec until = deadline_in(ms);
        int r = 0;

        pthread_mutex_lock(&c->lock);
        while (!atomic_load(&c->stop) && r != ETIMEDOUT)
                r = pthread_cond_timedwait(&c->cond, &c->lock, &until);
        pthread_mutex_unlock(&c->lock);
        return atomic_load(&c->stop);
}

static int
decode(struct resource *res, const cJSON *o, struct kube__obj **ret)
{
        const char *why = NULL;

        switch (res->kind) {
        case KUBE__NODE:
                return kube__decode_node(o, &res->cache->dopts, ret, &why);
        case KUBE__POD:
                return kube__decode_pod(o, &res->cache->dopts, ret, &why);
        default:
                return kube__decode_podgroup(o, ret, &why);
        }
}

static int
list_item(const cJSON *item, void *userdata)
{
        struct { struct resource *res; struct store *store; } *ctx = userdata;
        struct kube__obj *o = NULL;
        int r;

        r = decode(ctx->res, item, &o);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                pthread_mutex_lock(&ctx->res->cache->lock);
                ctx->res->cache->stats.decode_errors++;
                pthread_mutex_unlock(&ctx->res->cache->lock);
                return 0; /* one bad object does not stop the LIST */
        }
        return store_put(ctx->store, o);
}

static int
watch_item(enum kube_event_type type, const cJSON *object, void *userdata)
{
        struct resource *res = userdata;
        struct kube_cache *c = res->cache;
        struct kube__obj *o = NULL;
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(object, "metadata");
        const cJSON *ns = cJSON_GetObjectItemCaseSensitive(meta, "namespace");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
        int64_t created = -1;
        uint64_t gen;
        int r = 0;

        if (type == KUBE_EVENT_BOOKMARK) {
                pthread_mutex_lock(&c->lock);
                c->stats.events++;
                c->stats.bookmarks++;
                pthread_mutex_unlock(&c->lock);
                return 0;
        }
        if (type != KUBE_EVENT_DELETED) {
                r = decode(res, object, &o);
                if (r == -ENOMEM)
                        return r;
                if (type == KUBE_EVENT_ADDED)
                        created = kube__creation_ms(object);
        }
        pthread_mutex_lock(&c->lock);
        c->stats.events++;
        if (created >= 0)
                c->stats.last_event_lag_ms = (uint64_t)MAX(now_ms(CLOCK_REALTIME) - created, 0);
        if (o)
                r = store_put(&c->stores[res->kind], o);
        else if (cJSON_IsString(name))
                /* DELETED, or an object that no longer decodes: drop our copy. */
                store_remove(&c->stores[res->kind],
                             res->kind != KUBE__NODE && cJSON_IsString(ns) ? ns->valuestring : "",
                             name->valuestring);
        if (r < 0 || (type != KUBE_EVENT_DELETED && !o))
                c->stats.decode_errors++;
        gen = ++c->generation;
        pthread_mutex_unlock(&c->lock);
        changed(c, gen);
        return r == -ENOMEM ? r : 0;
}

static unsigned
jitter(unsigned ms)
{
        /* +-25%: spreads the reconnects of many clients after a server restart. */
        unsigned span = ms / 2;
        return ms - ms / 4 + kube__jitter(span);
}

static void
note_error(struct kube_cache *c, int r)
{
        pthread_mutex_lock(&c->lock);
        c->stats.errors++;
        c->stats.last_error = r;
        pthread_mutex_unlock(&c->lock);
}

/* API discovery for PodGroups: the first of KUBE_PODGROUP_VERSIONS whose resource list
 * names "podgroups" (a version the server does not serve answers 404).  Returns 1 and sets
 * the collection, 0 when the server serves none, or -errno (retried after a backoff). */
static int
discover_podgroups(struct resource *res)
{
        static const char *const versions[] = KUBE_PODGROUP_VERSIONS;
        static const char *const apis[] = {
                KUBE_PODGROUP_GROUP "/v1beta1", KUBE_PODGROUP_GROUP "/v1alpha3",
                KUBE_PODGROUP_GROUP "/v1alpha2",
        };
        _Static_assert(ELEMENTSOF(versions) == ELEMENTSOF(apis), "one api string per version");

        for (size_t i = 0; i < ELEMENTSOF(versions); i++) {
                CLEANUP(cJSON_Deletep) cJSON *list = NULL;
                struct kube_error err;
                const cJSON *r;
                char path[96];
                int x;

                snprintf(path, sizeof(path), "/apis/%s/%s", KUBE_PODGROUP_GROUP, versions[i]);
                x = kube_get(res->cache->client, path, &list, &err);
                if (x == -ENOENT)
                        continue;
                if (x < 0)
                        return x;
                cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(list, "resources")) {
                        const cJSON *name = cJSON_GetObjectItemCaseSensitive(r, "name");

                        if (!cJSON_IsString(name) || strcmp(name->valuestring, "podgroups") != 0)
                                continue;
                        snprintf(res->collection_buf, sizeof(res->collection_buf),
                                 "%s/podgroups", path);
                        res->collection = res->collection_buf;
                        pthread_mutex_lock(&res->cache->lock);
                        res->cache->podgroup_api = apis[i];
                        pthread_mutex_unlock(&res->cache->lock);
                        return 1;
                }
        }
        return 0;
}

static void *
resource_thread(void *userdata)
{
        struct resource *res = userdata;
        struct kube_cache *c = res->cache;
        unsigned backoff = c->opts.backoff_initial_ms;
        unsigned page_size = c->opts.page_size ? c->opts.page_size : KUBE_LIST_PAGE_DEFAULT;
        bool need_list = true, first_list = true, first_watch = true;
        bool need_discovery = res->kind == KUBE__PODGROUP;
        CLEANUP(freep) char *rv = NULL;
        int r;

        while (!atomic_load(&c->stop)) {
                struct kube_selector sel = { .field = res->field_selector };
                struct kube_error err;

                if (need_discovery) {
                        r = discover_podgroups(res);
                        if (r < 0) {
                                note_error(c, r);
                                if (sleep_or_stop(c, jitter(backoff)))
                                        break;
                                backoff = MIN(backoff * 2, c->opts.backoff_max_ms);
                                continue;
                        }
                        if (r == 0) {
                                /* Not served: nothing to watch, and nothing missing. */
                                uint64_t gen;

                                pthread_mutex_lock(&c->lock);
                                c->podgroup_api = "";
                                res->synced = true;
                                gen = ++c->generation;
                                pthread_cond_broadcast(&c->cond);
                                pthread_mutex_unlock(&c->lock);
                                changed(c, gen);
                                break;
                        }
                        need_discovery = false;
                        backoff = c->opts.backoff_initial_ms;
                }
                if (need_list) {
                        struct store fresh = { .grouped = res->kind == KUBE__POD };
                        struct { struct resource *res; struct store *store; } ctx = { res, &fresh };
                        uint64_t gen;

                        r = kube_list(c->client, res->collection, &sel, page_size, list_item,
                                      &ctx, &rv, &err);
                        if (r == -E2BIG && page_size > 1)
                                page_size /= 2; /* a page over KUBE_MAX_BODY: smaller pages */
                        if (r == -ENOENT && res->kind == KUBE__PODGROUP)
                                need_discovery = true; /* the version went away: look again */
                        if (r == -EPERM && res->kind == KUBE__PODGROUP && !res->synced) {
                                /* Not allowed to list them (RBAC without podgroups): the
                                 * cache works without, so readiness does not wait on it;
                                 * last_error says -EPERM and the LIST is retried. */
                                pthread_mutex_lock(&c->lock);
                                res->synced = true;
                                pthread_cond_broadcast(&c->cond);
                                pthread_mutex_unlock(&c->lock);
                        }
                        if (r < 0) {
                                store_release(&fresh);
                                note_error(c, r);
                                if (sleep_or_stop(c, jitter(backoff)))
                                        break;
                                backoff = MIN(backoff * 2, c->opts.backoff_max_ms);
                                continue;
                        }
                        pthread_mutex_lock(&c->lock);
                        struct store old = c->stores[res->kind];
                        c->stores[res->kind] = fresh;
                        if (!first_list)
                                c->stats.relists++;
                        res->synced = true;
                        gen = ++c->generation;
                        pthread_cond_broadcast(&c->cond);
                        pthread_mutex_unlock(&c->lock);
                        store_release(&old);
                        changed(c, gen);
                        first_list = false;
                        need_list = false;
                        backoff = c->opts.backoff_initial_ms;
                }

                struct kube_watch_options wo = {
                        .resource_version = rv,
                        .selector = sel,
                        .timeout_seconds = c->opts.watch_timeout_seconds,
                        .cancel = &c->stop,
                };
                int64_t started = now_ms(CLOCK_MONOTONIC);
                if (!first_watch) {
                        pthread_mutex_lock(&c->lock);
                        c->stats.reconnects++;
                        pthread_mutex_unlock(&c->lock);
                }
                first_watch = false;
                r = kube_watch(c->client, res->collection, &wo, watch_item, res, &rv, &err);
                if (r == -ECANCELED || atomic_load(&c->stop))
                        break;
                if (r > 0 || (r == 0 && now_ms(CLOCK_MONOTONIC) - started >= 1000)) {
                        /* A healthy stream that the server ended: resume at once. */
                        backoff = c->opts.backoff_initial_ms;
                        continue;
                }
                if (r == -ESTALE) {
                        /* Our version was compacted away: only a relist converges. */
                        need_list = true;
                        continue;
                }
                if (r == -E2BIG || r == -EBADMSG)
                        need_list = true; /* an event was lost: relist to converge */
                if (r < 0)
                        note_error(c, r);
                /* Quick clean ends, errors: back off so we never busy-loop. */
                if (sleep_or_stop(c, jitter(backoff)))
                        break;
                backoff = MIN(backoff * 2, c->opts.backoff_max_ms);
        }
        return NULL;
}

void
kube_cache_options_init(struct kube_cache_options *o)
{
        *o = (struct kube_cache_options){
                .watch_nodes = true,
                .watch_pods = true,
        };
}

static char **
strv_copy(const char *const *v, size_t max, const char *fallback)
{
        size_t n = 0;
        char **copy;

        while (v && v[n])
                n++;
        if (n > max)
                return NULL;
        copy = calloc(MAX(n, 1) + 1, sizeof(char *));
        if (!copy)
                return NULL;
        if (n == 0 && fallback && !(copy[0] = strdup(fallback)))
                goto fail;
        for (size_t i = 0; i < n; i++)
                if (!(copy[i] = strdup(v[i])))
                        goto fail;
        return copy;
fail:
        for (size_t i = 0; copy[i]; i++)
                free(copy[i]);
        free(copy);
        return NULL;
}

static void
strv_free(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

/* The option lists, copied (the caller's may go away) into c and its decode options.  0,
 * -EINVAL (a list over its cap), -ENOMEM. */
static int
copy_lists(struct kube_cache *c)
{
        struct {
                char ***copy;
                const char *const **list;
                size_t max;
                const char *fallback;
        } lists[] = {
                { &c->gpu_resources, &c->opts.gpu_resources, KUBE_MAX_GPU_RESOURCES,
                  KUBE_GPU_RESOURCE_DEFAULT },
                { &c->node_labels, &c->opts.node_labels, KUBE_MAX_KEPT_LABELS, NULL },
                { &c->pod_labels, &c->opts.pod_labels, KUBE_MAX_KEPT_LABELS, NULL },
                { &c->pod_annotations, &c->opts.pod_annotations, KUBE_MAX_KEPT_LABELS, NULL },
        };
        int r = 0;

        for (size_t i = 0; i < ELEMENTSOF(lists); i++) {
                size_t n = 0;

                while (*lists[i].list && (*lists[i].list)[n])
                        n++;
                *lists[i].copy = strv_copy(*lists[i].list, lists[i].max, lists[i].fallback);
                if (!*lists[i].copy && r == 0)
                        r = n > lists[i].max ? -EINVAL : -ENOMEM;
                *lists[i].list = NULL;
        }
        c->dopts = (struct kube__decode_opts){
                .gpu_resources = (const char *const *)c->gpu_resources,
                .node_labels = (const char *const *)c->node_labels,
                .node_labels_all = c->opts.node_labels_all,
                .pod_labels = (const char *const *)c->pod_labels,
                .pod_annotations = (const char *const *)c->pod_annotations,
        };
        return r;
}

int
kube_cache_new(struct kube_client *client, const struct kube_cache_options *opts,
               struct kube_cache **ret)
{
        struct kube_cache *c;
        pthread_condattr_t ca;
        int r = 0;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->client = client;
        if (opts)
                c->opts = *opts;
        else
                kube_cache_options_init(&c->opts);
        if (!c->opts.backoff_initial_ms)
                c->opts.backoff_initial_ms = 200;
        if (!c->opts.backoff_max_ms)
                c->opts.backoff_max_ms = 30000;
        c->opts.backoff_max_ms = MAX(c->opts.backoff_max_ms, c->opts.backoff_initial_ms);
        pthread_mutex_init(&c->lock, NULL);
        pthread_mutex_init(&c->build_lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&c->cond, &ca);
        pthread_condattr_destroy(&ca);
        c->stores[KUBE__POD].grouped = true;

        r = copy_lists(c);
        c->res[KUBE__NODE] = (struct resource){
                .cache = c,
                .kind = KUBE__NODE,
                .collection = "/api/v1/nodes",
                .enabled = c->opts.watch_nodes,
                .field_selector = opts && opts->node_field_selector
                                          ? strdup(opts->node_field_selector) : NULL,
        };
        c->res[KUBE__POD] = (struct resource){
                .cache = c,
                .kind = KUBE__POD,
                .collection = "/api/v1/pods",
                .enabled = c->opts.watch_pods,
                .field_selector = opts && opts->pod_field_selector
                                          ? strdup(opts->pod_field_selector) : NULL,
        };
        c->res[KUBE__PODGROUP] = (struct resource){
                .cache = c,
                .kind = KUBE__PODGROUP,
                .collection = NULL, /* set by discovery */
                .enabled = c->opts.watch_podgroups,
        };
        c->opts.node_field_selector = c->opts.pod_field_selector = NULL;
        if (r == 0 &&
            ((opts && opts->node_field_selector && !c->res[KUBE__NODE].field_selector) ||
             (opts && opts->pod_field_selector && !c->res[KUBE__POD].field_selector)))
                r = -ENOMEM;
        if (r < 0) {
                kube_cache_free(c);
                return r;
        }
        for (size_t i = 0; i < ELEMENTSOF(c->res); i++) {
                if (!c->res[i].enabled)
                        continue;
                r = -pthread_create(&c->res[i].thread, NULL, resource_thread, &c->res[i]);
                if (r < 0) {
                        kube_cache_free(c);
                        return r;
                }
                c->res[i].started = true;
        }
        *ret = c;
        return 0;
}

struct kube_cache *
kube_cache_free(struct kube_cache *c)
{
        if (!c)
                return NULL;
        pthread_mutex_lock(&c->lock);
        atomic_store(&c->stop, true);
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
        for (size_t i = 0; i < ELEMENTSOF(c->res); i++) {
                if (c->res[i].started)
                        pthread_join(c->res[i].thread, NULL);
                free(c->res[i].field_selector);
        }
        for (size_t i = 0; i < ELEMENTSOF(c->stores); i++)
                store_release(&c->stores[i]);
        kube_snapshot_unref(c->snap ? &c->snap->pub : NULL);
        strv_free(c->gpu_resources);
        strv_free(c->node_labels);
        strv_free(c->pod_labels);
        strv_free(c->pod_annotations);
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->lock);
        pthread_mutex_destroy(&c->build_lock);
        free(c);
        return NULL;
}
