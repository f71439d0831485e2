//! The index of a dump: classes, objects and the strong reference graph, in compact arrays.
//!
//! Built in two streaming passes over the file (never held whole in memory), or in one for
//! dumps whose strings and class dumps all precede their objects (`Prefix`, `OnePass`,
//! `lookup` and `place`: the same passes' work at once, with edge targets kept as ids until
//! every id is known):
//! 1. strings, class names, class dumps, GC roots, and every object id (to be sorted);
//! 2. per object: class, shallow size, outgoing strong edges (CSR, in file order, addressed by
//!    `first`/`deg` per node), and the values the leak detectors need (read from the instance's
//!    field bytes while they pass by).
//!
//! Invariants:
//! - Node `i` is the object whose id is `ids[i]`; `ids` is sorted and without duplicates.
//! - Every edge target is a node: references to ids the dump does not hold (stripped or simply
//!   absent) are dropped and counted in [`IndexStats::missing_refs`].
//! - `java.lang.ref.Reference.referent` is never an edge.
//! - Memory per object: 8 (id) + 4 (class) + 4 (shallow) + 8 (edge range) bytes, plus 4 per edge
//!   and a table for id lookups: a rank map of at most 8 bytes per object where the ids are
//!   packed (2.9 on a 540 MB HotSpot dump), else buckets of 1 to 2. Two-pass workers write each
//!   object into the node arrays themselves ([`Shared`], plus a byte per object naming the
//!   worker); one-pass workers buffer 16 bytes per object until `place` writes it there.
//! - A duplicate id (the dump lists two objects with it) is counted once per extra object, and
//!   its node is the object listed first.
//! - Shallow sizes: an instance counts its class's instance size as the dump states it (HotSpot:
//!   the field bytes; ART: the object size); an array counts length × element size plus a 12- or
//!   16-byte header, also when its contents were stripped (0xC3); a class counts its statics.
#![forbid(unsafe_code)]

use super::arrays::{halves, pair};
use super::rank::RankMap;
use crate::hprof::{read_id, sub, BasicType, ClassDump, Header, Record, Sub, Visitor};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};

/// "No node / no class".
pub const NONE: u32 = u32::MAX;

/// A string table: UTF8 records, sorted by id, text in one arena.
#[derive(Default)]
pub struct Strings {
    ids: Vec<(u64, u32, u32)>,
    arena: Vec<u8>,
}

impl Strings {
    fn push(&mut self, id: u64, text: &[u8]) {
        let at = self.arena.len() as u32;
        self.arena.extend_from_slice(text);
        self.ids.push((id, at, text.len() as u32));
    }
    fn finish(&mut self) {
        self.ids.sort_unstable_by_key(|e| e.0);
        self.ids.dedup_by_key(|e| e.0);
    }
    /// The text of string `id`, lossily decoded; `None` if the dump has no such string.
    pub fn get(&self, id: u64) -> Option<String> {
        let i = self.ids.binary_search_by_key(&id, |e| e.0).ok()?;
        let (_, at, len) = self.ids[i];
        Some(String::from_utf8_lossy(&self.arena[at as usize..(at + len) as usize]).into_owned())
    }
    fn get_or(&self, id: u64) -> String {
        self.get(id).unwrap_or_else(|| format!("<string 0x{id:x}>"))
    }
}

/// An instance field declared by a class.
#[derive(Clone, Debug)]
pub struct Field {
    pub name: String,
    pub ty: BasicType,
}

/// A static field holding an object reference.
#[derive(Clone, Debug)]
pub struct StaticRef {
    pub name: String,
    pub value: u64,
}

/// What a leak detector wants to read from instances of a class (offsets into the field bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    #[default]
    None,
    Activity {
        destroyed: Option<u32>,
        finished: Option<u32>,
    },
    Fragment {
        manager: u32,
        called: u32,
    },
    Bitmap {
        width: u32,
        height: u32,
    },
    Window,
    NativeAllocationRegistry,
    /// LeakCanary's `KeyedWeakReference`: the object it watches is a suspect if still strongly
    /// reachable.
    Watched {
        referent: u32,
    },
}

/// A class: from a class dump, or one of the pseudo-classes of primitive arrays.
#[derive(Clone, Debug)]
pub struct Class {
    pub id: u64,
    /// The class object's node (`NONE` for pseudo-classes).
    pub node: u32,
    /// Java name, dotted (`java.lang.String`, `int[]`, `java.lang.Object[]`).
    pub name: String,
    /// Index of the superclass in `Index::classes`, or `NONE`.
    pub super_idx: u32,
    pub super_id: u64,
    pub loader_id: u64,
    pub instance_size: u32,
    /// Fields this class declares (not inherited), in dump order.
    pub fields: Vec<Field>,
    pub statics: Vec<StaticRef>,
    /// Size of the static values in the dump (the class object's shallow size).
    pub statics_bytes: u32,
    /// Strong reference slots of an instance: (byte offset in the field data, declaring class,
    /// field index in that class), over the whole superclass chain.
    pub ref_slots: Vec<(u32, u32, u16)>,
    /// Bytes of field data an instance has according to the layouts.
    pub data_len: u32,
    pub role: Role,
    /// Instances (or arrays) of this class in the dump.
    pub instances: u32,
}

/// A piece of a heap dump segment (or 1.0.1 heap dump record): a run of its whole sub-records,
/// about [`PIECE`] bytes long (less at the segment's end, more if one sub-record is longer), and
/// the range of the ids of the objects in it, so that a later pass can parse only the pieces
/// that hold the objects it wants.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    /// Offset of the piece's first sub-record.
    pub offset: u64,
    /// Bytes of sub-records, without any record header.
    pub len: u64,
    /// The tag of the record the piece belongs to (`HEAP_DUMP` or `HEAP_DUMP_SEGMENT`).
    pub tag: u8,
    pub min_id: u64,
    pub max_id: u64,
}

/// A heap dump segment is cut into pieces of about this many bytes (see [`Segment`]).
pub const PIECE: u64 = 64 << 10;

/// A GC root as the dump lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Root {
    pub node: u32,
    pub tag: u8,
}

/// Something a detector flagged while the objects passed by (by id: some watched referents are
/// resolved after the pass).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flag {
    pub node: u32,
    pub reason: String,
    pub detail: String,
}

/// Counts of what was tolerated.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IndexStats {
    pub objects: u64,
    pub classes: u64,
    pub instances: u64,
    pub object_arrays: u64,
    pub primitive_arrays: u64,
    /// Primitive arrays whose contents were stripped (0xC3), counted at their full size.
    pub stripped_arrays: u64,
    pub edges: u64,
    /// References to ids the dump does not contain (dropped).
    pub missing_refs: u64,
    /// Roots naming ids the dump does not contain (dropped).
    pub missing_roots: u64,
    pub duplicate_ids: u64,
    /// Instances whose class the dump does not contain.
    pub unknown_class: u64,
    /// Instances whose field data is shorter than their class layout says.
    pub short_instances: u64,
}

/// Thresholds the index needs while it passes over the objects.
#[derive(Clone, Copy, Debug)]
pub struct IndexLimits {
    pub bitmap_min_pixels: u64,
    pub array_min_bytes: u64,
}

/// The index. See the module documentation.
pub struct Index {
    pub header: Header,
    pub ids: Vec<u64>,
    pub id_map: IdMap,
    pub class_of: Vec<u32>,
    pub shallow: Vec<u32>,
    /// Per node: where its outgoing edges start in `edges` ([`NONE`] if the dump did not
    /// list the object) and how many there are, side by side (one memory access per node).
    pub adj: Vec<[u32; 2]>,
    pub edges: Vec<u32>,
    pub classes: Vec<Class>,
    /// Class ids sorted, with their index in `classes`.
    pub class_lookup: Vec<(u64, u32)>,
    pub roots: Vec<Root>,
    pub strings: Strings,
    pub flags: Vec<Flag>,
    pub stats: IndexStats,
    /// Index of `java.lang.Class` (a pseudo-class if the dump lacks it).
    pub class_class: u32,
    /// Index of the first primitive-array pseudo-class (in `PRIMS` order).
    pub prim_base: u32,
    /// Heap dump segments in file order.
    pub segments: Vec<Segment>,
}

impl Index {
    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
    /// The node of object `id`.
    #[inline]
    pub fn node(&self, id: u64) -> Option<u32> {
        self.id_map.find(&self.ids, id)
    }
    /// The class index of class object `id`.
    pub fn class_by_id(&self, id: u64) -> Option<u32> {
        self.class_lookup
            .binary_search_by_key(&id, |e| e.0)
            .ok()
            .map(|i| self.class_lookup[i].1)
    }
    /// If `node` is a class object, its class index.
    pub fn class_of_node(&self, node: u32) -> Option<u32> {
        if self.class_of[node as usize] != self.class_class {
            return None;
        }
        self.class_by_id(self.ids[node as usize])
    }
    /// Outgoing strong edges of `node`.
    pub fn succ(&self, node: u32) -> &[u32] {
        let [f, d] = self.adj[node as usize];
        if f == NONE {
            return &[];
        }
        &self.edges[f as usize..f as usize + d as usize]
    }
    /// Display name of the class of `node` (for a class object: `class X`).
    pub fn class_name(&self, node: u32) -> String {
        if let Some(c) = self.class_of_node(node) {
            return format!("class {}", self.classes[c as usize].name);
        }
        self.classes[self.class_of[node as usize] as usize]
            .name
            .clone()
    }
    /// Whether class `c` is `name` or a subclass of it.
    pub fn is_subclass(&self, mut c: u32, name: &str) -> bool {
        let mut hops = 0;
        while c != NONE && hops < 256 {
            if self.classes[c as usize].name == name {
                return true;
            }
            c = self.classes[c as usize].super_idx;
            hops += 1;
        }
        false
    }
    /// Drop the table that maps ids to nodes quickly, once the graph is built (up to 8 bytes per
    /// object; 10 MB on a 540 MB HotSpot dump): [`Index::node`] then searches the ids.
    pub fn drop_id_map(&mut self) {
        self.id_map = IdMap::Search;
    }
    /// Drop the forward graph (after the reverse one has been built from it).
    pub fn drop_edges(&mut self) {
        self.adj = Vec::new();
        self.edges = Vec::new();
    }
}

/// Turn a VM class name into a Java one: `java/lang/String` → `java.lang.String`,
/// `[[I` → `int[][]`, `[Ljava/lang/Object;` → `java.lang.Object[]`.
pub fn java_name(raw: &str) -> String {
    let dims = raw.bytes().take_while(|&b| b == b'[').count();
    if dims == 0 {
        return raw.replace('/', ".");
    }
    let rest = &raw[dims..];
    let base = match rest {
        "Z" => "boolean".to_string(),
        "C" => "char".to_string(),
        "F" => "float".to_string(),
        "D" => "double".to_string(),
        "B" => "byte".to_string(),
        "S" => "short".to_string(),
        "I" => "int".to_string(),
        "J" => "long".to_string(),
        r if r.starts_with('L') && r.ends_with(';') => r[1..r.len() - 1].replace('/', "."),
        r => r.replace('/', "."),
    };
    format!("{base}{}", "[]".repeat(dims))
}

fn prim_name(ty: BasicType) -> String {
    format!("{}[]", ty.name())
}

const PRIMS: [BasicType; 8] = [
    BasicType::Boolean,
    BasicType::Char,
    BasicType::Float,
    BasicType::Double,
    BasicType::Byte,
    BasicType::Short,
    BasicType::Int,
    BasicType::Long,
];

/// Array header bytes counted in a shallow size (length word plus object header).
pub fn array_header(id_size: u32) -> u64 {
    if id_size == 4 {
        12
    } else {
        16
    }
}

/// Finds an object id's node, its position among the sorted ids, in a few memory accesses
/// instead of a binary search over millions. Ids are addresses: dense ranges with wide gaps
/// between them. Where the ids are packed enough, a [`RankMap`] does it, one cache line per
/// lookup; otherwise [`Buckets`].
pub enum IdMap {
    Rank(RankMap),
    Buckets(Buckets),
    /// No table: a binary search of the ids (after [`Index::drop_id_map`]).
    Search,
}

impl Default for IdMap {
    fn default() -> Self {
        IdMap::Buckets(Buckets::default())
    }
}

impl IdMap {
    /// `ids` sorted.
    pub fn new(ids: &[u64]) -> IdMap {
        match RankMap::new(ids) {
            Some(rank) => IdMap::Rank(rank),
            None => IdMap::Buckets(Buckets::new(ids)),
        }
    }

    /// The bucket map of `ids` (sorted), even where a [`RankMap`] would do (for comparisons).
    pub fn buckets(ids: &[u64]) -> IdMap {
        IdMap::Buckets(Buckets::new(ids))
    }

    /// The position of `id` in `ids` (the slice this map was built from).
    #[inline]
    pub fn find(&self, ids: &[u64], id: u64) -> Option<u32> {
        match self {
            IdMap::Rank(r) => r.find(id),
            IdMap::Buckets(b) => b.find(ids, id),
            IdMap::Search => ids.binary_search(&id).ok().map(|i| i as u32),
        }
    }

    /// [`IdMap::find`] for many ids at once: `out[i]` is the position of `q[i]`, or [`NONE`].
    pub fn find_batch(&self, ids: &[u64], q: &[u64], out: &mut [u32]) {
        match self {
            IdMap::Rank(r) => r.find_batch(q, out),
            IdMap::Buckets(b) => b.find_batch(ids, q, out),
            IdMap::Search => {
                for (o, &id) in out.iter_mut().zip(q) {
                    *o = ids.binary_search(&id).map_or(NONE, |i| i as u32);
                }
            }
        }
    }

    /// The map's size in bytes (not counting the ids).
    pub fn bytes(&self) -> usize {
        match self {
            IdMap::Rank(r) => r.bytes(),
            IdMap::Buckets(b) => (b.region.len() + b.starts.len()) * 4,
            IdMap::Search => 0,
        }
    }
}

/// Sorted object ids with a two-level bucket table over their range.
///
/// Level one cuts the range into at most about `len / 16` regions of `2^s1` bytes and gives each
/// region that holds an id its first bucket; level two cuts each such region into `2^(s1 - s2)`
/// buckets, as many in all as about a third of the ids. The buckets thus cover only the
/// occupied parts of the range: ART places its image, zygote and app spaces gigabytes apart,
/// and one level over the whole span put hundreds of ids in a bucket there.
#[derive(Default)]
pub struct Buckets {
    min: u64,
    s1: u32,
    /// Per region: its first bucket, or [`NONE`] if it holds no id.
    region: Vec<u32>,
    s2: u32,
    /// `(1 << (s1 - s2)) - 1`: a bucket's number within its region, from the offset `>> s2`.
    mask: u64,
    /// `starts[b]..starts[b + 1]` are the positions of the ids in bucket `b`.
    starts: Vec<u32>,
}

impl Buckets {
    /// `ids` sorted.
    pub fn new(ids: &[u64]) -> Buckets {
        let (Some(&min), Some(&max)) = (ids.first(), ids.last()) else {
            return Buckets::default();
        };
        let span = max - min;
        let limit = (ids.len() as u64 / 16).max(64);
        let mut s1 = 0;
        while s1 < 63 && (span >> s1) >= limit {
            s1 += 1;
        }
        let region_of = |id: u64| ((id - min) >> s1) as usize;
        let occupied = super::arrays::runs(ids.iter().map(|&id| region_of(id)));
        let per = (ids.len() / (3 * occupied)).max(1);
        let mut k = (usize::BITS - 1 - per.leading_zeros()).min(s1);
        while k > 0 && (occupied as u64) << k >= NONE as u64 {
            k -= 1;
        }
        let mut m = Buckets {
            min,
            s1,
            region: vec![NONE; (span >> s1) as usize + 1],
            s2: s1 - k,
            mask: (1u64 << k) - 1,
            starts: Vec::new(),
        };
        let mut next = 0u32;
        let mut last = usize::MAX;
        for &id in ids {
            let r = region_of(id);
            if r != last {
                last = r;
                m.region[r] = next;
                next += 1 << k;
            }
        }
        let mut starts = vec![0u32; next as usize + 1];
        for &id in ids {
            if let Some(b) = m.bucket(id) {
                starts[b + 1] += 1;
            }
        }
        super::arrays::prefix_sums(&mut starts);
        m.starts = starts;
        m
    }

    /// `id`'s offset from the smallest id and its region's number (which may lie past the
    /// last region).
    #[inline]
    fn place(&self, id: u64) -> Option<(u64, u64)> {
        let off = id.checked_sub(self.min)?;
        Some((off, off >> self.s1))
    }

    /// The bucket `id` falls in, if its region holds any id.
    #[inline]
    fn bucket(&self, id: u64) -> Option<usize> {
        let (off, r) = self.place(id)?;
        if r >= self.region.len() as u64 {
            return None;
        }
        let base = self.region[r as usize];
        if base == NONE {
            return None;
        }
        Some(base as usize + ((off >> self.s2) & self.mask) as usize)
    }

    /// The ids' positions that bucket `b` spans.
    #[inline]
    fn span(&self, b: usize) -> (usize, usize) {
        (self.starts[b] as usize, self.starts[b + 1] as usize)
    }

    /// The position of `id` in `ids` (the slice this map was built from).
    #[inline]
    pub fn find(&self, ids: &[u64], id: u64) -> Option<u32> {
        let (lo, hi) = self.span(self.bucket(id)?);
        let s = &ids[lo..hi];
        if s.len() <= 8 {
            return s.iter().position(|&x| x == id).map(|i| (lo + i) as u32);
        }
        s.binary_search(&id).ok().map(|i| (lo + i) as u32)
    }

    /// [`Buckets::find`] for many ids at once: `out[i]` is the position of `q[i]`, or [`NONE`].
    /// A lookup reads three arrays in turn (the region's first bucket, the bucket's bounds, the
    /// ids), each read waiting for the one before. So the queries go through a pipeline: the
    /// region of query `t` is asked for, the bucket bounds of `t - D` (its region now cached),
    /// the first id of `t - 2D`, and query `t - 3D` is searched, its memory there by now.
    pub fn find_batch(&self, ids: &[u64], q: &[u64], out: &mut [u32]) {
        const D: usize = 8;
        const RING: usize = 32;
        let n = q.len();
        let mut bucket = [usize::MAX; RING];
        let mut span = [(0usize, 0usize); RING];
        for t in 0..n + 3 * D {
            if let Some((_, r)) = q.get(t).and_then(|&id| self.place(id)) {
                crate::mapped::prefetch_at(&self.region, usize::try_from(r).unwrap_or(usize::MAX));
            }
            if let Some(j) = t.checked_sub(D).filter(|&j| j < n) {
                let b = self.bucket(q[j]).unwrap_or(usize::MAX);
                bucket[j % RING] = b;
                if b != usize::MAX {
                    crate::mapped::prefetch_at(&self.starts, b);
                }
            }
            if let Some(j) = t.checked_sub(2 * D).filter(|&j| j < n) {
                let b = bucket[j % RING];
                let sp = if b == usize::MAX {
                    (0, 0)
                } else {
                    self.span(b)
                };
                span[j % RING] = sp;
                if sp.0 < sp.1 {
                    crate::mapped::prefetch_at(ids, sp.0);
                }
            }
            if let Some(i) = t.checked_sub(3 * D).filter(|&i| i < n) {
                let (lo, hi) = span[i % RING];
                let id = q[i];
                let s = &ids[lo..hi];
                out[i] = if s.len() <= 8 {
                    s.iter()
                        .position(|&x| x == id)
                        .map_or(NONE, |k| (lo + k) as u32)
                } else {
                    s.binary_search(&id).map_or(NONE, |k| (lo + k) as u32)
                };
            }
        }
    }

    /// The most ids any bucket holds.
    #[cfg(test)]
    fn max_bucket(&self) -> usize {
        self.starts
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------------------------
// Pass 1

struct RawClass {
    id: u64,
    super_id: u64,
    loader_id: u64,
    instance_size: u32,
    fields: Vec<(u64, BasicType)>,
    statics: Vec<(u64, u64)>,
    statics_bytes: u32,
}

/// The per-node arrays a finished index holds: class, shallow size, edge range.
pub(crate) type NodeArrays = (Vec<u32>, Vec<u32>, Vec<[u32; 2]>);

/// [`NodeArrays`] for `n` nodes, as [`Pass1::finish`] leaves them for the objects to fill in.
pub(crate) fn node_arrays(n: usize) -> NodeArrays {
    // (All three are written here: the pages of an array allocated as zeros would be faulted
    // in later, by the one thread that then writes the objects into it.)
    #[allow(clippy::slow_vector_initialization)]
    let mut shallow = Vec::with_capacity(n);
    shallow.resize(n, 0u32);
    (vec![NONE; n], shallow, vec![[NONE, 0]; n])
}

#[derive(Default)]
pub(crate) struct Pass1 {
    header: Option<Header>,
    strings: Strings,
    names: Vec<(u64, u64)>,
    classes: Vec<RawClass>,
    roots: Vec<(u64, u8)>,
    ids: Vec<u64>,
    /// Whether `ids` is known to be sorted ([`Pass1::sort_ids`] sorts it; the merge of two
    /// sorted gatherings keeps it so), which spares a scan of the ids to find out.
    sorted: bool,
}

impl Visitor for Pass1 {
    fn header(&mut self, h: &Header, _raw: &[u8]) -> Result<(), String> {
        self.header = Some(*h);
        Ok(())
    }
    fn record(&mut self, _offset: u64, r: &Record<'_>, _raw: &[u8]) -> Result<(), String> {
        if let Some((id, text)) = r.utf8() {
            self.strings.push(id, text);
        } else if let Some((_, class_id, _, name_id)) = r.load_class() {
            self.names.push((class_id, name_id));
        }
        Ok(())
    }
    fn sub(&mut self, _offset: u64, s: &Sub<'_>, _raw: &[u8]) -> Result<(), String> {
        match s {
            Sub::Root { tag, id, .. } => {
                // ART's "unreachable" objects are listed as roots but are not held by anything.
                if *tag != sub::ROOT_UNREACHABLE && *id != 0 {
                    self.roots.push((*id, *tag));
                }
            }
            Sub::Class(c) => {
                self.ids.push(c.id);
                self.classes.push(raw_class(c));
            }
            Sub::Instance { id, .. }
            | Sub::ObjectArray { id, .. }
            | Sub::PrimitiveArray { id, .. } => self.ids.push(*id),
            Sub::HeapDumpInfo { .. } => {}
        }
        Ok(())
    }
}

fn raw_class(c: &ClassDump<'_>) -> RawClass {
    RawClass {
        id: c.id,
        super_id: c.super_id,
        loader_id: c.loader_id,
        instance_size: c.instance_size,
        fields: c.fields().collect(),
        statics: c
            .statics()
            .filter(|(_, ty, _)| *ty == BasicType::Object)
            .map(|(name, _, v)| (name, read_id(v, c.id_size)))
            .collect(),
        statics_bytes: c.statics_raw.len() as u32,
    }
}

impl Pass1 {
    /// Add what another worker gathered over a later part of the file.
    pub(crate) fn merge(&mut self, o: Pass1) {
        if self.header.is_none() {
            self.header = o.header;
        }
        for &(id, at, len) in &o.strings.ids {
            self.strings
                .push(id, &o.strings.arena[at as usize..(at + len) as usize]);
        }
        self.names.extend(o.names);
        self.classes.extend(o.classes);
        self.roots.extend(o.roots);
        self.sorted &= o.sorted;
        if self.sorted {
            // Two sorted runs: merge them in linear time (one after the other, the second is
            // appended).
            super::arrays::merge_into(&mut self.ids, &o.ids);
        } else {
            self.ids.extend(o.ids);
        }
    }

    /// Sort the ids gathered so far (each worker sorts its own, side by side). HotSpot lists its
    /// classes first, then every other object by address: only the head before the longest
    /// ascending tail is sorted, then merged with that tail.
    pub(crate) fn sort_ids(&mut self) {
        self.sorted = true;
        let ids = &mut self.ids;
        let mut t = ids.len().saturating_sub(1);
        while t > 0 && ids[t - 1] <= ids[t] {
            t -= 1;
        }
        if t == 0 {
            return;
        }
        if t > ids.len() / 4 {
            ids.sort_unstable();
            return;
        }
        let mut head = ids[..t].to_vec();
        head.sort_unstable();
        // Merge forward in place: the write position stays behind the tail's read position
        // while the head lasts, and once it is used up the rest of the tail is in place.
        let tail_len = ids.len() - t;
        let mut w = 0;
        let (mut i, mut j) = (0, t);
        while i < head.len() && j < t + tail_len {
            if head[i] <= ids[j] {
                ids[w] = head[i];
                i += 1;
            } else {
                ids[w] = ids[j];
                j += 1;
            }
            w += 1;
        }
        while i < head.len() {
            ids[w] = head[i];
            i += 1;
            w += 1;
        }
        debug_assert!(ids.is_sorted());
    }

    /// Sort what pass 1 gathered and lay out the classes; returns the skeleton index.
    pub(crate) fn finish(self) -> Result<Index, String> {
        // The per-node arrays are allocated and filled on a second thread (their pages are
        // faulted in there) while this one sorts the ids, lays out the classes and maps the
        // ids: for as many nodes as there are ids before duplicates are dropped (none when
        // there are too many ids to index: `finish_then` refuses those).
        let n = Some(self.ids.len())
            .filter(|&n| n < NONE as usize)
            .unwrap_or(0);
        std::thread::scope(|s| {
            let arrays = s.spawn(move || node_arrays(n));
            self.finish_then(move || super::joined(arrays))
        })
    }

    /// [`Pass1::finish`], given what yields the per-node arrays (each at least as long as the
    /// number of distinct ids, as [`node_arrays`] makes them), asked for once the rest of the
    /// index is made.
    pub(crate) fn finish_then(
        mut self,
        arrays: impl FnOnce() -> NodeArrays,
    ) -> Result<Index, String> {
        if self.header.is_none() {
            return Err("the dump has no header".into());
        }
        let mut stats = IndexStats::default();
        self.strings.finish();
        let mut ids = std::mem::take(&mut self.ids);
        if !self.sorted && !ids.is_sorted() {
            ids.sort_unstable();
        }
        let before = ids.len();
        ids.dedup();
        stats.duplicate_ids = (before - ids.len()) as u64;
        ids.shrink_to_fit();
        if ids.len() >= NONE as usize {
            return Err(format!(
                "{} objects: more than this analyser indexes",
                ids.len()
            ));
        }
        let n = ids.len();
        let mut ix = self.finish_with(ids, stats)?;
        let (mut class_of, mut shallow, mut adj) = arrays();
        class_of.resize(n, NONE);
        shallow.resize(n, 0);
        adj.resize(n, [NONE, 0]);
        ix.class_of = class_of;
        ix.shallow = shallow;
        ix.adj = adj;
        Ok(ix)
    }

    /// [`Pass1::finish`] but for the per-node arrays (left empty).
    fn finish_with(mut self, ids: Vec<u64>, mut stats: IndexStats) -> Result<Index, String> {
        let header = self.header.ok_or("the dump has no header")?;
        self.names.sort_unstable();
        self.names.dedup_by_key(|e| e.0);
        let strings = self.strings;
        let name_of = |id: u64| -> Option<String> {
            let i = self.names.binary_search_by_key(&id, |e| e.0).ok()?;
            Some(java_name(&strings.get_or(self.names[i].1)))
        };
        let mut raw = std::mem::take(&mut self.classes);
        raw.sort_by_key(|c| c.id);
        raw.dedup_by_key(|c| c.id);
        let mut classes: Vec<Class> = raw
            .iter()
            .map(|c| Class {
                id: c.id,
                node: ids.binary_search(&c.id).map(|i| i as u32).unwrap_or(NONE),
                name: name_of(c.id).unwrap_or_else(|| format!("<class 0x{:x}>", c.id)),
                super_idx: NONE,
                super_id: c.super_id,
                loader_id: c.loader_id,
                instance_size: c.instance_size,
                fields: c
                    .fields
                    .iter()
                    .map(|&(n, ty)| Field {
                        name: strings.get_or(n),
                        ty,
                    })
                    .collect(),
                statics: c
                    .statics
                    .iter()
                    .map(|&(n, value)| StaticRef {
                        name: strings.get_or(n),
                        value,
                    })
                    .collect(),
                statics_bytes: c.statics_bytes,
                ref_slots: Vec::new(),
                data_len: 0,
                role: Role::None,
                instances: 0,
            })
            .collect();
        drop(raw);
        let mut class_lookup: Vec<(u64, u32)> = classes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id, i as u32))
            .collect();
        class_lookup.sort_unstable();
        for c in classes.iter_mut() {
            if c.super_id != 0 {
                if let Ok(j) = class_lookup.binary_search_by_key(&c.super_id, |e| e.0) {
                    c.super_idx = class_lookup[j].1;
                }
            }
        }
        // Pseudo-classes: primitive arrays, java.lang.Class if absent, unknown classes.
        let prim_base = classes.len() as u32;
        for ty in PRIMS {
            classes.push(pseudo(prim_name(ty)));
        }
        let class_class = match classes.iter().position(|c| c.name == "java.lang.Class") {
            Some(i) => i as u32,
            None => {
                classes.push(pseudo("java.lang.Class".into()));
                (classes.len() - 1) as u32
            }
        };
        classes.push(pseudo("<unknown class>".into()));
        let id_size = header.id_size;
        for i in 0..classes.len() {
            let (slots, len) = layout(&classes, i as u32, id_size);
            classes[i].ref_slots = slots;
            classes[i].data_len = len;
            classes[i].role = role(&classes, i as u32, id_size);
        }
        let mut roots = Vec::with_capacity(self.roots.len());
        for &(id, tag) in &self.roots {
            match ids.binary_search(&id) {
                Ok(n) => roots.push(Root {
                    node: n as u32,
                    tag,
                }),
                Err(_) => stats.missing_roots += 1,
            }
        }
        let n = ids.len();
        stats.objects = n as u64;
        Ok(Index {
            header,
            id_map: IdMap::new(&ids),
            class_of: Vec::new(),
            shallow: Vec::new(),
            adj: Vec::new(),
            edges: Vec::new(),
            ids,
            classes,
            class_lookup,
            roots,
            strings,
            flags: Vec::new(),
            stats,
            class_class,
            prim_base,
            segments: Vec::new(),
        })
    }
}

fn pseudo(name: String) -> Class {
    Class {
        id: 0,
        node: NONE,
        name,
        super_idx: NONE,
        super_id: 0,
        loader_id: 0,
        instance_size: 0,
        fields: Vec::new(),
        statics: Vec::new(),
        statics_bytes: 0,
        ref_slots: Vec::new(),
        data_len: 0,
        role: Role::None,
        instances: 0,
    }
}

/// The chain of class `c` and its superclasses, most derived first (cycles cut).
fn chain(classes: &[Class], mut c: u32) -> Vec<u32> {
    let mut v = Vec::new();
    while c != NONE && v.len() < 256 && !v.contains(&c) {
        v.push(c);
        c = classes[c as usize].super_idx;
    }
    v
}

/// Strong reference slots and data length of an instance of class `c`.
fn layout(classes: &[Class], c: u32, id_size: u32) -> (Vec<(u32, u32, u16)>, u32) {
    let mut off = 0u32;
    let mut slots = Vec::new();
    for k in chain(classes, c) {
        let cl = &classes[k as usize];
        let is_reference = cl.name == "java.lang.ref.Reference";
        for (fi, f) in cl.fields.iter().enumerate() {
            if f.ty == BasicType::Object && !(is_reference && f.name == "referent") {
                slots.push((off, k, fi as u16));
            }
            off = off.saturating_add(f.ty.size(id_size));
        }
    }
    (slots, off)
}

/// Offset in an instance of `c` of the field `name` declared by the class named `decl`.
fn field_offset(classes: &[Class], c: u32, decl: &str, name: &str, id_size: u32) -> Option<u32> {
    let mut off = 0u32;
    for k in chain(classes, c) {
        let cl = &classes[k as usize];
        for f in &cl.fields {
            if cl.name == decl && f.name == name {
                return Some(off);
            }
            off = off.saturating_add(f.ty.size(id_size));
        }
    }
    None
}

const FRAGMENTS: [&str; 3] = [
    "androidx.fragment.app.Fragment",
    "android.support.v4.app.Fragment",
    "android.app.Fragment",
];

fn role(classes: &[Class], c: u32, id_size: u32) -> Role {
    let ch = chain(classes, c);
    let has = |n: &str| ch.iter().any(|&k| classes[k as usize].name == n);
    let off = |decl: &str, name: &str| field_offset(classes, c, decl, name, id_size);
    if has("android.app.Activity") {
        let destroyed = off("android.app.Activity", "mDestroyed");
        let finished = off("android.app.Activity", "mFinished");
        if destroyed.is_some() || finished.is_some() {
            return Role::Activity {
                destroyed,
                finished,
            };
        }
    }
    for f in FRAGMENTS {
        if has(f) {
            if let (Some(manager), Some(called)) = (off(f, "mFragmentManager"), off(f, "mCalled")) {
                return Role::Fragment { manager, called };
            }
        }
    }
    if has("android.graphics.Bitmap") {
        if let (Some(width), Some(height)) = (
            off("android.graphics.Bitmap", "mWidth"),
            off("android.graphics.Bitmap", "mHeight"),
        ) {
            return Role::Bitmap { width, height };
        }
    }
    if has("android.view.Window") {
        return Role::Window;
    }
    if has("libcore.util.NativeAllocationRegistry") {
        return Role::NativeAllocationRegistry;
    }
    if let Some(&k) = ch
        .iter()
        .find(|&&k| classes[k as usize].name.ends_with(".KeyedWeakReference"))
    {
        let _ = k;
        if let Some(referent) = off("java.lang.ref.Reference", "referent") {
            return Role::Watched { referent };
        }
    }
    Role::None
}

// ---------------------------------------------------------------------------------------------
// Pass 2

/// What a pass-2 worker produced over its part of the file, applied to the index afterwards
/// (workers only read the index, so two can run side by side).
#[derive(Default)]
pub(crate) struct Out {
    edges: Vec<u32>,
    /// One-pass mode, per object, in file order: node, class, shallow size, degree (its edges
    /// follow those of the objects before it in `edges`). Two-pass workers write these into
    /// [`Shared`] instead.
    nodes: Vec<[u32; 4]>,
    /// Two-pass mode: objects whose node another object had claimed in [`Shared`] first (the
    /// dump lists the id more than once), as [`Shared::claim`] takes them; [`apply`] keeps the
    /// one listed first in the file.
    dups: Vec<[u32; 5]>,
    stats: IndexStats,
    /// Per class index: instances seen.
    instances: Vec<u32>,
    /// One-pass mode, per class index: entries flagged [`CLASS_EDGE`] (counted here, so that
    /// [`Looked::room`] needs no pass over the entries).
    class_edges: Vec<u32>,
    flags: Vec<Flag>,
    segments: Vec<Segment>,
    /// Watched referents by id (resolved to nodes after the pass) and their reference's node.
    watched: Vec<(u64, u32)>,
}

pub(crate) struct Pass2<'a> {
    ix: &'a Index,
    /// Two-pass mode: the node arrays the workers fill in side by side, and this worker's
    /// number (its part's place in the file). `None` in one-pass mode: the index holds no
    /// object ids yet, so entries are numbered in file order (their ordinal stands for the
    /// node) and edges are kept as raw ids in `raw`, until [`lookup`] and [`place`] map both
    /// once every id is known.
    shared: Option<(&'a Shared, u8)>,
    /// Two-pass mode: the object being read (node, class, shallow size); its edges start at
    /// `start`.
    cur: [u32; 3],
    /// Two-pass mode: objects read since the last [`Pass2::flush`] (node, class, shallow size,
    /// first edge, degree), whose edge lists may still hold targets to drop.
    open: Vec<[u32; 5]>,
    limits: IndexLimits,
    /// Added to the parser's offsets to get file offsets (a worker's parser starts at its part).
    delta: u64,
    /// An object array's elements are streaming into the current object's edges.
    in_array: bool,
    /// Where the current object's edges start in `out.edges` (or `raw`).
    start: u32,
    err: Option<String>,
    /// Direct-mapped cache of class id -> class index (instances of a few classes dominate).
    class_cache: Vec<(u64, u32)>,
    /// The node after the last object's: dumps list most objects by ascending id, so the next
    /// object is usually that node, checked with one read of the sorted ids instead of a lookup.
    next: u32,
    out: Out,
    raw: Raw,
    /// Otherwise, the targets of the last edges, whose slots at the end of `out.edges` wait
    /// for them: looked up [`BATCH`] at a time, so that the lookups' cache misses overlap.
    batch: Vec<u64>,
}

/// A one-pass worker's raw edge targets, in 32-bit words so that [`lookup`] can turn the list
/// into the nodes' list in place: one word per id (`id >> shift`: objects are 8-byte aligned
/// below 32 GiB in a HotSpot dump with 8-byte ids, and 4-byte ids fit as they are) while every
/// id fits, else two (high, low). Half the memory of the two words in the usual case; it is
/// all fresh pages, filled while the file is read.
pub(crate) enum Raw {
    Narrow(Vec<u32>, u32),
    Wide(Vec<[u32; 2]>),
}

impl Raw {
    fn len(&self) -> usize {
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
    fn widen(&mut self) {
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
const BATCH: usize = 1024;
/// Edge targets [`lookup`] looks up at a time.
const LOOKUP: usize = 4096;

const CLASS_CACHE: usize = 1024;

/// In a deferred entry's degree: the entry's first edge, to its class object, is implied (see
/// [`place`]). Degrees stay far below it (an instance has at most 65,535 fields).
const CLASS_EDGE: u32 = 1 << 31;
impl<'a> Pass2<'a> {
    /// A pass-2 worker over the part of the file that starts `delta` bytes after the header,
    /// which writes what it finds into `shared` as worker number `worker` (the parts' order).
    pub(crate) fn new(
        ix: &'a Index,
        shared: &'a Shared,
        worker: u8,
        limits: IndexLimits,
        delta: u64,
    ) -> Self {
        Pass2 {
            shared: Some((shared, worker)),
            ..Pass2::deferred(ix, limits, delta)
        }
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
            err: None,
            class_cache: vec![(0, NONE); CLASS_CACHE],
            next: 0,
            out: Out {
                instances: vec![0; ix.classes.len()],
                class_edges: vec![0; ix.classes.len()],
                ..Out::default()
            },
            raw: Raw::Narrow(Vec::new(), if ix.header.id_size == 8 { 3 } else { 0 }),
            batch: Vec::with_capacity(BATCH),
        }
    }

    /// One-pass mode (see `shared`).
    #[inline]
    fn defer(&self) -> bool {
        self.shared.is_none()
    }

    #[inline]
    fn edge_count(&self) -> usize {
        if self.defer() {
            self.raw.len()
        } else {
            self.out.edges.len()
        }
    }

    #[inline]
    fn class_index(&mut self, class_id: u64) -> Option<u32> {
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
    fn begin(&mut self, id: u64, class: u32, shallow: u64) -> Option<u32> {
        let n = if self.defer() {
            if self.out.nodes.len() >= NONE as usize {
                self.err = Some("more than 4 billion objects: too many for this analyser".into());
                return None;
            }
            self.out.nodes.len() as u32
        } else if self.ix.ids.get(self.next as usize) == Some(&id) {
            self.next
        } else {
            self.ix.node(id)?
        };
        self.next = n.wrapping_add(1);
        if self.edge_count() >= NONE as usize {
            self.err = Some("more than 4 billion references: too many for this analyser".into());
            return None;
        }
        let sh = shallow.min(u32::MAX as u64) as u32;
        self.start = self.edge_count() as u32;
        if self.defer() {
            self.out.nodes.push([n, class, sh, 0]);
        } else {
            self.cur = [n, class, sh];
        }
        self.out.instances[class as usize] += 1;
        Some(n)
    }

    #[inline]
    fn edge(&mut self, target: u64) {
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
    fn flush(&mut self, reading: bool) {
        let edges = &mut self.out.edges;
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
        edges.truncate(to);
        self.out.stats.missing_refs += dropped as u64;
        for o in self.open.drain(..) {
            self.out.stats.edges += o[4] as u64;
            if !shared.claim(worker, o) {
                self.out.dups.push(o);
            }
        }
    }

    /// Close the last entry's edge list.
    fn end(&mut self) {
        let d = self.edge_count() as u32 - self.start;
        if self.defer() {
            if let Some(e) = self.out.nodes.last_mut() {
                e[3] = d;
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

    fn flag(&mut self, node: u32, reason: &str, detail: String) {
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
    targets: Vec<u32>,
    /// How many of `targets` are [`NONE`].
    missing: u64,
}

impl Looked {
    /// The room [`place`] needs in the joined list: every target found, and a class edge per
    /// flagged entry whose class object the dump holds.
    pub(crate) fn room(&self, ix: &Index) -> usize {
        let class_edges: usize = (self.out.class_edges.iter())
            .zip(&ix.classes)
            .filter(|(_, c)| c.node != NONE)
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
        Raw::Wide(v) => (v.into_flattened(), 0, 2),
    };
    let mut q = vec![0u64; LOOKUP.min(n)];
    let mut got = vec![0u32; q.len()];
    let mut missing = 0u64;
    let mut i = 0;
    while i < n {
        let m = (n - i).min(LOOKUP);
        for (j, t) in q[..m].iter_mut().enumerate() {
            *t = match words {
                1 => (targets[i + j] as u64) << shift,
                _ => pair(targets[2 * (i + j)], targets[2 * (i + j) + 1]),
            };
        }
        ix.id_map.find_batch(&ix.ids, &q[..m], &mut got[..m]);
        missing += got[..m].iter().filter(|&&x| x == NONE).count() as u64;
        targets[i..i + m].copy_from_slice(&got[..m]);
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
    out: Out,
    rest: Vec<[u32; 5]>,
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
    dst: &mut [u32],
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
    let mut rest = Vec::new();
    let (mut at, mut kept) = (0usize, 0usize);
    for &[k, c, sh, d] in &entries {
        let n = node_of(k);
        if n as usize >= ix.len() {
            return None;
        }
        let start = kept;
        if d & CLASS_EDGE != 0 {
            let cn = ix.classes.get(c as usize)?.node;
            if cn == NONE {
                missing_refs += 1;
            } else {
                *dst.get_mut(kept)? = cn;
                kept += 1;
            }
        }
        let d = (d & !CLASS_EDGE) as usize;
        for &x in targets.get(at..at.checked_add(d)?)? {
            if x != NONE {
                *dst.get_mut(kept)? = x;
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
    if kept != dst.len() || at != targets.len() {
        return None;
    }
    drop(entries);
    drop(targets);
    out.stats.missing_refs += missing_refs;
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

/// Stops at the first object of the dump, having gathered what comes before it (for a HotSpot
/// dump: every string, class and class dump), so that one pass can then build the graph.
#[derive(Default)]
pub(crate) struct Prefix {
    pub(crate) p1: Pass1,
    /// File offset of the first object sub-record, if any.
    pub(crate) end: Option<u64>,
}

/// The sentinel with which [`Prefix`] stops the parser.
pub(crate) const PREFIX_STOP: &str = "(prefix complete)";

impl Visitor for Prefix {
    fn header(&mut self, h: &Header, raw: &[u8]) -> Result<(), String> {
        self.p1.header(h, raw)
    }
    fn record(&mut self, offset: u64, r: &Record<'_>, raw: &[u8]) -> Result<(), String> {
        self.p1.record(offset, r, raw)
    }
    fn sub(&mut self, offset: u64, s: &Sub<'_>, raw: &[u8]) -> Result<(), String> {
        match s {
            Sub::Instance { .. } | Sub::ObjectArray { .. } | Sub::PrimitiveArray { .. } => {
                self.end = Some(offset);
                Err(PREFIX_STOP.into())
            }
            _ => self.p1.sub(offset, s, raw),
        }
    }
}

impl Pass1 {
    /// How many strings, class names and class dumps were gathered (duplicates included).
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        (self.strings.ids.len(), self.names.len(), self.classes.len())
    }
    /// The object ids in the order they were met (before [`Pass1::finish`] sorts them).
    pub(crate) fn ids(&self) -> &[u64] {
        &self.ids
    }
}

/// Pass 1 and pass 2 at once, over an index of the classes that the [`Prefix`] found. Valid
/// only if no string, class name or class dump comes after the prefix: one that does sets
/// `late`, pass-2 work stops, and the caller runs pass 2 again over the full index.
pub(crate) struct OnePass<'a> {
    pub(crate) p1: Pass1,
    pub(crate) p2: Pass2<'a>,
    /// File offset where the prefix ended.
    prefix_end: u64,
    /// Added to the parser's offsets to get file offsets.
    delta: u64,
    pub(crate) late: bool,
    /// Set by the first worker that finds something late, so that the others stop their pass-2
    /// work too (it would be thrown away): on an ART dump, whose class dumps come with the
    /// objects, the first worker finds one at once, while a worker over the app heap's objects
    /// may find none in its part.
    any_late: &'a AtomicBool,
    /// Whether the ids of the objects after the `head` ascend strictly in file order.
    pub(crate) ascending: bool,
    /// How many class dumps come before any other object (HotSpot lists them first, in no
    /// order of id).
    pub(crate) head: usize,
}

impl<'a> OnePass<'a> {
    /// A worker over the part of the file that starts `delta` bytes after the header; `any_late`
    /// is shared by all the workers.
    pub(crate) fn new(
        skel: &'a Index,
        limits: IndexLimits,
        delta: u64,
        prefix_end: u64,
        any_late: &'a AtomicBool,
    ) -> Self {
        OnePass {
            p1: Pass1::default(),
            p2: Pass2::deferred(skel, limits, delta),
            prefix_end,
            delta,
            late: false,
            any_late,
            ascending: true,
            head: 0,
        }
    }

    /// Whether the sub-record or record at parser offset `offset` comes after the prefix.
    fn after_prefix(&self, offset: u64) -> bool {
        offset.wrapping_add(self.delta) >= self.prefix_end
    }

    /// Something came late (here or in another worker's part): pass-2 work stops, and what it
    /// gathered is freed.
    #[cold]
    fn go_late(&mut self) {
        self.late = true;
        self.any_late.store(true, Ordering::Relaxed);
        self.p2.out = Out::default();
        self.p2.raw = Raw::Narrow(Vec::new(), 0);
    }
}

impl Visitor for OnePass<'_> {
    fn header(&mut self, h: &Header, raw: &[u8]) -> Result<(), String> {
        self.p1.header(h, raw)
    }
    fn record(&mut self, offset: u64, r: &Record<'_>, raw: &[u8]) -> Result<(), String> {
        if !self.late
            && self.after_prefix(offset)
            && (r.utf8().is_some() || r.load_class().is_some())
        {
            self.go_late();
        }
        self.p1.record(offset, r, raw)
    }
    fn heap_dump_start(
        &mut self,
        offset: u64,
        tag: u8,
        len: u32,
        raw: &[u8],
    ) -> Result<(), String> {
        if self.late {
            return Ok(());
        }
        self.p2.heap_dump_start(offset, tag, len, raw)
    }
    fn sub(&mut self, offset: u64, s: &Sub<'_>, raw: &[u8]) -> Result<(), String> {
        if !self.late
            && (self.any_late.load(Ordering::Relaxed)
                || matches!(s, Sub::Class(_)) && self.after_prefix(offset))
        {
            self.go_late();
        }
        let before = self.p1.ids.len();
        self.p1.sub(offset, s, raw)?;
        if self.p1.ids.len() > before {
            if matches!(s, Sub::Class(_)) && before == self.head {
                self.head += 1;
            } else if before > self.head && self.p1.ids[before - 1] >= self.p1.ids[before] {
                self.ascending = false;
            }
        }
        if self.late {
            return Ok(());
        }
        self.p2.sub(offset, s, raw)
    }
    fn array_data(&mut self, data: &[u8]) -> Result<(), String> {
        if self.late {
            return Ok(());
        }
        self.p2.array_data(data)
    }
    fn array_end(&mut self) -> Result<(), String> {
        if self.late {
            return Ok(());
        }
        self.p2.array_end()
    }
}

impl IndexStats {
    fn add(&mut self, o: &IndexStats) {
        self.classes += o.classes;
        self.instances += o.instances;
        self.object_arrays += o.object_arrays;
        self.primitive_arrays += o.primitive_arrays;
        self.stripped_arrays += o.stripped_arrays;
        self.edges += o.edges;
        self.missing_refs += o.missing_refs;
        self.unknown_class += o.unknown_class;
        self.short_instances += o.short_instances;
    }
}

/// The per-node arrays while two-pass workers fill them in side by side (taken out of the
/// index by [`Shared::take`], put back by [`apply`]). Each worker writes an object's class,
/// shallow size and edge range as soon as its edge list is final, so that no worker buffers an
/// entry per object (16 bytes each: 22 MB on the generated 150 MB ART-style dump, whose peak
/// was 100 MB with them).
///
/// An object's edge range starts where it does in its worker's list; `owner` names the worker
/// (`u8::MAX`: no worker listed the object), and [`apply`] adds the start of that worker's list
/// in the joined one. The first worker to claim a node writes it; a later claim is a duplicate
/// id, kept aside by its worker, and [`apply`] then keeps whichever the file lists first.
pub(crate) struct Shared {
    class_of: Vec<AtomicU32>,
    shallow: Vec<AtomicU32>,
    adj: Vec<[AtomicU32; 2]>,
    owner: Vec<AtomicU8>,
}

/// Most pass-2 workers (one per part of the file): their numbers fit [`Shared::owner`]'s bytes.
pub(crate) const MAX_WORKERS: usize = u8::MAX as usize;

impl Shared {
    /// Take the index's node arrays for two-pass workers to fill in. The vectors keep their
    /// memory (an atomic has the layout of its integer).
    pub(crate) fn take(ix: &mut Index) -> Shared {
        let n = ix.len();
        Shared {
            class_of: std::mem::take(&mut ix.class_of)
                .into_iter()
                .map(AtomicU32::new)
                .collect(),
            shallow: std::mem::take(&mut ix.shallow)
                .into_iter()
                .map(AtomicU32::new)
                .collect(),
            adj: std::mem::take(&mut ix.adj)
                .into_iter()
                .map(|[f, d]| [AtomicU32::new(f), AtomicU32::new(d)])
                .collect(),
            owner: (0..n).map(|_| AtomicU8::new(u8::MAX)).collect(),
        }
    }

    /// Worker `worker`'s object `o` (node, class, shallow size, first edge, degree), if no
    /// other object holds its node yet; `false` if one does.
    #[inline]
    fn claim(&self, worker: u8, o: [u32; 5]) -> bool {
        let n = o[0] as usize;
        if self.owner[n]
            .compare_exchange(u8::MAX, worker, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        self.put(n, o);
        true
    }

    #[inline]
    fn put(&self, n: usize, o: [u32; 5]) {
        self.class_of[n].store(o[1], Ordering::Relaxed);
        self.shallow[n].store(o[2], Ordering::Relaxed);
        self.adj[n][0].store(o[3], Ordering::Relaxed);
        self.adj[n][1].store(o[4], Ordering::Relaxed);
    }

    /// Keep, of each duplicate id, the object the file lists first: `dups[w]` is worker `w`'s
    /// list. (Within a worker the first of an id claims it or is the first of its list.)
    fn settle(&mut self, dups: &[Vec<[u32; 5]>]) {
        for (w, list) in dups.iter().enumerate() {
            for &o in list {
                let n = o[0] as usize;
                let owner = self.owner[n].get_mut();
                if (w as u8) < *owner {
                    *owner = w as u8;
                    self.put(n, o);
                }
            }
        }
    }

    /// Put the arrays back into the index, each edge range moved by `bases[worker]`.
    fn put_back(self, ix: &mut Index, bases: &[u32]) {
        ix.class_of = self
            .class_of
            .into_iter()
            .map(AtomicU32::into_inner)
            .collect();
        ix.shallow = self
            .shallow
            .into_iter()
            .map(AtomicU32::into_inner)
            .collect();
        ix.adj = self
            .adj
            .into_iter()
            .zip(self.owner)
            .map(|([f, d], w)| match bases.get(w.into_inner() as usize) {
                Some(&b) => [f.into_inner() + b, d.into_inner()],
                None => [NONE, 0],
            })
            .collect();
    }
}

/// Apply one-pass workers' outputs, in file order, to the index, their edge lists joined into
/// `edges` and most of their objects written by [`place`]: the objects it left, and the rest of
/// each output. Returns the watched referents.
pub(crate) fn apply_placed(
    ix: &mut Index,
    placed: Vec<Placed>,
    edges: Vec<u32>,
) -> Vec<(u64, u32)> {
    ix.edges = edges;
    let mut watched = Vec::new();
    for Placed { out, rest } in placed {
        for [n, c, sh, f, d] in rest {
            let n = n as usize;
            if ix.adj[n][0] != NONE {
                // A duplicate id (pass 1 counted it): the object listed first is kept.
                continue;
            }
            ix.class_of[n] = c;
            ix.shallow[n] = sh;
            ix.adj[n] = [f, d];
        }
        watched.extend(apply_rest(ix, out));
    }
    watched
}

/// Apply two-pass workers' outputs, in file order, to the index, and put back the node arrays
/// they filled in (`shared`); returns the watched referents.
pub(crate) fn apply(
    ix: &mut Index,
    outs: Vec<Out>,
    mut shared: Shared,
) -> Result<Vec<(u64, u32)>, String> {
    let total: u64 = outs.iter().map(|o| o.edges.len() as u64).sum();
    if total >= NONE as u64 {
        return Err("more than 4 billion references: too many for this analyser".into());
    }
    // The edge lists are joined on a second thread while this one fills in the nodes.
    let mut outs = outs;
    let lists: Vec<Vec<u32>> = outs
        .iter_mut()
        .map(|o| std::mem::take(&mut o.edges))
        .collect();
    let mut bases = Vec::with_capacity(lists.len());
    let mut acc = ix.edges.len() as u32;
    for l in &lists {
        bases.push(acc);
        acc += l.len() as u32;
    }
    let prior = std::mem::take(&mut ix.edges);
    let (edges, watched) = std::thread::scope(|s| {
        let joiner = s.spawn(move || {
            let mut it = lists.into_iter();
            let mut e = if prior.is_empty() {
                it.next().unwrap_or_default()
            } else {
                prior
            };
            e.reserve_exact((total as usize).saturating_sub(e.len()));
            for l in it {
                e.extend_from_slice(&l);
            }
            e
        });
        let dups: Vec<_> = outs
            .iter_mut()
            .map(|o| std::mem::take(&mut o.dups))
            .collect();
        // (Pass 1 counted the duplicates when it dropped their ids.)
        shared.settle(&dups);
        shared.put_back(ix, &bases);
        // (Two-pass workers wrote their objects into `shared`.)
        let mut watched = Vec::new();
        for o in outs {
            watched.extend(apply_rest(ix, o));
        }
        (super::joined(joiner), watched)
    });
    ix.edges = edges;
    Ok(watched)
}

/// What an output adds to the index besides its objects; returns its watched referents.
fn apply_rest(ix: &mut Index, o: Out) -> Vec<(u64, u32)> {
    ix.stats.add(&o.stats);
    for (c, k) in ix.classes.iter_mut().zip(&o.instances) {
        c.instances += k;
    }
    ix.flags.extend(o.flags);
    ix.segments.extend(o.segments);
    o.watched
}

fn byte_at(data: &[u8], off: Option<u32>) -> bool {
    off.and_then(|o| data.get(o as usize))
        .is_some_and(|&b| b != 0)
}

fn int_at(data: &[u8], off: u32) -> Option<u32> {
    let o = off as usize;
    data.get(o..o + 4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn id_at(data: &[u8], off: u32, id_size: u32) -> Option<u64> {
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
        // Start a new piece at this sub-record once the current one is long enough.
        let at = offset.wrapping_add(self.delta);
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
        let id = match *s {
            Sub::Class(ref c) => c.id,
            Sub::Instance { id, .. } | Sub::ObjectArray { id, .. } => id,
            _ => 0,
        };
        if id != 0 {
            if let Some(seg) = self.out.segments.last_mut() {
                seg.min_id = seg.min_id.min(id);
                seg.max_id = seg.max_id.max(id);
            }
        }
        let id_size = self.ix.header.id_size;
        let ix = self.ix;
        match *s {
            Sub::Root { .. } | Sub::HeapDumpInfo { .. } => {}
            Sub::Class(ref c) => {
                let Some(_) = self.begin(c.id, ix.class_class, c.statics_raw.len() as u64) else {
                    return Ok(());
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
            Sub::Instance {
                id, class_id, data, ..
            } => {
                let ci = match self.class_index(class_id) {
                    Some(ci) => ci,
                    None => {
                        self.out.stats.unknown_class += 1;
                        (ix.classes.len() - 1) as u32
                    }
                };
                let cl = &ix.classes[ci as usize];
                let size = if cl.instance_size > 0 {
                    cl.instance_size
                } else {
                    data.len() as u32
                };
                let Some(n) = self.begin(id, ci, size as u64) else {
                    return Ok(());
                };
                self.out.stats.instances += 1;
                if (data.len() as u32) < cl.data_len {
                    self.out.stats.short_instances += 1;
                }
                // Instance -> its class (an instance keeps its class loaded). Deferred, the
                // edge is not kept as a raw id: the entry is flagged and [`place`] puts the
                // class's node first in its list (half the edges of a heap are these).
                let implicit = self.defer() && class_id != 0 && ci != (ix.classes.len() - 1) as u32;
                if !implicit {
                    self.edge(class_id);
                }
                for &(off, _, _) in &cl.ref_slots {
                    if let Some(t) = id_at(data, off, id_size) {
                        self.edge(t);
                    }
                }
                self.end();
                if implicit {
                    if let Some(e) = self.out.nodes.last_mut() {
                        e[3] |= CLASS_EDGE;
                        self.out.class_edges[ci as usize] += 1;
                    }
                }
                match cl.role {
                    Role::None | Role::Window | Role::NativeAllocationRegistry => {}
                    Role::Activity {
                        destroyed,
                        finished,
                    } => {
                        let d = byte_at(data, destroyed);
                        let f = byte_at(data, finished);
                        if d || f {
                            let why = if d { "mDestroyed" } else { "mFinished" };
                            self.flag(n, "Activity Leak", format!("{why} is true"));
                        }
                    }
                    Role::Fragment { manager, called } => {
                        let fm = id_at(data, manager, id_size);
                        if fm == Some(0) && byte_at(data, Some(called)) {
                            self.flag(
                                n,
                                "Fragment Leak",
                                "mFragmentManager is null and mCalled is true".into(),
                            );
                        }
                    }
                    Role::Bitmap { width, height } => {
                        if let (Some(w), Some(h)) = (int_at(data, width), int_at(data, height)) {
                            let px = w as u64 * h as u64;
                            if w as i32 > 0 && h as i32 > 0 && px >= self.limits.bitmap_min_pixels {
                                self.flag(n, "Bitmap Size Over Threshold", format!("{w}x{h}"));
                            }
                        }
                    }
                    Role::Watched { referent } => {
                        if let Some(r) = id_at(data, referent, id_size) {
                            if r != 0 {
                                self.out.watched.push((r, n));
                            }
                        }
                    }
                }
            }
            Sub::ObjectArray {
                id, len, class_id, ..
            } => {
                self.in_array = false;
                let ci = self
                    .class_index(class_id)
                    .unwrap_or((ix.classes.len() - 1) as u32);
                let bytes = len as u64 * id_size as u64 + array_header(id_size);
                let Some(n) = self.begin(id, ci, bytes) else {
                    return Ok(());
                };
                self.out.stats.object_arrays += 1;
                if bytes >= self.limits.array_min_bytes {
                    let name = ix.classes[ci as usize].name.clone();
                    self.flag(n, "Array Size Over Threshold", format!("{name} of {len}"));
                }
                self.edge(class_id);
                self.in_array = true;
            }
            Sub::PrimitiveArray {
                id,
                len,
                ty,
                nodata,
                ..
            } => {
                self.in_array = false;
                let pi = PRIMS.iter().position(|&p| p == ty).unwrap_or(4) as u32;
                let ci = ix.prim_base + pi;
                let bytes = len as u64 * ty.size(id_size) as u64 + array_header(id_size);
                let Some(n) = self.begin(id, ci, bytes) else {
                    return Ok(());
                };
                self.out.stats.primitive_arrays += 1;
                if nodata {
                    self.out.stats.stripped_arrays += 1;
                }
                if bytes >= self.limits.array_min_bytes {
                    self.flag(
                        n,
                        "Array Size Over Threshold",
                        format!("{} of {len}", prim_name(ty)),
                    );
                }
                self.end();
            }
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

/// Resolve watched referents to nodes and flag them.
pub(crate) fn flag_watched(ix: &mut Index, watched: Vec<(u64, u32)>) {
    let mut seen: HashMap<u32, ()> = HashMap::new();
    for (r, _wref) in watched {
        if let Some(n) = ix.node(r) {
            if seen.insert(n, ()).is_none() {
                ix.flags.push(Flag {
                    node: n,
                    reason: "Watched Object Retained".into(),
                    detail: "referent of a KeyedWeakReference".into(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A one-pass worker whose part holds nothing late stops its pass-2 work (and frees what
    /// it gathered) once another worker has found something late; its pass 1 goes on to the
    /// end of its part either way. (The first worker over an ART dump finds a class dump at
    /// once; a worker over the app heap's objects may find none in its part.)
    #[test]
    fn a_worker_stops_pass_2_once_another_finds_something_late() {
        use crate::hprof::Parser;
        let bytes = crate::analyze::tests::holder_dump(|w| {
            for k in 0..10u64 {
                w.instance(0x100 + 8 * k, 0x20, &(0x108 + 8 * k).to_be_bytes());
            }
        });

        let mut pre = Prefix::default();
        let mut p = Parser::new();
        assert!(
            p.feed(&bytes, &mut pre).is_err(),
            "the prefix stops at the first object"
        );
        let prefix_end = pre.end.expect("the dump has objects");
        let skel = pre.p1.finish().unwrap();
        let limits = IndexLimits {
            bitmap_min_pixels: 1,
            array_min_bytes: 1,
        };
        for elsewhere in [false, true] {
            let any_late = AtomicBool::new(elsewhere);
            let mut v = OnePass::new(&skel, limits, 0, prefix_end, &any_late);
            let mut p = Parser::new();
            p.feed(&bytes, &mut v).unwrap();
            p.finish().unwrap();
            assert_eq!(v.late, elsewhere);
            assert_eq!(v.p1.ids().len(), 12, "2 class objects and 10 instances");
            let (out, raw) = v.p2.finish_deferred().unwrap();
            // Holder's superclass, and each instance's reference (its class edge is implied).
            let (entries, targets) = if elsewhere { (0, 0) } else { (12, 11) };
            assert_eq!(out.nodes.len(), entries);
            assert_eq!(raw.len(), targets);
        }
    }

    #[test]
    fn java_names() {
        assert_eq!(java_name("java/lang/String"), "java.lang.String");
        assert_eq!(java_name("[[I"), "int[][]");
        assert_eq!(java_name("[Ljava/lang/Object;"), "java.lang.Object[]");
        assert_eq!(java_name("android.app.Activity"), "android.app.Activity");
        assert_eq!(java_name("java.lang.Object[]"), "java.lang.Object[]");
        assert_eq!(java_name("["), "[]");
    }

    proptest! {
        /// A worker's ids, a head in any order (a HotSpot dump's class dumps: among the rest's
        /// ids, equal to some, and beyond its last) then an ascending rest with repeats, come
        /// out sorted, each kept.
        #[test]
        fn sort_ids_merges_the_head_into_the_ascending_rest(
            head in proptest::collection::vec(0u64..400_000, 0..60),
            steps in proptest::collection::vec(0u64..200, 240..2000),
        ) {
            let mut ids = head.clone();
            let mut x = 0;
            for s in steps {
                x += s;
                ids.push(x);
            }
            let mut want = ids.clone();
            want.sort_unstable();
            let mut p = Pass1 {
                ids,
                ..Pass1::default()
            };
            p.sort_ids();
            prop_assert_eq!(p.ids, want);
        }

        /// Each map (the rank map, the buckets, the plain search) finds exactly the ids it was
        /// built from, however they cluster
        /// (ART puts its image, zygote and app spaces far apart).
        #[test]
        fn id_map_finds_exactly_the_ids(
            clusters in proptest::collection::vec((any::<u64>(), 1usize..300, 1u64..64), 1..4),
            probes in proptest::collection::vec(any::<u64>(), 0..200),
        ) {
            let mut ids = Vec::new();
            for (base, n, step) in clusters {
                for i in 0..n as u64 {
                    ids.push(base.wrapping_add(i * step * 8));
                }
            }
            ids.sort_unstable();
            ids.dedup();
            for m in [IdMap::new(&ids), IdMap::buckets(&ids), IdMap::Search] {
                for (i, &id) in ids.iter().enumerate() {
                    prop_assert_eq!(m.find(&ids, id), Some(i as u32));
                }
                for p in &probes {
                    prop_assert_eq!(m.find(&ids, *p), ids.binary_search(p).ok().map(|i| i as u32));
                }
                let mut q: Vec<u64> = probes.clone();
                q.extend(ids.iter().rev().step_by(3));
                let mut got = vec![0u32; q.len()];
                m.find_batch(&ids, &q, &mut got);
                for (p, g) in q.iter().zip(&got) {
                    prop_assert_eq!(*g, ids.binary_search(p).map_or(NONE, |i| i as u32));
                }
            }
            prop_assert_eq!(IdMap::new(&[]).find(&[], 5), None);
        }
    }

    /// Three dense spaces gigabytes apart (ART's image, zygote and app spaces): no bucket holds
    /// more than a few dozen ids. (One level over the whole span put 256 in a bucket of the
    /// generated 150 MB ART dump.)
    #[test]
    fn id_map_buckets_stay_small_when_ids_cluster_far_apart() {
        let ids = super::super::rank::spaces_far_apart();
        let m = Buckets::new(&ids);
        assert!(m.max_bucket() <= 32, "{} ids in one bucket", m.max_bucket());
        for (i, &id) in ids.iter().enumerate().step_by(97) {
            assert_eq!(m.find(&ids, id), Some(i as u32));
            assert_eq!(m.find(&ids, id + 4), None);
        }
    }

    #[test]
    fn id_map_spans_the_whole_u64_range() {
        let ids = [1u64, u64::MAX - 1];
        let m = Buckets::new(&ids);
        assert_eq!(m.find(&ids, 1), Some(0));
        assert_eq!(m.find(&ids, u64::MAX - 1), Some(1));
        assert_eq!(m.find(&ids, u64::MAX), None);
        assert_eq!(m.find(&ids, 0), None);
    }
}
