//! How the record list is cut into parts that the passes parse side by side, in the snapshots'
//! walk over the record heads (`snapshot::find_and_cut`, the one walk): the cuts its definition
//! gives, the same whether the file is mapped or read.

use super::*;

/// Where each record starts, read straight from the bytes.
fn heads(b: &[u8]) -> Vec<u64> {
    let mut at = hprof::HEADER_LEN as u64;
    let mut v = Vec::new();
    while at + 9 <= b.len() as u64 {
        v.push(at);
        at += 9 + hprof::read_u32(&b[at as usize + 5..]) as u64;
    }
    v
}

/// Many short records (strings, then segments of a few KiB, as ART writes them) reaching
/// past a window's end, and a long segment now and then; the first string is `pad` bytes
/// long.
fn split_test_dump(pad: usize) -> Vec<u8> {
    let mut w = Writer::new(Format::V103, 4, 0);
    w.utf8(0x7fff_0000, &"p".repeat(pad));
    for id in 1..=60_000u64 {
        w.utf8(id, "a string of some forty bytes, give or take");
    }
    let mut id = 0x1000u64;
    for seg in 0..3_000u64 {
        for _ in 0..40 {
            w.primitive_array(id, BasicType::Byte, 100, &[7; 100]);
            id += 0x100;
        }
        if seg % 1000 == 999 {
            w.primitive_array(id, BasicType::Byte, 300_000, &[1; 300_000]);
            id += 0x100;
        }
        w.end_segment();
    }
    w.heap_dump_end();
    w.finish()
}

/// The record list is cut at the same places whether it is walked through mapped windows
/// (a file) or read from bytes, a record head straddling a window's end included. A list cut
/// short or running past the end is not cut at all.
#[test]
fn files_and_bytes_are_split_alike() {
    // The first window is mapped at the first record: shift the records (through the first
    // string's length) so that a head straddles its end.
    let end = (hprof::HEADER_LEN + WINDOW) as u64;
    let unshifted = heads(&split_test_dump(0));
    let before = unshifted.iter().rev().find(|&&h| h <= end - 4).unwrap();
    let bytes = split_test_dump((end - 4 - before) as usize);
    assert!(heads(&bytes).contains(&(end - 4)));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.hprof");
    std::fs::write(&path, &bytes).unwrap();
    for parts in [2, 3, 7] {
        let a = split(&Input::File(&path), parts, 0);
        assert!(a.as_ref().is_some_and(|c| c.len() == parts), "{a:?}");
        assert_eq!(a, split(&Input::Bytes(&bytes), parts, 0), "{parts} parts");
    }
    // Inside the end record, and inside the last segment.
    for cut in [bytes.len() - 1, bytes.len() - 10] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        assert_eq!(split(&Input::File(&path), 2, 0), None, "cut at {cut}");
        assert_eq!(
            split(&Input::Bytes(&bytes[..cut]), 2, 0),
            None,
            "cut at {cut}"
        );
    }
    // Anywhere: the same answer both ways.
    for cut in [WINDOW - 4, WINDOW + 5, 1 << 20, bytes.len() - 9] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let a = split(&Input::File(&path), 3, 0);
        assert_eq!(a, split(&Input::Bytes(&bytes[..cut]), 3, 0), "cut at {cut}");
    }
}

/// The analysis cuts the file in `snapshot::find_and_cut`'s walk over the record heads: the
/// cuts defined from the heads themselves (the first record at or after each
/// `len * k / parts`), and none for a file whose records do not end at its end, one with a
/// record of unknown tag, or one under `min_bytes`. The spans are those of `snapshot::find`.
#[test]
fn the_snapshots_walk_cuts_the_file_as_the_cuts_are_defined() {
    let bytes = split_test_dump(0);
    let heads = heads(&bytes);
    let defined = |len: u64, parts: u64| {
        let mut cuts = vec![hprof::HEADER_LEN as u64];
        for k in 1..parts {
            if let Some(&h) = heads.iter().find(|&&h| h >= len * k / parts) {
                if h > *cuts.last().unwrap() {
                    cuts.push(h);
                }
            }
        }
        cuts.push(len);
        cuts.windows(2).map(|w| (w[0], w[1])).collect::<Vec<_>>()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.hprof");
    std::fs::write(&path, &bytes).unwrap();
    let len = bytes.len() as u64;
    // (At 1,000 parts a record spans several of the points the cuts are sought at.)
    for parts in [2usize, 3, 4, 7, 64, 1000] {
        let want = Some(defined(len, parts as u64));
        for input in [Input::File(&path), Input::Bytes(&bytes)] {
            let (spans, cuts) = snapshot::find_and_cut(&input, parts, 0).unwrap();
            assert_eq!(spans, snapshot::find(&input).unwrap());
            assert_eq!(cuts, want, "{parts} parts");
        }
    }
    // One part, or a file under `min_bytes`: no cut.
    let input = Input::Bytes(&bytes);
    assert_eq!(snapshot::find_and_cut(&input, 1, 0).unwrap().1, None);
    assert_eq!(snapshot::find_and_cut(&input, 2, len + 1).unwrap().1, None);
    assert!(snapshot::find_and_cut(&input, 2, len).unwrap().1.is_some());
    // Cut short inside a record: no cut either way.
    let short = &bytes[..bytes.len() - 10];
    assert_eq!(
        snapshot::find_and_cut(&Input::Bytes(short), 2, 0)
            .unwrap()
            .1,
        None
    );
    // A record of unknown tag in the middle: the spans are still found, the file is not cut.
    let mut odd = bytes.clone();
    let mid = heads[heads.len() / 2] as usize;
    odd[mid] = 0x77;
    let (spans, cuts) = snapshot::find_and_cut(&Input::Bytes(&odd), 2, 0).unwrap();
    assert_eq!(spans, snapshot::find(&Input::Bytes(&bytes)).unwrap());
    assert_eq!(cuts, None);
}

/// From a cold page cache, the walk over the record heads (the snapshots' walk, which makes the
/// cuts) reads the pages that hold the heads past long records, not the records' pages between
/// them. Mapped, the fault at each such head waited for the pages around it too (the device's
/// readahead: 8 MiB on this machine's disk), so a dump of 1 MiB segments,
/// as HotSpot writes its heap, was read whole on one thread before any part of it was parsed.
/// (Where a head lies in pages an earlier readahead marked, the kernel may still read on, in
/// the background: here the first long record takes the walk past the front's readahead.)
#[test]
fn the_walks_past_long_records_read_their_heads_alone() {
    let mut w = Writer::new(Format::V103, 4, 0);
    w.utf8(1, "x");
    w.primitive_array(0x1000, BasicType::Byte, 16 << 20, &vec![3u8; 16 << 20]);
    w.end_segment();
    let mib = vec![3u8; 1 << 20];
    for k in 1..49u64 {
        w.primitive_array(0x1000 + (k << 25), BasicType::Byte, 1 << 20, &mib);
        w.end_segment();
    }
    w.heap_dump_end();
    let bytes = w.finish();
    // Beside the build: a temporary directory may be a tmpfs, which keeps every page.
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target");
    std::fs::create_dir_all(root).unwrap();
    let dir = tempfile::tempdir_in(root).unwrap();
    let path = dir.path().join("long.hprof");
    std::fs::write(&path, &bytes).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    sys::mapped::drop_cached(&f).unwrap();
    let left = sys::mapped::cached_bytes(&f, bytes.len()).unwrap();
    assert!(
        left < 64 << 10,
        "{left} bytes stay cached: the test needs a file system that drops them"
    );
    let cuts = snapshot::find_and_cut(&Input::File(&path), 2, 0).unwrap().1;
    assert_eq!(cuts.map(|c| c.len()), Some(2));
    let read = sys::mapped::cached_bytes(&f, bytes.len()).unwrap();
    assert!(
        read < bytes.len() / 4,
        "the walk read {read} of the file's {} bytes",
        bytes.len()
    );
}

/// `Cuts` fed record heads by hand: the first head at or after each `len * k / parts`, a head
/// past several of those points cut once; no cut for one part, a file under `min_bytes` or
/// without room for a record, one record, a list that does not end at the file's end, an
/// unknown tag, or heads that leave one range.
#[test]
fn cuts_from_heads_given_by_hand() {
    use crate::index::Cuts;
    let h = hprof::HEADER_LEN as u64;
    let utf8 = [hprof::tag::UTF8, 0, 0, 0, 0, 0, 0, 0, 0];
    let cut = |len: u64, parts: usize, heads: &[u64], end: u64| {
        let mut c = Cuts::new(len, parts, 0)?;
        for &p in heads {
            assert!(c.head(p, &utf8));
        }
        c.finish(end)
    };
    assert_eq!(
        cut(1000, 4, &[h, 300, 500, 510, 700], 1000),
        Some(vec![(h, 300), (300, 500), (500, 1000)])
    );
    assert_eq!(
        cut(1000, 10, &[h, 900], 1000),
        Some(vec![(h, 900), (900, 1000)])
    );
    // Two records are enough; one is not.
    assert_eq!(
        cut(1000, 2, &[h, 600], 1000),
        Some(vec![(h, 600), (600, 1000)])
    );
    assert_eq!(cut(1000, 4, &[h], 1000), None);
    assert_eq!(cut(1000, 4, &[h, 300], 999), None);
    assert_eq!(cut(1000, 2, &[h, 100], 1000), None);
    assert!(Cuts::new(1000, 1, 0).is_none());
    assert!(Cuts::new(1000, 2, 1001).is_none());
    assert!(Cuts::new(1000, 2, 1000).is_some());
    assert!(Cuts::new(h + 8, 2, 0).is_none());
    assert!(Cuts::new(h + 9, 2, 0).is_some());
    let mut c = Cuts::new(1000, 2, 0).unwrap();
    assert!(!c.head(h, &[0x77; 9]));
}
