//! The framework inspectors (`inspect/framework.rs`, issue 42 item 6), each on a dump built with
//! the `hprof` writer: every case is an object held by a static of `Statics` and holding, by
//! `mHeld`, a destroyed activity of its own, so that it is the second object on that
//! activity's path; its stripped twin must give the same verdicts.

use super::inspect_edges::{
    activity, dead, edge_dump, second, Cls, E_APP, E_OBJECT, E_OWN, E_VIEW, F,
};
use super::*;

/// The framework classes, each with the fields its inspector reads, then `mHeld`.
fn classes() -> Vec<Cls> {
    use BasicType::*;
    let held = ("mHeld", Object);
    vec![
        (
            E_OWN,
            "android.app.ContextImpl",
            E_OBJECT,
            vec![("mOuterContext", Object), held],
        ),
        (
            E_OWN + 0x08,
            "android.app.ActivityThread",
            E_OBJECT,
            vec![held],
        ),
        (
            E_OWN + 0x10,
            "android.view.inputmethod.InputMethodManager",
            E_OBJECT,
            vec![held],
        ),
        (E_OWN + 0x18, "java.lang.ClassLoader", E_OBJECT, vec![held]),
        (
            E_OWN + 0x20,
            "android.app.LoadedApk",
            E_OBJECT,
            vec![("mApplication", Object), held],
        ),
        (
            E_OWN + 0x28,
            "android.os.MessageQueue",
            E_OBJECT,
            vec![("mQuitting", Boolean), held],
        ),
        (
            E_OWN + 0x30,
            "android.os.Message",
            E_OBJECT,
            vec![("what", Int), ("target", Object), held],
        ),
        (E_OWN + 0x38, "android.os.Handler", E_OBJECT, vec![]),
        (
            E_OWN + 0x40,
            "android.view.ViewRootImpl",
            E_OBJECT,
            vec![("mView", Object), ("mContext", Object), held],
        ),
        (
            E_OWN + 0x48,
            "android.animation.ValueAnimator",
            E_OBJECT,
            vec![("mRunning", Boolean), held],
        ),
        (
            E_OWN + 0x50,
            "android.animation.ObjectAnimator",
            E_OWN + 0x48,
            vec![],
        ),
        (E_OWN + 0x58, "android.os.Binder", E_OBJECT, vec![held]),
        (E_OWN + 0x60, "com.app.IThing$Stub", E_OWN + 0x58, vec![]),
        (
            E_OWN + 0x68,
            "com.app.MainActivity$1",
            E_OWN + 0x38,
            vec![("this$0", Object), held],
        ),
        (
            E_OWN + 0xd8,
            "com.app.MainActivity$Inner",
            E_OWN + 0x38,
            vec![("this$0", Object), held],
        ),
        (
            E_OWN + 0x70,
            "java.lang.Enum",
            E_OBJECT,
            vec![("name", Object), ("ordinal", Int)],
        ),
        (
            E_OWN + 0x78,
            "androidx.lifecycle.Lifecycle$State",
            E_OWN + 0x70,
            vec![],
        ),
        (
            E_OWN + 0x80,
            "androidx.lifecycle.LifecycleRegistry",
            E_OBJECT,
            vec![("state", Object), held],
        ),
        (
            E_OWN + 0x88,
            "android.app.ApplicationPackageManager",
            E_OBJECT,
            vec![("mContext", Object), held],
        ),
        (
            E_OWN + 0x90,
            "com.app.Cache",
            E_OBJECT,
            vec![("mContext", Object), held],
        ),
        (
            E_OWN + 0x98,
            "android.widget.Toast",
            E_OBJECT,
            vec![("mTN", Object), held],
        ),
        (
            E_OWN + 0xa0,
            "android.widget.Toast$TN",
            E_OBJECT,
            vec![("mView", Object), ("mWM", Object)],
        ),
        (E_OWN + 0xa8, "android.widget.TextView", E_VIEW, vec![]),
        (
            E_OWN + 0xb0,
            "android.widget.Editor",
            E_OBJECT,
            vec![("mTextView", Object), held],
        ),
        (
            E_OWN + 0xb8,
            "kotlinx.coroutines.flow.StateFlowImpl",
            E_OBJECT,
            vec![("_state", Object)],
        ),
        (
            E_OWN + 0xc0,
            "androidx.compose.runtime.Recomposer$State",
            E_OWN + 0x70,
            vec![],
        ),
        (
            E_OWN + 0xc8,
            "androidx.compose.runtime.Recomposer",
            E_OBJECT,
            vec![("_state", Object), held],
        ),
        (
            E_OWN + 0xd0,
            "androidx.compose.runtime.CompositionImpl",
            E_OBJECT,
            vec![("disposed", Boolean), held],
        ),
    ]
}

const LIVE: u64 = 0x1000;
const APP: u64 = 0x1008;
const HANDLER: u64 = 0x1010;
/// `Lifecycle.State.DESTROYED` and `RESUMED` (ordinals 0 and 4), off every path.
const DESTROYED_STATE: u64 = 0x1030;
const RESUMED_STATE: u64 = 0x1040;
/// The Application's ContextImpl, off every path.
const APP_CONTEXT: u64 = 0x1050;
/// Toasts' `mTN`s, off every path: shown then hidden, showing, never shown.
const TN_HIDDEN: u64 = 0x1060;
const TN_SHOWING: u64 = 0x1068;
const TN_NEVER: u64 = 0x1070;
/// TextViews: attached with a live context (off every path); with a destroyed one.
const TV_ATTACHED: u64 = 0x1078;
const TV_DEAD: u64 = 0x1080;
/// Recomposers' state flows and their values (`Recomposer.State`), off every path.
const FLOW_SHUT: u64 = 0x1088;
const FLOW_IDLE: u64 = 0x1090;
const FLOW_INACTIVE: u64 = 0x1098;
const SHUT_DOWN: u64 = 0x10a0;
const IDLE: u64 = 0x10a8;
const INACTIVE: u64 = 0x10b0;
/// ContextImpls whose outer context is a destroyed Activity, or a live one; off every path.
const DEAD_CONTEXT: u64 = 0x10b8;
const LIVE_CONTEXT: u64 = 0x10c0;

/// Each case: (its class, its fields before `mHeld`, the expected status and reason).
fn cases() -> Vec<(u64, Vec<F>, &'static str, String)> {
    let singleton = "a singleton that lives as long as the process".to_string();
    let stub = "a Binder: another process may hold it long after its last use";
    let mut cases = vec![
        (
            E_OWN,
            vec![F::L(dead(40))],
            LEAK,
            "mOuterContext is a destroyed Activity (mDestroyed is true)".into(),
        ),
        (E_OWN, vec![F::L(APP)], NOT, "mOuterContext is the Application".into()),
        (E_OWN, vec![F::L(LIVE)], UNK, "mOuterContext is MainActivity".into()),
        (E_OWN + 0x08, vec![], NOT, singleton.clone()),
        (E_OWN + 0x10, vec![], NOT, singleton),
        (
            E_OWN + 0x18,
            vec![],
            NOT,
            "a class loader lives as long as its classes".into(),
        ),
        (
            E_OWN + 0x20,
            vec![F::L(APP)],
            NOT,
            "mApplication is the Application (the app's own package)".into(),
        ),
        (E_OWN + 0x20, vec![F::L(0)], UNK, String::new()),
        // An mApplication that is not the Application says nothing.
        (E_OWN + 0x20, vec![F::L(LIVE)], UNK, String::new()),
        (
            E_OWN + 0x28,
            vec![F::Z(true)],
            LEAK,
            "mQuitting is true (its looper has quit)".into(),
        ),
        (
            E_OWN + 0x28,
            vec![F::Z(false)],
            NOT,
            "mQuitting is false (its looper runs)".into(),
        ),
        (
            E_OWN + 0x30,
            vec![F::I(7), F::L(HANDLER)],
            UNK,
            "what is 7; its target is Handler".into(),
        ),
        (
            E_OWN + 0x30,
            vec![F::I(0), F::L(0)],
            UNK,
            "what is 0; no target (recycled, or a template)".into(),
        ),
        (
            E_OWN + 0x40,
            vec![F::L(0), F::L(0)],
            LEAK,
            "mView is null (its window was removed)".into(),
        ),
        (
            E_OWN + 0x40,
            vec![F::L(0x1020), F::L(LIVE)],
            UNK,
            "mView is not null".into(),
        ),
        (
            E_OWN + 0x40,
            vec![F::L(0x1020), F::L(dead(41))],
            LEAK,
            "mContext is a destroyed Activity (mDestroyed is true)".into(),
        ),
        (
            E_OWN + 0x50,
            vec![F::Z(true)],
            UNK,
            "mRunning is true (the animation runs)".into(),
        ),
        (E_OWN + 0x60, vec![], UNK, stub.into()),
        (
            E_OWN + 0x68,
            vec![F::L(dead(42))],
            UNK,
            "an anonymous subclass of android.os.Handler; its outer instance (this$0) is a destroyed Activity (MainActivity)"
                .into(),
        ),
        (
            E_OWN + 0x68,
            vec![F::L(LIVE)],
            UNK,
            "an anonymous subclass of android.os.Handler; its outer instance (this$0) is MainActivity"
                .into(),
        ),
        (
            E_OWN + 0x80,
            vec![F::L(RESUMED_STATE)],
            NOT,
            "state is RESUMED".into(),
        ),
        (
            E_OWN + 0x80,
            vec![F::L(DESTROYED_STATE)],
            UNK,
            "state is DESTROYED (its owner may still hold it)".into(),
        ),
        (
            E_OWN + 0x88,
            vec![F::L(APP_CONTEXT)],
            NOT,
            "mContext.mOuterContext is the Application".into(),
        ),
        (
            E_OWN + 0x88,
            vec![F::L(DEAD_CONTEXT)],
            UNK,
            "mContext.mOuterContext is a destroyed Activity (mDestroyed is true)".into(),
        ),
        (
            E_OWN + 0x88,
            vec![F::L(LIVE_CONTEXT)],
            UNK,
            "mContext.mOuterContext is MainActivity".into(),
        ),
        // A named inner class is no anonymous one: the Handler it extends has no inspector.
        (E_OWN + 0xd8, vec![F::L(LIVE)], UNK, String::new()),
        (
            E_OWN + 0x90,
            vec![F::L(dead(43))],
            UNK,
            "mContext is a destroyed Activity (MainActivity)".into(),
        ),
    ];
    cases.extend(widget_and_compose_cases());
    cases
}

/// The cases of Toast, Editor, Recomposer and CompositionImpl.
fn widget_and_compose_cases() -> Vec<(u64, Vec<F>, &'static str, String)> {
    vec![
        (
            E_OWN + 0x98,
            vec![F::L(TN_HIDDEN)],
            LEAK,
            "hidden after it was shown (mTN.mWM is set, mTN.mView is null)".into(),
        ),
        (
            E_OWN + 0x98,
            vec![F::L(TN_SHOWING)],
            UNK,
            "showing (mTN.mView is not null: it is hidden when its time is up)".into(),
        ),
        (
            E_OWN + 0x98,
            vec![F::L(TN_NEVER)],
            UNK,
            "never shown (mTN.mWM is null)".into(),
        ),
        (
            E_OWN + 0xb0,
            vec![F::L(TV_ATTACHED)],
            NOT,
            "mTextView: mAttachInfo is not null (attached to a window)".into(),
        ),
        (
            E_OWN + 0xb0,
            vec![F::L(TV_DEAD)],
            LEAK,
            "mTextView: mContext is a destroyed Activity (mDestroyed is true)".into(),
        ),
        (
            E_OWN + 0xc8,
            vec![F::L(FLOW_SHUT)],
            LEAK,
            "state is ShutDown (it recomposes nothing again)".into(),
        ),
        (
            E_OWN + 0xc8,
            vec![F::L(FLOW_IDLE)],
            NOT,
            "state is Idle (it runs)".into(),
        ),
        (
            E_OWN + 0xc8,
            vec![F::L(FLOW_INACTIVE)],
            UNK,
            "state is Inactive".into(),
        ),
        (
            E_OWN + 0xd0,
            vec![F::Z(true)],
            LEAK,
            "disposed is true (its content is gone for good)".into(),
        ),
        (
            E_OWN + 0xd0,
            vec![F::Z(false)],
            UNK,
            "disposed is false".into(),
        ),
    ]
}

#[test]
fn each_framework_inspector_decides_its_object() {
    let cases = cases();
    let names: Vec<String> = (0..cases.len()).map(|k| format!("sCase{k}")).collect();
    let mut statics: Vec<(&str, u64)> = Vec::new();
    let mut inst: Vec<(u64, u64, Vec<F>)> = vec![
        activity(LIVE, false, 0),
        (APP, E_APP, vec![F::L(0)]),
        (HANDLER, E_OWN + 0x38, vec![]),
        (0x1020, E_VIEW, vec![F::L(0), F::L(0), F::L(0)]),
        (DESTROYED_STATE, E_OWN + 0x78, vec![F::L(0), F::I(0)]),
        (RESUMED_STATE, E_OWN + 0x78, vec![F::L(0), F::I(4)]),
        (APP_CONTEXT, E_OWN, vec![F::L(APP), F::L(0)]),
        activity(dead(43), true, 0),
        (DEAD_CONTEXT, E_OWN, vec![F::L(dead(45)), F::L(0)]),
        activity(dead(45), true, 0),
        (LIVE_CONTEXT, E_OWN, vec![F::L(LIVE), F::L(0)]),
        (TN_HIDDEN, E_OWN + 0xa0, vec![F::L(0), F::L(HANDLER)]),
        (TN_SHOWING, E_OWN + 0xa0, vec![F::L(0x1020), F::L(HANDLER)]),
        (TN_NEVER, E_OWN + 0xa0, vec![F::L(0), F::L(0)]),
        (
            TV_ATTACHED,
            E_OWN + 0xa8,
            vec![F::L(LIVE), F::L(HANDLER), F::L(0)],
        ),
        (
            TV_DEAD,
            E_OWN + 0xa8,
            vec![F::L(dead(44)), F::L(0), F::L(0)],
        ),
        activity(dead(44), true, 0),
        (FLOW_SHUT, E_OWN + 0xb8, vec![F::L(SHUT_DOWN)]),
        (FLOW_IDLE, E_OWN + 0xb8, vec![F::L(IDLE)]),
        (FLOW_INACTIVE, E_OWN + 0xb8, vec![F::L(INACTIVE)]),
        (SHUT_DOWN, E_OWN + 0xc0, vec![F::L(0), F::I(0)]),
        (IDLE, E_OWN + 0xc0, vec![F::L(0), F::I(4)]),
        (INACTIVE, E_OWN + 0xc0, vec![F::L(0), F::I(2)]),
        activity(dead(40), true, 0),
        activity(dead(41), true, 0),
        activity(dead(42), true, 0),
    ];
    for (k, (class, fields, ..)) in cases.iter().enumerate() {
        let id = 0x3000 + k as u64 * 0x10;
        statics.push((&names[k], id));
        let mut fs: Vec<F> = fields
            .iter()
            .map(|f| match *f {
                F::L(r) => F::L(r),
                F::Z(z) => F::Z(z),
                F::I(i) => F::I(i),
                F::J(j) => F::J(j),
            })
            .collect();
        fs.push(F::L(dead(k as u64)));
        inst.push((id, *class, fs));
        inst.push(activity(dead(k as u64), true, 0));
    }
    let full = edge_dump(&classes(), &statics, &inst);
    let (mini, _) = strip_bytes(&full, Level::Arrays).unwrap();
    for bytes in [&full, &mini] {
        let r = report(bytes);
        for (k, (class, _, status, why)) in cases.iter().enumerate() {
            let name = classes()
                .iter()
                .find(|c| c.0 == *class)
                .map(|c| c.1.to_string())
                .unwrap();
            assert_eq!(
                second(&r, dead(k as u64)),
                (name, *status, why.clone()),
                "case {k}"
            );
        }
    }
}
