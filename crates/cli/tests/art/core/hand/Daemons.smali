# java.lang.Daemons: ART calls start() by name at the end of Runtime::Start
# (WellKnownClasses::java_lang_Daemons_start) and stop() when the runtime is torn down
# (java_lang_Daemons_stop; the launcher exits without that, as an app's process dies). start()
# starts the four daemon threads an app process has, in the system thread group:
#   HeapTaskDaemon            runs the heap's tasks: concurrent GCs, trims (VMRuntime.runHeapTasks)
#   ReferenceQueueDaemon      puts the collector's cleared references on their queues
#   FinalizerDaemon           runs finalize() of unreachable finalizable objects
#   FinalizerWatchdogDaemon   reports a finalize() that runs longer than ART's finalizer timeout
# Written by hand; the daemons' classes are Daemons$*.smali beside this file. stop() sets
# stopping, stops the heap task processor and interrupts the others, whose loops end then.
.class public final Ljava/lang/Daemons;
.super Ljava/lang/Object;

.field static volatile stopping:Z
.field private static heapTask:Ljava/lang/Thread;
.field private static referenceQueue:Ljava/lang/Thread;
.field private static finalizer:Ljava/lang/Thread;
.field private static watchdog:Ljava/lang/Thread;

.method private constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    return-void
.end method

.method public static start()V
    .registers 2
    new-instance v0, Ljava/lang/Daemons$ReferenceQueueDaemon;
    invoke-direct {v0}, Ljava/lang/Daemons$ReferenceQueueDaemon;-><init>()V
    sput-object v0, Ljava/lang/Daemons;->referenceQueue:Ljava/lang/Thread;
    invoke-virtual {v0}, Ljava/lang/Thread;->start()V
    new-instance v0, Ljava/lang/Daemons$FinalizerDaemon;
    invoke-direct {v0}, Ljava/lang/Daemons$FinalizerDaemon;-><init>()V
    sput-object v0, Ljava/lang/Daemons;->finalizer:Ljava/lang/Thread;
    invoke-virtual {v0}, Ljava/lang/Thread;->start()V
    new-instance v0, Ljava/lang/Daemons$FinalizerWatchdogDaemon;
    invoke-direct {v0}, Ljava/lang/Daemons$FinalizerWatchdogDaemon;-><init>()V
    sput-object v0, Ljava/lang/Daemons;->watchdog:Ljava/lang/Thread;
    invoke-virtual {v0}, Ljava/lang/Thread;->start()V
    new-instance v0, Ljava/lang/Daemons$HeapTaskDaemon;
    invoke-direct {v0}, Ljava/lang/Daemons$HeapTaskDaemon;-><init>()V
    sput-object v0, Ljava/lang/Daemons;->heapTask:Ljava/lang/Thread;
    invoke-virtual {v0}, Ljava/lang/Thread;->start()V
    return-void
.end method

.method public static stop()V
    .registers 3
    const-class v0, Ljava/lang/Daemons;
    monitor-enter v0
    :try_start
    const/4 v1, 0x1
    sput-boolean v1, Ljava/lang/Daemons;->stopping:Z
    new-instance v1, Ldalvik/system/VMRuntime;
    invoke-direct {v1}, Ldalvik/system/VMRuntime;-><init>()V
    invoke-virtual {v1}, Ldalvik/system/VMRuntime;->stopHeapTaskProcessor()V
    monitor-exit v0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    sget-object v1, Ljava/lang/Daemons;->referenceQueue:Ljava/lang/Thread;
    invoke-static {v1}, Ljava/lang/Daemons;->interrupt(Ljava/lang/Thread;)V
    sget-object v1, Ljava/lang/Daemons;->finalizer:Ljava/lang/Thread;
    invoke-static {v1}, Ljava/lang/Daemons;->interrupt(Ljava/lang/Thread;)V
    sget-object v1, Ljava/lang/Daemons;->watchdog:Ljava/lang/Thread;
    invoke-static {v1}, Ljava/lang/Daemons;->interrupt(Ljava/lang/Thread;)V
    return-void
    :unlock
    move-exception v1
    monitor-exit v0
    throw v1
.end method

.method private static interrupt(Ljava/lang/Thread;)V
    .registers 1
    if-eqz p0, :done
    invoke-virtual {p0}, Ljava/lang/Thread;->interrupt()V
    :done
    return-void
.end method

.method public static waitForDaemonStart()V
    .registers 0
    return-void
.end method
