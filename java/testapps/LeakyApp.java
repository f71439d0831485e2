import dev.oomguard.OomGuard;

import java.io.File;
import java.io.FileInputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * A program that leaks on purpose, for the agent's integration tests and benchmark.
 *
 * <p>Usage: {@code java LeakyApp MODE DATA_DIR [POLICY_FILE|-] [PUBLIC_KEY|-] [SECONDS]}; MODE is
 * heap, fd, threads, idle, dump, restart or bench. It starts the agent, leaks, waits until
 * {@code status()} shows a verdict (or a timeout), prints the status between
 * {@code STATUS-BEGIN}/{@code STATUS-END}, stops the agent and exits 0.
 *
 * <p>{@code restart} waits for the file {@code -Dleaky.fetchStarted} (the test's server holds the
 * agent's policy fetch open once it has it), stops the agent, tries to start it again and to dump,
 * then writes {@code -Dleaky.release} (the server answers) and starts it once the old one has
 * ended.
 */
public class LeakyApp {
    static final List<Object> KEEP = new ArrayList<>();
    static final Runtime RT = Runtime.getRuntime();

    static long used() {
        return RT.totalMemory() - RT.freeMemory();
    }

    static boolean verdict() {
        String s = OomGuard.status();
        return s.contains("\"last_verdict\": {");
    }

    /** Calls a leaky worker makes before it parks: its stack is deeper than the agent lists. */
    static final int WORKER_DEPTH = 40;

    /** Parks the calling thread on {@code park} under {@code depth} more calls of this method. */
    static void parkDeep(int depth, Object park) {
        if (depth > 0) {
            parkDeep(depth - 1, park);
            return;
        }
        synchronized (park) {
            try {
                park.wait();
            } catch (InterruptedException e) {
                // exit
            }
        }
    }

    static void waitVerdict(long timeoutMs) throws InterruptedException {
        long end = System.currentTimeMillis() + timeoutMs;
        while (!verdict() && System.currentTimeMillis() < end) {
            Thread.sleep(50);
        }
    }

    /** Wait (at most a minute) until {@code path} exists. */
    static boolean waitForFile(String path) throws InterruptedException {
        long end = System.currentTimeMillis() + 60_000;
        while (!new File(path).exists()) {
            if (System.currentTimeMillis() > end) {
                return false;
            }
            Thread.sleep(20);
        }
        return true;
    }

    static long rssKb() throws java.io.IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return -1;
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String dataDir = args[1];
        String policy = args.length > 2 && !args[2].equals("-") ? new String(Files.readAllBytes(Paths.get(args[2])), "UTF-8") : "";
        String key = args.length > 3 && !args[3].equals("-") ? args[3] : null;
        long seconds = args.length > 4 ? Long.parseLong(args[4]) : 20;

        if (mode.equals("bench")) {
            System.out.println("rss-kb before-load=" + rssKb());
            OomGuard.status(); // loads liboomguard.so
            System.out.println("rss-kb after-load=" + rssKb());
        }
        boolean noAgent = System.getenv("LEAKY_NO_AGENT") != null;
        long t0 = System.nanoTime();
        int rc = noAgent ? -1 : OomGuard.start(policy, dataDir, "9.9.9", key);
        long t1 = System.nanoTime();
        System.out.println("start rc=" + rc + " ns=" + (t1 - t0));
        System.out.println("second start rc=" + OomGuard.start(policy, dataDir, "9.9.9", key));
        System.out.println("page rc=" + OomGuard.setCurrentPage("LeakyActivity"));
        System.out.println("network rc=" + OomGuard.setNetwork(true, false));

        switch (mode) {
            case "heap": {
                long max = RT.maxMemory();
                System.out.println("max=" + max);
                // Quickly to 4 MB under 85 %, then 1 MB per step until a verdict or 89 %.
                long below = max * 85 / 100 - (4L << 20);
                while (used() < below) {
                    KEEP.add(new byte[256 << 10]);
                }
                Thread.sleep(1000);
                long stop = max * 89 / 100;
                while (!verdict() && used() < stop) {
                    for (int i = 0; i < 4; i++) {
                        KEEP.add(new byte[256 << 10]);
                    }
                    Thread.sleep(150);
                }
                waitVerdict(2000);
                System.out.println("used at end=" + used());
                break;
            }
            case "fd": {
                File f = new File(dataDir, "planted-leak.dat");
                Files.write(f.toPath(), new byte[] {1, 2, 3});
                String[] fds = new File("/proc/self/fd").list();
                int target = Integer.parseInt(System.getProperty("leaky.fds", "495"));
                int n = fds == null ? 0 : fds.length;
                while (n < target) {
                    KEEP.add(new FileInputStream(f));
                    n++;
                }
                System.out.println("fds now=" + new File("/proc/self/fd").list().length);
                waitVerdict(seconds * 1000);
                break;
            }
            case "threads": {
                final Object park = new Object();
                for (int i = 0; i < 800; i++) {
                    Thread t = new Thread(() -> parkDeep(WORKER_DEPTH, park), "leaky-worker-" + i);
                    t.setDaemon(true);
                    t.start();
                    KEEP.add(t);
                }
                waitVerdict(seconds * 1000);
                break;
            }
            case "bench": {
                Thread.sleep(1000);
                System.out.println("rss-kb started-1s=" + rssKb());
                // Hold N open fds (default 1000) and let the agent poll for SECONDS.
                File f = new File(dataDir, "bench-fd.dat");
                Files.write(f.toPath(), new byte[] {1});
                int target = Integer.parseInt(System.getProperty("leaky.fds", "1000"));
                String[] fds = new File("/proc/self/fd").list();
                for (int n = fds == null ? 0 : fds.length; n < target; n++) {
                    KEEP.add(new FileInputStream(f));
                }
                System.out.println("fds now=" + new File("/proc/self/fd").list().length);
                Thread.sleep(2000);
                System.out.println("rss-kb running-2s=" + rssKb());
                System.out.println("bench-ready");
                Thread.sleep(seconds * 1000);
                System.out.println("rss-kb running-end=" + rssKb());
                break;
            }
            case "idle":
                Thread.sleep(seconds * 1000);
                break;
            case "restart": {
                System.out.println("fetch started=" + waitForFile(System.getProperty("leaky.fetchStarted")));
                System.out.println("first stop rc=" + OomGuard.stop());
                System.out.println("stop while stopping rc=" + OomGuard.stop());
                int again = OomGuard.start(policy, dataDir, "9.9.9", key);
                System.out.println("restart rc=" + again);
                System.out.println("dumpNow after stop rc=" + OomGuard.dumpNow("after stop"));
                Files.write(Paths.get(System.getProperty("leaky.release")), new byte[0]);
                for (int tries = 0; again == OomGuard.ALREADY_RUNNING && tries < 600; tries++) {
                    Thread.sleep(100);
                    again = OomGuard.start(policy, dataDir, "9.9.9", key);
                }
                System.out.println("start once the fetch ended rc=" + again);
                break;
            }
            case "dump": {
                // A named thread for the incident's list of Java threads.
                Thread helper = new Thread(() -> {
                    try {
                        Thread.sleep(600_000);
                    } catch (InterruptedException e) {
                        // ends
                    }
                }, "leaky-helper");
                helper.setDaemon(true);
                helper.start();
                System.out.println("helper id=" + helper.getId());
                Thread.sleep(500);
                System.out.println("dumpNow rc=" + OomGuard.dumpNow("button pressed"));
                waitVerdict(seconds * 1000);
                break;
            }
            case "upload": {
                // A manual incident, then wait (at most `seconds`) until its upload is over: the
                // queue is empty again once the server acknowledged it (or until the status
                // matches -Dleaky.awaitStatus).
                System.out.println("dumpNow rc=" + OomGuard.dumpNow("uploaded"));
                waitVerdict(seconds * 1000);
                long end = System.currentTimeMillis() + seconds * 1000;
                java.util.regex.Pattern over = java.util.regex.Pattern.compile(System.getProperty(
                        "leaky.awaitStatus", "(?s).*\"action\":\\s*\"dumped\".*\"pending\":\\s*0\\b.*"));
                while (!over.matcher(OomGuard.status()).matches() && System.currentTimeMillis() < end) {
                    Thread.sleep(100);
                }
                break;
            }
            default:
                System.out.println("unknown mode " + mode);
        }
        System.out.println("ALIVE after " + mode);
        System.out.println("STATUS-BEGIN");
        System.out.println(OomGuard.status());
        System.out.println("STATUS-END");
        System.out.println("stop rc=" + OomGuard.stop());
        System.out.println("stop again rc=" + OomGuard.stop());
    }
}
