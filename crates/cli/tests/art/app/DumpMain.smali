# Leaks 8 destroyed MainActivity objects (1 MiB each) through Registry's static list, then has
# ART write a heap dump in-process with VMDebug.dumpHprofData (ART's own native:
# art::hprof::DumpHeap) to -Doomguard.dump, and prints leaked= and dumped=.
.class public LDumpMain;
.super Ljava/lang/Object;

.method public static main([Ljava/lang/String;)V
    .registers 6
    const/4 v0, 0x0
    :leak
    const/16 v1, 0x8
    if-ge v0, v1, :leaked
    new-instance v2, Lcom/example/leaky/MainActivity;
    invoke-direct {v2}, Lcom/example/leaky/MainActivity;-><init>()V
    invoke-static {v2}, Lcom/example/leaky/Registry;->register(Ljava/lang/Object;)V
    invoke-virtual {v2}, Landroid/app/Activity;->destroy()V
    add-int/lit8 v0, v0, 0x1
    goto :leak
    :leaked
    const-string v3, "leaked=8"
    invoke-static {v3}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    const-string v3, "oomguard.dump"
    invoke-static {v3}, Ljava/lang/System;->getProperty(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v3
    const/4 v4, -0x1
    invoke-static {v3, v4}, Ldalvik/system/VMDebug;->dumpHprofData(Ljava/lang/String;I)V
    const-string v3, "dumped=1"
    invoke-static {v3}, Ljava/lang/System;->logI(Ljava/lang/String;)V
    return-void
.end method
