/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hwloc -> struct topo, the one file that speaks hwloc.  Loads an XML export (version 3
 * rewritten for Debian's hwloc 2) or the live machine keeping every PCI and OS device; GPUs
 * and NICs are PCI devices.  PCIe relations come from the tree: common non-host bridge: PIX
 * when each side is at most one bridge below it, else PXB; common host bridge: PHB; else
 * NODE within a NUMA node, SYS across.  NVLink from "NVLinkBandwidth": GPUs that both reach
 * NVSwitch ports (PCI devices of subtype "NVSwitch") are joined with the smaller port count,
 * since hwloc lists no switch-to-switch trunks and one node's switches form one fabric.
 * AMD XGMI from "XGMIBandwidth"/"XGMIHops".  The hwloc topology lives only inside a call.
 */
#include "topo-hwloc.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "str.h"
#include "topo-private.h"

#define HWLOC_NVLINK_BW_NAME "NVLinkBandwidth"
#define HWLOC_XGMI_BW_NAME "XGMIBandwidth"
#define HWLOC_XGMI_HOPS_NAME "XGMIHops"
#define HWLOC_MAX_PCI_DEPTH 64      /* bridges between a device and the root: far beyond real */
#define HWLOC_MAX_NVLINK_MATRICES 4 /* "NVLinkBandwidth" matrices read (hwloc makes one) */
#define HWLOC_MAX_NVLINK_OBJS (TOPO_MAX_GPUS * 4) /* GPUs, NVSwitches, CPUs in one matrix */

static void
topology_destroyp(hwloc_topology_t *t)
{
        if (*t)
                hwloc_topology_destroy(*t);
}

/* PCI classes that are GPUs when the vendor is NVIDIA (0x10de) or AMD (0x1002). */
static const uint16_t gpu_classes[] = {0x0300, 0x0302, 0x0380, 0x1200};
static const struct {
        uint16_t vendor_id;
        enum topo_vendor vendor;
} gpu_vendors[] = {
        {0x10de, TOPO_VENDOR_NVIDIA},
        {0x1002, TOPO_VENDOR_AMD},
};

/* NVLink bandwidth per link and direction as hwloc reports it (MB/s), by generation. */
static const unsigned nvlink_mbps[] = {
        [1] = 20000, [2] = 25000, [3] = 25000, [4] = 25000, [5] = 50000};

struct dev {
        hwloc_obj_t pci;
        enum topo_vendor vendor;
};

static int
pci_cmp(const void *a, const void *b)
{
        const struct hwloc_pcidev_attr_s *x = &(*(const struct dev *)a).pci->attr->pcidev;
        const struct hwloc_pcidev_attr_s *y = &(*(const struct dev *)b).pci->attr->pcidev;
        unsigned long kx = ((unsigned long)x->domain << 24) | ((unsigned long)x->bus << 16) |
                           ((unsigned long)x->dev << 8) | x->func;
        unsigned long ky = ((unsigned long)y->domain << 24) | ((unsigned long)y->bus << 16) |
                           ((unsigned long)y->dev << 8) | y->func;
        return kx < ky ? -1 : kx > ky;
}

static enum topo_vendor
gpu_vendor(hwloc_obj_t pci)
{
        const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;
        bool cls = false;

        if (pci->subtype && streq(pci->subtype, "NVSwitch"))
                return TOPO_VENDOR_UNKNOWN;
        for (size_t i = 0; i < ELEMENTSOF(gpu_classes); i++)
                cls = cls || a->class_id == gpu_classes[i];
        if (!cls)
                return TOPO_VENDOR_UNKNOWN;
        for (size_t i = 0; i < ELEMENTSOF(gpu_vendors); i++)
                if (a->vendor_id == gpu_vendors[i].vendor_id)
                        return gpu_vendors[i].vendor;
        return TOPO_VENDOR_UNKNOWN;
}

/* The NIC name of a PCI device: its OpenFabrics OS device, else its Network one. */
static const char *
nic_name(hwloc_obj_t pci)
{
        const char *net = NULL;

        for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
                if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name)
                        continue;
                if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
                        return c->name;
                if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && !net)
                        net = c->name;
        }
        return net;
}

static const char *
osdev_info(hwloc_obj_t pci, const char *name)
{
        for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
                const char *v =
                        c->type == HWLOC_OBJ_OS_DEVICE ? hwloc_obj_get_info_by_name(c, name) : NULL;
                if (v && *v)
                        return v;
        }
        return NULL;
}

static int
numa_of(hwloc_topology_t topo, hwloc_obj_t o)
{
        hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(topo, o);

        if (!a || !a->nodeset || hwloc_bitmap_weight(a->nodeset) != 1)
                return -1;
        int n = hwloc_bitmap_first(a->nodeset);
        return n >= 0 && n <= TOPO_MAX_NUMA_ID ? n : -1;
}

static bool
is_host_bridge(hwloc_obj_t o)
{
        return o->type == HWLOC_OBJ_BRIDGE &&
               o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

/* The nvidia-smi relation of two PCI devices, from the tree. */
static enum topo_link
pci_relation(hwloc_topology_t topo, hwloc_obj_t a, hwloc_obj_t b)
{
        hwloc_obj_t up[HWLOC_MAX_PCI_DEPTH];
        size_t n = 0;

        for (hwloc_obj_t o = a->parent; o && n < ELEMENTSOF(up); o = o->parent)
                up[n++] = o;
        unsigned db = 0;
        for (hwloc_obj_t o = b->parent; o; o = o->parent) {
                size_t da = SIZE_MAX;
                for (size_t i = 0; i < n; i++)
                        if (up[i] == o) {
                                da = i;
                                break;
                        }
                if (da == SIZE_MAX) {
                        if (o->type == HWLOC_OBJ_BRIDGE)
                                db++;
                        continue;
                }
                /* o is the closest common ancestor; da/db count bridges strictly below it. */
                unsigned da_bridges = 0;
                for (size_t i = 0; i < da; i++)
                        da_bridges += up[i]->type == HWLOC_OBJ_BRIDGE;
                if (o->type == HWLOC_OBJ_BRIDGE && !is_host_bridge(o))
                        return da_bridges <= 1 && db <= 1 ? TOPO_LINK_PIX : TOPO_LINK_PXB;
                if (is_host_bridge(o))
                        return TOPO_LINK_PHB;
                break;
        }
        int na = numa_of(topo, a), nb = numa_of(topo, b);
        return na >= 0 && na == nb ? TOPO_LINK_NODE : TOPO_LINK_SYS;
}

static hwloc_obj_t
pci_of(hwloc_obj_t o)
{
        while (o && o->type == HWLOC_OBJ_OS_DEVICE)
                o = o->parent;
        return o && o->type == HWLOC_OBJ_PCI_DEVICE ? o : NULL;
}

static unsigned
links_of(uint64_t mbps, unsigned gen)
{
        unsigned per = gen && gen < ELEMENTSOF(nvlink_mbps) ? nvlink_mbps[gen]
                                                            : (mbps % 25000 == 0   ? 25000
                                                               : mbps % 20000 == 0 ? 20000
                                                                                   : 25000);
        uint64_t l = (mbps + per / 2) / per;
        return (unsigned)MIN(MAX(l, (uint64_t)1), (uint64_t)TOPO_MAX_NVLINKS);
}

static int
apply_nvlink(hwloc_topology_t topo, struct topo *t, const struct dev *gpus, struct topo_error *err)
{
        struct hwloc_distances_s *dist[HWLOC_MAX_NVLINK_MATRICES];
        unsigned nr = ELEMENTSOF(dist);
        int r = 0;

        if (hwloc_distances_get_by_name(topo, HWLOC_NVLINK_BW_NAME, &nr, dist, 0) < 0)
                return 0; /* no distances support: PCIe only */
        for (unsigned d = 0; d < MIN(nr, (unsigned)ELEMENTSOF(dist)); d++) {
                struct hwloc_distances_s *m = dist[d];
                int gidx[HWLOC_MAX_NVLINK_OBJS];
                bool sw[HWLOC_MAX_NVLINK_OBJS];
                uint64_t to_switch[TOPO_MAX_GPUS] = {0};
                unsigned nb = m->nbobjs;

                if (nb > ELEMENTSOF(gidx) || r < 0) {
                        if (r == 0)
                                r = topo__error(
                                        err, -E2BIG, 0, 0,
                                        "NVLinkBandwidth matrix of %u objects, more than %u.", nb,
                                        HWLOC_MAX_NVLINK_OBJS);
                        hwloc_distances_release(topo, m);
                        continue;
                }

                for (unsigned i = 0; i < nb; i++) {
                        hwloc_obj_t p = pci_of(m->objs[i]);
                        gidx[i] = -1;
                        sw[i] = p && p->subtype && streq(p->subtype, "NVSwitch");
                        for (unsigned g = 0; p && g < t->n_gpus; g++)
                                if (gpus[g].pci == p)
                                        gidx[i] = (int)g;
                }
                for (unsigned i = 0; i < nb; i++)
                        for (unsigned j = 0; j < nb; j++) {
                                uint64_t bw = MAX(m->values[(size_t)i * m->nbobjs + j],
                                                  m->values[(size_t)j * m->nbobjs + i]);
                                if (bw == 0 || i == j || gidx[i] < 0)
                                        continue;
                                if (sw[j]) {
                                        to_switch[gidx[i]] +=
                                                m->values[(size_t)i * m->nbobjs + j]
                                                        ? m->values[(size_t)i * m->nbobjs + j]
                                                        : bw;
                                        continue;
                                }
                                if (gidx[j] < 0 || gidx[j] == gidx[i])
                                        continue;
                                struct topo_pair *p =
                                        topo_pair_mut(t, (unsigned)gidx[i], (unsigned)gidx[j]);
                                /* Both directions must get the same count: one generation. */
                                unsigned gi = t->gpus[gidx[i]].nvlink_gen,
                                         gj = t->gpus[gidx[j]].nvlink_gen;
                                p->link = TOPO_LINK_NVLINK;
                                p->links = (uint8_t)links_of(bw, gi == gj ? gi : 0);
                        }
                for (unsigned i = 0; i < t->n_gpus; i++)
                        for (unsigned j = 0; j < t->n_gpus; j++) {
                                if (i == j || !to_switch[i] || !to_switch[j])
                                        continue;
                                struct topo_pair *p = topo_pair_mut(t, i, j);
                                unsigned l = MIN(links_of(to_switch[i], t->gpus[i].nvlink_gen),
                                                 links_of(to_switch[j], t->gpus[j].nvlink_gen));
                                if (p->link != TOPO_LINK_NVLINK || p->links < l)
                                        p->link = TOPO_LINK_NVLINK, p->links = (uint8_t)l;
                                t->nvswitch = true;
                        }
                hwloc_distances_release(topo, m);
        }
        return r;
}

/* AMD: "XGMIBandwidth" marks the GPU pairs joined by Infinity Fabric, "XGMIHops" gives the
 * hop count rocm-smi also prints.  The link count is not known (0), as with rocm-smi. */
static int
apply_xgmi(hwloc_topology_t topo, struct topo *t, const struct dev *gpus, const char *name,
           struct topo_error *err)
{
        struct hwloc_distances_s *dist[HWLOC_MAX_NVLINK_MATRICES];
        unsigned nr = ELEMENTSOF(dist);
        bool hops = streq(name, HWLOC_XGMI_HOPS_NAME);
        int r = 0;

        if (hwloc_distances_get_by_name(topo, name, &nr, dist, 0) < 0)
                return 0;
        for (unsigned d = 0; d < MIN(nr, (unsigned)ELEMENTSOF(dist)); d++) {
                struct hwloc_distances_s *m = dist[d];
                int gidx[HWLOC_MAX_NVLINK_OBJS];
                unsigned nb = m->nbobjs;

                if (nb > ELEMENTSOF(gidx) || r < 0) {
                        if (r == 0)
                                r = topo__error(err, -E2BIG, 0, 0,
                                                "%s matrix of %u objects, more than %u.", name, nb,
                                                HWLOC_MAX_NVLINK_OBJS);
                        hwloc_distances_release(topo, m);
                        continue;
                }
                for (unsigned i = 0; i < nb; i++) {
                        hwloc_obj_t p = pci_of(m->objs[i]);
                        gidx[i] = -1;
                        for (unsigned g = 0; p && g < t->n_gpus; g++)
                                if (gpus[g].pci == p)
                                        gidx[i] = (int)g;
                }
                for (unsigned i = 0; i < nb; i++)
                        for (unsigned j = 0; j < nb; j++) {
                                uint64_t v = MAX(m->values[(size_t)i * nb + j],
                                                 m->values[(size_t)j * nb + i]);
                                if (v == 0 || gidx[i] < 0 || gidx[j] < 0 || gidx[i] == gidx[j])
                                        continue;
                                struct topo_pair *p =
                                        topo_pair_mut(t, (unsigned)gidx[i], (unsigned)gidx[j]);
                                if (!hops)
                                        p->link = TOPO_LINK_XGMI;
                                else if (p->link == TOPO_LINK_XGMI)
                                        p->hops = (uint8_t)MIN(v, (uint64_t)UINT8_MAX);
                        }
                hwloc_distances_release(topo, m);
        }
        return r;
}

static enum topo_cpu_link
cpu_link_of(hwloc_topology_t topo)
{
        static const struct {
                const char *info, *value;
                enum topo_cpu_link link;
        } cpu_links[] = {
                {"CPUVendor", "GenuineIntel", TOPO_CPU_LINK_INTEL_UPI},
                {"CPUVendor", "AuthenticAMD", TOPO_CPU_LINK_AMD_IF},
                {"PlatformName", "PowerNV", TOPO_CPU_LINK_POWER_XBUS},
        };
        hwloc_obj_t root = hwloc_get_root_obj(topo);
        hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);

        for (size_t i = 0; i < ELEMENTSOF(cpu_links); i++) {
                const char *v = hwloc_obj_get_info_by_name(root, cpu_links[i].info);
                if (!v && pkg)
                        v = hwloc_obj_get_info_by_name(pkg, cpu_links[i].info);
                if (v && streq(v, cpu_links[i].value))
                        return cpu_links[i].link;
        }
        return TOPO_CPU_LINK_UNKNOWN;
}

static int
build(hwloc_topology_t topo, struct topo **ret, struct topo_error *err)
{
        CLEANUP(topo_unrefp) struct topo *t = NULL;
        struct dev gpus[TOPO_MAX_GPUS], nics[TOPO_MAX_NICS];
        unsigned n_gpus = 0, n_nics = 0;
        enum topo_vendor vendor = TOPO_VENDOR_UNKNOWN;

        for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, NULL); o;
             o = hwloc_get_next_pcidev(topo, o)) {
                enum topo_vendor v = gpu_vendor(o);
                if (v != TOPO_VENDOR_UNKNOWN) {
                        if (n_gpus == TOPO_MAX_GPUS)
                                return topo__error(err, -E2BIG, 0, 0, "More than %u GPUs.",
                                                   TOPO_MAX_GPUS);
                        gpus[n_gpus++] = (struct dev){o, v};
                        vendor = n_gpus == 1 || vendor == v ? v : TOPO_VENDOR_UNKNOWN;
                } else if (nic_name(o)) {
                        if (n_nics == TOPO_MAX_NICS)
                                return topo__error(err, -E2BIG, 0, 0, "More than %u NICs.",
                                                   TOPO_MAX_NICS);
                        nics[n_nics++] = (struct dev){o, TOPO_VENDOR_UNKNOWN};
                }
        }
        if (n_gpus == 0)
                return topo__error(err, -ENODEV, 0, 0, "hwloc found no NVIDIA or AMD GPU.");
        qsort(gpus, n_gpus, sizeof(gpus[0]), pci_cmp);
        qsort(nics, n_nics, sizeof(nics[0]), pci_cmp);

        t = topo_new(n_gpus, n_nics);
        if (!t)
                return -ENOMEM;
        t->vendor = (uint8_t)vendor;
        t->cpu_link = (uint8_t)cpu_link_of(topo);
        for (unsigned i = 0; i < n_gpus; i++) {
                struct topo_gpu *g = &t->gpus[i];
                const struct hwloc_pcidev_attr_s *a = &gpus[i].pci->attr->pcidev;
                const char *model = osdev_info(gpus[i].pci, "GPUModel");
                const char *uuid = osdev_info(gpus[i].pci, "NVIDIAUUID");
                hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, gpus[i].pci);

                if (!uuid)
                        uuid = osdev_info(gpus[i].pci, "AMDUUID");
                if (model && topo__id_ok(model, strlen(model)))
                        (void)str_copy(g->model, TOPO_ID_MAX, model, strlen(model));
                if (uuid && topo__id_ok(uuid, strlen(uuid)))
                        (void)str_copy(g->uuid, TOPO_ID_MAX, uuid, strlen(uuid));
                snprintf(g->pci_bus_id, sizeof(g->pci_bus_id), "%08x:%02x:%02x.%x",
                         (unsigned)a->domain, a->bus, a->dev, a->func);
                if (anc && anc->cpuset) {
                        char cpus[TOPO_ID_MAX];
                        /* A list too long for the field is left out rather than cut. */
                        if (hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), anc->cpuset) <
                            (int)sizeof(cpus))
                                memcpy(g->cpu_affinity, cpus, sizeof(cpus));
                }
                g->numa = numa_of(topo, gpus[i].pci);
                g->nvlink_gen = (uint8_t)topo__nvlink_gen_from_model(g->model);
        }
        for (unsigned k = 0; k < n_nics; k++) {
                const char *name = nic_name(nics[k].pci);
                if (topo__id_ok(name, strlen(name)))
                        (void)str_copy(t->nics[k].name, TOPO_ID_MAX, name, strlen(name));
                t->nics[k].numa = numa_of(topo, nics[k].pci);
                for (unsigned j = 0; j < n_gpus; j++)
                        t->nic_links[(size_t)k * n_gpus + j] =
                                (uint8_t)pci_relation(topo, nics[k].pci, gpus[j].pci);
        }
        for (unsigned i = 0; i < n_gpus; i++)
                for (unsigned j = 0; j < n_gpus; j++)
                        if (i != j)
                                topo_pair_mut(t, i, j)->link =
                                        (uint8_t)pci_relation(topo, gpus[i].pci, gpus[j].pci);
        int r = apply_nvlink(topo, t, gpus, err);
        if (r >= 0)
                r = apply_xgmi(topo, t, gpus, HWLOC_XGMI_BW_NAME, err);
        if (r >= 0)
                r = apply_xgmi(topo, t, gpus, HWLOC_XGMI_HOPS_NAME, err);
        if (r < 0)
                return r;
        topo_finish(t);
        *ret = TAKE_PTR(t);
        return 0;
}

/* hwloc 3 exports XML "version 3.0", which the hwloc 2 of Debian bookworm refuses.  The only
 * change that matters to us is the OS device type, an enum in version 2 and a bitmask in
 * version 3; everything else we read is the same.  So a version 3 export is rewritten into a
 * version 2 one: the version attribute and each osdev_type, most specific type first. */
static const struct {
        unsigned long v3_bit;
        unsigned v2_type;
} osdev_v3_to_v2[] = {
        {1ul << 5, 3}, /* OpenFabrics */
        {1ul << 4, 2}, /* Network */
        {1ul << 2, 1}, /* GPU (NVML, RSMI, DRM) */
        {1ul << 3, 5}, /* CoProc (CUDA, OpenCL) */
        {1ul << 6, 4}, /* DMA */
        {1ul << 0, 0}, /* Storage */
        {1ul << 1, 0}, /* Memory (v2: Block) */
};

/* hwloc 2.9's XML readers trust their input (test/fuzz/README.md lists what fuzz-hwloc
 * found): its built-in reader dereferences NULL on a tag cut short, hwloc_topology_load()
 * on an object with some but not all of cpuset, complete_cpuset, nodeset and
 * complete_nodeset, a PU without os_index costs a 512 MiB bitmap.  So the XML is checked
 * here first, strictly and in one bounded pass: well-formed (balanced, matching end tags,
 * double-quoted attributes given once, known entities only, no internal DTD subset,
 * nesting at most XML_MAX_DEPTH), and per <object>: a type from xml_object_types, the four
 * sets all or none and each a bitmap, an os_index (PU and NUMANode must have one) at most
 * XML_MAX_OS_INDEX.  Real exports pass; hwloc sees nothing else. */
#define XML_MAX_DEPTH 128
#define XML_MAX_ATTRS 32 /* attributes of one tag; hwloc writes at most a dozen */
/* hwloc sets bit os_index of a PU's cpuset or a NUMA node's nodeset: os_index 4294967295
 * (also what a missing one means) is a 512 MiB bitmap.  Linux: at most 8192 CPUs. */
#define XML_MAX_OS_INDEX 65535
/* A distance matrix's objects (<distances2 nbobjs=...>): hwloc allocates nbobjs^2 values
 * before reading them, so nbobjs="61111..." took over 4 GiB (fuzzing, 2026-11-24).  Real
 * matrices name NUMA nodes, GPUs and NICs: dozens. */
#define XML_MAX_DIST_OBJS 1024

/* The object types hwloc 2 exports (hwloc_obj_type_string()), and hwloc 1's older names.
 * hwloc itself also takes abbreviations ("NU" is a NUMANode), which real exports never
 * use: only these exact names pass. */
static const char *const xml_object_types[] = {
        "Machine", "Package", "Die", "Core", "PU", "NUMANode", "Group", "MemCache", "Misc",
        "L1Cache", "L2Cache", "L3Cache", "L4Cache", "L5Cache", "L1iCache", "L2iCache",
        "L3iCache", "Bridge", "PCIDev", "OSDev", "System", "Socket", "Cache", "Node",
};

enum { XML_CPUSET, XML_COMPLETE_CPUSET, XML_NODESET, XML_COMPLETE_NODESET, _XML_SET_MAX };
static const char *const xml_set_names[_XML_SET_MAX] = {
        [XML_CPUSET] = "cpuset",
        [XML_COMPLETE_CPUSET] = "complete_cpuset",
        [XML_NODESET] = "nodeset",
        [XML_COMPLETE_NODESET] = "complete_nodeset",
};

static bool
xml_is(const char *s, size_t len, const char *word)
{
        return len == strlen(word) && memcmp(s, word, len) == 0;
}

static bool
xml_is_blank(char c)
{
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Names in hwloc's own alphabet, narrower than XML's: its built-in reader takes element
 * names of [a-z0-9_] and attribute names of [a-z_] only, and on any other name gives up on the
 * object half-built (hwloc 2.9 then dereferences a NULL set in hwloc_bitmap_or: fuzzing,
 * 2026-11-24, with an attribute named "a1").  Every export hwloc writes fits. */
static bool
xml_is_name_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

static bool
xml_is_attr_name_char(char c)
{
        return (c >= 'a' && c <= 'z') || c == '_';
}

/* hwloc's bitmap syntax, strictly (its parser asserts on a leading comma): comma-separated
 * 32-bit words of 1-8 hex digits with an optional 0x, the first and last not empty, the
 * first possibly "0xf...f" (infinitely many set bits). */
static bool
xml_bitmap_ok(const char *v, size_t n)
{
        const char *end = v + n;
        bool first = true;

        for (;;) {
                const char *w = v, *comma = memchr(v, ',', (size_t)(end - v));
                size_t len = (size_t)((comma ? comma : end) - w);

                if (first && xml_is(w, len, "0xf...f")) {
                        /* the infinite prefix */
                } else if (len > 0 || first || !comma) {
                        if (len >= 2 && w[0] == '0' && w[1] == 'x')
                                w += 2, len -= 2;
                        if (len == 0 || len > 8)
                                return false;
                        for (size_t i = 0; i < len; i++)
                                if (!strchr("0123456789abcdefABCDEF", w[i]))
                                        return false;
                }
                if (!comma)
                        return true;
                v = comma + 1;
                first = false;
        }
}

/* Whether an attribute is a bitmap hwloc parses with the same asserting reader: beside the
 * four sets of an <object> (checked with them), its allowed_cpuset and allowed_nodeset, a
 * <cpukind>'s cpuset, a memory attribute's initiator_cpuset: any name ending in cpuset or
 * nodeset, on any element. */
static bool
xml_attr_is_bitmap(const char *attr, size_t len)
{
        return (len >= 6 && memcmp(attr + len - 6, "cpuset", 6) == 0) ||
               (len >= 7 && memcmp(attr + len - 7, "nodeset", 7) == 0);
}

/* The counts hwloc allocates by before it reads what they count: a distance matrix's nbobjs
 * (nbobjs^2 values) at most XML_MAX_DIST_OBJS, and the length of an <indexes> or
 * <u64values> text at most the document's. */
static int
xml_count_attr(const char *xml, const char *end, const char *attr, size_t attr_len,
               const char *value, size_t n, struct topo_error *err)
{
        int v;

        if (xml_is(attr, attr_len, "nbobjs") && str_to_int(value, n, 1, XML_MAX_DIST_OBJS, &v) < 0)
                return topo__error(err, -EINVAL, 0, 0,
                                   "hwloc XML distances with nbobjs not in 1..%u.",
                                   XML_MAX_DIST_OBJS);
        if (xml_is(attr, attr_len, "length") &&
            (str_to_int(value, n, 0, INT_MAX, &v) < 0 || (size_t)v > (size_t)(end - xml)))
                return topo__error(err, -EINVAL, 0, 0,
                                   "hwloc XML with a length longer than the document.");
        return 0;
}

/* Character data or an attribute value: '&' only as a known or numeric entity. */
static bool
xml_text_ok(const char *v, size_t n)
{
        static const char *const entities[] = { "lt;", "gt;", "amp;", "quot;", "apos;" };

        for (size_t i = 0; i < n; i++) {
                bool ok = false;

                if (v[i] == '<')
                        return false;
                if (v[i] != '&')
                        continue;
                for (size_t k = 0; k < ELEMENTSOF(entities) && !ok; k++)
                        ok = n - i - 1 >= strlen(entities[k]) &&
                             memcmp(v + i + 1, entities[k], strlen(entities[k])) == 0;
                if (!ok && i + 2 < n && v[i + 1] == '#') {
                        size_t j = i + 2;

                        if (v[j] == 'x')
                                j++;
                        while (j < n && j - i < 10 && strchr("0123456789abcdefABCDEF", v[j]))
                                j++;
                        ok = j < n && v[j] == ';' && j > i + 2 + (v[i + 2] == 'x');
                }
                if (!ok)
                        return false;
        }
        return true;
}

static int
xml_malformed(struct topo_error *err, const char *xml, const char *p, const char *what)
{
        unsigned line = 1;

        for (const char *c = xml; c < p; c++)
                line += *c == '\n';
        return topo__error(err, -EINVAL, line, 0, "Malformed hwloc XML: %s.", what);
}

/* What an <object> tag's attributes said so far. */
struct xml_object_attrs {
        bool seen[_XML_SET_MAX]; /* cpuset, complete_cpuset, nodeset, complete_nodeset */
        const char *set[_XML_SET_MAX]; /* their values, set[i][0..set_len[i]) */
        size_t set_len[_XML_SET_MAX];
        bool has_os_index, needs_os_index, has_type;
};

/* One attribute of an <object>: os_index in range, a known type, which sets it has. */
static int
xml_object_attr(const char *attr, size_t attr_len, const char *value, size_t n,
                struct xml_object_attrs *o, struct topo_error *err)
{
        if (xml_is(attr, attr_len, "os_index")) {
                int v;

                if (str_to_int(value, n, 0, XML_MAX_OS_INDEX, &v) < 0)
                        return topo__error(err, -EINVAL, 0, 0,
                                           "hwloc XML object with os_index not in 0..%u.",
                                           XML_MAX_OS_INDEX);
                o->has_os_index = true;
        }
        if (xml_is(attr, attr_len, "type")) {
                size_t k = 0;

                while (k < ELEMENTSOF(xml_object_types) && !xml_is(value, n, xml_object_types[k]))
                        k++;
                if (k == ELEMENTSOF(xml_object_types))
                        return topo__error(err, -EINVAL, 0, 0,
                                           "hwloc XML object of unknown type \"%.*s\".",
                                           (int)MIN(n, (size_t)32), value);
                o->needs_os_index = xml_is(value, n, "PU") || xml_is(value, n, "NUMANode") ||
                                    xml_is(value, n, "Node");
                o->has_type = true;
        }
        for (size_t i = 0; i < _XML_SET_MAX; i++) {
                if (!xml_is(attr, attr_len, xml_set_names[i]))
                        continue;
                /* Its syntax is checked with every other bitmap (xml_attr_is_bitmap). */
                o->seen[i] = true;
                o->set[i] = value;
                o->set_len[i] = n;
        }
        return 0;
}

/* Reads a bitmap that passed xml_bitmap_ok() a 32-bit word at a time from the right (word 0
 * first); past its words, all ones after a "0xf...f" prefix, else 0. */
struct xml_bitmap_cursor {
        const char *v;
        size_t pos;    /* end of the next word */
        bool left;     /* words remain */
        bool infinite; /* the "0xf...f" prefix */
};

static void
xml_bitmap_cursor_init(struct xml_bitmap_cursor *c, const char *v, size_t n)
{
        *c = (struct xml_bitmap_cursor){ .v = v, .pos = n, .left = true,
                                         .infinite = n >= 7 && memcmp(v, "0xf...f", 7) == 0 };
}

static uint32_t
xml_bitmap_next_word(struct xml_bitmap_cursor *c)
{
        size_t start = c->pos, len;
        const char *w;
        uint32_t x = 0;

        if (!c->left)
                return c->infinite ? UINT32_MAX : 0;
        while (start > 0 && c->v[start - 1] != ',')
                start--;
        w = c->v + start;
        len = c->pos - start;
        c->left = start > 0;
        c->pos = start ? start - 1 : 0;
        if (len == 7 && memcmp(w, "0xf...f", 7) == 0) {
                c->left = false;
                return UINT32_MAX;
        }
        if (len >= 2 && w[0] == '0' && w[1] == 'x')
                w += 2, len -= 2;
        for (size_t i = 0; i < len; i++)
                x = x << 4 | (uint32_t)(w[i] <= '9' ? w[i] - '0' : (w[i] | 0x20) - 'a' + 10);
        return x;
}

/* Whether bitmap a[0..na) is within b[0..nb). */
static bool
xml_bitmap_within(const char *a, size_t na, const char *b, size_t nb)
{
        struct xml_bitmap_cursor ca, cb;

        xml_bitmap_cursor_init(&ca, a, na);
        xml_bitmap_cursor_init(&cb, b, nb);
        while (ca.left || cb.left)
                if (xml_bitmap_next_word(&ca) & ~xml_bitmap_next_word(&cb))
                        return false;
        return !ca.infinite || cb.infinite;
}

/* An <object> once all its attributes are read: a type, os_index where hwloc needs one,
 * its sets all or none, and each set within its complete one (hwloc 2.9 dereferenced NULL
 * in hwloc_bitmap_or on a cpuset outside its complete_cpuset: fuzzing, 2026-11-24). */
static int
xml_object_check(const struct xml_object_attrs *o, struct topo_error *err)
{
        if (!o->has_type)
                return topo__error(err, -EINVAL, 0, 0, "hwloc XML object without a type.");
        if (o->needs_os_index && !o->has_os_index)
                return topo__error(err, -EINVAL, 0, 0,
                                   "hwloc XML PU or NUMANode without os_index.");
        /* hwloc ORs these into the parent's: an object of the CPU tree carries all four
         * (real exports do), an I/O object none. */
        for (size_t i = 0; i < _XML_SET_MAX; i++)
                for (size_t j = 0; j < _XML_SET_MAX; j++)
                        if (o->seen[i] && !o->seen[j])
                                return topo__error(err, -EINVAL, 0, 0,
                                                   "hwloc XML object has %s without %s.",
                                                   xml_set_names[i], xml_set_names[j]);
        if (o->seen[XML_CPUSET] &&
            (!xml_bitmap_within(o->set[XML_CPUSET], o->set_len[XML_CPUSET],
                                o->set[XML_COMPLETE_CPUSET], o->set_len[XML_COMPLETE_CPUSET]) ||
             !xml_bitmap_within(o->set[XML_NODESET], o->set_len[XML_NODESET],
                                o->set[XML_COMPLETE_NODESET], o->set_len[XML_COMPLETE_NODESET])))
                return topo__error(err, -EINVAL, 0, 0,
                                   "hwloc XML object with a set outside its complete set.");
        return 0;
}

/* A start tag at p (just past '<'): its name, attributes and end.  *ret_empty for "/>". */
static int
xml_check_start_tag(const char *xml, const char *p, const char *end, const char **ret_name,
                    size_t *ret_name_len, bool *ret_empty, const char **ret_end,
                    struct topo_error *err)
{
        struct xml_object_attrs obj = { 0 };
        const char *attrs[XML_MAX_ATTRS];
        size_t attr_lens[XML_MAX_ATTRS], n_attrs = 0;
        const char *name = p;
        size_t name_len;
        bool object;
        int r;

        while (p < end && xml_is_name_char(*p))
                p++;
        if (p == name || p >= end || (!xml_is_blank(*p) && *p != '>' && *p != '/'))
                return xml_malformed(err, xml, p, "a bad element name");
        name_len = (size_t)(p - name);
        object = xml_is(name, name_len, "object");
        for (;;) {
                const char *attr, *value, *q;
                size_t attr_len;
                bool blank = false;

                while (p < end && xml_is_blank(*p))
                        p++, blank = true;
                if (p >= end)
                        return xml_malformed(err, xml, p, "a tag that is not closed");
                if (*p == '>' || (*p == '/' && p + 1 < end && p[1] == '>'))
                        break;
                attr = p;
                while (p < end && xml_is_attr_name_char(*p))
                        p++;
                attr_len = (size_t)(p - attr);
                if (!blank || attr_len == 0 || p + 1 >= end || p[0] != '=' || p[1] != '"')
                        return xml_malformed(err, xml, p,
                                             "an attribute that is not name=\"value\"");
                value = p + 2;
                q = memchr(value, '"', (size_t)(end - value));
                if (!q || !xml_text_ok(value, (size_t)(q - value)))
                        return xml_malformed(err, xml, p, "a bad attribute value");
                p = q + 1;
                /* Well-formed XML names an attribute once (hwloc would read either). */
                for (size_t k = 0; k < n_attrs; k++)
                        if (attr_lens[k] == attr_len && memcmp(attr, attrs[k], attr_len) == 0)
                                return xml_malformed(err, xml, attr, "an attribute given twice");
                if (n_attrs >= XML_MAX_ATTRS)
                        return xml_malformed(err, xml, attr, "too many attributes");
                attrs[n_attrs] = attr;
                attr_lens[n_attrs++] = attr_len;
                if (object && (r = xml_object_attr(attr, attr_len, value, (size_t)(q - value),
                                                   &obj, err)) < 0)
                        return r;
                if (xml_attr_is_bitmap(attr, attr_len) && !xml_bitmap_ok(value, (size_t)(q - value)))
                        return topo__error(err, -EINVAL, 0, 0, "hwloc XML with a malformed %.*s.",
                                           (int)MIN(attr_len, (size_t)32), attr);
                if ((r = xml_count_attr(xml, end, attr, attr_len, value, (size_t)(q - value),
                                        err)) < 0)
                        return r;
        }
        if (object && (r = xml_object_check(&obj, err)) < 0)
                return r;
        *ret_name = name;
        *ret_name_len = name_len;
        *ret_empty = *p == '/';
        *ret_end = p + (*p == '/' ? 2 : 1);
        return 0;
}

/* The markup that is not an element: <?...?>, <!--...-->, <!DOCTYPE ...> (no subset). */
static const struct {
        const char *open, *close;
} xml_skips[] = {
        { "<?", "?>" },
        { "<!--", "-->" },
        { "<!", ">" },
};

static int
xml_check(const char *xml, size_t len, struct topo_error *err)
{
        const char *stack[XML_MAX_DEPTH];
        size_t stack_len[XML_MAX_DEPTH];
        const char *end = xml + len, *p = xml;
        unsigned depth = 0, elements = 0;

        while (p < end) {
                const char *lt = memchr(p, '<', (size_t)(end - p));
                size_t k;
                int r;

                if (!xml_text_ok(p, (size_t)((lt ? lt : end) - p)))
                        return xml_malformed(err, xml, p, "a bad entity in text");
                if (!lt)
                        break;
                if (depth == 0 && elements > 0)
                        return xml_malformed(err, xml, lt, "markup after the root element");
                p = lt;
                for (k = 0; k < ELEMENTSOF(xml_skips); k++)
                        if ((size_t)(end - p) >= strlen(xml_skips[k].open) &&
                            memcmp(p, xml_skips[k].open, strlen(xml_skips[k].open)) == 0)
                                break;
                if (k < ELEMENTSOF(xml_skips)) {
                        const char *body = p + strlen(xml_skips[k].open);
                        const char *c = memmem(body, (size_t)(end - body), xml_skips[k].close,
                                               strlen(xml_skips[k].close));

                        /* No markup inside: hwloc's reader ends these at the first '>'. */
                        if (!c || memchr(body, '<', (size_t)(c - body)) ||
                            (k != 1 && memchr(body, '>', (size_t)(c - body))) ||
                            (k == 2 && memchr(body, '[', (size_t)(c - body))) ||
                            (k != 1 && depth > 0))
                                return xml_malformed(err, xml, p, "a bad declaration");
                        p = c + strlen(xml_skips[k].close);
                } else if (p + 1 < end && p[1] == '/') {
                        const char *name = p + 2, *q = name;

                        while (q < end && xml_is_name_char(*q))
                                q++;
                        if (depth == 0 || (size_t)(q - name) != stack_len[depth - 1] ||
                            memcmp(name, stack[depth - 1], stack_len[depth - 1]) != 0)
                                return xml_malformed(err, xml, p, "an end tag that does not match");
                        while (q < end && xml_is_blank(*q))
                                q++;
                        if (q >= end || *q != '>')
                                return xml_malformed(err, xml, p, "a tag that is not closed");
                        depth--;
                        p = q + 1;
                } else {
                        const char *name = NULL;
                        size_t name_len = 0;
                        bool empty = false;

                        r = xml_check_start_tag(xml, p + 1, end, &name, &name_len, &empty, &p, err);
                        if (r < 0)
                                return r;
                        elements++;
                        if (empty)
                                continue;
                        if (depth >= XML_MAX_DEPTH)
                                return xml_malformed(err, xml, p, "nesting too deep");
                        stack[depth] = name;
                        stack_len[depth++] = name_len;
                }
        }
        if (elements == 0 || depth > 0)
                return xml_malformed(err, xml, p, depth ? "an element that is not closed" :
                                                          "no element");
        return 0;
}

static int
xml_v3_to_v2(char *xml, size_t len, struct topo_error *err)
{
        static const char ver[] = "<topology version=\"", attr[] = "osdev_type=\"";
        char *v = memmem(xml, len, ver, strlen(ver));

        if (!v)
                return 0;
        v += strlen(ver);
        if (v >= xml + len || *v < '0' || *v > '9')
                return 0;
        if (*v == '2' || *v == '1')
                return 0;
        if (*v != '3' || (v + 1 < xml + len && v[1] >= '0' && v[1] <= '9')) {
                const char *q = memchr(v, '"', (size_t)(xml + len - v));
                int vl = q && q - v < 16 ? (int)(q - v) : 1;
                return topo__error(err, -EPROTONOSUPPORT, 0, 0,
                                   "hwloc XML version %.*s is not supported.", vl, v);
        }
        *v = '2';
        /* One pass, in place: each value shrinks to one digit, so the writer w never
         * overtakes the reader r. */
        char *w = xml, *r = xml, *end = xml + len;
        for (;;) {
                char *p = memmem(r, (size_t)(end - r), attr, strlen(attr));
                size_t keep = p ? (size_t)(p - r) + strlen(attr) : (size_t)(end - r);

                memmove(w, r, keep);
                w += keep;
                r += keep;
                if (!p)
                        break;
                char *e = r;
                unsigned long bits = 0;
                while (e < end && *e >= '0' && *e <= '9' && e - r < 6)
                        bits = bits * 10 + (unsigned long)(*e++ - '0');
                if (e == r || e >= end || *e != '"')
                        return topo__error(err, -EINVAL, 0, 0,
                                           "Malformed osdev_type in hwloc XML.");
                unsigned v2 = 0;
                for (size_t k = 0; k < ELEMENTSOF(osdev_v3_to_v2); k++)
                        if (bits & osdev_v3_to_v2[k].v3_bit) {
                                v2 = osdev_v3_to_v2[k].v2_type;
                                break;
                        }
                *w++ = (char)('0' + v2);
                r = e;
        }
        *w = '\0';
        return 0;
}

static int
prepare(hwloc_topology_t *ret, struct topo_error *err)
{
        hwloc_topology_t topo = NULL;

        if (hwloc_topology_init(&topo) < 0)
                return topo__error(err, -ENOMEM, 0, 0, "hwloc_topology_init failed.");
        /* Keep every PCI device, bridge and OS device: GPUs, NICs and the tree between. */
        if (hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL) < 0) {
                hwloc_topology_destroy(topo);
                return topo__error(err, -EINVAL, 0, 0, "hwloc refused the I/O type filter.");
        }
        *ret = topo;
        return 0;
}

int
topo_hwloc_load_xml(const char *xml, size_t len, struct topo **ret, struct topo_error *err)
{
        CLEANUP(topology_destroyp) hwloc_topology_t topo = NULL;
        CLEANUP(freep) char *copy = NULL;
        int r;

        if (!xml || len == 0)
                return topo__error(err, -EINVAL, 0, 0, "Empty hwloc XML.");
        if (len > TOPO_MAX_XML_BYTES)
                return topo__error(err, -E2BIG, 0, 0, "hwloc XML larger than %u bytes.",
                                   TOPO_MAX_XML_BYTES);
        if (memchr(xml, '\0', len))
                return topo__error(err, -EINVAL, 0, 0, "NUL byte in the hwloc XML.");
        /* hwloc wants the terminating NUL inside the buffer it is given. */
        copy = malloc(len + 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, xml, len);
        copy[len] = '\0';
        r = xml_v3_to_v2(copy, len, err);
        if (r < 0)
                return r;
        len = strlen(copy);
        r = xml_check(copy, len, err);
        if (r < 0)
                return r;
        r = prepare(&topo, err);
        if (r < 0)
                return r;
        if (hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_IMPORT_SUPPORT) < 0 ||
            hwloc_topology_set_xmlbuffer(topo, copy, (int)len + 1) < 0)
                return topo__error(err, -EINVAL, 0, 0, "hwloc refused the XML buffer.");
        if (hwloc_topology_load(topo) < 0)
                return topo__error(err, -EINVAL, 0, 0, "hwloc could not load the XML.");
        return build(topo, ret, err);
}

int
topo_hwloc_load_live(struct topo **ret, struct topo_error *err)
{
        CLEANUP(topology_destroyp) hwloc_topology_t topo = NULL;
        int r;

        r = prepare(&topo, err);
        if (r < 0)
                return r;
        if (hwloc_topology_load(topo) < 0)
                return topo__error(err, -EIO, 0, 0, "hwloc could not discover this machine.");
        return build(topo, ret, err);
}
