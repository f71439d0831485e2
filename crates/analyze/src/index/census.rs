//! The census: one streaming pass that counts a dump's objects by class (the class histogram)
//! and the references they may hold, in memory that grows with the dump's classes and
//! strings, never with its objects. The analysis runs it when its budget
//! (`Config::budget_bytes`) may be too small for the whole analysis: the counts say what that
//! would need (`crate::budget`), and where it does not fit, the histogram is what the report
//! keeps.
//!
//! Invariants:
//! - Memory: what pass 1 keeps beside the object ids (strings, classes, roots, threads), plus
//!   one fixed-size tally per class id that objects name; nothing per object.
//! - Sizes are the full analysis's (see `sizes`): each object's size is summed under each of
//!   the three layouts the dump may turn out to have (Android's; HotSpot's with references of
//!   the id size, or compressed), and the one the dump shows is kept at the end. Compressed
//!   references are seen as `plan_sizes` sees them, on an array of an array class (a class whose
//!   name ends in `[]`) and the object after it, here in file order (`plan_sizes`: by address;
//!   HotSpot lists its objects by address after its class dumps, so the two agree on
//!   HotSpot's dumps). The class ids of the arrays that show them are kept, at most
//!   [`MAX_SHOWN_BY`], and told apart by their names at the end.
//! - An id the dump lists twice is counted twice (the full analysis keeps the first).
#![forbid(unsafe_code)]

use super::sizes::{align, android_root, conventions, inside_wide_array, kind, vm_size, Kind};
use super::*;

/// The layouts an object's size is summed under until the dump says which it has: Android's,
/// HotSpot's with references of the id size, HotSpot's with compressed references.
const LAYOUTS: usize = 3;

/// What the objects that name one class id add up to.
#[derive(Clone, Default)]
struct Tally {
    instances: u64,
    /// Per byte offset in the instances' field data: how many hold a non-null id there (an id's
    /// bytes not all zero). The class's layout, known at the end, picks its reference slots'
    /// offsets from these, so that null references are not counted (whether the class dump
    /// came before its instances or after).
    set_at: Vec<u64>,
    /// Instances whose field data is longer than [`MAX_SET_AT`]: every reference slot counted.
    unread: u64,
    /// The offsets of the reference fields of the class and its superclasses, once their class
    /// dumps are all met (then only those offsets are read; their counts in `set_at` are the
    /// same); the number of class dumps met when they were last looked for.
    ref_offsets: Option<Vec<u32>>,
    looked_at: usize,
    arrays: u64,
    /// Array elements that are not null, all together.
    elements: u64,
    /// The arrays' sizes under each layout, as object arrays.
    as_array: [u64; LAYOUTS],
    /// The instances' sizes under each layout, as objects of an unknown class (their raw size
    /// after an object header: see `sizes`).
    as_unknown: [u64; LAYOUTS],
    /// The arrays' sizes so, apart from the instances': a class id may be listed for both
    /// (a crafted dump, or one whose class dumps are missing), and each count takes its own.
    arrays_as_unknown: [u64; LAYOUTS],
}

/// The census's visitor (see the module documentation).
#[derive(Default)]
pub(crate) struct Census {
    p1: Pass1,
    /// Where each class id's dump is in `p1.classes` (the first, if it is listed twice).
    class_at: ById<usize>,
    /// Read every offset of every instance, layouts known or not (the tests': the same counts).
    every_offset: bool,
    by_class: ById<Tally>,
    /// Primitive arrays by element type (in `PRIMS` order): count and size under each layout.
    prims: [(u64, [u64; LAYOUTS]); 8],
    /// The last object's id and, if it was an object array, its length and class id.
    prev: Option<(u64, Option<(u64, u64)>)>,
    /// The class ids of object arrays an object was listed inside of (compressed references,
    /// if one is an array class), the last one added.
    shown_by: std::collections::HashSet<u64, IdHashing>,
    last_shown_by: Option<u64>,
    objects: u64,
    /// Whether a string or class dump came after the first object (the analysis then takes
    /// two passes).
    late: bool,
    /// The class id of the object array whose elements are being read, if one is.
    in_array: Option<u64>,
    min_id: u64,
    max_id: u64,
    /// Every id or-ed together (their common alignment), and the regions of the id map that
    /// hold some id (at most [`MAX_REGIONS`] are told apart), the last one met.
    ids_or: u64,
    regions: std::collections::HashSet<u64, IdHashing>,
    last_region: Option<u64>,
}

/// The most class ids [`Census::shown_by`] keeps: an object array's class is an array class
/// in every dump a VM writes, so the first is the one that counts.
const MAX_SHOWN_BY: usize = 1024;

/// The longest instance field data whose set ids are counted per offset (longer ones, rare,
/// count every reference slot).
const MAX_SET_AT: usize = 4096;

/// Count, per byte offset of `data`, whether the `w` bytes there (an id, if a reference slot
/// starts there) are not all zero: at the offsets of the class's reference fields if they are
/// known, else at every offset.
fn count_set_ids(t: &mut Tally, data: &[u8], w: usize) {
    let Some(k) = (data.len() + 1).checked_sub(w) else {
        return;
    };
    if let Some(offs) = &t.ref_offsets {
        for &o in offs {
            let o = o as usize;
            if let Some(id) = data.get(o..o + w) {
                if t.set_at.len() <= o {
                    t.set_at.resize(o + 1, 0);
                }
                t.set_at[o] += u64::from(id.iter().any(|&b| b != 0));
            }
        }
        return;
    }
    if k > MAX_SET_AT {
        t.unread += 1;
        return;
    }
    if t.set_at.len() < k {
        t.set_at.resize(k, 0);
    }
    let at = &mut t.set_at[..k];
    match w {
        8 => {
            for (o, c) in at.iter_mut().enumerate() {
                let b: [u8; 8] = data[o..o + 8].try_into().unwrap_or_default();
                *c += u64::from(u64::from_ne_bytes(b) != 0);
            }
        }
        4 => {
            for (o, c) in at.iter_mut().enumerate() {
                let b: [u8; 4] = data[o..o + 4].try_into().unwrap_or_default();
                *c += u64::from(u32::from_ne_bytes(b) != 0);
            }
        }
        _ => {
            for (o, c) in at.iter_mut().enumerate() {
                *c += u64::from(data[o..o + w].iter().any(|&x| x != 0));
            }
        }
    }
}

/// The offsets in an instance of class `id` of the reference fields it and its superclasses
/// declare (as `fields::layout` lays them out, `Reference.referent` included: the counts at
/// the slots the layout keeps are what is summed); `None` until every class dump of the chain
/// is met.
fn ref_offsets(
    classes: &[RawClass],
    at: &ById<usize>,
    mut id: u64,
    id_size: u64,
) -> Option<Vec<u32>> {
    let (mut offs, mut off, mut seen) = (Vec::new(), 0u32, Vec::new());
    while id != 0 && seen.len() < 256 && !seen.contains(&id) {
        seen.push(id);
        let c = &classes[*at.get(&id)?];
        for &(_, ty) in &c.fields {
            if ty == BasicType::Object {
                offs.push(off);
            }
            off = off.saturating_add(ty.size(id_size as u32));
        }
        id = c.super_id;
    }
    Some(offs)
}

/// A map keyed by ids (object, class and region ids), hashed by [`IdHash`].
pub(super) type ById<V> = HashMap<u64, V, IdHashing>;
pub(super) type IdHashing = std::hash::BuildHasherDefault<IdHash>;

/// The census's hash of an id: one multiplication by an odd constant, its high bits folded into
/// the low ones that pick a bucket (ids are aligned: their own low bits are zeros). Std's
/// SipHash took a sixth of the census's time; the dump is the analysis child's own input.
#[derive(Default)]
pub(super) struct IdHash(u64);

impl std::hash::Hasher for IdHash {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Regions of the id map the census tells apart (beyond, the map is taken to be the largest).
const MAX_REGIONS: usize = 1 << 20;

/// A census's results (see the module documentation).
#[derive(Clone, Debug)]
pub struct Counts {
    pub header: Header,
    /// Objects listed (class dumps included).
    pub objects: u64,
    /// At most this many references: every reference field and array element that is not
    /// null, and implicit edge (an instance's class, a class's superclass and loader).
    pub references_at_most: u64,
    pub classes: u64,
    /// Bytes the dump's strings take in the index.
    pub string_bytes: u64,
    pub gc_roots: u64,
    /// Whether the analysis would take two passes (strings or classes after objects).
    pub two_passes: bool,
    /// About what the index's id map takes, in bytes (see `rank::estimate_bytes`).
    pub id_map_bytes: u64,
    pub sizes: Conventions,
    /// Per class name: objects and their shallow bytes (as the full analysis counts them).
    pub histogram: BTreeMap<String, (u64, u64)>,
    /// The classes a detector looks at, with their objects (as the full report's
    /// `classInfos[]`, without leak counts).
    pub class_infos: Vec<crate::report::ClassInfo>,
}

use std::collections::BTreeMap;

impl Census {
    /// The object `id` was met (in file order), `array` its length and class id if it is an
    /// object array: tracks the id range and compressed references.
    fn object(&mut self, id: u64, array: Option<(u64, u64)>) {
        if let Some((p, Some((len, class)))) = self.prev {
            if inside_wide_array(p, len, id)
                && self.last_shown_by != Some(class)
                && self.shown_by.len() < MAX_SHOWN_BY
            {
                self.shown_by.insert(class);
                self.last_shown_by = Some(class);
            }
        }
        self.prev = Some((id, array));
        if self.objects == 0 {
            self.min_id = id;
        }
        self.min_id = self.min_id.min(id);
        self.max_id = self.max_id.max(id);
        self.ids_or |= id;
        let region = id / crate::rank::FINE_REGION_SPAN;
        if self.last_region != Some(region) && self.regions.len() <= MAX_REGIONS {
            self.last_region = Some(region);
            self.regions.insert(region);
        }
        self.objects += 1;
    }

    fn id_size(&self) -> u32 {
        self.p1.header.map_or(8, |h| h.id_size)
    }

    /// An object of raw size `raw` as an object of an unknown class, under each layout.
    fn as_unknown(&self, raw: u64) -> [u64; LAYOUTS] {
        let id_size = self.id_size();
        [(true, false), (false, false), (false, true)]
            .map(|(a, c)| align(conventions(a, id_size, c).object_header as u64 + raw, 8))
    }

    fn sizes(&self, k: Kind, raw: u64) -> [u64; LAYOUTS] {
        let id_size = self.id_size();
        [(true, false), (false, false), (false, true)]
            .map(|(a, c)| vm_size(k, raw, &conventions(a, id_size, c), id_size, a) as u64)
    }

    /// The counts, once the pass is over, and the classes and strings the pass read (an index
    /// without objects: what a later pass over the dump's objects needs, see `findings`).
    pub(crate) fn finish(self) -> Result<(Counts, Index), String> {
        let mut p1 = self.p1;
        let roots = std::mem::take(&mut p1.roots);
        let android = p1.android || roots.iter().any(|r| android_root(r.1));
        p1.strings.finish();
        let string_bytes = (p1.strings.arena.len() + 16 * p1.strings.ids.len()) as u64;
        let mut skel = p1.finish_with(Grow::default(), IndexStats::default())?;
        let id_size = skel.header.id_size;
        // As `sizes::shows_compressed`: only an array of an array class shows them.
        let wide = conventions(false, id_size, false);
        let compressed = !android
            && id_size == 8
            && (self.shown_by.iter()).any(|&c| {
                (skel.class_by_id(c))
                    .is_some_and(|ci| matches!(kind(&skel, ci, &wide, false), Kind::ObjectArray))
            });
        let conv = conventions(android, id_size, compressed);
        let v = match (android, compressed) {
            (true, _) => 0,
            (false, false) => 1,
            (false, true) => 2,
        };
        let unknown = skel.classes.len() as u32 - 1;
        let mut histogram: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let mut add = |name: &str, n: u64, bytes: u64| {
            if n > 0 {
                let e = histogram.entry(name.to_string()).or_default();
                e.0 += n;
                e.1 += bytes;
            }
        };
        let mut refs = 0u64;
        for (&id, t) in &self.by_class {
            let ci = skel.class_by_id(id);
            let k = ci.map(|ci| kind(&skel, ci, &conv, android));
            let name = &skel.classes[ci.unwrap_or(unknown) as usize].name;
            // Instances: their class's size, or as pass 2 counts one of an unknown class.
            match k {
                Some(Kind::Instance(s)) if s > 0 => add(name, t.instances, t.instances * s),
                _ => add(name, t.instances, t.as_unknown[v]),
            }
            // Each instance's class edge, and its reference slots that hold an id (every
            // slot of an instance too long to have been read so).
            let slots: &[(u32, u32, u16)] =
                ci.map_or(&[], |ci| &skel.classes[ci as usize].ref_slots);
            let set: u64 = (slots.iter())
                .map(|s| t.set_at.get(s.0 as usize).copied().unwrap_or(0))
                .sum();
            refs += t.instances + set + t.unread * slots.len() as u64 + t.arrays + t.elements;
            match k {
                Some(Kind::ObjectArray) => add(name, t.arrays, t.as_array[v]),
                Some(Kind::Instance(s)) if s > 0 => add(name, t.arrays, t.arrays * s),
                _ => add(name, t.arrays, t.arrays_as_unknown[v]),
            }
            if let Some(ci) = ci {
                skel.classes[ci as usize].instances = (t.instances + t.arrays) as u32;
            }
        }
        for (p, &(n, sizes)) in self.prims.iter().enumerate() {
            add(&skel.classes[skel.prim_base as usize + p].name, n, sizes[v]);
            refs += n;
        }
        // The class objects: instances of java.lang.Class, each its statics.
        let real = &skel.classes[..skel.prim_base as usize];
        let r = conv.reference_size as u64;
        let statics = |c: &Class| align(c.static_prim_bytes as u64 + c.statics.len() as u64 * r, 8);
        let class_bytes = real.iter().map(statics).sum();
        add(
            &skel.classes[skel.class_class as usize].name,
            real.len() as u64,
            class_bytes,
        );
        refs += real.iter().map(|c| c.statics.len() as u64 + 2).sum::<u64>();
        let class_infos = crate::report::class_infos(&skel, &HashMap::new());
        let counts = Counts {
            header: skel.header,
            objects: self.objects,
            references_at_most: refs,
            classes: real.len() as u64,
            string_bytes,
            gc_roots: roots.len() as u64,
            two_passes: self.late,
            id_map_bytes: {
                let n = self.objects;
                let span = self.max_id.saturating_sub(self.min_id);
                let align = 1u64 << self.ids_or.trailing_zeros().min(6);
                match self.regions.len() > MAX_REGIONS {
                    true => n.saturating_mul(crate::rank::MAX_BYTES_PER_ID),
                    false => crate::rank::estimate_bytes(n, span, align, self.regions.len() as u64),
                }
            },
            sizes: conv,
            histogram,
            class_infos,
        };
        Ok((counts, skel))
    }
}

impl Visitor for Census {
    fn array_data(&mut self, data: &[u8]) -> Result<(), String> {
        if let Some(class_id) = self.in_array {
            let n = self.id_size() as usize;
            let set = data.chunks_exact(n).filter(|e| e.iter().any(|&b| b != 0));
            let count = set.count() as u64;
            self.by_class.entry(class_id).or_default().elements += count;
        }
        Ok(())
    }
    fn array_end(&mut self) -> Result<(), String> {
        self.in_array = None;
        Ok(())
    }
    fn header(&mut self, h: &Header, raw: &[u8]) -> Result<(), String> {
        self.p1.header(h, raw)
    }
    fn record(&mut self, offset: u64, r: &Record<'_>, raw: &[u8]) -> Result<(), String> {
        if self.objects > 0 && (r.utf8().is_some() || r.load_class().is_some()) {
            self.late = true;
        }
        self.p1.record(offset, r, raw)
    }
    fn sub(&mut self, offset: u64, s: &Sub<'_>, raw: &[u8]) -> Result<(), String> {
        let id_size = self.id_size() as u64;
        match *s {
            Sub::Root { .. } | Sub::HeapDumpInfo { .. } => return self.p1.sub(offset, s, raw),
            Sub::Class(ref c) => {
                self.late |= self.objects > self.p1.classes.len() as u64;
                self.object(c.id, None);
                self.class_at.entry(c.id).or_insert(self.p1.classes.len());
                self.p1.classes.push(raw_class(c));
            }
            Sub::Instance {
                id, class_id, data, ..
            } => {
                self.object(id, None);
                let u = self.as_unknown(data.len() as u64);
                let t = self.by_class.entry(class_id).or_default();
                t.instances += 1;
                if t.ref_offsets.is_none()
                    && t.looked_at != self.p1.classes.len()
                    && !self.every_offset
                {
                    t.looked_at = self.p1.classes.len();
                    t.ref_offsets =
                        ref_offsets(&self.p1.classes, &self.class_at, class_id, id_size);
                }
                count_set_ids(t, data, id_size as usize);
                (0..LAYOUTS).for_each(|i| t.as_unknown[i] += u[i]);
            }
            Sub::ObjectArray {
                id, len, class_id, ..
            } => {
                self.object(id, Some((len as u64, class_id)));
                let raw = len as u64 * id_size + array_header(id_size as u32);
                let (a, u) = (self.sizes(Kind::ObjectArray, raw), self.as_unknown(raw));
                let t = self.by_class.entry(class_id).or_default();
                t.arrays += 1;
                self.in_array = Some(class_id);
                (0..LAYOUTS).for_each(|i| {
                    t.as_array[i] += a[i];
                    t.arrays_as_unknown[i] += u[i];
                });
            }
            Sub::PrimitiveArray { id, len, ty, .. } => {
                self.object(id, None);
                let pi = prim_index(ty);
                let raw = array_bytes(len, ty.size(id_size as u32), id_size as u32);
                let sz = self.sizes(Kind::PrimitiveArray(ty.size(4) as u64), raw);
                let p = &mut self.prims[pi];
                p.0 += 1;
                (0..LAYOUTS).for_each(|i| p.1[i] += sz[i]);
            }
        }
        Ok(())
    }
}

/// The census of `input` (see the module documentation).
#[cfg(test)]
pub(crate) fn census(input: &Input<'_>) -> Result<Counts, crate::Error> {
    Ok(census_and_classes(input)?.0)
}

/// [`census`], and the classes and strings it read (see [`Census::finish`]).
pub(crate) fn census_and_classes(input: &Input<'_>) -> Result<(Counts, Index), crate::Error> {
    let mut c = Census::default();
    input.pass(&mut c)?;
    c.finish()
        .map_err(|what| crate::Error::Input { offset: 0, what })
}

/// [`census`], every instance read at every offset (see `Census::every_offset`).
#[cfg(test)]
pub(crate) fn census_of_every_offset(input: &Input<'_>) -> Result<Counts, crate::Error> {
    let mut c = Census {
        every_offset: true,
        ..Census::default()
    };
    input.pass(&mut c)?;
    c.finish()
        .map(|r| r.0)
        .map_err(|what| crate::Error::Input { offset: 0, what })
}
