// A stand-in for android.graphics.Bitmap with the fields oomguard's Bitmap detector reads.
package android.graphics;

public final class Bitmap {
    public final int mWidth;
    public final int mHeight;
    public Bitmap(int w, int h) { mWidth = w; mHeight = h; }
}
