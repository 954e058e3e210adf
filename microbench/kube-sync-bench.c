/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube-client sync benchmark: starts test/fake-apiserver with a generated cluster (by
 * default 5,000 nodes and 100,000 pods), then measures, for the cache this process holds:
 * the initial LIST+sync time, RSS after sync (and the peak), the snapshot build time, and
 * watch events applied per second (the server generates a burst of changes; the client's
 * CPU time is reported too, since the Python server may be the slower side).  Prints a
 * Markdown table for docs/performance.md.
 *
 * Usage: kube-sync-bench [NODES PODS EVENTS]   (run from the build dir or with
 *        TOPOFIT_SOURCE_ROOT pointing at the source tree)
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kube.h"

static double
now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double
cpu_s(void)
{
        struct rusage ru;

        getrusage(RUSAGE_SELF, &ru);
        return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* VmRSS or VmHWM from /proc/self/status, in MiB. */
static double
proc_mib(const char *field)
{
        char line[256];
        double kib = -1;
        FILE *f = fopen("/proc/self/status", "r");

        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, field, strlen(field)) == 0)
                        kib = strtod(line + strlen(field) + 1, NULL);
        fclose(f);
        return kib / 1024;
}

int
main(int argc, char **argv)
{
        const char *root = getenv("TOPOFIT_SOURCE_ROOT");
        const char *nodes = argc > 1 ? argv[1] : "5000", *pods = argc > 2 ? argv[2] : "100000";
        unsigned events = argc > 3 ? (unsigned)atoi(argv[3]) : 20000;
        char script[1024], portfile[] = "/tmp/kube-sync-bench-XXXXXX", url[128], body[128];
        struct kube_config *cfg = NULL;
        struct kube_client *client = NULL;
        struct kube_cache *cache = NULL;
        struct kube_cache_options o;
        struct kube_cache_stats st0, st1;
        struct kube_snapshot *snap;
        int port = 0, fd, r;
        pid_t pid;
        FILE *f;

        snprintf(script, sizeof(script), "%s/test/fake-apiserver/fake-apiserver.py",
                 root ? root : "..");
        fd = mkstemp(portfile);
        if (fd < 0)
                return 1;
        close(fd);
        unlink(portfile);
        pid = fork();
        if (pid == 0) {
                /* The server dies with us, even when we crash or time out. */
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                int devnull = open("/dev/null", O_WRONLY);
                dup2(devnull, STDOUT_FILENO);
                execl("/usr/bin/python3", "python3", script, "--port-file", portfile, "--nodes",
                      nodes, "--pods", pods, "--bookmark-interval", "60", (char *)NULL);
                _exit(127);
        }
        fprintf(stderr, "kube-sync-bench: generating %s nodes and %s pods...\n", nodes, pods);
        for (int i = 0; i < 1200 && port == 0; i++) {
                struct timespec ts = { 0, 100000000 };
                if ((f = fopen(portfile, "r"))) {
                        if (fscanf(f, "%d", &port) != 1)
                                port = 0;
                        fclose(f);
                }
                if (!port)
                        nanosleep(&ts, NULL);
        }
        unlink(portfile);
        if (!port) {
                fprintf(stderr, "kube-sync-bench: the fake server did not start\n");
                kill(pid, SIGTERM);
                return 1;
        }
        /* A plain-HTTP kubeconfig, written beside the port file. */
        char kc[256];
        snprintf(kc, sizeof(kc), "%s.kubeconfig", portfile);
        f = fopen(kc, "w");
        fprintf(f, "current-context: b\ncontexts:\n- name: b\n  context: {cluster: b}\n"
                   "clusters:\n- name: b\n  cluster: {server: 'http://127.0.0.1:%d'}\n", port);
        fclose(f);
        snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
        r = kube_config_load(kc, &cfg, NULL);
        unlink(kc);
        if (r < 0 || kube_client_new(cfg, NULL, &client) < 0)
                return 1;

        double rss_before = proc_mib("VmRSS");
        double t0 = now_s(), c0 = cpu_s();
        kube_cache_options_init(&o);
        if (kube_cache_new(client, &o, &cache) < 0 || kube_cache_wait_synced(cache, 600000) < 0) {
                fprintf(stderr, "kube-sync-bench: no sync\n");
                kill(pid, SIGTERM);
                return 1;
        }
        double sync_s = now_s() - t0, sync_cpu = cpu_s() - c0;
        double t1 = now_s();
        snap = kube_cache_snapshot(cache);
        double snap_ms = (now_s() - t1) * 1000;
        size_t n_nodes = snap->n_nodes, n_pods = snap->n_pods;
        kube_snapshot_unref(snap);
        double rss_sync = proc_mib("VmRSS"), hwm_sync = proc_mib("VmHWM");

        /* Watch throughput: a burst of server-side changes, timed until all are applied. */
        kube_cache_stats(cache, &st0);
        snprintf(body, sizeof(body), "{\"n\": %u, \"seed\": 9}", events);
        double t2 = now_s(), c2 = cpu_s();
        r = kube_request(client, "POST", "/_control/churn", "application/json", body,
                         strlen(body), NULL, NULL, NULL);
        double gen_s = now_s() - t2;
        do {
                struct timespec ts = { 0, 2000000 };
                nanosleep(&ts, NULL);
                kube_cache_stats(cache, &st1);
        } while (r >= 0 && st1.events - st1.bookmarks - (st0.events - st0.bookmarks) < events &&
                 now_s() - t2 < 300);
        double watch_s = now_s() - t2, watch_cpu = cpu_s() - c2;
        uint64_t applied = st1.events - st1.bookmarks - (st0.events - st0.bookmarks);
        double t3 = now_s();
        snap = kube_cache_snapshot(cache);
        double snap2_ms = (now_s() - t3) * 1000;
        kube_snapshot_unref(snap);
        double rss_end = proc_mib("VmRSS"), hwm_end = proc_mib("VmHWM");

        kube_cache_free(cache);
        kube_client_free(client);
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);

        printf("| measure | value |\n|---|---|\n");
        printf("| cluster (nodes / pods in the cache) | %zu / %zu |\n", n_nodes, n_pods);
        printf("| initial sync, wall (LIST pages of %u, both resources) | %.2f s |\n",
               KUBE_LIST_PAGE_DEFAULT, sync_s);
        printf("| initial sync, client CPU | %.2f s |\n", sync_cpu);
        printf("| RSS before the cache / after sync / peak during sync | %.1f / %.1f / %.1f MiB |\n",
               rss_before, rss_sync, hwm_sync);
        printf("| first snapshot build (sorted, %zu objects) | %.1f ms |\n", n_nodes + n_pods,
               snap_ms);
        printf("| watch events applied | %llu in %.2f s (server generated them in %.2f s) |\n",
               (unsigned long long)applied, watch_s, gen_s);
        printf("| watch events per second, wall, after generation (the Python server bounds it) | %.0f |\n",
               (double)applied / (watch_s - gen_s));
        printf("| watch events per client CPU second | %.0f |\n",
               watch_cpu > 0 ? (double)applied / watch_cpu : 0);
        printf("| snapshot rebuild after the burst | %.1f ms |\n", snap2_ms);
        printf("| RSS after the burst / peak overall | %.1f / %.1f MiB |\n", rss_end, hwm_end);
        return applied >= events ? 0 : 2;
}
