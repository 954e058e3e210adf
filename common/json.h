/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The project's one JSON reader: cJSON (measured against the hand-written reader it
 * replaced, docs/performance.md "One JSON reader"), behind a front that every decoder
 * uses, so the limits and the duplicate-key rule are the same everywhere.
 *
 * json_parse() checks the text before cJSON sees it (nesting at most the caller's depth,
 * since cJSON recurses per level; no \u0000, which cJSON would take as a string's end) and
 * after (nothing but blanks after the value), and parses into a bump arena capped by the
 * caller (one free for the whole tree; a document cannot take more memory than its cap
 * however it is shaped).  Writers use buf_put_json_string() from buf.h.
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
