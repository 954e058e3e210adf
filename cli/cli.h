/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `topofit` command line: a table of commands (cli/topofit.c), one file per command
 * family (cli-topo.c: topo convert; cli-place.c: place, explain).  A command gets argv
 * from its own name on, prints results to stdout and errors to stderr, and returns the
 * process exit status: 0 success, 1 failure, 2 usage error.
 */
#pragma once

#include <stdio.h>

#include "topo.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

typedef int (*cli_run_fn)(int argc, char **argv);

struct cli_command {
        const char *name;    /* "place", or "topo convert" for a two-word command */
        const char *summary; /* one line for `topofit --help` */
        cli_run_fn run;
};

/* Reads FILE (at most TOPO_MAX_XML_BYTES; "-" is stdin) and parses any topology format,
 * hwloc XML included; prints the error to stderr itself.
 * Returns 0 and a new topology in *ret, or a negative errno. */
int cli_load_topology(const char *path, struct topo **ret);

int cli_topo_convert(int argc, char **argv);
int cli_place(int argc, char **argv);
int cli_explain(int argc, char **argv);
int cli_bench(int argc, char **argv); /* cli-bench.c: the placement simulator (bench/) */
