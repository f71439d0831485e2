#!/usr/bin/env bash
# The main job, on a fresh machine: build, make a real heap dump with the machine's Java 17, then
# inspect, strip, restore and re-inspect it, printing sizes.
# Usage: scripts/demo.sh [WORKDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
need_java

work="${1:-target/demo}"
mkdir -p "$work/classes"
echo "== build"
cargo build --release --quiet
bin=target/release/oomguard

echo "== a real heap dump from Java 17"
javac -d "$work/classes" java/tools/MakeDump.java
java -Xmx1g -cp "$work/classes" MakeDump "$work/app.hprof" 64 "DEMO-SECRET-token-0042"

echo "== inspect"
"$bin" inspect "$work/app.hprof"

echo "== strip (arrays)"
"$bin" strip "$work/app.hprof" -o "$work/app.mini.hprof" --level arrays
if grep -q "DEMO-SECRET-token-0042" "$work/app.mini.hprof"; then
  echo "demo: the planted secret survived stripping" >&2; exit 1
fi
echo "   the planted string DEMO-SECRET-token-0042 is in the full dump: $(grep -c DEMO-SECRET-token-0042 "$work/app.hprof" || true) hit(s); in the stripped one: 0"

echo "== restore"
"$bin" restore "$work/app.mini.hprof" -o "$work/app.restored.hprof"

echo "== re-inspect the restored dump"
"$bin" inspect "$work/app.restored.hprof" | sed -n '1,6p'

printf '\n%-28s %14s\n' "file" "bytes"
for f in app.hprof app.mini.hprof app.restored.hprof; do
  printf '%-28s %14d\n' "$f" "$(stat -c %s "$work/$f")"
done
