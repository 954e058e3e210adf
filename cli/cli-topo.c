/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `topofit topo convert FILE`, and the file loader every command shares: a bounded read of
 * FILE, format detection and parsing through topology/ (hwloc XML through
 * topology/hwloc), errors with line and column on stderr.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "file.h"
#include "topo-hwloc.h"

int
cli_load_topology(const char *path, struct topo **ret)
{
        CLEANUP(freep) char *text = NULL;
        struct topo_error err = { 0 };
        struct topo *t = NULL;
        size_t len = 0;
        int r;

        r = file_read_capped(path, TOPO_MAX_XML_BYTES, &text, &len);
        if (r == -E2BIG) {
                fprintf(stderr, "topofit: %s: larger than %u bytes\n", path, TOPO_MAX_XML_BYTES);
                return r;
        }
        if (r == -ENOMEM || r == -EIO) {
                fprintf(stderr, "topofit: %s: %s\n", path,
                        r == -ENOMEM ? "out of memory" : "read error");
                return r;
        }
        if (r < 0) {
                fprintf(stderr, "topofit: %s: %s\n", path, strerror(-r));
                return r;
        }
        r = topo_parse_any(text, len, &t, &err);
        if (r == -EPROTONOSUPPORT) {
                err = (struct topo_error){ 0 };
                r = topo_hwloc_load_xml(text, len, &t, &err);
        }
        if (r < 0) {
                if (err.line > 0)
                        fprintf(stderr, "topofit: %s:%u:%u: %s\n", path, err.line, err.column, err.msg);
                else
                        fprintf(stderr, "topofit: %s: %s\n", path, err.msg[0] ? err.msg : strerror(-r));
                return r;
        }
        *ret = t;
        return 0;
}

static const struct option convert_options[] = {
        { "help", no_argument, NULL, 'h' },
        {},
};

int
cli_topo_convert(int argc, char **argv)
{
        CLEANUP(topo_unrefp) struct topo *t = NULL;
        CLEANUP(freep) char *json = NULL;
        size_t len;
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, "h", convert_options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: topofit topo convert FILE\n\n"
                               "Reads `nvidia-smi topo -m` or `rocm-smi --showtopo` text, hwloc XML\n"
                               "or annotation JSON (FILE '-' is stdin) and prints the node annotation\n"
                               "JSON (" TOPO_ANNOTATION_KEY ", docs/annotations.md).\n");
                        return CLI_EXIT_OK;
                default:
                        return CLI_EXIT_USAGE;
                }
        if (optind != argc - 1) {
                fprintf(stderr, "topofit topo convert: expected exactly one FILE (see --help)\n");
                return CLI_EXIT_USAGE;
        }
        if (cli_load_topology(argv[optind], &t) < 0)
                return CLI_EXIT_FAIL;
        r = topo_to_annotation(t, &json, &len);
        if (r < 0) {
                fprintf(stderr, "topofit topo convert: cannot encode the annotation: %s\n", strerror(-r));
                return CLI_EXIT_FAIL;
        }
        fwrite(json, 1, len, stdout);
        putchar('\n');
        return CLI_EXIT_OK;
}
