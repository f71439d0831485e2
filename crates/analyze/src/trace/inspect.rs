//! Inspectors: whether one object on a path is leaking, from the values of its fields as the dump
//! holds them (instance fields survive the `arrays` strip, so a stripped twin gets the same
//! answers; no inspector reads the contents of a primitive array, such as a string's).
//!
//! Each inspector answers for objects of one kind (the first that applies wins):
//! - a class object: NOT_LEAKING, "a class is never leaking";
//! - `android.app.Application`: NOT_LEAKING (one per process, for its whole life);
//! - `android.app.Activity`: `mDestroyed` true: LEAKING; false: NOT_LEAKING, also when `mFinished`
//!   is true (finishing: the framework holds it until it is destroyed); without an `mDestroyed`
//!   field (before API 17), UNKNOWN;
//! - a Fragment (androidx, support, framework): `mFragmentManager` null: LEAKING (with `mDetached`
//!   named when it is true); else NOT_LEAKING;
//! - `android.view.View`: `mContext` a destroyed Activity (one a detector flagged), directly or
//!   through up to [`WRAPPER_HOPS`] `android.content.ContextWrapper`s' `mBase` (a
//!   `ContextThemeWrapper`, Hilt's `FragmentContextWrapper`, ...; the reason names the chain):
//!   LEAKING; `mAttachInfo` not null: NOT_LEAKING (attached to a window); else UNKNOWN;
//! - `android.app.Dialog`: UNKNOWN, with `mShowing` or `mDecor` as its label: a dialog can stay
//!   showing after its Activity is destroyed, and a dismissed dialog and one never shown both have
//!   a null `mDecor`, so neither field proves anything;
//! - `android.view.Window`: `mDestroyed` true: LEAKING, false: NOT_LEAKING;
//! - `java.lang.Thread`: a thread the dump lists as a running thread (ROOT_THREAD_OBJECT):
//!   NOT_LEAKING; a started thread that has ended (HotSpot: `threadStatus` TERMINATED; ART:
//!   `started` and `nativePeer` 0): LEAKING, and so is what it alone holds (see the parent module's
//!   propagation);
//! - the framework's objects of [`framework`] (ContextImpl, ActivityThread, InputMethodManager,
//!   ClassLoader, LoadedApk, MessageQueue, Message, ViewRootImpl, ValueAnimator, LifecycleRegistry,
//!   ApplicationPackageManager, Toast, Editor, Compose's Recomposer and CompositionImpl, Binder,
//!   Service) and anonymous classes: as that module says;
//! - any object a leak detector flagged (Activity, Fragment, watched object): LEAKING with the
//!   detector's reason (also over a framework inspector's mere label).
//!
//! Everything else is UNKNOWN.
//!
//! The wrappers between a View and its Activity are often not on the path (a path through a View
//! may leave it by any other reference), and then pass 3 has not kept their fields. The forward
//! graph is gone by the time the report is built (freed after the shortest paths), and even with it
//! the wrapper's edges would not tell `mBase` from another `Context` field it holds. So the fields
//! are read: [`Inspector::read_context_wrappers`] follows each View's `mContext` and the wrappers'
//! `mBase` over the fields known, and hands the ids of the wrappers it stopped at for want of their
//! fields to a reader that passes over just the pieces holding them; one hop per pass, at most
//! [`WRAPPER_HOPS`] passes, none when no View's context is a wrapper. Only instance fields are
//! read, so a stripped dump gives the same answers.
#![forbid(unsafe_code)]

mod framework;

use super::Status;
use crate::index::{Flag, Index, LEAK_REASONS, MAX_SUPER_CHAIN, NONE};
use hprof::{read_id, sub, BasicType};
use std::collections::HashMap;

/// The class that declares `mBase`, the context a wrapper hands its calls to.
const CONTEXT_WRAPPER: &str = "android.content.ContextWrapper";

/// A View's `mContext` is followed through at most this many wrappers (each a `mBase`).
pub(crate) const WRAPPER_HOPS: usize = 8;

const VIEW: &str = "android.view.View";

/// The field data of instances by id: their class id and field bytes, as the dump holds them.
pub(crate) type FieldMap = HashMap<u64, (u64, Vec<u8>)>;

const FRAGMENTS: [&str; 3] = [
    "androidx.fragment.app.Fragment",
    "android.support.v4.app.Fragment",
    "android.app.Fragment",
];

/// A field value read from an instance's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    Ref(u64),
    Bool(bool),
    Int(i64),
}

/// Where a View's `mContext` leads through wrappers' `mBase`.
#[derive(Debug, Default)]
struct ContextChain {
    /// The wrappers passed, in order.
    wrappers: Vec<u32>,
    /// The first context that is no wrapper to follow (a destroyed Activity, any other Activity,
    /// the Application, a `ContextImpl`, ...), if the walk got there.
    end: Option<u32>,
    /// The last wrapper, if the walk stopped there for want of its fields.
    unread: Option<u64>,
}

/// What the inspectors read: the index, the field bytes of the objects on the paths (by id:
/// class id and field data, as the dump holds them), the detectors' leak flags and the running
/// threads.
pub(crate) struct Inspector<'a> {
    ix: &'a Index,
    fields: &'a FieldMap,
    leaks: HashMap<u32, &'a Flag>,
    threads: Vec<u32>,
}

impl<'a> Inspector<'a> {
    pub(crate) fn new(ix: &'a Index, fields: &'a FieldMap) -> Self {
        let leaks = ix
            .flags
            .iter()
            .filter(|f| LEAK_REASONS.contains(&f.reason.as_str()))
            .map(|f| (f.node, f))
            .collect();
        let mut threads: Vec<u32> = ix
            .roots
            .iter()
            .filter(|r| r.tag == sub::ROOT_THREAD_OBJECT)
            .map(|r| r.node)
            .collect();
        threads.sort_unstable();
        Inspector {
            ix,
            fields,
            leaks,
            threads,
        }
    }

    /// Reads into `fields` the fields of the `ContextWrapper`s that the Views among `nodes`
    /// reach from `mContext` through `mBase` (see the module documentation). `read(ids)` returns
    /// the fields of those of the instances `ids` (sorted) that the dump holds.
    pub(crate) fn read_context_wrappers<E>(
        ix: &Index,
        nodes: &[u32],
        fields: &mut FieldMap,
        read: impl FnMut(Vec<u64>) -> Result<FieldMap, E>,
    ) -> Result<(), E> {
        Self::read_in_hops(ix, nodes, fields, WRAPPER_HOPS, read, |ins, v| {
            match ins.is_view(v) {
                true => ins.context_chain(v).unread.into_iter().collect(),
                false => Vec::new(),
            }
        })
    }

    /// Reads into `fields`, one pass over the dump a hop and at most `hops` passes, the fields
    /// of the objects `wants(inspector, v)` names for each of `nodes` (the next objects whose
    /// fields an inspector needs, found in the fields read so far); none when nothing is
    /// wanted. An object is asked for once. `read(ids)` returns the fields of those of the
    /// instances `ids` (sorted) that the dump holds.
    pub(crate) fn read_in_hops<E>(
        ix: &Index,
        nodes: &[u32],
        fields: &mut FieldMap,
        hops: usize,
        mut read: impl FnMut(Vec<u64>) -> Result<FieldMap, E>,
        wants: impl Fn(&Inspector<'_>, u32) -> Vec<u64>,
    ) -> Result<(), E> {
        let mut asked: Vec<u64> = Vec::new();
        for _ in 0..hops {
            let want: Vec<u64> = {
                let ins = Inspector::new(ix, fields);
                let mut w: Vec<u64> = nodes
                    .iter()
                    .flat_map(|&v| wants(&ins, v))
                    .filter(|id| !fields.contains_key(id) && !asked.contains(id))
                    .collect();
                w.sort_unstable();
                w.dedup();
                w
            };
            if want.is_empty() {
                break;
            }
            asked.extend(&want);
            fields.extend(read(want)?);
        }
        Ok(())
    }

    /// Whether `v` is an instance of `android.view.View`.
    fn is_view(&self, v: u32) -> bool {
        self.ix.class_of_node(v).is_none()
            && self.ix.is_subclass(self.ix.class_of[v as usize], VIEW)
    }

    /// Whether `n` is a destroyed Activity: one a detector flagged.
    fn destroyed_activity(&self, n: u32) -> Option<&'a Flag> {
        self.leaks
            .get(&n)
            .copied()
            .filter(|f| f.reason == "Activity Leak")
    }

    /// Whether `n` is a wrapper to see through: a `ContextWrapper` instance that is neither an
    /// Activity nor the Application (both wrap a `ContextImpl`, and are answers themselves).
    fn is_wrapper(&self, n: u32) -> bool {
        let ix = self.ix;
        if ix.class_of_node(n).is_some() {
            return false;
        }
        let c = ix.class_of[n as usize];
        ix.is_subclass(c, CONTEXT_WRAPPER)
            && !ix.is_subclass(c, "android.app.Activity")
            && !ix.is_subclass(c, "android.app.Application")
    }

    /// Where View `v`'s `mContext` leads: through at most [`WRAPPER_HOPS`] wrappers, each
    /// passed once (a wrapper loop ends the walk, with no end).
    fn context_chain(&self, v: u32) -> ContextChain {
        let ix = self.ix;
        let mut chain = ContextChain::default();
        let mut id = self.ref_field(v, VIEW, "mContext").unwrap_or(0);
        while id != 0 {
            let Some(n) = ix.node(id) else {
                break;
            };
            if self.destroyed_activity(n).is_some() || !self.is_wrapper(n) {
                chain.end = Some(n);
                break;
            }
            if chain.wrappers.len() == WRAPPER_HOPS || chain.wrappers.contains(&n) {
                break;
            }
            chain.wrappers.push(n);
            match self.ref_field(n, CONTEXT_WRAPPER, "mBase") {
                Some(base) => id = base,
                None => {
                    if !self.fields.contains_key(&id) {
                        chain.unread = Some(id);
                    }
                    break;
                }
            }
        }
        chain
    }

    /// Whether `v` is a thread the dump lists as running.
    pub(crate) fn running_thread(&self, v: u32) -> bool {
        self.threads.binary_search(&v).is_ok()
    }

    /// The Java thread id (`Thread.getId()`: the `tid` field, HotSpot's and ART's) of thread
    /// object `v`, if the dump holds its fields.
    pub(crate) fn java_thread_id(&self, v: u32) -> Option<i64> {
        self.int_field(v, "java.lang.Thread", "tid")
    }

    /// The value of field `name` declared by class `decl` (or by any class, if `decl` is
    /// empty) in instance `v`; `None` if the dump does not hold the instance's fields or its
    /// class has no such field.
    fn field(&self, v: u32, decl: &str, name: &str) -> Option<Value> {
        let ix = self.ix;
        let id_size = ix.header.id_size;
        let (class_id, data) = self.fields.get(&ix.id(v))?;
        let mut c = ix.class_by_id(*class_id)?;
        let mut off = 0usize;
        let mut hops = 0;
        while c != NONE && hops < MAX_SUPER_CHAIN {
            let cl = &ix.classes[c as usize];
            for f in &cl.fields {
                let size = f.ty.size(id_size) as usize;
                if f.name == name && (decl.is_empty() || cl.name == decl) {
                    let b = data.get(off..off + size)?;
                    return Some(match f.ty {
                        BasicType::Object => Value::Ref(read_id(b, id_size)),
                        BasicType::Boolean => Value::Bool(b[0] != 0),
                        BasicType::Byte => Value::Int(b[0] as i8 as i64),
                        BasicType::Short | BasicType::Char => {
                            Value::Int(i16::from_be_bytes([b[0], b[1]]) as i64)
                        }
                        BasicType::Int | BasicType::Float => {
                            Value::Int(i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64)
                        }
                        BasicType::Long | BasicType::Double => {
                            let mut a = [0u8; 8];
                            a.copy_from_slice(b);
                            Value::Int(i64::from_be_bytes(a))
                        }
                    });
                }
                off += size;
            }
            c = cl.super_idx;
            hops += 1;
        }
        None
    }

    fn bool_field(&self, v: u32, decl: &str, name: &str) -> Option<bool> {
        match self.field(v, decl, name)? {
            Value::Bool(b) => Some(b),
            Value::Int(i) => Some(i != 0),
            Value::Ref(_) => None,
        }
    }

    fn ref_field(&self, v: u32, decl: &str, name: &str) -> Option<u64> {
        match self.field(v, decl, name)? {
            Value::Ref(r) => Some(r),
            _ => None,
        }
    }

    fn int_field(&self, v: u32, decl: &str, name: &str) -> Option<i64> {
        match self.field(v, decl, name)? {
            Value::Int(i) => Some(i),
            Value::Bool(b) => Some(b as i64),
            Value::Ref(_) => None,
        }
    }

    /// The status of object `v` by itself, and why (empty when nothing is known).
    pub(crate) fn inspect(&self, v: u32) -> (Status, String) {
        let ix = self.ix;
        if ix.class_of_node(v).is_some() {
            return (Status::NotLeaking, "a class is never leaking".into());
        }
        let c = ix.class_of[v as usize];
        let is = |name: &str| ix.is_subclass(c, name);
        if is("android.app.Application") {
            return (
                Status::NotLeaking,
                "the Application object lives as long as the process".into(),
            );
        }
        if is("android.app.Activity") {
            const A: &str = "android.app.Activity";
            let finishing = self.bool_field(v, A, "mFinished") == Some(true);
            return match self.bool_field(v, A, "mDestroyed") {
                Some(true) => (Status::Leaking, "mDestroyed is true".into()),
                // Finishing is not destroyed: the framework holds the Activity until onDestroy.
                Some(false) if finishing => (
                    Status::NotLeaking,
                    "mDestroyed is false (mFinished is true: finishing)".into(),
                ),
                Some(false) => (Status::NotLeaking, "mDestroyed is false".into()),
                None => match self.flagged(v) {
                    (Status::Unknown, _) if finishing => (
                        Status::Unknown,
                        "mFinished is true (no mDestroyed to tell)".into(),
                    ),
                    other => other,
                },
            };
        }
        if let Some(&decl) = FRAGMENTS.iter().find(|&&f| is(f)) {
            return match self.ref_field(v, decl, "mFragmentManager") {
                Some(0) => {
                    let detached = self.bool_field(v, decl, "mDetached") == Some(true);
                    let why = if detached {
                        "mFragmentManager is null and mDetached is true"
                    } else {
                        "mFragmentManager is null"
                    };
                    (Status::Leaking, why.into())
                }
                Some(_) => (Status::NotLeaking, "mFragmentManager is not null".into()),
                None => self.flagged(v),
            };
        }
        if is(VIEW) {
            let chain = self.context_chain(v);
            if let Some(f) = chain.end.and_then(|n| self.destroyed_activity(n)) {
                let why = if chain.wrappers.is_empty() {
                    format!("mContext is a destroyed Activity ({})", f.detail)
                } else {
                    let through: Vec<String> = chain
                        .wrappers
                        .iter()
                        .map(|&w| {
                            let name = ix.class_name(w);
                            let short = name.rsplit('.').next().unwrap_or(&name);
                            format!("{short}.mBase")
                        })
                        .collect();
                    format!(
                        "mContext wraps a destroyed Activity ({}; {})",
                        through.join(" -> "),
                        f.detail
                    )
                };
                return (Status::Leaking, why);
            }
            return match self.ref_field(v, VIEW, "mAttachInfo") {
                Some(0) => (
                    Status::Unknown,
                    "mAttachInfo is null (not attached to a window)".into(),
                ),
                Some(_) => (
                    Status::NotLeaking,
                    "mAttachInfo is not null (attached to a window)".into(),
                ),
                None => self.flagged(v),
            };
        }
        if is("android.app.Dialog") {
            // Labels only: a showing dialog can outlive its Activity, and a null mDecor is a
            // dialog dismissed or never shown.
            const D: &str = "android.app.Dialog";
            let flagged = self.flagged(v);
            if flagged.0 == Status::Leaking {
                return flagged;
            }
            let label = match (
                self.bool_field(v, D, "mShowing"),
                self.ref_field(v, D, "mDecor"),
            ) {
                (Some(true), _) => {
                    "mShowing is true (a dialog can stay showing after its Activity is destroyed)"
                }
                (_, Some(0)) => "mDecor is null (dismissed, or never shown)",
                (Some(false), _) => "mShowing is false",
                _ => "",
            };
            return (Status::Unknown, label.into());
        }
        if is("android.view.Window") {
            return match self.bool_field(v, "android.view.Window", "mDestroyed") {
                Some(true) => (Status::Leaking, "mDestroyed is true".into()),
                Some(false) => (Status::NotLeaking, "mDestroyed is false".into()),
                None => self.flagged(v),
            };
        }
        if is("java.lang.Thread") {
            if self.running_thread(v) {
                return (Status::NotLeaking, "a running thread".into());
            }
            const T: &str = "java.lang.Thread";
            // HotSpot: threadStatus 0 is NEW, bit 2 TERMINATED. ART: started, then a native
            // peer until the thread ends.
            if let Some(s) = self.int_field(v, T, "threadStatus") {
                if s & 2 != 0 {
                    return (Status::Leaking, "the thread has ended".into());
                }
            } else if self.bool_field(v, T, "started") == Some(true)
                && self.int_field(v, T, "nativePeer") == Some(0)
            {
                return (
                    Status::Leaking,
                    "the thread has ended (nativePeer is 0)".into(),
                );
            }
        }
        if let Some((status, why)) = self.framework(v, c) {
            // A label proves nothing: a detector's finding on the object itself wins over it.
            let flagged = self.flagged(v);
            if status == Status::Unknown && flagged.0 == Status::Leaking {
                return flagged;
            }
            return (status, why);
        }
        self.flagged(v)
    }

    /// LEAKING with a detector's reason if one flagged `v`, else UNKNOWN.
    fn flagged(&self, v: u32) -> (Status, String) {
        match self.leaks.get(&v) {
            Some(f) => (Status::Leaking, detector_reason(&f.reason, &f.detail)),
            None => (Status::Unknown, String::new()),
        }
    }
}

/// A detector's finding as a status reason: "Activity Leak: mDestroyed is true".
pub(crate) fn detector_reason(reason: &str, detail: &str) -> String {
    if detail.is_empty() {
        reason.to_string()
    } else {
        format!("{reason}: {detail}")
    }
}
