//! The heap analyser: from a (full or stripped) HPROF dump to a leak report.
//!
//! Owns:
//! - [`index`]: classes, objects and the strong reference graph of a dump, in compact arrays, built
//!   in one or two streaming passes (the file is never held whole in memory, nor mapped whole);
//! - [`dominators`]: the dominator tree from a super-root over all GC roots, and retained sizes;
//! - [`paths`]: shortest strong paths from GC roots, and the names of their references;
//! - [`report`]: the leak detectors' findings grouped into KOOM's report schema, plus our
//!   `dominators[]`;
//! - [`trace`]: each reported path as a leak trace (where it starts in words, each object's status
//!   from its fields, the suspect references), and its text for a terminal;
//! - `arrays`: bitsets and prefix sums the others share.
//!
//! How: a dump that lists its strings and class dumps before any object (HotSpot's) is read once: a
//! prefix scan gathers the classes, then one pass both gathers the object ids and builds the graph
//! with edges kept as raw ids, which are mapped to nodes once every id is known. Any other dump
//! (ART's interleave classes and objects) is read twice: pass 1 gathers strings, classes, roots and
//! object ids; pass 2 builds the graph and runs the per-instance detectors. Either way the passes
//! cut the file at record boundaries and parse the parts side by side when it is large, and the
//! graph is the same. Then the BFS for shortest paths runs beside the dominators' depth-first
//! search, the forward graph is freed, the semi-NCA finishes, the BFS's parents are read off its
//! queues for the objects whose paths are reported, and a last pass parses only the
//! pieces of heap dump segments (runs of sub-records of about 64 KiB) that hold objects on reported
//! paths, to name their references.
//!
//! Invariants:
//! - Pure: no unsafe code, no network, nothing read from the analysing process (the report's
//!   `runningInfo` is whatever the caller passes in, taken from the incident).
//! - The file is never held whole: each parsing thread maps a window of [`WINDOW`] bytes at a time
//!   (through [`sys::mapped::Window`], the crate's one mapping of files; this module stays free of
//!   unsafe code) and unmaps it before mapping the next, so mapped pages add at most `WINDOW` per
//!   thread to the RSS; ranges that cannot be mapped (or are short) are read in chunks of [`CHUNK`]
//!   bytes. Memory is a constant number of bytes per object and per reference: about 50 per object
//!   and at most 12 per reference at the peak (the dominators' depth-first search beside the
//!   breadth-first one, the graph still held; the one pass's raw ids, 8 bytes per reference until
//!   they are mapped to nodes in the same memory, plus the mapped windows, stay below it).
//! - Bad or truncated input is an [`Error::Input`] naming the byte offset; nothing panics on it,
//!   and nothing is reported from a dump that did not parse to its end.
//! - `java.lang.ref.Reference.referent` is not a strong reference: objects only weakly, softly or
//!   phantom reachable are neither retained nor reported.
//! - Static fields act as roots for the dominator ranking: class objects and whatever dominates
//!   them (class loaders) are holders, never entries of `dominators[]`. For the paths, live classes
//!   are roots of their own: a path through a static field starts at its class.
#![forbid(unsafe_code)]

mod arrays;
pub mod budget;
mod column;
pub mod dominators;
pub mod files;
mod held;
pub mod index;
pub mod library;
mod own;
pub mod paths;
mod rank;
pub mod renamed;
pub mod renames;
pub mod report;
mod snapshot;
pub mod trace;

pub use index::{Input, Picked, CHUNK, WINDOW};
pub use report::{Report, Summary};

#[cfg(test)]
use hprof::Parser;
#[cfg(test)]
use index::build_index;
use index::{build_index_cut, threads};
#[cfg(test)]
use index::{free_node, one_pass, scan, two_pass_graph, FreeNodes, OnePassResult};
use std::time::Instant;

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
    /// The build's renames (from its R8/ProGuard mapping): names are turned back before the
    /// report is made (see `renames`). Not part of the policy.
    #[serde(skip)]
    pub renames: Option<std::sync::Arc<dyn renames::Rename>>,
    /// A directory for file-backed scratch arrays (the index's large arrays are kept there,
    /// mapped, instead of in the process's own memory: issue 43's budget). None: in memory.
    /// The files are unlinked at once and leave nothing behind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scratch_dir: Option<std::path::PathBuf>,
    /// The most the scratch arrays may take together, in MiB (past it, arrays stay in memory).
    pub scratch_max_mb: u64,
    /// The memory the analysis may take, in bytes (0: no limit). A dump whose whole analysis
    /// would need more is reported as far as it fits: the class histogram and the detectors'
    /// classes, with `analysis.budget` saying what was left out and why (see [`budget`]).
    pub budget_bytes: u64,
    /// Report only what fits in any budget (the census: the class histogram and the detectors'
    /// classes, with `analysis.budget`), whatever the estimate: for a run after one that ran
    /// out of memory within its budget all the same (the agent's).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub census_only: bool,
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
            renames: None,
            scratch_dir: None,
            scratch_max_mb: 16 << 10,
            budget_bytes: 0,
            census_only: false,
        }
    }
}

/// The detectors' thresholds and the report's bounds: the [`Config`] fields that decide what a
/// report finds and keeps (a policy's `analysis` section sets some). A report carries them in
/// `analysis.thresholds` when they are not the defaults, so that another analysis of the same
/// dump (the collector's, of a dump the device could analyse only in part) finds what the
/// device's policy asked for.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Thresholds {
    pub bitmap_min_pixels: u64,
    pub array_min_bytes: u64,
    pub window_max_count: u64,
    pub native_allocation_registry_max_count: u64,
    pub top_n: usize,
    pub large_retained_bytes: u64,
    pub max_paths_per_class: usize,
    pub max_suspects_per_class: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Config::default().thresholds()
    }
}

impl Thresholds {
    /// These thresholds within the bounds a policy may set (the agent's schema: at most 1,000
    /// dominator groups and paths per class, arrays from 1 KiB, Bitmaps from 1 pixel), and at
    /// most 1,000 suspects with paths per class (the default): for thresholds read from a
    /// report that came from elsewhere, whose analysis must stay as bounded as the device's.
    pub fn bounded(&self) -> Thresholds {
        Thresholds {
            bitmap_min_pixels: self.bitmap_min_pixels.max(1),
            array_min_bytes: self.array_min_bytes.max(1024),
            top_n: self.top_n.clamp(1, 1000),
            max_paths_per_class: self.max_paths_per_class.clamp(1, 1000),
            max_suspects_per_class: self.max_suspects_per_class.clamp(1, 1000),
            ..self.clone()
        }
    }
}

impl Config {
    /// The threads the analysis runs on: [`Config::threads`], 0 resolved to the machine's.
    pub fn threads_used(&self) -> usize {
        threads(self)
    }

    /// This configuration's [`Thresholds`].
    pub fn thresholds(&self) -> Thresholds {
        Thresholds {
            bitmap_min_pixels: self.bitmap_min_pixels,
            array_min_bytes: self.array_min_bytes,
            window_max_count: self.window_max_count,
            native_allocation_registry_max_count: self.native_allocation_registry_max_count,
            top_n: self.top_n,
            large_retained_bytes: self.large_retained_bytes,
            max_paths_per_class: self.max_paths_per_class,
            max_suspects_per_class: self.max_suspects_per_class,
        }
    }

    /// This configuration with thresholds `t` (its other settings kept).
    pub fn with_thresholds(self, t: &Thresholds) -> Config {
        Config {
            bitmap_min_pixels: t.bitmap_min_pixels,
            array_min_bytes: t.array_min_bytes,
            window_max_count: t.window_max_count,
            native_allocation_registry_max_count: t.native_allocation_registry_max_count,
            top_n: t.top_n,
            large_retained_bytes: t.large_retained_bytes,
            max_paths_per_class: t.max_paths_per_class,
            max_suspects_per_class: t.max_suspects_per_class,
            ..self
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

/// Timings of the phases, in milliseconds. When the dump is read in one pass, `scan_ms` covers
/// the whole pass including the edges' mapping to nodes, and `graph_ms` only their assembly.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Timings {
    pub scan_ms: u64,
    pub graph_ms: u64,
    /// Shortest paths and the dominators' depth-first search, side by side (the objects' sizes
    /// converted beside the end of the longer), and the parents read for the paths the report
    /// names once it knows them (on one thread, one after the other: the paths' search once
    /// the report knows which it names).
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
    let (spans, cuts) = snapshot::find_and_cut(&input, threads(cfg), cfg.parallel_min_bytes)?;
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
    let mut rep = match over_budget(&input, cfg, &running_info)? {
        Some(mut rep) => {
            if let Some(r) = &cfg.renames {
                r.report(&mut rep);
            }
            tm.scan_ms = t0.elapsed().as_millis() as u64;
            tm.total_ms = tm.scan_ms;
            rep.analysis.timings = tm;
            rep
        }
        None => {
            let built = index::build_index_sized(&input, cfg, t0, &mut tm, cuts, true)?;
            let (mut ix, sizing, bytes, parts) = built;
            if let Some(r) = &cfg.renames {
                r.apply(&mut ix);
            }
            let g = Graph { ix, sizing };
            analyze_graph(g, input, cfg, running_info, bytes, &parts, t0, tm)?
        }
    };
    rep.analysis.thresholds = Some(cfg.thresholds()).filter(|t| *t != Thresholds::default());
    rep.analysis.snapshots = spans.len() as u64;
    rep.analysis.snapshot = if spans.is_empty() { 0 } else { k as u64 };
    Ok(rep)
}

/// The report of what fits, if `cfg.budget_bytes` is too small for the whole analysis of
/// `input` (see [`budget`]); `None` if it fits (or there is no budget).
fn over_budget(
    input: &Input<'_>,
    cfg: &Config,
    running_info: &serde_json::Value,
) -> Result<Option<Report>, Error> {
    let bytes = input.len()?;
    // Scratch files within their cap, else the large arrays are planned in memory.
    let cap = cfg.scratch_max_mb.saturating_mul(1 << 20);
    let surely = cfg.scratch_dir.is_some() && budget::scratch_surely_fits(bytes, cap);
    let may = cfg.budget_bytes > 0
        && (budget::may_exceed(bytes, surely, cfg.budget_bytes)
            || (cfg.scratch_dir.is_some() && !surely));
    if !may && !cfg.census_only {
        return Ok(None);
    }
    let (counts, classes) = index::census_and_classes(input)?;
    let scratch = cfg.scratch_dir.is_some() && (surely || budget::scratch_bytes(&counts) <= cap);
    let need = budget::need(&counts, scratch);
    if need <= cfg.budget_bytes && !cfg.census_only {
        return Ok(None);
    }
    // What the detectors find in each object alone (a pass more, in the census's memory).
    let limits = index::IndexLimits {
        bitmap_min_pixels: cfg.bitmap_min_pixels,
        array_min_bytes: cfg.array_min_bytes,
    };
    let found = index::findings(input, &classes, counts.sizes, limits)?;
    // Their paths, found backwards (a pass over the dump per step).
    let traced = index::backward::paths(input, &classes, &found.objects)?;
    drop(classes);
    let why = budget::Why {
        budget: cfg.budget_bytes,
        need,
        scratch,
        ran_out: cfg.census_only,
    };
    Ok(Some(budget::reduced(
        counts,
        found,
        traced,
        why,
        bytes,
        running_info.clone(),
    )))
}

/// Every object's id and shallow size as the analysis counts them, in id order, and the
/// conventions used (for cross-checks against other tools).
pub fn shallow_sizes(
    input: Input<'_>,
    cfg: &Config,
) -> Result<(index::Conventions, Vec<(u64, u32)>), Error> {
    let mut tm = Timings::default();
    let (spans, cuts) = snapshot::find_and_cut(&input, threads(cfg), cfg.parallel_min_bytes)?;
    let (_, skip) = snapshot::choose(&spans, cfg.snapshot)?;
    let base = input;
    let input = match skip.is_empty() {
        true => base,
        false => Input::Snapshot(Picked {
            base: &base,
            skip: &skip,
        }),
    };
    let (ix, _, _) = build_index_cut(&input, cfg, Instant::now(), &mut tm, cuts)?;
    let sizes = ix.each_id().zip(ix.shallow.iter().copied());
    Ok((ix.sizes, sizes.collect()))
}

/// The index with its graph, and what converts its objects' raw sizes if that is still to do
/// ([`index::build_index_sized`]).
struct Graph {
    ix: index::Index,
    sizing: Option<index::Sizing>,
}

/// Paths, dominators and the report, over the finished index.
#[allow(clippy::too_many_arguments)]
fn analyze_graph(
    g: Graph,
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
    let Graph { mut ix, sizing } = g;
    let t = Instant::now();
    let late = late_roots(&ix);
    let root_nodes: Vec<u32> = ix.roots.iter().map(|r| r.node).collect();
    // On one thread, the search for the shortest paths waits until the report knows the
    // objects whose paths it names, and stops once it has reached them all
    // (`paths::shortest_until`): beside the dominators' search it would only share the core,
    // and it is seldom needed whole. (The graph is then kept through the dominators' second
    // half: a higher peak, within `budget`'s estimates. With more threads the search runs
    // whole beside the depth-first search, where it costs no time: alone after it, it made
    // the bench dump's analysis 5 % slower on two cores. It then marks what it reaches in a
    // bitmap and keeps where each node came from in a byte per node, and the parents of the
    // reported paths are read from those once their ends are known: `paths::Reached`.)
    let threads = threads(cfg);
    // The objects' sizes are converted, a stretch at a time, by whichever of the two searches
    // has ended, beside the end of the other (at 10 M objects the BFS outlasts the depth-first
    // search by 14-34 ms, and the conversion takes about 25 on one thread); neither reads them.
    let mut shallow = std::mem::take(&mut ix.shallow);
    let stretches = shallow
        .chunks_mut(SIZES_STRETCH)
        .zip(ix.class_of.chunks(SIZES_STRETCH));
    let todo = std::sync::Mutex::new(sizing.as_ref().map(|z| (stretches, z)));
    let (bfs, mut prep) = match threads {
        1 => (None, dominators::prepare_gated(&ix, &root_nodes, &late)),
        _ => std::thread::scope(|s| {
            let ixr = &ix;
            let todo = &todo;
            let h = s.spawn(|| {
                let r = paths::reached(ixr, &ixr.roots, &late);
                convert_stretches(todo);
                r
            });
            let prep = dominators::prepare_gated(ixr, &root_nodes, &late);
            convert_stretches(todo);
            (Some(joined(h)), prep)
        }),
    };
    // (With one thread, all of it here.)
    convert_stretches(&todo);
    ix.shallow = shallow;
    if let Some(z) = sizing {
        index::finish_sizes(&mut ix, z);
    }
    tm.paths_ms = t.elapsed().as_millis() as u64;
    if bfs.is_some() {
        ix.drop_edges();
    }
    let t = Instant::now();
    let shallow = &ix.shallow;
    let sizes = |v: u32| shallow[v as usize] as u64;
    // The report's dominator candidates are kept as the retained sizes are summed.
    let (seeds, want) = report::candidates_wanted(&ix, cfg);
    prep.want_tops(seeds, want);
    let dom = dominators::finish(prep, sizes, threads);
    tm.dominators_ms = t.elapsed().as_millis() as u64;

    let t = Instant::now();
    let mut search_ms = 0;
    // The whole search's parents are read off its queues for the ends alone (see
    // `paths::Reached::paths_to`).
    let paths = |ends: &[u32]| {
        let t = Instant::now();
        let bfs = match bfs {
            Some(r) => r.paths_to(ends),
            None => paths::shortest_until(&ix, &ix.roots, &late, ends),
        };
        search_ms = t.elapsed().as_millis() as u64;
        bfs
    };
    let mut rep = report::build(&ix, &dom, paths, cfg, input, running_info)?;
    rep.analysis.input_bytes = bytes;
    rep.analysis.parse_parts = parts.as_ref().map_or(1, |p| p.len() as u64);
    tm.paths_ms += search_ms;
    tm.report_ms = (t.elapsed().as_millis() as u64).saturating_sub(search_ms);
    tm.total_ms = t0.elapsed().as_millis() as u64;
    rep.analysis.timings = tm;
    Ok(rep)
}

/// Objects whose sizes [`convert_stretches`] converts at a time (40 stretches at 10 M).
const SIZES_STRETCH: usize = 1 << 18;

/// The objects' raw sizes in stretches, each beside the same stretch of their classes, and
/// what converts them.
type Stretches<'a> = std::sync::Mutex<
    Option<(
        std::iter::Zip<std::slice::ChunksMut<'a, u32>, std::slice::Chunks<'a, u32>>,
        &'a index::Sizing,
    )>,
>;

/// Convert the objects' sizes a stretch at a time until none is left (one or more threads).
fn convert_stretches(todo: &Stretches<'_>) {
    loop {
        let next = match todo.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            Some((left, z)) => left.next().map(|(sh, cl)| (sh, cl, *z)),
            None => None,
        };
        let Some((shallow, class_of, z)) = next else {
            return;
        };
        index::convert_sizes(class_of, shallow, z, false);
    }
}

/// The classes that are roots once their gate is reached, as (class node, gate): classes are
/// roots where the dump says so (sticky class roots, among the index's roots) or where their
/// loader is reachable: the bootstrap loader (id 0, or a loader the dump does not hold) always
/// is ([`dominators::UNGATED`]). A class whose loader is garbage keeps neither the loader nor
/// its statics.
pub(crate) fn late_roots(ix: &index::Index) -> Vec<(u32, u32)> {
    ix.classes
        .iter()
        .filter(|c| c.node != index::NONE)
        .map(|c| {
            let loader = match c.loader_id {
                0 => None,
                id => ix.node(id),
            };
            (c.node, loader.unwrap_or(dominators::UNGATED))
        })
        .collect()
}

/// What a scoped thread returned; a panic there goes on in the joining thread.
pub(crate) fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

impl dominators::Graph for index::Index {
    fn nodes(&self) -> usize {
        self.len()
    }
    /// Always inlined (with [`index::Index::succ`]): the depth-first search's and the BFS's step,
    /// once per node; at the shipped library's opt-level "s" it stayed a call of about 40
    /// instructions.
    #[inline(always)]
    fn succ(&self, v: u32) -> &[u32] {
        index::Index::succ(self, v)
    }
    fn hint(&self, v: u32) {
        sys::mapped::prefetch_at(&self.adj, v as usize);
    }
    fn hint_after(&self, v: u32) {
        // A line past the end of `v`'s list (the line holding its end is being read).
        let [f, d] = self.adj[v as usize];
        if f != index::NONE {
            sys::mapped::prefetch_at(&self.edges, f as usize + d as usize + 16);
        }
    }
    fn scratch(&self) -> Option<&sys::scratch::Scratch> {
        self.scratch.as_ref()
    }
}

#[cfg(test)]
mod tests;
