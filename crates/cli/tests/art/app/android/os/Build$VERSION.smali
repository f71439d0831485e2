# android.os.Build.VERSION.SDK_INT as the facade reads it: this ART is API 30 (Android 11),
# and reports no level of its own.
.class public Landroid/os/Build$VERSION;
.super Ljava/lang/Object;

.field public static final SDK_INT:I = 0x1e

.method public constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    return-void
.end method
