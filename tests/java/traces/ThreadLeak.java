// Destroyed activities held by threads in a real Java 17 heap, then a heap dump:
// - ThreadLeak$Threads.sLast: a Worker thread that has run and ended, whose field holds one;
// - a Worker thread still running (asleep), whose field holds another.
// usage: java -cp DIR ThreadLeak OUT.hprof

import android.app.Activity;
import com.sun.management.HotSpotDiagnosticMXBean;
import java.lang.management.ManagementFactory;

public class ThreadLeak {
    static class Screen extends Activity {}

    static class Worker extends Thread {
        Object target;
        final long sleepMs;

        Worker(Object target, long sleepMs) {
            this.target = target;
            this.sleepMs = sleepMs;
            setDaemon(true);
        }

        @Override
        public void run() {
            try {
                Thread.sleep(sleepMs);
            } catch (InterruptedException e) {
                // ends
            }
        }
    }

    static class Threads {
        static Worker sLast;
    }

    public static void main(String[] args) throws Exception {
        Screen ended = new Screen();
        ended.mDestroyed = true;
        Worker done = new Worker(ended, 0);
        done.start();
        done.join();
        Threads.sLast = done;
        Screen held = new Screen();
        held.mDestroyed = true;
        Worker running = new Worker(held, 600_000);
        running.start();
        HotSpotDiagnosticMXBean bean = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
        java.io.File f = new java.io.File(args[0]);
        if (f.exists()) f.delete();
        bean.dumpHeap(args[0], true);
    }
}
