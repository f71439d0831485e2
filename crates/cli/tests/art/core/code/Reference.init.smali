    # Reference(REFERENT): no queue.
    .registers 3
    const/4 v0, 0x0
    invoke-direct {p0, p1, v0}, Ljava/lang/ref/Reference;-><init>(Ljava/lang/Object;Ljava/lang/ref/ReferenceQueue;)V
    return-void
