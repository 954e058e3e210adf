/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Metrics and output of a simulation: per-policy summaries (the numbers of
 * docs/benchmark.md), the markdown table, CSV files and a gnuplot script for the charts.
 * Encode layer of bench/: runs in, bytes out into caller buffers; no files opened here.
 */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const unsigned report_sizes[BENCH_REPORT_SIZES] = { 1, 2, 4, 8 };

static int
cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return (x > y) - (x < y);
}

double
bench_percentile(double *v, size_t n, double p)
{
        double pos;
        size_t i;

        if (n == 0)
                return 0;
        qsort(v, n, sizeof(*v), cmp_double);
        pos = p / 100.0 * (double)(n - 1);
        i = (size_t)floor(pos);
        if (i + 1 >= n)
                return v[n - 1];
        return v[i] + (pos - (double)i) * (v[i + 1] - v[i]);
}

int
bench_summarize(const struct bench_run *r, struct bench_summary *ret)
{
        struct bench_summary s = { .policy = r->policy };
        CLEANUP(freep) double *ratio = NULL;
        CLEANUP(freep) double *tmp = NULL;
        unsigned n_best = 0, n_nop2p = 0;
        size_t n = 0;

        ratio = calloc(MAX(r->n_jobs, 1), sizeof(*ratio));
        tmp = calloc(MAX(r->n_jobs, 1), sizeof(*tmp));
        if (!ratio || !tmp)
                return -ENOMEM;
        for (unsigned i = 0; i < r->n_jobs; i++) {
                const struct bench_job_result *j = &r->results[i];

                if (j->node < 0 || j->gpus < 2)
                        continue;
                s.n_multi++;
                n_best += j->best;
                n_nop2p += !j->p2p;
                /* A size the model gives no bandwidth even on an empty node has no ratio. */
                if (j->ideal_gbps > 0)
                        ratio[n++] = j->busbw_gbps / j->ideal_gbps;
                else
                        s.n_unmodeled++;
        }
        s.best_frac = s.n_multi ? (double)n_best / s.n_multi : 0;
        s.nop2p_frac = s.n_multi ? (double)n_nop2p / s.n_multi : 0;
        s.ratio_p50 = bench_percentile(ratio, n, 50);
        s.ratio_p10 = bench_percentile(ratio, n, 10);

        for (unsigned m = 0; m < 2; m++) {
                unsigned size = m == 0 ? 2 : 4;

                n = 0;
                for (unsigned i = 0; i < r->n_jobs; i++)
                        if (r->results[i].node >= 0 && r->results[i].mesh &&
                            r->results[i].gpus == size)
                                tmp[n++] = r->results[i].busbw_gbps;
                s.mesh_n[m] = (unsigned)n;
                s.mesh_busbw_p50[m] = bench_percentile(tmp, n, 50);
                s.mesh_busbw_p10[m] = bench_percentile(tmp, n, 10);
        }
        for (unsigned k = 0; k < BENCH_REPORT_SIZES; k++) {
                n = 0;
                for (unsigned i = 0; i < r->n_jobs; i++)
                        if (r->results[i].node >= 0 && r->results[i].gpus == report_sizes[k])
                                tmp[n++] = r->results[i].start - r->results[i].arrival;
                s.qdelay_n[k] = (unsigned)n;
                s.qdelay_p50[k] = bench_percentile(tmp, n, 50);
                s.qdelay_p95[k] = bench_percentile(tmp, n, 95);
        }
        s.makespan_h = r->makespan / 3600.0;
        if (r->makespan > 0 && r->cluster_gpus > 0) {
                s.alloc_mean = r->alloc_gpu_s / (r->makespan * r->cluster_gpus);
                s.stranded_mean = r->stranded_gpu_s / (r->makespan * r->cluster_gpus);
        }
        if (r->sat_s > 0 && r->cluster_gpus > 0)
                s.stranded_sat = r->sat_free_gpu_s / (r->sat_s * r->cluster_gpus);
        s.decisions_per_s = r->decision_s > 0 ? (double)r->decisions / r->decision_s : 0;
        *ret = s;
        return 0;
}

/* Minutes with one decimal, or "-" for an empty column. */
static int
put_minutes(struct buf *out, double seconds, unsigned n)
{
        return n ? buf_printf(out, "%.1f", seconds / 60.0) : buf_puts(out, "-");
}

int
bench_report_markdown(const struct bench_summary *s, size_t n, struct buf *out)
{
        int r = 0;

        r = r < 0 ? r : buf_puts(out,
                "| policy | multi-GPU jobs on best set | busbw / ideal p50 | p10 | multi-GPU "
                "without P2P | mesh 2-GPU busbw p50 / p10 (GB/s) | mesh 4-GPU busbw p50 / p10 "
                "(GB/s) | decisions/s |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = buf_printf(out, "| %s | %.1f%% | %.3f | %.3f | %.1f%% | %.1f / %.1f | %.1f / %.1f "
                               "| %.0f |\n",
                               bench_policy_to_string(s[i].policy), 100 * s[i].best_frac,
                               s[i].ratio_p50, s[i].ratio_p10, 100 * s[i].nop2p_frac,
                               s[i].mesh_busbw_p50[0], s[i].mesh_busbw_p10[0],
                               s[i].mesh_busbw_p50[1], s[i].mesh_busbw_p10[1], s[i].decisions_per_s);
        r = r < 0 ? r : buf_puts(out,
                "\n| policy | queueing p50 / p95 (min): 1 GPU | 2 GPUs | 4 GPUs | 8 GPUs | "
                "makespan (h) | GPUs allocated | free GPUs stranded | GPUs stranded at saturation |\n"
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (size_t i = 0; r >= 0 && i < n; i++) {
                r = buf_printf(out, "| %s |", bench_policy_to_string(s[i].policy));
                for (unsigned k = 0; r >= 0 && k < BENCH_REPORT_SIZES; k++) {
                        r = r < 0 ? r : buf_puts(out, " ");
                        r = r < 0 ? r : put_minutes(out, s[i].qdelay_p50[k], s[i].qdelay_n[k]);
                        r = r < 0 ? r : buf_puts(out, " / ");
                        r = r < 0 ? r : put_minutes(out, s[i].qdelay_p95[k], s[i].qdelay_n[k]);
                        r = r < 0 ? r : buf_puts(out, " |");
                }
                r = r < 0 ? r : buf_printf(out, " %.1f | %.1f%% | %.1f%% | %.1f%% |\n", s[i].makespan_h,
                                           100 * s[i].alloc_mean, 100 * s[i].stranded_mean,
                                           100 * s[i].stranded_sat);
        }
        return r < 0 ? r : 0;
}

int
bench_report_summary_csv(const struct bench_summary *s, size_t n, struct buf *out)
{
        int r = buf_puts(out, "policy,multi_jobs,best_frac,ratio_p50,ratio_p10,nop2p_frac,"
                              "mesh2_busbw_p50,mesh4_busbw_p50,mesh2_busbw_p10,mesh4_busbw_p10,unmodeled,"
                              "qdelay1_p50_s,qdelay1_p95_s,"
                              "qdelay2_p50_s,qdelay2_p95_s,qdelay4_p50_s,qdelay4_p95_s,"
                              "qdelay8_p50_s,qdelay8_p95_s,makespan_h,alloc_mean,stranded_mean,"
                              "decisions_per_s,stranded_sat\n");

        for (size_t i = 0; r >= 0 && i < n; i++) {
                r = buf_printf(out, "%s,%u,%.6f,%.6f,%.6f,%.6f,%.3f,%.3f",
                               bench_policy_to_string(s[i].policy), s[i].n_multi, s[i].best_frac,
                               s[i].ratio_p50, s[i].ratio_p10, s[i].nop2p_frac,
                               s[i].mesh_busbw_p50[0], s[i].mesh_busbw_p50[1]);
                r = r < 0 ? r : buf_printf(out, ",%.3f,%.3f,%u", s[i].mesh_busbw_p10[0],
                                           s[i].mesh_busbw_p10[1], s[i].n_unmodeled);
                for (unsigned k = 0; r >= 0 && k < BENCH_REPORT_SIZES; k++)
                        r = buf_printf(out, ",%.1f,%.1f", s[i].qdelay_p50[k], s[i].qdelay_p95[k]);
                r = r < 0 ? r : buf_printf(out, ",%.3f,%.6f,%.6f,%.0f,%.6f\n", s[i].makespan_h,
                                           s[i].alloc_mean, s[i].stranded_mean,
                                           s[i].decisions_per_s, s[i].stranded_sat);
        }
        return r < 0 ? r : 0;
}

int
bench_report_jobs_csv(const struct bench_run *runs, size_t n, struct buf *out)
{
        int r = buf_puts(out, "policy,job,gpus,node,arrival_s,start_s,finish_s,qdelay_s,"
                              "busbw_gbps,ideal_gbps,ratio,best,p2p,mesh\n");

        for (size_t p = 0; r >= 0 && p < n; p++)
                for (unsigned i = 0; r >= 0 && i < runs[p].n_jobs; i++) {
                        const struct bench_job_result *j = &runs[p].results[i];

                        if (j->node < 0)
                                continue;
                        r = buf_printf(out, "%s,%u,%u,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.5f,%d,%d,%d\n",
                                       bench_policy_to_string(runs[p].policy), j->job, j->gpus,
                                       j->node, j->arrival, j->start, j->finish,
                                       j->start - j->arrival, j->busbw_gbps, j->ideal_gbps,
                                       j->gpus < 2 ? 1.0 : j->ideal_gbps > 0 ? j->busbw_gbps / j->ideal_gbps : NAN,
                                       j->best, j->p2p, j->mesh);
                }
        return r < 0 ? r : 0;
}

int
bench_report_series_csv(const struct bench_run *runs, size_t n, struct buf *out)
{
        int r = buf_puts(out, "policy,t_s,allocated,stranded,queued,cluster_gpus\n");

        for (size_t p = 0; r >= 0 && p < n; p++) {
                double step = runs[p].makespan / BENCH_SERIES_POINTS, last = -INFINITY;

                for (size_t i = 0; r >= 0 && i < runs[p].n_series; i++) {
                        const struct bench_sample *x = &runs[p].series[i];

                        /* At most about BENCH_SERIES_POINTS samples per policy: the
                         * integrals in the summary use every event, the chart needs fewer. */
                        if (i + 1 < runs[p].n_series && x->t - last < step)
                                continue;
                        last = x->t;
                        r = buf_printf(out, "%s,%.1f,%u,%u,%u,%u\n",
                                       bench_policy_to_string(runs[p].policy), x->t, x->allocated,
                                       x->stranded, x->queued, runs[p].cluster_gpus);
                }
        }
        return r < 0 ? r : 0;
}

/* Appends "policy,series,x,fraction" rows: the empirical CDF of v[0..n) (sorted here). */
static int
put_cdf(struct buf *out, const char *policy, const char *series, double *v, size_t n)
{
        int r = 0;

        double last = -1;

        bench_percentile(v, n, 50); /* sorts */
        for (size_t i = 0; r >= 0 && i < n; i++) {
                double frac = (double)(i + 1) / (double)n;

                /* The last point of each run of equal values carries the step; between
                 * distinct values, steps under BENCH_CDF_STEP are merged to keep charts small. */
                if (i + 1 < n && (v[i + 1] == v[i] || frac - last < BENCH_CDF_STEP))
                        continue;
                r = buf_printf(out, "%s,%s,%.5f,%.5f\n", policy, series, v[i], frac);
                last = frac;
        }
        return r;
}

int
bench_report_cdf_csv(const struct bench_run *runs, size_t n, struct buf *out)
{
        int r = buf_puts(out, "policy,series,x,fraction\n");

        for (size_t p = 0; r >= 0 && p < n; p++) {
                const char *name = bench_policy_to_string(runs[p].policy);
                double *v = calloc(MAX(runs[p].n_jobs, 1), sizeof(*v));
                char series[32];
                size_t k;

                if (!v)
                        return -ENOMEM;
                for (unsigned s = 0; r >= 0 && s < BENCH_REPORT_SIZES; s++) {
                        k = 0;
                        for (unsigned i = 0; i < runs[p].n_jobs; i++)
                                if (runs[p].results[i].node >= 0 &&
                                    runs[p].results[i].gpus == report_sizes[s])
                                        v[k++] = (runs[p].results[i].start -
                                                  runs[p].results[i].arrival) / 60.0;
                        snprintf(series, sizeof(series), "qdelay%u", report_sizes[s]);
                        r = put_cdf(out, name, series, v, k);
                }
                k = 0;
                for (unsigned i = 0; i < runs[p].n_jobs; i++) {
                        const struct bench_job_result *j = &runs[p].results[i];

                        if (j->node >= 0 && j->gpus > 1 && j->ideal_gbps > 0)
                                v[k++] = j->busbw_gbps / j->ideal_gbps;
                }
                r = r < 0 ? r : put_cdf(out, name, "ratio", v, k);
                free(v);
        }
        return r < 0 ? r : 0;
}

/* One bar chart per summary column of summary.csv. */
static const struct bench_bar_chart bar_charts[] = {
        { "metric-best-set", "multi-GPU jobs on their node's best achievable set (%)", 3, "100*v" },
        { "metric-busbw-ratio-p50", "modeled busbw / ideal, median (multi-GPU jobs)", 4, "v" },
        { "metric-busbw-ratio-p10", "modeled busbw / ideal, p10 (multi-GPU jobs)", 5, "v" },
        { "metric-no-p2p", "multi-GPU jobs without peer-to-peer (%)", 6, "100*v" },
        { "metric-mesh2-busbw", "2-GPU jobs on NVLink-mesh nodes: median busbw (GB/s)", 7, "v" },
        { "metric-mesh4-busbw", "4-GPU jobs on NVLink-mesh nodes: median busbw (GB/s)", 8, "v" },
        { "metric-mesh2-busbw-p10", "2-GPU jobs on NVLink-mesh nodes: p10 busbw (GB/s)", 9, "v" },
        { "metric-mesh4-busbw-p10", "4-GPU jobs on NVLink-mesh nodes: p10 busbw (GB/s)", 10, "v" },
        { "metric-qdelay1-p95", "1-GPU jobs: p95 queueing delay (min)", 13, "v/60" },
        { "metric-qdelay8-p95", "8-GPU jobs: p95 queueing delay (min)", 19, "v/60" },
        { "metric-makespan", "makespan (h)", 20, "v" },
        { "metric-allocation", "GPUs allocated, time average (%)", 21, "100*v" },
        { "metric-stranded", "free GPUs stranded on nodes that cannot host an 8-GPU job (%)", 22,
          "100*v" },
        { "metric-decisions", "decisions per second", 23, "v" },
};

int
bench_report_gnuplot_bars(const char *csv, const struct bench_bar_chart *charts, size_t n,
                          struct buf *out)
{
        int r = buf_puts(out,
                "set style fill solid 0.6\n"
                "set boxwidth 0.6\n"
                "unset key\n"
                "set xlabel ''\n"
                "set ylabel ''\n"
                "set yrange [0:*]\n"
                "set offsets 0.5, 0.5, graph 0.12, 0\n");

        for (size_t k = 0; r >= 0 && k < n; k++)
                r = buf_printf(out,
                               "set output '%s.svg'\n"
                               "set title \"%s\"\n"
                               "plot '%s' every ::1 using 0:(v=column(%u), %s):xtic(1) "
                               "with boxes, '' every ::1 using 0:(v=column(%u), %s):(v=column(%u), "
                               "sprintf('%%.3g', %s)) with labels offset 0,0.7\n",
                               charts[k].file, charts[k].title, csv, charts[k].col,
                               charts[k].scale, charts[k].col, charts[k].scale, charts[k].col,
                               charts[k].scale);
        return r < 0 ? r : 0;
}

int
bench_report_gnuplot(const struct bench_summary *s, size_t n, struct buf *out)
{
        int r;

        r = buf_puts(out,
                "# Generated by topofit bench: turns summary.csv, jobs.csv and series.csv into SVG.\n"
                "set datafile separator ','\n"
                "set terminal svg size 800,480 dynamic font 'sans,12' background rgb 'white'\n"
                "set key bottom right\n"
                "set grid\n"
                "policies = '");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = buf_printf(out, "%s%s", i ? " " : "", bench_policy_to_string(s[i].policy));
        r = r < 0 ? r : buf_puts(out,
                "'\n"
                "set ylabel 'fraction of jobs'\n"
                "set yrange [0:1]\n"
                "set yrange [0:1.02]\n"
                "do for [size in '1 2 4 8'] {\n"
                "  set output 'qdelay-cdf-'.size.'gpu.svg'\n"
                "  set title 'queueing delay CDF, '.size.'-GPU jobs'\n"
                "  set xlabel 'queueing delay (minutes, log scale; no wait drawn at 0.01)'\n"
                "  set logscale x\n"
                "  set xrange [0.01:*]\n"
                "  plot for [p in policies] 'cdf.csv' using (strcol(1) eq p && strcol(2) eq "
                "'qdelay'.size ? ($3 < 0.01 ? 0.01 : $3) : 1/0):4 with steps lw 2 title p\n"
                "  unset logscale x\n"
                "  set autoscale x\n"
                "}\n"
                "set output 'busbw-ratio-cdf.svg'\n"
                "set title 'modeled bus bandwidth relative to ideal, multi-GPU jobs (CDF)'\n"
                "set xlabel 'busbw / best busbw for the size on an empty node of the type'\n"
                "set key top left\n"
                "set xrange [0:1.05]\n"
                "plot for [p in policies] 'cdf.csv' using (strcol(1) eq p && strcol(2) eq 'ratio' "
                "? $3 : 1/0):4 with steps lw 2 title p\n"
                "set autoscale x\n"
                "set output 'allocation.svg'\n"
                "set title 'GPU allocation over time'\n"
                "set xlabel 'time (h)'\n"
                "set ylabel 'GPUs allocated (%)'\n"
                "set yrange [0:100]\n"
                "set key outside right top\n"
                "plot for [p in policies] 'series.csv' using (strcol(1) eq p ? $2/3600 : 1/0):"
                "(100.0*$3/$6) with steps lw 1 title p\n"
                "set autoscale y\n");
        return r < 0 ? r : bench_report_gnuplot_bars("summary.csv", bar_charts,
                                                     ELEMENTSOF(bar_charts), out);
}
