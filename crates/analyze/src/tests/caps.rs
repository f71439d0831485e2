//! The report's caps on the suspects it gives paths to.

use super::*;

/// At most `MAX_SUSPECTS` suspects get paths in all, and every class keeps some: 9,000, 3,000
/// and 10 destroyed activities of three classes (no cap per class) give paths to 6,990, 3,000
/// and 10 of them, and every one is still counted as its class's leak.
#[test]
fn suspects_with_paths_are_capped_in_all_and_each_class_keeps_some() {
    let counts = [9_000u64, 3_000, 10];
    let r = activities_of_classes(&counts);
    assert_eq!(crate::report::MAX_SUSPECTS, 10_000);
    for (c, want) in [(0, 6_990), (1, 3_000), (2, 10)] {
        assert_eq!(with_paths(&r, c), want, "com.app.A{c}");
        let name = format!("com.app.A{c}");
        let info = r.class_infos.iter().find(|i| i.class_name == name).unwrap();
        assert_eq!(info.leak_instance_count, counts[c], "{name}");
    }
    // 10,000 with paths, 1,000 of them listed; the 2,010 past the cap counted as left out.
    assert_eq!(r.leak_objects.len(), 1000);
    assert_eq!(r.analysis.left_out.leak_objects, 9_000 + 2_010);
}

/// Classes too many for each to keep all its suspects keep the same number, the most that fits
/// (a third of 10,000 each for three of 6,000), not the largest first across classes.
#[test]
fn classes_over_the_cap_keep_the_same_number_each() {
    let r = activities_of_classes(&[6_000, 6_000, 6_000]);
    for c in 0..3 {
        assert_eq!(with_paths(&r, c), 3_333, "com.app.A{c}");
    }
    assert_eq!(r.analysis.left_out.leak_objects, 18_000 - 1_000);
}

/// How many of class `com.app.A{c}`'s suspects were given paths.
fn with_paths(r: &Report, c: usize) -> u64 {
    let name = format!("com.app.A{c}");
    r.gc_paths
        .iter()
        .filter(|g| g.class_name == name)
        .map(|g| g.instance_count)
        .sum()
}

/// The report of a dump of destroyed activities: `counts[c]` of class `com.app.A{c}`, all
/// held by one array (no cap per class).
fn activities_of_classes(counts: &[u64]) -> Report {
    let mut w = Writer::new(Format::V102, 8, 0);
    activity_strings(&mut w);
    w.utf8(6, "java.lang.Object[]");
    w.load_class(4, 0x80, 6);
    for c in 0..3u64 {
        w.utf8(10 + c, &format!("com.app.A{c}"));
        w.load_class(10 + c as u32, 0x40 + 8 * c, 10 + c);
    }
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.class_dump(0x10, 0, 0, 8, &[], &[]);
    activity_class(&mut w);
    w.class_dump(0x80, 0x10, 0, 8, &[], &[]);
    let mut elems = Vec::new();
    for (c, &n) in counts.iter().enumerate() {
        let class = 0x40 + 8 * c as u64;
        w.class_dump(class, 0x20, 0, 10, &[], &[]);
        for i in 0..n {
            let id = 0x10_0000 * (c as u64 + 1) + 16 * i;
            w.instance(id, class, &[1, 0]);
            elems.push(id);
        }
    }
    w.object_array(0x500, 0x80, &elems);
    for c in [0x10, 0x20, 0x80] {
        w.root(sub::ROOT_STICKY_CLASS, c);
    }
    w.root_jni_global(0x500, 0x900);
    w.end_segment();
    w.heap_dump_end();
    let bytes = w.finish();
    let cfg = Config {
        max_suspects_per_class: 100_000,
        ..Config::default()
    };
    analyze(Input::Bytes(&bytes), &cfg, serde_json::Value::Null).unwrap()
}
