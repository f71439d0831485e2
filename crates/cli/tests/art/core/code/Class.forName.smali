    # forName(NAME): the class NAME (dots) from the boot class path, initialized; ART's
    # classForName native throws ClassNotFoundException when there is none.
    .registers 4
    const/4 v0, 0x1
    const/4 v1, 0x0
    invoke-static {p0, v0, v1}, Ljava/lang/Class;->classForName(Ljava/lang/String;ZLjava/lang/ClassLoader;)Ljava/lang/Class;
    move-result-object v0
    return-object v0
