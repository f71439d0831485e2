#!/usr/bin/env bash
# The analyser on a >= 500 MB Java 17 dump, full and stripped, beside hprof-slurp (an outside
# reference that only computes a class histogram). Prints wall time, CPU time and peak RSS, and
# the same for the generated ART-style dump of the strip bench (no target there: the phones' case).
# Targets: our full analysis takes no longer than hprof-slurp; our peak RSS <= 0.5 x input size;
# issue 43's budget table (in memory and with --scratch-dir, the 10 M-object dump too: SCALE).
# Usage: scripts/bench.sh analyze        (RUNS=7 by default; the dump is the strip bench's, made
# once by scripts/bench/lib.sh's ensure_big_dump and cached under target/bench/)
#   PROFILE=ship  measure the command line built with the library's profile (fat LTO, opt-level
#                 "s", hprof at 3: the code an app's forked analysis child runs) instead of
#                 `release` (the command line as scripts/demo.sh builds it); a ship build of the
#                 command line takes a few minutes more.
set -euo pipefail
cd "$(dirname "$0")/../.."
# (Checked before the setup, which may make the bench dump first.)
PROFILE="${PROFILE:-release}"
case "$PROFILE" in
  release | ship) ;;
  *) echo "bench: PROFILE is release or ship, not $PROFILE" >&2; exit 2 ;;
esac
source scripts/lib/setup.sh
source scripts/bench/lib.sh
need_java
command -v /usr/bin/time >/dev/null 2>&1 || apt_install time

BIG=$BIG_DUMP
MINI=target/bench/big.stripped.hprof
SLURP=target/hprof-slurp/bin/hprof-slurp
mkdir -p target/bench
ensure_big_dump
# The command line as scripts/demo.sh builds it (build_release: `-p cli`), then the example on
# its own. In one command with the example, or as `--bin oomguard` from the workspace, the binary
# measured took the features other packages ask for (the analyser's dev-dependencies, the
# agent's): another binary than the one shipped (1.1 MB larger with the example, and 0.2 MiB
# more RssAnon on the bench dump).
cargo build --profile "$PROFILE" --quiet -p cli
cargo build --release --quiet --example id_lookup
BIN=target/$PROFILE/oomguard
echo "bench: oomguard built with profile $PROFILE ($BIN)"
if [ ! -f "$MINI" ] || [ "$MINI" -ot "$BIG" ]; then
  "$BIN" strip "$BIG" -o "$MINI" >/dev/null
fi
ensure_art_dump "$BIN"
ART=$ART_DUMP
if [ ! -x "$SLURP" ]; then
  echo "bench: cargo install --root target/hprof-slurp hprof-slurp"
  cargo install --quiet --root target/hprof-slurp hprof-slurp
fi

# Warm the page cache so every tool reads from memory.
cat "$BIG" "$MINI" "$ART" >/dev/null

RUNS="${RUNS:-7}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

one() { # one NAME CMD... : append "wall cpu rss_kb user sys" to $tmp/NAME (its output, a few KB, to $tmp/NAME.out)
  # Wall time from bash's microsecond clock around the run: GNU time's %e has 10 ms steps,
  # 3 % of a 0.3 s run, as large as the margins being measured. (It includes starting
  # /usr/bin/time, about a millisecond, alike for every tool.) CPU time and peak RSS from time.
  local name=$1; shift
  local t0=$EPOCHREALTIME
  /usr/bin/time -f '%U %S %M' -o "$tmp/t" "$@" >"$tmp/$name.out" 2>&1 || { echo "bench: $name failed" >&2; cat "$tmp/t" >&2; exit 1; }
  local t1=$EPOCHREALTIME
  read -r u s m <"$tmp/t"
  echo "$(echo "${t1/,/.} - ${t0/,/.}" | bc -l) $(echo "$u+$s" | bc -l) $m $u $s" >>"$tmp/$name"
}

# Interleaved runs, so that a busy machine slows every tool alike; the median run is reported.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# The CPU time other guests took from this one (steal) during the runs, from /proc/stat's first
# line: user nice system idle iowait irq softirq steal.
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$5+$6+$7+$8+$9, $9}' /proc/stat; }
read -r ticks_before steal_before < <(cpu_ticks)
for _ in $(seq "$RUNS"); do
  one slurp "$SLURP" "$BIG" -t 10
  one full "$BIN" analyze "$BIG" -o "$tmp/full.json"
  one mini "$BIN" analyze "$MINI" -o "$tmp/mini.json"
  one art "$BIN" analyze "$ART" -o "$tmp/art.json"
done

read -r ticks_after steal_after < <(cpu_ticks)

median() { sort -n "$tmp/$1" | awk -v c="$2" '{a[NR]=$c} END {print a[int((NR+1)/2)]}'; }
row() { # row LABEL NAME INPUT
  local size; size=$(stat -L -c %s "$3")
  printf '%-28s %9.1f %8.3f %8.3f %8.2f %12.1f %10.2f\n' "$1" "$(echo "$size/1048576" | bc -l)" \
    "$(median "$2" 1)" "$(sort -n "$tmp/$2" | head -1 | cut -d' ' -f1)" "$(median "$2" 2)" \
    "$(echo "$(sort -k3 -n "$tmp/$2" | tail -1 | cut -d' ' -f3)/1024" | bc -l)" \
    "$(echo "$(sort -k3 -n "$tmp/$2" | tail -1 | cut -d' ' -f3)*1024/$size" | bc -l)"
}
printf '\n%d interleaved runs each; wall and cpu are those of the median-wall run, peak RSS the largest seen\n' "$RUNS"
printf 'load average (1, 5, 15 min) on %s cores: before %s, after %s\n' "$(nproc)" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'steal time  %.1f %% of this guest'"'"'s CPU time during the runs (time the host gave other guests)\n' \
  "$(echo "100*($steal_after-$steal_before)/($ticks_after-$ticks_before+0.0001)" | bc -l)"
# DAMON, the kernel's access monitor, where this guest runs it: a page it has sampled costs up
# to 130 us at its next touch, so a file or memory left alone for a sample interval reads slower
# the next time (notes/next-43.md, session 38). The tools run back to back, each over a file
# the one before it has just read.
damon=/sys/kernel/mm/damon/admin/kdamonds/0
if [ "$(cat "$damon/state" 2>/dev/null)" = on ]; then
  printf 'DAMON       on: a sample every %s ms, scheme %s (memory idle that long is slower to touch again)\n' \
    "$(( $(cat "$damon/contexts/0/monitoring_attrs/intervals/sample_us" 2>/dev/null || echo 0) / 1000 ))" \
    "$(cat "$damon/contexts/0/schemes/0/action" 2>/dev/null || echo none)"
fi
printf '%-28s %9s %8s %8s %8s %12s %10s\n' "run" "input MB" "wall s" "min s" "cpu s" "peak RSS MB" "RSS/input"
row "hprof-slurp (histogram)" slurp "$BIG"
row "oomguard analyze (full)" full "$BIG"
row "oomguard analyze (stripped)" mini "$MINI"
row "oomguard analyze (ART-style)" art "$ART"
big_size=$(stat -L -c %s "$BIG")
full_rss=$(sort -k3 -n "$tmp/full" | tail -1 | cut -d' ' -f3)
mini_rss=$(sort -k3 -n "$tmp/mini" | tail -1 | cut -d' ' -f3)
echo
printf 'time ratio  ours(full) / hprof-slurp, median wall = %.2f   (target <= 1.00)\n' "$(echo "$(median full 1)/$(median slurp 1)" | bc -l)"
printf 'time ratio  ours(full) / hprof-slurp, cpu         = %.2f\n' "$(echo "$(median full 2)/$(median slurp 2)" | bc -l)"
fastest() { sort -n "$tmp/$1" | head -1 | cut -d' ' -f1; }
printf 'time ratio  ours(full) / hprof-slurp, fastest wall = %.2f   (each tool'"'"'s best run: less of this host'"'"'s noise)\n' "$(echo "$(fastest full)/$(fastest slurp)" | bc -l)"
printf 'cpu split   user / sys of the median-wall runs: hprof-slurp %s / %s s, ours(full) %s / %s s\n' \
  "$(median slurp 4)" "$(median slurp 5)" "$(median full 4)" "$(median full 5)"
# Which pages the runs' large arrays had (the last full run's summary; OOMGUARD_HUGE_PAGES=on|off
# overrides the choice, DEVELOPERS.md "Benchmarks").
pages=$(sed -n 's/^peak memory: .*, large arrays on //p' "$tmp/full.out")
echo "            (sys is mostly page faults; large arrays on ${pages:-unknown pages}: DEVELOPERS.md, \"Benchmarks\")"
printf 'memory      peak RSS(full) / input                = %.2f   (target <= 0.50)\n' "$(echo "$full_rss*1024/$big_size" | bc -l)"
printf 'memory      peak RSS(stripped) / full input       = %.2f\n' "$(echo "$mini_rss*1024/$big_size" | bc -l)"
if cmp -s <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sorted((g["signature"],g["instanceCount"],g["retainedSize"]) for g in r["gcPaths"]))' "$tmp/full.json") \
          <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sorted((g["signature"],g["instanceCount"],g["retainedSize"]) for g in r["gcPaths"]))' "$tmp/mini.json"); then
  echo "findings    full and stripped reports agree"
else
  echo "findings    full and stripped reports DIFFER"
fi
# Where our time goes (the last runs' own phase timings, from their reports): hprof-slurp reads
# the dump and counts; everything after "scan" is graph work it does not do. The ART-style dump
# (no target; the phones' case) has classes among its objects, so it is read in two passes. Its
# references point at objects drawn at random (`hprof::writer::art_dump`), with no locality, so
# its graph phases take longer per reference than the Java 17 dump's (2026-11-24: paths 150 ms
# for 3.0 M references, against 78 ms for 7.2 M).
python3 - "$tmp/full.json" "$tmp/art.json" <<'PY'
import json, sys
for label, path in zip(("phases      last full run", "ART-style   last run"), sys.argv[1:]):
    a = json.load(open(path))["analysis"]
    t = a["timings"]
    print("%s, ms: scan %d (parse, index, references to nodes; %d parts side by side),"
          % (label, t["scanMs"], a["parseParts"]))
    print("            graph %d, shortest paths beside the dominators' search %d, dominators %d, report %d; total %d"
          % (t["graphMs"], t["pathsMs"], t["dominatorsMs"], t["reportMs"], t["totalMs"]))
    print("            graph size: %d objects, %d references" % (a["objects"], a["references"]))
PY
# Issue 43: the analysis in a fixed budget. For the bench dump and the scale dumps (SCALE, "10"
# by default: the 10 M-object dump; SCALE="10 30" adds the 30 M one, 2.1 GB in /dev/shm): wall and
# CPU (median of BUDGET_RUNS interleaved runs) of hprof-slurp, ours in memory and ours with
# --scratch-dir; peak RssAnon (the budget's measure, sampled by scripts/bench/peak_anon.py) and
# peak RSS in total; whether the scratch run passes under `prlimit --data=128MiB`; and the
# analyser's own estimate of its need (`analysis.budget.neededBytes`, the census's: what it
# compares with its budget), in memory and with scratch, beside the peaks. The ART-style dump
# (two passes) is in the table too.
BUDGET_RUNS="${BUDGET_RUNS:-3}"
SCRATCH=target/bench/scratch
mkdir -p "$SCRATCH"
budget_dumps=("$BIG" "$ART")
for m in ${SCALE:-10}; do
  ensure_scale_dump "$m"
  budget_dumps+=("$SCALE_DUMP")
done
peak() { # peak CMD... : prints "anon_mib hwm_mib" of one run
  python3 scripts/bench/peak_anon.py -- "$@" 2>&1 >/dev/null | tail -1 |
    sed -n 's/^peak RssAnon \([0-9.]*\) MiB.*VmHWM(sampled) \([0-9.]*\) MiB.*/\1 \2/p'
}
estimate() { # estimate DUMP [ARGS...]: the analyser's estimate of its need, MiB (the census alone)
  "$BIN" analyze "$1" -o "$tmp/b_est.json" --budget-mb 1 "${@:2}" >/dev/null 2>&1 &&
    python3 -c 'import json, sys; print("%.1f" % (json.load(open(sys.argv[1]))["analysis"]["budget"]["neededBytes"] / 1048576))' "$tmp/b_est.json" ||
    echo "?"
}
echo
printf 'budget      %d interleaved runs each (median wall and cpu); RssAnon and RSS peaks of one more run\n' "$BUDGET_RUNS"
printf '%-24s %8s | %8s %8s | %8s %8s %8s %8s %8s | %8s %8s %8s %8s %8s %6s | %6s %6s\n' \
  "dump" "MB" "slurp s" "RSS MiB" "mem s" "cpu s" "anon" "RSS" "est" "scr s" "cpu s" "anon" "RSS" "est" "128MiB" "mem/sl" "scr/sl"
for d in "${budget_dumps[@]}"; do
  cat "$d" >/dev/null
  rm -f "$tmp"/b_slurp "$tmp"/b_mem "$tmp"/b_scr
  for _ in $(seq "$BUDGET_RUNS"); do
    one b_slurp "$SLURP" "$d" -t 10
    one b_mem "$BIN" analyze "$d" -o "$tmp/b_mem.json"
    one b_scr "$BIN" analyze "$d" -o "$tmp/b_scr.json" --scratch-dir "$SCRATCH"
  done
  read -r mem_anon mem_hwm < <(peak "$BIN" analyze "$d" -o "$tmp/b_mem.json")
  read -r scr_anon scr_hwm < <(peak "$BIN" analyze "$d" -o "$tmp/b_scr.json" --scratch-dir "$SCRATCH")
  if prlimit --data=$((128 << 20)) "$BIN" analyze "$d" -o "$tmp/b_lim.json" --scratch-dir "$SCRATCH" >/dev/null 2>&1 &&
     python3 scripts/bench/same_report.py "$tmp/b_mem.json" "$tmp/b_lim.json" >/dev/null; then
    lim=pass
  else
    lim=FAIL
  fi
  slurp_rss=$(sort -k3 -n "$tmp/b_slurp" | tail -1 | cut -d' ' -f3)
  mem_est=$(estimate "$d")
  scr_est=$(estimate "$d" --scratch-dir "$SCRATCH")
  printf '%-24s %8.0f | %8.3f %8.1f | %8.3f %8.3f %8.1f %8.1f %8s | %8.3f %8.3f %8.1f %8.1f %8s %6s | %6.2f %6.2f\n' \
    "$(basename "$d")" "$(echo "$(stat -L -c %s "$d")/1048576" | bc -l)" \
    "$(median b_slurp 1)" "$(echo "$slurp_rss/1024" | bc -l)" \
    "$(median b_mem 1)" "$(median b_mem 2)" "$mem_anon" "$mem_hwm" "$mem_est" \
    "$(median b_scr 1)" "$(median b_scr 2)" "$scr_anon" "$scr_hwm" "$scr_est" "$lim" \
    "$(echo "$(median b_mem 1)/$(median b_slurp 1)" | bc -l)" "$(echo "$(median b_scr 1)/$(median b_slurp 1)" | bc -l)"
done
echo "            (anon: peak RssAnon MiB, the budget's measure (128 MiB); est: the analyser's estimate of"
echo "            its need in MiB (of RLIMIT_DATA, which counts capacities and stacks beside RssAnon: it"
echo "            must stay above the need); RSS: peak in total, file pages"
echo "            of the scratch arrays included; 128MiB: the scratch run under prlimit --data=128MiB, its"
echo "            report equal to the one in memory; mem/sl, scr/sl: our wall over hprof-slurp's, target <= 1.00)"

# The step from an edge's target id to its node (the one-pass scan's resolve, pass 2's edges):
# the rank map the analyser uses on packed heaps, against the bucket map it falls back to.
target/release/examples/id_lookup 9

# Issue 43's speed target: the full report in no more than hprof-slurp's wall time, on the bench
# dump and the scale dumps, with every core and on one (both tools pinned to CPU 0 by taskset,
# where our analyser then takes one thread). SPEED_RUNS (7 by default) pairs each, the two tools in
# turn; the ratios are medians of the pairs' ratios (ours over hprof-slurp's), so that a machine
# whose load drifts between pairs slows both sides of each pair alike.
SPEED_RUNS="${SPEED_RUNS:-7}"
pair_median() { # pair_median A B COL : median over runs of A's COL / B's COL (same run order)
  paste -d' ' "$tmp/$1" "$tmp/$2" | awk -v c="$3" '{print $c / $(c + 5)}' | sort -g |
    awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
echo
printf 'speed       %d pairs each (ours, hprof-slurp in turn); load average before: %s\n' \
  "$SPEED_RUNS" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-24s | %8s %8s %8s %8s %7s %7s | %8s %8s %7s\n' "dump" "slurp s" "cpu s" "ours s" "cpu s" \
  "wall" "cpu" "sl 1cpu" "ours" "wall"
for d in "${budget_dumps[@]}"; do
  cat "$d" >/dev/null
  rm -f "$tmp"/s_ours "$tmp"/s_slurp "$tmp"/s_ours1 "$tmp"/s_slurp1
  for _ in $(seq "$SPEED_RUNS"); do
    one s_ours "$BIN" analyze "$d" -o "$tmp/s_ours.json"
    one s_slurp "$SLURP" "$d" -t 10
    one s_ours1 taskset -c 0 "$BIN" analyze "$d" -o "$tmp/s_ours1.json"
    one s_slurp1 taskset -c 0 "$SLURP" "$d" -t 10
  done
  printf '%-24s | %8.3f %8.3f %8.3f %8.3f %7.2f %7.2f | %8.3f %8.3f %7.2f\n' "$(basename "$d")" \
    "$(median s_slurp 1)" "$(median s_slurp 2)" "$(median s_ours 1)" "$(median s_ours 2)" \
    "$(pair_median s_ours s_slurp 1)" "$(pair_median s_ours s_slurp 2)" \
    "$(median s_slurp1 1)" "$(median s_ours1 1)" "$(pair_median s_ours1 s_slurp1 1)"
done
echo "            (wall, cpu: ours over hprof-slurp's, medians of the pairs' ratios, target wall <= 1.00;"
echo "            1 core: both pinned to CPU 0; seconds are each tool's median run; load average after:"
echo "            $(cut -d' ' -f1-3 /proc/loadavg))"
