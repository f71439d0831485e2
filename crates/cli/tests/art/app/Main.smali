# The first program run on ART in the tests (tests/art_runtime.rs): builds a linked list of
# objects holding byte arrays, then churns through far more garbage than the heap holds, so
# allocation-time GCs must run, and prints what it kept and the heap figures Runtime reports
# with a 16 MiB array live.
.class public LMain;
.super Ljava/lang/Object;

.field next:LMain;
.field payload:[B

.method public constructor <init>(LMain;I)V
    .registers 4
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    iput-object p1, p0, LMain;->next:LMain;
    new-array v0, p2, [B
    iput-object v0, p0, LMain;->payload:[B
    # Mark the array: its last byte is its length's low byte, checked when the list is walked.
    add-int/lit8 v1, p2, -0x1
    int-to-byte p2, p2
    aput-byte p2, v0, v1
    return-void
.end method

# print(label, value): "label=value" on stdout.
.method static print(Ljava/lang/String;J)V
    .registers 4
    const-string v0, "="
    invoke-virtual {p0, v0}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    invoke-static {p1, p2}, Ljava/lang/Long;->toString(J)Ljava/lang/String;
    move-result-object v1
    invoke-virtual {v0, v1}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    invoke-static {v0}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    return-void
.end method

.method public static main([Ljava/lang/String;)V
    .registers 13
    # keep 1000 nodes of 1 KiB (+ their index) alive
    const/4 v0, 0x0
    const/4 v1, 0x0
    :keep
    const/16 v2, 0x3e8
    if-ge v1, v2, :kept
    new-instance v3, LMain;
    add-int/lit16 v4, v1, 0x400
    invoke-direct {v3, v0, v4}, LMain;-><init>(LMain;I)V
    move-object v0, v3
    add-int/lit8 v1, v1, 0x1
    goto :keep
    :kept
    # churn: 2048 arrays of 256 KiB, each dropped at once (512 MiB in all)
    const/4 v1, 0x0
    const-wide/16 v5, 0x0
    :churn
    const/16 v2, 0x800
    if-ge v1, v2, :churned
    const/high16 v4, 0x40000
    new-array v3, v4, [B
    array-length v4, v3
    int-to-long v7, v4
    add-long/2addr v5, v7
    add-int/lit8 v1, v1, 0x1
    goto :churn
    :churned
    # walk the kept list: count nodes and check each array's mark (v12 keeps its head: the list
    # stays live until the end, also for the heap task daemon's concurrent GCs)
    move-object v12, v0
    const/4 v1, 0x0
    const/4 v9, 0x0
    :walk
    if-eqz v0, :walked
    iget-object v3, v0, LMain;->payload:[B
    array-length v4, v3
    add-int/lit8 v7, v4, -0x1
    aget-byte v7, v3, v7
    int-to-byte v4, v4
    if-eq v4, v7, :good
    add-int/lit8 v9, v9, 0x1
    :good
    add-int/lit8 v1, v1, 0x1
    iget-object v0, v0, LMain;->next:LMain;
    goto :walk
    :walked
    const-string v2, "kept"
    int-to-long v3, v1
    invoke-static {v2, v3, v4}, LMain;->print(Ljava/lang/String;J)V
    const-string v2, "corrupt"
    int-to-long v3, v9
    invoke-static {v2, v3, v4}, LMain;->print(Ljava/lang/String;J)V
    const-string v2, "churned"
    invoke-static {v2, v5, v6}, LMain;->print(Ljava/lang/String;J)V
    # a 16 MiB array live while the figures are read: what Runtime counts as used includes it
    const/high16 v4, 0x1000000
    new-array v11, v4, [B
    invoke-static {}, Ljava/lang/Runtime;->getRuntime()Ljava/lang/Runtime;
    move-result-object v10
    const-string v2, "max"
    invoke-virtual {v10}, Ljava/lang/Runtime;->maxMemory()J
    move-result-wide v3
    invoke-static {v2, v3, v4}, LMain;->print(Ljava/lang/String;J)V
    const-string v2, "total"
    invoke-virtual {v10}, Ljava/lang/Runtime;->totalMemory()J
    move-result-wide v3
    invoke-static {v2, v3, v4}, LMain;->print(Ljava/lang/String;J)V
    const-string v2, "free"
    invoke-virtual {v10}, Ljava/lang/Runtime;->freeMemory()J
    move-result-wide v3
    invoke-static {v2, v3, v4}, LMain;->print(Ljava/lang/String;J)V
    array-length v4, v11
    iget-object v12, v12, LMain;->next:LMain;
    return-void
.end method
