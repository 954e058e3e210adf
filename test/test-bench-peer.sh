#!/usr/bin/env bash
# k8s-besteffort against NVIDIA's own picker: builds bench/peer-gpuallocator (go-gpuallocator's
# BestEffortPolicy) and runs `topofit bench peer-besteffort` on every real topology of at most
# 8 GPUs in the test data (the nvidia-smi/rocm-smi matrices and the real hwloc exports), every
# free mask, every request size up to the free count.  Prints TAP: one line per topology file,
# "not ok" when any choice differs, every difference as a diagnostic line, the agreement last.
# Cut-off captures (the PARTIAL files) and nodes over 8 GPUs are skips with their reason.
# Without Go or the module the whole test is a skip ("1..0 # SKIP ..."), never a pass.
# Usage: test-bench-peer.sh TOPOFIT
set -uo pipefail
topofit=$1
src=${TOPOFIT_SOURCE_ROOT:-$(dirname "$0")/..}
data=${TOPOFIT_TEST_DATA:-$src/test/data}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

peer=$("$src/bench/peer-gpuallocator/build" 2>"$tmp/build.log")
rc=$?
if [ $rc -eq 77 ]; then
        echo "1..0 # SKIP ${peer#skipped: }"
        exit 0
fi
if [ $rc -ne 0 ]; then
        echo "1..1"
        echo "not ok 1 - bench/peer-gpuallocator/build (exit $rc)"
        sed 's/^/# /' "$tmp/build.log" | tail -20
        exit 1
fi
peer=$(printf '%s\n' "$peer" | tail -n 1)

files=("$data"/topologies/*.txt "$data"/hwloc/*.xml)
"$topofit" bench peer-besteffort --peer "$peer" "${files[@]}" >"$tmp/report" 2>"$tmp/err"
rc=$?
echo "1..${#files[@]}"
awk -v rc="$rc" -v files="${#files[@]}" '
        function flush() {
                if (name == "")
                        return
                n++
                print (bad ? "not ok " : "ok ") n " - " name " " what
                for (i = 1; i <= nd; i++)
                        print "# " d[i]
                name = ""; nd = 0; bad = 0
        }
        /^topology / {
                flush()
                name = $2; sub(/:$/, "", name)
                what = $0; sub(/^topology [^:]*: /, "", what)
                bad = what !~ / 0 differ,/
                what = "(" what ")"
                next
        }
        /^diff / || /^padded / { d[++nd] = $0; next }
        /^skip / || /^error / {
                flush()
                n++
                nm = $2; sub(/:$/, "", nm)
                why = $0; sub(/^[a-z]+ [^:]*: /, "", why)
                if ($1 == "skip")
                        print "ok " n " - " nm " # SKIP " why
                else
                        print "not ok " n " - " nm ": " why
                next
        }
        /^agreement: / { flush(); print "# " $0; next }
        END {
                flush()
                while (n < files) { n++; print "not ok " n " - no report (exit " rc ")" }
        }
' "$tmp/report"
sed 's/^/# /' "$tmp/err" | head -20
exit 0
