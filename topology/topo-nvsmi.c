/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `nvidia-smi topo -m` (and old `topo --matrix`) text of every driver generation -> struct
 * topo.  Pure: bytes in, a topology or a positioned error out.  Lines split on blanks (posts
 * turn tabs into spaces); the header names the columns; each row carries one cell per device.
 * Cells glued by lost tab stops ("NODENODE") are split only when the split into known cells
 * is unique and gives the row its exact width; symmetry and GPU/NIC cross-checks confirm it.
 * A short row, a missing GPU row, an unknown cell, an asymmetric matrix: errors with line and
 * column, never a guess.  NIC rows repeat the GPU rows' NIC columns, so trailing ones may be
 * missing; present ones must agree.  After the matrix only the NIC Legend and `nvlink
 * --status` lines ("GPU 0: <model> (UUID: ...)") are read.
 */
#include <stdlib.h>
#include <string.h>

#include "str.h"
#include "topo-private.h"
#include "topo.h"

#define NVSMI_MAX_TOKENS (TOPO_MAX_GPUS + TOPO_MAX_NICS + 16) /* cells in one line */
#define NVSMI_TAB_WIDTH 8

enum trail_col {
        TRAIL_CPU_AFFINITY,
        TRAIL_NUMA_AFFINITY,
        TRAIL_GPU_NUMA_ID,
        _TRAIL_MAX,
};

static const char *const trail_names[_TRAIL_MAX] = {
        [TRAIL_CPU_AFFINITY] = "CPU Affinity",
        [TRAIL_NUMA_AFFINITY] = "NUMA Affinity",
        [TRAIL_GPU_NUMA_ID] = "GPU NUMA ID",
};

struct tok {
        const char *s;
        size_t len;
        unsigned col;  /* 1-based byte column */
        unsigned dcol; /* 0-based display column, tabs expanded to NVSMI_TAB_WIDTH */
};

struct line {
        const char *s;
        size_t len;
        unsigned no;
};

struct cursor {
        const char *p, *end;
        unsigned no;
};

static bool
next_line(struct cursor *c, struct line *ret)
{
        if (c->p >= c->end)
                return false;
        const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
        size_t len = nl ? (size_t)(nl - c->p) : (size_t)(c->end - c->p);

        ret->s = c->p;
        ret->len = len;
        ret->no = ++c->no;
        if (len > 0 && c->p[len - 1] == '\r')
                ret->len--;
        c->p = nl ? nl + 1 : c->end;
        return true;
}

/* Splits a line on blanks; -E2BIG past max tokens. */
static int
tokenize(const struct line *l, struct tok *toks, size_t max, size_t *ret_n)
{
        size_t n = 0;
        unsigned dcol = 0;

        for (size_t i = 0; i < l->len;) {
                char c = l->s[i];

                if (c == ' ' || c == '\t') {
                        dcol = c == '\t' ? (dcol / NVSMI_TAB_WIDTH + 1) * NVSMI_TAB_WIDTH
                                         : dcol + 1;
                        i++;
                        continue;
                }
                if (n == max)
                        return -E2BIG;
                toks[n] = (struct tok){.s = l->s + i, .col = (unsigned)i + 1, .dcol = dcol};
                while (i < l->len && l->s[i] != ' ' && l->s[i] != '\t')
                        i++, dcol++;
                toks[n].len = (size_t)(l->s + i - toks[n].s);
                n++;
        }
        *ret_n = n;
        return 0;
}

static bool
tok_is(const struct tok *t, const char *lit)
{
        return str_eq_n(t->s, t->len, lit);
}

/* --- cells ------------------------------------------------------------------------------- */

struct cell {
        uint8_t link;  /* enum topo_link */
        uint8_t links; /* NV# */
};

static const struct {
        const char *name;
        enum topo_link link;
} cell_names[] = {
        {"X", TOPO_LINK_SELF},    {"SYS", TOPO_LINK_SYS},     {"SOC", TOPO_LINK_SYS},
        {"NODE", TOPO_LINK_NODE}, {"PHB", TOPO_LINK_PHB},     {"PXB", TOPO_LINK_PXB},
        {"PIX", TOPO_LINK_PIX},   {"N/A", TOPO_LINK_UNKNOWN},
};

/* Length of the known cell at the start of s[0..len), 0 when none; fills *ret. */
static size_t
cell_prefix(const char *s, size_t len, struct cell *ret)
{
        if (len >= 3 && s[0] == 'N' && s[1] == 'V' && s[2] >= '0' && s[2] <= '9') {
                size_t i = 2;
                int v;

                while (i < len && s[i] >= '0' && s[i] <= '9')
                        i++;
                if (str_to_int(s + 2, i - 2, 1, TOPO_MAX_NVLINKS, &v) < 0)
                        return 0;
                *ret = (struct cell){TOPO_LINK_NVLINK, (uint8_t)v};
                return i;
        }
        for (size_t k = 0; k < ELEMENTSOF(cell_names); k++) {
                size_t nl = strlen(cell_names[k].name);
                if (nl <= len && memcmp(s, cell_names[k].name, nl) == 0) {
                        *ret = (struct cell){(uint8_t)cell_names[k].link, 0};
                        return nl;
                }
        }
        return 0;
}

/* Splits a token into known cells.  Returns the number of cells (1 for a plain cell),
 * 0 when it is not made of known cells.  Every known cell starts with a capital letter and
 * none is a concatenation of others, so at most one split exists; it is still checked by
 * trying every cut rather than assumed. */
static unsigned
split_cells(const char *s, size_t len, struct cell *out, unsigned max)
{
        unsigned n = 0;
        size_t i = 0;

        while (i < len) {
                struct cell c;
                size_t l = cell_prefix(s + i, len - i, &c);
                /* NV digits are maximal; for letter cells the table has no prefix pairs
                 * (no cell is a prefix of another), so the first match is the only one. */
                if (l == 0 || n == max)
                        return 0;
                out[n++] = c;
                i += l;
        }
        return n;
}

/* --- header --------------------------------------------------------------------------------- */

struct header {
        unsigned n_gpus, n_nics;
        struct tok dev[TOPO_MAX_GPUS + TOPO_MAX_NICS];
        int trail[_TRAIL_MAX]; /* trailing column order index, -1 when absent */
        unsigned trail_dcol[_TRAIL_MAX];
        enum trail_col trail_order[_TRAIL_MAX];
        unsigned n_trail;
        unsigned line;
};

static bool
is_gpu_label(const struct tok *t, unsigned *ret)
{
        int v;

        if (t->len < 4 || memcmp(t->s, "GPU", 3) != 0)
                return false;
        if (str_to_int(t->s + 3, t->len - 3, 0, INT32_MAX, &v) < 0)
                return false;
        *ret = (unsigned)v;
        return true;
}

/* Matches a multi-word trailing column name at toks[i]; returns the words used, 0 if none. */
static size_t
trail_match(const struct tok *toks, size_t n, size_t i, enum trail_col *ret)
{
        for (int k = 0; k < _TRAIL_MAX; k++) {
                const char *name = trail_names[k];
                size_t used = 0, j = i;

                while (*name) {
                        const char *sp = strchrnul(name, ' ');
                        if (j >= n || toks[j].len != (size_t)(sp - name) ||
                            memcmp(toks[j].s, name, toks[j].len) != 0)
                                break;
                        j++, used++;
                        name = *sp ? sp + 1 : sp;
                }
                if (!*name) {
                        *ret = (enum trail_col)k;
                        return used;
                }
        }
        return 0;
}

static int
parse_header(const struct line *l, struct tok *toks, size_t n, struct header *h,
             struct topo_error *err)
{
        size_t i = 0;

        h->line = l->no;
        for (int k = 0; k < _TRAIL_MAX; k++)
                h->trail[k] = -1;
        for (; i < n; i++) {
                unsigned idx;

                if (!is_gpu_label(&toks[i], &idx))
                        break;
                if (idx != h->n_gpus)
                        return topo__error(err, -EINVAL, l->no, toks[i].col,
                                           "Header column '%.*s' is out of order: expected GPU%u.",
                                           (int)toks[i].len, toks[i].s, h->n_gpus);
                if (h->n_gpus == TOPO_MAX_GPUS)
                        return topo__error(err, -E2BIG, l->no, toks[i].col,
                                           "More than %u GPU columns.", TOPO_MAX_GPUS);
                h->dev[h->n_gpus++] = toks[i];
        }
        for (; i < n; i++) {
                enum trail_col tc;
                size_t used = trail_match(toks, n, i, &tc);

                if (used > 0) {
                        if (h->trail[tc] >= 0)
                                return topo__error(err, -EINVAL, l->no, toks[i].col,
                                                   "Header column '%s' appears twice.",
                                                   trail_names[tc]);
                        h->trail[tc] = (int)h->n_trail;
                        h->trail_dcol[tc] = toks[i].dcol;
                        h->trail_order[h->n_trail++] = tc;
                        i += used - 1;
                        continue;
                }
                if (h->n_trail > 0)
                        return topo__error(
                                err, -EINVAL, l->no, toks[i].col,
                                "Unknown header column '%.*s' after the affinity columns.",
                                (int)toks[i].len, toks[i].s);
                unsigned idx;
                if (is_gpu_label(&toks[i], &idx))
                        return topo__error(err, -EINVAL, l->no, toks[i].col,
                                           "GPU column '%.*s' after the NIC columns.",
                                           (int)toks[i].len, toks[i].s);
                if (h->n_nics == TOPO_MAX_NICS)
                        return topo__error(err, -E2BIG, l->no, toks[i].col,
                                           "More than %u NIC columns.", TOPO_MAX_NICS);
                if (!topo__id_ok(toks[i].s, toks[i].len))
                        return topo__error(err, -EINVAL, l->no, toks[i].col,
                                           "NIC column name is not printable ASCII of at most "
                                           "%u bytes.",
                                           TOPO_ID_MAX - 1);
                for (unsigned k = 0; k < h->n_nics; k++)
                        if (h->dev[h->n_gpus + k].len == toks[i].len &&
                            memcmp(h->dev[h->n_gpus + k].s, toks[i].s, toks[i].len) == 0)
                                return topo__error(err, -EINVAL, l->no, toks[i].col,
                                                   "Header column '%.*s' appears twice.",
                                                   (int)toks[i].len, toks[i].s);
                h->dev[h->n_gpus + h->n_nics++] = toks[i];
        }
        if (h->n_gpus == 0)
                return topo__error(err, -EINVAL, l->no, 1, "The header names no GPU columns.");
        return 0;
}

/* --- rows ---------------------------------------------------------------------------------------
 */

struct row {
        struct cell cells[TOPO_MAX_GPUS + TOPO_MAX_NICS];
        unsigned cell_col[TOPO_MAX_GPUS + TOPO_MAX_NICS];
        size_t first_trail; /* index of the first token after the link cells */
};

/* Reads the link cells of one row (tokens after the label).  A row with too few cells is a
 * cut-off matrix; a token that is not made of known cells is named. */
static int
parse_row_cells(const struct line *l, const struct tok *toks, size_t n, unsigned want, bool gpu_row,
                struct row *row, struct topo_error *err)
{
        unsigned have = 0;
        size_t i = 1;

        for (; i < n && have < want; i++) {
                struct cell tmp[TOPO_MAX_GPUS + TOPO_MAX_NICS];
                unsigned k = split_cells(toks[i].s, toks[i].len, tmp, ELEMENTSOF(tmp));

                if (k == 0) {
                        /* A GPU row's affinity columns start here: the row is short. */
                        if (gpu_row && (toks[i].s[0] < 'A' || toks[i].s[0] > 'Z'))
                                break;
                        if (toks[i].len > 2 && memcmp(toks[i].s, "NV", 2) == 0 &&
                            toks[i].s[2] >= '0' && toks[i].s[2] <= '9')
                                return topo__error(err, -EINVAL, l->no, toks[i].col,
                                                   "Cell '%.*s' in row %.*s: NVLink counts are "
                                                   "1 to %u.",
                                                   (int)MIN(toks[i].len, 16u), toks[i].s,
                                                   (int)toks[0].len, toks[0].s, TOPO_MAX_NVLINKS);
                        return topo__error(err, -EINVAL, l->no, toks[i].col,
                                           "Unknown cell '%.*s' in row %.*s.",
                                           (int)MIN(toks[i].len, 16u), toks[i].s, (int)toks[0].len,
                                           toks[0].s);
                }
                if (have + k > want)
                        return topo__error(err, -EINVAL, l->no, toks[i].col,
                                           "Cell '%.*s' runs past the last device column of "
                                           "row %.*s: the post's columns are damaged.",
                                           (int)toks[i].len, toks[i].s, (int)toks[0].len,
                                           toks[0].s);
                for (unsigned j = 0; j < k; j++) {
                        row->cells[have] = tmp[j];
                        row->cell_col[have++] = toks[i].col;
                }
        }
        if (have < want) {
                unsigned col = (unsigned)(i < n ? toks[i].col : l->len + 1);
                return topo__error(err, -EINVAL, l->no, col,
                                   "Matrix cut off at line %u: row %.*s has %u of %u cells.", l->no,
                                   (int)toks[0].len, toks[0].s, have, want);
        }
        row->first_trail = i;
        return 0;
}

static int
parse_numa(const struct tok *t, bool single, int *ret)
{
        int v;

        if (tok_is(t, "N/A")) {
                *ret = -1;
                return 0;
        }
        if (str_to_int(t->s, t->len, 0, TOPO_MAX_NUMA_ID, &v) == 0) {
                *ret = v;
                return 0;
        }
        /* Several NUMA nodes ("0-1", "0,8,252-255"): no single home node. */
        if (!single && topo__cpuset_check(t->s, t->len) == 0) {
                *ret = -1;
                return 0;
        }
        return -EINVAL;
}

/* Assigns the trailing values of GPU row g to the header's trailing columns.  nvidia-smi
 * writes each value followed by a tab (and pads short values under wide headers with one
 * more), so header and values do not line up by position.  The one empty cell that occurs
 * in real output is a leading CPU Affinity left empty by a restricted cpuset (Slurm,
 * containers): the first value then starts at least one tab stop after the column where
 * the affinity would begin.  Any other shortfall is a row that ends early. */
static int
parse_trailing(const struct line *l, const struct tok *toks, size_t n, size_t first,
               const struct header *h, struct topo_gpu *g, struct topo_error *err)
{
        size_t count = n - first, skip = 0;
        enum trail_col assign[_TRAIL_MAX];

        if (count > h->n_trail)
                return topo__error(err, -EINVAL, l->no, toks[first + h->n_trail].col,
                                   "Row %.*s has more cells than the header has columns.",
                                   (int)toks[0].len, toks[0].s);
        if (count > 0 && count < h->n_trail && h->trail_order[0] == TRAIL_CPU_AFFINITY) {
                const struct tok *last = &toks[first - 1];
                unsigned c0 = (unsigned)((last->dcol + last->len) / NVSMI_TAB_WIDTH + 1) *
                              NVSMI_TAB_WIDTH;
                if (toks[first].dcol > c0)
                        skip = 1;
        }
        if (count > 0 && count + skip < h->n_trail)
                return topo__error(err, -EINVAL, l->no, toks[n - 1].col,
                                   "Matrix cut off at line %u: row %.*s ends before its %s "
                                   "column.",
                                   l->no, (int)toks[0].len, toks[0].s,
                                   trail_names[h->trail_order[count + skip]]);
        for (size_t i = 0; i < count; i++)
                assign[i] = h->trail_order[i + skip];
        for (size_t i = 0; i < count; i++) {
                const struct tok *t = &toks[first + i];
                int numa;

                switch (assign[i]) {
                case TRAIL_CPU_AFFINITY:
                        if (tok_is(t, "N/A"))
                                break;
                        if (topo__cpuset_check(t->s, t->len) < 0)
                                return topo__error(err, -EINVAL, l->no, t->col,
                                                   "CPU affinity '%.*s' is not a CPU list.",
                                                   (int)t->len, t->s);
                        if (str_copy(g->cpu_affinity, sizeof(g->cpu_affinity), t->s, t->len) < 0)
                                return topo__error(err, -E2BIG, l->no, t->col,
                                                   "CPU affinity list longer than %u bytes.",
                                                   TOPO_ID_MAX - 1);
                        break;
                case TRAIL_NUMA_AFFINITY:
                        if (parse_numa(t, false, &numa) < 0)
                                return topo__error(err, -EINVAL, l->no, t->col,
                                                   "NUMA affinity '%.*s' is not a NUMA node.",
                                                   (int)t->len, t->s);
                        g->numa = numa;
                        break;
                case TRAIL_GPU_NUMA_ID:
                        /* The GPU memory's own NUMA node (Grace Hopper); validated only. */
                        if (parse_numa(t, true, &numa) < 0)
                                return topo__error(err, -EINVAL, l->no, t->col,
                                                   "GPU NUMA ID '%.*s' is not a NUMA node.",
                                                   (int)t->len, t->s);
                        break;
                default:
                        break;
                }
        }
        return 0;
}

/* --- after the matrix: NIC legend and nvlink --status --------------------------------------------
 */

static int
parse_legend_line(const struct line *l, const struct tok *toks, size_t n, const struct header *h,
                  struct topo *t, struct topo_error *err)
{
        /* "  NIC3: mlx5_3" */
        if (n != 2 || toks[0].len < 5 || memcmp(toks[0].s, "NIC", 3) != 0 ||
            toks[0].s[toks[0].len - 1] != ':')
                return 0;
        for (unsigned k = 0; k < h->n_nics; k++) {
                const struct tok *c = &h->dev[h->n_gpus + k];
                if (c->len == toks[0].len - 1 && memcmp(c->s, toks[0].s, c->len) == 0) {
                        if (!topo__id_ok(toks[1].s, toks[1].len))
                                return topo__error(err, -EINVAL, l->no, toks[1].col,
                                                   "NIC name is not printable ASCII of at most "
                                                   "%u bytes.",
                                                   TOPO_ID_MAX - 1);
                        (void)str_copy(t->nics[k].name, TOPO_ID_MAX, toks[1].s, toks[1].len);
                        return 0;
                }
        }
        return topo__error(err, -EINVAL, l->no, toks[0].col,
                           "The NIC Legend names %.*s, which is not a column of the matrix.",
                           (int)toks[0].len - 1, toks[0].s);
}

/* "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-2b5f...)" from `nvidia-smi nvlink --status`. */
static void
parse_nvlink_status_line(const struct line *l, struct topo *t)
{
        const char *s = l->s, *end = l->s + l->len, *colon;
        int idx;

        if (l->len < 7 || memcmp(s, "GPU ", 4) != 0)
                return;
        colon = memchr(s, ':', l->len);
        if (!colon || str_to_int(s + 4, (size_t)(colon - s - 4), 0, TOPO_MAX_GPUS - 1, &idx) < 0 ||
            (unsigned)idx >= t->n_gpus)
                return;
        const char *m = colon + 1, *uuid = NULL, *uuid_end = NULL;
        const char *paren = memmem(m, (size_t)(end - m), " (UUID: ", 8);
        const char *model_end = paren ? paren : end;
        if (paren && end[-1] == ')') {
                uuid = paren + 8;
                uuid_end = end - 1;
        }
        size_t ml = (size_t)(model_end - m);
        str_trim(&m, &ml);
        /* Informational lines: what does not fit an identity field is left out. */
        if (ml > 0 && topo__id_ok(m, ml))
                (void)str_copy(t->gpus[idx].model, TOPO_ID_MAX, m, ml);
        if (uuid && uuid_end > uuid && topo__id_ok(uuid, (size_t)(uuid_end - uuid)))
                (void)str_copy(t->gpus[idx].uuid, TOPO_ID_MAX, uuid, (size_t)(uuid_end - uuid));
}

/* --- the parser ------------------------------------------------------------------------------- */

static bool
is_header(const struct tok *toks, size_t n)
{
        unsigned idx;
        return n >= 1 && is_gpu_label(&toks[0], &idx) && idx == 0 &&
               (n == 1 || !tok_is(&toks[1], "X"));
}

static bool
row_label_is(const struct tok *t, const struct tok *want)
{
        return t->len == want->len && memcmp(t->s, want->s, t->len) == 0;
}

int
topo_parse_nvsmi(const char *text, size_t len, struct topo **ret, struct topo_error *err)
{
        CLEANUP(topo_unrefp) struct topo *t = NULL;
        CLEANUP(freep) struct tok *toks = NULL;
        CLEANUP(freep) struct header *h = NULL;
        CLEANUP(freep) struct row *row = NULL;
        CLEANUP(freep) uint8_t *nic_nic = NULL; /* NIC row k, NIC column c; 0xff: no row */
        struct cursor cur = {.p = text, .end = text + len};
        struct line l;
        size_t n;
        bool found = false;
        int r;

        if (!text && len > 0)
                return -EINVAL;
        if (len > TOPO_MAX_TEXT_BYTES)
                return topo__error(err, -E2BIG, 0, 0, "Input larger than %u bytes.",
                                   TOPO_MAX_TEXT_BYTES);
        const char *nul = len ? memchr(text, '\0', len) : NULL;
        if (nul) {
                struct cursor c2 = {.p = text, .end = nul};
                while (next_line(&c2, &l))
                        ;
                return topo__error(err, -EINVAL, c2.no ? c2.no : 1,
                                   (unsigned)(nul - (c2.no ? l.s : text)) + 1,
                                   "NUL byte in the text: this is not nvidia-smi output.");
        }
        toks = calloc(NVSMI_MAX_TOKENS, sizeof(*toks));
        h = calloc(1, sizeof(*h));
        row = calloc(1, sizeof(*row));
        if (!toks || !h || !row)
                return -ENOMEM;

        /* The header: the first line starting with GPU0 that is not a row. */
        while (next_line(&cur, &l)) {
                if (l.len > 0 && l.s[0] == '#')
                        continue;
                r = tokenize(&l, toks, NVSMI_MAX_TOKENS, &n);
                if (r < 0)
                        return topo__error(err, -E2BIG, l.no, 1, "More than %u cells in one line.",
                                           NVSMI_MAX_TOKENS);
                if (n >= 2 && tok_is(&toks[0], "GPU0") && tok_is(&toks[1], "X"))
                        return topo__error(err, -EINVAL, l.no, 1,
                                           "Row GPU0 without a header line before it.");
                if (is_header(toks, n)) {
                        r = parse_header(&l, toks, n, h, err);
                        if (r < 0)
                                return r;
                        found = true;
                        break;
                }
        }
        if (!found)
                return topo__error(err, -EINVAL, cur.no, 1,
                                   "No matrix header (a line starting with GPU0) found.");

        t = topo_new(h->n_gpus, h->n_nics);
        nic_nic = malloc(MAX((size_t)h->n_nics * h->n_nics, 1u));
        if (!t || !nic_nic)
                return -ENOMEM;
        memset(nic_nic, 0xff, (size_t)h->n_nics * h->n_nics);
        t->vendor = TOPO_VENDOR_NVIDIA;
        for (unsigned k = 0; k < h->n_nics; k++)
                (void)str_copy(t->nics[k].name, TOPO_ID_MAX, h->dev[h->n_gpus + k].s,
                               h->dev[h->n_gpus + k].len);

        unsigned n_dev = h->n_gpus + h->n_nics;
        unsigned row_line[TOPO_MAX_GPUS] = {0}, nic_line[TOPO_MAX_NICS] = {0};
        bool have_next = false;
        for (unsigned rw = 0; rw < n_dev; rw++) {
                bool gpu_row = rw < h->n_gpus;
                const struct tok *want = &h->dev[rw];

                if (!next_line(&cur, &l)) {
                        if (!gpu_row)
                                break; /* NIC rows missing at the end: see the top comment */
                        return topo__error(err, -EINVAL, cur.no + 1, 1,
                                           "Matrix cut off at line %u: the text ends before row "
                                           "%.*s.",
                                           cur.no + 1, (int)want->len, want->s);
                }
                r = tokenize(&l, toks, NVSMI_MAX_TOKENS, &n);
                if (r < 0)
                        return topo__error(err, -E2BIG, l.no, 1, "More than %u cells in one line.",
                                           NVSMI_MAX_TOKENS);
                if (n == 0 || !row_label_is(&toks[0], want)) {
                        bool end_of_matrix = n == 0 || l.s[0] == '#' || tok_is(&toks[0], "Legend:");
                        if (!gpu_row && end_of_matrix) {
                                have_next = true;
                                break;
                        }
                        return topo__error(err, -EINVAL, l.no, n ? toks[0].col : 1,
                                           "Matrix cut off at line %u: expected row %.*s.", l.no,
                                           (int)want->len, want->s);
                }
                r = parse_row_cells(&l, toks, n, n_dev, gpu_row, row, err);
                if (r < 0)
                        return r;
                for (unsigned c = 0; c < n_dev; c++) {
                        const struct cell *cl = &row->cells[c];
                        bool self = c == rw;

                        if (self != (cl->link == TOPO_LINK_SELF))
                                return topo__error(err, -EINVAL, l.no, row->cell_col[c],
                                                   self ? "Row %.*s: expected X on the diagonal."
                                                        : "Row %.*s: X off the diagonal.",
                                                   (int)want->len, want->s);
                        if (cl->link == TOPO_LINK_NVLINK && (c >= h->n_gpus || !gpu_row))
                                return topo__error(err, -EINVAL, l.no, row->cell_col[c],
                                                   "Row %.*s: NVLink to a NIC.", (int)want->len,
                                                   want->s);
                }
                if (gpu_row) {
                        row_line[rw] = l.no;
                        for (unsigned j = 0; j < h->n_gpus; j++) {
                                struct topo_pair *p = topo_pair_mut(t, rw, j);
                                p->link = row->cells[j].link;
                                p->links = row->cells[j].links;
                        }
                        for (unsigned k = 0; k < h->n_nics; k++)
                                t->nic_links[(size_t)k * t->n_gpus + rw] =
                                        row->cells[h->n_gpus + k].link;
                        r = parse_trailing(&l, toks, n, row->first_trail, h, &t->gpus[rw], err);
                        if (r < 0)
                                return r;
                } else {
                        unsigned k = rw - h->n_gpus;
                        if (row->first_trail != n)
                                return topo__error(err, -EINVAL, l.no, toks[row->first_trail].col,
                                                   "Row %.*s has more cells than the header has "
                                                   "device columns.",
                                                   (int)want->len, want->s);
                        for (unsigned j = 0; j < h->n_gpus; j++)
                                if (row->cells[j].link != topo_nic_link(t, k, j))
                                        return topo__error(
                                                err, -EINVAL, l.no, row->cell_col[j],
                                                "Row %.*s says %s to GPU%u but row "
                                                "GPU%u says %s: the matrix is damaged.",
                                                (int)want->len, want->s,
                                                topo_link_to_string(row->cells[j].link), j, j,
                                                topo_link_to_string(topo_nic_link(t, k, j)));
                        for (unsigned c = 0; c < h->n_nics; c++)
                                nic_nic[(size_t)k * h->n_nics + c] = row->cells[h->n_gpus + c].link;
                        nic_line[k] = l.no;
                }
        }

        /* NIC rows present on both sides must agree (this also checks split glued cells). */
        for (unsigned a = 0; a < h->n_nics; a++)
                for (unsigned b = a + 1; b < h->n_nics; b++) {
                        uint8_t x = nic_nic[(size_t)a * h->n_nics + b];
                        uint8_t y = nic_nic[(size_t)b * h->n_nics + a];
                        if (x != 0xff && y != 0xff && x != y)
                                return topo__error(err, -EINVAL, nic_line[b], 1,
                                                   "The matrix is not symmetric: %s to %s is %s "
                                                   "but %s to %s is %s.",
                                                   t->nics[a].name, t->nics[b].name,
                                                   topo_link_to_string(x), t->nics[b].name,
                                                   t->nics[a].name, topo_link_to_string(y));
                }

        for (unsigned i = 0; i < t->n_gpus; i++)
                for (unsigned j = i + 1; j < t->n_gpus; j++) {
                        const struct topo_pair *a = topo_pair(t, i, j), *b = topo_pair(t, j, i);
                        if (a->link != b->link || a->links != b->links)
                                return topo__error(err, -EINVAL, row_line[j], 1,
                                                   "The matrix is not symmetric: GPU%u to GPU%u "
                                                   "is %s%.0u but GPU%u to GPU%u is %s%.0u.",
                                                   i, j, topo_link_to_string(a->link), a->links, j,
                                                   i, topo_link_to_string(b->link), b->links);
                }

        /* After the matrix: the NIC legend and nvlink --status lines, up to the next matrix. */
        for (;;) {
                if (have_next)
                        have_next = false;
                else if (!next_line(&cur, &l))
                        break;
                if (l.len > 0 && l.s[0] == '#')
                        continue;
                r = tokenize(&l, toks, NVSMI_MAX_TOKENS, &n);
                if (r < 0 || n == 0)
                        continue;
                if (tok_is(&toks[0], "GPU0"))
                        break; /* another matrix (p2p, a second view): not ours */
                r = parse_legend_line(&l, toks, n, h, t, err);
                if (r < 0)
                        return r;
                parse_nvlink_status_line(&l, t);
        }

        topo_finish(t);
        *ret = TAKE_PTR(t);
        return 0;
}
