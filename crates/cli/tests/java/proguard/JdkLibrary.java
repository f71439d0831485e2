/**
 * The library jar Debian's ProGuard 6.2 needs to see the JDK's class hierarchy (which methods
 * override the JDK's, which interfaces a class implements): ProGuard 6.2 reads class files up to
 * Java 13 and refuses the running JDK 17's, so this copies the named modules' classes out of the
 * running JDK's {@code jrt:/} image with their class-file major version set to 52. Only their
 * names, members and hierarchy are read (library classes are never written out or run).
 *
 * <p>{@code java JdkLibrary OUT.jar MODULE...}
 */
import java.net.URI;
import java.nio.file.FileSystem;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.stream.Stream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;

public class JdkLibrary {
    public static void main(String[] args) throws Exception {
        FileSystem jrt = FileSystems.getFileSystem(URI.create("jrt:/"));
        Path out = Paths.get(args[0]);
        int n = 0;
        try (ZipOutputStream z = new ZipOutputStream(Files.newOutputStream(out))) {
            z.setLevel(0);
            for (int i = 1; i < args.length; i++) {
                Path root = jrt.getPath("/modules", args[i]);
                try (Stream<Path> s = Files.walk(root)) {
                    for (Path p : (Iterable<Path>) s::iterator) {
                        String name = root.relativize(p).toString();
                        if (!name.endsWith(".class") || name.equals("module-info.class")) {
                            continue;
                        }
                        byte[] b = Files.readAllBytes(p);
                        b[6] = 0;
                        b[7] = 52;
                        z.putNextEntry(new ZipEntry(name));
                        z.write(b);
                        z.closeEntry();
                        n++;
                    }
                }
            }
        }
        System.out.println(n + " classes");
    }
}
