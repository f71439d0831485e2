#!/usr/bin/env python3
"""DESIGN's sizes: files over ~1,000 lines of code, functions over ~150 lines.

Usage: scripts/sizes.py [--check] [PATH...]   (default: crates/)
Lines of code are lines that are neither blank nor comments (// or //! or ///). A function is
measured from its `fn` line to its closing brace (found by brace depth, strings and char
literals skipped roughly). With --check, exits 1 if anything is over and not listed in
scripts/sizes-allowed.txt (one `path` or `path::fn` per line, with the reason after `#`).
"""
import os, re, sys

FILE_MAX, FN_MAX = 1000, 150

def code_lines(text):
    return sum(1 for l in text.split('\n') if l.strip() and not l.strip().startswith('//'))

FN_RE = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"C"\s+)?fn\s+([A-Za-z0-9_]+)')

def strip_line(l):
    # remove strings, chars and line comments, roughly
    l = re.sub(r'"([^"\\]|\\.)*"', '""', l)
    l = re.sub(r"'([^'\\]|\\.)'", "' '", l)
    i = l.find('//')
    return l if i < 0 else l[:i]

def functions(text):
    lines = text.split('\n')
    out = []
    for i, l in enumerate(lines):
        m = FN_RE.match(l)
        if not m:
            continue
        depth, started = 0, False
        for j in range(i, len(lines)):
            s = strip_line(lines[j])
            if not started and ';' in s and '{' not in s:
                break  # a declaration without a body
            depth += s.count('{') - s.count('}')
            if '{' in s:
                started = True
            if started and depth <= 0:
                out.append((m.group(7), i + 1, j - i + 1))
                break
    return out

def main():
    args = [a for a in sys.argv[1:] if a != '--check']
    check = '--check' in sys.argv[1:]
    roots = args or ['crates']
    allowed = set()
    if os.path.exists('scripts/sizes-allowed.txt'):
        for l in open('scripts/sizes-allowed.txt'):
            l = l.split('#')[0].strip()
            if l:
                allowed.add(l)
    over = []
    for root in roots:
        for d, _, fs in os.walk(root):
            if '/target' in d:
                continue
            for f in sorted(fs):
                if not f.endswith('.rs'):
                    continue
                p = os.path.join(d, f)
                t = open(p, encoding='utf-8', errors='replace').read()
                n = code_lines(t)
                if n > FILE_MAX:
                    over.append((p, f'{p}: {n} lines of code'))
                for name, at, length in functions(t):
                    if length > FN_MAX:
                        over.append((f'{p}::{name}', f'{p}:{at}: fn {name}: {length} lines'))
    bad = 0
    for key, msg in over:
        ok = key in allowed
        bad += not ok
        print(msg + ('  (allowed: scripts/sizes-allowed.txt)' if ok else ''))
    if check and bad:
        print(f'{bad} over DESIGN\'s sizes and not allowed', file=sys.stderr)
        return 1
    return 0

sys.exit(main())
