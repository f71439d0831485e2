//! Dominator tree and retained sizes (semi-NCA), from a super-root whose children are the GC roots.
//!
//! Invariants:
//! - No recursion: the depth-first search and the path compression use explicit stacks, so a linked
//!   list of millions of objects cannot overflow the thread's stack.
//! - Work is near-linear in nodes + edges. Memory: the search ([`prepare`]) keeps a `u32` per node,
//!   one per reachable node and two per edge that may join a predecessor list (the edges outside
//!   the depth-first spanning tree that stay within one root's tree and do not point at a root),
//!   plus two bits per node, on top of the graph; [`finish`] runs without the graph (the caller
//!   frees it in between), with at most five `u32` and two bits per reachable node, the search's
//!   records (whose memory it then reuses), two `u32` per record listed and one per record of the
//!   largest block of them (see `Blocks`). The result keeps a `u32` per node, and two `u32` and a
//!   `u64` per reachable node.
//! - [`Dominators::idom`] is [`SUPER`] for objects dominated only by the super-root and
//!   [`UNREACHED`] for objects no root reaches strongly; their retained size is 0.
#![forbid(unsafe_code)]

use super::arrays::{bit, halves, pair, prefix_sums, set_bit};
use super::column::{Column, Grow};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The immediate dominator of objects dominated by nothing but the super-root.
pub const SUPER: u32 = u32::MAX - 1;
/// Not reachable from any root.
pub const UNREACHED: u32 = u32::MAX;

/// A directed graph over nodes `0..nodes()`; the successors of `v` are `succ(v)`.
pub trait Graph {
    fn nodes(&self) -> usize;
    fn succ(&self, v: u32) -> &[u32];
    /// A hint that `succ(v)` will be wanted soon (nothing by default).
    fn hint(&self, _v: u32) {}
    /// A hint that the lists stored right after `succ(v)` will be read soon (nothing by
    /// default): in a heap, objects allocated together point at each other and sit side by
    /// side, so the search often goes down into the next object's list.
    fn hint_after(&self, _v: u32) {}
    /// Where per-node arrays go if not in memory (none by default).
    fn scratch(&self) -> Option<&sys::scratch::Scratch> {
        None
    }
}

/// Immediate dominators and retained sizes. They are kept by depth-first (preorder) number,
/// as [`finish`] computes them: [`Dominators::idom`] and [`Dominators::retained`] answer by
/// node, and a scan of every reached object runs over `1..len()` in that order (a dominator
/// before the objects it dominates), reading [`Dominators::node_at`] and the others side by
/// side. (Mapping them all back to node numbers took a random write per object and another
/// 8 bytes per node at the analysis's memory peak.)
pub struct Dominators {
    /// Node -> its number ([`UNREACHED`] if no root reaches it).
    pre: Column<u32>,
    /// Number -> node; number 0 is the super-root.
    vertex: Grow<u32>,
    /// Number -> its immediate dominator's number (0: the super-root).
    idom: Column<u32>,
    /// Number -> retained size.
    retained: Grow<u64>,
    /// The roots actually used, in order: `roots` then the `late` ones that nothing else reached.
    pub roots_used: Vec<u32>,
    /// The tops asked for with [`Prepared::want_tops`] (see there), as (retained size, node),
    /// the largest first (and of equal sizes the larger node first); none if not asked.
    tops: Vec<(u64, u32)>,
}

impl Dominators {
    /// The tops of the dominator tree asked for with [`Prepared::want_tops`], found as the
    /// retained sizes were summed: (retained size, node), the largest first, and of equal
    /// sizes the larger node first. Empty if none were asked for.
    pub fn tops(&self) -> &[(u64, u32)] {
        &self.tops
    }
    /// The numbers in use: the super-root's (0) and those of the reached objects (`1..len()`).
    pub fn len(&self) -> usize {
        self.vertex.len()
    }
    /// Whether nothing is reached (only the super-root is numbered).
    pub fn is_empty(&self) -> bool {
        self.vertex.len() <= 1
    }
    /// Objects reachable from the roots (the super-root not counted).
    pub fn reachable(&self) -> u64 {
        (self.vertex.len() - 1) as u64
    }
    /// Node `v`'s number; [`UNREACHED`] if no root reaches it (or it is no node).
    pub fn number(&self, v: u32) -> u32 {
        self.pre.get(v as usize).copied().unwrap_or(UNREACHED)
    }
    /// The node numbered `k` (`1..len()`).
    pub fn node_at(&self, k: u32) -> u32 {
        self.vertex[k as usize]
    }
    /// The number of the immediate dominator of the object numbered `k` (0: the super-root).
    pub fn idom_at(&self, k: u32) -> u32 {
        self.idom[k as usize]
    }
    /// The retained size of the object numbered `k`.
    pub fn retained_at(&self, k: u32) -> u64 {
        self.retained[k as usize]
    }
    /// Node `v`'s immediate dominator: a node, [`SUPER`] if only the super-root dominates it,
    /// [`UNREACHED`] if no root reaches it.
    pub fn idom(&self, v: u32) -> u32 {
        match self.number(v) {
            UNREACHED => UNREACHED,
            k => match self.idom[k as usize] {
                0 => SUPER,
                d => self.vertex[d as usize],
            },
        }
    }
    /// Node `v`'s retained size (0 if no root reaches it).
    pub fn retained(&self, v: u32) -> u64 {
        match self.number(v) {
            UNREACHED => 0,
            k => self.retained[k as usize],
        }
    }
}

/// Compute dominators of `g` from a super-root whose children are `roots`, then those of `late`
/// that the roots did not reach (e.g. class objects no root holds). `shallow(v)` is node `v`'s
/// own size.
pub fn compute<G: Graph>(
    g: &G,
    shallow: impl Fn(u32) -> u64 + Sync,
    roots: &[u32],
    late: &[u32],
) -> Dominators {
    finish(prepare(g, roots, late), shallow, 1)
}

/// Graphs with fewer vertices than this are not given a second thread (see [`finish`]).
pub(crate) const PAR_MIN: usize = 1 << 16;

/// The graph-dependent half: the depth-first search's numbering and the edges it kept for the
/// predecessor lists. After it, the caller may free the graph before [`finish`], the
/// memory-hungry half.
pub struct Prepared {
    pre: Column<u32>,
    /// The numbers given (the reached vertices and the super-root). Which node has each is
    /// not kept as the search goes: [`finish`] reads it off `pre` once the graph is gone, a
    /// `u32` per vertex fewer at the analysis's memory peak.
    count: usize,
    parent: Grow<u32>,
    /// Edges outside the spanning tree within one root's tree, into a vertex that is not a
    /// root, as (target, source) numbers (target in the high half), in the order the search
    /// met them: the predecessor lists are made of them, and [`finish`] then reuses their
    /// memory.
    kept: Grow<u64>,
    /// Bit `k`: vertex `k`'s semi-dominator is the super-root, known from one edge (see
    /// [`prepare`]); its predecessor list is then left empty.
    zero: Vec<u64>,
    roots_used: Vec<u32>,
    /// Where [`finish`]'s arrays go (the graph's scratch).
    scratch: Option<sys::scratch::Scratch>,
    /// The holders' seeds and how many tops [`finish`] keeps ([`Prepared::want_tops`]).
    tops: Option<(Vec<u32>, usize)>,
}

impl Prepared {
    /// Ask [`finish`] for the tops of the dominator tree once it is cut at the holders
    /// ([`Dominators::tops`]): of the objects that are not holders and whose immediate
    /// dominator is the super-root or a holder, the `want` that retain the most (of equal
    /// sizes, the smaller node). The holders are the nodes of `seeds` that a root reaches and
    /// every object that dominates one of them. (The report's dominator candidates, with the
    /// class objects as seeds. They are kept as the retained sizes are summed, where each
    /// vertex's sum is final when the pass reaches it: a scan of every vertex after it took 8
    /// ms at 10 M objects, on two threads, reading 120 MB again.)
    pub fn want_tops(&mut self, seeds: Vec<u32>, want: usize) {
        self.tops = Some((seeds, want));
    }
}

/// See [`compute`].
///
/// The search starts one tree per root (the super-root's children), numbered one after the
/// other. An edge into a vertex `w` of an earlier tree, from a vertex `v` of a later one, makes
/// the super-root `w`'s semi-dominator: the path super-root → `v`'s root → … → `v` → `w` runs
/// through vertices numbered above `w` only, and nothing is lower than the super-root. So is a
/// root that an earlier root's tree reached (the super-root's edge to it). Such a vertex needs
/// none of its predecessors: it is flagged in `zero` and its list is not built. Every root is
/// known before the search, so an edge into one is never recorded (a root that starts its own
/// tree has the super-root as its parent, which ends its search at once): on the dump below
/// that drops 1.77 M of the 3.59 M records, mostly edges from instances to their classes,
/// which HotSpot lists as roots (sticky classes), and 516 k of 989 k on the ART-style bench
/// dump. In a heap the objects many others point at are often of one of these kinds: the
/// lists shrink from 3.61 M to 1.39 M edges on a 540 MB Java dump, by 82 % on the Android
/// fixtures. The other edges outside the spanning tree go into the lists, and [`finish`] stops
/// reading a list once the value reaches the super-root (on that dump it then evaluates 27 k
/// of them; all 3.61 M were before).
///
/// The search records each edge that may join a list with both ends' numbers, as it meets it,
/// and [`finish`] builds the lists from those records once the graph is gone. (Marking the edge
/// instead, one bit each, meant looking its target's number up again, a random read per edge,
/// while the graph was still held. The records take 8 bytes per such edge, 15 MB on the dump
/// above, where the search and the lists now take about 15 % less time, and 10 % less on the
/// ART-style bench dump.)
pub fn prepare<G: Graph>(g: &G, roots: &[u32], late: &[u32]) -> Prepared {
    let gated: Vec<(u32, u32)> = late.iter().map(|&r| (r, UNGATED)).collect();
    prepare_gated(g, roots, &gated)
}

/// Start loading what the search reads next about each of successors `s`: their numbers and
/// where their own successors are.
#[inline(always)]
fn hint_all<G: Graph>(g: &G, pre: &[u32], s: &[u32]) {
    for &w in s {
        sys::mapped::prefetch_at(pre, w as usize);
        g.hint(w);
    }
}

/// A late root's gate that is always open (see [`prepare_gated`]).
pub const UNGATED: u32 = u32::MAX;

/// [`prepare`] with late roots `(vertex, gate)`: after the roots, each vertex nothing reached
/// becomes a root once its gate is reached (or at once if the gate is [`UNGATED`]), repeated
/// until no more do (a class is a root where its loader is reachable, and the classes it
/// keeps can make another loader reachable).
pub fn prepare_gated<G: Graph>(g: &G, roots: &[u32], late: &[(u32, u32)]) -> Prepared {
    let n = g.nodes();
    // --- Depth-first search: preorder numbers, spanning-tree parents. 0 is the super-root.
    let scratch = g.scratch();
    let (mut pre, _) = Column::filled(n, UNREACHED, scratch);
    let mut parent: Grow<u32> = Grow::with_capacity(n + 1, scratch);
    // The super-root's parent; the next number is `parent.len()`.
    parent.push(0);
    let mut stack: Vec<(u32, u32)> = Vec::new();
    let mut roots_used = Vec::new();
    // The edges that may go into the predecessor lists, as (target, source) numbers (the
    // lists are made of them once no vertex can be flagged any more); which are flagged.
    let mut kept: Grow<u64> = Grow::new_in(scratch);
    let mut zero = vec![0u64; (n + 1).div_ceil(64)];
    // The roots, by node: an edge into one is not recorded.
    let mut is_root = vec![0u64; n.div_ceil(64)];
    for &r in roots {
        if (r as usize) < n {
            set_bit(&mut is_root, r as usize);
        }
    }
    let mut dfs_from = |r: u32, pre: &mut [u32], parent: &mut Grow<u32>| -> bool {
        if pre[r as usize] != UNREACHED {
            return false;
        }
        // This tree's vertices are numbered from `start` on.
        let start = parent.len() as u32;
        pre[r as usize] = start;
        parent.push(0);
        // The vertex being searched (its number and successors, the next one to read);
        // `stack` holds the vertices above it, each with the next successor to read. A
        // vertex's successors are looked up when it is reached and again when the search
        // comes back to it, not at each of its edges.
        let (mut v, mut pv, mut s, mut i) = (r, start, g.succ(r), 0usize);
        hint_all(g, pre, s);
        loop {
            if let Some(&w) = s.get(i) {
                i += 1;
                let pw = pre[w as usize];
                if pw == UNREACHED {
                    let k = parent.len() as u32;
                    pre[w as usize] = k;
                    parent.push(pv);
                    stack.push((v, i as u32));
                    (v, pv, s, i) = (w, k, g.succ(w), 0);
                    hint_all(g, pre, s);
                    // (The first read of a new vertex's list was the search's largest
                    // stall: 21 % of its samples on a 10 M-object dump.)
                    g.hint_after(w);
                } else if pw >= start {
                    if !bit(&is_root, w as usize) {
                        kept.push(pair(pw, pv));
                    }
                } else {
                    set_bit(&mut zero, pw as usize);
                }
            } else if let Some((u, j)) = stack.pop() {
                (v, pv, s, i) = (u, pre[u as usize], g.succ(u), j as usize);
            } else {
                break;
            }
        }
        true
    };
    for &r in roots {
        if (r as usize) < n {
            dfs_from(r, &mut pre, &mut parent);
            roots_used.push(r);
        }
    }
    loop {
        let mut more = false;
        for &(r, gate) in late {
            let open = gate == UNGATED || pre.get(gate as usize).is_some_and(|&p| p != UNREACHED);
            if open && (r as usize) < n && dfs_from(r, &mut pre, &mut parent) {
                roots_used.push(r);
                more = true;
            }
        }
        if !more {
            break;
        }
    }
    roots_used.sort_unstable();
    roots_used.dedup();
    let count = parent.len();
    for &r in &roots_used {
        let p = pre[r as usize] as usize;
        if parent[p] != 0 {
            set_bit(&mut zero, p);
        }
    }

    zero.truncate(count.div_ceil(64));
    Prepared {
        pre,
        count,
        parent,
        kept,
        zero,
        roots_used,
        scratch: scratch.cloned(),
        tops: None,
    }
}

/// See [`compute`]. With `threads` above 1 (and a graph that is not small), the own sizes are read
/// on a second thread.
pub fn finish(p: Prepared, shallow: impl Fn(u32) -> u64 + Sync, threads: usize) -> Dominators {
    finish_in(p, shallow, threads, PAR_MIN, SHIFT, CAP)
}

/// The predecessor lists are sorted by target in blocks of `1 << SHIFT` numbers (see [`semis`]).
const SHIFT: u32 = 12;
/// Sources of a target read before its block is sorted (see [`semis`]).
const CAP: usize = 16;

/// [`finish`], with a second thread from `min` vertices on, the predecessor lists cut into
/// blocks of `1 << shift` numbers, and `cap` sources per target read before a block is sorted.
fn finish_in(
    p: Prepared,
    shallow: impl Fn(u32) -> u64 + Sync,
    threads: usize,
    min: usize,
    shift: u32,
    cap: usize,
) -> Dominators {
    let Prepared {
        pre,
        count,
        parent,
        kept,
        zero,
        roots_used,
        scratch,
        tops,
    } = p;
    let mut kept = kept;
    // Which node has each number, and the objects' own sizes by number, are written in one
    // pass over the nodes (the sizes read in node order, each written where its number says),
    // on a second thread while this one groups the records; the semi-dominator pass then
    // writes its few words over the sizes (see [`Forest`]) and puts them back after. Both
    // arrays are the result's, from the memory the caller just freed (the graph's): growing
    // the records' memory to hold a word per vertex instead faulted in fresh pages (17 ms at
    // 10 M objects), and the own sizes took a pass of their own after the dominators.
    let mut vertex: Grow<u32> = Grow::with_capacity(count, scratch.as_ref());
    let mut ret: Grow<u64> = Grow::with_capacity(count, scratch.as_ref());
    let numbered = |vertex: &mut Grow<u32>, ret: &mut Grow<u64>| {
        vertex.set_len_with(count, SUPER);
        ret.set_len_with(count, 0);
        let (vs, rs): (&mut [u32], &mut [u64]) = (vertex, ret);
        for (v, &k) in pre.iter().enumerate() {
            if k != UNREACHED {
                vs[k as usize] = v as u32;
                rs[k as usize] = shallow(v as u32);
            }
        }
    };
    let blocks = if threads > 1 && count >= min {
        std::thread::scope(|s| {
            let h = s.spawn(|| numbered(&mut vertex, &mut ret));
            let b = Blocks::new(count, &mut kept, &zero, shift, scratch.as_ref());
            super::joined(h);
            b
        })
    } else {
        numbered(&mut vertex, &mut ret);
        Blocks::new(count, &mut kept, &zero, shift, scratch.as_ref())
    };
    drop(kept);
    // --- Semi-dominators, with path compression over the forest of processed vertices.
    // `parent` doubles as the forest's ancestor links, then holds the immediate dominators.
    // `ret` holds a word (label and semi-dominator) for the few vertices that need one (see
    // [`Forest`]); the others' words are never written (80 MB at 10 M objects).
    let mut anc = parent;
    // Where the retained sizes' sums split over two threads, chosen while `anc` still holds
    // the tree parents (the passes below overwrite them).
    let split = (threads > 1 && count >= min)
        .then(|| subtree_split(&anc))
        .flatten();
    let mut has = vec![0u64; count.div_ceil(64)];
    let mut f = Forest {
        anc: &mut anc,
        sl: &mut ret,
        has: &mut has,
        path: Vec::new(),
    };
    let own = semis(&mut f, &blocks, &zero, cap, scratch.as_ref());
    drop(blocks);
    drop(zero);
    // --- Immediate dominators, in `anc`'s memory.
    idoms(&mut f, &own);
    drop(own);
    // The own sizes where words were.
    for (i, &m) in has.iter().enumerate() {
        let mut m = m;
        while m != 0 {
            let w = i * 64 + m.trailing_zeros() as usize;
            m &= m - 1;
            ret[w] = shallow(vertex[w]);
        }
    }
    drop(has);
    let idom = anc.into_column();

    // --- Retained sizes: children have larger preorder numbers than their dominators. The
    // results stay in preorder numbers (see [`Dominators`]). The tops asked for are kept as
    // the sums are made.
    let (seeds, want) = tops.unwrap_or_default();
    let holder = holders(&pre, &idom, &seeds);
    let mut best = Best::new(&holder, &vertex, want);
    sum_retained(&mut ret, &idom, split, &mut best);
    let tops = best.into_tops();
    Dominators {
        pre,
        vertex,
        idom,
        retained: ret,
        roots_used,
        tops,
    }
}

/// The holders of [`Prepared::want_tops`], a bit each by number: every reached node of `seeds`
/// and every vertex that dominates one.
fn holders(pre: &[u32], idom: &[u32], seeds: &[u32]) -> Vec<u64> {
    let mut holder = vec![0u64; idom.len().div_ceil(64)];
    for &v in seeds {
        let mut k = pre.get(v as usize).copied().unwrap_or(UNREACHED);
        while k != 0 && k != UNREACHED && !bit(&holder, k as usize) {
            set_bit(&mut holder, k as usize);
            k = idom[k as usize];
        }
    }
    holder
}

/// A top's rank in [`Best`]'s heap: retained size, then the smaller node (the heap's least is
/// the first to go).
type TopKey = Reverse<(u64, Reverse<u32>)>;

/// The tops of [`Prepared::want_tops`] among the vertices offered so far: the `want` largest by
/// (retained size, then the smaller node), whatever the order the vertices come in.
struct Best<'a> {
    holder: &'a [u64],
    vertex: &'a [u32],
    want: usize,
    heap: BinaryHeap<TopKey>,
    /// Once `want` are kept, the least size kept: a vertex retaining less cannot be one, and
    /// is passed over on its size alone (nothing else read). Before, 0; with none wanted, all
    /// pass over.
    floor: u64,
}

impl<'a> Best<'a> {
    fn new(holder: &'a [u64], vertex: &'a [u32], want: usize) -> Self {
        Best {
            holder,
            vertex,
            want,
            heap: BinaryHeap::with_capacity(want.saturating_add(1).min(1 << 16)),
            floor: if want == 0 { u64::MAX } else { 0 },
        }
    }

    /// Another, empty, for a second thread's share.
    fn fresh(&self) -> Self {
        Best::new(self.holder, self.vertex, self.want)
    }

    /// Vertex `k`, whose immediate dominator is `d`, retains `r` (its final sum). Inlined
    /// into the sums' loops: nearly every vertex is passed over on its size.
    #[inline(always)]
    fn see(&mut self, k: usize, d: usize, r: u64) {
        if r >= self.floor && self.want != 0 {
            self.offer(k, d, r);
        }
    }

    #[inline(never)]
    fn offer(&mut self, k: usize, d: usize, r: u64) {
        if bit(self.holder, k) || (d != 0 && !bit(self.holder, d)) {
            return;
        }
        self.keep((r, Reverse(self.vertex[k])));
    }

    fn keep(&mut self, key: (u64, Reverse<u32>)) {
        if self.heap.len() < self.want {
            self.heap.push(Reverse(key));
        } else if self.heap.peek().is_some_and(|top| top.0 < key) {
            self.heap.pop();
            self.heap.push(Reverse(key));
        }
        if self.heap.len() >= self.want {
            self.floor = self.heap.peek().map_or(0, |top| top.0 .0);
        }
    }

    /// Take in what `other` kept (of a share of the vertices).
    fn merge(&mut self, other: Best<'_>) {
        for Reverse(key) in other.heap {
            self.keep(key);
        }
    }

    /// The tops kept, as [`Dominators::tops`] hands them out.
    fn into_tops(self) -> Vec<(u64, u32)> {
        let mut tops: Vec<(u64, u32)> = self
            .heap
            .into_iter()
            .map(|Reverse((r, Reverse(v)))| (r, v))
            .collect();
        // (The library's one sort: the order is the same, every node being another.)
        sys::order::sort_by(&mut tops, |a, b| b.cmp(a));
        tops
    }
}

/// At most this many numbers before a split's range (see [`subtree_split`]); the thread that
/// sums the range keeps what it adds to them in an array of this many words (1 MiB).
const SPLIT_BELOW: usize = 1 << 17;

/// A range of numbers `[a, b)` whose retained sizes can be summed on a second thread (see
/// [`sum_retained`]), chosen from the tree parents (`parent[k]`, the number of `k`'s parent in
/// the depth-first search's tree; 0 is the super-root) so that the two threads' shares are
/// about even, or `None` if no range near the middle gains a quarter of the time.
///
/// Why such a range works: an immediate dominator is a tree ancestor, and a tree's subtree is a
/// range of preorder numbers. If `b`'s parent is below `a`, so is every ancestor of `b`, and no
/// vertex of `[a, b)` has a descendant at `b` or after (its subtree would hold `b` too): sums
/// within `[a, b)` go only to `[a, b)` or below `a`, and the vertices from `b` on add nothing
/// to `[a, b)`. Taking `a` just past `b`'s parent, the work is `b - a` on one thread beside
/// `count - b` on the other, then `a` after both: `b` is sought outward from the middle (a
/// sixteenth of the numbers each way at most), stopping at the first that is within an eighth
/// of even. In a heap, the middle vertex's parent is often an early collection's array (the
/// 10 M-object bench dump: number 5,964 for a `HashMap`'s table).
fn subtree_split(parent: &[u32]) -> Option<(usize, usize)> {
    let count = parent.len();
    let cost = |b: usize| -> Option<usize> {
        let a = *parent.get(b)? as usize + 1;
        (a < b && a <= SPLIT_BELOW).then(|| (b - a).max(count - b) + a)
    };
    let mid = count / 2;
    let mut best: Option<(usize, usize)> = None;
    for j in 0..=count / 16 {
        for b in [mid + j, mid.wrapping_sub(j)] {
            if let Some(c) = cost(b) {
                if best.is_none_or(|(bc, _)| c < bc) {
                    best = Some((c, b));
                }
            }
        }
        if best.is_some_and(|(c, _)| c <= count / 2 + count / 8) {
            break;
        }
    }
    let (c, b) = best?;
    (c <= count - count / 4).then(|| (parent[b] as usize + 1, b))
}

/// The retained sizes: each vertex's own size (in `ret` by number) plus its children's in the
/// dominator tree (`idom`, by number), children first: every immediate dominator has a smaller
/// number than its vertex, so one pass down the numbers sums them. With a `split` `[a, b)` (see
/// [`subtree_split`]) the range is summed on a second thread (what it adds below `a` kept aside)
/// while this one sums from the end down to `b`; then the rest, down from `a`. Each vertex's
/// sum, final when the pass reaches it, is offered to `best` (each thread keeps its own).
fn sum_retained(ret: &mut [u64], idom: &[u32], split: Option<(usize, usize)>, best: &mut Best) {
    let mut down_from = ret.len();
    if let Some((a, b)) = split {
        let (low, rest) = ret.split_at_mut(a);
        let (range, high) = rest.split_at_mut(b - a);
        let mut aside = vec![0u64; a];
        let mut other = best.fresh();
        std::thread::scope(|s| {
            let h = s.spawn(|| sum_down(range, a, idom, &mut aside, &mut other));
            // (What the vertices from `b` on add is never in `[a, b)`: see [`subtree_split`].)
            sum_down(high, b, idom, low, best);
            super::joined(h);
        });
        best.merge(other);
        for (x, y) in low.iter_mut().zip(&aside) {
            *x += y;
        }
        down_from = a;
    }
    // The rest, where every dominator is in `ret` (the super-root, 0, adds to no one). (Not
    // [`sum_down`] with the super-root below: the test of where each dominator is took this
    // loop from 1.4 to 3.3 ms on the ART-style bench dump, which gets no split.)
    for k in (1..down_from).rev() {
        let (d, r) = (idom[k] as usize, ret[k]);
        ret[d] += r;
        best.see(k, d, r);
    }
}

/// Add each vertex's sum to its immediate dominator's, from the last vertex down: the vertices
/// `first..first + span.len()`, their sums in `span`; a dominator below `first` is in `below`
/// (numbers from 0). Each of [`sum_retained`]'s two threads sums its share so.
fn sum_down(span: &mut [u64], first: usize, idom: &[u32], below: &mut [u64], best: &mut Best) {
    for i in (0..span.len()).rev() {
        let (d, r) = (idom[first + i] as usize, span[i]);
        match d.checked_sub(first) {
            Some(j) => span[j] += r,
            None => below[d] += r,
        }
        best.see(first + i, d, r);
    }
}

/// The records of the predecessor lists: the `kept` edges whose target is not flagged in
/// `zero`, as (target, source) numbers, grouped by block of targets (`1 << shift` numbers), in
/// the search's order within a block. Spanning-tree edges are not in them: a vertex's
/// semi-dominator search starts at its parent anyway (an unprocessed vertex offers its own
/// number). In a heap nearly every object has one referrer, so this halves them; the flags
/// leave out most of the rest.
///
/// A block's records are sorted by target only when [`semis`] comes to it, with counters for
/// the block alone (in cache). A counting sort over all the numbers at once took an array of
/// a `u32` per vertex to count, sum and fill, and another pass over it in the semi-dominator
/// pass, while a few hundred thousand vertices have a list at all: at 10 M objects, 10 M
/// vertices, 3.95 M listed records, 3.40 M of them in the lists of six class objects.
struct Blocks {
    /// The records, block by block.
    recs: Column<u64>,
    /// Block `k`'s records are `recs[starts[k]..starts[k + 1]]`.
    starts: Vec<u32>,
    shift: u32,
    /// The most records in one block.
    longest: usize,
}

impl Blocks {
    /// The records' memory (`kept`) is the caller's to reuse after.
    fn new(
        count: usize,
        kept: &mut [u64],
        zero: &[u64],
        shift: u32,
        scratch: Option<&sys::scratch::Scratch>,
    ) -> Blocks {
        // Counts go to index b + 2, so that after the prefix sums `starts[b + 1]` is where
        // block b starts; filling advances it to where b ends, which is `starts[b + 1]` as the
        // finished index wants it. The counting pass moves the records it keeps to the front,
        // in order, so the filling pass reads only those (half of them at 10 M).
        let blocks = count.div_ceil(1 << shift);
        let mut starts = vec![0u32; blocks + 2];
        let mut listed = 0;
        for i in 0..kept.len() {
            let e = kept[i];
            let (pw, _) = halves(e);
            if !bit(zero, pw as usize) {
                starts[(pw >> shift) as usize + 2] += 1;
                kept[listed] = e;
                listed += 1;
            }
        }
        let longest = starts.iter().copied().max().unwrap_or(0) as usize;
        prefix_sums(&mut starts);
        let (mut recs, _) = Column::filled(listed, 0u64, scratch);
        let r: &mut [u64] = &mut recs;
        for &e in &kept[..listed] {
            let c = &mut starts[(halves(e).0 >> shift) as usize + 1];
            r[*c as usize] = e;
            *c += 1;
        }
        starts.truncate(blocks + 1);
        Blocks {
            recs,
            starts,
            shift,
            longest,
        }
    }
}

/// The forest of processed vertices in the semi-dominator pass (Lengauer and Tarjan's path
/// compression). A processed vertex's label (a vertex on its forest path with the smallest
/// semi-dominator seen) and semi-dominator are its own number and its tree parent until said
/// otherwise: only then is its word in `sl` written and its bit in `has` set. Until its bit is
/// set, a vertex's link in `anc` is its tree parent (the link is moved only after the word is
/// written). At 10 M objects one vertex in a hundred needs a word (103 k).
struct Forest<'a> {
    /// Ancestor links: a vertex's tree parent, moved up by path compression.
    anc: &'a mut [u32],
    /// Label (high half) and semi-dominator, where `has` says so; the rest is not read.
    sl: &'a mut [u64],
    has: &'a mut [u64],
    path: Vec<u32>,
}

impl Forest<'_> {
    /// Processed vertex `x`'s label.
    #[inline]
    fn label(&self, x: u32) -> u32 {
        match bit(self.has, x as usize) {
            true => label(self.sl[x as usize]),
            false => x,
        }
    }

    /// Processed vertex `x`'s semi-dominator.
    #[inline]
    fn semi(&self, x: u32) -> u32 {
        match bit(self.has, x as usize) {
            true => semi(self.sl[x as usize]),
            false => self.anc[x as usize],
        }
    }

    /// `s` lowered by the candidates that predecessors `vs` offer to vertex `w` (a
    /// predecessor below `w` offers itself, one above the smallest semi-dominator on its
    /// forest path): it stops at the super-root.
    #[inline]
    fn lower(&mut self, mut s: u32, vs: &[u32], w: usize) -> u32 {
        for &v in vs {
            if s == 0 {
                break;
            }
            let u = self.eval(v, w as u32 + 1);
            s = s.min(if u as usize > w { self.semi(u) } else { u });
        }
        s
    }

    /// The vertex with the smallest semi-dominator on the forest path from `v` up to (not
    /// including) the first vertex not yet processed (numbers below `linked`), compressing the
    /// path. An unprocessed `v` is its own answer. Only the links of vertices above `linked`
    /// change: a vertex's link is to a smaller number, and a link is moved only if it is at
    /// least `linked`. Every vertex on the path is processed, and so is every label there (a
    /// label is a vertex on the path, or one that was).
    #[inline]
    fn eval(&mut self, v: u32, linked: u32) -> u32 {
        if v < linked {
            return v;
        }
        let anc = &mut *self.anc;
        if anc[v as usize] < linked {
            return self.label(v);
        }
        let mut x = v;
        while anc[x as usize] >= linked {
            self.path.push(x);
            x = anc[x as usize];
        }
        // x is the topmost processed vertex on the path; its ancestor is not processed.
        let mut p = x;
        let mut p_label = self.label(p);
        while let Some(y) = self.path.pop() {
            let yu = y as usize;
            if !bit(self.has, yu) {
                // Its word, before its link moves.
                self.sl[yu] = pair(y, self.anc[yu]);
                set_bit(self.has, yu);
            }
            self.anc[yu] = self.anc[p as usize];
            let y_label = label(self.sl[yu]);
            if self.semi(p_label) < self.semi(y_label) {
                self.sl[yu] = pair(p_label, semi(self.sl[yu]));
            } else {
                p_label = y_label;
            }
            p = y;
        }
        self.label(v)
    }
}

/// The bits `first..first + len` of `bits` (`len` at most 64, within one word), from the low one.
#[inline]
fn bits_at(bits: &[u64], first: usize, len: usize) -> u64 {
    let mask = if len >= 64 { !0 } else { (1u64 << len) - 1 };
    bits.get(first / 64)
        .map_or(0, |&x| (x >> (first % 64)) & mask)
}

/// The semi-dominator pass, vertices in decreasing order, block by block (see [`Blocks`]). Only the
/// vertices with a predecessor list or flagged in `zero` are looked at (their bits, a word at a
/// time): every other vertex's semi-dominator is its tree parent, which its implicit word in `f`
/// already says. Nothing is below the super-root (0): once a vertex's value reaches it, the rest of
/// its predecessors cannot change it (skipping their `eval` only skips some path compression).
/// Returns, for each vertex whose semi-dominator is not its tree parent, (the vertex, its tree
/// parent) in decreasing order: path compression may move its link later, and [`idoms`] starts from
/// the tree parent.
///
/// A block's records are read once, keeping the first `cap` sources of each target and where its
/// others are. If those do not take a target to the super-root, the block is read again from its
/// next record, until they do or its last record; once such reads add up to the block's length, the
/// block is sorted whole instead ([`Sorted`]), so the work stays linear. In a heap the vertices
/// with long lists are class objects, which reach the super-root within a few dozen records, near
/// the start of their block: at 10 M objects six lists hold 3.40 M of the 3.95 M records, all in
/// one block; they reach it within 30 records each, all among the block's first 1,334, and the pass
/// evaluates 68,642 records in all. (Sorting every block took about as long as the rest of the
/// pass: a count and a cursor per record, each a chain of stores to one counter when one target has
/// most of a block's records.)
fn semis(
    f: &mut Forest,
    b: &Blocks,
    zero: &[u64],
    cap: usize,
    scratch: Option<&sys::scratch::Scratch>,
) -> Grow<u64> {
    let size = 1usize << b.shift;
    let span = size.min(64);
    // Per target within a block: its count of records up to `cap + 1`, its first `cap`
    // sources, where its record after those is and where its last one is.
    let (mut cnt, mut from, mut last) = (vec![0u32; size], vec![0u32; size], vec![0u32; size]);
    let mut first = vec![0u32; size * cap];
    let mut listed = vec![0u64; size.div_ceil(64)];
    let mut sorted = Sorted::new(size);
    let recs: &[u64] = &b.recs;
    let mut own = Grow::new_in(scratch);
    for k in (0..b.starts.len() - 1).rev() {
        let lo = k << b.shift;
        let block = &recs[b.starts[k] as usize..b.starts[k + 1] as usize];
        for (q, &e) in block.iter().enumerate() {
            let (pw, v) = halves(e);
            let t = pw as usize - lo;
            let c = cnt[t] as usize;
            // (Past `cap + 1` the count is not written: a target with most of the records
            // would make a chain of stores to one place.)
            if c <= cap {
                if c < cap {
                    first[t * cap + c] = v;
                } else {
                    from[t] = q as u32;
                }
                if c == 0 {
                    set_bit(&mut listed, t);
                }
                cnt[t] = c as u32 + 1;
            }
            last[t] = q as u32;
        }
        // Records read again for the targets whose first ones were not enough; the block is
        // sorted whole once they reach its length.
        let (mut again, mut whole) = (0, false);
        for i in (0..listed.len()).rev() {
            let l = std::mem::take(&mut listed[i]);
            let z = bits_at(zero, lo + i * 64, span);
            let mut m = l | z;
            while m != 0 {
                let j = 63 - m.leading_zeros() as usize;
                m ^= 1 << j;
                let (t, w) = (i * 64 + j, lo + i * 64 + j);
                // Still `w`'s tree parent: path compression moves only the links of
                // vertices above `w + 1` (see [`Forest::eval`]).
                let tp = f.anc[w];
                let mut s = if z >> j & 1 == 1 { 0 } else { tp };
                if l >> j & 1 == 1 {
                    let n = std::mem::take(&mut cnt[t]) as usize;
                    s = f.lower(s, &first[t * cap..t * cap + n.min(cap)], w);
                    if s != 0 && n > cap {
                        // Its other records, where they lie, within the budget.
                        let (mut q, end) = (from[t] as usize, last[t] as usize + 1);
                        while s != 0 && q < end && again < block.len() && !whole {
                            let (pw, v) = halves(block[q]);
                            if pw as usize == w {
                                s = f.lower(s, &[v], w);
                            }
                            (q, again) = (q + 1, again + 1);
                        }
                        if s != 0 && q < end {
                            if !whole {
                                sorted.sort(block, lo, b.longest, scratch);
                                whole = true;
                            }
                            s = f.lower(s, sorted.list(t), w);
                        }
                    }
                }
                if s != tp {
                    f.sl[w] = pair(w as u32, s);
                    set_bit(f.has, w);
                    own.push(pair(w as u32, tp));
                }
            }
        }
        if whole {
            sorted.clear();
        }
    }
    own
}

/// A block's records sorted by target, for the targets whose first sources were not enough,
/// once reading the others where they lie would pass the block's length (see [`semis`]).
struct Sorted {
    /// Per target: its count of records, and where its sources end in `buf`.
    n: Vec<u32>,
    end: Vec<u32>,
    /// Made when first needed, as long as the longest block.
    buf: Column<u32>,
}

impl Sorted {
    fn new(size: usize) -> Sorted {
        Sorted {
            n: vec![0; size],
            end: vec![0; size],
            buf: Column::default(),
        }
    }

    /// Sort `block`, whose targets are numbered from `lo`.
    fn sort(
        &mut self,
        block: &[u64],
        lo: usize,
        longest: usize,
        scratch: Option<&sys::scratch::Scratch>,
    ) {
        if self.buf.len() < block.len() {
            self.buf = Column::filled(longest, 0, scratch).0;
        }
        for &e in block {
            self.n[halves(e).0 as usize - lo] += 1;
        }
        let mut at = 0;
        for (e, &n) in self.end.iter_mut().zip(&self.n) {
            *e = at;
            at += n;
        }
        let buf: &mut [u32] = &mut self.buf;
        for &e in block {
            let (pw, v) = halves(e);
            let c = &mut self.end[pw as usize - lo];
            buf[*c as usize] = v;
            *c += 1;
        }
    }

    /// Target `t`'s sources, once sorted.
    fn list(&self, t: usize) -> &[u32] {
        let end = self.end[t] as usize;
        &self.buf[end - self.n[t] as usize..end]
    }

    /// Ready for the next block.
    fn clear(&mut self) {
        self.n.fill(0);
    }
}

/// Immediate dominators, in `f.anc`'s memory: the nearest common ancestor of the
/// semi-dominator and the tree parent, in increasing order. A vertex without a word keeps its
/// link, which is its tree parent and semi-dominator, so its immediate dominator; one whose
/// word was written only by path compression has its tree parent as semi-dominator, and that
/// is its immediate dominator too. `own` is [`semis`]' list.
fn idoms(f: &mut Forest, own: &[u64]) {
    let mut next = own.len();
    for (i, &m) in f.has.iter().enumerate() {
        let mut m = m;
        while m != 0 {
            let w = i * 64 + m.trailing_zeros() as usize;
            m &= m - 1;
            let sw = semi(f.sl[w]);
            let mut c = sw;
            if next > 0 && halves(own[next - 1]).0 as usize == w {
                next -= 1;
                c = halves(own[next]).1;
                while c > sw {
                    c = f.anc[c as usize];
                }
            }
            f.anc[w] = c;
        }
    }
}

/// A vertex's semi-dominator, from its word in [`Forest`].
#[inline]
fn semi(e: u64) -> u32 {
    halves(e).1
}

/// A vertex's label, from its word in [`Forest`].
#[inline]
fn label(e: u64) -> u32 {
    halves(e).0
}

/// A plain CSR graph (for tests and small callers).
pub struct Csr {
    pub first: Vec<u32>,
    pub edges: Vec<u32>,
}

impl Csr {
    /// From adjacency lists.
    pub fn from_lists(lists: &[Vec<u32>]) -> Csr {
        let mut first = vec![0u32];
        let mut edges = Vec::new();
        for l in lists {
            edges.extend_from_slice(l);
            first.push(edges.len() as u32);
        }
        Csr { first, edges }
    }
}

impl Graph for Csr {
    fn nodes(&self) -> usize {
        self.first.len() - 1
    }
    fn succ(&self, v: u32) -> &[u32] {
        &self.edges[self.first[v as usize] as usize..self.first[v as usize + 1] as usize]
    }
}

#[cfg(test)]
mod tests;
