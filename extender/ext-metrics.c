/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prometheus text exposition (format 0.0.4) of the extender's counters: requests and a
 * latency histogram per verb, decisions by outcome, GPUs free / allocated / held in the
 * ledger, the cluster view's size and sync state.  Counters are lock-free atomics bumped
 * by the handlers; rendering reads a snapshot reference and the ledger's stats.  Output
 * passes `promtool check metrics` (a test runs it).
 */
#include "ext-server.h"

#include <inttypes.h>
#include <string.h>

#include "str.h"
#include "topofit-version.h"

/* Upper bounds in seconds; the last bucket is +Inf. */
static const double bucket_le[EXT_N_BUCKETS - 1] = {
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5,
};

static const int codes[EXT_N_CODES] = { 200, 400, 404, 405, 413, 500, 503, 0 /* other */ };

static const char *const outcome_names[_EXT_OUTCOME_MAX] = {
        [EXT_OUTCOME_FIT] = "fit",
        [EXT_OUTCOME_NO_FIT] = "no_fit",
        [EXT_OUTCOME_UNRESOLVABLE] = "unresolvable",
        [EXT_OUTCOME_BOUND] = "bound",
        [EXT_OUTCOME_BIND_FAILED] = "bind_failed",
        [EXT_OUTCOME_VICTIMS_KEPT] = "victims_kept",
        [EXT_OUTCOME_NODE_DROPPED] = "node_dropped",
        [EXT_OUTCOME_BAD_REQUEST] = "bad_request",
};

static unsigned
code_index(int status)
{
        for (unsigned i = 0; i + 1 < EXT_N_CODES; i++)
                if (codes[i] == status)
                        return i;
        return EXT_N_CODES - 1;
}

void
ext_metrics_observe(struct ext_metrics *m, enum ext_verb v, int status, uint64_t ns)
{
        double sec = (double)ns / 1e9;
        unsigned b = 0;

        if (v < 0 || v >= _EXT_VERB_MAX)
                return;
        while (b < EXT_N_BUCKETS - 1 && sec > bucket_le[b])
                b++;
        atomic_fetch_add(&m->requests[v][code_index(status)], 1);
        atomic_fetch_add(&m->latency_bucket[v][b], 1);
        atomic_fetch_add(&m->latency_count[v], 1);
        atomic_fetch_add(&m->latency_sum_ns[v], ns);
}

void
ext_metrics_decision(struct ext_metrics *m, enum ext_verb v, enum ext_outcome o)
{
        if (v >= 0 && v < _EXT_VERB_MAX && o >= 0 && o < _EXT_OUTCOME_MAX)
                atomic_fetch_add(&m->decisions[v][o], 1);
}

static int
render_requests(struct ext_metrics *m, struct buf *out)
{
        int r = buf_puts(out, "# HELP topofit_extender_requests_total HTTP requests served, by "
                              "verb and status code.\n"
                              "# TYPE topofit_extender_requests_total counter\n");

        for (int v = 0; r >= 0 && v < _EXT_VERB_MAX; v++)
                for (unsigned c = 0; r >= 0 && c < EXT_N_CODES; c++) {
                        uint64_t n = atomic_load(&m->requests[v][c]);

                        if (n == 0 && c != 0)
                                continue;
                        if (codes[c])
                                r = buf_printf(out,
                                               "topofit_extender_requests_total{verb=\"%s\","
                                               "code=\"%d\"} %" PRIu64 "\n",
                                               ext_verb_to_string(v), codes[c], n);
                        else
                                r = buf_printf(out,
                                               "topofit_extender_requests_total{verb=\"%s\","
                                               "code=\"other\"} %" PRIu64 "\n",
                                               ext_verb_to_string(v), n);
                }
        return r;
}

static const char *const cut_names[_EXT_CUT_MAX] = {
        [EXT_CUT_HEAD_DEADLINE] = "head_deadline",
        [EXT_CUT_BODY_DEADLINE] = "body_deadline",
        [EXT_CUT_BODY_TOO_LARGE] = "body_too_large",
        [EXT_CUT_BODY_BUDGET] = "body_budget",
};

DEFINE_STRING_TABLE_TO_STRING(ext_cut, enum ext_cut, cut_names)

static int
render_cuts(struct ext_metrics *m, struct buf *out)
{
        int r = buf_puts(out, "# HELP topofit_extender_connections_cut_total Connections closed "
                              "without an answer: a request head or body too slow, a chunked "
                              "body past its cap or the body budget.\n"
                              "# TYPE topofit_extender_connections_cut_total counter\n");

        for (int c = 0; r >= 0 && c < _EXT_CUT_MAX; c++)
                r = buf_printf(out, "topofit_extender_connections_cut_total{reason=\"%s\"} %" PRIu64
                                    "\n", cut_names[c], (uint64_t)atomic_load(&m->cuts[c]));
        if (r >= 0)
                r = buf_printf(out, "# HELP topofit_extender_connections_opened_total Connections "
                                    "accepted (with HTTPS each is a TLS handshake; a client that "
                                    "keeps its connections open adds few).\n"
                                    "# TYPE topofit_extender_connections_opened_total counter\n"
                                    "topofit_extender_connections_opened_total %" PRIu64 "\n",
                               (uint64_t)atomic_load(&m->connections));
        if (r >= 0)
                r = buf_printf(out, "# HELP topofit_extender_node_list_repeats_total Names-mode "
                                    "requests whose NodeNames repeated the list the serving "
                                    "worker kept from its previous names-mode request (not "
                                    "read name by name, nor looked up again in the same "
                                    "view).\n"
                                    "# TYPE topofit_extender_node_list_repeats_total counter\n"
                                    "topofit_extender_node_list_repeats_total{verb=\"filter\"} %"
                                    PRIu64 "\n"
                                    "topofit_extender_node_list_repeats_total{verb=\"prioritize\"} %"
                                    PRIu64 "\n",
                               (uint64_t)atomic_load(&m->list_repeats[0]),
                               (uint64_t)atomic_load(&m->list_repeats[1]));
        if (r >= 0)
                r = buf_printf(out, "# HELP topofit_extender_filter_narrowed_total Filter answers "
                                    "that passed only the best of the nodes that fit "
                                    "(--filter-best).\n"
                                    "# TYPE topofit_extender_filter_narrowed_total counter\n"
                                    "topofit_extender_filter_narrowed_total %" PRIu64 "\n",
                               (uint64_t)atomic_load(&m->filter_narrowed));
        return r;
}

/* Live mode only: how often the view's watches had to start over. */
static int
render_watch(struct ext_state *s, struct buf *out)
{
        struct ext_watch_stats w;

        if (!s->watch_stats)
                return 0;
        s->watch_stats(s, &w);
        return buf_printf(out,
                          "# HELP topofit_extender_watch_total Watch activity behind the "
                          "cluster view: events applied, LISTs after the first (410 Gone, a "
                          "lost event, errors), watches resumed, failed LISTs and WATCHes, "
                          "objects that did not decode.\n"
                          "# TYPE topofit_extender_watch_total counter\n"
                          "topofit_extender_watch_total{event=\"applied\"} %" PRIu64 "\n"
                          "topofit_extender_watch_total{event=\"relist\"} %" PRIu64 "\n"
                          "topofit_extender_watch_total{event=\"reconnect\"} %" PRIu64 "\n"
                          "topofit_extender_watch_total{event=\"error\"} %" PRIu64 "\n"
                          "topofit_extender_watch_total{event=\"decode_error\"} %" PRIu64 "\n"
                          "# HELP topofit_extender_view_rebuilds_total Cluster views built from "
                          "the watched objects and installed.\n"
                          "# TYPE topofit_extender_view_rebuilds_total counter\n"
                          "topofit_extender_view_rebuilds_total %" PRIu64 "\n"
                          "# HELP topofit_extender_view_rebuild_cpu_seconds_total CPU time of "
                          "the rebuild thread for them (it pauses at least four times as long "
                          "after each, so rebuilds take at most a fifth of a core).\n"
                          "# TYPE topofit_extender_view_rebuild_cpu_seconds_total counter\n"
                          "topofit_extender_view_rebuild_cpu_seconds_total %.6f\n",
                          w.events, w.relists, w.reconnects, w.errors, w.decode_errors,
                          w.rebuilds, (double)w.rebuild_cpu_ns / 1e9);
}

static int
render_latency(struct ext_metrics *m, struct buf *out)
{
        int r = buf_puts(out, "# HELP topofit_extender_request_duration_seconds Time from the "
                              "request's first byte to its answer, by verb.\n"
                              "# TYPE topofit_extender_request_duration_seconds histogram\n");

        for (int v = 0; r >= 0 && v < _EXT_VERB_MAX; v++) {
                const char *name = ext_verb_to_string(v);
                uint64_t cum = 0;

                for (unsigned b = 0; r >= 0 && b < EXT_N_BUCKETS; b++) {
                        cum += atomic_load(&m->latency_bucket[v][b]);
                        if (b < EXT_N_BUCKETS - 1)
                                r = buf_printf(out,
                                               "topofit_extender_request_duration_seconds_bucket"
                                               "{verb=\"%s\",le=\"%g\"} %" PRIu64 "\n",
                                               name, bucket_le[b], cum);
                        else
                                r = buf_printf(out,
                                               "topofit_extender_request_duration_seconds_bucket"
                                               "{verb=\"%s\",le=\"+Inf\"} %" PRIu64 "\n",
                                               name, cum);
                }
                if (r >= 0)
                        r = buf_printf(out,
                                       "topofit_extender_request_duration_seconds_sum{verb=\"%s\"} "
                                       "%.9f\n"
                                       "topofit_extender_request_duration_seconds_count{verb=\"%s\"} "
                                       "%" PRIu64 "\n",
                                       name, (double)atomic_load(&m->latency_sum_ns[v]) / 1e9, name,
                                       (uint64_t)atomic_load(&m->latency_count[v]));
        }
        return r;
}

static int
render_decisions(struct ext_metrics *m, struct buf *out)
{
        static const enum ext_verb verbs[] = { EXT_VERB_FILTER, EXT_VERB_PRIORITIZE, EXT_VERB_BIND,
                                               EXT_VERB_PREEMPT };
        int r = buf_puts(out, "# HELP topofit_extender_decisions_total Per-node decisions (filter, "
                              "prioritize, preempt) and per-pod bindings, by outcome.\n"
                              "# TYPE topofit_extender_decisions_total counter\n");

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(verbs); i++)
                for (int o = 0; r >= 0 && o < _EXT_OUTCOME_MAX; o++)
                        r = buf_printf(out,
                                       "topofit_extender_decisions_total{verb=\"%s\",outcome=\"%s\"} "
                                       "%" PRIu64 "\n",
                                       ext_verb_to_string(verbs[i]), outcome_names[o],
                                       (uint64_t)atomic_load(&m->decisions[verbs[i]][o]));
        return r;
}

int
ext_metrics_render(struct ext_state *s, struct buf *out)
{
        CLEANUP(ext_cluster_unrefp) struct ext_cluster *c = ext_state_snapshot(s);
        struct ext_ledger_stats ls;
        uint64_t total = 0, used = 0, annotated = 0;
        int r;

        ext_ledger_stats(s->ledger, ext_now_ns(), &ls);
        for (size_t i = 0; c && i < c->n_nodes; i++) {
                total += topo_mask_count(&c->nodes[i].healthy);
                used += topo_mask_count(&c->nodes[i].used);
                annotated += c->nodes[i].annotated;
        }

        r = render_requests(&s->metrics, out);
        if (r >= 0)
                r = render_latency(&s->metrics, out);
        if (r >= 0)
                r = render_cuts(&s->metrics, out);
        if (r >= 0)
                r = render_decisions(&s->metrics, out);
        if (r >= 0)
                r = render_watch(s, out);
        if (r >= 0)
                r = buf_printf(out,
                               "# HELP topofit_extender_gpus GPUs of the cluster view by state: "
                               "allocated on live pods, held in the ledger, free.\n"
                               "# TYPE topofit_extender_gpus gauge\n"
                               "topofit_extender_gpus{state=\"allocated\"} %" PRIu64 "\n"
                               "topofit_extender_gpus{state=\"held\"} %u\n"
                               "topofit_extender_gpus{state=\"free\"} %" PRIu64 "\n"
                               "# HELP topofit_extender_ledger_entries Reservations and commits "
                               "in flight.\n"
                               "# TYPE topofit_extender_ledger_entries gauge\n"
                               "topofit_extender_ledger_entries{hold=\"reserved\"} %u\n"
                               "topofit_extender_ledger_entries{hold=\"committed\"} %u\n"
                               "# HELP topofit_extender_cache_nodes Nodes in the cluster view.\n"
                               "# TYPE topofit_extender_cache_nodes gauge\n"
                               "topofit_extender_cache_nodes{topology=\"annotated\"} %" PRIu64 "\n"
                               "topofit_extender_cache_nodes{topology=\"missing\"} %" PRIu64 "\n"
                               "# HELP topofit_extender_cache_pods Pods in the cluster view.\n"
                               "# TYPE topofit_extender_cache_pods gauge\n"
                               "topofit_extender_cache_pods %zu\n"
                               "# HELP topofit_extender_topology_classes Distinct topology "
                               "classes in the cluster view.\n"
                               "# TYPE topofit_extender_topology_classes gauge\n"
                               "topofit_extender_topology_classes %zu\n"
                               "# HELP topofit_extender_cache_synced 1 once the cluster view has "
                               "synced.\n"
                               "# TYPE topofit_extender_cache_synced gauge\n"
                               "topofit_extender_cache_synced %d\n"
                               "# HELP topofit_extender_build_info Build version and mode.\n"
                               "# TYPE topofit_extender_build_info gauge\n"
                               "topofit_extender_build_info{version=\"%s\",mode=\"%s\"} 1\n",
                               used, ls.gpus_held, total >= used ? total - used : 0, ls.reserved,
                               ls.committed, annotated, (c ? (uint64_t)c->n_nodes : 0) - annotated,
                               c ? c->n_pods : 0, c ? c->n_classes : 0,
                               atomic_load(&s->ready) ? 1 : 0, TOPOFIT_VERSION, s->mode);
        return r;
}
