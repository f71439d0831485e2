# The ART dump bench's allocation churn (-Dbench.churn=N starts N of these before the dumps):
# allocates 64 KiB byte[] without pause into a ring of 16 (so 1 MiB stays live and the rest is
# garbage at once) until stop is set, counting them in allocated (every 16, and at the end).
# The heap task daemon's concurrent GCs, which this allocation keeps requesting, are then in
# flight at any moment: the fork dumper's GC critical section has to wait for the running one.
# With a large live heap most of its time goes to waiting for GCs (the heap barely grows past
# what is live), so it allocates little.
.class public Ldev/oomguard/testing/ArtBenchChurn;
.super Ljava/lang/Thread;

.field static volatile stop:Z
.field static volatile allocated:J

.method public constructor <init>(Ljava/lang/String;)V
    .registers 2
    invoke-direct {p0, p1}, Ljava/lang/Thread;-><init>(Ljava/lang/String;)V
    return-void
.end method

.method public run()V
    .registers 8
    const/16 v0, 0x10
    new-array v1, v0, [Ljava/lang/Object;
    const/4 v2, 0x0
    const/4 v4, 0x0
    :loop
    sget-boolean v3, Ldev/oomguard/testing/ArtBenchChurn;->stop:Z
    if-nez v3, :end
    const/high16 v3, 0x10000
    new-array v3, v3, [B
    aput-object v3, v1, v2
    add-int/lit8 v2, v2, 0x1
    rem-int v2, v2, v0
    add-int/lit8 v4, v4, 0x1
    const/16 v3, 0x10
    if-lt v4, v3, :loop
    invoke-static {v4}, Ldev/oomguard/testing/ArtBenchChurn;->count(I)V
    const/4 v4, 0x0
    goto :loop
    :end
    invoke-static {v4}, Ldev/oomguard/testing/ArtBenchChurn;->count(I)V
    return-void
.end method

# allocated += N, under the class's monitor (several churn threads).
.method static count(I)V
    .registers 5
    const-class v0, Ldev/oomguard/testing/ArtBenchChurn;
    monitor-enter v0
    sget-wide v1, Ldev/oomguard/testing/ArtBenchChurn;->allocated:J
    int-to-long v3, p0
    add-long/2addr v1, v3
    sput-wide v1, Ldev/oomguard/testing/ArtBenchChurn;->allocated:J
    monitor-exit v0
    return-void
.end method
