/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Job traces: our CSV format and converters for public traces a user may have downloaded
 * (Alibaba PAI 2020 task table, Alibaba 2023 openb pod list, Microsoft Philly job log).
 * Decode layer of bench/: bytes in, a struct bench_trace out, nothing else.  Every row is
 * checked; a malformed one stops the parse with its 1-based line number and a sentence,
 * and the trace is left as it was.  Rows that are well formed but not GPU jobs (CPU tasks,
 * jobs still running when the trace was cut) are skipped and counted in n_skipped.
 * The caller owns the trace; this file allocates only inside it.
 */
#include "bench.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/str.h"

#define CSV_MAX_FIELDS 32
#define CSV_HEADER "arrival_s,duration_s,gpus,comm_fraction"

static int
fail(struct bench_error *err, unsigned line, int r, const char *fmt, ...) _printf_(4, 5);

static int
fail(struct bench_error *err, unsigned line, int r, const char *fmt, ...)
{
        va_list ap;

        if (!err)
                return r;
        err->line = line;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        return r;
}

void
bench_trace_init(struct bench_trace *t)
{
        *t = (struct bench_trace){ 0 };
}

void
bench_trace_release(struct bench_trace *t)
{
        free(t->jobs);
        *t = (struct bench_trace){ 0 };
}

static size_t
trace_cap(const struct bench_trace *t)
{
        return t->max_jobs && t->max_jobs < BENCH_MAX_JOBS ? t->max_jobs : BENCH_MAX_JOBS;
}

int
bench_trace_add(struct bench_trace *t, const struct bench_job *j)
{
        if (t->n >= trace_cap(t))
                return -E2BIG;
        if (t->n == t->alloc) {
                size_t na = t->alloc ? t->alloc * 2 : 256;
                struct bench_job *p = realloc(t->jobs, na * sizeof(*p));

                if (!p)
                        return -ENOMEM;
                t->jobs = p;
                t->alloc = na;
        }
        t->jobs[t->n++] = *j;
        return 0;
}

/* Stable merge sort by arrival: qsort() is not stable and equal arrivals must keep their
 * trace order for determinism across libcs. */
static void
sort_jobs(struct bench_job *a, struct bench_job *tmp, size_t n)
{
        size_t mid = n / 2, i = 0, j = mid, k = 0;

        if (n < 2)
                return;
        sort_jobs(a, tmp, mid);
        sort_jobs(a + mid, tmp, n - mid);
        while (i < mid && j < n)
                tmp[k++] = a[j].arrival < a[i].arrival ? a[j++] : a[i++];
        while (i < mid)
                tmp[k++] = a[i++];
        while (j < n)
                tmp[k++] = a[j++];
        memcpy(a, tmp, n * sizeof(*a));
}

void
bench_trace_normalize(struct bench_trace *t)
{
        struct bench_job *tmp;
        double t0;

        if (t->n == 0)
                return;
        tmp = malloc(t->n * sizeof(*tmp));
        if (tmp) {
                sort_jobs(t->jobs, tmp, t->n);
                free(tmp);
        } else {
                /* Out of memory for the scratch copy: an insertion sort needs none. */
                for (size_t i = 1; i < t->n; i++)
                        for (size_t j = i; j > 0 && t->jobs[j].arrival < t->jobs[j - 1].arrival; j--) {
                                struct bench_job x = t->jobs[j];
                                t->jobs[j] = t->jobs[j - 1];
                                t->jobs[j - 1] = x;
                        }
        }
        t0 = t->jobs[0].arrival;
        for (size_t i = 0; i < t->n; i++)
                t->jobs[i].arrival -= t0;
}

static const char *const format_names[_BENCH_TRACE_MAX] = {
        [BENCH_TRACE_CSV] = "csv",
        [BENCH_TRACE_PAI2020] = "pai2020",
        [BENCH_TRACE_OPENB2023] = "openb2023",
        [BENCH_TRACE_PHILLY] = "philly",
};

DEFINE_STRING_TABLE(bench_trace_format, enum bench_trace_format, format_names)

void
bench_convert_opts_default(struct bench_convert_opts *o)
{
        *o = (struct bench_convert_opts){ .comm = 0.3, .max_gpus = 16 };
}

/* --- line and field splitting ------------------------------------------------------- */

struct field {
        const char *p;
        size_t len;
};

struct lines {
        const char *p, *end;
        unsigned no; /* 1-based number of the line last returned */
};

/* Next line without its terminator (LF or CRLF); false at the end. */
static bool
next_line(struct lines *l, const char **ret, size_t *ret_len)
{
        const char *nl;

        if (l->p >= l->end)
                return false;
        nl = memchr(l->p, '\n', (size_t)(l->end - l->p));
        if (!nl)
                nl = l->end;
        *ret = l->p;
        *ret_len = (size_t)(nl - l->p);
        if (*ret_len > 0 && (*ret)[*ret_len - 1] == '\r')
                (*ret_len)--;
        l->p = nl < l->end ? nl + 1 : l->end;
        l->no++;
        return true;
}

/* Splits one CSV row (RFC 4180 quoting, no embedded newlines) into trimmed fields.
 * Returns the field count, or -E2BIG past CSV_MAX_FIELDS, -EINVAL on a stray quote. */
static int
split_csv(const char *s, size_t len, struct field *f)
{
        size_t i = 0;
        int n = 0;

        for (;;) {
                const char *start;
                size_t flen;

                if (n == CSV_MAX_FIELDS)
                        return -E2BIG;
                if (i < len && s[i] == '"') {
                        /* Quoted: runs to the closing quote; "" inside stands for one quote,
                         * which our numeric fields never need, so it is kept verbatim. */
                        start = s + ++i;
                        while (i < len && !(s[i] == '"' && (i + 1 >= len || s[i + 1] != '"')))
                                i += s[i] == '"' ? 2 : 1;
                        if (i >= len)
                                return -EINVAL;
                        flen = (size_t)(s + i - start);
                        i++;
                        if (i < len && s[i] != ',')
                                return -EINVAL;
                } else {
                        start = s + i;
                        while (i < len && s[i] != ',') {
                                if (s[i] == '"')
                                        return -EINVAL;
                                i++;
                        }
                        flen = (size_t)(s + i - start);
                }
                str_trim(&start, &flen);
                f[n++] = (struct field){ start, flen };
                if (i >= len)
                        return n;
                i++; /* the comma */
        }
}

static bool
is_blank_line(const char *s, size_t len)
{
        str_trim(&s, &len);
        return len == 0;
}

/* Reads a field as a double; names the column in the error. */
static int
field_double(const struct field *f, unsigned line, const char *col, double *ret,
             struct bench_error *err)
{
        int r = str_to_double(f->p, f->len, ret);

        if (r < 0)
                return fail(err, line, -EINVAL, "column %s: '%.*s' is not a number", col,
                            (int)MIN(f->len, 40), f->p);
        return 0;
}

static int
check_job(const struct bench_job *j, unsigned line, struct bench_error *err)
{
        if (!(j->arrival >= 0))
                return fail(err, line, -EINVAL, "arrival %g is negative", j->arrival);
        if (!(j->duration > 0) || j->duration > BENCH_MAX_DURATION_S)
                return fail(err, line, -EINVAL, "duration %g is not in (0, %g] seconds",
                            j->duration, BENCH_MAX_DURATION_S);
        if (j->gpus < 1 || j->gpus > TOPO_MAX_GPUS)
                return fail(err, line, -EINVAL, "GPU count %u is not in 1..%u", j->gpus,
                            TOPO_MAX_GPUS);
        if (!(j->comm >= 0 && j->comm <= 1))
                return fail(err, line, -EINVAL, "communication fraction %g is not in 0..1",
                            j->comm);
        return 0;
}

typedef int (*row_fn)(void *ctx, const struct field *f, int n, unsigned line,
                      struct bench_trace *t, struct bench_error *err);

/* Runs fn over every non-blank, non-comment row after an optional header. */
static int
for_each_row(const char *text, size_t len, const char *header_first, bool header_required,
             void *ctx, row_fn fn, struct bench_trace *t, struct bench_error *err)
{
        struct lines l = { text, text + len, 0 };
        struct field f[CSV_MAX_FIELDS];
        const char *s;
        size_t n;
        bool first = true;
        int r;

        while (next_line(&l, &s, &n)) {
                if (n > BENCH_MAX_LINE)
                        return fail(err, l.no, -E2BIG, "line is longer than %u bytes",
                                    BENCH_MAX_LINE);
                if (is_blank_line(s, n) || s[0] == '#')
                        continue;
                r = split_csv(s, n, f);
                if (r == -E2BIG)
                        return fail(err, l.no, -EINVAL, "more than %d fields", CSV_MAX_FIELDS);
                if (r < 0)
                        return fail(err, l.no, -EINVAL, "unbalanced double quote");
                if (first && header_first && str_eq_n(f[0].p, f[0].len, header_first)) {
                        first = false;
                        r = fn(ctx, f, r, 0, t, err); /* line 0: the header */
                        if (r < 0)
                                return r == -EINVAL && err ? (err->line = l.no, r) : r;
                        continue;
                }
                if (first && header_required)
                        return fail(err, l.no, -EINVAL, "expected a header row starting with '%s'",
                                    header_first);
                first = false;
                r = fn(ctx, f, r, l.no, t, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* --- our CSV: arrival_s,duration_s,gpus,comm_fraction --------------------------------- */

static int
csv_row(void *ctx, const struct field *f, int n, unsigned line, struct bench_trace *t,
        struct bench_error *err)
{
        struct bench_job j = { 0 };
        int64_t g;
        int r;

        if (line == 0) /* header */
                return n == 4 ? 0 : fail(err, 0, -EINVAL, "header must be '%s'", CSV_HEADER);
        if (n != 4)
                return fail(err, line, -EINVAL, "expected 4 fields (%s), found %d", CSV_HEADER, n);
        if ((r = field_double(&f[0], line, "arrival_s", &j.arrival, err)) < 0 ||
            (r = field_double(&f[1], line, "duration_s", &j.duration, err)) < 0 ||
            (r = field_double(&f[3], line, "comm_fraction", &j.comm, err)) < 0)
                return r;
        if (str_to_int64(f[2].p, f[2].len, 1, TOPO_MAX_GPUS, &g) < 0)
                return fail(err, line, -EINVAL, "column gpus: '%.*s' is not an integer in 1..%u",
                            (int)MIN(f[2].len, 40), f[2].p, TOPO_MAX_GPUS);
        j.gpus = (unsigned)g;
        if ((r = check_job(&j, line, err)) < 0)
                return r;
        r = bench_trace_add(t, &j);
        return r < 0 ? fail(err, line, r, "trace holds more than %zu jobs", trace_cap(t)) : 0;
}

/* --- Alibaba PAI 2020 pai_task_table.csv ---------------------------------------------
 * job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type
 * (the published file has no header; one is accepted).  plan_gpu is in percent of one
 * GPU: each of the inst_num instances becomes a job of ceil(plan_gpu / 100) GPUs that
 * arrives at start_time and runs end_time - start_time.  Skipped: plan_gpu empty or 0
 * (CPU tasks), start or end missing (not finished in the trace window), end <= start. */

struct convert_ctx {
        const struct bench_convert_opts *o;
        int col_gpu, col_create, col_delete; /* openb: columns found in the header */
};

static bool
field_empty(const struct field *f)
{
        return f->len == 0 || str_eq_n(f->p, f->len, "NULL") || str_eq_n(f->p, f->len, "None") ||
               str_eq_n(f->p, f->len, "nan");
}

static int
add_converted(const struct convert_ctx *c, struct bench_trace *t, double arrival, double end,
              unsigned gpus, unsigned copies, unsigned line, struct bench_error *err)
{
        struct bench_job j = {
                .arrival = arrival,
                .duration = end - arrival,
                .gpus = gpus,
                .comm = gpus > 1 ? c->o->comm : 0,
        };
        int r;

        if (!(end > arrival) || gpus > c->o->max_gpus) {
                t->n_skipped += copies;
                return 0;
        }
        if (j.duration > BENCH_MAX_DURATION_S)
                j.duration = BENCH_MAX_DURATION_S; /* a clock glitch must not stall the run */
        if (arrival < 0)
                return fail(err, line, -EINVAL, "time %g is negative", arrival);
        /* Refused before the copies are made: one row may ask for millions. */
        if (copies > trace_cap(t) - t->n)
                return fail(err, line, -E2BIG, "trace holds more than %zu jobs", trace_cap(t));
        for (unsigned k = 0; k < copies; k++) {
                r = bench_trace_add(t, &j);
                if (r < 0)
                        return fail(err, line, r, "trace holds more than %zu jobs", trace_cap(t));
        }
        return 0;
}

static int
pai_row(void *ctx, const struct field *f, int n, unsigned line, struct bench_trace *t,
        struct bench_error *err)
{
        const struct convert_ctx *c = ctx;
        double start, end, plan;
        int64_t inst;
        int r;

        if (line == 0)
                return 0;
        if (n != 10)
                return fail(err, line, -EINVAL,
                            "expected 10 fields (job_name,task_name,inst_num,status,start_time,"
                            "end_time,plan_cpu,plan_mem,plan_gpu,gpu_type), found %d", n);
        if (field_empty(&f[8]) || field_empty(&f[4]) || field_empty(&f[5])) {
                t->n_skipped++;
                return 0;
        }
        if ((r = field_double(&f[8], line, "plan_gpu", &plan, err)) < 0 ||
            (r = field_double(&f[4], line, "start_time", &start, err)) < 0 ||
            (r = field_double(&f[5], line, "end_time", &end, err)) < 0)
                return r;
        if (str_to_int64(f[2].p, f[2].len, 1, BENCH_MAX_JOBS, &inst) < 0)
                return fail(err, line, -EINVAL, "column inst_num: '%.*s' is not an integer in 1..%u",
                            (int)MIN(f[2].len, 40), f[2].p, BENCH_MAX_JOBS);
        if (plan < 0 || plan > 100.0 * TOPO_MAX_GPUS)
                return fail(err, line, -EINVAL, "column plan_gpu: %g is not in 0..%u percent",
                            plan, 100 * TOPO_MAX_GPUS);
        if (plan == 0) {
                t->n_skipped++;
                return 0;
        }
        return add_converted(c, t, start, end, (unsigned)ceil(plan / 100.0), (unsigned)inst, line,
                             err);
}

/* --- Alibaba 2023 openb_pod_list*.csv ----------------------------------------------------
 * Header required; columns found by name: num_gpu, creation_time, deletion_time.  A pod
 * arrives at creation_time and runs until deletion_time.  Skipped: num_gpu 0 (CPU pods),
 * deletion_time missing.  Fractional GPU pods (gpu_milli < 1000) count as one GPU. */

static int
openb_row(void *ctx, const struct field *f, int n, unsigned line, struct bench_trace *t,
          struct bench_error *err)
{
        struct convert_ctx *c = ctx;
        static const char *const want[] = { "num_gpu", "creation_time", "deletion_time" };
        int *cols[] = { &c->col_gpu, &c->col_create, &c->col_delete };
        double create, del;
        int64_t g;
        int r, maxcol;

        if (line == 0) {
                for (size_t k = 0; k < ELEMENTSOF(want); k++) {
                        *cols[k] = -1;
                        for (int i = 0; i < n; i++)
                                if (str_eq_n(f[i].p, f[i].len, want[k]))
                                        *cols[k] = i;
                        if (*cols[k] < 0)
                                return fail(err, 0, -EINVAL, "header has no '%s' column", want[k]);
                }
                return 0;
        }
        maxcol = MAX(c->col_gpu, MAX(c->col_create, c->col_delete));
        if (n <= maxcol)
                return fail(err, line, -EINVAL, "expected at least %d fields, found %d",
                            maxcol + 1, n);
        if (str_to_int64(f[c->col_gpu].p, f[c->col_gpu].len, 0, TOPO_MAX_GPUS, &g) < 0)
                return fail(err, line, -EINVAL, "column num_gpu: '%.*s' is not an integer in 0..%u",
                            (int)MIN(f[c->col_gpu].len, 40), f[c->col_gpu].p, TOPO_MAX_GPUS);
        if (g == 0 || field_empty(&f[c->col_delete]) || field_empty(&f[c->col_create])) {
                t->n_skipped++;
                return 0;
        }
        if ((r = field_double(&f[c->col_create], line, "creation_time", &create, err)) < 0 ||
            (r = field_double(&f[c->col_delete], line, "deletion_time", &del, err)) < 0)
                return r;
        return add_converted(c, t, create, del, (unsigned)g, 1, line, err);
}

/* --- Microsoft Philly cluster_job_log ---------------------------------------------------
 * A JSON array of jobs: {"jobid", "status", "submitted_time", "attempts": [{"start_time",
 * "end_time", "detail": [{"ip", "gpus": ["gpu0", ...]}]}]}, times as "YYYY-MM-DD
 * HH:MM:SS" (or null / "None" when unknown).  A job arrives at submitted_time, runs from
 * its first attempt's start to its last attempt's end, on the GPUs of its first attempt
 * (summed over machines).  Skipped: no attempts, no GPUs, a time unknown. */

/* "YYYY-MM-DD HH:MM:SS" to seconds since 1970 (UTC; the log has no zone).  -EINVAL. */
static int
parse_philly_time(const char *s, double *ret)
{
        int y, mo, d, h, mi, se, n = 0;
        int64_t days;

        if (sscanf(s, "%4d-%2d-%2d %2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) != 6 ||
            s[n] != '\0')
                return -EINVAL;
        if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || h < 0 ||
            mi < 0 || mi > 59 || se < 0 || se > 60)
                return -EINVAL;
        /* Days from the civil date (proleptic Gregorian). */
        y -= mo <= 2;
        {
                int era = y / 400, yoe = y - era * 400;
                int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
                int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
                days = (int64_t)era * 146097 + doe - 719468;
        }
        *ret = (double)days * 86400 + h * 3600 + mi * 60 + se;
        return 0;
}

/* 1 = a usable time, 0 = unknown (null or "None"), -EINVAL = malformed. */
static int
philly_time(const cJSON *o, const char *key, double *ret)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!v || cJSON_IsNull(v))
                return 0;
        if (!cJSON_IsString(v))
                return -EINVAL;
        if (strcmp(v->valuestring, "None") == 0 || v->valuestring[0] == '\0')
                return 0;
        return parse_philly_time(v->valuestring, ret) < 0 ? -EINVAL : 1;
}

static unsigned
line_of(const char *text, const char *at)
{
        unsigned line = 1;

        for (const char *p = text; p < at; p++)
                line += *p == '\n';
        return line;
}

static int
philly_job(const struct convert_ctx *c, const cJSON *job, size_t idx, struct bench_trace *t,
           struct bench_error *err)
{
        const cJSON *attempts, *first, *last, *detail, *m;
        double submit, start, end;
        unsigned gpus = 0;
        int r;

        if (!cJSON_IsObject(job))
                return fail(err, 0, -EINVAL, "job #%zu is not a JSON object", idx + 1);
        attempts = cJSON_GetObjectItemCaseSensitive(job, "attempts");
        if (attempts && !cJSON_IsArray(attempts))
                return fail(err, 0, -EINVAL, "job #%zu: 'attempts' is not an array", idx + 1);
        if (cJSON_GetArraySize(attempts) == 0) {
                t->n_skipped++;
                return 0;
        }
        first = cJSON_GetArrayItem(attempts, 0);
        last = cJSON_GetArrayItem(attempts, cJSON_GetArraySize(attempts) - 1);
        if (!cJSON_IsObject(first) || !cJSON_IsObject(last))
                return fail(err, 0, -EINVAL, "job #%zu: an attempt is not a JSON object", idx + 1);
        detail = cJSON_GetObjectItemCaseSensitive(first, "detail");
        if (detail && !cJSON_IsArray(detail))
                return fail(err, 0, -EINVAL, "job #%zu: 'detail' is not an array", idx + 1);
        cJSON_ArrayForEach(m, detail) {
                const cJSON *g = cJSON_GetObjectItemCaseSensitive(m, "gpus");

                if (!cJSON_IsObject(m) || (g && !cJSON_IsArray(g)))
                        return fail(err, 0, -EINVAL, "job #%zu: 'detail' entries need a 'gpus' array",
                                    idx + 1);
                gpus += (unsigned)MIN(cJSON_GetArraySize(g), TOPO_MAX_GPUS);
        }
        if ((r = philly_time(job, "submitted_time", &submit)) < 0 ||
            (r == 1 && (r = philly_time(first, "start_time", &start)) < 0) ||
            (r == 1 && (r = philly_time(last, "end_time", &end)) < 0))
                return fail(err, 0, -EINVAL,
                            "job #%zu: a time is not \"YYYY-MM-DD HH:MM:SS\", null or \"None\"",
                            idx + 1);
        if (r == 0 || gpus == 0) {
                t->n_skipped++;
                return 0;
        }
        /* Queueing in Philly is the simulator's business: the job runs for end - start. */
        if (start < submit)
                start = submit;
        return add_converted(c, t, submit, submit + (end - start), gpus, 1, 0, err);
}

/* The line on which element idx (0-based) of the top-level JSON array starts, for errors
 * about a well-formed but wrong job (cJSON keeps no positions).  0 when not found. */
static unsigned
element_line(const char *text, size_t len, size_t idx)
{
        unsigned line = 1, depth = 0;
        bool in_str = false, esc = false, want = false;
        size_t k = 0;

        for (size_t i = 0; i < len; i++) {
                char ch = text[i];

                if (in_str) {
                        if (esc)
                                esc = false;
                        else if (ch == '\\')
                                esc = true;
                        else if (ch == '"')
                                in_str = false;
                        line += ch == '\n';
                        continue;
                }
                if (ch == '\n') {
                        line++;
                        continue;
                }
                if (ch == ' ' || ch == '\t' || ch == '\r')
                        continue;
                if (want) {
                        if (k++ == idx)
                                return line;
                        want = false;
                }
                if (ch == '"')
                        in_str = true;
                else if (ch == '[' || ch == '{')
                        want = depth++ == 0 && ch == '[';
                else if (ch == ']' || ch == '}')
                        depth = depth ? depth - 1 : 0;
                else if (ch == ',' && depth == 1)
                        want = true;
        }
        return 0;
}

static int
parse_philly(const struct convert_ctx *c, const char *text, size_t len, struct bench_trace *t,
             struct bench_error *err)
{
        const char *end = NULL;
        cJSON *root, *job;
        size_t idx = 0;
        int r = 0;

        root = cJSON_ParseWithLengthOpts(text, len, &end, false);
        if (!root) {
                const char *at = cJSON_GetErrorPtr();

                if (!at || at < text || at > text + len)
                        at = end && end >= text && end <= text + len ? end : text;
                return fail(err, line_of(text, at), -EINVAL, "not valid JSON here");
        }
        if (!cJSON_IsArray(root)) {
                cJSON_Delete(root);
                return fail(err, 1, -EINVAL, "expected a JSON array of jobs");
        }
        cJSON_ArrayForEach(job, root) {
                r = philly_job(c, job, idx, t, err);
                if (r < 0) {
                        if (err && err->line == 0)
                                err->line = element_line(text, len, idx);
                        break;
                }
                idx++;
        }
        cJSON_Delete(root);
        return r;
}

/* --- dispatch ----------------------------------------------------------------------------- */

int
bench_trace_parse(enum bench_trace_format f, const char *text, size_t len,
                  const struct bench_convert_opts *opts, struct bench_trace *t,
                  struct bench_error *err)
{
        struct bench_convert_opts def;
        struct convert_ctx c = { 0 };
        size_t n0 = t->n, skipped0 = t->n_skipped;
        int r;

        if (!opts) {
                bench_convert_opts_default(&def);
                opts = &def;
        }
        c.o = opts;
        if (len > BENCH_MAX_TRACE_BYTES)
                return fail(err, 0, -E2BIG, "trace is larger than %u bytes", BENCH_MAX_TRACE_BYTES);
        if (memchr(text, '\0', len))
                return fail(err, line_of(text, memchr(text, '\0', len)), -EINVAL,
                            "a NUL byte: this is not a text trace");
        switch (f) {
        case BENCH_TRACE_CSV:
                r = for_each_row(text, len, "arrival_s", false, &c, csv_row, t, err);
                break;
        case BENCH_TRACE_PAI2020:
                r = for_each_row(text, len, "job_name", false, &c, pai_row, t, err);
                break;
        case BENCH_TRACE_OPENB2023:
                r = for_each_row(text, len, "name", true, &c, openb_row, t, err);
                break;
        case BENCH_TRACE_PHILLY:
                r = parse_philly(&c, text, len, t, err);
                break;
        default:
                return fail(err, 0, -EINVAL, "unknown trace format");
        }
        if (r < 0) {
                t->n = n0; /* the trace as it was */
                t->n_skipped = skipped0;
                return r;
        }
        bench_trace_normalize(t);
        return (int)MIN(t->n - n0, (size_t)INT32_MAX);
}

int
bench_trace_write_csv(const struct bench_trace *t, struct buf *out)
{
        int r = buf_puts(out, CSV_HEADER "\n");

        for (size_t i = 0; r >= 0 && i < t->n; i++)
                r = buf_printf(out, "%.3f,%.3f,%u,%.4f\n", t->jobs[i].arrival, t->jobs[i].duration,
                               t->jobs[i].gpus, t->jobs[i].comm);
        return r < 0 ? r : 0;
}
