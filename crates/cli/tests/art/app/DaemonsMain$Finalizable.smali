# DaemonsMain's finalizable object: its finalize() counts itself in DaemonsMain.finalized, under
# the class's monitor. 1 KiB of payload each.
.class public LDaemonsMain$Finalizable;
.super Ljava/lang/Object;

.field payload:[B

.method public constructor <init>()V
    .registers 2
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    const/16 v0, 0x400
    new-array v0, v0, [B
    iput-object v0, p0, LDaemonsMain$Finalizable;->payload:[B
    return-void
.end method

.method protected finalize()V
    .registers 3
    const-class v0, LDaemonsMain;
    monitor-enter v0
    sget v1, LDaemonsMain;->finalized:I
    add-int/lit8 v1, v1, 0x1
    sput v1, LDaemonsMain;->finalized:I
    monitor-exit v0
    return-void
.end method
