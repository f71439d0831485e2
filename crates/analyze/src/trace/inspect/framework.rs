//! The framework inspectors (issue 42, item 6): objects of the Android framework whose status a
//! field tells, or that live as long as the process, and labels where nothing can be proved.
//! Each reads only instance fields (so a stripped dump gives the same answer): of the object
//! itself, and for some of them of objects off the path ([`Inspector::read_off_path`]), with
//! the detectors' flags of what it references and, for services, the index's check of which
//! services an ActivityThread holds:
//! - `android.app.Service`: held by an ActivityThread (`crate::index::flag_services`):
//!   NOT_LEAKING; flagged "Service Leak" (not held): LEAKING; else (no check made) as any;
//! - `android.app.ContextImpl`: `mOuterContext` a destroyed Activity: LEAKING; the Application:
//!   NOT_LEAKING; else UNKNOWN, labelled with its class;
//! - `android.app.ActivityThread`, `android.view.inputmethod.InputMethodManager`: NOT_LEAKING
//!   (one per process, for its whole life);
//! - `java.lang.ClassLoader`: NOT_LEAKING (a loader lives as long as any class it loaded);
//! - `android.app.LoadedApk`: NOT_LEAKING when its `mApplication` is the Application (the app's
//!   own package, for the process's life); else UNKNOWN;
//! - `android.os.MessageQueue`: `mQuitting` true: LEAKING (its looper has quit, nothing will
//!   read it again); false: NOT_LEAKING (a live looper's queue);
//! - `android.os.Message`: UNKNOWN, labelled with `what` and its target Handler's class;
//! - `android.view.ViewRootImpl`: `mView` null: LEAKING (its window was removed); `mContext` a
//!   destroyed Activity: LEAKING; else UNKNOWN;
//! - `android.animation.ValueAnimator` (`ObjectAnimator` too): UNKNOWN, labelled `mRunning`;
//! - `androidx.lifecycle.LifecycleRegistry`: its `state` (`mState` before Lifecycle 2.6), an
//!   enum read by its `ordinal` (the name is a string, gone from a stripped dump): INITIALIZED,
//!   CREATED, STARTED or RESUMED: NOT_LEAKING; DESTROYED: UNKNOWN, labelled (a destroyed
//!   registry stays held by its owner, a Fragment's view registry by the Fragment). The enum
//!   object is off the path: [`Inspector::read_off_path`] reads its fields;
//! - `android.app.ApplicationPackageManager` (the Application's PackageManager): its
//!   `mContext`'s `mOuterContext` (read off the path) the Application: NOT_LEAKING; else
//!   labelled with it;
//! - `android.widget.Toast`: its `mTN`'s (read off the path) `mWM` set and `mView` null: LEAKING
//!   (shown, then hidden: nothing shows it again); `mWM` null (never shown) or `mView` set
//!   (showing, until its time is up): UNKNOWN, labelled. These are the fields through API 29;
//!   a later Toast (its TN holds a presenter) is UNKNOWN without a label;
//! - `android.widget.Editor`: as its `mTextView` (read off the path when it is not on it), by the
//!   View's rules, the reason prefixed `mTextView: ` (the TextView's context is followed through
//!   the wrappers whose fields are read, only);
//! - `androidx.compose.runtime.Recomposer`: its `_state` flow's `_state` (two objects off the
//!   path), a `Recomposer.State` by ordinal: ShutDown or ShuttingDown: LEAKING (it recomposes
//!   nothing again); Idle or PendingWork: NOT_LEAKING (it runs: a window's recomposer is shut
//!   down when the window is detached); Inactive (pending work or not): UNKNOWN, labelled;
//! - `androidx.compose.runtime.CompositionImpl`: `disposed` true: LEAKING (its content is gone
//!   for good); false: UNKNOWN, labelled;
//! - `android.os.Binder` (stubs of IPC interfaces): UNKNOWN, labelled: another process may hold
//!   a stub long after it is used;
//! - an anonymous class (`Outer$1`): UNKNOWN, labelled with what it extends and its outer
//!   instance (`this$0`), named when that is a destroyed Activity;
//! - any other object whose `mContext`, `context` or `mBase` is a destroyed Activity: UNKNOWN,
//!   labelled so (holding a destroyed Activity proves nothing about the holder).
#![forbid(unsafe_code)]

use super::{FieldMap, Inspector, Status};
use crate::index::{Index, SERVICE_LEAK};

impl Inspector<'_> {
    /// The framework inspectors' answer for instance `v` of class `c`, if one applies.
    pub(super) fn framework(&self, v: u32, c: u32) -> Option<(Status, String)> {
        let ix = self.ix;
        let is = |name: &str| ix.is_subclass(c, name);
        const NOT: Status = Status::NotLeaking;
        const UNK: Status = Status::Unknown;
        if is("android.app.Service") {
            if ix.held_services.binary_search(&v).is_ok() {
                return Some((NOT, "held by ActivityThread (the service runs)".into()));
            }
            return match self.flagged(v) {
                (Status::Leaking, _)
                    if self.leaks.get(&v).is_some_and(|f| f.reason == SERVICE_LEAK) =>
                {
                    Some((
                        Status::Leaking,
                        "not held by ActivityThread (destroyed)".into(),
                    ))
                }
                _ => None,
            };
        }
        if is("android.app.ContextImpl") {
            return Some(self.context_impl(v));
        }
        if is("android.app.ActivityThread") || is("android.view.inputmethod.InputMethodManager") {
            return Some((NOT, "a singleton that lives as long as the process".into()));
        }
        if is("java.lang.ClassLoader") {
            return Some((NOT, "a class loader lives as long as its classes".into()));
        }
        if is("android.app.LoadedApk") {
            let app = self.ref_field(v, "android.app.LoadedApk", "mApplication");
            return Some(match app.and_then(|id| ix.node(id)) {
                Some(n) if self.is_application(n) => (
                    NOT,
                    "mApplication is the Application (the app's own package)".into(),
                ),
                _ => (UNK, String::new()),
            });
        }
        if is("android.os.MessageQueue") {
            return match self.bool_field(v, "android.os.MessageQueue", "mQuitting") {
                Some(true) => Some((
                    Status::Leaking,
                    "mQuitting is true (its looper has quit)".into(),
                )),
                Some(false) => Some((NOT, "mQuitting is false (its looper runs)".into())),
                None => None,
            };
        }
        if is("android.os.Message") {
            return Some((UNK, self.message_label(v)));
        }
        if is("android.view.ViewRootImpl") {
            return self.view_root(v);
        }
        if is("android.animation.ValueAnimator") {
            let label = match self.bool_field(v, "android.animation.ValueAnimator", "mRunning") {
                Some(true) => "mRunning is true (the animation runs)",
                Some(false) => "mRunning is false",
                None => "",
            };
            return Some((UNK, label.into()));
        }
        if is(REGISTRY) {
            return Some(self.lifecycle(v));
        }
        if is(PACKAGE_MANAGER) {
            return Some(self.package_manager(v));
        }
        if is(TOAST) {
            return Some(self.toast(v));
        }
        if is(EDITOR) {
            return Some(self.editor(v));
        }
        if is(RECOMPOSER) {
            return Some(self.recomposer(v));
        }
        if is(COMPOSITION) {
            return Some(match self.bool_field(v, COMPOSITION, "disposed") {
                Some(true) => (
                    Status::Leaking,
                    "disposed is true (its content is gone for good)".into(),
                ),
                Some(false) => (UNK, "disposed is false".into()),
                None => (UNK, String::new()),
            });
        }
        if is("android.os.Binder") {
            return Some((
                UNK,
                "a Binder: another process may hold it long after its last use".into(),
            ));
        }
        self.anonymous(v, c)
            .or_else(|| self.context_field(v))
            .map(|l| (UNK, l))
    }

    /// Whether node `n` is an instance of the Application.
    fn is_application(&self, n: u32) -> bool {
        self.ix.class_of_node(n).is_none()
            && self
                .ix
                .is_subclass(self.ix.class_of[n as usize], "android.app.Application")
    }

    fn context_impl(&self, v: u32) -> (Status, String) {
        let ix = self.ix;
        let outer = self.ref_field(v, "android.app.ContextImpl", "mOuterContext");
        let Some(n) = outer.and_then(|id| ix.node(id)) else {
            return (Status::Unknown, String::new());
        };
        if let Some(f) = self.destroyed_activity(n) {
            return (
                Status::Leaking,
                format!("mOuterContext is a destroyed Activity ({})", f.detail),
            );
        }
        if self.is_application(n) {
            return (
                Status::NotLeaking,
                "mOuterContext is the Application".into(),
            );
        }
        (
            Status::Unknown,
            format!("mOuterContext is {}", short(&ix.class_name(n))),
        )
    }

    fn message_label(&self, v: u32) -> String {
        const M: &str = "android.os.Message";
        let mut parts = Vec::new();
        if let Some(w) = self.int_field(v, M, "what") {
            parts.push(format!("what is {w}"));
        }
        match self.ref_field(v, M, "target") {
            Some(0) => parts.push("no target (recycled, or a template)".into()),
            Some(t) => {
                if let Some(n) = self.ix.node(t) {
                    parts.push(format!("its target is {}", short(&self.ix.class_name(n))));
                }
            }
            None => {}
        }
        parts.join("; ")
    }

    fn view_root(&self, v: u32) -> Option<(Status, String)> {
        const R: &str = "android.view.ViewRootImpl";
        let context = self
            .ref_field(v, R, "mContext")
            .and_then(|id| self.ix.node(id));
        if let Some(f) = context.and_then(|n| self.destroyed_activity(n)) {
            return Some((
                Status::Leaking,
                format!("mContext is a destroyed Activity ({})", f.detail),
            ));
        }
        match self.ref_field(v, R, "mView") {
            Some(0) => Some((
                Status::Leaking,
                "mView is null (its window was removed)".into(),
            )),
            Some(_) => Some((Status::Unknown, "mView is not null".into())),
            None => None,
        }
    }

    /// The label of an anonymous class's instance (`Outer$1`, `Outer$2$1`), if `c` is one.
    fn anonymous(&self, v: u32, c: u32) -> Option<String> {
        let ix = self.ix;
        let cl = &ix.classes[c as usize];
        let (_, last) = cl.name.rsplit_once('$')?;
        if last.is_empty() || !last.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let sup = match cl.super_idx {
            crate::index::NONE => "java.lang.Object".to_string(),
            s => ix.classes[s as usize].name.clone(),
        };
        let mut label = format!("an anonymous subclass of {sup}");
        if let Some(outer) = self.ref_field(v, "", "this$0").filter(|&id| id != 0) {
            let what = match ix.node(outer) {
                Some(n) => match self.destroyed_activity(n) {
                    Some(_) => format!("a destroyed Activity ({})", short(&ix.class_name(n))),
                    None => short(&ix.class_name(n)).to_string(),
                },
                None => "an object the dump lacks".into(),
            };
            label.push_str(&format!("; its outer instance (this$0) is {what}"));
        }
        Some(label)
    }
}

/// `androidx.lifecycle.Lifecycle.State` by ordinal.
const STATES: [&str; 5] = ["DESTROYED", "INITIALIZED", "CREATED", "STARTED", "RESUMED"];

const REGISTRY: &str = "androidx.lifecycle.LifecycleRegistry";

const PACKAGE_MANAGER: &str = "android.app.ApplicationPackageManager";

const TOAST: &str = "android.widget.Toast";

/// The Toast's handler of show and hide (through API 29 it holds the view shown and the
/// WindowManager it was shown with).
const TOAST_TN: &str = "android.widget.Toast$TN";

const EDITOR: &str = "android.widget.Editor";

const RECOMPOSER: &str = "androidx.compose.runtime.Recomposer";

/// `androidx.compose.runtime.Recomposer.State` by ordinal.
const RECOMPOSER_STATES: [&str; 6] = [
    "ShutDown",
    "ShuttingDown",
    "Inactive",
    "InactivePendingWork",
    "Idle",
    "PendingWork",
];

const COMPOSITION: &str = "androidx.compose.runtime.CompositionImpl";

/// The most objects one inspector reads off the path, one after the other (a Recomposer: its
/// state flow, then the flow's value).
pub(crate) const OFF_PATH_HOPS: usize = 2;

impl Inspector<'_> {
    /// The id of LifecycleRegistry `v`'s state (an enum object), if set.
    fn registry_state(&self, v: u32) -> Option<u64> {
        self.ref_field(v, REGISTRY, "state")
            .or_else(|| self.ref_field(v, REGISTRY, "mState"))
            .filter(|&id| id != 0)
    }

    /// The objects off the path whose fields the inspector of `v` reads, in the order it
    /// follows them: a LifecycleRegistry's state enum, an ApplicationPackageManager's
    /// `mContext`, a Toast's `mTN`, an Editor's `mTextView`, a Recomposer's state flow and
    /// that flow's value. The list stops at the first object whose fields are not read yet (the
    /// next is found in them).
    fn off_path(&self, v: u32) -> Vec<u64> {
        let ix = self.ix;
        if ix.class_of_node(v).is_some() {
            return Vec::new();
        }
        let c = ix.class_of[v as usize];
        let first = if ix.is_subclass(c, REGISTRY) {
            self.registry_state(v)
        } else if ix.is_subclass(c, PACKAGE_MANAGER) {
            self.ref_field(v, PACKAGE_MANAGER, "mContext")
        } else if ix.is_subclass(c, TOAST) {
            self.ref_field(v, TOAST, "mTN")
        } else if ix.is_subclass(c, EDITOR) {
            self.ref_field(v, EDITOR, "mTextView")
        } else if ix.is_subclass(c, RECOMPOSER) {
            let flow = self
                .ref_field(v, RECOMPOSER, "_state")
                .filter(|&id| id != 0);
            return match flow {
                Some(f) if self.fields.contains_key(&f) => {
                    let value = ix.node(f).and_then(|n| self.ref_field(n, "", "_state"));
                    [Some(f), value]
                        .into_iter()
                        .flatten()
                        .filter(|&id| id != 0)
                        .collect()
                }
                Some(f) => vec![f],
                None => Vec::new(),
            };
        } else {
            None
        };
        first.filter(|&id| id != 0).into_iter().collect()
    }

    /// Reads into `fields` the fields of the objects off the paths that the inspectors of
    /// `nodes` read ([`Self::off_path`]): one pass a hop, at most [`OFF_PATH_HOPS`] passes,
    /// none when no inspector reads off its path. `read(ids)` returns those of the instances
    /// `ids` (sorted) that the dump holds.
    pub(crate) fn read_off_path<E>(
        ix: &Index,
        nodes: &[u32],
        fields: &mut FieldMap,
        read: impl FnMut(Vec<u64>) -> Result<FieldMap, E>,
    ) -> Result<(), E> {
        Self::read_in_hops(ix, nodes, fields, OFF_PATH_HOPS, read, |ins, v| {
            ins.off_path(v)
        })
    }

    /// An ApplicationPackageManager: its `mContext` (a ContextImpl) and that one's
    /// `mOuterContext`.
    fn package_manager(&self, v: u32) -> (Status, String) {
        let outer = self
            .ref_field(v, PACKAGE_MANAGER, "mContext")
            .and_then(|id| self.ix.node(id))
            .and_then(|n| self.ref_field(n, "android.app.ContextImpl", "mOuterContext"))
            .and_then(|id| self.ix.node(id));
        match outer {
            Some(n) if self.is_application(n) => (
                Status::NotLeaking,
                "mContext.mOuterContext is the Application".into(),
            ),
            Some(n) => match self.destroyed_activity(n) {
                Some(f) => (
                    Status::Unknown,
                    format!(
                        "mContext.mOuterContext is a destroyed Activity ({})",
                        f.detail
                    ),
                ),
                None => (
                    Status::Unknown,
                    format!(
                        "mContext.mOuterContext is {}",
                        short(&self.ix.class_name(n))
                    ),
                ),
            },
            None => (Status::Unknown, String::new()),
        }
    }

    /// A label for an object that holds a destroyed Activity as its context (`mContext`,
    /// `context`, `mBase`), if it does.
    fn context_field(&self, v: u32) -> Option<String> {
        for name in ["mContext", "context", "mBase"] {
            let Some(n) = self
                .ref_field(v, "", name)
                .filter(|&id| id != 0)
                .and_then(|id| self.ix.node(id))
            else {
                continue;
            };
            if self.destroyed_activity(n).is_some() {
                return Some(format!(
                    "{name} is a destroyed Activity ({})",
                    short(&self.ix.class_name(n))
                ));
            }
        }
        None
    }

    /// A Toast, by its `mTN` (read off the path): the WindowManager it was shown with
    /// (`mWM`) and the view it shows (`mView`, null again once hidden).
    fn toast(&self, v: u32) -> (Status, String) {
        let tn = self
            .ref_field(v, TOAST, "mTN")
            .and_then(|id| self.ix.node(id));
        let field = |name| tn.and_then(|n| self.ref_field(n, TOAST_TN, name));
        match (field("mWM"), field("mView")) {
            (Some(wm), Some(0)) if wm != 0 => (
                Status::Leaking,
                "hidden after it was shown (mTN.mWM is set, mTN.mView is null)".into(),
            ),
            (Some(0), _) => (Status::Unknown, "never shown (mTN.mWM is null)".into()),
            (_, Some(view)) if view != 0 => (
                Status::Unknown,
                "showing (mTN.mView is not null: it is hidden when its time is up)".into(),
            ),
            _ => (Status::Unknown, String::new()),
        }
    }

    /// An Editor is as leaking as its TextView (`mTextView`, read off the path when it is not
    /// on it): the View's inspector decides, its reason prefixed.
    fn editor(&self, v: u32) -> (Status, String) {
        let text_view = self
            .ref_field(v, EDITOR, "mTextView")
            .filter(|&id| id != 0)
            .and_then(|id| self.ix.node(id))
            .filter(|&n| self.is_view(n));
        match text_view.map(|n| self.inspect(n)) {
            Some((status, why)) if !why.is_empty() => (status, format!("mTextView: {why}")),
            Some((status, _)) => (status, String::new()),
            None => (Status::Unknown, String::new()),
        }
    }

    /// A Recomposer, by its state: `_state` (a StateFlow) holds a `Recomposer.State`, read by
    /// its ordinal. Shut down (or shutting down): LEAKING, it recomposes nothing again; idle or
    /// with work: NOT_LEAKING, it runs (a window's recomposer is shut down when its window is
    /// detached); inactive: UNKNOWN.
    fn recomposer(&self, v: u32) -> (Status, String) {
        let state = self
            .ref_field(v, RECOMPOSER, "_state")
            .and_then(|id| self.ix.node(id))
            .and_then(|flow| self.ref_field(flow, "", "_state"))
            .and_then(|id| self.ix.node(id))
            .and_then(|n| self.int_field(n, "java.lang.Enum", "ordinal"))
            .and_then(|o| usize::try_from(o).ok())
            .and_then(|o| RECOMPOSER_STATES.get(o).copied());
        match state {
            Some(s @ ("ShutDown" | "ShuttingDown")) => (
                Status::Leaking,
                format!("state is {s} (it recomposes nothing again)"),
            ),
            Some(s @ ("Idle" | "PendingWork")) => {
                (Status::NotLeaking, format!("state is {s} (it runs)"))
            }
            Some(s) => (Status::Unknown, format!("state is {s}")),
            None => (Status::Unknown, String::new()),
        }
    }

    fn lifecycle(&self, v: u32) -> (Status, String) {
        let ordinal = self
            .registry_state(v)
            .and_then(|id| self.ix.node(id))
            .and_then(|n| self.int_field(n, "java.lang.Enum", "ordinal"));
        match ordinal
            .and_then(|o| usize::try_from(o).ok())
            .and_then(|o| STATES.get(o))
        {
            Some(&"DESTROYED") => (
                Status::Unknown,
                "state is DESTROYED (its owner may still hold it)".into(),
            ),
            Some(s) => (Status::NotLeaking, format!("state is {s}")),
            None => (Status::Unknown, String::new()),
        }
    }
}

/// A class name without its package: `com.app.MainActivity` → `MainActivity`.
fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}
