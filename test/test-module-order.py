#!/usr/bin/env python3
"""The dependency order is the architecture (STYLE.md): a module's files include headers
of modules before it in the list below and never after, so no two modules import each
other.  Reads every .c and .h of each module, maps each quoted include to the module that
holds the header, and prints TAP: one case per module, naming any include that points
up the list."""
import os
import re
import sys

ROOT = os.environ.get("TOPOFIT_SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Lower index = further down the architecture.  Modules on one line may not include each
# other (they are siblings).
LAYERS = [["common"], ["topology"], ["scoring"], ["kube-client"], ["extender"],
          ["demo", "plugin", "bench"], ["microbench", "cli"]]
RANK = {m: i for i, layer in enumerate(LAYERS) for m in layer}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def files(mod):
    for base, dirs, names in os.walk(os.path.join(ROOT, mod)):
        dirs.sort()
        for n in sorted(names):
            if n.endswith((".c", ".h")):
                yield os.path.join(base, n)


owner = {}
for mod in RANK:
    for p in files(mod):
        if p.endswith(".h"):
            owner.setdefault(os.path.basename(p), mod)
# Allowed exceptions: none.  Generated headers (topofit-version.h, *.pb-c.h) belong to no
# module and are skipped.
n = 0
fails = 0
for mod in RANK:
    bad = []
    for p in files(mod):
        with open(p, encoding="utf-8", errors="replace") as f:
            for inc in INCLUDE.findall(f.read()):
                o = owner.get(os.path.basename(inc))
                if o and o != mod and RANK[o] >= RANK[mod]:
                    bad.append("%s includes %s (%s)" % (os.path.relpath(p, ROOT), inc, o))
    n += 1
    if bad:
        fails += 1
        print("not ok %d - %s includes only modules below it" % (n, mod))
        for b in bad:
            print("# " + b)
    else:
        print("ok %d - %s includes only modules below it" % (n, mod))
print("1..%d" % n)
sys.exit(1 if fails else 0)
