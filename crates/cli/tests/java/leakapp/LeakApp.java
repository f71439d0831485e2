// Plants one of each leak oomguard's analyser detects in a real Java 17 heap, then dumps it.
// usage: java -cp DIR LeakApp OUT.hprof
//
// - LeakApp$Registry.sLeaked: a destroyed activity that retains CACHE_ARRAYS x CACHE_BYTES bytes;
// - a finished activity, a detached fragment, a 1080x1920 bitmap, a 300 KB byte[], 60 windows and
//   70 native allocation registries, all held by LeakApp$Holder.sThings;
// - things that are not leaks: a live activity and fragment, a small bitmap, and a destroyed
//   activity held only by a WeakReference.

import android.app.Activity;
import android.graphics.Bitmap;
import android.view.Window;
import androidx.fragment.app.Fragment;
import com.sun.management.HotSpotDiagnosticMXBean;
import java.lang.management.ManagementFactory;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;
import libcore.util.NativeAllocationRegistry;

public class LeakApp {
    public static final int CACHE_ARRAYS = 64;
    public static final int CACHE_BYTES = 65536;

    static class MainActivity extends Activity {
        final List<byte[]> cache = new ArrayList<>();
    }

    static class SettingsActivity extends Activity {}

    static class DetailFragment extends Fragment {}

    static class PhoneWindow extends Window {}

    static class Registry {
        static Activity sLeaked;
    }

    static class Holder {
        static Object[] sThings;
        static WeakReference<Activity> sWeak;
    }

    static void plant() {
        MainActivity act = new MainActivity();
        for (int i = 0; i < CACHE_ARRAYS; i++) act.cache.add(new byte[CACHE_BYTES]);
        act.mDestroyed = true;
        Registry.sLeaked = act;

        SettingsActivity finished = new SettingsActivity();
        finished.mFinished = true;
        SettingsActivity alive = new SettingsActivity();
        DetailFragment detached = new DetailFragment();
        detached.mCalled = true;
        DetailFragment attached = new DetailFragment();
        attached.mCalled = true;
        attached.mFragmentManager = new Object();
        Window[] windows = new Window[60];
        for (int i = 0; i < windows.length; i++) windows[i] = new PhoneWindow();
        NativeAllocationRegistry[] regs = new NativeAllocationRegistry[70];
        for (int i = 0; i < regs.length; i++) regs[i] = new NativeAllocationRegistry(i);
        Holder.sThings = new Object[] {
            finished, alive, detached, attached, new Bitmap(1080, 1920), new Bitmap(100, 100),
            new byte[300 * 1024], windows, regs,
        };
        SettingsActivity gone = new SettingsActivity();
        gone.mDestroyed = true;
        Holder.sWeak = new WeakReference<>(gone);
    }

    public static void main(String[] args) throws Exception {
        plant();
        HotSpotDiagnosticMXBean bean = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
        java.io.File f = new java.io.File(args[0]);
        if (f.exists()) f.delete();
        bean.dumpHeap(args[0], true);
    }
}
