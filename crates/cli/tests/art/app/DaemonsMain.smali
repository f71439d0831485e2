# The core library's daemons at work (tests/art_runtime.rs, art_daemons_finalize_enqueue_and_gc):
# makes 2000 finalizable objects (DaemonsMain$Finalizable) and a WeakReference with a queue to
# one more object, drops them all, then churns through 256 MiB of 256 KiB arrays in the heap -Xmx
# gives (the heap task daemon runs the concurrent GCs this requests) and, for at most 10 s more,
# churns 4 MiB a round while fewer than 2000 finalize() calls have run. Prints finalized=N (the
# calls counted), weak_enqueued=1 when the WeakReference came off its queue (remove(5000)),
# weak_cleared=1 when its get() is then null, and the number of threads in the system group and
# its subgroups (threads=N: main and the four daemons at least); then calls Daemons.stop() and
# prints how many are left once the daemons have ended (after_stop=N, at most 5 s later).
.class public LDaemonsMain;
.super Ljava/lang/Object;

.field static volatile finalized:I

.method static churn(I)V
    .registers 4
    const/4 v0, 0x0
    :loop
    if-ge v0, p0, :done
    const/high16 v1, 0x40000
    new-array v1, v1, [B
    add-int/lit8 v0, v0, 0x1
    goto :loop
    :done
    return-void
.end method

# the weak reference to a fresh object (made here, so no register of main's frame holds it)
.method static weakTo(Ljava/lang/ref/ReferenceQueue;)Ljava/lang/ref/WeakReference;
    .registers 3
    new-instance v0, Ljava/lang/Object;
    invoke-direct {v0}, Ljava/lang/Object;-><init>()V
    new-instance v1, Ljava/lang/ref/WeakReference;
    invoke-direct {v1, v0, p0}, Ljava/lang/ref/WeakReference;-><init>(Ljava/lang/Object;Ljava/lang/ref/ReferenceQueue;)V
    return-object v1
.end method

.method static makeFinalizables(I)V
    .registers 3
    const/4 v0, 0x0
    :loop
    if-ge v0, p0, :done
    new-instance v1, LDaemonsMain$Finalizable;
    invoke-direct {v1}, LDaemonsMain$Finalizable;-><init>()V
    add-int/lit8 v0, v0, 0x1
    goto :loop
    :done
    return-void
.end method

.method public static main([Ljava/lang/String;)V
    .registers 10
    const/16 v0, 0x7d0
    invoke-static {v0}, LDaemonsMain;->makeFinalizables(I)V
    new-instance v1, Ljava/lang/ref/ReferenceQueue;
    invoke-direct {v1}, Ljava/lang/ref/ReferenceQueue;-><init>()V
    invoke-static {v1}, LDaemonsMain;->weakTo(Ljava/lang/ref/ReferenceQueue;)Ljava/lang/ref/WeakReference;
    move-result-object v2
    const/16 v3, 0x400
    invoke-static {v3}, LDaemonsMain;->churn(I)V
    # wait (at most 200 rounds of 16 churned arrays and 50 ms) for all finalize() calls
    const/4 v4, 0x0
    :wait
    sget v3, LDaemonsMain;->finalized:I
    if-ge v3, v0, :finalized
    const/16 v3, 0xc8
    if-ge v4, v3, :finalized
    const/16 v3, 0x10
    invoke-static {v3}, LDaemonsMain;->churn(I)V
    const-wide/16 v5, 0x32
    invoke-static {v5, v6}, LAgentMain;->sleep(J)V
    add-int/lit8 v4, v4, 0x1
    goto :wait
    :finalized
    const-string v3, "rounds"
    int-to-long v4, v4
    invoke-static {v3, v4, v5}, LMain;->print(Ljava/lang/String;J)V
    const-string v3, "finalized"
    sget v4, LDaemonsMain;->finalized:I
    int-to-long v4, v4
    invoke-static {v3, v4, v5}, LMain;->print(Ljava/lang/String;J)V
    const-wide/16 v5, 0x1388
    invoke-virtual {v1, v5, v6}, Ljava/lang/ref/ReferenceQueue;->remove(J)Ljava/lang/ref/Reference;
    move-result-object v3
    const/4 v4, 0x0
    if-ne v3, v2, :weak
    const/4 v4, 0x1
    :weak
    const-string v3, "weak_enqueued"
    int-to-long v4, v4
    invoke-static {v3, v4, v5}, LMain;->print(Ljava/lang/String;J)V
    invoke-virtual {v2}, Ljava/lang/ref/Reference;->get()Ljava/lang/Object;
    move-result-object v3
    const-wide/16 v4, 0x0
    if-nez v3, :cleared
    const-wide/16 v4, 0x1
    :cleared
    const-string v3, "weak_cleared"
    invoke-static {v3, v4, v5}, LMain;->print(Ljava/lang/String;J)V
    # threads of the system group and its subgroups
    invoke-static {}, Ljava/lang/Thread;->currentThread()Ljava/lang/Thread;
    move-result-object v3
    invoke-virtual {v3}, Ljava/lang/Thread;->getThreadGroup()Ljava/lang/ThreadGroup;
    move-result-object v3
    invoke-virtual {v3}, Ljava/lang/ThreadGroup;->getParent()Ljava/lang/ThreadGroup;
    move-result-object v3
    const/16 v4, 0x40
    new-array v4, v4, [Ljava/lang/Thread;
    const/4 v5, 0x1
    invoke-virtual {v3, v4, v5}, Ljava/lang/ThreadGroup;->enumerate([Ljava/lang/Thread;Z)I
    move-result v3
    const-string v4, "threads"
    int-to-long v5, v3
    invoke-static {v4, v5, v6}, LMain;->print(Ljava/lang/String;J)V
    # Daemons.stop(), as the runtime's shutdown calls it: wait (at most 100 x 50 ms) until the
    # four daemons have left their group, and print how many threads are left (after_stop=N)
    invoke-static {}, Ljava/lang/Daemons;->stop()V
    add-int/lit8 v7, v3, -0x4
    const/4 v8, 0x0
    :stopping
    invoke-static {}, LDaemonsMain;->systemThreads()I
    move-result v3
    if-le v3, v7, :stopped
    const/16 v4, 0x64
    if-ge v8, v4, :stopped
    const-wide/16 v5, 0x32
    invoke-static {v5, v6}, LAgentMain;->sleep(J)V
    add-int/lit8 v8, v8, 0x1
    goto :stopping
    :stopped
    const-string v4, "after_stop"
    int-to-long v5, v3
    invoke-static {v4, v5, v6}, LMain;->print(Ljava/lang/String;J)V
    return-void
.end method

# How many threads the system group and its subgroups hold.
.method static systemThreads()I
    .registers 3
    invoke-static {}, Ljava/lang/Thread;->currentThread()Ljava/lang/Thread;
    move-result-object v0
    invoke-virtual {v0}, Ljava/lang/Thread;->getThreadGroup()Ljava/lang/ThreadGroup;
    move-result-object v0
    invoke-virtual {v0}, Ljava/lang/ThreadGroup;->getParent()Ljava/lang/ThreadGroup;
    move-result-object v0
    const/16 v1, 0x40
    new-array v1, v1, [Ljava/lang/Thread;
    const/4 v2, 0x1
    invoke-virtual {v0, v1, v2}, Ljava/lang/ThreadGroup;->enumerate([Ljava/lang/Thread;Z)I
    move-result v0
    return v0
.end method
