# The two fields of android.app.Activity the analyser reads (mDestroyed, mFinished), for the
# leaky programs on ART.
.class public Landroid/app/Activity;
.super Ljava/lang/Object;

.field mDestroyed:Z
.field mFinished:Z

.method public constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    return-void
.end method

# What Activity.onDestroy leaves behind: destroyed and finished.
.method public destroy()V
    .registers 2
    const/4 v0, 0x1
    iput-boolean v0, p0, Landroid/app/Activity;->mDestroyed:Z
    iput-boolean v0, p0, Landroid/app/Activity;->mFinished:Z
    return-void
.end method
