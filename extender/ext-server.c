/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP side: libmicrohttpd with an internal thread pool, optional TLS and client
 * certificates through its GnuTLS support.  This file only moves bytes and bounds what a
 * client can hold: connections (a total and a per-address limit; deadlines for the request
 * head and body, enforced by a reaper thread, since microhttpd's own timeout only sees
 * silence), and request bodies.  A body is capped at EXT_MAX_BODY (a larger Content-Length
 * is answered 413 before a byte of it is read; a chunked body is cut off at the cap) and is
 * held in a buffer charged to one budget shared by every connection (live and pooled
 * buffers together at most body_budget: a request that would pass it is answered 503 or,
 * mid-body, cut off).  Under overload a decision request (filter, prioritize, preempt)
 * whose bytes waited unread too long is answered 503 with Retry-After before its body is
 * read (admission control: see queue_shed()).  The complete body goes to ext_handle() and
 * the answer is queued.
 * Per-connection state lives in struct conn, owned by microhttpd's connection and freed
 * (its buffer back to the pool) in the completion hook; per-socket deadlines live in struct
 * sock, owned by microhttpd's connection notifications.
 */
#include "ext-server.h"

#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>

#include "file.h"
#include "log.h"
#include "str.h"

#define EXT_MAX_PEM_BYTES (1u << 20)
#define EXT_MAX_LISTEN_LEN 300
#define EXT_BODY_FIRST_ALLOC (64u << 10) /* a chunked body's first buffer; doubles from there */
#define EXT_REAPER_TICK_MS 200
#define EXT_RETRY_AFTER "1" /* seconds, on every 503 */

/* One open socket, for the deadline reaper: microhttpd's own timeout only closes a
 * connection that goes quiet, so one that trickles its head or body a byte at a time would
 * live forever.  Every socket has a deadline (head: idle_timeout after it opened or after its
 * previous answer; body: body_timeout after its head; none while the request is handled);
 * the reaper shuts down a socket past its deadline, and microhttpd then closes it as it
 * would any connection the client dropped.  Entries are created and removed by microhttpd's
 * connection notifications, which come before it closes the descriptor, and only under
 * sock_lock; so the reaper never touches a descriptor that has been closed or reused. */
struct sock {
        struct sock *prev, *next;
        int fd;
        bool in_body;
        uint64_t deadline_ns; /* 0: none */
        /* The client certificate was verified on this connection: it stays the one of the
         * handshake (a TLS 1.2 renegotiation ends the connection), so later requests skip
         * the chain check, which was a sixth of this process's CPU under a busy scheduler.
         * Read and written only by the worker that serves the connection, not under
         * sock_lock. */
        bool cert_ok;
};

struct ext_server {
        struct MHD_Daemon *daemon;
        struct ext_state *state;
        char *cert, *key, *ca;
        bool client_ca;
        uint64_t idle_timeout_ns, body_timeout_ns;
        uint32_t queue_timeout_ms;
        /* Body buffers: mapped, and kept for reuse when freed.  live (held by connections)
         * + pooled <= body_budget, always; all three under pool_lock. */
        pthread_mutex_t pool_lock;
        size_t body_budget, live_bytes, pooled_bytes;
        size_t small_reserve;   /* the budget's last bytes, for bodies up to EXT_BODY_SMALL */
        struct pooled *pool;
        unsigned n_pooled;
        pthread_mutex_t sock_lock;
        pthread_cond_t reaper_wake;
        struct sock *socks;
        pthread_t reaper;
        bool reaper_started, stopping;
};

struct conn {
        enum ext_verb verb;
        bool cut;           /* refused mid-body: every later call closes the connection */
        bool sheddable;     /* a decision request: admission applies (queue_shed()) */
        uint32_t wait_ms;   /* how long its head waited unread */
        uint64_t start_ns;
        char *body;         /* from body_get(): alloc bytes, charged to the budget */
        size_t len, alloc;
};

/* --- body buffers -----------------------------------------------------------------------
 * Mapped (mmap) rather than malloc()ed, so that what the process holds for bodies is exactly
 * what the budget counts: with malloc, glibc kept freed large blocks per thread arena and
 * fragments between doubling buffers (20 unfinished 15 MiB bodies under a 64 MiB budget
 * peaked at 85-100 MiB RSS, 6 endless chunked bodies at 94 MiB).  A freed buffer is kept in
 * a small pool and handed to the next body that fits, because a fresh mapping's page
 * faults are dear on the development VM (a fresh mapping per 4.5 MB request cost 25 ms of
 * CPU more); pooled bytes count against the budget too, and are unmapped first when a new
 * body needs room. */

#define EXT_BODY_POOL_MAX 64  /* buffers kept for reuse */
/* Large bodies cannot take the last EXT_BODY_RESERVE of the budget (when the budget has that
 * much beyond one largest body), so that clients holding large bodies half-sent cannot
 * starve the scheduler's usual requests (a filter with 10,000 node names is 170 KB). */
#define EXT_BODY_SMALL (1u << 20)
#define EXT_BODY_RESERVE (8u << 20)
#define EXT_BODY_PAGE 4096u

struct pooled {
        struct pooled *next; /* written into the idle buffer itself */
        size_t size;
};

static size_t
page_round(size_t n)
{
        return (n + EXT_BODY_PAGE - 1) / EXT_BODY_PAGE * EXT_BODY_PAGE;
}

/* A buffer of at least n bytes, charged to the budget: a pooled one of at most twice the
 * size, else a new mapping.  0, -ENOBUFS (the budget is spent by live bodies), -ENOMEM. */
static int
body_get(struct ext_server *srv, size_t n, char **ret, size_t *ret_size)
{
        size_t size = page_round(n);
        size_t limit = srv->body_budget - (size > EXT_BODY_SMALL ? srv->small_reserve : 0);
        struct pooled **best = NULL, *k;
        void *p;

        pthread_mutex_lock(&srv->pool_lock);
        for (struct pooled **pp = &srv->pool; *pp; pp = &(*pp)->next)
                if ((*pp)->size >= size && (*pp)->size / 2 <= size &&
                    (!best || (*pp)->size < (*best)->size))
                        best = pp;
        if (best && (k = *best)->size <= limit - MIN(limit, srv->live_bytes)) {
                *best = k->next;
                srv->pooled_bytes -= k->size;
                srv->n_pooled--;
                srv->live_bytes += k->size;
                pthread_mutex_unlock(&srv->pool_lock);
                *ret_size = k->size;
                *ret = (char *)k;
                return 0;
        }
        while (srv->pool && srv->live_bytes + srv->pooled_bytes + size > srv->body_budget) {
                k = srv->pool;
                srv->pool = k->next;
                srv->pooled_bytes -= k->size;
                srv->n_pooled--;
                munmap(k, k->size);
        }
        /* live + size <= limit, and live + pooled + size <= budget (limit <= budget). */
        if (srv->live_bytes > limit || size > limit - srv->live_bytes ||
            size > srv->body_budget - srv->live_bytes - srv->pooled_bytes) {
                pthread_mutex_unlock(&srv->pool_lock);
                return -ENOBUFS;
        }
        srv->live_bytes += size;
        pthread_mutex_unlock(&srv->pool_lock);
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
                pthread_mutex_lock(&srv->pool_lock);
                srv->live_bytes -= size;
                pthread_mutex_unlock(&srv->pool_lock);
                return -ENOMEM;
        }
        *ret_size = size;
        *ret = p;
        return 0;
}

/* Gives a buffer from body_get() back: to the pool, or unmapped when the pool is full. */
static void
body_put(struct ext_server *srv, char *p, size_t size)
{
        if (!p)
                return;
        pthread_mutex_lock(&srv->pool_lock);
        srv->live_bytes -= size;
        if (srv->n_pooled < EXT_BODY_POOL_MAX) {
                struct pooled *k = (struct pooled *)(void *)p;

                k->size = size;
                k->next = srv->pool;
                srv->pool = k;
                srv->pooled_bytes += size;
                srv->n_pooled++;
                p = NULL;
        }
        pthread_mutex_unlock(&srv->pool_lock);
        if (p)
                munmap(p, size);
}

static void
body_pool_release(struct ext_server *srv)
{
        for (struct pooled *k = srv->pool, *next; k; k = next) {
                next = k->next;
                munmap(k, k->size);
        }
        srv->pool = NULL;
}

static void
conn_free_body(struct ext_server *srv, struct conn *cx)
{
        body_put(srv, cx->body, cx->alloc);
        cx->body = NULL;
        cx->len = cx->alloc = 0;
}

/* Appends data to the body: 0, -EMSGSIZE past EXT_MAX_BODY, -ENOBUFS past the budget,
 * -ENOMEM.  Nothing is appended on failure.  A body with a Content-Length got its buffer at
 * its head; a chunked one starts at EXT_BODY_FIRST_ALLOC and doubles (while it is copied,
 * old and new buffer are both charged). */
static int
conn_append(struct ext_server *srv, struct conn *cx, const char *data, size_t n)
{
        size_t need = cx->len + n + 1; /* + NUL */

        if (cx->len + n > EXT_MAX_BODY)
                return -EMSGSIZE;
        if (need > cx->alloc) {
                size_t a = MAX(need, MIN(MAX(cx->alloc * 2, (size_t)EXT_BODY_FIRST_ALLOC),
                                         (size_t)EXT_MAX_BODY + 1));
                size_t size;
                char *p;
                int r = body_get(srv, a, &p, &size);

                if (r < 0)
                        return r;
                if (cx->len)
                        memcpy(p, cx->body, cx->len);
                body_put(srv, cx->body, cx->alloc);
                cx->body = p;
                cx->alloc = size;
        }
        memcpy(cx->body + cx->len, data, n);
        cx->len += n;
        cx->body[cx->len] = 0;
        return 0;
}

/* --- admission: requests that waited too long unread -------------------------------------
 * microhttpd's workers each serve their connections one request at a time, so under more
 * load than they can decide, requests wait in the sockets, unread, and without a bound
 * every answer comes late (4x the sustainable rate of 5,000-node filters for 20 s: answers
 * after 3 s at the median, 9 s at p99, past kube-scheduler's timeout).  A request's wait is
 * measurable when its head is read: the time since the kernel last received data on the
 * socket (TCP_INFO's tcpi_last_data_recv, in jiffies), which for a head that arrived whole is
 * the time since it arrived.  A decision request that waited longer than its limit is
 * answered 503 with Retry-After at once, its body never read (the connection is closed
 * after the answer); a refusal costs microseconds, so the backlog drains and the requests
 * still admitted are fresh.  A request admitted at its head is checked again on
 * its whole wait, against queue_timeout_ms, before it is decided (its body may take many
 * rounds of the worker).  The
 * limit is queue_timeout_ms (--queue-timeout, for bursts) while the worker keeps up, and
 * EXT_QUEUE_BEHIND_MS while it is behind: when every decision request of its previous
 * window (EXT_QUEUE_WINDOW_NS) waited more than EXT_QUEUE_TARGET_MS, the queue is standing
 * rather than a burst (the "adaptive" queue timeout of CoDel-style servers); a window of
 * half a second, so a stall of the machine alone does not make a worker shed.  The window
 * is the worker thread's own: each thread has its own connections and so its own queue. */
#define EXT_QUEUE_TARGET_MS 50u
#define EXT_QUEUE_BEHIND_MS 200u
#define EXT_QUEUE_WINDOW_NS (500ull * 1000000ull)

struct queue_window {
        uint64_t start_ns; /* 0: none yet */
        uint32_t min_ms;   /* shortest wait in this window; UINT32_MAX while it has none */
        bool behind;       /* the previous window said so */
};
static _Thread_local struct queue_window queue_win;

/* How long the data on connection c waited before this read, in ms; -1 when unknown (not a
 * TCP socket). */
static int64_t
queue_wait_ms(struct MHD_Connection *c)
{
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct tcp_info ti;
        socklen_t len = sizeof(ti);

        if (!ci || getsockopt(ci->connect_fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
            len < offsetof(struct tcp_info, tcpi_last_data_recv) + sizeof(ti.tcpi_last_data_recv))
                return -1;
        return ti.tcpi_last_data_recv;
}

/* Whether a decision request whose head waited wait_ms is refused (see above); its wait
 * counts in the calling worker's window. */
static bool
queue_shed(const struct ext_server *srv, uint32_t wait_ms, uint64_t now_ns)
{
        struct queue_window *w = &queue_win;
        uint32_t limit = srv->queue_timeout_ms;

        if (!w->start_ns || now_ns - w->start_ns >= EXT_QUEUE_WINDOW_NS) {
                /* A window that ended long ago says nothing about now: the worker idled. */
                w->behind = w->start_ns && now_ns - w->start_ns < 2 * EXT_QUEUE_WINDOW_NS &&
                            w->min_ms != UINT32_MAX && w->min_ms > EXT_QUEUE_TARGET_MS;
                w->start_ns = now_ns;
                w->min_ms = UINT32_MAX;
        }
        w->min_ms = MIN(w->min_ms, wait_ms);
        if (w->behind)
                limit = MIN(limit, EXT_QUEUE_BEHIND_MS);
        return wait_ms > limit;
}

/* Queues the answer; with close, the connection is closed after it (a request whose body
 * was never read). */
static enum MHD_Result
queue(struct MHD_Connection *c, int status, struct buf *out, const char *type, bool close)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;
        size_t len = 0;
        char *data = buf_steal(out, &len);

        resp = MHD_create_response_from_buffer(len, data ? data : (char *)"",
                                               data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!resp) {
                free(data);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        /* Every 503 is "busy now": the body budget, overload, a view not yet synced. */
        if (status == 503)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, EXT_RETRY_AFTER);
        if (close)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        ret = MHD_queue_response(c, (unsigned)status, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* Answers a shed request: counted (503), not logged one by one (under overload that would
 * be thousands of lines a second). */
static enum MHD_Result
queue_refuse(struct ext_server *srv, struct MHD_Connection *c, struct conn *cx, uint32_t wait_ms,
             bool close)
{
        struct buf msg;

        buf_init(&msg, 256);
        (void)buf_puts(&msg, "{\"Error\":\"the extender is overloaded: the request waited too "
                             "long to be decided; retry\"}\n");
        ext_metrics_observe(&srv->state->metrics, cx->verb, 503, ext_now_ns() - cx->start_ns);
        log_debug("request shed", "verb=%s waited_ms=%u", ext_verb_to_string(cx->verb), wait_ms);
        return queue(c, 503, &msg, "application/json", close);
}

/* Whether the request announces a body.  Every error is answered at the head, before any
 * body is read, so such a connection cannot carry another request: the answer closes it. */
static bool
head_announces_body(struct MHD_Connection *c)
{
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);

        return (cl && strcmp(cl, "0") != 0) ||
               MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
}

static enum MHD_Result
queue_error(struct ext_server *srv, struct MHD_Connection *c, struct conn *cx, int status,
            const char *why)
{
        struct buf out;

        buf_init(&out, 4096);
        (void)buf_puts(&out, "{\"Error\":");
        (void)buf_put_json_string(&out, why);
        (void)buf_puts(&out, "}\n");
        ext_metrics_observe(&srv->state->metrics, cx->verb, status, ext_now_ns() - cx->start_ns);
        if (status != 404 && status != 405)
                log_info("request refused", "verb=%s status=%d reason=%s",
                         ext_verb_to_string(cx->verb), status, LOG_V(why));
        return queue(c, status, &out, "application/json", head_announces_body(c));
}

/* Mutual TLS: the client's certificate must verify against --client-ca. */
static bool
client_cert_ok(struct MHD_Connection *c)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        const union MHD_ConnectionInfo *si =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        struct sock *k = si ? si->socket_context : NULL;
        unsigned status = 0;

        if (k && k->cert_ok)
                return true;
        if (!ci || !ci->tls_session)
                return false;
        if (gnutls_certificate_verify_peers2((gnutls_session_t)ci->tls_session, &status) < 0)
                return false;
        if (status != 0)
                return false;
        /* verify_peers2 accepts an absent certificate; require one. */
        if (!gnutls_certificate_get_peers((gnutls_session_t)ci->tls_session, &(unsigned){ 0 }))
                return false;
        if (k)
                k->cert_ok = true;
        return true;
}

/* Sets the socket deadline of connection c: after seconds_ns from now, or none (0). */
static void
sock_arm(struct ext_server *srv, struct MHD_Connection *c, uint64_t after_ns, bool in_body)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        struct sock *k = ci ? ci->socket_context : NULL;

        if (!k)
                return;
        pthread_mutex_lock(&srv->sock_lock);
        k->deadline_ns = after_ns ? ext_now_ns() + after_ns : 0;
        k->in_body = in_body;
        pthread_mutex_unlock(&srv->sock_lock);
}

static void
on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
              enum MHD_ConnectionNotificationCode toe)
{
        struct ext_server *srv = cls;
        struct sock *k = *socket_context;

        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *ci =
                        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

                atomic_fetch_add(&srv->state->metrics.connections, 1);

                k = calloc(1, sizeof(*k));
                if (!k || !ci) {
                        free(k); /* without an entry the connection has only the idle timeout */
                        return;
                }
                k->fd = ci->connect_fd;
                k->deadline_ns = ext_now_ns() + srv->idle_timeout_ns;
                pthread_mutex_lock(&srv->sock_lock);
                k->next = srv->socks;
                if (srv->socks)
                        srv->socks->prev = k;
                srv->socks = k;
                pthread_mutex_unlock(&srv->sock_lock);
                *socket_context = k;
                return;
        }
        if (!k)
                return;
        pthread_mutex_lock(&srv->sock_lock);
        if (k->prev)
                k->prev->next = k->next;
        else
                srv->socks = k->next;
        if (k->next)
                k->next->prev = k->prev;
        pthread_mutex_unlock(&srv->sock_lock);
        free(k);
        *socket_context = NULL;
}

static void *
reaper_main(void *arg)
{
        struct ext_server *srv = arg;

        pthread_mutex_lock(&srv->sock_lock);
        while (!srv->stopping) {
                struct timespec ts;
                uint64_t now = ext_now_ns();
                unsigned heads = 0, bodies = 0;

                for (struct sock *k = srv->socks; k; k = k->next) {
                        if (!k->deadline_ns || now < k->deadline_ns)
                                continue;
                        k->deadline_ns = 0;
                        (void)shutdown(k->fd, SHUT_RDWR);
                        if (k->in_body)
                                bodies++;
                        else
                                heads++;
                }
                if (heads + bodies > 0) {
                        atomic_fetch_add(&srv->state->metrics.cuts[EXT_CUT_HEAD_DEADLINE], heads);
                        atomic_fetch_add(&srv->state->metrics.cuts[EXT_CUT_BODY_DEADLINE], bodies);
                        log_debug("connections closed at their deadline",
                                  "no_request_head=%u body_too_slow=%u", heads, bodies);
                }
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_nsec += EXT_REAPER_TICK_MS * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&srv->reaper_wake, &srv->sock_lock, &ts);
        }
        pthread_mutex_unlock(&srv->sock_lock);
        return NULL;
}

/* Refuses a request in the middle of its body.  microhttpd takes a response only once the
 * whole body is in (MHD_queue_response answers MHD_NO before), so the connection is closed,
 * logged and counted; the client sees its connection end, as with any server that stops
 * reading an abusive upload. */
static enum MHD_Result
cut_off(struct ext_server *srv, struct conn *cx, enum ext_cut why)
{
        cx->cut = true;
        conn_free_body(srv, cx);
        atomic_fetch_add(&srv->state->metrics.cuts[why], 1);
        log_info("request cut off", "verb=%s reason=%s", ext_verb_to_string(cx->verb),
                 ext_cut_to_string(why));
        return MHD_NO;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
           const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
        struct ext_server *srv = cls;
        struct conn *cx = *con_cls;
        const char *type = NULL;
        struct buf out;
        int status;

        if (!cx) {
                const char *cl, *why = NULL;
                int refused;

                cx = calloc(1, sizeof(*cx));
                if (!cx)
                        return MHD_NO;
                cx->start_ns = ext_now_ns();
                *con_cls = cx;
                sock_arm(srv, c, srv->body_timeout_ns, true);
                cx->verb = ext_route(method, url, &refused, &why);
                if (srv->client_ca && !client_cert_ok(c))
                        return queue_error(srv, c, cx, 403,
                                           "a client certificate signed by the configured CA is "
                                           "required");
                if (refused)
                        return queue_error(srv, c, cx, refused, why);
                /* Admission, before the body is read: see queue_shed(). */
                cx->sheddable = cx->verb == EXT_VERB_FILTER || cx->verb == EXT_VERB_PRIORITIZE ||
                                cx->verb == EXT_VERB_PREEMPT;
                if (cx->sheddable) {
                        int64_t wait = queue_wait_ms(c);

                        cx->wait_ms = wait < 0 ? 0 : (uint32_t)MIN(wait, (int64_t)UINT32_MAX / 2);
                        /* Answered now, its body never read, and the connection closed
                         * after the answer: reading and dropping the body would cost a
                         * worker rounds over every busy connection, and under a flood of
                         * large bodies refusals then came too slowly to drain the queue. */
                        if (queue_shed(srv, cx->wait_ms, cx->start_ns))
                                return queue_refuse(srv, c, cx, cx->wait_ms, true);
                }
                cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
                if (cl) {
                        int64_t n;

                        if (str_to_int64(cl, strlen(cl), 0, INT64_MAX, &n) < 0)
                                return queue_error(srv, c, cx, 400, "bad Content-Length");
                        if ((uint64_t)n > EXT_MAX_BODY)
                                return queue_error(srv, c, cx, 413,
                                                   "the request body is larger than the limit");
                        /* The whole body's buffer is taken now, so a request that would pass
                         * the budget is refused before a byte of it is read. */
                        if (n > 0) {
                                int r = body_get(srv, (size_t)n + 1, &cx->body, &cx->alloc);

                                if (r < 0)
                                        return queue_error(srv, c, cx, 503,
                                                           r == -ENOBUFS
                                                                   ? "the extender is receiving too "
                                                                     "many request bodies at once; "
                                                                     "retry"
                                                                   : "out of memory");
                        }
                }
                return MHD_YES;
        }
        if (cx->cut)
                return MHD_NO;

        if (*upload_data_size > 0) {
                int r;

                /* Too slow a body is the reaper's to cut (it needs no data to arrive). */
                r = conn_append(srv, cx, upload_data, *upload_data_size);
                if (r == -EMSGSIZE)
                        return cut_off(srv, cx, EXT_CUT_BODY_TOO_LARGE);
                if (r == -ENOBUFS || r == -ENOMEM)
                        return cut_off(srv, cx, EXT_CUT_BODY_BUDGET);
                *upload_data_size = 0;
                return MHD_YES;
        }

        /* Its body may have come in over many rounds of this worker: past the queue timeout
         * in all, it is refused before the decision's cost is spent.  (Not the shorter limit
         * of a worker that is behind: with many connections busy, reading a large body
         * takes rounds of a few hundred ms, and that limit would refuse every request.) */
        if (cx->sheddable) {
                uint64_t now = ext_now_ns();
                uint32_t waited = cx->wait_ms + (uint32_t)MIN((now - cx->start_ns) / 1000000u,
                                                              (uint64_t)UINT32_MAX / 2);

                if (waited > srv->queue_timeout_ms) {
                        conn_free_body(srv, cx);
                        return queue_refuse(srv, c, cx, waited, false);
                }
        }
        sock_arm(srv, c, 0, false); /* the answer is ours to be late with */
        buf_init(&out, EXT_MAX_RESPONSE);
        status = ext_handle(srv->state, cx->verb, cx->body ? cx->body : "", cx->len, &out, &type);
        conn_free_body(srv, cx);
        ext_metrics_observe(&srv->state->metrics, cx->verb, status, ext_now_ns() - cx->start_ns);
        return queue(c, status, &out, type, false);
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
             enum MHD_RequestTerminationCode toe)
{
        struct ext_server *srv = cls;
        struct conn *cx = *con_cls;

        /* The connection may carry another request: its head is due in idle_timeout. */
        sock_arm(srv, c, srv->idle_timeout_ns, false);
        if (!cx)
                return;
        conn_free_body(srv, cx);
        free(cx);
        *con_cls = NULL;
}

static void
on_mhd_log(void *cls, const char *fmt, va_list ap)
{
        char msg[512];

        vsnprintf(msg, sizeof(msg), fmt, ap);
        msg[strcspn(msg, "\n")] = 0;
        log_debug("microhttpd", "detail=%s", LOG_V(msg));
}

static int
read_pem(const char *path, char **ret, const char **ret_why)
{
        char *text = NULL;
        size_t len;
        int r;

        r = file_read_capped(path, EXT_MAX_PEM_BYTES, &text, &len);
        if (r == -E2BIG || r == -ENOMEM)
                return set_why(ret_why, "a TLS file is empty or too large"), r;
        if (r < 0)
                return set_why(ret_why, "cannot open a TLS file"), r;
        if (len == 0) {
                free(text);
                return set_why(ret_why, "a TLS file is empty or too large"), -EINVAL;
        }
        *ret = text;
        return 0;
}

/* "host:port", ":port", "[v6]:port" into a socket address. */
static int
parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len)
{
        char host[EXT_MAX_LISTEN_LEN], *colon;
        const char *port;
        struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                                  .ai_socktype = SOCK_STREAM };
        struct addrinfo *ai = NULL;

        if (str_copy(host, sizeof(host), s, strlen(s)) < 0)
                return -EINVAL;
        colon = strrchr(host, ':');
        if (!colon)
                return -EINVAL;
        *colon = 0;
        port = colon + 1;
        if (host[0] == '[') {
                size_t n = strlen(host);

                if (n < 2 || host[n - 1] != ']')
                        return -EINVAL;
                host[n - 1] = 0;
                memmove(host, host + 1, n - 1);
        }
        if (getaddrinfo(host[0] ? host : NULL, port, &hints, &ai) != 0 || !ai)
                return -EINVAL;
        memcpy(ret, ai->ai_addr, ai->ai_addrlen);
        *ret_len = ai->ai_addrlen;
        freeaddrinfo(ai);
        return 0;
}

int
ext_server_start(struct ext_state *s, const struct ext_server_options *o, struct ext_server **ret,
                 unsigned *ret_port, const char **ret_why)
{
        struct ext_server *srv;
        struct sockaddr_storage addr;
        socklen_t addr_len;
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
        const union MHD_DaemonInfo *info;
        unsigned threads = o->threads ? MIN(o->threads, (unsigned)EXT_MAX_THREADS)
                                      : EXT_DEFAULT_THREADS;
        unsigned max_conns = o->max_connections ? o->max_connections : EXT_MAX_CONNECTIONS;
        unsigned per_ip = o->max_connections_per_ip ? o->max_connections_per_ip
                                                    : EXT_MAX_CONNECTIONS_PER_IP;
        unsigned idle_s = o->idle_timeout_s ? o->idle_timeout_s : EXT_IDLE_TIMEOUT_S;
        unsigned body_s = o->body_timeout_s ? o->body_timeout_s : EXT_BODY_TIMEOUT_S;
        unsigned queue_ms = o->queue_timeout_ms ? o->queue_timeout_ms : EXT_QUEUE_TIMEOUT_MS;
        uint64_t budget = o->body_budget ? o->body_budget : EXT_BODY_BUDGET;
        int r;

        if (budget < EXT_MAX_BODY || budget > EXT_MAX_BODY_BUDGET || budget > SIZE_MAX / 2)
                return set_why(ret_why, "the body budget is below the largest body or too large"),
                       -EINVAL;
        /* Each pool thread takes an equal share of the total: fewer than one each is none. */
        if (max_conns < threads)
                return set_why(ret_why, "fewer connections allowed than worker threads"), -EINVAL;

        if (parse_listen(o->listen, &addr, &addr_len) < 0)
                return set_why(ret_why, "the listen address is not host:port"), -EINVAL;
        if (addr.ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        srv = calloc(1, sizeof(*srv));
        if (!srv)
                return -ENOMEM;
        srv->state = s;
        srv->idle_timeout_ns = (uint64_t)idle_s * 1000000000u;
        srv->body_timeout_ns = (uint64_t)body_s * 1000000000u;
        srv->queue_timeout_ms = queue_ms;
        pthread_mutex_init(&srv->sock_lock, NULL);
        {
                pthread_condattr_t ca;

                pthread_condattr_init(&ca);
                pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
                pthread_cond_init(&srv->reaper_wake, &ca);
                pthread_condattr_destroy(&ca);
        }
        /* Buffers are whole pages: the largest body and its NUL take one page more. */
        srv->body_budget = MAX((size_t)budget, page_round((size_t)EXT_MAX_BODY + 1));
        srv->small_reserve = MIN((size_t)EXT_BODY_RESERVE,
                                 srv->body_budget - page_round((size_t)EXT_MAX_BODY + 1));
        pthread_mutex_init(&srv->pool_lock, NULL);
        if (o->tls_cert || o->tls_key) {
                if (!o->tls_cert || !o->tls_key) {
                        ext_server_stop(srv);
                        return set_why(ret_why, "--tls-cert and --tls-key go together"), -EINVAL;
                }
                if ((r = read_pem(o->tls_cert, &srv->cert, ret_why)) < 0 ||
                    (r = read_pem(o->tls_key, &srv->key, ret_why)) < 0 ||
                    (o->client_ca && (r = read_pem(o->client_ca, &srv->ca, ret_why)) < 0)) {
                        ext_server_stop(srv);
                        return r;
                }
                flags |= MHD_USE_TLS;
                srv->client_ca = o->client_ca != NULL;
        } else if (o->client_ca) {
                ext_server_stop(srv);
                return set_why(ret_why, "--client-ca needs --tls-cert and --tls-key"), -EINVAL;
        }

        srv->daemon = MHD_start_daemon(
                flags, 0, NULL, NULL, on_request, srv,
                MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,
                MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                MHD_OPTION_THREAD_POOL_SIZE, threads,
                MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
                MHD_OPTION_CONNECTION_LIMIT, max_conns,
                MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)EXT_CONNECTION_MEMORY,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
                srv->cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, srv->cert,
                MHD_OPTION_HTTPS_MEM_KEY, srv->key,
                srv->ca ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, srv->ca,
                MHD_OPTION_END);
        if (!srv->daemon) {
                ext_server_stop(srv);
                return set_why(ret_why, "the HTTP server cannot start (address in use, or a bad "
                                        "TLS key/certificate)"),
                       -EADDRNOTAVAIL;
        }
        if (pthread_create(&srv->reaper, NULL, reaper_main, srv) != 0) {
                ext_server_stop(srv);
                return set_why(ret_why, "cannot start a thread"), -EAGAIN;
        }
        srv->reaper_started = true;
        info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
        *ret_port = info ? info->port : 0;
        *ret = srv;
        return 0;
}

struct ext_server *
ext_server_stop(struct ext_server *srv)
{
        if (!srv)
                return NULL;
        if (srv->reaper_started) {
                pthread_mutex_lock(&srv->sock_lock);
                srv->stopping = true;
                pthread_cond_signal(&srv->reaper_wake);
                pthread_mutex_unlock(&srv->sock_lock);
                pthread_join(srv->reaper, NULL);
        }
        if (srv->daemon)
                MHD_stop_daemon(srv->daemon);
        pthread_cond_destroy(&srv->reaper_wake);
        pthread_mutex_destroy(&srv->sock_lock);
        body_pool_release(srv);
        pthread_mutex_destroy(&srv->pool_lock);
        free(srv->cert);
        free(srv->key);
        free(srv->ca);
        free(srv);
        return NULL;
}
