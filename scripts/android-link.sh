#!/usr/bin/env bash
# Link liboomguard.so for Android without an NDK, and check the linked file.
#
# The NDK gives a link three things: stub system libraries for the API level, crtbegin_so.o and
# the static unwinder libunwind.a. Here they are made from public facts and our own sources:
# - the stubs: scripts/lib/bionic_stubs.py, from scripts/abi/bionic-api.txt (bionic's map files:
#   which library exports which symbol, under which version, from which API level);
# - crtbegin_so.o: scripts/android-link/crtbegin_so.c;
# - libunwind.a: scripts/android-link/unwind (the `unwinding` crate's unwinder).
# rustc links the ship profile's cdylib through scripts/android-link/android-cc, with
# -z max-page-size=16384 and -z defs. Then the file is checked: check_elf (16 KB PT_LOAD
# alignment, no TEXTREL, only Java_*/JNI_OnLoad exported) and scripts/lib/abi_check.py on its
# dynamic symbols (each import exported by bionic at MIN_API, or weak).
#
# What this file is NOT: the NDK's build. Its unwinder and crtbegin are stand-ins, and it was never
# loaded on a device (none can run here). So scripts/build-android.sh never puts it in the AAR;
# it is the evidence of what the NDK's link will give: the size, the segments, the imports.
# ARM EHABI (armv7) unwinds from its own tables, which the stand-in unwinder does not read: that
# ABI is not linked here (scripts/abi-check.sh checks its static archive instead).
#
# Usage: scripts/android-link.sh [TARGET...]   (default: aarch64-linux-android; also
#        x86_64-linux-android). Writes target/android-link/<abi>/liboomguard.so and a stripped
#        copy, liboomguard.stripped.so, and prints the stripped size.
#   MIN_API=N  the API level linked against (default: scripts/lib/setup.sh's)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
source scripts/lib/elf_check.sh
root="$PWD"
tdir="${CARGO_TARGET_DIR:-$root/target}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(aarch64-linux-android)
apt_install clang lld llvm-14 binutils
fail=0
for t in "${targets[@]}"; do
  case "$t" in
    aarch64-linux-android) abi=arm64 jni=arm64-v8a ;;
    x86_64-linux-android) abi=x86_64 jni=x86_64 ;;
    armv7-linux-androideabi)
      echo "android-link: $t is not linked here: the stand-in unwinder does not read ARM EHABI tables (scripts/abi-check.sh checks its archive)" >&2
      exit 2 ;;
    *) echo "android-link: unknown Android target $t" >&2; exit 2 ;;
  esac
  clang_target="${t}${MIN_API}"
  out="$tdir/android-link/$jni"
  rm -rf "$out"
  mkdir -p "$out"
  rust_target "$t"
  python3 scripts/lib/bionic_stubs.py scripts/abi/bionic-api.txt "$abi" "$MIN_API" "$clang_target" "$out"
  # The stubs must refuse what the device lacks: a hard reference to a symbol bionic exports only
  # from API 28 (getrandom) must not link at API 21, a weak one must.
  if [ "$MIN_API" -lt 28 ]; then
    echo 'extern long getrandom(void *, unsigned long, unsigned); long f(char *b) { return getrandom(b, 1, 0); }' >"$out/hard.c"
    sed 's/^extern long/extern __attribute__((weak)) long/' "$out/hard.c" >"$out/weak.c"
    link_probe() { clang --target="$clang_target" -fuse-ld=lld -nostdlib -shared -fPIC -Wl,-z,defs -L"$out" -o "$out/$1.so" "$out/$1.c" -lc 2>"$out/$1.log"; }
    if link_probe hard || ! link_probe weak; then
      echo "android-link: the API $MIN_API stubs in $out do not refuse a hard getrandom (API 28) or refuse a weak one: $(cat "$out/hard.log" "$out/weak.log")" >&2
      exit 1
    fi
    rm -f "$out"/{hard,weak}.{c,so,log}
  fi
  clang --target="$clang_target" -fPIC -O2 -DANDROID_API="$MIN_API" \
    -c scripts/android-link/crtbegin_so.c -o "$out/crtbegin_so.o"
  (cd scripts/android-link/unwind &&
    CARGO_TARGET_DIR="$tdir/android-link/unwind" cargo build -q --locked --release --target "$t")
  cp "$tdir/android-link/unwind/$t/release/liboomguard_android_unwind.a" "$out/libunwind.a"
  linker_var="CARGO_TARGET_$(echo "$t" | tr 'a-z-' 'A-Z_')_LINKER"
  export "$linker_var=$root/scripts/android-link/android-cc" OOMGUARD_ANDROID_LINK_DIR="$out" \
    OOMGUARD_ANDROID_CLANG_TARGET="$clang_target"
  android_env cargo rustc -q --profile ship -p oomguard --lib --target "$t" --crate-type cdylib \
    -- -C link-arg=-Wl,-z,max-page-size=$ANDROID_PAGE
  cp "$tdir/$t/ship/liboomguard.so" "$out/liboomguard.so"
  llvm-strip-14 -o "$out/liboomguard.stripped.so" "$out/liboomguard.so"
  check_elf "$out/liboomguard.stripped.so" || fail=1
  python3 scripts/lib/abi_check.py "$out/liboomguard.stripped.so" scripts/abi/bionic-api.txt "$abi" "$MIN_API" || fail=1
  bytes=$(stat -c %s "$out/liboomguard.stripped.so")
  echo "android-link: $jni/liboomguard.so, profile ship, API $MIN_API: $(python3 -c "print(f'{$bytes:,}')") bytes stripped ($out/liboomguard.stripped.so; not the NDK's link: see this script's header)"
done
exit $fail
