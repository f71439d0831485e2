    # wait(MS): ART's native wait(MS, 0).
    .registers 4
    const/4 v0, 0x0
    invoke-virtual {p0, p1, p2, v0}, Ljava/lang/Object;->wait(JI)V
    return-void
