/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for kube-client's object decoders (kube-client/kube-decode.c): the
 * bytes are parsed with cJSON as kube-ops.c does for a GET or a watch event, then the tree
 * (and each item of a List) goes through kube__decode_node(), kube__decode_pod() and
 * kube__decode_podgroup(), with GPU resource names and kept labels configured as the
 * extender does; a Node with the listed labels kept and with every label kept, a Pod with
 * the keys that name its group kept (fuzz-kube-node.h says what is asserted).
 * Seeds: test/data/kube-scheduler-v1.20 (Nodes, Pods) and test/data/extender.
 */
#include <stdint.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "fuzz-kube-node.h"
#include "kube-private.h"
#include "macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const gpu_resources[] = { "nvidia.com/gpu", "amd.com/gpu", NULL };
static const char *const node_labels[] = { "topology.kubernetes.io/zone",
                                           "node.kubernetes.io/instance-type", NULL };

static void
decode_one(const cJSON *o)
{
        const struct kube__decode_opts opts = { gpu_resources, node_labels };
        const char *why = NULL;

        fuzz_kube_decode_node_both(o, gpu_resources, node_labels);
        {
                CLEANUP(kube__obj_unrefp) struct kube__obj *p = NULL;
                (void)kube__decode_pod(o, &opts, &p, &why);
        }
        {
                CLEANUP(kube__obj_unrefp) struct kube__obj *p = NULL;
                (void)kube__decode_pod(o, NULL, &p, &why);
        }
        fuzz_kube_decode_pod_grouped(o, gpu_resources);
        {
                CLEANUP(kube__obj_unrefp) struct kube__obj *g = NULL;
                (void)kube__decode_podgroup(o, &g, &why);
        }
        (void)kube__creation_ms(o);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        CLEANUP(cJSON_Deletep) cJSON *root = NULL;
        const cJSON *items, *it;

        root = cJSON_ParseWithLength((const char *)data, size);
        if (!root)
                return 0;
        decode_one(root);
        /* A List's items, and a watch event's object. */
        items = cJSON_GetObjectItemCaseSensitive(root, "items");
        cJSON_ArrayForEach(it, items)
                decode_one(it);
        it = cJSON_GetObjectItemCaseSensitive(root, "object");
        if (it)
                decode_one(it);
        return 0;
}
