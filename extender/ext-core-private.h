/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals shared by the extender core's files: the ledger's locked primitives, which the
 * verbs (ext-verbs.c) use to check and commit a GPU set in one critical section; the
 * codec's pieces that the ExtenderArgs scanner (ext-args.c) shares; and the tree decoder
 * of ExtenderArgs that the scanner replaced, kept as the oracle of the tests.
 */
#pragma once

#include "ext-core.h"

#define EXT_LEDGER_MAX_ENTRIES 65536 /* reservations + commits in flight */

enum ext_hold {
        EXT_HOLD_RESERVED,  /* tentative: prioritize chose it, bind may take it */
        EXT_HOLD_COMMITTED, /* bind chose it; kept until the cluster view shows the pod */
};

void ext__ledger_lock(struct ext_ledger *l);
void ext__ledger_unlock(struct ext_ledger *l);
/* Lock held.  GPUs of node held by pods other than uid (NULL: anyone) at now_ns, as seen
 * from a cluster view of generation view_gen (entries that view already shows are left
 * out; 0 counts every entry). */
void ext__ledger_held_locked(struct ext_ledger *l, const char *node, const char *uid,
                             uint64_t view_gen, uint64_t now_ns, struct topo_mask *ret);
/* The same for a node of a snapshot, whose name hash (ext_node.name_hash) is known: a
 * filter asks this for every node of the request, so the name is not hashed again. */
void ext__ledger_held_node_locked(struct ext_ledger *l, const struct ext_node *node,
                                  const char *uid, uint64_t view_gen, uint64_t now_ns,
                                  struct topo_mask *ret);
/* Lock held.  Every hold that ext__ledger_held_locked() would count against uid, on any
 * node, gathered in one walk over the entries: a request naming thousands of nodes asks
 * this once instead of once per node (a few entries are live at a time).  Writes one
 * ext_held per entry (several may name one node; node points into the ledger, valid while
 * the lock is held) and returns how many, or -E2BIG when more than max count (ask per
 * node then). */
struct ext_held {
        uint32_t node_hash; /* ext__name_hash(node) */
        const char *node;
        struct topo_mask set;
};
int ext__ledger_holds_locked(struct ext_ledger *l, const char *uid, uint64_t view_gen,
                             uint64_t now_ns, struct ext_held *ret, size_t max);
/* The hash of a node name that the snapshot's index and the ledger's buckets use. */
uint32_t ext__name_hash(const char *s);
/* Whether group id (ext_group_id: "source/ns/...") belongs to namespace ns. */
bool ext__id_in_namespace(const char *id, const char *ns);
uint32_t ext__name_hash_n(const char *s, size_t n);
/* Lock held.  The live entry of (uid, node), or NULL. */
const struct topo_mask *ext__ledger_find_locked(struct ext_ledger *l, const char *uid,
                                                const char *node, enum ext_hold hold,
                                                uint64_t now_ns);
/* Lock held.  Drops every entry of uid, then (when set is non-NULL) records one for
 * (uid, node).  -E2BIG when EXT_LEDGER_MAX_ENTRIES are in use, -ENOMEM. */
int ext__ledger_put_locked(struct ext_ledger *l, const char *uid, const char *node,
                           const struct topo_mask *set, enum ext_hold hold, uint64_t now_ns);
/* Lock held.  As above; a reservation (EXT_HOLD_RESERVED) of a pod of group (non-empty)
 * holds nothing, not even against the group's other pods: bind may take it, nobody is kept
 * off it.  kube-scheduler may place a gang member on another node than the extender's
 * pick (a tie among the domain's nodes), and no member binds before the whole gang is
 * through, so a held pick would only take room from the gang's own later pods; the
 * scheduler's own resource count keeps members apart, bind picks afresh when two picked
 * one set, and placement/'s group hold keeps the domain's room (docs/placement.md). */
int ext__ledger_put_group_locked(struct ext_ledger *l, const char *uid, const char *node,
                                 const struct topo_mask *set, enum ext_hold hold,
                                 const char *group, uint64_t now_ns);
/* true when the ledger holds no entry at all; read without the lock, so only a hint: a
 * filter may miss a hold that a concurrent bind is adding, which bind itself rechecks. */
bool ext__ledger_maybe_empty(struct ext_ledger *l);
/* The ledger's group table (placement/'s place_groups, with its own lock): which domain
 * each pod group was given, and the room held there for its pods not yet bound. */
struct place_groups *ext__ledger_groups(struct ext_ledger *l);

/* --- verdicts kept per snapshot across requests (ext-verdict-memo.c) ----------------------- */
/* A table holds at most this many bytes (its states' verdicts and flags): a snapshot of more
 * node states goes without; a memo keeps at most EXT_VERDICT_TABLES tables. */
#define EXT_VERDICT_TABLE_MAX_BYTES (1u << 20)
#define EXT_VERDICT_TABLES 8

/* All that a node state's verdict depends on besides the snapshot: what decide() reads of
 * the request and the configuration, and whether the cluster term's loss is in it. */
struct ext_verdict_key {
        unsigned count, require;
        int placement;
        bool with_priority, reject_unannotated, loss;
};

struct ext_verdict_memo *ext__verdict_memo_new(void);
struct ext_verdict_memo *ext__verdict_memo_free(struct ext_verdict_memo *m);
/* The table of key's verdicts for a snapshot of n_states node states, made when missing
 * (the least recently used making room when the memo is full); a reference, dropped with
 * ext__verdict_table_unref.  NULL without a memo, when too large, or when memory is short. */
struct ext_verdict_table *ext__verdict_table_get(struct ext_verdict_memo *m,
                                                 const struct ext_verdict_key *key,
                                                 uint32_t n_states);
struct ext_verdict_table *ext__verdict_table_unref(struct ext_verdict_table *t);
DEFINE_CLEANUP_FUNC(struct ext_verdict_table, ext__verdict_table_unref)
/* State's verdict into ret when one was written: true; false otherwise (ret untouched). */
bool ext__verdict_table_read(const struct ext_verdict_table *t, uint32_t state,
                             struct ext_verdict *ret);
/* Records state's verdict unless one is written or being written. */
void ext__verdict_table_write(struct ext_verdict_table *t, uint32_t state,
                              const struct ext_verdict *v);

/* --- the codec's shared pieces (ext-codec.c) ------------------------------------------------ */
#define EXT_MAX_QUANTITY_LEN 32
#define EXT_WHY_REPEATED "a JSON object in the request repeats a key that the extender reads " \
                         "(refused: readers disagree on which copy counts)"
/* A GPU quantity that must be a whole count: the text of a JSON string (n bytes, 1 to
 * EXT_MAX_QUANTITY_LEN, Kubernetes' quantity grammar: "2", "2000m", "1k"), or a JSON
 * number's value.  0 or -EINVAL. */
int ext__quantity_text(const char *s, size_t n, unsigned *ret);
/* The sentence of a 400 for a JSON reader's failure r, and the code to return (ext-codec.c);
 * 0 and -ENOMEM pass through. */
int ext__json_why(int r, const char **ret_why);
int ext__quantity_number(double d, unsigned *ret);

/* The tree decoder of ExtenderArgs that ext_args_decode() replaced (json_parse() and cJSON
 * lookups), kept unchanged as the oracle of test-extender and fuzz-ext-codec: both must
 * accept the same bodies and read the same values.  The extender does not call it. */
struct json_doc;
struct cJSON;
struct ext__args_tree {
        struct ext_request req;
        bool node_names;
        size_t n;
        const char **names;         /* n, into doc */
        const char **topo;          /* Nodes mode: the annotations, unescaped (NULL: none) */
        size_t *topo_len;
        unsigned *gpu_capacity;
        const struct cJSON *items;  /* Nodes mode: Nodes.items */
        struct json_doc *doc;
};
int ext__args_decode_tree(const char *json, size_t len, const struct ext_config *cfg,
                          struct ext__args_tree *ret, const char **ret_why);
void ext__args_tree_release(struct ext__args_tree *t);

/* ext_prioritize, which is this with distinct_ok: ranks the distinct verdicts only where
 * that gives every node the same priority; without, ranks every node (tests compare). */
int ext__prioritize(const struct ext_cluster *c, struct ext_ledger *l,
                    const struct ext_config *cfg, const struct ext_request *req,
                    const struct ext_node *const *nodes, size_t n, uint64_t now_ns,
                    bool distinct_ok, struct ext_verdict *ret);
