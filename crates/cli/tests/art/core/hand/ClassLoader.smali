# java.lang.ClassLoader: a mirror class (instance size checked: packages, parent, proxyCache,
# allocator, classTable). Written by hand for getSystemClassLoader(), which Runtime::Start calls
# and which must return a loader: here the boot class loader, so FindClass from JNI (the
# launcher, the agent) sees the boot class path, where the test programs live.
.class public abstract Ljava/lang/ClassLoader;
.super Ljava/lang/Object;

.field private packages:Ljava/lang/Object;
.field private final parent:Ljava/lang/ClassLoader;
.field private proxyCache:Ljava/lang/Object;
.field private transient allocator:J
.field private transient classTable:J

.method protected constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    return-void
.end method

.method protected constructor <init>(Ljava/lang/ClassLoader;)V
    .registers 2
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    iput-object p1, p0, Ljava/lang/ClassLoader;->parent:Ljava/lang/ClassLoader;
    return-void
.end method

.method public static getSystemClassLoader()Ljava/lang/ClassLoader;
    .registers 1
    invoke-static {}, Ljava/lang/BootClassLoader;->getInstance()Ljava/lang/BootClassLoader;
    move-result-object v0
    return-object v0
.end method

.method public final getParent()Ljava/lang/ClassLoader;
    .registers 2
    iget-object v0, p0, Ljava/lang/ClassLoader;->parent:Ljava/lang/ClassLoader;
    return-object v0
.end method

# Only the boot class path is searched here: classes are found by the runtime
# (VMClassLoader.findLoadedClass would be libcore's route); null means not found.
.method public loadClass(Ljava/lang/String;)Ljava/lang/Class;
    .registers 3
    const/4 v0, 0x0
    return-object v0
.end method
