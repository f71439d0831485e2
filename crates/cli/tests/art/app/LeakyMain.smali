# The leaky app on ART: starts the agent (-Doomguard.data, -Doomguard.policy), then every
# 100 ms creates a MainActivity (1 MiB buffer), registers it in Registry's static list and
# destroys it, 48 times, so the used heap climbs past the policy's heap threshold poll after
# poll; then waits 8 s for the incident (dump, analysis) and prints the status between
# STATUS-BEGIN/STATUS-END, stop= and leaked=.
.class public LLeakyMain;
.super Ljava/lang/Object;

.method public static main([Ljava/lang/String;)V
    .registers 8
    const-string v0, "oomguard.data"
    invoke-static {v0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v1
    const-string v0, "oomguard.policy"
    invoke-static {v0}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v2
    const-string v3, "1.0-leaky"
    invoke-static {v2, v1, v3}, Ldev/oomguard/OomGuard;->start(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;)I
    move-result v4
    const-string v0, "start"
    int-to-long v5, v4
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V
    const/4 v4, 0x0
    :leak
    const/16 v0, 0x30
    if-ge v4, v0, :leaked
    new-instance v0, Lcom/example/leaky/MainActivity;
    invoke-direct {v0}, Lcom/example/leaky/MainActivity;-><init>()V
    invoke-static {v0}, Lcom/example/leaky/Registry;->register(Ljava/lang/Object;)V
    invoke-virtual {v0}, Landroid/app/Activity;->destroy()V
    const-wide/16 v5, 0x64
    invoke-static {v5, v6}, LAgentMain;->sleep(J)V
    add-int/lit8 v4, v4, 0x1
    goto :leak
    :leaked
    const-string v0, "leaked"
    int-to-long v5, v4
    invoke-static {v0, v5, v6}, LAgentMain;->print(Ljava/lang/String;J)V
    const-wide/16 v5, 0x1f40
    invoke-static {v5, v6}, LAgentMain;->sleep(J)V
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
    return-void
.end method
