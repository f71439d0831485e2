# An app's Activity holding a large buffer (1 MiB).
.class public Lcom/example/leaky/MainActivity;
.super Landroid/app/Activity;

.field private mBitmapBytes:[B

.method public constructor <init>()V
    .registers 2
    invoke-direct {p0}, Landroid/app/Activity;-><init>()V
    const/high16 v0, 0x100000
    new-array v0, v0, [B
    iput-object v0, p0, Lcom/example/leaky/MainActivity;->mBitmapBytes:[B
    return-void
.end method
