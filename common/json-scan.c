/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON scanner of common/json.h: validates RFC 8259 text with the project's limits and
 * walks it without building anything, for decoders that read a few fields of a large body
 * (extender/ext-args.c: 500 Node objects of 10 KB of which 3 fields matter).  json_parse()
 * runs it over every text before cJSON, so the whole project accepts one grammar: what this
 * file accepts.  Pure: no allocation, no I/O, no globals; the caller owns the text and the
 * struct json_scan, and every pointer handed out points into the text.
 * The first syntax error is sticky (s->error); type mismatches are the caller's, who peeks.
 */
#include "json.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define WHY_END "Unterminated JSON: the text ends inside a value."
#define WHY_BAD "Not valid JSON."
#define WHY_CTRL "Not valid JSON: a string holds a raw control character."
#define WHY_ESCAPE "Not valid JSON: a string holds an invalid escape."
#define WHY_SURROGATE "Not valid JSON: a string holds a lone UTF-16 surrogate."
#define WHY_NUMBER "Not valid JSON: a malformed number."
#define WHY_LONG_NUMBER "Not valid JSON: a number longer than 63 characters."
#define WHY_DEEP "The JSON is nested too deeply."
#define WHY_NUL "A JSON string holds \\u0000, which is refused."
#define WHY_EMPTY "The JSON text is empty."
#define WHY_TRAILING "Trailing bytes after the JSON value."

static const char *const kind_names[_JSON_KIND_MAX] = {
        [JSON_KIND_NULL] = "null",     [JSON_KIND_FALSE] = "false",
        [JSON_KIND_TRUE] = "true",     [JSON_KIND_NUMBER] = "number",
        [JSON_KIND_STRING] = "string", [JSON_KIND_ARRAY] = "array",
        [JSON_KIND_OBJECT] = "object",
};

const char *
json_kind_to_string(enum json_kind k)
{
        return k >= 0 && k < _JSON_KIND_MAX ? kind_names[k] : NULL;
}

/* Records the first syntax error and returns it; later ones keep the first. */
static int
syntax(struct json_scan *s, int r, const char *why, const char *at)
{
        if (s->error == 0) {
                s->error = r;
                s->error_msg = why;
                s->error_at = at;
        }
        s->p = s->end; /* nothing more is read */
        return s->error;
}

void
json_scan_init(struct json_scan *s, const char *text, size_t len, unsigned max_depth)
{
        *s = (struct json_scan){ .text = text, .p = text, .end = text + len };
        s->max_depth = max_depth ? max_depth : JSON_MAX_DEPTH;
        s->max_depth = MIN(s->max_depth, (unsigned)JSON_SCAN_MAX_DEPTH);
}

static const bool blank[256] = { [' '] = true, ['\n'] = true, ['\r'] = true, ['\t'] = true };

static const char *
skip_blanks(const char *p, const char *end)
{
        while (p < end && blank[(unsigned char)*p])
                p++;
        return p;
}

/* Bytes that stop the fast path of a string: '"', '\\' and control characters.  Eight
 * bytes a step; the per-byte tests are exact (no carry between bytes), so the lowest flag
 * is the first such byte. */
static uint64_t
string_stops(uint64_t w)
{
        const uint64_t low7 = 0x7f7f7f7f7f7f7f7full, ones = 0x0101010101010101ull;
        uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
        uint64_t zq = ~(((q & low7) + low7) | q), zb = ~(((b & low7) + low7) | b);
        uint64_t ctl = ~(((w & low7) + ones * (0x80 - 0x20)) | w);

        return (zq | zb | ctl) & ~low7;
}

/* The first byte at or after p that is '"', '\\' or a control character (or end): 16
 * bytes a step with SSE2 (every x86-64 has it), else 8 with the word trick above. */
static const char *
find_stop(const char *p, const char *end)
{
#if defined(__SSE2__)
        const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
        const __m128i top3 = _mm_set1_epi8((char)0xe0), zero = _mm_setzero_si128();

        for (; end - p >= 16; p += 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
                __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote),
                                                      _mm_cmpeq_epi8(v, bslash)),
                                         _mm_cmpeq_epi8(_mm_and_si128(v, top3), zero));
                unsigned bits = (unsigned)_mm_movemask_epi8(m);

                if (bits)
                        return p + __builtin_ctz(bits);
        }
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        for (; end - p >= 8; p += 8) {
                uint64_t w, hits;

                memcpy(&w, p, 8);
                hits = string_stops(w);
                if (hits)
                        return p + __builtin_ctzll(hits) / 8;
        }
#endif
        for (; p < end; p++)
                if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
                        return p;
        return end;
}

static int
hex4(const char *p, unsigned *ret)
{
        unsigned v = 0;

        for (int i = 0; i < 4; i++) {
                char c = p[i];
                unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                             : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                             : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                                    : 16u;

                if (d == 16)
                        return -EINVAL;
                v = v << 4 | d;
        }
        *ret = v;
        return 0;
}

/* The \uXXXX escape at p (a surrogate pair counts as one): its code point and length.
 * Refused as cJSON refuses them: a lone low surrogate, a high one without a low one after
 * it; and U+0000 (-EILSEQ), which would cut a C string short. */
static int
escape_u(const char *p, const char *end, unsigned *ret_cp, size_t *ret_len,
         const char **ret_why)
{
        unsigned hi, lo;

        if (end - p < 6)
                return *ret_why = WHY_END, -ENODATA;
        if (hex4(p + 2, &hi) < 0)
                return *ret_why = WHY_ESCAPE, -EINVAL;
        if (hi == 0)
                return *ret_why = WHY_NUL, -EILSEQ;
        if (hi >= 0xdc00 && hi <= 0xdfff)
                return *ret_why = WHY_SURROGATE, -EINVAL;
        if (hi < 0xd800 || hi > 0xdbff) {
                *ret_cp = hi;
                *ret_len = 6;
                return 0;
        }
        if ((end - p > 6 && p[6] != '\\') || (end - p > 7 && p[7] != 'u'))
                return *ret_why = WHY_SURROGATE, -EINVAL;
        if (end - p < 12)
                return *ret_why = WHY_END, -ENODATA;
        if (hex4(p + 8, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
                return *ret_why = WHY_SURROGATE, -EINVAL;
        *ret_cp = 0x10000 + ((hi & 0x3ff) << 10 | (lo & 0x3ff));
        *ret_len = 12;
        return 0;
}

/* The escape sequence at p (at its backslash): its length, and for \u its code point
 * (other escapes: the byte they stand for). */
static int
escape_at(const char *p, const char *end, unsigned *ret_cp, size_t *ret_len,
          const char **ret_why)
{
        static const char simple[256] = {
                ['"'] = '"', ['\\'] = '\\', ['/'] = '/', ['b'] = '\b',
                ['f'] = '\f', ['n'] = '\n', ['r'] = '\r', ['t'] = '\t',
        };

        if (end - p < 2)
                return *ret_why = WHY_END, -ENODATA;
        if (p[1] == 'u')
                return escape_u(p, end, ret_cp, ret_len, ret_why);
        if (!simple[(unsigned char)p[1]])
                return *ret_why = WHY_ESCAPE, -EINVAL;
        *ret_cp = (unsigned char)simple[(unsigned char)p[1]];
        *ret_len = 2;
        return 0;
}

/* The rest of a string from p, a stop byte of find_stop() (or the end): escapes validated,
 * then the closing quote; returns the position past it, NULL after a syntax error. */
static const char *
string_rest(struct json_scan *s, const char *p, bool *ret_escaped)
{
        bool escaped = false;

        for (;; p = find_stop(p, s->end)) {
                const char *why;
                unsigned cp;
                size_t n;
                int r;

                if (p == s->end)
                        return syntax(s, -EINVAL, WHY_END, s->end), NULL;
                if (*p == '"')
                        break;
                if (*p != '\\')
                        return syntax(s, -EINVAL, WHY_CTRL, p), NULL;
                r = escape_at(p, s->end, &cp, &n, &why);
                if (r < 0)
                        return syntax(s, r == -ENODATA ? -EINVAL : r, why,
                                      r == -ENODATA ? s->end : p), NULL;
                escaped = true;
                p += n;
        }
        if (ret_escaped)
                *ret_escaped = escaped;
        return p + 1;
}

/* Past the string whose opening quote is at q, validated; NULL after a syntax error.  Most
 * strings have no escape: their first stop byte is the closing quote, decided here inline;
 * the rest goes the long way. */
static inline __attribute__((always_inline)) const char *
string_end(struct json_scan *s, const char *q, bool *ret_escaped)
{
        const char *p = find_stop(q + 1, s->end);

        if (_likely_(p < s->end && *p == '"')) {
                if (ret_escaped)
                        *ret_escaped = false;
                return p + 1;
        }
        return string_rest(s, p, ret_escaped);
}

/* The string whose opening quote is at s->p: validated, s->p past its closing quote. */
static int
scan_string(struct json_scan *s, struct json_str *ret)
{
        bool escaped;
        const char *q = s->p, *p = string_end(s, q, &escaped);

        if (!p)
                return s->error;
        if (ret)
                *ret = (struct json_str){ .raw = q + 1, .len = (size_t)(p - 1 - (q + 1)),
                                          .escaped = escaped };
        s->p = p;
        return 0;
}

static bool
is_digit(char c)
{
        return c >= '0' && c <= '9';
}

static const char *
skip_digits(const char *p, const char *end)
{
        while (p < end && is_digit(*p))
                p++;
        return p;
}

/* Past the number at p: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, at most
 * JSON_MAX_NUMBER_LEN bytes (cJSON reads no more of a number), not followed by a byte that
 * would continue one; NULL after a syntax error (WHY_BAD when p starts no number). */
static const char *
number_end(struct json_scan *s, const char *p)
{
        const char *start = p, *end = s->end, *d;

        if (p < end && *p == '-')
                p++;
        if (p < end && *p == '0')
                p++;
        else if (p < end && is_digit(*p))
                p = skip_digits(p, end);
        else
                return syntax(s, -EINVAL, p == end ? WHY_END : p == start ? WHY_BAD : WHY_NUMBER,
                              p), NULL;
        if (p < end && *p == '.') {
                d = skip_digits(p + 1, end);
                if (d == p + 1)
                        return syntax(s, -EINVAL, d == end ? WHY_END : WHY_NUMBER, d), NULL;
                p = d;
        }
        if (p < end && (*p == 'e' || *p == 'E')) {
                p++;
                if (p < end && (*p == '+' || *p == '-'))
                        p++;
                d = skip_digits(p, end);
                if (d == p)
                        return syntax(s, -EINVAL, d == end ? WHY_END : WHY_NUMBER, d), NULL;
                p = d;
        }
        if (p < end && (is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' ||
                        *p == '-'))
                return syntax(s, -EINVAL, WHY_NUMBER, p), NULL;
        if (p - start > JSON_MAX_NUMBER_LEN)
                return syntax(s, -EINVAL, WHY_LONG_NUMBER, start), NULL;
        return p;
}

/* Past the literal word (n bytes) at p; NULL after a syntax error. */
static const char *
literal_end(struct json_scan *s, const char *p, const char *word, size_t n)
{
        size_t have = (size_t)(s->end - p);

        if (have < n && memcmp(p, word, have) == 0)
                return syntax(s, -EINVAL, WHY_END, s->end), NULL;
        if (have < n || memcmp(p, word, n) != 0)
                return syntax(s, -EINVAL, WHY_BAD, p), NULL;
        return p + n;
}

/* Past the scalar (string, number, literal) at p; NULL after a syntax error. */
static const char *
scalar_end(struct json_scan *s, const char *p)
{
        switch (*p) {
        case '"':
                return string_end(s, p, NULL);
        case 't':
                return literal_end(s, p, "true", 4);
        case 'f':
                return literal_end(s, p, "false", 5);
        case 'n':
                return literal_end(s, p, "null", 4);
        default:
                return number_end(s, p);
        }
}

/* The kind of value each byte can start, + 1 (0: none). */
static const signed char value_kinds[256] = {
        ['n'] = JSON_KIND_NULL + 1,   ['f'] = JSON_KIND_FALSE + 1, ['t'] = JSON_KIND_TRUE + 1,
        ['"'] = JSON_KIND_STRING + 1, ['['] = JSON_KIND_ARRAY + 1, ['{'] = JSON_KIND_OBJECT + 1,
        ['-'] = JSON_KIND_NUMBER + 1, ['0'] = JSON_KIND_NUMBER + 1, ['1'] = JSON_KIND_NUMBER + 1,
        ['2'] = JSON_KIND_NUMBER + 1, ['3'] = JSON_KIND_NUMBER + 1, ['4'] = JSON_KIND_NUMBER + 1,
        ['5'] = JSON_KIND_NUMBER + 1, ['6'] = JSON_KIND_NUMBER + 1, ['7'] = JSON_KIND_NUMBER + 1,
        ['8'] = JSON_KIND_NUMBER + 1, ['9'] = JSON_KIND_NUMBER + 1,
};

int
json_scan_peek(struct json_scan *s)
{
        int k;

        if (s->error)
                return s->error;
        s->p = skip_blanks(s->p, s->end);
        if (s->p == s->end) {
                if (s->depth == 0 && skip_blanks(s->text, s->end) == s->end)
                        return syntax(s, -ENODATA, WHY_EMPTY, NULL);
                return syntax(s, -EINVAL, WHY_END, s->end);
        }
        k = value_kinds[(unsigned char)*s->p];
        return k ? k - 1 : syntax(s, -EINVAL, WHY_BAD, s->p);
}

static void
set_level(struct json_scan *s, unsigned d, bool object)
{
        if (object)
                s->objects[d / 64] |= 1ull << (d % 64);
        else
                s->objects[d / 64] &= ~(1ull << (d % 64));
}

static bool
level_is_object(const struct json_scan *s, unsigned d)
{
        return s->objects[d / 64] >> (d % 64) & 1;
}

/* Opens the array or object at s->p, one level deeper. */
static int
open_container(struct json_scan *s, bool object)
{
        unsigned d = s->depth;

        if (d >= s->max_depth)
                return syntax(s, -ELOOP, WHY_DEEP, s->p);
        set_level(s, d, object);
        s->depth++;
        s->p++;
        s->comma = false;
        return 0;
}

int
json_scan_enter(struct json_scan *s)
{
        int k = json_scan_peek(s);

        if (k < 0)
                return k;
        if (k != JSON_KIND_ARRAY && k != JSON_KIND_OBJECT)
                return -EINVAL; /* the caller's mistake, not the text's */
        return open_container(s, k == JSON_KIND_OBJECT);
}

static bool
in_object(const struct json_scan *s)
{
        return s->depth > 0 && level_is_object(s, s->depth - 1);
}

/* A member's key and its colon, at s->p (after blanks). */
static int
scan_key(struct json_scan *s, struct json_str *ret_key)
{
        const char *p;
        int r;

        if (*s->p != '"')
                return syntax(s, -EINVAL, WHY_BAD, s->p);
        r = scan_string(s, ret_key);
        if (r < 0)
                return r;
        p = skip_blanks(s->p, s->end);
        if (p == s->end)
                return syntax(s, -EINVAL, WHY_END, s->end);
        if (*p != ':')
                return syntax(s, -EINVAL, WHY_BAD, p);
        s->p = p + 1;
        return 0;
}

/* In the innermost container, after its opening or after one of its values: 1 when another
 * value follows (the comma consumed; in an object, the key into *ret_key and the colon
 * too), 0 when the container closes (the bracket consumed). */
static int
next_in_container(struct json_scan *s, struct json_str *ret_key)
{
        bool object = in_object(s);
        char close = object ? '}' : ']';
        const char *p = skip_blanks(s->p, s->end);

        if (p == s->end)
                return syntax(s, -EINVAL, WHY_END, s->end);
        if (*p == close) {
                s->p = p + 1;
                s->depth--;
                s->comma = true;
                return 0;
        }
        if (s->comma) {
                if (*p != ',')
                        return syntax(s, -EINVAL, WHY_BAD, p);
                p = skip_blanks(p + 1, s->end);
                if (p == s->end)
                        return syntax(s, -EINVAL, WHY_END, s->end);
        }
        s->p = p;
        s->comma = false;
        return object ? (scan_key(s, ret_key) < 0 ? s->error : 1) : 1;
}

int
json_scan_next(struct json_scan *s)
{
        if (s->error)
                return s->error;
        if (s->depth == 0 || in_object(s))
                return -EINVAL; /* the caller's mistake */
        return next_in_container(s, NULL);
}

int
json_scan_member(struct json_scan *s, struct json_str *ret_key)
{
        if (s->error)
                return s->error;
        if (!in_object(s))
                return -EINVAL; /* the caller's mistake */
        return next_in_container(s, ret_key);
}

/* The blanks at p, then a value must start (the text may not end here). */
static const char *
value_at(struct json_scan *s, const char *p)
{
        p = skip_blanks(p, s->end);
        if (p == s->end)
                return syntax(s, -EINVAL, WHY_END, s->end), NULL;
        return p;
}

/* A member's key and colon after blanks at p; returns where its value starts. */
static const char *
key_colon(struct json_scan *s, const char *p)
{
        p = value_at(s, p);
        if (p && *p != '"')
                return syntax(s, -EINVAL, WHY_BAD, p), NULL;
        p = p ? string_end(s, p, NULL) : NULL;
        p = p ? value_at(s, p) : NULL;
        if (p && *p != ':')
                return syntax(s, -EINVAL, WHY_BAD, p), NULL;
        return p ? value_at(s, p + 1) : NULL;
}

/* The container opening at p: one level deeper, and in an object the first key and colon;
 * returns where its first value starts.  An empty one (*ret_empty) leaves the depth as it
 * was and returns the position after it. */
static const char *
open_level(struct json_scan *s, const char *p, unsigned *depth, bool *ret_empty)
{
        bool object = *p == '{';
        const char *q = skip_blanks(p + 1, s->end);

        if (*depth >= s->max_depth)
                return syntax(s, -ELOOP, WHY_DEEP, p), NULL;
        *ret_empty = q < s->end && *q == (object ? '}' : ']');
        if (*ret_empty)
                return q + 1;
        set_level(s, (*depth)++, object);
        return object ? key_colon(s, q) : value_at(s, q);
}

/* After a value ending at p: passes the closes down to level base at most (*ret_done when
 * it gets there); at a comma, passes it, in an object the next key and colon too, and
 * returns where the next value starts. */
static const char *
after_value(struct json_scan *s, const char *p, unsigned *depth, unsigned base, bool *ret_done)
{
        *ret_done = false;
        while (*depth > base) {
                bool object = level_is_object(s, *depth - 1);

                p = skip_blanks(p, s->end);
                if (p == s->end)
                        return syntax(s, -EINVAL, WHY_END, s->end), NULL;
                if (*p == ',')
                        return object ? key_colon(s, p + 1) : value_at(s, p + 1);
                if (*p != (object ? '}' : ']'))
                        return syntax(s, -EINVAL, WHY_BAD, p), NULL;
                p++;
                (*depth)--;
        }
        *ret_done = true;
        return p;
}

/* Passes the value at s->p (a peek found one there), validating it, without recursion:
 * the open levels are bits of s->objects.  Every byte the extender does not read passes
 * here, so the loop keeps its state in locals and reads keys with their values. */
static int
skip_value(struct json_scan *s)
{
        const char *p = s->p;
        unsigned depth = s->depth;
        bool done = false;

        while (!done) {
                bool empty = true;

                if (*p == '{' || *p == '[')
                        p = open_level(s, p, &depth, &empty);
                else
                        p = scalar_end(s, p);
                if (p && empty)
                        p = after_value(s, p, &depth, s->depth, &done);
                if (!p)
                        return s->error;
        }
        s->p = p;
        s->depth = depth;
        s->comma = true;
        return 0;
}

int
json_scan_skip(struct json_scan *s, struct json_span *ret)
{
        int k = json_scan_peek(s), r;
        const char *start = s->p;

        if (k < 0)
                return k;
        r = skip_value(s);
        if (r < 0)
                return r;
        if (ret)
                *ret = (struct json_span){ .start = start, .len = (size_t)(s->p - start) };
        return k;
}

bool
json_scan_skip_known(struct json_scan *s, const char *known, size_t len)
{
        if (len == 0 || json_scan_peek(s) < 0 || (size_t)(s->end - s->p) < len ||
            memcmp(s->p, known, len) != 0)
                return false;
        s->p += len;
        s->comma = true;
        return true;
}

int
json_scan_string(struct json_scan *s, struct json_str *ret)
{
        int k = json_scan_peek(s), r;

        if (k < 0)
                return k;
        if (k != JSON_KIND_STRING)
                return -EINVAL; /* the caller's mistake: it peeks first */
        r = scan_string(s, ret);
        if (r >= 0)
                s->comma = true;
        return r;
}

int
json_scan_next_string(struct json_scan *s, struct json_str *ret)
{
        const char *p = s->p, *end = s->end, *q;
        bool escaped;
        int r;

        if (s->error)
                return s->error;
        if (s->depth == 0 || in_object(s))
                return -EINVAL; /* the caller's mistake */
        /* The common case without blanks, in one step; anything else the long way. */
        if (s->comma && p < end && *p == ',')
                p++;
        if ((s->comma && p == s->p) || p >= end || *p != '"') {
                r = json_scan_next(s);
                if (r <= 0)
                        return r;
                r = json_scan_peek(s);
                if (r != JSON_KIND_STRING)
                        return r < 0 ? r : -EMEDIUMTYPE;
                p = s->p;
        }
        q = string_end(s, p, &escaped);
        if (!q)
                return s->error;
        *ret = (struct json_str){ .raw = p + 1, .len = (size_t)(q - 1 - (p + 1)),
                                  .escaped = escaped };
        s->p = q;
        s->comma = true;
        return 1;
}

int
json_scan_wanted(struct json_scan *s, const char *const *keys, size_t n_keys, uint32_t *seen)
{
        assert(n_keys <= 32);
        for (;;) {
                struct json_str key;
                int r = json_scan_member(s, &key);

                if (r <= 0)
                        return r;
                for (size_t k = 0; k < n_keys; k++) {
                        if (!json_str_equal(&key, keys[k]))
                                continue;
                        if (*seen & 1u << k)
                                return -ENOTUNIQ;
                        *seen |= 1u << k;
                        return (int)k + 1;
                }
                r = json_scan_skip(s, NULL);
                if (r < 0)
                        return r;
        }
}

int
json_scan_finish(struct json_scan *s)
{
        const char *p;

        if (s->error)
                return s->error;
        p = skip_blanks(s->p, s->end);
        if (p != s->end)
                return syntax(s, -EBADMSG, WHY_TRAILING, p);
        s->p = p;
        return 0;
}

int
json_scan_document(struct json_scan *s)
{
        int r = json_scan_skip(s, NULL);

        return r < 0 ? r : json_scan_finish(s);
}

/* Appends code point cp as UTF-8 at d. */
static char *
put_utf8(char *d, unsigned cp)
{
        if (cp < 0x80) {
                *d++ = (char)cp;
        } else if (cp < 0x800) {
                *d++ = (char)(0xc0 | cp >> 6);
                *d++ = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
                *d++ = (char)(0xe0 | cp >> 12);
                *d++ = (char)(0x80 | (cp >> 6 & 0x3f));
                *d++ = (char)(0x80 | (cp & 0x3f));
        } else {
                *d++ = (char)(0xf0 | cp >> 18);
                *d++ = (char)(0x80 | (cp >> 12 & 0x3f));
                *d++ = (char)(0x80 | (cp >> 6 & 0x3f));
                *d++ = (char)(0x80 | (cp & 0x3f));
        }
        return d;
}

static size_t
utf8_len(unsigned cp)
{
        return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

int
json_str_decode(const struct json_str *str, char *dst, size_t size, size_t *ret_len)
{
        const char *p = str->raw, *end = str->raw + str->len;
        size_t n = 0;

        if (!str->escaped) {
                if (str->len >= size)
                        return -ENOBUFS;
                memcpy(dst, p, str->len);
                dst[str->len] = 0;
                if (ret_len)
                        *ret_len = str->len;
                return 0;
        }
        while (p < end) {
                const char *bs = memchr(p, '\\', (size_t)(end - p)), *why;
                size_t run = (size_t)((bs ? bs : end) - p), step;
                unsigned cp;
                int r;

                if (n + run >= size)
                        return -ENOBUFS;
                memcpy(dst + n, p, run);
                n += run;
                p += run;
                if (!bs)
                        break;
                r = escape_at(p, end, &cp, &step, &why);
                if (r < 0)
                        return r == -ENODATA ? -EINVAL : r;
                if (n + utf8_len(cp) >= size)
                        return -ENOBUFS;
                n = (size_t)(put_utf8(dst + n, cp) - dst);
                p += step;
        }
        dst[n] = 0;
        if (ret_len)
                *ret_len = n;
        return 0;
}

bool
json_str_equal(const struct json_str *str, const char *s)
{
        char buf[JSON_SCAN_KEY_MAX];

        if (!str->escaped)
                return strncmp(s, str->raw, str->len) == 0 && s[str->len] == 0;
        return json_str_decode(str, buf, sizeof(buf), NULL) == 0 && strcmp(buf, s) == 0;
}
