//! The heap analyser: from a (full or stripped) HPROF dump to a leak report.
//!
//! Owns:
//! - [`index`]: classes, objects and the strong reference graph of a dump, in compact arrays,
//!   built in two streaming passes (the file is never held whole in memory, nor mapped);
//! - [`dominators`]: the dominator tree from a super-root over all GC roots, and retained sizes;
//! - [`paths`]: shortest strong paths from GC roots, and the names of their references;
//! - [`report`]: the leak detectors' findings grouped into KOOM's report schema, plus our
//!   `dominators[]`.
//!
//! Invariants:
//! - Pure: no unsafe code, no network, nothing read from the analysing process (the report's
//!   `runningInfo` is whatever the caller passes in, taken from the incident).
//! - Memory is a small constant number of bytes per object and per reference (see `index` and
//!   `dominators`); the input is read in chunks of [`CHUNK`] bytes, three times.
//! - Bad or truncated input is an [`Error::Input`] naming the byte offset; nothing panics on it.
//! - `java.lang.ref.Reference.referent` is not a strong reference.
#![forbid(unsafe_code)]

pub mod dominators;
pub mod index;
pub mod paths;
pub mod report;

pub use report::{Report, Summary};

use crate::hprof::{self, Parser, Visitor};
use std::io::Read;
use std::path::Path;
use std::time::Instant;

/// Bytes read from the file at a time.
pub const CHUNK: usize = 4 << 20;

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
}

impl Input<'_> {
    fn pass<V: Visitor>(&self, v: &mut V, buf: &mut Vec<u8>) -> Result<u64, Error> {
        let mut p = Parser::new();
        match self {
            Input::Bytes(b) => p.feed(b, v)?,
            Input::File(path) => {
                let mut f = std::fs::File::open(path).map_err(|source| Error::Io {
                    what: "cannot open",
                    source,
                })?;
                buf.resize(CHUNK, 0);
                loop {
                    let n = match f.read(buf) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(source) => {
                            return Err(Error::Io {
                                what: "read failed",
                                source,
                            })
                        }
                    };
                    p.feed(&buf[..n], v)?;
                }
            }
        }
        p.finish()?;
        Ok(p.bytes_fed())
    }
}

/// Timings of the phases, in milliseconds.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    pub scan_ms: u64,
    pub graph_ms: u64,
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
    let mut buf = Vec::new();
    let mut p1 = index::Pass1::default();
    let bytes = input.pass(&mut p1, &mut buf)?;
    let mut ix = p1.finish().map_err(|what| Error::Input { offset: 0, what })?;
    tm.scan_ms = t0.elapsed().as_millis() as u64;

    let t = Instant::now();
    let limits = index::IndexLimits {
        bitmap_min_pixels: cfg.bitmap_min_pixels,
        array_min_bytes: cfg.array_min_bytes,
    };
    let mut p2 = index::Pass2::new(&mut ix, limits);
    input.pass(&mut p2, &mut buf)?;
    let watched = p2.finish().map_err(|what| Error::Input { offset: 0, what })?;
    index::flag_watched(&mut ix, watched);
    ix.edges.shrink_to_fit();
    tm.graph_ms = t.elapsed().as_millis() as u64;

    let t = Instant::now();
    let late: Vec<u32> = ix
        .classes
        .iter()
        .filter(|c| c.node != index::NONE)
        .map(|c| c.node)
        .collect();
    let root_nodes: Vec<u32> = ix.roots.iter().map(|r| r.node).collect();
    let roots = ix.roots.clone();
    // Late roots: only the class objects the real roots do not reach. Which those are is known
    // after the dominator DFS; the BFS below uses the same list, filtered the same way.
    tm.paths_ms = t.elapsed().as_millis() as u64;

    let t = Instant::now();
    // BFS needs the forward graph, dominators free it: do a reachability-free BFS first, with
    // every class object as a low-priority late root (a class reached otherwise keeps its path).
    let bfs = paths::shortest(&ix, &roots, &late);
    tm.paths_ms += t.elapsed().as_millis() as u64;
    let t = Instant::now();
    let dom = dominators::compute(
        &mut ix,
        &|ix: &index::Index, v| ix.shallow[v as usize] as u64,
        &root_nodes,
        &late,
        |ix| ix.drop_edges(),
    );
    tm.dominators_ms = t.elapsed().as_millis() as u64;

    let t = Instant::now();
    let mut rep = report::build(&ix, &dom, &bfs, cfg, input, &mut buf, running_info)?;
    rep.analysis.input_bytes = bytes;
    tm.report_ms = t.elapsed().as_millis() as u64;
    tm.total_ms = t0.elapsed().as_millis() as u64;
    rep.analysis.timings = tm;
    Ok(rep)
}

impl dominators::Graph for index::Index {
    fn nodes(&self) -> usize {
        self.len()
    }
    fn succ(&self, v: u32) -> &[u32] {
        index::Index::succ(self, v)
    }
}
