#!/usr/bin/env python3
"""Check the symbols a static archive needs from Android's system libraries against the API level
at which bionic first exports each (scripts/abi-check.sh builds the archive and says why).

Usage: abi_check.py ARCHIVE FACTS ABI MIN_API

ARCHIVE may also be a linked library (`*.so`, scripts/android-link.sh): then its dynamic
symbols are read, which are exactly what the device's dynamic linker must find.

FACTS: `symbol library arm64 arm x86_64` per line (a level; `base` for the first API level of
that ABI; `-` where that ABI's library does not export it; library `ndk-static` for what the NDK links into the .so itself, such as the
unwinder), `#` comments. Prints every imported symbol with its library and level; exits 1 when
one is unknown, missing on ABI, or above MIN_API without a weak reference.
"""
import re
import subprocess
import sys

ABIS = ("arm64", "arm", "x86_64")


def symbols(archive):
    """(defined names, {undefined name: weak?}) over every member of the archive, from each ELF
    member's own symbol table (`readelf -s`: nm would read the LLVM bitcode some members embed,
    with the LLVM it was built with, and find no symbols where that LLVM is older than rustc's)."""
    shared = archive.endswith(".so")
    # A linked library: its dynamic symbols, whose undefined entries are what the dynamic linker
    # must find on the device (`name@VERSION`: the version is cut off).
    opt = "--dyn-syms" if shared else "-s"
    out = subprocess.run(["readelf", opt, "-W", archive], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), {}
    for line in out.splitlines():
        # "  Num: Value Size Type Bind Vis Ndx Name"
        f = line.split()
        if len(f) < 8 or not f[0].endswith(":") or not f[0][:-1].isdigit():
            continue
        bind, ndx, name = f[4], f[6], f[7].split("@", 1)[0]
        if bind == "LOCAL":
            continue
        if ndx == "UND":
            if bind == "WEAK":
                undefined.setdefault(name, True)
            else:
                undefined[name] = False
        else:
            defined.add(name)
    return defined, {n: w for n, w in undefined.items() if n not in defined}


def facts(path):
    res = {}
    for n, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        if len(line) != 2 + len(ABIS):
            sys.exit(f"{path}:{n}: want `symbol library {' '.join(ABIS)}`, got {' '.join(line)}")
        name, lib, *levels = line
        res[name] = (lib, dict(zip(ABIS, levels)))
    return res


def main():
    archive, facts_path, abi, min_api = sys.argv[1:5]
    min_api = int(min_api)
    known = facts(facts_path)
    _, imports = symbols(archive)
    bad, rows = [], []
    for name in sorted(imports):
        weak = imports[name]
        ref = "weak" if weak else "hard"
        if name not in known:
            rows.append((name, "?", "?", ref, f"UNKNOWN: add its fact to {facts_path}"))
            bad.append(name)
            continue
        lib, levels = known[name]
        level = levels[abi]
        level_n = 0 if level == "base" else None if level == "-" else int(level)
        if lib == "ndk-static":
            rows.append((name, lib, "-", ref, "linked into the .so by the NDK"))
        elif level_n is None:
            rows.append((name, lib, "-", ref, f"NOT EXPORTED on {abi}"))
            bad.append(name)
        elif level_n > min_api and not weak:
            rows.append((name, lib, level, ref, f"HARD IMPORT ABOVE API {min_api}"))
            bad.append(name)
        elif level_n > min_api:
            rows.append((name, lib, level, ref, f"above API {min_api}, weak: checked at run time"))
        else:
            rows.append((name, lib, level, ref, "ok"))
    w = max(len(r[0]) for r in rows) if rows else 10
    print(f"{archive} ({abi}): {len(rows)} symbols from the system, minimum API {min_api}")
    for r in rows:
        print(f"  {r[0]:<{w}} {r[1]:<10} {r[2]:>3} {r[3]:<4} {r[4]}")
    if bad:
        print(f"abi-check: {len(bad)} symbol(s) fail on {abi}: {' '.join(bad)}", file=sys.stderr)
        sys.exit(1)
    print(f"abi-check: {abi}: every symbol is exported at API {min_api} or reached weakly")


if __name__ == "__main__":
    main()
