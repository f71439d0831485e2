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

step "cargo clippy --target aarch64-linux-android -- -D warnings"
android_env cargo clippy --lib --bins --target aarch64-linux-android -- -D warnings

step "cargo test"
cargo test --all-targets 2>&1 | tee target/test.log
# Doc tests run separately so their summary lines are counted too.
cargo test --doc 2>&1 | tee -a target/test.log

step "summary"
passed=$(grep -Eo 'test result: [a-z]+\. [0-9]+ passed; [0-9]+ failed' target/test.log | awk '{p+=$4; f+=$6} END {print p+0}')
failed=$(grep -Eo 'test result: [a-z]+\. [0-9]+ passed; [0-9]+ failed' target/test.log | awk '{p+=$4; f+=$6} END {print f+0}')
echo "tests: $passed passed, $failed failed"
