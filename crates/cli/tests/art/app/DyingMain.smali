# Dies of an OutOfMemoryError with the agent running, for the flight recorder's last words on
# ART: OomGuard.start (-Doomguard.data, -Doomguard.policy) from the main thread, 1.5 s of polls,
# then 64 KiB arrays kept in a chain until the heap is exhausted. The error leaves main; the
# launcher hands it to Thread.dispatchUncaughtException, i.e. the facade's handler.
.class public LDyingMain;
.super Ljava/lang/Object;

.method public static main([Ljava/lang/String;)V
    .registers 8
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
    const-wide/16 v5, 0x5dc
    invoke-static {v5, v6}, LAgentMain;->sleep(J)V
    const/4 v0, 0x0
    :grow
    const/4 v1, 0x2
    new-array v1, v1, [Ljava/lang/Object;
    const/4 v2, 0x0
    aput-object v0, v1, v2
    const/high16 v3, 0x10000
    new-array v3, v3, [B
    const/4 v2, 0x1
    aput-object v3, v1, v2
    move-object v0, v1
    goto :grow
.end method
