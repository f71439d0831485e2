#!/usr/bin/env bash
# The analyser on a >= 500 MB Java 17 dump, full and stripped, beside hprof-slurp (an outside
# reference that only computes a class histogram). Prints wall time, CPU time and peak RSS.
# Targets: our full analysis takes no longer than hprof-slurp; our peak RSS <= 0.5 x input size.
# Usage: scripts/bench.sh analyze        (BIG_MB=560 by default; the dump is cached under target/)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/setup.sh
need_java
command -v /usr/bin/time >/dev/null 2>&1 || apt_install time

BIG=target/bench/big.hprof
MINI=target/bench/big.stripped.hprof
BIG_MB="${BIG_MB:-560}"
SLURP=target/hprof-slurp/bin/hprof-slurp
mkdir -p target/bench

if [ ! -f "$BIG" ]; then
  echo "bench: making $BIG (${BIG_MB} MB of live Java 17 heap)"
  javac -d target/bench/classes java/tools/MakeDump.java
  java -Xmx2g -cp target/bench/classes MakeDump target/bench/big.tmp.hprof "$BIG_MB" >/dev/null
  mv target/bench/big.tmp.hprof "$BIG"
fi
cargo build --release --quiet
BIN=target/release/oomguard
if [ ! -f "$MINI" ] || [ "$MINI" -ot "$BIG" ]; then
  "$BIN" strip "$BIG" -o "$MINI" >/dev/null
fi
if [ ! -x "$SLURP" ]; then
  echo "bench: cargo install --root target/hprof-slurp hprof-slurp"
  cargo install --quiet --root target/hprof-slurp hprof-slurp
fi

# Warm the page cache so every tool reads from memory.
cat "$BIG" "$MINI" >/dev/null

measure() { # measure NAME INPUT CMD... -> a table row; sets WALL and RSS_KB
  local name=$1 input=$2; shift 2
  local tf; tf=$(mktemp)
  /usr/bin/time -f '%e %U %S %M' -o "$tf" "$@" >/dev/null 2>&1 || { echo "bench: $name failed" >&2; cat "$tf" >&2; exit 1; }
  read -r WALL USER SYS RSS_KB <"$tf"; rm -f "$tf"
  local size; size=$(stat -c %s "$input")
  printf '%-26s %10.1f %9.2f %9.2f %11.1f %10.2f\n' "$name" "$(echo "$size/1048576" | bc -l)" \
    "$WALL" "$(echo "$USER+$SYS" | bc -l)" "$(echo "$RSS_KB/1024" | bc -l)" \
    "$(echo "$RSS_KB*1024/$size" | bc -l)"
}

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '\n%-26s %10s %9s %9s %11s %10s\n' "run" "input MB" "wall s" "cpu s" "peak RSS MB" "RSS/input"
measure "hprof-slurp (histogram)" "$BIG" "$SLURP" "$BIG" -t 10
slurp_wall=$WALL
measure "oomguard analyze (full)" "$BIG" "$BIN" analyze "$BIG" -o "$tmp/full.json"
full_wall=$WALL; full_rss=$RSS_KB
measure "oomguard analyze (stripped)" "$MINI" "$BIN" analyze "$MINI" -o "$tmp/mini.json"
mini_rss=$RSS_KB
big_size=$(stat -c %s "$BIG")
echo
printf 'time ratio  ours(full) / hprof-slurp  = %.2f   (target <= 1.00)\n' "$(echo "$full_wall/$slurp_wall" | bc -l)"
printf 'memory      peak RSS(full) / input    = %.2f   (target <= 0.50)\n' "$(echo "$full_rss*1024/$big_size" | bc -l)"
printf 'memory      peak RSS(stripped) / full input = %.2f\n' "$(echo "$mini_rss*1024/$big_size" | bc -l)"
if cmp -s <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sorted((g["signature"],g["instanceCount"],g["retainedSize"]) for g in r["gcPaths"]))' "$tmp/full.json") \
          <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sorted((g["signature"],g["instanceCount"],g["retainedSize"]) for g in r["gcPaths"]))' "$tmp/mini.json"); then
  echo "findings    full and stripped reports agree"
else
  echo "findings    full and stripped reports DIFFER"
fi
