/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The extender program's shared state (ext-server.h): the current cluster view, swapped
 * whole under snap_lock, the ledger it owns, the static-mode binder, the clock and the
 * verbs' names.  The handlers (ext-handlers.c), the metrics (ext-metrics.c), the server
 * and live mode use it; it uses none of them, so they never call each other through it.
 */
#include "ext-server.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "str.h"

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

DEFINE_STRING_TABLE_TO_STRING(ext_verb, enum ext_verb, verb_names)

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
        s->ledger = ext_ledger_new(&s->cfg);
        return s->ledger ? 0 : -ENOMEM;
}

void
ext_state_release(struct ext_state *s)
{
        s->snap = ext_cluster_unref(s->snap);
        s->ledger = ext_ledger_free(s->ledger);
        pthread_mutex_destroy(&s->snap_lock);
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
                  const struct topo_mask *gpus, const char *annotation, const char *group_record,
                  const char *group_id, const char **ret_why)
{
        int r;

        /* The view is the file's plus these bindings: nothing to restart, but the group
         * record (or group id) says which gang the pod is in (preempt keeps gangs whole). */
        /* Binds are serialized here so that concurrent ones each see the other's pod. */
        pthread_mutex_lock(&s->snap_lock);
        {
                struct ext_cluster *next = NULL;

                r = ext_cluster_with_pod(s->snap, &s->cfg, b->pod_uid, b->pod_namespace,
                                         b->pod_name, node->name, gpus, group_record, group_id,
                                         &next);
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
