/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for kube-client's watch stream (kube-client/kube-ops.c): the bytes
 * are a WATCH response body, fed to kube__watch_feed() in chunks as curl hands them over
 * (the first byte picks the chunk size, so events split across chunks are covered), then
 * kube__watch_end().  Each delivered event's object goes through the cache's decoders
 * (kube__decode_node, kube__decode_pod or kube__decode_podgroup, as kube-cache.c's
 * watch_item does; the first byte's top bits pick the watch; a Node both with the listed
 * labels kept and with every label kept, fuzz-kube-node.h).
 * Asserts: never more events than newline-terminated lines, a resourceVersion once set is a
 * non-empty string, a failed feed leaves an error message.
 * Seeds: test/fuzz/corpus/fuzz-kube-watch (events as the fake and real API servers send them).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fuzz-kube-node.h"
#include "kube-private.h"
#include "macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const gpu_resources[] = { "nvidia.com/gpu", "amd.com/gpu", NULL };
static const char *const node_labels[] = { "topology.kubernetes.io/zone", NULL };

struct ctx {
        bool pods, podgroups;
        unsigned events;
};

static int
on_event(enum kube_event_type type, const cJSON *object, void *userdata)
{
        const struct kube__decode_opts opts = { gpu_resources, node_labels };
        struct ctx *x = userdata;
        CLEANUP(kube__obj_unrefp) struct kube__obj *o = NULL;
        const char *why = NULL;

        if (type < 0 || type >= _KUBE_EVENT_MAX || type == KUBE_EVENT_ERROR || !cJSON_IsObject(object))
                abort(); /* the framing promised a typed event with an object */
        x->events++;
        if (type == KUBE_EVENT_BOOKMARK || type == KUBE_EVENT_DELETED)
                return 0;
        if (x->pods) {
                (void)kube__decode_pod(object, &opts, &o, &why);
                fuzz_kube_decode_pod_grouped(object, gpu_resources);
        } else if (x->podgroups)
                (void)kube__decode_podgroup(object, &o, &why);
        else
                fuzz_kube_decode_node_both(object, gpu_resources, node_labels);
        if (type == KUBE_EVENT_ADDED)
                (void)kube__creation_ms(object);
        return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct kube_error err = { 0 };
        struct kube__watch w;
        struct ctx x = { 0 };
        char *rv = NULL;
        size_t chunk, lines = 0;
        int r = 0;

        if (size < 1)
                return 0;
        /* Low bits: chunk size (0 = all at once); high bit: a pods watch, else the next bit: a
         * podgroups watch, else a nodes watch. */
        chunk = data[0] & 0x3f;
        x.pods = data[0] & 0x80;
        x.podgroups = !x.pods && (data[0] & 0x40);
        data++;
        size--;
        for (size_t i = 0; i < size; i++)
                lines += data[i] == '\n';
        if (chunk == 0)
                chunk = size ? size : 1;

        kube__watch_init(&w, on_event, &x, &rv, &err);
        for (size_t off = 0; off < size && r >= 0; off += chunk)
                r = kube__watch_feed(&w, (const char *)data + off, MIN(chunk, size - off));
        if (r >= 0)
                r = kube__watch_end(&w);
        else if (!err.message[0])
                abort(); /* every error that ends a watch says why */
        kube__watch_release(&w);

        if (x.events > lines || w.events != x.events)
                abort();
        if (r >= 0 && (unsigned)r != x.events)
                abort();
        if (rv && !rv[0])
                abort();
        free(rv);
        return 0;
}
