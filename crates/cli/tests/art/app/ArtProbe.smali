# What the test programs see of their own process through libartprobe.so
# (tests/art/native/artprobe.c): the agent's status.json, the process's children, a directory's
# entries, a number in a string. Loaded by the class initializer.
.class public LArtProbe;
.super Ljava/lang/Object;

.method static constructor <clinit>()V
    .registers 1
    const-string v0, "artprobe"
    invoke-static {v0}, Ljava/lang/System;->loadLibrary(Ljava/lang/String;)V
    return-void
.end method

# Waits until DATA_DIR/status.json counts at least N verdicts: that count, or -1 at the timeout.
.method public static native awaitVerdicts(Ljava/lang/String;II)I
.end method

# Children of this process named oomguard-dump, alive or not yet reaped.
.method public static native dumpChildren()I
.end method

# Children of this process that ended and were not reaped (state Z).
.method public static native zombies()I
.end method

# Waits until DIR exists and is empty; false at the timeout.
.method public static native awaitEmpty(Ljava/lang/String;I)Z
.end method

# The decimal number S starts with; 0 for null.
.method public static native toInt(Ljava/lang/String;)I
.end method
