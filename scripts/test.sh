#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every check CI runs.
# Usage: scripts/test.sh            (from anywhere inside the checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh

setup_test_deps

step() { printf '\n== %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
# The test-only exports (jni::probe) too.
cargo clippy --lib --features test-probe -- -D warnings

step "cargo clippy --target aarch64-linux-android -- -D warnings"
android_env cargo clippy --lib --bins --target aarch64-linux-android -- -D warnings

step "cargo clippy --target armv7-linux-androideabi --lib -- -D warnings"
android_env cargo clippy --lib --target armv7-linux-androideabi -- -D warnings

step "cargo test"
cargo test --all-targets 2>&1 | tee target/test.log
# Doc tests run separately so their summary lines are counted too.
cargo test --doc 2>&1 | tee -a target/test.log

step "scripts/demo.sh (one whole incident, as a test)"
demo_ok=0
if bash scripts/demo.sh target/demo-test 2>&1 | tee target/demo-test.log; then demo_ok=1; fi

step "the shipped library exports no test-only symbols (built by demo.sh without features)"
probe_ok=0
if scripts/check-exports.sh target/release/liboomguard.so; then probe_ok=1; fi

step "summary"
passed=$(grep -Eo 'test result: [a-z]+\. [0-9]+ passed; [0-9]+ failed' target/test.log | awk '{p+=$4; f+=$6} END {print p+0}')
failed=$(grep -Eo 'test result: [a-z]+\. [0-9]+ passed; [0-9]+ failed' target/test.log | awk '{p+=$4; f+=$6} END {print f+0}')
passed=$((passed + demo_ok + probe_ok))
failed=$((failed + 2 - demo_ok - probe_ok))
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
