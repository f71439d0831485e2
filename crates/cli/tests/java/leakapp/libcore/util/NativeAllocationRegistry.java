// A stand-in for libcore.util.NativeAllocationRegistry (counted by oomguard).
package libcore.util;

public class NativeAllocationRegistry {
    public final long size;
    public NativeAllocationRegistry(long size) { this.size = size; }
}
