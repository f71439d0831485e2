// Builds a Java 17 heap of a chosen number of objects, shaped like MakeDump's (customers with
// strings, int[] histories, orders with byte[] payloads and HashMap attributes, an index map and
// a linked list of events), with smaller payloads so that the dump's size grows with the object
// count rather than with bytes; then dumps it with HotSpotDiagnosticMXBean.dumpHeap. For the
// analyser's scale benchmarks (issue 43: 10 M and 30 M objects). The dumps are large: write them
// to /dev/shm or a temp dir, never into the repository.
//
// usage: java -Xmx6g -cp DIR MakeScaleDump OUT.hprof MILLION_OBJECTS
//   The count is approximate (within a few percent): objects are counted as they are made,
//   by class (a String is two objects, its value array one of them).

import com.sun.management.HotSpotDiagnosticMXBean;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.Random;

public class MakeScaleDump {
    static final List<Object> ROOTS = new ArrayList<>();

    // The objects are the bench dump's (java/tools/MakeDump.java, compiled with it).

    public static void main(String[] args) throws Exception {
        String out = args[0];
        long target = (long) (Double.parseDouble(args[1]) * 1_000_000);
        Random rnd = new Random(42);
        Map<Long, MakeDump.Customer> index = new HashMap<>();
        LinkedList<Object> events = new LinkedList<>();
        ROOTS.add(index);
        ROOTS.add(events);
        long objects = 0;
        long n = 0;
        while (objects < target) {
            int[] hist = new int[4 + rnd.nextInt(28)];
            for (int i = 0; i < hist.length; i++) hist[i] = rnd.nextInt();
            MakeDump.Customer c = new MakeDump.Customer(n, "customer-" + n, "user" + n + "@example.invalid", hist);
            // Customer, 2 Strings (2 each), int[], ArrayList and its array, the index's
            // HashMap.Node and Long key.
            objects += 1 + 4 + 1 + 2 + 2;
            int orders = 1 + rnd.nextInt(6);
            for (int o = 0; o < orders; o++) {
                byte[] payload = new byte[16 + rnd.nextInt(240)];
                rnd.nextBytes(payload);
                MakeDump.Order ord = new MakeDump.Order(n * 10 + o, rnd.nextDouble() * 100, payload);
                ord.attributes.put("channel", (o & 1) == 0 ? "web" : "app");
                ord.attributes.put("note", "order " + o + " of " + n);
                c.orders.add(ord);
                // Order, payload, HashMap, its table, 2 nodes, the note String (2).
                objects += 8;
            }
            index.put(n, c);
            if ((n & 7) == 0) {
                events.add(new Object[] {c, "event-" + n, Long.valueOf(n)});
                // LinkedList node, Object[], String (2), Long.
                objects += 5;
            }
            n++;
        }
        HotSpotDiagnosticMXBean bean = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
        java.io.File f = new java.io.File(out);
        if (f.exists()) f.delete();
        bean.dumpHeap(out, true);
        System.out.println("MakeScaleDump: " + n + " customers, ~" + objects + " objects counted, dumped to " + out);
    }
}
