/* SPDX-License-Identifier: Apache-2.0 */
/*
 * live-labels-bench: what keeping every node label costs live mode (issue 11: a PodGroup
 * may name any node label key, so ext_live_start asks the cache for node_labels_all).  N
 * generated Node objects (default 5,000) with L labels each (default 30: the kubelet's,
 * Node Feature Discovery's and GPU Feature Discovery's kind, two of them domain labels) and
 * a real topology annotation, then, with the domain label keys only ("before") and with
 * every label ("after"): (1) kube-client's node decoder over all N (what the cache does at
 * LIST and per watch event) and the heap the decoded nodes hold; (2) a rebuild of the
 * extender's view from them, steady state (every node's annotation unchanged, so nodes are
 * copied from the base view, not parsed), through extender/ext-live.c's own node step
 * (ext__live_key_lengths, ext__live_add_node) and PODS_PER_NODE bound pods a node (what a label does not change, for proportion).
 * Best of R runs; under callgrind (one mode a run: MODE 1 before, 2 after, 0 both) the
 * phases are the functions decode_before/decode_after, first_build and steady_rebuild.
 * Timing lives here, not in tests.  Run from the source root (or with TOPOFIT_SOURCE_ROOT
 * set): build/microbench/live-labels-bench [NODES] [LABELS] [REPEATS] [MODE] [PODS 0|1]
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../extender/ext-core.h"
#include "../extender/ext-server.h"
#include "file.h"
#include "kube-private.h"

static double
now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Label keys of the kind real GPU nodes carry (kubelet, NFD, GFD), filler beyond them. */
static const char *const common_keys[] = {
        "kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os",
        "beta.kubernetes.io/arch", "beta.kubernetes.io/os", "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/region", "topology.kubernetes.io/zone",
        "nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory",
        "nvidia.com/gpu.family", "nvidia.com/gpu.machine", "nvidia.com/cuda.driver.major",
        "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.runtime.major", "nvidia.com/mig.capable",
        "feature.node.kubernetes.io/cpu-cpuid.AVX512F",
        "feature.node.kubernetes.io/kernel-version.full",
        "feature.node.kubernetes.io/pci-10de.present",
        "feature.node.kubernetes.io/system-os_release.ID",
        "feature.node.kubernetes.io/network-sriov.capable",
        "feature.node.kubernetes.io/storage-nonrotationaldisk",
        "node-role.kubernetes.io/gpu-worker",
};

struct node_set {
        size_t n;
        cJSON **json;
        struct kube__obj **obj;
        size_t n_pods;           /* bound pods, PODS_PER_NODE a node, one GPU each */
        char (*pod_uid)[40];
};
#define PODS_PER_NODE 20

/* Node i: L labels, two of them domain labels (clique and leaf), the annotation. */
static cJSON *
make_node(unsigned i, unsigned n_labels, const char *topo, unsigned gpus)
{
        cJSON *o = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(o, "metadata");
        cJSON *lab = cJSON_AddObjectToObject(md, "labels");
        cJSON *ann = cJSON_AddObjectToObject(md, "annotations");
        cJSON *st = cJSON_AddObjectToObject(o, "status"), *cond, *c;
        char name[64], v[96], k[96];

        snprintf(name, sizeof(name), "node-%05u", i);
        cJSON_AddStringToObject(md, "name", name);
        cJSON_AddStringToObject(md, "uid", name);
        cJSON_AddStringToObject(md, "resourceVersion", "1");
        snprintf(v, sizeof(v), "clique-%u", i / 18);
        cJSON_AddStringToObject(lab, "nvidia.com/gpu.clique", v);
        snprintf(v, sizeof(v), "leaf-%u", i / 32);
        cJSON_AddStringToObject(lab, "fabric.topograph.run/tier-0", v);
        for (unsigned j = 2; j < n_labels; j++) {
                const char *key = common_keys[(j - 2) % ELEMENTSOF(common_keys)];

                if (j - 2 >= ELEMENTSOF(common_keys)) {
                        snprintf(k, sizeof(k), "example.com/site-label-%u", j);
                        key = k;
                }
                snprintf(v, sizeof(v), "%s-%u", j == 2 ? name : "value", j % 7);
                cJSON_AddStringToObject(lab, key, v);
        }
        cJSON_AddStringToObject(ann, "topofit.io/topology", topo);
        snprintf(v, sizeof(v), "%u", gpus);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(st, "allocatable"), "nvidia.com/gpu", v);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(st, "capacity"), "nvidia.com/gpu", v);
        cond = cJSON_AddArrayToObject(st, "conditions");
        c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "type", "Ready");
        cJSON_AddStringToObject(c, "status", "True");
        cJSON_AddItemToArray(cond, c);
        return o;
}

/* Decodes every node with d into set->obj (the previous objects released); seconds. */
static double
decode_all(struct node_set *set, const struct kube__decode_opts *d)
{
        double t0 = now_s();

        for (size_t i = 0; i < set->n; i++) {
                const char *why = NULL;

                set->obj[i] = kube__obj_unref(set->obj[i]);
                if (kube__decode_node(set->json[i], d, &set->obj[i], &why) < 0) {
                        fprintf(stderr, "live-labels-bench: decode failed: %s\n", why ? why : "");
                        exit(1);
                }
        }
        return now_s() - t0;
}

/* The view from the decoded nodes, as ext-live.c's rebuild() reads them (nodes and labels;
 * no pods here).  Seconds; *ret the view. */
static double
rebuild(const struct node_set *set, const struct ext_config *cfg, const struct ext_cluster *base,
        uint64_t gen, struct ext_cluster **ret)
{
        double t0 = now_s();
        struct ext_cluster_builder *b = ext_cluster_builder_new(cfg, base);
        uint64_t bits[EXT_LIVE_KEY_LEN_WORDS];
        int r = 0;

        if (!b)
                exit(1);
        /* As live mode does: the decoded nodes are the source, alive across rebuilds. */
        ext_cluster_builder_sources(b, set, set);
        ext__live_key_lengths(cfg, b, bits);
        for (size_t i = 0; r >= 0 && i < set->n; i++)
                r = ext__live_add_node(b, &set->obj[i]->node, bits);
        /* The pods, as the cache's snapshot lists them: by node (what labels do not change). */
        for (size_t i = 0; r >= 0 && i < set->n_pods; i++) {
                const struct kube_node *n = &set->obj[i / PODS_PER_NODE]->node;
                struct topo_mask gpus = { 0 };

                topo_mask_set(&gpus, (unsigned)(i % PODS_PER_NODE) % 4);
                r = ext_cluster_builder_add_pod(b, set->pod_uid[i], "ns", set->pod_uid[i],
                                                n->name, &gpus);
        }
        if (r < 0 || ext_cluster_builder_finish(b, gen, ret) < 0) {
                fprintf(stderr, "live-labels-bench: the view did not build\n");
                exit(1);
        }
        return now_s() - t0;
}

/* Named apart, so that callgrind reports each phase's instructions (callgrind_annotate
 * --inclusive=yes). */
__attribute__((noinline)) static double
first_build(const struct node_set *set, const struct ext_config *cfg, struct ext_cluster **ret)
{
        return rebuild(set, cfg, NULL, 1, ret);
}

__attribute__((noinline)) static double
steady_rebuild(const struct node_set *set, const struct ext_config *cfg,
               const struct ext_cluster *base, uint64_t gen, struct ext_cluster **ret)
{
        return rebuild(set, cfg, base, gen, ret);
}

__attribute__((noinline)) static double
decode_before(struct node_set *set, const struct kube__decode_opts *d)
{
        return decode_all(set, d);
}

__attribute__((noinline)) static double
decode_after(struct node_set *set, const struct kube__decode_opts *d)
{
        return decode_all(set, d);
}

static size_t
kept_labels(const struct node_set *set)
{
        size_t n = 0;

        for (size_t i = 0; i < set->n; i++)
                n += set->obj[i]->node.n_labels;
        return n;
}

int
main(int argc, char **argv)
{
        const char *root = getenv("TOPOFIT_SOURCE_ROOT");
        unsigned n_nodes = argc > 1 ? (unsigned)atoi(argv[1]) : 5000;
        unsigned n_labels = argc > 2 ? (unsigned)atoi(argv[2]) : 30;
        unsigned repeats = argc > 3 ? (unsigned)atoi(argv[3]) : 5;
        unsigned mode = argc > 4 ? (unsigned)atoi(argv[4]) : 0;
        bool with_pods = argc > 5 ? atoi(argv[5]) != 0 : true;
        static const char *const gpu_resources[] = { "nvidia.com/gpu", NULL };
        const char *domain_keys[EXT_MAX_DOMAIN_LABELS + 1] = { 0 };
        struct node_set set = { .n = n_nodes };
        struct ext_config cfg;
        char path[1024], *text = NULL, *topo_json = NULL;
        struct topo *topo = NULL;
        size_t len, jlen;

        if (n_nodes == 0 || n_nodes > EXT_MAX_NODES || n_labels < 3 ||
            n_labels > KUBE_MAX_ALL_LABELS || repeats == 0 || repeats > 1000 || mode > 2) {
                fprintf(stderr, "usage: live-labels-bench [NODES 1..%u] [LABELS 3..%u] [REPEATS] "
                                "[MODE 0..2]\n",
                        EXT_MAX_NODES, KUBE_MAX_ALL_LABELS);
                return 2;
        }
        snprintf(path, sizeof(path), "%s/test/data/topologies/gb200-tray-4gpu-8nic-gpu-numa-id.txt",
                 root ? root : ".");
        if (file_read_capped(path, TOPO_MAX_TEXT_BYTES, &text, &len) < 0 ||
            topo_parse_any(text, len, &topo, NULL) < 0 ||
            topo_to_annotation(topo, &topo_json, &jlen) < 0) {
                fprintf(stderr, "live-labels-bench: cannot load %s\n", path);
                return 1;
        }
        ext_config_default(&cfg);
        for (unsigned k = 0; k < cfg.n_domain_labels && k < EXT_MAX_DOMAIN_LABELS; k++)
                domain_keys[k] = cfg.domain_labels[k].key;
        set.json = calloc(n_nodes, sizeof(*set.json));
        set.obj = calloc(n_nodes, sizeof(*set.obj));
        set.n_pods = with_pods ? (size_t)n_nodes * PODS_PER_NODE : 0;
        set.pod_uid = calloc(set.n_pods + 1, sizeof(*set.pod_uid));
        if (!set.json || !set.obj || !set.pod_uid)
                return 1;
        for (size_t i = 0; i < set.n_pods; i++)
                snprintf(set.pod_uid[i], sizeof(set.pod_uid[i]), "%08zx-pod-%zu", i * 2654435761u,
                         i);
        for (unsigned i = 0; i < n_nodes; i++)
                set.json[i] = make_node(i, n_labels, topo_json, topo->n_gpus);

        printf("| %u nodes, %u labels each (2 domain labels), %zu pods, best of %u | domain keys "
               "only (before) | every label (after) |\n", n_nodes, n_labels, set.n_pods, repeats);
        printf("|---|---:|---:|\n");
        {
                const struct kube__decode_opts opts[2] = {
                        { .gpu_resources = gpu_resources, .node_labels = domain_keys },
                        { .gpu_resources = gpu_resources, .node_labels_all = true },
                };
                double dec[2], reb[2], first[2];
                size_t held[2], kept[2];

                memset(held, 0, sizeof(held));
                memset(kept, 0, sizeof(kept));
                for (int m = 0; m < 2; m++) {
                        struct ext_cluster *base = NULL, *c = NULL;
                        struct mallinfo2 a, z;

                        dec[m] = reb[m] = first[m] = 0;
                        if (mode != 0 && mode != (unsigned)m + 1)
                                continue;

                        dec[m] = reb[m] = 1e9;
                        for (unsigned r = 0; r < repeats; r++) {
                                double t = m == 0 ? decode_before(&set, &opts[m])
                                                  : decode_after(&set, &opts[m]);

                                dec[m] = t < dec[m] ? t : dec[m];
                        }
                        /* The heap the decoded nodes hold: released, then decoded again. */
                        for (size_t i = 0; i < set.n; i++)
                                set.obj[i] = kube__obj_unref(set.obj[i]);
                        a = mallinfo2();
                        decode_all(&set, &opts[m]);
                        z = mallinfo2();
                        held[m] = z.uordblks - a.uordblks;
                        kept[m] = kept_labels(&set);
                        first[m] = first_build(&set, &cfg, &base);
                        for (unsigned r = 0; r < repeats; r++) {
                                double t = steady_rebuild(&set, &cfg, base, 2 + r, &c);

                                reb[m] = t < reb[m] ? t : reb[m];
                                ext_cluster_unref(base);
                                base = c;
                        }
                        ext_cluster_unref(base);
                }
                printf("| labels kept by the cache, all nodes | %zu | %zu |\n", kept[0], kept[1]);
                printf("| heap held by the decoded nodes | %.2f MiB | %.2f MiB |\n",
                       held[0] / 1048576.0, held[1] / 1048576.0);
                printf("| decode of every node (LIST; per watch event: / %u) | %.1f ms | "
                       "%.1f ms |\n", n_nodes, dec[0] * 1e3, dec[1] * 1e3);
                printf("| view rebuild, steady state (annotations unchanged) | %.2f ms | "
                       "%.2f ms |\n", reb[0] * 1e3, reb[1] * 1e3);
                printf("| first view build (every annotation parsed), one run | %.1f ms | "
                       "%.1f ms |\n", first[0] * 1e3, first[1] * 1e3);
        }
        for (unsigned i = 0; i < n_nodes; i++) {
                kube__obj_unref(set.obj[i]);
                cJSON_Delete(set.json[i]);
        }
        free(set.obj);
        free(set.json);
        free(set.pod_uid);
        free(topo_json);
        free(text);
        topo_unref(topo);
        return 0;
}
