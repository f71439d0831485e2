//! Files that hold more than one heap dump.
//!
//! The JDK's hprof agent (`-agentlib:hprof=heap=dump`, Java 8 and before) writes a snapshot at
//! every request into the same file: HEAP_DUMP_SEGMENTs then HEAP_DUMP_END (or one HEAP_DUMP
//! record), then the next snapshot's. Merged, they make a heap that never existed (objects of
//! one, roots of both), so the analyser reads one: the last by default, or the one
//! [`crate::Config::snapshot`] names. [`find`] walks the top-level record heads (cheap:
//! a heap dump segment's contents are skipped over) and gives each snapshot's byte span;
//! [`Only`] hides the heap records of the other snapshots from a visitor. Strings, class loads
//! and other top-level records are shared by all snapshots and stay visible.
//!
//! Invariants: the spans are disjoint and in file order; [`Only`] looks a record's offset up
//! among them by binary search, so the work grows as records × log(snapshots).

use super::{Error, Input};
use crate::index::Ranges;
use hprof::{self, tag, Header, Record, Sub, Visitor};

/// Byte spans `[start, end)` of each snapshot's heap records, in file order: from its first
/// HEAP_DUMP or HEAP_DUMP_SEGMENT to the end of its HEAP_DUMP_END (or of its last heap record).
/// A file whose record list does not chain to its end gives the snapshots found before the
/// break (the passes report the break at its offset).
#[cfg(test)]
pub(super) fn find(input: &Input<'_>) -> Result<Vec<(u64, u64)>, Error> {
    Ok(find_and_cut(input, 1, 0)?.0)
}

/// [`find`], and the file cut into about `parts` ranges of whole records (`index::Cuts`;
/// `None` if it is not cut), from the same walk over the record heads. An ART dump's heap
/// comes in segments of a few KiB (42 K records in a 177 MB dump), and a second walk to cut
/// it took about 0.8 % of the analysis's CPU there, on its one thread.
pub(super) fn find_and_cut(
    input: &Input<'_>,
    parts: usize,
    min_bytes: u64,
) -> Result<(Ranges, Option<Ranges>), Error> {
    if let Input::File(p) = input {
        // A pipe would be read empty here; the passes say that it must be a file.
        if !std::fs::metadata(p).is_ok_and(|m| m.is_file()) {
            return Ok((Vec::new(), None));
        }
    }
    let len = input.len()?;
    let mut cuts = crate::index::Cuts::new(len, parts, min_bytes);
    let f = input.open()?;
    let mut heads = crate::index::Heads::new(input, f.as_ref(), len);
    let mut spans = Vec::new();
    // The open snapshot: its start, its end so far, and whether it holds a HEAP_DUMP record.
    let mut open: Option<(u64, u64, bool)> = None;
    let mut pos = hprof::HEADER_LEN as u64;
    while pos < len {
        let Some(h) = heads.at(pos) else { break };
        let end = pos + 9 + hprof::read_u32(&h[5..]) as u64;
        if let Some(c) = &mut cuts {
            // An unknown tag: the file is not cut (the spans are still found).
            if !c.head(pos, &h) {
                cuts = None;
            }
        }
        match h[0] {
            tag::HEAP_DUMP | tag::HEAP_DUMP_SEGMENT => {
                let whole = h[0] == tag::HEAP_DUMP;
                open = match open {
                    // A second HEAP_DUMP record is the next snapshot (format 1.0.1 has no end).
                    Some((s, e, true)) if whole => {
                        spans.push((s, e));
                        Some((pos, end, true))
                    }
                    Some((s, _, w)) => Some((s, end, w || whole)),
                    None => Some((pos, end, whole)),
                };
            }
            tag::HEAP_DUMP_END => {
                if let Some((s, _, _)) = open.take() {
                    spans.push((s, end));
                }
            }
            _ => {}
        }
        pos = end;
    }
    if let Some((s, e, _)) = open {
        spans.push((s, e));
    }
    Ok((spans, cuts.and_then(|c| c.finish(pos))))
}

/// A visitor that sees no heap record starting in `skip` (the other snapshots' spans, disjoint
/// and in file order, as [`choose`] gives them).
/// `delta` turns the parser's offsets into the file's (a part's parser is fed the file header,
/// then the part).
pub(super) struct Only<'a, V: Visitor + ?Sized> {
    pub inner: &'a mut V,
    pub skip: &'a [(u64, u64)],
    pub delta: i64,
    hidden: bool,
    /// Spans compared so far (what a test counts: the lookups' work).
    probes: u64,
}

impl<'a, V: Visitor + ?Sized> Only<'a, V> {
    pub fn new(inner: &'a mut V, skip: &'a [(u64, u64)], delta: i64) -> Self {
        Only {
            inner,
            skip,
            delta,
            hidden: false,
            probes: 0,
        }
    }

    /// Whether the file offset `at` lies in a skipped span: a binary search for the last span
    /// that starts at or before it (the spans are disjoint and in file order), so a file of K
    /// snapshots costs O(log K) per heap record, not O(K) (issue 39: 160,000 empty snapshots
    /// took 19.7 s).
    fn skipped(&mut self, at: u64) -> bool {
        let probes = &mut self.probes;
        let i = self.skip.partition_point(|&(s, _)| {
            *probes += 1;
            s <= at
        });
        i > 0 && at < self.skip[i - 1].1
    }
}

impl<V: Visitor + ?Sized> Visitor for Only<'_, V> {
    fn header(&mut self, h: &Header, raw: &[u8]) -> Result<(), String> {
        self.inner.header(h, raw)
    }
    fn record(&mut self, offset: u64, rec: &Record<'_>, raw: &[u8]) -> Result<(), String> {
        let at = offset.wrapping_add_signed(self.delta);
        if rec.tag == tag::HEAP_DUMP_END && self.skipped(at) {
            return Ok(());
        }
        self.inner.record(offset, rec, raw)
    }
    fn heap_dump_start(&mut self, offset: u64, t: u8, len: u32, raw: &[u8]) -> Result<(), String> {
        let at = offset.wrapping_add_signed(self.delta);
        self.hidden = self.skipped(at);
        if self.hidden {
            return Ok(());
        }
        self.inner.heap_dump_start(offset, t, len, raw)
    }
    fn sub(&mut self, offset: u64, s: &Sub<'_>, raw: &[u8]) -> Result<(), String> {
        if self.hidden {
            return Ok(());
        }
        self.inner.sub(offset, s, raw)
    }
    fn array_data(&mut self, data: &[u8]) -> Result<(), String> {
        if self.hidden {
            return Ok(());
        }
        self.inner.array_data(data)
    }
    fn array_end(&mut self) -> Result<(), String> {
        if self.hidden {
            return Ok(());
        }
        self.inner.array_end()
    }
    fn heap_dump_end(&mut self) -> Result<(), String> {
        if std::mem::take(&mut self.hidden) {
            return Ok(());
        }
        self.inner.heap_dump_end()
    }
}

/// Which snapshot to read of `spans` (in file order, as [`find`] gives them): `asked` (counted
/// from 1), or the last. The spans of the others are returned too, in file order.
pub(super) fn choose(
    spans: &[(u64, u64)],
    asked: Option<u32>,
) -> Result<(u32, Vec<(u64, u64)>), Error> {
    let n = spans.len() as u32;
    let k = match asked {
        None => n.max(1),
        Some(k) if k >= 1 && k <= n.max(1) => k,
        Some(k) => {
            return Err(Error::Input {
                offset: 0,
                what: format!(
                    "snapshot {k} asked for, but the file holds {n} (counted from 1: 1 to {})",
                    n.max(1)
                ),
            })
        }
    };
    let skip = spans
        .iter()
        .enumerate()
        .filter(|&(i, _)| i as u32 + 1 != k)
        .map(|(_, &s)| s)
        .collect();
    Ok((k, skip))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A visitor that counts what reaches it.
    #[derive(Default)]
    struct Count(u64);
    impl Visitor for Count {
        fn heap_dump_start(&mut self, _: u64, _: u8, _: u32, _: &[u8]) -> Result<(), String> {
            self.0 += 1;
            Ok(())
        }
    }

    /// 4,096 empty snapshots (a segment head and a HEAP_DUMP_END each, 18 bytes) before the one
    /// read: every heap record of a skipped snapshot is hidden, the last one's is not, and the
    /// lookups compare O(log K) spans per record, not O(K) (issue 39: 160,000 empty snapshots
    /// took 19.7 s, all in these lookups).
    #[test]
    fn skipped_snapshots_are_found_in_logarithmic_work() {
        const K: u64 = 4096;
        let spans: Vec<(u64, u64)> = (0..=K).map(|i| (31 + 18 * i, 31 + 18 * i + 18)).collect();
        let (k, skip) = choose(&spans, None).unwrap();
        assert_eq!(k as u64, K + 1);
        let mut seen = Count::default();
        let mut only = Only::new(&mut seen, &skip, 0);
        let end = Record {
            tag: tag::HEAP_DUMP_END,
            time: 0,
            body: &[],
            id_size: 8,
        };
        for &(s, _) in &spans {
            only.heap_dump_start(s, tag::HEAP_DUMP_SEGMENT, 0, &[])
                .unwrap();
            only.heap_dump_end().unwrap();
            only.record(s + 9, &end, &[]).unwrap();
        }
        let probes = only.probes;
        assert_eq!(seen.0, 1, "only the last snapshot's segment is seen");
        let records = 2 * (K + 1);
        // Each lookup compares one span at least.
        assert!(probes >= records, "{probes} span comparisons");
        let log = 64 - K.leading_zeros() as u64;
        assert!(
            probes <= records * (log + 2),
            "{probes} span comparisons for {records} heap records of {K} skipped snapshots"
        );
    }

    /// What reaches a visitor through [`Only`]: every header and non-heap record, and of the
    /// heap, the heads, sub-records, array elements and ends of the records not skipped, and the
    /// HEAP_DUMP_END records not skipped.
    #[derive(Default, Debug, PartialEq)]
    struct Seen {
        headers: u32,
        records: Vec<(u64, u8)>,
        starts: Vec<u64>,
        roots: Vec<u64>,
        data: usize,
        arrays: u32,
        ends: u32,
    }
    impl Visitor for Seen {
        fn header(&mut self, _: &Header, _: &[u8]) -> Result<(), String> {
            self.headers += 1;
            Ok(())
        }
        fn record(&mut self, offset: u64, rec: &Record<'_>, _: &[u8]) -> Result<(), String> {
            self.records.push((offset, rec.tag));
            Ok(())
        }
        fn heap_dump_start(&mut self, offset: u64, _: u8, _: u32, _: &[u8]) -> Result<(), String> {
            self.starts.push(offset);
            Ok(())
        }
        fn sub(&mut self, _: u64, s: &Sub<'_>, _: &[u8]) -> Result<(), String> {
            if let Sub::Root { id, .. } = s {
                self.roots.push(*id);
            }
            Ok(())
        }
        fn array_data(&mut self, data: &[u8]) -> Result<(), String> {
            self.data += data.len();
            Ok(())
        }
        fn array_end(&mut self) -> Result<(), String> {
            self.arrays += 1;
            Ok(())
        }
        fn heap_dump_end(&mut self) -> Result<(), String> {
            self.ends += 1;
            Ok(())
        }
    }

    /// Record `j` of [`five_snapshots`]: a string, a heap record (of the snapshot numbered) or
    /// a HEAP_DUMP_END (of the snapshot numbered).
    #[derive(Clone, Copy)]
    enum R {
        Utf8,
        Seg(usize),
        Whole(usize),
        End(usize),
    }
    use R::*;

    /// Five snapshots: segments closed by an end; a HEAP_DUMP record followed by another
    /// (format 1.0.1: the second is the next snapshot), which a segment and an end follow; a
    /// segment and a HEAP_DUMP (a snapshot that holds one), followed by another HEAP_DUMP, the
    /// last snapshot, left open before a string. Heap record `j` holds root `0x100 + j` and
    /// a byte array of `j + 1` bytes.
    const FIVE: [R; 13] = [
        Utf8,
        Seg(0),
        Seg(0),
        End(0),
        Utf8,
        Whole(1),
        Whole(2),
        Seg(2),
        End(2),
        Seg(3),
        Whole(3),
        Whole(4),
        Utf8,
    ];

    fn five_snapshots() -> (Vec<u8>, Vec<u64>) {
        let mut w = hprof::writer::Writer::new(hprof::Format::V102, 8, 0);
        for (j, r) in FIVE.into_iter().enumerate() {
            let j = j as u64;
            match r {
                Utf8 => {
                    w.utf8(j + 1, "s");
                }
                Seg(_) | Whole(_) => {
                    let t = match r {
                        Seg(_) => tag::HEAP_DUMP_SEGMENT,
                        _ => tag::HEAP_DUMP,
                    };
                    w.segment(t).root(hprof::sub::ROOT_UNKNOWN, 0x100 + j);
                    let data = vec![7; j as usize + 1];
                    w.primitive_array(0x1000 + j, hprof::BasicType::Byte, j as u32 + 1, &data);
                    w.end_segment();
                }
                End(_) => {
                    w.heap_dump_end();
                }
            }
        }
        let bytes = w.finish();
        let mut heads = Vec::new();
        let mut at = hprof::HEADER_LEN as u64;
        while at < bytes.len() as u64 {
            heads.push(at);
            at += 9 + hprof::read_u32(&bytes[at as usize + 5..]) as u64;
        }
        assert_eq!(heads.len(), FIVE.len());
        heads.push(at);
        (bytes, heads)
    }

    /// Each snapshot's span runs from its first heap record to the end of its HEAP_DUMP_END,
    /// or of its last heap record if it has none: a second HEAP_DUMP record starts the next
    /// snapshot, a segment after a HEAP_DUMP does not, and a snapshot left open ends at its last
    /// heap record, not at the file's end. The same from a file; none from what is not a file.
    #[test]
    fn each_snapshot_spans_its_heap_records_and_its_end() {
        let (bytes, h) = five_snapshots();
        let want = vec![
            (h[1], h[4]),
            (h[5], h[6]),
            (h[6], h[9]),
            (h[9], h[11]),
            (h[11], h[12]),
        ];
        assert_eq!(find(&Input::Bytes(&bytes)).unwrap(), want);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.hprof");
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(find(&Input::File(&path)).unwrap(), want);
        assert_eq!(find(&Input::File(dir.path())).unwrap(), []);
    }

    /// Whichever snapshot is read, a visitor behind [`Only`] sees the header, every string, its
    /// own heap records whole (heads, roots, array elements and ends) and its own HEAP_DUMP_END,
    /// and nothing of the other snapshots' heaps; a record that starts where a skipped span
    /// ends is seen.
    #[test]
    fn a_visitor_sees_only_the_chosen_snapshots_heap() {
        let (bytes, h) = five_snapshots();
        let spans = find(&Input::Bytes(&bytes)).unwrap();
        for k in 1..=5u32 {
            let (chosen, skip) = choose(&spans, Some(k)).unwrap();
            assert_eq!(chosen, k);
            let mut seen = Seen::default();
            let mut only = Only::new(&mut seen, &skip, 0);
            let mut p = hprof::Parser::new();
            p.feed(&bytes, &mut only).unwrap();
            p.finish().unwrap();
            let s = k as usize - 1;
            let mut want = Seen {
                headers: 1,
                ..Seen::default()
            };
            for (j, r) in FIVE.into_iter().enumerate() {
                match r {
                    Utf8 => want.records.push((h[j], tag::UTF8)),
                    End(n) if n == s => want.records.push((h[j], tag::HEAP_DUMP_END)),
                    Seg(n) | Whole(n) if n == s => {
                        want.starts.push(h[j]);
                        want.roots.push(0x100 + j as u64);
                        want.data += j + 1;
                        want.arrays += 1;
                        want.ends += 1;
                    }
                    _ => {}
                }
            }
            assert_eq!(seen, want, "snapshot {k}");
        }
    }

    /// The snapshot asked for (counted from 1) or the last, and the others' spans in file
    /// order; one asked for that the file does not hold is an error (a file of no snapshot
    /// counts as one).
    #[test]
    fn the_snapshot_asked_for_or_the_last_is_chosen() {
        let spans = [(10, 20), (20, 30), (40, 50)];
        assert_eq!(choose(&spans, None).unwrap(), (3, vec![(10, 20), (20, 30)]));
        assert_eq!(
            choose(&spans, Some(1)).unwrap(),
            (1, vec![(20, 30), (40, 50)])
        );
        assert_eq!(
            choose(&spans, Some(2)).unwrap(),
            (2, vec![(10, 20), (40, 50)])
        );
        assert_eq!(
            choose(&spans, Some(3)).unwrap(),
            (3, vec![(10, 20), (20, 30)])
        );
        assert_eq!(choose(&[], None).unwrap(), (1, vec![]));
        assert_eq!(choose(&[], Some(1)).unwrap(), (1, vec![]));
        for (spans, k, n) in [(&spans[..], 0, 3), (&spans[..], 4, 3), (&[][..], 2, 0)] {
            match choose(spans, Some(k)) {
                Err(Error::Input { offset: 0, what }) => assert_eq!(
                    what,
                    format!(
                        "snapshot {k} asked for, but the file holds {n} (counted from 1: 1 to {})",
                        n.max(1)
                    )
                ),
                other => panic!("{k} of {n}: {other:?}"),
            }
        }
    }
}
