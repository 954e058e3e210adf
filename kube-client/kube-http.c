/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transport: libcurl easy handles, auth, and the one place where CURLcode and HTTP
 * status become -errno plus a sentence.  A client keeps a small locked pool of idle easy
 * handles; each request borrows one (so connections and TLS sessions are reused, HTTP/2
 * where ALPN offers it) and gives it back.  The bearer token lives here under its own lock:
 * re-read from the token file every token_refresh_sec and after a 401, then the request
 * is retried once.  Response bodies are capped (KUBE_MAX_BODY); streaming callers (watch)
 * pass their own sink.  Nothing here parses JSON except a failed response's Status message.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "buf.h"
#include "kube-http.h"
#include "topofit-version.h"

#define KUBE_POOL_MAX 8           /* idle easy handles kept per client */
#define KUBE_ERROR_BODY_MAX 65536 /* the body of a failed response we read for its message */

struct kube_client {
        struct kube_config *cfg;
        char user_agent[128];
        unsigned connect_timeout_ms;
        unsigned request_timeout_ms;

        pthread_mutex_t lock; /* pool, token, stats */
        CURL *pool[KUBE_POOL_MAX];
        unsigned n_pool;
        CURLSH *share;        /* DNS, TLS sessions and idle connections shared by the pool */
        pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST]; /* one per data kind: curl
                                                           * may hold two at once */
        char *token;          /* current bearer token (from cfg or its file) */
        struct timespec token_read_at;
        struct kube_client_stats stats;
};

/* --- error translation: the only place CURLcode and HTTP status become -errno --------- */

static const struct {
        CURLcode code;
        int err;
} curl_errors[] = {
        { CURLE_COULDNT_RESOLVE_HOST, -EHOSTUNREACH },
        { CURLE_COULDNT_RESOLVE_PROXY, -EHOSTUNREACH },
        { CURLE_COULDNT_CONNECT, -ECONNREFUSED },
        { CURLE_OPERATION_TIMEDOUT, -ETIMEDOUT },
        { CURLE_SSL_CONNECT_ERROR, -EPROTO },
        { CURLE_PEER_FAILED_VERIFICATION, -EPROTO },
        { CURLE_SSL_CERTPROBLEM, -EPROTO },
        { CURLE_SSL_CIPHER, -EPROTO },
        { CURLE_SSL_CACERT_BADFILE, -EPROTO },
        { CURLE_SSL_ISSUER_ERROR, -EPROTO },
        { CURLE_PARTIAL_FILE, -ECONNRESET },
        { CURLE_RECV_ERROR, -ECONNRESET },
        { CURLE_SEND_ERROR, -ECONNRESET },
        { CURLE_GOT_NOTHING, -ECONNRESET },
        { CURLE_HTTP2, -ECONNRESET },
        { CURLE_HTTP2_STREAM, -ECONNRESET },
        { CURLE_WEIRD_SERVER_REPLY, -EBADMSG },
        { CURLE_BAD_CONTENT_ENCODING, -EBADMSG },
        { CURLE_OUT_OF_MEMORY, -ENOMEM },
        { CURLE_ABORTED_BY_CALLBACK, -ECANCELED },
        { CURLE_URL_MALFORMAT, -EINVAL },
        { CURLE_UNSUPPORTED_PROTOCOL, -EPROTONOSUPPORT },
        { CURLE_TOO_MANY_REDIRECTS, -ELOOP },
};

static int
curl_to_errno(CURLcode code)
{
        for (size_t i = 0; i < ELEMENTSOF(curl_errors); i++)
                if (curl_errors[i].code == code)
                        return curl_errors[i].err;
        return -EIO;
}

static const struct {
        long status;
        int err;
} http_errors[] = {
        { 400, -EINVAL }, { 401, -EACCES }, { 403, -EPERM },  { 404, -ENOENT },
        { 405, -EOPNOTSUPP }, { 409, -EEXIST }, { 410, -ESTALE }, { 413, -E2BIG },
        { 415, -EOPNOTSUPP }, { 422, -EINVAL }, { 429, -EAGAIN }, { 503, -EAGAIN },
        { 504, -ETIMEDOUT },
};

int
kube__http_to_errno(long status)
{
        for (size_t i = 0; i < ELEMENTSOF(http_errors); i++)
                if (http_errors[i].status == status)
                        return http_errors[i].err;
        return status >= 500 ? -EIO : -EPROTO;
}

void
kube__error(struct kube_error *err, long http_status, const char *fmt, ...)
{
        va_list ap;

        if (!err)
                return;
        err->http_status = http_status;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        if (!err->message[0])
                snprintf(err->message, sizeof(err->message), "request failed");
}

/* Fills err from a failed response: the Status object's message when there is one. */
void
kube__error_from_status(struct kube_error *err, long status, const char *body, size_t len)
{
        CLEANUP(cJSON_Deletep) cJSON *j = NULL;
        const cJSON *msg;

        if (!err)
                return;
        if (body && len)
                j = cJSON_ParseWithLength(body, len);
        msg = cJSON_GetObjectItemCaseSensitive(j, "message");
        if (cJSON_IsString(msg) && msg->valuestring[0])
                kube__error(err, status, "HTTP %ld: %s", status, msg->valuestring);
        else
                kube__error(err, status, "HTTP %ld from the API server", status);
}

/* --- the client --------------------------------------------------------------------- */

static void
global_init(void)
{
        curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void
share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *userdata)
{
        if (data >= 0 && data < CURL_LOCK_DATA_LAST)
                pthread_mutex_lock(&((struct kube_client *)userdata)->share_locks[data]);
}

static void
share_unlock(CURL *h, curl_lock_data data, void *userdata)
{
        if (data >= 0 && data < CURL_LOCK_DATA_LAST)
                pthread_mutex_unlock(&((struct kube_client *)userdata)->share_locks[data]);
}

int
kube_client_new(struct kube_config *cfg, const struct kube_client_options *opts,
                struct kube_client **ret)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        struct kube_client *c;

        pthread_once(&once, global_init);
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        pthread_mutex_init(&c->lock, NULL);
        for (size_t i = 0; i < ELEMENTSOF(c->share_locks); i++)
                pthread_mutex_init(&c->share_locks[i], NULL);
        snprintf(c->user_agent, sizeof(c->user_agent), "%s",
                 opts && opts->user_agent ? opts->user_agent : "topofit/" TOPOFIT_VERSION);
        c->connect_timeout_ms = opts && opts->connect_timeout_ms ? opts->connect_timeout_ms : 10000;
        c->request_timeout_ms = opts && opts->request_timeout_ms ? opts->request_timeout_ms : 30000;
        c->share = curl_share_init();
        if (!c->share || (cfg->token && !(c->token = strdup(cfg->token)))) {
                if (c->share)
                        curl_share_cleanup(c->share);
                free(c);
                return -ENOMEM;
        }
        curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
        curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
        curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
        /* One pool of idle connections for all handles: a request reuses whichever
         * connection another thread left open. */
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
        clock_gettime(CLOCK_MONOTONIC, &c->token_read_at);
        c->cfg = cfg;
        *ret = c;
        return 0;
}

struct kube_client *
kube_client_free(struct kube_client *c)
{
        if (!c)
                return NULL;
        for (unsigned i = 0; i < c->n_pool; i++)
                curl_easy_cleanup(c->pool[i]);
        curl_share_cleanup(c->share);
        if (c->token)
                explicit_bzero(c->token, strlen(c->token));
        free(c->token);
        kube_config_free(c->cfg);
        pthread_mutex_destroy(&c->lock);
        for (size_t i = 0; i < ELEMENTSOF(c->share_locks); i++)
                pthread_mutex_destroy(&c->share_locks[i]);
        free(c);
        return NULL;
}

const struct kube_config *
kube_client_config(const struct kube_client *c)
{
        return c->cfg;
}

void
kube_client_stats(const struct kube_client *c, struct kube_client_stats *ret)
{
        pthread_mutex_lock((pthread_mutex_t *)&c->lock);
        *ret = c->stats;
        pthread_mutex_unlock((pthread_mutex_t *)&c->lock);
}

static CURL *
handle_take(struct kube_client *c)
{
        CURL *h = NULL;

        pthread_mutex_lock(&c->lock);
        if (c->n_pool > 0)
                h = c->pool[--c->n_pool];
        pthread_mutex_unlock(&c->lock);
        if (h) {
                curl_easy_reset(h); /* options only: its connections stay open */
                return h;
        }
        return curl_easy_init();
}

static void
handle_give(struct kube_client *c, CURL *h)
{
        pthread_mutex_lock(&c->lock);
        if (c->n_pool < KUBE_POOL_MAX) {
                c->pool[c->n_pool++] = h;
                h = NULL;
        }
        pthread_mutex_unlock(&c->lock);
        if (h)
                curl_easy_cleanup(h);
}

static int64_t
elapsed_ms(const struct timespec *since)
{
        struct timespec now;

        clock_gettime(CLOCK_MONOTONIC, &now);
        return (int64_t)(now.tv_sec - since->tv_sec) * 1000 +
               (now.tv_nsec - since->tv_nsec) / 1000000;
}

/* Copies the bearer token to send into buf (re-reading its file when due or forced).
 * Returns 1 with a token, 0 without one, -errno when the file became unreadable and no
 * older token is known. */
static int
token_get(struct kube_client *c, bool force, char **ret)
{
        const struct kube_config *cfg = c->cfg;
        CLEANUP(freep) char *fresh = NULL;
        int r = 0;

        pthread_mutex_lock(&c->lock);
        if (cfg->token_file &&
            (force || elapsed_ms(&c->token_read_at) >= (int64_t)cfg->token_refresh_sec * 1000)) {
                r = kube__read_file(cfg->token_file, KUBE_MAX_TOKEN, &fresh, NULL);
                if (r >= 0) {
                        const char *s = fresh;
                        size_t len = strlen(fresh);
                        str_trim(&s, &len);
                        if (len > 0) {
                                memmove(fresh, s, len);
                                fresh[len] = 0;
                                if (c->token)
                                        explicit_bzero(c->token, strlen(c->token));
                                free(c->token);
                                c->token = TAKE_PTR(fresh);
                        }
                        c->stats.token_rereads++;
                        clock_gettime(CLOCK_MONOTONIC, &c->token_read_at);
                }
                /* A failed re-read keeps the older token: it may still be valid. */
        }
        if (c->token) {
                *ret = strdup(c->token);
                r = *ret ? 1 : -ENOMEM;
        } else
                r = r < 0 ? r : 0;
        pthread_mutex_unlock(&c->lock);
        return r;
}

/* Where a response body goes: a capped buffer, unless the caller streams it. */
struct sink_ctx {
        CURL *h;
        const struct kube__sink *sink;
        struct buf body;     /* the body when no sink, or an error body */
        long status;         /* response code once known, 0 before */
        int err;             /* the sink's or the cap's error */
        size_t cap;
};

static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct sink_ctx *s = userdata;
        size_t n = size * nmemb;
        int r;

        if (s->status == 0)
                curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &s->status);
        if (s->sink && s->status >= 200 && s->status < 300) {
                r = s->sink->write(ptr, n, s->sink->userdata);
                if (r < 0) {
                        s->err = r;
                        return 0;
                }
                return n;
        }
        if (s->status < 200 || s->status >= 300) {
                /* An error body: keep what fits of it for the message, drop the rest. */
                if (s->body.len < KUBE_ERROR_BODY_MAX)
                        (void)buf_append(&s->body, ptr,
                                         MIN(n, KUBE_ERROR_BODY_MAX - s->body.len));
                return n;
        }
        r = buf_append(&s->body, ptr, n);
        if (r < 0) {
                s->err = r;
                return 0;
        }
        return n;
}

static int
xferinfo_cb(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
            curl_off_t ulnow)
{
        atomic_bool *cancel = userdata;
        return cancel && atomic_load(cancel) ? 1 : 0;
}

static void
slist_freep(struct curl_slist **l)
{
        curl_slist_free_all(*l);
}

/* One attempt.  Returns the HTTP status (any) or -errno; s collects the body. */
static int
perform_once(struct kube_client *c, CURL *h, const struct kube__request *req, const char *token,
             struct sink_ctx *s, struct kube_error *err)
{
        const struct kube_config *cfg = c->cfg;
        CLEANUP(slist_freep) struct curl_slist *hdrs = NULL;
        CLEANUP(freep) char *url = NULL;
        char line[KUBE_MAX_TOKEN + 64];
        char curl_msg[CURL_ERROR_SIZE] = "";
        CURLcode code;

        if (asprintf(&url, "%s%s", cfg->server, req->path) < 0) {
                url = NULL;
                return -ENOMEM;
        }
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_SHARE, c->share);
        curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
        curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
        curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, ""); /* gzip for large LISTs */
        curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_timeout_ms);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                         (long)(req->timeout_ms ? req->timeout_ms : c->request_timeout_ms));
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_msg);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, req->cancel);
        if (cfg->ca_pem) {
                struct curl_blob b = { cfg->ca_pem, cfg->ca_len, CURL_BLOB_NOCOPY };
                curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
        }
        if (cfg->cert_pem) {
                struct curl_blob cb = { cfg->cert_pem, cfg->cert_len, CURL_BLOB_NOCOPY };
                struct curl_blob kb = { cfg->key_pem, cfg->key_len, CURL_BLOB_NOCOPY };
                curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cb);
                curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
                curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &kb);
                curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
        }
        if (cfg->insecure) {
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
        }
        if (cfg->username) {
                curl_easy_setopt(h, CURLOPT_USERNAME, cfg->username);
                curl_easy_setopt(h, CURLOPT_PASSWORD, cfg->password);
        }
        hdrs = curl_slist_append(hdrs, "Accept: application/json");
        if (token) {
                snprintf(line, sizeof(line), "Authorization: Bearer %s", token);
                hdrs = curl_slist_append(hdrs, line);
                explicit_bzero(line, sizeof(line));
        }
        if (req->content_type) {
                snprintf(line, sizeof(line), "Content-Type: %s", req->content_type);
                hdrs = curl_slist_append(hdrs, line);
        }
        if (!hdrs)
                return -ENOMEM;
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        if (strcmp(req->method, "GET") != 0)
                curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
        if (req->body) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        }

        code = curl_easy_perform(h);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
        long connects = 0;
        if (curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects > 0) {
                pthread_mutex_lock(&c->lock);
                c->stats.connections_opened += (uint64_t)connects;
                pthread_mutex_unlock(&c->lock);
        }
        if (s->status == 0)
                curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &s->status);
        if (code == CURLE_WRITE_ERROR && s->err < 0) {
                if (s->err == -E2BIG && !s->sink) /* a sink words its own errors */
                        kube__error(err, s->status, "%s %s: response larger than its cap",
                                    req->method, req->path);
                return s->err;
        }
        if (code != CURLE_OK) {
                int r = curl_to_errno(code);
                kube__error(err, 0, "%s %s: %s", req->method, req->path,
                            curl_msg[0] ? curl_msg : curl_easy_strerror(code));
                return r;
        }
        return (int)s->status;
}

int
kube__perform(struct kube_client *c, const struct kube__request *req, char **ret_body,
              size_t *ret_len, struct kube_error *err)
{
        CURL *h;
        int r = 0;

        if (strlen(req->path) > KUBE_MAX_PATH || req->path[0] != '/') {
                kube__error(err, 0, "request path is invalid or too long");
                return -EINVAL;
        }
        h = handle_take(c);
        if (!h)
                return -ENOMEM;
        for (int attempt = 0; attempt < 2; attempt++) {
                CLEANUP(freep) char *token = NULL;
                struct sink_ctx s = { .h = h, .sink = req->sink };

                buf_init(&s.body, KUBE_MAX_BODY);
                r = token_get(c, attempt > 0, &token);
                if (r < 0) {
                        kube__error(err, 0, "cannot read the bearer token file");
                        buf_release(&s.body);
                        break;
                }
                r = perform_once(c, h, req, token, &s, err);
                if (token)
                        explicit_bzero(token, strlen(token));
                if (r == 401) {
                        pthread_mutex_lock(&c->lock);
                        c->stats.unauthorized++;
                        pthread_mutex_unlock(&c->lock);
                        /* A rotated token: re-read it and try once more (as client-go does);
                         * only a token file can change, so a static token is not retried. */
                        if (attempt == 0 && c->cfg->token_file) {
                                buf_release(&s.body);
                                continue;
                        }
                }
                if (r >= 200 && r < 300 && ret_body) {
                        /* Appending nothing terminates even a body that got no byte. */
                        char *d = buf_append(&s.body, "", 0) < 0 ? NULL
                                                                 : buf_steal(&s.body, ret_len);
                        if (d)
                                *ret_body = d;
                        else
                                r = -ENOMEM;
                } else if (r >= 200 && r < 300) {
                        if (ret_len)
                                *ret_len = s.body.len;
                } else if (r >= 0) {
                        kube__error_from_status(err, r, s.body.data, s.body.len);
                        r = kube__http_to_errno(r);
                }
                buf_release(&s.body);
                break;
        }
        pthread_mutex_lock(&c->lock);
        c->stats.requests++;
        if (r < 0)
                c->stats.errors++;
        pthread_mutex_unlock(&c->lock);
        handle_give(c, h);
        return r;
}

int
kube_request(struct kube_client *c, const char *method, const char *path,
             const char *content_type, const char *body, size_t body_len, char **ret_body,
             size_t *ret_len, struct kube_error *err)
{
        struct kube__request req = {
                .method = method,
                .path = path,
                .content_type = content_type,
                .body = body,
                .body_len = body_len,
        };
        return kube__perform(c, &req, ret_body, ret_len, err);
}
