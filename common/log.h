/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Structured logging for the programs (extender, plugin, CLI): one line per event,
 * logfmt style (ts=... level=... msg="..." key=value).  Library modules (topology, scoring,
 * kube-client) do not log; they return errors and the program logs once where it decides.
 */
#pragma once

#include "macro.h"

enum log_level {
        LOG_LEVEL_ERROR,
        LOG_LEVEL_WARN,
        LOG_LEVEL_INFO,
        LOG_LEVEL_DEBUG,
        _LOG_LEVEL_MAX,
        _LOG_LEVEL_INVALID = -EINVAL,
};

const char *log_level_to_string(enum log_level l);
enum log_level log_level_from_string(const char *s);

void log_set_level(enum log_level l);
enum log_level log_get_level(void);

/* msg is free text (quoted on output); fmt adds logfmt pairs, e.g. "pod=%s node=%s".  A
 * control byte that reaches the line through either (a value not passed through
 * log_value()) is written as \n, \r, \t or \xNN, so one call is always one line. */
void log_emit(enum log_level l, const char *msg, const char *fmt, ...) _printf_(3, 4);

/* s as a logfmt value, for strings from the network or a cluster object: bare when it is a
 * non-empty run of printable ASCII other than space, '"', '\\' and '=', else in quotes with
 * '"' and '\\' escaped and control and non-ASCII bytes as \n, \r, \t, \xNN.  Cut (with
 * "...") to fit size (at least 8).  Returns dst.  LOG_V(s) writes into a buffer that lives
 * until the end of the enclosing block: log_info("x", "node=%s", LOG_V(name)). */
#define LOG_VALUE_MAX 600
const char *log_value(char *dst, size_t size, const char *s);
#define LOG_V(s) log_value((char[LOG_VALUE_MAX]){ 0 }, LOG_VALUE_MAX, (s))

#define log_error(msg, ...) log_emit(LOG_LEVEL_ERROR, msg, "" __VA_ARGS__)
#define log_warn(msg, ...) log_emit(LOG_LEVEL_WARN, msg, "" __VA_ARGS__)
#define log_info(msg, ...) log_emit(LOG_LEVEL_INFO, msg, "" __VA_ARGS__)
#define log_debug(msg, ...)                                                                \
        do {                                                                               \
                if (log_get_level() >= LOG_LEVEL_DEBUG)                                    \
                        log_emit(LOG_LEVEL_DEBUG, msg, "" __VA_ARGS__);                    \
        } while (0)
