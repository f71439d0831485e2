#!/usr/bin/env bash
# Mutation testing of what a change touched, before a submission (not CI: too slow).
#
# Usage: scripts/mutants.sh [BASE] [TEST_FILTER...]
#   BASE         the commit the change starts from (default: main); the change is
#                `git diff BASE` over crates/*/src/, committed or not.
#   TEST_FILTER  passed to the test binaries (`cargo test --lib -- FILTER...`, e.g. `trigger::`;
#                several are allowed: `fs:: spool::`): the tests that cover the
#                change. Without one, every library test runs for each mutant.
#
# Runs `cargo mutants --in-diff` with one job, in place (it reuses target/ instead of
# rebuilding a copy from scratch): each mutant is written into the file, built with
# `cargo test --no-run --lib` and tested with `cargo test --lib`, then the file is restored.
# Do not edit the checkout while it runs. Integration tests (crates/*/tests/) are not run: a mutant they
# would catch shows as missed here. Results: target/mutants/mutants.out/{caught,missed,...}.txt.
# Exit status: 0 when no mutant is missed, 2 when some are (cargo mutants' own codes otherwise).
# MUTANTS_ARGS adds options to cargo mutants, e.g. MUTANTS_ARGS=--list to see the mutants only.
set -euo pipefail
cd "$(dirname "$0")/.."

base=${1:-main}
[ $# -gt 0 ] && shift

if ! command -v cargo-mutants >/dev/null; then
  echo "cargo-mutants is not installed: cargo install cargo-mutants --locked" >&2
  exit 1
fi

diff=$(mktemp)
trap 'rm -f "$diff"' EXIT
git diff "$base" -- 'crates/*/src/*' >"$diff"
if [ ! -s "$diff" ]; then
  echo "no change under crates/*/src/ since $base: nothing to mutate"
  exit 0
fi

# The tree as it was, to check that every mutation was undone and that no mutant's test left
# files behind (a mutant of a path function can make tests write into the crate's directory,
# their working directory: seen with spool/mod.rs).
state() { { git diff HEAD; git status --porcelain --untracked-files=all; } | sha256sum; }
before=$(state)
status=0
cargo mutants --in-place --in-diff "$diff" --baseline skip \
  --timeout 300 --build-timeout 900 -C --lib \
  --output target/mutants ${MUTANTS_ARGS:-} -- -- "$@" || status=$?
if [ "$(state)" != "$before" ]; then
  echo "the checkout differs from before the run: a mutation may be left in it, or a mutant's" \
    "test wrote files into it (git status)" >&2
  exit 1
fi
exit "$status"
