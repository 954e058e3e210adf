/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology benchmark: time per call of the parsers and the annotation encoder on real inputs
 * (test/data) and on a synthetic 72-GPU NVSwitch domain.  The extender decodes one annotation
 * per Node it watches, the publisher encodes one per change, so these bound the per-node cost
 * of keeping a cluster view.  Prints one table row per case: median of BENCH_REPS runs of
 * an adaptive number of iterations.  Not a test: nothing here asserts a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "file.h"
#include "topo-hwloc.h"
#include "topo.h"

#define BENCH_REPS 5
#define BENCH_MIN_NS 200000000.0 /* each run lasts at least 0.2 s */
#define BENCH_MAX_FILE (64u << 20)

static double
now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static char *
read_file(const char *dir, const char *rel, size_t *ret_len)
{
        char path[4096], *text;

        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        return file_read_capped(path, BENCH_MAX_FILE, &text, ret_len) < 0 ? NULL : text;
}

typedef int (*parse_fn)(const char *, size_t, struct topo **, struct topo_error *);

struct input {
        const char *text;
        size_t len;
        parse_fn parse; /* NULL: encode `topo` instead */
        const struct topo *topo;
};

static int
run_once(const struct input *in)
{
        if (in->parse) {
                struct topo *t = NULL;
                int r = in->parse(in->text, in->len, &t, NULL);
                topo_unref(t);
                return r;
        }
        char *json = NULL;
        size_t len;
        int r = topo_to_annotation(in->topo, &json, &len);
        free(json);
        return r;
}

static int
cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* Median nanoseconds per call, or a negative errno when the input does not parse. */
static double
measure(const struct input *in)
{
        double runs[BENCH_REPS];
        unsigned long iters = 1;
        int r = run_once(in);

        if (r < 0)
                return r;
        /* Grow the iteration count until one run lasts BENCH_MIN_NS. */
        for (;;) {
                double t0 = now_ns();
                for (unsigned long i = 0; i < iters; i++)
                        (void)run_once(in);
                if (now_ns() - t0 >= BENCH_MIN_NS / 4 || iters > (1ul << 30))
                        break;
                iters *= 2;
        }
        iters *= 4;
        for (int k = 0; k < BENCH_REPS; k++) {
                double t0 = now_ns();
                for (unsigned long i = 0; i < iters; i++)
                        (void)run_once(in);
                runs[k] = (now_ns() - t0) / (double)iters;
        }
        qsort(runs, BENCH_REPS, sizeof(runs[0]), cmp_double);
        return runs[BENCH_REPS / 2];
}

static struct topo *
nvl72(void)
{
        struct topo *t = topo_new(72, 8);

        if (!t)
                return NULL;
        t->vendor = TOPO_VENDOR_NVIDIA;
        for (unsigned i = 0; i < 72; i++) {
                struct topo_gpu *g = &t->gpus[i];
                snprintf(g->uuid, sizeof(g->uuid), "GPU-%08x-1c2d-3e4f-5a6b-7c8d9e0f%04x",
                         0xa1b2c3d4u + i, i);
                snprintf(g->model, sizeof(g->model), "NVIDIA GB200");
                snprintf(g->pci_bus_id, sizeof(g->pci_bus_id), "00000009:%02x:00.0", i + 1);
                snprintf(g->cpu_affinity, sizeof(g->cpu_affinity), "%u-%u", (i / 2) * 72,
                         (i / 2) * 72 + 71);
                g->memory_mib = 189471;
                g->numa = (int)(i / 2);
                for (unsigned j = 0; j < 72; j++)
                        if (i != j)
                                *topo_pair_mut(t, i, j) = (struct topo_pair){TOPO_LINK_NVLINK, 18};
        }
        for (unsigned k = 0; k < 8; k++) {
                snprintf(t->nics[k].name, TOPO_ID_MAX, "mlx5_%u", k);
                for (unsigned j = 0; j < 72; j++)
                        t->nic_links[k * 72 + j] = j / 9 == k ? TOPO_LINK_PIX : TOPO_LINK_SYS;
        }
        topo_finish(t);
        return t;
}

static int
hwloc_parse(const char *xml, size_t len, struct topo **ret, struct topo_error *err)
{
        return topo_hwloc_load_xml(xml, len, ret, err);
}

int
main(int argc, char **argv)
{
        static const struct {
                const char *name, *file;
                parse_fn parse;
        } files[] = {
                {"nvidia-smi, 8 GPU DGX-1 + nvlink -s",
                 "topologies/dgx1-v100-sxm2-32gb-4nic-microway.txt", topo_parse_nvsmi},
                {"nvidia-smi, 8 GPU + 36 NIC (h20)", "topologies/h20-8gpu-36nic-sriov-sglang.txt",
                 topo_parse_nvsmi},
                {"rocm-smi, 8 GPU", "topologies/amd-instinct-8gpu-0x74a2-xgmi-ms-swift.txt",
                 topo_parse_rocm},
                {"hwloc XML, DGX-2 (16 GPU, 12 NVSwitch)", "hwloc/nvidiaDGX2.xml", hwloc_parse},
        };
        const char *dir = argc > 1 ? argv[1] : "test/data";
        struct topo *big = nvl72();
        char *big_json = NULL;
        size_t big_len = 0;

        if (!big || topo_to_annotation(big, &big_json, &big_len) < 0) {
                fprintf(stderr, "bench-topology: cannot build the 72-GPU topology\n");
                return 1;
        }
        printf("| case | bytes | time per call |\n|---|---|---|\n");
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                size_t len = 0;
                char *text = read_file(dir, files[i].file, &len);
                struct topo *t = NULL;
                char *json = NULL;
                size_t jl = 0;

                if (!text) {
                        fprintf(stderr, "bench-topology: cannot read %s/%s\n", dir, files[i].file);
                        return 1;
                }
                struct input in = {text, len, files[i].parse, NULL};
                printf("| parse %s | %zu | %.1f us |\n", files[i].name, len, measure(&in) / 1e3);
                if (files[i].parse(text, len, &t, NULL) == 0 &&
                    topo_to_annotation(t, &json, &jl) == 0) {
                        struct input dec = {json, jl, topo_parse_annotation, NULL};
                        struct input enc = {NULL, 0, NULL, t};
                        printf("| annotation decode, same node | %zu | %.1f us |\n", jl,
                               measure(&dec) / 1e3);
                        printf("| annotation encode, same node | %zu | %.1f us |\n", jl,
                               measure(&enc) / 1e3);
                }
                free(json);
                topo_unref(t);
                free(text);
        }
        struct input dec = {big_json, big_len, topo_parse_annotation, NULL};
        struct input enc = {NULL, 0, NULL, big};
        printf("| annotation decode, 72-GPU NVL72 domain | %zu | %.1f us |\n", big_len,
               measure(&dec) / 1e3);
        printf("| annotation encode, 72-GPU NVL72 domain | %zu | %.1f us |\n", big_len,
               measure(&enc) / 1e3);
        free(big_json);
        topo_unref(big);
        return 0;
}
