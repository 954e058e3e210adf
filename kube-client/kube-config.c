/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where the API server is and how to authenticate: in-cluster (service account) or a
 * kubeconfig file.  The kubeconfig is YAML (JSON is a subset); libyaml turns it into a
 * cJSON tree of strings (aliases refused, depth and size capped) that the code below walks.
 * Everything read is copied into struct kube_config, which owns it; file paths are
 * resolved against the kubeconfig's directory.  The token FILE path is kept, not only its
 * contents: kube-http.c re-reads it (bound tokens rotate).  No I/O after loading.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "buf.h"
#include "kube-private.h"
#include "str.h"

#define KUBE_YAML_MAX_DEPTH 32

int
kube__read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
        CLEANUP(buf_release) struct buf b;
        char chunk[16384];
        struct stat st;
        int fd, r = 0;

        buf_init(&b, max);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                r = -EINVAL;
        else if ((uint64_t)st.st_size > max)
                r = -E2BIG;
        /* Read to the cap even when the file grew since fstat(). */
        while (r == 0) {
                ssize_t n = read(fd, chunk, sizeof(chunk));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        r = -errno;
                else if (n == 0)
                        break;
                else
                        r = buf_append(&b, chunk, (size_t)n);
        }
        close(fd);
        if (r < 0)
                return r;
        /* buf_steal() of a never-written buf returns unterminated memory: append nothing
         * first, which terminates. */
        r = buf_append(&b, "", 0);
        if (r < 0)
                return r;
        *ret = buf_steal(&b, ret_len);
        return *ret ? 0 : -ENOMEM;
}

static const signed char b64_table[256] = {
        ['A'] = 1,  ['B'] = 2,  ['C'] = 3,  ['D'] = 4,  ['E'] = 5,  ['F'] = 6,  ['G'] = 7,
        ['H'] = 8,  ['I'] = 9,  ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14,
        ['O'] = 15, ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21,
        ['V'] = 22, ['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28,
        ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35,
        ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42,
        ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49,
        ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
        ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63,
        ['/'] = 64,
}; /* value + 1; 0 = not a base64 digit */

int
kube__base64_decode(const char *in, size_t len, char **ret, size_t *ret_len)
{
        CLEANUP(freep) char *out = malloc(len / 4 * 3 + 4);
        uint32_t acc = 0;
        size_t n = 0, bits = 0, pad = 0;

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = (unsigned char)in[i];
                if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
                        continue;
                if (ch == '=') {
                        pad++;
                        continue;
                }
                if (pad || !b64_table[ch])
                        return -EINVAL;
                acc = acc << 6 | (uint32_t)(b64_table[ch] - 1);
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (char)(acc >> bits & 0xff);
                }
        }
        if (pad > 2 || bits >= 6)
                return -EINVAL;
        out[n] = 0;
        *ret = TAKE_PTR(out);
        *ret_len = n;
        return 0;
}

struct kube_config *
kube_config_free(struct kube_config *c)
{
        if (!c)
                return NULL;
        free(c->server);
        free(c->ns);
        free(c->ca_pem);
        free(c->cert_pem);
        if (c->key_pem)
                explicit_bzero(c->key_pem, c->key_len);
        free(c->key_pem);
        if (c->token)
                explicit_bzero(c->token, strlen(c->token));
        free(c->token);
        free(c->token_file);
        free(c->username);
        if (c->password)
                explicit_bzero(c->password, strlen(c->password));
        free(c->password);
        free(c);
        return NULL;
}

const char *
kube_config_server(const struct kube_config *c)
{
        return c->server;
}

const char *
kube_config_namespace(const struct kube_config *c)
{
        return c->ns ? c->ns : "default";
}

void
kube_config_set_token_refresh(struct kube_config *c, unsigned seconds)
{
        c->token_refresh_sec = seconds;
}

static struct kube_config *
config_new(void)
{
        struct kube_config *c = calloc(1, sizeof(*c));
        if (c)
                c->token_refresh_sec = KUBE_TOKEN_REFRESH_SEC;
        return c;
}

/* Trims a token read from a file; an empty token is an error. */
static int
token_trim(char *t)
{
        const char *s = t;
        size_t len = strlen(t);

        str_trim(&s, &len);
        if (len == 0)
                return -EINVAL;
        memmove(t, s, len);
        t[len] = 0;
        return 0;
}

static char *
path_join(const char *dir, const char *name)
{
        char *p = NULL;

        if (name[0] == '/' || !dir)
                return strdup(name);
        if (asprintf(&p, "%s/%s", dir, name) < 0)
                return NULL;
        return p;
}

int
kube_config_in_cluster(const char *sa_dir, struct kube_config **ret, const char **ret_why)
{
        CLEANUP(kube_config_freep) struct kube_config *c = NULL;
        CLEANUP(freep) char *token_path = NULL, *ca_path = NULL, *ns_path = NULL, *tok = NULL;
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *port = getenv("KUBERNETES_SERVICE_PORT");
        int portnum, r;

        if (!sa_dir)
                sa_dir = KUBE_SA_DIR;
        if (!host || !*host || !port || !*port)
                return set_why(ret_why, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                                        "are not set: not running in a cluster"),
                       -ENOENT;
        if (str_to_int(port, strlen(port), 1, 65535, &portnum) < 0)
                return set_why(ret_why, "KUBERNETES_SERVICE_PORT is not a port number"), -EINVAL;
        if (strlen(host) > KUBE_MAX_NAME || strpbrk(host, "/@?# "))
                return set_why(ret_why, "KUBERNETES_SERVICE_HOST is not a host name or address"),
                       -EINVAL;
        c = config_new();
        if (!c)
                return -ENOMEM;
        /* An IPv6 literal needs brackets in a URL. */
        if (asprintf(&c->server, strchr(host, ':') ? "https://[%s]:%d" : "https://%s:%d", host,
                     portnum) < 0) {
                c->server = NULL;
                return -ENOMEM;
        }
        token_path = path_join(sa_dir, "token");
        ca_path = path_join(sa_dir, "ca.crt");
        ns_path = path_join(sa_dir, "namespace");
        if (!token_path || !ca_path || !ns_path)
                return -ENOMEM;
        r = kube__read_file(token_path, KUBE_MAX_TOKEN, &tok, NULL);
        if (r == -E2BIG)
                return set_why(ret_why, "the service account token file is too large"), r;
        if (r < 0)
                return set_why(ret_why, "cannot read the service account token file"), r;
        if (token_trim(tok) < 0)
                return set_why(ret_why, "the service account token file is empty"), -EINVAL;
        r = kube__read_file(ca_path, KUBE_MAX_PEM, &c->ca_pem, &c->ca_len);
        if (r == -E2BIG)
                return set_why(ret_why, "the service account ca.crt is too large"), r;
        if (r < 0)
                return set_why(ret_why, "cannot read the service account ca.crt"), r;
        if (kube__read_file(ns_path, KUBE_MAX_NAME + 2, &c->ns, NULL) >= 0) {
                if (token_trim(c->ns) < 0) {
                        free(c->ns);
                        c->ns = NULL;
                }
        }
        c->token_file = TAKE_PTR(token_path);
        /* The token itself is re-read by the client; it starts from this copy. */
        c->token = TAKE_PTR(tok);
        *ret = TAKE_PTR(c);
        return 0;
}

/* --- kubeconfig: YAML -> cJSON --------------------------------------------------------- */

/* Builds the value that starts with the event just parsed (ev) and consumes its events.
 * Scalars become strings (the walker interprets "true"/"false"), no aliases. */
static int
yaml_value(yaml_parser_t *p, yaml_event_t *ev, unsigned depth, cJSON **ret, const char **ret_why)
{
        CLEANUP(cJSON_Deletep) cJSON *v = NULL;
        int r;

        if (depth > KUBE_YAML_MAX_DEPTH)
                return set_why(ret_why, "kubeconfig nests too deeply"), -EINVAL;
        switch (ev->type) {
        case YAML_SCALAR_EVENT:
                v = cJSON_CreateString((const char *)ev->data.scalar.value);
                if (!v)
                        return -ENOMEM;
                break;
        case YAML_ALIAS_EVENT:
                return set_why(ret_why, "kubeconfig uses YAML aliases, which are not supported"),
                       -EINVAL;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: {
                bool map = ev->type == YAML_MAPPING_START_EVENT;
                v = map ? cJSON_CreateObject() : cJSON_CreateArray();
                if (!v)
                        return -ENOMEM;
                for (;;) {
                        yaml_event_t e, e2;
                        cJSON *child = NULL;
                        if (!yaml_parser_parse(p, &e))
                                return set_why(ret_why, "kubeconfig is not valid YAML"), -EINVAL;
                        if (e.type == YAML_SEQUENCE_END_EVENT || e.type == YAML_MAPPING_END_EVENT) {
                                yaml_event_delete(&e);
                                break;
                        }
                        if (!map) {
                                r = yaml_value(p, &e, depth + 1, &child, ret_why);
                                yaml_event_delete(&e);
                                if (r < 0)
                                        return r;
                                cJSON_AddItemToArray(v, child);
                                continue;
                        }
                        if (e.type != YAML_SCALAR_EVENT) {
                                yaml_event_delete(&e);
                                return set_why(ret_why, "kubeconfig has a non-scalar mapping key"),
                                       -EINVAL;
                        }
                        if (!yaml_parser_parse(p, &e2)) {
                                yaml_event_delete(&e);
                                return set_why(ret_why, "kubeconfig is not valid YAML"), -EINVAL;
                        }
                        r = yaml_value(p, &e2, depth + 1, &child, ret_why);
                        yaml_event_delete(&e2);
                        if (r < 0) {
                                yaml_event_delete(&e);
                                return r;
                        }
                        /* Later duplicate keys replace earlier ones, like most YAML readers. */
                        const char *key = (const char *)e.data.scalar.value;
                        if (cJSON_GetObjectItemCaseSensitive(v, key))
                                cJSON_ReplaceItemInObjectCaseSensitive(v, key, child);
                        else
                                cJSON_AddItemToObject(v, key, child);
                        yaml_event_delete(&e);
                }
                break;
        }
        default:
                return set_why(ret_why, "kubeconfig is not valid YAML"), -EINVAL;
        }
        *ret = TAKE_PTR(v);
        return 0;
}

static void
yaml_parser_deletep(yaml_parser_t **p)
{
        if (*p)
                yaml_parser_delete(*p);
}

/* Parses the first YAML document of text into a cJSON tree. */
static int
yaml_to_cjson(const char *text, size_t len, cJSON **ret, const char **ret_why)
{
        yaml_parser_t parser;
        CLEANUP(yaml_parser_deletep) yaml_parser_t *p = NULL;
        cJSON *root = NULL;
        int r;

        if (!yaml_parser_initialize(&parser))
                return -ENOMEM;
        p = &parser;
        yaml_parser_set_input_string(p, (const unsigned char *)text, len);
        for (;;) {
                yaml_event_t ev;
                if (!yaml_parser_parse(p, &ev))
                        return set_why(ret_why, "kubeconfig is not valid YAML"), -EINVAL;
                if (ev.type == YAML_STREAM_END_EVENT) {
                        yaml_event_delete(&ev);
                        return set_why(ret_why, "kubeconfig is empty"), -EINVAL;
                }
                if (ev.type == YAML_STREAM_START_EVENT || ev.type == YAML_DOCUMENT_START_EVENT) {
                        yaml_event_delete(&ev);
                        continue;
                }
                r = yaml_value(p, &ev, 0, &root, ret_why);
                yaml_event_delete(&ev);
                if (r < 0)
                        return r;
                break;
        }
        if (!cJSON_IsObject(root)) {
                cJSON_Delete(root);
                return set_why(ret_why, "kubeconfig is not a mapping"), -EINVAL;
        }
        *ret = root;
        return 0;
}

static const char *
jstr(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The "cluster"/"context"/"user" body of the entry named name in list key. */
static const cJSON *
named_entry(const cJSON *root, const char *list, const char *field, const char *name)
{
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, list), *e;

        cJSON_ArrayForEach(e, arr) {
                const char *n = jstr(e, "name");
                if (n && strcmp(n, name) == 0)
                        return cJSON_GetObjectItemCaseSensitive(e, field);
        }
        return NULL;
}

/* Reads PEM material from "<key>-data" (base64) or "<key>" (a file path). */
static int
load_pem(const cJSON *o, const char *key, const char *dir, char **ret, size_t *ret_len,
         const char **ret_why, const char *why_bad, const char *why_file)
{
        char datakey[64];
        const char *data, *file;
        CLEANUP(freep) char *path = NULL;
        int r;

        snprintf(datakey, sizeof(datakey), "%s-data", key);
        data = jstr(o, datakey);
        file = jstr(o, key);
        if (data) {
                if (strlen(data) > KUBE_MAX_PEM / 3 * 4 + 16)
                        return set_why(ret_why, why_bad), -E2BIG;
                r = kube__base64_decode(data, strlen(data), ret, ret_len);
                if (r < 0)
                        return set_why(ret_why, why_bad), r;
                return 1;
        }
        if (!file)
                return 0;
        path = path_join(dir, file);
        if (!path)
                return -ENOMEM;
        r = kube__read_file(path, KUBE_MAX_PEM, ret, ret_len);
        if (r < 0)
                return set_why(ret_why, why_file), r;
        return 1;
}

static bool
yaml_true(const char *s)
{
        static const char *const yes[] = { "true", "True", "TRUE", "yes", "on" };
        for (size_t i = 0; s && i < ELEMENTSOF(yes); i++)
                if (strcmp(s, yes[i]) == 0)
                        return true;
        return false;
}

int
kube_config_from_kubeconfig(const char *path, const char *context, struct kube_config **ret,
                            const char **ret_why)
{
        CLEANUP(kube_config_freep) struct kube_config *c = NULL;
        CLEANUP(cJSON_Deletep) cJSON *root = NULL;
        CLEANUP(freep) char *text = NULL, *dir = NULL, *tok = NULL;
        const cJSON *ctx, *cluster, *user;
        const char *cluster_name, *user_name, *server, *s;
        size_t len;
        int r;

        r = kube__read_file(path, KUBE_MAX_KUBECONFIG, &text, &len);
        if (r == -E2BIG)
                return set_why(ret_why, "kubeconfig file is too large"), r;
        if (r < 0)
                return set_why(ret_why, "cannot read the kubeconfig file"), r;
        r = yaml_to_cjson(text, len, &root, ret_why);
        if (r < 0)
                return r;

        s = strrchr(path, '/');
        dir = s ? str_ndup(path, (size_t)(s - path + (s == path))) : strdup(".");
        if (!dir)
                return -ENOMEM;

        if (!context)
                context = jstr(root, "current-context");
        if (!context || !*context)
                return set_why(ret_why, "kubeconfig has no current-context"), -ENOENT;
        ctx = named_entry(root, "contexts", "context", context);
        if (!cJSON_IsObject(ctx))
                return set_why(ret_why, "kubeconfig has no context of that name"), -ENOENT;
        cluster_name = jstr(ctx, "cluster");
        user_name = jstr(ctx, "user");
        if (!cluster_name)
                return set_why(ret_why, "kubeconfig context names no cluster"), -EINVAL;
        cluster = named_entry(root, "clusters", "cluster", cluster_name);
        if (!cJSON_IsObject(cluster))
                return set_why(ret_why, "kubeconfig has no cluster of the context's name"),
                       -ENOENT;
        user = user_name ? named_entry(root, "users", "user", user_name) : NULL;
        if (user_name && !cJSON_IsObject(user))
                return set_why(ret_why, "kubeconfig has no user of the context's name"), -ENOENT;

        c = config_new();
        if (!c)
                return -ENOMEM;

        server = jstr(cluster, "server");
        if (!server || !*server)
                return set_why(ret_why, "kubeconfig cluster has no server"), -EINVAL;
        if (!str_has_prefix(server, "https://") && !str_has_prefix(server, "http://"))
                return set_why(ret_why, "kubeconfig server is not an http(s) URL"), -EINVAL;
        if (strlen(server) > KUBE_MAX_PATH / 2)
                return set_why(ret_why, "kubeconfig server URL is too long"), -EINVAL;
        len = strlen(server);
        while (len > 8 && server[len - 1] == '/')
                len--;
        c->server = str_ndup(server, len);
        if (!c->server)
                return -ENOMEM;
        s = jstr(ctx, "namespace");
        if (s && *s && !(c->ns = strdup(s)))
                return -ENOMEM;

        c->insecure = yaml_true(jstr(cluster, "insecure-skip-tls-verify"));
        r = load_pem(cluster, "certificate-authority", dir, &c->ca_pem, &c->ca_len, ret_why,
                     "kubeconfig certificate-authority-data is not valid base64",
                     "cannot read the kubeconfig certificate-authority file");
        if (r < 0)
                return r;
        if (cJSON_GetObjectItemCaseSensitive(cluster, "proxy-url"))
                return set_why(ret_why, "kubeconfig proxy-url is not supported"), -EOPNOTSUPP;

        if (!user)
                goto done;
        if (cJSON_GetObjectItemCaseSensitive(user, "exec"))
                return set_why(ret_why, "kubeconfig user uses an exec credential plugin, which "
                                        "is not supported: use a token, tokenFile or client "
                                        "certificate"),
                       -EOPNOTSUPP;
        if (cJSON_GetObjectItemCaseSensitive(user, "auth-provider"))
                return set_why(ret_why, "kubeconfig user uses an auth-provider, which is not "
                                        "supported: use a token, tokenFile or client certificate"),
                       -EOPNOTSUPP;
        r = load_pem(user, "client-certificate", dir, &c->cert_pem, &c->cert_len, ret_why,
                     "kubeconfig client-certificate-data is not valid base64",
                     "cannot read the kubeconfig client-certificate file");
        if (r < 0)
                return r;
        r = load_pem(user, "client-key", dir, &c->key_pem, &c->key_len, ret_why,
                     "kubeconfig client-key-data is not valid base64",
                     "cannot read the kubeconfig client-key file");
        if (r < 0)
                return r;
        if (!!c->cert_pem != !!c->key_pem)
                return set_why(ret_why, c->cert_pem ? "kubeconfig has a client certificate "
                                                      "but no client key"
                                                    : "kubeconfig has a client key but no "
                                                      "client certificate"),
                       -EINVAL;

        s = jstr(user, "tokenFile");
        if (s) {
                c->token_file = path_join(dir, s);
                if (!c->token_file)
                        return -ENOMEM;
                r = kube__read_file(c->token_file, KUBE_MAX_TOKEN, &tok, NULL);
                if (r < 0)
                        return set_why(ret_why, "cannot read the kubeconfig tokenFile"), r;
                if (token_trim(tok) < 0)
                        return set_why(ret_why, "the kubeconfig tokenFile is empty"), -EINVAL;
                c->token = TAKE_PTR(tok);
        } else if ((s = jstr(user, "token"))) {
                if (strlen(s) > KUBE_MAX_TOKEN)
                        return set_why(ret_why, "kubeconfig token is too long"), -E2BIG;
                if (!*s)
                        return set_why(ret_why, "kubeconfig token is empty"), -EINVAL;
                c->token = strdup(s);
                if (!c->token)
                        return -ENOMEM;
        }
        s = jstr(user, "username");
        if (s) {
                const char *pw = jstr(user, "password");
                if (!pw)
                        return set_why(ret_why, "kubeconfig user has a username but no password"),
                               -EINVAL;
                c->username = strdup(s);
                c->password = strdup(pw);
                if (!c->username || !c->password)
                        return -ENOMEM;
        }
        if (str_has_prefix(c->server, "http://") && (c->token || c->cert_pem || c->username))
                return set_why(ret_why, "kubeconfig sends credentials over plain http"), -EINVAL;
done:
        *ret = TAKE_PTR(c);
        return 0;
}

int
kube_config_load(const char *path, struct kube_config **ret, const char **ret_why)
{
        CLEANUP(freep) char *first = NULL, *home_cfg = NULL;
        const char *env, *home;
        int r;

        if (path)
                return kube_config_from_kubeconfig(path, NULL, ret, ret_why);
        env = getenv("KUBECONFIG");
        if (env && *env) {
                const char *colon = strchr(env, ':');
                first = colon ? str_ndup(env, (size_t)(colon - env)) : strdup(env);
                if (!first)
                        return -ENOMEM;
                return kube_config_from_kubeconfig(first, NULL, ret, ret_why);
        }
        r = kube_config_in_cluster(NULL, ret, ret_why);
        if (r != -ENOENT)
                return r;
        home = getenv("HOME");
        if (!home || asprintf(&home_cfg, "%s/.kube/config", home) < 0) {
                home_cfg = NULL;
                return set_why(ret_why, "no kubeconfig given and not running in a cluster"),
                       -ENOENT;
        }
        if (access(home_cfg, F_OK) < 0)
                return set_why(ret_why, "no kubeconfig given and not running in a cluster"),
                       -ENOENT;
        return kube_config_from_kubeconfig(home_cfg, NULL, ret, ret_why);
}
