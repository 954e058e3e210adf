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

const char *
log_level_to_string(enum log_level l)
{
        return l >= 0 && l < _LOG_LEVEL_MAX ? level_names[l] : NULL;
}

enum log_level
log_level_from_string(const char *s)
{
        return (enum log_level)str_table_index(level_names, _LOG_LEVEL_MAX, s);
}

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

void
log_emit(enum log_level l, const char *msg, const char *fmt, ...)
{
        char line[2048];
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
        n = k > 0 ? (size_t)k : 0;
        for (const char *p = msg; p && *p && n < sizeof(line) - 4; p++) {
                if (*p == '"' || *p == '\\')
                        line[n++] = '\\';
                line[n++] = (*p == '\n') ? ' ' : *p;
        }
        line[n++] = '"';
        if (fmt && *fmt && n < sizeof(line) - 2) {
                line[n++] = ' ';
                va_start(ap, fmt);
                k = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
                va_end(ap);
                if (k > 0)
                        n += MIN((size_t)k, sizeof(line) - n - 2);
        }
        line[n++] = '\n';
        (void)!write(STDERR_FILENO, line, n);
}
