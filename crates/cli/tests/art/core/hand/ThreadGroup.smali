# java.lang.ThreadGroup: ART's InitThreadGroups reads systemThreadGroup and mainThreadGroup after
# running <clinit>, and attaches threads into them through add(Thread). Written by hand: the
# class initializer and constructors do real work.
.class public Ljava/lang/ThreadGroup;
.super Ljava/lang/Object;

.field static final systemThreadGroup:Ljava/lang/ThreadGroup;
.field static final mainThreadGroup:Ljava/lang/ThreadGroup;

.field private final parent:Ljava/lang/ThreadGroup;
.field name:Ljava/lang/String;
.field ngroups:I
.field groups:[Ljava/lang/ThreadGroup;
.field nthreads:I
.field threads:[Ljava/lang/Thread;

.method static constructor <clinit>()V
    .registers 3
    new-instance v0, Ljava/lang/ThreadGroup;
    const/4 v1, 0x0
    const-string v2, "system"
    invoke-direct {v0, v1, v2}, Ljava/lang/ThreadGroup;-><init>(Ljava/lang/ThreadGroup;Ljava/lang/String;)V
    sput-object v0, Ljava/lang/ThreadGroup;->systemThreadGroup:Ljava/lang/ThreadGroup;
    new-instance v1, Ljava/lang/ThreadGroup;
    const-string v2, "main"
    invoke-direct {v1, v0, v2}, Ljava/lang/ThreadGroup;-><init>(Ljava/lang/ThreadGroup;Ljava/lang/String;)V
    sput-object v1, Ljava/lang/ThreadGroup;->mainThreadGroup:Ljava/lang/ThreadGroup;
    return-void
.end method

# A group named NAME under PARENT (null for the system group), entered in PARENT's groups.
.method public constructor <init>(Ljava/lang/ThreadGroup;Ljava/lang/String;)V
    .registers 6
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    iput-object p1, p0, Ljava/lang/ThreadGroup;->parent:Ljava/lang/ThreadGroup;
    iput-object p2, p0, Ljava/lang/ThreadGroup;->name:Ljava/lang/String;
    const/16 v0, 0x8
    new-array v1, v0, [Ljava/lang/Thread;
    iput-object v1, p0, Ljava/lang/ThreadGroup;->threads:[Ljava/lang/Thread;
    new-array v1, v0, [Ljava/lang/ThreadGroup;
    iput-object v1, p0, Ljava/lang/ThreadGroup;->groups:[Ljava/lang/ThreadGroup;
    if-eqz p1, :done
    iget v0, p1, Ljava/lang/ThreadGroup;->ngroups:I
    iget-object v1, p1, Ljava/lang/ThreadGroup;->groups:[Ljava/lang/ThreadGroup;
    aput-object p0, v1, v0
    add-int/lit8 v0, v0, 0x1
    iput v0, p1, Ljava/lang/ThreadGroup;->ngroups:I
    :done
    return-void
.end method

.method public getName()Ljava/lang/String;
    .registers 2
    iget-object v0, p0, Ljava/lang/ThreadGroup;->name:Ljava/lang/String;
    return-object v0
.end method

# Records T, growing the array when full (the main thread, attached threads). Synchronized on
# the group, as libcore's: the monitor is entered and exited here (in dex, declared-synchronized
# locks nothing on a non-native method), and the catch-all exits it on an exception.
.method declared-synchronized add(Ljava/lang/Thread;)V
    .registers 9
    monitor-enter p0
    :try_start
    iget v0, p0, Ljava/lang/ThreadGroup;->nthreads:I
    iget-object v1, p0, Ljava/lang/ThreadGroup;->threads:[Ljava/lang/Thread;
    array-length v2, v1
    if-lt v0, v2, :store
    mul-int/lit8 v3, v2, 0x2
    new-array v4, v3, [Ljava/lang/Thread;
    const/4 v5, 0x0
    invoke-static {v1, v5, v4, v5, v2}, Ljava/lang/System;->arraycopy(Ljava/lang/Object;ILjava/lang/Object;II)V
    move-object v1, v4
    iput-object v1, p0, Ljava/lang/ThreadGroup;->threads:[Ljava/lang/Thread;
    :store
    aput-object p1, v1, v0
    add-int/lit8 v0, v0, 0x1
    iput v0, p0, Ljava/lang/ThreadGroup;->nthreads:I
    monitor-exit p0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-void
    :unlock
    move-exception v6
    monitor-exit p0
    throw v6
.end method

# Forgets T (a detached thread): the last entry moves into its slot. Synchronized on the group.
.method declared-synchronized threadTerminated(Ljava/lang/Thread;)V
    .registers 9
    monitor-enter p0
    :try_start
    iget v0, p0, Ljava/lang/ThreadGroup;->nthreads:I
    iget-object v1, p0, Ljava/lang/ThreadGroup;->threads:[Ljava/lang/Thread;
    const/4 v2, 0x0
    :loop
    if-ge v2, v0, :done
    aget-object v3, v1, v2
    if-ne v3, p1, :next
    add-int/lit8 v0, v0, -0x1
    aget-object v4, v1, v0
    aput-object v4, v1, v2
    const/4 v5, 0x0
    aput-object v5, v1, v0
    iput v0, p0, Ljava/lang/ThreadGroup;->nthreads:I
    goto :done
    :next
    add-int/lit8 v2, v2, 0x1
    goto :loop
    :done
    monitor-exit p0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return-void
    :unlock
    move-exception v6
    monitor-exit p0
    throw v6
.end method

.method public activeCount()I
    .registers 2
    iget v0, p0, Ljava/lang/ThreadGroup;->nthreads:I
    return v0
.end method

.method public final getParent()Ljava/lang/ThreadGroup;
    .registers 2
    iget-object v0, p0, Ljava/lang/ThreadGroup;->parent:Ljava/lang/ThreadGroup;
    return-object v0
.end method

# Copies this group's threads into LIST from index 0, then, when RECURSE, its subgroups'; returns
# how many were copied (at most LIST's length), as libcore's enumerate(Thread[], boolean).
.method public enumerate([Ljava/lang/Thread;Z)I
    .registers 4
    const/4 v0, 0x0
    invoke-direct {p0, p1, v0, p2}, Ljava/lang/ThreadGroup;->enumerate([Ljava/lang/Thread;IZ)I
    move-result v0
    return v0
.end method

# enumerate from index AT; returns the next free index. Synchronized on each group it reads.
.method private declared-synchronized enumerate([Ljava/lang/Thread;IZ)I
    .registers 10
    monitor-enter p0
    :try_start
    iget v0, p0, Ljava/lang/ThreadGroup;->nthreads:I
    iget-object v1, p0, Ljava/lang/ThreadGroup;->threads:[Ljava/lang/Thread;
    array-length v2, p1
    const/4 v3, 0x0
    :threads
    if-ge v3, v0, :groups
    if-ge p2, v2, :done
    aget-object v4, v1, v3
    aput-object v4, p1, p2
    add-int/lit8 p2, p2, 0x1
    add-int/lit8 v3, v3, 0x1
    goto :threads
    :groups
    if-eqz p3, :done
    iget v0, p0, Ljava/lang/ThreadGroup;->ngroups:I
    iget-object v1, p0, Ljava/lang/ThreadGroup;->groups:[Ljava/lang/ThreadGroup;
    const/4 v3, 0x0
    :group
    if-ge v3, v0, :done
    aget-object v4, v1, v3
    invoke-direct {v4, p1, p2, p3}, Ljava/lang/ThreadGroup;->enumerate([Ljava/lang/Thread;IZ)I
    move-result p2
    add-int/lit8 v3, v3, 0x1
    goto :group
    :done
    monitor-exit p0
    :try_end
    .catchall {:try_start .. :try_end} :unlock
    return p2
    :unlock
    move-exception v5
    monitor-exit p0
    throw v5
.end method
