/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/topofit-bench: the placement simulator as its own program, the same code as
 * `topofit bench` (bench_main in bench-main.c).  Exists so bench/run works in a build
 * without the CLI.
 */
#include "bench.h"

int
main(int argc, char **argv)
{
        return bench_main(argc, argv);
}
