#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copies a .proto without its `service { ... }` blocks, for protobuf-c: the messages are all
# the C side needs from protoc-c (plugin/dp-grpc.c carries the RPCs by hand), and protoc-c
# would otherwise emit a C member named `register` for `rpc Register`.
# Usage: strip-services.py IN OUT
import re
import sys

src = open(sys.argv[1], encoding="utf-8").read()
out = []
depth = 0
for line in src.splitlines(keepends=True):
    if depth == 0 and re.match(r"\s*service\s+\w+\s*\{", line):
        depth = line.count("{") - line.count("}")
        continue
    if depth > 0:
        depth += line.count("{") - line.count("}")
        continue
    out.append(line)
open(sys.argv[2], "w", encoding="utf-8").write("".join(out))
