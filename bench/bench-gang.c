/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The multi-node scenario of `topofit bench gang` (docs/benchmark.md, "Multi-node gangs"):
 * NVL72-style NVLink domains of 18 GB200 trays of 4 GPUs and HGX 8-GPU nodes under leaf
 * switches, a seeded trace of single-node jobs and gangs of 2-18 pods, and five policies.
 * A gang starts all or nothing, as kube-scheduler's gang scheduling binds it: its pods are
 * placed one by one and, when one does not fit, those placed are rolled back.  The topofit
 * policy is the extender's decision path as kube-scheduler 1.37's PodGroup cycle drives it:
 * a cluster snapshot with the nodes' domain labels; per pod the scheduler's own GPU count
 * (it assumes the gang's earlier pods on their nodes, counting GPUs, not which), then
 * ext_prioritize over the nodes that pass, with the pod's group, the highest score with
 * ties broken at random; once every pod of the gang has a node, ext_bind for each, which
 * picks the sets (no extender hears of a gang that fails).  Pure: the
 * trace, the cluster and the seed are parameters; no files, no clock.
 */
#include "bench-private.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/str.h"
#include "../extender/ext-core.h"

static const char *const gang_policy_names[_BENCH_GANG_POLICY_MAX] = {
        [BENCH_GANG_K8S_DEFAULT] = "k8s-default",
        [BENCH_GANG_K8S_BESTEFFORT] = "k8s-besteffort",
        [BENCH_GANG_BINPACK] = "binpack-besteffort",
        [BENCH_GANG_RACKPACK] = "rack-packing",
        [BENCH_GANG_TOPOFIT] = "topofit",
        [BENCH_GANG_TOPOFIT_DECIDE] = "topofit-decide",
};

DEFINE_STRING_TABLE(bench_gang_policy, enum bench_gang_policy, gang_policy_names)

static const char *const gang_class_names[BENCH_GANG_CLASSES] = {
        [BENCH_GANG_Q1] = "1",
        [BENCH_GANG_Q2] = "2",
        [BENCH_GANG_Q4] = "4",
        [BENCH_GANG_Q8] = "8",
        [BENCH_GANG_QGANG_SMALL] = "gang-small",
        [BENCH_GANG_QGANG_BIG] = "gang-big",
};

DEFINE_STRING_TABLE_TO_STRING(bench_gang_class, enum bench_gang_class, gang_class_names)

enum bench_gang_class
bench_gang_class_of(unsigned pods, unsigned gpus)
{
        if (pods > 1)
                return pods > 4 ? BENCH_GANG_QGANG_BIG : BENCH_GANG_QGANG_SMALL;
        return gpus >= 8 ? BENCH_GANG_Q8 : gpus >= 4 ? BENCH_GANG_Q4 : gpus >= 2 ? BENCH_GANG_Q2
                                                                                 : BENCH_GANG_Q1;
}

void
bench_gang_config_default(struct bench_gang_config *c)
{
        *c = (struct bench_gang_config){
                .seed = 1,
                .n_jobs = 3000,
                .load = 0.9,
                .n_domains = 4,
                .trays_per_domain = 18,
                .n_leaves = 8,
                .nodes_per_leaf = 8,
                .gang_share = 0.35,
                .duration_median_s = 1800,
                .duration_sigma = 1.0,
                .comm_single = 0.3,
                .comm_gang = 0.5,
        };
}

/* --- the bandwidth model ------------------------------------------------------------ */

/* Per-GPU all-reduce bandwidth between pods (GB/s), docs/benchmark.md "Bandwidth model". */
#define GANG_NVLINK_DOMAIN_GBPS 900.0 /* NVLink 5: 1.8 TB/s per GPU both ways (GB200 NVL72) */
#define GANG_RAIL_GBPS 50.0           /* one 400 Gb/s InfiniBand / RoCE NIC per GPU */
#define GANG_CROSS_LEAF_GBPS 25.0     /* assumed 2:1 oversubscription above the leaf */

/* A gang's run time between its pods at bw GB/s over its run time at ideal GB/s.  Its
 * communication share comm is that of its steps at one rail per GPU (GANG_RAIL_GBPS), the
 * fabric every multi-node placement has; communication time scales with 1 / bandwidth, so
 * an NVLink domain speeds that part up 18 times: time(b) = (1 - comm) + comm x rail / b.
 * (Taking comm at the NVLink domain instead made a gang spilt onto HGX nodes 9.5 times
 * slower, which multiplied the work offered 5-8 times: docs/benchmark.md.) */
static double
fabric_stretch(double comm, double ideal, double bw)
{
        double at_bw = (1 - comm) + comm * GANG_RAIL_GBPS / bw;
        double at_ideal = (1 - comm) + comm * GANG_RAIL_GBPS / ideal;

        return at_bw / at_ideal;
}

/* The bandwidth every policy can give a gang, the fabric all nodes share: one rail per
 * GPU inside a leaf when one leaf's HGX nodes could hold the gang, across leaves else. */
static double
gang_common_gbps(const struct bench_gang_config *cfg, unsigned pods, unsigned gpus)
{
        unsigned per_node = gpus ? 8 / gpus : 0;

        return per_node > 0 && pods <= per_node * cfg->nodes_per_leaf ? GANG_RAIL_GBPS
                                                                       : GANG_CROSS_LEAF_GBPS;
}

/* A gang's ideal bandwidth between its pods: one NVLink domain when its pods fit trays and one
 * domain's size; else one leaf when one leaf's HGX nodes could hold it; else across leaves
 * (the best an empty cluster gives it: a gang of more 8-GPU pods than a leaf has nodes
 * crosses leaves wherever it goes). */
static double
gang_ideal_gbps(const struct bench_gang_config *cfg, unsigned pods, unsigned gpus)
{
        if (gpus <= 4 && pods <= cfg->trays_per_domain)
                return GANG_NVLINK_DOMAIN_GBPS;
        return gang_common_gbps(cfg, pods, gpus);
}

/* --- the seeded trace ---------------------------------------------------------------- */

static uint64_t
rnd(uint64_t *s)
{
        uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));

        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

static double
unit(uint64_t *s)
{
        return (double)(rnd(s) >> 11) * 0x1.0p-53;
}

int
bench_gang_generate(const struct bench_gang_config *cfg, struct bench_gang_job **ret, size_t *ret_n)
{
        static const unsigned single_sizes[] = { 1, 1, 1, 1, 2, 2, 4, 8 };
        static const unsigned gang_pods[] = { 2, 2, 2, 3, 4, 4, 4, 6, 8, 8, 12, 16, 18 };
        uint64_t s = cfg->seed;
        struct bench_gang_job *j;
        double gpu_s = 0, t = 0, rate;
        unsigned cluster_gpus = cfg->n_domains * cfg->trays_per_domain * 4 +
                                cfg->n_leaves * cfg->nodes_per_leaf * 8;

        if (cfg->n_jobs == 0 || cfg->n_jobs > BENCH_MAX_JOBS || !(cfg->load > 0) ||
            cluster_gpus == 0)
                return -EINVAL;
        j = calloc(cfg->n_jobs, sizeof(*j));
        if (!j)
                return -ENOMEM;
        for (unsigned i = 0; i < cfg->n_jobs; i++) {
                double u = 1.0 - unit(&s), v = unit(&s);
                double z = sqrt(-2 * log(u)) * cos(2 * M_PI * v);

                j[i].duration = MIN(MAX(cfg->duration_median_s * exp(cfg->duration_sigma * z), 60.0),
                                    7 * 86400.0);
                if (unit(&s) < cfg->gang_share) {
                        j[i].pods = gang_pods[rnd(&s) % ELEMENTSOF(gang_pods)];
                        /* 4-GPU pods fit a tray or half an HGX node; 8-GPU pods only HGX. */
                        j[i].gpus = unit(&s) < 0.7 ? 4 : 8;
                        j[i].comm = cfg->comm_gang;
                } else {
                        j[i].pods = 1;
                        j[i].gpus = single_sizes[rnd(&s) % ELEMENTSOF(single_sizes)];
                        j[i].comm = j[i].gpus > 1 ? cfg->comm_single : 0;
                }
                /* The work a job offers is its run time on the fabric every policy can
                 * give it (one rail per GPU, or across leaves for gangs larger than a
                 * leaf), not at the NVLink domain that only the trays' share of the GPUs
                 * has: placement inside a domain shortens it. */
                gpu_s += j[i].duration * j[i].pods * j[i].gpus *
                         (j[i].pods > 1 ? fabric_stretch(j[i].comm,
                                                         gang_ideal_gbps(cfg, j[i].pods, j[i].gpus),
                                                         gang_common_gbps(cfg, j[i].pods, j[i].gpus))
                                        : 1);
        }
        /* Poisson arrivals at the rate that offers `load` of the cluster's GPU time. */
        rate = cfg->n_jobs / (gpu_s / (cluster_gpus * cfg->load));
        for (unsigned i = 0; i < cfg->n_jobs; i++) {
                j[i].arrival = t;
                t += -log(1.0 - unit(&s)) / rate;
        }
        *ret = j;
        *ret_n = cfg->n_jobs;
        return 0;
}

/* --- the cluster ---------------------------------------------------------------------- */

struct gnode {
        bool tray;
        int domain;  /* NVLink domain index, -1 for HGX */
        int leaf;    /* leaf switch index, -1 for trays */
        unsigned n_gpus, n_free;
        struct topo_mask free;
        struct score_class *cls;
        const struct topo *topo;
        char name[48];
};

struct gsim {
        const struct bench_gang_cluster *cl;
        const struct bench_gang_config *cfg;
        unsigned n_nodes;
        struct gnode *nodes;
        double now;
        uint64_t generation;
        /* topofit */
        struct ext_config ecfg;
        struct ext_ledger *ledger;
        struct ext_cluster *snap;
        uint64_t snap_gen;
        char *json_tray, *json_hgx;
        const struct ext_node **enodes;
        unsigned *sim_of;  /* snapshot index -> node */
        const struct ext_node **fit;  /* the nodes kube-scheduler's own filter passes ... */
        unsigned *fit_sim;            /* ... and their sim nodes */
        unsigned *assumed;            /* per node: GPUs of the gang in this attempt */
        uint64_t tie_seed;            /* kube-scheduler's pick among equal scores */
        struct ext_verdict *verdicts;
        /* running pods: per job its nodes and sets */
        unsigned *pod_node;          /* job * max_pods + k */
        struct topo_mask *pod_set;
        unsigned max_pods;
        const struct bench_gang_job *jobs;
        unsigned *running;           /* job indices */
        unsigned n_running;
        double *finish;
};

static int
node_type_fits(const struct gnode *n, unsigned gpus)
{
        return n->n_gpus >= gpus;
}

/* --- per-pod placement of the baselines ------------------------------------------------ */

/* least (spread) or most (pack) allocated node among nodes with >= gpus free, restricted to
 * nodes with domain/leaf == want when want >= 0; ties to the lowest index. */
static int
pick_node(const struct gsim *s, unsigned gpus, bool pack, int want_domain, int want_leaf)
{
        int best = -1;

        for (unsigned i = 0; i < s->n_nodes; i++) {
                const struct gnode *n = &s->nodes[i];
                uint64_t lhs, rhs;

                if (n->n_free < gpus || (want_domain >= 0 && n->domain != want_domain) ||
                    (want_leaf >= 0 && n->leaf != want_leaf))
                        continue;
                if (best < 0) {
                        best = (int)i;
                        continue;
                }
                lhs = (uint64_t)(n->n_free - gpus) * s->nodes[best].n_gpus;
                rhs = (uint64_t)(s->nodes[best].n_free - gpus) * n->n_gpus;
                if (pack ? lhs < rhs : lhs > rhs)
                        best = (int)i;
        }
        return best;
}

static int
pick_set(const struct gsim *s, unsigned node, unsigned gpus, bool first, struct topo_mask *ret)
{
        const struct gnode *n = &s->nodes[node];

        return first ? bench_pick_first(n->topo, &n->free, gpus, ret)
                     : bench_pick_pairscore(n->topo, &n->free, gpus, ret);
}

/* Sets of gpus GPUs the nodes of NVLink domain d (or leaf l) can give, pair-score picks. */
static unsigned
group_sets(const struct gsim *s, int d, int l, unsigned gpus)
{
        unsigned sets = 0;

        for (unsigned i = 0; i < s->n_nodes; i++) {
                const struct gnode *n = &s->nodes[i];

                if ((d >= 0 && n->domain == d) || (l >= 0 && n->leaf == l))
                        sets += n->n_free / gpus;
        }
        return sets;
}

/* Kueue TAS style (BestFit): the NVLink domain, else the leaf, with the fewest free GPUs
 * that holds the whole gang; -1/-1 when none does. */
static void
rackpack_domain(const struct gsim *s, const struct bench_gang_job *j, int *ret_d, int *ret_l)
{
        unsigned best_free = UINT32_MAX;

        *ret_d = *ret_l = -1;
        for (unsigned d = 0; j->gpus <= 4 && d < s->cfg->n_domains; d++)
                if (group_sets(s, (int)d, -1, j->gpus) >= j->pods) {
                        unsigned f = 0;

                        for (unsigned i = 0; i < s->n_nodes; i++)
                                f += s->nodes[i].domain == (int)d ? s->nodes[i].n_free : 0;
                        if (f < best_free) {
                                best_free = f;
                                *ret_d = (int)d;
                        }
                }
        if (*ret_d >= 0)
                return;
        for (unsigned l = 0; l < s->cfg->n_leaves; l++)
                if (group_sets(s, -1, (int)l, j->gpus) >= j->pods) {
                        unsigned f = 0;

                        for (unsigned i = 0; i < s->n_nodes; i++)
                                f += s->nodes[i].leaf == (int)l ? s->nodes[i].n_free : 0;
                        if (f < best_free) {
                                best_free = f;
                                *ret_l = (int)l;
                        }
                }
}

static void
take(struct gnode *n, const struct topo_mask *set, bool give_back)
{
        for (unsigned g = 0; g < n->n_gpus; g++)
                if (topo_mask_test(set, g)) {
                        if (give_back)
                                topo_mask_set(&n->free, g);
                        else
                                topo_mask_unset(&n->free, g);
                }
        n->n_free = topo_mask_count(&n->free);
}

/* --- the topofit policy: the extender's decision path -------------------------------- */

static int
topofit_rebuild(struct gsim *s)
{
        CLEANUP(ext_cluster_builder_freep) struct ext_cluster_builder *b = NULL;
        struct ext_cluster *snap = NULL;
        char uid[48], label[48];
        int r;

        b = ext_cluster_builder_new(&s->ecfg, s->snap);
        if (!b)
                return -ENOMEM;
        for (unsigned i = 0; i < s->n_nodes; i++) {
                const struct gnode *n = &s->nodes[i];
                const char *json = n->tray ? s->json_tray : s->json_hgx;

                r = ext_cluster_builder_add_node(b, n->name, json, strlen(json), n->n_gpus, NULL);
                if (r < 0)
                        return r;
                /* The labels GPU Feature Discovery and Topograph set. */
                if (n->tray)
                        snprintf(label, sizeof(label), "cluster-%02d.1", n->domain);
                else
                        snprintf(label, sizeof(label), "leaf-%02d", n->leaf);
                r = ext_cluster_builder_node_label(b, n->tray ? "nvidia.com/gpu.clique"
                                                              : "network.topology.nvidia.com/leaf",
                                                   label);
                if (r < 0)
                        return r;
        }
        for (unsigned k = 0; k < s->n_running; k++) {
                unsigned job = s->running[k];

                for (unsigned p = 0; p < s->jobs[job].pods; p++) {
                        unsigned at = job * s->max_pods + p;

                        snprintf(uid, sizeof(uid), "j%u-p%u", job, p);
                        r = ext_cluster_builder_add_pod(b, uid, "bench", uid,
                                                        s->nodes[s->pod_node[at]].name,
                                                        &s->pod_set[at]);
                        if (r < 0)
                                return r;
                }
        }
        r = ext_cluster_builder_finish(TAKE_PTR(b), s->generation, &snap);
        if (r < 0)
                return r;
        ext_cluster_unref(s->snap);
        s->snap = snap;
        s->snap_gen = s->generation;
        for (size_t k = 0; k < snap->n_nodes; k++) {
                unsigned idx = UINT32_MAX;

                for (unsigned i = 0; i < s->n_nodes && idx == UINT32_MAX; i++)
                        if (strcmp(s->nodes[i].name, snap->nodes[k].name) == 0)
                                idx = i;
                if (idx == UINT32_MAX)
                        return -EPROTO;
                s->enodes[k] = &snap->nodes[k];
                s->sim_of[k] = idx;
        }
        ext_ledger_prune(s->ledger, snap, (uint64_t)(s->now * 1e9));
        return 0;
}

/* One pod through the extender as kube-scheduler drives it: its own filter first (a node
 * fits when its free GPUs, less those it assumed for this gang's pods earlier in the
 * attempt, cover the request: it counts GPUs, not which), then the extender's prioritize
 * over those nodes, then the highest score, ties broken at random (selectHost samples
 * among equal scores), so the node can differ from the extender's own tentative pick.  A
 * single pod binds at once; a gang's pods only once all are placed (topofit_bind_gang),
 * as after the PodGroup cycle: until then only the node is known, not the set. */
static int
topofit_pod(struct gsim *s, unsigned job, unsigned p, unsigned *ret_node, struct topo_mask *ret_set)
{
        const struct bench_gang_job *j = &s->jobs[job];
        struct ext_request req = { .count = j->gpus, .n_containers = 1 };
        uint64_t now = (uint64_t)(s->now * 1e9);
        struct score_choice choice;
        size_t n_fit = 0, ties = 0;
        int best = -1, n, r;

        if (s->snap_gen != s->generation) {
                r = topofit_rebuild(s);
                if (r < 0)
                        return r;
        }
        for (size_t k = 0; k < s->snap->n_nodes; k++) {
                const struct gnode *g = &s->nodes[s->sim_of[k]];

                if (g->n_free >= s->assumed[s->sim_of[k]] + j->gpus) {
                        s->fit[n_fit] = s->enodes[k];
                        s->fit_sim[n_fit++] = s->sim_of[k];
                }
        }
        if (n_fit == 0)
                return -ENOSPC;
        snprintf(req.uid, sizeof(req.uid), "j%u-p%u", job, p);
        snprintf(req.name, sizeof(req.name), "j%u-p%u", job, p);
        snprintf(req.namespace, sizeof(req.namespace), "bench");
        req.containers[0].count = j->gpus;
        if (j->pods > 1) {
                snprintf(req.group.id, sizeof(req.group.id), "topofit/bench/j%u", job);
                req.group.size = j->pods;
                req.group.count = j->gpus;
                req.group.mode = PLACE_DOMAIN_PREFERRED;
        }
        if (s->ecfg.filter_best) {
                /* The deciding filter: kube-scheduler takes the one node it passes (or the
                 * one that fits) without scoring. */
                uint32_t pass[EXT_FILTER_BEST_MAX];
                size_t n_pass;

                n = ext_filter_best_rep(s->snap, s->ledger, &s->ecfg, &req, s->fit, n_fit, now,
                                        s->verdicts, NULL, pass, &n_pass);
                if (n < 0)
                        return n;
                if (n_pass != SIZE_MAX)
                        best = (int)pass[0];
                for (size_t k = 0; n_pass == SIZE_MAX && best < 0 && k < n_fit; k++)
                        if (s->verdicts[k].r == 0)
                                best = (int)k; /* the only one */
                n_fit = 0;                     /* no scoring below */
        } else {
                n = ext_prioritize(s->snap, s->ledger, &s->ecfg, &req, s->fit, n_fit, now,
                                   s->verdicts);
                if (n < 0)
                        return n;
        }
        for (size_t k = 0; k < n_fit; k++) {
                if (s->verdicts[k].r != 0)
                        continue;
                if (best < 0 || s->verdicts[k].priority > s->verdicts[best].priority) {
                        best = (int)k;
                        ties = 1;
                } else if (s->verdicts[k].priority == s->verdicts[best].priority &&
                           rnd(&s->tie_seed) % ++ties == 0)
                        best = (int)k; /* reservoir sampling, as selectHost */
        }
        if (best < 0)
                return -ENOSPC;
        *ret_node = s->fit_sim[best];
        if (j->pods > 1) {
                s->assumed[*ret_node] += j->gpus;
                return 0;
        }
        r = ext_bind(s->snap, s->ledger, &s->ecfg, &req, s->fit[best]->name, now, &choice, NULL);
        if (r < 0)
                return r == -EAGAIN || r == -ENOEXEC || r == -ENOSPC ? -ENOSPC : r;
        /* Bind decides the set on the node the scheduler chose: prioritize's set for it. */
        if (!topo_mask_equal(&choice.set, &s->verdicts[best].choice.set))
                return -EPROTO;
        *ret_set = choice.set;
        return 0;
}

/* Binds a placed gang's pods (the scheduler's binding cycles after the PodGroup cycle let
 * the gang through): bind picks each pod's set on the node the scheduler chose, which the
 * simulator then takes, checking that no GPU is handed out twice.  A bind that fails rolls
 * back the members bound before it (the gang does not run). */
static int
topofit_bind_gang(struct gsim *s, unsigned job)
{
        const struct bench_gang_job *j = &s->jobs[job];
        uint64_t now = (uint64_t)(s->now * 1e9);
        unsigned p;
        int r = 0;

        for (p = 0; p < j->pods; p++) {
                unsigned at = job * s->max_pods + p;
                struct gnode *n = &s->nodes[s->pod_node[at]];
                struct ext_request req = { .count = j->gpus, .n_containers = 1 };
                struct score_choice choice;

                snprintf(req.uid, sizeof(req.uid), "j%u-p%u", job, p);
                snprintf(req.group.id, sizeof(req.group.id), "topofit/bench/j%u", job);
                req.group.size = j->pods;
                req.group.count = j->gpus;
                req.group.mode = PLACE_DOMAIN_PREFERRED;
                req.containers[0].count = j->gpus;
                r = ext_bind(s->snap, s->ledger, &s->ecfg, &req, n->name, now, &choice, NULL);
                if (r < 0)
                        break;
                if (topo_mask_count(&choice.set) != j->gpus)
                        return -EPROTO;
                for (unsigned g = 0; g < n->n_gpus; g++)
                        if (topo_mask_test(&choice.set, g) && !topo_mask_test(&n->free, g))
                                return -EPROTO; /* a GPU handed out twice */
                s->pod_set[at] = choice.set;
                take(n, &choice.set, false);
        }
        if (r == 0)
                return 0;
        while (p-- > 0) {
                unsigned at = job * s->max_pods + p;
                char uid[48];

                snprintf(uid, sizeof(uid), "j%u-p%u", job, p);
                ext_ledger_release(s->ledger, uid);
                take(&s->nodes[s->pod_node[at]], &s->pod_set[at], true);
        }
        return r == -EAGAIN || r == -ENOEXEC || r == -ENOSPC ? -ENOSPC : r;
}

/* --- one gang, all or nothing ----------------------------------------------------------- */

static int
try_job(struct gsim *s, enum bench_gang_policy policy, unsigned job)
{
        const struct bench_gang_job *j = &s->jobs[job];
        bool topofit = policy == BENCH_GANG_TOPOFIT || policy == BENCH_GANG_TOPOFIT_DECIDE;
        bool gang_bound_later = topofit && j->pods > 1;
        int want_d = -1, want_l = -1, r = 0;
        unsigned placed = 0;

        if (policy == BENCH_GANG_RACKPACK && j->pods > 1)
                rackpack_domain(s, j, &want_d, &want_l);
        for (unsigned p = 0; p < j->pods; p++) {
                unsigned at = job * s->max_pods + p, node = 0;
                struct topo_mask set;
                int x;

                switch (policy) {
                case BENCH_GANG_TOPOFIT:
                case BENCH_GANG_TOPOFIT_DECIDE:
                        r = topofit_pod(s, job, p, &node, &set);
                        break;
                default:
                        x = pick_node(s, j->gpus, policy == BENCH_GANG_BINPACK ||
                                                          policy == BENCH_GANG_RACKPACK,
                                      want_d, want_l);
                        if (x < 0 && (want_d >= 0 || want_l >= 0))
                                x = pick_node(s, j->gpus, true, -1, -1);
                        r = x < 0 ? -ENOSPC
                                  : pick_set(s, (unsigned)x, j->gpus,
                                             policy == BENCH_GANG_K8S_DEFAULT, &set);
                        node = (unsigned)MAX(x, 0);
                        break;
                }
                if (r < 0)
                        break;
                s->pod_node[at] = node;
                placed++;
                if (gang_bound_later)
                        continue; /* the set comes with bind (topofit_bind_gang) */
                if (topo_mask_count(&set) != j->gpus)
                        return -EPROTO;
                for (unsigned g = 0; g < s->nodes[node].n_gpus; g++)
                        if (topo_mask_test(&set, g) && !topo_mask_test(&s->nodes[node].free, g))
                                return -EPROTO; /* a GPU handed out twice */
                take(&s->nodes[node], &set, false);
                s->pod_set[at] = set;
        }
        if (gang_bound_later) {
                /* The scheduler forgets what it assumed for the attempt; bind, when the whole
                 * gang was placed, takes the sets. */
                for (unsigned p = 0; p < placed; p++)
                        s->assumed[s->pod_node[job * s->max_pods + p]] = 0;
                return r == 0 ? topofit_bind_gang(s, job) : r;
        }
        if (r == 0)
                return 0;
        /* Roll back: the gang did not reach its quorum.  The extender is not told (no
         * unreserve reaches an extender): its members' picks hold nothing anyway, and the
         * group's hold lapses at its TTL unless the gang tries again. */
        for (unsigned p = 0; p < placed; p++) {
                unsigned at = job * s->max_pods + p;

                take(&s->nodes[s->pod_node[at]], &s->pod_set[at], true);
        }
        return r;
}

/* --- metrics ------------------------------------------------------------------------------ */

static double
between(const struct gsim *s, unsigned a, unsigned b)
{
        const struct gnode *x = &s->nodes[a], *y = &s->nodes[b];

        if (a == b)
                return INFINITY; /* inside the node: the set's own bandwidth rules */
        if (x->tray && y->tray && x->domain == y->domain)
                return GANG_NVLINK_DOMAIN_GBPS;
        if (!x->tray && !y->tray && x->leaf == y->leaf)
                return GANG_RAIL_GBPS;
        return GANG_CROSS_LEAF_GBPS;
}

static int
cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return (x > y) - (x < y);
}

static double
pct(double *v, size_t n, double p)
{
        return bench_percentile(v, n, p);
}

/* Whether a waiting job could use the free GPUs by their count: its pods' GPUs together are
 * at most the free GPUs on the nodes large enough for one of its pods.  Only then are free
 * GPUs stranded (by their shape, or by holds); when every waiting job needs more GPUs than
 * are free, they are idle for want of capacity, which no placement could change.  And of
 * the free GPUs, *ret_fit: those on nodes large enough for a pod of such a job (the trays'
 * free GPUs do not count while only jobs of 8-GPU pods could use the free GPUs: none of
 * them could run there, whatever the placement). */
static bool
servable_waits(const struct gsim *s, const struct bench_gang_job *jobs, const unsigned *queue,
               unsigned nq, unsigned *ret_fit)
{
        unsigned free_by_size[2] = { 0, 0 }; /* on nodes of < 8 GPUs, of >= 8 */
        bool any = false;

        *ret_fit = 0;
        for (unsigned i = 0; i < s->n_nodes; i++)
                free_by_size[s->nodes[i].n_gpus >= 8] += s->nodes[i].n_free;
        for (unsigned q = 0; q < nq; q++) {
                const struct bench_gang_job *j = &jobs[queue[q]];
                bool small = j->gpus <= 4;
                unsigned usable = free_by_size[1] + (small ? free_by_size[0] : 0);

                if ((uint64_t)j->pods * j->gpus > usable)
                        continue;
                any = true;
                *ret_fit = MAX(*ret_fit, usable);
                if (small)
                        break; /* every free GPU counts */
        }
        return any;
}

int
bench_gang_simulate(const struct bench_gang_cluster *cl, const struct bench_gang_config *cfg,
                    const struct bench_gang_job *jobs, size_t n_jobs, enum bench_gang_policy policy,
                    struct bench_gang_summary *ret, double *ret_wait)
{
        struct gsim s = { .cl = cl, .cfg = cfg, .jobs = jobs };
        CLEANUP(freep) unsigned *queue = NULL;
        CLEANUP(freep) double *start = NULL, *stretch = NULL, *gang_stretch = NULL;
        double *qd[BENCH_GANG_CLASSES] = { 0 };
        size_t nqd[BENCH_GANG_CLASSES] = { 0 }, next = 0, n_stretch = 0;
        struct bench_gang_summary sum = { .policy = policy };
        unsigned nq = 0, cluster_gpus = 0, multi = 0, best = 0;
        unsigned could = 0, inside = 0, could_nvl = 0, inside_nvl = 0;
        double sat_t = 0, sat_free = 0, sat_fit = 0, sat_alloc = 0, last_t = 0;
        bool last_sat = false;
        unsigned last_free = 0, last_fit = 0;
        int r = 0;

        if (policy < 0 || policy >= _BENCH_GANG_POLICY_MAX || !cl->tray_cls || !cl->hgx_cls)
                return -EINVAL;
        s.n_nodes = cfg->n_domains * cfg->trays_per_domain + cfg->n_leaves * cfg->nodes_per_leaf;
        if (s.n_nodes == 0 || s.n_nodes > BENCH_MAX_NODES)
                return -EINVAL;
        for (size_t i = 0; i < n_jobs; i++)
                s.max_pods = MAX(s.max_pods, jobs[i].pods);
        if (s.max_pods == 0 || s.max_pods > 64)
                return -EINVAL;
        s.nodes = calloc(s.n_nodes, sizeof(*s.nodes));
        s.pod_node = calloc(n_jobs * s.max_pods, sizeof(*s.pod_node));
        s.pod_set = calloc(n_jobs * s.max_pods, sizeof(*s.pod_set));
        s.running = calloc(MAX(n_jobs, (size_t)1), sizeof(*s.running));
        s.finish = calloc(MAX(n_jobs, (size_t)1), sizeof(*s.finish));
        queue = calloc(MAX(n_jobs, (size_t)1), sizeof(*queue));
        start = calloc(MAX(n_jobs, (size_t)1), sizeof(*start));
        stretch = calloc(MAX(n_jobs, (size_t)1), sizeof(*stretch));
        gang_stretch = calloc(MAX(n_jobs, (size_t)1), sizeof(*gang_stretch));
        for (unsigned c = 0; c < BENCH_GANG_CLASSES; c++)
                qd[c] = calloc(MAX(n_jobs, (size_t)1), sizeof(*qd[c]));
        if (!s.nodes || !s.pod_node || !s.pod_set || !s.running || !s.finish || !queue ||
            !start || !stretch || !gang_stretch) {
                r = -ENOMEM;
                goto out;
        }
        for (unsigned c = 0; c < BENCH_GANG_CLASSES; c++)
                if (!qd[c]) {
                        r = -ENOMEM;
                        goto out;
                }
        for (size_t i = 0; ret_wait && i < n_jobs; i++)
                ret_wait[i] = -1;
        for (unsigned i = 0, k = 0; i < cfg->n_domains * cfg->trays_per_domain; i++, k++) {
                struct gnode *n = &s.nodes[k];

                *n = (struct gnode){ .tray = true, .domain = (int)(i / cfg->trays_per_domain),
                                     .leaf = -1, .cls = cl->tray_cls,
                                     .topo = score_class_topo(cl->tray_cls) };
                snprintf(n->name, sizeof(n->name), "nvl%02d-tray%02u", n->domain,
                         i % cfg->trays_per_domain);
        }
        for (unsigned i = 0; i < cfg->n_leaves * cfg->nodes_per_leaf; i++) {
                struct gnode *n = &s.nodes[cfg->n_domains * cfg->trays_per_domain + i];

                *n = (struct gnode){ .domain = -1, .leaf = (int)(i / cfg->nodes_per_leaf),
                                     .cls = cl->hgx_cls, .topo = score_class_topo(cl->hgx_cls) };
                snprintf(n->name, sizeof(n->name), "leaf%02d-hgx%02u", n->leaf,
                         i % cfg->nodes_per_leaf);
        }
        for (unsigned i = 0; i < s.n_nodes; i++) {
                s.nodes[i].n_gpus = s.nodes[i].n_free = s.nodes[i].topo->n_gpus;
                topo_mask_fill(&s.nodes[i].free, s.nodes[i].n_gpus);
                cluster_gpus += s.nodes[i].n_gpus;
        }
        if (policy == BENCH_GANG_TOPOFIT || policy == BENCH_GANG_TOPOFIT_DECIDE) {
                size_t len;

                ext_config_default(&s.ecfg);
                s.ecfg.filter_best = policy == BENCH_GANG_TOPOFIT_DECIDE;
                s.ledger = ext_ledger_new(&s.ecfg);
                s.enodes = calloc(s.n_nodes, sizeof(*s.enodes));
                s.sim_of = calloc(s.n_nodes, sizeof(*s.sim_of));
                s.fit = calloc(s.n_nodes, sizeof(*s.fit));
                s.fit_sim = calloc(s.n_nodes, sizeof(*s.fit_sim));
                s.assumed = calloc(s.n_nodes, sizeof(*s.assumed));
                s.tie_seed = cfg->seed ^ UINT64_C(0x5ca1ab1e);
                s.verdicts = calloc(s.n_nodes, sizeof(*s.verdicts));
                if (!s.ledger || !s.enodes || !s.sim_of || !s.fit || !s.fit_sim || !s.assumed ||
                    !s.verdicts ||
                    topo_to_annotation(score_class_topo(cl->tray_cls), &s.json_tray, &len) < 0 ||
                    topo_to_annotation(score_class_topo(cl->hgx_cls), &s.json_hgx, &len) < 0) {
                        r = -ENOMEM;
                        goto out;
                }
                s.snap_gen = UINT64_MAX;
        }

        for (;;) {
                double t_next = INFINITY;
                unsigned free_now = 0, kept = 0;

                if (next < n_jobs)
                        t_next = jobs[next].arrival;
                for (unsigned k = 0; k < s.n_running; k++)
                        t_next = MIN(t_next, s.finish[s.running[k]]);
                if (t_next == INFINITY)
                        break;
                /* Time at saturation (jobs waiting): free GPUs are stranded, the rest used. */
                if (last_sat) {
                        sat_t += t_next - last_t;
                        sat_free += last_free * (t_next - last_t);
                        sat_fit += last_fit * (t_next - last_t);
                        sat_alloc += (cluster_gpus - last_free) * (t_next - last_t);
                }
                s.now = t_next;
                for (unsigned k = 0; k < s.n_running;) {
                        unsigned job = s.running[k];

                        if (s.finish[job] > s.now) {
                                k++;
                                continue;
                        }
                        for (unsigned p = 0; p < jobs[job].pods; p++)
                                take(&s.nodes[s.pod_node[job * s.max_pods + p]],
                                     &s.pod_set[job * s.max_pods + p], true);
                        s.running[k] = s.running[--s.n_running];
                        s.generation++;
                }
                for (; next < n_jobs && jobs[next].arrival <= s.now; next++) {
                        bool fits = false;

                        for (unsigned i = 0; i < s.n_nodes && !fits; i++)
                                fits = node_type_fits(&s.nodes[i], jobs[next].gpus);
                        if (fits && jobs[next].pods <= 64)
                                queue[nq++] = (unsigned)next;
                }
                for (unsigned q = 0; q < nq; q++) {
                        unsigned job = queue[q];
                        const struct bench_gang_job *j = &jobs[job];
                        bool could_d = false, could_l = false;

                        /* Whether one NVLink domain / one leaf could hold it now. */
                        if (j->pods > 1) {
                                /* An NVLink domain: an NVL72-style one, or one HGX node's own
                                 * NVSwitch when the whole gang fits in it. */
                                for (unsigned d = 0; j->gpus <= 4 && d < cfg->n_domains; d++)
                                        could_d |= group_sets(&s, (int)d, -1, j->gpus) >= j->pods;
                                for (unsigned i = 0; i < s.n_nodes && !could_d; i++)
                                        could_d = !s.nodes[i].tray &&
                                                  s.nodes[i].n_free / j->gpus >= j->pods;
                                for (unsigned l = 0; l < cfg->n_leaves; l++)
                                        could_l |= group_sets(&s, -1, (int)l, j->gpus) >= j->pods;
                        }
                        r = try_job(&s, policy, job);
                        sum.decisions++;
                        if (r == -ENOSPC) {
                                queue[kept++] = job;
                                r = 0;
                                continue;
                        }
                        if (r < 0)
                                goto out;
                        s.generation++;
                        start[job] = s.now;
                        {
                                double bw = INFINITY, ideal, worst_pod = 1;
                                bool one_d = true, one_l = true, one_node = true;

                                for (unsigned p = 0; p < j->pods; p++) {
                                        unsigned at = job * s.max_pods + p;
                                        const struct gnode *n = &s.nodes[s.pod_node[at]];

                                        if (j->gpus > 1) {
                                                struct topo_mask best_set, all;
                                                struct score_choice ch;
                                                double b_ideal = 0;

                                                (void)score_evaluate(n->cls, &s.pod_set[at], NULL, &ch);
                                                topo_mask_fill(&all, n->n_gpus);
                                                if (bench_pick_exhaustive(n->cls, &all, j->gpus,
                                                                          &best_set, &b_ideal) == 0 &&
                                                    b_ideal > 0)
                                                        worst_pod = MIN(worst_pod,
                                                                        ch.busbw_gbps / b_ideal);
                                        }
                                        for (unsigned q2 = p + 1; q2 < j->pods; q2++)
                                                bw = MIN(bw, between(&s, s.pod_node[at],
                                                                     s.pod_node[job * s.max_pods + q2]));
                                        one_d &= n->tray &&
                                                 n->domain == s.nodes[s.pod_node[job * s.max_pods]].domain;
                                        one_l &= !n->tray &&
                                                 n->leaf == s.nodes[s.pod_node[job * s.max_pods]].leaf;
                                        one_node &= s.pod_node[at] == s.pod_node[job * s.max_pods];
                                }
                                ideal = j->pods == 1 ? INFINITY
                                                     : gang_ideal_gbps(cfg, j->pods, j->gpus);
                                stretch[job] = 1 + j->comm * (1 / worst_pod - 1);
                                if (j->pods > 1 && bw < ideal)
                                        stretch[job] += fabric_stretch(j->comm, ideal, bw) - 1;
                                one_d |= one_node;
                                if (j->pods > 1) {
                                        if (could_d || could_l) {
                                                could++;
                                                inside += one_d || one_l;
                                        }
                                        if (could_d) {
                                                could_nvl++;
                                                inside_nvl += one_d;
                                        }
                                        sum.n_gangs++;
                                        gang_stretch[n_stretch++] = stretch[job];
                                }
                                if (j->gpus > 1) {
                                        multi += j->pods;
                                        best += worst_pod >= 1 - 1e-9 ? j->pods : 0;
                                }
                        }
                        s.finish[job] = s.now + jobs[job].duration * stretch[job];
                        s.running[s.n_running++] = job;
                        {
                                enum bench_gang_class c = bench_gang_class_of(j->pods, j->gpus);

                                qd[c][nqd[c]++] = (s.now - j->arrival) / 60;
                                if (ret_wait)
                                        ret_wait[job] = (s.now - j->arrival) / 60;
                        }
                }
                nq = kept;
                for (unsigned i = 0; i < s.n_nodes; i++)
                        free_now += s.nodes[i].n_free;
                last_t = s.now;
                last_free = free_now;
                last_sat = servable_waits(&s, jobs, queue, nq, &last_fit);
        }
        sum.n_unplaced = nq;
        sum.gangs_inside = could ? (double)inside / could : 1;
        sum.gangs_could = could;
        sum.gangs_inside_nvl = could_nvl ? (double)inside_nvl / could_nvl : 1;
        sum.gangs_could_nvl = could_nvl;
        sum.best_frac = multi ? (double)best / multi : 1;
        qsort(gang_stretch, n_stretch, sizeof(*gang_stretch), cmp_double);
        {
                double m = 0;

                for (size_t i = 0; i < n_stretch; i++)
                        m += gang_stretch[i];
                sum.slowdown_mean = n_stretch ? m / n_stretch : 1;
                sum.slowdown_p95 = n_stretch ? pct(gang_stretch, n_stretch, 95) : 1;
        }
        for (unsigned c = 0; c < BENCH_GANG_CLASSES; c++) {
                sum.qdelay_p50[c] = pct(qd[c], nqd[c], 50);
                sum.qdelay_p95[c] = pct(qd[c], nqd[c], 95);
        }
        sum.stranded_sat = sat_t > 0 ? sat_free / sat_t / cluster_gpus : 0;
        sum.stranded_sat_fit = sat_t > 0 ? sat_fit / sat_t / cluster_gpus : 0;
        sum.alloc_sat = sat_t > 0 ? sat_alloc / sat_t / cluster_gpus : 0;
        sum.makespan_h = s.now / 3600;
        *ret = sum;
        r = 0;
out:
        for (unsigned c = 0; c < BENCH_GANG_CLASSES; c++)
                free(qd[c]);
        ext_ledger_free(s.ledger);
        ext_cluster_unref(s.snap);
        free(s.json_tray);
        free(s.json_hgx);
        free(s.enodes);
        free(s.sim_of);
        free(s.fit);
        free(s.fit_sim);
        free(s.assumed);
        free(s.verdicts);
        free(s.nodes);
        free(s.pod_node);
        free(s.pod_set);
        free(s.running);
        free(s.finish);
        return r;
}

int
bench_gang_report_markdown(const struct bench_gang_summary *s, size_t n, struct buf *out)
{
        int r = buf_printf(out, "| policy | gangs in one NVLink domain or leaf, when one could hold them | in one NVLink domain, when one could | gang slow-down mean / p95 | multi-GPU pods on best set | GPUs stranded at saturation | of them on nodes a waiting pod fits | GPUs allocated at saturation | makespan (h) |\n"
                                "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");

        for (size_t i = 0; r >= 0 && i < n; i++)
                r = buf_printf(out, "| %s | %.1f%% (%u) | %.1f%% (%u) | %.3f / %.3f | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f |\n",
                               bench_gang_policy_to_string(s[i].policy), 100 * s[i].gangs_inside,
                               s[i].gangs_could, 100 * s[i].gangs_inside_nvl, s[i].gangs_could_nvl,
                               s[i].slowdown_mean, s[i].slowdown_p95, 100 * s[i].best_frac,
                               100 * s[i].stranded_sat, 100 * s[i].stranded_sat_fit,
                               100 * s[i].alloc_sat, s[i].makespan_h);
        if (r >= 0)
                r = buf_printf(out, "\n| policy | queueing p50 / p95 (min): 1 GPU | 2 GPUs | 4 GPUs | 8 GPUs | gangs of 2-4 pods | gangs of 6-18 pods |\n"
                                    "|---|---:|---:|---:|---:|---:|---:|\n");
        for (size_t i = 0; r >= 0 && i < n; i++) {
                r = buf_printf(out, "| %s |", bench_gang_policy_to_string(s[i].policy));
                for (unsigned c = 0; r >= 0 && c < BENCH_GANG_CLASSES; c++)
                        r = buf_printf(out, " %.1f / %.1f |", s[i].qdelay_p50[c], s[i].qdelay_p95[c]);
                r = r < 0 ? r : buf_puts(out, "\n");
        }
        return r < 0 ? r : 0;
}

int
bench_gang_report_csv(const struct bench_gang_summary *s, size_t n, struct buf *out)
{
        int r = buf_printf(out, "policy,gangs_inside,gangs_could,gangs_inside_nvl,gangs_could_nvl,"
                                "slowdown_mean,slowdown_p95,best_frac,stranded_sat,alloc_sat,"
                                "makespan_h");

        for (unsigned c = 0; r >= 0 && c < BENCH_GANG_CLASSES; c++)
                r = buf_printf(out, ",qdelay_%s_p50,qdelay_%s_p95", bench_gang_class_to_string(c),
                               bench_gang_class_to_string(c));
        /* Last, so the columns before keep their numbers (the charts read them by number). */
        r = r < 0 ? r : buf_puts(out, ",stranded_sat_fit\n");
        for (size_t i = 0; r >= 0 && i < n; i++) {
                r = buf_printf(out, "%s,%.4f,%u,%.4f,%u,%.4f,%.4f,%.4f,%.4f,%.4f,%.2f",
                               bench_gang_policy_to_string(s[i].policy), s[i].gangs_inside,
                               s[i].gangs_could, s[i].gangs_inside_nvl, s[i].gangs_could_nvl,
                               s[i].slowdown_mean, s[i].slowdown_p95, s[i].best_frac,
                               s[i].stranded_sat, s[i].alloc_sat, s[i].makespan_h);
                for (unsigned c = 0; r >= 0 && c < BENCH_GANG_CLASSES; c++)
                        r = buf_printf(out, ",%.2f,%.2f", s[i].qdelay_p50[c], s[i].qdelay_p95[c]);
                r = r < 0 ? r : buf_printf(out, ",%.4f\n", s[i].stranded_sat_fit);
        }
        return r < 0 ? r : 0;
}

int
bench_gang_report_cdf_csv(const struct bench_gang_summary *s, size_t n,
                          const struct bench_gang_job *jobs, size_t n_jobs,
                          double *const *wait, struct buf *out)
{
        CLEANUP(freep) double *v = calloc(MAX(n_jobs, (size_t)1), sizeof(*v));
        int r;

        if (!v)
                return -ENOMEM;
        r = buf_puts(out, "policy,class,minutes,fraction\n");
        for (size_t i = 0; r >= 0 && i < n; i++)
                for (unsigned c = 0; r >= 0 && c < BENCH_GANG_CLASSES; c++) {
                        size_t m = 0;

                        for (size_t k = 0; k < n_jobs; k++)
                                if (wait[i][k] >= 0 &&
                                    bench_gang_class_of(jobs[k].pods, jobs[k].gpus) == c)
                                        v[m++] = wait[i][k];
                        qsort(v, m, sizeof(*v), cmp_double);
                        /* One point per distinct delay: the last job at that delay. */
                        for (size_t k = 0; r >= 0 && k < m; k++)
                                if (k + 1 == m || v[k + 1] != v[k])
                                        r = buf_printf(out, "%s,%s,%.3f,%.5f\n",
                                                       bench_gang_policy_to_string(s[i].policy),
                                                       bench_gang_class_to_string(c), v[k],
                                                       (double)(k + 1) / (double)m);
                }
        return r < 0 ? r : 0;
}

/* Bar charts of gang-summary.csv: output name, title, column (1-based), scale. */
static const struct bench_bar_chart gang_bars[] = {
        { "gang-metric-inside-nvl", "gangs in one NVLink domain when one could hold them (%)", 4, "100*v" },
        { "gang-metric-stranded", "GPUs stranded at saturation (%)", 9, "100*v" },
        { "gang-metric-stranded-fit", "of them on nodes a waiting pod fits (%)", 24, "100*v" },
        { "gang-metric-makespan", "makespan (h)", 11, "v" },
        { "gang-metric-slowdown-mean", "gang slow-down, mean (run time / ideal)", 6, "v" },
        { "gang-metric-qdelay8-p95", "8-GPU single-node jobs: queueing p95 (min)", 19, "v" },
        { "gang-metric-qdelay-gang-small-p95", "gangs of 2-4 pods: queueing p95 (min)", 21, "v" },
};

int
bench_gang_report_gnuplot(const struct bench_gang_summary *s, size_t n, struct buf *out)
{
        int r = buf_puts(out,
                "# Generated by topofit bench gang: turns gang-summary.csv and gang-cdf.csv into SVG.\n"
                "set datafile separator ','\n"
                "set terminal svg size 800,480 dynamic font 'sans,12' background rgb 'white'\n"
                "set grid\n"
                "policies = '");

        for (size_t i = 0; r >= 0 && i < n; i++)
                r = buf_printf(out, "%s%s", i ? " " : "", bench_gang_policy_to_string(s[i].policy));
        r = r < 0 ? r : buf_puts(out,
                "'\n"
                "set key bottom right\n"
                "set ylabel 'fraction of jobs'\n"
                "set yrange [0:1.02]\n"
                "set logscale x\n"
                "set xrange [0.01:*]\n"
                "set xlabel 'queueing delay (minutes, log scale; no wait drawn at 0.01)'\n"
                "do for [c in '1 2 4 8 gang-small gang-big'] {\n"
                "  set output 'gang-qdelay-cdf-'.c.'.svg'\n"
                "  set title 'gang scenario: queueing delay CDF, '.(c eq 'gang-small' ? "
                "'gangs of 2-4 pods' : c eq 'gang-big' ? 'gangs of 6-18 pods' : c.'-GPU single-node jobs')\n"
                "  plot for [p in policies] 'gang-cdf.csv' using (strcol(1) eq p && strcol(2) eq c "
                "? ($3 < 0.01 ? 0.01 : $3) : 1/0):4 with steps lw 2 title p\n"
                "}\n"
                "unset logscale x\n"
                "set autoscale x\n");
        return r < 0 ? r : bench_report_gnuplot_bars("gang-summary.csv", gang_bars,
                                                     ELEMENTSOF(gang_bars), out);
}
