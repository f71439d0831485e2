//! Leak traces on an ART-style dump written by hand (1.0.3, 4-byte ids, an `app` heap), with one
//! path per inspector, and the propagation rules on made-up nodes.

use super::*;
use crate::report::{GcPath, Report};
use crate::tests::report_of as report;
use crate::{analyze, Config, Input};
use hprof::writer::Writer;
use hprof::{strip_bytes, sub, tag, BasicType, Format, Level};

/// A field value of an instance, in layout order.
enum V {
    L(u64),
    Z(bool),
    J(i64),
}

/// A class's instance fields: (name, type).
type Fs = Vec<(&'static str, BasicType)>;

/// Writes classes by name; strings and serials are numbered as they come.
struct Dump {
    w: Writer,
    strings: Vec<String>,
}

impl Dump {
    fn s(&mut self, t: &str) -> u64 {
        if let Some(i) = self.strings.iter().position(|x| x == t) {
            return i as u64 + 1;
        }
        self.strings.push(t.into());
        let id = self.strings.len() as u64;
        self.w.utf8(id, t);
        id
    }
}

const OBJECT: u64 = 0x10;
const ACTIVITY: u64 = 0x20;
const MAIN: u64 = 0x28;
const VIEW: u64 = 0x30;
const DIALOG: u64 = 0x38;
const WINDOW: u64 = 0x40;
const FRAGMENT: u64 = 0x48;
const THREAD: u64 = 0x50;
const APPLICATION: u64 = 0x58;
const HOLDER: u64 = 0x60;
const STATICS: u64 = 0x68;
const LATE: u64 = 0x70;
const OBJECT_ARRAY: u64 = 0x78;

/// Object ids: the activities (all destroyed but `LIVE`), then the objects holding them.
const LIVE: u64 = 0x1000;
fn act(k: u64) -> u64 {
    0x1100 + k * 0x10
}

/// The dump. Each destroyed activity `act(k)` is held by one path:
/// - 1: `Statics.sAttached` -> View (attached; its context `LIVE`) -> `mListener` Holder -> it;
/// - 2: `Statics.sDialog` -> dismissed (or never shown) Dialog (`mDecor` null) -> `mOwner`;
/// - 3: `Statics.sWindow` -> Window (`mDestroyed` false) -> `mCallback` Holder -> it;
/// - 4: `Statics.sWorker` -> ended Thread (`started`, `nativePeer` 0) -> `mTarget`;
/// - 5: a running thread (ROOT_THREAD_OBJECT) -> `mTarget`;
/// - 6: `Statics.sApp` -> Application -> `mLeaks` Object[] -> `[1]`;
/// - 7: a JNI global Holder -> `ref`;
/// - 8: a Java frame's Holder -> `ref`;
/// - 9: `Statics.sDetached` -> View (not attached; its context activity 9 itself) -> `mContext`;
/// - 10: `Late.sKept`, where class `Late`'s loader (a Holder) is no root: a JNI global Holder
///   -> the loader -> its Object[] of classes -> class `Late` -> `sKept`;
/// - `Statics.sFragment` -> detached Fragment -> `mHost` Holder -> a 300 KB byte[].
fn art_dump() -> Vec<u8> {
    let mut d = Dump {
        w: Writer::new(Format::V103, 4, 0),
        strings: Vec::new(),
    };
    let resolved = art_classes(&mut d);
    let app = d.s("app");
    let w = &mut d.w;
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.heap_info(b'A' as u32, app);
    for (id, sup, st, fs) in &resolved {
        let loader = if *id == LATE { 0x2a10 } else { 0 };
        w.class_dump(*id, *sup, loader, 16, st, fs);
        if *id != LATE {
            w.root(sub::ROOT_STICKY_CLASS, *id);
        }
    }
    art_objects(w);
    w.end_segment();
    w.heap_dump_end();
    d.w.finish()
}

/// A class of [`art_dump`]: id, superclass, statics (name, type, value), fields (name, type).
type Resolved = (
    u64,
    u64,
    Vec<(u64, BasicType, Vec<u8>)>,
    Vec<(u64, BasicType)>,
);

/// [`art_dump`]'s classes: their LOAD_CLASS records (and names) written, their statics and
/// fields with names as string ids, for the class dumps.
fn art_classes(d: &mut Dump) -> Vec<Resolved> {
    use BasicType::*;
    let names = [
        (OBJECT, "java.lang.Object"),
        (ACTIVITY, "android.app.Activity"),
        (MAIN, "com.app.MainActivity"),
        (VIEW, "android.view.View"),
        (DIALOG, "android.app.Dialog"),
        (WINDOW, "android.view.Window"),
        (FRAGMENT, "androidx.fragment.app.Fragment"),
        (THREAD, "java.lang.Thread"),
        (APPLICATION, "android.app.Application"),
        (HOLDER, "com.app.Holder"),
        (STATICS, "com.app.Statics"),
        (LATE, "com.app.Late"),
        (OBJECT_ARRAY, "java.lang.Object[]"),
    ];
    for (serial, &(id, name)) in names.iter().enumerate() {
        let n = d.s(name);
        d.w.load_class(serial as u32 + 1, id, n);
    }
    let fields: Vec<(u64, u64, Fs)> = vec![
        (OBJECT, 0, vec![]),
        (
            ACTIVITY,
            OBJECT,
            vec![("mDestroyed", Boolean), ("mFinished", Boolean)],
        ),
        (MAIN, ACTIVITY, vec![]),
        (
            VIEW,
            OBJECT,
            vec![
                ("mContext", Object),
                ("mAttachInfo", Object),
                ("mListener", Object),
            ],
        ),
        (
            DIALOG,
            OBJECT,
            vec![
                ("mDecor", Object),
                ("mShowing", Boolean),
                ("mOwner", Object),
            ],
        ),
        (
            WINDOW,
            OBJECT,
            vec![("mDestroyed", Boolean), ("mCallback", Object)],
        ),
        (
            FRAGMENT,
            OBJECT,
            vec![
                ("mFragmentManager", Object),
                ("mCalled", Boolean),
                ("mDetached", Boolean),
                ("mHost", Object),
            ],
        ),
        (
            THREAD,
            OBJECT,
            vec![
                ("nativePeer", Long),
                ("started", Boolean),
                ("mTarget", Object),
                ("tid", Long),
            ],
        ),
        (APPLICATION, OBJECT, vec![("mLeaks", Object)]),
        (HOLDER, OBJECT, vec![("ref", Object)]),
        (STATICS, OBJECT, vec![]),
        (LATE, OBJECT, vec![]),
        (OBJECT_ARRAY, OBJECT, vec![]),
    ];
    let statics = [
        ("sAttached", 0x2000u64),
        ("sDialog", 0x2100),
        ("sWindow", 0x2200),
        ("sWorker", 0x2300),
        ("sApp", 0x2500),
        ("sDetached", 0x2900),
        ("sFragment", 0x3000),
    ];
    let mut resolved = Vec::new();
    for (id, sup, fs) in &fields {
        let fs: Vec<(u64, BasicType)> = fs.iter().map(|&(n, t)| (d.s(n), t)).collect();
        let st: Vec<(u64, BasicType, Vec<u8>)> = match *id {
            STATICS => statics
                .iter()
                .map(|&(n, v)| (d.s(n), Object, (v as u32).to_be_bytes().to_vec()))
                .collect(),
            LATE => vec![(
                d.s("sKept"),
                Object,
                (act(10) as u32).to_be_bytes().to_vec(),
            )],
            _ => vec![],
        };
        resolved.push((*id, *sup, st, fs));
    }
    resolved
}

/// [`art_dump`]'s objects, after its class dumps: the activities and, per path of the dump's
/// doc, the objects that hold them.
fn art_objects(w: &mut Writer) {
    let inst = |w: &mut Writer, id: u64, class: u64, vals: &[V]| {
        let mut b = Vec::new();
        for v in vals {
            match *v {
                V::L(r) => b.extend((r as u32).to_be_bytes()),
                V::Z(z) => b.push(z as u8),
                V::J(j) => b.extend(j.to_be_bytes()),
            }
        }
        w.instance(id, class, &b);
    };
    let activity = |w: &mut Writer, id: u64, destroyed: bool| {
        inst(w, id, MAIN, &[V::Z(destroyed), V::Z(false)]);
    };
    activity(w, LIVE, false);
    for k in 1..=10 {
        activity(w, act(k), true);
    }
    // 1: attached view -> listener -> activity 1.
    inst(w, 0x2000, VIEW, &[V::L(LIVE), V::L(0x2010), V::L(0x2020)]);
    inst(w, 0x2010, HOLDER, &[V::L(0)]);
    inst(w, 0x2020, HOLDER, &[V::L(act(1))]);
    // 2: dismissed dialog.
    inst(w, 0x2100, DIALOG, &[V::L(0), V::Z(false), V::L(act(2))]);
    // 3: live window -> callback -> activity 3.
    inst(w, 0x2200, WINDOW, &[V::Z(false), V::L(0x2210)]);
    inst(w, 0x2210, HOLDER, &[V::L(act(3))]);
    // 4: an ended thread; 5: a running one.
    inst(
        w,
        0x2300,
        THREAD,
        &[V::J(0), V::Z(true), V::L(act(4)), V::J(6)],
    );
    inst(
        w,
        0x2400,
        THREAD,
        &[V::J(0x7f00_1234), V::Z(true), V::L(act(5)), V::J(7)],
    );
    // ART: thread serial 1, no stack trace (-1).
    w.root2(sub::ROOT_THREAD_OBJECT, 0x2400, 1, u32::MAX);
    // 6: the Application's list.
    inst(w, 0x2500, APPLICATION, &[V::L(0x2510)]);
    w.object_array(0x2510, OBJECT_ARRAY, &[LIVE, act(6)]);
    // 7, 8: a JNI global and a Java frame.
    inst(w, 0x2700, HOLDER, &[V::L(act(7))]);
    w.root_jni_global(0x2700, 0x9000);
    inst(w, 0x2800, HOLDER, &[V::L(act(8))]);
    w.root2(sub::ROOT_JAVA_FRAME, 0x2800, 1, u32::MAX);
    // 9: a detached view whose context is the destroyed activity it leads to.
    inst(w, 0x2900, VIEW, &[V::L(act(9)), V::L(0), V::L(0)]);
    // 10: class Late, whose loader 0x2a10 only a JNI global's Holder reaches.
    inst(w, 0x2a00, HOLDER, &[V::L(0x2a10)]);
    w.root_jni_global(0x2a00, 0x9001);
    inst(w, 0x2a10, HOLDER, &[V::L(0x2a20)]);
    w.object_array(0x2a20, OBJECT_ARRAY, &[LATE]);
    // The detached fragment and what it alone holds.
    inst(
        w,
        0x3000,
        FRAGMENT,
        &[V::L(0), V::Z(true), V::Z(true), V::L(0x3010)],
    );
    inst(w, 0x3010, HOLDER, &[V::L(0x3020)]);
    w.primitive_array(0x3020, BasicType::Byte, 300 << 10, &vec![7u8; 300 << 10]);
}

/// The report with the incident's running info (the agent's thread list).
fn report_with(bytes: &[u8], running_info: serde_json::Value) -> Report {
    analyze(Input::Bytes(bytes), &Config::default(), running_info).unwrap()
}

/// The gcPath whose trace ends at `id`.
fn path_to(r: &Report, id: u64) -> &GcPath {
    r.gc_paths
        .iter()
        .find(|g| g.trace.nodes.last().map(|n| n.object_id) == Some(id))
        .unwrap_or_else(|| panic!("no path to 0x{id:x}: {:#?}", r.gc_paths))
}

/// (class, status, reason, reference, suspect) per node.
fn rows(g: &GcPath) -> Vec<(String, &'static str, String, Option<String>, bool)> {
    g.trace
        .nodes
        .iter()
        .map(|n| {
            (
                n.class_name.clone(),
                n.status.as_str(),
                n.status_reason.clone(),
                n.reference.clone(),
                n.suspect,
            )
        })
        .collect()
}

fn row(
    class: &str,
    status: &'static str,
    reason: &str,
    reference: Option<&str>,
    suspect: bool,
) -> (String, &'static str, String, Option<String>, bool) {
    (
        class.into(),
        status,
        reason.into(),
        reference.map(String::from),
        suspect,
    )
}

const NOT: &str = "NOT_LEAKING";
const LEAK: &str = "LEAKING";
const UNK: &str = "UNKNOWN";
const A: &str = "com.app.MainActivity";
const CLASS: &str = "a class is never leaking";
const DESTROYED: &str = "mDestroyed is true";

#[test]
fn each_inspector_decides_its_object_and_the_suspects_lie_between() {
    let r = report(&art_dump());
    static_field_paths(&r);
    thread_and_array_paths(&r);
    jni_frame_and_detached_view_paths(&r);
    late_class_path(&r);
    fragment_array_path(&r);
}

/// Activities 1 to 4: held through static fields of `com.app.Statics`, by a view, a dialog, a
/// window and an ended thread.
fn static_field_paths(r: &Report) {
    let st = "com.app.Statics";
    let g = path_to(r, act(1));
    assert_eq!(g.trace.root_kind, "static field");
    assert_eq!(
        g.trace.root,
        "class com.app.Statics, static field sAttached"
    );
    assert_eq!(g.gc_root, "System Class");
    assert_eq!(
        rows(g),
        [
            row(st, NOT, CLASS, Some("sAttached"), false),
            row(
                "android.view.View",
                NOT,
                "mAttachInfo is not null (attached to a window)",
                Some("mListener"),
                true
            ),
            row("com.app.Holder", UNK, "", Some("ref"), true),
            row(A, LEAK, DESTROYED, None, false),
        ]
    );
    assert_eq!(g.trace.nodes[0].kind, "class");
    assert_eq!(
        g.trace.nodes[0].reference_type.as_deref(),
        Some("static field")
    );
    assert_eq!(
        g.trace.nodes[1].reference_type.as_deref(),
        Some("instance field")
    );
    assert_eq!(g.trace.nodes[3].reference_type, None);

    let g = path_to(r, act(2));
    assert_eq!(
        rows(g),
        [
            row(st, NOT, CLASS, Some("sDialog"), true),
            // A dialog proves nothing either way (issue 42): UNKNOWN, labelled.
            row(
                "android.app.Dialog",
                UNK,
                "mDecor is null (dismissed, or never shown)",
                Some("mOwner"),
                true
            ),
            row(A, LEAK, DESTROYED, None, false),
        ]
    );
    let g = path_to(r, act(3));
    assert_eq!(
        rows(g),
        [
            row(st, NOT, CLASS, Some("sWindow"), false),
            row(
                "android.view.Window",
                NOT,
                "mDestroyed is false",
                Some("mCallback"),
                true
            ),
            row("com.app.Holder", UNK, "", Some("ref"), true),
            row(A, LEAK, DESTROYED, None, false),
        ]
    );
    let g = path_to(r, act(4));
    assert_eq!(
        rows(g),
        [
            row(st, NOT, CLASS, Some("sWorker"), true),
            row(
                "java.lang.Thread",
                LEAK,
                "the thread has ended (nativePeer is 0)",
                Some("mTarget"),
                false
            ),
            row(A, LEAK, DESTROYED, None, false),
        ]
    );
}

/// Activities 5 and 6: a running thread's, and through an Application's Object[].
fn thread_and_array_paths(r: &Report) {
    let st = "com.app.Statics";
    let g = path_to(r, act(5));
    assert_eq!(g.trace.root_kind, "thread");
    assert_eq!(g.trace.root, "thread #7 (java.lang.Thread @0x2400)");
    assert_eq!(
        rows(g),
        [
            row(
                "java.lang.Thread",
                NOT,
                "a running thread",
                Some("mTarget"),
                true
            ),
            row(A, LEAK, DESTROYED, None, false),
        ]
    );
    let g = path_to(r, act(6));
    assert_eq!(
        rows(g),
        [
            row(st, NOT, CLASS, Some("sApp"), false),
            row(
                "android.app.Application",
                NOT,
                "the Application object lives as long as the process",
                Some("mLeaks"),
                true
            ),
            row("java.lang.Object[]", UNK, "", Some("[1]"), true),
            row(A, LEAK, DESTROYED, None, false),
        ]
    );
    assert_eq!(g.trace.nodes[2].kind, "array");
    assert_eq!(
        g.trace.nodes[2].reference_type.as_deref(),
        Some("array element")
    );
}

/// Activities 7 to 9: a JNI global's and a Java frame's Holder, and a detached view whose
/// context is the activity.
fn jni_frame_and_detached_view_paths(r: &Report) {
    let st = "com.app.Statics";
    for (k, kind, root) in [
        (
            7,
            "JNI global",
            "JNI global reference to com.app.Holder @0x2700",
        ),
        (
            8,
            "Java frame",
            "local variable of a Java frame on thread #7: com.app.Holder @0x2800",
        ),
    ] {
        let g = path_to(r, act(k));
        assert_eq!(
            (g.trace.root_kind.as_str(), g.trace.root.as_str()),
            (kind, root)
        );
        assert_eq!(
            rows(g),
            [
                row("com.app.Holder", UNK, "", Some("ref"), true),
                row(A, LEAK, DESTROYED, None, false),
            ]
        );
    }
    let g = path_to(r, act(9));
    assert_eq!(
        rows(g),
        [
            row(st, NOT, CLASS, Some("sDetached"), true),
            row(
                "android.view.View",
                LEAK,
                "mContext is a destroyed Activity (mDestroyed is true)",
                Some("mContext"),
                false
            ),
            row(A, LEAK, DESTROYED, None, false),
        ]
    );
}

/// Activity 10: held by a static of a class whose loader is no root.
fn late_class_path(r: &Report) {
    // The class whose loader is no root: the path starts at the class, not at the JNI global
    // that reaches its loader.
    let g = path_to(r, act(10));
    assert_eq!(g.gc_root, "System Class");
    assert_eq!(g.trace.root, "class com.app.Late, static field sKept");
    assert_eq!(
        rows(g),
        [
            row("com.app.Late", NOT, CLASS, Some("sKept"), true),
            row(A, LEAK, DESTROYED, None, false),
        ]
    );
}

/// The detached fragment and the 300 KB array it alone holds: one leak, the array listed in it
/// as a consequence (issue 42), not a finding of its own.
fn fragment_array_path(r: &Report) {
    let st = "com.app.Statics";
    let g = r
        .gc_paths
        .iter()
        .find(|g| g.leak_reason == "Fragment Leak")
        .expect("the fragment");
    assert_eq!(
        rows(g),
        [
            row(st, NOT, CLASS, Some("sFragment"), true),
            row(
                "androidx.fragment.app.Fragment",
                LEAK,
                "mFragmentManager is null and mDetached is true",
                None,
                false
            ),
        ]
    );
    assert_eq!(g.consequences.len(), 1, "{:?}", g.consequences);
    let c = &g.consequences[0];
    assert_eq!(
        (
            c.leak_reason.as_str(),
            c.class_name.as_str(),
            c.instance_count
        ),
        ("Array Size Over Threshold", "byte[]", 1)
    );
    assert!(c.retained_size > 300 << 10);
    assert!(g.retained_size >= c.retained_size);
    assert!(r
        .gc_paths
        .iter()
        .all(|g| g.leak_reason != "Array Size Over Threshold"));
    assert!(r.leak_objects.iter().all(|o| o.object_id != 0x3020));
}

#[test]
fn the_stripped_twin_gives_the_same_traces() {
    let full = art_dump();
    let (mini, _) = strip_bytes(&full, Level::Arrays).unwrap();
    let (a, b) = (report(&full), report(&mini));
    assert_eq!(b.analysis.stripped_arrays, 1);
    let traces = |r: &Report| {
        let mut v: Vec<String> = r
            .gc_paths
            .iter()
            .map(|g| serde_json::to_string(&g.trace).unwrap())
            .chain(
                r.dominators
                    .iter()
                    .map(|d| serde_json::to_string(&d.trace).unwrap()),
            )
            .collect();
        v.sort();
        v
    };
    assert!(traces(&a).len() > 10);
    assert_eq!(traces(&a), traces(&b));
}

fn node(status: Status) -> TraceNode {
    TraceNode {
        class_name: "X".into(),
        object_id: 0,
        kind: "instance".into(),
        status,
        status_reason: "inspected".into(),
        reference: Some("f".into()),
        reference_type: Some("instance field".into()),
        suspect: false,
        retained_size: 0,
        declared_class: String::new(),
    }
}

#[test]
fn propagation_follows_the_last_not_leaking_and_the_first_leaking_object() {
    use Status::*;
    let run = |st: &[Status], dominated: usize| {
        let mut ns: Vec<TraceNode> = st.iter().map(|&s| node(s)).collect();
        ns.last_mut().unwrap().reference = None;
        // Node i dominates node j when j - i <= dominated.
        propagate(&mut ns, |i, j| j - i <= dominated);
        ns.iter()
            .map(|n| (n.status, n.status_reason.clone(), n.suspect))
            .collect::<Vec<_>>()
    };
    let r = |s: Status, why: &str, sus: bool| (s, why.to_string(), sus);
    let above = "above a not-leaking object";
    let held = "held only through a leaking object";
    // A LEAKING object above a NOT_LEAKING one is not leaking: the one below is its proof.
    assert_eq!(
        run(
            &[Unknown, Leaking, NotLeaking, Unknown, Leaking, Unknown, Unknown],
            1
        ),
        [
            r(NotLeaking, above, false),
            r(
                NotLeaking,
                "inspected, but an object below it is not leaking",
                false
            ),
            r(NotLeaking, "inspected", true),
            r(Unknown, "inspected", true),
            r(Leaking, "inspected", false),
            r(Leaking, held, false),
            // Not held through the leaking object alone (it dominates one step only), but
            // below it on this path: LEAKING, LeakCanary's rule (issue 42).
            r(
                Leaking,
                "below a leaking object, reachable without it too",
                false
            ),
        ]
    );
    // Nothing not leaking: the suspects start at the root; nothing leaking: they run to the end.
    assert_eq!(
        run(&[Unknown, Unknown, Leaking], 9),
        [
            r(Unknown, "inspected", true),
            r(Unknown, "inspected", true),
            r(Leaking, "inspected", false),
        ]
    );
    assert_eq!(
        run(&[NotLeaking, Unknown, Unknown], 9),
        [
            r(NotLeaking, "inspected", true),
            r(Unknown, "inspected", true),
            r(Unknown, "inspected", false),
        ]
    );
}

/// With the agent's thread list (runningInfo.javaThreads), the thread a path starts on is named,
/// by its object's `tid`: as the thread object itself and as the thread of a Java frame; the
/// stripped twin says the same; an id the list lacks stays a number.
#[test]
fn paths_on_a_thread_name_the_thread_from_the_running_info() {
    let full = art_dump();
    let (mini, _) = strip_bytes(&full, Level::Arrays).unwrap();
    let info = serde_json::json!({"javaThreads": [
        {"id": 1, "name": "main"},
        {"id": 7, "name": "image-loader"},
        {"id": "8", "name": "not a number: skipped"},
    ]});
    for bytes in [&full, &mini] {
        let r = report_with(bytes, info.clone());
        let g = path_to(&r, act(5));
        assert_eq!(
            g.trace.root,
            "thread \"image-loader\" (java.lang.Thread @0x2400)"
        );
        let t = g.trace.thread.as_ref().expect("trace.thread");
        assert_eq!(
            (t.object_id, t.id, t.name.as_deref(), t.frame.as_deref()),
            (Some(0x2400), Some(7), Some("image-loader"), None)
        );
        let g = path_to(&r, act(8));
        assert_eq!(
            g.trace.root,
            "local variable of a Java frame on thread \"image-loader\": com.app.Holder @0x2800"
        );
        assert_eq!(
            g.trace.thread.as_ref().map(|t| t.object_id),
            Some(Some(0x2400))
        );
        // Paths that start on no thread carry no `thread`.
        assert!(path_to(&r, act(7)).trace.thread.is_none());
        let json = serde_json::to_value(&path_to(&r, act(7)).trace).unwrap();
        assert!(json.get("thread").is_none(), "{json}");
    }
    let r = report_with(
        &full,
        serde_json::json!({"javaThreads": [{"id": 1, "name": "main"}]}),
    );
    assert_eq!(
        path_to(&r, act(5)).trace.root,
        "thread #7 (java.lang.Thread @0x2400)"
    );
}

mod dominance;
mod framework;
mod inspect_edges;
mod library_leaks;
mod one_card;
mod own;
mod renames;
mod roots;
mod services;
mod verdicts;
mod wrappers;
