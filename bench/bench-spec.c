/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster spec: one node type per line, "<name> <count> <topology-path> [gpu-model]",
 * '#' starts a comment, blank lines are ignored.  The path is one word; the model, when
 * given, is the rest of the line (it may hold spaces).  The path is not opened here: bench-main.c resolves it against the spec's directory and loads
 * it with the topology parsers.  Pure decode: bytes in, a fixed-size struct out.
 */
#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../common/str.h"

static int
spec_fail(struct bench_error *err, unsigned line, int r, const char *msg)
{
        if (err) {
                err->line = line;
                snprintf(err->msg, sizeof(err->msg), "%s", msg);
        }
        return r;
}

static bool
is_space(char c)
{
        return c == ' ' || c == '\t';
}

static bool
name_ok(const char *s, size_t len)
{
        if (len == 0 || len >= BENCH_MAX_NAME)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", s[i]))
                        return false;
        return true;
}

int
bench_spec_parse(const char *text, size_t len, struct bench_spec *ret, struct bench_error *err)
{
        struct bench_spec s = { 0 };
        const char *p = text, *end = text + len;
        unsigned line = 0, total = 0;

        if (len > BENCH_MAX_SPEC_BYTES)
                return spec_fail(err, 0, -E2BIG, "cluster spec is larger than its 64 KiB cap");
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p)), *q, *tok;
                size_t n, tlen;
                int64_t count;
                struct bench_spec_line *l;

                if (!nl)
                        nl = end;
                q = p;
                n = (size_t)(nl - p);
                p = nl < end ? nl + 1 : end;
                line++;
                if (memchr(q, '#', n))
                        n = (size_t)((const char *)memchr(q, '#', n) - q);
                str_trim(&q, &n);
                if (n == 0)
                        continue;
                if (memchr(q, '\0', n))
                        return spec_fail(err, line, -EINVAL, "a NUL byte in the line");
                if (s.n == BENCH_MAX_NODE_TYPES)
                        return spec_fail(err, line, -E2BIG, "more node types than BENCH_MAX_NODE_TYPES");
                l = &s.lines[s.n];

                /* name */
                for (tok = q; q < tok + n && !is_space(*q); q++)
                        ;
                tlen = (size_t)(q - tok);
                n -= tlen;
                if (!name_ok(tok, tlen))
                        return spec_fail(err, line, -EINVAL,
                                         "node type name must be 1-63 of [A-Za-z0-9._-]");
                memcpy(l->name, tok, tlen);
                l->name[tlen] = '\0';
                for (size_t k = 0; k < s.n; k++)
                        if (strcmp(s.lines[k].name, l->name) == 0)
                                return spec_fail(err, line, -EINVAL, "node type name used twice");

                /* count */
                str_trim(&q, &n);
                for (tok = q; q < tok + n && !is_space(*q); q++)
                        ;
                tlen = (size_t)(q - tok);
                n -= tlen;
                if (str_to_int64(tok, tlen, 1, BENCH_MAX_NODES, &count) < 0)
                        return spec_fail(err, line, -EINVAL,
                                         "expected '<name> <count> <topology-path>': count must be "
                                         "an integer in 1..BENCH_MAX_NODES");
                total += (unsigned)count;
                if (total > BENCH_MAX_NODES)
                        return spec_fail(err, line, -E2BIG, "more nodes than BENCH_MAX_NODES in all");
                l->count = (unsigned)count;

                /* path */
                str_trim(&q, &n);
                for (tok = q; q < tok + n && !is_space(*q); q++)
                        ;
                tlen = (size_t)(q - tok);
                n -= tlen;
                if (tlen == 0)
                        return spec_fail(err, line, -EINVAL,
                                         "expected '<name> <count> <topology-path>': path missing");
                if (tlen >= BENCH_MAX_PATH)
                        return spec_fail(err, line, -E2BIG, "topology path is too long");
                memcpy(l->path, tok, tlen);
                l->path[tlen] = '\0';

                /* optional GPU model: the rest of the line */
                str_trim(&q, &n);
                if (n >= TOPO_ID_MAX)
                        return spec_fail(err, line, -E2BIG, "GPU model name is too long");
                memcpy(l->model, q, n);
                l->model[n] = '\0';
                s.n++;
        }
        if (s.n == 0)
                return spec_fail(err, line, -EINVAL, "cluster spec names no node types");
        *ret = s;
        return 0;
}
