/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whole-file reads with a cap, for programs and tests (the extender's cluster file, TLS
 * PEMs, topology fixtures).  Lives in its own static library, topofit-common-io, so the pure
 * core (topology/, scoring/) links common/ without any file I/O.
 */
#pragma once

#include <stddef.h>

/* Reads all of path ("-" reads stdin) into a fresh NUL-terminated buffer; *ret is the
 * caller's to free(), *ret_len (may be NULL) excludes the NUL.  An empty file gives "".
 * Returns 0, -E2BIG when the file holds more than cap bytes, -ENOMEM, -EIO on a read
 * error, or fopen()'s -errno (-ENOENT, -EACCES, ...).  Out-params are written only on
 * success.  Never reads more than cap + 1 bytes into memory. */
int file_read_capped(const char *path, size_t cap, char **ret, size_t *ret_len);
