//! oomguard's own objects are never findings (issue 42): the facade's last-words reserve, a
//! 512 KB `byte[]` in `dev.oomguard.OomGuard.reserve`, is over the array threshold but held
//! only by oomguard; an array oomguard and the app both hold is the app's finding.

use super::*;

#[test]
fn what_only_oomguard_holds_is_never_a_finding() {
    let mut w = Writer::new(Format::V102, 8, 0);
    for (id, s) in [
        (1, "java.lang.Object"),
        (2, "dev.oomguard.OomGuard"),
        (3, "com.app.Cache"),
        (4, "reserve"),
        (5, "sKeep"),
        (6, "sBuf"),
        (7, "sShared"),
    ] {
        w.utf8(id, s);
    }
    w.load_class(1, 0x10, 1);
    w.load_class(2, 0x20, 2);
    w.load_class(3, 0x30, 3);
    let st = |name: u64, v: u64| (name, BasicType::Object, v.to_be_bytes().to_vec());
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.class_dump(0x10, 0, 0, 0, &[], &[]);
    w.class_dump(0x20, 0x10, 0, 0, &[st(4, 0x1000), st(5, 0x3000)], &[]);
    w.class_dump(0x30, 0x10, 0, 0, &[st(6, 0x2000), st(7, 0x3000)], &[]);
    for c in [0x10, 0x20, 0x30] {
        w.root(sub::ROOT_STICKY_CLASS, c);
    }
    w.primitive_array(0x1000, BasicType::Byte, 512 << 10, &vec![0u8; 512 << 10]);
    w.primitive_array(0x2000, BasicType::Byte, 300 << 10, &vec![0u8; 300 << 10]);
    w.primitive_array(0x3000, BasicType::Byte, 400 << 10, &vec![0u8; 400 << 10]);
    w.end_segment();
    w.heap_dump_end();
    let full = w.finish();
    let (mini, _) = strip_bytes(&full, Level::Arrays).unwrap();
    for bytes in [&full, &mini] {
        let r = report(bytes);
        let mut found: Vec<u64> = r.leak_objects.iter().map(|o| o.object_id).collect();
        found.sort();
        assert_eq!(found, [0x2000, 0x3000]);
        assert!(r.gc_paths.iter().all(|g| !g.trace.root.contains("OomGuard")
            || g.trace.nodes.last().map(|n| n.object_id) == Some(0x3000)));
    }
}

/// Held only by oomguard however deep: findings at the end of a chain of 5,000 objects that
/// `dev.oomguard.OomGuard` holds are none, and those at the end of a chain as long that an app
/// class holds are all there (the dominator chains were walked at most 4,096 steps up, so the
/// first were reported; now each chain is walked once for all the findings below it).
#[test]
fn what_only_oomguard_holds_is_no_finding_at_any_depth() {
    const LEN: u64 = 5000;
    const EACH: u64 = 50;
    let mut w = Writer::new(Format::V102, 8, 0);
    for (id, s) in [
        (1, "java.lang.Object"),
        (2, "dev.oomguard.OomGuard"),
        (3, "com.app.Cache"),
        (4, "com.app.Node"),
        (5, "java.lang.Object[]"),
        (6, "reserve"),
        (7, "sKeep"),
        (8, "next"),
    ] {
        w.utf8(id, s);
    }
    for (serial, (class, name)) in [(0x10, 1), (0x20, 2), (0x30, 3), (0x40, 4), (0x80, 5)]
        .into_iter()
        .enumerate()
    {
        w.load_class(serial as u32 + 1, class, name);
    }
    let st = |name: u64, v: u64| (name, BasicType::Object, v.to_be_bytes().to_vec());
    // Chains from 0x10_0000 (oomguard's) and 0x20_0000 (the app's), 16 bytes apart.
    let (ours, apps) = (0x10_0000u64, 0x20_0000u64);
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.class_dump(0x10, 0, 0, 0, &[], &[]);
    w.class_dump(0x20, 0x10, 0, 0, &[st(6, ours)], &[]);
    w.class_dump(0x30, 0x10, 0, 0, &[st(7, apps)], &[]);
    w.class_dump(0x40, 0x10, 0, 8, &[], &[(8, BasicType::Object)]);
    w.class_dump(0x80, 0x10, 0, 0, &[], &[]);
    for c in [0x10, 0x20, 0x30, 0x40, 0x80] {
        w.root(sub::ROOT_STICKY_CLASS, c);
    }
    let mut found_in_apps = Vec::new();
    for (head, array, arrays) in [
        (ours, 0x30_0000u64, 0x40_0000u64),
        (apps, 0x50_0000, 0x60_0000),
    ] {
        for i in 0..LEN {
            let next = if i + 1 < LEN {
                head + 16 * (i + 1)
            } else {
                array
            };
            w.instance(head + 16 * i, 0x40, &next.to_be_bytes());
        }
        let elems: Vec<u64> = (0..EACH).map(|i| arrays + 16 * i).collect();
        w.object_array(array, 0x80, &elems);
        for &e in &elems {
            w.primitive_array_nodata(e, BasicType::Byte, 4096);
        }
        if head == apps {
            found_in_apps = elems;
        }
    }
    w.end_segment();
    w.heap_dump_end();
    let bytes = w.finish();
    let cfg = Config {
        array_min_bytes: 4096,
        ..Config::default()
    };
    let r = analyze(Input::Bytes(&bytes), &cfg, serde_json::Value::Null).unwrap();
    let mut found: Vec<u64> = r.leak_objects.iter().map(|o| o.object_id).collect();
    found.sort();
    assert_eq!(found, found_in_apps);
}
