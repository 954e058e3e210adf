/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for the bench trace parsers (bench/bench-trace.c): the same bytes are
 * read as each format (our CSV, Alibaba PAI 2020, OpenB 2023, Philly JSON); an accepted
 * trace is normalized and written back as CSV, which must parse again to the same jobs.
 * Also feeds bench_spec_parse().  Seeds: test/data/bench.
 */
#include <stdint.h>
#include <stdlib.h>

#include "bench.h"
#include "buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A short row can ask for millions of jobs (PAI's inst_num): at BENCH_MAX_JOBS the harness
 * spent its time copying them (~300 executions a second); a small cap keeps it on the
 * parsers and reaches the cap's refusal more often. */
#define FUZZ_MAX_JOBS 4096

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct bench_convert_opts opts;

        bench_convert_opts_default(&opts);
        for (int f = 0; f < _BENCH_TRACE_MAX; f++) {
                struct bench_trace t, back;
                struct bench_error err = {};
                struct buf out;
                int r;

                bench_trace_init(&t);
                t.max_jobs = FUZZ_MAX_JOBS;
                r = bench_trace_parse(f, (const char *)data, size, &opts, &t, &err);
                if (r < 0) {
                        if (t.n != 0)
                                abort(); /* "on failure *t keeps what it held" */
                        bench_trace_release(&t);
                        continue;
                }
                bench_trace_normalize(&t);
                buf_init(&out, BENCH_MAX_TRACE_BYTES);
                if (bench_trace_write_csv(&t, &out) == 0) {
                        bench_trace_init(&back);
                        back.max_jobs = FUZZ_MAX_JOBS;
                        if (bench_trace_parse(BENCH_TRACE_CSV, out.data, out.len, &opts, &back,
                                              &err) < 0 || back.n != t.n)
                                abort();
                        bench_trace_release(&back);
                }
                buf_release(&out);
                bench_trace_release(&t);
        }
        {
                struct bench_spec spec;
                struct bench_error err = {};

                (void)bench_spec_parse((const char *)data, size, &spec, &err);
        }
        return 0;
}
