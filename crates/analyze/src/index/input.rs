//! Where a dump is read from ([`Input`]: a file, bytes in memory, or one snapshot of a file that
//! holds several) and how the passes read it: whole (a helper thread reading ahead), from the
//! start until the visitor stops (the prefix), only chosen pieces of heap dump segments, or cut
//! at record boundaries into parts parsed side by side.
//!
//! Invariants:
//! - The file is never held whole: each parsing thread maps a window of [`WINDOW`] bytes at a
//!   time and unmaps it before mapping the next; ranges that cannot be mapped (or are short) are
//!   read in chunks of [`CHUNK`] bytes.
//! - Every error names the byte offset in the file (a part's or a piece's parser counts from its
//!   own start; its offsets are mapped back).
//! - A snapshot's passes see none of the heap records of the other snapshots.

use crate::{joined, snapshot, Error};
use hprof::{Parser, Visitor};
use std::io::Read;
use std::path::Path;

/// Bytes read from the file at a time where it is read rather than mapped.
pub const CHUNK: usize = 4 << 20;

/// Bytes of the file mapped at a time by each parsing thread (see `each_piece`). The pages of
/// a window count in the RSS until it is unmapped: with 16 MiB windows they were a third of
/// the peak on a two-pass (ART) dump; 4 MiB cost no time measured.
pub const WINDOW: usize = 4 << 20;

/// Ranges shorter than this are read rather than mapped (mapping and unmapping cost more).
const MAP_MIN: usize = 1 << 20;

/// Where the dump comes from: a file (read three times) or bytes already in memory (tests).
#[derive(Clone, Copy)]
pub enum Input<'a> {
    File(&'a Path),
    Bytes(&'a [u8]),
    /// One heap dump of an input that holds several ([`crate::analyze`] makes it; see `snapshot`).
    Snapshot(Picked<'a>),
}

/// An input whose heap records in `skip` (the other snapshots) no pass sees.
#[derive(Clone, Copy)]
pub struct Picked<'a> {
    pub(crate) base: &'a Input<'a>,
    pub(crate) skip: &'a [(u64, u64)],
}

impl Input<'_> {
    /// [`Input::pass`] for a visitor off the hot paths (the findings of a reduced report): it
    /// goes through the parser's instantiation that snapshots already use (an [`snapshot::Only`]
    /// over a `dyn Visitor`, here skipping nothing), so it adds no copy of the parser to the
    /// shipped library (issue 41: about 13 K of arm64 each), at a virtual call per record.
    pub(crate) fn pass_cold(&self, v: &mut dyn Visitor) -> Result<u64, Error> {
        self.pass(&mut snapshot::Only::new(v, &[], 0))
    }

    /// One pass over the whole input. A file is read by a second thread into a few recycled
    /// buffers while this one parses (the copy out of the page cache overlaps the parsing).
    pub(crate) fn pass<V: Visitor>(&self, v: &mut V) -> Result<u64, Error> {
        let mut p = Parser::new();
        match self {
            Input::Snapshot(s) => {
                let v: &mut dyn Visitor = v;
                return s.base.pass(&mut snapshot::Only::new(v, s.skip, 0));
            }
            Input::Bytes(b) => p.feed(b, v)?,
            Input::File(path) => {
                let f = std::fs::File::open(path).map_err(|source| Error::Io {
                    what: "cannot open",
                    source,
                })?;
                read_ahead(f, |chunk| p.feed(chunk, v).map_err(Error::from))?;
            }
        }
        p.finish()?;
        Ok(p.bytes_fed())
    }
}

impl Input<'_> {
    /// Parse only the header and the pieces of heap dump segments that may hold one of `ids`
    /// (sorted): those whose id range covers one. Falls back to a whole pass if the pieces are
    /// unknown. Off the hot paths (the report's last passes over a few pieces): like
    /// [`Input::pass_cold`], through the parser's instantiation for snapshots, so that each
    /// visitor adds no copy of the parser to the shipped library.
    pub(crate) fn pass_segments(
        &self,
        segments: &[crate::index::Segment],
        ids: &[u64],
        v: &mut dyn Visitor,
    ) -> Result<(), Error> {
        match self.pieces(segments, ids) {
            None => self.pass_cold(v).map(|_| ()),
            Some((base, pick)) => base.feed_pieces(&pick, v),
        }
    }

    /// [`Input::pass_segments`] with the pieces shared out in file order among `vs`, each
    /// visitor on a thread of its own (the first on this one) seeing a run of whole pieces of
    /// about equal bytes, the earliest run the first visitor's: if the pieces come to fewer
    /// than `min_bytes`, the first visitor sees them all here (as it sees a whole pass where
    /// the pieces are unknown). The error reported is the one earliest in the file.
    pub(crate) fn pass_segments_beside(
        &self,
        segments: &[crate::index::Segment],
        ids: &[u64],
        vs: &mut [&mut (dyn Visitor + Send)],
        min_bytes: u64,
    ) -> Result<(), Error> {
        let Some((first, rest)) = vs.split_first_mut() else {
            return Ok(());
        };
        let Some((base, pick)) = self.pieces(segments, ids) else {
            return self.pass_cold(*first).map(|_| ());
        };
        let total: u64 = pick.iter().map(|s| s.len).sum();
        if rest.is_empty() || pick.len() < 2 || total < min_bytes {
            return base.feed_pieces(&pick, *first);
        }
        // Runs of whole pieces, each ending once it holds its share of the bytes.
        let share = total.div_ceil(1 + rest.len() as u64);
        let mut runs: Vec<&[&crate::index::Segment]> = Vec::new();
        let (mut from, mut acc) = (0, 0);
        for (i, s) in pick.iter().enumerate() {
            acc += s.len;
            if acc >= share * (runs.len() as u64 + 1) && runs.len() < rest.len() {
                runs.push(&pick[from..=i]);
                from = i + 1;
            }
        }
        runs.push(&pick[from..]);
        let mut runs = runs.into_iter();
        let mine = runs.next().unwrap_or(&[]);
        std::thread::scope(|sc| {
            let hs: Vec<_> = rest
                .iter_mut()
                .zip(runs)
                .map(|(v, run)| sc.spawn(move || base.feed_pieces(run, *v)))
                .collect();
            let r = base.feed_pieces(mine, *first);
            let others = hs.into_iter().map(crate::joined);
            // (In file order: the first error met in a whole pass.)
            std::iter::once(r).chain(others).try_for_each(|r| r)
        })
    }

    /// The input whose pieces are read (a snapshot's file), and the pieces of `segments` that
    /// may hold one of `ids` (sorted): those whose id range covers one. `None` if the pieces
    /// are unknown.
    fn pieces<'s>(
        &'s self,
        segments: &'s [crate::index::Segment],
        ids: &[u64],
    ) -> Option<(&'s Input<'s>, Vec<&'s crate::index::Segment>)> {
        if segments.is_empty() {
            return None;
        }
        // The pieces are those of the snapshot analysed.
        if let Input::Snapshot(s) = self {
            return s.base.pieces(segments, ids);
        }
        let pick = segments
            .iter()
            .filter(|s| {
                let i = ids.partition_point(|&x| x < s.min_id);
                i < ids.len() && ids[i] <= s.max_id
            })
            .collect();
        Some((self, pick))
    }

    /// Parse the file's header, then `pick`, each piece as a record of its own.
    fn feed_pieces(
        &self,
        pick: &[&crate::index::Segment],
        v: &mut dyn Visitor,
    ) -> Result<(), Error> {
        let v = &mut snapshot::Only::new(v, &[], 0);
        let mut p = Parser::new();
        // Each piece is fed as a record of its own: a made-up record header, then its
        // sub-records. The parser counts offsets as if the pieces followed one another after
        // the file header; `fix` maps one back to the file, given the piece's start and how
        // many bytes the parser had been fed before it.
        let fix = |e: hprof::Error, base: u64, fed: u64| Error::Input {
            offset: e.offset.saturating_sub(fed) + base,
            what: e.what,
        };
        let head = |s: &crate::index::Segment| {
            let mut h = [0u8; 9];
            h[0] = s.tag;
            h[5..].copy_from_slice(&(s.len.min(u32::MAX as u64) as u32).to_be_bytes());
            h
        };
        match self {
            Input::Snapshot(_) => {}
            Input::Bytes(b) => {
                let h = b.get(..hprof::HEADER_LEN).unwrap_or(b);
                p.feed(h, v)?;
                for s in pick {
                    p.feed(&head(s), v).map_err(|e| fix(e, s.offset, 0))?;
                    let fed = p.bytes_fed();
                    let r = b
                        .get(s.offset as usize..(s.offset + s.len) as usize)
                        .unwrap_or(&[]);
                    p.feed(r, v).map_err(|e| fix(e, s.offset, fed))?;
                }
            }
            Input::File(path) => {
                use std::os::unix::fs::FileExt;
                let io = |what, source| Error::Io { what, source };
                let f = std::fs::File::open(path).map_err(|e| io("cannot open", e))?;
                let mut buf = vec![0u8; hprof::HEADER_LEN];
                f.read_exact_at(&mut buf, 0)
                    .map_err(|e| io("read failed", e))?;
                p.feed(&buf, v)?;
                for s in pick {
                    p.feed(&head(s), v).map_err(|e| fix(e, s.offset, 0))?;
                    let fed = p.bytes_fed();
                    each_piece(&f, s.offset, s.offset + s.len, |piece| {
                        p.feed(piece, v).map_err(|e| fix(e, s.offset, fed))
                    })?;
                }
            }
        }
        p.finish().map_err(|e| fix(e, 0, hprof::HEADER_LEN as u64))
    }
}

impl Input<'_> {
    /// Parse from the start until `v` stops the parser with [`crate::index::PREFIX_STOP`] (or the
    /// input ends). Reads a megabyte at a time: the prefix is usually a small part of the file.
    pub(crate) fn prefix<V: Visitor>(&self, v: &mut V) -> Result<(), Error> {
        let mut p = Parser::new();
        let stopped = |e: &hprof::Error| e.what == crate::index::PREFIX_STOP;
        let r = match self {
            Input::Snapshot(s) => {
                let v: &mut dyn Visitor = v;
                return s.base.prefix(&mut snapshot::Only::new(v, s.skip, 0));
            }
            Input::Bytes(b) => p.feed(b, v),
            Input::File(_) => {
                let f = self.open()?;
                let len = self.len()?;
                let mut buf = vec![0u8; 1 << 20];
                let mut at = 0u64;
                let mut r = Ok(());
                while at < len && r.is_ok() {
                    let n = ((len - at) as usize).min(buf.len());
                    self.read_at(f.as_ref(), at, &mut buf[..n])?;
                    r = p.feed(&buf[..n], v);
                    at += n as u64;
                }
                r
            }
        };
        match r {
            Err(e) if stopped(&e) => Ok(()),
            Err(e) => Err(e.into()),
            Ok(()) => p.finish().map_err(Error::from),
        }
    }

    pub(crate) fn len(&self) -> Result<u64, Error> {
        match self {
            Input::Snapshot(s) => s.base.len(),
            Input::Bytes(b) => Ok(b.len() as u64),
            Input::File(p) => std::fs::metadata(p)
                .map(|m| m.len())
                .map_err(|source| Error::Io {
                    what: "cannot stat",
                    source,
                }),
        }
    }

    /// Read `buf.len()` bytes at `at`.
    pub(crate) fn read_at(
        &self,
        f: Option<&std::fs::File>,
        at: u64,
        buf: &mut [u8],
    ) -> Result<(), Error> {
        use std::os::unix::fs::FileExt;
        match (self, f) {
            (Input::Snapshot(s), f) => s.base.read_at(f, at, buf),
            (Input::Bytes(b), _) => {
                let src =
                    b.get(at as usize..at as usize + buf.len())
                        .ok_or_else(|| Error::Input {
                            offset: at,
                            what: "past the end".into(),
                        })?;
                buf.copy_from_slice(src);
                Ok(())
            }
            (Input::File(_), Some(f)) => f.read_exact_at(buf, at).map_err(|source| Error::Io {
                what: "read failed",
                source,
            }),
            (Input::File(_), None) => Err(Error::Io {
                what: "read failed",
                source: std::io::Error::other("file not open"),
            }),
        }
    }

    pub(crate) fn open(&self) -> Result<Option<std::fs::File>, Error> {
        match self {
            Input::Snapshot(s) => s.base.open(),
            Input::Bytes(_) => Ok(None),
            Input::File(p) => std::fs::File::open(p)
                .map(Some)
                .map_err(|source| Error::Io {
                    what: "cannot open",
                    source,
                }),
        }
    }

    /// Parse each range with its own parser and visitor, side by side. Each parser is fed the
    /// file header first, so its offsets are `HEADER_LEN + (offset - start)`.
    pub(crate) fn pass_parts<V: Visitor + Send>(
        &self,
        parts: &[(u64, u64)],
        mut vs: Vec<V>,
    ) -> Result<Vec<V>, Error> {
        if let Input::Snapshot(s) = self {
            let ws: Vec<_> = parts
                .iter()
                .zip(vs.iter_mut())
                .map(|(&(a, _), v)| {
                    let v: &mut (dyn Visitor + Send) = v;
                    snapshot::Only::new(v, s.skip, a as i64 - hprof::HEADER_LEN as i64)
                })
                .collect();
            s.base.pass_parts(parts, ws)?;
            return Ok(vs);
        }
        let f = self.open()?;
        let mut header = [0u8; hprof::HEADER_LEN];
        self.read_at(f.as_ref(), 0, &mut header)?;
        let results: Vec<Result<(), Error>> = std::thread::scope(|s| {
            let hs: Vec<_> = parts
                .iter()
                .zip(vs.iter_mut())
                .map(|(&(a, b), v)| {
                    let f = f.as_ref();
                    let header = &header;
                    s.spawn(move || -> Result<(), Error> {
                        let mut p = Parser::new();
                        p.feed(header, v)?;
                        let fix = |e: hprof::Error| Error::Input {
                            offset: e.offset.saturating_sub(hprof::HEADER_LEN as u64) + a,
                            what: e.what,
                        };
                        match self {
                            Input::Snapshot(_) => {}
                            Input::Bytes(bytes) => {
                                p.feed(&bytes[a as usize..b as usize], v).map_err(fix)?
                            }
                            Input::File(_) => match f {
                                Some(f) => {
                                    each_piece(f, a, b, |piece| p.feed(piece, v).map_err(fix))?
                                }
                                None => self.read_at(None, a, &mut [])?,
                            },
                        }
                        p.finish().map_err(fix)
                    })
                })
                .collect();
            hs.into_iter().map(joined).collect()
        });
        for r in results {
            r?;
        }
        Ok(vs)
    }
}

/// Ranges `[start, end)` of a file's bytes, in file order (snapshots' spans, parts' ranges).
pub(crate) type Ranges = Vec<(u64, u64)>;

/// Where to cut a file's record list into about `parts` ranges of whole records, each
/// `[start, end)`, fed each record head in file order (by `snapshot::find_and_cut`'s walk): the
/// first record starting at or after each `len * k / parts`. No cut if the input is small, has
/// one record, or its record list does not add up (a pass in one piece then reports the
/// problem).
pub(crate) struct Cuts {
    len: u64,
    parts: u64,
    /// The next `k` whose cut is sought.
    k: u64,
    cuts: Vec<u64>,
    records: usize,
}

impl Cuts {
    /// `None` if there is nothing to cut: fewer than two parts asked for, or a file under
    /// `min_bytes` or without room for a record.
    pub(crate) fn new(len: u64, parts: usize, min_bytes: u64) -> Option<Cuts> {
        if len < min_bytes.max(hprof::HEADER_LEN as u64 + 9) || parts < 2 {
            return None;
        }
        Some(Cuts {
            len,
            parts: parts as u64,
            k: 1,
            cuts: vec![hprof::HEADER_LEN as u64],
            records: 0,
        })
    }

    /// The record whose head `h` is at `pos`; false if its tag is unknown (the file is then
    /// not cut).
    pub(crate) fn head(&mut self, pos: u64, h: &[u8; 9]) -> bool {
        if hprof::tag::name(h[0]).is_none() {
            return false;
        }
        self.records += 1;
        while self.k < self.parts && pos >= self.len * self.k / self.parts {
            if self.cuts.last().is_some_and(|&last| pos > last) {
                self.cuts.push(pos);
            }
            self.k += 1;
        }
        true
    }

    /// The ranges, once the walk ended at `pos`: `None` unless the records ended exactly at the
    /// file's end and there are two ranges or more.
    pub(crate) fn finish(mut self, pos: u64) -> Option<Vec<(u64, u64)>> {
        if pos != self.len || self.records < 2 {
            return None;
        }
        self.cuts.push(self.len);
        let ranges: Vec<(u64, u64)> = self.cuts.windows(2).map(|w| (w[0], w[1])).collect();
        (ranges.len() > 1).then_some(ranges)
    }
}

/// A jump between two record heads past which the second is read on its own ([`Heads::at`]).
const FAR: u64 = 64 << 10;

/// The 9-byte record heads of an input, for `snapshot::find_and_cut`'s walk over its record list,
/// which reads little else: through a mapped window of [`WINDOW`] bytes where the file can be
/// mapped (nothing is copied), else through reads into a buffer; a head past a long record by
/// a read of its own, either way.
pub(crate) struct Heads<'a, 'b> {
    input: &'a Input<'b>,
    f: Option<&'a std::fs::File>,
    len: u64,
    window: Option<sys::mapped::Window>,
    buf: Vec<u8>,
    /// Where the window's or the buffer's bytes start in the input, and how many there are.
    at: u64,
    n: usize,
    /// Where the head asked for before lies (the last record walked over ends where the next
    /// head is asked for).
    prev: u64,
}

impl<'a, 'b> Heads<'a, 'b> {
    pub(crate) fn new(input: &'a Input<'b>, f: Option<&'a std::fs::File>, len: u64) -> Self {
        Heads {
            input,
            f,
            len,
            window: None,
            buf: Vec::new(),
            at: 0,
            n: 0,
            prev: 0,
        }
    }

    /// The record head at `pos`; `None` if the input ends before its 9 bytes or cannot be read.
    pub(crate) fn at(&mut self, pos: u64) -> Option<[u8; 9]> {
        if pos.saturating_sub(self.prev) > FAR {
            // Past a long record (a heap dump segment), the head is read alone: the next one
            // is likely far too. Mapped, the fault at its page waited for the pages around it
            // too (the device's readahead: 8 MiB on this machine's disk): from a cold page
            // cache, a dump of 1 MiB segments (HotSpot's) was read whole, on one thread, before
            // any part of it was parsed.
            if pos.checked_add(9)? > self.len {
                return None;
            }
            let mut head = [0u8; 9];
            self.input.read_at(self.f, pos, &mut head).ok()?;
            self.prev = pos;
            return Some(head);
        }
        if pos < self.at || pos + 9 > self.at + self.n as u64 {
            self.fill(pos)?;
        }
        self.prev = pos;
        let i = (pos - self.at) as usize;
        let bytes = match &self.window {
            Some(w) => w.bytes(),
            None => &self.buf[..self.n],
        };
        bytes.get(i..i + 9)?.try_into().ok()
    }

    /// Bring in the bytes from `pos` on.
    fn fill(&mut self, pos: u64) -> Option<()> {
        let left = self.len - pos;
        if left < 9 {
            return None;
        }
        self.window = None;
        if let Some(f) = self.f {
            let n = (left as usize).min(WINDOW);
            if let Ok(w) = sys::mapped::Window::map(f, pos, n) {
                (self.window, self.at, self.n) = (Some(w), pos, n);
                return Some(());
            }
        }
        // Read 64 KiB at a time: the records here are short (strings, classes, ART's segments),
        // a head past a long one being read alone (`at`).
        let n = (left as usize).min(64 << 10);
        self.buf.resize(n, 0);
        self.input.read_at(self.f, pos, &mut self.buf).ok()?;
        (self.at, self.n) = (pos, n);
        Some(())
    }
}

/// Hand bytes `[a, b)` of `f` to `eat` piece by piece: through mapped windows of [`WINDOW`]
/// bytes, each unmapped before the next is mapped (so at most one window's pages count in the
/// RSS), or, for a window that cannot be mapped or is shorter than [`MAP_MIN`], read into a
/// buffer [`CHUNK`] bytes at a time. Mapped, nothing is copied out of the page cache, and each
/// window's pages are mapped at once when it is mapped (`Window::map_populated`): one call
/// instead of a fault for each page as the parser first reads it. Where the page cache holds
/// small pages (tmpfs here; a phone's f2fs maps a few neighbours per fault) those faults were
/// the pass's largest cost after the parsing: on a 712 MB dump in /dev/shm, 174 K faults, and
/// 313 ms of CPU to touch its pages that way against 116 ms populated. The price: the pages
/// inside long primitive arrays, which the parser skips, are mapped too (a stripped dump has
/// none).
fn each_piece(
    f: &std::fs::File,
    a: u64,
    b: u64,
    mut eat: impl FnMut(&[u8]) -> Result<(), Error>,
) -> Result<(), Error> {
    use std::os::unix::fs::FileExt;
    let mut buf = Vec::new();
    let mut at = a;
    while at < b {
        let n = ((b - at) as usize).min(WINDOW);
        if n >= MAP_MIN {
            if let Ok(w) = sys::mapped::Window::map_populated(f, at, n) {
                eat(w.bytes())?;
                at += n as u64;
                continue;
            }
        }
        let n = n.min(CHUNK);
        buf.resize(n, 0);
        f.read_exact_at(&mut buf, at).map_err(|source| Error::Io {
            what: "read failed",
            source,
        })?;
        eat(&buf)?;
        at += n as u64;
    }
    Ok(())
}

/// Read `f` to its end on a helper thread, handing each chunk to `eat` on this one.
fn read_ahead(
    mut f: std::fs::File,
    mut eat: impl FnMut(&[u8]) -> Result<(), Error>,
) -> Result<(), Error> {
    use sys::chan;
    const BUFFERS: usize = 3;
    let (full_tx, full_rx) = chan::sync_channel::<std::io::Result<Vec<u8>>>(BUFFERS);
    let (empty_tx, empty_rx) = chan::channel::<Vec<u8>>();
    for _ in 0..BUFFERS {
        let _ = empty_tx.send(vec![0u8; CHUNK]);
    }
    std::thread::scope(|s| {
        s.spawn(move || {
            while let Ok(mut buf) = empty_rx.recv() {
                buf.resize(CHUNK, 0);
                let mut filled = 0;
                while filled < CHUNK {
                    match f.read(&mut buf[filled..]) {
                        Ok(0) => break,
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            let _ = full_tx.send(Err(e));
                            return;
                        }
                    }
                }
                buf.truncate(filled);
                if full_tx.send(Ok(buf)).is_err() || filled == 0 {
                    return;
                }
            }
        });
        // Moved in, so that an early return drops both ends and the reader stops.
        let (full_rx, empty_tx) = (full_rx, empty_tx);
        for msg in full_rx.iter() {
            let buf = msg.map_err(|source| Error::Io {
                what: "read failed",
                source,
            })?;
            if buf.is_empty() {
                break;
            }
            eat(&buf)?;
            let _ = empty_tx.send(buf);
        }
        Ok(())
    })
}
