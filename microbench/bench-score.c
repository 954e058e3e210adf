/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Scoring decision-time benchmark: score_best() per topology class, cold (a fresh class:
 * empty memo, empty per-set cache; class construction timed separately) and warm (the
 * same decision answered from the memo), for 8-, 16- and 72-GPU nodes.  Links exactly
 * what the extender's decision path links (scoring + topology), reads the real matrices
 * from test/data/topologies (or $TOPOFIT_TEST_DATA/topologies) and builds the 16- and 72-GPU nodes from
 * literals.  Prints a markdown table; docs/performance.md quotes it with the command.
 * Occupancy and request sizes come from a fixed-seed xorshift, so runs compare.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "file.h"
#include "score.h"

#define BENCH_COLD_ROUNDS 200   /* fresh classes per topology */
#define BENCH_WARM_CALLS 200000 /* memo hits timed per topology */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t
next_rand(void)
{
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

/* Thread CPU time: the other engineers' load on the shared cores does not count. */
static double
now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static struct topo *
load(const char *name, const char *model)
{
        const char *data = getenv("TOPOFIT_TEST_DATA");
        struct topo_error err = { 0 };
        struct topo *t = NULL;
        CLEANUP(freep) char *text = NULL;
        char path[512];
        size_t len;
        int r;

        snprintf(path, sizeof(path), "%s/topologies/%s", data ? data : "test/data", name);
        r = file_read_capped(path, TOPO_MAX_TEXT_BYTES, &text, &len);
        if (r < 0) {
                fprintf(stderr, "bench-score: %s: %s (run from the source root or set TOPOFIT_TEST_DATA)\n", path, strerror(-r));
                exit(1);
        }
        if (topo_parse_any(text, len, &t, &err) < 0) {
                fprintf(stderr, "bench-score: %s:%u: %s\n", path, err.line, err.msg);
                exit(1);
        }
        if (model)
                topo_set_model(t, model);
        return t;
}

/* n GPUs on one NVSwitch fabric with `ports` NVLinks each, `per_numa` GPUs per NUMA node,
 * one PIX NIC per GPU. */
static struct topo *
fabric(unsigned n, unsigned ports, unsigned per_numa, const char *model)
{
        struct topo *t = topo_new(n, n);

        for (unsigned i = 0; i < n; i++) {
                snprintf(t->gpus[i].model, sizeof(t->gpus[i].model), "%s", model);
                t->gpus[i].numa = (int)(i / per_numa);
                for (unsigned j = 0; j < n; j++)
                        if (i != j)
                                *topo_pair_mut(t, i, j) = (struct topo_pair){
                                        .link = TOPO_LINK_NVLINK, .links = (uint8_t)ports };
                for (unsigned k = 0; k < n; k++)
                        t->nic_links[k * n + i] = k == i ? TOPO_LINK_PIX : TOPO_LINK_SYS;
        }
        topo_finish(t);
        t->nvswitch = true;
        return t;
}

/* 16 PCIe Gen4 GPUs, two sockets, four PCIe switches of four (PXB inside, NODE across
 * switches of one socket, SYS across sockets): the hardest case, no fabric shortcut. */
static struct topo *
pcie16(void)
{
        struct topo *t = topo_new(16, 0);

        for (unsigned i = 0; i < 16; i++) {
                snprintf(t->gpus[i].model, sizeof(t->gpus[i].model), "NVIDIA A100-PCIE-40GB");
                t->gpus[i].numa = (int)(i / 8);
                for (unsigned j = 0; j < 16; j++)
                        if (i != j)
                                topo_pair_mut(t, i, j)->link = i / 4 == j / 4   ? TOPO_LINK_PXB
                                                               : i / 8 == j / 8 ? TOPO_LINK_NODE
                                                                                : TOPO_LINK_SYS;
        }
        t->cpu_link = TOPO_CPU_LINK_INTEL_UPI2;
        topo_finish(t);
        return t;
}

static int
cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* A random occupancy and a request that fits it, sizes from the default mix. */
static void
draw(unsigned n, struct topo_mask *free, struct score_request *req)
{
        static const unsigned sizes[] = { 1, 1, 1, 1, 1, 2, 2, 4, 4, 8 };
        unsigned n_free;

        do {
                topo_mask_clear(free);
                for (unsigned i = 0; i < n; i++)
                        if (next_rand() % 100 < 60)
                                topo_mask_set(free, i);
                n_free = topo_mask_count(free);
                *req = (struct score_request){ .count = sizes[next_rand() % ELEMENTSOF(sizes)] };
        } while (req->count > n_free);
}

static const char *only; /* argv[1]: run only classes whose name contains it */

static void
run(const char *name, struct topo *t)
{
        double cold[BENCH_COLD_ROUNDS], build[BENCH_COLD_ROUNDS], warm, t0, worst = 0;
        struct topo_mask free;
        struct score_request req;
        struct score_choice x;
        unsigned n = t->n_gpus;

        if (only && !strstr(name, only))
                return;
        for (unsigned r = 0; r < BENCH_COLD_ROUNDS; r++) {
                struct score_class *c;

                draw(n, &free, &req);
                t0 = now_ns();
                c = score_class_new(t, NULL);
                build[r] = now_ns() - t0;
                t0 = now_ns();
                if (score_best(c, &free, &req, &x, NULL) < 0) {
                        fprintf(stderr, "bench-score: %s: no placement\n", name);
                        exit(1);
                }
                cold[r] = now_ns() - t0;
                worst = cold[r] > worst ? cold[r] : worst;
                score_class_unref(c);
        }
        qsort(cold, BENCH_COLD_ROUNDS, sizeof(double), cmp_double);
        qsort(build, BENCH_COLD_ROUNDS, sizeof(double), cmp_double);

        /* warm: one class, a handful of decisions, each asked again and again */
        struct score_class *c = score_class_new(t, NULL);
        struct topo_mask frees[16];
        struct score_request reqs[16];
        for (unsigned i = 0; i < 16; i++) {
                draw(n, &frees[i], &reqs[i]);
                score_best(c, &frees[i], &reqs[i], &x, NULL);
        }
        t0 = now_ns();
        for (unsigned i = 0; i < BENCH_WARM_CALLS; i++)
                score_best(c, &frees[i % 16], &reqs[i % 16], &x, NULL);
        warm = (now_ns() - t0) / BENCH_WARM_CALLS;
        score_class_unref(c);

        printf("| %-34s | %3u | %8.1f | %8.1f | %8.1f | %8.1f | %6.3f |\n", name, n,
               build[BENCH_COLD_ROUNDS / 2] / 1e3, cold[BENCH_COLD_ROUNDS / 2] / 1e3,
               cold[BENCH_COLD_ROUNDS * 99 / 100] / 1e3, worst / 1e3, warm / 1e3);
        fflush(stdout);
}

int
main(int argc, char **argv)
{
        static const struct {
                const char *name;
                const char *file;
                const char *model;
        } files[] = {
                { "DGX-1 V100 (hybrid cube mesh)", "dgx1-v100-sxm2-oneflow.txt", "Tesla V100-SXM2-16GB" },
                { "HGX H100 NV18 (NVSwitch)", "hgx-h100-13nic-mlx5ib-eth-penny.txt", "NVIDIA H100 80GB HBM3" },
                { "HGX A100 NV12 8 NICs", "a100-sxm4-80gb-8nic-roce-deepep.txt", "NVIDIA A100-SXM4-80GB" },
                { "8x MI300-class XGMI (rocm-smi)", "amd-instinct-8gpu-0x74a2-xgmi-ms-swift.txt",
                  "AMD Instinct MI300X" },
                { "8x RTX 4090 PCIe", "rtx4090-8gpu-pcie-server.txt", "NVIDIA GeForce RTX 4090" },
        };
        struct topo *t;

        only = argc > 1 ? argv[1] : NULL;
        printf("| topology class | GPUs | class build us (median) | cold us (median) | cold us (p99) "
               "| cold us (max) | warm us (mean) |\n");
        printf("|---|---|---|---|---|---|---|\n");
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                t = load(files[i].file, files[i].model);
                run(files[i].name, t);
                topo_unref(t);
        }
        t = fabric(16, 6, 8, "Tesla V100-SXM3-32GB");
        run("DGX-2 V100 NV6 NVSwitch (literal)", t);
        topo_unref(t);
        t = pcie16();
        run("16x A100 PCIe, 4 switches (literal)", t);
        topo_unref(t);
        t = fabric(72, 18, 2, "NVIDIA GB200");
        run("GB200 NVL72 domain (literal)", t);
        topo_unref(t);
        return 0;
}
