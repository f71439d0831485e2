    # Reference(REFERENT, QUEUE): the collector treats referent specially; QUEUE (or null) is
    # where the reference goes once the referent is cleared (ReferenceQueue.enqueuePending).
    .registers 3
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    iput-object p1, p0, Ljava/lang/ref/Reference;->referent:Ljava/lang/Object;
    iput-object p2, p0, Ljava/lang/ref/Reference;->queue:Ljava/lang/ref/ReferenceQueue;
    return-void
