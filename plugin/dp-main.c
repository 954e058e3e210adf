/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topofit-node: the node-side daemon.  `run` (the default) discovers the topology,
 * publishes it as the node annotation, serves the device plugin and registers it with the
 * kubelet (again whenever kubelet.sock is re-created or our socket vanishes), keeps the
 * node-local pod cache (kube-client watch on spec.nodeName=<node>, or --pods-file), and
 * checks PodResources against the annotations.  `discover` prints what discovery finds.
 * Threads: main (ticks: sockets, registration, verification, pods file), the gRPC serving
 * thread (handlers below, under d->lock), kube-client's watch thread (on_kube_change).
 * The daemon logs; everything it calls returns -errno.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/buf.h"
#include "../common/file.h"
#include "../common/log.h"
#include "../common/str.h"
#include "../kube-client/kube.h"
#include "../scoring/score.h"
#include "dp.h"
#include "topofit-version.h"

#define DP_MATCH_WAIT_MS 250          /* preferred: wait this long for the pod to arrive */
#define DP_REGISTER_TIMEOUT_MS 5000
#define DP_PODRES_TIMEOUT_MS 5000
#define DP_REGISTER_BACKOFF_MAX_MS 10000
#define DP_PUBLISH_BACKOFF_MIN_MS 500
#define DP_PUBLISH_BACKOFF_MAX_MS 30000
#define DP_MAX_PODS_FILE_BYTES (64u << 20)
#define DP_MISMATCH_ANNOTATION "topofit.io/gpus-observed"
#define DP_CLASS_LABEL "topofit.io/topology-class"

DEFINE_CLEANUP_FUNC(cJSON, cJSON_Delete)

static volatile sig_atomic_t stop_requested;

static void
on_signal(int sig)
{
        (void)sig;
        stop_requested = 1;
}

struct dp_opts {
        const char *node;
        const char *dir;
        const char *endpoint;
        const char *resource;
        const char *podresources;
        const char *kubeconfig;
        const char *pods_file;
        const char *metrics_file;
        bool no_kube;
        bool label;
        bool annotate_mismatch;
        unsigned poll_ms;
        unsigned verify_ms;
        unsigned rediscover_ms;
        struct dp_discover_opts disc;
};

struct dp_daemon {
        struct dp_opts o;
        /* The topology annotation is to be written (again): at the start and when
         * rediscovery changes the topology, retried with a backoff until it is, since the
         * Node may not exist yet (the kubelet registers it) or the API server may be down.
         * Main thread only. */
        bool publish_due;
        int64_t publish_next_ms, publish_backoff_ms;
        char plugin_path[256];
        char kubelet_path[256];
        struct topo *topo;
        struct score_class *sc;
        struct dp_device devs[TOPO_MAX_GPUS];
        unsigned n_devs;

        pthread_mutex_t lock; /* guards cache, pods_mtime, counters, kube_gen */
        pthread_cond_t changed;
        struct dp_cache cache;
        struct timespec pods_mtime;
        uint64_t kube_gen;
        uint64_t n_annotated, n_fallback, n_mismatch, n_registered, n_register_failed;
        uint64_t n_verify_failed;
        char rejected_seen[16][DP_NAME_MAX * 2]; /* "uid@resourceVersion" logged already */
        unsigned rejected_next;

        struct dp_server *server;
        struct kube_client *kc;
        struct kube_cache *kcache;

        struct dp_nvml_watch *watch;          /* NVML critical-Xid events, when present */
        pthread_t watch_thread;
        bool watch_started;
        atomic_bool watch_stop;
        bool xid_bad[TOPO_MAX_GPUS];          /* under lock: sticky until restart */
        bool health_dirty;                    /* under lock: xid_bad changed */
};

static int64_t
now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The topology annotation is to be written from now on (keep_published() tries it, with a
 * fresh backoff).  Main thread only. */
static void
publish_soon(struct dp_daemon *d)
{
        d->publish_due = true;
        d->publish_next_ms = 0;
        d->publish_backoff_ms = DP_PUBLISH_BACKOFF_MIN_MS;
}

static int
device_index(const struct dp_daemon *d, const char *id)
{
        for (unsigned i = 0; i < d->n_devs; i++)
                if (strcmp(d->devs[i].id, id) == 0)
                        return (int)i;
        return -ENODEV;
}

static void
mask_to_ids(const struct dp_daemon *d, const struct topo_mask *m, char *buf, size_t size)
{
        const char *ids[TOPO_MAX_GPUS];
        unsigned n = 0;

        for (unsigned g = 0; g < d->n_devs; g++)
                if (topo_mask_test(m, g))
                        ids[n++] = d->devs[g].id;
        if (dp_join_ids(ids, n, buf, size) < 0)
                snprintf(buf, size, "(%u GPUs)", n);
}

/* --- pod sources (called with d->lock held) -------------------------------------------- */

static void
pods_file_refresh_locked(struct dp_daemon *d)
{
        CLEANUP(freep) char *text = NULL;
        const char *why = NULL;
        struct stat st;
        size_t len;
        int r;

        if (!d->o.pods_file || stat(d->o.pods_file, &st) < 0)
                return;
        if (st.st_mtim.tv_sec == d->pods_mtime.tv_sec && st.st_mtim.tv_nsec == d->pods_mtime.tv_nsec)
                return;
        r = file_read_capped(d->o.pods_file, DP_MAX_PODS_FILE_BYTES, &text, &len);
        if (r == -E2BIG) {
                log_error("pods file too large", "path=%s", d->o.pods_file);
                return;
        }
        if (r < 0)
                return;
        r = dp_cache_load_podlist(&d->cache, text, len, &why);
        if (r < 0) {
                log_error("pods file rejected", "path=%s why=%s", d->o.pods_file,
                          LOG_V(why ? why : ""));
                return;
        }
        d->pods_mtime = st.st_mtim;
        log_debug("pods file loaded", "pods=%u", d->cache.n_pods);
}

/* Counts and logs a refused annotation once per pod version, not once per snapshot. */
static void
note_rejected(struct dp_daemon *d, const struct kube_pod *kp, const char *why)
{
        char key[DP_NAME_MAX * 2];

        snprintf(key, sizeof(key), "%s@%s", kp->uid, kp->resource_version ? kp->resource_version : "");
        for (size_t i = 0; i < ELEMENTSOF(d->rejected_seen); i++)
                if (strcmp(d->rejected_seen[i], key) == 0)
                        return;
        snprintf(d->rejected_seen[d->rejected_next], sizeof(d->rejected_seen[0]), "%s", key);
        d->rejected_next = (d->rejected_next + 1) % ELEMENTSOF(d->rejected_seen);
        d->cache.rejected++;
        log_warn("pod annotation rejected", "pod=%s/%s why=%s", kp->ns, kp->name,
                 LOG_V(why ? why : ""));
}

/* Rebuilds the cache's pods from a kube-client snapshot: upsert what is there, drop the rest. */
static void
kube_sync_locked(struct dp_daemon *d)
{
        CLEANUP(kube_snapshot_unrefp) struct kube_snapshot *snap = NULL;
        CLEANUP(freep) struct dp_pod *p = NULL;

        if (!d->kcache)
                return;
        snap = kube_cache_snapshot(d->kcache);
        p = malloc(sizeof(*p));
        if (!snap || !p || snap->generation == d->kube_gen)
                return;
        for (unsigned i = 0; i < d->cache.n_pods; i++)
                d->cache.pods[i].mark = false;
        for (size_t i = 0; i < snap->n_pods; i++) {
                const struct kube_pod *kp = snap->pods[i];
                const char *gpus = NULL, *why = NULL;
                bool observed = false;

                for (uint32_t k = 0; k < kp->n_annotations; k++) {
                        if (strcmp(kp->annotations[k].key, TOPO_GPUS_KEY) == 0)
                                gpus = kp->annotations[k].value;
                        if (strcmp(kp->annotations[k].key, DP_MISMATCH_ANNOTATION) == 0)
                                observed = true;
                }
                if (!gpus || (d->o.node && strcmp(kp->node_name, d->o.node) != 0))
                        continue;
                *p = (struct dp_pod){ 0 };
                if (str_copy(p->uid, sizeof(p->uid), kp->uid, strlen(kp->uid)) < 0 ||
                    str_copy(p->ns, sizeof(p->ns), kp->ns, strlen(kp->ns)) < 0 ||
                    str_copy(p->name, sizeof(p->name), kp->name, strlen(kp->name)) < 0)
                        continue;
                p->live = !kp->deleting && kp->phase != KUBE_POD_SUCCEEDED &&
                          kp->phase != KUBE_POD_FAILED;
                p->pending = p->live && kp->phase == KUBE_POD_PENDING;
                if (dp_parse_gpus_annotation(&d->cache, gpus, strlen(gpus), p->sets, &p->n_sets,
                                             &why) < 0) {
                        note_rejected(d, kp, why);
                        continue;
                }
                p->mark = true;
                p->mismatch_reported = observed; /* reported before a restart */
                if (dp_cache_upsert(&d->cache, p) < 0)
                        log_error("pod cache full", "max=%u", d->cache.max_pods);
        }
        for (unsigned i = d->cache.n_pods; i-- > 0;)
                if (!d->cache.pods[i].mark)
                        (void)dp_cache_remove(&d->cache, d->cache.pods[i].uid);
        d->kube_gen = snap->generation;
}

static void
on_kube_change(uint64_t generation, void *userdata)
{
        struct dp_daemon *d = userdata;

        (void)generation;
        pthread_mutex_lock(&d->lock);
        kube_sync_locked(d);
        pthread_cond_broadcast(&d->changed);
        pthread_mutex_unlock(&d->lock);
}

/* --- device plugin handlers (gRPC serving thread) ---------------------------------------- */

static int
on_preferred(void *userdata, const struct dp_pref_request *req, unsigned *ret_idx)
{
        struct dp_daemon *d = userdata;
        struct topo_mask avail, must, set;
        int pos[TOPO_MAX_GPUS];
        const char *pod = NULL, *source = "annotation";
        char ids[1024];
        unsigned n = 0;
        int r;

        topo_mask_clear(&avail);
        topo_mask_clear(&must);
        for (unsigned i = 0; i < d->n_devs; i++)
                pos[i] = -1;
        for (unsigned i = 0; i < req->n_available; i++) {
                int g = device_index(d, req->available[i]);
                if (g >= 0) {
                        topo_mask_set(&avail, (unsigned)g);
                        pos[g] = (int)i;
                }
        }
        for (unsigned i = 0; i < req->n_must; i++) {
                int g = device_index(d, req->must[i]);
                if (g < 0 || pos[g] < 0)
                        return -ENODEV; /* the transport answers must-include first */
                topo_mask_set(&must, (unsigned)g);
        }

        pthread_mutex_lock(&d->lock);
        pods_file_refresh_locked(d);
        kube_sync_locked(d);
        r = dp_cache_match(&d->cache, &avail, &must, req->size, now_ms(), &set, &pod);
        if (r < 0 && d->kcache) {
                /* The pod may be a watch event behind the kubelet: wait a little for it. */
                struct timespec until;
                uint64_t gen = d->kube_gen;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_nsec += (long)DP_MATCH_WAIT_MS * 1000000L;
                until.tv_sec += until.tv_nsec / 1000000000L;
                until.tv_nsec %= 1000000000L;
                while (d->kube_gen == gen &&
                       pthread_cond_timedwait(&d->changed, &d->lock, &until) == 0)
                        ;
                r = dp_cache_match(&d->cache, &avail, &must, req->size, now_ms(), &set, &pod);
        }
        if (r == 0)
                d->n_annotated++;
        pthread_mutex_unlock(&d->lock);
        if (r < 0) {
                source = "fallback";
                pod = "";
                r = dp_fallback_set(d->sc, &avail, &must, req->size, d->n_devs, &set);
                if (r < 0)
                        return r;
                pthread_mutex_lock(&d->lock);
                d->n_fallback++;
                pthread_mutex_unlock(&d->lock);
        }
        for (unsigned g = 0; g < d->n_devs; g++)
                if (topo_mask_test(&set, g))
                        ret_idx[n++] = (unsigned)pos[g];
        mask_to_ids(d, &set, ids, sizeof(ids));
        log_info("preferred allocation", "source=%s pod=%s size=%u gpus=%s", source, LOG_V(pod),
                 req->size, ids);
        return (int)n;
}

static int
on_allocate_check(void *userdata, const char *const *ids, unsigned n)
{
        struct dp_daemon *d = userdata;

        for (unsigned i = 0; i < n; i++)
                if (device_index(d, ids[i]) < 0) {
                        log_warn("allocate names an unknown device", "id=%s", LOG_V(ids[i]));
                        return -ENODEV;
                }
        return 0;
}

/* --- kube: publisher and mismatch reports --------------------------------------------------- */

static int
publish_topology(struct dp_daemon *d)
{
        CLEANUP(freep) char *json = NULL;
        CLEANUP(freep) char *path = NULL;
        CLEANUP(cJSON_Deletep) cJSON *node = NULL;
        struct kube_error err = { 0 };
        struct buf patch;
        const cJSON *ann;
        const char *cur = NULL;
        size_t len;
        int r;

        if (!d->kc || !d->o.node)
                return 0;
        r = topo_to_annotation(d->topo, &json, &len);
        if (r < 0) {
                log_error("topology annotation not written", "why=%s",
                          LOG_V(r == -E2BIG ? "over the annotation size limit" : strerror(-r)));
                return r;
        }
        if (asprintf(&path, "/api/v1/nodes/%s", d->o.node) < 0) {
                path = NULL;
                return -ENOMEM;
        }
        r = kube_get(d->kc, path, &node, &err);
        if (r < 0) {
                log_warn("cannot read the node", "node=%s why=%s", d->o.node, LOG_V(err.message));
                return r;
        }
        ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(node, "metadata"),
                                               "annotations");
        if (cJSON_IsObject(ann)) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, TOPO_ANNOTATION_KEY);
                cur = cJSON_IsString(v) ? v->valuestring : NULL;
        }
        if (cur && strcmp(cur, json) == 0) {
                log_info("topology annotation unchanged", "node=%s bytes=%zu", d->o.node, len);
                return 0;
        }
        buf_init(&patch, TOPO_MAX_ANNOTATION_BYTES * 2 + 1024);
        r = buf_puts(&patch, "{\"metadata\":{\"annotations\":{\"" TOPO_ANNOTATION_KEY "\":");
        if (r >= 0)
                r = buf_put_json_string(&patch, json);
        if (r >= 0)
                r = buf_puts(&patch, "}");
        if (r >= 0 && d->o.label)
                r = buf_printf(&patch, ",\"labels\":{\"" DP_CLASS_LABEL "\":\"%016llx\"}",
                               (unsigned long long)topo_class_hash(d->topo));
        if (r >= 0)
                r = buf_puts(&patch, "}}");
        if (r >= 0)
                r = kube_patch(d->kc, path, KUBE_PATCH_MERGE, patch.data, patch.len, NULL, &err);
        buf_release(&patch);
        if (r < 0) {
                log_warn("topology annotation patch failed", "node=%s why=%s", d->o.node,
                         LOG_V(err.message));
                return r;
        }
        log_info("topology annotation written", "node=%s bytes=%zu", d->o.node, len);
        return 0;
}

/* A log line (always), a Warning Event, and with --annotate-mismatch the pod annotation
 * topofit.io/gpus-observed (which the extender reads to correct its view). */
static void
report_mismatch(struct dp_daemon *d, const char *ns, const char *pod, const char *uid,
                const char *container, const char *actual)
{
        CLEANUP(freep) char *path = NULL;
        struct kube_error err = { 0 };
        struct buf patch;
        char value[1200], msg[1400];
        int r;

        log_warn("GPU assignment differs from the annotation", "pod=%s/%s container=%s actual=%s",
                 ns, pod, container, actual);
        if (!d->kc)
                return;
        snprintf(value, sizeof(value), "%s=%s", container, actual);
        snprintf(msg, sizeof(msg),
                 "container %s got GPUs %s, not the ones in " TOPO_GPUS_KEY, container, actual);
        if (kube_emit_event(d->kc, ns, pod, uid, "Warning", "GPUMismatch", msg, &err) < 0)
                log_warn("mismatch event failed", "pod=%s/%s why=%s", ns, pod, LOG_V(err.message));
        if (!d->o.annotate_mismatch)
                return;
        if (asprintf(&path, "/api/v1/namespaces/%s/pods/%s", ns, pod) < 0) {
                path = NULL;
                return;
        }
        buf_init(&patch, 4096);
        r = buf_puts(&patch, "{\"metadata\":{\"annotations\":{\"" DP_MISMATCH_ANNOTATION "\":");
        if (r >= 0)
                r = buf_put_json_string(&patch, value);
        if (r >= 0)
                r = buf_puts(&patch, "}}}");
        if (r >= 0)
                r = kube_patch(d->kc, path, KUBE_PATCH_MERGE, patch.data, patch.len, NULL, &err);
        buf_release(&patch);
        if (r < 0)
                log_warn("mismatch annotation failed", "pod=%s/%s why=%s", ns, pod,
                         LOG_V(err.message));
}

/* --- verification ------------------------------------------------------------------------------ */

static void
verify_once(struct dp_daemon *d)
{
        struct dp_container_devices *cds = NULL;
        const char *why = NULL;
        size_t n = 0;
        int r;

        r = dp_podresources_list(d->o.podresources, d->o.resource, DP_PODRES_TIMEOUT_MS, &cds, &n,
                                 &why);
        if (r < 0) {
                pthread_mutex_lock(&d->lock);
                d->n_verify_failed++;
                pthread_mutex_unlock(&d->lock);
                log_debug("PodResources unavailable", "why=%s", LOG_V(why ? why : strerror(-r)));
                return;
        }
        for (size_t i = 0; i < n; i++) {
                struct topo_mask got, want;
                bool known = true, found = false, report = false;
                char actual[1024], uid[DP_NAME_MAX] = "";

                topo_mask_clear(&got);
                for (unsigned k = 0; k < cds[i].n_ids; k++) {
                        int g = device_index(d, cds[i].ids[k]);
                        if (g < 0)
                                known = false;
                        else
                                topo_mask_set(&got, (unsigned)g);
                }
                pthread_mutex_lock(&d->lock);
                struct dp_pod *p = (struct dp_pod *)dp_cache_find(&d->cache, cds[i].ns, cds[i].pod);
                if (p) {
                        for (unsigned s = 0; s < p->n_sets && !found; s++)
                                if (!p->sets[s].container[0] ||
                                    strcmp(p->sets[s].container, cds[i].container) == 0) {
                                        want = p->sets[s].gpus;
                                        found = true;
                                }
                        if (found && (!known || !topo_mask_equal(&got, &want)) && !p->mismatch_reported) {
                                p->mismatch_reported = true;
                                d->n_mismatch++;
                                report = true;
                                snprintf(uid, sizeof(uid), "%s", p->uid);
                        }
                }
                pthread_mutex_unlock(&d->lock);
                if (report) {
                        if (dp_join_ids((const char *const *)cds[i].ids, cds[i].n_ids, actual,
                                        sizeof(actual)) < 0)
                                snprintf(actual, sizeof(actual), "(%u GPUs)", cds[i].n_ids);
                        report_mismatch(d, cds[i].ns, cds[i].pod, uid, cds[i].container, actual);
                }
        }
        dp_container_devices_free_array(cds, n);
}

static void
write_metrics(struct dp_daemon *d)
{
        struct dp_server_stats st = { 0 };
        char tmp[512];
        FILE *f;

        if (!d->o.metrics_file)
                return;
        if (d->server)
                dp_server_get_stats(d->server, &st);
        snprintf(tmp, sizeof(tmp), "%s.tmp", d->o.metrics_file);
        f = fopen(tmp, "we");
        if (!f)
                return;
        pthread_mutex_lock(&d->lock);
        fprintf(f,
                "# HELP topofit_node_preferred_total GetPreferredAllocation answers by source.\n"
                "# TYPE topofit_node_preferred_total counter\n"
                "topofit_node_preferred_total{source=\"annotation\"} %llu\n"
                "topofit_node_preferred_total{source=\"fallback\"} %llu\n"
                "# HELP topofit_node_gpu_mismatch_total Containers whose GPUs differ from topofit.io/gpus.\n"
                "# TYPE topofit_node_gpu_mismatch_total counter\n"
                "topofit_node_gpu_mismatch_total %llu\n"
                "# HELP topofit_node_registrations_total Successful kubelet registrations.\n"
                "# TYPE topofit_node_registrations_total counter\n"
                "topofit_node_registrations_total %llu\n"
                "# HELP topofit_node_annotations_rejected_total Pod annotations refused as invalid.\n"
                "# TYPE topofit_node_annotations_rejected_total counter\n"
                "topofit_node_annotations_rejected_total %llu\n"
                "# HELP topofit_node_rpc_errors_total Device plugin RPCs answered with an error.\n"
                "# TYPE topofit_node_rpc_errors_total counter\n"
                "topofit_node_rpc_errors_total %llu\n",
                (unsigned long long)d->n_annotated, (unsigned long long)d->n_fallback,
                (unsigned long long)d->n_mismatch, (unsigned long long)d->n_registered,
                (unsigned long long)d->cache.rejected, (unsigned long long)st.errors);
        pthread_mutex_unlock(&d->lock);
        fclose(f);
        (void)rename(tmp, d->o.metrics_file);
}

/* --- health: discovery again, pushed to ListAndWatch ------------------------------------------ */

/* Runs discovery again: a GPU that reports unhealthy or has disappeared becomes Unhealthy,
 * one that is back becomes Healthy, and open ListAndWatch streams get the new list.  The
 * device list itself (IDs, order) and the scoring class stay as discovered at start; the
 * annotation is re-published when it changed.  Main thread only. */
static void
rediscover(struct dp_daemon *d)
{
        struct dp_discover_report rep;
        struct topo *t = NULL;
        bool changed = false;
        char id[TOPO_ID_MAX];

        if (dp_discover(&d->o.disc, &t, &rep) < 0) {
                log_warn("discovery failed again; device health unchanged", "notes=%s",
                         LOG_V(rep.notes));
                return;
        }
        for (unsigned i = 0; i < d->n_devs; i++) {
                bool healthy = false;
                for (unsigned g = 0; g < t->n_gpus; g++) {
                        dp_device_id(t, g, id);
                        if (strcmp(id, d->devs[i].id) == 0) {
                                healthy = t->gpus[g].healthy;
                                break;
                        }
                }
                pthread_mutex_lock(&d->lock);
                healthy = healthy && !d->xid_bad[i];
                pthread_mutex_unlock(&d->lock);
                if (healthy != d->devs[i].healthy) {
                        log_info("device health changed", "id=%s health=%s", d->devs[i].id,
                                 healthy ? "Healthy" : "Unhealthy");
                        d->devs[i].healthy = healthy;
                        changed = true;
                }
        }
        if (changed && d->server)
                (void)dp_server_set_devices(d->server, d->devs, d->n_devs);
        if (dp_keep_domain(t, d->topo, &rep))
                log_warn("NVML fabric query failed; the NVLink domain is kept", "domain=%s",
                         t->nvlink_domain);
        if (!topo_equal(t, d->topo)) {
                topo_unref(d->topo);
                d->topo = t;
                publish_soon(d);
        } else {
                topo_unref(t);
        }
}

/* The NVML event thread: a critical Xid marks the GPU unhealthy (the main loop pushes it). */
static void *
watch_loop(void *userdata)
{
        struct dp_daemon *d = userdata;

        while (!atomic_load(&d->watch_stop)) {
                char id[TOPO_ID_MAX];
                unsigned long long xid = 0;
                int g, r = dp_nvml_watch_wait(d->watch, 500, id, &xid);

                if (r < 0) {
                        log_warn("NVML event wait failed", "why=%s", LOG_V(strerror(-r)));
                        usleep(500 * 1000);
                        continue;
                }
                if (r == 0)
                        continue;
                g = device_index(d, id);
                log_warn("GPU reported a critical Xid", "id=%s xid=%llu known=%s", id, xid,
                         g >= 0 ? "yes" : "no");
                if (g < 0)
                        continue;
                pthread_mutex_lock(&d->lock);
                d->xid_bad[g] = true;
                d->health_dirty = true;
                pthread_mutex_unlock(&d->lock);
        }
        return NULL;
}

static void
apply_xid_health(struct dp_daemon *d)
{
        bool changed = false;

        pthread_mutex_lock(&d->lock);
        if (d->health_dirty)
                for (unsigned i = 0; i < d->n_devs; i++)
                        if (d->xid_bad[i] && d->devs[i].healthy) {
                                d->devs[i].healthy = false;
                                changed = true;
                                log_info("device health changed", "id=%s health=Unhealthy reason=xid",
                                         d->devs[i].id);
                        }
        d->health_dirty = false;
        pthread_mutex_unlock(&d->lock);
        if (changed && d->server)
                (void)dp_server_set_devices(d->server, d->devs, d->n_devs);
}

/* --- the daemon ------------------------------------------------------------------------------- */

static int
server_start(struct dp_daemon *d)
{
        struct dp_handlers h = {
                .userdata = d,
                .preferred = on_preferred,
                .allocate_check = on_allocate_check,
        };
        int r;

        d->server = dp_server_free(d->server);
        r = dp_server_new(d->plugin_path, &h, &d->server);
        if (r < 0) {
                log_error("cannot serve the device plugin socket", "path=%s why=%s",
                          d->plugin_path, LOG_V(strerror(-r)));
                return r;
        }
        return dp_server_set_devices(d->server, d->devs, d->n_devs);
}

static void
daemon_free(struct dp_daemon *d)
{
        atomic_store(&d->watch_stop, true);
        if (d->watch_started)
                pthread_join(d->watch_thread, NULL);
        d->watch = dp_nvml_watch_free(d->watch);
        d->server = dp_server_free(d->server);
        (void)unlink(d->plugin_path);
        d->kcache = kube_cache_free(d->kcache);
        d->kc = kube_client_free(d->kc);
        dp_cache_release(&d->cache);
        score_class_unref(d->sc);
        topo_unref(d->topo);
        pthread_cond_destroy(&d->changed);
        pthread_mutex_destroy(&d->lock);
        free(d);
}

/* The daemon with its devices discovered, its scoring class and its (empty) pod cache. */
static int
daemon_new(const struct dp_opts *o, struct dp_daemon **ret)
{
        struct dp_discover_report rep;
        struct score_config cfg;
        struct dp_daemon *d;
        int r;

        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->o = *o;
        pthread_mutex_init(&d->lock, NULL);
        pthread_cond_init(&d->changed, NULL);
        atomic_init(&d->watch_stop, false);
        snprintf(d->plugin_path, sizeof(d->plugin_path), "%s/%s", o->dir, o->endpoint);
        snprintf(d->kubelet_path, sizeof(d->kubelet_path), "%s/%s", o->dir, DP_KUBELET_SOCKET);
        r = dp_discover(&o->disc, &d->topo, &rep);
        if (r < 0) {
                log_error("no GPUs discovered", "notes=%s", LOG_V(rep.notes));
                daemon_free(d);
                return r;
        }
        for (unsigned i = 0; i < d->topo->n_gpus; i++) {
                dp_device_id(d->topo, i, d->devs[i].id);
                d->devs[i].healthy = d->topo->gpus[i].healthy;
        }
        d->n_devs = d->topo->n_gpus;
        log_info("topology discovered", "source=%s gpus=%u", dp_source_to_string(rep.used),
                 d->n_devs);
        score_config_default(&cfg);
        d->sc = score_class_new(d->topo, &cfg);
        r = dp_cache_init(&d->cache, d->devs, d->n_devs);
        if (r < 0) {
                daemon_free(d);
                return r;
        }
        if (o->node)
                snprintf(d->cache.node, sizeof(d->cache.node), "%s", o->node);
        *ret = d;
        return 0;
}

/* Writes the topology annotation when it is due and its backoff has passed; a failure (the
 * Node not there yet, the API server down: publish_topology() logs it) doubles the wait. */
static void
keep_published(struct dp_daemon *d, int64_t now)
{
        if (!d->publish_due || now < d->publish_next_ms)
                return;
        if (publish_topology(d) >= 0) {
                d->publish_due = false;
                return;
        }
        d->publish_next_ms = now + d->publish_backoff_ms;
        d->publish_backoff_ms = MIN(d->publish_backoff_ms * 2, DP_PUBLISH_BACKOFF_MAX_MS);
}

/* The API server side: the watch of this node's pods, and the topology published (retried
 * from the main loop until it is). */
static int
kube_start(struct dp_daemon *d)
{
        static const char *const read_annotations[] = { TOPO_GPUS_KEY, DP_MISMATCH_ANNOTATION,
                                                        NULL };
        struct kube_config *kcfg = NULL;
        struct kube_cache_options ko;
        const char *why = NULL;
        char sel[DP_NAME_MAX + 32];
        int r;

        r = kube_config_load(d->o.kubeconfig, &kcfg, &why);
        if (r >= 0)
                r = kube_client_new(kcfg, NULL, &d->kc);
        if (r < 0) {
                kube_config_free(kcfg);
                log_error("no API server configuration", "why=%s", LOG_V(why ? why : strerror(-r)));
                return r;
        }
        kube_cache_options_init(&ko);
        ko.watch_nodes = false;
        ko.watch_pods = true;
        snprintf(sel, sizeof(sel), "spec.nodeName=%s", d->o.node);
        ko.pod_field_selector = sel;
        ko.pod_annotations = read_annotations; /* kept however many others a pod has */
        ko.on_change = on_kube_change;
        ko.userdata = d;
        r = kube_cache_new(d->kc, &ko, &d->kcache);
        if (r < 0) {
                log_error("cannot start the pod watch", "why=%s", LOG_V(strerror(-r)));
                return r;
        }
        publish_soon(d);
        keep_published(d, now_ms());
        return 0;
}

/* NVML's critical Xid events, when the library offers them; optional. */
static void
xid_watch_start(struct dp_daemon *d)
{
        int r = dp_nvml_watch_new(d->o.disc.nvml_lib, &d->watch);

        if (r >= 0 && pthread_create(&d->watch_thread, NULL, watch_loop, d) == 0) {
                d->watch_started = true;
                log_info("watching NVML critical Xid events", "gpus=%u", d->n_devs);
                return;
        }
        d->watch = dp_nvml_watch_free(d->watch);
        log_debug("no NVML events", "why=%s", LOG_V(r < 0 ? strerror(-r) : "thread"));
}

/* Registration with the kubelet, kept across kubelet restarts (its socket re-created). */
struct registration {
        bool registered;
        ino_t kubelet_ino;
        int64_t next_ms, backoff_ms;
};

/* The kubelet wipes the plugin directory when it starts: serve again, register again. */
static int
keep_serving(struct dp_daemon *d, struct registration *reg)
{
        struct stat st;

        if (stat(d->plugin_path, &st) == 0)
                return 0;
        log_info("plugin socket gone, serving again", "socket=%s", d->plugin_path);
        if (server_start(d) < 0)
                return -EIO;
        reg->registered = false;
        reg->next_ms = 0;
        return 0;
}

static void
keep_registered(struct dp_daemon *d, struct registration *reg, int64_t now)
{
        const char *why = NULL;
        struct stat st;
        int r;

        if (stat(d->kubelet_path, &st) < 0) {
                if (reg->registered)
                        log_info("kubelet socket gone", "socket=%s", d->kubelet_path);
                reg->registered = false;
                return;
        }
        if ((reg->registered && st.st_ino == reg->kubelet_ino) || now < reg->next_ms)
                return;
        if (reg->registered)
                log_info("kubelet socket re-created, registering again", "socket=%s",
                         d->kubelet_path);
        /* A (re)started kubelet admits its pods anew: offers made to the one before would
         * put those pods behind the others.  Forgotten before Register, as the new kubelet
         * may ask before it returns. */
        pthread_mutex_lock(&d->lock);
        dp_cache_forget_offers(&d->cache);
        pthread_mutex_unlock(&d->lock);
        r = dp_register(d->kubelet_path, d->o.endpoint, d->o.resource, DP_REGISTER_TIMEOUT_MS,
                        &why);
        pthread_mutex_lock(&d->lock);
        if (r < 0)
                d->n_register_failed++;
        else
                d->n_registered++;
        pthread_mutex_unlock(&d->lock);
        if (r < 0) {
                log_warn("registration failed", "why=%s retry_ms=%lld",
                         LOG_V(why ? why : strerror(-r)), (long long)reg->backoff_ms);
                reg->registered = false;
                reg->next_ms = now + reg->backoff_ms;
                reg->backoff_ms = MIN(reg->backoff_ms * 2, DP_REGISTER_BACKOFF_MAX_MS);
                return;
        }
        log_info("registered with the kubelet", "resource=%s endpoint=%s", d->o.resource,
                 d->o.endpoint);
        reg->registered = true;
        reg->kubelet_ino = st.st_ino;
        reg->backoff_ms = 500;
}

static int
run(struct dp_opts *o)
{
        struct registration reg = { .backoff_ms = 500 };
        struct dp_daemon *d = NULL;
        int64_t next_verify = 0, next_rediscover;
        int r;

        r = daemon_new(o, &d);
        if (r < 0)
                return r;
        if (!o->no_kube && (r = kube_start(d)) < 0)
                goto out;
        r = server_start(d);
        if (r < 0)
                goto out;
        xid_watch_start(d);
        log_info("serving", "socket=%s resource=%s version=%s", d->plugin_path, o->resource,
                 TOPOFIT_VERSION);

        next_rediscover = now_ms() + o->rediscover_ms;
        while (!stop_requested) {
                int64_t now = now_ms();

                if (keep_serving(d, &reg) < 0)
                        break;
                keep_registered(d, &reg, now);
                keep_published(d, now);
                pthread_mutex_lock(&d->lock);
                pods_file_refresh_locked(d);
                pthread_mutex_unlock(&d->lock);
                apply_xid_health(d);
                if (o->rediscover_ms && now >= next_rediscover) {
                        rediscover(d);
                        next_rediscover = now + o->rediscover_ms;
                }
                if (o->verify_ms && now >= next_verify) {
                        verify_once(d);
                        write_metrics(d);
                        next_verify = now + o->verify_ms;
                }
                usleep(o->poll_ms * 1000);
        }
        r = 0;
        write_metrics(d);
        log_info("stopping", "socket=%s", d->plugin_path);
out:
        daemon_free(d);
        return r;
}

static int
discover(const struct dp_opts *o)
{
        CLEANUP(topo_unrefp) struct topo *t = NULL;
        CLEANUP(freep) char *json = NULL;
        struct dp_discover_report rep;
        size_t len;
        int r;

        r = dp_discover(&o->disc, &t, &rep);
        fprintf(stderr, "nvml: %s\n", rep.nvml_present ? "present" : "absent");
        fprintf(stderr, "nvidia-smi: %s\n", rep.nvsmi_present ? "present" : "absent");
        fprintf(stderr, "hwloc: %s\n", rep.hwloc_ok ? "ok" : "not used");
        fputs(rep.notes, stderr);
        if (r < 0) {
                fprintf(stderr, "no GPUs found\n");
                return r;
        }
        fprintf(stderr, "source: %s\ngpus: %u\n", dp_source_to_string(rep.used), t->n_gpus);
        for (unsigned i = 0; i < t->n_gpus; i++) {
                char id[TOPO_ID_MAX];
                dp_device_id(t, i, id);
                fprintf(stderr, "gpu %u: id=%s model=\"%s\" bus=%s numa=%d memory_mib=%llu mig=%s\n",
                        i, id, t->gpus[i].model, t->gpus[i].pci_bus_id, t->gpus[i].numa,
                        (unsigned long long)t->gpus[i].memory_mib,
                        topo_mig_to_string((enum topo_mig)t->gpus[i].mig));
        }
        r = topo_to_annotation(t, &json, &len);
        if (r < 0) {
                fprintf(stderr, "cannot write the annotation: %s\n", strerror(-r));
                return r;
        }
        printf("%s\n", json);
        return 0;
}

static void
usage(FILE *f)
{
        fputs("Usage: topofit-node [OPTIONS] [run|discover]\n"
              "  run       serve the device plugin, publish the topology (default)\n"
              "  discover  print what discovery finds and the annotation JSON, then exit\n"
              "Options:\n"
              "  --node, --node-name NAME this node (default $NODE_NAME)\n"
              "  --device-plugin-dir DIR  default " DP_DEFAULT_DIR "\n"
              "  --endpoint NAME          our socket in that dir (default " DP_DEFAULT_ENDPOINT ")\n"
              "  --resource NAME          default " DP_DEFAULT_RESOURCE "\n"
              "  --pod-resources PATH     default " DP_DEFAULT_PODRESOURCES "\n"
              "  --kubeconfig PATH        API server access (default: in-cluster)\n"
              "  --no-kube                no API server: --pods-file only, nothing published\n"
              "  --pods-file PATH         static pod list (PodList JSON), re-read when it changes\n"
              "  --label                  also label the node with its topology class\n"
              "  --annotate-mismatch      also write " DP_MISMATCH_ANNOTATION " on mismatched pods\n"
              "                           (needs patch on pods; a Warning Event is always sent)\n"
              "  --topology-file PATH     static topology (annotation JSON, nvidia-smi, rocm-smi, hwloc XML)\n"
              "  --nvml-lib PATH          default libnvidia-ml.so.1\n"
              "  --nvidia-smi PATH        default nvidia-smi\n"
              "  --hwloc-xml PATH         hwloc from XML instead of the live machine\n"
              "  --no-hwloc               skip hwloc\n"
              "  --poll-ms MS             socket checks (default 1000)\n"
              "  --verify-interval SEC    PodResources check period, 0 = off (default 30)\n"
              "  --rediscover-interval SEC  health re-check period, 0 = off (default 60)\n"
              "  --metrics-file PATH      Prometheus text file, rewritten each check\n"
              "  --log-level LEVEL        error, warn, info, debug\n"
              "  --version\n",
              f);
}

/* An integer option in [min, max], times scale; false (message printed) when it is not. */
static bool
int_option(const char *arg, int min, int max, unsigned scale, const char *what, unsigned *ret)
{
        int v;

        if (str_to_int(arg, strlen(arg), min, max, &v) < 0) {
                fprintf(stderr, "%s: %d..%d\n", what, min, max);
                return false;
        }
        *ret = (unsigned)v * scale;
        return true;
}

enum { O_NODE = 256, O_DIR, O_ENDPOINT, O_RESOURCE, O_PODRES, O_KUBECONFIG, O_NO_KUBE,
       O_PODS, O_LABEL, O_TOPO, O_NVML, O_NVSMI, O_HWLOC_XML, O_NO_HWLOC, O_POLL,
       O_VERIFY, O_METRICS, O_LOG, O_VERSION, O_HELP, O_ANNOTATE, O_REDISCOVER };

static const struct option longopts[] = {
        { "node", required_argument, NULL, O_NODE },
        { "node-name", required_argument, NULL, O_NODE },
        { "annotate-mismatch", no_argument, NULL, O_ANNOTATE },
        { "device-plugin-dir", required_argument, NULL, O_DIR },
        { "endpoint", required_argument, NULL, O_ENDPOINT },
        { "resource", required_argument, NULL, O_RESOURCE },
        { "pod-resources", required_argument, NULL, O_PODRES },
        { "kubeconfig", required_argument, NULL, O_KUBECONFIG },
        { "no-kube", no_argument, NULL, O_NO_KUBE },
        { "pods-file", required_argument, NULL, O_PODS },
        { "label", no_argument, NULL, O_LABEL },
        { "topology-file", required_argument, NULL, O_TOPO },
        { "nvml-lib", required_argument, NULL, O_NVML },
        { "nvidia-smi", required_argument, NULL, O_NVSMI },
        { "hwloc-xml", required_argument, NULL, O_HWLOC_XML },
        { "no-hwloc", no_argument, NULL, O_NO_HWLOC },
        { "poll-ms", required_argument, NULL, O_POLL },
        { "verify-interval", required_argument, NULL, O_VERIFY },
        { "rediscover-interval", required_argument, NULL, O_REDISCOVER },
        { "metrics-file", required_argument, NULL, O_METRICS },
        { "log-level", required_argument, NULL, O_LOG },
        { "version", no_argument, NULL, O_VERSION },
        { "help", no_argument, NULL, O_HELP },
        {},
};

/* One option into o: 0 to go on, or the process's exit status + 1 (1: exit 0). */
static int
apply_option(int c, const char *arg, struct dp_opts *o)
{
        switch (c) {
        case O_NODE: o->node = arg; break;
        case O_DIR: o->dir = arg; break;
        case O_ENDPOINT: o->endpoint = arg; break;
        case O_RESOURCE: o->resource = arg; break;
        case O_PODRES: o->podresources = arg; break;
        case O_KUBECONFIG: o->kubeconfig = arg; break;
        case O_NO_KUBE: o->no_kube = true; break;
        case O_PODS: o->pods_file = arg; break;
        case O_LABEL: o->label = true; break;
        case O_ANNOTATE: o->annotate_mismatch = true; break;
        case O_TOPO: o->disc.topology_file = arg; break;
        case O_NVML: o->disc.nvml_lib = arg; break;
        case O_NVSMI: o->disc.nvidia_smi = arg; break;
        case O_HWLOC_XML: o->disc.hwloc_xml = arg; break;
        case O_NO_HWLOC: o->disc.no_hwloc = true; break;
        case O_POLL: return int_option(arg, 10, 60000, 1, "--poll-ms", &o->poll_ms) ? 0 : 3;
        case O_VERIFY:
                return int_option(arg, 0, 86400, 1000, "--verify-interval (seconds)",
                                  &o->verify_ms) ? 0 : 3;
        case O_REDISCOVER:
                return int_option(arg, 0, 86400, 1000, "--rediscover-interval (seconds)",
                                  &o->rediscover_ms) ? 0 : 3;
        case O_METRICS: o->metrics_file = arg; break;
        case O_LOG:
                if (log_level_from_string(arg) < 0) {
                        fprintf(stderr, "--log-level: error, warn, info or debug\n");
                        return 3;
                }
                log_set_level(log_level_from_string(arg));
                break;
        case O_VERSION: printf("topofit-node %s\n", TOPOFIT_VERSION); return 1;
        case O_HELP: case 'h': usage(stdout); return 1;
        default: usage(stderr); return 3;
        }
        return 0;
}

/* The options that only make sense together, for run. */
static bool
run_options_ok(const struct dp_opts *o)
{
        if (!o->no_kube && (!o->node || !o->node[0])) {
                fprintf(stderr, "--node (or $NODE_NAME) is required unless --no-kube\n");
                return false;
        }
        if (strlen(o->dir) + strlen(o->endpoint) + 2 > 100 || strchr(o->endpoint, '/')) {
                fprintf(stderr, "--endpoint must be a plain file name and the socket path short\n");
                return false;
        }
        return true;
}

int
main(int argc, char **argv)
{
        struct dp_opts o = {
                .node = getenv("NODE_NAME"),
                .dir = DP_DEFAULT_DIR,
                .endpoint = DP_DEFAULT_ENDPOINT,
                .resource = DP_DEFAULT_RESOURCE,
                .podresources = DP_DEFAULT_PODRESOURCES,
                .poll_ms = 1000,
                .verify_ms = 30000,
                .rediscover_ms = 60000,
        };
        const char *cmd = "run";
        int c, r;

        while ((c = getopt_long(argc, argv, "h", longopts, NULL)) >= 0) {
                r = apply_option(c, optarg, &o);
                if (r > 0)
                        return r - 1;
        }
        if (optind < argc)
                cmd = argv[optind++];
        if (optind < argc) {
                usage(stderr);
                return 2;
        }
        if (strcmp(cmd, "discover") == 0)
                return discover(&o) < 0 ? 1 : 0;
        if (strcmp(cmd, "run") != 0) {
                fprintf(stderr, "unknown command \"%s\"\n", cmd);
                usage(stderr);
                return 2;
        }
        if (!run_options_ok(&o))
                return 2;
        signal(SIGPIPE, SIG_IGN);
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        dp_grpc_init();
        r = run(&o);
        dp_grpc_shutdown();
        return r < 0 ? 1 : 0;
}
