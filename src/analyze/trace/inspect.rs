//! Inspectors: whether one object on a path is leaking, from the values of its fields as the
//! dump holds them (instance fields survive the `arrays` strip, so a stripped twin gets the
//! same answers; no inspector reads the contents of a primitive array, such as a string's).
//!
//! Each inspector answers for objects of one kind (the first that applies wins):
//! - a class object: NOT_LEAKING, "a class is never leaking";
//! - `android.app.Application`: NOT_LEAKING (one per process, for its whole life);
//! - `android.app.Activity`: `mDestroyed` or `mFinished` true: LEAKING; both false: NOT_LEAKING;
//! - a Fragment (androidx, support, framework): `mFragmentManager` null: LEAKING (with
//!   `mDetached` named when it is true); else NOT_LEAKING;
//! - `android.view.View`: `mContext` a destroyed Activity (one a detector flagged): LEAKING;
//!   `mAttachInfo` not null: NOT_LEAKING (attached to a window); else UNKNOWN;
//! - `android.app.Dialog`: `mDecor` null: LEAKING (dismissed); `mShowing` true: NOT_LEAKING;
//! - `android.view.Window`: `mDestroyed` true: LEAKING, false: NOT_LEAKING;
//! - `java.lang.Thread`: a thread the dump lists as a running thread (ROOT_THREAD_OBJECT):
//!   NOT_LEAKING; a started thread that has ended (HotSpot: `threadStatus` TERMINATED; ART:
//!   `started` and `nativePeer` 0): LEAKING, and so is what it alone holds (see the parent
//!   module's propagation);
//! - any object a leak detector flagged (Activity, Fragment, watched object): LEAKING with the
//!   detector's reason.
//!
//! Everything else is UNKNOWN.
#![forbid(unsafe_code)]

use super::Status;
use crate::analyze::index::{Flag, Index, NONE};
use crate::hprof::{read_id, sub, BasicType};
use std::collections::HashMap;

/// The detector reasons that mean "this object is leaking" (not merely large).
const LEAK_REASONS: [&str; 3] = ["Activity Leak", "Fragment Leak", "Watched Object Retained"];

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

/// What the inspectors read: the index, the field bytes of the objects on the paths (by id:
/// class id and field data, as the dump holds them), the detectors' leak flags and the running
/// threads.
pub(crate) struct Inspector<'a> {
    ix: &'a Index,
    fields: &'a HashMap<u64, (u64, Vec<u8>)>,
    leaks: HashMap<u32, &'a Flag>,
    threads: Vec<u32>,
}

impl<'a> Inspector<'a> {
    pub(crate) fn new(ix: &'a Index, fields: &'a HashMap<u64, (u64, Vec<u8>)>) -> Self {
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
        let (class_id, data) = self.fields.get(&ix.ids[v as usize])?;
        let mut c = ix.class_by_id(*class_id)?;
        let mut off = 0usize;
        let mut hops = 0;
        while c != NONE && hops < 256 {
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
            let d = self.bool_field(v, A, "mDestroyed");
            let f = self.bool_field(v, A, "mFinished");
            return match (d, f) {
                (Some(true), _) => (Status::Leaking, "mDestroyed is true".into()),
                (_, Some(true)) => (Status::Leaking, "mFinished is true".into()),
                (Some(false), Some(false)) => (
                    Status::NotLeaking,
                    "mDestroyed and mFinished are false".into(),
                ),
                (Some(false), None) => (Status::NotLeaking, "mDestroyed is false".into()),
                (None, Some(false)) => (Status::NotLeaking, "mFinished is false".into()),
                (None, None) => self.flagged(v),
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
        if is("android.view.View") {
            const V: &str = "android.view.View";
            let ctx = self.ref_field(v, V, "mContext").unwrap_or(0);
            if ctx != 0 {
                if let Some(n) = ix.node(ctx) {
                    if let Some(f) = self.leaks.get(&n) {
                        if f.reason == "Activity Leak" {
                            return (
                                Status::Leaking,
                                format!("mContext is a destroyed Activity ({})", f.detail),
                            );
                        }
                    }
                }
            }
            return match self.ref_field(v, V, "mAttachInfo") {
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
            const D: &str = "android.app.Dialog";
            if self.ref_field(v, D, "mDecor") == Some(0) {
                return (Status::Leaking, "mDecor is null (dismissed)".into());
            }
            return match self.bool_field(v, D, "mShowing") {
                Some(true) => (Status::NotLeaking, "mShowing is true".into()),
                Some(false) => (Status::Unknown, "mShowing is false".into()),
                None => self.flagged(v),
            };
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
