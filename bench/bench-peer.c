/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NVIDIA's own best-effort picker as a peer of k8s-besteffort.  Encodes a topology for
 * bench/peer-gpuallocator (go-gpuallocator's BestEffortPolicy behind a line protocol) as
 * the P2PLink lists NVML would hand go-gpuallocator (bench_p2p_links(), the same view
 * k8s-besteffort scores), with one query per free mask and size, and compares the peer's
 * answers with bench_pick_pairscore() query by query.  Pure: text in, text out, into
 * caller-owned buffers; running the peer is bench-main.c's job.
 */
#include "bench.h"

#include <errno.h>
#include <string.h>

#include "../common/str.h"

/* The queries, in the order bench_peer_encode writes them and the peer answers them: every
 * non-empty free mask in ascending order of its bits, every size from 1 to its count. */
struct query {
        uint64_t bits; /* 0 before the first */
        unsigned size;
        struct topo_mask free;
};

static struct topo_mask
mask_from_bits(const struct topo *t, uint64_t bits)
{
        struct topo_mask m;

        topo_mask_clear(&m);
        for (unsigned i = 0; i < t->n_gpus; i++)
                if (bits & (UINT64_C(1) << i))
                        topo_mask_set(&m, i);
        return m;
}

static bool
query_next(const struct topo *t, struct query *q)
{
        if (q->bits != 0 && q->size < topo_mask_count(&q->free)) {
                q->size++;
                return true;
        }
        if (++q->bits >= UINT64_C(1) << t->n_gpus)
                return false;
        q->free = mask_from_bits(t, q->bits);
        q->size = 1;
        return true;
}

static int
put_mask(struct buf *b, const struct topo *t, const struct topo_mask *m)
{
        bool first = true;
        int r = 0;

        for (unsigned i = 0; i < t->n_gpus && r >= 0; i++)
                if (topo_mask_test(m, i)) {
                        r = buf_printf(b, "%s%u", first ? "" : ",", i);
                        first = false;
                }
        if (first && r >= 0)
                r = buf_puts(b, "-");
        return r;
}

int
bench_peer_encode(const struct topo *t, struct buf *out)
{
        unsigned queries = 0;
        int r;

        if (t->n_gpus == 0 || t->n_gpus > BENCH_PEER_MAX_GPUS)
                return -E2BIG;
        r = buf_printf(out, "gpus %u\n", t->n_gpus);
        for (unsigned i = 0; i < t->n_gpus && r >= 0; i++)
                for (unsigned j = i + 1; j < t->n_gpus && r >= 0; j++) {
                        enum bench_p2p l[2];
                        unsigned n = bench_p2p_links(t, i, j, l);

                        if (n == 0)
                                continue;
                        r = buf_printf(out, "link %u %u %s%s%s\n", i, j, bench_p2p_to_string(l[0]),
                                       n > 1 ? "," : "", n > 1 ? bench_p2p_to_string(l[1]) : "");
                }
        for (struct query q = { 0 }; r >= 0 && query_next(t, &q); queries++) {
                r = buf_puts(out, "query ");
                r = r < 0 ? r : put_mask(out, t, &q.free);
                r = r < 0 ? r : buf_printf(out, " %u\n", q.size);
        }
        return r < 0 ? r : (int)queries;
}

/* Parses "pick 3,1,nil" into a mask and a count of padding slots.  -EBADMSG otherwise. */
static int
parse_pick(const struct topo *t, const char *line, size_t len, struct topo_mask *ret,
           unsigned *ret_n, unsigned *ret_nil)
{
        struct topo_mask m;
        unsigned n = 0, nil = 0;
        size_t i;

        if (len < 6 || memcmp(line, "pick ", 5) != 0)
                return -EBADMSG;
        topo_mask_clear(&m);
        i = 5;
        if (len == 6 && line[5] == '-')
                goto done;
        while (i < len) {
                size_t e = i;
                int64_t v;

                while (e < len && line[e] != ',')
                        e++;
                if (e - i == 3 && memcmp(line + i, "nil", 3) == 0)
                        nil++;
                else if (str_to_int64(line + i, e - i, 0, (int64_t)t->n_gpus - 1, &v) == 0 &&
                         !topo_mask_test(&m, (unsigned)v)) {
                        topo_mask_set(&m, (unsigned)v);
                        n++;
                } else
                        return -EBADMSG;
                i = e + 1;
        }
done:
        *ret = m;
        *ret_n = n;
        *ret_nil = nil;
        return 0;
}

static int
put_set(struct buf *b, const struct topo *t, const struct topo_mask *m, unsigned nil)
{
        int r = buf_puts(b, "{");
        bool first = true;

        for (unsigned i = 0; i < t->n_gpus && r >= 0; i++)
                if (topo_mask_test(m, i)) {
                        r = buf_printf(b, "%s%u", first ? "" : ",", i);
                        first = false;
                }
        for (unsigned k = 0; k < nil && r >= 0; k++, first = false)
                r = buf_printf(b, "%snil", first ? "" : ",");
        return r < 0 ? r : buf_puts(b, "}");
}

int
bench_peer_compare(const struct topo *t, const char *name, const char *answers, size_t len,
                   struct buf *diffs, struct bench_peer_result *ret, const char **ret_why)
{
        struct bench_peer_result res = { 0 };
        size_t pos = 0;
        int r = 0;

        if (t->n_gpus == 0 || t->n_gpus > BENCH_PEER_MAX_GPUS)
                return -E2BIG;
        for (struct query q = { 0 }; query_next(t, &q);) {
                struct topo_mask ours, theirs;
                unsigned n, nil;
                const char *nl;
                size_t e;

                nl = pos < len ? memchr(answers + pos, '\n', len - pos) : NULL;
                if (!nl) {
                        *ret_why = "the peer answered fewer queries than it was asked";
                        return -EBADMSG;
                }
                e = (size_t)(nl - answers);
                r = parse_pick(t, answers + pos, e - pos, &theirs, &n, &nil);
                pos = e + 1;
                if (r < 0) {
                        *ret_why = "the peer wrote a line that is not 'pick GPU,...'";
                        return r;
                }
                r = bench_pick_pairscore(t, &q.free, q.size, &ours);
                if (r < 0) {
                        *ret_why = "k8s-besteffort found no set";
                        return r;
                }
                res.queries++;
                if (nil > 0)
                        res.padded++;
                else if (n == q.size && topo_mask_equal(&ours, &theirs)) {
                        res.agree++;
                        continue;
                } else
                        res.differ++;
                r = buf_printf(diffs, "%s %s free ", nil ? "padded" : "diff", name);
                r = r < 0 ? r : put_set(diffs, t, &q.free, 0);
                r = r < 0 ? r : buf_printf(diffs, " size %u: ours ", q.size);
                r = r < 0 ? r : put_set(diffs, t, &ours, 0);
                r = r < 0 ? r : buf_puts(diffs, ", theirs ");
                r = r < 0 ? r : put_set(diffs, t, &theirs, nil);
                r = r < 0 ? r : buf_puts(diffs, "\n");
                if (r < 0)
                        return r;
        }
        if (pos != len) {
                *ret_why = "the peer answered more queries than it was asked";
                return -EBADMSG;
        }
        *ret = res;
        return 0;
}

/* splitmix64, as bench-gen.c: one stream per (seed, index). */
static uint64_t
mix(uint64_t *s)
{
        uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));

        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

int
bench_peer_random_topo(uint64_t seed, unsigned index, struct topo **ret)
{
        static const struct {
                uint8_t link, links;
        } kinds[] = {
                { TOPO_LINK_PIX, 0 },    { TOPO_LINK_PXB, 0 },    { TOPO_LINK_PHB, 0 },
                { TOPO_LINK_NODE, 0 },   { TOPO_LINK_SYS, 0 },    { TOPO_LINK_NVLINK, 1 },
                { TOPO_LINK_NVLINK, 2 }, { TOPO_LINK_NVLINK, 4 },
        };
        uint64_t s = seed * UINT64_C(0x100000001b3) ^ index;
        unsigned n = 5 + (unsigned)(mix(&s) % 4);
        struct topo *t = topo_new(n, 0);

        if (!t)
                return -ENOMEM;
        for (unsigned i = 0; i < n; i++)
                t->gpus[i].numa = (int)(mix(&s) % 2);
        for (unsigned i = 0; i < n; i++)
                for (unsigned j = i + 1; j < n; j++) {
                        unsigned k = (unsigned)(mix(&s) % ELEMENTSOF(kinds));

                        topo_pair_mut(t, i, j)->link = kinds[k].link;
                        topo_pair_mut(t, i, j)->links = kinds[k].links;
                        *topo_pair_mut(t, j, i) = *topo_pair_mut(t, i, j);
                }
        *ret = t;
        return 0;
}
