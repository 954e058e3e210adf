/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node annotation codec (key topofit.io/topology, docs/annotations.md): a compact,
 * versioned JSON form of `struct topo`.  The link matrix is one string of link codes per
 * GPU ("X NV18 NV18 ..."), NIC relations one string per NIC, GPUs an array of objects with
 * short keys that are left out when they hold their default.  Pure: reads with the
 * project's JSON reader (common/json.h: cJSON in a capped arena, the duplicate-key rule),
 * writes into a capped buf.
 * Everything read is validated (counts, matrix shape and symmetry, names, ranges); unknown
 * keys are ignored for forward compatibility, an unknown "v" is an error naming it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "str.h"
#include "topo-private.h"
#include "topo.h"

#define TOPO_ANNOTATION_MAX_MEMORY_MIB (UINT64_C(1) << 40) /* 1 EiB: anything above is junk */

/* --- writing ------------------------------------------------------------------------------- */

/* One link code: NAME[count][w<weight>][h<hops>], e.g. "NV18", "XGMIw15h1", "SYS".  Built
 * by hand: this runs n^2 times per annotation and printf dominated the encoder. */
static int
put_cell(struct buf *b, const struct topo_pair *p)
{
        const char *name = topo_link_to_string((enum topo_link)p->link);
        char code[32], *o;
        size_t nl;

        if (!name)
                return -EINVAL;
        nl = strlen(name);
        memcpy(code, name, nl);
        o = code + nl;
        if (p->links)
                o += str_format_uint(o, p->links);
        if (p->weight) {
                *o++ = 'w';
                o += str_format_uint(o, p->weight);
        }
        if (p->hops) {
                *o++ = 'h';
                o += str_format_uint(o, p->hops);
        }
        return buf_append(b, code, (size_t)(o - code));
}

/* value as a JSON string.  Identity fields are printable ASCII (topo__id_ok), so only the
 * quote and the backslash need escaping; runs between them are appended whole. */
static int
put_ascii_string(struct buf *b, const char *value)
{
        const char *run = value;
        int r = buf_append(b, "\"", 1);

        for (const char *p = value; r >= 0 && *p; p++)
                if (*p == '"' || *p == '\\') {
                        r = buf_append(b, run, (size_t)(p - run));
                        if (r >= 0)
                                r = buf_append(b, *p == '"' ? "\\\"" : "\\\\", 2);
                        run = p + 1;
                }
        if (r >= 0)
                r = buf_puts(b, run);
        return r < 0 ? r : buf_append(b, "\"", 1);
}

static int
put_key_string(struct buf *b, const char *key, const char *value)
{
        int r;

        if (!value[0])
                return 0;
        if (!topo__id_ok(value, strlen(value)))
                return -EINVAL; /* not something a parser produced */
        r = buf_append(b, ",\"", 2);
        if (r >= 0)
                r = buf_puts(b, key);
        if (r >= 0)
                r = buf_append(b, "\":", 2);
        return r < 0 ? r : put_ascii_string(b, value);
}

static int
put_gpu(struct buf *b, const struct topo_gpu *g)
{
        /* Every member is optional; "{" then ",k:v" pairs, the first comma dropped below. */
        size_t start = b->len;
        int r = buf_puts(b, "{");

        if (r >= 0)
                r = put_key_string(b, "uuid", g->uuid);
        if (r >= 0)
                r = put_key_string(b, "model", g->model);
        if (r >= 0)
                r = put_key_string(b, "bus", g->pci_bus_id);
        if (r >= 0 && g->cpu_affinity[0] &&
            topo__cpuset_check(g->cpu_affinity, strlen(g->cpu_affinity)) < 0)
                r = -EINVAL;
        if (r >= 0)
                r = put_key_string(b, "cpus", g->cpu_affinity);
        if (r >= 0 && g->memory_mib)
                r = buf_printf(b, ",\"mem\":%llu", (unsigned long long)g->memory_mib);
        if (r >= 0 && g->numa >= 0)
                r = buf_printf(b, ",\"numa\":%d", g->numa);
        if (r >= 0 && g->pcie_gen)
                r = buf_printf(b, ",\"pg\":%u", g->pcie_gen);
        if (r >= 0 && g->pcie_width)
                r = buf_printf(b, ",\"pw\":%u", g->pcie_width);
        if (r >= 0 && g->nvlink_gen)
                r = buf_printf(b, ",\"nvg\":%u", g->nvlink_gen);
        if (r >= 0 && g->mig != TOPO_MIG_UNKNOWN)
                r = buf_printf(b, ",\"mig\":\"%s\"", topo_mig_to_string((enum topo_mig)g->mig));
        if (r >= 0 && !g->healthy)
                r = buf_puts(b, ",\"ok\":false");
        if (r >= 0)
                r = buf_puts(b, "}");
        if (r >= 0 && b->data[start + 1] == ',')
                memmove(b->data + start + 1, b->data + start + 2, b->len - start - 1), b->len--;
        return r;
}

int
topo_to_annotation(const struct topo *t, char **ret_json, size_t *ret_len)
{
        struct buf b;
        int r;

        if (!t || !ret_json)
                return -EINVAL;
        buf_init(&b, TOPO_MAX_ANNOTATION_BYTES);
        r = buf_printf(&b, "{\"v\":%d", TOPO_ANNOTATION_VERSION);
        if (r >= 0 && t->vendor != TOPO_VENDOR_UNKNOWN)
                r = buf_printf(&b, ",\"vendor\":\"%s\"",
                               topo_vendor_to_string((enum topo_vendor)t->vendor));
        if (r >= 0 && t->cpu_link != TOPO_CPU_LINK_UNKNOWN)
                r = buf_printf(&b, ",\"cpu_link\":\"%s\"",
                               topo_cpu_link_to_string((enum topo_cpu_link)t->cpu_link));
        if (r >= 0 && t->nvswitch)
                r = buf_puts(&b, ",\"nvswitch\":true");
        if (r >= 0)
                r = put_key_string(&b, "domain", t->nvlink_domain);
        if (r >= 0)
                r = put_key_string(&b, "node", t->node_name);
        if (r >= 0)
                r = buf_puts(&b, ",\"gpus\":[");
        for (unsigned i = 0; r >= 0 && i < t->n_gpus; i++) {
                if (i)
                        r = buf_puts(&b, ",");
                if (r >= 0)
                        r = put_gpu(&b, &t->gpus[i]);
        }
        if (r >= 0)
                r = buf_puts(&b, "],\"links\":[");
        for (unsigned i = 0; r >= 0 && i < t->n_gpus; i++) {
                r = buf_puts(&b, i ? ",\"" : "\"");
                for (unsigned j = 0; r >= 0 && j < t->n_gpus; j++) {
                        if (j)
                                r = buf_puts(&b, " ");
                        if (r >= 0)
                                r = put_cell(&b, topo_pair(t, i, j));
                }
                if (r >= 0)
                        r = buf_puts(&b, "\"");
        }
        if (r >= 0)
                r = buf_puts(&b, "]");
        if (r >= 0 && t->n_nics > 0)
                r = buf_puts(&b, ",\"nics\":[");
        for (unsigned k = 0; r >= 0 && k < t->n_nics; k++) {
                r = buf_puts(&b, k ? ",{\"name\":" : "{\"name\":");
                if (r >= 0 && !topo__id_ok(t->nics[k].name, strlen(t->nics[k].name)))
                        r = -EINVAL;
                if (r >= 0)
                        r = put_ascii_string(&b, t->nics[k].name);
                if (r >= 0 && t->nics[k].numa >= 0)
                        r = buf_printf(&b, ",\"numa\":%d", t->nics[k].numa);
                if (r >= 0)
                        r = buf_puts(&b, ",\"links\":\"");
                for (unsigned j = 0; r >= 0 && j < t->n_gpus; j++) {
                        struct topo_pair p = {.link = t->nic_links[(size_t)k * t->n_gpus + j]};
                        if (j)
                                r = buf_puts(&b, " ");
                        if (r >= 0)
                                r = put_cell(&b, &p);
                }
                if (r >= 0)
                        r = buf_puts(&b, "\"}");
        }
        if (r >= 0 && t->n_nics > 0)
                r = buf_puts(&b, "]");
        if (r >= 0)
                r = buf_puts(&b, "}");
        if (r < 0) {
                buf_release(&b);
                return r;
        }
        *ret_json = buf_steal(&b, ret_len);
        return 0;
}

/* --- reading ------------------------------------------------------------------------------- */

struct reader {
        struct json_doc *d;
        struct topo_error *err;
};

#define bad(rd, r, ...) topo__error((rd)->err, (r), 0, 0, __VA_ARGS__)

/* Reads the digits at s[*i..len) as a number in [1, max]; -EINVAL when there are none, when
 * it is out of range or has more than 5 digits. */
static int
cell_number(const char *s, size_t len, size_t *i, unsigned max, unsigned *ret)
{
        unsigned v = 0;
        size_t a = *i;

        while (*i < len && s[*i] >= '0' && s[*i] <= '9' && *i - a < 5)
                v = v * 10 + (unsigned)(s[(*i)++] - '0');
        if (*i == a || v < 1 || v > max || (*i < len && s[*i] >= '0' && s[*i] <= '9'))
                return -EINVAL;
        *ret = v;
        return 0;
}

/* Link names as written, longest first so that "XGMI" never reads as "X". */
static const struct {
        const char *name;
        uint8_t len;
        uint8_t link;
} cell_names[] = {
        {"XGMI", 4, TOPO_LINK_XGMI}, {"PCIE", 4, TOPO_LINK_PCIE},   {"NODE", 4, TOPO_LINK_NODE},
        {"PIX", 3, TOPO_LINK_PIX},   {"PXB", 3, TOPO_LINK_PXB},     {"PHB", 3, TOPO_LINK_PHB},
        {"SYS", 3, TOPO_LINK_SYS},   {"N/A", 3, TOPO_LINK_UNKNOWN}, {"NV", 2, TOPO_LINK_NVLINK},
        {"X", 1, TOPO_LINK_SELF},
};

static int
cell_parse(const char *s, size_t len, struct topo_pair *ret)
{
        struct topo_pair p = {0};
        size_t i = 0;
        unsigned v;
        int link = -1;

        for (size_t k = 0; k < ELEMENTSOF(cell_names); k++)
                if (cell_names[k].len <= len && s[0] == cell_names[k].name[0] &&
                    memcmp(s, cell_names[k].name, cell_names[k].len) == 0) {
                        link = cell_names[k].link;
                        i = cell_names[k].len;
                        break;
                }
        if (link < 0)
                return -EINVAL;
        p.link = (uint8_t)link;
        if (i < len && s[i] >= '0' && s[i] <= '9') {
                if (cell_number(s, len, &i, TOPO_MAX_NVLINKS, &v) < 0)
                        return -EINVAL;
                p.links = (uint8_t)v;
        }
        if (i < len && s[i] == 'w') {
                i++;
                if (cell_number(s, len, &i, UINT16_MAX, &v) < 0)
                        return -EINVAL;
                p.weight = (uint16_t)v;
        }
        if (i < len && s[i] == 'h') {
                i++;
                if (cell_number(s, len, &i, UINT8_MAX, &v) < 0)
                        return -EINVAL;
                p.hops = (uint8_t)v;
        }
        if (i != len)
                return -EINVAL;
        *ret = p;
        return 0;
}

/* Parses a row string of exactly n space-separated link codes into out[0..n). */
static int
row_parse(struct reader *rd, const char *what, unsigned idx, const char *s, unsigned n,
          struct topo_pair *out)
{
        unsigned k = 0;
        const char *p = s;

        for (;;) {
                const char *sp = strchrnul(p, ' ');
                if (k == n)
                        return bad(rd, -EINVAL, "%s[%u] has more than %u link codes.", what, idx,
                                   n);
                if (cell_parse(p, (size_t)(sp - p), &out[k]) < 0)
                        return bad(rd, -EINVAL, "%s[%u]: link code %u '%.*s' is not valid.", what,
                                   idx, k, (int)MIN(sp - p, 16), p);
                k++;
                if (!*sp)
                        break;
                p = sp + 1;
        }
        if (k != n)
                return bad(rd, -EINVAL, "%s[%u] has %u link codes, expected %u.", what, idx, k, n);
        return 0;
}

static int
get_string(struct reader *rd, const cJSON *obj, const char *key, const char *path, char *dst,
           size_t size)
{
        const cJSON *n = json_doc_get(rd->d, obj, key);
        const char *s;
        size_t len;

        if (!n)
                return 0;
        if (!cJSON_IsString(n))
                return bad(rd, -EINVAL, "%s.%s must be a string.", path, key);
        s = n->valuestring;
        len = strlen(s);
        if (len >= size)
                return bad(rd, -E2BIG, "%s.%s is longer than %zu bytes.", path, key, size - 1);
        if (!topo__id_ok(s, len))
                return bad(rd, -EINVAL, "%s.%s must be printable ASCII.", path, key);
        memcpy(dst, s, len + 1);
        return 0;
}

static int
get_int(struct reader *rd, const cJSON *obj, const char *key, const char *path, int64_t min,
        int64_t max, int64_t *v)
{
        const cJSON *n = json_doc_get(rd->d, obj, key);

        if (!n)
                return 0;
        if (json_get_int64(n, min, max, v) < 0)
                return bad(rd, -EINVAL, "%s.%s must be an integer in [%lld, %lld].", path, key,
                           (long long)min, (long long)max);
        return 1;
}

static int
get_enum(struct reader *rd, const cJSON *obj, const char *key, const char *path,
         int (*from)(const char *), uint8_t *dst)
{
        char s[32];
        int r = get_string(rd, obj, key, path, s, sizeof(s));

        if (r < 0)
                return r;
        if (!json_get(obj, key, NULL))
                return 0;
        int v = from(s);
        if (v < 0)
                return bad(rd, -EINVAL, "%s.%s: unknown value '%s'.", path, key, s);
        *dst = (uint8_t)v;
        return 0;
}

static int
vendor_from(const char *s)
{
        return topo_vendor_from_string(s);
}
static int
cpu_link_from(const char *s)
{
        return topo_cpu_link_from_string(s);
}
static int
mig_from(const char *s)
{
        return topo_mig_from_string(s);
}

static int
read_gpu(struct reader *rd, const cJSON *o, unsigned i, struct topo_gpu *g)
{
        char path[32];
        int64_t v;
        int r;

        snprintf(path, sizeof(path), "gpus[%u]", i);
        if (!cJSON_IsObject(o))
                return bad(rd, -EINVAL, "%s must be an object.", path);
        if ((r = get_string(rd, o, "uuid", path, g->uuid, sizeof(g->uuid))) < 0 ||
            (r = get_string(rd, o, "model", path, g->model, sizeof(g->model))) < 0 ||
            (r = get_string(rd, o, "bus", path, g->pci_bus_id, sizeof(g->pci_bus_id))) < 0 ||
            (r = get_string(rd, o, "cpus", path, g->cpu_affinity, sizeof(g->cpu_affinity))) < 0)
                return r;
        if (g->cpu_affinity[0] && topo__cpuset_check(g->cpu_affinity, strlen(g->cpu_affinity)) < 0)
                return bad(rd, -EINVAL, "%s.cpus '%s' is not a CPU list.", path, g->cpu_affinity);
        if ((r = get_int(rd, o, "mem", path, 0, (int64_t)TOPO_ANNOTATION_MAX_MEMORY_MIB, &v)) < 0)
                return r;
        if (r > 0)
                g->memory_mib = (uint64_t)v;
        if ((r = get_int(rd, o, "numa", path, -1, TOPO_MAX_NUMA_ID, &v)) < 0)
                return r;
        if (r > 0)
                g->numa = (int)v;
        if ((r = get_int(rd, o, "pg", path, 0, 16, &v)) < 0)
                return r;
        if (r > 0)
                g->pcie_gen = (uint8_t)v;
        if ((r = get_int(rd, o, "pw", path, 0, 32, &v)) < 0)
                return r;
        if (r > 0)
                g->pcie_width = (uint8_t)v;
        if ((r = get_int(rd, o, "nvg", path, 0, 5, &v)) < 0)
                return r;
        if (r > 0)
                g->nvlink_gen = (uint8_t)v;
        if ((r = get_enum(rd, o, "mig", path, mig_from, &g->mig)) < 0)
                return r;
        const cJSON *ok = json_doc_get(rd->d, o, "ok");
        if (ok && !cJSON_IsBool(ok))
                return bad(rd, -EINVAL, "%s.ok must be a boolean.", path);
        if (ok)
                g->healthy = cJSON_IsTrue(ok);
        return 0;
}

static const cJSON *
get_array(struct reader *rd, const cJSON *root, const char *key, bool required, int *r)
{
        const cJSON *n = json_doc_get(rd->d, root, key);

        *r = 0;
        if (!n) {
                if (required)
                        *r = bad(rd, -EINVAL, "The annotation has no \"%s\" array.", key);
                return NULL;
        }
        if (!cJSON_IsArray(n))
                *r = bad(rd, -EINVAL, "\"%s\" must be an array.", key);
        return n;
}

/* The version: present, an integer, and the one this build reads. */
static int
read_version(struct reader *rd, const cJSON *root)
{
        const cJSON *vn = json_doc_get(rd->d, root, "v");
        int64_t v;

        if (!vn)
                return bad(rd, -EINVAL, "The annotation has no version (\"v\").");
        if (json_get_int64(vn, INT32_MIN, INT32_MAX, &v) < 0)
                return bad(rd, -EINVAL, "The annotation version (\"v\") must be an integer.");
        if (v != TOPO_ANNOTATION_VERSION)
                return bad(rd, -EPROTONOSUPPORT,
                           "Annotation version %lld is not supported (this build reads version %d).",
                           (long long)v, TOPO_ANNOTATION_VERSION);
        return 0;
}

/* The three arrays, checked for type and size before anything is allocated. */
static int
read_arrays(struct reader *rd, const cJSON *root, const cJSON **gpus, const cJSON **links,
            const cJSON **nics)
{
        size_t n_gpus, n_nics, n_links;
        int r;

        *gpus = get_array(rd, root, "gpus", true, &r);
        if (r < 0)
                return r;
        *links = get_array(rd, root, "links", true, &r);
        if (r < 0)
                return r;
        *nics = get_array(rd, root, "nics", false, &r);
        if (r < 0)
                return r;
        n_gpus = (size_t)cJSON_GetArraySize(*gpus);
        n_nics = (size_t)cJSON_GetArraySize(*nics);
        n_links = (size_t)cJSON_GetArraySize(*links);
        if (n_gpus == 0)
                return bad(rd, -EINVAL, "The annotation lists no GPUs.");
        if (n_gpus > TOPO_MAX_GPUS)
                return bad(rd, -E2BIG, "The annotation lists %zu GPUs, more than %u.", n_gpus,
                           TOPO_MAX_GPUS);
        if (n_nics > TOPO_MAX_NICS)
                return bad(rd, -E2BIG, "The annotation lists %zu NICs, more than %u.", n_nics,
                           TOPO_MAX_NICS);
        if (n_links != n_gpus)
                return bad(rd, -EINVAL, "\"links\" has %zu rows for %zu GPUs.", n_links, n_gpus);
        return 0;
}

/* The top-level scalars: vendor, cpu_link, domain, node, nvswitch. */
static int
read_top(struct reader *rd, const cJSON *root, struct topo *t)
{
        const cJSON *nvs;
        int r;

        if ((r = get_enum(rd, root, "vendor", "annotation", vendor_from, &t->vendor)) < 0 ||
            (r = get_enum(rd, root, "cpu_link", "annotation", cpu_link_from, &t->cpu_link)) < 0 ||
            (r = get_string(rd, root, "domain", "annotation", t->nvlink_domain,
                            sizeof(t->nvlink_domain))) < 0 ||
            (r = get_string(rd, root, "node", "annotation", t->node_name, sizeof(t->node_name))) < 0)
                return r;
        nvs = json_doc_get(rd->d, root, "nvswitch");
        if (nvs && !cJSON_IsBool(nvs))
                return bad(rd, -EINVAL, "\"nvswitch\" must be a boolean.");
        t->nvswitch = cJSON_IsTrue(nvs);
        return 0;
}

/* The GPU-GPU matrix: one string per row, square, symmetric, X exactly on the diagonal. */
static int
read_links(struct reader *rd, const cJSON *links, struct topo *t)
{
        const cJSON *e;
        unsigned i = 0;
        int r;

        cJSON_ArrayForEach(e, links) {
                if (!cJSON_IsString(e))
                        return bad(rd, -EINVAL, "links[%u] must be a string.", i);
                r = row_parse(rd, "links", i, e->valuestring, t->n_gpus, topo_pair_mut(t, i, 0));
                if (r < 0)
                        return r;
                i++;
        }
        for (i = 0; i < t->n_gpus; i++)
                for (unsigned j = 0; j < t->n_gpus; j++) {
                        const struct topo_pair *a = topo_pair(t, i, j), *b = topo_pair(t, j, i);

                        if ((i == j) != (a->link == TOPO_LINK_SELF))
                                return bad(rd, -EINVAL,
                                           "links[%u][%u]: X must be on the diagonal and only there.",
                                           i, j);
                        if (a->link != b->link || a->links != b->links || a->hops != b->hops ||
                            a->weight != b->weight)
                                return bad(rd, -EINVAL, "links is not symmetric at [%u][%u].", i, j);
                }
        return 0;
}

/* NIC k: name, numa, and its relation to each GPU (PCIe relations only). */
static int
read_nic(struct reader *rd, const cJSON *o, unsigned k, struct topo *t)
{
        struct topo_pair cells[TOPO_MAX_GPUS];
        const cJSON *ls;
        char path[32];
        int64_t v;
        int r;

        snprintf(path, sizeof(path), "nics[%u]", k);
        if (!cJSON_IsObject(o))
                return bad(rd, -EINVAL, "%s must be an object.", path);
        if ((r = get_string(rd, o, "name", path, t->nics[k].name, TOPO_ID_MAX)) < 0)
                return r;
        if ((r = get_int(rd, o, "numa", path, -1, TOPO_MAX_NUMA_ID, &v)) < 0)
                return r;
        if (r > 0)
                t->nics[k].numa = (int)v;
        ls = json_doc_get(rd->d, o, "links");
        if (!cJSON_IsString(ls))
                return bad(rd, -EINVAL, "%s.links must be a string.", path);
        r = row_parse(rd, "nics.links", k, ls->valuestring, t->n_gpus, cells);
        if (r < 0)
                return r;
        for (unsigned j = 0; j < t->n_gpus; j++) {
                enum topo_link l = (enum topo_link)cells[j].link;

                if (l == TOPO_LINK_SELF || l == TOPO_LINK_NVLINK || l == TOPO_LINK_XGMI ||
                    cells[j].links || cells[j].weight || cells[j].hops)
                        return bad(rd, -EINVAL, "%s.links: '%s' is not a NIC relation.", path,
                                   topo_link_to_string(l));
                t->nic_links[(size_t)k * t->n_gpus + j] = (uint8_t)l;
        }
        return 0;
}

/* Everything under the root object into a new topology. */
static int
read_root(struct reader *rd, const cJSON *root, struct topo **ret)
{
        CLEANUP(topo_unrefp) struct topo *t = NULL;
        const cJSON *gpus, *links, *nics, *e;
        unsigned i = 0;
        int r;

        if (!cJSON_IsObject(root))
                return bad(rd, -EINVAL, "The annotation must be a JSON object.");
        if ((r = read_version(rd, root)) < 0 || (r = read_arrays(rd, root, &gpus, &links, &nics)) < 0)
                return r;
        t = topo_new((unsigned)cJSON_GetArraySize(gpus), (unsigned)cJSON_GetArraySize(nics));
        if (!t)
                return -ENOMEM;
        if ((r = read_top(rd, root, t)) < 0)
                return r;
        cJSON_ArrayForEach(e, gpus) {
                r = read_gpu(rd, e, i, &t->gpus[i]);
                if (r < 0)
                        return r;
                i++;
        }
        if ((r = read_links(rd, links, t)) < 0)
                return r;
        i = 0;
        cJSON_ArrayForEach(e, nics) {
                r = read_nic(rd, e, i++, t);
                if (r < 0)
                        return r;
        }
        if (json_doc_repeated(rd->d))
                return bad(rd, -EINVAL, "Duplicate key: an object of the annotation repeats a "
                                        "key that is read (refused, see common/json.h).");
        *ret = TAKE_PTR(t);
        return 0;
}

int
topo_parse_annotation(const char *json, size_t len, struct topo **ret, struct topo_error *err)
{
        CLEANUP(json_doc_freep) struct json_doc *d = NULL;
        struct json_error jerr = {0};
        struct reader rd = {.err = err};
        struct topo *t = NULL;
        int r;

        r = topo__check_input(json, len, TOPO_MAX_ANNOTATION_BYTES, "Annotation", err);
        if (r < 0)
                return r;
        r = json_parse(json, len, TOPO_MAX_ANNOTATION_MEMORY, JSON_MAX_DEPTH, &d, &jerr);
        if (r < 0)
                /* Our codes: too deep or too many values is -E2BIG, any other text -EINVAL. */
                return topo__error(err,
                                   r == -ENOMEM                 ? r
                                   : r == -ELOOP || r == -E2BIG ? -E2BIG
                                                                : -EINVAL,
                                   jerr.line, jerr.column, "Annotation JSON: %s",
                                   jerr.msg ? jerr.msg : "invalid.");
        rd.d = d;
        r = read_root(&rd, d->root, &t);
        if (r < 0)
                return r;
        topo_finish(t);
        *ret = t;
        return 0;
}
