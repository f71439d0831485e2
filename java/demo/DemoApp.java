// The leaky app of scripts/demo.sh: an "app" that keeps every destroyed CheckoutActivity (and its
// image cache) in a static history list, with oomguard started as Application.onCreate would.
//
// usage: java -Xmx256m -Djava.library.path=DIR -cp CLASSES DemoApp DATA_DIR POLICY_FILE DONE_FILE TIMEOUT_S
// It leaks until the agent's heap verdict, keeps the leak, and waits until DONE_FILE exists (the
// demo creates it once the collector has the report) or TIMEOUT_S passes; then it stops the agent.

import android.app.Activity;
import dev.oomguard.OomGuard;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

public class DemoApp {
    static class CheckoutActivity extends Activity {
        final List<byte[]> imageCache = new ArrayList<>();

        void onCreate() {
            for (int i = 0; i < 8; i++) imageCache.add(new byte[256 << 10]);
        }

        void onDestroy() {
            mDestroyed = true;
        }
    }

    /** The bug: a static history of every activity ever shown. */
    static class Session {
        static final List<Activity> sHistory = new ArrayList<>();
    }

    static final Runtime RT = Runtime.getRuntime();

    static long used() {
        return RT.totalMemory() - RT.freeMemory();
    }

    static boolean verdict() {
        return OomGuard.status().contains("\"last_verdict\": {");
    }

    public static void main(String[] args) throws Exception {
        String dataDir = args[0];
        String policy = new String(Files.readAllBytes(Paths.get(args[1])), "UTF-8");
        File done = new File(args[2]);
        long timeoutMs = Long.parseLong(args[3]) * 1000;
        int rc = OomGuard.start(policy, dataDir, "1.0.0-demo");
        System.out.println("demo app: OomGuard.start rc=" + rc + ", max heap " + (RT.maxMemory() >> 20) + " MB");
        long end = System.currentTimeMillis() + timeoutMs;
        // Grow to just under the fast-huge line (90 %), so the three-strike rule is what fires.
        long stop = RT.maxMemory() * 88 / 100;
        int screens = 0;
        // Once the heap has reached the line it grows no more: the first loop ends there, the
        // second only waits. The verdict shows in status() only after its incident (dump and
        // spool) is done, and the dump's own full GC brings used() under the line meanwhile; but
        // much of what it dropped were G1's fillers at the ends of regions (a 1 MB region holds
        // three of these 256 KB arrays), space no screen can use. Growing into it ran a 64 MB
        // heap out of memory before the report was made.
        while (!verdict() && used() < stop && System.currentTimeMillis() < end) {
            CheckoutActivity a = new CheckoutActivity();
            OomGuard.setCurrentPage("CheckoutActivity#" + screens);
            a.onCreate();
            a.onDestroy();
            Session.sHistory.add(a);
            screens++;
            Thread.sleep(120);
        }
        while (!verdict() && System.currentTimeMillis() < end) {
            Thread.sleep(120);
        }
        System.out.println("demo app: " + screens + " screens leaked, heap " + (used() >> 20) + " MB; verdict: " + verdict());
        while (!done.exists() && System.currentTimeMillis() < end) {
            Thread.sleep(200);
        }
        System.out.println("demo app: stopping the agent (rc=" + OomGuard.stop() + ")");
    }
}
