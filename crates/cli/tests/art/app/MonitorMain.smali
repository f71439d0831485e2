# Monitors in the core library (tests/art_runtime.rs, art_monitors_wait_notify_and_exclude):
# 1. wait/notify between two threads: main holds a lock, starts a thread that sleeps 100 ms and
#    then, under the same lock, sets a flag and calls notifyAll; main calls wait() and prints
#    notified=1 when it woke up with the flag set (a wait() that returns at once prints 0).
# 2. A core synchronized method excludes: main holds its thread group's monitor while another
#    thread starts a third (Thread.start enters it in the group: ThreadGroup.add, synchronized);
#    main prints started_while_held=0 when that start was still blocked 300 ms later, and
#    started_after_release=1 once it went through after main let go.
.class public LMonitorMain;
.super Ljava/lang/Object;

.field static lock:Ljava/lang/Object;
.field static volatile notified:Z
.field static volatile adderRunning:Z
.field static volatile adderStarted:Z

.method public static main([Ljava/lang/String;)V
    .registers 8
    new-instance v0, Ljava/lang/Object;
    invoke-direct {v0}, Ljava/lang/Object;-><init>()V
    sput-object v0, LMonitorMain;->lock:Ljava/lang/Object;
    monitor-enter v0
    new-instance v1, LMonitorMain$Notifier;
    const-string v2, "notifier"
    invoke-direct {v1, v2}, LMonitorMain$Notifier;-><init>(Ljava/lang/String;)V
    invoke-virtual {v1}, Ljava/lang/Thread;->start()V
    invoke-virtual {v0}, Ljava/lang/Object;->wait()V
    sget-boolean v3, LMonitorMain;->notified:Z
    monitor-exit v0
    const-string v2, "notified"
    int-to-long v4, v3
    invoke-static {v2, v4, v5}, LMain;->print(Ljava/lang/String;J)V

    invoke-static {}, Ljava/lang/Thread;->currentThread()Ljava/lang/Thread;
    move-result-object v0
    invoke-virtual {v0}, Ljava/lang/Thread;->getThreadGroup()Ljava/lang/ThreadGroup;
    move-result-object v0
    monitor-enter v0
    new-instance v1, LMonitorMain$Adder;
    const-string v2, "adder"
    invoke-direct {v1, v2}, LMonitorMain$Adder;-><init>(Ljava/lang/String;)V
    invoke-virtual {v1}, Ljava/lang/Thread;->start()V
    # wait (at most 5 s) until the adder runs, then give its start 300 ms
    const/4 v3, 0x0
    :running
    sget-boolean v2, LMonitorMain;->adderRunning:Z
    if-nez v2, :hold
    const/16 v2, 0x1f4
    if-ge v3, v2, :hold
    const-wide/16 v4, 0xa
    invoke-static {v4, v5}, LAgentMain;->sleep(J)V
    add-int/lit8 v3, v3, 0x1
    goto :running
    :hold
    const-wide/16 v4, 0x12c
    invoke-static {v4, v5}, LAgentMain;->sleep(J)V
    sget-boolean v3, LMonitorMain;->adderStarted:Z
    monitor-exit v0
    const-string v2, "started_while_held"
    int-to-long v4, v3
    invoke-static {v2, v4, v5}, LMain;->print(Ljava/lang/String;J)V
    # now the start goes through (at most 10 s)
    const/4 v3, 0x0
    :after
    sget-boolean v2, LMonitorMain;->adderStarted:Z
    if-nez v2, :done
    const/16 v6, 0x3e8
    if-ge v3, v6, :done
    const-wide/16 v4, 0xa
    invoke-static {v4, v5}, LAgentMain;->sleep(J)V
    add-int/lit8 v3, v3, 0x1
    goto :after
    :done
    const-string v3, "started_after_release"
    int-to-long v4, v2
    invoke-static {v3, v4, v5}, LMain;->print(Ljava/lang/String;J)V
    return-void
.end method
