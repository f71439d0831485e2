#!/usr/bin/env bash
# The agent's cost inside a real JVM (Java 17, -Xmx256m, release liboomguard.so):
#   1. one full sample (JNI heap + /proc/self/fd count + status + limits) with 1,000 open fds,
#      timed by the agent around every Sampler::take (status.json "sample_cost");
#   2. the `oomguard` thread's CPU time (/proc/PID/task/TID/schedstat, ns) over a polling period
#      at the default 5 s (BENCH_AGENT_SECONDS, default 60; scaled to 10 min in the table);
#   3. the RSS the agent adds: VmRSS after start + 1 s minus after loadLibrary, minus the same
#      difference in a control run that loads the library but never starts the agent;
#   4. the time `OomGuard.start` takes on the caller's thread.
#   5. the flight recorder's store per poll (examples/flight_cost.rs), against the same sample
#      without it, interleaved in one process; and the memory cgroup's reads in a sample, against
#      a sampler that reads none.
# Targets: sample < 50 µs, recorder < 2 µs added, CPU < 0.01 % of one core, RSS < 2 MB.
# Row 1 is repeated with OOMGUARD_HEAP_VIA_JNI=1 (heap through JNI CallLongMethodA instead of
# HotSpot's JVM_* entry points), to show what that path costs on the same build.
set -euo pipefail
cd "$(dirname "$0")/../.."
run_s="${BENCH_AGENT_SECONDS:-60}"
cargo build --release -p oomguard --lib -q
lib="$PWD/target/release"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
javac -d "$tmp/c" java/dev/oomguard/*.java java/testapps/LeakyApp.java
jrun() { prlimit --nofile=4096:4096 java -XX:+UseG1GC -Xmx256m -Djava.library.path="$lib" -cp "$tmp/c" LeakyApp "$@"; }
status_of() { sed -n '/^STATUS-BEGIN$/,/^STATUS-END$/p' "$1" | sed '1d;$d'; }
field() { grep -o "$1=[0-9-]*" "$2" | head -1 | cut -d= -f2; }

# 1. Sample cost: poll every 100 ms for 20 s with 1,000 fds open (~200 samples, warm caches),
#    then at 5 s (cold caches) during the CPU run below.
echo '{"poll_interval_ms":100,"fd":{"max":100000}}' > "$tmp/fast.json"
jrun bench "$tmp/d1" "$tmp/fast.json" - 20 > "$tmp/fast.out" 2> "$tmp/fast.err"
status_of "$tmp/fast.out" > "$tmp/fast.json.out"
OOMGUARD_HEAP_VIA_JNI=1 jrun bench "$tmp/d0" "$tmp/fast.json" - 20 > "$tmp/jni.out" 2> "$tmp/jni.err"
status_of "$tmp/jni.out" > "$tmp/jni.json.out"
load="$(cut -d' ' -f1-3 /proc/loadavg)"

# 2. CPU of the oomguard thread at the default 5 s interval.
echo '{"fd":{"max":100000}}' > "$tmp/slow.json"
jrun bench "$tmp/d2" "$tmp/slow.json" - "$((run_s + 5))" > "$tmp/slow.out" 2> "$tmp/slow.err" &
jpid=$!
for _ in $(seq 200); do grep -q bench-ready "$tmp/slow.out" 2>/dev/null && break; sleep 0.1; done
pid="$(pgrep -P "$jpid" java || echo "$jpid")"
tid=""
for t in /proc/"$pid"/task/*; do [ "$(cat "$t/comm" 2>/dev/null)" = oomguard ] && tid="$(basename "$t")"; done
[ -n "$tid" ] || { echo "bench agent: no thread named oomguard in pid $pid" >&2; exit 1; }
cpu0="$(awk '{print $1}' /proc/"$pid"/task/"$tid"/schedstat)"
t0="$(date +%s%N)"
sleep "$run_s"
cpu1="$(awk '{print $1}' /proc/"$pid"/task/"$tid"/schedstat 2>/dev/null || echo "$cpu0")"
t1="$(date +%s%N)"
wait "$jpid"
status_of "$tmp/slow.out" > "$tmp/slow.json.out"

# Calibration: the same sample outside the VM (no JNI), 100 ms apart, in a plain process.
cargo run -q --release --example sample_cost -- 1000 cold > "$tmp/cold.out"

# The flight recorder's store per poll, against the same sample without it (interleaved).
cargo run -q --release --example flight_cost > "$tmp/flight.out"

# 3. RSS: agent run above vs a control run without start.
LEAKY_NO_AGENT=1 jrun bench "$tmp/d3" "$tmp/slow.json" - 1 > "$tmp/ctl.out" 2> "$tmp/ctl.err"

python3 - "$tmp" "$cpu0" "$cpu1" "$t0" "$t1" "$run_s" "$load" <<'PY'
import json, re, sys
tmp, cpu0, cpu1, t0, t1, run_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
load = sys.argv[7]
def kv(path):
    return {k: int(v) for k, v in re.findall(r"^([a-z -]+(?:-[a-z0-9]+)*)=(-?\d+)$", open(path).read(), re.M)}
def rss(path):
    return {k: int(v) for k, v in re.findall(r"rss-kb ([a-z0-9-]+)=(\d+)", open(path).read())}
fast = json.load(open(f"{tmp}/fast.json.out"))
slow = json.load(open(f"{tmp}/slow.json.out"))
jni = json.load(open(f"{tmp}/jni.json.out"))
fc, sc, jc = fast["sample_cost"], slow["sample_cost"], jni["sample_cost"]
us = lambda c, k: c[k] / max(c["samples"], 1) / 1000
def cost_row(name, c, extra=""):
    return (name, f"{us(c, 'total_ns'):.1f} µs",
            f"{c['samples']} samples, median {c['median_ns']/1000:.1f}, min {c['min_ns']/1000:.1f}, max {c['max_ns']/1000:.1f} µs; "
            f"heap {us(c, 'heap_total_ns'):.1f} + fds {us(c, 'fds_total_ns'):.1f} + threads/memory {us(c, 'proc_total_ns'):.1f} µs{extra}", "< 50 µs")
fds = fast["last_sample"]["fds"]
wall = (t1 - t0) / 1e9
cpu = (cpu1 - cpu0) / 1e9
pct = 100.0 * cpu / wall
ra, rc = rss(f"{tmp}/slow.out"), rss(f"{tmp}/ctl.out")
lib_kb = ra["after-load"] - ra["before-load"]
agent_kb = (ra["started-1s"] - ra["after-load"]) - (rc["started-1s"] - rc["after-load"])
start_ns = int(re.search(r"start rc=0 ns=(\d+)", open(f"{tmp}/slow.out").read()).group(1))
cold = dict(re.findall(r"(min|median)=([0-9.]+)", open(f"{tmp}/cold.out").read()))
fl = kv(f"{tmp}/flight.out")
rows = [
    cost_row("one full sample, 100 ms polling (mean)", fc, f"; {fds} open fds; load avg {load}"),
    cost_row("one full sample, 5 s polling (mean)", sc),
    cost_row("  same, heap via JNI CallLongMethodA (mean)", jc, " (OOMGUARD_HEAP_VIA_JNI=1)"),
    ("  same sample without JNI, plain process", f"{cold['median']} µs", f"median of 40 samples 100 ms apart (min {cold['min']} µs): the machine's cold /proc cost", ""),
    ("flight recorder: store per poll", f"{fl['record-alone-ns']} ns",
     f"median of 4000, interleaved: sample {fl['sample-alone-ns']} ns alone, {fl['sample-and-record-ns']} ns with the store (no JNI)", "< 2000 ns"),
    ("memory cgroup reads per sample", f"{fl['sample-alone-ns'] - fl['sample-no-cgroup-ns']} ns",
     f"median sample {fl['sample-alone-ns']} ns reading it, {fl['sample-no-cgroup-ns']} ns without (interleaved); "
     + re.search(r"^cgroup (.*)$", open(f"{tmp}/flight.out").read(), re.M).group(1), "(info)"),
    ("oomguard thread CPU at 5 s polling", f"{pct:.5f} % of a core", f"{cpu*1e6:.0f} µs CPU in {wall:.1f} s wall; 10 min extrapolated: {cpu*600/wall*1e3:.2f} ms", "< 0.01 %"),
    ("RSS added by the running agent", f"{agent_kb} kB", f"agent run {ra['started-1s']-ra['after-load']} kB minus control {rc['started-1s']-rc['after-load']} kB (JVM drift)", "< 2048 kB"),
    ("RSS of loading liboomguard.so (release)", f"{lib_kb} kB", "file-backed pages mapped by System.loadLibrary", "(info)"),
    ("OomGuard.start on the caller's thread", f"{start_ns/1000:.0f} µs", "library already loaded; spawns the thread and returns", "< 1000 µs"),
]
w = [max(len(r[i]) for r in rows + [("what", "measured", "how", "target")]) for i in range(4)]
line = lambda r: "| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |"
print(line(("what", "measured", "how", "target")))
print("|" + "|".join("-" * (x + 2) for x in w) + "|")
for r in rows:
    print(line(r))
PY
