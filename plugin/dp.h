/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plugin: the node side.  A thin kubelet device plugin (v1beta1) that makes the kubelet hand
 * a pod exactly the GPUs the extender chose (topofit.io/gpus), and the topology publisher.
 *
 * Layers, each in its own file:
 *   dp-grpc.c      the only gRPC/protobuf-c user: serves DevicePlugin, calls Register and
 *                  PodResources.List; gRPC status -> -errno happens there and nowhere else.
 *   dp-alloc.c     PURE: the node-local pod cache and the preferred-allocation decision.
 *   dp-pods.c      pod JSON (Kubernetes Pod / PodList / watch event) -> struct dp_pod.
 *   dp-discover.c  discovery: static file, NVML (dlopen), `nvidia-smi topo -m`, hwloc.
 *   dp-main.c      the topofit-node program: flags, threads, loops, logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../topology/topo.h"

#define DP_API_VERSION "v1beta1"
#define DP_DEFAULT_DIR "/var/lib/kubelet/device-plugins"
#define DP_KUBELET_SOCKET "kubelet.sock"
#define DP_DEFAULT_PODRESOURCES "/var/lib/kubelet/pod-resources/kubelet.sock"
#define DP_DEFAULT_RESOURCE "nvidia.com/gpu"
#define DP_DEFAULT_ENDPOINT "topofit.sock"
#define DP_CDI_KIND "nvidia.com/gpu"          /* CDI names: nvidia.com/gpu=<UUID> */
#define DP_VISIBLE_DEVICES_ENV "NVIDIA_VISIBLE_DEVICES"

#define DP_MAX_MESSAGE_BYTES (4u << 20)  /* any one gRPC message, either direction */
#define DP_MAX_CONTAINERS 64             /* container requests in one RPC, containers per pod */
#define DP_MAX_IDS 256                   /* device IDs in one container request */
#define DP_MAX_STREAMS 8                 /* concurrent ListAndWatch streams */
#define DP_MAX_CALLS 64                  /* RPCs in flight on the plugin socket */
#define DP_MAX_PODS 1024                 /* pods in the node-local cache (kubelet default: 110) */
#define DP_MAX_POD_SETS TOPO_GPUS_MAX_CONTAINERS /* GPU containers per pod in topofit.io/gpus */
#define DP_CONTAINER_MAX TOPO_GPUS_CONTAINER_MAX /* container names are DNS labels (63) + NUL */
#define DP_NAME_MAX 254                  /* Kubernetes names (253) + NUL */
#define DP_OFFER_TTL_MS 30000            /* an offered pod set is skipped by others this long */

/* --- gRPC transport (dp-grpc.c) -------------------------------------------------------- */

struct dp_device {
        char id[TOPO_ID_MAX]; /* the GPU UUID */
        bool healthy;
};

/* One container's GetPreferredAllocation request, borrowed for the call. */
struct dp_pref_request {
        const char *const *available;
        unsigned n_available;
        const char *const *must;
        unsigned n_must;
        unsigned size;
};

/* Called on the server thread; must be fast and must not block on the network. */
struct dp_handlers {
        void *userdata;
        /* Chooses req->size of req->available: writes indices into req->available to
         * ret_idx (room for req->size) and returns how many; anything else (negative, or
         * fewer) makes the transport answer with must-include plus the first available. */
        int (*preferred)(void *userdata, const struct dp_pref_request *req, unsigned *ret_idx);
        /* Checks that every ID of one container is a device of this node: 0 or -ENODEV. */
        int (*allocate_check)(void *userdata, const char *const *ids, unsigned n);
};

struct dp_server_stats {
        uint64_t calls[6];     /* by method: options, listwatch, preferred, allocate,
                                  prestart, unknown */
        uint64_t errors;       /* calls answered with a non-OK status */
        uint64_t updates_sent; /* ListAndWatch messages sent */
        unsigned streams;      /* open ListAndWatch streams */
};

struct dp_server;

/* Process-wide gRPC setup/teardown; call once each, around every other dp_ grpc call. */
void dp_grpc_init(void);
void dp_grpc_shutdown(void);

/* Serves DevicePlugin on the unix socket at path (an existing file there is removed first)
 * from a thread of its own; h is copied.  Returns 0 and the server in *ret, -EINVAL for a
 * bad path, -EADDRINUSE when the socket cannot be bound, -ENOMEM. */
int dp_server_new(const char *path, const struct dp_handlers *h, struct dp_server **ret);
/* Stops serving (open streams are cancelled), joins the thread, frees.  NULL-safe. */
struct dp_server *dp_server_free(struct dp_server *s);
DEFINE_CLEANUP_FUNC(struct dp_server, dp_server_free)
/* Replaces the device list (copied); open ListAndWatch streams get the new list. */
int dp_server_set_devices(struct dp_server *s, const struct dp_device *devs, unsigned n);
void dp_server_get_stats(struct dp_server *s, struct dp_server_stats *ret);

/* Registration.Register on the kubelet socket at kubelet_path, asking for
 * get_preferred_allocation_available.  Returns 0, -ETIMEDOUT, -ECONNREFUSED (no kubelet
 * there), -EPERM/-EINVAL (the kubelet refused: *ret_why says why), -EIO. */
int dp_register(const char *kubelet_path, const char *endpoint, const char *resource,
                int timeout_ms, const char **ret_why);

/* GetPreferredAllocation for one container, as the kubelet calls it (tools, benchmarks);
 * a new connection per call.  Writes the answer's IDs (malloc()ed array of malloc()ed
 * strings, free with dp_strv_free) to *ret_ids.  Same errors as dp_register. */
int dp_preferred_call(const char *path, const char *const *available, unsigned n_available,
                      const char *const *must, unsigned n_must, unsigned size, int timeout_ms,
                      char ***ret_ids, unsigned *ret_n, const char **ret_why);
void dp_strv_free(char **v, unsigned n);

/* What PodResources.List says one container got. */
struct dp_container_devices {
        char ns[DP_NAME_MAX];
        char pod[DP_NAME_MAX];
        char container[DP_CONTAINER_MAX];
        unsigned n_ids;
        char **ids; /* n_ids strings */
};
void dp_container_devices_free_array(struct dp_container_devices *a, size_t n);

/* PodResources.List on the socket at path; keeps only devices of `resource`, and only
 * containers that have some.  Returns 0 and a malloc()ed array (free with
 * dp_container_devices_free_array) or the same errors as dp_register. */
int dp_podresources_list(const char *path, const char *resource, int timeout_ms,
                         struct dp_container_devices **ret, size_t *ret_n,
                         const char **ret_why);

/* --- the pod cache and the decision (dp-alloc.c, PURE) -------------------------------- */

/* One container's chosen GPUs, resolved to this node's device indices. */
struct dp_pod_set {
        char container[DP_CONTAINER_MAX]; /* "" when the annotation names no container */
        bool init;                        /* an init container: reuses its pod's GPUs */
        struct topo_mask gpus;
};

struct dp_pod {
        char uid[DP_NAME_MAX];
        char ns[DP_NAME_MAX];
        char name[DP_NAME_MAX];
        bool pending;       /* bound here and not yet running: a candidate for admission */
        bool live;          /* not finished (Succeeded/Failed) and not deleted */
        unsigned n_sets;
        struct dp_pod_set sets[DP_MAX_POD_SETS];
        uint64_t seq;       /* cache insertion order: older pods are admitted first */
        int64_t offered_ms; /* when a set of it was last offered */
        uint64_t offer_seq; /* order of that offer; 0 = never offered */
        bool mark;          /* the sweep of a full reload */
        bool mismatch_reported; /* the verification loop reported this pod once */
};

/* The node's devices as the cache resolves annotation UUIDs against them. */
struct dp_cache {
        char node[DP_NAME_MAX]; /* this node; "" = annotations naming a node are not checked */
        unsigned n_devices;
        char (*device_ids)[TOPO_ID_MAX];
        unsigned n_pods;
        unsigned max_pods;   /* slots in pods (DP_MAX_PODS unless sized otherwise) */
        struct dp_pod *pods;
        uint64_t next_seq;
        uint64_t next_offer;
        uint64_t rejected;   /* annotations refused (unknown UUIDs, malformed) */
};

int dp_cache_init(struct dp_cache *c, const struct dp_device *devs, unsigned n);
/* dp_cache_init() with room for max_pods pods (1..DP_MAX_PODS; -EINVAL otherwise): the fuzz
 * harness keeps the cache small, since a full one is ~10 MB to set up per input. */
int dp_cache_init_sized(struct dp_cache *c, const struct dp_device *devs, unsigned n,
                        unsigned max_pods);
void dp_cache_release(struct dp_cache *c);
/* Index of device id, or -ENODEV. */
int dp_cache_device_index(const struct dp_cache *c, const char *id);

/* Reads a topofit.io/gpus value through the one codec (topo_gpus_decode in
 * topology/topo-gpus.c: the extender's versioned record, nothing else) against the
 * cache's devices (UUIDs resolve against them) and node into sets.  Error codes and
 * *ret_why as topo_gpus_decode.  Writes ret_sets[0..*ret_n) (DP_MAX_POD_SETS room). */
int dp_parse_gpus_annotation(const struct dp_cache *c, const char *value, size_t len,
                             struct dp_pod_set *ret_sets, unsigned *ret_n,
                             const char **ret_why);

/* Inserts or replaces the pod with p->uid (seq, the offer and mismatch_reported are kept
 * for an existing pod).  -ENOSPC when the cache is full. */
int dp_cache_upsert(struct dp_cache *c, const struct dp_pod *p);
/* Removes the pod with uid; -ENOENT when absent. */
int dp_cache_remove(struct dp_cache *c, const char *uid);
const struct dp_pod *dp_cache_find(const struct dp_cache *c, const char *ns, const char *name);

/* The annotated answer: a pending pod that has a set of exactly size GPUs inside available
 * and containing must.  Pods not offered within DP_OFFER_TTL_MS of now_ms come first,
 * oldest first; then the least recently offered (two admissions racing on the same offer
 * get different pods).  Returns 0 and the set, marking the pod offered; -ENOENT if none. */
int dp_cache_match(struct dp_cache *c, const struct topo_mask *available,
                   const struct topo_mask *must, unsigned size, int64_t now_ms,
                   struct topo_mask *ret, const char **ret_pod);

/* Forgets every offer (a new kubelet admits the pods it had not started yet from scratch, so
 * an offer made to the kubelet before it restarted must not push that pod behind others). */
void dp_cache_forget_offers(struct dp_cache *c);

/* The fallback: the best set of size from available that contains must, by the scoring
 * class sc (NULL: the lowest indices).  -ENOSPC when available has too few. */
struct score_class;
int dp_fallback_set(struct score_class *sc, const struct topo_mask *available,
                    const struct topo_mask *must, unsigned size, unsigned n_devices,
                    struct topo_mask *ret);

/* Writes "id1,id2" (the order given) into buf; -E2BIG when it does not fit. */
int dp_join_ids(const char *const *ids, unsigned n, char *buf, size_t size);

/* --- pods from JSON (dp-pods.c) ---------------------------------------------------------- */

/* Decodes one Kubernetes Pod object into *ret (its sets resolved against c's devices).
 * Returns 1 when the pod carries a usable topofit.io/gpus annotation, 0 when it carries
 * none (ret still filled, n_sets 0), -EINVAL with *ret_why for a malformed pod or
 * annotation. */
struct cJSON;
int dp_pod_from_json(const struct dp_cache *c, const struct cJSON *obj, struct dp_pod *ret,
                     const char **ret_why);
/* Loads a PodList (or a bare array of pods) into the cache, replacing its pods. */
int dp_cache_load_podlist(struct dp_cache *c, const char *json, size_t len,
                          const char **ret_why);

/* --- discovery (dp-discover.c) --------------------------------------------------------- */

enum dp_source {
        DP_SOURCE_FILE,
        DP_SOURCE_NVML,
        DP_SOURCE_NVSMI,
        DP_SOURCE_HWLOC,
        _DP_SOURCE_MAX,
        _DP_SOURCE_INVALID = -EINVAL,
};
const char *dp_source_to_string(enum dp_source s);

struct dp_discover_opts {
        const char *topology_file; /* override; NULL: discover */
        const char *nvml_lib;      /* NULL: "libnvidia-ml.so.1" */
        const char *nvidia_smi;    /* NULL: "nvidia-smi" from PATH */
        const char *hwloc_xml;     /* NULL: the live machine */
        bool no_hwloc;
};

/* What discovery tried and found, for `topofit-node discover` and the logs. */
struct dp_discover_report {
        enum dp_source used;
        bool nvml_present;
        bool nvsmi_present;
        bool hwloc_ok;
        unsigned nvml_gpus;
        bool domain_unknown; /* NVML's fabric query failed: the NVLink domain is not known,
                              * which is not the same as known to be none */
        char notes[1024]; /* one line per attempt */
};

/* Discovers this node's topology: the file when given, else NVML, else `nvidia-smi topo -m`,
 * else hwloc; GPU UUIDs from NVML or `nvidia-smi --query-gpu` where the matrix lacks them.
 * Returns 0 and a new topology; -ENODEV when no source found a GPU. */
int dp_discover(const struct dp_discover_opts *o, struct topo **ret,
                struct dp_discover_report *ret_report);

/* Re-discovery: when the fabric query failed this time (rep->domain_unknown), t keeps the
 * NVLink domain prev had, so one failed query does not move the node out of its domain and
 * back.  Returns true when it kept one. */
bool dp_keep_domain(struct topo *t, const struct topo *prev, const struct dp_discover_report *rep);

/* NVML critical-Xid events (dp-discover.c, the NVML owner).  Xids that an application
 * causes (13, 31, 43, 45, 68, 109) are not reported: the GPU is fine. */
struct dp_nvml_watch;
/* Loads NVML at libpath (NULL: libnvidia-ml.so.1) and registers every GPU for critical Xid
 * events.  -ENOENT when NVML or its event API is absent, -EIO when NVML refuses. */
int dp_nvml_watch_new(const char *libpath, struct dp_nvml_watch **ret);
/* Waits up to timeout_ms: 1 and the GPU's UUID and Xid on a critical error, 0 otherwise. */
int dp_nvml_watch_wait(struct dp_nvml_watch *w, unsigned timeout_ms, char ret_id[static TOPO_ID_MAX],
                       unsigned long long *ret_xid);
struct dp_nvml_watch *dp_nvml_watch_free(struct dp_nvml_watch *w);

/* The device ID for GPU i: its UUID, else its PCI bus id, else "gpu<i>". */
void dp_device_id(const struct topo *t, unsigned i, char buf[static TOPO_ID_MAX]);
