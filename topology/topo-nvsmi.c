/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `nvidia-smi topo -m` (and old `topo --matrix`) text of every driver generation -> struct
 * topo.  Pure: bytes in, a topology or a positioned error out.  Two stages.  The normalising
 * stage works on a private copy: it removes terminal escape sequences (R550+ drivers underline
 * the header with "\x1b[4m"..."\x1b[0m"; posts keep "[4m" without the ESC byte) and the
 * blanks that end lines (empty trailing cells, CR).  Line numbers stay those of the input.
 * The table reader then splits lines on blanks (posts turn tabs into spaces); the header
 * names the columns; each row carries one cell per device.  Cells glued by lost tab stops
 * ("NODENODE") are split only when the split into known cells is unique and gives the row
 * its exact width; symmetry and GPU/NIC cross-checks confirm it.  A short row, a missing GPU
 * row, an unknown cell, an asymmetric matrix: errors with line and column, never a guess.
 * NIC rows repeat the GPU rows' NIC columns, so trailing ones may be missing; present ones
 * must agree.  Besides the matrix only lines naming GPUs are read ("GPU 0: <model> (UUID:
 * ...)" from `nvidia-smi -L` / `nvlink --status`, "GPU 0,1,2,3: <model>" from sglang and
 * vLLM environment reports, indented or not; before or after the matrix) and, after it, the
 * NIC Legend.
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
cell_prefix(const char *s, size_t len, struct topo__nvsmi_cell *ret)
{
        if (len >= 3 && s[0] == 'N' && s[1] == 'V' && s[2] >= '0' && s[2] <= '9') {
                size_t i = 2;
                int v;

                while (i < len && s[i] >= '0' && s[i] <= '9')
                        i++;
                if (str_to_int(s + 2, i - 2, 1, TOPO_MAX_NVLINKS, &v) < 0)
                        return 0;
                *ret = (struct topo__nvsmi_cell){TOPO_LINK_NVLINK, (uint8_t)v};
                return i;
        }
        for (size_t k = 0; k < ELEMENTSOF(cell_names); k++) {
                size_t nl = strlen(cell_names[k].name);
                if (nl <= len && memcmp(s, cell_names[k].name, nl) == 0) {
                        *ret = (struct topo__nvsmi_cell){(uint8_t)cell_names[k].link, 0};
                        return nl;
                }
        }
        return 0;
}

/* Splits a token into known cells.  Returns the number of cells (1 for a plain cell),
 * 0 when it is not made of known cells.  Every known cell starts with a capital letter and
 * none is a concatenation of others, so at most one split exists; it is still checked by
 * trying every cut rather than assumed. */
unsigned
topo__nvsmi_split_cells(const char *s, size_t len, struct topo__nvsmi_cell *out, unsigned max)
{
        unsigned n = 0;
        size_t i = 0;

        while (i < len) {
                struct topo__nvsmi_cell c;
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
        struct topo__nvsmi_cell cells[TOPO_MAX_GPUS + TOPO_MAX_NICS];
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
                struct topo__nvsmi_cell tmp[TOPO_MAX_GPUS + TOPO_MAX_NICS];
                unsigned k = topo__nvsmi_split_cells(toks[i].s, toks[i].len, tmp, ELEMENTSOF(tmp));

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

/* --- after the matrix: NIC legend and GPU names ------------------------------------------------- */

bool
topo__nvsmi_legend_entry(const char *line, size_t len, const char **ret_label,
                         size_t *ret_label_len, const char **ret_name, size_t *ret_name_len)
{
        const char *s = line, *end = line + len;
        const char *label, *name;

        while (s < end && (*s == ' ' || *s == '\t'))
                s++;
        label = s;
        if (end - s < 4 || memcmp(s, "NIC", 3) != 0)
                return false;
        for (s += 3; s < end && *s >= '0' && *s <= '9'; s++)
                ;
        if (s == label + 3)
                return false;
        size_t label_len = (size_t)(s - label);
        while (s < end && (*s == ' ' || *s == '\t'))
                s++;
        if (s == end || *s != ':')
                return false;
        for (s++; s < end && (*s == ' ' || *s == '\t'); s++)
                ;
        for (name = s; s < end && *s != ' ' && *s != '\t'; s++)
                ;
        size_t name_len = (size_t)(s - name);
        while (s < end && (*s == ' ' || *s == '\t'))
                s++;
        if (name_len == 0 || s != end)
                return false; /* "NIC0: mlx5_0 extra": prose, not a legend entry */
        *ret_label = label;
        *ret_label_len = label_len;
        *ret_name = name;
        *ret_name_len = name_len;
        return true;
}

static int
parse_legend_line(const struct line *l, const struct header *h, struct topo *t,
                  struct topo_error *err)
{
        const char *label, *name;
        size_t label_len, name_len;

        if (!topo__nvsmi_legend_entry(l->s, l->len, &label, &label_len, &name, &name_len))
                return 0;
        for (unsigned k = 0; k < h->n_nics; k++) {
                const struct tok *c = &h->dev[h->n_gpus + k];
                if (c->len != label_len || memcmp(c->s, label, label_len) != 0)
                        continue;
                if (!topo__id_ok(name, name_len))
                        return topo__error(err, -EINVAL, l->no, (unsigned)(name - l->s) + 1,
                                           "NIC name is not printable ASCII of at most "
                                           "%u bytes.",
                                           TOPO_ID_MAX - 1);
                (void)str_copy(t->nics[k].name, TOPO_ID_MAX, name, name_len);
                return 0;
        }
        return topo__error(err, -EINVAL, l->no, (unsigned)(label - l->s) + 1,
                           "The NIC Legend names %.*s, which is not a column of the matrix.",
                           (int)label_len, label);
}

/* "0", "0,1,2,3": indexes into *ret; false on anything else. */
static bool
parse_gpu_list(const char *s, size_t len, struct topo_mask *ret)
{
        struct topo_mask m;
        size_t i = 0;

        topo_mask_clear(&m);
        while (i < len) {
                size_t j = i;
                int v;

                while (j < len && s[j] >= '0' && s[j] <= '9')
                        j++;
                if (j == i || (s[i] == '0' && j - i > 1) ||
                    str_to_int(s + i, j - i, 0, TOPO_MAX_GPUS - 1, &v) < 0)
                        return false;
                topo_mask_set(&m, (unsigned)v);
                if (j < len && s[j] != ',')
                        return false;
                i = j + 1;
                if (j < len && i == len)
                        return false; /* trailing comma */
        }
        *ret = m;
        return len > 0;
}

bool
topo__nvsmi_gpu_names(const char *line, size_t len, struct topo_mask *ret_gpus,
                      const char **ret_model, size_t *ret_model_len, const char **ret_uuid,
                      size_t *ret_uuid_len)
{
        const char *end = line + len, *colon, *m, *uuid = NULL;
        size_t ml, ul = 0;
        struct topo_mask gpus;

        while (len > 0 && (*line == ' ' || *line == '\t')) {
                line++; /* vLLM's collect_env in an indented code block */
                len--;
        }
        if (len < 7 || memcmp(line, "GPU ", 4) != 0)
                return false;
        colon = memchr(line, ':', len);
        if (!colon || !parse_gpu_list(line + 4, (size_t)(colon - line - 4), &gpus))
                return false;
        m = colon + 1;
        const char *paren = memmem(m, (size_t)(end - m), " (UUID: ", 8);
        if (paren && end[-1] == ')') {
                uuid = paren + 8;
                ul = (size_t)(end - 1 - uuid);
        }
        ml = (size_t)((paren ? paren : end) - m);
        str_trim(&m, &ml);
        if (ml == 0)
                return false;
        *ret_gpus = gpus;
        *ret_model = m;
        *ret_model_len = ml;
        *ret_uuid = uuid;
        *ret_uuid_len = ul;
        return true;
}

/* Applies a line naming GPU models (and UUIDs) to the GPUs it lists that the matrix has.
 * Informational lines: what does not fit an identity field is left out. */
static void
parse_gpu_names_line(const struct line *l, struct topo *t)
{
        struct topo_mask gpus;
        const char *m, *uuid;
        size_t ml, ul;

        if (!topo__nvsmi_gpu_names(l->s, l->len, &gpus, &m, &ml, &uuid, &ul))
                return;
        for (unsigned i = 0; i < t->n_gpus; i++) {
                if (!topo_mask_test(&gpus, i))
                        continue;
                if (topo__id_ok(m, ml))
                        (void)str_copy(t->gpus[i].model, TOPO_ID_MAX, m, ml);
                if (ul > 0 && topo__id_ok(uuid, ul))
                        (void)str_copy(t->gpus[i].uuid, TOPO_ID_MAX, uuid, ul);
        }
}

/* --- the normalising stage ------------------------------------------------------------------- */

/* Length of an SGR remnant ("[4m", "[0m", "[1;32m", "[m") at s, 0 when there is none. */
static size_t
sgr_remnant(const char *s, size_t len)
{
        size_t i = 1;

        if (len < 2 || s[0] != '[')
                return 0;
        while (i < len && i < 16 && ((s[i] >= '0' && s[i] <= '9') || s[i] == ';'))
                i++;
        return i < len && s[i] == 'm' ? i + 1 : 0;
}

/* Length of the escape sequence starting with the ESC byte at s (1 for a lone ESC). */
static size_t
esc_sequence(const char *s, size_t len)
{
        size_t i = 2;

        if (len < 2)
                return 1;
        if (s[1] == '[') {
                /* CSI: parameter bytes 0x30-0x3f, intermediates 0x20-0x2f, final 0x40-0x7e. */
                while (i < len && s[i] >= 0x30 && s[i] <= 0x3f)
                        i++;
                while (i < len && s[i] >= 0x20 && s[i] <= 0x2f)
                        i++;
                return i < len && s[i] >= 0x40 && s[i] <= 0x7e ? i + 1 : 1;
        }
        if ((s[1] == '(' || s[1] == ')') && len >= 3 && s[2] > 0x20 && s[2] < 0x7f)
                return 3; /* character set selection, "\x1b(B" from tput sgr0 */
        /* Fp, Fe and Fs sequences: ESC 7, ESC M, ESC c ... */
        return s[1] >= 0x30 && s[1] <= 0x7e ? 2 : 1;
}

size_t
topo__nvsmi_strip_escapes(char *s, size_t len)
{
        size_t r = 0, w = 0;

        while (r < len) {
                size_t skip = 0;

                if (s[r] == '\x1b')
                        skip = esc_sequence(s + r, len - r);
                else if (s[r] == '^' && r + 1 < len && s[r + 1] == '[' && r + 2 < len &&
                         s[r + 2] == '[')
                        skip = 2 + sgr_remnant(s + r + 2, len - r - 2);
                else if (s[r] == '[')
                        skip = sgr_remnant(s + r, len - r);
                if (skip == 2 && s[r] == '^')
                        skip = 0; /* "^[[" not followed by an SGR: literal text */
                if (skip > 0) {
                        r += skip;
                        continue;
                }
                s[w++] = s[r++];
        }
        return w;
}

size_t
topo__nvsmi_trim_lines(char *s, size_t len)
{
        size_t r = 0, w = 0, line_start = 0;

        for (; r <= len; r++) {
                if (r < len && s[r] != '\n') {
                        s[w++] = s[r];
                        continue;
                }
                while (w > line_start && (s[w - 1] == ' ' || s[w - 1] == '\t' || s[w - 1] == '\r'))
                        w--;
                if (r < len) {
                        s[w++] = '\n';
                        line_start = w;
                }
        }
        return w;
}

/* A cleaned copy of the text for the table reader: no escape sequences, no trailing blanks.
 * Line numbers are those of the input; columns count the cleaned line. */
static int
normalise(const char *text, size_t len, char **ret, size_t *ret_len)
{
        char *s = malloc(len + 1);

        if (!s)
                return -ENOMEM;
        if (len > 0)
                memcpy(s, text, len);
        len = topo__nvsmi_strip_escapes(s, len);
        len = topo__nvsmi_trim_lines(s, len);
        s[len] = '\0';
        *ret = s;
        *ret_len = len;
        return 0;
}

/* --- the table reader ---------------------------------------------------------------------- */

struct reader {
        struct cursor cur;
        const char *pre, *pre_end; /* the text before the header: GPU names may be there */
        struct line l;             /* the current line */
        struct tok *toks;
        size_t n;
        struct header *h;
        struct row *row;
        uint8_t *nic_nic; /* NIC row k, NIC column c; 0xff: no row */
        struct topo *t;
        unsigned row_line[TOPO_MAX_GPUS], nic_line[TOPO_MAX_NICS];
        bool have_next; /* l is a line after the matrix that the row loop read */
};

static int
tokenize_line(struct reader *rd, struct topo_error *err)
{
        int r = tokenize(&rd->l, rd->toks, NVSMI_MAX_TOKENS, &rd->n);

        if (r < 0)
                return topo__error(err, -E2BIG, rd->l.no, 1, "More than %u cells in one line.",
                                   NVSMI_MAX_TOKENS);
        return 0;
}

static bool
row_label_is(const struct tok *t, const struct tok *want)
{
        return t->len == want->len && memcmp(t->s, want->s, t->len) == 0;
}

static bool
is_header(const struct tok *toks, size_t n)
{
        unsigned idx;
        return n >= 1 && is_gpu_label(&toks[0], &idx) && idx == 0 &&
               (n == 1 || !tok_is(&toks[1], "X"));
}

/* The header: the first line starting with GPU0 that is not a row. */
static int
read_header(struct reader *rd, struct topo_error *err)
{
        int r;

        while (next_line(&rd->cur, &rd->l)) {
                if (rd->l.len > 0 && rd->l.s[0] == '#')
                        continue;
                r = tokenize_line(rd, err);
                if (r < 0)
                        return r;
                if (rd->n >= 2 && tok_is(&rd->toks[0], "GPU0") && tok_is(&rd->toks[1], "X"))
                        return topo__error(err, -EINVAL, rd->l.no, 1,
                                           "Row GPU0 without a header line before it.");
                if (is_header(rd->toks, rd->n)) {
                        rd->pre_end = rd->l.s;
                        return parse_header(&rd->l, rd->toks, rd->n, rd->h, err);
                }
        }
        return topo__error(err, -EINVAL, rd->cur.no, 1,
                           "No matrix header (a line starting with GPU0) found.");
}

/* Checks the X diagonal and that NVLink joins GPUs only. */
static int
check_row_cells(const struct reader *rd, unsigned rw, bool gpu_row, struct topo_error *err)
{
        const struct tok *want = &rd->h->dev[rw];
        unsigned n_dev = rd->h->n_gpus + rd->h->n_nics;

        for (unsigned c = 0; c < n_dev; c++) {
                const struct topo__nvsmi_cell *cl = &rd->row->cells[c];
                bool self = c == rw;

                if (self != (cl->link == TOPO_LINK_SELF))
                        return topo__error(err, -EINVAL, rd->l.no, rd->row->cell_col[c],
                                           self ? "Row %.*s: expected X on the diagonal."
                                                : "Row %.*s: X off the diagonal.",
                                           (int)want->len, want->s);
                if (cl->link == TOPO_LINK_NVLINK && (c >= rd->h->n_gpus || !gpu_row))
                        return topo__error(err, -EINVAL, rd->l.no, rd->row->cell_col[c],
                                           "Row %.*s: NVLink to a NIC.", (int)want->len, want->s);
        }
        return 0;
}

static int
store_gpu_row(struct reader *rd, unsigned rw, struct topo_error *err)
{
        const struct header *h = rd->h;
        struct topo *t = rd->t;

        rd->row_line[rw] = rd->l.no;
        for (unsigned j = 0; j < h->n_gpus; j++) {
                struct topo_pair *p = topo_pair_mut(t, rw, j);
                p->link = rd->row->cells[j].link;
                p->links = rd->row->cells[j].links;
        }
        for (unsigned k = 0; k < h->n_nics; k++)
                t->nic_links[(size_t)k * t->n_gpus + rw] = rd->row->cells[h->n_gpus + k].link;
        return parse_trailing(&rd->l, rd->toks, rd->n, rd->row->first_trail, h, &t->gpus[rw],
                              err);
}

static int
store_nic_row(struct reader *rd, unsigned rw, struct topo_error *err)
{
        const struct header *h = rd->h;
        const struct tok *want = &h->dev[rw];
        const struct row *row = rd->row;
        unsigned k = rw - h->n_gpus;

        if (row->first_trail != rd->n)
                return topo__error(err, -EINVAL, rd->l.no, rd->toks[row->first_trail].col,
                                   "Row %.*s has more cells than the header has device "
                                   "columns.",
                                   (int)want->len, want->s);
        for (unsigned j = 0; j < h->n_gpus; j++)
                if (row->cells[j].link != topo_nic_link(rd->t, k, j))
                        return topo__error(err, -EINVAL, rd->l.no, row->cell_col[j],
                                           "Row %.*s says %s to GPU%u but row GPU%u says %s: "
                                           "the matrix is damaged.",
                                           (int)want->len, want->s,
                                           topo_link_to_string(row->cells[j].link), j, j,
                                           topo_link_to_string(topo_nic_link(rd->t, k, j)));
        for (unsigned c = 0; c < h->n_nics; c++)
                rd->nic_nic[(size_t)k * h->n_nics + c] = row->cells[h->n_gpus + c].link;
        rd->nic_line[k] = rd->l.no;
        return 0;
}

/* One row per device, in header order.  NIC rows may stop early (see the top comment). */
static int
read_rows(struct reader *rd, struct topo_error *err)
{
        const struct header *h = rd->h;
        unsigned n_dev = h->n_gpus + h->n_nics;
        int r;

        for (unsigned rw = 0; rw < n_dev; rw++) {
                bool gpu_row = rw < h->n_gpus;
                const struct tok *want = &h->dev[rw];

                if (!next_line(&rd->cur, &rd->l)) {
                        if (!gpu_row)
                                return 0;
                        return topo__error(err, -EINVAL, rd->cur.no + 1, 1,
                                           "Matrix cut off at line %u: the text ends before row "
                                           "%.*s.",
                                           rd->cur.no + 1, (int)want->len, want->s);
                }
                r = tokenize_line(rd, err);
                if (r < 0)
                        return r;
                if (rd->n == 0 || !row_label_is(&rd->toks[0], want)) {
                        bool end = rd->n == 0 || rd->l.s[0] == '#' ||
                                   tok_is(&rd->toks[0], "Legend:");
                        if (!gpu_row && end) {
                                rd->have_next = true;
                                return 0;
                        }
                        return topo__error(err, -EINVAL, rd->l.no,
                                           rd->n ? rd->toks[0].col : 1,
                                           "Matrix cut off at line %u: expected row %.*s.",
                                           rd->l.no, (int)want->len, want->s);
                }
                r = parse_row_cells(&rd->l, rd->toks, rd->n, n_dev, gpu_row, rd->row, err);
                if (r >= 0)
                        r = check_row_cells(rd, rw, gpu_row, err);
                if (r >= 0)
                        r = gpu_row ? store_gpu_row(rd, rw, err) : store_nic_row(rd, rw, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* NIC rows present on both sides must agree (this also checks split glued cells); the GPU
 * matrix must be symmetric. */
static int
check_symmetry(const struct reader *rd, struct topo_error *err)
{
        const struct topo *t = rd->t;
        unsigned n_nics = rd->h->n_nics;

        for (unsigned a = 0; a < n_nics; a++)
                for (unsigned b = a + 1; b < n_nics; b++) {
                        uint8_t x = rd->nic_nic[(size_t)a * n_nics + b];
                        uint8_t y = rd->nic_nic[(size_t)b * n_nics + a];
                        if (x != 0xff && y != 0xff && x != y)
                                return topo__error(err, -EINVAL, rd->nic_line[b], 1,
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
                                return topo__error(err, -EINVAL, rd->row_line[j], 1,
                                                   "The matrix is not symmetric: GPU%u to GPU%u "
                                                   "is %s%.0u but GPU%u to GPU%u is %s%.0u.",
                                                   i, j, topo_link_to_string(a->link), a->links, j,
                                                   i, topo_link_to_string(b->link), b->links);
                }
        return 0;
}

/* Before the header: GPU names from an environment report or `nvidia-smi -L`.  After the
 * matrix: the NIC legend and GPU names (`nvlink --status`), up to the next matrix. */
static int
read_names(struct reader *rd, struct topo_error *err)
{
        struct cursor pre = {.p = rd->pre, .end = rd->pre_end};
        struct line l;
        int r;

        while (next_line(&pre, &l))
                parse_gpu_names_line(&l, rd->t);
        for (;;) {
                if (rd->have_next)
                        rd->have_next = false;
                else if (!next_line(&rd->cur, &rd->l))
                        return 0;
                if (rd->l.len > 0 && rd->l.s[0] == '#')
                        continue;
                if (tokenize(&rd->l, rd->toks, NVSMI_MAX_TOKENS, &rd->n) < 0 || rd->n == 0)
                        continue;
                if (tok_is(&rd->toks[0], "GPU0"))
                        return 0; /* another matrix (p2p, a second view): not ours */
                r = parse_legend_line(&rd->l, rd->h, rd->t, err);
                if (r < 0)
                        return r;
                parse_gpu_names_line(&rd->l, rd->t);
        }
}

static int
read_table(struct reader *rd, struct topo_error *err)
{
        const struct header *h = rd->h;
        int r;

        r = read_header(rd, err);
        if (r < 0)
                return r;
        rd->t = topo_new(h->n_gpus, h->n_nics);
        rd->nic_nic = malloc(MAX((size_t)h->n_nics * h->n_nics, 1u));
        if (!rd->t || !rd->nic_nic)
                return -ENOMEM;
        memset(rd->nic_nic, 0xff, (size_t)h->n_nics * h->n_nics);
        rd->t->vendor = TOPO_VENDOR_NVIDIA;
        for (unsigned k = 0; k < h->n_nics; k++)
                (void)str_copy(rd->t->nics[k].name, TOPO_ID_MAX, h->dev[h->n_gpus + k].s,
                               h->dev[h->n_gpus + k].len);
        r = read_rows(rd, err);
        if (r >= 0)
                r = check_symmetry(rd, err);
        if (r >= 0)
                r = read_names(rd, err);
        return r;
}

/* Where the NUL byte sits, for the error: its line and column. */
static int
nul_error(const char *text, const char *nul, struct topo_error *err)
{
        struct cursor c = {.p = text, .end = nul};
        struct line l = {.s = text};

        while (next_line(&c, &l))
                ;
        return topo__error(err, -EINVAL, c.no ? c.no : 1,
                           (unsigned)(nul - (c.no ? l.s : text)) + 1,
                           "NUL byte in the text: this is not nvidia-smi output.");
}

int
topo_parse_nvsmi(const char *text, size_t len, struct topo **ret, struct topo_error *err)
{
        CLEANUP(freep) char *clean = NULL;
        CLEANUP(freep) struct tok *toks = NULL;
        CLEANUP(freep) struct header *h = NULL;
        CLEANUP(freep) struct row *row = NULL;
        CLEANUP(freep) struct reader *rd = NULL;
        size_t clean_len;
        int r;

        r = topo__check_input(text, len, TOPO_MAX_TEXT_BYTES, "Input", err);
        if (r < 0)
                return r;
        const char *nul = len ? memchr(text, '\0', len) : NULL;
        if (nul)
                return nul_error(text, nul, err);
        r = normalise(text, len, &clean, &clean_len);
        if (r < 0)
                return r;
        toks = calloc(NVSMI_MAX_TOKENS, sizeof(*toks));
        h = calloc(1, sizeof(*h));
        row = calloc(1, sizeof(*row));
        rd = calloc(1, sizeof(*rd));
        if (!toks || !h || !row || !rd)
                return -ENOMEM;
        *rd = (struct reader){.cur = {.p = clean, .end = clean + clean_len},
                              .pre = clean, .pre_end = clean,
                              .toks = toks, .h = h, .row = row};
        r = read_table(rd, err);
        free(rd->nic_nic);
        if (r < 0) {
                topo_unref(rd->t);
                return r;
        }
        topo_finish(rd->t);
        *ret = TAKE_PTR(rd->t);
        return 0;
}
