import dev.oomguard.OomGuard;
import java.io.FileInputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * A program that dies in the ways the flight recorder must report, for tests/flight_jvm.rs.
 *
 * <p>{@code java DyingApp MODE DATA_DIR POLICY_FILE}. Every mode starts the agent, waits for its
 * first polls and prints {@code polls=N} lines as they come, then:
 * <ul>
 *   <li>{@code poll}: keeps polling until it is killed (the test's {@code kill -9});
 *   <li>{@code oom}: fills the heap until an {@code OutOfMemoryError} ends the main thread;
 *   <li>{@code fds}: opens files until "Too many open files" ends the main thread;
 *   <li>{@code threads}: starts threads until the VM cannot create one (run it under a pids
 *       limit: as root, RLIMIT_NPROC does not bind);
 *   <li>{@code grow}: takes native memory (direct buffers, touched) in steps of 4 MB every
 *       {@code -Ddying.stepMs} ms until the agent's last sample shows the memory cgroup's
 *       usage at {@code -Ddying.growPercent} of its limit (at most {@code -Ddying.growMb} MB),
 *       then waits to be killed;
 *   <li>{@code stop}: stops the agent and exits 0;
 *   <li>{@code exit}: exits 0 without stopping it (the shutdown hook marks the exit);
 *   <li>{@code report}: waits up to 5 s for the previous process's death to be handled (and,
 *       with {@code -Ddying.polls=N}, for N polls), prints the status between
 *       {@code STATUS-BEGIN}/{@code STATUS-END}, stops and exits 0.
 * </ul>
 *
 * <p>Every mode installs a canned source of the system's exit records (what Android's
 * {@code ActivityManager} answers on API 30+): for the pid asked, a low-memory kill, dated when
 * it is asked (after the death, as the system's own record is), or at {@code -Ddying.exitAt}
 * (ms since the epoch) when that is set: a stale record of an earlier process with that pid.
 * With {@code -Ddying.exitSleepMs=N} the source first sleeps N ms (a stuck binder call).
 */
public final class DyingApp {
    static final List<Object> KEEP = new ArrayList<>();

    static int polls() {
        return (int) number(OomGuard.status(), "polls");
    }

    /** The first number after {@code "key": } in the status JSON; -1 when absent. */
    static long number(String s, String key) {
        String at = "\"" + key + "\": ";
        int i = s.indexOf(at);
        if (i < 0) {
            return -1;
        }
        int j = i + at.length();
        int k = j;
        while (k < s.length() && Character.isDigit(s.charAt(k))) {
            k++;
        }
        return k > j ? Long.parseLong(s.substring(j, k)) : -1;
    }

    static void waitPolls(int n) throws InterruptedException {
        int last = -1;
        long end = System.currentTimeMillis() + 20_000;
        while (System.currentTimeMillis() < end) {
            int p = polls();
            if (p != last) {
                System.out.println("polls=" + p);
                System.out.flush();
                last = p;
            }
            if (p >= n) {
                return;
            }
            Thread.sleep(5);
        }
        throw new IllegalStateException("the agent did not poll " + n + " times");
    }

    /** Sleeps {@code ms}; returns "" (so that it can open the canned record). */
    static String sleepFor(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return "";
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String dataDir = args[1];
        String policy = new String(Files.readAllBytes(Paths.get(args[2])), "UTF-8");
        OomGuard.setExitInfoSource(pid -> sleepFor(Long.getLong("dying.exitSleepMs", 0L))
                + "pid=" + pid + "\nreason=3\nstatus=9\nsubReason=0\n"
                + "pss=123456\nrss=234567\ntimestamp="
                + Long.getLong("dying.exitAt", System.currentTimeMillis())
                + "\nprocess=DyingApp\ndescription=canned by DyingApp\n");
        int rc = OomGuard.start(policy, dataDir, "7.0.1", null);
        System.out.println("start rc=" + rc);
        OomGuard.setCurrentPage("Dying" + mode);
        switch (mode) {
            case "poll":
                waitPolls(Integer.MAX_VALUE);
                break;
            case "oom":
                waitPolls(3);
                while (true) {
                    KEEP.add(new long[1 << 16]);
                }
            case "fds":
                waitPolls(3);
                while (true) {
                    KEEP.add(new FileInputStream("/dev/null"));
                }
            case "threads":
                waitPolls(3);
                while (true) {
                    Thread t = new Thread(() -> {
                        try {
                            Thread.sleep(Long.MAX_VALUE);
                        } catch (InterruptedException e) {
                            // ends the thread
                        }
                    });
                    t.setDaemon(true);
                    t.start();
                    KEEP.add(t);
                }
            case "grow": {
                waitPolls(2);
                int mb = Integer.getInteger("dying.growMb", 64);
                long step = Long.getLong("dying.stepMs", 100L);
                int percent = Integer.getInteger("dying.growPercent", 90);
                for (int taken = 0; taken < mb; taken += 4) {
                    String st = OomGuard.status();
                    long ws = number(st, "cgroup_current");
                    long limit = number(st, "cgroup_limit");
                    if (ws > 0 && limit > 0 && ws * 100 >= limit * percent) {
                        System.out.println("held at " + (ws >> 20) + " of " + (limit >> 20) + " MB");
                        System.out.flush();
                        break;
                    }
                    java.nio.ByteBuffer b = java.nio.ByteBuffer.allocateDirect(4 << 20);
                    for (int i = 0; i < b.capacity(); i += 4096) {
                        b.put(i, (byte) 1);
                    }
                    KEEP.add(b);
                    System.out.println("grown=" + (taken + 4));
                    System.out.flush();
                    Thread.sleep(step);
                }
                Thread.sleep(120_000);
                break;
            }
            case "stop":
                waitPolls(2);
                System.out.println("stop rc=" + OomGuard.stop());
                return;
            case "exit":
                waitPolls(2);
                System.exit(0);
                return;
            case "report": {
                long end = System.currentTimeMillis() + 5_000;
                while (System.currentTimeMillis() < end
                        && !OomGuard.status().contains("\"flight\": \"/")
                        && !OomGuard.status().contains("\"flight\": \"off")) {
                    Thread.sleep(10);
                }
                int polls = Integer.getInteger("dying.polls", 0);
                if (polls > 0) {
                    waitPolls(polls);
                }
                System.out.println("STATUS-BEGIN");
                System.out.println(OomGuard.status());
                System.out.println("STATUS-END");
                System.out.println("stop rc=" + OomGuard.stop());
                return;
            }
            default:
                throw new IllegalArgumentException(mode);
        }
    }
}
