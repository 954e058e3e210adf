/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for common/json (cJSON behind the project's front): parse under a
 * small memory cap, then walk every node with the typed readers and json_get() and
 * re-encode every string with buf_put_json_string().  And the scanner (json-scan.c)
 * against cJSON alone on the same bytes: a text the scanner accepts, cJSON parses whole,
 * and the scanner's walk of it (kinds, keys, strings unescaped, numbers) is cJSON's tree;
 * a text it refuses, json_parse() refuses.  Seeds: any JSON in test/data.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void
differ(const char *what)
{
        fprintf(stderr, "fuzz-json: the scanner and cJSON differ: %s\n", what);
        abort();
}

static void
same_decoded(const struct json_str *str, const char *want)
{
        char *text = malloc(str->len + 1);

        if (!text)
                abort();
        if (!want || json_str_decode(str, text, str->len + 1, NULL) < 0 || strcmp(text, want) != 0)
                differ("a string's text");
        free(text);
}

/* The string (a key, or a value) at the scan is want. */
static void
same_string(struct json_scan *s, bool key, const char *want)
{
        struct json_str str;

        if (key ? json_scan_member(s, &str) != 1 : json_scan_string(s, &str) < 0)
                differ("a string or key");
        same_decoded(&str, want);
}

static void same_value(struct json_scan *s, const cJSON *n);

static void
same_container(struct json_scan *s, const cJSON *n, bool object)
{
        if (json_scan_enter(s) < 0)
                differ("a container");
        for (const cJSON *c = n->child; c; c = c->next) {
                struct json_str str;

                if (object)
                        same_string(s, true, c->string);
                else if (cJSON_IsString(c)) {
                        /* Strings of arrays through the one-call reader. */
                        if (json_scan_next_string(s, &str) != 1)
                                differ("an array's string");
                        same_decoded(&str, c->valuestring);
                        continue;
                } else if (json_scan_next(s) != 1)
                        differ("an element");
                same_value(s, c);
        }
        if ((object ? json_scan_member(s, NULL) : json_scan_next(s)) != 0)
                differ("a container's end");
}

static void
same_value(struct json_scan *s, const cJSON *n)
{
        static const int types[_JSON_KIND_MAX] = {
                [JSON_KIND_NULL] = cJSON_NULL,     [JSON_KIND_FALSE] = cJSON_False,
                [JSON_KIND_TRUE] = cJSON_True,     [JSON_KIND_NUMBER] = cJSON_Number,
                [JSON_KIND_STRING] = cJSON_String, [JSON_KIND_ARRAY] = cJSON_Array,
                [JSON_KIND_OBJECT] = cJSON_Object,
        };
        int k = json_scan_peek(s);
        struct json_span num;
        char text[JSON_MAX_NUMBER_LEN + 1];

        if (k < 0 || (n->type & 0xff) != types[k])
                differ("a value's kind");
        if (k == JSON_KIND_STRING)
                same_string(s, false, n->valuestring);
        else if (k == JSON_KIND_ARRAY || k == JSON_KIND_OBJECT)
                same_container(s, n, k == JSON_KIND_OBJECT);
        else if (json_scan_skip(s, &num) != k)
                differ("a scalar");
        if (k == JSON_KIND_NUMBER) {
                memcpy(text, num.start, num.len);
                text[num.len] = 0;
                if (strtod(text, NULL) != n->valuedouble)
                        differ("a number's value");
        }
}

/* The scanner's verdict on the bytes against cJSON's and json_parse()'s. */
static void
scanner_against_cjson(const char *text, size_t size)
{
        struct json_doc *d = NULL;
        struct json_scan s;
        int rs, rp;

        json_scan_init(&s, text, size, 0);
        rs = json_scan_document(&s);
        if (rs < 0 && !s.error_msg)
                differ("a refusal without a sentence");
        rp = json_parse(text, size, 16u << 20, 0, &d, NULL);
        if (rs < 0 && rp == 0)
                differ("json_parse() took what the scanner refused");
        if (rs == 0 && rp < 0 && rp != -E2BIG && rp != -ENOMEM)
                differ("cJSON refused what the scanner accepted");
        if (rp == 0) {
                json_scan_init(&s, text, size, 0);
                same_value(&s, d->root);
                if (json_scan_finish(&s) != 0)
                        differ("the end of the text");
        }
        json_doc_free(d);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        CLEANUP(json_doc_freep) struct json_doc *d = NULL;
        struct json_error err = {};

        scanner_against_cjson((const char *)data, size);
        if (json_parse((const char *)data, size, 16u << 20, 0, &d, &err) < 0)
                return 0;
        walk(d, d->root, 0);
        return 0;
}
