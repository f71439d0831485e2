#!/usr/bin/env bash
# The Android ABI check, without an NDK. arm64 (aarch64-linux-android) is linked into
# liboomguard.so against bionic's API-level stubs and its file checked (scripts/android-link.sh:
# the imports of the linked file, 16 KB segments, exports). Other targets (armv7, which cannot be
# linked here) are built as a static archive (profile ship: after LTO the archive holds only what
# the library reaches, so its undefined symbols are what the linked .so would import); the check
# lists the symbols it needs from the system (undefined in the archive and defined by none of its
# members), and checks each against scripts/abi/bionic-api.txt: the API level at which bionic's
# libc, libm, libdl or liblog first exports it (with the source of those facts), or the NDK's
# static unwinder. A symbol first
# exported above MIN_API must be referenced weakly (the library then checks it at run time), never
# as a hard import; a symbol the file does not know fails the check until its fact is added.
# Usage: scripts/abi-check.sh [TARGET...]   (default: aarch64-linux-android armv7-linux-androideabi)
#   MIN_API=N  the lowest API level the library supports (default: scripts/lib/setup.sh's)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
facts=scripts/abi/bionic-api.txt
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(aarch64-linux-android armv7-linux-androideabi)
fail=0
apt_install clang llvm-14 binutils  # ring's C for Android (android_env), readelf
for t in "${targets[@]}"; do
  case "$t" in
    aarch64-linux-android) abi=arm64 ;;
    armv7-linux-androideabi) abi=arm ;;
    *) echo "abi-check: unknown Android target $t" >&2; exit 2 ;;
  esac
  if [ "$t" = aarch64-linux-android ]; then
    # Linked, not archived: the real .so's dynamic imports, its segments and exports
    # (scripts/android-link.sh, which runs abi_check.py on the linked file).
    MIN_API="$MIN_API" scripts/android-link.sh "$t" || fail=1
    continue
  fi
  rust_target "$t"
  android_env cargo rustc -q --profile ship -p oomguard --lib --target "$t" --crate-type staticlib
  archive="${CARGO_TARGET_DIR:-target}/$t/ship/liboomguard.a"
  [ -f "$archive" ] || { echo "abi-check: $archive was not built" >&2; exit 1; }
  python3 scripts/lib/abi_check.py "$archive" "$facts" "$abi" "$MIN_API" || fail=1
done
exit $fail
