#!/usr/bin/env bash
# Build liboomguard.so for arm64-v8a and armeabi-v7a with cargo-ndk, into
# target/android/jniLibs/<abi>/liboomguard.so (the layout an app's src/main/jniLibs expects).
# Where something is missing it says exactly what, and exits 1 without building.
# Usage: scripts/build-android.sh
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v cargo-ndk >/dev/null 2>&1 || missing+=("cargo-ndk: cargo install cargo-ndk")
ndk="${ANDROID_NDK_HOME:-${ANDROID_NDK_ROOT:-}}"
if [ -z "$ndk" ]; then
  for d in "${ANDROID_HOME:-/nonexistent}"/ndk/* "${ANDROID_SDK_ROOT:-/nonexistent}"/ndk/* /usr/lib/android-sdk/ndk/* /usr/lib/android-ndk /opt/android-ndk*; do
    [ -d "$d/toolchains/llvm/prebuilt" ] && ndk="$d"
  done
fi
if [ -z "$ndk" ] || [ ! -d "$ndk/toolchains/llvm/prebuilt" ]; then
  missing+=("an Android NDK (r23 or newer): set ANDROID_NDK_HOME, or install one with: sdkmanager 'ndk;26.3.11579264'")
fi
for t in aarch64-linux-android armv7-linux-androideabi; do
  rustup target list --installed 2>/dev/null | grep -qx "$t" || missing+=("the Rust target $t: rustup target add $t")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-android: cannot build liboomguard.so for Android; missing:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  echo "(Without an NDK, CI still checks the Android code: cargo clippy --target aarch64-linux-android in scripts/test.sh.)" >&2
  exit 1
fi
echo "build-android: NDK $ndk"
ANDROID_NDK_HOME="$ndk" cargo ndk -t arm64-v8a -t armeabi-v7a -P 21 -o target/android/jniLibs build --release -p oomguard --lib
ls -l target/android/jniLibs/*/liboomguard.so
