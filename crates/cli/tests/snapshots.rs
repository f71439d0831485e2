//! A file that holds two heap dumps (the JDK 8 hprof agent writes one per request into the same
//! file) is analysed as one of them, never as their merge.
//!
//! The file is generated (`hprof::writer`): the hprof agent that wrote such files is gone from
//! Java 17, the only JVM on the machine, and two `jcmd GC.heap_dump` files concatenated are not a
//! valid HPROF (two file headers).

use analyze::{self, Config, Input};
use hprof::writer::Writer;
use hprof::{self, sub, tag, BasicType};

const OBJECT: u64 = 0x100;
const HOLDER: u64 = 0x200;
/// Only in the first snapshot.
const A: u64 = 0x1000;
/// In both, held by A in the first and by C in the second.
const B: u64 = 0x1100;
/// Only in the second snapshot.
const C: u64 = 0x2000;
const D: u64 = 0x2100;

fn snapshot(w: &mut Writer, objs: &[(u64, u64)], root: u64) {
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.class_dump(OBJECT, 0, 0, 0, &[], &[]);
    w.class_dump(HOLDER, OBJECT, 0, 8, &[], &[(11, BasicType::Object)]);
    w.root(sub::ROOT_STICKY_CLASS, OBJECT);
    w.root(sub::ROOT_STICKY_CLASS, HOLDER);
    w.root_jni_global(root, 0);
    for &(id, next) in objs {
        w.instance(id, HOLDER, &next.to_be_bytes());
    }
    w.end_segment();
    w.heap_dump_end();
}

fn two_snapshots() -> Vec<u8> {
    let mut w = Writer::new(hprof::Format::V102, 8, 0);
    w.utf8(1, "java.lang.Object")
        .utf8(2, "Holder")
        .utf8(11, "next");
    w.load_class(1, OBJECT, 1).load_class(2, HOLDER, 2);
    snapshot(&mut w, &[(A, B), (B, 0)], A);
    // Strings may come between snapshots; they are shared.
    w.utf8(12, "between");
    snapshot(&mut w, &[(C, B), (B, D), (D, 0)], C);
    w.finish()
}

fn ids(input: Input<'_>, cfg: &Config) -> Vec<u64> {
    let (_, sizes) = analyze::shallow_sizes(input, cfg).unwrap();
    sizes
        .into_iter()
        .map(|(id, _)| id)
        .filter(|&id| id >= A)
        .collect()
}

#[test]
fn one_snapshot_of_two_is_analysed_the_last_by_default() {
    let bytes = two_snapshots();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.hprof");
    std::fs::write(&path, &bytes).unwrap();
    let base = Config {
        threads: 1,
        ..Config::default()
    };
    // One pass and two, in one piece and in parts side by side, from memory and from a file.
    let configs = [
        base.clone(),
        Config {
            one_pass: false,
            ..base.clone()
        },
        Config {
            threads: 2,
            parallel_min_bytes: 0,
            ..base.clone()
        },
        Config {
            threads: 2,
            parallel_min_bytes: 0,
            one_pass: false,
            ..base.clone()
        },
    ];
    for cfg in &configs {
        for input in [Input::Bytes(&bytes), Input::File(&path)] {
            assert_eq!(ids(input, cfg), vec![B, C, D], "the last snapshot");
            let first = Config {
                snapshot: Some(1),
                ..cfg.clone()
            };
            assert_eq!(ids(input, &first), vec![A, B], "the first snapshot");
            let r = analyze::analyze(input, cfg, serde_json::Value::Null).unwrap();
            assert_eq!(r.analysis.snapshots, 2);
            assert_eq!(r.analysis.snapshot, 2);
            assert_eq!(r.analysis.duplicate_ids, 0, "the snapshots were merged");
            // Three objects and two classes, all held.
            assert_eq!(r.analysis.objects, 5);
            assert_eq!(r.analysis.reachable_objects, 5);
            let r = analyze::analyze(input, &first, serde_json::Value::Null).unwrap();
            assert_eq!((r.analysis.objects, r.analysis.snapshot), (4, 1));
            let third = Config {
                snapshot: Some(3),
                ..cfg.clone()
            };
            let e = analyze::analyze(input, &third, serde_json::Value::Null).unwrap_err();
            assert!(
                e.to_string().contains(
                    "snapshot 3 asked for, but the file holds 2 (counted from 1: 1 to 2)"
                ),
                "{e}"
            );
        }
    }
}

#[test]
fn a_file_of_one_snapshot_says_so() {
    let mut w = Writer::new(hprof::Format::V102, 8, 0);
    w.utf8(1, "java.lang.Object")
        .utf8(2, "Holder")
        .utf8(11, "next");
    w.load_class(1, OBJECT, 1).load_class(2, HOLDER, 2);
    snapshot(&mut w, &[(A, B), (B, 0)], A);
    let bytes = w.finish();
    let r = analyze::analyze(
        Input::Bytes(&bytes),
        &Config::default(),
        serde_json::Value::Null,
    )
    .unwrap();
    assert_eq!((r.analysis.snapshots, r.analysis.snapshot), (1, 1));
    assert_eq!(r.analysis.objects, 4);
}

mod common;

#[test]
fn the_hprof_agent_fixture_is_two_snapshots_read_one_at_a_time() {
    let path = common::fixture("jvm/sun_jdk6_31_hprofagent_compressedOops.hprof");
    let cfg = Config::default();
    for (k, objects) in [(None, 2886), (Some(1), 2833), (Some(2), 2886)] {
        let cfg = Config {
            snapshot: k,
            ..cfg.clone()
        };
        let r = analyze::analyze(Input::File(&path), &cfg, serde_json::Value::Null).unwrap();
        assert_eq!(r.analysis.snapshots, 2);
        assert_eq!(r.analysis.snapshot, k.unwrap_or(2) as u64);
        // Merged, the second snapshot's objects were 2,833 duplicates of the first's ids.
        assert_eq!(r.analysis.duplicate_ids, 0, "snapshot {k:?}");
        assert_eq!(r.analysis.objects, objects, "snapshot {k:?}");
    }
}

/// Many empty snapshots (`many_snapshots.py`'s shape: a HEAP_DUMP_SEGMENT of length 0 and a
/// HEAP_DUMP_END each) around the two real ones: each real one is still read alone, in one
/// piece and in parts side by side (the lookup of a record's snapshot is a binary search over
/// the skipped spans, issue 39).
#[test]
fn empty_snapshots_around_the_real_ones_are_skipped() {
    const K: usize = 3000;
    let two = two_snapshots();
    let empty = [tag::HEAP_DUMP_SEGMENT, 0, 0, 0, 0, 0, 0, 0, 0];
    let end = [tag::HEAP_DUMP_END, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut bytes = two[..hprof::HEADER_LEN].to_vec();
    for _ in 0..K {
        bytes.extend_from_slice(&empty);
        bytes.extend_from_slice(&end);
    }
    bytes.extend_from_slice(&two[hprof::HEADER_LEN..]);
    for _ in 0..K {
        bytes.extend_from_slice(&empty);
        bytes.extend_from_slice(&end);
    }
    for threads in [1, 2] {
        let cfg = Config {
            threads,
            parallel_min_bytes: 0,
            ..Config::default()
        };
        let at = |k: usize| Config {
            snapshot: Some(k as u32),
            ..cfg.clone()
        };
        assert_eq!(ids(Input::Bytes(&bytes), &at(K + 1)), vec![A, B]);
        assert_eq!(ids(Input::Bytes(&bytes), &at(K + 2)), vec![B, C, D]);
        assert_eq!(ids(Input::Bytes(&bytes), &at(K)), Vec::<u64>::new());
        let r = analyze::analyze(Input::Bytes(&bytes), &at(K + 2), serde_json::Value::Null);
        let r = r.unwrap();
        assert_eq!(r.analysis.snapshots, 2 * K as u64 + 2);
        assert_eq!((r.analysis.objects, r.analysis.duplicate_ids), (5, 0));
    }
}
