/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topofit-overload: an open-loop HTTP/1.1 load generator for the extender's overload test
 * (scripts/overload, docs/performance.md "Extender: overload").  Requests are due at a fixed
 * rate whatever the server does (so a slow server meets its full offered load, as it would
 * from many schedulers or a retry storm), each sent on an idle keep-alive connection or a
 * new one from one of --sources loopback source addresses (127.0.1.1 ...), up to
 * --connections open at once; a request due while every connection is busy is counted as
 * not sent (the server is holding them all).  Latency is from the moment the request was
 * due.  Every answer is sorted by its status (503s with and without Retry-After apart);
 * a connection the server closed under a request counts as closed.  One thread, epoll,
 * bounded: --seconds, then in-flight requests get --timeout-ms to finish.  Prints one JSON
 * object: counts, latency percentiles of the 200s and of the 503s, and per-second counts.
 * Test tooling, not part of topofit: it links nothing of the project.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define OL_MAX_CONNECTIONS 20000
#define OL_MAX_BODY (64u << 20)
#define OL_MAX_ANSWER (16u << 20)
#define OL_MAX_SECONDS 3600

enum cx_state { CX_FREE, CX_CONNECTING, CX_SENDING, CX_RECEIVING, CX_IDLE };

struct cx {
        int fd;
        enum cx_state state;
        size_t sent;
        char *rbuf;
        size_t rlen, ralloc;
        uint64_t due_ns;
};

struct stats {
        uint64_t due, sent, ok, refused, refused_retry_after, other, closed, timeouts, not_sent,
                connect_failed;
        double *lat_ok, *lat_refused;
        size_t n_ok, n_refused, cap;
        unsigned seconds;
        uint64_t (*per_s)[4]; /* 200, 503, closed/other, not sent */
};

static uint64_t
now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static char *request;
static size_t request_len;
static struct cx *cxs;
static int *idle_stack, n_idle;
static int n_open, max_open, n_sources, epfd;
static uint16_t port;
static struct stats st;
static uint64_t t_start;

static void
per_second(int what)
{
        uint64_t s = (now_ns() - t_start) / 1000000000u;

        if (s < st.seconds)
                st.per_s[s][what]++;
}

static void
record(double **arr, size_t *n, double ms)
{
        if (*n < st.cap)
                (*arr)[(*n)++] = ms;
}

static void
cx_close(int i)
{
        struct cx *c = &cxs[i];

        if (c->state == CX_FREE)
                return;
        if (c->state == CX_IDLE) {
                for (int k = 0; k < n_idle; k++)
                        if (idle_stack[k] == i) {
                                idle_stack[k] = idle_stack[--n_idle];
                                break;
                        }
        } else if (c->state != CX_CONNECTING || c->due_ns) {
                /* A request was on it. */
                if (c->state == CX_CONNECTING)
                        st.connect_failed++;
                st.closed++;
                per_second(2);
        }
        close(c->fd);
        c->state = CX_FREE;
        c->rlen = 0;
        n_open--;
}

static int
cx_watch(int i, uint32_t events)
{
        struct epoll_event ev = { .events = events, .data.u32 = (uint32_t)i };

        return epoll_ctl(epfd, EPOLL_CTL_MOD, cxs[i].fd, &ev);
}

/* Opens a connection for a request due at due_ns; -1 when none can be opened. */
static int
cx_open(uint64_t due_ns)
{
        static unsigned next_src;
        struct sockaddr_in src = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET };
        struct epoll_event ev;
        int i, fd, one = 1;

        for (i = 0; i < max_open && cxs[i].state != CX_FREE; i++)
                ;
        if (i == max_open)
                return -1;
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        src.sin_addr.s_addr = htonl(0x7f000101u + (next_src++ % (unsigned)n_sources));
        if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0) {
                close(fd);
                return -1;
        }
        dst.sin_port = htons(port);
        dst.sin_addr.s_addr = htonl(0x7f000001u);
        if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0 && errno != EINPROGRESS) {
                close(fd);
                st.connect_failed++;
                return -1;
        }
        cxs[i] = (struct cx){ .fd = fd, .state = CX_CONNECTING, .due_ns = due_ns,
                              .rbuf = cxs[i].rbuf, .ralloc = cxs[i].ralloc };
        ev = (struct epoll_event){ .events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)i };
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                close(fd);
                cxs[i].state = CX_FREE;
                return -1;
        }
        n_open++;
        return i;
}

static void
cx_send(int i)
{
        struct cx *c = &cxs[i];

        while (c->sent < request_len) {
                ssize_t n = send(c->fd, request + c->sent, request_len - c->sent, MSG_NOSIGNAL);

                if (n < 0) {
                        if (errno == EAGAIN)
                                return;
                        cx_close(i);
                        return;
                }
                c->sent += (size_t)n;
        }
        c->state = CX_RECEIVING;
        cx_watch(i, EPOLLIN | EPOLLRDHUP);
}

static void
dispatch(uint64_t due_ns)
{
        int i;

        st.due++;
        if (n_idle > 0) {
                i = idle_stack[--n_idle];
                cxs[i].state = CX_SENDING;
        } else if (n_open < max_open && (i = cx_open(due_ns)) >= 0) {
                return; /* sends once connected */
        } else {
                st.not_sent++;
                per_second(3);
                return;
        }
        cxs[i].due_ns = due_ns;
        cxs[i].sent = 0;
        cxs[i].rlen = 0;
        st.sent++;
        cx_watch(i, EPOLLOUT | EPOLLIN | EPOLLRDHUP);
        cx_send(i);
}

/* A complete answer in c->rbuf: 1 (and its length), 0 when more is needed. */
static int
answer_complete(struct cx *c, size_t *ret_len, int *ret_status, bool *ret_close,
                bool *ret_retry_after)
{
        char *end = c->rbuf ? memmem(c->rbuf, c->rlen, "\r\n\r\n", 4) : NULL;
        size_t head, body = 0;

        if (!c->rbuf || !end)
                return 0;
        head = (size_t)(end - c->rbuf) + 4;
        *ret_status = 0;
        sscanf(c->rbuf, "HTTP/1.%*d %d", ret_status);
        *ret_close = false;
        *ret_retry_after = false;
        for (char *p = c->rbuf; p < end;) {
                char *nl = memchr(p, '\n', (size_t)(end - p));

                if (!nl)
                        nl = end;
                if (strncasecmp(p, "content-length:", 15) == 0)
                        body = strtoull(p + 15, NULL, 10);
                else if (strncasecmp(p, "connection:", 11) == 0)
                        /* A scan rather than memmem(): gcc's -Wnonnull under the
                         * sanitizers cannot tell p is never NULL here. */
                        for (const char *q = p + 11; q + 5 <= nl && !*ret_close; q++)
                                *ret_close = strncasecmp(q, "close", 5) == 0;
                else if (strncasecmp(p, "retry-after:", 12) == 0)
                        *ret_retry_after = true;
                p = nl + 1;
        }
        if (c->rlen < head + body)
                return 0;
        *ret_len = head + body;
        return 1;
}

static void
cx_read(int i)
{
        struct cx *c = &cxs[i];

        bool eof = false;

        for (;;) {
                ssize_t n;

                if (c->ralloc - c->rlen < 65536) {
                        size_t a = c->ralloc ? c->ralloc * 2 : 262144;
                        char *p;

                        if (a > OL_MAX_ANSWER || !(p = realloc(c->rbuf, a))) {
                                cx_close(i);
                                return;
                        }
                        c->rbuf = p;
                        c->ralloc = a;
                }
                n = recv(c->fd, c->rbuf + c->rlen, c->ralloc - c->rlen, 0);
                if (n == 0 || (n < 0 && errno != EAGAIN)) {
                        eof = true; /* an answer may have come before the close */
                        break;
                }
                if (n < 0)
                        break;
                c->rlen += (size_t)n;
        }
        if (c->state == CX_IDLE) { /* data on an idle connection: nothing was asked */
                cx_close(i);
                return;
        }

        size_t len;
        int status;
        bool close_after, retry_after;

        if (!answer_complete(c, &len, &status, &close_after, &retry_after)) {
                if (eof)
                        cx_close(i);
                return;
        }
        close_after |= eof;
        double ms = (double)(now_ns() - c->due_ns) / 1e6;

        if (status == 200) {
                st.ok++;
                record(&st.lat_ok, &st.n_ok, ms);
                per_second(0);
        } else if (status == 503) {
                st.refused++;
                st.refused_retry_after += retry_after;
                record(&st.lat_refused, &st.n_refused, ms);
                per_second(1);
        } else {
                st.other++;
                per_second(2);
        }
        c->due_ns = 0;
        c->rlen = 0;
        /* Answered before the whole body went out: the rest would read as a new request. */
        if (close_after || c->sent < request_len) {
                c->state = CX_IDLE; /* not counted as a lost request */
                cx_close(i);
                return;
        }
        c->state = CX_IDLE;
        idle_stack[n_idle++] = i;
        cx_watch(i, EPOLLIN | EPOLLRDHUP);
}

static int
cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

static void
print_pct(const char *name, double *v, size_t n)
{
        qsort(v, n, sizeof(*v), cmp_double);
        if (n == 0) {
                printf("\"%s\":null", name);
                return;
        }
        printf("\"%s\":{\"p50\":%.2f,\"p90\":%.2f,\"p99\":%.2f,\"max\":%.2f}", name,
               v[n / 2], v[(size_t)(n * 0.9)], v[(size_t)(n * 0.99)], v[n - 1]);
}

int
main(int argc, char **argv)
{
        const char *body_path = NULL, *path = "/filter";
        double rate = 100, seconds = 10;
        unsigned timeout_ms = 10000;
        char *body;
        size_t body_len = 0;
        FILE *f;

        max_open = 256;
        n_sources = 8;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

                if (!v) {
                        fprintf(stderr, "topofit-overload: %s needs a value\n", a);
                        return 2;
                }
                if (strcmp(a, "--port") == 0)
                        port = (uint16_t)atoi(v);
                else if (strcmp(a, "--body") == 0)
                        body_path = v;
                else if (strcmp(a, "--path") == 0)
                        path = v;
                else if (strcmp(a, "--rate") == 0)
                        rate = atof(v);
                else if (strcmp(a, "--seconds") == 0)
                        seconds = atof(v);
                else if (strcmp(a, "--connections") == 0)
                        max_open = atoi(v);
                else if (strcmp(a, "--sources") == 0)
                        n_sources = atoi(v);
                else if (strcmp(a, "--timeout-ms") == 0)
                        timeout_ms = (unsigned)atoi(v);
                else {
                        fprintf(stderr, "Usage: topofit-overload --port P --body FILE [--path /filter] "
                                        "[--rate R] [--seconds S] [--connections N] [--sources K] "
                                        "[--timeout-ms T]\n");
                        return 2;
                }
                i++;
        }
        if (!port || !body_path || rate <= 0 || rate > 1e6 || seconds <= 0 ||
            seconds > OL_MAX_SECONDS || max_open < 1 || max_open > OL_MAX_CONNECTIONS ||
            n_sources < 1 || n_sources > 250) {
                fprintf(stderr, "topofit-overload: bad or missing arguments (--port, --body)\n");
                return 2;
        }
        f = fopen(body_path, "re");
        body = malloc(OL_MAX_BODY);
        if (!f || !body || (body_len = fread(body, 1, OL_MAX_BODY, f)) == 0) {
                fprintf(stderr, "topofit-overload: cannot read %s\n", body_path);
                return 1;
        }
        fclose(f);
        request = malloc(body_len + 512);
        if (!request)
                return 1;
        request_len = (size_t)sprintf(request,
                                      "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                      "application/json\r\nContent-Length: %zu\r\n\r\n",
                                      path, body_len);
        memcpy(request + request_len, body, body_len);
        request_len += body_len;
        free(body);

        st.cap = (size_t)(rate * seconds) + 16;
        st.lat_ok = malloc(st.cap * sizeof(double));
        st.lat_refused = malloc(st.cap * sizeof(double));
        st.seconds = (unsigned)seconds + 1 + timeout_ms / 1000 + 1;
        st.per_s = calloc(st.seconds, sizeof(*st.per_s));
        cxs = calloc((size_t)max_open, sizeof(*cxs));
        idle_stack = calloc((size_t)max_open, sizeof(*idle_stack));
        epfd = epoll_create1(EPOLL_CLOEXEC);
        if (!st.lat_ok || !st.lat_refused || !st.per_s || !cxs || !idle_stack || epfd < 0)
                return 1;

        uint64_t interval = (uint64_t)(1e9 / rate);
        uint64_t end = 0, next, last_sweep = 0;

        t_start = now_ns();
        next = t_start;
        end = t_start + (uint64_t)(seconds * 1e9);
        for (;;) {
                struct epoll_event evs[256];
                uint64_t now = now_ns();
                int n, wait_ms;

                while (next <= now && next < end) {
                        dispatch(next);
                        next += interval;
                }
                if (now - last_sweep > 10000000u) {
                        last_sweep = now;
                        for (int i = 0; i < max_open; i++)
                                if (cxs[i].state != CX_FREE && cxs[i].state != CX_IDLE &&
                                    cxs[i].due_ns && now - cxs[i].due_ns > timeout_ms * 1000000ull) {
                                        st.timeouts++;
                                        cxs[i].due_ns = 0;
                                        cxs[i].state = CX_IDLE; /* counted as timed out, not closed */
                                        cx_close(i);
                                }
                }
                if (now >= end) {
                        bool busy = false;

                        for (int i = 0; i < max_open && !busy; i++)
                                busy = cxs[i].state != CX_FREE && cxs[i].state != CX_IDLE;
                        if (!busy)
                                break;
                }
                wait_ms = next < end && next > now ? (int)((next - now) / 1000000u) : 1;
                n = epoll_wait(epfd, evs, 256, now >= end ? 10 : wait_ms);
                for (int k = 0; k < n; k++) {
                        int i = (int)evs[k].data.u32;
                        struct cx *c = &cxs[i];

                        if (c->state == CX_FREE)
                                continue;
                        if (c->state == CX_CONNECTING) {
                                int err = 0;
                                socklen_t el = sizeof(err);

                                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
                                if (err || (evs[k].events & (EPOLLERR | EPOLLHUP))) {
                                        cx_close(i);
                                        continue;
                                }
                                c->state = CX_SENDING;
                                c->sent = 0;
                                st.sent++;
                        }
                        if ((evs[k].events & EPOLLOUT) && c->state == CX_SENDING)
                                cx_send(i);
                        if (c->state != CX_FREE &&
                            (evs[k].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
                                cx_read(i);
                }
        }
        for (int i = 0; i < max_open; i++)
                if (cxs[i].state != CX_FREE) {
                        cxs[i].state = CX_IDLE;
                        cx_close(i);
                }

        printf("{\"rate\":%.1f,\"seconds\":%.1f,\"connections\":%d,\"sources\":%d,\"due\":%llu,"
               "\"sent\":%llu,\"ok\":%llu,\"refused\":%llu,\"refused_retry_after\":%llu,"
               "\"other\":%llu,\"closed\":%llu,\"connect_failed\":%llu,\"timeouts\":%llu,"
               "\"not_sent\":%llu,",
               rate, seconds, max_open, n_sources, (unsigned long long)st.due,
               (unsigned long long)st.sent, (unsigned long long)st.ok,
               (unsigned long long)st.refused, (unsigned long long)st.refused_retry_after,
               (unsigned long long)st.other, (unsigned long long)st.closed,
               (unsigned long long)st.connect_failed, (unsigned long long)st.timeouts,
               (unsigned long long)st.not_sent);
        print_pct("ok_ms", st.lat_ok, st.n_ok);
        putchar(',');
        print_pct("refused_ms", st.lat_refused, st.n_refused);
        printf(",\"per_second\":[");
        for (unsigned s = 0; s < st.seconds; s++)
                printf("%s[%llu,%llu,%llu,%llu]", s ? "," : "", (unsigned long long)st.per_s[s][0],
                       (unsigned long long)st.per_s[s][1], (unsigned long long)st.per_s[s][2],
                       (unsigned long long)st.per_s[s][3]);
        printf("]}\n");
        return 0;
}
