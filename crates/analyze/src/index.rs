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
//!   object into the node arrays themselves (`Shared`, plus a byte per object naming the
//!   worker); one-pass workers buffer 16 bytes per object until `place` writes it there.
//! - A duplicate id (the dump lists two objects with it) is counted once per extra object, and
//!   its node is the object listed first.
//! - Shallow sizes: an instance counts its class's instance size as the dump states it (HotSpot:
//!   the field bytes; ART: the object size); an array counts length × element size plus a 12- or
//!   16-byte header, also when its contents were stripped (0xC3); a class counts its statics.
//!
//! Files: `input` (where a dump is read from and how the passes read it: whole, the prefix, chosen
//! pieces, or parts side by side), `build` (the driver: which passes, in how many parts, and
//! joining their outputs), `fields` (instance layouts and detector roles), `idmap` (id -> node),
//! `pass2` (the objects' pass), `onepass` (prefix and one-pass parse), `shared` (the node arrays
//! workers fill side by side, and applying their output); this file holds the index's types and
//! pass 1.
#![forbid(unsafe_code)]

use super::arrays::{halves, pair};
pub use super::column::{Column, Grow};
use super::rank::RankMap;
use hprof::{read_id, sub, BasicType, ClassDump, Header, Record, Sub, Visitor};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use sys::scratch::Scratch;

pub(crate) mod backward;
mod build;
pub(crate) mod census;
mod fields;
mod findings;
mod idmap;
mod input;
mod onepass;
mod pass2;
mod services;
mod shared;
mod sizes;
mod threads;

pub use threads::{OnThread, Threads};

#[cfg(test)]
pub(crate) use census::census;
pub(crate) use census::census_and_classes;
pub use census::Counts;
pub(crate) use findings::findings;
pub use findings::Found;

#[cfg(test)]
pub(crate) use build::build_index;
pub(crate) use build::{build_index_cut, build_index_sized, threads};
#[cfg(test)]
pub(crate) use build::{free_node, one_pass, scan, two_pass_graph, FreeNodes, OnePassResult};
pub(crate) use input::{Cuts, Heads, Ranges};
pub use input::{Input, Picked, CHUNK, WINDOW};

use fields::*;
pub use idmap::*;
pub(crate) use onepass::*;
pub(crate) use pass2::*;
pub(crate) use services::{flag_services, SERVICE_LEAK};
pub(crate) use shared::*;
pub use sizes::Conventions;
pub(crate) use sizes::{convert_sizes, finish_sizes, plan_sizes, Sizing, ARRAY_FINDING, RAW_SLACK};

/// "No node / no class".
pub const NONE: u32 = u32::MAX;

/// The most classes a walk up a superclass chain visits (a subclass test, a field search): a
/// crafted dump may chain 65,535 classes, or loop. Real chains are a few dozen deep. The app
/// strip's class layouts (`hprof::strip::holders`) keep the same cap.
pub const MAX_SUPER_CHAIN: usize = 256;

/// The most bytes of one string (a class, field or thread name) the index keeps. Java names
/// are seldom over a few hundred bytes; a crafted dump may name a class with a megabyte, and
/// every leak, path step and histogram row that names it would repeat it (a 1 MB dump made a
/// 111 MB report). A longer string keeps its first bytes (cut on a character boundary) and
/// says how many were left out: `Foo…[+N bytes]`.
pub const MAX_STRING_BYTES: usize = 1024;

/// A string table: UTF8 records, sorted by id, text in one arena; each text at most
/// [`MAX_STRING_BYTES`] plus its cut note.
#[derive(Default)]
pub struct Strings {
    ids: Vec<(u64, u32, u32)>,
    arena: Vec<u8>,
}

impl Strings {
    fn push(&mut self, id: u64, text: &[u8]) {
        let at = self.arena.len() as u32;
        if text.len() > MAX_STRING_BYTES {
            // Back off to the start of a UTF-8 sequence so the kept part decodes whole.
            let mut keep = MAX_STRING_BYTES;
            while keep > 0 && text[keep] & 0xC0 == 0x80 {
                keep -= 1;
            }
            self.arena.extend_from_slice(&text[..keep]);
            self.arena
                .extend_from_slice(format!("…[+{} bytes]", text.len() - keep).as_bytes());
        } else {
            self.arena.extend_from_slice(text);
        }
        self.ids
            .push((id, at, (self.arena.len() - at as usize) as u32));
    }
    /// Add another worker's strings as they are (already cut where they were too long).
    fn append(&mut self, o: Strings) {
        let base = self.arena.len() as u32;
        self.arena.extend_from_slice(&o.arena);
        self.ids
            .extend(o.ids.into_iter().map(|(id, at, len)| (id, base + at, len)));
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
    /// `mDestroyed` (API 17+): an Activity is leaking only once destroyed. `mFinished` says
    /// nothing here: a finishing Activity is on its way out, and the framework still holds it.
    Activity {
        destroyed: u32,
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
    /// reachable and judged retained. `retained`: the offset of `retainedUptimeMillis` (LeakCanary
    /// 2), -1 while the watcher has not yet judged the object retained (it is then only
    /// watched); absent in older LeakCanary, whose watched objects all count as retained.
    Watched {
        referent: u32,
        retained: Option<u32>,
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
    /// Bytes of the primitive static values (the class object's shallow size adds the
    /// reference statics at the VM's reference size: see `sizes`).
    pub static_prim_bytes: u32,
    /// Strong reference slots of an instance: (byte offset in the field data, declaring class,
    /// field index in that class), over the whole superclass chain.
    pub ref_slots: Vec<(u32, u32, u16)>,
    /// Bytes of field data an instance has according to the layouts.
    pub data_len: u32,
    pub role: Role,
    /// Instances (or arrays) of this class in the dump.
    pub instances: u32,
    /// The class object is a GC root the dump lists, of a kind searched first
    /// ([`crate::paths::high_priority`]; HotSpot's sticky classes: its boot loader's). An
    /// object's reference to it then changes no reachability, shortest path, dominator or
    /// retained size (the super-root reaches the class directly, and every path through the
    /// reference has one from the root that skips the object), so the graph leaves it out and
    /// [`IndexStats::rooted_class_refs`] counts it. Set once the roots are known.
    pub rooted: bool,
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

/// The pseudo root tag of an object a zygote or image object held before level `app` dropped
/// it (a `ROOT_JNI_GLOBAL` carrying [`hprof::STRIPPED_HOLDER_MARK`]).
pub const STRIPPED_HOLDER_ROOT: u8 = 0xFD;

/// `tag`, or [`STRIPPED_HOLDER_ROOT`] for a root the `app` strip wrote; `aux` is what follows
/// the root's id (for a JNI global, its reference id: one identifier).
fn holder_tag(tag: u8, aux: &[u8]) -> u8 {
    let marked = tag == sub::ROOT_JNI_GLOBAL
        && matches!(aux.len(), 4 | 8)
        && hprof::read_id(aux, aux.len() as u32) == hprof::STRIPPED_HOLDER_MARK;
    if marked {
        STRIPPED_HOLDER_ROOT
    } else {
        tag
    }
}

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
    /// References of objects to their class where the class is a listed GC root
    /// ([`Class::rooted`]): held by the objects, left out of the graph.
    pub rooted_class_refs: u64,
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
    /// Each node's id, in node order; empty once the graph is built if the id map is a rank
    /// map, which then answers [`Index::id`] instead ([`Index::rank_only`]).
    pub ids: Column<u64>,
    /// The number of nodes (of ids, duplicates dropped).
    nodes: usize,
    pub id_map: IdMap,
    pub class_of: Column<u32>,
    pub shallow: Column<u32>,
    /// Per node: where its outgoing edges start in `edges` ([`NONE`] if the dump did not
    /// list the object) and how many there are, side by side (one memory access per node).
    pub adj: Column<[u32; 2]>,
    pub edges: Column<u32>,
    pub classes: Vec<Class>,
    /// Class ids sorted, with their index in `classes`.
    pub class_lookup: Vec<(u64, u32)>,
    pub roots: Vec<Root>,
    /// The threads the roots name (a path that starts on a thread says which).
    pub threads: Threads,
    pub strings: Strings,
    pub flags: Vec<Flag>,
    /// The `android.app.Service` instances an ActivityThread holds (running), sorted; empty
    /// when none is or no check was made (see `services`).
    pub held_services: Vec<u32>,
    pub stats: IndexStats,
    /// Index of `java.lang.Class` (a pseudo-class if the dump lacks it).
    pub class_class: u32,
    /// Index of the first primitive-array pseudo-class (in `PRIMS` order).
    pub prim_base: u32,
    /// Heap dump segments in file order.
    pub segments: Vec<Segment>,
    /// The ids of the class objects of the primitive array types (`char[]`, ...; in `PRIMS`
    /// order), 0 where the dump has none: a primitive array's edge to its class.
    pub prim_class_ids: [u64; 8],
    /// The same classes' indices in `classes` ([`NONE`] where the dump has none). Where one is
    /// [`Class::rooted`], its arrays' edges to it are left out of the graph as any object's
    /// (ART-style dumps hold hundreds of thousands of primitive arrays, HotSpot's millions).
    pub prim_classes: [u32; 8],
    /// Whether the dump holds records only Android writes (see `Pass1`).
    pub android: bool,
    /// How the shallow sizes were counted (set once the graph is complete: see `sizes`).
    pub sizes: Conventions,
    /// Where the analysis keeps its large arrays, if the caller named a directory
    /// (`Config::scratch_dir`): the index's, the paths' and the dominators'.
    pub scratch: Option<Scratch>,
}

impl Index {
    pub fn len(&self) -> usize {
        self.nodes
    }
    pub fn is_empty(&self) -> bool {
        self.nodes == 0
    }
    /// Every node's id, in node order.
    pub fn each_id(&self) -> impl Iterator<Item = u64> + '_ {
        let rank = match &self.id_map {
            IdMap::Rank(r) if self.ids.is_empty() => Some(r.ids()),
            _ => None,
        };
        let plain = rank.is_none().then(|| self.ids.iter().copied());
        rank.into_iter()
            .flatten()
            .chain(plain.into_iter().flatten())
    }
    /// The id of `node` (from the ids, or from the rank map once they are dropped).
    pub fn id(&self, node: u32) -> u64 {
        if let Some(&id) = self.ids.get(node as usize) {
            return id;
        }
        match &self.id_map {
            IdMap::Rank(r) if self.ids.is_empty() => r.id_at(node),
            _ => None,
        }
        .unwrap_or_else(|| panic!("node {node} of {}: no such node", self.nodes))
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
    /// The pseudo-class of the objects whose class the dump lacks (`<unknown class>`, the last).
    #[inline]
    pub fn unknown_class(&self) -> u32 {
        (self.classes.len() - 1) as u32
    }
    /// The class index of class object `id`, or [`Index::unknown_class`] if the dump lacks it.
    pub fn class_or_unknown(&self, id: u64) -> u32 {
        self.class_by_id(id).unwrap_or(self.unknown_class())
    }
    /// If `node` is a class object, its class index.
    pub fn class_of_node(&self, node: u32) -> Option<u32> {
        if self.class_of[node as usize] != self.class_class {
            return None;
        }
        self.class_by_id(self.id(node))
    }
    /// Outgoing strong edges of `node`.
    #[inline(always)]
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
        while c != NONE && hops < MAX_SUPER_CHAIN {
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
    /// Keep the rank map as the one way between ids and nodes, if the id map is one: the ids
    /// go ([`Index::id`] then selects them from the map: about 1.2 bytes per object on a
    /// HotSpot heap against the ids' 8, so 68 MB less at 10 M objects, dropped before the
    /// node arrays and the edges are filled, the analysis's peak). True if so; the ids stay
    /// otherwise (a bucket map needs them, and ids in a scratch file cost no memory).
    pub fn rank_only(&mut self) -> bool {
        match &mut self.id_map {
            IdMap::Rank(r) if !self.ids.in_file() => {
                if !self.ids.is_empty() {
                    r.prepare_select();
                    self.ids = Column::default();
                }
                true
            }
            _ => false,
        }
    }
    /// Drop the forward graph (after the reverse one has been built from it).
    pub fn drop_edges(&mut self) {
        self.adj = Column::default();
        self.edges = Column::default();
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

/// The position of `ty` in [`PRIMS`] (its pseudo-class is `Index::prim_base` plus it); a type
/// not listed counts as `byte[]`.
#[inline]
fn prim_index(ty: BasicType) -> usize {
    PRIMS.iter().position(|&p| p == ty).unwrap_or(4)
}

/// The raw bytes of an array of `len` elements of `elem` bytes each, with the header
/// [`array_header`] counts.
#[inline]
fn array_bytes(len: u32, elem: u32, id_size: u32) -> u64 {
    len as u64 * elem as u64 + array_header(id_size)
}

/// Array header bytes counted in a shallow size (length word plus object header).
pub fn array_header(id_size: u32) -> u64 {
    if id_size == 4 {
        12
    } else {
        16
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
    static_prim_bytes: u32,
}

/// The per-node arrays a finished index holds: class, shallow size, edge range.
pub(crate) type NodeArrays = (Column<u32>, Column<u32>, Column<[u32; 2]>);

/// [`NodeArrays`] for `n` nodes, as [`Pass1::finish`] leaves them for the objects to fill in:
/// in scratch files if `scratch` is given (any that cannot be made there stays in memory).
pub(crate) fn node_arrays(n: usize, scratch: Option<&Scratch>) -> NodeArrays {
    // (All three are written here: the pages of an array allocated as zeros would be faulted
    // in later, by the one thread that then writes the objects into it.)
    let (class_of, _) = Column::filled(n, NONE, scratch);
    let (shallow, _) = Column::filled_written(n, 0u32, scratch);
    let (adj, _) = Column::filled(n, [NONE, 0], scratch);
    (class_of, shallow, adj)
}

#[derive(Default)]
pub(crate) struct Pass1 {
    header: Option<Header>,
    strings: Strings,
    names: Vec<(u64, u64)>,
    classes: Vec<RawClass>,
    roots: Vec<(u64, u8)>,
    threads: threads::RawThreads,
    /// The object ids met (in a scratch file if the worker was given one: [`Pass1::in_scratch`]).
    ids: Grow<u64>,
    /// Whether the dump holds records only Android writes (HEAP_DUMP_INFO, ROOT_* 0x89-0x90):
    /// its objects are laid out as Dalvik and ART do (see `sizes`). The format alone does not
    /// tell: a stripped HotSpot dump is 1.0.3 too.
    android: bool,
    /// Whether `ids` is known to be sorted ([`Pass1::sort_ids`] sorts it; the merge of two
    /// sorted gatherings keeps it so), which spares a scan of the ids to find out.
    sorted: bool,
    /// Whether `ids` is known to hold no id twice (found while sorting and merging; only said
    /// of sorted ids), which spares the pass that drops repeats (10 ms at 10 M objects, with
    /// the second core idle).
    distinct: bool,
    /// The ids' last run in ascending order, as the parse pushed them ([`Pass1::push_id`]),
    /// so that [`Pass1::sort_ids`] need not scan the ids to find it.
    tail: Tail,
}

/// Where the last ascending run of a worker's ids starts (ids equal to the one before them
/// included), and whether it holds an id twice, as the ids are pushed; valid while `len` is
/// the ids' length (ids added any other way leave it stale, and the ids are then scanned).
#[derive(Default)]
struct Tail {
    start: usize,
    twice: bool,
    last: u64,
    len: usize,
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
            self.threads.record(r);
        } else {
            self.threads.record(r);
        }
        Ok(())
    }
    fn sub(&mut self, _offset: u64, s: &Sub<'_>, _raw: &[u8]) -> Result<(), String> {
        match s {
            Sub::Root { tag, id, aux } => {
                // ART's "unreachable" objects are listed as roots but are not held by anything.
                self.android |= sizes::android_root(*tag);
                if *tag != sub::ROOT_UNREACHABLE && *id != 0 {
                    self.roots.push((*id, holder_tag(*tag, aux)));
                    self.threads.root(*tag, *id, aux);
                }
            }
            Sub::Class(c) => {
                self.push_id(c.id);
                self.classes.push(raw_class(c));
            }
            Sub::Instance { id, .. }
            | Sub::ObjectArray { id, .. }
            | Sub::PrimitiveArray { id, .. } => self.push_id(*id),
            Sub::HeapDumpInfo { .. } => self.android = true,
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
        static_prim_bytes: c
            .statics()
            .filter(|(_, ty, _)| *ty != BasicType::Object)
            .map(|(_, ty, _)| ty.size(c.id_size))
            .sum(),
    }
}

impl Pass1 {
    /// A worker whose object ids grow in a scratch file (if `scratch` is given).
    pub(crate) fn in_scratch(scratch: Option<&Scratch>) -> Pass1 {
        Pass1 {
            ids: Grow::new_in(scratch),
            ..Pass1::default()
        }
    }

    /// Push an object's id (noting the run of ascending ids it ends: [`Tail`]).
    #[inline(always)]
    pub(crate) fn push_id(&mut self, id: u64) {
        let t = &mut self.tail;
        if id < t.last || t.len == 0 {
            (t.start, t.twice) = (t.len, false);
        } else if id == t.last {
            t.twice = true;
        }
        (t.last, t.len) = (id, t.len + 1);
        self.ids.push(id);
    }

    /// Add what another worker gathered over a later part of the file.
    pub(crate) fn merge(&mut self, o: Pass1) {
        if self.header.is_none() {
            self.header = o.header;
        }
        self.strings.append(o.strings);
        self.android |= o.android;
        self.names.extend(o.names);
        self.classes.extend(o.classes);
        self.roots.extend(o.roots);
        self.threads.merge(o.threads);
        self.sorted &= o.sorted;
        if self.sorted {
            // Two sorted runs: merge them in linear time (one after the other, the second is
            // appended).
            let common = super::arrays::merge_into(&mut self.ids, &o.ids);
            self.distinct &= o.distinct && !common;
        } else {
            self.distinct = false;
            self.ids.extend_from_slice(&o.ids);
        }
    }

    /// Sort the ids gathered so far (each worker sorts its own, side by side). HotSpot lists its
    /// classes first, then every other object by address: only the head before the longest
    /// ascending tail is sorted, then merged with that tail. Whether an id came twice is
    /// noted on the way (but for a sort of the whole).
    pub(crate) fn sort_ids(&mut self) {
        self.sort_ids_in_place();
        // One ascending run now.
        self.tail = Tail {
            start: 0,
            twice: !self.distinct,
            last: self.ids.last().copied().unwrap_or(0),
            len: self.ids.len(),
        };
    }

    /// [`Pass1::sort_ids`] but for the note of the ascending run.
    fn sort_ids_in_place(&mut self) {
        self.sorted = true;
        self.distinct = false;
        let ids = &mut self.ids;
        let (mut t, mut twice) = (self.tail.start, self.tail.twice);
        if self.tail.len != ids.len() {
            (t, twice) = (ids.len().saturating_sub(1), false);
            while t > 0 && ids[t - 1] <= ids[t] {
                twice |= ids[t - 1] == ids[t];
                t -= 1;
            }
        }
        if t == 0 {
            self.distinct = !twice;
            return;
        }
        if t > ids.len() / 4 {
            ids.sort_unstable();
            return;
        }
        let mut head = ids[..t].to_vec();
        head.sort_unstable();
        twice |= head.windows(2).any(|p| p[0] == p[1]);
        // Merge forward in place: each head id goes after the tail's ids below it, found by a
        // binary search, and the run of tail ids before it is moved down whole (a `memmove`;
        // an element-by-element merge took twice as long, 22-28 ms for a worker's 5 M ids).
        // The write position stays behind the tail's read position, one place less with each
        // head id, so once the head is used up the rest of the tail is in place.
        let (mut w, mut j) = (0, t);
        for &h in &head {
            let p = j + ids[j..].partition_point(|&x| x < h);
            twice |= ids.get(p) == Some(&h);
            ids.copy_within(j..p, w);
            w += p - j;
            ids[w] = h;
            (w, j) = (w + 1, p);
        }
        debug_assert!(ids.is_sorted());
        self.distinct = !twice;
    }

    /// Sort what pass 1 gathered and lay out the classes; returns the skeleton index.
    pub(crate) fn finish(self, scratch: Option<&Scratch>) -> Result<Index, String> {
        // The per-node arrays are allocated and filled on a second thread (their pages are
        // faulted in there) while this one sorts the ids, lays out the classes and maps the
        // ids: for as many nodes as there are ids before duplicates are dropped (none when
        // there are too many ids to index: `finish_then` refuses those).
        let n = Some(self.ids.len())
            .filter(|&n| n < NONE as usize)
            .unwrap_or(0);
        std::thread::scope(|s| {
            let arrays = s.spawn(move || node_arrays(n, scratch));
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
        debug_assert!(!self.distinct || ids.windows(2).all(|p| p[0] < p[1]));
        if !(self.sorted && self.distinct) {
            let before = ids.len();
            ids.dedup();
            stats.duplicate_ids = (before - ids.len()) as u64;
        }
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
        if class_of.len() < n || shallow.len() < n || adj.len() < n {
            (class_of, shallow, adj) = node_arrays(n, None);
        }
        class_of.truncate(n);
        shallow.truncate(n);
        adj.truncate(n);
        ix.class_of = class_of;
        ix.shallow = shallow;
        ix.adj = adj;
        Ok(ix)
    }

    /// [`Pass1::finish`] but for the per-node arrays (left empty).
    fn finish_with(mut self, ids: Grow<u64>, mut stats: IndexStats) -> Result<Index, String> {
        let header = self.header.ok_or("the dump has no header")?;
        self.names.sort_unstable();
        self.names.dedup_by_key(|e| e.0);
        let strings = self.strings;
        let name_of = |id: u64| -> Option<String> {
            let i = self.names.binary_search_by_key(&id, |e| e.0).ok()?;
            Some(java_name(&strings.get_or(self.names[i].1)))
        };
        let threads = std::mem::take(&mut self.threads).finish(&ids, |id| strings.get(id), name_of);
        let mut raw = std::mem::take(&mut self.classes);
        sys::order::sort_by_key(&mut raw, |c| c.id);
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
                static_prim_bytes: c.static_prim_bytes,
                ref_slots: Vec::new(),
                data_len: 0,
                role: Role::None,
                instances: 0,
                rooted: false,
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
        let prim_class_ids = PRIMS.map(|ty| {
            let name = prim_name(ty);
            classes.iter().find(|c| c.name == name).map_or(0, |c| c.id)
        });
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
        let mut first: Vec<u32> = (roots.iter())
            .filter(|r| crate::paths::high_priority(r.tag))
            .map(|r| r.node)
            .collect();
        first.sort_unstable();
        for c in classes.iter_mut() {
            c.rooted = c.node != NONE && first.binary_search(&c.node).is_ok();
        }
        let prim_classes = prim_class_ids.map(|c| match c {
            0 => NONE,
            c => class_lookup
                .binary_search_by_key(&c, |e| e.0)
                .map_or(NONE, |j| class_lookup[j].1),
        });
        Ok(Index {
            header,
            id_map: IdMap::new(&ids),
            class_of: Column::default(),
            shallow: Column::default(),
            adj: Column::default(),
            edges: Column::default(),
            ids: ids.into_column(),
            nodes: n,
            classes,
            class_lookup,
            roots,
            threads,
            strings,
            flags: Vec::new(),
            held_services: Vec::new(),
            stats,
            class_class,
            prim_base,
            segments: Vec::new(),
            prim_class_ids,
            prim_classes,
            android: self.android,
            sizes: Conventions::default(),
            scratch: None,
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
        static_prim_bytes: 0,
        ref_slots: Vec::new(),
        data_len: 0,
        role: Role::None,
        instances: 0,
        rooted: false,
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
        self.rooted_class_refs += o.rooted_class_refs;
        self.missing_refs += o.missing_refs;
        self.unknown_class += o.unknown_class;
        self.short_instances += o.short_instances;
    }
}

#[cfg(test)]
mod tests;
