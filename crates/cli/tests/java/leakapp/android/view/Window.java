// A stand-in for android.view.Window (counted by oomguard).
package android.view;

public abstract class Window {
    public Object mCallback;
}
