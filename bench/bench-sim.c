/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The event-driven placement simulator and the baseline policies.  Pure core of bench/:
 * the trace, the cluster and the clock for decisions per second come in as parameters,
 * results go into a caller-released struct bench_run; no files, no environment, no
 * randomness.  Events at one instant run in a fixed order (completions, then arrivals,
 * then one scheduling pass over the queue in arrival order, as kube-scheduler retries
 * pending pods), and every tie breaks by job index, node index, then GPU index, so a run
 * is a pure function of its inputs.
 */
#include "bench-private.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/str.h"

static const char *const policy_names[_BENCH_POLICY_MAX] = {
        [BENCH_POLICY_K8S_DEFAULT] = "k8s-default",
        [BENCH_POLICY_K8S_BESTEFFORT] = "k8s-besteffort",
        [BENCH_POLICY_BINPACK_BESTEFFORT] = "binpack-besteffort",
        [BENCH_POLICY_TOPOFIT] = "topofit",
        [BENCH_POLICY_ORACLE] = "oracle",
};

DEFINE_STRING_TABLE(bench_policy, enum bench_policy, policy_names)

double
bench_stretch(double duration, double comm, double ideal_gbps, double achieved_gbps)
{
        if (!(ideal_gbps > 0) || !(achieved_gbps > 0) || !(comm > 0))
                return duration;
        return duration * (1.0 + comm * (ideal_gbps / achieved_gbps - 1.0));
}

bool
bench_topo_is_nvlink_mesh(const struct topo *t)
{
        bool any = false, all = true;

        if (t->nvswitch)
                return false;
        for (unsigned i = 0; i < t->n_gpus; i++)
                for (unsigned j = i + 1; j < t->n_gpus; j++) {
                        enum topo_link l = (enum topo_link)topo_pair(t, i, j)->link;
                        bool nv = l == TOPO_LINK_NVLINK || l == TOPO_LINK_XGMI;

                        any = any || nv;
                        all = all && nv;
                }
        return any && !all;
}

/* --- the decision memo ------------------------------------------------------------------- */

struct bench_memo_entry *
bench__memo_slot(struct bench_memo *m, enum bench_memo_kind kind, unsigned type, unsigned count,
                 const struct topo_mask *key, bool *ret_hit)
{
        uint64_t h = UINT64_C(1469598103934665603);
        struct bench_memo_entry *e;

        h = (h ^ kind) * UINT64_C(1099511628211);
        h = (h ^ type) * UINT64_C(1099511628211);
        h = (h ^ count) * UINT64_C(1099511628211);
        for (size_t k = 0; k < ELEMENTSOF(key->w); k++)
                h = (h ^ key->w[k]) * UINT64_C(0x9e3779b97f4a7c15);
        e = &m->e[(h >> 17) & ((1u << BENCH_MEMO_BITS) - 1)];
        *ret_hit = e->valid && e->kind == kind && e->type == type && e->count == count &&
                   topo_mask_equal(&e->key, key);
        if (!*ret_hit)
                *e = (struct bench_memo_entry){ .valid = true, .kind = (uint8_t)kind,
                                                .type = (uint16_t)type, .count = (uint16_t)count,
                                                .key = *key };
        return e;
}

int
bench__best(struct bench_sim *s, unsigned type, const struct topo_mask *free, unsigned count,
            struct topo_mask *ret_set, double *ret_gbps)
{
        struct score_class *c = s->cl->types[type].cls;
        struct bench_memo_entry *e;
        struct topo_mask set;
        double gbps;
        bool hit;
        int r;

        e = bench__memo_slot(s->memo, BENCH_MEMO_EXHAUSTIVE, type, count, free, &hit);
        if (hit) {
                *ret_set = e->set;
                *ret_gbps = e->gbps;
                return 0;
        }
        e->valid = false; /* until filled */
        r = bench_pick_exhaustive(c, free, count, &set, &gbps);
        if (r == -E2BIG) {
                struct score_request req = { .count = count };
                struct score_choice ch;

                r = score_best(c, free, &req, &ch, NULL);
                if (r >= 0) {
                        set = ch.set;
                        gbps = ch.busbw_gbps;
                }
        }
        if (r < 0)
                return r;
        e->set = set;
        e->gbps = gbps;
        e->valid = true;
        *ret_set = set;
        *ret_gbps = gbps;
        return 0;
}

/* Modeled busbw and P2P of a set; memoized. */
static int
evaluate(struct bench_sim *s, unsigned type, const struct topo_mask *set, double *ret_gbps,
         bool *ret_p2p)
{
        struct bench_memo_entry *e;
        struct score_choice ch;
        bool hit;
        int r;

        e = bench__memo_slot(s->memo, BENCH_MEMO_EVALUATE, type, topo_mask_count(set), set, &hit);
        if (!hit) {
                e->valid = false;
                r = score_evaluate(s->cl->types[type].cls, set, NULL, &ch);
                if (r < 0)
                        return r;
                e->gbps = ch.busbw_gbps;
                e->p2p = ch.p2p;
                e->valid = true;
        }
        *ret_gbps = e->gbps;
        *ret_p2p = e->p2p;
        return 0;
}

/* --- baseline policies -------------------------------------------------------------------- */

enum node_order {
        NODE_LEAST_ALLOCATED, /* kube-scheduler's default spreading score */
        NODE_MOST_ALLOCATED,  /* bin packing */
};

/* The node kube-scheduler's resource score picks: the most (least allocated) or the least
 * (most allocated) free share after placing `gpus`; ties to the lowest node index, where
 * kube-scheduler would pick at random among equals. */
static int
choose_node(const struct bench_sim *s, unsigned gpus, enum node_order order, unsigned *ret)
{
        int best = -1;

        for (unsigned i = 0; i < s->n_nodes; i++) {
                const struct bench_sim_node *n = &s->nodes[i];
                uint64_t lhs, rhs;

                if (n->n_free < gpus)
                        continue;
                if (best < 0) {
                        best = (int)i;
                        continue;
                }
                /* Compare (free - gpus) / n_gpus of i and best without floating point. */
                lhs = (uint64_t)(n->n_free - gpus) * s->nodes[best].n_gpus;
                rhs = (uint64_t)(s->nodes[best].n_free - gpus) * n->n_gpus;
                if (order == NODE_LEAST_ALLOCATED ? lhs > rhs : lhs < rhs)
                        best = (int)i;
        }
        if (best < 0)
                return -ENOSPC;
        *ret = (unsigned)best;
        return 0;
}

static int
pick_pairscore_memo(struct bench_sim *s, unsigned node, unsigned gpus, struct topo_mask *ret)
{
        const struct bench_sim_node *n = &s->nodes[node];
        struct bench_memo_entry *e;
        struct topo_mask set;
        bool hit;
        int r;

        e = bench__memo_slot(s->memo, BENCH_MEMO_PAIRSCORE, n->type, gpus, &n->free, &hit);
        if (hit) {
                *ret = e->set;
                return 0;
        }
        e->valid = false;
        r = bench_pick_pairscore(s->cl->types[n->type].topo, &n->free, gpus, &set);
        if (r < 0)
                return r;
        e->set = set;
        e->valid = true;
        *ret = set;
        return 0;
}

static int
place_k8s_default(struct bench_sim *s, void *state, unsigned job, unsigned gpus,
                  unsigned *ret_node, struct topo_mask *ret_set)
{
        unsigned node;
        int r = choose_node(s, gpus, NODE_LEAST_ALLOCATED, &node);

        if (r < 0)
                return r;
        r = bench_pick_first(s->cl->types[s->nodes[node].type].topo, &s->nodes[node].free, gpus,
                             ret_set);
        if (r < 0)
                return r;
        *ret_node = node;
        return 0;
}

static int
place_pairscore(struct bench_sim *s, unsigned gpus, enum node_order order, unsigned *ret_node,
                struct topo_mask *ret_set)
{
        unsigned node;
        int r = choose_node(s, gpus, order, &node);

        if (r < 0)
                return r;
        r = pick_pairscore_memo(s, node, gpus, ret_set);
        if (r < 0)
                return r;
        *ret_node = node;
        return 0;
}

static int
place_k8s_besteffort(struct bench_sim *s, void *state, unsigned job, unsigned gpus,
                     unsigned *ret_node, struct topo_mask *ret_set)
{
        return place_pairscore(s, gpus, NODE_LEAST_ALLOCATED, ret_node, ret_set);
}

static int
place_binpack_besteffort(struct bench_sim *s, void *state, unsigned job, unsigned gpus,
                         unsigned *ret_node, struct topo_mask *ret_set)
{
        return place_pairscore(s, gpus, NODE_MOST_ALLOCATED, ret_node, ret_set);
}

/* Oracle: on every node that fits, the exhaustive best set; the node whose best set comes
 * closest to its type's ideal wins, ties to the most allocated node (packing), then the
 * lowest index. */
static int
place_oracle(struct bench_sim *s, void *state, unsigned job, unsigned gpus, unsigned *ret_node,
             struct topo_mask *ret_set)
{
        struct topo_mask best_set, set, all;
        double best_ratio = -1, gbps, ideal;
        int best = -1, r;

        for (unsigned i = 0; i < s->n_nodes; i++) {
                const struct bench_sim_node *n = &s->nodes[i];
                double ratio = 1;

                if (n->n_free < gpus)
                        continue;
                if (gpus > 1) {
                        r = bench__best(s, n->type, &n->free, gpus, &set, &gbps);
                        if (r < 0)
                                return r;
                        topo_mask_fill(&all, n->n_gpus);
                        r = bench__best(s, n->type, &all, gpus, &(struct topo_mask){ 0 }, &ideal);
                        if (r < 0)
                                return r;
                        ratio = ideal > 0 ? gbps / ideal : 0;
                } else
                        bench_pick_first(s->cl->types[n->type].topo, &n->free, 1, &set);
                if (best < 0 || ratio > best_ratio * (1 + 1e-9) ||
                    (ratio >= best_ratio * (1 - 1e-9) &&
                     (uint64_t)(n->n_free - gpus) * s->nodes[best].n_gpus <
                             (uint64_t)(s->nodes[best].n_free - gpus) * n->n_gpus)) {
                        best = (int)i;
                        best_ratio = ratio;
                        best_set = set;
                }
        }
        if (best < 0)
                return -ENOSPC;
        *ret_node = (unsigned)best;
        *ret_set = best_set;
        return 0;
}

static const struct bench_policy_ops baseline_ops[_BENCH_POLICY_MAX] = {
        [BENCH_POLICY_K8S_DEFAULT] = { .place = place_k8s_default },
        [BENCH_POLICY_K8S_BESTEFFORT] = { .place = place_k8s_besteffort },
        [BENCH_POLICY_BINPACK_BESTEFFORT] = { .place = place_binpack_besteffort },
        [BENCH_POLICY_ORACLE] = { .place = place_oracle },
};

static const struct bench_policy_ops *
policy_ops(enum bench_policy p)
{
        return p == BENCH_POLICY_TOPOFIT ? &bench__topofit_ops : &baseline_ops[p];
}

/* --- the event loop ------------------------------------------------------------------------ */

/* Min-heap of running jobs by (finish, job index). */
static bool
heap_less(const struct bench_sim *s, unsigned a, unsigned b)
{
        double fa = s->results[a].finish, fb = s->results[b].finish;

        return fa < fb || (fa == fb && a < b);
}

static void
heap_push(struct bench_sim *s, unsigned job)
{
        unsigned i = s->n_running++;

        s->running[i] = job;
        while (i > 0 && heap_less(s, s->running[i], s->running[(i - 1) / 2])) {
                unsigned p = (i - 1) / 2, x = s->running[p];

                s->running[p] = s->running[i];
                s->running[i] = x;
                i = p;
        }
}

static unsigned
heap_pop(struct bench_sim *s)
{
        unsigned top = s->running[0], i = 0;

        s->running[0] = s->running[--s->n_running];
        for (;;) {
                unsigned l = 2 * i + 1, r = l + 1, m = i, x;

                if (l < s->n_running && heap_less(s, s->running[l], s->running[m]))
                        m = l;
                if (r < s->n_running && heap_less(s, s->running[r], s->running[m]))
                        m = r;
                if (m == i)
                        break;
                x = s->running[m];
                s->running[m] = s->running[i];
                s->running[i] = x;
                i = m;
        }
        return top;
}

/* Saturation: a waiting job of g GPUs that the free GPUs of the nodes of at least g GPUs
 * cover by count (it waits for their shape: no one node has g free).  Only then are free
 * GPUs stranded rather than too few; the gang scenario counts the same way. */
static bool
saturated(const struct bench_sim *s, const unsigned *queue, unsigned queued)
{
        unsigned at_least[TOPO_MAX_GPUS + 2] = { 0 }; /* free GPUs on nodes of >= g GPUs */

        if (queued == 0)
                return false;
        for (unsigned i = 0; i < s->n_nodes; i++)
                at_least[MIN(s->nodes[i].n_gpus, (unsigned)TOPO_MAX_GPUS)] += s->nodes[i].n_free;
        for (unsigned g = TOPO_MAX_GPUS; g-- > 0;)
                at_least[g] += at_least[g + 1];
        for (unsigned q = 0; q < queued; q++) {
                unsigned g = s->trace->jobs[queue[q]].gpus;

                if (g <= TOPO_MAX_GPUS && g <= at_least[g])
                        return true;
        }
        return false;
}

static void
sample(struct bench_sim *s, struct bench_run *run, const unsigned *queue, unsigned queued)
{
        unsigned free = 0, stranded = 0, total = run->cluster_gpus;

        for (unsigned i = 0; i < s->n_nodes; i++) {
                free += s->nodes[i].n_free;
                if (s->nodes[i].n_free < BENCH_BIG_JOB)
                        stranded += s->nodes[i].n_free;
        }
        /* The integrals use every event, whatever the series below keeps. */
        if (s->have_last) {
                run->alloc_gpu_s += s->last_allocated * (s->now - s->last_t);
                run->stranded_gpu_s += s->last_stranded * (s->now - s->last_t);
                if (s->last_sat) {
                        run->sat_s += s->now - s->last_t;
                        run->sat_free_gpu_s += (double)(total - s->last_allocated) *
                                               (s->now - s->last_t);
                }
        }
        s->have_last = true;
        s->last_t = s->now;
        s->last_allocated = total - free;
        s->last_stranded = stranded;
        s->last_sat = saturated(s, queue, queued);
        if (run->n_series > 0 && run->series[run->n_series - 1].t == s->now)
                run->n_series--; /* one sample per instant: the last state wins */
        if (run->n_series == run->series_alloc) {
                size_t na = run->series_alloc ? run->series_alloc * 2 : 1024;
                struct bench_sample *p;

                if (na > BENCH_MAX_SERIES)
                        return; /* the integrals stay exact; the chart ends early */
                p = realloc(run->series, na * sizeof(*p));
                if (!p)
                        return;
                run->series = p;
                run->series_alloc = na;
        }
        run->series[run->n_series++] = (struct bench_sample){
                .t = s->now, .allocated = total - free, .stranded = stranded, .queued = queued,
        };
}

static int
start_job(struct bench_sim *s, unsigned job, unsigned node, const struct topo_mask *set)
{
        const struct bench_job *j = &s->trace->jobs[job];
        struct bench_job_result *res = &s->results[job];
        struct bench_sim_node *n = &s->nodes[node];
        struct topo_mask all, dummy;
        int r;

        if (topo_mask_count(set) != j->gpus)
                return -EPROTO; /* a policy bug: never silently accept */
        for (unsigned g = 0; g < n->n_gpus; g++)
                if (topo_mask_test(set, g) && !topo_mask_test(&n->free, g))
                        return -EPROTO; /* a GPU handed out twice */
        res->node = (int)node;
        res->type = n->type;
        res->set = *set;
        res->start = s->now;
        res->mesh = bench_topo_is_nvlink_mesh(s->cl->types[n->type].topo);
        res->best = true;
        res->p2p = true;
        if (j->gpus > 1) {
                r = evaluate(s, n->type, set, &res->busbw_gbps, &res->p2p);
                if (r < 0)
                        return r;
                r = bench__best(s, n->type, &n->free, j->gpus, &dummy, &res->best_gbps);
                if (r < 0)
                        return r;
                topo_mask_fill(&all, n->n_gpus);
                r = bench__best(s, n->type, &all, j->gpus, &dummy, &res->ideal_gbps);
                if (r < 0)
                        return r;
                res->best = res->busbw_gbps >= res->best_gbps * (1 - 1e-9);
        }
        res->finish = s->now + bench_stretch(j->duration, j->comm, res->ideal_gbps, res->busbw_gbps);
        for (unsigned g = 0; g < n->n_gpus; g++)
                if (topo_mask_test(set, g))
                        topo_mask_unset(&n->free, g);
        n->n_free -= j->gpus;
        s->generation++;
        heap_push(s, job);
        return 0;
}

static void
finish_job(struct bench_sim *s, unsigned job)
{
        const struct bench_job_result *res = &s->results[job];
        struct bench_sim_node *n = &s->nodes[res->node];

        for (unsigned g = 0; g < n->n_gpus; g++)
                if (topo_mask_test(&res->set, g))
                        topo_mask_set(&n->free, g);
        n->n_free += res->gpus;
        s->generation++;
}

static unsigned
max_free(const struct bench_sim *s)
{
        unsigned m = 0;

        for (unsigned i = 0; i < s->n_nodes; i++)
                m = MAX(m, s->nodes[i].n_free);
        return m;
}

/* One pass over the queue in arrival order; places what fits.  Returns the new queue
 * length or a negative errno. */
static int
schedule_pass(struct bench_sim *s, const struct bench_policy_ops *ops, void *state,
              bench_clock_fn clock, struct bench_run *run, unsigned *queue, unsigned nq)
{
        unsigned kept = 0, mf = max_free(s), min_failed = UINT32_MAX;

        for (unsigned q = 0; q < nq; q++) {
                unsigned job = queue[q], gpus = s->trace->jobs[job].gpus, node = 0;
                struct topo_mask set;
                double t0 = 0;
                int r;

                /* Placement depends only on free counts for a fit, so a size that failed
                 * in this pass fails again for every job as large. */
                if (gpus > mf || gpus >= min_failed) {
                        queue[kept++] = job;
                        continue;
                }
                if (ops->prepare) {
                        r = ops->prepare(s, state);
                        if (r < 0)
                                return r;
                }
                if (clock)
                        t0 = clock();
                r = ops->place(s, state, job, gpus, &node, &set);
                if (clock)
                        run->decision_s += clock() - t0;
                run->decisions++;
                if (r == -ENOSPC || r == -EAGAIN) {
                        min_failed = MIN(min_failed, gpus);
                        queue[kept++] = job;
                        continue;
                }
                if (r < 0)
                        return r;
                r = start_job(s, job, node, &set);
                if (r < 0)
                        return r;
                /* The policy sees the started job at once, as an informer would long before
                 * the job ends: otherwise a job ending before the next decision could leave
                 * the extender's ledger holding its GPUs as bound-but-unseen. */
                if (ops->prepare) {
                        r = ops->prepare(s, state);
                        if (r < 0)
                                return r;
                }
                mf = max_free(s);
        }
        return (int)kept;
}

void
bench_run_release(struct bench_run *r)
{
        free(r->results);
        free(r->series);
        *r = (struct bench_run){ 0 };
}

int
bench_simulate(const struct bench_cluster *cl, const struct bench_trace *trace,
               enum bench_policy policy, bench_clock_fn clock, struct bench_run *ret)
{
        const struct bench_policy_ops *ops;
        struct bench_sim s = { .cl = cl, .trace = trace };
        struct bench_run run = { .policy = policy };
        CLEANUP(freep) unsigned *queue = NULL;
        void *state = NULL;
        unsigned biggest = 0, nq = 0;
        size_t next = 0;
        int r = 0;

        if (policy < 0 || policy >= _BENCH_POLICY_MAX || trace->n > BENCH_MAX_JOBS ||
            cl->n_types == 0)
                return -EINVAL;
        for (size_t i = 1; i < trace->n; i++)
                if (trace->jobs[i].arrival < trace->jobs[i - 1].arrival)
                        return -EINVAL; /* unsorted: bench_trace_normalize() first */
        ops = policy_ops(policy);
        if (!ops->place)
                return -ENOTSUP;

        for (unsigned t = 0; t < cl->n_types; t++)
                s.n_nodes += cl->types[t].count;
        if (s.n_nodes == 0 || s.n_nodes > BENCH_MAX_NODES)
                return -EINVAL;
        s.nodes = calloc(s.n_nodes, sizeof(*s.nodes));
        s.running = calloc(MAX(trace->n, 1), sizeof(*s.running));
        s.results = calloc(MAX(trace->n, 1), sizeof(*s.results));
        s.memo = calloc(1, sizeof(*s.memo));
        queue = calloc(MAX(trace->n, 1), sizeof(*queue));
        if (!s.nodes || !s.running || !s.results || !s.memo || !queue) {
                r = -ENOMEM;
                goto out;
        }
        for (unsigned t = 0, k = 0; t < cl->n_types; t++)
                for (unsigned i = 0; i < cl->types[t].count; i++, k++) {
                        struct bench_sim_node *n = &s.nodes[k];

                        n->type = t;
                        n->n_gpus = n->n_free = cl->types[t].topo->n_gpus;
                        topo_mask_fill(&n->free, n->n_gpus);
                        snprintf(n->name, sizeof(n->name), "%s-%04u", cl->types[t].name, i);
                        biggest = MAX(biggest, n->n_gpus);
                        run.cluster_gpus += n->n_gpus;
                }
        for (size_t i = 0; i < trace->n; i++)
                s.results[i] = (struct bench_job_result){ .job = (unsigned)i, .node = -1,
                                                          .gpus = trace->jobs[i].gpus,
                                                          .arrival = trace->jobs[i].arrival };
        if (ops->init) {
                r = ops->init(&s, &state);
                if (r < 0)
                        goto out;
        }

        for (;;) {
                double t_next = INFINITY;

                if (next < trace->n)
                        t_next = trace->jobs[next].arrival;
                if (s.n_running > 0)
                        t_next = MIN(t_next, s.results[s.running[0]].finish);
                if (t_next == INFINITY)
                        break; /* nothing runs, nothing arrives: what is queued never fits */
                s.now = t_next;
                while (s.n_running > 0 && s.results[s.running[0]].finish <= s.now)
                        finish_job(&s, heap_pop(&s));
                for (; next < trace->n && trace->jobs[next].arrival <= s.now; next++) {
                        if (trace->jobs[next].gpus > biggest) {
                                run.n_rejected++;
                                continue;
                        }
                        queue[nq++] = (unsigned)next;
                }
                r = schedule_pass(&s, ops, state, clock, &run, queue, nq);
                if (r < 0)
                        goto out;
                nq = (unsigned)r;
                sample(&s, &run, queue, nq);
        }
        r = 0;
        run.n_unplaced = nq;
        run.n_jobs = (unsigned)trace->n;
        run.makespan = s.now - (trace->n ? trace->jobs[0].arrival : 0);
        run.results = TAKE_PTR(s.results);
        *ret = run;
        run = (struct bench_run){ 0 };
out:
        if (ops->done)
                ops->done(state);
        bench_run_release(&run);
        free(s.nodes);
        free(s.running);
        free(s.results);
        free(s.memo);
        return r;
}
