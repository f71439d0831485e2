//! Shortest strong paths from the GC roots (breadth-first, two priorities), and the names of the
//! references along them (found in a last streaming pass over the few objects on the paths).
//!
//! Where a path starts (issue 32: leak traces start where people look):
//! - Every class object that is alive from the start is a root of its own, of the pseudo kind
//!   [`CLASS_ROOT`] ("System Class" in KOOM's `gcRoot`), at distance 0: a class whose loader is
//!   the bootstrap loader (id 0, or a loader the dump does not hold) or is itself a GC root (a
//!   HotSpot application loader is a JNI global). Its static fields are then one step from the
//!   start, so an object a static field holds is reached through that class, not through the
//!   loader's internal list of its classes (`AppClassLoader.classes -> ArrayList.elementData ->
//!   Object[][4] -> class`). The search is the same single breadth-first search as before, over
//!   the graph with a super-root joined to the dump's roots and to these classes, so each path is
//!   a true shortest path from that set. Ties (equal distance) go to the dump's own roots, which
//!   are queued first.
//! - A class whose loader is reached only through other objects is not known to be alive before
//!   the search: it is seeded after the search (see [`shortest`]) if nothing reached it, and
//!   where a path passes through such a class anyway, [`Paths::path`] starts it at the last
//!   class object on it. That part is a shortest path from the class (a part of a shortest path
//!   is one), though another class may hold the object by a shorter one.
//! - So a path never passes through a class object: it starts at one, or holds none.
//!
//! Invariants:
//! - Roots that hold objects for the life of the process (classes, JNI globals, threads,
//!   monitors, …) are searched before transient ones (stack frames, JNI locals, native stacks,
//!   unknown): a path goes through a transient root only if no other root reaches the object.
//! - One `u32` per node (the BFS parent) plus two queues of nodes. A search that runs whole
//!   ([`reached`]) marks a bit per node instead, and beside its queues keeps how many nodes each
//!   node it took out put in (a byte per node: `Steps`).
//!   Since the nodes are taken out in the order they were put in, that says where each came
//!   from: the parents read from it ([`Reached::parents`], [`Reached::paths_to`]) are those of
//!   a search that writes them as it goes.
//! - Given the ends of the paths to be named, the parents read from a whole search are those
//!   of the ends and of the nodes above them alone ([`Reached::paths_to`]), found in one pass
//!   back over the queues: at most [`SPARSE_MAX`] of them and one for 16 nodes (else every
//!   node's, as before).
//! - A search given the ends of the paths to be named ([`shortest_until`], as the analysis on
//!   one thread does) stops once they are all reached: the parents it set are the whole
//!   search's, and only the ends' paths may be asked of it.
//! - A reported path ([`Paths::path`]) holds at most [`PATH_HEAD`] + [`PATH_TAIL`] nodes, made
//!   in one walk up the parents in memory bounded by them: a longer one keeps its start and its
//!   end and counts the objects left out between (issue 39: paths were cut at 100,000 steps
//!   from the object, losing their root, and every suspect's was materialised whole).
//! - A [`Memo`] keeps what walks above the ends of paths found (the start of the path, at most
//!   [`PATH_HEAD`] nodes shared by a walk's entries, and its length), by the first object above
//!   each end and at every [`CHECKPOINT`]-th object a walk passes: what lies above an object is
//!   the same for every path through it, so a walk stops at the first object with an entry.
//!   Suspects in one collection at the end of a long chain walk the chain once, and suspects
//!   all along one chain walk at most [`CHECKPOINT`] objects each past what was walked before
//!   (they walked it whole each: a 41 MB dump of 2,000 findings along a chain of a million
//!   objects took 7.2 s, now 0.64 s). Entries: one a path, and one per [`CHECKPOINT`] objects
//!   walked.
#![forbid(unsafe_code)]

use super::arrays::{bit, set_bit};
use super::column::{Column, Grow};
use super::dominators::UNGATED;
use super::dominators::{SUPER, UNREACHED};
use super::index::{Index, Root, NONE};
use hprof::{read_id, sub, Sub, Visitor};
use std::collections::{HashSet, VecDeque};

/// Whether objects this root holds are reached first.
pub fn high_priority(tag: u8) -> bool {
    !matches!(
        tag,
        sub::ROOT_JAVA_FRAME
            | sub::ROOT_JNI_LOCAL
            | sub::ROOT_NATIVE_STACK
            | sub::ROOT_THREAD_BLOCK
            | sub::ROOT_UNKNOWN
    )
}

/// A readable name of a root type (LeakCanary's words where it has some).
pub fn root_name(tag: u8) -> &'static str {
    match tag {
        sub::ROOT_JNI_GLOBAL => "JNI Global",
        sub::ROOT_JNI_LOCAL => "JNI Local",
        sub::ROOT_JAVA_FRAME => "Java Frame",
        sub::ROOT_NATIVE_STACK => "Native Stack",
        sub::ROOT_STICKY_CLASS => "System Class",
        sub::ROOT_THREAD_BLOCK => "Thread Block",
        sub::ROOT_MONITOR_USED => "Monitor Used",
        sub::ROOT_THREAD_OBJECT => "Thread Object",
        sub::ROOT_INTERNED_STRING => "Interned String",
        sub::ROOT_FINALIZING => "Finalizing",
        sub::ROOT_DEBUGGER => "Debugger",
        sub::ROOT_REFERENCE_CLEANUP => "Reference Cleanup",
        sub::ROOT_VM_INTERNAL => "VM Internal",
        sub::ROOT_JNI_MONITOR => "JNI Monitor",
        sub::ROOT_UNKNOWN => "Unknown",
        LATE_ROOT => "Class (unreferenced)",
        CLASS_ROOT => "System Class",
        crate::index::STRIPPED_HOLDER_ROOT => "Held by a stripped zygote/image object",
        _ => "Unknown",
    }
}

/// The pseudo root tag of class objects that no root reaches (treated as roots).
pub const LATE_ROOT: u8 = 0;

/// The pseudo root tag of class objects alive from the start (see the module documentation):
/// a high-priority tag that sorts after every real one, so a class the dump lists as a root
/// keeps the dump's tag (0xFE is no root tag: Android uses it for HEAP_DUMP_INFO).
pub const CLASS_ROOT: u8 = 0xFE;

/// BFS parents: `parent[v]` is the previous node on a shortest path, [`SUPER`] for a root,
/// [`UNREACHED`] if no root reaches `v`. `root_tag` holds the preferred tag of each root node.
pub struct Paths {
    /// Each node's parent; empty where `sparse` holds them.
    pub parent: Column<u32>,
    /// The parents of the ends and of the nodes above them alone, as (node, parent) sorted by
    /// node ([`Reached::paths_to`]); `None` where `parent` holds every node's.
    pub sparse: Option<Vec<(u32, u32)>>,
    pub root_tags: Vec<(u32, u8)>,
    /// The ends the search stopped at, sorted ([`shortest_until`]): only their paths may be
    /// asked for. Empty if the search ran whole.
    pub ends: Vec<u32>,
}

impl Paths {
    /// Node `v`'s parent: [`SUPER`] for a start, [`UNREACHED`] for a node no root reaches
    /// (or, of a search that gave only its ends' paths, one on none of them).
    #[inline]
    pub fn parent_of(&self, v: u32) -> u32 {
        match &self.sparse {
            None => self.parent.get(v as usize).copied().unwrap_or(UNREACHED),
            Some(s) => s
                .binary_search_by_key(&v, |e| e.0)
                .map_or(UNREACHED, |i| s[i].1),
        }
    }

    pub fn root_tag(&self, node: u32) -> u8 {
        match self.root_tags.binary_search_by_key(&node, |e| e.0) {
            Ok(i) => self.root_tags[i].1,
            Err(_) => sub::ROOT_UNKNOWN,
        }
    }

    /// The path to `v` as reported (empty if unreachable): from its start, the last class
    /// object on the shortest path from the roots (see the module documentation) or else its
    /// root, to `v`. A path longer than [`PATH_HEAD`] + [`PATH_TAIL`] objects keeps its first
    /// [`PATH_HEAD`] and last [`PATH_TAIL`] and says how many were left out between: one walk up
    /// the BFS parents, in memory bounded by those constants whatever the path's length.
    pub fn path(&self, ix: &Index, v: u32) -> Kept {
        self.path_memo(ix, v, &mut Memo::default())
    }

    /// [`Paths::path`], with what was found above the ends of the paths made before in `memo`:
    /// paths that pass through the same object just above their last [`PATH_TAIL`] (suspects in
    /// one collection) walk up from it once.
    pub fn path_memo(&self, ix: &Index, v: u32, memo: &mut Memo) -> Kept {
        debug_assert!(
            self.ends.is_empty() || self.ends.binary_search(&v).is_ok(),
            "the path to {v} asked of a search stopped at other ends"
        );
        if self.parent_of(v) == UNREACHED {
            // (A class object ends the walk below before its parent is read.)
            return Kept::default();
        }
        let mut tail: Vec<u32> = Vec::with_capacity(PATH_TAIL);
        let mut x = v;
        while tail.len() < PATH_TAIL {
            if x == UNREACHED {
                return Kept::default();
            }
            if x == SUPER {
                break;
            }
            tail.push(x);
            if ix.class_of_node(x).is_some() {
                x = SUPER;
                break;
            }
            x = self.parent_of(x);
        }
        tail.reverse();
        if x == SUPER {
            return Kept {
                nodes: tail,
                ..Kept::default()
            };
        }
        let above = match memo.map.get(&x) {
            Some(a) => a.clone(),
            None => {
                let a = self.above(ix, x, memo);
                memo.map.insert(x, a.clone());
                a
            }
        };
        let Some(above) = above else {
            return Kept::default();
        };
        let cut = above.head.len();
        let mut nodes = above.head.to_vec();
        nodes.extend(tail);
        Kept {
            nodes,
            left_out: above.len - cut as u64,
            cut,
            first_left_out: above.first_left_out,
        }
    }

    /// The walk up from `x` to the start of its path, or to the first object above `x` that
    /// `memo` holds: the last [`PATH_HEAD`] objects (the start first), how many in all, and the
    /// first left out; `None` if it reaches no root. Leaves an entry in `memo` at every
    /// `memo.every`-th object passed (not `x`'s: the caller keeps that).
    fn above(&self, ix: &Index, x: u32, memo: &mut Memo) -> Option<Above> {
        // The last objects walked, the newest (the highest) at the back, and the one before
        // the oldest of them.
        let mut walked: VecDeque<u32> = VecDeque::with_capacity(PATH_HEAD);
        let mut below_walked = UNREACHED;
        let mut len = 0u64;
        let mut marks: Vec<(u32, u64)> = Vec::new();
        let mut at = x;
        let rest = loop {
            // The parents are a forest: never more than n steps (the bound guards the walk).
            if at == UNREACHED || len > ix.len() as u64 {
                break Some(None);
            }
            if at == SUPER {
                break None;
            }
            if len > 0 {
                if let Some(m) = memo.map.get(&at) {
                    break Some(m.clone());
                }
                if len % memo.every == 0 {
                    marks.push((at, len));
                }
            }
            if walked.len() == PATH_HEAD {
                below_walked = walked.pop_front().unwrap_or(UNREACHED);
            }
            walked.push_back(at);
            len += 1;
            memo.hops += 1;
            if ix.class_of_node(at).is_some() {
                break None;
            }
            at = self.parent_of(at);
        };
        let whole = match rest {
            // The start reached: the objects walked are the whole path's top.
            None => Some(Above {
                head: walked.iter().rev().copied().collect(),
                len,
                first_left_out: below_walked,
            }),
            // No root above.
            Some(None) => None,
            // An object the memo holds: its path's top, then the highest of those walked.
            Some(Some(up)) => {
                let need = PATH_HEAD.saturating_sub(up.head.len());
                let mut head = up.head.to_vec();
                head.extend(walked.iter().rev().take(need));
                let first_left_out = if up.len > PATH_HEAD as u64 {
                    up.first_left_out
                } else {
                    walked.iter().rev().nth(need).copied().unwrap_or(UNREACHED)
                };
                Some(Above {
                    head: head.into(),
                    len: len + up.len,
                    first_left_out,
                })
            }
        };
        // The objects marked on the way: the same path above them, shorter by what lies
        // between (only where it is longer than its kept start, whose first left out is then
        // the same).
        for (m, steps) in marks {
            let entry = match &whole {
                Some(w) if w.len - steps > PATH_HEAD as u64 => Some(Above {
                    head: w.head.clone(),
                    len: w.len - steps,
                    first_left_out: w.first_left_out,
                }),
                Some(_) => continue,
                None => None,
            };
            memo.map.insert(m, entry);
        }
        whole
    }

    /// The tag a path starting at `node` starts from: its root tag, or [`CLASS_ROOT`] for a
    /// class object that is no root of its own (a path cut there by [`Paths::path`]).
    pub fn start_tag(&self, ix: &Index, node: u32) -> u8 {
        match self.root_tags.binary_search_by_key(&node, |e| e.0) {
            Ok(i) => self.root_tags[i].1,
            Err(_) if ix.class_of_node(node).is_some() => CLASS_ROOT,
            Err(_) => sub::ROOT_UNKNOWN,
        }
    }
}

/// Objects kept of the start of a long path (see [`Paths::path`]).
pub const PATH_HEAD: usize = 30;
/// Objects kept of the end of a long path, the leaking object's (see [`Paths::path`]).
pub const PATH_TAIL: usize = 30;

/// A path as reported: at most [`PATH_HEAD`] + [`PATH_TAIL`] nodes from its start to the
/// object. When `left_out` is not 0, that many objects of the path lie between `nodes[cut - 1]`
/// and `nodes[cut]`, the first of them `first_left_out` (what `nodes[cut - 1]` refers to).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Kept {
    pub nodes: Vec<u32>,
    pub left_out: u64,
    pub cut: usize,
    pub first_left_out: u32,
}

/// What a walk found above the last [`PATH_TAIL`] objects of a path, from the first object
/// above them: the last [`PATH_HEAD`] objects (the start first), how many in all, the first
/// left out. It is the same for every path through that object.
#[derive(Clone, Debug)]
struct Above {
    head: std::rc::Rc<[u32]>,
    len: u64,
    first_left_out: u32,
}

/// What walks above the ends of paths found, for [`Paths::path_memo`] (see the module
/// documentation): `None` for an object below which no root lies.
pub struct Memo {
    map: std::collections::HashMap<u32, Option<Above>>,
    /// Parent steps walked above the ends of paths (what the memo saves).
    pub hops: u64,
    /// A walk keeps an entry at every this many objects it passes ([`CHECKPOINT`]).
    every: u64,
}

impl Default for Memo {
    fn default() -> Memo {
        Memo {
            map: Default::default(),
            hops: 0,
            every: CHECKPOINT,
        }
    }
}

/// A walk above the end of a path keeps an entry in its [`Memo`] at every this many objects.
pub const CHECKPOINT: u64 = 1024;

impl Kept {
    /// The references along the path, as (from, to) nodes: between consecutive kept nodes, and
    /// where objects are left out, from the last one before the gap to the first left out.
    pub fn edges(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let gap = self.left_out > 0;
        (1..self.nodes.len()).map(move |i| {
            if gap && i == self.cut {
                (self.nodes[i - 1], self.first_left_out)
            } else {
                (self.nodes[i - 1], self.nodes[i])
            }
        })
    }
}

/// Breadth-first search from the roots over strong edges, the classes of `late` whose gate (their
/// loader) is [`UNGATED`] or a root among them as [`CLASS_ROOT`]s; then, one at a time, from each
/// other class of `late` that nothing reached before it and whose gate is reached, repeated until
/// no more are (see [`crate::dominators::prepare_gated`]).
pub fn shortest(ix: &Index, roots: &[Root], late: &[(u32, u32)]) -> Paths {
    reached(ix, roots, late).parents()
}

/// [`shortest`], stopped as soon as each of `ends` has a parent (all of it if `ends` is empty).
///
/// A search's parents never change once set, and every object above an end on its path was
/// reached before the end: so a search stopped there gives the ends, and every object on their
/// paths, the parents the whole search gives. Objects it did not reach read as unreachable:
/// only the ends' paths may be asked for.
pub fn shortest_until(ix: &Index, roots: &[Root], late: &[(u32, u32)], ends: &[u32]) -> Paths {
    if ends.is_empty() {
        return shortest(ix, roots, late);
    }
    let scratch = ix.scratch.as_ref();
    let (parent, _) = Column::filled(ix.len(), UNREACHED, scratch);
    let mut marks = Parents {
        parent,
        watch: Watch::new(ends),
    };
    let (tags, _, stopped) = search(ix, roots, late, &mut marks);
    Paths {
        parent: marks.parent,
        sparse: None,
        root_tags: tags,
        ends: match stopped {
            true => marks.watch.ends,
            false => Vec::new(),
        },
    }
}

/// What a whole search ([`reached`]) found, before any parent is written: each node it
/// reached, in the order it reached them (in each queue), and the steps (`Steps`) that say where
/// each came from. A store to a node's parent for each node reached made the search, the
/// longer of the two side by side, a fifth slower (10 M objects: 185 ms against 150); a `u32`
/// beside each node queued for where it came from made it 10 ms slower, and writing every
/// node's parent from those took 40 ms beside the dominators (slowing them by 15), while the
/// report names a few hundred paths.
pub struct Reached {
    hi: Fifo,
    lo: Fifo,
    root_tags: Vec<(u32, u8)>,
    n: usize,
    scratch: Option<sys::scratch::Scratch>,
}

impl Reached {
    /// The search's parents ([`Paths`]): each node reached has the one it came from, a start
    /// [`SUPER`], and every other node [`UNREACHED`].
    pub fn parents(self) -> Paths {
        let (mut parent, _) = Column::filled(self.n, UNREACHED, self.scratch.as_ref());
        for q in [&self.hi, &self.lo] {
            q.each_parent(|w, v| parent[w as usize] = v);
        }
        Paths {
            parent,
            sparse: None,
            root_tags: self.root_tags,
            ends: Vec::new(),
        }
    }

    /// The search's parents of `ends` and of every node above them, the paths of the ends
    /// alone being asked for ([`shortest_until`]'s [`Paths`]): the ends' places found in
    /// each queue, then each path followed up by place (see `Fifo::parents_up`). Past
    /// [`SPARSE_MAX`] such nodes, or one for 16 nodes (a crafted dump's chain), every node's
    /// ([`Reached::parents`]). Without ends, every node's too.
    pub fn paths_to(self, ends: &[u32]) -> Paths {
        let max = SPARSE_MAX.min(self.n / 16).max(SPARSE_MIN);
        self.paths_to_at_most(ends, max)
    }

    /// [`Reached::paths_to`], keeping at most `max` parents on their own.
    fn paths_to_at_most(self, ends: &[u32], max: usize) -> Paths {
        let mut watch = Watch::new(ends);
        watch.ends.retain(|&v| (v as usize) < self.n);
        if watch.ends.is_empty() {
            return self.parents();
        }
        let mut wanted = Wanted::new(self.n, self.scratch.as_ref());
        for &v in &watch.ends {
            wanted.add(v);
        }
        let mut found: Vec<(u32, u32)> = Vec::new();
        let mut done = HashSet::new();
        let fits = [&self.hi, &self.lo]
            .iter()
            .all(|q| q.parents_up(&watch.ends, &wanted, &mut done, &mut found, max));
        if !fits {
            drop((wanted, found, done));
            return self.parents();
        }
        found.sort_unstable();
        Paths {
            parent: Column::default(),
            sparse: Some(found),
            root_tags: self.root_tags,
            ends: watch.ends,
        }
    }
}

/// Most parents [`Reached::paths_to`] keeps on their own (8 MiB), before it writes every
/// node's instead; and no more than one for 16 nodes (half a byte a node, in memory, where
/// the budget counts a byte a node beside the scratch files), unless fewer than
/// [`SPARSE_MIN`].
pub const SPARSE_MAX: usize = 1 << 20;
/// Parents [`Reached::paths_to`] may keep on their own however small the graph.
pub const SPARSE_MIN: usize = 4096;

/// The nodes whose parents [`Reached::paths_to`] looks for: a bit a node, and a bit per
/// [`COARSE`] nodes (in the first level cache: 2.4 KB at 10 M objects), set where any of
/// those is, which the pass asks first (it asks of every node queued, and few are wanted).
struct Wanted {
    fine: Column<u64>,
    coarse: Vec<u64>,
}

/// Nodes a bit of [`Wanted`]'s coarse map stands for (a power of two).
const COARSE: usize = 512;

impl Wanted {
    fn new(n: usize, scratch: Option<&sys::scratch::Scratch>) -> Wanted {
        Wanted {
            fine: Column::filled(n.div_ceil(64), 0u64, scratch).0,
            coarse: vec![0u64; n.div_ceil(COARSE).div_ceil(64)],
        }
    }
    #[inline(always)]
    fn has(&self, v: u32) -> bool {
        bit(&self.coarse, v as usize / COARSE) && bit(&self.fine, v as usize)
    }
    fn add(&mut self, v: u32) {
        set_bit(&mut self.coarse, v as usize / COARSE);
        set_bit(&mut self.fine, v as usize);
    }
}

/// The whole search of [`shortest`], marking the nodes it reaches in a bitmap (a bit a node,
/// mostly in the cache; in a scratch file where the index's arrays are) and keeping where each
/// came from in its queues' steps (`Steps`).
pub fn reached(ix: &Index, roots: &[Root], late: &[(u32, u32)]) -> Reached {
    let (bits, _) = Column::filled(ix.len().div_ceil(64), 0u64, ix.scratch.as_ref());
    let mut marks = Seen(bits);
    let (root_tags, q, _) = search(ix, roots, late, &mut marks);
    Reached {
        hi: q.hi,
        lo: q.lo,
        root_tags,
        n: ix.len(),
        scratch: ix.scratch.clone(),
    }
}

/// The search itself, for either way of marking what it reached; the roots' tags (of each start
/// node, the most telling), its queues, and whether it stopped before its end
/// ([`Marks::met`]).
fn search<M: Marks>(
    ix: &Index,
    roots: &[Root],
    late: &[(u32, u32)],
    marks: &mut M,
) -> (Vec<(u32, u8)>, Queues, bool) {
    let n = ix.len();
    let scratch = ix.scratch.as_ref();
    let mut tags: Vec<(u32, u8)> = roots.iter().map(|r| (r.node, r.tag)).collect();
    tags.sort_unstable();
    let is_root = |v: u32| tags.binary_search_by_key(&v, |e| e.0).is_ok();
    let alive: Vec<(u32, u8)> = late
        .iter()
        .filter(|&&(_, gate)| gate == UNGATED || is_root(gate))
        .map(|&(v, _)| (v, CLASS_ROOT))
        .collect();
    tags.extend(alive);
    // Per node, keep the most telling tag: high priority first, then the smaller tag.
    tags.sort_unstable_by_key(|&(v, t)| (v, !high_priority(t), t));
    tags.dedup_by_key(|e| e.0);
    let mut order: Vec<(bool, u8, u32)> = tags
        .iter()
        .map(|&(v, t)| (!high_priority(t), t, v))
        .collect();
    // (Once, over the roots: the library's one sort, not an instantiation of its own; equal
    // entries are equal values, so the order is sort_unstable's.)
    sys::order::sort_by(&mut order, |a, b| a.cmp(b));
    // All high-priority roots first; a low-priority root is a path's start only if no
    // high-priority root reaches it.
    let mut q = Queues::new(n, M::STEPS, scratch);
    let mut late_used = Vec::new();
    let stopped = 'search: {
        for low in [false, true] {
            for &(l, _, v) in &order {
                if l == low && !marks.reached(v) {
                    marks.reach(v, SUPER);
                    q.start(v, low);
                }
            }
            if q.run(ix, marks) {
                break 'search true;
            }
        }
        loop {
            let mut more = false;
            for &(v, gate) in late {
                let open = gate == UNGATED || marks.reached(gate);
                if open && !marks.reached(v) {
                    marks.reach(v, SUPER);
                    late_used.push((v, LATE_ROOT));
                    q.start(v, false);
                    if q.run(ix, marks) {
                        break 'search true;
                    }
                    more = true;
                }
            }
            if !more {
                break;
            }
        }
        false
    };
    if !late_used.is_empty() {
        tags.extend(late_used);
        tags.sort_unstable();
    }
    (tags, q, stopped)
}

/// How a search marks the nodes it reaches: their parents as it goes ([`Parents`], a search
/// that may stop at its ends), or a bit each, the parents written after ([`Seen`]).
trait Marks {
    /// Whether the queues keep their [`Steps`] (where each node came from).
    const STEPS: bool;
    /// Whether [`Marks::hint`] does anything (else the search does not read what it would be
    /// given).
    const HINTS: bool;
    /// Whether node `v` was reached (false if there is no such node).
    fn reached(&self, v: u32) -> bool;
    /// Node `v` reached from `from` ([`SUPER`] for a start).
    fn reach(&mut self, v: u32, from: u32);
    /// `succ` (a node's successors) will be asked about soon: bring in what that reads.
    fn hint(&self, succ: &[u32]);
    /// Whether the search may stop here (asked every [`WATCH_EVERY`] nodes and at its end).
    fn met(&mut self) -> bool;
}

/// A search that writes each node's parent as it reaches it, and stops once its ends have
/// theirs.
struct Parents {
    parent: Column<u32>,
    watch: Watch,
}

impl Marks for Parents {
    const STEPS: bool = false;
    const HINTS: bool = true;
    #[inline(always)]
    fn reached(&self, v: u32) -> bool {
        self.parent.get(v as usize).is_some_and(|&p| p != UNREACHED)
    }
    #[inline(always)]
    fn reach(&mut self, v: u32, from: u32) {
        self.parent[v as usize] = from;
    }
    #[inline(always)]
    fn hint(&self, succ: &[u32]) {
        for &w in succ {
            sys::mapped::prefetch_at(&self.parent, w as usize);
        }
    }
    fn met(&mut self) -> bool {
        self.watch.met(&self.parent)
    }
}

/// A search that marks a bit for each node it reaches (the queues keep where it came from).
struct Seen(Column<u64>);

impl Marks for Seen {
    const STEPS: bool = true;
    const HINTS: bool = false;
    #[inline(always)]
    fn reached(&self, v: u32) -> bool {
        // (The bits past the last node are never set.)
        self.0
            .get(v as usize / 64)
            .is_some_and(|w| w >> (v % 64) & 1 == 1)
    }
    #[inline(always)]
    fn reach(&mut self, v: u32, _from: u32) {
        set_bit(&mut self.0, v as usize)
    }
    #[inline(always)]
    fn hint(&self, _succ: &[u32]) {}
    fn met(&mut self) -> bool {
        false
    }
}

/// The ends a search stops at ([`shortest_until`]): those before `next` have parents.
struct Watch {
    ends: Vec<u32>,
    next: usize,
}

impl Watch {
    fn new(ends: &[u32]) -> Watch {
        let mut ends = ends.to_vec();
        ends.sort_unstable();
        ends.dedup();
        Watch { ends, next: 0 }
    }

    /// Whether there are ends and each has a parent (an end is looked at until it has one,
    /// then never again).
    fn met(&mut self, parent: &[u32]) -> bool {
        while let Some(&v) = self.ends.get(self.next) {
            if parent[v as usize] == UNREACHED {
                return false;
            }
            self.next += 1;
        }
        !self.ends.is_empty()
    }
}

/// A search looks at its [`Watch`] once every this many nodes it takes from its queues.
const WATCH_EVERY: u32 = 4096;

/// How far ahead in its queue the search asks for a node's adjacency, then its edges, then its
/// successors' parents: each hint needs what the one before brought in.
const PF_ADJ: usize = 24;
const PF_EDGES: usize = 12;
const PF_PARENT: usize = 4;

/// A first-in, first-out queue of nodes that keeps what it hands out: a node enters the
/// search's queues at most once, so the list is at most as long as the graph has nodes and
/// never wraps round or moves (a ring buffer that grows copies itself, into fresh pages).
struct Fifo {
    v: Grow<u32>,
    /// Where each node came from (a search that keeps them: [`Seen`]).
    steps: Steps,
    /// The places of the starts (nodes reached from [`SUPER`]), ascending.
    starts: Vec<u32>,
    /// The next node to hand out.
    at: usize,
}

impl Fifo {
    fn with_capacity(n: usize, steps: bool, scratch: Option<&sys::scratch::Scratch>) -> Fifo {
        Fifo {
            v: Grow::with_capacity(n, scratch),
            steps: Steps::new(if steps { n } else { 0 }, scratch),
            starts: Vec::new(),
            at: 0,
        }
    }
    fn is_empty(&self) -> bool {
        self.at == self.v.len()
    }
    /// The node `k` places after the next one out.
    fn get(&self, k: usize) -> Option<&u32> {
        self.v.get(self.at + k)
    }
    fn pop_front(&mut self) -> Option<u32> {
        let x = *self.v.get(self.at)?;
        self.at += 1;
        Some(x)
    }

    /// Node `w`, reached from [`SUPER`]. (The queues are empty then: every node before it was
    /// taken out, and its [`Steps`] written.)
    fn start(&mut self, w: u32) {
        self.starts.push(self.v.len() as u32);
        self.v.push(w);
    }

    /// Each node's parent, as (node, parent), in the order they were queued.
    fn each_parent(&self, mut f: impl FnMut(u32, u32)) {
        let mut steps = self.steps.forward();
        let mut starts = self.starts.iter().peekable();
        for (i, &w) in self.v.iter().enumerate() {
            if starts.next_if(|&&k| k as usize == i).is_some() {
                f(w, SUPER);
            } else {
                f(w, self.v[steps.next_from()]);
            }
        }
    }

    /// The parents of the `ends` queued here (flagged in `wanted`) and of every node above
    /// them, in `found`, each node's once (`done`: those already there). The ends' places are
    /// found in one pass from the front, which stops once each end is met (ends are often near
    /// the roots, and a node above one was queued before it); then each end's path is followed
    /// up by place, the place of a node's parent read off the [`Steps`], whose sums are made
    /// only as far as the last end. (A pass back over the queue from the last end found the
    /// parents instead, after summing every node's count: 9-10 ms at 10 M objects, where the
    /// ends are in the first 800 K of 10 M nodes queued; this takes 3-3.6.) False, and
    /// `found` left unfinished, once it would hold more than `max`.
    fn parents_up(
        &self,
        ends: &[u32],
        wanted: &Wanted,
        done: &mut HashSet<u32>,
        found: &mut Vec<(u32, u32)>,
        max: usize,
    ) -> bool {
        let mut left = ends.len();
        let mut places = Vec::new();
        for (i, &w) in self.v.iter().enumerate() {
            if left == 0 {
                break;
            }
            if wanted.has(w) {
                left -= 1;
                places.push(i);
            }
        }
        let Some(&last) = places.last() else {
            return true;
        };
        // (Every node above an end was taken out before it was queued.)
        let blocks = self.steps.blocks(last);
        for &end in &places {
            let mut i = end;
            loop {
                let w = self.v[i];
                if !done.insert(w) {
                    break;
                }
                if found.len() == max {
                    return false;
                }
                // The starts at or before place `i`.
                let starts = self.starts.partition_point(|&k| k as usize <= i);
                if starts > 0 && self.starts[starts - 1] as usize == i {
                    found.push((w, SUPER));
                    break;
                }
                // The `k`-th node queued that is no start.
                let j = self.steps.came_from(&blocks, i - starts);
                found.push((w, self.v[j]));
                i = j;
            }
        }
        true
    }
}

/// Where each node of a [`Fifo`] came from: for each node taken out, in order, how many nodes
/// it put in (a byte; 255 and more in `big`). The nodes are taken out in the order they were
/// put in, so the `k`-th node queued that is no start came from the node taken out whose
/// counts, with those before it, first pass `k`. (A `u32` a node queued instead, the node it
/// came from: 40 MB of fresh pages at 10 M objects, against 10 MB.)
struct Steps {
    counts: Grow<u8>,
    /// The nodes taken out that put in [`u8::MAX`] or more, as (place, count), ascending.
    big: Vec<(u32, u64)>,
}

/// Nodes taken out whose counts [`Steps::blocks`] sums together.
const STEP_BLOCK: usize = 512;

impl Steps {
    /// Room for `n` nodes taken out.
    fn new(n: usize, scratch: Option<&sys::scratch::Scratch>) -> Steps {
        Steps {
            counts: Grow::with_capacity(n, scratch),
            big: Vec::new(),
        }
    }

    /// A node taken out that put `k` nodes in.
    #[inline(always)]
    fn took(&mut self, k: usize) {
        if k >= u8::MAX as usize {
            self.big.push((self.counts.len() as u32, k as u64));
        }
        self.counts.push(k.min(u8::MAX as usize) as u8);
    }

    /// What the `j`-th node taken out put in.
    fn count(&self, j: usize) -> u64 {
        match self.counts[j] {
            u8::MAX => {
                let i = self.big.partition_point(|e| (e.0 as usize) < j);
                self.big[i].1
            }
            c => c as u64,
        }
    }

    /// The nodes put in before each block of [`STEP_BLOCK`] nodes taken out, up to the block
    /// of the node taken out at place `upto` (enough for [`Steps::came_from`] of the nodes
    /// queued up to there; the counts past it are not read).
    fn blocks(&self, upto: usize) -> Vec<u64> {
        let mut sum = 0u64;
        let n = (upto / STEP_BLOCK + 1).min(self.counts.len().div_ceil(STEP_BLOCK));
        (0..n)
            .map(|b| {
                let before = sum;
                let end = ((b + 1) * STEP_BLOCK).min(self.counts.len());
                for j in b * STEP_BLOCK..end {
                    sum += self.count(j);
                }
                before
            })
            .collect()
    }

    /// Where the `k`-th node queued that is no start came from (from 0): the place of the node
    /// taken out that put it in, found by the sums of [`Steps::blocks`] (which reach at least
    /// as far as that place).
    fn came_from(&self, blocks: &[u64], k: usize) -> usize {
        let k = k as u64;
        // The last block with at most `k` nodes put in before it.
        let b = blocks.partition_point(|&c| c <= k) - 1;
        let mut sum = blocks[b];
        let mut j = b * STEP_BLOCK;
        loop {
            sum += self.count(j);
            if k < sum {
                return j;
            }
            j += 1;
        }
    }

    /// A reader from the first node taken out on.
    fn forward(&self) -> Forward<'_> {
        Forward {
            s: self,
            j: 0,
            left: 0,
        }
    }
}

/// [`Steps`] read from the start: node `j` taken out, `left` of the nodes it put in not yet
/// given out.
struct Forward<'a> {
    s: &'a Steps,
    j: usize,
    left: u64,
}

impl Forward<'_> {
    /// Where the next node that is no start came from: the place of the node taken out.
    fn next_from(&mut self) -> usize {
        while self.left == 0 {
            self.left = self.s.count(self.j);
            self.j += 1;
        }
        self.left -= 1;
        self.j - 1
    }
}

/// The search's queues: nodes reached from high-priority roots, then from low-priority ones.
struct Queues {
    hi: Fifo,
    lo: Fifo,
}

impl Queues {
    /// Queues for a graph of `n` nodes (the first holds all of them without growing: most
    /// nodes are usually reached from high-priority roots), keeping where each node came from
    /// if `steps`.
    fn new(n: usize, steps: bool, scratch: Option<&sys::scratch::Scratch>) -> Queues {
        Queues {
            hi: Fifo::with_capacity(n, steps, scratch),
            lo: Fifo::with_capacity(0, steps, None),
        }
    }
    /// Node `v` as a start of the search.
    fn start(&mut self, v: u32, low: bool) {
        match low {
            true => self.lo.start(v),
            false => self.hi.start(v),
        }
    }
    /// Empty the queues, or stop once `marks` says so (true then).
    fn run<M: Marks>(&mut self, ix: &Index, marks: &mut M) -> bool {
        use sys::mapped::prefetch_at;
        let mut until_watch = WATCH_EVERY;
        // (Slices taken once: a column is one branch per access otherwise.)
        let (adj, edges): (&[[u32; 2]], &[u32]) = (&ix.adj, &ix.edges);
        let succ = |v: u32| -> &[u32] {
            match adj[v as usize] {
                [NONE, _] => &[],
                [f, d] => &edges[f as usize..f as usize + d as usize],
            }
        };
        loop {
            let q = if self.hi.is_empty() {
                &self.lo
            } else {
                &self.hi
            };
            if let Some(&a) = q.get(PF_ADJ) {
                prefetch_at(adj, a as usize);
            }
            if let Some(&b) = q.get(PF_EDGES) {
                let [f, _] = adj[b as usize];
                if f != NONE {
                    prefetch_at(edges, f as usize);
                }
            }
            if M::HINTS {
                if let Some(&c) = q.get(PF_PARENT) {
                    marks.hint(succ(c));
                }
            }
            until_watch -= 1;
            if until_watch == 0 {
                until_watch = WATCH_EVERY;
                if marks.met() {
                    return true;
                }
            }
            let q = if let Some(v) = self.hi.pop_front() {
                (v, &mut self.hi)
            } else if let Some(v) = self.lo.pop_front() {
                (v, &mut self.lo)
            } else {
                return marks.met();
            };
            let (v, q) = q;
            let before = q.v.len();
            for &w in succ(v) {
                if !marks.reached(w) {
                    marks.reach(w, v);
                    q.v.push(w);
                }
            }
            if M::STEPS {
                q.steps.took(q.v.len() - before);
            }
        }
    }
}

/// How one object refers to the next on a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ref {
    /// (declaring class index, field index)
    Field(u32, u16),
    Static(String),
    Element(u32),
    ClassOf,
    Super,
    Loader,
    Unknown,
}

/// Pass 3: for each wanted (parent id, child id), how the parent refers to the child.
pub(crate) struct Pass3<'a> {
    pub ix: &'a Index,
    /// Sorted by parent id.
    pub wanted: Vec<(u64, u64)>,
    pub found: Vec<Option<Ref>>,
    /// The array streaming now: the index of its next element.
    cur: Option<u32>,
    /// The wanted children of the object being read (for an array: of the array streaming
    /// now) not found yet.
    pending: Children,
    /// A one-hash Bloom filter of the wanted parents (most objects are not, and are skipped
    /// after one bit test).
    bloom: Vec<u64>,
}

const BLOOM_BITS: u32 = 16;

#[inline]
pub(crate) fn bloom_bit(id: u64) -> usize {
    (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BLOOM_BITS)) as usize
}

/// Make `bloom` the one-hash Bloom filter of `ids` (its memory reused).
pub(crate) fn fill_bloom(bloom: &mut Vec<u64>, ids: impl Iterator<Item = u64>) {
    bloom.clear();
    bloom.resize((1 << BLOOM_BITS) / 64, 0);
    for id in ids {
        set_bit(bloom, bloom_bit(id));
    }
}

/// Up to this many wanted children are looked up without a Bloom filter.
const FEW: usize = 4;
/// A wanted child already found (in place of its index in `wanted`).
const TAKEN: u64 = u64::MAX;

/// The wanted children of one object not found yet, looked up by id: the object's references
/// are read once, whatever the number of children (a scan of the references per child was
/// quadratic: 1,000 suspects held by one `Object[]` of 2 M elements took 1.4 s, the scan of the
/// 16 MB dump 7 ms).
#[derive(Default)]
struct Children {
    /// (child id, its index in `wanted`, or [`TAKEN`]), sorted by id; the ids are distinct
    /// (`wanted` holds each pair once). (Pairs of `u64` as `wanted`'s: one sort in the code.)
    ids: Vec<(u64, u64)>,
    /// How many are not taken.
    left: usize,
    /// A one-hash Bloom filter of the ids, made by [`Children::filter`] for more than [`FEW`]
    /// of them: most elements of a large array are not wanted, and are passed after one bit
    /// test; empty: every id is looked up.
    bloom: Vec<u64>,
}

impl Children {
    /// The children of `wanted[range]` not `found` yet.
    fn gather(
        &mut self,
        range: std::ops::Range<usize>,
        wanted: &[(u64, u64)],
        found: &[Option<Ref>],
    ) {
        self.ids.clear();
        self.bloom.clear();
        self.ids.extend(
            range
                .filter(|&k| found[k].is_none())
                .map(|k| (wanted[k].1, k as u64)),
        );
        self.ids.sort_unstable();
        self.left = self.ids.len();
    }

    /// Make the Bloom filter, if there are more than [`FEW`] children.
    fn filter(&mut self) {
        if self.ids.len() > FEW {
            fill_bloom(&mut self.bloom, self.ids.iter().map(|e| e.0));
        }
    }

    /// `child`'s index in `wanted` if it is one of these not taken yet; it is taken now.
    #[inline]
    fn take(&mut self, child: u64) -> Option<usize> {
        if self.left == 0 || !self.bloom.is_empty() && !bit(&self.bloom, bloom_bit(child)) {
            return None;
        }
        self.find(child)
    }

    /// [`Children::take`] past the filter (kept out of line: the one copy of the search).
    #[inline(never)]
    fn find(&mut self, child: u64) -> Option<usize> {
        let i = self.ids.binary_search_by_key(&child, |e| e.0).ok()?;
        let k = std::mem::replace(&mut self.ids[i].1, TAKEN);
        if k == TAKEN {
            return None;
        }
        self.left -= 1;
        Some(k as usize)
    }

    /// The children not taken, as (id, index in `wanted`).
    fn rest(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.ids
            .iter()
            .filter(|e| e.1 != TAKEN)
            .map(|&(c, k)| (c, k as usize))
    }
}

impl<'a> Pass3<'a> {
    pub(crate) fn new(ix: &'a Index, mut wanted: Vec<(u64, u64)>) -> Self {
        wanted.sort_unstable();
        wanted.dedup();
        let found = vec![None; wanted.len()];
        let mut bloom = Vec::new();
        fill_bloom(&mut bloom, wanted.iter().map(|w| w.0));
        Pass3 {
            ix,
            wanted,
            found,
            cur: None,
            pending: Children::default(),
            bloom,
        }
    }
    fn range(&self, parent: u64) -> std::ops::Range<usize> {
        let b = bloom_bit(parent);
        if !bit(&self.bloom, b) {
            return 0..0;
        }
        let a = self.wanted.partition_point(|e| e.0 < parent);
        let b = self.wanted.partition_point(|e| e.0 <= parent);
        a..b
    }
    /// Take what `other` found where this found nothing (`other` read later pieces of the
    /// same wanted pairs: made by [`Pass3::new`] from the same list).
    pub(crate) fn absorb(&mut self, other: Pass3<'_>) {
        debug_assert!(self.wanted == other.wanted);
        for (mine, theirs) in self.found.iter_mut().zip(other.found) {
            if mine.is_none() {
                *mine = theirs;
            }
        }
    }
    pub(crate) fn get(&self, parent: u64, child: u64) -> Ref {
        match self.wanted.binary_search(&(parent, child)) {
            Ok(i) => self.found[i].clone().unwrap_or(Ref::Unknown),
            Err(_) => Ref::Unknown,
        }
    }
}

impl Visitor for Pass3<'_> {
    fn sub(&mut self, _offset: u64, s: &Sub<'_>, _raw: &[u8]) -> Result<(), String> {
        self.cur = None;
        let id_size = self.ix.header.id_size;
        match *s {
            Sub::Class(ref c) => {
                self.pending
                    .gather(self.range(c.id), &self.wanted, &self.found);
                // One walk over the statics, each wanted child taking the first that holds it.
                for (name, ty, v) in c.statics() {
                    if ty != hprof::BasicType::Object {
                        continue;
                    }
                    let child = read_id(v, id_size);
                    let Some(k) = self.pending.take(child) else {
                        continue;
                    };
                    // The index's name (turned back where the build's renames are known: see
                    // `renames`), else the dump's.
                    let indexed = self
                        .ix
                        .class_by_id(c.id)
                        .and_then(|ci| {
                            self.ix.classes[ci as usize]
                                .statics
                                .iter()
                                .find(|s| s.value == child)
                        })
                        .map(|s| s.name.clone());
                    self.found[k] = Some(Ref::Static(indexed.unwrap_or_else(|| {
                        self.ix
                            .strings
                            .get(name)
                            .unwrap_or_else(|| format!("<string 0x{name:x}>"))
                    })));
                    if self.pending.left == 0 {
                        break;
                    }
                }
                for (child, k) in self.pending.rest() {
                    self.found[k] = Some(if c.super_id == child {
                        Ref::Super
                    } else if c.loader_id == child {
                        Ref::Loader
                    } else {
                        Ref::Unknown
                    });
                }
            }
            Sub::Instance {
                id, class_id, data, ..
            } => {
                let r = self.range(id);
                if r.is_empty() {
                    return Ok(());
                }
                self.pending.gather(r, &self.wanted, &self.found);
                // One walk over the reference fields, each wanted child taking the first that
                // holds it.
                if let Some(ci) = self.ix.class_by_id(class_id) {
                    for &(off, decl, fi) in &self.ix.classes[ci as usize].ref_slots {
                        let o = off as usize;
                        let Some(b) = data.get(o..o + id_size as usize) else {
                            continue;
                        };
                        if let Some(k) = self.pending.take(read_id(b, id_size)) {
                            self.found[k] = Some(Ref::Field(decl, fi));
                            if self.pending.left == 0 {
                                break;
                            }
                        }
                    }
                }
                for (child, k) in self.pending.rest() {
                    self.found[k] = Some(match child == class_id {
                        true => Ref::ClassOf,
                        false => Ref::Unknown,
                    });
                }
            }
            Sub::ObjectArray { id, class_id, .. } => {
                let r = self.range(id);
                if !r.is_empty() {
                    self.pending.gather(r, &self.wanted, &self.found);
                    if let Some(k) = self.pending.take(class_id) {
                        self.found[k] = Some(Ref::ClassOf);
                    }
                    // (A null element is no reference.)
                    if let Some(k) = self.pending.take(0) {
                        self.found[k] = Some(Ref::Unknown);
                    }
                    self.pending.filter();
                    self.cur = Some(0);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn array_data(&mut self, data: &[u8]) -> Result<(), String> {
        let Some(i) = self.cur else {
            return Ok(());
        };
        let id_size = self.ix.header.id_size;
        let found = &mut self.found;
        let p = &mut self.pending;
        // The arrays on paths include the largest of the heap (a big map's table): one scan
        // looks each element up (see `Children`).
        if p.left > 0 {
            for (j, e) in data.chunks_exact(id_size as usize).enumerate() {
                if let Some(k) = p.take(read_id(e, id_size)) {
                    found[k] = Some(Ref::Element(i.saturating_add(j as u32)));
                    if p.left == 0 {
                        break;
                    }
                }
            }
        }
        self.cur = Some(i.saturating_add((data.len() / id_size as usize) as u32));
        Ok(())
    }

    fn array_end(&mut self) -> Result<(), String> {
        self.cur = None;
        Ok(())
    }
}

/// Make sure `NONE` and `UNREACHED` agree (both mean "nothing").
const _: () = assert!(NONE == UNREACHED);

#[cfg(test)]
mod tests;
