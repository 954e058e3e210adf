/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `topofit bench`: the offline placement simulator (bench/).  The command is bench_main()
 * itself, so `topofit bench` and bench/topofit-bench take the same arguments and print
 * the same table.
 */
#include "cli.h"

#include "bench.h"

int
cli_bench(int argc, char **argv)
{
        return bench_main(argc, argv);
}
