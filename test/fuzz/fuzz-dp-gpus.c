/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for the plugin's topofit.io/gpus reader (dp_parse_gpus_annotation over
 * the one codec, topology/topo-gpus.c) against a
 * cache of eight devices on node "node-1", and for the pod loader beside it
 * (dp_cache_load_podlist in dp-pods.c), which reads the same annotation off each pod.
 * Accepted sets must name only known devices.  Seeds: docs/annotations.md's record.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "dp.h"
#include "macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_DEV 8
/* A full cache (DP_MAX_PODS) is ~10 MB to set up for every input, which held the harness to
 * ~60 executions a second; a small one also reaches the cache-full path more often. */
#define FUZZ_MAX_PODS 16

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct dp_device devs[N_DEV];
        struct dp_pod_set sets[DP_MAX_POD_SETS];
        struct dp_cache c;
        const char *why = NULL;
        unsigned n = 0;

        for (unsigned i = 0; i < N_DEV; i++) {
                snprintf(devs[i].id, sizeof(devs[i].id), "GPU-%u", i);
                devs[i].healthy = true;
        }
        if (dp_cache_init_sized(&c, devs, N_DEV, FUZZ_MAX_PODS) < 0)
                abort();
        snprintf(c.node, sizeof(c.node), "node-1");

        if (dp_parse_gpus_annotation(&c, (const char *)data, size, sets, &n, &why) == 0) {
                if (n > DP_MAX_POD_SETS)
                        abort();
                for (unsigned i = 0; i < n; i++)
                        for (unsigned g = N_DEV; g < TOPO_MAX_GPUS; g++)
                                if (topo_mask_test(&sets[i].gpus, g))
                                        abort();
        }
        (void)dp_cache_load_podlist(&c, (const char *)data, size, &why);
        dp_cache_release(&c);
        return 0;
}
