/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for the text matrix parsers: the same bytes go through
 * topo_parse_nvsmi(), topo_parse_rocm() and topo_parse_any().  A parser may refuse
 * anything, but never crash, hang, leak, or accept a topology that its own annotation
 * writer cannot round-trip.  Seeds: test/data/topologies.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

#include "macro.h"
#include "topo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef int (*parse_fn)(const char *text, size_t len, struct topo **ret, struct topo_error *err);

static const parse_fn parsers[] = { topo_parse_nvsmi, topo_parse_rocm, topo_parse_any };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        for (size_t i = 0; i < ELEMENTSOF(parsers); i++) {
                CLEANUP(topo_unrefp) struct topo *t = NULL;
                CLEANUP(topo_unrefp) struct topo *back = NULL;
                struct topo_error err = {};
                char *json = NULL;
                size_t len = 0;

                if (parsers[i]((const char *)data, size, &t, &err) < 0)
                        continue;
                /* Whatever a parser accepts, the annotation writer must carry losslessly. */
                if (topo_to_annotation(t, &json, &len) < 0)
                        abort();
                if (topo_parse_annotation(json, len, &back, &err) < 0 || !topo_equal(t, back))
                        abort();
                free(json);
        }
        return 0;
}
