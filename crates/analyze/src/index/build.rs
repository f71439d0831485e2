//! The index driver: which passes build the index of a dump (one pass when its classes come first,
//! else two), in how many parts side by side, and joining the workers' outputs into one graph.
//!
//! Invariants:
//! - The index is the same whichever way it was built (one pass or two, any number of parts);
//!   whatever fails in the one pass or in parts is run again in two passes or in one piece,
//!   which report a problem at its exact offset.
//! - At most [`MAX_THREADS`] threads parse side by side.

use crate::index;
use crate::{joined, Config, Error, Input, Timings};
use std::time::Instant;
use sys::scratch::{Stretched, Writer};

/// The index of a dump with its graph and shallow sizes; its byte length and the parts it was
/// read in (for tests: the analysis cuts the file in its walk over the snapshots).
#[cfg(test)]
pub(crate) fn build_index(
    input: &Input<'_>,
    cfg: &Config,
    t0: Instant,
    tm: &mut Timings,
) -> Result<(index::Index, u64, Option<index::Ranges>), Error> {
    let cuts = crate::tests::split(input, threads(cfg), cfg.parallel_min_bytes);
    build_index_cut(input, cfg, t0, tm, cuts)
}

/// [`build_index`] with the file's cut already made: `cuts` is what `snapshot::find_and_cut`
/// gives for [`threads`] parts, in the same walk as the snapshots.
pub(crate) fn build_index_cut(
    input: &Input<'_>,
    cfg: &Config,
    t0: Instant,
    tm: &mut Timings,
    cuts: Option<index::Ranges>,
) -> Result<(index::Index, u64, Option<index::Ranges>), Error> {
    let (mut ix, sizing, bytes, parts) = build_index_sized(input, cfg, t0, tm, cuts, false)?;
    if let Some(s) = sizing {
        settle_sizes(&mut ix, s);
    }
    Ok((ix, bytes, parts))
}

/// The objects' sizes converted on two threads ([`index::convert_sizes`]), then the rest of
/// [`index::Sizing`]'s steps: what [`build_index_sized`] left.
pub(crate) fn settle_sizes(ix: &mut index::Index, s: index::Sizing) {
    index::convert_sizes(&ix.class_of, &mut ix.shallow, &s, true);
    index::finish_sizes(ix, s);
}

/// [`build_index_cut`], but if `defer`, the objects' raw sizes are left as they are, with
/// what converts them (for [`settle_sizes`]): the paths' and the dominators' searches do not
/// read them, and the conversion, a pass over every object, can run beside them.
pub(crate) fn build_index_sized(
    input: &Input<'_>,
    cfg: &Config,
    t0: Instant,
    tm: &mut Timings,
    cuts: Option<index::Ranges>,
    defer: bool,
) -> Result<BuiltSized, Error> {
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
    let scratch = cfg
        .scratch_dir
        .as_ref()
        .map(|d| sys::scratch::Scratch::new(d, cfg.scratch_max_mb.saturating_mul(1 << 20)))
        .transpose()
        .map_err(|source| Error::Io {
            what: "cannot use the scratch directory",
            source,
        })?;
    let scratch = scratch.as_ref();
    // (The cuts were made for `threads(cfg)` parts: none for one thread.)
    let mut parts = cuts;
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
                one_pass(input, ps, limits, scratch)
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
                None => p1.finish(scratch),
            }
            .map_err(|what| Error::Input { offset: 0, what })?,
            None,
        ),
        None => (scan(input, &mut parts, scratch)?, None),
    };
    let bytes = input.len()?;
    tm.scan_ms = t0.elapsed().as_millis() as u64;

    let t = Instant::now();
    let watched = match outs {
        Some((placed, edges)) => index::apply_placed(&mut ix, placed, edges),
        None => two_pass_graph(input, &parts, &mut ix, limits, scratch)?,
    };
    index::flag_watched(&mut ix, watched);
    index::flag_services(&mut ix);
    let sizing = index::plan_sizes(&ix, limits.array_min_bytes);
    let sizing = match defer {
        true => Some(sizing),
        false => {
            settle_sizes(&mut ix, sizing);
            None
        }
    };
    // The paths, the dominators and the report look up only a few objects by id and ids by
    // node: in memory the rank map serves both and the ids go; with scratch files the ids go
    // to one and the map goes.
    if scratch.is_some() || !ix.rank_only() {
        ix.drop_id_map();
    }
    ix.edges.shrink_to_fit();
    if let Some(s) = scratch {
        spill(&mut ix, s);
    }
    ix.scratch = scratch.cloned();
    tm.graph_ms = t.elapsed().as_millis() as u64;
    Ok((ix, sizing, bytes, parts))
}

/// What [`build_index_sized`] gives: the index, what converts its sizes if deferred, the
/// dump's length and its parts.
pub(crate) type BuiltSized = (
    index::Index,
    Option<index::Sizing>,
    u64,
    Option<index::Ranges>,
);

/// Move the index's large arrays that are still in memory into scratch files (any that cannot
/// be moved stays in memory: the analysis goes on, over its budget).
fn spill(ix: &mut index::Index, s: &sys::scratch::Scratch) {
    let _ = ix.ids.spill(s);
    let _ = ix.class_of.spill(s);
    let _ = ix.shallow.spill(s);
    let _ = ix.adj.spill(s);
    let _ = ix.edges.spill(s);
}

/// Most threads [`Config::threads`] asks for that are used (within [`index::MAX_WORKERS`]).
const MAX_THREADS: usize = 64;
const _: () = assert!(MAX_THREADS <= index::MAX_WORKERS);

/// The threads the analysis runs side by side (see [`Config::threads`]).
pub(crate) fn threads(cfg: &Config) -> usize {
    match cfg.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
        n => n.min(MAX_THREADS),
    }
}

/// What [`one_pass`] achieved.
pub(crate) enum OnePassResult {
    /// The skeleton index and pass 2's outputs, ready to apply (their edge lists joined).
    Graph(Box<index::Index>, Vec<index::Placed>, index::Column<u32>),
    /// Classes (or strings) came late: only pass 1's work is usable, and the per-node arrays
    /// if they were already being made.
    Scanned(Box<index::Pass1>, Option<index::NodeArrays>),
}

/// Gather the prefix (everything before the first object), then run pass 1 and pass 2 at once
/// over `parts` with the prefix's class layouts. `None` if the input did not parse (the caller
/// starts over with two passes, which report the problem at its exact offset).
pub(crate) fn one_pass(
    input: &Input<'_>,
    parts: &[(u64, u64)],
    limits: index::IndexLimits,
    scratch: Option<&sys::scratch::Scratch>,
) -> Option<OnePassResult> {
    let mut pre = index::Prefix::default();
    input.prefix(&mut pre).ok()?;
    let prefix_end = pre.end.unwrap_or(u64::MAX);
    let counts = pre.p1.counts();
    let mut skel = pre.p1.finish(None).ok()?;
    // The workers' buffers (an entry per object, a word per reference) grow in scratch files.
    skel.scratch = scratch.cloned();
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
        heads_asc.push((v.head, v.ascending()));
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
        let arrays = (!late).then(|| sc.spawn(move || index::node_arrays(nodes_at_most, scratch)));
        let p1 = merge_pass1(p1s)?;
        let (s, n, c) = p1.counts();
        let arrays = match arrays {
            Some(a) if (s, n, c) == counts => a,
            // Strings or classes came after the prefix: pass 2 runs over the index of pass 1.
            a => return Some(OnePassResult::Scanned(Box::new(p1), a.map(joined))),
        };
        let ix = p1.finish_then(move || joined(arrays)).ok()?;
        one_pass_resolve(ix, p2s, orders, heads, tail_base, scratch)
    })
}

/// [`one_pass`] once the index is made: each worker's objects and edge targets to nodes.
fn one_pass_resolve(
    mut ix: index::Index,
    p2s: Vec<index::Pass2<'_>>,
    orders: Vec<Vec<u64>>,
    heads: Vec<Vec<u64>>,
    tail_base: Vec<u32>,
    scratch: Option<&sys::scratch::Scratch>,
) -> Option<OnePassResult> {
    if ix.stats.duplicate_ids > 0 && orders.is_empty() {
        // The free-node numbering below assumes distinct ids.
        return None;
    }
    // From here on the ids are looked up, never read: in memory, the rank map alone serves.
    if scratch.is_none() {
        ix.rank_only();
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
    // The joined list. In memory, its room is taken as it is and the workers write every slot:
    // zeros written first (the allocator hands out a kept block, so `vec![0; n]` is a `memset`)
    // took 9.5-12.5 ms at 10 M objects on this thread while they waited, and spared them only
    // 4-8 ms. In a scratch file, over the file's zeros.
    let mut list = match scratch {
        None => EdgeList::Fresh(Stretched::<u32>::new(&rooms)?),
        Some(_) => EdgeList::InFile(index::Column::filled(total, 0u32, scratch).0),
    };
    let stretches: Vec<Writer<'_, u32>> = match &mut list {
        EdgeList::Fresh(f) => f.writers(),
        EdgeList::InFile(c) => {
            let mut rest: &mut [u32] = c;
            let mut w = Vec::with_capacity(rooms.len());
            for &r in &rooms {
                let (a, b) = rest.split_at_mut(r);
                w.push(Writer::over(a));
                rest = b;
            }
            w
        }
    };
    let bases: Vec<u32> = (rooms.iter())
        .scan(0u32, |b, &r| Some(std::mem::replace(b, *b + r as u32)))
        .collect();
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
                    let mut dst = dst;
                    index::place(ixr, l, &mut dst, base, range, |k| match (order, head) {
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
    let edges = match list {
        EdgeList::Fresh(f) => match f.finish(NONE_U32) {
            (v, true) => index::Column::from(v),
            // (place gives None before it leaves a stretch short.)
            (_, false) => return None,
        },
        EdgeList::InFile(c) => c,
    };
    Some(OnePassResult::Graph(Box::new(ix), placed, edges))
}

/// The one pass's joined edge list while its workers write it: unfilled room in memory, or a
/// scratch file's zeros.
enum EdgeList {
    Fresh(Stretched<u32>),
    InFile(index::Column<u32>),
}

const NONE_U32: u32 = index::NONE;

/// [`free_node`] for calls whose `g` mostly ascends: a cursor walks `taken` instead of a
/// binary search per call.
pub(crate) struct FreeNodes<'a> {
    taken: &'a [u32],
    g: u32,
    c: usize,
}

impl<'a> FreeNodes<'a> {
    pub(crate) fn new(taken: &'a [u32]) -> Self {
        FreeNodes { taken, g: 0, c: 0 }
    }
    pub(crate) fn get(&mut self, g: u32) -> u32 {
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
pub(crate) fn free_node(taken: &[u32], g: u32) -> u32 {
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
pub(crate) fn scan(
    input: &Input<'_>,
    parts: &mut Option<Vec<(u64, u64)>>,
    scratch: Option<&sys::scratch::Scratch>,
) -> Result<index::Index, Error> {
    let mut merged = None;
    if let Some(parts) = parts.as_ref() {
        let vs = (0..parts.len())
            .map(|_| index::Pass1::in_scratch(scratch))
            .collect();
        if let Ok(vs) = input.pass_parts(parts, vs) {
            merged = merge_pass1(vs);
        }
    }
    let p1 = match merged {
        Some(p1) => p1,
        None => {
            *parts = None;
            let mut p1 = index::Pass1::in_scratch(scratch);
            input.pass(&mut p1)?;
            p1
        }
    };
    p1.finish(scratch)
        .map_err(|what| Error::Input { offset: 0, what })
}

/// Pass 2 over the index pass 1 made: the graph, applied to the index; returns the watched
/// referents.
/// The node arrays stay where they are (in scratch files if `scratch` is given, as
/// [`index::Pass1::finish`] made them), and the workers' edge lists grow there too.
pub(crate) fn two_pass_graph(
    input: &Input<'_>,
    parts: &Option<Vec<(u64, u64)>>,
    ix: &mut index::Index,
    limits: index::IndexLimits,
    scratch: Option<&sys::scratch::Scratch>,
) -> Result<Vec<(u64, u32)>, Error> {
    let mut arrays = index::SharedArrays::take(ix, scratch);
    let outs = graph(input, parts, ix, &arrays.view(), limits, scratch)?;
    index::apply(ix, outs, arrays).map_err(|what| Error::Input { offset: 0, what })
}

/// Pass 2's workers over the parts of the file (or one over all of it), writing into `shared`;
/// their outputs, finished.
fn graph(
    input: &Input<'_>,
    parts: &Option<Vec<(u64, u64)>>,
    ix: &index::Index,
    shared: &index::Shared<'_>,
    limits: index::IndexLimits,
    scratch: Option<&sys::scratch::Scratch>,
) -> Result<Vec<index::Out>, Error> {
    let outs = match parts {
        Some(parts) => {
            let vs = parts
                .iter()
                .zip(0u8..)
                .map(|(&(a, _), w)| {
                    let delta = a - hprof::HEADER_LEN as u64;
                    index::Pass2::new(ix, shared, w, limits, delta, scratch)
                })
                .collect();
            input.pass_parts(parts, vs)?
        }
        None => {
            let mut p2 = index::Pass2::new(ix, shared, 0, limits, 0, scratch);
            input.pass(&mut p2)?;
            vec![p2]
        }
    };
    outs.into_iter()
        .map(|p| p.finish())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|what| Error::Input { offset: 0, what })
}
