/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube-client internals shared by its files: the config struct, small string and file
 * helpers, the error helpers and the object decoders.  Not installed, not used outside
 * kube-client/.
 */
#pragma once

#include <stdarg.h>
#include <stdio.h>

#include "buf.h"
#include "kube.h"

struct kube_config {
        char *server;          /* "https://host:port", no trailing slash */
        char *ns;              /* namespace of the context / service account */
        char *ca_pem;          /* CA bundle bytes, NULL: system store */
        size_t ca_len;
        char *cert_pem;        /* client certificate (PEM), NULL when none */
        size_t cert_len;
        char *key_pem;         /* client key (PEM) */
        size_t key_len;
        char *token;           /* static bearer token, NULL when none */
        char *token_file;      /* re-read periodically and on 401, NULL when none */
        char *username;        /* basic auth */
        char *password;
        bool insecure;         /* insecure-skip-tls-verify */
        unsigned token_refresh_sec;
};

/* Reads a whole file of at most max bytes, NUL-terminated.  0, -ENOENT, -E2BIG, -errno. */
int kube__read_file(const char *path, size_t max, char **ret, size_t *ret_len);

/* Decodes standard base64 (whitespace ignored).  0, -EINVAL, -ENOMEM. */
int kube__base64_decode(const char *in, size_t len, char **ret, size_t *ret_len);

/* Writes a printf-formatted sentence into err (when non-NULL). */
void kube__error(struct kube_error *err, long http_status, const char *fmt, ...) _printf_(3, 4);

/* Appends s percent-encoded for a query value. */
int kube__buf_put_query(struct buf *b, const char *s);

DEFINE_CLEANUP_FUNC(cJSON, cJSON_Delete)

/* A uniform value in [0, n] for jitter; seeded per process from getrandom(), so replicas
 * started together do not reconnect in step.  Thread-safe. */
unsigned kube__jitter(unsigned n);

/* Decoders (kube-decode.c): a cJSON object into one allocation holding the struct and its
 * strings.  gpu_resources is NULL-terminated, labels NULL-terminated (may be NULL).
 * Return 0, -EINVAL (missing name / uid / wrong types: *ret_why), -ENOMEM. */
struct kube__obj;
struct kube__decode_opts {
        const char *const *gpu_resources;
        const char *const *node_labels;
        bool node_labels_all; /* keep every label (KUBE_MAX_ALL_LABELS), node_labels unused */
        const char *const *pod_labels;      /* NULL-terminated; NULL: none */
        const char *const *pod_annotations; /* beside KUBE_ANNOTATION_PREFIX; NULL: none */
};
int kube__decode_node(const cJSON *o, const struct kube__decode_opts *d, struct kube__obj **ret,
                      const char **ret_why);
int kube__decode_pod(const cJSON *o, const struct kube__decode_opts *d, struct kube__obj **ret,
                     const char **ret_why);

/* A PodGroup (needs no options).  Same returns. */
int kube__decode_podgroup(const cJSON *o, struct kube__obj **ret, const char **ret_why);

/* The creationTimestamp of o in milliseconds since the epoch, -1 when absent/invalid. */
int64_t kube__creation_ms(const cJSON *o);

/* A decoded object: a refcounted header before the public struct. */
enum kube__kind { KUBE__NODE, KUBE__POD, KUBE__PODGROUP, _KUBE__KIND_MAX };
struct kube__obj {
        struct kube__obj *next; /* the store's hash chain; touched only under the store lock */
        uint64_t hash;
        unsigned refs;          /* atomic */
        uint8_t kind;           /* enum kube__kind */
        const char *key_ns;     /* "" for nodes */
        const char *key_name;
        union {
                struct kube_node node;
                struct kube_pod pod;
                struct kube_podgroup podgroup;
        };
};
struct kube__obj *kube__obj_ref(struct kube__obj *o);
struct kube__obj *kube__obj_unref(struct kube__obj *o);
DEFINE_CLEANUP_FUNC(struct kube__obj, kube__obj_unref)
uint64_t kube__key_hash(const char *ns, const char *name);

/* The watch stream's framing (kube-ops.c), apart from the HTTP request so that tests and
 * the fuzz harness test/fuzz/fuzz-kube-watch.c feed it bytes directly: newline-delimited
 * {"type","object"} events, each line capped by KUBE_MAX_EVENT, blank lines kept alive.
 * feed takes the body in chunks of any size and calls fn once per complete event, updating
 * *rv (may be NULL) as kube_watch documents; it returns 0 or the error that ends the watch
 * (-E2BIG, -EBADMSG, an ERROR event's code as -errno, fn's negative return).  end says how
 * the stream ended: the number of events delivered, or -ECONNRESET inside an event. */
struct kube__watch {
        struct buf line;       /* the partial event line, capped by KUBE_MAX_EVENT */
        kube_event_fn fn;
        void *userdata;
        char **rv;             /* the caller's newest resourceVersion */
        struct kube_error *err;
        long error_code;       /* an ERROR event's code */
        unsigned events;
};
void kube__watch_init(struct kube__watch *w, kube_event_fn fn, void *userdata, char **rv,
                      struct kube_error *err);
int kube__watch_feed(struct kube__watch *w, const char *data, size_t len);
int kube__watch_end(struct kube__watch *w);
void kube__watch_release(struct kube__watch *w);
