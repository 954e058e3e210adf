/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `topofit`: the entry point and its command table.  To add a command, write its run
 * function in its own cli-*.c file, declare it in cli.h and add one row below; `--help`
 * lists the table.  Nothing else here knows about any command.
 */
#include <string.h>

#include "cli.h"
#include "topofit-version.h"

static const struct cli_command commands[] = {
        { "topo convert", "FILE: any topology format -> node annotation JSON", cli_topo_convert },
        { "place", "choose GPUs for a request and print their modeled bus bandwidth", cli_place },
        { "explain", "place, plus each ring hop's bandwidth and the runner-up sets", cli_explain },
        { "bench", "replay a job trace under each placement policy and compare them", cli_bench },
};

static void
usage(FILE *f)
{
        fprintf(f, "Usage: topofit COMMAND [ARGS]... (COMMAND --help for its arguments)\n\n"
                   "Commands:\n");
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
        fprintf(f, "\nOptions:\n  -h, --help     this text\n  --version      print the version\n");
}

/* Matches argv against a one- or two-word command name; returns the words used. */
static int
match(const struct cli_command *c, int argc, char **argv)
{
        const char *space = strchr(c->name, ' ');

        if (!space)
                return strcmp(argv[0], c->name) == 0 ? 1 : 0;
        if (argc < 2 || strncmp(argv[0], c->name, (size_t)(space - c->name)) != 0 ||
            argv[0][space - c->name] != '\0' || strcmp(argv[1], space + 1) != 0)
                return 0;
        return 2;
}

int
main(int argc, char **argv)
{
        if (argc < 2) {
                usage(stderr);
                return CLI_EXIT_USAGE;
        }
        if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
            strcmp(argv[1], "help") == 0) {
                usage(stdout);
                return CLI_EXIT_OK;
        }
        if (strcmp(argv[1], "--version") == 0) {
                printf("topofit %s\n", TOPOFIT_VERSION);
                return CLI_EXIT_OK;
        }
        for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
                int used = match(&commands[i], argc - 1, argv + 1);
                if (used > 0) {
                        /* the command sees its own name as argv[0], as getopt expects */
                        argv[used] = (char *)commands[i].name;
                        return commands[i].run(argc - used, argv + used);
                }
        }
        fprintf(stderr, "topofit: unknown command '%s'%s\n", argv[1],
                strcmp(argv[1], "topo") == 0 ? " (did you mean 'topo convert'?)" : "");
        usage(stderr);
        return CLI_EXIT_USAGE;
}
