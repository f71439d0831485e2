#!/usr/bin/env bash
# Benchmarks that prove the speed and memory targets. Each prints a table.
# Usage: scripts/bench.sh strip|analyze|agent|dump|all
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
run() { bash "scripts/bench/$1.sh"; }
case "$what" in
  all) for b in scripts/bench/*.sh; do run "$(basename "$b" .sh)"; done ;;
  *)
    [ -f "scripts/bench/$what.sh" ] || { echo "bench.sh: no benchmark named $what (have: $(ls scripts/bench | sed 's/\.sh//' | tr '\n' ' '))" >&2; exit 2; }
    run "$what" ;;
esac
