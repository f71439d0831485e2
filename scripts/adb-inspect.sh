#!/usr/bin/env bash
# Show what oomguard is doing inside an installed, debuggable app: its status.json, its cached
# remote policy, and the recent logcat lines tagged OomGuard.
# Usage: scripts/adb-inspect.sh PKG [DATA_SUBDIR]    (DATA_SUBDIR defaults to files/oomguard,
#        the dataDir the app passed to OomGuard.start, relative to its data directory)
set -euo pipefail
usage="usage: scripts/adb-inspect.sh PKG [DATA_SUBDIR]   (PKG: the app's package name, e.g. com.example.app; DATA_SUBDIR defaults to files/oomguard)"
case "${1:-}" in
  -h|--help) echo "$usage"; exit 0 ;;
  "") echo "adb-inspect: no package named" >&2; echo "$usage" >&2; exit 2 ;;
  -*) echo "adb-inspect: unknown option $1" >&2; echo "$usage" >&2; exit 2 ;;
esac
[ $# -le 2 ] || { echo "adb-inspect: too many arguments" >&2; echo "$usage" >&2; exit 2; }
pkg="$1"
sub="${2:-files/oomguard}"
command -v adb >/dev/null 2>&1 || {
  echo "adb-inspect: adb not found on PATH: install Debian's adb package (sudo apt-get install adb)," >&2
  echo "  or the Android SDK's platform-tools and put its directory on PATH" >&2
  exit 1
}
[ "$(adb get-state 2>/dev/null)" = device ] || { echo "adb-inspect: no device (adb devices lists none ready)" >&2; exit 1; }
pid="$(adb shell pidof "$pkg" 2>/dev/null | tr -d '\r' || true)"
echo "== $pkg: pid ${pid:-(not running)}"
echo "== $sub/status.json"
adb shell run-as "$pkg" cat "$sub/status.json" 2>/dev/null || echo "(cannot read it: the app must be debuggable and have started oomguard)"
echo
echo "== $sub/policy.cache.json (last good remote policy: body, signature, ETag, fetch times)"
adb shell run-as "$pkg" cat "$sub/policy.cache.json" 2>/dev/null || echo "(none)"
echo
echo "== adb logcat -s OomGuard (last 200 lines)"
adb logcat -d -t 200 -s OomGuard
