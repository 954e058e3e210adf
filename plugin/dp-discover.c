/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Discovery of this node's GPU topology, in order: an operator's static file
 * (--topology-file: annotation JSON, `nvidia-smi topo -m` or rocm-smi text, hwloc XML),
 * NVML loaded with dlopen() at run time (so the binary runs without the driver), the text of
 * `nvidia-smi topo -m` (UUIDs from `nvidia-smi --query-gpu`), and hwloc.  Each attempt adds
 * a line to the report, which `topofit-node discover` prints.  Child processes get argv
 * (never a shell), a byte cap and a time limit.  Returns a new topology the caller owns.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/buf.h"
#include "../common/file.h"
#include "../common/str.h"
#include "dp.h"
#if __has_include("../topology/hwloc/topo-hwloc.h")
#include "../topology/hwloc/topo-hwloc.h"
#define DP_HAVE_HWLOC 1
#else
#define DP_HAVE_HWLOC 0
#endif

#define DP_EXEC_TIMEOUT_MS 15000     /* one nvidia-smi run */
#define DP_NVML_DEFAULT "libnvidia-ml.so.1"
#define DP_NVML_MAX_LINKS 18         /* NVML_NVLINK_MAX_LINKS */
#define DP_NVML_STRING 96            /* UUID / name buffers passed to NVML */

extern char **environ;

static const char *const source_names[_DP_SOURCE_MAX] = {
        [DP_SOURCE_FILE] = "file",
        [DP_SOURCE_NVML] = "nvml",
        [DP_SOURCE_NVSMI] = "nvidia-smi",
        [DP_SOURCE_HWLOC] = "hwloc",
};

DEFINE_STRING_TABLE_TO_STRING(dp_source, enum dp_source, source_names)

static void
dp__note(struct dp_discover_report *rep, const char *fmt, ...)
{
        size_t at = strlen(rep->notes);
        va_list ap;

        if (at + 2 >= sizeof(rep->notes))
                return;
        va_start(ap, fmt);
        vsnprintf(rep->notes + at, sizeof(rep->notes) - at - 1, fmt, ap);
        va_end(ap);
        at = strlen(rep->notes);
        rep->notes[at] = '\n';
        rep->notes[at + 1] = '\0';
}

void
dp_device_id(const struct topo *t, unsigned i, char buf[static TOPO_ID_MAX])
{
        const struct topo_gpu *g = &t->gpus[i];

        if (g->uuid[0])
                snprintf(buf, TOPO_ID_MAX, "%s", g->uuid);
        else if (g->pci_bus_id[0])
                snprintf(buf, TOPO_ID_MAX, "%s", g->pci_bus_id);
        else
                snprintf(buf, TOPO_ID_MAX, "gpu%u", i);
}

/* --- files and child processes -------------------------------------------------------- */

static int64_t
dp__now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs argv (PATH searched), captures stdout up to cap bytes.  -ENOENT when the program is
 * missing, -ETIMEDOUT, -E2BIG, -EIO for a non-zero exit. */
static int
dp__run_capture(char *const argv[], size_t cap, char **ret, size_t *ret_len)
{
        posix_spawn_file_actions_t fa;
        int pipefd[2], devnull, status = 0, r = 0;
        pid_t pid;
        struct buf b;
        int64_t end = dp__now_ms() + DP_EXEC_TIMEOUT_MS;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
        if (devnull >= 0) {
                posix_spawn_file_actions_adddup2(&fa, devnull, STDIN_FILENO);
                posix_spawn_file_actions_adddup2(&fa, devnull, STDERR_FILENO);
        }
        r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(pipefd[1]);
        if (devnull >= 0)
                close(devnull);
        if (r != 0) {
                close(pipefd[0]);
                return -r;
        }
        buf_init(&b, cap);
        for (;;) {
                char chunk[16384];
                struct pollfd pfd = { .fd = pipefd[0], .events = POLLIN };
                int64_t left = end - dp__now_ms();
                ssize_t n;

                if (left <= 0) {
                        r = -ETIMEDOUT;
                        break;
                }
                if (poll(&pfd, 1, (int)left) <= 0)
                        continue;
                n = read(pipefd[0], chunk, sizeof(chunk));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                r = buf_append(&b, chunk, (size_t)n);
                if (r < 0)
                        break;
        }
        close(pipefd[0]);
        if (r < 0)
                kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (r == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
                r = WIFEXITED(status) && WEXITSTATUS(status) == 127 ? -ENOENT : -EIO;
        if (r == 0 && !b.data)
                r = buf_append(&b, "", 0);
        if (r < 0) {
                buf_release(&b);
                return r;
        }
        *ret = buf_steal(&b, ret_len);
        return 0;
}

/* --- static file ------------------------------------------------------------------------- */

static int
dp__from_file(const char *path, struct topo **ret, struct dp_discover_report *rep)
{
        CLEANUP(freep) char *text = NULL;
        struct topo_error err = { 0 };
        size_t len;
        int r;

        r = file_read_capped(path, TOPO_MAX_XML_BYTES, &text, &len);
        if (r < 0) {
                dp__note(rep, "file: cannot read %s: %s", path, strerror(-r));
                return r;
        }
        if (topo_detect_format(text, len) == TOPO_FORMAT_HWLOC_XML) {
#if DP_HAVE_HWLOC
                r = topo_hwloc_load_xml(text, len, ret, &err);
#else
                r = -EPROTONOSUPPORT;
                snprintf(err.msg, sizeof(err.msg), "this build has no hwloc loader.");
#endif
        } else {
                r = topo_parse_any(text, len, ret, &err);
        }
        if (r < 0)
                dp__note(rep, "file: %s line %u column %u: %s", path, err.line, err.column,
                         err.msg[0] ? err.msg : strerror(-r));
        else
                dp__note(rep, "file: %s: %u GPUs", path, (*ret)->n_gpus);
        return r;
}

/* --- NVML -------------------------------------------------------------------------------- */

/* The few NVML ABI facts used here (nvml.h, stable since driver 418). */
typedef void *dp_nvml_device;
struct dp_nvml_memory {
        unsigned long long total, free, used;
};
struct dp_nvml_pci {
        char bus_id_legacy[16];
        unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
        char bus_id[32];
};
/* Multi-node NVLink fabric (GB200/GB300 NVL72 and other NVLink-switched racks): nvml.h's
 * nvmlGpuFabricInfo_v2_t, asked through nvmlDeviceGetGpuFabricInfoV (in the R550 NVML
 * reference; driver 580 still takes version 2, seen on an H100), and the older
 * nvmlGpuFabricInfo_t of nvmlDeviceGetGpuFabricInfo where V is missing or refuses. */
#define DP_NVML_FABRIC_UUID_LEN 16
struct dp_nvml_fabric_v2 {
        unsigned version;
        unsigned char cluster_uuid[DP_NVML_FABRIC_UUID_LEN];
        int status;
        unsigned clique_id;
        unsigned char state;
        unsigned health_mask;
};
struct dp_nvml_fabric_v1 {
        unsigned char cluster_uuid[DP_NVML_FABRIC_UUID_LEN];
        int status;
        unsigned clique_id;
        unsigned char state;
};
#define DP_NVML_FABRIC_V2 ((unsigned)sizeof(struct dp_nvml_fabric_v2) | (2u << 24))
enum {
        DP_NVML_FABRIC_NOT_SUPPORTED = 0,
        DP_NVML_FABRIC_NOT_STARTED = 1,
        DP_NVML_FABRIC_IN_PROGRESS = 2,
        DP_NVML_FABRIC_COMPLETED = 3,
        DP_NVML_FABRIC_NO_CLUSTER = 0x100, /* ours: completed, the cluster UUID all zero */
};

enum {
        DP_NVML_SUCCESS = 0,
        DP_NVML_ERROR_NOT_SUPPORTED = 3,
        DP_NVML_TOPO_INTERNAL = 0,
        DP_NVML_TOPO_SINGLE = 10,
        DP_NVML_TOPO_MULTIPLE = 20,
        DP_NVML_TOPO_HOSTBRIDGE = 30,
        DP_NVML_TOPO_NODE = 40,
        DP_NVML_TOPO_SYSTEM = 50,
};

struct dp_nvml {
        void *lib;
        int (*init)(void);
        int (*shutdown)(void);
        int (*count)(unsigned *);
        int (*by_index)(unsigned, dp_nvml_device *);
        int (*uuid)(dp_nvml_device, char *, unsigned);
        int (*name)(dp_nvml_device, char *, unsigned);
        int (*memory)(dp_nvml_device, struct dp_nvml_memory *);
        int (*pci)(dp_nvml_device, struct dp_nvml_pci *);
        int (*link_state)(dp_nvml_device, unsigned, int *);
        int (*link_remote)(dp_nvml_device, unsigned, struct dp_nvml_pci *);
        int (*mig)(dp_nvml_device, unsigned *, unsigned *);
        int (*ancestor)(dp_nvml_device, dp_nvml_device, int *);
        int (*fabric_v)(dp_nvml_device, struct dp_nvml_fabric_v2 *);
        int (*fabric)(dp_nvml_device, struct dp_nvml_fabric_v1 *);
};

static const struct {
        const char *name;
        size_t offset;
        bool required;
} nvml_syms[] = {
        { "nvmlInit_v2", offsetof(struct dp_nvml, init), true },
        { "nvmlShutdown", offsetof(struct dp_nvml, shutdown), true },
        { "nvmlDeviceGetCount_v2", offsetof(struct dp_nvml, count), true },
        { "nvmlDeviceGetHandleByIndex_v2", offsetof(struct dp_nvml, by_index), true },
        { "nvmlDeviceGetUUID", offsetof(struct dp_nvml, uuid), true },
        { "nvmlDeviceGetName", offsetof(struct dp_nvml, name), false },
        { "nvmlDeviceGetMemoryInfo", offsetof(struct dp_nvml, memory), false },
        { "nvmlDeviceGetPciInfo_v3", offsetof(struct dp_nvml, pci), false },
        { "nvmlDeviceGetNvLinkState", offsetof(struct dp_nvml, link_state), false },
        { "nvmlDeviceGetNvLinkRemotePciInfo_v2", offsetof(struct dp_nvml, link_remote), false },
        { "nvmlDeviceGetMigMode", offsetof(struct dp_nvml, mig), false },
        { "nvmlDeviceGetTopologyCommonAncestor", offsetof(struct dp_nvml, ancestor), false },
        { "nvmlDeviceGetGpuFabricInfoV", offsetof(struct dp_nvml, fabric_v), false },
        { "nvmlDeviceGetGpuFabricInfo", offsetof(struct dp_nvml, fabric), false },
};

static const struct {
        int level;
        enum topo_link link;
} nvml_levels[] = {
        { DP_NVML_TOPO_INTERNAL, TOPO_LINK_PIX }, /* two GPUs on one board */
        { DP_NVML_TOPO_SINGLE, TOPO_LINK_PIX },
        { DP_NVML_TOPO_MULTIPLE, TOPO_LINK_PXB },
        { DP_NVML_TOPO_HOSTBRIDGE, TOPO_LINK_PHB },
        { DP_NVML_TOPO_NODE, TOPO_LINK_NODE },
        { DP_NVML_TOPO_SYSTEM, TOPO_LINK_SYS },
};

static enum topo_link
dp__nvml_level_link(int level)
{
        for (size_t i = 0; i < ELEMENTSOF(nvml_levels); i++)
                if (nvml_levels[i].level == level)
                        return nvml_levels[i].link;
        return TOPO_LINK_UNKNOWN;
}

/* "00000000:07:00.0" -> "0000:07:00.0", the sysfs spelling, lowercase. */
static void
dp__sysfs_bdf(const char *bus_id, char *buf, size_t size)
{
        size_t l = strlen(bus_id);
        const char *s = l > 12 ? bus_id + l - 12 : bus_id;
        size_t i;

        for (i = 0; s[i] && i + 1 < size; i++)
                buf[i] = (char)((s[i] >= 'A' && s[i] <= 'F') ? s[i] - 'A' + 'a' : s[i]);
        buf[i] = '\0';
}

static int
dp__sysfs_numa(const char *bus_id)
{
        char bdf[32], path[96], text[32];
        FILE *f;
        int numa = -1;

        dp__sysfs_bdf(bus_id, bdf, sizeof(bdf));
        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", bdf);
        f = fopen(path, "re");
        if (!f)
                return -1;
        if (fgets(text, sizeof(text), f)) {
                size_t l = strlen(text);
                const char *s = text;
                str_trim(&s, &l);
                if (str_to_int(s, l, -1, TOPO_MAX_NUMA - 1, &numa) < 0)
                        numa = -1;
        }
        fclose(f);
        return numa;
}

static bool
dp__bus_eq(const char *a, const char *b)
{
        char x[32], y[32];
        dp__sysfs_bdf(a, x, sizeof(x));
        dp__sysfs_bdf(b, y, sizeof(y));
        return strcmp(x, y) == 0;
}

/* One GPU's fabric record: 1 and its domain name when the GPU is registered with a
 * multi-node NVLink fabric, 0 with *state when it is not (yet; DP_NVML_FABRIC_NO_CLUSTER
 * when registered without a cluster), -1 when NVML cannot say. */
static int
dp__nvml_fabric(const struct dp_nvml *n, dp_nvml_device dev, char domain[static TOPO_ID_MAX],
                unsigned *state)
{
        struct dp_nvml_fabric_v2 v2 = { .version = DP_NVML_FABRIC_V2 };
        struct dp_nvml_fabric_v1 v1 = { 0 };
        const unsigned char *uuid;
        unsigned clique;
        int status, rv = n->fabric_v ? n->fabric_v(dev, &v2) : -1, r1 = -1;

        if (rv == DP_NVML_SUCCESS) {
                uuid = v2.cluster_uuid;
                clique = v2.clique_id;
                status = v2.status;
                *state = v2.state;
        } else if (n->fabric && (r1 = n->fabric(dev, &v1)) == DP_NVML_SUCCESS) {
                uuid = v1.cluster_uuid;
                clique = v1.clique_id;
                status = v1.status;
                *state = v1.state;
        } else if (rv == DP_NVML_ERROR_NOT_SUPPORTED || r1 == DP_NVML_ERROR_NOT_SUPPORTED) {
                *state = DP_NVML_FABRIC_NOT_SUPPORTED; /* a GPU without fabric support */
                return 0;
        } else
                return -1;
        if (*state != DP_NVML_FABRIC_COMPLETED || status != DP_NVML_SUCCESS)
                return 0;
        /* Registration completed with no cluster: NVML can answer so for a GPU outside any
         * multi-node fabric (reported on H100 systems), and NCCL takes a zero cluster UUID as
         * no multi-node NVLink.  Published, every such node would share the one domain
         * 00000000-0000-0000-0000-000000000000.0. */
        if (memcmp(uuid, (const unsigned char[DP_NVML_FABRIC_UUID_LEN]){ 0 },
                   DP_NVML_FABRIC_UUID_LEN) == 0) {
                *state = DP_NVML_FABRIC_NO_CLUSTER;
                return 0;
        }
        /* GPU Feature Discovery's nvidia.com/gpu.clique spelling: the cluster UUID in its
         * canonical form, a dot, the clique id in decimal. */
        snprintf(domain, TOPO_ID_MAX,
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x.%u",
                 uuid[0], uuid[1], uuid[2], uuid[3], uuid[4], uuid[5], uuid[6], uuid[7], uuid[8],
                 uuid[9], uuid[10], uuid[11], uuid[12], uuid[13], uuid[14], uuid[15], clique);
        return 1;
}

static const char *
dp__fabric_state_name(unsigned state)
{
        switch (state) {
        case DP_NVML_FABRIC_NOT_SUPPORTED: return "not supported";
        case DP_NVML_FABRIC_NOT_STARTED: return "not started";
        case DP_NVML_FABRIC_IN_PROGRESS: return "in progress";
        case DP_NVML_FABRIC_COMPLETED: return "completed with an error";
        case DP_NVML_FABRIC_NO_CLUSTER: return "completed with a zero cluster UUID";
        default: return "unknown";
        }
}

/* The node's multi-node NVLink domain: every GPU must name the same one, else none (a node
 * split over two cliques is a misconfigured rack, and a wrong domain would pull a gang's
 * pods apart).  Registration that has not finished yet leaves the domain empty; the
 * periodic re-discovery publishes it once it is there. */
static void
dp__nvml_domain(const struct dp_nvml *n, const dp_nvml_device *devs, unsigned count,
                struct topo *t, struct dp_discover_report *rep)
{
        char first[TOPO_ID_MAX] = "", d[TOPO_ID_MAX];
        unsigned state = 0;

        if (!n->fabric_v && !n->fabric) {
                dp__note(rep, "nvml: no fabric query in this driver; no NVLink domain");
                return;
        }
        for (unsigned i = 0; i < count; i++) {
                int r = dp__nvml_fabric(n, devs[i], d, &state);
                if (r < 0) {
                        dp__note(rep, "nvml: GPU %u: fabric info not available; no NVLink domain", i);
                        rep->domain_unknown = true;
                        return;
                }
                if (r == 0) {
                        if (state == DP_NVML_FABRIC_NOT_SUPPORTED && i == 0)
                                dp__note(rep, "nvml: no multi-node NVLink fabric");
                        else
                                dp__note(rep, "nvml: GPU %u: fabric registration %s; no NVLink domain",
                                         i, dp__fabric_state_name(state));
                        return;
                }
                if (i == 0)
                        memcpy(first, d, sizeof(first));
                else if (strcmp(first, d) != 0) {
                        dp__note(rep, "nvml: GPUs 0 and %u are in different NVLink domains (%s, %s); none published",
                                 i, first, d);
                        return;
                }
        }
        memcpy(t->nvlink_domain, first, sizeof(t->nvlink_domain));
        dp__note(rep, "nvml: NVLink domain %s", first);
}

bool
dp_keep_domain(struct topo *t, const struct topo *prev, const struct dp_discover_report *rep)
{
        if (!t || !prev || !rep || !rep->domain_unknown || t->nvlink_domain[0] ||
            !prev->nvlink_domain[0])
                return false;
        memcpy(t->nvlink_domain, prev->nvlink_domain, sizeof(t->nvlink_domain));
        return true;
}

static int
dp__from_nvml(const char *libpath, struct topo **ret, struct dp_discover_report *rep)
{
        struct dp_nvml n = { 0 };
        CLEANUP(topo_unrefp) struct topo *t = NULL;
        dp_nvml_device devs[TOPO_MAX_GPUS];
        unsigned count = 0;
        unsigned active[TOPO_MAX_GPUS] = { 0 }, to_switch[TOPO_MAX_GPUS] = { 0 };
        int r = 0;

        n.lib = dlopen(libpath, RTLD_NOW | RTLD_LOCAL);
        if (!n.lib) {
                dp__note(rep, "nvml: %s not loadable (no NVIDIA driver?)", libpath);
                return -ENOENT;
        }
        rep->nvml_present = true;
        for (size_t i = 0; i < ELEMENTSOF(nvml_syms); i++) {
                void *sym = dlsym(n.lib, nvml_syms[i].name);
                if (!sym && nvml_syms[i].required) {
                        dp__note(rep, "nvml: %s lacks %s", libpath, nvml_syms[i].name);
                        dlclose(n.lib);
                        return -ENOENT;
                }
                memcpy((char *)&n + nvml_syms[i].offset, &sym, sizeof(sym));
        }
        if (n.init() != DP_NVML_SUCCESS) {
                dp__note(rep, "nvml: nvmlInit failed");
                dlclose(n.lib);
                return -EIO;
        }
        if (n.count(&count) != DP_NVML_SUCCESS || count == 0 || count > TOPO_MAX_GPUS) {
                dp__note(rep, "nvml: %u GPUs (none usable)", count);
                r = -ENODEV;
                goto out;
        }
        t = topo_new(count, 0);
        if (!t) {
                r = -ENOMEM;
                goto out;
        }
        t->vendor = TOPO_VENDOR_NVIDIA;
        for (unsigned i = 0; i < count; i++) {
                struct topo_gpu *g = &t->gpus[i];
                char s[DP_NVML_STRING];
                struct dp_nvml_memory mem;
                struct dp_nvml_pci pci;
                unsigned cur, pend;

                if (n.by_index(i, &devs[i]) != DP_NVML_SUCCESS) {
                        dp__note(rep, "nvml: GPU %u: no handle", i);
                        r = -EIO;
                        goto out;
                }
                g->healthy = true;
                if (n.uuid(devs[i], s, sizeof(s)) == DP_NVML_SUCCESS)
                        snprintf(g->uuid, sizeof(g->uuid), "%s", s);
                else
                        g->healthy = false; /* a GPU NVML cannot name is not handed out */
                if (n.name && n.name(devs[i], s, sizeof(s)) == DP_NVML_SUCCESS)
                        snprintf(g->model, sizeof(g->model), "%s", s);
                if (n.memory && n.memory(devs[i], &mem) == DP_NVML_SUCCESS)
                        g->memory_mib = mem.total >> 20;
                if (n.pci && n.pci(devs[i], &pci) == DP_NVML_SUCCESS) {
                        pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
                        snprintf(g->pci_bus_id, sizeof(g->pci_bus_id), "%s", pci.bus_id);
                        g->numa = dp__sysfs_numa(pci.bus_id);
                }
                if (n.mig && n.mig(devs[i], &cur, &pend) == DP_NVML_SUCCESS)
                        g->mig = cur ? TOPO_MIG_ENABLED : TOPO_MIG_DISABLED;
        }
        /* PCIe relation of every pair, then NVLink on top: links to a peer GPU's bus id
         * count toward that pair; links to anything else lead to an NVSwitch. */
        for (unsigned i = 0; i < count; i++)
                for (unsigned j = i + 1; j < count; j++) {
                        int level;
                        enum topo_link l = TOPO_LINK_UNKNOWN;
                        if (n.ancestor && n.ancestor(devs[i], devs[j], &level) == DP_NVML_SUCCESS)
                                l = dp__nvml_level_link(level);
                        topo_pair_mut(t, i, j)->link = (uint8_t)l;
                        topo_pair_mut(t, j, i)->link = (uint8_t)l;
                }
        for (unsigned i = 0; i < count && n.link_state && n.link_remote; i++)
                for (unsigned k = 0; k < DP_NVML_MAX_LINKS; k++) {
                        int on = 0;
                        struct dp_nvml_pci rp;
                        bool peer = false;
                        if (n.link_state(devs[i], k, &on) != DP_NVML_SUCCESS || !on)
                                continue;
                        if (n.link_remote(devs[i], k, &rp) != DP_NVML_SUCCESS)
                                continue;
                        rp.bus_id[sizeof(rp.bus_id) - 1] = '\0';
                        active[i]++;
                        for (unsigned j = 0; j < count; j++)
                                if (j != i && t->gpus[j].pci_bus_id[0] &&
                                    dp__bus_eq(rp.bus_id, t->gpus[j].pci_bus_id)) {
                                        struct topo_pair *p = topo_pair_mut(t, i, j);
                                        p->link = TOPO_LINK_NVLINK;
                                        p->links++;
                                        peer = true;
                                        break;
                                }
                        if (!peer)
                                to_switch[i]++;
                }
        for (unsigned i = 0; i < count; i++)
                if (to_switch[i] > 0) {
                        t->nvswitch = true;
                        for (unsigned j = 0; j < count; j++)
                                if (j != i && to_switch[j] > 0) {
                                        struct topo_pair *p = topo_pair_mut(t, i, j);
                                        p->link = TOPO_LINK_NVLINK;
                                        p->links = (uint8_t)MIN(active[i], active[j]);
                                }
                }
        /* Direct links are counted from both ends; keep the pairs symmetric. */
        for (unsigned i = 0; i < count; i++)
                for (unsigned j = i + 1; j < count; j++) {
                        struct topo_pair *a = topo_pair_mut(t, i, j), *b = topo_pair_mut(t, j, i);
                        uint8_t links = MAX(a->links, b->links);
                        if (a->link == TOPO_LINK_NVLINK || b->link == TOPO_LINK_NVLINK)
                                a->link = b->link = TOPO_LINK_NVLINK;
                        a->links = b->links = links;
                }
        dp__nvml_domain(&n, devs, count, t, rep);
        topo_finish(t);
        rep->nvml_gpus = count;
        dp__note(rep, "nvml: %u GPUs%s", count, t->nvswitch ? ", NVSwitch fabric" : "");
out:
        n.shutdown();
        dlclose(n.lib);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(t);
        return 0;
}

/* --- NVML health events ------------------------------------------------------------------------ */

#define DP_NVML_EVENT_XID 0x8ull  /* nvmlEventTypeXidCriticalError */
#define DP_NVML_ERROR_TIMEOUT 10

struct dp_nvml_event {
        dp_nvml_device device;
        unsigned long long type;
        unsigned long long data; /* the Xid */
        unsigned gpu_instance, compute_instance;
};

struct dp_nvml_watch {
        struct dp_nvml n;
        void *set;
        int (*set_create)(void **);
        int (*set_free)(void *);
        int (*register_events)(dp_nvml_device, unsigned long long, void *);
        int (*set_wait)(void *, struct dp_nvml_event *, unsigned);
};

/* Application-caused Xids, after NVIDIA's own device plugin: the GPU stays healthy. */
static const unsigned long long app_xids[] = { 13, 31, 43, 45, 68, 109 };

int
dp_nvml_watch_new(const char *libpath, struct dp_nvml_watch **ret)
{
        static const struct {
                const char *name;
                size_t offset;
        } event_syms[] = {
                { "nvmlEventSetCreate", offsetof(struct dp_nvml_watch, set_create) },
                { "nvmlEventSetFree", offsetof(struct dp_nvml_watch, set_free) },
                { "nvmlDeviceRegisterEvents", offsetof(struct dp_nvml_watch, register_events) },
                { "nvmlEventSetWait_v2", offsetof(struct dp_nvml_watch, set_wait) },
        };
        struct dp_nvml_watch *w;
        unsigned count = 0, armed = 0;

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->n.lib = dlopen(libpath ? libpath : DP_NVML_DEFAULT, RTLD_NOW | RTLD_LOCAL);
        if (!w->n.lib) {
                free(w);
                return -ENOENT;
        }
        for (size_t i = 0; i < ELEMENTSOF(event_syms); i++) {
                void *sym = dlsym(w->n.lib, event_syms[i].name);
                if (!sym)
                        goto absent;
                memcpy((char *)w + event_syms[i].offset, &sym, sizeof(sym));
        }
        for (size_t i = 0; i < ELEMENTSOF(nvml_syms); i++) {
                void *sym = dlsym(w->n.lib, nvml_syms[i].name);
                if (!sym && nvml_syms[i].required)
                        goto absent;
                memcpy((char *)&w->n + nvml_syms[i].offset, &sym, sizeof(sym));
        }
        if (w->n.init() != DP_NVML_SUCCESS) {
                dlclose(w->n.lib);
                free(w);
                return -EIO;
        }
        if (w->set_create(&w->set) != DP_NVML_SUCCESS || w->n.count(&count) != DP_NVML_SUCCESS) {
                w->n.shutdown();
                dlclose(w->n.lib);
                free(w);
                return -EIO;
        }
        for (unsigned i = 0; i < count && i < TOPO_MAX_GPUS; i++) {
                dp_nvml_device dev;
                if (w->n.by_index(i, &dev) == DP_NVML_SUCCESS &&
                    w->register_events(dev, DP_NVML_EVENT_XID, w->set) == DP_NVML_SUCCESS)
                        armed++;
        }
        if (armed == 0) {
                dp_nvml_watch_free(w);
                return -EOPNOTSUPP; /* e.g. GPUs without event support */
        }
        *ret = w;
        return 0;
absent:
        dlclose(w->n.lib);
        free(w);
        return -ENOENT;
}

int
dp_nvml_watch_wait(struct dp_nvml_watch *w, unsigned timeout_ms, char ret_id[static TOPO_ID_MAX],
                   unsigned long long *ret_xid)
{
        struct dp_nvml_event ev = { 0 };
        char uuid[DP_NVML_STRING];
        int r;

        r = w->set_wait(w->set, &ev, timeout_ms);
        if (r == DP_NVML_ERROR_TIMEOUT)
                return 0;
        if (r != DP_NVML_SUCCESS)
                return -EIO;
        if (!(ev.type & DP_NVML_EVENT_XID))
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(app_xids); i++)
                if (ev.data == app_xids[i])
                        return 0;
        if (w->n.uuid(ev.device, uuid, sizeof(uuid)) != DP_NVML_SUCCESS)
                return -EIO;
        snprintf(ret_id, TOPO_ID_MAX, "%s", uuid);
        *ret_xid = ev.data;
        return 1;
}

struct dp_nvml_watch *
dp_nvml_watch_free(struct dp_nvml_watch *w)
{
        if (!w)
                return NULL;
        if (w->set)
                w->set_free(w->set);
        w->n.shutdown();
        dlclose(w->n.lib);
        free(w);
        return NULL;
}

/* --- nvidia-smi ----------------------------------------------------------------------------- */

/* Fills UUID, model, memory and bus id by index from `--query-gpu` CSV. */
static void
dp__nvsmi_query(const char *prog, struct topo *t, struct dp_discover_report *rep)
{
        char *argv[] = { (char *)prog, (char *)"--query-gpu=index,uuid,name,memory.total,pci.bus_id",
                         (char *)"--format=csv,noheader,nounits", NULL };
        CLEANUP(freep) char *out = NULL;
        size_t len;
        unsigned filled = 0;
        char *save = NULL;

        if (dp__run_capture(argv, TOPO_MAX_TEXT_BYTES, &out, &len) < 0) {
                dp__note(rep, "nvidia-smi: --query-gpu failed: GPUs keep index IDs");
                return;
        }
        for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                const char *f[5];
                size_t fl[5];
                unsigned nf = 0;
                const char *s = line;
                int idx;

                while (nf < 5) {
                        const char *comma = strchr(s, ',');
                        size_t l = comma ? (size_t)(comma - s) : strlen(s);
                        f[nf] = s;
                        fl[nf] = l;
                        str_trim(&f[nf], &fl[nf]);
                        nf++;
                        if (!comma)
                                break;
                        s = comma + 1;
                }
                if (nf < 5 || str_to_int(f[0], fl[0], 0, (int)t->n_gpus - 1, &idx) < 0)
                        continue;
                struct topo_gpu *g = &t->gpus[idx];
                int64_t mib;
                (void)str_copy(g->uuid, sizeof(g->uuid), f[1], fl[1]);
                if (!g->model[0] && str_copy(g->model, sizeof(g->model), f[2], fl[2]) == 0)
                        g->nvlink_gen = 0; /* the name beats the NV# pattern (NV18: 4 or 5) */
                if (str_to_int64(f[3], fl[3], 0, INT64_MAX, &mib) == 0)
                        g->memory_mib = (uint64_t)mib;
                (void)str_copy(g->pci_bus_id, sizeof(g->pci_bus_id), f[4], fl[4]);
                filled++;
        }
        dp__note(rep, "nvidia-smi: --query-gpu named %u of %u GPUs", filled, t->n_gpus);
}

static int
dp__from_nvsmi(const char *prog, struct topo **ret, struct dp_discover_report *rep)
{
        char *argv[] = { (char *)prog, (char *)"topo", (char *)"-m", NULL };
        CLEANUP(freep) char *out = NULL;
        CLEANUP(topo_unrefp) struct topo *t = NULL;
        struct topo_error err = { 0 };
        size_t len;
        int r;

        r = dp__run_capture(argv, TOPO_MAX_TEXT_BYTES, &out, &len);
        if (r < 0) {
                dp__note(rep, "nvidia-smi: `%s topo -m` failed: %s", prog, strerror(-r));
                return r;
        }
        rep->nvsmi_present = true;
        r = topo_parse_nvsmi(out, len, &t, &err);
        if (r < 0) {
                dp__note(rep, "nvidia-smi: topo -m line %u: %s", err.line, err.msg);
                return r;
        }
        dp__nvsmi_query(prog, t, rep);
        topo_finish(t);
        dp__note(rep, "nvidia-smi: %u GPUs", t->n_gpus);
        *ret = TAKE_PTR(t);
        return 0;
}

/* --- hwloc ---------------------------------------------------------------------------------- */

static int
dp__from_hwloc(const char *xml_path, struct topo **ret, struct dp_discover_report *rep)
{
#if DP_HAVE_HWLOC
        struct topo_error err = { 0 };
        int r;

        if (xml_path) {
                CLEANUP(freep) char *text = NULL;
                size_t len;
                r = file_read_capped(xml_path, TOPO_MAX_XML_BYTES, &text, &len);
                if (r >= 0)
                        r = topo_hwloc_load_xml(text, len, ret, &err);
        } else {
                r = topo_hwloc_load_live(ret, &err);
        }
        if (r < 0) {
                dp__note(rep, "hwloc: %s", err.msg[0] ? err.msg : strerror(-r));
                return r;
        }
        rep->hwloc_ok = true;
        dp__note(rep, "hwloc: %u GPUs", (*ret)->n_gpus);
        if ((*ret)->n_gpus == 0) {
                *ret = topo_unref(*ret);
                return -ENODEV;
        }
        return 0;
#else
        (void)xml_path;
        (void)ret;
        dp__note(rep, "hwloc: loader not in this build");
        return -EOPNOTSUPP;
#endif
}

/* NVML knows GPUs and NVLink but not NICs: take the NICs, their relation to each GPU, and
 * NUMA/CPU affinity NVML left unknown from hwloc, matching GPUs by PCI bus id.  Leaves *tp
 * alone (with a note) when the two disagree about the GPUs. */
static int
dp__add_hwloc(struct topo **tp, const struct topo *hw, struct dp_discover_report *rep)
{
        const struct topo *t = *tp;
        struct topo *n;
        int map[TOPO_MAX_GPUS];

        for (unsigned i = 0; i < t->n_gpus; i++) {
                map[i] = -1;
                for (unsigned j = 0; j < hw->n_gpus && t->gpus[i].pci_bus_id[0]; j++)
                        if (dp__bus_eq(t->gpus[i].pci_bus_id, hw->gpus[j].pci_bus_id))
                                map[i] = (int)j;
                if (map[i] < 0) {
                        dp__note(rep, "hwloc: GPU %s not seen by hwloc; NICs left out",
                                 t->gpus[i].pci_bus_id);
                        return 0;
                }
        }
        n = topo_new(t->n_gpus, hw->n_nics);
        if (!n)
                return -ENOMEM;
        n->vendor = t->vendor;
        n->cpu_link = t->cpu_link ? t->cpu_link : hw->cpu_link;
        n->nvswitch = t->nvswitch;
        memcpy(n->nvlink_domain, t->nvlink_domain, sizeof(n->nvlink_domain));
        memcpy(n->node_name, t->node_name, sizeof(n->node_name));
        for (unsigned i = 0; i < t->n_gpus; i++) {
                const struct topo_gpu *h = &hw->gpus[map[i]];
                n->gpus[i] = t->gpus[i];
                if (n->gpus[i].numa < 0)
                        n->gpus[i].numa = h->numa;
                if (!n->gpus[i].cpu_affinity[0])
                        memcpy(n->gpus[i].cpu_affinity, h->cpu_affinity, sizeof(h->cpu_affinity));
        }
        memcpy(n->pairs, t->pairs, (size_t)t->n_gpus * t->n_gpus * sizeof(*n->pairs));
        for (unsigned k = 0; k < hw->n_nics; k++) {
                n->nics[k] = hw->nics[k];
                for (unsigned i = 0; i < t->n_gpus; i++)
                        n->nic_links[(size_t)k * n->n_gpus + i] =
                                (uint8_t)topo_nic_link(hw, k, (unsigned)map[i]);
        }
        topo_finish(n);
        dp__note(rep, "hwloc: added %u NICs to the NVML view", hw->n_nics);
        topo_unref(*tp);
        *tp = n;
        return 0;
}

int
dp_discover(const struct dp_discover_opts *o, struct topo **ret,
            struct dp_discover_report *ret_report)
{
        struct dp_discover_report rep = { .used = _DP_SOURCE_INVALID };
        struct topo *t = NULL;
        int r;

        if (o->topology_file) {
                r = dp__from_file(o->topology_file, &t, &rep);
                if (r >= 0)
                        rep.used = DP_SOURCE_FILE;
        } else {
                r = dp__from_nvml(o->nvml_lib ? o->nvml_lib : DP_NVML_DEFAULT, &t, &rep);
                if (r >= 0) {
                        struct topo *hw = NULL;
                        rep.used = DP_SOURCE_NVML;
                        if (!o->no_hwloc && dp__from_hwloc(o->hwloc_xml, &hw, &rep) >= 0)
                                r = dp__add_hwloc(&t, hw, &rep);
                        topo_unref(hw);
                        if (r < 0)
                                t = topo_unref(t);
                }
                if (r < 0) {
                        r = dp__from_nvsmi(o->nvidia_smi ? o->nvidia_smi : "nvidia-smi", &t, &rep);
                        if (r >= 0)
                                rep.used = DP_SOURCE_NVSMI;
                }
                if (r < 0 && !o->no_hwloc) {
                        r = dp__from_hwloc(o->hwloc_xml, &t, &rep);
                        if (r >= 0)
                                rep.used = DP_SOURCE_HWLOC;
                }
                if (r < 0)
                        r = -ENODEV;
        }
        if (ret_report)
                *ret_report = rep;
        if (r < 0)
                return r;
        *ret = t;
        return 0;
}
