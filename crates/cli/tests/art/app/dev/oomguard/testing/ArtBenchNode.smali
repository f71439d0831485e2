# A small object of the ART dump benchmark's heap (ArtDumpBench): a list link, a small int[]
# (4 to 19 elements), a long, and on every 8th node a name String.
.class public Ldev/oomguard/testing/ArtBenchNode;
.super Ljava/lang/Object;

.field next:Ldev/oomguard/testing/ArtBenchNode;
.field data:[I
.field name:Ljava/lang/String;
.field id:J

.method public constructor <init>(Ldev/oomguard/testing/ArtBenchNode;I)V
    .registers 6
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    iput-object p1, p0, Ldev/oomguard/testing/ArtBenchNode;->next:Ldev/oomguard/testing/ArtBenchNode;
    and-int/lit8 v0, p2, 0xf
    add-int/lit8 v0, v0, 0x4
    new-array v0, v0, [I
    const/4 v1, 0x0
    aput p2, v0, v1
    iput-object v0, p0, Ldev/oomguard/testing/ArtBenchNode;->data:[I
    int-to-long v0, p2
    iput-wide v0, p0, Ldev/oomguard/testing/ArtBenchNode;->id:J
    and-int/lit8 v2, p2, 0x7
    if-nez v2, :done
    invoke-static {v0, v1}, Ljava/lang/Long;->toString(J)Ljava/lang/String;
    move-result-object v2
    iput-object v2, p0, Ldev/oomguard/testing/ArtBenchNode;->name:Ljava/lang/String;
    :done
    return-void
.end method
