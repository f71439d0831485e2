#!/usr/bin/env bash
# The size of the library an app ships: builds liboomguard.so alone (-p oomguard --lib: built in
# one command with the collector or the command line, it would get their dependencies' features)
# and as a cdylib only (`cargo rustc --crate-type cdylib`: compiled in one go with the rlib that
# the command line and the collector link, the library keeps every generic instantiation the rlib
# exports, called through the GOT, and was 19 % larger), strips a copy, prints the stripped size,
# then the size by crate from the unstripped build's symbols (scripts/lib/size_by_crate.py says
# how symbols are given to crates).
# Usage: scripts/size.sh [PROFILE]   (default: ship, the profile of the library an app ships)
#   SIZE_MAX=BYTES  fail when the stripped library is larger
#   SIZE_TOP=N      rows of the table before the rest is summed (default 25)
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-ship}"
case "$profile" in
  dev) dir=debug ;;
  *) dir="$profile" ;;
esac
cargo rustc --profile "$profile" -p oomguard --lib --crate-type cdylib
lib="${CARGO_TARGET_DIR:-target}/$dir/liboomguard.so"
[ -f "$lib" ] || { echo "size: $lib was not built" >&2; exit 1; }
stripped="${lib%.so}.stripped.so"
strip --strip-all -o "$stripped" "$lib"
bytes=$(stat -c %s "$stripped")
echo
echo "liboomguard.so, profile $profile, $(rustc -vV | sed -n 's/^host: //p'): $(python3 -c "print(f'{$bytes:,}')") bytes stripped ($stripped)"
echo
python3 scripts/lib/size_by_crate.py "$lib" "$stripped" "${SIZE_TOP:-25}"
if [ -n "${SIZE_MAX:-}" ] && [ "$bytes" -gt "$SIZE_MAX" ]; then
  echo "size: $bytes bytes stripped is over SIZE_MAX=$SIZE_MAX" >&2
  exit 1
fi
