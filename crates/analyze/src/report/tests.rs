//! The report's pieces alone: the summary's lines, which fields the JSON leaves out, and the
//! helpers that bound and rank its lists.

use super::*;

fn leak(reason: &str, retained: u64, signature: &str) -> LeakObject {
    LeakObject {
        leak_reason: reason.into(),
        retained_size: retained,
        signature: signature.into(),
        ..LeakObject::default()
    }
}

fn lines(r: &Report) -> Vec<String> {
    Summary(r).to_string().lines().map(str::to_string).collect()
}

const MIB: u64 = 1 << 20;

/// The summary counts each reason's objects and sums what they retain (in MiB, to two places),
/// the top-N groups that retain the most by their instance counts and retained sizes; a group
/// on a known library leak counts under its pattern instead.
#[test]
fn the_summary_counts_and_sums_each_reason_and_library_leak() {
    let mut r = Report::default();
    r.analysis.objects = 7;
    r.analysis.reachable_objects = 5;
    r.analysis.reachable_bytes = 3 * MIB / 2;
    r.analysis.references = 11;
    r.analysis.missing_references = 2;
    r.leak_objects = vec![
        leak("Activity Leak", 3 * MIB, "a"),
        leak("Activity Leak", MIB / 2, "b"),
        leak("Bitmap", MIB / 4, "c"),
        leak("Activity Leak", 2 * MIB, "lib"),
    ];
    let lib = LibraryLeak {
        pattern: "android.os.Message.obj".into(),
        ..LibraryLeak::default()
    };
    r.gc_paths = vec![
        GcPath {
            leak_reason: LARGE_RETAINED.into(),
            instance_count: 3,
            retained_size: 5 * MIB,
            signature: "top".into(),
            ..GcPath::default()
        },
        GcPath {
            leak_reason: "Activity Leak".into(),
            signature: "lib".into(),
            library_leak: Some(lib.clone()),
            ..GcPath::default()
        },
        GcPath {
            leak_reason: LARGE_RETAINED.into(),
            instance_count: 2,
            retained_size: MIB,
            signature: "toplib".into(),
            library_leak: Some(lib),
            ..GcPath::default()
        },
    ];
    r.dominators = vec![DominatorGroup {
        class_name: "byte[]".into(),
        retained_size: 5 * MIB / 4,
        count: 4,
        ..DominatorGroup::default()
    }];
    let l = lines(&r);
    assert_eq!(
        l[0],
        "7 objects (5 reachable, 1.5 MB retained by roots), 11 references, 2 missing"
    );
    assert_eq!(l[1], "leaks by reason:");
    assert_eq!(
        l[2],
        format!(
            "  {:<32} {:>7}  {:>10} MB retained",
            "Activity Leak", 2, "3.50"
        )
    );
    assert_eq!(
        l[3],
        format!("  {:<32} {:>7}  {:>10} MB retained", "Bitmap", 1, "0.25")
    );
    assert_eq!(
        l[4],
        format!(
            "  {:<32} {:>7}  {:>10} MB retained",
            LARGE_RETAINED, 3, "5.00"
        )
    );
    assert_eq!(
        l[5],
        "library leaks (known leaks of Android or the device maker's build):"
    );
    assert_eq!(
        l[6],
        format!(
            "  {:<32} {:>7}  {:>10} MB retained",
            "android.os.Message.obj", 3, "3.00"
        )
    );
    let last = &l[l.len() - 2..];
    assert_eq!(last[0], "top dominators (retained MB, count, class):");
    assert_eq!(last[1], format!("  {:>10} {:>7}  byte[]", "1.25", 4));
}

/// Without findings the summary says so, and lists no library leaks.
#[test]
fn the_summary_of_no_findings_says_none() {
    let l = lines(&Report::default());
    assert_eq!(
        l,
        [
            "0 objects (0 reachable, 0.0 MB retained by roots), 0 references, 0 missing",
            "leaks: none found",
            "top dominators (retained MB, count, class):",
        ]
    );
}

/// The summary of a report within a budget: its findings counted by reason, each path found,
/// how many were not found (only when some were not), and the histogram's largest classes.
#[test]
fn the_summary_of_a_budget_report_counts_findings_and_paths() {
    let mut r = Report::default();
    r.analysis.objects = 9;
    r.analysis.budget = Some(crate::budget::Budget {
        reason: "too small".into(),
        left_out: vec!["paths".into(), "sizes".into()],
        ..Default::default()
    });
    r.leak_objects = vec![
        leak("Activity Leak", 0, ""),
        leak("Bitmap", 0, ""),
        leak("Activity Leak", 0, ""),
    ];
    r.gc_paths = vec![GcPath {
        class_name: "A".into(),
        leak_reason: "Activity Leak".into(),
        gc_root: "System Class".into(),
        path: ["A.s", "B.f"]
            .iter()
            .map(|s| PathItem {
                reference: s.to_string(),
                ..PathItem::default()
            })
            .collect(),
        ..GcPath::default()
    }];
    r.histogram = vec![crate::budget::HistogramRow {
        class_name: "int[]".into(),
        instance_count: 12,
        shallow_size: 3 * MIB / 4,
    }];
    let row = format!("  {:>10} {:>7}  int[]", "0.75", 12);
    for (missed, no_path) in [
        (0, None),
        (1, Some("no path found for 1 class(es) and reason(s)")),
    ] {
        r.analysis.left_out.gc_paths = missed;
        let mut want = vec![
            "9 objects; too small",
            "left out: paths, sizes",
            "found: 2 x Activity Leak",
            "found: 1 x Bitmap",
            "path of A (Activity Leak): System Class > A.s > B.f",
        ];
        want.extend(no_path);
        want.extend(["top classes (shallow MB, count, class):", &row]);
        assert_eq!(lines(&r), want, "{missed} left out");
    }
}

/// `analysis.leftOut` is absent when nothing is left out, and present with every count when
/// anything is; its `histogram` and a path's `stepsLeftOut` only when not 0.
#[test]
fn what_is_left_out_is_written_only_when_something_is() {
    let json = |r: &Report| serde_json::to_value(r).unwrap();
    let mut r = Report {
        gc_paths: vec![GcPath::default()],
        dominators: vec![DominatorGroup::default()],
        ..Report::default()
    };
    let v = json(&r);
    assert!(v["analysis"].get("leftOut").is_none());
    assert!(v["gcPaths"][0].get("stepsLeftOut").is_none());
    assert!(v["dominators"][0].get("stepsLeftOut").is_none());
    for one in 0..4 {
        let mut lo = LeftOut::default();
        *[
            &mut lo.gc_paths,
            &mut lo.leak_objects,
            &mut lo.class_infos,
            &mut lo.histogram,
        ][one] = 1;
        r.analysis.left_out = lo;
        let v = json(&r)["analysis"]["leftOut"].clone();
        let mut want = serde_json::json!({"gcPaths": 0, "leakObjects": 0, "classInfos": 0});
        let key = ["gcPaths", "leakObjects", "classInfos", "histogram"][one];
        want[key] = 1.into();
        assert_eq!(v, want);
    }
    r.gc_paths[0].steps_left_out = 5;
    r.dominators[0].steps_left_out = 6;
    let v = json(&r);
    assert_eq!(v["gcPaths"][0]["stepsLeftOut"], 5);
    assert_eq!(v["dominators"][0]["stepsLeftOut"], 6);
}

/// `keep_largest` keeps the `max` largest by key, ties the earlier, in their order, and says
/// how many it dropped; under `max` it keeps everything.
#[test]
fn keep_largest_keeps_the_largest_in_their_order_and_counts_the_rest() {
    let mut v = vec![(1, 'a'), (5, 'b'), (3, 'c'), (5, 'd'), (2, 'e'), (3, 'f')];
    assert_eq!(keep_largest(&mut v, 3, |x| x.0), 3);
    assert_eq!(v, [(5, 'b'), (3, 'c'), (5, 'd')]);
    assert_eq!(keep_largest(&mut v, 3, |x| x.0), 0);
    assert_eq!(keep_largest(&mut v, 1, |x| x.0), 2);
    assert_eq!(v, [(5, 'b')]);
}

/// Two window classes below `android.view.Window` (3 live windows and an unreachable one), a
/// registry class below `libcore.util.NativeAllocationRegistry` (2 live) and a plain holder,
/// every live object held by a JNI global.
fn windows_dump() -> Vec<u8> {
    use hprof::writer::Writer;
    use hprof::Format;
    let mut w = Writer::new(Format::V103, 4, 0);
    for (i, name) in [
        "java.lang.Object",
        "android.view.Window",
        "com.android.internal.policy.PhoneWindow",
        "com.app.OtherWindow",
        "libcore.util.NativeAllocationRegistry",
        "com.app.Registry",
        "com.app.Holder",
    ]
    .iter()
    .enumerate()
    {
        w.utf8(i as u64 + 1, name);
        w.load_class(i as u32 + 1, 0x10 * (i as u64 + 1), i as u64 + 1);
    }
    w.segment(hprof::tag::HEAP_DUMP_SEGMENT);
    for (c, sup) in [
        (0x10, 0),
        (0x20, 0x10),
        (0x30, 0x20),
        (0x40, 0x20),
        (0x50, 0x10),
        (0x60, 0x50),
        (0x70, 0x10),
    ] {
        w.class_dump(c, sup, 0, 0, &[], &[]);
    }
    let live = [
        (0x1000, 0x30),
        (0x1010, 0x30),
        (0x1020, 0x40),
        (0x2000, 0x60),
        (0x2010, 0x60),
        (0x3000, 0x70),
    ];
    for (i, &(id, class)) in live.iter().enumerate() {
        w.instance(id, class, &[]);
        w.root_jni_global(id, i as u64 + 1);
    }
    w.instance(0x1030, 0x30, &[]);
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// Live windows and registries over their thresholds are each a suspect (the unreachable window
/// is not counted); at their thresholds none is. `classInfos` lists the classes that have
/// instances, and adds `android.view.Window` and `libcore.util.NativeAllocationRegistry` with
/// their subclasses' counts together; a plain class is not listed.
#[test]
fn windows_and_registries_over_their_thresholds_are_suspects() {
    let bytes = windows_dump();
    let run = |window_max_count, native_allocation_registry_max_count| {
        let cfg = Config {
            window_max_count,
            native_allocation_registry_max_count,
            ..Config::default()
        };
        crate::analyze(Input::Bytes(&bytes), &cfg, serde_json::Value::Null).unwrap()
    };
    let infos = |r: &Report, leaks: [u64; 5]| {
        let names = [
            "com.android.internal.policy.PhoneWindow",
            "com.app.OtherWindow",
            "com.app.Registry",
            "android.view.Window",
            "libcore.util.NativeAllocationRegistry",
        ];
        let want: Vec<ClassInfo> = (0..5)
            .map(|i| ClassInfo {
                class_name: names[i].into(),
                instance_count: [3, 1, 2, 4, 2][i],
                leak_instance_count: leaks[i],
            })
            .collect();
        assert_eq!(r.class_infos, want);
    };
    let r = run(2, 1);
    infos(&r, [2, 1, 2, 3, 2]);
    let objs: Vec<(u64, &str, &str)> = r
        .leak_objects
        .iter()
        .map(|o| (o.object_id, o.leak_reason.as_str(), o.ext_detail.as_str()))
        .collect();
    let reg = "NativeAllocationRegistry Count Over Threshold";
    let win = "Window Count Over Threshold";
    assert_eq!(
        objs,
        [
            (0x2000, reg, "2 live registries"),
            (0x2010, reg, "2 live registries"),
            (0x1000, win, "3 live windows"),
            (0x1010, win, "3 live windows"),
            (0x1020, win, "3 live windows"),
        ]
    );
    let r = run(3, 2);
    infos(&r, [0; 5]);
    assert!(r.leak_objects.is_empty());
}

/// Three live (not destroyed) Activities of `com.app.MainActivity`, held by JNI globals; the
/// class is a sticky root, so the references to it are left out of the graph.
fn live_activities_dump() -> Vec<u8> {
    use crate::tests::{activity_class_dumps, activity_strings};
    use hprof::writer::Writer;
    let mut w = Writer::new(hprof::Format::V103, 4, 0);
    activity_strings(&mut w);
    w.segment(hprof::tag::HEAP_DUMP_SEGMENT);
    activity_class_dumps(&mut w);
    for i in 0..3 {
        w.instance(0x1000 + 16 * i, 0x30, &[0, 0]);
        w.root_jni_global(0x1000 + 16 * i, i + 1);
    }
    w.root(hprof::sub::ROOT_STICKY_CLASS, 0x30);
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// `analysis.references` counts the references to a rooted class the graph leaves out (3) with
/// its edges (the two superclasses); the objects of one class and path shape are one
/// `dominators[]` group counting them all; the last object of a trace, whose fields pass 3 did
/// not read (it is no parent on a path), has them read: a live Activity is not leaking.
#[test]
fn live_activities_are_one_dominator_group_traced_from_their_fields() {
    let bytes = live_activities_dump();
    let r = crate::tests::report_of(&bytes);
    assert_eq!(r.analysis.references, 5);
    assert!(r.gc_paths.is_empty());
    assert_eq!(r.dominators.len(), 1);
    let d = &r.dominators[0];
    assert_eq!(d.class_name, "com.app.MainActivity");
    assert_eq!((d.count, d.retained_size), (3, 48));
    let last = d.trace.nodes.last().unwrap();
    assert_eq!(last.object_id, 0x1020);
    assert_eq!(last.status, crate::trace::Status::NotLeaking);
    assert_eq!(last.status_reason, "mDestroyed is false");
}

/// A JNI global holds the first of 70 `com.app.Node`s, each the next's `next`, and the last
/// one a destroyed `com.app.MainActivity`: a path of 71 objects.
fn long_chain_dump() -> Vec<u8> {
    use crate::tests::{activity_class_dumps, activity_strings};
    use hprof::writer::Writer;
    use hprof::BasicType;
    let mut w = Writer::new(hprof::Format::V103, 4, 0);
    activity_strings(&mut w);
    w.utf8(6, "com.app.Node");
    w.utf8(7, "next");
    w.load_class(4, 0x40, 6);
    w.segment(hprof::tag::HEAP_DUMP_SEGMENT);
    activity_class_dumps(&mut w);
    w.class_dump(0x40, 0x10, 0, 4, &[], &[(7, BasicType::Object)]);
    let n = 70u64;
    for i in 0..n {
        let next = if i + 1 < n {
            0x5000 + 16 * (i + 1)
        } else {
            0x1000
        };
        w.instance(0x5000 + 16 * i, 0x40, &(next as u32).to_be_bytes());
    }
    w.instance(0x1000, 0x30, &[1, 0]);
    w.root_jni_global(0x5000, 1);
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// A path of 71 objects keeps its first 30 and last 30: its items are the 29 references of the
/// head, the one to the first object left out, one `LEFT_OUT` item for the 11 left out, the 29
/// references of the tail and the leaking instance.
#[test]
fn a_long_path_has_one_left_out_item_after_the_reference_to_the_first_left_out() {
    let bytes = long_chain_dump();
    let r = crate::tests::report_of(&bytes);
    assert_eq!(r.gc_paths.len(), 1);
    let g = &r.gc_paths[0];
    assert_eq!(g.steps_left_out, 11);
    assert_eq!(g.path.len(), 61);
    let next = PathItem {
        reference: "com.app.Node.next".into(),
        reference_type: "INSTANCE_FIELD".into(),
        declared_class: "com.app.Node".into(),
    };
    for (i, item) in g.path.iter().enumerate() {
        match i {
            30 => {
                assert_eq!(item.reference, "… 11 steps left out …");
                assert_eq!(item.reference_type, "LEFT_OUT");
                assert_eq!(item.declared_class, "");
            }
            60 => assert_eq!(item.reference_type, "LEAKING_INSTANCE"),
            _ => assert_eq!(item, &next, "item {i}"),
        }
    }
}

/// Past `max_suspects_per_class`, a class's suspects get no path and no `leakObjects[]` entry,
/// but `analysis.leftOut.leakObjects` and the class's `leakInstanceCount` count them.
#[test]
fn suspects_past_the_cap_of_their_class_are_counted() {
    use crate::tests::{activity_strings, destroyed_activities_heap};
    let mut w = hprof::writer::Writer::new(hprof::Format::V103, 4, 0);
    activity_strings(&mut w);
    let bytes = destroyed_activities_heap(w, 3);
    let cfg = Config {
        max_suspects_per_class: 1,
        ..Config::default()
    };
    let r = crate::analyze(Input::Bytes(&bytes), &cfg, serde_json::Value::Null).unwrap();
    assert_eq!(r.leak_objects.len(), 1);
    assert_eq!(r.analysis.left_out.leak_objects, 2);
    assert_eq!(r.gc_paths.len(), 1);
    assert_eq!(r.gc_paths[0].instance_count, 1);
    let main: Vec<_> = r
        .class_infos
        .iter()
        .filter(|c| c.class_name == "com.app.MainActivity")
        .collect();
    assert_eq!(main.len(), 1);
    assert_eq!(
        (main[0].instance_count, main[0].leak_instance_count),
        (3, 3)
    );
}
