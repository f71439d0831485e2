# android.os.Build.VERSION.SDK_INT 35, placed before app.dex on the boot class path (the first
# definition wins) to make the agent take its API-35 dump sequence on this API-30 ART.
.class public Landroid/os/Build$VERSION;
.super Ljava/lang/Object;

.field public static final SDK_INT:I = 0x23

.method public constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    return-void
.end method
