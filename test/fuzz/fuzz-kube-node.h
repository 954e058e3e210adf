/* SPDX-License-Identifier: Apache-2.0 */
/*
 * For the kube-client harnesses (fuzz-kube-decode, fuzz-kube-watch): a Node object decoded
 * both ways the cache can keep its labels, the listed keys (as the extender's default
 * tiers) and every label (kube_cache_options.node_labels_all, as the extender with
 * PodGroup topology keys), asserting what a decoded node's labels promise: at most
 * KUBE_MAX_KEPT_LABELS or KUBE_MAX_ALL_LABELS of them, each with a key of at most
 * KUBE_MAX_LABEL_KEY bytes and a value of at most KUBE_MAX_NAME, and only listed keys when
 * not all are kept.
 */
#pragma once

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kube-private.h"
#include "macro.h"

static inline void
fuzz_kube_node_labels_hold(const struct kube__obj *o, const char *const *listed, bool all)
{
        const struct kube_node *n = &o->node;

        if (n->n_labels > (all ? KUBE_MAX_ALL_LABELS : KUBE_MAX_KEPT_LABELS))
                abort();
        for (uint32_t i = 0; i < n->n_labels; i++) {
                const struct kube_kv *kv = &n->labels[i];
                bool known = all;

                if (!kv->key || !kv->value || strlen(kv->key) > KUBE_MAX_LABEL_KEY ||
                    strlen(kv->value) > KUBE_MAX_NAME)
                        abort();
                for (const char *const *k = listed; !known && k && *k; k++)
                        known = strcmp(*k, kv->key) == 0;
                if (!known)
                        abort();
        }
}

static inline void
fuzz_kube_decode_node_both(const cJSON *object, const char *const *gpu_resources,
                           const char *const *node_labels)
{
        for (int all = 0; all < 2; all++) {
                const struct kube__decode_opts opts = { gpu_resources, node_labels, all };
                CLEANUP(kube__obj_unrefp) struct kube__obj *o = NULL;
                const char *why = NULL;

                if (kube__decode_node(object, &opts, &o, &why) == 0 && o)
                        fuzz_kube_node_labels_hold(o, node_labels, all);
        }
}
