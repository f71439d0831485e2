    # getField(NAME): the public field NAME of this class or its supertypes (ART's
    # getPublicFieldRecursive native), or NoSuchFieldException.
    .registers 4
    invoke-direct {p0, p1}, Ljava/lang/Class;->getPublicFieldRecursive(Ljava/lang/String;)Ljava/lang/reflect/Field;
    move-result-object v0
    if-eqz v0, :missing
    return-object v0
    :missing
    new-instance v1, Ljava/lang/NoSuchFieldException;
    invoke-direct {v1, p1}, Ljava/lang/NoSuchFieldException;-><init>(Ljava/lang/String;)V
    throw v1
