# The finalizer daemon: takes each FinalizerReference the reference-queue daemon put on
# FinalizerReference.queue, unlinks it, and runs its zombie's finalize() under the watchdog's
# eye (an exception from finalize() is dropped, as libcore's daemon drops it after logging);
# until Daemons.stop() interrupts it.
.class final Ljava/lang/Daemons$FinalizerDaemon;
.super Ljava/lang/Thread;

.method constructor <init>()V
    .registers 3
    sget-object v0, Ljava/lang/ThreadGroup;->systemThreadGroup:Ljava/lang/ThreadGroup;
    const-string v1, "FinalizerDaemon"
    invoke-direct {p0, v0, v1}, Ljava/lang/Thread;-><init>(Ljava/lang/ThreadGroup;Ljava/lang/String;)V
    const/4 v0, 0x1
    invoke-virtual {p0, v0}, Ljava/lang/Thread;->setDaemon(Z)V
    return-void
.end method

.method public run()V
    .registers 4
    :loop
    sget-boolean v0, Ljava/lang/Daemons;->stopping:Z
    if-nez v0, :done
    :try_start
    sget-object v0, Ljava/lang/ref/FinalizerReference;->queue:Ljava/lang/ref/ReferenceQueue;
    invoke-virtual {v0}, Ljava/lang/ref/ReferenceQueue;->remove()Ljava/lang/ref/Reference;
    move-result-object v1
    :try_end
    .catch Ljava/lang/InterruptedException; {:try_start .. :try_end} :loop
    check-cast v1, Ljava/lang/ref/FinalizerReference;
    invoke-static {v1}, Ljava/lang/ref/FinalizerReference;->remove(Ljava/lang/ref/FinalizerReference;)V
    invoke-virtual {v1}, Ljava/lang/ref/FinalizerReference;->takeZombie()Ljava/lang/Object;
    move-result-object v2
    if-eqz v2, :loop
    invoke-static {v2}, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->begin(Ljava/lang/Object;)V
    :finalize_start
    invoke-virtual {v2}, Ljava/lang/Object;->finalize()V
    :finalize_end
    .catchall {:finalize_start .. :finalize_end} :finalized
    :finalized
    invoke-static {}, Ljava/lang/Daemons$FinalizerWatchdogDaemon;->end()V
    goto :loop
    :done
    return-void
.end method
