/* SPDX-License-Identifier: Apache-2.0 */
/* Test helper: reads a file from the shared fixtures ($TOPOFIT_SHARED) into memory. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_MAX_FILE (64u << 20)

/* Returns a malloc()ed, NUL-terminated copy of $TOPOFIT_SHARED/rel, or NULL. */
static inline char *
read_shared(const char *rel, size_t *ret_len)
{
        const char *dir = getenv("TOPOFIT_SHARED");
        char path[4096];
        FILE *f;
        char *buf;
        long n;

        if (!dir)
                dir = "../shared";
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
