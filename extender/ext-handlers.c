/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The extender's route table and handlers: decode -> core verb -> encode, never touching a
 * socket (ext-server.c does the HTTP, routing each request once with ext_route() when its
 * head arrives).  The one place where -errno becomes an HTTP status.  Each handler takes a
 * reference to the current cluster view at its start and drops it at its end, so a
 * concurrent swap never pulls a view from under it; everything that outlives a request
 * (holds, the requests bind will need, preemption grants) is in the core's ledger.  The
 * shared state and the clock are ext-state.c's.  One structured log line per decision.
 */
#include "ext-server.h"

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "log.h"
#include "str.h"
#include "topofit-version.h"

static int
status_of(int r)
{
        switch (r) {
        case -EMSGSIZE:
                return 413;
        case -E2BIG: /* a count over its cap: too many nodes, victims, containers */
        case -EINVAL:
        case -ELOOP:
        case -EPROTONOSUPPORT:
                return 400;
        case -ENOMEM:
                return 503;
        default:
                return 500;
        }
}

static int
error_body(struct buf *out, const char *why)
{
        buf_reset(out);
        (void)buf_puts(out, "{\"Error\":");
        (void)buf_put_json_string(out, why);
        (void)buf_puts(out, "}\n");
        return 0;
}

static void
log_verdict(enum ext_verb verb, const struct ext_request *req, const char *node,
            const struct ext_verdict *v)
{
        char gpus[TOPO_MAX_GPUS * 4];

        if (v->r != 0) {
                log_debug("decision", "verb=%s pod=%s/%s uid=%s node=%s outcome=%s reason=\"%s\"",
                          ext_verb_to_string(verb), req->namespace, req->name, req->uid,
                          LOG_V(node),
                          ext_verdict_unresolvable(v) ? "unresolvable" : "no_fit", v->why);
                return;
        }
        if (topo_mask_format(&v->choice.set, gpus, sizeof(gpus)) < 0)
                gpus[0] = 0;
        log_debug("decision", "verb=%s pod=%s/%s uid=%s node=%s outcome=fit gpus=%s busbw_gbps=%.1f "
                  "score=%d", ext_verb_to_string(verb), req->namespace, req->name, req->uid,
                  LOG_V(node),
                  gpus, v->choice.busbw_gbps, v->priority);
}

/* The verdicts into the decisions counter: counted locally, added once (no atomic per
 * node).  In the same pass, the best fitting verdict for the log (the highest priority,
 * the first among equals), -1 when none fits. */
static ssize_t
count_outcomes(struct ext_state *s, enum ext_verb verb, const struct ext_verdict *vs,
               const uint32_t *rep, size_t n)
{
        uint64_t outcomes[_EXT_OUTCOME_MAX] = { 0 };
        const struct ext_verdict *bv = NULL;
        ssize_t best = -1;

        for (size_t i = 0; i < n; i++) {
                const struct ext_verdict *v = ext_verdict_at(vs, rep, i);

                outcomes[v->r == 0                        ? EXT_OUTCOME_FIT
                         : ext_verdict_unresolvable(v) ? EXT_OUTCOME_UNRESOLVABLE
                                                       : EXT_OUTCOME_NO_FIT]++;
                if (v->r == 0 && (!bv || v->priority > bv->priority)) {
                        bv = v;
                        best = (ssize_t)i;
                }
        }
        for (int o = 0; o < _EXT_OUTCOME_MAX; o++)
                if (outcomes[o])
                        atomic_fetch_add(&s->metrics.decisions[verb][o], outcomes[o]);
        return best;
}

/* One info line per request (the best node and set, or why none fits), one debug line per
 * node. */
static void
log_decision(enum ext_verb verb, const struct ext_args *a, const struct ext_verdict *vs,
             const uint32_t *rep, int fits, ssize_t best)
{
        char name[EXT_NAME_MAX];

        for (size_t i = 0; log_get_level() >= LOG_LEVEL_DEBUG && i < a->n; i++)
                log_verdict(verb, &a->req, ext_args_name(a, i, name), ext_verdict_at(vs, rep, i));
        if (best >= 0) {
                const struct ext_verdict *v = ext_verdict_at(vs, rep, (size_t)best);
                char gpus[TOPO_MAX_GPUS * 4];

                if (topo_mask_format(&v->choice.set, gpus, sizeof(gpus)) < 0)
                        gpus[0] = 0;
                log_info("decision", "verb=%s pod=%s/%s uid=%s gpus_asked=%u placement=%s nodes=%zu "
                         "fit=%d best_node=%s gpus=%s busbw_gbps=%.1f score=%d",
                         ext_verb_to_string(verb), a->req.namespace, a->req.name, a->req.uid,
                         a->req.count, ext_placement_to_string(a->req.placement), a->n, fits,
                         LOG_V(ext_args_name(a, (size_t)best, name)), gpus,
                         v->choice.busbw_gbps, v->priority);
        } else {
                const char *why = a->n > 0 ? ext_verdict_at(vs, rep, 0)->why : NULL;

                log_info("decision", "verb=%s pod=%s/%s uid=%s gpus_asked=%u placement=%s nodes=%zu "
                         "fit=0 reason=\"%s\"", ext_verb_to_string(verb), a->req.namespace,
                         a->req.name, a->req.uid, a->req.count,
                         ext_placement_to_string(a->req.placement), a->n,
                         why ? why : "no nodes");
        }
}

/* Each worker thread's names memo: the NodeNames list of its previous names-mode request,
 * filter or prioritize alike (kube-scheduler sends a pod's prioritize the list its filter
 * answered, on the connection it reuses: the same list when every node passed).  Made at
 * the thread's first such request, freed when the thread ends; a thread serves one request
 * at a time, so the memo needs no lock. */
static pthread_key_t memo_key;
static pthread_once_t memo_once = PTHREAD_ONCE_INIT;
static bool memo_key_ok;

static void
memo_free(void *p)
{
        ext_names_memo_release(p);
        free(p);
}

static void
memo_key_init(void)
{
        memo_key_ok = pthread_key_create(&memo_key, memo_free) == 0;
}

/* This thread's memo, NULL when none can be had (then none is used). */
static struct ext_names_memo *
thread_memo(void)
{
        struct ext_names_memo *m;

        pthread_once(&memo_once, memo_key_init);
        if (!memo_key_ok)
                return NULL;
        m = pthread_getspecific(memo_key);
        if (!m) {
                m = calloc(1, sizeof(*m));
                if (!m || pthread_setspecific(memo_key, m) != 0) {
                        free(m);
                        return NULL;
                }
        }
        return m;
}

static int
handle_filter_or_prioritize(struct ext_state *s, enum ext_verb verb, const char *body, size_t len,
                            struct buf *out)
{
        struct ext_names_memo *memo = thread_memo();
        CLEANUP(ext_cluster_unrefp) struct ext_cluster *c = ext_state_snapshot(s);
        CLEANUP(freep) struct ext_verdict *v = NULL;
        CLEANUP(freep) uint32_t *rep = NULL;
        struct ext_nodes rn = { 0 };
        struct ext_args a = { 0 };
        const char *why = NULL, *wait = NULL;
        char wait_name[EXT_NAME_MAX];
        uint32_t pass[EXT_FILTER_BEST_MAX]; /* the deciding filter's nodes (--filter-best) */
        size_t n_pass = SIZE_MAX;           /* SIZE_MAX: every node that fits passes */
        int r, fits;

        r = ext_args_decode_memo(body, len, &s->cfg, memo, &a, &why);
        if (r < 0) {
                ext_metrics_decision(&s->metrics, verb, EXT_OUTCOME_BAD_REQUEST);
                log_info("bad request", "verb=%s reason=\"%s\"", ext_verb_to_string(verb), why);
                return error_body(out, why ? why : "the request cannot be decoded"), status_of(r);
        }
        (void)ext_ledger_remember_request(s->ledger, &a.req);
        /* Compact verdicts (ext_filter_rep): node i's is v[rep[i]], and only the entries a
         * verdict is written to are read, so nothing needs clearing. */
        v = malloc(MAX(a.n, (size_t)1) * sizeof(*v));
        rep = malloc(MAX(a.n, (size_t)1) * sizeof(*rep));
        if (a.list_memo)
                atomic_fetch_add(&s->metrics.list_repeats[verb == EXT_VERB_PRIORITIZE], 1);
        if (!v || !rep || ext_nodes_resolve_memo(c, &s->cfg, &a, memo, &rn) < 0) {
                ext_nodes_release(&rn);
                ext_args_release(&a);
                return error_body(out, "out of memory"), 503;
        }
        if (verb == EXT_VERB_FILTER && s->cfg.filter_best > 0)
                fits = ext_filter_best_rep(c, s->ledger, &s->cfg, &a.req, rn.nodes, a.n,
                                           ext_now_ns(), v, rep, pass, &n_pass);
        else if (verb == EXT_VERB_FILTER)
                fits = ext_filter_rep(c, s->ledger, &s->cfg, &a.req, rn.nodes, a.n, ext_now_ns(),
                                      v, rep);
        else
                fits = ext_prioritize_rep(c, s->ledger, &s->cfg, &a.req, rn.nodes, a.n,
                                          ext_now_ns(), v, rep);
        if (fits < 0) {
                ext_nodes_release(&rn);
                ext_args_release(&a);
                return error_body(out, "too many nodes in one request"), 413;
        }

        {
                ssize_t best = count_outcomes(s, verb, v, rep, a.n);

                /* The deciding filter's one node is the best by its own tie-break (the
                 * name), which count_outcomes' first-in-request-order need not be. */
                if (n_pass == 1)
                        best = (ssize_t)pass[0];
                log_decision(verb, &a, v, rep, fits, best);
        }

        /* No node fits, but one is where the scheduler preempted for this pod and the view
         * still shows the victims' GPUs in use: it has deleted them and retried before this
         * view saw the deletions.  Answering "no room" would park the pod until some later
         * cluster event; an Error makes the scheduler retry it after its backoff. */
        for (size_t i = 0; verb == EXT_VERB_FILTER && fits == 0 && !wait && i < a.n; i++)
                if (ext_verdict_at(v, rep, i)->r != 0 &&
                    ext_ledger_grant_waiting(s->ledger, a.req.uid, rn.nodes[i], ext_now_ns()))
                        wait = ext_args_name(&a, i, wait_name);
        if (wait)
                log_info("decision", "verb=filter pod=%s/%s uid=%s node=%s outcome=victims_in_view "
                         "reason=\"the preemption's victims are still in the cluster view\"",
                         a.req.namespace, a.req.name, a.req.uid, LOG_V(wait));

        if (n_pass != SIZE_MAX)
                atomic_fetch_add(&s->metrics.filter_narrowed, 1);
        if (verb == EXT_VERB_FILTER)
                r = ext_filter_result_encode_pass(&a, v, rep, n_pass != SIZE_MAX ? pass : NULL,
                                                  n_pass,
                                                  wait ? "topofit: waiting for the cluster view "
                                                         "to see this pod's preemption victims "
                                                         "leave"
                                                       : NULL,
                                                  out);
        else
                r = ext_priorities_encode(&a, v, rep, out);
        if (memo)
                (void)ext_names_memo_keep(memo, &a, c, &rn); /* a failure only forgets */
        ext_nodes_release(&rn);
        ext_args_release(&a);
        if (r < 0)
                return error_body(out, "the answer is larger than the limit"), 500;
        return 200;
}

static int
handle_filter(struct ext_state *s, const char *body, size_t len, struct buf *out)
{
        return handle_filter_or_prioritize(s, EXT_VERB_FILTER, body, len, out);
}

static int
handle_prioritize(struct ext_state *s, const char *body, size_t len, struct buf *out)
{
        return handle_filter_or_prioritize(s, EXT_VERB_PRIORITIZE, body, len, out);
}

/* Bind only names the pod: its request comes from the pending ring that filter and
 * prioritize fill (or, in live mode after a restart, from the API server). */
static int
handle_bind(struct ext_state *s, const char *body, size_t len, struct buf *out)
{
        CLEANUP(ext_cluster_unrefp) struct ext_cluster *c = ext_state_snapshot(s);
        CLEANUP(freep) char *annotation = NULL;
        CLEANUP(freep) char *group_record = NULL;
        struct ext_binding b;
        struct ext_request req;
        struct score_choice choice;
        const struct ext_node *node;
        const char *why = NULL;
        char gpus[TOPO_MAX_GPUS * 4] = "";
        uint64_t now;
        int r;

        r = ext_binding_decode(body, len, &b, &why);
        if (r < 0) {
                ext_metrics_decision(&s->metrics, EXT_VERB_BIND, EXT_OUTCOME_BAD_REQUEST);
                return error_body(out, why), status_of(r);
        }
        {
                const struct ext_pod *p = ext_cluster_find_pod(c, b.pod_uid);

                if (p && p->node >= 0) {
                        r = -EALREADY;
                        why = "the pod is already bound";
                        goto fail;
                }
        }
        r = ext_ledger_lookup_request(s->ledger, b.pod_uid, &req);
        if (r < 0 && s->fetch_pod)
                r = s->fetch_pod(s, &b, &req);
        if (r < 0) {
                why = "the extender has not seen this pod in filter or prioritize";
                goto fail;
        }
        node = ext_cluster_find_node(c, b.node);
        now = ext_now_ns();
        r = ext_bind(c, s->ledger, &s->cfg, &req, b.node, now, &choice, &why);
        if (r == -EALREADY) {
                why = "the pod is already bound";
                goto fail;
        }
        if (r < 0)
                goto fail;
        r = ext_gpus_annotation_encode(&req, node, &choice, &annotation);
        /* A grouped pod carries its group's domain, so a restarted extender keeps the rest of
         * the gang there (ext_groups_restore); without it (out of memory) the binding still
         * goes through, only that restart guarantee is lost. */
        if (r >= 0)
                (void)ext_group_record_for(c, s->ledger, &req, now, &group_record);
        if (r < 0) {
                ext_ledger_release(s->ledger, b.pod_uid);
                why = "the GPU annotation cannot be written";
                goto fail;
        }
        /* A grouped pod whose group has no record (no domain to record) carries its group
         * id, so that a bound gang is known as one (preempt never splits it). */
        r = s->binder(s, &b, node, &choice.set, annotation, group_record,
                      !group_record && req.group.id[0] ? req.group.id : NULL, &why);
        if (r < 0) {
                ext_ledger_release(s->ledger, b.pod_uid);
                goto fail;
        }
        ext_ledger_forget_request(s->ledger, b.pod_uid);
        if (topo_mask_format(&choice.set, gpus, sizeof(gpus)) < 0)
                gpus[0] = 0;
        ext_metrics_decision(&s->metrics, EXT_VERB_BIND, EXT_OUTCOME_BOUND);
        log_info("decision", "verb=bind pod=%s/%s uid=%s node=%s outcome=bound gpus=%s "
                 "busbw_gbps=%.1f", b.pod_namespace, b.pod_name, b.pod_uid, b.node, gpus,
                 choice.busbw_gbps);
        ext_binding_result_encode(NULL, out);
        return 200;
fail:
        ext_metrics_decision(&s->metrics, EXT_VERB_BIND, EXT_OUTCOME_BIND_FAILED);
        log_info("decision", "verb=bind pod=%s/%s uid=%s node=%s outcome=failed reason=\"%s\"",
                 b.pod_namespace, b.pod_name, b.pod_uid, b.node, why ? why : "unknown");
        /* The scheduler reads Error from a 200 answer; it then retries the pod. */
        ext_binding_result_encode(why ? why : "binding failed", out);
        return 200;
}

static int
handle_preempt(struct ext_state *s, const char *body, size_t len, struct buf *out)
{
        CLEANUP(ext_cluster_unrefp) struct ext_cluster *c = ext_state_snapshot(s);
        CLEANUP(freep) bool *keep = NULL;
        CLEANUP(freep) bool **needed = NULL;
        struct ext_preempt_args a = { 0 };
        const char *why = NULL;
        int r;

        r = ext_preempt_args_decode(body, len, &s->cfg, &a, &why);
        if (r < 0) {
                ext_metrics_decision(&s->metrics, EXT_VERB_PREEMPT, EXT_OUTCOME_BAD_REQUEST);
                return error_body(out, why), status_of(r);
        }
        keep = calloc(MAX(a.n, (size_t)1), sizeof(*keep));
        needed = calloc(MAX(a.n, (size_t)1), sizeof(*needed));
        if (!keep || !needed) {
                ext_preempt_args_release(&a);
                return error_body(out, "out of memory"), 503;
        }
        for (size_t i = 0; i < a.n; i++) {
                const struct ext_node *node = ext_cluster_find_node(c, a.nodes[i].node);
                struct ext_verdict v;

                needed[i] = calloc(MAX(a.nodes[i].n_victims, (size_t)1), sizeof(bool));
                if (!needed[i])
                        continue;
                r = ext_preempt(c, s->ledger, &s->cfg, &a.req, node,
                                (const char *const *)a.nodes[i].victims, a.nodes[i].n_victims,
                                ext_now_ns(), needed[i], &v);
                keep[i] = r == 0;
                if (keep[i] && node) {
                        /* The GPUs of the chosen set that victims hold: until the view
                         * shows them gone, filter answers "wait", not "no room". */
                        struct topo_mask taken = v.choice.set;

                        topo_mask_and(&taken, &node->used);
                        if (topo_mask_count(&taken) > 0)
                                ext_ledger_grant(s->ledger, a.req.uid, node->name, &taken, ext_now_ns());
                }
                ext_metrics_decision(&s->metrics, EXT_VERB_PREEMPT,
                                     keep[i] ? EXT_OUTCOME_VICTIMS_KEPT : EXT_OUTCOME_NODE_DROPPED);
                log_info("decision", "verb=preempt pod=%s/%s uid=%s node=%s outcome=%s reason=\"%s\"",
                         a.req.namespace, a.req.name, a.req.uid, LOG_V(a.nodes[i].node),
                         keep[i] ? "victims_kept" : "node_dropped", keep[i] ? "" : v.why);
        }
        r = ext_preempt_result_encode(&a, keep, needed, out);
        for (size_t i = 0; i < a.n; i++)
                free(needed[i]);
        ext_preempt_args_release(&a);
        if (r < 0)
                return error_body(out, "the answer is larger than the limit"), 500;
        return 200;
}

static int
handle_healthz(struct ext_state *s, const char *body, size_t len, struct buf *out)
{
        buf_puts(out, "ok\n");
        return 200;
}

static int
handle_readyz(struct ext_state *s, const char *body, size_t len, struct buf *out)
{
        if (!atomic_load(&s->ready)) {
                buf_puts(out, "cluster view not synced\n");
                return 503;
        }
        buf_puts(out, "ok\n");
        return 200;
}

static int
handle_metrics(struct ext_state *s, const char *body, size_t len, struct buf *out)
{
        return ext_metrics_render(s, out) < 0 ? 500 : 200;
}

static int
handle_version(struct ext_state *s, const char *body, size_t len, struct buf *out)
{
        buf_printf(out, "{\"version\":\"%s\",\"mode\":\"%s\"}\n", TOPOFIT_VERSION, s->mode);
        return 200;
}

/* The GPU sets of the bound pods in the cluster view, for operators and the demo:
 * {"generation":N,"pods":[{"uid","node","gpus":[...]}]}. */
static int
handle_allocations(struct ext_state *s, const char *body, size_t len, struct buf *out)
{
        CLEANUP(ext_cluster_unrefp) struct ext_cluster *c = ext_state_snapshot(s);
        bool first = true;
        int r;

        r = buf_printf(out, "{\"generation\":%llu,\"pods\":[",
                       (unsigned long long)(c ? c->generation : 0));
        for (size_t i = 0; r >= 0 && c && i < c->n_pods; i++) {
                const struct ext_pod *p = &c->pods[i];
                char gpus[TOPO_MAX_GPUS * 4];

                if (p->node < 0)
                        continue;
                if (topo_mask_format(&p->gpus, gpus, sizeof(gpus)) < 0)
                        gpus[0] = 0;
                r = buf_puts(out, first ? "{\"uid\":" : ",{\"uid\":");
                first = false;
                if (r >= 0)
                        r = buf_put_json_string(out, p->uid);
                if (r >= 0)
                        r = buf_puts(out, ",\"node\":");
                if (r >= 0)
                        r = buf_put_json_string(out, c->nodes[p->node].name);
                if (r >= 0)
                        r = buf_printf(out, ",\"gpus\":[%s]}", gpus);
        }
        if (r >= 0)
                r = buf_puts(out, "]}\n");
        return r < 0 ? 500 : 200;
}

typedef int (*handler_fn)(struct ext_state *s, const char *body, size_t len, struct buf *out);

/* decides: the verb reads the cluster view to hand out GPUs, so it must not run on a view
 * that has not synced (a live extender just started has its nodes before its pods: every
 * GPU would look free). */
static const struct route {
        const char *path;
        const char *method;
        const char *type;
        handler_fn fn;
        bool decides;
} routes[_EXT_VERB_MAX] = {
        [EXT_VERB_FILTER] = { "/filter", "POST", "application/json", handle_filter, true },
        [EXT_VERB_PRIORITIZE] = { "/prioritize", "POST", "application/json", handle_prioritize,
                                  true },
        [EXT_VERB_BIND] = { "/bind", "POST", "application/json", handle_bind, true },
        [EXT_VERB_PREEMPT] = { "/preempt", "POST", "application/json", handle_preempt, true },
        [EXT_VERB_HEALTHZ] = { "/healthz", "GET", "text/plain; charset=utf-8", handle_healthz },
        [EXT_VERB_READYZ] = { "/readyz", "GET", "text/plain; charset=utf-8", handle_readyz },
        [EXT_VERB_METRICS] = { "/metrics", "GET", "text/plain; version=0.0.4; charset=utf-8",
                               handle_metrics },
        [EXT_VERB_VERSION] = { "/version", "GET", "application/json", handle_version },
        [EXT_VERB_ALLOCATIONS] = { "/allocations", "GET", "application/json", handle_allocations },
};

#define EXT_WHY_NOT_FOUND "no such verb: the extender serves /filter, /prioritize, /bind, " \
                          "/preempt, /healthz, /readyz, /metrics, /version, /allocations"

enum ext_verb
ext_route(const char *method, const char *path, int *ret_status, const char **ret_why)
{
        for (int v = 0; v < _EXT_VERB_MAX; v++) {
                if (!routes[v].path || strcmp(routes[v].path, path) != 0)
                        continue;
                if (strcmp(routes[v].method, method) == 0 ||
                    (strcmp(routes[v].method, "GET") == 0 && strcmp(method, "HEAD") == 0)) {
                        *ret_status = 0;
                        return (enum ext_verb)v;
                }
                *ret_status = 405;
                *ret_why = "method not allowed for this path";
                return (enum ext_verb)v;
        }
        *ret_status = 404;
        *ret_why = EXT_WHY_NOT_FOUND;
        return EXT_VERB_OTHER;
}

int
ext_handle(struct ext_state *s, enum ext_verb v, const char *body, size_t len, struct buf *out,
           const char **ret_type)
{
        assert(v >= 0 && v < _EXT_VERB_MAX && routes[v].fn);
        *ret_type = routes[v].type;
        if (routes[v].decides && !atomic_load(&s->ready)) {
                *ret_type = "application/json";
                error_body(out, "the cluster view has not synced with the API server yet; retry");
                return 503;
        }
        return routes[v].fn(s, body, len, out);
}
