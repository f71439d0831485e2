# java.lang.Throwable: a mirror class (fields from runtime/mirror/throwable.h: backtrace, cause,
# detailMessage, stackTrace, suppressedExceptions). Written by hand so that its constructors
# keep the message and cause, which the launcher prints when main throws; ART fills in
# the backtrace itself when it throws. A Throwable is its own cause until one is set, as in
# libcore (ART checks "cause != this" when it wraps one).
.class public Ljava/lang/Throwable;
.super Ljava/lang/Object;
.implements Ljava/io/Serializable;

.field private transient volatile backtrace:Ljava/lang/Object;
.field private cause:Ljava/lang/Throwable;
.field private detailMessage:Ljava/lang/String;
.field private stackTrace:[Ljava/lang/StackTraceElement;
.field private suppressedExceptions:Ljava/util/List;

.method public constructor <init>()V
    .registers 1
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    iput-object p0, p0, Ljava/lang/Throwable;->cause:Ljava/lang/Throwable;
    return-void
.end method

.method public constructor <init>(Ljava/lang/String;)V
    .registers 2
    invoke-direct {p0}, Ljava/lang/Throwable;-><init>()V
    iput-object p1, p0, Ljava/lang/Throwable;->detailMessage:Ljava/lang/String;
    return-void
.end method

.method public constructor <init>(Ljava/lang/String;Ljava/lang/Throwable;)V
    .registers 3
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    iput-object p1, p0, Ljava/lang/Throwable;->detailMessage:Ljava/lang/String;
    iput-object p2, p0, Ljava/lang/Throwable;->cause:Ljava/lang/Throwable;
    return-void
.end method

.method public constructor <init>(Ljava/lang/Throwable;)V
    .registers 2
    invoke-direct {p0}, Ljava/lang/Object;-><init>()V
    iput-object p1, p0, Ljava/lang/Throwable;->cause:Ljava/lang/Throwable;
    return-void
.end method

.method public getMessage()Ljava/lang/String;
    .registers 2
    iget-object v0, p0, Ljava/lang/Throwable;->detailMessage:Ljava/lang/String;
    return-object v0
.end method

# The cause, or null while it is this Throwable itself.
.method public getCause()Ljava/lang/Throwable;
    .registers 2
    iget-object v0, p0, Ljava/lang/Throwable;->cause:Ljava/lang/Throwable;
    if-ne v0, p0, :done
    const/4 v0, 0x0
    :done
    return-object v0
.end method
