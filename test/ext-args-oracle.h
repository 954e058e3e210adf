/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The differential check of extender/ext-args.c (ExtenderArgs read by the scanner) against
 * the tree decoder it replaced (ext__args_decode_tree: json_parse() and cJSON lookups): on
 * the same body both accept or both refuse, and when both accept they read the same Pod,
 * the same node names, annotations (unescaped) and GPU counts, and each Node's span parses
 * to the tree's item.  Shared by test-extender (fixtures, hostile bodies) and
 * fuzz-ext-codec (every input).
 */
#pragma once

#include <stdlib.h>
#include <string.h>

#include "ext-core-private.h"
#include "json.h"

#define EXT_ORACLE_TREE_FULL "the JSON has more values than the limit"

static inline const char *
ext_oracle_same_request(const struct ext_request *a, const struct ext_request *b)
{
        if (strcmp(a->uid, b->uid) || strcmp(a->name, b->name) ||
            strcmp(a->namespace, b->namespace))
                return "the Pod's names differ";
        if (a->count != b->count || a->placement != b->placement || a->require != b->require)
                return "the Pod's GPU request differs";
        if (strcmp(a->group.id, b->group.id) || a->group.size != b->group.size ||
            a->group.count != b->group.count || a->group.require != b->group.require ||
            a->group.mode != b->group.mode)
                return "the Pod's group differs";
        if (a->n_containers != b->n_containers)
                return "the Pod's containers differ";
        for (unsigned i = 0; i < a->n_containers; i++)
                if (strcmp(a->containers[i].name, b->containers[i].name) ||
                    a->containers[i].count != b->containers[i].count ||
                    a->containers[i].init != b->containers[i].init)
                        return "a container differs";
        return NULL;
}

/* a and b are the same tree, children in order (cJSON_Compare looks members up by key, so
 * an object that repeats a key nobody reads never equals itself). */
static inline bool
ext_oracle_same_tree(const cJSON *a, const cJSON *b)
{
        if ((a->type & 0xff) != (b->type & 0xff) || !a->string != !b->string ||
            (a->string && strcmp(a->string, b->string) != 0))
                return false;
        if (cJSON_IsString(a) && strcmp(a->valuestring, b->valuestring) != 0)
                return false;
        if (cJSON_IsNumber(a) && a->valuedouble != b->valuedouble)
                return false;
        for (a = a->child, b = b->child; a && b; a = a->next, b = b->next)
                if (!ext_oracle_same_tree(a, b))
                        return false;
        return !a && !b;
}

/* Node i of a Nodes-mode request as both read it. */
static inline const char *
ext_oracle_same_node(const struct ext_args *a, const struct ext__args_tree *t, size_t i,
                     const cJSON *item)
{
        struct json_doc *d = NULL;
        char *topo = NULL;
        size_t len = 0;
        const char *diff = NULL;

        if (a->nodes[i].gpu_capacity != t->gpu_capacity[i])
                return "a Node's GPU capacity differs";
        if (ext_args_topology(a, i, &topo, &len) < 0)
                return "a Node's annotation does not unescape";
        if (!topo != !t->topo[i] ||
            (topo && (len != t->topo_len[i] || memcmp(topo, t->topo[i], len) != 0)))
                diff = "a Node's topology annotation differs";
        free(topo);
        if (!diff && json_parse(a->nodes[i].span, a->nodes[i].span_len, 64u << 20, 0, &d,
                                NULL) < 0)
                diff = "a Node's span does not parse";
        if (!diff && !ext_oracle_same_tree(d->root, item))
                diff = "a Node's span is not the tree's item";
        json_doc_free(d);
        return diff;
}

/* NULL when both decoders agree on json, else what differs. */
static inline const char *
ext_oracle_differs(const char *json, size_t len, const struct ext_config *cfg)
{
        struct ext__args_tree t = { 0 };
        struct ext_args a = { 0 };
        const char *why_t = NULL, *diff = NULL;
        int rt = ext__args_decode_tree(json, len, cfg, &t, &why_t);
        int rs = ext_args_decode(json, len, cfg, &a, NULL);
        const cJSON *item;

        /* The tree's memory cap (16 bytes of tree per body byte) says nothing of the body. */
        if (rt == -E2BIG && why_t && strcmp(why_t, EXT_ORACLE_TREE_FULL) == 0)
                diff = NULL;
        else if ((rt < 0) != (rs < 0))
                diff = rs < 0 ? "the scanner refuses what the tree accepts"
                              : "the scanner accepts what the tree refuses";
        else if (rs < 0)
                diff = NULL;
        else if ((diff = ext_oracle_same_request(&a.req, &t.req)))
                ;
        else if (a.node_names != t.node_names || a.n != t.n)
                diff = "the node lists differ";
        item = t.items ? t.items->child : NULL;
        for (size_t i = 0; !diff && rs >= 0 && rt >= 0 && i < a.n; i++) {
                if (a.name_lens[i] != strlen(t.names[i]) ||
                    memcmp(a.names[i], t.names[i], a.name_lens[i]) != 0)
                        diff = "a node name differs";
                else if (!a.node_names)
                        diff = ext_oracle_same_node(&a, &t, i, item);
                item = item ? item->next : NULL;
        }
        ext_args_release(&a);
        ext__args_tree_release(&t);
        return diff;
}

/* NULL when the filter answer for a and v, whose NodeNames may copy runs of the body's
 * names as they stand (a->names_in_body), is the same JSON as the answer written name by
 * name; else what differs.  Byte for byte too when same_bytes (a body without blanks). */
static inline const char *
ext_oracle_filter_echo_differs(const struct ext_args *a, const struct ext_verdict *v,
                               bool same_bytes)
{
        struct ext_args each = *a;
        struct json_doc *d1 = NULL, *d2 = NULL;
        struct buf b1, b2;
        const char *diff = NULL;

        each.names_in_body = false;
        buf_init(&b1, EXT_MAX_BODY);
        buf_init(&b2, EXT_MAX_BODY);
        if (ext_filter_result_encode(a, v, NULL, NULL, &b1) < 0 ||
            ext_filter_result_encode(&each, v, NULL, NULL, &b2) < 0)
                diff = "an answer does not encode";
        else if (json_parse(b1.data, b1.len, 64u << 20, 0, &d1, NULL) < 0)
                diff = "the answer with runs copied is not JSON";
        else if (json_parse(b2.data, b2.len, 64u << 20, 0, &d2, NULL) < 0)
                diff = "the answer name by name is not JSON";
        else if (!ext_oracle_same_tree(d1->root, d2->root))
                diff = "the answer with runs copied names other nodes";
        else if (same_bytes && (b1.len != b2.len || memcmp(b1.data, b2.data, b1.len) != 0))
                diff = "the answer with runs copied differs in its bytes";
        json_doc_free(d1);
        json_doc_free(d2);
        buf_release(&b1);
        buf_release(&b2);
        return diff;
}

/* NULL when the prioritize answer for a and v, which puts a plain name's entry in one piece,
 * has the bytes of the answer written with no name known plain, and is a JSON array of one
 * {"Host": string, "Score": v's score} per name; else what differs. */
static inline const char *
ext_oracle_priorities_differ(const struct ext_args *a, const struct ext_verdict *v)
{
        struct ext_args each = *a;
        struct json_doc *d = NULL;
        const cJSON *item;
        struct buf b1, b2;
        const char *diff = NULL;
        size_t i = 0;

        each.name_plain = NULL;
        buf_init(&b1, EXT_MAX_BODY);
        buf_init(&b2, EXT_MAX_BODY);
        if (ext_priorities_encode(a, v, NULL, &b1) < 0 ||
            ext_priorities_encode(&each, v, NULL, &b2) < 0)
                diff = "a priorities answer does not encode";
        else if (b1.len != b2.len || memcmp(b1.data, b2.data, b1.len) != 0)
                diff = "the priorities answer with plain names differs in its bytes";
        else if (json_parse(b1.data, b1.len, 64u << 20, 0, &d, NULL) < 0 || !cJSON_IsArray(d->root))
                diff = "the priorities answer is not a JSON array";
        for (item = d && !diff ? d->root->child : NULL; item && !diff; item = item->next, i++) {
                const cJSON *host = cJSON_GetObjectItemCaseSensitive(item, "Host");
                const cJSON *score = cJSON_GetObjectItemCaseSensitive(item, "Score");
                int want = v[i].r == 0 ? (v[i].priority > 0 ? v[i].priority : 0) : 0;

                if (i >= a->n || !cJSON_IsString(host) || !cJSON_IsNumber(score) ||
                    score->valuedouble != want)
                        diff = "a priorities entry is not the verdict's";
        }
        if (!diff && d && i != a->n)
                diff = "the priorities answer has another count of entries";
        json_doc_free(d);
        buf_release(&b1);
        buf_release(&b2);
        return diff;
}

/* NULL when both answers for a written from compact verdicts (node i's is vc[rep[i]], the
 * copies' entries poisoned, as ext_filter_rep and ext_prioritize_rep leave them) have the
 * bytes of the answers from v itself; else what differs.  A node shares the verdict of the
 * first earlier one equal to its own (fit, reason, priority). */
static inline const char *
ext_oracle_compact_differs(const struct ext_args *a, const struct ext_verdict *v)
{
        struct ext_verdict *vc = malloc((a->n + 1) * sizeof(*vc));
        uint32_t *rep = malloc((a->n + 1) * sizeof(*rep));
        const char *diff = NULL;
        struct buf b1, b2;

        if (!vc || !rep) {
                free(vc);
                free(rep);
                return NULL; /* nothing to compare with */
        }
        memset(vc, 0xa5, (a->n + 1) * sizeof(*vc));
        for (size_t i = 0; i < a->n; i++) {
                rep[i] = (uint32_t)i;
                for (size_t j = 0; j < i; j++)
                        if (rep[j] == j && v[j].r == v[i].r && v[j].why == v[i].why &&
                            v[j].priority == v[i].priority) {
                                rep[i] = (uint32_t)j;
                                break;
                        }
                if (rep[i] == i)
                        vc[i] = v[i];
        }
        buf_init(&b1, EXT_MAX_BODY);
        buf_init(&b2, EXT_MAX_BODY);
        if (ext_filter_result_encode(a, v, NULL, NULL, &b1) < 0 ||
            ext_filter_result_encode(a, vc, rep, NULL, &b2) < 0)
                diff = "a filter answer does not encode";
        else if (b1.len != b2.len || memcmp(b1.data, b2.data, b1.len) != 0)
                diff = "the filter answer from compact verdicts differs in its bytes";
        buf_reset(&b1);
        buf_reset(&b2);
        if (!diff && (ext_priorities_encode(a, v, NULL, &b1) < 0 ||
                      ext_priorities_encode(a, vc, rep, &b2) < 0))
                diff = "a priorities answer does not encode";
        else if (!diff && (b1.len != b2.len || memcmp(b1.data, b2.data, b1.len) != 0))
                diff = "the priorities answer from compact verdicts differs in its bytes";
        buf_release(&b1);
        buf_release(&b2);
        free(vc);
        free(rep);
        return diff;
}
