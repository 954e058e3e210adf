/* SPDX-License-Identifier: Apache-2.0 */
/*
 * extender core: the scheduler extender's decision path as a library without I/O, so the
 * HTTP server (extender/ext-server.c) and the offline simulator (bench/) run the very same
 * code.  Four parts:
 *
 *   - the cluster view: an immutable, refcounted snapshot of nodes (name, topology class,
 *     GPUs used by live pods) and pods (uid, node, GPU set), built to the side with a
 *     builder and swapped in whole;
 *   - the reservation ledger: the one mutable, locked place for what outlives a request:
 *     GPU sets held for a (pod UID, node) between prioritize and bind and committed at
 *     bind, the decoded requests bind looks up, and preemption grants;
 *   - the verbs: ext_filter / ext_prioritize / ext_bind / ext_preempt, pure functions of a
 *     snapshot, the ledger and a clock value passed in (ext_nodes_resolve gives them the
 *     request's nodes);
 *   - the codec: kube-scheduler's extender JSON (and the Kubernetes objects inside it) to
 *     and from the plain structs below (cJSON through common/json.h stays behind it; the
 *     topofit.io/gpus record is topology/'s codec).
 *
 * Depends on topology/, scoring/ and common/ only: no sockets, no clocks, no microhttpd, no
 * curl.  Everything here is safe to call from many threads at once.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/macro.h"
#include "../placement/place.h"
#include "../scoring/score.h"
#include "../topology/topo.h"

#define EXT_MAX_BODY (16u << 20)        /* request body; more is answered 413 */
#define EXT_MAX_CLUSTER_BYTES (256u << 20) /* a cluster List (static mode's --cluster FILE) */
#define EXT_MAX_NODES 10000             /* nodes in one request and in the cluster view */
#define EXT_MAX_PODS 250000             /* pods in the cluster view */
#define EXT_MAX_JSON_DEPTH 64           /* nesting of any JSON document we accept */
#define EXT_MAX_CONTAINERS TOPO_GPUS_MAX_CONTAINERS /* containers + init containers of a pod */
#define EXT_MAX_VICTIMS 1024            /* preemption victims per node */
#define EXT_MAX_RESOURCES 8             /* configured GPU resource names */
#define EXT_NAME_MAX 254                /* DNS subdomain (253) + NUL: node, pod, namespace */
#define EXT_UID_MAX 64                  /* pod UID (36 chars in practice) + NUL */
#define EXT_RESOURCE_NAME_MAX 128
#define EXT_PRIORITY_MAX 10             /* kube-scheduler's MaxExtenderPriority */
#define EXT_FILTER_BEST_MAX 64          /* --filter-best: nodes a deciding filter passes */
#define EXT_RESERVATION_TTL_NS (30ull * 1000000000ull) /* prioritize -> bind */
#define EXT_COMMITTED_TTL_NS (300ull * 1000000000ull)  /* bind -> seen in the cluster view */

#define EXT_PLACEMENT_ANNOTATION "topofit.io/placement"
#define EXT_DEFAULT_RESOURCE "nvidia.com/gpu"
#define EXT_MAX_DOMAIN_LABELS 15          /* node label keys naming domains (kube cache keeps 16) */
#define EXT_LABEL_KEY_MAX 320              /* a label key: 253-byte prefix, '/', 63-byte name */
#define EXT_LABEL_VALUE_MAX 64             /* a label value: 63 bytes + NUL */
#define EXT_GROUP_ANNOTATION "topofit.io/group"           /* label or annotation */
#define EXT_GROUP_SIZE_ANNOTATION "topofit.io/group-size" /* label or annotation */

/* topofit.io/placement: what a pod asks of its GPU set.  ONE ROW PER VALUE, and the row is
 * all the code there is to a value: the enum, its name, the codec's list of valid values
 * and the decision all come from it (docs/extender.md, "How to add a placement value").
 *   X(ID, "annotation value", require, prefer, lowest_free)
 *   require:     score_require bits every chosen set must meet (the node is refused else);
 *   prefer:      bits tried first; when no set meets them, the best other set, at half
 *                the priority;
 *   lowest_free: no topology at all, the lowest free GPU indices.
 * The first row is the default (no annotation). */
#define EXT_PLACEMENTS(X)                                                                    \
        X(BEST_EFFORT, "best-effort", 0, 0, false)                                           \
        X(NVLINK_REQUIRED, "nvlink-required", SCORE_REQUIRE_NVLINK, 0, false)                \
        X(NVLINK_PREFERRED, "nvlink-preferred", 0, SCORE_REQUIRE_NVLINK, false)              \
        X(NUMA, "numa", SCORE_REQUIRE_NUMA, 0, false)                                        \
        X(PCIE_SWITCH, "pcie-switch", SCORE_REQUIRE_PCIE_SWITCH, 0, false)                   \
        X(NIC, "nic", SCORE_REQUIRE_NIC, 0, false)                                           \
        X(NONE, "none", 0, 0, true)

enum ext_placement {
#define EXT_PLACEMENT_ENUM(id, ...) EXT_PLACEMENT_##id,
        EXT_PLACEMENTS(EXT_PLACEMENT_ENUM)
#undef EXT_PLACEMENT_ENUM
        _EXT_PLACEMENT_MAX,
        _EXT_PLACEMENT_INVALID = -EINVAL,
};
/* The valid values, space-separated, for error messages and help. */
#define EXT_PLACEMENT_NAME(id, name, ...) " " name
#define EXT_PLACEMENT_NAMES EXT_PLACEMENTS(EXT_PLACEMENT_NAME)
const char *ext_placement_to_string(enum ext_placement p); /* NULL when invalid */
enum ext_placement ext_placement_from_string(const char *s);
/* The score_require bits a placement asks for (0 for the soft ones). */
unsigned ext_placement_require(enum ext_placement p);
/* The bits it tries first (0 for all but the "preferred" ones). */
unsigned ext_placement_prefer(enum ext_placement p);
/* Whether it ignores topology (the lowest free GPU indices). */
bool ext_placement_lowest_free(enum ext_placement p);

/* What to do with a node that carries no topofit.io/topology annotation. */
enum ext_unannotated {
        EXT_UNANNOTATED_PCIE,   /* treat as N GPUs on PCIe of unknown shape */
        EXT_UNANNOTATED_REJECT, /* refuse pods with a topology requirement (FailedNodes) */
        _EXT_UNANNOTATED_MAX,
        _EXT_UNANNOTATED_INVALID = -EINVAL,
};
const char *ext_unannotated_to_string(enum ext_unannotated u);
enum ext_unannotated ext_unannotated_from_string(const char *s);

struct ext_config {
        unsigned n_resources; /* GPU resource names counted in container limits */
        char resources[EXT_MAX_RESOURCES][EXT_RESOURCE_NAME_MAX];
        enum ext_unannotated unannotated;
        uint64_t reservation_ttl_ns;
        uint64_t committed_ttl_ns;
        uint64_t group_ttl_ns;       /* a group's domain and hold (PLACE_GROUP_TTL_NS) */
        /* Node labels that name a node's domain, by level (0: multi-node NVLink domain,
         * 1..: network tiers innermost first); at a level the first key listed that a node
         * carries wins, and the annotation's domain beats every label at level 0.  Defaults
         * in docs/placement.md ("Domains"). */
        unsigned n_domain_labels;
        struct {
                unsigned level;
                char key[EXT_LABEL_KEY_MAX];
        } domain_labels[EXT_MAX_DOMAIN_LABELS];
        struct score_config score;
        struct place_config place; /* the cluster term of prioritize (placement/) */
        /* The deciding filter (--filter-best, docs/extender.md): when > 0, filter ranks the
         * nodes as prioritize does and passes only this many of the fitting ones, the best;
         * with 1 kube-scheduler takes that node without scoring (no prioritize call).  0:
         * filter passes every node that fits.  At most EXT_FILTER_BEST_MAX. */
        unsigned filter_best;
};
/* nvidia.com/gpu, unannotated = pcie, the TTLs above, score_config_default(),
 * place_config_default(). */
void ext_config_default(struct ext_config *cfg);

/* --- the pod's request ------------------------------------------------------------------ */

struct ext_container {
        char name[EXT_NAME_MAX];
        unsigned count; /* GPUs in its limits, summed over the configured resource names */
        bool init;
};

/* A decoded Pod: who it is and what GPU set it needs. */
struct ext_request {
        char uid[EXT_UID_MAX];
        char name[EXT_NAME_MAX];
        char namespace[EXT_NAME_MAX];
        unsigned count; /* sum over containers, at least the largest init container's */
        enum ext_placement placement;
        unsigned require; /* ext_placement_require(placement) */
        /* Its group (gang), when it has one (docs/placement.md, "Groups"): id namespaced by
         * source and namespace, size when the pod says it, count/require copied from above,
         * mode from topofit.io/placement's domain-required / domain-preferred token
         * (default preferred for grouped pods). */
        struct place_group_request group;
        unsigned n_containers;
        struct ext_container containers[EXT_MAX_CONTAINERS];
};

/* --- the cluster view ------------------------------------------------------------------- */

struct ext_node {
        /* What every request reads of every node it names comes first, in the record's
         * first cache line with the name's first 16 bytes (records are aligned to a line:
         * ext_cluster allocates them with aligned_alloc), so the name lookup and the
         * free-GPU sum touch one line of a node with a short name, two with a longer one. */
        _Alignas(64) uint32_t name_hash; /* of name, for the name index and the ledger's buckets */
        uint8_t name_len;         /* strlen(name) */
        bool annotated;          /* topology from topofit.io/topology, not synthesized */
        uint8_t n_gpus;           /* <= TOPO_MAX_GPUS */
        struct score_class *cls; /* owned reference; shared by nodes of one topology class */
        struct topo_mask healthy; /* GPUs that may be handed out */
        struct topo_mask used;    /* GPUs recorded on live pods bound here */
        char name[EXT_NAME_MAX];
        const char *why_unannotated; /* static string when !annotated: missing or bad */
        uint64_t topo_digest;     /* hash of the annotation bytes and capacity: a rebuild
                                   * reuses an unchanged node without parsing it again */
        char domain[TOPO_ID_MAX]; /* multi-node NVLink domain from the annotation, "" none */
        /* Domains from the node's labels per level ("" none), and the index in
         * cfg->domain_labels of the key that set each (lower wins). */
        char label_domain[PLACE_MAX_LEVELS][PLACE_NAME_MAX];
        uint8_t label_rank[PLACE_MAX_LEVELS];
        /* Its value of the snapshot's group_keys[k] label ("" when it has none). */
        char key_value[PLACE_MAX_KEYS][EXT_LABEL_VALUE_MAX];
        /* Closed to new groups: cordoned (spec.unschedulable) or, in live mode, not Ready.
         * It holds no free room for a group's domain choice or holds (docs/placement.md,
         * "Groups"); pods bound there still count, and filter still answers for it (a pod
         * that tolerates the taint may be placed there by the scheduler). */
        bool closed;
        /* Where its annotation's bytes were when this view was built, their length and the
         * capacity given, when the builder was told they stay unchanged at that address
         * while the view's source lives (ext_cluster_builder_sources(): live mode's cache
         * objects); NULL otherwise.  Compared, never read. */
        const char *topo_src;
        uint32_t topo_src_len, topo_src_cap;
};
_Static_assert(TOPO_MAX_GPUS <= UINT8_MAX, "ext_node.n_gpus is a uint8_t");
_Static_assert(offsetof(struct ext_node, name) == 48, "a node's hot fields and 16 bytes of "
               "its name share its first cache line");

/* Kept small (100,000 pods fit in a few MiB): no names, the API server has those. */
struct ext_pod {
        char uid[EXT_UID_MAX];
        int node;             /* index into the snapshot's nodes, -1 when not bound here */
        uint32_t group;       /* its gang: 1 + index into the snapshot's pod_groups, 0 none */
        struct topo_mask gpus; /* from topofit.io/gpus; empty when none */
};

/* An immutable snapshot.  Nodes sorted by name, pods by uid. */
struct ext_cluster {
        unsigned n_ref;
        uint64_t generation;
        uint64_t serial;   /* unique to this snapshot in this process (never 0), so a
                            * record of it tells it from a later one at the same address */
        size_t n_nodes;
        struct ext_node *nodes;
        size_t n_pods;
        struct ext_pod *pods;
        size_t n_classes;
        struct score_class **classes; /* distinct classes, for metrics and reuse */
        /* The source its nodes' topo_src point into (ext_cluster_builder_sources()), NULL
         * none: a later build trusts them only while that source is alive. */
        const void *source;
        size_t index_size;            /* private: open-addressing name index of nodes */
        uint64_t *index;
        /* Nodes that share a class, annotated-ness and free GPUs (healthy, not used by
         * the view's pods) share a state: node_state[i] for nodes[i], < n_states, or
         * EXT_NO_STATE (no class).  Nodes of one state and no ledger hold get one verdict
         * in a request (filter_common), found by index instead of hashing each node's
         * key.  NULL when it could not be built (then every node is hashed). */
        uint32_t *node_state;
        uint32_t n_states;
        /* Verdicts per node state of the request shapes seen in this snapshot, kept across
         * requests (ext-verdict-memo.c; mutable, with its own lock); NULL: none kept. */
        struct ext_verdict_memo *verdicts;
        /* The cluster term's view of this snapshot (placement/), indexed like nodes; NULL
         * when the term is off (cluster_share 0) or could not be built (then prioritize
         * goes without it). */
        struct place_view *place;
        /* Group sizes known from Kubernetes' PodGroups (live mode), sorted by id (the
         * request's group id: "podgroup/<ns>/<name>"); none in static mode. */
        size_t n_group_sizes;
        struct ext_group_size *group_sizes;
        /* The groups (gangs) bound pods belong to, as their group records
         * (EXT_GROUP_RECORD_ANNOTATION) name them: sorted, unique; ext_pod.group indexes it.
         * Preempt reads it so that no victim set splits a bound gang. */
        size_t n_pod_groups;
        char (*pod_groups)[PLACE_NAME_MAX];
        /* Node label keys that PodGroups name as their topology constraint and that are
         * neither EXT_HOSTNAME_LABEL nor a domain label: key k is the view's level
         * PLACE_LEVEL_KEY(k), its domains named "key=value" (ext_key_domain_name).  A
         * snapshot built from a base keeps the base's keys that PodGroups still name at
         * their indices (a group's recorded level stays valid) and puts new ones in free
         * slots ("": free; a slot's next key has other domain names, so a stale record
         * finds no domain rather than a wrong one). */
        char group_keys[PLACE_MAX_KEYS][EXT_LABEL_KEY_MAX];
};

/* A PodGroup's gang size (minCount) and topology constraint, keyed like
 * place_group_request.id. */
#define EXT_NO_STATE UINT32_MAX

struct ext_group_size {
        char id[PLACE_NAME_MAX];
        unsigned size;      /* 0: not a gang (the size stays unknown) */
        bool has_within;    /* its topology key names a level (ext_config_key_level) */
        unsigned within;
};
#define EXT_HOSTNAME_LABEL "kubernetes.io/hostname" /* a topology key meaning one node */
#define EXT_MAX_GROUP_SIZES EXT_MAX_PODS /* PodGroups kept in the cluster view */

/* The id a pod's group gets from source (the request decode's "podgroup", "topofit"...),
 * its namespace and name (and name2 when non-NULL): "source/ns/name[/name2]", or, when
 * that is over PLACE_NAME_MAX - 1 bytes, its head and a 64-bit hash of the whole. */
void ext_group_id(char id[PLACE_NAME_MAX], const char *source, const char *ns, const char *name,
                  const char *name2);

/* A pod's label (annotation false) or annotation by key, NULL when it has none: the request
 * decode reads its JSON, the live view the keys the cache kept (ext_group_keys). */
typedef const char *(*ext_pod_key_fn)(const void *pod, const char *key, bool annotation);

/* The id of the pod's group: from scheduling_group (spec.schedulingGroup.podGroupName, ""
 * or NULL: none) when set, else from the first of the labels and annotations that name a
 * group (topofit.io/group, LeaderWorkerSet, Kueue, coscheduling, Volcano, JobSet, Kubeflow;
 * docs/placement.md); id[0] is 0 when none does.  *ret_size_key (may be NULL) is the
 * annotation the source found puts the group's size in, NULL when it puts none. */
void ext_pod_group_id(const void *pod, ext_pod_key_fn get, const char *ns,
                      const char *scheduling_group, char id[PLACE_NAME_MAX],
                      const char **ret_size_key);

/* The label (annotation false) or annotation keys ext_pod_group_id reads, at most max of
 * them, into keys; returns how many there are. */
size_t ext_group_keys(bool annotation, const char **keys, size_t max);

/* The size of group id from the view's PodGroups, 0 when unknown.  c may be NULL. */
unsigned ext_cluster_group_size(const struct ext_cluster *c, const char *id);
/* The view's PodGroup entry of group id, NULL when none (borrowed from c; c may be NULL). */
const struct ext_group_size *ext_cluster_group(const struct ext_cluster *c, const char *id);

/* The domain level a node label key names for a group's topology constraint:
 * EXT_HOSTNAME_LABEL is one node (PLACE_LEVEL_NODE), a key of cfg->domain_labels its level.
 * 0 and *ret_level, or -ENOENT (a key the extender does not read: no constraint). */
int ext_config_key_level(const struct ext_config *cfg, const char *key, unsigned *ret_level);

struct ext_cluster *ext_cluster_ref(struct ext_cluster *c);
struct ext_cluster *ext_cluster_unref(struct ext_cluster *c); /* accepts NULL, returns NULL */
DEFINE_CLEANUP_FUNC(struct ext_cluster, ext_cluster_unref)

/* Lookups (nodes by a hash index, pods by binary search); NULL when absent.  Borrowed
 * from c. */
const struct ext_node *ext_cluster_find_node(const struct ext_cluster *c, const char *name);
/* The same for a name of len bytes (no NUL needed). */
const struct ext_node *ext_cluster_find_node_n(const struct ext_cluster *c, const char *name,
                                              size_t len);
const struct ext_pod *ext_cluster_find_pod(const struct ext_cluster *c, const char *uid);

/* Builds a snapshot.  base (may be NULL) lends its topology classes, so a rebuild keeps
 * their memos, and its nodes: a node whose annotation and capacity did not change is
 * copied, not parsed again.  The builder copies everything it is given. */
struct ext_cluster_builder;
struct ext_cluster_builder *ext_cluster_builder_new(const struct ext_config *cfg,
                                                    const struct ext_cluster *base);
struct ext_cluster_builder *ext_cluster_builder_free(struct ext_cluster_builder *b);
DEFINE_CLEANUP_FUNC(struct ext_cluster_builder, ext_cluster_builder_free)
/* The nodes' annotations come from source, immutable objects whose bytes stay unchanged at
 * their address while source is referenced (live mode: a kube snapshot); alive: the source
 * the base view was built from, if the caller still holds it (else NULL).  Then a node
 * whose annotation is at the same address, of the same length and capacity, as its base
 * record's is known unchanged without hashing its bytes (the digest read every node's
 * annotation, cold, on every rebuild).  Without this call every annotation is hashed. */
void ext_cluster_builder_sources(struct ext_cluster_builder *b, const void *source,
                                 const void *alive);

/* Adds a node.  topo_json/len is its topofit.io/topology annotation (NULL when absent);
 * gpu_capacity is its allocatable GPU count, used when the annotation is absent or bad.
 * A bad annotation is not an error: the node becomes unannotated and *ret_why (when
 * non-NULL) says why.  Returns 0, -EEXIST (duplicate name), -E2BIG (EXT_MAX_NODES),
 * -EINVAL (bad name), -ENOMEM. */
int ext_cluster_builder_add_node(struct ext_cluster_builder *b, const char *name,
                                 const char *topo_json, size_t len, unsigned gpu_capacity,
                                 const char **ret_why);
/* One label of the node added last: when cfg->domain_labels lists key, value becomes the
 * node's domain at that key's level (a key listed earlier wins); when key is a registered
 * group key (ext_cluster_builder_group_key), the node's value of it.  Other keys, and values
 * of 64 bytes or more, are ignored.  Returns 0, -ENOENT (no node added yet), -EINVAL (NULL
 * key or value). */
int ext_cluster_builder_node_label(struct ext_cluster_builder *b, const char *key,
                                   const char *value);
/* The pod added last belongs to the group its group record (EXT_GROUP_RECORD_ANNOTATION,
 * json/len) names, when the record decodes and names a group of namespace ns.  Returns 0,
 * -ENOENT (no pod added yet), -EINVAL (a record that does not decode, or of another
 * namespace: the pod stays without a group), -ENOMEM. */
int ext_cluster_builder_pod_group(struct ext_cluster_builder *b, const char *ns,
                                  const char *json, size_t len);
/* The pod added last belongs to group id (as ext_group_id writes it: "source/ns/name"),
 * for a bound pod whose group has no record: its EXT_GROUP_ID_ANNOTATION, or the group
 * sources of its own object (labels, annotations, spec.schedulingGroup).  Returns 0,
 * -ENOENT (no pod added yet), -EINVAL (empty, over PLACE_NAME_MAX - 1 bytes, not printable
 * ASCII, or of another namespace: no group), -ENOMEM.  Call it or
 * ext_cluster_builder_pod_group once per pod. */
int ext_cluster_builder_pod_group_id(struct ext_cluster_builder *b, const char *ns,
                                     const char *id);
/* Registers key (a PodGroup's topology key) as a level of the view before nodes are added,
 * so that ext_cluster_builder_node_label() keeps the nodes' values of it.  EXT_HOSTNAME_LABEL
 * and the domain labels need none (0).  Returns 0 (known or added), -E2BIG (PLACE_MAX_KEYS
 * keys already: the constraint is ignored), -EINVAL (not a label key). */
int ext_cluster_builder_group_key(struct ext_cluster_builder *b, const char *key);
/* Group key k of the builder (PLACE_LEVEL_KEY(k)), NULL when slot k is free. */
const char *ext_cluster_builder_key(const struct ext_cluster_builder *b, unsigned k);
/* The name of the domain of label key's value at its key level: "key=value", or, when that
 * is over PLACE_NAME_MAX - 1 bytes, "#" and 16 hex digits of a hash of the key, "=value". */
void ext_key_domain_name(char name[PLACE_NAME_MAX], const char *key, const char *value);
/* Marks the node added last closed to new groups (ext_node.closed): cordoned, or not
 * Ready.  Returns 0 or -ENOENT (no node added yet). */
int ext_cluster_builder_node_closed(struct ext_cluster_builder *b, bool closed);
/* Adds a live pod.  node may be NULL or "" (not bound), gpus NULL (none recorded).
 * namespace and name are checked but not kept (the snapshot stays small).
 * Returns 0, -EEXIST (duplicate uid), -E2BIG (EXT_MAX_PODS), -EINVAL, -ENOMEM. */
int ext_cluster_builder_add_pod(struct ext_cluster_builder *b, const char *uid,
                                const char *namespace, const char *name, const char *node,
                                const struct topo_mask *gpus);
/* Records the gang size of the PodGroup ns/name (its minCount).  A min_count of 0 (not a
 * gang) or over PLACE_MAX_GROUP_PODS is left out (the size stays unknown, as for a foreign
 * size that does not parse).  Returns 0, -E2BIG (EXT_MAX_GROUP_SIZES), -EINVAL (bad name),
 * -ENOMEM. */
int ext_cluster_builder_add_group_size(struct ext_cluster_builder *b, const char *ns,
                                       const char *name, unsigned min_count);
/* The same with the PodGroup's topology constraint key (NULL or "": none).  A key that
 * ext_config_key_level() maps, or a key registered with ext_cluster_builder_group_key()
 * (its key level), makes the group land within one domain of that level; such a PodGroup
 * is kept even when it is not a gang (size unknown).  Another key is ignored.  Same
 * returns. */
int ext_cluster_builder_add_podgroup(struct ext_cluster_builder *b, const char *ns,
                                     const char *name, unsigned min_count,
                                     const char *topology_key);
/* Sorts, resolves pods to nodes, computes each node's used mask (GPUs beyond a node's
 * count are dropped), and hands out the snapshot with generation gen.  Frees b either way.
 * Returns 0 or -ENOMEM. */
int ext_cluster_builder_finish(struct ext_cluster_builder *b, uint64_t gen,
                               struct ext_cluster **ret);

/* A copy of c with one more pod (static mode's bind), generation + 1; group_record (may
 * be NULL) is the pod's group record, read as ext_cluster_builder_pod_group does, and
 * group_id (may be NULL) its group when there is no valid record (a grouped pod bound
 * while its group had no domain), read as ext_cluster_builder_pod_group_id does.  -EEXIST
 * when the uid is already there, -ENOENT when node is not in c, -ENOMEM. */
int ext_cluster_with_pod(const struct ext_cluster *c, const struct ext_config *cfg,
                         const char *uid, const char *namespace, const char *name,
                         const char *node, const struct topo_mask *gpus,
                         const char *group_record, const char *group_id,
                         struct ext_cluster **ret);
/* The id of the group pod p (of c) belongs to, NULL when none. */
const char *ext_cluster_pod_group(const struct ext_cluster *c, const struct ext_pod *p);

/* A node built from a Node object the scheduler sent that is not in the cluster view (full
 * mode).  Caller releases it with ext_node_release().  Same arguments as add_node. */
int ext_node_init(struct ext_node *n, const struct ext_config *cfg, const char *name,
                  const char *topo_json, size_t len, unsigned gpu_capacity, const char **ret_why);
void ext_node_release(struct ext_node *n);

/* --- the reservation ledger -------------------------------------------------------------- */

#define EXT_MAX_PENDING 1024 /* pods seen in filter/prioritize, awaiting bind */
#define EXT_MAX_GRANTS 64    /* preemptions answered, awaiting their victims' departure */
/* How long a preemption's victims may take to leave the view: three times the default
 * terminationGracePeriodSeconds (30 s). */
#define EXT_GRANT_NS (90ull * 1000000000ull)

struct ext_ledger;
struct ext_ledger *ext_ledger_new(const struct ext_config *cfg);
struct ext_ledger *ext_ledger_free(struct ext_ledger *l);
DEFINE_CLEANUP_FUNC(struct ext_ledger, ext_ledger_free)

/* GPUs of node held in the ledger by pods other than uid (NULL: by anyone) at now_ns. */
void ext_ledger_held(struct ext_ledger *l, const char *node, const char *uid, uint64_t now_ns,
                     struct topo_mask *ret);
/* Forgets expired entries.  A committed entry whose pod the snapshot c shows is marked with
 * c's generation: views of that generation or newer stop counting it at once, older views
 * (requests still in flight) keep counting it, and it goes a grace period later. */
void ext_ledger_prune(struct ext_ledger *l, const struct ext_cluster *c, uint64_t now_ns);
/* Drops every entry of uid (a failed binding). */
void ext_ledger_release(struct ext_ledger *l, const char *uid);
struct ext_ledger_stats {
        unsigned reserved; /* tentative entries (prioritize) */
        unsigned committed; /* bound, not yet in the cluster view */
        unsigned gpus_held; /* GPUs they keep from other pods (a gang member's pick: none) */
};
void ext_ledger_stats(struct ext_ledger *l, uint64_t now_ns, struct ext_ledger_stats *ret);

/* What else outlives a request, in the ledger too (bounded rings, oldest evicted).
 * The requests filter and prioritize decoded, since bind names only the pod: remember a
 * copy (-EINVAL without a UID, -ENOMEM), look one up by UID (0 or -ENOENT), forget it. */
int ext_ledger_remember_request(struct ext_ledger *l, const struct ext_request *req);
int ext_ledger_lookup_request(struct ext_ledger *l, const char *uid, struct ext_request *ret);
void ext_ledger_forget_request(struct ext_ledger *l, const char *uid);
/* Preemption grants: uid's preemption on node takes gpus from victims (until now_ns +
 * EXT_GRANT_NS); and whether a live grant of uid on node n overlaps GPUs the view n still
 * shows in use (the victims are going, the view has not seen it yet). */
void ext_ledger_grant(struct ext_ledger *l, const char *uid, const char *node,
                      const struct topo_mask *gpus, uint64_t now_ns);
bool ext_ledger_grant_waiting(struct ext_ledger *l, const char *uid, const struct ext_node *n,
                              uint64_t now_ns);

/* --- the verbs ---------------------------------------------------------------------------- */

/* Per-node outcome of filter, prioritize and preempt. */
struct ext_verdict {
        int r;               /* 0 fits; -ENOSPC / -EAGAIN not now; -ENOEXEC never on this
                              * node; -ENOENT unknown node; -EMEDIUMTYPE no topology and the
                              * policy rejects; -EINVAL bad request */
        int priority;        /* 0..EXT_PRIORITY_MAX, prioritize only */
        const char *why;     /* static string, NULL when r == 0 */
        bool off_domain;     /* a grouped pod (domain-preferred): the node is outside its
                              * group's domain; prioritize ranks it last */
        bool planned;        /* prioritize, a grouped pod: its group's plan puts it on this
                              * node (place_group_plan_pick); ranked first */
        double loss;         /* prioritize: the cluster term (place_loss()), 0 without one */
        struct topo_mask free; /* GPUs free for this pod when decided */
        struct score_choice choice; /* the set; valid when r == 0 */
};

/* True when a verdict's node goes to FailedAndUnresolvableNodes (preemption cannot help). */
bool ext_verdict_unresolvable(const struct ext_verdict *v);

/* Filter: for each of the n nodes (borrowed pointers; NULL = not known, gives -ENOENT),
 * whether req fits now, writing ret[n].  Free GPUs are the node's healthy GPUs minus
 * those on live pods minus the ledger's holds for other pods.  Returns how many fit. */
int ext_filter(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
               const struct ext_request *req, const struct ext_node *const *nodes, size_t n,
               uint64_t now_ns, struct ext_verdict *ret);

/* Prioritize: filter plus the 0..10 priority of each fitting node (0 for the others):
 * the mean of score_node_priority() (bandwidth against the node's own best, packing,
 * fragmentation) and 10 x the set's bandwidth relative to the best set of any fitting node
 * in this request (for multi-GPU requests), rounded; then, when the snapshot has a
 * placement view (cfg->place.cluster_share > 0), the cluster term folded in by
 * place_rank(): what each node's set takes from the capacity the cluster has left of the
 * request-class mix (docs/placement.md); and
 * a tentative reservation of the chosen set on the best node (ties: name) for the pod,
 * replacing its earlier one.  Returns how many fit. */
int ext_prioritize(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
                   const struct ext_request *req, const struct ext_node *const *nodes, size_t n,
                   uint64_t now_ns, struct ext_verdict *ret);

/* ext_filter and ext_prioritize with their verdicts compact, as the HTTP handler takes them:
 * node i's verdict is ret[rep[i]] (ext_verdict_at()), rep[i] <= i.  Nodes of one topology
 * class with the same free GPUs share one verdict, so of ret only the entries with
 * rep[i] == i are written (for 5,000 nodes of one 8-GPU class, at most 256 of 5,000
 * 112-byte verdicts).  -E2BIG when n exceeds UINT32_MAX. */
int ext_filter_rep(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
                   const struct ext_request *req, const struct ext_node *const *nodes, size_t n,
                   uint64_t now_ns, struct ext_verdict *ret, uint32_t *rep);
int ext_prioritize_rep(const struct ext_cluster *c, struct ext_ledger *l,
                       const struct ext_config *cfg, const struct ext_request *req,
                       const struct ext_node *const *nodes, size_t n, uint64_t now_ns,
                       struct ext_verdict *ret, uint32_t *rep);

/* The deciding filter (cfg->filter_best > 0): prioritize's verdicts and its reservation on
 * the pod's best node, then of the fitting nodes the cfg->filter_best of highest priority
 * (ties: node name, as prioritize's best), their indices written to ret_pass in request
 * order (room for cfg->filter_best) and their number to *ret_n_pass.  *ret_n_pass is
 * SIZE_MAX when every fitting node passes: filter_best 0, a pod that asks no GPU, or no
 * more fitting nodes than filter_best.  Returns how many fit (before narrowing), or
 * -E2BIG. */
int ext_filter_best_rep(const struct ext_cluster *c, struct ext_ledger *l,
                        const struct ext_config *cfg, const struct ext_request *req,
                        const struct ext_node *const *nodes, size_t n, uint64_t now_ns,
                        struct ext_verdict *ret, uint32_t *rep, uint32_t *ret_pass,
                        size_t *ret_n_pass);

/* Node i's verdict: v[rep[i]], or v[i] when rep is NULL (one verdict per node). */
static inline const struct ext_verdict *
ext_verdict_at(const struct ext_verdict *v, const uint32_t *rep, size_t i)
{
        return &v[rep ? rep[i] : i];
}

/* Bind, the commit point: under the ledger lock, takes the pod's reservation on node when
 * its GPUs are still free, or else the best free set now, and records it as committed for
 * uid.  Returns 0 and the set in *ret, -ENOENT (node unknown), -ENOSPC / -EAGAIN /
 * -ENOEXEC (no set; *ret_why says why), -EALREADY (uid already has GPUs in c: *ret is
 * then its set).  On failure the pod's reservations are dropped.  The caller writes the binding and calls ext_ledger_release() if that
 * fails.  A request with count 0 commits nothing and returns an empty choice. */
int ext_bind(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
             const struct ext_request *req, const char *node, uint64_t now_ns,
             struct score_choice *ret, const char **ret_why);

/* The group record to bind req's pod with (EXT_GROUP_RECORD_ANNOTATION): the domain its
 * group has in l's group table at now_ns (call it after ext_bind, which counts the pod
 * bound).  0 with *ret_json malloc()ed, or NULL when the pod is not grouped or its group has
 * no live record; -ENOMEM. */
int ext_group_record_for(const struct ext_cluster *c, struct ext_ledger *l,
                         const struct ext_request *req, uint64_t now_ns, char **ret_json);

/* A bound pod carrying a group record, as the API server shows it (borrowed). */
struct ext_group_member {
        const char *uid;
        const char *ns;
        const char *record;  /* the annotation's value */
        size_t record_len;
};
/* After a restart: rebuilds the domains and holds of the groups whose pods m[0..n) are
 * already bound, so the rest of a gang lands in the same domain and others stay out of its
 * room.  A member counts when its record decodes, names a group of its own namespace and a
 * domain of c's view that holds its node, and c shows it bound with as many recorded GPUs
 * (topofit.io/gpus) as the record's count.  Per group (members agreeing with the first one's
 * domain): the size is its PodGroup's minCount when c knows it, else the record's; a group
 * of unknown size or with every pod bound is left out; a group l already has a live record of
 * gets its bound pods added.  Returns how many groups were restored, or -ENOMEM; *ret_refused
 * (may be NULL) counts members left out. */
int ext_groups_restore(const struct ext_cluster *c, struct ext_ledger *l,
                       const struct ext_group_member *m, size_t n, uint64_t now_ns,
                       unsigned *ret_refused);

/* Preempt, for one candidate node: whether evicting (some of) the n victims (pod UIDs)
 * frees a set that satisfies req.  On 0 sets needed[i] for the victims to keep in the
 * answer: victims holding GPUs of the chosen set, and victims holding no recorded GPUs
 * (the scheduler chose them for other resources).  A bound gang (ext_pod.group) is never
 * split: its members are all taken or none; when every bound member is a victim on this
 * node, one needed member makes all of them needed; when not, none of its GPUs count as
 * freed, and a set that still needs one of its members drops the node.  Victims bound on
 * other nodes (kube-scheduler 1.37 lists a PodGroup evicted whole that way) drop the node.
 * No victim is ever added: needed[] only picks among the scheduler's own victims.  Returns
 * 0, -ENOSPC / -EAGAIN / -ENOEXEC (drop the node), -ENOENT (node unknown), -ENOMEM. */
int ext_preempt(const struct ext_cluster *c, struct ext_ledger *l, const struct ext_config *cfg,
                const struct ext_request *req, const struct ext_node *node,
                const char *const *victims, size_t n, uint64_t now_ns, bool *needed,
                struct ext_verdict *ret);

/* --- the codec: kube-scheduler extender JSON ------------------------------------------------
 * Decoders take a byte range (capped by EXT_MAX_BODY, nesting by EXT_MAX_JSON_DEPTH) and on
 * failure return -EINVAL (malformed, wrong type), -EMSGSIZE (over EXT_MAX_BODY), -E2BIG (a
 * count over its cap: nodes, victims, containers), -ELOOP (too deep) or -ENOMEM, with
 * *ret_why, a sentence for the HTTP 400 body.  Encoders append to a buf whose cap bounds the answer. */

/* ExtenderArgs{Pod, Nodes, NodeNames}. */
struct ext_args_node {        /* Nodes mode: what the extender reads of one Node object */
        const char *topo;     /* its topofit.io/topology annotation as it stands in the body, */
        size_t topo_len;      /* still JSON-escaped (ext_args_topology() unescapes); NULL: none */
        unsigned gpu_capacity; /* status.allocatable (else capacity) of the GPU resources */
        const char *span;     /* the whole Node object in the body, which the filter answer */
        size_t span_len;      /* echoes byte for byte */
};
struct ext_args {
        struct ext_request req;
        bool node_names;   /* NodeNames mode (nodeCacheCapable); false: Nodes mode */
        size_t n;          /* nodes named or sent */
        const char **names; /* n node names, unescaped, name_lens[i] bytes each and NOT
                             * NUL-terminated: a name not escaped in the body points into
                             * it, an escaped one into the args' own copy */
        uint8_t *name_lens; /* names[i]'s length (names are shorter than EXT_NAME_MAX) */
        struct ext_args_node *nodes; /* Nodes mode: n entries; NULL in NodeNames mode */
        bool *name_plain;  /* names[i] is ASCII and was not escaped: JSON as it stands (NULL:
                            * not known, the encoder checks) */
        bool names_in_body; /* NodeNames mode: each plain name is its string in the body's
                             * NodeNames array, in order, so the text from one plain name's
                             * opening quote to a later one's closing quote, when every name
                             * between is plain too, is those elements as they stand */
        char *strings;     /* private: the escaped names' bytes */
        /* NodeNames mode: the NodeNames array as it stands in the body, '[' to ']' (NULL:
         * not known); list_memo: it repeated the names memo's list byte for byte, so the
         * names were taken from the memo (still pointing into this body) and the nodes may
         * be too (ext_nodes_resolve_memo). */
        const char *list_text;
        size_t list_len;
        bool list_memo;
};
static inline size_t
ext_args_name_len(const struct ext_args *a, size_t i)
{
        return a->name_lens[i];
}
/* names[i] NUL-terminated in buf, which it returns (for logs and C-string interfaces). */
static inline const char *
ext_args_name(const struct ext_args *a, size_t i, char buf[EXT_NAME_MAX])
{
        memcpy(buf, a->names[i], a->name_lens[i]);
        buf[a->name_lens[i]] = 0;
        return buf;
}
/* ExtenderArgs from a request body, read by common/json.h's scanner without a tree
 * (extender/ext-args.c).  The result points into json (the Nodes' annotations and spans):
 * keep json alive and unchanged until the answer is encoded. */
int ext_args_decode(const char *json, size_t len, const struct ext_config *cfg,
                    struct ext_args *ret, const char **ret_why);

/* The names memo: one NodeNames list kept from an earlier request, with the names' places
 * in it and the nodes they resolved to in one snapshot.  kube-scheduler sends a pod's
 * prioritize the list its filter answered, in the same order (the same list when every
 * node passed), and sends a pod it retries the same list again, so a worker keeps its last
 * list: a body whose NodeNames repeats it byte for byte is not scanned name by name (the
 * bytes are compared) and, against the same snapshot, its names are not looked up again.
 * (From one pod to the next the scheduler's list is usually in another order: it filters
 * nodes in parallel.)  Lists with an escaped name are not kept.  Not shared between
 * threads; at most EXT_MAX_NODES names. */
struct ext_nodes;
struct ext_names_memo {
        char *text;           /* the array, '[' to ']' */
        size_t len, text_alloc;
        size_t n, alloc;      /* names, and the room of the arrays below */
        uint32_t *off;        /* each name's offset in text */
        uint8_t *lens;
        bool *plain;
        uint64_t serial;      /* the snapshot nodes resolved in (ext_cluster.serial), 0 none */
        const struct ext_node **nodes;
};
void ext_names_memo_release(struct ext_names_memo *m);
/* ext_args_decode(), stepping over a NodeNames list that repeats m's (NULL: none). */
int ext_args_decode_memo(const char *json, size_t len, const struct ext_config *cfg,
                         const struct ext_names_memo *m, struct ext_args *ret,
                         const char **ret_why);
/* After a names-mode request was decoded with m and its nodes resolved in c: keeps its
 * list and nodes in m, unless a->list_memo (m holds them already) or the list cannot be
 * kept (an escaped name, no list text, too many names).  0, or -ENOMEM (m is then empty). */
int ext_names_memo_keep(struct ext_names_memo *m, const struct ext_args *a,
                        const struct ext_cluster *c, const struct ext_nodes *rn);
/* Nodes mode: node i's topology annotation unescaped into a new string (free() it; NULL
 * when the node has none) and its length.  0 or -ENOMEM. */
int ext_args_topology(const struct ext_args *a, size_t i, char **ret, size_t *ret_len);
void ext_args_release(struct ext_args *a);

/* The request's nodes, resolved for the verbs: the view's node by name, or (Nodes mode)
 * one built from the Node object the scheduler sent when the view does not have it; NULL
 * ("not in the cluster view") when neither.  nodes[a->n]; extra holds the built ones. */
struct ext_nodes {
        const struct ext_node **nodes;
        struct ext_node *extra;
        size_t n_extra;
};
/* Fills *ret (release it with ext_nodes_release, also after a failure): 0 or -ENOMEM. */
int ext_nodes_resolve(const struct ext_cluster *c, const struct ext_config *cfg,
                      const struct ext_args *a, struct ext_nodes *ret);
/* ext_nodes_resolve(), taking the nodes from m when a's list is m's (a->list_memo) and m
 * resolved it in c; when a's list is m's but resolved in another snapshot, m then keeps
 * this resolution.  m may be NULL. */
int ext_nodes_resolve_memo(const struct ext_cluster *c, const struct ext_config *cfg,
                           const struct ext_args *a, struct ext_names_memo *m,
                           struct ext_nodes *ret);
void ext_nodes_release(struct ext_nodes *n);

/* A Pod object (Kubernetes JSON) into a request. */
int ext_request_decode(const char *json, size_t len, const struct ext_config *cfg,
                       struct ext_request *ret, const char **ret_why);

/* ExtenderFilterResult: passing nodes in the mode the request used (NodeNames, or Nodes
 * echoed as sent), the others with their reasons in FailedNodes or
 * FailedAndUnresolvableNodes, and Error ("" when error is NULL).  Node i's verdict is
 * ext_verdict_at(v, rep, i) (rep NULL: v[i]). */
int ext_filter_result_encode(const struct ext_args *a, const struct ext_verdict *v,
                             const uint32_t *rep, const char *error, struct buf *out);
/* The same with only the n_pass nodes at pass (request indices, ascending, each fitting)
 * in NodeNames / Nodes: the other fitting nodes are in no list (kube-scheduler drops them
 * without a status); pass NULL: every fitting node, as above. */
int ext_filter_result_encode_pass(const struct ext_args *a, const struct ext_verdict *v,
                                  const uint32_t *rep, const uint32_t *pass, size_t n_pass,
                                  const char *error, struct buf *out);
/* HostPriorityList: [{"Host":name,"Score":priority}] for every node of the request; node
 * i's verdict as above. */
int ext_priorities_encode(const struct ext_args *a, const struct ext_verdict *v,
                          const uint32_t *rep, struct buf *out);

/* ExtenderBindingArgs{PodName, PodNamespace, PodUID, Node}. */
struct ext_binding {
        char pod_name[EXT_NAME_MAX];
        char pod_namespace[EXT_NAME_MAX];
        char pod_uid[EXT_UID_MAX];
        char node[EXT_NAME_MAX];
};
int ext_binding_decode(const char *json, size_t len, struct ext_binding *ret,
                       const char **ret_why);
/* ExtenderBindingResult{Error}. */
int ext_binding_result_encode(const char *error, struct buf *out);

/* ExtenderPreemptionArgs{Pod, NodeNameToVictims, NodeNameToMetaVictims}: victims by UID
 * from either map (the Meta form when both are present). */
struct ext_preempt_node {
        char *node;
        size_t n_victims;
        char **victims;      /* pod UIDs */
        int64_t pdb_violations;
};
struct ext_preempt_args {
        struct ext_request req;
        size_t n;
        struct ext_preempt_node *nodes;
};
int ext_preempt_args_decode(const char *json, size_t len, const struct ext_config *cfg,
                            struct ext_preempt_args *ret, const char **ret_why);
void ext_preempt_args_release(struct ext_preempt_args *a);
/* ExtenderPreemptionResult{NodeNameToMetaVictims}: nodes with keep[i], and of each the
 * victims with needed[i][j]. */
int ext_preempt_result_encode(const struct ext_preempt_args *a, const bool *keep,
                              bool *const *needed, struct buf *out);

/* The topofit.io/gpus annotation for a bound pod (the codec is topology/topo-gpus.c):
 * per container (init containers included) its GPUs, carved from set in container order.
 * Writes a malloc()ed string. */
int ext_gpus_annotation_encode(const struct ext_request *req, const struct ext_node *node,
                               const struct score_choice *set, char **ret_json);
/* Its inverse as far as scheduling needs (topo_gpus_decode, indices only): the union of
 * the containers' GPUs, below n_gpus.  Error codes and *ret_why as topo_gpus_decode. */
int ext_gpus_annotation_decode(const char *json, size_t len, unsigned n_gpus,
                               struct topo_mask *ret, const char **ret_why);

/* The group record a grouped pod is bound with (annotation EXT_GROUP_RECORD_ANNOTATION,
 * beside topofit.io/gpus in the Binding), so an extender that restarts rebuilds its groups'
 * domains and holds from the pods already bound (ext_groups_restore):
 *   {"version":1,"group":ID,"level":L,"domain":NAME,"size":N,"count":C,"require":R,
 *    "whole":B}
 * level 0..PLACE_MAX_LEVELS-1, PLACE_LEVEL_NODE (one node, named by domain), or a key
 * level PLACE_LEVEL_KEY(k) (domain "key=value": ext_key_domain_name; a restart finds it by
 * that name whatever k the key has then).  At most
 * EXT_GROUP_RECORD_MAX bytes. */
#define EXT_GROUP_RECORD_ANNOTATION "topofit.io/group-domain"
#define EXT_GROUP_RECORD_MAX 1024
/* A grouped pod bound while its group has no record (no domain to record) carries its
 * group id instead (ext_group_id's form, "podgroup/ns/name"), so the view knows the bound
 * pod's gang from the pod's own annotations (preempt keeps gangs whole), as the live cache
 * keeps only topofit.io/ annotations of a pod, not its labels or spec. */
#define EXT_GROUP_ID_ANNOTATION "topofit.io/group-id"
struct ext_group_record {
        struct place_group_request group; /* id, size, count, require; mode and within unset */
        struct place_group_domain domain; /* level, name, whole (sets 0) */
};
/* Writes a malloc()ed record; 0 or -ENOMEM, -EINVAL (a level out of range, an empty id or
 * domain). */
int ext_group_record_encode(const struct ext_group_record *rec, char **ret_json);
/* 0, or -EINVAL / -EMSGSIZE / -ENOMEM with *ret_why: not JSON, another version, a field
 * missing or out of range (size and count 0..PLACE_MAX_GROUP_PODS / TOPO_MAX_GPUS, names
 * under PLACE_NAME_MAX bytes), over EXT_GROUP_RECORD_MAX bytes. */
int ext_group_record_decode(const char *json, size_t len, struct ext_group_record *ret,
                            const char **ret_why);

/* A `kubectl get nodes,pods -o json` List (or a NodeList / PodList) into a snapshot.
 * Pods in phase Succeeded or Failed are not live and are skipped. */
int ext_cluster_decode(const char *json, size_t len, const struct ext_config *cfg,
                       const struct ext_cluster *base, uint64_t gen, struct ext_cluster **ret,
                       const char **ret_why);
