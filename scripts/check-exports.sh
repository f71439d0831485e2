#!/usr/bin/env bash
# Check that a built liboomguard.so exports no test-only JNI symbols (jni::probe, built only
# with the `test-probe` feature): `Java_dev_oomguard_testing_*` in its .dynsym.
# Usage: scripts/check-exports.sh path/to/liboomguard.so
set -euo pipefail
so=${1:?usage: $0 liboomguard.so}
[ -f "$so" ] || { echo "check-exports: $so does not exist" >&2; exit 1; }
found=$(nm -D --defined-only "$so" | awk '{print $NF}' | grep '^Java_dev_oomguard_testing_' || true)
if [ -n "$found" ]; then
  echo "check-exports: $so exports test-only symbols:" >&2
  echo "$found" >&2
  exit 1
fi
echo "check-exports: $so exports no test-only symbols"
