/* SPDX-License-Identifier: Apache-2.0 */
/* Test helpers: read a fixture under test/data ($TOPOFIT_TEST_DATA) into memory. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_MAX_FILE (64u << 20)

/* Returns a malloc()ed, NUL-terminated copy of $env/rel (fallback directory when unset),
 * or NULL. */
static inline char *
read_under(const char *env, const char *fallback, const char *rel, size_t *ret_len)
{
        const char *dir = getenv(env);
        char path[4096];
        FILE *f;
        char *buf;
        long n;

        if (!dir)
                dir = fallback;
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        f = fopen(path, "rb");
        if (!f)
                return NULL;
        if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || n > (long)TEST_MAX_FILE ||
            fseek(f, 0, SEEK_SET) < 0) {
                fclose(f);
                return NULL;
        }
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
        }
        fclose(f);
        if (!buf)
                return NULL;
        buf[n] = '\0';
        *ret_len = (size_t)n;
        return buf;
}

/* $TOPOFIT_TEST_DATA/rel (test/data, set by test/meson.build): real-world and own fixtures. */
static inline char *
read_test_data(const char *rel, size_t *ret_len)
{
        return read_under("TOPOFIT_TEST_DATA", "test/data", rel, ret_len);
}
