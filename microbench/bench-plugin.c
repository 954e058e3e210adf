/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench-plugin: how fast the node daemon answers GetPreferredAllocation, which the kubelet
 * calls synchronously during pod admission.  Three layers, each timed alone: the pod-cache
 * match (a full node of DP_BENCH_PODS pods), the scoring fallback on real topologies (cold
 * memo and warm), and the whole RPC over the unix socket through the real gRPC server (a
 * new connection per call, as a worst case; the kubelet keeps its connection).
 * Usage: bench-plugin SHARED_TOPOLOGIES_DIR [iterations]
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../scoring/score.h"
#include "dp.h"

#define DP_BENCH_PODS 110 /* the kubelet's default max pods per node */

static double
now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct topo *
load(const char *dir, const char *file)
{
        char path[PATH_MAX];
        struct dp_discover_opts o = { .topology_file = path };
        struct dp_discover_report rep;
        struct topo *t = NULL;

        snprintf(path, sizeof(path), "%s/%s", dir, file);
        if (dp_discover(&o, &t, &rep) < 0) {
                fprintf(stderr, "%s: %s", file, rep.notes);
                exit(1);
        }
        for (unsigned i = 0; i < t->n_gpus; i++)
                snprintf(t->gpus[i].uuid, sizeof(t->gpus[i].uuid), "GPU-bench-%u", i);
        return t;
}

/* A full node: pods of 1 GPU on GPUs 0..n-2 (running), plus 2 pending 1-GPU pods. */
static void
fill_cache(struct dp_cache *c)
{
        for (unsigned i = 0; i < DP_BENCH_PODS; i++) {
                struct dp_pod p = { 0 };
                char ann[160];
                snprintf(p.uid, sizeof(p.uid), "uid-%u", i);
                snprintf(p.ns, sizeof(p.ns), "default");
                snprintf(p.name, sizeof(p.name), "pod-%u", i);
                snprintf(ann, sizeof(ann),
                         "{\"version\":1,\"containers\":[{\"name\":\"main\",\"indices\":[%u],"
                         "\"uuids\":[\"GPU-bench-%u\"]}]}",
                         i % c->n_devices, i % c->n_devices);
                p.live = true;
                p.pending = i >= DP_BENCH_PODS - 2;
                if (dp_parse_gpus_annotation(c, ann, strlen(ann), p.sets, &p.n_sets, NULL) < 0 ||
                    dp_cache_upsert(c, &p) < 0)
                        exit(1);
        }
}

struct bench_ctx {
        struct dp_cache cache;
        struct score_class *sc;
        unsigned n;
};

static int
on_preferred(void *userdata, const struct dp_pref_request *req, unsigned *ret_idx)
{
        struct bench_ctx *b = userdata;
        struct topo_mask avail, must, set;
        int pos[TOPO_MAX_GPUS];
        unsigned n = 0;

        topo_mask_clear(&avail);
        topo_mask_clear(&must);
        for (unsigned i = 0; i < req->n_available; i++) {
                int g = dp_cache_device_index(&b->cache, req->available[i]);
                if (g >= 0) {
                        topo_mask_set(&avail, (unsigned)g);
                        pos[g] = (int)i;
                }
        }
        if (dp_cache_match(&b->cache, &avail, &must, req->size, 0, &set, NULL) < 0 &&
            dp_fallback_set(b->sc, &avail, &must, req->size, b->n, &set) < 0)
                return -ENOSPC;
        for (unsigned g = 0; g < b->n; g++)
                if (topo_mask_test(&set, g))
                        ret_idx[n++] = (unsigned)pos[g];
        return (int)n;
}

int
main(int argc, char **argv)
{
        static const char *files[] = { "dgx-h100-12nic-talos.txt", "dgx1-v100-sxm2-32gb-4nic-microway.txt",
                                       "rtx4090-8gpu-pcie-server.txt" };
        const char *dir = argc > 1 ? argv[1] : "test/data/topologies";
        unsigned iters = argc > 2 ? (unsigned)atoi(argv[2]) : 20000;
        struct score_config cfg;

        score_config_default(&cfg);
        printf("# bench-plugin: %u iterations per row\n", iters);
        for (size_t f = 0; f < ELEMENTSOF(files); f++) {
                struct topo *t = load(dir, files[f]);
                struct dp_device devs[TOPO_MAX_GPUS];
                struct bench_ctx b = { .n = t->n_gpus };
                struct topo_mask avail, none, set;
                volatile unsigned sink = 0;
                double t0, cold = 0;

                for (unsigned i = 0; i < t->n_gpus; i++) {
                        dp_device_id(t, i, devs[i].id);
                        devs[i].healthy = true;
                }
                if (dp_cache_init(&b.cache, devs, t->n_gpus) < 0)
                        return 1;
                fill_cache(&b.cache);
                topo_mask_fill(&avail, t->n_gpus);
                topo_mask_clear(&none);

                t0 = now_s();
                for (unsigned k = 0; k < iters; k++)
                        sink += dp_cache_match(&b.cache, &avail, &none, 1, (int64_t)k, &set, NULL) == 0;
                printf("%-40s match over %u pods:        %8.3f us/call\n", files[f], DP_BENCH_PODS,
                       (now_s() - t0) / iters * 1e6);

                for (unsigned size = 2; size <= 4; size *= 2) {
                        /* Cold: a fresh class each time (first request of a class). */
                        for (unsigned k = 0; k < 20; k++) {
                                struct score_class *sc = score_class_new(t, &cfg);
                                t0 = now_s();
                                sink += dp_fallback_set(sc, &avail, &none, size, t->n_gpus, &set) == 0;
                                cold += now_s() - t0;
                                score_class_unref(sc);
                        }
                        b.sc = score_class_new(t, &cfg);
                        t0 = now_s();
                        for (unsigned k = 0; k < iters; k++) {
                                struct topo_mask a = avail;
                                topo_mask_unset(&a, k % t->n_gpus); /* vary the offer */
                                sink += dp_fallback_set(b.sc, &a, &none, size, t->n_gpus, &set) == 0;
                        }
                        printf("%-40s fallback size %u: cold %8.3f us, warm %8.3f us/call\n", files[f],
                               size, cold / 20 * 1e6, (now_s() - t0) / iters * 1e6);
                        cold = 0;
                        score_class_unref(b.sc);
                        b.sc = NULL;
                }

                /* The whole RPC through the real server. */
                {
                        char path[128];
                        struct dp_handlers h = { .userdata = &b, .preferred = on_preferred };
                        struct dp_server *srv = NULL;
                        const char *ids[TOPO_MAX_GPUS];
                        unsigned rpc_iters = iters / 20 ? iters / 20 : 1;

                        b.sc = score_class_new(t, &cfg);
                        snprintf(path, sizeof(path), "/tmp/topofit-bench-%d.sock", (int)getpid());
                        dp_grpc_init();
                        if (dp_server_new(path, &h, &srv) < 0)
                                return 1;
                        for (unsigned i = 0; i < t->n_gpus; i++)
                                ids[i] = devs[i].id;
                        t0 = now_s();
                        for (unsigned k = 0; k < rpc_iters; k++) {
                                char **got = NULL;
                                unsigned n = 0;
                                if (dp_preferred_call(path, ids, t->n_gpus, NULL, 0, 2, 5000, &got, &n,
                                                      NULL) < 0)
                                        return 1;
                                sink += n;
                                dp_strv_free(got, n);
                        }
                        printf("%-40s GetPreferredAllocation RPC: %8.1f us/call (new connection each)\n",
                               files[f], (now_s() - t0) / rpc_iters * 1e6);
                        dp_server_free(srv);
                        unlink(path);
                        dp_grpc_shutdown();
                        score_class_unref(b.sc);
                }
                (void)sink;
                dp_cache_release(&b.cache);
                topo_unref(t);
        }
        return 0;
}
