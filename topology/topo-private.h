/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the topology module's files; not part of the public interface. */
#pragma once

#include <stdarg.h>
#include <string.h>

#include "topo.h"

/* Fills err (when non-NULL) with a position and a printf-formatted sentence; returns r. */
int topo__error(struct topo_error *err, int r, unsigned line, unsigned column, const char *fmt, ...)
        _printf_(5, 6);

/* NVLink generation (1..5) of a GPU model name, 0 when the name is not known. */
unsigned topo__nvlink_gen_from_model(const char *model);

/* The most NVLinks one GPU of generation gen (1..5) can wire directly. */
unsigned topo__nvlink_links_per_gpu(unsigned gen);

/* True when s[0..len) fits an identity field: shorter than TOPO_ID_MAX and printable ASCII
 * (0x20..0x7e).  Every string a topology holds passes this, so annotations always encode. */
bool topo__id_ok(const char *s, size_t len);

/* Parses a cpuset list ("0-23,48-71", "4,6,8") for syntax only: 0 or -EINVAL. */
int topo__cpuset_check(const char *s, size_t len);

static inline bool
streq(const char *a, const char *b)
{
        return strcmp(a, b) == 0;
}
