/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `topofit place` and `topofit explain`: decode the arguments, load the topology, build
 * its scoring class, run score_best()/score_top() and print the choice (text or JSON).
 * The same pure core the extender calls; this file only parses and prints.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "score.h"
#include "str.h"

#define CLI_EXPLAIN_RUNNER_UPS 4 /* runner-up sets explain prints by default */
#define CLI_MAX_TOP 16

struct place_args {
        const char *topology;
        unsigned count;
        const char *free;
        unsigned require;
        const char *gpu_model;
        bool json;
        unsigned top;
};

static const struct option place_options[] = {
        { "topology", required_argument, NULL, 't' },
        { "count", required_argument, NULL, 'k' },
        { "free", required_argument, NULL, 'f' },
        { "require", required_argument, NULL, 'r' },
        { "gpu-model", required_argument, NULL, 'm' },
        { "json", no_argument, NULL, 'j' },
        { "top", required_argument, NULL, 'n' },
        { "help", no_argument, NULL, 'h' },
        {},
};

static void
place_help(const char *cmd)
{
        printf("Usage: topofit %s --topology FILE --count K [--free 0,1,5]\n"
               "         [--require nvlink|numa|pcie-switch|nic[,...]] [--gpu-model NAME] [--json]%s\n\n"
               "Chooses K GPUs (matrix indices) of the node in FILE (any format `topo convert`\n"
               "reads) among the free ones (default: all), and prints them with the modeled\n"
               "all-reduce bus bandwidth in GB/s and the tie-breaker values (docs/scoring.md).\n"
               "--gpu-model names the GPUs when FILE does not (nvidia-smi matrices do not).\n",
               cmd, strcmp(cmd, "explain") == 0 ? " [--top N]" : "");
        if (strcmp(cmd, "explain") == 0)
                printf("explain also prints each ring hop's bandwidth and up to N (default %u)\n"
                       "runner-up sets with their scores.\n", CLI_EXPLAIN_RUNNER_UPS);
        printf("Exit status: 0 placed, 1 no placement or bad input, 2 usage error.\n");
}

/* Returns -1 to continue, or the exit status. */
static int
parse_place(int argc, char **argv, const char *cmd, struct place_args *a)
{
        int c, v;

        *a = (struct place_args){ .top = CLI_EXPLAIN_RUNNER_UPS };
        optind = 0;
        while ((c = getopt_long(argc, argv, "h", place_options, NULL)) >= 0)
                switch (c) {
                case 't':
                        a->topology = optarg;
                        break;
                case 'k':
                        if (str_to_int(optarg, strlen(optarg), 1, TOPO_MAX_GPUS, &v) < 0) {
                                fprintf(stderr, "topofit %s: --count must be 1..%u, not '%s'\n", cmd,
                                        TOPO_MAX_GPUS, optarg);
                                return CLI_EXIT_USAGE;
                        }
                        a->count = (unsigned)v;
                        break;
                case 'f':
                        a->free = optarg;
                        break;
                case 'r':
                        if (score_require_parse(optarg, &a->require) < 0) {
                                fprintf(stderr, "topofit %s: --require takes nvlink, numa, pcie-switch, "
                                                "nic (comma-separated), not '%s'\n", cmd, optarg);
                                return CLI_EXIT_USAGE;
                        }
                        break;
                case 'm':
                        a->gpu_model = optarg;
                        break;
                case 'j':
                        a->json = true;
                        break;
                case 'n':
                        if (str_to_int(optarg, strlen(optarg), 0, CLI_MAX_TOP, &v) < 0) {
                                fprintf(stderr, "topofit %s: --top must be 0..%u\n", cmd, CLI_MAX_TOP);
                                return CLI_EXIT_USAGE;
                        }
                        a->top = (unsigned)v;
                        break;
                case 'h':
                        place_help(cmd);
                        return CLI_EXIT_OK;
                default:
                        return CLI_EXIT_USAGE;
                }
        if (optind != argc) {
                fprintf(stderr, "topofit %s: unexpected argument '%s'\n", cmd, argv[optind]);
                return CLI_EXIT_USAGE;
        }
        if (!a->topology || a->count == 0) {
                fprintf(stderr, "topofit %s: --topology and --count are required (see --help)\n", cmd);
                return CLI_EXIT_USAGE;
        }
        return -1;
}

static void
print_gpus(const struct score_choice *x, const char *sep)
{
        const char *before = "";

        for (unsigned i = 0; i < TOPO_MAX_GPUS; i++)
                if (topo_mask_test(&x->set, i)) {
                        printf("%s%u", before, i);
                        before = sep;
                }
}

struct placed {
        struct topo *topo;
        struct score_class *class;
        struct topo_mask free;
        struct score_request req;
        struct score_choice best;
};

static void
placed_release(struct placed *p)
{
        score_class_unref(p->class);
        topo_unref(p->topo);
}

/* Loads, builds and places; prints errors.  Returns -1 on success, else the exit status. */
static int
place_common(const char *cmd, const struct place_args *a, struct placed *p)
{
        const char *why = NULL;
        int r;

        if (cli_load_topology(a->topology, &p->topo) < 0)
                return CLI_EXIT_FAIL;
        if (a->gpu_model)
                topo_set_model(p->topo, a->gpu_model);
        if (a->free) {
                r = topo_mask_parse(a->free, p->topo->n_gpus, &p->free);
                if (r < 0) {
                        fprintf(stderr, "topofit %s: --free '%s': %s GPU list for a %u-GPU node\n", cmd,
                                a->free, r == -ERANGE ? "out-of-range" : "bad", p->topo->n_gpus);
                        return CLI_EXIT_USAGE;
                }
        } else
                topo_mask_fill(&p->free, p->topo->n_gpus);
        p->class = score_class_new(p->topo, NULL);
        if (!p->class) {
                fprintf(stderr, "topofit %s: out of memory\n", cmd);
                return CLI_EXIT_FAIL;
        }
        p->req = (struct score_request){ .count = a->count, .require = a->require };
        r = score_best(p->class, &p->free, &p->req, &p->best, &why);
        if (r < 0) {
                fprintf(stderr, "topofit %s: no placement for %u GPU%s (%s): %s\n", cmd, a->count,
                        a->count == 1 ? "" : "s",
                        r == -ENOSPC ? "not enough free GPUs" : r == -EAGAIN ? "not now" :
                        r == -ENOEXEC ? "never on this node" : "bad request",
                        why ? why : strerror(-r));
                return CLI_EXIT_FAIL;
        }
        return -1;
}

int
cli_place(int argc, char **argv)
{
        struct placed p = { 0 };
        struct place_args a;
        int r, prio;

        r = parse_place(argc, argv, "place", &a);
        if (r >= 0)
                return r;
        r = place_common("place", &a, &p);
        if (r >= 0) {
                placed_release(&p);
                return r;
        }
        prio = score_node_priority(p.class, &p.free, &p.best);
        if (a.json) {
                printf("{\"gpus\":[");
                print_gpus(&p.best, ",");
                printf("],\"busbw_gbps\":%.1f,\"ideal_gbps\":%.1f,\"numa_spanned\":%u,"
                       "\"nic_gpus\":%u,\"frag_left\":%.4f,\"p2p\":%s,\"all_nvlink_ring\":%s,"
                       "\"priority\":%d}\n",
                       p.best.busbw_gbps, p.best.ideal_gbps, p.best.numa_spanned, p.best.nic_gpus,
                       p.best.frag_left, p.best.p2p ? "true" : "false",
                       p.best.all_nvlink_ring ? "true" : "false", prio);
        } else {
                printf("gpus: ");
                print_gpus(&p.best, ",");
                printf("\nbusbw_gbps: %.1f\nideal_gbps: %.1f\nnuma_spanned: %u\nnic_gpus: %u\n"
                       "frag_left: %.4f\np2p: %s\nall_nvlink_ring: %s\npriority: %d\n",
                       p.best.busbw_gbps, p.best.ideal_gbps, p.best.numa_spanned, p.best.nic_gpus,
                       p.best.frag_left, p.best.p2p ? "yes" : "no",
                       p.best.all_nvlink_ring ? "yes" : "no", prio);
        }
        placed_release(&p);
        return CLI_EXIT_OK;
}

int
cli_explain(int argc, char **argv)
{
        struct score_choice top[CLI_MAX_TOP + 1];
        uint8_t order[TOPO_MAX_GPUS];
        double hop[TOPO_MAX_GPUS];
        struct placed p = { 0 };
        struct place_args a;
        char req[64];
        int r, n;

        r = parse_place(argc, argv, "explain", &a);
        if (r >= 0)
                return r;
        r = place_common("explain", &a, &p);
        if (r >= 0) {
                placed_release(&p);
                return r;
        }
        printf("node: %u GPUs, vendor %s, NVSwitch %s; request %u GPU%s, require %s\n",
               p.topo->n_gpus, topo_vendor_to_string(p.topo->vendor), p.topo->nvswitch ? "yes" : "no",
               a.count, a.count == 1 ? "" : "s",
               a.require ? score_require_to_string(a.require, req, sizeof(req)) : "none");
        printf("chosen: ");
        print_gpus(&p.best, ",");
        printf("  busbw %.1f GB/s (ideal for %u on an empty node: %.1f)\n", p.best.busbw_gbps,
               p.best.n, p.best.ideal_gbps);
        n = score_best_ring(p.class, &p.best.set, order, hop);
        if (n > 1) {
                printf("best ring (slowest hop limits one ring):\n");
                for (int i = 0; i < n; i++) {
                        unsigned x = order[i], y = order[(i + 1) % n];
                        const struct topo_pair *tp = topo_pair(p.topo, x, y);
                        printf("  GPU%u -> GPU%u  %-4s", x, y, topo_link_to_string(tp->link));
                        if (tp->link == TOPO_LINK_NVLINK || tp->link == TOPO_LINK_XGMI)
                                printf(" x%u", tp->links ? tp->links : 1);
                        else
                                printf("   ");
                        printf("  %.1f GB/s\n", hop[i]);
                }
        } else
                printf("single GPU: no communication; ranked by what it leaves free\n");
        printf("tie-breakers: numa_spanned %u, nic_gpus %u, frag_left %.4f, p2p %s, "
               "all_nvlink_ring %s\n", p.best.numa_spanned, p.best.nic_gpus, p.best.frag_left,
               p.best.p2p ? "yes" : "no", p.best.all_nvlink_ring ? "yes" : "no");
        printf("node priority: %d/10\n", score_node_priority(p.class, &p.free, &p.best));
        n = a.top > 0 ? score_top(p.class, &p.free, &p.req, top, a.top + 1, NULL) : 0;
        if (n > 1) {
                printf("runner-ups:\n");
                for (int i = 1; i < n; i++) {
                        printf("  %d. ", i + 1);
                        print_gpus(&top[i], ",");
                        printf("  busbw %.1f GB/s, numa %u, nic %u, frag %.4f%s\n", top[i].busbw_gbps,
                               top[i].numa_spanned, top[i].nic_gpus, top[i].frag_left,
                               top[i].all_nvlink_ring ? ", all-NVLink ring" : "");
                }
        } else if (a.top > 0)
                printf("runner-ups: none (no other set meets the request)\n");
        placed_release(&p);
        return CLI_EXIT_OK;
}
