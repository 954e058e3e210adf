#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The `topofit` CLI on real files: every case runs the built binary and checks its exit
# status and output.  Prints TAP.  Usage: test-cli.sh TOPOFIT SHARED_DIR
set -u
topofit=$1
T=$2/topologies
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0

# case NAME EXPECTED_STATUS GREP_STDOUT GREP_STDERR -- ARGS...  (empty pattern: not checked)
case_() {
        local name=$1 want=$2 out_pat=$3 err_pat=$4
        shift 5
        n=$((n + 1))
        "$topofit" "$@" >"$tmp/out" 2>"$tmp/err"
        local got=$?
        local why=""
        [ "$got" = "$want" ] || why="exit $got, want $want"
        if [ -z "$why" ] && [ -n "$out_pat" ] && ! grep -Eq -- "$out_pat" "$tmp/out"; then
                why="stdout lacks /$out_pat/"
        fi
        if [ -z "$why" ] && [ -n "$err_pat" ] && ! grep -Eq -- "$err_pat" "$tmp/err"; then
                why="stderr lacks /$err_pat/"
        fi
        if [ -z "$why" ] && [ "$want" != 0 ] && [ -s "$tmp/out" ]; then
                why="a failure printed to stdout"
        fi
        if [ -z "$why" ]; then
                echo "ok $n - $name"
        else
                echo "not ok $n - $name"
                echo "# $why"
                sed 's/^/#   out: /' "$tmp/out" | head -5
                sed 's/^/#   err: /' "$tmp/err" | head -5
                fails=$((fails + 1))
        fi
}

# check NAME COMMAND...: a case that passes when the shell command succeeds
check() {
        local name=$1
        shift
        n=$((n + 1))
        if "$@" >/dev/null 2>&1; then
                echo "ok $n - $name"
        else
                echo "not ok $n - $name"
                fails=$((fails + 1))
        fi
}

dgx1=$T/dgx1-v100-sxm2-oneflow.txt
h100=$T/hgx-h100-13nic-mlx5ib-eth-penny.txt

echo "1..29"
case_ "place on the DGX-1 with 0 and 4 busy avoids the additive scorer's {1,2,3,5}" 0 \
        '"all_nvlink_ring":true' '' -- place --topology "$dgx1" --count 4 --free 1,2,3,5,6,7 --json
check "the DGX-1 choice is not {1,2,3,5}" bash -c "! grep -q '\"gpus\":\[1,2,3,5\]' '$tmp/out'"
case_ "place --json prints gpus and busbw_gbps" 0 \
        '^\{"gpus":\[[0-9,]+\],"busbw_gbps":[0-9.]+,' '' -- place --topology "$h100" --count 2 --json
case_ "place models a whole H100 NVSwitch node at 450 GB/s" 0 \
        '^busbw_gbps: 450\.0$' '' -- place --topology "$h100" --count 8
case_ "place prints the tie-breaker values" 0 \
        '^numa_spanned: [0-9]+$' '' -- place --topology "$h100" --count 4
case_ "place honours the free list" 0 \
        '^gpus: 6,7$' '' -- place --topology "$h100" --count 2 --free 6,7
case_ "place applies --gpu-model to PCIe rates" 0 \
        '^busbw_gbps: 19\.2$' '' -- place --topology "$T/a100-pcie-4gpu-adroit.txt" --count 2 --gpu-model "NVIDIA A100-PCIE-40GB"
case_ "place reads rocm-smi text" 0 \
        '^gpus: 0,1,2,3,4,5,6,7$' '' -- place --topology "$T/amd-instinct-8gpu-0x74a2-xgmi-ms-swift.txt" --count 8
case_ "explain shows each ring hop's bandwidth" 0 \
        'GPU[0-9]+ -> GPU[0-9]+ +NV +x[12] +(25|50)\.0 GB/s' '' -- explain --topology "$dgx1" --count 4 --free 1,2,3,5,6,7
case_ "explain lists runner-up sets with their scores" 0 \
        '^  2\. [0-9,]+  busbw [0-9.]+ GB/s' '' -- explain --topology "$dgx1" --count 4 --free 1,2,3,5,6,7
case_ "topo convert prints version 1 annotation JSON" 0 \
        '^\{"v":1,' '' -- topo convert "$dgx1"
"$topofit" topo convert "$dgx1" >"$tmp/dgx1.json" 2>/dev/null
"$topofit" place --topology "$dgx1" --count 4 --free 1,2,3,5,6,7 --json >"$tmp/from-text" 2>/dev/null
case_ "place on the converted annotation answers as on the text" 0 \
        "^$(sed 's/[][{}.]/\\&/g' "$tmp/from-text")\$" '' -- place --topology "$tmp/dgx1.json" --count 4 --free 1,2,3,5,6,7 --json
case_ "place reads hwloc XML: DGX-2, 16 GPUs on NVSwitch, 6 x 25 GB/s ports" 0 \
        '^busbw_gbps: 150\.0$' '' -- place --topology "$2/hwloc/nvidiaDGX2.xml" --count 16
case_ "topo convert reads hwloc XML" 0 '^\{"v":1,.*"Tesla P100' '' -- topo convert "$2/hwloc/power8gpudistances.xml"
case_ "topo convert reads stdin as -" 0 '^\{"v":1,' '' -- topo convert - <"$h100"
case_ "a missing file fails with its name on stderr" 1 '' 'no-such-file' -- place --topology "$tmp/no-such-file" --count 1
case_ "a damaged matrix fails with line and column" 1 '' ':[0-9]+:[0-9]+: .*cut off' -- place --topology "$T/dgx-a100-40gb-12nic-PARTIAL.txt" --count 1
case_ "an unsatisfiable constraint names it" 1 '' 'require numa' -- place --topology "$T/a100-2gpu-della-amd.txt" --count 2 --require numa
case_ "a busy node says not now" 1 '' 'not now.*require numa' -- place --topology "$T/dgx1-v100-sxm2-32gb-4nic-microway.txt" --count 2 --free 0,7 --require numa
case_ "more GPUs than the node has never fit" 1 '' 'never on this node' -- place --topology "$dgx1" --count 9
case_ "--count 0 is a usage error" 2 '' 'count' -- place --topology "$dgx1" --count 0
case_ "an out-of-range --free is a usage error" 2 '' 'free' -- place --topology "$dgx1" --count 1 --free 8
case_ "an unknown --require is a usage error" 2 '' 'require' -- place --topology "$dgx1" --count 1 --require fast
case_ "place without --topology is a usage error" 2 '' 'required' -- place --count 1
case_ "an unknown command is a usage error" 2 '' 'unknown command' -- frobnicate
case_ "every command has --help" 0 '^Usage: topofit place' '' -- place --help
check "explain has --help" bash -c "'$topofit' explain --help | grep -q '^Usage: topofit explain'"
check "topo convert has --help" bash -c "'$topofit' topo convert --help | grep -q '^Usage: topofit topo convert'"
check "the top level --help lists the commands" bash -c "'$topofit' --help | grep -q '^  topo convert'"
[ "$n" = 29 ] || { echo "not ok 30 - the plan counts every case ($n run)"; exit 1; }
[ "$fails" = 0 ]
