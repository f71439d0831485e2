//! How a dump is read (`index::input`): a file read ahead whole, cut into parts, read in chosen
//! pieces, or only its prefix, gives a visitor what the same bytes in memory give it, at the
//! same file offsets (a record straddling a piece's end included), and an error names its byte
//! in the file.

use super::*;
use hprof::{Header, Record, Sub, Visitor};

/// What a visitor was handed, at file offsets (`delta` is added to the parser's: a part's parser
/// counts from the file header fed before the part): `(kind, offset, bytes)`, an array's
/// elements as their count and sum (they are cut where the input is). Fails at the sub-record
/// of object `fail_at`.
#[derive(Default)]
struct Trace {
    delta: u64,
    events: Vec<(char, u64, Vec<u8>)>,
    array: (u64, u64),
    fail_at: Option<u64>,
}

impl Trace {
    fn at(delta: u64) -> Trace {
        Trace {
            delta,
            ..Trace::default()
        }
    }
    fn failing_at(id: u64) -> Trace {
        Trace {
            fail_at: Some(id),
            ..Trace::default()
        }
    }
}

impl Visitor for Trace {
    fn header(&mut self, _: &Header, raw: &[u8]) -> Result<(), String> {
        self.events.push(('H', 0, raw.to_vec()));
        Ok(())
    }
    fn record(&mut self, offset: u64, _: &Record<'_>, raw: &[u8]) -> Result<(), String> {
        self.events.push(('R', offset + self.delta, raw.to_vec()));
        Ok(())
    }
    fn heap_dump_start(&mut self, offset: u64, _: u8, _: u32, raw: &[u8]) -> Result<(), String> {
        self.events.push(('D', offset + self.delta, raw.to_vec()));
        Ok(())
    }
    fn sub(&mut self, offset: u64, s: &Sub<'_>, raw: &[u8]) -> Result<(), String> {
        let id = match s {
            Sub::Instance { id, .. }
            | Sub::ObjectArray { id, .. }
            | Sub::PrimitiveArray { id, .. } => Some(*id),
            _ => None,
        };
        if id.is_some() && id == self.fail_at {
            return Err("the object the test fails at".into());
        }
        self.events.push(('S', offset + self.delta, raw.to_vec()));
        Ok(())
    }
    fn array_data(&mut self, data: &[u8]) -> Result<(), String> {
        self.array.0 += data.len() as u64;
        self.array.1 += data.iter().map(|&b| b as u64).sum::<u64>();
        Ok(())
    }
    fn array_end(&mut self) -> Result<(), String> {
        let (n, sum) = std::mem::take(&mut self.array);
        self.events.push(('E', n, sum.to_be_bytes().to_vec()));
        Ok(())
    }
    fn heap_dump_end(&mut self) -> Result<(), String> {
        self.events.push(('F', 0, Vec::new()));
        Ok(())
    }
}

/// The events of a whole pass over `input`, and the bytes it counted.
fn whole(input: &Input<'_>) -> (Vec<(char, u64, Vec<u8>)>, u64) {
    let mut t = Trace::default();
    let fed = input.pass(&mut t).unwrap();
    (t.events, fed)
}

/// The events of `input` parsed in `parts`, one after the other (the file header once).
fn in_parts(input: &Input<'_>, parts: &[(u64, u64)]) -> Vec<(char, u64, Vec<u8>)> {
    let vs = parts
        .iter()
        .map(|&(a, _)| Trace::at(a - hprof::HEADER_LEN as u64))
        .collect();
    let vs = input.pass_parts(parts, vs).unwrap();
    let mut events = Vec::new();
    for (k, v) in vs.into_iter().enumerate() {
        events.extend(v.events.into_iter().filter(|e| k == 0 || e.0 != 'H'));
    }
    events
}

/// The offset an error names (`Error::Input`).
fn offset_of(r: Result<(), Error>) -> u64 {
    match r {
        Err(Error::Input { offset, .. }) => offset,
        r => panic!("{r:?}"),
    }
}

/// `dir/name` holding `bytes`.
fn file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A dump that opens with a string record `pad` bytes long (after its id), then strings, a
/// heap dump segment holding arrays of `array` bytes and instances, and the end record.
fn padded_dump(pad: usize, array: usize) -> Vec<u8> {
    let mut w = Writer::new(Format::V103, 4, 0);
    w.utf8(0x7fff_0000, &"p".repeat(pad));
    activity_strings(&mut w);
    w.segment(tag::HEAP_DUMP_SEGMENT);
    activity_class_dumps(&mut w);
    let data: Vec<u8> = (0..array).map(|i| (i % 251) as u8).collect();
    for i in 0..3u64 {
        w.primitive_array(0x800 + i, BasicType::Byte, array as u32, &data);
        w.instance(0x1000 + 16 * i, 0x30, &[1, 0]);
        w.root_jni_global(0x1000 + 16 * i, i + 1);
    }
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// [`padded_dump`] of exactly `len` bytes.
fn dump_of_len(len: usize, array: usize) -> Vec<u8> {
    let bytes = padded_dump(len - padded_dump(0, array).len(), array);
    assert_eq!(bytes.len(), len);
    bytes
}

/// A file passed whole (read ahead in chunks of `CHUNK` bytes on a second thread) gives the
/// visitor what its bytes give, and counts every byte: a file of a few chunks, one that ends
/// exactly at a chunk's end, and one a byte past it.
#[test]
fn a_file_read_ahead_in_chunks_is_passed_as_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for len in [2 * CHUNK, 2 * CHUNK + 1, 2 * CHUNK + 12_345] {
        let bytes = dump_of_len(len, 2 << 20);
        let path = file(&dir, "d.hprof", &bytes);
        let (events, fed) = whole(&Input::File(&path));
        assert_eq!(fed, len as u64);
        assert_eq!((events, fed), whole(&Input::Bytes(&bytes)), "{len} bytes");
    }
}

/// A file that cannot be read (a directory opens but does not read) fails the pass with the
/// read's error rather than retrying it.
#[test]
fn a_read_that_fails_fails_the_pass() {
    let dir = tempfile::tempdir().unwrap();
    let r = Input::File(dir.path()).pass(&mut Trace::default());
    assert!(
        matches!(
            r,
            Err(Error::Io {
                what: "read failed",
                ..
            })
        ),
        "{r:?}"
    );
}

/// Parts of a file (each mapped a window of `WINDOW` bytes at a time, the rest of a window and
/// a short part read) give their visitors what the parts of its bytes give, at the file's
/// offsets: one part of a window and a byte, one short part, and one of more than a window.
#[test]
fn parts_of_a_file_are_parsed_as_parts_of_its_bytes() {
    let h = hprof::HEADER_LEN;
    // The first record (the padding string: a head, an id and the text) ends a window and a
    // byte after the header.
    let bytes = padded_dump(WINDOW + 1 - 13, 2 << 20);
    let (events, _) = whole(&Input::Bytes(&bytes));
    let heads: Vec<u64> = events
        .iter()
        .filter(|e| e.0 == 'R' || e.0 == 'D')
        .map(|e| e.1)
        .collect();
    assert_eq!(heads[1], (h + WINDOW + 1) as u64);
    let seg = *events.iter().find(|e| e.0 == 'D').map(|e| &e.1).unwrap();
    let len = bytes.len() as u64;
    let parts = [(h as u64, heads[1]), (heads[1], seg), (seg, len)];
    assert!(seg - heads[1] < 1 << 20 && len - seg > WINDOW as u64);
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "d.hprof", &bytes);
    assert_eq!(in_parts(&Input::File(&path), &parts), events);
    assert_eq!(in_parts(&Input::Bytes(&bytes), &parts), events);
}

/// The byte a whole pass over `bytes` names when its visitor fails at object `id`.
fn whole_error_at(bytes: &[u8], id: u64) -> u64 {
    let r = Input::Bytes(bytes).pass(&mut Trace::failing_at(id));
    offset_of(r.map(drop))
}

/// An error in a part (here a visitor's, at an object) names its byte in the file, as a whole
/// pass names it, whether the part is mapped, read or in memory.
#[test]
fn an_error_in_a_part_names_its_byte_in_the_file() {
    let h = hprof::HEADER_LEN as u64;
    let bytes = padded_dump(100, 2 << 20);
    let (events, _) = whole(&Input::Bytes(&bytes));
    let seg = *events.iter().find(|e| e.0 == 'D').map(|e| &e.1).unwrap();
    let len = bytes.len() as u64;
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "d.hprof", &bytes);
    // The second array, and the last instance (in the segment's last window).
    for id in [0x801, 0x1020] {
        let want = whole_error_at(&bytes, id);
        assert!(want > seg + 1000, "{want}");
        for input in [Input::File(&path), Input::Bytes(&bytes)] {
            let vs = vec![Trace::failing_at(id), Trace::failing_at(id)];
            let r = input.pass_parts(&[(h, seg), (seg, len)], vs).map(drop);
            assert_eq!(offset_of(r), want, "object {id:#x}");
        }
    }
}

/// An error in a chosen piece of a heap dump segment names its byte in the file, as a whole
/// pass names it, whether the piece is read from a file or from memory.
#[test]
fn an_error_in_a_piece_names_its_byte_in_the_file() {
    let bytes = padded_dump(100, 1000);
    let (events, _) = whole(&Input::Bytes(&bytes));
    let (seg, raw) = events
        .iter()
        .find(|e| e.0 == 'D')
        .map(|e| (e.1, &e.2))
        .unwrap();
    let piece = crate::index::Segment {
        offset: seg + 9,
        len: hprof::read_u32(&raw[5..]) as u64,
        tag: tag::HEAP_DUMP_SEGMENT,
        min_id: 0x10,
        max_id: 0x1020,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "d.hprof", &bytes);
    for id in [0x801, 0x1020] {
        let want = whole_error_at(&bytes, id);
        assert!(want > seg + 100, "{want}");
        for input in [Input::File(&path), Input::Bytes(&bytes)] {
            let pieces = std::slice::from_ref(&piece);
            let r = input.pass_segments(pieces, &[id], &mut Trace::failing_at(id));
            assert_eq!(offset_of(r), want, "object {id:#x}");
        }
    }
}

/// A dump whose strings come to a few MiB before its heap (`objects`: whether the heap holds
/// any object beside the class dumps), the last of them ending past the last whole MiB.
fn long_prefix_dump(objects: bool) -> Vec<u8> {
    let mut w = Writer::new(Format::V103, 4, 0);
    for k in 0..3u64 {
        w.utf8(
            0x7fff_0000 + k,
            &"s".repeat(1_000_000 + 77_777 * k as usize),
        );
    }
    activity_strings(&mut w);
    if objects {
        return destroyed_activities_heap(w, 3);
    }
    w.segment(tag::HEAP_DUMP_SEGMENT);
    activity_class_dumps(&mut w);
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// The prefix of a file (read a MiB at a time) is that of its bytes: the strings, classes and
/// class dumps, up to the first object, which lies past the last whole MiB; without objects,
/// the whole file.
#[test]
fn the_prefix_of_a_file_is_that_of_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for objects in [true, false] {
        let bytes = long_prefix_dump(objects);
        let path = file(&dir, "d.hprof", &bytes);
        let first = whole(&Input::Bytes(&bytes))
            .0
            .iter()
            .find(|e| e.0 == 'S' && e.2[0] == hprof::sub::INSTANCE_DUMP)
            .map(|e| e.1);
        assert_eq!(first.is_some(), objects);
        assert!(first.unwrap_or(u64::MAX) > 3 << 20 && bytes.len() % (1 << 20) != 0);
        for input in [Input::File(&path), Input::Bytes(&bytes)] {
            let mut pre = index::Prefix::default();
            input.prefix(&mut pre).unwrap();
            assert_eq!(pre.end, first, "objects: {objects}");
            assert_eq!(pre.p1.counts(), (8, 3, 3), "objects: {objects}");
        }
    }
}

/// A prefix that does not parse (a record of unknown tag among the strings) is an error at
/// that record, from a file or from memory.
#[test]
fn a_prefix_that_does_not_parse_is_an_error_at_its_byte() {
    let mut bytes = long_prefix_dump(true);
    let (events, _) = whole(&Input::Bytes(&bytes));
    let at = events.iter().filter(|e| e.0 == 'R').nth(3).unwrap().1;
    bytes[at as usize] = 0x77;
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "d.hprof", &bytes);
    for input in [Input::File(&path), Input::Bytes(&bytes)] {
        let mut pre = index::Prefix::default();
        assert_eq!(offset_of(input.prefix(&mut pre)), at);
    }
}

/// One snapshot of a file that holds two, parsed in parts of which one starts inside the other
/// snapshot: the parts' visitors see what a whole pass over the snapshot sees (none of the
/// other snapshot's heap records, its end record included).
#[test]
fn parts_of_a_snapshot_see_only_its_heap() {
    let mut w = Writer::new(Format::V103, 4, 0);
    activity_strings(&mut w);
    for first in [0x100u64, 0x180, 0x200] {
        w.segment(tag::HEAP_DUMP_SEGMENT);
        if first == 0x100 {
            activity_class_dumps(&mut w);
        }
        for i in 0..8 {
            w.instance(first + 8 * i, 0x30, &[1, 0]);
        }
        w.end_segment();
        if first != 0x100 {
            w.heap_dump_end();
        }
    }
    let bytes = w.finish();
    let base = Input::Bytes(&bytes);
    let spans = snapshot::find(&base).unwrap();
    assert_eq!(spans.len(), 2);
    let skip = [spans[0]];
    let input = Input::Snapshot(Picked {
        base: &base,
        skip: &skip,
    });
    let (events, _) = whole(&input);
    assert_eq!(events.iter().filter(|e| e.0 == 'S').count(), 8);
    // The second part starts at the first snapshot's second segment.
    let second = whole(&base)
        .0
        .iter()
        .filter(|e| e.0 == 'D')
        .nth(1)
        .unwrap()
        .1;
    let h = hprof::HEADER_LEN as u64;
    let parts = [(h, second), (second, bytes.len() as u64)];
    assert_eq!(in_parts(&input, &parts), events);
}

/// Pieces read side by side, in runs of whole pieces shared among visitors (the first run the
/// first visitor's), give each visitor its run's records in file order: together, what one
/// visitor reads in turn. The error reported is the one earliest in the file, at its byte.
#[test]
fn pieces_read_beside_are_those_read_in_turn() {
    let mut w = Writer::new(Format::V103, 4, 0);
    activity_strings(&mut w);
    w.segment(tag::HEAP_DUMP_SEGMENT);
    activity_class_dumps(&mut w);
    w.end_segment();
    let id = |s: u64, i: u64| 0x1000 + 0x1000 * s + 16 * i;
    for s in 0..9u64 {
        w.segment(tag::HEAP_DUMP_SEGMENT);
        for i in 0..3 + s {
            w.instance(id(s, i), 0x30, &[1, 0]);
        }
        w.end_segment();
    }
    w.heap_dump_end();
    let bytes = w.finish();
    // Each object segment a piece.
    let (events, _) = whole(&Input::Bytes(&bytes));
    let heads: Vec<(u64, &Vec<u8>)> = events
        .iter()
        .filter(|e| e.0 == 'D')
        .map(|e| (e.1, &e.2))
        .collect();
    assert_eq!(heads.len(), 10);
    let pieces: Vec<crate::index::Segment> = (heads[1..].iter().enumerate())
        .map(|(s, &(at, raw))| crate::index::Segment {
            offset: at + 9,
            len: hprof::read_u32(&raw[5..]) as u64,
            tag: tag::HEAP_DUMP_SEGMENT,
            min_id: id(s as u64, 0),
            max_id: id(s as u64, 2 + s as u64),
        })
        .collect();
    // Objects in pieces 1, 2, 5 and 8.
    let ids = [id(1, 0), id(2, 3), id(5, 1), id(5, 6), id(8, 10)];
    let records = |t: &Trace| -> Vec<(char, Vec<u8>)> {
        (t.events.iter())
            .filter(|e| e.0 != 'H')
            .map(|e| (e.0, e.2.clone()))
            .collect()
    };
    let beside = |input: &Input<'_>, ts: &mut [Trace], min_bytes| {
        let mut vs: Vec<&mut (dyn Visitor + Send)> = ts
            .iter_mut()
            .map(|t| t as &mut (dyn Visitor + Send))
            .collect();
        input.pass_segments_beside(&pieces, &ids, &mut vs, min_bytes)
    };
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "d.hprof", &bytes);
    for input in [Input::File(&path), Input::Bytes(&bytes)] {
        let mut one = Trace::default();
        input.pass_segments(&pieces, &ids, &mut one).unwrap();
        let want = records(&one);
        assert_eq!(want.iter().filter(|r| r.0 == 'D').count(), 4);
        for (k, min_bytes) in [(1, 0), (2, 0), (3, 0), (4, 0), (7, 0), (3, u64::MAX)] {
            let mut ts: Vec<Trace> = (0..k).map(|_| Trace::default()).collect();
            beside(&input, &mut ts, min_bytes).unwrap();
            let got: Vec<_> = ts.iter().flat_map(records).collect();
            assert_eq!(got, want, "{k} visitors, from {min_bytes} bytes");
            let busy = ts.iter().filter(|t| !records(t).is_empty()).count();
            let most = if min_bytes == 0 { k.min(4) } else { 1 };
            assert!(
                busy >= most.min(2) && busy <= most,
                "{k} visitors: {busy} read pieces"
            );
        }
        // Visitors failing at an object each (the first at piece 2's, the others at piece 8's,
        // which the second reads): both fail, and the error is the first's, where a whole
        // reading meets it; with the first not failing, the second's.
        for (fails, first) in [
            ([id(2, 3), id(8, 10), id(8, 10)], id(2, 3)),
            ([1, id(8, 10), id(8, 10)], id(8, 10)),
        ] {
            let want = offset_of(input.pass_segments(&pieces, &ids, &mut Trace::failing_at(first)));
            let mut ts: Vec<Trace> = fails.map(Trace::failing_at).into();
            assert_eq!(offset_of(beside(&input, &mut ts, 0)), want, "{fails:x?}");
        }
    }
}
