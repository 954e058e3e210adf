/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A minimal HTTP/1.1 client over plain sockets for the demo and the extender benchmark's
 * load generator: one keep-alive connection, requests sent the way kube-scheduler's Go
 * client sends them (Content-Type: application/json, User-Agent Go-http-client/1.1), the
 * answer read by Content-Length into a capped buf.  Loopback use only: no TLS, no chunked
 * answers (microhttpd answers buffers with a length).
 */
#pragma once

#include <stddef.h>

#include "buf.h"

#define DEMO_HTTP_MAX_HEAD 16384 /* status line + headers of one answer */

struct demo_http {
        int fd;
        char host[64];
        unsigned port;
        char pending[DEMO_HTTP_MAX_HEAD]; /* bytes read past the last answer */
        size_t n_pending;
};

/* Connects to host:port (numeric IPv4).  Returns 0 or -errno. */
int demo_http_connect(struct demo_http *h, const char *host, unsigned port);
void demo_http_close(struct demo_http *h);

/* Sends method path with body (NULL for none) and reads the answer into *out (reset
 * first); *ret_status gets the HTTP status.  Reconnects once if the server closed the idle
 * connection.  Returns 0 or -errno (-EPROTO for an answer it cannot read). */
int demo_http_request(struct demo_http *h, const char *method, const char *path, const char *body,
                      size_t len, int *ret_status, struct buf *out);
