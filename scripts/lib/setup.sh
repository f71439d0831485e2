# Shared set-up for scripts/*.sh: installs what is missing, quietly, and says what it did.
# Sourced, not run.

SHARED_DIR="${SHARED_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/shared}"
HPROF_CONV=/usr/lib/android-sdk/platform-tools/hprof-conv

apt_install() {
  # apt_install PKG... : install the Debian packages that are not installed yet.
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

rust_target() {
  rustup target list --installed | grep -qx "$1" || { echo "setup: rustup target add $1"; rustup target add "$1"; }
}

need_java() {
  command -v javac >/dev/null && command -v java >/dev/null || apt_install openjdk-17-jdk-headless
}

setup_tus_server() {
  # A real tus server for the upload interop test: @tus/server + @tus/file-store from npm,
  # pinned by tests/tus-server/package{,-lock}.json, installed into target/tus-server/.
  local root dst
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  dst="$root/target/tus-server"
  command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm
  mkdir -p "$dst"
  cp "$root/tests/tus-server/server.mjs" "$dst/"
  if [ -f "$dst/node_modules/@tus/server/package.json" ] && [ -f "$dst/node_modules/@tus/file-store/package.json" ] \
     && cmp -s "$root/tests/tus-server/package-lock.json" "$dst/package-lock.json"; then
    return 0
  fi
  cp "$root/tests/tus-server/package.json" "$root/tests/tus-server/package-lock.json" "$dst/"
  echo "setup: npm ci @tus/server @tus/file-store into target/tus-server"
  (cd "$dst" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}

# ART_PACKAGES: Debian's ART 11 (android-libart) and the libraries it uses without naming them
# in its NEEDED entries (loaded by tests/art/launcher/launch.c in this order), p7zip-full for the
# 7z.so libbacktrace wants, smali to assemble the test core library (tests/art/core) and dexdump
# to read dex files back.
ART_PACKAGES=(android-libart android-liblog android-libbase android-libziparchive
  android-libunwind android-libbacktrace android-libnativebridge android-libnativeloader
  android-libnativehelper p7zip-full libsmali-java dexdump)

setup_art() {
  apt_install "${ART_PACKAGES[@]}"
}

setup_test_deps() {
  apt_install hprof-conv clang lld llvm-14
  setup_art
  need_java
  setup_tus_server
  rust_target aarch64-linux-android
  rust_target armv7-linux-androideabi
  rustup component list --installed | grep -q '^clippy' || rustup component add clippy rustfmt
  if [ ! -d "$SHARED_DIR/fixtures/hprof" ]; then
    echo "setup: ../shared/fixtures/hprof not found at $SHARED_DIR: the fixture tests need it" >&2
    exit 1
  fi
}

# android_env CMD...: run CMD with the C toolchain variables `ring` needs to build for Android.
android_env() {
  CC_aarch64_linux_android=clang \
  CFLAGS_aarch64_linux_android="--target=aarch64-linux-android21 -ffreestanding -nostdlibinc -DRING_CORE_NOSTDLIBINC=1" \
  AR_aarch64_linux_android=llvm-ar-14 \
  CC_armv7_linux_androideabi=clang \
  CFLAGS_armv7_linux_androideabi="--target=armv7a-linux-androideabi21 -ffreestanding -nostdlibinc -DRING_CORE_NOSTDLIBINC=1" \
  AR_armv7_linux_androideabi=llvm-ar-14 \
  "$@"
}
