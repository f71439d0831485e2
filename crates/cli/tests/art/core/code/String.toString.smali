    # toString(): this String.
    .registers 1
    return-object p0
