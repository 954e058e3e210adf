/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for topo_parse_annotation() with the round trip the header promises:
 * parse -> topo_to_annotation -> parse gives a topology that topo_equal()s the first, and
 * writing that again gives the same bytes.  Input is capped by the parser itself
 * (TOPO_MAX_ANNOTATION_BYTES).  Seeds: annotations written from test/data/topologies.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "topo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        CLEANUP(topo_unrefp) struct topo *t = NULL;
        CLEANUP(topo_unrefp) struct topo *back = NULL;
        struct topo_error err = {};
        char *json = NULL, *json2 = NULL;
        size_t len = 0, len2 = 0;

        if (topo_parse_annotation((const char *)data, size, &t, &err) < 0)
                return 0;
        if (topo_to_annotation(t, &json, &len) < 0)
                abort();
        if (topo_parse_annotation(json, len, &back, &err) < 0)
                abort();
        if (!topo_equal(t, back))
                abort();
        if (topo_to_annotation(back, &json2, &len2) < 0)
                abort();
        if (len != len2 || memcmp(json, json2, len) != 0)
                abort();
        free(json);
        free(json2);
        return 0;
}
