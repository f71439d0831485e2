// A stand-in for android.app.Activity with the fields oomguard's Activity detector reads.
package android.app;

public class Activity {
    public boolean mDestroyed;
    public boolean mFinished;
    public String mTitle = "activity";
}
