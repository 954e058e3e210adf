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
#include "topo-hwloc.h"

int
cli_load_topology(const char *path, struct topo **ret)
{
        CLEANUP(freep) char *text = NULL;
        struct topo_error err = { 0 };
        struct topo *t = NULL;
        size_t len = 0, alloc = 0;
        FILE *f;
        int r;

        f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
        if (!f) {
                fprintf(stderr, "topofit: %s: %m\n", path);
                return -errno;
        }
        for (;;) {
                if (len == alloc) {
                        if (alloc >= TOPO_MAX_XML_BYTES + 1)
                                break;
                        size_t na = MIN(MAX(alloc * 2, (size_t)65536), (size_t)TOPO_MAX_XML_BYTES + 1);
                        char *p = realloc(text, na + 1);
                        if (!p) {
                                if (f != stdin)
                                        fclose(f);
                                fprintf(stderr, "topofit: %s: out of memory\n", path);
                                return -ENOMEM;
                        }
                        text = p;
                        alloc = na;
                }
                size_t got = fread(text + len, 1, alloc - len, f);
                len += got;
                if (got == 0)
                        break;
        }
        r = ferror(f) ? -EIO : 0;
        if (f != stdin)
                fclose(f);
        if (r < 0) {
                fprintf(stderr, "topofit: %s: read error\n", path);
                return r;
        }
        if (len > TOPO_MAX_XML_BYTES) {
                fprintf(stderr, "topofit: %s: larger than %u bytes\n", path, TOPO_MAX_XML_BYTES);
                return -E2BIG;
        }
        text[len] = '\0';
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
