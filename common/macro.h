/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small macros every module uses: scope-bound cleanup, ownership hand-off, array sizes,
 * and the "why" out-parameter convention.  Header only, no state, no I/O.
 */
#pragma once

#include <errno.h>
#include <stdlib.h>

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define CLEANUP(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _pure_ __attribute__((pure))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Hands a pointer on: returns its value and leaves NULL behind, so a CLEANUP does nothing. */
#define TAKE_PTR(p)                                                                        \
        ({                                                                                 \
                __typeof__(p) _p_ = (p);                                                   \
                (p) = NULL;                                                                \
                _p_;                                                                       \
        })

/* A cleanup for plain malloc()ed locals: CLEANUP(freep) char *s = NULL; */
static inline void
freep(void *p)
{
        free(*(void **)p);
}

/* Defines name##p(type **) that calls func(*p) when *p is set. */
#define DEFINE_CLEANUP_FUNC(type, func)                                                    \
        static inline void func##p(type **p)                                               \
        {                                                                                  \
                if (*p)                                                                    \
                        func(*p);                                                          \
        }

/* Sets *ret_why when the caller asked for it; for "return set_why(w, "..."), -EINVAL". */
static inline void
set_why(const char **ret_why, const char *why)
{
        if (ret_why)
                *ret_why = why;
}
