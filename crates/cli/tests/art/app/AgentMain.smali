# The agent on ART, started the way an app starts it: OomGuard.start from the main thread
# (dev/oomguard/OomGuard.smali loads liboomguard.so through System.loadLibrary). Reads
# -Doomguard.data (the data directory) and -Doomguard.policy (policy JSON, or absent for the
# default), holds 1000 arrays of 4 KiB (made before it starts the agent), gives the agent 1.5 s
# (its first poll is at start), then with -Doomguard.dump_now=REASON leaks 4 destroyed
# Activities (and holds a fifth in a register of main's frame only: a Java frame root on the
# thread "main") and calls OomGuard.dumpNow and waits 10 s; prints start=, second_start=,
# dump_now=, the status JSON between STATUS-BEGIN/STATUS-END, stop= and held=.
.class public LAgentMain;
.super Ljava/lang/Object;

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

# sleep(MS): Thread.sleep(lock, ms, 0), ART's own native, which waits on the lock's monitor.
.method static sleep(J)V
    .registers 5
    new-instance v0, Ljava/lang/Object;
    invoke-direct {v0}, Ljava/lang/Object;-><init>()V
    monitor-enter v0
    const/4 v1, 0x0
    invoke-static {v0, p0, p1, v1}, Ljava/lang/Thread;->sleep(Ljava/lang/Object;JI)V
    monitor-exit v0
    return-void
.end method

.method public static main([Ljava/lang/String;)V
    .registers 13
    # keep 1000 arrays of 4 KiB in an Object[], before the agent starts: its first sample (at
    # start) must see them (made after the start, they raced the agent thread's first sample)
    const/16 v7, 0x3e8
    new-array v8, v7, [Ljava/lang/Object;
    const/4 v9, 0x0
    :fill
    if-ge v9, v7, :filled
    const/16 v10, 0x1000
    new-array v10, v10, [B
    aput-object v10, v8, v9
    add-int/lit8 v9, v9, 0x1
    goto :fill
    :filled
    const-string v0, "oomguard.data"
    invoke-static {v0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v1
    const-string v0, "oomguard.policy"
    invoke-static {v0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v2
    const-string v3, "1.0-art"
    invoke-static {v2, v1, v3}, Ldev/oomguard/OomGuard;->start(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;)I
    move-result v4
    const-string v0, "start"
    int-to-long v5, v4
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V
    invoke-static {v2, v1, v3}, Ldev/oomguard/OomGuard;->start(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;)I
    move-result v4
    const-string v0, "second_start"
    int-to-long v5, v4
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V
    const-wide/16 v5, 0x5dc
    invoke-static {v5, v6}, LAgentMain;->sleep(J)V
    # -Doomguard.dump_now=REASON: OomGuard.dumpNow(REASON), then 10 s for the incident
    const-string v0, "oomguard.dump_now"
    invoke-static {v0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    if-eqz v0, :status
    # first leak 4 destroyed Activities (1 MiB each) through Registry's static list
    const/4 v9, 0x0
    :leak
    const/4 v10, 0x4
    if-ge v9, v10, :leaked
    new-instance v10, Lcom/example/leaky/MainActivity;
    invoke-direct {v10}, Lcom/example/leaky/MainActivity;-><init>()V
    invoke-static {v10}, Lcom/example/leaky/Registry;->register(Ljava/lang/Object;)V
    invoke-virtual {v10}, Landroid/app/Activity;->destroy()V
    add-int/lit8 v9, v9, 0x1
    goto :leak
    :leaked
    new-instance v11, Lcom/example/leaky/MainActivity;
    invoke-direct {v11}, Lcom/example/leaky/MainActivity;-><init>()V
    invoke-virtual {v11}, Landroid/app/Activity;->destroy()V
    invoke-static {v0}, Ldev/oomguard/OomGuard;->dumpNow(Ljava/lang/String;)I
    move-result v4
    const-string v0, "dump_now"
    int-to-long v5, v4
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V
    const-wide/16 v5, 0x2710
    invoke-static {v5, v6}, LAgentMain;->sleep(J)V
    # the fifth is still held here
    if-eqz v11, :status
    :status
    invoke-static {}, Ldev/oomguard/OomGuard;->status()Ljava/lang/String;
    move-result-object v0
    const-string v9, "STATUS-BEGIN"
    invoke-static {v9}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    invoke-static {v0}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    const-string v9, "STATUS-END"
    invoke-static {v9}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    invoke-static {}, Ldev/oomguard/OomGuard;->stop()I
    move-result v4
    const-string v0, "stop"
    int-to-long v5, v4
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V
    # still holding the arrays after the agent ran
    array-length v7, v8
    const-string v0, "held"
    int-to-long v5, v7
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V
    return-void
.end method
