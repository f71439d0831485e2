package dev.oomguard.testing;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Test support: heap dumps through oomguard's tee, from a real JVM.
 *
 * <p>{@code java -cp CLASSES dev.oomguard.testing.DumpProbe LIB DIR N [MB]} loads LIB
 * (liboomguard.so), builds a fixed heap of about MB megabytes, then dumps it 2N+1 times from one
 * call site, alternating hooked (the tee on libjvm.so, with a mini file) and plain (no hook), the
 * first one a warm-up. Reports go to DIR/reports.jsonl, one JSON line per dump. A fifth argument "p" makes
 * the first dump the plain one (to compare the first dumps of two fresh, identical JVMs).
 */
public final class DumpProbe {
    /** Returns null on success, else the error report; every report goes to DIR/reports.jsonl. */
    public static native String dump(String fullPath, String miniPath, String level, boolean hooked);

    /** Fork a frozen child (see src/jni/probe.rs); returns {"pid":…,"fork_us":…}. */
    public static native String forkFrozen(int seconds);

    /** Kill and reap a child made by forkFrozen. */
    public static native boolean reap(int pid);

    static final List<Object> KEEP = new ArrayList<>();

    static void build(int mb) {
        Map<String, int[]> m = new HashMap<>();
        long bytes = 0;
        for (int i = 0; bytes < (long) mb << 20; i++) {
            int[] a = new int[64 + (i % 512)];
            for (int j = 0; j < a.length; j++) a[j] = i * 31 + j;
            m.put("key-" + i, a);
            KEEP.add(new byte[100 + (i % 900)]);
            bytes += a.length * 4L + 100 + (i % 900) + 64;
        }
        KEEP.add(m);
    }

    public static void main(String[] args) {
        System.load(args[0]);
        String dir = args[1];
        int n = Integer.parseInt(args[2]);
        build(args.length > 3 ? Integer.parseInt(args[3]) : 8);
        String full = dir + "/cur.hprof";
        String mini = dir + "/cur.mini.hprof";
        String level = "arrays";
        int first = args.length > 4 && args[4].equals("p") ? 1 : 0;
        for (int i = 0; i < 2 * n + 1; i++) {
            // Let the reference handler and cleaner threads finish with what the previous full
            // GC found, so that they do not change the heap during the next dump.
            try {
                Thread.sleep(150);
            } catch (InterruptedException e) {
                return;
            }
            // The report goes to DIR/reports.jsonl. It is not kept in a local or printed here:
            // either would change the heap (a live String, System.out's buffers) between the
            // dumps being compared.
            if (dump(full, mini, level, (i + first) % 2 == 0) != null) {
                System.exit(3);
            }
        }
    }
}
