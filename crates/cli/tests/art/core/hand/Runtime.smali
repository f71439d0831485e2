# java.lang.Runtime: one instance; maxMemory/totalMemory/freeMemory are natives of
# libopenjdk.so (ours: tests/art/native/jnilib.c), as on Android, and so is nativeLoad
# (System.loadLibrary's route). Written by hand for the instance getRuntime() returns.
.class public Ljava/lang/Runtime;
.super Ljava/lang/Object;

.field private static final currentRuntime:Ljava/lang/Runtime;

.method static constructor <clinit>()V
    .registers 1
    new-instance v0, Ljava/lang/Runtime;
    invoke-direct {v0}, Ljava/lang/Runtime;-><init>()V
    sput-object v0, Ljava/lang/Runtime;->currentRuntime:Ljava/lang/Runtime;
    return-void
.end method

.method private constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    return-void
.end method

.method public static getRuntime()Ljava/lang/Runtime;
    .registers 1
    sget-object v0, Ljava/lang/Runtime;->currentRuntime:Ljava/lang/Runtime;
    return-object v0
.end method

.method public native maxMemory()J
.end method

.method public native totalMemory()J
.end method

.method public native freeMemory()J
.end method

# Loads the shared library FILENAME for LOADER (null: the boot class loader) and runs its
# JNI_OnLoad; null on success, else the reason. Ours: libopenjdk.so.
.method static native nativeLoad(Ljava/lang/String;Ljava/lang/ClassLoader;Ljava/lang/Class;)Ljava/lang/String;
.end method
