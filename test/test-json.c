/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for common/json: the project's one JSON reader (cJSON behind a front), its limits
 * and its duplicate-key rule, and the scanner (json-scan.c) that validates every text for it
 * and walks large ones without a tree. */
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
                {"\"a\\u0000b\"", -EILSEQ, 1, 3, "\\u0000"},
                {"[\"a\x01\"]", -EINVAL, 1, 4, "control character"},
                {"[01]", -EINVAL, 1, 3, "malformed number"},
                {"\"\\ud800x\"", -EINVAL, 1, 2, "surrogate"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct json_doc *d = NULL;
                struct json_error err = {0};

                print_message("# invalid case %zu\n", i); /* texts hold newlines: not TAP */
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


/* Where cJSON alone is laxer than JSON (and than Go's encoding/json), json_parse() refuses:
 * the scanner runs first.  cjson says whether cJSON by itself takes the text. */
static void
json_refuses_what_only_cjson_would_take(void **state)
{
        char long_number[JSON_MAX_NUMBER_LEN + 3];
        static const struct {
                const char *text;
                bool cjson;
                size_t len; /* 0: strlen */
        } cases[] = {
                {"01", true}, /* strtod() reads leading zeros */
                {"[01]", true},
                {"[1.]", true},
                {"[-]", false},
                {"[.5]", false},
                {"[1e]", false},
                {"\x01[1]", true},          /* control bytes as blanks */
                {"[1,\x0b 2]", true},
                {"[\"a\x01" "b\"]", true},    /* raw control byte in a string */
                {"[\"a\x00" "b\"]", true, 7}, /* raw NUL: cJSON cuts the string */
                {"\xef\xbb\xbf[1]", true},  /* a byte-order mark */
                {"[\"\\uzzzz\"]", true},   /* bad hex: cJSON reads U+0000 */
                {"[\"\\ud800\"]", false},
                {"[\"\\udc00\"]", false},
                {"[\"\\ud800\\u0041\"]", false},
                {"[\"\\x\"]", false},
                {"[tru]", false},
                {"{\"a\" :1,}", false},
                {"[1,]", false},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);
                struct json_doc *d = NULL;
                const char *end = NULL;
                cJSON *raw;

                print_message("# lax case %zu\n", i);
                raw = cJSON_ParseWithLengthOpts(cases[i].text, len, &end, false);
                if (raw)
                        while (end < cases[i].text + len && strchr(" \t\r\n", *end) && *end)
                                end++;
                assert_int_equal(raw && end == cases[i].text + len, cases[i].cjson);
                cJSON_Delete(raw);
                assert_int_equal(json_parse(cases[i].text, len, MEM, 0, &d, NULL), -EINVAL);
                assert_null(d);
        }
        /* A number of 64 characters: cJSON reads 63 of them; refused whole. */
        memset(long_number, '1', sizeof(long_number));
        struct json_doc *d = NULL;
        struct json_error err = {0};
        assert_int_equal(json_parse(long_number, JSON_MAX_NUMBER_LEN, MEM, 0, &d, &err), 0);
        json_doc_free(d);
        assert_int_equal(json_parse(long_number, JSON_MAX_NUMBER_LEN + 1, MEM, 0, &d, &err),
                         -EINVAL);
        assert_non_null(strstr(err.msg, "longer than 63"));
}

/* The scanner walks a document: kinds, strings unescaped, spans, members by key. */
static void
json_scan_walks_members_and_elements(void **state)
{
        static const char text[] = " {\"a\" : [1, \"x\\n\\u00e9\\ud83d\\ude00\\/\", {\"b\":null}],"
                                   "\"skip\":{\"deep\":[[true,false]]},\"c\":-0.5e+2 } ";
        static const char *const keys[] = {"c", "a"};
        struct json_scan s;
        struct json_span span;
        struct json_str str;
        uint32_t seen = 0;
        char buf[32];
        size_t n;

        json_scan_init(&s, text, sizeof(text) - 1, 0);
        assert_int_equal(json_scan_peek(&s), JSON_KIND_OBJECT);
        assert_int_equal(json_scan_enter(&s), 0);
        assert_int_equal(json_scan_wanted(&s, keys, 2, &seen), 2); /* "a" */
        assert_int_equal(json_scan_enter(&s), 0);
        assert_int_equal(json_scan_next(&s), 1);
        assert_int_equal(json_scan_skip(&s, &span), JSON_KIND_NUMBER);
        assert_int_equal(span.len, 1);
        assert_int_equal(json_scan_next(&s), 1);
        assert_int_equal(json_scan_string(&s, &str), 0);
        assert_true(str.escaped);
        assert_int_equal(json_str_decode(&str, buf, sizeof(buf), &n), 0);
        assert_string_equal(buf, "x\n\xc3\xa9\xf0\x9f\x98\x80/");
        assert_int_equal(n, strlen(buf));
        /* Exactly the room: the text and its NUL; one byte less does not fit. */
        assert_int_equal(json_str_decode(&str, buf, n + 1, NULL), 0);
        assert_int_equal(json_str_decode(&str, buf, n, NULL), -ENOBUFS);
        assert_int_equal(json_scan_next(&s), 1);
        assert_int_equal(json_scan_skip(&s, &span), JSON_KIND_OBJECT);
        assert_memory_equal(span.start, "{\"b\":null}", span.len);
        assert_int_equal(json_scan_next(&s), 0);
        /* "skip" is passed, "c" found; then the end of the object. */
        assert_int_equal(json_scan_wanted(&s, keys, 2, &seen), 1);
        assert_int_equal(json_scan_skip(&s, &span), JSON_KIND_NUMBER);
        assert_memory_equal(span.start, "-0.5e+2", span.len);
        assert_int_equal(json_scan_wanted(&s, keys, 2, &seen), 0);
        assert_int_equal(json_scan_finish(&s), 0);
        assert_int_equal(s.error, 0);
        /* Calls that do not fit the text are the caller's error, not a syntax error. */
        json_scan_init(&s, "[1]", 3, 0);
        assert_int_equal(json_scan_string(&s, &str), -EINVAL);
        assert_int_equal(json_scan_member(&s, &str), -EINVAL);
        assert_int_equal(s.error, 0);
        assert_int_equal(json_scan_document(&s), 0);
}

/* An array of strings read in one call per element, with and without blanks; an element
 * that is not a string is the caller's to skip. */
static void
json_scan_reads_arrays_of_strings(void **state)
{
        static const char text[] = "[\"a\",\"b\\n\" , \"c\",1,\"d\"]";
        static const char *const want[] = {"a", "b\n", "c"};
        struct json_scan s;
        struct json_str str;
        char buf[8];

        json_scan_init(&s, text, sizeof(text) - 1, 0);
        assert_int_equal(json_scan_next_string(&s, &str), -EINVAL); /* not in an array */
        assert_int_equal(json_scan_enter(&s), 0);
        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                assert_int_equal(json_scan_next_string(&s, &str), 1);
                assert_int_equal(json_str_decode(&str, buf, sizeof(buf), NULL), 0);
                assert_string_equal(buf, want[i]);
        }
        assert_int_equal(json_scan_next_string(&s, &str), -EMEDIUMTYPE);
        assert_int_equal(s.error, 0);
        assert_int_equal(json_scan_skip(&s, NULL), JSON_KIND_NUMBER);
        assert_int_equal(json_scan_next_string(&s, &str), 1);
        assert_memory_equal(str.raw, "d", 1);
        assert_int_equal(json_scan_next_string(&s, &str), 0);
        assert_int_equal(json_scan_finish(&s), 0);
        /* Empty, and cut short. */
        json_scan_init(&s, "[ ]", 3, 0);
        assert_int_equal(json_scan_enter(&s), 0);
        assert_int_equal(json_scan_next_string(&s, &str), 0);
        json_scan_init(&s, "[\"a\",", 5, 0);
        assert_int_equal(json_scan_enter(&s), 0);
        assert_int_equal(json_scan_next_string(&s, &str), 1);
        assert_int_equal(json_scan_next_string(&s, &str), -EINVAL);
        assert_int_equal(s.error, -EINVAL);
        json_scan_init(&s, "[\"a\"\"b\"]", 9, 0);
        assert_int_equal(json_scan_enter(&s), 0);
        assert_int_equal(json_scan_next_string(&s, &str), 1);
        assert_int_equal(json_scan_next_string(&s, &str), -EINVAL); /* no comma */
}

/* A key the caller reads that comes twice is -ENOTUNIQ; other repeats are nobody's business. */
static void
json_scan_refuses_a_repeated_wanted_key(void **state)
{
        static const char text[] = "{\"u\":0,\"a\":1,\"u\":0,\"b\":2,\"a\":3}";
        static const char *const a[] = {"a"}, *const b[] = {"b", "\\u0061"};
        struct json_scan s;
        uint32_t seen = 0;

        json_scan_init(&s, text, sizeof(text) - 1, 0);
        assert_int_equal(json_scan_enter(&s), 0);
        assert_int_equal(json_scan_wanted(&s, a, 1, &seen), 1);
        assert_int_equal(json_scan_skip(&s, NULL), JSON_KIND_NUMBER);
        assert_int_equal(json_scan_wanted(&s, a, 1, &seen), -ENOTUNIQ);
        assert_int_equal(s.error, 0);
        /* The scan stands before the repeat's value and goes on from there. */
        assert_int_equal(json_scan_skip(&s, NULL), JSON_KIND_NUMBER);
        assert_int_equal(json_scan_wanted(&s, a, 1, &seen), 0);
        assert_int_equal(json_scan_finish(&s), 0);
        /* Keys compare unescaped: "\u0061" in the text is "a". */
        json_scan_init(&s, "{\"\\u0061\":1,\"b\":2}", 18, 0);
        seen = 0;
        assert_int_equal(json_scan_enter(&s), 0);
        assert_int_equal(json_scan_wanted(&s, a, 1, &seen), 1);
        assert_int_equal(json_scan_skip(&s, NULL), JSON_KIND_NUMBER);
        assert_int_equal(json_scan_wanted(&s, a, 1, &seen), 0);
        seen = 0;
        json_scan_init(&s, text, sizeof(text) - 1, 0);
        assert_int_equal(json_scan_enter(&s), 0);
        assert_int_equal(json_scan_wanted(&s, b, 2, &seen), 1);
}

/* Every proper prefix of a document is refused (end of text inside a value), and every
 * byte appended after it is trailing; nesting stops at max_depth. */
static void
json_scan_refuses_truncated_and_trailing_text_and_deep_nesting(void **state)
{
        static const char text[] = "{\"a\":[1,-2.5e3,\"x\\u00e9\\ud83d\\ude00\",{\"b\":null}],"
                                   "\"c\":true,\"d\":false}";
        char deep[2 * JSON_SCAN_MAX_DEPTH + 4];
        struct json_scan s;

        for (size_t n = 0; n < sizeof(text) - 1; n++) {
                json_scan_init(&s, text, n, 0);
                assert_int_equal(json_scan_document(&s), n == 0 ? -ENODATA : -EINVAL);
                if (n > 0 && s.error_at != text + n)
                        fail_msg("prefix of %zu bytes: error at %td (%s)", n, s.error_at - text,
                                 s.error_msg);
        }
        json_scan_init(&s, text, sizeof(text) - 1, 0);
        assert_int_equal(json_scan_document(&s), 0);
        json_scan_init(&s, "{} {}", 5, 0);
        assert_int_equal(json_scan_document(&s), -EBADMSG);
        assert_int_equal(s.error_at - s.text, 3);
        /* Sticky: the first error is every later call's answer. */
        assert_int_equal(json_scan_peek(&s), -EBADMSG);

        memset(deep, '[', JSON_SCAN_MAX_DEPTH + 2);
        memset(deep + JSON_SCAN_MAX_DEPTH + 2, ']', JSON_SCAN_MAX_DEPTH + 2);
        for (unsigned depth = 1; depth <= JSON_SCAN_MAX_DEPTH; depth *= 2) {
                json_scan_init(&s, deep + JSON_SCAN_MAX_DEPTH + 2 - depth, 2 * depth, depth);
                assert_int_equal(json_scan_document(&s), 0);
                json_scan_init(&s, deep + JSON_SCAN_MAX_DEPTH + 2 - depth - 1, 2 * depth + 2,
                               depth);
                assert_int_equal(json_scan_document(&s), -ELOOP);
        }
        /* A cap above what the scanner tracks is clamped, not overrun. */
        json_scan_init(&s, deep, 2 * JSON_SCAN_MAX_DEPTH + 4, 100000);
        assert_int_equal(json_scan_document(&s), -ELOOP);
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
                cmocka_unit_test(json_refuses_what_only_cjson_would_take),
                cmocka_unit_test(json_scan_walks_members_and_elements),
                cmocka_unit_test(json_scan_reads_arrays_of_strings),
                cmocka_unit_test(json_scan_refuses_a_repeated_wanted_key),
                cmocka_unit_test(json_scan_refuses_truncated_and_trailing_text_and_deep_nesting),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
