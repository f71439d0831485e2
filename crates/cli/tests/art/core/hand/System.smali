# java.lang.System: ART registers its arraycopy natives (natives.txt, appended by gen_core.py).
# Written by hand for loadLibrary, which goes the way libcore's does, through
# Runtime.nativeLoad (ours: libopenjdk.so, calling libart's JavaVMExt::LoadNativeLibrary as
# Android's libopenjdkjvm does); getProperty and logI are natives of our libjavacore.so.
.class public final Ljava/lang/System;
.super Ljava/lang/Object;

.method private constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    return-void
.end method

# loadLibrary(NAME): loads libNAME.so for the boot class loader (found on LD_LIBRARY_PATH here;
# in the app's native library directory on Android) and runs its JNI_OnLoad. Throws
# UnsatisfiedLinkError with the loader's message when it fails.
.method public static loadLibrary(Ljava/lang/String;)V
    .registers 4
    const-string v0, "lib"
    invoke-virtual {v0, p0}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    const-string v1, ".so"
    invoke-virtual {v0, v1}, Ljava/lang/String;->concat(Ljava/lang/String;)Ljava/lang/String;
    move-result-object v0
    const/4 v1, 0x0
    invoke-static {v0, v1, v1}, Ljava/lang/Runtime;->nativeLoad(Ljava/lang/String;Ljava/lang/ClassLoader;Ljava/lang/Class;)Ljava/lang/String;
    move-result-object v2
    if-nez v2, :failed
    return-void
    :failed
    new-instance v0, Ljava/lang/UnsatisfiedLinkError;
    invoke-direct {v0, v2}, Ljava/lang/UnsatisfiedLinkError;-><init>(Ljava/lang/String;)V
    throw v0
.end method

# The value of system property KEY, or null: "java.vm.name" is "Dalvik" as on Android; the rest
# come from the VM's -D options (VMRuntime.properties()).
.method public static native getProperty(Ljava/lang/String;)Ljava/lang/String;
.end method

# One line on stdout (ours; tests read programs' results there).
.method public static native logI(Ljava/lang/String;)V
.end method
