/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for common/json: parse, then walk every node with every typed reader
 * (each must answer for any node without reading out of bounds), and re-encode every
 * decoded string with buf_put_json_string().  Seeds: any JSON in test/data and fixtures.
 */
#include <stdint.h>
#include <stdlib.h>

#include "buf.h"
#include "json.h"
#include "macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
walk(const struct json_doc *d, uint32_t n, unsigned depth)
{
        const char *s;
        size_t len;
        int64_t i;
        double x;
        bool flag;

        if (depth > JSON_MAX_DEPTH + 1)
                abort(); /* the parser promised to refuse this */
        (void)json_type_to_string(json_type(d, n));
        (void)json_key(d, n);
        (void)json_count(d, n);
        if (json_get_string(d, n, &s, &len) == 0) {
                struct buf b;

                buf_init(&b, 1u << 20);

                (void)buf_put_json_string(&b, s);
                buf_release(&b);
        }
        (void)json_get_int64(d, n, INT64_MIN, INT64_MAX, &i);
        (void)json_get_double(d, n, &x);
        (void)json_get_bool(d, n, &flag);
        (void)json_get(d, n, "version");
        for (uint32_t c = json_first(d, n); c != JSON_NONE; c = json_next(d, c))
                walk(d, c, depth + 1);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        CLEANUP(json_doc_freep) struct json_doc *d = NULL;
        struct json_error err = {};

        if (json_parse((const char *)data, size, &d, &err) < 0)
                return 0;
        walk(d, json_root(d), 0);
        return 0;
}
