/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Live mode: the cluster view from the API server through kube-client's cache, and
 * bindings written with POST pods/{name}/binding.  A rebuild thread turns each new cache
 * generation into a new ext_cluster (nodes whose annotation did not change are copied, not
 * parsed again) and installs it whole; the binding carries the topofit.io/gpus annotation,
 * which the API server copies onto the pod in the same write, so the binding and the GPU
 * record land together or not at all (a gang member's also carries its group's record).
 * Nothing else is kept: a restart rebuilds all state from node and pod annotations, the
 * groups' domains and holds included, once, at the first synced view (reservations are soft
 * and simply expire).
 */
#include "ext-server.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube.h"
#include "log.h"

#define EXT_LIVE_COALESCE_MS 20     /* changes closer than this share one rebuild */
/* A rebuild visits every node and pod, so under a stream of changes (kube-scheduler binding
 * pods back to back: each binding is a pod update) rebuilding every EXT_LIVE_COALESCE_MS
 * would take much of a core away from the scheduler this extender serves.  The pause after
 * a rebuild is at least EXT_LIVE_REBUILD_DUTY times the CPU time the rebuild took, so
 * rebuilds take at most 1 / (1 + EXT_LIVE_REBUILD_DUTY) of a core, and at most
 * EXT_LIVE_COALESCE_MAX_MS.  A later view is safe, only later: the ledger counts the GPUs of
 * pods bound meanwhile until a view shows them. */
#define EXT_LIVE_REBUILD_DUTY 4
#define EXT_LIVE_COALESCE_MAX_MS 250
#define EXT_LIVE_IDLE_WAKE_MS 1000  /* re-check sync state at least this often */

/* One pod's GPU record as the previous rebuild decoded it, keyed by the record's address.
 * Cache objects are immutable and that rebuild's snapshot is kept (ext_live.prev) until the
 * next rebuild is done, so an address seen again is the same bytes, never a freed record's
 * reuse: a pod that did not change is not parsed again (with cJSON, every pod on every
 * rebuild, it was a quarter of a rebuild under a stream of bindings). */
struct rec_memo {
        const char *rec; /* NULL: free slot */
        struct topo_mask gpus;
};

struct ext_live {
        struct ext_state *s;
        struct kube_client *client;
        struct kube_cache *cache;
        struct kube_snapshot *prev; /* the last rebuild's snapshot: keeps memo's keys alive */
        struct rec_memo *memo;      /* memo_cap slots (a power of two), or NULL */
        size_t memo_cap;
        pthread_t thread;
        bool thread_started;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stop;
        bool dirty;
        bool built;
        uint64_t built_generation;
        atomic_uint_fast64_t rebuilds, rebuild_cpu_ns; /* for /metrics */
};

static void
on_change(uint64_t generation, void *userdata)
{
        struct ext_live *lv = userdata;

        pthread_mutex_lock(&lv->lock);
        lv->dirty = true;
        pthread_cond_signal(&lv->cond);
        pthread_mutex_unlock(&lv->lock);
}

/* The value of key among n kept pairs, NULL when absent. */
static const char *
kv_get(const struct kube_kv *kv, uint32_t n, const char *key)
{
        for (uint32_t i = 0; i < n; i++)
                if (strcmp(kv[i].key, key) == 0)
                        return kv[i].value;
        return NULL;
}

static const char *
annotation(const struct kube_pod *p, const char *key)
{
        return kv_get(p->annotations, p->n_annotations, key);
}

/* ext_pod_key_fn over the labels and annotations the cache kept of a pod: a non-empty
 * value, else NULL (as the request decode reads them). */
static const char *
kept_key(const void *pod, const char *key, bool is_annotation)
{
        const struct kube_pod *p = pod;
        const char *v = is_annotation ? kv_get(p->annotations, p->n_annotations, key)
                                      : kv_get(p->labels, p->n_labels, key);

        return v && v[0] ? v : NULL;
}

/* The gang of the pod just added to b, for preempt (a bad record or id: the next source):
 * the group record topofit bound it with, else the group id it was bound with (its group
 * had no record), else the group its spec.schedulingGroup, labels and annotations name (a
 * pod another scheduler bound: the cache keeps those keys, ext_group_keys), as a request's
 * would.  0, -EINVAL (none), -ENOMEM. */
static int
pod_gang(struct ext_cluster_builder *b, const struct kube_pod *p)
{
        const char *rec = annotation(p, EXT_GROUP_RECORD_ANNOTATION);
        const char *id = annotation(p, EXT_GROUP_ID_ANNOTATION);
        char gid[PLACE_NAME_MAX];
        int r = -EINVAL;

        if (rec)
                r = ext_cluster_builder_pod_group(b, p->ns, rec, strlen(rec));
        if (r == -EINVAL && id)
                r = ext_cluster_builder_pod_group_id(b, p->ns, id);
        if (r == -EINVAL) {
                ext_pod_group_id(p, kept_key, p->ns, p->scheduling_group, gid, NULL);
                if (gid[0])
                        r = ext_cluster_builder_pod_group_id(b, p->ns, gid);
        }
        return r;
}

/* Which label key lengths the builder keeps (the domain labels and the group keys): a
 * node's other labels, most of them, are passed over by their length alone, since the cache
 * keeps every label (ext_live_start) and a rebuild reads every node.  (Not static: the
 * live-labels microbenchmark measures the rebuild's node loop with these two.) */
void
ext__live_key_lengths(const struct ext_config *cfg, const struct ext_cluster_builder *b,
                      uint64_t bits[EXT_LIVE_KEY_LEN_WORDS])
{
        memset(bits, 0, EXT_LIVE_KEY_LEN_WORDS * sizeof(*bits));
        for (unsigned k = 0; k < cfg->n_domain_labels && k < EXT_MAX_DOMAIN_LABELS; k++) {
                size_t n = strlen(cfg->domain_labels[k].key);

                bits[n / 64] |= 1ull << (n % 64);
        }
        for (unsigned k = 0; k < PLACE_MAX_KEYS; k++) {
                const char *key = ext_cluster_builder_key(b, k);
                size_t n = key ? strlen(key) : 0;

                if (key)
                        bits[n / 64] |= 1ull << (n % 64);
        }
}

int
ext__live_add_node(struct ext_cluster_builder *b, const struct kube_node *n,
                   const uint64_t key_lens[EXT_LIVE_KEY_LEN_WORDS])
{
        int64_t gpus = n->gpu_allocatable > 0 ? n->gpu_allocatable : 0;
        int r = ext_cluster_builder_add_node(b, n->name, n->topology, n->topology_len,
                                             (unsigned)MIN(gpus, (int64_t)TOPO_MAX_GPUS), NULL);

        /* Cordoned or not Ready: no room for new groups (kube-scheduler keeps pods off it
         * unless they tolerate the taint, so a gang could not start there). */
        if (r >= 0)
                (void)ext_cluster_builder_node_closed(b, n->unschedulable || !n->ready);
        /* The cache keeps every label (ext_live_start asks it to): the domain labels and the
         * PodGroups' keys are kept, the rest ignored. */
        for (uint32_t k = 0; r >= 0 && k < n->n_labels; k++) {
                size_t kl = strlen(n->labels[k].key);

                if (kl < EXT_LABEL_KEY_MAX && (key_lens[kl / 64] >> (kl % 64) & 1))
                        (void)ext_cluster_builder_node_label(b, n->labels[k].key,
                                                             n->labels[k].value);
        }
        return r;
}

static size_t
memo_slot(const struct rec_memo *m, size_t cap, const char *rec)
{
        uint64_t h = (uint64_t)(uintptr_t)rec * 0x9e3779b97f4a7c15ull;
        size_t i = (size_t)(h >> 32) & (cap - 1);

        while (m[i].rec && m[i].rec != rec)
                i = (i + 1) & (cap - 1);
        return i;
}

/* The GPUs of pod record rec: from the previous rebuild's memo when it decoded this very
 * record, else decoded; a record that decodes is entered in next (cap slots, at least
 * twice the pods, so never full).  Returns ext_gpus_annotation_decode()'s result. */
static int
record_gpus(const struct ext_live *lv, struct rec_memo *next, size_t cap, const char *rec,
            struct topo_mask *ret)
{
        int r = 0;

        if (lv->memo) {
                const struct rec_memo *old = &lv->memo[memo_slot(lv->memo, lv->memo_cap, rec)];

                if (old->rec) {
                        *ret = old->gpus;
                        goto keep;
                }
        }
        r = ext_gpus_annotation_decode(rec, strlen(rec), TOPO_MAX_GPUS, ret, NULL);
        if (r < 0)
                return r;
keep:
        if (next) {
                size_t i = memo_slot(next, cap, rec);

                next[i] = (struct rec_memo){ .rec = rec, .gpus = *ret };
        }
        return r;
}

/* One kube snapshot into one cluster view. */
static int
rebuild(struct ext_live *lv, struct kube_snapshot *ks)
{
        CLEANUP(ext_cluster_unrefp) struct ext_cluster *base = ext_state_snapshot(lv->s);
        struct ext_cluster_builder *b = ext_cluster_builder_new(&lv->s->cfg, base);
        struct ext_cluster *c = NULL;
        unsigned bad_records = 0, left_out = 0;
        uint64_t key_lens[EXT_LIVE_KEY_LEN_WORDS];
        /* The next memo; without memory for it the rebuild only decodes every record. */
        size_t cap = 64;
        struct rec_memo *memo;
        int r = 0;

        if (!b)
                return -ENOMEM;
        /* The cache's objects are immutable and the last rebuild's snapshot (lv->prev, which
         * the base view was built from) is held until this one is installed: a node whose
         * annotation is still the same object is not hashed again. */
        ext_cluster_builder_sources(b, ks, lv->prev);
        while (cap < 2 * ks->n_pods)
                cap *= 2;
        memo = calloc(cap, sizeof(*memo));
        /* PodGroups' topology keys first: the nodes' values of them are kept as they come. */
        for (size_t i = 0; i < ks->n_podgroups; i++)
                if (ks->podgroups[i]->topology_key && ks->podgroups[i]->topology_key[0] &&
                    ext_cluster_builder_group_key(b, ks->podgroups[i]->topology_key) == -E2BIG)
                        left_out++;
        ext__live_key_lengths(&lv->s->cfg, b, key_lens);
        for (size_t i = 0; r >= 0 && i < ks->n_nodes; i++) {
                r = ext__live_add_node(b, ks->nodes[i], key_lens);
                if (r == -E2BIG || r == -EINVAL || r == -EEXIST) {
                        left_out++; /* over the cap or malformed: left out, the rest works */
                        r = 0;
                }
        }
        /* Pods come sorted by node: one run per node.  GPUs of pods bound without a
         * topofit record (another scheduler placed them) are counted as the node's highest
         * free indices, so the node is never offered more GPUs than it has left. */
        for (size_t i = 0; r >= 0 && i < ks->n_pods;) {
                const char *node = ks->pods[i]->node_name;
                struct topo_mask held = { 0 };
                int64_t unrecorded = 0;
                size_t j = i;

                for (; r >= 0 && j < ks->n_pods && strcmp(ks->pods[j]->node_name, node) == 0; j++) {
                        const struct kube_pod *p = ks->pods[j];
                        const char *rec;
                        struct topo_mask gpus = { 0 };

                        if (p->phase == KUBE_POD_SUCCEEDED || p->phase == KUBE_POD_FAILED)
                                continue;
                        rec = annotation(p, TOPO_GPUS_KEY);
                        if (rec && record_gpus(lv, memo, cap, rec, &gpus) < 0)
                                bad_records++;
                        if (!rec && node[0] && p->gpu_request > 0)
                                unrecorded += p->gpu_request;
                        topo_mask_or(&held, &gpus);
                        r = ext_cluster_builder_add_pod(b, p->uid, p->ns, p->name, node, &gpus);
                        if (r >= 0 && pod_gang(b, p) == -ENOMEM)
                                r = -ENOMEM;
                        if (r == -E2BIG || r == -EINVAL || r == -EEXIST) {
                                left_out++;
                                r = 0;
                        }
                }
                if (r >= 0 && unrecorded > 0) {
                        const struct kube_node *kn = kube_snapshot_node(ks, node);
                        int64_t g = kn ? MIN(kn->gpu_allocatable, (int64_t)TOPO_MAX_GPUS) : 0;
                        struct topo_mask guess = { 0 };
                        char uid[EXT_UID_MAX];

                        for (; g > 0 && unrecorded > 0; g--)
                                if (!topo_mask_test(&held, (unsigned)(g - 1))) {
                                        topo_mask_set(&guess, (unsigned)(g - 1));
                                        unrecorded--;
                                }
                        snprintf(uid, sizeof(uid), "~unrecorded-%zu", i);
                        r = ext_cluster_builder_add_pod(b, uid, NULL, NULL, node, &guess);
                        if (r == -E2BIG || r == -EINVAL || r == -EEXIST)
                                r = 0;
                }
                i = j;
        }
        for (size_t i = 0; r >= 0 && i < ks->n_podgroups; i++) {
                const struct kube_podgroup *g = ks->podgroups[i];

                r = ext_cluster_builder_add_podgroup(b, g->ns, g->name, g->min_count,
                                                     g->topology_key);
                if (r == -E2BIG || r == -EINVAL) {
                        left_out++;
                        r = 0;
                }
        }
        if (r < 0) {
                ext_cluster_builder_free(b);
                free(memo);
                return r;
        }
        r = ext_cluster_builder_finish(b, ks->generation, &c);
        if (r < 0) {
                free(memo);
                return r;
        }
        /* The memo's keys live as long as this snapshot: keep it until the next rebuild. */
        free(lv->memo);
        lv->memo = memo;
        lv->memo_cap = memo ? cap : 0;
        kube_snapshot_unref(lv->prev);
        lv->prev = kube_snapshot_ref(ks);
        if (bad_records)
                log_warn("pods with an unreadable GPU record", "count=%u annotation=%s", bad_records,
                         TOPO_GPUS_KEY);
        if (left_out)
                log_warn("objects left out of the cluster view", "count=%u reason=\"over "
                         "EXT_MAX_NODES/EXT_MAX_PODS or malformed\"", left_out);
        log_debug("cluster view rebuilt", "generation=%llu nodes=%zu pods=%zu classes=%zu",
                  (unsigned long long)c->generation, c->n_nodes, c->n_pods, c->n_classes);
        ext_state_install(lv->s, c);
        return 0;
}

/* Once, at the first synced view after a start: the groups' domains and holds from the
 * group records of the pods already bound (ext_groups_restore), since the group table lived
 * in the memory of the extender that bound them.  Logs what it did. */
static void
restore_groups(struct ext_live *lv, const struct kube_snapshot *ks)
{
        CLEANUP(ext_cluster_unrefp) struct ext_cluster *c = ext_state_snapshot(lv->s);
        CLEANUP(freep) struct ext_group_member *m = NULL;
        size_t n = 0;
        unsigned refused = 0;
        int r;

        for (size_t i = 0; i < ks->n_pods; i++)
                n += annotation(ks->pods[i], EXT_GROUP_RECORD_ANNOTATION) != NULL;
        if (n == 0 || !c)
                return;
        m = calloc(n, sizeof(*m));
        if (!m) {
                log_warn("group holds not restored", "reason=\"out of memory\"");
                return;
        }
        n = 0;
        for (size_t i = 0; i < ks->n_pods; i++) {
                const struct kube_pod *p = ks->pods[i];
                const char *rec = annotation(p, EXT_GROUP_RECORD_ANNOTATION);

                /* A member being deleted or done: its gang is ending, nothing to hold. */
                if (!rec || !p->node_name[0] || p->deleting || p->phase == KUBE_POD_SUCCEEDED ||
                    p->phase == KUBE_POD_FAILED)
                        continue;
                m[n++] = (struct ext_group_member){ .uid = p->uid, .ns = p->ns, .record = rec,
                                                    .record_len = strlen(rec) };
        }
        r = ext_groups_restore(c, lv->s->ledger, m, n, ext_now_ns(), &refused);
        if (r < 0)
                log_warn("group holds not restored", "errno=%d", -r);
        else
                log_info("group holds restored", "groups=%d members=%zu refused=%u", r, n,
                         refused);
}

static void
sleep_ms(unsigned ms)
{
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

        nanosleep(&ts, NULL);
}

static uint64_t
thread_cpu_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *
rebuild_thread(void *arg)
{
        struct ext_live *lv = arg;

        for (;;) {
                struct kube_snapshot *ks;
                struct timespec until;
                uint64_t cpu0 = thread_cpu_ns(), pause_ms;

                pthread_mutex_lock(&lv->lock);
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += EXT_LIVE_IDLE_WAKE_MS / 1000;
                while (!lv->dirty && !lv->stop)
                        if (pthread_cond_timedwait(&lv->cond, &lv->lock, &until) != 0)
                                break;
                if (lv->stop) {
                        pthread_mutex_unlock(&lv->lock);
                        break;
                }
                lv->dirty = false;
                pthread_mutex_unlock(&lv->lock);

                ks = kube_cache_snapshot(lv->cache);
                if (ks && (ks->generation != lv->built_generation || !lv->built)) {
                        int r = rebuild(lv, ks);

                        if (r < 0)
                                log_error("cluster view rebuild failed", "errno=%d", -r);
                        else {
                                lv->built_generation = ks->generation;
                                lv->built = true;
                                atomic_fetch_add(&lv->rebuilds, 1);
                                atomic_fetch_add(&lv->rebuild_cpu_ns, thread_cpu_ns() - cpu0);
                        }
                }
                if (ks && ks->synced && !atomic_load(&lv->s->ready)) {
                        struct kube_cache_stats st;

                        restore_groups(lv, ks);
                        kube_cache_stats(lv->cache, &st);
                        atomic_store(&lv->s->ready, true);
                        log_info("cluster view synced", "nodes=%zu pods=%zu podgroups=%zu "
                                 "podgroup_api=%s", ks->n_nodes, ks->n_pods, ks->n_podgroups,
                                 st.podgroup_api && st.podgroup_api[0]
                                         ? st.podgroup_api
                                         : "none (the server serves no PodGroups: group sizes "
                                           "from topofit.io/group-size only)");
                }
                kube_snapshot_unref(ks);
                pause_ms = (thread_cpu_ns() - cpu0) * EXT_LIVE_REBUILD_DUTY / 1000000u;
                sleep_ms((unsigned)MIN(MAX(pause_ms, (uint64_t)EXT_LIVE_COALESCE_MS),
                                       (uint64_t)EXT_LIVE_COALESCE_MAX_MS));
        }
        return NULL;
}

static int
live_binder(struct ext_state *s, const struct ext_binding *b, const struct ext_node *node,
            const struct topo_mask *gpus, const char *annotation_json, const char *group_record,
            const char *group_id, const char **ret_why)
{
        struct ext_live *lv = s->binder_data;
        struct kube_kv kv[2] = { { .key = TOPO_GPUS_KEY, .value = annotation_json } };
        struct kube_error err = { 0 };
        int r;

        /* A gang member carries its group's record, or its group id when there is none: the
         * cache keeps no labels or spec of a pod, so this is how the view knows its gang. */
        if (group_record)
                kv[1] = (struct kube_kv){ .key = EXT_GROUP_RECORD_ANNOTATION,
                                          .value = group_record };
        else if (group_id)
                kv[1] = (struct kube_kv){ .key = EXT_GROUP_ID_ANNOTATION, .value = group_id };
        r = kube_bind(lv->client, b->pod_namespace, b->pod_name, b->pod_uid, node->name, kv,
                      kv[1].key ? 2 : 1, &err);
        if (r >= 0)
                return 0;
        log_warn("binding write failed", "pod=%s/%s uid=%s node=%s errno=%d http=%ld detail=%s",
                 b->pod_namespace, b->pod_name, b->pod_uid, LOG_V(node->name), -r,
                 err.http_status, LOG_V(err.message));
        switch (r) {
        case -EEXIST:
                return set_why(ret_why, "the pod is already bound, or its UID changed"), r;
        case -ENOENT:
                return set_why(ret_why, "the pod no longer exists"), r;
        default:
                return set_why(ret_why, "the API server refused or did not answer the binding"), r;
        }
}

static void
live_watch_stats(struct ext_state *s, struct ext_watch_stats *ret)
{
        struct ext_live *lv = s->binder_data;
        struct kube_cache_stats ks;

        kube_cache_stats(lv->cache, &ks);
        *ret = (struct ext_watch_stats){
                .events = ks.events,
                .relists = ks.relists,
                .reconnects = ks.reconnects,
                .errors = ks.errors,
                .decode_errors = ks.decode_errors,
                .rebuilds = atomic_load(&lv->rebuilds),
                .rebuild_cpu_ns = atomic_load(&lv->rebuild_cpu_ns),
        };
}

/* After a restart the pending ring is empty: read the pod from the API server. */
static int
live_fetch_pod(struct ext_state *s, const struct ext_binding *b, struct ext_request *ret)
{
        struct ext_live *lv = s->binder_data;
        struct kube_error err = { 0 };
        struct ext_request req;
        char path[2 * EXT_NAME_MAX + 64], *body = NULL;
        size_t len = 0;
        int r;

        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", b->pod_namespace,
                 b->pod_name);
        r = kube_request(lv->client, "GET", path, NULL, NULL, 0, &body, &len, &err);
        if (r < 0)
                return r;
        r = ext_request_decode(body, len, &s->cfg, &req, NULL);
        free(body);
        if (r < 0)
                return r;
        if (strcmp(req.uid, b->pod_uid) != 0)
                return -ESTALE;
        *ret = req;
        return 0;
}

struct ext_live *
ext_live_stop(struct ext_live *lv)
{
        if (!lv)
                return NULL;
        if (lv->thread_started) {
                pthread_mutex_lock(&lv->lock);
                lv->stop = true;
                pthread_cond_signal(&lv->cond);
                pthread_mutex_unlock(&lv->lock);
                pthread_join(lv->thread, NULL);
        }
        kube_snapshot_unref(lv->prev);
        free(lv->memo);
        kube_cache_free(lv->cache);
        kube_client_free(lv->client);
        pthread_mutex_destroy(&lv->lock);
        pthread_cond_destroy(&lv->cond);
        free(lv);
        return NULL;
}

int
ext_live_start(struct ext_state *s, const char *kubeconfig, struct ext_live **ret,
               const char **ret_why)
{
        struct kube_config *kc = NULL;
        struct kube_cache_options o;
        const char *resources[EXT_MAX_RESOURCES + 1] = { 0 };
        const char *domain_labels[EXT_MAX_DOMAIN_LABELS + 1] = { 0 };
        static const char *const read_annotations[] = { TOPO_GPUS_KEY,
                                                        EXT_GROUP_RECORD_ANNOTATION,
                                                        EXT_GROUP_ID_ANNOTATION };
        const char *group_labels[KUBE_MAX_KEPT_LABELS + 1] = { 0 };
        const char *group_annotations[KUBE_MAX_KEPT_LABELS + 1] = { 0 };
        const size_t n_read = ELEMENTSOF(read_annotations);
        struct ext_live *lv;
        int r;

        lv = calloc(1, sizeof(*lv));
        if (!lv)
                return -ENOMEM;
        lv->s = s;
        pthread_mutex_init(&lv->lock, NULL);
        pthread_cond_init(&lv->cond, NULL);

        r = kube_config_load(kubeconfig, &kc, ret_why);
        if (r < 0) {
                ext_live_stop(lv);
                return r;
        }
        r = kube_client_new(kc, NULL, &lv->client);
        if (r < 0) {
                kube_config_free(kc);
                ext_live_stop(lv);
                return set_why(ret_why, "the Kubernetes client cannot be set up"), r;
        }
        for (unsigned i = 0; i < s->cfg.n_resources; i++)
                resources[i] = s->cfg.resources[i];
        for (unsigned i = 0; i < s->cfg.n_domain_labels && i < EXT_MAX_DOMAIN_LABELS; i++)
                domain_labels[i] = s->cfg.domain_labels[i].key;
        kube_cache_options_init(&o);
        o.gpu_resources = resources;
        o.node_labels = domain_labels;
        /* A PodGroup may name any node label key as its topology constraint. */
        o.node_labels_all = true;
        o.watch_podgroups = true; /* group sizes from Kubernetes' PodGroups, when served */
        /* The annotations read here (always kept, however many other topofit.io/ ones a
         * pod has) and the keys that name a pod's group, for the gangs of pods other
         * schedulers bound. */
        (void)ext_group_keys(false, group_labels, KUBE_MAX_KEPT_LABELS);
        memcpy(group_annotations, read_annotations, sizeof(read_annotations));
        (void)ext_group_keys(true, group_annotations + n_read, KUBE_MAX_KEPT_LABELS - n_read);
        o.pod_labels = group_labels;
        o.pod_annotations = group_annotations;
        o.on_change = on_change;
        o.userdata = lv;
        r = kube_cache_new(lv->client, &o, &lv->cache);
        if (r < 0) {
                ext_live_stop(lv);
                return set_why(ret_why, "the node and pod watches cannot start"), r;
        }
        s->mode = "live";
        s->binder = live_binder;
        s->binder_data = lv;
        s->fetch_pod = live_fetch_pod;
        s->watch_stats = live_watch_stats;
        r = pthread_create(&lv->thread, NULL, rebuild_thread, lv);
        if (r != 0) {
                ext_live_stop(lv);
                return set_why(ret_why, "the rebuild thread cannot start"), -r;
        }
        lv->thread_started = true;
        log_info("live mode", "api_server=%s", kube_config_server(kube_client_config(lv->client)));
        *ret = lv;
        return 0;
}
