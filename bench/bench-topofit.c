/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The topofit policy: the extender's own decision path (extender/ext-core.h), called as a
 * library, exactly as the HTTP server calls it: a cluster snapshot built from the nodes'
 * topology annotations and the live pods' GPU sets, ext_prioritize() over every node (the
 * highest priority wins, ties by node name, as the extender's reservation does), then
 * ext_bind() on that node, which commits the set in the reservation ledger.  The snapshot
 * is rebuilt only when the simulated cluster changed (the informer's job in a real
 * cluster; not counted as decision time); simulated seconds become the ledger's clock.
 */
#include "bench-private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../extender/ext-core.h"

struct topofit_state {
        struct ext_config cfg;
        struct ext_ledger *ledger;
        struct ext_cluster *snap;
        uint64_t snap_gen;
        char **annotation;                /* per node type */
        size_t *annotation_len;
        unsigned n_types;
        const struct ext_node **nodes;    /* snapshot order (by name) */
        unsigned *sim_index;              /* snapshot index -> simulator node */
        int *snap_index;                  /* simulator node -> snapshot index */
        struct ext_verdict *verdicts;
};

static void
topofit_done(void *p)
{
        struct topofit_state *st = p;

        if (!st)
                return;
        ext_ledger_free(st->ledger);
        ext_cluster_unref(st->snap);
        for (unsigned t = 0; st->annotation && t < st->n_types; t++)
                free(st->annotation[t]);
        free(st->annotation);
        free(st->annotation_len);
        free(st->nodes);
        free(st->sim_index);
        free(st->snap_index);
        free(st->verdicts);
        free(st);
}

static uint64_t
now_ns(const struct bench_sim *s)
{
        return (uint64_t)(s->now * 1e9);
}

/* Builds the snapshot of the simulated cluster: every node with its type's annotation and
 * every running job as a pod with its GPU set. */
static int
rebuild(struct bench_sim *s, struct topofit_state *st)
{
        CLEANUP(ext_cluster_builder_freep) struct ext_cluster_builder *b = NULL;
        struct ext_cluster *snap = NULL;
        char uid[32], name[32];
        int r;

        b = ext_cluster_builder_new(&st->cfg, st->snap);
        if (!b)
                return -ENOMEM;
        for (unsigned i = 0; i < s->n_nodes; i++) {
                const struct bench_sim_node *n = &s->nodes[i];

                r = ext_cluster_builder_add_node(b, n->name, st->annotation[n->type],
                                                 st->annotation_len[n->type], n->n_gpus, NULL);
                if (r < 0)
                        return r;
        }
        for (unsigned k = 0; k < s->n_running; k++) {
                const struct bench_job_result *res = &s->results[s->running[k]];

                snprintf(uid, sizeof(uid), "job-%u", res->job);
                snprintf(name, sizeof(name), "job-%u", res->job);
                r = ext_cluster_builder_add_pod(b, uid, "bench", name, s->nodes[res->node].name,
                                                &res->set);
                if (r < 0)
                        return r;
        }
        r = ext_cluster_builder_finish(TAKE_PTR(b), s->generation, &snap);
        if (r < 0)
                return r;
        ext_cluster_unref(st->snap);
        st->snap = snap;
        st->snap_gen = s->generation;
        if (snap->n_nodes != s->n_nodes)
                return -EPROTO;
        for (size_t k = 0; k < snap->n_nodes; k++) {
                const struct ext_node *en = &snap->nodes[k];
                int idx = -1;

                /* Names never change, so after the first build this check is all it does. */
                if (st->sim_index[k] < s->n_nodes &&
                    strcmp(s->nodes[st->sim_index[k]].name, en->name) == 0)
                        idx = (int)st->sim_index[k];
                for (unsigned i = 0; idx < 0 && i < s->n_nodes; i++)
                        if (strcmp(s->nodes[i].name, en->name) == 0)
                                idx = (int)i;
                if (idx < 0)
                        return -EPROTO;
                st->nodes[k] = en;
                st->sim_index[k] = (unsigned)idx;
                st->snap_index[idx] = (int)k;
        }
        ext_ledger_prune(st->ledger, snap, now_ns(s));
        return 0;
}

static int
topofit_init(struct bench_sim *s, void **ret_state)
{
        struct topofit_state *st = calloc(1, sizeof(*st));
        int r;

        if (!st)
                return -ENOMEM;
        ext_config_default(&st->cfg);
        st->n_types = s->cl->n_types;
        st->ledger = ext_ledger_new(&st->cfg);
        st->annotation = calloc(st->n_types, sizeof(*st->annotation));
        st->annotation_len = calloc(st->n_types, sizeof(*st->annotation_len));
        st->nodes = calloc(s->n_nodes, sizeof(*st->nodes));
        st->sim_index = calloc(s->n_nodes, sizeof(*st->sim_index));
        st->snap_index = calloc(s->n_nodes, sizeof(*st->snap_index));
        st->verdicts = calloc(s->n_nodes, sizeof(*st->verdicts));
        if (!st->ledger || !st->annotation || !st->annotation_len || !st->nodes ||
            !st->sim_index || !st->snap_index || !st->verdicts) {
                topofit_done(st);
                return -ENOMEM;
        }
        for (unsigned i = 0; i < s->n_nodes; i++)
                st->sim_index[i] = UINT32_MAX;
        /* The extender reads nodes from their topofit.io/topology annotation: give it
         * exactly that, produced by the topology library from the loaded topology. */
        for (unsigned t = 0; t < st->n_types; t++) {
                r = topo_to_annotation(s->cl->types[t].topo, &st->annotation[t],
                                       &st->annotation_len[t]);
                if (r < 0) {
                        topofit_done(st);
                        return r;
                }
        }
        st->snap_gen = UINT64_MAX;
        *ret_state = st;
        return 0;
}

static int
topofit_prepare(struct bench_sim *s, void *p)
{
        struct topofit_state *st = p;

        return st->snap_gen == s->generation ? 0 : rebuild(s, st);
}

static int
topofit_place(struct bench_sim *s, void *p, unsigned job, unsigned gpus, unsigned *ret_node,
              struct topo_mask *ret_set)
{
        struct topofit_state *st = p;
        struct ext_request req = {
                .count = gpus,
                .placement = EXT_PLACEMENT_BEST_EFFORT,
                .n_containers = 1,
        };
        struct score_choice choice;
        const char *why = NULL;
        int best = -1, n, r;

        if (st->snap_gen != s->generation)
                return -EPROTO; /* prepare() keeps the snapshot current */
        snprintf(req.uid, sizeof(req.uid), "job-%u", job);
        snprintf(req.name, sizeof(req.name), "job-%u", job);
        snprintf(req.namespace, sizeof(req.namespace), "bench");
        req.require = ext_placement_require(req.placement);
        req.containers[0].count = gpus;
        snprintf(req.containers[0].name, sizeof(req.containers[0].name), "main");

        n = ext_prioritize(st->snap, st->ledger, &st->cfg, &req, st->nodes, st->snap->n_nodes,
                           now_ns(s), st->verdicts);
        if (n < 0)
                return n;
        if (n == 0)
                return -ENOSPC;
        /* kube-scheduler binds to the highest score; nodes come sorted by name, so the
         * first of equals is the extender's own tie-break. */
        for (size_t k = 0; k < st->snap->n_nodes; k++)
                if (st->verdicts[k].r == 0 &&
                    (best < 0 || st->verdicts[k].priority > st->verdicts[best].priority))
                        best = (int)k;
        if (best < 0)
                return -ENOSPC;
        r = ext_bind(st->snap, st->ledger, &st->cfg, &req, st->nodes[best]->name, now_ns(s),
                     &choice, &why);
        if (r < 0)
                return r == -EAGAIN || r == -ENOEXEC ? -ENOSPC : r;
        *ret_node = st->sim_index[best];
        *ret_set = choice.set;
        return 0;
}

const struct bench_policy_ops bench__topofit_ops = {
        .init = topofit_init,
        .done = topofit_done,
        .prepare = topofit_prepare,
        .place = topofit_place,
};
