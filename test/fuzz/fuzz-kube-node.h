/* SPDX-License-Identifier: Apache-2.0 */
/*
 * For the kube-client harnesses (fuzz-kube-decode, fuzz-kube-watch): a Node object decoded
 * both ways the cache can keep its labels, the listed keys (as the extender's default
 * tiers) and every label (kube_cache_options.node_labels_all, as the extender with
 * PodGroup topology keys), asserting what a decoded node's labels promise: at most
 * KUBE_MAX_KEPT_LABELS or KUBE_MAX_ALL_LABELS of them, each with a key of at most
 * KUBE_MAX_LABEL_KEY bytes and a value of at most KUBE_MAX_NAME, and only listed keys when
 * not all are kept.  And a Pod decoded with the keys that name its group kept (as the
 * extender asks: fuzz_pod_group_labels, fuzz_pod_group_annotations), asserting that only
 * those (and topofit.io/ annotations) are kept, within their caps, and that its
 * spec.schedulingGroup name is a valid name or "".
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

/* As the extender's ext_group_keys lists them (a key the decoder is not asked for must not
 * be kept whatever the input). */
static const char *const fuzz_pod_group_labels[] = {
        "topofit.io/group", "leaderworkerset.sigs.k8s.io/name",
        "leaderworkerset.sigs.k8s.io/group-index", "kueue.x-k8s.io/pod-group-name",
        "scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io",
        "jobset.sigs.k8s.io/jobset-name", "training.kubeflow.org/job-name", NULL
};
static const char *const fuzz_pod_group_annotations[] = { "scheduling.k8s.io/group-name", NULL };

static inline bool
fuzz_listed(const char *const *list, const char *key)
{
        for (; *list; list++)
                if (strcmp(*list, key) == 0)
                        return true;
        return false;
}

static inline void
fuzz_kube_decode_pod_grouped(const cJSON *object, const char *const *gpu_resources)
{
        const struct kube__decode_opts opts = { .gpu_resources = gpu_resources,
                                                .pod_labels = fuzz_pod_group_labels,
                                                .pod_annotations = fuzz_pod_group_annotations };
        CLEANUP(kube__obj_unrefp) struct kube__obj *o = NULL;
        const char *why = NULL;
        const struct kube_pod *p;

        if (kube__decode_pod(object, &opts, &o, &why) < 0 || !o)
                return;
        p = &o->pod;
        if (!p->scheduling_group || strlen(p->scheduling_group) > KUBE_MAX_NAME ||
            p->n_labels > KUBE_MAX_KEPT_LABELS)
                abort();
        for (uint32_t i = 0; i < p->n_labels; i++)
                if (!fuzz_listed(fuzz_pod_group_labels, p->labels[i].key) ||
                    strlen(p->labels[i].value) > KUBE_MAX_NAME)
                        abort();
        for (uint32_t i = 0; i < p->n_annotations; i++)
                if (strncmp(p->annotations[i].key, "topofit.io/", strlen("topofit.io/")) != 0 &&
                    !fuzz_listed(fuzz_pod_group_annotations, p->annotations[i].key))
                        abort();
}
