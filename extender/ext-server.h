/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The extender program's internals (not a library interface): the service state that the
 * HTTP server, the handlers, the metrics and main share.  The cluster view is swapped whole
 * under snap_lock; handlers take a reference at the start of a request and drop it at the
 * end.  Everything else mutable lives in the ledger (ext-core) or in atomic counters.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "ext-core.h"

#define EXT_MAX_CONFIG_BYTES (64u << 10) /* the config file */
#define EXT_MAX_RESPONSE (64u << 20)    /* full-mode echo of EXT_MAX_NODES Node objects */
#define EXT_DEFAULT_THREADS 4
#define EXT_MAX_THREADS 64
/* Connections and request bodies (all but the memory constants can be lowered by flags):
 * a client may hold EXT_MAX_CONNECTIONS_PER_IP of the EXT_MAX_CONNECTIONS; a connection that
 * sends nothing for EXT_IDLE_TIMEOUT_S (no request head yet, idle between requests, a
 * stalled body) is closed; a body must arrive whole within EXT_BODY_TIMEOUT_S of its head;
 * the bodies being received together hold at most EXT_BODY_BUDGET bytes. */
#define EXT_MAX_CONNECTIONS 1024
#define EXT_MAX_CONNECTIONS_PER_IP 128  /* kube-scheduler needs a handful; see docs/extender.md */
#define EXT_IDLE_TIMEOUT_S 5
#define EXT_BODY_TIMEOUT_S 10
#define EXT_MAX_TIMEOUT_S 3600
/* A filter, prioritize or preempt request whose bytes waited unread longer than this is
 * answered 503 with Retry-After (less while the server is behind: ext-server.c). */
#define EXT_QUEUE_TIMEOUT_MS 1000
#define EXT_MAX_QUEUE_TIMEOUT_MS 60000
#define EXT_BODY_BUDGET (64u << 20)     /* >= EXT_MAX_BODY, so one largest body always fits */
#define EXT_MAX_BODY_BUDGET (4096ull << 20)
#define EXT_CONNECTION_MEMORY (32u << 10) /* microhttpd's per-connection pool: head + read buffer */

/* Route verbs, also the metrics' verb label. */
enum ext_verb {
        EXT_VERB_FILTER,
        EXT_VERB_PRIORITIZE,
        EXT_VERB_BIND,
        EXT_VERB_PREEMPT,
        EXT_VERB_HEALTHZ,
        EXT_VERB_READYZ,
        EXT_VERB_METRICS,
        EXT_VERB_VERSION,
        EXT_VERB_ALLOCATIONS,
        EXT_VERB_OTHER, /* unknown path or method */
        _EXT_VERB_MAX,
        _EXT_VERB_INVALID = -EINVAL,
};
const char *ext_verb_to_string(enum ext_verb v);

/* Decision outcomes counted in topofit_extender_decisions_total. */
enum ext_outcome {
        EXT_OUTCOME_FIT,
        EXT_OUTCOME_NO_FIT,
        EXT_OUTCOME_UNRESOLVABLE,
        EXT_OUTCOME_BOUND,
        EXT_OUTCOME_BIND_FAILED,
        EXT_OUTCOME_VICTIMS_KEPT,
        EXT_OUTCOME_NODE_DROPPED,
        EXT_OUTCOME_BAD_REQUEST,
        _EXT_OUTCOME_MAX,
        _EXT_OUTCOME_INVALID = -EINVAL,
};

/* Connections the extender closed without an answer (counted in
 * topofit_extender_connections_cut_total{reason}). */
enum ext_cut {
        EXT_CUT_HEAD_DEADLINE,  /* no complete request head within the idle timeout */
        EXT_CUT_BODY_DEADLINE,  /* the body not complete within the body timeout */
        EXT_CUT_BODY_TOO_LARGE, /* a chunked body passed EXT_MAX_BODY */
        EXT_CUT_BODY_BUDGET,    /* a chunked body passed what was left of the body budget */
        _EXT_CUT_MAX,
        _EXT_CUT_INVALID = -EINVAL,
};
const char *ext_cut_to_string(enum ext_cut c);

#define EXT_N_BUCKETS 14
#define EXT_N_CODES 8

struct ext_metrics {
        atomic_uint_fast64_t requests[_EXT_VERB_MAX][EXT_N_CODES];
        atomic_uint_fast64_t latency_bucket[_EXT_VERB_MAX][EXT_N_BUCKETS];
        atomic_uint_fast64_t latency_count[_EXT_VERB_MAX];
        atomic_uint_fast64_t latency_sum_ns[_EXT_VERB_MAX];
        atomic_uint_fast64_t decisions[_EXT_VERB_MAX][_EXT_OUTCOME_MAX];
        atomic_uint_fast64_t cuts[_EXT_CUT_MAX];
        atomic_uint_fast64_t connections; /* accepted (each a TLS handshake with HTTPS) */
        /* Names-mode filter and prioritize requests whose NodeNames repeated the list the
         * serving worker kept from its previous one (ext_names_memo), by verb (filter,
         * prioritize). */
        atomic_uint_fast64_t list_repeats[2];
        /* Filter answers that passed only the best nodes of more that fit (--filter-best). */
        atomic_uint_fast64_t filter_narrowed;
};

struct ext_state;

/* Live mode: the counters of the watches behind the cluster view, for /metrics. */
struct ext_watch_stats {
        uint64_t events;        /* watch events applied (bookmarks included) */
        uint64_t relists;       /* LISTs after the first: 410 Gone, a lost event, errors */
        uint64_t reconnects;    /* watches resumed after the first */
        uint64_t errors;        /* failed LISTs and WATCHes */
        uint64_t decode_errors; /* objects that did not decode (left out of the view) */
        uint64_t rebuilds;      /* cluster views built from the cache and installed */
        uint64_t rebuild_cpu_ns; /* the rebuild thread's CPU time for them */
};

/* Writes the binding (live: POST pods/{name}/binding with the GPU annotation and, for a
 * grouped pod, the group record (NULL: none; EXT_GROUP_RECORD_ANNOTATION) or, when its group
 * has none, the group id (NULL: not grouped; EXT_GROUP_ID_ANNOTATION); static: a new
 * snapshot).  Returns 0 or a negative errno with *ret_why. */
typedef int (*ext_binder_fn)(struct ext_state *s, const struct ext_binding *b,
                             const struct ext_node *node, const struct topo_mask *gpus,
                             const char *annotation, const char *group_record,
                             const char *group_id, const char **ret_why);

struct ext_state {
        struct ext_config cfg;
        pthread_mutex_t snap_lock;
        struct ext_cluster *snap;      /* current view, swapped whole */
        struct ext_ledger *ledger;
        ext_binder_fn binder;
        void *binder_data;
        atomic_bool ready;             /* the cluster view has synced */
        const char *mode;              /* "static" or "live" */
        /* Live mode: fetches a pod the ledger no longer remembers (after a restart).
         * Optional. */
        int (*fetch_pod)(struct ext_state *s, const struct ext_binding *b, struct ext_request *ret);
        /* Live mode: the watches' counters.  Optional. */
        void (*watch_stats)(struct ext_state *s, struct ext_watch_stats *ret);
        struct ext_metrics metrics;
};

int ext_state_init(struct ext_state *s, const struct ext_config *cfg);
void ext_state_release(struct ext_state *s);
/* A new reference to the current view (never NULL once a view is installed). */
struct ext_cluster *ext_state_snapshot(struct ext_state *s);
/* Installs c (takes the reference) and prunes the ledger against it. */
void ext_state_install(struct ext_state *s, struct ext_cluster *c);
/* The static-mode binder: the bound pod joins the in-memory view. */
int ext_static_binder(struct ext_state *s, const struct ext_binding *b, const struct ext_node *node,
                      const struct topo_mask *gpus, const char *annotation,
                      const char *group_record, const char *group_id, const char **ret_why);

uint64_t ext_now_ns(void);

/* Live mode (ext-live.c): the view from kube-client's cache of the API server named by
 * kubeconfig (NULL: $KUBECONFIG, in-cluster, ~/.kube/config), bindings through the API.
 * Sets s's binder and mode.  Stop it before releasing s. */
struct ext_live;
int ext_live_start(struct ext_state *s, const char *kubeconfig, struct ext_live **ret,
                   const char **ret_why);
struct ext_live *ext_live_stop(struct ext_live *lv);

/* A live rebuild's node step, for microbench/live-labels-bench: the label key lengths the
 * builder keeps (the domain labels and b's group keys), and one cached node into b (its
 * topology and GPUs, closed when cordoned or not Ready, the labels whose key length is
 * kept).  Returns ext_cluster_builder_add_node's result. */
#define EXT_LIVE_KEY_LEN_WORDS (EXT_LABEL_KEY_MAX / 64 + 1)
struct kube_node;
void ext__live_key_lengths(const struct ext_config *cfg, const struct ext_cluster_builder *b,
                           uint64_t bits[EXT_LIVE_KEY_LEN_WORDS]);
int ext__live_add_node(struct ext_cluster_builder *b, const struct kube_node *n,
                       const uint64_t key_lens[EXT_LIVE_KEY_LEN_WORDS]);

/* The route of a request, looked up once when its head arrives: its verb, and in
 * *ret_status 0, or 404 (EXT_VERB_OTHER) / 405 with *ret_why, the answer's text. */
enum ext_verb ext_route(const char *method, const char *path, int *ret_status,
                        const char **ret_why);
/* Runs a routed request (v from ext_route with status 0) on its whole body.  Returns the
 * HTTP status; *out holds the body and *ret_type its Content-Type. */
int ext_handle(struct ext_state *s, enum ext_verb v, const char *body, size_t len,
               struct buf *out, const char **ret_type);

/* Records one request in the metrics. */
void ext_metrics_observe(struct ext_metrics *m, enum ext_verb v, int status, uint64_t ns);
void ext_metrics_decision(struct ext_metrics *m, enum ext_verb v, enum ext_outcome o);
/* The Prometheus text exposition. */
int ext_metrics_render(struct ext_state *s, struct buf *out);

struct ext_server_options {
        const char *listen;     /* "127.0.0.1:8888", ":8888", "[::1]:8888" */
        unsigned threads;
        const char *tls_cert;   /* PEM file paths; NULL for plain HTTP */
        const char *tls_key;
        const char *client_ca;  /* require client certificates signed by it */
        /* 0 picks the EXT_ default of each. */
        unsigned max_connections;
        unsigned max_connections_per_ip;
        unsigned idle_timeout_s;
        unsigned body_timeout_s;
        unsigned queue_timeout_ms;
        uint64_t body_budget;   /* bytes, >= EXT_MAX_BODY */
};

struct ext_server;
/* Starts serving s (borrowed; must outlive the server).  *ret_port gets the bound port. */
int ext_server_start(struct ext_state *s, const struct ext_server_options *o,
                     struct ext_server **ret, unsigned *ret_port, const char **ret_why);
struct ext_server *ext_server_stop(struct ext_server *srv);
