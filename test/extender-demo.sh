#!/usr/bin/env bash
# The demo's pieces as a test: the committed demo/cluster.json is what the generator makes
# from test/data/topologies, and the scheduler-side client runs its whole scenario against
# the real extender (every bind accepted, the impossible pods pending with a reason, no
# GPU handed out twice).  Prints TAP.
set -uo pipefail
build=${TOPOFIT_BUILD_ROOT:-build}
src=${TOPOFIT_SOURCE_ROOT:-.}
data=${TOPOFIT_TEST_DATA:-$src/test/data}
tmp=$(mktemp -d)
pid=
cleanup() {
        [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        rm -rf "$tmp"
}
trap cleanup EXIT
n=0
fails=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi; }

echo "1..6"
"$build/demo/topofit-demo-gen" "$data" >"$tmp/cluster.json" 2>"$tmp/gen.err"
cmp -s "$tmp/cluster.json" "$src/demo/cluster.json"
ok $? "the committed demo cluster is what the generator makes from the real topologies in test/data"

"$build/extender/topofit-extender" --cluster "$src/demo/cluster.json" --listen 127.0.0.1:0 \
        --port-file "$tmp/port" --threads 2 --log-level warn 2>"$tmp/ext.log" &
pid=$!
for _ in $(seq 1 200); do [ -s "$tmp/port" ] && break; sleep 0.05; done
"$build/demo/topofit-demo-client" "$(cat "$tmp/port" 2>/dev/null || echo 1)" "$src/demo/cluster.json" \
        >"$tmp/out" 2>"$tmp/err"
ok $? "the demo client plays its whole scenario against the extender"
[ "$(grep -cE '^(pair|quad|infer|train|huge)' "$tmp/out")" -ge 11 ]
ok $? "the table has a row for every pod of the scenario"
grep -A2 "^huge-16" "$tmp/out" | grep -q "pending, 0/6 nodes are available"
ok $? "a pod no node can hold stays pending with the extender's reason"
grep -A2 "^huge-16" "$tmp/out" | grep -q " 6 x the node has fewer GPUs than the pod requests"
ok $? "the pending reason counts each of the 6 nodes once"
curl -s "http://127.0.0.1:$(cat "$tmp/port")/allocations" | python3 -c '
import json, sys
seen = set()
for p in json.load(sys.stdin)["pods"]:
    for g in p["gpus"]:
        key = (p["node"], g)
        if key in seen:
            sys.exit(1)
        seen.add(key)
sys.exit(0 if len(seen) > 20 else 1)'
ok $? "no GPU of the demo cluster is allocated twice"
[ $fails = 0 ] || { echo "# client stderr:"; sed 's/^/# /' "$tmp/err"; }
exit $((fails > 0))
