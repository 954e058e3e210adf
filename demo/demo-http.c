/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The demo's and benchmark's HTTP/1.1 client (see demo-http.h).  Blocking sockets, one
 * request at a time per connection; the answer head is capped by DEMO_HTTP_MAX_HEAD and
 * the body by the caller's buf cap.
 */
#include "demo-http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "str.h"

int
demo_http_connect(struct demo_http *h, const char *host, unsigned port)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        char name[sizeof(h->host)];
        int one = 1;

        snprintf(name, sizeof(name), "%s", host); /* host may point into *h */
        *h = (struct demo_http){ .fd = -1, .port = port };
        memcpy(h->host, name, sizeof(name));
        if (inet_pton(AF_INET, h->host, &sa.sin_addr) != 1)
                return -EINVAL;
        h->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (h->fd < 0)
                return -errno;
        setsockopt(h->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(h->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;

                close(h->fd);
                h->fd = -1;
                return r;
        }
        return 0;
}

void
demo_http_close(struct demo_http *h)
{
        if (h->fd >= 0)
                close(h->fd);
        h->fd = -1;
}

static int
send_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EPIPE;
                p += k;
                n -= (size_t)k;
        }
        return 0;
}

/* Bytes of a chunked body: buffered ones first (the head's leftovers), then the socket. */
struct reader {
        int fd;
        const char *p, *end;
        char chunk[65536];
};

static int
reader_byte(struct reader *rd, char *ret)
{
        if (rd->p == rd->end) {
                ssize_t k;

                do
                        k = recv(rd->fd, rd->chunk, sizeof(rd->chunk), 0);
                while (k < 0 && errno == EINTR);
                if (k <= 0)
                        return k < 0 ? -errno : -ECONNRESET;
                rd->p = rd->chunk;
                rd->end = rd->chunk + k;
        }
        *ret = *rd->p++;
        return 0;
}

/* A chunked body (Go's net/http answers larger bodies so) into out; trailers skipped. */
static int
read_chunked(struct reader *rd, struct buf *out)
{
        for (;;) {
                char line[64], ch;
                size_t n = 0, size;
                int r;

                while ((r = reader_byte(rd, &ch)) >= 0 && ch != '\n')
                        if (n + 1 < sizeof(line))
                                line[n++] = ch;
                if (r < 0)
                        return r;
                line[n] = 0;
                if (sscanf(line, "%zx", &size) != 1)
                        return -EPROTO;
                if (size == 0) {
                        /* trailers, up to the empty line */
                        for (n = 0;;) {
                                if ((r = reader_byte(rd, &ch)) < 0)
                                        return r;
                                if (ch == '\n') {
                                        if (n == 0)
                                                return 0;
                                        n = 0;
                                } else if (ch != '\r')
                                        n++;
                        }
                }
                for (size_t k = 0; k < size; k++) {
                        if ((r = reader_byte(rd, &ch)) < 0)
                                return r;
                        if ((r = buf_append(out, &ch, 1)) < 0)
                                return r;
                }
                if ((r = reader_byte(rd, &ch)) < 0 || (ch == '\r' && (r = reader_byte(rd, &ch)) < 0))
                        return r;
        }
}

static int
read_answer(struct demo_http *h, int *ret_status, struct buf *out)
{
        char head[DEMO_HTTP_MAX_HEAD + 1];
        size_t n = h->n_pending, body_len = 0, have;
        bool chunked = false;
        char *end, *line;
        int status, r;

        memcpy(head, h->pending, n);
        h->n_pending = 0;
        for (;;) {
                head[n] = 0;
                end = strstr(head, "\r\n\r\n");
                if (end)
                        break;
                if (n >= DEMO_HTTP_MAX_HEAD)
                        return -EPROTO;
                ssize_t k = recv(h->fd, head + n, DEMO_HTTP_MAX_HEAD - n, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -ECONNRESET;
                n += (size_t)k;
        }
        if (sscanf(head, "HTTP/1.%*d %d", &status) != 1)
                return -EPROTO;
        *end = 0;
        for (line = strstr(head, "\r\n"); line; line = strstr(line + 2, "\r\n"))
                if (strncasecmp(line + 2, "Content-Length:", 15) == 0) {
                        const char *v = line + 2 + 15;
                        size_t vl = strcspn(v, "\r");
                        int64_t cl;

                        str_trim(&v, &vl);
                        if (str_to_int64(v, vl, 0, INT64_MAX, &cl) < 0)
                                return -EPROTO;
                        body_len = (size_t)cl;
                } else if (strncasecmp(line + 2, "Transfer-Encoding:", 18) == 0) {
                        const char *v = line + 2 + 18;

                        chunked = memmem(v, strcspn(v, "\r"), "chunked", 7) != NULL;
                }
        buf_reset(out);
        have = n - (size_t)(end + 4 - head);
        if (chunked) {
                struct reader rd = { .fd = h->fd, .p = end + 4, .end = end + 4 + have };

                r = read_chunked(&rd, out);
                if (r < 0)
                        return r;
                /* Bytes past this answer (pipelining) are not expected from our use. */
                *ret_status = status;
                return 0;
        }
        if (have > body_len) {
                /* Pipelined bytes of the next answer: keep them. */
                h->n_pending = have - body_len;
                memcpy(h->pending, end + 4 + body_len, h->n_pending);
                have = body_len;
        }
        r = buf_append(out, end + 4, have);
        while (r >= 0 && out->len < body_len) {
                char chunk[65536];
                ssize_t k = recv(h->fd, chunk, MIN(sizeof(chunk), body_len - out->len), 0);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -ECONNRESET;
                r = buf_append(out, chunk, (size_t)k);
        }
        if (r < 0)
                return r;
        *ret_status = status;
        return 0;
}

int
demo_http_request(struct demo_http *h, const char *method, const char *path, const char *body,
                  size_t len, int *ret_status, struct buf *out)
{
        char head[1024];
        int n, r;

        n = snprintf(head, sizeof(head),
                     "%s %s HTTP/1.1\r\nHost: %s:%u\r\nUser-Agent: Go-http-client/1.1\r\n"
                     "Content-Length: %zu\r\nContent-Type: application/json\r\n"
                     "Accept-Encoding: gzip\r\n\r\n",
                     method, path, h->host, h->port, body ? len : 0);
        if (n < 0 || (size_t)n >= sizeof(head))
                return -E2BIG;
        for (int attempt = 0; attempt < 2; attempt++) {
                if (h->fd < 0 && (r = demo_http_connect(h, h->host, h->port)) < 0)
                        return r;
                r = send_all(h->fd, head, (size_t)n);
                if (r >= 0 && body && len)
                        r = send_all(h->fd, body, len);
                if (r >= 0)
                        r = read_answer(h, ret_status, out);
                if (r != -ECONNRESET && r != -EPIPE)
                        return r;
                demo_http_close(h); /* the server closed an idle connection: once more */
        }
        return r;
}
