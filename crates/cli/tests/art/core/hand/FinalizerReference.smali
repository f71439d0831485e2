# java.lang.ref.FinalizerReference: ART allocates an object whose class overrides finalize() and
# calls the static add(Object) by name (WellKnownClasses::java_lang_ref_FinalizerReference_add).
# The reference is kept on a static list (so it stays reachable) until the collector finds its
# referent unreachable: ART then moves the referent to zombie, clears referent and hands the
# reference to ReferenceQueue.add; the reference-queue daemon puts it on QUEUE, where the
# finalizer daemon takes it, unlinks it (remove) and runs the zombie's finalize(). Instance
# fields: exactly ART 11's mirror::FinalizerReference (next, prev, zombie), which ART checks.
# The list is guarded by this class's monitor.
.class public final Ljava/lang/ref/FinalizerReference;
.super Ljava/lang/ref/Reference;

.field private next:Ljava/lang/ref/FinalizerReference;
.field private prev:Ljava/lang/ref/FinalizerReference;
.field private zombie:Ljava/lang/Object;

.field public static final queue:Ljava/lang/ref/ReferenceQueue;
.field private static head:Ljava/lang/ref/FinalizerReference;

.method static constructor <clinit>()V
    .registers 1
    new-instance v0, Ljava/lang/ref/ReferenceQueue;
    invoke-direct {v0}, Ljava/lang/ref/ReferenceQueue;-><init>()V
    sput-object v0, Ljava/lang/ref/FinalizerReference;->queue:Ljava/lang/ref/ReferenceQueue;
    return-void
.end method

.method public constructor <init>(Ljava/lang/Object;Ljava/lang/ref/ReferenceQueue;)V
    .registers 3
    invoke-direct {p0, p1, p2}, Ljava/lang/ref/Reference;-><init>(Ljava/lang/Object;Ljava/lang/ref/ReferenceQueue;)V
    return-void
.end method

# Called by ART for each new finalizable object: a reference to it, first on the list.
.method public static add(Ljava/lang/Object;)V
    .registers 5
    new-instance v0, Ljava/lang/ref/FinalizerReference;
    sget-object v1, Ljava/lang/ref/FinalizerReference;->queue:Ljava/lang/ref/ReferenceQueue;
    invoke-direct {v0, p0, v1}, Ljava/lang/ref/FinalizerReference;-><init>(Ljava/lang/Object;Ljava/lang/ref/ReferenceQueue;)V
    const-class v1, Ljava/lang/ref/FinalizerReference;
    monitor-enter v1
    :try_start
    sget-object v2, Ljava/lang/ref/FinalizerReference;->head:Ljava/lang/ref/FinalizerReference;
    iput-object v2, v0, Ljava/lang/ref/FinalizerReference;->next:Ljava/lang/ref/FinalizerReference;
    if-eqz v2, :first
    iput-object v0, v2, Ljava/lang/ref/FinalizerReference;->prev:Ljava/lang/ref/FinalizerReference;
    :first
    sput-object v0, Ljava/lang/ref/FinalizerReference;->head:Ljava/lang/ref/FinalizerReference;
    monitor-exit v1
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-void
    :unlock
    move-exception v3
    monitor-exit v1
    throw v3
.end method

# Takes REF off the list (the finalizer daemon, before it runs the zombie's finalize()).
.method public static remove(Ljava/lang/ref/FinalizerReference;)V
    .registers 5
    const-class v0, Ljava/lang/ref/FinalizerReference;
    monitor-enter v0
    :try_start
    iget-object v1, p0, Ljava/lang/ref/FinalizerReference;->prev:Ljava/lang/ref/FinalizerReference;
    iget-object v2, p0, Ljava/lang/ref/FinalizerReference;->next:Ljava/lang/ref/FinalizerReference;
    if-eqz v1, :was_head
    iput-object v2, v1, Ljava/lang/ref/FinalizerReference;->next:Ljava/lang/ref/FinalizerReference;
    goto :after
    :was_head
    sget-object v3, Ljava/lang/ref/FinalizerReference;->head:Ljava/lang/ref/FinalizerReference;
    if-ne v3, p0, :after
    sput-object v2, Ljava/lang/ref/FinalizerReference;->head:Ljava/lang/ref/FinalizerReference;
    :after
    if-eqz v2, :unlinked
    iput-object v1, v2, Ljava/lang/ref/FinalizerReference;->prev:Ljava/lang/ref/FinalizerReference;
    :unlinked
    const/4 v3, 0x0
    iput-object v3, p0, Ljava/lang/ref/FinalizerReference;->next:Ljava/lang/ref/FinalizerReference;
    iput-object v3, p0, Ljava/lang/ref/FinalizerReference;->prev:Ljava/lang/ref/FinalizerReference;
    monitor-exit v0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-void
    :unlock
    move-exception v3
    monitor-exit v0
    throw v3
.end method

# The object to finalize (what ART moved to zombie), cleared here so the next collection frees it.
.method public takeZombie()Ljava/lang/Object;
    .registers 3
    iget-object v0, p0, Ljava/lang/ref/FinalizerReference;->zombie:Ljava/lang/Object;
    const/4 v1, 0x0
    iput-object v1, p0, Ljava/lang/ref/FinalizerReference;->zombie:Ljava/lang/Object;
    return-object v0
.end method
