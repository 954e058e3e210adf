/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON reader benchmark behind the choice of one reader for the project (docs/
 * performance.md, "One JSON reader"): parses each file given (the extender's real request
 * bodies, from `topofit-ext-bench --dump`, and node annotations) ROUNDS times with cJSON
 * on malloc, cJSON on a bump arena (as the extender's codec parses) and common/json.c,
 * then walks the tree once per parse (every value visited), and prints ms per parse and
 * MB/s.  A benchmark, never a test: timing goals live here.
 * Usage: json-bench ROUNDS FILE...
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "file.h"
#include "json.h"
#include "str.h"

#define JB_MAX_FILE (256u << 20)

static double
now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A bump arena behind cJSON's hooks, the shape of the extender codec's. */
static char *arena, *arena_top;
static size_t arena_size;

static void *
arena_malloc(size_t n)
{
        size_t need = (n + 15) & ~(size_t)15;
        void *p;

        if (!arena || (size_t)(arena_top - arena) + need > arena_size)
                return malloc(n); /* never happens with the sizes below; keeps it safe */
        p = arena_top;
        arena_top += need;
        return p;
}

static void
arena_free_one(void *p)
{
        if (!arena || (char *)p < arena || (char *)p >= arena + arena_size)
                free(p);
}

static size_t
walk_cjson(const cJSON *j)
{
        size_t n = 1;

        if (j->valuestring)
                n += strlen(j->valuestring);
        for (const cJSON *c = j->child; c; c = c->next)
                n += walk_cjson(c);
        return n;
}

static size_t
walk_json(const struct json_doc *d, uint32_t n)
{
        size_t k = 1;
        const char *s;
        size_t len;

        if (json_get_string(d, n, &s, &len) == 0)
                k += len;
        for (uint32_t c = json_first(d, n); c != JSON_NONE; c = json_next(d, c))
                k += walk_json(d, c);
        return k;
}

enum jb_reader { JB_CJSON_MALLOC, JB_CJSON_ARENA, JB_COMMON_JSON, _JB_MAX };
static const char *const jb_names[_JB_MAX] = {
        [JB_CJSON_MALLOC] = "cJSON (malloc)",
        [JB_CJSON_ARENA] = "cJSON (arena)",
        [JB_COMMON_JSON] = "common/json.c",
};

static int
parse_once(enum jb_reader which, const char *text, size_t len, size_t *ret_walk)
{
        if (which == JB_COMMON_JSON) {
                CLEANUP(json_doc_freep) struct json_doc *d = NULL;
                struct json_error err;

                if (json_parse(text, len, &d, &err) < 0)
                        return -EINVAL;
                *ret_walk = walk_json(d, json_root(d));
                return 0;
        }
        cJSON_Hooks hooks = { 0 };
        if (which == JB_CJSON_ARENA) {
                hooks = (cJSON_Hooks){ .malloc_fn = arena_malloc, .free_fn = arena_free_one };
                arena_top = arena;
        }
        cJSON_InitHooks(&hooks);
        cJSON *j = cJSON_ParseWithLength(text, len);
        if (!j)
                return -EINVAL;
        *ret_walk = walk_cjson(j);
        if (which == JB_CJSON_MALLOC)
                cJSON_Delete(j);
        return 0;
}

int
main(int argc, char **argv)
{
        int64_t rounds;

        if (argc < 3 || str_to_int64(argv[1], strlen(argv[1]), 1, 100000, &rounds) < 0) {
                fprintf(stderr, "Usage: %s ROUNDS FILE...\n", argv[0]);
                return 2;
        }
        for (int f = 2; f < argc; f++) {
                CLEANUP(freep) char *text = NULL;
                size_t len;

                if (file_read_capped(argv[f], JB_MAX_FILE, &text, &len) < 0) {
                        fprintf(stderr, "json-bench: cannot read %s\n", argv[f]);
                        return 1;
                }
                arena_size = 32 * len + (1u << 20);
                arena = malloc(arena_size);
                if (!arena)
                        return 1;
                printf("%s (%zu bytes)\n", argv[f], len);
                for (int w = 0; w < _JB_MAX; w++) {
                        size_t walk = 0;
                        double best = 1e9;

                        /* Best of 3 batches: the machine is shared, the minimum is the
                         * least disturbed. */
                        for (int b = 0; b < 3; b++) {
                                double t0 = now_s();

                                for (int64_t i = 0; i < rounds; i++)
                                        if (parse_once((enum jb_reader)w, text, len, &walk) < 0) {
                                                fprintf(stderr, "json-bench: %s refuses %s\n",
                                                        jb_names[w], argv[f]);
                                                return 1;
                                        }
                                best = MIN(best, (now_s() - t0) / (double)rounds);
                        }
                        printf("  %-16s %9.3f ms/parse %8.1f MB/s  (walk %zu)\n", jb_names[w],
                               best * 1e3, (double)len / best / 1e6, walk);
                }
                free(arena);
                arena = NULL;
        }
        return 0;
}
