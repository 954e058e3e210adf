/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The API operations on top of kube-http.c: GET, paginated LIST, WATCH (a chunked stream
 * of newline-delimited {"type","object"} events, each capped by KUBE_MAX_EVENT), PATCH
 * (merge, JSON, strategic), the pod binding subresource and Events.  JSON in and out is
 * cJSON; objects handed to callbacks are borrowed for the call.  Stateless: every call
 * builds its own query; the caller owns resourceVersions and retries.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <limits.h>
#include <sys/random.h>
#include <unistd.h>

#include "buf.h"
#include "kube-http.h"
#include "str.h"

static const char *const event_type_table[_KUBE_EVENT_MAX] = {
        [KUBE_EVENT_ADDED] = "ADDED",
        [KUBE_EVENT_MODIFIED] = "MODIFIED",
        [KUBE_EVENT_DELETED] = "DELETED",
        [KUBE_EVENT_BOOKMARK] = "BOOKMARK",
        [KUBE_EVENT_ERROR] = "ERROR",
};

DEFINE_STRING_TABLE(kube_event_type, enum kube_event_type, event_type_table)

static const char *const patch_type_table[_KUBE_PATCH_MAX] = {
        [KUBE_PATCH_MERGE] = "application/merge-patch+json",
        [KUBE_PATCH_JSON] = "application/json-patch+json",
        [KUBE_PATCH_STRATEGIC] = "application/strategic-merge-patch+json",
};

DEFINE_STRING_TABLE_TO_STRING(kube_patch_type, enum kube_patch_type, patch_type_table)

unsigned
kube__jitter(unsigned n)
{
        static uint64_t state; /* atomic; 0 = not seeded yet */
        uint64_t x = __atomic_load_n(&state, __ATOMIC_RELAXED), next, zero = 0;

        if (x == 0) {
                uint64_t seed = 0;
                if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
                        seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
                /* Whoever seeds first wins; the others see its seed. */
                __atomic_compare_exchange_n(&state, &zero, seed | 1, false, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED);
                x = __atomic_load_n(&state, __ATOMIC_RELAXED);
        }
        do {
                next = x;
                next ^= next << 13; /* xorshift64: never reaches 0 from non-zero */
                next ^= next >> 7;
                next ^= next << 17;
        } while (!__atomic_compare_exchange_n(&state, &x, next, false, __ATOMIC_RELAXED,
                                              __ATOMIC_RELAXED));
        return n == UINT_MAX ? (unsigned)next : (unsigned)(next % ((uint64_t)n + 1));
}

int
kube__buf_put_query(struct buf *b, const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        int r = 0;

        for (; *s && r >= 0; s++) {
                unsigned char ch = (unsigned char)*s;
                bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                             (ch >= '0' && ch <= '9') || strchr("-._~", ch);
                if (plain)
                        r = buf_append(b, s, 1);
                else {
                        char esc[3] = { '%', hex[ch >> 4], hex[ch & 15] };
                        r = buf_append(b, esc, 3);
                }
        }
        return r;
}

/* Appends "<sep>name=value" (value escaped) when value is non-NULL and non-empty. */
static int
query_add(struct buf *b, const char *name, const char *value)
{
        int r;

        if (!value || !*value)
                return 0;
        r = buf_printf(b, "%c%s=", strchr(b->data ? b->data : "", '?') ? '&' : '?', name);
        return r < 0 ? r : kube__buf_put_query(b, value);
}

static int
parse_json(const char *body, size_t len, cJSON **ret, const char *what, struct kube_error *err)
{
        cJSON *j = cJSON_ParseWithLength(body, len);

        if (!j) {
                kube__error(err, 0, "%s: the response is not valid JSON", what);
                return -EBADMSG;
        }
        *ret = j;
        return 0;
}

int
kube_get(struct kube_client *c, const char *path, cJSON **ret, struct kube_error *err)
{
        CLEANUP(freep) char *body = NULL;
        size_t len = 0;
        int r;

        r = kube_request(c, "GET", path, NULL, NULL, 0, &body, &len, err);
        if (r < 0)
                return r;
        return parse_json(body, len, ret, path, err);
}

int
kube_list(struct kube_client *c, const char *collection, const struct kube_selector *sel,
          unsigned page_size, kube_item_fn fn, void *userdata, char **ret_resource_version,
          struct kube_error *err)
{
        CLEANUP(freep) char *cont = NULL, *rv = NULL;
        int count = 0, r;

        if (page_size == 0)
                page_size = KUBE_LIST_PAGE_DEFAULT;
        do {
                CLEANUP(buf_release) struct buf path;
                CLEANUP(cJSON_Deletep) cJSON *list = NULL;
                CLEANUP(freep) char *body = NULL;
                const cJSON *items, *meta, *item, *v;
                size_t len = 0;
                char limit[16];

                buf_init(&path, KUBE_MAX_PATH);
                snprintf(limit, sizeof(limit), "%u", page_size);
                r = buf_puts(&path, collection);
                if (r >= 0)
                        r = query_add(&path, "limit", limit);
                if (r >= 0)
                        r = query_add(&path, "continue", cont);
                if (r >= 0 && sel)
                        r = query_add(&path, "fieldSelector", sel->field);
                if (r >= 0 && sel)
                        r = query_add(&path, "labelSelector", sel->label);
                if (r < 0) {
                        kube__error(err, 0, "LIST %s: the query is too long", collection);
                        return r;
                }
                r = kube_request(c, "GET", path.data, NULL, NULL, 0, &body, &len, err);
                if (r < 0)
                        return r;
                r = parse_json(body, len, &list, collection, err);
                if (r < 0)
                        return r;
                free(TAKE_PTR(body));
                items = cJSON_GetObjectItemCaseSensitive(list, "items");
                meta = cJSON_GetObjectItemCaseSensitive(list, "metadata");
                if (!cJSON_IsObject(meta) || !(cJSON_IsArray(items) || cJSON_IsNull(items))) {
                        kube__error(err, 0, "LIST %s: the response is not a list", collection);
                        return -EBADMSG;
                }
                /* The first page's resourceVersion is the list's: pages share a snapshot. */
                v = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
                if (!rv && cJSON_IsString(v) && !(rv = strdup(v->valuestring)))
                        return -ENOMEM;
                cJSON_ArrayForEach(item, items) {
                        r = fn(item, userdata);
                        if (r < 0)
                                return r;
                        count++;
                }
                free(TAKE_PTR(cont));
                v = cJSON_GetObjectItemCaseSensitive(meta, "continue");
                if (cJSON_IsString(v) && v->valuestring[0]) {
                        if (strlen(v->valuestring) > KUBE_MAX_PATH / 2) {
                                kube__error(err, 0, "LIST %s: continue token too long",
                                            collection);
                                return -EBADMSG;
                        }
                        cont = strdup(v->valuestring);
                        if (!cont)
                                return -ENOMEM;
                }
        } while (cont);
        if (!rv) {
                kube__error(err, 0, "LIST %s: the list has no resourceVersion", collection);
                return -EBADMSG;
        }
        if (ret_resource_version) {
                free(*ret_resource_version);
                *ret_resource_version = TAKE_PTR(rv);
        }
        return count;
}

/* --- watch ------------------------------------------------------------------------- */

struct watch_state {
        struct buf line;       /* the partial event line, capped by KUBE_MAX_EVENT */
        kube_event_fn fn;
        void *userdata;
        char **rv;             /* the caller's newest resourceVersion */
        struct kube_error *err;
        long error_code;       /* an ERROR event's code */
        unsigned events;
};

static int
watch_set_rv(struct watch_state *w, const cJSON *object)
{
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(object, "metadata");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
        char *s;

        if (!cJSON_IsString(v) || !v->valuestring[0] || !w->rv)
                return 0;
        s = strdup(v->valuestring);
        if (!s)
                return -ENOMEM;
        free(*w->rv);
        *w->rv = s;
        return 0;
}

static int
watch_event(struct watch_state *w, const char *data, size_t len)
{
        CLEANUP(cJSON_Deletep) cJSON *ev = NULL;
        const cJSON *type, *object;
        enum kube_event_type t;
        int r;

        str_trim(&data, &len);
        if (len == 0)
                return 0; /* keep-alive blank line */
        ev = cJSON_ParseWithLength(data, len);
        if (!ev) {
                kube__error(w->err, 0, "watch: an event is not valid JSON");
                return -EBADMSG;
        }
        type = cJSON_GetObjectItemCaseSensitive(ev, "type");
        object = cJSON_GetObjectItemCaseSensitive(ev, "object");
        t = cJSON_IsString(type) ? kube_event_type_from_string(type->valuestring)
                                 : _KUBE_EVENT_INVALID;
        if (t < 0 || !cJSON_IsObject(object)) {
                kube__error(w->err, 0, "watch: an event has no valid type or object");
                return -EBADMSG;
        }
        if (t == KUBE_EVENT_ERROR) {
                /* A Status object: 410 Expired/Gone means relist. */
                const cJSON *code = cJSON_GetObjectItemCaseSensitive(object, "code");
                const cJSON *msg = cJSON_GetObjectItemCaseSensitive(object, "message");
                w->error_code = cJSON_IsNumber(code) ? (long)code->valuedouble : 500;
                kube__error(w->err, w->error_code, "watch: ERROR event %ld: %s", w->error_code,
                            cJSON_IsString(msg) ? msg->valuestring : "no message");
                return kube__http_to_errno(w->error_code);
        }
        w->events++;
        r = w->fn(t, object, w->userdata);
        if (r < 0)
                return r;
        return watch_set_rv(w, object);
}

static int
watch_write(const char *data, size_t len, void *userdata)
{
        struct watch_state *w = userdata;
        int r;

        while (len > 0) {
                const char *nl = memchr(data, '\n', len);
                size_t n = nl ? (size_t)(nl - data) : len;

                r = buf_append(&w->line, data, n);
                if (r == -E2BIG) {
                        kube__error(w->err, 0, "watch: an event is larger than %u bytes",
                                    KUBE_MAX_EVENT);
                        return r;
                }
                if (r < 0)
                        return r;
                if (!nl)
                        break;
                r = watch_event(w, w->line.data, w->line.len);
                if (r < 0)
                        return r;
                buf_reset(&w->line);
                data += n + 1;
                len -= n + 1;
        }
        return 0;
}

int
kube_watch(struct kube_client *c, const char *collection, const struct kube_watch_options *opts,
           kube_event_fn fn, void *userdata, char **ret_resource_version,
           struct kube_error *err)
{
        CLEANUP(buf_release) struct buf path;
        struct watch_state w = {
                .fn = fn,
                .userdata = userdata,
                .rv = ret_resource_version,
                .err = err,
        };
        struct kube__sink sink = { watch_write, &w };
        unsigned timeout = opts ? opts->timeout_seconds : 0;
        char tbuf[16];
        int r;

        if (timeout == 0) {
                /* Jitter spreads reconnects of many clients (as client-go does). */
                unsigned span = KUBE_WATCH_TIMEOUT_MAX_SEC - KUBE_WATCH_TIMEOUT_MIN_SEC;
                timeout = KUBE_WATCH_TIMEOUT_MIN_SEC + kube__jitter(span);
        }
        snprintf(tbuf, sizeof(tbuf), "%u", timeout);
        buf_init(&path, KUBE_MAX_PATH);
        r = buf_puts(&path, collection);
        if (r >= 0)
                r = query_add(&path, "watch", "true");
        if (r >= 0)
                r = query_add(&path, "allowWatchBookmarks", "true");
        if (r >= 0)
                r = query_add(&path, "timeoutSeconds", tbuf);
        if (r >= 0 && opts)
                r = query_add(&path, "resourceVersion", opts->resource_version);
        if (r >= 0 && opts)
                r = query_add(&path, "fieldSelector", opts->selector.field);
        if (r >= 0 && opts)
                r = query_add(&path, "labelSelector", opts->selector.label);
        if (r < 0) {
                kube__error(err, 0, "WATCH %s: the query is too long", collection);
                return r;
        }

        buf_init(&w.line, KUBE_MAX_EVENT);
        struct kube__request req = {
                .method = "GET",
                .path = path.data,
                .timeout_ms = (timeout + 30) * 1000u,
                .cancel = opts ? opts->cancel : NULL,
                .sink = &sink,
        };
        r = kube__perform(c, &req, NULL, NULL, err);
        if (r >= 0 && w.line.len > 0) {
                /* The stream ended cleanly but in the middle of an event. */
                kube__error(err, 0, "watch: the stream ended inside an event");
                r = -ECONNRESET;
        }
        buf_release(&w.line);
        if (r == -ECANCELED)
                kube__error(err, 0, "watch: cancelled");
        return r < 0 ? r : (int)w.events;
}

/* --- writes ------------------------------------------------------------------------ */

int
kube_patch(struct kube_client *c, const char *path, enum kube_patch_type type,
           const char *patch, size_t len, cJSON **ret, struct kube_error *err)
{
        CLEANUP(freep) char *body = NULL;
        const char *ct = kube_patch_type_to_string(type);
        size_t blen = 0;
        int r;

        if (!ct) {
                kube__error(err, 0, "PATCH %s: unknown patch type", path);
                return -EINVAL;
        }
        r = kube_request(c, "PATCH", path, ct, patch, len, ret ? &body : NULL, &blen, err);
        if (r < 0 || !ret)
                return r < 0 ? r : 0;
        r = parse_json(body, blen, ret, path, err);
        return r < 0 ? r : 0;
}

static int
name_ok(const char *s)
{
        return s && *s && strlen(s) <= KUBE_MAX_NAME && !strpbrk(s, "/?#%");
}

int
kube_bind(struct kube_client *c, const char *ns, const char *pod, const char *uid,
          const char *node, const struct kube_kv *annotations, size_t n_annotations,
          struct kube_error *err)
{
        CLEANUP(buf_release) struct buf body;
        char path[KUBE_MAX_PATH];
        int r;

        if (!name_ok(ns) || !name_ok(pod) || !name_ok(node)) {
                kube__error(err, 0, "bind: namespace, pod or node name is invalid");
                return -EINVAL;
        }
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/binding", ns, pod);
        buf_init(&body, KUBE_MAX_BODY);
        r = buf_puts(&body, "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":");
        r = r < 0 ? r : buf_put_json_string(&body, pod);
        r = r < 0 ? r : buf_puts(&body, ",\"namespace\":");
        r = r < 0 ? r : buf_put_json_string(&body, ns);
        if (uid) {
                r = r < 0 ? r : buf_puts(&body, ",\"uid\":");
                r = r < 0 ? r : buf_put_json_string(&body, uid);
        }
        if (n_annotations > 0) {
                r = r < 0 ? r : buf_puts(&body, ",\"annotations\":{");
                for (size_t i = 0; i < n_annotations && r >= 0; i++) {
                        r = buf_puts(&body, i ? "," : "");
                        r = r < 0 ? r : buf_put_json_string(&body, annotations[i].key);
                        r = r < 0 ? r : buf_puts(&body, ":");
                        r = r < 0 ? r : buf_put_json_string(&body, annotations[i].value);
                }
                r = r < 0 ? r : buf_puts(&body, "}");
        }
        r = r < 0 ? r : buf_puts(&body, "},\"target\":{\"apiVersion\":\"v1\",\"kind\":\"Node\","
                                        "\"name\":");
        r = r < 0 ? r : buf_put_json_string(&body, node);
        r = r < 0 ? r : buf_puts(&body, "}}");
        if (r < 0) {
                kube__error(err, 0, "bind: the request is too large");
                return r;
        }
        r = kube_request(c, "POST", path, "application/json", body.data, body.len, NULL, NULL,
                         err);
        return r < 0 ? r : 0;
}

int
kube_emit_event(struct kube_client *c, const char *ns, const char *pod, const char *uid,
                const char *type, const char *reason, const char *message,
                struct kube_error *err)
{
        CLEANUP(cJSON_Deletep) cJSON *ev = cJSON_CreateObject();
        CLEANUP(freep) char *text = NULL;
        char path[KUBE_MAX_PATH], name[KUBE_MAX_NAME + 1], now[32];
        struct timespec ts;
        struct tm tm;
        cJSON *meta, *obj;
        int r;

        if (!name_ok(ns) || !name_ok(pod)) {
                kube__error(err, 0, "event: namespace or pod name is invalid");
                return -EINVAL;
        }
        if (!ev)
                return -ENOMEM;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
        /* Unique like client-go's: <object>.<hex nanoseconds>, cut to a valid length. */
        snprintf(name, sizeof(name), "%.200s.%llx", pod,
                 (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
        meta = cJSON_AddObjectToObject(ev, "metadata");
        obj = cJSON_AddObjectToObject(ev, "involvedObject");
        if (!meta || !obj || !cJSON_AddStringToObject(meta, "name", name) ||
            !cJSON_AddStringToObject(meta, "namespace", ns) ||
            !cJSON_AddStringToObject(obj, "kind", "Pod") ||
            !cJSON_AddStringToObject(obj, "apiVersion", "v1") ||
            !cJSON_AddStringToObject(obj, "namespace", ns) ||
            !cJSON_AddStringToObject(obj, "name", pod) ||
            (uid && !cJSON_AddStringToObject(obj, "uid", uid)) ||
            !cJSON_AddStringToObject(ev, "type", type ? type : "Normal") ||
            !cJSON_AddStringToObject(ev, "reason", reason ? reason : "Scheduled") ||
            !cJSON_AddStringToObject(ev, "message", message ? message : "") ||
            !cJSON_AddStringToObject(ev, "firstTimestamp", now) ||
            !cJSON_AddStringToObject(ev, "lastTimestamp", now) ||
            !cJSON_AddNumberToObject(ev, "count", 1))
                return -ENOMEM;
        cJSON *src = cJSON_AddObjectToObject(ev, "source");
        if (!src || !cJSON_AddStringToObject(src, "component", "topofit"))
                return -ENOMEM;
        text = cJSON_PrintUnformatted(ev);
        if (!text)
                return -ENOMEM;
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", ns);
        r = kube_request(c, "POST", path, "application/json", text, strlen(text), NULL, NULL,
                         err);
        return r < 0 ? r : 0;
}
