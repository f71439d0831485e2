    # get(): the referent through ART's getReferent (which the collector's read barrier needs).
    .registers 2
    invoke-direct {p0}, Ljava/lang/ref/Reference;->getReferent()Ljava/lang/Object;
    move-result-object v0
    return-object v0
