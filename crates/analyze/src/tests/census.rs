//! The census (`index::census`) over small dumps built by hand: its counts exactly, and its
//! histogram as the full index makes it.
use super::*;
use std::collections::{BTreeMap, BTreeSet};

/// The census of `bytes`.
fn census_of(bytes: &[u8]) -> index::Counts {
    index::census(&Input::Bytes(bytes)).unwrap()
}

/// The full index of `bytes`, as `analyze` builds it.
fn full_index(bytes: &[u8]) -> index::Index {
    let mut tm = Timings::default();
    let input = Input::Bytes(bytes);
    let (ix, _, _) = build_index(&input, &Config::default(), Instant::now(), &mut tm).unwrap();
    ix
}

/// The histogram the full index of `bytes` makes: objects and shallow bytes by class name.
fn index_histogram(bytes: &[u8]) -> BTreeMap<String, (u64, u64)> {
    let ix = full_index(bytes);
    let mut h: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for n in 0..ix.len() {
        let class = &ix.classes[ix.class_of[n] as usize];
        let e = h.entry(class.name.clone()).or_default();
        e.0 += 1;
        e.1 += ix.shallow[n] as u64;
    }
    h
}

/// Every kind of object, also of classes the dump lacks: the census counts each object, each
/// reference that is not null (fields, elements, each instance's and array's class, each
/// class's superclass and loader), the classes and the roots, and its histogram is the full
/// index's.
#[test]
fn the_census_counts_each_object_and_reference_of_a_small_dump() {
    let bytes = holder_dump(|w| {
        w.instance(0x100, 0x20, &0x108u64.to_be_bytes());
        w.instance(0x108, 0x20, &0u64.to_be_bytes());
        w.object_array(0x110, 0x10, &[0x100, 0, 0x108]);
        w.primitive_array(0x200, BasicType::Int, 2, &[0; 8]);
        // Of classes the dump lacks.
        w.instance(0x300, 0x77, &[0; 12]);
        w.object_array(0x400, 0x88, &[0x100]);
        // Of a class of no instance size, and an array whose class is an instance's.
        w.instance(0x500, 0x10, &[]);
        w.object_array(0x600, 0x20, &[0x100, 0x108]);
        w.root_jni_global(0x100, 1);
    });
    let c = census_of(&bytes);
    assert_eq!(c.objects, 10);
    // Holder: 2 class edges, 1 field set; Object[]: its class, 2 elements set; int[]: its
    // class; the unknown instance: its class; the unknown array: its class, 1 element; the
    // Object: its class; the Holder array: its class, 2 elements; the 2 classes: their
    // superclass and loader each.
    assert_eq!(c.references_at_most, 3 + 3 + 1 + 1 + 2 + 1 + 3 + 4);
    assert_eq!([c.classes, c.gc_roots], [2, 1]);
    // "java.lang.Object", "com.app.Holder", "ref", and 16 bytes a string.
    assert_eq!(c.string_bytes, 16 + 14 + 3 + 3 * 16);
    assert_eq!(c.sizes.vm, "HotSpot");
    assert!(!c.two_passes);
    assert_eq!(c.histogram, index_histogram(&bytes));
    // Two instances and the array, each at Holder's size (a 16-byte header, an 8-byte field).
    assert_eq!(c.histogram["com.app.Holder"], (3, 3 * 24));
}

/// An object listed less than an object array's 16-byte header and 8 bytes an element after
/// it means compressed references (4-byte references in a dump of 8-byte ids); at that
/// distance, at the array's own id or before it, it does not.
#[test]
fn compressed_references_are_seen_from_an_object_inside_the_array_before_it() {
    let after = |next: u64| {
        let bytes = array_then(0x30, next);
        let s = census_of(&bytes).sizes;
        assert_eq!(s.compressed_references, s.reference_size == 4);
        s.compressed_references
    };
    assert!(after(0x1000 + 16 + 3 * 8 - 1));
    assert!(after(0x1008));
    assert!(!after(0x1000 + 16 + 3 * 8));
    assert!(!after(0x1000));
    assert!(!after(0x0ff8));
}

/// The id map's estimate is made of the count of ids, their span from the lowest, their
/// common alignment and the regions that hold one.
#[test]
fn the_id_map_estimate_takes_the_ids_span_alignment_and_regions() {
    let base = 0x4000_0000u64;
    let (object, holder) = (base, base + 0x10);
    let mut w = Writer::new(Format::V102, 8, 0);
    holder_classes(&mut w, object, holder);
    let mut ids = vec![object, holder];
    for start in [base + 0x1000, base + 0x400_0000] {
        for k in 0..3000 {
            ids.push(start + 16 * k);
            w.instance(start + 16 * k, holder, &0u64.to_be_bytes());
        }
    }
    w.end_segment();
    w.heap_dump_end();
    let c = census_of(&w.finish());
    let n = ids.len() as u64;
    let span = ids.iter().max().unwrap() - ids.iter().min().unwrap();
    let or = ids.iter().fold(0, |a, &b| a | b);
    let align = 1u64 << or.trailing_zeros().min(6);
    let regions: BTreeSet<u64> = ids.iter().map(|&i| i / rank::FINE_REGION_SPAN).collect();
    assert_eq!([align, regions.len() as u64], [16, 2]);
    let want = rank::estimate_bytes(n, span, align, regions.len() as u64);
    assert_ne!(want, 2 * n, "the rank map's estimate, not the buckets'");
    assert_eq!(c.objects, n);
    assert_eq!(c.id_map_bytes, want);
}

/// Read at every offset, an instance's field data is counted offset by offset up to
/// `MAX_SET_AT` (4,096) offsets where an id may start; past that, every reference slot of
/// its class counts, null or not. Read at its class's reference fields alone, null fields
/// never count.
#[test]
fn instances_past_max_set_at_offsets_count_every_reference_slot() {
    let bytes = holder_dump(|w| {
        // 4,096, 4,097 and 4,098 offsets where an 8-byte id may start; the field is null.
        for (k, len) in [4103usize, 4104, 4105].into_iter().enumerate() {
            w.instance(0x100 + 8 * k as u64, 0x20, &vec![0; len]);
        }
    });
    let input = Input::Bytes(&bytes);
    let fields = index::census(&input).unwrap();
    let every = index::census::census_of_every_offset(&input).unwrap();
    // 3 class edges, Holder's and Object's superclass and loader.
    assert_eq!(fields.references_at_most, 3 + 4);
    assert_eq!(every.references_at_most, 3 + 4 + 2);
}

/// A heap dump info record alone (no Android root) makes the dump Android's.
#[test]
fn a_heap_dump_info_alone_makes_the_sizes_androids() {
    let bytes = holder_dump(|w| {
        w.heap_info(0x41, 1);
        w.instance(0x100, 0x20, &0u64.to_be_bytes());
    });
    let c = census_of(&bytes);
    assert_eq!(c.gc_roots, 0);
    assert_eq!(c.sizes.vm, "Android");
    assert_eq!(c.histogram, index_histogram(&bytes));
}

/// The analysis takes two passes when a string, a loaded class or a class dump comes after
/// the first object; a class dump after class dumps alone, or a string before any object,
/// does not.
#[test]
fn strings_and_classes_after_an_object_take_two_passes() {
    let dump = |late_string: bool, late_class: bool| {
        let mut w = Writer::new(Format::V102, 8, 0);
        w.utf8(1, "java.lang.Object");
        w.utf8(2, "com.app.Holder");
        w.load_class(1, 0x10, 1);
        w.load_class(2, 0x20, 2);
        w.segment(tag::HEAP_DUMP_SEGMENT);
        w.class_dump(0x10, 0, 0, 0, &[], &[]);
        if !late_class {
            w.class_dump(0x20, 0x10, 0, 8, &[], &[]);
        }
        w.instance(0x100, 0x10, &[]);
        if late_class {
            w.class_dump(0x20, 0x10, 0, 8, &[], &[]);
        }
        w.end_segment();
        if late_string {
            w.utf8(3, "late");
        }
        w.heap_dump_end();
        census_of(&w.finish()).two_passes
    };
    assert!(!dump(false, false));
    assert!(dump(true, false));
    assert!(dump(false, true));
}

/// A class id listed for both instances and arrays (a class dump of id 0, and an id the dump
/// has no class dump for): each count is at its own objects' sizes, in the census as in the
/// full index. The census added the instances' and the arrays' bytes together under each.
#[test]
fn instances_and_arrays_of_one_unknown_class_id_are_counted_apart() {
    let bytes = holder_dump(|w| {
        w.class_dump(0, 0x10, 0, 0, &[], &[]);
        w.instance(0x100, 0, &[0; 12]);
        w.instance(0x108, 0, &[0; 20]);
        w.object_array(0x110, 0, &[0x100, 0x108]);
        w.instance(0x200, 0x77, &[0; 4]);
        w.object_array(0x240, 0x77, &[0x100]);
        w.object_array(0x280, 0x77, &[]);
    });
    let c = census_of(&bytes);
    assert_eq!(c.histogram, index_histogram(&bytes));
    // Each as an object of an unknown class: a 16-byte header, then its raw size (an array's
    // is a 16-byte array header and its ids), to 8 bytes.
    assert_eq!(c.histogram["<class 0x0>"], (3, 32 + 40 + 48));
    assert_eq!(c.histogram["<unknown class>"], (3, 24 + 40 + 32));
}

/// The full index's conventions for `bytes`, and its shallow sizes of the objects `ids`.
fn index_sizes(bytes: &[u8], ids: &[u64]) -> (index::Conventions, Vec<u32>) {
    let ix = full_index(bytes);
    let sizes = (ids.iter())
        .map(|&id| ix.shallow[ix.node(id).unwrap() as usize])
        .collect();
    (ix.sizes, sizes)
}

/// A dump of [`holder_dump`]'s classes, `java.lang.Object[]` 0x30, an array of three nulls
/// 0x1000 of class `array_class` and a Holder at `next`.
fn array_then(array_class: u64, next: u64) -> Vec<u8> {
    holder_dump(|w| {
        w.utf8(4, "java.lang.Object[]").load_class(3, 0x30, 4);
        w.class_dump(0x30, 0x10, 0, 0, &[], &[]);
        w.object_array(0x1000, array_class, &[0, 0, 0]);
        w.instance(next, 0x20, &[0; 8]);
    })
}

/// The full index sees compressed references as the census does (above): from an object
/// listed less than an object array's 16-byte header and 8 bytes an element after it, and
/// then counts by HotSpot's compressed layout.
#[test]
fn the_index_sees_compressed_references_from_an_object_inside_the_array() {
    let compressed = index::Conventions {
        vm: "HotSpot",
        object_header: 12,
        array_header: 16,
        reference_size: 4,
        compressed_references: true,
        alignment: 8,
    };
    let wide = index::Conventions {
        vm: "HotSpot",
        object_header: 16,
        array_header: 20,
        reference_size: 8,
        compressed_references: false,
        alignment: 8,
    };
    for (next, want) in [
        (0x1000 + 16 + 3 * 8 - 1, compressed),
        (0x1008, compressed),
        (0x1000 + 16 + 3 * 8, wide),
        (0x1000, wide),
        (0x0ff8, wide),
    ] {
        let bytes = array_then(0x30, next);
        assert_eq!(index_sizes(&bytes, &[]).0, want, "next at {next:#x}");
        assert_eq!(census_of(&bytes).sizes, want, "next at {next:#x}");
    }
}

/// Objects of each kind: `com.app.Root` 0x300 (no superclass; two int fields `x`, `y`; an
/// instance size of 8), an `int[3]` 0x400, a `byte[3]` 0x410, a `long[1]` 0x420 and a
/// `com.app.Bare` 0x500 (extends Object; three int fields; no instance size in its class
/// dump), in a dump of `id_size`-byte ids with a JNI global, Android's if `android` (a heap
/// dump info record).
fn kinds_dump(id_size: u32, android: bool) -> Vec<u8> {
    let mut w = Writer::new(Format::V102, id_size, 0);
    holder_classes(&mut w, 0x10, 0x20);
    w.utf8(4, "com.app.Root").utf8(5, "x").utf8(6, "y");
    w.utf8(7, "com.app.Bare");
    w.load_class(3, 0x30, 4).load_class(4, 0x40, 7);
    if android {
        w.heap_info(0x41, 1);
    }
    let int = BasicType::Int;
    w.class_dump(0x30, 0, 0, 8, &[], &[(5, int), (6, int)]);
    w.class_dump(0x40, 0x10, 0, 0, &[], &[(5, int), (6, int), (3, int)]);
    w.instance(0x300, 0x30, &[0; 8]);
    w.primitive_array(0x400, BasicType::Int, 3, &[0; 12]);
    w.primitive_array(0x410, BasicType::Byte, 3, &[0; 3]);
    w.primitive_array(0x420, BasicType::Long, 1, &[0; 8]);
    w.instance(0x500, 0x40, &[0; 12]);
    w.root_jni_global(0x300, 1);
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// Each kind of object at its VM's size (the module documentation of `index::sizes`), in
/// the full index as in the census: HotSpot with 8-byte and with 4-byte references (a root
/// class's own fields counted; an array's length word rounded up to the reference size),
/// and Android (the class's instance size; header and field bytes where it gives none; an
/// array's length word padded before 8-byte elements only).
#[test]
fn each_kind_of_object_takes_its_vms_layout() {
    let conv = |vm, object_header, array_header, reference_size| index::Conventions {
        vm,
        object_header,
        array_header,
        reference_size,
        compressed_references: false,
        alignment: 8,
    };
    for (id_size, android, want, sizes) in [
        (8, false, conv("HotSpot", 16, 20, 8), [24, 40, 32, 32, 32]),
        (4, false, conv("HotSpot", 8, 12, 4), [16, 24, 16, 24, 24]),
        (4, true, conv("Android", 8, 12, 4), [8, 24, 16, 24, 24]),
    ] {
        let bytes = kinds_dump(id_size, android);
        let got = index_sizes(&bytes, &[0x300, 0x400, 0x410, 0x420, 0x500]);
        assert_eq!(got, (want, sizes.to_vec()), "{id_size}-byte ids, {want:?}");
        let c = census_of(&bytes);
        assert_eq!(c.sizes, want);
        assert_eq!(c.histogram, index_histogram(&bytes));
    }
}

/// An id the dump lists twice (an object array and a Holder both at 0x1000) is counted twice
/// by the census, which keeps nothing per object (the module documentation of
/// `index::census`); the full index keeps the object listed first. No VM writes such a dump.
#[test]
fn a_repeated_id_is_counted_twice_by_the_census_and_once_by_the_index() {
    let bytes = array_then(0x30, 0x1000);
    let (census, index) = (census_of(&bytes).histogram, index_histogram(&bytes));
    assert_eq!(census.get("com.app.Holder"), Some(&(1, 24)));
    assert_eq!(index.get("com.app.Holder"), None);
    let without = |mut h: std::collections::BTreeMap<String, (u64, u64)>| {
        h.remove("com.app.Holder");
        h
    };
    assert_eq!(without(census), index);
}

/// Only an array of an array class shows compressed references, in the census as in the full
/// index (`sizes::shows_compressed`): an object inside an array of `java.lang.Object` (0x10,
/// not an array class) or of a class the dump lacks (0x70) shows none; one inside an array of
/// `java.lang.Object[]` does, also after one of `java.lang.Object`.
#[test]
fn only_an_array_of_an_array_class_shows_compressed_references() {
    let inside = 0x1000 + 16 + 3 * 8 - 1;
    for class in [0x10, 0x70] {
        let bytes = array_then(class, inside);
        let sizes = census_of(&bytes).sizes;
        assert!(!sizes.compressed_references, "array of class {class:#x}");
        assert_eq!(
            sizes,
            index_sizes(&bytes, &[]).0,
            "array of class {class:#x}"
        );
    }
    let bytes = holder_dump(|w| {
        w.utf8(4, "java.lang.Object[]").load_class(3, 0x30, 4);
        w.class_dump(0x30, 0x10, 0, 0, &[], &[]);
        w.object_array(0x1000, 0x10, &[0, 0, 0]);
        w.instance(inside, 0x20, &[0; 8]);
        w.object_array(0x2000, 0x30, &[0, 0, 0]);
        w.instance(0x2000 + 16, 0x20, &[0; 8]);
    });
    let sizes = census_of(&bytes).sizes;
    assert!(sizes.compressed_references);
    assert_eq!(sizes, index_sizes(&bytes, &[]).0);
}
