#!/usr/bin/env python3
"""Run a command and sample its memory from /proc/PID/status every millisecond.

Prints the peak RssAnon (the process's own anonymous pages: what the analysis budget counts),
the peak RssFile + RssShmem beside it, and VmHWM (the kernel's own peak of the total RSS, exact).
RssAnon has no peak counter in the kernel, so it is sampled: a peak shorter than the sampling
interval can be missed (the analyser's phases last tens of milliseconds or more).

Usage: peak_anon.py [--timeline FILE] -- CMD ARGS...
  --timeline FILE   also write "ms anon_kb file_kb shmem_kb" per sample
"""
import os
import subprocess
import sys
import time


def status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("RssAnon", "RssFile", "RssShmem", "VmHWM"):
                    out[k] = int(v.split()[0])
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return None
    return out


def main():
    args = sys.argv[1:]
    timeline = None
    if args[:1] == ["--timeline"]:
        timeline, args = args[1], args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    t0 = time.monotonic()
    p = subprocess.Popen(args)
    peak = {"RssAnon": 0, "RssFile": 0, "RssShmem": 0, "VmHWM": 0}
    rows = []
    while p.poll() is None:
        s = status(p.pid)
        if s and s.get("RssAnon") is not None:
            for k in peak:
                peak[k] = max(peak[k], s.get(k, 0))
            if timeline:
                rows.append((int((time.monotonic() - t0) * 1000), s["RssAnon"], s.get("RssFile", 0), s.get("RssShmem", 0)))
        time.sleep(0.001)
    rc = p.wait()
    if timeline:
        with open(timeline, "w") as f:
            for r in rows:
                f.write("%d %d %d %d\n" % r)
    print("peak RssAnon %.1f MiB, peak RssFile %.1f MiB, peak RssShmem %.1f MiB, VmHWM(sampled) %.1f MiB, exit %d"
          % (peak["RssAnon"] / 1024, peak["RssFile"] / 1024, peak["RssShmem"] / 1024, peak["VmHWM"] / 1024, rc),
          file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
