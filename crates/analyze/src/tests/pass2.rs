//! Pass 2's work on each object (`index::pass2`), seen in the indexes both ways build: the
//! class each instance is counted under, which worker writes which node, and what the detectors
//! flag.
use super::*;

/// A class whose id falls in the same slot of pass 2's class cache as Holder's (0x20).
const OTHER: u64 = 0xa38;

/// A HotSpot-style dump (8-byte ids) of `com.app.Holder` (0x20, one reference field, 8 bytes)
/// and `com.app.Other` ([`OTHER`], no fields, 16 bytes), with the objects `body` writes.
fn two_class_dump(body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new(Format::V102, 8, 0);
    for (id, t) in [
        (1, "java.lang.Object"),
        (2, "com.app.Holder"),
        (3, "ref"),
        (4, "com.app.Other"),
    ] {
        w.utf8(id, t);
    }
    w.load_class(1, 0x10, 1);
    w.load_class(2, 0x20, 2);
    w.load_class(3, OTHER, 4);
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.class_dump(0x10, 0, 0, 0, &[], &[]);
    w.class_dump(0x20, 0x10, 0, 8, &[], &[(3, BasicType::Object)]);
    w.class_dump(OTHER, 0x10, 0, 16, &[], &[]);
    body(&mut w);
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// Instances of two classes whose ids share a slot of the class cache, alternating, and one
/// whose class id is 0: each is counted under its own class (the one of id 0 under
/// `<unknown class>`, with its data's size; the others with their class's size, also when
/// their data is shorter), in the index of two passes and in that of one; each class counts
/// its own instances, and the index counts each kind of object.
#[test]
fn instances_of_classes_sharing_a_cache_slot_keep_their_own_class() {
    let bytes = two_class_dump(|w| {
        w.instance(0x100, 0x20, &0x108u64.to_be_bytes());
        w.instance(0x108, OTHER, &[0; 16]);
        w.instance(0x110, 0x20, &0u64.to_be_bytes());
        w.instance(0x118, OTHER, &[0; 12]);
        w.instance(0x120, 0, &[0; 12]);
        w.instance(0x128, 0x20, &0x120u64.to_be_bytes());
        // Shorter than Holder's fields: counted, with Holder's size, and no reference.
        w.instance(0x130, 0x20, &[0; 4]);
        w.object_array(0x138, 0x10, &[0x100, 0, 0x108]);
        w.primitive_array(0x140, BasicType::Int, 2, &[0; 8]);
        w.primitive_array_nodata(0x148, BasicType::Byte, 100);
        w.root_jni_global(0x100, 1);
    });
    let whole = [(hprof::HEADER_LEN as u64, bytes.len() as u64)];
    let (one, _) = one_pass_as_two(&bytes, &whole, 1);
    let (two, _) = two_pass_index(&bytes, 1, None);
    let want = [
        (0x100, "com.app.Holder", 8),
        (0x108, "com.app.Other", 16),
        (0x110, "com.app.Holder", 8),
        (0x118, "com.app.Other", 16),
        (0x120, "<unknown class>", 12),
        (0x128, "com.app.Holder", 8),
        (0x130, "com.app.Holder", 8),
        (0x138, "java.lang.Object", 3 * 8 + 16),
        (0x140, "int[]", 2 * 4 + 16),
        (0x148, "byte[]", 100 + 16),
    ];
    for ix in [&one, &two] {
        for (id, class, size) in want {
            let n = ix.node(id).unwrap() as usize;
            assert_eq!(ix.classes[ix.class_of[n] as usize].name, class, "{id:#x}");
            assert_eq!(ix.shallow[n], size, "{id:#x}");
        }
        let count = |name: &str| {
            let c = ix.classes.iter().find(|c| c.name == name).unwrap();
            c.instances
        };
        assert_eq!(count("com.app.Holder"), 4);
        assert_eq!(count("java.lang.Object"), 1, "the object array");
        assert_eq!(count("int[]"), 1);
        assert_eq!(count("byte[]"), 1);
        assert_eq!(count("com.app.Other"), 2);
        assert_eq!(count("<unknown class>"), 1);
        assert_eq!(count("java.lang.Class"), 3, "the three class dumps");
        let st = &ix.stats;
        let kinds = [
            st.classes,
            st.instances,
            st.object_arrays,
            st.primitive_arrays,
        ];
        assert_eq!(kinds, [3, 7, 1, 2]);
        assert_eq!([st.stripped_arrays, st.short_instances], [1, 1]);
        assert_eq!(st.unknown_class, 1);
    }
}

/// An instance or an object array whose class id names an object that is not a class (a
/// damaged or crafted dump) is counted under `<unknown class>`, and its reference to that
/// object is an edge like any other, in the index of one pass as in that of two (the one pass implies the edge to a known
/// class by a flag, and must not imply one to a class it does not know: it would be missing).
#[test]
fn an_object_whose_class_id_is_an_object_keeps_its_edge_to_it() {
    let bytes = two_class_dump(|w| {
        w.instance(0x100, OTHER, &[0; 16]);
        w.instance(0x108, 0x100, &[0; 4]);
        w.object_array(0x110, 0x100, &[]);
        w.root_jni_global(0x108, 1);
        w.root_jni_global(0x110, 1);
    });
    let whole = [(hprof::HEADER_LEN as u64, bytes.len() as u64)];
    let (one, _) = one_pass_as_two(&bytes, &whole, 1);
    for ix in [&one, &two_pass_index(&bytes, 1, None).0] {
        let b = ix.node(0x100).unwrap();
        for id in [0x108, 0x110] {
            let a = ix.node(id).unwrap();
            assert_eq!(
                ix.classes[ix.class_of[a as usize] as usize].name,
                "<unknown class>"
            );
            assert_eq!(ix.succ(a), [b], "{id:#x}");
        }
        assert_eq!(ix.stats.missing_refs, 0);
    }
}

/// In a dump that lists every object by ascending id (the class dumps first, with the lowest
/// ids), each one-pass worker's objects are the nodes of its own range: the workers write
/// every node themselves and leave none to `apply_placed`, however many parts.
#[test]
fn one_pass_workers_over_ascending_ids_leave_no_object() {
    let bytes = holder_dump(|w| {
        for k in 0..2000u64 {
            if k % 40 == 39 {
                w.end_segment();
            }
            let id = 0x1000 + 16 * k;
            match k % 3 {
                0 => w.instance(id, 0x20, &(id + 16).to_be_bytes()),
                1 => w.object_array(id, 0x10, &[id - 16, 0x20]),
                _ => w.primitive_array(id, BasicType::Int, 1, &[0, 0, 0, 7]),
            };
        }
        w.root_jni_global(0x1000, 1);
    });
    for threads in 1..=4 {
        let parts = parts_of(&bytes, threads);
        assert_eq!(parts.len(), threads);
        let (one, left) = one_pass_as_two(&bytes, &parts, threads);
        assert_eq!(left, 0, "{threads} parts");
        assert_eq!(one.len(), 2002);
    }
}

/// What `role_finding` says about field bytes `data` (4-byte ids), as (reason, detail), the
/// watched id as its detail.
fn finding(role: index::Role, data: &[u8], min_pixels: u64) -> Option<(&'static str, String)> {
    match index::role_finding(role, data, 4, min_pixels)? {
        index::RoleFinding::Flag(reason, detail) => Some((reason, detail)),
        index::RoleFinding::Watched(id) => Some(("watched", format!("{id:#x}"))),
    }
}

/// Four-byte big-endian words, one after the other.
fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// A Fragment leaks only with no manager and `mCalled` set: either alone is no finding.
#[test]
fn a_fragment_leaks_with_no_manager_and_called_both() {
    let role = index::Role::Fragment {
        manager: 0,
        called: 4,
    };
    let leak = Some((
        "Fragment Leak",
        "mFragmentManager is null and mCalled is true".to_string(),
    ));
    assert_eq!(finding(role, &[0, 0, 0, 0, 1], 1), leak);
    assert_eq!(finding(role, &[0, 0, 0, 0, 0], 1), None, "not called");
    assert_eq!(finding(role, &[0, 0, 0, 9, 1], 1), None, "managed");
    assert_eq!(
        finding(role, &[0, 0, 0, 0], 1),
        None,
        "mCalled past the data"
    );
}

/// A Bitmap is a finding when both sides are positive and it has at least the threshold's
/// pixels: a side of 0 or below is none, even with a threshold of 0.
#[test]
fn a_bitmap_needs_two_positive_sides_and_the_threshold_of_pixels() {
    let role = index::Role::Bitmap {
        width: 0,
        height: 4,
    };
    let found = |w: u32, h: u32, min: u64| finding(role, &words(&[w, h]), min);
    let big = |d: &str| Some(("Bitmap Size Over Threshold", d.to_string()));
    assert_eq!(found(5, 5, 25), big("5x5"));
    assert_eq!(found(5, 5, 26), None);
    assert_eq!(found(1, 1, 0), big("1x1"));
    assert_eq!(found(0, 5, 0), None);
    assert_eq!(found(5, 0, 0), None);
    assert_eq!(found(u32::MAX, 5, 0), None, "a negative width");
    assert_eq!(found(5, u32::MAX, 0), None, "a negative height");
    assert_eq!(
        finding(role, &words(&[5]), 0),
        None,
        "no height in the data"
    );
}

/// The index of two passes over `bytes` (one part), its arrays flagged from
/// `array_min_bytes` on.
fn flagged_index(bytes: &[u8], array_min_bytes: u64) -> index::Index {
    let input = Input::Bytes(bytes);
    let mut parts = None;
    let mut ix = scan(&input, &mut parts, None).unwrap();
    let limits = index::IndexLimits {
        bitmap_min_pixels: 1,
        array_min_bytes,
    };
    two_pass_graph(&input, &parts, &mut ix, limits, None).unwrap();
    ix
}

/// An array is flagged when its size plus `RAW_SLACK` (16) reaches the threshold: an object
/// array of 2 elements (32 bytes) from a threshold of 48 on, an `int[1]` (20 bytes) from 36
/// on, each with its class and length.
#[test]
fn arrays_are_flagged_from_their_threshold_on() {
    let bytes = holder_dump(|w| {
        w.object_array(0x100, 0x10, &[0x20, 0]);
        w.primitive_array(0x200, BasicType::Int, 1, &[0, 0, 0, 7]);
    });
    let flags = |min: u64| -> Vec<(u64, String, String)> {
        let ix = flagged_index(&bytes, min);
        (ix.flags.iter())
            .map(|f| (ix.id(f.node), f.reason.clone(), f.detail.clone()))
            .collect()
    };
    let flag = |id: u64, detail: &str| (id, "Array Size Over Threshold".into(), detail.into());
    let objects = || flag(0x100, "java.lang.Object of 2");
    assert_eq!(flags(36), [objects(), flag(0x200, "int[] of 1")]);
    assert_eq!(flags(37), [objects()]);
    assert_eq!(flags(48), [objects()]);
    assert_eq!(flags(49), []);
}

/// Leak reasons rank in their order, every other reason after them; of an object's flags the
/// best ranked is kept, the first of equals, and objects with one flag keep it.
#[test]
fn each_object_keeps_its_best_ranked_flag() {
    let ranks = ["Activity Leak", "Fragment Leak", "Service Leak"]
        .into_iter()
        .chain([index::WATCHED_FINDING, "Array Size Over Threshold", "other"])
        .map(index::flag_rank)
        .collect::<Vec<_>>();
    assert_eq!(ranks, [0, 1, 2, 3, 4, 4]);

    let mut ix = flagged_index(&holder_dump(|_| {}), 1 << 40);
    let flag = |node: u32, reason: &str, detail: &str| index::Flag {
        node,
        reason: reason.into(),
        detail: detail.into(),
    };
    ix.flags = vec![
        flag(0, "Array Size Over Threshold", "a"),
        flag(0, index::WATCHED_FINDING, "b"),
        flag(1, "Fragment Leak", "c"),
        flag(1, "Fragment Leak", "d"),
        flag(1, "Activity Leak", "e"),
        flag(1, "Bitmap Size Over Threshold", "f"),
        flag(2, "Bitmap Size Over Threshold", "g"),
        flag(2, "Array Size Over Threshold", "h"),
        flag(3, "Service Leak", "i"),
    ];
    index::one_flag_per_node(&mut ix);
    let kept: Vec<(u32, &str)> = (ix.flags.iter())
        .map(|f| (f.node, f.detail.as_str()))
        .collect();
    assert_eq!(kept, [(0, "b"), (1, "e"), (2, "g"), (3, "i")]);
}

/// Pass 2 cuts each heap dump segment into pieces of whole sub-records: a piece ends at the
/// first sub-record that starts `PIECE` bytes or more after it began, the last at the
/// segment's end, and each knows the range of the ids of its objects. 5,000 instances of 33
/// bytes (a segment of their own, after the class dumps') make pieces of 1,986, 1,986 and
/// 1,028 of them.
#[test]
fn segments_are_cut_into_pieces_at_the_first_sub_record_past_piece_bytes() {
    let id = |k: u64| 0x1000 + 16 * k;
    let bytes = holder_dump(|w| {
        w.end_segment();
        for k in 0..5000 {
            w.instance(id(k), 0x20, &0u64.to_be_bytes());
        }
    });
    let (ix, _) = two_pass_index(&bytes, 1, None);
    let segs: Vec<_> = (ix.segments.iter())
        .map(|s| (s.len, s.tag, s.min_id, s.max_id))
        .collect();
    let classes = segs[0].0;
    let tag = tag::HEAP_DUMP_SEGMENT;
    assert_eq!(index::PIECE, 65536);
    assert_eq!(
        segs,
        [
            (classes, tag, 0x10, 0x20),
            (1986 * 33, tag, id(0), id(1985)),
            (1986 * 33, tag, id(1986), id(3971)),
            (1028 * 33, tag, id(3972), id(4999)),
        ]
    );
    let s = &ix.segments;
    // The class dumps' segment, then the instances' record right after it (9-byte headers),
    // then the end of the dump (a 9-byte record).
    assert_eq!(s[1].offset, s[0].offset + classes + 9);
    assert_eq!(s[2].offset, s[1].offset + s[1].len);
    assert_eq!(s[3].offset, s[2].offset + s[2].len);
    assert_eq!(s[3].offset + s[3].len, bytes.len() as u64 - 9);
}

/// The one pass over `bytes` cut for `threads` parts (one part if it cannot be cut).
fn one_pass_in_parts(bytes: &[u8], threads: usize) -> Option<OnePassResult> {
    one_pass(
        &Input::Bytes(bytes),
        &parts_of(bytes, threads),
        LIMITS,
        None,
    )
}

/// 600 instances of Holder (0x20) from id 0x1000, each holding the next, a new heap dump
/// segment every 50 (places where the file can be cut).
fn holder_chain(w: &mut Writer) {
    for k in 0..600u64 {
        if k % 50 == 49 {
            w.end_segment();
        }
        w.instance(0x1000 + 16 * k, 0x20, &(0x1000 + 16 * k + 16).to_be_bytes());
    }
}

/// A string, a loaded class or a class dump after the first object: the one pass's workers
/// see it at its offset and stop their pass-2 work (`Scanned` without node arrays, which are
/// not even started); the prefix's counts against pass 1's would also catch it, but only once
/// the workers are done and the node arrays made. Whatever the parts, the report is the one
/// two passes make.
#[test]
fn a_late_string_or_class_stops_the_one_pass_workers() {
    let dump = |late: u8| {
        let mut w = Writer::new(Format::V102, 8, 0);
        w.utf8(1, "java.lang.Object");
        w.utf8(2, "com.app.Holder");
        w.load_class(1, 0x10, 1);
        if late != 2 {
            w.load_class(2, 0x20, 2);
        }
        w.segment(tag::HEAP_DUMP_SEGMENT);
        w.class_dump(0x10, 0, 0, 0, &[], &[]);
        if late != 3 {
            w.class_dump(0x20, 0x10, 0, 8, &[], &[]);
        }
        holder_chain(&mut w);
        w.end_segment();
        match late {
            1 => w.utf8(3, "late"),
            2 => w.load_class(2, 0x20, 2),
            _ => {
                w.segment(tag::HEAP_DUMP_SEGMENT);
                w.class_dump(0x20, 0x10, 0, 8, &[], &[]);
                w.end_segment()
            }
        };
        w.root_jni_global(0x1000, 1);
        w.heap_dump_end();
        w.finish()
    };
    for late in 1..=3 {
        let bytes = dump(late);
        for threads in 1..=3 {
            assert!(
                matches!(
                    one_pass_in_parts(&bytes, threads),
                    Some(OnePassResult::Scanned(_, None))
                ),
                "late {late}, {threads} parts"
            );
        }
        let (one, two, built) = one_and_two_passes(&bytes);
        assert!(!built, "late {late}");
        assert_eq!(one, two, "late {late}");
    }
}

/// A dump in id order whose class dumps are listed twice, or whose object has a class dump's
/// id: the one pass, which numbers the objects after the class dumps by counting the nodes
/// those leave free, gives up (two passes keep the object listed first), whatever the parts.
#[test]
fn a_repeated_id_in_a_dump_in_id_order_takes_two_passes() {
    for twice in [true, false] {
        let bytes = holder_dump(|w| {
            if twice {
                w.class_dump(0x20, 0x10, 0, 8, &[], &[(3, BasicType::Object)]);
            } else {
                w.instance(0x20, 0x10, &[]);
            }
            holder_chain(w);
            w.root_jni_global(0x1000, 1);
        });
        for threads in 1..=3 {
            let r = one_pass_in_parts(&bytes, threads);
            assert!(r.is_none(), "twice {twice}, {threads} parts");
        }
        let (two, _) = two_pass_index(&bytes, 1, None);
        assert_eq!(two.stats.duplicate_ids, 1, "twice {twice}");
        assert_eq!(two.len(), 602, "twice {twice}");
        let (one, two, built) = one_and_two_passes(&bytes);
        assert!(!built, "twice {twice}");
        assert_eq!(one, two, "twice {twice}");
    }
}
