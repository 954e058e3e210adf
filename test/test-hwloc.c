/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for topology/hwloc: the real hwloc exports in test/data/hwloc (DGX-2: 16 V100 behind
 * 12 NVSwitches; POWER8 Minsky: P100 pairs with NVLink to the CPU), hostile XML, and the live
 * machine (which may have no GPU at all: then the clear -ENODEV).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "topo-hwloc.h"
#include "topo-test-util.h"

static struct topo *
load(const char *rel)
{
        struct topo_error err = {0};
        struct topo *t = NULL;
        size_t len = 0;
        char *xml = read_test_data(rel, &len);

        assert_non_null(xml);
        int r = topo_hwloc_load_xml(xml, len, &t, &err);
        if (r < 0)
                print_message("# %s: %s\n", rel, err.msg);
        assert_int_equal(r, 0);
        free(xml);
        return t;
}

static void
hwloc_joins_every_dgx2_gpu_pair_through_the_nvswitch_fabric(void **state)
{
        struct topo *t = load("hwloc/nvidiaDGX2.xml");

        assert_int_equal(t->n_gpus, 16);
        assert_int_equal(t->vendor, TOPO_VENDOR_NVIDIA);
        assert_true(t->nvswitch);
        assert_int_equal(t->n_numa, 2);
        assert_int_equal(t->cpu_link, TOPO_CPU_LINK_INTEL_UPI);
        for (unsigned i = 0; i < 16; i++) {
                assert_int_equal(t->gpus[i].nvlink_gen, 2);
                assert_string_equal(t->gpus[i].model, "Tesla V100-SXM3-32GB-H");
                assert_true(strncmp(t->gpus[i].uuid, "GPU-", 4) == 0);
                assert_int_equal(t->gpus[i].numa, i < 8 ? 0 : 1);
                for (unsigned j = 0; j < 16; j++) {
                        const struct topo_pair *p = topo_pair(t, i, j);
                        if (i == j) {
                                assert_int_equal(p->link, TOPO_LINK_SELF);
                                continue;
                        }
                        assert_int_equal(p->link, TOPO_LINK_NVLINK);
                        assert_int_equal(p->links, 6);
                }
        }
        /* PCI bus order, in nvidia-smi's bus id format. */
        assert_string_equal(t->gpus[0].pci_bus_id, "00000000:34:00.0");
        assert_string_equal(t->gpus[15].pci_bus_id, "00000000:e7:00.0");
        assert_string_equal(t->gpus[0].uuid, "GPU-d3977428-7a30-086b-2e20-5c1eeed647c6");
        topo_unref(t);
}

static void
hwloc_reads_power8_nvlink_pairs_and_cross_socket_pcie(void **state)
{
        static const struct {
                unsigned a, b;
                enum topo_link link;
                unsigned links;
        } cases[] = {
                {0, 1, TOPO_LINK_NVLINK, 2},
                {2, 3, TOPO_LINK_NVLINK, 2},
                {0, 2, TOPO_LINK_SYS, 0},
                {1, 3, TOPO_LINK_SYS, 0},
        };
        struct topo *t = load("hwloc/power8gpudistances.xml");

        assert_int_equal(t->n_gpus, 4);
        assert_false(t->nvswitch);
        assert_int_equal(t->cpu_link, TOPO_CPU_LINK_POWER_XBUS);
        assert_int_equal(t->gpus[0].nvlink_gen, 1);
        assert_int_equal(t->gpus[0].numa, 0);
        assert_int_equal(t->gpus[3].numa, 1);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const struct topo_pair *p = topo_pair(t, cases[i].a, cases[i].b);
                assert_int_equal(p->link, cases[i].link);
                assert_int_equal(p->links, cases[i].links);
                assert_int_equal(topo_pair(t, cases[i].b, cases[i].a)->link, cases[i].link);
        }
        topo_unref(t);
}

/* test/data/hwloc-pcie-tree.xml, hand-written: package 0 / NUMA 0 has host bridge H0 with a
 * PCIe switch (upstream U; GPU 01:00.0 behind downstream D1, NIC mlx5_0 behind D2 with an
 * OpenFabrics and a Network OS device, GPU 05:00.0 three bridges below U) and a second port
 * with GPU 06:00.0, and host bridge H1 with GPU 11:00.0; package 1 / NUMA 1 has host bridge
 * H2 with GPU 81:00.0 and an Ethernet-only NIC eth0. */
static void
hwloc_derives_each_pcie_relation_from_the_pci_tree(void **state)
{
        static const struct {
                unsigned a, b;
                enum topo_link link;
        } pairs[] = {
                {0, 1, TOPO_LINK_PXB}, /* same switch, one side three bridges deep */
                {0, 2, TOPO_LINK_PHB}, /* same host bridge, not the same switch */
                {1, 2, TOPO_LINK_PHB},
                {0, 3, TOPO_LINK_NODE}, /* two host bridges, one NUMA node */
                {2, 3, TOPO_LINK_NODE},
                {0, 4, TOPO_LINK_SYS}, /* across packages */
                {3, 4, TOPO_LINK_SYS},
        };
        static const struct {
                unsigned nic, gpu;
                enum topo_link link;
        } nics[] = {
                {0, 0, TOPO_LINK_PIX},  {0, 1, TOPO_LINK_PXB}, {0, 2, TOPO_LINK_PHB},
                {0, 3, TOPO_LINK_NODE}, {0, 4, TOPO_LINK_SYS}, {1, 4, TOPO_LINK_PHB},
                {1, 0, TOPO_LINK_SYS},
        };
        struct topo_error err = {0};
        struct topo *t = NULL;
        size_t len = 0;
        char *xml = read_test_data("hwloc-pcie-tree.xml", &len);

        assert_non_null(xml);
        assert_int_equal(topo_hwloc_load_xml(xml, len, &t, &err), 0);
        free(xml);
        assert_int_equal(t->n_gpus, 5);
        assert_int_equal(t->n_nics, 2);
        assert_false(t->nvswitch);
        assert_int_equal(t->cpu_link, TOPO_CPU_LINK_AMD_IF);
        assert_string_equal(t->nics[0].name, "mlx5_0"); /* OpenFabrics name beats ib0 */
        assert_string_equal(t->nics[1].name, "eth0");
        assert_int_equal(t->nics[0].numa, 0);
        assert_int_equal(t->nics[1].numa, 1);
        assert_string_equal(t->gpus[0].model, "NVIDIA H100 80GB HBM3");
        assert_int_equal(t->gpus[0].nvlink_gen, 4);
        assert_string_equal(t->gpus[4].pci_bus_id, "00000000:81:00.0");
        assert_int_equal(t->gpus[4].numa, 1);
        for (size_t i = 0; i < ELEMENTSOF(pairs); i++) {
                assert_int_equal(topo_pair(t, pairs[i].a, pairs[i].b)->link, pairs[i].link);
                assert_int_equal(topo_pair(t, pairs[i].b, pairs[i].a)->link, pairs[i].link);
        }
        for (size_t i = 0; i < ELEMENTSOF(nics); i++)
                assert_int_equal(topo_nic_link(t, nics[i].nic, nics[i].gpu), nics[i].link);
        topo_unref(t);
}

/* test/data/hwloc-amd-xgmi.xml, hand-written: three AMD MI210 (class 0x0380) under one host
 * bridge; the first two joined by Infinity Fabric ("XGMIBandwidth" 50,000 MB/s, "XGMIHops"
 * 1), the third PCIe only. */
static void
hwloc_reads_amd_xgmi_links_and_hops(void **state)
{
        struct topo_error err = {0};
        struct topo *t = NULL;
        size_t len = 0;
        char *xml = read_test_data("hwloc-amd-xgmi.xml", &len);

        assert_non_null(xml);
        assert_int_equal(topo_hwloc_load_xml(xml, len, &t, &err), 0);
        free(xml);
        assert_int_equal(t->n_gpus, 3);
        assert_int_equal(t->vendor, TOPO_VENDOR_AMD);
        assert_string_equal(t->gpus[1].model, "AMD Instinct MI210");
        assert_int_equal(topo_pair(t, 0, 1)->link, TOPO_LINK_XGMI);
        assert_int_equal(topo_pair(t, 1, 0)->link, TOPO_LINK_XGMI);
        assert_int_equal(topo_pair(t, 0, 1)->hops, 1);
        assert_int_equal(topo_pair(t, 0, 2)->link, TOPO_LINK_PHB);
        assert_int_equal(topo_pair(t, 2, 1)->link, TOPO_LINK_PHB);
        assert_int_equal(topo_pair(t, 0, 2)->hops, 0);
        assert_false(t->nvswitch);
        topo_unref(t);
}

static void
hwloc_topologies_round_trip_through_the_annotation(void **state)
{
        static const char *const files[] = {"hwloc/nvidiaDGX2.xml", "hwloc/power8gpudistances.xml"};

        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                struct topo *t = load(files[i]), *t2 = NULL;
                struct topo_error err = {0};
                char *json = NULL;
                size_t len;

                assert_int_equal(topo_to_annotation(t, &json, &len), 0);
                assert_int_equal(topo_parse_annotation(json, len, &t2, &err), 0);
                assert_true(topo_equal(t, t2));
                free(json);
                topo_unref(t);
                topo_unref(t2);
        }
}

static void
hwloc_rejects_hostile_xml(void **state)
{
        static const char nul[] = "<?xml version=\"1.0\"?>\0<topology version=\"2.0\"/>";
        static const struct {
                const char *name, *xml;
                size_t len;
                int r;
                const char *msg;
        } cases[] = {
                {"empty", "", 0, -EINVAL, "Empty"},
                {"not XML", "GPU0 GPU1 X NV12", 16, -EINVAL, "no element"},
                {"truncated XML",
                 "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object "
                 "type=\"Machine\"",
                 0, -EINVAL, "not closed"},
                {"NUL byte", nul, sizeof(nul) - 1, -EINVAL, "NUL byte"},
                {"future version",
                 "<?xml version=\"1.0\"?>\n<topology version=\"4.0\">\n</topology>", 0,
                 -EPROTONOSUPPORT, "version 4.0"},
                {"malformed v3 osdev type",
                 "<?xml version=\"1.0\"?>\n<topology version=\"3.0\">"
                 "<object type=\"OSDev\" osdev_type=\"x\"/></topology>",
                 0, -EINVAL, "Malformed osdev_type"},
                {"machine without GPUs",
                 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n"
                 "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
                 "allowed_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\" "
                 "allowed_nodeset=\"0x1\" gp_index=\"1\">\n"
                 "    <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x1\" "
                 "complete_cpuset=\"0x1\" "
                 "nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"3\" "
                 "local_memory=\"1000000\"/>\n"
                 "    <object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
                 "nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"2\"/>\n"
                 "  </object>\n</topology>\n",
                 0, -ENODEV, "no NVIDIA or AMD GPU"},
                /* test/fuzz/fuzz-hwloc: hwloc 2.9 dereferences NULL on these. */
                {"NUMA node without complete_nodeset (fuzz crash)",
                 "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n"
                 "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
                 "nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"1\">\n"
                 "    <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x1\" "
                 "complete_cpuset=\"0x1\" nodeset=\"0x1\"/>\n"
                 "  </object>\n</topology>\n",
                 0, -EINVAL, "without complete_nodeset"},
                {"cpuset without complete_cpuset",
                 "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n"
                 "  <object\ttype=\"Machine\"\ncpuset=\"0x1\" nodeset=\"0x1\" "
                 "complete_nodeset=\"0x1\"/>\n</topology>\n",
                 0, -EINVAL, "cpuset without complete_cpuset"},
                {"start tag cut short (fuzz crash in hwloc's XML reader)",
                 "<topologyversion=\"2.0", 0, -EINVAL, "bad element name"},
                {"single-quoted attribute", "<topology version='2.0'/>", 0, -EINVAL,
                 "not name=\"value\""},
                {"unknown entity", "<topology version=\"&bogus;\"/>", 0, -EINVAL,
                 "bad attribute value"},
                {"end tag that does not match", "<topology version=\"2.0\"></object>", 0,
                 -EINVAL, "does not match"},
                {"element that is not closed",
                 "<topology version=\"2.0\"><object type=\"Misc\">", 0,
                 -EINVAL, "not closed"},
                {"attribute given twice (fuzz crash)",
                 "<topology><object type=\"Machine\" cpuset=\"1\" complete_cpuset=\"1\" "
                 "nodeset=\"1\" complete_nodeset=\"1\" cpuset=\"2\"/></topology>", 0,
                 -EINVAL, "given twice"},
                {"declaration that swallows markup (fuzz crash)",
                 "<?xml version=\"1.0\" encoding=\"U>\n<topology version=\"2.0\"/>?>"
                 "<topology version=\"2.0\"/>", 0, -EINVAL, "bad declaration"},
                {"internal DTD subset",
                 "<!DOCTYPE topology [<!ENTITY a \"b\">]><topology version=\"2.0\"/>", 0,
                 -EINVAL, "bad declaration"},
                {"object with a cpuset but no nodeset (fuzz crash)",
                 "<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"01\" "
                 "complete_cpuset=\"1\" nodeset=\"1\" complete_nodeset=\"1\"> "
                 "<object type=\"Group\" cpuset=\"00\" "
                 "complete_cpuset=\"0\"><object type=\"NU\" cpuset=\"01\" "
                 "complete_cpuset=\"0\" nodeset=\"1\" c3=\"1\" complete_nodeset=\"4\"/>"
                 "</object> </object></topology>",
                 0, -EINVAL, "cpuset without nodeset"},
                {"PU without os_index (fuzz: a 512 MiB bitmap in hwloc)",
                 "<topology><object type=\"Machine\" cpuset=\"3\" complete_cpuset=\"3\" "
                 "nodeset=\"1\" complete_nodeset=\"1\"><object type=\"PU\" cpuset=\"0\" "
                 "complete_cpuset=\"0\" nodeset=\"1\" complete_nodeset=\"1\"/></object>"
                 "</topology>",
                 0, -EINVAL, "without os_index"},
                {"abbreviated type (fuzz: hwloc reads \"NU\" as a NUMA node, 512 MiB)",
                 "<topology><object type=\"Machine\" cpuset=\"1\" complete_cpuset=\"1\" "
                 "nodeset=\"0\" complete_nodeset=\"0\"><object type=\"NU\"/></object>"
                 "</topology>",
                 0, -EINVAL, "unknown type \"NU\""},
                {"object without a type", "<topology><object os_index=\"1\"/></topology>", 0,
                 -EINVAL, "without a type"},
                {"os_index past the cap",
                 "<topology><object type=\"NUMANode\" os_index=\"4294967295\"/></topology>",
                 0, -EINVAL, "os_index not in"},
                {"set with a leading comma (fuzz: an assertion in hwloc's bitmap parser)",
                 "<topology><object nodeset=\",0\" complete_nodeset=\"2\"/></topology>", 0,
                 -EINVAL, "malformed nodeset"},
                {"allowed_cpuset with a leading comma (fuzz, 2026-11-24: the same assertion; "
                 "only the four sets of an object were checked)",
                 "<topology><object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" "
                 "complete_cpuset=\"0x1\" allowed_cpuset=\",0x1\" nodeset=\"0x1\" "
                 "complete_nodeset=\"0x1\" allowed_nodeset=\"0x1\"/></topology>",
                 0, -EINVAL, "malformed allowed_cpuset"},
                {"attribute name outside hwloc's [a-z_] (fuzz, 2026-11-24: hwloc 2.9 left the "
                 "object half-built and dereferenced NULL in hwloc_bitmap_or)",
                 "<topology><object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" "
                 "complete_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\">"
                 "<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x1\" "
                 "complete_cpuset=\"0x1\" nodeset=\"0x1\" a1=\"1\" complete_nodeset=\"0x1\"/>"
                 "</object></topology>",
                 0, -EINVAL, "an attribute that is not name=\"value\""},
                {"element name in upper case", "<topology><Object type=\"Machine\"/></topology>",
                 0, -EINVAL, "a bad element name"},
                {"distance matrix of 6111...1 objects (fuzz, 2026-11-24: hwloc allocated "
                 "nbobjs^2 values, over 4 GiB)",
                 "<topology><object type=\"Machine\" os_index=\"0\"/>"
                 "<distances2hetero nbobjs=\"6111111111111111111\" kind=\"25\"/></topology>",
                 0, -EINVAL, "nbobjs not in 1..1024"},
                {"length past the document",
                 "<topology><object type=\"Machine\" os_index=\"0\"/>"
                 "<distances2 nbobjs=\"2\"><indexes length=\"99999\">0 1</indexes>"
                 "</distances2></topology>",
                 0, -EINVAL, "length longer than the document"},
                {"cpuset outside its complete_cpuset (fuzz, 2026-11-24: NULL in hwloc_bitmap_or)",
                 "<topology><object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" "
                 "complete_cpuset=\"0x2\" nodeset=\"0x1\" complete_nodeset=\"0x1\"/></topology>",
                 0, -EINVAL, "a set outside its complete set"},
                {"nodeset outside its complete_nodeset, in a higher word",
                 "<topology><object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" "
                 "complete_cpuset=\"0xf...f\" nodeset=\"0x1,,0x0\" complete_nodeset=\"0x1\"/>"
                 "</topology>",
                 0, -EINVAL, "a set outside its complete set"},
                {"cpukind set with a leading comma",
                 "<topology><object type=\"Machine\" os_index=\"0\"/>"
                 "<cpukind cpuset=\",0x1\"/></topology>",
                 0, -EINVAL, "malformed cpuset"},
                {"set word wider than 32 bits",
                 "<topology><object cpuset=\"0x123456789\" complete_cpuset=\"1\"/></topology>",
                 0, -EINVAL, "malformed cpuset"},
                {"set that is not a bitmap",
                 "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n"
                 "  <object type=\"Machine\" cpuset=\"0x1\" complete_cpuset=\"0x00:00.0\"/>\n"
                 "</topology>\n",
                 0, -EINVAL, "malformed complete_cpuset"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct topo *t = (struct topo *)0x1;
                struct topo_error err = {0};
                size_t len = cases[i].len ? cases[i].len : strlen(cases[i].xml);
                int r = topo_hwloc_load_xml(cases[i].xml, len, &t, &err);

                print_message("# %s: %d %s\n", cases[i].name, r, err.msg);
                assert_int_equal(r, cases[i].r);
                assert_ptr_equal(t, (struct topo *)0x1);
                assert_non_null(strstr(err.msg, cases[i].msg));
        }
        struct topo *t = NULL;
        struct topo_error err = {0};
        assert_int_equal(topo_hwloc_load_xml("x", TOPO_MAX_XML_BYTES + 1, &t, &err), -E2BIG);
}

static void
hwloc_live_machine_loads_or_says_it_has_no_gpu(void **state)
{
        struct topo *t = NULL;
        struct topo_error err = {0};
        int r = topo_hwloc_load_live(&t, &err);

        print_message("# live: %d %s\n", r, r < 0 ? err.msg : "");
        if (r == -ENODEV) {
                assert_null(t);
                assert_non_null(strstr(err.msg, "no NVIDIA or AMD GPU"));
                return;
        }
        assert_int_equal(r, 0);
        assert_true(t->n_gpus > 0);
        for (unsigned i = 0; i < t->n_gpus; i++)
                assert_int_equal(topo_pair(t, i, i)->link, TOPO_LINK_SELF);
        topo_unref(t);
}

int
main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(hwloc_joins_every_dgx2_gpu_pair_through_the_nvswitch_fabric),
                cmocka_unit_test(hwloc_reads_power8_nvlink_pairs_and_cross_socket_pcie),
                cmocka_unit_test(hwloc_derives_each_pcie_relation_from_the_pci_tree),
                cmocka_unit_test(hwloc_reads_amd_xgmi_links_and_hops),
                cmocka_unit_test(hwloc_topologies_round_trip_through_the_annotation),
                cmocka_unit_test(hwloc_rejects_hostile_xml),
                cmocka_unit_test(hwloc_live_machine_loads_or_says_it_has_no_gpu),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
