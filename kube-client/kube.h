/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube-client: a small Kubernetes API client (libcurl + cJSON) and an informer-like cache
 * of Nodes and Pods.  The only libcurl user in the project.  Depends on common/ only.
 *
 * Three layers, each usable alone:
 *   config  (kube_config_*)   where the API server is and how to authenticate
 *   client  (kube_client_*, kube_get/list/watch/patch/bind)  one request at a time per call,
 *           thread-safe: concurrent calls borrow easy handles from a pool (connection reuse)
 *   cache   (kube_cache_*)    list+watch threads feeding a store; readers take immutable,
 *           refcounted snapshots and never block on the watch threads
 *
 * Errors: every function returns 0 (or a count) on success and -errno on failure; the HTTP
 * status and a sentence (the API server's Status message, or curl's) land in an optional
 * struct kube_error.  The mapping lives in kube-http.c:
 *   400 -EINVAL  401 -EACCES  403 -EPERM  404 -ENOENT  409 -EEXIST (conflict, UID
 *   precondition, already bound)  410 -ESTALE (resourceVersion too old)  413 -E2BIG
 *   422 -EINVAL  429 -EAGAIN  5xx -EIO (503 -EAGAIN, 504 -ETIMEDOUT)
 *   connect failures -ECONNREFUSED, DNS -EHOSTUNREACH, timeouts -ETIMEDOUT, TLS -EPROTO,
 *   a body or event over its cap -E2BIG, malformed JSON -EBADMSG, cancelled -ECANCELED.
 */
#pragma once

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "../common/macro.h"

/* --- limits (every byte from the network is capped by one of these) -------------------- */
#define KUBE_MAX_BODY (128u << 20)        /* one response body (a LIST page) */
#define KUBE_MAX_EVENT (4u << 20)         /* one watch event line */
#define KUBE_MAX_KUBECONFIG (1u << 20)    /* a kubeconfig file */
#define KUBE_MAX_TOKEN (64u << 10)        /* a bearer token (file or inline) */
#define KUBE_MAX_PEM (1u << 20)           /* a CA bundle, client certificate or key */
#define KUBE_MAX_ANNOTATION (256u << 10)  /* one kept annotation value (Kubernetes' total) */
#define KUBE_MAX_NAME 253                 /* a DNS subdomain name (node, pod, namespace) */
#define KUBE_MAX_PATH 4096                /* a request path with its query */
#define KUBE_MAX_KEPT_LABELS 16           /* label keys a cache keeps per node */
#define KUBE_MAX_ALL_LABELS 64            /* labels kept per node with node_labels_all */
#define KUBE_MAX_LABEL_KEY 317            /* a label key: 253-byte prefix, '/', 63 */
#define KUBE_MAX_GPU_RESOURCES 8          /* resource names counted as GPUs */
#define KUBE_MAX_GROUP_MIN_COUNT (1u << 20) /* a PodGroup's gang minCount */
#define KUBE_LIST_PAGE_DEFAULT 500        /* LIST ?limit= */
#define KUBE_TOKEN_REFRESH_SEC 60         /* a token file is re-read at least this often */
#define KUBE_WATCH_TIMEOUT_MIN_SEC 300    /* watch ?timeoutSeconds= is jittered in [min,max] */
#define KUBE_WATCH_TIMEOUT_MAX_SEC 600
#define KUBE_PODGROUP_GROUP "scheduling.k8s.io"
#define KUBE_PODGROUP_VERSIONS { "v1beta1", "v1alpha3", "v1alpha2" } /* preferred first */
#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define KUBE_GPU_RESOURCE_DEFAULT "nvidia.com/gpu"
#define KUBE_ANNOTATION_PREFIX "topofit.io/" /* pod annotations the cache keeps */
#define KUBE_TOPOLOGY_ANNOTATION "topofit.io/topology" /* the node annotation the cache keeps */

/* Filled on failure by every call that takes one (pass NULL when not needed). */
struct kube_error {
        long http_status;  /* 0 when no HTTP response was received */
        char message[512]; /* one sentence, never empty on failure */
};

/* --- configuration and auth ---------------------------------------------------------- */

struct kube_config; /* opaque; owns its strings and PEM bytes */

/* In-cluster: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT, and token + ca.crt (and
 * namespace when present) under sa_dir (NULL: KUBE_SA_DIR).  The token file path is kept:
 * the client re-reads it every KUBE_TOKEN_REFRESH_SEC and after any 401 (bound tokens
 * rotate).  Returns 0, -ENOENT (not in a cluster: variables or files missing), -EINVAL
 * (bad value), -E2BIG (file over its cap); *ret_why says which. */
int kube_config_in_cluster(const char *sa_dir, struct kube_config **ret, const char **ret_why);

/* A kubeconfig file (YAML or JSON), current-context (or context when non-NULL): cluster
 * server, certificate-authority / certificate-authority-data, insecure-skip-tls-verify;
 * user client-certificate(-data) / client-key(-data), token / tokenFile,
 * username/password (basic); a tokenFile wins over token and is re-read like the
 * in-cluster one.  Relative file paths resolve against the kubeconfig's
 * directory.  Returns -ENOENT (file, context, cluster or user missing), -EINVAL (malformed
 * or missing field), -EOPNOTSUPP (exec credential plugins, auth-provider: not supported),
 * -E2BIG; *ret_why is a static sentence naming the problem. */
int kube_config_from_kubeconfig(const char *path, const char *context, struct kube_config **ret,
                                const char **ret_why);

/* What a program calls: path (from --kubeconfig) when non-NULL, else $KUBECONFIG (first
 * entry of a ':' list), else in-cluster, else ~/.kube/config.  Same returns. */
int kube_config_load(const char *path, struct kube_config **ret, const char **ret_why);

struct kube_config *kube_config_free(struct kube_config *c); /* accepts NULL */
DEFINE_CLEANUP_FUNC(struct kube_config, kube_config_free)

/* "https://10.0.0.1:443" (no trailing slash); lives as long as c. */
const char *kube_config_server(const struct kube_config *c);
/* The namespace of the context or the service account, "default" when none. */
const char *kube_config_namespace(const struct kube_config *c);
/* Overrides for tests and programs: the token re-read period (default
 * KUBE_TOKEN_REFRESH_SEC; 0 = re-read before every request). */
void kube_config_set_token_refresh(struct kube_config *c, unsigned seconds);

/* --- client -------------------------------------------------------------------------- */

struct kube_client; /* opaque, thread-safe */

struct kube_client_options {
        const char *user_agent;    /* NULL: "topofit/<version>" */
        unsigned connect_timeout_ms; /* 0: 10 s */
        unsigned request_timeout_ms; /* 0: 30 s (watches: their timeoutSeconds + 30 s) */
};

/* Takes ownership of cfg on success (freed by kube_client_free).  opts may be NULL.
 * Returns 0, -ENOMEM, -EINVAL (libcurl lacks a feature cfg needs). */
int kube_client_new(struct kube_config *cfg, const struct kube_client_options *opts,
                    struct kube_client **ret);
struct kube_client *kube_client_free(struct kube_client *c); /* accepts NULL */
DEFINE_CLEANUP_FUNC(struct kube_client, kube_client_free)
const struct kube_config *kube_client_config(const struct kube_client *c);

/* Counters since kube_client_new, for /metrics. */
struct kube_client_stats {
        uint64_t requests;
        uint64_t errors;         /* requests that ended in -errno */
        uint64_t token_rereads;  /* token file reads after the first */
        uint64_t unauthorized;   /* 401 responses seen (each retried once after a re-read) */
        uint64_t connections_opened; /* new connections (the rest reused an open one) */
};
void kube_client_stats(const struct kube_client *c, struct kube_client_stats *ret);

/* One request.  path starts with '/' and carries its query ("/api/v1/nodes?limit=5").
 * content_type/body may be NULL.  On 2xx returns the status and hands the body to
 * *ret_body (malloc()ed, NUL-terminated, free() it; may be NULL to discard); otherwise
 * -errno (see the table above).  A 401 makes the client re-read its token file and retry
 * once.  Bodies over KUBE_MAX_BODY: -E2BIG. */
int kube_request(struct kube_client *c, const char *method, const char *path,
                 const char *content_type, const char *body, size_t body_len, char **ret_body,
                 size_t *ret_len, struct kube_error *err);

/* GET path and parse the JSON: *ret is a cJSON tree the caller cJSON_Delete()s. */
int kube_get(struct kube_client *c, const char *path, cJSON **ret, struct kube_error *err);

/* Optional filters for LIST and WATCH; NULL fields are left out of the query. */
struct kube_selector {
        const char *field; /* fieldSelector, e.g. "spec.nodeName=node-1" */
        const char *label; /* labelSelector */
};

/* Called once per item; item is borrowed (valid during the call).  A negative return
 * stops the LIST/WATCH and is returned by it. */
typedef int (*kube_item_fn)(const cJSON *item, void *userdata);

/* LIST a collection ("/api/v1/pods") page by page (limit = page_size, 0: default; the
 * continue token of each page).  Calls fn for each item in order, then writes the list's
 * resourceVersion to *ret_resource_version (malloc()ed; an old value there is freed) when
 * non-NULL.  A continue token that expired (410) ends the LIST with -ESTALE: callers start
 * over into a fresh store.  Returns the number of items or -errno. */
int kube_list(struct kube_client *c, const char *collection, const struct kube_selector *sel,
              unsigned page_size, kube_item_fn fn, void *userdata, char **ret_resource_version,
              struct kube_error *err);

enum kube_event_type {
        KUBE_EVENT_ADDED,
        KUBE_EVENT_MODIFIED,
        KUBE_EVENT_DELETED,
        KUBE_EVENT_BOOKMARK,
        KUBE_EVENT_ERROR,
        _KUBE_EVENT_MAX,
        _KUBE_EVENT_INVALID = -EINVAL,
};
const char *kube_event_type_to_string(enum kube_event_type t);
enum kube_event_type kube_event_type_from_string(const char *s);

/* Called once per watch event with its object (borrowed).  Bookmarks are delivered too
 * (their object carries only metadata.resourceVersion).  ERROR events are not delivered:
 * the watch ends with their code translated (410 -> -ESTALE).  Negative return: stop. */
typedef int (*kube_event_fn)(enum kube_event_type type, const cJSON *object, void *userdata);

struct kube_watch_options {
        const char *resource_version; /* start after this version ("" or NULL: from now) */
        struct kube_selector selector;
        unsigned timeout_seconds;     /* 0: jittered in [KUBE_WATCH_TIMEOUT_MIN_SEC, _MAX] */
        atomic_bool *cancel;          /* when set to true the watch ends with -ECANCELED
                                       * within about a second; may be NULL */
};

/* One WATCH request on collection with allowWatchBookmarks=true, until the server ends
 * the stream (returns the number of events delivered), fn stops it, or an error: -ESTALE (410 as status or as an ERROR
 * event), -E2BIG (event over KUBE_MAX_EVENT), -EBADMSG (malformed event), -ECONNRESET (the
 * stream broke mid-event), -ECANCELED.  The newest resourceVersion seen (object or
 * bookmark) is written to *ret_resource_version (malloc()ed, replaces the old value, which
 * is freed) as events arrive, so a caller resumes from it after any return. */
int kube_watch(struct kube_client *c, const char *collection, const struct kube_watch_options *opts,
               kube_event_fn fn, void *userdata, char **ret_resource_version,
               struct kube_error *err);

enum kube_patch_type {
        KUBE_PATCH_MERGE, /* application/merge-patch+json (RFC 7386) */
        KUBE_PATCH_JSON,  /* application/json-patch+json (RFC 6902) */
        KUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json */
        _KUBE_PATCH_MAX,
        _KUBE_PATCH_INVALID = -EINVAL,
};
const char *kube_patch_type_to_string(enum kube_patch_type t); /* the content type */

/* PATCH path (an object, or its "/status" subresource) with patch[0..len).  The updated
 * object goes to *ret when non-NULL (cJSON_Delete() it). */
int kube_patch(struct kube_client *c, const char *path, enum kube_patch_type type,
               const char *patch, size_t len, cJSON **ret, struct kube_error *err);

/* A key/value pair (annotations, labels); borrowed. */
struct kube_kv {
        const char *key;
        const char *value;
};

/* POST /api/v1/namespaces/<ns>/pods/<pod>/binding with target node, metadata.uid as a
 * precondition (when uid is non-NULL) and metadata.annotations (copied onto the pod by
 * the API server).  Returns 0, -EEXIST (409: UID mismatch or already bound), -ENOENT. */
int kube_bind(struct kube_client *c, const char *ns, const char *pod, const char *uid,
              const char *node, const struct kube_kv *annotations, size_t n_annotations,
              struct kube_error *err);

/* Optional: POST a core/v1 Event about an object ("Pod" ns/name/uid), type "Normal" or
 * "Warning", a CamelCase reason and a message.  Returns 0 or -errno. */
int kube_emit_event(struct kube_client *c, const char *ns, const char *pod, const char *uid,
                    const char *type, const char *reason, const char *message,
                    struct kube_error *err);

/* --- the cache ----------------------------------------------------------------------- */

enum kube_pod_phase {
        KUBE_POD_PENDING,
        KUBE_POD_RUNNING,
        KUBE_POD_SUCCEEDED,
        KUBE_POD_FAILED,
        KUBE_POD_UNKNOWN,
        _KUBE_POD_PHASE_MAX,
        _KUBE_POD_PHASE_INVALID = -EINVAL,
};
const char *kube_pod_phase_to_string(enum kube_pod_phase p);
enum kube_pod_phase kube_pod_phase_from_string(const char *s); /* unknown text: UNKNOWN */

/* A node as the cache keeps it.  Immutable; strings live as long as the snapshot. */
struct kube_node {
        const char *name;
        const char *topology;     /* topofit.io/topology annotation, NULL when absent */
        uint32_t topology_len;
        uint32_t n_labels;
        const struct kube_kv *labels; /* only the keys in kube_cache_options.node_labels,
                                       * or all (node_labels_all) */
        int64_t gpu_allocatable;  /* status.allocatable, summed over the GPU resource names */
        int64_t gpu_capacity;     /* status.capacity, same */
        bool ready;               /* condition Ready=True */
        bool unschedulable;       /* spec.unschedulable */
        const char *resource_version;
};

/* A pod as the cache keeps it.  Immutable; strings live as long as the snapshot. */
struct kube_pod {
        const char *uid;
        const char *ns;
        const char *name;
        const char *node_name;    /* "" when unscheduled */
        uint8_t phase;            /* enum kube_pod_phase */
        bool deleting;            /* metadata.deletionTimestamp set */
        int64_t gpu_request;      /* max(sum over containers, max over init containers) of
                                   * limits (requests when no limit), GPU resource names */
        uint32_t n_annotations;
        const struct kube_kv *annotations; /* only keys with KUBE_ANNOTATION_PREFIX, and
                                            * those of the cache's pod_annotations */
        uint32_t n_labels;
        const struct kube_kv *labels;      /* only the keys of the cache's pod_labels */
        const char *scheduling_group;      /* spec.schedulingGroup.podGroupName, "" none */
        const char *resource_version;
};

/* A PodGroup (Kubernetes' Workload API, scheduling.k8s.io) as the cache keeps it: what a
 * placement needs of it.  Immutable; strings live as long as the snapshot. */
struct kube_podgroup {
        const char *ns;
        const char *name;
        uint32_t min_count;       /* spec.schedulingPolicy.gang.minCount; 0: not a gang */
        const char *topology_key; /* spec.schedulingConstraints.topology[0].key, "" when none */
        const char *resource_version;
};

/* An immutable view of the cluster at one generation.  Readers take a reference with
 * kube_cache_snapshot() and drop it with kube_snapshot_unref(); nothing in it changes. */
struct kube_snapshot {
        uint64_t generation;      /* bumps with every applied change */
        size_t n_nodes;
        const struct kube_node *const *nodes; /* sorted by name */
        size_t n_pods;
        const struct kube_pod *const *pods;   /* sorted by node_name, then ns, then name;
                                               * unscheduled pods ("" node) first */
        size_t n_podgroups;
        const struct kube_podgroup *const *podgroups; /* sorted by ns, then name; none
                                               * unless watch_podgroups */
        bool synced;              /* every initial LIST was complete when it was built */
};

struct kube_snapshot *kube_snapshot_ref(struct kube_snapshot *s);
struct kube_snapshot *kube_snapshot_unref(struct kube_snapshot *s); /* accepts NULL */
DEFINE_CLEANUP_FUNC(struct kube_snapshot, kube_snapshot_unref)

/* Binary search by name; NULL when absent. */
const struct kube_node *kube_snapshot_node(const struct kube_snapshot *s, const char *name);
/* The pods bound to node: writes the index of the first into *ret_first and returns how
 * many (0 when none; *ret_first then untouched). */
size_t kube_snapshot_pods_on_node(const struct kube_snapshot *s, const char *node,
                                  size_t *ret_first);
/* Linear lookup by namespace/name; NULL when absent. */
const struct kube_pod *kube_snapshot_pod(const struct kube_snapshot *s, const char *ns,
                                         const char *name);

/* Binary search by namespace/name; NULL when absent. */
const struct kube_podgroup *kube_snapshot_podgroup(const struct kube_snapshot *s, const char *ns,
                                                   const char *name);

/* Called from a watch thread after changes were applied (no cache lock held); it should
 * be quick (e.g. signal a condition).  generation is the new one. */
typedef void (*kube_change_fn)(uint64_t generation, void *userdata);

struct kube_cache_options {
        bool watch_nodes;             /* default in kube_cache_options_init: true */
        bool watch_pods;              /* true */
        bool watch_podgroups;         /* false.  When true, API discovery picks the first
                                       * of KUBE_PODGROUP_VERSIONS that the server serves
                                       * podgroups in; a server with none (older, or the
                                       * GenericWorkload gate off) is not an error: no
                                       * PodGroups, synced, and kube_cache_stats says so */
        const char *pod_field_selector; /* e.g. "spec.nodeName=node-1" (node-local cache) */
        const char *node_field_selector; /* e.g. "metadata.name=node-1" */
        const char *const *gpu_resources; /* NULL-terminated; NULL: {KUBE_GPU_RESOURCE_DEFAULT} */
        const char *const *node_labels; /* label keys kept, NULL-terminated, <= KUBE_MAX_KEPT_LABELS */
        const char *const *pod_labels; /* pod label keys kept, NULL-terminated,
                                        * <= KUBE_MAX_KEPT_LABELS */
        const char *const *pod_annotations; /* pod annotation keys kept beside the
                                        * topofit.io/ ones, NULL-terminated, same cap */
        bool node_labels_all;         /* false.  When true, every label of a node is kept
                                       * (the first KUBE_MAX_ALL_LABELS with string values;
                                       * node_labels ignored): for label keys known only
                                       * later, such as PodGroups' topology keys */
        unsigned page_size;           /* 0: KUBE_LIST_PAGE_DEFAULT */
        unsigned backoff_initial_ms;  /* 0: 200 ms; doubles per failure, jittered +-25% */
        unsigned backoff_max_ms;      /* 0: 30 s */
        unsigned watch_timeout_seconds; /* 0: jittered in [KUBE_WATCH_TIMEOUT_MIN_SEC, _MAX] */
        kube_change_fn on_change;     /* may be NULL */
        void *userdata;
};
void kube_cache_options_init(struct kube_cache_options *o);

struct kube_cache;

/* A cache over client (borrowed: it must outlive the cache).  opts are copied.  Starts one
 * thread per watched resource: LIST (paginated), then WATCH from the list's
 * resourceVersion; 410 => relist; errors => exponential backoff with jitter.  Returns 0,
 * -ENOMEM, -EINVAL (bad options), or a pthread error. */
int kube_cache_new(struct kube_client *client, const struct kube_cache_options *opts,
                   struct kube_cache **ret);
/* Stops the threads (within about a second) and frees; snapshots still referenced stay
 * valid until their last unref.  Accepts NULL. */
struct kube_cache *kube_cache_free(struct kube_cache *c);
DEFINE_CLEANUP_FUNC(struct kube_cache, kube_cache_free)

/* A reference to the current snapshot (built lazily when the generation moved; never
 * NULL except on OOM).  Drop it with kube_snapshot_unref(). */
struct kube_snapshot *kube_cache_snapshot(struct kube_cache *c);

uint64_t kube_cache_generation(struct kube_cache *c);

/* True once every watched resource completed its initial LIST (for /readyz). */
bool kube_cache_synced(struct kube_cache *c);

/* Waits until synced or timeout_ms passes: 0 or -ETIMEDOUT. */
int kube_cache_wait_synced(struct kube_cache *c, unsigned timeout_ms);

/* Counters for /metrics. */
struct kube_cache_stats {
        uint64_t events;          /* watch events applied (bookmarks included) */
        uint64_t bookmarks;
        uint64_t relists;         /* LISTs after the first (410, errors) */
        uint64_t reconnects;      /* watches restarted after the first */
        uint64_t errors;          /* failed LISTs/WATCHes (each followed by a backoff) */
        uint64_t decode_errors;   /* objects that did not decode (dropped from the cache) */
        uint64_t last_event_lag_ms; /* now - creationTimestamp of the newest ADDED object */
        size_t n_nodes;
        size_t n_pods;
        size_t n_podgroups;
        /* The PodGroup API the watch uses ("scheduling.k8s.io/v1beta1"), "" when the server
         * serves none, NULL before discovery finished or when not watched.  Static. */
        const char *podgroup_api;
        int last_error;           /* -errno of the newest failure, 0 when none */
};
void kube_cache_stats(struct kube_cache *c, struct kube_cache_stats *ret);
