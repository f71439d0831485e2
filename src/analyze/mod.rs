//! The heap analyser: from a (full or stripped) HPROF dump to a leak report.
//!
//! Owns:
//! - [`index`]: classes, objects and the strong reference graph of a dump, in compact arrays,
//!   built in one or two streaming passes (the file is never held whole in memory, nor mapped
//!   whole);
//! - [`dominators`]: the dominator tree from a super-root over all GC roots, and retained sizes;
//! - [`paths`]: shortest strong paths from GC roots, and the names of their references;
//! - [`report`]: the leak detectors' findings grouped into KOOM's report schema, plus our
//!   `dominators[]`;
//! - [`trace`]: each reported path as a leak trace (where it starts in words, each object's
//!   status from its fields, the suspect references), and its text for a terminal;
//! - `arrays`: bitsets and prefix sums the others share.
//!
//! How: a dump that lists its strings and class dumps before any object (HotSpot's) is read
//! once: a prefix scan gathers the classes, then one pass both gathers the object ids and builds
//! the graph with edges kept as raw ids, which are mapped to nodes once every id is known. Any
//! other dump (ART's interleave classes and objects) is read twice: pass 1 gathers strings,
//! classes, roots and object ids; pass 2 builds the graph and runs the per-instance detectors.
//! Either way the passes cut the file at record boundaries and parse the parts side by side when
//! it is large, and the graph is the same. Then the BFS for shortest paths runs beside the dominators'
//! depth-first search, the forward graph is freed, the semi-NCA finishes, and a last pass parses
//! only the pieces of heap dump segments (runs of sub-records of about 64 KiB) that hold objects
//! on reported paths, to name their references.
//!
//! Invariants:
//! - Pure: no unsafe code, no network, nothing read from the analysing process (the report's
//!   `runningInfo` is whatever the caller passes in, taken from the incident).
//! - The file is never held whole: each parsing thread maps a window of [`WINDOW`] bytes at a
//!   time (through [`crate::mapped::Window`], the crate's one mapping of files; this module
//!   stays free of unsafe code) and unmaps it before mapping the next, so mapped pages add at
//!   most `WINDOW` per thread to the RSS; ranges that cannot be mapped (or are short) are read
//!   in chunks of [`CHUNK`] bytes. Memory is a constant number of bytes per object and per
//!   reference: about 50 per object and at most 12 per reference at the peak (the dominators'
//!   depth-first search beside the breadth-first one, the graph still held; the one pass's raw
//!   ids, 8 bytes per reference until they are mapped to nodes in the same memory, plus the
//!   mapped windows, stay below it).
//! - Bad or truncated input is an [`Error::Input`] naming the byte offset; nothing panics on it,
//!   and nothing is reported from a dump that did not parse to its end.
//! - `java.lang.ref.Reference.referent` is not a strong reference: objects only weakly, softly or
//!   phantom reachable are neither retained nor reported.
//! - Static fields act as roots for the dominator ranking: class objects and whatever dominates
//!   them (class loaders) are holders, never entries of `dominators[]`. For the paths, live
//!   classes are roots of their own: a path through a static field starts at its class.
#![forbid(unsafe_code)]

mod arrays;
pub mod dominators;
pub mod index;
pub mod paths;
mod rank;
pub mod report;
mod snapshot;
pub mod trace;

pub use report::{Report, Summary};

use crate::hprof::{self, Parser, Visitor};
use std::io::Read;
use std::path::Path;
use std::time::Instant;

/// Bytes read from the file at a time where it is read rather than mapped.
pub const CHUNK: usize = 4 << 20;

/// Bytes of the file mapped at a time by each parsing thread (see [`each_piece`]). The pages of
/// a window count in the RSS until it is unmapped: with 16 MiB windows they were a third of
/// the peak on a two-pass (ART) dump; 4 MiB cost no time measured.
pub const WINDOW: usize = 4 << 20;

/// Ranges shorter than this are read rather than mapped (mapping and unmapping cost more).
const MAP_MIN: usize = 1 << 20;

/// Thresholds and limits of the analysis. Defaults follow KOOM's and Probe's rules; the policy
/// maps its fields onto these.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// A Bitmap of at least this many pixels is reported (768 × 1366).
    pub bitmap_min_pixels: u64,
    /// A primitive or object array of at least this many bytes is reported (256 KB).
    pub array_min_bytes: u64,
    /// More live `android.view.Window` instances than this are reported.
    pub window_max_count: u64,
    /// More live `libcore.util.NativeAllocationRegistry` instances than this are reported.
    pub native_allocation_registry_max_count: u64,
    /// Groups kept in `dominators[]` (the generic top-N detector).
    pub top_n: usize,
    /// A top-N group is also reported as a leak when it retains at least this many bytes.
    pub large_retained_bytes: u64,
    /// Distinct paths (signatures) kept per leaking class.
    pub max_paths_per_class: usize,
    /// Suspects per class whose paths are computed (the others are counted).
    pub max_suspects_per_class: usize,
    /// Threads that parse parts of the file side by side (0: as many as the machine has, at
    /// most 4; 1: none; never more than 64).
    pub threads: usize,
    /// Inputs smaller than this are parsed by one thread.
    pub parallel_min_bytes: u64,
    /// Build the graph in one pass when the dump lists its strings and classes before its
    /// objects (HotSpot's do); `false` always takes two passes (the report is the same).
    pub one_pass: bool,
    /// Of a file that holds several heap dumps (the hprof agent's), the one to analyse, counted
    /// from 1; none: the last. The others are not read (see `snapshot`).
    pub snapshot: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bitmap_min_pixels: 768 * 1366,
            array_min_bytes: 256 * 1024,
            window_max_count: 50,
            native_allocation_registry_max_count: 50_000,
            top_n: 20,
            large_retained_bytes: 64 << 20,
            max_paths_per_class: 45,
            max_suspects_per_class: 1000,
            threads: 0,
            parallel_min_bytes: 32 << 20,
            one_pass: true,
            snapshot: None,
        }
    }
}

/// Why an analysis failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The dump is malformed or truncated at `offset`; no report was made.
    #[error("byte {offset}: {what}")]
    Input { offset: u64, what: String },
    /// The file could not be read.
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
}

impl From<hprof::Error> for Error {
    fn from(e: hprof::Error) -> Self {
        Error::Input {
            offset: e.offset,
            what: e.what,
        }
    }
}

/// Where the dump comes from: a file (read three times) or bytes already in memory (tests).
#[derive(Clone, Copy)]
pub enum Input<'a> {
    File(&'a Path),
    Bytes(&'a [u8]),
    /// One heap dump of an input that holds several ([`analyze`] makes it; see `snapshot`).
    Snapshot(Picked<'a>),
}

/// An input whose heap records in `skip` (the other snapshots) no pass sees.
#[derive(Clone, Copy)]
pub struct Picked<'a> {
    base: &'a Input<'a>,
    skip: &'a [(u64, u64)],
}

impl Input<'_> {
    /// One pass over the whole input. A file is read by a second thread into a few recycled
    /// buffers while this one parses (the copy out of the page cache overlaps the parsing).
    fn pass<V: Visitor>(&self, v: &mut V) -> Result<u64, Error> {
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
    /// unknown.
    fn pass_segments<V: Visitor>(
        &self,
        segments: &[index::Segment],
        ids: &[u64],
        v: &mut V,
    ) -> Result<(), Error> {
        if segments.is_empty() {
            return self.pass(v).map(|_| ());
        }
        // The pieces are those of the snapshot analysed.
        if let Input::Snapshot(s) = self {
            return s.base.pass_segments(segments, ids, v);
        }
        let pick: Vec<&index::Segment> = segments
            .iter()
            .filter(|s| {
                let i = ids.partition_point(|&x| x < s.min_id);
                i < ids.len() && ids[i] <= s.max_id
            })
            .collect();
        let mut p = Parser::new();
        // Each piece is fed as a record of its own: a made-up record header, then its
        // sub-records. The parser counts offsets as if the pieces followed one another after
        // the file header; `fix` maps one back to the file, given the piece's start and how
        // many bytes the parser had been fed before it.
        let fix = |e: hprof::Error, base: u64, fed: u64| Error::Input {
            offset: e.offset.saturating_sub(fed) + base,
            what: e.what,
        };
        let head = |s: &index::Segment| {
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
    /// Parse from the start until `v` stops the parser with [`index::PREFIX_STOP`] (or the input
    /// ends). Reads a megabyte at a time: the prefix is usually a small part of the file.
    fn prefix<V: Visitor>(&self, v: &mut V) -> Result<(), Error> {
        let mut p = Parser::new();
        let stopped = |e: &hprof::Error| e.what == index::PREFIX_STOP;
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

    fn len(&self) -> Result<u64, Error> {
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
    fn read_at(&self, f: Option<&std::fs::File>, at: u64, buf: &mut [u8]) -> Result<(), Error> {
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

    fn open(&self) -> Result<Option<std::fs::File>, Error> {
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

    /// Cut the record list into about `parts` ranges of whole records, each `[start, end)`.
    /// `None` if the input is small, has one heap dump record, or its record list does not add
    /// up (a pass in one piece then reports the problem).
    fn split(&self, parts: usize, min_bytes: u64) -> Option<Vec<(u64, u64)>> {
        let len = self.len().ok()?;
        if len < min_bytes.max(hprof::HEADER_LEN as u64 + 9) || parts < 2 {
            return None;
        }
        let f = self.open().ok()?;
        let mut heads = Heads::new(self, f.as_ref(), len);
        let mut starts = Vec::new();
        let mut pos = hprof::HEADER_LEN as u64;
        while pos < len {
            let h = heads.at(pos)?;
            hprof::tag::name(h[0])?;
            starts.push(pos);
            pos += 9 + hprof::read_u32(&h[5..]) as u64;
        }
        if pos != len || starts.len() < 2 {
            return None;
        }
        let mut cuts = vec![hprof::HEADER_LEN as u64];
        for k in 1..parts as u64 {
            let target = len * k / parts as u64;
            let i = starts.partition_point(|&s| s < target);
            if let Some(&c) = starts.get(i) {
                if c > *cuts.last()? {
                    cuts.push(c);
                }
            }
        }
        cuts.push(len);
        let ranges: Vec<(u64, u64)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
        (ranges.len() > 1).then_some(ranges)
    }

    /// Parse each range with its own parser and visitor, side by side. Each parser is fed the
    /// file header first, so its offsets are `HEADER_LEN + (offset - start)`.
    fn pass_parts<V: Visitor + Send>(
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

/// The 9-byte record heads of an input, for [`Input::split`]'s walk over its record list,
/// which reads little else: through a mapped window of [`WINDOW`] bytes where the file can be
/// mapped (only the pages holding heads are then brought in, and nothing is copied), else
/// through reads into a buffer.
struct Heads<'a, 'b> {
    input: &'a Input<'b>,
    f: Option<&'a std::fs::File>,
    len: u64,
    window: Option<crate::mapped::Window>,
    buf: Vec<u8>,
    /// Where the window's or the buffer's bytes start in the input, and how many there are.
    at: u64,
    n: usize,
    /// Where the head asked for before lies (the last record walked over ends where the next
    /// head is asked for).
    prev: u64,
}

impl<'a, 'b> Heads<'a, 'b> {
    fn new(input: &'a Input<'b>, f: Option<&'a std::fs::File>, len: u64) -> Self {
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
    fn at(&mut self, pos: u64) -> Option<[u8; 9]> {
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
            if let Ok(w) = crate::mapped::Window::map(f, pos, n) {
                (self.window, self.at, self.n) = (Some(w), pos, n);
                return Some(());
            }
        }
        // Read: 64 KiB at a time over the many small records at the front (strings, classes);
        // after a long record (a heap dump segment) a little, as the next one is likely long too.
        let want = if pos.saturating_sub(self.prev) > 64 << 10 {
            512
        } else {
            64 << 10
        };
        let n = (left as usize).min(want);
        self.buf.resize(n, 0);
        self.input.read_at(self.f, pos, &mut self.buf).ok()?;
        (self.at, self.n) = (pos, n);
        Some(())
    }
}

/// Hand bytes `[a, b)` of `f` to `eat` piece by piece: through mapped windows of [`WINDOW`]
/// bytes, each unmapped before the next is mapped (so at most one window's pages count in the
/// RSS), or, for a window that cannot be mapped or is shorter than [`MAP_MIN`], read into a
/// buffer [`CHUNK`] bytes at a time. Mapped, nothing is copied out of the page cache: pages
/// are mapped as the parser first reads them, and pages it never reads (inside long primitive
/// arrays) not at all.
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
            if let Ok(w) = crate::mapped::Window::map(f, at, n) {
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
    use std::sync::mpsc;
    const BUFFERS: usize = 3;
    let (full_tx, full_rx) = mpsc::sync_channel::<std::io::Result<Vec<u8>>>(BUFFERS);
    let (empty_tx, empty_rx) = mpsc::channel::<Vec<u8>>();
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

/// Timings of the phases, in milliseconds. When the dump is read in one pass, `scan_ms` covers
/// the whole pass including the edges' mapping to nodes, and `graph_ms` only their assembly.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    pub scan_ms: u64,
    pub graph_ms: u64,
    /// Shortest paths and the dominators' depth-first search, side by side.
    pub paths_ms: u64,
    pub dominators_ms: u64,
    pub report_ms: u64,
    pub total_ms: u64,
}

/// Analyse a dump. `running_info` is copied into the report as it is.
pub fn analyze(
    input: Input<'_>,
    cfg: &Config,
    running_info: serde_json::Value,
) -> Result<Report, Error> {
    let t0 = Instant::now();
    let mut tm = Timings::default();
    let spans = snapshot::find(&input)?;
    let (k, skip) = snapshot::choose(&spans, cfg.snapshot)?;
    let picked;
    let input = match skip.is_empty() {
        true => input,
        false => {
            picked = input;
            Input::Snapshot(Picked {
                base: &picked,
                skip: &skip,
            })
        }
    };
    let (ix, bytes, parts) = build_index(&input, cfg, t0, &mut tm)?;
    let mut rep = analyze_graph(ix, input, cfg, running_info, bytes, &parts, t0, tm)?;
    rep.analysis.snapshots = spans.len() as u64;
    rep.analysis.snapshot = if spans.is_empty() { 0 } else { k as u64 };
    Ok(rep)
}

/// Every object's id and shallow size as the analysis counts them, in id order, and the
/// conventions used (for cross-checks against other tools).
pub fn shallow_sizes(
    input: Input<'_>,
    cfg: &Config,
) -> Result<(index::Conventions, Vec<(u64, u32)>), Error> {
    let mut tm = Timings::default();
    let spans = snapshot::find(&input)?;
    let (_, skip) = snapshot::choose(&spans, cfg.snapshot)?;
    let base = input;
    let input = match skip.is_empty() {
        true => base,
        false => Input::Snapshot(Picked {
            base: &base,
            skip: &skip,
        }),
    };
    let (ix, _, _) = build_index(&input, cfg, Instant::now(), &mut tm)?;
    let sizes = ix.ids.iter().copied().zip(ix.shallow.iter().copied());
    Ok((ix.sizes, sizes.collect()))
}

/// The index of a dump with its graph and shallow sizes; its byte length and the parts it was
/// read in.
#[allow(clippy::type_complexity)]
fn build_index(
    input: &Input<'_>,
    cfg: &Config,
    t0: Instant,
    tm: &mut Timings,
) -> Result<(index::Index, u64, Option<Vec<(u64, u64)>>), Error> {
    if let Input::File(path) = input {
        // The passes read the file more than once: a pipe would be empty the second time.
        let meta = std::fs::metadata(path).map_err(|source| Error::Io {
            what: "cannot open",
            source,
        })?;
        if !meta.is_file() {
            return Err(Error::Io {
                what: "not a regular file",
                source: std::io::Error::other(
                    "the analyser reads a dump more than once; save a pipe or device to a file first",
                ),
            });
        }
    }
    let threads = threads(cfg);
    let mut parts = if threads > 1 {
        input.split(threads, cfg.parallel_min_bytes)
    } else {
        None
    };
    let limits = index::IndexLimits {
        bitmap_min_pixels: cfg.bitmap_min_pixels,
        array_min_bytes: cfg.array_min_bytes,
    };
    // One pass if the dump's classes all come first (HotSpot's do); otherwise, or if anything
    // went wrong there, the two passes below (which report problems at their exact offsets).
    // (A file that cannot be read is left to the two-pass path, which reports it as before.)
    let one = match input.len() {
        Err(_) => None,
        Ok(len) => {
            let whole = [(hprof::HEADER_LEN as u64, len)];
            let ps: &[(u64, u64)] = match &parts {
                Some(p) => p,
                None => &whole,
            };
            if cfg.one_pass && len > hprof::HEADER_LEN as u64 {
                one_pass(input, ps, limits)
            } else {
                None
            }
        }
    };
    let (mut ix, outs) = match one {
        Some(OnePassResult::Graph(ix, placed, edges)) => (*ix, Some((placed, edges))),
        Some(OnePassResult::Scanned(p1, arrays)) => (
            match arrays {
                Some(a) => p1.finish_then(move || a),
                None => p1.finish(),
            }
            .map_err(|what| Error::Input { offset: 0, what })?,
            None,
        ),
        None => (scan(input, &mut parts)?, None),
    };
    let bytes = input.len()?;
    tm.scan_ms = t0.elapsed().as_millis() as u64;

    let t = Instant::now();
    let watched = match outs {
        Some((placed, edges)) => index::apply_placed(&mut ix, placed, edges),
        None => two_pass_graph(input, &parts, &mut ix, limits)?,
    };
    index::flag_watched(&mut ix, watched);
    index::settle(&mut ix, limits.array_min_bytes);
    // The paths, the dominators and the report look no object up by id.
    ix.drop_id_map();
    ix.edges.shrink_to_fit();
    tm.graph_ms = t.elapsed().as_millis() as u64;
    Ok((ix, bytes, parts))
}

/// Most threads [`Config::threads`] asks for that are used (within [`index::MAX_WORKERS`]).
const MAX_THREADS: usize = 64;
const _: () = assert!(MAX_THREADS <= index::MAX_WORKERS);

/// The threads the analysis runs side by side (see [`Config::threads`]).
fn threads(cfg: &Config) -> usize {
    match cfg.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
        n => n.min(MAX_THREADS),
    }
}

/// What [`one_pass`] achieved.
enum OnePassResult {
    /// The skeleton index and pass 2's outputs, ready to apply (their edge lists joined).
    Graph(Box<index::Index>, Vec<index::Placed>, Vec<u32>),
    /// Classes (or strings) came late: only pass 1's work is usable, and the per-node arrays
    /// if they were already being made.
    Scanned(Box<index::Pass1>, Option<index::NodeArrays>),
}

/// Gather the prefix (everything before the first object), then run pass 1 and pass 2 at once
/// over `parts` with the prefix's class layouts. `None` if the input did not parse (the caller
/// starts over with two passes, which report the problem at its exact offset).
fn one_pass(
    input: &Input<'_>,
    parts: &[(u64, u64)],
    limits: index::IndexLimits,
) -> Option<OnePassResult> {
    let mut pre = index::Prefix::default();
    input.prefix(&mut pre).ok()?;
    let prefix_end = pre.end.unwrap_or(u64::MAX);
    let counts = pre.p1.counts();
    let skel = pre.p1.finish().ok()?;
    let any_late = std::sync::atomic::AtomicBool::new(false);
    let vs = parts
        .iter()
        .map(|&(a, _)| {
            let delta = a - hprof::HEADER_LEN as u64;
            index::OnePass::new(&skel, limits, delta, prefix_end, &any_late)
        })
        .collect();
    let vs = input.pass_parts(parts, vs).ok()?;
    let late = vs.iter().any(|v| v.late);
    let mut p1s = Vec::with_capacity(vs.len());
    let mut p2s = Vec::with_capacity(vs.len());
    let mut heads_asc = Vec::with_capacity(vs.len());
    for v in vs {
        heads_asc.push((v.head, v.ascending));
        p1s.push(v.p1);
        p2s.push(v.p2);
    }
    // How the k-th object of worker w finds its node. HotSpot lists the class dumps first, then
    // every other object by ascending id: the latter fill, in order, the nodes the former leave
    // free, so only the few class ids are kept. Otherwise each worker's ids are kept.
    let mut prev: Option<u64> = None;
    let mut tails_ok = true;
    for (v, p) in heads_asc.iter().zip(&p1s) {
        let ids = p.ids();
        if !v.1 {
            tails_ok = false;
        }
        if let (Some(&a), Some(b)) = (ids.get(v.0), prev) {
            if b >= a {
                tails_ok = false;
            }
        }
        if ids.len() > v.0 {
            prev = ids.last().copied();
        }
    }
    let mut tail_base = Vec::with_capacity(p1s.len());
    let mut acc = 0u64;
    for (v, p) in heads_asc.iter().zip(&p1s) {
        tail_base.push(acc.min(NONE_U32 as u64) as u32);
        acc += (p.ids().len() - v.0) as u64;
    }
    let (orders, heads): (Vec<Vec<u64>>, Vec<Vec<u64>>) = if late {
        (Vec::new(), Vec::new())
    } else if tails_ok {
        (
            Vec::new(),
            heads_asc
                .iter()
                .zip(&p1s)
                .map(|(v, p)| p.ids()[..v.0].to_vec())
                .collect(),
        )
    } else {
        (p1s.iter().map(|p| p.ids().to_vec()).collect(), Vec::new())
    };
    // The per-node arrays are allocated (their pages faulted in) on another thread from here
    // on, while the ids are merged and mapped: for at most as many nodes as there are ids.
    let nodes_at_most: usize = p1s.iter().map(|p| p.ids().len()).sum();
    std::thread::scope(|sc| {
        let arrays = (!late).then(|| sc.spawn(move || index::node_arrays(nodes_at_most)));
        let p1 = merge_pass1(p1s)?;
        let (s, n, c) = p1.counts();
        let arrays = match arrays {
            Some(a) if (s, n, c) == counts => a,
            // Strings or classes came after the prefix: pass 2 runs over the index of pass 1.
            a => return Some(OnePassResult::Scanned(Box::new(p1), a.map(joined))),
        };
        let ix = p1.finish_then(move || joined(arrays)).ok()?;
        one_pass_resolve(ix, p2s, orders, heads, tail_base)
    })
}

/// [`one_pass`] once the index is made: each worker's objects and edge targets to nodes.
fn one_pass_resolve(
    mut ix: index::Index,
    p2s: Vec<index::Pass2<'_>>,
    orders: Vec<Vec<u64>>,
    heads: Vec<Vec<u64>>,
    tail_base: Vec<u32>,
) -> Option<OnePassResult> {
    if ix.stats.duplicate_ids > 0 && orders.is_empty() {
        // The free-node numbering below assumes distinct ids.
        return None;
    }
    // Nodes of the class dumps listed first, sorted.
    let mut taken: Vec<u32> = heads
        .iter()
        .flatten()
        .map(|&id| ix.node(id).unwrap_or(NONE_U32))
        .collect();
    taken.sort_unstable();
    let raws: Vec<(index::Out, index::Raw)> = p2s
        .into_iter()
        .map(|p| p.finish_deferred())
        .collect::<Result<_, _>>()
        .ok()?;
    // Each worker looks its targets up, side by side; then, knowing how many each keeps, writes
    // its lists straight into its own stretch of the joined list (no worker's list is moved
    // or copied after it is written).
    let ixr = &ix;
    let looked: Vec<index::Looked> = std::thread::scope(|s| {
        let hs: Vec<_> = raws
            .into_iter()
            .map(|(out, raw)| s.spawn(move || index::lookup(ixr, out, raw)))
            .collect();
        hs.into_iter().map(joined).collect()
    });
    let rooms: Vec<usize> = looked.iter().map(|l| l.room(ixr)).collect();
    let total = rooms.iter().try_fold(0usize, |a, &r| a.checked_add(r))?;
    if total >= NONE_U32 as usize {
        // Too many references: the two passes report it.
        return None;
    }
    let mut edges = vec![0u32; total];
    let mut stretches = Vec::with_capacity(rooms.len());
    let mut bases = Vec::with_capacity(rooms.len());
    let mut rest: &mut [u32] = &mut edges;
    let mut base = 0u32;
    for &r in &rooms {
        let (a, b) = rest.split_at_mut(r);
        stretches.push(a);
        bases.push(base);
        rest = b;
        base += r as u32;
    }
    // Each worker also writes its objects into the node arrays, over a range of nodes of its
    // own: in a HotSpot dump, the nodes its tail fills (the first worker's range starts at 0
    // and takes the class dumps that fall in it); the objects outside it are left for
    // `apply_placed`. With each worker's ids kept instead, the first worker's range is every
    // node, and with duplicate ids (which only that way allows) none is, so that the object
    // listed first keeps its node.
    let n = ix.len() as u32;
    let starts: Vec<u32> = (0..rooms.len())
        .map(|w| match w {
            0 => 0,
            _ if !orders.is_empty() || heads.is_empty() => n,
            _ => free_node(&taken, tail_base[w]).min(n),
        })
        .collect();
    let (mut class_of, mut shallow, mut adj) = (
        std::mem::take(&mut ix.class_of),
        std::mem::take(&mut ix.shallow),
        std::mem::take(&mut ix.adj),
    );
    let ranges = if ix.stats.duplicate_ids > 0 {
        index::node_ranges(&mut [], &mut [], &mut [], &starts)
    } else {
        index::node_ranges(&mut class_of, &mut shallow, &mut adj, &starts)
    };
    let ixr = &ix;
    let placed: Vec<Option<index::Placed>> = std::thread::scope(|s| {
        let hs: Vec<_> = looked
            .into_iter()
            .zip(stretches)
            .zip(bases)
            .zip(ranges)
            .enumerate()
            .map(|(w, (((l, dst), base), range))| {
                let order = orders.get(w);
                let head = heads.get(w);
                let tail = tail_base.get(w).copied().unwrap_or(0);
                let taken = &taken;
                s.spawn(move || {
                    let mut cursor = FreeNodes::new(taken);
                    index::place(ixr, l, dst, base, range, |k| match (order, head) {
                        (Some(o), _) => o
                            .get(k as usize)
                            .and_then(|&id| ixr.node(id))
                            .unwrap_or(NONE_U32),
                        (None, Some(h)) if (k as usize) < h.len() => {
                            ixr.node(h[k as usize]).unwrap_or(NONE_U32)
                        }
                        (None, Some(h)) => cursor.get(tail.saturating_add(k - h.len() as u32)),
                        (None, None) => NONE_U32,
                    })
                })
            })
            .collect();
        hs.into_iter().map(joined).collect()
    });
    (ix.class_of, ix.shallow, ix.adj) = (class_of, shallow, adj);
    // (place gives None if an object's node was not found, which cannot happen: every id
    // met is indexed.)
    let placed: Vec<index::Placed> = placed.into_iter().collect::<Option<_>>()?;
    Some(OnePassResult::Graph(Box::new(ix), placed, edges))
}

const NONE_U32: u32 = index::NONE;

/// [`free_node`] for calls whose `g` mostly ascends: a cursor walks `taken` instead of a
/// binary search per call.
struct FreeNodes<'a> {
    taken: &'a [u32],
    g: u32,
    c: usize,
}

impl<'a> FreeNodes<'a> {
    fn new(taken: &'a [u32]) -> Self {
        FreeNodes { taken, g: 0, c: 0 }
    }
    fn get(&mut self, g: u32) -> u32 {
        if g < self.g {
            return free_node(self.taken, g);
        }
        self.g = g;
        while self.c < self.taken.len() && self.taken[self.c] as u64 - self.c as u64 <= g as u64 {
            self.c += 1;
        }
        g.saturating_add(self.c as u32)
    }
}

/// The `g`-th node (from 0) that is not in `taken` (sorted, distinct).
fn free_node(taken: &[u32], g: u32) -> u32 {
    // taken[i] - i free nodes come before taken[i]; it is nondecreasing in i.
    let (mut lo, mut hi) = (0usize, taken.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if taken[mid] as u64 - mid as u64 <= g as u64 {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    g.saturating_add(lo as u32)
}

/// Merge the workers' pass-1 gatherings (each sorts its ids first, side by side).
fn merge_pass1(mut vs: Vec<index::Pass1>) -> Option<index::Pass1> {
    std::thread::scope(|s| {
        for v in vs.iter_mut() {
            s.spawn(move || v.sort_ids());
        }
    });
    let mut it = vs.into_iter();
    let mut first = it.next()?;
    for v in it {
        first.merge(v);
    }
    Some(first)
}

/// Pass 1 (the two-pass way), in parts side by side if the file splits; any failure there is
/// re-run in one piece, which reports it at its exact offset.
/// `parts` becomes `None` in the latter case.
fn scan(input: &Input<'_>, parts: &mut Option<Vec<(u64, u64)>>) -> Result<index::Index, Error> {
    let mut merged = None;
    if let Some(parts) = parts.as_ref() {
        let vs = (0..parts.len()).map(|_| index::Pass1::default()).collect();
        if let Ok(vs) = input.pass_parts(parts, vs) {
            merged = merge_pass1(vs);
        }
    }
    let p1 = match merged {
        Some(p1) => p1,
        None => {
            *parts = None;
            let mut p1 = index::Pass1::default();
            input.pass(&mut p1)?;
            p1
        }
    };
    p1.finish().map_err(|what| Error::Input { offset: 0, what })
}

/// Pass 2 over the index pass 1 made: the graph, applied to the index; returns the watched
/// referents.
fn two_pass_graph(
    input: &Input<'_>,
    parts: &Option<Vec<(u64, u64)>>,
    ix: &mut index::Index,
    limits: index::IndexLimits,
) -> Result<Vec<(u64, u32)>, Error> {
    let shared = index::Shared::take(ix);
    let outs = graph(input, parts, ix, &shared, limits)?;
    index::apply(ix, outs, shared).map_err(|what| Error::Input { offset: 0, what })
}

/// Pass 2's workers over the parts of the file (or one over all of it), writing into `shared`;
/// their outputs, finished.
fn graph(
    input: &Input<'_>,
    parts: &Option<Vec<(u64, u64)>>,
    ix: &index::Index,
    shared: &index::Shared,
    limits: index::IndexLimits,
) -> Result<Vec<index::Out>, Error> {
    let outs = match parts {
        Some(parts) => {
            let vs = parts
                .iter()
                .zip(0u8..)
                .map(|(&(a, _), w)| {
                    index::Pass2::new(ix, shared, w, limits, a - hprof::HEADER_LEN as u64)
                })
                .collect();
            input.pass_parts(parts, vs)?
        }
        None => {
            let mut p2 = index::Pass2::new(ix, shared, 0, limits, 0);
            input.pass(&mut p2)?;
            vec![p2]
        }
    };
    outs.into_iter()
        .map(|p| p.finish())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|what| Error::Input { offset: 0, what })
}

/// Paths, dominators and the report, over the finished index.
#[allow(clippy::too_many_arguments)]
fn analyze_graph(
    mut ix: index::Index,
    input: Input<'_>,
    cfg: &Config,
    running_info: serde_json::Value,
    bytes: u64,
    parts: &Option<Vec<(u64, u64)>>,
    t0: Instant,
    mut tm: Timings,
) -> Result<Report, Error> {
    // Shortest paths (BFS) and the dominators' depth-first half both need the forward graph:
    // run them side by side, then free the graph before the dominators' second half.
    let t = Instant::now();
    // Classes are roots where the dump says so (sticky class roots, among `roots`) or where
    // their loader is reachable: the bootstrap loader (id 0, or a loader the dump does not
    // hold) always is. A class whose loader is garbage keeps neither the loader nor its
    // statics.
    let late: Vec<(u32, u32)> = ix
        .classes
        .iter()
        .filter(|c| c.node != index::NONE)
        .map(|c| {
            let loader = match c.loader_id {
                0 => None,
                id => ix.node(id),
            };
            (c.node, loader.unwrap_or(dominators::UNGATED))
        })
        .collect();
    let root_nodes: Vec<u32> = ix.roots.iter().map(|r| r.node).collect();
    let (bfs, prep) = std::thread::scope(|s| {
        let ixr = &ix;
        let h = s.spawn(|| paths::shortest(ixr, &ixr.roots, &late));
        let prep = dominators::prepare_gated(ixr, &root_nodes, &late);
        (joined(h), prep)
    });
    tm.paths_ms = t.elapsed().as_millis() as u64;
    ix.drop_edges();
    let t = Instant::now();
    let shallow = &ix.shallow;
    let threads = threads(cfg);
    let dom = dominators::finish(prep, |v| shallow[v as usize] as u64, threads);
    tm.dominators_ms = t.elapsed().as_millis() as u64;

    let t = Instant::now();
    let mut rep = report::build(&ix, &dom, &bfs, cfg, threads, input, running_info)?;
    rep.analysis.input_bytes = bytes;
    rep.analysis.parse_parts = parts.as_ref().map_or(1, |p| p.len() as u64);
    tm.report_ms = t.elapsed().as_millis() as u64;
    tm.total_ms = t0.elapsed().as_millis() as u64;
    rep.analysis.timings = tm;
    Ok(rep)
}

/// What a scoped thread returned; a panic there goes on in the joining thread.
pub(crate) fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

impl dominators::Graph for index::Index {
    fn nodes(&self) -> usize {
        self.len()
    }
    fn succ(&self, v: u32) -> &[u32] {
        index::Index::succ(self, v)
    }
    fn hint(&self, v: u32) {
        crate::mapped::prefetch_at(&self.adj, v as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hprof::writer::Writer;
    use crate::hprof::{sub, tag, BasicType, Format};
    use proptest::prelude::*;

    /// The index of a shared fixture, built as `analyze` builds it.
    fn fixture_index(rel: &str) -> index::Index {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/fixtures/hprof")
            .join(rel);
        let mut tm = Timings::default();
        let (ix, _, _) = build_index(
            &Input::File(&path),
            &Config::default(),
            Instant::now(),
            &mut tm,
        )
        .unwrap();
        ix
    }

    #[test]
    fn a_primitive_array_references_its_class() {
        for rel in [
            "jvm/openjdk_jdk11_04_x64.hprof",
            "android/leak_service_binder.hprof",
        ] {
            let ix = fixture_index(rel);
            let mut checked = 0;
            for n in 0..ix.len() as u32 {
                let c = ix.class_of[n as usize];
                if c < ix.prim_base || c >= ix.prim_base + 8 {
                    continue;
                }
                let class_id = ix.prim_class_ids[(c - ix.prim_base) as usize];
                let Some(class_node) = ix.node(class_id).filter(|_| class_id != 0) else {
                    continue;
                };
                // A class the dump lists as a root needs no edge (see `prim_edge_ids`).
                let rooted = ix.roots.iter().any(|r| r.node == class_node);
                assert!(
                    rooted || ix.succ(n).contains(&class_node),
                    "{rel}: the {} at node {n} has no edge to its class",
                    ix.classes[c as usize].name
                );
                checked += 1;
            }
            assert!(checked > 1000, "{rel}: {checked} arrays checked");
        }
    }

    /// The strings 1 to 5: `java.lang.Object`, `android.app.Activity`, `com.app.MainActivity`,
    /// `mDestroyed`, `mFinished`; the first three classes loaded as 0x10, 0x20 and 0x30.
    fn activity_strings(w: &mut Writer) {
        for (id, t) in [
            (1, "java.lang.Object"),
            (2, "android.app.Activity"),
            (3, "com.app.MainActivity"),
            (4, "mDestroyed"),
            (5, "mFinished"),
        ] {
            w.utf8(id, t);
        }
        w.load_class(1, 0x10, 1);
        w.load_class(2, 0x20, 2);
        w.load_class(3, 0x30, 3);
    }

    /// The class dump of `android.app.Activity` (id 0x20, super 0x10) with its fields
    /// `mDestroyed` and `mFinished` (names 4 and 5).
    fn activity_class(w: &mut Writer) {
        w.class_dump(
            0x20,
            0x10,
            0,
            10,
            &[],
            &[(4, BasicType::Boolean), (5, BasicType::Boolean)],
        );
    }

    /// An Android-style dump (1.0.3, 4-byte ids) built by hand:
    /// - class `com.app.MainActivity extends android.app.Activity` (fields mDestroyed, mFinished);
    /// - `com.app.Leaks.sActivity` (static) -> destroyed activity 0x100 -> byte[] 0x200 (stripped,
    ///   0xC3, 1000 bytes) and -> 0x999 (not in the dump);
    /// - a WeakReference 0x300 whose referent is another destroyed activity 0x110 (not a leak);
    /// - a thread-frame root on 0x300.
    fn android_dump() -> Vec<u8> {
        let mut w = Writer::new(Format::V103, 4, 0);
        let s = |w: &mut Writer, id: u64, t: &str| {
            w.utf8(id, t);
        };
        activity_strings(&mut w);
        for (id, t) in [
            (6, "mCache"),
            (7, "com.app.Leaks"),
            (8, "sActivity"),
            (9, "java.lang.ref.Reference"),
            (10, "referent"),
            (11, "java.lang.ref.WeakReference"),
            (12, "mMissing"),
            (13, "java.lang.Class"),
        ] {
            s(&mut w, id, t);
        }
        w.load_class(4, 0x40, 7);
        w.load_class(5, 0x50, 9);
        w.load_class(6, 0x60, 11);
        w.load_class(7, 0x70, 13);
        w.segment(tag::HEAP_DUMP_SEGMENT);
        w.class_dump(0x10, 0, 0, 8, &[], &[]);
        w.class_dump(0x70, 0x10, 0, 8, &[], &[]);
        activity_class(&mut w);
        w.class_dump(
            0x30,
            0x20,
            0,
            18,
            &[],
            &[(6, BasicType::Object), (12, BasicType::Object)],
        );
        w.class_dump(
            0x40,
            0x10,
            0,
            8,
            &[(8, BasicType::Object, 0x100u32.to_be_bytes().to_vec())],
            &[],
        );
        w.class_dump(0x50, 0x10, 0, 12, &[], &[(10, BasicType::Object)]);
        w.class_dump(0x60, 0x50, 0, 12, &[], &[]);
        // Activity 0x100: own fields first (mCache, mMissing), then Activity's (destroyed, finished).
        let mut v = Vec::new();
        v.extend_from_slice(&0x200u32.to_be_bytes());
        v.extend_from_slice(&0x999u32.to_be_bytes());
        v.extend_from_slice(&[1, 0]);
        w.instance(0x100, 0x30, &v);
        let mut v2 = Vec::new();
        v2.extend_from_slice(&0u32.to_be_bytes());
        v2.extend_from_slice(&0u32.to_be_bytes());
        v2.extend_from_slice(&[1, 1]);
        w.instance(0x110, 0x30, &v2);
        w.instance(0x300, 0x60, &0x110u32.to_be_bytes());
        w.primitive_array_nodata(0x200, BasicType::Byte, 1000);
        for c in [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70] {
            w.root(sub::ROOT_STICKY_CLASS, c);
        }
        w.root2(sub::ROOT_JAVA_FRAME, 0x300, 1, 0);
        w.root(sub::ROOT_UNREACHABLE, 0x110);
        w.end_segment();
        w.heap_dump_end();
        w.finish()
    }

    /// A HotSpot-style dump (1.0.2, 8-byte ids) of class `com.app.Holder extends
    /// java.lang.Object` (one reference field, `ref`), with the objects and roots `body` writes.
    pub(super) fn holder_dump(body: impl FnOnce(&mut Writer)) -> Vec<u8> {
        let mut w = Writer::new(Format::V102, 8, 0);
        w.utf8(1, "java.lang.Object");
        w.utf8(2, "com.app.Holder");
        w.utf8(3, "ref");
        w.load_class(1, 0x10, 1);
        w.load_class(2, 0x20, 2);
        w.segment(tag::HEAP_DUMP_SEGMENT);
        w.class_dump(0x10, 0, 0, 0, &[], &[]);
        w.class_dump(0x20, 0x10, 0, 8, &[], &[(3, BasicType::Object)]);
        body(&mut w);
        w.end_segment();
        w.heap_dump_end();
        w.finish()
    }

    /// A class named with 100 KB (a crafted dump): its 40 leaked, destroyed instances are
    /// reported under the name cut to `index::MAX_STRING_BYTES`, so the report stays small
    /// (the whole name stood in every leak, path and histogram row: 100 instances of a 100 KB
    /// name made an 11 MB report).
    #[test]
    fn a_huge_class_name_is_cut_in_the_report() {
        let long = format!("com.app.{}", "X".repeat(100_000));
        let mut w = Writer::new(Format::V102, 8, 0);
        for (id, t) in [
            (1, "java.lang.Object"),
            (2, "android.app.Activity"),
            (3, long.as_str()),
            (4, "mDestroyed"),
            (5, "mFinished"),
        ] {
            w.utf8(id, t);
        }
        w.load_class(1, 0x10, 1);
        w.load_class(2, 0x20, 2);
        w.load_class(3, 0x30, 3);
        w.segment(tag::HEAP_DUMP_SEGMENT);
        w.class_dump(0x10, 0, 0, 0, &[], &[]);
        activity_class(&mut w);
        w.class_dump(0x30, 0x20, 0, 10, &[], &[]);
        for i in 0..40u64 {
            w.instance(0x1000 + 16 * i, 0x30, &[1, 0]);
            w.root_jni_global(0x1000 + 16 * i, i + 1);
        }
        w.end_segment();
        w.heap_dump_end();
        let bytes = w.finish();
        let r = analyze(
            Input::Bytes(&bytes),
            &Config::default(),
            serde_json::Value::Null,
        )
        .unwrap();
        let json = serde_json::to_string(&r).unwrap();
        let cut = format!(
            "com.app.{}…[+{} bytes]",
            "X".repeat(index::MAX_STRING_BYTES - 8),
            long.len() - index::MAX_STRING_BYTES
        );
        assert!(json.contains(&cut), "the cut name is reported");
        assert!(json.len() < 200_000, "report of {} bytes", json.len());
    }

    /// A class is a root where the dump says so (a sticky class root) or where its loader is
    /// reachable; a class whose loader nothing holds keeps neither the loader nor its statics.
    #[test]
    fn a_class_whose_loader_is_unreachable_is_no_root() {
        let plugin_class = |w: &mut Writer, class: u64, loader: u64, held: u64| {
            let statics = [(3, BasicType::Object, held.to_be_bytes().to_vec())];
            w.class_dump(class, 0x10, loader, 8, &statics, &[]);
            w.instance(loader, 0x20, &0u64.to_be_bytes());
            w.instance(held, 0x20, &0u64.to_be_bytes());
        };
        let bytes = holder_dump(|w| {
            w.root(sub::ROOT_STICKY_CLASS, 0x10);
            w.root(sub::ROOT_STICKY_CLASS, 0x20);
            // Loaded by 0x500, which nothing holds.
            plugin_class(w, 0x40, 0x500, 0x600);
            // Loaded by 0x700, which a JNI global holds.
            plugin_class(w, 0x50, 0x700, 0x800);
            w.root_jni_global(0x700, 1);
        });
        let r = analyze(
            Input::Bytes(&bytes),
            &Config::default(),
            serde_json::Value::Null,
        )
        .unwrap();
        // 0x10 and 0x20 (sticky), 0x700 (JNI global), 0x50 (its loader is reachable) and the
        // 0x800 it holds; not 0x40, 0x500, 0x600.
        assert_eq!(r.analysis.reachable_objects, 5);
    }

    /// One pass keeps edge targets one word each while they fit (8-byte aligned ids below 32
    /// GiB); an id that does not fit (unaligned, or above) switches the list to two words
    /// without losing the targets kept so far.
    #[test]
    fn raw_targets_that_do_not_fit_one_word_give_the_same_graph() {
        let huge = 0x10_0000_0000u64;
        let bytes = holder_dump(|w| {
            w.instance(0x100, 0x20, &0x200u64.to_be_bytes());
            w.instance(0x200, 0x20, &0x20cu64.to_be_bytes());
            w.instance(0x20c, 0x20, &huge.to_be_bytes());
            w.instance(huge, 0x20, &0x100u64.to_be_bytes());
            w.root_jni_global(0x100, 1);
        });
        let (one, two, built) = one_and_two_passes(&bytes);
        assert!(built, "the one pass fell back to two");
        // 4 field edges, 4 class edges, Holder -> Object.
        assert_eq!(one["analysis"]["references"], 9);
        assert_eq!(one["analysis"]["missingReferences"], 0);
        assert_eq!(one["analysis"]["reachableObjects"], 6);
        assert_eq!(one, two);

        let mut raw = index::Raw::Narrow(Vec::new(), 3);
        let ids = [0x100u64, 0x7_ffff_fff8, 0x20c, huge, 0x100];
        for (k, &id) in ids.iter().enumerate() {
            raw.push(id);
            assert_eq!(
                matches!(raw, index::Raw::Narrow(..)),
                k < 2,
                "after {id:#x}"
            );
        }
        let index::Raw::Wide(v) = raw else {
            unreachable!()
        };
        let kept: Vec<u64> = v.iter().map(|&[hi, lo]| arrays::pair(hi, lo)).collect();
        assert_eq!(kept, ids);
    }

    /// Objects that two roots reach count in the bytes retained by the roots together: the
    /// same objects, reached from one root or from two, give the same total.
    #[test]
    fn reachable_bytes_count_objects_shared_by_roots() {
        let reach = |shared: bool| {
            let bytes = holder_dump(|w| {
                w.instance(0x100, 0x20, &0x300u64.to_be_bytes());
                let b_ref: u64 = if shared { 0x300 } else { 0 };
                w.instance(0x200, 0x20, &b_ref.to_be_bytes());
                w.instance(0x300, 0x20, &0u64.to_be_bytes());
                w.root_jni_global(0x100, 1);
                w.root_jni_global(0x200, 2);
            });
            let r = analyze(
                Input::Bytes(&bytes),
                &Config::default(),
                serde_json::Value::Null,
            )
            .unwrap();
            assert_eq!(r.analysis.reachable_objects, 5, "3 instances, 2 classes");
            r.analysis.reachable_bytes
        };
        let (alone, shared) = (reach(false), reach(true));
        assert!(alone > 0);
        assert_eq!(
            shared, alone,
            "0x300 (and the class) counted once either way"
        );
    }

    /// One object of [`cut_dump`], in file order: an instance of Holder and its reference, an
    /// object array and its elements, or a run of primitive arrays (no references) from a
    /// base id.
    #[derive(Clone, Debug)]
    enum CutObj {
        Inst(u64, u64),
        Arr(u64, Vec<u64>),
        Prims(u64, u16),
    }

    /// Object ids are drawn from a small set, so that some repeat; references from a larger one,
    /// so that some name no object (and 0 is null).
    fn cut_id(k: u64) -> u64 {
        0x1000 + 8 * k
    }
    fn cut_ref(k: u64) -> u64 {
        if k == 0 {
            0
        } else {
            cut_id(k - 1)
        }
    }

    fn cut_objs() -> impl Strategy<Value = Vec<CutObj>> {
        let obj = prop_oneof![
            4 => (0u64..48, 0u64..64).prop_map(|(i, r)| CutObj::Inst(cut_id(i), cut_ref(r))),
            2 => (0u64..48, proptest::collection::vec(0u64..64, 0..40)).prop_map(|(i, e)| {
                CutObj::Arr(cut_id(i), e.into_iter().map(cut_ref).collect())
            }),
            1 => (0u64..48, proptest::collection::vec(0u64..64, 900..2600)).prop_map(|(i, e)| {
                CutObj::Arr(cut_id(i), e.into_iter().map(cut_ref).collect())
            }),
            1 => (0u64..4, 1u16..1600).prop_map(|(b, n)| CutObj::Prims(b, n)),
        ];
        proptest::collection::vec(obj, 1..40)
    }

    fn prim_id(base: u64, j: u64) -> u64 {
        0x100_0000 + 8 * (base * 256 + j)
    }

    /// A Holder dump of `objs`, with a new heap dump segment every third object (the places
    /// where a parallel pass may cut the file).
    fn cut_dump(objs: &[CutObj]) -> Vec<u8> {
        holder_dump(|w| {
            for (i, o) in objs.iter().enumerate() {
                if i % 3 == 2 {
                    w.end_segment();
                }
                match o {
                    CutObj::Inst(id, r) => {
                        w.instance(*id, 0x20, &r.to_be_bytes());
                    }
                    CutObj::Arr(id, e) => {
                        w.object_array(*id, 0x10, e);
                    }
                    CutObj::Prims(b, n) => {
                        for j in 0..*n as u64 {
                            w.primitive_array(prim_id(*b, j), BasicType::Int, 1, &[0, 0, 0, 7]);
                        }
                    }
                }
            }
        })
    }

    /// The index two passes build over `bytes`, their parse cut into up to `threads` parts,
    /// and how many parts there were.
    fn two_pass_index(bytes: &[u8], threads: usize) -> (index::Index, usize) {
        let input = Input::Bytes(bytes);
        let mut parts = input.split(threads, 0);
        let mut ix = scan(&input, &mut parts).unwrap();
        let limits = index::IndexLimits {
            bitmap_min_pixels: 1,
            array_min_bytes: 1 << 40,
        };
        two_pass_graph(&input, &parts, &mut ix, limits).unwrap();
        (ix, parts.map_or(1, |p| p.len()))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]
        /// Two-pass workers hand each object to the shared node arrays once its references
        /// are looked up, the ones the dump lacks dropped a batch at a time (a batch can end
        /// inside an array, or after a long run of arrays without references). However the
        /// file is cut, each node has the class, size and references of the first object the
        /// file lists with its id, and the counts are those of every object listed.
        #[test]
        fn two_pass_workers_give_each_node_its_first_object(objs in cut_objs()) {
            use std::collections::{BTreeSet, HashMap};
            let bytes = cut_dump(&objs);
            // What the dump says, read plainly.
            let mut present: BTreeSet<u64> = [0x10, 0x20].into();
            let mut listed = vec![(0x10u64, vec![]), (0x20, vec![0x10])];
            for o in &objs {
                match o {
                    CutObj::Inst(id, r) => listed.push((*id, vec![0x20, *r])),
                    CutObj::Arr(id, e) => {
                        listed.push((*id, [&[0x10][..], e].concat()))
                    }
                    CutObj::Prims(b, n) => {
                        listed.extend((0..*n as u64).map(|j| (prim_id(*b, j), vec![])))
                    }
                }
            }
            present.extend(listed.iter().map(|o| o.0));
            let (mut edges, mut missing, mut first) = (0u64, 0u64, HashMap::new());
            for (id, targets) in &listed {
                for &t in targets.iter().filter(|&&t| t != 0) {
                    if present.contains(&t) {
                        edges += 1;
                    } else {
                        missing += 1;
                    }
                }
                first.entry(*id).or_insert(targets);
            }
            for threads in 1..=4 {
                let (ix, parts) = two_pass_index(&bytes, threads);
                if threads > 1 && objs.len() > 2 {
                    prop_assert!(parts > 1, "{} parts with {} threads", parts, threads);
                }
                prop_assert_eq!(ix.len(), present.len());
                prop_assert_eq!(ix.stats.edges, edges);
                prop_assert_eq!(ix.stats.missing_refs, missing);
                prop_assert_eq!(ix.edges.len() as u64, edges);
                prop_assert_eq!(ix.stats.duplicate_ids, (listed.len() - present.len()) as u64);
                for (n, &id) in ix.ids.iter().enumerate() {
                    let want: Vec<u64> = first[&id]
                        .iter()
                        .copied()
                        .filter(|t| present.contains(t))
                        .collect();
                    let got: Vec<u64> =
                        ix.succ(n as u32).iter().map(|&m| ix.ids[m as usize]).collect();
                    prop_assert_eq!(&got, &want, "node {} (id {:#x}), {} parts", n, id, parts);
                    let class = ix.classes[ix.class_of[n] as usize].name.as_str();
                    let (want_class, want_size) = match objs.iter().find(|o| match o {
                        CutObj::Inst(i, _) | CutObj::Arr(i, _) => *i == id,
                        CutObj::Prims(..) => false,
                    }) {
                        Some(CutObj::Inst(..)) => ("com.app.Holder", 8),
                        Some(CutObj::Arr(_, e)) => ("java.lang.Object", e.len() as u32 * 8 + 16),
                        _ if id >= 0x100_0000 => ("int[]", 4 + 16),
                        _ => ("java.lang.Class", 0),
                    };
                    prop_assert_eq!(class, want_class, "node {} (id {:#x})", n, id);
                    prop_assert_eq!(ix.shallow[n], want_size, "node {} (id {:#x})", n, id);
                }
            }
        }

        /// The one pass, over the same dumps cut into parts (ids out of order and repeated, so
        /// each worker keeps its ids; with repeats no worker writes the node arrays itself),
        /// builds the index two passes build. It gives up only where it must: a repeated id
        /// when the workers' ids are not kept.
        #[test]
        fn one_pass_workers_give_the_two_pass_index(objs in cut_objs()) {
            let bytes = cut_dump(&objs);
            let input = Input::Bytes(&bytes);
            let limits = index::IndexLimits {
                bitmap_min_pixels: 1,
                array_min_bytes: 1 << 40,
            };
            for threads in 1..=4 {
                let whole = vec![(hprof::HEADER_LEN as u64, bytes.len() as u64)];
                let parts = input.split(threads, 0).unwrap_or(whole);
                let (two, _) = two_pass_index(&bytes, threads);
                let Some(OnePassResult::Graph(ix, placed, edges)) =
                    one_pass(&input, &parts, limits)
                else {
                    prop_assert!(two.stats.duplicate_ids > 0, "{} parts: gave up", parts.len());
                    continue;
                };
                let mut one = *ix;
                index::apply_placed(&mut one, placed, edges);
                prop_assert_eq!(&one.ids, &two.ids);
                prop_assert_eq!(&one.class_of, &two.class_of, "{} parts", parts.len());
                prop_assert_eq!(&one.shallow, &two.shallow, "{} parts", parts.len());
                for n in 0..one.len() as u32 {
                    prop_assert_eq!(one.succ(n), two.succ(n), "node {}, {} parts", n, parts.len());
                }
                prop_assert_eq!(one.stats.edges, two.stats.edges);
                prop_assert_eq!(one.stats.missing_refs, two.stats.missing_refs);
                prop_assert_eq!(one.stats.duplicate_ids, two.stats.duplicate_ids);
                prop_assert_eq!(one.edges.len() as u64, one.stats.edges);
            }
        }
    }

    /// One-pass workers write the objects of their own range of nodes into the node arrays and
    /// leave the others (here the class dumps, listed first but with ids among the later
    /// workers' objects) to `apply_placed`; each writes its edge lists into its own stretch of
    /// the joined list. However many parts, the index is the one two passes build: the same
    /// classes, sizes and references, references to absent objects and classes dropped and
    /// counted, and no gap in the joined list.
    #[test]
    fn one_pass_workers_write_their_own_nodes() {
        let obj = |k: u64| 0x1000 + 16 * k;
        let (class_a, class_b) = (obj(1500) + 8, obj(2500) + 8);
        let mut w = Writer::new(Format::V102, 8, 0);
        w.utf8(1, "java.lang.Object");
        w.utf8(2, "com.app.Holder");
        w.utf8(3, "ref");
        w.load_class(1, class_a, 1);
        w.load_class(2, class_b, 2);
        w.class_dump(class_a, 0, 0, 0, &[], &[]);
        w.class_dump(class_b, class_a, 0, 8, &[], &[(3, BasicType::Object)]);
        w.root_jni_global(obj(0), 1);
        for k in 0..3000u64 {
            if k % 40 == 39 {
                w.end_segment();
            }
            match k % 4 {
                // Some references name no object (ids past the last).
                0 | 1 => w.instance(obj(k), class_b, &obj((k * 7 + 3) % 3100).to_be_bytes()),
                2 => w.object_array(obj(k), class_a, &[obj(k / 2), 0, obj(3050), class_b]),
                // A class the dump lacks: no edge to it.
                _ => w.instance(obj(k), 0x77, &[]),
            };
        }
        w.end_segment();
        w.heap_dump_end();
        let bytes = w.finish();
        let limits = index::IndexLimits {
            bitmap_min_pixels: 1,
            array_min_bytes: 1 << 40,
        };
        for threads in 2..=4 {
            let input = Input::Bytes(&bytes);
            let parts = input.split(threads, 0).unwrap();
            assert_eq!(parts.len(), threads);
            let Some(OnePassResult::Graph(ix, placed, edges)) = one_pass(&input, &parts, limits)
            else {
                panic!("{threads} parts: the one pass gave up");
            };
            let left: usize = placed.iter().map(|p| p.left()).sum();
            assert!(
                left >= 1,
                "{threads} parts: every object written by its worker"
            );
            let mut one = *ix;
            index::apply_placed(&mut one, placed, edges);
            let (two, _) = two_pass_index(&bytes, threads);
            assert_eq!(one.ids, two.ids);
            assert_eq!(one.class_of, two.class_of, "{threads} parts");
            assert_eq!(one.shallow, two.shallow, "{threads} parts");
            for n in 0..one.len() as u32 {
                assert_eq!(one.succ(n), two.succ(n), "node {n}, {threads} parts");
            }
            assert_eq!(one.stats.edges, two.stats.edges);
            assert_eq!(one.stats.missing_refs, two.stats.missing_refs);
            assert!(one.stats.missing_refs > 0);
            assert_eq!(one.edges.len() as u64, one.stats.edges);
        }
    }

    /// The reports of one pass and of two passes (without timings), and whether the one pass
    /// built the graph itself (it falls back to two passes on any trouble).
    fn one_and_two_passes(bytes: &[u8]) -> (serde_json::Value, serde_json::Value, bool) {
        let run = |one_pass| {
            let cfg = Config {
                one_pass,
                ..Config::default()
            };
            let mut r = analyze(Input::Bytes(bytes), &cfg, serde_json::Value::Null).unwrap();
            r.analysis.timings = Timings::default();
            serde_json::to_value(&r).unwrap()
        };
        let whole = [(hprof::HEADER_LEN as u64, bytes.len() as u64)];
        let limits = index::IndexLimits {
            bitmap_min_pixels: 1,
            array_min_bytes: 1,
        };
        let built = matches!(
            one_pass(&Input::Bytes(bytes), &whole, limits),
            Some(OnePassResult::Graph(..))
        );
        (run(true), run(false), built)
    }

    /// One pass keeps an instance's edge to its class as a flag on the entry, not as a raw id
    /// to look up, and maps its raw ids to nodes in their own memory, then moves them to make
    /// room for the class edges. The graph and report are those of two passes:
    /// - also for an instance whose class the dump lacks (that edge is missing, as before);
    /// - also when most instances hold no reference of their own, so that the class edges
    ///   outnumber the raw ids and the list must grow.
    #[test]
    fn implied_class_edges_give_the_two_pass_graph() {
        let small = holder_dump(|w| {
            w.instance(0x100, 0x20, &0x200u64.to_be_bytes());
            w.instance(0x200, 0x20, &0u64.to_be_bytes());
            w.instance(0x300, 0xABC, &[]);
            w.root_jni_global(0x100, 1);
            w.root_jni_global(0x300, 2);
        });
        let mostly_empty = holder_dump(|w| {
            w.instance(0x100, 0x20, &0x200u64.to_be_bytes());
            w.instance(0x108, 0x20, &0x999u64.to_be_bytes());
            for k in 0..50u64 {
                w.instance(0x200 + 8 * k, 0x20, &0u64.to_be_bytes());
            }
            w.root_jni_global(0x100, 1);
            w.root_jni_global(0x108, 2);
        });
        // small: Holder -> Object (super); 0x100 -> Holder, -> 0x200; 0x200 -> Holder; 0x300's
        // class is not in the dump. mostly_empty: Holder -> Object, 52 instances -> Holder,
        // 0x100 -> 0x200; 0x999 is not in the dump.
        for (bytes, references) in [(small, 4), (mostly_empty, 54)] {
            let (one, two, built) = one_and_two_passes(&bytes);
            assert!(built, "the one pass fell back to two");
            assert_eq!(one["analysis"]["references"], references);
            assert_eq!(one["analysis"]["missingReferences"], 1);
            assert_eq!(one, two);
        }
    }

    #[test]
    fn android_style_dump_by_hand() {
        let bytes = android_dump();
        let r = analyze(
            Input::Bytes(&bytes),
            &Config::default(),
            serde_json::Value::Null,
        )
        .unwrap();
        assert_eq!(r.analysis.id_size, 4);
        assert_eq!(r.analysis.missing_references, 1, "0x999 is not in the dump");
        assert_eq!(r.analysis.stripped_arrays, 1);
        assert_eq!(r.gc_paths.len(), 1, "{:#?}", r.gc_paths);
        let g = &r.gc_paths[0];
        assert_eq!(g.leak_reason, "Activity Leak");
        assert_eq!(g.class_name, "com.app.MainActivity");
        assert_eq!(g.gc_root, "System Class");
        assert_eq!(g.path[0].reference, "com.app.Leaks.sActivity");
        assert_eq!(g.path[0].reference_type, "STATIC_FIELD");
        // Android's layout (the dump has ROOT_UNREACHABLE): the instance's 18 bytes to 24, and
        // the stripped byte[1000] at its full size, 12-byte header + 1000 to 1016.
        assert_eq!(g.retained_size, 24 + 1016);
        assert_eq!(r.analysis.sizes.vm, "Android");
        assert_eq!(r.leak_objects.len(), 1);
        assert_eq!(r.leak_objects[0].object_id, 0x100);
        // 0x110 is only weakly reachable: no leak, and not retained by the reference.
        let weak = r
            .dominators
            .iter()
            .find(|d| d.class_name == "java.lang.ref.WeakReference")
            .expect("the weak reference is a top-level object");
        // Its class's instance size, 12, to 16.
        assert_eq!(weak.retained_size, 16);
        assert_eq!(weak.gc_root, "Java Frame");
    }

    /// A destroyed activity held by element 4321 of an `Object[]` of 5000 under a JNI global
    /// (element 4400 holds it too, element 7 holds another object), with ids of `id_size` bytes.
    fn array_path_dump(id_size: u32) -> Vec<u8> {
        let format = if id_size == 4 {
            Format::V103
        } else {
            Format::V102
        };
        let mut w = Writer::new(format, id_size, 0);
        activity_strings(&mut w);
        w.utf8(6, "java.lang.Object[]");
        w.load_class(4, 0x80, 6);
        w.segment(tag::HEAP_DUMP_SEGMENT);
        w.class_dump(0x10, 0, 0, 8, &[], &[]);
        activity_class(&mut w);
        w.class_dump(0x30, 0x20, 0, 10, &[], &[]);
        w.class_dump(0x80, 0x10, 0, 8, &[], &[]);
        w.instance(0x100, 0x30, &[1, 0]);
        w.instance(0x200, 0x10, &[]);
        let mut elems = vec![0u64; 5000];
        elems[7] = 0x200;
        elems[4321] = 0x100;
        elems[4400] = 0x100;
        w.object_array(0x500, 0x80, &elems);
        for c in [0x10, 0x20, 0x30, 0x80] {
            w.root(sub::ROOT_STICKY_CLASS, c);
        }
        w.root_jni_global(0x500, 0x900);
        w.end_segment();
        w.heap_dump_end();
        w.finish()
    }

    #[test]
    fn an_array_entry_on_a_path_names_its_first_index() {
        for id_size in [4, 8] {
            let bytes = array_path_dump(id_size);
            let r = analyze(
                Input::Bytes(&bytes),
                &Config::default(),
                serde_json::Value::Null,
            )
            .unwrap();
            assert_eq!(r.gc_paths.len(), 1, "{id_size}: {:#?}", r.gc_paths);
            let g = &r.gc_paths[0];
            assert_eq!(g.leak_reason, "Activity Leak");
            assert_eq!(g.gc_root, "JNI Global", "{id_size}");
            assert_eq!(g.path[0].reference, "java.lang.Object[][4321]", "{id_size}");
            assert_eq!(g.path[0].reference_type, "ARRAY_ENTRY");

            // Pass 3 alone, its input cut every 3 bytes (array elements arrive in pieces).
            let ix = scan(&Input::Bytes(&bytes), &mut None).unwrap();
            let mut p3 =
                paths::Pass3::new(&ix, vec![(0x500, 0x100), (0x500, 0x200), (0x500, 0x80)]);
            let mut p = Parser::new();
            for c in bytes.chunks(3) {
                p.feed(c, &mut p3).unwrap();
            }
            p.finish().unwrap();
            assert_eq!(p3.get(0x500, 0x100), paths::Ref::Element(4321), "{id_size}");
            assert_eq!(p3.get(0x500, 0x200), paths::Ref::Element(7), "{id_size}");
            assert_eq!(p3.get(0x500, 0x80), paths::Ref::ClassOf, "{id_size}");
        }
    }

    #[test]
    fn free_node_skips_the_taken_nodes() {
        for taken in [
            vec![],
            vec![0],
            vec![0, 1, 2],
            vec![1, 3, 4, 9],
            vec![5, 6, 20],
        ] {
            let free: Vec<u32> = (0..40).filter(|v| !taken.contains(v)).collect();
            let mut cur = FreeNodes::new(&taken);
            for (g, &want) in free.iter().enumerate().take(20) {
                assert_eq!(free_node(&taken, g as u32), want, "{taken:?} {g}");
                assert_eq!(cur.get(g as u32), want, "{taken:?} {g}");
            }
            assert_eq!(cur.get(2), free[2], "{taken:?}: back to an earlier one");
        }
    }

    #[test]
    fn truncated_and_corrupt_dumps_are_errors_with_offsets() {
        let bytes = android_dump();
        for cut in [10, 40, bytes.len() / 2, bytes.len() - 3] {
            let e = analyze(
                Input::Bytes(&bytes[..cut]),
                &Config::default(),
                serde_json::Value::Null,
            )
            .unwrap_err();
            assert!(matches!(e, Error::Input { .. }), "{e}");
            assert!(e.to_string().starts_with("byte "), "{e}");
        }
        let mut bad = bytes.clone();
        bad[crate::hprof::HEADER_LEN] = 0x77; // an unknown record tag
        let e = analyze(
            Input::Bytes(&bad),
            &Config::default(),
            serde_json::Value::Null,
        );
        assert!(e.is_err());
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
        let end = (crate::hprof::HEADER_LEN + WINDOW) as u64;
        let heads = |b: &[u8]| {
            let mut at = crate::hprof::HEADER_LEN as u64;
            let mut v = Vec::new();
            while at + 9 <= b.len() as u64 {
                v.push(at);
                at += 9 + crate::hprof::read_u32(&b[at as usize + 5..]) as u64;
            }
            v
        };
        let unshifted = heads(&split_test_dump(0));
        let before = unshifted.iter().rev().find(|&&h| h <= end - 4).unwrap();
        let bytes = split_test_dump((end - 4 - before) as usize);
        assert!(heads(&bytes).contains(&(end - 4)));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.hprof");
        std::fs::write(&path, &bytes).unwrap();
        for parts in [2, 3, 7] {
            let a = Input::File(&path).split(parts, 0);
            assert!(a.as_ref().is_some_and(|c| c.len() == parts), "{a:?}");
            assert_eq!(a, Input::Bytes(&bytes).split(parts, 0), "{parts} parts");
        }
        // Inside the end record, and inside the last segment.
        for cut in [bytes.len() - 1, bytes.len() - 10] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert_eq!(Input::File(&path).split(2, 0), None, "cut at {cut}");
            assert_eq!(
                Input::Bytes(&bytes[..cut]).split(2, 0),
                None,
                "cut at {cut}"
            );
        }
        // Anywhere: the same answer both ways.
        for cut in [WINDOW - 4, WINDOW + 5, 1 << 20, bytes.len() - 9] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            let a = Input::File(&path).split(3, 0);
            assert_eq!(a, Input::Bytes(&bytes[..cut]).split(3, 0), "cut at {cut}");
        }
    }
}
