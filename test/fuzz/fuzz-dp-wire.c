/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for the device plugin's wire messages (plugin/dp-grpc.c through
 * dp-private.h): the protobuf bytes the kubelet sends (AllocateRequest,
 * PreferredAllocationRequest, PreStartContainerRequest) and those the plugin reads back as
 * a client (PreferredAllocationResponse, PodResources ListPodResourcesResponse), decoded by
 * protobuf-c and handled by exactly the code the gRPC transport calls.  The first byte
 * picks the message; the handlers check IDs against eight devices GPU-0..GPU-7 with the
 * plugin's own dp_cache_device_index().
 * Asserts, on the answers: one response per container; Allocate's env and CDI names carry
 * exactly the requested IDs; GetPreferredAllocation answers only IDs it was offered, never
 * more than allocation_size, and none twice when the request had no duplicates.
 * Seeds: test/fuzz/corpus/fuzz-dp-wire (messages packed by test/fuzz/dp-wire-seeds.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.pb-c.h"
#include "dp-private.h"
#include "dp.h"
#include "macro.h"
#include "podresources.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_DEV 8

static struct dp_cache cache;

static int
check_ids(void *userdata, const char *const *ids, unsigned n)
{
        (void)userdata;
        for (unsigned i = 0; i < n; i++)
                if (dp_cache_device_index(&cache, ids[i]) < 0)
                        return -ENODEV;
        return 0;
}

/* Picks the first req->size known devices among the available ones; fewer: -ENOENT (the
 * transport then falls back to must-include plus the first available). */
static int
prefer(void *userdata, const struct dp_pref_request *req, unsigned *ret_idx)
{
        unsigned n = 0;

        (void)userdata;
        for (unsigned i = 0; i < req->n_available && n < req->size; i++)
                if (dp_cache_device_index(&cache, req->available[i]) >= 0)
                        ret_idx[n++] = i;
        return n == req->size ? (int)n : -ENOENT;
}

static bool
in_list(const char *id, char *const *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(id, v[i]) == 0)
                        return true;
        return false;
}

static bool
has_dups(char *const *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (in_list(v[i], v + i + 1, n - i - 1))
                        return true;
        return false;
}

static void
check_allocate(const uint8_t *in, size_t len, const uint8_t *out, size_t out_len)
{
        V1beta1__AllocateRequest *q = v1beta1__allocate_request__unpack(NULL, len, in);
        V1beta1__AllocateResponse *a = v1beta1__allocate_response__unpack(NULL, out_len, out);

        if (!q || !a || a->n_container_responses != q->n_container_requests)
                abort();
        for (size_t i = 0; i < q->n_container_requests; i++) {
                const V1beta1__ContainerAllocateRequest *c = q->container_requests[i];
                const V1beta1__ContainerAllocateResponse *r = a->container_responses[i];
                const char *v;

                if (r->n_envs != 1 || strcmp(r->envs[0]->key, DP_VISIBLE_DEVICES_ENV) != 0 ||
                    r->n_cdi_devices != c->n_devices_ids)
                        abort();
                v = r->envs[0]->value;
                for (size_t k = 0; k < c->n_devices_ids; k++) {
                        size_t l = strlen(c->devices_ids[k]);
                        const char *name = r->cdi_devices[k]->name;
                        if (strncmp(v, c->devices_ids[k], l) != 0 || (v[l] != ',' && v[l] != '\0'))
                                abort();
                        v += l + (v[l] == ',');
                        if (strncmp(name, DP_CDI_KIND "=", strlen(DP_CDI_KIND) + 1) != 0 ||
                            strcmp(name + strlen(DP_CDI_KIND) + 1, c->devices_ids[k]) != 0)
                                abort();
                }
                if (*v)
                        abort();
        }
        v1beta1__allocate_request__free_unpacked(q, NULL);
        v1beta1__allocate_response__free_unpacked(a, NULL);
}

static void
check_preferred(const uint8_t *in, size_t len, const uint8_t *out, size_t out_len)
{
        V1beta1__PreferredAllocationRequest *q =
                v1beta1__preferred_allocation_request__unpack(NULL, len, in);
        V1beta1__PreferredAllocationResponse *a =
                v1beta1__preferred_allocation_response__unpack(NULL, out_len, out);

        if (!q || !a || a->n_container_responses != q->n_container_requests)
                abort();
        for (size_t i = 0; i < q->n_container_requests; i++) {
                const V1beta1__ContainerPreferredAllocationRequest *c = q->container_requests[i];
                const V1beta1__ContainerPreferredAllocationResponse *r = a->container_responses[i];

                if (r->n_deviceids > (size_t)c->allocation_size)
                        abort();
                for (size_t k = 0; k < r->n_deviceids; k++)
                        if (!in_list(r->deviceids[k], c->available_deviceids,
                                     c->n_available_deviceids) &&
                            !in_list(r->deviceids[k], c->must_include_deviceids,
                                     c->n_must_include_deviceids))
                                abort();
                if (!has_dups(c->available_deviceids, c->n_available_deviceids) &&
                    !has_dups(c->must_include_deviceids, c->n_must_include_deviceids) &&
                    has_dups(r->deviceids, r->n_deviceids))
                        abort();
        }
        v1beta1__preferred_allocation_request__free_unpacked(q, NULL);
        v1beta1__preferred_allocation_response__free_unpacked(a, NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const struct dp_handlers h = { NULL, prefer, check_ids };
        static bool init;
        const char *why = NULL;
        uint8_t *out = NULL;
        size_t out_len = 0;
        int r;

        if (!init) {
                struct dp_device devs[N_DEV];
                for (unsigned i = 0; i < N_DEV; i++) {
                        snprintf(devs[i].id, sizeof(devs[i].id), "GPU-%u", i);
                        devs[i].healthy = true;
                }
                if (dp_cache_init(&cache, devs, N_DEV) < 0)
                        abort();
                init = true;
        }
        if (size < 1)
                return 0;
        switch (data[0] % 5) {
        case 0:
                r = dp__allocate_answer(&h, data + 1, size - 1, &out, &out_len, &why);
                if (r == 0)
                        check_allocate(data + 1, size - 1, out, out_len);
                break;
        case 1:
                r = dp__preferred_answer(&h, data + 1, size - 1, &out, &out_len, &why);
                if (r == 0)
                        check_preferred(data + 1, size - 1, out, out_len);
                break;
        case 2:
                r = dp__prestart_answer(&h, data + 1, size - 1, &out, &out_len, &why);
                break;
        case 3: {
                char **ids = NULL;
                unsigned n = 0;
                r = dp__preferred_decode(data + 1, size - 1, &ids, &n, &why);
                if (r == 0) {
                        if (n > DP_MAX_IDS || ids[n] != NULL)
                                abort();
                        dp_strv_free(ids, n);
                }
                break;
        }
        default: {
                struct dp_container_devices *cd = NULL;
                size_t n = 0;
                r = dp__podresources_decode(data + 1, size - 1, "nvidia.com/gpu", &cd, &n, &why);
                if (r == 0) {
                        for (size_t i = 0; i < n; i++)
                                if (cd[i].n_ids == 0 || cd[i].n_ids > DP_MAX_IDS ||
                                    strnlen(cd[i].ns, sizeof(cd[i].ns)) == sizeof(cd[i].ns) ||
                                    strnlen(cd[i].pod, sizeof(cd[i].pod)) == sizeof(cd[i].pod))
                                        abort();
                        dp_container_devices_free_array(cd, n);
                }
                break;
        }
        }
        if (r < 0 && !why && r != -ENOMEM)
                abort(); /* every refusal says why */
        free(out);
        return 0;
}
