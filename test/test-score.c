/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for scoring/: the bandwidth model on tiny literal topologies, ring packing, the
 * pinned DGX-1 failure of additive pair scores, constraints and their error codes,
 * tie-breakers, the node priority, the memo under threads, and score_best() against an
 * independent brute force on every matrix of up to 8 GPUs in test/data/topologies (every
 * free mask, every request size) and a 16-GPU DGX-2-class NVSwitch node (sampled masks).
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "test-util.h"

#include "score-private.h"
#include "score.h"

#define NV(n) { TOPO_LINK_NVLINK, n }
#define LK(l) { TOPO_LINK_##l, 0 }

struct cell {
        enum topo_link link;
        unsigned links;
};

/* A topology from a literal upper triangle (row i lists pairs i,j for j > i). */
/* The k-th GPU (ascending) of a choice's set, or TOPO_MAX_GPUS past the last. */
static unsigned
nth_gpu(const struct score_choice *x, unsigned k)
{
        for (unsigned i = 0; i < TOPO_MAX_GPUS; i++)
                if (topo_mask_test(&x->set, i) && k-- == 0)
                        return i;
        return TOPO_MAX_GPUS;
}

static struct topo *
literal(unsigned n, const struct cell *upper, const char *model, const int *numa)
{
        struct topo *t = topo_new(n, 0);
        unsigned k = 0;

        assert_non_null(t);
        t->vendor = TOPO_VENDOR_NVIDIA;
        for (unsigned i = 0; i < n; i++) {
                snprintf(t->gpus[i].model, sizeof(t->gpus[i].model), "%s", model);
                t->gpus[i].numa = numa ? numa[i] : 0;
                for (unsigned j = i + 1; j < n; j++, k++) {
                        struct topo_pair p = { .link = (uint8_t)upper[k].link,
                                               .links = (uint8_t)upper[k].links };
                        *topo_pair_mut(t, i, j) = p;
                        *topo_pair_mut(t, j, i) = p;
                }
        }
        topo_finish(t);
        return t;
}

static struct topo *
uniform(unsigned n, struct cell c, const char *model, const int *numa, bool nvswitch)
{
        struct cell upper[TOPO_MAX_GPUS * (TOPO_MAX_GPUS - 1) / 2];
        struct topo *t;

        for (unsigned k = 0; k < n * (n - 1) / 2; k++)
                upper[k] = c;
        t = literal(n, upper, model, numa);
        if (nvswitch)
                t->nvswitch = true;
        return t;
}

static struct topo *
load_file(const char *name)
{
        char rel[512];
        CLEANUP(freep) char *text = NULL;
        struct topo *t = NULL;
        struct topo_error err = { 0 };
        size_t len;

        snprintf(rel, sizeof(rel), "topologies/%s", name);
        text = test_read_data(rel, &len);
        if (topo_parse_any(text, len, &t, &err) < 0)
                return NULL;
        return t;
}

static struct topo_mask
mask_of(const unsigned *gpus, unsigned n)
{
        struct topo_mask m;

        topo_mask_clear(&m);
        for (unsigned i = 0; i < n; i++)
                topo_mask_set(&m, gpus[i]);
        return m;
}

static struct topo_mask
mask_bits(uint64_t bits)
{
        struct topo_mask m;

        topo_mask_clear(&m);
        m.w[0] = bits;
        return m;
}

static double
set_busbw(struct score_class *c, uint64_t bits)
{
        struct topo_mask m = mask_bits(bits);
        struct score_choice x;

        assert_int_equal(score_evaluate(c, &m, NULL, &x), 0);
        return x.busbw_gbps;
}

/* --- the pair model ------------------------------------------------------------------- */

static void
score_pair_bandwidth_follows_the_documented_constants(void **state)
{
        static const struct {
                const char *model;
                struct cell cell;
                bool nvswitch;
                uint8_t cpu_link;
                double gbps;
        } cases[] = {
                { "Tesla V100-SXM2-16GB", NV(2), false, 0, 50.0 },   /* NVLink2 25 x 2 */
                { "Tesla P100-SXM2-16GB", NV(4), false, 0, 80.0 },   /* NVLink1 20 x 4 */
                { "NVIDIA A100-SXM4-80GB", NV(4), false, 0, 100.0 }, /* NVLink3 25 x 4 */
                { "NVIDIA A100-SXM4-80GB", NV(12), true, 0, 300.0 }, /* NVSwitch: 12 ports */
                { "NVIDIA H100 80GB HBM3", NV(18), true, 0, 450.0 }, /* NVSwitch: 18 ports */
                { "NVIDIA B200", NV(18), true, 0, 900.0 },           /* NVLink5 50 x 18 */
                { "NVIDIA GeForce RTX 3090", NV(4), false, 0, 56.0 }, /* bridge 14 x 4 */
                { "NVIDIA A100-PCIE-40GB", LK(PIX), false, 0, 24.0 }, /* Gen4 P2P */
                { "NVIDIA A100-PCIE-40GB", LK(PXB), false, 0, 24.0 },
                { "NVIDIA A100-PCIE-40GB", LK(PHB), false, 0, 19.2 }, /* host-staged 0.8 */
                { "NVIDIA A100-PCIE-40GB", LK(NODE), false, 0, 19.2 },
                { "NVIDIA A100-PCIE-40GB", LK(SYS), false, TOPO_CPU_LINK_INTEL_UPI, 10.0 },
                { "NVIDIA A100-PCIE-40GB", LK(SYS), false, TOPO_CPU_LINK_INTEL_UPI2, 19.2 },
                { "NVIDIA A100-PCIE-40GB", LK(SYS), false, TOPO_CPU_LINK_AMD_IF, 16.0 },
                { "Tesla V100-PCIE-16GB", LK(SYS), false, TOPO_CPU_LINK_UNKNOWN, 9.6 },
                { "NVIDIA H100 PCIe", LK(PIX), false, 0, 48.0 },      /* Gen5 */
                { "", LK(PIX), false, 0, 12.0 },                      /* unknown: Gen3 */
                { "AMD Instinct MI300X", { TOPO_LINK_XGMI, 1 }, false, 0, 64.0 },
                { "AMD Instinct MI250X", { TOPO_LINK_XGMI, 2 }, false, 0, 100.0 },
                { "AMD Instinct MI100", { TOPO_LINK_XGMI, 1 }, false, 0, 46.0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                CLEANUP(topo_unrefp) struct topo *t = NULL;
                CLEANUP(score_class_unrefp) struct score_class *c = NULL;
                struct cell upper[1] = { cases[i].cell };

                t = literal(2, upper, cases[i].model, NULL);
                t->nvswitch = cases[i].nvswitch;
                t->cpu_link = cases[i].cpu_link;
                c = score_class_new(t, NULL);
                assert_non_null(c);
                if (fabs(score_pair_gbps(c, 0, 1) - cases[i].gbps) > 0.01)
                        fail_msg("case %zu (%s): %.2f GB/s, want %.2f", i, cases[i].model,
                                 score_pair_gbps(c, 0, 1), cases[i].gbps);
                assert_true(score_pair_gbps(c, 0, 1) == score_pair_gbps(c, 1, 0));
                assert_true(score_pair_gbps(c, 0, 0) == 0);
                /* two GPUs: the ring is the pair, both directions */
                if (fabs(set_busbw(c, 0x3) - cases[i].gbps) > 0.01)
                        fail_msg("case %zu: pair ring %.2f GB/s, want %.2f", i, set_busbw(c, 0x3),
                                 cases[i].gbps);
        }
}

/* --- rings ---------------------------------------------------------------------------- */

static void
score_ring_is_as_fast_as_its_slowest_hop(void **state)
{
        /* 4 PCIe Gen4 GPUs: 0-1 PIX, 2-3 PIX, the rest PHB (host-staged, 19.2) */
        static const struct cell upper[] = {
                LK(PIX), LK(PHB), LK(PHB), /* 0 */
                LK(PHB), LK(PHB),          /* 1 */
                LK(PIX),                   /* 2 */
        };
        CLEANUP(topo_unrefp) struct topo *t = literal(4, upper, "NVIDIA A100-PCIE-40GB", NULL);
        CLEANUP(score_class_unrefp) struct score_class *c = score_class_new(t, NULL);
        CLEANUP(topo_unrefp) struct topo *phb = uniform(4, (struct cell)LK(PHB), "NVIDIA A100-PCIE-40GB",
                                                       NULL, false);
        CLEANUP(score_class_unrefp) struct score_class *cphb = score_class_new(phb, NULL);
        uint8_t order[4];
        double hop[4], slowest = INFINITY, all;

        assert_true(fabs(set_busbw(c, 0x3) - 24.0) < 0.01); /* one PIX pair */
        /* every hop host-staged: one ring at the staged rate, no second one fits the links */
        assert_true(fabs(set_busbw(cphb, 0xf) - 19.2) < 0.01);
        assert_true(fabs(set_busbw(cphb, 0x7) - 19.2) < 0.01);
        /* mixed: at least the slowest hop, at most one PCIe link */
        all = set_busbw(c, 0xf);
        assert_true(all >= 19.2 - 0.01 && all <= 24.0 + 0.01);
        assert_int_equal(score_best_ring(c, &(struct topo_mask){ { 0xf } }, order, hop), 4);
        for (unsigned i = 0; i < 4; i++)
                slowest = MIN(slowest, hop[i]);
        assert_true(fabs(slowest - 19.2) < 0.01);
}

static void
score_packs_link_disjoint_rings_on_nvlink_meshes(void **state)
{
        /* all-to-all NV4 A100 (HGX A100 4-GPU): each GPU sends 3 x 100 GB/s */
        CLEANUP(topo_unrefp) struct topo *k4 = uniform(4, (struct cell)NV(4), "NVIDIA A100-SXM4-80GB",
                                                      NULL, false);
        CLEANUP(score_class_unrefp) struct score_class *c4 = score_class_new(k4, NULL);
        CLEANUP(topo_unrefp) struct topo *dgx1 = load_file("dgx1-v100-sxm2-oneflow.txt");
        CLEANUP(score_class_unrefp) struct score_class *c1 = NULL;
        double pair, three, four, all8;

        pair = set_busbw(c4, 0x3);
        three = set_busbw(c4, 0x7);
        four = set_busbw(c4, 0xf);
        assert_true(fabs(pair - 100.0) < 0.01);
        assert_true(fabs(three - 200.0) < 0.01); /* a ring and its reverse */
        assert_true(fabs(four - 300.0) < 0.01);  /* three rings per direction fill 12 links */

        /* DGX-1 V100: 6 links of 25 GB/s per GPU bound the packing at 150 GB/s; one ring at
         * the slowest (NV1) hop gives 25, the NV2-only ring pair 100: packing beats both. */
        assert_non_null(dgx1);
        topo_set_model(dgx1, "Tesla V100-SXM2-16GB");
        c1 = score_class_new(dgx1, NULL);
        all8 = set_busbw(c1, 0xff);
        assert_true(all8 > 100.0 + 1e-6);
        assert_true(all8 <= 150.0 + 1e-6);
}

static void
score_nvswitch_ports_are_shared_by_all_peers(void **state)
{
        int numa[8] = { 0, 0, 0, 0, 1, 1, 1, 1 };
        CLEANUP(topo_unrefp) struct topo *t = uniform(8, (struct cell)NV(18), "NVIDIA H100 80GB HBM3",
                                                     numa, true);
        CLEANUP(score_class_unrefp) struct score_class *c = score_class_new(t, NULL);

        /* Any set on the fabric gets one GPU's port rate, however many peers it has. */
        for (uint64_t bits = 1; bits < 256; bits++) {
                double want = __builtin_popcountll(bits) == 1 ? 0.0 : 450.0;
                assert_true(fabs(set_busbw(c, bits) - want) < 0.01);
        }
}

static void
score_single_gpu_sets_have_no_communication(void **state)
{
        CLEANUP(topo_unrefp) struct topo *t = uniform(4, (struct cell)LK(SYS), "Tesla T4", NULL, false);
        CLEANUP(score_class_unrefp) struct score_class *c = score_class_new(t, NULL);
        struct score_request req = { .count = 1 };
        struct topo_mask free;
        struct score_choice x;

        topo_mask_fill(&free, 4);
        assert_int_equal(score_best(c, &free, &req, &x, NULL), 0);
        assert_int_equal(x.n, 1);
        assert_true(x.busbw_gbps == 0 && x.ideal_gbps == 0);
        assert_true(x.all_nvlink_ring && x.p2p); /* vacuously: no hop */
        assert_int_equal(nth_gpu(&x, 0), 0);
}

/* --- the pinned failure of additive pair scores ---------------------------------------- */

static void
score_dgx1_with_0_and_4_busy_returns_an_all_nvlink_ring(void **state)
{
        CLEANUP(topo_unrefp) struct topo *t = load_file("dgx1-v100-sxm2-oneflow.txt");
        CLEANUP(score_class_unrefp) struct score_class *c = NULL;
        static const unsigned free_gpus[] = { 1, 2, 3, 5, 6, 7 };
        static const unsigned additive[] = { 1, 2, 3, 5 };
        struct topo_mask free = mask_of(free_gpus, 6), bad = mask_of(additive, 4);
        struct score_request req = { .count = 4 };
        struct score_choice x, y;

        assert_non_null(t);
        c = score_class_new(t, NULL);
        assert_int_equal(score_best(c, &free, &req, &x, NULL), 0);
        assert_true(x.all_nvlink_ring);
        assert_false(topo_mask_equal(&x.set, &bad));
        /* every hop of the chosen set's best ring is NVLink */
        uint8_t order[4];
        double hop[4];
        assert_int_equal(score_best_ring(c, &x.set, order, hop), 4);
        for (unsigned i = 0; i < 4; i++)
                assert_int_equal(topo_pair(t, order[i], order[(i + 1) % 4])->link, TOPO_LINK_NVLINK);
        /* and the additive scorer's pick has no such ring and models slower */
        assert_int_equal(score_evaluate(c, &bad, &free, &y), 0);
        assert_false(y.all_nvlink_ring);
        assert_true(y.busbw_gbps < x.busbw_gbps);
}

/* --- constraints and errors ---------------------------------------------------------------- */

static void
score_constraints_fail_with_the_right_code_and_reason(void **state)
{
        /* 4 PCIe GPUs: 0-1 PIX on NUMA 0, 2-3 PIX on NUMA 1, SYS across; NICs by GPU 0 and 1 */
        static const struct cell upper[] = {
                LK(PIX), LK(SYS), LK(SYS), LK(SYS), LK(SYS), LK(PIX),
        };
        static const int numa[] = { 0, 0, 1, 1 };
        CLEANUP(topo_unrefp) struct topo *base = literal(4, upper, "Tesla T4", numa);
        CLEANUP(topo_unrefp) struct topo *t = topo_new(4, 1);
        CLEANUP(score_class_unrefp) struct score_class *c = NULL;
        static const struct {
                uint64_t free;
                unsigned count;
                const char *require;
                int r;
                const char *why_has; /* substring of the reason */
                uint64_t want;       /* the chosen set when r == 0 */
        } cases[] = {
                { 0xf, 2, "numa", 0, NULL, 0x3 },
                { 0xe, 2, "numa", 0, NULL, 0xc },
                { 0xa, 2, "numa", -EAGAIN, "require numa", 0 },
                { 0xf, 3, "numa", -ENOEXEC, "require numa", 0 },
                { 0xf, 2, "pcie-switch", 0, NULL, 0x3 },
                { 0x5, 2, "pcie-switch", -EAGAIN, "require pcie-switch", 0 },
                { 0xf, 3, "pcie-switch", -ENOEXEC, "require pcie-switch", 0 },
                { 0xf, 2, "nic", 0, NULL, 0x3 },
                { 0xe, 2, "nic", -EAGAIN, "require nic", 0 },
                { 0xf, 3, "nic", -ENOEXEC, "require nic", 0 },
                { 0xf, 2, "nvlink", -ENOEXEC, "require nvlink", 0 },
                { 0xf, 1, "nvlink", 0, NULL, 0x1 },
                { 0x3, 3, "", -ENOSPC, NULL, 0 },
                { 0xf, 5, "", -ENOEXEC, NULL, 0 },
                { 0xf, 0, "", -EINVAL, NULL, 0 },
        };

        /* the same GPUs plus one NIC, PIX to GPUs 0 and 1 */
        for (unsigned i = 0; i < 4; i++) {
                t->gpus[i] = base->gpus[i];
                for (unsigned j = 0; j < 4; j++)
                        *topo_pair_mut(t, i, j) = *topo_pair(base, i, j);
        }
        t->nic_links[0] = TOPO_LINK_PIX;
        t->nic_links[1] = TOPO_LINK_PIX;
        t->nic_links[2] = TOPO_LINK_SYS;
        t->nic_links[3] = TOPO_LINK_SYS;
        topo_finish(t);
        c = score_class_new(t, NULL);

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct score_request req = { .count = cases[i].count };
                struct topo_mask free = mask_bits(cases[i].free);
                struct score_choice x;
                const char *why = NULL;
                int r;

                assert_int_equal(score_require_parse(cases[i].require, &req.require), 0);
                r = score_best(c, &free, &req, &x, &why);
                if (r != cases[i].r)
                        fail_msg("case %zu: r=%d want %d (%s)", i, r, cases[i].r, why ? why : "-");
                if (r == 0)
                        assert_true(x.set.w[0] == cases[i].want);
                else
                        assert_non_null(why);
                if (cases[i].why_has)
                        assert_non_null(strstr(why, cases[i].why_has));
                /* the memo answers the same the second time */
                const char *why2 = NULL;
                struct score_choice x2;
                assert_int_equal(score_best(c, &free, &req, &x2, &why2), r);
                if (r == 0)
                        assert_true(topo_mask_equal(&x.set, &x2.set));
                else
                        assert_true(why2 == why);
        }
}

static void
score_require_parses_names_and_rejects_others(void **state)
{
        static const struct {
                const char *s;
                int r;
                unsigned bits;
                const char *back;
        } cases[] = {
                { "nvlink", 0, SCORE_REQUIRE_NVLINK, "nvlink" },
                { "numa,nic", 0, SCORE_REQUIRE_NUMA | SCORE_REQUIRE_NIC, "numa,nic" },
                { "nic,numa", 0, SCORE_REQUIRE_NUMA | SCORE_REQUIRE_NIC, "numa,nic" },
                { "pcie-switch", 0, SCORE_REQUIRE_PCIE_SWITCH, "pcie-switch" },
                { "", 0, 0, "" },
                { "nvlinks", -EINVAL, 0, NULL },
                { "numa,", -EINVAL, 0, NULL },
                { ",numa", -EINVAL, 0, NULL },
                { "NUMA", -EINVAL, 0, NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                unsigned bits = 0xdead;
                char buf[64];

                assert_int_equal(score_require_parse(cases[i].s, &bits), cases[i].r);
                if (cases[i].r < 0) {
                        assert_int_equal(bits, 0xdead);
                        continue;
                }
                assert_int_equal(bits, cases[i].bits);
                assert_string_equal(score_require_to_string(bits, buf, sizeof(buf)), cases[i].back);
        }
}

/* --- tie-breakers ---------------------------------------------------------------------------- */

static void
score_ties_break_by_numa_then_nic_then_fragmentation_then_index(void **state)
{
        /* 8 PCIe A100s, NV12 bridge pairs (0,1) (2,3) (4,5) (6,7); NUMA 0: 0-3, 1: 4-7 */
        static const int numa[] = { 0, 0, 0, 0, 1, 1, 1, 1 };
        struct cell upper[28];
        unsigned k = 0;
        for (unsigned i = 0; i < 8; i++)
                for (unsigned j = i + 1; j < 8; j++)
                        upper[k++] = (j == i + 1 && i % 2 == 0) ? (struct cell)NV(12)
                                     : numa[i] == numa[j] ? (struct cell)LK(NODE) : (struct cell)LK(SYS);
        CLEANUP(topo_unrefp) struct topo *t = literal(8, upper, "NVIDIA A100 80GB PCIe", numa);
        CLEANUP(score_class_unrefp) struct score_class *c = score_class_new(t, NULL);
        static const struct {
                uint64_t free;
                unsigned count;
                uint64_t want;
                const char *why;
        } cases[] = {
                /* 1 GPU: take the one whose bridge partner is busy, keep whole pairs */
                { 0x0b, 1, 0x08, "fragmentation keeps the free NVLink pair" },
                { 0xff, 1, 0x01, "all equal: lowest index" },
                /* 2 GPUs: a bridge pair */
                { 0xff, 2, 0x03, "NVLink pair, lowest index" },
                { 0xfc, 2, 0x0c, "NVLink pair, lowest index" },
                /* 3 GPUs from 0,1 + 4,5,6: a pair plus a NUMA-local GPU beats crossing sockets */
                { 0x73, 3, 0x70, "crossing sockets is slower" },
                /* 4 GPUs: two pairs on one socket */
                { 0xff, 4, 0x0f, "one NUMA node" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct score_request req = { .count = cases[i].count };
                struct topo_mask free = mask_bits(cases[i].free);
                struct score_choice x;

                assert_int_equal(score_best(c, &free, &req, &x, NULL), 0);
                if (x.set.w[0] != cases[i].want)
                        fail_msg("case %zu (%s): got 0x%llx want 0x%llx", i, cases[i].why,
                                 (unsigned long long)x.set.w[0], (unsigned long long)cases[i].want);
        }
}

static void
score_nic_affinity_breaks_ties_before_fragmentation(void **state)
{
        /* 4 GPUs on one NVSwitch: GPU 2 and 3 have a PIX NIC */
        CLEANUP(topo_unrefp) struct topo *t = topo_new(4, 1);
        CLEANUP(score_class_unrefp) struct score_class *c = NULL;
        struct score_request req = { .count = 2 };
        struct topo_mask free;
        struct score_choice x;

        for (unsigned i = 0; i < 4; i++) {
                snprintf(t->gpus[i].model, sizeof(t->gpus[i].model), "NVIDIA H100 80GB HBM3");
                t->gpus[i].numa = 0;
                for (unsigned j = 0; j < 4; j++)
                        if (i != j)
                                *topo_pair_mut(t, i, j) = (struct topo_pair){ .link = TOPO_LINK_NVLINK,
                                                                              .links = 18 };
                t->nic_links[i] = i >= 2 ? TOPO_LINK_PIX : TOPO_LINK_NODE;
        }
        topo_finish(t);
        t->nvswitch = true;
        c = score_class_new(t, NULL);
        topo_mask_fill(&free, 4);
        assert_int_equal(score_best(c, &free, &req, &x, NULL), 0);
        assert_true(x.set.w[0] == 0xc);
        assert_int_equal(x.nic_gpus, 2);
}

/* --- node priority --------------------------------------------------------------------------- */

static void
score_node_priority_prefers_tight_fits_and_fast_sets(void **state)
{
        static const int numa[] = { 0, 0, 0, 0, 1, 1, 1, 1 };
        CLEANUP(topo_unrefp) struct topo *t = uniform(8, (struct cell)NV(18), "NVIDIA H100 80GB HBM3",
                                                     numa, true);
        CLEANUP(score_class_unrefp) struct score_class *c = score_class_new(t, NULL);
        struct score_request req = { .count = 2 };
        struct topo_mask empty, busy6, one;
        struct score_choice a, b;
        int pa, pb;

        topo_mask_fill(&empty, 8);
        busy6 = mask_bits(0xc0); /* only 6,7 free: an exact fit */
        assert_int_equal(score_best(c, &empty, &req, &a, NULL), 0);
        assert_int_equal(score_best(c, &busy6, &req, &b, NULL), 0);
        pa = score_node_priority(c, &empty, &a);
        pb = score_node_priority(c, &busy6, &b);
        assert_in_range(pa, 0, 10);
        assert_in_range(pb, 0, 10);
        assert_true(pb > pa);
        /* docs/scoring.md section 6's example, and its terms' weights summing to 1. */
        assert_int_equal(pa, 8);
        assert_int_equal(pb, 10);
        assert_true(fabs(score__prio_weight_sum() - 1.0) < 1e-12);

        /* a slower set on the same node scores lower than the best one */
        CLEANUP(topo_unrefp) struct topo *p = load_file("dgx1-v100-sxm2-oneflow.txt");
        CLEANUP(score_class_unrefp) struct score_class *cp = score_class_new(p, NULL);
        static const unsigned slow[] = { 1, 2, 3, 5 };
        struct topo_mask slow_set = mask_of(slow, 4);
        req.count = 4;
        one = mask_bits(0xee);
        assert_int_equal(score_best(cp, &one, &req, &a, NULL), 0);
        assert_int_equal(score_evaluate(cp, &slow_set, &one, &b), 0);
        assert_true(score_node_priority(cp, &one, &a) > score_node_priority(cp, &one, &b));
}

/* --- brute force cross-check ------------------------------------------------------------------ */

static bool
feq(double a, double b)
{
        return fabs(a - b) <= 1e-9 * MAX(1.0, fabs(b));
}

/* The documented order, written out independently: <0 when a ranks first. */
static int
brute_cmp(const struct score_choice *a, const struct score_choice *b)
{
        if (!feq(a->busbw_gbps, b->busbw_gbps))
                return a->busbw_gbps > b->busbw_gbps ? -1 : 1;
        if (a->numa_spanned != b->numa_spanned)
                return a->numa_spanned < b->numa_spanned ? -1 : 1;
        if (a->nic_gpus != b->nic_gpus)
                return a->nic_gpus > b->nic_gpus ? -1 : 1;
        if (!feq(a->frag_left, b->frag_left))
                return a->frag_left > b->frag_left ? -1 : 1;
        for (unsigned i = 0; i < a->n; i++)
                if (nth_gpu(a, i) != nth_gpu(b, i))
                        return nth_gpu(a, i) < nth_gpu(b, i) ? -1 : 1;
        return 0;
}

/* Every k-subset of free, evaluated one by one. */
static void
brute_best(struct score_class *c, uint64_t free, unsigned k, struct score_choice *ret)
{
        struct topo_mask fm = mask_bits(free);
        bool have = false;

        for (uint64_t s = free;; s = (s - 1) & free) {
                if ((unsigned)__builtin_popcountll(s) == k) {
                        struct topo_mask sm = mask_bits(s);
                        struct score_choice x;
                        assert_int_equal(score_evaluate(c, &sm, &fm, &x), 0);
                        if (!have || brute_cmp(&x, ret) < 0) {
                                *ret = x;
                                have = true;
                        }
                }
                if (s == 0)
                        break;
        }
        assert_true(have);
}

static void
cross_check(const char *what, struct topo *t, const uint64_t *masks, size_t n_masks)
{
        CLEANUP(score_class_unrefp) struct score_class *c = score_class_new(t, NULL);

        assert_non_null(c);
        for (size_t m = 0; m < n_masks; m++) {
                unsigned n_free = (unsigned)__builtin_popcountll(masks[m]);
                for (unsigned k = 1; k <= n_free; k++) {
                        struct score_request req = { .count = k };
                        struct topo_mask fm = mask_bits(masks[m]);
                        struct score_choice got, want = { 0 };

                        assert_int_equal(score_best(c, &fm, &req, &got, NULL), 0);
                        brute_best(c, masks[m], k, &want);
                        if (!topo_mask_equal(&got.set, &want.set))
                                fail_msg("%s: free 0x%llx k %u: search 0x%llx (%.2f GB/s numa %u nic %u "
                                         "frag %.4f), brute force 0x%llx (%.2f numa %u nic %u frag %.4f)",
                                         what, (unsigned long long)masks[m], k,
                                         (unsigned long long)got.set.w[0], got.busbw_gbps,
                                         got.numa_spanned, got.nic_gpus, got.frag_left,
                                         (unsigned long long)want.set.w[0], want.busbw_gbps,
                                         want.numa_spanned, want.nic_gpus, want.frag_left);
                }
        }
}

static void
score_best_matches_brute_force_on_every_real_matrix(void **state)
{
        char dir_path[512];
        uint64_t masks[256];
        unsigned eight = 0, small = 0;
        struct dirent *de;
        DIR *dir;

        for (unsigned m = 0; m < 256; m++)
                masks[m] = m;
        dir = opendir(test_data_path("topologies", dir_path, sizeof(dir_path)));
        assert_non_null(dir);
        while ((de = readdir(dir))) {
                size_t len = strlen(de->d_name);
                if (len < 4 || strcmp(de->d_name + len - 4, ".txt") != 0)
                        continue;
                CLEANUP(topo_unrefp) struct topo *t = load_file(de->d_name);
                if (!t)
                        continue; /* a damaged post the parser rightly refuses */
                assert_true(t->n_gpus <= 16);
                if (t->n_gpus > 8)
                        continue;
                /* every free mask of the node's GPUs, every request size */
                cross_check(de->d_name, t, masks, (size_t)1 << t->n_gpus);
                if (t->n_gpus == 8)
                        eight++;
                else
                        small++;
        }
        closedir(dir);
        /* 17 of the files are 8-GPU nodes, two of them PARTIAL posts cut inside the matrix */
        assert_true(eight >= 15);
        assert_true(small >= 8);
}

static void
score_best_matches_brute_force_when_twin_classes_interleave(void **state)
{
        /* NUMA by GPU parity (interleaved, as on some PCIe servers): GPUs 0,2,4,6 are twins
         * but not a contiguous range, so ties must be broken by index explicitly. */
        static const int numa[] = { 0, 1, 0, 1, 0, 1, 0, 1 };
        struct cell upper[28];
        uint64_t masks[256];
        unsigned k = 0;

        for (unsigned i = 0; i < 8; i++)
                for (unsigned j = i + 1; j < 8; j++)
                        upper[k++] = numa[i] == numa[j] ? (struct cell)LK(NODE) : (struct cell)LK(SYS);
        CLEANUP(topo_unrefp) struct topo *t = literal(8, upper, "NVIDIA A100-PCIE-40GB", numa);
        for (unsigned m = 0; m < 256; m++)
                masks[m] = m;
        cross_check("interleaved", t, masks, ELEMENTSOF(masks));
}

/* DGX-2: 16 V100s, each with 6 NVLinks into 12 NVSwitches (hwloc nvidiaDGX2.xml: 25,000
 * MB/s per link), so every pair is NV6 through the fabric.  The nvidia-smi post is
 * PARTIAL: rows 0-3 show GPUs 0-3 with CPUs 0-23,48-71 and NICs mlx5_0/1 at PIX/PXB; the
 * full node has two sockets of 8 GPUs and a NIC pair per 4 GPUs, built here. */
static struct topo *
dgx2(void)
{
        struct topo *t = topo_new(16, 8);

        for (unsigned i = 0; i < 16; i++) {
                snprintf(t->gpus[i].model, sizeof(t->gpus[i].model), "Tesla V100-SXM3-32GB");
                t->gpus[i].numa = i < 8 ? 0 : 1;
                for (unsigned j = 0; j < 16; j++)
                        if (i != j)
                                *topo_pair_mut(t, i, j) = (struct topo_pair){ .link = TOPO_LINK_NVLINK,
                                                                              .links = 6 };
                for (unsigned nic = 0; nic < 8; nic++)
                        t->nic_links[nic * 16 + i] =
                                nic / 2 == i / 4 ? (nic % 2 == (i / 2) % 2 ? TOPO_LINK_PIX : TOPO_LINK_PXB)
                                : (nic / 4 == i / 8) ? TOPO_LINK_NODE : TOPO_LINK_SYS;
        }
        topo_finish(t);
        t->nvswitch = true;
        return t;
}

static void
score_best_matches_brute_force_on_a_dgx2_class_node(void **state)
{
        CLEANUP(topo_unrefp) struct topo *t = dgx2();
        uint64_t masks[2048], x = 0x2545f4914f6cdd1dull;

        /* sampled free masks (xorshift, fixed seed), 6..12 free GPUs so brute force stays quick */
        for (size_t m = 0; m < ELEMENTSOF(masks);) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                uint64_t mask = x & 0xffff;
                unsigned n = (unsigned)__builtin_popcountll(mask);
                if (n >= 6 && n <= 12)
                        masks[m++] = mask;
        }
        masks[0] = 0xffff & 0x0fff; /* and the structured ones */
        masks[1] = 0xf0f0;
        masks[2] = 0x0ff0;
        cross_check("dgx2", t, masks, ELEMENTSOF(masks));
}

static void
score_large_nvswitch_domain_picks_whole_numa_nodes(void **state)
{
        /* 72 B200-class GPUs on one NVSwitch domain, 4 GPUs per Grace (NUMA) */
        int numa[72];
        for (unsigned i = 0; i < 72; i++)
                numa[i] = (int)(i / 4);
        CLEANUP(topo_unrefp) struct topo *t = uniform(72, (struct cell)NV(18), "NVIDIA GB200", numa, true);
        CLEANUP(score_class_unrefp) struct score_class *c = score_class_new(t, NULL);
        struct score_request req = { .count = 8 };
        struct topo_mask free;
        struct score_choice x;

        topo_mask_fill(&free, 72);
        topo_mask_unset(&free, 1); /* NUMA 0 has 3 free */
        assert_int_equal(score_best(c, &free, &req, &x, NULL), 0);
        assert_int_equal(x.numa_spanned, 2);
        assert_true(fabs(x.busbw_gbps - 900.0) < 0.01);
        assert_int_equal(nth_gpu(&x, 0), 4); /* NUMA 1 and 2 whole, lowest index */
        assert_int_equal(nth_gpu(&x, 7), 11);
}

/* --- memo -------------------------------------------------------------------------------------- */

struct thread_arg {
        struct score_class *c;
        uint64_t got[64];
};

static void *
worker(void *p)
{
        struct thread_arg *a = p;

        for (unsigned r = 0; r < 4; r++)
                for (unsigned m = 0; m < 64; m++) {
                        struct topo_mask free = mask_bits(0xff & ~(uint64_t)m);
                        struct score_request req = { .count = 2 };
                        struct score_choice x;
                        a->got[m] = score_best(a->c, &free, &req, &x, NULL) == 0 ? x.set.w[0] : 0;
                }
        return NULL;
}

static void
score_memo_is_shared_safely_between_threads(void **state)
{
        CLEANUP(topo_unrefp) struct topo *t = load_file("dgx1-v100-sxm2-oneflow.txt");
        CLEANUP(score_class_unrefp) struct score_class *c = score_class_new(t, NULL);
        struct thread_arg args[4];
        pthread_t th[4];
        struct score_memo_stats st;

        for (unsigned i = 0; i < 4; i++) {
                args[i] = (struct thread_arg){ .c = c };
                assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
        }
        for (unsigned i = 0; i < 4; i++)
                assert_int_equal(pthread_join(th[i], NULL), 0);
        for (unsigned i = 1; i < 4; i++)
                assert_memory_equal(args[i].got, args[0].got, sizeof(args[0].got));
        score_class_memo_stats(c, &st);
        assert_true(st.hits > 0);
        assert_true(st.entries > 0 && st.entries <= SCORE_MEMO_MAX_ENTRIES);
}

static void
score_memo_stays_bounded(void **state)
{
        CLEANUP(topo_unrefp) struct topo *t = uniform(16, (struct cell)NV(6), "Tesla V100-SXM3-32GB",
                                                     NULL, true);
        CLEANUP(score_class_unrefp) struct score_class *c = score_class_new(t, NULL);
        struct score_memo_stats st;

        for (uint64_t m = 1; m < 3 * SCORE_MEMO_MAX_ENTRIES; m++) {
                struct topo_mask free = mask_bits(m);
                struct score_request req = { .count = 1 };
                struct score_choice x;
                assert_int_equal(score_best(c, &free, &req, &x, NULL), 0);
                assert_true(topo_mask_test(&free, nth_gpu(&x, 0)));
        }
        score_class_memo_stats(c, &st);
        assert_true(st.entries == SCORE_MEMO_MAX_ENTRIES);
}

static void
score_evaluate_rejects_empty_and_out_of_range_sets(void **state)
{
        CLEANUP(topo_unrefp) struct topo *t = uniform(4, (struct cell)NV(4), "NVIDIA A100-SXM4-80GB",
                                                     NULL, false);
        CLEANUP(score_class_unrefp) struct score_class *c = score_class_new(t, NULL);
        struct score_choice x = { .n = 77 };
        struct topo_mask empty = mask_bits(0), past = mask_bits(0x11);

        assert_int_equal(score_evaluate(c, &empty, NULL, &x), -EINVAL);
        assert_int_equal(score_evaluate(c, &past, NULL, &x), -EINVAL);
        assert_int_equal(x.n, 77); /* untouched */
        assert_int_equal(score_best_ring(c, &past, NULL, NULL), -EINVAL);
}

static void
score_top_lists_the_best_first_then_runner_ups_in_rank_order(void **state)
{
        CLEANUP(topo_unrefp) struct topo *t = load_file("dgx1-v100-sxm2-oneflow.txt");
        CLEANUP(score_class_unrefp) struct score_class *c = score_class_new(t, NULL);
        struct score_request req = { .count = 4 };
        struct topo_mask free = mask_bits(0xee);
        struct score_choice top[8], best;
        int n;

        assert_int_equal(score_best(c, &free, &req, &best, NULL), 0);
        n = score_top(c, &free, &req, top, ELEMENTSOF(top), NULL);
        assert_int_equal(n, 8);
        assert_true(topo_mask_equal(&top[0].set, &best.set));
        for (int i = 1; i < n; i++) {
                assert_false(topo_mask_equal(&top[i].set, &top[i - 1].set));
                assert_true(top[i].busbw_gbps <= top[i - 1].busbw_gbps + 1e-9);
        }
        /* k = 0 asks for nothing; a bad request is refused */
        assert_int_equal(score_top(c, &free, &req, top, 0, NULL), 0);
        req.count = 0;
        assert_int_equal(score_top(c, &free, &req, top, 4, NULL), -EINVAL);
}

static void
score_never_places_on_unhealthy_gpus(void **state)
{
        CLEANUP(topo_unrefp) struct topo *t = uniform(4, (struct cell)NV(4), "NVIDIA A100-SXM4-80GB",
                                                     NULL, false);
        CLEANUP(score_class_unrefp) struct score_class *c = NULL;
        struct score_request req = { .count = 2 };
        struct topo_mask free;
        struct score_choice x;
        const char *why = NULL;

        t->gpus[0].healthy = false;
        t->gpus[2].healthy = false;
        c = score_class_new(t, NULL);
        topo_mask_fill(&free, 4);
        assert_int_equal(score_best(c, &free, &req, &x, NULL), 0);
        assert_true(x.set.w[0] == 0xa);
        req.count = 3;
        assert_int_equal(score_best(c, &free, &req, &x, &why), -ENOSPC);
        assert_non_null(strstr(why, "healthy"));
}

static void
score_class_refuses_a_mix_over_its_cap(void **state)
{
        CLEANUP(topo_unrefp) struct topo *t = uniform(2, (struct cell)NV(4), "NVIDIA A100-SXM4-80GB",
                                                     NULL, false);
        struct score_config cfg;
        struct score_class *c;

        score_config_default(&cfg);
        cfg.n_sizes = SCORE_MAX_SIZES + 1;
        assert_null(score_class_new(t, &cfg));
        cfg.n_sizes = 4;
        cfg.weight_of[1] = -1;
        assert_null(score_class_new(t, &cfg));
        cfg.weight_of[1] = NAN;
        assert_null(score_class_new(t, &cfg));
        cfg.weight_of[1] = 0.2;
        cfg.size_of[2] = 0;
        assert_null(score_class_new(t, &cfg));
        cfg.n_sizes = 1; /* only 2-GPU jobs matter */
        cfg.size_of[0] = 2;
        cfg.weight_of[0] = 1.0;
        c = score_class_new(t, &cfg);
        assert_non_null(c);
        assert_ptr_equal(score_class_ref(c), c);
        assert_null(score_class_unref(c));
        assert_null(score_class_unref(c));
}

int
main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(score_pair_bandwidth_follows_the_documented_constants),
                cmocka_unit_test(score_ring_is_as_fast_as_its_slowest_hop),
                cmocka_unit_test(score_packs_link_disjoint_rings_on_nvlink_meshes),
                cmocka_unit_test(score_nvswitch_ports_are_shared_by_all_peers),
                cmocka_unit_test(score_single_gpu_sets_have_no_communication),
                cmocka_unit_test(score_dgx1_with_0_and_4_busy_returns_an_all_nvlink_ring),
                cmocka_unit_test(score_constraints_fail_with_the_right_code_and_reason),
                cmocka_unit_test(score_require_parses_names_and_rejects_others),
                cmocka_unit_test(score_ties_break_by_numa_then_nic_then_fragmentation_then_index),
                cmocka_unit_test(score_nic_affinity_breaks_ties_before_fragmentation),
                cmocka_unit_test(score_node_priority_prefers_tight_fits_and_fast_sets),
                cmocka_unit_test(score_best_matches_brute_force_on_every_real_matrix),
                cmocka_unit_test(score_best_matches_brute_force_when_twin_classes_interleave),
                cmocka_unit_test(score_best_matches_brute_force_on_a_dgx2_class_node),
                cmocka_unit_test(score_large_nvswitch_domain_picks_whole_numa_nodes),
                cmocka_unit_test(score_memo_is_shared_safely_between_threads),
                cmocka_unit_test(score_memo_stays_bounded),
                cmocka_unit_test(score_evaluate_rejects_empty_and_out_of_range_sets),
                cmocka_unit_test(score_top_lists_the_best_first_then_runner_ups_in_rank_order),
                cmocka_unit_test(score_never_places_on_unhealthy_gpus),
                cmocka_unit_test(score_class_refuses_a_mix_over_its_cap),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
