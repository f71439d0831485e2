# android.os.Build as the facade reads it (reflection on MANUFACTURER), for the test runtime.
.class public Landroid/os/Build;
.super Ljava/lang/Object;

.field public static final MANUFACTURER:Ljava/lang/String; = "debian-art11"

.method public constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    return-void
.end method
