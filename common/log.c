/* SPDX-License-Identifier: Apache-2.0 */
/*
 * logfmt lines on stderr.  Each line is formatted into a local buffer and written with one
 * write() so lines from concurrent threads never interleave.  The level is a process-wide
 * setting (an atomic), the only global state in common/.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "str.h"

static atomic_int log_level = LOG_LEVEL_INFO;

static const char *const level_names[_LOG_LEVEL_MAX] = {
        [LOG_LEVEL_ERROR] = "error",
        [LOG_LEVEL_WARN] = "warn",
        [LOG_LEVEL_INFO] = "info",
        [LOG_LEVEL_DEBUG] = "debug",
};

DEFINE_STRING_TABLE(log_level, enum log_level, level_names)

void
log_set_level(enum log_level l)
{
        if (l >= 0 && l < _LOG_LEVEL_MAX)
                atomic_store(&log_level, l);
}

enum log_level
log_get_level(void)
{
        return (enum log_level)atomic_load(&log_level);
}

/*
 * Spells one byte for a log line into e[4] and returns its length.  Line breaks, tabs and
 * other control bytes always become escapes, so one call is one line; quotes and
 * backslashes only inside a quoted value; bytes >= 0x80 only where the caller asks (log
 * values are ASCII, the message and its pairs may carry UTF-8).
 */
static size_t
escape_byte(unsigned char c, bool quotes, bool high, char e[static 4])
{
        static const char hex[] = "0123456789abcdef";
        static const char named[256] = { ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't' };

        e[0] = '\\';
        if (quotes && (c == '"' || c == '\\'))
                return e[1] = (char)c, 2;
        if (named[c])
                return e[1] = named[c], 2;
        if (c < ' ' || c == 0x7f || (high && c > 0x7f)) {
                e[1] = 'x', e[2] = hex[c >> 4], e[3] = hex[c & 15];
                return 4;
        }
        e[0] = (char)c;
        return 1;
}

const char *
log_value(char *dst, size_t size, const char *s)
{
        size_t n = 0, limit = size - 5; /* room for '"', "...", NUL */
        bool bare = s && *s;

        for (const char *p = s; bare && *p; p++)
                bare = *p > ' ' && *p < 0x7f && *p != '"' && *p != '\\' && *p != '=';
        if (bare && strlen(s) < size) {
                memcpy(dst, s, strlen(s) + 1);
                return dst;
        }
        dst[n++] = '"';
        for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
                char e[4];
                size_t k = escape_byte(*p, true, true, e);

                if (n + k > limit) {
                        memcpy(dst + n, "...", 3);
                        n += 3;
                        break;
                }
                memcpy(dst + n, e, k);
                n += k;
        }
        dst[n++] = '"';
        dst[n] = 0;
        return dst;
}

/* Appends src to line[*n..size-2) with control bytes spelled out; the last byte of line is
 * kept for the newline. */
static void
put_escaped(char *line, size_t size, size_t *n, const char *src, bool in_quotes)
{
        for (const unsigned char *p = (const unsigned char *)src; *p; p++) {
                char e[4];
                size_t k = escape_byte(*p, in_quotes, false, e);

                if (*n + k > size - 2)
                        return;
                memcpy(line + *n, e, k);
                *n += k;
        }
}

void
log_emit(enum log_level l, const char *msg, const char *fmt, ...)
{
        char line[2048], pairs[2048];
        struct timespec ts;
        struct tm tm;
        size_t n = 0;
        va_list ap;
        int k;

        if (l > log_get_level())
                return;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        k = snprintf(line, sizeof(line), "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s msg=\"",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, log_level_to_string(l));
        n = k > 0 ? MIN((size_t)k, sizeof(line) / 2) : 0;
        put_escaped(line, sizeof(line) - 1, &n, msg ? msg : "", true);
        line[n++] = '"';
        if (fmt && *fmt) {
                va_start(ap, fmt);
                k = vsnprintf(pairs, sizeof(pairs), fmt, ap);
                va_end(ap);
                if (k > 0) {
                        line[n++] = ' ';
                        put_escaped(line, sizeof(line), &n, pairs, false);
                }
        }
        line[n++] = '\n';
        (void)!write(STDERR_FILENO, line, n);
}
