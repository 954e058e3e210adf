/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON reader benchmark behind the choice of one reader for the project (docs/
 * performance.md, "One JSON reader"): parses each file given (the extender's real request
 * bodies, from `topofit-ext-bench --dump`, and node annotations) ROUNDS times with plain
 * cJSON on malloc and with the project's reader (json_parse(): the checks, then cJSON in a
 * bump arena), walks the tree once per parse (every value visited), and with the scanner
 * alone (json_scan_document(): validation, no tree: what json_parse() runs first and what
 * the extender's ExtenderArgs decoder walks with), and prints ms per parse and MB/s.  The hand-written reader that json_parse() replaced was measured by this
 * file at commit a222008.  A benchmark, never a test: timing goals live here.
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
#define JB_MAX_MEMORY ((size_t)1 << 30)

static double
now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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

enum jb_reader { JB_CJSON_MALLOC, JB_JSON_PARSE, JB_SCAN, _JB_MAX };
static const char *const jb_names[_JB_MAX] = {
        [JB_CJSON_MALLOC] = "cJSON (malloc)",
        [JB_JSON_PARSE] = "json_parse()",
        [JB_SCAN] = "scanner only",
};

static int
parse_once(enum jb_reader which, const char *text, size_t len, size_t *ret_walk)
{
        if (which == JB_SCAN) {
                struct json_scan s;

                json_scan_init(&s, text, len, 0);
                *ret_walk = 0;
                return json_scan_document(&s);
        }
        if (which == JB_JSON_PARSE) {
                CLEANUP(json_doc_freep) struct json_doc *d = NULL;

                if (json_parse(text, len, JB_MAX_MEMORY, 0, &d, NULL) < 0)
                        return -EINVAL;
                *ret_walk = walk_cjson(d->root);
                return 0;
        }
        cJSON *j = cJSON_ParseWithLength(text, len);
        if (!j)
                return -EINVAL;
        *ret_walk = walk_cjson(j);
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
        }
        return 0;
}
