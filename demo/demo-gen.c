/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Generates demo/cluster.json, the demo's built-in cluster: one Node per entry of the table
 * below, each carrying the topofit.io/topology annotation that the topology codec makes
 * from a real `nvidia-smi topo -m` / `rocm-smi --showtopo` output in test/data/topologies,
 * plus a few running pods whose GPUs are recorded in topofit.io/gpus.  A program rather
 * than a hand-written file, so the annotations are exactly what the publisher would write.
 * Usage: topofit-demo-gen DATA_DIR > demo/cluster.json
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "ext-core.h"
#include "file.h"

#define DEMO_MAX_FILE_BYTES (1u << 20)

static const struct demo_node {
        const char *name;
        const char *file;  /* under DATA_DIR/topologies */
        const char *model; /* for matrices that carry no model name */
} demo_nodes[] = {
        { "node-a-rtx4090", "rtx4090-8gpu-pcie-server.txt", "NVIDIA GeForce RTX 4090" },
        { "node-b-dgx1-v100", "dgx1-v100-sxm2-oneflow.txt", "Tesla V100-SXM2-16GB" },
        { "node-c-hgx-a100x4", "hgx-a100-4gpu-sxm4-nv4-della.txt", "NVIDIA A100-SXM4-80GB" },
        { "node-d-dgx-h100", "dgx-h100-12nic-talos.txt", "NVIDIA H100 80GB HBM3" },
        { "node-e-mi210x4", "amd-mi210-4gpu-archer2-rocm-smi.txt", NULL },
        { "node-f-a800", "a800-sxm4-8gpu-4nic.txt", "NVIDIA A800-SXM4-80GB" },
};

/* Pods already running when the demo starts. */
static const struct demo_pod {
        const char *name;
        const char *node;
        const char *gpus;
} demo_pods[] = {
        { "running-infer-0", "node-b-dgx1-v100", "0,5" },
        { "running-train-0", "node-f-a800", "0,1,2,3,4,5" },
        { "running-pair-0", "node-d-dgx-h100", "0,1" },
        { "running-infer-1", "node-c-hgx-a100x4", "0" },
};

static int
emit_node(struct buf *out, const char *data_dir, const struct demo_node *d, char **ret_annotation)
{
        char path[4096], *text, *json = NULL;
        struct topo *t = NULL;
        struct topo_error err = { 0 };
        size_t len, jlen;
        int r;

        snprintf(path, sizeof(path), "%s/topologies/%s", data_dir, d->file);
        if (file_read_capped(path, DEMO_MAX_FILE_BYTES, &text, &len) < 0) {
                fprintf(stderr, "demo-gen: cannot read %s\n", path);
                return -ENOENT;
        }
        r = topo_parse_any(text, len, &t, &err);
        free(text);
        if (r < 0) {
                fprintf(stderr, "demo-gen: %s:%u: %s\n", path, err.line, err.msg);
                return r;
        }
        if (d->model)
                topo_set_model(t, d->model);
        snprintf(t->node_name, sizeof(t->node_name), "%s", d->name);
        r = topo_to_annotation(t, &json, &jlen);
        if (r >= 0) {
                r = buf_puts(out, "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":");
                if (r >= 0)
                        r = buf_put_json_string(out, d->name);
                if (r >= 0)
                        r = buf_puts(out, ",\"labels\":{\"kubernetes.io/hostname\":");
                if (r >= 0)
                        r = buf_put_json_string(out, d->name);
                if (r >= 0)
                        r = buf_puts(out, "},\"annotations\":{\"" TOPO_ANNOTATION_KEY "\":");
                if (r >= 0)
                        r = buf_put_json_string(out, json);
                if (r >= 0)
                        r = buf_printf(out, "}},\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"%u\"},"
                                            "\"allocatable\":{\"nvidia.com/gpu\":\"%u\"}}}",
                                       t->n_gpus, t->n_gpus);
        }
        topo_unref(t);
        if (r < 0)
                free(json);
        else
                *ret_annotation = json;
        return r;
}

static int
emit_pod(struct buf *out, const struct ext_config *cfg, const struct demo_pod *p,
         const char *annotation, unsigned index)
{
        struct ext_node node;
        struct ext_request req = { .n_containers = 1 };
        struct score_choice choice;
        struct topo_mask set;
        char *gpus_json = NULL;
        int r;

        r = ext_node_init(&node, cfg, p->node, annotation, strlen(annotation), 0, NULL);
        if (r < 0)
                return r;
        r = topo_mask_parse(p->gpus, node.n_gpus, &set);
        if (r >= 0)
                r = score_evaluate(node.cls, &set, NULL, &choice);
        if (r >= 0) {
                req.count = choice.n;
                req.containers[0] = (struct ext_container){ .name = "main", .count = choice.n };
                r = ext_gpus_annotation_encode(&req, &node, &choice, &gpus_json);
        }
        if (r >= 0)
                r = buf_printf(out,
                               "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
                               "\"namespace\":\"default\",\"uid\":\"00000000-demo-0000-0000-%012u\","
                               "\"annotations\":{\"" TOPO_GPUS_KEY "\":",
                               p->name, index);
        if (r >= 0)
                r = buf_put_json_string(out, gpus_json);
        if (r >= 0)
                r = buf_printf(out, "}},\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"main\","
                                    "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"%u\"}}}]},"
                                    "\"status\":{\"phase\":\"Running\"}}",
                               p->node, req.count);
        free(gpus_json);
        ext_node_release(&node);
        return r;
}

int
main(int argc, char **argv)
{
        char *annotations[ELEMENTSOF(demo_nodes)] = { 0 };
        struct ext_config cfg;
        struct buf out;
        int r = 0;

        if (argc != 2) {
                fprintf(stderr, "Usage: %s DATA_DIR > cluster.json (DATA_DIR holds topologies/: test/data)\n", argv[0]);
                return 2;
        }
        ext_config_default(&cfg);
        buf_init(&out, 64u << 20);
        r = buf_puts(&out, "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\n");
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(demo_nodes); i++) {
                if (i > 0)
                        r = buf_puts(&out, ",\n");
                if (r >= 0)
                        r = emit_node(&out, argv[1], &demo_nodes[i], &annotations[i]);
        }
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(demo_pods); i++) {
                const char *a = NULL;

                for (size_t k = 0; k < ELEMENTSOF(demo_nodes); k++)
                        if (strcmp(demo_nodes[k].name, demo_pods[i].node) == 0)
                                a = annotations[k];
                r = buf_puts(&out, ",\n");
                if (r >= 0)
                        r = a ? emit_pod(&out, &cfg, &demo_pods[i], a, (unsigned)i) : -ENOENT;
        }
        if (r >= 0)
                r = buf_puts(&out, "\n]}\n");
        for (size_t i = 0; i < ELEMENTSOF(demo_nodes); i++)
                free(annotations[i]);
        if (r < 0) {
                fprintf(stderr, "demo-gen: failed (%s)\n", strerror(-r));
                buf_release(&out);
                return 1;
        }
        fwrite(out.data, 1, out.len, stdout);
        buf_release(&out);
        return 0;
}
