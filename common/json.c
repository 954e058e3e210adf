/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Strict bounded JSON reader: a recursive-descent parser (depth capped by JSON_MAX_DEPTH)
 * building a flat DOM.  Nodes live in one growable array and are linked by index (first
 * child, next sibling), decoded strings and number texts in one growable byte arena, so a
 * document is two allocations plus its header and its size is O(input).  Sits in common/:
 * libc only, no state.  The document owns everything it hands out.
 */
#include "json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "str.h"

struct json_node {
        uint8_t type;
        uint32_t first; /* first child */
        uint32_t next;  /* next sibling */
        uint32_t count; /* children */
        uint32_t key;   /* arena offset of the member key, UINT32_MAX when none */
        uint32_t str;   /* arena offset of string / number text */
        uint32_t str_len;
};

struct json_doc {
        struct json_node *nodes;
        size_t n_nodes, alloc_nodes;
        char *arena;
        size_t arena_len, arena_alloc;
};

struct parser {
        const char *p, *start, *end;
        struct json_doc *d;
        const char *msg;
        const char *err_at;
        int err;
};

static int
fail(struct parser *ps, const char *at, int err, const char *msg)
{
        if (!ps->msg) {
                ps->msg = msg;
                ps->err_at = at;
                ps->err = err;
        }
        return err;
}

static int
new_node(struct parser *ps, enum json_type type, uint32_t *ret)
{
        struct json_doc *d = ps->d;

        if (d->n_nodes >= UINT32_MAX - 1)
                return fail(ps, ps->p, -E2BIG, "Too many JSON values.");
        if (d->n_nodes == d->alloc_nodes) {
                size_t na = d->alloc_nodes ? d->alloc_nodes * 2 : 64;
                struct json_node *n = realloc(d->nodes, na * sizeof(*n));

                if (!n)
                        return fail(ps, ps->p, -ENOMEM, "Out of memory.");
                d->nodes = n;
                d->alloc_nodes = na;
        }
        d->nodes[d->n_nodes] = (struct json_node){
                .type = (uint8_t)type,
                .first = JSON_NONE,
                .next = JSON_NONE,
                .key = UINT32_MAX,
                .str = UINT32_MAX,
        };
        *ret = (uint32_t)d->n_nodes++;
        return 0;
}

static int
arena_reserve(struct parser *ps, size_t n)
{
        struct json_doc *d = ps->d;

        if (d->arena_len + n <= d->arena_alloc)
                return 0;
        if (d->arena_len + n >= UINT32_MAX)
                return fail(ps, ps->p, -E2BIG, "JSON strings too large.");
        size_t na = d->arena_alloc ? d->arena_alloc : 256;
        while (na < d->arena_len + n)
                na *= 2;
        char *a = realloc(d->arena, na);
        if (!a)
                return fail(ps, ps->p, -ENOMEM, "Out of memory.");
        d->arena = a;
        d->arena_alloc = na;
        return 0;
}

static void
skip_ws(struct parser *ps)
{
        while (ps->p < ps->end &&
               (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
                ps->p++;
}

static int
hex4(const char *s, unsigned *ret)
{
        unsigned v = 0;

        for (int i = 0; i < 4; i++) {
                char c = s[i];
                v <<= 4;
                if (c >= '0' && c <= '9')
                        v |= (unsigned)(c - '0');
                else if (c >= 'a' && c <= 'f')
                        v |= (unsigned)(c - 'a' + 10);
                else if (c >= 'A' && c <= 'F')
                        v |= (unsigned)(c - 'A' + 10);
                else
                        return -EINVAL;
        }
        *ret = v;
        return 0;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 when invalid. */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
        unsigned c = s[0];
        size_t len;
        uint32_t cp;

        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                len = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
                len = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
                len = 4, cp = c & 0x07;
        else
                return 0;
        if (len > n)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return len;
}

static size_t
utf8_put(char *out, uint32_t cp)
{
        if (cp < 0x80) {
                out[0] = (char)cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char)(0xc0 | (cp >> 6));
                out[1] = (char)(0x80 | (cp & 0x3f));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char)(0xe0 | (cp >> 12));
                out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[2] = (char)(0x80 | (cp & 0x3f));
                return 3;
        }
        out[0] = (char)(0xf0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[3] = (char)(0x80 | (cp & 0x3f));
        return 4;
}

/* Parses a string literal at ps->p (the opening quote) into the arena. */
static int
parse_string(struct parser *ps, uint32_t *ret_off, uint32_t *ret_len)
{
        const char *q = ps->p + 1;
        size_t raw = 0;
        int r;

        /* The decoded string is never longer than the raw literal. */
        for (const char *s = q; s < ps->end && *s != '"'; s++, raw++)
                if (*s == '\\' && s + 1 < ps->end)
                        s++, raw++;
        r = arena_reserve(ps, raw + 1);
        if (r < 0)
                return r;

        char *out = ps->d->arena + ps->d->arena_len, *o = out;
        while (q < ps->end && *q != '"') {
                unsigned char c = (unsigned char)*q;

                /* The common case first: plain printable ASCII, copied as is. */
                if (c >= 0x20 && c < 0x80 && c != '\\') {
                        *o++ = (char)c;
                        q++;
                        continue;
                }

                if (c < 0x20)
                        return fail(ps, q, -EINVAL, "Unescaped control character in string.");
                if (c != '\\') {
                        size_t l = utf8_len((const unsigned char *)q, (size_t)(ps->end - q));
                        if (l == 0)
                                return fail(ps, q, -EINVAL, "Invalid UTF-8 in string.");
                        memcpy(o, q, l);
                        o += l;
                        q += l;
                        continue;
                }
                if (q + 1 >= ps->end)
                        return fail(ps, ps->p, -EINVAL, "Unterminated string.");
                switch (q[1]) {
                case '"':
                        *o++ = '"';
                        q += 2;
                        continue;
                case '\\':
                        *o++ = '\\';
                        q += 2;
                        continue;
                case '/':
                        *o++ = '/';
                        q += 2;
                        continue;
                case 'b':
                        *o++ = '\b';
                        q += 2;
                        continue;
                case 'f':
                        *o++ = '\f';
                        q += 2;
                        continue;
                case 'n':
                        *o++ = '\n';
                        q += 2;
                        continue;
                case 'r':
                        *o++ = '\r';
                        q += 2;
                        continue;
                case 't':
                        *o++ = '\t';
                        q += 2;
                        continue;
                case 'u':
                        break;
                default:
                        return fail(ps, q, -EINVAL, "Invalid escape in string.");
                }
                unsigned cp, lo;
                if (ps->end - q < 6 || hex4(q + 2, &cp) < 0)
                        return fail(ps, q, -EINVAL, "Invalid \\u escape in string.");
                if (cp >= 0xdc00 && cp <= 0xdfff)
                        return fail(ps, q, -EINVAL, "Lone low surrogate in string.");
                if (cp >= 0xd800 && cp <= 0xdbff) {
                        if (ps->end - q < 12 || q[6] != '\\' || q[7] != 'u' ||
                            hex4(q + 8, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
                                return fail(ps, q, -EINVAL, "Lone high surrogate in string.");
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                        q += 6;
                }
                if (cp == 0)
                        return fail(ps, q, -EINVAL, "\\u0000 is not allowed in strings.");
                o += utf8_put(o, cp);
                q += 6;
        }
        if (q >= ps->end)
                return fail(ps, ps->p, -EINVAL, "Unterminated string.");
        *o = '\0';
        *ret_off = (uint32_t)ps->d->arena_len;
        *ret_len = (uint32_t)(o - out);
        ps->d->arena_len += (size_t)(o - out) + 1;
        ps->p = q + 1;
        return 0;
}

static int
parse_number(struct parser *ps, uint32_t n)
{
        const char *s = ps->p, *q = s;
        int r;

        if (q < ps->end && *q == '-')
                q++;
        if (q < ps->end && *q == '0')
                q++;
        else if (q < ps->end && *q >= '1' && *q <= '9')
                while (q < ps->end && *q >= '0' && *q <= '9')
                        q++;
        else
                return fail(ps, s, -EINVAL, "Invalid number.");
        if (q < ps->end && *q == '.') {
                q++;
                if (q >= ps->end || *q < '0' || *q > '9')
                        return fail(ps, q, -EINVAL, "Invalid number: digits must follow '.'.");
                while (q < ps->end && *q >= '0' && *q <= '9')
                        q++;
        }
        if (q < ps->end && (*q == 'e' || *q == 'E')) {
                q++;
                if (q < ps->end && (*q == '+' || *q == '-'))
                        q++;
                if (q >= ps->end || *q < '0' || *q > '9')
                        return fail(ps, q, -EINVAL, "Invalid number: bad exponent.");
                while (q < ps->end && *q >= '0' && *q <= '9')
                        q++;
        }
        size_t len = (size_t)(q - s);
        r = arena_reserve(ps, len + 1);
        if (r < 0)
                return r;
        memcpy(ps->d->arena + ps->d->arena_len, s, len);
        ps->d->arena[ps->d->arena_len + len] = '\0';
        ps->d->nodes[n].str = (uint32_t)ps->d->arena_len;
        ps->d->nodes[n].str_len = (uint32_t)len;
        ps->d->arena_len += len + 1;
        ps->p = q;
        return 0;
}

static int
key_cmp(const void *a, const void *b, void *arena)
{
        return strcmp((const char *)arena + *(const uint32_t *)a,
                      (const char *)arena + *(const uint32_t *)b);
}

static int
check_duplicates(struct parser *ps, uint32_t obj, const char *at)
{
        struct json_doc *d = ps->d;
        uint32_t count = d->nodes[obj].count, i = 0;

        if (count < 2)
                return 0;
        CLEANUP(freep) uint32_t *keys = malloc(count * sizeof(*keys));
        if (!keys)
                return fail(ps, at, -ENOMEM, "Out of memory.");
        for (uint32_t c = d->nodes[obj].first; c != JSON_NONE; c = d->nodes[c].next)
                keys[i++] = d->nodes[c].key;
        qsort_r(keys, count, sizeof(*keys), key_cmp, d->arena);
        for (i = 1; i < count; i++)
                if (strcmp(d->arena + keys[i - 1], d->arena + keys[i]) == 0)
                        return fail(ps, at, -EINVAL, "Duplicate key in object.");
        return 0;
}

static int parse_value(struct parser *ps, unsigned depth, uint32_t *ret);

static int
parse_container(struct parser *ps, unsigned depth, bool object, uint32_t n)
{
        const char *open = ps->p;
        char close = object ? '}' : ']';
        uint32_t last = JSON_NONE;
        int r;

        if (depth >= JSON_MAX_DEPTH)
                return fail(ps, ps->p, -E2BIG, "JSON nested too deeply.");
        ps->p++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == close) {
                ps->p++;
                return 0;
        }
        for (;;) {
                uint32_t key = UINT32_MAX, key_len;
                uint32_t child;

                skip_ws(ps);
                if (object) {
                        if (ps->p >= ps->end || *ps->p != '"')
                                return fail(ps, ps->p, -EINVAL, "Expected a string key.");
                        r = parse_string(ps, &key, &key_len);
                        if (r < 0)
                                return r;
                        skip_ws(ps);
                        if (ps->p >= ps->end || *ps->p != ':')
                                return fail(ps, ps->p, -EINVAL, "Expected ':' after key.");
                        ps->p++;
                }
                r = parse_value(ps, depth + 1, &child);
                if (r < 0)
                        return r;
                ps->d->nodes[child].key = key;
                if (last == JSON_NONE)
                        ps->d->nodes[n].first = child;
                else
                        ps->d->nodes[last].next = child;
                last = child;
                ps->d->nodes[n].count++;
                skip_ws(ps);
                if (ps->p >= ps->end)
                        return fail(ps, open, -EINVAL,
                                    object ? "Unterminated object." : "Unterminated array.");
                if (*ps->p == ',') {
                        ps->p++;
                        continue;
                }
                if (*ps->p == close) {
                        ps->p++;
                        break;
                }
                return fail(ps, ps->p, -EINVAL,
                            object ? "Expected ',' or '}' in object."
                                   : "Expected ',' or ']' in array.");
        }
        return object ? check_duplicates(ps, n, open) : 0;
}

static int
parse_value(struct parser *ps, unsigned depth, uint32_t *ret)
{
        static const struct {
                const char *lit;
                enum json_type type;
        } literals[] = {
                {"null", JSON_NULL},
                {"true", JSON_TRUE},
                {"false", JSON_FALSE},
        };
        uint32_t n;
        int r;

        skip_ws(ps);
        if (ps->p >= ps->end)
                return fail(ps, ps->p, -EINVAL, "Expected a value, found the end of input.");
        switch (*ps->p) {
        case '{':
        case '[':
                r = new_node(ps, *ps->p == '{' ? JSON_OBJECT : JSON_ARRAY, &n);
                if (r < 0)
                        return r;
                r = parse_container(ps, depth, *ps->p == '{', n);
                break;
        case '"':
                r = new_node(ps, JSON_STRING, &n);
                if (r < 0)
                        return r;
                uint32_t off, len;
                r = parse_string(ps, &off, &len);
                if (r >= 0) {
                        ps->d->nodes[n].str = off;
                        ps->d->nodes[n].str_len = len;
                }
                break;
        case '-':
        case '0' ... '9':
                r = new_node(ps, JSON_NUMBER, &n);
                if (r < 0)
                        return r;
                r = parse_number(ps, n);
                break;
        default:
                for (size_t i = 0; i < ELEMENTSOF(literals); i++) {
                        size_t l = strlen(literals[i].lit);
                        if ((size_t)(ps->end - ps->p) >= l &&
                            memcmp(ps->p, literals[i].lit, l) == 0) {
                                r = new_node(ps, literals[i].type, &n);
                                if (r < 0)
                                        return r;
                                ps->p += l;
                                *ret = n;
                                return 0;
                        }
                }
                return fail(ps, ps->p, -EINVAL, "Unexpected character; expected a JSON value.");
        }
        if (r < 0)
                return r;
        *ret = n;
        return 0;
}

static void
locate(const char *start, const char *at, struct json_error *err)
{
        unsigned line = 1, col = 1;

        for (const char *s = start; s < at; s++) {
                if (*s == '\n')
                        line++, col = 1;
                else
                        col++;
        }
        err->line = line;
        err->column = col;
}

int
json_parse(const char *text, size_t len, struct json_doc **ret, struct json_error *err)
{
        CLEANUP(json_doc_freep) struct json_doc *d = NULL;
        uint32_t root;
        int r;

        if (len > JSON_MAX_BYTES) {
                if (err)
                        *err = (struct json_error){0, 0, "JSON input too large."};
                return -E2BIG;
        }
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        struct parser ps = {.p = text, .start = text, .end = text + len, .d = d};

        r = parse_value(&ps, 0, &root);
        if (r >= 0) {
                skip_ws(&ps);
                if (ps.p != ps.end)
                        r = fail(&ps, ps.p, -EINVAL, "Trailing bytes after the JSON value.");
        }
        if (r < 0) {
                if (err) {
                        locate(text, ps.err_at ? ps.err_at : ps.p, err);
                        err->msg = ps.msg ? ps.msg : "Invalid JSON.";
                }
                return r;
        }
        *ret = TAKE_PTR(d);
        return 0;
}

struct json_doc *
json_doc_free(struct json_doc *d)
{
        if (!d)
                return NULL;
        free(d->nodes);
        free(d->arena);
        free(d);
        return NULL;
}

uint32_t
json_root(const struct json_doc *d)
{
        return d && d->n_nodes > 0 ? 0 : JSON_NONE;
}

static const struct json_node *
node(const struct json_doc *d, uint32_t n)
{
        return d && n < d->n_nodes ? &d->nodes[n] : NULL;
}

enum json_type
json_type(const struct json_doc *d, uint32_t n)
{
        const struct json_node *x = node(d, n);
        return x ? (enum json_type)x->type : _JSON_TYPE_INVALID;
}

const char *
json_type_to_string(enum json_type t)
{
        static const char *const names[_JSON_TYPE_MAX] = {
                [JSON_NULL] = "null",     [JSON_FALSE] = "boolean", [JSON_TRUE] = "boolean",
                [JSON_NUMBER] = "number", [JSON_STRING] = "string", [JSON_ARRAY] = "array",
                [JSON_OBJECT] = "object",
        };
        return t >= 0 && t < _JSON_TYPE_MAX ? names[t] : NULL;
}

size_t
json_count(const struct json_doc *d, uint32_t n)
{
        const struct json_node *x = node(d, n);
        return x && (x->type == JSON_ARRAY || x->type == JSON_OBJECT) ? x->count : 0;
}

uint32_t
json_first(const struct json_doc *d, uint32_t n)
{
        const struct json_node *x = node(d, n);
        return x ? x->first : JSON_NONE;
}

uint32_t
json_next(const struct json_doc *d, uint32_t n)
{
        const struct json_node *x = node(d, n);
        return x ? x->next : JSON_NONE;
}

const char *
json_key(const struct json_doc *d, uint32_t n)
{
        const struct json_node *x = node(d, n);
        return x && x->key != UINT32_MAX ? d->arena + x->key : NULL;
}

uint32_t
json_get(const struct json_doc *d, uint32_t n, const char *key)
{
        const struct json_node *x = node(d, n);

        if (!x || x->type != JSON_OBJECT)
                return JSON_NONE;
        for (uint32_t c = x->first; c != JSON_NONE; c = d->nodes[c].next)
                if (strcmp(d->arena + d->nodes[c].key, key) == 0)
                        return c;
        return JSON_NONE;
}

int
json_get_string(const struct json_doc *d, uint32_t n, const char **ret, size_t *ret_len)
{
        const struct json_node *x = node(d, n);

        if (!x || x->type != JSON_STRING)
                return -EINVAL;
        *ret = d->arena + x->str;
        if (ret_len)
                *ret_len = x->str_len;
        return 0;
}

int
json_get_int64(const struct json_doc *d, uint32_t n, int64_t min, int64_t max, int64_t *ret)
{
        const struct json_node *x = node(d, n);

        if (!x || x->type != JSON_NUMBER)
                return -EINVAL;
        return str_to_int64(d->arena + x->str, x->str_len, min, max, ret);
}

int
json_get_double(const struct json_doc *d, uint32_t n, double *ret)
{
        const struct json_node *x = node(d, n);

        if (!x || x->type != JSON_NUMBER)
                return -EINVAL;
        return str_to_double(d->arena + x->str, x->str_len, ret);
}

int
json_get_bool(const struct json_doc *d, uint32_t n, bool *ret)
{
        const struct json_node *x = node(d, n);

        if (!x || (x->type != JSON_TRUE && x->type != JSON_FALSE))
                return -EINVAL;
        *ret = x->type == JSON_TRUE;
        return 0;
}
