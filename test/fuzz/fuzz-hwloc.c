/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for topo_hwloc_load_xml() (topology/hwloc).  hwloc 2.9's own XML
 * reader leaks on some malformed documents, so this one runs with -detect_leaks=0 (see
 * README.md); crashes, UB and hangs still count.  An accepted topology must round-trip
 * through the annotation writer.  Seeds: test/data/hwloc and test/data/ (*.xml).
 */
#include <stdint.h>
#include <stdlib.h>

#include "macro.h"
#include "topo-hwloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        CLEANUP(topo_unrefp) struct topo *t = NULL;
        CLEANUP(topo_unrefp) struct topo *back = NULL;
        struct topo_error err = {};
        char *json = NULL;
        size_t len = 0;

        if (topo_hwloc_load_xml((const char *)data, size, &t, &err) < 0)
                return 0;
        if (topo_to_annotation(t, &json, &len) < 0)
                abort();
        if (topo_parse_annotation(json, len, &back, &err) < 0 || !topo_equal(t, back))
                abort();
        free(json);
        return 0;
}
