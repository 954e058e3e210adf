/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The synthetic trace generator.  Pure: its only randomness is a splitmix64 stream seeded
 * from the config, so one config always gives the same jobs on every machine (no libc
 * rand(), no clock).  Sizes follow a weighted mix, durations a clipped log-normal, arrivals
 * a Poisson process whose rate offers exactly `load` of the cluster's GPU time for the
 * jobs actually drawn.  Appends to a caller-owned trace.
 */
#include "bench.h"

#include <errno.h>
#include <math.h>

struct rng {
        uint64_t s;
};

static uint64_t
rng_next(struct rng *r)
{
        uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));

        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double
rng_unit(struct rng *r)
{
        return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Standard normal (Box-Muller; the second value is dropped to keep the stream simple). */
static double
rng_normal(struct rng *r)
{
        double u = 1.0 - rng_unit(r), v = rng_unit(r);

        return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

void
bench_gen_config_default(struct bench_gen_config *c)
{
        /* Size mix: Philly (Jeon et al., ATC'19), Helios (Hu et al., SC'21) and PAI (Weng et
         * al., NSDI'22) all report a majority of 1-GPU jobs and multi-GPU jobs concentrated
         * at 2, 4 and 8; the same weights are scoring's fragmentation default. */
        *c = (struct bench_gen_config){
                .seed = 1,
                .n_jobs = 6000,
                .cluster_gpus = 768,
                .load = 0.9,
                .n_sizes = 4,
                .size_of = { 1, 2, 4, 8 },
                .weight_of = { 0.55, 0.2, 0.15, 0.1 },
                .duration_median_s = 1800,
                .duration_sigma = 1.2,
                .duration_min_s = 60,
                .duration_max_s = 12 * 3600,
                .comm_min = 0.1,
                .comm_max = 0.6,
        };
}

static int
check_config(const struct bench_gen_config *c)
{
        double total = 0;

        if (c->n_sizes < 1 || c->n_sizes > BENCH_GEN_MAX_SIZES || c->n_jobs > BENCH_MAX_JOBS ||
            c->cluster_gpus < 1 || !(c->load > 0) || !(c->duration_median_s > 0) ||
            !(c->duration_sigma >= 0) || !(c->duration_min_s > 0) ||
            !(c->duration_max_s >= c->duration_min_s) || c->duration_max_s > BENCH_MAX_DURATION_S ||
            !(c->comm_min >= 0) || !(c->comm_max <= 1) || !(c->comm_min <= c->comm_max))
                return -EINVAL;
        for (unsigned k = 0; k < c->n_sizes; k++) {
                if (c->size_of[k] < 1 || c->size_of[k] > TOPO_MAX_GPUS || !(c->weight_of[k] > 0))
                        return -EINVAL;
                total += c->weight_of[k];
        }
        return total > 0 ? 0 : -EINVAL;
}

int
bench_generate(const struct bench_gen_config *cfg, struct bench_trace *t)
{
        struct rng rng = { cfg->seed };
        double total_w = 0, work = 0, rate, now = 0;
        size_t n0 = t->n;
        int r;

        r = check_config(cfg);
        if (r < 0)
                return r;
        for (unsigned k = 0; k < cfg->n_sizes; k++)
                total_w += cfg->weight_of[k];

        /* Sizes, durations and comm fractions first, so the arrival rate can offer exactly
         * the configured load for the jobs drawn. */
        for (unsigned i = 0; i < cfg->n_jobs; i++) {
                struct bench_job j = { 0 };
                double u = rng_unit(&rng) * total_w, d;
                unsigned k = 0;

                while (k + 1 < cfg->n_sizes && u >= cfg->weight_of[k])
                        u -= cfg->weight_of[k++];
                j.gpus = cfg->size_of[k];
                d = cfg->duration_median_s * exp(cfg->duration_sigma * rng_normal(&rng));
                j.duration = fmin(fmax(d, cfg->duration_min_s), cfg->duration_max_s);
                u = rng_unit(&rng);
                j.comm = j.gpus > 1 ? cfg->comm_min + u * (cfg->comm_max - cfg->comm_min) : 0;
                work += j.gpus * j.duration;
                r = bench_trace_add(t, &j);
                if (r < 0) {
                        t->n = n0;
                        return r;
                }
        }
        if (cfg->n_jobs == 0)
                return 0;
        rate = cfg->load * cfg->cluster_gpus / (work / cfg->n_jobs); /* jobs per second */
        for (size_t i = n0; i < t->n; i++) {
                t->jobs[i].arrival = now;
                now += -log(1.0 - rng_unit(&rng)) / rate;
        }
        return (int)cfg->n_jobs;
}
