# java.lang.Thread: ART creates the peer of every attached thread (the main thread, and threads
# that call AttachCurrentThread such as the agent's) with <init>(ThreadGroup, String, int,
# boolean), then reads the fields WellKnownClasses names and sets nativePeer itself. Written by
# hand: that constructor does real work. Thread(String) and start() start threads from Java
# (tests/art/app/AllocThread.smali).
.class public Ljava/lang/Thread;
.super Ljava/lang/Object;
.implements Ljava/lang/Runnable;

.field volatile nativePeer:J
.field volatile group:Ljava/lang/ThreadGroup;
.field volatile name:Ljava/lang/String;
.field private priority:I
.field private daemon:Z
.field private systemDaemon:Z
.field private unparkedBeforeStart:Z
.field private final lock:Ljava/lang/Object;
.field volatile parkBlocker:Ljava/lang/Object;
.field private contextClassLoader:Ljava/lang/ClassLoader;
.field private target:Ljava/lang/Runnable;
.field private started:Z
.field private tid:J
.field private static threadSeqNumber:J
.field private static volatile defaultUncaughtExceptionHandler:Ljava/lang/Thread$UncaughtExceptionHandler;

# Every constructor comes here: the lock, and the thread's id (libcore's tid, from 1 up).
.method public constructor <init>()V
    .registers 3
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    new-instance v0, Ljava/lang/Object;
    invoke-direct {v0}, Ljava/lang/Object;-><init>()V
    iput-object v0, p0, Ljava/lang/Thread;->lock:Ljava/lang/Object;
    invoke-static {}, Ljava/lang/Thread;->nextThreadID()J
    move-result-wide v0
    iput-wide v0, p0, Ljava/lang/Thread;->tid:J
    return-void
.end method

# Synchronized on the class, as a static synchronized method is (entered here: see start()).
.method private static declared-synchronized nextThreadID()J
    .registers 5
    const-class v4, Ljava/lang/Thread;
    monitor-enter v4
    :try_start
    sget-wide v0, Ljava/lang/Thread;->threadSeqNumber:J
    const-wide/16 v2, 0x1
    add-long/2addr v0, v2
    sput-wide v0, Ljava/lang/Thread;->threadSeqNumber:J
    monitor-exit v4
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-wide v0
    :unlock
    move-exception v0
    monitor-exit v4
    throw v0
.end method

.method public getId()J
    .registers 3
    iget-wide v0, p0, Ljava/lang/Thread;->tid:J
    return-wide v0
.end method

# A thread named NAME in the main group, not started (libcore's Thread(String)).
.method public constructor <init>(Ljava/lang/String;)V
    .registers 3
    invoke-direct {p0}, Ljava/lang/Thread;-><init>()V
    sget-object v0, Ljava/lang/ThreadGroup;->mainThreadGroup:Ljava/lang/ThreadGroup;
    iput-object v0, p0, Ljava/lang/Thread;->group:Ljava/lang/ThreadGroup;
    iput-object p1, p0, Ljava/lang/Thread;->name:Ljava/lang/String;
    const/4 v0, 0x5
    iput v0, p0, Ljava/lang/Thread;->priority:I
    return-void
.end method

# A thread named NAME in GROUP, not started (the daemons: the system group).
.method public constructor <init>(Ljava/lang/ThreadGroup;Ljava/lang/String;)V
    .registers 4
    invoke-direct {p0}, Ljava/lang/Thread;-><init>()V
    iput-object p1, p0, Ljava/lang/Thread;->group:Ljava/lang/ThreadGroup;
    iput-object p2, p0, Ljava/lang/Thread;->name:Ljava/lang/String;
    const/4 v0, 0x5
    iput v0, p0, Ljava/lang/Thread;->priority:I
    return-void
.end method

# Before start(): whether the runtime may end without waiting for this thread.
.method public final setDaemon(Z)V
    .registers 2
    iput-boolean p1, p0, Ljava/lang/Thread;->daemon:Z
    return-void
.end method

# Sets the thread's interrupt flag and wakes it from wait/sleep (ART's interrupt0).
.method public interrupt()V
    .registers 1
    invoke-virtual {p0}, Ljava/lang/Thread;->interrupt0()V
    return-void
.end method

# Starts the thread once, as libcore's start(): enters it in its group, then ART's nativeCreate
# makes the native thread, which runs run() and leaves the group (threadTerminated) at its end.
# Synchronized on the thread: in dex, declared-synchronized locks nothing on a non-native
# method, so the monitor is entered and exited here, and a catch-all exits it on an exception
# (as javac compiles a synchronized block); so are the core's other synchronized methods.
.method public declared-synchronized start()V
    .registers 6
    monitor-enter p0
    :try_start
    iget-boolean v0, p0, Ljava/lang/Thread;->started:Z
    if-nez v0, :done
    iget-object v0, p0, Ljava/lang/Thread;->group:Ljava/lang/ThreadGroup;
    invoke-virtual {v0, p0}, Ljava/lang/ThreadGroup;->add(Ljava/lang/Thread;)V
    const-wide/16 v1, 0x0
    iget-boolean v3, p0, Ljava/lang/Thread;->daemon:Z
    invoke-static {p0, v1, v2, v3}, Ljava/lang/Thread;->nativeCreate(Ljava/lang/Thread;JZ)V
    const/4 v0, 0x1
    iput-boolean v0, p0, Ljava/lang/Thread;->started:Z
    :done
    monitor-exit p0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-void
    :unlock
    move-exception v4
    monitor-exit p0
    throw v4
.end method

# The peer of a thread the runtime attaches: GROUP (null: the main group), NAME, PRIORITY,
# DAEMON. The runtime then enters it in its group (ThreadGroup.add), as with libcore's, whose
# constructor only counts it as unstarted: entering it here too listed it twice.
.method constructor <init>(Ljava/lang/ThreadGroup;Ljava/lang/String;IZ)V
    .registers 6
    invoke-direct {p0}, Ljava/lang/Thread;-><init>()V
    if-nez p1, :have_group
    sget-object p1, Ljava/lang/ThreadGroup;->mainThreadGroup:Ljava/lang/ThreadGroup;
    :have_group
    iput-object p1, p0, Ljava/lang/Thread;->group:Ljava/lang/ThreadGroup;
    iput-object p2, p0, Ljava/lang/Thread;->name:Ljava/lang/String;
    iput p3, p0, Ljava/lang/Thread;->priority:I
    iput-boolean p4, p0, Ljava/lang/Thread;->daemon:Z
    const/4 v0, 0x1
    iput-boolean v0, p0, Ljava/lang/Thread;->started:Z
    return-void
.end method

.method public run()V
    .registers 2
    iget-object v0, p0, Ljava/lang/Thread;->target:Ljava/lang/Runnable;
    if-eqz v0, :done
    invoke-interface {v0}, Ljava/lang/Runnable;->run()V
    :done
    return-void
.end method

.method public getName()Ljava/lang/String;
    .registers 2
    iget-object v0, p0, Ljava/lang/Thread;->name:Ljava/lang/String;
    return-object v0
.end method

.method public final declared-synchronized setName(Ljava/lang/String;)V
    .registers 3
    monitor-enter p0
    :try_start
    iput-object p1, p0, Ljava/lang/Thread;->name:Ljava/lang/String;
    monitor-exit p0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-void
    :unlock
    move-exception v0
    monitor-exit p0
    throw v0
.end method

.method public getThreadGroup()Ljava/lang/ThreadGroup;
    .registers 2
    iget-object v0, p0, Ljava/lang/Thread;->group:Ljava/lang/ThreadGroup;
    return-object v0
.end method

.method public getContextClassLoader()Ljava/lang/ClassLoader;
    .registers 2
    iget-object v0, p0, Ljava/lang/Thread;->contextClassLoader:Ljava/lang/ClassLoader;
    return-object v0
.end method

.method public final isDaemon()Z
    .registers 2
    iget-boolean v0, p0, Ljava/lang/Thread;->daemon:Z
    return v0
.end method

# Called for an exception no frame caught (ART on a thread's detach; the launcher for main's):
# hands it to the default handler, if one was set, as libcore does when the thread's group
# does not handle it itself (the group here never does).
.method public final dispatchUncaughtException(Ljava/lang/Throwable;)V
    .registers 3
    sget-object v0, Ljava/lang/Thread;->defaultUncaughtExceptionHandler:Ljava/lang/Thread$UncaughtExceptionHandler;
    if-eqz v0, :done
    invoke-interface {v0, p0, p1}, Ljava/lang/Thread$UncaughtExceptionHandler;->uncaughtException(Ljava/lang/Thread;Ljava/lang/Throwable;)V
    :done
    return-void
.end method

.method public static setDefaultUncaughtExceptionHandler(Ljava/lang/Thread$UncaughtExceptionHandler;)V
    .registers 1
    sput-object p0, Ljava/lang/Thread;->defaultUncaughtExceptionHandler:Ljava/lang/Thread$UncaughtExceptionHandler;
    return-void
.end method

.method public static getDefaultUncaughtExceptionHandler()Ljava/lang/Thread$UncaughtExceptionHandler;
    .registers 1
    sget-object v0, Ljava/lang/Thread;->defaultUncaughtExceptionHandler:Ljava/lang/Thread$UncaughtExceptionHandler;
    return-object v0
.end method

# The core library has no Map: null, which callers (the agent's thread-stack listing) take as
# "no stacks".
.method public static getAllStackTraces()Ljava/util/Map;
    .registers 1
    const/4 v0, 0x0
    return-object v0
.end method
