#!/usr/bin/env bash
# The size of the library an app ships: builds liboomguard.so alone (-p oomguard --lib: built in
# one command with the collector or the command line, it would get their dependencies' features)
# and as a cdylib only (`cargo rustc --crate-type cdylib`: compiled in one go with the rlib that
# the command line and the collector link, the library keeps every generic instantiation the rlib
# exports, called through the GOT, and was 19 % larger), strips a copy, prints the stripped size,
# then the size by crate from the unstripped build's symbols (scripts/lib/size_by_crate.py says
# how symbols are given to crates).
# Usage: scripts/size.sh [PROFILE]   (default: ship, the profile of the library an app ships, for
#        this machine; `arm64`: the ship profile linked for arm64-v8a, scripts/android-link.sh)
#   SIZE_MAX=BYTES  fail when the stripped library is larger (scripts/test.sh: the arm64 ceiling)
#   SIZE_TOP=N      rows of the table before the rest is summed (default 25)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh  # MIN_API
profile="${1:-ship}"
case "$profile" in
  dev) dir=debug ;;
  *) dir="$profile" ;;
esac
if [ "$profile" = arm64 ]; then
  # The arm64-v8a library as linked without an NDK (scripts/android-link.sh: bionic's API 21
  # stubs, a stand-in unwinder and crtbegin_so; profile ship, a cdylib alone too): what a phone
  # loads, within the stand-ins' difference.
  scripts/android-link.sh aarch64-linux-android >/dev/null
  lib="${CARGO_TARGET_DIR:-target}/android-link/arm64-v8a/liboomguard.so"
  stripped="${lib%.so}.stripped.so"
  what="arm64-v8a (aarch64-linux-android$MIN_API, profile ship, linked by scripts/android-link.sh)"
else
  cargo rustc --profile "$profile" -p oomguard --lib --crate-type cdylib
  lib="${CARGO_TARGET_DIR:-target}/$dir/liboomguard.so"
  [ -f "$lib" ] || { echo "size: $lib was not built" >&2; exit 1; }
  stripped="${lib%.so}.stripped.so"
  strip --strip-all -o "$stripped" "$lib"
  what="profile $profile, $(rustc -vV | sed -n 's/^host: //p')"
fi
bytes=$(stat -c %s "$stripped")
echo
echo "liboomguard.so, $what: $(python3 -c "print(f'{$bytes:,}')") bytes stripped ($stripped)"
echo
python3 scripts/lib/size_by_crate.py "$lib" "$stripped" "${SIZE_TOP:-25}"
if [ -n "${SIZE_MAX:-}" ] && [ "$bytes" -gt "$SIZE_MAX" ]; then
  echo "size: $bytes bytes stripped is over SIZE_MAX=$SIZE_MAX" >&2
  exit 1
fi
