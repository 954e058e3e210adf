/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for common/json: the project's one JSON reader (cJSON behind a front), its limits
 * and its duplicate-key rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "json.h"

#define MEM (1u << 20)

static void
json_accepts_valid_documents(void **state)
{
        static const struct {
                const char *text;
                int type; /* cJSON's type bits */
                int count;
        } cases[] = {
                {"{}", cJSON_Object, 0},
                {" [ ] ", cJSON_Array, 0},
                {"[1,-2,3.5,1e3,-0.25E-2,0]", cJSON_Array, 6},
                {"{\"a\":{\"b\":[true,false,null]}}", cJSON_Object, 1},
                {"\"\\u00e9\\ud83d\\ude00\"", cJSON_String, 0},
                {"\t\r\n42\n", cJSON_Number, 0},
                {"null", cJSON_NULL, 0},
                {"{\"\":1,\"a\":2}", cJSON_Object, 2},
                {"\"caf\xc3\xa9\"", cJSON_String, 0},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct json_doc *d = NULL;

                print_message("# valid case %zu\n", i);
                assert_int_equal(json_parse(cases[i].text, strlen(cases[i].text), MEM, 0, &d, NULL),
                                 0);
                assert_int_equal(d->root->type & 0xff, cases[i].type);
                assert_int_equal(cJSON_GetArraySize(d->root), cases[i].count);
                assert_false(json_doc_repeated(d));
                json_doc_free(d);
        }
}

static void
json_rejects_invalid_documents_with_a_code_and_position(void **state)
{
        static const struct {
                const char *text;
                int r;
                unsigned line, column; /* 0: no position */
                const char *msg;
        } cases[] = {
                {"", -ENODATA, 0, 0, "empty"},
                {" \n\t", -ENODATA, 0, 0, "empty"},
                {"[1", -EINVAL, 1, 3, "Unterminated"},
                {"{\"a\":", -EINVAL, 1, 6, "Unterminated"},
                {"[1,]", -EINVAL, 1, 4, "Not valid JSON"},
                {"{\"a\" 1}", -EINVAL, 1, 6, "Not valid JSON"},
                {"[1]\n  x", -EBADMSG, 2, 3, "Trailing bytes"},
                {"[1] [2]", -EBADMSG, 1, 5, "Trailing bytes"},
                {"\"a\\u0000b\"", -EILSEQ, 0, 0, "\\u0000"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct json_doc *d = NULL;
                struct json_error err = {0};

                print_message("# invalid case %zu: %s\n", i, cases[i].text);
                assert_int_equal(json_parse(cases[i].text, strlen(cases[i].text), MEM, 0, &d, &err),
                                 cases[i].r);
                assert_null(d);
                assert_non_null(strstr(err.msg, cases[i].msg));
                assert_int_equal(err.line, cases[i].line);
                if (cases[i].line)
                        assert_int_equal(err.column, cases[i].column);
        }
}

static void
json_caps_nesting_depth_and_memory(void **state)
{
        char deep[JSON_MAX_DEPTH * 2 + 2];
        struct json_doc *d = NULL;
        struct json_error err = {0};

        /* JSON_MAX_DEPTH levels parse; one more does not; a caller's lower cap holds. */
        memset(deep, '[', JSON_MAX_DEPTH);
        memset(deep + JSON_MAX_DEPTH, ']', JSON_MAX_DEPTH);
        assert_int_equal(json_parse(deep, 2 * JSON_MAX_DEPTH, MEM, 0, &d, &err), 0);
        d = json_doc_free(d);
        assert_int_equal(json_parse(deep, 2 * JSON_MAX_DEPTH, MEM, 8, &d, &err), -ELOOP);
        memset(deep, '[', JSON_MAX_DEPTH + 1);
        memset(deep + JSON_MAX_DEPTH + 1, ']', JSON_MAX_DEPTH + 1);
        assert_int_equal(json_parse(deep, 2 * JSON_MAX_DEPTH + 2, MEM, 0, &d, &err), -ELOOP);
        assert_non_null(strstr(err.msg, "nested too deeply"));
        /* Brackets inside strings are not nesting. */
        assert_int_equal(json_parse("[\"[[[[[[[[[[\"]", 14, MEM, 2, &d, &err), 0);
        d = json_doc_free(d);

        /* 20,000 values in a 64 KiB tree do not fit: -E2BIG, not a crash or a partial tree. */
        size_t n = 20000, len = 0;
        char *text = malloc(n * 2 + 2);
        assert_non_null(text);
        text[len++] = '[';
        for (size_t i = 0; i < n; i++) {
                text[len++] = '1';
                text[len++] = i + 1 < n ? ',' : ']';
        }
        assert_int_equal(json_parse(text, len, 64u << 10, 0, &d, &err), -E2BIG);
        assert_null(d);
        assert_int_equal(json_parse(text, len, 16u << 20, 0, &d, &err), 0);
        assert_int_equal(cJSON_GetArraySize(d->root), (int)n);
        json_doc_free(d);
        free(text);
}

static void
json_refuses_a_repeated_key_that_is_read_and_ignores_others(void **state)
{
        static const char text[] = "{\"a\":1,\"b\":2,\"a\":3,\"u\":0,\"u\":0,\"m\":{\"x\":1,\"x\":2}}";
        struct json_doc *d = NULL;

        assert_int_equal(json_parse(text, sizeof(text) - 1, MEM, 0, &d, NULL), 0);
        /* Reading b (unique) notes nothing; u is repeated but nobody reads it. */
        assert_int_equal(json_doc_get(d, d->root, "b")->valueint, 2);
        assert_false(json_doc_repeated(d));
        /* Reading a, which is repeated, marks the document. */
        assert_non_null(json_doc_get(d, d->root, "a"));
        assert_true(json_doc_repeated(d));
        /* json_get with NULL: the caller knowingly takes the first copy. */
        assert_int_equal(json_get(d->root, "a", NULL)->valueint, 1);
        assert_null(json_get(d->root, "missing", NULL));
        assert_null(json_get(NULL, "a", NULL));
        /* Maps read whole. */
        assert_int_equal(json_keys_unique(json_get(d->root, "m", NULL)), -EINVAL);
        assert_int_equal(json_keys_unique(json_get(d->root, "m", NULL)->child), 0);
        json_doc_free(d);
}

static void
json_reads_integers_in_range(void **state)
{
        static const char text[] = "{\"i\":-42,\"big\":9223372036854775808,\"f\":2.5,\"s\":\"7\","
                                   "\"e\":1e3}";
        struct json_doc *d = NULL;
        int64_t v = 0;

        assert_int_equal(json_parse(text, sizeof(text) - 1, MEM, 0, &d, NULL), 0);
        assert_int_equal(json_get_int64(json_get(d->root, "i", NULL), -100, 100, &v), 0);
        assert_int_equal(v, -42);
        assert_int_equal(json_get_int64(json_get(d->root, "i", NULL), 0, 100, &v), -ERANGE);
        assert_int_equal(json_get_int64(json_get(d->root, "big", NULL), INT64_MIN, INT64_MAX, &v),
                         -ERANGE);
        assert_int_equal(json_get_int64(json_get(d->root, "f", NULL), 0, 100, &v), -EINVAL);
        assert_int_equal(json_get_int64(json_get(d->root, "s", NULL), 0, 100, &v), -EINVAL);
        assert_int_equal(json_get_int64(json_get(d->root, "missing", NULL), 0, 100, &v), -EINVAL);
        assert_int_equal(json_get_int64(json_get(d->root, "e", NULL), 0, 1000, &v), 0);
        assert_int_equal(v, 1000);
        json_doc_free(d);
        assert_null(json_doc_free(NULL));
}

static void
json_arena_leaves_other_cjson_users_on_malloc(void **state)
{
        struct json_doc *d = NULL;

        /* A tree built by hand after (and while another document is alive) is malloc'ed and
         * freed by cJSON_Delete; ASan would see a bad free if the arena leaked into it. */
        assert_int_equal(json_parse("{\"a\":[1,2]}", 11, MEM, 0, &d, NULL), 0);
        cJSON *o = cJSON_CreateObject();
        assert_non_null(o);
        assert_non_null(cJSON_AddStringToObject(o, "k", "v"));
        char *printed = cJSON_PrintUnformatted(o);
        assert_string_equal(printed, "{\"k\":\"v\"}");
        cJSON_free(printed);
        cJSON_Delete(o);
        json_doc_free(d);
}

int
main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(json_accepts_valid_documents),
                cmocka_unit_test(json_rejects_invalid_documents_with_a_code_and_position),
                cmocka_unit_test(json_caps_nesting_depth_and_memory),
                cmocka_unit_test(json_refuses_a_repeated_key_that_is_read_and_ignores_others),
                cmocka_unit_test(json_reads_integers_in_range),
                cmocka_unit_test(json_arena_leaves_other_cjson_users_on_malloc),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
