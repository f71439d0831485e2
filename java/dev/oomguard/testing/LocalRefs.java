package dev.oomguard.testing;

/**
 * Test support: {@code java -Xcheck:jni -cp CLASSES dev.oomguard.testing.LocalRefs LIB DIR}
 * loads LIB (liboomguard.so built with the test-probe feature) and has the HotSpot dumper check
 * the runtime 100 times and dump the heap 8 times from one native call (see src/jni/probe.rs).
 * Local references the dumper leaks pile up in that call's frame, and -Xcheck:jni warns once
 * they exceed its capacity. Prints "ok" or the error.
 */
public final class LocalRefs {
    static native String exercise(String dir, int checks, int dumps);

    public static void main(String[] args) {
        System.load(args[0]);
        String err = exercise(args[1], 100, 8);
        System.out.println(err == null ? "ok" : "error: " + err);
        if (err != null) System.exit(1);
    }
}
