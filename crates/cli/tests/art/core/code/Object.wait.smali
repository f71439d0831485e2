    # wait(): ART's native wait(0, 0), which blocks until notify/notifyAll or an interrupt.
    .registers 4
    const-wide/16 v0, 0x0
    const/4 v2, 0x0
    invoke-virtual {p0, v0, v1, v2}, Ljava/lang/Object;->wait(JI)V
    return-void
