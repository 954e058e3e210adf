/* SPDX-License-Identifier: Apache-2.0 */
/*
 * file_read_capped(): the one "read a whole file, but not too much" loop, shared by the
 * extender, the plugin, the CLI, the demo, the benchmarks and the tests.  Built on struct
 * buf, so the cap is checked before memory grows.  Not part of topofit-common: the pure
 * core must not do file I/O (see common/meson.build).
 */
#include "file.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"

int
file_read_capped(const char *path, size_t cap, char **ret, size_t *ret_len)
{
        bool use_stdin = strcmp(path, "-") == 0;
        FILE *f = use_stdin ? stdin : fopen(path, "re");
        char chunk[65536];
        struct buf b;
        char *data;
        size_t n, len;
        int r = 0;

        if (!f)
                return -errno;
        buf_init(&b, cap);
        while (r >= 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                r = buf_append(&b, chunk, n);
        if (r >= 0 && ferror(f))
                r = -EIO;
        if (!use_stdin)
                fclose(f);
        if (r < 0) {
                buf_release(&b);
                return r;
        }
        /* buf_steal() gives "" for an empty file; NULL only when that allocation failed. */
        data = buf_steal(&b, &len);
        if (!data)
                return -ENOMEM;
        *ret = data;
        if (ret_len)
                *ret_len = len;
        return 0;
}
