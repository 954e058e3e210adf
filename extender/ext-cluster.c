/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster view: an immutable, refcounted snapshot of nodes and pods, built to the side
 * by a builder and handed out whole.  Sits in the extender core (no I/O).  Invariants of a
 * finished snapshot: nodes sorted by name, pods sorted by uid, both unique; every node
 * holds one reference to a score_class shared by all nodes of its topology class
 * (topo_class_hash); node->used is the union of the GPU sets of the pods bound to it.
 * Readers take a reference (ext_cluster_ref) and never write; nothing is ever mutated
 * after ext_cluster_builder_finish(), a change is a new snapshot (ext_cluster_with_pod).
 */
#include "ext-core-private.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "str.h"

struct class_slot {
        uint64_t hash;
        unsigned n_gpus;
        struct score_class *cls;
};

struct ext_cluster_builder {
        const struct ext_config *cfg;
        size_t n_nodes, alloc_nodes;
        struct ext_node *nodes;
        size_t n_pods, alloc_pods;
        struct ext_pod *pods;
        /* Per pod, its node's name until finish resolves it: an offset into node_names
         * (POD_NO_NODE: none).  Pods come by node, so a name repeating the one before is
         * not stored again. */
        uint32_t *pod_node;
        char *node_names;
        size_t n_node_names, alloc_node_names;
        uint32_t last_node; /* offset of the last name stored, POD_NO_NODE before one */
        size_t n_classes, alloc_classes;
        struct class_slot *classes;
        const struct ext_cluster *base;
        size_t n_group_sizes, alloc_group_sizes;
        struct ext_group_size *group_sizes;
        /* Group ids of grouped pods, one per ext_cluster_builder_pod_group() call, in call
         * order; a pod's group is 1 + its index here until finish sorts them. */
        size_t n_gids, alloc_gids;
        char (*gids)[PLACE_NAME_MAX];
        /* Group keys (ext_cluster.group_keys): the base's at their indices ("" a free
         * slot), and whether a PodGroup of this build named each; finish keeps those. */
        char keys[PLACE_MAX_KEYS][EXT_LABEL_KEY_MAX];
        bool key_named[PLACE_MAX_KEYS];
        /* ext_cluster_builder_sources(): the new view's source, and whether the base's
         * topo_src may be compared (its source is alive). */
        const void *source;
        bool base_sources_alive;
};

#define POD_NO_NODE UINT32_MAX

static int
grow(void **p, size_t *alloc, size_t need, size_t size)
{
        size_t n;
        void *q;

        if (need <= *alloc)
                return 0;
        n = MAX(*alloc * 2, MAX(need, (size_t)16));
        q = reallocarray(*p, n, size);
        if (!q)
                return -ENOMEM;
        *p = q;
        *alloc = n;
        return 0;
}

/* An array of n nodes aligned to their 64-byte alignment (malloc gives 16). */
static struct ext_node *
nodes_alloc(size_t n)
{
        n = MAX(n, (size_t)1);
        if (n > SIZE_MAX / sizeof(struct ext_node))
                return NULL;
        return aligned_alloc(_Alignof(struct ext_node), n * sizeof(struct ext_node));
}

/* grow() for the node array, which realloc() would leave misaligned. */
static int
nodes_grow(struct ext_node **p, size_t *alloc, size_t need)
{
        size_t n;
        struct ext_node *q;

        if (need <= *alloc)
                return 0;
        n = MAX(*alloc * 2, MAX(need, (size_t)16));
        q = nodes_alloc(n);
        if (!q)
                return -ENOMEM;
        if (*p)
                memcpy(q, *p, *alloc * sizeof(*q));
        free(*p);
        *p = q;
        *alloc = n;
        return 0;
}

struct ext_cluster *
ext_cluster_ref(struct ext_cluster *c)
{
        if (c)
                __atomic_add_fetch(&c->n_ref, 1, __ATOMIC_RELAXED);
        return c;
}

static void
cluster_free(struct ext_cluster *c)
{
        for (size_t i = 0; i < c->n_nodes; i++)
                ext_node_release(&c->nodes[i]);
        for (size_t i = 0; i < c->n_classes; i++)
                score_class_unref(c->classes[i]);
        free(c->nodes);
        free(c->pods);
        free(c->classes);
        free(c->index);
        free(c->node_state);
        ext__verdict_memo_free(c->verdicts);
        free(c->group_sizes);
        free(c->pod_groups);
        place_view_unref(c->place);
        free(c);
}

/* Every node name of every request is hashed once to find it, so 8 bytes a step. */
uint32_t
ext__name_hash_n(const char *s, size_t n)
{
        size_t i = 0;
        uint64_t h = 0x9e3779b97f4a7c15ull ^ n;

        for (; i + 8 <= n; i += 8) {
                uint64_t w;

                memcpy(&w, s + i, 8);
                h = (h ^ w) * 0xff51afd7ed558ccdull;
                h ^= h >> 32;
        }
        if (i < n && n >= 8) {
                uint64_t w;

                /* The last 8 bytes, overlapping the words before: the tail in one step. */
                memcpy(&w, s + n - 8, 8);
                h = (h ^ w) * 0xff51afd7ed558ccdull;
        } else
                for (; i < n; i++)
                        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
        h ^= h >> 29;
        h *= 0xc4ceb9fe1a85ec53ull;
        return (uint32_t)(h ^ (h >> 32));
}

uint32_t
ext__name_hash(const char *s)
{
        return ext__name_hash_n(s, strlen(s));
}

/* Open addressing, load at most 1/2.  An entry is the node's name hash in the high half
 * and its index + 1 in the low half, 0 = empty: a probe reads a node only when the whole
 * hash matches (a node is a few cache lines away; the index is one array). */
static int
build_index(struct ext_cluster *c)
{
        size_t size = 16;

        while (size < c->n_nodes * 2)
                size *= 2;
        c->index = calloc(size, sizeof(*c->index));
        if (!c->index)
                return -ENOMEM;
        c->index_size = size;
        for (size_t i = 0; i < c->n_nodes; i++) {
                size_t k = c->nodes[i].name_hash & (size - 1);

                while (c->index[k])
                        k = (k + 1) & (size - 1);
                c->index[k] = (uint64_t)c->nodes[i].name_hash << 32 | ((uint32_t)i + 1);
        }
        return 0;
}

struct ext_cluster *
ext_cluster_unref(struct ext_cluster *c)
{
        if (c && __atomic_sub_fetch(&c->n_ref, 1, __ATOMIC_ACQ_REL) == 0)
                cluster_free(c);
        return NULL;
}

static int
node_cmp(const void *a, const void *b)
{
        return strcmp(((const struct ext_node *)a)->name, ((const struct ext_node *)b)->name);
}

/* A pod's place in the UID order, for sort_pods(): the UID's first 8 bytes big-endian (NUL
 * and what follows it as 0, so keys order as strcmp() orders the strings' first 8 bytes),
 * then its index in the builder. */
struct pod_key {
        uint64_t prefix;
        uint32_t at;
};

static uint64_t
uid_prefix(const char *s)
{
        uint64_t k = 0;

        for (unsigned i = 0; i < 8; i++) {
                k = k << 8 | (unsigned char)*s;
                s += *s != 0;
        }
        return k;
}

static int
pod_key_cmp(const void *a, const void *b, void *arg)
{
        const struct pod_key *x = a, *y = b;
        const struct ext_pod *pods = arg;

        if (x->prefix != y->prefix)
                return x->prefix < y->prefix ? -1 : 1;
        return strcmp(pods[x->at].uid, pods[y->at].uid);
}

/* Sorts keys by prefix, stably, 16 bits a pass from the lowest (a pass where every key has
 * the same digit is skipped): 100,000 pods' UIDs took glibc's merge sort a third of a
 * rebuild.  0, or -ENOMEM with keys as they were. */
static int
radix_sort_keys(struct pod_key *keys, size_t n)
{
        CLEANUP(freep) struct pod_key *tmp = malloc(MAX(n, (size_t)1) * sizeof(*tmp));
        CLEANUP(freep) uint32_t *count = malloc(((size_t)1 << 16) * sizeof(*count));
        struct pod_key *from = keys, *to = tmp;

        if (!tmp || !count)
                return -ENOMEM;
        for (unsigned shift = 0; shift < 64; shift += 16) {
                uint32_t sum = 0;
                bool one_digit = false;

                memset(count, 0, ((size_t)1 << 16) * sizeof(*count));
                for (size_t i = 0; i < n; i++)
                        count[(from[i].prefix >> shift) & 0xffff]++;
                for (size_t d = 0; d < ((size_t)1 << 16); d++) {
                        uint32_t c = count[d];

                        one_digit |= c == n;
                        count[d] = sum;
                        sum += c;
                }
                if (one_digit)
                        continue;
                struct pod_key *was = from;

                for (size_t i = 0; i < n; i++)
                        to[count[(from[i].prefix >> shift) & 0xffff]++] = from[i];
                from = to;
                to = was;
        }
        if (from != keys)
                memcpy(keys, from, n * sizeof(*keys));
        return 0;
}

/* Sorts the n pods at *pods by UID (strcmp order): a check when they come sorted, else a
 * sort of 16-byte keys (the UID's first 8 bytes: a radix sort from a thousand pods, qsort()
 * with an integer compare below, strcmp() only where 8 bytes tie) and one gather into a new
 * array, rather than qsort() moving the 88-byte records through a strcmp() per comparison:
 * a live rebuild sorts every pod of the cluster (issue 12: the sorts were 7.5% of the
 * extender's CPU under kube-scheduler).  0 or -ENOMEM (*pods kept). */
static int
sort_pods(struct ext_pod **pods, size_t n)
{
        CLEANUP(freep) struct pod_key *keys = NULL;
        struct ext_pod *sorted, *p = *pods;
        size_t i;

        for (i = 1; i < n && strcmp(p[i - 1].uid, p[i].uid) <= 0; i++)
                ;
        if (i >= n)
                return 0;
        if (n > UINT32_MAX)
                return -ENOMEM;
        keys = malloc(n * sizeof(*keys));
        sorted = malloc(n * sizeof(*sorted));
        if (!keys || !sorted) {
                free(sorted);
                return -ENOMEM;
        }
        for (i = 0; i < n; i++)
                keys[i] = (struct pod_key){ .prefix = uid_prefix(p[i].uid), .at = (uint32_t)i };
        /* Below a thousand pods the radix sort's four 256 KiB counts cost more than
         * qsort's comparisons. */
        if (n >= 1024 && radix_sort_keys(keys, n) == 0) {
                /* Keys of one prefix are in input order: sorted by the rest of the UID. */
                for (i = 0; i < n;) {
                        size_t j = i + 1;

                        while (j < n && keys[j].prefix == keys[i].prefix)
                                j++;
                        if (j - i > 1)
                                qsort_r(keys + i, j - i, sizeof(*keys), pod_key_cmp, p);
                        i = j;
                }
        } else
                qsort_r(keys, n, sizeof(*keys), pod_key_cmp, p);
        for (i = 0; i < n; i++)
                sorted[i] = p[keys[i].at];
        free(p);
        *pods = sorted;
        return 0;
}

const struct ext_node *
ext_cluster_find_node_n(const struct ext_cluster *c, const char *name, size_t len)
{
        uint32_t h;

        if (!c || !name || !c->index || len >= EXT_NAME_MAX)
                return NULL;
        h = ext__name_hash_n(name, len);
        for (size_t k = h & (c->index_size - 1); c->index[k]; k = (k + 1) & (c->index_size - 1)) {
                const struct ext_node *n;

                if ((uint32_t)(c->index[k] >> 32) != h)
                        continue;
                n = &c->nodes[(uint32_t)c->index[k] - 1];
                if (n->name_len == len && memcmp(n->name, name, len) == 0)
                        return n;
        }
        return NULL;
}

const struct ext_node *
ext_cluster_find_node(const struct ext_cluster *c, const char *name)
{
        return name ? ext_cluster_find_node_n(c, name, strlen(name)) : NULL;
}

const struct ext_pod *
ext_cluster_find_pod(const struct ext_cluster *c, const char *uid)
{
        size_t lo = 0, hi;

        if (!c || !uid)
                return NULL;
        hi = c->n_pods;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int d = strcmp(uid, c->pods[mid].uid);

                if (d == 0)
                        return &c->pods[mid];
                if (d < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return NULL;
}

struct ext_cluster_builder *
ext_cluster_builder_new(const struct ext_config *cfg, const struct ext_cluster *base)
{
        struct ext_cluster_builder *b = calloc(1, sizeof(*b));

        if (!b)
                return NULL;
        b->cfg = cfg;
        b->base = base;
        b->last_node = POD_NO_NODE;
        if (base) {
                /* A rebuild has about its base's nodes and pods: room for them (pods an
                 * eighth more) up front, so the arrays are not grown by doubling, each
                 * step a copy into fresh pages that fault in.  Without the memory, the
                 * adds grow them as before. */
                size_t pods = base->n_pods + base->n_pods / 8;

                memcpy(b->keys, base->group_keys, sizeof(b->keys));
                (void)nodes_grow(&b->nodes, &b->alloc_nodes, base->n_nodes);
                if (pods > 0 && grow((void **)&b->pods, &b->alloc_pods, pods, sizeof(*b->pods)) == 0) {
                        b->pod_node = reallocarray(NULL, b->alloc_pods, sizeof(*b->pod_node));
                        if (!b->pod_node) {
                                free(b->pods);
                                b->pods = NULL;
                                b->alloc_pods = 0;
                        }
                }
        }
        return b;
}

void
ext_cluster_builder_sources(struct ext_cluster_builder *b, const void *source, const void *alive)
{
        if (!b)
                return;
        b->source = source;
        b->base_sources_alive = b->base && alive && b->base->source == alive;
}

struct ext_cluster_builder *
ext_cluster_builder_free(struct ext_cluster_builder *b)
{
        if (!b)
                return NULL;
        for (size_t i = 0; i < b->n_nodes; i++)
                ext_node_release(&b->nodes[i]);
        for (size_t i = 0; i < b->n_classes; i++)
                score_class_unref(b->classes[i].cls);
        free(b->nodes);
        free(b->pods);
        free(b->pod_node);
        free(b->node_names);
        free(b->classes);
        free(b->group_sizes);
        free(b->gids);
        free(b);
        return NULL;
}

/* The topology of a node we know nothing about but its GPU count: every pair UNKNOWN. */
static struct topo *
unknown_pcie_topo(unsigned n_gpus)
{
        struct topo *t = topo_new(n_gpus, 0);

        if (t)
                topo_finish(t);
        return t;
}

/* Finds or makes the class of t (borrowed), in the builder's table (when b is non-NULL),
 * then the base snapshot's classes; returns a new reference or NULL on OOM. */
static struct score_class *
class_for(struct ext_cluster_builder *b, const struct ext_cluster *base,
          const struct ext_config *cfg, struct topo *t)
{
        uint64_t h = topo_class_hash(t);
        struct score_class *cls = NULL;

        if (b)
                for (size_t i = 0; i < b->n_classes; i++)
                        if (b->classes[i].hash == h && b->classes[i].n_gpus == t->n_gpus)
                                return score_class_ref(b->classes[i].cls);
        if (base)
                for (size_t i = 0; i < base->n_classes; i++) {
                        const struct topo *bt = score_class_topo(base->classes[i]);

                        if (bt->n_gpus == t->n_gpus && topo_class_hash(bt) == h) {
                                cls = score_class_ref(base->classes[i]);
                                break;
                        }
                }
        if (!cls)
                cls = score_class_new(t, &cfg->score);
        if (!cls)
                return NULL;
        if (b) {
                if (grow((void **)&b->classes, &b->alloc_classes, b->n_classes + 1,
                         sizeof(*b->classes)) < 0)
                        return score_class_unref(cls);
                b->classes[b->n_classes++] = (struct class_slot){
                        .hash = h, .n_gpus = t->n_gpus, .cls = score_class_ref(cls) };
        }
        return cls;
}

/* Lists cls (a class reused from the base snapshot) in the builder's table once. */
static int
class_register(struct ext_cluster_builder *b, struct score_class *cls)
{
        const struct topo *t = score_class_topo(cls);

        for (size_t i = 0; i < b->n_classes; i++)
                if (b->classes[i].cls == cls)
                        return 0;
        if (grow((void **)&b->classes, &b->alloc_classes, b->n_classes + 1, sizeof(*b->classes)) < 0)
                return -ENOMEM;
        b->classes[b->n_classes++] = (struct class_slot){
                .hash = topo_class_hash(t), .n_gpus = t->n_gpus, .cls = score_class_ref(cls) };
        return 0;
}

static bool
name_ok(const char *s)
{
        size_t n = s ? strnlen(s, EXT_NAME_MAX) : 0;

        return n > 0 && n < EXT_NAME_MAX;
}

static inline uint64_t
digest_step(uint64_t h, uint64_t w)
{
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        return h ^ h >> 29;
}

static inline uint64_t
rotl64(uint64_t x, unsigned r)
{
        return x << r | x >> (64 - r);
}

/* A hash of a node's annotation bytes and capacity, compared on every rebuild of the view
 * (every node, every rebuild: 1,000 annotations of 3 KB per pod bound in live mode), so it
 * takes 8 bytes a step (a byte-at-a-time FNV here was the largest cost of a rebuild) in four
 * independent lanes of 32 bytes a round: one lane's multiply chain waited on itself and was
 * still three quarters of node_init under kube-scheduler.  Kept in memory only. */
static uint64_t
topo_digest(const char *topo_json, size_t len, unsigned gpu_capacity)
{
        uint64_t h = 1469598103934665603ull ^ gpu_capacity ^ ((uint64_t)len << 32);
        /* Four variables, not an array: gcc -O2 kept an array's lanes in memory, at half
         * the speed (0.35 against 0.17 us for 3.1 KB in a throwaway loop; one lane 0.58). */
        uint64_t a = h, b = h ^ 0x243f6a8885a308d3ull, c = h ^ 0x13198a2e03707344ull,
                 d = h ^ 0xa4093822299f31d0ull;
        size_t i = 0;

        if (!topo_json)
                return h;
        for (; i + 32 <= len; i += 32) {
                uint64_t w[4];

                memcpy(w, topo_json + i, sizeof(w));
                a = digest_step(a, w[0]);
                b = digest_step(b, w[1]);
                c = digest_step(c, w[2]);
                d = digest_step(d, w[3]);
        }
        for (; i + 8 <= len; i += 8) {
                uint64_t w;

                memcpy(&w, topo_json + i, 8);
                a = digest_step(a, w);
        }
        for (; i < len; i++)
                a = (a ^ (unsigned char)topo_json[i]) * 1099511628211ull;
        h = digest_step(a, rotl64(b, 17));
        h = digest_step(h, rotl64(c, 31));
        h = digest_step(h, rotl64(d, 47));
        return h ^ 0x5bd1e995u;
}

static int
node_init(struct ext_node *n, struct ext_cluster_builder *b, const struct ext_config *cfg,
          const char *name, const char *topo_json, size_t len, unsigned gpu_capacity,
          const char **ret_why)
{
        CLEANUP(topo_unrefp) struct topo *t = NULL;
        struct ext_node node = { 0 };
        const struct ext_node *old;
        const char *why = NULL;

        if (!name_ok(name))
                return -EINVAL;
        old = b && b->base ? ext_cluster_find_node(b->base, name) : NULL;
        /* The same bytes at the same address of a live immutable source: unchanged. */
        if (old && b->base_sources_alive && topo_json && old->topo_src == topo_json &&
            old->topo_src_len == len && old->topo_src_cap == gpu_capacity)
                node.topo_digest = old->topo_digest;
        else
                node.topo_digest = topo_digest(topo_json, len, gpu_capacity);
        if (b && b->source && topo_json && len <= UINT32_MAX) {
                node.topo_src = topo_json;
                node.topo_src_len = (uint32_t)len;
                node.topo_src_cap = gpu_capacity;
        }
        if (old && old->topo_digest == node.topo_digest && old->cls &&
            class_register(b, old->cls) == 0) {
                *n = *old;
                n->topo_src = node.topo_src;
                n->topo_src_len = node.topo_src_len;
                n->topo_src_cap = node.topo_src_cap;
                n->used = (struct topo_mask){ 0 };
                /* Labels come again after the node: they may have changed. */
                memset(n->label_domain, 0, sizeof(n->label_domain));
                memset(n->key_value, 0, sizeof(n->key_value));
                n->closed = false; /* and so may its state */
                score_class_ref(n->cls);
                set_why(ret_why, n->why_unannotated);
                return 0;
        }
        node.name_len = (uint8_t)strlen(name); /* name_ok(): shorter than EXT_NAME_MAX */
        memcpy(node.name, name, node.name_len + 1u);
        node.name_hash = ext__name_hash_n(node.name, node.name_len);
        if (topo_json) {
                struct topo_error err = { 0 };
                int r = topo_parse_annotation(topo_json, len, &t, &err);

                if (r < 0) {
                        why = "the topofit.io/topology annotation does not parse";
                        t = NULL;
                } else if (t->n_gpus == 0) {
                        why = "the topofit.io/topology annotation lists no GPUs";
                        t = topo_unref(t);
                }
        } else
                why = "the node has no topofit.io/topology annotation";

        node.annotated = t != NULL;
        node.why_unannotated = why;
        if (!t) {
                gpu_capacity = MIN(gpu_capacity, (unsigned)TOPO_MAX_GPUS);
                if (gpu_capacity > 0) {
                        t = unknown_pcie_topo(gpu_capacity);
                        if (!t)
                                return -ENOMEM;
                }
        }
        if (t) {
                node.cls = class_for(b, b ? b->base : NULL, cfg, t);
                if (!node.cls)
                        return -ENOMEM;
                node.n_gpus = t->n_gpus;
                memcpy(node.domain, t->nvlink_domain, sizeof(node.domain));
                for (unsigned i = 0; i < t->n_gpus; i++)
                        if (t->gpus[i].healthy)
                                topo_mask_set(&node.healthy, i);
        }
        *n = node;
        set_why(ret_why, why);
        return 0;
}

int
ext_node_init(struct ext_node *n, const struct ext_config *cfg, const char *name,
              const char *topo_json, size_t len, unsigned gpu_capacity, const char **ret_why)
{
        return node_init(n, NULL, cfg, name, topo_json, len, gpu_capacity, ret_why);
}

void
ext_node_release(struct ext_node *n)
{
        if (n)
                n->cls = score_class_unref(n->cls);
}

int
ext_cluster_builder_add_node(struct ext_cluster_builder *b, const char *name,
                             const char *topo_json, size_t len, unsigned gpu_capacity,
                             const char **ret_why)
{
        int r;

        if (b->n_nodes >= EXT_MAX_NODES)
                return -E2BIG;
        r = nodes_grow(&b->nodes, &b->alloc_nodes, b->n_nodes + 1);
        if (r < 0)
                return r;
        r = node_init(&b->nodes[b->n_nodes], b, b->cfg, name, topo_json, len, gpu_capacity,
                      ret_why);
        if (r < 0)
                return r;
        b->n_nodes++;
        return 0;
}

/* The index of group key key among keys, -1 when none. */
static int
key_index(char (*keys)[EXT_LABEL_KEY_MAX], const char *key)
{
        for (int k = 0; k < PLACE_MAX_KEYS; k++)
                if (keys[k][0] && strcmp(keys[k], key) == 0)
                        return k;
        return -1;
}

int
ext_cluster_builder_node_label(struct ext_cluster_builder *b, const char *key, const char *value)
{
        struct ext_node *n;

        if (!key || !value)
                return -EINVAL;
        if (b->n_nodes == 0)
                return -ENOENT;
        n = &b->nodes[b->n_nodes - 1];
        {
                int g = key_index(b->keys, key);

                if (g >= 0 && strlen(value) < EXT_LABEL_VALUE_MAX)
                        str_copy(n->key_value[g], sizeof(n->key_value[g]), value, strlen(value));
        }
        for (unsigned k = 0; k < b->cfg->n_domain_labels && k < EXT_MAX_DOMAIN_LABELS; k++) {
                unsigned l = b->cfg->domain_labels[k].level;

                if (l >= PLACE_MAX_LEVELS || strcmp(b->cfg->domain_labels[k].key, key) != 0)
                        continue;
                if (n->label_domain[l][0] && n->label_rank[l] <= k)
                        return 0; /* a key listed earlier set it */
                str_copy(n->label_domain[l], sizeof(n->label_domain[l]), value,
                         strnlen(value, PLACE_NAME_MAX - 1));
                n->label_rank[l] = (uint8_t)k;
                return 0;
        }
        return 0;
}

int
ext_cluster_builder_group_key(struct ext_cluster_builder *b, const char *key)
{
        unsigned level;
        int k;

        if (!key || !key[0] || strlen(key) >= EXT_LABEL_KEY_MAX)
                return -EINVAL;
        if (ext_config_key_level(b->cfg, key, &level) == 0)
                return 0; /* one node, or a domain label's level */
        k = key_index(b->keys, key);
        for (int f = 0; k < 0 && f < PLACE_MAX_KEYS; f++)
                if (!b->keys[f][0]) {
                        str_copy(b->keys[f], sizeof(b->keys[f]), key, strlen(key));
                        k = f;
                }
        if (k < 0)
                return -E2BIG;
        b->key_named[k] = true;
        return 0;
}

const char *
ext_cluster_builder_key(const struct ext_cluster_builder *b, unsigned k)
{
        return k < PLACE_MAX_KEYS && b->keys[k][0] ? b->keys[k] : NULL;
}

void
ext_key_domain_name(char name[PLACE_NAME_MAX], const char *key, const char *value)
{
        uint64_t h = 14695981039346656037ull;
        size_t kl = strlen(key), vl = strlen(value);

        if (kl + 1 + vl < PLACE_NAME_MAX) {
                memcpy(name, key, kl);
                name[kl] = '=';
                memcpy(name + kl + 1, value, vl + 1);
                return;
        }
        vl = MIN(vl, (size_t)PLACE_NAME_MAX - 19); /* a label value is 63 bytes at most */
        h = str_hash_fnv1a(h, key);
        snprintf(name, PLACE_NAME_MAX, "#%016llx=%.*s", (unsigned long long)h, (int)vl, value);
}

int
ext_cluster_builder_node_closed(struct ext_cluster_builder *b, bool closed)
{
        if (b->n_nodes == 0)
                return -ENOENT;
        b->nodes[b->n_nodes - 1].closed = closed;
        return 0;
}

int
ext_cluster_builder_add_pod(struct ext_cluster_builder *b, const char *uid,
                            const char *namespace, const char *name, const char *node,
                            const struct topo_mask *gpus)
{
        struct ext_pod *p;
        size_t alloc;
        int r;

        if (!uid || strnlen(uid, EXT_UID_MAX) == 0 || strnlen(uid, EXT_UID_MAX) >= EXT_UID_MAX)
                return -EINVAL;
        if (node && strnlen(node, EXT_NAME_MAX) >= EXT_NAME_MAX)
                return -EINVAL;
        if (b->n_pods >= EXT_MAX_PODS)
                return -E2BIG;
        alloc = b->alloc_pods;
        r = grow((void **)&b->pods, &b->alloc_pods, b->n_pods + 1, sizeof(*b->pods));
        if (r < 0)
                return r;
        /* pod_node follows pods' allocation size. */
        if (b->alloc_pods != alloc) {
                void *q = reallocarray(b->pod_node, b->alloc_pods, sizeof(*b->pod_node));

                if (!q)
                        return -ENOMEM;
                b->pod_node = q;
        }
        p = &b->pods[b->n_pods];
        *p = (struct ext_pod){ .node = -1 };
        str_copy(p->uid, sizeof(p->uid), uid, strlen(uid));
        (void)namespace;
        (void)name;
        if (gpus)
                p->gpus = *gpus;
        b->pod_node[b->n_pods] = POD_NO_NODE;
        if (node && node[0]) {
                size_t len = strlen(node);

                if (b->last_node == POD_NO_NODE || strcmp(b->node_names + b->last_node, node) != 0) {
                        if (b->n_node_names + len + 1 > UINT32_MAX - 1)
                                return -E2BIG;
                        r = grow((void **)&b->node_names, &b->alloc_node_names,
                                 b->n_node_names + len + 1, 1);
                        if (r < 0)
                                return r;
                        memcpy(b->node_names + b->n_node_names, node, len + 1);
                        b->last_node = (uint32_t)b->n_node_names;
                        b->n_node_names += len + 1;
                }
                b->pod_node[b->n_pods] = b->last_node;
        }
        b->n_pods++;
        return 0;
}

bool
ext__id_in_namespace(const char *id, const char *ns)
{
        const char *p = strchr(id, '/');
        size_t n = ns ? strlen(ns) : 0;

        return p && n > 0 && strncmp(p + 1, ns, n) == 0 && p[1 + n] == '/';
}

/* Whether id can name a group of namespace ns: as ext_group_id writes them, under
 * PLACE_NAME_MAX bytes, printable ASCII as the group record's decoder wants it (a value
 * read back from an annotation; a group named in other bytes is no gang to the view). */
static bool
group_id_valid(const char *id, const char *ns)
{
        size_t n = id ? strnlen(id, PLACE_NAME_MAX) : PLACE_NAME_MAX;

        if (n == 0 || n >= PLACE_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)id[i] < 0x20 || (unsigned char)id[i] > 0x7e)
                        return false;
        return ns && ext__id_in_namespace(id, ns);
}

int
ext_cluster_builder_pod_group_id(struct ext_cluster_builder *b, const char *ns, const char *id)
{
        int r;

        if (b->n_pods == 0)
                return -ENOENT;
        if (!group_id_valid(id, ns))
                return -EINVAL;
        r = grow((void **)&b->gids, &b->alloc_gids, b->n_gids + 1, sizeof(*b->gids));
        if (r < 0)
                return r;
        str_copy(b->gids[b->n_gids], sizeof(b->gids[0]), id, strlen(id));
        b->pods[b->n_pods - 1].group = (uint32_t)++b->n_gids;
        return 0;
}

int
ext_cluster_builder_pod_group(struct ext_cluster_builder *b, const char *ns, const char *json,
                              size_t len)
{
        struct ext_group_record rec;

        if (b->n_pods == 0)
                return -ENOENT;
        if (!json || ext_group_record_decode(json, len, &rec, NULL) < 0)
                return -EINVAL;
        return ext_cluster_builder_pod_group_id(b, ns, rec.group.id);
}

const char *
ext_cluster_pod_group(const struct ext_cluster *c, const struct ext_pod *p)
{
        return c && p && p->group > 0 && p->group <= c->n_pod_groups ? c->pod_groups[p->group - 1]
                                                                      : NULL;
}

/* Where id sorts in the n sorted ids: its index when present (*ret_found), else where it
 * would go. */
static size_t
gid_find(char (*ids)[PLACE_NAME_MAX], size_t n, const char *id, bool *ret_found)
{
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int x = strcmp(ids[mid], id);

                if (x == 0) {
                        *ret_found = true;
                        return mid;
                }
                if (x < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret_found = false;
        return lo;
}

static int
gid_cmp(const void *a, const void *b)
{
        return strcmp(*(const char (*)[PLACE_NAME_MAX])a, *(const char (*)[PLACE_NAME_MAX])b);
}

/* The builder's group ids into c->pod_groups (sorted, unique), and each pod's group index
 * from the builder's numbering to the table's.  0 or -ENOMEM. */
static int
pod_groups_finish(struct ext_cluster_builder *b, struct ext_cluster *c)
{
        size_t n = 0;

        if (b->n_gids == 0)
                return 0;
        c->pod_groups = malloc(b->n_gids * sizeof(*c->pod_groups));
        if (!c->pod_groups)
                return -ENOMEM;
        memcpy(c->pod_groups, b->gids, b->n_gids * sizeof(*b->gids));
        qsort(c->pod_groups, b->n_gids, sizeof(*c->pod_groups), gid_cmp);
        for (size_t i = 0; i < b->n_gids; i++)
                if (n == 0 || strcmp(c->pod_groups[n - 1], c->pod_groups[i]) != 0)
                        memmove(c->pod_groups[n++], c->pod_groups[i], sizeof(c->pod_groups[0]));
        c->n_pod_groups = n;
        for (size_t i = 0; i < b->n_pods; i++) {
                bool found;

                if (b->pods[i].group > 0)
                        b->pods[i].group = 1 + (uint32_t)gid_find(c->pod_groups, n,
                                                                  b->gids[b->pods[i].group - 1],
                                                                  &found);
        }
        return 0;
}

/* The placement view of c (placement/): per node its class, free GPUs (healthy, not on
 * live pods) and domain, and the live pods' sizes for the learnt weights.  The cluster term
 * and the gangs' domains read it, so it is built with the term off too (--cluster-share 0).
 * base (may be NULL) lends the capacities of nodes that did not change.  Left NULL when it
 * cannot be built: prioritize then goes without the cluster term, gangs without domains. */
static void
place_build(struct ext_cluster *c, const struct ext_config *cfg, const struct ext_cluster *base)
{
        CLEANUP(freep) struct place_node *in = NULL;
        CLEANUP(freep) ssize_t *base_index = NULL;
        CLEANUP(freep) char (*key_names)[PLACE_MAX_KEYS][PLACE_NAME_MAX] = NULL;
        unsigned hist[TOPO_MAX_GPUS + 1] = { 0 };
        bool any_key = false;

        c->place = NULL;
        if (!cfg)
                return;
        for (unsigned k = 0; k < PLACE_MAX_KEYS; k++)
                any_key = any_key || c->group_keys[k][0];
        in = calloc(MAX(c->n_nodes, (size_t)1), sizeof(*in));
        base_index = calloc(MAX(c->n_nodes, (size_t)1), sizeof(*base_index));
        if (any_key)
                key_names = calloc(MAX(c->n_nodes, (size_t)1), sizeof(*key_names));
        if (!in || !base_index || (any_key && !key_names))
                return;
        for (size_t i = 0; i < c->n_nodes; i++) {
                const struct ext_node *n = &c->nodes[i];
                const struct ext_node *old = base && base->place ? ext_cluster_find_node(base, n->name)
                                                                 : NULL;

                in[i].name = n->name; /* the snapshot owns both the name and the view */
                in[i].cls = n->cls;
                for (size_t k = 0; k < ELEMENTSOF(in[i].free.w); k++)
                        in[i].free.w[k] = n->healthy.w[k] & ~n->used.w[k];
                for (unsigned l = 0; l < PLACE_MAX_LEVELS; l++)
                        in[i].domain[l] = n->label_domain[l];
                if (n->domain[0])
                        in[i].domain[0] = n->domain; /* the annotation beats labels */
                for (unsigned k = 0; any_key && k < PLACE_MAX_KEYS; k++)
                        if (c->group_keys[k][0] && n->key_value[k][0]) {
                                ext_key_domain_name(key_names[i][k], c->group_keys[k],
                                                    n->key_value[k]);
                                in[i].key_domain[k] = key_names[i][k];
                        }
                base_index[i] = old ? old - base->nodes : -1;
        }
        for (size_t i = 0; i < c->n_pods; i++)
                if (c->pods[i].node >= 0)
                        hist[MIN(topo_mask_count(&c->pods[i].gpus), (unsigned)TOPO_MAX_GPUS)]++;
        hist[0] = 0;
        (void)place_view_new(&cfg->place, in, c->n_nodes, hist, ELEMENTSOF(hist),
                             base ? base->place : NULL, base_index, &c->place);
}

void
ext_group_id(char id[PLACE_NAME_MAX], const char *source, const char *ns, const char *name,
             const char *name2)
{
        char full[3 * EXT_NAME_MAX + 64];
        uint64_t h = 1469598103934665603ull; /* FNV-1a */
        int n;

        n = snprintf(full, sizeof(full), "%s/%s/%s%s%s", source, ns, name, name2 ? "/" : "",
                     name2 ? name2 : "");
        if (n > 0 && (size_t)n < PLACE_NAME_MAX) {
                memcpy(id, full, (size_t)n + 1);
                return;
        }
        h = str_hash_fnv1a(h, full);
        snprintf(id, PLACE_NAME_MAX, "%.*s#%016llx", PLACE_NAME_MAX - 19, full,
                 (unsigned long long)h);
}

static int
group_size_cmp(const void *a, const void *b)
{
        return strcmp(((const struct ext_group_size *)a)->id,
                      ((const struct ext_group_size *)b)->id);
}

int
ext_config_key_level(const struct ext_config *cfg, const char *key, unsigned *ret_level)
{
        if (!key || !key[0])
                return -ENOENT;
        if (strcmp(key, EXT_HOSTNAME_LABEL) == 0) {
                *ret_level = PLACE_LEVEL_NODE;
                return 0;
        }
        for (unsigned k = 0; k < cfg->n_domain_labels && k < EXT_MAX_DOMAIN_LABELS; k++)
                if (cfg->domain_labels[k].level < PLACE_MAX_LEVELS &&
                    strcmp(cfg->domain_labels[k].key, key) == 0) {
                        *ret_level = cfg->domain_labels[k].level;
                        return 0;
                }
        return -ENOENT;
}

int
ext_cluster_builder_add_podgroup(struct ext_cluster_builder *b, const char *ns,
                                 const char *name, unsigned min_count, const char *topology_key)
{
        struct ext_group_size *g;
        unsigned level = 0;
        bool within;

        if (!ns || !name || !ns[0] || !name[0] || strnlen(ns, EXT_NAME_MAX) >= EXT_NAME_MAX ||
            strnlen(name, EXT_NAME_MAX) >= EXT_NAME_MAX)
                return -EINVAL;
        if (min_count > PLACE_MAX_GROUP_PODS)
                min_count = 0; /* as a foreign size that does not parse: unknown */
        within = ext_config_key_level(b->cfg, topology_key, &level) == 0;
        if (!within && topology_key && topology_key[0] &&
            ext_cluster_builder_group_key(b, topology_key) == 0) {
                level = PLACE_LEVEL_KEY(key_index(b->keys, topology_key));
                within = true;
        }
        if (min_count == 0 && !within)
                return 0;
        if (b->n_group_sizes >= EXT_MAX_GROUP_SIZES)
                return -E2BIG;
        if (grow((void **)&b->group_sizes, &b->alloc_group_sizes, b->n_group_sizes + 1,
                 sizeof(*b->group_sizes)) < 0)
                return -ENOMEM;
        g = &b->group_sizes[b->n_group_sizes++];
        *g = (struct ext_group_size){ .size = min_count, .has_within = within, .within = level };
        ext_group_id(g->id, "podgroup", ns, name, NULL);
        return 0;
}

int
ext_cluster_builder_add_group_size(struct ext_cluster_builder *b, const char *ns,
                                   const char *name, unsigned min_count)
{
        return ext_cluster_builder_add_podgroup(b, ns, name, min_count, NULL);
}

const struct ext_group_size *
ext_cluster_group(const struct ext_cluster *c, const char *id)
{
        struct ext_group_size key;

        if (!c || c->n_group_sizes == 0 || !id || strnlen(id, PLACE_NAME_MAX) >= PLACE_NAME_MAX)
                return NULL;
        memcpy(key.id, id, strlen(id) + 1);
        return bsearch(&key, c->group_sizes, c->n_group_sizes, sizeof(*c->group_sizes),
                       group_size_cmp);
}

unsigned
ext_cluster_group_size(const struct ext_cluster *c, const char *id)
{
        const struct ext_group_size *hit = ext_cluster_group(c, id);

        return hit ? hit->size : 0;
}

/* c's node states (ext_cluster.node_state): an open-addressing table of the distinct
 * (class, annotated, free) keys, built once per snapshot.  On a failed allocation the
 * snapshot goes without (node_state NULL). */
static uint64_t
state_hash(const struct ext_node *n, const struct topo_mask *free)
{
        uint64_t h = (uint64_t)(uintptr_t)n->cls * 0x9e3779b97f4a7c15ull ^ n->annotated;

        for (size_t k = 0; k < ELEMENTSOF(free->w); k++)
                h = (h ^ free->w[k]) * 0x100000001b3ull;
        return h ^ (h >> 29);
}

static struct topo_mask
node_free(const struct ext_node *n)
{
        struct topo_mask f = n->healthy;

        topo_mask_andnot(&f, &n->used);
        return f;
}

static void
cluster_states(struct ext_cluster *c)
{
        size_t size = 16;
        uint32_t *slot; /* a node index + 1 per slot: the state's first node; 0 free */

        free(c->node_state);
        c->node_state = NULL;
        c->n_states = 0;
        c->verdicts = ext__verdict_memo_free(c->verdicts);
        while (size < 2 * c->n_nodes)
                size *= 2;
        slot = calloc(size, sizeof(*slot));
        c->node_state = malloc(MAX(c->n_nodes, (size_t)1) * sizeof(*c->node_state));
        if (!slot || !c->node_state) {
                free(slot);
                free(c->node_state);
                c->node_state = NULL;
                return;
        }
        for (size_t i = 0; i < c->n_nodes; i++) {
                const struct ext_node *n = &c->nodes[i];
                struct topo_mask f = node_free(n);
                size_t k;

                c->node_state[i] = EXT_NO_STATE;
                if (!n->cls)
                        continue;
                for (k = state_hash(n, &f) & (size - 1); slot[k]; k = (k + 1) & (size - 1)) {
                        const struct ext_node *o = &c->nodes[slot[k] - 1];
                        struct topo_mask of = node_free(o);

                        if (o->cls == n->cls && o->annotated == n->annotated &&
                            topo_mask_equal(&of, &f))
                                break;
                }
                if (!slot[k]) {
                        slot[k] = (uint32_t)i + 1;
                        c->node_state[i] = c->n_states++;
                } else
                        c->node_state[i] = c->node_state[slot[k] - 1];
        }
        free(slot);
        /* Verdicts kept per state across requests; without a memo, decided per request. */
        c->verdicts = ext__verdict_memo_new();
}

/* A snapshot's serial: one count for the process, from 1. */
static uint64_t
next_serial(void)
{
        static atomic_uint_fast64_t serials;

        return (uint64_t)atomic_fetch_add_explicit(&serials, 1, memory_order_relaxed) + 1;
}

int
ext_cluster_builder_finish(struct ext_cluster_builder *b, uint64_t gen, struct ext_cluster **ret)
{
        CLEANUP(ext_cluster_builder_freep) struct ext_cluster_builder *bb = b;
        struct ext_cluster *c;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->generation = gen;
        c->serial = next_serial();
        c->source = b->source;
        c->classes = calloc(MAX(b->n_classes, (size_t)1), sizeof(*c->classes));
        if (!c->classes) {
                free(c);
                return -ENOMEM;
        }

        /* Live mode adds the nodes as kube-client's snapshot has them, sorted by name:
         * checked in one pass, sorted only when they are not. */
        for (size_t i = 1; i < b->n_nodes; i++) {
                int cmp = strcmp(b->nodes[i - 1].name, b->nodes[i].name);

                if (cmp < 0)
                        continue;
                if (cmp > 0) {
                        qsort(b->nodes, b->n_nodes, sizeof(*b->nodes), node_cmp);
                        i = 0; /* and check the sorted order for repeats */
                        continue;
                }
                free(c->classes);
                free(c);
                return -EEXIST;
        }
        c->nodes = TAKE_PTR(b->nodes);
        c->n_nodes = b->n_nodes;
        b->n_nodes = 0;
        if (build_index(c) < 0) {
                cluster_free(c);
                return -ENOMEM;
        }

        if (pod_groups_finish(b, c) < 0) {
                cluster_free(c);
                return -ENOMEM;
        }
        /* Resolve node names before sorting pods (pod_node is indexed like pods), each run
         * of one name once. */
        {
                uint32_t at = POD_NO_NODE;
                int at_node = -1;

                for (size_t i = 0; i < b->n_pods; i++) {
                        if (b->pod_node[i] != at && b->pod_node[i] != POD_NO_NODE) {
                                const struct ext_node *n;

                                at = b->pod_node[i];
                                n = ext_cluster_find_node(c, b->node_names + at);
                                at_node = n ? (int)(n - c->nodes) : -1;
                        }
                        b->pods[i].node = b->pod_node[i] == POD_NO_NODE ? -1 : at_node;
                }
        }
        if (sort_pods(&b->pods, b->n_pods) < 0) {
                cluster_free(c);
                return -ENOMEM;
        }
        c->pods = TAKE_PTR(b->pods);
        c->n_pods = b->n_pods;
        for (size_t i = 1; i < c->n_pods; i++)
                if (strcmp(c->pods[i - 1].uid, c->pods[i].uid) == 0) {
                        cluster_free(c);
                        return -EEXIST;
                }

        for (size_t i = 0; i < c->n_pods; i++) {
                struct ext_pod *p = &c->pods[i];
                struct topo_mask in_node;
                struct ext_node *n;

                if (p->node < 0)
                        continue;
                n = &c->nodes[p->node];
                /* Indices past the node's GPUs go (a mask, not a loop over the up to 120
                 * indices past them: per pod, that loop was a third of a 100,000-pod
                 * build). */
                topo_mask_fill(&in_node, n->n_gpus);
                topo_mask_and(&p->gpus, &in_node);
                topo_mask_or(&n->used, &p->gpus);
        }

        for (size_t i = 0; i < b->n_classes; i++)
                c->classes[c->n_classes++] = TAKE_PTR(b->classes[i].cls);
        b->n_classes = 0;
        /* The group keys a PodGroup named in this build; the others' slots come free. */
        for (unsigned k = 0; k < PLACE_MAX_KEYS; k++)
                if (b->key_named[k])
                        memcpy(c->group_keys[k], b->keys[k], sizeof(c->group_keys[k]));
        place_build(c, b->cfg, b->base);
        cluster_states(c);

        if (b->n_group_sizes > 0)
                qsort(b->group_sizes, b->n_group_sizes, sizeof(*b->group_sizes), group_size_cmp);
        c->group_sizes = TAKE_PTR(b->group_sizes);
        c->n_group_sizes = b->n_group_sizes;

        *ret = c;
        return 0;
}

/* Static mode binds through here, so it copies c as it is rather than rebuilding it: the
 * nodes (new class references), name index and class list are copied unchanged, the pods
 * are copied with the new one inserted at its sorted place, and only its node's used mask
 * changes.  O(nodes + pods) memory copies, no re-sorting or re-hashing. */
int
ext_cluster_with_pod(const struct ext_cluster *c, const struct ext_config *cfg, const char *uid,
                     const char *namespace, const char *name, const char *node,
                     const struct topo_mask *gpus, const char *group_record,
                     const char *group_id, struct ext_cluster **ret)
{
        struct ext_cluster *next;
        const struct ext_node *n;
        struct ext_pod pod = { .node = -1 };
        struct ext_group_record rec;
        const char *gid = NULL;
        bool grouped = false, known = false;
        size_t at, lo = 0, hi, gat = 0;

        (void)name;
        if (ext_cluster_find_pod(c, uid))
                return -EEXIST;
        n = ext_cluster_find_node(c, node);
        if (!n)
                return -ENOENT;
        if (!uid || strnlen(uid, EXT_UID_MAX) == 0 || strnlen(uid, EXT_UID_MAX) >= EXT_UID_MAX)
                return -EINVAL;
        if (c->n_pods >= EXT_MAX_PODS)
                return -E2BIG;

        str_copy(pod.uid, sizeof(pod.uid), uid, strlen(uid));
        pod.node = (int)(n - c->nodes);
        if (gpus)
                pod.gpus = *gpus;
        for (unsigned g = n->n_gpus; g < TOPO_MAX_GPUS; g++)
                topo_mask_unset(&pod.gpus, g);
        /* Where the uid sorts (it is not there: find_pod said so). */
        hi = c->n_pods;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (strcmp(c->pods[mid].uid, uid) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        at = lo;

        next = calloc(1, sizeof(*next));
        if (!next)
                return -ENOMEM;
        next->n_ref = 1;
        next->generation = c->generation + 1;
        next->serial = next_serial();
        next->source = c->source; /* the same node records */
        next->nodes = nodes_alloc(c->n_nodes);
        next->pods = malloc((c->n_pods + 1) * sizeof(*next->pods));
        next->classes = malloc(MAX(c->n_classes, (size_t)1) * sizeof(*next->classes));
        next->index = malloc(c->index_size * sizeof(*next->index));
        if (!next->nodes || !next->pods || !next->classes || !next->index) {
                cluster_free(next); /* n_nodes and n_classes are 0: nothing to unref */
                return -ENOMEM;
        }
        for (size_t i = 0; i < c->n_nodes; i++) {
                next->nodes[i] = c->nodes[i];
                score_class_ref(next->nodes[i].cls);
        }
        next->n_nodes = c->n_nodes;
        for (size_t i = 0; i < c->n_classes; i++)
                next->classes[i] = score_class_ref(c->classes[i]);
        next->n_classes = c->n_classes;
        memcpy(next->index, c->index, c->index_size * sizeof(*next->index));
        next->index_size = c->index_size;
        /* c->pods is NULL in a snapshot without pods: no copy then. */
        if (c->n_pods > 0) {
                memcpy(next->pods, c->pods, at * sizeof(*next->pods));
                memcpy(next->pods + at + 1, c->pods + at, (c->n_pods - at) * sizeof(*next->pods));
        }
        next->pods[at] = pod;
        next->n_pods = c->n_pods + 1;
        topo_mask_or(&next->nodes[pod.node].used, &pod.gpus);
        memcpy(next->group_keys, c->group_keys, sizeof(next->group_keys));
        /* The PodGroups and the bound pods' groups, the new pod's included. */
        if (c->n_group_sizes > 0) {
                next->group_sizes = malloc(c->n_group_sizes * sizeof(*next->group_sizes));
                if (!next->group_sizes) {
                        cluster_free(next);
                        return -ENOMEM;
                }
                memcpy(next->group_sizes, c->group_sizes,
                       c->n_group_sizes * sizeof(*next->group_sizes));
                next->n_group_sizes = c->n_group_sizes;
        }
        /* Its gang: the group record's, else group_id (a group with no record). */
        if (group_record &&
            ext_group_record_decode(group_record, strlen(group_record), &rec, NULL) == 0 &&
            group_id_valid(rec.group.id, namespace))
                gid = rec.group.id;
        else if (group_id_valid(group_id, namespace))
                gid = group_id;
        grouped = gid != NULL;
        if (grouped)
                gat = gid_find(c->pod_groups, c->n_pod_groups, gid, &known);
        if (c->n_pod_groups > 0 || grouped) {
                size_t ng = c->n_pod_groups + (grouped && !known);

                next->pod_groups = malloc(ng * sizeof(*next->pod_groups));
                if (!next->pod_groups) {
                        cluster_free(next);
                        return -ENOMEM;
                }
                if (grouped && !known) {
                        /* A new id sorts in at gat: later indices move up by one.  (c's
                         * table is NULL when it has none: no copies then.) */
                        if (gat > 0)
                                memcpy(next->pod_groups, c->pod_groups,
                                       gat * sizeof(*c->pod_groups));
                        str_copy(next->pod_groups[gat], sizeof(next->pod_groups[0]), gid,
                                 strlen(gid));
                        if (c->n_pod_groups > gat)
                                memcpy(next->pod_groups + gat + 1, c->pod_groups + gat,
                                       (c->n_pod_groups - gat) * sizeof(*c->pod_groups));
                        for (size_t i = 0; i < next->n_pods; i++)
                                if (next->pods[i].group > gat)
                                        next->pods[i].group++;
                } else if (c->n_pod_groups > 0) {
                        memcpy(next->pod_groups, c->pod_groups,
                               c->n_pod_groups * sizeof(*c->pod_groups));
                }
                next->n_pod_groups = ng;
                next->pods[at].group = grouped ? (uint32_t)gat + 1 : 0;
        }
        place_build(next, cfg, c); /* only the pod's node is computed again */
        cluster_states(next);
        *ret = next;
        return 0;
}

/* Node i of a Nodes-mode request, built from what the scheduler sent. */
static int
extra_node(struct ext_node *n, const struct ext_config *cfg, const struct ext_args *a, size_t i)
{
        CLEANUP(freep) char *topo = NULL;
        char name[EXT_NAME_MAX];
        size_t len = 0;
        int r = ext_args_topology(a, i, &topo, &len);

        if (r < 0)
                return r;
        return ext_node_init(n, cfg, ext_args_name(a, i, name), topo, len,
                             a->nodes[i].gpu_capacity, NULL);
}

/* The n bytes at a and b are the same.  Names of one cluster often differ only at their
 * end (gpu-node-00417): the last 8 bytes are compared first, inline. */
static inline bool
same_name(const char *a, const char *b, size_t n)
{
        if (n >= 8) {
                uint64_t x, y;

                memcpy(&x, a + n - 8, 8);
                memcpy(&y, b + n - 8, 8);
                if (x != y)
                        return false;
        }
        return memcmp(a, b, n) == 0;
}

int
ext_nodes_resolve(const struct ext_cluster *c, const struct ext_config *cfg,
                  const struct ext_args *a, struct ext_nodes *ret)
{
        int r;

        const struct ext_node *next = c && c->n_nodes ? c->nodes : NULL;

        *ret = (struct ext_nodes){ 0 };
        ret->nodes = malloc(MAX(a->n, (size_t)1) * sizeof(*ret->nodes));
        if (!ret->nodes)
                return -ENOMEM;
        for (size_t i = 0; i < a->n; i++) {
                size_t len = ext_args_name_len(a, i);

                /* The view's nodes are sorted by name, and the scheduler's list often is
                 * too (the API server lists nodes by name; the scheduler walks them in
                 * order from a rotating start): the node after the last one found is tried
                 * before the index, and a run of names in order costs a compare each. */
                if (next && next->name_len == len && same_name(next->name, a->names[i], len))
                        ret->nodes[i] = next;
                else
                        ret->nodes[i] = ext_cluster_find_node_n(c, a->names[i], len);
                if (ret->nodes[i])
                        next = ret->nodes[i] + 1 < c->nodes + c->n_nodes ? ret->nodes[i] + 1
                                                                          : c->nodes;
                if (ret->nodes[i] || a->node_names)
                        continue;
                /* Allocated at the first such node: usually never, the view has them all. */
                if (!ret->extra) {
                        ret->extra = nodes_alloc(a->n - i);
                        if (!ret->extra)
                                return -ENOMEM;
                }
                r = extra_node(&ret->extra[ret->n_extra], cfg, a, i);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        continue; /* stays NULL: "not in the cluster view" */
                ret->nodes[i] = &ret->extra[ret->n_extra++];
        }
        return 0;
}

int
ext_nodes_resolve_memo(const struct ext_cluster *c, const struct ext_config *cfg,
                       const struct ext_args *a, struct ext_names_memo *m, struct ext_nodes *ret)
{
        int r;

        if (!m || !a->list_memo || a->n != m->n || !c)
                return ext_nodes_resolve(c, cfg, a, ret);
        if (m->serial == c->serial) {
                *ret = (struct ext_nodes){ 0 };
                ret->nodes = malloc(MAX(a->n, (size_t)1) * sizeof(*ret->nodes));
                if (!ret->nodes)
                        return -ENOMEM;
                memcpy(ret->nodes, m->nodes, a->n * sizeof(*ret->nodes));
                return 0;
        }
        r = ext_nodes_resolve(c, cfg, a, ret);
        if (r >= 0 && ret->n_extra == 0) {
                memcpy(m->nodes, ret->nodes, a->n * sizeof(*m->nodes));
                m->serial = c->serial;
        }
        return r;
}

void
ext_nodes_release(struct ext_nodes *n)
{
        for (size_t i = 0; i < n->n_extra; i++)
                ext_node_release(&n->extra[i]);
        free(n->extra);
        free(n->nodes);
        *n = (struct ext_nodes){ 0 };
}
