/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topology: one node's GPU graph.  GPUs, NICs, NUMA nodes and the relation between every
 * pair of GPUs (NVLink with its link count, XGMI, or the PCIe relation that
 * `nvidia-smi topo -m` prints), plus NVSwitch presence and the multi-node NVLink domain.
 *
 * PURE: no I/O, no clocks, no globals, no curl/cJSON/microhttpd/gRPC.  Parsers take byte
 * ranges and return a new refcounted, immutable-after-construction `struct topo`.  The hwloc
 * loader lives in a separate small library (topology/hwloc/topo-hwloc.h).
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/macro.h"

#define TOPO_MAX_GPUS 128                     /* one annotation; a 72-GPU NVL72 domain fits */
#define TOPO_MAX_NICS 128
#define TOPO_MAX_NUMA 64
#define TOPO_MAX_NUMA_ID 1023                 /* Linux: at most 1024 NUMA nodes */
#define TOPO_MAX_NVLINKS 64                   /* NV# and XGMI link counts per pair */
#define TOPO_MAX_TEXT_BYTES (1u << 20)        /* nvidia-smi / rocm-smi text input */
#define TOPO_MAX_ANNOTATION_BYTES (256u << 10) /* Kubernetes' total annotation limit */
#define TOPO_MAX_ANNOTATION_MEMORY (32u * TOPO_MAX_ANNOTATION_BYTES) /* its parsed tree */
#define TOPO_MAX_XML_BYTES (32u << 20)        /* hwloc XML export */
#define TOPO_ID_MAX 96                        /* UUIDs, bus ids, names (NUL included) */
#define TOPO_ANNOTATION_KEY "topofit.io/topology"
#define TOPO_ANNOTATION_VERSION 1
#define TOPO_GPUS_KEY "topofit.io/gpus"            /* a bound pod's GPUs (topo-gpus.c) */
#define TOPO_GPUS_VERSION 1
#define TOPO_GPUS_MAX_BYTES (16u << 10)            /* one topofit.io/gpus value */
#define TOPO_GPUS_MAX_CONTAINERS 32                /* containers + init containers of a pod */
#define TOPO_GPUS_NODE_MAX 254                     /* a node name (DNS subdomain, 253) + NUL */
#define TOPO_GPUS_CONTAINER_MAX 64                 /* a container name (DNS label, 63) + NUL */

/* The relation between two devices, best first, in the order `nvidia-smi topo -m` ranks
 * them.  Values are stable: they are stored in annotations by name, never by number. */
enum topo_link {
        TOPO_LINK_SELF,    /* X */
        TOPO_LINK_NVLINK,  /* NV#: a bonded set of # NVLinks, or an NVSwitch fabric port */
        TOPO_LINK_XGMI,    /* AMD Infinity Fabric (rocm-smi "XGMI") */
        TOPO_LINK_PIX,     /* at most one PCIe bridge */
        TOPO_LINK_PXB,     /* several PCIe bridges, no host bridge */
        TOPO_LINK_PCIE,    /* rocm-smi "PCIE": a PCIe path of unknown depth (hops known) */
        TOPO_LINK_PHB,     /* through a PCIe host bridge (the CPU) */
        TOPO_LINK_NODE,    /* between host bridges inside one NUMA node */
        TOPO_LINK_SYS,     /* across the SMP interconnect (QPI/UPI, Infinity Fabric); old SOC */
        TOPO_LINK_UNKNOWN, /* N/A or no information */
        _TOPO_LINK_MAX,
        _TOPO_LINK_INVALID = -EINVAL,
};

enum topo_vendor {
        TOPO_VENDOR_UNKNOWN,
        TOPO_VENDOR_NVIDIA,
        TOPO_VENDOR_AMD,
        _TOPO_VENDOR_MAX,
        _TOPO_VENDOR_INVALID = -EINVAL,
};

enum topo_mig {
        TOPO_MIG_UNKNOWN,
        TOPO_MIG_DISABLED,
        TOPO_MIG_ENABLED,
        _TOPO_MIG_MAX,
        _TOPO_MIG_INVALID = -EINVAL,
};

/* The CPU interconnect that SYS paths cross; sets the cross-socket bandwidth. */
enum topo_cpu_link {
        TOPO_CPU_LINK_UNKNOWN,
        TOPO_CPU_LINK_INTEL_UPI,  /* Skylake..Ice Lake */
        TOPO_CPU_LINK_INTEL_UPI2, /* Sapphire Rapids and later */
        TOPO_CPU_LINK_AMD_IF,     /* AMD EPYC Infinity Fabric */
        TOPO_CPU_LINK_POWER_XBUS, /* IBM POWER X-bus */
        TOPO_CPU_LINK_ARM_C2C,    /* Grace C2C */
        _TOPO_CPU_LINK_MAX,
        _TOPO_CPU_LINK_INVALID = -EINVAL,
};

/* Relation between GPU i and GPU j. */
struct topo_pair {
        uint8_t link;    /* enum topo_link */
        uint8_t links;   /* NVLink / XGMI link count; 0 when not applicable or unknown */
        uint8_t hops;    /* rocm-smi hops; 0 when unknown */
        uint8_t _pad;
        uint16_t weight; /* rocm-smi weight; 0 when unknown */
};

struct topo_gpu {
        char uuid[TOPO_ID_MAX];       /* "" when unknown (text matrices carry none) */
        char model[TOPO_ID_MAX];      /* "NVIDIA H100 80GB HBM3", "" when unknown */
        char pci_bus_id[TOPO_ID_MAX]; /* "00000000:07:00.0", "" when unknown */
        char cpu_affinity[TOPO_ID_MAX]; /* cpuset list as printed, "" when unknown */
        uint64_t memory_mib;          /* 0 when unknown */
        int numa;                     /* NUMA node, -1 when unknown */
        uint8_t pcie_gen;             /* 0 when unknown */
        uint8_t pcie_width;           /* 0 when unknown */
        uint8_t nvlink_gen;           /* 1..5, 0 when unknown or no NVLink */
        uint8_t mig;                  /* enum topo_mig */
        bool healthy;
};

struct topo_nic {
        char name[TOPO_ID_MAX]; /* "mlx5_0", or "NIC3" when the legend is missing */
        int numa;               /* -1 when unknown */
};

struct topo {
        unsigned n_ref;
        uint8_t vendor;      /* enum topo_vendor */
        uint8_t cpu_link;    /* enum topo_cpu_link */
        bool nvswitch;       /* GPUs joined through an NVSwitch fabric, not direct links */
        char nvlink_domain[TOPO_ID_MAX]; /* multi-node NVLink clique id, "" when none */
        char node_name[TOPO_ID_MAX];     /* informational, "" when unknown */
        unsigned n_gpus;
        unsigned n_nics;
        unsigned n_numa;     /* distinct known NUMA nodes among GPUs and NICs */
        struct topo_gpu *gpus;     /* n_gpus */
        struct topo_nic *nics;     /* n_nics */
        struct topo_pair *pairs;   /* n_gpus * n_gpus, row-major, symmetric, diagonal SELF */
        uint8_t *nic_links;        /* n_nics * n_gpus: enum topo_link of NIC i to GPU j */
};

/* A set of GPUs of one node, by index.  Plain value type. */
struct topo_mask {
        uint64_t w[(TOPO_MAX_GPUS + 63) / 64];
};

/* Where a parser stopped, for a clear error.  line/column are 1-based; 0 when not
 * applicable.  msg is a complete sentence without the position. */
struct topo_error {
        unsigned line;
        unsigned column;
        char msg[200];
};

/* --- construction and lifetime ------------------------------------------------------- */

/* A zeroed topology of n_gpus GPUs and n_nics NICs: pairs set to UNKNOWN with a SELF
 * diagonal, NUMA -1, GPUs healthy.  NULL on OOM or when a count is over its limit. */
struct topo *topo_new(unsigned n_gpus, unsigned n_nics);
struct topo *topo_ref(struct topo *t);
struct topo *topo_unref(struct topo *t); /* accepts NULL, returns NULL */
DEFINE_CLEANUP_FUNC(struct topo, topo_unref)

/* Derived fields after a parser has filled the raw ones: n_numa, per-GPU nvlink_gen when
 * unknown (inferred from the model name or the NV# pattern), nvswitch when the NVLink
 * counts per GPU exceed what one generation can wire directly.  Idempotent. */
void topo_finish(struct topo *t);

/* Deep equality of everything an annotation carries. */
bool topo_equal(const struct topo *a, const struct topo *b);

/* A fingerprint of what scoring depends on (links, counts, generations, NUMA, NICs,
 * NVSwitch, CPU link), not identities (UUIDs, bus ids, names).  Nodes with equal
 * fingerprints share one topology class. */
uint64_t topo_class_hash(const struct topo *t);

static inline const struct topo_pair *
topo_pair(const struct topo *t, unsigned i, unsigned j)
{
        return &t->pairs[(size_t)i * t->n_gpus + j];
}

static inline struct topo_pair *
topo_pair_mut(struct topo *t, unsigned i, unsigned j)
{
        return &t->pairs[(size_t)i * t->n_gpus + j];
}

static inline enum topo_link
topo_nic_link(const struct topo *t, unsigned nic, unsigned gpu)
{
        return (enum topo_link)t->nic_links[(size_t)nic * t->n_gpus + gpu];
}

/* --- names ------------------------------------------------------------------------------ */

const char *topo_link_to_string(enum topo_link l); /* "NV", "PIX", ... NULL when invalid */
enum topo_link topo_link_from_string(const char *s);
const char *topo_vendor_to_string(enum topo_vendor v);
enum topo_vendor topo_vendor_from_string(const char *s);
const char *topo_mig_to_string(enum topo_mig m);
enum topo_mig topo_mig_from_string(const char *s);
const char *topo_cpu_link_to_string(enum topo_cpu_link c);
enum topo_cpu_link topo_cpu_link_from_string(const char *s);

/* True when NCCL would use direct peer-to-peer for this relation by default: NVLink, XGMI,
 * or a PCIe path of at most PXB.  Otherwise traffic is staged through host memory. */
bool topo_link_is_p2p(enum topo_link l);

/* --- parsers ------------------------------------------------------------------------------
 * All take a byte range (not necessarily NUL-terminated), cap it by a named constant,
 * return 0 and a new topology in *ret, or a negative errno and, when err is non-NULL, the
 * line/column and a sentence saying what is wrong.  They never guess silently: a damaged
 * matrix (merged cells, cut-off rows) is an error that says so. */

/* `nvidia-smi topo -m` (or the old `topo --matrix`) text, any driver generation. */
int topo_parse_nvsmi(const char *text, size_t len, struct topo **ret, struct topo_error *err);

/* `rocm-smi --showtopo` text. */
int topo_parse_rocm(const char *text, size_t len, struct topo **ret, struct topo_error *err);

/* The node annotation JSON (docs/annotations.md), version TOPO_ANNOTATION_VERSION. */
int topo_parse_annotation(const char *json, size_t len, struct topo **ret,
                          struct topo_error *err);

enum topo_format {
        TOPO_FORMAT_NVSMI,
        TOPO_FORMAT_ROCM,
        TOPO_FORMAT_ANNOTATION,
        TOPO_FORMAT_HWLOC_XML, /* detected here, parsed by topology/hwloc */
        _TOPO_FORMAT_MAX,
        _TOPO_FORMAT_INVALID = -EINVAL,
};
enum topo_format topo_detect_format(const char *text, size_t len);

/* Detects the format and parses any of the text formats; hwloc XML gives -EPROTONOSUPPORT
 * (the caller then uses topo_hwloc_load_xml()). */
int topo_parse_any(const char *text, size_t len, struct topo **ret, struct topo_error *err);

/* Writes the compact annotation JSON into a malloc()ed NUL-terminated string.  Fails with
 * -E2BIG when it would exceed TOPO_MAX_ANNOTATION_BYTES, -EINVAL when a string field is not
 * printable ASCII or the CPU list is not a list (nothing a parser produces).  Lossless:
 * parsing it back gives a topology that topo_equal()s the input. */
int topo_to_annotation(const struct topo *t, char **ret_json, size_t *ret_len);

/* Applies a GPU model name to every GPU whose model is unknown (the text matrices carry
 * none; the CLI's --gpu-model and the publisher's NVML data set it), then re-derives.
 * A name that is not printable ASCII shorter than TOPO_ID_MAX is ignored. */
void topo_set_model(struct topo *t, const char *model);

/* --- masks -------------------------------------------------------------------------------- */

static inline void
topo_mask_clear(struct topo_mask *m)
{
        *m = (struct topo_mask){ 0 };
}
static inline void
topo_mask_set(struct topo_mask *m, unsigned i)
{
        m->w[i / 64] |= UINT64_C(1) << (i % 64);
}
static inline void
topo_mask_unset(struct topo_mask *m, unsigned i)
{
        m->w[i / 64] &= ~(UINT64_C(1) << (i % 64));
}
static inline bool
topo_mask_test(const struct topo_mask *m, unsigned i)
{
        return (m->w[i / 64] >> (i % 64)) & 1;
}
static inline unsigned
topo_mask_count(const struct topo_mask *m)
{
        unsigned n = 0;
        for (size_t k = 0; k < ELEMENTSOF(m->w); k++)
                n += (unsigned)__builtin_popcountll(m->w[k]);
        return n;
}
static inline bool
topo_mask_equal(const struct topo_mask *a, const struct topo_mask *b)
{
        for (size_t k = 0; k < ELEMENTSOF(a->w); k++)
                if (a->w[k] != b->w[k])
                        return false;
        return true;
}
/* a |= b */
static inline void
topo_mask_or(struct topo_mask *a, const struct topo_mask *b)
{
        for (size_t k = 0; k < ELEMENTSOF(a->w); k++)
                a->w[k] |= b->w[k];
}
/* a &= b */
static inline void
topo_mask_and(struct topo_mask *a, const struct topo_mask *b)
{
        for (size_t k = 0; k < ELEMENTSOF(a->w); k++)
                a->w[k] &= b->w[k];
}
/* a &= ~b */
static inline void
topo_mask_andnot(struct topo_mask *a, const struct topo_mask *b)
{
        for (size_t k = 0; k < ELEMENTSOF(a->w); k++)
                a->w[k] &= ~b->w[k];
}
/* Whether a and b share a GPU. */
static inline bool
topo_mask_intersects(const struct topo_mask *a, const struct topo_mask *b)
{
        for (size_t k = 0; k < ELEMENTSOF(a->w); k++)
                if (a->w[k] & b->w[k])
                        return true;
        return false;
}
/* Whether every GPU of a is in b. */
static inline bool
topo_mask_subset(const struct topo_mask *a, const struct topo_mask *b)
{
        for (size_t k = 0; k < ELEMENTSOF(a->w); k++)
                if (a->w[k] & ~b->w[k])
                        return false;
        return true;
}
/* The lowest GPU index >= from in m, or -1: for (int g = topo_mask_next(m, 0); g >= 0;
 * g = topo_mask_next(m, g + 1)). */
static inline int
topo_mask_next(const struct topo_mask *m, unsigned from)
{
        for (size_t k = from / 64; k < ELEMENTSOF(m->w); k++) {
                uint64_t w = m->w[k];

                if (k == from / 64)
                        w &= ~UINT64_C(0) << (from % 64);
                if (w)
                        return (int)(k * 64 + (unsigned)__builtin_ctzll(w));
        }
        return -1;
}
/* All GPUs 0..n-1. */
static inline void
topo_mask_fill(struct topo_mask *m, unsigned n)
{
        topo_mask_clear(m);
        for (unsigned i = 0; i < n; i++)
                topo_mask_set(m, i);
}
/* "0,1,5" into a mask of GPUs below n; -EINVAL / -ERANGE on bad or out-of-range items. */
int topo_mask_parse(const char *s, unsigned n, struct topo_mask *ret);
/* Writes "0,1,5" into buf (size bytes); returns -E2BIG when it does not fit. */
int topo_mask_format(const struct topo_mask *m, char *buf, size_t size);

/* --- topofit.io/gpus: what a bound pod got (topo-gpus.c, docs/annotations.md) ----------- */

struct topo_gpus_container {
        char name[TOPO_GPUS_CONTAINER_MAX]; /* "" when the record names none */
        bool init;                     /* an init container: reuses the pod's GPUs */
        struct topo_mask gpus;         /* never empty */
};

struct topo_gpus {
        char node[TOPO_GPUS_NODE_MAX]; /* "" when the record names none */
        unsigned n;                    /* 1..TOPO_GPUS_MAX_CONTAINERS */
        struct topo_gpus_container c[TOPO_GPUS_MAX_CONTAINERS];
};

/* Reads a topofit.io/gpus value: {"version":1,"node":N,"containers":[{"name":C,"init":B,
 * "indices":[..],"uuids":[..]}, ...]}, the one form the extender writes (no other form is
 * accepted).  Indices must be below n_gpus.  ids (NULL: indices only) are the node's
 * n_gpus device UUIDs: a container whose "uuids" are all non-empty is resolved by them
 * (the UUID wins over the index), else by its indices.  node (NULL or "": not checked) is
 * the node reading it.  Untrusted input: over TOPO_GPUS_MAX_BYTES is -E2BIG; a version
 * other than 1 -EPROTONOSUPPORT; an index out of range -ERANGE; bad JSON, another node's
 * record, an unknown UUID, a GPU twice in one container, two app containers sharing a
 * GPU, an empty set, no containers, more than TOPO_GPUS_MAX_CONTAINERS (-E2BIG) or a
 * repeated key (common/json.h) -EINVAL; each with *ret_why.  *ret written on success. */
int topo_gpus_decode(const char *json, size_t len, unsigned n_gpus, const char (*ids)[TOPO_ID_MAX],
                     const char *node, struct topo_gpus *ret, const char **ret_why);
/* The union of every container's GPUs. */
void topo_gpus_union(const struct topo_gpus *g, struct topo_mask *ret);
/* Writes the record for node: per container c[i] its GPUs in the order given, UUIDs from
 * t ("" where t is NULL or has no such GPU).  A malloc()ed string in *ret_json; -E2BIG
 * over TOPO_GPUS_MAX_BYTES or TOPO_GPUS_MAX_CONTAINERS. */
struct topo_gpus_out {
        const char *name;
        bool init;
        unsigned count;
        const uint8_t *gpus; /* count GPU indices, in the order written */
};
int topo_gpus_encode(const char *node, const struct topo_gpus_out *c, unsigned n,
                     const struct topo *t, char **ret_json);
