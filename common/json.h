/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small, strict, bounded JSON reader (RFC 8259) for the pure core, which must not link
 * cJSON.  It parses a byte range into a read-only DOM held in one document object; nodes are
 * addressed by index, strings are decoded (escapes, \uXXXX, surrogate pairs) and
 * NUL-terminated.  Writers use buf_put_json_string() from buf.h.
 *
 * Strictness: one value per input (trailing bytes other than blanks are an error), no
 * comments, no trailing commas, raw bytes must be valid UTF-8, control characters must be
 * escaped, \u0000 is refused (decoded strings are C strings), lone surrogates are refused,
 * and DUPLICATE KEYS inside one object are an error (never "last one wins").
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

#define JSON_MAX_DEPTH 64          /* nesting of arrays and objects */
#define JSON_MAX_BYTES (16u << 20) /* input size; callers usually cap lower */

enum json_type {
        JSON_NULL,
        JSON_FALSE,
        JSON_TRUE,
        JSON_NUMBER,
        JSON_STRING,
        JSON_ARRAY,
        JSON_OBJECT,
        _JSON_TYPE_MAX,
        _JSON_TYPE_INVALID = -EINVAL,
};

/* Nodes are addressed by a uint32_t index inside their document; JSON_NONE is "no such
 * node".  Every accessor accepts JSON_NONE and answers "absent" / -EINVAL. */
#define JSON_NONE UINT32_MAX

struct json_doc;

struct json_error {
        unsigned line;   /* 1-based */
        unsigned column; /* 1-based, in bytes */
        const char *msg; /* static sentence */
};

/* Parses text[0..len) into a new document (free with json_doc_free).  Returns 0, -EINVAL
 * (syntax; err says where), -E2BIG (over JSON_MAX_BYTES or JSON_MAX_DEPTH), -ENOMEM. */
int json_parse(const char *text, size_t len, struct json_doc **ret, struct json_error *err);
struct json_doc *json_doc_free(struct json_doc *d); /* accepts NULL, returns NULL */
DEFINE_CLEANUP_FUNC(struct json_doc, json_doc_free)

uint32_t json_root(const struct json_doc *d);
enum json_type json_type(const struct json_doc *d, uint32_t n);
const char *json_type_to_string(enum json_type t);

/* Arrays and objects: number of children, and iteration in document order. */
size_t json_count(const struct json_doc *d, uint32_t n);
uint32_t json_first(const struct json_doc *d, uint32_t n);
uint32_t json_next(const struct json_doc *d, uint32_t n);
/* The key of an object member (n is the member's value node); NULL for array items. */
const char *json_key(const struct json_doc *d, uint32_t n);
/* The member named key of object n, JSON_NONE when absent or n is not an object. */
uint32_t json_get(const struct json_doc *d, uint32_t n, const char *key);

/* Typed reads.  Return 0, or -EINVAL (wrong type / not an integer), -ERANGE (outside
 * [min, max]); ret_* written only on success.  Strings live as long as the document. */
int json_get_string(const struct json_doc *d, uint32_t n, const char **ret, size_t *ret_len);
int json_get_int64(const struct json_doc *d, uint32_t n, int64_t min, int64_t max, int64_t *ret);
int json_get_double(const struct json_doc *d, uint32_t n, double *ret);
int json_get_bool(const struct json_doc *d, uint32_t n, bool *ret);
