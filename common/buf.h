/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A growable byte buffer with a hard cap.  Every writer into it (HTTP bodies, JSON encoders,
 * watch streams) sets the cap from a named constant, so no input can make it grow without
 * bound.  Caller-owned struct: buf_init()/buf_release().
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

struct buf {
        char *data;  /* always NUL-terminated when non-NULL */
        size_t len;
        size_t alloc;
        size_t cap;  /* the most bytes len may reach */
};

void buf_init(struct buf *b, size_t cap);
void buf_release(struct buf *b);
void buf_reset(struct buf *b); /* len = 0, memory kept */

/* Room for n more bytes without another allocation (an encoder that knows its size asks
 * once instead of growing by doubling); -E2BIG past the cap, -ENOMEM. */
int buf_reserve(struct buf *b, size_t n);

/* Appends; -E2BIG when the cap would be passed (nothing appended), -ENOMEM. */
int buf_append(struct buf *b, const void *p, size_t n);
int buf_puts(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...) _printf_(2, 3);
int buf_vprintf(struct buf *b, const char *fmt, va_list ap);

/* Appends s as a JSON string literal, quotes included, escaping what JSON requires. */
int buf_put_json_string(struct buf *b, const char *s);

/* Hands the bytes to the caller (free() them) and leaves b empty. */
char *buf_steal(struct buf *b, size_t *ret_len);
