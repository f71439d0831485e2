package dev.oomguard;

/**
 * The app's handle on oomguard, the out-of-memory guard that runs inside this process.
 *
 * <p>Call {@link #start} once from {@code Application.onCreate} (or {@code main} on a JVM). It
 * returns at once: the agent runs on its own daemon thread named {@code oomguard}. No method here
 * ever throws: each returns a code ({@link #OK} on success) and the reason is in the log
 * ({@code adb logcat -s OomGuard} on Android, stderr on a JVM).
 *
 * <p>Plain Java with no Android dependency, so the same file compiles with {@code javac} and in
 * an Android build; device facts are read from {@code android.os.Build} by reflection when it
 * exists.
 */
public final class OomGuard {
    /** Success. */
    public static final int OK = 0;
    /** {@code start} while the agent already runs. */
    public static final int ALREADY_RUNNING = 1;
    /** {@code stop}/{@code dumpNow} while the agent does not run. */
    public static final int NOT_RUNNING = 2;
    /** A required argument was null or empty. */
    public static final int BAD_ARGUMENT = 3;
    /** The native side caught a panic (logged); the app is unaffected. */
    public static final int INTERNAL_ERROR = 4;
    /** Another native error (logged). */
    public static final int ERROR = 5;
    /** {@code liboomguard.so} could not be loaded. */
    public static final int LOAD_FAILED = 6;

    private static final Object LOCK = new Object();
    private static volatile boolean loaded;
    private static boolean watching;

    /**
     * Heap set aside for the last words: released before they are read, so that reading the
     * fatal error's frames (which the VM builds as new objects) can succeed in a heap the error
     * left full. It must be a block the collector frees whole: on ART any array of 12 KB or more
     * lives in the large-object space, so 64 KB; on HotSpot's G1 only an array of half a region or
     * more is freed as a region of its own (a smaller one freed in a full old region did not let
     * the frames be built in a 48 MB heap here), so 512 KB.
     */
    private static volatile byte[] reserve;

    /** The app's Context, for the system's exit records ({@link #setContext}). */
    private static volatile Object context;

    /** Where the system's exit records come from, when the app supplies them. */
    private static volatile ExitInfoSource exitInfoSource;

    /**
     * A source of the system's record of a process's end, in the text form the native side
     * reads: {@code key=value} lines with {@code pid}, {@code reason}, {@code subReason},
     * {@code status}, {@code importance}, {@code pss}, {@code rss} (kB), {@code timestamp} (ms),
     * {@code process} and {@code description}. A record without a {@code timestamp} (ms since
     * the epoch), or dated before that process started, is not attached (pids are reused); one
     * that takes more than 1 s is not waited for.
     */
    public interface ExitInfoSource {
        /** The record of process {@code pid}, or null when there is none. */
        String exitRecord(int pid);
    }

    private OomGuard() {}

    private static boolean load() {
        if (loaded) {
            return true;
        }
        synchronized (LOCK) {
            if (!loaded) {
                try {
                    System.loadLibrary("oomguard");
                    loaded = true;
                } catch (Throwable t) {
                    System.err.println("OomGuard: cannot load liboomguard: " + t);
                    return false;
                }
            }
            return true;
        }
    }

    /**
     * Start the agent.
     *
     * @param policyJson the policy the app ships, or null/empty for the built-in default
     * @param dataDir a private directory for {@code status.json} and the policy cache
     * @param appVersion the app's version name
     * @return {@link #OK}, or a code saying why not
     */
    public static int start(String policyJson, String dataDir, String appVersion) {
        return start(policyJson, dataDir, appVersion, null);
    }

    /**
     * Start the agent, requiring remote policies to be signed with {@code publicKeyBase64}
     * (ed25519, 32 bytes, base64).
     */
    public static int start(String policyJson, String dataDir, String appVersion, String publicKeyBase64) {
        if (!load()) {
            return LOAD_FAILED;
        }
        try {
            int code = nativeStart(policyJson, dataDir, appVersion, publicKeyBase64, manufacturer(), apiLevel());
            if (code == OK) {
                watchForTheEnd();
            }
            return code;
        } catch (Throwable t) {
            return ERROR;
        }
    }

    /**
     * Once per process: chain an uncaught-exception handler that records the last words of a
     * memory-related fatal error in the flight recorder before passing the error on to the handler
     * it replaced, and a shutdown hook that marks a normal exit. Neither is needed for the
     * recorder to see a death: a process killed without either is reported as one.
     */
    private static void watchForTheEnd() {
        synchronized (LOCK) {
            if (watching) {
                return;
            }
            watching = true;
        }
        // Bind both natives and cache the names of the usual fatal errors now: binding a native
        // method on first call, and a first Class.getName(), take Java heap, which an
        // OutOfMemoryError leaves none of.
        nativeLastWords(null, null);
        nativeExiting(false);
        for (Class<?> c : new Class<?>[] {
                OutOfMemoryError.class, java.io.FileNotFoundException.class,
                java.io.IOException.class, java.net.SocketException.class}) {
            c.getName();
        }
        // Load what reading the frames needs (StackTraceElement and its formatting) while the
        // heap has room: loading a class takes heap.
        new Throwable().getStackTrace()[0].toString();
        reserve = new byte[onAndroid() ? 64 << 10 : 512 << 10];
        final Thread.UncaughtExceptionHandler previous = Thread.getDefaultUncaughtExceptionHandler();
        Thread.setDefaultUncaughtExceptionHandler(new LastWords(previous));
        try {
            Runtime.getRuntime().addShutdownHook(new Thread("oomguard-exit") {
                @Override
                public void run() {
                    try {
                        nativeExiting(true);
                    } catch (Throwable ignored) {
                        // The VM is going away; nothing to report to.
                    }
                }
            });
        } catch (Throwable ignored) {
            // Already shutting down: no hook, and no exit mark (reported as a death at worst).
        }
    }

    /** Whether {@code e} (or a cause of it) is the heap, fds or threads running out. */
    static boolean memoryRelated(Throwable e) {
        for (int depth = 0; e != null && depth < 8; depth++, e = e.getCause()) {
            if (e instanceof OutOfMemoryError) {
                return true;
            }
            String m = e.getMessage();
            if (m != null
                    && (m.contains("Too many open files")
                            || m.contains("EMFILE")
                            || m.contains("pthread_create")
                            || m.contains("unable to create native thread")
                            || m.contains("unable to create new native thread"))) {
                return true;
            }
        }
        return false;
    }

    /** The chained handler. Allocates nothing on the Java heap before the native call. */
    private static final class LastWords implements Thread.UncaughtExceptionHandler {
        private final Thread.UncaughtExceptionHandler previous;

        LastWords(Thread.UncaughtExceptionHandler previous) {
            this.previous = previous;
        }

        @Override
        public void uncaughtException(Thread t, Throwable e) {
            try {
                if (memoryRelated(e)) {
                    reserve = null;
                    nativeLastWords(t, e);
                }
            } catch (Throwable ignored) {
                // Never stand between the error and the handler that reports it.
            }
            if (previous != null) {
                previous.uncaughtException(t, e);
                return;
            }
            // What the VM does without a default handler (ThreadGroup's would call us again),
            // without string concatenation, which an exhausted heap may refuse.
            try {
                System.err.print("Exception in thread \"");
                System.err.print(t.getName());
                System.err.print("\" ");
                e.printStackTrace();
            } catch (Throwable ignored) {
                // Nothing left to print with.
            }
        }
    }

    /**
     * Stop the agent. Waits for its thread to end, at most two seconds: an agent in the middle of
     * a dump or a policy fetch finishes that on its own thread and then ends; until it has,
     * {@link #start} returns {@link #ALREADY_RUNNING}, and {@link #dumpNow} and {@code stop}
     * {@link #NOT_RUNNING} (at once: a second stop does not wait again).
     */
    public static int stop() {
        if (!load()) {
            return LOAD_FAILED;
        }
        try {
            return nativeStop();
        } catch (Throwable t) {
            return ERROR;
        }
    }

    /**
     * Give the agent the application's {@code Context} (an {@code android.content.Context}; typed
     * Object so that this file compiles without Android). On API 30+ it is used to ask
     * {@code ActivityManager.getHistoricalProcessExitReasons} why the previous process ended,
     * for the next launch's death report. Without it the facade tries
     * {@code ActivityThread.currentApplication()}. Call it before {@link #start}.
     */
    public static void setContext(Object appContext) {
        context = appContext;
    }

    /**
     * Supply the system's exit records yourself (or, in tests, canned ones): {@code source} is
     * asked instead of {@code ActivityManager}. Null restores the default. Call it before
     * {@link #start}.
     */
    public static void setExitInfoSource(ExitInfoSource source) {
        exitInfoSource = source;
    }

    /**
     * Called by the native agent, on its own thread, when the previous process's flight ring says
     * it died: the system's record of process {@code pid}'s end, or null. Never throws. Called by
     * name from native code only ({@code jni/vm.rs}): marked {@link Keep} for minified builds.
     */
    @Keep
    static String exitRecord(int pid) {
        try {
            ExitInfoSource s = exitInfoSource;
            if (s != null) {
                return s.exitRecord(pid);
            }
            if (!onAndroid() || apiLevel() < 30) {
                return null;
            }
            return androidExitRecord(pid);
        } catch (Throwable t) {
            return null;
        }
    }

    /**
     * The agent's HTTP exchange, called by the native side by name on its I/O thread (keep it,
     * with {@link Http}): one request through {@code java.net.HttpURLConnection}, so that the
     * agent's policy fetches and uploads go where the app's own traffic goes (the device's
     * trust store and Network Security Config, the system proxy). Every rule about what may be
     * contacted, redirects, signatures and budgets is the native side's; this only carries
     * bytes. No redirect is followed. The body is {@code body}, or {@code bodyLength} bytes of
     * the file {@code bodyPath} from {@code bodyOffset}, streamed in 64 KiB chunks (never loaded
     * whole into the heap), or none. {@code headers} alternates names and values; only the
     * response headers named in {@code want} come back, and at most {@code maxBody} bytes of
     * the response body. Never throws: the answer, or the error, framed for the native side
     * ({@link Http#frame}).
     */
    @Keep
    private static byte[] http(String method, String url, String[] headers, byte[] body,
            String bodyPath, long bodyOffset, long bodyLength, int connectMs, int readMs,
            int deadlineMs, String[] want, int maxBody) {
        return Http.exchange(method, url, headers, body, bodyPath, bodyOffset, bodyLength,
                connectMs, readMs, deadlineMs, want, maxBody);
    }

    /** {@link #http}'s implementation (loaded on the first exchange only). */
    private static final class Http {
        /** Disconnects an exchange that outlives its deadline (a write has no timeout). */
        private static final java.util.Timer DEADLINES = new java.util.Timer("oomguard-http", true);

        static byte[] exchange(String method, String url, String[] headers, byte[] body,
                String bodyPath, long bodyOffset, long bodyLength, int connectMs, int readMs,
                int deadlineMs, String[] want, int maxBody) {
            long[] sent = {0};
            java.net.HttpURLConnection c = null;
            java.util.TimerTask cut = null;
            try {
                java.net.URL u = new java.net.URL(url);
                lookUpWithin(u.getHost(), connectMs);
                c = (java.net.HttpURLConnection) u.openConnection();
                final java.net.HttpURLConnection conn = c;
                cut = new java.util.TimerTask() {
                    @Override
                    public void run() {
                        try {
                            conn.disconnect();
                        } catch (Throwable t) {
                            // A task that throws would end the timer for every later exchange.
                        }
                    }
                };
                DEADLINES.schedule(cut, Math.max(1, deadlineMs));
                c.setInstanceFollowRedirects(false);
                c.setUseCaches(false);
                c.setConnectTimeout(Math.max(1, connectMs));
                c.setReadTimeout(Math.max(1, readMs));
                try {
                    c.setRequestMethod(method);
                } catch (java.net.ProtocolException e) {
                    // HotSpot's HttpURLConnection refuses PATCH: tus lets a POST carry it.
                    c.setRequestMethod("POST");
                    c.setRequestProperty("X-HTTP-Method-Override", method);
                }
                for (int i = 0; i + 1 < headers.length; i += 2) {
                    c.setRequestProperty(headers[i], headers[i + 1]);
                }
                long len = body != null ? body.length : bodyPath != null ? bodyLength : 0;
                java.io.IOException writeError = null;
                if (len > 0 || !("GET".equals(method) || "HEAD".equals(method))) {
                    c.setDoOutput(true);
                    c.setFixedLengthStreamingMode(len);
                    try {
                        send(c, body, bodyPath, bodyOffset, len, sent);
                    } catch (java.io.IOException e) {
                        writeError = e; // the server may have answered early (a 413)
                    }
                }
                int status;
                try {
                    status = c.getResponseCode();
                } catch (java.io.IOException e) {
                    throw writeError != null ? writeError : e;
                }
                if (status < 100) {
                    throw new java.io.IOException("the answer has no valid HTTP status line");
                }
                java.io.InputStream in = null;
                if (!"HEAD".equals(method)) {
                    in = status >= 400 ? c.getErrorStream() : c.getInputStream();
                }
                java.io.ByteArrayOutputStream got = new java.io.ByteArrayOutputStream();
                boolean truncated = false;
                if (in != null) {
                    try {
                        truncated = readAtMost(in, maxBody, got);
                    } finally {
                        in.close();
                    }
                }
                return frame(status, sent[0], c, want, got, truncated, null);
            } catch (Exception e) {
                return frame(-1, sent[0], null, null, null, false, String.valueOf(e));
            } finally {
                if (cut != null) {
                    cut.cancel();
                }
                if (c != null) {
                    c.disconnect();
                }
            }
        }

        /**
         * Resolve {@code host} within {@code ms} on a thread of its own: the connect timeout
         * does not cover the lookup. A name that does not resolve here is left to the
         * connection (a proxy may resolve it); one that takes too long fails the exchange.
         */
        private static void lookUpWithin(final String host, int ms) throws Exception {
            java.util.concurrent.FutureTask<Object> task =
                    new java.util.concurrent.FutureTask<Object>(
                            new java.util.concurrent.Callable<Object>() {
                                @Override
                                public Object call() throws Exception {
                                    return java.net.InetAddress.getAllByName(host);
                                }
                            });
            Thread t = new Thread(task, "oomguard-dns");
            t.setDaemon(true);
            t.start();
            try {
                task.get(Math.max(1, ms), java.util.concurrent.TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.TimeoutException e) {
                throw new java.io.IOException("DNS lookup of " + host + " took more than " + ms + " ms");
            } catch (java.util.concurrent.ExecutionException e) {
                // Unknown here: the connection says what it finds.
            }
        }

        private static void send(java.net.HttpURLConnection c, byte[] body, String path,
                long offset, long len, long[] sent) throws java.io.IOException {
            java.io.OutputStream out = c.getOutputStream();
            try {
                if (body != null) {
                    out.write(body);
                    sent[0] = body.length;
                } else if (path != null) {
                    java.io.RandomAccessFile f = new java.io.RandomAccessFile(path, "r");
                    try {
                        f.seek(offset);
                        byte[] buf = new byte[(int) Math.min(64 * 1024, Math.max(1, len))];
                        while (sent[0] < len) {
                            int k = f.read(buf, 0, (int) Math.min(buf.length, len - sent[0]));
                            if (k < 0) {
                                throw new java.io.IOException(path + " ended " + (len - sent[0]) + " bytes early");
                            }
                            out.write(buf, 0, k);
                            sent[0] += k;
                        }
                    } finally {
                        f.close();
                    }
                }
            } finally {
                out.close();
            }
        }

        /** Up to {@code max} bytes of {@code in} into {@code out}; true if more were left. */
        private static boolean readAtMost(java.io.InputStream in, int max, java.io.ByteArrayOutputStream out)
                throws java.io.IOException {
            byte[] buf = new byte[8192];
            while (true) {
                int k = in.read(buf);
                if (k < 0) {
                    return false;
                }
                int room = max - out.size();
                out.write(buf, 0, Math.min(k, room));
                if (k > room) {
                    return true;
                }
            }
        }

        /**
         * The answer as the native side reads it (big-endian, {@code DataOutputStream}): int
         * status, long bytes sent; then for an answer int header count, that many (UTF name,
         * UTF value), int body length, the body, boolean truncated; for an error (status -1) a
         * UTF message.
         */
        static byte[] frame(int status, long sent, java.net.HttpURLConnection c, String[] want,
                java.io.ByteArrayOutputStream body, boolean truncated, String error) {
            try {
                java.io.ByteArrayOutputStream b = new java.io.ByteArrayOutputStream();
                java.io.DataOutputStream d = new java.io.DataOutputStream(b);
                d.writeInt(status);
                d.writeLong(sent);
                if (status < 0) {
                    d.writeUTF(cut(error, 4000));
                } else {
                    java.util.List<String> pairs = new java.util.ArrayList<String>();
                    for (String name : want) {
                        String v = c.getHeaderField(name);
                        if (v != null) {
                            pairs.add(name);
                            pairs.add(cut(v, 8000));
                        }
                    }
                    d.writeInt(pairs.size() / 2);
                    for (String p : pairs) {
                        d.writeUTF(p);
                    }
                    d.writeInt(body.size());
                    body.writeTo(d);
                    d.writeBoolean(truncated);
                }
                d.flush();
                return b.toByteArray();
            } catch (java.io.IOException e) {
                return null; // not thrown by a ByteArrayOutputStream
            }
        }

        private static String cut(String s, int max) {
            return s.length() <= max ? s : s.substring(0, max);
        }
    }

    /** {@code ActivityManager.getHistoricalProcessExitReasons(package, pid, 1)}, by reflection. */
    private static String androidExitRecord(int pid) throws Exception {
        Object cx = context;
        if (cx == null) {
            cx = Class.forName("android.app.ActivityThread").getMethod("currentApplication").invoke(null);
        }
        if (cx == null) {
            return null;
        }
        Object am = cx.getClass().getMethod("getSystemService", String.class).invoke(cx, "activity");
        Object pkg = cx.getClass().getMethod("getPackageName").invoke(cx);
        if (am == null || pkg == null) {
            return null;
        }
        Object list = am.getClass()
                .getMethod("getHistoricalProcessExitReasons", String.class, int.class, int.class)
                .invoke(am, pkg, pid, 1);
        if (!(list instanceof java.util.List) || ((java.util.List<?>) list).isEmpty()) {
            return null;
        }
        Object info = ((java.util.List<?>) list).get(0);
        StringBuilder b = new StringBuilder();
        String[][] getters = {
            {"pid", "getPid"}, {"reason", "getReason"}, {"status", "getStatus"},
            {"importance", "getImportance"}, {"pss", "getPss"}, {"rss", "getRss"},
            {"timestamp", "getTimestamp"}, {"process", "getProcessName"}, {"description", "getDescription"},
        };
        for (String[] g : getters) {
            Object v = call(info, g[1]);
            if (v != null) {
                b.append(g[0]).append('=').append(oneLine(v.toString())).append('\n');
            }
        }
        // Hidden API: where it is refused, toString() names it ("subreason=N").
        Object sub = call(info, "getSubReason");
        if (sub == null) {
            String all = String.valueOf(info);
            int i = all.indexOf("subreason=");
            if (i >= 0) {
                int j = i + 10;
                int k = j;
                while (k < all.length() && (Character.isDigit(all.charAt(k)) || all.charAt(k) == '-')) {
                    k++;
                }
                sub = all.substring(j, k);
            }
        }
        if (sub != null) {
            b.append("subReason=").append(sub).append('\n');
        }
        return b.toString();
    }

    private static Object call(Object o, String method) {
        try {
            return o.getClass().getMethod(method).invoke(o);
        } catch (Throwable t) {
            return null;
        }
    }

    private static String oneLine(String s) {
        return s.replace('\n', ' ').replace('\r', ' ');
    }

    /** Act now, as if a trigger had fired, with {@code reason} recorded. */
    public static int dumpNow(String reason) {
        if (!load()) {
            return LOAD_FAILED;
        }
        try {
            return nativeDumpNow(reason);
        } catch (Throwable t) {
            return ERROR;
        }
    }

    /** The agent's state as JSON (last sample, strikes, policy version, last verdict, queue). */
    public static String status() {
        if (!load()) {
            return "{\"state\":\"load_failed\"}";
        }
        try {
            String s = nativeStatus();
            return s != null ? s : "{\"state\":\"error\"}";
        } catch (Throwable t) {
            return "{\"state\":\"error\"}";
        }
    }

    /** Tell the agent which screen is showing; recorded with the next verdict. */
    public static int setCurrentPage(String page) {
        if (!load()) {
            return LOAD_FAILED;
        }
        try {
            return nativeSetCurrentPage(page);
        } catch (Throwable t) {
            return ERROR;
        }
    }

    /**
     * Tell the agent the network state, for uploads: call it from a
     * {@code ConnectivityManager.NetworkCallback} ({@code onCapabilitiesChanged}: connected when
     * the network has {@code NET_CAPABILITY_INTERNET}, metered when it lacks
     * {@code NET_CAPABILITY_NOT_METERED}) and {@code onLost}. It may be called before {@link #start};
     * it only records the state and returns at once. A change to a connected network lets pending
     * reports go up; with the policy's {@code unmetered_only} (the default) nothing is uploaded on a
     * metered network.
     *
     * <p>Until it is called, the agent assumes a connected, unmetered network on a JVM and a
     * connected, metered one on Android, so that an app that never calls it never spends mobile
     * data.
     */
    public static int setNetwork(boolean connected, boolean metered) {
        if (!load()) {
            return LOAD_FAILED;
        }
        try {
            return nativeSetNetwork(connected, metered);
        } catch (Throwable t) {
            return ERROR;
        }
    }

    /** True on Android (ART reports itself as Dalvik); elsewhere no reflection is attempted. */
    private static boolean onAndroid() {
        return "Dalvik".equals(System.getProperty("java.vm.name"));
    }

    private static String manufacturer() {
        if (!onAndroid()) {
            return "";
        }
        try {
            Object v = Class.forName("android.os.Build").getField("MANUFACTURER").get(null);
            return v != null ? v.toString() : "";
        } catch (Throwable t) {
            return "";
        }
    }

    private static int apiLevel() {
        if (!onAndroid()) {
            return 0;
        }
        try {
            return Class.forName("android.os.Build$VERSION").getField("SDK_INT").getInt(null);
        } catch (Throwable t) {
            return 0;
        }
    }

    private static native int nativeStart(
            String policyJson, String dataDir, String appVersion, String publicKey, String manufacturer, int apiLevel);

    private static native int nativeStop();

    private static native int nativeDumpNow(String reason);

    private static native String nativeStatus();

    private static native int nativeSetCurrentPage(String page);

    private static native int nativeSetNetwork(boolean connected, boolean metered);

    private static native int nativeExiting(boolean exiting);

    private static native int nativeLastWords(Thread thread, Throwable error);
}
