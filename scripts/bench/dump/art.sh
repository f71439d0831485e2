#!/usr/bin/env bash
# The ART table of `scripts/bench.sh dump` (called by scripts/bench/dump.sh; not a bench of its
# own, so `bench.sh all` does not run it twice). On Debian's ART 11 (the test runtime of
# tests/art, -Xint and image-less), a live heap of DUMP_BENCH_ART_MB (default 320) MiB in a
# -Xmx of DUMP_BENCH_ART_XMX_MB (default 1024) MiB, DUMP_BENCH_ART_SMALL_PCT (default 50) percent
# of it in small objects (~100 B each), the rest in 1 MiB int[]; DUMP_BENCH_ART_ROUNDS (default 7):
# - in-process art::hprof::DumpHeap (VMDebug.dumpHprofData): the app's pause, plain and with
#   oomguard's tee + stripper hooked onto libart's writes (ring thread / inside the hook);
# - the ART fork dumper: the parent's pause (suspend -> fork -> resume);
# - oomguard strip --level arrays / app of the fork dump against its floor (arrays must equal
#   it to the byte, and the tee's mini file must equal it: the bench fails otherwise).
# DUMP_BENCH_ART_CHURN (default "0 1"): the table once per value, with that many app threads
# allocating garbage through the dumps (a concurrent GC in flight when the fork dumper stops the
# app; the table gives the worst pause, its phases, and ART's logged waits for a running GC).
# Targets: fork pause >= 100 x shorter than the in-process dump. See examples/art_dump_bench.rs.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source scripts/lib/setup.sh
setup_art
need_java
command -v clang >/dev/null || apt_install clang
MB="${DUMP_BENCH_ART_MB:-320}"
SMALL_PCT="${DUMP_BENCH_ART_SMALL_PCT:-50}"
XMX="${DUMP_BENCH_ART_XMX_MB:-1024}"
ROUNDS="${DUMP_BENCH_ART_ROUNDS:-7}"
CHURN="${DUMP_BENCH_ART_CHURN:-0 1}"
# The dumps (about 0.8 GB at the default size) go to tmpfs where there is one, so that the
# machine's disk does not add its noise to the pauses (a device writes to flash: its in-process
# pause is longer, not shorter).
TMP_ROOT="${DUMP_BENCH_ART_TMP:-$( [ -d /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")}"
cargo build --release -q --features oomguard/test-probe --lib --bins --example art_dump_bench
W="$(mktemp -d "$TMP_ROOT/oomguard-art-dump-bench.XXXXXX")"
trap 'rm -rf "$W"' EXIT
for C in $CHURN; do
  target/release/examples/art_dump_bench "$PWD/target/release" "$PWD/target/release/oomguard" "$W" "$MB" "$SMALL_PCT" "$ROUNDS" "$XMX" "$C"
  rm -rf "${W:?}"/*
done
