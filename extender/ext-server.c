/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP side: libmicrohttpd with an internal thread pool, optional TLS and client
 * certificates through its GnuTLS support.  This file only moves bytes: it caps and
 * collects a request body (EXT_MAX_BODY: a larger Content-Length is answered 413 before a
 * byte of body is read; a chunked body past the cap is drained without being kept and
 * answered 413), hands it to ext_handle() and queues the answer.  Per-connection state
 * lives in struct conn, owned by microhttpd's connection and freed in its completion hook.
 */
#include "ext-server.h"

#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "file.h"
#include "log.h"
#include "str.h"

#define EXT_MAX_PEM_BYTES (1u << 20)
#define EXT_MAX_LISTEN_LEN 300

struct ext_server {
        struct MHD_Daemon *daemon;
        struct ext_state *state;
        char *cert, *key, *ca;
        bool client_ca;
};

struct conn {
        enum ext_verb verb;
        int early_status;   /* answered before the body: 404, 405, 413, 403; 0 otherwise */
        bool too_big;       /* a body without length passed the cap: drain, then 413 */
        uint64_t start_ns;
        struct buf body;
};

static enum MHD_Result
queue(struct MHD_Connection *c, int status, struct buf *out, const char *type)
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
        ret = MHD_queue_response(c, (unsigned)status, resp);
        MHD_destroy_response(resp);
        return ret;
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
                log_info("request refused", "verb=%s status=%d reason=\"%s\"",
                         ext_verb_to_string(cx->verb), status, why);
        return queue(c, status, &out, "application/json");
}

/* Mutual TLS: the client's certificate must verify against --client-ca. */
static bool
client_cert_ok(struct MHD_Connection *c)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        unsigned status = 0;

        if (!ci || !ci->tls_session)
                return false;
        if (gnutls_certificate_verify_peers2((gnutls_session_t)ci->tls_session, &status) < 0)
                return false;
        if (status != 0)
                return false;
        /* verify_peers2 accepts an absent certificate; require one. */
        return gnutls_certificate_get_peers((gnutls_session_t)ci->tls_session, &(unsigned){ 0 }) !=
               NULL;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
           const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
        struct ext_server *srv = cls;
        struct conn *cx = *con_cls;
        const char *type = NULL;
        enum ext_verb verb;
        struct buf out;
        int status;

        if (!cx) {
                const char *cl;
                bool method_ok;

                cx = calloc(1, sizeof(*cx));
                if (!cx)
                        return MHD_NO;
                cx->start_ns = ext_now_ns();
                buf_init(&cx->body, EXT_MAX_BODY);
                *con_cls = cx;
                cx->verb = ext_route(method, url, &method_ok);
                if (srv->client_ca && !client_cert_ok(c))
                        return queue_error(srv, c, cx, 403,
                                           "a client certificate signed by the configured CA is "
                                           "required");
                if (cx->verb == EXT_VERB_OTHER)
                        return queue_error(srv, c, cx, 404,
                                           "no such verb: the extender serves /filter, "
                                           "/prioritize, /bind, /preempt, /healthz, /readyz, "
                                           "/metrics, /version, /allocations");
                if (!method_ok)
                        return queue_error(srv, c, cx, 405, "method not allowed for this path");
                cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
                if (cl) {
                        int64_t n;

                        if (str_to_int64(cl, strlen(cl), 0, INT64_MAX, &n) < 0)
                                return queue_error(srv, c, cx, 400, "bad Content-Length");
                        if ((uint64_t)n > EXT_MAX_BODY)
                                return queue_error(srv, c, cx, 413,
                                                   "the request body is larger than the limit");
                }
                return MHD_YES;
        }

        if (*upload_data_size > 0) {
                if (!cx->too_big && buf_append(&cx->body, upload_data, *upload_data_size) < 0) {
                        /* Past the cap (or out of memory): keep nothing more, answer 413. */
                        cx->too_big = true;
                        buf_release(&cx->body);
                }
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (cx->too_big)
                return queue_error(srv, c, cx, 413, "the request body is larger than the limit");

        buf_init(&out, EXT_MAX_RESPONSE);
        status = ext_handle(srv->state, method, url, cx->body.data ? cx->body.data : "",
                            cx->body.len, &out, &type, &verb);
        buf_release(&cx->body);
        ext_metrics_observe(&srv->state->metrics, verb, status, ext_now_ns() - cx->start_ns);
        return queue(c, status, &out, type);
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
             enum MHD_RequestTerminationCode toe)
{
        struct conn *cx = *con_cls;

        if (!cx)
                return;
        buf_release(&cx->body);
        free(cx);
        *con_cls = NULL;
}

static void
on_mhd_log(void *cls, const char *fmt, va_list ap)
{
        char msg[512];

        vsnprintf(msg, sizeof(msg), fmt, ap);
        msg[strcspn(msg, "\n")] = 0;
        log_debug("microhttpd", "detail=\"%s\"", msg);
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
        int r;

        if (parse_listen(o->listen, &addr, &addr_len) < 0)
                return set_why(ret_why, "the listen address is not host:port"), -EINVAL;
        if (addr.ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        srv = calloc(1, sizeof(*srv));
        if (!srv)
                return -ENOMEM;
        srv->state = s;
        if (o->tls_cert || o->tls_key) {
                if (!o->tls_cert || !o->tls_key) {
                        free(srv);
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
                free(srv);
                return set_why(ret_why, "--client-ca needs --tls-cert and --tls-key"), -EINVAL;
        }

        srv->daemon = MHD_start_daemon(
                flags, 0, NULL, NULL, on_request, srv,
                MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,
                MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                MHD_OPTION_THREAD_POOL_SIZE, threads,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)EXT_CONNECTION_TIMEOUT_S,
                MHD_OPTION_CONNECTION_LIMIT, (unsigned)EXT_MAX_CONNECTIONS,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
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
        if (srv->daemon)
                MHD_stop_daemon(srv->daemon);
        free(srv->cert);
        free(srv->key);
        free(srv->ca);
        free(srv);
        return NULL;
}
