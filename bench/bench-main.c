/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `topofit bench`: the program around the pure simulator.  The only file and process I/O
 * of bench/ lives here: reading the cluster spec, topology files (text formats through
 * topology/, hwloc XML through its loader library) and traces (each capped by a named
 * constant), the monotonic clock for decisions per second, writing CSV files and
 * the gnuplot script, and running gnuplot and the go-gpuallocator peer.  Subcommands: run
 * (the default), convert (a public trace to our CSV), generate (a synthetic trace to our
 * CSV), peer-besteffort (k8s-besteffort against NVIDIA's own picker, bench-peer.c).
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/file.h"
#include "../common/str.h"
#include "../topology/hwloc/topo-hwloc.h"

#ifndef BENCH_SOURCE_ROOT
#define BENCH_SOURCE_ROOT "."
#endif
#define BENCH_DEFAULT_SPEC "bench/default-cluster.spec"

extern char **environ;

static int
write_file(const char *dir, const char *name, const struct buf *b)
{
        char path[PATH_MAX];
        FILE *f;
        int r = 0;

        if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
                return -ENAMETOOLONG;
        f = fopen(path, "we");
        if (!f)
                return -errno;
        if (b->len && fwrite(b->data, 1, b->len, f) != b->len)
                r = -EIO;
        if (fclose(f) != 0 && r == 0)
                r = -EIO;
        return r;
}

static double
monotonic_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --- loading the cluster ------------------------------------------------------------------- */

static void
cluster_release(struct bench_cluster *cl)
{
        for (unsigned t = 0; t < cl->n_types; t++) {
                score_class_unref(cl->types[t].cls);
                topo_unref(cl->types[t].topo);
        }
        *cl = (struct bench_cluster){ 0 };
}

/* Loads one topology file.  Failures are reported on stderr, or into why (why_len bytes)
 * when the caller reports them itself. */
static int
load_topology(const char *path, const char *model, struct topo **ret, char *why, size_t why_len)
{
        CLEANUP(freep) char *text = NULL;
        CLEANUP(topo_unrefp) struct topo *t = NULL;
        struct topo_error err = { 0 };
        size_t len;
        int r;

        r = file_read_capped(path, TOPO_MAX_XML_BYTES, &text, &len);
        if (r < 0) {
                if (why)
                        snprintf(why, why_len, "%s", strerror(-r));
                else
                        fprintf(stderr, "topofit bench: %s: %s\n", path, strerror(-r));
                return r;
        }
        r = topo_parse_any(text, len, &t, &err);
        if (r == -EPROTONOSUPPORT)
                r = topo_hwloc_load_xml(text, len, &t, &err);
        if (r < 0) {
                if (why)
                        snprintf(why, why_len, "%u:%u: %s", err.line, err.column,
                                 err.msg[0] ? err.msg : strerror(-r));
                else
                        fprintf(stderr, "topofit bench: %s:%u:%u: %s\n", path, err.line,
                                err.column, err.msg[0] ? err.msg : strerror(-r));
                return r;
        }
        if (model && model[0])
                topo_set_model(t, model);
        *ret = TAKE_PTR(t);
        return 0;
}

/* Loads every node type of the spec; relative paths are taken from the spec's directory. */
static int
load_cluster(const char *spec_path, struct bench_cluster *ret)
{
        CLEANUP(freep) char *text = NULL;
        CLEANUP(freep) struct bench_spec *spec = NULL;
        struct bench_cluster cl = { 0 };
        struct bench_error err = { 0 };
        struct score_config cfg;
        char dir[PATH_MAX], path[PATH_MAX];
        const char *slash;
        size_t len;
        int r;

        r = file_read_capped(spec_path, BENCH_MAX_SPEC_BYTES, &text, &len);
        if (r < 0) {
                fprintf(stderr, "topofit bench: %s: %s\n", spec_path, strerror(-r));
                return r;
        }
        spec = calloc(1, sizeof(*spec));
        if (!spec)
                return -ENOMEM;
        r = bench_spec_parse(text, len, spec, &err);
        if (r < 0) {
                fprintf(stderr, "topofit bench: %s:%u: %s\n", spec_path, err.line, err.msg);
                return r;
        }
        slash = strrchr(spec_path, '/');
        snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - spec_path) : 1,
                 slash ? spec_path : ".");
        score_config_default(&cfg);
        for (unsigned i = 0; i < spec->n; i++) {
                struct bench_node_type *nt = &cl.types[i];

                if (spec->lines[i].path[0] == '/')
                        snprintf(path, sizeof(path), "%s", spec->lines[i].path);
                else if (snprintf(path, sizeof(path), "%s/%s", dir, spec->lines[i].path) >=
                         (int)sizeof(path)) {
                        cluster_release(&cl);
                        return -ENAMETOOLONG;
                }
                r = load_topology(path, spec->lines[i].model, &nt->topo, NULL, 0);
                if (r < 0) {
                        cluster_release(&cl);
                        return r;
                }
                cl.n_types++;
                snprintf(nt->name, sizeof(nt->name), "%s", spec->lines[i].name);
                nt->count = spec->lines[i].count;
                nt->cls = score_class_new(nt->topo, &cfg);
                if (!nt->cls || nt->topo->n_gpus == 0) {
                        fprintf(stderr, "topofit bench: %s: no GPUs or out of memory\n", path);
                        cluster_release(&cl);
                        return -EINVAL;
                }
        }
        *ret = cl;
        return 0;
}

static unsigned
cluster_gpus(const struct bench_cluster *cl)
{
        unsigned n = 0;

        for (unsigned t = 0; t < cl->n_types; t++)
                n += cl->types[t].count * cl->types[t].topo->n_gpus;
        return n;
}

/* --- options -------------------------------------------------------------------------------- */

struct options {
        const char *spec;
        const char *trace;
        enum bench_trace_format format;
        const char *out;
        bool plots;
        bool have_policies;
        bool policies[_BENCH_POLICY_MAX];
        bool gang;                                   /* the gang command: its own policies */
        bool gang_policies[_BENCH_GANG_POLICY_MAX];
        struct bench_gen_config gen;
        bool gen_seed_set, gen_jobs_set, gen_load_set; /* given on the command line */
        struct bench_convert_opts conv;
        const char *peer;
        unsigned peer_random;
};

static void
usage(FILE *f)
{
        fputs("Usage: topofit bench [run] [OPTIONS]\n"
              "       topofit bench convert --format FORMAT FILE\n"
              "       topofit bench generate [--jobs N] [--seed N] [--load X] [--gpus N]\n"
              "       topofit bench peer-besteffort --peer PATH [--random N] [TOPOLOGY...]\n"
              "       topofit bench gang [--seed N] [--jobs N] [--load X] [--policies LIST]\n"
              "                          [--out DIR] [--no-plots]\n"
              "\n"
              "Replays a job trace on a cluster of real node topologies under each placement\n"
              "policy and prints a markdown table of the results.  With no options: the\n"
              "default cluster (bench/default-cluster.spec) and a synthetic trace.\n"
              "\n"
              "  --cluster FILE     cluster spec: '<name> <count> <topology-file> [gpu-model]'\n"
              "  --trace FILE       a trace instead of the synthetic one\n"
              "  --format FORMAT    csv (ours, default), pai2020, openb2023, philly\n"
              "  --comm X           converters: comm fraction of multi-GPU jobs (default 0.3)\n"
              "  --jobs N           synthetic: number of jobs (default 3000)\n"
              "  --seed N           synthetic: seed (default 1)\n"
              "  --load X           synthetic: offered load, fraction of GPU time (default 0.9)\n"
              "  --gpus N           generate: cluster GPUs that set the arrival rate\n"
              "  --policies LIST    comma-separated subset of k8s-default, k8s-besteffort,\n"
              "                     binpack-besteffort, topofit, oracle (default: all); gang:\n"
              "                     k8s-default, k8s-besteffort, binpack-besteffort,\n"
              "                     rack-packing, topofit, topofit-decide (topofit with\n"
              "                     --filter-best 1: the extender's node, no scheduler tie-break)\n"
              "  --out DIR          write summary.csv, jobs.csv, series.csv, plots.gp there\n"
              "  --no-plots         with --out: do not run gnuplot\n"
              "  --peer PATH        peer-besteffort: bench/peer-gpuallocator's binary (its\n"
              "                     build script prints the path); compares k8s-besteffort\n"
              "                     with NVIDIA's go-gpuallocator on every free mask and size\n"
              "  --random N         peer-besteffort: also N random 5-8 GPU matrices (--seed)\n"
              "  -h, --help         this text\n",
              f);
}

static int
parse_double_arg(const char *s, double min, double max, double *ret)
{
        double v;

        if (str_to_double(s, strlen(s), &v) < 0 || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int
parse_options(int argc, char **argv, struct options *o)
{
        enum { OPT_CLUSTER = 256, OPT_TRACE, OPT_FORMAT, OPT_COMM, OPT_JOBS, OPT_SEED, OPT_LOAD,
               OPT_GPUS, OPT_POLICIES, OPT_OUT, OPT_NO_PLOTS, OPT_PEER,
               OPT_RANDOM };
        static const struct option longopts[] = {
                { "cluster", required_argument, NULL, OPT_CLUSTER },
                { "trace", required_argument, NULL, OPT_TRACE },
                { "format", required_argument, NULL, OPT_FORMAT },
                { "comm", required_argument, NULL, OPT_COMM },
                { "jobs", required_argument, NULL, OPT_JOBS },
                { "seed", required_argument, NULL, OPT_SEED },
                { "load", required_argument, NULL, OPT_LOAD },
                { "gpus", required_argument, NULL, OPT_GPUS },
                { "policies", required_argument, NULL, OPT_POLICIES },
                { "out", required_argument, NULL, OPT_OUT },
                { "no-plots", no_argument, NULL, OPT_NO_PLOTS },
                { "peer", required_argument, NULL, OPT_PEER },
                { "random", required_argument, NULL, OPT_RANDOM },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int c;

        optind = 1;
        while ((c = getopt_long(argc, argv, "h", longopts, NULL)) >= 0) {
                int64_t v;
                double d;

                switch (c) {
                case OPT_CLUSTER:
                        o->spec = optarg;
                        break;
                case OPT_TRACE:
                        o->trace = optarg;
                        break;
                case OPT_FORMAT:
                        o->format = bench_trace_format_from_string(optarg);
                        if (o->format < 0) {
                                fprintf(stderr, "topofit bench: unknown trace format '%s'\n", optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_COMM:
                        if (parse_double_arg(optarg, 0, 1, &o->conv.comm) < 0) {
                                fprintf(stderr, "topofit bench: --comm takes a number in 0..1\n");
                                return -EINVAL;
                        }
                        break;
                case OPT_JOBS:
                        if (str_to_int64(optarg, strlen(optarg), 1, BENCH_MAX_JOBS, &v) < 0) {
                                fprintf(stderr, "topofit bench: --jobs takes 1..%u\n", BENCH_MAX_JOBS);
                                return -EINVAL;
                        }
                        o->gen.n_jobs = (unsigned)v;
                        o->gen_jobs_set = true;
                        break;
                case OPT_SEED:
                        if (str_to_int64(optarg, strlen(optarg), 0, INT64_MAX, &v) < 0) {
                                fprintf(stderr, "topofit bench: --seed takes a non-negative integer\n");
                                return -EINVAL;
                        }
                        o->gen.seed = (uint64_t)v;
                        o->gen_seed_set = true;
                        break;
                case OPT_LOAD:
                        if (parse_double_arg(optarg, 0.01, 10, &d) < 0) {
                                fprintf(stderr, "topofit bench: --load takes a number in 0.01..10\n");
                                return -EINVAL;
                        }
                        o->gen.load = d;
                        o->gen_load_set = true;
                        break;
                case OPT_GPUS:
                        if (str_to_int64(optarg, strlen(optarg), 1, BENCH_MAX_NODES * 16, &v) < 0) {
                                fprintf(stderr, "topofit bench: --gpus takes a positive integer\n");
                                return -EINVAL;
                        }
                        o->gen.cluster_gpus = (unsigned)v;
                        break;
                case OPT_POLICIES: {
                        char list[256], *save = NULL;

                        if (snprintf(list, sizeof(list), "%s", optarg) >= (int)sizeof(list))
                                return -EINVAL;
                        o->have_policies = true;
                        memset(o->policies, 0, sizeof(o->policies));
                        memset(o->gang_policies, 0, sizeof(o->gang_policies));
                        for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
                                int pol = o->gang ? (int)bench_gang_policy_from_string(p)
                                                  : (int)bench_policy_from_string(p);

                                if (pol < 0) {
                                        fprintf(stderr, "topofit bench: unknown policy '%s'\n", p);
                                        return -EINVAL;
                                }
                                if (o->gang)
                                        o->gang_policies[pol] = true;
                                else
                                        o->policies[pol] = true;
                        }
                        break;
                }
                case OPT_OUT:
                        o->out = optarg;
                        break;
                case OPT_NO_PLOTS:
                        o->plots = false;
                        break;
                case OPT_PEER:
                        o->peer = optarg;
                        break;
                case OPT_RANDOM:
                        if (str_to_int64(optarg, strlen(optarg), 1, 100000, &v) < 0) {
                                fprintf(stderr, "topofit bench: --random takes 1..100000\n");
                                return -EINVAL;
                        }
                        o->peer_random = (unsigned)v;
                        break;
                case 'h':
                        usage(stdout);
                        return 1;
                default:
                        usage(stderr);
                        return -EINVAL;
                }
        }
        return 0;
}

static int
load_trace(const struct options *o, unsigned gpus, struct bench_trace *t)
{
        CLEANUP(freep) char *text = NULL;
        struct bench_error err = { 0 };
        size_t len;
        int r;

        if (!o->trace) {
                struct bench_gen_config g = o->gen;

                if (gpus)
                        g.cluster_gpus = gpus;
                r = bench_generate(&g, t);
                if (r < 0)
                        fprintf(stderr, "topofit bench: bad generator settings\n");
                return r;
        }
        r = file_read_capped(o->trace, BENCH_MAX_TRACE_BYTES, &text, &len);
        if (r < 0) {
                fprintf(stderr, "topofit bench: %s: %s\n", o->trace, strerror(-r));
                return r;
        }
        r = bench_trace_parse(o->format, text, len, &o->conv, t, &err);
        if (r < 0) {
                if (err.line)
                        fprintf(stderr, "topofit bench: %s:%u: %s\n", o->trace, err.line, err.msg);
                else
                        fprintf(stderr, "topofit bench: %s: %s\n", o->trace, err.msg);
        }
        return r;
}

static int
run_gnuplot(const char *dir, const char *script)
{
        char *argv[] = { (char *)"gnuplot", (char *)script, NULL };
        posix_spawn_file_actions_t fa;
        char cwd[PATH_MAX];
        pid_t pid;
        int r, status;

        /* gnuplot reads the CSVs from the current directory: run it inside dir. */
        if (!getcwd(cwd, sizeof(cwd)) || chdir(dir) < 0)
                return -errno;
        posix_spawn_file_actions_init(&fa);
        /* gnuplot warns about empty ranges (a size nobody waited for): keep it in a log. */
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "plots.log",
                                         O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        r = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (chdir(cwd) < 0 && r == 0)
                r = errno;
        if (r != 0)
                return -r;
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPROTO;
}

static int
write_outputs(const char *dir, const struct bench_run *runs, const struct bench_summary *sum,
              size_t n, bool plots)
{
        static const size_t cap = (size_t)1 << 30; /* 1 GiB: a million jobs fit */
        struct buf b;
        int r = 0;

        if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
                fprintf(stderr, "topofit bench: %s: %s\n", dir, strerror(errno));
                return -errno;
        }
        buf_init(&b, cap);
        r = bench_report_summary_csv(sum, n, &b);
        r = r < 0 ? r : write_file(dir, "summary.csv", &b);
        buf_reset(&b);
        r = r < 0 ? r : bench_report_jobs_csv(runs, n, &b);
        r = r < 0 ? r : write_file(dir, "jobs.csv", &b);
        buf_reset(&b);
        r = r < 0 ? r : bench_report_series_csv(runs, n, &b);
        r = r < 0 ? r : write_file(dir, "series.csv", &b);
        buf_reset(&b);
        r = r < 0 ? r : bench_report_cdf_csv(runs, n, &b);
        r = r < 0 ? r : write_file(dir, "cdf.csv", &b);
        buf_reset(&b);
        r = r < 0 ? r : bench_report_gnuplot(sum, n, &b);
        r = r < 0 ? r : write_file(dir, "plots.gp", &b);
        buf_release(&b);
        if (r < 0) {
                fprintf(stderr, "topofit bench: writing %s: %s\n", dir, strerror(-r));
                return r;
        }
        if (plots) {
                r = run_gnuplot(dir, "plots.gp");
                if (r < 0)
                        fprintf(stderr, "topofit bench: gnuplot failed (%s, see %s/plots.log); the "
                                        "CSVs and plots.gp are in %s\n", strerror(-r), dir, dir);
        }
        return 0;
}

static int
cmd_run(struct options *o)
{
        char default_spec[PATH_MAX];
        struct bench_cluster cl = { 0 };
        struct bench_trace trace;
        struct bench_run runs[_BENCH_POLICY_MAX] = { 0 };
        struct bench_summary sum[_BENCH_POLICY_MAX];
        struct buf table;
        size_t n = 0;
        double t0 = monotonic_s();
        bool failed = false;
        int r;

        if (!o->spec) {
                const char *root = getenv("TOPOFIT_SOURCE_ROOT");

                snprintf(default_spec, sizeof(default_spec), "%s/%s",
                         root && root[0] ? root : BENCH_SOURCE_ROOT, BENCH_DEFAULT_SPEC);
                o->spec = default_spec;
        }
        r = load_cluster(o->spec, &cl);
        if (r < 0)
                return 1;
        bench_trace_init(&trace);
        r = load_trace(o, cluster_gpus(&cl), &trace);
        if (r < 0) {
                cluster_release(&cl);
                bench_trace_release(&trace);
                return 1;
        }
        printf("# topofit bench\n\n");
        printf("Cluster %s:", o->spec);
        for (unsigned t = 0; t < cl.n_types; t++)
                printf("%s %u x %s (%u GPUs%s)", t ? "," : "", cl.types[t].count, cl.types[t].name,
                       cl.types[t].topo->n_gpus,
                       bench_topo_is_nvlink_mesh(cl.types[t].topo) ? ", NVLink mesh" : "");
        printf("; %u GPUs.\n", cluster_gpus(&cl));
        if (o->trace)
                printf("Trace %s (%s): %zu jobs, %zu rows skipped.\n\n", o->trace,
                       bench_trace_format_to_string(o->format), trace.n, trace.n_skipped);
        else
                printf("Synthetic trace: %u jobs, seed %llu, offered load %.2f.\n\n", o->gen.n_jobs,
                       (unsigned long long)o->gen.seed, o->gen.load);
        fflush(stdout);

        for (int p = 0; p < _BENCH_POLICY_MAX; p++) {
                if (!o->policies[p])
                        continue;
                r = bench_simulate(&cl, &trace, (enum bench_policy)p, monotonic_s, &runs[n]);
                if (r < 0) {
                        fprintf(stderr, "topofit bench: policy %s: %s\n",
                                bench_policy_to_string((enum bench_policy)p), strerror(-r));
                        failed = true;
                        continue;
                }
                r = bench_summarize(&runs[n], &sum[n]);
                if (r < 0) {
                        bench_run_release(&runs[n]);
                        failed = true;
                        continue;
                }
                n++;
        }
        buf_init(&table, 1u << 20);
        r = bench_report_markdown(sum, n, &table);
        if (r >= 0)
                fputs(table.data ? table.data : "", stdout);
        buf_release(&table);
        if (n > 0 && runs[0].n_rejected)
                printf("\n%u jobs larger than every node were not run.\n", runs[0].n_rejected);
        for (size_t i = 0; i < n; i++)
                if (runs[i].n_unplaced)
                        printf("\nWARNING: %s left %u jobs queued on an idle cluster.\n",
                               bench_policy_to_string(runs[i].policy), runs[i].n_unplaced);
        printf("\nSimulated in %.1f s.\n", monotonic_s() - t0);
        if (o->out && write_outputs(o->out, runs, sum, n, o->plots) < 0)
                failed = true;
        for (size_t i = 0; i < n; i++)
                bench_run_release(&runs[i]);
        bench_trace_release(&trace);
        cluster_release(&cl);
        return failed || n == 0 ? 1 : 0;
}

static int
cmd_convert_or_generate(struct options *o, bool convert, int argc, char **argv)
{
        struct bench_trace trace;
        struct buf out;
        int r;

        if (convert) {
                if (optind != argc - 1) {
                        fprintf(stderr, "topofit bench convert: expected one trace file\n");
                        return 2;
                }
                o->trace = argv[optind];
        } else if (optind != argc) {
                fprintf(stderr, "topofit bench generate: unexpected argument '%s'\n", argv[optind]);
                return 2;
        }
        bench_trace_init(&trace);
        r = load_trace(o, 0, &trace);
        if (r < 0) {
                bench_trace_release(&trace);
                return 1;
        }
        if (convert)
                fprintf(stderr, "topofit bench convert: %zu jobs, %zu rows skipped\n", trace.n,
                        trace.n_skipped);
        buf_init(&out, (size_t)1 << 30);
        r = bench_trace_write_csv(&trace, &out);
        if (r >= 0 && out.len)
                fwrite(out.data, 1, out.len, stdout);
        buf_release(&out);
        bench_trace_release(&trace);
        return r < 0 ? 1 : 0;
}

/* --- peer-besteffort: NVIDIA's go-gpuallocator against k8s-besteffort ------------------ */

/* Runs the peer with `in` on its stdin (through an unlinked temporary file, so a large input
 * cannot dead-lock against its output) and reads its stdout into *out, capped. */
static int
run_peer(const char *peer, const struct buf *in, struct buf *out)
{
        char *argv[] = { (char *)peer, NULL };
        char tmpl[PATH_MAX];
        const char *tmpdir = getenv("TMPDIR");
        posix_spawn_file_actions_t fa;
        int fd, pipefd[2], r, status;
        pid_t pid;
        char chunk[16384];
        ssize_t n;

        snprintf(tmpl, sizeof(tmpl), "%s/topofit-peer-XXXXXX",
                 tmpdir && tmpdir[0] ? tmpdir : "/tmp");
        fd = mkostemp(tmpl, O_CLOEXEC);
        if (fd < 0)
                return -errno;
        unlink(tmpl);
        if ((in->len && write(fd, in->data, in->len) != (ssize_t)in->len) ||
            lseek(fd, 0, SEEK_SET) < 0) {
                close(fd);
                return -EIO;
        }
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fd, STDIN_FILENO);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
        r = -posix_spawn(&pid, peer, &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(fd);
        close(pipefd[1]);
        if (r < 0) {
                close(pipefd[0]);
                return r;
        }
        while ((n = read(pipefd[0], chunk, sizeof(chunk))) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 || (r == 0 && buf_append(out, chunk, (size_t)n) < 0))
                        r = n < 0 ? -errno : -E2BIG; /* keep reading so the peer can exit */
        }
        close(pipefd[0]);
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        if (r == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
                r = -EPROTO;
        return r;
}

struct peer_run {
        const char *peer;
        struct buf in, out, diffs;
        struct bench_peer_result total;
        unsigned compared, skipped;
        bool failed;
};

/* Compares one topology and prints its "topology" line and its differences, or why not. */
static void
peer_one(struct peer_run *pr, const char *name, const struct topo *t)
{
        struct bench_peer_result res;
        const char *why = NULL;
        int r;

        if (t->n_gpus > BENCH_PEER_MAX_GPUS || t->n_gpus == 0) {
                printf("skip %s: %u GPUs (compared: 1..%u)\n", name, t->n_gpus,
                       BENCH_PEER_MAX_GPUS);
                pr->skipped++;
                return;
        }
        buf_reset(&pr->in);
        buf_reset(&pr->out);
        buf_reset(&pr->diffs);
        r = bench_peer_encode(t, &pr->in);
        r = r < 0 ? r : run_peer(pr->peer, &pr->in, &pr->out);
        if (r < 0)
                why = strerror(-r);
        else
                r = bench_peer_compare(t, name, pr->out.data ? pr->out.data : "", pr->out.len,
                                       &pr->diffs, &res, &why);
        if (r < 0) {
                printf("error %s: %s\n", name, why ? why : strerror(-r));
                pr->failed = true;
                return;
        }
        printf("topology %s: %u GPUs, %u queries, %u agree, %u differ, %u padded\n", name,
               t->n_gpus, res.queries, res.agree, res.differ, res.padded);
        if (pr->diffs.len)
                fwrite(pr->diffs.data, 1, pr->diffs.len, stdout);
        fflush(stdout);
        pr->compared++;
        pr->total.queries += res.queries;
        pr->total.agree += res.agree;
        pr->total.differ += res.differ;
        pr->total.padded += res.padded;
        pr->failed = pr->failed || res.differ > 0;
}

/* `topofit bench peer-besteffort --peer PATH [--random N [--seed S]] [TOPOLOGY...]`: every
 * free mask and every size on each topology of at most BENCH_PEER_MAX_GPUS GPUs (and on N
 * random matrices), k8s-besteffort against the peer.  Prints one "topology" line per
 * topology, every difference, and the agreement; exit 1 when a choice differs or a topology
 * cannot be compared, 0 otherwise ("padded" answers, where NVIDIA's code returns no valid
 * set, are listed and counted but do not fail; files that do not parse are skipped). */
static int
cmd_peer(const struct options *o, int argc, char **argv)
{
        struct peer_run pr = { .peer = o->peer };

        if (!o->peer || (optind >= argc && o->peer_random == 0)) {
                fprintf(stderr, "topofit bench peer-besteffort: expected --peer PATH and topology "
                                "files or --random N\n");
                return 2;
        }
        buf_init(&pr.in, 1u << 20);
        buf_init(&pr.out, BENCH_PEER_MAX_OUTPUT);
        buf_init(&pr.diffs, BENCH_PEER_MAX_OUTPUT);
        printf("# k8s-besteffort against NVIDIA go-gpuallocator's BestEffortPolicy\n\n"
               "Peer %s; every free mask, every size up to the free count.\n\n", o->peer);
        for (int a = optind; a < argc; a++) {
                CLEANUP(topo_unrefp) struct topo *t = NULL;
                const char *slash = strrchr(argv[a], '/'), *name = slash ? slash + 1 : argv[a];
                char msg[sizeof(((struct topo_error *)NULL)->msg) + 64];
                int r;

                r = load_topology(argv[a], NULL, &t, msg, sizeof(msg));
                if (r == -EINVAL || r == -EBADMSG) {
                        /* A capture cut off inside the matrix (the PARTIAL files) is no node. */
                        printf("skip %s: does not parse: %s\n", name, msg);
                        pr.skipped++;
                        continue;
                }
                if (r < 0) {
                        printf("error %s: %s\n", name, msg);
                        pr.failed = true;
                        continue;
                }
                peer_one(&pr, name, t);
        }
        for (unsigned i = 0; i < o->peer_random; i++) {
                CLEANUP(topo_unrefp) struct topo *t = NULL;
                char name[64];

                if (bench_peer_random_topo(o->gen.seed, i, &t) < 0) {
                        pr.failed = true;
                        break;
                }
                snprintf(name, sizeof(name), "random-%llu-%u", (unsigned long long)o->gen.seed, i);
                peer_one(&pr, name, t);
        }
        printf("\nagreement: %u of %u choices (%.2f%%) on %u topologies (%u skipped); %u differ; "
               "%u padded (NVIDIA's code returns a padding slot, no valid set)\n",
               pr.total.agree, pr.total.queries,
               pr.total.queries ? 100.0 * pr.total.agree / pr.total.queries : 0.0, pr.compared,
               pr.skipped, pr.total.differ, pr.total.padded);
        buf_release(&pr.in);
        buf_release(&pr.out);
        buf_release(&pr.diffs);
        return pr.failed ? 1 : 0;
}

/* --- gang: the multi-node scenario (bench-gang.c) ------------------------------------ */

#define BENCH_GANG_TRAY "test/data/topologies/gb200-tray-4gpu-8nic-gpu-numa-id.txt"
#define BENCH_GANG_HGX "test/data/topologies/hgx-h100-13nic-mlx5ib-eth-penny.txt"

/* `topofit bench gang [--seed N] [--jobs N] [--load X] [--policies LIST] [--out DIR]
 * [--no-plots]`: NVL72-style domains of GB200 trays and HGX H100 nodes under leaves, each
 * gang policy asked for; prints the tables and, with --out, writes gang-summary.csv,
 * gang-cdf.csv, gang-plots.gp and (gnuplot) the gang-*.svg charts. */
static int
cmd_gang(struct options *o, int argc, char **argv)
{
        const char *root = getenv("TOPOFIT_SOURCE_ROOT");
        struct bench_gang_summary sum[_BENCH_GANG_POLICY_MAX];
        double *wait[_BENCH_GANG_POLICY_MAX] = { 0 };
        struct bench_gang_config cfg;
        struct bench_gang_cluster cl = { 0 };
        struct bench_gang_job *jobs = NULL;
        struct topo *tray = NULL, *hgx = NULL;
        char path[PATH_MAX], msg[256];
        size_t n_jobs = 0, n_sum = 0;
        struct buf table;
        int r, rc = 1;

        if (optind != argc) {
                fprintf(stderr, "topofit bench gang: unexpected argument '%s'\n", argv[optind]);
                return 2;
        }
        bench_gang_config_default(&cfg);
        if (o->gen_seed_set)
                cfg.seed = o->gen.seed;
        if (o->gen_jobs_set)
                cfg.n_jobs = o->gen.n_jobs;
        if (o->gen_load_set)
                cfg.load = o->gen.load;
        root = root && root[0] ? root : BENCH_SOURCE_ROOT;
        snprintf(path, sizeof(path), "%s/%s", root, BENCH_GANG_TRAY);
        if (load_topology(path, NULL, &tray, msg, sizeof(msg)) < 0) {
                fprintf(stderr, "topofit bench gang: %s: %s\n", path, msg);
                goto out;
        }
        snprintf(path, sizeof(path), "%s/%s", root, BENCH_GANG_HGX);
        if (load_topology(path, NULL, &hgx, msg, sizeof(msg)) < 0) {
                fprintf(stderr, "topofit bench gang: %s: %s\n", path, msg);
                goto out;
        }
        cl.tray_cls = score_class_new(tray, NULL);
        cl.hgx_cls = score_class_new(hgx, NULL);
        if (!cl.tray_cls || !cl.hgx_cls || bench_gang_generate(&cfg, &jobs, &n_jobs) < 0) {
                fprintf(stderr, "topofit bench gang: out of memory or bad configuration\n");
                goto out;
        }
        printf("# topofit bench gang\n\n%u NVLink domains x %u GB200 trays (4 GPUs), %u leaves x "
               "%u HGX H100 nodes (8 GPUs); %zu jobs, seed %llu, load %.2f, %.0f%% gangs of 2-18 "
               "pods\n\n", cfg.n_domains, cfg.trays_per_domain, cfg.n_leaves, cfg.nodes_per_leaf,
               n_jobs, (unsigned long long)cfg.seed, cfg.load, 100 * cfg.gang_share);
        for (int p = 0; p < _BENCH_GANG_POLICY_MAX; p++) {
                if (!o->gang_policies[p])
                        continue;
                wait[n_sum] = calloc(n_jobs, sizeof(*wait[n_sum]));
                if (!wait[n_sum]) {
                        fprintf(stderr, "topofit bench gang: out of memory\n");
                        goto out;
                }
                r = bench_gang_simulate(&cl, &cfg, jobs, n_jobs, (enum bench_gang_policy)p,
                                        &sum[n_sum], wait[n_sum]);
                if (r < 0) {
                        fprintf(stderr, "topofit bench gang: %s: %s\n",
                                bench_gang_policy_to_string((enum bench_gang_policy)p), strerror(-r));
                        n_sum++;
                        goto out;
                }
                n_sum++;
        }
        buf_init(&table, (size_t)1 << 28);
        r = bench_gang_report_markdown(sum, n_sum, &table);
        if (r >= 0)
                fwrite(table.data, 1, table.len, stdout);
        if (r >= 0 && o->out) {
                if (mkdir(o->out, 0755) < 0 && errno != EEXIST)
                        r = -errno;
                buf_reset(&table);
                r = r < 0 ? r : bench_gang_report_csv(sum, n_sum, &table);
                r = r < 0 ? r : write_file(o->out, "gang-summary.csv", &table);
                buf_reset(&table);
                r = r < 0 ? r : bench_gang_report_cdf_csv(sum, n_sum, jobs, n_jobs, wait, &table);
                r = r < 0 ? r : write_file(o->out, "gang-cdf.csv", &table);
                buf_reset(&table);
                r = r < 0 ? r : bench_gang_report_gnuplot(sum, n_sum, &table);
                r = r < 0 ? r : write_file(o->out, "gang-plots.gp", &table);
        }
        buf_release(&table);
        if (r < 0) {
                fprintf(stderr, "topofit bench gang: %s\n", strerror(-r));
                goto out;
        }
        if (o->out && o->plots && run_gnuplot(o->out, "gang-plots.gp") < 0)
                fprintf(stderr, "topofit bench gang: gnuplot failed (see %s/plots.log); the CSVs "
                                "and gang-plots.gp are in %s\n", o->out, o->out);
        rc = 0;
out:
        for (size_t i = 0; i < n_sum; i++)
                free(wait[i]);
        free(jobs);
        score_class_unref(cl.tray_cls);
        score_class_unref(cl.hgx_cls);
        topo_unref(tray);
        topo_unref(hgx);
        return rc;
}

int
bench_main(int argc, char **argv)
{
        struct options o = { .format = BENCH_TRACE_CSV, .plots = true };
        const char *cmd = "run";
        int r;

        bench_gen_config_default(&o.gen);
        bench_convert_opts_default(&o.conv);
        for (int p = 0; p < _BENCH_POLICY_MAX; p++)
                o.policies[p] = true;
        for (int p = 0; p < _BENCH_GANG_POLICY_MAX; p++)
                o.gang_policies[p] = true;
        if (argc > 1 && argv[1][0] != '-') {
                cmd = argv[1];
                argc--;
                argv++;
        }
        o.gang = strcmp(cmd, "gang") == 0;
        r = parse_options(argc, argv, &o);
        if (r != 0)
                return r > 0 ? 0 : 2;
        if (strcmp(cmd, "run") == 0) {
                if (optind != argc) {
                        fprintf(stderr, "topofit bench: unexpected argument '%s'\n", argv[optind]);
                        return 2;
                }
                return cmd_run(&o);
        }
        if (strcmp(cmd, "peer-besteffort") == 0)
                return cmd_peer(&o, argc, argv);
        if (strcmp(cmd, "gang") == 0)
                return cmd_gang(&o, argc, argv);
        if (strcmp(cmd, "convert") == 0 || strcmp(cmd, "generate") == 0)
                return cmd_convert_or_generate(&o, cmd[0] == 'c', argc, argv);
        fprintf(stderr, "topofit bench: unknown command '%s'\n", cmd);
        usage(stderr);
        return 2;
}
