/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench: the offline placement simulator behind `topofit bench`.  Replays a job trace on a
 * cluster of real node topologies under several placement policies and measures what the
 * placement costs in modeled bus bandwidth, queueing and fragmentation.
 *
 * Layers, each usable alone: trace formats (our CSV and converters for public traces), a
 * seeded synthetic generator, a cluster spec parser, GPU pickers (first free, the NVIDIA
 * device plugin's pair-score best effort, exhaustive), the event-driven simulator, and the
 * report.  The simulator core is pure: time, seeds and the clock used for decisions per
 * second are parameters; file and process I/O live in bench-main.c only.  docs/benchmark.md
 * documents the formats, the policies and the time model.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../common/buf.h"
#include "../scoring/score.h"

#define BENCH_MAX_TRACE_BYTES (256u << 20) /* any trace file, before parsing */
#define BENCH_MAX_SPEC_BYTES (64u << 10)   /* cluster spec file */
#define BENCH_MAX_LINE 4096                /* one CSV row or spec line */
#define BENCH_MAX_JOBS 2000000             /* jobs in one trace */
#define BENCH_MAX_NODE_TYPES 32            /* lines in a cluster spec */
#define BENCH_MAX_NODES 20000              /* nodes in a cluster */
#define BENCH_MAX_NAME 64                  /* node type names (NUL included) */
#define BENCH_MAX_PATH 512                 /* topology paths in a spec (NUL included) */
#define BENCH_MAX_DURATION_S (365.0 * 86400) /* one job's duration */
#define BENCH_PARTITION_MAX_VISITS 4000000 /* pair-score picker: partitions per decision */
#define BENCH_EXHAUSTIVE_MAX_SETS 200000   /* exhaustive search: candidate sets per decision */
#define BENCH_MEMO_BITS 16                 /* per-policy decision memo: 2^bits slots */
#define BENCH_MAX_SERIES 400000            /* allocation-over-time samples kept */
#define BENCH_BIG_JOB 8                    /* fragmentation: GPUs of the job a node must host */
#define BENCH_SERIES_POINTS 600            /* series.csv: samples per policy, about */
#define BENCH_CDF_STEP 0.002               /* cdf.csv: smallest fraction step kept */

/* Where a parser stopped: 1-based line (0 when not applicable) and a sentence. */
struct bench_error {
        unsigned line;
        char msg[240];
};

/* --- jobs and traces ----------------------------------------------------------------- */

struct bench_job {
        double arrival;  /* seconds from the trace's start, >= 0 */
        double duration; /* seconds of run time at ideal placement, > 0 */
        unsigned gpus;   /* GPUs on one node, >= 1 */
        double comm;     /* fraction of step time spent in all-reduce, 0..1 */
};

/* A caller-owned list of jobs: bench_trace_init()/bench_trace_release(). */
struct bench_trace {
        struct bench_job *jobs;
        size_t n;
        size_t alloc;
        size_t n_skipped; /* converter rows that are not GPU jobs (documented per format) */
        size_t max_jobs;  /* 0: BENCH_MAX_JOBS; a caller may set less after bench_trace_init() */
};

void bench_trace_init(struct bench_trace *t);
void bench_trace_release(struct bench_trace *t);
/* Appends a copy of *j; -E2BIG past the trace's cap (max_jobs, at most BENCH_MAX_JOBS),
 * -ENOMEM. */
int bench_trace_add(struct bench_trace *t, const struct bench_job *j);
/* Sorts by arrival (stable: equal arrivals keep their order) and shifts arrivals so the
 * first is 0.  Converters call it; the CSV parser requires sorted input instead. */
void bench_trace_normalize(struct bench_trace *t);

enum bench_trace_format {
        BENCH_TRACE_CSV,        /* ours: arrival_s,duration_s,gpus,comm_fraction */
        BENCH_TRACE_PAI2020,    /* Alibaba cluster-trace-gpu-v2020 pai_task_table.csv */
        BENCH_TRACE_OPENB2023,  /* Alibaba cluster-trace-gpu-v2023 openb_pod_list*.csv */
        BENCH_TRACE_PHILLY,     /* Microsoft Philly cluster_job_log (JSON) */
        _BENCH_TRACE_MAX,
        _BENCH_TRACE_INVALID = -EINVAL,
};
const char *bench_trace_format_to_string(enum bench_trace_format f);
enum bench_trace_format bench_trace_format_from_string(const char *s);

/* What converters assume where the public traces say nothing. */
struct bench_convert_opts {
        double comm;        /* communication fraction given to multi-GPU jobs (1-GPU: 0) */
        unsigned max_gpus;  /* jobs asking more GPUs than this are skipped (counted) */
};
void bench_convert_opts_default(struct bench_convert_opts *o);

/* Parses text[0..len) in format f and appends the jobs to *t (converters then normalize).
 * Returns the number of jobs appended, or -EINVAL (malformed input: err->line names the
 * 1-based line, err->msg says what is wrong), -E2BIG (over a cap), -ENOMEM.  On failure *t
 * keeps what it held before the call. */
int bench_trace_parse(enum bench_trace_format f, const char *text, size_t len,
                      const struct bench_convert_opts *opts, struct bench_trace *t,
                      struct bench_error *err);

/* Writes *t in our CSV format, header included. */
int bench_trace_write_csv(const struct bench_trace *t, struct buf *out);

/* --- synthetic generator ------------------------------------------------------------- */

#define BENCH_GEN_MAX_SIZES 8

/* Defaults (bench_gen_config_default) follow the published size mixes of the Philly,
 * Helios and PAI studies: most jobs ask for 1 GPU; multi-GPU jobs mostly for 2, 4 or 8.
 * Durations are log-normal (heavy tail), arrivals Poisson at the rate that offers `load`
 * of the cluster's GPU-seconds. */
struct bench_gen_config {
        uint64_t seed;
        unsigned n_jobs;
        unsigned cluster_gpus;    /* sets the arrival rate with load */
        double load;              /* offered load, fraction of cluster GPU time, > 0 */
        unsigned n_sizes;
        unsigned size_of[BENCH_GEN_MAX_SIZES];
        double weight_of[BENCH_GEN_MAX_SIZES];
        double duration_median_s; /* log-normal median */
        double duration_sigma;    /* log-normal sigma */
        double duration_min_s;
        double duration_max_s;
        double comm_min;          /* multi-GPU jobs: comm fraction uniform in [min, max] */
        double comm_max;
};
void bench_gen_config_default(struct bench_gen_config *c);

/* Appends cfg->n_jobs jobs to *t; the same config always gives the same jobs.  -EINVAL for a
 * bad config (no sizes, weights not positive, load <= 0, ...), -E2BIG, -ENOMEM. */
int bench_generate(const struct bench_gen_config *cfg, struct bench_trace *t);

/* --- cluster spec ------------------------------------------------------------------------ */

/* One spec line: "<type-name> <count> <topology-path> [gpu-model]" ('#' starts a comment,
 * blank lines are ignored).  The optional GPU model (the rest of the line, e.g. "Tesla
 * V100-SXM2-16GB") is applied to GPUs whose model the topology file does not name, which
 * sets their NVLink generation and PCIe speed in the scoring model. */
struct bench_spec_line {
        char name[BENCH_MAX_NAME];
        unsigned count;
        char path[BENCH_MAX_PATH]; /* as written; relative paths are the caller's business */
        char model[TOPO_ID_MAX];   /* "" when not given */
};

struct bench_spec {
        unsigned n;
        struct bench_spec_line lines[BENCH_MAX_NODE_TYPES];
};

/* Parses a cluster spec.  0, or -EINVAL with err (line and reason), -E2BIG over a cap. */
int bench_spec_parse(const char *text, size_t len, struct bench_spec *ret, struct bench_error *err);

/* --- GPU pickers (pure; no allocation; write into caller storage) ---------------------- */

/* The links NVML reports between two GPUs as go-gpuallocator records them
 * (internal/links P2PLinkType: same order, same values), the input of its pair score. */
enum bench_p2p {
        BENCH_P2P_UNKNOWN,       /* left out of Device.Links */
        BENCH_P2P_CROSS_CPU,     /* SYS: 10 points */
        BENCH_P2P_SAME_CPU,      /* NODE: 20 */
        BENCH_P2P_HOST_BRIDGE,   /* PHB: 30 */
        BENCH_P2P_MULTI_SWITCH,  /* PXB: 40 */
        BENCH_P2P_SINGLE_SWITCH, /* PIX: 50 */
        BENCH_P2P_SAME_BOARD,    /* NVML's TOPOLOGY_INTERNAL: 60; no matrix shows it */
        BENCH_P2P_NVLINK1,       /* n NVLinks to the peer: BENCH_P2P_NVLINK1 + n - 1, 100 n */
        BENCH_P2P_NVLINK18 = BENCH_P2P_NVLINK1 + 17,
        _BENCH_P2P_MAX,
        _BENCH_P2P_INVALID = -EINVAL,
};
/* go-gpuallocator's name ("P2PLinkSameCPU", "TwoNVLINKLinks"); NULL out of range. */
const char *bench_p2p_to_string(enum bench_p2p l);

/* What NVML would report between GPUs i and j, writing up to 2 into ret and returning how
 * many: the PCIe relation (PIX single switch, PXB and rocm-smi PCIE multiple switches, PHB,
 * NODE same CPU, SYS cross CPU; N/A none), then for NVLink/XGMI pairs the link count.  Two
 * things the matrix does not say are inferred: an NVLink pair's PCIe relation is hidden
 * behind NV#, so it is read from NUMA (same known node: SameCPU, else CrossCPU); and on an
 * NVSwitch node (t->nvswitch) NVML names the switch as each link's remote end, so
 * go-gpuallocator's GetNVLink counts no NVLink between GPUs and none is reported.  XGMI
 * links count as NVLinks (NVIDIA's code never sees AMD GPUs: our extension). */
unsigned bench_p2p_links(const struct topo *t, unsigned i, unsigned j, enum bench_p2p ret[2]);

/* Pair score of the NVIDIA device plugin's best-effort policy: the sum over
 * bench_p2p_links() of go-gpuallocator's points (100 per NVLink; PIX 50, PXB 40, PHB 30,
 * NODE 20, SYS 10). */
unsigned bench_pair_score(const struct topo *t, unsigned i, unsigned j);

/* The first `count` free GPUs by index (the device plugin without topology).
 * 0 and *ret, or -ENOSPC. */
int bench_pick_first(const struct topo *t, const struct topo_mask *free, unsigned count,
                     struct topo_mask *ret);

/* The device plugin's best-effort picker (go-gpuallocator's BestEffortPolicy): pad the free
 * GPUs to a multiple of count, find the partition into sets of `count` with the highest sum
 * of set scores (set score = sum of its pair scores; the padding all in one set, as
 * iterateGPUPartitions requires), then return that partition's highest scoring full set
 * (go-gpuallocator v0.6.0 may return the padded set there; bench peer-besteffort counts
 * those answers as "padded").  Ties keep the first found in enumeration order (sets anchored at the
 * lowest remaining GPU, completed in ascending combinations).  Stops after
 * BENCH_PARTITION_MAX_VISITS partitions with the best so far.  0 and *ret, or -ENOSPC. */
int bench_pick_pairscore(const struct topo *t, const struct topo_mask *free, unsigned count,
                         struct topo_mask *ret);

/* Exhaustive search: the free set of `count` GPUs with the highest modeled bus bandwidth
 * (score_evaluate), ties to fewer NUMA nodes, then the first in ascending combination
 * order.  0, *ret and *ret_gbps; -ENOSPC; -E2BIG when C(free, count) exceeds
 * BENCH_EXHAUSTIVE_MAX_SETS. */
int bench_pick_exhaustive(const struct score_class *c, const struct topo_mask *free,
                          unsigned count, struct topo_mask *ret, double *ret_gbps);

/* --- NVIDIA's go-gpuallocator as a peer of k8s-besteffort (bench-peer.c) --------------- */

#define BENCH_PEER_MAX_GPUS 8                /* topologies compared: every mask, every size */
#define BENCH_PEER_MAX_OUTPUT (4u << 20)     /* the peer's answers for one topology */


/* Appends the peer's input for t to out: "gpus N", one "link I J TYPES" line per pair with
 * links (bench_p2p_links()), then "query FREE SIZE" for every non-empty free mask (ascending)
 * and every size from 1 to its count.  Returns the number of queries; -E2BIG when t has no
 * GPUs or more than BENCH_PEER_MAX_GPUS; -ENOMEM/-E2BIG from the buffer. */
int bench_peer_encode(const struct topo *t, struct buf *out);

struct bench_peer_result {
        unsigned queries; /* answers compared */
        unsigned agree;   /* same set */
        unsigned differ;  /* both gave a set of the size asked, not the same one */
        unsigned padded;  /* the peer returned padding (nil devices): no valid set */
};

/* Compares the peer's answers (one "pick I,J,..." line per query of bench_peer_encode(t),
 * "nil" for a padding slot) with bench_pick_pairscore(), and appends one line per query
 * that does not agree to diffs: "diff|padded NAME free {..} size K: ours {..}, theirs {..}".
 * 0 and *ret; -EBADMSG with *ret_why (a static sentence) when the answers do not parse or
 * their number is wrong; -E2BIG as bench_peer_encode; -ENOMEM/-E2BIG from the buffer. */
int bench_peer_compare(const struct topo *t, const char *name, const char *answers, size_t len,
                       struct buf *diffs, struct bench_peer_result *ret, const char **ret_why);

/* A random matrix for the peer comparison, stream `index` of `seed`: 5 to 8 GPUs on NUMA
 * node 0 or 1, every pair PIX, PXB, PHB, NODE, SYS, NV1, NV2 or NV4 with equal odds (no
 * NVSwitch).  Real topologies never ask for sets of 3, 5, 6 or 7 with two or more padding
 * slots, nor make a padded set outscore the full ones; these do.  0 and *ret (the caller
 * owns one reference), or -ENOMEM. */
int bench_peer_random_topo(uint64_t seed, unsigned index, struct topo **ret);

/* --- the simulator -------------------------------------------------------------------- */

enum bench_policy {
        BENCH_POLICY_K8S_DEFAULT,        /* least allocated node, first free GPUs */
        BENCH_POLICY_K8S_BESTEFFORT,     /* least allocated node, pair-score picker */
        BENCH_POLICY_BINPACK_BESTEFFORT, /* most allocated node, pair-score picker */
        BENCH_POLICY_TOPOFIT,            /* the extender's decision path (ext-core) */
        BENCH_POLICY_ORACLE,             /* best ratio node by exhaustive search */
        _BENCH_POLICY_MAX,
        _BENCH_POLICY_INVALID = -EINVAL,
};
const char *bench_policy_to_string(enum bench_policy p);
enum bench_policy bench_policy_from_string(const char *s);

/* One node type of a loaded cluster.  The caller owns topo and cls (one reference each). */
struct bench_node_type {
        char name[BENCH_MAX_NAME];
        unsigned count;
        struct topo *topo;
        struct score_class *cls;
};

struct bench_cluster {
        unsigned n_types;
        struct bench_node_type types[BENCH_MAX_NODE_TYPES];
};

/* True for a node whose GPUs are joined by direct NVLink/XGMI links that do not reach every
 * pair (DGX-1 hybrid cube mesh, NVLink bridge pairs): where the set choice matters most. */
bool bench_topo_is_nvlink_mesh(const struct topo *t);

/* What happened to one job. */
struct bench_job_result {
        unsigned job;        /* index in the trace */
        unsigned gpus;
        int node;            /* -1: never placed (larger than every node) */
        unsigned type;       /* node type index */
        struct topo_mask set;
        double arrival, start, finish;
        double busbw_gbps;   /* modeled bus bandwidth of the set (0 for 1 GPU) */
        double ideal_gbps;   /* best for this size on an empty node of this type */
        double best_gbps;    /* best achievable on this node's free GPUs at decision time */
        bool best;           /* busbw within 1e-9 relative of best_gbps */
        bool p2p;            /* every ring hop can use direct peer-to-peer */
        bool mesh;           /* placed on an NVLink-mesh node */
};

/* One sample of the allocation over time (at each event time). */
struct bench_sample {
        double t;
        unsigned allocated; /* GPUs in use */
        unsigned stranded;  /* free GPUs on nodes that cannot host a BENCH_BIG_JOB job now */
        unsigned queued;    /* jobs waiting */
};

/* Decision time for decisions per second: a monotonic clock in seconds supplied by the
 * program (NULL: not measured, decisions_per_s stays 0).  Keeps the core free of clocks. */
typedef double (*bench_clock_fn)(void);

struct bench_run {
        enum bench_policy policy;
        unsigned n_jobs;
        struct bench_job_result *results; /* n_jobs, in trace order */
        struct bench_sample *series;
        size_t n_series;
        size_t series_alloc;
        unsigned cluster_gpus;
        unsigned n_rejected;    /* jobs larger than every node */
        unsigned n_unplaced;    /* jobs still queued when nothing ran or arrived any more
                                 * (a policy that refuses a job that fits): 0 when sound */
        uint64_t decisions;     /* placement attempts, successful or not */
        double decision_s;      /* seconds in placement attempts (clock given) */
        double makespan;        /* last finish - first arrival */
        double alloc_gpu_s;     /* integral of allocated GPUs over [0, makespan] */
        double stranded_gpu_s;  /* integral of stranded free GPUs over [0, makespan] */
        double sat_s;           /* time at saturation: a waiting job fits the free GPUs by count */
        double sat_free_gpu_s;  /* integral of free GPUs over that time */
};

/* Runs the trace on the cluster under policy.  The trace must be sorted by arrival
 * (bench_trace_normalize or our CSV).  Deterministic: ties break by time, then job
 * index, then node index, then GPU index.  0 and *ret (bench_run_release() it), -EINVAL,
 * -ENOMEM, or the policy's error (-ENOTSUP: topofit without its library). */
int bench_simulate(const struct bench_cluster *cl, const struct bench_trace *trace,
                   enum bench_policy policy, bench_clock_fn clock, struct bench_run *ret);
void bench_run_release(struct bench_run *r);

/* The time model: run time at ideal placement stretched by the communication share,
 * duration * (1 + comm * (ideal / achieved - 1)).  achieved <= 0 or ideal <= 0 (1 GPU)
 * leaves the duration as is. */
double bench_stretch(double duration, double comm, double ideal_gbps, double achieved_gbps);

/* --- metrics and report ------------------------------------------------------------- */

#define BENCH_REPORT_SIZES 4 /* queueing delay columns: 1, 2, 4, 8 GPUs */

struct bench_summary {
        enum bench_policy policy;
        unsigned n_multi;          /* placed multi-GPU jobs */
        double best_frac;          /* of them, on their node's best achievable set */
        double ratio_p50, ratio_p10; /* busbw / ideal over multi-GPU jobs */
        unsigned n_unmodeled;      /* multi-GPU jobs whose size has no modeled ideal (0 GB/s) */
        double nop2p_frac;         /* of them, without direct peer-to-peer */
        double mesh_busbw_p50[2];  /* median busbw (GB/s) of 2- and 4-GPU jobs on mesh nodes */
        double mesh_busbw_p10[2];  /* and their 10th percentile */
        unsigned mesh_n[2];
        double qdelay_p50[BENCH_REPORT_SIZES], qdelay_p95[BENCH_REPORT_SIZES];
        unsigned qdelay_n[BENCH_REPORT_SIZES];
        double makespan_h;
        double alloc_mean;         /* time-averaged allocated GPUs / cluster GPUs */
        double stranded_mean;      /* time-averaged stranded free GPUs / cluster GPUs */
        double stranded_sat;       /* at saturation (a job waits that the free GPUs of nodes
                                    * its size fit by count): time-averaged free GPUs /
                                    * cluster GPUs; 0 when never saturated */
        double decisions_per_s;
};

/* Percentile p (0..100) of v[0..n) by linear interpolation; sorts v.  0 when n == 0. */
double bench_percentile(double *v, size_t n, double p);

int bench_summarize(const struct bench_run *r, struct bench_summary *ret);

/* The markdown table of all runs' summaries. */
int bench_report_markdown(const struct bench_summary *s, size_t n, struct buf *out);
/* summary.csv, jobs.csv (per job and policy), series.csv (allocation over time, thinned
 * to about BENCH_SERIES_POINTS samples per policy). */
int bench_report_summary_csv(const struct bench_summary *s, size_t n, struct buf *out);
int bench_report_jobs_csv(const struct bench_run *runs, size_t n, struct buf *out);
int bench_report_series_csv(const struct bench_run *runs, size_t n, struct buf *out);
/* cdf.csv: policy,series,x,fraction rows, the empirical CDFs of queueing delay (minutes)
 * per job size ("qdelay1", ...) and of busbw / ideal for multi-GPU jobs ("ratio"). */
int bench_report_cdf_csv(const struct bench_run *runs, size_t n, struct buf *out);
/* A gnuplot script that turns the CSVs above (in the current directory) into SVG charts. */
int bench_report_gnuplot(const struct bench_summary *s, size_t n, struct buf *out);
/* One bar chart of a summary CSV (one bar per row after the header): the SVG's name
 * without .svg, its title, the column (1-based) and a gnuplot expression on its value v. */
struct bench_bar_chart {
        const char *file, *title;
        unsigned col;
        const char *scale;
};
/* The gnuplot lines, after a script's line charts, that draw each of the n charts from
 * csv: both summaries (the single-node and the gang scenario) are drawn this one way. */
int bench_report_gnuplot_bars(const char *csv, const struct bench_bar_chart *charts, size_t n,
                              struct buf *out);

/* --- multi-node gangs (bench-gang.c; docs/benchmark.md, "Multi-node gangs") ----------- */

enum bench_gang_policy {
        BENCH_GANG_K8S_DEFAULT,    /* each pod: least allocated node, first free GPUs */
        BENCH_GANG_K8S_BESTEFFORT, /* each pod: least allocated node, pair-score picker */
        BENCH_GANG_BINPACK,        /* each pod: most allocated node, pair-score picker */
        BENCH_GANG_RACKPACK,       /* Kueue TAS style: the best-fit domain/leaf, then binpack */
        BENCH_GANG_TOPOFIT,        /* the extender's decision path with the pod's group */
        BENCH_GANG_TOPOFIT_DECIDE, /* the same with --filter-best 1: the extender's node */
        _BENCH_GANG_POLICY_MAX,
        _BENCH_GANG_POLICY_INVALID = -EINVAL,
};
const char *bench_gang_policy_to_string(enum bench_gang_policy p);
enum bench_gang_policy bench_gang_policy_from_string(const char *s);

struct bench_gang_config {
        uint64_t seed;
        unsigned n_jobs;
        double load;               /* offered share of the cluster's GPU time */
        unsigned n_domains;        /* NVL72-style NVLink domains ... */
        unsigned trays_per_domain; /* ... of this many 4-GPU trays */
        unsigned n_leaves;         /* leaf switches ... */
        unsigned nodes_per_leaf;   /* ... of this many 8-GPU HGX nodes */
        double gang_share;         /* share of jobs that are gangs of 2-18 pods */
        double duration_median_s, duration_sigma;
        double comm_single, comm_gang; /* communication share of step time */
};
/* 4 domains x 18 trays, 8 leaves x 8 HGX nodes (800 GPUs), 3,000 jobs at load 0.9, 35%
 * gangs, log-normal durations (median 30 min, sigma 1), comm 0.3 / 0.5. */
void bench_gang_config_default(struct bench_gang_config *c);

struct bench_gang_job {
        double arrival, duration, comm;
        unsigned pods; /* 1: a single-node job */
        unsigned gpus; /* per pod */
};
/* cfg->n_jobs seeded jobs into a new array (*ret, free() it).  -EINVAL, -ENOMEM. */
int bench_gang_generate(const struct bench_gang_config *cfg, struct bench_gang_job **ret,
                        size_t *ret_n);

/* The node types: a 4-GPU tray and an 8-GPU HGX node (borrowed classes). */
struct bench_gang_cluster {
        struct score_class *tray_cls;
        struct score_class *hgx_cls;
};

/* Queueing classes: single-node jobs of 1, 2, 4 and 8 GPUs, gangs of 2-4 pods, of 6-18 pods. */
enum bench_gang_class {
        BENCH_GANG_Q1,
        BENCH_GANG_Q2,
        BENCH_GANG_Q4,
        BENCH_GANG_Q8,
        BENCH_GANG_QGANG_SMALL,
        BENCH_GANG_QGANG_BIG,
        BENCH_GANG_CLASSES,
};
/* The class of a job of pods pods of gpus GPUs each. */
enum bench_gang_class bench_gang_class_of(unsigned pods, unsigned gpus);
/* "1", "2", "4", "8", "gang-small", "gang-big": the class's name in the CSV files. */
const char *bench_gang_class_to_string(enum bench_gang_class c);

struct bench_gang_summary {
        enum bench_gang_policy policy;
        unsigned n_gangs;
        unsigned gangs_could;      /* gangs that one NVLink domain or leaf could hold when placed */
        double gangs_inside;       /* of them, placed inside one */
        unsigned gangs_could_nvl;  /* gangs one NVLink domain could hold when placed */
        double gangs_inside_nvl;   /* of them, placed inside one NVLink domain */
        double slowdown_mean, slowdown_p95; /* gangs: run time / run time at ideal placement */
        double best_frac;          /* multi-GPU pods on their node's best set (exhaustive) */
        double qdelay_p50[BENCH_GANG_CLASSES], qdelay_p95[BENCH_GANG_CLASSES]; /* minutes */
        double stranded_sat;       /* while jobs wait: time-averaged free GPUs / cluster */
        double stranded_sat_fit;   /* the same, counting only free GPUs on nodes large enough
                                    * for a pod of a waiting job the free GPUs could serve */
        double alloc_sat;          /* while jobs wait: time-averaged allocated GPUs / cluster */
        double makespan_h;
        unsigned n_unplaced;
        uint64_t decisions;
};

/* Runs jobs (sorted by arrival) on the cluster cfg describes under policy.  0 and *ret,
 * -EINVAL, -ENOMEM, -EPROTO (a policy handed a GPU out twice).  ret_wait (may be NULL):
 * n_jobs entries, each job's queueing delay in minutes (-1: never placed, or larger than
 * every node). */
int bench_gang_simulate(const struct bench_gang_cluster *cl, const struct bench_gang_config *cfg,
                        const struct bench_gang_job *jobs, size_t n_jobs,
                        enum bench_gang_policy policy, struct bench_gang_summary *ret,
                        double *ret_wait);
int bench_gang_report_markdown(const struct bench_gang_summary *s, size_t n, struct buf *out);
int bench_gang_report_csv(const struct bench_gang_summary *s, size_t n, struct buf *out);
/* gang-cdf.csv: policy,class,minutes,fraction: the queueing delay CDF of each class per
 * policy (wait[i]: n_jobs waits of policy s[i].policy, as bench_gang_simulate wrote them). */
int bench_gang_report_cdf_csv(const struct bench_gang_summary *s, size_t n,
                              const struct bench_gang_job *jobs, size_t n_jobs,
                              double *const *wait, struct buf *out);
/* A gnuplot script that turns gang-summary.csv and gang-cdf.csv (in the current directory)
 * into the gang scenario's SVG charts (gang-*.svg). */
int bench_gang_report_gnuplot(const struct bench_gang_summary *s, size_t n, struct buf *out);

/* The `topofit bench` command line: argv[0] is the command name.  Returns an exit code. */
int bench_main(int argc, char **argv);
