/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin's gRPC transport, and the only file that touches gRPC or protobuf-c.
 * Server: one thread drives one "next" completion queue for the DevicePlugin service; each
 * call is a small state machine whose tags live in the call struct.  ListAndWatch streams
 * are pushed from that thread, which polls a device-list generation every DP_POLL_MS.
 * Clients (Register, PodResources.List) are blocking unary calls on a "pluck" queue of their
 * own, made from the caller's thread, so Register never blocks the serving thread (the
 * kubelet calls GetDevicePluginOptions before it answers Register).
 * Ownership: handlers get borrowed strings valid for the call; gRPC status codes become
 * -errno here (dp__status_to_errno) and nowhere else.
 * Every message from the wire is decoded and answered by a function of bytes (the
 * "messages" section, dp-private.h) that knows nothing of gRPC, so the fuzz harness
 * test/fuzz/fuzz-dp-wire.c drives exactly what the kubelet's bytes reach.
 */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <assert.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/buf.h"
#include "../common/str.h"
#include "api.pb-c.h"
#include "dp-private.h"
#include "dp.h"
#include "podresources.pb-c.h"

#define DP_POLL_MS 50            /* device-list and stop checks on the serving thread */
#define DP_SOCKET_PATH_MAX 100   /* sun_path is 108 bytes; "unix:" is added */

enum dp_method {
        DP_METHOD_OPTIONS,
        DP_METHOD_LISTWATCH,
        DP_METHOD_PREFERRED,
        DP_METHOD_ALLOCATE,
        DP_METHOD_PRESTART,
        DP_METHOD_UNKNOWN,
        _DP_METHOD_MAX,
};

static const struct {
        const char *path;
        bool stream;
} methods[_DP_METHOD_MAX] = {
        [DP_METHOD_OPTIONS] = { "/v1beta1.DevicePlugin/GetDevicePluginOptions", false },
        [DP_METHOD_LISTWATCH] = { "/v1beta1.DevicePlugin/ListAndWatch", true },
        [DP_METHOD_PREFERRED] = { "/v1beta1.DevicePlugin/GetPreferredAllocation", false },
        [DP_METHOD_ALLOCATE] = { "/v1beta1.DevicePlugin/Allocate", false },
        [DP_METHOD_PRESTART] = { "/v1beta1.DevicePlugin/PreStartContainer", false },
        [DP_METHOD_UNKNOWN] = { NULL, false },
};

/* The one place gRPC status meets errno. */
static const int status_errno[] = {
        [GRPC_STATUS_OK] = 0,
        [GRPC_STATUS_CANCELLED] = -ECANCELED,
        [GRPC_STATUS_UNKNOWN] = -EIO,
        [GRPC_STATUS_INVALID_ARGUMENT] = -EINVAL,
        [GRPC_STATUS_DEADLINE_EXCEEDED] = -ETIMEDOUT,
        [GRPC_STATUS_NOT_FOUND] = -ENOENT,
        [GRPC_STATUS_ALREADY_EXISTS] = -EEXIST,
        [GRPC_STATUS_PERMISSION_DENIED] = -EPERM,
        [GRPC_STATUS_RESOURCE_EXHAUSTED] = -ENOSPC,
        [GRPC_STATUS_FAILED_PRECONDITION] = -EPERM,
        [GRPC_STATUS_ABORTED] = -ECANCELED,
        [GRPC_STATUS_OUT_OF_RANGE] = -ERANGE,
        [GRPC_STATUS_UNIMPLEMENTED] = -EOPNOTSUPP,
        [GRPC_STATUS_INTERNAL] = -EIO,
        [GRPC_STATUS_UNAVAILABLE] = -ECONNREFUSED,
        [GRPC_STATUS_DATA_LOSS] = -EIO,
        [GRPC_STATUS_UNAUTHENTICATED] = -EACCES,
};

static int
dp__status_to_errno(grpc_status_code s)
{
        if ((unsigned)s >= ELEMENTSOF(status_errno))
                return -EIO;
        return status_errno[s];
}

static grpc_status_code
dp__errno_to_status(int r)
{
        switch (r) {
        case 0: return GRPC_STATUS_OK;
        case -EINVAL: return GRPC_STATUS_INVALID_ARGUMENT;
        case -ENODEV: return GRPC_STATUS_INVALID_ARGUMENT;
        case -E2BIG: return GRPC_STATUS_RESOURCE_EXHAUSTED;
        case -ENOSPC: return GRPC_STATUS_RESOURCE_EXHAUSTED;
        case -EOPNOTSUPP: return GRPC_STATUS_UNIMPLEMENTED;
        default: return GRPC_STATUS_INTERNAL;
        }
}

void
dp_grpc_init(void)
{
        grpc_init();
}

void
dp_grpc_shutdown(void)
{
        grpc_shutdown_blocking();
}

/* --- byte buffers <-> protobuf-c ------------------------------------------------------ */

static grpc_byte_buffer *
dp__pack(const ProtobufCMessage *m)
{
        size_t n = protobuf_c_message_get_packed_size(m);
        grpc_slice sl;
        grpc_byte_buffer *bb;

        if (n > DP_MAX_MESSAGE_BYTES)
                return NULL;
        sl = grpc_slice_malloc(n);
        protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(sl));
        bb = grpc_raw_byte_buffer_create(&sl, 1);
        grpc_slice_unref(sl);
        return bb;
}

/* A received message's bytes, capped by DP_MAX_MESSAGE_BYTES; *ret is malloc()ed. */
static int
dp__bb_read(grpc_byte_buffer *bb, uint8_t **ret, size_t *ret_len)
{
        grpc_byte_buffer_reader rd;
        grpc_slice sl;
        uint8_t *p;
        size_t n;

        if (!bb)
                return -EBADMSG;
        if (grpc_byte_buffer_length(bb) > DP_MAX_MESSAGE_BYTES)
                return -E2BIG;
        if (!grpc_byte_buffer_reader_init(&rd, bb))
                return -EBADMSG;
        sl = grpc_byte_buffer_reader_readall(&rd);
        grpc_byte_buffer_reader_destroy(&rd);
        n = GRPC_SLICE_LENGTH(sl);
        p = malloc(n ? n : 1);
        if (p && n)
                memcpy(p, GRPC_SLICE_START_PTR(sl), n);
        grpc_slice_unref(sl);
        if (!p)
                return -ENOMEM;
        *ret = p;
        *ret_len = n;
        return 0;
}

static grpc_byte_buffer *
dp__bytes_bb(const uint8_t *p, size_t n)
{
        grpc_slice sl = grpc_slice_from_copied_buffer((const char *)p, n);
        grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);

        grpc_slice_unref(sl);
        return bb;
}

static void
dp__msg_freep(ProtobufCMessage **m)
{
        if (*m)
                protobuf_c_message_free_unpacked(*m, NULL);
}

/* --- messages: bytes in, answer out, no transport (dp-private.h) ------------------------ */

static ProtobufCMessage *
dp__unpack_bytes(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n)
{
        if (n > DP_MAX_MESSAGE_BYTES)
                return NULL;
        return protobuf_c_message_unpack(d, NULL, n, p);
}

/* Packs m into a malloc()ed buffer: 0, -ENOSPC over DP_MAX_MESSAGE_BYTES, -ENOMEM. */
static int
dp__pack_bytes(const ProtobufCMessage *m, uint8_t **ret, size_t *ret_len, const char **ret_why)
{
        size_t n = protobuf_c_message_get_packed_size(m);
        uint8_t *p;

        if (n > DP_MAX_MESSAGE_BYTES)
                return set_why(ret_why, "response too large"), -ENOSPC;
        p = malloc(n ? n : 1);
        if (!p)
                return -ENOMEM;
        protobuf_c_message_pack(m, p);
        *ret = p;
        *ret_len = n;
        return 0;
}

static const grpc_channel_args *
dp__channel_args(void)
{
        static grpc_arg args[2] = {
                { .type = GRPC_ARG_INTEGER, .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                  .value.integer = (int)DP_MAX_MESSAGE_BYTES },
                { .type = GRPC_ARG_INTEGER, .key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
                  .value.integer = (int)DP_MAX_MESSAGE_BYTES },
        };
        static const grpc_channel_args ca = { .num_args = 2, .args = args };
        return &ca;
}

static int
dp__target(const char *path, char *buf, size_t size)
{
        if (!path || path[0] != '/' || strlen(path) > DP_SOCKET_PATH_MAX)
                return -EINVAL;
        snprintf(buf, size, "unix:%s", path);
        return 0;
}

/* --- server ---------------------------------------------------------------------------- */

enum dp_tag_kind { TAG_NEW, TAG_READ, TAG_WRITE, TAG_CLOSE, TAG_DONE, TAG_SHUTDOWN };

struct dp_call;
struct dp_tag {
        struct dp_call *call;
        enum dp_tag_kind kind;
};

struct dp_call {
        struct dp_server *srv;
        enum dp_method method;
        grpc_call *call;
        grpc_call_details details;
        grpc_metadata_array md;
        grpc_byte_buffer *recv;
        grpc_byte_buffer *send;
        int cancelled;
        unsigned pending;     /* batches in flight */
        bool started;         /* TAG_NEW arrived with a call */
        bool closed;          /* RECV_CLOSE_ON_SERVER done */
        bool streaming;       /* a live ListAndWatch stream */
        bool writing;
        bool status_sent;
        uint64_t sent_gen;
        struct dp_call *next; /* srv->calls */
        struct dp_tag t_new, t_read, t_write, t_close, t_done;
};

struct dp_server {
        grpc_server *server;
        grpc_completion_queue *cq;
        pthread_t thread;
        bool thread_started;
        atomic_bool stop;
        struct dp_handlers h;
        struct dp_call *calls; /* every call object, including the one awaiting TAG_NEW */
        unsigned n_calls;
        bool shutting_down;
        bool shutdown_done;
        bool cq_down;
        struct dp_tag t_shutdown;

        pthread_mutex_t lock; /* guards the fields below */
        struct dp_device *devices;
        unsigned n_devices;
        uint64_t gen;
        struct dp_server_stats stats;
};

static void dp__call_free(struct dp_call *c);

static int
dp__request_call(struct dp_server *s)
{
        struct dp_call *c;

        if (s->shutting_down || s->n_calls >= DP_MAX_CALLS)
                return 0; /* re-requested when a call finishes */
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->srv = s;
        grpc_call_details_init(&c->details);
        grpc_metadata_array_init(&c->md);
        c->t_new = (struct dp_tag){ c, TAG_NEW };
        c->t_read = (struct dp_tag){ c, TAG_READ };
        c->t_write = (struct dp_tag){ c, TAG_WRITE };
        c->t_close = (struct dp_tag){ c, TAG_CLOSE };
        c->t_done = (struct dp_tag){ c, TAG_DONE };
        if (grpc_server_request_call(s->server, &c->call, &c->details, &c->md, s->cq, s->cq,
                                     &c->t_new) != GRPC_CALL_OK) {
                grpc_call_details_destroy(&c->details);
                grpc_metadata_array_destroy(&c->md);
                free(c);
                return -EIO;
        }
        c->pending = 1;
        c->next = s->calls;
        s->calls = c;
        s->n_calls++;
        return 0;
}

static void
dp__call_unlink(struct dp_call *c)
{
        struct dp_server *s = c->srv;

        for (struct dp_call **p = &s->calls; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        s->n_calls--;
                        break;
                }
}

static void
dp__call_free(struct dp_call *c)
{
        dp__call_unlink(c);
        if (c->call)
                grpc_call_unref(c->call);
        if (c->recv)
                grpc_byte_buffer_destroy(c->recv);
        if (c->send)
                grpc_byte_buffer_destroy(c->send);
        grpc_call_details_destroy(&c->details);
        grpc_metadata_array_destroy(&c->md);
        free(c);
}

static bool
dp__batch(struct dp_call *c, const grpc_op *ops, size_t n, struct dp_tag *tag)
{
        if (grpc_call_start_batch(c->call, ops, n, tag, NULL) != GRPC_CALL_OK)
                return false;
        c->pending++;
        return true;
}

/* Sends a unary answer: the message (when m is set and status is OK) and the status. */
/* Answers with status r; on success with message m (packed here) or the packed bytes p. */
static void
dp__reply_any(struct dp_call *c, const ProtobufCMessage *m, const uint8_t *p, size_t plen, int r,
              const char *why)
{
        grpc_op ops[3] = { 0 };
        size_t n = 0;
        grpc_slice details = grpc_slice_from_copied_string(why ? why : "");
        grpc_status_code st = dp__errno_to_status(r);

        if (st == GRPC_STATUS_OK && (m || p)) {
                c->send = m ? dp__pack(m) : dp__bytes_bb(p, plen);
                if (!c->send) {
                        st = GRPC_STATUS_RESOURCE_EXHAUSTED;
                        grpc_slice_unref(details);
                        details = grpc_slice_from_static_string("response too large");
                }
        }
        ops[n++] = (grpc_op){ .op = GRPC_OP_SEND_INITIAL_METADATA };
        if (st == GRPC_STATUS_OK && c->send)
                ops[n++] = (grpc_op){ .op = GRPC_OP_SEND_MESSAGE,
                                      .data.send_message.send_message = c->send };
        ops[n++] = (grpc_op){ .op = GRPC_OP_SEND_STATUS_FROM_SERVER,
                              .data.send_status_from_server = {
                                      .status = st, .status_details = &details } };
        pthread_mutex_lock(&c->srv->lock);
        if (st != GRPC_STATUS_OK)
                c->srv->stats.errors++;
        pthread_mutex_unlock(&c->srv->lock);
        c->status_sent = true;
        (void)dp__batch(c, ops, n, &c->t_done);
        grpc_slice_unref(details);
}

static void
dp__reply(struct dp_call *c, const ProtobufCMessage *m, int r, const char *why)
{
        dp__reply_any(c, m, NULL, 0, r, why);
}

/* Reads the request's bytes and answers with what fn makes of them. */
static void
dp__reply_with(struct dp_call *c, dp__answer_fn fn)
{
        CLEANUP(freep) uint8_t *in = NULL;
        CLEANUP(freep) uint8_t *out = NULL;
        size_t in_len = 0, out_len = 0;
        const char *why = NULL;
        int r;

        r = dp__bb_read(c->recv, &in, &in_len);
        if (r < 0)
                why = "unreadable request message";
        else
                r = fn(&c->srv->h, in, in_len, &out, &out_len, &why);
        dp__reply_any(c, NULL, out, out_len, r, why);
}

static void
dp__handle_options(struct dp_call *c)
{
        V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;

        o.pre_start_required = false;
        o.get_preferred_allocation_available = true;
        dp__reply(c, &o.base, 0, NULL);
}

static void
dp__handle_prestart(struct dp_call *c)
{
        dp__reply_with(c, dp__prestart_answer);
}

/* Everything in one container's preferred answer, freed together. */
struct dp_pref_answer {
        V1beta1__ContainerPreferredAllocationResponse resp;
        char *ids[DP_MAX_IDS];
};

static void
dp__preferred_one(const struct dp_handlers *h, const V1beta1__ContainerPreferredAllocationRequest *q,
                  struct dp_pref_answer *a)
{
        struct dp_pref_request req = {
                .available = (const char *const *)q->available_deviceids,
                .n_available = (unsigned)q->n_available_deviceids,
                .must = (const char *const *)q->must_include_deviceids,
                .n_must = (unsigned)q->n_must_include_deviceids,
                .size = (unsigned)q->allocation_size,
        };
        unsigned idx[DP_MAX_IDS];
        unsigned n = 0;
        int r = -ENOENT;

        v1beta1__container_preferred_allocation_response__init(&a->resp);
        a->resp.deviceids = a->ids;
        if (h->preferred)
                r = h->preferred(h->userdata, &req, idx);
        if (r == (int)req.size) {
                for (unsigned i = 0; i < req.size; i++)
                        a->ids[n++] = q->available_deviceids[idx[i]];
        } else {
                /* Never an error here (the pod would fail admission): must-include first,
                 * then the first available ones not yet taken. */
                for (unsigned i = 0; i < req.n_must && n < req.size; i++)
                        a->ids[n++] = q->must_include_deviceids[i];
                for (unsigned i = 0; i < req.n_available && n < req.size; i++) {
                        bool taken = false;
                        for (unsigned k = 0; k < n && !taken; k++)
                                taken = strcmp(a->ids[k], q->available_deviceids[i]) == 0;
                        if (!taken)
                                a->ids[n++] = q->available_deviceids[i];
                }
        }
        a->resp.n_deviceids = n;
}

int
dp__preferred_answer(const struct dp_handlers *h, const uint8_t *in, size_t len, uint8_t **ret,
                     size_t *ret_len, const char **ret_why)
{
        CLEANUP(dp__msg_freep) ProtobufCMessage *m = NULL;
        V1beta1__PreferredAllocationRequest *req;
        V1beta1__PreferredAllocationResponse o = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
        CLEANUP(freep) struct dp_pref_answer *ans = NULL;
        V1beta1__ContainerPreferredAllocationResponse *resps[DP_MAX_CONTAINERS];

        m = dp__unpack_bytes(&v1beta1__preferred_allocation_request__descriptor, in, len);
        req = (V1beta1__PreferredAllocationRequest *)m;
        if (!req)
                return set_why(ret_why, "malformed PreferredAllocationRequest"), -EINVAL;
        if (req->n_container_requests > DP_MAX_CONTAINERS)
                return set_why(ret_why, "too many container requests"), -E2BIG;
        for (size_t i = 0; i < req->n_container_requests; i++) {
                const V1beta1__ContainerPreferredAllocationRequest *q = req->container_requests[i];
                if (q->n_available_deviceids > DP_MAX_IDS || q->n_must_include_deviceids > DP_MAX_IDS)
                        return set_why(ret_why, "too many device IDs"), -E2BIG;
                if (q->allocation_size < 0 || (size_t)q->allocation_size > q->n_available_deviceids ||
                    q->n_must_include_deviceids > (size_t)q->allocation_size)
                        return set_why(ret_why,
                                       "allocation_size out of range for the available IDs"),
                               -EINVAL;
        }
        ans = calloc(req->n_container_requests ? req->n_container_requests : 1, sizeof(*ans));
        if (!ans)
                return -ENOMEM;
        for (size_t i = 0; i < req->n_container_requests; i++) {
                dp__preferred_one(h, req->container_requests[i], &ans[i]);
                resps[i] = &ans[i].resp;
        }
        o.n_container_responses = req->n_container_requests;
        o.container_responses = resps;
        return dp__pack_bytes(&o.base, ret, ret_len, ret_why);
}

static void
dp__handle_preferred(struct dp_call *c)
{
        dp__reply_with(c, dp__preferred_answer);
}

/* One container's Allocate answer: env, CDI devices, and the strings they point at. */
struct dp_alloc_answer {
        V1beta1__ContainerAllocateResponse resp;
        V1beta1__ContainerAllocateResponse__EnvsEntry env;
        V1beta1__ContainerAllocateResponse__EnvsEntry *envp[1];
        V1beta1__CDIDevice cdi[DP_MAX_IDS];
        V1beta1__CDIDevice *cdip[DP_MAX_IDS];
        char *cdi_names[DP_MAX_IDS];
        char *visible;
};

static void
dp__alloc_answer_release(struct dp_alloc_answer *a, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                for (size_t k = 0; k < ELEMENTSOF(a[i].cdi_names); k++)
                        free(a[i].cdi_names[k]);
                free(a[i].visible);
        }
        free(a);
}

static int
dp__allocate_one(const struct dp_handlers *h, const V1beta1__ContainerAllocateRequest *q,
                 struct dp_alloc_answer *a, const char **ret_why)
{
        const char *const *ids = (const char *const *)q->devices_ids;
        unsigned n = (unsigned)q->n_devices_ids;
        size_t vlen = 1;
        int r;

        if (n == 0 || n > DP_MAX_IDS)
                return set_why(ret_why, "a container request has no or too many device IDs"),
                       -EINVAL;
        if (h->allocate_check) {
                r = h->allocate_check(h->userdata, ids, n);
                if (r < 0)
                        return set_why(ret_why, "a device ID is not a GPU of this node"), r;
        }
        for (unsigned i = 0; i < n; i++)
                vlen += strlen(ids[i]) + 1;
        a->visible = malloc(vlen);
        if (!a->visible)
                return -ENOMEM;
        r = dp_join_ids(ids, n, a->visible, vlen);
        if (r < 0)
                return r;
        v1beta1__container_allocate_response__init(&a->resp);
        v1beta1__container_allocate_response__envs_entry__init(&a->env);
        a->env.key = (char *)DP_VISIBLE_DEVICES_ENV;
        a->env.value = a->visible;
        a->envp[0] = &a->env;
        a->resp.n_envs = 1;
        a->resp.envs = a->envp;
        for (unsigned i = 0; i < n; i++) {
                if (asprintf(&a->cdi_names[i], "%s=%s", DP_CDI_KIND, ids[i]) < 0) {
                        a->cdi_names[i] = NULL;
                        return -ENOMEM;
                }
                v1beta1__cdidevice__init(&a->cdi[i]);
                a->cdi[i].name = a->cdi_names[i];
                a->cdip[i] = &a->cdi[i];
        }
        a->resp.n_cdi_devices = n;
        a->resp.cdi_devices = a->cdip;
        return 0;
}

int
dp__allocate_answer(const struct dp_handlers *h, const uint8_t *in, size_t len, uint8_t **ret,
                    size_t *ret_len, const char **ret_why)
{
        CLEANUP(dp__msg_freep) ProtobufCMessage *m = NULL;
        V1beta1__AllocateRequest *req;
        V1beta1__AllocateResponse o = V1BETA1__ALLOCATE_RESPONSE__INIT;
        V1beta1__ContainerAllocateResponse *resps[DP_MAX_CONTAINERS];
        struct dp_alloc_answer *ans;
        int r = 0;

        m = dp__unpack_bytes(&v1beta1__allocate_request__descriptor, in, len);
        req = (V1beta1__AllocateRequest *)m;
        if (!req)
                return set_why(ret_why, "malformed AllocateRequest"), -EINVAL;
        if (req->n_container_requests > DP_MAX_CONTAINERS)
                return set_why(ret_why, "too many container requests"), -E2BIG;
        ans = calloc(req->n_container_requests ? req->n_container_requests : 1, sizeof(*ans));
        if (!ans)
                return -ENOMEM;
        for (size_t i = 0; i < req->n_container_requests && r >= 0; i++) {
                r = dp__allocate_one(h, req->container_requests[i], &ans[i], ret_why);
                resps[i] = &ans[i].resp;
        }
        o.n_container_responses = req->n_container_requests;
        o.container_responses = resps;
        if (r >= 0)
                r = dp__pack_bytes(&o.base, ret, ret_len, ret_why);
        dp__alloc_answer_release(ans, req->n_container_requests);
        return r;
}

int
dp__prestart_answer(const struct dp_handlers *h, const uint8_t *in, size_t len, uint8_t **ret,
                    size_t *ret_len, const char **ret_why)
{
        CLEANUP(dp__msg_freep) ProtobufCMessage *m = NULL;
        V1beta1__PreStartContainerResponse o = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;

        (void)h;
        m = dp__unpack_bytes(&v1beta1__pre_start_container_request__descriptor, in, len);
        if (!m)
                return set_why(ret_why, "malformed PreStartContainerRequest"), -EINVAL;
        return dp__pack_bytes(&o.base, ret, ret_len, ret_why);
}

static void
dp__handle_allocate(struct dp_call *c)
{
        dp__reply_with(c, dp__allocate_answer);
}

/* Sends the current device list on a stream when it changed since the last send. */
static void
dp__stream_push(struct dp_call *c)
{
        struct dp_server *s = c->srv;
        V1beta1__ListAndWatchResponse o = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
        CLEANUP(freep) V1beta1__Device *devs = NULL;
        CLEANUP(freep) V1beta1__Device **devp = NULL;
        grpc_op ops[2] = { 0 };
        size_t n = 0;
        uint64_t gen;

        if (!c->streaming || c->writing || c->closed)
                return;
        pthread_mutex_lock(&s->lock);
        gen = s->gen;
        if (gen == c->sent_gen) {
                pthread_mutex_unlock(&s->lock);
                return;
        }
        devs = calloc(s->n_devices + 1, sizeof(*devs));
        devp = calloc(s->n_devices + 1, sizeof(*devp));
        if (!devs || !devp) {
                pthread_mutex_unlock(&s->lock);
                return; /* retried on the next poll */
        }
        for (unsigned i = 0; i < s->n_devices; i++) {
                v1beta1__device__init(&devs[i]);
                devs[i].id = s->devices[i].id;
                devs[i].health = (char *)(s->devices[i].healthy ? "Healthy" : "Unhealthy");
                devp[i] = &devs[i];
        }
        o.n_devices = s->n_devices;
        o.devices = devp;
        c->send = dp__pack(&o.base);
        s->stats.updates_sent++;
        pthread_mutex_unlock(&s->lock);
        if (!c->send)
                return;
        if (c->sent_gen == 0)
                ops[n++] = (grpc_op){ .op = GRPC_OP_SEND_INITIAL_METADATA };
        ops[n++] = (grpc_op){ .op = GRPC_OP_SEND_MESSAGE, .data.send_message.send_message = c->send };
        c->sent_gen = gen;
        c->writing = dp__batch(c, ops, n, &c->t_write);
}

static void
dp__on_new(struct dp_call *c, bool ok)
{
        struct dp_server *s = c->srv;
        grpc_op close_op = { .op = GRPC_OP_RECV_CLOSE_ON_SERVER,
                             .data.recv_close_on_server.cancelled = &c->cancelled };
        grpc_op read_op = { .op = GRPC_OP_RECV_MESSAGE,
                            .data.recv_message.recv_message = &c->recv };

        if (!ok || !c->call) {
                c->closed = true; /* never started: nothing more will arrive for it */
                return;
        }
        c->started = true;
        c->method = DP_METHOD_UNKNOWN;
        for (size_t i = 0; i < ELEMENTSOF(methods); i++)
                if (methods[i].path && grpc_slice_str_cmp(c->details.method, methods[i].path) == 0) {
                        c->method = (enum dp_method)i;
                        break;
                }
        pthread_mutex_lock(&s->lock);
        s->stats.calls[c->method]++;
        pthread_mutex_unlock(&s->lock);
        if (!dp__batch(c, &close_op, 1, &c->t_close))
                c->closed = true;
        if (c->method == DP_METHOD_UNKNOWN)
                return dp__reply(c, NULL, -EOPNOTSUPP, "unknown method");
        (void)dp__batch(c, &read_op, 1, &c->t_read);
}

static void
dp__on_read(struct dp_call *c, bool ok)
{
        struct dp_server *s = c->srv;
        unsigned streams;

        if (!ok || c->closed)
                return;
        if (!c->recv && !methods[c->method].stream)
                return dp__reply(c, NULL, -EINVAL, "no request message");
        switch (c->method) {
        case DP_METHOD_OPTIONS:
                return dp__handle_options(c);
        case DP_METHOD_PREFERRED:
                return dp__handle_preferred(c);
        case DP_METHOD_ALLOCATE:
                return dp__handle_allocate(c);
        case DP_METHOD_PRESTART:
                return dp__handle_prestart(c);
        case DP_METHOD_LISTWATCH:
                pthread_mutex_lock(&s->lock);
                streams = s->stats.streams;
                if (streams < DP_MAX_STREAMS)
                        s->stats.streams++;
                pthread_mutex_unlock(&s->lock);
                if (streams >= DP_MAX_STREAMS)
                        return dp__reply(c, NULL, -ENOSPC, "too many ListAndWatch streams");
                c->streaming = true;
                c->sent_gen = 0;
                return dp__stream_push(c);
        default:
                return dp__reply(c, NULL, -EOPNOTSUPP, "unknown method");
        }
}

static void
dp__on_close(struct dp_call *c)
{
        struct dp_server *s = c->srv;

        c->closed = true;
        if (c->streaming) {
                c->streaming = false;
                pthread_mutex_lock(&s->lock);
                s->stats.streams--;
                pthread_mutex_unlock(&s->lock);
        }
}

static void
dp__on_event(struct dp_server *s, struct dp_tag *tag, bool ok)
{
        struct dp_call *c = tag->call;

        if (tag->kind == TAG_SHUTDOWN) {
                s->shutdown_done = true;
                return;
        }
        assert(c->pending > 0);
        c->pending--;
        switch (tag->kind) {
        case TAG_NEW:
                dp__on_new(c, ok);
                (void)dp__request_call(s);
                break;
        case TAG_READ:
                dp__on_read(c, ok);
                break;
        case TAG_WRITE:
                c->writing = false;
                grpc_byte_buffer_destroy(c->send);
                c->send = NULL;
                if (ok)
                        dp__stream_push(c);
                break;
        case TAG_CLOSE:
                dp__on_close(c);
                break;
        case TAG_DONE:
        case TAG_SHUTDOWN:
                break;
        }
        if (c->pending == 0 && c->closed) {
                dp__call_free(c);
                (void)dp__request_call(s);
        }
}

static void *
dp__serve(void *userdata)
{
        struct dp_server *s = userdata;

        (void)dp__request_call(s);
        for (;;) {
                gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                                     gpr_time_from_millis(DP_POLL_MS, GPR_TIMESPAN));
                grpc_event ev = grpc_completion_queue_next(s->cq, deadline, NULL);

                if (ev.type == GRPC_QUEUE_SHUTDOWN)
                        break;
                if (ev.type == GRPC_OP_COMPLETE)
                        dp__on_event(s, ev.tag, ev.success);
                if (atomic_load(&s->stop) && !s->shutting_down) {
                        s->shutting_down = true;
                        grpc_server_shutdown_and_notify(s->server, s->cq, &s->t_shutdown);
                        grpc_server_cancel_all_calls(s->server);
                }
                if (s->shutting_down) {
                        if (s->shutdown_done && s->n_calls == 0 && !s->cq_down) {
                                /* Everything answered: the queue may end; drain it to the
                                 * SHUTDOWN event (the "next" queue's own drain). */
                                s->cq_down = true;
                                grpc_completion_queue_shutdown(s->cq);
                        }
                        continue;
                }
                for (struct dp_call *c = s->calls; c; c = c->next)
                        dp__stream_push(c);
        }
        return NULL;
}

int
dp_server_new(const char *path, const struct dp_handlers *h, struct dp_server **ret)
{
        CLEANUP(freep) struct dp_server *s = NULL;
        char target[DP_SOCKET_PATH_MAX + 8];
        int r;

        r = dp__target(path, target, sizeof(target));
        if (r < 0)
                return r;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->h = *h;
        s->t_shutdown = (struct dp_tag){ NULL, TAG_SHUTDOWN };
        s->gen = 1;
        atomic_init(&s->stop, false);
        pthread_mutex_init(&s->lock, NULL);
        (void)unlink(path);
        s->cq = grpc_completion_queue_create_for_next(NULL);
        s->server = grpc_server_create(dp__channel_args(), NULL);
        grpc_server_register_completion_queue(s->server, s->cq, NULL);
        grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
        int port = grpc_server_add_http2_port(s->server, target, creds);
        grpc_server_credentials_release(creds);
        if (port == 0) {
                grpc_server_destroy(s->server);
                grpc_completion_queue_shutdown(s->cq);
                while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
                               .type != GRPC_QUEUE_SHUTDOWN)
                        ;
                grpc_completion_queue_destroy(s->cq);
                pthread_mutex_destroy(&s->lock);
                return -EADDRINUSE;
        }
        grpc_server_start(s->server);
        if (pthread_create(&s->thread, NULL, dp__serve, s) != 0) {
                atomic_store(&s->stop, true);
                dp__serve(s); /* runs the shutdown path on this thread */
                grpc_server_destroy(s->server);
                grpc_completion_queue_destroy(s->cq);
                pthread_mutex_destroy(&s->lock);
                return -ENOMEM;
        }
        s->thread_started = true;
        *ret = TAKE_PTR(s);
        return 0;
}

struct dp_server *
dp_server_free(struct dp_server *s)
{
        if (!s)
                return NULL;
        atomic_store(&s->stop, true);
        if (s->thread_started)
                pthread_join(s->thread, NULL);
        grpc_server_destroy(s->server);
        grpc_completion_queue_destroy(s->cq);
        pthread_mutex_destroy(&s->lock);
        free(s->devices);
        free(s);
        return NULL;
}

int
dp_server_set_devices(struct dp_server *s, const struct dp_device *devs, unsigned n)
{
        struct dp_device *copy = calloc(n ? n : 1, sizeof(*copy));

        if (!copy)
                return -ENOMEM;
        if (n)
                memcpy(copy, devs, n * sizeof(*copy));
        pthread_mutex_lock(&s->lock);
        free(s->devices);
        s->devices = copy;
        s->n_devices = n;
        s->gen++;
        pthread_mutex_unlock(&s->lock);
        return 0;
}

void
dp_server_get_stats(struct dp_server *s, struct dp_server_stats *ret)
{
        pthread_mutex_lock(&s->lock);
        *ret = s->stats;
        pthread_mutex_unlock(&s->lock);
}

/* --- clients ----------------------------------------------------------------------------- */

/* One blocking unary call on a pluck queue of its own.  *ret gets the response bytes
 * (malloc()ed), which the caller decodes with a dp__*_decode function. */
static int
dp__unary(const char *path, const char *method, const ProtobufCMessage *req, int timeout_ms,
          uint8_t **ret, size_t *ret_len, const char **ret_why)
{
        char target[DP_SOCKET_PATH_MAX + 8];
        grpc_channel *ch;
        grpc_completion_queue *cq;
        grpc_call *call;
        grpc_metadata_array init_md, trail_md;
        grpc_byte_buffer *send, *recv = NULL;
        grpc_status_code status = GRPC_STATUS_UNKNOWN;
        grpc_slice details = grpc_empty_slice();
        grpc_event ev;
        gpr_timespec deadline;
        uint8_t *m = NULL;
        size_t m_len = 0;
        int r;

        r = dp__target(path, target, sizeof(target));
        if (r < 0)
                return set_why(ret_why, "socket path is not absolute or too long"), r;
        send = dp__pack(req);
        if (!send)
                return -E2BIG;
        grpc_channel_credentials *creds = grpc_insecure_credentials_create();
        ch = grpc_channel_create(target, creds, dp__channel_args());
        grpc_channel_credentials_release(creds);
        cq = grpc_completion_queue_create_for_pluck(NULL);
        deadline = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
        call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                        grpc_slice_from_static_string(method), NULL, deadline, NULL);
        grpc_metadata_array_init(&init_md);
        grpc_metadata_array_init(&trail_md);
        grpc_op ops[] = {
                { .op = GRPC_OP_SEND_INITIAL_METADATA },
                { .op = GRPC_OP_SEND_MESSAGE, .data.send_message.send_message = send },
                { .op = GRPC_OP_SEND_CLOSE_FROM_CLIENT },
                { .op = GRPC_OP_RECV_INITIAL_METADATA,
                  .data.recv_initial_metadata.recv_initial_metadata = &init_md },
                { .op = GRPC_OP_RECV_MESSAGE, .data.recv_message.recv_message = &recv },
                { .op = GRPC_OP_RECV_STATUS_ON_CLIENT,
                  .data.recv_status_on_client = { .trailing_metadata = &trail_md,
                                                  .status = &status,
                                                  .status_details = &details } },
        };
        if (grpc_call_start_batch(call, ops, ELEMENTSOF(ops), call, NULL) != GRPC_CALL_OK) {
                r = -EIO;
        } else {
                /* The call's deadline ends it; the margin only guards against a stuck core. */
                ev = grpc_completion_queue_pluck(
                        cq, call,
                        gpr_time_add(deadline, gpr_time_from_millis(2000, GPR_TIMESPAN)), NULL);
                if (ev.type != GRPC_OP_COMPLETE) {
                        grpc_call_cancel(call, NULL);
                        (void)grpc_completion_queue_pluck(cq, call,
                                                          gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                        r = -ETIMEDOUT;
                } else {
                        r = dp__status_to_errno(status);
                }
        }
        if (r == 0) {
                r = dp__bb_read(recv, &m, &m_len);
                if (r < 0)
                        set_why(ret_why, "unreadable response message");
        } else if (r == -ECONNREFUSED) {
                set_why(ret_why, "nobody answers on the socket");
        } else if (r != -ETIMEDOUT && r != -EIO) {
                set_why(ret_why, "the peer refused the call");
        }
        if (recv)
                grpc_byte_buffer_destroy(recv);
        grpc_byte_buffer_destroy(send);
        grpc_slice_unref(details);
        grpc_metadata_array_destroy(&init_md);
        grpc_metadata_array_destroy(&trail_md);
        grpc_call_unref(call);
        /* The pluck queue's own drain: after shutdown, pluck reports SHUTDOWN. */
        grpc_completion_queue_shutdown(cq);
        while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
                       .type != GRPC_QUEUE_SHUTDOWN)
                ;
        grpc_completion_queue_destroy(cq);
        grpc_channel_destroy(ch);
        if (r < 0)
                return r;
        *ret = m;
        *ret_len = m_len;
        return 0;
}

int
dp_register(const char *kubelet_path, const char *endpoint, const char *resource,
            int timeout_ms, const char **ret_why)
{
        V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
        V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
        CLEANUP(freep) uint8_t *resp = NULL;
        CLEANUP(dp__msg_freep) ProtobufCMessage *m = NULL;
        size_t len = 0;
        int r;

        opts.get_preferred_allocation_available = true;
        req.version = (char *)DP_API_VERSION;
        req.endpoint = (char *)endpoint;
        req.resource_name = (char *)resource;
        req.options = &opts;
        r = dp__unary(kubelet_path, "/v1beta1.Registration/Register", &req.base, timeout_ms,
                      &resp, &len, ret_why);
        if (r < 0)
                return r;
        m = dp__unpack_bytes(&v1beta1__empty__descriptor, resp, len);
        if (!m)
                return set_why(ret_why, "malformed response message"), -EBADMSG;
        return 0;
}

void
dp_strv_free(char **v, unsigned n)
{
        if (!v)
                return;
        for (unsigned i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

int
dp__preferred_decode(const uint8_t *in, size_t len, char ***ret_ids, unsigned *ret_n,
                     const char **ret_why)
{
        CLEANUP(dp__msg_freep) ProtobufCMessage *m = NULL;
        const V1beta1__PreferredAllocationResponse *resp;
        const V1beta1__ContainerPreferredAllocationResponse *c;
        char **ids;

        m = dp__unpack_bytes(&v1beta1__preferred_allocation_response__descriptor, in, len);
        if (!m)
                return set_why(ret_why, "malformed response message"), -EBADMSG;
        resp = (const V1beta1__PreferredAllocationResponse *)m;
        if (resp->n_container_responses != 1 || resp->container_responses[0]->n_deviceids > DP_MAX_IDS)
                return set_why(ret_why, "answer does not have one container"), -EBADMSG;
        c = resp->container_responses[0];
        ids = calloc(c->n_deviceids + 1, sizeof(*ids));
        if (!ids)
                return -ENOMEM;
        for (size_t i = 0; i < c->n_deviceids; i++) {
                ids[i] = strdup(c->deviceids[i]);
                if (!ids[i]) {
                        dp_strv_free(ids, (unsigned)i);
                        return -ENOMEM;
                }
        }
        *ret_ids = ids;
        *ret_n = (unsigned)c->n_deviceids;
        return 0;
}

int
dp_preferred_call(const char *path, const char *const *available, unsigned n_available,
                  const char *const *must, unsigned n_must, unsigned size, int timeout_ms,
                  char ***ret_ids, unsigned *ret_n, const char **ret_why)
{
        V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
        V1beta1__ContainerPreferredAllocationRequest creq =
                V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
        V1beta1__ContainerPreferredAllocationRequest *creqs[1] = { &creq };
        CLEANUP(freep) uint8_t *resp = NULL;
        size_t len = 0;
        int r;

        if (n_available > DP_MAX_IDS || n_must > DP_MAX_IDS || size > DP_MAX_IDS)
                return -E2BIG;
        creq.n_available_deviceids = n_available;
        creq.available_deviceids = (char **)available;
        creq.n_must_include_deviceids = n_must;
        creq.must_include_deviceids = (char **)must;
        creq.allocation_size = (int32_t)size;
        req.n_container_requests = 1;
        req.container_requests = creqs;
        r = dp__unary(path, "/v1beta1.DevicePlugin/GetPreferredAllocation", &req.base, timeout_ms,
                      &resp, &len, ret_why);
        if (r < 0)
                return r;
        return dp__preferred_decode(resp, len, ret_ids, ret_n, ret_why);
}

void
dp_container_devices_free_array(struct dp_container_devices *a, size_t n)
{
        if (!a)
                return;
        for (size_t i = 0; i < n; i++) {
                for (unsigned k = 0; k < a[i].n_ids; k++)
                        free(a[i].ids[k]);
                free(a[i].ids);
        }
        free(a);
}

int
dp__podresources_decode(const uint8_t *in, size_t len, const char *resource,
                        struct dp_container_devices **ret, size_t *ret_n, const char **ret_why)
{
        CLEANUP(dp__msg_freep) ProtobufCMessage *m = NULL;
        V1__ListPodResourcesResponse *resp;
        struct dp_container_devices *out = NULL;
        size_t n = 0, cap = 0;

        m = dp__unpack_bytes(&v1__list_pod_resources_response__descriptor, in, len);
        if (!m)
                return set_why(ret_why, "malformed response message"), -EBADMSG;
        resp = (V1__ListPodResourcesResponse *)m;
        for (size_t p = 0; p < resp->n_pod_resources; p++) {
                const V1__PodResources *pr = resp->pod_resources[p];
                for (size_t c = 0; c < pr->n_containers; c++) {
                        const V1__ContainerResources *cr = pr->containers[c];
                        struct dp_container_devices *e;
                        size_t total = 0;

                        /* The real kubelet lists one ContainerDevices per device (grouped by
                         * NUMA affinity), not one per resource: gather them into one
                         * record per container. */
                        for (size_t d = 0; d < cr->n_devices; d++)
                                if (strcmp(cr->devices[d]->resource_name, resource) == 0)
                                        total += cr->devices[d]->n_device_ids;
                        if (total == 0)
                                continue;
                        if (total > DP_MAX_IDS || n >= DP_MAX_PODS * 4) {
                                dp_container_devices_free_array(out, n);
                                return set_why(ret_why, "PodResources answer over the caps"), -E2BIG;
                        }
                        if (n == cap) {
                                size_t nc = cap ? cap * 2 : 16;
                                e = realloc(out, nc * sizeof(*out));
                                if (!e) {
                                        dp_container_devices_free_array(out, n);
                                        return -ENOMEM;
                                }
                                out = e;
                                cap = nc;
                        }
                        e = &out[n];
                        *e = (struct dp_container_devices){ 0 };
                        (void)str_copy(e->ns, sizeof(e->ns), pr->namespace_, strlen(pr->namespace_));
                        (void)str_copy(e->pod, sizeof(e->pod), pr->name, strlen(pr->name));
                        (void)str_copy(e->container, sizeof(e->container), cr->name, strlen(cr->name));
                        e->ids = calloc(total, sizeof(char *));
                        n++;
                        if (!e->ids) {
                                dp_container_devices_free_array(out, n);
                                return -ENOMEM;
                        }
                        for (size_t d = 0; d < cr->n_devices; d++) {
                                const V1__ContainerDevices *cd = cr->devices[d];
                                if (strcmp(cd->resource_name, resource) != 0)
                                        continue;
                                for (size_t k = 0; k < cd->n_device_ids; k++) {
                                        e->ids[e->n_ids] = strdup(cd->device_ids[k]);
                                        if (!e->ids[e->n_ids]) {
                                                dp_container_devices_free_array(out, n);
                                                return -ENOMEM;
                                        }
                                        e->n_ids++;
                                }
                        }
                }
        }
        *ret = out;
        *ret_n = n;
        return 0;
}

int
dp_podresources_list(const char *path, const char *resource, int timeout_ms,
                     struct dp_container_devices **ret, size_t *ret_n, const char **ret_why)
{
        V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
        CLEANUP(freep) uint8_t *resp = NULL;
        size_t len = 0;
        int r;

        r = dp__unary(path, "/v1.PodResourcesLister/List", &req.base, timeout_ms, &resp, &len,
                      ret_why);
        if (r < 0)
                return r;
        return dp__podresources_decode(resp, len, resource, ret, ret_n, ret_why);
}
