#!/usr/bin/env bash
# Integration test of `topofit bench` (the real binary): help, the generator's determinism,
# converting a PAI trace, a malformed trace and spec named by file and line, a small run
# of every policy writing its CSV files, and a small gang run of chosen policies.  Prints TAP.  Usage: test-bench-cli.sh TOPOFIT
set -uo pipefail
topofit=$1
data=${TOPOFIT_SOURCE_ROOT:-$(dirname "$0")/..}/test/data/bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0
check() { # check NAME COMMAND...: ok when the command succeeds
        local name=$1; shift
        n=$((n + 1))
        if "$@" >"$tmp/out" 2>"$tmp/err"; then
                echo "ok $n - $name"
        else
                echo "not ok $n - $name"
                sed 's/^/# /' "$tmp/out" "$tmp/err" | head -20
                fails=$((fails + 1))
        fi
}
echo "1..12"

check "bench help exits 0 and shows the usage" \
        bash -c '"$0" bench --help | grep -q "^Usage: topofit bench"' "$topofit"

check "bench generate gives the same trace for the same seed" \
        bash -c 'a=$("$0" bench generate --jobs 50 --seed 7) && b=$("$0" bench generate --jobs 50 --seed 7) &&
                 c=$("$0" bench generate --jobs 50 --seed 8) && [ "$a" = "$b" ] && [ "$a" != "$c" ] &&
                 [ "$(printf "%s\n" "$a" | wc -l)" -eq 51 ]' "$topofit"

check "bench convert turns a PAI task table into our CSV" \
        bash -c 'out=$("$0" bench convert --format pai2020 "$1/pai_task_table.csv") &&
                 [ "$out" = "arrival_s,duration_s,gpus,comm_fraction
0.000,600.000,2,0.3000
0.000,600.000,2,0.3000
100.000,100.000,1,0.0000" ]' "$topofit" "$data"

check "a malformed trace row is named by file and line" \
        bash -c '! "$0" bench convert "$1/malformed.csv" 2>"$2/e" && grep -q "malformed.csv:3: column gpus" "$2/e"' \
        "$topofit" "$data" "$tmp"

check "a bad cluster spec line is named by file and line" \
        bash -c '! "$0" bench --cluster "$1/bad.spec" --jobs 10 2>"$2/e" && grep -q "bad.spec:2: node type name used twice" "$2/e"' \
        "$topofit" "$data" "$tmp"

check "an unknown policy is a usage error" \
        bash -c '"$0" bench --policies k8s-default,nope --jobs 10 2>/dev/null; [ $? -eq 2 ]' "$topofit"

check "a small run prints a table row per policy" \
        bash -c '"$0" bench --cluster "$1/small.spec" --jobs 300 --load 1.2 --out "$2/run" --no-plots >"$2/t" &&
                 for p in k8s-default k8s-besteffort binpack-besteffort topofit oracle; do
                         [ "$(grep -c "^| $p |" "$2/t")" -eq 2 ] || exit 1; done' "$topofit" "$data" "$tmp"

check "the run wrote summary, jobs, series and CDF files" \
        bash -c '[ "$(wc -l <"$0/run/summary.csv")" -eq 6 ] && [ "$(grep -c "^topofit," "$0/run/jobs.csv")" -eq 300 ] &&
                 [ -s "$0/run/series.csv" ] && [ -s "$0/run/cdf.csv" ] && [ -s "$0/run/plots.gp" ]' "$tmp"

check "gang: a policy of the single-node run only is a usage error" \
        bash -c '"$0" bench gang --policies rack-packing,oracle --jobs 10 2>/dev/null; [ $? -eq 2 ]' "$topofit"

check "gang: --policies runs only those, with a queueing column per size" \
        bash -c '"$0" bench gang --jobs 60 --policies rack-packing,topofit --out "$1/gang" --no-plots >"$1/g" &&
                 [ "$(grep -c "^| rack-packing |" "$1/g")" -eq 2 ] && [ "$(grep -c "^| topofit |" "$1/g")" -eq 2 ] &&
                 ! grep -q "^| binpack-besteffort |" "$1/g" &&
                 grep -q "^| policy | queueing p50 / p95 (min): 1 GPU | 2 GPUs | 4 GPUs | 8 GPUs | gangs of 2-4 pods | gangs of 6-18 pods |" "$1/g"' \
        "$topofit" "$tmp"

check "gang: --out wrote the summary, the CDFs of every class and the gnuplot script" \
        bash -c '[ "$(wc -l <"$0/gang/gang-summary.csv")" -eq 3 ] && [ -s "$0/gang/gang-plots.gp" ] &&
                 head -1 "$0/gang/gang-summary.csv" | grep -q ",qdelay_8_p95," &&
                 [ "$(cut -d, -f1 "$0/gang/gang-cdf.csv" | sort -u | tr "\n" " ")" = "policy rack-packing topofit " ]' "$tmp"

check "gang: topofit-decide (the deciding filter) runs the trace and places every multi-GPU pod on a best set" \
        bash -c '"$0" bench gang --jobs 60 --policies topofit-decide >"$1/gd" &&
                 grep "^| topofit-decide |" "$1/gd" | head -1 | grep -q "| 100.0% |"' \
        "$topofit" "$tmp"

exit $((fails > 0))
