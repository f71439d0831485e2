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
//!   time (through [`sys::mapped::Window`], the crate's one mapping of files; this module
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
pub mod files;
pub mod index;
pub mod paths;
mod rank;
pub mod report;
mod snapshot;
pub mod trace;

pub use report::{Report, Summary};

use hprof::{self, Parser, Visitor};
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
            if let Ok(w) = sys::mapped::Window::map(f, pos, n) {
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
            if let Ok(w) = sys::mapped::Window::map(f, at, n) {
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
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
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
        sys::mapped::prefetch_at(&self.adj, v as usize);
    }
}

#[cfg(test)]
mod tests;
