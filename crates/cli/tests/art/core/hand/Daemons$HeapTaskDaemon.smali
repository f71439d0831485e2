# The heap task daemon: starts ART's heap task processor and runs its tasks (concurrent GCs the
# heap requests when allocation crosses its threshold, trims, ...) until Daemons.stop() stops
# the processor. Without it those requests queue up unserved and only allocation-time GCs run.
# The start is under Daemons' monitor, so a stop() that came first is not undone.
.class final Ljava/lang/Daemons$HeapTaskDaemon;
.super Ljava/lang/Thread;

.method constructor <init>()V
    .registers 3
    sget-object v0, Ljava/lang/ThreadGroup;->systemThreadGroup:Ljava/lang/ThreadGroup;
    const-string v1, "HeapTaskDaemon"
    invoke-direct {p0, v0, v1}, Ljava/lang/Thread;-><init>(Ljava/lang/ThreadGroup;Ljava/lang/String;)V
    const/4 v0, 0x1
    invoke-virtual {p0, v0}, Ljava/lang/Thread;->setDaemon(Z)V
    return-void
.end method

.method public run()V
    .registers 4
    new-instance v0, Ldalvik/system/VMRuntime;
    invoke-direct {v0}, Ldalvik/system/VMRuntime;-><init>()V
    const-class v1, Ljava/lang/Daemons;
    monitor-enter v1
    :try_start
    sget-boolean v2, Ljava/lang/Daemons;->stopping:Z
    if-nez v2, :unlocked
    invoke-virtual {v0}, Ldalvik/system/VMRuntime;->startHeapTaskProcessor()V
    :unlocked
    monitor-exit v1
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    if-nez v2, :done
    invoke-virtual {v0}, Ldalvik/system/VMRuntime;->runHeapTasks()V
    :done
    return-void
    :unlock
    move-exception v2
    monitor-exit v1
    throw v2
.end method
