// Builds a realistic object graph in a real Java 17 heap, then dumps it with
// HotSpotDiagnosticMXBean.dumpHeap. Used by scripts/demo.sh, tests and scripts/bench.sh.
//
// usage: java -cp DIR MakeDump OUT.hprof TARGET_MB [MARKER]
//   TARGET_MB: roughly how much live heap to build (0 for a small one)
//   MARKER:    a string planted in the heap, as Latin-1 (a compact String and a byte[]) and as
//              UTF-16 (a String with a non-Latin-1 character, and a char[]), so that tests can
//              look for it in the stripped dump.

import com.sun.management.HotSpotDiagnosticMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.Random;

public class MakeDump {
    static final List<Object> ROOTS = new ArrayList<>();

    static final class Customer {
        final long id;
        final String name;
        final String email;
        final int[] history;
        final List<Order> orders = new ArrayList<>();
        Customer(long id, String name, String email, int[] history) {
            this.id = id; this.name = name; this.email = email; this.history = history;
        }
    }

    static final class Order {
        final long id;
        final double total;
        final byte[] payload;
        final Map<String, String> attributes = new HashMap<>();
        Order(long id, double total, byte[] payload) { this.id = id; this.total = total; this.payload = payload; }
    }

    public static void main(String[] args) throws Exception {
        String out = args[0];
        long targetMb = Long.parseLong(args[1]);
        String marker = args.length > 2 ? args[2] : null;
        Random rnd = new Random(42);
        if (marker != null) {
            ROOTS.add(new String(marker));                                   // Latin-1 String
            ROOTS.add(marker.getBytes(StandardCharsets.ISO_8859_1));         // byte[]
            ROOTS.add(new String(marker + "\u20ac"));                        // UTF-16 String
            ROOTS.add(marker.toCharArray());                                 // char[]
            ROOTS.add(new StringBuilder(marker).append('\u0100'));           // UTF-16 builder
        }
        long built = 0;
        long target = targetMb << 20;
        Map<Long, Customer> index = new HashMap<>();
        LinkedList<Object> events = new LinkedList<>();
        ROOTS.add(index);
        ROOTS.add(events);
        long n = 0;
        while (built < target || n < 2000) {
            int[] hist = new int[16 + rnd.nextInt(64)];
            for (int i = 0; i < hist.length; i++) hist[i] = rnd.nextInt();
            Customer c = new Customer(n, "customer-" + n, "user" + n + "@example.invalid", hist);
            built += 64 + hist.length * 4L + 80;
            int orders = 1 + rnd.nextInt(6);
            for (int o = 0; o < orders; o++) {
                byte[] payload = new byte[64 + rnd.nextInt(2048)];
                rnd.nextBytes(payload);
                Order ord = new Order(n * 10 + o, rnd.nextDouble() * 100, payload);
                ord.attributes.put("channel", (o & 1) == 0 ? "web" : "app");
                ord.attributes.put("note", "order " + o + " of " + n);
                c.orders.add(ord);
                built += 200 + payload.length;
            }
            index.put(n, c);
            if ((n & 7) == 0) events.add(new Object[] {c, "event-" + n, Long.valueOf(n)});
            n++;
        }
        HotSpotDiagnosticMXBean bean = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
        java.io.File f = new java.io.File(out);
        if (f.exists()) f.delete();
        bean.dumpHeap(out, true);
        System.out.println("MakeDump: " + n + " customers, ~" + (built >> 20) + " MB built, dumped to " + out);
    }
}
