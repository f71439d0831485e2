use super::*;
use proptest::prelude::*;

/// A one-pass worker whose part holds nothing late stops its pass-2 work (and frees what
/// it gathered) once another worker has found something late; its pass 1 goes on to the
/// end of its part either way. (The first worker over an ART dump finds a class dump at
/// once; a worker over the app heap's objects may find none in its part.)
#[test]
fn a_worker_stops_pass_2_once_another_finds_something_late() {
    use hprof::Parser;
    let bytes = crate::tests::holder_dump(|w| {
        for k in 0..10u64 {
            w.instance(0x100 + 8 * k, 0x20, &(0x108 + 8 * k).to_be_bytes());
        }
    });

    let mut pre = Prefix::default();
    let mut p = Parser::new();
    assert!(
        p.feed(&bytes, &mut pre).is_err(),
        "the prefix stops at the first object"
    );
    let prefix_end = pre.end.expect("the dump has objects");
    let skel = pre.p1.finish(None).unwrap();
    let limits = IndexLimits {
        bitmap_min_pixels: 1,
        array_min_bytes: 1,
    };
    for elsewhere in [false, true] {
        let any_late = AtomicBool::new(elsewhere);
        let mut v = OnePass::new(&skel, limits, 0, prefix_end, &any_late);
        let mut p = Parser::new();
        p.feed(&bytes, &mut v).unwrap();
        p.finish().unwrap();
        assert_eq!(v.late, elsewhere);
        assert_eq!(v.p1.ids().len(), 12, "2 class objects and 10 instances");
        let (out, raw) = v.p2.finish_deferred().unwrap();
        // Holder's superclass, and each instance's reference (its class edge is implied).
        let (entries, targets) = if elsewhere { (0, 0) } else { (12, 11) };
        assert_eq!(out.nodes.len(), entries);
        assert_eq!(raw.len(), targets);
    }
}

/// A name over [`MAX_STRING_BYTES`] is kept cut, on a character boundary, with the count of
/// bytes left out; a name at the limit is kept whole (a crafted dump naming a class with a
/// megabyte made every report line that names it a megabyte long).
#[test]
fn a_long_string_is_kept_cut_and_says_so() {
    let mut s = Strings::default();
    let at_limit = "a".repeat(MAX_STRING_BYTES);
    // 'é' is two bytes: one starts at byte MAX_STRING_BYTES - 1, so the cut backs off by one.
    let long = format!("{}é{}", "b".repeat(MAX_STRING_BYTES - 1), "c".repeat(5000));
    s.push(1, at_limit.as_bytes());
    s.push(2, long.as_bytes());
    s.finish();
    assert_eq!(s.get(1).unwrap(), at_limit);
    let got = s.get(2).unwrap();
    let left_out = long.len() - (MAX_STRING_BYTES - 1);
    assert_eq!(
        got,
        format!("{}…[+{left_out} bytes]", "b".repeat(MAX_STRING_BYTES - 1))
    );
    assert!(
        s.arena.len() < 2 * MAX_STRING_BYTES + 32,
        "{}",
        s.arena.len()
    );
}

/// Another worker's strings, appended after this one's, keep their texts.
#[test]
fn appended_strings_keep_their_texts() {
    let mut a = Strings::default();
    a.push(1, b"first");
    a.push(3, b"third");
    let mut b = Strings::default();
    b.push(2, b"second");
    b.push(4, b"fourth");
    a.append(b);
    a.finish();
    for (id, t) in [(1, "first"), (2, "second"), (3, "third"), (4, "fourth")] {
        assert_eq!(a.get(id).as_deref(), Some(t));
    }
    assert_eq!(a.get(5), None);
}

/// A long string of nothing but UTF-8 continuation bytes (a crafted dump) keeps none of
/// them: the cut backs off to the start.
#[test]
fn a_long_string_of_continuation_bytes_keeps_only_its_note() {
    let mut s = Strings::default();
    s.push(1, &[0x80; MAX_STRING_BYTES + 76]);
    s.finish();
    assert_eq!(s.get(1).unwrap(), "…[+1100 bytes]");
}

/// Only a JNI global whose reference id is the strip's mark (in 4 or 8 bytes) is a stripped
/// holder's root.
#[test]
fn only_a_jni_global_carrying_the_mark_is_a_stripped_holder() {
    let mark4 = (hprof::STRIPPED_HOLDER_MARK as u32).to_be_bytes();
    let mark8 = hprof::STRIPPED_HOLDER_MARK.to_be_bytes();
    let global = sub::ROOT_JNI_GLOBAL;
    assert_eq!(holder_tag(global, &mark4), STRIPPED_HOLDER_ROOT);
    assert_eq!(holder_tag(global, &mark8), STRIPPED_HOLDER_ROOT);
    assert_eq!(holder_tag(global, &7u64.to_be_bytes()), global);
    assert_eq!(holder_tag(global, &mark8[4..6]), global);
    assert_eq!(holder_tag(sub::ROOT_JNI_LOCAL, &mark4), sub::ROOT_JNI_LOCAL);
}

/// The index of a small dump: its length, its ids in node order, its classes' chains and
/// its `<unknown class>`; a dump of no objects is empty.
#[test]
fn an_index_lists_its_ids_and_walks_its_superclasses() {
    let bytes = crate::tests::holder_dump(|w| {
        for k in 0..3u64 {
            w.instance(0x100 + 8 * k, 0x20, &0u64.to_be_bytes());
        }
    });
    let cfg = crate::Config::default();
    let mut tm = crate::Timings::default();
    let t0 = std::time::Instant::now();
    let (ix, _, _) = build_index(&Input::Bytes(&bytes), &cfg, t0, &mut tm).unwrap();
    let want = [0x10, 0x20, 0x100, 0x108, 0x110];
    assert_eq!(ix.len(), 5);
    assert!(!ix.is_empty());
    assert_eq!(ix.each_id().collect::<Vec<_>>(), want);
    assert_eq!(ix.id(3), 0x108);
    let class = |name: &str| ix.classes.iter().position(|c| c.name == name).unwrap() as u32;
    let (object, holder) = (class("java.lang.Object"), class("com.app.Holder"));
    assert!(ix.is_subclass(holder, "java.lang.Object"));
    assert!(ix.is_subclass(holder, "com.app.Holder"));
    assert!(!ix.is_subclass(object, "com.app.Holder"));
    assert!(!ix.is_subclass(NONE, "java.lang.Object"));
    assert_eq!(
        ix.classes[ix.unknown_class() as usize].name,
        "<unknown class>"
    );
    let empty = hprof::writer::Writer::new(hprof::Format::V102, 8, 0).finish();
    let (ix, _, _) = build_index(&Input::Bytes(&empty), &cfg, t0, &mut tm).unwrap();
    assert!(ix.is_empty());
}

#[test]
fn java_names() {
    assert_eq!(java_name("java/lang/String"), "java.lang.String");
    assert_eq!(java_name("[[I"), "int[][]");
    assert_eq!(java_name("[Ljava/lang/Object;"), "java.lang.Object[]");
    assert_eq!(java_name("android.app.Activity"), "android.app.Activity");
    assert_eq!(java_name("java.lang.Object[]"), "java.lang.Object[]");
    assert_eq!(java_name("["), "[]");
    // Only a descriptor with both its `L` and its `;` loses them.
    assert_eq!(java_name("[Lcom/app/Foo"), "Lcom.app.Foo[]");
    assert_eq!(java_name("[Xcom/app/Foo;"), "Xcom.app.Foo;[]");
}

/// Whether a worker's ids came twice is known after sorting them, wherever the repeat is:
/// within the head, between the head and the ascending rest, within the rest. Not when the
/// whole was sorted (the head longer than a quarter): the repeats are then looked for later.
#[test]
fn sort_ids_knows_whether_an_id_came_twice() {
    let rest: Vec<u64> = (1..=40).map(|k| 10 * k).collect();
    for (head, distinct) in [
        (vec![], true),
        (vec![25, 7, 405], true),
        (vec![5, 5], false),
        (vec![55, 55, 5], false),
        (vec![7, 200], false),
        (vec![400, 3], false),
        (vec![9, 10], false),
        ((0..20).map(|k| 10 * k + 5).collect(), false),
    ] {
        let ids = [head.clone(), rest.clone()].concat();
        // The ids scanned for their ascending tail, or pushed as the parse pushes them.
        let mut p = Pass1 {
            ids: ids.clone().into(),
            ..Pass1::default()
        };
        let mut q = Pass1::default();
        ids.iter().for_each(|&id| q.push_id(id));
        for p in [&mut p, &mut q] {
            p.sort_ids();
            assert!(p.ids.is_sorted());
            assert_eq!(p.distinct, distinct, "{head:?}");
            // Sorted ids are one ascending run: sorting them again changes nothing.
            let once = p.ids.to_vec();
            p.sort_ids();
            assert_eq!((&p.ids[..], p.distinct), (&once[..], distinct));
        }
    }
    let mut p = Pass1 {
        ids: vec![1, 2, 2, 3].into(),
        ..Pass1::default()
    };
    p.sort_ids();
    assert!(!p.distinct);
}

/// [`Pass1::ascend_from`] at the edges: a descent or a repeat just before, at and after the
/// position asked about.
#[test]
fn ascend_from_at_the_edges() {
    for (ids, from, want) in [
        (vec![], 0, true),
        (vec![5], 3, true),
        (vec![9, 3, 4, 5], 0, false),
        (vec![9, 3, 4, 5], 1, true),
        (vec![3, 9, 4, 5], 1, false),
        (vec![3, 9, 4, 5], 2, true),
        (vec![3, 3, 4, 5], 0, false),
        (vec![3, 3, 4, 5], 1, true),
        (vec![3, 4, 4, 5], 1, false),
        (vec![3, 4, 5, 5], 3, true),
        (vec![3, 4, 5, 5], 2, false),
    ] {
        let mut p = Pass1::default();
        ids.iter().for_each(|&id| p.push_id(id));
        assert_eq!(p.ascend_from(from), want, "{ids:?} from {from}");
    }
}

proptest! {
    /// A worker's ids, a head in any order (a HotSpot dump's class dumps: among the rest's
    /// ids, equal to some, and beyond its last) then an ascending rest with repeats, come
    /// out sorted, each kept, and whether any came twice is known.
    #[test]
    fn sort_ids_merges_the_head_into_the_ascending_rest(
        head in proptest::collection::vec(0u64..400_000, 0..60),
        steps in proptest::collection::vec(0u64..200, 240..2000),
    ) {
        let mut ids = head.clone();
        let mut x = 0;
        for s in steps {
            x += s;
            ids.push(x);
        }
        let mut want = ids.clone();
        want.sort_unstable();
        let mut p = Pass1 {
            ids: ids.clone().into(),
            ..Pass1::default()
        };
        p.sort_ids();
        prop_assert_eq!(&p.ids[..], &want[..]);
        let distinct = want.windows(2).all(|w| w[0] < w[1]);
        prop_assert_eq!(p.distinct, distinct);
        // Pushed as the parse pushes them, the ascending tail noted on the way.
        let mut p = Pass1::default();
        ids.iter().for_each(|&id| p.push_id(id));
        p.sort_ids();
        prop_assert_eq!(&p.ids[..], &want[..]);
        prop_assert_eq!(p.distinct, distinct);
        // The same in a scratch file.
        let dir = tempfile::tempdir().unwrap();
        let s = Scratch::new(dir.path(), 1 << 30).unwrap();
        let mut p = Pass1::in_scratch(Some(&s));
        p.ids.extend_from_slice(&ids);
        p.sort_ids();
        prop_assert!(p.ids.in_file());
        prop_assert_eq!(&p.ids[..], &want[..]);
    }

    /// Whether a worker's ids ascend strictly from a position on, told from the ascending run
    /// the parse notes as it pushes them, is what comparing each pair there says: with
    /// descents and repeats before, at and after that position, and with ids added otherwise
    /// (the run's note then stale).
    #[test]
    fn ascend_from_is_each_pair_ascending(
        steps in proptest::collection::vec(0u64..4, 0..30),
        drops in proptest::collection::vec(0usize..30, 0..2),
        from in 0usize..34,
        added in proptest::collection::vec(0u64..200, 0..3),
    ) {
        // Mostly ascending, as a dump lists its objects: steps of 0 repeat an id, and a drop
        // is a descent.
        let mut x = 100;
        let ids: Vec<u64> = (steps.iter().enumerate())
            .map(|(k, s)| {
                x = if drops.contains(&k) { x - 20 } else { x } + s;
                x
            })
            .collect();
        let strictly = |v: &[u64]| v.get(from..).is_none_or(|t| t.windows(2).all(|p| p[0] < p[1]));
        let mut p = Pass1::default();
        ids.iter().for_each(|&id| p.push_id(id));
        prop_assert_eq!(p.ascend_from(from), strictly(&ids));
        p.ids.extend_from_slice(&added);
        let all = [ids.clone(), added.clone()].concat();
        prop_assert_eq!(p.ascend_from(from), strictly(&all));
    }

    /// Each map (the rank map, the buckets, the plain search) finds exactly the ids it was
    /// built from, however they cluster
    /// (ART puts its image, zygote and app spaces far apart).
    #[test]
    fn id_map_finds_exactly_the_ids(
        clusters in proptest::collection::vec((any::<u64>(), 1usize..300, 1u64..64), 1..4),
        probes in proptest::collection::vec(any::<u64>(), 0..200),
    ) {
        let mut ids = Vec::new();
        for (base, n, step) in clusters {
            for i in 0..n as u64 {
                ids.push(base.wrapping_add(i * step * 8));
            }
        }
        ids.sort_unstable();
        ids.dedup();
        for m in [IdMap::new(&ids), IdMap::buckets(&ids), IdMap::Search] {
            for (i, &id) in ids.iter().enumerate() {
                prop_assert_eq!(m.find(&ids, id), Some(i as u32));
            }
            for p in &probes {
                prop_assert_eq!(m.find(&ids, *p), ids.binary_search(p).ok().map(|i| i as u32));
            }
            let mut q: Vec<u64> = probes.clone();
            q.extend(ids.iter().rev().step_by(3));
            let mut got = vec![0u32; q.len()];
            m.find_batch(&ids, &q, &mut got);
            for (p, g) in q.iter().zip(&got) {
                prop_assert_eq!(*g, ids.binary_search(p).map_or(NONE, |i| i as u32));
            }
        }
        prop_assert_eq!(IdMap::new(&[]).find(&[], 5), None);
    }
}

/// Three dense spaces gigabytes apart (ART's image, zygote and app spaces): no bucket holds
/// more than a few dozen ids. (One level over the whole span put 256 in a bucket of the
/// generated 150 MB ART dump.)
#[test]
fn id_map_buckets_stay_small_when_ids_cluster_far_apart() {
    let ids = super::super::rank::spaces_far_apart();
    let m = Buckets::new(&ids);
    assert!(m.max_bucket() <= 32, "{} ids in one bucket", m.max_bucket());
    for (i, &id) in ids.iter().enumerate().step_by(97) {
        assert_eq!(m.find(&ids, id), Some(i as u32));
        assert_eq!(m.find(&ids, id + 4), None);
    }
}

#[test]
fn id_map_spans_the_whole_u64_range() {
    let ids = [1u64, u64::MAX - 1];
    let m = Buckets::new(&ids);
    assert_eq!(m.find(&ids, 1), Some(0));
    assert_eq!(m.find(&ids, u64::MAX - 1), Some(1));
    assert_eq!(m.find(&ids, u64::MAX), None);
    assert_eq!(m.find(&ids, 0), None);
}

/// A batch of one query is answered (the pipeline runs its last stage for it too).
#[test]
fn id_map_answers_a_batch_of_one() {
    let ids = [8u64, 16, 24];
    for m in [IdMap::new(&ids), IdMap::buckets(&ids), IdMap::Search] {
        for (i, &id) in ids.iter().enumerate() {
            let mut out = [99u32];
            m.find_batch(&ids, &[id], &mut out);
            assert_eq!(out, [i as u32]);
        }
        let mut out = [99u32];
        m.find_batch(&ids, &[12], &mut out);
        assert_eq!(out, [NONE]);
    }
}

/// A map's size: 100 ids 8 apart make 50 regions of 16 bytes with one bucket each, so
/// (50 + 51 bounds) 4-byte words; a search has no table.
#[test]
fn id_map_bytes_count_the_bucket_table() {
    let ids: Vec<u64> = (0..100).map(|i| 8 * i).collect();
    assert_eq!(IdMap::buckets(&ids).bytes(), (50 + 51) * 4);
    assert_eq!(IdMap::Search.bytes(), 0);
}
