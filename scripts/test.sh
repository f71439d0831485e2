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

step "DESIGN's sizes: no file over 1,000 lines of code, no function over 150 (scripts/sizes.py)"
python3 scripts/sizes.py --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
# The test-only exports (jni::probe) too.
cargo clippy -p oomguard --lib --features test-probe -- -D warnings

step "cargo doc --workspace --no-deps --lib, warnings denied (links to private or missing items)"
# (Libraries only: the agent library and the command line are both `oomguard`, and their docs
# would be written to one directory at once.)
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --lib -q

step "cargo clippy --target aarch64-linux-android -- -D warnings"
android_env cargo clippy --lib --bins --target aarch64-linux-android -- -D warnings

step "cargo clippy --target armv7-linux-androideabi --lib -- -D warnings"
android_env cargo clippy --lib --target armv7-linux-androideabi -- -D warnings

step "the Android ABI check: each symbol the library needs from bionic, by API level (scripts/abi-check.sh)"
# Beside it, in the background, the release build that demo.sh needs (build_release: demo.sh is
# then told not to run it again). Alone, abi-check keeps 1.3 of this host's 2 cores busy (237 s
# of CPU in 182 s: each of its two builds ends in link-time optimisation on one thread), and the
# release build (about 4.5 minutes alone) takes the rest. CI as a whole on a clean clone here:
# 1,423 s before, 1,166 s after (this step and the demo's build: 209 + 274 s before, 340 + 1 s
# now; the shipped library's own target directory, since session 17, adds about 70 s). Cargo
# locks a target directory for each build, so the Android builds get their own.
mkdir -p target
build_release >target/release-build.log 2>&1 &
release_build=$!
ship_dir="$PWD/target/ship-check"
CARGO_TARGET_DIR="$ship_dir" scripts/abi-check.sh

step "the arm64 library's size, under its ceiling (scripts/size.sh arm64)"
# Issue 41's goal itself, 2.0 MB: the file was 1,992,280 bytes stripped at the end of session 6
# (session 5 found a build mode that had silently added 19 %). A change over it says what the
# growth buys, or cuts as much elsewhere. (The link is abi-check's, already built: seconds.)
CARGO_TARGET_DIR="$ship_dir" SIZE_MAX=2000000 scripts/size.sh arm64

step "the release build for demo.sh (begun beside the ABI check)"
if ! wait "$release_build"; then
  cat target/release-build.log
  echo "the release build failed" >&2
  exit 1
fi
grep -E '^ *(Finished|warning)' target/release-build.log

step "cargo test"
# The two slowest tests of the binaries the seccomp step runs again (50 dumps through the tee;
# 10,000 incidents through the spool) run there only. Neither starts a child of the agent, the
# one thing the filter changes (polling instead of a pidfd), so a second run would repeat the
# same work; agent_jvm and net_jvm, which fork, still run both ways. About 90 s of CI.
cargo test --workspace --all-targets -- \
  --skip hotspot_dumps_through_the_tee_equal_plain_dumps_and_their_strip_50_times \
  --skip ten_thousand_incidents_over_thirty_days_stay_within_quotas 2>&1 | tee target/test.log
# Doc tests run separately so their summary lines are counted too.
cargo test --workspace --doc 2>&1 | tee -a target/test.log

step "the JVM tests as an Android 8.0 app: under its seccomp allowlist (crates/cli/tests/seccomp)"
# Every JVM these tests start runs our library under the filter from its first instruction, and
# so does every process it starts (the analyser): a call outside Android 8.0's app allowlist
# aborts that process with a line naming the call. First the filter's own check.
seccomp_bin=$(build_seccomp_filter)
seccomp_ok=1
selftest_err=$(LD_PRELOAD="$PWD/target/seccomp/liboomguard_seccomp.so" OOMGUARD_SECCOMP=android26 \
  target/seccomp/selftest 2>&1 >/dev/null) && seccomp_ok=0
case "$selftest_err" in
  *"system call "*" (pidfd_open) is outside Android 8.0's app allowlist"*) ;;
  *) seccomp_ok=0 ;;
esac
if [ "$seccomp_ok" -eq 1 ]; then
  echo "seccomp filter self-test: pidfd_open caught"
else
  echo "seccomp filter self-test FAILED: $selftest_err" >&2
fi
PATH="$seccomp_bin:$PATH" cargo test --test agent_jvm --test hotspot_tee --test net_jvm 2>&1 | tee -a target/test.log
# The spool and upload tests whose whole process is the app's code (they start no compiler,
# JVM or server of another project, which the filter would judge too).
CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$PWD/target/seccomp/under-filter" \
  cargo test --test spool_footprint --test upload_matrix 2>&1 | tee -a target/test.log

step "scripts/demo.sh (one whole incident, as a test)"
demo_ok=0
# (Built above, beside the ABI check: run again, build_release would only find it built.)
if OOMGUARD_DEMO_BUILT=1 bash scripts/demo.sh target/demo-test 2>&1 | tee target/demo-test.log; then
  demo_ok=1
fi

step "the shipped library exports no test-only symbols (build_release's, without features)"
probe_ok=0
if scripts/check-exports.sh "$SHIP_LIB_DIR/liboomguard.so"; then probe_ok=1; fi

step "summary"
passed=$(grep -Eo 'test result: [a-z]+\. [0-9]+ passed; [0-9]+ failed' target/test.log | awk '{p+=$4; f+=$6} END {print p+0}')
failed=$(grep -Eo 'test result: [a-z]+\. [0-9]+ passed; [0-9]+ failed' target/test.log | awk '{p+=$4; f+=$6} END {print f+0}')
passed=$((passed + demo_ok + seccomp_ok + probe_ok))
failed=$((failed + 3 - demo_ok - seccomp_ok - probe_ok))
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
