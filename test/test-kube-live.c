/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube-client integration tests against test/fake-apiserver on loopback: pagination,
 * watch with bookmarks, 410 both ways, every fault injection (the cache must converge to
 * the server's objects, compared field by field), binding with annotations and the UID
 * precondition, merge and JSON patch with the status subresource, token rotation with a
 * 401, and TLS with a CA and client certificates (a throwaway PKI from gen-certs.sh).
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-util.h"

#include "kube-private.h"
#include "str.h"

struct server {
        pid_t pid;
        int port;
};

static char tmpdir[] = "/tmp/test-kube-live-XXXXXX";
static struct server plain;          /* shared by the plain-HTTP tests */
static struct kube_client *client;   /* talks to `plain` */

static const char *
source_root(void)
{
        const char *s = getenv("TOPOFIT_SOURCE_ROOT");
        return s ? s : ".";
}

static void
sleep_ms(unsigned ms)
{
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
        nanosleep(&ts, NULL);
}

/* Starts the fake server with args (NULL-terminated); waits for its port file. */
static int
server_start(struct server *s, const char *tag, const char *const *args)
{
        char script[1024], portfile[600];
        const char *argv[40];
        size_t n = 0;

        snprintf(script, sizeof(script), "%s/test/fake-apiserver/fake-apiserver.py",
                 source_root());
        snprintf(portfile, sizeof(portfile), "%s/port-%s", tmpdir, tag);
        unlink(portfile);
        argv[n++] = "/usr/bin/python3";
        argv[n++] = script;
        argv[n++] = "--port-file";
        argv[n++] = portfile;
        argv[n++] = "--bookmark-interval";
        argv[n++] = "0.3";
        for (; args && *args && n < ELEMENTSOF(argv) - 1; args++)
                argv[n++] = *args;
        argv[n] = NULL;
        s->pid = fork();
        if (s->pid < 0)
                return -errno;
        if (s->pid == 0) {
                /* The server dies with us, even when we crash or time out. */
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                /* The server's stdout would break the TAP stream. */
                int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (fd >= 0)
                        dup2(fd, STDOUT_FILENO);
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        for (int i = 0; i < 200; i++) {
                FILE *f = fopen(portfile, "r");
                if (f) {
                        int ok = fscanf(f, "%d", &s->port);
                        fclose(f);
                        if (ok == 1)
                                return 0;
                }
                sleep_ms(50);
        }
        return -ETIMEDOUT;
}

static void
server_stop(struct server *s)
{
        if (s->pid > 0) {
                kill(s->pid, SIGTERM);
                waitpid(s->pid, NULL, 0);
        }
        s->pid = 0;
}

/* A client for http://127.0.0.1:port through a kubeconfig (the real loading path). */
static struct kube_client *
client_plain(int port)
{
        char text[512], path[600];
        struct kube_config *cfg = NULL;
        struct kube_client *c = NULL;
        const char *why = NULL;

        snprintf(text, sizeof(text),
                 "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                 "contexts:\n- name: t\n  context: {cluster: fake}\n"
                 "clusters:\n- name: fake\n  cluster: {server: 'http://127.0.0.1:%d'}\n", port);
        test_write_file(tmpdir, "kubeconfig-plain", text);
        snprintf(path, sizeof(path), "%s/kubeconfig-plain", tmpdir);
        if (kube_config_load(path, &cfg, &why) < 0)
                fail_msg("kubeconfig: %s", why);
        if (kube_client_new(cfg, NULL, &c) < 0)
                fail_msg("client");
        return c;
}

static int
ctl(struct kube_client *c, const char *what, const char *json)
{
        char path[128];
        struct kube_error err = { 0 };
        int r;

        snprintf(path, sizeof(path), "/_control/%s", what);
        r = kube_request(c, "POST", path, "application/json", json, strlen(json), NULL, NULL,
                         &err);
        if (r < 0)
                print_error("control %s: %s\n", what, err.message);
        return r;
}

static int
setup(void **state)
{
        static const char *const args[] = { "--nodes", "20", "--pods", "300", NULL };

        if (!mkdtemp(tmpdir))
                return -1;
        if (server_start(&plain, "plain", args) < 0)
                return -1;
        client = client_plain(plain.port);
        return 0;
}

static int
teardown(void **state)
{
        char cmd[600];

        kube_client_free(client);
        server_stop(&plain);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        return system(cmd) == 0 ? 0 : -1;
}

/* --- comparing the cache with the server ------------------------------------------- */

static int
pod_order(const void *a, const void *b)
{
        const struct kube_pod *x = *(const struct kube_pod *const *)a;
        const struct kube_pod *y = *(const struct kube_pod *const *)b;
        int r = strcmp(x->node_name, y->node_name);
        if (!r)
                r = strcmp(x->ns, y->ns);
        return r ? r : strcmp(x->name, y->name);
}

static int
node_order(const void *a, const void *b)
{
        return strcmp((*(const struct kube_node *const *)a)->name,
                      (*(const struct kube_node *const *)b)->name);
}

static bool
str_same(const char *a, const char *b)
{
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool
kv_same(const struct kube_kv *a, uint32_t na, const struct kube_kv *b, uint32_t nb)
{
        if (na != nb)
                return false;
        for (uint32_t i = 0; i < na; i++) {
                bool found = false;
                for (uint32_t j = 0; j < nb && !found; j++)
                        found = strcmp(a[i].key, b[j].key) == 0 && strcmp(a[i].value, b[j].value) == 0;
                if (!found)
                        return false;
        }
        return true;
}

/* Compares a snapshot with the server's objects (optionally filtered to one node's pods,
 * and nodes not compared); *why names the first difference. */
static bool
snapshot_matches_server(const struct kube_snapshot *s, const char *only_node, bool nodes,
                        const struct kube__decode_opts *d, char *why, size_t why_len)
{
        CLEANUP(cJSON_Deletep) cJSON *state = NULL;
        struct kube__obj **objs = NULL;
        const struct kube_node **sn = NULL;
        const struct kube_pod **sp = NULL;
        size_t nn = 0, np = 0, total;
        const cJSON *o;
        bool ok = false;

        if (kube_get(client, "/_control/state", &state, NULL) < 0) {
                snprintf(why, why_len, "cannot fetch the server state");
                return false;
        }
        total = (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(state, "nodes")) +
                (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(state, "pods"));
        objs = calloc(total + 1, sizeof(*objs));
        sn = calloc(total + 1, sizeof(*sn));
        sp = calloc(total + 1, sizeof(*sp));
        assert_true(objs && sn && sp);
        size_t n_objs = 0;
        if (nodes)
                cJSON_ArrayForEach(o, cJSON_GetObjectItem(state, "nodes")) {
                        assert_int_equal(kube__decode_node(o, d, &objs[n_objs], NULL), 0);
                        sn[nn++] = &objs[n_objs++]->node;
                }
        cJSON_ArrayForEach(o, cJSON_GetObjectItem(state, "pods")) {
                assert_int_equal(kube__decode_pod(o, d, &objs[n_objs], NULL), 0);
                if (only_node && strcmp(objs[n_objs]->pod.node_name, only_node) != 0) {
                        kube__obj_unref(objs[n_objs]);
                        continue;
                }
                sp[np++] = &objs[n_objs++]->pod;
        }
        qsort(sn, nn, sizeof(*sn), node_order);
        qsort(sp, np, sizeof(*sp), pod_order);

        if (nn != s->n_nodes || np != s->n_pods) {
                snprintf(why, why_len, "cache has %zu nodes / %zu pods, server %zu / %zu",
                         s->n_nodes, s->n_pods, nn, np);
                goto out;
        }
        for (size_t i = 0; i < nn; i++) {
                const struct kube_node *a = s->nodes[i], *b = sn[i];
                if (strcmp(a->name, b->name) || strcmp(a->resource_version, b->resource_version) ||
                    !str_same(a->topology, b->topology) ||
                    a->gpu_allocatable != b->gpu_allocatable || a->gpu_capacity != b->gpu_capacity ||
                    a->ready != b->ready || a->unschedulable != b->unschedulable ||
                    !kv_same(a->labels, a->n_labels, b->labels, b->n_labels)) {
                        snprintf(why, why_len, "node %s differs (rv %s vs %s)", b->name,
                                 a->resource_version, b->resource_version);
                        goto out;
                }
        }
        for (size_t i = 0; i < np; i++) {
                const struct kube_pod *a = s->pods[i], *b = sp[i];
                if (strcmp(a->uid, b->uid) || strcmp(a->ns, b->ns) || strcmp(a->name, b->name) ||
                    strcmp(a->node_name, b->node_name) ||
                    strcmp(a->resource_version, b->resource_version) || a->phase != b->phase ||
                    a->deleting != b->deleting || a->gpu_request != b->gpu_request ||
                    !kv_same(a->annotations, a->n_annotations, b->annotations, b->n_annotations)) {
                        snprintf(why, why_len, "pod %s/%s differs (rv %s vs %s)", b->ns, b->name,
                                 a->resource_version, b->resource_version);
                        goto out;
                }
        }
        ok = true;
out:
        for (size_t i = 0; i < n_objs; i++)
                kube__obj_unref(objs[i]);
        free(objs);
        free(sn);
        free(sp);
        return ok;
}

/* Polls until the cache equals the server (or 20 s pass: then fails with the reason). */
static void
assert_converges(struct kube_cache *cache, const char *only_node, bool nodes, const char *what)
{
        char why[256] = "";

        for (int i = 0; i < 400; i++) {
                CLEANUP(kube_snapshot_unrefp) struct kube_snapshot *s = kube_cache_snapshot(cache);
                if (s && s->synced && snapshot_matches_server(s, only_node, nodes, NULL, why,
                                                             sizeof(why)))
                        return;
                sleep_ms(50);
        }
        fail_msg("%s: the cache did not converge: %s", what, why);
}

static struct kube_cache *
cache_new(const char *pod_selector, bool nodes)
{
        struct kube_cache_options o;
        struct kube_cache *cache = NULL;

        kube_cache_options_init(&o);
        o.page_size = 37; /* several pages */
        o.backoff_initial_ms = 20;
        o.backoff_max_ms = 200;
        o.pod_field_selector = pod_selector;
        o.watch_nodes = nodes;
        assert_int_equal(kube_cache_new(client, &o, &cache), 0);
        assert_int_equal(kube_cache_wait_synced(cache, 20000), 0);
        return cache;
}

/* --- LIST -------------------------------------------------------------------------- */

struct collect {
        unsigned n;
        unsigned bad;
        const char *node; /* when set: every item must be on this node */
        bool compact_after_first;
};

static int
collect_item(const cJSON *item, void *userdata)
{
        struct collect *c = userdata;
        const cJSON *spec = cJSON_GetObjectItem(item, "spec");
        const cJSON *node = cJSON_GetObjectItem(spec, "nodeName");

        if (c->node && (!cJSON_IsString(node) || strcmp(node->valuestring, c->node) != 0))
                c->bad++;
        /* A change after the list's version, then a compaction past it: the continue
         * token's snapshot is gone. */
        if (c->n++ == 0 && c->compact_after_first) {
                ctl(client, "churn", "{\"n\": 1}");
                ctl(client, "compact", "{}");
        }
        return 0;
}

static void
list_follows_continue_tokens_across_pages(void **state)
{
        CLEANUP(cJSON_Deletep) cJSON *st = NULL;
        struct collect col = { 0 };
        char *rv = NULL;
        int r;

        assert_int_equal(kube_get(client, "/_control/state", &st, NULL), 0);
        r = kube_list(client, "/api/v1/pods", NULL, 7, collect_item, &col, &rv, NULL);
        assert_int_equal(r, cJSON_GetArraySize(cJSON_GetObjectItem(st, "pods")));
        assert_int_equal(col.n, (unsigned)r);
        assert_non_null(rv);
        free(rv);
}

static void
list_with_field_selector_returns_only_matching_pods(void **state)
{
        struct kube_selector sel = { .field = "spec.nodeName=node-00003" };
        struct collect col = { .node = "node-00003" };
        int r;

        r = kube_list(client, "/api/v1/pods", &sel, 4, collect_item, &col, NULL, NULL);
        assert_true(r > 0);
        assert_int_equal(col.bad, 0);
}

static void
list_with_expired_continue_token_is_stale(void **state)
{
        struct collect col = { .compact_after_first = true };
        struct kube_error err = { 0 };

        assert_int_equal(kube_list(client, "/api/v1/pods", NULL, 5, collect_item, &col, NULL, &err),
                         -ESTALE);
        assert_int_equal(err.http_status, 410);
        assert_non_null(strstr(err.message, "continue"));
}

static void
get_of_a_missing_object_is_enoent_with_the_server_message(void **state)
{
        struct kube_error err = { 0 };
        cJSON *j = NULL;

        assert_int_equal(kube_get(client, "/api/v1/nodes/no-such-node", &j, &err), -ENOENT);
        assert_null(j);
        assert_int_equal(err.http_status, 404);
        assert_non_null(strstr(err.message, "not found"));
}

/* --- WATCH ------------------------------------------------------------------------- */

struct watch_count {
        unsigned events[_KUBE_EVENT_MAX];
};

static int
count_event(enum kube_event_type t, const cJSON *object, void *userdata)
{
        ((struct watch_count *)userdata)->events[t]++;
        return 0;
}

static char *
current_rv(void)
{
        CLEANUP(cJSON_Deletep) cJSON *st = NULL;

        assert_int_equal(kube_get(client, "/_control/state", &st, NULL), 0);
        return strdup(cJSON_GetObjectItem(st, "resourceVersion")->valuestring);
}

static void
watch_delivers_changes_and_bookmarks_until_the_timeout(void **state)
{
        struct watch_count wc = { 0 };
        char *rv = current_rv(), *start = strdup(rv);
        struct kube_watch_options o = { .resource_version = start, .timeout_seconds = 1 };
        int r;

        assert_true(ctl(client, "churn", "{\"n\": 12, \"seed\": 3}") >= 0);
        r = kube_watch(client, "/api/v1/pods", &o, count_event, &wc, &rv, NULL);
        assert_true(r >= 12);
        assert_true(wc.events[KUBE_EVENT_BOOKMARK] >= 1);
        assert_int_equal(wc.events[KUBE_EVENT_ADDED] + wc.events[KUBE_EVENT_MODIFIED] +
                                 wc.events[KUBE_EVENT_DELETED] + wc.events[KUBE_EVENT_BOOKMARK],
                         (unsigned)r);
        /* The newest version (from the last bookmark) is the server's. */
        char *now = current_rv();
        assert_string_equal(rv, now);
        free(now);
        free(rv);
        free(start);
}

struct watch_fault {
        const char *name;
        const char *control;   /* endpoint */
        const char *body;
        int ret;
        long http_status;
};

static const struct watch_fault watch_faults[] = {
        { "410 as HTTP status", "faults", "{\"gone_status\": 1}", -ESTALE, 410 },
        { "410 as an ERROR event", "faults", "{\"gone_event\": 1}", -ESTALE, 410 },
        { "an event over KUBE_MAX_EVENT", "oversize", "{}", -E2BIG, 0 },
        { "a truncated event", "faults", "{\"truncate\": 1}", -EBADMSG, 0 },
        { "a connection dropped mid-event", "faults", "{\"drop\": 1}", -ECONNRESET, 0 },
};

static void
watch_faults_end_the_watch_with_clear_errors(void **state)
{
        for (size_t i = 0; i < ELEMENTSOF(watch_faults); i++) {
                const struct watch_fault *t = &watch_faults[i];
                struct watch_count wc = { 0 };
                struct kube_error err = { 0 };
                char *rv = current_rv(), *start = strdup(rv);
                struct kube_watch_options o = { .resource_version = start, .timeout_seconds = 5 };
                int r;

                assert_true(ctl(client, t->control, t->body) >= 0);
                if (strcmp(t->control, "oversize") != 0)
                        assert_true(ctl(client, "churn", "{\"n\": 3}") >= 0);
                r = kube_watch(client, "/api/v1/pods", &o, count_event, &wc, &rv, &err);
                if (r != t->ret)
                        fail_msg("%s: returned %d (%s)", t->name, r, err.message);
                assert_int_equal(err.http_status, t->http_status);
                assert_true(err.message[0] != 0);
                free(rv);
                free(start);
        }
}

/* --- the cache --------------------------------------------------------------------- */

struct cache_fault {
        const char *name;
        const char *control;
        const char *body;
        bool relist;           /* must relist to converge */
};

static const struct cache_fault cache_faults[] = {
        { "plain changes", "churn", "{\"n\": 40, \"seed\": 11}", false },
        { "a connection dropped mid-event", "faults", "{\"drop\": 1}", false },
        { "slow responses", "faults", "{\"slow_ms\": 30}", false },
        { "a truncated event", "faults", "{\"truncate\": 1, \"slow_ms\": 0}", true },
        { "an oversized event", "oversize", "{}", true },
        { "410 as HTTP status on reconnect", "faults", "{\"drop\": 1, \"gone_status\": 1}", true },
        { "410 as an ERROR event on reconnect", "faults", "{\"drop\": 1, \"gone_event\": 1}", true },
        { "history compacted under a broken stream", "faults",
          "{\"drop\": 1, \"compact_on_drop\": 1}", true },
        { "server errors on reconnect", "faults", "{\"drop\": 1, \"error500\": 2}", false },
        { "a restart with newer resourceVersions and silent changes", "restart",
          "{\"rv_jump\": 5000, \"changes\": 25, \"seed\": 5}", true },
};

static void
cache_converges_to_the_server_after_every_fault(void **state)
{
        CLEANUP(kube_cache_freep) struct kube_cache *cache = cache_new(NULL, true);
        struct kube_cache_stats before, after;

        assert_converges(cache, NULL, true, "initial sync");
        for (size_t i = 0; i < ELEMENTSOF(cache_faults); i++) {
                const struct cache_fault *t = &cache_faults[i];
                char seed[64];

                kube_cache_stats(cache, &before);
                assert_true(ctl(client, t->control, t->body) >= 0);
                snprintf(seed, sizeof(seed), "{\"n\": 30, \"seed\": %zu}", 100 + i);
                assert_true(ctl(client, "churn", seed) >= 0);
                assert_converges(cache, NULL, true, t->name);
                kube_cache_stats(cache, &after);
                if (t->relist && after.relists <= before.relists)
                        fail_msg("%s: converged without a relist", t->name);
        }
        assert_true(ctl(client, "faults", "{\"slow_ms\": 0}") >= 0);
        kube_cache_stats(cache, &after);
        assert_true(after.events > 0);
        assert_true(after.bookmarks > 0);
        assert_true(after.reconnects > 0);
}

static void
cache_with_a_node_field_selector_holds_only_that_nodes_pods(void **state)
{
        CLEANUP(kube_cache_freep) struct kube_cache *cache =
                cache_new("spec.nodeName=node-00002", false);

        assert_true(ctl(client, "churn", "{\"n\": 60, \"seed\": 21}") >= 0);
        assert_converges(cache, "node-00002", false, "node-local cache");
}

static void
on_change(uint64_t generation, void *userdata)
{
        __atomic_store_n((uint64_t *)userdata, generation, __ATOMIC_RELEASE);
}

static void
snapshots_stay_unchanged_while_the_cache_moves_on(void **state)
{
        struct kube_cache_options o;
        struct kube_cache *cache = NULL;
        struct kube_snapshot *old, *cur;
        uint64_t seen = 0;
        size_t n_pods, first = 0;

        kube_cache_options_init(&o);
        o.on_change = on_change;
        o.userdata = &seen;
        assert_int_equal(kube_cache_new(client, &o, &cache), 0);
        assert_int_equal(kube_cache_wait_synced(cache, 20000), 0);
        assert_true(kube_cache_synced(cache));
        old = kube_cache_snapshot(cache);
        assert_non_null(old);
        assert_true(old->synced);
        cur = kube_cache_snapshot(cache);
        assert_ptr_equal(old, cur); /* same generation: the same snapshot */
        kube_snapshot_unref(cur);
        n_pods = old->n_pods;
        assert_non_null(kube_snapshot_node(old, "node-00001"));
        assert_null(kube_snapshot_node(old, "node-99999"));
        size_t on = kube_snapshot_pods_on_node(old, "node-00001", &first);
        for (size_t i = first; i < first + on; i++)
                assert_string_equal(old->pods[i]->node_name, "node-00001");
        assert_int_equal(kube_snapshot_pods_on_node(old, "node-99999", &first), 0);

        assert_true(ctl(client, "churn", "{\"n\": 50, \"seed\": 31}") >= 0);
        assert_converges(cache, NULL, true, "after churn");
        assert_true(__atomic_load_n(&seen, __ATOMIC_ACQUIRE) > old->generation);
        cur = kube_cache_snapshot(cache);
        assert_true(cur->generation > old->generation);
        assert_int_equal(old->n_pods, n_pods); /* the old view did not move */
        for (size_t i = 0; i < old->n_pods; i++)
                assert_non_null(old->pods[i]->uid);
        kube_snapshot_unref(cur);
        kube_cache_free(cache);
        /* A snapshot outlives its cache. */
        assert_non_null(kube_snapshot_node(old, "node-00001"));
        kube_snapshot_unref(old);
}

/* --- writes ------------------------------------------------------------------------ */

static void
create_pending_pod(const char *name, const char *uid)
{
        char body[512];
        struct kube_error err = { 0 };

        snprintf(body, sizeof(body),
                 "{\"metadata\":{\"name\":\"%s\",\"uid\":\"%s\"},\"spec\":{\"containers\":"
                 "[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]},"
                 "\"status\":{\"phase\":\"Pending\"}}", name, uid);
        if (kube_request(client, "POST", "/api/v1/namespaces/team/pods", "application/json", body,
                         strlen(body), NULL, NULL, &err) < 0)
                fail_msg("create %s: %s", name, err.message);
}

static void
bind_sets_the_node_and_copies_annotations_onto_the_pod(void **state)
{
        const struct kube_kv ann[] = {
                { "topofit.io/gpus", "0,1" },
                { "topofit.io/busbw", "371.2" },
        };
        CLEANUP(cJSON_Deletep) cJSON *pod = NULL;
        struct kube_error err = { 0 };
        const cJSON *a;

        create_pending_pod("bind-me", "uid-bind-1");
        assert_int_equal(kube_bind(client, "team", "bind-me", "uid-bind-1", "node-00004", ann,
                                   ELEMENTSOF(ann), &err), 0);
        assert_int_equal(kube_get(client, "/api/v1/namespaces/team/pods/bind-me", &pod, NULL), 0);
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "nodeName")
                                    ->valuestring, "node-00004");
        a = cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "annotations");
        assert_string_equal(cJSON_GetObjectItem(a, "topofit.io/gpus")->valuestring, "0,1");
        assert_string_equal(cJSON_GetObjectItem(a, "topofit.io/busbw")->valuestring, "371.2");
}

static void
bind_failures_are_clear_errors(void **state)
{
        static const struct {
                const char *name, *pod, *uid;
                int ret;
                const char *msg;
        } cases[] = {
                { "a UID that does not match", "bind-uid", "uid-wrong", -EEXIST, "Precondition" },
                { "a pod that is already bound", "bind-me", NULL, -EEXIST, "already assigned" },
                { "a pod that does not exist", "no-such-pod", NULL, -ENOENT, "not found" },
                { "an invalid pod name", "a/b", NULL, -EINVAL, "invalid" },
        };
        struct kube_error err;

        create_pending_pod("bind-uid", "uid-right");
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                memset(&err, 0, sizeof(err));
                int r = kube_bind(client, "team", cases[i].pod, cases[i].uid, "node-00001", NULL,
                                  0, &err);
                if (r != cases[i].ret || !strstr(err.message, cases[i].msg))
                        fail_msg("%s: %d '%s'", cases[i].name, r, err.message);
        }
}

static void
merge_and_json_patches_apply_including_the_status_subresource(void **state)
{
        static const struct {
                const char *name, *path;
                enum kube_patch_type type;
                const char *patch;
                int ret;
                const char *field, *want; /* "a.b.c" checked after the patch */
        } cases[] = {
                { "a merge patch adds an annotation", "/api/v1/nodes/node-00005", KUBE_PATCH_MERGE,
                  "{\"metadata\":{\"annotations\":{\"topofit.io/topology\":\"{}\"}}}", 0,
                  "metadata.annotations.topofit.io/topology", "{}" },
                { "a merge patch with null removes it", "/api/v1/nodes/node-00005", KUBE_PATCH_MERGE,
                  "{\"metadata\":{\"annotations\":{\"topofit.io/topology\":null}}}", 0,
                  "metadata.annotations.topofit.io/topology", NULL },
                { "a JSON patch replaces a label", "/api/v1/nodes/node-00005", KUBE_PATCH_JSON,
                  "[{\"op\":\"replace\",\"path\":\"/metadata/labels/kubernetes.io~1hostname\","
                  "\"value\":\"renamed\"}]", 0, "metadata.labels.kubernetes.io/hostname", "renamed" },
                { "a JSON patch test that fails is refused", "/api/v1/nodes/node-00005",
                  KUBE_PATCH_JSON, "[{\"op\":\"test\",\"path\":\"/spec/podCIDR\",\"value\":\"x\"}]",
                  -EINVAL, NULL, NULL },
                { "the status subresource takes a merge patch", "/api/v1/nodes/node-00005/status",
                  KUBE_PATCH_MERGE, "{\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"6\"}}}", 0,
                  "status.allocatable.nvidia.com/gpu", "6" },
                { "the main resource ignores status changes", "/api/v1/nodes/node-00005",
                  KUBE_PATCH_MERGE, "{\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"1\"}}}", 0,
                  "status.allocatable.nvidia.com/gpu", "6" },
                { "the status subresource takes a JSON patch", "/api/v1/nodes/node-00005/status",
                  KUBE_PATCH_JSON, "[{\"op\":\"add\",\"path\":\"/status/allocatable/nvidia.com~1gpu\","
                  "\"value\":\"3\"}]", 0, "status.allocatable.nvidia.com/gpu", "3" },
                { "a patch of a missing object", "/api/v1/nodes/nope", KUBE_PATCH_MERGE, "{}",
                  -ENOENT, NULL, NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                CLEANUP(cJSON_Deletep) cJSON *obj = NULL;
                struct kube_error err = { 0 };
                int r = kube_patch(client, cases[i].path, cases[i].type, cases[i].patch,
                                   strlen(cases[i].patch), &obj, &err);
                if (r != cases[i].ret)
                        fail_msg("%s: %d (%s)", cases[i].name, r, err.message);
                if (r < 0 || !cases[i].field)
                        continue;
                /* Walk "a.b.c" where the last part may contain dots (an annotation key). */
                const cJSON *cur = obj;
                char f[128];
                snprintf(f, sizeof(f), "%s", cases[i].field);
                char *p = f;
                for (int depth = 0; depth < 2; depth++) {
                        char *dot = strchr(p, '.');
                        *dot = 0;
                        cur = cJSON_GetObjectItem(cur, p);
                        p = dot + 1;
                }
                const cJSON *v = cJSON_GetObjectItem(cur, p);
                if (cases[i].want == NULL)
                        assert_null(v);
                else if (!cJSON_IsString(v) || strcmp(v->valuestring, cases[i].want) != 0)
                        fail_msg("%s: %s is not %s", cases[i].name, cases[i].field, cases[i].want);
        }
}

static void
an_event_can_be_posted(void **state)
{
        struct kube_error err = { 0 };

        assert_int_equal(kube_emit_event(client, "team", "bind-me", "uid-bind-1", "Normal",
                                         "TopofitPlaced", "GPUs 0,1 on node-00004", &err), 0);
}

/* --- auth and TLS ------------------------------------------------------------------- */

static void
gen_certs(void)
{
        char cmd[1200];

        snprintf(cmd, sizeof(cmd), "%s/test/fake-apiserver/gen-certs.sh '%s/pki'", source_root(),
                 tmpdir);
        assert_int_equal(system(cmd), 0);
}

static void
in_cluster_token_rotation_is_picked_up_after_a_401(void **state)
{
        char dir[600], tokpath[700], ca[700], port[16];
        struct server s = { 0 };
        struct kube_config *cfg = NULL;
        struct kube_client *c = NULL;
        struct kube_client_stats st;
        struct kube_error err = { 0 };
        const char *why = NULL;
        cJSON *j = NULL;

        gen_certs();
        snprintf(dir, sizeof(dir), "%s/sa", tmpdir);
        mkdir(dir, 0700);
        test_write_file(tmpdir, "sa/token", "token-one\n");
        snprintf(tokpath, sizeof(tokpath), "%s/token", dir);
        snprintf(ca, sizeof(ca), "cp '%s/pki/ca.crt' '%s/ca.crt'", tmpdir, dir);
        assert_int_equal(system(ca), 0);
        char cert[700], key[700];
        snprintf(cert, sizeof(cert), "%s/pki/server.crt", tmpdir);
        snprintf(key, sizeof(key), "%s/pki/server.key", tmpdir);
        const char *args[] = { "--nodes", "2", "--token-file", tokpath, "--tls-cert", cert,
                               "--tls-key", key, NULL };
        assert_int_equal(server_start(&s, "sa", args), 0);
        snprintf(port, sizeof(port), "%d", s.port);
        setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", port, 1);
        if (kube_config_in_cluster(dir, &cfg, &why) < 0)
                fail_msg("in-cluster: %s", why);
        assert_int_equal(kube_client_new(cfg, NULL, &c), 0);

        assert_int_equal(kube_get(c, "/api/v1/nodes", &j, &err), 0);
        cJSON_Delete(j);
        /* The kubelet rotates the projected token: the server now wants the new one. */
        test_write_file(tmpdir, "sa/token.new", "token-two\n");
        char mv[1500];
        snprintf(mv, sizeof(mv), "mv '%s/sa/token.new' '%s'", tmpdir, tokpath);
        assert_int_equal(system(mv), 0);
        assert_int_equal(kube_get(c, "/api/v1/nodes", &j, &err), 0);
        cJSON_Delete(j);
        kube_client_stats(c, &st);
        assert_int_equal(st.unauthorized, 1);
        assert_true(st.token_rereads >= 1);

        /* With a re-read before every request a rotation never costs a 401. */
        kube_client_free(c);
        cfg = NULL;
        test_write_file(tmpdir, "sa/token.new", "token-three\n");
        assert_int_equal(system(mv), 0);
        assert_int_equal(kube_config_in_cluster(dir, &cfg, &why), 0);
        kube_config_set_token_refresh(cfg, 0); /* re-read before every request */
        assert_int_equal(kube_client_new(cfg, NULL, &c), 0);
        assert_int_equal(kube_get(c, "/api/v1/nodes", &j, &err), 0); /* file = server's token */
        cJSON_Delete(j);
        kube_client_stats(c, &st);
        assert_int_equal(st.unauthorized, 0);
        assert_true(st.token_rereads >= 1);
        kube_client_free(c);
        server_stop(&s);
        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
}

struct tls_case {
        const char *name;
        const char *ca;     /* file under pki/ */
        bool client_cert;
        bool insecure;
        int ret;
};

static const struct tls_case tls_cases[] = {
        { "the CA and a client certificate", "ca.crt", true, false, 0 },
        { "the CA but no client certificate or token", "ca.crt", false, false, -EACCES },
        { "a CA that did not sign the server", "other-ca.crt", true, false, -EPROTO },
        { "insecure-skip-tls-verify with a client certificate", NULL, true, true, 0 },
};

static void
tls_with_a_ca_and_client_certificates(void **state)
{
        char cert[700], key[700], ca[700], path[700];
        struct server s = { 0 };

        gen_certs();
        snprintf(cert, sizeof(cert), "%s/pki/server.crt", tmpdir);
        snprintf(key, sizeof(key), "%s/pki/server.key", tmpdir);
        snprintf(ca, sizeof(ca), "%s/pki/ca.crt", tmpdir);
        const char *args[] = { "--nodes", "3", "--tls-cert", cert, "--tls-key", key,
                               "--client-ca", ca, "--token", "only-for-other-tests", NULL };
        assert_int_equal(server_start(&s, "tls", args), 0);
        for (size_t i = 0; i < ELEMENTSOF(tls_cases); i++) {
                const struct tls_case *t = &tls_cases[i];
                char text[2048];
                struct kube_config *cfg = NULL;
                struct kube_client *c = NULL;
                struct kube_error err = { 0 };
                const char *why = NULL;
                cJSON *j = NULL;
                int n = snprintf(text, sizeof(text),
                                 "current-context: t\ncontexts:\n- name: t\n  context: {cluster: "
                                 "k, user: u}\nclusters:\n- name: k\n  cluster:\n    server: "
                                 "https://127.0.0.1:%d\n", s.port);
                if (t->ca)
                        n += snprintf(text + n, sizeof(text) - (size_t)n,
                                      "    certificate-authority: pki/%s\n", t->ca);
                if (t->insecure)
                        n += snprintf(text + n, sizeof(text) - (size_t)n,
                                      "    insecure-skip-tls-verify: true\n");
                n += snprintf(text + n, sizeof(text) - (size_t)n, "users:\n- name: u\n  user:%s\n",
                              t->client_cert ? "" : " {}");
                if (t->client_cert)
                        snprintf(text + n, sizeof(text) - (size_t)n,
                                 "    client-certificate: pki/client.crt\n"
                                 "    client-key: pki/client.key\n");
                test_write_file(tmpdir, "kubeconfig-tls", text);
                snprintf(path, sizeof(path), "%s/kubeconfig-tls", tmpdir);
                if (kube_config_from_kubeconfig(path, NULL, &cfg, &why) < 0)
                        fail_msg("%s: kubeconfig: %s", t->name, why);
                assert_int_equal(kube_client_new(cfg, NULL, &c), 0);
                int r = kube_get(c, "/api/v1/nodes", &j, &err);
                if (r != t->ret)
                        fail_msg("%s: %d (%s)", t->name, r, err.message);
                if (r == 0)
                        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "items")), 3);
                cJSON_Delete(j);
                kube_client_free(c);
        }
        server_stop(&s);
}

static void
requests_identify_as_topofit_and_reuse_connections(void **state)
{
        CLEANUP(cJSON_Deletep) cJSON *st = NULL;
        struct kube_client_stats cs;
        const cJSON *ua;

        for (int i = 0; i < 5; i++) {
                cJSON *j = NULL;
                assert_int_equal(kube_get(client, "/api/v1/nodes/node-00001", &j, NULL), 0);
                cJSON_Delete(j);
        }
        assert_int_equal(kube_get(client, "/_control/state", &st, NULL), 0);
        ua = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "stats"), "user_agent");
        assert_true(cJSON_IsString(ua));
        assert_true(str_has_prefix(ua->valuestring, "topofit/"));
        kube_client_stats(client, &cs);
        assert_true(cs.requests >= 6);
        assert_true(cs.connections_opened < cs.requests);
}

static void
a_cache_against_a_dead_server_backs_off_instead_of_spinning(void **state)
{
        struct kube_client *c = client_plain(1); /* nothing listens on port 1 */
        struct kube_cache_options o;
        struct kube_cache *cache = NULL;
        struct kube_cache_stats st;

        kube_cache_options_init(&o);
        o.backoff_initial_ms = 50;
        o.backoff_max_ms = 400;
        o.watch_nodes = false;
        assert_int_equal(kube_cache_new(c, &o, &cache), 0);
        /* 50, 100, 200, 400, 400 ... ms (+-25%): a handful of attempts in 1.5 s, not
         * thousands, and never synced. */
        assert_int_equal(kube_cache_wait_synced(cache, 1500), -ETIMEDOUT);
        assert_false(kube_cache_synced(cache));
        kube_cache_stats(cache, &st);
        assert_true(st.errors >= 3);
        assert_true(st.errors <= 12);
        assert_int_equal(st.last_error, -ECONNREFUSED);
        kube_cache_free(cache);
        kube_client_free(c);
}

static void *
cancel_later(void *userdata)
{
        sleep_ms(200);
        atomic_store((atomic_bool *)userdata, true);
        return NULL;
}

static void
a_watch_is_cancelled_from_another_thread(void **state)
{
        atomic_bool cancel = false;
        struct watch_count wc = { 0 };
        struct kube_error err = { 0 };
        char *rv = current_rv(), *start = strdup(rv);
        struct kube_watch_options o = {
                .resource_version = start,
                .timeout_seconds = 60,
                .cancel = &cancel,
        };
        pthread_t t;

        assert_int_equal(pthread_create(&t, NULL, cancel_later, &cancel), 0);
        assert_int_equal(kube_watch(client, "/api/v1/nodes", &o, count_event, &wc, &rv, &err),
                         -ECANCELED);
        pthread_join(t, NULL);
        assert_non_null(strstr(err.message, "cancel"));
        free(rv);
        free(start);
}

/* Waits up to 5 s for the snapshot to hold n PodGroups; returns the last snapshot. */
static struct kube_snapshot *
wait_podgroups(struct kube_cache *cache, size_t n)
{
        struct kube_snapshot *ks = NULL;

        for (int i = 0; i < 100; i++) {
                kube_snapshot_unref(ks);
                ks = kube_cache_snapshot(cache);
                if (ks && ks->synced && ks->n_podgroups == n)
                        break;
                sleep_ms(50);
        }
        return ks;
}

/* node_labels_all (the extender's, for PodGroup topology keys known only later): a node's
 * every label reaches the snapshot, not only listed keys. */
static void
cache_keeps_every_node_label_when_asked(void **state)
{
        static const char *const listed[] = { "nvidia.com/gpu.product", NULL };
        struct kube_cache *cache = NULL;
        struct kube_cache_options o;
        struct kube_snapshot *ks;
        const struct kube_node *n;
        bool zone = false, product = false;

        kube_cache_options_init(&o);
        o.watch_pods = false;
        o.node_labels = listed;
        o.node_labels_all = true;
        assert_int_equal(kube_cache_new(client, &o, &cache), 0);
        assert_int_equal(kube_cache_wait_synced(cache, 5000), 0);
        ks = kube_cache_snapshot(cache);
        n = kube_snapshot_node(ks, "node-00001");
        assert_non_null(n);
        for (uint32_t k = 0; k < n->n_labels; k++) {
                zone = zone || (strcmp(n->labels[k].key, "topology.kubernetes.io/zone") == 0 &&
                                strcmp(n->labels[k].value, "zone-1") == 0);
                product = product || strcmp(n->labels[k].key, "nvidia.com/gpu.product") == 0;
        }
        assert_true(zone);
        assert_true(product);
        kube_snapshot_unref(ks);
        kube_cache_free(cache);
}

/* PodGroups: found by discovery, listed, watched (create, delete); against a server without
 * them, the cache syncs with none and no error. */
#define PG_JSON                                                                            \
        "{\"apiVersion\":\"scheduling.k8s.io/v1beta1\",\"kind\":\"PodGroup\","                \
        "\"metadata\":{\"name\":\"gang\",\"namespace\":\"ml\"},\"spec\":"                   \
        "{\"schedulingPolicy\":{\"gang\":{\"minCount\":%d}}}}"
static void
cache_watches_podgroups_where_the_server_serves_them(void **state)
{
        static const char *const args[] = { "--nodes", "2", "--podgroups", NULL };
        struct server s = { 0 };
        struct kube_client *c;
        struct kube_cache *cache = NULL;
        struct kube_cache_options o;
        struct kube_cache_stats st;
        struct kube_snapshot *ks;
        const struct kube_podgroup *g;
        struct kube_error err = { 0 };
        char body[512];

        /* The shared server has no PodGroup API: synced, none, no error. */
        kube_cache_options_init(&o);
        o.watch_podgroups = true;
        assert_int_equal(kube_cache_new(client, &o, &cache), 0);
        assert_int_equal(kube_cache_wait_synced(cache, 5000), 0);
        kube_cache_stats(cache, &st);
        assert_non_null(st.podgroup_api);
        assert_string_equal(st.podgroup_api, "");
        assert_int_equal(st.n_podgroups, 0);
        assert_int_equal(st.last_error, 0);
        cache = kube_cache_free(cache);

        assert_int_equal(server_start(&s, "podgroups", args), 0);
        c = client_plain(s.port);
        snprintf(body, sizeof(body), PG_JSON, 3);
        assert_true(kube_request(c, "POST", "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups",
                                 "application/json", body, strlen(body), NULL, NULL, &err) >= 0);
        o.backoff_initial_ms = 50;
        assert_int_equal(kube_cache_new(c, &o, &cache), 0);
        assert_int_equal(kube_cache_wait_synced(cache, 5000), 0);
        ks = wait_podgroups(cache, 1);
        assert_int_equal(ks->n_podgroups, 1);
        g = kube_snapshot_podgroup(ks, "ml", "gang");
        assert_non_null(g);
        assert_int_equal(g->min_count, 3);
        assert_null(kube_snapshot_podgroup(ks, "ml", "other"));
        kube_snapshot_unref(ks);
        kube_cache_stats(cache, &st);
        assert_string_equal(st.podgroup_api, "scheduling.k8s.io/v1beta1");

        /* A second one by the watch, then the first deleted. */
        snprintf(body, sizeof(body), PG_JSON, 5);
        *strstr(body, "gang") = 'h'; /* "hang" */
        assert_true(kube_request(c, "POST", "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups",
                                 "application/json", body, strlen(body), NULL, NULL, &err) >= 0);
        ks = wait_podgroups(cache, 2);
        assert_int_equal(ks->n_podgroups, 2);
        assert_int_equal(kube_snapshot_podgroup(ks, "ml", "hang")->min_count, 5);
        kube_snapshot_unref(ks);
        assert_true(kube_request(c, "DELETE", "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups/gang",
                                 NULL, NULL, 0, NULL, NULL, &err) >= 0);
        ks = wait_podgroups(cache, 1);
        assert_int_equal(ks->n_podgroups, 1);
        assert_null(kube_snapshot_podgroup(ks, "ml", "gang"));
        kube_snapshot_unref(ks);
        /* PodGroups are not served under /api/v1. */
        assert_int_equal(kube_request(c, "GET", "/api/v1/podgroups", NULL, NULL, 0, NULL, NULL,
                                      &err), -ENOENT);
        kube_cache_free(cache);
        kube_client_free(c);
        server_stop(&s);
}

static void
a_server_that_is_down_is_econnrefused(void **state)
{
        struct kube_client *c = client_plain(1); /* nothing listens on port 1 */
        struct kube_error err = { 0 };
        cJSON *j = NULL;

        assert_int_equal(kube_get(c, "/api/v1/nodes", &j, &err), -ECONNREFUSED);
        assert_int_equal(err.http_status, 0);
        assert_true(err.message[0] != 0);
        kube_client_free(c);
}

int
main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(list_follows_continue_tokens_across_pages),
                cmocka_unit_test(list_with_field_selector_returns_only_matching_pods),
                cmocka_unit_test(list_with_expired_continue_token_is_stale),
                cmocka_unit_test(get_of_a_missing_object_is_enoent_with_the_server_message),
                cmocka_unit_test(watch_delivers_changes_and_bookmarks_until_the_timeout),
                cmocka_unit_test(watch_faults_end_the_watch_with_clear_errors),
                cmocka_unit_test(cache_converges_to_the_server_after_every_fault),
                cmocka_unit_test(cache_with_a_node_field_selector_holds_only_that_nodes_pods),
                cmocka_unit_test(snapshots_stay_unchanged_while_the_cache_moves_on),
                cmocka_unit_test(bind_sets_the_node_and_copies_annotations_onto_the_pod),
                cmocka_unit_test(bind_failures_are_clear_errors),
                cmocka_unit_test(merge_and_json_patches_apply_including_the_status_subresource),
                cmocka_unit_test(an_event_can_be_posted),
                cmocka_unit_test(in_cluster_token_rotation_is_picked_up_after_a_401),
                cmocka_unit_test(tls_with_a_ca_and_client_certificates),
                cmocka_unit_test(requests_identify_as_topofit_and_reuse_connections),
                cmocka_unit_test(a_cache_against_a_dead_server_backs_off_instead_of_spinning),
                cmocka_unit_test(a_watch_is_cancelled_from_another_thread),
                cmocka_unit_test(a_server_that_is_down_is_econnrefused),
                cmocka_unit_test(cache_keeps_every_node_label_when_asked),
                cmocka_unit_test(cache_watches_podgroups_where_the_server_serves_them),
        };
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, setup, teardown);
}
