// Destroyed activities held by threads in a real Java 17 heap, then a heap dump:
// - ThreadLeak$Threads.sLast: a Worker thread that has run and ended, whose field holds one;
// - a Worker thread still running (asleep, named "screen-loader"), whose field holds another;
// - a local variable of ThreadLeak$Holder.run on the thread "frame-holder";
// - a local variable of ThreadLeak.main on the main thread.
// It writes OUT.threads.json beside the dump: the process's threads by id and name, as the agent
// lists them in an incident's runningInfo.javaThreads.
// usage: java -cp DIR ThreadLeak OUT.hprof

import android.app.Activity;
import com.sun.management.HotSpotDiagnosticMXBean;
import java.lang.management.ManagementFactory;
import java.util.concurrent.CountDownLatch;

public class ThreadLeak {
    static class Screen extends Activity {}

    static class Worker extends Thread {
        Object target;
        final long sleepMs;

        Worker(Object target, long sleepMs, String name) {
            super(name);
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

    /** Holds a destroyed screen through a local variable only, asleep until interrupted. */
    static class Holder implements Runnable {
        final CountDownLatch ready = new CountDownLatch(1);
        static volatile int sink;

        @Override
        public void run() {
            // In an array, so that its path differs from main's local (paths of one shape are
            // one group, with one trace).
            Screen[] local = {new Screen()};
            local[0].mDestroyed = true;
            ready.countDown();
            try {
                Thread.sleep(600_000);
            } catch (InterruptedException e) {
                // ends
            }
            sink = local.hashCode();
        }
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\');
            if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    public static void main(String[] args) throws Exception {
        Screen ended = new Screen();
        ended.mDestroyed = true;
        Worker done = new Worker(ended, 0, "finished-worker");
        done.start();
        done.join();
        Threads.sLast = done;
        Screen held = new Screen();
        held.mDestroyed = true;
        Worker running = new Worker(held, 600_000, "screen-loader");
        running.start();
        held = null;
        Holder holder = new Holder();
        Thread frames = new Thread(holder, "frame-holder");
        frames.setDaemon(true);
        frames.start();
        holder.ready.await();
        Screen mine = new Screen();
        mine.mDestroyed = true;
        StringBuilder list = new StringBuilder("{\"javaThreads\": [");
        String sep = "";
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            list.append(sep).append("{\"id\": ").append(t.getId()).append(", \"name\": ")
                .append(quote(t.getName())).append('}');
            sep = ", ";
        }
        list.append("]}");
        java.nio.file.Files.write(java.nio.file.Paths.get(args[0] + ".threads.json"),
            list.toString().getBytes("UTF-8"));
        HotSpotDiagnosticMXBean bean = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
        java.io.File f = new java.io.File(args[0]);
        if (f.exists()) f.delete();
        bean.dumpHeap(args[0], true);
        Holder.sink = mine.hashCode();
    }
}
