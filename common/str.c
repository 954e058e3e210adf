/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Number parsing on byte ranges (the network and annotations hand us ranges, not C strings),
 * and bounded copies.  Bottom of the dependency order: depends on libc only.
 */
#include "str.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int
str_to_int64(const char *s, size_t len, int64_t min, int64_t max, int64_t *ret)
{
        bool neg = false;
        uint64_t v = 0, limit;
        size_t i = 0;

        if (!s || len == 0)
                return -EINVAL;
        if (s[0] == '+' || s[0] == '-') {
                neg = s[0] == '-';
                i++;
        }
        if (i == len)
                return -EINVAL;
        limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        for (; i < len; i++) {
                unsigned d;

                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                d = (unsigned)(s[i] - '0');
                if (v > (limit - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        int64_t r = neg ? (int64_t)(0 - v) : (int64_t)v;
        if (r < min || r > max)
                return -ERANGE;
        *ret = r;
        return 0;
}

/* mant * 10^exp10 * 1024^exp1024 as a whole number <= max; -EINVAL when it is not whole,
 * -ERANGE past max.  mant < 10^18 and exp1024 <= 6 keep every product below 2^121, and
 * a positive exp10 stops as soon as the value passes max. */
static int
quantity_scale(uint64_t mant, int exp10, unsigned exp1024, int64_t max, int64_t *ret)
{
        __uint128_t v = mant;

        for (unsigned k = 0; k < exp1024; k++)
                v *= 1024;
        for (; exp10 > 0 && v != 0; exp10--) {
                v *= 10;
                if (v > (__uint128_t)max)
                        return -ERANGE;
        }
        for (; exp10 < 0; exp10++) {
                if (v % 10)
                        return -EINVAL;
                v /= 10;
        }
        if (v > (__uint128_t)max)
                return -ERANGE;
        *ret = (int64_t)v;
        return 0;
}

int
str_to_quantity_count(const char *s, size_t len, int64_t max, int64_t *ret)
{
        static const struct {
                const char *name;
                int exp10;
                unsigned exp1024;
        } suffixes[] = {
                { "", 0, 0 },  { "m", -3, 0 }, { "k", 3, 0 },  { "M", 6, 0 },  { "G", 9, 0 },
                { "T", 12, 0 }, { "P", 15, 0 }, { "E", 18, 0 }, { "Ki", 0, 1 }, { "Mi", 0, 2 },
                { "Gi", 0, 3 }, { "Ti", 0, 4 }, { "Pi", 0, 5 }, { "Ei", 0, 6 },
        };
        uint64_t mant = 0;
        unsigned digits = 0, frac = 0;
        bool dot = false, neg = false;
        size_t i = 0;
        int64_t e;

        if (!s || len == 0 || max < 0)
                return -EINVAL;
        if (s[0] == '+' || s[0] == '-')
                neg = s[i++] == '-';
        for (; i < len && ((s[i] >= '0' && s[i] <= '9') || (s[i] == '.' && !dot)); i++) {
                if (s[i] == '.') {
                        dot = true;
                        continue;
                }
                /* Leading zeros carry nothing; past 18 significant digits only zeros
                 * keep the value exact, so anything else is refused as too long. */
                if (mant == 0 && s[i] == '0') {
                        frac += dot;
                        digits += 1;
                        continue;
                }
                if (mant > 99999999999999999ull)
                        return -ERANGE;
                mant = mant * 10 + (uint64_t)(s[i] - '0');
                frac += dot;
                digits += 1;
        }
        if (digits == 0)
                return -EINVAL;
        if (neg && mant != 0)
                return -EINVAL;
        if (i < len && (s[i] == 'e' || s[i] == 'E') && i + 1 < len &&
            (s[i + 1] == '+' || s[i + 1] == '-' || (s[i + 1] >= '0' && s[i + 1] <= '9'))) {
                if (str_to_int64(s + i + 1, len - i - 1, -64, 64, &e) < 0)
                        return -EINVAL;
                return quantity_scale(mant, (int)e - (int)frac, 0, max, ret);
        }
        for (size_t k = 0; k < sizeof(suffixes) / sizeof(suffixes[0]); k++)
                if (str_eq_n(s + i, len - i, suffixes[k].name))
                        return quantity_scale(mant, suffixes[k].exp10 - (int)frac,
                                              suffixes[k].exp1024, max, ret);
        return -EINVAL;
}

int
str_to_int(const char *s, size_t len, int min, int max, int *ret)
{
        int64_t v;
        int r = str_to_int64(s, len, min, max, &v);

        if (r < 0)
                return r;
        *ret = (int)v;
        return 0;
}

int
str_to_double(const char *s, size_t len, double *ret)
{
        char tmp[64], *end;
        double v;

        if (!s || len == 0 || len >= sizeof(tmp))
                return -EINVAL;
        for (size_t i = 0; i < len; i++)
                if (s[i] == '\0' || !strchr("0123456789+-.eE", s[i]))
                        return -EINVAL;
        memcpy(tmp, s, len);
        tmp[len] = '\0';
        errno = 0;
        v = strtod(tmp, &end);
        if (end != tmp + len)
                return -EINVAL;
        if (errno == ERANGE || !isfinite(v))
                return -ERANGE;
        *ret = v;
        return 0;
}

int
str_copy(char *dst, size_t size, const char *src, size_t len)
{
        size_t n;

        if (size == 0)
                return -E2BIG;
        n = len < size - 1 ? len : size - 1;
        memcpy(dst, src, n);
        dst[n] = '\0';
        return n < len ? -E2BIG : 0;
}

char *
str_ndup(const char *s, size_t len)
{
        char *d = malloc(len + 1);

        if (!d)
                return NULL;
        memcpy(d, s, len);
        d[len] = '\0';
        return d;
}

uint64_t
str_hash_fnv1a(uint64_t h, const char *s)
{
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ull;
        return h;
}

size_t
str_format_uint(char *dst, unsigned v)
{
        char tmp[STR_UINT_DIGITS];
        size_t n = 0;

        do
                tmp[n++] = (char)('0' + v % 10);
        while ((v /= 10) > 0);
        for (size_t i = 0; i < n; i++)
                dst[i] = tmp[n - 1 - i];
        return n;
}

int
str_table_index(const char *const *table, size_t n, const char *s)
{
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (table[i] && strcmp(table[i], s) == 0)
                        return (int)i;
        return -EINVAL;
}

int
str_rows_index(const void *rows, size_t n, size_t stride, const char *s)
{
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                const char *name = *(const char *const *)((const char *)rows + i * stride);

                if (name && strcmp(name, s) == 0)
                        return (int)i;
        }
        return -EINVAL;
}

bool
str_has_prefix(const char *s, const char *prefix)
{
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool
str_eq_n(const char *s, size_t len, const char *lit)
{
        return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

static bool
is_blank(char c)
{
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

void
str_trim(const char **s, size_t *len)
{
        while (*len > 0 && is_blank((*s)[0])) {
                (*s)++;
                (*len)--;
        }
        while (*len > 0 && is_blank((*s)[*len - 1]))
                (*len)--;
}

static bool
is_dns_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One or more labels joined by '.', each [a-z0-9]([-a-z0-9]*[a-z0-9])?; max_dots 0 for a
 * single label. */
static bool
is_dns_name(const char *s, size_t max_len, bool dots)
{
        size_t n;

        if (!s)
                return false;
        n = strnlen(s, max_len + 1);
        if (n == 0 || n > max_len)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool edge = i == 0 || i == n - 1 || s[i - 1] == '.' || s[i + 1] == '.';

                if (is_dns_alnum(c))
                        continue;
                if (c == '-' && !edge)
                        continue;
                if (c == '.' && dots && i > 0 && i < n - 1 && s[i - 1] != '.')
                        continue;
                return false;
        }
        return true;
}

bool
str_is_dns_label(const char *s)
{
        return is_dns_name(s, STR_DNS_LABEL_MAX, false);
}

bool
str_is_dns_subdomain(const char *s)
{
        return is_dns_name(s, STR_DNS_SUBDOMAIN_MAX, true);
}

size_t
str_utf8_len(const unsigned char *s, size_t len)
{
        uint32_t cp;
        size_t n;

        if (len == 0)
                return 0;
        if (s[0] < 0x80)
                return 1;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                n = 2, cp = s[0] & 0x1f;
        else if (s[0] >= 0xe0 && s[0] <= 0xef)
                n = 3, cp = s[0] & 0x0f;
        else if (s[0] >= 0xf0 && s[0] <= 0xf4)
                n = 4, cp = s[0] & 0x07;
        else
                return 0;
        if (len < n)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}
