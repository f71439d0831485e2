# Dumps in a row while the app's other threads allocate (tests/art_faults.rs). Starts the agent
# (-Doomguard.data, -Doomguard.policy), reports an unmetered network with OomGuard.setNetwork
# when -Doomguard.network is set (as an app's NetworkCallback would), leaks 4 destroyed
# Activities, starts -Doomguard.threads AllocThreads (arrays of -Doomguard.alloc_bytes), then
# -Doomguard.dumps times (default 1):
# OomGuard.dumpNow, waits until status.json counts that verdict, and runs Java again: allocates,
# reads the threads' counters, counts the process's dump children. Prints per dump a line
# "dump=I verdicts=V children=C allocated=A java=J" (A: arrays the other threads allocated
# from before dumpNow to after the verdict; J: an array allocated and measured after it). Then
# stops the threads (threads_finished=), with -Doomguard.await_upload=MS (0: 60 s) waits that
# long at most until the spool's incidents directory is empty (uploaded=1: every file
# acknowledged), prints the status between STATUS-BEGIN/STATUS-END, stop=, zombies=
# (children never reaped) and end=1.
.class public LDumpLoopMain;
.super Ljava/lang/Object;

# ACC + NAME + "=" + V + " "
.method static kv(Ljava/lang/String;Ljava/lang/String;J)Ljava/lang/String;
    .registers 6
    invoke-virtual {p0, p1}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    const-string v1, "="
    invoke-virtual {v0, v1}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    invoke-static {p2, p3}, Ljava/lang/Long;->toString(J)Ljava/lang/String;
    move-result-object v1
    invoke-virtual {v0, v1}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    const-string v1, " "
    invoke-virtual {v0, v1}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    return-object v0
.end method

# The arrays THREADS allocated so far.
.method static total([LAllocThread;)J
    .registers 8
    const-wide/16 v0, 0x0
    const/4 v2, 0x0
    array-length v3, p0
    :loop
    if-ge v2, v3, :done
    aget-object v4, p0, v2
    iget-wide v5, v4, LAllocThread;->allocated:J
    add-long/2addr v0, v5
    add-int/lit8 v2, v2, 0x1
    goto :loop
    :done
    return-wide v0
.end method

.method public static main([Ljava/lang/String;)V
    .registers 24
    # v1 data dir, v2 policy, v7 dumps, v8 threads, v9 the threads
    const-string v0, "oomguard.data"
    invoke-static {v0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v1
    const-string v0, "oomguard.policy"
    invoke-static {v0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v2
    const-string v3, "1.0-loop"
    invoke-static {v2, v1, v3}, Ldev/oomguard/OomGuard;->start(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;)I
    move-result v4
    const-string v0, "start"
    int-to-long v5, v4
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V

    const-string v0, "oomguard.network"
    invoke-static {v0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    if-eqz v0, :no_network
    const/4 v5, 0x1
    const/4 v6, 0x0
    invoke-static {v5, v6}, Ldev/oomguard/OomGuard;->setNetwork(ZZ)I
    move-result v4
    const-string v0, "set_network"
    int-to-long v5, v4
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V
    :no_network

    const-string v0, "oomguard.dumps"
    invoke-static {v0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    invoke-static {v0}, LArtProbe;->toInt(Ljava/lang/String;)I
    move-result v7
    if-nez v7, :have_dumps
    const/4 v7, 0x1
    :have_dumps
    const-string v0, "oomguard.threads"
    invoke-static {v0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    invoke-static {v0}, LArtProbe;->toInt(Ljava/lang/String;)I
    move-result v8

    # leak 4 destroyed Activities (1 MiB each) through Registry's static list
    const/4 v10, 0x0
    :leak
    const/4 v11, 0x4
    if-ge v10, v11, :leaked
    new-instance v11, Lcom/example/leaky/MainActivity;
    invoke-direct {v11}, Lcom/example/leaky/MainActivity;-><init>()V
    invoke-static {v11}, Lcom/example/leaky/Registry;->register(Ljava/lang/Object;)V
    invoke-virtual {v11}, Landroid/app/Activity;->destroy()V
    add-int/lit8 v10, v10, 0x1
    goto :leak
    :leaked

    # the other threads, allocating arrays of -Doomguard.alloc_bytes (default 256)
    const-string v0, "oomguard.alloc_bytes"
    invoke-static {v0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    invoke-static {v0}, LArtProbe;->toInt(Ljava/lang/String;)I
    move-result v10
    if-nez v10, :have_size
    const/16 v10, 0x100
    :have_size
    sput v10, LAllocThread;->size:I
    new-array v9, v8, [LAllocThread;
    const/4 v10, 0x0
    :spawn
    if-ge v10, v8, :spawned
    new-instance v11, LAllocThread;
    const-string v12, "alloc"
    invoke-direct {v11, v12}, LAllocThread;-><init>(Ljava/lang/String;)V
    aput-object v11, v9, v10
    invoke-virtual {v11}, LAllocThread;->start()V
    add-int/lit8 v10, v10, 0x1
    goto :spawn
    :spawned
    const-wide/16 v5, 0xc8
    invoke-static {v5, v6}, LAgentMain;->sleep(J)V

    # the dumps: v10 = 1..v7
    const/4 v10, 0x1
    :dump
    if-gt v10, v7, :dumped
    invoke-static {v9}, LDumpLoopMain;->total([LAllocThread;)J
    move-result-wide v13
    const-string v0, "loop"
    invoke-static {v0}, Ldev/oomguard/OomGuard;->dumpNow(Ljava/lang/String;)I
    move-result v4
    if-eqz v4, :queued
    const-string v0, "dump_now"
    int-to-long v5, v4
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V
    goto :dumped
    :queued
    const v12, 0x1d4c0
    invoke-static {v1, v10, v12}, LArtProbe;->awaitVerdicts(Ljava/lang/String;II)I
    move-result v11
    # Java again, after the dump
    invoke-static {v9}, LDumpLoopMain;->total([LAllocThread;)J
    move-result-wide v15
    sub-long/2addr v15, v13
    const/16 v12, 0x100
    new-array v12, v12, [B
    array-length v12, v12
    invoke-static {}, LArtProbe;->dumpChildren()I
    move-result v17
    const-string v0, ""
    const-string v3, "dump"
    int-to-long v5, v10
    invoke-static {v0, v3, v5, v6}, LDumpLoopMain;->kv(Ljava/lang/String;Ljava/lang/String;J)Ljava/lang/String;
    move-result-object v0
    const-string v3, "verdicts"
    int-to-long v5, v11
    invoke-static {v0, v3, v5, v6}, LDumpLoopMain;->kv(Ljava/lang/String;Ljava/lang/String;J)Ljava/lang/String;
    move-result-object v0
    const-string v3, "children"
    move/from16 v5, v17
    int-to-long v5, v5
    invoke-static {v0, v3, v5, v6}, LDumpLoopMain;->kv(Ljava/lang/String;Ljava/lang/String;J)Ljava/lang/String;
    move-result-object v0
    const-string v3, "allocated"
    move-wide v5, v15
    invoke-static {v0, v3, v5, v6}, LDumpLoopMain;->kv(Ljava/lang/String;Ljava/lang/String;J)Ljava/lang/String;
    move-result-object v0
    const-string v3, "java"
    int-to-long v5, v12
    invoke-static {v0, v3, v5, v6}, LDumpLoopMain;->kv(Ljava/lang/String;Ljava/lang/String;J)Ljava/lang/String;
    move-result-object v0
    invoke-static {v0}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    if-ltz v11, :dumped
    add-int/lit8 v10, v10, 0x1
    goto :dump
    :dumped

    # stop the other threads and wait (at most 10 s) until each has left run()
    const/4 v0, 0x1
    sput-boolean v0, LAllocThread;->stop:Z
    const/4 v10, 0x0
    :join
    sget v11, LAllocThread;->finished:I
    if-ge v11, v8, :joined
    const/16 v12, 0x3e8
    if-ge v10, v12, :joined
    const-wide/16 v5, 0xa
    invoke-static {v5, v6}, LAgentMain;->sleep(J)V
    add-int/lit8 v10, v10, 0x1
    goto :join
    :joined
    const-string v0, "threads_finished"
    int-to-long v5, v11
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V
    invoke-static {v9}, LDumpLoopMain;->total([LAllocThread;)J
    move-result-wide v5
    const-string v0, "allocated"
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V

    const-string v0, "oomguard.await_upload"
    invoke-static {v0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    if-eqz v0, :status
    invoke-static {v0}, LArtProbe;->toInt(Ljava/lang/String;)I
    move-result v12
    if-nez v12, :have_timeout
    const v12, 0xea60
    :have_timeout
    const-string v0, "/spool/incidents"
    invoke-virtual {v1, v0}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    invoke-static {v0, v12}, LArtProbe;->awaitEmpty(Ljava/lang/String;I)Z
    move-result v4
    const-string v0, "uploaded"
    int-to-long v5, v4
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V

    :status
    invoke-static {}, Ldev/oomguard/OomGuard;->status()Ljava/lang/String;
    move-result-object v0
    const-string v3, "STATUS-BEGIN"
    invoke-static {v3}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    invoke-static {v0}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    const-string v3, "STATUS-END"
    invoke-static {v3}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    invoke-static {}, Ldev/oomguard/OomGuard;->stop()I
    move-result v4
    const-string v0, "stop"
    int-to-long v5, v4
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V

    # zombies: an analysis child that just ended may wait a moment for its waiter
    const/4 v10, 0x0
    :zombies
    invoke-static {}, LArtProbe;->zombies()I
    move-result v11
    if-eqz v11, :no_zombies
    const/16 v12, 0x64
    if-ge v10, v12, :no_zombies
    const-wide/16 v5, 0x14
    invoke-static {v5, v6}, LAgentMain;->sleep(J)V
    add-int/lit8 v10, v10, 0x1
    goto :zombies
    :no_zombies
    const-string v0, "zombies"
    int-to-long v5, v11
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V
    const-string v0, "end"
    const-wide/16 v5, 0x1
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V
    return-void
.end method
