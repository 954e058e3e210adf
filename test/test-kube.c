/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube-client unit tests, no network: kubeconfig parsing (every field, every clear error),
 * in-cluster configuration, the Node/Pod/PodGroup decoders (GPU requests, kept annotations and
 * labels, caps) and small helpers.  Tables of cases, one loop each.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-util.h"

#include "buf.h"
#include "kube-private.h"
#include "str.h"

static char tmpdir[] = "/tmp/test-kube-XXXXXX";

static int
setup(void **state)
{
        if (!mkdtemp(tmpdir))
                return -1;
        test_write_file(tmpdir, "ca.crt", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
        test_write_file(tmpdir, "client.crt", "CERT\n");
        test_write_file(tmpdir, "client.key", "KEY\n");
        test_write_file(tmpdir, "token", "  tok-from-file\n");
        test_write_file(tmpdir, "empty", "");
        return 0;
}

static int
teardown(void **state)
{
        char cmd[600];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        return system(cmd) == 0 ? 0 : -1;
}

#define HEAD                                                                               \
        "apiVersion: v1\nkind: Config\ncurrent-context: ctx\n"                              \
        "contexts:\n- name: ctx\n  context:\n    cluster: c1\n    user: u1\n"

struct kc_case {
        const char *name;
        const char *yaml;
        int ret;
        const char *why;       /* a substring of *ret_why on failure */
        const char *server;
        const char *token;
        const char *ns;
        bool insecure, ca, cert, basic;
        bool token_file;
};

static const struct kc_case kc_cases[] = {
        { "token and a relative CA file",
          HEAD "clusters:\n- name: c1\n  cluster:\n    server: https://k8s.example:6443/\n"
               "    certificate-authority: ca.crt\n"
               "users:\n- name: u1\n  user:\n    token: abc.def\n",
          0, NULL, "https://k8s.example:6443", "abc.def", "default", .ca = true },
        { "inline CA, client certificate and key data, context namespace",
          "current-context: ctx\n"
          "contexts:\n- name: ctx\n  context: {cluster: c1, user: u1, namespace: team-a}\n"
          "clusters:\n- name: c1\n  cluster:\n    server: https://10.0.0.1\n"
          "    certificate-authority-data: aGVsbG8=\n"
          "users:\n- name: u1\n  user:\n    client-certificate-data: Q0VSVA==\n"
          "    client-key-data: S0VZ\n",
          0, NULL, "https://10.0.0.1", NULL, "team-a", .ca = true, .cert = true },
        { "client certificate and key files",
          HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://h'}\n"
               "users:\n- name: u1\n  user: {client-certificate: client.crt, client-key: client.key}\n",
          0, NULL, "https://h", NULL, "default", .cert = true },
        { "tokenFile is read and kept for re-reading",
          HEAD "clusters:\n- name: c1\n  cluster:\n    server: https://h\n"
               "users:\n- name: u1\n  user:\n    tokenFile: token\n    token: ignored\n",
          0, NULL, "https://h", "tok-from-file", "default", .token_file = true },
        { "insecure-skip-tls-verify",
          HEAD "clusters:\n- name: c1\n  cluster:\n    server: https://h\n"
               "    insecure-skip-tls-verify: true\nusers:\n- name: u1\n  user: {}\n",
          0, NULL, "https://h", NULL, "default", .insecure = true },
        { "basic auth",
          HEAD "clusters:\n- name: c1\n  cluster: {server: https://h}\n"
               "users:\n- name: u1\n  user: {username: admin, password: secret}\n",
          0, NULL, "https://h", NULL, "default", .basic = true },
        { "a JSON kubeconfig",
          "{\"current-context\":\"ctx\",\"contexts\":[{\"name\":\"ctx\",\"context\":"
          "{\"cluster\":\"c1\",\"user\":\"u1\"}}],\"clusters\":[{\"name\":\"c1\",\"cluster\":"
          "{\"server\":\"https://j:443\",\"insecure-skip-tls-verify\":true}}],\"users\":[{\"name\":"
          "\"u1\",\"user\":{\"token\":\"jt\"}}]}",
          0, NULL, "https://j:443", "jt", "default", .insecure = true },
        { "plain http without credentials",
          "current-context: ctx\ncontexts:\n- name: ctx\n  context: {cluster: c1}\n"
          "clusters:\n- name: c1\n  cluster: {server: 'http://127.0.0.1:8080'}\n",
          0, NULL, "http://127.0.0.1:8080", NULL, "default" },
        { "no current-context", "clusters: []\n", -ENOENT, "current-context" },
        { "a current-context that names no context",
          "current-context: nope\ncontexts:\n- name: ctx\n  context: {cluster: c1}\n",
          -ENOENT, "no context" },
        { "a context whose cluster is missing",
          HEAD "clusters:\n- name: other\n  cluster: {server: https://h}\n", -ENOENT,
          "no cluster" },
        { "a context whose user is missing",
          HEAD "clusters:\n- name: c1\n  cluster: {server: https://h}\nusers: []\n", -ENOENT,
          "no user" },
        { "a cluster without a server",
          HEAD "clusters:\n- name: c1\n  cluster: {certificate-authority: ca.crt}\n"
               "users:\n- name: u1\n  user: {}\n",
          -EINVAL, "no server" },
        { "a server that is not an http(s) URL",
          HEAD "clusters:\n- name: c1\n  cluster: {server: 'ftp://h'}\nusers:\n- name: u1\n  user: {}\n",
          -EINVAL, "not an http(s) URL" },
        { "credentials over plain http",
          HEAD "clusters:\n- name: c1\n  cluster: {server: 'http://h'}\n"
               "users:\n- name: u1\n  user: {token: t}\n",
          -EINVAL, "plain http" },
        { "an exec credential plugin",
          HEAD "clusters:\n- name: c1\n  cluster: {server: https://h}\n"
               "users:\n- name: u1\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
               "      command: aws\n",
          -EOPNOTSUPP, "exec credential plugin, which is not supported" },
        { "an auth-provider",
          HEAD "clusters:\n- name: c1\n  cluster: {server: https://h}\n"
               "users:\n- name: u1\n  user:\n    auth-provider: {name: gcp}\n",
          -EOPNOTSUPP, "auth-provider, which is not supported" },
        { "a client certificate without a key",
          HEAD "clusters:\n- name: c1\n  cluster: {server: https://h}\n"
               "users:\n- name: u1\n  user: {client-certificate: client.crt}\n",
          -EINVAL, "no client key" },
        { "certificate-authority-data that is not base64",
          HEAD "clusters:\n- name: c1\n  cluster: {server: https://h, certificate-authority-data: '@@@'}\n"
               "users:\n- name: u1\n  user: {}\n",
          -EINVAL, "not valid base64" },
        { "a certificate-authority file that does not exist",
          HEAD "clusters:\n- name: c1\n  cluster: {server: https://h, certificate-authority: nope.crt}\n"
               "users:\n- name: u1\n  user: {}\n",
          -ENOENT, "certificate-authority file" },
        { "an empty tokenFile",
          HEAD "clusters:\n- name: c1\n  cluster: {server: https://h}\n"
               "users:\n- name: u1\n  user: {tokenFile: empty}\n",
          -EINVAL, "tokenFile is empty" },
        { "a username without a password",
          HEAD "clusters:\n- name: c1\n  cluster: {server: https://h}\n"
               "users:\n- name: u1\n  user: {username: admin}\n",
          -EINVAL, "no password" },
        { "text that is not YAML", "current-context: [unclosed\n", -EINVAL, "not valid YAML" },
        { "a YAML alias", "a: &x {b: 1}\nc: *x\n", -EINVAL, "aliases" },
        { "a YAML document that is not a mapping", "- 1\n- 2\n", -EINVAL, "not a mapping" },
        { "an empty file", "", -EINVAL, "empty" },
        { "a proxy-url",
          HEAD "clusters:\n- name: c1\n  cluster: {server: https://h, proxy-url: 'http://p'}\n"
               "users:\n- name: u1\n  user: {}\n",
          -EOPNOTSUPP, "proxy-url" },
};

static void
kubeconfig_cases_parse_or_fail_clearly(void **state)
{
        char path[512];

        snprintf(path, sizeof(path), "%s/kubeconfig", tmpdir);
        for (size_t i = 0; i < ELEMENTSOF(kc_cases); i++) {
                const struct kc_case *t = &kc_cases[i];
                struct kube_config *c = NULL;
                const char *why = NULL;
                int r;

                test_write_file(tmpdir, "kubeconfig", t->yaml);
                r = kube_config_from_kubeconfig(path, NULL, &c, &why);
                if (r != t->ret)
                        fail_msg("%s: returned %d (%s), expected %d", t->name, r, why ? why : "",
                                 t->ret);
                if (r < 0) {
                        assert_null(c);
                        if (!why || !strstr(why, t->why))
                                fail_msg("%s: reason '%s' lacks '%s'", t->name, why ? why : "",
                                         t->why);
                        continue;
                }
                assert_string_equal(kube_config_server(c), t->server);
                assert_string_equal(kube_config_namespace(c), t->ns);
                if (t->token)
                        assert_string_equal(c->token, t->token);
                else
                        assert_null(c->token);
                assert_int_equal(c->insecure, t->insecure);
                assert_int_equal(c->ca_pem != NULL, t->ca);
                assert_int_equal(c->cert_pem != NULL && c->key_pem != NULL, t->cert);
                assert_int_equal(c->username != NULL, t->basic);
                assert_int_equal(c->token_file != NULL, t->token_file);
                kube_config_free(c);
        }
}

static void
kubeconfig_inline_data_is_base64_decoded(void **state)
{
        char path[512];
        struct kube_config *c = NULL;

        snprintf(path, sizeof(path), "%s/kubeconfig", tmpdir);
        test_write_file(tmpdir, "kubeconfig", kc_cases[1].yaml);
        assert_int_equal(kube_config_from_kubeconfig(path, NULL, &c, NULL), 0);
        assert_int_equal(c->ca_len, 5);
        assert_memory_equal(c->ca_pem, "hello", 5);
        assert_memory_equal(c->cert_pem, "CERT", 4);
        assert_memory_equal(c->key_pem, "KEY", 3);
        kube_config_free(c);
}

static void
kubeconfig_context_argument_overrides_current_context(void **state)
{
        char path[512];
        struct kube_config *c = NULL;

        snprintf(path, sizeof(path), "%s/kubeconfig", tmpdir);
        test_write_file(tmpdir, "kubeconfig",
                   "current-context: a\ncontexts:\n- name: a\n  context: {cluster: ca}\n"
                   "- name: b\n  context: {cluster: cb}\nclusters:\n"
                   "- name: ca\n  cluster: {server: 'https://a'}\n"
                   "- name: cb\n  cluster: {server: 'https://b'}\n");
        assert_int_equal(kube_config_from_kubeconfig(path, "b", &c, NULL), 0);
        assert_string_equal(kube_config_server(c), "https://b");
        kube_config_free(c);
}

static void
kubeconfig_over_its_cap_is_refused(void **state)
{
        char path[512];
        struct kube_config *c = NULL;
        const char *why = NULL;
        FILE *f;

        snprintf(path, sizeof(path), "%s/big", tmpdir);
        f = fopen(path, "w");
        assert_non_null(f);
        for (size_t i = 0; i < KUBE_MAX_KUBECONFIG / 16 + 1; i++)
                fputs("# padding......\n", f);
        fclose(f);
        assert_int_equal(kube_config_from_kubeconfig(path, NULL, &c, &why), -E2BIG);
        assert_non_null(strstr(why, "too large"));
}

struct ic_case {
        const char *name;
        const char *host, *port;
        bool token, ca;
        int ret;
        const char *server_or_why;
};

static const struct ic_case ic_cases[] = {
        { "a complete service account", "10.96.0.1", "443", true, true, 0, "https://10.96.0.1:443" },
        { "an IPv6 service address", "fd00::1", "443", true, true, 0, "https://[fd00::1]:443" },
        { "no KUBERNETES_SERVICE_HOST", NULL, "443", true, true, -ENOENT, "not running in a cluster" },
        { "a port that is not a number", "10.0.0.1", "https", true, true, -EINVAL, "not a port" },
        { "no token file", "10.0.0.1", "443", false, true, -ENOENT, "token file" },
        { "no ca.crt", "10.0.0.1", "443", true, false, -ENOENT, "ca.crt" },
};

static void
in_cluster_cases_configure_or_fail_clearly(void **state)
{
        for (size_t i = 0; i < ELEMENTSOF(ic_cases); i++) {
                const struct ic_case *t = &ic_cases[i];
                char dir[600], cmd[700];
                struct kube_config *c = NULL;
                const char *why = NULL;
                int r;

                snprintf(dir, sizeof(dir), "%s/sa%zu", tmpdir, i);
                assert_int_equal(mkdir(dir, 0700), 0);
                if (t->token) {
                        snprintf(cmd, sizeof(cmd), "sa%zu/token", i);
                        test_write_file(tmpdir, cmd, "sa-token\n");
                }
                if (t->ca) {
                        snprintf(cmd, sizeof(cmd), "sa%zu/ca.crt", i);
                        test_write_file(tmpdir, cmd, "PEM");
                }
                snprintf(cmd, sizeof(cmd), "sa%zu/namespace", i);
                test_write_file(tmpdir, cmd, "kube-system");
                if (t->host)
                        setenv("KUBERNETES_SERVICE_HOST", t->host, 1);
                else
                        unsetenv("KUBERNETES_SERVICE_HOST");
                setenv("KUBERNETES_SERVICE_PORT", t->port, 1);
                r = kube_config_in_cluster(dir, &c, &why);
                if (r != t->ret)
                        fail_msg("%s: returned %d (%s)", t->name, r, why ? why : "");
                if (r < 0) {
                        if (!strstr(why, t->server_or_why))
                                fail_msg("%s: reason '%s'", t->name, why);
                        continue;
                }
                assert_string_equal(kube_config_server(c), t->server_or_why);
                assert_string_equal(c->token, "sa-token");
                assert_non_null(strstr(c->token_file, "/token"));
                assert_string_equal(kube_config_namespace(c), "kube-system");
                kube_config_free(c);
        }
        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
}

/* --- decoders ------------------------------------------------------------------------- */

struct pod_case {
        const char *name;
        const char *json;
        int ret;
        int64_t gpus;
        const char *node;
        enum kube_pod_phase phase;
        bool deleting;
        unsigned n_annotations;
};

#define POD(spec, extra_meta, status)                                                      \
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u-1\","              \
        "\"resourceVersion\":\"7\"" extra_meta "},\"spec\":" spec ",\"status\":" status "}"
#define CTR(limits, requests)                                                              \
        "{\"name\":\"c\",\"resources\":{\"limits\":" limits ",\"requests\":" requests "}}"

static const struct pod_case pod_cases[] = {
        { "one container with a GPU limit",
          POD("{\"nodeName\":\"n1\",\"containers\":[" CTR("{\"nvidia.com/gpu\":\"2\"}", "{}") "]}",
              "", "{\"phase\":\"Running\"}"),
          0, 2, "n1", KUBE_POD_RUNNING },
        { "containers add up",
          POD("{\"containers\":[" CTR("{\"nvidia.com/gpu\":\"2\"}", "{}") ","
              CTR("{\"nvidia.com/gpu\":3}", "{}") "]}", "", "{}"),
          0, 5, "", KUBE_POD_PENDING },
        { "the largest init container wins when larger than the sum",
          POD("{\"initContainers\":[" CTR("{\"nvidia.com/gpu\":\"8\"}", "{}") ","
              CTR("{\"nvidia.com/gpu\":\"1\"}", "{}") "],\"containers\":["
              CTR("{\"nvidia.com/gpu\":\"2\"}", "{}") "]}", "", "{\"phase\":\"Pending\"}"),
          0, 8, "", KUBE_POD_PENDING },
        { "requests count when there is no limit",
          POD("{\"containers\":[" CTR("{}", "{\"nvidia.com/gpu\":\"4\"}") "]}", "",
              "{\"phase\":\"Succeeded\"}"),
          0, 4, "", KUBE_POD_SUCCEEDED },
        { "other resources are not GPUs",
          POD("{\"containers\":[" CTR("{\"cpu\":\"4\",\"amd.com/gpu\":\"1\"}", "{}") "]}", "",
              "{\"phase\":\"Failed\"}"),
          0, 0, "", KUBE_POD_FAILED },
        { "a deletion timestamp and only topofit annotations are kept",
          POD("{\"containers\":[]}",
              ",\"deletionTimestamp\":\"2024-01-01T00:00:00Z\",\"annotations\":{"
              "\"topofit.io/gpus\":\"0,1\",\"topofit.io/score\":\"9\",\"other.io/x\":\"y\"}",
              "{\"phase\":\"Bogus\"}"),
          0, 0, "", KUBE_POD_UNKNOWN, true, 2 },
        { "a fractional GPU quantity is refused",
          POD("{\"containers\":[" CTR("{\"nvidia.com/gpu\":\"1.5\"}", "{}") "]}", "", "{}"),
          -EINVAL },
        { "a negative GPU quantity is refused",
          POD("{\"containers\":[" CTR("{\"nvidia.com/gpu\":-1}", "{}") "]}", "", "{}"), -EINVAL },
        { "a pod without a uid is refused",
          "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"},\"spec\":{}}", -EINVAL },
        { "a pod without a namespace is refused",
          "{\"metadata\":{\"name\":\"p\",\"uid\":\"u\"},\"spec\":{}}", -EINVAL },
        { "a pod that is not an object is refused", "[1,2]", -EINVAL },
        /* The duplicate-key rule (common/json.h): a repeat of a key that is read is refused,
         * a repeat of one nobody reads is not. */
        { "a pod repeating spec.nodeName is refused",
          POD("{\"nodeName\":\"n1\",\"nodeName\":\"n2\",\"containers\":[]}", "", "{}"),
          -EINVAL },
        { "a pod repeating a GPU limit is refused",
          POD("{\"containers\":[" CTR("{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpu\":\"8\"}", "{}") "]}",
              "", "{}"),
          -EINVAL },
        { "a pod repeating an annotation key is refused",
          POD("{\"containers\":[]}",
              ",\"annotations\":{\"topofit.io/gpus\":\"0\",\"topofit.io/gpus\":\"1\"}", "{}"),
          -EINVAL },
        { "a repeat of a key nobody reads is ignored",
          POD("{\"containers\":[],\"dnsPolicy\":\"a\",\"dnsPolicy\":\"b\"}", "", "{}"),
          0, 0, "", KUBE_POD_PENDING },
};

static void
pod_decoder_cases(void **state)
{
        for (size_t i = 0; i < ELEMENTSOF(pod_cases); i++) {
                const struct pod_case *t = &pod_cases[i];
                CLEANUP(cJSON_Deletep) cJSON *j = cJSON_Parse(t->json);
                struct kube__obj *o = NULL;
                const char *why = NULL;
                int r;

                assert_non_null(j);
                r = kube__decode_pod(j, NULL, &o, &why);
                if (r != t->ret)
                        fail_msg("%s: returned %d (%s)", t->name, r, why ? why : "");
                if (r < 0) {
                        assert_non_null(why);
                        continue;
                }
                assert_string_equal(o->pod.ns, "ns");
                assert_string_equal(o->pod.name, "p");
                assert_string_equal(o->pod.uid, "u-1");
                assert_string_equal(o->pod.resource_version, "7");
                if (o->pod.gpu_request != t->gpus)
                        fail_msg("%s: %lld GPUs", t->name, (long long)o->pod.gpu_request);
                assert_string_equal(o->pod.node_name, t->node);
                assert_int_equal(o->pod.phase, t->phase);
                assert_int_equal(o->pod.deleting, t->deleting);
                assert_int_equal(o->pod.n_annotations, t->n_annotations);
                for (unsigned k = 0; k < o->pod.n_annotations; k++)
                        assert_true(str_has_prefix(o->pod.annotations[k].key, "topofit.io/"));
                kube__obj_unref(o);
        }
}

/* The keys that name a pod's group (the cache's pod_labels and pod_annotations) and its
 * spec.schedulingGroup are kept, nothing else; a repeat of a kept key is refused. */
static void
pod_decoder_keeps_the_keys_that_name_its_group(void **state)
{
        const char *const labels[] = { "jobset.sigs.k8s.io/jobset-name", "absent/key", NULL };
        const char *const annotations[] = { "scheduling.k8s.io/group-name", NULL };
        struct kube__decode_opts d = { .pod_labels = labels, .pod_annotations = annotations };
        static const char meta[] =
                "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\","
                "\"labels\":{\"app\":\"x\",\"jobset.sigs.k8s.io/jobset-name\":\"js\"%s},"
                "\"annotations\":{\"scheduling.k8s.io/group-name\":\"vg\",\"other/a\":\"b\","
                "\"topofit.io/gpus\":\"0\"}},\"spec\":{%s}}";
        static const struct {
                const char *extra_label, *spec, *group;
                int ret;
        } cases[] = {
                { "", "\"schedulingGroup\":{\"podGroupName\":\"pg-1\"}", "pg-1", 0 },
                { "", "", "", 0 },
                { "", "\"schedulingGroup\":{\"podGroupName\":7}", "", 0 },
                { "", "\"schedulingGroup\":{\"podGroupName\":\"\"}", "", 0 },
                { ",\"jobset.sigs.k8s.io/jobset-name\":\"js2\"", "", NULL, -EINVAL },
                { ",\"app\":\"y\"", "", "", 0 }, /* a repeat of a key nobody reads */
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char json[1024];
                CLEANUP(cJSON_Deletep) cJSON *j = NULL;
                struct kube__obj *o = NULL;

                snprintf(json, sizeof(json), meta, cases[i].extra_label, cases[i].spec);
                j = cJSON_Parse(json);
                assert_non_null(j);
                assert_int_equal(kube__decode_pod(j, &d, &o, NULL), cases[i].ret);
                if (cases[i].ret < 0)
                        continue;
                assert_string_equal(o->pod.scheduling_group, cases[i].group);
                assert_int_equal(o->pod.n_labels, 1);
                assert_string_equal(o->pod.labels[0].key, "jobset.sigs.k8s.io/jobset-name");
                assert_string_equal(o->pod.labels[0].value, "js");
                assert_int_equal(o->pod.n_annotations, 2); /* not other/a */
                assert_string_equal(o->pod.annotations[0].key, "scheduling.k8s.io/group-name");
                assert_string_equal(o->pod.annotations[0].value, "vg");
                assert_string_equal(o->pod.annotations[1].key, "topofit.io/gpus");
                kube__obj_unref(o);
        }
        /* Without the lists, only topofit.io/ annotations, no labels. */
        {
                char json[1024];
                CLEANUP(cJSON_Deletep) cJSON *j = NULL;
                struct kube__obj *o = NULL;

                snprintf(json, sizeof(json), meta, "", "");
                j = cJSON_Parse(json);
                assert_int_equal(kube__decode_pod(j, NULL, &o, NULL), 0);
                assert_int_equal(o->pod.n_labels, 0);
                assert_int_equal(o->pod.n_annotations, 1);
                kube__obj_unref(o);
        }
}

/* However many topofit.io/ annotations a pod has, it is decoded (a pod left out of the cache
 * would have its GPUs look free): the first KUBE_MAX_KEPT_ANNOTATIONS are kept, and the
 * listed keys always, even when they sort after the others. */
static void
pod_decoder_keeps_listed_annotations_past_the_cap(void **state)
{
        const char *const listed[] = { "topofit.io/gpus", NULL };
        struct kube__decode_opts d = { .pod_annotations = listed };
        CLEANUP(cJSON_Deletep) cJSON *j = cJSON_Parse(
                "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\","
                "\"annotations\":{}},\"spec\":{}}");
        cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "annotations");
        struct kube__obj *o = NULL;
        bool gpus = false;

        for (int i = 0; i < 40; i++) {
                char key[32];

                snprintf(key, sizeof(key), "topofit.io/a%02d", i);
                cJSON_AddStringToObject(ann, key, "x");
        }
        cJSON_AddStringToObject(ann, "topofit.io/gpus", "{}");
        assert_int_equal(kube__decode_pod(j, &d, &o, NULL), 0);
        assert_int_equal(o->pod.n_annotations, 32 + 1);
        for (uint32_t i = 0; i < o->pod.n_annotations; i++)
                gpus |= strcmp(o->pod.annotations[i].key, "topofit.io/gpus") == 0;
        assert_true(gpus);
        kube__obj_unref(o);
        /* Not listed: the pod is still decoded, its first 32 kept. */
        assert_int_equal(kube__decode_pod(j, NULL, &o, NULL), 0);
        assert_int_equal(o->pod.n_annotations, 32);
        kube__obj_unref(o);
}

static void
podgroup_decoder_keeps_min_count_and_topology_key(void **state)
{
        size_t len = 0;
        CLEANUP(freep) char *text = test_read_data("kube/podgroup-v1beta1.json", &len);
        CLEANUP(cJSON_Deletep) cJSON *j = NULL;
        struct kube__obj *o = NULL;
        const char *why = NULL;

        assert_non_null(text);
        j = cJSON_ParseWithLength(text, len);
        assert_non_null(j);
        assert_int_equal(kube__decode_podgroup(j, &o, &why), 0);
        assert_int_equal(o->kind, KUBE__PODGROUP);
        assert_string_equal(o->podgroup.ns, "ml");
        assert_string_equal(o->podgroup.name, "trainer-workers");
        assert_int_equal(o->podgroup.min_count, 4);
        assert_string_equal(o->podgroup.topology_key, "topology.kubernetes.io/zone");
        assert_string_equal(o->podgroup.resource_version, "4711");
        assert_string_equal(o->key_ns, "ml");
        assert_true(o->hash == kube__key_hash("ml", "trainer-workers"));
        kube__obj_unref(o);
}

#define PG(spec) "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"g\"},\"spec\":" spec "}"
static const struct podgroup_case {
        const char *name;
        const char *json;
        int ret;
        unsigned min_count;
        const char *key;
} podgroup_cases[] = {
        { "a gang policy gives its minCount", PG("{\"schedulingPolicy\":{\"gang\":{\"minCount\":8}}}"),
          0, 8, "" },
        { "a basic policy is no gang", PG("{\"schedulingPolicy\":{\"basic\":{}}}"), 0, 0, "" },
        { "no spec at all is no gang", "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"g\"}}",
          0, 0, "" },
        { "an empty topology list has no key",
          PG("{\"schedulingPolicy\":{\"gang\":{\"minCount\":1}},"
             "\"schedulingConstraints\":{\"topology\":[]}}"), 0, 1, "" },
        { "minCount 0 is refused", PG("{\"schedulingPolicy\":{\"gang\":{\"minCount\":0}}}"),
          -EINVAL },
        { "a negative minCount is refused",
          PG("{\"schedulingPolicy\":{\"gang\":{\"minCount\":-3}}}"), -EINVAL },
        { "a fractional minCount is refused",
          PG("{\"schedulingPolicy\":{\"gang\":{\"minCount\":2.5}}}"), -EINVAL },
        { "a huge minCount is refused",
          PG("{\"schedulingPolicy\":{\"gang\":{\"minCount\":1e300}}}"), -EINVAL },
        { "minCount as a string is refused",
          PG("{\"schedulingPolicy\":{\"gang\":{\"minCount\":\"4\"}}}"), -EINVAL },
        { "a gang without minCount is refused", PG("{\"schedulingPolicy\":{\"gang\":{}}}"),
          -EINVAL },
        { "a repeated minCount is refused",
          PG("{\"schedulingPolicy\":{\"gang\":{\"minCount\":2,\"minCount\":9}}}"), -EINVAL },
        { "a topology that is not a list is refused",
          PG("{\"schedulingConstraints\":{\"topology\":{\"key\":\"k\"}}}"), -EINVAL },
        { "a topology key that is not a string is refused",
          PG("{\"schedulingConstraints\":{\"topology\":[{\"key\":5}]}}"), -EINVAL },
        { "no name is refused", "{\"metadata\":{\"namespace\":\"ns\"},\"spec\":{}}", -EINVAL },
        { "no namespace is refused", "{\"metadata\":{\"name\":\"g\"},\"spec\":{}}", -EINVAL },
        { "a name that is not a string is refused",
          "{\"metadata\":{\"namespace\":\"ns\",\"name\":7}}", -EINVAL },
        { "an array instead of an object is refused", "[1,2]", -EINVAL },
};

static void
podgroup_decoder_cases(void **state)
{
        for (size_t i = 0; i < ELEMENTSOF(podgroup_cases); i++) {
                const struct podgroup_case *t = &podgroup_cases[i];
                CLEANUP(cJSON_Deletep) cJSON *j = cJSON_Parse(t->json);
                struct kube__obj *o = NULL;
                const char *why = NULL;
                int r;

                assert_non_null(j);
                r = kube__decode_podgroup(j, &o, &why);
                if (r != t->ret)
                        fail_msg("%s: returned %d (%s)", t->name, r, why ? why : "");
                if (r < 0) {
                        assert_non_null(why);
                        assert_null(o);
                        continue;
                }
                if (o->podgroup.min_count != t->min_count)
                        fail_msg("%s: minCount %u", t->name, o->podgroup.min_count);
                assert_string_equal(o->podgroup.topology_key, t->key);
                kube__obj_unref(o);
        }
}

static void
podgroup_decoder_refuses_an_oversized_name(void **state)
{
        char name[KUBE_MAX_NAME + 2], json[2 * KUBE_MAX_NAME];
        CLEANUP(cJSON_Deletep) cJSON *j = NULL;
        struct kube__obj *o = NULL;

        memset(name, 'a', sizeof(name) - 1);
        name[sizeof(name) - 1] = 0;
        snprintf(json, sizeof(json), "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\"}}",
                 name);
        j = cJSON_Parse(json);
        assert_non_null(j);
        assert_int_equal(kube__decode_podgroup(j, &o, NULL), -EINVAL);
        assert_null(o);
}

static void
pod_decoder_counts_configured_resource_names(void **state)
{
        const char *const res[] = { "nvidia.com/gpu", "amd.com/gpu", NULL };
        struct kube__decode_opts d = { .gpu_resources = res };
        CLEANUP(cJSON_Deletep) cJSON *j = cJSON_Parse(pod_cases[4].json);
        struct kube__obj *o = NULL;

        assert_int_equal(kube__decode_pod(j, &d, &o, NULL), 0);
        assert_int_equal(o->pod.gpu_request, 1);
        kube__obj_unref(o);
}

static void
node_decoder_keeps_what_topofit_needs(void **state)
{
        const char *const labels[] = { "nvidia.com/gpu.product", "zone", NULL };
        struct kube__decode_opts d = { .node_labels = labels };
        CLEANUP(cJSON_Deletep) cJSON *j = cJSON_Parse(
                "{\"metadata\":{\"name\":\"gpu-1\",\"resourceVersion\":\"42\",\"labels\":{"
                "\"nvidia.com/gpu.product\":\"H100\",\"other\":\"x\"},\"annotations\":{"
                "\"topofit.io/topology\":\"{\\\"version\\\":1}\",\"x\":\"y\"}},"
                "\"spec\":{\"unschedulable\":true},\"status\":{\"allocatable\":{"
                "\"nvidia.com/gpu\":\"7\"},\"capacity\":{\"nvidia.com/gpu\":\"8\"},"
                "\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":\"False\"},"
                "{\"type\":\"Ready\",\"status\":\"True\"}]}}");
        struct kube__obj *o = NULL;

        assert_non_null(j);
        assert_int_equal(kube__decode_node(j, &d, &o, NULL), 0);
        assert_string_equal(o->node.name, "gpu-1");
        assert_string_equal(o->node.resource_version, "42");
        assert_string_equal(o->node.topology, "{\"version\":1}");
        assert_int_equal(o->node.topology_len, strlen("{\"version\":1}"));
        assert_int_equal(o->node.n_labels, 1);
        assert_string_equal(o->node.labels[0].key, "nvidia.com/gpu.product");
        assert_string_equal(o->node.labels[0].value, "H100");
        assert_int_equal(o->node.gpu_allocatable, 7);
        assert_int_equal(o->node.gpu_capacity, 8);
        assert_true(o->node.ready);
        assert_true(o->node.unschedulable);
        kube__obj_unref(o);
}

/* node_labels_all: every label with a string value (a PodGroup may name any key), up to
 * KUBE_MAX_ALL_LABELS; the node_labels list does not narrow it. */
static void
node_decoder_keeps_every_label_when_asked(void **state)
{
        const char *const labels[] = { "zone", NULL };
        struct kube__decode_opts d = { .node_labels = labels, .node_labels_all = true };
        CLEANUP(cJSON_Deletep) cJSON *j = cJSON_Parse(
                "{\"metadata\":{\"name\":\"gpu-1\",\"labels\":{\"example.com/rack\":\"r1\","
                "\"other\":\"x\",\"n\":7}},\"status\":{}}");
        CLEANUP(cJSON_Deletep) cJSON *many = cJSON_Parse("{\"metadata\":{\"name\":\"m\","
                                                         "\"labels\":{}},\"status\":{}}");
        struct kube__obj *o = NULL;

        assert_non_null(j);
        assert_int_equal(kube__decode_node(j, &d, &o, NULL), 0);
        assert_int_equal(o->node.n_labels, 2); /* "n" is not a string */
        assert_string_equal(o->node.labels[0].key, "example.com/rack");
        assert_string_equal(o->node.labels[0].value, "r1");
        assert_string_equal(o->node.labels[1].key, "other");
        kube__obj_unref(o);
        for (int i = 0; i < KUBE_MAX_ALL_LABELS + 5; i++) {
                char key[32];

                snprintf(key, sizeof(key), "k%d", i);
                cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(many, "metadata"),
                                                            "labels"),
                                        key, "v");
        }
        assert_int_equal(kube__decode_node(many, &d, &o, NULL), 0);
        assert_int_equal(o->node.n_labels, KUBE_MAX_ALL_LABELS);
        kube__obj_unref(o);
}

static void
node_decoder_drops_an_oversized_topology_annotation(void **state)
{
        size_t n = KUBE_MAX_ANNOTATION + 1;
        CLEANUP(freep) char *big = malloc(n + 1);
        CLEANUP(cJSON_Deletep) cJSON *j = cJSON_Parse("{\"metadata\":{\"name\":\"n\","
                                                      "\"annotations\":{}},\"status\":{}}");
        struct kube__obj *o = NULL;

        memset(big, 'x', n);
        big[n] = 0;
        cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"),
                                                    "annotations"),
                                KUBE_TOPOLOGY_ANNOTATION, big);
        assert_int_equal(kube__decode_node(j, NULL, &o, NULL), 0);
        assert_null(o->node.topology);
        assert_false(o->node.ready);
        kube__obj_unref(o);
}

static void
base64_decoder_cases(void **state)
{
        static const struct {
                const char *in, *out;
                int ret;
        } cases[] = {
                { "aGVsbG8=", "hello", 0 }, { "aGVs\nbG8g\nd29y bGQ=", "hello world", 0 },
                { "", "", 0 },              { "a$==", NULL, -EINVAL },
                { "aGVsbG8=x", NULL, -EINVAL },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *out = NULL;
                size_t len = 0;
                int r = kube__base64_decode(cases[i].in, strlen(cases[i].in), &out, &len);
                assert_int_equal(r, cases[i].ret);
                if (r == 0) {
                        assert_int_equal(len, strlen(cases[i].out));
                        assert_memory_equal(out, cases[i].out, len);
                }
                free(out);
        }
}

static void
query_values_are_percent_encoded(void **state)
{
        CLEANUP(buf_release) struct buf b;

        buf_init(&b, 256);
        assert_int_equal(kube__buf_put_query(&b, "spec.nodeName=node-1,a!=b c/d"), 0);
        assert_string_equal(b.data, "spec.nodeName%3Dnode-1%2Ca%21%3Db%20c%2Fd");
}

static void
enum_tables_round_trip(void **state)
{
        for (int i = 0; i < _KUBE_EVENT_MAX; i++)
                assert_int_equal(kube_event_type_from_string(kube_event_type_to_string(i)), i);
        for (int i = 0; i < _KUBE_POD_PHASE_MAX; i++)
                assert_int_equal(kube_pod_phase_from_string(kube_pod_phase_to_string(i)), i);
        assert_int_equal(kube_event_type_from_string("NOPE"), _KUBE_EVENT_INVALID);
        assert_null(kube_patch_type_to_string(_KUBE_PATCH_MAX));
        assert_string_equal(kube_patch_type_to_string(KUBE_PATCH_JSON),
                            "application/json-patch+json");
}

static void
jitter_stays_in_range_and_varies(void **state)
{
        bool seen[11] = { false };
        unsigned distinct = 0;

        for (int i = 0; i < 2000; i++) {
                unsigned v = kube__jitter(10);
                assert_true(v <= 10);
                seen[v] = true;
        }
        for (size_t i = 0; i < ELEMENTSOF(seen); i++)
                distinct += seen[i];
        assert_int_equal(distinct, 11);
        assert_int_equal(kube__jitter(0), 0);
}

static int
count_event(enum kube_event_type type, const cJSON *object, void *userdata)
{
        (void)type;
        (void)object;
        ++*(unsigned *)userdata;
        return 0;
}

/* The watch stream's framing fed in chunks of every size from 1 byte up.  The ERROR event
 * with code 1e300 was found by fuzz-kube-watch: its code was converted to long before any
 * range check (undefined behaviour); any code outside 100..599 is now taken as 500. */
static void
watch_stream_frames_events_across_chunks(void **state)
{
        static const struct {
                const char *body;
                int feed;           /* the feed's result */
                int end;            /* kube__watch_end's, after a clean feed */
                unsigned events;
                const char *rv;     /* the newest resourceVersion, or NULL */
        } cases[] = {
                { "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"7\"}}}\n"
                  "\r\n\n{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n",
                  0, 2, 2, "9" },
                { "{\"type\":\"DELETED\",\"object\":{}}\n{\"type\":\"ADDED\"", 0, -ECONNRESET, 1, NULL },
                { "{\"type\":\"ERROR\",\"object\":{\"code\":410}}\n", -ESTALE, 0, 0, NULL },
                { "{\"type\":\"ERROR\",\"object\":{\"code\":1e300}}\n", -EIO, 0, 0, NULL },
                { "{\"type\":\"ERROR\",\"object\":{\"code\":-1e300}}\n", -EIO, 0, 0, NULL },
                { "{\"type\":\"ERROR\",\"object\":{\"code\":200}}\n", -EPROTO, 0, 0, NULL },
                { "{\"type\":\"NOPE\",\"object\":{}}\n", -EBADMSG, 0, 0, NULL },
                { "{\"type\":\"ADDED\",\"object\":[]}\n", -EBADMSG, 0, 0, NULL },
                { "not json\n", -EBADMSG, 0, 0, NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                size_t len = strlen(cases[i].body);
                for (size_t chunk = 1; chunk <= len; chunk++) {
                        struct kube_error err = { 0 };
                        struct kube__watch w;
                        unsigned events = 0;
                        char *rv = NULL;
                        int r = 0;

                        kube__watch_init(&w, count_event, &events, &rv, &err);
                        for (size_t off = 0; off < len && r == 0; off += chunk)
                                r = kube__watch_feed(&w, cases[i].body + off, MIN(chunk, len - off));
                        assert_int_equal(r, cases[i].feed);
                        if (r == 0)
                                assert_int_equal(kube__watch_end(&w), cases[i].end);
                        else
                                assert_true(err.message[0] != '\0');
                        kube__watch_release(&w);
                        assert_int_equal(events, cases[i].events);
                        if (cases[i].rv)
                                assert_string_equal(rv, cases[i].rv);
                        else
                                assert_null(rv);
                        free(rv);
                }
        }
}

int
main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(kubeconfig_cases_parse_or_fail_clearly),
                cmocka_unit_test(kubeconfig_inline_data_is_base64_decoded),
                cmocka_unit_test(kubeconfig_context_argument_overrides_current_context),
                cmocka_unit_test(kubeconfig_over_its_cap_is_refused),
                cmocka_unit_test(in_cluster_cases_configure_or_fail_clearly),
                cmocka_unit_test(pod_decoder_cases),
                cmocka_unit_test(pod_decoder_counts_configured_resource_names),
                cmocka_unit_test(pod_decoder_keeps_the_keys_that_name_its_group),
                cmocka_unit_test(pod_decoder_keeps_listed_annotations_past_the_cap),
                cmocka_unit_test(podgroup_decoder_keeps_min_count_and_topology_key),
                cmocka_unit_test(podgroup_decoder_cases),
                cmocka_unit_test(podgroup_decoder_refuses_an_oversized_name),
                cmocka_unit_test(node_decoder_keeps_what_topofit_needs),
                cmocka_unit_test(node_decoder_keeps_every_label_when_asked),
                cmocka_unit_test(node_decoder_drops_an_oversized_topology_annotation),
                cmocka_unit_test(base64_decoder_cases),
                cmocka_unit_test(query_values_are_percent_encoded),
                cmocka_unit_test(enum_tables_round_trip),
                cmocka_unit_test(jitter_stays_in_range_and_varies),
                cmocka_unit_test(watch_stream_frames_events_across_chunks),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
