#!/usr/bin/env bash
# The charts in docs/img are checked, not just committed: every image is referenced from
# the docs and every image the docs reference exists; and the generator (scripts/doc-charts:
# `topofit bench` on the default scenario and `topofit bench gang`, seed 1) run now
# reproduces every committed chart byte for byte, except decisions/s, which measures the
# machine (only its presence is checked).  A chart that differs means the scenario or the simulator changed without
# scripts/doc-charts being run.  Without gnuplot the regeneration is skipped (said so).
# Prints TAP.  Usage: test-doc-charts.sh TOPOFIT
set -uo pipefail
topofit=$1
root=${TOPOFIT_SOURCE_ROOT:-$(dirname "$0")/..}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; }

mapfile -t imgs < <(cd "$root/docs/img" && ls)
mapfile -t refs < <(cd "$root" && grep -Eho 'img/[A-Za-z0-9._-]+\.(svg|png|jpg)' docs/*.md README.md | sort -u)
[ -x "$root/scripts/doc-charts" ] && ok "the chart generator scripts/doc-charts exists" ||
        notok "the chart generator scripts/doc-charts exists"
for f in "${imgs[@]}"; do
        if printf '%s\n' "${refs[@]}" | grep -qx "img/$f"; then
                ok "docs/img/$f is referenced from the docs"
        else
                notok "docs/img/$f is referenced from the docs"
        fi
done
for r in "${refs[@]}"; do
        if [ -f "$root/docs/$r" ]; then
                ok "docs reference $r, which exists"
        else
                notok "docs reference $r, which exists"
        fi
done
if ! command -v gnuplot >/dev/null; then
        for f in "${imgs[@]}"; do
                n=$((n + 1))
                echo "ok $n - docs/img/$f regenerates # SKIP gnuplot is not installed"
        done
else
        if "$topofit" bench --out "$tmp/out" >"$tmp/log" 2>&1 && ls "$tmp"/out/*.svg >/dev/null 2>&1
        then
                ok "the generator (topofit bench, default scenario) runs and draws charts"
        else
                notok "the generator (topofit bench, default scenario) runs and draws charts"
                sed 's/^/# /' "$tmp/log" | head -20
                mkdir -p "$tmp/out"
        fi
        if "$topofit" bench gang --out "$tmp/out" >"$tmp/log" 2>&1 &&
                ls "$tmp"/out/gang-*.svg >/dev/null 2>&1
        then
                ok "the generator (topofit bench gang, seed 1) runs and draws charts"
        else
                notok "the generator (topofit bench gang, seed 1) runs and draws charts"
                sed 's/^/# /' "$tmp/log" | head -20
        fi
        for f in "${imgs[@]}"; do
                g="$tmp/out/${f#bench-}"
                if [ ! -f "$g" ]; then
                        notok "docs/img/$f regenerates (the generator made no ${f#bench-})"
                elif [ "$f" = bench-metric-decisions.svg ] || cmp -s "$root/docs/img/$f" "$g"; then
                        ok "docs/img/$f regenerates"
                else
                        notok "docs/img/$f regenerates (differs: run scripts/doc-charts)"
                fi
        done
        for g in "$tmp"/out/*.svg; do
                [ -f "$g" ] || continue
                b=bench-$(basename "$g")
                [ -f "$root/docs/img/$b" ] && continue
                notok "the generator's $(basename "$g") is committed as docs/img/$b"
        done
fi
echo "1..$n"
