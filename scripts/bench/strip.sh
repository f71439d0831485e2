#!/usr/bin/env bash
# Strip benchmark: stripped size / original per level, and strip throughput next to
# `cat FILE >/dev/null` on the same file in the same run.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/setup.sh
source scripts/bench/lib.sh
need_java
command -v bc >/dev/null || apt_install bc
cargo build --release --quiet
bin=target/release/oomguard
ensure_big_dump

# An ART-style dump of KOOM's published size (154 MB), with the generator's default composition:
# a third of the objects in the image and zygote heaps, primitive arrays of 256 bytes on average.
art=target/bench/art-150mb.hprof
[ -f "$art" ] || "$bin" testdata-art "$art" --image 270000 --zygote 130000 --app 1000000 >/dev/null

files=("$BIG_DUMP" "$art" "$SHARED_DIR/fixtures/hprof/android/leak_service_binder.hprof" "$SHARED_DIR/fixtures/hprof/android/leak_service_binder_ignored.hprof")
# Output goes to tmpfs, so the figure is the stripper's work, not the disk's (cat writes nothing).
out=/dev/shm/oomguard-bench-strip.$$.hprof
runs=3

printf '\n%-34s %9s %7s %10s %7s %10s %10s %9s\n' file "MB" level "out MB" "out %" "strip MB/s" "cat MB/s" "strip/cat"
for f in "${files[@]}"; do
  size=$(stat -c %s "$f")
  mbs=$(echo "$size / 1048576" | bc -l)
  cat "$f" >/dev/null  # warm the page cache for both
  tcat=$(best_of $runs cat "$f")
  for level in none arrays app; do
    tstrip=$(best_of $runs "$bin" strip "$f" -o "$out" --level "$level")
    osize=$(stat -c %s "$out")
    printf '%-34s %9.1f %7s %10.1f %6.1f%% %10.0f %10.0f %9.2f\n' "$(basename "$f")" "$mbs" "$level" \
      "$(echo "$osize / 1048576" | bc -l)" "$(echo "100 * $osize / $size" | bc -l)" \
      "$(echo "$mbs / $tstrip" | bc -l)" "$(echo "$mbs / $tcat" | bc -l)" "$(echo "$tcat / $tstrip" | bc -l)"
  done
done
rm -f "$out"
echo
echo "strip MB/s and cat MB/s: input size over the best wall time of $runs runs, the file in the page cache;"
echo "strip writes its output to tmpfs ($out); target: strip/cat >= 0.5."
