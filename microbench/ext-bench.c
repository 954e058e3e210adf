/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The extender request benchmark: generates a cluster (N nodes cycling through real
 * topology classes, P pods, some GPUs in use), starts the real topofit-extender on it in
 * static mode on loopback, and measures filter + prioritize as kube-scheduler sends them:
 * latency p50/p99 over one keep-alive connection and requests/s with several client
 * threads, in nodeCacheCapable mode (NodeNames) or full mode (Nodes of about 10 KB each);
 * then the server's RSS.  Bounded: every run sends a fixed number of requests.
 * Usage: topofit-ext-bench EXTENDER_BINARY SHARED_DIR [nodes] [pods] [mode names|full]
 *                          [requests]
 * TOPOFIT_BENCH_PEER=path/to/goext also runs the same bodies against the Go peer.
 * EXTENDER_BINARY "--dump" writes the filter body to stdout and exits (the JSON reader
 * benchmark, json-bench, parses these bodies).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "demo-http.h"
#include "ext-core.h"
#include "file.h"
#include "str.h"

#define BENCH_MAX_NODES 10000
#define BENCH_MAX_PODS 200000
#define BENCH_MAX_REQUESTS 100000
#define BENCH_CLIENT_THREADS 2
#define BENCH_NODE_PAD_BYTES 11500 /* managedFields-like filler: full Node objects ~10 KB */
#define BENCH_MAX_BODY (64u << 20)
#define BENCH_MAX_CLUSTER_FILE (512u << 20) /* the in-process run's cluster.json */

static const char *const classes[] = {
        "dgx-h100-12nic-talos.txt",
        "dgx1-v100-sxm2-oneflow.txt",
        "rtx4090-8gpu-pcie-server.txt",
        "a800-sxm4-8gpu-4nic.txt",
};

static const char pod_json[] =
        "{\"metadata\":{\"name\":\"bench-pod\",\"namespace\":\"default\","
        "\"uid\":\"b0000000-0000-4000-8000-000000000001\",\"resourceVersion\":\"202\","
        "\"creationTimestamp\":\"2026-11-22T12:13:47Z\",\"labels\":{\"app\":\"gpu-test\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"registry.k8s.io/pause:3.2\","
        "\"resources\":{\"limits\":{\"cpu\":\"100m\",\"memory\":\"64Mi\",\"nvidia.com/gpu\":\"2\"},"
        "\"requests\":{\"cpu\":\"100m\",\"memory\":\"64Mi\",\"nvidia.com/gpu\":\"2\"}},"
        "\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\","
        "\"imagePullPolicy\":\"IfNotPresent\"}],\"restartPolicy\":\"Always\","
        "\"terminationGracePeriodSeconds\":30,\"dnsPolicy\":\"ClusterFirst\",\"securityContext\":{},"
        "\"schedulerName\":\"default-scheduler\",\"priority\":0,\"enableServiceLinks\":true,"
        "\"preemptionPolicy\":\"PreemptLowerPriority\"},\"status\":{\"phase\":\"Pending\","
        "\"qosClass\":\"Guaranteed\"}}";

static uint64_t
now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A deterministic generator (xorshift), so every run builds the same cluster. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t
rng(void)
{
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return rng_state;
}

static char *
annotation_of(const char *data_dir, const char *file)
{
        char path[4096], *json = NULL;
        CLEANUP(freep) char *text = NULL;
        struct topo *t = NULL;
        size_t n, jlen;

        snprintf(path, sizeof(path), "%s/topologies/%s", data_dir, file);
        if (file_read_capped(path, TOPO_MAX_TEXT_BYTES, &text, &n) < 0)
                return NULL;
        if (topo_parse_any(text, n, &t, NULL) < 0)
                return NULL;
        if (topo_to_annotation(t, &json, &jlen) < 0)
                json = NULL;
        topo_unref(t);
        return json;
}

/* One Node object; padded with a managedFields-like filler when pad is set. */
static int
node_json(struct buf *b, unsigned i, const char *annotation, bool pad)
{
        int r = buf_printf(b, "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
                              "\"gpu-node-%05u\",\"uid\":\"00000000-0000-4000-8000-%012u\","
                              "\"labels\":{\"kubernetes.io/hostname\":\"gpu-node-%05u\","
                              "\"kubernetes.io/os\":\"linux\"},\"annotations\":{\""
                              TOPO_ANNOTATION_KEY "\":",
                           i, i, i);

        if (r >= 0)
                r = buf_put_json_string(b, annotation);
        if (r >= 0)
                r = buf_puts(b, "}");
        if (r >= 0 && pad) {
                r = buf_puts(b, ",\"managedFields\":[{\"manager\":\"kubelet\",\"operation\":"
                                "\"Update\",\"apiVersion\":\"v1\",\"fieldsType\":\"FieldsV1\","
                                "\"fieldsV1\":{");
                for (unsigned k = 0; r >= 0 && k < BENCH_NODE_PAD_BYTES / 40; k++)
                        r = buf_printf(b, "%s\"f:field-%04u\":{\"f:x\":{}}", k ? "," : "", k);
                if (r >= 0)
                        r = buf_puts(b, "}}]");
        }
        if (r >= 0)
                r = buf_puts(b, "},\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"},"
                                "\"allocatable\":{\"nvidia.com/gpu\":\"8\",\"cpu\":\"96\","
                                "\"memory\":\"1000Gi\",\"pods\":\"110\"},\"conditions\":[{\"type\":"
                                "\"Ready\",\"status\":\"True\"}]}}");
        return r;
}

static int
write_cluster(const char *path, char **annotations, unsigned n_nodes, unsigned n_pods)
{
        struct buf b;
        FILE *f;
        int r;

        buf_init(&b, 512u << 20);
        r = buf_puts(&b, "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[");
        for (unsigned i = 0; r >= 0 && i < n_nodes; i++) {
                if (i)
                        r = buf_puts(&b, ",\n");
                if (r >= 0)
                        r = node_json(&b, i, annotations[i % ELEMENTSOF(classes)], false);
        }
        /* A quarter of the pods hold one GPU (where the node has one left), the rest none. */
        unsigned char *taken = calloc(n_nodes ? n_nodes : 1, 1);
        for (unsigned p = 0; r >= 0 && p < n_pods; p++) {
                unsigned node = (unsigned)(rng() % n_nodes);
                char gpus[160] = "";

                if (p % 4 == 0 && taken[node] < 6) {
                        snprintf(gpus, sizeof(gpus),
                                 ",\"annotations\":{\"" TOPO_GPUS_KEY "\":\"{\\\"version\\\":1,"
                                 "\\\"containers\\\":[{\\\"name\\\":\\\"c\\\",\\\"indices\\\":[%u]}]}\"}",
                                 (unsigned)taken[node]);
                        taken[node]++;
                }
                r = buf_printf(&b, ",\n{\"kind\":\"Pod\",\"metadata\":{\"name\":\"pod-%06u\","
                                   "\"namespace\":\"bench\",\"uid\":\"pod-uid-%06u\"%s},"
                                   "\"spec\":{\"nodeName\":\"gpu-node-%05u\",\"containers\":[]},"
                                   "\"status\":{\"phase\":\"Running\"}}",
                               p, p, gpus, node);
        }
        free(taken);
        if (r >= 0)
                r = buf_puts(&b, "]}\n");
        f = r >= 0 ? fopen(path, "we") : NULL;
        if (!f || fwrite(b.data, 1, b.len, f) != b.len || fclose(f) != 0)
                r = r < 0 ? r : -EIO;
        buf_release(&b);
        return r;
}

static int
args_json(struct buf *b, char **annotations, unsigned n_nodes, bool full)
{
        int r = buf_puts(b, "{\"Pod\":");

        if (r >= 0)
                r = buf_puts(b, pod_json);
        if (full) {
                r = buf_puts(b, ",\"Nodes\":{\"metadata\":{},\"items\":[");
                for (unsigned i = 0; r >= 0 && i < n_nodes; i++) {
                        if (i)
                                r = buf_puts(b, ",");
                        if (r >= 0)
                                r = node_json(b, i, annotations[i % ELEMENTSOF(classes)], true);
                }
                if (r >= 0)
                        r = buf_puts(b, "]},\"NodeNames\":null}");
        } else {
                r = buf_puts(b, ",\"Nodes\":null,\"NodeNames\":[");
                for (unsigned i = 0; r >= 0 && i < n_nodes; i++)
                        r = buf_printf(b, "%s\"gpu-node-%05u\"", i ? "," : "", i);
                if (r >= 0)
                        r = buf_puts(b, "]}");
        }
        return r;
}

static int
cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

static long
rss_kib(pid_t pid)
{
        char path[64], line[256];
        long kib = -1;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %ld", &kib) == 1)
                        break;
        fclose(f);
        return kib;
}

/* The server's CPU time (user + system) so far, in ms: steadier than wall time on a
 * shared machine. */
static double
cpu_ms(pid_t pid)
{
        char path[64], buf[1024], *p;
        unsigned long ut = 0, st = 0;
        FILE *f;
        size_t n;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
                return 0;
        return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

static uint64_t
thread_cpu_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The decision path in process, without HTTP: decode, resolve, verb, encode, as the
 * handler does it, timed in thread CPU time (what the machine's other load cannot
 * inflate much).  Writes p50/p99 in ms for filter and prioritize. */
static int
in_process(const char *cluster_path, const struct buf *filter, const struct buf *prio,
           unsigned rounds, double ret[4])
{
        struct ext_config cfg;
        struct ext_cluster *c = NULL;
        struct ext_ledger *l;
        struct buf out;
        uint64_t *lat[2];
        char *file;
        size_t n;
        int r;

        ext_config_default(&cfg);
        r = file_read_capped(cluster_path, BENCH_MAX_CLUSTER_FILE, &file, &n);
        if (r >= 0) {
                r = ext_cluster_decode(file, n, &cfg, NULL, 1, &c, NULL);
                free(file);
        }
        if (r < 0)
                return r;
        l = ext_ledger_new(&cfg);
        lat[0] = calloc(rounds, sizeof(uint64_t));
        lat[1] = calloc(rounds, sizeof(uint64_t));
        buf_init(&out, BENCH_MAX_BODY);
        for (unsigned i = 0; l && lat[0] && lat[1] && i < rounds; i++)
                for (int verb = 0; verb < 2; verb++) {
                        const struct buf *body = verb ? prio : filter;
                        struct ext_args a;
                        const struct ext_node **nodes;
                        struct ext_verdict *v;
                        uint32_t *rep;
                        uint64_t t0 = thread_cpu_ns();

                        if (ext_args_decode(body->data, body->len, &cfg, &a, NULL) < 0)
                                return -EINVAL;
                        nodes = malloc(a.n * sizeof(*nodes));
                        v = malloc(a.n * sizeof(*v));
                        rep = malloc(a.n * sizeof(*rep));
                        for (size_t k = 0; k < a.n; k++)
                                nodes[k] = ext_cluster_find_node(c, a.names[k]);
                        buf_reset(&out);
                        /* As the HTTP handler does: compact verdicts. */
                        if (verb) {
                                ext_prioritize_rep(c, l, &cfg, &a.req, nodes, a.n, 0, v, rep);
                                ext_priorities_encode(&a, v, rep, &out);
                        } else {
                                ext_filter_rep(c, l, &cfg, &a.req, nodes, a.n, 0, v, rep);
                                ext_filter_result_encode(&a, v, rep, NULL, &out);
                        }
                        free(nodes);
                        free(v);
                        free(rep);
                        ext_args_release(&a);
                        lat[verb][i] = thread_cpu_ns() - t0;
                }
        for (int verb = 0; verb < 2; verb++) {
                qsort(lat[verb], rounds, sizeof(uint64_t), cmp_u64);
                ret[verb * 2] = (double)lat[verb][rounds / 2] / 1e6;
                ret[verb * 2 + 1] = (double)lat[verb][(size_t)((double)(rounds - 1) * 0.99)] / 1e6;
        }
        free(lat[0]);
        free(lat[1]);
        buf_release(&out);
        ext_ledger_free(l);
        ext_cluster_unref(c);
        return 0;
}

struct load {
        unsigned port;
        const struct buf *filter, *prio;
        unsigned n;
        unsigned errors;
};

static void *
load_run(void *arg)
{
        struct load *l = arg;
        struct demo_http h;
        struct buf out;
        int status;

        buf_init(&out, BENCH_MAX_BODY);
        if (demo_http_connect(&h, "127.0.0.1", l->port) < 0) {
                l->errors = l->n;
                return NULL;
        }
        for (unsigned i = 0; i < l->n; i++) {
                const struct buf *b = i % 2 ? l->prio : l->filter;

                if (demo_http_request(&h, "POST", i % 2 ? "/prioritize" : "/filter", b->data, b->len,
                                      &status, &out) < 0 || status != 200)
                        l->errors++;
        }
        demo_http_close(&h);
        buf_release(&out);
        return NULL;
}

/* A free loopback port (bound and released: another process could take it meanwhile,
 * which only makes the peer fail to start). */
static unsigned
free_port(void)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        unsigned port = 0;

        if (fd < 0)
                return 0;
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
            getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
                port = ntohs(sa.sin_port);
        close(fd);
        return port;
}

/* The same requests against the Go peer extender (built by scripts/e2e-build): latency over one
 * connection, then throughput; prints its numbers and the ratios to ours. */
static void
measure_peer(const char *peer, const struct buf *filter, const struct buf *prio, unsigned requests,
             double our_f50, double our_p50, double our_rps)
{
        unsigned port = free_port();
        char port_s[16];
        struct demo_http h;
        struct buf out;
        uint64_t *lf = calloc(requests / 2, sizeof(uint64_t)), *lp = calloc(requests / 2, sizeof(uint64_t));
        uint64_t t0, t_total;
        unsigned errors = 0;
        int status = 0, up = 0;
        pid_t pid;

        snprintf(port_s, sizeof(port_s), "%u", port);
        pid = fork();
        if (pid == 0) {
                execl(peer, peer, "-port", port_s, (char *)NULL);
                _exit(127);
        }
        buf_init(&out, BENCH_MAX_BODY);
        for (int i = 0; i < 200 && !up; i++) {
                if (demo_http_connect(&h, "127.0.0.1", port) == 0) {
                        up = demo_http_request(&h, "GET", "/healthz", NULL, 0, &status, &out) == 0 &&
                             status == 200;
                        demo_http_close(&h);
                }
                if (!up)
                        usleep(50000);
        }
        if (!up || !lf || !lp || demo_http_connect(&h, "127.0.0.1", port) < 0) {
                fprintf(stderr, "bench: the peer %s did not start\n", peer);
                goto out;
        }
        for (unsigned i = 0; i < 20; i++)
                demo_http_request(&h, "POST", "/filter", filter->data, filter->len, &status, &out);
        for (unsigned i = 0; i < requests / 2; i++) {
                t0 = now_ns();
                errors += demo_http_request(&h, "POST", "/filter", filter->data, filter->len, &status,
                                            &out) < 0 || status != 200;
                lf[i] = now_ns() - t0;
                t0 = now_ns();
                errors += demo_http_request(&h, "POST", "/prioritize", prio->data, prio->len, &status,
                                            &out) < 0 || status != 200;
                lp[i] = now_ns() - t0;
        }
        demo_http_close(&h);
        {
                pthread_t th[BENCH_CLIENT_THREADS];
                struct load ld[BENCH_CLIENT_THREADS];

                t0 = now_ns();
                for (unsigned k = 0; k < BENCH_CLIENT_THREADS; k++) {
                        ld[k] = (struct load){ .port = port, .filter = filter, .prio = prio,
                                               .n = requests / BENCH_CLIENT_THREADS };
                        pthread_create(&th[k], NULL, load_run, &ld[k]);
                }
                for (unsigned k = 0; k < BENCH_CLIENT_THREADS; k++) {
                        pthread_join(th[k], NULL);
                        errors += ld[k].errors;
                }
                t_total = now_ns() - t0;
        }
        qsort(lf, requests / 2, sizeof(*lf), cmp_u64);
        qsort(lp, requests / 2, sizeof(*lp), cmp_u64);
        {
                double f50 = (double)lf[requests / 4] / 1e6, p50 = (double)lp[requests / 4] / 1e6;
                double f99 = (double)lf[(size_t)((double)(requests / 2 - 1) * 0.99)] / 1e6;
                double p99 = (double)lp[(size_t)((double)(requests / 2 - 1) * 0.99)] / 1e6;
                double rps = (double)requests / ((double)t_total / 1e9);

                printf("peer %s (same bodies, errors=%u)\n", peer, errors);
                printf("  filter      p50 %.3f ms  p99 %.3f ms\n", f50, f99);
                printf("  prioritize  p50 %.3f ms  p99 %.3f ms\n", p50, p99);
                printf("  throughput  %.0f requests/s\n", rps);
                printf("  ratio peer/topofit: filter p50 %.2fx, prioritize p50 %.2fx, "
                       "throughput %.2fx\n", f50 / our_f50, p50 / our_p50, rps / our_rps);
        }
out:
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        buf_release(&out);
        free(lf);
        free(lp);
}

int
main(int argc, char **argv)
{
        unsigned n_nodes = 500, n_pods = 0, requests = 400;
        char *annotations[ELEMENTSOF(classes)];
        char dir[] = "/tmp/topofit-ext-bench-XXXXXX", cluster[128], portfile[128];
        struct buf filter, prio, out;
        struct demo_http h;
        uint64_t *lat_f, *lat_p, t0, t_total;
        bool full = false;
        pid_t pid;
        unsigned port = 0, errors = 0;
        long rss_loaded, rss_after;
        double cpu0, cpu1;
        int64_t v;
        int status, r;

        if (argc < 3) {
                fprintf(stderr, "Usage: %s EXTENDER SHARED [nodes] [pods] [names|full] [requests]\n",
                        argv[0]);
                return 2;
        }
        if (argc > 3 && str_to_int64(argv[3], strlen(argv[3]), 1, BENCH_MAX_NODES, &v) == 0)
                n_nodes = (unsigned)v;
        if (argc > 4 && str_to_int64(argv[4], strlen(argv[4]), 0, BENCH_MAX_PODS, &v) == 0)
                n_pods = (unsigned)v;
        if (argc > 5)
                full = strcmp(argv[5], "full") == 0;
        if (argc > 6 && str_to_int64(argv[6], strlen(argv[6]), 2, BENCH_MAX_REQUESTS, &v) == 0)
                requests = (unsigned)v & ~1u;
        for (size_t i = 0; i < ELEMENTSOF(classes); i++) {
                annotations[i] = annotation_of(argv[2], classes[i]);
                if (!annotations[i]) {
                        fprintf(stderr, "bench: cannot make the annotation of %s\n", classes[i]);
                        return 1;
                }
        }
        if (strcmp(argv[1], "--dump") == 0) {
                buf_init(&filter, BENCH_MAX_BODY);
                r = args_json(&filter, annotations, n_nodes, full);
                if (r >= 0 && fwrite(filter.data, 1, filter.len, stdout) != filter.len)
                        r = -EIO;
                buf_release(&filter);
                return r < 0;
        }
        if (!mkdtemp(dir))
                return 1;
        snprintf(cluster, sizeof(cluster), "%s/cluster.json", dir);
        snprintf(portfile, sizeof(portfile), "%s/port", dir);
        if (write_cluster(cluster, annotations, n_nodes, n_pods) < 0) {
                fprintf(stderr, "bench: cannot write the cluster\n");
                return 1;
        }

        pid = fork();
        if (pid == 0) {
                execl(argv[1], argv[1], "--cluster", cluster, "--listen", "127.0.0.1:0", "--port-file",
                      portfile, "--threads", "2", "--log-level", "warn", (char *)NULL);
                _exit(127);
        }
        for (int i = 0; i < 600 && !port; i++) {
                FILE *f = fopen(portfile, "re");

                if (f) {
                        if (fscanf(f, "%u", &port) != 1)
                                port = 0;
                        fclose(f);
                }
                if (!port)
                        usleep(50000);
        }
        if (!port) {
                fprintf(stderr, "bench: the extender did not start\n");
                kill(pid, SIGTERM);
                waitpid(pid, NULL, 0);
                return 1;
        }
        rss_loaded = rss_kib(pid);

        buf_init(&filter, BENCH_MAX_BODY);
        buf_init(&prio, BENCH_MAX_BODY);
        buf_init(&out, BENCH_MAX_BODY);
        r = args_json(&filter, annotations, n_nodes, full);
        if (r >= 0)
                r = args_json(&prio, annotations, n_nodes, full);
        lat_f = calloc(requests, sizeof(*lat_f));
        lat_p = calloc(requests, sizeof(*lat_p));
        if (r < 0 || !lat_f || !lat_p || demo_http_connect(&h, "127.0.0.1", port) < 0) {
                fprintf(stderr, "bench: setup failed\n");
                kill(pid, SIGTERM);
                waitpid(pid, NULL, 0);
                return 1;
        }

        /* Warm-up (memos, page faults), then latency over one connection. */
        for (unsigned i = 0; i < 20; i++)
                demo_http_request(&h, "POST", "/filter", filter.data, filter.len, &status, &out);
        cpu0 = cpu_ms(pid);
        for (unsigned i = 0; i < requests / 2; i++) {
                t0 = now_ns();
                r = demo_http_request(&h, "POST", "/filter", filter.data, filter.len, &status, &out);
                lat_f[i] = now_ns() - t0;
                errors += r < 0 || status != 200;
                t0 = now_ns();
                r = demo_http_request(&h, "POST", "/prioritize", prio.data, prio.len, &status, &out);
                lat_p[i] = now_ns() - t0;
                errors += r < 0 || status != 200;
        }
        demo_http_close(&h);
        cpu1 = cpu_ms(pid);

        /* Throughput: BENCH_CLIENT_THREADS connections, the same number of requests. */
        {
                pthread_t th[BENCH_CLIENT_THREADS];
                struct load ld[BENCH_CLIENT_THREADS];

                t0 = now_ns();
                for (unsigned k = 0; k < BENCH_CLIENT_THREADS; k++) {
                        ld[k] = (struct load){ .port = port, .filter = &filter, .prio = &prio,
                                               .n = requests / BENCH_CLIENT_THREADS };
                        pthread_create(&th[k], NULL, load_run, &ld[k]);
                }
                for (unsigned k = 0; k < BENCH_CLIENT_THREADS; k++) {
                        pthread_join(th[k], NULL);
                        errors += ld[k].errors;
                }
                t_total = now_ns() - t0;
        }
        rss_after = rss_kib(pid);
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        {
                double cpu[4];

                if (in_process(cluster, &filter, &prio, requests / 2, cpu) == 0)
                        printf("in process (no HTTP), thread CPU time: filter p50 %.3f ms p99 %.3f ms, "
                               "prioritize p50 %.3f ms p99 %.3f ms\n",
                               cpu[0], cpu[1], cpu[2], cpu[3]);
        }
        unlink(cluster);
        rmdir(dir);

        qsort(lat_f, requests / 2, sizeof(*lat_f), cmp_u64);
        qsort(lat_p, requests / 2, sizeof(*lat_p), cmp_u64);
#define PCT(a, q) ((double)(a)[(size_t)((double)(requests / 2 - 1) * (q))] / 1e6)
        printf("mode=%s nodes=%u pods=%u body_bytes=%zu requests=%u errors=%u\n",
               full ? "full" : "names", n_nodes, n_pods, filter.len, requests * 2, errors);
        printf("  filter      p50 %.3f ms  p99 %.3f ms\n", PCT(lat_f, 0.5), PCT(lat_f, 0.99));
        printf("  prioritize  p50 %.3f ms  p99 %.3f ms\n", PCT(lat_p, 0.5), PCT(lat_p, 0.99));
        printf("  server CPU  %.3f ms per request (user + system, sequential part)\n",
               (cpu1 - cpu0) / requests);
        printf("  throughput  %.0f requests/s (%u client connections, filter and prioritize "
               "alternating)\n",
               (double)requests / ((double)t_total / 1e9), BENCH_CLIENT_THREADS);
        printf("  server RSS  %.1f MiB after loading, %.1f MiB after the run\n",
               (double)rss_loaded / 1024, (double)rss_after / 1024);
        if (getenv("TOPOFIT_BENCH_PEER"))
                measure_peer(getenv("TOPOFIT_BENCH_PEER"), &filter, &prio, requests, PCT(lat_f, 0.5),
                             PCT(lat_p, 0.5), (double)requests / ((double)t_total / 1e9));
        buf_release(&filter);
        buf_release(&prio);
        buf_release(&out);
        free(lat_f);
        free(lat_p);
        for (size_t i = 0; i < ELEMENTSOF(classes); i++)
                free(annotations[i]);
        return errors ? 1 : 0;
}
