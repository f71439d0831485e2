# The reference-queue daemon: waits for the references ART clears (ReferenceQueue.add) and puts
# each on its queue (ReferenceQueue.enqueuePending), until Daemons.stop() interrupts it.
.class final Ljava/lang/Daemons$ReferenceQueueDaemon;
.super Ljava/lang/Thread;

.method constructor <init>()V
    .registers 3
    sget-object v0, Ljava/lang/ThreadGroup;->systemThreadGroup:Ljava/lang/ThreadGroup;
    const-string v1, "ReferenceQueueDaemon"
    invoke-direct {p0, v0, v1}, Ljava/lang/Thread;-><init>(Ljava/lang/ThreadGroup;Ljava/lang/String;)V
    const/4 v0, 0x1
    invoke-virtual {p0, v0}, Ljava/lang/Thread;->setDaemon(Z)V
    return-void
.end method

.method public run()V
    .registers 2
    :loop
    sget-boolean v0, Ljava/lang/Daemons;->stopping:Z
    if-nez v0, :done
    :try_start
    invoke-static {}, Ljava/lang/ref/ReferenceQueue;->takePending()Ljava/lang/ref/Reference;
    move-result-object v1
    invoke-static {v1}, Ljava/lang/ref/ReferenceQueue;->enqueuePending(Ljava/lang/ref/Reference;)V
    :try_end
    .catch Ljava/lang/InterruptedException; {:try_start .. :try_end} :loop
    goto :loop
    :done
    return-void
.end method
