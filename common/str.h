/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Safe number parsing and bounded string helpers.  Pure: no allocation unless the name
 * says so (str_ndup), no locale, no errno leaking to the caller.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parses a whole decimal integer in [min, max] from s[0..len).  Leading '+' and '-' are
 * accepted, whitespace is not.  Returns 0, -EINVAL (not a number, trailing bytes) or
 * -ERANGE (outside [min, max]); *ret is written only on success. */
int str_to_int64(const char *s, size_t len, int64_t min, int64_t max, int64_t *ret);
int str_to_int(const char *s, size_t len, int min, int max, int *ret);

/* Parses a Kubernetes resource quantity (apimachinery's grammar: an optional sign, digits
 * with an optional fraction, then one suffix: binary Ki Mi Gi Ti Pi Ei, decimal m "" k M G T
 * P E, or an exponent e<n> / E<n>) that must be a whole count in [0, max], as an extended
 * resource such as nvidia.com/gpu is: "2", "+2", "2000m", "0.5k", "1e1" and "1Ki" are
 * counts; "1.5", "500m", "-1", "1Ki5", " 2" are not.  The one rule for GPU quantities,
 * used by the extender's codec and the API client alike.  Returns 0, -EINVAL (not a
 * quantity, or not a whole count) or -ERANGE (above max); *ret written only on success. */
int str_to_quantity_count(const char *s, size_t len, int64_t max, int64_t *ret);

/* Parses a whole decimal floating-point number (no hex, no inf/nan).  Same returns. */
int str_to_double(const char *s, size_t len, double *ret);

/* Copies at most size-1 bytes of src[0..len) and NUL-terminates; returns -E2BIG when it
 * had to cut (dst then holds the cut string), 0 otherwise. */
int str_copy(char *dst, size_t size, const char *src, size_t len);

/* strndup that caps at max bytes: NULL on OOM. */
char *str_ndup(const char *s, size_t len);

/* Writes the decimal digits of v to dst (at most STR_UINT_DIGITS bytes, no NUL) without
 * printf, for encoders that run per node or per matrix cell; returns how many. */
#define STR_UINT_DIGITS 10
size_t str_format_uint(char *dst, unsigned v);

/* FNV-1a over the bytes of s, continuing from h (the basis, or an earlier call's result):
 * for hash tables and short digests of names.  Callers keep the basis they always used,
 * since some of these digests are stored in annotations. */
uint64_t str_hash_fnv1a(uint64_t h, const char *s);

/* The index of s in table[0..n) (NULL entries never match), or -EINVAL when s is NULL or
 * absent: the body of every enum's x_from_string(), whose _X_INVALID is -EINVAL. */
int str_table_index(const char *const *table, size_t n, const char *s);
/* The same for a table of n rows of stride bytes whose first member is the name. */
int str_rows_index(const void *rows, size_t n, size_t stride, const char *s);

/* The one to/from-string mechanism for enums (STYLE.md: x_to_string() backed by a
 * designated-initializer table whose size is _X_MAX): defines
 *   const char *prefix_to_string(type v)      the name, NULL when out of range;
 *   type prefix_from_string(const char *s)    the value, or -EINVAL (_X_INVALID).
 * DEFINE_STRING_TABLE for a table of names; DEFINE_ROW_TABLE for a table of rows whose
 * first member is `const char *name` (an enum with more to say per value); _TO_STRING
 * variants define only the first function. */
#define DEFINE_STRING_TABLE_TO_STRING(prefix, type, table)                                  \
        const char *prefix##_to_string(type v)                                               \
        {                                                                                    \
                return (size_t)v < ELEMENTSOF(table) ? (table)[v] : NULL;                    \
        }
#define DEFINE_STRING_TABLE(prefix, type, table)                                             \
        DEFINE_STRING_TABLE_TO_STRING(prefix, type, table)                                   \
        type prefix##_from_string(const char *s)                                             \
        {                                                                                    \
                return (type)str_table_index(table, ELEMENTSOF(table), s);                   \
        }
#define DEFINE_ROW_TABLE(prefix, type, rows)                                                 \
        const char *prefix##_to_string(type v)                                               \
        {                                                                                    \
                return (size_t)v < ELEMENTSOF(rows) ? (rows)[v].name : NULL;                 \
        }                                                                                    \
        type prefix##_from_string(const char *s)                                             \
        {                                                                                    \
                return (type)str_rows_index(rows, ELEMENTSOF(rows), sizeof((rows)[0]), s);   \
        }

bool str_has_prefix(const char *s, const char *prefix);
bool str_eq_n(const char *s, size_t len, const char *lit);

/* Kubernetes name syntax, as its API server checks it: a DNS-1123 label (1..63 bytes of
 * [a-z0-9-], alphanumeric at both ends: namespaces) and a DNS-1123 subdomain (1..253 bytes,
 * such labels joined by '.': pod and node names).  NULL is neither. */
#define STR_DNS_LABEL_MAX 63
#define STR_DNS_SUBDOMAIN_MAX 253
bool str_is_dns_label(const char *s);
bool str_is_dns_subdomain(const char *s);

/* The length of the well-formed UTF-8 sequence at s[0..len) (1..4; shortest form, no
 * surrogates, at most U+10FFFF), or 0 when the bytes there are not one. */
size_t str_utf8_len(const unsigned char *s, size_t len);

/* Trims ASCII blanks (space, tab, CR, LF) on both ends of [*s, *s + *len). */
void str_trim(const char **s, size_t *len);
