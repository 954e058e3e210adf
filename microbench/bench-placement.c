/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench-placement: what the placement cluster term (placement/) costs on a large cluster.
 * Builds a cluster view of N nodes (default 5,000) drawn round-robin from real topologies
 * in test/data/topologies, each with a seeded random share of its GPUs on live pods, then
 * times, in process: the first snapshot build with and without the placement view, a
 * rebuild with one node changed (the incremental path), and ext_prioritize over every node
 * for 1-, 2-, 4- and 8-GPU pods with the cluster term on and off.  Then what a gang's node
 * plan costs prioritize (issue 11), first on these nodes (a 2 x 4-GPU gang that one node
 * holds, and a lone pod while such a gang's record lives), then on the same nodes with
 * multi-node domains (the GB200 trays 18 to an NVL72 domain, the 8-GPU nodes under Topograph
 * leaf labels): a lone pod, a gang one domain holds and a gang no domain holds (spilt,
 * planned over every node), each gang's first and a later member.  Timing lives here, not
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

#define TRAY 6          /* files[TRAY]: the GB200 tray, 4 GPUs */
#define TRAYS_PER_NVL 18 /* an NVL72 rack: 18 trays of 4 GPUs share one NVLink domain */
#define NODES_PER_LEAF 32
#define LEAF_KEY "network.topology.nvidia.com/leaf"

struct world {
        char *json[ELEMENTSOF(files)];
        unsigned n_gpus[ELEMENTSOF(files)];
        unsigned n_nodes;
        struct topo_mask *used;
        /* With domains: tray_json[d] is the tray's annotation in NVLink domain d (the domain
         * is in the annotation, so one text per domain), and the 8-GPU nodes get a leaf. */
        bool domains;
        char **tray_json;
        unsigned n_nvl;
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
                const char *json = w->json[t];

                if (w->domains && t == TRAY)
                        json = w->tray_json[i / ELEMENTSOF(files) / TRAYS_PER_NVL];
                snprintf(name, sizeof(name), "node-%05u", i);
                r = ext_cluster_builder_add_node(b, name, json, strlen(json), w->n_gpus[t], NULL);
                if (r < 0)
                        goto fail;
                if (w->domains && w->n_gpus[t] == 8) {
                        char leaf[32];

                        snprintf(leaf, sizeof(leaf), "leaf-%03u", i / NODES_PER_LEAF);
                        r = ext_cluster_builder_node_label(b, LEAF_KEY, leaf);
                        if (r < 0)
                                goto fail;
                }
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

/* One "now" for every call of the plan section: the groups' records stay live throughout. */
#define NOW_NS 1000000000ull

/* One row of a node-plan table: a case, its latencies (ms) and the node it planned. */
struct row {
        const char *what;
        double first, p50, p99;
        int planned;     /* index among the nodes passed, -1 none */
        bool off_domain; /* the planned node is off the domain the group step steers to */
};

/* Times ext_prioritize of req over the n nodes, repeats times, into row.  With l: on that
 * ledger, req's tentative reservation released after each call, so each repeat sees the
 * state the caller set up (a member's claim on its planned node stays: the group's record is
 * not the ledger's reservations).  Without: on a fresh ledger each repeat, made and freed
 * outside the timing, as a group's first member finds the table.  The planned node is the
 * last call's.  0, or -1 when a call fails or no node fits. */
static int
time_prioritize(const struct ext_cluster *c, const struct ext_config *cfg, struct ext_ledger *l,
                const struct ext_request *req, const struct ext_node *const *nodes, unsigned n,
                struct ext_verdict *v, double *lat, unsigned repeats, struct row *row)
{
        for (unsigned k = 0; k < repeats; k++) {
                struct ext_ledger *own = l ? NULL : ext_ledger_new(cfg);
                double t0;
                int r;

                if (!l && !own)
                        return -1;
                t0 = now_s();
                r = ext_prioritize(c, l ? l : own, cfg, req, nodes, n, NOW_NS, v);
                lat[k] = now_s() - t0;
                if (l)
                        ext_ledger_release(l, req->uid);
                ext_ledger_free(own);
                if (r <= 0)
                        return -1;
        }
        row->planned = -1;
        row->off_domain = false;
        for (unsigned i = 0; i < n; i++)
                if (v[i].r == 0 && v[i].planned) {
                        row->planned = (int)i;
                        row->off_domain = v[i].off_domain;
                }
        row->first = lat[0] * 1e3; /* the group table fresh, or scoring's memos cold */
        qsort(lat, repeats, sizeof(*lat), cmp_double);
        row->p50 = lat[repeats / 2] * 1e3;
        row->p99 = lat[MIN(repeats - 1, (unsigned)(repeats * 0.99))] * 1e3;
        return 0;
}

/* rows[0] is the lone pod every other row is set against. */
static void
print_rows(const struct row *rows, size_t n, const struct ext_node *const *nodes, unsigned n_nodes)
{
        printf("| prioritize, all %u nodes | first / p50 / p99 (ms) | vs the lone pod, p50 "
               "| planned node |\n",
               n_nodes);
        printf("|---|---:|---:|---|\n");
        for (size_t k = 0; k < n; k++)
                printf("| %s | %.3f / %.3f / %.3f | %+.3f ms | %s%s |\n", rows[k].what,
                       rows[k].first, rows[k].p50, rows[k].p99, rows[k].p50 - rows[0].p50,
                       rows[k].planned >= 0 ? nodes[rows[k].planned]->name : "none",
                       rows[k].off_domain ? " (off the group's domain)" : "");
}

/* Member k of gang name: size pods of 4 GPUs, domain-preferred (the default of a grouped
 * pod), its size known from the pod. */
static struct ext_request
gang_member(const char *name, unsigned size, unsigned k)
{
        struct ext_request req = { .count = 4, .n_containers = 1,
                                   .group = { .size = size, .count = 4,
                                              .mode = PLACE_DOMAIN_PREFERRED } };

        snprintf(req.uid, sizeof(req.uid), "%s-%u-%u", name, size, k);
        snprintf(req.group.id, sizeof(req.group.id), "topofit/ns/%s-%u", name, size);
        return req;
}

/* Prints the record of req's group in l (its domain) and returns whether the domain holds
 * the group whole: 1 whole, 0 spilt, -1 no record. */
static int
print_group(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_request *req)
{
        char *json = NULL;
        int whole;

        if (ext_group_record_for(c, l, req, NOW_NS, &json) < 0 || !json) {
                printf("gang %s: no group record\n", req->group.id);
                return -1;
        }
        whole = strstr(json, "\"whole\":true") != NULL;
        printf("gang of %u x %u GPUs: %s, record %s\n", req->group.size, req->count,
               whole ? "one domain holds it" : "spilt (no domain holds it)", json);
        free(json);
        return whole;
}

/* A copy of c with member 0 of gang "late" (2 x 4 GPUs, size 2) bound on the empty 8-GPU
 * node whose name sorts last, and l given the gang's record from it (ext_groups_restore, as
 * after a restart; the record is the one its bind writes): a live gang held on one node,
 * with one pod still to come.  Where the gang's node sorts matters: the hold's check looks
 * a node-level domain up by name.  0 with *ret, or -1. */
static int
late_gang(const struct world *w, const struct ext_cluster *c, const struct ext_config *cfg,
          struct ext_ledger *l, struct ext_cluster **ret)
{
        for (unsigned i = w->n_nodes; i-- > 0;) {
                struct ext_group_member m = { .uid = "late-2-0", .ns = "ns" };
                struct topo_mask gpus;
                char rec[512];
                unsigned refused = 0;

                if (w->n_gpus[i % ELEMENTSOF(files)] != 8 || topo_mask_count(&w->used[i]) > 0)
                        continue;
                topo_mask_fill(&gpus, 4);
                snprintf(rec, sizeof(rec),
                         "{\"version\":1,\"group\":\"topofit/ns/late-2\",\"level\":%u,"
                         "\"domain\":\"%s\",\"size\":2,\"count\":4,\"require\":0,\"whole\":true}",
                         PLACE_LEVEL_NODE, c->nodes[i].name);
                m.record = rec;
                m.record_len = strlen(rec);
                if (ext_cluster_with_pod(c, cfg, m.uid, "ns", m.uid, c->nodes[i].name, &gpus, rec,
                                         NULL, ret) < 0)
                        return -1;
                if (ext_groups_restore(*ret, l, &m, 1, NOW_NS, &refused) != 1 || refused) {
                        ext_cluster_unref(*ret);
                        *ret = NULL;
                        return -1;
                }
                printf("gang of 2 x 4 GPUs restored with one member bound on %s\n",
                       c->nodes[i].name);
                return 0;
        }
        return -1;
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
        struct ext_cluster *c_on = NULL, *c_off = NULL, *next = NULL, *c_dom = NULL;
        struct topo *tray = NULL;
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
                if (t == TRAY)
                        tray = topo_ref(topo);
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

        /* The node plan (issue 11), first on these nodes, which have no multi-node domain: a
         * gang of two 4-GPU pods is held by one 8-GPU node (the group step's node level). */
        printf("\ngangs, no multi-node domains (cluster term on):\n");
        {
                struct ext_request lone = { .uid = "lone", .count = 4, .n_containers = 1 };
                struct ext_request g[2] = { gang_member("pair", 2, 0), gang_member("pair", 2, 1) };
                struct row rows[5] = {
                        { "lone 4-GPU pod, no group (baseline)" },
                        { "gang 2 x 4 GPUs, one node holds it: first member (choice + plan)" },
                        { "gang 2 x 4 GPUs: later member" },
                        { "lone 4-GPU pod while that gang's record lives" },
                        { "lone 4-GPU pod while a 2 x 4 gang lives on the last-named empty node" },
                };
                struct ext_cluster *late = NULL;
                struct ext_ledger *l;

                for (unsigned i = 0; i < n_nodes; i++)
                        nodes[i] = &c_on->nodes[i];
                if (time_prioritize(c_on, &on, NULL, &lone, nodes, n_nodes, v, lat, repeats,
                                    &rows[0]) < 0 ||
                    time_prioritize(c_on, &on, NULL, &g[0], nodes, n_nodes, v, lat, repeats,
                                    &rows[1]) < 0)
                        return 1;
                l = ext_ledger_new(&on);
                if (!l || ext_prioritize(c_on, l, &on, &g[0], nodes, n_nodes, NOW_NS, v) <= 0 ||
                    print_group(c_on, l, &g[0]) < 0 ||
                    time_prioritize(c_on, &on, l, &g[1], nodes, n_nodes, v, lat, repeats,
                                    &rows[2]) < 0 ||
                    time_prioritize(c_on, &on, l, &lone, nodes, n_nodes, v, lat, repeats,
                                    &rows[3]) < 0)
                        return 1;
                ext_ledger_free(l);
                l = ext_ledger_new(&on);
                if (!l || late_gang(&w, c_on, &on, l, &late) < 0)
                        return 1;
                for (unsigned i = 0; i < n_nodes; i++)
                        nodes[i] = &late->nodes[i];
                if (time_prioritize(late, &on, l, &lone, nodes, n_nodes, v, lat, repeats,
                                    &rows[4]) < 0)
                        return 1;
                ext_ledger_free(l);
                print_rows(rows, ELEMENTSOF(rows), nodes, n_nodes);
                ext_cluster_unref(late);
        }

        /* Then with domains: the same nodes and occupancy, the trays in node order 18 to an
         * NVL72 domain, the 8-GPU nodes under a leaf label, 32 node names to a leaf. */
        w.domains = true;
        w.n_nvl = n_nodes / ELEMENTSOF(files) / TRAYS_PER_NVL + 1;
        w.tray_json = calloc(w.n_nvl, sizeof(*w.tray_json));
        if (!w.tray_json || !tray)
                return 1;
        for (unsigned d = 0; d < w.n_nvl; d++) {
                size_t jlen;

                snprintf(tray->nvlink_domain, sizeof(tray->nvlink_domain), "nvl72-%03u", d);
                if (topo_to_annotation(tray, &w.tray_json[d], &jlen) < 0)
                        return 1;
        }
        t0 = now_s();
        if (build(&w, &on, NULL, 1, &c_dom) < 0 || !c_dom->place)
                return 1;
        printf("\ngangs with domains: first build %.2f ms; %zu NVLink domains (GB200 trays, %u "
               "to a domain), %zu leaves (8-GPU nodes, %u names to a leaf)\n",
               (now_s() - t0) * 1e3, place_view_n_domains(c_dom->place, 0), TRAYS_PER_NVL,
               place_view_n_domains(c_dom->place, 1), NODES_PER_LEAF);
        for (unsigned i = 0; i < n_nodes; i++)
                nodes[i] = &c_dom->nodes[i];
        {
                struct ext_request lone = { .uid = "lone", .count = 4, .n_containers = 1 };
                struct ext_request g4[2] = { gang_member("small", 4, 0),
                                             gang_member("small", 4, 1) };
                struct ext_request gs[2];
                struct row rows[6] = {
                        { "lone 4-GPU pod, no group (baseline)" },
                        { "gang 4 x 4 GPUs, one NVL72 holds it: first member (choice + plan)" },
                        { "gang 4 x 4 GPUs: later member" },
                        { "lone 4-GPU pod while that gang's record lives" },
                        { "spilt gang: first member (choice + plan over every node)" },
                        { "spilt gang: later member (chosen and planned again)" },
                };
                char spilt[2][96];
                struct ext_ledger *l;
                unsigned size;

                if (time_prioritize(c_dom, &on, NULL, &lone, nodes, n_nodes, v, lat, repeats,
                                    &rows[0]) < 0 ||
                    time_prioritize(c_dom, &on, NULL, &g4[0], nodes, n_nodes, v, lat, repeats,
                                    &rows[1]) < 0)
                        return 1;
                l = ext_ledger_new(&on);
                if (!l || ext_prioritize(c_dom, l, &on, &g4[0], nodes, n_nodes, NOW_NS, v) <= 0 ||
                    print_group(c_dom, l, &g4[0]) != 1 ||
                    time_prioritize(c_dom, &on, l, &g4[1], nodes, n_nodes, v, lat, repeats,
                                    &rows[2]) < 0 ||
                    time_prioritize(c_dom, &on, l, &lone, nodes, n_nodes, v, lat, repeats,
                                    &rows[3]) < 0)
                        return 1;
                ext_ledger_free(l);
                /* The spilt gang: 18 x 4 GPUs (an NVL72's worth), doubled until no domain of any
                 * level holds it whole. */
                for (size = 18;; size *= 2) {
                        int whole;

                        gs[0] = gang_member("big", size, 0);
                        gs[1] = gang_member("big", size, 1);
                        l = ext_ledger_new(&on);
                        if (!l ||
                            ext_prioritize(c_dom, l, &on, &gs[0], nodes, n_nodes, NOW_NS, v) <= 0)
                                return 1;
                        whole = print_group(c_dom, l, &gs[0]);
                        if (whole < 0)
                                return 1;
                        if (whole == 0)
                                break;
                        ext_ledger_free(l);
                        if (size * 2 > PLACE_MAX_GROUP_PODS) {
                                fprintf(stderr, "bench-placement: no gang size spills\n");
                                return 1;
                        }
                }
                for (int k = 0; k < 2; k++) {
                        snprintf(spilt[k], sizeof(spilt[k]), "%s, %u x 4 GPUs", rows[4 + k].what,
                                 size);
                        rows[4 + k].what = spilt[k];
                }
                if (time_prioritize(c_dom, &on, NULL, &gs[0], nodes, n_nodes, v, lat, repeats,
                                    &rows[4]) < 0 ||
                    time_prioritize(c_dom, &on, l, &gs[1], nodes, n_nodes, v, lat, repeats,
                                    &rows[5]) < 0)
                        return 1;
                ext_ledger_free(l);
                print_rows(rows, ELEMENTSOF(rows), nodes, n_nodes);
        }
        ext_cluster_unref(c_dom);
        for (unsigned d = 0; d < w.n_nvl; d++)
                free(w.tray_json[d]);
        free(w.tray_json);
        topo_unref(tray);
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
