# Shared set-up for scripts/*.sh: installs what is missing, quietly, and says what it did.
# Sourced, not run.

SHARED_DIR="${SHARED_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/shared}"
HPROF_CONV=/usr/lib/android-sdk/platform-tools/hprof-conv
# The lowest Android API level the library supports (the AAR's minSdk): what it is compiled and
# linked for, and the level above which a libc import must be weak. Set here once for every
# script; MIN_API=N in the environment overrides it.
MIN_API="${MIN_API:-21}"

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
  cp "$root/crates/cli/tests/tus-server/server.mjs" "$dst/"
  if [ -f "$dst/node_modules/@tus/server/package.json" ] && [ -f "$dst/node_modules/@tus/file-store/package.json" ] \
     && cmp -s "$root/crates/cli/tests/tus-server/package-lock.json" "$dst/package-lock.json"; then
    return 0
  fi
  cp "$root/crates/cli/tests/tus-server/package.json" "$root/crates/cli/tests/tus-server/package-lock.json" "$dst/"
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
  # tests/minified.rs and tests/mapping_proguard.rs minify test apps with ProGuard 6.2.
  apt_install proguard
  # tests/report_pages.rs opens the report pages in headless Chromium.
  apt_install chromium
  setup_art
  need_java
  # tests/net_jvm.rs: a certificate and an https server (`openssl s_server`) for the platform
  # transport's trust-store test (keytool comes with the JDK).
  apt_install openssl
  setup_tus_server
  rust_target aarch64-linux-android
  rust_target armv7-linux-androideabi
  rustup component list --installed | grep -q '^clippy' || rustup component add clippy rustfmt
  if [ ! -d "$SHARED_DIR/fixtures/hprof" ]; then
    echo "setup: ../shared/fixtures/hprof not found at $SHARED_DIR: the fixture tests need it" >&2
    exit 1
  fi
}

# android_env CMD...: run CMD with the C toolchain variables a dependency that compiles C needs to
# build for Android (none does since `ring` left the library with ureq; kept for the next one).
android_env() {
  CC_aarch64_linux_android=clang \
  CFLAGS_aarch64_linux_android="--target=aarch64-linux-android$MIN_API -ffreestanding -nostdlibinc -DRING_CORE_NOSTDLIBINC=1" \
  AR_aarch64_linux_android=llvm-ar-14 \
  CC_armv7_linux_androideabi=clang \
  CFLAGS_armv7_linux_androideabi="--target=armv7a-linux-androideabi$MIN_API -ffreestanding -nostdlibinc -DRING_CORE_NOSTDLIBINC=1" \
  AR_armv7_linux_androideabi=llvm-ar-14 \
  "$@"
}

# build_release: the release build scripts/demo.sh runs: the command line (and the collector in
# it) first, then the library an app ships on its own, in a target directory of its own
# (SHIP_LIB_DIR). Built in one command, cargo would give the library the union of tokio's features
# that the collector's HTTP server asks for, and ship them in liboomguard.so. Built in two into
# one target directory, each rebuilt the library the other left (the two feature sets share the
# cdylib's unhashed file name: about a minute on every later run of demo.sh). Its own directory
# costs the library's dependencies a build of their own on the first run only. scripts/test.sh
# runs this itself beside its ABI check and tells demo.sh not to run it again
# (OOMGUARD_DEMO_BUILT=1).
SHIP_LIB_TARGET=target/ship-lib
SHIP_LIB_DIR="$SHIP_LIB_TARGET/release"
build_release() {
  cargo build --release -p cli && cargo build --release -p oomguard --lib --target-dir "$SHIP_LIB_TARGET"
}

# build_seccomp_filter: build tests/seccomp's LD_PRELOAD filter (Android 8.0's app allowlist for
# x86_64) into target/seccomp/, with its self-test and a `java` wrapper that starts the JVM
# under it. Prints the directory to put first in PATH.
build_seccomp_filter() {
  local root src out unistd
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  src="$root/crates/cli/tests/seccomp"
  out="$root/target/seccomp"
  mkdir -p "$out/bin"
  unistd=$(echo '#include <asm/unistd_64.h>' | cc -E -dM -x c - | awk '$2 ~ /^__NR_/ {print $2}')
  {
    echo "// Generated by scripts/lib/setup.sh from crates/cli/tests/seccomp/android26_x86_64.txt."
    echo "static const struct entry allowed[] = {"
    awk '$1 == "allow" {print $2} $1 == "same" {print $2}' "$src/android26_x86_64.txt" |
      while read -r n; do printf '#ifdef __NR_%s\n  {__NR_%s, "%s"},\n#endif\n' "$n" "$n" "$n"; done
    echo "};"
    echo "static const struct entry enosys[] = {"
    awk '$1 == "enosys" {print $2}' "$src/android26_x86_64.txt" |
      while read -r n; do printf '#ifdef __NR_%s\n  {__NR_%s, "%s"},\n#endif\n' "$n" "$n" "$n"; done
    echo "};"
    echo "static const struct entry all_names[] = {"
    for m in $unistd; do printf '  {%s, "%s"},\n' "$m" "${m#__NR_}"; done
    echo "};"
  } >"$out/allowlist.h"
  # Every name the list allows must be a system call of this architecture: a typo would
  # silently trap the call instead. (A here-string, not `echo | grep -q`: grep -q leaves at its
  # first match, echo may then die of SIGPIPE, and under pipefail a name that is there reads
  # as missing: "names unknown system calls: futex" on a loaded machine.)
  local missing
  missing=$(awk '$1 == "allow" || $1 == "enosys" {print $2} $1 == "same" {print $2; print $4}' "$src/android26_x86_64.txt" |
    while read -r n; do grep -qx "__NR_$n" <<<"$unistd" || echo "$n"; done)
  if [ -n "$missing" ]; then
    echo "setup: crates/cli/tests/seccomp/android26_x86_64.txt names unknown system calls: $missing" >&2
    return 1
  fi
  cc -shared -fPIC -O2 -Wall -Werror -I"$out" -o "$out/liboomguard_seccomp.so" "$src/filter.c" -ldl
  cc -O1 -Wall -o "$out/selftest" "$src/selftest.c"
  cat >"$out/bin/java" <<WRAP
#!/bin/sh
# The JVM as an Android 8.0 app: under tests/seccomp's filter from its first instruction.
export LD_PRELOAD="$out/liboomguard_seccomp.so\${LD_PRELOAD:+:\$LD_PRELOAD}"
export OOMGUARD_SECCOMP=\${OOMGUARD_SECCOMP:-android26}
# glibc registers the main thread's rseq area before any constructor runs, and then takes a
# failed registration of a later thread as fatal: keep glibc off rseq (bionic has none on API 26).
export GLIBC_TUNABLES="glibc.pthread.rseq=0\${GLIBC_TUNABLES:+:\$GLIBC_TUNABLES}"
exec "$(command -v java)" "\$@"
WRAP
  chmod +x "$out/bin/java"
  # The same for a test binary of ours (cargo's runner): the whole test process is the app.
  cat >"$out/under-filter" <<WRAP
#!/bin/sh
export LD_PRELOAD="$out/liboomguard_seccomp.so\${LD_PRELOAD:+:\$LD_PRELOAD}"
export OOMGUARD_SECCOMP=\${OOMGUARD_SECCOMP:-android26}
export GLIBC_TUNABLES="glibc.pthread.rseq=0\${GLIBC_TUNABLES:+:\$GLIBC_TUNABLES}"
exec "\$@"
WRAP
  chmod +x "$out/under-filter"
  echo "$out/bin"
}
