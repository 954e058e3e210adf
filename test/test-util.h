/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Scaffolding the cmocka tests share: paths under the test data ($TOPOFIT_TEST_DATA, set by
 * test/meson.build to test/data; ./test/data when a binary is run by hand from the source
 * root), and whole-file reads and
 * writes that fail the test, not crash it.  Header only; include it after <cmocka.h> and link
 * common_io_dep.
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"

/* The largest fixture a test reads (the biggest real scheduler request is a few MiB). */
#define TEST_MAX_FILE_BYTES (64u << 20)

/* "$TOPOFIT_TEST_DATA/rel" into buf; returns buf. */
static inline const char *
test_data_path(const char *rel, char *buf, size_t size)
{
        const char *dir = getenv("TOPOFIT_TEST_DATA");

        snprintf(buf, size, "%s/%s", dir ? dir : "test/data", rel);
        return buf;
}

/* The whole file at path, NUL-terminated, for the caller to free(); fails the test when it
 * cannot be read.  ret_len may be NULL. */
static inline char *
test_read_path(const char *path, size_t *ret_len)
{
        char *text = NULL;
        int r = file_read_capped(path, TEST_MAX_FILE_BYTES, &text, ret_len);

        if (r < 0) {
                fail_msg("cannot read %s: %s", path, strerror(-r));
                return NULL;
        }
        return text;
}

/* test_read_path() of a file under the test data ("topologies/x.txt"). */
static inline char *
test_read_data(const char *rel, size_t *ret_len)
{
        char path[4096];

        return test_read_path(test_data_path(rel, path, sizeof(path)), ret_len);
}

/* Writes text to dir/name (created or truncated); fails the test when it cannot. */
static inline void
test_write_file(const char *dir, const char *name, const char *text)
{
        char path[4096];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "we");
        assert_non_null(f);
        assert_true(fputs(text, f) >= 0);
        assert_int_equal(fclose(f), 0);
}
