# java.lang.ref.ReferenceQueue: where the collector's cleared references go. ART calls the static
# add(Reference) by name (WellKnownClasses::java_lang_ref_ReferenceQueue_add) after a collection,
# with a circular list linked through Reference.pendingNext; the reference-queue daemon
# (Daemons$ReferenceQueueDaemon) takes that list (takePending) and puts each reference on its own
# queue (enqueuePending), where poll/remove find it. Written by hand; the static list is guarded
# by this class's monitor, a queue by its own.
.class public Ljava/lang/ref/ReferenceQueue;
.super Ljava/lang/Object;

# The references enqueued on this queue, newest first, linked through queueNext (the last one
# points at itself); null when empty.
.field private head:Ljava/lang/ref/Reference;
# The collector's cleared references not yet taken by the daemon (a circle), or null.
.field private static unenqueued:Ljava/lang/ref/Reference;

.method public constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    return-void
.end method

# Called by ART with LIST (a circle through pendingNext): joins it to the unenqueued circle and
# wakes the daemon. Two circles become one by swapping the successors of their first elements.
.method public static add(Ljava/lang/ref/Reference;)V
    .registers 5
    const-class v0, Ljava/lang/ref/ReferenceQueue;
    monitor-enter v0
    :try_start
    sget-object v1, Ljava/lang/ref/ReferenceQueue;->unenqueued:Ljava/lang/ref/Reference;
    if-nez v1, :splice
    sput-object p0, Ljava/lang/ref/ReferenceQueue;->unenqueued:Ljava/lang/ref/Reference;
    goto :notify
    :splice
    iget-object v2, v1, Ljava/lang/ref/Reference;->pendingNext:Ljava/lang/ref/Reference;
    iget-object v3, p0, Ljava/lang/ref/Reference;->pendingNext:Ljava/lang/ref/Reference;
    iput-object v3, v1, Ljava/lang/ref/Reference;->pendingNext:Ljava/lang/ref/Reference;
    iput-object v2, p0, Ljava/lang/ref/Reference;->pendingNext:Ljava/lang/ref/Reference;
    :notify
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

# The daemon's side: waits until ART has added cleared references, takes them all (a circle).
.method public static takePending()Ljava/lang/ref/Reference;
    .registers 4
    const-class v0, Ljava/lang/ref/ReferenceQueue;
    monitor-enter v0
    :try_start
    :loop
    sget-object v1, Ljava/lang/ref/ReferenceQueue;->unenqueued:Ljava/lang/ref/Reference;
    if-nez v1, :got
    invoke-virtual {v0}, Ljava/lang/Object;->wait()V
    goto :loop
    :got
    const/4 v2, 0x0
    sput-object v2, Ljava/lang/ref/ReferenceQueue;->unenqueued:Ljava/lang/ref/Reference;
    monitor-exit v0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-object v1
    :unlock
    move-exception v2
    monitor-exit v0
    throw v2
.end method

# Puts each reference of the circle LIST on its queue, if it has one. Each one's pendingNext is
# left pointing at itself: not null, so the collector does not take it up again.
.method public static enqueuePending(Ljava/lang/ref/Reference;)V
    .registers 4
    move-object v0, p0
    :loop
    iget-object v1, v0, Ljava/lang/ref/Reference;->pendingNext:Ljava/lang/ref/Reference;
    iput-object v0, v0, Ljava/lang/ref/Reference;->pendingNext:Ljava/lang/ref/Reference;
    iget-object v2, v0, Ljava/lang/ref/Reference;->queue:Ljava/lang/ref/ReferenceQueue;
    if-eqz v2, :next
    invoke-virtual {v2, v0}, Ljava/lang/ref/ReferenceQueue;->enqueue(Ljava/lang/ref/Reference;)V
    :next
    move-object v0, v1
    if-ne v0, p0, :loop
    return-void
.end method

# Puts REF on this queue and wakes its waiters.
.method enqueue(Ljava/lang/ref/Reference;)V
    .registers 4
    monitor-enter p0
    :try_start
    iget-object v0, p0, Ljava/lang/ref/ReferenceQueue;->head:Ljava/lang/ref/Reference;
    if-nez v0, :link
    move-object v0, p1
    :link
    iput-object v0, p1, Ljava/lang/ref/Reference;->queueNext:Ljava/lang/ref/Reference;
    iput-object p1, p0, Ljava/lang/ref/ReferenceQueue;->head:Ljava/lang/ref/Reference;
    invoke-virtual {p0}, Ljava/lang/Object;->notifyAll()V
    monitor-exit p0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-void
    :unlock
    move-exception v1
    monitor-exit p0
    throw v1
.end method

# A reference of this queue, taken off it, or null when it is empty.
.method public poll()Ljava/lang/ref/Reference;
    .registers 4
    monitor-enter p0
    :try_start
    iget-object v0, p0, Ljava/lang/ref/ReferenceQueue;->head:Ljava/lang/ref/Reference;
    if-eqz v0, :out
    iget-object v1, v0, Ljava/lang/ref/Reference;->queueNext:Ljava/lang/ref/Reference;
    if-ne v1, v0, :rest
    const/4 v1, 0x0
    :rest
    iput-object v1, p0, Ljava/lang/ref/ReferenceQueue;->head:Ljava/lang/ref/Reference;
    :out
    monitor-exit p0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-object v0
    :unlock
    move-exception v1
    monitor-exit p0
    throw v1
.end method

# Waits until a reference is on this queue and takes it (InterruptedException when interrupted).
.method public remove()Ljava/lang/ref/Reference;
    .registers 3
    monitor-enter p0
    :try_start
    :loop
    invoke-virtual {p0}, Ljava/lang/ref/ReferenceQueue;->poll()Ljava/lang/ref/Reference;
    move-result-object v0
    if-nez v0, :got
    invoke-virtual {p0}, Ljava/lang/Object;->wait()V
    goto :loop
    :got
    monitor-exit p0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-object v0
    :unlock
    move-exception v1
    monitor-exit p0
    throw v1
.end method

# remove() that waits at most MS milliseconds (one wait: it may return null sooner); null if
# nothing came.
.method public remove(J)Ljava/lang/ref/Reference;
    .registers 5
    monitor-enter p0
    :try_start
    invoke-virtual {p0}, Ljava/lang/ref/ReferenceQueue;->poll()Ljava/lang/ref/Reference;
    move-result-object v0
    if-nez v0, :got
    invoke-virtual {p0, p1, p2}, Ljava/lang/Object;->wait(J)V
    invoke-virtual {p0}, Ljava/lang/ref/ReferenceQueue;->poll()Ljava/lang/ref/Reference;
    move-result-object v0
    :got
    monitor-exit p0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-object v0
    :unlock
    move-exception v1
    monitor-exit p0
    throw v1
.end method
