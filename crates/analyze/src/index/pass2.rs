//! Pass 2: per object its class, shallow size and strong edges, and the detectors' flags.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use sys::scratch::Writer;

// ---------------------------------------------------------------------------------------------
// Pass 2

/// What a pass-2 worker produced over its part of the file, applied to the index afterwards
/// (workers only read the index, so two can run side by side).
#[derive(Default)]
pub(crate) struct Out {
    /// Two-pass mode: the edge lists of the objects in file order (in a scratch file if the
    /// index has a scratch directory).
    pub(super) edges: Grow<u32>,
    /// One-pass mode, per object, in file order, an entry (its place in the list stands for
    /// its node until [`place`] maps it; its edges follow those of the objects before it in
    /// the raw list): its class index, with [`SIDE`] or [`PRIM_EDGE`]; and its degree (with
    /// [`CLASS_EDGE`]), or for a primitive array its shallow size (its one possible edge, to
    /// its class, is [`PRIM_EDGE`]). Its shallow size is otherwise its class's instance size,
    /// or the next of `side` if [`SIDE`] (object arrays, class objects: 8 bytes an object
    /// where all three words took 12). Two-pass workers write their objects into [`Shared`]
    /// instead.
    pub(super) nodes: Grow<[u32; 2]>,
    /// One-pass mode: the shallow sizes of the entries flagged [`SIDE`], in order.
    pub(super) side: Grow<u32>,
    /// Two-pass mode: objects whose node another object had claimed in [`Shared`] first (the
    /// dump lists the id more than once), as [`Shared::claim`] takes them; [`apply`] keeps the
    /// one listed first in the file.
    pub(super) dups: Vec<[u32; 5]>,
    pub(super) stats: IndexStats,
    /// Per class index: instances seen.
    pub(super) instances: Vec<u32>,
    /// One-pass mode, per class index: entries flagged [`CLASS_EDGE`] (counted here, so that
    /// [`Looked::room`] needs no pass over the entries).
    pub(super) class_edges: Vec<u32>,
    pub(super) flags: Vec<Flag>,
    pub(super) segments: Vec<Segment>,
    /// Watched referents by id (resolved to nodes after the pass) and their reference's node.
    pub(super) watched: Vec<(u64, u32)>,
}

pub(crate) struct Pass2<'a> {
    pub(super) ix: &'a Index,
    /// Two-pass mode: the node arrays the workers fill in side by side, and this worker's
    /// number (its part's place in the file). `None` in one-pass mode: the index holds no
    /// object ids yet, so entries are numbered in file order (their ordinal stands for the
    /// node) and edges are kept as raw ids in `raw`, until [`lookup`] and [`place`] map both
    /// once every id is known.
    pub(super) shared: Option<(&'a Shared<'a>, u8)>,
    /// Two-pass mode: the object being read (node, class, shallow size); its edges start at
    /// `start`.
    pub(super) cur: [u32; 3],
    /// Two-pass mode: objects read since the last [`Pass2::flush`] (node, class, shallow size,
    /// first edge, degree), whose edge lists may still hold targets to drop.
    pub(super) open: Vec<[u32; 5]>,
    pub(super) limits: IndexLimits,
    /// Added to the parser's offsets to get file offsets (a worker's parser starts at its part).
    pub(super) delta: u64,
    /// An object array's elements are streaming into the current object's edges.
    pub(super) in_array: bool,
    /// Where the current object's edges start in `out.edges` (or `raw`).
    pub(super) start: u32,
    pub(super) err: Option<String>,
    /// Direct-mapped cache of class id -> class index (instances of a few classes dominate).
    pub(super) class_cache: Vec<(u64, u32)>,
    /// One-pass mode: per class index, its instance size (see `Out::nodes`).
    pub(super) sizes: Vec<u32>,
    /// The node after the last object's: dumps list most objects by ascending id, so the next
    /// object is usually that node, checked with one read of the sorted ids instead of a lookup.
    pub(super) next: u32,
    pub(super) out: Out,
    pub(super) raw: Raw,
    /// Otherwise, the targets of the last edges, whose slots at the end of `out.edges` wait
    /// for them: looked up [`BATCH`] at a time, so that the lookups' cache misses overlap.
    pub(super) batch: Vec<u64>,
}

/// A one-pass worker's raw edge targets, in 32-bit words so that [`lookup`] can turn the list
/// into the nodes' list in place: one word per id (`id >> shift`: objects are 8-byte aligned
/// below 32 GiB in a HotSpot dump with 8-byte ids, and 4-byte ids fit as they are) while every
/// id fits, else two (high, low). Half the memory of the two words in the usual case; it is
/// all fresh pages, filled while the file is read.
pub(crate) enum Raw {
    Narrow(Grow<u32>, u32),
    Wide(Vec<[u32; 2]>),
}

impl Raw {
    pub(super) fn len(&self) -> usize {
        match self {
            Raw::Narrow(v, _) => v.len(),
            Raw::Wide(v) => v.len(),
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, id: u64) {
        if let Raw::Narrow(v, shift) = self {
            let x = id >> *shift;
            if x << *shift == id && x <= u32::MAX as u64 {
                v.push(x as u32);
                return;
            }
            self.widen();
        }
        if let Raw::Wide(v) = self {
            let (hi, lo) = halves(id);
            v.push([hi, lo]);
        }
    }

    /// An id that does not fit one word: the list so far becomes two words per id.
    #[cold]
    #[inline(never)]
    pub(super) fn widen(&mut self) {
        if let Raw::Narrow(v, shift) = self {
            let wide = v
                .iter()
                .map(|&x| {
                    let (hi, lo) = halves((x as u64) << *shift);
                    [hi, lo]
                })
                .collect();
            *self = Raw::Wide(wide);
        }
    }
}

/// Edge targets looked up at a time (see `Pass2::batch`).
pub(super) const BATCH: usize = 1024;
/// Edge targets [`lookup`] looks up at a time.
pub(super) const LOOKUP: usize = 4096;

pub(super) const CLASS_CACHE: usize = 1024;

/// In a deferred entry's degree: the entry's first edge, to its class object, is implied (see
/// [`place`]). Degrees stay below it: an instance has at most 65,535 fields, and an object
/// array's record fits a heap dump segment (its length is 32 bits), so it has fewer than 2^30
/// elements.
pub(super) const CLASS_EDGE: u32 = 1 << 31;
/// In a deferred entry's class word: its shallow size is the next in `Out::side`.
pub(super) const SIDE: u32 = 1 << 31;
/// In a deferred entry's class word (a primitive array's): its one edge, to its class, implied
/// as [`CLASS_EDGE`]'s is (no raw target).
pub(super) const PRIM_EDGE: u32 = 1 << 30;
/// A deferred entry's class index, without the flags ([`Pass2::deferred`] refuses more
/// classes).
pub(super) const CLASS_MASK: u32 = PRIM_EDGE - 1;

/// The errors of a part with more objects, or references, than a node or an edge number holds.
const TOO_MANY_OBJECTS: &str = "more than 4 billion objects: too many for this analyser";
pub(super) const TOO_MANY_REFERENCES: &str =
    "more than 4 billion references: too many for this analyser";

/// Whether class index `c` is one of the primitive arrays' pseudo-classes (`prim_base` on).
#[inline(always)]
fn is_prim(c: u32, prim_base: u32) -> bool {
    c.wrapping_sub(prim_base) < PRIMS.len() as u32
}

/// Flag a deferred entry of class index `ci` as implying its edge to its class object:
/// [`PRIM_EDGE`] for a primitive array (whose second word is its size), else [`CLASS_EDGE`].
#[inline(always)]
fn imply_class_edge(e: &mut [u32; 2], ci: u32, prim_base: u32) {
    match is_prim(ci, prim_base) {
        true => e[0] |= PRIM_EDGE,
        false => e[1] |= CLASS_EDGE,
    }
}
impl<'a> Pass2<'a> {
    /// A pass-2 worker over the part of the file that starts `delta` bytes after the header,
    /// which writes what it finds into `shared` as worker number `worker` (the parts' order),
    /// its edge lists in `scratch` if given.
    pub(crate) fn new(
        ix: &'a Index,
        shared: &'a Shared<'a>,
        worker: u8,
        limits: IndexLimits,
        delta: u64,
        scratch: Option<&Scratch>,
    ) -> Self {
        let mut p = Pass2::deferred(ix, limits, delta);
        p.shared = Some((shared, worker));
        // (Only one-pass workers list entries and raw targets.)
        p.out.nodes = Grow::default();
        p.out.side = Grow::default();
        p.sizes = Vec::new();
        p.err = None;
        p.raw = Raw::Narrow(Grow::default(), 0);
        p.out.edges = Grow::new_in(scratch);
        p
    }

    /// A pass-2 worker in one-pass mode (see `shared`), over an index of the classes alone.
    pub(crate) fn deferred(ix: &'a Index, limits: IndexLimits, delta: u64) -> Self {
        Pass2 {
            ix,
            shared: None,
            cur: [NONE; 3],
            open: Vec::new(),
            limits,
            delta,
            in_array: false,
            start: 0,
            // (The flags of an entry's class word leave room for 2^30 classes: more go the
            // two-pass way.)
            err: (ix.classes.len() > CLASS_MASK as usize)
                .then(|| "more than 2^30 classes: too many for one pass".into()),
            class_cache: vec![(0, NONE); CLASS_CACHE],
            sizes: ix.classes.iter().map(|c| c.instance_size).collect(),
            next: 0,
            out: Out {
                nodes: Grow::new_in(ix.scratch.as_ref()),
                side: Grow::new_in(ix.scratch.as_ref()),
                instances: vec![0; ix.classes.len()],
                class_edges: vec![0; ix.classes.len()],
                ..Out::default()
            },
            raw: Raw::Narrow(
                Grow::new_in(ix.scratch.as_ref()),
                if ix.header.id_size == 8 { 3 } else { 0 },
            ),
            batch: Vec::with_capacity(BATCH),
        }
    }

    /// One-pass mode (see `shared`).
    #[inline]
    pub(super) fn defer(&self) -> bool {
        self.shared.is_none()
    }

    #[inline]
    pub(super) fn edge_count(&self) -> usize {
        if self.defer() {
            self.raw.len()
        } else {
            self.out.edges.len()
        }
    }

    #[inline]
    pub(super) fn class_index(&mut self, class_id: u64) -> Option<u32> {
        let slot = (class_id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize % CLASS_CACHE;
        let (id, ci) = self.class_cache[slot];
        if id == class_id && ci != NONE {
            return Some(ci);
        }
        let ci = self.ix.class_by_id(class_id)?;
        self.class_cache[slot] = (class_id, ci);
        Some(ci)
    }

    /// Start object `id`'s entry; `None` if the id is not indexed.
    #[inline(always)]
    pub(super) fn begin(&mut self, id: u64, class: u32, shallow: u64) -> Option<u32> {
        let sh = shallow.min(u32::MAX as u64) as u32;
        let n = if self.defer() {
            let n = self.open_deferred()?;
            let e = self.deferred_entry(class, sh);
            self.out.nodes.push(e);
            n
        } else {
            let n = match self.ix.ids.get(self.next as usize) == Some(&id) {
                true => self.next,
                false => self.ix.node(id)?,
            };
            self.next = n.wrapping_add(1);
            if self.out.edges.len() >= NONE as usize {
                self.err = Some(TOO_MANY_REFERENCES.into());
                return None;
            }
            self.start = self.out.edges.len() as u32;
            self.cur = [n, class, sh];
            n
        };
        self.out.instances[class as usize] += 1;
        Some(n)
    }

    /// One-pass mode: the next entry's number (its ordinal), with `next` and `start` set for
    /// it; `None` (the error noted) past [`NONE`] objects or references.
    #[inline(always)]
    fn open_deferred(&mut self) -> Option<u32> {
        if self.out.nodes.len() >= NONE as usize {
            self.err = Some(TOO_MANY_OBJECTS.into());
            return None;
        }
        let n = self.out.nodes.len() as u32;
        self.next = n.wrapping_add(1);
        if self.raw.len() >= NONE as usize {
            self.err = Some(TOO_MANY_REFERENCES.into());
            return None;
        }
        self.start = self.raw.len() as u32;
        Some(n)
    }

    /// One-pass mode: the entry of an object of class index `class` and shallow size `sh`,
    /// without its degree and edge flags: for a primitive array its size; otherwise none if
    /// it is its class's instance size, else [`SIDE`] with the size pushed to `side`.
    #[inline(always)]
    fn deferred_entry(&mut self, class: u32, sh: u32) -> [u32; 2] {
        if is_prim(class, self.ix.prim_base) {
            [class, sh]
        } else if self.sizes.get(class as usize) == Some(&sh) {
            [class, 0]
        } else {
            self.out.side.push(sh);
            [class | SIDE, 0]
        }
    }

    /// Always inlined: it runs once per reference field and array element (32 M times at 10 M
    /// objects), and as a call about 7 of its 15 instructions were the prologue and epilogue.
    #[inline(always)]
    pub(super) fn edge(&mut self, target: u64) {
        if target == 0 {
            return;
        }
        if self.defer() {
            self.raw.push(target);
            return;
        }
        self.batch.push(target);
        self.out.edges.push(NONE);
        if self.batch.len() == BATCH {
            self.flush(true);
        }
    }

    /// Look the waiting targets up into their slots; then drop the targets the dump does not
    /// hold from the lists of the objects read since the last flush (and of the object being
    /// read, if `reading`), and hand those objects, whose lists are now final, to
    /// [`Shared`]. The lists are contiguous in `out.edges`, so this moves each one back over
    /// the targets dropped before it, and cuts the vector after the last.
    pub(super) fn flush(&mut self, reading: bool) {
        let edges: &mut [u32] = &mut self.out.edges;
        let waiting = edges.len() - self.batch.len();
        self.ix
            .id_map
            .find_batch(&self.ix.ids, &self.batch, &mut edges[waiting..]);
        self.batch.clear();
        let Some((shared, worker)) = self.shared else {
            return;
        };
        let Some(from) = self
            .open
            .first()
            .map(|o| o[3])
            .or(reading.then_some(self.start))
        else {
            return;
        };
        let mut to = from as usize;
        let reading_len = if reading {
            edges.len() as u32 - self.start
        } else {
            0
        };
        let mut keep = |at: u32, len: u32| -> (u32, u32) {
            let first = to;
            for k in at as usize..(at + len) as usize {
                let x = edges[k];
                edges[to] = x;
                to += usize::from(x != NONE);
            }
            (first as u32, (to - first) as u32)
        };
        for o in self.open.iter_mut() {
            (o[3], o[4]) = keep(o[3], o[4]);
        }
        if reading {
            (self.start, _) = keep(self.start, reading_len);
        }
        let dropped = edges.len() - to;
        self.out.edges.truncate(to);
        self.out.stats.missing_refs += dropped as u64;
        for o in self.open.drain(..) {
            self.out.stats.edges += o[4] as u64;
            if !shared.claim(worker, o) {
                self.out.dups.push(o);
            }
        }
    }

    /// Close the last entry's edge list.
    #[inline]
    pub(super) fn end(&mut self) {
        let d = self.edge_count() as u32 - self.start;
        if self.defer() {
            if let Some(e) = self.out.nodes.last_mut() {
                // (A primitive array has none: its one edge is [`PRIM_EDGE`], an entry's
                // word is its size.)
                if !is_prim(e[0] & CLASS_MASK, self.ix.prim_base) {
                    // (Keeps [`CLASS_EDGE`] if the entry has it.)
                    e[1] |= d;
                }
                self.out.stats.edges += d as u64;
            }
        } else {
            let [n, c, sh] = self.cur;
            self.open.push([n, c, sh, self.start, d]);
            if self.open.len() >= BATCH {
                self.flush(false);
            }
        }
    }

    pub(super) fn flag(&mut self, node: u32, reason: &str, detail: String) {
        self.out.flags.push(Flag {
            node,
            reason: reason.into(),
            detail,
        });
    }

    pub(crate) fn finish(mut self) -> Result<Out, String> {
        if let Some(e) = self.err {
            return Err(e);
        }
        self.flush(false);
        Ok(self.out)
    }

    /// A one-pass worker's output: entries numbered by ordinal, and its raw edge targets.
    pub(crate) fn finish_deferred(self) -> Result<(Out, Raw), String> {
        match self.err {
            Some(e) => Err(e),
            None => Ok((self.out, self.raw)),
        }
    }
}

/// A one-pass worker's output with its raw edge targets looked up ([`lookup`]): what [`place`]
/// writes into the joined edge list.
pub(crate) struct Looked {
    out: Out,
    /// Each raw target's node, [`NONE`] if the dump does not hold it, in the raw list's order.
    targets: Grow<u32>,
    /// How many of `targets` are [`NONE`].
    missing: u64,
}

/// In [`class_refs`]: the class is [`Class::rooted`] (the edge is left out).
const ROOTED: u32 = NONE - 1;

/// Per class index, the node its objects' implied edge to their class ([`CLASS_EDGE`],
/// [`PRIM_EDGE`]) leads to: its class object's (for a primitive array type's pseudo-class,
/// that type's class object: [`Index::prim_classes`]); [`NONE`] if the dump lacks it (a
/// missing reference), [`ROOTED`] if it is a listed root. Nodes are below both.
fn class_refs(ix: &Index) -> impl Iterator<Item = u32> + '_ {
    let prim = ix.prim_base as usize..ix.prim_base as usize + PRIMS.len();
    (0..ix.classes.len()).map(move |c| {
        let k = match prim.contains(&c) {
            true => ix.prim_classes[c - prim.start],
            false => c as u32,
        };
        match ix.classes.get(k as usize) {
            None => NONE,
            Some(cl) if cl.rooted => ROOTED,
            Some(cl) => cl.node,
        }
    })
}

impl Looked {
    /// The room [`place`] needs in the joined list: every target found, and a class edge per
    /// flagged entry whose class object the dump holds and does not list as a root.
    pub(crate) fn room(&self, ix: &Index) -> usize {
        let class_edges: usize = (self.out.class_edges.iter())
            .zip(class_refs(ix))
            .filter(|&(_, r)| r < ROOTED)
            .map(|(&k, _)| k as usize)
            .sum();
        self.targets.len() - self.missing as usize + class_edges
    }
}

/// Turn a one-pass worker's raw edge targets into nodes ([`NONE`] where the dump does not hold
/// the id), in the same memory: target i (word i, or words 2i and 2i+1) becomes word i. A batch
/// is read whole before it is written, and from the second batch on it writes only words
/// earlier batches have read (i + LOOKUP <= 2i).
pub(crate) fn lookup(ix: &Index, out: Out, raw: Raw) -> Looked {
    let n = raw.len();
    let (mut targets, shift, words) = match raw {
        Raw::Narrow(v, shift) => (v, shift, 1),
        Raw::Wide(v) => (Grow::from(v.into_flattened()), 0, 2),
    };
    let mut q = vec![0u64; LOOKUP.min(n)];
    let mut got = vec![0u32; q.len()];
    let mut missing = 0u64;
    let mut i = 0;
    let ts: &mut [u32] = &mut targets;
    while i < n {
        let m = (n - i).min(LOOKUP);
        for (j, t) in q[..m].iter_mut().enumerate() {
            *t = match words {
                1 => (ts[i + j] as u64) << shift,
                _ => pair(ts[2 * (i + j)], ts[2 * (i + j) + 1]),
            };
        }
        ix.id_map.find_batch(&ix.ids, &q[..m], &mut got[..m]);
        missing += got[..m].iter().filter(|&&x| x == NONE).count() as u64;
        ts[i..i + m].copy_from_slice(&got[..m]);
        i += m;
    }
    // Two words per target: the second half goes back (a large block shrinks in place).
    targets.truncate(n);
    targets.shrink_to_fit();
    Looked {
        out,
        targets,
        missing,
    }
}

/// The node arrays of nodes `lo..lo + len`, which one [`place`] writes (no other writes them).
pub(crate) struct NodeRange<'a> {
    lo: u32,
    class_of: &'a mut [u32],
    shallow: &'a mut [u32],
    adj: &'a mut [[u32; 2]],
}

/// Cut the node arrays (as long as each other) into consecutive ranges, the k-th starting at
/// node `starts[k]` (ascending; the first range starts at 0, the last ends at the end).
pub(crate) fn node_ranges<'a>(
    class_of: &'a mut [u32],
    shallow: &'a mut [u32],
    adj: &'a mut [[u32; 2]],
    starts: &[u32],
) -> Vec<NodeRange<'a>> {
    let n = class_of.len().min(shallow.len()).min(adj.len());
    let (mut c, mut s, mut a) = (&mut class_of[..n], &mut shallow[..n], &mut adj[..n]);
    let mut lo = 0u32;
    let mut ranges = Vec::with_capacity(starts.len());
    for k in 0..starts.len() {
        let hi = match starts.get(k + 1) {
            Some(&h) => (h.max(lo) as usize).min(n) as u32,
            None => n as u32,
        };
        let len = (hi - lo) as usize;
        let (c1, c2) = std::mem::take(&mut c).split_at_mut(len);
        let (s1, s2) = std::mem::take(&mut s).split_at_mut(len);
        let (a1, a2) = std::mem::take(&mut a).split_at_mut(len);
        ranges.push(NodeRange {
            lo,
            class_of: c1,
            shallow: s1,
            adj: a1,
        });
        (c, s, a, lo) = (c2, s2, a2, hi);
    }
    ranges
}

/// What [`place`] leaves for [`apply_placed`]: the output, and the objects whose nodes lie
/// outside the range it wrote (node, class, shallow size, first edge, degree), in file order.
pub(crate) struct Placed {
    pub(super) out: Out,
    pub(super) rest: Vec<[u32; 5]>,
}

impl Placed {
    /// Objects left for [`apply_placed`].
    #[cfg(test)]
    pub(crate) fn left(&self) -> usize {
        self.rest.len()
    }
}

/// Finish a looked-up worker's output as pass 2 would have produced it over the full index:
/// `node_of(k)` is the node of the worker's `k`-th object. Its edge lists are written one
/// after the other into `dst`, which is [`Looked::room`] long and starts at `base` in the
/// joined list: each first its class edge if the entry is flagged, without the targets the
/// dump does not hold (those are counted). Each object whose node `nodes` holds is written
/// there (a node already written keeps its first object, as in [`apply_placed`]); the others
/// are left for [`apply_placed`]. `None` if an entry's node is not an object of the index, or
/// the lists do not fill `dst` exactly (neither can happen: every id met is indexed, and the
/// pass counted what it listed).
pub(crate) fn place(
    ix: &Index,
    l: Looked,
    dst: &mut Writer<'_, u32>,
    base: u32,
    nodes: NodeRange<'_>,
    mut node_of: impl FnMut(u32) -> u32,
) -> Option<Placed> {
    let Looked {
        mut out,
        targets,
        missing: mut missing_refs,
    } = l;
    let entries = std::mem::take(&mut out.nodes);
    let side = std::mem::take(&mut out.side);
    let sizes: Vec<u32> = ix.classes.iter().map(|c| c.instance_size).collect();
    let refs: Vec<u32> = class_refs(ix).collect();
    let mut rest = Vec::new();
    let (mut at, mut kept, mut s) = (0usize, 0usize, 0usize);
    let mut rooted_class_refs = 0u64;
    // (Slices taken once: a column is one branch per access otherwise.)
    let (es, ts, sides): (&[[u32; 2]], &[u32], &[u32]) = (&entries, &targets, &side);
    for (k, &[a, b]) in (0u32..).zip(es) {
        let c = a & CLASS_MASK;
        let (sh, d) = if is_prim(c, ix.prim_base) {
            (b, CLASS_EDGE * u32::from(a & PRIM_EDGE != 0))
        } else if a & SIDE != 0 {
            s += 1;
            (*sides.get(s - 1)?, b)
        } else {
            (*sizes.get(c as usize)?, b)
        };
        let n = node_of(k);
        if n as usize >= ix.len() {
            return None;
        }
        let start = kept;
        if d & CLASS_EDGE != 0 {
            let cn = *refs.get(c as usize)?;
            if cn == ROOTED {
                rooted_class_refs += 1;
            } else if cn == NONE {
                missing_refs += 1;
            } else {
                dst.push(cn)?;
                kept += 1;
            }
        }
        let d = (d & !CLASS_EDGE) as usize;
        for &x in ts.get(at..at.checked_add(d)?)? {
            if x != NONE {
                dst.push(x)?;
                kept += 1;
            }
        }
        at += d;
        let o = [n, c, sh, base + start as u32, (kept - start) as u32];
        match n.checked_sub(nodes.lo).map(|i| i as usize) {
            Some(i) if i < nodes.adj.len() => {
                if nodes.adj[i][0] == NONE {
                    nodes.class_of[i] = c;
                    nodes.shallow[i] = sh;
                    nodes.adj[i] = [o[3], o[4]];
                }
            }
            _ => rest.push(o),
        }
    }
    if kept != dst.room() || at != ts.len() || s != sides.len() {
        return None;
    }
    drop(entries);
    drop(side);
    drop(targets);
    out.stats.missing_refs += missing_refs;
    out.stats.rooted_class_refs += rooted_class_refs;
    out.stats.edges = kept as u64;
    for f in out.flags.iter_mut() {
        f.node = node_of(f.node);
        if f.node as usize >= ix.len() {
            return None;
        }
    }
    for w in out.watched.iter_mut() {
        w.1 = node_of(w.1);
    }
    Some(Placed { out, rest })
}

/// What a detector finds in one instance from its field bytes alone.
pub(crate) enum RoleFinding {
    /// A finding: its reason and detail.
    Flag(&'static str, String),
    /// A watched object (its id), a finding if it is in the dump (see [`flag_watched`]).
    Watched(u64),
}

/// The per-instance detectors: what an instance of a class of `role` shows in its field bytes
/// `data` (the full analysis's pass 2 and the report of what fits both ask this).
#[inline(always)]
pub(crate) fn role_finding(
    role: Role,
    data: &[u8],
    id_size: u32,
    bitmap_min_pixels: u64,
) -> Option<RoleFinding> {
    match role {
        Role::None | Role::Window | Role::NativeAllocationRegistry => None,
        Role::Activity { destroyed } => byte_at(data, Some(destroyed))
            .then(|| RoleFinding::Flag("Activity Leak", "mDestroyed is true".into())),
        Role::Fragment { manager, called } => {
            let fm = id_at(data, manager, id_size);
            (fm == Some(0) && byte_at(data, Some(called))).then(|| {
                RoleFinding::Flag(
                    "Fragment Leak",
                    "mFragmentManager is null and mCalled is true".into(),
                )
            })
        }
        Role::Bitmap { width, height } => {
            let (w, h) = (int_at(data, width)?, int_at(data, height)?);
            let px = w as u64 * h as u64;
            (w as i32 > 0 && h as i32 > 0 && px >= bitmap_min_pixels)
                .then(|| RoleFinding::Flag(BITMAP_FINDING, format!("{w}x{h}")))
        }
        Role::Watched { referent, retained } => {
            // -1: watched, not judged retained yet (LeakCanary skips it too).
            if retained.is_some_and(|o| long_at(data, o) == Some(-1)) {
                return None;
            }
            id_at(data, referent, id_size)
                .filter(|&r| r != 0)
                .map(RoleFinding::Watched)
        }
    }
}

/// The finding of a large Bitmap.
const BITMAP_FINDING: &str = "Bitmap Size Over Threshold";

/// The finding of a watched object still in the dump (see [`flag_watched`]).
pub(crate) const WATCHED_FINDING: &str = "Watched Object Retained";

/// The detail of the finding of a watched object.
pub(crate) const WATCHED_DETAIL: &str = "referent of a KeyedWeakReference";

pub(super) fn byte_at(data: &[u8], off: Option<u32>) -> bool {
    off.and_then(|o| data.get(o as usize))
        .is_some_and(|&b| b != 0)
}

pub(super) fn int_at(data: &[u8], off: u32) -> Option<u32> {
    let o = off as usize;
    data.get(o..o + 4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

pub(super) fn long_at(data: &[u8], off: u32) -> Option<i64> {
    let o = off as usize;
    let b = data.get(o..o + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(i64::from_be_bytes(a))
}

#[inline(always)]
pub(super) fn id_at(data: &[u8], off: u32, id_size: u32) -> Option<u64> {
    let o = off as usize;
    data.get(o..o + id_size as usize)
        .map(|b| read_id(b, id_size))
}

impl Visitor for Pass2<'_> {
    fn heap_dump_start(
        &mut self,
        offset: u64,
        tag: u8,
        len: u32,
        _raw: &[u8],
    ) -> Result<(), String> {
        self.out.segments.push(Segment {
            offset: offset.wrapping_add(self.delta) + 9,
            len: len as u64,
            tag,
            min_id: u64::MAX,
            max_id: 0,
        });
        Ok(())
    }

    fn sub(&mut self, offset: u64, s: &Sub<'_>, _raw: &[u8]) -> Result<(), String> {
        if let Some(e) = &self.err {
            return Err(e.clone());
        }
        let id = match *s {
            Sub::Class(ref c) => c.id,
            Sub::Instance { id, .. } | Sub::ObjectArray { id, .. } => id,
            _ => 0,
        };
        self.piece(offset.wrapping_add(self.delta), id);
        match *s {
            Sub::Root { .. } | Sub::HeapDumpInfo { .. } => {}
            Sub::Class(ref c) => self.class_dump(c),
            Sub::Instance {
                id, class_id, data, ..
            } => self.instance(id, class_id, data),
            Sub::ObjectArray {
                id, len, class_id, ..
            } => self.object_array(id, len, class_id),
            Sub::PrimitiveArray {
                id,
                len,
                ty,
                nodata,
                ..
            } => self.primitive_array(id, len, ty, nodata),
        }
        Ok(())
    }

    fn array_data(&mut self, data: &[u8]) -> Result<(), String> {
        if !self.in_array {
            return Ok(());
        }
        let id_size = self.ix.header.id_size as usize;
        for e in data.chunks_exact(id_size) {
            self.edge(read_id(e, id_size as u32));
        }
        Ok(())
    }

    fn array_end(&mut self) -> Result<(), String> {
        if self.in_array {
            self.in_array = false;
            self.end();
        }
        Ok(())
    }
}

/// Pass 2's work on each kind of sub-record, split out of [`Visitor::sub`], the hot loop of the
/// index: each is inlined into it (as the one function it was), so the split costs nothing.
impl Pass2<'_> {
    /// Start a new piece at the sub-record at `at` once the current one is long enough, and
    /// widen the current piece's id range to `id` (0: not an object).
    #[inline(always)]
    fn piece(&mut self, at: u64, id: u64) {
        if let Some(&last) = self.out.segments.last() {
            let end = last.offset + last.len;
            if at >= last.offset + PIECE && at < end {
                if let Some(l) = self.out.segments.last_mut() {
                    l.len = at - last.offset;
                }
                self.out.segments.push(Segment {
                    offset: at,
                    len: end - at,
                    tag: last.tag,
                    min_id: u64::MAX,
                    max_id: 0,
                });
            }
        }
        if id != 0 {
            if let Some(seg) = self.out.segments.last_mut() {
                seg.min_id = seg.min_id.min(id);
                seg.max_id = seg.max_id.max(id);
            }
        }
    }

    #[inline(always)]
    fn class_dump(&mut self, c: &ClassDump<'_>) {
        let id_size = self.ix.header.id_size;
        let ix = self.ix;
        let Some(_) = self.begin(c.id, ix.class_class, c.statics_raw.len() as u64) else {
            return;
        };
        self.out.stats.classes += 1;
        for (_, ty, v) in c.statics() {
            if ty == BasicType::Object {
                self.edge(read_id(v, id_size));
            }
        }
        self.edge(c.super_id);
        self.edge(c.loader_id);
        self.end();
    }

    #[inline(always)]
    fn instance(&mut self, id: u64, class_id: u64, data: &[u8]) {
        let id_size = self.ix.header.id_size;
        let ix = self.ix;
        let ci = match self.class_index(class_id) {
            Some(ci) => ci,
            None => {
                self.out.stats.unknown_class += 1;
                ix.unknown_class()
            }
        };
        if self.defer() {
            return self.instance_deferred(class_id, ci, data);
        }
        let cl = &ix.classes[ci as usize];
        let size = if cl.instance_size > 0 {
            cl.instance_size
        } else {
            data.len() as u32
        };
        let Some(n) = self.begin(id, ci, size as u64) else {
            return;
        };
        self.out.stats.instances += 1;
        if (data.len() as u32) < cl.data_len {
            self.out.stats.short_instances += 1;
        }
        // Instance -> its class (an instance keeps its class loaded). Deferred, the
        // edge is not kept as a raw id: the entry is flagged and [`place`] puts the
        // class's node first in its list (half the edges of a heap are these).
        self.class_edge(class_id, ci, cl.rooted);
        for &(off, _, _) in &cl.ref_slots {
            if let Some(t) = id_at(data, off, id_size) {
                self.edge(t);
            }
        }
        self.end();
        self.roles(n, cl.role, data);
    }

    /// [`Pass2::instance`] in one-pass mode, the instance of class index `ci` (of class object
    /// `class_id`): what [`Pass2::begin`], [`Pass2::class_edge`] and [`Pass2::end`] do there,
    /// with the entry made in registers and pushed once, after its edges (the most common
    /// sub-record: 10 M times at 10 M objects).
    #[inline(always)]
    fn instance_deferred(&mut self, class_id: u64, ci: u32, data: &[u8]) {
        let ix = self.ix;
        let id_size = ix.header.id_size;
        let cl = &ix.classes[ci as usize];
        let size = match cl.instance_size {
            0 => data.len() as u32,
            s => s,
        };
        let Some(n) = self.open_deferred() else {
            return;
        };
        let start = self.start as usize;
        let prim = is_prim(ci, ix.prim_base);
        let mut e = self.deferred_entry(ci, size);
        self.out.instances[ci as usize] += 1;
        self.out.stats.instances += 1;
        if (data.len() as u32) < cl.data_len {
            self.out.stats.short_instances += 1;
        }
        if cl.rooted {
            self.out.stats.rooted_class_refs += 1;
        } else if class_id != 0 && ci != ix.unknown_class() {
            imply_class_edge(&mut e, ci, ix.prim_base);
            self.out.class_edges[ci as usize] += 1;
        } else if class_id != 0 {
            self.raw.push(class_id);
        }
        for &(off, _, _) in &cl.ref_slots {
            if let Some(t) = id_at(data, off, id_size).filter(|&t| t != 0) {
                self.raw.push(t);
            }
        }
        let d = (self.raw.len() - start) as u32;
        if !prim {
            e[1] |= d;
        }
        self.out.stats.edges += d as u64;
        self.out.nodes.push(e);
        self.roles(n, cl.role, data);
    }

    /// The edge of the object begun last to its class object (`class_id`, [`Class::rooted`]
    /// if `rooted`; the object's class index is `ci`, a primitive array's its pseudo-class):
    /// none if the class is a listed root (in one-pass mode [`place`] leaves out those the
    /// prefix did not list), implied by its entry (one-pass mode, a known class), or kept as a
    /// raw id.
    #[inline(always)]
    fn class_edge(&mut self, class_id: u64, ci: u32, rooted: bool) {
        if rooted {
            self.out.stats.rooted_class_refs += 1;
        } else if self.defer() && class_id != 0 && ci != self.ix.unknown_class() {
            self.flag_class_edge(ci);
        } else {
            self.edge(class_id);
        }
    }

    /// Flag the entry begun last (of class index `ci`) with [`CLASS_EDGE`], or [`PRIM_EDGE`]
    /// for a primitive array (whose second word is its size).
    #[inline(always)]
    fn flag_class_edge(&mut self, ci: u32) {
        if let Some(e) = self.out.nodes.last_mut() {
            imply_class_edge(e, ci, self.ix.prim_base);
            self.out.class_edges[ci as usize] += 1;
        }
    }

    /// The per-instance detectors: flags (or watches) node `n` by its class's `role`, from the
    /// instance's field bytes `data` (see [`role_finding`]).
    #[inline(always)]
    fn roles(&mut self, n: u32, role: Role, data: &[u8]) {
        let id_size = self.ix.header.id_size;
        match role_finding(role, data, id_size, self.limits.bitmap_min_pixels) {
            None => {}
            Some(RoleFinding::Flag(reason, detail)) => self.flag(n, reason, detail),
            Some(RoleFinding::Watched(r)) => self.out.watched.push((r, n)),
        }
    }

    #[inline(always)]
    fn object_array(&mut self, id: u64, len: u32, class_id: u64) {
        let id_size = self.ix.header.id_size;
        let ix = self.ix;
        self.in_array = false;
        let ci = self.class_index(class_id).unwrap_or(ix.unknown_class());
        let bytes = array_bytes(len, id_size, id_size);
        let Some(n) = self.begin(id, ci, bytes) else {
            return;
        };
        self.out.stats.object_arrays += 1;
        if bytes + RAW_SLACK >= self.limits.array_min_bytes {
            let name = ix.classes[ci as usize].name.clone();
            self.flag(n, ARRAY_FINDING, format!("{name} of {len}"));
        }
        // Its class first, implied when deferred as an instance's is (see `instance`).
        self.class_edge(class_id, ci, ix.classes[ci as usize].rooted);
        self.in_array = true;
    }

    #[inline(always)]
    fn primitive_array(&mut self, id: u64, len: u32, ty: BasicType, nodata: bool) {
        let id_size = self.ix.header.id_size;
        let ix = self.ix;
        self.in_array = false;
        let pi = prim_index(ty) as u32;
        let ci = ix.prim_base + pi;
        let bytes = array_bytes(len, ty.size(id_size), id_size);
        let Some(n) = self.begin(id, ci, bytes) else {
            return;
        };
        self.out.stats.primitive_arrays += 1;
        if nodata {
            self.out.stats.stripped_arrays += 1;
        }
        if bytes + RAW_SLACK >= self.limits.array_min_bytes {
            self.flag(n, ARRAY_FINDING, format!("{} of {len}", prim_name(ty)));
        }
        // A primitive array -> its type's class object (`char[]`), as any other object.
        if let Some(c) = ix.classes.get(ix.prim_classes[pi as usize] as usize) {
            self.class_edge(c.id, ci, c.rooted);
        }
        self.end();
    }
}

/// Resolve watched referents to nodes and flag them.
pub(crate) fn flag_watched(ix: &mut Index, watched: Vec<(u64, u32)>) {
    let mut seen: HashMap<u32, ()> = HashMap::new();
    for (r, _wref) in watched {
        if let Some(n) = ix.node(r) {
            if seen.insert(n, ()).is_none() {
                ix.flags.push(Flag {
                    node: n,
                    reason: WATCHED_FINDING.into(),
                    detail: WATCHED_DETAIL.into(),
                });
            }
        }
    }
}

/// The detector reasons that mean "this object is leaking" (not merely large), the most
/// specific first.
pub(crate) const LEAK_REASONS: [&str; 4] = [
    "Activity Leak",
    "Fragment Leak",
    "Service Leak",
    WATCHED_FINDING,
];

/// How a flag's reason ranks when one object has several: the leak reasons in
/// [`LEAK_REASONS`]' order, then every other finding (a size, a count).
pub(crate) fn flag_rank(reason: &str) -> usize {
    LEAK_REASONS
        .iter()
        .position(|&r| r == reason)
        .unwrap_or(LEAK_REASONS.len())
}

/// One finding per object: a watched, destroyed Activity is one leak ("Activity Leak"), not
/// two; a large array that is watched is a watched object. Of an object's flags the one of the
/// best [`flag_rank`] is kept (ties: the first).
pub(crate) fn one_flag_per_node(ix: &mut Index) {
    let mut best: HashMap<u32, (usize, usize)> = HashMap::new();
    for (i, f) in ix.flags.iter().enumerate() {
        let r = flag_rank(&f.reason);
        let e = best.entry(f.node).or_insert((r, i));
        if r < e.0 {
            *e = (r, i);
        }
    }
    if best.len() == ix.flags.len() {
        return;
    }
    let mut i = 0;
    ix.flags.retain(|f| {
        i += 1;
        best.get(&f.node).is_some_and(|&(_, k)| k == i - 1)
    });
}
