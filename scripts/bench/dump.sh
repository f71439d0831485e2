#!/usr/bin/env bash
# Heap dump pauses on a real Java 17 VM with a live heap of DUMP_BENCH_MB (default 1024) MB:
# - the plain in-process dump (`jcmd PID GC.heap_dump`): its safepoint time;
# - HotSpotDiagnosticMXBean.dumpHeap without and with oomguard's tee + stripper on libjvm.so
#   (safepoint time of each, median of DUMP_BENCH_ROUNDS rounds): the tee's overhead;
# - a fork dumper on HotSpot: the parent's pause in fork(), and the time `jhsdb jmap
#   --binaryheap` takes to dump the frozen child from outside (not a pause of the app).
# Targets: fork pause >= 100 x shorter than the in-process dump; tee overhead <= 25 %.
# Then the same on Debian's ART 11 (scripts/bench/dump/art.sh: its own table).
# DUMP_BENCH_ONLY=hotspot or art runs one of the two.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${DUMP_BENCH_ONLY:-}" = art ]; then exec bash scripts/bench/dump/art.sh; fi
source scripts/lib/setup.sh
need_java
MB="${DUMP_BENCH_MB:-1024}"
ROUNDS="${DUMP_BENCH_ROUNDS:-3}"
JHSDB_TIMEOUT="${DUMP_BENCH_JHSDB_TIMEOUT:-1800}"
# Extra JVM flags, e.g. DUMP_BENCH_JAVA_OPTS=-XX:+UseTransparentHugePages (fewer page tables
# for fork to copy).
HEAP="-Xms$((MB * 3))m -Xmx$((MB * 3))m ${DUMP_BENCH_JAVA_OPTS:-}"

cargo build --release --lib --bins -q --features oomguard/test-probe
LIB="$PWD/target/release/liboomguard.so"
OOMGUARD="$PWD/target/release/oomguard"
W="$(mktemp -d "${TMPDIR:-/tmp}/oomguard-dump-bench.XXXXXX")"
trap 'rm -rf "$W"' EXIT
javac -d "$W/cls" java/dev/oomguard/testing/DumpProbe.java java/dev/oomguard/testing/DumpBench.java

# Safepoint totals (ms) of the HeapDumper operations in a -Xlog:safepoint file, one a line.
heapdumper_ms() {
  grep 'Safepoint "HeapDumper"' "$1" | sed -n 's/.*Total: \([0-9]*\) ns.*/\1/p' | awk '{ printf "%.1f\n", $1 / 1e6 }'
}
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else print a[int((NR + 1) / 2)] }'; }

# Start DumpBench in MODE with stdin on a fifo; sets PID_JAVA and opens fd 3 to its stdin.
start_bench() {
  local mode="$1" log="$2"
  rm -f "$W/in"; mkfifo "$W/in"
  java $HEAP -Xlog:safepoint:file="$log" -cp "$W/cls" dev.oomguard.testing.DumpBench \
    "$LIB" "$W" "$MB" "$mode" <"$W/in" >"$W/$mode.out" 2>&1 &
  PID_JAVA=$!
  exec 3>"$W/in"
  for _ in $(seq 1200); do
    grep -qE '^(READY|FORK)' "$W/$mode.out" && return 0
    kill -0 "$PID_JAVA" 2>/dev/null || { cat "$W/$mode.out" >&2; exit 1; }
    sleep 0.5
  done
  echo "dump bench: $mode did not get ready" >&2; exit 1
}
stop_bench() { echo done >&3; exec 3>&-; wait "$PID_JAVA"; }

echo "dump bench: live heap ${MB} MB, -Xmx$((MB * 3))m, G1, $(java -version 2>&1 | head -1)" >&2

# 1. jcmd GC.heap_dump (live objects: a full GC, then the dump), in a safepoint throughout.
start_bench wait "$W/sp-jcmd.log"
t0=$(date +%s%N)
jcmd "$PID_JAVA" GC.heap_dump "$W/jcmd.hprof" >/dev/null
jcmd_wall=$(( ($(date +%s%N) - t0) / 1000000 ))
stop_bench
jcmd_ms=$(heapdumper_ms "$W/sp-jcmd.log" | tail -1)
jcmd_bytes=$(stat -c %s "$W/jcmd.hprof"); rm -f "$W/jcmd.hprof"

# 2. dumpHeap plain vs through the tee (alternating, same heap).
java $HEAP -Xlog:safepoint:file="$W/sp-tee.log" -cp "$W/cls" dev.oomguard.testing.DumpBench \
  "$LIB" "$W" "$MB" tee "$ROUNDS" >"$W/tee.out" 2>&1 || { cat "$W/tee.out" >&2; exit 1; }
heapdumper_ms "$W/sp-tee.log" >"$W/tee.ms"
plain_ms=$(awk 'NR % 2 == 1' "$W/tee.ms" | median)
tee_ms=$(awk 'NR % 2 == 0' "$W/tee.ms" | median)
mini_bytes=$(grep '"hooked":true' "$W/reports.jsonl" | tail -1 | sed -n 's/.*"output_bytes":\([0-9]*\).*/\1/p')
full_bytes=$(grep '"hooked":true' "$W/reports.jsonl" | tail -1 | sed -n 's/.*"full_bytes":\([0-9]*\).*/\1/p')
rm -f "$W"/b.hprof* "$W"/b.mini.hprof*

# 3. Fork: the parent's pause, then jhsdb dumps the frozen child from outside
#    (DUMP_BENCH_SKIP_FORK=1 skips it: jhsdb takes minutes for 1 GB).
if [ "${DUMP_BENCH_SKIP_FORK:-0}" = 1 ]; then
  fork_ms=nan; jhsdb_s=skipped; child_bytes=0; child_ok=-
else
start_bench fork "$W/sp-fork.log"
fork_json=$(sed -n 's/^FORK //p' "$W/fork.out")
child=$(echo "$fork_json" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
fork_ms=$(echo "$fork_json" | sed -n 's/.*"fork_us":\([0-9.]*\).*/\1/p' | awk '{ printf "%.1f", $1 / 1000 }')
t0=$(date +%s%N)
if timeout "$JHSDB_TIMEOUT" jhsdb jmap --binaryheap --dumpfile "$W/child.hprof" --pid "$child" >"$W/jhsdb.out" 2>&1; then
  jhsdb_s=$(awk -v ns=$(( $(date +%s%N) - t0 )) 'BEGIN { printf "%.1f", ns / 1e9 }')
  child_bytes=$(stat -c %s "$W/child.hprof")
  if "$OOMGUARD" inspect "$W/child.hprof" >/dev/null 2>&1; then child_ok=parses; else child_ok="does NOT parse"; fi
else
  jhsdb_s="failed/timeout (${JHSDB_TIMEOUT}s)"; child_bytes=0; child_ok="-"
fi
stop_bench
grep -q 'REAPED true' "$W/fork.out" || echo "dump bench: the frozen child was not reaped" >&2
fi

ratio=$(awk -v a="$jcmd_ms" -v b="$fork_ms" 'BEGIN { if (b > 0) printf "%.0f", a / b; else print "nan" }')
overhead=$(awk -v a="$tee_ms" -v b="$plain_ms" 'BEGIN { printf "%.1f", (a - b) * 100 / b }')
printf '\n%-58s %s\n' "measure (live heap ${MB} MB)" "value"
printf '%-58s %s\n' "jcmd GC.heap_dump: safepoint (app paused)" "${jcmd_ms} ms (jcmd wall ${jcmd_wall} ms, $((jcmd_bytes >> 20)) MiB)"
printf '%-58s %s\n' "dumpHeap(live) plain: safepoint, median of $ROUNDS" "${plain_ms} ms"
printf '%-58s %s\n' "dumpHeap(live) + tee + stripper: safepoint, median" "${tee_ms} ms (full $((full_bytes >> 20)) MiB, mini $((mini_bytes >> 20)) MiB)"
printf '%-58s %s\n' "tee overhead (target <= 25 %)" "${overhead} %"
printf '%-58s %s\n' "fork of the JVM: parent's pause" "${fork_ms} ms"
printf '%-58s %s\n' "jcmd pause / fork pause (target >= 100)" "${ratio} x"
printf '%-58s %s\n' "jhsdb jmap --binaryheap of the frozen child (not a pause)" "${jhsdb_s} s, $((child_bytes >> 20)) MiB, ${child_ok}"

[ "${DUMP_BENCH_ONLY:-}" = hotspot ] || bash scripts/bench/dump/art.sh
