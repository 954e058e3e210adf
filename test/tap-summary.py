#!/usr/bin/env python3
"""Counts TAP cases over a meson test log and prints 'N passed, N failed'.

Reads meson-logs/testlog.json files (one JSON object per test run) and plain TAP streams
(files ending in .tap, from the end-to-end suite).  Every 'ok N' line is a
passed case and every 'not ok N' line a failed one; '# SKIP' lines count as skipped.  A
test whose process failed without reporting any failing case (a crash, a timeout, a
missing plan) counts as one more failure, so nothing that broke goes unseen.
Every failure is named again just above the total, so that the last lines of a long CI
log say what broke.
Exit status: 0 when nothing failed, 1 otherwise.
"""
import json
import re
import sys

ok_re = re.compile(r"^ok \d+")
nok_re = re.compile(r"^not ok \d+")
skip_re = re.compile(r"#\s*skip", re.I)


def count(out, where, failures):
    p = f_ = s = 0
    for l in out.splitlines():
        if nok_re.match(l):
            f_ += 1
            failures.append(f"{where}: {l.strip()}")
        elif ok_re.match(l):
            if skip_re.search(l):
                s += 1
            else:
                p += 1
    return p, f_, s


passed = failed = skipped = 0
failures = []
for path in sys.argv[1:]:
    with open(path, encoding="utf-8", errors="replace") as f:
        if path.endswith(".tap"):
            p, f_, s = count(f.read(), path, failures)
            passed, failed, skipped = passed + p, failed + f_, skipped + s
            continue
        for line in f:
            if not line.strip():
                continue
            rec = json.loads(line)
            parts = path.split("/")
            # "build-asan/meson-logs/testlog.json": the build directory names the run.
            run = parts[parts.index("meson-logs") - 1] if "meson-logs" in parts[1:] else path
            where = f"{run}: {rec.get('name')}"
            p, f_, s = count(rec.get("stdout") or "", where, failures)
            if rec.get("result") not in ("OK", "EXPECTEDFAIL", "SKIP") and f_ == 0:
                print(f"tap-summary: {rec.get('name')} ended {rec.get('result')} "
                      f"without a failing case; counted as one failure", file=sys.stderr)
                failures.append(f"{where}: ended {rec.get('result')} without a failing case")
                f_ += 1
            passed += p
            failed += f_
            skipped += s
for line in failures:
    print(f"failed: {line}")
print(f"total: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
