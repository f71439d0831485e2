//! The census (`index::census`) over small dumps built by hand: its counts exactly, and its
//! histogram as the full index makes it.
use super::*;
use std::collections::{BTreeMap, BTreeSet};

/// The census of `bytes`.
fn census_of(bytes: &[u8]) -> index::Counts {
    index::census(&Input::Bytes(bytes)).unwrap()
}

/// The histogram the full index of `bytes` makes: objects and shallow bytes by class name.
fn index_histogram(bytes: &[u8]) -> BTreeMap<String, (u64, u64)> {
    let mut tm = Timings::default();
    let (ix, _, _) = build_index(
        &Input::Bytes(bytes),
        &Config::default(),
        Instant::now(),
        &mut tm,
    )
    .unwrap();
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
        let bytes = holder_dump(|w| {
            w.object_array(0x1000, 0x10, &[0, 0, 0]);
            w.instance(next, 0x20, &[0; 8]);
        });
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
