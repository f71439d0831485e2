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
