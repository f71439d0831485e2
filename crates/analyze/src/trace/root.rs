//! Where a trace starts, in words: a class and its static field, or the dump's root and the
//! object it holds; for a root on a thread (the thread's object, a Java frame's local, a JNI
//! local, a native stack or thread block reference), the thread by name and, where the dump
//! has stack traces (HotSpot), the frame's method.
//!
//! A thread's name is a string, whose characters a stripped dump does not hold, and a report
//! must not depend on the strip. So the name comes from beside the dump: the agent lists the
//! process's Java threads (id and name) when it takes the dump, in the incident's
//! `runningInfo.javaThreads` (`[{"id": 1, "name": "main"}, …]`), and the thread object's `tid`
//! field (an instance field, which the strip keeps) says which entry is the thread's. A thread
//! with no entry (started after the list was taken, or a dump analysed without its running
//! info) is named by its id: `thread #12`.
#![forbid(unsafe_code)]

use super::inspect::Inspector;
use crate::index::Index;
use crate::paths::{root_name, Ref, CLASS_ROOT, LATE_ROOT};
use hprof::sub;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The thread a trace starts on (`trace.thread`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct TraceThread {
    /// The thread's object in the dump, if it lists it.
    pub object_id: Option<u64>,
    /// The Java thread id (`Thread.getId()`).
    pub id: Option<i64>,
    /// The thread's name, from `runningInfo.javaThreads`.
    pub name: Option<String>,
    /// The method of the root's frame, `Class.method(File.java:12)` (Java frames and JNI
    /// locals, where the dump has stack traces).
    pub frame: Option<String>,
}

impl TraceThread {
    /// `thread "main"` or `thread #12`; `None` when neither is known.
    fn words(&self) -> Option<String> {
        match (&self.name, self.id) {
            (Some(n), _) => Some(format!("thread {n:?}")),
            (None, Some(id)) => Some(format!("thread #{id}")),
            (None, None) => None,
        }
    }
}

/// The names of the process's Java threads by id, from `runningInfo.javaThreads`; entries
/// that are not `{"id": number, "name": string}` are skipped.
pub(crate) fn thread_names(running_info: &serde_json::Value) -> HashMap<i64, String> {
    running_info
        .get("javaThreads")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|t| Some((t.get("id")?.as_i64()?, t.get("name")?.as_str()?.to_string())))
        .collect()
}

/// The thread object a root of tag `tag` at `start` is on (the root itself for a thread
/// object), if the dump lists it.
pub(crate) fn thread_object(ix: &Index, start: u32, tag: u8) -> Option<u32> {
    if tag == sub::ROOT_THREAD_OBJECT {
        return Some(start);
    }
    ix.threads.on_thread(start, tag)?.thread
}

/// The thread a path starting at `start` (tag `tag`) starts on.
fn on_thread(
    ix: &Index,
    ins: &Inspector<'_>,
    names: &HashMap<i64, String>,
    start: u32,
    tag: u8,
) -> Option<TraceThread> {
    let frame = if tag == sub::ROOT_THREAD_OBJECT {
        None
    } else {
        ix.threads.on_thread(start, tag)?.frame
    };
    let obj = thread_object(ix, start, tag);
    let id = obj.and_then(|t| ins.java_thread_id(t));
    Some(TraceThread {
        object_id: obj.map(|t| ix.id(t)),
        id,
        name: id.and_then(|i| names.get(&i).cloned()),
        frame,
    })
}

/// What a path starting at `start` (whose tag is `tag`, first reference `first`) starts from:
/// the root kind, the human text, and the thread it starts on.
pub(crate) fn root_words(
    ix: &Index,
    ins: &Inspector<'_>,
    names: &HashMap<i64, String>,
    start: u32,
    tag: u8,
    first: Option<&Ref>,
) -> (String, String, Option<TraceThread>) {
    let id = ix.id(start);
    if let Some(c) = ix.class_of_node(start) {
        let name = &ix.classes[c as usize].name;
        let (kind, text) = match first {
            Some(Ref::Static(f)) => ("static field", format!("class {name}, static field {f}")),
            _ if tag == sub::ROOT_STICKY_CLASS => ("sticky class", format!("class {name}")),
            _ => ("system class", format!("class {name}")),
        };
        return (kind.into(), text, None);
    }
    let class = ix.class_name(start);
    let object = format!("{class} @0x{id:x}");
    let thread = on_thread(ix, ins, names, start, tag);
    let who = thread.as_ref().and_then(|t| t.words());
    let frame = thread.as_ref().and_then(|t| t.frame.as_deref());
    // " in Class.method(File.java:12) on thread \"main\"", or as much of it as is known.
    let at = match (frame, &who) {
        (Some(f), Some(t)) => format!(" in {f} on {t}"),
        (Some(f), None) => format!(" in {f}"),
        (None, Some(t)) => format!(" on {t}"),
        (None, None) => String::new(),
    };
    let text = match tag {
        sub::ROOT_THREAD_OBJECT => match &who {
            Some(t) => format!("{t} ({object})"),
            None => format!("thread {object}"),
        },
        sub::ROOT_JAVA_FRAME if frame.is_some() => format!("local variable{at}: {object}"),
        sub::ROOT_JAVA_FRAME => format!("local variable of a Java frame{at}: {object}"),
        sub::ROOT_JNI_LOCAL => format!("JNI local reference{at} to {object}"),
        sub::ROOT_NATIVE_STACK => format!("native stack reference{at} to {object}"),
        sub::ROOT_THREAD_BLOCK => format!("thread block{at} on {object}"),
        sub::ROOT_JNI_MONITOR => format!("JNI monitor held{at} on {object}"),
        sub::ROOT_JNI_GLOBAL => format!("JNI global reference to {object}"),
        sub::ROOT_STICKY_CLASS => format!("sticky class root {object}"),
        sub::ROOT_MONITOR_USED => format!("monitor held on {object}"),
        CLASS_ROOT | LATE_ROOT => format!("class root {object}"),
        _ => format!("{} root on {object}", root_name(tag)),
    };
    let kind = match tag {
        sub::ROOT_THREAD_OBJECT => "thread",
        sub::ROOT_JNI_GLOBAL => "JNI global",
        sub::ROOT_JNI_LOCAL => "JNI local",
        sub::ROOT_JAVA_FRAME => "Java frame",
        sub::ROOT_NATIVE_STACK => "native stack",
        sub::ROOT_THREAD_BLOCK => "thread block",
        sub::ROOT_STICKY_CLASS => "sticky class",
        sub::ROOT_MONITOR_USED | sub::ROOT_JNI_MONITOR => "monitor",
        CLASS_ROOT | LATE_ROOT => "system class",
        _ => "other",
    };
    (kind.into(), text, thread)
}
