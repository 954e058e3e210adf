#!/usr/bin/env python3
"""Checks test/tap-summary.py, the counter whose last line CI reports: it counts passed,
failed and skipped TAP cases over meson's testlog.json and plain .tap streams, counts a
test that broke without a failing case as one failure, names every failure above the
total, and exits non-zero exactly when something failed.  Prints TAP."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.environ.get("TOPOFIT_SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARY = os.path.join(ROOT, "test", "tap-summary.py")
n = 0


def case(ok, what):
    global n
    n += 1
    print(f"{'ok' if ok else 'not ok'} {n} - {what}")


def run(files):
    r = subprocess.run([sys.executable, SUMMARY] + files, capture_output=True, text=True)
    return r.returncode, r.stdout.splitlines()


print("1..4")
with tempfile.TemporaryDirectory() as d:
    good = os.path.join(d, "good.tap")
    with open(good, "w") as f:
        f.write("1..3\nok 1 - a\nok 2 - b # SKIP no kubelet\nok 3 - c\n")
    rc, out = run([good])
    case(rc == 0 and out == ["total: 2 passed, 0 failed, 1 skipped"],
         f"a passing stream: exit 0, only the total ({rc}, {out})")

    bad = os.path.join(d, "e2e.tap")
    with open(bad, "w") as f:
        f.write("1..2\nok 1 - a\nnot ok 2 - the pod stayed Pending\n")
    log = os.path.join(d, "build", "meson-logs")
    os.makedirs(log)
    log = os.path.join(log, "testlog.json")
    with open(log, "w") as f:
        f.write(json.dumps({"name": "test-x", "result": "OK", "stdout": "1..1\nok 1 - x\n"}) + "\n")
        f.write(json.dumps({"name": "test-crash", "result": "FAIL",
                            "stdout": "1..3\nok 1 - y\n"}) + "\n")
        f.write(json.dumps({"name": "test-y", "result": "FAIL",
                            "stdout": "1..2\nnot ok 1 - z wrong\nok 2 - w\n"}) + "\n")
    cwd = os.getcwd()
    os.chdir(d)
    try:
        rc, out = run(["build/meson-logs/testlog.json", bad])
    finally:
        os.chdir(cwd)
    case(rc == 1, f"failures: exit 1 ({rc})")
    case(out[-1] == "total: 4 passed, 3 failed, 0 skipped",
         f"a crash without a failing case counts as one failure ({out[-1] if out else 'no output'})")
    want = ["failed: build: test-crash: ended FAIL without a failing case",
            "failed: build: test-y: not ok 1 - z wrong",
            f"failed: {bad}: not ok 2 - the pod stayed Pending"]
    case(out[:-1] == want, f"each failure is named above the total ({out[:-1]})")
