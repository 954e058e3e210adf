/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ExtenderArgs, the body of every filter and prioritize, read with common/json.h's scanner
 * instead of a cJSON tree (a 5.4 MB body of 500 Nodes made some 200,000 tree values, of
 * which the extender reads three per Node).  Taken: the Pod's span, decoded by the codec's
 * cJSON decoder (ext_request_decode: a Pod is small); the NodeNames; and
 * of each Node of Nodes.items its metadata.name, its topofit.io/topology annotation (left
 * escaped where it stands: read only for a node outside the cluster view), its GPU
 * allocatable (else capacity) and its byte span, which the filter answer echoes.  The rest
 * is skipped, validated.  Accepted: what the tree decoder accepted (ext__args_decode_tree,
 * kept as the oracle of the tests and of fuzz-ext-codec): the list not used (Nodes beside
 * NodeNames) may hold anything valid, capacity counts only without allocatable, and a
 * syntax error wins over the Pod's errors, which win over the lists'.  Names are not
 * copied: a name that is not escaped points into the body (its length beside it), and only
 * an escaped one is unescaped into the args' own bytes.
 */
#include "ext-core-private.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "json.h"

#define WHY_NODE_NOT_OBJECT "a Node is not an object with metadata"
#define WHY_NOT_NODELIST "Nodes is not a NodeList with an items array"
#define WHY_NODE_NAME "a Node's metadata.name is not a valid string"
#define WHY_NODE_NAMES_ENTRY "a NodeNames entry is not a valid node name"
#define WHY_ALLOCATABLE "a Node's GPU allocatable is not a whole number"
#define WHY_TOO_MANY "the request names more nodes than the limit"

/* name_at[i] with this bit: an offset in the body; without: in strings. */
#define AT_BODY ((size_t)1 << (sizeof(size_t) * CHAR_BIT - 1))

/* One list of the request as it decodes: NodeNames or Nodes.items. */
struct node_list {
        bool present;           /* its key was there, and not null */
        int r;                  /* its first error (0: none), and why */
        const char *why;
        size_t n, alloc;
        size_t *name_at;        /* each name's offset, in the body (AT_BODY) or in strings */
        uint8_t *lens;          /* each name's length */
        bool *plain;            /* each name: ASCII and not escaped, so JSON as it stands */
        struct ext_args_node *nodes; /* Nodes.items only */
        char *strings;          /* the escaped names, unescaped */
        size_t strings_len, strings_alloc;
        const char *text;       /* NodeNames: the array in the body, text_len bytes (NULL: */
        size_t text_len;        /* not read whole) */
        bool memo;              /* NodeNames: the memo's list; its names are the memo's */
};

struct args_scan {
        struct json_scan s;
        const struct ext_config *cfg;
        const char *resources[EXT_MAX_RESOURCES];
        size_t n_resources;
        struct json_span pod;   /* the first Pod's value; .start NULL: none */
        bool repeated;          /* a key of the top-level object came twice */
        const char *not_object; /* the body is valid JSON but not an object: why */
        struct node_list names, items;
        const struct ext_names_memo *memo; /* a NodeNames list seen before, or NULL */
};

static const char *const top_keys[] = { "Pod", "NodeNames", "Nodes" };
static const char *const nodelist_keys[] = { "items" };
static const char *const node_keys[] = { "metadata", "status" };
static const char *const meta_keys[] = { "name", "annotations" };
static const char *const annotation_keys[] = { TOPO_ANNOTATION_KEY };
static const char *const status_keys[] = { "allocatable", "capacity" };

static void
list_release(struct node_list *l)
{
        free(l->name_at);
        free(l->lens);
        free(l->plain);
        free(l->nodes);
        free(l->strings);
}

static void
args_scan_release(struct args_scan *as)
{
        list_release(&as->names);
        list_release(&as->items);
}

/* The list's first error: r, with why. */
static int
list_fail(struct node_list *l, int r, const char *why)
{
        if (l->r == 0) {
                l->r = r;
                l->why = why;
        }
        return r;
}

/* Room for entry l->n, when there is none. */
static int
list_grow_slow(struct node_list *l, bool nodes)
{
        size_t alloc = l->alloc ? 2 * l->alloc : 64;
        void *p;

        if (l->n >= EXT_MAX_NODES)
                return list_fail(l, -E2BIG, WHY_TOO_MANY);
        alloc = MIN(alloc, (size_t)EXT_MAX_NODES);
        p = realloc(l->name_at, alloc * sizeof(*l->name_at));
        if (!p)
                return -ENOMEM;
        l->name_at = p;
        p = realloc(l->lens, alloc * sizeof(*l->lens));
        if (!p)
                return -ENOMEM;
        l->lens = p;
        p = realloc(l->plain, alloc * sizeof(*l->plain));
        if (!p)
                return -ENOMEM;
        l->plain = p;
        if (nodes) {
                p = realloc(l->nodes, alloc * sizeof(*l->nodes));
                if (!p)
                        return -ENOMEM;
                l->nodes = p;
        }
        l->alloc = alloc;
        return 0;
}

static inline int
list_grow(struct node_list *l, bool nodes)
{
        return l->n < l->alloc ? 0 : list_grow_slow(l, nodes);
}

/* Room at once for the entries of an array within the rest bytes of the body: a name
 * takes at least 4 bytes ("a",) there, so rest / 4 of them at most; rest / 12 entries to
 * begin with (node names run 10-40 bytes), then doubling.  Growing by doubling from small
 * copied them 13 times for 5,000 names. */
static int
list_presize(struct node_list *l, size_t rest)
{
        size_t entries = MIN(MAX(rest / 12, (size_t)64), (size_t)EXT_MAX_NODES);

        if (l->name_at)
                return 0;
        l->name_at = malloc(entries * sizeof(*l->name_at));
        l->lens = malloc(entries * sizeof(*l->lens));
        l->plain = malloc(entries * sizeof(*l->plain));
        if (!l->name_at || !l->lens || !l->plain)
                return -ENOMEM;
        l->alloc = entries;
        return 0;
}

/* true when the n bytes at s are ASCII.  With the scanner's rules (a string holds no raw
 * control byte, and one that is not escaped holds no quote or backslash) such a name is
 * JSON as it stands, and an answer copies it without checking it again. */
static bool
ascii(const char *s, size_t n)
{
        uint64_t any = 0, w;
        size_t i = 0;

        if (n < 8) {
                for (; i < n; i++)
                        any |= (unsigned char)s[i];
                return (any & 0x80) == 0;
        }
        for (; i + 8 <= n; i += 8) {
                memcpy(&w, s + i, 8);
                any |= w;
        }
        memcpy(&w, s + n - 8, 8); /* the tail, overlapping the last word read */
        return ((any | w) & 0x8080808080808080ull) == 0;
}

/* The name of entry l->n: a non-empty string shorter than EXT_NAME_MAX.  One not escaped
 * (nearly all) is where it stands in the body; an escaped one is unescaped into
 * l->strings, which grows by doubling.  Copying every name, with its NUL, was a third of
 * decoding 5,000 names. */
static int
list_put_name(struct node_list *l, const char *body, const struct json_str *str,
              const char *why)
{
        size_t n;

        if (str->len == 0 || (!str->escaped && str->len >= EXT_NAME_MAX))
                return list_fail(l, -EINVAL, why);
        if (!str->escaped) {
                l->name_at[l->n] = AT_BODY | (size_t)(str->raw - body);
                l->lens[l->n] = (uint8_t)str->len;
                l->plain[l->n] = ascii(str->raw, str->len);
                return 0;
        }
        if (l->strings_alloc - l->strings_len < EXT_NAME_MAX) {
                size_t alloc = MAX(2 * l->strings_alloc, (size_t)16 * EXT_NAME_MAX);
                char *p = realloc(l->strings, alloc);

                if (!p)
                        return -ENOMEM;
                l->strings = p;
                l->strings_alloc = alloc;
        }
        if (json_str_decode(str, l->strings + l->strings_len, EXT_NAME_MAX, &n) < 0 || n == 0)
                return list_fail(l, -EINVAL, why);
        l->name_at[l->n] = l->strings_len;
        l->lens[l->n] = (uint8_t)n;
        l->plain[l->n] = false;
        l->strings_len += n;
        return 0;
}

/* A string value into *ret, or the list's error why when the value is not a string. */
static int
read_string(struct json_scan *s, struct node_list *l, struct json_str *ret, const char *why)
{
        int k = json_scan_peek(s);

        if (k < 0)
                return k;
        if (k != JSON_KIND_STRING)
                return list_fail(l, -EINVAL, why);
        return json_scan_string(s, ret);
}

/* The next NodeNames entries as kube-scheduler writes them (Go's encoding/json: no blanks),
 * one step each: a comma, a quote, 1 to EXT_NAME_MAX - 1 bytes none of which is a quote, a
 * backslash or a control byte, and the closing quote, all more than 16 bytes before the
 * body's end.  That is exactly what json_scan_next_string() reads there (its call, checks,
 * and list_put_name's were two thirds of decoding 5,000 names), and the scanner is left as
 * it leaves it: after the closing quote, a value just ended.  Anything else (the first
 * entry, a blank, an escape, a control byte, the closing bracket, a name empty or too long,
 * the body's last bytes, a full list) stops it where that entry starts, for the scanner. */
static void
names_fast(struct json_scan *s, struct node_list *l)
{
#if defined(__SSE2__)
        const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
        const __m128i top3 = _mm_set1_epi8((char)0xe0), zero = _mm_setzero_si128();
        const char *p = s->p, *end = s->end;

        if (!s->comma || s->error)
                return;
        while (l->n < l->alloc && end - p > 2 && p[0] == ',' && p[1] == '"') {
                const char *name = p + 2, *q = name;
                unsigned high = 0, stops = 0;

                /* 16 bytes at a time up to the first stop byte; each block read lies before
                 * the end, and a name needs at most EXT_NAME_MAX / 16 + 1 of them. */
                while (end - q >= 16 && q - name < EXT_NAME_MAX) {
                        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)q);
                        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote),
                                                              _mm_cmpeq_epi8(v, bslash)),
                                                 _mm_cmpeq_epi8(_mm_and_si128(v, top3), zero));

                        stops = (unsigned)_mm_movemask_epi8(m);
                        if (stops) {
                                unsigned at = (unsigned)__builtin_ctz(stops);

                                high |= (unsigned)_mm_movemask_epi8(v) & ((1u << at) - 1);
                                q += at;
                                break;
                        }
                        high |= (unsigned)_mm_movemask_epi8(v);
                        q += 16;
                }
                if (!stops || *q != '"' || q == name || q - name >= EXT_NAME_MAX)
                        break;
                l->name_at[l->n] = AT_BODY | (size_t)(name - s->text);
                l->lens[l->n] = (uint8_t)(q - name);
                l->plain[l->n] = high == 0;
                l->n++;
                p = q + 1;
        }
        s->p = p;
#else
        (void)s;
        (void)l;
#endif
}

/* NodeNames: an array of names. */
static int
names_decode(struct args_scan *as, struct node_list *l, int kind)
{
        int r;

        if (kind != JSON_KIND_ARRAY)
                return list_fail(l, -EINVAL, "NodeNames is not an array");
        r = list_presize(l, (size_t)(as->s.end - as->s.p));
        if (r < 0)
                return r;
        r = json_scan_enter(&as->s);
        while (r >= 0) {
                struct json_str str;

                names_fast(&as->s, l);
                r = json_scan_next_string(&as->s, &str);
                if (r == -EMEDIUMTYPE)
                        return list_fail(l, -EINVAL, WHY_NODE_NAMES_ENTRY);
                if (r <= 0)
                        break;
                r = list_grow(l, false);
                if (r >= 0)
                        r = list_put_name(l, as->s.text, &str, WHY_NODE_NAMES_ENTRY);
                if (r >= 0)
                        l->n++;
        }
        return r;
}

/* A quantity of one GPU resource: a string by Kubernetes' quantity grammar, or a number. */
static int
quantity(struct json_scan *s, unsigned *ret)
{
        char text[JSON_MAX_NUMBER_LEN + 1];
        struct json_span num;
        struct json_str str;
        size_t n;
        int k = json_scan_peek(s), r;

        if (k == JSON_KIND_STRING) {
                r = json_scan_string(s, &str);
                if (r < 0)
                        return r;
                if (json_str_decode(&str, text, EXT_MAX_QUANTITY_LEN + 1, &n) < 0)
                        return -EINVAL;
                return ext__quantity_text(text, n, ret);
        }
        if (k != JSON_KIND_NUMBER)
                return k < 0 ? k : -EINVAL;
        r = json_scan_skip(s, &num);
        if (r < 0)
                return r;
        memcpy(text, num.start, num.len); /* at most JSON_MAX_NUMBER_LEN */
        text[num.len] = 0;
        return ext__quantity_number(strtod(text, NULL), ret);
}

/* The GPUs of a resource list (allocatable or capacity) at span: the configured resource
 * names summed.  A list that is null or absent (no span) has none. */
static int
resources_sum(struct args_scan *as, const struct json_span *span, int kind, unsigned *ret)
{
        struct json_scan s;
        uint32_t seen = 0;
        unsigned sum = 0;
        int r;

        *ret = 0;
        if (!span->start || kind == JSON_KIND_NULL)
                return 0;
        if (kind != JSON_KIND_OBJECT)
                return -EINVAL;
        json_scan_init(&s, span->start, span->len, JSON_SCAN_MAX_DEPTH);
        r = json_scan_enter(&s);
        while (r >= 0 && (r = json_scan_wanted(&s, as->resources, as->n_resources, &seen)) > 0) {
                unsigned v;

                r = quantity(&s, &v);
                if (r >= 0)
                        sum += v;
        }
        if (r < 0)
                return r;
        *ret = sum;
        return 0;
}

/* status: allocatable's GPUs, else (when it is null or absent) capacity's.  A status that
 * is not an object counts as none, as the tree decoder's lookups in it found nothing. */
static int
status_decode(struct args_scan *as, struct node_list *l, struct ext_args_node *e)
{
        struct json_span alloc = { 0 }, cap = { 0 };
        int k = json_scan_peek(&as->s), k_alloc = 0, k_cap = 0, r;
        unsigned n_cap = 0;
        uint32_t seen = 0;

        if (k != JSON_KIND_OBJECT)
                return k < 0 ? k : json_scan_skip(&as->s, NULL);
        r = json_scan_enter(&as->s);
        while (r >= 0 && (r = json_scan_wanted(&as->s, status_keys, 2, &seen)) > 0) {
                if (r == 1) {
                        r = k_alloc = json_scan_skip(&as->s, &alloc);
                        continue;
                }
                /* capacity: a repeat matters only when it is read (no allocatable). */
                seen &= ~2u;
                r = k_cap = json_scan_skip(&as->s, n_cap++ ? NULL : &cap);
        }
        if (r == -ENOTUNIQ)
                return list_fail(l, -EINVAL, EXT_WHY_REPEATED);
        if (r < 0)
                return r;
        if (alloc.start && k_alloc != JSON_KIND_NULL)
                r = resources_sum(as, &alloc, k_alloc, &e->gpu_capacity);
        else if (n_cap > 1)
                return list_fail(l, -EINVAL, EXT_WHY_REPEATED);
        else
                r = resources_sum(as, &cap, k_cap, &e->gpu_capacity);
        if (r == -ENOTUNIQ)
                return list_fail(l, -EINVAL, EXT_WHY_REPEATED);
        return r < 0 ? list_fail(l, r, WHY_ALLOCATABLE) : 0;
}

/* metadata.annotations: the topology annotation, left escaped where it stands. */
static int
annotations_decode(struct args_scan *as, struct node_list *l, struct ext_args_node *e)
{
        int k = json_scan_peek(&as->s), r;
        uint32_t seen = 0;

        if (k == JSON_KIND_NULL || k < 0)
                return k < 0 ? k : json_scan_skip(&as->s, NULL);
        if (k != JSON_KIND_OBJECT)
                return list_fail(l, -EINVAL, "a Node's metadata.annotations is not an object");
        r = json_scan_enter(&as->s);
        while (r >= 0 && (r = json_scan_wanted(&as->s, annotation_keys, 1, &seen)) > 0) {
                struct json_str str;

                r = read_string(&as->s, l, &str, "a Node's topofit.io/topology annotation is "
                                                 "not a string");
                if (r >= 0) {
                        e->topo = str.raw;
                        e->topo_len = str.len;
                }
        }
        return r == -ENOTUNIQ ? list_fail(l, -EINVAL, EXT_WHY_REPEATED) : r;
}

static int
meta_decode(struct args_scan *as, struct node_list *l, struct ext_args_node *e)
{
        int k = json_scan_peek(&as->s), r;
        uint32_t seen = 0;

        if (k != JSON_KIND_OBJECT)
                return k < 0 ? k : list_fail(l, -EINVAL, WHY_NODE_NOT_OBJECT);
        r = json_scan_enter(&as->s);
        while (r >= 0 && (r = json_scan_wanted(&as->s, meta_keys, 2, &seen)) > 0) {
                struct json_str str;

                if (r == 2) {
                        r = annotations_decode(as, l, e);
                        continue;
                }
                r = read_string(&as->s, l, &str, WHY_NODE_NAME);
                if (r >= 0)
                        r = list_put_name(l, as->s.text, &str, WHY_NODE_NAME);
        }
        if (r == -ENOTUNIQ)
                return list_fail(l, -EINVAL, EXT_WHY_REPEATED);
        if (r >= 0 && !(seen & 1))
                return list_fail(l, -EINVAL, WHY_NODE_NAME);
        return r;
}

/* One Node of Nodes.items: entry l->n. */
static int
node_decode(struct args_scan *as, struct node_list *l)
{
        int k = json_scan_peek(&as->s), r;
        struct ext_args_node *e;
        const char *start;
        uint32_t seen = 0;

        if (k != JSON_KIND_OBJECT)
                return k < 0 ? k : list_fail(l, -EINVAL, WHY_NODE_NOT_OBJECT);
        r = list_grow(l, true);
        if (r < 0)
                return r;
        e = &l->nodes[l->n];
        *e = (struct ext_args_node){ 0 };
        start = as->s.p;
        r = json_scan_enter(&as->s);
        while (r >= 0 && (r = json_scan_wanted(&as->s, node_keys, 2, &seen)) > 0)
                r = r == 1 ? meta_decode(as, l, e) : status_decode(as, l, e);
        if (r == -ENOTUNIQ)
                return list_fail(l, -EINVAL, EXT_WHY_REPEATED);
        if (r < 0)
                return r;
        if (!(seen & 1))
                return list_fail(l, -EINVAL, WHY_NODE_NOT_OBJECT);
        e->span = start;
        e->span_len = (size_t)(as->s.p - start);
        l->n++;
        return 0;
}

/* Nodes: a NodeList whose items are Node objects. */
static int
nodes_decode(struct args_scan *as, struct node_list *l, int kind)
{
        uint32_t seen = 0;
        int r;

        if (kind != JSON_KIND_OBJECT)
                return list_fail(l, -EINVAL, WHY_NOT_NODELIST);
        r = json_scan_enter(&as->s);
        while (r >= 0 && (r = json_scan_wanted(&as->s, nodelist_keys, 1, &seen)) > 0) {
                int k = json_scan_peek(&as->s);

                if (k != JSON_KIND_ARRAY)
                        return k < 0 ? k : list_fail(l, -EINVAL, WHY_NOT_NODELIST);
                r = json_scan_enter(&as->s);
                while (r >= 0 && (r = json_scan_next(&as->s)) > 0)
                        r = node_decode(as, l);
        }
        if (r == -ENOTUNIQ)
                return list_fail(l, -EINVAL, EXT_WHY_REPEATED);
        if (r >= 0 && !(seen & 1))
                return list_fail(l, -EINVAL, WHY_NOT_NODELIST);
        return r;
}

/* The value of NodeNames (names) or Nodes.  Its errors are the list's: decoding goes on
 * past them (validating the rest), since the list may not be the one used. */
static int
list_decode(struct args_scan *as, struct node_list *l, bool names)
{
        struct json_scan mark = as->s;
        int k = json_scan_peek(&as->s), r;
        const char *start = as->s.p; /* the value's first byte, after blanks */

        if (k == JSON_KIND_NULL || k < 0)
                return k < 0 ? k : json_scan_skip(&as->s, NULL);
        l->present = true;
        if (names && k == JSON_KIND_ARRAY && as->memo &&
            json_scan_skip_known(&as->s, as->memo->text, as->memo->len)) {
                l->text = start;
                l->text_len = as->memo->len;
                l->n = as->memo->n;
                l->memo = true;
                return 0;
        }
        r = names ? names_decode(as, l, k) : nodes_decode(as, l, k);
        if (names && r >= 0 && l->r == 0) {
                l->text = start;
                l->text_len = (size_t)(as->s.p - start);
        }
        if (r >= 0 || r == -ENOMEM || as->s.error)
                return r;
        list_fail(l, r, names ? WHY_NODE_NAMES_ENTRY : WHY_NOT_NODELIST); /* when unsaid */
        as->s = mark;
        return json_scan_skip(&as->s, NULL);
}

/* The top-level object: the Pod's span, the lists decoded. */
static int
top_decode(struct args_scan *as)
{
        int k = json_scan_peek(&as->s), r;
        uint32_t seen = 0;

        if (k < 0)
                return k;
        if (k != JSON_KIND_OBJECT) {
                as->not_object = "ExtenderArgs is not a JSON object";
                return json_scan_skip(&as->s, NULL);
        }
        r = json_scan_enter(&as->s);
        while (r >= 0 && (r = json_scan_wanted(&as->s, top_keys, ELEMENTSOF(top_keys),
                                               &seen)) != 0) {
                if (r == -ENOTUNIQ) {
                        /* The first copy counts, as with the tree's lookups; refused at
                         * the end unless something else is wrong first. */
                        as->repeated = true;
                        r = json_scan_skip(&as->s, NULL);
                } else if (r == 1)
                        r = json_scan_skip(&as->s, &as->pod);
                else if (r > 1)
                        r = list_decode(as, r == 2 ? &as->names : &as->items, r == 2);
        }
        return r;
}

/* A list that repeated the memo's into a: its names at the memo's offsets in this body's
 * copy of the text, the lengths and plainness copied. */
static int
args_take_memo(const struct node_list *l, const struct ext_names_memo *m, struct ext_args *a)
{
        size_t n = MAX(l->n, (size_t)1);

        a->names = malloc(n * sizeof(*a->names));
        a->name_lens = malloc(n);
        a->name_plain = malloc(n * sizeof(*a->name_plain));
        if (!a->names || !a->name_lens || !a->name_plain)
                return -ENOMEM;
        for (size_t i = 0; i < l->n; i++)
                a->names[i] = l->text + m->off[i];
        memcpy(a->name_lens, m->lens, l->n);
        memcpy(a->name_plain, m->plain, l->n * sizeof(*a->name_plain));
        a->n = l->n;
        a->node_names = true;
        a->names_in_body = true;
        a->list_text = l->text;
        a->list_len = l->text_len;
        a->list_memo = true;
        return 0;
}

/* The list the answer uses into a, which takes its arrays and names. */
static int
args_take(struct node_list *l, const char *body, bool names, struct ext_args *a)
{
        a->names = malloc(MAX(l->n, (size_t)1) * sizeof(*a->names));
        if (!a->names)
                return -ENOMEM;
        a->list_text = names ? l->text : NULL;
        a->list_len = names ? l->text_len : 0;
        if (!l->lens && !(l->lens = malloc(1))) /* an empty list */
                return -ENOMEM;
        a->name_lens = l->lens;
        l->lens = NULL;
        a->strings = l->strings;
        l->strings = NULL;
        a->name_plain = l->plain;
        l->plain = NULL;
        for (size_t i = 0; i < l->n; i++) {
                size_t at = l->name_at[i];

                a->names[i] = at & AT_BODY ? body + (at & ~AT_BODY) : a->strings + at;
        }
        a->n = l->n;
        a->node_names = names;
        a->names_in_body = names;
        if (!names) {
                a->nodes = l->nodes;
                l->nodes = NULL;
        }
        return 0;
}

/* After the scan: the Pod, then the list, then a repeated key, in the tree decoder's order. */
static int
args_finish(struct args_scan *as, struct ext_args *a, const char **ret_why)
{
        struct node_list *l = as->names.present ? &as->names : &as->items;
        int r;

        if (as->not_object)
                return set_why(ret_why, as->not_object), -EINVAL;
        if (!as->pod.start)
                return set_why(ret_why, "Pod is missing or not an object"), -EINVAL;
        r = ext_request_decode(as->pod.start, as->pod.len, as->cfg, &a->req, ret_why);
        if (r < 0)
                return r;
        if (!l->present)
                return set_why(ret_why, "ExtenderArgs has neither NodeNames nor Nodes"), -EINVAL;
        if (l->r < 0)
                return set_why(ret_why, l->why), l->r;
        if (as->repeated)
                return set_why(ret_why, EXT_WHY_REPEATED), -EINVAL;
        if (l->memo)
                return args_take_memo(l, as->memo, a);
        return args_take(l, as->s.text, l == &as->names, a);
}

int
ext_args_decode(const char *json, size_t len, const struct ext_config *cfg, struct ext_args *ret,
                const char **ret_why)
{
        return ext_args_decode_memo(json, len, cfg, NULL, ret, ret_why);
}

int
ext_args_decode_memo(const char *json, size_t len, const struct ext_config *cfg,
                     const struct ext_names_memo *m, struct ext_args *ret, const char **ret_why)
{
        CLEANUP(args_scan_release) struct args_scan as = { .cfg = cfg,
                                                           .memo = m && m->len ? m : NULL };
        struct ext_args a = { 0 };
        int r;

        if (len > EXT_MAX_BODY)
                return set_why(ret_why, "the request body is larger than the limit"), -EMSGSIZE;
        as.n_resources = MIN((size_t)cfg->n_resources, (size_t)EXT_MAX_RESOURCES);
        for (size_t i = 0; i < as.n_resources; i++)
                as.resources[i] = cfg->resources[i];
        json_scan_init(&as.s, json, len, EXT_MAX_JSON_DEPTH);
        r = top_decode(&as);
        if (r >= 0)
                r = json_scan_finish(&as.s);
        if (as.s.error)
                return ext__json_why(as.s.error, ret_why);
        if (r >= 0)
                r = args_finish(&as, &a, ret_why);
        if (r < 0) {
                ext_args_release(&a);
                return r;
        }
        *ret = a;
        return 0;
}

void
ext_args_release(struct ext_args *a)
{
        if (!a)
                return;
        free(a->names);
        free(a->name_lens);
        free(a->name_plain);
        free(a->nodes);
        free(a->strings);
        *a = (struct ext_args){ 0 };
}

void
ext_names_memo_release(struct ext_names_memo *m)
{
        if (!m)
                return;
        free(m->text);
        free(m->off);
        free(m->lens);
        free(m->plain);
        free(m->nodes);
        *m = (struct ext_names_memo){ 0 };
}

/* Room for n names and len bytes of text: 0, or -ENOMEM with m emptied. */
static int
memo_room(struct ext_names_memo *m, size_t n, size_t len)
{
        if (len > m->text_alloc) {
                free(m->text);
                m->text = malloc(len);
                m->text_alloc = m->text ? len : 0;
        }
        if (n > m->alloc) {
                free(m->off);
                free(m->lens);
                free(m->plain);
                free(m->nodes);
                m->off = malloc(n * sizeof(*m->off));
                m->lens = malloc(n);
                m->plain = malloc(n * sizeof(*m->plain));
                m->nodes = malloc(n * sizeof(*m->nodes));
                m->alloc = n;
        }
        if (!m->text || !m->off || !m->lens || !m->plain || !m->nodes) {
                ext_names_memo_release(m);
                return -ENOMEM;
        }
        return 0;
}

int
ext_names_memo_keep(struct ext_names_memo *m, const struct ext_args *a,
                    const struct ext_cluster *c, const struct ext_nodes *rn)
{
        int r;

        if (a->list_memo || !a->node_names || !a->list_text || a->n == 0 ||
            a->n > EXT_MAX_NODES || a->list_len > UINT32_MAX || rn->n_extra)
                return 0;
        for (size_t i = 0; i < a->n; i++) /* an escaped name is not in the text */
                if (a->names[i] < a->list_text ||
                    a->names[i] + a->name_lens[i] > a->list_text + a->list_len)
                        return 0;
        /* Emptied first: a failure below leaves no half-kept list behind. */
        m->len = m->n = 0;
        m->serial = 0;
        r = memo_room(m, MAX(a->n, (size_t)1), MAX(a->list_len, (size_t)1));
        if (r < 0)
                return r;
        memcpy(m->text, a->list_text, a->list_len);
        for (size_t i = 0; i < a->n; i++)
                m->off[i] = (uint32_t)(a->names[i] - a->list_text);
        memcpy(m->lens, a->name_lens, a->n);
        if (a->name_plain)
                memcpy(m->plain, a->name_plain, a->n * sizeof(*m->plain));
        else
                for (size_t i = 0; i < a->n; i++)
                        m->plain[i] = false;
        memcpy(m->nodes, rn->nodes, a->n * sizeof(*m->nodes));
        m->serial = c ? c->serial : 0;
        m->n = a->n;
        m->len = a->list_len;
        return 0;
}

int
ext_args_topology(const struct ext_args *a, size_t i, char **ret, size_t *ret_len)
{
        const struct ext_args_node *e = a->nodes && i < a->n ? &a->nodes[i] : NULL;
        struct json_str str;
        CLEANUP(freep) char *text = NULL;
        size_t n;

        if (!e || !e->topo) {
                *ret = NULL;
                *ret_len = 0;
                return 0;
        }
        str = (struct json_str){ .raw = e->topo, .len = e->topo_len, .escaped = true };
        text = malloc(e->topo_len + 1); /* unescaped text is never longer */
        if (!text)
                return -ENOMEM;
        if (json_str_decode(&str, text, e->topo_len + 1, &n) < 0)
                return -EINVAL; /* not from a scan: the args were not decoded here */
        *ret = TAKE_PTR(text);
        *ret_len = n;
        return 0;
}
