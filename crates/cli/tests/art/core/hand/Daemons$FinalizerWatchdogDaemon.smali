# The finalizer watchdog: while the finalizer daemon runs a finalize() (begin/end, under this
# class's monitor), waits ART's finalizer timeout (VMRuntime.getFinalizerTimeoutMs, 10 s by
# default) and, if that same call is still running, says so on stdout and counts it in
# timedOut. Android's watchdog then kills the process; this one only reports (a test bed must
# not die of a slow finalizer the test did not plan). One wait per call: a spurious wake-up
# shortens it.
.class final Ljava/lang/Daemons$FinalizerWatchdogDaemon;
.super Ljava/lang/Thread;

# The object whose finalize() runs, or null; seq counts the calls begun.
.field private static current:Ljava/lang/Object;
.field private static seq:J
.field static volatile timedOut:I

.method constructor <init>()V
    .registers 3
    sget-object v0, Ljava/lang/ThreadGroup;->systemThreadGroup:Ljava/lang/ThreadGroup;
    const-string v1, "FinalizerWatchdogDaemon"
    invoke-direct {p0, v0, v1}, Ljava/lang/Thread;-><init>(Ljava/lang/ThreadGroup;Ljava/lang/String;)V
    const/4 v0, 0x1
    invoke-virtual {p0, v0}, Ljava/lang/Thread;->setDaemon(Z)V
    return-void
.end method

.method static begin(Ljava/lang/Object;)V
    .registers 6
    const-class v0, Ljava/lang/Daemons$FinalizerWatchdogDaemon;
    monitor-enter v0
    :try_start
    sput-object p0, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->current:Ljava/lang/Object;
    sget-wide v1, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->seq:J
    const-wide/16 v3, 0x1
    add-long/2addr v1, v3
    sput-wide v1, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->seq:J
    invoke-virtual {v0}, Ljava/lang/Object;->notifyAll()V
    monitor-exit v0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-void
    :unlock
    move-exception v1
    monitor-exit v0
    throw v1
.end method

.method static end()V
    .registers 3
    const-class v0, Ljava/lang/Daemons$FinalizerWatchdogDaemon;
    monitor-enter v0
    :try_start
    const/4 v1, 0x0
    sput-object v1, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->current:Ljava/lang/Object;
    invoke-virtual {v0}, Ljava/lang/Object;->notifyAll()V
    monitor-exit v0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-void
    :unlock
    move-exception v1
    monitor-exit v0
    throw v1
.end method

.method public run()V
    .registers 9
    new-instance v0, Ldalvik/system/VMRuntime;
    invoke-direct {v0}, Ldalvik/system/VMRuntime;-><init>()V
    invoke-virtual {v0}, Ldalvik/system/VMRuntime;->getFinalizerTimeoutMs()J
    move-result-wide v1
    const-class v0, Ljava/lang/Daemons$FinalizerWatchdogDaemon;
    :loop
    sget-boolean v3, Ljava/lang/Daemons;->stopping:Z
    if-nez v3, :done
    :try_start
    invoke-static {v0, v1, v2}, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->watchOne(Ljava/lang/Class;J)V
    :try_end
    .catch Ljava/lang/InterruptedException; {:try_start .. :try_end} :loop
    goto :loop
    :done
    return-void
.end method

# Under LOCK (this class): waits for a finalize() to begin, gives it TIMEOUT ms, reports it if
# it is still the one running, then waits for it to end.
.method private static watchOne(Ljava/lang/Class;J)V
    .registers 10
    monitor-enter p0
    :try_start
    :idle
    sget-object v0, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->current:Ljava/lang/Object;
    if-nez v0, :running
    invoke-virtual {p0}, Ljava/lang/Object;->wait()V
    goto :idle
    :running
    sget-wide v1, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->seq:J
    invoke-virtual {p0, p1, p2}, Ljava/lang/Object;->wait(J)V
    sget-object v0, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->current:Ljava/lang/Object;
    if-eqz v0, :out
    sget-wide v3, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->seq:J
    cmp-long v5, v3, v1
    if-nez v5, :out
    sget v5, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->timedOut:I
    add-int/lit8 v5, v5, 0x1
    sput v5, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->timedOut:I
    const-string v6, "FinalizerWatchdogDaemon: a finalize() ran past the finalizer timeout"
    invoke-static {v6}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    :stuck
    sget-object v0, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->current:Ljava/lang/Object;
    if-eqz v0, :out
    sget-wide v3, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->seq:J
    cmp-long v5, v3, v1
    if-nez v5, :out
    invoke-virtual {p0}, Ljava/lang/Object;->wait()V
    goto :stuck
    :out
    monitor-exit p0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-void
    :unlock
    move-exception v6
    monitor-exit p0
    throw v6
.end method
