/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Verdicts kept per snapshot, across requests: for each request shape (what decide() and
 * the cluster term read of a request and the configuration: ext_verdict_key), a table of
 * the verdict of each node state of the snapshot (ext_cluster.node_state).  filter_common
 * already decides each state once per request; with the table, a request of a shape seen
 * before in this snapshot decides none, it copies them.  The snapshot's node states and
 * its cluster view are fixed for its life, so an entry, once written, stays true until the
 * snapshot is dropped, and it is dropped with it: no invalidation.
 *
 * Concurrency: the snapshot is shared by the worker threads.  The memo's list of tables
 * is under a mutex, taken once per request to find (or make) its table; a table is
 * refcounted, so one evicted (least recently used, when EXT_VERDICT_TABLES are in use)
 * lives on until the last request holding it is done.  Entries are written without the
 * mutex: each state's flag goes empty -> being written (one compare-and-swap: one writer
 * wins, a loser keeps its own verdict) -> ready (a release store after the verdict's
 * bytes; a reader's acquire load sees them whole).
 */
#include "ext-core-private.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum {
        SLOT_EMPTY,
        SLOT_WRITING,
        SLOT_READY,
};

struct ext_verdict_table {
        unsigned n_ref;
        struct ext_verdict_key key;
        uint32_t n_states;
        uint64_t used; /* the memo's tick when last handed out (under its mutex) */
        uint8_t *flag; /* n_states, SLOT_* */
        struct ext_verdict *v;
};

struct ext_verdict_memo {
        pthread_mutex_t lock;
        uint64_t tick;
        size_t n;
        struct ext_verdict_table *t[EXT_VERDICT_TABLES];
};

struct ext_verdict_memo *
ext__verdict_memo_new(void)
{
        struct ext_verdict_memo *m = calloc(1, sizeof(*m));

        if (m && pthread_mutex_init(&m->lock, NULL) != 0) {
                free(m);
                return NULL;
        }
        return m;
}

struct ext_verdict_table *
ext__verdict_table_unref(struct ext_verdict_table *t)
{
        if (t && __atomic_sub_fetch(&t->n_ref, 1, __ATOMIC_ACQ_REL) == 0) {
                free(t->flag);
                free(t->v);
                free(t);
        }
        return NULL;
}

struct ext_verdict_memo *
ext__verdict_memo_free(struct ext_verdict_memo *m)
{
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n; i++)
                ext__verdict_table_unref(m->t[i]);
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
}

static bool
key_equal(const struct ext_verdict_key *a, const struct ext_verdict_key *b)
{
        return a->count == b->count && a->require == b->require &&
               a->placement == b->placement && a->with_priority == b->with_priority &&
               a->reject_unannotated == b->reject_unannotated && a->loss == b->loss;
}

static struct ext_verdict_table *
table_new(const struct ext_verdict_key *key, uint32_t n_states)
{
        struct ext_verdict_table *t = calloc(1, sizeof(*t));

        if (!t)
                return NULL;
        t->n_ref = 1;
        t->key = *key;
        t->n_states = n_states;
        /* Zeroed: every flag SLOT_EMPTY.  The verdicts' pages stay untouched (not resident)
         * until a state is written. */
        t->flag = calloc(n_states, sizeof(*t->flag));
        t->v = malloc((size_t)n_states * sizeof(*t->v));
        if (!t->flag || !t->v)
                return ext__verdict_table_unref(t);
        return t;
}

struct ext_verdict_table *
ext__verdict_table_get(struct ext_verdict_memo *m, const struct ext_verdict_key *key,
                       uint32_t n_states)
{
        struct ext_verdict_table *t = NULL;
        size_t at = 0;

        if (!m || n_states == 0 ||
            (size_t)n_states * (sizeof(struct ext_verdict) + 1) > EXT_VERDICT_TABLE_MAX_BYTES)
                return NULL;
        pthread_mutex_lock(&m->lock);
        for (size_t i = 0; i < m->n && !t; i++)
                if (m->t[i]->n_states == n_states && key_equal(&m->t[i]->key, key))
                        t = m->t[i];
        if (!t) {
                t = table_new(key, n_states);
                if (t && m->n < ELEMENTSOF(m->t))
                        m->t[m->n++] = t;
                else if (t) {
                        /* Full: the least recently used one makes room (freed by its last
                         * holder). */
                        for (size_t i = 1; i < m->n; i++)
                                if (m->t[i]->used < m->t[at]->used)
                                        at = i;
                        ext__verdict_table_unref(m->t[at]);
                        m->t[at] = t;
                }
        }
        if (t) {
                t->used = ++m->tick;
                __atomic_add_fetch(&t->n_ref, 1, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&m->lock);
        return t;
}

bool
ext__verdict_table_read(const struct ext_verdict_table *t, uint32_t state,
                        struct ext_verdict *ret)
{
        if (!t || state >= t->n_states ||
            __atomic_load_n(&t->flag[state], __ATOMIC_ACQUIRE) != SLOT_READY)
                return false;
        *ret = t->v[state];
        return true;
}

void
ext__verdict_table_write(struct ext_verdict_table *t, uint32_t state, const struct ext_verdict *v)
{
        uint8_t empty = SLOT_EMPTY;

        if (!t || state >= t->n_states ||
            !__atomic_compare_exchange_n(&t->flag[state], &empty, SLOT_WRITING, false,
                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                return;
        t->v[state] = *v;
        __atomic_store_n(&t->flag[state], SLOT_READY, __ATOMIC_RELEASE);
}
