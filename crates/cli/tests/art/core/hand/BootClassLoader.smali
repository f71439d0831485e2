# java.lang.BootClassLoader: the Java face of the boot class path, one instance.
.class Ljava/lang/BootClassLoader;
.super Ljava/lang/ClassLoader;

.field private static instance:Ljava/lang/BootClassLoader;

.method private constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/ClassLoader;-><init>()V
    return-void
.end method

.method public static declared-synchronized getInstance()Ljava/lang/BootClassLoader;
    .registers 1
    sget-object v0, Ljava/lang/BootClassLoader;->instance:Ljava/lang/BootClassLoader;
    if-nez v0, :done
    new-instance v0, Ljava/lang/BootClassLoader;
    invoke-direct {v0}, Ljava/lang/BootClassLoader;-><init>()V
    sput-object v0, Ljava/lang/BootClassLoader;->instance:Ljava/lang/BootClassLoader;
    :done
    return-object v0
.end method
