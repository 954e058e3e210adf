/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the plugin's pure parts (the topofit.io/gpus parser, the pod cache and its
 * admission match, the fallback, pod JSON) and of discovery: the real matrices in
 * test/data/topologies and hwloc XML in test/data/hwloc through --topology-file, NVML through
 * test/fake-nvml.c (a stand-in libnvidia-ml built by this suite), and nvidia-smi through
 * test/data/plugin/fake-nvidia-smi.  The fake kubelet test is test-plugin-kubelet.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "buf.h"
#include "api.pb-c.h"
#include "dp-private.h"
#include "dp.h"
#include "podresources.pb-c.h"
#include "topo-test-util.h"

#define N_DEV 8

static struct dp_device devs[N_DEV];

static void
make_devices(void)
{
        for (unsigned i = 0; i < N_DEV; i++) {
                snprintf(devs[i].id, sizeof(devs[i].id), "GPU-%u", i);
                devs[i].healthy = true;
        }
}

static struct topo_mask
mask_of(const char *list)
{
        struct topo_mask m;
        assert_int_equal(topo_mask_parse(list, N_DEV, &m), 0);
        return m;
}

static const char *
path_in(const char *envvar, const char *rel, char *buf, size_t size)
{
        const char *root = getenv(envvar);
        assert_non_null(root);
        snprintf(buf, size, "%s/%s", root, rel);
        return buf;
}

/* --- topofit.io/gpus ------------------------------------------------------------------- */

/* The one form (docs/annotations.md): the extender's versioned record.  V1(C) wraps
 * containers, CT(name, indices, uuids) is one container. */
#define V1(containers) "{\"version\":1,\"containers\":[" containers "]}"
#define CT(name, indices, uuids) \
        "{\"name\":\"" name "\",\"indices\":[" indices "],\"uuids\":[" uuids "]}"

static void
plugin_parses_gpus_annotations_and_refuses_untrusted_ones(void **state)
{
        static const struct {
                const char *value;
                int ret;
                unsigned n_sets;
                const char *set0;
                const char *container0;
        } cases[] = {
                /* The extender's format (topology/topo-gpus.c, topo_gpus_encode). */
                { "{\"version\":1,\"node\":\"node-1\",\"containers\":[{\"name\":\"main\","
                  "\"indices\":[1,3],\"uuids\":[\"GPU-1\",\"GPU-3\"]}]}", 0, 1, "1,3", "main" },
                { V1(CT("main", "0,1", "\"GPU-4\",\"GPU-5\"")), 0, 1, "4,5", "main" }, /* UUIDs win */
                { V1(CT("main", "6", "\"GPU-6\"") "," CT("side", "7,1", "\"GPU-7\",\"GPU-1\"")), 0, 2,
                  "6", "main" },
                { "{\"version\":1,\"node\":\"node-1\",\"containers\":[{\"name\":\"a\","
                  "\"indices\":[2],\"uuids\":[\"\"]}]}", 0, 1, "2", "a" },  /* no UUIDs known */
                { "{\"version\":1,\"containers\":[{\"name\":\"setup\",\"init\":true,"
                  "\"indices\":[0],\"uuids\":[\"GPU-0\"]},{\"name\":\"main\",\"indices\":[0,1],"
                  "\"uuids\":[\"GPU-0\",\"GPU-1\"]}]}", 0, 2, "0", "setup" }, /* init reuses */
                /* Forms the docs do not define are refused (the plugin used to read a UUID
                 * list, a JSON array and a container map: nothing writes them). */
                { "GPU-1,GPU-3", -EINVAL, 0, NULL, NULL },
                { " GPU-2 , GPU-0 ", -EINVAL, 0, NULL, NULL },
                { "[\"GPU-4\",\"GPU-5\"]", -EINVAL, 0, NULL, NULL },
                { "{\"main\":[\"GPU-6\"],\"side\":\"GPU-7,GPU-1\"}", -EPROTONOSUPPORT, 0, NULL, NULL },
                /* Untrusted content. */
                { V1(CT("m", "1", "\"GPU-9\"")), -EINVAL, 0, NULL, NULL },   /* not on this node */
                { V1(CT("m", "1,1", "\"GPU-1\",\"GPU-1\"")), -EINVAL, 0, NULL, NULL }, /* twice */
                { V1(CT("m", "1,1", "\"\",\"\"")), -EINVAL, 0, NULL, NULL },  /* index twice */
                { V1(CT("a", "1", "\"GPU-1\"") "," CT("b", "1", "\"GPU-1\"")), -EINVAL, 0, NULL,
                  NULL },                                                     /* shared */
                { "", -EINVAL, 0, NULL, NULL },
                { "[]", -EINVAL, 0, NULL, NULL },
                { "{}", -EPROTONOSUPPORT, 0, NULL, NULL },
                { V1(CT("m", "", "")), -EINVAL, 0, NULL, NULL },              /* empty set */
                { V1(CT("m", "1.5", "")), -EINVAL, 0, NULL, NULL },
                { V1("{\"name\":\"m\",\"init\":1,\"indices\":[1]}"), -EINVAL, 0, NULL, NULL },
                { "{\"version\":1,\"containers\":[", -EINVAL, 0, NULL, NULL }, /* malformed JSON */
                { "{\"version\":2,\"containers\":[]}", -EPROTONOSUPPORT, 0, NULL, NULL },
                { "{\"version\":1,\"node\":\"node-2\",\"containers\":[{\"name\":\"m\","
                  "\"indices\":[1],\"uuids\":[\"GPU-1\"]}]}", -EINVAL, 0, NULL, NULL }, /* not us */
                /* An index past the node: -ERANGE, the one codec's code (the extender's). */
                { "{\"version\":1,\"containers\":[{\"name\":\"m\",\"indices\":[8]}]}", -ERANGE, 0,
                  NULL, NULL },
                { "{\"version\":1,\"containers\":[{\"name\":\"m\",\"indices\":[1],"
                  "\"uuids\":[\"GPU-9\"]}]}", -EINVAL, 0, NULL, NULL }, /* foreign UUID wins */
                { "{\"version\":1,\"containers\":{}}", -EINVAL, 0, NULL, NULL },
                { "{\"version\":1,\"containers\":[]}", -EINVAL, 0, NULL, NULL },
                /* The duplicate-key rule (common/json.h). */
                { "{\"version\":1,\"version\":1,\"containers\":[{\"indices\":[1]}]}", -EINVAL, 0,
                  NULL, NULL },
                { V1("{\"name\":\"m\",\"indices\":[1],\"indices\":[2]}"), -EINVAL, 0, NULL, NULL },
        };
        struct dp_cache c;
        struct dp_pod_set sets[DP_MAX_POD_SETS];

        (void)state;
        make_devices();
        assert_int_equal(dp_cache_init(&c, devs, N_DEV), 0);
        snprintf(c.node, sizeof(c.node), "node-1");
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *why = NULL;
                unsigned n = 99;
                int r = dp_parse_gpus_annotation(&c, cases[i].value, strlen(cases[i].value), sets,
                                                 &n, &why);
                if (r != cases[i].ret)
                        fail_msg("case %zu (%s): got %d, want %d", i, cases[i].value, r, cases[i].ret);
                if (r < 0) {
                        assert_non_null(why);
                        assert_int_equal(n, 99); /* untouched on failure */
                        continue;
                }
                assert_int_equal(n, cases[i].n_sets);
                struct topo_mask want = mask_of(cases[i].set0);
                assert_true(topo_mask_equal(&sets[0].gpus, &want));
                assert_string_equal(sets[0].container, cases[i].container0);
        }
        /* Oversized values are refused before any parsing. */
        char *big = malloc(TOPO_GPUS_MAX_BYTES + 2);
        memset(big, 'x', TOPO_GPUS_MAX_BYTES + 1);
        big[TOPO_GPUS_MAX_BYTES + 1] = '\0';
        unsigned n = 0;
        assert_int_equal(dp_parse_gpus_annotation(&c, big, strlen(big), sets, &n, NULL), -E2BIG);
        free(big);
        /* DP_MAX_POD_SETS (= TOPO_GPUS_MAX_CONTAINERS) init containers fit; one more does not. */
        struct buf b;
        buf_init(&b, TOPO_GPUS_MAX_BYTES);
        assert_int_equal(buf_puts(&b, "{\"version\":1,\"containers\":["), 0);
        for (unsigned k = 0; k < DP_MAX_POD_SETS; k++)
                assert_int_equal(buf_printf(&b, "%s{\"init\":true,\"indices\":[0]}", k ? "," : ""), 0);
        assert_int_equal(buf_puts(&b, "]}"), 0);
        assert_int_equal(dp_parse_gpus_annotation(&c, b.data, b.len, sets, &n, NULL), 0);
        assert_int_equal(n, DP_MAX_POD_SETS);
        b.len -= 2;
        assert_int_equal(buf_puts(&b, ",{\"init\":true,\"indices\":[0]}]}"), 0);
        assert_int_equal(dp_parse_gpus_annotation(&c, b.data, b.len, sets, &n, NULL), -E2BIG);
        buf_release(&b);
        dp_cache_release(&c);
}

/* --- the cache and the match ------------------------------------------------------------- */

static void
add_pod(struct dp_cache *c, const char *name, const char *gpus, bool pending, bool live)
{
        struct dp_pod p = { 0 };
        snprintf(p.uid, sizeof(p.uid), "uid-%s", name);
        snprintf(p.ns, sizeof(p.ns), "default");
        snprintf(p.name, sizeof(p.name), "%s", name);
        p.pending = pending;
        p.live = live;
        /* gpus: "GPU-a,GPU-b" as one container's UUIDs in the versioned record. */
        char rec[512] = "{\"version\":1,\"containers\":[{\"name\":\"main\",\"uuids\":[";
        for (const char *s = gpus; *s;) {
                size_t k = strcspn(s, ",");
                snprintf(rec + strlen(rec), sizeof(rec) - strlen(rec), "%s\"%.*s\"",
                         s == gpus ? "" : ",", (int)k, s);
                s += k + (s[k] == ',');
        }
        strcat(rec, "]}]}");
        assert_int_equal(dp_parse_gpus_annotation(c, rec, strlen(rec), p.sets, &p.n_sets, NULL), 0);
        assert_int_equal(dp_cache_upsert(c, &p), 0);
}

static void
plugin_match_finds_the_pending_pod_whose_set_fits_the_offer(void **state)
{
        static const struct {
                const char *available;
                const char *must;
                unsigned size;
                const char *want_pod; /* NULL: no match */
                const char *want_set;
        } cases[] = {
                { "0,1,2,3,4,5,6,7", "", 1, "one", "5" },
                { "0,1,2,3,4,5,6,7", "", 2, "pair", "1,4" },
                { "0,1,2,3,4,6,7", "", 1, NULL, NULL },         /* GPU 5 already taken */
                { "0,1,2,3,5,6,7", "", 2, NULL, NULL },         /* pair's GPU 4 taken */
                { "0,1,2,3,4,5,6,7", "4", 2, "pair", "1,4" },   /* must inside the set */
                { "0,1,2,3,4,5,6,7", "0", 2, NULL, NULL },      /* must outside every set */
                { "0,1,2,3,4,5,6,7", "", 3, NULL, NULL },       /* no pod of that size */
                { "0,1,2,3,4,5,6,7", "", 4, "quad", "0,2,3,6" },
        };
        struct dp_cache c;

        (void)state;
        make_devices();
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct topo_mask avail = mask_of(cases[i].available), must, got;
                const char *pod = NULL;
                int r;

                if (cases[i].must[0])
                        must = mask_of(cases[i].must);
                else
                        topo_mask_clear(&must);
                assert_int_equal(dp_cache_init(&c, devs, N_DEV), 0);
                add_pod(&c, "one", "GPU-5", true, true);
                add_pod(&c, "pair", "GPU-1,GPU-4", true, true);
                add_pod(&c, "quad", "GPU-0,GPU-2,GPU-3,GPU-6", true, true);
                add_pod(&c, "running", "GPU-7", false, true);   /* admitted long ago */
                add_pod(&c, "done", "GPU-7,GPU-6", false, false);
                r = dp_cache_match(&c, &avail, &must, cases[i].size, 1000, &got, &pod);
                if (!cases[i].want_pod) {
                        if (r != -ENOENT)
                                fail_msg("case %zu: matched %s", i, pod);
                } else {
                        struct topo_mask want = mask_of(cases[i].want_set);
                        if (r != 0)
                                fail_msg("case %zu: no match, want %s", i, cases[i].want_pod);
                        assert_string_equal(pod, cases[i].want_pod);
                        assert_true(topo_mask_equal(&got, &want));
                }
                dp_cache_release(&c);
        }
}

static void
plugin_forgotten_offers_put_the_oldest_pod_first_again(void **state)
{
        struct dp_cache c;
        struct topo_mask avail = mask_of("0,1,2,3,4,5,6,7"), none, a;
        const char *pa = NULL;

        (void)state;
        make_devices();
        topo_mask_clear(&none);
        assert_int_equal(dp_cache_init(&c, devs, N_DEV), 0);
        add_pod(&c, "first", "GPU-0,GPU-1", true, true);
        add_pod(&c, "second", "GPU-2,GPU-3", true, true);
        /* "first" was offered to a kubelet that then restarted: without forgetting, the new
         * kubelet's admission of "first" would get the never-offered "second"'s set. */
        assert_int_equal(dp_cache_match(&c, &avail, &none, 2, 1000, &a, &pa), 0);
        assert_string_equal(pa, "first");
        assert_int_equal(dp_cache_match(&c, &avail, &none, 2, 1001, &a, &pa), 0);
        assert_string_equal(pa, "second");
        assert_int_equal(dp_cache_match(&c, &avail, &none, 2, 1002, &a, &pa), 0);
        assert_string_equal(pa, "first");
        dp_cache_forget_offers(&c);
        for (unsigned i = 0; i < c.n_pods; i++)
                assert_int_equal(c.pods[i].offer_seq, 0);
        assert_int_equal(dp_cache_match(&c, &avail, &none, 2, 1003, &a, &pa), 0);
        assert_string_equal(pa, "first");
        assert_true(topo_mask_equal(&a, &(struct topo_mask){ .w = { 0x3 } }));
        dp_cache_release(&c);
}

static void
plugin_sized_cache_refuses_the_pod_past_its_room(void **state)
{
        struct dp_cache c;
        struct dp_pod p = { 0 };

        (void)state;
        make_devices();
        assert_int_equal(dp_cache_init_sized(&c, devs, N_DEV, 0), -EINVAL);
        assert_int_equal(dp_cache_init_sized(&c, devs, N_DEV, DP_MAX_PODS + 1), -EINVAL);
        assert_int_equal(dp_cache_init_sized(&c, devs, N_DEV, 2), 0);
        add_pod(&c, "first", "GPU-0", true, true);
        add_pod(&c, "second", "GPU-1", true, true);
        snprintf(p.uid, sizeof(p.uid), "uid-third");
        assert_int_equal(dp_cache_upsert(&c, &p), -ENOSPC);
        /* A pod already cached is still updated in a full cache. */
        snprintf(p.uid, sizeof(p.uid), "uid-first");
        p.live = true;
        assert_int_equal(dp_cache_upsert(&c, &p), 0);
        assert_int_equal(c.n_pods, 2);
        dp_cache_release(&c);
        assert_int_equal(dp_cache_init(&c, devs, N_DEV), 0);
        assert_int_equal(c.max_pods, DP_MAX_PODS);
        dp_cache_release(&c);
}

static void
plugin_racing_admissions_on_one_offer_get_different_pods(void **state)
{
        struct dp_cache c;
        struct topo_mask avail = mask_of("0,1,2,3,4,5,6,7"), none, a, b, x;
        const char *pa = NULL, *pb = NULL, *px = NULL;

        (void)state;
        make_devices();
        topo_mask_clear(&none);
        assert_int_equal(dp_cache_init(&c, devs, N_DEV), 0);
        add_pod(&c, "first", "GPU-0,GPU-1", true, true);
        add_pod(&c, "second", "GPU-2,GPU-3", true, true);
        /* Two requests with the same offer: the oldest pod, then the other one. */
        assert_int_equal(dp_cache_match(&c, &avail, &none, 2, 1000, &a, &pa), 0);
        assert_int_equal(dp_cache_match(&c, &avail, &none, 2, 1001, &b, &pb), 0);
        assert_string_equal(pa, "first");
        assert_string_equal(pb, "second");
        /* Both offered: the least recently offered comes next, round-robin. */
        assert_int_equal(dp_cache_match(&c, &avail, &none, 2, 1002, &x, &px), 0);
        assert_string_equal(px, "first");
        /* After the TTL, offers are forgotten and age decides again. */
        assert_int_equal(dp_cache_match(&c, &avail, &none, 2, 1002 + DP_OFFER_TTL_MS, &x, &px), 0);
        assert_string_equal(px, "first");
        assert_int_equal(dp_cache_match(&c, &avail, &none, 2, 1003 + DP_OFFER_TTL_MS, &x, &px), 0);
        assert_string_equal(px, "second");
        /* Updating a pod keeps its age and offer. */
        add_pod(&c, "first", "GPU-0,GPU-1", true, true);
        assert_int_equal(c.n_pods, 2);
        assert_int_equal(dp_cache_remove(&c, "uid-first"), 0);
        assert_int_equal(dp_cache_remove(&c, "uid-first"), -ENOENT);
        assert_null(dp_cache_find(&c, "default", "first"));
        assert_non_null(dp_cache_find(&c, "default", "second"));
        dp_cache_release(&c);
}

static void
plugin_fallback_without_scoring_keeps_must_and_takes_lowest_indices(void **state)
{
        static const struct {
                const char *available;
                const char *must;
                unsigned size;
                int ret;
                const char *want;
        } cases[] = {
                { "2,4,6,7", "", 2, 0, "2,4" },
                { "2,4,6,7", "6", 2, 0, "2,6" },
                { "2,4,6,7", "6,7", 2, 0, "6,7" },
                { "2,4", "", 3, -ENOSPC, NULL },
                { "2,4,6", "2,4,6", 2, -ENOSPC, NULL },  /* must larger than the request */
        };

        (void)state;
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct topo_mask avail = mask_of(cases[i].available), must, got;
                int r;

                if (cases[i].must[0])
                        must = mask_of(cases[i].must);
                else
                        topo_mask_clear(&must);
                r = dp_fallback_set(NULL, &avail, &must, cases[i].size, N_DEV, &got);
                if (r != cases[i].ret)
                        fail_msg("case %zu: got %d want %d", i, r, cases[i].ret);
                if (r == 0) {
                        struct topo_mask want = mask_of(cases[i].want);
                        assert_true(topo_mask_equal(&got, &want));
                }
        }
}

static void
plugin_join_ids_refuses_a_buffer_too_small(void **state)
{
        const char *ids[] = { "GPU-a", "GPU-bb" };
        char buf[32];

        (void)state;
        assert_int_equal(dp_join_ids(ids, 2, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "GPU-a,GPU-bb");
        assert_int_equal(dp_join_ids(ids, 2, buf, 12), -E2BIG);
        assert_int_equal(dp_join_ids(ids, 2, buf, 13), 0);
        assert_int_equal(dp_join_ids(ids, 0, buf, 1), 0);
        assert_string_equal(buf, "");
}

/* --- wire messages (dp-private.h): what the gRPC transport does with the kubelet's bytes ---- */

static int
wire_check(void *userdata, const char *const *ids, unsigned n)
{
        (void)userdata;
        for (unsigned i = 0; i < n; i++)
                if (strncmp(ids[i], "GPU-", 4) != 0)
                        return -ENODEV;
        return 0;
}

static void
plugin_wire_answers_allocate_and_refuses_bad_messages(void **state)
{
        static const struct dp_handlers h = { NULL, NULL, wire_check };
        char *ids0[] = { "GPU-0", "GPU-1" }, *bad[] = { "GPU-0", "fpga-0" };
        V1beta1__ContainerAllocateRequest c = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest *cp[1] = { &c };
        V1beta1__AllocateRequest q = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__AllocateResponse *a;
        uint8_t in[256], *out = NULL;
        size_t len, out_len = 0;
        const char *why = NULL;

        (void)state;
        c.n_devices_ids = 2;
        c.devices_ids = ids0;
        q.n_container_requests = 1;
        q.container_requests = cp;
        len = v1beta1__allocate_request__pack(&q, in);
        assert_int_equal(dp__allocate_answer(&h, in, len, &out, &out_len, &why), 0);
        a = v1beta1__allocate_response__unpack(NULL, out_len, out);
        assert_non_null(a);
        assert_int_equal(a->n_container_responses, 1);
        assert_string_equal(a->container_responses[0]->envs[0]->value, "GPU-0,GPU-1");
        assert_string_equal(a->container_responses[0]->cdi_devices[1]->name, "nvidia.com/gpu=GPU-1");
        v1beta1__allocate_response__free_unpacked(a, NULL);
        free(out);
        out = NULL;

        c.devices_ids = bad;
        len = v1beta1__allocate_request__pack(&q, in);
        assert_int_equal(dp__allocate_answer(&h, in, len, &out, &out_len, &why), -ENODEV);
        assert_string_equal(why, "a device ID is not a GPU of this node");
        assert_null(out);

        /* A truncated message, and a field of the wrong wire type, are malformed. */
        assert_int_equal(dp__allocate_answer(&h, in, len - 1, &out, &out_len, &why), -EINVAL);
        assert_string_equal(why, "malformed AllocateRequest");
        assert_int_equal(dp__preferred_answer(&h, (const uint8_t *)"\x08\x01", 2, &out, &out_len, &why),
                         -EINVAL);
        assert_int_equal(dp__podresources_decode((const uint8_t *)"\x0a\x05", 2, "nvidia.com/gpu", NULL,
                                                 NULL, &why),
                         -EBADMSG);
        assert_null(out);
}

static void
plugin_wire_podresources_gathers_one_record_per_container(void **state)
{
        char *g01[] = { "GPU-0", "GPU-1" }, *g2[] = { "GPU-2" }, *f[] = { "fpga-0" };
        V1__ContainerDevices d[3] = { V1__CONTAINER_DEVICES__INIT, V1__CONTAINER_DEVICES__INIT,
                                      V1__CONTAINER_DEVICES__INIT };
        V1__ContainerDevices *dp[3] = { &d[0], &d[1], &d[2] };
        V1__ContainerResources cr = V1__CONTAINER_RESOURCES__INIT;
        V1__ContainerResources *crp[1] = { &cr };
        V1__PodResources pr = V1__POD_RESOURCES__INIT;
        V1__PodResources *prp[1] = { &pr };
        V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
        struct dp_container_devices *cd = NULL;
        uint8_t buf[512];
        size_t n = 0, len;
        const char *why = NULL;

        (void)state;
        d[0] = (V1__ContainerDevices)V1__CONTAINER_DEVICES__INIT;
        d[0].resource_name = "nvidia.com/gpu";
        d[0].n_device_ids = 2;
        d[0].device_ids = g01;
        d[1] = d[0];
        d[1].n_device_ids = 1;
        d[1].device_ids = g2;
        d[2] = d[0];
        d[2].resource_name = "example.com/fpga";
        d[2].n_device_ids = 1;
        d[2].device_ids = f;
        cr.name = "main";
        cr.n_devices = 3;
        cr.devices = dp;
        pr.name = "train";
        pr.namespace_ = "ml";
        pr.n_containers = 1;
        pr.containers = crp;
        resp.n_pod_resources = 1;
        resp.pod_resources = prp;
        assert_true(v1__list_pod_resources_response__get_packed_size(&resp) <= sizeof(buf));
        len = v1__list_pod_resources_response__pack(&resp, buf);
        assert_int_equal(dp__podresources_decode(buf, len, "nvidia.com/gpu", &cd, &n, &why), 0);
        assert_int_equal(n, 1);
        assert_string_equal(cd[0].ns, "ml");
        assert_string_equal(cd[0].pod, "train");
        assert_string_equal(cd[0].container, "main");
        assert_int_equal(cd[0].n_ids, 3);
        assert_string_equal(cd[0].ids[2], "GPU-2");
        dp_container_devices_free_array(cd, n);
}

/* --- pod JSON ------------------------------------------------------------------------------ */

static void
plugin_pod_json_phase_and_deletion_decide_pending_and_live(void **state)
{
        static const struct {
                const char *json;
                int ret;
                bool pending;
                bool live;
        } cases[] = {
                { "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"p\",\"annotations\":"
                  "{\"topofit.io/gpus\":\"{\\\"version\\\":1,\\\"containers\\\":[{\\\"uuids\\\":[\\\"GPU-1\\\"]}]}\"}},\"status\":{\"phase\":\"Pending\"}}", 1, true, true },
                { "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"p\",\"annotations\":"
                  "{\"topofit.io/gpus\":\"{\\\"version\\\":1,\\\"containers\\\":[{\\\"uuids\\\":[\\\"GPU-1\\\"]}]}\"}},\"status\":{\"phase\":\"Running\"}}", 1, false, true },
                { "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"p\",\"annotations\":"
                  "{\"topofit.io/gpus\":\"{\\\"version\\\":1,\\\"containers\\\":[{\\\"uuids\\\":[\\\"GPU-1\\\"]}]}\"}},\"status\":{\"phase\":\"Succeeded\"}}", 1, false, false },
                { "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"p\",\"deletionTimestamp\":"
                  "\"2026-01-01T00:00:00Z\",\"annotations\":{\"topofit.io/gpus\":\"{\\\"version\\\":1,\\\"containers\\\":[{\\\"uuids\\\":[\\\"GPU-1\\\"]}]}\"}}}", 1, false, false },
                { "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"p\"},\"status\":{}}", 0, true, true },
                { "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"p\",\"annotations\":"
                  "{\"topofit.io/gpus\":\"{\\\"version\\\":1,\\\"containers\\\":[{\\\"uuids\\\":[\\\"GPU-77\\\"]}]}\"}}}", -EINVAL, false, false },
                { "{\"metadata\":{\"namespace\":\"n\",\"name\":\"p\"}}", -EINVAL, false, false },
                { "{\"metadata\":7}", -EINVAL, false, false },
                { "[]", -EINVAL, false, false },
                /* The duplicate-key rule (common/json.h): a repeated key that is read is
                 * refused (which GPU set or phase counts would depend on the reader); a
                 * repeat of one nobody reads is ignored. */
                { "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"p\",\"annotations\":"
                  "{\"topofit.io/gpus\":\"{\\\"version\\\":1,\\\"containers\\\":[{\\\"uuids\\\":[\\\"GPU-1\\\"]}]}\",\"topofit.io/gpus\":\"{\\\"version\\\":1,\\\"containers\\\":[{\\\"uuids\\\":[\\\"GPU-2\\\"]}]}\"}}}", -EINVAL, false, false },
                { "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"p\"},"
                  "\"status\":{\"phase\":\"Running\",\"phase\":\"Pending\"}}", -EINVAL, false, false },
                { "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"p\",\"labels\":{},"
                  "\"labels\":{}},\"status\":{}}", 0, true, true },
        };
        struct dp_cache c;

        (void)state;
        make_devices();
        assert_int_equal(dp_cache_init(&c, devs, N_DEV), 0);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                cJSON *o = cJSON_Parse(cases[i].json);
                struct dp_pod p;
                const char *why = NULL;
                int r;

                assert_non_null(o);
                r = dp_pod_from_json(&c, o, &p, &why);
                cJSON_Delete(o);
                if (r != cases[i].ret)
                        fail_msg("case %zu: got %d want %d (%s)", i, r, cases[i].ret, why ? why : "");
                if (r < 0) {
                        assert_non_null(why);
                        continue;
                }
                assert_int_equal(p.pending, cases[i].pending);
                assert_int_equal(p.live, cases[i].live);
        }
        dp_cache_release(&c);
}

static void
plugin_podlist_reload_keeps_age_and_drops_pods_gone(void **state)
{
        static const char *v1 =
                "{\"items\":[{\"metadata\":{\"uid\":\"a\",\"name\":\"a\",\"annotations\":{\"topofit.io/gpus\":\"{\\\"version\\\":1,\\\"containers\\\":[{\\\"uuids\\\":[\\\"GPU-0\\\"]}]}\"}}},"
                "{\"metadata\":{\"uid\":\"b\",\"name\":\"b\",\"annotations\":{\"topofit.io/gpus\":\"{\\\"version\\\":1,\\\"containers\\\":[{\\\"uuids\\\":[\\\"GPU-1\\\"]}]}\"}}},"
                "{\"metadata\":{\"uid\":\"x\",\"name\":\"x\",\"annotations\":{\"topofit.io/gpus\":\"{\\\"version\\\":1,\\\"containers\\\":[{\\\"uuids\\\":[\\\"GPU-99\\\"]}]}\"}}},"
                "{\"metadata\":{\"uid\":\"n\",\"name\":\"n\"}}]}";
        static const char *v2 =
                "[{\"metadata\":{\"uid\":\"b\",\"name\":\"b\",\"annotations\":{\"topofit.io/gpus\":\"{\\\"version\\\":1,\\\"containers\\\":[{\\\"uuids\\\":[\\\"GPU-1\\\"]}]}\"}}},"
                "{\"metadata\":{\"uid\":\"c\",\"name\":\"c\",\"annotations\":{\"topofit.io/gpus\":\"{\\\"version\\\":1,\\\"containers\\\":[{\\\"uuids\\\":[\\\"GPU-2\\\"]}]}\"}}}]";
        struct dp_cache c;
        const struct dp_pod *b;
        const char *why = NULL;

        (void)state;
        make_devices();
        assert_int_equal(dp_cache_init(&c, devs, N_DEV), 0);
        assert_int_equal(dp_cache_load_podlist(&c, v1, strlen(v1), &why), 0);
        assert_int_equal(c.n_pods, 2);   /* the foreign and the unannotated pods are not kept */
        assert_int_equal(c.rejected, 1);
        uint64_t seq_b = dp_cache_find(&c, "", "b")->seq;
        assert_int_equal(dp_cache_load_podlist(&c, v2, strlen(v2), &why), 0);
        assert_int_equal(c.n_pods, 2);
        assert_null(dp_cache_find(&c, "", "a"));
        b = dp_cache_find(&c, "", "b");
        assert_non_null(b);
        assert_int_equal(b->seq, seq_b);
        assert_true(dp_cache_find(&c, "", "c")->seq > seq_b);
        assert_int_equal(dp_cache_load_podlist(&c, "{\"items\":3}", 11, &why), -EINVAL);
        assert_int_equal(dp_cache_load_podlist(&c, "{", 1, &why), -EINVAL);
        dp_cache_release(&c);
}

/* --- discovery ------------------------------------------------------------------------------ */

static void
assert_round_trips(const struct topo *t)
{
        char *json = NULL;
        size_t len = 0;
        struct topo *back = NULL;
        struct topo_error err = { 0 };

        assert_int_equal(topo_to_annotation(t, &json, &len), 0);
        if (topo_parse_annotation(json, len, &back, &err) != 0)
                fail_msg("annotation not accepted: line %u: %s", err.line, err.msg);
        assert_true(topo_equal(t, back));
        topo_unref(back);
        free(json);
}

static void
plugin_discovers_every_shared_matrix_and_its_annotation_round_trips(void **state)
{
        /* GPU counts from test/data/topologies/INDEX.md; 0 = a PARTIAL capture whose cut-off
         * matrix must be refused with its position. */
        static const struct {
                const char *file;
                unsigned gpus;
        } cases[] = {
                { "a100-2gpu-della-amd.txt", 2 },
                { "a100-80gb-pcie-8gpu-nvlink-pairs-slurm-PARTIAL.txt", 0 },
                { "a100-pcie-4gpu-adroit.txt", 4 },
                { "a100-sxm4-80gb-8nic-roce-deepep.txt", 8 },
                { "a800-sxm4-8gpu-4nic.txt", 8 },
                { "alcf-polaris-a100-4gpu-nps4.txt", 4 },
                { "amd-instinct-8gpu-0x74a2-xgmi-ms-swift.txt", 8 },
                { "amd-mi210-4gpu-archer2-rocm-smi.txt", 4 },
                { "amd-mi300a-4apu-rocm-smi.txt", 4 },
                { "amd-mi50-4gpu-pcie-rocm-smi.txt", 4 },
                { "aws-p4d-24xlarge-a100-nv12.txt", 8 },
                { "dgx-a100-40gb-12nic-PARTIAL.txt", 0 },
                { "dgx-h100-12nic-talos.txt", 8 },
                { "dgx1-v100-sxm2-32gb-4nic-microway.txt", 8 },
                { "dgx1-v100-sxm2-oneflow.txt", 8 },
                { "dgx2-v100-16gpu-nv6-10nic-PARTIAL.txt", 0 },
                { "h100-sxm-4gpu-container-phb.txt", 4 },
                { "h20-8gpu-36nic-sriov-sglang.txt", 8 },
                { "h200-hgx-10nic-nchc-nano4.txt", 8 },
                { "h800-sxm-8gpu-9nic-sglang.txt", 8 },
                { "hgx-a100-4gpu-sxm4-nv4-della.txt", 4 },
                { "hgx-h100-13nic-mlx5ib-eth-penny.txt", 8 },
                { "hgx-nv18-8gpu-12nic-cpuset-mooncake.txt", 8 },
                { "hgx-nv18-8gpu-single-numa-12nic.txt", 8 },
                { "princeton-traverse-ac922-v100-nv3.txt", 4 },
                { "rtx3090-2gpu-nvlink-bridge-workstation.txt", 2 },
                { "rtx4090-8gpu-pcie-server.txt", 8 },
                { "rtx5090-2gpu-workstation-p2p.txt", 2 },
                { "tesla-k80-x2-mlx4-old-legend.txt", 4 },
                { "tesla-p4-single-gpu-numa-na-hami.txt", 1 },
                { "v100-sxm2-32gb-8gpu-vastai-newdriver.txt", 8 },
        };

        (void)state;
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char rel[256], path[1024];
                struct dp_discover_opts o = { 0 };
                struct dp_discover_report rep;
                struct topo *t = NULL;
                int r;

                snprintf(rel, sizeof(rel), "topologies/%s", cases[i].file);
                o.topology_file = path_in("TOPOFIT_TEST_DATA", rel, path, sizeof(path));
                r = dp_discover(&o, &t, &rep);
                if (cases[i].gpus == 0) {
                        if (r >= 0)
                                fail_msg("%s: a cut-off matrix was accepted", cases[i].file);
                        assert_non_null(strstr(rep.notes, " line "));
                        continue;
                }
                if (r < 0)
                        fail_msg("%s: %s", cases[i].file, rep.notes);
                assert_int_equal(rep.used, DP_SOURCE_FILE);
                assert_int_equal(t->n_gpus, cases[i].gpus);
                assert_round_trips(t);
                topo_unref(t);
        }
}

static void
plugin_discovers_shared_hwloc_xml_and_its_annotation_round_trips(void **state)
{
        static const struct {
                const char *file;
                unsigned gpus;
                bool nvlink;
        } cases[] = {
                { "hwloc/nvidiaDGX2.xml", 16, true },
                { "hwloc/power8gpudistances.xml", 4, true },
        };

        (void)state;
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char path[1024];
                struct dp_discover_opts o = { 0 };
                struct dp_discover_report rep;
                struct topo *t = NULL;
                bool nv = false;

                /* Both ways: as an operator's --topology-file and as the hwloc source. */
                o.topology_file = path_in("TOPOFIT_TEST_DATA", cases[i].file, path, sizeof(path));
                if (dp_discover(&o, &t, &rep) < 0)
                        fail_msg("%s: %s", cases[i].file, rep.notes);
                assert_int_equal(t->n_gpus, cases[i].gpus);
                for (unsigned a = 0; a < t->n_gpus; a++)
                        for (unsigned b = 0; b < t->n_gpus; b++)
                                nv |= a != b && topo_pair(t, a, b)->link == TOPO_LINK_NVLINK;
                assert_int_equal(nv, cases[i].nvlink);
                assert_round_trips(t);
                topo_unref(t);

                o = (struct dp_discover_opts){ .nvml_lib = "/nonexistent/libnvidia-ml.so.1",
                                               .nvidia_smi = "/nonexistent/nvidia-smi",
                                               .hwloc_xml = path };
                if (dp_discover(&o, &t, &rep) < 0)
                        fail_msg("%s: %s", cases[i].file, rep.notes);
                assert_int_equal(rep.used, DP_SOURCE_HWLOC);
                assert_true(rep.hwloc_ok);
                assert_false(rep.nvml_present);
                assert_int_equal(t->n_gpus, cases[i].gpus);
                topo_unref(t);
        }
}

/* Discovery through test/fake-nvml.so alone (no hwloc); fails the test when it finds nothing. */
static struct topo *
discover_with_fake_nvml(struct dp_discover_report *rep)
{
        char lib[1024];
        struct dp_discover_opts o = { .no_hwloc = true };
        struct topo *t = NULL;

        o.nvml_lib = path_in("TOPOFIT_BUILD_ROOT", "test/fake-nvml.so", lib, sizeof(lib));
        if (dp_discover(&o, &t, rep) < 0)
                fail_msg("fake NVML: %s", rep->notes);
        return t;
}

static void
plugin_nvml_discovery_reads_uuids_links_and_mig_from_the_library(void **state)
{
        static const struct {
                bool nvswitch;
                const char *links[4][4];
                unsigned nvcount; /* NVLink count on an NVLink pair */
        } cases[] = {
                { false, { { "X", "NV", "NODE", "SYS" }, { "NV", "X", "SYS", "SYS" },
                           { "NODE", "SYS", "X", "NV" }, { "SYS", "SYS", "NV", "X" } }, 4 },
                { true, { { "X", "NV", "NV", "NV" }, { "NV", "X", "NV", "NV" },
                          { "NV", "NV", "X", "NV" }, { "NV", "NV", "NV", "X" } }, 12 },
        };
        (void)state;
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct dp_discover_report rep;
                struct topo *t;
                char id[TOPO_ID_MAX];

                setenv("FAKE_NVML_NVSWITCH", cases[i].nvswitch ? "1" : "0", 1);
                t = discover_with_fake_nvml(&rep);
                assert_int_equal(rep.used, DP_SOURCE_NVML);
                assert_true(rep.nvml_present);
                assert_int_equal(rep.nvml_gpus, 4);
                assert_int_equal(t->n_gpus, 4);
                assert_int_equal(t->nvswitch, cases[i].nvswitch);
                for (unsigned a = 0; a < 4; a++) {
                        dp_device_id(t, a, id);
                        assert_non_null(strstr(id, "GPU-fa4e0000-"));
                        assert_string_equal(t->gpus[a].model, "NVIDIA A100-SXM4-40GB");
                        assert_int_equal(t->gpus[a].memory_mib, 40960);
                        assert_int_equal(t->gpus[a].mig, a == 3 ? TOPO_MIG_ENABLED : TOPO_MIG_DISABLED);
                        for (unsigned b = 0; b < 4; b++) {
                                const struct topo_pair *p = topo_pair(t, a, b);
                                const char *want = cases[i].links[a][b];
                                const char *got = topo_link_to_string((enum topo_link)p->link);
                                if (strncmp(got, want, strlen(want)) != 0)
                                        fail_msg("case %zu GPU%u-GPU%u: %s, want %s", i, a, b, got, want);
                                if (p->link == TOPO_LINK_NVLINK)
                                        assert_int_equal(p->links, cases[i].nvcount);
                        }
                }
                assert_string_equal(t->gpus[2].pci_bus_id, "00000000:47:00.0");
                assert_round_trips(t);
                topo_unref(t);
        }
        unsetenv("FAKE_NVML_NVSWITCH");
}

/* The multi-node NVLink domain from NVML's fabric info, spelt as GPU Feature Discovery
 * spells nvidia.com/gpu.clique; none unless every GPU is registered in the same clique,
 * successfully, with a cluster UUID. */
static void
plugin_nvml_discovery_reads_the_nvlink_domain_from_fabric_info(void **state)
{
        static const char *const vars[] = {
                "FAKE_NVML_FABRIC", "FAKE_NVML_FABRIC_V", "FAKE_NVML_FABRIC_V1",
                "FAKE_NVML_FABRIC_RC", "FAKE_NVML_FABRIC_STATUS", "FAKE_NVML_FABRIC_UUID",
        };
        static const struct {
                const char *env[ELEMENTSOF(vars)]; /* each of vars, NULL: unset */
                const char *domain, *note;
        } cases[] = {
                { { NULL }, "", "nvml: no multi-node NVLink fabric" },
                { { "3 7 7 7 7" }, "8f3a1c52-9b04-4e71-a26d-33c05e18f709.7",
                  "nvml: NVLink domain 8f3a1c52-9b04-4e71-a26d-33c05e18f709.7" },
                /* the v1 call where V is missing */
                { { "3 4294967295 4294967295 4294967295 4294967295", "0" },
                  "8f3a1c52-9b04-4e71-a26d-33c05e18f709.4294967295", "nvml: NVLink domain" },
                /* the V call alone: its struct version must be one the driver takes */
                { { "3 7 7 7 7", NULL, "0" }, "8f3a1c52-9b04-4e71-a26d-33c05e18f709.7",
                  "nvml: NVLink domain 8f3a1c52-9b04-4e71-a26d-33c05e18f709.7" },
                { { "3 7 7 7 7", "0", "0" }, "", "GPU 0: fabric info not available" },
                { { "3 7 7 7 7", NULL, NULL, "3" }, "", "nvml: no multi-node NVLink fabric" },
                { { "3 7 7 7 7", NULL, NULL, "999" }, "", "GPU 0: fabric info not available" },
                { { "2 7 7 7 7" }, "", "GPU 0: fabric registration in progress" },
                { { "1 7 7 7 7" }, "", "GPU 0: fabric registration not started" },
                { { "3 7 7 7 8" }, "", "GPUs 0 and 3 are in different NVLink domains" },
                /* registered, but with an error (NVML_ERROR_INSUFFICIENT_RESOURCES) */
                { { "3 7 7 7 7", NULL, NULL, NULL, "23" }, "",
                  "GPU 0: fabric registration completed with an error" },
                /* registered with no cluster: not the domain 00000000-...-000000000000.0 */
                { { "3 0 0 0 0", NULL, NULL, NULL, NULL, "zero" }, "",
                  "GPU 0: fabric registration completed with a zero cluster UUID" },
                { { "3 0 0 0 0", "0", NULL, NULL, NULL, "zero" }, "",
                  "GPU 0: fabric registration completed with a zero cluster UUID" },
        };
        (void)state;
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct dp_discover_report rep;
                struct topo *t;

                for (size_t k = 0; k < ELEMENTSOF(vars); k++)
                        if (cases[i].env[k])
                                setenv(vars[k], cases[i].env[k], 1);
                        else
                                unsetenv(vars[k]);
                t = discover_with_fake_nvml(&rep);
                assert_int_equal(rep.used, DP_SOURCE_NVML);
                if (strcmp(t->nvlink_domain, cases[i].domain) != 0)
                        fail_msg("case %zu: domain '%s', want '%s'", i, t->nvlink_domain,
                                 cases[i].domain);
                if (!strstr(rep.notes, cases[i].note))
                        fail_msg("case %zu: notes lack '%s': %s", i, cases[i].note, rep.notes);
                assert_int_equal(t->n_gpus, 4);
                assert_round_trips(t);
                topo_unref(t);
        }
        for (size_t k = 0; k < ELEMENTSOF(vars); k++)
                unsetenv(vars[k]);
}

/* Re-discovery after a fabric query that failed keeps the domain the node had (the same
 * topology: nothing to publish again); a definite answer (registration in progress) drops it. */
static void
plugin_rediscovery_keeps_the_domain_when_the_fabric_query_fails(void **state)
{
        struct dp_discover_report rep;
        struct topo *prev, *t;

        (void)state;
        setenv("FAKE_NVML_FABRIC", "3 7 7 7 7", 1);
        prev = discover_with_fake_nvml(&rep);
        assert_false(rep.domain_unknown);
        assert_string_equal(prev->nvlink_domain, "8f3a1c52-9b04-4e71-a26d-33c05e18f709.7");

        setenv("FAKE_NVML_FABRIC_RC", "999", 1); /* every fabric call fails */
        t = discover_with_fake_nvml(&rep);
        assert_true(rep.domain_unknown);
        assert_string_equal(t->nvlink_domain, "");
        assert_true(dp_keep_domain(t, prev, &rep));
        assert_string_equal(t->nvlink_domain, prev->nvlink_domain);
        assert_true(topo_equal(t, prev));
        topo_unref(t);
        unsetenv("FAKE_NVML_FABRIC_RC");

        setenv("FAKE_NVML_FABRIC", "2 7 7 7 7", 1); /* registration in progress: no domain */
        t = discover_with_fake_nvml(&rep);
        assert_false(rep.domain_unknown);
        assert_false(dp_keep_domain(t, prev, &rep));
        assert_string_equal(t->nvlink_domain, "");
        assert_false(topo_equal(t, prev));
        topo_unref(t);
        topo_unref(prev);
        unsetenv("FAKE_NVML_FABRIC");
}

static void
plugin_nvml_view_gets_nics_and_numa_from_hwloc(void **state)
{
        char lib[1024], xml[1024];
        struct dp_discover_opts o = { 0 }, ho = { 0 };
        struct dp_discover_report rep;
        struct topo *t = NULL, *hw = NULL;

        (void)state;
        o.nvml_lib = path_in("TOPOFIT_BUILD_ROOT", "test/fake-nvml.so", lib, sizeof(lib));
        o.hwloc_xml = path_in("TOPOFIT_SOURCE_ROOT", "test/data/hwloc-pcie-tree.xml", xml, sizeof(xml));
        ho.topology_file = xml;
        assert_int_equal(dp_discover(&ho, &hw, &rep), 0);
        assert_true(hw->n_nics > 0);
        assert_true(hw->n_gpus >= 4);

        /* GPU buses that hwloc does not know: the NVML view stays without NICs. */
        if (dp_discover(&o, &t, &rep) < 0)
                fail_msg("%s", rep.notes);
        assert_int_equal(rep.used, DP_SOURCE_NVML);
        assert_int_equal(t->n_nics, 0);
        assert_non_null(strstr(rep.notes, "not seen by hwloc"));
        topo_unref(t);

        /* The XML's first four GPUs: NICs, their links and NUMA come from hwloc, NVLink and
         * UUIDs from NVML. */
        setenv("FAKE_NVML_BUSES", "01,05,06,11", 1);
        if (dp_discover(&o, &t, &rep) < 0)
                fail_msg("%s", rep.notes);
        unsetenv("FAKE_NVML_BUSES");
        assert_int_equal(rep.used, DP_SOURCE_NVML);
        assert_true(rep.hwloc_ok);
        assert_int_equal(t->n_gpus, 4);
        assert_int_equal(t->n_nics, hw->n_nics);
        for (unsigned k = 0; k < t->n_nics; k++) {
                assert_string_equal(t->nics[k].name, hw->nics[k].name);
                for (unsigned i = 0; i < 4; i++)
                        assert_int_equal(topo_nic_link(t, k, i), topo_nic_link(hw, k, i));
        }
        for (unsigned i = 0; i < 4; i++) {
                assert_non_null(strstr(t->gpus[i].uuid, "GPU-fa4e0000-"));
                /* NVML's NUMA comes from this host's sysfs when the bus exists here; otherwise
                 * hwloc's fills the gap. */
                if (hw->gpus[i].numa >= 0 && t->gpus[i].numa < 0)
                        fail_msg("GPU%u NUMA unknown, hwloc says %d", i, hw->gpus[i].numa);
        }
        assert_int_equal(topo_pair(t, 0, 1)->link, TOPO_LINK_NVLINK);
        assert_int_equal(topo_pair(t, 0, 1)->links, 4);
        assert_round_trips(t);
        topo_unref(t);
        topo_unref(hw);
}

static void
plugin_nvml_failure_falls_back_to_nvidia_smi_with_uuids(void **state)
{
        char lib[1024], smi[1024], topo[1024];
        struct dp_discover_opts o = { .no_hwloc = true };
        struct dp_discover_report rep;
        struct topo *t = NULL;

        (void)state;
        o.nvml_lib = path_in("TOPOFIT_BUILD_ROOT", "test/fake-nvml.so", lib, sizeof(lib));
        o.nvidia_smi = path_in("TOPOFIT_SOURCE_ROOT", "test/data/plugin/fake-nvidia-smi", smi,
                               sizeof(smi));
        setenv("FAKE_NVSMI_TOPO",
               path_in("TOPOFIT_TEST_DATA", "topologies/dgx1-v100-sxm2-oneflow.txt", topo, sizeof(topo)),
               1);
        setenv("FAKE_NVML_FAIL", "1", 1);
        if (dp_discover(&o, &t, &rep) < 0)
                fail_msg("%s", rep.notes);
        unsetenv("FAKE_NVML_FAIL");
        assert_int_equal(rep.used, DP_SOURCE_NVSMI);
        assert_true(rep.nvml_present);
        assert_true(rep.nvsmi_present);
        assert_non_null(strstr(rep.notes, "nvmlInit failed"));
        assert_int_equal(t->n_gpus, 8);
        assert_string_equal(t->gpus[7].uuid, "GPU-5m1f0000-0000-0000-0000-000000000007");
        assert_string_equal(t->gpus[0].pci_bus_id, "00000000:10:00.0");
        assert_int_equal(t->gpus[3].memory_mib, 32768);
        assert_round_trips(t);
        topo_unref(t);

        /* No source at all: a clear "nothing found" with every attempt in the notes. */
        o.nvml_lib = "/nonexistent/libnvidia-ml.so.1";
        o.nvidia_smi = "/nonexistent/nvidia-smi";
        t = NULL;
        assert_int_equal(dp_discover(&o, &t, &rep), -ENODEV);
        assert_null(t);
        assert_false(rep.nvml_present);
        assert_non_null(strstr(rep.notes, "nvml:"));
        assert_non_null(strstr(rep.notes, "nvidia-smi:"));
        unsetenv("FAKE_NVSMI_TOPO");
}

/* The last line of a captured `topofit-node discover`: the annotation it printed. */
static char *
captured_annotation(const char *rel)
{
        size_t len = 0;
        char *text = read_test_data(rel, &len), *last;

        assert_non_null(text);
        while (len > 0 && text[len - 1] == '\n')
                text[--len] = '\0';
        last = strrchr(text, '\n');
        last = strdup(last ? last + 1 : text);
        free(text);
        assert_non_null(last);
        return last;
}

/* A real H100 VM (driver 580, test/data/plugin/h100-vm-driver580/): discovery over the
 * nvidia-smi outputs and the hwloc export captured there writes the very annotations that
 * topofit-node discover printed on that machine. */
static void
plugin_discovery_replays_a_real_h100_capture_to_the_same_annotation(void **state)
{
        char smi[1024], topo_m[1024], query[1024], xml[1024];
        static const struct {
                bool nvsmi, hwloc;
                const char *capture;
                enum dp_source used;
        } cases[] = {
                { true, false, "plugin/h100-vm-driver580/discover-nvidia-smi.txt", DP_SOURCE_NVSMI },
                { false, true, "plugin/h100-vm-driver580/discover-hwloc.txt", DP_SOURCE_HWLOC },
        };

        (void)state;
        path_in("TOPOFIT_SOURCE_ROOT", "test/data/plugin/fake-nvidia-smi", smi, sizeof(smi));
        setenv("FAKE_NVSMI_TOPO",
               path_in("TOPOFIT_TEST_DATA", "topologies/h100-80gb-hbm3-1gpu-vm-driver580-capture.txt",
                       topo_m, sizeof(topo_m)), 1);
        setenv("FAKE_NVSMI_QUERY",
               path_in("TOPOFIT_TEST_DATA", "plugin/h100-vm-driver580/query-gpu.csv", query,
                       sizeof(query)), 1);
        path_in("TOPOFIT_TEST_DATA", "hwloc/h100-1gpu-vm-driver580.xml", xml, sizeof(xml));
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct dp_discover_opts o = {
                        .nvml_lib = "/nonexistent/libnvidia-ml.so.1",
                        .nvidia_smi = cases[i].nvsmi ? smi : "/nonexistent/nvidia-smi",
                        .hwloc_xml = cases[i].hwloc ? xml : NULL,
                        .no_hwloc = !cases[i].hwloc,
                };
                struct dp_discover_report rep;
                struct topo *t = NULL;
                char *want = captured_annotation(cases[i].capture), *json = NULL;
                size_t len = 0;

                if (dp_discover(&o, &t, &rep) < 0)
                        fail_msg("case %zu: %s", i, rep.notes);
                assert_int_equal(rep.used, cases[i].used);
                assert_int_equal(topo_to_annotation(t, &json, &len), 0);
                if (strcmp(json, want) != 0)
                        fail_msg("case %zu:\n got  %s\n want %s", i, json, want);
                free(json);
                free(want);
                topo_unref(t);
        }
        unsetenv("FAKE_NVSMI_TOPO");
        unsetenv("FAKE_NVSMI_QUERY");
}

/* Current drivers underline the header: the publisher's nvidia-smi path reads the B300
 * capture as posted ("[4m" without its ESC byte) and with the ESC byte put back, and takes
 * the NVLink generation from the model the text names. */
static void
plugin_nvidia_smi_path_reads_underlined_headers(void **state)
{
        char lib[1024], smi[1024], src[1024], tty[] = "/tmp/topofit-test-nvsmi-XXXXXX";
        struct dp_discover_opts o = { .no_hwloc = true };
        size_t len = 0;
        char *text = read_test_data("topologies/b300-sxm6-8gpu-9nic-ansi-sglang.txt", &len);
        int fd = mkstemp(tty);

        (void)state;
        assert_non_null(text);
        assert_true(fd >= 0);
        /* The ESC byte the post lost, restored before each "[4m" / "[0m". */
        for (char *p = text; p < text + len; p++) {
                if (*p == '[' && p + 3 <= text + len && (p[1] == '4' || p[1] == '0') &&
                    p[2] == 'm')
                        assert_int_equal(write(fd, "\x1b", 1), 1);
                assert_int_equal(write(fd, p, 1), 1);
        }
        close(fd);
        free(text);
        o.nvml_lib = path_in("TOPOFIT_BUILD_ROOT", "test/fake-nvml.so", lib, sizeof(lib));
        o.nvidia_smi = path_in("TOPOFIT_SOURCE_ROOT", "test/data/plugin/fake-nvidia-smi", smi,
                               sizeof(smi));
        setenv("FAKE_NVML_FAIL", "1", 1);
        for (int pass = 0; pass < 2; pass++) {
                struct dp_discover_report rep;
                struct topo *t = NULL;

                setenv("FAKE_NVSMI_TOPO",
                       pass ? tty
                            : path_in("TOPOFIT_TEST_DATA",
                                      "topologies/b300-sxm6-8gpu-9nic-ansi-sglang.txt", src,
                                      sizeof(src)),
                       1);
                if (dp_discover(&o, &t, &rep) < 0)
                        fail_msg("pass %d: %s", pass, rep.notes);
                assert_int_equal(rep.used, DP_SOURCE_NVSMI);
                assert_int_equal(t->n_gpus, 8);
                assert_int_equal(t->n_nics, 9);
                assert_string_equal(t->nics[8].name, "mlx5_bond_0");
                assert_string_equal(t->gpus[0].model, "NVIDIA B300 SXM6 AC");
                assert_int_equal(t->gpus[7].nvlink_gen, 5);
                assert_string_equal(t->gpus[7].uuid, "GPU-5m1f0000-0000-0000-0000-000000000007");
                assert_round_trips(t);
                topo_unref(t);
        }
        unlink(tty);

        /* No model in the text: --query-gpu's name decides NV18's generation. */
        struct dp_discover_report rep;
        struct topo *t = NULL;
        setenv("FAKE_NVSMI_TOPO",
               path_in("TOPOFIT_TEST_DATA", "topologies/gb200-tray-4gpu-8nic-gpu-numa-id.txt", src,
                       sizeof(src)),
               1);
        setenv("FAKE_NVSMI_GPUS", "4", 1);
        setenv("FAKE_NVSMI_MODEL", "NVIDIA GB200", 1);
        if (dp_discover(&o, &t, &rep) < 0)
                fail_msg("%s", rep.notes);
        assert_string_equal(t->gpus[3].model, "NVIDIA GB200");
        for (unsigned i = 0; i < 4; i++)
                assert_int_equal(t->gpus[i].nvlink_gen, 5);
        topo_unref(t);
        unsetenv("FAKE_NVSMI_MODEL");
        unsetenv("FAKE_NVSMI_GPUS");
        unsetenv("FAKE_NVSMI_TOPO");
        unsetenv("FAKE_NVML_FAIL");
}

static void
plugin_device_id_prefers_uuid_then_bus_id_then_index(void **state)
{
        struct topo *t = topo_new(3, 0);
        char id[TOPO_ID_MAX];

        (void)state;
        assert_non_null(t);
        snprintf(t->gpus[0].uuid, sizeof(t->gpus[0].uuid), "GPU-abc");
        snprintf(t->gpus[0].pci_bus_id, sizeof(t->gpus[0].pci_bus_id), "0000:01:00.0");
        snprintf(t->gpus[1].pci_bus_id, sizeof(t->gpus[1].pci_bus_id), "0000:02:00.0");
        dp_device_id(t, 0, id);
        assert_string_equal(id, "GPU-abc");
        dp_device_id(t, 1, id);
        assert_string_equal(id, "0000:02:00.0");
        dp_device_id(t, 2, id);
        assert_string_equal(id, "gpu2");
        topo_unref(t);
}

int
main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(plugin_parses_gpus_annotations_and_refuses_untrusted_ones),
                cmocka_unit_test(plugin_match_finds_the_pending_pod_whose_set_fits_the_offer),
                cmocka_unit_test(plugin_racing_admissions_on_one_offer_get_different_pods),
                cmocka_unit_test(plugin_sized_cache_refuses_the_pod_past_its_room),
                cmocka_unit_test(plugin_forgotten_offers_put_the_oldest_pod_first_again),
                cmocka_unit_test(plugin_fallback_without_scoring_keeps_must_and_takes_lowest_indices),
                cmocka_unit_test(plugin_join_ids_refuses_a_buffer_too_small),
                cmocka_unit_test(plugin_wire_answers_allocate_and_refuses_bad_messages),
                cmocka_unit_test(plugin_wire_podresources_gathers_one_record_per_container),
                cmocka_unit_test(plugin_pod_json_phase_and_deletion_decide_pending_and_live),
                cmocka_unit_test(plugin_podlist_reload_keeps_age_and_drops_pods_gone),
                cmocka_unit_test(plugin_discovers_every_shared_matrix_and_its_annotation_round_trips),
                cmocka_unit_test(plugin_discovers_shared_hwloc_xml_and_its_annotation_round_trips),
                cmocka_unit_test(plugin_nvml_discovery_reads_uuids_links_and_mig_from_the_library),
                cmocka_unit_test(plugin_nvml_discovery_reads_the_nvlink_domain_from_fabric_info),
                cmocka_unit_test(plugin_rediscovery_keeps_the_domain_when_the_fabric_query_fails),
                cmocka_unit_test(plugin_discovery_replays_a_real_h100_capture_to_the_same_annotation),
                cmocka_unit_test(plugin_nvml_view_gets_nics_and_numa_from_hwloc),
                cmocka_unit_test(plugin_nvml_failure_falls_back_to_nvidia_smi_with_uuids),
                cmocka_unit_test(plugin_nvidia_smi_path_reads_underlined_headers),
                cmocka_unit_test(plugin_device_id_prefers_uuid_then_bus_id_then_index),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
