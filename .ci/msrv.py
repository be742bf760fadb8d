#!/usr/bin/env python3
"""Checks the workspace's declared minimum Rust version (MSRV) against its dependencies.

Every workspace member must declare the same `rust-version` (the one of `[workspace.package]`),
and no package of the resolved dependency graph (`cargo metadata`: normal, build and dev
dependencies of every member, for every platform, as Cargo.lock pins them) may declare a
higher one: `cargo test --workspace` would then need a newer compiler than the README says.

Usage: .ci/msrv.py [--metadata FILE]   (FILE: saved `cargo metadata --format-version 1` output,
for testing; by default cargo is run). Exit status 0 when consistent, 1 otherwise.
Python 3 standard library only.
"""

import json
import subprocess
import sys


def version(text):
    """'1.91' or '1.91.0' as a comparable tuple (missing parts are 0)."""
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def check(meta):
    """Returns (declared, problems, highest) for parsed cargo metadata."""
    members = set(meta["workspace_members"])
    problems = []
    declared = set()
    for p in meta["packages"]:
        if p["id"] in members:
            if not p.get("rust_version"):
                problems.append(f"workspace member {p['name']} declares no rust-version")
            else:
                declared.add(p["rust_version"])
    if len(declared) > 1:
        problems.append(f"workspace members declare different rust-versions: {sorted(declared)}")
    if not declared:
        return None, problems or ["no rust-version declared"], None
    msrv = max(declared, key=version)
    highest = None
    for p in meta["packages"]:
        if p["id"] in members or not p.get("rust_version"):
            continue
        rv = p["rust_version"]
        if highest is None or version(rv) > version(highest[0]):
            highest = (rv, f"{p['name']} {p['version']}")
        if version(rv) > version(msrv):
            problems.append(
                f"{p['name']} {p['version']} needs Rust {rv}, above the declared {msrv}"
            )
    return msrv, problems, highest


def main(argv):
    if len(argv) == 3 and argv[1] == "--metadata":
        with open(argv[2], encoding="utf-8") as f:
            meta = json.load(f)
    elif len(argv) == 1:
        out = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked"],
            check=True,
            stdout=subprocess.PIPE,
        ).stdout
        meta = json.loads(out)
    else:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    msrv, problems, highest = check(meta)
    for p in problems:
        print(f"msrv: {p}")
    if problems:
        print(
            "msrv: raise rust-version in [workspace.package] (Cargo.toml) and the README, "
            "or pin the dependency to a version that supports the declared one"
        )
        return 1
    if highest:
        print(f"msrv: declared {msrv}; highest dependency rust-version {highest[0]} ({highest[1]})")
    else:
        print(f"msrv: declared {msrv}; no dependency declares a rust-version")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
