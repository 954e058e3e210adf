/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for common/: number parsing edges, capped buffers, JSON string escaping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "buf.h"
#include "file.h"
#include "log.h"
#include "str.h"

static void
str_to_int64_parses_table(void **state)
{
        static const struct {
                const char *s;
                int64_t min, max;
                int r;
                int64_t v;
        } cases[] = {
                { "0", 0, 10, 0, 0 },
                { "10", 0, 10, 0, 10 },
                { "11", 0, 10, -ERANGE, 0 },
                { "-5", -10, 10, 0, -5 },
                { "+7", 0, 10, 0, 7 },
                { "", 0, 10, -EINVAL, 0 },
                { "-", -10, 10, -EINVAL, 0 },
                { "1x", 0, 10, -EINVAL, 0 },
                { " 1", 0, 10, -EINVAL, 0 },
                { "9223372036854775807", INT64_MIN, INT64_MAX, 0, INT64_MAX },
                { "9223372036854775808", INT64_MIN, INT64_MAX, -ERANGE, 0 },
                { "-9223372036854775808", INT64_MIN, INT64_MAX, 0, INT64_MIN },
                { "99999999999999999999999", INT64_MIN, INT64_MAX, -ERANGE, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                int64_t v = 12345;
                int r = str_to_int64(cases[i].s, strlen(cases[i].s), cases[i].min, cases[i].max, &v);

                assert_int_equal(r, cases[i].r);
                assert_true(r < 0 ? v == 12345 : v == cases[i].v);
        }
}

/* Kubernetes' quantity grammar (k8s.io/apimachinery/pkg/api/resource) as a whole count:
 * canonical forms the API server writes, forms it accepts and canonicalises, and what an
 * extended resource such as nvidia.com/gpu may not be (fractions, negatives). */
static void
str_to_quantity_count_follows_the_kubernetes_grammar(void **state)
{
        static const struct {
                const char *s;
                int r;
                int64_t v;
        } cases[] = {
                { "0", 0, 0 },           { "2", 0, 2 },          { "+2", 0, 2 },
                { "-0", 0, 0 },          { "8", 0, 8 },          { "1k", 0, 1000 },
                { "2000m", 0, 2 },       { "0.5k", 0, 500 },     { "1.000", 0, 1 },
                { "1e1", 0, 10 },        { "1E2", 0, 100 },      { "20e-1", 0, 2 },
                { "1Ki", 0, 1024 },      { "2Mi", 0, 2097152 },  { ".5k", 0, 500 },
                { "2.", 0, 2 },          { "007", 0, 7 },        { "1G", 0, 1000000000 },
                { "1.5", -EINVAL, 0 },   { "500m", -EINVAL, 0 }, { "1m", -EINVAL, 0 },
                { "-1", -EINVAL, 0 },    { "", -EINVAL, 0 },     { " 2", -EINVAL, 0 },
                { "2 ", -EINVAL, 0 },    { "1Ki5", -EINVAL, 0 }, { "1ki", -EINVAL, 0 },
                { "1K", -EINVAL, 0 },    { "k", -EINVAL, 0 },    { ".", -EINVAL, 0 },
                { "1.2.3", -EINVAL, 0 }, { "1e", -EINVAL, 0 },   { "1e1.5", -EINVAL, 0 },
                { "0x10", -EINVAL, 0 },  { "1Ei", -ERANGE, 0 },  { "1e30", -ERANGE, 0 },
                { "1T", -ERANGE, 0 },    { "99999999999999999999", -ERANGE, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                int64_t v = 12345;
                int r = str_to_quantity_count(cases[i].s, strlen(cases[i].s), INT64_C(1) << 32, &v);

                if (r != cases[i].r)
                        fail_msg("\"%s\": %d, want %d", cases[i].s, r, cases[i].r);
                assert_true(r < 0 ? v == 12345 : v == cases[i].v);
        }
}

static void
str_to_double_rejects_non_numbers(void **state)
{
        double v = 0;

        assert_int_equal(str_to_double("1.5", 3, &v), 0);
        assert_true(v == 1.5);
        assert_int_equal(str_to_double("nan", 3, &v), -EINVAL);
        assert_int_equal(str_to_double("1e999", 5, &v), -ERANGE);
        assert_int_equal(str_to_double("1.5\0", 4, &v), -EINVAL);
        assert_int_equal(str_to_double("", 0, &v), -EINVAL);
}

static void
buf_refuses_to_pass_its_cap(void **state)
{
        struct buf b;

        buf_init(&b, 8);
        assert_int_equal(buf_puts(&b, "12345678"), 0);
        assert_int_equal(buf_puts(&b, "9"), -E2BIG);
        assert_int_equal(b.len, 8);
        assert_string_equal(b.data, "12345678");
        assert_int_equal(buf_printf(&b, "%d", 1), -E2BIG);
        buf_release(&b);
}

static void
buf_escapes_json_strings(void **state)
{
        struct buf b;

        buf_init(&b, 1024);
        assert_int_equal(buf_put_json_string(&b, "a\"b\\c\n\x01"), 0);
        assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\u0001\"");
        buf_release(&b);
}

static void
buf_steal_of_empty_buffer_is_a_string(void **state)
{
        struct buf b;
        size_t n = 99;
        char *s;

        buf_init(&b, 16);
        s = buf_steal(&b, &n);
        assert_non_null(s);
        assert_int_equal(n, 0);
        assert_string_equal(s, "");
        free(s);
        buf_release(&b);
}

static void
str_trim_stops_at_content(void **state)
{
        const char *s = " \t x y \r\n";
        size_t n = strlen(s);

        str_trim(&s, &n);
        assert_int_equal(n, 3);
        assert_memory_equal(s, "x y", 3);
}

static void
str_format_uint_writes_plain_decimal_digits(void **state)
{
        static const struct {
                unsigned v;
                const char *want;
        } cases[] = {
                { 0, "0" }, { 7, "7" }, { 10, "10" }, { 1000, "1000" }, { 4294967295u, "4294967295" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char out[STR_UINT_DIGITS + 1];
                size_t n = str_format_uint(out, cases[i].v);

                assert_int_equal(n, strlen(cases[i].want));
                out[n] = '\0';
                assert_string_equal(out, cases[i].want);
        }
}

static void
str_table_index_finds_names_and_refuses_the_rest(void **state)
{
        static const char *const table[] = { "alpha", NULL, "gamma", "" };
        static const struct {
                const char *s;
                int want;
        } cases[] = {
                { "alpha", 0 }, { "gamma", 2 }, { "", 3 },
                { "beta", -EINVAL }, { "Alpha", -EINVAL }, { "gamm", -EINVAL }, { NULL, -EINVAL },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                assert_int_equal(str_table_index(table, ELEMENTSOF(table), cases[i].s), cases[i].want);
}

static void
file_read_capped_reads_whole_files_and_refuses_past_the_cap(void **state)
{
        static const struct {
                size_t size; /* bytes written to the file */
                size_t cap;
                int want;    /* 0: read back whole */
        } cases[] = {
                { 0, 16, 0 },
                { 5, 16, 0 },
                { 16, 16, 0 },
                { 17, 16, -E2BIG },
                { 200000, 200000, 0 },      /* several 64 KiB chunks, exactly at the cap */
                { 200001, 200000, -E2BIG }, /* one byte past it, in the last chunk */
                { 300000, 70000, -E2BIG },  /* stops early, well before the end */
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char path[] = "/tmp/topofit-test-common-XXXXXX";
                char *want = malloc(cases[i].size + 1), *got = (char *)"untouched";
                size_t len = 12345;
                int fd = mkstemp(path);

                assert_non_null(want);
                assert_true(fd >= 0);
                for (size_t k = 0; k < cases[i].size; k++)
                        want[k] = (char)('a' + k % 23);
                assert_int_equal(write(fd, want, cases[i].size), (ssize_t)cases[i].size);
                close(fd);
                assert_int_equal(file_read_capped(path, cases[i].cap, &got, &len), cases[i].want);
                if (cases[i].want == 0) {
                        assert_int_equal(len, cases[i].size);
                        assert_memory_equal(got, want, cases[i].size);
                        assert_int_equal(got[len], '\0');
                        free(got);
                } else {
                        assert_string_equal(got, "untouched");
                        assert_int_equal(len, 12345);
                }
                unlink(path);
                free(want);
        }
}

static void
file_read_capped_reports_a_missing_file_as_enoent(void **state)
{
        char *got = NULL;

        assert_int_equal(file_read_capped("/nonexistent/topofit/file", 16, &got, NULL), -ENOENT);
        assert_null(got);
}

static void
str_dns_names_match_the_api_servers_rules(void **state)
{
        char long_label[70], long_sub[260];
        static const struct {
                const char *s;
                bool label, subdomain;
        } cases[] = {
                { "default", true, true },
                { "kube-system", true, true },
                { "a", true, true },
                { "0abc9", true, true },
                { "gpu-pod.v1", false, true },
                { "a.b.c", false, true },
                { "", false, false },
                { "-a", false, false },
                { "a-", false, false },
                { "A", false, false },
                { "a_b", false, false },
                { "a..b", false, false },
                { ".a", false, false },
                { "a.", false, false },
                { "a.-b", false, false },
                { "a-.b", false, false },
                { "a b", false, false },
                { "pod\nts=0 level=error", false, false },
                { "caf\xc3\xa9", false, false },
                { "\xff\xfe", false, false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                assert_int_equal(str_is_dns_label(cases[i].s), cases[i].label);
                assert_int_equal(str_is_dns_subdomain(cases[i].s), cases[i].subdomain);
        }
        assert_false(str_is_dns_label(NULL));
        memset(long_label, 'a', 63);
        long_label[63] = 0;
        assert_true(str_is_dns_label(long_label));
        long_label[63] = 'a';
        long_label[64] = 0;
        assert_false(str_is_dns_label(long_label));
        assert_true(str_is_dns_subdomain(long_label)); /* k8s caps only the whole subdomain */
        memset(long_sub, 'a', 253);
        long_sub[253] = 0;
        assert_true(str_is_dns_subdomain(long_sub));
        long_sub[253] = 'a';
        long_sub[254] = 0;
        assert_false(str_is_dns_subdomain(long_sub));
}

static void
str_utf8_len_accepts_only_well_formed_sequences(void **state)
{
        static const struct {
                const char *s;
                size_t n;
        } cases[] = {
                { "a", 1 },
                { "\xc3\xa9", 2 },         /* e acute */
                { "\xe2\x82\xac", 3 },     /* euro sign */
                { "\xf0\x9f\x98\x80", 4 }, /* an emoji */
                { "\xc3", 0 },             /* cut short */
                { "\xc0\xaf", 0 },         /* overlong '/' */
                { "\xe0\x80\xaf", 0 },     /* overlong */
                { "\xed\xa0\x80", 0 },     /* a surrogate */
                { "\xf4\x90\x80\x80", 0 }, /* past U+10FFFF */
                { "\xff", 0 },
                { "\x80", 0 },             /* a lone continuation byte */
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                assert_int_equal(str_utf8_len((const unsigned char *)cases[i].s,
                                              strlen(cases[i].s)), cases[i].n);
}

static void
buf_json_strings_replace_bytes_that_are_not_utf8(void **state)
{
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "caf\xc3\xa9", "\"caf\xc3\xa9\"" },
                { "a\xff" "b", "\"a\\ufffdb\"" },
                { "\xc3", "\"\\ufffd\"" },
                { "\xed\xa0\x80x", "\"\\ufffd\\ufffd\\ufffdx\"" },
                { "n\n\"q\"", "\"n\\n\\\"q\\\"\"" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct buf b;

                buf_init(&b, 1024);
                assert_int_equal(buf_put_json_string(&b, cases[i].in), 0);
                assert_string_equal(b.data, cases[i].out);
                buf_release(&b);
        }
}

static void
log_value_quotes_and_escapes_untrusted_strings(void **state)
{
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "gpu-node-1", "gpu-node-1" },
                { "", "\"\"" },
                { "a b", "\"a b\"" },
                { "k=v", "\"k=v\"" },
                { "x\nts=0 level=error msg=forged", "\"x\\nts=0 level=error msg=forged\"" },
                { "q\"\\", "\"q\\\"\\\\\"" },
                { "\x01\x7f\xff", "\"\\x01\\x7f\\xff\"" },
        };
        char small[12];

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                assert_string_equal(LOG_V(cases[i].in), cases[i].out);
        assert_null(strchr(LOG_V("\r\n"), '\n'));
        assert_string_equal(log_value(small, sizeof(small), "aaaa aaaaaaaa"), "\"aaaa a...\"");
        assert_string_equal(LOG_V(NULL), "\"\"");
}

/* log_emit writes one line per call: the message and the pairs keep UTF-8 but have every
 * control byte spelled out, and only the quoted message escapes quotes. */
static void
log_emit_writes_one_escaped_line(void **state)
{
        char out[4096] = { 0 };
        int fds[2], saved;
        ssize_t n;

        assert_int_equal(pipe(fds), 0);
        saved = dup(STDERR_FILENO);
        assert_true(saved >= 0);
        assert_int_equal(dup2(fds[1], STDERR_FILENO), STDERR_FILENO);
        log_emit(LOG_LEVEL_ERROR, "bad \"pod\"\ncaf\xc3\xa9", "pod=%s n=%d", "a\tb\x01", 3);
        assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
        close(saved);
        close(fds[1]);
        n = read(fds[0], out, sizeof(out) - 1);
        close(fds[0]);
        assert_true(n > 0);
        assert_non_null(strstr(out, " level=error msg=\"bad \\\"pod\\\"\\ncaf\xc3\xa9\" "));
        assert_non_null(strstr(out, "\" pod=a\\tb\\x01 n=3\n"));
        assert_ptr_equal(strchr(out, '\n'), out + n - 1);
}

int
main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(str_to_int64_parses_table),
                cmocka_unit_test(str_to_quantity_count_follows_the_kubernetes_grammar),
                cmocka_unit_test(str_dns_names_match_the_api_servers_rules),
                cmocka_unit_test(str_utf8_len_accepts_only_well_formed_sequences),
                cmocka_unit_test(buf_json_strings_replace_bytes_that_are_not_utf8),
                cmocka_unit_test(log_value_quotes_and_escapes_untrusted_strings),
                cmocka_unit_test(log_emit_writes_one_escaped_line),
                cmocka_unit_test(str_to_double_rejects_non_numbers),
                cmocka_unit_test(buf_refuses_to_pass_its_cap),
                cmocka_unit_test(buf_escapes_json_strings),
                cmocka_unit_test(buf_steal_of_empty_buffer_is_a_string),
                cmocka_unit_test(str_trim_stops_at_content),
                cmocka_unit_test(str_format_uint_writes_plain_decimal_digits),
                cmocka_unit_test(str_table_index_finds_names_and_refuses_the_rest),
                cmocka_unit_test(file_read_capped_reads_whole_files_and_refuses_past_the_cap),
                cmocka_unit_test(file_read_capped_reports_a_missing_file_as_enoent),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
