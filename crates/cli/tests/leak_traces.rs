//! Leak traces (issue 32) on real dumps: the demo's leak in a real Java 17 heap (the demo's own
//! classes, dumped without the agent), LeakCanary's Android fixture, and a generated ART-style
//! dump; each against its `arrays`-stripped twin.

mod common;

use analyze::report::GcPath;
use analyze::trace::{Status, Trace};
use analyze::{self, Config, Input, Report};
use hprof::writer::{art_dump, ArtSpec};
use hprof::{strip_bytes, Level};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Screens the demo's app leaks in the test dump.
const SCREENS: usize = 5;

/// A dump of `java/demo/DemoApp.java`'s heap after `SCREENS` destroyed CheckoutActivity objects
/// went into `DemoApp$Session.sHistory` (`tests/java/demo/DemoDump.java`), made once per run.
fn demo_dump() -> &'static Path {
    static DUMP: OnceLock<PathBuf> = OnceLock::new();
    DUMP.get_or_init(|| {
        let root = common::root();
        let dir = root.join(format!("target/test-dumps/demo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let classes = dir.join("classes");
        let mut sources = common::facade_sources();
        sources.extend([
            root.join("crates/cli/tests/java/demo/DemoDump.java"),
            root.join("java/demo/DemoApp.java"),
            root.join("crates/cli/tests/java/leakapp/android/app/Activity.java"),
        ]);
        let refs: Vec<&Path> = sources.iter().map(|p| p.as_path()).collect();
        common::javac(&refs, &classes);
        let out = dir.join("demo.hprof");
        let st = Command::new("java")
            .arg("-Xmx256m")
            .arg("-cp")
            .arg(&classes)
            .arg("DemoDump")
            .arg(&out)
            .arg(SCREENS.to_string())
            .status()
            .expect("java runs");
        assert!(st.success(), "DemoDump failed");
        out
    })
}

fn run(bytes: &[u8]) -> Report {
    analyze::analyze(
        Input::Bytes(bytes),
        &Config::default(),
        serde_json::Value::Null,
    )
    .expect("analysis")
}

/// A report and its `arrays`-stripped twin's.
fn both(bytes: &[u8]) -> (Report, Report) {
    let (mini, _) = strip_bytes(bytes, Level::Arrays).unwrap();
    (run(bytes), run(&mini))
}

/// Every trace of a report as JSON, sorted (to compare two reports).
fn traces(r: &Report) -> Vec<String> {
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
}

/// What holds for every trace: the nodes are the path's objects (KOOM's `path[]` has one item
/// per reference plus the object); only the last has no reference; a path that starts at a
/// class says so and the class is not leaking; the suspects are one run of references.
fn well_formed(t: &Trace, koom_items: usize) {
    let n = t.nodes.len();
    assert!(n >= 1, "{t:#?}");
    assert_eq!(n, koom_items, "{t:#?}");
    for (i, node) in t.nodes.iter().enumerate() {
        assert_eq!(node.reference.is_none(), i + 1 == n, "{t:#?}");
        assert_eq!(node.reference_type.is_none(), i + 1 == n, "{t:#?}");
        assert!(
            node.kind != "class" || (i == 0 && node.status == Status::NotLeaking),
            "a class only starts a path, and is never leaking: {t:#?}"
        );
    }
    if t.nodes[0].kind == "class" {
        assert!(
            ["static field", "sticky class", "system class"].contains(&t.root_kind.as_str()),
            "{t:#?}"
        );
    }
    let s: Vec<usize> = (0..n).filter(|&i| t.nodes[i].suspect).collect();
    if let (Some(&a), Some(&b)) = (s.first(), s.last()) {
        assert_eq!(b - a + 1, s.len(), "suspects are one run: {t:#?}");
    }
    // Nothing before the last not-leaking object is leaking or unknown.
    if let Some(l) = t.nodes.iter().rposition(|x| x.status == Status::NotLeaking) {
        assert!(t.nodes[..l].iter().all(|x| x.status == Status::NotLeaking));
    }
}

fn check_all(r: &Report) {
    for g in &r.gc_paths {
        well_formed(&g.trace, g.path.len());
        assert_eq!(
            g.trace.nodes.last().unwrap().status,
            Status::Leaking,
            "{:#?}",
            g.trace
        );
    }
    for d in &r.dominators {
        well_formed(&d.trace, d.path.len());
    }
}

fn statuses(g: &GcPath) -> Vec<(&str, &str, bool)> {
    g.trace
        .nodes
        .iter()
        .map(|n| (n.class_name.as_str(), n.status.as_str(), n.suspect))
        .collect()
}

#[test]
fn the_demo_leak_starts_at_the_static_field_and_the_suspects_lead_to_the_activity() {
    let bytes = std::fs::read(demo_dump()).unwrap();
    let (r, stripped) = both(&bytes);
    let g = r
        .gc_paths
        .iter()
        .find(|g| g.class_name == "DemoApp$CheckoutActivity")
        .unwrap_or_else(|| panic!("no path for the activities: {:#?}", r.gc_paths));
    assert_eq!(g.leak_reason, "Activity Leak");
    assert_eq!(g.instance_count, SCREENS as u64);
    // KOOM's fields: the path starts at the class's static field, not at the app class
    // loader's list of classes.
    let refs: Vec<&str> = g.path.iter().map(|i| i.reference.as_str()).collect();
    assert_eq!(g.gc_root, "System Class", "{refs:?}");
    assert_eq!(
        &refs[..2],
        [
            "DemoApp$Session.sHistory",
            "java.util.ArrayList.elementData"
        ]
    );
    assert!(refs[2].starts_with("java.lang.Object[]["), "{refs:?}");
    assert_eq!(refs[3], "DemoApp$CheckoutActivity");
    assert_eq!(refs.len(), 4);

    let t = &g.trace;
    assert_eq!(t.root_kind, "static field");
    assert_eq!(t.root, "class DemoApp$Session, static field sHistory");
    assert_eq!(
        statuses(g),
        [
            ("DemoApp$Session", "NOT_LEAKING", true),
            ("java.util.ArrayList", "UNKNOWN", true),
            ("java.lang.Object[]", "UNKNOWN", true),
            ("DemoApp$CheckoutActivity", "LEAKING", false),
        ]
    );
    let n = &t.nodes;
    assert_eq!(n[0].status_reason, "a class is never leaking");
    assert_eq!(n[3].status_reason, "mDestroyed is true");
    let kinds: Vec<&str> = n.iter().map(|x| x.kind.as_str()).collect();
    assert_eq!(kinds, ["class", "instance", "array", "instance"]);
    let types: Vec<Option<&str>> = n.iter().map(|x| x.reference_type.as_deref()).collect();
    assert_eq!(
        types,
        [
            Some("static field"),
            Some("instance field"),
            Some("array element"),
            None
        ]
    );
    assert_eq!(n[0].reference.as_deref(), Some("sHistory"));
    assert_eq!(n[1].reference.as_deref(), Some("elementData"));
    // The activity is one of the leak objects, the largest; the list retains every activity.
    let objs: Vec<_> = r
        .leak_objects
        .iter()
        .filter(|o| o.class_name == "DemoApp$CheckoutActivity")
        .collect();
    assert_eq!(objs.len(), SCREENS);
    let largest = objs.iter().map(|o| o.retained_size).max().unwrap();
    assert!(objs.iter().any(|o| o.object_id == n[3].object_id));
    assert_eq!(n[3].retained_size, largest);
    assert!(n[1].retained_size >= objs.iter().map(|o| o.retained_size).sum::<u64>());

    // The image cache's arrays, which the activities alone hold: part of their leak (issue
    // 42: one leak, one card), not findings of their own.
    let act = r
        .gc_paths
        .iter()
        .find(|g| g.leak_reason == "Activity Leak")
        .unwrap();
    assert_eq!(act.consequences.len(), 1, "{:?}", act.consequences);
    let c = &act.consequences[0];
    assert_eq!(
        (c.leak_reason.as_str(), c.class_name.as_str()),
        ("Array Size Over Threshold", "byte[]")
    );
    assert!(
        c.instance_count > 0 && c.instance_count % SCREENS as u64 == 0,
        "{c:?}"
    );
    assert!(act.retained_size >= c.retained_size);
    assert!(r
        .gc_paths
        .iter()
        .all(|g| g.leak_reason != "Array Size Over Threshold"));
    check_all(&r);
    assert_eq!(traces(&r), traces(&stripped));
}

#[test]
fn the_command_line_prints_the_demo_leak_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let o = Command::new(common::oomguard_bin())
        .arg("analyze")
        .arg(demo_dump())
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    println!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("leak 1 of ") && l.contains("DemoApp$CheckoutActivity"))
        .unwrap_or_else(|| panic!("no trace for the activities:\n{text}"));
    assert!(
        lines[at].contains("(Activity Leak), 5 instances, "),
        "{}",
        lines[at]
    );
    // The arrays the activities alone hold are part of this leak (issue 42).
    assert!(
        lines[at + 1]
            .trim()
            .starts_with("holds alone: 40 × byte[] (Array Size Over Threshold), "),
        "{}",
        lines[at + 1]
    );
    let trace = &lines[at + 2..at + 10];
    assert_eq!(
        trace[0].trim(),
        "root: class DemoApp$Session, static field sHistory (static field)"
    );
    let words = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
    assert_eq!(
        words(trace[1]),
        [
            "class",
            "DemoApp$Session",
            "NOT_LEAKING",
            "(a",
            "class",
            "is",
            "never",
            "leaking)"
        ]
    );
    assert_eq!(
        words(trace[2]),
        ["↓", "DemoApp$Session.sHistory", "~~~", "suspect"]
    );
    assert_eq!(words(trace[3]), ["java.util.ArrayList", "UNKNOWN"]);
    assert_eq!(
        words(trace[4]),
        ["↓", "java.util.ArrayList.elementData", "~~~", "suspect"]
    );
    assert_eq!(words(trace[7]).len(), 5);
    assert!(
        trace[7].contains("DemoApp$CheckoutActivity")
            && trace[7].contains("LEAKING (mDestroyed is true)"),
        "{}",
        trace[7]
    );
    // Readable without colour: no escape sequences.
    assert!(!text.contains('\u{1b}'));
}

/// `tests/java/traces/ThreadLeak.java`'s dump: destroyed activities held by an ended thread
/// (through a static field), by a running thread, and by local variables on two threads. With
/// the thread list the program wrote beside the dump (as the agent writes it into an incident's
/// running info), each path on a thread names the thread, and a Java frame its method.
#[test]
fn threads_on_a_java_17_heap_running_ended_and_their_frames() {
    let root = common::root();
    let dir = root.join(format!("target/test-dumps/threads-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let classes = dir.join("classes");
    let sources = [
        root.join("crates/cli/tests/java/traces/ThreadLeak.java"),
        root.join("crates/cli/tests/java/leakapp/android/app/Activity.java"),
    ];
    let refs: Vec<&Path> = sources.iter().map(|p| p.as_path()).collect();
    common::javac(&refs, &classes);
    let out = dir.join("threads.hprof");
    let st = Command::new("java")
        .arg("-cp")
        .arg(&classes)
        .arg("ThreadLeak")
        .arg(&out)
        .status()
        .expect("java runs");
    assert!(st.success(), "ThreadLeak failed");
    let bytes = std::fs::read(&out).unwrap();
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("threads.hprof.threads.json")).unwrap())
            .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let (mini, _) = strip_bytes(&bytes, Level::Arrays).unwrap();
    let with = |b: &[u8], i: &serde_json::Value| {
        analyze::analyze(Input::Bytes(b), &Config::default(), i.clone()).expect("analysis")
    };
    let r = with(&bytes, &info);
    let stripped = with(&mini, &info);
    let paths: Vec<&GcPath> = r
        .gc_paths
        .iter()
        .filter(|g| g.class_name == "ThreadLeak$Screen")
        .collect();
    assert_eq!(paths.len(), 4, "{:#?}", r.gc_paths);
    let by_kind = |kind: &str, on: &str| {
        *paths
            .iter()
            .find(|g| {
                g.trace.root_kind == kind
                    && g.trace.thread.as_ref().and_then(|t| t.name.as_deref()) == Some(on)
            })
            .unwrap_or_else(|| panic!("no {kind} path on {on}: {paths:#?}"))
    };
    let running = by_kind("thread", "screen-loader");
    assert!(
        running
            .trace
            .root
            .starts_with("thread \"screen-loader\" (ThreadLeak$Worker @0x"),
        "{}",
        running.trace.root
    );
    assert_eq!(running.gc_root, "Thread Object");
    assert_eq!(
        statuses(running),
        [
            ("ThreadLeak$Worker", "NOT_LEAKING", true),
            ("ThreadLeak$Screen", "LEAKING", false),
        ]
    );
    assert_eq!(running.trace.nodes[0].status_reason, "a running thread");
    assert_eq!(running.trace.nodes[0].reference.as_deref(), Some("target"));
    let t = running.trace.thread.as_ref().unwrap();
    assert_eq!(t.object_id, Some(running.trace.nodes[0].object_id));
    assert!(t.id.is_some_and(|id| id > 1), "{t:?}");

    // The local variables: HotSpot's dump has a stack trace per thread, so the frame's method
    // and line are named.
    let local = by_kind("Java frame", "frame-holder");
    assert_eq!(local.gc_root, "Java Frame");
    let frame = local.trace.thread.as_ref().unwrap().frame.clone().unwrap();
    assert!(
        frame.starts_with("ThreadLeak$Holder.run(ThreadLeak.java:"),
        "{frame}"
    );
    assert!(
        local.trace.root.starts_with(&format!(
            "local variable in {frame} on thread \"frame-holder\": ThreadLeak$Screen[] @0x"
        )),
        "{}",
        local.trace.root
    );
    let main = by_kind("Java frame", "main");
    let frame = main.trace.thread.as_ref().unwrap().frame.clone().unwrap();
    assert!(
        frame.starts_with("ThreadLeak.main(ThreadLeak.java:"),
        "{frame}"
    );
    assert_eq!(main.trace.thread.as_ref().unwrap().id, Some(1));

    let ended = paths
        .iter()
        .find(|g| g.trace.root_kind == "static field")
        .expect("the ended thread's path");
    assert_eq!(
        ended.trace.root,
        "class ThreadLeak$Threads, static field sLast"
    );
    assert!(ended.trace.thread.is_none());
    assert_eq!(
        statuses(ended),
        [
            ("ThreadLeak$Threads", "NOT_LEAKING", true),
            ("ThreadLeak$Worker", "LEAKING", false),
            ("ThreadLeak$Screen", "LEAKING", false),
        ]
    );
    assert_eq!(ended.trace.nodes[1].status_reason, "the thread has ended");
    check_all(&r);
    assert_eq!(traces(&r), traces(&stripped));

    // Without the list (a dump analysed on its own) a thread is its id; the report of the
    // stripped twin still matches.
    let (bare, bare_stripped) = both(&bytes);
    let root_of = |r: &Report, kind: &str| -> Vec<String> {
        let mut v: Vec<String> = r
            .gc_paths
            .iter()
            .filter(|g| g.trace.root_kind == kind)
            .map(|g| g.trace.root.clone())
            .collect();
        v.sort();
        v
    };
    let roots = root_of(&bare, "thread");
    assert_eq!(roots.len(), 1, "{roots:?}");
    assert!(
        roots[0].starts_with(&format!("thread #{} (ThreadLeak$Worker @0x", t.id.unwrap())),
        "{roots:?}"
    );
    assert_eq!(traces(&bare), traces(&bare_stripped));
}

#[test]
fn leak_service_binder_trace_names_the_jni_global_and_the_watched_service() {
    let bytes = std::fs::read(common::fixture("android/leak_service_binder.hprof")).unwrap();
    let (r, stripped) = both(&bytes);
    let g = r
        .gc_paths
        .iter()
        .find(|g| g.class_name == "com.example.leakcanary.LeakyService")
        .expect("the service's path");
    // Not through a static field: the dump's own root, as before.
    assert_eq!(g.gc_root, "JNI Global");
    assert_eq!(g.trace.root_kind, "JNI global");
    assert!(
        g.trace.root.starts_with(
            "JNI global reference to com.example.leakcanary.LeakyService$MyBinder @0x"
        ),
        "{}",
        g.trace.root
    );
    assert_eq!(
        statuses(g),
        [
            (
                "com.example.leakcanary.LeakyService$MyBinder",
                "UNKNOWN",
                true
            ),
            ("com.example.leakcanary.LeakyService", "LEAKING", false),
        ]
    );
    assert_eq!(g.trace.nodes[0].reference.as_deref(), Some("service"));
    // Watched, and destroyed: ActivityThread no longer holds it (issue 42). One finding, the
    // more specific: a Service Leak.
    assert_eq!(g.leak_reason, "Service Leak");
    assert_eq!(
        g.trace.nodes[1].status_reason,
        "not held by ActivityThread (destroyed)"
    );
    // The binder is labelled, not judged.
    assert_eq!(
        g.trace.nodes[0].status_reason,
        "a Binder: another process may hold it long after its last use"
    );
    // The sample app's other leak, which only watched objects missed: a static list of
    // binders holding a service destroyed earlier.
    let other = r
        .gc_paths
        .iter()
        .find(|g| {
            g.trace.root
                == "class com.example.leakcanary.LeakyService, static field leakAllTheBinders"
        })
        .expect("the leakAllTheBinders path");
    assert_eq!(other.leak_reason, "Service Leak");
    check_all(&r);
    assert_eq!(traces(&r), traces(&stripped));
}

#[test]
fn generated_art_dump_traces_are_well_formed_and_survive_the_strip() {
    let bytes = art_dump(&ArtSpec::default());
    let (r, stripped) = both(&bytes);
    assert!(!r.dominators.is_empty());
    check_all(&r);
    assert_eq!(traces(&r), traces(&stripped));
    // The app class's static (`Node.sInstances`) holds the thread object, which is a root of
    // its own: a path to it starts at the thread, not at the class.
    for d in &r.dominators {
        let t = &d.trace;
        if t.root_kind == "thread" {
            assert!(t.root.starts_with("thread "), "{t:#?}");
            assert_eq!(t.nodes[0].object_id, 0x1400_0000);
        }
    }
}

/// A crafted dump (issue 39, `deep_chain.py`'s shape, made with the crate's writer): a JNI
/// global holds a chain of `depth` `a.Node`s, the last of which holds an `Object[]` of destroyed
/// activities: `plain` instances of `android.app.Activity`, then one of each of `screens`
/// subclasses (`a.Screen0`, …). Every activity's path is `depth + 2` objects long.
fn deep_chain(depth: u64, plain: u64, screens: u64) -> Vec<u8> {
    use hprof::writer::Writer;
    use hprof::{self, sub, tag, BasicType};
    const OBJ: u64 = 0x100;
    const NODE: u64 = 0x108;
    const ACT: u64 = 0x110;
    const ARR: u64 = 0x118;
    const SCREEN: u64 = 0x1_0000;
    let node = |i: u64| 0x1000_0000 + 16 * i;
    let arr = node(depth);
    let act = |j: u64| arr + 16 + 16 * j;
    let mut w = Writer::new(hprof::Format::V102, 8, 0);
    w.utf8(1, "java/lang/Object")
        .utf8(2, "a/Node")
        .utf8(3, "android/app/Activity")
        .utf8(4, "[Ljava/lang/Object;")
        .utf8(5, "next")
        .utf8(6, "mDestroyed");
    let mut classes = vec![(OBJ, 1), (NODE, 2), (ACT, 3), (ARR, 4)];
    for k in 0..screens {
        w.utf8(100 + k, &format!("a/Screen{k}"));
        classes.push((SCREEN + 8 * k, 100 + k));
    }
    for (serial, &(id, name)) in classes.iter().enumerate() {
        w.load_class(serial as u32 + 1, id, name);
    }
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.class_dump(OBJ, 0, 0, 0, &[], &[]);
    w.class_dump(NODE, OBJ, 0, 8, &[], &[(5, BasicType::Object)]);
    w.class_dump(ACT, OBJ, 0, 1, &[], &[(6, BasicType::Boolean)]);
    w.class_dump(ARR, OBJ, 0, 0, &[], &[]);
    for k in 0..screens {
        w.class_dump(SCREEN + 8 * k, ACT, 0, 1, &[], &[]);
    }
    for &(id, _) in &classes {
        w.root(sub::ROOT_STICKY_CLASS, id);
    }
    w.root_jni_global(node(0), 1);
    for i in 0..depth {
        let next = if i + 1 < depth { node(i + 1) } else { arr };
        w.instance(node(i), NODE, &next.to_be_bytes());
    }
    let n = plain + screens;
    w.object_array(arr, ARR, &(0..n).map(act).collect::<Vec<u64>>());
    for j in 0..n {
        let class = if j < plain {
            ACT
        } else {
            SCREEN + 8 * (j - plain)
        };
        w.instance(act(j), class, &[1]);
    }
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// Where a group's path is cut, from its JSON: (objects kept before the gap, after it, left
/// out); (all, 0, 0) for a whole path.
fn cut_of(g: &GcPath) -> (usize, usize, u64) {
    let v = serde_json::to_value(g).unwrap();
    let items = v["path"].as_array().unwrap();
    match items.iter().position(|i| i["referenceType"] == "LEFT_OUT") {
        Some(k) => (k, items.len() - k - 1, v["stepsLeftOut"].as_u64().unwrap()),
        None => (items.len(), 0, 0),
    }
}

/// A path longer than the old 100,000-step limit is cut in the middle, not at its root end: the
/// report names its real root (it said `gcRoot "Unknown"` and dropped the root end, silently),
/// keeps its first and last objects, says how many were left out (in `path[]`, the trace and
/// the text), and stays small (one such path made a 47.6 MB `report.json`).
#[test]
fn a_path_past_the_old_step_limit_keeps_its_root_and_says_what_was_left_out() {
    let depth = 100_050u64;
    let r = run(&deep_chain(depth, 1, 0));
    assert_eq!(r.gc_paths.len(), 1, "{:?}", findings_of(&r));
    let g = &r.gc_paths[0];
    assert_eq!(g.gc_root, "JNI Global");
    assert_eq!(g.trace.root_kind, "JNI global", "{}", g.trace.root);
    let (head, tail, left) = cut_of(g);
    assert!(left > 0 && head > 0 && tail > 0, "{head} {tail} {left}");
    assert_eq!(head as u64 + tail as u64 + left, depth + 2);
    assert!(head + tail <= 100, "{head} + {tail} objects kept");
    let v = serde_json::to_value(g).unwrap();
    let gap = format!("… {left} steps left out …");
    assert_eq!(v["path"][head]["reference"], gap.as_str());
    assert_eq!(v["path"][0]["reference"], "a.Node.next");
    assert_eq!(v["path"][head + tail]["referenceType"], "LEAKING_INSTANCE");
    assert_eq!(
        v["trace"]["leftOut"],
        serde_json::json!({"after": head - 1, "steps": left})
    );
    well_formed(&g.trace, head + tail);
    let nodes = &g.trace.nodes;
    assert_eq!(nodes[0].class_name, "a.Node");
    assert_eq!(nodes[head - 1].reference.as_deref(), Some("next"));
    assert_eq!(nodes[nodes.len() - 1].class_name, "android.app.Activity");
    let text = analyze::report::Summary(&r).to_string();
    assert!(text.contains(&format!("      {gap}\n")), "{text}");
    let json = serde_json::to_vec(&r).unwrap();
    assert!(json.len() < 64 << 10, "report.json of {} bytes", json.len());
}

fn findings_of(r: &Report) -> Vec<(&str, &str, u64)> {
    r.gc_paths
        .iter()
        .map(|g| {
            (
                g.leak_reason.as_str(),
                g.class_name.as_str(),
                g.instance_count,
            )
        })
        .collect()
}

/// Many suspects on one deep path (`deep_chain.py 4000 1000` took 780 MB and failed under the
/// default budget): one group, whose path alone is named and kept (cut), every suspect still
/// counted and listed with its signature; the report's size does not grow with the depth.
#[test]
fn many_suspects_on_one_deep_path_make_one_bounded_group() {
    let mut sizes = Vec::new();
    for depth in [2_000u64, 4_000] {
        let r = run(&deep_chain(depth, 300, 0));
        assert_eq!(findings_of(&r).len(), 1, "{:?}", findings_of(&r));
        let g = &r.gc_paths[0];
        assert_eq!(g.instance_count, 300);
        assert_eq!(g.gc_root, "JNI Global");
        let (head, tail, left) = cut_of(g);
        assert_eq!(head as u64 + tail as u64 + left, depth + 2);
        assert!(head + tail <= 100, "{head} + {tail} objects kept");
        assert_eq!(r.leak_objects.len(), 300);
        assert!(r.leak_objects.iter().all(|o| o.signature == g.signature));
        for d in &r.dominators {
            assert!(d.trace.nodes.len() <= 100, "{}", d.trace.nodes.len());
        }
        check_all_cut(&r);
        sizes.push(serde_json::to_vec(&r).unwrap().len());
    }
    // Twice the depth, the same report but for the counts of objects left out (digits).
    assert!(sizes[1] < sizes[0] + 1024, "report.json sizes {sizes:?}");
    assert!(sizes[1] < 256 << 10, "report.json sizes {sizes:?}");
}

/// As `check_all`, for reports whose paths may be cut (one `LEFT_OUT` item more in `path[]`).
fn check_all_cut(r: &Report) {
    let items = |p: &[analyze::report::PathItem]| {
        p.len() - p.iter().filter(|i| i.reference_type == "LEFT_OUT").count()
    };
    for g in &r.gc_paths {
        well_formed(&g.trace, items(&g.path));
        assert_eq!(g.trace.nodes.last().unwrap().status, Status::Leaking);
    }
    for d in &r.dominators {
        well_formed(&d.trace, items(&d.path));
    }
}

/// The report's lists are bounded whatever the dump holds: more leaking classes than
/// `MAX_GC_PATHS` keep that many groups, more suspects than `MAX_LEAK_OBJECTS` that many
/// `leakObjects[]`, and `analysis.leftOut` counts the rest.
#[test]
fn the_report_lists_at_most_its_bounds_and_counts_the_rest() {
    use analyze::report::{MAX_GC_PATHS, MAX_LEAK_OBJECTS};
    let screens = MAX_GC_PATHS as u64 + 20;
    let plain = MAX_LEAK_OBJECTS as u64;
    let cfg = Config {
        max_suspects_per_class: 10 * MAX_LEAK_OBJECTS,
        ..Config::default()
    };
    let bytes = deep_chain(3, plain, screens);
    let r = analyze::analyze(Input::Bytes(&bytes), &cfg, serde_json::Value::Null).unwrap();
    assert_eq!(r.gc_paths.len(), MAX_GC_PATHS, "{:?}", findings_of(&r));
    // The largest group is kept: all plain activities share one path.
    assert!(r
        .gc_paths
        .iter()
        .any(|g| g.class_name == "android.app.Activity" && g.instance_count == plain));
    assert_eq!(r.leak_objects.len(), MAX_LEAK_OBJECTS);
    let left = serde_json::to_value(&r.analysis).unwrap()["leftOut"].clone();
    assert_eq!(left["gcPaths"], 20 + 1, "{left}");
    assert_eq!(left["leakObjects"], screens, "{left}");
    check_all_cut(&r);
}
