# Helpers for scripts/bench/*.sh. Sourced.

# The ≥ 500 MB Java 17 dump shared by the strip and analyze benches, made once and cached.
BIG_DUMP=target/bench/big.hprof
ensure_big_dump() {
  [ -f "$BIG_DUMP" ] && return 0
  mkdir -p target/bench/classes
  javac -d target/bench/classes java/tools/MakeDump.java
  echo "bench: making a Java 17 heap dump of at least 500 MB (once; cached at $BIG_DUMP)" >&2
  java -Xmx3g -cp target/bench/classes MakeDump target/bench/big.tmp.hprof 420 >&2
  mv target/bench/big.tmp.hprof "$BIG_DUMP"
}

# An ART-style dump of KOOM's published size (154 MB), with the generator's default composition:
# a third of the objects in the image and zygote heaps, primitive arrays of 256 bytes on average.
# Made once with BIN (the bench's build of the command line) and cached.
ART_DUMP=target/bench/art-150mb.hprof
ensure_art_dump() {
  [ -f "$ART_DUMP" ] || "$1" testdata-art "$ART_DUMP" --image 270000 --zygote 130000 --app 1000000 >/dev/null
}

# The scale dumps of issue 43 (MILLIONS of objects: 10 and 30), shaped like the big dump, made
# once by java/tools/MakeScaleDump.java into $SCALE_DIR (default /dev/shm/oomguard-bench: they
# are 0.7 and 2.1 GB, never written into the repository). Sets SCALE_DUMP.
SCALE_DIR="${SCALE_DIR:-/dev/shm/oomguard-bench}"
ensure_scale_dump() {
  SCALE_DUMP="$SCALE_DIR/scale-${1}m.hprof"
  [ -f "$SCALE_DUMP" ] && return 0
  mkdir -p "$SCALE_DIR" target/bench/classes
  javac -d target/bench/classes -sourcepath java/tools java/tools/MakeScaleDump.java
  echo "bench: making a Java 17 heap dump of about $1 million objects (once; cached at $SCALE_DUMP)" >&2
  java -Xmx$(($1 / 5 + 2))g -cp target/bench/classes MakeScaleDump "$SCALE_DIR/scale-${1}m.tmp.hprof" "$1" >&2
  mv "$SCALE_DIR/scale-${1}m.tmp.hprof" "$SCALE_DUMP"
}
