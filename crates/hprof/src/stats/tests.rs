//! What `inspect` counts, field by field, on a dump whose every byte is accounted for below.

use super::*;
use crate::writer::Writer;
use crate::{BasicType, Format};

/// A 1.0.3 dump with `n`-byte ids: heap names (two strings say "app", one names no heap), the
/// other records, and two segments whose objects fall into the default heap, "app" (twice),
/// "zygote" and a heap whose name is no heap's.
fn dump(n: u32) -> Vec<u8> {
    let mut w = Writer::new(Format::V103, n, 0x0123_4567_89AB);
    w.utf8(1, "app")
        .utf8(2, "zygote")
        .utf8(3, "x")
        .utf8(5, "app")
        .load_class(1, 0x100, 1)
        .trace(1);
    // The default heap: a root, a class, an instance, an object array.
    w.root(sub::ROOT_UNKNOWN, 0x200)
        .class_dump(0x100, 0, 0, 8, &[], &[(1, BasicType::Int)])
        .instance(0x200, 0x100, &[0; 8])
        .object_array(0x300, 0x100, &[0x200, 0x300]);
    // "app": two arrays, one of them stripped.
    w.heap_info(1, 1)
        .primitive_array(0x400, BasicType::Char, 3, &[0, 65, 0, 66, 0, 67])
        .primitive_array_nodata(0x410, BasicType::Long, 5);
    // A heap named by a string that is no heap's name.
    w.heap_info(2, 3).instance(0x500, 0x100, &[1; 8]);
    // A second segment: "app" again by another string, and "zygote".
    w.utf8(6, "between the segments");
    w.heap_info(1, 5)
        .object_array(0x600, 0x100, &[0x500])
        .root2(sub::ROOT_THREAD_OBJECT, 0x600, 1, 2)
        .heap_info(0, 2)
        .primitive_array(0x700, BasicType::Int, 2, &[0, 0, 0, 1, 0, 0, 0, 2])
        .primitive_array_nodata(0x710, BasicType::Short, 3);
    w.heap_dump_end();
    w.finish()
}

fn inspect(b: &[u8], step: usize) -> Stats {
    let mut ins = Inspector::new();
    b.chunks(step).for_each(|c| ins.feed(c).unwrap());
    ins.finish().unwrap()
}

fn counts(rows: &[(&str, u64, u64)]) -> BTreeMap<String, TagCount> {
    let rows = rows.iter().map(|&(name, count, bytes)| {
        let c = TagCount { count, bytes };
        (name.to_string(), c)
    });
    rows.collect()
}

#[test]
fn every_record_sub_record_heap_and_byte_is_counted_where_it_belongs() {
    for n in [4u64, 8] {
        let b = dump(n as u32);
        // Sizes of the units above: records with their 9-byte heads, sub-records with their tags.
        let utf8 = |text: &str| 9 + n + text.len() as u64;
        let strings = utf8("app") * 2 + utf8("zygote") + utf8("x") + utf8("between the segments");
        let (load_class, trace, end) = (9 + 8 + 2 * n, 9 + 12, 9);
        let (root, root2, info) = (1 + n, 1 + n + 8, 1 + 4 + n);
        let class = 1 + 4 + 7 * n + 4 + 2 + 2 + 2 + (n + 1);
        let instance = 1 + n + 4 + n + 4 + 8;
        let obj_head = 1 + n + 4 + 4 + n;
        let prim_head = 1 + n + 4 + 4 + 1;
        let st = inspect(&b, b.len());
        assert_eq!(st.format, "JAVA PROFILE 1.0.3");
        assert_eq!((st.id_size as u64, st.timestamp_ms), (n, 0x0123_4567_89AB));
        assert_eq!(st.file_bytes, b.len() as u64);
        let records = [
            ("HEAP_DUMP_END", 1, end),
            ("HEAP_DUMP_SEGMENT", 2, 18),
            ("LOAD_CLASS", 1, load_class),
            ("TRACE", 1, trace),
            ("UTF8", 5, strings),
        ];
        assert_eq!(st.records, counts(&records), "{n}-byte ids");
        let subs = [
            ("CLASS_DUMP", 1, class),
            ("HEAP_DUMP_INFO", 4, 4 * info),
            ("INSTANCE_DUMP", 2, 2 * instance),
            ("OBJECT_ARRAY_DUMP", 2, 2 * obj_head + 3 * n),
            ("PRIMITIVE_ARRAY_DUMP", 2, 2 * prim_head + 6 + 8),
            ("PRIMITIVE_ARRAY_NODATA_DUMP", 2, 2 * prim_head),
            ("ROOT_THREAD_OBJECT", 1, root2),
            ("ROOT_UNKNOWN", 1, root),
        ];
        assert_eq!(st.sub_records, counts(&subs), "{n}-byte ids");
        let want = Bytes {
            header: 31,
            strings,
            other_records: load_class + trace + end,
            segment_headers: 18,
            roots: root + root2,
            classes: class,
            instances: 2 * instance,
            object_arrays: 2 * obj_head + 3 * n,
            primitive_array_heads: 4 * prim_head,
            primitive_array_contents: 6 + 8,
            primitive_array_contents_stripped: 5 * 8 + 3 * 2,
            heap_info: 4 * info,
        };
        assert_eq!(st.bytes, want, "{n}-byte ids");
        // Every byte of the file is in one category, the stripped contents in none.
        let b = &st.bytes;
        let sum = b.header
            + b.strings
            + b.other_records
            + b.segment_headers
            + b.roots
            + b.classes
            + b.instances
            + b.object_arrays
            + b.primitive_array_heads
            + b.primitive_array_contents
            + b.heap_info;
        assert_eq!(sum, st.file_bytes, "{n}-byte ids");
        let heaps: BTreeMap<String, HeapStats> = [
            ("app", 3, 2 * prim_head + 6 + obj_head + n),
            ("default", 3, class + instance + obj_head + 2 * n),
            ("string#3", 1, instance),
            ("zygote", 2, 2 * prim_head + 8),
        ]
        .into_iter()
        .map(|(name, objects, bytes)| (name.to_string(), HeapStats { objects, bytes }))
        .collect();
        assert_eq!(st.heaps, heaps, "{n}-byte ids");
        for step in [1, 5] {
            let p = inspect(&dump(n as u32), step);
            assert_eq!((&p.records, &p.sub_records), (&st.records, &st.sub_records));
            assert_eq!(
                (&p.bytes, &p.heaps),
                (&st.bytes, &st.heaps),
                "pieces of {step}"
            );
        }
    }
}

/// Only the short names Android gives its heaps name a heap; another string's heap is named by
/// its id. A name's text is kept as it is, not lower-cased or trimmed.
#[test]
fn only_the_heap_names_android_uses_name_a_heap() {
    let mut w = Writer::new(Format::V103, 4, 0);
    w.utf8(0xa1, "image")
        .utf8(0xa2, "App")
        .utf8(0xa3, "default");
    w.heap_info(1, 0xa1).instance(1, 0x100, &[]);
    w.heap_info(1, 0xa2).instance(2, 0x100, &[]);
    w.heap_info(1, 0xa3).instance(3, 0x100, &[]);
    w.heap_info(1, 0xa4).instance(4, 0x100, &[]);
    let b = w.finish();
    let names: Vec<String> = inspect(&b, b.len()).heaps.into_keys().collect();
    assert_eq!(names, ["default", "image", "string#a2", "string#a4"]);
}
