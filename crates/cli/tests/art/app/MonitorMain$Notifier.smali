# MonitorMain's notifier: sleeps 100 ms, then sets notified and calls notifyAll under the lock.
.class public LMonitorMain$Notifier;
.super Ljava/lang/Thread;

.method public constructor <init>(Ljava/lang/String;)V
    .registers 2
    invoke-direct {p0, p1}, Ljava/lang/Thread;-><init>(Ljava/lang/String;)V
    return-void
.end method

.method public run()V
    .registers 4
    const-wide/16 v0, 0x64
    invoke-static {v0, v1}, LAgentMain;->sleep(J)V
    sget-object v0, LMonitorMain;->lock:Ljava/lang/Object;
    monitor-enter v0
    const/4 v1, 0x1
    sput-boolean v1, LMonitorMain;->notified:Z
    invoke-virtual {v0}, Ljava/lang/Object;->notifyAll()V
    monitor-exit v0
    return-void
.end method
