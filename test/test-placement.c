/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for placement/: the capacity of request classes on real topologies from
 * test/data/topologies, the cluster view (reuse across generations, learnt weights,
 * domains), the cluster term (an empty HGX H100 loses more than partly used NVLink nodes),
 * the ranking rule, and the group holds.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "test-util.h"

#include "place.h"

static struct score_class *
class_of(const char *file)
{
        char rel[512], *text;
        struct topo *t = NULL;
        struct score_class *c;
        size_t len;

        snprintf(rel, sizeof(rel), "topologies/%s", file);
        text = test_read_data(rel, &len);
        assert_int_equal(topo_parse_any(text, len, &t, NULL), 0);
        free(text);
        c = score_class_new(t, NULL);
        assert_non_null(c);
        topo_unref(t);
        return c;
}

static struct topo_mask
mask_of(const char *list, unsigned n)
{
        struct topo_mask m;

        if (!list)
                topo_mask_fill(&m, n);
        else
                assert_int_equal(topo_mask_parse(list, n, &m), 0);
        return m;
}

#define H100 "hgx-h100-13nic-mlx5ib-eth-penny.txt"
#define P4D "aws-p4d-24xlarge-a100-nv12.txt"
#define A800 "a800-sxm4-8gpu-4nic.txt"
#define DGX1 "dgx1-v100-sxm2-oneflow.txt"
#define PCIE8 "rtx4090-8gpu-pcie-server.txt"
#define GB200 "gb200-tray-4gpu-8nic-gpu-numa-id.txt"

/* Classes of place_config_default(): 8 nvlink, 4 nvlink, 4 numa, 2, 1. */
static void
capacity_counts_best_quality_sets_per_class(void **state)
{
        static const struct {
                const char *file, *free;
                uint16_t want[5];
        } cases[] = {
                /* NVSwitch, two NUMA nodes of four: every class at full count. */
                { H100, NULL, { 1, 2, 2, 4, 8 } },
                /* One GPU gone: no 8-GPU set, one all-NVLink 4 (any four), one NUMA four. */
                { H100, "1,2,3,4,5,6,7", { 0, 1, 1, 3, 7 } },
                { H100, "2,3,4,5,6,7", { 0, 1, 1, 3, 6 } },
                /* DGX-1 hybrid cube mesh: the 8-GPU NVLink ring, two quads of four. */
                { DGX1, NULL, { 1, 2, 2, 4, 8 } },
                /* One quad used: its other quad is still an all-NVLink four. */
                { DGX1, "4,5,6,7", { 0, 1, 1, 2, 4 } },
                /* PCIe only: no NVLink class at all. */
                { PCIE8, NULL, { 0, 0, 2, 4, 8 } },
        };
        struct place_config cfg;

        place_config_default(&cfg);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                CLEANUP(score_class_unrefp) struct score_class *c = class_of(cases[i].file);
                struct topo_mask free = mask_of(cases[i].free, score_class_topo(c)->n_gpus);
                uint16_t cap[PLACE_MAX_CLASSES];

                assert_int_equal(place_capacity(&cfg, c, &free, cap), 0);
                for (unsigned k = 0; k < 5; k++)
                        if (cap[k] != cases[i].want[k])
                                fail_msg("%s free %s class %u: %u, want %u", cases[i].file,
                                         cases[i].free ? cases[i].free : "all", k, cap[k],
                                         cases[i].want[k]);
        }
}

static void
config_check_refuses_bad_mixes(void **state)
{
        struct place_config cfg;
        const char *why = NULL;

        place_config_default(&cfg);
        assert_int_equal(place_config_check(&cfg, &why), 0);
        cfg.classes[0].size = 0;
        assert_int_equal(place_config_check(&cfg, &why), -EINVAL);
        assert_non_null(why);
        place_config_default(&cfg);
        cfg.classes[1].weight = -1;
        assert_int_equal(place_config_check(&cfg, NULL), -EINVAL);
        place_config_default(&cfg);
        for (unsigned k = 0; k < cfg.n_classes; k++)
                cfg.classes[k].weight = 0;
        assert_int_equal(place_config_check(&cfg, NULL), -EINVAL);
        place_config_default(&cfg);
        cfg.cluster_share = 1.5;
        assert_int_equal(place_config_check(&cfg, NULL), -EINVAL);
        place_config_default(&cfg);
        cfg.quality_band = -0.1;
        assert_int_equal(place_config_check(&cfg, NULL), -EINVAL);
        place_config_default(&cfg);
        cfg.n_classes = PLACE_MAX_CLASSES + 1;
        assert_int_equal(place_config_check(&cfg, NULL), -EINVAL);
}

/* The stranding case in numbers: a 4-GPU set taken from the only node with an
 * 8-GPU all-NVLink set costs the cluster more than one taken from nodes whose 8-GPU set
 * is already broken, and the ranking hands the pod to a broken node. */
static void
loss_of_the_last_eight_gpu_set_outweighs_broken_nodes(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *h100 = class_of(H100);
        CLEANUP(score_class_unrefp) struct score_class *p4d = class_of(P4D);
        CLEANUP(score_class_unrefp) struct score_class *dgx1 = class_of(DGX1);
        CLEANUP(place_view_unrefp) struct place_view *v = NULL;
        struct place_node nodes[3] = {
                { .cls = h100, .free = mask_of(NULL, 8) },
                { .cls = p4d, .free = mask_of("2,3,4,5,6,7", 8) },
                { .cls = dgx1, .free = mask_of("4,5,6,7", 8) },
        };
        struct score_request req = { .count = 4 };
        struct place_candidate cand[3];
        struct place_config cfg;
        double loss[3];

        place_config_default(&cfg);
        assert_int_equal(place_view_new(&cfg, nodes, 3, NULL, 0, NULL, NULL, &v), 0);
        assert_int_equal(place_view_total(v, 0), 1); /* one 8-GPU all-NVLink set left */
        for (size_t i = 0; i < 3; i++) {
                struct score_choice ch;

                assert_int_equal(score_best(nodes[i].cls, &nodes[i].free, &req, &ch, NULL), 0);
                assert_true(ch.all_nvlink_ring);
                loss[i] = place_loss(v, i, nodes[i].cls, &nodes[i].free, &ch.set);
                assert_true(loss[i] >= 0 && loss[i] <= 1);
                /* A per-node priority that favours the H100 (its bandwidth is highest). */
                cand[i] = (struct place_candidate){ .fits = true, .priority = i == 0 ? 10 : 6,
                                                    .tier = place_tier(&ch),
                                                    .busbw = ch.busbw_gbps, .loss = loss[i] };
        }
        assert_true(loss[0] > loss[1] && loss[0] > loss[2]);
        place_rank(&cfg, cand, 3);
        assert_true(cand[1].priority > cand[0].priority || cand[2].priority > cand[0].priority);
        /* The wrong node's class gives -1, not a number. */
        assert_true(place_loss(v, 0, p4d, &nodes[0].free, &nodes[0].free) < 0);
        assert_true(place_loss(v, 7, h100, &nodes[0].free, &nodes[0].free) < 0);
}

/* The drained-node loss: a 1-GPU pod that takes the last free GPU of a GB200 tray or of an
 * HGX H100 costs both alike now (one 1-GPU set), but the H100 more once drained: it keeps
 * that node from serving an 8-GPU set when its other pods end, which the tray never had.
 * So the tray ranks first.  Not in a view with a multi-node domain (a node's GPUs are then
 * also room for its domain's gangs), whether every node is in one or one alone (a label
 * alone must not make a node lose less), nor with drain_weight 0. */
static void
loss_counts_what_the_set_keeps_from_the_drained_node(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *tray = class_of(GB200);
        CLEANUP(score_class_unrefp) struct score_class *h100 = class_of(H100);
        struct score_request req = { .count = 1 };
        struct place_node nodes[3] = {
                { .cls = tray, .free = mask_of("3", 4) },
                { .cls = h100, .free = mask_of("7", 8) },
                { .cls = h100, .free = mask_of(NULL, 8) }, /* the cluster's one 8-GPU set */
        };
        struct place_config cfg, off;

        place_config_default(&cfg);
        assert_true(cfg.drain_weight > 0);
        off = cfg;
        off.drain_weight = 0;
        for (int pass = 0; pass < 4; pass++) {
                CLEANUP(place_view_unrefp) struct place_view *v = NULL;
                CLEANUP(place_view_unrefp) struct place_view *vo = NULL;
                struct place_candidate c[2];
                double loss[2], loss_off[2];

                /* pass 1: every node in one NVLink domain; pass 2: under one leaf (level 1);
                 * pass 3: the tray alone under a leaf */
                for (size_t i = 0; i < 3; i++)
                        for (unsigned l = 0; l < PLACE_MAX_LEVELS; l++)
                                nodes[i].domain[l] =
                                        pass > 0 && l == (unsigned)(pass == 3 ? 1 : pass - 1) &&
                                                        (pass < 3 || i == 0)
                                                ? "d"
                                                : NULL;
                assert_int_equal(place_view_new(&cfg, nodes, 3, NULL, 0, NULL, NULL, &v), 0);
                assert_int_equal(place_view_new(&off, nodes, 3, NULL, 0, NULL, NULL, &vo), 0);
                for (size_t i = 0; i < 2; i++) {
                        struct score_choice ch;

                        assert_int_equal(score_best(nodes[i].cls, &nodes[i].free, &req, &ch,
                                                    NULL), 0);
                        loss[i] = place_loss(v, i, nodes[i].cls, &nodes[i].free, &ch.set);
                        loss_off[i] = place_loss(vo, i, nodes[i].cls, &nodes[i].free, &ch.set);
                        assert_true(loss[i] >= 0 && loss_off[i] >= 0);
                        c[i] = (struct place_candidate){ .fits = true, .priority = 10,
                                                         .tier = place_tier(&ch),
                                                         .busbw = ch.busbw_gbps, .loss = loss[i] };
                }
                /* Now: alike. */
                assert_true(fabs(loss_off[0] - loss_off[1]) < 1e-12);
                place_rank(&cfg, c, 2);
                if (pass == 0) {
                        /* Drained: the H100 would have been an 8-GPU set again. */
                        assert_true(loss[1] > loss[0] + 1e-3);
                        assert_true(loss[0] > loss_off[0]); /* the tray's all-NVLink 4 */
                        assert_true(c[0].priority > c[1].priority);
                } else {
                        assert_true(fabs(loss[0] - loss_off[0]) < 1e-12);
                        assert_true(fabs(loss[1] - loss_off[1]) < 1e-12);
                        assert_int_equal(c[0].priority, c[1].priority);
                }
        }
        /* A node the view does not hold (no domain known) counts the drained node too. */
        {
                CLEANUP(place_view_unrefp) struct place_view *v = NULL;
                struct score_choice ch;

                for (size_t i = 0; i < 3; i++)
                        for (unsigned l = 0; l < PLACE_MAX_LEVELS; l++)
                                nodes[i].domain[l] = NULL;
                assert_int_equal(place_view_new(&cfg, nodes, 3, NULL, 0, NULL, NULL, &v), 0);
                assert_int_equal(score_best(h100, &nodes[1].free, &req, &ch, NULL), 0);
                assert_true(fabs(place_loss(v, PLACE_NO_NODE, h100, &nodes[1].free, &ch.set) -
                                 place_loss(v, 1, h100, &nodes[1].free, &ch.set)) < 1e-12);
        }
        /* Out of range: refused. */
        cfg.drain_weight = 1.5;
        assert_int_equal(place_config_check(&cfg, NULL), -EINVAL);
        cfg.drain_weight = NAN;
        assert_int_equal(place_config_check(&cfg, NULL), -EINVAL);
}

static void
rank_never_trades_a_link_class_for_capacity(void **state)
{
        struct place_config cfg;
        struct place_candidate c[4] = {
                /* all-NVLink, but breaks a scarce class */
                { .fits = true, .priority = 8, .tier = 2, .loss = 0.5 },
                /* PCIe only, breaks nothing */
                { .fits = true, .priority = 8, .tier = 0, .loss = 0.0 },
                /* all-NVLink, breaks little */
                { .fits = true, .priority = 6, .tier = 2, .loss = 0.1 },
                { .fits = false, .priority = 0, .tier = 2, .loss = 0.0 },
        };

        place_config_default(&cfg);
        place_rank(&cfg, c, 4);
        assert_int_equal(c[0].priority, 4);  /* 0.5 * 8 + 0.5 * 0 */
        assert_int_equal(c[1].priority, 4);  /* lower tier: no cluster score */
        assert_int_equal(c[2].priority, 8);  /* 0.5 * 6 + 0.5 * 10 */
        assert_int_equal(c[3].priority, 0);
        assert_true(c[2].priority > c[1].priority);

        /* Alike losses: every candidate of the top tier gets the full cluster score. */
        struct place_candidate d[2] = {
                { .fits = true, .priority = 9, .tier = 2, .loss = 0.25 },
                { .fits = true, .priority = 7, .tier = 2, .loss = 0.25 },
        };
        place_rank(&cfg, d, 2);
        assert_true(d[0].priority > d[1].priority);

        /* A much slower set of the same link class does not compete (the e2e's DGX-1 quad at
         * 50 GB/s against an empty 4x A100 at 300): capacity is not bought with bandwidth. */
        struct place_candidate f[2] = {
                { .fits = true, .priority = 10, .tier = 2, .busbw = 300, .loss = 0.4 },
                { .fits = true, .priority = 4, .tier = 2, .busbw = 50, .loss = 0.0 },
        };
        place_rank(&cfg, f, 2);
        assert_int_equal(f[0].priority, 10); /* the only one competing: score 10 */
        assert_int_equal(f[1].priority, 2);
        cfg.quality_band = 0; /* every set of the class competes */
        f[0] = (struct place_candidate){ .fits = true, .priority = 10, .tier = 2, .busbw = 300, .loss = 0.4 };
        f[1] = (struct place_candidate){ .fits = true, .priority = 4, .tier = 2, .busbw = 50, .loss = 0.0 };
        place_rank(&cfg, f, 2);
        assert_true(f[1].priority > f[0].priority);

        /* Share 0 turns the term off. */
        struct place_candidate e = { .fits = true, .priority = 3, .tier = 2, .loss = 0.9 };
        cfg.cluster_share = 0;
        place_rank(&cfg, &e, 1);
        assert_int_equal(e.priority, 3);
}

static void
view_reuses_unchanged_nodes_of_its_base(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *h100 = class_of(H100);
        CLEANUP(place_view_unrefp) struct place_view *a = NULL;
        CLEANUP(place_view_unrefp) struct place_view *b = NULL;
        struct place_node nodes[64];
        ssize_t base_index[64];
        struct place_config cfg;

        place_config_default(&cfg);
        for (size_t i = 0; i < 64; i++) {
                nodes[i] = (struct place_node){ .cls = h100, .free = mask_of(NULL, 8) };
                base_index[i] = (ssize_t)i;
        }
        assert_int_equal(place_view_new(&cfg, nodes, 64, NULL, 0, NULL, NULL, &a), 0);
        assert_int_equal(place_view_computed(a), 64);
        assert_int_equal(place_view_total(a, 0), 64);
        nodes[5].free = mask_of("0,1,2,3", 8);
        assert_int_equal(place_view_new(&cfg, nodes, 64, NULL, 0, a, base_index, &b), 0);
        assert_int_equal(place_view_computed(b), 1);
        assert_int_equal(place_view_total(b, 0), 63);
        assert_int_equal(place_view_capacity(b, 5)[1], 1);
        assert_int_equal(place_view_capacity(b, 6)[1], 2);
        assert_null(place_view_capacity(b, 64));
}

/* A node is found by name (the view's hash index: 600 nodes, so slots collide; a repeated
 * name finds its first node, as a walk would), and a domain lists exactly its nodes in node
 * order: interleaved domains, some nodes in none.  The sets of a domain are its nodes' sets. */
static void
view_finds_nodes_by_name_and_lists_domain_members(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *h100 = class_of(H100);
        CLEANUP(place_view_unrefp) struct place_view *v = NULL;
        static char names[600][16], doms[7][8];
        struct place_node nodes[600];
        struct place_config cfg;

        (void)state;
        place_config_default(&cfg);
        for (unsigned d = 0; d < 7; d++)
                snprintf(doms[d], sizeof(doms[d]), "d-%u", d);
        for (unsigned i = 0; i < 600; i++) {
                snprintf(names[i], sizeof(names[i]), "n-%03u", i);
                nodes[i] = (struct place_node){ .name = names[i], .cls = h100,
                                                .free = mask_of(i % 3 ? "0-3" : NULL, 8) };
                nodes[i].domain[0] = i % 11 == 0 ? NULL : doms[i % 7];
        }
        nodes[599].name = names[3];
        assert_int_equal(place_view_new(&cfg, nodes, 600, NULL, 0, NULL, NULL, &v), 0);
        for (unsigned i = 0; i < 599; i++)
                assert_int_equal(place_view_find_domain(v, PLACE_LEVEL_NODE, names[i]), i);
        assert_int_equal(place_view_find_domain(v, PLACE_LEVEL_NODE, "n-599"), -1);
        assert_int_equal(place_view_find_domain(v, PLACE_LEVEL_NODE, "n-6000"), -1);
        assert_int_equal(place_view_n_domains(v, 0), 7);
        for (unsigned d = 0; d < 7; d++) {
                ssize_t x = place_view_find_domain(v, 0, doms[d]);
                const uint32_t *m;
                size_t n = place_view_domain_nodes(v, 0, (size_t)x, &m), k = 0;
                unsigned sets = 0;

                assert_true(x >= 0);
                for (unsigned i = 0; i < 600; i++) {
                        if (i % 11 == 0 || i % 7 != d)
                                continue;
                        assert_true(k < n);
                        assert_int_equal(m[k++], i);
                        sets += place_count_sets(h100, &nodes[i].free, 2, 0);
                }
                assert_int_equal(k, n);
                assert_int_equal(n, place_view_domain(v, 0, (size_t)x)->n_nodes);
                assert_int_equal(place_domain_sets(v, 0, x, 2, 0), sets);
        }
        assert_int_equal(place_domain_sets(v, PLACE_LEVEL_NODE, 1, 2, 0),
                         place_count_sets(h100, &nodes[1].free, 2, 0));
        assert_int_equal(place_view_domain_nodes(v, 0, 7, &(const uint32_t *){ NULL }), 0);
        assert_int_equal(place_view_domain_nodes(v, 1, 0, &(const uint32_t *){ NULL }), 0);
}

static void
view_learns_weights_from_live_pod_sizes(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *h100 = class_of(H100);
        CLEANUP(place_view_unrefp) struct place_view *prior = NULL;
        CLEANUP(place_view_unrefp) struct place_view *seen = NULL;
        struct place_node node = { .cls = h100, .free = mask_of(NULL, 8) };
        unsigned hist[17] = { 0 };
        struct place_config cfg;
        double sum = 0;

        place_config_default(&cfg);
        assert_int_equal(place_view_new(&cfg, &node, 1, NULL, 0, NULL, NULL, &prior), 0);
        assert_float_equal(place_view_weight(prior, 0), 0.1, 1e-9);
        assert_float_equal(place_view_weight(prior, 4), 0.55, 1e-9);
        /* 180 pods of 8 GPUs (and 3-GPU pods count for the 4-GPU classes). */
        hist[8] = 180;
        hist[3] = 20;
        assert_int_equal(place_view_new(&cfg, &node, 1, hist, 17, NULL, NULL, &seen), 0);
        for (unsigned k = 0; k < cfg.n_classes; k++)
                sum += place_view_weight(seen, k);
        assert_float_equal(sum, 1.0, 1e-9);
        assert_float_equal(place_view_weight(seen, 0), (20 * 0.1 + 180) / 220.0, 1e-9);
        assert_float_equal(place_view_weight(seen, 1), (20 * 0.075 + 10) / 220.0, 1e-9);
        assert_true(place_view_weight(seen, 4) < 0.55);
}

static void
view_groups_nodes_into_domains(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *h100 = class_of(H100);
        CLEANUP(place_view_unrefp) struct place_view *v = NULL;
        struct place_node nodes[4] = {
                { .cls = h100, .free = mask_of(NULL, 8), .domain = { "uuid-b.1", "rack-2" } },
                { .cls = h100, .free = mask_of("0,1", 8), .domain = { "uuid-a.0", "rack-1" } },
                { .cls = h100, .free = mask_of(NULL, 8), .domain = { "uuid-b.1", "rack-1" } },
                { .cls = NULL, .domain = { NULL, "rack-1" } },
        };
        const struct place_domain *d;
        struct place_config cfg;

        place_config_default(&cfg);
        assert_int_equal(place_view_new(&cfg, nodes, 4, NULL, 0, NULL, NULL, &v), 0);
        assert_int_equal(place_view_n_domains(v, 0), 2);
        assert_int_equal(place_view_n_domains(v, 1), 2);
        assert_int_equal(place_view_n_domains(v, 2), 0);
        assert_int_equal(place_view_find_domain(v, 0, "uuid-b.1"), 1);
        assert_int_equal(place_view_find_domain(v, 0, "nope"), -1);
        d = place_view_domain(v, 0, 1);
        assert_string_equal(d->name, "uuid-b.1");
        assert_int_equal(d->n_nodes, 2);
        assert_int_equal(d->free_gpus, 16);
        assert_int_equal(d->capacity[0], 2);
        d = place_view_domain(v, 1, 0);
        assert_string_equal(d->name, "rack-1");
        assert_int_equal(d->n_nodes, 3);
        assert_int_equal(d->free_gpus, 10);
        assert_int_equal(place_view_node_domain(v, 3, 0), -1);
        assert_int_equal(place_view_node_domain(v, 3, 1), 0);
        assert_null(place_view_domain(v, 0, 2));
}

/* Two leaves of HGX H100 nodes; each has one node with 4 GPUs taken, leaf-2 one empty node
 * more.  A 4-GPU pod costs either half-used node the same (the other half is all it had
 * left), so the ranking tells them apart by their leaf: the fuller leaf-1 (12 of 16 free)
 * gets it, and leaf-2 (20 of 24 free) keeps its room whole for a gang.  A loss that differs
 * still decides first: the empty node, which loses an 8-GPU set, ranks below both. */
static void
rank_fills_the_fuller_domain_when_losses_tie(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *h100 = class_of(H100);
        CLEANUP(place_view_unrefp) struct place_view *v = NULL;
        struct place_node nodes[5] = {
                { .cls = h100, .free = mask_of("4,5,6,7", 8), .domain = { NULL, "leaf-1" } },
                { .cls = h100, .free = mask_of(NULL, 8), .domain = { NULL, "leaf-1" } },
                { .cls = h100, .free = mask_of("4,5,6,7", 8), .domain = { NULL, "leaf-2" } },
                { .cls = h100, .free = mask_of(NULL, 8), .domain = { NULL, "leaf-2" } },
                { .cls = h100, .free = mask_of(NULL, 8), .domain = { NULL, "leaf-2" } },
        };
        struct score_request req = { .count = 4 };
        struct place_candidate cand[3], pair[2];
        const size_t at[3] = { 0, 2, 3 };
        struct place_config cfg;

        place_config_default(&cfg);
        assert_int_equal(place_view_new(&cfg, nodes, 5, NULL, 0, NULL, NULL, &v), 0);
        assert_int_equal(place_view_domain(v, 1, 0)->n_gpus, 16);
        assert_true(fabs(place_view_domain_free(v, 0) - 12.0 / 16) < 1e-12);
        assert_true(fabs(place_view_domain_free(v, 2) - 20.0 / 24) < 1e-12);
        assert_true(place_view_domain_free(v, 9) == 0);
        assert_true(place_view_has_domains(v));
        {
                /* The same nodes without their leaves: no domains, every share 0. */
                CLEANUP(place_view_unrefp) struct place_view *flat = NULL;
                struct place_node bare[5];

                for (size_t i = 0; i < 5; i++)
                        bare[i] = (struct place_node){ .cls = nodes[i].cls, .free = nodes[i].free };
                assert_int_equal(place_view_new(&cfg, bare, 5, NULL, 0, NULL, NULL, &flat), 0);
                assert_false(place_view_has_domains(flat));
                for (size_t i = 0; i < 5; i++)
                        assert_true(place_view_domain_free(flat, i) == 0);
        }
        for (size_t k = 0; k < 3; k++) {
                size_t i = at[k];
                struct score_choice ch;

                assert_int_equal(score_best(nodes[i].cls, &nodes[i].free, &req, &ch, NULL), 0);
                cand[k] = (struct place_candidate){
                        .fits = true, .priority = 10, .tier = place_tier(&ch), .busbw = ch.busbw_gbps,
                        .loss = place_loss(v, i, nodes[i].cls, &nodes[i].free, &ch.set),
                        .domain_free = place_view_domain_free(v, i) };
        }
        assert_true(cand[0].loss == cand[1].loss);
        assert_true(cand[2].loss > cand[0].loss);
        /* The two half-used nodes alone: their losses tie, the fuller leaf wins. */
        pair[0] = cand[0];
        pair[1] = cand[1];
        place_rank(&cfg, pair, 2);
        assert_int_equal(pair[0].priority, 10);
        assert_int_equal(pair[1].priority, 5); /* 0.5 x 10 + 0.5 x 0 */
        /* With the empty node: the loss decides, the half-used nodes stay above it. */
        place_rank(&cfg, cand, 3);
        assert_true(cand[0].priority >= cand[1].priority);
        assert_true(cand[1].priority > cand[2].priority);
}

static void
count_sets_counts_disjoint_sets_of_any_quality(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *dgx1 = class_of(DGX1);
        CLEANUP(score_class_unrefp) struct score_class *pcie = class_of(PCIE8);
        struct topo_mask all = mask_of(NULL, 8);

        assert_int_equal(place_count_sets(dgx1, &all, 4, SCORE_REQUIRE_NVLINK), 2);
        assert_int_equal(place_count_sets(dgx1, &all, 3, 0), 2);
        assert_int_equal(place_count_sets(pcie, &all, 2, SCORE_REQUIRE_NVLINK), 0);
        assert_int_equal(place_count_sets(pcie, &all, 0, 0), 0);
        assert_int_equal(place_count_sets(NULL, &all, 2, 0), 0);
}


/* place_spill_domain: among the candidates (cand_free non-NULL, counted with the free GPUs
 * given there, not the view's), the domain at any level with the most sets of the pod's
 * shape; a tie keeps the inner level; nothing when no candidate in a domain has a set.
 * HGX H100 nodes, 4-GPU pods (two sets on an empty node): node 0 in nvl-a and rack-1, nodes
 * 1 and 2 in rack-2 only, node 3 in nvl-b and rack-1 with half its GPUs free. */
static void
spill_domain_is_the_one_with_most_sets_among_the_candidates(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *h100 = class_of(H100);
        CLEANUP(place_view_unrefp) struct place_view *v = NULL;
        struct place_node nodes[4] = {
                { .cls = h100, .free = mask_of(NULL, 8), .domain = { "nvl-a", "rack-1" } },
                { .cls = h100, .free = mask_of(NULL, 8), .domain = { NULL, "rack-2" } },
                { .cls = h100, .free = mask_of(NULL, 8), .domain = { NULL, "rack-2" } },
                { .cls = h100, .free = mask_of("0,1,2,3", 8), .domain = { "nvl-b", "rack-1" } },
        };
        struct topo_mask half = mask_of("4,5,6,7", 8);
        const struct topo_mask *cand[4];
        struct place_config cfg;
        unsigned level = 99;
        ssize_t d = -7;

        place_config_default(&cfg);
        assert_int_equal(place_view_new(&cfg, nodes, 4, NULL, 0, NULL, NULL, &v), 0);
        for (unsigned i = 0; i < 4; i++)
                cand[i] = &nodes[i].free;
        /* rack-2: four sets, more than rack-1's three or nvl-a's two. */
        assert_int_equal(place_spill_domain(v, cand, 4, 0, &level, &d), 1);
        assert_int_equal(level, 1);
        assert_int_equal(d, place_view_find_domain(v, 1, "rack-2"));
        /* Without rack-2's nodes: rack-1 (nodes 0 and 3: three sets). */
        cand[1] = cand[2] = NULL;
        assert_int_equal(place_spill_domain(v, cand, 4, 0, &level, &d), 1);
        assert_int_equal(level, 1);
        assert_int_equal(d, place_view_find_domain(v, 1, "rack-1"));
        /* Node 0 alone: nvl-a and rack-1 tie at two sets, the inner level keeps it. */
        cand[3] = NULL;
        assert_int_equal(place_spill_domain(v, cand, 4, 0, &level, &d), 1);
        assert_int_equal(level, 0);
        assert_int_equal(d, place_view_find_domain(v, 0, "nvl-a"));
        /* The caller's free GPUs count, not the view's: node 0 with half free, node 3 too:
         * rack-1 two sets, nvl-a and nvl-b one each. */
        cand[0] = &half;
        cand[3] = &nodes[3].free;
        assert_int_equal(place_spill_domain(v, cand, 4, 0, &level, &d), 1);
        assert_int_equal(level, 1);
        assert_int_equal(d, place_view_find_domain(v, 1, "rack-1"));
        /* 8-GPU pods: no candidate has a set; no candidates at all: nothing, outputs kept. */
        level = 99, d = -7;
        assert_int_equal(place_spill_domain(v, cand, 8, 0, &level, &d), 0);
        cand[0] = cand[3] = NULL;
        assert_int_equal(place_spill_domain(v, cand, 4, 0, &level, &d), 0);
        assert_int_equal(level, 99);
        assert_int_equal(d, -7);
        assert_int_equal(place_spill_domain(NULL, cand, 4, 0, &level, &d), -EINVAL);
        assert_int_equal(place_spill_domain(v, NULL, 4, 0, &level, &d), -EINVAL);
        assert_int_equal(place_spill_domain(v, cand, 0, 0, &level, &d), -EINVAL);
        (void)state;
}

/* Two NVL72-style domains of 18 GB200 trays of 4 GPUs: in "nvl-a" only trays 0..free_a-1
 * are free, "nvl-b" is empty.  Nodes 0..17 are nvl-a's, 18..35 nvl-b's. */
static struct place_view *
two_domains(struct score_class *tray, unsigned free_a)
{
        struct place_node nodes[36];
        struct place_view *v = NULL;
        struct place_config cfg;

        place_config_default(&cfg);
        for (unsigned i = 0; i < 36; i++) {
                nodes[i] = (struct place_node){ .cls = tray };
                if (i >= 18 || i < free_a)
                        topo_mask_fill(&nodes[i].free, 4);
                nodes[i].domain[0] = i < 18 ? "nvl-a" : "nvl-b";
                nodes[i].domain[1] = i < 18 ? "rack-1" : "rack-2";
        }
        assert_int_equal(place_view_new(&cfg, nodes, 36, NULL, 0, NULL, NULL, &v), 0);
        return v;
}

static void
group_chooses_the_tightest_domain_that_holds_it(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *tray = class_of(GB200);
        CLEANUP(place_view_unrefp) struct place_view *v = two_domains(tray, 5);
        CLEANUP(place_groups_freep) struct place_groups *g = place_groups_new(0);
        struct place_group_request four = { .id = "ns/gang-4", .size = 4, .count = 4,
                                            .mode = PLACE_DOMAIN_PREFERRED };
        struct place_group_request big = { .id = "ns/gang-16", .size = 16, .count = 4,
                                           .mode = PLACE_DOMAIN_REQUIRED };
        struct place_group_request huge = { .id = "ns/gang-30", .size = 30, .count = 4,
                                            .mode = PLACE_DOMAIN_PREFERRED };
        struct place_group_request lone = { .count = 4, .mode = PLACE_DOMAIN_PREFERRED };
        struct place_group_domain d;

        /* Four trays fit in both; nvl-a (5 free) spares fewer than nvl-b (18). */
        assert_int_equal(place_group_domain(g, v, &four, NULL, 0, &d), 1);
        assert_string_equal(d.name, "nvl-a");
        assert_int_equal(d.level, 0);
        assert_true(d.whole);
        /* Asked again, the record answers while nvl-a still holds the group, even where a
         * fresh choice would differ; once nvl-a cannot and no pod was bound there, the group
         * is placed afresh; once a pod was bound, it stays. */
        {
                CLEANUP(place_view_unrefp) struct place_view *w = two_domains(tray, 18);
                CLEANUP(place_view_unrefp) struct place_view *full = two_domains(tray, 0);

                assert_int_equal(place_group_domain(g, w, &four, NULL, 1, &d), 1);
                assert_string_equal(d.name, "nvl-a");
                assert_int_equal(place_group_domain(g, full, &four, NULL, 2, &d), 1);
                assert_string_equal(d.name, "nvl-b");
                assert_int_equal(place_group_bound(g, &four, "uid-1", NULL, 3), 0);
                assert_int_equal(place_group_domain(g, v, &four, NULL, 4, &d), 1);
                assert_string_equal(d.name, "nvl-b");
        }
        /* Sixteen trays: nvl-b's 18 less the 3 held for the four's pods not yet bound leave
         * 15, so no domain holds them whole: the one with the most room, nvl-b. */
        assert_int_equal(place_group_domain(g, v, &big, NULL, 0, &d), 1);
        assert_string_equal(d.name, "nvl-b");
        assert_false(d.whole);
        /* Thirty fit in no NVLink domain nor rack: the domain with the most room not held
         * for a gang given it whole (the four's 3 held in nvl-b count, the sixteen's hold
         * yields to gangs: it fits nowhere whole either), not whole. */
        assert_int_equal(place_group_domain(g, v, &huge, NULL, 0, &d), 1);
        assert_string_equal(d.name, "nvl-b");
        assert_false(d.whole);
        assert_int_equal(place_groups_live(g, 0), 3);
        /* Not grouped: nothing to decide. */
        assert_int_equal(place_group_domain(g, v, &lone, NULL, 0, &d), 0);
        /* The records go at their TTL. */
        assert_int_equal(place_groups_live(g, PLACE_GROUP_TTL_NS + 4), 0); /* bound at 3 */
}

static void
group_hold_keeps_room_for_the_rest_of_the_group(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *tray = class_of(GB200);
        CLEANUP(place_view_unrefp) struct place_view *v = two_domains(tray, 4);
        CLEANUP(place_view_unrefp) struct place_view *after = NULL;
        CLEANUP(place_groups_freep) struct place_groups *g = place_groups_new(1000);
        struct place_group_request gang = { .id = "ns/gang", .size = 4, .count = 4,
                                            .mode = PLACE_DOMAIN_REQUIRED };
        struct topo_mask all, two;
        struct place_group_domain d;
        char who[PLACE_NAME_MAX] = "";

        topo_mask_fill(&all, 4);
        topo_mask_fill(&two, 2);
        assert_int_equal(place_group_domain(g, v, &gang, NULL, 0, &d), 1);
        assert_string_equal(d.name, "nvl-a"); /* exactly four trays free there */
        /* A stranger's pod on a free tray of nvl-a would leave three: refused. */
        assert_int_equal(place_group_check(g, v, 0, &all, &two, "ns/other", NULL, 1, who), -EBUSY);
        assert_string_equal(who, "ns/gang");
        assert_int_equal(place_group_check(g, v, 0, &all, &two, NULL, NULL, 1, NULL), -EBUSY);
        /* The group's own pods, and nvl-b, are not held. */
        assert_int_equal(place_group_check(g, v, 0, &all, &all, "ns/gang", NULL, 1, NULL), 0);
        assert_int_equal(place_group_check(g, v, 20, &all, &two, "ns/other", NULL, 1, NULL), 0);
        /* One member bound (its tray now used): three still held on three trays. */
        assert_int_equal(place_group_bound(g, &gang, "uid-0", NULL, 2), 0);
        assert_int_equal(place_group_bound(g, &gang, "uid-0", NULL, 2), 0); /* idempotent */
        after = two_domains(tray, 0);
        {
                struct place_node nodes[36];
                struct place_config cfg;

                place_config_default(&cfg);
                for (unsigned i = 0; i < 36; i++) {
                        nodes[i] = (struct place_node){ .cls = tray };
                        if (i >= 18 || (i >= 1 && i < 4))
                                topo_mask_fill(&nodes[i].free, 4);
                        nodes[i].domain[0] = i < 18 ? "nvl-a" : "nvl-b";
                }
                place_view_unref(after);
                assert_int_equal(place_view_new(&cfg, nodes, 36, NULL, 0, NULL, NULL, &after), 0);
        }
        assert_int_equal(place_group_check(g, after, 1, &all, &two, NULL, NULL, 3, NULL), -EBUSY);
        /* The hold lapses with the TTL (the gang failed or never came). */
        assert_int_equal(place_group_check(g, after, 1, &all, &two, NULL, NULL, 2000, NULL), 0);
        assert_int_equal(place_group_bound(g, &gang, "uid-1", NULL, 2000), -ENOENT);
}

/* A gang that failed to start where it was given room (no member bound) and tries again
 * after that room shrank (another scheduler's pod took a tray) is given a domain afresh,
 * and its hold moves with it: the old domain is free for others again. */
static void
group_that_fails_moves_its_hold_when_it_tries_again(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *tray = class_of(GB200);
        CLEANUP(place_view_unrefp) struct place_view *v = two_domains(tray, 4);
        CLEANUP(place_view_unrefp) struct place_view *shrunk = two_domains(tray, 3);
        CLEANUP(place_groups_freep) struct place_groups *g = place_groups_new(0);
        struct place_group_request gang = { .id = "ns/gang", .size = 4, .count = 4,
                                            .mode = PLACE_DOMAIN_REQUIRED };
        struct topo_mask all;
        struct place_group_domain d;

        topo_mask_fill(&all, 4);
        assert_int_equal(place_group_domain(g, v, &gang, NULL, 0, &d), 1);
        assert_string_equal(d.name, "nvl-a");
        assert_int_equal(place_group_check(g, v, 1, &all, &all, NULL, NULL, 1, NULL), -EBUSY);
        /* Three trays left in nvl-a: the next attempt goes to nvl-b ... */
        assert_int_equal(place_group_domain(g, shrunk, &gang, NULL, 2, &d), 1);
        assert_string_equal(d.name, "nvl-b");
        assert_true(d.whole);
        /* ... nvl-a's trays are no longer held, nvl-b keeps four of its eighteen. */
        assert_int_equal(place_group_check(g, shrunk, 1, &all, &all, NULL, NULL, 3, NULL), 0);
        assert_int_equal(place_group_check(g, shrunk, 20, &all, &all, NULL, NULL, 3, NULL), 0);
        assert_int_equal(place_groups_live(g, 3), 1);
}

/* A gang that fits no domain whole keeps the domain with the most room from single pods
 * (they fragment it), not from a gang that fits there whole now: that one runs at full
 * speed at once rather than split or waiting behind a gang that cannot start. */
static void
gang_fitting_whole_backfills_room_held_for_one_fitting_nowhere(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *tray = class_of(GB200);
        CLEANUP(place_view_unrefp) struct place_view *v = two_domains(tray, 3);
        CLEANUP(place_groups_freep) struct place_groups *g = place_groups_new(0);
        struct place_group_request huge = { .id = "ns/huge", .size = 20, .count = 4,
                                            .mode = PLACE_DOMAIN_PREFERRED };
        struct place_group_request four = { .id = "ns/four", .size = 4, .count = 4,
                                            .mode = PLACE_DOMAIN_PREFERRED };
        struct topo_mask all;
        struct place_group_domain d;

        topo_mask_fill(&all, 4);
        assert_int_equal(place_group_domain(g, v, &huge, NULL, 0, &d), 1);
        assert_string_equal(d.name, "nvl-b"); /* 18 free trays: the most room, not whole */
        assert_false(d.whole);
        /* nvl-a has three trays: only nvl-b holds four, and the gang of four gets it. */
        assert_int_equal(place_group_domain(g, v, &four, NULL, 1, &d), 1);
        assert_string_equal(d.name, "nvl-b");
        assert_true(d.whole);
        assert_int_equal(place_group_check(g, v, 20, &all, &all, "ns/four", NULL, 2, NULL), 0);
        /* A single pod is kept off nvl-b (held for both), not off nvl-a. */
        assert_int_equal(place_group_check(g, v, 20, &all, &all, NULL, NULL, 2, NULL), -EBUSY);
        assert_int_equal(place_group_check(g, v, 0, &all, &all, NULL, NULL, 2, NULL), 0);
}

/* A topology constraint (a PodGroup's topology key as a level): eight named trays, NVLink
 * domains nvl-a (n0..n3) and nvl-b (n4..n7) that each span two racks: rack-1 n0, n1, n4;
 * rack-2 n2, n3, n5, n6, n7; n5..n7 busy; n7 has no rack label in the second view. */
static struct place_view *
racks_across_domains(struct score_class *tray, bool n7_unracked)
{
        static const char *const names[8] = { "n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7" };
        static const char *const rack[8] = { "rack-1", "rack-1", "rack-2", "rack-2",
                                             "rack-1", "rack-2", "rack-2", "rack-2" };
        struct place_node nodes[8];
        struct place_view *v = NULL;
        struct place_config cfg;

        place_config_default(&cfg);
        for (unsigned i = 0; i < 8; i++) {
                nodes[i] = (struct place_node){ .name = names[i], .cls = tray };
                if (i < 5 || (i == 7 && n7_unracked))
                        topo_mask_fill(&nodes[i].free, 4);
                nodes[i].domain[0] = i < 4 ? "nvl-a" : "nvl-b";
                nodes[i].domain[1] = i == 7 && n7_unracked ? NULL : rack[i];
        }
        assert_int_equal(place_view_new(&cfg, nodes, 8, NULL, 0, NULL, NULL, &v), 0);
        return v;
}

static void
group_within_a_level_never_spans_its_domains(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *tray = class_of(GB200);
        CLEANUP(place_view_unrefp) struct place_view *v = racks_across_domains(tray, false);
        CLEANUP(place_view_unrefp) struct place_view *w = racks_across_domains(tray, true);
        CLEANUP(place_groups_freep) struct place_groups *g = place_groups_new(0);
        struct place_group_request pair = { .id = "ns/pair", .size = 2, .count = 4,
                                            .mode = PLACE_DOMAIN_REQUIRED };
        struct place_group_request rack_pair = pair, node_pair = pair, half_pair = pair,
                                   outer = pair;
        struct place_group_domain d;

        /* Unconstrained: nvl-a (4 free trays) is the only NVLink domain holding the pair. */
        assert_int_equal(place_group_domain(g, v, &pair, NULL, 0, &d), 1);
        assert_int_equal(d.level, 0);
        assert_string_equal(d.name, "nvl-a");
        /* Within a rack: nvl-a spans two racks, so a rack: rack-2 holds the pair with nothing
         * to spare (n2, n3), rack-1 has three. */
        snprintf(rack_pair.id, sizeof(rack_pair.id), "ns/rack-pair");
        rack_pair.has_within = true;
        rack_pair.within = 1;
        assert_int_equal(place_group_domain(g, v, &rack_pair, NULL, 0, &d), 1);
        assert_int_equal(d.level, 1);
        assert_string_equal(d.name, "rack-2");
        assert_true(d.whole);
        /* In w, n7 is free but under no rack: unconstrained, nvl-b (n4, n7) holds the pair
         * with nothing to spare; within a rack, nvl-b is out (n7 is in no rack, n4 and n5
         * in two), and so is n7 alone: rack-2 again (a fresh table: no holds). */
        {
                CLEANUP(place_groups_freep) struct place_groups *g2 = place_groups_new(0);

                assert_int_equal(place_group_domain(g2, w, &pair, NULL, 0, &d), 1);
                assert_string_equal(d.name, "nvl-b");
                snprintf(outer.id, sizeof(outer.id), "ns/outer");
                outer.has_within = true;
                outer.within = 1;
                assert_int_equal(place_group_domain(g2, w, &outer, NULL, 0, &d), 1);
                assert_int_equal(d.level, 1);
                assert_string_equal(d.name, "rack-2");
        }
        /* One node (kubernetes.io/hostname) for two pods of a whole tray: no node holds both,
         * so the node with the most room, not whole (the gang waits). */
        snprintf(node_pair.id, sizeof(node_pair.id), "ns/node-pair");
        node_pair.has_within = true;
        node_pair.within = PLACE_LEVEL_NODE;
        assert_int_equal(place_group_domain(g, v, &node_pair, NULL, 0, &d), 1);
        assert_int_equal(d.level, PLACE_LEVEL_NODE);
        assert_false(d.whole);
        /* Two pods of two GPUs: one tray holds them whole. */
        snprintf(half_pair.id, sizeof(half_pair.id), "ns/half-pair");
        half_pair.has_within = true;
        half_pair.within = PLACE_LEVEL_NODE;
        half_pair.count = 2;
        assert_int_equal(place_group_domain(g, v, &half_pair, NULL, 0, &d), 1);
        assert_int_equal(d.level, PLACE_LEVEL_NODE);
        assert_true(d.whole);
        /* A level no node has a domain at: no node may host the group (the constraint is
         * required), while without a constraint the same group gets a domain. */
        snprintf(outer.id, sizeof(outer.id), "ns/core");
        outer.within = 3;
        assert_int_equal(place_group_domain(g, v, &outer, NULL, 0, &d), -ENOSPC);
        outer.has_within = false;
        assert_int_equal(place_group_domain(g, v, &outer, NULL, 0, &d), 1);
}

/* A group's record made again after its owner restarted: the domain given, the pods bound
 * (they stop counting against the hold), a fresh TTL; a live record only gains the pods. */
static void
group_restored_after_a_restart_holds_the_rest(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *tray = class_of(GB200);
        CLEANUP(place_view_unrefp) struct place_view *v = two_domains(tray, 18);
        CLEANUP(place_groups_freep) struct place_groups *g = place_groups_new(1000);
        struct place_group_request gang = { .id = "ns/gang", .size = 4, .count = 4,
                                            .mode = PLACE_DOMAIN_REQUIRED };
        struct place_group_request lone = { .count = 4 };
        struct place_group_domain nvl_b = { .level = 0, .name = "nvl-b", .whole = true }, d;
        const char *const bound[] = { "u-1", "u-2" };
        struct topo_mask all;
        unsigned size = 0;

        topo_mask_fill(&all, 4);
        assert_int_equal(place_group_get(g, "ns/gang", 0, &d, &size), 0);
        assert_int_equal(place_group_restore(g, &lone, &nvl_b, bound, 2, 0), -EINVAL);
        assert_int_equal(place_group_restore(g, &gang, &nvl_b, bound, 2, 10), 1);
        assert_int_equal(place_group_get(g, "ns/gang", 11, &d, &size), 1);
        assert_string_equal(d.name, "nvl-b");
        assert_int_equal(size, 4);
        /* The group keeps nvl-b though nvl-a (18 free trays, so does nvl-b) ties on room. */
        assert_int_equal(place_group_domain(g, v, &gang, NULL, 12, &d), 1);
        assert_string_equal(d.name, "nvl-b");
        /* Two of four bound: two sets held in nvl-b, of its 18 free trays; a pod there may
         * take one (17 left), not on a view where nvl-b has only two free. */
        assert_int_equal(place_group_check(g, v, 20, &all, &all, NULL, NULL, 13, NULL), 0);
        {
                CLEANUP(place_view_unrefp) struct place_view *tight = NULL;
                struct place_node nodes[36];
                struct place_config cfg;

                place_config_default(&cfg);
                for (unsigned i = 0; i < 36; i++) {
                        nodes[i] = (struct place_node){ .cls = tray };
                        if (i < 18 || i >= 34)
                                topo_mask_fill(&nodes[i].free, 4);
                        nodes[i].domain[0] = i < 18 ? "nvl-a" : "nvl-b";
                }
                assert_int_equal(place_view_new(&cfg, nodes, 36, NULL, 0, NULL, NULL, &tight), 0);
                assert_int_equal(place_group_check(g, tight, 34, &all, &all, NULL, NULL, 13, NULL),
                                 -EBUSY);
                /* Restored again (a second restore, or a record that lived): the pods are
                 * added, nothing else changes; all four bound, nothing is held. */
                assert_int_equal(place_group_restore(g, &gang, &nvl_b, (const char *const[]){
                                                             "u-2", "u-3", "u-4" }, 3, 14), 0);
                assert_int_equal(place_group_check(g, tight, 34, &all, &all, NULL, NULL, 15, NULL),
                                 0);
        }
        /* The TTL runs from the restore (1000 ns here). */
        assert_int_equal(place_group_get(g, "ns/gang", 10 + 1000, &d, NULL), 0);
}

/* Four NVL72-style trays in one domain ("nvl-a") beside HGX H100 nodes under a leaf
 * ("leaf-1", no multi-node domain): free_trays of the trays free, the HGX nodes' free GPUs
 * given.  Nodes 0..3 are the trays, 4.. the HGX nodes. */
static struct place_view *
trays_and_hgx(struct score_class *tray, struct score_class *h100, unsigned free_trays,
              const char *const *hgx_free, unsigned n_hgx)
{
        struct place_node nodes[8];
        static const char *const names[8] = { "tray-0", "tray-1", "tray-2", "tray-3",
                                               "hgx-0", "hgx-1", "hgx-2", "hgx-3" };
        struct place_view *v = NULL;
        struct place_config cfg;

        place_config_default(&cfg);
        for (unsigned i = 0; i < 4 + n_hgx; i++) {
                nodes[i] = (struct place_node){ .name = names[i], .cls = i < 4 ? tray : h100 };
                if (i < free_trays)
                        topo_mask_fill(&nodes[i].free, 4);
                if (i >= 4)
                        nodes[i].free = mask_of(hgx_free[i - 4], 8);
                nodes[i].domain[0] = i < 4 ? "nvl-a" : NULL;
                nodes[i].domain[1] = "leaf-1";
        }
        assert_int_equal(place_view_new(&cfg, nodes, 4 + n_hgx, NULL, 0, NULL, NULL, &v), 0);
        return v;
}

/* A gang of two 4-GPU pods that an NVL72-style domain holds goes there rather than to an
 * empty HGX node that holds it too (both are one NVLink domain; the whole 8-GPU node is
 * what 8-GPU pods need); with no domain room left it gets the HGX node, and a gang of
 * 8-GPU pods, which no tray serves, one node or the leaf. */
static void
group_prefers_a_multi_node_domain_to_a_whole_node(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *tray = class_of(GB200);
        CLEANUP(score_class_unrefp) struct score_class *h100 = class_of(H100);
        static const char *const empty[2] = { NULL, NULL };
        CLEANUP(place_view_unrefp) struct place_view *v = trays_and_hgx(tray, h100, 4, empty, 2);
        CLEANUP(place_view_unrefp) struct place_view *full = trays_and_hgx(tray, h100, 1, empty, 2);
        CLEANUP(place_groups_freep) struct place_groups *g = place_groups_new(0);
        CLEANUP(place_groups_freep) struct place_groups *g2 = place_groups_new(0);
        struct place_group_request pair = { .id = "ns/pair", .size = 2, .count = 4,
                                            .mode = PLACE_DOMAIN_PREFERRED };
        struct place_group_request pair2 = { .id = "ns/pair2", .size = 2, .count = 4,
                                             .mode = PLACE_DOMAIN_PREFERRED };
        struct place_group_request big = { .id = "ns/big", .size = 2, .count = 8,
                                           .mode = PLACE_DOMAIN_PREFERRED };
        struct place_group_domain d;

        assert_int_equal(place_group_domain(g, v, &pair, NULL, 0, &d), 1);
        assert_int_equal(d.level, 0);
        assert_string_equal(d.name, "nvl-a");
        assert_true(d.whole);
        assert_int_equal(place_group_domain(g, full, &pair2, NULL, 0, &d), 1);
        assert_int_equal(d.level, PLACE_LEVEL_NODE);
        assert_string_equal(d.name, "hgx-0");
        /* Two 8-GPU pods: no tray, no single node: the leaf (two HGX nodes). */
        assert_int_equal(place_group_domain(g2, v, &big, NULL, 0, &d), 1);
        assert_int_equal(d.level, 1);
        assert_string_equal(d.name, "leaf-1");
}

/* A leaf of four HGX H100 nodes (real topology; no multi-node NVLink domain), free GPUs
 * given per node. */
static struct place_view *
hgx_leaf(struct score_class *h100, const char *const free[4])
{
        static const char *const names[4] = { "hgx-0", "hgx-1", "hgx-2", "hgx-3" };
        struct place_node nodes[4];
        struct place_view *v = NULL;
        struct place_config cfg;

        place_config_default(&cfg);
        for (unsigned i = 0; i < 4; i++) {
                nodes[i] = (struct place_node){ .name = names[i], .cls = h100,
                                                .free = mask_of(free[i], 8) };
                nodes[i].domain[1] = "leaf-1";
        }
        assert_int_equal(place_view_new(&cfg, nodes, 4, NULL, 0, NULL, NULL, &v), 0);
        return v;
}

static ssize_t
node_named(const struct place_view *v, const char *name)
{
        return place_view_find_domain(v, PLACE_LEVEL_NODE, name);
}

/* issue 11: the members of a gang given a domain whole are planned onto its nodes, fullest
 * first, instead of spreading over nodes that tie.  Leaf of four HGX H100: hgx-0 and hgx-2
 * empty, hgx-1 half free (GPUs 4-7), hgx-3 two free.  Three 4-GPU pods: hgx-1's half first
 * (it leaves nothing), then two on hgx-0 (an empty node, filled whole; hgx-2 stays whole),
 * never hgx-2.  A member keeps its claim when asked again, gives it up when its node no
 * longer fits; a member bound off the plan takes a slot on its node, and the member whose
 * claim that was gets the slot let go. */
static void
group_plan_packs_members_onto_the_fullest_nodes(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *h100 = class_of(H100);
        static const char *const free[4] = { NULL, "4-7", NULL, "6-7" };
        CLEANUP(place_view_unrefp) struct place_view *v = hgx_leaf(h100, free);
        CLEANUP(place_groups_freep) struct place_groups *g = place_groups_new(0);
        struct place_group_request gang = { .id = "ns/gang", .size = 3, .count = 4,
                                            .mode = PLACE_DOMAIN_PREFERRED };
        ssize_t h0 = node_named(v, "hgx-0"), h1 = node_named(v, "hgx-1");
        bool fits[4] = { true, true, true, true };
        struct place_group_domain d;
        size_t at;

        (void)state;
        assert_true(h0 >= 0 && h1 >= 0);
        assert_int_equal(place_group_plan_pick(g, v, gang.id, "uid-a", fits, 0, &at), 0);
        assert_int_equal(place_group_domain(g, v, &gang, NULL, 0, &d), 1);
        assert_int_equal(d.level, 1);
        assert_true(d.whole);
        assert_int_equal(place_group_plan_pick(g, v, gang.id, "uid-a", fits, 0, &at), 1);
        assert_int_equal(at, h1);
        assert_int_equal(place_group_plan_pick(g, v, gang.id, "uid-a", fits, 0, &at), 1);
        assert_int_equal(at, h1); /* its own claim */
        assert_int_equal(place_group_plan_pick(g, v, gang.id, "uid-b", fits, 0, &at), 1);
        assert_int_equal(at, h0);
        assert_int_equal(place_group_plan_pick(g, v, gang.id, "uid-c", fits, 0, &at), 1);
        assert_int_equal(at, h0);
        /* A fourth member finds no slot left: ranked without the plan. */
        assert_int_equal(place_group_plan_pick(g, v, gang.id, "uid-d", fits, 0, &at), 0);
        /* uid-a bound on hgx-0 instead: it takes a slot there (uid-b's), lets hgx-1's go,
         * which uid-b, asked again, then gets. */
        assert_int_equal(place_group_bound(g, &gang, "uid-a", "hgx-0", 1), 0);
        assert_int_equal(place_group_plan_pick(g, v, gang.id, "uid-c", fits, 1, &at), 1);
        assert_int_equal(at, h0);
        assert_int_equal(place_group_plan_pick(g, v, gang.id, "uid-b", fits, 1, &at), 1);
        assert_int_equal(at, h1);
        /* With hgx-1 full for it (the scheduler's filter), uid-b lets its claim go and finds
         * no other slot. */
        fits[h1] = false;
        assert_int_equal(place_group_plan_pick(g, v, gang.id, "uid-b", fits, 1, &at), 0);
        assert_int_equal(place_group_plan_pick(g, v, gang.id, "uid-e", fits, 1, &at), 0);
}

/* issue 11: a domain-preferred gang that no domain holds whole is planned over every node,
 * as rack packing's fallback bin-packs it: the nodes it leaves with the fewest free GPUs
 * first, the smaller node on a tie (a tray serves fewer shapes than an HGX node), the
 * fuller domain, then the view's order.  HGX nodes first in the view (leaf-1): hgx-0 empty,
 * hgx-1 half free; then trays of nvl-a: tray-0 free, tray-1 busy.  Six 4-GPU pods fit no
 * domain (the leaf has three sets, nvl-a one): tray-0 (before hgx-1's half, which leaves
 * nothing either), hgx-1's half, then hgx-0 twice; the plan ends there (four sets).  Kept
 * to its domain (domain-required), it is planned inside the domain it was given. */
static void
spilt_group_is_planned_over_every_node_fullest_first(void **state)
{
        CLEANUP(score_class_unrefp) struct score_class *tray = class_of(GB200);
        CLEANUP(score_class_unrefp) struct score_class *h100 = class_of(H100);
        CLEANUP(place_view_unrefp) struct place_view *v = NULL;
        CLEANUP(place_groups_freep) struct place_groups *g = place_groups_new(0);
        struct place_group_request six = { .id = "ns/six", .size = 6, .count = 4,
                                           .mode = PLACE_DOMAIN_PREFERRED };
        static const char *const want[4] = { "tray-0", "hgx-1", "hgx-0", "hgx-0" };
        bool fits[4] = { true, true, true, true };
        struct place_node nodes[4] = {
                { .name = "hgx-0", .cls = h100, .free = mask_of(NULL, 8) },
                { .name = "hgx-1", .cls = h100, .free = mask_of("4-7", 8) },
                { .name = "tray-0", .cls = tray, .free = mask_of(NULL, 4) },
                { .name = "tray-1", .cls = tray },
        };
        struct place_group_domain d;
        struct place_config cfg;
        char uid[16];
        size_t at;

        (void)state;
        place_config_default(&cfg);
        for (unsigned i = 0; i < 4; i++) {
                nodes[i].domain[0] = i < 2 ? NULL : "nvl-a";
                nodes[i].domain[1] = i < 2 ? "leaf-1" : NULL;
        }
        assert_int_equal(place_view_new(&cfg, nodes, 4, NULL, 0, NULL, NULL, &v), 0);
        assert_int_equal(place_group_domain(g, v, &six, NULL, 0, &d), 1);
        assert_false(d.whole);
        for (unsigned k = 0; k < 4; k++) {
                snprintf(uid, sizeof(uid), "uid-%u", k);
                assert_int_equal(place_group_plan_pick(g, v, six.id, uid, fits, 0, &at), 1);
                assert_string_equal(place_view_node_name(v, at), want[k]);
        }
        assert_int_equal(place_group_plan_pick(g, v, six.id, "uid-4", fits, 0, &at), 0);
        /* Chosen afresh at its next pod (not whole, none bound), the claims carry over. */
        assert_int_equal(place_group_domain(g, v, &six, NULL, 1, &d), 1);
        assert_int_equal(place_group_plan_pick(g, v, six.id, "uid-1", fits, 1, &at), 1);
        assert_string_equal(place_view_node_name(v, at), "hgx-1");
        assert_int_equal(place_group_plan_pick(g, v, six.id, "uid-4", fits, 1, &at), 0);
        /* Kept to its domain (domain-required), the same gang is planned inside it only:
         * nvl-a (the most room), its one free tray. */
        {
                CLEANUP(place_groups_freep) struct place_groups *g2 = place_groups_new(0);
                struct place_group_request kept = six;

                kept.mode = PLACE_DOMAIN_REQUIRED;
                assert_int_equal(place_group_domain(g2, v, &kept, NULL, 0, &d), 1);
                assert_string_equal(d.name, "nvl-a");
                assert_int_equal(place_group_plan_pick(g2, v, kept.id, "uid-0", fits, 0, &at), 1);
                assert_string_equal(place_view_node_name(v, at), "tray-0");
                assert_int_equal(place_group_plan_pick(g2, v, kept.id, "uid-1", fits, 0, &at), 0);
        }
}

int
main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(capacity_counts_best_quality_sets_per_class),
                cmocka_unit_test(config_check_refuses_bad_mixes),
                cmocka_unit_test(loss_of_the_last_eight_gpu_set_outweighs_broken_nodes),
                cmocka_unit_test(loss_counts_what_the_set_keeps_from_the_drained_node),
                cmocka_unit_test(rank_never_trades_a_link_class_for_capacity),
                cmocka_unit_test(view_reuses_unchanged_nodes_of_its_base),
                cmocka_unit_test(view_finds_nodes_by_name_and_lists_domain_members),
                cmocka_unit_test(view_learns_weights_from_live_pod_sizes),
                cmocka_unit_test(view_groups_nodes_into_domains),
                cmocka_unit_test(rank_fills_the_fuller_domain_when_losses_tie),
                cmocka_unit_test(count_sets_counts_disjoint_sets_of_any_quality),
                cmocka_unit_test(group_chooses_the_tightest_domain_that_holds_it),
                cmocka_unit_test(spill_domain_is_the_one_with_most_sets_among_the_candidates),
                cmocka_unit_test(group_within_a_level_never_spans_its_domains),
                cmocka_unit_test(group_restored_after_a_restart_holds_the_rest),
                cmocka_unit_test(group_hold_keeps_room_for_the_rest_of_the_group),
                cmocka_unit_test(group_that_fails_moves_its_hold_when_it_tries_again),
                cmocka_unit_test(gang_fitting_whole_backfills_room_held_for_one_fitting_nowhere),
                cmocka_unit_test(group_prefers_a_multi_node_domain_to_a_whole_node),
                cmocka_unit_test(group_plan_packs_members_onto_the_fullest_nodes),
                cmocka_unit_test(spilt_group_is_planned_over_every_node_fullest_first),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
