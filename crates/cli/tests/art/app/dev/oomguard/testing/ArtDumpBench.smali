# The ART dump benchmark's program (examples/art_dump_bench.rs, run by scripts/bench.sh dump).
# Builds a live heap of about -Dbench.mb MiB: -Dbench.small_pct percent of it in small objects
# (ArtBenchNode: a link, a small int[], every 8th a name String; about 100 bytes each), the rest
# in int[] arrays of 1 MiB with every page written (ART's large-object space). Prints
# live= (Runtime's total less free), then loads liboomguard.so (built with the test-probe
# feature) and has its jni::probe_art dump this heap in-process and by fork, -Dbench.rounds
# rounds, into -Dbench.dir, and prints bench=<JSON>. With -Dbench.churn=N, N threads
# (ArtBenchChurn) allocate garbage throughout the dumps, so that the heap task daemon's
# concurrent GCs are in flight when the fork dumper stops the app; it prints churned=BYTES.
.class public Ldev/oomguard/testing/ArtDumpBench;
.super Ljava/lang/Object;

.field static big:[Ljava/lang/Object;
.field static nodes:Ldev/oomguard/testing/ArtBenchNode;

.method public static native parse(Ljava/lang/String;)I
.end method

.method public static native run(Ljava/lang/String;I)Ljava/lang/String;
.end method

# The int value of system property NAME (-DNAME=...), -1 if absent or not a number.
.method static prop(Ljava/lang/String;)I
    .registers 2
    invoke-static {p0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    invoke-static {v0}, Ldev/oomguard/testing/ArtDumpBench;->parse(Ljava/lang/String;)I
    move-result v0
    return v0
.end method

# A 1 MiB int[] with every page written: 256 values from SEED, then doubled by arraycopy.
.method static bigArray(I)[I
    .registers 6
    const/high16 v0, 0x40000
    new-array v1, v0, [I
    const/4 v2, 0x0
    const/4 v4, 0x0
    :fill
    const/16 v3, 0x100
    if-ge v2, v3, :double
    mul-int/lit8 v3, p0, 0x1f
    add-int/2addr v3, v2
    aput v3, v1, v2
    add-int/lit8 v2, v2, 0x1
    goto :fill
    :double
    if-ge v2, v0, :done
    invoke-static {v1, v4, v1, v2, v2}, Ljava/lang/System;->arraycopy(Ljava/lang/Object;ILjava/lang/Object;II)V
    shl-int/lit8 v2, v2, 0x1
    goto :double
    :done
    return-object v1
.end method

.method public static main([Ljava/lang/String;)V
    .registers 12
    const-string v0, "oomguard"
    invoke-static {v0}, Ljava/lang/System;->loadLibrary(Ljava/lang/String;)V
    const-string v0, "bench.mb"
    invoke-static {v0}, Ldev/oomguard/testing/ArtDumpBench;->prop(Ljava/lang/String;)I
    move-result v0
    # v1: how many 1 MiB arrays: the share of the heap not in small objects (-Dbench.small_pct)
    const-string v1, "bench.small_pct"
    invoke-static {v1}, Ldev/oomguard/testing/ArtDumpBench;->prop(Ljava/lang/String;)I
    move-result v1
    rsub-int/lit8 v1, v1, 0x64
    mul-int/2addr v1, v0
    div-int/lit8 v1, v1, 0x64
    new-array v2, v1, [Ljava/lang/Object;
    sput-object v2, Ldev/oomguard/testing/ArtDumpBench;->big:[Ljava/lang/Object;
    const/4 v3, 0x0
    :big
    if-ge v3, v1, :small
    invoke-static {v3}, Ldev/oomguard/testing/ArtDumpBench;->bigArray(I)[I
    move-result-object v4
    aput-object v4, v2, v3
    add-int/lit8 v3, v3, 0x1
    goto :big
    :small
    # the rest in nodes of about 96 bytes: 10922 a MiB
    sub-int v1, v0, v1
    mul-int/lit16 v1, v1, 0x2aaa
    const/4 v3, 0x0
    const/4 v4, 0x0
    :node
    if-ge v3, v1, :built
    new-instance v5, Ldev/oomguard/testing/ArtBenchNode;
    invoke-direct {v5, v4, v3}, Ldev/oomguard/testing/ArtBenchNode;-><init>(Ldev/oomguard/testing/ArtBenchNode;I)V
    move-object v4, v5
    add-int/lit8 v3, v3, 0x1
    goto :node
    :built
    sput-object v4, Ldev/oomguard/testing/ArtDumpBench;->nodes:Ldev/oomguard/testing/ArtBenchNode;
    invoke-static {}, Ljava/lang/Runtime;->getRuntime()Ljava/lang/Runtime;
    move-result-object v6
    invoke-virtual {v6}, Ljava/lang/Runtime;->totalMemory()J
    move-result-wide v7
    invoke-virtual {v6}, Ljava/lang/Runtime;->freeMemory()J
    move-result-wide v9
    sub-long/2addr v7, v9
    invoke-static {v7, v8}, Ljava/lang/Long;->toString(J)Ljava/lang/String;
    move-result-object v5
    const-string v6, "live="
    invoke-virtual {v6, v5}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v5
    invoke-static {v5}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    int-to-long v7, v1
    invoke-static {v7, v8}, Ljava/lang/Long;->toString(J)Ljava/lang/String;
    move-result-object v5
    const-string v6, "nodes="
    invoke-virtual {v6, v5}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v5
    invoke-static {v5}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    # -Dbench.churn=N: N threads churning garbage through the dumps (ArtBenchChurn)
    const-string v5, "bench.churn"
    invoke-static {v5}, Ldev/oomguard/testing/ArtDumpBench;->prop(Ljava/lang/String;)I
    move-result v7
    const/4 v8, 0x0
    :churn
    if-ge v8, v7, :churning
    new-instance v5, Ldev/oomguard/testing/ArtBenchChurn;
    const-string v6, "churn"
    invoke-direct {v5, v6}, Ldev/oomguard/testing/ArtBenchChurn;-><init>(Ljava/lang/String;)V
    invoke-virtual {v5}, Ljava/lang/Thread;->start()V
    add-int/lit8 v8, v8, 0x1
    goto :churn
    :churning
    const-string v5, "bench.dir"
    invoke-static {v5}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v5
    const-string v6, "bench.rounds"
    invoke-static {v6}, Ldev/oomguard/testing/ArtDumpBench;->prop(Ljava/lang/String;)I
    move-result v6
    invoke-static {v5, v6}, Ldev/oomguard/testing/ArtDumpBench;->run(Ljava/lang/String;I)Ljava/lang/String;
    move-result-object v5
    const-string v6, "bench="
    invoke-virtual {v6, v5}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v5
    invoke-static {v5}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    # stop the churn; 500 ms later, print what it allocated (churned=BYTES)
    const/4 v5, 0x1
    sput-boolean v5, Ldev/oomguard/testing/ArtBenchChurn;->stop:Z
    if-lez v7, :no_churn
    new-instance v5, Ljava/lang/Object;
    invoke-direct {v5}, Ljava/lang/Object;-><init>()V
    monitor-enter v5
    const-wide/16 v8, 0x1f4
    const/4 v10, 0x0
    invoke-static {v5, v8, v9, v10}, Ljava/lang/Thread;->sleep(Ljava/lang/Object;JI)V
    monitor-exit v5
    sget-wide v8, Ldev/oomguard/testing/ArtBenchChurn;->allocated:J
    const/16 v10, 0x10
    shl-long/2addr v8, v10
    invoke-static {v8, v9}, Ljava/lang/Long;->toString(J)Ljava/lang/String;
    move-result-object v5
    const-string v6, "churned="
    invoke-virtual {v6, v5}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v5
    invoke-static {v5}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    :no_churn
    # the heap stays reachable until here
    sget-object v5, Ldev/oomguard/testing/ArtDumpBench;->big:[Ljava/lang/Object;
    array-length v5, v5
    return-void
.end method
