/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The demo's scheduler side: plays kube-scheduler against a running topofit-extender in
 * static mode.  For each pod of the scenario it sends filter (nodeCacheCapable: NodeNames),
 * prioritize (skipped when one node is left, as the scheduler does), picks the top score
 * (ties: node name), and sends bind, exactly as kube-scheduler v1.20 shapes those requests;
 * then reads the GPUs the extender recorded (GET /allocations).  Beside each placement it
 * shows what a topology-blind default would have picked: the first free GPUs on the least
 * allocated node that fits, both with the modeled all-reduce bandwidth from scoring/.
 * Usage: topofit-demo-client PORT CLUSTER_JSON
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo-http.h"
#include "ext-core.h"
#include "file.h"
#include "str.h"

#define DEMO_MAX_ANSWER (16u << 20)
#define DEMO_MAX_CLUSTER_BYTES (64u << 20)

static const struct demo_pod {
        const char *name;
        unsigned gpus;
        const char *placement; /* topofit.io/placement, NULL for none */
} scenario[] = {
        { "pair-a", 2, NULL },
        { "quad-nv", 4, "nvlink-required" },
        { "infer-a", 1, NULL },
        { "pair-nv-b", 2, "nvlink-required" },
        { "train-8", 8, NULL },
        { "quad-c", 4, NULL },
        { "pair-d", 2, NULL },
        { "infer-b", 1, NULL },
        { "train-8-nv", 8, "nvlink-required" },
        { "quad-numa", 4, "numa" },
        { "huge-16", 16, NULL },
};

struct model {
        struct ext_cluster *c;
        struct topo_mask *used; /* per node: GPUs taken so far (initial pods + placed ones) */
};

/* The Pod object as the scheduler sends it (what matters of it: metadata, spec, status). */
static int
pod_json(struct buf *b, const struct demo_pod *p, unsigned i)
{
        int r = buf_printf(b, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"demo\","
                              "\"uid\":\"d3m0d3m0-0000-4000-8000-%012u\",\"resourceVersion\":\"%u\","
                              "\"creationTimestamp\":\"2026-11-22T12:00:00Z\",\"labels\":{\"app\":\"demo\"}",
                           p->name, i, 1000 + i);

        if (r >= 0 && p->placement)
                r = buf_printf(b, ",\"annotations\":{\"" EXT_PLACEMENT_ANNOTATION "\":\"%s\"}",
                               p->placement);
        if (r >= 0)
                r = buf_printf(b, "},\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":"
                                  "\"registry.k8s.io/pause:3.2\",\"resources\":{\"limits\":{\"cpu\":"
                                  "\"100m\",\"nvidia.com/gpu\":\"%u\"},\"requests\":{\"cpu\":\"100m\","
                                  "\"nvidia.com/gpu\":\"%u\"}}}],\"restartPolicy\":\"Always\","
                                  "\"schedulerName\":\"default-scheduler\",\"priority\":0},"
                                  "\"status\":{\"phase\":\"Pending\",\"qosClass\":\"Guaranteed\"}}",
                           p->gpus, p->gpus);
        return r;
}

static int
args_json(struct buf *b, const struct demo_pod *p, unsigned i, char **names, size_t n)
{
        int r = buf_puts(b, "{\"Pod\":");

        if (r >= 0)
                r = pod_json(b, p, i);
        if (r >= 0)
                r = buf_puts(b, ",\"Nodes\":null,\"NodeNames\":[");
        for (size_t k = 0; r >= 0 && k < n; k++) {
                if (k)
                        r = buf_puts(b, ",");
                if (r >= 0)
                        r = buf_put_json_string(b, names[k]);
        }
        return r < 0 ? r : buf_puts(b, "]}");
}

/* The topology-blind default: least allocated node that fits (ties: name), first free
 * GPUs.  Returns the node index or -1. */
static int
default_pick(const struct model *m, unsigned count, struct topo_mask *ret)
{
        int best = -1;
        double best_frac = 2;

        for (size_t i = 0; i < m->c->n_nodes; i++) {
                const struct ext_node *n = &m->c->nodes[i];
                unsigned used = topo_mask_count(&m->used[i]);
                double frac;

                if (n->n_gpus < count || n->n_gpus - used < count)
                        continue;
                frac = (double)used / n->n_gpus;
                if (frac < best_frac) {
                        best_frac = frac;
                        best = (int)i;
                }
        }
        if (best < 0)
                return -1;
        topo_mask_clear(ret);
        for (unsigned g = 0, k = 0; g < m->c->nodes[best].n_gpus && k < count; g++)
                if (!topo_mask_test(&m->used[best], g)) {
                        topo_mask_set(ret, g);
                        k++;
                }
        return best;
}

static double
busbw(const struct ext_node *n, const struct topo_mask *set)
{
        struct score_choice ch;

        if (topo_mask_count(set) < 2 || score_evaluate(n->cls, set, NULL, &ch) < 0)
                return 0;
        return ch.busbw_gbps;
}

static void
fmt_bw(char *buf, size_t size, const struct topo_mask *set, double gbps)
{
        if (topo_mask_count(set) < 2)
                snprintf(buf, size, "-");
        else
                snprintf(buf, size, "%.0f", gbps);
}

/* The pod's GPUs as the extender recorded them. */
static int
allocation_of(struct demo_http *h, const char *uid, char *ret_node, size_t node_size,
              struct topo_mask *ret)
{
        struct buf out;
        cJSON *doc, *p;
        int status, r;

        buf_init(&out, DEMO_MAX_ANSWER);
        r = demo_http_request(h, "GET", "/allocations", NULL, 0, &status, &out);
        if (r < 0 || status != 200) {
                buf_release(&out);
                return r < 0 ? r : -EPROTO;
        }
        doc = cJSON_ParseWithLength(out.data, out.len);
        buf_release(&out);
        r = -ENOENT;
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(doc, "pods")) {
                cJSON *g;

                if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(p, "uid")) ?: "", uid) != 0)
                        continue;
                snprintf(ret_node, node_size, "%s",
                         cJSON_GetStringValue(cJSON_GetObjectItem(p, "node")) ?: "");
                topo_mask_clear(ret);
                cJSON_ArrayForEach(g, cJSON_GetObjectItem(p, "gpus"))
                        if (cJSON_IsNumber(g) && g->valuedouble >= 0 && g->valuedouble < TOPO_MAX_GPUS)
                                topo_mask_set(ret, (unsigned)g->valuedouble);
                r = 0;
        }
        cJSON_Delete(doc);
        return r;
}

/* What kube-scheduler's FailedScheduling event would say: "0/N nodes are available:"
 * and each distinct reason with how many nodes gave it, most frequent first. */
static void
pending_reason(const cJSON *res, size_t n_nodes, char *buf, size_t size)
{
        const char *why[64];
        unsigned count[64], n = 0;
        size_t len;

        /* FailedNodes lists every failed node (the unresolvable ones too, for schedulers
         * older than 1.21), so it alone gives each node's reason once. */
        {
                const cJSON *f;

                cJSON_ArrayForEach(f, cJSON_GetObjectItem(res, "FailedNodes")) {
                        const char *w = cJSON_GetStringValue(f) ?: "?";
                        unsigned k = 0;

                        while (k < n && strcmp(why[k], w) != 0)
                                k++;
                        if (k == n && n < ELEMENTSOF(why)) {
                                why[n] = w;
                                count[n++] = 0;
                        }
                        if (k < n)
                                count[k]++;
                }
        }
        len = (size_t)snprintf(buf, size, "pending, 0/%zu nodes are available:", n_nodes);
        for (unsigned done = 0; done < n && len < size; done++) {
                unsigned best = 0;

                for (unsigned k = 1; k < n; k++)
                        if (count[k] > count[best])
                                best = k;
                len += (size_t)snprintf(buf + len, size - len, "\n%41s%u x %s", "", count[best],
                                        why[best]);
                count[best] = 0;
        }
}

static int
schedule_one(struct demo_http *h, struct model *m, char **names, const struct demo_pod *p,
             unsigned i, unsigned *ret_better, unsigned *ret_same)
{
        char uid[64], chosen_node[EXT_NAME_MAX] = "", gpus[TOPO_MAX_GPUS * 4] = "-",
             dgpus[TOPO_MAX_GPUS * 4] = "-", bw[32] = "-", dbw[32] = "-", reason[1024] = "";
        struct topo_mask set = { 0 }, dset = { 0 };
        struct buf req, out;
        cJSON *res = NULL, *passing, *it;
        size_t n_pass = 0;
        int status, r, dnode;
        double tbw = 0, dbwv = 0;
        char **pass = NULL;

        snprintf(uid, sizeof(uid), "d3m0d3m0-0000-4000-8000-%012u", i);
        buf_init(&req, DEMO_MAX_ANSWER);
        buf_init(&out, DEMO_MAX_ANSWER);
        dnode = default_pick(m, p->gpus, &dset);

        /* filter */
        r = args_json(&req, p, i, names, m->c->n_nodes);
        if (r >= 0)
                r = demo_http_request(h, "POST", "/filter", req.data, req.len, &status, &out);
        if (r < 0 || status != 200) {
                fprintf(stderr, "demo: filter failed (%d, HTTP %d): %s\n", r, status, out.data);
                goto fail;
        }
        res = cJSON_ParseWithLength(out.data, out.len);
        passing = cJSON_GetObjectItem(res, "NodeNames");
        n_pass = (size_t)cJSON_GetArraySize(passing);
        pass = calloc(n_pass + 1, sizeof(char *));
        if (!pass)
                goto fail;
        n_pass = 0;
        cJSON_ArrayForEach(it, passing)
                pass[n_pass++] = cJSON_GetStringValue(it);
        if (n_pass == 0)
                pending_reason(res, m->c->n_nodes, reason, sizeof(reason));
        else {
                const char *best = pass[0];

                /* prioritize, skipped by the scheduler when only one node is left */
                if (n_pass > 1) {
                        int best_score = -1;

                        buf_reset(&req);
                        r = args_json(&req, p, i, pass, n_pass);
                        if (r >= 0)
                                r = demo_http_request(h, "POST", "/prioritize", req.data, req.len,
                                                      &status, &out);
                        if (r < 0 || status != 200) {
                                fprintf(stderr, "demo: prioritize failed (HTTP %d)\n", status);
                                goto fail;
                        }
                        cJSON *prio = cJSON_ParseWithLength(out.data, out.len);
                        cJSON_ArrayForEach(it, prio) {
                                int score = cJSON_GetObjectItem(it, "Score")->valueint;
                                const char *host = cJSON_GetStringValue(cJSON_GetObjectItem(it, "Host"));

                                if (score > best_score ||
                                    (score == best_score && strcmp(host, best) < 0)) {
                                        best_score = score;
                                        best = host;
                                        snprintf(chosen_node, sizeof(chosen_node), "%s", host);
                                }
                        }
                        cJSON_Delete(prio);
                } else
                        snprintf(chosen_node, sizeof(chosen_node), "%s", best);

                /* bind */
                buf_reset(&req);
                r = buf_printf(&req, "{\"PodName\":\"%s\",\"PodNamespace\":\"demo\",\"PodUID\":\"%s\","
                                     "\"Node\":\"%s\"}", p->name, uid, chosen_node);
                if (r >= 0)
                        r = demo_http_request(h, "POST", "/bind", req.data, req.len, &status, &out);
                if (r < 0 || status != 200 || strcmp(out.data, "{\"Error\":\"\"}") != 0) {
                        fprintf(stderr, "demo: bind failed (HTTP %d): %s\n", status, out.data);
                        goto fail;
                }
                r = allocation_of(h, uid, chosen_node, sizeof(chosen_node), &set);
                if (r < 0) {
                        fprintf(stderr, "demo: the extender did not record the pod's GPUs\n");
                        goto fail;
                }
                const struct ext_node *n = ext_cluster_find_node(m->c, chosen_node);
                if (!n)
                        goto fail;
                tbw = busbw(n, &set);
                fmt_bw(bw, sizeof(bw), &set, tbw);
                topo_mask_format(&set, gpus, sizeof(gpus));
                for (size_t k = 0; k < ELEMENTSOF(set.w); k++)
                        m->used[n - m->c->nodes].w[k] |= set.w[k];
        }
        if (dnode >= 0) {
                dbwv = busbw(&m->c->nodes[dnode], &dset);
                fmt_bw(dbw, sizeof(dbw), &dset, dbwv);
                topo_mask_format(&dset, dgpus, sizeof(dgpus));
        }
        printf("%-12s %4u  %-16s | %-18s %-16s %6s | %-18s %-16s %6s\n", p->name, p->gpus,
               p->placement ? p->placement : "best-effort",
               n_pass ? chosen_node : reason[0] ? "(pending)" : "-", gpus, bw,
               dnode >= 0 ? m->c->nodes[dnode].name : "(none fits)", dgpus, dbw);
        if (reason[0])
                printf("%38s%s\n", "", reason);
        if (n_pass && p->gpus > 1) {
                if (tbw > dbwv * 1.0001)
                        (*ret_better)++;
                else if (tbw >= dbwv * 0.9999)
                        (*ret_same)++;
        }
        free(pass);
        cJSON_Delete(res);
        buf_release(&req);
        buf_release(&out);
        return 0;
fail:
        free(pass);
        cJSON_Delete(res);
        buf_release(&req);
        buf_release(&out);
        return -EPROTO;
}

int
main(int argc, char **argv)
{
        struct model m = { 0 };
        struct ext_config cfg;
        struct demo_http h;
        const char *why = NULL;
        char *json, **names;
        unsigned better = 0, same = 0, multi = 0;
        int64_t port;
        size_t len;
        int r, status = 0;

        if (argc != 3 || str_to_int64(argv[1], strlen(argv[1]), 1, 65535, &port) < 0) {
                fprintf(stderr, "Usage: %s PORT CLUSTER_JSON\n", argv[0]);
                return 2;
        }
        ext_config_default(&cfg);
        if (file_read_capped(argv[2], DEMO_MAX_CLUSTER_BYTES, &json, &len) < 0 ||
            ext_cluster_decode(json, len, &cfg, NULL, 1, &m.c, &why) < 0) {
                fprintf(stderr, "demo: cannot load %s: %s\n", argv[2], why ? why : "unreadable");
                return 1;
        }
        free(json);
        m.used = calloc(m.c->n_nodes, sizeof(*m.used));
        names = calloc(m.c->n_nodes, sizeof(*names));
        if (!m.used || !names)
                return 1;
        for (size_t i = 0; i < m.c->n_nodes; i++) {
                m.used[i] = m.c->nodes[i].used;
                names[i] = m.c->nodes[i].name;
        }
        r = demo_http_connect(&h, "127.0.0.1", (unsigned)port);
        if (r < 0) {
                fprintf(stderr, "demo: cannot connect to the extender: %s\n", strerror(-r));
                return 1;
        }

        printf("\nThe cluster (%zu nodes, real topologies from test/data/topologies):\n", m.c->n_nodes);
        for (size_t i = 0; i < m.c->n_nodes; i++) {
                const struct topo *t = score_class_topo(m.c->nodes[i].cls);
                char used[TOPO_MAX_GPUS * 4];

                topo_mask_format(&m.c->nodes[i].used, used, sizeof(used));
                printf("  %-18s %u GPUs  %-28s %s%s%s\n", m.c->nodes[i].name, t->n_gpus,
                       t->gpus[0].model[0] ? t->gpus[0].model : topo_vendor_to_string(t->vendor),
                       t->nvswitch ? "NVSwitch" : "", used[0] ? "  in use: " : "", used);
        }
        printf("\nkube-scheduler requests replayed: filter -> prioritize -> bind, per pod, in order.\n"
               "GB/s = modeled all-reduce bus bandwidth of the GPU set (scoring/), '-' for one GPU.\n\n");
        printf("%-12s %4s  %-16s | %-18s %-16s %6s | %-18s %-16s %6s\n", "pod", "GPUs", "placement",
               "topofit node", "GPUs", "GB/s", "default node", "GPUs", "GB/s");
        printf("%.*s\n", 124, "------------------------------------------------------------------"
                              "------------------------------------------------------------------");
        for (size_t i = 0; i < ELEMENTSOF(scenario); i++) {
                if (scenario[i].gpus > 1)
                        multi++;
                if (schedule_one(&h, &m, names, &scenario[i], (unsigned)i, &better, &same) < 0) {
                        status = 1;
                        break;
                }
        }
        printf("\nDefault = topology-blind: least-allocated node that fits, first free GPUs, on the\n"
               "same cluster state topofit saw.  Multi-GPU pods placed by topofit: faster set than\n"
               "the default for %u, equal for %u (of %u multi-GPU pods in the scenario).\n",
               better, same, multi);
        demo_http_close(&h);
        free(names);
        free(m.used);
        ext_cluster_unref(m.c);
        return status;
}
