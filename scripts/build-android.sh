#!/usr/bin/env bash
# Build the AAR an Android app adds, target/android/oomguard.aar (or OUT_DIR/oomguard.aar):
#   classes.jar               the facade (java/dev/oomguard/*.java, not testing/), Java 8 bytecode
#   AndroidManifest.xml       package dev.oomguard, minSdk 21
#   proguard.txt              the consumer rules (java/dev/oomguard/proguard.txt): R8 applies them
#   jni/<abi>/liboomguard.so  arm64-v8a, armeabi-v7a, x86_64: profile ship, API 21, linked with
#                             -z max-page-size=16384 (Android 15's 16 KB pages), each checked
#                             (check_elf below) before it goes in; built as a cdylib alone
#                             (`cargo rustc --crate-type cdylib`, as scripts/size.sh does: with the
#                             rlib in the same compile the library is 19 % larger)
# The native libraries need an Android NDK and cargo-ndk. Without them it still builds and checks
# everything else, says exactly what is missing, and the AAR has no jni/ (exit 0; with
# --require-native, exit 1). It never puts in jni/ a file it did not check, nor a Linux build (a
# Linux library links glibc: an Android device cannot load it).
# Options:
#   --java-only       no native part at all (the test of the AAR's layout, tests/aar.rs)
#   --require-native  exit 1 when jni/ cannot be built (a release)
#   --proxy           without an NDK, link the x86_64 Linux library the same way (ship profile,
#                     16 KB pages) and run the ELF checks on it: what can be checked here. It
#                     stays in OUT_DIR/proxy/, not in the AAR. (A ship build: minutes.)
#   --out OUT_DIR     where to build (default target/android)
set -euo pipefail
cd "$(dirname "$0")/.."

java_only="" require_native="" proxy="" out="target/android"
while [ $# -gt 0 ]; do
  case "$1" in
    --java-only) java_only=1 ;;
    --require-native) require_native=1 ;;
    --proxy) proxy=1 ;;
    --out) out="$2"; shift ;;
    *) echo "build-android: unknown option $1 (see the script's header)" >&2; exit 2 ;;
  esac
  shift
done
source scripts/lib/setup.sh      # MIN_API
source scripts/lib/elf_check.sh  # check_elf FILE, ANDROID_PAGE

stage="$out/aar"
rm -rf "$stage" "$out/oomguard.aar"
mkdir -p "$stage/classes"

# 1. classes.jar: the facade for Java 8 bytecode (what an app with minSdk 21 desugars anyway).
javac --release 8 -nowarn -d "$stage/classes" $(find java/dev/oomguard -maxdepth 1 -name '*.java' | sort)
jar --create --file "$stage/classes.jar" --no-manifest -C "$stage/classes" .
rm -rf "$stage/classes"
# 2. The manifest and the consumer rules.
cat >"$stage/AndroidManifest.xml" <<XML
<?xml version="1.0" encoding="utf-8"?>
<manifest xmlns:android="http://schemas.android.com/apk/res/android" package="dev.oomguard">
    <uses-sdk android:minSdkVersion="$MIN_API" />
</manifest>
XML
cp java/dev/oomguard/proguard.txt "$stage/proguard.txt"

# 3. The native libraries.
missing=()
if [ -z "$java_only" ]; then
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
  for t in aarch64-linux-android armv7-linux-androideabi x86_64-linux-android; do
    rustup target list --installed 2>/dev/null | grep -qx "$t" || missing+=("the Rust target $t: rustup target add $t")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "build-android: NDK $ndk"
    ANDROID_NDK_HOME="$ndk" RUSTFLAGS="-C link-arg=-Wl,-z,max-page-size=$ANDROID_PAGE" \
      cargo ndk -t arm64-v8a -t armeabi-v7a -t x86_64 -P $MIN_API -o "$out/jniLibs" \
      rustc --profile ship -p oomguard --lib --crate-type cdylib
    for abi in arm64-v8a armeabi-v7a x86_64; do
      f="$out/jniLibs/$abi/liboomguard.so"
      check_elf "$f"
      mkdir -p "$stage/jni/$abi"
      cp "$f" "$stage/jni/$abi/"
    done
  fi
fi

(cd "$stage" && jar --create --file ../oomguard.aar --no-manifest .)
echo "build-android: $out/oomguard.aar"
(cd "$stage" && find . -type f | sort | sed 's|^\./|  |')

if [ -n "$java_only" ]; then
  echo "build-android: --java-only: no jni/ in this AAR" >&2
  exit 0
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-android: INCOMPLETE AAR: no jni/<abi>/liboomguard.so (arm64-v8a, armeabi-v7a, x86_64) can be linked here; missing:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  echo "  (without an NDK, scripts/android-link.sh links arm64-v8a against bionic's API $MIN_API stubs and checks that file: its imports, 16 KB segments and exports; a stand-in unwinder, so it never goes in the AAR; scripts/abi-check.sh runs it and checks armv7's static archive)" >&2
  if [ -n "$proxy" ]; then
    echo "build-android: --proxy: the x86_64 Linux library, ship profile, -z max-page-size=$ANDROID_PAGE (not in the AAR)"
    cargo rustc --profile ship -p oomguard --lib --crate-type cdylib -- -C link-arg=-Wl,-z,max-page-size=$ANDROID_PAGE
    mkdir -p "$out/proxy"
    cp "${CARGO_TARGET_DIR:-target}/ship/liboomguard.so" "$out/proxy/"
    check_elf "$out/proxy/liboomguard.so"
  fi
  [ -n "$require_native" ] && exit 1
fi
exit 0
