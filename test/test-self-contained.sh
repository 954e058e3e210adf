#!/usr/bin/env bash
# The repository is self-contained: everything a test, the demo or a benchmark reads lives
# in it.  Checks the tracked files (git ls-files; every file under the source root when it is
# not a git checkout): no file outside docs/ points at a directory beside the checkout or at
# the environment variable that used to name one; no fuzzer artefact is tracked; every real
# capture under test/data/topologies carries its provenance and is listed in INDEX.md; every
# topology path in a bench cluster spec resolves to a file inside the repository.
# Prints TAP.  Usage: test/test-self-contained.sh [SOURCE_ROOT]
set -uo pipefail
src=$(cd "${1:-${TOPOFIT_SOURCE_ROOT:-$(dirname "$0")/..}}" && pwd)
cd "$src" || exit 1

n=0
fails=0
ok() {
        n=$((n + 1))
        if [ "$1" = 0 ]; then
                echo "ok $n - $2"
        else
                echo "not ok $n - $2"
                fails=$((fails + 1))
        fi
}

if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        mapfile -t files < <(git -C "$src" ls-files)
else
        mapfile -t files < <(find . -path ./.git -prune -o -path './build*' -prune -o -type f -print |
                sed 's|^\./||')
fi

# The patterns are assembled so this file does not match itself.
dotdot='\.\.'
sib="${dotdot}/shared"
mesonsib="'${dotdot}' / 'shared'"
envvar="TOPOFIT_""SHARED"
scan=()
for f in "${files[@]}"; do
        case $f in docs/*) continue ;; esac
        [ -f "$f" ] && scan+=("$f")
done
mapfile -t bad < <(printf '%s\0' "${scan[@]}" |
        xargs -0 grep -Il -e "$sib" -e "$mesonsib" -e "$envvar" 2>/dev/null)
ok ${#bad[@]} "no tracked file outside docs/ refers to a directory beside the checkout (${#files[@]} files checked)"
for f in "${bad[@]}"; do echo "# refers outside the repository: $f"; done

art=()
for f in "${files[@]}"; do
        case ${f##*/} in crash-* | leak-* | timeout-* | oom-* | slow-unit-*) art+=("$f") ;; esac
done
ok ${#art[@]} "no fuzzer artefact (crash-, leak-, timeout-, oom-, slow-unit-) is tracked"
for f in "${art[@]}"; do echo "# fuzzer artefact: $f"; done

# A file the fuzzers drop in the source root must not show up as something to commit.
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        ignored=0
        for probe in leak-0123abcd crash-0123abcd timeout-0123abcd oom-0123abcd; do
                git -C "$src" check-ignore -q "$probe" || ignored=1
        done
        ok $ignored ".gitignore keeps fuzzer output out of the tree"
else
        echo "ok $((n += 1)) - .gitignore keeps fuzzer output out of the tree # SKIP not a git checkout"
fi

noprov=()
caps=0
for f in test/data/topologies/*.txt; do
        [ -f "$f" ] || continue
        caps=$((caps + 1))
        if ! grep -q '^# source: ..' "$f" ||
           ! grep -qF "\`${f##*/}\`" test/data/topologies/INDEX.md; then
                noprov+=("$f")
        fi
done
[ "$caps" -gt 0 ] || noprov+=("(no capture found under test/data/topologies)")
ok ${#noprov[@]} "each of the $caps captures in test/data/topologies has a '# source:' line and an INDEX.md row"
for f in "${noprov[@]}"; do echo "# no provenance: $f"; done

missing=()
for spec in bench/*.spec test/data/bench/*.spec; do
        [ -f "$spec" ] || continue
        dir=$(dirname "$spec")
        while read -r name count path _; do
                case $name in '' | '#'*) continue ;; esac
                [ -n "${path:-}" ] || continue
                case $path in /*) missing+=("$spec: absolute path $path"); continue ;; esac
                real=$(realpath -m "$dir/$path")
                case $real in
                "$src"/*) [ -f "$real" ] || missing+=("$spec: $path does not exist") ;;
                *) missing+=("$spec: $path is outside the repository") ;;
                esac
        done <"$spec"
done
ok ${#missing[@]} "every topology a bench cluster spec names is a file inside the repository"
for m in "${missing[@]}"; do echo "# $m"; done

echo "1..$n"
[ "$fails" = 0 ]
