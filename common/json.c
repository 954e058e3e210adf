/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The front of cJSON for the whole project (json.h says why one reader and which rules).
 * The arena: cJSON allocates every value, key and string separately (a 4.5 MB NodeList is
 * some 200,000 malloc()s); a document is parsed into a capped bump arena instead.  cJSON
 * only has process-wide allocator hooks, so they are installed once, here and nowhere
 * else, and consult a thread-local arena that is set only around one parse; every other
 * cJSON use in the process (cJSON_Delete of trees built by hand, printing) falls through
 * to malloc/free.  Sits in common/: cJSON and libc only, no I/O.
 */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define JSON_ARENA_CHUNK (1u << 20)

struct json_arena_chunk {
        struct json_arena_chunk *next;
        size_t used, size;
        max_align_t data[];
};

struct json_arena {
        struct json_arena_chunk *chunks;
        size_t total, cap;
        bool full; /* an allocation was refused by the cap */
        bool oom;  /* malloc() failed */
        size_t next_chunk; /* grows from a size fitted to the text up to JSON_ARENA_CHUNK */
};

static __thread struct json_arena *tl_arena;

static void *
arena_alloc(struct json_arena *a, size_t n)
{
        struct json_arena_chunk *c = a->chunks;
        size_t need = (n + 15) & ~(size_t)15;
        void *p;

        if (!c || c->size - c->used < need) {
                size_t size = MAX(a->next_chunk, need);

                a->next_chunk = MIN(a->next_chunk * 2, (size_t)JSON_ARENA_CHUNK);
                if (a->total + size > a->cap) {
                        a->full = true;
                        return NULL;
                }
                c = malloc(sizeof(*c) + size);
                if (!c) {
                        a->oom = true;
                        return NULL;
                }
                c->size = size;
                c->used = 0;
                c->next = a->chunks;
                a->chunks = c;
                a->total += size;
        }
        p = (char *)c->data + c->used;
        c->used += need;
        return p;
}

static void
arena_free(struct json_arena *a)
{
        if (!a)
                return;
        for (struct json_arena_chunk *c = a->chunks, *next; c; c = next) {
                next = c->next;
                free(c);
        }
        free(a);
}

static void *
hook_malloc(size_t n)
{
        return tl_arena ? arena_alloc(tl_arena, n) : malloc(n);
}

static void
hook_free(void *p)
{
        /* While an arena is active everything cJSON frees came from it (a failed parse
         * deleting its partial tree): the arena goes as a whole. */
        if (!tl_arena)
                free(p);
}

static void
install_hooks(void)
{
        cJSON_Hooks hooks = { .malloc_fn = hook_malloc, .free_fn = hook_free };

        cJSON_InitHooks(&hooks);
}

static int
fail(struct json_error *err, int r, const char *msg, const char *text, const char *at)
{
        if (err) {
                *err = (struct json_error){ .msg = msg };
                if (at) {
                        err->line = 1;
                        err->column = 1;
                        for (const char *p = text; p < at; p++) {
                                if (*p == '\n') {
                                        err->line++;
                                        err->column = 1;
                                } else
                                        err->column++;
                        }
                }
        }
        return r;
}

/* The scanner's verdict on the whole text (json-scan.c): the grammar and the limits. */
static int
validate(const char *text, size_t len, unsigned max_depth, struct json_error *err)
{
        struct json_scan s;
        int r;

        json_scan_init(&s, text, len, max_depth);
        r = json_scan_document(&s);
        if (r < 0)
                return fail(err, r, s.error_msg, text, s.error_at);
        return 0;
}

int
json_parse(const char *text, size_t len, size_t max_memory, unsigned max_depth,
           struct json_doc **ret, struct json_error *err)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        const char *end = NULL;
        struct json_doc *d;
        cJSON *root;
        int r;

        r = validate(text, len, max_depth, err);
        if (r < 0)
                return r;
        pthread_once(&once, install_hooks);
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->arena = calloc(1, sizeof(*d->arena));
        if (!d->arena) {
                free(d);
                return -ENOMEM;
        }
        d->arena->cap = max_memory;
        /* Small documents (annotations, bindings) get a small first chunk. */
        d->arena->next_chunk = MIN(MAX(len * 8, (size_t)4096), (size_t)JSON_ARENA_CHUNK);
        tl_arena = d->arena;
        root = cJSON_ParseWithLengthOpts(text, len, &end, false);
        tl_arena = NULL;
        if (!root) {
                /* The text is valid: only the cap or memory should fail cJSON now; a
                 * refusal of cJSON's own still refuses (fuzz-json looks for them). */
                bool full = d->arena->full, oom = d->arena->oom;

                json_doc_free(d);
                if (full)
                        return fail(err, -E2BIG, "The JSON has more values than the limit.", text,
                                    NULL);
                if (oom)
                        return -ENOMEM;
                return fail(err, -EINVAL, "Not valid JSON.", text, end);
        }
        d->root = root;
        *ret = d;
        return 0;
}

struct json_doc *
json_doc_free(struct json_doc *d)
{
        if (!d)
                return NULL;
        arena_free(d->arena); /* the tree lives in it: never cJSON_Delete */
        free(d);
        return NULL;
}

const cJSON *
json_get(const cJSON *o, const char *key, bool *repeated)
{
        const cJSON *found = NULL;

        if (!cJSON_IsObject(o))
                return NULL;
        for (const cJSON *c = o->child; c; c = c->next) {
                if (!c->string || strcmp(c->string, key) != 0)
                        continue;
                if (found) {
                        if (repeated)
                                *repeated = true;
                        break;
                }
                found = c;
        }
        return found;
}

static int
cmp_keys(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int
json_keys_unique(const cJSON *o)
{
        CLEANUP(freep) const char **keys = NULL;
        size_t n = (size_t)cJSON_GetArraySize(o), i = 0;
        const cJSON *c;

        if (n < 2)
                return 0;
        keys = malloc(n * sizeof(*keys));
        if (!keys)
                return -ENOMEM;
        cJSON_ArrayForEach(c, o)
                keys[i++] = c->string ? c->string : "";
        qsort(keys, n, sizeof(*keys), cmp_keys);
        for (i = 1; i < n; i++)
                if (strcmp(keys[i - 1], keys[i]) == 0)
                        return -EINVAL;
        return 0;
}

int
json_get_int64(const cJSON *j, int64_t min, int64_t max, int64_t *ret)
{
        double v;

        if (!cJSON_IsNumber(j))
                return -EINVAL;
        v = j->valuedouble;
        if (!isfinite(v) || v != floor(v))
                return -EINVAL;
        /* Doubles hold integers exactly up to 2^53: beyond that a text could round into
         * range, so such magnitudes are out of range whatever the caps. */
        if (v < -9007199254740992.0 || v > 9007199254740992.0 || v < (double)min ||
            v > (double)max)
                return -ERANGE;
        *ret = (int64_t)v;
        return 0;
}
