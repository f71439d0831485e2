# One of the app's other threads: allocates arrays of AllocThread.size bytes into a ring of 512
# (so it keeps that many alive and turns the rest into garbage), 16 at a time with a 1 ms sleep
# between rounds, until AllocThread.stop is set; counts them in allocated. Started with
# Thread.start.
.class public LAllocThread;
.super Ljava/lang/Thread;

.field static volatile stop:Z
.field static volatile size:I
.field static volatile finished:I
.field volatile allocated:J

.method public constructor <init>(Ljava/lang/String;)V
    .registers 2
    invoke-direct {p0, p1}, Ljava/lang/Thread;-><init>(Ljava/lang/String;)V
    return-void
.end method

.method public run()V
    .registers 10
    const/16 v0, 0x200
    new-array v1, v0, [Ljava/lang/Object;
    const/4 v2, 0x0
    :round
    sget-boolean v3, LAllocThread;->stop:Z
    if-nez v3, :end
    const/4 v4, 0x0
    :alloc
    const/16 v3, 0x10
    if-ge v4, v3, :sleep
    sget v3, LAllocThread;->size:I
    new-array v3, v3, [B
    aput-object v3, v1, v2
    add-int/lit8 v2, v2, 0x1
    rem-int v2, v2, v0
    add-int/lit8 v4, v4, 0x1
    goto :alloc
    :sleep
    iget-wide v5, p0, LAllocThread;->allocated:J
    const-wide/16 v7, 0x10
    add-long/2addr v5, v7
    iput-wide v5, p0, LAllocThread;->allocated:J
    const-wide/16 v5, 0x1
    invoke-static {v5, v6}, LAgentMain;->sleep(J)V
    goto :round
    :end
    const-class v3, LAllocThread;
    monitor-enter v3
    sget v4, LAllocThread;->finished:I
    add-int/lit8 v4, v4, 0x1
    sput v4, LAllocThread;->finished:I
    monitor-exit v3
    return-void
.end method
