/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The topofit.io/gpus codec (docs/annotations.md): the record the extender writes at bind
 * time and that the extender (its cluster view) and the node plugin (admission) read back.
 * One codec beside the topology annotation's, so both sides accept exactly the same
 * records, with one set of constants (TOPO_GPUS_* in topo.h).  Pure: reads through the
 * project's JSON reader (common/json.h), writes into a capped buf.  The value comes from
 * a pod annotation: untrusted, every field is checked and capped.
 */
#include <string.h>

#include "buf.h"
#include "json.h"
#include "topo.h"

#define TOPO_GPUS_MAX_MEMORY (16u * TOPO_GPUS_MAX_BYTES) /* the parsed tree */

static int
why(const char **ret_why, const char *msg, int r)
{
        set_why(ret_why, msg);
        return r;
}

/* Copies an optional string member into dst (""), -EINVAL when not a string or too long. */
static int
opt_string(struct json_doc *d, const cJSON *o, const char *key, char *dst, size_t size)
{
        const cJSON *v = json_doc_get(d, o, key);

        dst[0] = 0;
        if (!v)
                return 0;
        if (!cJSON_IsString(v) || strlen(v->valuestring) >= size)
                return -EINVAL;
        memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
        return 0;
}

/* Whether the container's "uuids" name every GPU (the extender writes "" where the
 * topology had no UUID: then the indices count). */
static bool
uuids_complete(const cJSON *uuids)
{
        const cJSON *e;

        if (!cJSON_IsArray(uuids) || cJSON_GetArraySize(uuids) == 0)
                return false;
        cJSON_ArrayForEach(e, uuids)
                if (!cJSON_IsString(e) || !e->valuestring[0])
                        return false;
        return true;
}

static int
add_gpu(struct topo_mask *set, unsigned g, const char **ret_why)
{
        if (topo_mask_test(set, g))
                return why(ret_why, "topofit.io/gpus lists a GPU twice in one container", -EINVAL);
        topo_mask_set(set, g);
        return 0;
}

static int
set_from_uuids(const cJSON *uuids, unsigned n_gpus, const char (*ids)[TOPO_ID_MAX],
               struct topo_mask *set, const char **ret_why)
{
        const cJSON *e;
        int r;

        cJSON_ArrayForEach(e, uuids) {
                unsigned g = 0;

                while (g < n_gpus && strcmp(ids[g], e->valuestring) != 0)
                        g++;
                if (g == n_gpus)
                        return why(ret_why, "topofit.io/gpus names a GPU this node does not have",
                                   -EINVAL);
                r = add_gpu(set, g, ret_why);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int
set_from_indices(const cJSON *indices, unsigned n_gpus, struct topo_mask *set,
                 const char **ret_why)
{
        const cJSON *e;
        int64_t g;
        int r;

        if (!cJSON_IsArray(indices))
                return why(ret_why, "a topofit.io/gpus container has no indices", -EINVAL);
        cJSON_ArrayForEach(e, indices) {
                r = json_get_int64(e, 0, (int64_t)n_gpus - 1, &g);
                if (r == -ERANGE || (r < 0 && n_gpus == 0))
                        return why(ret_why, "a topofit.io/gpus index is out of range", -ERANGE);
                if (r < 0)
                        return why(ret_why, "a topofit.io/gpus index is not an integer", -EINVAL);
                r = add_gpu(set, (unsigned)g, ret_why);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int
read_container(struct json_doc *d, const cJSON *ct, unsigned n_gpus,
               const char (*ids)[TOPO_ID_MAX], struct topo_gpus_container *ret,
               const char **ret_why)
{
        const cJSON *init, *uuids;
        int r;

        if (!cJSON_IsObject(ct))
                return why(ret_why, "a topofit.io/gpus container is not an object", -EINVAL);
        if (opt_string(d, ct, "name", ret->name, sizeof(ret->name)) < 0)
                return why(ret_why, "a topofit.io/gpus container name is not a valid string",
                           -EINVAL);
        init = json_doc_get(d, ct, "init");
        if (init && !cJSON_IsBool(init))
                return why(ret_why, "a topofit.io/gpus container's init is not a boolean", -EINVAL);
        ret->init = cJSON_IsTrue(init);
        topo_mask_clear(&ret->gpus);
        uuids = json_doc_get(d, ct, "uuids");
        if (ids && uuids_complete(uuids))
                r = set_from_uuids(uuids, n_gpus, ids, &ret->gpus, ret_why);
        else
                r = set_from_indices(json_doc_get(d, ct, "indices"), n_gpus, &ret->gpus, ret_why);
        if (r < 0)
                return r;
        if (topo_mask_count(&ret->gpus) == 0)
                return why(ret_why, "a topofit.io/gpus container has an empty GPU set", -EINVAL);
        return 0;
}

static int
read_record(struct json_doc *d, unsigned n_gpus, const char (*ids)[TOPO_ID_MAX],
            const char *node, struct topo_gpus *g, const char **ret_why)
{
        const cJSON *root = d->root, *version, *containers, *ct;
        struct topo_mask apps = { 0 };
        int64_t v;
        int r;

        if (!cJSON_IsObject(root))
                return why(ret_why, "topofit.io/gpus is not a JSON object", -EINVAL);
        version = json_doc_get(d, root, "version");
        if (json_get_int64(version, TOPO_GPUS_VERSION, TOPO_GPUS_VERSION, &v) < 0)
                return why(ret_why, "the topofit.io/gpus annotation has an unknown version",
                           -EPROTONOSUPPORT);
        if (opt_string(d, root, "node", g->node, sizeof(g->node)) < 0)
                return why(ret_why, "topofit.io/gpus node is not a valid string", -EINVAL);
        if (node && node[0] && g->node[0] && strcmp(g->node, node) != 0)
                return why(ret_why, "topofit.io/gpus names another node", -EINVAL);
        containers = json_doc_get(d, root, "containers");
        if (!cJSON_IsArray(containers))
                return why(ret_why, "topofit.io/gpus has no containers array", -EINVAL);
        if (cJSON_GetArraySize(containers) > TOPO_GPUS_MAX_CONTAINERS)
                return why(ret_why, "too many containers in topofit.io/gpus", -E2BIG);
        g->n = 0;
        cJSON_ArrayForEach(ct, containers) {
                struct topo_gpus_container *c = &g->c[g->n++];

                r = read_container(d, ct, n_gpus, ids, c, ret_why);
                if (r < 0)
                        return r;
                /* App containers of one pod never share a GPU; init containers run first
                 * and reuse them. */
                if (!c->init && topo_mask_intersects(&apps, &c->gpus))
                        return why(ret_why, "two containers share a GPU in topofit.io/gpus",
                                   -EINVAL);
                if (!c->init)
                        topo_mask_or(&apps, &c->gpus);
        }
        if (g->n == 0)
                return why(ret_why, "topofit.io/gpus names no GPU", -EINVAL);
        if (json_doc_repeated(d))
                return why(ret_why, "topofit.io/gpus repeats a key that is read (refused: "
                                    "readers disagree on which copy counts)",
                           -EINVAL);
        return 0;
}

int
topo_gpus_decode(const char *json, size_t len, unsigned n_gpus, const char (*ids)[TOPO_ID_MAX],
                 const char *node, struct topo_gpus *ret, const char **ret_why)
{
        CLEANUP(json_doc_freep) struct json_doc *d = NULL;
        CLEANUP(freep) struct topo_gpus *g = NULL;
        int r;

        if (len > TOPO_GPUS_MAX_BYTES)
                return why(ret_why, "the topofit.io/gpus annotation is too large", -E2BIG);
        if (n_gpus > TOPO_MAX_GPUS)
                return -EINVAL;
        r = json_parse(json, len, TOPO_GPUS_MAX_MEMORY, 0, &d, NULL);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return why(ret_why, "topofit.io/gpus is not valid JSON", -EINVAL);
        g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        r = read_record(d, n_gpus, ids, node, g, ret_why);
        if (r < 0)
                return r;
        *ret = *g;
        return 0;
}

void
topo_gpus_union(const struct topo_gpus *g, struct topo_mask *ret)
{
        topo_mask_clear(ret);
        for (unsigned i = 0; i < g->n; i++)
                topo_mask_or(ret, &g->c[i].gpus);
}

static int
put_container(struct buf *b, const struct topo_gpus_out *c, const struct topo *t, bool first)
{
        int r = buf_puts(b, first ? "{\"name\":" : ",{\"name\":");

        if (r >= 0)
                r = buf_put_json_string(b, c->name ? c->name : "");
        if (r >= 0 && c->init)
                r = buf_puts(b, ",\"init\":true");
        if (r >= 0)
                r = buf_puts(b, ",\"indices\":[");
        for (unsigned k = 0; r >= 0 && k < c->count; k++)
                r = buf_printf(b, k ? ",%u" : "%u", c->gpus[k]);
        if (r >= 0)
                r = buf_puts(b, "],\"uuids\":[");
        for (unsigned k = 0; r >= 0 && k < c->count; k++) {
                unsigned g = c->gpus[k];

                if (k)
                        r = buf_puts(b, ",");
                if (r >= 0)
                        r = buf_put_json_string(b, t && g < t->n_gpus ? t->gpus[g].uuid : "");
        }
        return r >= 0 ? buf_puts(b, "]}") : r;
}

int
topo_gpus_encode(const char *node, const struct topo_gpus_out *c, unsigned n,
                 const struct topo *t, char **ret_json)
{
        struct buf b;
        int r;

        if (n > TOPO_GPUS_MAX_CONTAINERS)
                return -E2BIG;
        buf_init(&b, TOPO_GPUS_MAX_BYTES);
        r = buf_printf(&b, "{\"version\":%d,\"node\":", TOPO_GPUS_VERSION);
        if (r >= 0)
                r = buf_put_json_string(&b, node);
        if (r >= 0)
                r = buf_puts(&b, ",\"containers\":[");
        for (unsigned i = 0; r >= 0 && i < n; i++)
                r = put_container(&b, &c[i], t, i == 0);
        if (r >= 0)
                r = buf_puts(&b, "]}");
        if (r < 0) {
                buf_release(&b);
                return r;
        }
        *ret_json = buf_steal(&b, NULL);
        return *ret_json ? 0 : -ENOMEM;
}
