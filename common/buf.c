/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Capped growable buffer.  Growth doubles; the cap is checked before any allocation so
 * that hostile sizes fail fast with -E2BIG.
 */
#include "buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "str.h"

void
buf_init(struct buf *b, size_t cap)
{
        *b = (struct buf){ .cap = cap };
}

void
buf_release(struct buf *b)
{
        free(b->data);
        b->data = NULL;
        b->len = b->alloc = 0;
}

void
buf_reset(struct buf *b)
{
        b->len = 0;
        if (b->data)
                b->data[0] = '\0';
}

int
buf_reserve(struct buf *b, size_t n)
{
        size_t want, a;
        char *p;

        if (n > b->cap || b->len > b->cap - n)
                return -E2BIG;
        want = b->len + n + 1;
        if (want <= b->alloc)
                return 0;
        a = b->alloc ? b->alloc : 256;
        while (a < want)
                a = a > SIZE_MAX / 2 ? want : a * 2;
        p = realloc(b->data, a);
        if (!p)
                return -ENOMEM;
        b->data = p;
        b->alloc = a;
        return 0;
}

int
buf_append(struct buf *b, const void *p, size_t n)
{
        int r = buf_reserve(b, n);

        if (r < 0)
                return r;
        if (n)
                memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
        return 0;
}

int
buf_puts(struct buf *b, const char *s)
{
        return buf_append(b, s, strlen(s));
}

int
buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
        va_list aq;
        int n, r;

        va_copy(aq, ap);
        n = vsnprintf(NULL, 0, fmt, aq);
        va_end(aq);
        if (n < 0)
                return -EINVAL;
        r = buf_reserve(b, (size_t)n);
        if (r < 0)
                return r;
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        b->len += (size_t)n;
        return 0;
}

int
buf_printf(struct buf *b, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = buf_vprintf(b, fmt, ap);
        va_end(ap);
        return r;
}

int
buf_put_json_string(struct buf *b, const char *s)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t left = strlen(s);
        int r = buf_append(b, "\"", 1);

        /* Bytes that are not UTF-8 become U+FFFD (as Go's encoding/json does), so whatever a
         * client sent, what we write is JSON. */
        while (r >= 0 && left > 0) {
                char esc[8];
                size_t n = 1;

                switch (*p) {
                case '"':
                        r = buf_append(b, "\\\"", 2);
                        break;
                case '\\':
                        r = buf_append(b, "\\\\", 2);
                        break;
                case '\n':
                        r = buf_append(b, "\\n", 2);
                        break;
                case '\r':
                        r = buf_append(b, "\\r", 2);
                        break;
                case '\t':
                        r = buf_append(b, "\\t", 2);
                        break;
                default:
                        if (*p < 0x20) {
                                snprintf(esc, sizeof(esc), "\\u%04x", *p);
                                r = buf_append(b, esc, 6);
                        } else if (*p < 0x80)
                                r = buf_append(b, p, 1);
                        else if ((n = str_utf8_len(p, left)) > 0)
                                r = buf_append(b, p, n);
                        else {
                                n = 1;
                                r = buf_append(b, "\\ufffd", 6);
                        }
                }
                p += n;
                left -= n;
        }
        return r < 0 ? r : buf_append(b, "\"", 1);
}

char *
buf_steal(struct buf *b, size_t *ret_len)
{
        char *d;

        /* Nothing appended yet: allocate the terminator so callers always get a string. */
        if (!b->data && buf_append(b, "", 0) < 0)
                return NULL;
        d = b->data;
        if (ret_len)
                *ret_len = b->len;
        b->data = NULL;
        b->len = b->alloc = 0;
        return d;
}
