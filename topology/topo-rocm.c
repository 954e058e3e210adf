/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parser for `rocm-smi --showtopo`: the "Weight", "Hops" and "Link Type between two GPUs"
 * matrices and the "Numa Nodes" lines, in both the old ('GPU 0          :') and the new
 * ('GPU[0]\t\t:') styles.  Pure: a byte range in, a new AMD topology or a positioned error
 * out.  The link-type matrix is required; weights and hops are optional but, when present,
 * must cover every pair.  Every matrix must be square, agree on the GPU count, carry 0 on
 * the diagonal and be symmetric; a short row is a cut-off matrix.  Besides the matrices only
 * lines naming GPU models are read, anywhere in the text ("GPU 0,1,2,3: AMD Instinct MI355X"
 * from sglang's environment report, as for nvidia-smi text).  Lines may be indented
 * (posts nest the output in indented markdown code blocks, vLLM's collect_env indents it);
 * the indent is skipped before a line is classified, and error columns still count it.
 */
#include <stdlib.h>
#include <string.h>

#include "str.h"
#include "topo-private.h"
#include "topo.h"

enum section {
        SEC_NONE,
        SEC_WEIGHT,
        SEC_HOPS,
        SEC_LINK,
        SEC_NUMA,
        _SEC_MAX,
};

static const struct {
        const char *title;
        enum section sec;
} section_titles[] = {
        {"Weight between two GPUs", SEC_WEIGHT},
        {"Hops between two GPUs", SEC_HOPS},
        {"Link Type between two GPUs", SEC_LINK},
        {"Numa Nodes", SEC_NUMA},
};

static const struct {
        const char *name;
        enum topo_link link;
} rocm_links[] = {
        {"XGMI", TOPO_LINK_XGMI},
        {"PCIE", TOPO_LINK_PCIE},
        {"N/A", TOPO_LINK_UNKNOWN},
        {"NA", TOPO_LINK_UNKNOWN},
};

#define ROCM_MAX_TOKENS (TOPO_MAX_GPUS + 4)

struct rtok {
        const char *s;
        size_t len;
        unsigned col;
};

static size_t
rtokenize(const char *s, size_t len, struct rtok *toks, size_t max)
{
        size_t n = 0;

        for (size_t i = 0; i < len;) {
                if (s[i] == ' ' || s[i] == '\t') {
                        i++;
                        continue;
                }
                if (n == max)
                        return max + 1;
                toks[n] = (struct rtok){.s = s + i, .col = (unsigned)i + 1};
                while (i < len && s[i] != ' ' && s[i] != '\t')
                        i++;
                toks[n].len = (size_t)(s + i - toks[n].s);
                n++;
        }
        return n;
}

/* Spaces and tabs at the start of a line. */
static size_t
leading_blanks(const char *s, size_t len)
{
        size_t i = 0;

        while (i < len && (s[i] == ' ' || s[i] == '\t'))
                i++;
        return i;
}

static bool
gpu_label(const struct rtok *t, unsigned *ret)
{
        int v;

        if (t->len < 4 || memcmp(t->s, "GPU", 3) != 0 ||
            str_to_int(t->s + 3, t->len - 3, 0, TOPO_MAX_GPUS - 1, &v) < 0)
                return false;
        *ret = (unsigned)v;
        return true;
}

/* Model lines anywhere in the text, applied to the GPUs they list that the matrices have.
 * Informational: a model that does not fit the identity field is left out. */
static void
read_model_lines(const char *text, size_t len, struct topo *t)
{
        const char *p = text, *end = text + len;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *s = p, *m, *uuid;
                size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p), ml, ul;
                struct topo_mask gpus;

                p = nl ? nl + 1 : end;
                if (l > 0 && s[l - 1] == '\r')
                        l--;
                if (!topo__nvsmi_gpu_names(s, l, &gpus, &m, &ml, &uuid, &ul) ||
                    !topo__id_ok(m, ml))
                        continue;
                for (unsigned i = 0; i < t->n_gpus; i++)
                        if (topo_mask_test(&gpus, i))
                                (void)str_copy(t->gpus[i].model, TOPO_ID_MAX, m, ml);
        }
}

/* "GPU[3]\t\t: (Topology) Numa Node: 1" or "GPU 3          : (Topology) Numa Node: 1". */
static int
numa_line(const char *s, size_t len, unsigned indent, unsigned line, struct topo *t,
          struct topo_error *err)
{
        static const char key[] = "Numa Node:";
        const char *colon = memchr(s, ':', len), *k;
        size_t i = 3;
        int idx, v;

        if (len < 4 || memcmp(s, "GPU", 3) != 0 || !colon)
                return 0;
        k = memmem(s, len, key, strlen(key));
        if (!k)
                return 0; /* "Numa Affinity" and other lines */
        while (i < (size_t)(colon - s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '['))
                i++;
        size_t a = i;
        while (i < (size_t)(colon - s) && s[i] >= '0' && s[i] <= '9')
                i++;
        if (str_to_int(s + a, i - a, 0, TOPO_MAX_GPUS - 1, &idx) < 0 || (unsigned)idx >= t->n_gpus)
                return topo__error(err, -EINVAL, line, indent + (unsigned)a + 1,
                                   "NUMA line names a GPU that is not in the matrices.");
        const char *vs = k + strlen(key);
        size_t vl = (size_t)(s + len - vs);
        str_trim(&vs, &vl);
        if (str_to_int(vs, vl, -1, TOPO_MAX_NUMA_ID, &v) < 0)
                return topo__error(err, -EINVAL, line, indent + (unsigned)(vs - s) + 1,
                                   "NUMA node '%.*s' is not a number.", (int)MIN(vl, 16u), vs);
        t->gpus[idx].numa = v;
        return 0;
}

/* The reader's state across lines: the section, the matrix being read, the model. */
struct rocm_reader {
        struct topo *t;        /* made at the first matrix header */
        struct rtok *toks;     /* ROCM_MAX_TOKENS + 1 */
        bool seen[_SEC_MAX];
        enum section sec;
        unsigned lineno, n_gpus, next_row, header_line;
        bool in_matrix;
};

/* A matrix that stops before its last row is an error, wherever it stops. */
static int
rocm_check_complete(const struct rocm_reader *rd, struct topo_error *err)
{
        if (rd->in_matrix && rd->next_row < rd->n_gpus)
                return topo__error(err, -EINVAL, rd->lineno, 1,
                                   "Matrix cut off at line %u: %u of %u rows.", rd->lineno,
                                   rd->next_row, rd->n_gpus);
        return 0;
}

/* "=== Link Type between two GPUs ===": ends the matrix before it, starts a section. */
static int
rocm_section(struct rocm_reader *rd, const char *s, size_t l, struct topo_error *err)
{
        int r = rocm_check_complete(rd, err);

        if (r < 0)
                return r;
        rd->in_matrix = false;
        rd->sec = SEC_NONE;
        for (size_t k = 0; k < ELEMENTSOF(section_titles); k++) {
                if (!memmem(s, l, section_titles[k].title, strlen(section_titles[k].title)))
                        continue;
                rd->sec = section_titles[k].sec;
                if (rd->seen[rd->sec])
                        return topo__error(err, -EINVAL, rd->lineno, 1,
                                           "Section '%s' appears twice.", section_titles[k].title);
                rd->seen[rd->sec] = true;
        }
        return 0;
}

/* The header of a matrix: GPU0 GPU1 ...; the first one sizes the topology. */
static int
rocm_header(struct rocm_reader *rd, size_t n, struct topo_error *err)
{
        for (size_t i = 0; i < n; i++) {
                unsigned idx;

                if (!gpu_label(&rd->toks[i], &idx) || idx != i)
                        return topo__error(err, -EINVAL, rd->lineno, rd->toks[i].col,
                                           "Expected header column GPU%zu.", i);
        }
        if (!rd->t) {
                rd->n_gpus = (unsigned)n;
                rd->t = topo_new(rd->n_gpus, 0);
                if (!rd->t)
                        return -ENOMEM;
                rd->t->vendor = TOPO_VENDOR_AMD;
        } else if (n != rd->n_gpus)
                return topo__error(err, -EINVAL, rd->lineno, 1,
                                   "This matrix has %zu GPUs, the first had %u.", n, rd->n_gpus);
        rd->in_matrix = true;
        rd->next_row = 0;
        rd->header_line = rd->lineno;
        return 0;
}

/* One off-diagonal cell of the current section's matrix into its pair. */
static int
rocm_cell(const struct rocm_reader *rd, const struct rtok *c, struct topo_pair *pr,
          struct topo_error *err)
{
        int v;

        switch (rd->sec) {
        case SEC_WEIGHT:
                if (str_to_int(c->s, c->len, 0, UINT16_MAX, &v) < 0)
                        return topo__error(err, -EINVAL, rd->lineno, c->col,
                                           "Weight '%.*s' is not a number.",
                                           (int)MIN(c->len, 16u), c->s);
                pr->weight = (uint16_t)v;
                return 0;
        case SEC_HOPS:
                if (str_to_int(c->s, c->len, 0, UINT8_MAX, &v) < 0)
                        return topo__error(err, -EINVAL, rd->lineno, c->col,
                                           "Hops '%.*s' is not a number.",
                                           (int)MIN(c->len, 16u), c->s);
                pr->hops = (uint8_t)v;
                return 0;
        case SEC_LINK:
                for (size_t k = 0; k < ELEMENTSOF(rocm_links); k++)
                        if (str_eq_n(c->s, c->len, rocm_links[k].name)) {
                                pr->link = (uint8_t)rocm_links[k].link;
                                return 0;
                        }
                return topo__error(err, -EINVAL, rd->lineno, c->col, "Unknown link type '%.*s'.",
                                   (int)MIN(c->len, 16u), c->s);
        default:
                return 0;
        }
}

/* One matrix row: "GPU<i> c0 c1 ...", exactly one cell per GPU, 0 on the diagonal. */
static int
rocm_row(struct rocm_reader *rd, size_t n, size_t l, struct topo_error *err)
{
        unsigned idx;
        int r;

        if (rd->next_row == rd->n_gpus)
                return topo__error(err, -EINVAL, rd->lineno, 1,
                                   "More rows than GPUs in the matrix at line %u.", rd->header_line);
        if (!gpu_label(&rd->toks[0], &idx) || idx != rd->next_row)
                return topo__error(err, -EINVAL, rd->lineno, rd->toks[0].col,
                                   "Matrix cut off at line %u: expected row GPU%u.", rd->lineno,
                                   rd->next_row);
        if (n - 1 < rd->n_gpus)
                return topo__error(err, -EINVAL, rd->lineno, (unsigned)l + 1,
                                   "Matrix cut off at line %u: row GPU%u has %zu of %u cells.",
                                   rd->lineno, idx, n - 1, rd->n_gpus);
        if (n - 1 > rd->n_gpus)
                return topo__error(err, -EINVAL, rd->lineno, rd->toks[rd->n_gpus + 1].col,
                                   "Row GPU%u has more cells than the matrix has GPUs.", idx);
        for (unsigned j = 0; j < rd->n_gpus; j++) {
                const struct rtok *c = &rd->toks[j + 1];

                if (j == idx) {
                        if (!str_eq_n(c->s, c->len, "0"))
                                return topo__error(err, -EINVAL, rd->lineno, c->col,
                                                   "Expected 0 on the diagonal.");
                        continue;
                }
                r = rocm_cell(rd, c, topo_pair_mut(rd->t, idx, j), err);
                if (r < 0)
                        return r;
        }
        rd->next_row++;
        return 0;
}

/* One line of text (without its end of line). */
static int
rocm_line(struct rocm_reader *rd, const char *s, size_t l, struct topo_error *err)
{
        size_t indent, n;

        if (memchr(s, '\0', l))
                return topo__error(err, -EINVAL, rd->lineno, 1,
                                   "NUL byte in the text: this is not rocm-smi output.");
        indent = leading_blanks(s, l);
        if (l > 0 && s[0] == '#')
                return 0;
        if (indent < l && s[indent] == '=')
                return rocm_section(rd, s, l, err);
        if (rd->sec == SEC_NUMA) {
                if (!rd->t)
                        return topo__error(err, -EINVAL, rd->lineno, 1,
                                           "NUMA lines before any matrix.");
                return numa_line(s + indent, l - indent, (unsigned)indent, rd->lineno, rd->t, err);
        }
        if (rd->sec == SEC_NONE)
                return 0;
        n = rtokenize(s, l, rd->toks, ROCM_MAX_TOKENS);
        if (n > ROCM_MAX_TOKENS)
                return topo__error(err, -E2BIG, rd->lineno, 1, "More than %u cells in one line.",
                                   ROCM_MAX_TOKENS);
        if (n == 0)
                return rocm_check_complete(rd, err);
        if (!rd->in_matrix)
                return rocm_header(rd, n, err);
        return rocm_row(rd, n, l, err);
}

/* The weight, hops and link matrices must each be symmetric. */
static int
rocm_check_symmetry(const struct topo *t, struct topo_error *err)
{
        for (unsigned i = 0; i < t->n_gpus; i++)
                for (unsigned j = i + 1; j < t->n_gpus; j++) {
                        const struct topo_pair *a = topo_pair(t, i, j), *b = topo_pair(t, j, i);

                        if (a->link != b->link || a->weight != b->weight || a->hops != b->hops)
                                return topo__error(err, -EINVAL, 0, 0,
                                                   "The matrices are not symmetric at GPU%u/GPU%u.",
                                                   i, j);
                }
        return 0;
}

int
topo_parse_rocm(const char *text, size_t len, struct topo **ret, struct topo_error *err)
{
        CLEANUP(freep) struct rtok *toks = NULL;
        struct rocm_reader rd = { .sec = SEC_NONE };
        const char *p = text, *end = text + len;
        int r;

        r = topo__check_input(text, len, TOPO_MAX_TEXT_BYTES, "Input", err);
        if (r < 0)
                return r;
        toks = calloc(ROCM_MAX_TOKENS + 1, sizeof(*toks));
        if (!toks)
                return -ENOMEM;
        rd.toks = toks;
        while (r >= 0 && p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *s = p;
                size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

                p = nl ? nl + 1 : end;
                rd.lineno++;
                if (l > 0 && s[l - 1] == '\r')
                        l--;
                r = rocm_line(&rd, s, l, err);
        }
        if (r >= 0)
                r = rocm_check_complete(&rd, err);
        if (r >= 0 && (!rd.t || !rd.seen[SEC_LINK]))
                r = topo__error(err, -EINVAL, rd.lineno, 1,
                                "No 'Link Type between two GPUs' matrix found.");
        if (r >= 0)
                r = rocm_check_symmetry(rd.t, err);
        if (r < 0) {
                topo_unref(rd.t);
                return r;
        }
        read_model_lines(text, len, rd.t);
        topo_finish(rd.t);
        *ret = rd.t;
        return 0;
}
