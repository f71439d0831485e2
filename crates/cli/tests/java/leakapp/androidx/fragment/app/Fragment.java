// A stand-in for androidx.fragment.app.Fragment with the fields oomguard's Fragment detector reads.
package androidx.fragment.app;

public class Fragment {
    public Object mFragmentManager;
    public boolean mCalled;
}
