/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench-placement: what the placement cluster term (placement/) costs on a large cluster.
 * Builds a cluster view of N nodes (default 5,000) drawn round-robin from real topologies
 * in test/data/topologies, each with a seeded random share of its GPUs on live pods, then
 * times, in process: the first snapshot build with and without the placement view, a
 * rebuild with one node changed (the incremental path), and ext_prioritize over every node
 * for 1-, 2-, 4- and 8-GPU pods with the cluster term on and off.  Timing lives here, not
 * in tests.  Run: build/microbench/bench-placement [NODES] [REPEATS] (from the source root, or
 * with TOPOFIT_SOURCE_ROOT set).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../extender/ext-core.h"
#include "file.h"

static const char *const files[] = {
        "hgx-h100-13nic-mlx5ib-eth-penny.txt", "aws-p4d-24xlarge-a100-nv12.txt",
        "dgx1-v100-sxm2-oneflow.txt",          "a800-sxm4-8gpu-4nic.txt",
        "rtx4090-8gpu-pcie-server.txt",        "h200-hgx-8gpu-12nic-distributedai.txt",
        "gb200-tray-4gpu-8nic-gpu-numa-id.txt", "hgx-a100-4gpu-sxm4-nv4-della.txt",
};

static double
now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t
rnd(uint64_t *s)
{
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

static int
cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return (x > y) - (x < y);
}

struct world {
        char *json[ELEMENTSOF(files)];
        unsigned n_gpus[ELEMENTSOF(files)];
        unsigned n_nodes;
        struct topo_mask *used;
};

static int
build(const struct world *w, const struct ext_config *cfg, const struct ext_cluster *base,
      uint64_t gen, struct ext_cluster **ret)
{
        struct ext_cluster_builder *b = ext_cluster_builder_new(cfg, base);
        char name[64];
        int r;

        if (!b)
                return -ENOMEM;
        for (unsigned i = 0; i < w->n_nodes; i++) {
                unsigned t = i % ELEMENTSOF(files);

                snprintf(name, sizeof(name), "node-%05u", i);
                r = ext_cluster_builder_add_node(b, name, w->json[t], strlen(w->json[t]),
                                                 w->n_gpus[t], NULL);
                if (r < 0)
                        goto fail;
                if (topo_mask_count(&w->used[i]) > 0) {
                        char uid[64];

                        snprintf(uid, sizeof(uid), "pod-%05u", i);
                        r = ext_cluster_builder_add_pod(b, uid, "ns", uid, name, &w->used[i]);
                        if (r < 0)
                                goto fail;
                }
        }
        return ext_cluster_builder_finish(b, gen, ret);
fail:
        ext_cluster_builder_free(b);
        return r;
}

int
main(int argc, char **argv)
{
        const char *root = getenv("TOPOFIT_SOURCE_ROOT");
        unsigned n_nodes = argc > 1 ? (unsigned)atoi(argv[1]) : 5000;
        unsigned repeats = argc > 2 ? (unsigned)atoi(argv[2]) : 20;
        struct world w = { .n_nodes = n_nodes };
        struct ext_config on, off;
        uint64_t seed = 0x9e3779b97f4a7c15ull;
        struct ext_cluster *c_on = NULL, *c_off = NULL, *next = NULL;
        const struct ext_node **nodes;
        struct ext_verdict *v;
        double t0, *lat;
        int r;

        if (n_nodes == 0 || n_nodes > EXT_MAX_NODES || repeats == 0 || repeats > 100000) {
                fprintf(stderr, "usage: bench-placement [NODES 1..%u] [REPEATS]\n", EXT_MAX_NODES);
                return 2;
        }
        for (size_t t = 0; t < ELEMENTSOF(files); t++) {
                char path[1024], *text = NULL;
                struct topo *topo = NULL;
                size_t len, jlen;

                snprintf(path, sizeof(path), "%s/test/data/topologies/%s", root ? root : ".", files[t]);
                r = file_read_capped(path, TOPO_MAX_TEXT_BYTES, &text, &len);
                if (r < 0 || topo_parse_any(text, len, &topo, NULL) < 0 ||
                    topo_to_annotation(topo, &w.json[t], &jlen) < 0) {
                        fprintf(stderr, "bench-placement: cannot load %s\n", path);
                        return 1;
                }
                w.n_gpus[t] = topo->n_gpus;
                topo_unref(topo);
                free(text);
        }
        w.used = calloc(n_nodes, sizeof(*w.used));
        nodes = calloc(n_nodes, sizeof(*nodes));
        v = calloc(n_nodes, sizeof(*v));
        lat = calloc(repeats, sizeof(*lat));
        if (!w.used || !nodes || !v || !lat)
                return 1;
        /* Each node: a random number of its GPUs, at random indices, on one live pod. */
        for (unsigned i = 0; i < n_nodes; i++) {
                unsigned g = w.n_gpus[i % ELEMENTSOF(files)], k = (unsigned)(rnd(&seed) % (g + 1));

                while (topo_mask_count(&w.used[i]) < k)
                        topo_mask_set(&w.used[i], (unsigned)(rnd(&seed) % g));
        }
        ext_config_default(&on);
        ext_config_default(&off);
        off.place.cluster_share = 0;

        t0 = now_s();
        if (build(&w, &off, NULL, 1, &c_off) < 0)
                return 1;
        printf("nodes %u, %u topologies, %u repeats\n", n_nodes, (unsigned)ELEMENTSOF(files), repeats);
        printf("first build without view: %.2f ms\n", (now_s() - t0) * 1e3);
        t0 = now_s();
        if (build(&w, &on, NULL, 1, &c_on) < 0 || !c_on->place)
                return 1;
        printf("first build with view: %.2f ms (%zu node capacities computed)\n",
               (now_s() - t0) * 1e3, place_view_computed(c_on->place));
        /* One node changes: the view takes the others from its base.  Median of repeats
         * rebuilds, the view on and off alternating. */
        for (int mode = 0; mode < 2; mode++) {
                struct ext_cluster *base = mode ? c_on : c_off;
                size_t computed = 0;

                for (unsigned k = 0; k < repeats; k++) {
                        unsigned i = (unsigned)(rnd(&seed) % n_nodes);
                        struct topo_mask keep = w.used[i];

                        topo_mask_clear(&w.used[i]);
                        t0 = now_s();
                        r = build(&w, mode ? &on : &off, base, 2 + k, &next);
                        lat[k] = now_s() - t0;
                        w.used[i] = keep;
                        if (r < 0)
                                return 1;
                        computed = next->place ? place_view_computed(next->place) : 0;
                        ext_cluster_unref(next);
                        next = NULL;
                }
                qsort(lat, repeats, sizeof(*lat), cmp_double);
                printf("rebuild, one node changed, %s view: median %.2f ms (%zu computed)\n",
                       mode ? "with" : "without", lat[repeats / 2] * 1e3, computed);
        }

        printf("| pod GPUs | prioritize first / p50 / p99, term off (ms) | term on (ms) | cost of the term, p50 |\n");
        printf("|---:|---:|---:|---:|\n");
        for (unsigned count = 1; count <= 8; count *= 2) {
                double p[2][3];

                for (int mode = 0; mode < 2; mode++) {
                        struct ext_cluster *c = mode ? c_on : c_off;
                        const struct ext_config *cfg = mode ? &on : &off;
                        struct ext_ledger *l = ext_ledger_new(cfg);
                        struct ext_request req = { .count = count, .n_containers = 1 };

                        for (unsigned i = 0; i < n_nodes; i++)
                                nodes[i] = &c->nodes[i];
                        for (unsigned k = 0; k < repeats; k++) {
                                /* No uid: no reservation, so every repeat sees the same view. */
                                t0 = now_s();
                                r = ext_prioritize(c, l, cfg, &req, nodes, n_nodes, 0, v);
                                lat[k] = now_s() - t0;
                                if (r < 0)
                                        return 1;
                        }
                        p[mode][2] = lat[0] * 1e3; /* the first: scoring's memos cold */
                        qsort(lat, repeats, sizeof(*lat), cmp_double);
                        p[mode][0] = lat[repeats / 2] * 1e3;
                        p[mode][1] = lat[MIN(repeats - 1, (unsigned)(repeats * 0.99))] * 1e3;
                        ext_ledger_free(l);
                }
                printf("| %u | %.3f / %.3f / %.3f | %.3f / %.3f / %.3f | %+.3f |\n", count, p[0][2],
                       p[0][0], p[0][1], p[1][2], p[1][0], p[1][1], p[1][0] - p[0][0]);
        }
        ext_cluster_unref(c_on);
        ext_cluster_unref(c_off);
        for (size_t t = 0; t < ELEMENTSOF(files); t++)
                free(w.json[t]);
        free(w.used);
        free(nodes);
        free(v);
        free(lat);
        return 0;
}
