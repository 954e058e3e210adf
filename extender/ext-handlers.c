/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The extender's route table and handlers: decode -> core verb -> encode, never touching a
 * socket (ext-server.c does the HTTP).  The one place where -errno becomes an HTTP status.
 * Each handler takes a reference to the current cluster view at its start and drops it at
 * its end, so a concurrent swap never pulls a view from under it; all GPU mutations go
 * through the core's ledger.  One structured log line per decision.
 */
#include "ext-server.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "str.h"
#include "topofit-version.h"

static const char *const verb_names[_EXT_VERB_MAX] = {
        [EXT_VERB_FILTER] = "filter",
        [EXT_VERB_PRIORITIZE] = "prioritize",
        [EXT_VERB_BIND] = "bind",
        [EXT_VERB_PREEMPT] = "preempt",
        [EXT_VERB_HEALTHZ] = "healthz",
        [EXT_VERB_READYZ] = "readyz",
        [EXT_VERB_METRICS] = "metrics",
        [EXT_VERB_VERSION] = "version",
        [EXT_VERB_ALLOCATIONS] = "allocations",
        [EXT_VERB_OTHER] = "other",
};

const char *
ext_verb_to_string(enum ext_verb v)
{
        return v >= 0 && v < _EXT_VERB_MAX ? verb_names[v] : NULL;
}

uint64_t
ext_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int
ext_state_init(struct ext_state *s, const struct ext_config *cfg)
{
        *s = (struct ext_state){ .cfg = *cfg, .binder = ext_static_binder, .mode = "static" };
        pthread_mutex_init(&s->snap_lock, NULL);
        pthread_mutex_init(&s->pending_lock, NULL);
        s->ledger = ext_ledger_new(&s->cfg);
        return s->ledger ? 0 : -ENOMEM;
}

void
ext_state_release(struct ext_state *s)
{
        s->snap = ext_cluster_unref(s->snap);
        s->ledger = ext_ledger_free(s->ledger);
        for (size_t i = 0; i < EXT_MAX_PENDING; i++)
                free(s->pending[i]);
        pthread_mutex_destroy(&s->snap_lock);
        pthread_mutex_destroy(&s->pending_lock);
}

int
ext_pending_remember(struct ext_state *s, const struct ext_request *req)
{
        struct ext_request *copy;
        size_t i;

        if (!req->uid[0])
                return -EINVAL;
        copy = malloc(sizeof(*copy));
        if (!copy)
                return -ENOMEM;
        *copy = *req;
        pthread_mutex_lock(&s->pending_lock);
        for (i = 0; i < EXT_MAX_PENDING; i++)
                if (s->pending[i] && strcmp(s->pending[i]->uid, req->uid) == 0)
                        break;
        if (i == EXT_MAX_PENDING)
                i = s->pending_next++ % EXT_MAX_PENDING;
        free(s->pending[i]);
        s->pending[i] = copy;
        pthread_mutex_unlock(&s->pending_lock);
        return 0;
}

int
ext_pending_lookup(struct ext_state *s, const char *uid, struct ext_request *ret)
{
        int r = -ENOENT;

        pthread_mutex_lock(&s->pending_lock);
        for (size_t i = 0; i < EXT_MAX_PENDING; i++)
                if (s->pending[i] && strcmp(s->pending[i]->uid, uid) == 0) {
                        *ret = *s->pending[i];
                        r = 0;
                        break;
                }
        pthread_mutex_unlock(&s->pending_lock);
        return r;
}

void
ext_pending_forget(struct ext_state *s, const char *uid)
{
        pthread_mutex_lock(&s->pending_lock);
        for (size_t i = 0; i < EXT_MAX_PENDING; i++)
                if (s->pending[i] && strcmp(s->pending[i]->uid, uid) == 0) {
                        free(s->pending[i]);
                        s->pending[i] = NULL;
                }
        pthread_mutex_unlock(&s->pending_lock);
}

void
ext_grant_remember(struct ext_state *s, const char *uid, const char *node,
                   const struct topo_mask *gpus, uint64_t now_ns)
{
        struct ext_grant *g = NULL;

        if (!uid[0])
                return;
        pthread_mutex_lock(&s->pending_lock);
        for (size_t i = 0; i < EXT_MAX_GRANTS && !g; i++)
                if (strcmp(s->grants[i].uid, uid) == 0 && strcmp(s->grants[i].node, node) == 0)
                        g = &s->grants[i];
        if (!g)
                g = &s->grants[s->grant_next++ % EXT_MAX_GRANTS];
        *g = (struct ext_grant){ .gpus = *gpus, .until_ns = now_ns + EXT_GRANT_NS };
        (void)str_copy(g->uid, sizeof(g->uid), uid, strlen(uid));
        (void)str_copy(g->node, sizeof(g->node), node, strlen(node));
        pthread_mutex_unlock(&s->pending_lock);
}

bool
ext_grant_waiting(struct ext_state *s, const char *uid, const struct ext_node *n, uint64_t now_ns)
{
        bool waiting = false;

        if (!uid[0] || !n)
                return false;
        pthread_mutex_lock(&s->pending_lock);
        for (size_t i = 0; i < EXT_MAX_GRANTS && !waiting; i++) {
                const struct ext_grant *g = &s->grants[i];

                if (g->until_ns <= now_ns || strcmp(g->uid, uid) != 0 || strcmp(g->node, n->name) != 0)
                        continue;
                for (size_t k = 0; k < ELEMENTSOF(g->gpus.w); k++)
                        waiting |= (g->gpus.w[k] & n->used.w[k]) != 0;
        }
        pthread_mutex_unlock(&s->pending_lock);
        return waiting;
}

struct ext_cluster *
ext_state_snapshot(struct ext_state *s)
{
        struct ext_cluster *c;

        pthread_mutex_lock(&s->snap_lock);
        c = ext_cluster_ref(s->snap);
        pthread_mutex_unlock(&s->snap_lock);
        return c;
}

void
ext_state_install(struct ext_state *s, struct ext_cluster *c)
{
        struct ext_cluster *old;

        pthread_mutex_lock(&s->snap_lock);
        old = s->snap;
        s->snap = c;
        pthread_mutex_unlock(&s->snap_lock);
        ext_cluster_unref(old);
        ext_ledger_prune(s->ledger, c, ext_now_ns());
}

int
ext_static_binder(struct ext_state *s, const struct ext_binding *b, const struct ext_node *node,
                  const struct topo_mask *gpus, const char *annotation, const char **ret_why)
{
        int r;

        /* Binds are serialized here so that concurrent ones each see the other's pod. */
        pthread_mutex_lock(&s->snap_lock);
        {
                struct ext_cluster *next = NULL;

                r = ext_cluster_with_pod(s->snap, &s->cfg, b->pod_uid, b->pod_namespace,
                                         b->pod_name, node->name, gpus, &next);
                if (r >= 0) {
                        ext_cluster_unref(s->snap);
                        s->snap = next;
                }
        }
        pthread_mutex_unlock(&s->snap_lock);
        if (r == -EEXIST)
                return set_why(ret_why, "the pod is already bound"), r;
        if (r < 0)
                return set_why(ret_why, "the in-memory cluster could not be updated"), r;
        {
                /* The view now shows the pod: its committed ledger entry can go. */
                CLEANUP(ext_cluster_unrefp) struct ext_cluster *c = ext_state_snapshot(s);

                ext_ledger_prune(s->ledger, c, ext_now_ns());
        }
        return 0;
}

/* Resolves the request's nodes: cached view by name, or (Nodes mode) the Node objects the
 * scheduler sent when the view does not have them.  *extra holds those, allocated at the
 * first such node (usually never: the view has them all); release them and free it.
 * -ENOMEM when that allocation fails. */
static int
resolve_nodes(struct ext_state *s, const struct ext_cluster *c, const struct ext_args *a,
              const struct ext_node **nodes, struct ext_node **extra, size_t *ret_n_extra)
{
        size_t n_extra = 0;

        for (size_t i = 0; i < a->n; i++) {
                nodes[i] = ext_cluster_find_node(c, a->names[i]);
                if (nodes[i] || a->node_names)
                        continue;
                if (!*extra) {
                        *extra = malloc((a->n - i) * sizeof(**extra));
                        if (!*extra)
                                return -ENOMEM;
                }
                if (ext_node_init(&(*extra)[n_extra], &s->cfg, a->names[i], a->topo_json[i],
                                  a->topo_len[i], a->gpu_capacity[i], NULL) < 0)
                        continue; /* stays NULL: "not in the cluster view" */
                nodes[i] = &(*extra)[n_extra++];
        }
        *ret_n_extra = n_extra;
        return 0;
}

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

static int
handle_filter_or_prioritize(struct ext_state *s, enum ext_verb verb, const char *body, size_t len,
                            struct buf *out)
{
        CLEANUP(ext_cluster_unrefp) struct ext_cluster *c = ext_state_snapshot(s);
        CLEANUP(freep) const struct ext_node **nodes = NULL;
        CLEANUP(freep) struct ext_node *extra = NULL;
        CLEANUP(freep) struct ext_verdict *v = NULL;
        struct ext_args a = { 0 };
        const char *why = NULL, *wait = NULL;
        size_t n_extra = 0;
        int r, fits, best = -1;

        r = ext_args_decode(body, len, &s->cfg, &a, &why);
        if (r < 0) {
                ext_metrics_decision(&s->metrics, verb, EXT_OUTCOME_BAD_REQUEST);
                log_info("bad request", "verb=%s reason=\"%s\"", ext_verb_to_string(verb), why);
                return error_body(out, why ? why : "the request cannot be decoded"), status_of(r);
        }
        (void)ext_pending_remember(s, &a.req);
        /* Every entry is written before it is read: no need to clear them. */
        nodes = malloc(MAX(a.n, (size_t)1) * sizeof(*nodes));
        v = malloc(MAX(a.n, (size_t)1) * sizeof(*v));
        if (!nodes || !v || resolve_nodes(s, c, &a, nodes, &extra, &n_extra) < 0) {
                ext_args_release(&a);
                return error_body(out, "out of memory"), 503;
        }
        if (verb == EXT_VERB_FILTER)
                fits = ext_filter(c, s->ledger, &s->cfg, &a.req, nodes, a.n, ext_now_ns(), v);
        else
                fits = ext_prioritize(c, s->ledger, &s->cfg, &a.req, nodes, a.n, ext_now_ns(), v);

        {
                /* Counted locally, added once: no atomic per node. */
                uint64_t outcomes[_EXT_OUTCOME_MAX] = { 0 };

                for (size_t i = 0; i < a.n; i++)
                        outcomes[v[i].r == 0                        ? EXT_OUTCOME_FIT
                                 : ext_verdict_unresolvable(&v[i]) ? EXT_OUTCOME_UNRESOLVABLE
                                                                   : EXT_OUTCOME_NO_FIT]++;
                for (int o = 0; o < _EXT_OUTCOME_MAX; o++)
                        if (outcomes[o])
                                atomic_fetch_add(&s->metrics.decisions[verb][o], outcomes[o]);
        }
        for (size_t i = 0; i < a.n; i++) {
                if (log_get_level() >= LOG_LEVEL_DEBUG)
                        log_verdict(verb, &a.req, a.names[i], &v[i]);
                if (v[i].r == 0 && (best < 0 || v[i].priority > v[best].priority))
                        best = (int)i;
        }
        if (best >= 0) {
                char gpus[TOPO_MAX_GPUS * 4];

                if (topo_mask_format(&v[best].choice.set, gpus, sizeof(gpus)) < 0)
                        gpus[0] = 0;
                log_info("decision", "verb=%s pod=%s/%s uid=%s gpus_asked=%u placement=%s nodes=%zu "
                         "fit=%d best_node=%s gpus=%s busbw_gbps=%.1f score=%d",
                         ext_verb_to_string(verb), a.req.namespace, a.req.name, a.req.uid,
                         a.req.count, ext_placement_to_string(a.req.placement), a.n, fits,
                         LOG_V(a.names[best]), gpus, v[best].choice.busbw_gbps, v[best].priority);
        } else
                log_info("decision", "verb=%s pod=%s/%s uid=%s gpus_asked=%u placement=%s nodes=%zu "
                         "fit=0 reason=\"%s\"", ext_verb_to_string(verb), a.req.namespace,
                         a.req.name, a.req.uid, a.req.count,
                         ext_placement_to_string(a.req.placement), a.n,
                         a.n > 0 && v[0].why ? v[0].why : "no nodes");

        /* No node fits, but one is where the scheduler preempted for this pod and the view
         * still shows the victims' GPUs in use: it has deleted them and retried before this
         * view saw the deletions.  Answering "no room" would park the pod until some later
         * cluster event; an Error makes the scheduler retry it after its backoff. */
        for (size_t i = 0; verb == EXT_VERB_FILTER && fits == 0 && !wait && i < a.n; i++)
                if (v[i].r != 0 && ext_grant_waiting(s, a.req.uid, nodes[i], ext_now_ns()))
                        wait = a.names[i];
        if (wait)
                log_info("decision", "verb=filter pod=%s/%s uid=%s node=%s outcome=victims_in_view "
                         "reason=\"the preemption's victims are still in the cluster view\"",
                         a.req.namespace, a.req.name, a.req.uid, LOG_V(wait));

        if (verb == EXT_VERB_FILTER)
                r = ext_filter_result_encode(&a, v, wait ? "topofit: waiting for the cluster view "
                                             "to see this pod's preemption victims leave" : NULL, out);
        else
                r = ext_priorities_encode(&a, v, out);
        for (size_t i = 0; i < n_extra; i++)
                ext_node_release(&extra[i]);
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
        struct ext_binding b;
        struct ext_request req;
        struct score_choice choice;
        const struct ext_node *node;
        const char *why = NULL;
        char gpus[TOPO_MAX_GPUS * 4] = "";
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
        r = ext_pending_lookup(s, b.pod_uid, &req);
        if (r < 0 && s->fetch_pod)
                r = s->fetch_pod(s, &b, &req);
        if (r < 0) {
                why = "the extender has not seen this pod in filter or prioritize";
                goto fail;
        }
        node = ext_cluster_find_node(c, b.node);
        r = ext_bind(c, s->ledger, &s->cfg, &req, b.node, ext_now_ns(), &choice, &why);
        if (r == -EALREADY) {
                why = "the pod is already bound";
                goto fail;
        }
        if (r < 0)
                goto fail;
        r = ext_gpus_annotation_encode(&req, node, &choice, &annotation);
        if (r < 0) {
                ext_ledger_release(s->ledger, b.pod_uid);
                why = "the GPU annotation cannot be written";
                goto fail;
        }
        r = s->binder(s, &b, node, &choice.set, annotation, &why);
        if (r < 0) {
                ext_ledger_release(s->ledger, b.pod_uid);
                goto fail;
        }
        ext_pending_forget(s, b.pod_uid);
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
                        struct topo_mask taken;

                        for (size_t k = 0; k < ELEMENTSOF(taken.w); k++)
                                taken.w[k] = v.choice.set.w[k] & node->used.w[k];
                        if (topo_mask_count(&taken) > 0)
                                ext_grant_remember(s, a.req.uid, node->name, &taken, ext_now_ns());
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

enum ext_verb
ext_route(const char *method, const char *path, bool *ret_method_ok)
{
        for (int v = 0; v < _EXT_VERB_MAX; v++) {
                if (!routes[v].path || strcmp(routes[v].path, path) != 0)
                        continue;
                *ret_method_ok = strcmp(routes[v].method, method) == 0 ||
                                 (strcmp(routes[v].method, "GET") == 0 &&
                                  strcmp(method, "HEAD") == 0);
                return (enum ext_verb)v;
        }
        *ret_method_ok = false;
        return EXT_VERB_OTHER;
}

int
ext_handle(struct ext_state *s, const char *method, const char *path, const char *body,
           size_t len, struct buf *out, const char **ret_type, enum ext_verb *ret_verb)
{
        bool method_ok;
        enum ext_verb v = ext_route(method, path, &method_ok);

        *ret_verb = v;
        *ret_type = "application/json";
        if (v == EXT_VERB_OTHER) {
                error_body(out, "no such verb: the extender serves /filter, /prioritize, /bind, "
                                "/preempt, /healthz, /readyz, /metrics, /version, /allocations");
                return 404;
        }
        if (!method_ok) {
                error_body(out, "method not allowed for this path");
                return 405;
        }
        *ret_type = routes[v].type;
        if (routes[v].decides && !atomic_load(&s->ready)) {
                *ret_type = "application/json";
                error_body(out, "the cluster view has not synced with the API server yet; retry");
                return 503;
        }
        return routes[v].fn(s, body, len, out);
}
