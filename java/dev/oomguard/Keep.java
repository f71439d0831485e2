package dev.oomguard;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks what native code reaches by name (a method it calls, a field it reads, a class it finds),
 * so that a minified release build (R8, ProGuard) keeps it and its name: the consumer rules that
 * ship with the facade ({@code proguard.txt}) keep every member of a {@code dev.oomguard} class
 * marked with it, and every {@code dev.oomguard} class marked with it. Native methods need no
 * mark (the rules keep them by kind). Read only by the shrinker: class retention.
 */
@Documented
@Retention(RetentionPolicy.CLASS)
@Target({ElementType.TYPE, ElementType.METHOD, ElementType.FIELD, ElementType.CONSTRUCTOR})
public @interface Keep {}
