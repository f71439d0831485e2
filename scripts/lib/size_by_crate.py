#!/usr/bin/env python3
"""Size of a shared library by crate, from the symbol sizes of its unstripped build.

Usage: size_by_crate.py UNSTRIPPED.so STRIPPED.so [TOP]

Each defined symbol with a size (`nm -S`, demangled) is given to a crate: the first path segment
of its name (`serde_json::de::...` -> serde_json); for `<T as Trait>::f`, the crate of T, else of
Trait when T has no path (`<&T as core::fmt::Debug>::fmt` -> core); C symbols by known prefix
(ring's `ring_core_*`, our `Java_*` / `JNI_OnLoad`), rustc's unnamed constants (`anon.*`) on a
row of their own, any other C symbol on the C/asm row. Generic code is counted
where it is defined, not where it is instantiated (as cargo-bloat does): `core`/`alloc`/`std`
include their generics instantiated for our types. What no symbol covers (exception tables,
anonymous constants, the dynamic linking tables) is the "not in any symbol" row, from the
stripped file's allocated sections.
"""
import re
import subprocess
import sys
from collections import defaultdict

OURS = {"oomguard", "hprof", "analyze", "sys"}
# How the issue groups crates; anything not listed is its own row.
GROUPS = {
    "core": "core/alloc/std", "alloc": "core/alloc/std", "std": "core/alloc/std",
    "hashbrown": "core/alloc/std", "std_detect": "core/alloc/std", "rustc_demangle": "core/alloc/std",
    "gimli": "core/alloc/std (backtrace)", "addr2line": "core/alloc/std (backtrace)",
    "miniz_oxide": "miniz_oxide", "object": "core/alloc/std (backtrace)",
    "panic_unwind": "core/alloc/std", "unwind": "core/alloc/std",
}
SYMBOL = re.compile(r"^([0-9a-f]+) ([0-9a-f]+) (\S) (.*)$")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def path_crate(s):
    """The crate of a path that starts s, or None if s does not start with `ident::`."""
    s = s.lstrip()
    for prefix in ("&", "mut ", "*const ", "*mut ", "dyn ", "[", "(", "impl "):
        while s.startswith(prefix):
            s = s[len(prefix):].lstrip()
    if s.startswith("<"):
        return crate_of(s)
    m = IDENT.match(s)
    if m and s[m.end():].startswith("::"):
        return m.group(0)
    return None


def crate_of(name):
    if name.startswith("<"):
        inner = name[1:]
        c = path_crate(inner)
        if c:
            return c
        depth, i = 0, 0
        while i < len(inner):  # the trait after the top-level " as "
            ch = inner[i]
            if ch in "<([":
                depth += 1
            elif ch in ">)]":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and inner.startswith(" as ", i):
                return path_crate(inner[i + 4:]) or "[generic]"
            i += 1
        return "[generic]"
    c = path_crate(name)
    if c:
        return c
    if name.startswith("ring_core_") or name.startswith("GFp_"):
        return "ring"
    if name.startswith("Java_") or name == "JNI_OnLoad":
        return "oomguard"
    if name.startswith("__rust") or name.startswith("rust_"):
        return "core/alloc/std"
    if name.startswith("anon.") or name.startswith(".L"):
        return "[anonymous constants, any crate]"
    # In this library: ring's C and assembly (static functions and tables keep no prefix:
    # ecp_nistz256_precomputed, fe_loose_invert, ...) and compiler-builtins (__udivti3).
    return "[C/asm, mostly ring's]"


def sections(path):
    out = subprocess.run(["readelf", "-SW", path], check=True, capture_output=True, text=True).stdout
    res = []
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\S+\s+(\S*)", line)
        if m and "A" in m.group(3):
            res.append((m.group(1), int(m.group(2), 16)))
    return res


def main():
    unstripped, stripped = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    nm = subprocess.run(["nm", "-S", "--defined-only", "-C", unstripped], check=True,
                        capture_output=True, text=True).stdout
    code, data = defaultdict(int), defaultdict(int)
    seen = set()
    for line in nm.splitlines():
        m = SYMBOL.match(line)
        if not m:  # no size
            continue
        addr, size, kind, name = m.groups()
        if (addr, kind) in seen:  # aliases of one address count once
            continue
        seen.add((addr, kind))
        size = int(size, 16)
        crate = crate_of(name)
        crate = GROUPS.get(crate, crate)
        (code if kind in "Tt" else data)[crate] += size
    crates = set(code) | set(data)
    total_sym = sum(code.values()) + sum(data.values())
    alloc = sum(s for _, s in sections(stripped))
    rows = sorted(crates, key=lambda c: -(code[c] + data[c]))
    print(f"{'crate':<34} {'code':>10} {'data':>10} {'total':>10} {'share':>6}")
    other_c = other_d = 0
    for i, c in enumerate(rows):
        if i >= top:
            other_c += code[c]
            other_d += data[c]
            continue
        label = c + (" (ours)" if c in OURS else "")
        t = code[c] + data[c]
        print(f"{label:<34} {code[c]:>10,} {data[c]:>10,} {t:>10,} {100 * t / alloc:>5.1f}%")
    if other_c or other_d:
        label = f"{len(rows) - top} more crates"
        print(f"{label:<34} {other_c:>10,} {other_d:>10,} {other_c + other_d:>10,} {100 * (other_c + other_d) / alloc:>5.1f}%")
    ours = sum(code[c] + data[c] for c in OURS)
    print(f"{'not in any symbol':<34} {'':>10} {'':>10} {alloc - total_sym:>10,} {100 * (alloc - total_sym) / alloc:>5.1f}%")
    print(f"{'our crates together':<34} {'':>10} {'':>10} {ours:>10,} {100 * ours / alloc:>5.1f}%")
    print()
    print("allocated sections of the stripped file:")
    for name, size in sorted(sections(stripped), key=lambda x: -x[1]):
        if size >= 1024:
            print(f"  {name:<20} {size:>10,}")


if __name__ == "__main__":
    main()
