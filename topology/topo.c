/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The topology model itself: construction and lifetime of the refcounted `struct topo`,
 * the derived fields (topo_finish: NUMA count, NVLink generation, NVSwitch), equality and
 * the class fingerprint scoring memoises on, the name tables, GPU masks, and the format
 * dispatcher.  Pure: depends on common/ only.  A topology is mutable while its parser builds
 * it and immutable once handed out; topo_ref() shares it, the last topo_unref() frees it.
 */
#include "topo.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "str.h"
#include "topo-private.h"

int
topo__check_input(const char *text, size_t len, size_t max, const char *what,
                  struct topo_error *err)
{
        if (!text && len > 0)
                return -EINVAL;
        if (len > max)
                return topo__error(err, -E2BIG, 0, 0, "%s larger than %zu bytes.", what, max);
        return 0;
}

int
topo__error(struct topo_error *err, int r, unsigned line, unsigned column, const char *fmt, ...)
{
        va_list ap;

        if (!err)
                return r;
        err->line = line;
        err->column = column;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        return r;
}

struct topo *
topo_new(unsigned n_gpus, unsigned n_nics)
{
        struct topo *t;

        if (n_gpus > TOPO_MAX_GPUS || n_nics > TOPO_MAX_NICS)
                return NULL;
        t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        t->n_ref = 1;
        t->n_gpus = n_gpus;
        t->n_nics = n_nics;
        t->gpus = calloc(MAX(n_gpus, 1u), sizeof(*t->gpus));
        t->nics = calloc(MAX(n_nics, 1u), sizeof(*t->nics));
        t->pairs = calloc(MAX((size_t)n_gpus * n_gpus, 1u), sizeof(*t->pairs));
        t->nic_links = calloc(MAX((size_t)n_nics * n_gpus, 1u), sizeof(*t->nic_links));
        if (!t->gpus || !t->nics || !t->pairs || !t->nic_links)
                return topo_unref(t);
        for (unsigned i = 0; i < n_gpus; i++) {
                t->gpus[i].numa = -1;
                t->gpus[i].healthy = true;
                for (unsigned j = 0; j < n_gpus; j++)
                        topo_pair_mut(t, i, j)->link = i == j ? TOPO_LINK_SELF : TOPO_LINK_UNKNOWN;
        }
        for (unsigned k = 0; k < n_nics; k++) {
                t->nics[k].numa = -1;
                for (unsigned j = 0; j < n_gpus; j++)
                        t->nic_links[(size_t)k * n_gpus + j] = TOPO_LINK_UNKNOWN;
        }
        return t;
}

struct topo *
topo_ref(struct topo *t)
{
        if (t)
                t->n_ref++;
        return t;
}

struct topo *
topo_unref(struct topo *t)
{
        if (!t)
                return NULL;
        if (--t->n_ref > 0)
                return NULL;
        free(t->gpus);
        free(t->nics);
        free(t->pairs);
        free(t->nic_links);
        free(t);
        return NULL;
}

/* --- derived fields ---------------------------------------------------------------------- */

unsigned
topo__nvlink_links_per_gpu(unsigned gen)
{
        /* P100 4, V100 6, A100 12, H100 18, B200 18 NVLinks per GPU. */
        static const unsigned links[] = {[1] = 4, [2] = 6, [3] = 12, [4] = 18, [5] = 18};
        return gen < ELEMENTSOF(links) ? links[gen] : 0;
}

/* Model names to NVLink generation.  A needle matches where it is not preceded by a letter
 * or digit and not followed by a digit, so "A100" does not match "A1000" and "H20" does not
 * match inside "H200" (which has its own row). */
static const struct {
        const char *needle;
        unsigned gen;
} model_gens[] = {
        {"P100", 1}, {"V100", 2}, {"TITAN V", 2}, {"Quadro GV100", 2}, {"A100", 3},
        {"A800", 3}, {"A30", 3},  {"A40", 3},     {"A6000", 3},        {"RTX 3090", 3},
        {"H100", 4}, {"H200", 4}, {"H800", 4},    {"H20", 4},          {"GH200", 4},
        {"B100", 5}, {"B200", 5}, {"B300", 5},    {"GB200", 5},        {"GB300", 5},
};

unsigned
topo__nvlink_gen_from_model(const char *model)
{
        size_t len = model ? strlen(model) : 0;

        for (size_t i = 0; i < ELEMENTSOF(model_gens); i++) {
                size_t nl = strlen(model_gens[i].needle);

                for (size_t at = 0; at + nl <= len; at++) {
                        char before = at > 0 ? model[at - 1] : ' ';
                        char after = model[at + nl];

                        if (strncasecmp(model + at, model_gens[i].needle, nl) != 0)
                                continue;
                        if ((before >= '0' && before <= '9') || (before >= 'A' && before <= 'Z') ||
                            (before >= 'a' && before <= 'z'))
                                continue;
                        if (after >= '0' && after <= '9')
                                continue;
                        return model_gens[i].gen;
                }
        }
        return 0;
}

/* The NV# pattern of one GPU, when its model is unknown.  m = the most links to one peer,
 * s = the sum over peers, p = the number of NVLink peers (0 in a rule: any).  First match
 * wins; see docs/annotations.md for the reasoning behind each row.  Ambiguous patterns
 * (NV8: A800 is NVLink 3, H800 is NVLink 4) stay 0 = unknown. */
static const struct {
        unsigned m, s, p, gen;
} nv_patterns[] = {
        {18, 0, 0, 4}, /* HGX/DGX H100, H200, H20 (B200/B300 print NV18 too: set the model) */
        {12, 0, 0, 3}, /* HGX A100 NVSwitch, A100 PCIe NVLink bridge pairs */
        {8, 0, 0, 0},  /* A800 (NVLink 3) or H800 (NVLink 4): ambiguous */
        {6, 0, 0, 2},  /* DGX-2 / HGX-2 V100 NVSwitch */
        {4, 12, 3, 3}, /* 4-GPU HGX A100 all-to-all NV4 */
        {4, 4, 1, 3},  /* Ampere NVLink bridge pair (RTX 3090, A6000, A40) */
        {3, 0, 0, 2},  /* POWER9 AC922 V100 pairs (3 bricks to the peer, 3 to the CPU) */
        {2, 6, 0, 2},  /* DGX-1 V100 hybrid cube mesh: NV1/NV2, 6 links */
        {1, 4, 4, 1},  /* DGX-1 P100 hybrid cube mesh: 4 x NV1 */
        {2, 2, 1, 1},  /* POWER8 S822LC P100 pairs */
};

static unsigned
nvlink_gen_from_pattern(unsigned m, unsigned s, unsigned p)
{
        for (size_t i = 0; i < ELEMENTSOF(nv_patterns); i++)
                if (nv_patterns[i].m == m && (!nv_patterns[i].s || nv_patterns[i].s == s) &&
                    (!nv_patterns[i].p || nv_patterns[i].p == p))
                        return nv_patterns[i].gen;
        return 0;
}

void
topo_finish(struct topo *t)
{
        bool seen[TOPO_MAX_NUMA_ID + 1] = {false};
        unsigned n_numa = 0;

        for (unsigned i = 0; i < t->n_gpus; i++) {
                struct topo_gpu *g = &t->gpus[i];
                unsigned m = 0, s = 0, p = 0;

                for (unsigned j = 0; j < t->n_gpus; j++) {
                        const struct topo_pair *pr = topo_pair(t, i, j);
                        if (i == j || pr->link != TOPO_LINK_NVLINK)
                                continue;
                        m = MAX(m, (unsigned)pr->links);
                        s += pr->links;
                        p++;
                }
                if (g->nvlink_gen == 0 && p > 0)
                        g->nvlink_gen = (uint8_t)topo__nvlink_gen_from_model(g->model);
                if (g->nvlink_gen == 0 && p > 0)
                        g->nvlink_gen = (uint8_t)nvlink_gen_from_pattern(m, s, p);
                /* More links than the generation can wire directly: the peers are reached
                 * through NVSwitch ports.  Unknown generation: compare with the largest. */
                unsigned cap = g->nvlink_gen ? topo__nvlink_links_per_gpu(g->nvlink_gen)
                                             : topo__nvlink_links_per_gpu(5);
                if (s > cap)
                        t->nvswitch = true;
        }

        for (unsigned i = 0; i < t->n_gpus; i++)
                if (t->gpus[i].numa >= 0 && t->gpus[i].numa <= TOPO_MAX_NUMA_ID &&
                    !seen[t->gpus[i].numa]) {
                        seen[t->gpus[i].numa] = true;
                        n_numa++;
                }
        for (unsigned k = 0; k < t->n_nics; k++)
                if (t->nics[k].numa >= 0 && t->nics[k].numa <= TOPO_MAX_NUMA_ID &&
                    !seen[t->nics[k].numa]) {
                        seen[t->nics[k].numa] = true;
                        n_numa++;
                }
        t->n_numa = n_numa;
}

void
topo_set_model(struct topo *t, const char *model)
{
        if (!t || !model || !topo__id_ok(model, strlen(model)))
                return;
        for (unsigned i = 0; i < t->n_gpus; i++) {
                if (t->gpus[i].model[0])
                        continue;
                (void)str_copy(t->gpus[i].model, sizeof(t->gpus[i].model), model, strlen(model));
                /* The pattern guess yields to the name. */
                t->gpus[i].nvlink_gen = 0;
        }
        topo_finish(t);
}

/* --- equality and fingerprint -------------------------------------------------------------- */

static bool
gpu_equal(const struct topo_gpu *a, const struct topo_gpu *b)
{
        return streq(a->uuid, b->uuid) && streq(a->model, b->model) &&
               streq(a->pci_bus_id, b->pci_bus_id) && streq(a->cpu_affinity, b->cpu_affinity) &&
               a->memory_mib == b->memory_mib && a->numa == b->numa && a->pcie_gen == b->pcie_gen &&
               a->pcie_width == b->pcie_width && a->nvlink_gen == b->nvlink_gen &&
               a->mig == b->mig && a->healthy == b->healthy;
}

bool
topo_equal(const struct topo *a, const struct topo *b)
{
        if (a == b)
                return true;
        if (!a || !b)
                return false;
        if (a->vendor != b->vendor || a->cpu_link != b->cpu_link || a->nvswitch != b->nvswitch ||
            !streq(a->nvlink_domain, b->nvlink_domain) || !streq(a->node_name, b->node_name) ||
            a->n_gpus != b->n_gpus || a->n_nics != b->n_nics || a->n_numa != b->n_numa)
                return false;
        for (unsigned i = 0; i < a->n_gpus; i++)
                if (!gpu_equal(&a->gpus[i], &b->gpus[i]))
                        return false;
        for (unsigned k = 0; k < a->n_nics; k++)
                if (!streq(a->nics[k].name, b->nics[k].name) || a->nics[k].numa != b->nics[k].numa)
                        return false;
        for (size_t i = 0; i < (size_t)a->n_gpus * a->n_gpus; i++) {
                const struct topo_pair *p = &a->pairs[i], *q = &b->pairs[i];
                if (p->link != q->link || p->links != q->links || p->hops != q->hops ||
                    p->weight != q->weight)
                        return false;
        }
        return memcmp(a->nic_links, b->nic_links, (size_t)a->n_nics * a->n_gpus) == 0;
}

/* FNV-1a, 64 bit. */
#define FNV_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV_PRIME UINT64_C(0x100000001b3)

static uint64_t
fnv(uint64_t h, uint64_t v, unsigned bytes)
{
        for (unsigned i = 0; i < bytes; i++) {
                h ^= (v >> (8 * i)) & 0xff;
                h *= FNV_PRIME;
        }
        return h;
}

uint64_t
topo_class_hash(const struct topo *t)
{
        uint64_t h = FNV_OFFSET;

        /* Field by field, never raw struct bytes: padding must not leak into the hash. */
        h = fnv(h, t->n_gpus, 4);
        h = fnv(h, t->n_nics, 4);
        h = fnv(h, t->vendor, 1);
        h = fnv(h, t->cpu_link, 1);
        h = fnv(h, t->nvswitch, 1);
        h = fnv(h, t->nvlink_domain[0] != '\0', 1);
        for (unsigned i = 0; i < t->n_gpus; i++) {
                const struct topo_gpu *g = &t->gpus[i];
                h = fnv(h, (uint32_t)g->numa, 4);
                h = fnv(h, g->nvlink_gen, 1);
                h = fnv(h, g->pcie_gen, 1);
                h = fnv(h, g->pcie_width, 1);
                h = fnv(h, g->mig, 1);
                h = fnv(h, g->healthy, 1);
        }
        for (size_t i = 0; i < (size_t)t->n_gpus * t->n_gpus; i++) {
                const struct topo_pair *p = &t->pairs[i];
                h = fnv(h, p->link, 1);
                h = fnv(h, p->links, 1);
                h = fnv(h, p->hops, 1);
                h = fnv(h, p->weight, 2);
        }
        for (unsigned k = 0; k < t->n_nics; k++)
                h = fnv(h, (uint32_t)t->nics[k].numa, 4);
        for (size_t i = 0; i < (size_t)t->n_nics * t->n_gpus; i++)
                h = fnv(h, t->nic_links[i], 1);
        return h;
}

/* --- names --------------------------------------------------------------------------------- */

static const char *const link_names[_TOPO_LINK_MAX] = {
        [TOPO_LINK_SELF] = "X",      [TOPO_LINK_NVLINK] = "NV", [TOPO_LINK_XGMI] = "XGMI",
        [TOPO_LINK_PIX] = "PIX",     [TOPO_LINK_PXB] = "PXB",   [TOPO_LINK_PCIE] = "PCIE",
        [TOPO_LINK_PHB] = "PHB",     [TOPO_LINK_NODE] = "NODE", [TOPO_LINK_SYS] = "SYS",
        [TOPO_LINK_UNKNOWN] = "N/A",
};

static const char *const vendor_names[_TOPO_VENDOR_MAX] = {
        [TOPO_VENDOR_UNKNOWN] = "unknown",
        [TOPO_VENDOR_NVIDIA] = "nvidia",
        [TOPO_VENDOR_AMD] = "amd",
};

static const char *const mig_names[_TOPO_MIG_MAX] = {
        [TOPO_MIG_UNKNOWN] = "unknown",
        [TOPO_MIG_DISABLED] = "disabled",
        [TOPO_MIG_ENABLED] = "enabled",
};

static const char *const cpu_link_names[_TOPO_CPU_LINK_MAX] = {
        [TOPO_CPU_LINK_UNKNOWN] = "unknown",       [TOPO_CPU_LINK_INTEL_UPI] = "intel-upi",
        [TOPO_CPU_LINK_INTEL_UPI2] = "intel-upi2", [TOPO_CPU_LINK_AMD_IF] = "amd-if",
        [TOPO_CPU_LINK_POWER_XBUS] = "power-xbus", [TOPO_CPU_LINK_ARM_C2C] = "arm-c2c",
};

DEFINE_STRING_TABLE(topo_link, enum topo_link, link_names)

DEFINE_STRING_TABLE(topo_vendor, enum topo_vendor, vendor_names)

DEFINE_STRING_TABLE(topo_mig, enum topo_mig, mig_names)

DEFINE_STRING_TABLE(topo_cpu_link, enum topo_cpu_link, cpu_link_names)

bool
topo_link_is_p2p(enum topo_link l)
{
        static const bool p2p[_TOPO_LINK_MAX] = {
                [TOPO_LINK_NVLINK] = true,
                [TOPO_LINK_XGMI] = true,
                [TOPO_LINK_PIX] = true,
                [TOPO_LINK_PXB] = true,
        };
        return l >= 0 && l < _TOPO_LINK_MAX && p2p[l];
}

/* --- masks ----------------------------------------------------------------------------------- */

int
topo_mask_parse(const char *s, unsigned n, struct topo_mask *ret)
{
        struct topo_mask m;
        const char *p = s;

        if (!s)
                return -EINVAL;
        topo_mask_clear(&m);
        while (*p) {
                const char *comma = strchrnul(p, ',');
                const char *dash = memchr(p, '-', (size_t)(comma - p));
                int lo, hi, r;

                if (dash) {
                        r = str_to_int(p, (size_t)(dash - p), 0, INT32_MAX, &lo);
                        if (r == 0)
                                r = str_to_int(dash + 1, (size_t)(comma - dash - 1), 0, INT32_MAX,
                                               &hi);
                        if (r == 0 && hi < lo)
                                r = -EINVAL;
                } else {
                        r = str_to_int(p, (size_t)(comma - p), 0, INT32_MAX, &lo);
                        hi = lo;
                }
                if (r < 0)
                        return r == -ERANGE ? -ERANGE : -EINVAL;
                if ((unsigned)hi >= n || (unsigned)hi >= TOPO_MAX_GPUS)
                        return -ERANGE;
                for (int i = lo; i <= hi; i++)
                        topo_mask_set(&m, (unsigned)i);
                if (!*comma)
                        break;
                p = comma + 1;
                if (!*p)
                        return -EINVAL; /* trailing comma */
        }
        *ret = m;
        return 0;
}

int
topo_mask_format(const struct topo_mask *m, char *buf, size_t size)
{
        size_t len = 0;

        if (size == 0)
                return -E2BIG;
        buf[0] = '\0';
        for (unsigned i = 0; i < TOPO_MAX_GPUS; i++) {
                if (!topo_mask_test(m, i))
                        continue;
                int w = snprintf(buf + len, size - len, "%s%u", len ? "," : "", i);
                if (w < 0 || (size_t)w >= size - len) {
                        buf[len] = '\0';
                        return -E2BIG;
                }
                len += (size_t)w;
        }
        return 0;
}

bool
topo__id_ok(const char *s, size_t len)
{
        if (len >= TOPO_ID_MAX)
                return false;
        for (size_t i = 0; i < len; i++)
                if (s[i] < 0x20 || s[i] > 0x7e)
                        return false;
        return true;
}

/* --- cpusets -----------------------------------------------------------------------------------
 */

int
topo__cpuset_check(const char *s, size_t len)
{
        size_t i = 0;

        if (len == 0)
                return -EINVAL;
        while (i < len) {
                size_t a = i;
                int lo, hi;

                while (i < len && s[i] >= '0' && s[i] <= '9')
                        i++;
                if (str_to_int(s + a, i - a, 0, INT32_MAX, &lo) < 0)
                        return -EINVAL;
                if (i < len && s[i] == '-') {
                        size_t b = ++i;
                        while (i < len && s[i] >= '0' && s[i] <= '9')
                                i++;
                        if (str_to_int(s + b, i - b, 0, INT32_MAX, &hi) < 0 || hi < lo)
                                return -EINVAL;
                }
                if (i == len)
                        break;
                if (s[i] != ',' || i + 1 == len)
                        return -EINVAL;
                i++;
        }
        return 0;
}

/* --- format dispatch ---------------------------------------------------------------------------
 */

static bool
mem_contains(const char *text, size_t len, const char *needle)
{
        if (!text || len == 0)
                return false;
        return memmem(text, len, needle, strlen(needle)) != NULL;
}

enum topo_format
topo_detect_format(const char *text, size_t len)
{
        size_t i = 0;

        if (!text)
                return _TOPO_FORMAT_INVALID;
        /* Skip blanks and our fixtures' '#' header lines. */
        for (;;) {
                while (i < len &&
                       (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
                        i++;
                if (i < len && text[i] == '#') {
                        const char *nl = memchr(text + i, '\n', len - i);
                        if (!nl)
                                return _TOPO_FORMAT_INVALID;
                        i = (size_t)(nl - text) + 1;
                        continue;
                }
                break;
        }
        if (i >= len)
                return _TOPO_FORMAT_INVALID;
        if (text[i] == '{')
                return TOPO_FORMAT_ANNOTATION;
        if (text[i] == '<' && (mem_contains(text + i, MIN(len - i, 4096), "<topology") ||
                               mem_contains(text + i, MIN(len - i, 64), "<?xml")))
                return TOPO_FORMAT_HWLOC_XML;
        if (mem_contains(text + i, len - i, "ROCm System Management Interface") ||
            mem_contains(text + i, len - i, "between two GPUs ="))
                return TOPO_FORMAT_ROCM;
        if (mem_contains(text + i, len - i, "GPU0"))
                return TOPO_FORMAT_NVSMI;
        return _TOPO_FORMAT_INVALID;
}

int
topo_parse_any(const char *text, size_t len, struct topo **ret, struct topo_error *err)
{
        switch (topo_detect_format(text, len)) {
        case TOPO_FORMAT_NVSMI:
                return topo_parse_nvsmi(text, len, ret, err);
        case TOPO_FORMAT_ROCM:
                return topo_parse_rocm(text, len, ret, err);
        case TOPO_FORMAT_ANNOTATION:
                return topo_parse_annotation(text, len, ret, err);
        case TOPO_FORMAT_HWLOC_XML:
                return topo__error(err, -EPROTONOSUPPORT, 0, 0,
                                   "hwloc XML is read by the topofit-topology-hwloc library.");
        default:
                return topo__error(err, -EINVAL, 1, 1,
                                   "Unknown format: not nvidia-smi topo -m, rocm-smi "
                                   "--showtopo, annotation JSON or hwloc XML.");
        }
}
