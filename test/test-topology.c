/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for topology/: every real matrix in test/data/topologies (expected shape, spot-checked
 * links, or the expected "damaged post" error), the annotation round trip on each, the
 * 72-GPU size budget, hostile inputs to every parser, and the derived fields, names, masks
 * and fingerprint.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "topo-private.h"
#include "topo-test-util.h"
#include "topo.h"

/* A pair as its annotation code ("NV12", "XGMIw15h1"), for readable expectations. */
static const char *
cell(const struct topo_pair *p, char *buf, size_t size)
{
        int n = snprintf(buf, size, "%s", topo_link_to_string((enum topo_link)p->link));
        if (p->links)
                n += snprintf(buf + n, size - (size_t)n, "%u", p->links);
        if (p->weight)
                n += snprintf(buf + n, size - (size_t)n, "w%u", p->weight);
        if (p->hops)
                snprintf(buf + n, size - (size_t)n, "h%u", p->hops);
        return buf;
}

struct pair_check {
        int a, b;
        const char *cell;
};
struct nic_check {
        int nic, gpu;
        const char *link;
        const char *name; /* NULL: not checked */
};
struct gpu_check {
        int gpu;
        int numa;
        const char *cpus;  /* NULL: not checked */
        const char *model; /* NULL: not checked */
};

#define N_CHECKS 4

static const struct shared_case {
        const char *file;
        const char *error; /* substring of the expected error; NULL when the file loads */
        unsigned gpus, nics, numa;
        bool nvswitch;
        unsigned gen0;
        enum topo_vendor vendor;
        struct pair_check pairs[N_CHECKS];
        struct nic_check nics_at[N_CHECKS];
        struct gpu_check gpu_at[N_CHECKS];
        const char *model; /* applied with topo_set_model() before the checks; NULL: none */
} shared_cases[] = {
        {"a100-2gpu-della-amd.txt", NULL, 2, 2, 2, false, 0, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "SYS"}, {1, 1, "X"}},
         .nics_at = {{0, 0, "NODE", "mlx5_0"}, {1, 1, "NODE", "mlx5_1"}, {1, 0, "SYS"}},
         .gpu_at = {{1, 1, "64-127"}}},
        {"a100-80gb-pcie-8gpu-nvlink-pairs-slurm-PARTIAL.txt", "Matrix cut off at line 15"},
        {"a100-pcie-4gpu-adroit.txt", NULL, 4, 1, 2, false, 0, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NODE"}, {0, 2, "SYS"}, {2, 3, "NODE"}},
         .nics_at = {{0, 2, "SYS", "mlx5_0"}, {0, 1, "NODE"}}, .gpu_at = {{2, 1, "1,3,5,7,9,11"}}},
        {"a100-sxm4-80gb-8nic-roce-deepep.txt", NULL, 8, 8, 2, true, 3, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 7, "NV12"}, {3, 4, "NV12"}},
         .nics_at =
                 {{0, 0, "PXB", "mlx5_0"}, {2, 0, "NODE"}, {4, 0, "SYS"}, {7, 7, "PXB", "mlx5_7"}},
         .gpu_at = {{4, 1, "32-63,96-127"}}},
        {"a800-sxm4-8gpu-4nic.txt", NULL, 8, 4, 2, true, 0, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NV8"}, {6, 7, "NV8"}},
         .nics_at = {{0, 1, "PIX", "mlx5_0"}, {3, 7, "PIX", "mlx5_3"}, {0, 0, "NODE"}}},
        {"alcf-polaris-a100-4gpu-nps4.txt", NULL, 4, 2, 4, false, 3, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 3, "NV4"}, {1, 2, "NV4"}},
         .nics_at = {{0, 3, "PHB", "mlx5_0"}, {1, 1, "PHB", "mlx5_1"}, {1, 0, "SYS"}},
         .gpu_at = {{0, 3, "24-31,56-63"}, {3, 0, "0-7,32-39"}}},
        {"amd-instinct-8gpu-0x74a2-xgmi-ms-swift.txt", NULL, 8, 0, 2, false, 0, TOPO_VENDOR_AMD,
         .pairs = {{0, 1, "XGMIw15h1"}, {7, 0, "XGMIw15h1"}, {5, 5, "X"}},
         .gpu_at = {{3, 0}, {4, 1}}},
        {"amd-mi210-4gpu-archer2-rocm-smi.txt", NULL, 4, 0, 4, false, 0, TOPO_VENDOR_AMD,
         .pairs = {{0, 3, "XGMIw15h1"}}, .gpu_at = {{2, 2}, {3, 3}}},
        {"amd-mi300a-4apu-rocm-smi.txt", NULL, 4, 0, 4, false, 0, TOPO_VENDOR_AMD,
         .pairs = {{1, 2, "XGMIw15h1"}}, .gpu_at = {{1, 1}}},
        {"amd-mi350x-8gpu-xgmi-linktype-only-sglang.txt", NULL, 8, 0, 0, false, 0, TOPO_VENDOR_AMD,
         .pairs = {{0, 7, "XGMI"}, {2, 5, "XGMI"}},
         .gpu_at = {{0, -1, NULL, "AMD Instinct MI350X"}, {7, -1, NULL, "AMD Instinct MI350X"}}},
        {"amd-mi355x-8gpu-xgmi-linktype-only-sglang.txt", NULL, 8, 0, 0, false, 0, TOPO_VENDOR_AMD,
         .pairs = {{0, 7, "XGMI"}, {3, 4, "XGMI"}},
         .gpu_at = {{5, -1, NULL, "AMD Instinct MI355X"}}},
        {"amd-mi300x-8gpu-xgmi-indented-vllm-dstack.txt", NULL, 8, 0, 2, false, 0, TOPO_VENDOR_AMD,
         .pairs = {{0, 7, "XGMIw15h1"}, {3, 4, "XGMIw15h1"}},
         .gpu_at = {{3, 0, NULL, "AMD Instinct MI300X"}, {4, 1}},
         .model = "AMD Instinct MI300X"},
        {"amd-mi50-4gpu-pcie-rocm-smi.txt", NULL, 4, 0, 1, false, 0, TOPO_VENDOR_AMD,
         .pairs = {{0, 1, "PCIEw40h2"}, {2, 3, "PCIEw40h2"}}, .gpu_at = {{3, 0}}},
        {"aws-p4d-24xlarge-a100-nv12.txt", NULL, 8, 0, 2, true, 3, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 7, "NV12"}}, .gpu_at = {{4, 1, "24-47,72-95"}}},
        {"b200-8gpu-16nic-glued-cells-nccl-tests.txt", NULL, 8, 16, 2, true, 5, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 7, "NV18"}, {2, 5, "NV18"}},
         .nics_at = {{4, 0, "PXB", "mlx5_4"},
                     {8, 2, "PXB", "mlx5_8"},
                     {9, 4, "SYS", "mlx5_9"},
                     {15, 7, "PXB", "mlx5_15"}},
         .gpu_at = {{4, 1, "56-111,168-223", "NVIDIA B200"}},
         .model = "NVIDIA B200"},
        {"b200-gke-a4-8gpu-8nic-dranet.txt", NULL, 8, 8, 2, true, 5, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 7, "NV18"}},
         .nics_at = {{1, 0, "PIX", "mlx5_1"}, {2, 0, "NODE"}, {7, 7, "PIX", "mlx5_7"}, {7, 0, "SYS"}},
         .gpu_at = {{6, 1, "56-111,168-223", "NVIDIA B200"}},
         .model = "NVIDIA B200"},
        {"b300-sxm6-8gpu-9nic-ansi-sglang.txt", NULL, 8, 9, 2, true, 5, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 7, "NV18"}, {3, 4, "NV18"}},
         .nics_at = {{0, 0, "PXB", "mlx5_10"},
                     {8, 7, "NODE", "mlx5_bond_0"},
                     {4, 0, "SYS"},
                     {7, 7, "PXB", "mlx5_17"}},
         .gpu_at = {{0, 0, "0-63,128-191", "NVIDIA B300 SXM6 AC"},
                    {7, 1, "64-127,192-255", "NVIDIA B300 SXM6 AC"}}},
        {"dgx-a100-40gb-12nic-PARTIAL.txt", "Matrix cut off at line 9"},
        {"dgx-h100-12nic-talos.txt", NULL, 8, 12, 2, true, 4, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 7, "NV18"}},
         .nics_at = {{0, 0, "PXB", "NIC0"}, {11, 7, "PXB", "NIC11"}, {6, 4, "PXB"}, {6, 0, "SYS"}}},
        {"dgx1-v100-sxm2-32gb-4nic-microway.txt", NULL, 8, 4, 0, false, 2, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NV1"}, {0, 3, "NV2"}, {0, 4, "NV2"}, {0, 5, "SYS"}},
         .nics_at = {{1, 4, "PIX", "mlx5_2"}, {2, 2, "PIX", "mlx5_1"}},
         .gpu_at = {{0, -1, "0-19,40-59", "Tesla V100-SXM2-32GB"},
                    {7, -1, "20-39,60-79", "Tesla V100-SXM2-32GB"},
                    {3, -1, NULL, ""}}},
        {"dgx1-v100-sxm2-oneflow.txt", NULL, 8, 1, 0, false, 2, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NV1"}, {0, 3, "NV2"}, {1, 5, "NV2"}, {3, 4, "SYS"}},
         .nics_at = {{0, 2, "PIX", "mlx5_0"}, {0, 0, "NODE"}}},
        {"dgx2-v100-16gpu-nv6-10nic-PARTIAL.txt", "Matrix cut off at line 10"},
        {"gb200-tray-4gpu-8nic-gpu-numa-id.txt", NULL, 4, 8, 0, true, 5, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 3, "NV18"}, {1, 2, "NV18"}},
         .nics_at = {{2, 0, "SYS", "mlx5_2"}, {7, 3, "SYS", "mlx5_7"}},
         .gpu_at = {{0, -1, "0-71", "NVIDIA GB200"}, {3, -1, "72-143"}},
         .model = "NVIDIA GB200"},
        {"gb200-tray-4gpu-8nic-openshift-rhel4nv.txt", NULL, 4, 8, 0, true, 5, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NV18"}},
         .nics_at = {{0, 0, "SYS", "mlx5_0"}, {7, 3, "SYS", "mlx5_7"}},
         .gpu_at = {{2, -1, "72-143", "NVIDIA GB200"}},
         .model = "NVIDIA GB200"},
        {"h100-nvl-4gpu-2pairs-openstack-vm-genestack.txt", NULL, 4, 0, 0, false, 4,
         TOPO_VENDOR_NVIDIA, .pairs = {{0, 1, "NV12"}, {0, 2, "PHB"}, {2, 3, "NV12"}},
         .gpu_at = {{3, -1, NULL, "NVIDIA H100 NVL"}},
         .model = "NVIDIA H100 NVL"},
        {"h100-80gb-hbm3-1gpu-vm-driver580-capture.txt", NULL, 1, 0, 1, false, 0, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 0, "X"}}, .gpu_at = {{0, 0, "0-15", "NVIDIA H100 80GB HBM3"}},
         .model = "NVIDIA H100 80GB HBM3"},
        {"h100-sxm-4gpu-container-phb.txt", NULL, 4, 8, 1, true, 4, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NV18"}}, .nics_at = {{7, 3, "PHB", "mlx5_7"}}},
        {"h100-sxm5-8gpu-kvm-1nic-indented-vllm-dstack.txt", NULL, 8, 1, 2, true, 4,
         TOPO_VENDOR_NVIDIA, .pairs = {{0, 7, "NV18"}, {3, 4, "NV18"}},
         .nics_at = {{0, 0, "SYS", "mlx5_0"}, {0, 7, "SYS", "mlx5_0"}},
         .gpu_at = {{0, 0, "0-103", "NVIDIA H100 80GB HBM3"},
                    {7, 1, "104-207", "NVIDIA H100 80GB HBM3"}}},
        {"h100-sxm-8gpu-12nic-hpe-xd670-noleadtab.txt", NULL, 8, 12, 2, true, 4, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 7, "NV18"}, {3, 4, "NV18"}},
         .nics_at = {{0, 0, "PIX", "mlx5_0"},
                     {1, 0, "PXB", "mlx5_1"},
                     {4, 0, "NODE", "mlx5_4"},
                     {11, 0, "SYS", "mlx5_11"}},
         .gpu_at = {{5, 1, "56-111,168-223", "NVIDIA H100 80GB HBM3"}},
         .model = "NVIDIA H100 80GB HBM3"},
        {"h20-3e-8gpu-11nic-bond-sglang.txt", NULL, 8, 11, 2, true, 4, TOPO_VENDOR_NVIDIA,
         .pairs = {{1, 6, "NV18"}},
         .nics_at = {{0, 0, "PIX", "mlx5_0"},
                     {8, 6, "PIX", "mlx5_8"},
                     {9, 6, "NODE", "mlx5_11"},
                     {10, 0, "SYS", "mlx5_bond_0"}},
         .gpu_at = {{5, 1, "48-95,144-191", "NVIDIA H20-3e"}}},
        {"h20-3e-8gpu-2nic-pd-decode-sglang.txt", NULL, 8, 2, 2, true, 4, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 4, "NV18"}},
         .nics_at = {{0, 0, "PIX", "mlx5_0"}, {1, 0, "PIX", "mlx5_1"}, {0, 1, "NODE"}, {1, 4, "SYS"}},
         .gpu_at = {{4, 1, "48-95,144-191", "NVIDIA H20-3e"}}},
        {"h20-8gpu-36nic-sriov-sglang.txt", NULL, 8, 36, 2, true, 4, TOPO_VENDOR_NVIDIA,
         .pairs = {{2, 5, "NV18"}},
         .nics_at = {{12, 0, "NODE", "mlx5_12"},
                     {13, 2, "PIX", "mlx5_13"},
                     {35, 0, "PIX", "mlx5_bond_3"},
                     {32, 4, "PIX", "mlx5_bond_0"}},
         .gpu_at = {{4, 1, "70-99,102-107"}}},
        {"h200-hgx-10nic-nchc-nano4.txt", NULL, 8, 10, 2, true, 4, TOPO_VENDOR_NVIDIA,
         .pairs = {{3, 4, "NV18"}},
         .nics_at = {{0, 0, "PIX", "mlx5_0"}, {1, 0, "NODE"}, {9, 7, "PIX", "mlx5_9"}},
         .gpu_at = {{0, 0, ""}, {4, 1, "56"}}},
        {"h200-hgx-8gpu-12nic-distributedai.txt", NULL, 8, 12, 2, true, 4, TOPO_VENDOR_NVIDIA,
         .pairs = {{1, 6, "NV18"}},
         .nics_at = {{0, 0, "PXB", "mlx5_0"},
                     {1, 0, "NODE", "mlx5_1"},
                     {6, 4, "PXB", "mlx5_6"},
                     {11, 7, "PXB", "mlx5_11"}},
         .gpu_at = {{3, 0, "0-55,112-167", "NVIDIA H200"}},
         .model = "NVIDIA H200"},
        {"h800-sxm-8gpu-9nic-sglang.txt", NULL, 8, 9, 2, true, 0, TOPO_VENDOR_NVIDIA,
         .pairs = {{1, 6, "NV8"}},
         .nics_at = {{8, 0, "NODE", "mlx5_bond_0"}, {1, 1, "PIX", "mlx5_3"}, {8, 4, "SYS"}}},
        {"hgx-a100-4gpu-sxm4-nv4-della.txt", NULL, 4, 1, 2, false, 3, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 3, "NV4"}}, .nics_at = {{0, 2, "SYS", "mlx5_0"}, {0, 1, "NODE"}}},
        {"hgx-h100-13nic-mlx5ib-eth-penny.txt", NULL, 8, 13, 2, true, 4, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NV18"}},
         .nics_at = {{1, 0, "PXB", "mlx5_ib1"}, {12, 4, "NODE", "mlx5_eth4"}}},
        {"hgx-nv18-8gpu-12nic-cpuset-mooncake.txt", NULL, 8, 12, 2, true, 4, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NV18"}}, .nics_at = {{2, 0, "PIX", "mlx5_2"}, {11, 7, "PIX", "mlx5_11"}},
         .gpu_at = {{0, 0, "4,6,8,10,12"}, {7, 1, "1,3,5,7,9,11"}}},
        {"hgx-nv18-8gpu-single-numa-12nic.txt", NULL, 8, 12, 1, true, 4, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NV18"}}, .nics_at = {{0, 0, "PIX"}}, .gpu_at = {{7, 0, "0-191"}}},
        {"princeton-traverse-ac922-v100-nv3.txt", NULL, 4, 4, 2, false, 2, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NV3"}, {0, 2, "SYS"}, {2, 3, "NV3"}},
         .nics_at = {{0, 0, "NODE", "mlx5_0"}, {3, 0, "SYS", "mlx5_3"}},
         .gpu_at = {{2, 8, "64-127"}}},
        {"rtx3090-2gpu-nvlink-bridge-workstation.txt", NULL, 2, 0, 1, false, 3, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NV4"}}, .gpu_at = {{0, 0, "4,6,9,15,17", "NVIDIA GeForce RTX 3090"}}},
        {"rtx4090-8gpu-pcie-server.txt", NULL, 8, 2, 2, false, 0, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "SYS"}, {6, 7, "SYS"}},
         .nics_at = {{0, 6, "PHB", "NIC0"}, {1, 0, "SYS", "NIC1"}}},
        {"rtx5090-2gpu-workstation-p2p.txt", NULL, 2, 0, 1, false, 0, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "PHB"}}},
        {"rtx5090-8gpu-2nic-pd-prefill-sglang.txt", NULL, 8, 2, 2, false, 0, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NODE"}, {3, 4, "SYS"}, {6, 7, "NODE"}},
         .nics_at = {{0, 0, "NODE", "mlx5_0"}, {1, 7, "SYS", "mlx5_1"}},
         .gpu_at = {{4, 1, "128-255,384-511", "NVIDIA GeForce RTX 5090"}}},
        {"rtx6000-ada-4gpu-4nic-asus-esc8000a-stelline.txt", NULL, 4, 4, 2, false, 0,
         TOPO_VENDOR_NVIDIA, .pairs = {{0, 1, "NODE"}, {0, 2, "SYS"}, {2, 3, "NODE"}},
         .nics_at = {{0, 0, "NODE", "mlx5_0"},
                     {1, 1, "NODE", "mlx5_1"},
                     {2, 0, "SYS", "mlx5_2"},
                     {3, 3, "NODE", "mlx5_3"}},
         .gpu_at = {{2, 1, "32-63", "NVIDIA RTX 6000 Ada Generation"}},
         .model = "NVIDIA RTX 6000 Ada Generation"},
        {"tesla-k80-x2-mlx4-old-legend.txt", NULL, 4, 1, 0, false, 0, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "PIX"}, {0, 2, "PHB"}, {2, 3, "PIX"}},
         .nics_at = {{0, 0, "PHB", "mlx4_0"}}, .gpu_at = {{3, -1, "0-11"}}},
        {"tesla-p4-single-gpu-numa-na-hami.txt", NULL, 1, 0, 0, false, 0, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 0, "X"}}, .gpu_at = {{0, -1, "0-7"}}},
        {"v100-sxm2-32gb-8gpu-vastai-newdriver.txt", NULL, 8, 1, 2, false, 2, TOPO_VENDOR_NVIDIA,
         .pairs = {{0, 1, "NV1"}, {0, 3, "NV2"}, {4, 0, "NV2"}},
         .nics_at = {{0, 0, "NODE", "mlx5_2"}, {0, 7, "SYS"}},
         .gpu_at = {{0, 0, "0-19,40-59", "Tesla V100-SXM2-32GB"}}},
};

static struct topo *
load_shared(const char *file, int *ret_r, struct topo_error *err)
{
        char rel[256];
        size_t len = 0;
        struct topo *t = NULL;

        snprintf(rel, sizeof(rel), "topologies/%s", file);
        char *text = read_test_data(rel, &len);
        assert_non_null(text);
        *ret_r = topo_parse_any(text, len, &t, err);
        free(text);
        return t;
}

static void
topo_parses_every_shared_matrix_as_expected(void **state)
{
        for (size_t c = 0; c < ELEMENTSOF(shared_cases); c++) {
                const struct shared_case *sc = &shared_cases[c];
                struct topo_error err = {0};
                char buf[32];
                int r;
                struct topo *t = load_shared(sc->file, &r, &err);

                print_message("# %s\n", sc->file);
                if (t && sc->model)
                        topo_set_model(t, sc->model);
                if (sc->error) {
                        assert_int_equal(r, -EINVAL);
                        assert_null(t);
                        assert_non_null(strstr(err.msg, sc->error));
                        assert_true(err.line > 0);
                        continue;
                }
                assert_int_equal(r, 0);
                assert_int_equal(t->n_gpus, sc->gpus);
                assert_int_equal(t->n_nics, sc->nics);
                assert_int_equal(t->n_numa, sc->numa);
                assert_int_equal(t->nvswitch, sc->nvswitch);
                assert_int_equal(t->vendor, sc->vendor);
                assert_int_equal(t->gpus[0].nvlink_gen, sc->gen0);
                for (size_t k = 0; k < N_CHECKS && sc->pairs[k].cell; k++) {
                        const struct pair_check *p = &sc->pairs[k];
                        assert_string_equal(cell(topo_pair(t, (unsigned)p->a, (unsigned)p->b), buf,
                                                 sizeof(buf)),
                                            p->cell);
                        assert_string_equal(cell(topo_pair(t, (unsigned)p->b, (unsigned)p->a), buf,
                                                 sizeof(buf)),
                                            p->cell);
                }
                for (size_t k = 0; k < N_CHECKS && sc->nics_at[k].link; k++) {
                        const struct nic_check *n = &sc->nics_at[k];
                        assert_string_equal(topo_link_to_string(topo_nic_link(t, (unsigned)n->nic,
                                                                              (unsigned)n->gpu)),
                                            n->link);
                        if (n->name)
                                assert_string_equal(t->nics[n->nic].name, n->name);
                }
                for (size_t k = 0; k < N_CHECKS; k++) {
                        const struct gpu_check *g = &sc->gpu_at[k];
                        /* An all-zero row is an unused slot. */
                        if (!g->cpus && !g->model && g->numa == 0 && g->gpu == 0)
                                continue;
                        assert_int_equal(t->gpus[g->gpu].numa, g->numa);
                        if (g->cpus)
                                assert_string_equal(t->gpus[g->gpu].cpu_affinity, g->cpus);
                        if (g->model)
                                assert_string_equal(t->gpus[g->gpu].model, g->model);
                }
                topo_unref(t);
        }
}

static void
topo_annotation_round_trips_every_shared_matrix(void **state)
{
        unsigned loaded = 0;

        for (size_t c = 0; c < ELEMENTSOF(shared_cases); c++) {
                struct topo_error err = {0};
                struct topo *t2 = NULL;
                char *json = NULL;
                size_t len = 0;
                int r;
                struct topo *t = load_shared(shared_cases[c].file, &r, &err);

                if (shared_cases[c].error)
                        continue;
                assert_int_equal(r, 0);
                assert_int_equal(topo_to_annotation(t, &json, &len), 0);
                assert_int_equal(strlen(json), len);
                assert_int_equal(topo_detect_format(json, len), TOPO_FORMAT_ANNOTATION);
                r = topo_parse_annotation(json, len, &t2, &err);
                if (r < 0)
                        print_message("# %s: %s\n", shared_cases[c].file, err.msg);
                assert_int_equal(r, 0);
                assert_true(topo_equal(t, t2));
                assert_true(topo_class_hash(t) == topo_class_hash(t2));
                /* And once more: the encoding is canonical. */
                char *json2 = NULL;
                size_t len2 = 0;
                assert_int_equal(topo_to_annotation(t2, &json2, &len2), 0);
                assert_string_equal(json, json2);
                free(json);
                free(json2);
                topo_unref(t);
                topo_unref(t2);
                loaded++;
        }
        assert_int_equal(loaded, 45);
}

/* A GB200 NVL72-like NVSwitch domain: 72 GPUs, NV18 everywhere, full identities. */
static struct topo *
make_nvl72(void)
{
        struct topo *t = topo_new(72, 8);

        assert_non_null(t);
        t->vendor = TOPO_VENDOR_NVIDIA;
        t->cpu_link = TOPO_CPU_LINK_ARM_C2C;
        snprintf(t->nvlink_domain, sizeof(t->nvlink_domain), "clique-3f6c2a10-0001");
        snprintf(t->node_name, sizeof(t->node_name), "gb200-rack-07-tray-03");
        for (unsigned i = 0; i < 72; i++) {
                struct topo_gpu *g = &t->gpus[i];
                snprintf(g->uuid, sizeof(g->uuid), "GPU-%08x-1c2d-3e4f-5a6b-7c8d9e0f%04x",
                         0xa1b2c3d4u + i, i);
                snprintf(g->model, sizeof(g->model), "NVIDIA GB200");
                snprintf(g->pci_bus_id, sizeof(g->pci_bus_id), "00000009:%02x:00.0", i + 1);
                snprintf(g->cpu_affinity, sizeof(g->cpu_affinity), "%u-%u", (i / 2) * 72,
                         (i / 2) * 72 + 71);
                g->memory_mib = 189471;
                g->numa = (int)(i / 2);
                g->pcie_gen = 5;
                g->pcie_width = 16;
                g->mig = TOPO_MIG_DISABLED;
                for (unsigned j = 0; j < 72; j++)
                        if (i != j)
                                *topo_pair_mut(t, i, j) = (struct topo_pair){TOPO_LINK_NVLINK, 18};
        }
        for (unsigned k = 0; k < 8; k++) {
                snprintf(t->nics[k].name, TOPO_ID_MAX, "mlx5_%u", k);
                t->nics[k].numa = (int)k;
                for (unsigned j = 0; j < 72; j++)
                        t->nic_links[k * 72 + j] = j / 9 == k ? TOPO_LINK_PIX : TOPO_LINK_SYS;
        }
        topo_finish(t);
        return t;
}

static void
topo_annotation_of_72_gpu_nvswitch_domain_fits_well_inside_the_limit(void **state)
{
        struct topo *t = make_nvl72(), *t2 = NULL;
        struct topo_error err = {0};
        char *json = NULL;
        size_t len = 0;

        assert_true(t->nvswitch);
        assert_int_equal(t->gpus[0].nvlink_gen, 5);
        assert_int_equal(topo_to_annotation(t, &json, &len), 0);
        print_message("# 72-GPU annotation: %zu bytes of %u\n", len, TOPO_MAX_ANNOTATION_BYTES);
        /* "Well inside": at most a quarter of what Kubernetes allows for all annotations. */
        assert_true(len < TOPO_MAX_ANNOTATION_BYTES / 4);
        assert_int_equal(topo_parse_annotation(json, len, &t2, &err), 0);
        assert_true(topo_equal(t, t2));
        free(json);
        topo_unref(t);
        topo_unref(t2);
}

struct hostile_case {
        const char *name;
        char *text;
        size_t len;
        int r;
        const char *msg; /* substring */
};

static char *
repeat(const char *head, const char *unit, unsigned n, const char *tail, size_t *ret_len)
{
        size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
        size_t len = hl + ul * n + tl;
        char *s = malloc(len + 1), *p = s;

        assert_non_null(s);
        memcpy(p, head, hl), p += hl;
        for (unsigned i = 0; i < n; i++)
                memcpy(p, unit, ul), p += ul;
        memcpy(p, tail, tl + 1);
        *ret_len = len;
        return s;
}

static char *
dup_lit(const char *s, size_t *ret_len)
{
        *ret_len = strlen(s);
        return strdup(s);
}

static void
run_hostile(struct hostile_case *cases, size_t n,
            int (*parse)(const char *, size_t, struct topo **, struct topo_error *))
{
        for (size_t i = 0; i < n; i++) {
                struct topo *t = (struct topo *)0x1;
                struct topo_error err = {0};
                int r = parse(cases[i].text, cases[i].len, &t, &err);

                print_message("# %s: %d %u:%u %s\n", cases[i].name, r, err.line, err.column,
                              err.msg);
                assert_int_equal(r, cases[i].r);
                assert_ptr_equal(t, (struct topo *)0x1); /* untouched on failure */
                assert_non_null(strstr(err.msg, cases[i].msg));
                free(cases[i].text);
        }
}

static void
topo_nvsmi_rejects_hostile_inputs(void **state)
{
        static const char garbage[] = "\x7f"
                                      "ELF\x02\x01\x01\xff\xfe\x80GPU0\x01\x02";
        char *big = malloc(TOPO_MAX_TEXT_BYTES + 2);
        struct hostile_case cases[20];
        size_t n = 0;
        char buf[8192];

        assert_non_null(big);
        memset(big, 'A', TOPO_MAX_TEXT_BYTES + 1);
        cases[n++] = (struct hostile_case){"empty", strdup(""), 0, -EINVAL, "No matrix header"};
        cases[n] = (struct hostile_case){"binary garbage", NULL, sizeof(garbage) - 1, -EINVAL,
                                         "No matrix header"};
        cases[n].text = malloc(sizeof(garbage));
        memcpy(cases[n++].text, garbage, sizeof(garbage));
        cases[n] = (struct hostile_case){"NUL bytes", NULL, 20, -EINVAL, "NUL byte"};
        cases[n].text = calloc(1, 21);
        memcpy(cases[n++].text, "\tGPU0\nGPU0\t", 11);
        cases[n++] = (struct hostile_case){"oversized input", big, TOPO_MAX_TEXT_BYTES + 1, -E2BIG,
                                           "larger than"};
        cases[n].text = repeat("\tGPU0\tGPU1\n", "NV1 ", 100000, "\n", &cases[n].len);
        cases[n].name = "huge row";
        cases[n].r = -E2BIG;
        cases[n++].msg = "cells in one line";
        {
                int off = snprintf(buf, sizeof(buf), "\t");
                for (int g = 0; g < 200; g++)
                        off += snprintf(buf + off, sizeof(buf) - (size_t)off, "GPU%d\t", g);
                snprintf(buf + off, sizeof(buf) - (size_t)off, "\n");
                cases[n++] = (struct hostile_case){"200 GPU columns", NULL, 0, -E2BIG,
                                                   "More than 128 GPU columns"};
                cases[n - 1].text = dup_lit(buf, &cases[n - 1].len);
        }
        cases[n].text = dup_lit("\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV1\tNV1\nGPU1\tNV1\t X \n"
                                "GPU2\tNV1\tNV1\t X \n",
                                &cases[n].len);
        cases[n].name = "non-square matrix";
        cases[n].r = -EINVAL;
        cases[n++].msg = "Matrix cut off at line 3: row GPU1 has 2 of 3 cells";
        cases[n].text = dup_lit("\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tSYS\t X \n", &cases[n].len);
        cases[n].name = "asymmetric matrix";
        cases[n].r = -EINVAL;
        cases[n++].msg = "not symmetric";
        cases[n].text = dup_lit("\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tFOO\t X \n", &cases[n].len);
        cases[n].name = "unknown cell";
        cases[n].r = -EINVAL;
        cases[n++].msg = "Unknown cell 'FOO'";
        cases[n].text = dup_lit("\tGPU0\tGPU1\nGPU0\t X \t X \nGPU1\t X \t X \n", &cases[n].len);
        cases[n].name = "X off the diagonal";
        cases[n].r = -EINVAL;
        cases[n++].msg = "X off the diagonal";
        cases[n].text = dup_lit("\tGPU0\tGPU1\n", &cases[n].len);
        cases[n].name = "header only";
        cases[n].r = -EINVAL;
        cases[n++].msg = "the text ends before row GPU0";
        cases[n].text = dup_lit("\tGPU0\tGPU1\nGPU0\t X \tNV99\nGPU1\tNV99\t X \n", &cases[n].len);
        cases[n].name = "NV count beyond the cap";
        cases[n].r = -EINVAL;
        cases[n++].msg = "Cell 'NV99' in row GPU0: NVLink counts are 1 to 64";
        cases[n].text = dup_lit("\tGPU0\tGPU1\tmlx5_0\nGPU0\t X \tPIX\tPIX\nGPU1\tPIX\t X \tSYS\n"
                                "mlx5_0\tSYS\tSYS\t X \n",
                                &cases[n].len);
        cases[n].name = "NIC row contradicting the GPU rows";
        cases[n].r = -EINVAL;
        cases[n++].msg = "the matrix is damaged";
        cases[n].text =
                dup_lit("\tGPU0\tGPU1\nGPU0\t X \tNODENODE\nGPU1\tNODE\t X \n", &cases[n].len);
        cases[n].name = "glued cells past the row end";
        cases[n].r = -EINVAL;
        cases[n++].msg = "runs past the last device column";
        cases[n].text = dup_lit("\tGPU0\tmlx5_0\tmlx5_1\nGPU0\t X \tPIX\tPIX\n"
                                "mlx5_0\tPIX\t X \tPIX\nmlx5_1\tPIX\tSYS\t X \n",
                                &cases[n].len);
        cases[n].name = "asymmetric NIC rows";
        cases[n].r = -EINVAL;
        cases[n++].msg = "mlx5_0 to mlx5_1 is PIX but mlx5_1 to mlx5_0 is SYS";
        cases[n].text = dup_lit("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPIX\t0-3,7-2\n"
                                "GPU1\tPIX\t X \t0-3\n",
                                &cases[n].len);
        cases[n].name = "bad cpuset";
        cases[n].r = -EINVAL;
        cases[n++].msg = "is not a CPU list";
        cases[n].text = dup_lit("GPU0\t X \n", &cases[n].len);
        cases[n].name = "row without header";
        cases[n].r = -EINVAL;
        cases[n++].msg = "without a header";
        assert_true(n <= ELEMENTSOF(cases));
        run_hostile(cases, n, topo_parse_nvsmi);
}

static void
topo_nvsmi_splits_glued_cells_when_the_split_is_unique(void **state)
{
        static const char text[] =
                "        GPU0    GPU1    mlx5_0  mlx5_1  CPU Affinity    NUMA Affinity\n"
                "GPU0     X      NV12    PIXPIX  0-7     0\n"
                "GPU1    NV12     X      SYSSYS  8-15    1\n"
                "mlx5_0  PIX     SYS      X PIX\n"
                "mlx5_1  PIX     SYS     PIX X\n";
        struct topo *t = NULL;
        struct topo_error err = {0};

        assert_int_equal(topo_parse_nvsmi(text, sizeof(text) - 1, &t, &err), 0);
        assert_int_equal(t->n_nics, 2);
        assert_int_equal(topo_nic_link(t, 1, 0), TOPO_LINK_PIX);
        assert_int_equal(topo_nic_link(t, 1, 1), TOPO_LINK_SYS);
        assert_int_equal(t->gpus[1].numa, 1);
        assert_string_equal(t->gpus[1].cpu_affinity, "8-15");
        topo_unref(t);
}

/* --- the nvidia-smi normalising stage, one function at a time ---------------------------- */

static void
topo_nvsmi_strip_escapes_removes_csi_sequences_and_their_remnants(void **state)
{
        static const struct {
                const char *in, *out;
        } cases[] = {
                {"\t\x1b[4mGPU0\tGPU1\tGPU NUMA ID\x1b[0m\n", "\tGPU0\tGPU1\tGPU NUMA ID\n"},
                {"\t[4mGPU0\tGPU1\tGPU NUMA ID[0m\n", "\tGPU0\tGPU1\tGPU NUMA ID\n"},
                {"\x1b[1;32mNV18\x1b[m X", "NV18 X"},
                {"[01;32mPIX[m", "PIX"},
                {"^[[4mGPU0^[[0m", "GPU0"},
                {"GPU0\x1b(B\x1b[m", "GPU0"},
                {"\x1b[38;5;196mSYS\x1b[K", "SYS"},
                {"\x1b" "cGPU0", "GPU0"},           /* two-byte ESC sequence */
                {"GPU0\x1b", "GPU0"},                /* lone ESC at the end */
                {"A\x1b[4\nB", "A[4\nB"},            /* unterminated CSI: only ESC goes */
                {"GPU[0]\t[x]\t[4]", "GPU[0]\t[x]\t[4]"}, /* brackets that are no SGR */
                {"^[[A", "^[[A"},                    /* caret text that is no SGR */
                {"no escapes\n", "no escapes\n"},
                {"", ""},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char buf[128];
                size_t len = strlen(cases[i].in);

                memcpy(buf, cases[i].in, len + 1);
                len = topo__nvsmi_strip_escapes(buf, len);
                buf[len] = '\0';
                print_message("# case %zu\n", i);
                assert_string_equal(buf, cases[i].out);
        }
}

static void
topo_nvsmi_trim_lines_drops_empty_trailing_cells_and_cr(void **state)
{
        static const struct {
                const char *in, *out;
        } cases[] = {
                {"NIC0\tPXB\t X \t\t\t\t\nNIC1\tPXB\t X \t\t\t\t",
                 "NIC0\tPXB\t X\nNIC1\tPXB\t X"},
                {"GPU0\t X \tNV18\t0-63\t0\t\tN/A\r\n", "GPU0\t X \tNV18\t0-63\t0\t\tN/A\n"},
                {"\t\t\n\n  \n", "\n\n\n"},
                {"a \t\r", "a"},
                {"", ""},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char buf[128];
                size_t len = strlen(cases[i].in);

                memcpy(buf, cases[i].in, len + 1);
                len = topo__nvsmi_trim_lines(buf, len);
                buf[len] = '\0';
                print_message("# case %zu\n", i);
                assert_string_equal(buf, cases[i].out);
        }
}

static void
topo_nvsmi_split_cells_splits_only_tokens_made_of_known_cells(void **state)
{
        static const struct {
                const char *tok;
                unsigned n;
                const char *first, *last; /* as cell() prints them */
        } cases[] = {
                {"NODE", 1, "NODE", "NODE"},   {"NODENODE", 2, "NODE", "NODE"},
                {"PIXPIX", 2, "PIX", "PIX"},   {"SYSSYS", 2, "SYS", "SYS"},
                {"NV18NODE", 2, "NV18", "NODE"}, {"XPIX", 2, "X", "PIX"},
                {"N/ASYS", 2, "N/A", "SYS"}, {"SOC", 1, "SYS", "SYS"},
                {"NV99", 0, NULL, NULL},       /* over TOPO_MAX_NVLINKS */
                {"NVX", 0, NULL, NULL},        {"mlx5_0", 0, NULL, NULL},
                {"0-63", 0, NULL, NULL},       {"NODEN", 0, NULL, NULL},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct topo__nvsmi_cell out[4];
                unsigned n = topo__nvsmi_split_cells(cases[i].tok, strlen(cases[i].tok), out,
                                                     ELEMENTSOF(out));
                char buf[32];

                print_message("# %s\n", cases[i].tok);
                assert_int_equal(n, cases[i].n);
                if (n == 0)
                        continue;
                struct topo_pair a = {.link = out[0].link, .links = out[0].links};
                struct topo_pair b = {.link = out[n - 1].link, .links = out[n - 1].links};
                assert_string_equal(cell(&a, buf, sizeof(buf)), cases[i].first);
                assert_string_equal(cell(&b, buf, sizeof(buf)), cases[i].last);
        }
        /* Room for one cell only: a glued pair does not fit. */
        struct topo__nvsmi_cell one[1];
        assert_int_equal(topo__nvsmi_split_cells("PIXPIX", 6, one, 1), 0);
}

static void
topo_nvsmi_legend_entry_reads_each_variant(void **state)
{
        static const struct {
                const char *line;
                const char *label, *name; /* NULL: not an entry */
        } cases[] = {
                {"  NIC0: mlx5_0", "NIC0", "mlx5_0"},
                {"  NIC10: mlx5_bond_0", "NIC10", "mlx5_bond_0"},
                {"NIC3:mlx5_3", "NIC3", "mlx5_3"},
                {"\tNIC2 : mlx4_0\t", "NIC2", "mlx4_0"},
                {"NIC Legend:", NULL, NULL},
                {"NIC0:", NULL, NULL},
                {"NIC: mlx5_0", NULL, NULL},
                {"NIC0: mlx5_0 is the storage NIC", NULL, NULL},
                {"  NV#  = Connection traversing a bonded set of # NVLinks", NULL, NULL},
                {"", NULL, NULL},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *label = NULL, *name = NULL;
                size_t ll = 0, nl = 0;
                bool ok = topo__nvsmi_legend_entry(cases[i].line, strlen(cases[i].line), &label,
                                                   &ll, &name, &nl);

                print_message("# '%s'\n", cases[i].line);
                assert_int_equal(ok, cases[i].label != NULL);
                if (!ok)
                        continue;
                assert_int_equal(ll, strlen(cases[i].label));
                assert_memory_equal(label, cases[i].label, ll);
                assert_int_equal(nl, strlen(cases[i].name));
                assert_memory_equal(name, cases[i].name, nl);
        }
}

static void
topo_nvsmi_gpu_names_reads_smi_and_environment_report_lines(void **state)
{
        static const struct {
                const char *line;
                const char *gpus, *model, *uuid; /* gpus NULL: not a names line */
        } cases[] = {
                {"GPU 0,1,2,3,4,5,6,7: NVIDIA B300 SXM6 AC", "0,1,2,3,4,5,6,7",
                 "NVIDIA B300 SXM6 AC", ""},
                {"GPU 3: NVIDIA GB200 (UUID: GPU-8150a4ae-478e)", "3", "NVIDIA GB200",
                 "GPU-8150a4ae-478e"},
                {"GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-2b5f)", "0", "Tesla V100-SXM2-32GB",
                 "GPU-2b5f"},
                {"GPU 0,1,2,3,4,5,6,7 Compute Capability: 10.3", NULL, NULL, NULL},
                {"GPU 00000000:07:00.0", NULL, NULL, NULL},
                {"GPU 128: too far", NULL, NULL, NULL},
                {"GPU 0,: NVIDIA B200", NULL, NULL, NULL},
                {"GPU : NVIDIA B200", NULL, NULL, NULL},
                {"GPU 1:   ", NULL, NULL, NULL},
                {"GPU0\t X \tNV18", NULL, NULL, NULL},
                {"    GPU 7: NVIDIA H100 80GB HBM3", "7", "NVIDIA H100 80GB HBM3", ""},
                {"\tGPU 0,1,2,3,4,5,6,7: AMD Instinct MI355X", "0,1,2,3,4,5,6,7",
                 "AMD Instinct MI355X", ""},
                {"       GPU models and configuration: AMD Instinct MI300X", NULL, NULL, NULL},
                {"GPU 0          : (Topology) Numa Node: 0", NULL, NULL, NULL},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct topo_mask gpus, want;
                const char *m = NULL, *u = NULL;
                size_t ml = 0, ul = 0;
                bool ok = topo__nvsmi_gpu_names(cases[i].line, strlen(cases[i].line), &gpus, &m,
                                                &ml, &u, &ul);

                print_message("# '%s'\n", cases[i].line);
                assert_int_equal(ok, cases[i].gpus != NULL);
                if (!ok)
                        continue;
                assert_int_equal(topo_mask_parse(cases[i].gpus, TOPO_MAX_GPUS, &want), 0);
                assert_true(topo_mask_equal(&gpus, &want));
                assert_int_equal(ml, strlen(cases[i].model));
                assert_memory_equal(m, cases[i].model, ml);
                assert_int_equal(ul, strlen(cases[i].uuid));
                if (ul)
                        assert_memory_equal(u, cases[i].uuid, ul);
        }
}

/* The header forms of current drivers, each in a tiny matrix through the whole parser. */
static void
topo_nvsmi_reads_current_driver_headers(void **state)
{
        static const struct {
                const char *name, *text;
                int numa1;
                unsigned gen;
        } cases[] = {
                {"underlined header, GPU NUMA ID set (Grace)",
                 "\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
                 "GPU0\t X \tNV18\tSYS\t0-71\t0\t\t2\n"
                 "GPU1\tNV18\t X \tSYS\t72-143\t1\t\t10\n"
                 "NIC0\tSYS\tSYS\t X \t\t\t\t\n",
                 1, 4},
                {"remnants without ESC, model named before the matrix",
                 "GPU 0,1: NVIDIA B200\n"
                 "\t[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID[0m\n"
                 "GPU0\t X \tNV18\t0-55\t0\t\tN/A\n"
                 "GPU1\tNV18\t X \t56-111\t1\t\tN/A\n",
                 1, 5},
                {"model named after the matrix (nvidia-smi -L)",
                 "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\r\n"
                 "GPU0\t X \tNV18\t0-55\t0\t\tN/A\r\n"
                 "GPU1\tNV18\t X \t56-111\t1\t\tN/A\r\n\r\n"
                 "GPU 0: NVIDIA H200 (UUID: GPU-0)\r\nGPU 1: NVIDIA H200 (UUID: GPU-1)\r\n",
                 1, 4},
                {"NUMA Affinity as a list of nodes",
                 "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
                 "GPU0\t X \tNV18\t0-71\t0,2-17\t\tN/A\n"
                 "GPU1\tNV18\t X \t72-143\t1,18-33\t\tN/A\n",
                 -1, 4},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct topo *t = NULL;
                struct topo_error err = {0};
                int r = topo_parse_nvsmi(cases[i].text, strlen(cases[i].text), &t, &err);

                print_message("# %s: %s\n", cases[i].name, r < 0 ? err.msg : "ok");
                assert_int_equal(r, 0);
                assert_int_equal(t->n_gpus, 2);
                assert_int_equal(t->gpus[1].numa, cases[i].numa1);
                assert_int_equal(t->gpus[1].nvlink_gen, cases[i].gen);
                assert_int_equal(topo_pair(t, 0, 1)->links, 18);
                topo_unref(t);
        }
}

/* NV18 is NVLink 4 (H100, H200, H20) or NVLink 5 (B200, B300, GB200): the model decides,
 * from the text or from --gpu-model / the publisher; the pattern alone says 4. */
static void
topo_nvsmi_nv18_generation_follows_the_model(void **state)
{
        static const struct {
                const char *file, *model;
                unsigned gen;
        } cases[] = {
                {"b300-sxm6-8gpu-9nic-ansi-sglang.txt", NULL, 5},    /* the text names B300 */
                {"h20-3e-8gpu-11nic-bond-sglang.txt", NULL, 4},      /* the text names H20-3e */
                {"gb200-tray-4gpu-8nic-gpu-numa-id.txt", NULL, 4},   /* no name: pattern */
                {"gb200-tray-4gpu-8nic-gpu-numa-id.txt", "NVIDIA GB200", 5},
                {"hgx-nv18-8gpu-single-numa-12nic.txt", "NVIDIA B200", 5},
                {"h200-hgx-10nic-nchc-nano4.txt", "NVIDIA H200", 4},
                {"b300-sxm6-8gpu-9nic-ansi-sglang.txt", "NVIDIA H100", 5}, /* text wins */
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct topo_error err = {0};
                int r;
                struct topo *t = load_shared(cases[i].file, &r, &err);

                print_message("# %s %s\n", cases[i].file, cases[i].model ? cases[i].model : "");
                assert_int_equal(r, 0);
                if (cases[i].model)
                        topo_set_model(t, cases[i].model);
                for (unsigned g = 0; g < t->n_gpus; g++)
                        assert_int_equal(t->gpus[g].nvlink_gen, cases[i].gen);
                assert_true(t->nvswitch);
                topo_unref(t);
        }
}

static void
topo_rocm_rejects_damaged_matrices(void **state)
{
        struct hostile_case cases[8];
        size_t n = 0;

        cases[n].text = dup_lit("=== Link Type between two GPUs ===\n       GPU0  GPU1\n"
                                "GPU0   0     XGMI\nGPU1   XGMI\n",
                                &cases[n].len);
        cases[n].name = "cut-off row";
        cases[n].r = -EINVAL;
        cases[n++].msg = "Matrix cut off at line 4";
        cases[n].text = dup_lit("=== Link Type between two GPUs ===\n       GPU0  GPU1\n"
                                "GPU0   0     XGMI\n",
                                &cases[n].len);
        cases[n].name = "missing row";
        cases[n].r = -EINVAL;
        cases[n++].msg = "Matrix cut off";
        cases[n].text = dup_lit("=== Weight between two GPUs ===\n       GPU0  GPU1\n"
                                "GPU0   0     15\nGPU1   40    0\n"
                                "=== Link Type between two GPUs ===\n       GPU0  GPU1\n"
                                "GPU0   0     XGMI\nGPU1   XGMI  0\n",
                                &cases[n].len);
        cases[n].name = "asymmetric weights";
        cases[n].r = -EINVAL;
        cases[n++].msg = "not symmetric";
        cases[n].text = dup_lit("=== Weight between two GPUs ===\n       GPU0  GPU1\n"
                                "GPU0   0     15\nGPU1   15    0\n",
                                &cases[n].len);
        cases[n].name = "no link-type matrix";
        cases[n].r = -EINVAL;
        cases[n++].msg = "No 'Link Type between two GPUs'";
        cases[n].text = dup_lit("=== Link Type between two GPUs ===\n       GPU0  GPU1\n"
                                "GPU0   0     WARP\nGPU1   WARP  0\n",
                                &cases[n].len);
        cases[n].name = "unknown link type";
        cases[n].r = -EINVAL;
        cases[n++].msg = "Unknown link type 'WARP'";
        cases[n].text = dup_lit("=== Link Type between two GPUs ===\n       GPU0  GPU1\n"
                                "GPU0   0     XGMI\nGPU1   XGMI  0\n=== Numa Nodes ===\n"
                                "GPU[7]\t\t: (Topology) Numa Node: 0\n",
                                &cases[n].len);
        cases[n].name = "NUMA line for a missing GPU";
        cases[n].r = -EINVAL;
        cases[n++].msg = "not in the matrices";
        cases[n].text = dup_lit("", &cases[n].len);
        cases[n].name = "empty";
        cases[n].r = -EINVAL;
        cases[n++].msg = "No 'Link Type";
        assert_true(n <= ELEMENTSOF(cases));
        run_hostile(cases, n, topo_parse_rocm);
}

/* Indented output (markdown code blocks, vLLM's collect_env) and the model lines of sglang's
 * environment report, as the nvidia-smi parser reads them. */
static void
topo_rocm_reads_indented_output_and_model_lines(void **state)
{
        static const char text[] =
                "GPU 0,1: AMD Instinct MI355X\n"
                "GPU 0,1 Compute Capability: 9.5\n"
                "       ===== Weight between two GPUs =====\n"
                "              GPU0         GPU1         \n"
                "       GPU0   0            15           \n"
                "       GPU1   15           0            \n"
                "\n"
                "       ===== Link Type between two GPUs =====\n"
                "              GPU0         GPU1\n"
                "       GPU0   0            XGMI\n"
                "       GPU1   XGMI         0\n"
                "       ===== Numa Nodes =====\n"
                "       GPU[0]\t\t: (Topology) Numa Node: 0\n"
                "       GPU[1]\t\t: (Topology) Numa Node: 1\n";
        static const char bad_numa[] = "   === Link Type between two GPUs ===\n"
                                       "          GPU0  GPU1\n"
                                       "   GPU0   0     XGMI\n"
                                       "   GPU1   XGMI  0\n"
                                       "   === Numa Nodes ===\n"
                                       "   GPU[7]\t\t: (Topology) Numa Node: 0\n";
        struct topo_error err = {0};
        struct topo *t = NULL;
        char buf[32];

        assert_int_equal(topo_parse_rocm(text, strlen(text), &t, &err), 0);
        assert_int_equal(t->n_gpus, 2);
        assert_string_equal(cell(topo_pair(t, 0, 1), buf, sizeof(buf)), "XGMIw15");
        assert_int_equal(t->gpus[0].numa, 0);
        assert_int_equal(t->gpus[1].numa, 1);
        assert_string_equal(t->gpus[0].model, "AMD Instinct MI355X");
        assert_string_equal(t->gpus[1].model, "AMD Instinct MI355X");
        topo_unref(t);
        t = NULL;

        /* Error columns still count the indent: the '7' of GPU[7] is column 8. */
        assert_int_equal(topo_parse_rocm(bad_numa, strlen(bad_numa), &t, &err), -EINVAL);
        assert_null(t);
        assert_non_null(strstr(err.msg, "not in the matrices"));
        assert_int_equal(err.line, 6);
        assert_int_equal(err.column, 8);
}

/* A valid two-GPU annotation with one substitution applied. */
static char *
annotation_with(const char *from, const char *to, size_t *ret_len)
{
        static const char base[] =
                "{\"v\":1,\"vendor\":\"nvidia\",\"gpus\":[{\"numa\":0},{\"numa\":1}],"
                "\"links\":[\"X NV4\",\"NV4 X\"],\"nics\":[{\"name\":\"mlx5_0\","
                "\"links\":\"PIX SYS\"}]}";
        const char *at = strstr(base, from);
        assert_non_null(at);
        size_t len = strlen(base) - strlen(from) + strlen(to);
        char *s = malloc(len + 1);
        assert_non_null(s);
        memcpy(s, base, (size_t)(at - base));
        strcpy(s + (at - base), to);
        strcat(s, at + strlen(from));
        *ret_len = len;
        return s;
}

static void
topo_annotation_rejects_hostile_inputs(void **state)
{
        static const struct {
                const char *name, *from, *to;
                int r;
                const char *msg;
        } subs[] = {
                {"wrong version", "\"v\":1", "\"v\":2", -EPROTONOSUPPORT,
                 "version 2 is not supported"},
                {"missing version", "\"v\":1,", "", -EINVAL, "no version"},
                {"version as string", "\"v\":1", "\"v\":\"1\"", -EINVAL, "must be an integer"},
                {"non-square links", "\"NV4 X\"", "\"NV4 X SYS\"", -EINVAL,
                 "more than 2 link codes"},
                {"short link row", "\"NV4 X\"", "\"NV4\"", -EINVAL, "has 1 link codes, expected 2"},
                {"missing link row", "\"X NV4\",\"NV4 X\"", "\"X NV4\"", -EINVAL,
                 "1 rows for 2 GPUs"},
                {"asymmetric links", "\"NV4 X\"", "\"NV3 X\"", -EINVAL, "not symmetric"},
                {"bad link code", "\"X NV4\"", "\"X WARP9\"", -EINVAL, "'WARP9' is not valid"},
                {"link count beyond the cap", "\"X NV4\",\"NV4 X\"", "\"X NV65\",\"NV65 X\"",
                 -EINVAL, "is not valid"},
                {"X off the diagonal", "\"X NV4\",\"NV4 X\"", "\"X X\",\"X X\"", -EINVAL,
                 "diagonal"},
                {"NUMA out of range", "{\"numa\":1}", "{\"numa\":4096}", -EINVAL, "gpus[1].numa"},
                {"model not a string", "{\"numa\":1}", "{\"model\":7}", -EINVAL,
                 "gpus[1].model must be"},
                {"model too long", "{\"numa\":1}",
                 "{\"model\":"
                 "\"0123456789012345678901234567890123456789012345678901234567890123456789"
                 "01234567890123456789012345\"}",
                 -E2BIG, "longer than 95"},
                {"cpus not a list", "{\"numa\":1}", "{\"cpus\":\"0-\"}", -EINVAL, "not a CPU list"},
                {"NVLink to a NIC", "\"PIX SYS\"", "\"NV2 SYS\"", -EINVAL, "not a NIC relation"},
                {"unknown vendor", "\"nvidia\"", "\"intel\"", -EINVAL, "vendor: unknown value"},
                {"no GPUs", "[{\"numa\":0},{\"numa\":1}]", "[]", -EINVAL, "no GPUs"},
                {"gpus not an array", "[{\"numa\":0},{\"numa\":1}]", "{}", -EINVAL,
                 "must be an array"},
                {"truncated JSON", "}]}", "}]", -EINVAL, "Unterminated"},
                {"trailing garbage", "}]}", "}]}x", -EINVAL, "Trailing bytes"},
                {"duplicate key", "\"v\":1", "\"v\":1,\"v\":1", -EINVAL, "Duplicate key"},
                {"NIC numa not a number", "\"name\":\"mlx5_0\"",
                 "\"name\":\"mlx5_0\",\"numa\":true", -EINVAL, "nics[0].numa"},
                {"healthy not a bool", "{\"numa\":1}", "{\"ok\":1}", -EINVAL, "gpus[1].ok"},
        };
        struct hostile_case cases[ELEMENTSOF(subs) + 4];
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                cases[n].name = subs[i].name;
                cases[n].text = annotation_with(subs[i].from, subs[i].to, &cases[n].len);
                cases[n].r = subs[i].r;
                cases[n++].msg = subs[i].msg;
        }
        cases[n].text = repeat("", "[", 5000, "", &cases[n].len);
        cases[n].name = "deep nesting";
        cases[n].r = -E2BIG;
        cases[n++].msg = "nested too deeply";
        cases[n].text =
                repeat("{\"v\":1,\"pad\":\"", "x", TOPO_MAX_ANNOTATION_BYTES, "\"}", &cases[n].len);
        cases[n].name = "oversized annotation";
        cases[n].r = -E2BIG;
        cases[n++].msg = "larger than";
        {
                /* 129 GPUs: over TOPO_MAX_GPUS. */
                size_t l1;
                char *g = repeat("{\"v\":1,\"gpus\":[{}", ",{}", 128, "],\"links\":[]}", &l1);
                cases[n].text = g;
                cases[n].len = l1;
                cases[n].name = "too many GPUs";
                cases[n].r = -E2BIG;
                cases[n++].msg = "129 GPUs";
                cases[n].text = calloc(1, 6);
                memcpy(cases[n].text, "\x01\xff", 2);
                cases[n].len = 5;
                cases[n].name = "binary garbage";
                cases[n].r = -EINVAL;
                cases[n++].msg = "Annotation JSON";
        }
        assert_true(n <= ELEMENTSOF(cases));
        run_hostile(cases, n, topo_parse_annotation);
}

static void
topo_to_annotation_refuses_strings_no_parser_produces(void **state)
{
        static const struct {
                const char *model, *cpus, *nic;
        } cases[] = {
                {"caf\xc3\xa9", "", "mlx5_0"},
                {"line\nbreak", "", "mlx5_0"},
                {"ok", "0-", "mlx5_0"},
                {"ok", "", "\xff"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct topo *t = topo_new(1, 1);
                char *json = (char *)0x1;
                size_t len = 7;

                assert_non_null(t);
                snprintf(t->gpus[0].model, TOPO_ID_MAX, "%s", cases[i].model);
                snprintf(t->gpus[0].cpu_affinity, TOPO_ID_MAX, "%s", cases[i].cpus);
                snprintf(t->nics[0].name, TOPO_ID_MAX, "%s", cases[i].nic);
                assert_int_equal(topo_to_annotation(t, &json, &len), -EINVAL);
                assert_ptr_equal(json, (char *)0x1);
                assert_int_equal(len, 7);
                topo_unref(t);
        }
}

static void
topo_annotation_escapes_quotes_and_backslashes(void **state)
{
        struct topo *t = topo_new(1, 1), *t2 = NULL;
        struct topo_error err = {0};
        char *json = NULL;
        size_t len = 0;

        assert_non_null(t);
        snprintf(t->gpus[0].model, TOPO_ID_MAX, "A \"quoted\" \\ name");
        snprintf(t->nics[0].name, TOPO_ID_MAX, "\\\"");
        snprintf(t->node_name, TOPO_ID_MAX, "\"");
        assert_int_equal(topo_to_annotation(t, &json, &len), 0);
        assert_non_null(strstr(json, "\"model\":\"A \\\"quoted\\\" \\\\ name\""));
        assert_int_equal(topo_parse_annotation(json, len, &t2, &err), 0);
        assert_true(topo_equal(t, t2));
        assert_string_equal(t2->nics[0].name, "\\\"");
        free(json);
        topo_unref(t);
        topo_unref(t2);
}

static void
topo_parsers_refuse_a_null_empty_input(void **state)
{
        static const struct {
                int (*parse)(const char *, size_t, struct topo **, struct topo_error *);
        } parsers[] = {
                {topo_parse_nvsmi},
                {topo_parse_rocm},
                {topo_parse_annotation},
                {topo_parse_any},
        };
        for (size_t i = 0; i < ELEMENTSOF(parsers); i++) {
                struct topo *t = NULL;
                struct topo_error err = {0};

                assert_true(parsers[i].parse(NULL, 0, &t, &err) < 0);
                assert_null(t);
                assert_true(err.msg[0] != '\0');
        }
}

static void
topo_annotation_ignores_unknown_keys(void **state)
{
        static const char json[] =
                "{\"v\":1,\"future\":{\"x\":[1,2,3]},\"gpus\":[{\"numa\":0,\"newkey\":\"y\"}],"
                "\"links\":[\"X\"],\"extra\":null}";
        struct topo *t = NULL;
        struct topo_error err = {0};

        assert_int_equal(topo_parse_annotation(json, sizeof(json) - 1, &t, &err), 0);
        assert_int_equal(t->n_gpus, 1);
        assert_int_equal(t->gpus[0].numa, 0);
        assert_true(t->gpus[0].healthy);
        topo_unref(t);
}

/* An n-GPU topology where every pair is NV<links>. */
static struct topo *
all_to_all(unsigned n, unsigned links, const char *model)
{
        struct topo *t = topo_new(n, 0);

        assert_non_null(t);
        for (unsigned i = 0; i < n; i++) {
                if (model)
                        snprintf(t->gpus[i].model, TOPO_ID_MAX, "%s", model);
                for (unsigned j = 0; j < n; j++)
                        if (i != j)
                                *topo_pair_mut(t, i, j) =
                                        (struct topo_pair){TOPO_LINK_NVLINK, (uint8_t)links};
        }
        topo_finish(t);
        return t;
}

static void
topo_finish_infers_nvlink_generation_and_nvswitch(void **state)
{
        static const struct {
                unsigned n, links;
                const char *model;
                unsigned gen;
                bool nvswitch;
        } cases[] = {
                {8, 18, NULL, 4, true},          /* HGX H100 */
                {8, 18, "NVIDIA B200", 5, true}, /* the name beats the pattern */
                {8, 12, NULL, 3, true},          /* HGX A100 */
                {8, 8, NULL, 0, true},           /* A800 or H800: unknown gen */
                {8, 8, "NVIDIA H800", 4, true},
                {16, 6, NULL, 2, true}, /* DGX-2: NV6 x 15 peers */
                {4, 4, NULL, 3, false}, /* 4-GPU HGX A100 */
                {2, 4, NULL, 3, false}, /* Ampere bridge pair */
                {2, 3, NULL, 2, false}, /* AC922 V100 pair */
                {2, 2, NULL, 1, false}, /* POWER8 P100 pair */
                {2, 4, "Tesla P100-SXM2-16GB", 1, false},
                {2, 4, "NVIDIA A10", 3, false}, /* unknown name: pattern */
                {2, 6, "NVIDIA A100-SXM4-80GB", 3, false},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct topo *t = all_to_all(cases[i].n, cases[i].links, cases[i].model);
                print_message("# case %zu\n", i);
                assert_int_equal(t->gpus[0].nvlink_gen, cases[i].gen);
                assert_int_equal(t->nvswitch, cases[i].nvswitch);
                topo_unref(t);
        }
}

static void
topo_finish_reads_the_dgx1_hybrid_cube_mesh_as_direct_links(void **state)
{
        int r;
        struct topo_error err = {0};
        struct topo *t = load_shared("dgx1-v100-sxm2-oneflow.txt", &r, &err);

        assert_int_equal(r, 0);
        for (unsigned i = 0; i < t->n_gpus; i++)
                assert_int_equal(t->gpus[i].nvlink_gen, 2);
        assert_false(t->nvswitch);
        topo_unref(t);
}

static void
topo_set_model_overrides_the_pattern_guess(void **state)
{
        struct topo *t = all_to_all(8, 18, NULL);

        assert_int_equal(t->gpus[0].nvlink_gen, 4);
        topo_set_model(t, "NVIDIA B300");
        assert_string_equal(t->gpus[7].model, "NVIDIA B300");
        assert_int_equal(t->gpus[7].nvlink_gen, 5);
        topo_unref(t);
}

static void
topo_names_round_trip_and_reject_unknowns(void **state)
{
        for (int l = 0; l < _TOPO_LINK_MAX; l++)
                assert_int_equal(topo_link_from_string(topo_link_to_string((enum topo_link)l)), l);
        for (int v = 0; v < _TOPO_VENDOR_MAX; v++)
                assert_int_equal(
                        topo_vendor_from_string(topo_vendor_to_string((enum topo_vendor)v)), v);
        for (int m = 0; m < _TOPO_MIG_MAX; m++)
                assert_int_equal(topo_mig_from_string(topo_mig_to_string((enum topo_mig)m)), m);
        for (int c = 0; c < _TOPO_CPU_LINK_MAX; c++)
                assert_int_equal(
                        topo_cpu_link_from_string(topo_cpu_link_to_string((enum topo_cpu_link)c)),
                        c);
        assert_null(topo_link_to_string(_TOPO_LINK_MAX));
        assert_null(topo_link_to_string(_TOPO_LINK_INVALID));
        assert_int_equal(topo_link_from_string("nv"), -EINVAL);
        assert_int_equal(topo_link_from_string(NULL), -EINVAL);
        assert_int_equal(topo_vendor_from_string("intel"), -EINVAL);
        assert_null(topo_cpu_link_to_string(_TOPO_CPU_LINK_MAX));
}

static void
topo_link_is_p2p_follows_nccl(void **state)
{
        static const struct {
                enum topo_link l;
                bool p2p;
        } cases[] = {
                {TOPO_LINK_NVLINK, true}, {TOPO_LINK_XGMI, true},      {TOPO_LINK_PIX, true},
                {TOPO_LINK_PXB, true},    {TOPO_LINK_PCIE, false},     {TOPO_LINK_PHB, false},
                {TOPO_LINK_NODE, false},  {TOPO_LINK_SYS, false},      {TOPO_LINK_UNKNOWN, false},
                {TOPO_LINK_SELF, false},  {_TOPO_LINK_INVALID, false},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                assert_int_equal(topo_link_is_p2p(cases[i].l), cases[i].p2p);
}

static void
topo_mask_parses_and_formats_lists(void **state)
{
        static const struct {
                const char *in;
                unsigned n;
                int r;
                const char *out;
        } cases[] = {
                {"0,1,5", 8, 0, "0,1,5"},
                {"", 8, 0, ""},
                {"7", 8, 0, "7"},
                {"8", 8, -ERANGE, NULL},
                {"0-3,6", 8, 0, "0,1,2,3,6"},
                {"3-1", 8, -EINVAL, NULL},
                {"1,", 8, -EINVAL, NULL},
                {",1", 8, -EINVAL, NULL},
                {"a", 8, -EINVAL, NULL},
                {"-1", 8, -EINVAL, NULL},
                {" 1", 8, -EINVAL, NULL},
                {"127", 128, 0, "127"},
                {"99999999999", 128, -ERANGE, NULL},
                {"5,5", 8, 0, "5"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct topo_mask m, untouched;
                char buf[512];

                topo_mask_fill(&m, 3);
                untouched = m;
                print_message("# '%s'\n", cases[i].in);
                assert_int_equal(topo_mask_parse(cases[i].in, cases[i].n, &m), cases[i].r);
                if (cases[i].r < 0) {
                        assert_true(topo_mask_equal(&m, &untouched));
                        continue;
                }
                assert_int_equal(topo_mask_format(&m, buf, sizeof(buf)), 0);
                assert_string_equal(buf, cases[i].out);
        }
        struct topo_mask m;
        char small[4];
        topo_mask_fill(&m, 8);
        assert_int_equal(topo_mask_count(&m), 8);
        assert_int_equal(topo_mask_format(&m, small, sizeof(small)), -E2BIG);
}

static void
topo_class_hash_ignores_identities_but_not_links(void **state)
{
        struct topo *a = make_nvl72(), *b = make_nvl72();

        snprintf(b->gpus[5].uuid, TOPO_ID_MAX, "GPU-other");
        snprintf(b->node_name, TOPO_ID_MAX, "another-node");
        snprintf(b->nics[0].name, TOPO_ID_MAX, "ib7");
        assert_false(topo_equal(a, b));
        assert_true(topo_class_hash(a) == topo_class_hash(b));
        topo_pair_mut(b, 3, 4)->links = 12;
        topo_pair_mut(b, 4, 3)->links = 12;
        assert_true(topo_class_hash(a) != topo_class_hash(b));
        topo_unref(a);
        topo_unref(b);
}

static void
topo_detect_format_recognises_each_format(void **state)
{
        static const struct {
                const char *text;
                enum topo_format f;
        } cases[] = {
                {"\tGPU0\tGPU1\n", TOPO_FORMAT_NVSMI},
                {"# comment\n\n  {\"v\":1}", TOPO_FORMAT_ANNOTATION},
                {"<?xml version=\"1.0\"?>\n<topology version=\"2.0\">", TOPO_FORMAT_HWLOC_XML},
                {"==== ROCm System Management Interface ====\n", TOPO_FORMAT_ROCM},
                {"hello world", _TOPO_FORMAT_INVALID},
                {"", _TOPO_FORMAT_INVALID},
                {"# only a comment", _TOPO_FORMAT_INVALID},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                assert_int_equal(topo_detect_format(cases[i].text, strlen(cases[i].text)),
                                 cases[i].f);

        struct topo *t = NULL;
        struct topo_error err = {0};
        assert_int_equal(topo_parse_any(cases[2].text, strlen(cases[2].text), &t, &err),
                         -EPROTONOSUPPORT);
        assert_null(t);
}

/* xorshift64*: a fixed seed, so every run mutates the same way. */
static uint64_t
next_rand(uint64_t *s)
{
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        return *s * UINT64_C(2685821657736338717);
}

#define FUZZ_ROUNDS 150

/* One random edit of orig into a new buffer: flip a byte, cut, delete a few bytes, or insert
 * one of the tokens that matter to the parsers. */
static char *
mutate(const char *orig, size_t len, uint64_t *seed, size_t *ret_len)
{
        static const char *const inserts[] = {
                "\t",    " ",  "\n", "NV12", "X", "\0", "SYS", "GPU0", "#",   "\r\n",    "NODENODE",
                "99999", "\"", "{",  "}",    "[", "]",  ",",   ":",    "\\u", "\\ud800", "-1",
        };
        char *buf = malloc(len + 64);
        size_t n = len, at = len ? next_rand(seed) % len : 0;
        const char *ins = inserts[next_rand(seed) % ELEMENTSOF(inserts)];
        size_t il = ins[0] ? strlen(ins) : 1;

        assert_non_null(buf);
        memcpy(buf, orig, len);
        switch (next_rand(seed) % 4) {
        case 0:
                if (n)
                        buf[at] = (char)(next_rand(seed) & 0xff);
                break;
        case 1:
                n = at;
                break;
        case 2:
                if (n) {
                        size_t want = 1 + next_rand(seed) % 8;
                        size_t d = MIN(n - at, want);
                        memmove(buf + at, buf + at + d, n - at - d);
                        n -= d;
                }
                break;
        default:
                memmove(buf + at + il, buf + at, n - at);
                memcpy(buf + at, ins, il);
                n += il;
                break;
        }
        *ret_len = n;
        return buf;
}

/* Parses buf: an error has a message and leaves nothing behind; a success is a valid model
 * that round-trips through the annotation.  Returns whether it loaded. */
static bool
parses_cleanly(const char *buf, size_t n,
               int (*parse)(const char *, size_t, struct topo **, struct topo_error *))
{
        struct topo *t = NULL, *t2 = NULL;
        struct topo_error err = {0};
        char *json = NULL;
        size_t jl = 0;
        int r = parse(buf, n, &t, &err);

        if (r < 0) {
                assert_null(t);
                assert_true(err.msg[0] != '\0');
                return false;
        }
        assert_int_equal(topo_to_annotation(t, &json, &jl), 0);
        r = topo_parse_annotation(json, jl, &t2, &err);
        if (r < 0)
                print_message("# round trip: %s\n", err.msg);
        assert_int_equal(r, 0);
        assert_true(topo_equal(t, t2));
        free(json);
        topo_unref(t);
        topo_unref(t2);
        return true;
}

static void
topo_parsers_survive_mutated_real_inputs(void **state)
{
        uint64_t seed = UINT64_C(0x9e3779b97f4a7c15);
        unsigned loaded[2] = {0}, refused[2] = {0};

        for (size_t c = 0; c < ELEMENTSOF(shared_cases); c++) {
                char rel[256];
                size_t len = 0, jl = 0;

                snprintf(rel, sizeof(rel), "topologies/%s", shared_cases[c].file);
                char *orig = read_test_data(rel, &len);
                assert_non_null(orig);
                /* The text itself, and (when it loads) its annotation. */
                char *json = NULL;
                struct topo *t = NULL;
                if (topo_parse_any(orig, len, &t, NULL) == 0)
                        assert_int_equal(topo_to_annotation(t, &json, &jl), 0);
                topo_unref(t);

                for (unsigned round = 0; round < FUZZ_ROUNDS; round++) {
                        size_t n;
                        char *buf = mutate(orig, len, &seed, &n);
                        if (parses_cleanly(buf, n, topo_parse_any))
                                loaded[0]++;
                        else
                                refused[0]++;
                        free(buf);
                        if (!json)
                                continue;
                        buf = mutate(json, jl, &seed, &n);
                        if (parses_cleanly(buf, n, topo_parse_annotation))
                                loaded[1]++;
                        else
                                refused[1]++;
                        free(buf);
                }
                free(json);
                free(orig);
        }
        print_message("# text: %u mutated inputs loaded, %u refused; annotations: %u, %u\n",
                      loaded[0], refused[0], loaded[1], refused[1]);
        assert_true(loaded[0] > 0 && refused[0] > 0 && loaded[1] > 0 && refused[1] > 0);
}

static void
topo_refcount_keeps_a_shared_snapshot_alive(void **state)
{
        struct topo *t = topo_new(2, 1);

        assert_non_null(t);
        assert_ptr_equal(topo_ref(t), t);
        assert_null(topo_unref(t));
        assert_int_equal(t->n_gpus, 2); /* still alive: one reference left */
        assert_int_equal(topo_pair(t, 0, 0)->link, TOPO_LINK_SELF);
        assert_int_equal(topo_pair(t, 0, 1)->link, TOPO_LINK_UNKNOWN);
        assert_int_equal(t->gpus[1].numa, -1);
        assert_null(topo_unref(t));
        assert_null(topo_unref(NULL));
        assert_null(topo_new(TOPO_MAX_GPUS + 1, 0));
        assert_null(topo_new(1, TOPO_MAX_NICS + 1));
}

/* The mask helpers, across the 64-bit word boundary. */
static void
topo_mask_helpers_combine_and_walk_masks(void **state)
{
        struct topo_mask a = { 0 }, b = { 0 }, c;
        unsigned seen[8], n = 0;

        for (unsigned g = 0; g < TOPO_MAX_GPUS; g += 31)
                topo_mask_set(&a, g); /* 0 31 62 93 124 */
        topo_mask_set(&b, 62);
        topo_mask_set(&b, 63);
        assert_true(topo_mask_intersects(&a, &b));
        assert_false(topo_mask_subset(&b, &a));
        c = a;
        topo_mask_and(&c, &b);
        assert_int_equal(topo_mask_count(&c), 1);
        assert_true(topo_mask_subset(&c, &a) && topo_mask_subset(&c, &b));
        c = a;
        topo_mask_or(&c, &b);
        assert_int_equal(topo_mask_count(&c), 6);
        topo_mask_andnot(&c, &a);
        assert_int_equal(topo_mask_count(&c), 1);
        assert_true(topo_mask_test(&c, 63));
        for (int g = topo_mask_next(&a, 0); g >= 0; g = topo_mask_next(&a, (unsigned)g + 1))
                seen[n++] = (unsigned)g;
        assert_int_equal(n, 5);
        assert_int_equal(seen[0], 0);
        assert_int_equal(seen[2], 62);
        assert_int_equal(seen[4], 124);
        assert_int_equal(topo_mask_next(&a, 125), -1);
        assert_int_equal(topo_mask_next(&a, TOPO_MAX_GPUS), -1);
}

/* topofit.io/gpus: what the codec writes it reads back, by indices (the extender) and by
 * UUIDs (the plugin), and the two readers agree. */
static void
topo_gpus_round_trips_by_indices_and_by_uuids(void **state)
{
        static const uint8_t init_set[] = { 1, 4 }, a_set[] = { 1 }, b_set[] = { 4, 6 };
        const struct topo_gpus_out out[] = {
                { "init", true, 2, init_set }, { "a", false, 1, a_set }, { "b", false, 2, b_set },
        };
        char ids[8][TOPO_ID_MAX];
        struct topo *t = topo_new(8, 0);
        struct topo_gpus *g = calloc(1, sizeof(*g));
        struct topo_mask u, want = { 0 };
        const char *why = NULL;
        char *json = NULL;

        assert_non_null(t);
        assert_non_null(g);
        for (unsigned i = 0; i < 8; i++) {
                snprintf(t->gpus[i].uuid, sizeof(t->gpus[i].uuid), "GPU-%u", i);
                /* The node's devices in another order: UUIDs, not indices, say which. */
                snprintf(ids[i], sizeof(ids[i]), "GPU-%u", 7 - i);
        }
        assert_int_equal(topo_gpus_encode("n1", out, ELEMENTSOF(out), t, &json), 0);
        assert_string_equal(json, "{\"version\":1,\"node\":\"n1\",\"containers\":["
                                  "{\"name\":\"init\",\"init\":true,\"indices\":[1,4],\"uuids\":[\"GPU-1\",\"GPU-4\"]},"
                                  "{\"name\":\"a\",\"indices\":[1],\"uuids\":[\"GPU-1\"]},"
                                  "{\"name\":\"b\",\"indices\":[4,6],\"uuids\":[\"GPU-4\",\"GPU-6\"]}]}");
        assert_int_equal(topo_gpus_decode(json, strlen(json), 8, NULL, NULL, g, &why), 0);
        assert_int_equal(g->n, 3);
        assert_string_equal(g->node, "n1");
        assert_true(g->c[0].init);
        assert_string_equal(g->c[2].name, "b");
        topo_gpus_union(g, &u);
        topo_mask_set(&want, 1);
        topo_mask_set(&want, 4);
        topo_mask_set(&want, 6);
        assert_true(topo_mask_equal(&u, &want));
        /* By UUIDs against the reordered devices: GPU-k is device 7-k. */
        assert_int_equal(topo_gpus_decode(json, strlen(json), 8, (const char(*)[TOPO_ID_MAX])ids, "n1",
                                          g, &why), 0);
        topo_gpus_union(g, &u);
        topo_mask_clear(&want);
        topo_mask_set(&want, 6);
        topo_mask_set(&want, 3);
        topo_mask_set(&want, 1);
        assert_true(topo_mask_equal(&u, &want));
        /* Another node's record, an index past the node, a non-JSON value. */
        assert_int_equal(topo_gpus_decode(json, strlen(json), 8, NULL, "n2", g, &why), -EINVAL);
        assert_int_equal(topo_gpus_decode(json, strlen(json), 5, NULL, NULL, g, &why), -ERANGE);
        assert_int_equal(topo_gpus_decode("GPU-1", 5, 8, NULL, NULL, g, &why), -EINVAL);
        assert_non_null(why);
        free(json);
        free(g);
        topo_unref(t);
}

int
main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(topo_parses_every_shared_matrix_as_expected),
                cmocka_unit_test(topo_annotation_round_trips_every_shared_matrix),
                cmocka_unit_test(
                        topo_annotation_of_72_gpu_nvswitch_domain_fits_well_inside_the_limit),
                cmocka_unit_test(topo_nvsmi_rejects_hostile_inputs),
                cmocka_unit_test(topo_nvsmi_splits_glued_cells_when_the_split_is_unique),
                cmocka_unit_test(topo_nvsmi_strip_escapes_removes_csi_sequences_and_their_remnants),
                cmocka_unit_test(topo_nvsmi_trim_lines_drops_empty_trailing_cells_and_cr),
                cmocka_unit_test(topo_nvsmi_split_cells_splits_only_tokens_made_of_known_cells),
                cmocka_unit_test(topo_nvsmi_legend_entry_reads_each_variant),
                cmocka_unit_test(topo_nvsmi_gpu_names_reads_smi_and_environment_report_lines),
                cmocka_unit_test(topo_nvsmi_reads_current_driver_headers),
                cmocka_unit_test(topo_nvsmi_nv18_generation_follows_the_model),
                cmocka_unit_test(topo_rocm_rejects_damaged_matrices),
                cmocka_unit_test(topo_rocm_reads_indented_output_and_model_lines),
                cmocka_unit_test(topo_annotation_rejects_hostile_inputs),
                cmocka_unit_test(topo_gpus_round_trips_by_indices_and_by_uuids),
                cmocka_unit_test(topo_mask_helpers_combine_and_walk_masks),
                cmocka_unit_test(topo_annotation_ignores_unknown_keys),
                cmocka_unit_test(topo_parsers_refuse_a_null_empty_input),
                cmocka_unit_test(topo_annotation_escapes_quotes_and_backslashes),
                cmocka_unit_test(topo_to_annotation_refuses_strings_no_parser_produces),
                cmocka_unit_test(topo_finish_infers_nvlink_generation_and_nvswitch),
                cmocka_unit_test(topo_finish_reads_the_dgx1_hybrid_cube_mesh_as_direct_links),
                cmocka_unit_test(topo_set_model_overrides_the_pattern_guess),
                cmocka_unit_test(topo_names_round_trip_and_reject_unknowns),
                cmocka_unit_test(topo_link_is_p2p_follows_nccl),
                cmocka_unit_test(topo_mask_parses_and_formats_lists),
                cmocka_unit_test(topo_class_hash_ignores_identities_but_not_links),
                cmocka_unit_test(topo_detect_format_recognises_each_format),
                cmocka_unit_test(topo_refcount_keeps_a_shared_snapshot_alive),
                cmocka_unit_test(topo_parsers_survive_mutated_real_inputs),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
