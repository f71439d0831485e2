package dev.oomguard.testing;

import java.io.BufferedReader;
import java.io.InputStreamReader;

/**
 * Benchmark driver for scripts/bench/dump.sh: builds a live heap of MB megabytes, then
 * <ul>
 *   <li>{@code wait}: prints "READY pid" and waits for a line on stdin (jcmd dumps it);</li>
 *   <li>{@code tee K}: K rounds of a plain dump then a hooked (tee + stripper) dump, reports in
 *       DIR/reports.jsonl;</li>
 *   <li>{@code fork}: forks a frozen child, prints "FORK {json}", waits for a line on stdin (the
 *       script dumps the child from outside), then kills and reaps it.</li>
 * </ul>
 * Usage: {@code DumpBench LIB DIR MB MODE [K]}.
 */
public final class DumpBench {
    public static void main(String[] args) throws Exception {
        System.load(args[0]);
        String dir = args[1];
        DumpProbe.build(Integer.parseInt(args[2]));
        String mode = args[3];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        switch (mode) {
            case "wait":
                System.out.println("READY " + ProcessHandle.current().pid());
                in.readLine();
                break;
            case "tee":
                int k = Integer.parseInt(args[4]);
                for (int i = 0; i < k; i++) {
                    for (boolean hooked : new boolean[] {false, true}) {
                        String r = DumpProbe.dump(dir + "/b.hprof", dir + "/b.mini.hprof", "arrays", hooked);
                        if (r != null) {
                            System.err.println(r);
                            System.exit(3);
                        }
                    }
                }
                break;
            case "fork":
                String r = DumpProbe.forkFrozen(900);
                System.out.println("FORK " + r);
                in.readLine();
                int pid = Integer.parseInt(r.replaceAll(".*\"pid\":(\\d+).*", "$1"));
                System.out.println("REAPED " + DumpProbe.reap(pid));
                break;
            default:
                throw new IllegalArgumentException(mode);
        }
        System.out.println("KEEP " + DumpProbe.KEEP.size());
    }
}
