# check_elf FILE: what Android asks of a JNI library's ELF file, checked on the linked file
# (scripts/build-android.sh, scripts/android-link.sh): every PT_LOAD segment aligned to at least
# 16 KB (Android 15's 16 KB pages), no text relocations, and only the JNI entry points (Java_*,
# JNI_OnLoad) exported. Prints one line when it passes; otherwise each failure on stderr, rc 1.
# ANDROID_PAGE: the page size the Android library is linked for (-z max-page-size) and checked
# against, set here once for both scripts.
ANDROID_PAGE=16384
check_elf() {
  local f="$1" page=$ANDROID_PAGE bad=0 a exports
  while read -r a; do
    if [ $((a)) -lt $page ]; then
      echo "check_elf: $f: a PT_LOAD segment aligned to $a (< $page): no 16 KB pages" >&2
      bad=1
    fi
  done < <(readelf -lW "$f" | awk '$1 == "LOAD" { print $NF }')
  if readelf -dW "$f" | grep -q TEXTREL; then
    echo "check_elf: $f: has text relocations" >&2
    bad=1
  fi
  exports=$(nm -D --defined-only "$f" | awk '{ print $NF }' | grep -Ev '^(Java_.*|JNI_OnLoad)$' || true)
  if [ -n "$exports" ]; then
    echo "check_elf: $f exports more than the JNI entry points:" >&2
    echo "$exports" | head -20 | sed 's/^/  /' >&2
    bad=1
  fi
  [ $bad -eq 0 ] && echo "check_elf: $f: PT_LOAD aligned >= $page, no TEXTREL, exports $(nm -D --defined-only "$f" | grep -c ' Java_') Java_* natives"
  return $bad
}
