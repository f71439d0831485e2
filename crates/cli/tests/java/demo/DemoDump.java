// The heap of scripts/demo.sh's app (java/demo/DemoApp.java) without the agent: the same classes
// and the same leak (destroyed CheckoutActivity objects kept in DemoApp$Session.sHistory), then a
// heap dump, so tests can read the demo's leak trace without running the whole incident.
// usage: java -cp DIR DemoDump OUT.hprof SCREENS

import com.sun.management.HotSpotDiagnosticMXBean;
import java.lang.management.ManagementFactory;

public class DemoDump {
    public static void main(String[] args) throws Exception {
        int screens = Integer.parseInt(args[1]);
        for (int i = 0; i < screens; i++) {
            DemoApp.CheckoutActivity a = new DemoApp.CheckoutActivity();
            a.onCreate();
            a.onDestroy();
            DemoApp.Session.sHistory.add(a);
        }
        HotSpotDiagnosticMXBean bean = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
        java.io.File f = new java.io.File(args[0]);
        if (f.exists()) f.delete();
        bean.dumpHeap(args[0], true);
    }
}
