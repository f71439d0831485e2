#!/usr/bin/env python3
"""Compare two analyze reports field for field, the timings aside (analysis.timings).

Usage: same_report.py A.json B.json   exit 0 if equal, 1 (and the first differences) if not.
"""
import json
import sys


def diff(a, b, path, out):
    if len(out) >= 20:
        return
    if type(a) is not type(b):
        out.append(f"{path}: {type(a).__name__} vs {type(b).__name__}")
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'B' if k in b else 'A'}")
            else:
                diff(a[k], b[k], f"{path}/{k}", out)
    elif isinstance(a, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}/{i}", out)
    elif a != b:
        out.append(f"{path}: {a!r} vs {b!r}")


def main():
    a, b = (json.load(open(p)) for p in sys.argv[1:3])
    for r in (a, b):
        r.get("analysis", {}).pop("timings", None)
    out = []
    diff(a, b, "", out)
    for line in out:
        print(line)
    print("reports equal (timings aside)" if not out else f"reports DIFFER ({len(out)}+ differences)")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
