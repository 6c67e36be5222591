#!/usr/bin/env python3
"""SPEC P3: a package can depend on Outbox by URL, so no library product but OutboxC (whose linker flags make the
.so) may carry an unsafe flag in any target it is built from. Reads `swift package dump-package` as a dependent
would see the manifest (OUTBOX_OPTIMIZE_MOCK and OUTBOX_FUZZ unset) and fails naming the target and its flags.
Usage: scripts/manifest-check.py [SWIFT]"""
import json
import os
import subprocess
import sys

swift = sys.argv[1] if len(sys.argv) > 1 else "swift"
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
environment = {k: v for k, v in os.environ.items() if k not in ("OUTBOX_OPTIMIZE_MOCK", "OUTBOX_FUZZ")}
manifest = json.loads(subprocess.run([swift, "package", "dump-package"], cwd=root, env=environment,
                                     capture_output=True, text=True, check=True).stdout)
targets = {t["name"]: t for t in manifest["targets"]}


def local_dependencies(target):
    for dependency in target.get("dependencies", []):
        for kind in ("byName", "target"):
            if kind in dependency and dependency[kind][0] in targets:
                yield dependency[kind][0]


def unsafe(target):
    flags = []
    for setting in target.get("settings", []):
        kind = setting.get("kind", {})
        if "unsafeFlags" in kind:
            flags += kind["unsafeFlags"]["_0"]
    return flags


failures = []
libraries = [p for p in manifest["products"] if "library" in p["type"]]
for product in libraries:
    if product["name"] == "OutboxC":
        continue
    seen, pending = set(), list(product["targets"])
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        if unsafe(targets[name]):
            failures.append(f"library product {product['name']}: target {name} has unsafe flags {unsafe(targets[name])}")
        pending += list(local_dependencies(targets[name]))
if failures:
    print("manifest-check: FAIL\n  " + "\n  ".join(failures))
    sys.exit(1)
names = ", ".join(p["name"] for p in libraries if p["name"] != "OutboxC")
print(f"manifest-check: no unsafe flags in the library products {names} (only OutboxC has them)")
