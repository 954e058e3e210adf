#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/gpu-capture against stand-ins: the fake nvidia-smi replaying the real H100
# capture (test/data/plugin/h100-vm-driver580/), the fake NVML (4 GPUs) and the built
# topofit-node.  The capture's nvidia-smi discovery must print the annotation the real
# machine printed; a tool that fails is recorded, not fatal.  Prints TAP.
# Usage: test-gpu-capture.sh TOPOFIT_NODE FAKE_NVML_SO
set -u
node=$1
nvml=$2
src=$(cd "$(dirname "$0")/.." && pwd)
data=$src/test/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0
ok() { # COND-STATUS NAME [WHY]
        n=$((n + 1))
        if [ "$1" = 0 ]; then
                echo "ok $n - $2"
        else
                echo "not ok $n - $2"
                [ -n "${3:-}" ] && echo "# $3"
                fails=$((fails + 1))
        fi
}

echo "1..6"
FAKE_NVSMI_TOPO=$data/topologies/h100-80gb-hbm3-1gpu-vm-driver580-capture.txt \
FAKE_NVSMI_QUERY=$data/plugin/h100-vm-driver580/query-gpu.csv \
TOPOFIT_NODE=$node NVIDIA_SMI=$data/plugin/fake-nvidia-smi NVML_LIB=$nvml \
LSTOPO=/nonexistent/lstopo \
        "$src/scripts/gpu-capture" "$tmp/cap" >"$tmp/out" 2>"$tmp/err"
rc=$?
ok "$rc" "gpu-capture exits 0 when discovery finds GPUs" "exit $rc: $(tail -3 "$tmp/err")"

missing=
for f in machine.txt nvidia-smi-topo-m.txt query-gpu.csv nvidia-smi-q.txt \
         discover-nvml-hwloc.txt discover-nvidia-smi.txt discover-hwloc.txt; do
        [ -s "$tmp/cap/$f" ] || missing+=" $f"
done
[ -z "$missing" ] && [ ! -e "$tmp/cap/lstopo.xml" ]
ok $? "every capture file is written, and no hwloc export without lstopo" "missing:$missing"

want=$(tail -1 "$data/plugin/h100-vm-driver580/discover-nvidia-smi.txt")
got=$(tail -1 "$tmp/cap/discover-nvidia-smi.txt")
[ "$got" = "$want" ]
ok $? "the nvidia-smi discovery of the replayed H100 outputs prints the real machine's annotation" "got $got"

grep -q '"uuid":"GPU-fa4e0000-0000-0000-0000-000000000003"' "$tmp/cap/discover-nvml-hwloc.txt" &&
        grep -q "^nvml: 4 GPUs" "$tmp/cap/discover-nvml-hwloc.txt"
ok $? "the NVML discovery goes through the NVML library it is given" "$(head -5 "$tmp/cap/discover-nvml-hwloc.txt")"

# The stand-in nvidia-smi knows no -q: the failure is recorded and the capture goes on.
grep -q "^# exit 2: .*-q$" "$tmp/cap/nvidia-smi-q.txt"
ok $? "a tool that fails leaves its exit status in its file" "$(cat "$tmp/cap/nvidia-smi-q.txt")"

if ldd "$nvml" 2>/dev/null | grep -q libasan; then
        echo "ok 6 - NVML's fabric calls are asked for every GPU # SKIP the sanitizer build's fake NVML cannot be loaded into an uninstrumented python3 (the plain build runs this case)"
elif command -v python3 >/dev/null; then
        [ "$(grep -c "nvmlDeviceGetGpuFabricInfoV rc=0 state=0" "$tmp/cap/nvml-fabric.txt")" = 4 ]
        ok $? "NVML's fabric calls are asked for every GPU" "$(cat "$tmp/cap/nvml-fabric.txt")"
else
        echo "ok 6 - NVML's fabric calls are asked for every GPU # SKIP no python3"
fi
[ "$fails" = 0 ]
