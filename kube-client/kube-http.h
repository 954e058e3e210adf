/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube-client's transport internals (kube-http.c): one request description, an optional
 * streaming sink for watch bodies, and the error translators.  Used by kube-ops.c.
 */
#pragma once

#include "kube-private.h"
#include "str.h"

/* Receives a 2xx body as it arrives; a negative return aborts the transfer and becomes
 * the request's result. */
struct kube__sink {
        int (*write)(const char *data, size_t len, void *userdata);
        void *userdata;
};

struct kube__request {
        const char *method;
        const char *path;          /* with query */
        const char *content_type;  /* NULL: none */
        const char *body;          /* NULL: none */
        size_t body_len;
        unsigned timeout_ms;       /* 0: the client's request timeout */
        atomic_bool *cancel;       /* may be NULL */
        const struct kube__sink *sink; /* NULL: buffer the body (capped by KUBE_MAX_BODY) */
};

/* Performs req (retrying once after a 401 with a re-read token).  On 2xx returns the
 * status and the buffered body (when no sink) in *ret_body (may be NULL); else -errno with
 * err filled. */
int kube__perform(struct kube_client *c, const struct kube__request *req, char **ret_body,
                  size_t *ret_len, struct kube_error *err);

int kube__http_to_errno(long status);
void kube__error_from_status(struct kube_error *err, long status, const char *body, size_t len);
