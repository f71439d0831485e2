    # getName(): the binary name with dots, cached in the name field as libcore does.
    .registers 2
    iget-object v0, p0, Ljava/lang/Class;->name:Ljava/lang/String;
    if-nez v0, :done
    invoke-direct {p0}, Ljava/lang/Class;->getNameNative()Ljava/lang/String;
    move-result-object v0
    iput-object v0, p0, Ljava/lang/Class;->name:Ljava/lang/String;
    :done
    return-object v0
