/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topofit-extender: flags and config file, the cluster view's source (static: --cluster
 * FILE; live: the kube-client cache), then the HTTP server until SIGTERM/SIGINT.  The
 * config file holds "key = value" lines whose keys are the long flag names; flags given on
 * the command line override it.  Signals are blocked before any thread starts and taken
 * with sigwait(), so no handler runs in a microhttpd thread.
 */
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ext-server.h"
#include "file.h"
#include "log.h"
#include "str.h"
#include "topofit-version.h"

#define EXT_MAX_OPTION_LEN 4096
#define EXT_MAX_TTL_S 3600

struct options {
        char listen[EXT_MAX_OPTION_LEN];
        char cluster[EXT_MAX_OPTION_LEN];
        char tls_cert[EXT_MAX_OPTION_LEN];
        char tls_key[EXT_MAX_OPTION_LEN];
        char client_ca[EXT_MAX_OPTION_LEN];
        char port_file[EXT_MAX_OPTION_LEN];
        char kubeconfig[EXT_MAX_OPTION_LEN];
        unsigned threads;
        unsigned max_connections, max_connections_per_ip, idle_timeout_s, body_timeout_s;
        unsigned queue_timeout_ms;
        uint64_t body_budget;
        bool resources_set;
        struct ext_config cfg;
};

enum {
        OPT_LISTEN = 1000,
        OPT_CLUSTER,
        OPT_TLS_CERT,
        OPT_TLS_KEY,
        OPT_CLIENT_CA,
        OPT_RESOURCE,
        OPT_UNANNOTATED,
        OPT_RESERVATION_TTL,
        OPT_THREADS,
        OPT_LOG_LEVEL,
        OPT_PORT_FILE,
        OPT_KUBECONFIG,
        OPT_CONFIG,
        OPT_MAX_CONNECTIONS,
        OPT_MAX_CONNECTIONS_PER_IP,
        OPT_IDLE_TIMEOUT,
        OPT_BODY_TIMEOUT,
        OPT_BODY_BUDGET,
        OPT_QUEUE_TIMEOUT,
        OPT_CLUSTER_SHARE,
        OPT_DRAIN_WEIGHT,
        OPT_FILTER_BEST,
        OPT_VERSION,
        OPT_HELP,
};

static const struct option long_options[] = {
        { "listen", required_argument, NULL, OPT_LISTEN },
        { "cluster", required_argument, NULL, OPT_CLUSTER },
        { "tls-cert", required_argument, NULL, OPT_TLS_CERT },
        { "tls-key", required_argument, NULL, OPT_TLS_KEY },
        { "client-ca", required_argument, NULL, OPT_CLIENT_CA },
        { "resource", required_argument, NULL, OPT_RESOURCE },
        { "unannotated-nodes", required_argument, NULL, OPT_UNANNOTATED },
        { "reservation-ttl", required_argument, NULL, OPT_RESERVATION_TTL },
        { "threads", required_argument, NULL, OPT_THREADS },
        { "log-level", required_argument, NULL, OPT_LOG_LEVEL },
        { "port-file", required_argument, NULL, OPT_PORT_FILE },
        { "kubeconfig", required_argument, NULL, OPT_KUBECONFIG },
        { "config", required_argument, NULL, OPT_CONFIG },
        { "max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS },
        { "max-connections-per-ip", required_argument, NULL, OPT_MAX_CONNECTIONS_PER_IP },
        { "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
        { "body-timeout", required_argument, NULL, OPT_BODY_TIMEOUT },
        { "body-budget", required_argument, NULL, OPT_BODY_BUDGET },
        { "queue-timeout", required_argument, NULL, OPT_QUEUE_TIMEOUT },
        { "cluster-share", required_argument, NULL, OPT_CLUSTER_SHARE },
        { "drain-weight", required_argument, NULL, OPT_DRAIN_WEIGHT },
        { "filter-best", required_argument, NULL, OPT_FILTER_BEST },
        { "version", no_argument, NULL, OPT_VERSION },
        { "help", no_argument, NULL, OPT_HELP },
        {},
};

static void
usage(FILE *f)
{
        fputs("Usage: topofit-extender [OPTIONS]\n"
              "Topology-aware GPU scheduler extender for kube-scheduler.\n\n"
              "  --cluster FILE           static mode: the cluster from a `kubectl get nodes,pods\n"
              "                           -o json` List; bind updates it in memory\n"
              "  --kubeconfig FILE        live mode (no --cluster): the API server to watch and\n"
              "                           bind through (default: $KUBECONFIG, in-cluster, ~/.kube/config)\n"
              "  --listen HOST:PORT       address to serve on (default 0.0.0.0:8888; port 0 picks one)\n"
              "  --port-file FILE         write the bound port there once listening\n"
              "  --tls-cert FILE          serve HTTPS with this PEM certificate ...\n"
              "  --tls-key FILE           ... and this PEM key\n"
              "  --client-ca FILE         require client certificates signed by this CA (mutual TLS)\n"
              "  --resource NAME          a GPU resource name counted in pod limits (repeatable;\n"
              "                           default nvidia.com/gpu)\n"
              "  --unannotated-nodes P    nodes without topofit.io/topology: 'pcie' (unknown PCIe,\n"
              "                           the default) or 'reject' (refuse topology-requiring pods)\n"
              "  --reservation-ttl SEC    how long a prioritize reservation waits for bind (30)\n"
              "  --threads N              HTTP worker threads (4)\n"
              "  --max-connections N      open connections in all (1024)\n"
              "  --max-connections-per-ip N  open connections from one client address (128)\n"
              "  --idle-timeout SEC       close a connection that sends nothing this long: no\n"
              "                           request head yet, idle keep-alive, stalled body (5)\n"
              "  --body-timeout SEC       a request body must arrive whole this soon after its\n"
              "                           head (10)\n"
              "  --body-budget MIB        request bodies buffered at once, all connections\n"
              "                           together (64; at least 16, the largest body)\n"
              "  --queue-timeout MS       answer 503 (Retry-After) to a filter, prioritize or\n"
              "                           preempt request that waited unread this long\n"
              "                           (1000; 200 while the server is behind)\n"
              "  --cluster-share X        share of the cluster term in prioritize's scores,\n"
              "                           0..1 (0.5; 0 ranks each node by its own set alone)\n"
              "  --drain-weight X         weight of a drained node's lost sets in the cluster\n"
              "                           term, 0..1 (1)\n"
              "  --filter-best N          filter passes only the N best of the nodes that fit\n"
              "                           a GPU pod, ranked as prioritize ranks them; with 1\n"
              "                           kube-scheduler takes that node without scoring\n"
              "                           (0, the default: every node that fits; at most 64)\n"
              "  --log-level LEVEL        error, warn, info (default), debug\n"
              "  --config FILE            key = value lines with the long option names\n"
              "  --version, --help\n",
              f);
}

/* Applies one option; returns 0, or -EINVAL with a message printed. */
static int
apply(struct options *o, int opt, const char *arg)
{
        int64_t v;

        switch (opt) {
        case OPT_LISTEN:
        case OPT_CLUSTER:
        case OPT_TLS_CERT:
        case OPT_TLS_KEY:
        case OPT_CLIENT_CA:
        case OPT_KUBECONFIG:
        case OPT_PORT_FILE: {
                char *dst = opt == OPT_LISTEN      ? o->listen
                            : opt == OPT_CLUSTER   ? o->cluster
                            : opt == OPT_TLS_CERT  ? o->tls_cert
                            : opt == OPT_TLS_KEY   ? o->tls_key
                            : opt == OPT_CLIENT_CA ? o->client_ca
                            : opt == OPT_KUBECONFIG ? o->kubeconfig
                                                   : o->port_file;

                if (str_copy(dst, EXT_MAX_OPTION_LEN, arg, strlen(arg)) < 0) {
                        fprintf(stderr, "topofit-extender: an option value is too long\n");
                        return -EINVAL;
                }
                return 0;
        }
        case OPT_RESOURCE: {
                const char *p = arg;

                if (!o->resources_set) {
                        o->cfg.n_resources = 0;
                        o->resources_set = true;
                }
                /* Comma-separated lists too, for the config file. */
                while (*p) {
                        size_t n = strcspn(p, ",");
                        const char *s = p;

                        p += n + (p[n] == ',');
                        str_trim(&s, &n);
                        if (n == 0)
                                continue;
                        if (o->cfg.n_resources >= EXT_MAX_RESOURCES ||
                            n >= EXT_RESOURCE_NAME_MAX) {
                                fprintf(stderr, "topofit-extender: too many or too long "
                                                "--resource names\n");
                                return -EINVAL;
                        }
                        str_copy(o->cfg.resources[o->cfg.n_resources++], EXT_RESOURCE_NAME_MAX, s,
                                 n);
                }
                return 0;
        }
        case OPT_UNANNOTATED: {
                enum ext_unannotated u = ext_unannotated_from_string(arg);

                if (u < 0) {
                        fprintf(stderr, "topofit-extender: --unannotated-nodes is pcie or reject\n");
                        return -EINVAL;
                }
                o->cfg.unannotated = u;
                return 0;
        }
        case OPT_RESERVATION_TTL:
                if (str_to_int64(arg, strlen(arg), 1, EXT_MAX_TTL_S, &v) < 0) {
                        fprintf(stderr, "topofit-extender: --reservation-ttl is 1..%d seconds\n",
                                EXT_MAX_TTL_S);
                        return -EINVAL;
                }
                o->cfg.reservation_ttl_ns = (uint64_t)v * 1000000000u;
                return 0;
        case OPT_THREADS:
                if (str_to_int64(arg, strlen(arg), 1, EXT_MAX_THREADS, &v) < 0) {
                        fprintf(stderr, "topofit-extender: --threads is 1..%d\n", EXT_MAX_THREADS);
                        return -EINVAL;
                }
                o->threads = (unsigned)v;
                return 0;
        case OPT_MAX_CONNECTIONS:
        case OPT_MAX_CONNECTIONS_PER_IP:
                if (str_to_int64(arg, strlen(arg), 1, EXT_MAX_CONNECTIONS, &v) < 0) {
                        fprintf(stderr, "topofit-extender: --max-connections%s is 1..%d\n",
                                opt == OPT_MAX_CONNECTIONS ? "" : "-per-ip",
                                EXT_MAX_CONNECTIONS);
                        return -EINVAL;
                }
                *(opt == OPT_MAX_CONNECTIONS ? &o->max_connections : &o->max_connections_per_ip) =
                        (unsigned)v;
                return 0;
        case OPT_IDLE_TIMEOUT:
        case OPT_BODY_TIMEOUT:
                if (str_to_int64(arg, strlen(arg), 1, EXT_MAX_TIMEOUT_S, &v) < 0) {
                        fprintf(stderr, "topofit-extender: --%s-timeout is 1..%d seconds\n",
                                opt == OPT_IDLE_TIMEOUT ? "idle" : "body", EXT_MAX_TIMEOUT_S);
                        return -EINVAL;
                }
                *(opt == OPT_IDLE_TIMEOUT ? &o->idle_timeout_s : &o->body_timeout_s) = (unsigned)v;
                return 0;
        case OPT_QUEUE_TIMEOUT:
                if (str_to_int64(arg, strlen(arg), 1, EXT_MAX_QUEUE_TIMEOUT_MS, &v) < 0) {
                        fprintf(stderr, "topofit-extender: --queue-timeout is 1..%d ms\n",
                                EXT_MAX_QUEUE_TIMEOUT_MS);
                        return -EINVAL;
                }
                o->queue_timeout_ms = (unsigned)v;
                return 0;
        case OPT_BODY_BUDGET:
                if (str_to_int64(arg, strlen(arg), EXT_MAX_BODY >> 20, EXT_MAX_BODY_BUDGET >> 20,
                                 &v) < 0) {
                        fprintf(stderr, "topofit-extender: --body-budget is %u..%llu MiB\n",
                                EXT_MAX_BODY >> 20, EXT_MAX_BODY_BUDGET >> 20);
                        return -EINVAL;
                }
                o->body_budget = (uint64_t)v << 20;
                return 0;
        case OPT_CLUSTER_SHARE:
        case OPT_DRAIN_WEIGHT: {
                double x;

                if (str_to_double(arg, strlen(arg), &x) < 0 || !(x >= 0 && x <= 1)) {
                        fprintf(stderr, "topofit-extender: --%s is a number in 0..1, not '%s'\n",
                                opt == OPT_CLUSTER_SHARE ? "cluster-share" : "drain-weight",
                                arg);
                        return -EINVAL;
                }
                *(opt == OPT_CLUSTER_SHARE ? &o->cfg.place.cluster_share
                                           : &o->cfg.place.drain_weight) = x;
                return 0;
        }
        case OPT_FILTER_BEST:
                if (str_to_int64(arg, strlen(arg), 0, EXT_FILTER_BEST_MAX, &v) < 0) {
                        fprintf(stderr, "topofit-extender: --filter-best is 0..%d\n",
                                EXT_FILTER_BEST_MAX);
                        return -EINVAL;
                }
                o->cfg.filter_best = (unsigned)v;
                return 0;
        case OPT_LOG_LEVEL: {
                enum log_level l = log_level_from_string(arg);

                if (l < 0) {
                        fprintf(stderr, "topofit-extender: --log-level is error, warn, info or "
                                        "debug\n");
                        return -EINVAL;
                }
                log_set_level(l);
                return 0;
        }
        default:
                return -EINVAL;
        }
}

static int
load_config(struct options *o, const char *path)
{
        FILE *f = fopen(path, "re");
        char line[EXT_MAX_OPTION_LEN + 64];
        unsigned lineno = 0, total = 0;

        if (!f) {
                fprintf(stderr, "topofit-extender: cannot open config %s: %m\n", path);
                return -errno;
        }
        while (fgets(line, sizeof(line), f)) {
                const char *k = line, *val;
                size_t klen, vlen;
                char *eq;
                int opt = 0;

                lineno++;
                total += (unsigned)strlen(line);
                if (total > EXT_MAX_CONFIG_BYTES || !strchr(line, '\n')) {
                        fprintf(stderr, "%s:%u: line too long or file too large\n", path, lineno);
                        fclose(f);
                        return -E2BIG;
                }
                klen = strlen(line);
                str_trim(&k, &klen);
                if (klen == 0 || k[0] == '#')
                        continue;
                eq = memchr(k, '=', klen);
                if (!eq) {
                        fprintf(stderr, "%s:%u: expected key = value\n", path, lineno);
                        fclose(f);
                        return -EINVAL;
                }
                val = eq + 1;
                vlen = klen - (size_t)(val - k);
                klen = (size_t)(eq - k);
                str_trim(&k, &klen);
                str_trim(&val, &vlen);
                ((char *)val)[vlen] = 0;
                for (const struct option *lo = long_options; lo->name; lo++)
                        if (lo->has_arg == required_argument && str_eq_n(k, klen, lo->name) &&
                            lo->val != OPT_CONFIG)
                                opt = lo->val;
                if (!opt) {
                        fprintf(stderr, "%s:%u: unknown key\n", path, lineno);
                        fclose(f);
                        return -EINVAL;
                }
                if (apply(o, opt, val) < 0) {
                        fprintf(stderr, "%s:%u: bad value\n", path, lineno);
                        fclose(f);
                        return -EINVAL;
                }
        }
        fclose(f);
        return 0;
}

static int
load_cluster(struct ext_state *s, const char *path)
{
        struct ext_cluster *c = NULL;
        const char *why = NULL;
        char *text = NULL;
        size_t len;
        int r;

        r = file_read_capped(path, EXT_MAX_CLUSTER_BYTES, &text, &len);
        if (r == -E2BIG) {
                log_error("the cluster file is too large", "path=%s", path);
                return r;
        }
        if (r < 0) {
                log_error("cannot open the cluster file", "path=%s errno=%d", path, -r);
                return r;
        }
        r = ext_cluster_decode(text, len, &s->cfg, NULL, 1, &c, &why);
        free(text);
        if (r < 0) {
                log_error("the cluster file is not usable", "path=%s reason=\"%s\"", path,
                          why ? why : "out of memory");
                return r;
        }
        for (size_t i = 0; i < c->n_nodes; i++)
                if (!c->nodes[i].annotated)
                        log_warn("node without usable topology", "node=%s reason=\"%s\" policy=%s",
                                 LOG_V(c->nodes[i].name), c->nodes[i].why_unannotated,
                                 ext_unannotated_to_string(s->cfg.unannotated));
        log_info("cluster loaded", "path=%s nodes=%zu pods=%zu classes=%zu", path, c->n_nodes,
                 c->n_pods, c->n_classes);
        ext_state_install(s, c);
        atomic_store(&s->ready, true);
        /* The parsed file was many times the snapshot's size: give that memory back. */
        malloc_trim(0);
        return 0;
}

/* The config file (first, so that flags override it), then the flags: -1 to go on, or the
 * process's exit status. */
static int
parse_args(int argc, char **argv, struct options *o)
{
        int opt;

        for (int i = 1; i < argc; i++) {
                const char *path = NULL;

                if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
                        path = argv[i + 1];
                else if (str_has_prefix(argv[i], "--config="))
                        path = argv[i] + strlen("--config=");
                if (path && load_config(o, path) < 0)
                        return 2;
        }
        while ((opt = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
                switch (opt) {
                case OPT_CONFIG:
                        break;
                case OPT_VERSION:
                        printf("topofit-extender %s\n", TOPOFIT_VERSION);
                        return 0;
                case OPT_HELP:
                        usage(stdout);
                        return 0;
                case '?':
                        usage(stderr);
                        return 2;
                default:
                        if (apply(o, opt, optarg) < 0)
                                return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "topofit-extender: unexpected argument '%s'\n", argv[optind]);
                return 2;
        }
        return -1;
}

/* The bound port, written to the side and renamed, so a reader never sees a partial one. */
static void
write_port_file(const char *path, unsigned port)
{
        char tmp[EXT_MAX_OPTION_LEN + 8];
        FILE *f;

        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        f = fopen(tmp, "we");
        if (!f || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0 || rename(tmp, path) < 0)
                log_error("cannot write the port file", "path=%s", path);
}

/* The cluster view: the --cluster file (static mode) or the API server (live mode). */
static int
start_view(struct ext_state *s, const struct options *o, struct ext_live **ret_live)
{
        const char *why = NULL;
        int r;

        if (o->cluster[0])
                return load_cluster(s, o->cluster);
        r = ext_live_start(s, o->kubeconfig[0] ? o->kubeconfig : NULL, ret_live, &why);
        if (r < 0)
                log_error("cannot reach the cluster", "reason=\"%s\" errno=%d",
                          why ? why : "unknown", -r);
        return r;
}

int
main(int argc, char **argv)
{
        struct options o = { .listen = "0.0.0.0:8888" };
        struct ext_server_options so = { 0 };
        struct ext_server *srv = NULL;
        struct ext_live *live = NULL;
        struct ext_state s;
        const char *why = NULL;
        unsigned port = 0;
        sigset_t sigs;
        int sig, r;

        ext_config_default(&o.cfg);
        r = parse_args(argc, argv, &o);
        if (r >= 0)
                return r;

        sigemptyset(&sigs);
        sigaddset(&sigs, SIGTERM);
        sigaddset(&sigs, SIGINT);
        sigaddset(&sigs, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &sigs, NULL);

        if (ext_state_init(&s, &o.cfg) < 0) {
                log_error("cannot start", "reason=\"out of memory\"");
                return 1;
        }
        if (start_view(&s, &o, &live) < 0) {
                ext_state_release(&s);
                return 1;
        }
        so = (struct ext_server_options){
                .listen = o.listen,
                .threads = o.threads,
                .tls_cert = o.tls_cert[0] ? o.tls_cert : NULL,
                .tls_key = o.tls_key[0] ? o.tls_key : NULL,
                .client_ca = o.client_ca[0] ? o.client_ca : NULL,
                .max_connections = o.max_connections,
                .max_connections_per_ip = o.max_connections_per_ip,
                .idle_timeout_s = o.idle_timeout_s,
                .body_timeout_s = o.body_timeout_s,
                .queue_timeout_ms = o.queue_timeout_ms,
                .body_budget = o.body_budget,
        };
        r = ext_server_start(&s, &so, &srv, &port, &why);
        if (r < 0) {
                log_error("cannot serve", "listen=%s reason=\"%s\"", o.listen, why);
                ext_live_stop(live);
                ext_state_release(&s);
                return 1;
        }
        log_info("serving", "listen=%s port=%u mode=%s tls=%s mtls=%s", o.listen, port, s.mode,
                 so.tls_cert ? "yes" : "no", so.client_ca ? "yes" : "no");
        if (o.port_file[0])
                write_port_file(o.port_file, port);

        do {
                if (sigwait(&sigs, &sig) != 0)
                        break;
        } while (sig == SIGPIPE);
        log_info("stopping", "signal=%d", sig);
        ext_server_stop(srv);
        ext_live_stop(live);
        ext_state_release(&s);
        return 0;
}
