# dev.oomguard.OomGuard as dex, for the ART test runtime: java/dev/oomguard/OomGuard.java
# written in smali (Debian has no d8), method for method: the same constants, load() through
# System.loadLibrary("oomguard"), each public method calling its native inside a catch of
# Throwable, and the same eight natives (tests/art_agent.rs checks they agree with the .java).
# Differences: a failed load is reported with System.logI and the Throwable's message (the
# test core library has no System.err or string conversion of objects). start() installs the
# flight recorder's uncaught-exception handler (OomGuard$LastWords, chained to the one it
# replaces) as the .java does, but no shutdown hook: the test core library runs none (the
# launcher ends the process with _exit), so nativeExiting is bound, never called with true.
# The handler's memoryRelated() looks for an OutOfMemoryError among the causes only: the core
# library's String has no contains() for the fd and thread messages. No heap is set aside for
# the last words (ART frees the unreachable objects of the thread that died). exitRecord(int)
# answers null: the core library has no ActivityManager.
.class public final Ldev/oomguard/OomGuard;
.super Ljava/lang/Object;

.field public static final OK:I = 0x0
.field public static final ALREADY_RUNNING:I = 0x1
.field public static final NOT_RUNNING:I = 0x2
.field public static final BAD_ARGUMENT:I = 0x3
.field public static final INTERNAL_ERROR:I = 0x4
.field public static final ERROR:I = 0x5
.field public static final LOAD_FAILED:I = 0x6

.field private static final LOCK:Ljava/lang/Object;
.field private static volatile loaded:Z
.field private static watching:Z

.method static constructor <clinit>()V
    .registers 1
    new-instance v0, Ljava/lang/Object;
    invoke-direct {v0}, Ljava/lang/Object;-><init>()V
    sput-object v0, Ldev/oomguard/OomGuard;->LOCK:Ljava/lang/Object;
    return-void
.end method

.method private constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    return-void
.end method

.method private static load()Z
    .registers 5
    sget-boolean v0, Ldev/oomguard/OomGuard;->loaded:Z
    if-eqz v0, :lock
    const/4 v0, 0x1
    return v0
    :lock
    sget-object v1, Ldev/oomguard/OomGuard;->LOCK:Ljava/lang/Object;
    monitor-enter v1
    :locked_start
    sget-boolean v0, Ldev/oomguard/OomGuard;->loaded:Z
    if-nez v0, :unlock_true
    :try_start
    const-string v2, "oomguard"
    invoke-static {v2}, Ljava/lang/System;->loadLibrary(Ljava/lang/String;)V
    const/4 v0, 0x1
    sput-boolean v0, Ldev/oomguard/OomGuard;->loaded:Z
    :try_end
    .catch Ljava/lang/Throwable; {:try_start .. :try_end} :load_failed
    :unlock_true
    monitor-exit v1
    const/4 v0, 0x1
    return v0
    :load_failed
    move-exception v0
    const-string v2, "OomGuard: cannot load liboomguard: "
    invoke-virtual {v0}, Ljava/lang/Throwable;->getMessage()Ljava/lang/String;
    move-result-object v3
    if-nez v3, :have_message
    const-string v3, "(no message)"
    :have_message
    invoke-virtual {v2, v3}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v2
    invoke-static {v2}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    monitor-exit v1
    const/4 v0, 0x0
    return v0
    :locked_end
    .catchall {:locked_start .. :locked_end} :any
    :any
    move-exception v0
    monitor-exit v1
    throw v0
.end method

.method public static start(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;)I
    .registers 4
    const/4 v0, 0x0
    invoke-static {p0, p1, p2, v0}, Ldev/oomguard/OomGuard;->start(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;)I
    move-result v0
    return v0
.end method

.method public static start(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;)I
    .registers 10
    invoke-static {}, Ldev/oomguard/OomGuard;->load()Z
    move-result v0
    if-nez v0, :loaded
    const/4 v0, 0x6
    return v0
    :loaded
    :try_start
    invoke-static {}, Ldev/oomguard/OomGuard;->manufacturer()Ljava/lang/String;
    move-result-object v4
    invoke-static {}, Ldev/oomguard/OomGuard;->apiLevel()I
    move-result v5
    move-object v0, p0
    move-object v1, p1
    move-object v2, p2
    move-object v3, p3
    invoke-static/range {v0 .. v5}, Ldev/oomguard/OomGuard;->nativeStart(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;I)I
    move-result v0
    if-nez v0, :not_ok
    invoke-static {}, Ldev/oomguard/OomGuard;->watchForTheEnd()V
    :not_ok
    return v0
    :try_end
    .catch Ljava/lang/Throwable; {:try_start .. :try_end} :error
    :error
    const/4 v0, 0x5
    return v0
.end method

.method public static stop()I
    .registers 1
    invoke-static {}, Ldev/oomguard/OomGuard;->load()Z
    move-result v0
    if-nez v0, :loaded
    const/4 v0, 0x6
    return v0
    :loaded
    :try_start
    invoke-static {}, Ldev/oomguard/OomGuard;->nativeStop()I
    move-result v0
    return v0
    :try_end
    .catch Ljava/lang/Throwable; {:try_start .. :try_end} :error
    :error
    const/4 v0, 0x5
    return v0
.end method

.method public static dumpNow(Ljava/lang/String;)I
    .registers 2
    invoke-static {}, Ldev/oomguard/OomGuard;->load()Z
    move-result v0
    if-nez v0, :loaded
    const/4 v0, 0x6
    return v0
    :loaded
    :try_start
    invoke-static {p0}, Ldev/oomguard/OomGuard;->nativeDumpNow(Ljava/lang/String;)I
    move-result v0
    return v0
    :try_end
    .catch Ljava/lang/Throwable; {:try_start .. :try_end} :error
    :error
    const/4 v0, 0x5
    return v0
.end method

.method public static setCurrentPage(Ljava/lang/String;)I
    .registers 2
    invoke-static {}, Ldev/oomguard/OomGuard;->load()Z
    move-result v0
    if-nez v0, :loaded
    const/4 v0, 0x6
    return v0
    :loaded
    :try_start
    invoke-static {p0}, Ldev/oomguard/OomGuard;->nativeSetCurrentPage(Ljava/lang/String;)I
    move-result v0
    return v0
    :try_end
    .catch Ljava/lang/Throwable; {:try_start .. :try_end} :error
    :error
    const/4 v0, 0x5
    return v0
.end method

.method public static setNetwork(ZZ)I
    .registers 3
    invoke-static {}, Ldev/oomguard/OomGuard;->load()Z
    move-result v0
    if-nez v0, :loaded
    const/4 v0, 0x6
    return v0
    :loaded
    :try_start
    invoke-static {p0, p1}, Ldev/oomguard/OomGuard;->nativeSetNetwork(ZZ)I
    move-result v0
    return v0
    :try_end
    .catch Ljava/lang/Throwable; {:try_start .. :try_end} :error
    :error
    const/4 v0, 0x5
    return v0
.end method

.method public static status()Ljava/lang/String;
    .registers 2
    invoke-static {}, Ldev/oomguard/OomGuard;->load()Z
    move-result v0
    if-nez v0, :loaded
    const-string v0, "{\"state\":\"load_failed\"}"
    return-object v0
    :loaded
    :try_start
    invoke-static {}, Ldev/oomguard/OomGuard;->nativeStatus()Ljava/lang/String;
    move-result-object v0
    :try_end
    .catch Ljava/lang/Throwable; {:try_start .. :try_end} :error
    if-eqz v0, :none
    return-object v0
    :none
    const-string v0, "{\"state\":\"error\"}"
    return-object v0
    :error
    const-string v0, "{\"state\":\"error\"}"
    return-object v0
.end method

# Once per process: bind the two natives early, then chain the handler.
.method private static watchForTheEnd()V
    .registers 4
    sget-object v0, Ldev/oomguard/OomGuard;->LOCK:Ljava/lang/Object;
    monitor-enter v0
    :locked_start
    sget-boolean v1, Ldev/oomguard/OomGuard;->watching:Z
    if-eqz v1, :first
    monitor-exit v0
    return-void
    :first
    const/4 v1, 0x1
    sput-boolean v1, Ldev/oomguard/OomGuard;->watching:Z
    monitor-exit v0
    :locked_end
    .catchall {:locked_start .. :locked_end} :any
    const/4 v1, 0x0
    invoke-static {v1, v1}, Ldev/oomguard/OomGuard;->nativeLastWords(Ljava/lang/Thread;Ljava/lang/Throwable;)I
    invoke-static {v1}, Ldev/oomguard/OomGuard;->nativeExiting(Z)I
    invoke-static {}, Ljava/lang/Thread;->getDefaultUncaughtExceptionHandler()Ljava/lang/Thread$UncaughtExceptionHandler;
    move-result-object v2
    new-instance v3, Ldev/oomguard/OomGuard$LastWords;
    invoke-direct {v3, v2}, Ldev/oomguard/OomGuard$LastWords;-><init>(Ljava/lang/Thread$UncaughtExceptionHandler;)V
    invoke-static {v3}, Ljava/lang/Thread;->setDefaultUncaughtExceptionHandler(Ljava/lang/Thread$UncaughtExceptionHandler;)V
    return-void
    :any
    move-exception v1
    monitor-exit v0
    throw v1
.end method

# Whether E (or a cause of it, 8 deep) is an OutOfMemoryError.
.method static memoryRelated(Ljava/lang/Throwable;)Z
    .registers 3
    const/4 v0, 0x0
    :loop
    if-eqz p0, :no
    const/16 v1, 0x8
    if-ge v0, v1, :no
    instance-of v1, p0, Ljava/lang/OutOfMemoryError;
    if-eqz v1, :next
    const/4 v1, 0x1
    return v1
    :next
    invoke-virtual {p0}, Ljava/lang/Throwable;->getCause()Ljava/lang/Throwable;
    move-result-object p0
    add-int/lit8 v0, v0, 0x1
    goto :loop
    :no
    const/4 v1, 0x0
    return v1
.end method

# Called from native code for the system's exit record of PID: none in the test core library.
.method static exitRecord(I)Ljava/lang/String;
    .registers 2
    const/4 v0, 0x0
    return-object v0
.end method

.method static callLastWords(Ljava/lang/Thread;Ljava/lang/Throwable;)I
    .registers 3
    invoke-static {p0, p1}, Ldev/oomguard/OomGuard;->nativeLastWords(Ljava/lang/Thread;Ljava/lang/Throwable;)I
    move-result v0
    return v0
.end method

.method private static onAndroid()Z
    .registers 2
    const-string v0, "Dalvik"
    const-string v1, "java.vm.name"
    invoke-static {v1}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v1
    invoke-virtual {v0, v1}, Ljava/lang/String;->equals(Ljava/lang/Object;)Z
    move-result v0
    return v0
.end method

.method private static manufacturer()Ljava/lang/String;
    .registers 3
    invoke-static {}, Ldev/oomguard/OomGuard;->onAndroid()Z
    move-result v0
    if-nez v0, :android
    const-string v0, ""
    return-object v0
    :android
    :try_start
    const-string v0, "android.os.Build"
    invoke-static {v0}, Ljava/lang/Class;->forName(Ljava/lang/String;)Ljava/lang/Class;
    move-result-object v0
    const-string v1, "MANUFACTURER"
    invoke-virtual {v0, v1}, Ljava/lang/Class;->getField(Ljava/lang/String;)Ljava/lang/reflect/Field;
    move-result-object v0
    const/4 v1, 0x0
    invoke-virtual {v0, v1}, Ljava/lang/reflect/Field;->get(Ljava/lang/Object;)Ljava/lang/Object;
    move-result-object v0
    if-eqz v0, :empty
    invoke-virtual {v0}, Ljava/lang/Object;->toString()Ljava/lang/String;
    move-result-object v0
    return-object v0
    :try_end
    .catch Ljava/lang/Throwable; {:try_start .. :try_end} :empty
    :empty
    const-string v0, ""
    return-object v0
.end method

.method private static apiLevel()I
    .registers 3
    invoke-static {}, Ldev/oomguard/OomGuard;->onAndroid()Z
    move-result v0
    if-nez v0, :android
    const/4 v0, 0x0
    return v0
    :android
    :try_start
    const-string v0, "android.os.Build$VERSION"
    invoke-static {v0}, Ljava/lang/Class;->forName(Ljava/lang/String;)Ljava/lang/Class;
    move-result-object v0
    const-string v1, "SDK_INT"
    invoke-virtual {v0, v1}, Ljava/lang/Class;->getField(Ljava/lang/String;)Ljava/lang/reflect/Field;
    move-result-object v0
    const/4 v1, 0x0
    invoke-virtual {v0, v1}, Ljava/lang/reflect/Field;->getInt(Ljava/lang/Object;)I
    move-result v0
    return v0
    :try_end
    .catch Ljava/lang/Throwable; {:try_start .. :try_end} :zero
    :zero
    const/4 v0, 0x0
    return v0
.end method

.method private static native nativeStart(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;I)I
.end method

.method private static native nativeStop()I
.end method

.method private static native nativeDumpNow(Ljava/lang/String;)I
.end method

.method private static native nativeStatus()Ljava/lang/String;
.end method

.method private static native nativeSetCurrentPage(Ljava/lang/String;)I
.end method

.method private static native nativeSetNetwork(ZZ)I
.end method

.method private static native nativeExiting(Z)I
.end method

.method private static native nativeLastWords(Ljava/lang/Thread;Ljava/lang/Throwable;)I
.end method
