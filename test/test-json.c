/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for common/json: the strict bounded reader the pure core uses instead of cJSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "json.h"

static void
json_accepts_valid_documents(void **state)
{
        static const struct {
                const char *text;
                enum json_type root;
                size_t count;
        } cases[] = {
                {"{}", JSON_OBJECT, 0},
                {" [ ] ", JSON_ARRAY, 0},
                {"[1,-2,3.5,1e3,-0.25E-2,0]", JSON_ARRAY, 6},
                {"{\"a\":{\"b\":[true,false,null]}}", JSON_OBJECT, 1},
                {"\"\\u00e9\\ud83d\\ude00\"", JSON_STRING, 0},
                {"\t\r\n42\n", JSON_NUMBER, 0},
                {"null", JSON_NULL, 0},
                {"{\"\":1,\"a\":2}", JSON_OBJECT, 2},
                {"\"caf\xc3\xa9\"", JSON_STRING, 0},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct json_doc *d = NULL;
                struct json_error err = {0};

                print_message("# valid case %zu\n", i);
                assert_int_equal(json_parse(cases[i].text, strlen(cases[i].text), &d, &err), 0);
                assert_int_equal(json_type(d, json_root(d)), cases[i].root);
                assert_int_equal(json_count(d, json_root(d)), cases[i].count);
                json_doc_free(d);
        }
}

static void
json_rejects_invalid_documents_with_a_position(void **state)
{
        static const struct {
                const char *text;
                size_t len; /* 0: strlen */
                int r;
                unsigned line, column;
                const char *msg;
        } cases[] = {
                {"", 0, -EINVAL, 1, 1, "end of input"},
                {"{", 0, -EINVAL, 1, 2, "Expected a string key"},
                {"[1", 0, -EINVAL, 1, 1, "Unterminated array"},
                {"[1,]", 0, -EINVAL, 1, 4, "Unexpected character"},
                {"{\"a\":1,}", 0, -EINVAL, 1, 8, "Expected a string key"},
                {"{\"a\" 1}", 0, -EINVAL, 1, 6, "Expected ':'"},
                {"[1 2]", 0, -EINVAL, 1, 4, "Expected ',' or ']'"},
                {"{}x", 0, -EINVAL, 1, 3, "Trailing bytes"},
                {"{} {}", 0, -EINVAL, 1, 4, "Trailing bytes"},
                {"01", 0, -EINVAL, 1, 2, "Trailing bytes"},
                {"1.", 0, -EINVAL, 1, 3, "digits must follow"},
                {"1e", 0, -EINVAL, 1, 3, "bad exponent"},
                {"-", 0, -EINVAL, 1, 1, "Invalid number"},
                {"+1", 0, -EINVAL, 1, 1, "Unexpected character"},
                {"NaN", 0, -EINVAL, 1, 1, "Unexpected character"},
                {"tru", 0, -EINVAL, 1, 1, "Unexpected character"},
                {"\"abc", 0, -EINVAL, 1, 1, "Unterminated string"},
                {"\"abc\\", 0, -EINVAL, 1, 1, "Unterminated string"},
                {"[\"\\\"]", 0, -EINVAL, 1, 2, "Unterminated string"},
                {"\"a\tb\"", 0, -EINVAL, 1, 3, "control character"},
                {"\"\\x\"", 0, -EINVAL, 1, 2, "Invalid escape"},
                {"\"\\u12g4\"", 0, -EINVAL, 1, 2, "Invalid \\u escape"},
                {"\"\\ud800\"", 0, -EINVAL, 1, 2, "Lone high surrogate"},
                {"\"\\ud800\\u0041\"", 0, -EINVAL, 1, 2, "Lone high surrogate"},
                {"\"\\udc00\"", 0, -EINVAL, 1, 2, "Lone low surrogate"},
                {"\"\\u0000\"", 0, -EINVAL, 1, 2, "not allowed"},
                {"\"\xff\"", 0, -EINVAL, 1, 2, "Invalid UTF-8"},
                {"\"\xc0\xaf\"", 0, -EINVAL, 1, 2, "Invalid UTF-8"},     /* overlong '/' */
                {"\"\xed\xa0\x80\"", 0, -EINVAL, 1, 2, "Invalid UTF-8"}, /* raw surrogate */
                {"\"\xe2\x82\"", 0, -EINVAL, 1, 2, "Invalid UTF-8"},     /* cut sequence */
                {"[\"a\",\n  \"b\"\n  x]", 0, -EINVAL, 3, 3, "Expected ',' or ']'"},
                {"{\"a\":1,\"b\":2,\"a\":3}", 0, -EINVAL, 1, 1, "Duplicate key"},
                {"[1]\0", 4, -EINVAL, 1, 4, "Trailing bytes"},
                {"// c\n1", 0, -EINVAL, 1, 1, "Unexpected character"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct json_doc *d = (struct json_doc *)0x1;
                struct json_error err = {0};
                size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);
                int r = json_parse(cases[i].text, len, &d, &err);

                print_message("# case %zu: %d %u:%u %s\n", i, r, err.line, err.column,
                              err.msg ? err.msg : "");
                assert_int_equal(r, cases[i].r);
                assert_ptr_equal(d, (struct json_doc *)0x1);
                assert_non_null(strstr(err.msg, cases[i].msg));
                assert_int_equal(err.line, cases[i].line);
                assert_int_equal(err.column, cases[i].column);
        }
}

static void
json_caps_nesting_depth(void **state)
{
        char deep[JSON_MAX_DEPTH * 2 + 2];
        struct json_doc *d = NULL;
        struct json_error err = {0};

        /* JSON_MAX_DEPTH levels parse; one more does not. */
        memset(deep, '[', JSON_MAX_DEPTH);
        memset(deep + JSON_MAX_DEPTH, ']', JSON_MAX_DEPTH);
        assert_int_equal(json_parse(deep, 2 * JSON_MAX_DEPTH, &d, &err), 0);
        json_doc_free(d);
        memset(deep, '[', JSON_MAX_DEPTH + 1);
        memset(deep + JSON_MAX_DEPTH + 1, ']', JSON_MAX_DEPTH + 1);
        assert_int_equal(json_parse(deep, 2 * JSON_MAX_DEPTH + 2, &d, &err), -E2BIG);
        assert_non_null(strstr(err.msg, "nested too deeply"));
        assert_int_equal(json_parse("1", JSON_MAX_BYTES + 1, &d, &err), -E2BIG);
}

static void
json_decodes_strings_and_reads_typed_values(void **state)
{
        static const char text[] =
                "{\"s\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\",\"i\":-42,"
                "\"big\":9223372036854775808,\"f\":2.5,\"t\":true,\"n\":null,"
                "\"arr\":[10,20,30]}";
        struct json_doc *d = NULL;
        struct json_error err = {0};
        const char *s;
        size_t len;
        int64_t v;
        double f;
        bool b;

        assert_int_equal(json_parse(text, sizeof(text) - 1, &d, &err), 0);
        uint32_t root = json_root(d);
        assert_int_equal(json_get_string(d, json_get(d, root, "s"), &s, &len), 0);
        assert_string_equal(s, "a\"b\\c/d\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
        assert_int_equal(len, strlen(s));
        assert_int_equal(json_get_int64(d, json_get(d, root, "i"), -100, 100, &v), 0);
        assert_int_equal(v, -42);
        assert_int_equal(json_get_int64(d, json_get(d, root, "i"), 0, 100, &v), -ERANGE);
        assert_int_equal(json_get_int64(d, json_get(d, root, "big"), INT64_MIN, INT64_MAX, &v),
                         -ERANGE);
        assert_int_equal(json_get_int64(d, json_get(d, root, "f"), 0, 100, &v), -EINVAL);
        assert_int_equal(json_get_double(d, json_get(d, root, "f"), &f), 0);
        assert_true(f == 2.5);
        assert_int_equal(json_get_bool(d, json_get(d, root, "t"), &b), 0);
        assert_true(b);
        assert_int_equal(json_get_bool(d, json_get(d, root, "n"), &b), -EINVAL);
        assert_int_equal(json_type(d, json_get(d, root, "n")), JSON_NULL);
        assert_int_equal(json_get_string(d, json_get(d, root, "i"), &s, &len), -EINVAL);
        assert_int_equal(json_get(d, root, "missing"), JSON_NONE);
        assert_int_equal(json_type(d, JSON_NONE), _JSON_TYPE_INVALID);

        uint32_t arr = json_get(d, root, "arr");
        int64_t sum = 0;
        size_t k = 0;
        for (uint32_t c = json_first(d, arr); c != JSON_NONE; c = json_next(d, c), k++) {
                assert_null(json_key(d, c));
                assert_int_equal(json_get_int64(d, c, 0, 100, &v), 0);
                sum += v;
        }
        assert_int_equal(k, 3);
        assert_int_equal(sum, 60);
        assert_string_equal(json_key(d, json_first(d, root)), "s");
        assert_string_equal(json_type_to_string(JSON_ARRAY), "array");
        json_doc_free(d);
        assert_null(json_doc_free(NULL));
}

static void
json_handles_large_flat_documents_in_linear_memory(void **state)
{
        /* 100k members: the duplicate check sorts, it does not compare every pair. */
        size_t n = 100000, cap = n * 16 + 16, len = 0;
        char *text = malloc(cap);
        struct json_doc *d = NULL;
        struct json_error err = {0};

        assert_non_null(text);
        text[len++] = '{';
        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(text + len, cap - len, "%s\"k%zu\":%zu", i ? "," : "", i,
                                        i);
        text[len++] = '}';
        assert_int_equal(json_parse(text, len, &d, &err), 0);
        assert_int_equal(json_count(d, json_root(d)), n);
        json_doc_free(d);
        free(text);
}

int
main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(json_accepts_valid_documents),
                cmocka_unit_test(json_rejects_invalid_documents_with_a_position),
                cmocka_unit_test(json_caps_nesting_depth),
                cmocka_unit_test(json_decodes_strings_and_reads_typed_values),
                cmocka_unit_test(json_handles_large_flat_documents_in_linear_memory),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
