/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for common/json (cJSON behind the project's front): parse under a
 * small memory cap, then walk every node with the typed readers and json_get() and
 * re-encode every string with buf_put_json_string().  Seeds: any JSON in test/data.
 */
#include <stdint.h>
#include <stdlib.h>

#include "buf.h"
#include "json.h"
#include "macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
walk(struct json_doc *d, const cJSON *n, unsigned depth)
{
        int64_t i;

        if (depth > JSON_MAX_DEPTH + 1)
                abort(); /* the parser promised to refuse this */
        if (cJSON_IsString(n)) {
                struct buf b;

                buf_init(&b, 1u << 20);
                (void)buf_put_json_string(&b, n->valuestring);
                buf_release(&b);
        }
        (void)json_get_int64(n, INT64_MIN, INT64_MAX, &i);
        (void)json_doc_get(d, n, "version");
        if (cJSON_IsObject(n))
                (void)json_keys_unique(n);
        for (const cJSON *c = n->child; c; c = c->next)
                walk(d, c, depth + 1);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        CLEANUP(json_doc_freep) struct json_doc *d = NULL;
        struct json_error err = {};

        if (json_parse((const char *)data, size, 16u << 20, 0, &d, &err) < 0)
                return 0;
        walk(d, d->root, 0);
        return 0;
}
