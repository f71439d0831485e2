# The leak: a static list of listeners that destroyed Activities are never removed from.
.class public Lcom/example/leaky/Registry;
.super Ljava/lang/Object;

.field static sListeners:[Ljava/lang/Object;
.field static sCount:I

.method static constructor <clinit>()V
    .registers 1
    const/16 v0, 0x40
    new-array v0, v0, [Ljava/lang/Object;
    sput-object v0, Lcom/example/leaky/Registry;->sListeners:[Ljava/lang/Object;
    return-void
.end method

.method public constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    return-void
.end method

.method public static register(Ljava/lang/Object;)V
    .registers 4
    sget-object v0, Lcom/example/leaky/Registry;->sListeners:[Ljava/lang/Object;
    sget v1, Lcom/example/leaky/Registry;->sCount:I
    aput-object p0, v0, v1
    add-int/lit8 v1, v1, 0x1
    sput v1, Lcom/example/leaky/Registry;->sCount:I
    return-void
.end method
