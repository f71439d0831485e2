# MonitorMain's adder: says it runs, starts a thread of its own group (Thread.start enters it in
# the group through the synchronized ThreadGroup.add), then says that start returned.
.class public LMonitorMain$Adder;
.super Ljava/lang/Thread;

.method public constructor <init>(Ljava/lang/String;)V
    .registers 2
    invoke-direct {p0, p1}, Ljava/lang/Thread;-><init>(Ljava/lang/String;)V
    return-void
.end method

.method public run()V
    .registers 4
    const/4 v0, 0x1
    sput-boolean v0, LMonitorMain;->adderRunning:Z
    new-instance v1, Ljava/lang/Thread;
    const-string v2, "added"
    invoke-direct {v1, v2}, Ljava/lang/Thread;-><init>(Ljava/lang/String;)V
    invoke-virtual {v1}, Ljava/lang/Thread;->start()V
    sput-boolean v0, LMonitorMain;->adderStarted:Z
    return-void
.end method
