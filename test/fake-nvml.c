/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for libnvidia-ml.so.1 for the plugin's discovery tests, so NVML discovery runs
 * on machines without the NVIDIA driver.  It exports the few entry points topofit-node
 * dlopen()s, with the ABI of nvml.h, and describes a canned 4-GPU node: GPUs 0-1 and 2-3
 * joined by 4 NVLinks each, PCIe relations PIX/NODE/SYS, GPU 3 in MIG mode.  With
 * FAKE_NVML_NVSWITCH=1 every GPU instead has 12 links into an NVSwitch; FAKE_NVML_FAIL=1
 * makes nvmlInit fail; FAKE_NVML_BUSES="01,05,06,11" sets the GPUs' PCI buses (hex), to
 * match an hwloc XML; events: when the file $FAKE_NVML_XID_FILE holds "<gpu> <xid>", the
 * next event wait returns that critical Xid and removes the file; FAKE_NVML_FABRIC sets the
 * multi-node NVLink fabric (below).  Not part of the product.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_GPUS 4
#define OK 0
#define ERR_INVALID 2
#define ERR_NOT_SUPPORTED 3
#define ERR_UNINIT 1

struct pci {
        char bus_id_legacy[16];
        unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
        char bus_id[32];
};
struct memory {
        unsigned long long total, free, used;
};

static unsigned bus_of[N_GPUS] = { 0x07, 0x0f, 0x47, 0x4e };
static const int level_of[N_GPUS][N_GPUS] = {
        { 0, 10, 40, 50 },
        { 10, 0, 50, 50 },
        { 40, 50, 0, 10 },
        { 50, 50, 10, 0 },
};
static int initialized;

static int
gpu_of(void *dev)
{
        uintptr_t i = (uintptr_t)dev;
        return i >= 1 && i <= N_GPUS ? (int)i - 1 : -1;
}

static int
nvswitch(void)
{
        const char *s = getenv("FAKE_NVML_NVSWITCH");
        return s && strcmp(s, "1") == 0;
}

static void
fill_pci(struct pci *p, unsigned bus)
{
        memset(p, 0, sizeof(*p));
        p->bus = bus;
        snprintf(p->bus_id, sizeof(p->bus_id), "00000000:%02X:00.0", bus);
        snprintf(p->bus_id_legacy, sizeof(p->bus_id_legacy), "0000:%02X:00.0", bus);
}

int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetCount_v2(unsigned *count);
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev);
int nvmlDeviceGetUUID(void *dev, char *buf, unsigned size);
int nvmlDeviceGetName(void *dev, char *buf, unsigned size);
int nvmlDeviceGetMemoryInfo(void *dev, struct memory *m);
int nvmlDeviceGetPciInfo_v3(void *dev, struct pci *p);
int nvmlDeviceGetNvLinkState(void *dev, unsigned link, int *on);
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *dev, unsigned link, struct pci *p);
int nvmlDeviceGetMigMode(void *dev, unsigned *cur, unsigned *pending);
int nvmlDeviceGetTopologyCommonAncestor(void *a, void *b, int *level);

int
nvmlInit_v2(void)
{
        static const unsigned defaults[N_GPUS] = { 0x07, 0x0f, 0x47, 0x4e };
        const char *s = getenv("FAKE_NVML_FAIL");
        const char *buses = getenv("FAKE_NVML_BUSES");

        if (s && strcmp(s, "1") == 0)
                return ERR_UNINIT;
        memcpy(bus_of, defaults, sizeof(bus_of));
        for (unsigned i = 0; buses && *buses && i < N_GPUS; i++) {
                char *end;
                bus_of[i] = (unsigned)strtoul(buses, &end, 16);
                buses = *end == ',' ? end + 1 : end;
        }
        initialized = 1;
        return OK;
}

int
nvmlShutdown(void)
{
        initialized = 0;
        return OK;
}

int
nvmlDeviceGetCount_v2(unsigned *count)
{
        if (!initialized)
                return ERR_UNINIT;
        *count = N_GPUS;
        return OK;
}

int
nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev)
{
        if (!initialized || i >= N_GPUS)
                return ERR_INVALID;
        *dev = (void *)(uintptr_t)(i + 1);
        return OK;
}

int
nvmlDeviceGetUUID(void *dev, char *buf, unsigned size)
{
        int g = gpu_of(dev);
        if (g < 0)
                return ERR_INVALID;
        snprintf(buf, size, "GPU-fa4e0000-0000-0000-0000-00000000000%d", g);
        return OK;
}

int
nvmlDeviceGetName(void *dev, char *buf, unsigned size)
{
        if (gpu_of(dev) < 0)
                return ERR_INVALID;
        snprintf(buf, size, "NVIDIA A100-SXM4-40GB");
        return OK;
}

int
nvmlDeviceGetMemoryInfo(void *dev, struct memory *m)
{
        if (gpu_of(dev) < 0)
                return ERR_INVALID;
        m->total = 40ull << 30;
        m->free = m->total;
        m->used = 0;
        return OK;
}

int
nvmlDeviceGetPciInfo_v3(void *dev, struct pci *p)
{
        int g = gpu_of(dev);
        if (g < 0)
                return ERR_INVALID;
        fill_pci(p, bus_of[g]);
        return OK;
}

int
nvmlDeviceGetNvLinkState(void *dev, unsigned link, int *on)
{
        if (gpu_of(dev) < 0 || link >= 18)
                return ERR_INVALID;
        *on = nvswitch() ? link < 12 : link < 4;
        return OK;
}

int
nvmlDeviceGetNvLinkRemotePciInfo_v2(void *dev, unsigned link, struct pci *p)
{
        int g = gpu_of(dev);
        if (g < 0 || link >= 18)
                return ERR_INVALID;
        if (nvswitch())
                fill_pci(p, 0xc0 + link % 6); /* six NVSwitch chips */
        else
                fill_pci(p, bus_of[g ^ 1]);   /* 0<->1, 2<->3 */
        return OK;
}

int
nvmlDeviceGetMigMode(void *dev, unsigned *cur, unsigned *pending)
{
        int g = gpu_of(dev);
        if (g < 0)
                return ERR_INVALID;
        *cur = *pending = g == 3;
        return OK;
}

int
nvmlDeviceGetTopologyCommonAncestor(void *a, void *b, int *level)
{
        int i = gpu_of(a), j = gpu_of(b);
        if (i < 0 || j < 0)
                return ERR_INVALID;
        *level = level_of[i][j];
        return OK;
}

/* Multi-node NVLink fabric.  FAKE_NVML_FABRIC="<state> <clique of GPU 0> ... <of GPU 3>"
 * (state 3: registered); unset, every GPU answers state 0, no fabric, as a lone H100 with
 * driver 580 does.  FAKE_NVML_FABRIC_V=0 makes the V call answer
 * NVML_ERROR_FUNCTION_NOT_FOUND, as a driver before it would, so the v1 call is used;
 * FAKE_NVML_FABRIC_V1=0 does the same to the v1 call.  FAKE_NVML_FABRIC_RC=N makes both
 * answer N (3: NVML_ERROR_NOT_SUPPORTED), FAKE_NVML_FABRIC_STATUS=N sets the registration's
 * status, FAKE_NVML_FABRIC_UUID=zero registers with an all-zero cluster UUID. */
struct fabric_v1 {
        unsigned char cluster_uuid[16];
        int status;
        unsigned clique_id;
        unsigned char state;
};
struct fabric_v2 {
        unsigned version;
        unsigned char cluster_uuid[16];
        int status;
        unsigned clique_id;
        unsigned char state;
        unsigned health_mask;
};

int nvmlDeviceGetGpuFabricInfo(void *dev, struct fabric_v1 *f);
int nvmlDeviceGetGpuFabricInfoV(void *dev, struct fabric_v2 *f);

static const unsigned char cluster_uuid[16] = { 0x8f, 0x3a, 0x1c, 0x52, 0x9b, 0x04, 0x4e, 0x71,
                                                0xa2, 0x6d, 0x33, 0xc0, 0x5e, 0x18, 0xf7, 0x09 };

static int
fabric_of(int g, struct fabric_v1 *f)
{
        const char *s = getenv("FAKE_NVML_FABRIC");
        unsigned v[1 + N_GPUS] = { 0 };
        int n = 0;

        memset(f, 0, sizeof(*f));
        while (s && *s && n < 1 + N_GPUS) {
                char *end;
                v[n++] = (unsigned)strtoul(s, &end, 10);
                if (end == s)
                        break;
                s = end;
        }
        f->state = (unsigned char)v[0];
        if (f->state == 3) {
                s = getenv("FAKE_NVML_FABRIC_UUID");
                if (!s || strcmp(s, "zero") != 0)
                        memcpy(f->cluster_uuid, cluster_uuid, sizeof(cluster_uuid));
                f->clique_id = v[1 + g];
                s = getenv("FAKE_NVML_FABRIC_STATUS");
                f->status = s ? atoi(s) : OK;
        }
        s = getenv("FAKE_NVML_FABRIC_RC");
        return s ? atoi(s) : OK;
}

/* What both fabric calls answer before looking: the call switched off by off_var=0, NVML
 * not initialized, a bad handle or no struct; OK with the GPU's index in *g. */
static int
fabric_call_check(const char *off_var, void *dev, const void *f, int *g)
{
        const char *s = getenv(off_var);

        if (s && strcmp(s, "0") == 0)
                return 13; /* NVML_ERROR_FUNCTION_NOT_FOUND */
        if (!initialized)
                return ERR_UNINIT;
        *g = gpu_of(dev);
        return *g < 0 || !f ? ERR_INVALID : OK;
}

int
nvmlDeviceGetGpuFabricInfo(void *dev, struct fabric_v1 *f)
{
        int g, r = fabric_call_check("FAKE_NVML_FABRIC_V1", dev, f, &g);

        return r != OK ? r : fabric_of(g, f);
}

int
nvmlDeviceGetGpuFabricInfoV(void *dev, struct fabric_v2 *f)
{
        struct fabric_v1 one;
        int g, r = fabric_call_check("FAKE_NVML_FABRIC_V", dev, f, &g);

        if (r != OK)
                return r;
        if (f->version != ((unsigned)sizeof(struct fabric_v2) | (2u << 24)))
                return 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
        r = fabric_of(g, &one);
        if (r != OK)
                return r;
        memcpy(f->cluster_uuid, one.cluster_uuid, sizeof(one.cluster_uuid));
        f->status = one.status;
        f->clique_id = one.clique_id;
        f->state = one.state;
        f->health_mask = 0;
        return OK;
}

struct event {
        void *device;
        unsigned long long type, data;
        unsigned gpu_instance, compute_instance;
};

int nvmlEventSetCreate(void **set);
int nvmlEventSetFree(void *set);
int nvmlDeviceRegisterEvents(void *dev, unsigned long long types, void *set);
int nvmlEventSetWait_v2(void *set, struct event *ev, unsigned timeout_ms);

static int event_set_token;

int
nvmlEventSetCreate(void **set)
{
        if (!initialized)
                return ERR_UNINIT;
        *set = &event_set_token;
        return OK;
}

int
nvmlEventSetFree(void *set)
{
        return set == &event_set_token ? OK : ERR_INVALID;
}

int
nvmlDeviceRegisterEvents(void *dev, unsigned long long types, void *set)
{
        if (gpu_of(dev) < 0 || set != &event_set_token || !(types & 0x8))
                return ERR_INVALID;
        return OK;
}

int
nvmlEventSetWait_v2(void *set, struct event *ev, unsigned timeout_ms)
{
        const char *path = getenv("FAKE_NVML_XID_FILE");
        unsigned waited = 0;

        if (set != &event_set_token)
                return ERR_INVALID;
        while (waited < timeout_ms) {
                FILE *f = path ? fopen(path, "r") : NULL;
                int gpu;
                unsigned long long xid;

                if (f) {
                        int n = fscanf(f, "%d %llu", &gpu, &xid);
                        fclose(f);
                        unlink(path);
                        if (n == 2 && gpu >= 0 && gpu < N_GPUS) {
                                memset(ev, 0, sizeof(*ev));
                                ev->device = (void *)(uintptr_t)(gpu + 1);
                                ev->type = 0x8;
                                ev->data = xid;
                                return OK;
                        }
                }
                usleep(20 * 1000);
                waited += 20;
        }
        return 10; /* NVML_ERROR_TIMEOUT */
}
