/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The project's one JSON reader: cJSON (measured against the hand-written reader it
 * replaced, docs/performance.md "One JSON reader"), behind a front that every decoder
 * uses, so the limits and the duplicate-key rule are the same everywhere.
 *
 * json_parse() validates the text with the scanner below before cJSON sees it, so the
 * project accepts one grammar, RFC 8259's, with these limits: nesting at most the caller's
 * depth (cJSON recurses per level), no \u0000 (cJSON would take it as a string's end), no
 * lone UTF-16 surrogate, numbers of at most 63 characters (cJSON reads no more), nothing
 * but blanks after the value.  cJSON alone is laxer (leading zeros, "1.", control bytes as
 * blanks or raw in strings, a BOM, bad \u hex read as U+0000): those are refused here, as
 * Go's encoding/json refuses them.  It then parses into a bump arena capped by the caller
 * (one free for the whole tree; a document cannot take more memory than its cap however it
 * is shaped).  Writers use buf_put_json_string() from buf.h.
 *
 * The scanner (json_scan_*) is for decoders that read a few fields of a large text: it
 * validates as it walks and builds nothing, handing out spans of the text.
 *
 * THE DUPLICATE-KEY RULE (one for the project): cJSON keeps every copy of a repeated key,
 * Go's encoding/json keeps the last, our first hand-written reader refused any.  Here an
 * object that repeats a key THE READER LOOKS UP is refused (json_get() notes it in the
 * document, the decoder ends with json_doc_repeated()), so a value is never read one way
 * here and another way by the writer's side; repeats of keys nobody reads are ignored,
 * like any unknown key.  Maps read whole (every key matters) use json_keys_unique().
 */
#pragma once

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

#define JSON_MAX_DEPTH 64 /* nesting of arrays and objects, unless a caller caps lower */

struct json_error {
        unsigned line;   /* 1-based; 0 when the error has no position */
        unsigned column; /* 1-based, in bytes */
        const char *msg; /* static sentence */
};

/* A parsed document: the tree and its arena.  root is valid until json_doc_free(). */
struct json_doc {
        cJSON *root;
        bool repeated; /* json_get() met a repeated key */
        struct json_arena *arena;
};

/* Parses text[0..len) into a new document whose tree takes at most max_memory bytes and
 * nests at most max_depth levels (0: JSON_MAX_DEPTH).  The caller caps len.  Returns 0, or
 * -ENODATA (empty or blank), -ELOOP (nested deeper), -EILSEQ (a string holds \u0000),
 * -E2BIG (over max_memory), -EINVAL (not JSON; err says where), -EBADMSG (bytes after the
 * value), -ENOMEM.  err (may be NULL) gets a sentence for every failure. */
int json_parse(const char *text, size_t len, size_t max_memory, unsigned max_depth,
               struct json_doc **ret, struct json_error *err);
struct json_doc *json_doc_free(struct json_doc *d); /* accepts NULL, returns NULL */
DEFINE_CLEANUP_FUNC(struct json_doc, json_doc_free)

/* The member named key of object o (NULL when absent, or o is NULL or not an object).  A
 * repeated key sets *repeated (may be NULL: the caller takes the first copy knowingly). */
const cJSON *json_get(const cJSON *o, const char *key, bool *repeated);
/* json_get() that notes a repeat in the document. */
static inline const cJSON *
json_doc_get(struct json_doc *d, const cJSON *o, const char *key)
{
        return json_get(o, key, &d->repeated);
}
static inline bool
json_doc_repeated(const struct json_doc *d)
{
        return d->repeated;
}
/* 0 when no two members of object o share a key; -EINVAL when two do; -ENOMEM. */
int json_keys_unique(const cJSON *o);

/* Typed reads: 0, or -EINVAL (absent, wrong type, not an integer), -ERANGE (outside
 * [min, max]); *ret written only on success. */
int json_get_int64(const cJSON *j, int64_t min, int64_t max, int64_t *ret);

/* --- the scanner ---------------------------------------------------------------------------
 * A pull reader over text the caller keeps alive: peek at the next value's kind, then read
 * it (json_scan_string), skip it (json_scan_skip, which validates it whole), or enter it and
 * walk its members (json_scan_member, json_scan_wanted) or elements (json_scan_next).
 * Functions return 0 or a count/kind on success and a negative errno on failure.  A failure
 * of the text (a syntax error) is sticky: s->error, s->error_msg (a static sentence) and
 * s->error_at (where; NULL when nowhere) keep the first, and every later call returns it.
 * Codes: -ENODATA (empty or blank text), -ELOOP (nested deeper than max_depth), -EILSEQ (a
 * string holds \u0000), -EBADMSG (bytes after the value), -EINVAL (anything else).  A
 * call that does not fit the text (json_scan_string on a number, json_scan_member outside an
 * object) returns -EINVAL and leaves s->error 0: the caller peeks first.  To look back, copy
 * the struct: a copy resumes where it was taken. */

#define JSON_MAX_NUMBER_LEN 63  /* bytes of one number (cJSON's buffer) */
#define JSON_SCAN_MAX_DEPTH 256 /* the most nesting a scanner can track */
#define JSON_SCAN_KEY_MAX 256   /* longest key json_str_equal() decodes to compare */

enum json_kind {
        JSON_KIND_NULL,
        JSON_KIND_FALSE,
        JSON_KIND_TRUE,
        JSON_KIND_NUMBER,
        JSON_KIND_STRING,
        JSON_KIND_ARRAY,
        JSON_KIND_OBJECT,
        _JSON_KIND_MAX,
        _JSON_KIND_INVALID = -EINVAL,
};
const char *json_kind_to_string(enum json_kind k); /* NULL for a value out of range */

struct json_scan {
        const char *text, *p, *end;
        unsigned depth, max_depth;
        bool comma;              /* a value just ended: a comma or a close comes next */
        uint64_t objects[JSON_SCAN_MAX_DEPTH / 64]; /* per level: an object (1) or array */
        int error;               /* the first syntax error, 0 */
        const char *error_msg;
        const char *error_at;
};

/* A span of the text: a whole value as it stands. */
struct json_span {
        const char *start;
        size_t len;
};

/* A string as it stands in the text: the bytes between its quotes, still escaped when
 * escaped is true (validated: json_str_decode() cannot fail on it but for room). */
struct json_str {
        const char *raw;
        size_t len;
        bool escaped;
};

/* Starts a scan of text[0..len) nesting at most max_depth levels (0: JSON_MAX_DEPTH; at
 * most JSON_SCAN_MAX_DEPTH). */
void json_scan_init(struct json_scan *s, const char *text, size_t len, unsigned max_depth);
/* The kind of the next value (blanks skipped, nothing consumed). */
int json_scan_peek(struct json_scan *s);
/* Validates the next value whole and passes it; its kind, and its span into *ret (may be
 * NULL). */
int json_scan_skip(struct json_scan *s, struct json_span *ret);
/* Passes the next value when it is, byte for byte, the len bytes at known: a whole value
 * the caller scanned and validated before, in the same place of a document of the same
 * shape (so the same bytes are the same value, valid).  true: the scan is after it, as
 * after json_scan_skip(); false: nothing consumed (it differs, or the text has an error). */
bool json_scan_skip_known(struct json_scan *s, const char *known, size_t len);
/* Reads the next value, a string, into *ret. */
int json_scan_string(struct json_scan *s, struct json_str *ret);
/* Enters the next value, an array or object: 0. */
int json_scan_enter(struct json_scan *s);
/* Inside an array: 1 when an element follows (read, skip or enter it next), 0 when the
 * array has ended (the scan is after it). */
int json_scan_next(struct json_scan *s);
/* Inside an array: json_scan_next() and json_scan_string() in one (an array of names is
 * read at a third of their cost): 1 and the next element, a string, into *ret; 0 when
 * the array has ended; -EMEDIUMTYPE (s->error stays 0, the scan stands before the element)
 * when the element is not a string. */
int json_scan_next_string(struct json_scan *s, struct json_str *ret);
/* Inside an object: 1 and the key when a member follows (its value comes next), 0 when the
 * object has ended. */
int json_scan_member(struct json_scan *s, struct json_str *ret_key);
/* Inside an object: passes (validating) the members whose keys are not among keys[0..n)
 * (n <= 32) and returns 1 + the index of the next one whose key is (its value comes next),
 * or 0 at the object's end.  THE DUPLICATE-KEY RULE: *seen (0 when the object is entered)
 * marks the keys met; a key met again returns -ENOTUNIQ (not a syntax error: s->error stays
 * 0, the scan stands before its value). */
int json_scan_wanted(struct json_scan *s, const char *const *keys, size_t n, uint32_t *seen);
/* After the top-level value: 0 when only blanks follow, else -EBADMSG. */
int json_scan_finish(struct json_scan *s);
/* Validates a whole document: json_scan_skip() then json_scan_finish(). */
int json_scan_document(struct json_scan *s);

/* Unescapes str into dst[0..size) with a NUL after it (\uXXXX as UTF-8), its length into
 * *ret_len (may be NULL).  -ENOBUFS when it does not fit (dst then holds garbage), -EINVAL
 * for an escape a scan would have refused. */
int json_str_decode(const struct json_str *str, char *dst, size_t size, size_t *ret_len);
/* true when str, unescaped, is s (decoded keys longer than JSON_SCAN_KEY_MAX - 1 never are). */
bool json_str_equal(const struct json_str *str, const char *s);
