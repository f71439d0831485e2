#!/usr/bin/env bash
# Strip benchmark: stripped size / original per level, and strip throughput next to
# `cat FILE >/dev/null` on the same file in the same run.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/setup.sh
source scripts/bench/lib.sh
need_java
command -v bc >/dev/null || apt_install bc
command -v hyperfine >/dev/null || apt_install hyperfine
cargo build --release --quiet
bin=target/release/oomguard
ensure_big_dump

ensure_art_dump "$bin"
art=$ART_DUMP

files=("$BIG_DUMP" "$art" "$SHARED_DIR/fixtures/hprof/android/leak_service_binder.hprof" "$SHARED_DIR/fixtures/hprof/android/leak_service_binder_ignored.hprof")
# Two sinks for the stripped output:
# - /dev/null, the sink `cat FILE >/dev/null` writes to: the stripper's own work, like for like;
# - tmpfs, which adds the kernel's cost of storing the output (no disk involved). That cost alone
#   is shown as "OUT>shm": `cp OUT` to tmpfs of the stripped file, a floor no stripper beats.
out=/dev/shm/oomguard-bench-strip.$$.hprof
copy=/dev/shm/oomguard-bench-strip-copy.$$.hprof
empty=/dev/shm/oomguard-bench-empty.$$.hprof
trap 'rm -f "$out" "$copy" "$empty"' EXIT

# timed RUNS PREPARE CMD...: the shortest wall time (s) of RUNS runs of CMD, after 2 warm-up runs,
# each started by hyperfine without a shell (-N: no fork of `date` or of a shell is counted,
# which on a few-MB file is a large part of cat's own time); PREPARE (may be empty) runs before
# each run, untimed. CMD's standard output goes to /dev/null, as `cat FILE >/dev/null`.
timed() {
  local n=$1 prep=$2; shift 2
  local j; j=$(mktemp)
  local p=(); [ -n "$prep" ] && p=(--prepare "$prep")
  hyperfine -N --warmup 2 --runs "$n" "${p[@]}" --export-json "$j" "$*" >/dev/null 2>&1 \
    || { echo "bench: hyperfine failed on: $*" >&2; rm -f "$j"; exit 1; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["min"])' "$j"
  rm -f "$j"
}
# best_strip OUT ARGS...: the best wall time of $runs strips to OUT (a regular OUT is removed
# before each run, so that freeing the previous output's pages is not counted).
best_strip() {
  local o=$1; shift
  local prep=""; [ "$o" != /dev/null ] && prep="rm -f $o"
  timed "$runs" "$prep" "$bin" strip "$@" -o "$o"
}


# floor FILE: the share of FILE that level arrays must keep (everything but primitive array
# contents), from `oomguard inspect --json`.
floor() {
  "$bin" inspect "$1" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.1f%%" % (100.0 * (d["file_bytes"] - d["bytes"]["primitive_array_contents"]) / d["file_bytes"]))'
}

printf '\n%-34s %7s %6s %8s %6s %6s | %9s %9s %9s %9s | %6s %6s\n' file "MB" level "out MB" "out %" "floor" \
  "cat MB/s" "->null" "->shm" "OUT>shm" "null/" "shm/"
printf '%-34s %7s %6s %8s %6s %6s | %9s %9s %9s %9s | %6s %6s\n' "" "" "" "" "" "" "" "MB/s" "MB/s" "MB/s" "cat" "cat"
for f in "${files[@]}"; do
  size=$(stat -c %s "$f")
  # Best of 5 on the large dumps (each run reads hundreds of MB), of 40 on the few-MB ones.
  runs=5; [ "$size" -lt $((64 << 20)) ] && runs=40
  mbs=$(echo "$size / 1048576" | bc -l)
  cat "$f" >/dev/null  # warm the page cache for both
  tcat=$(timed $runs "" cat "$f")
  fl=$(floor "$f")
  for level in none arrays app; do
    tnull=$(best_strip /dev/null "$f" --level "$level")
    tshm=$(best_strip "$out" "$f" --level "$level")
    osize=$(stat -c %s "$out")
    tstore=$(timed $runs "rm -f $copy" cp "$out" "$copy")
    printf '%-34s %7.1f %6s %8.1f %5.1f%% %6s | %9.0f %9.0f %9.0f %9.0f | %6.2f %6.2f\n' "$(basename "$f")" "$mbs" "$level" \
      "$(echo "$osize / 1048576" | bc -l)" "$(echo "100 * $osize / $size" | bc -l)" "$([ "$level" = arrays ] && echo "$fl" || echo "")" \
      "$(echo "$mbs / $tcat" | bc -l)" "$(echo "$mbs / $tnull" | bc -l)" "$(echo "$mbs / $tshm" | bc -l)" \
      "$(echo "$mbs / $tstore" | bc -l)" "$(echo "$tcat / $tnull" | bc -l)" "$(echo "$tcat / $tshm" | bc -l)"
  done
done
# The cost of starting the process, which the small files' rows are mostly made of: the same
# commands on a 31-byte dump that holds nothing but the file header.
printf 'JAVA PROFILE 1.0.3\0\0\0\0\4\0\0\0\0\0\0\0\0' >"$empty"
runs=40
tcat0=$(timed $runs "" cat "$empty")
tnull0=$(best_strip /dev/null "$empty")
printf '\nprocess start (a 31-byte, header-only dump; best of %d): cat %.2f ms, oomguard strip %.2f ms.\n' \
  "$runs" "$(echo "1000 * $tcat0" | bc -l)" "$(echo "1000 * $tnull0" | bc -l)"
echo "  On the few-MB Android fixtures this is most of cat's time, so their ratios are bound by it."
# The stripper's own time on those fixtures, in one process (no start, mapping or storing).
cargo build --release --quiet --example strip_repeat
for f in "${files[@]:2}"; do
  echo "in process, $(basename "$f") to a counting sink, 500 strips after 20 untimed (examples/strip_repeat):"
  target/release/examples/strip_repeat "$f" 500 | sed 's/^/  /'
done
echo
echo "floor: what level arrays must keep of the file (all but primitive array contents): the"
echo "  smallest output any stripper that keeps every object, reference and class can write."
echo "MB/s: input size over the best wall time of 5 runs (40 on the few-MB files; hyperfine -N, after"
echo "  2 warm-up runs), the input in the page cache."
echo "  cat: cat FILE >/dev/null;  ->null / ->shm: oomguard strip FILE -o /dev/null / -o tmpfs;"
echo "  OUT>shm: only storing that stripped output in tmpfs (cp OUT to tmpfs), input MB over its time."
echo "Target: strip at least half as fast as cat (null/cat >= 0.5, like for like; shm/cat shows the"
echo "cost of storing the output on top). load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores."
