/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for the extender codec (extender/ext-codec.c): every decoder the HTTP
 * handlers call on a request body gets the same bytes (ExtenderArgs for filter/prioritize,
 * ExtenderPreemptionArgs, ExtenderBindingArgs, a Pod, the topofit.io/gpus annotation, the
 * topofit.io/group-domain record (encoded back and read again: the same record), a cluster
 * List).  Accepted arguments are encoded back, as the handlers would, and a filter answer
 * that copies runs of the body's names must be the answer written name by name, and the
 * answers from compact verdicts (node i's is v[rep[i]], as the handlers pass them) the
 * answers from one verdict per node, byte for byte.  And
 * ExtenderArgs are read twice, by the scanner (ext_args_decode) and by the tree decoder it
 * replaced (test/ext-args-oracle.h): both accept or both refuse, and read the same values;
 * and read a third time with the names memo of the previous input and of its own list
 * (memo_agrees): the same values again.
 * Seeds: test/data/kube-scheduler-v1.20 and test/data/extender.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "../ext-args-oracle.h"
#include "buf.h"
#include "ext-core.h"
#include "macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ExtenderArgs read by the scanner and by the tree decoder it replaced agree. */
static void
same_as_tree(const char *json, size_t size, const struct ext_config *cfg)
{
        const char *diff = ext_oracle_differs(json, size, cfg);

        if (diff) {
                fprintf(stderr, "fuzz-ext-codec: scanner and tree differ: %s\n", diff);
                abort();
        }
}

/* ExtenderArgs accepted are encoded back, as the handlers would; the filter answer's runs
 * of names copied from the body are checked against the answer written name by name. */
static void
args_encode_back(const char *json, size_t size, const struct ext_config *cfg)
{
        struct ext_verdict *v;
        struct ext_args a;
        struct buf out;

        if (ext_args_decode(json, size, cfg, &a, NULL) < 0)
                return;
        v = calloc(a.n + 1, sizeof(*v));
        if (!v)
                abort();
        /* A node whose name's length is a multiple of 3 fails: the input decides where the
         * runs of fitting names break, and both answer lists get entries. */
        for (size_t i = 0; i < a.n; i++) {
                bool fails = a.name_lens[i] % 3 == 0;

                v[i].r = fails ? -ENOSPC : 0;
                v[i].why = fails ? "not enough GPUs" : NULL;
                v[i].priority = (int)(i % (EXT_PRIORITY_MAX + 1));
        }
        if (a.node_names) {
                const char *diff = ext_oracle_filter_echo_differs(&a, v, false);

                if (!diff)
                        diff = ext_oracle_priorities_differ(&a, v);
                if (!diff)
                        diff = ext_oracle_compact_differs(&a, v);

                if (diff) {
                        fprintf(stderr, "fuzz-ext-codec: %s\n", diff);
                        abort();
                }
        }
        buf_init(&out, EXT_MAX_BODY);
        (void)ext_filter_result_encode(&a, v, NULL, NULL, &out);
        buf_reset(&out);
        (void)ext_priorities_encode(&a, v, NULL, &out);
        buf_release(&out);
        free(v);
        ext_args_release(&a);
}

/* The same args, field by field, from two decodes of one body. */
static bool
same_args(const struct ext_args *a, const struct ext_args *b)
{
        if (a->n != b->n || a->node_names != b->node_names ||
            strcmp(a->req.uid, b->req.uid) != 0 || a->req.count != b->req.count)
                return false;
        for (size_t i = 0; a->node_names && i < a->n; i++)
                if (a->name_lens[i] != b->name_lens[i] ||
                    memcmp(a->names[i], b->names[i], a->name_lens[i]) != 0 ||
                    a->name_plain[i] != b->name_plain[i])
                        return false;
        return true;
}

/* The names memo (ext_names_memo): decoding with the list kept from the previous input
 * (libFuzzer runs many in one process) reads what decoding without it reads, and this
 * input's own list, once kept, is taken from the memo and read the same again. */
static struct ext_names_memo last_list;

static void
memo_agrees(const char *json, size_t size, const struct ext_config *cfg)
{
        struct ext_args a, b;
        int r1 = ext_args_decode(json, size, cfg, &a, NULL);
        int r2 = ext_args_decode_memo(json, size, cfg, &last_list, &b, NULL);

        if (r1 != r2) {
                fprintf(stderr, "fuzz-ext-codec: with the memo %d, without %d\n", r2, r1);
                abort();
        }
        if (r1 < 0)
                return;
        if (!same_args(&a, &b)) {
                fprintf(stderr, "fuzz-ext-codec: the memo's list read differently\n");
                abort();
        }
        ext_args_release(&b);
        if (a.node_names && a.list_text) {
                struct ext_nodes rn = { .nodes = calloc(a.n + 1, sizeof(*rn.nodes)) };

                if (!rn.nodes || ext_names_memo_keep(&last_list, &a, NULL, &rn) < 0)
                        abort();
                free(rn.nodes);
                if (last_list.len == a.list_len &&
                    memcmp(last_list.text, a.list_text, a.list_len) == 0) {
                        if (ext_args_decode_memo(json, size, cfg, &last_list, &b, NULL) < 0 ||
                            !b.list_memo || !same_args(&a, &b)) {
                                fprintf(stderr, "fuzz-ext-codec: a kept list did not repeat\n");
                                abort();
                        }
                        ext_args_release(&b);
                }
        }
        ext_args_release(&a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *json = (const char *)data;
        struct ext_config cfg;
        const char *why = NULL;

        ext_config_default(&cfg);

        same_as_tree(json, size, &cfg);
        args_encode_back(json, size, &cfg);
        memo_agrees(json, size, &cfg);
        {
                struct ext_preempt_args p;

                if (ext_preempt_args_decode(json, size, &cfg, &p, &why) == 0) {
                        bool *keep = calloc(p.n + 1, sizeof(*keep));
                        bool **needed = calloc(p.n + 1, sizeof(*needed));
                        struct buf out;

                        if (!keep || !needed)
                                abort();
                        for (size_t i = 0; i < p.n; i++) {
                                keep[i] = true;
                                needed[i] = calloc(p.nodes[i].n_victims + 1, sizeof(bool));
                                if (!needed[i])
                                        abort();
                                for (size_t j = 0; j < p.nodes[i].n_victims; j++)
                                        needed[i][j] = j % 2 == 0;
                        }
                        buf_init(&out, EXT_MAX_BODY);
                        (void)ext_preempt_result_encode(&p, keep, needed, &out);
                        buf_release(&out);
                        for (size_t i = 0; i < p.n; i++)
                                free(needed[i]);
                        free(needed);
                        free(keep);
                        ext_preempt_args_release(&p);
                }
        }
        {
                struct ext_binding b;

                (void)ext_binding_decode(json, size, &b, &why);
        }
        {
                struct ext_request req;

                (void)ext_request_decode(json, size, &cfg, &req, &why);
        }
        {
                struct topo_mask m;

                (void)ext_gpus_annotation_decode(json, size, TOPO_MAX_GPUS, &m, &why);
        }
        {
                struct ext_group_record rec, again;
                char *text = NULL;

                if (ext_group_record_decode(json, size, &rec, &why) == 0 &&
                    ext_group_record_encode(&rec, &text) == 0) {
                        if (ext_group_record_decode(text, strlen(text), &again, &why) != 0 ||
                            strcmp(rec.group.id, again.group.id) != 0 ||
                            strcmp(rec.domain.name, again.domain.name) != 0 ||
                            rec.domain.level != again.domain.level ||
                            rec.group.size != again.group.size ||
                            rec.group.count != again.group.count ||
                            rec.group.require != again.group.require ||
                            rec.domain.whole != again.domain.whole) {
                                fprintf(stderr, "fuzz-ext-codec: a group record does not "
                                                "round-trip: %s\n", text);
                                abort();
                        }
                }
                free(text);
        }
        {
                CLEANUP(ext_cluster_unrefp) struct ext_cluster *c = NULL;

                (void)ext_cluster_decode(json, size, &cfg, NULL, 1, &c, &why);
        }
        return 0;
}
