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

/* msg is free text (quoted on output); fmt adds logfmt pairs, e.g. "pod=%s node=%s". */
void log_emit(enum log_level l, const char *msg, const char *fmt, ...) _printf_(3, 4);

#define log_error(msg, ...) log_emit(LOG_LEVEL_ERROR, msg, "" __VA_ARGS__)
#define log_warn(msg, ...) log_emit(LOG_LEVEL_WARN, msg, "" __VA_ARGS__)
#define log_info(msg, ...) log_emit(LOG_LEVEL_INFO, msg, "" __VA_ARGS__)
#define log_debug(msg, ...)                                                                \
        do {                                                                               \
                if (log_get_level() >= LOG_LEVEL_DEBUG)                                    \
                        log_emit(LOG_LEVEL_DEBUG, msg, "" __VA_ARGS__);                    \
        } while (0)
