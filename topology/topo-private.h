/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the topology module's files; not part of the public interface. */
#pragma once

#include <stdarg.h>
#include <string.h>

#include "topo.h"

/* Fills err (when non-NULL) with a position and a printf-formatted sentence; returns r. */
int topo__error(struct topo_error *err, int r, unsigned line, unsigned column, const char *fmt, ...)
        _printf_(5, 6);

/* The guard every parser of untrusted text runs first: -EINVAL for NULL text of non-zero
 * length, -E2BIG (with err filled: "<what> larger than <max> bytes.") past max; else 0. */
int topo__check_input(const char *text, size_t len, size_t max, const char *what,
                      struct topo_error *err);

/* NVLink generation (1..5) of a GPU model name, 0 when the name is not known. */
unsigned topo__nvlink_gen_from_model(const char *model);

/* The most NVLinks one GPU of generation gen (1..5) can wire directly. */
unsigned topo__nvlink_links_per_gpu(unsigned gen);

/* True when s[0..len) fits an identity field: shorter than TOPO_ID_MAX and printable ASCII
 * (0x20..0x7e).  Every string a topology holds passes this, so annotations always encode. */
bool topo__id_ok(const char *s, size_t len);

/* Parses a cpuset list ("0-23,48-71", "4,6,8") for syntax only: 0 or -EINVAL. */
int topo__cpuset_check(const char *s, size_t len);

/* --- nvidia-smi text: the normalising stage ahead of the table reader (topo-nvsmi.c) --- */

/* One matrix cell: enum topo_link and, for NV#, the link count. */
struct topo__nvsmi_cell {
        uint8_t link;
        uint8_t links;
};

/* Removes terminal escape sequences from s[0..len) in place and returns the new length:
 * CSI sequences (ESC '[' parameters final byte, e.g. "\x1b[4m", "\x1b[0m"), two- and
 * three-byte ESC sequences ("\x1b(B"), the caret form "^[[4m" that `cat -v` prints, and
 * SGR remnants whose ESC byte a post or a log lost ("[4m", "[0m", "[1;32m", "[m").  Newlines
 * are never removed, so line numbers stay those of the input. */
size_t topo__nvsmi_strip_escapes(char *s, size_t len);

/* Removes blanks (space, tab, CR) at the end of every line of s[0..len) in place and
 * returns the new length: rows whose trailing cells are empty ("NIC0\tPXB\t X \t\t\t\t",
 * R550+ drivers) end at their last cell, CRLF text reads as LF. */
size_t topo__nvsmi_trim_lines(char *s, size_t len);

/* Splits one blank-free token into known cells ("NODENODE" -> NODE, NODE: cells glued by a
 * lost tab stop).  Returns the number of cells written to out (1 for a plain cell), 0 when
 * the token is not made of known cells or needs more than max. */
unsigned topo__nvsmi_split_cells(const char *s, size_t len, struct topo__nvsmi_cell *out,
                                 unsigned max);

/* A NIC Legend entry ("  NIC3: mlx5_3", "NIC10 : mlx5_bond_0"): returns true and the label
 * ("NIC3") and the name as spans of line; false for anything else (the "NIC Legend:"
 * heading, blank lines, prose). */
bool topo__nvsmi_legend_entry(const char *line, size_t len, const char **ret_label,
                              size_t *ret_label_len, const char **ret_name, size_t *ret_name_len);

/* A line that names GPU models by index: `nvidia-smi -L` / `nvlink --status`
 * ("GPU 0: NVIDIA B200 (UUID: GPU-...)") and the environment reports of sglang and vLLM
 * ("GPU 0,1,2,3,4,5,6,7: NVIDIA B300 SXM6 AC", "GPU 0,1: AMD Instinct MI355X"), after any
 * leading blanks.  Indexes are "0" or start with 1-9 (so "GPU 00000000:07:00.0" is not one)
 * and below TOPO_MAX_GPUS.  Returns true and the GPUs, the trimmed model and the UUID (len 0
 * when absent) as spans of line.  Read by the nvidia-smi and the rocm-smi parsers. */
bool topo__nvsmi_gpu_names(const char *line, size_t len, struct topo_mask *ret_gpus,
                           const char **ret_model, size_t *ret_model_len, const char **ret_uuid,
                           size_t *ret_uuid_len);

static inline bool
streq(const char *a, const char *b)
{
        return strcmp(a, b) == 0;
}
