//! What pass 1 keeps of a dump's records (roots, class statics) and what its workers' gatherings
//! keep when put together (`Pass1::merge`): the same index however many parts. Also what
//! `build_index` refuses, and where it keeps the index with a scratch directory.
use super::*;

/// The index `analyze` builds of `bytes` on `threads` threads, its file cut into as many
/// parts; and the number of parts.
fn index_on(bytes: &[u8], threads: usize) -> (index::Index, usize) {
    let cfg = Config {
        threads,
        parallel_min_bytes: 0,
        ..Config::default()
    };
    let mut tm = Timings::default();
    let (ix, _, cuts) = build_index(&Input::Bytes(bytes), &cfg, Instant::now(), &mut tm).unwrap();
    (ix, cuts.map_or(1, |c| c.len()))
}

/// The objects' sizes converted a stretch at a time by two threads (as beside the searches'
/// ends, `convert_stretches`) are those converted at once, whatever the stretch.
#[test]
fn sizes_converted_in_stretches_on_two_threads_are_those_converted_at_once() {
    let bytes = std::fs::read(fixture("jvm/openjdk_jdk11_04_x64.hprof")).unwrap();
    let cfg = Config::default();
    let mut tm = Timings::default();
    let input = Input::Bytes(&bytes);
    let built = index::build_index_sized(&input, &cfg, Instant::now(), &mut tm, None, true);
    let (ix, sizing, _, _) = built.unwrap();
    let z = sizing.unwrap();
    let mut whole = ix.shallow.to_vec();
    index::convert_sizes(&ix.class_of, &mut whole, &z, false);
    assert_ne!(whole, ix.shallow.to_vec(), "the raw sizes are not the VM's");
    for stretch in [1, 3, 1000, ix.len(), ix.len() + 1] {
        let mut shallow = ix.shallow.to_vec();
        let stretches = shallow.chunks_mut(stretch).zip(ix.class_of.chunks(stretch));
        let todo = std::sync::Mutex::new(Some((stretches, &z)));
        std::thread::scope(|s| {
            s.spawn(|| crate::convert_stretches(&todo));
            crate::convert_stretches(&todo);
        });
        assert_eq!(shallow, whole, "stretches of {stretch}");
    }
}

/// A dump of `segments` segments of 40 instances each, after `holder_dump`'s two classes; an
/// Android root (`ROOT_UNREACHABLE`) on the first object of each segment `android` names.
fn segmented_dump(segments: u64, android: impl Fn(u64) -> bool) -> Vec<u8> {
    holder_dump(|w| {
        for s in 0..segments {
            if s > 0 {
                w.end_segment();
            }
            for k in 0..40u64 {
                let id = 0x1000 + 0x100 * s + 8 * k;
                w.instance(id, 0x20, &0u64.to_be_bytes());
            }
            if android(s) {
                w.root(sub::ROOT_UNREACHABLE, 0x1000 + 0x100 * s);
            }
        }
    })
}

/// An Android root record in any part makes the dump Android's: in the second of two parts
/// only, in both, or in the first only, the sizes are Android's as with one part.
#[test]
fn an_android_record_in_any_part_makes_the_sizes_androids() {
    for (which, android) in [
        ("the last", &(|s: u64| s == 7) as &dyn Fn(u64) -> bool),
        ("each", &|_| true),
        ("the first", &|s| s == 0),
    ] {
        let bytes = segmented_dump(8, android);
        for threads in 1..=2 {
            let (ix, parts) = index_on(&bytes, threads);
            assert_eq!(parts, threads, "{which}");
            assert_eq!(ix.sizes.vm, "Android", "{which} segment, {threads} parts");
            // Holder's instance size as the dump states it (HotSpot's would be 16 + 8).
            assert_eq!(ix.shallow[ix.node(0x1000).unwrap() as usize], 8);
        }
    }
    let bytes = segmented_dump(8, |_| false);
    let (ix, parts) = index_on(&bytes, 2);
    assert_eq!((parts, ix.sizes.vm), (2, "HotSpot"));
}

/// A root whose object is not in the dump is counted as missing, and left out of the roots.
#[test]
fn a_root_of_no_object_is_counted_missing() {
    let bytes = holder_dump(|w| {
        w.instance(0x100, 0x20, &0u64.to_be_bytes());
        w.root_jni_global(0x100, 1);
        w.root_jni_global(0x999, 2);
        w.root(sub::ROOT_STICKY_CLASS, 0x998);
    });
    let (ix, _) = index_on(&bytes, 1);
    assert_eq!(ix.stats.missing_roots, 2);
    let roots: Vec<u64> = ix.roots.iter().map(|r| ix.id(r.node)).collect();
    assert_eq!(roots, [0x100]);
}

/// A class object's shallow size is its static values: primitives at their own sizes,
/// references at the reference size, to 8 bytes (not the records' bytes).
#[test]
fn a_class_objects_size_is_its_static_values() {
    let mut w = Writer::new(Format::V102, 8, 0);
    for (id, t) in [(1, "java.lang.Object"), (2, "com.app.Statics")] {
        w.utf8(id, t);
    }
    for id in 3..=6 {
        w.utf8(id, &format!("s{id}"));
    }
    w.load_class(1, 0x10, 1);
    w.load_class(2, 0x20, 2);
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.class_dump(0x10, 0, 0, 0, &[], &[]);
    let statics = [
        (3, BasicType::Object, 0x100u64.to_be_bytes().to_vec()),
        (4, BasicType::Int, vec![0; 4]),
        (5, BasicType::Long, vec![0; 8]),
        (6, BasicType::Byte, vec![0; 1]),
    ];
    w.class_dump(0x20, 0x10, 0, 0, &statics, &[]);
    w.instance(0x100, 0x10, &[]);
    w.end_segment();
    w.heap_dump_end();
    let bytes = w.finish();
    let (ix, _) = index_on(&bytes, 1);
    assert_eq!(ix.sizes.reference_size, 8);
    // 4 + 8 + 1 bytes of primitives and one 8-byte reference: 21, to 24.
    assert_eq!(ix.shallow[ix.node(0x20).unwrap() as usize], 24);
}

/// A directory is refused before anything is read (the passes read a dump more than once);
/// with a scratch directory the index's large arrays end in scratch files, within
/// `scratch_max_mb` (MiB), and the ids are searched there (no id map); in memory the rank map
/// alone maps ids and nodes, and the ids go. Either way, in one pass or two.
#[test]
fn a_directory_is_no_dump_and_scratch_files_hold_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut tm = Timings::default();
    let input = Input::File(dir.path());
    let Err(err) = build_index(&input, &Config::default(), Instant::now(), &mut tm) else {
        panic!("a directory was read as a dump");
    };
    assert!(err.to_string().contains("not a regular file"), "{err}");
    let bytes = segmented_dump(2, |_| false);
    // (Enough objects close together that the rank map pays.)
    let many = holder_dump(|w| {
        for k in 0..3000u64 {
            w.instance(0x1000 + 16 * k, 0x20, &0u64.to_be_bytes());
        }
    });
    for one_pass in [true, false] {
        let cfg = Config {
            scratch_dir: Some(dir.path().to_path_buf()),
            scratch_max_mb: 64,
            one_pass,
            ..Config::default()
        };
        let (ix, _, _) = build_index(&Input::Bytes(&bytes), &cfg, Instant::now(), &mut tm).unwrap();
        let in_files = [
            ix.ids.in_file(),
            ix.class_of.in_file(),
            ix.shallow.in_file(),
            ix.adj.in_file(),
            ix.edges.in_file(),
        ];
        assert_eq!(in_files, [true; 5], "one pass: {one_pass}");
        assert!(
            matches!(ix.id_map, index::IdMap::Search),
            "one pass: {one_pass}"
        );
        let cfg = Config {
            one_pass,
            ..Config::default()
        };
        let (ix, _, _) = build_index(&Input::Bytes(&many), &cfg, Instant::now(), &mut tm).unwrap();
        assert!(
            matches!(ix.id_map, index::IdMap::Rank(_)),
            "one pass: {one_pass}"
        );
        assert!(ix.ids.is_empty(), "one pass: {one_pass}");
        assert_eq!(ix.node(ix.id(3)), Some(3), "one pass: {one_pass}");
    }
}
