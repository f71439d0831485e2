# dev.oomguard.OomGuard$LastWords, the facade's chained uncaught-exception handler (see
# OomGuard.smali): records the last words of a memory-related fatal error through
# OomGuard.nativeLastWords, then passes the error on to the handler it replaced.
.class final Ldev/oomguard/OomGuard$LastWords;
.super Ljava/lang/Object;
.implements Ljava/lang/Thread$UncaughtExceptionHandler;

.field private final previous:Ljava/lang/Thread$UncaughtExceptionHandler;

.method constructor <init>(Ljava/lang/Thread$UncaughtExceptionHandler;)V
    .registers 2
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    iput-object p1, p0, Ldev/oomguard/OomGuard$LastWords;->previous:Ljava/lang/Thread$UncaughtExceptionHandler;
    return-void
.end method

.method public uncaughtException(Ljava/lang/Thread;Ljava/lang/Throwable;)V
    .registers 4
    :try_start
    invoke-static {p2}, Ldev/oomguard/OomGuard;->memoryRelated(Ljava/lang/Throwable;)Z
    move-result v0
    if-eqz v0, :passed
    invoke-static {p1, p2}, Ldev/oomguard/OomGuard;->callLastWords(Ljava/lang/Thread;Ljava/lang/Throwable;)I
    :passed
    nop
    :try_end
    .catch Ljava/lang/Throwable; {:try_start .. :try_end} :ignored
    :ignored
    iget-object v1, p0, Ldev/oomguard/OomGuard$LastWords;->previous:Ljava/lang/Thread$UncaughtExceptionHandler;
    if-eqz v1, :done
    invoke-interface {v1, p1, p2}, Ljava/lang/Thread$UncaughtExceptionHandler;->uncaughtException(Ljava/lang/Thread;Ljava/lang/Throwable;)V
    :done
    return-void
.end method
