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
 *   <li>{@code stop}: stops the agent and exits 0;
 *   <li>{@code exit}: exits 0 without stopping it (the shutdown hook marks the exit);
 *   <li>{@code report}: waits up to 5 s for the previous process's death to be handled, prints
 *       the status between {@code STATUS-BEGIN}/{@code STATUS-END}, stops and exits 0.
 * </ul>
 */
public final class DyingApp {
    static final List<Object> KEEP = new ArrayList<>();

    static int polls() {
        String s = OomGuard.status();
        int i = s.indexOf("\"polls\": ");
        if (i < 0) {
            return 0;
        }
        int j = i + 9;
        int k = j;
        while (k < s.length() && Character.isDigit(s.charAt(k))) {
            k++;
        }
        return k > j ? Integer.parseInt(s.substring(j, k)) : 0;
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

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String dataDir = args[1];
        String policy = new String(Files.readAllBytes(Paths.get(args[2])), "UTF-8");
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
