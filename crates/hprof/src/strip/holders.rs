//! Level `app`: what the dropped objects held.
//!
//! Dropping the zygote and image heaps' objects must not cut a path from a GC root to an app
//! object: `class LayoutInflater` → a zygote `HashMap` → app objects. So while it drops them, the
//! stripper notes each dropped object's id and the ids its references point to (its class, its
//! reference fields, an object array's elements). At the end of the heap dump (before
//! HEAP_DUMP_END, or at the end of the file) it writes one HEAP_DUMP_SEGMENT with a GC root for
//! every id a dropped object referenced that is neither dropped itself nor already a root: a
//! `ROOT_JNI_GLOBAL` whose JNI reference id is [`crate::STRIPPED_HOLDER_MARK`]. Any tool
//! reads it as a JNI global (hprof-conv copies it); our analyser names it "held by a stripped
//! zygote/image object". The app strip loses the dropped objects' sizes, never a path.
//!
//! The order of the heaps does not matter (Dalvik-era dumps interleave `zygote` and `app` over
//! hundreds of HEAP_DUMP_INFO records; ART writes `image`, `zygote`, then `app`): the roots are
//! written once everything is known.
//!
//! A dropped instance whose class dump has not come yet (ART writes each heap in address order:
//! a boot image object can lie below its class) is kept in memory, id, class and field bytes,
//! until the end of the heap dump, when every class is known. Its room in the table of ids is
//! reserved when it is set aside, one entry for each id-sized window of its bytes: if its class
//! never comes, each window is taken for a reference (fields are packed, a reference can start at
//! any byte), and none may go unmarked for want of room.
//!
//! Memory is bounded: the table of ids holds at most [`MAX_SLOTS`] slots (9 bytes each: 18 MiB
//! at most, grown from 36 KiB as needed: about 2.4 slots per dropped object), the class layouts
//! at most [`MAX_CLASSES`] classes (a map of 48-byte entries: 6.1 MiB at most) and
//! [`MAX_FIELD_BYTES`] bytes of field types, the laid-out classes' reference offsets
//! [`MAX_MEMO_OFFSETS`] (2 MiB), the waiting instances [`MAX_DEFERRED_BYTES`]. An object the
//! stripper cannot account for within these bounds is kept instead of dropped: the output is
//! bigger, never wrong.
//!
//! Time is bounded too: no walk up a superclass chain visits more than [`MAX_CHAIN`] classes (a
//! longer chain, or a loop, is no real class hierarchy: its instances are taken as instances of a
//! class not known, each id-sized run of their bytes a reference), and what a walk finds is
//! memoized in the class's [`Layout`], so a class is walked once (again only if a class of its
//! chain was not known yet, if the offsets' room is full, or after a class dump describes a
//! class a second time).

use crate::parser::{ClassDump, Sub};
use crate::{read_id, BasicType};
use std::collections::HashMap;

/// Most slots of the id table (a power of two).
pub(super) const MAX_SLOTS: usize = 1 << 21;
const START_SLOTS: usize = 1 << 12;
/// Most classes whose field layout is kept.
pub(super) const MAX_CLASSES: usize = 1 << 16;
/// Most bytes of instance field types kept (one byte per field).
pub(super) const MAX_FIELD_BYTES: usize = 1 << 20;
/// Most classes a superclass walk visits: a longer chain (or a loop) is never laid out, and an
/// instance of it is noted as a class not known (see [`Holders::take_wanted`]). The analyser cuts
/// its chains at the same depth (`analyze::index::fields::chain`).
pub(super) const MAX_CHAIN: usize = 256;
/// Most reference offsets kept for the classes already laid out (4 bytes each: 2 MiB).
pub(super) const MAX_MEMO_OFFSETS: usize = 1 << 19;
/// Most bytes of dropped instances kept until their class dump comes (ART writes a heap in
/// address order, and a boot image object can lie below its class), their heads (24 bytes each)
/// and their field bytes.
pub(super) const MAX_DEFERRED_BYTES: usize = 4 << 20;

/// The id is a dropped object.
const DROPPED: u8 = 1;
/// A dropped object references the id.
const WANTED: u8 = 2;
/// The dump lists the id as a GC root.
const ROOTED: u8 = 4;
/// In a layout's types: `java.lang.ref.Reference.referent`, an object field that is no strong
/// reference (a zygote `WeakReference` to an app object must not make a root of it).
const WEAK: u8 = 0x80 | BasicType::Object as u8;

/// An open-addressing set of ids (0, the null id, is never stored), each with flags.
struct Table {
    keys: Vec<u64>,
    flags: Vec<u8>,
    len: usize,
}

impl Table {
    fn new() -> Table {
        Table {
            keys: vec![0; START_SLOTS],
            flags: vec![0; START_SLOTS],
            len: 0,
        }
    }

    /// Entries the table can take before it is full (at 3/4 of [`MAX_SLOTS`]).
    fn room(&self, reserved: usize) -> usize {
        (MAX_SLOTS / 4 * 3).saturating_sub(self.len + reserved)
    }

    #[inline]
    fn slot(&self, id: u64) -> usize {
        let mask = self.keys.len() - 1;
        let mut i = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & mask;
        loop {
            let k = self.keys[i];
            if k == id || k == 0 {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    /// Add `flag` to `id`'s flags. The caller made sure of the room ([`Table::room`]).
    #[inline]
    fn mark(&mut self, id: u64, flag: u8) {
        if id == 0 {
            return;
        }
        let i = self.slot(id);
        if self.keys[i] == 0 {
            self.keys[i] = id;
            self.len += 1;
            self.flags[i] = flag;
            if self.len * 4 > self.keys.len() * 3 {
                self.grow();
            }
        } else {
            self.flags[i] |= flag;
        }
    }

    fn grow(&mut self) {
        let n = (self.keys.len() * 2).min(MAX_SLOTS);
        if n == self.keys.len() {
            return;
        }
        let keys = std::mem::replace(&mut self.keys, vec![0; n]);
        let flags = std::mem::replace(&mut self.flags, vec![0; n]);
        for (k, f) in keys.into_iter().zip(flags) {
            if k != 0 {
                let i = self.slot(k);
                self.keys[i] = k;
                self.flags[i] = f;
            }
        }
    }
}

/// A class's instance field layout as its dump declares it.
struct Layout {
    super_id: u64,
    /// Its own fields' types: `types[start..start + count]`.
    start: u32,
    count: u32,
    /// What a walk of its chain found; valid while `gen` is [`Holders`]'s.
    memo: Memo,
    gen: u32,
}

/// What a walk of a class's superclass chain found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Memo {
    /// Not walked yet (or a class of the chain was not known then).
    None,
    /// The chain passes [`MAX_CHAIN`] classes (or loops): an instance is never laid out.
    TooDeep,
    /// Its reference offsets are `memo_offsets[start..start + count]`, its data `len` bytes.
    Ready { start: u32, count: u32, len: u32 },
}

/// The outcome of one walk of a chain.
enum Walk {
    Unknown,
    TooDeep,
    Found(u32),
}

/// What level `app` keeps track of while it drops objects.
pub(super) struct Holders {
    id_size: u32,
    table: Table,
    classes: HashMap<u64, Layout>,
    types: Vec<u8>,
    /// An object array being dropped: bytes of an element split between two chunks.
    partial: [u8; 8],
    partial_len: usize,
    /// The current dropped object array's elements are being noted.
    in_array: bool,
    /// A reference id could not be noted (the table is full): nothing more is dropped.
    pub(super) full: bool,
    /// The reference offsets of the last instance's class, reused for the next of the same class.
    cache_class: u64,
    cache_offsets: Vec<u32>,
    cache_len: usize,
    /// The reference offsets of the classes whose [`Memo`] is `Ready`, at most
    /// [`MAX_MEMO_OFFSETS`].
    memo_offsets: Vec<u32>,
    /// Bumped when a class dump replaces one already seen: every memo made before is stale.
    gen: u32,
    /// Classes visited by chain walks, so far (tests).
    #[cfg(test)]
    chain_steps: u64,
    /// The string ids of "referent" and of `java.lang.ref.Reference`'s name (either spelling),
    /// and the class id of `java.lang.ref.Reference`.
    referent_name: u64,
    reference_names: [u64; 2],
    reference_class: u64,
    /// The class last marked wanted (most dropped objects in a row share their class).
    last_class: u64,
    /// Dropped instances whose class was not known yet: (id, class id, data length) heads,
    /// their data in `deferred_data`; `reserved` table entries kept for their references.
    deferred: Vec<(u64, u64, u32)>,
    deferred_data: Vec<u8>,
    reserved: usize,
}

/// The id-sized windows of `len` bytes: what an instance of a class never described may reference
/// ([`Holders::resolve`]).
fn windows(len: usize, id_size: usize) -> usize {
    (len + 1).saturating_sub(id_size)
}

impl Holders {
    pub(super) fn new(id_size: u32) -> Holders {
        Holders {
            id_size,
            table: Table::new(),
            classes: HashMap::new(),
            types: Vec::new(),
            partial: [0; 8],
            partial_len: 0,
            in_array: false,
            full: false,
            cache_class: 0,
            cache_offsets: Vec::new(),
            cache_len: 0,
            memo_offsets: Vec::new(),
            gen: 0,
            #[cfg(test)]
            chain_steps: 0,
            referent_name: 0,
            reference_names: [0; 2],
            reference_class: 0,
            last_class: 0,
            deferred: Vec::new(),
            deferred_data: Vec::new(),
            reserved: 0,
        }
    }

    /// A UTF8 record passed.
    pub(super) fn string(&mut self, id: u64, text: &[u8]) {
        match text {
            b"referent" => self.referent_name = id,
            b"java/lang/ref/Reference" => self.reference_names[0] = id,
            b"java.lang.ref.Reference" => self.reference_names[1] = id,
            _ => {}
        }
    }

    /// A LOAD_CLASS record passed.
    pub(super) fn load_class(&mut self, class_id: u64, name_id: u64) {
        if name_id != 0 && self.reference_names.contains(&name_id) {
            self.reference_class = class_id;
        }
    }

    /// The dump lists `id` as a GC root.
    pub(super) fn root(&mut self, id: u64) {
        if self.table.room(self.reserved) > 0 {
            self.table.mark(id, ROOTED);
        }
    }

    /// A class dump passed: keep its field layout.
    pub(super) fn class(&mut self, c: &ClassDump<'_>) {
        if self.classes.len() >= MAX_CLASSES
            || self.types.len() + c.field_count as usize > MAX_FIELD_BYTES
        {
            return;
        }
        let start = self.types.len() as u32;
        let weak = c.id == self.reference_class && c.id != 0;
        let referent = self.referent_name;
        self.types.extend(c.fields().map(|(name, ty)| match ty {
            BasicType::Object if weak && name == referent => WEAK,
            _ => ty as u8,
        }));
        let count = self.types.len() as u32 - start;
        let layout = Layout {
            super_id: c.super_id,
            start,
            count,
            memo: Memo::None,
            gen: self.gen,
        };
        if self.classes.insert(c.id, layout).is_some() {
            // A class described again (a second heap dump): its subclasses' memos may be stale.
            self.gen = self.gen.wrapping_add(1);
            self.memo_offsets.clear();
            self.cache_class = 0;
        }
        if let Some(l) = self.classes.get_mut(&c.id) {
            l.gen = self.gen;
        }
    }

    /// Fill the cache with the offsets of `class_id`'s reference fields in an instance's data;
    /// false if a class of its chain is unknown, or the chain is over [`MAX_CHAIN`] classes.
    /// What a walk finds is kept in the class's [`Memo`], so a class is walked at most once
    /// (unless its chain has a class not known yet, or the memo's room is full).
    fn layout(&mut self, class_id: u64) -> bool {
        if class_id == 0 {
            self.cache_class = 0;
            self.cache_offsets.clear();
            self.cache_len = 0;
            return true;
        }
        if self.cache_class == class_id {
            return true;
        }
        self.cache_class = 0;
        self.cache_offsets.clear();
        let memo = match self.classes.get(&class_id) {
            Some(l) if l.gen == self.gen => l.memo,
            Some(_) => Memo::None,
            None => return false,
        };
        let memo = match memo {
            Memo::TooDeep => return false,
            Memo::Ready { start, count, len } => {
                let (a, b) = (start as usize, start as usize + count as usize);
                self.cache_offsets
                    .extend_from_slice(&self.memo_offsets[a..b]);
                self.cache_class = class_id;
                self.cache_len = len as usize;
                return true;
            }
            Memo::None => match self.walk(class_id) {
                Walk::Unknown => return false,
                Walk::TooDeep => Memo::TooDeep,
                Walk::Found(len) => {
                    self.cache_class = class_id;
                    self.cache_len = len as usize;
                    let start = self.memo_offsets.len();
                    if start + self.cache_offsets.len() > MAX_MEMO_OFFSETS {
                        return true;
                    }
                    self.memo_offsets.extend_from_slice(&self.cache_offsets);
                    Memo::Ready {
                        start: start as u32,
                        count: self.cache_offsets.len() as u32,
                        len,
                    }
                }
            },
        };
        let gen = self.gen;
        if let Some(l) = self.classes.get_mut(&class_id) {
            l.memo = memo;
            l.gen = gen;
        }
        matches!(memo, Memo::Ready { .. })
    }

    /// Walk `class_id`'s chain, at most [`MAX_CHAIN`] classes, putting its reference offsets in
    /// the cache: the instance data length, or why there is none.
    fn walk(&mut self, class_id: u64) -> Walk {
        let mut at = 0u32;
        let mut c = class_id;
        for _ in 0..MAX_CHAIN {
            if c == 0 {
                return Walk::Found(at);
            }
            #[cfg(test)]
            {
                self.chain_steps += 1;
            }
            let Some(l) = self.classes.get(&c) else {
                return Walk::Unknown;
            };
            for &t in &self.types[l.start as usize..(l.start + l.count) as usize] {
                let Some(ty) = BasicType::from_u8(t & !0x80) else {
                    return Walk::Unknown;
                };
                if t == BasicType::Object as u8 {
                    self.cache_offsets.push(at);
                }
                at = at.saturating_add(ty.size(self.id_size));
            }
            c = l.super_id;
        }
        if c == 0 {
            Walk::Found(at)
        } else {
            // Longer than any real class hierarchy, or a loop.
            Walk::TooDeep
        }
    }

    /// A dropped instance: note it and what it references. False (nothing noted) if it cannot
    /// be accounted for: the caller keeps it.
    fn instance(&mut self, id: u64, class_id: u64, data: &[u8]) -> bool {
        if self.full {
            return false;
        }
        if !self.layout(class_id) || self.cache_len != data.len() {
            return self.defer(id, class_id, data);
        }
        if self.table.room(self.reserved) < self.cache_offsets.len() + 2 {
            self.full = true;
            return false;
        }
        self.table.mark(id, DROPPED);
        self.want_class(class_id);
        self.note_fields(data);
        true
    }

    /// A dropped object (an instance or an array's head): note it, as [`Holders::instance`],
    /// [`Holders::object_array`] or [`Holders::primitive_array`] do. False if it cannot be
    /// accounted for (or is no object): the caller keeps it.
    pub(super) fn object(&mut self, s: &Sub<'_>) -> bool {
        match *s {
            Sub::Instance {
                id, class_id, data, ..
            } => self.instance(id, class_id, data),
            Sub::ObjectArray {
                id, class_id, len, ..
            } => self.object_array(id, class_id, len),
            Sub::PrimitiveArray { id, .. } => self.primitive_array(id),
            _ => false,
        }
    }

    /// Mark a dropped object's class wanted (once for a run of objects of one class).
    #[inline]
    fn want_class(&mut self, class_id: u64) {
        if class_id != self.last_class {
            self.table.mark(class_id, WANTED);
            self.last_class = class_id;
        }
    }

    /// Mark what `data` references at the cached layout's offsets.
    fn note_fields(&mut self, data: &[u8]) {
        let n = self.id_size as usize;
        for i in 0..self.cache_offsets.len() {
            let o = self.cache_offsets[i] as usize;
            let r = read_id(&data[o..o + n], self.id_size);
            self.table.mark(r, WANTED);
        }
    }

    /// Keep a dropped instance of a class not known yet for [`Holders::take_wanted`].
    fn defer(&mut self, id: u64, class_id: u64, data: &[u8]) -> bool {
        // Room for every reference it may hold, its id and its class. Its class may never come
        // (or come at another length): [`Holders::resolve`] then takes every id-sized window of
        // its bytes for a reference (a field can start at any byte: HPROF packs them), so the
        // room is one entry per window, not per aligned id. Reserving less let the first such
        // instances' windows take the room of those after them: references left unmarked, a
        // path lost.
        let refs = windows(data.len(), self.id_size as usize);
        // Its head counts too: instances without fields would otherwise be bounded only by the
        // table (1.5 million heads, 36 MiB).
        let heads = (self.deferred.len() + 1) * std::mem::size_of::<(u64, u64, u32)>();
        if self.deferred_data.len() + data.len() + heads > MAX_DEFERRED_BYTES
            || self.table.room(self.reserved) < refs + 2
        {
            self.full = true;
            return false;
        }
        self.table.mark(id, DROPPED);
        self.want_class(class_id);
        self.reserved += refs;
        self.deferred.push((id, class_id, data.len() as u32));
        self.deferred_data.extend_from_slice(data);
        true
    }

    /// Note what the deferred instances reference, now that every class dump has passed. One
    /// whose class the dump never describes (or describes at another length) has each id-sized
    /// run of its bytes taken for a reference (a root too many, not a path lost), as far as the
    /// table has room.
    fn resolve(&mut self) {
        let deferred = std::mem::take(&mut self.deferred);
        let data = std::mem::take(&mut self.deferred_data);
        let n = self.id_size as usize;
        let mut at = 0usize;
        for &(_, class_id, len) in &deferred {
            let d = &data[at..at + len as usize];
            at += len as usize;
            if self.layout(class_id) && self.cache_len == d.len() {
                self.note_fields(d);
            } else {
                // Within its reservation ([`Holders::defer`]): every window is marked.
                debug_assert!(windows(d.len(), n) <= self.reserved);
                for w in d.windows(n) {
                    self.table.mark(read_id(w, self.id_size), WANTED);
                }
            }
            self.reserved -= windows(len as usize, n);
        }
        debug_assert_eq!(self.reserved, 0);
    }

    /// A dropped object array's head: its elements follow through [`Holders::elements`]. False
    /// if it cannot be accounted for.
    fn object_array(&mut self, id: u64, class_id: u64, len: u32) -> bool {
        if self.full || self.table.room(self.reserved) < len as usize + 2 {
            self.full = true;
            return false;
        }
        self.table.mark(id, DROPPED);
        self.want_class(class_id);
        self.in_array = true;
        self.partial_len = 0;
        true
    }

    /// A dropped primitive array. False if it cannot be accounted for.
    fn primitive_array(&mut self, id: u64) -> bool {
        if self.full || self.table.room(self.reserved) < 1 {
            self.full = true;
            return false;
        }
        self.table.mark(id, DROPPED);
        true
    }

    /// Elements of the dropped object array, in chunks of any size.
    pub(super) fn elements(&mut self, mut data: &[u8]) {
        if !self.in_array {
            return;
        }
        let n = self.id_size as usize;
        if self.partial_len > 0 {
            let take = (n - self.partial_len).min(data.len());
            self.partial[self.partial_len..self.partial_len + take].copy_from_slice(&data[..take]);
            self.partial_len += take;
            data = &data[take..];
            if self.partial_len < n {
                return;
            }
            let r = read_id(&self.partial[..n], self.id_size);
            self.table.mark(r, WANTED);
            self.partial_len = 0;
        }
        let mut chunks = data.chunks_exact(n);
        for c in &mut chunks {
            self.table.mark(read_id(c, self.id_size), WANTED);
        }
        let rest = chunks.remainder();
        self.partial[..rest.len()].copy_from_slice(rest);
        self.partial_len = rest.len();
    }

    /// The current array is complete.
    pub(super) fn array_end(&mut self) {
        self.in_array = false;
        self.partial_len = 0;
    }

    /// Whether anything was noted since the last [`Holders::take_wanted`].
    pub(super) fn pending(&self) -> bool {
        self.table.len > 0
    }

    /// The ids that need a root (referenced by a dropped object, neither dropped nor a root),
    /// sorted; then forget everything about this heap dump (another may follow in the file).
    pub(super) fn take_wanted(&mut self) -> Vec<u64> {
        self.resolve();
        let mut v: Vec<u64> = self
            .table
            .keys
            .iter()
            .zip(&self.table.flags)
            .filter(|&(_, &f)| f & (WANTED | DROPPED | ROOTED) == WANTED)
            .map(|(&k, _)| k)
            .collect();
        v.sort_unstable();
        self.table = Table::new();
        self.last_class = 0;
        self.full = false;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of ids doubles once it is more than three quarters full, not before (its
    /// memory) and not later (an open-addressing table must keep free slots); it keeps every id
    /// and its flags across the growth.
    #[test]
    fn the_table_of_ids_doubles_past_three_quarters_full() {
        let mut t = Table::new();
        let id = |i: usize| 0x1000_0000 + 8 * i as u64;
        let three_quarters = START_SLOTS / 4 * 3;
        for i in 0..three_quarters {
            t.mark(id(i), WANTED);
        }
        assert_eq!(
            t.keys.len(),
            START_SLOTS,
            "full to three quarters: not grown"
        );
        t.mark(id(0), ROOTED);
        assert_eq!(
            (t.len, t.keys.len()),
            (three_quarters, START_SLOTS),
            "a known id adds nothing"
        );
        t.mark(id(three_quarters), WANTED);
        assert_eq!(t.keys.len(), 2 * START_SLOTS, "one more: doubled");
        for i in 0..=three_quarters {
            let k = t.slot(id(i));
            assert_eq!(t.keys[k], id(i));
            let want = if i == 0 { WANTED | ROOTED } else { WANTED };
            assert_eq!(t.flags[k], want, "id {i}");
        }
        let never = t.slot(id(three_quarters + 1));
        assert_eq!(t.keys[never], 0, "an id never marked is not there");
    }

    /// A root is noted only while the table of ids has room: at its bound (three quarters of
    /// [`MAX_SLOTS`], where it no longer grows) more roots are not taken in, so the table never
    /// fills, and a lookup in it always ends. (Taking them in would fill it after a quarter of
    /// its slots more, and then a lookup of a new id would probe for ever.)
    #[test]
    fn roots_past_the_table_s_bound_are_not_noted() {
        let mut h = Holders::new(4);
        let bound = MAX_SLOTS / 4 * 3;
        for id in 1..=bound as u64 {
            h.table.mark((1 << 40) + id, DROPPED);
        }
        assert_eq!((h.table.room(0), h.table.keys.len()), (0, MAX_SLOTS));
        for id in 1..=(MAX_SLOTS / 4) as u64 + 1 {
            h.root((2 << 40) + id);
        }
        assert_eq!(h.table.len, bound);
        let never = h.table.slot(3 << 40);
        assert_eq!(h.table.keys[never], 0);
    }

    /// An instance set aside before its class, whose class then comes with instances of
    /// another length (a dump that contradicts itself): its bytes are not read by that layout;
    /// every id-sized window is taken for a reference, as for a class never described.
    #[test]
    fn a_waiting_instance_whose_class_comes_at_another_length_has_every_window_marked() {
        let mut h = Holders::new(4);
        let data: Vec<u8> = [0x9000u32, 0x9001, 0x9002]
            .iter()
            .flat_map(|r| r.to_be_bytes())
            .collect();
        assert!(h.instance(0x2000, 0x60, &data));
        // Class 0x60: one reference, 4 bytes an instance, where the waiting one has 12.
        h.class(&class(0x60, 0, &raw(&[(1, BasicType::Object)])));
        let wanted = h.take_wanted();
        for r in [0x9000, 0x9001, 0x9002] {
            assert!(wanted.contains(&r), "{r:#x} in {wanted:x?}");
        }
    }

    /// Holders with class 0x60 (one reference) described, the table of ids filled to `room`
    /// entries below its bound.
    fn near_the_bound(room: usize) -> Holders {
        let mut h = Holders::new(4);
        h.class(&class(0x60, 0, &raw(&[(1, BasicType::Object)])));
        for id in 1..=(MAX_SLOTS / 4 * 3 - room) as u64 {
            h.table.mark((1 << 40) + id, DROPPED);
        }
        assert_eq!(h.table.room(0), room);
        h
    }

    /// A dropped instance of a known class is noted only with room in the table for its id,
    /// its class and each of its references; one entry short, it is kept (and the holders are
    /// full from then on), never noted in part.
    #[test]
    fn an_instance_is_dropped_only_with_room_for_its_id_class_and_references() {
        let one_ref = 0x9000u32.to_be_bytes();
        let mut h = near_the_bound(3);
        assert!(h.instance(0x2000, 0x60, &one_ref));
        assert!(!h.full);
        assert_eq!(h.table.room(0), 0);
        let mut h = near_the_bound(2);
        assert!(!h.instance(0x2000, 0x60, &one_ref));
        assert!(h.full);
        assert_eq!(h.table.room(0), 2, "nothing noted");
    }

    /// So is a dropped object array: room for its id, its class and each element, or it is
    /// kept.
    #[test]
    fn an_object_array_is_dropped_only_with_room_for_its_id_class_and_elements() {
        let mut h = near_the_bound(3);
        assert!(h.object_array(0x2000, 0x60, 1));
        assert!(!h.full);
        let mut h = near_the_bound(2);
        assert!(!h.object_array(0x2000, 0x60, 1));
        assert!(h.full);
        assert_eq!(h.table.room(0), 2, "nothing noted");
    }

    /// A dropped primitive array is noted with room for its id alone; with none it is kept.
    #[test]
    fn a_primitive_array_is_dropped_only_with_room_for_its_id() {
        let mut h = near_the_bound(1);
        assert!(h.primitive_array(0x2000));
        assert_eq!(h.table.room(0), 0);
        let mut h = near_the_bound(0);
        assert!(!h.primitive_array(0x2000));
        assert!(h.full);
    }

    /// A dropped object array's elements may come in chunks of any size, an id cut anywhere
    /// between two (as the tee hands the stripper what the VM writes): every element is wanted,
    /// whatever the cuts, for both id sizes.
    #[test]
    fn an_object_array_s_elements_are_read_across_any_chunks() {
        for n in [4usize, 8] {
            let elems: Vec<u64> = (0..7).map(|i| 0x0101_0000 + i * 0x0111).collect();
            let bytes: Vec<u8> = elems
                .iter()
                .flat_map(|e| e.to_be_bytes()[8 - n..].to_vec())
                .collect();
            for chunk in 1..=2 * n + 1 {
                let mut h = Holders::new(n as u32);
                assert!(h.object_array(0x2000, 0x60, elems.len() as u32));
                for c in bytes.chunks(chunk) {
                    h.elements(c);
                }
                let wanted = h.take_wanted();
                for e in &elems {
                    assert!(wanted.contains(e), "id size {n}, chunks of {chunk}: {e:#x}");
                }
                // The elements, and the array's class: nothing made up from cut ids.
                assert_eq!(
                    wanted.len(),
                    elems.len() + 1,
                    "id size {n}, chunks of {chunk}"
                );
            }
        }
    }

    /// `fields` as a class dump lists them (4-byte name ids).
    fn raw(fields: &[(u64, BasicType)]) -> Vec<u8> {
        let mut b = Vec::new();
        for &(name, ty) in fields {
            b.extend_from_slice(&(name as u32).to_be_bytes());
            b.push(ty as u8);
        }
        b
    }

    fn class(id: u64, super_id: u64, fields_raw: &[u8]) -> ClassDump<'_> {
        ClassDump {
            id,
            stack_serial: 0,
            super_id,
            loader_id: 0,
            instance_size: 0,
            constant_count: 0,
            static_count: 0,
            field_count: (fields_raw.len() / 5) as u16,
            statics_raw: &[],
            fields_raw,
            id_size: 4,
        }
    }

    /// Classes `base`, `base + 1`, ... each extending the one before, the first with `root`'s
    /// fields, the others with none.
    fn chain(h: &mut Holders, base: u64, len: u64, root: &[u8]) {
        for i in 0..len {
            let sup = if i == 0 { 0 } else { base + i - 1 };
            h.class(&class(base + i, sup, if i == 0 { root } else { &[] }));
        }
    }

    #[test]
    fn a_superclass_walk_stops_at_max_chain_and_each_class_is_walked_once() {
        let mut h = Holders::new(4);
        let base = 0x1000;
        let len = 4 * MAX_CHAIN as u64;
        chain(&mut h, base, len, &[]);
        let (deep, shallow) = (base + len - 1, base);
        // Instances alternate between the deepest class and the first, so the one-class cache
        // misses every time (deep_classes.py).
        for j in 0..1000u64 {
            let c = if j % 2 == 0 { deep } else { shallow };
            assert!(h.instance(0x1000_0000 + 8 * j, c, &[]));
        }
        // The deep chain walked once, up to the cap; the shallow one once, one class.
        assert_eq!(h.chain_steps, MAX_CHAIN as u64 + 1);
        assert_eq!(h.classes[&deep].memo, Memo::TooDeep);
        // Its instances are waiting as instances of a class not known; resolving them walks
        // nothing more (the roots are the two classes: neither is dropped).
        assert_eq!(h.deferred.len(), 500);
        assert_eq!(h.take_wanted(), vec![shallow, deep]);
        assert_eq!(h.chain_steps, MAX_CHAIN as u64 + 1);
    }

    #[test]
    fn a_chain_of_max_chain_classes_is_laid_out_and_one_more_is_not() {
        let mut h = Holders::new(4);
        let root = raw(&[(1, BasicType::Object), (2, BasicType::Int)]);
        chain(&mut h, 0x1000, MAX_CHAIN as u64 + 1, &root);
        let at_cap = 0x1000 + MAX_CHAIN as u64 - 1;
        // The module doc's figure for the class map.
        assert_eq!(std::mem::size_of::<(u64, Layout)>(), 48);
        assert!(h.layout(at_cap));
        assert_eq!((h.cache_offsets.clone(), h.cache_len), (vec![0], 8));
        assert!(!h.layout(at_cap + 1));
        assert_eq!(h.classes[&(at_cap + 1)].memo, Memo::TooDeep);
        // A loop is a chain over the cap too.
        h.class(&class(0x9000, 0x9001, &[]));
        h.class(&class(0x9001, 0x9000, &[]));
        assert!(!h.layout(0x9000));
        assert_eq!(h.classes[&0x9000].memo, Memo::TooDeep);
    }

    #[test]
    fn a_class_described_again_makes_its_subclasses_laid_out_again() {
        let mut h = Holders::new(4);
        let a1 = raw(&[(1, BasicType::Int)]);
        let b = raw(&[(2, BasicType::Object)]);
        h.class(&class(0x10, 0, &a1));
        h.class(&class(0x20, 0x10, &b));
        assert!(h.instance(0x100, 0x20, &[0, 0, 0, 0x30, 0, 0, 0, 7]));
        assert!(h.deferred.is_empty());
        // Another heap dump describes the superclass with one more reference.
        let a2 = raw(&[(1, BasicType::Int), (3, BasicType::Object)]);
        h.class(&class(0x10, 0, &a2));
        assert!(h.layout(0x20));
        assert_eq!((h.cache_offsets.clone(), h.cache_len), (vec![0, 8], 12));
        assert!(h.instance(0x108, 0x20, &[0, 0, 0, 0x40, 0, 0, 0, 7, 0, 0, 0, 0x50]));
        assert!(h.deferred.is_empty());
        assert_eq!(h.take_wanted(), vec![0x20, 0x30, 0x40, 0x50]);
    }

    #[test]
    fn instances_waiting_for_their_class_count_their_heads_against_the_bound() {
        let mut h = Holders::new(4);
        let heads = MAX_DEFERRED_BYTES / 24;
        // Instances without fields of a class never described: each waits, head only.
        for i in 0..heads as u64 {
            assert!(h.instance(0x1000_0000 + 8 * i, 0x60, &[]), "instance {i}");
        }
        assert!(!h.instance(0x2000_0000, 0x60, &[]));
        assert!(h.full);
        assert_eq!(h.deferred.len(), heads);
        assert_eq!(h.take_wanted(), vec![0x60]);
    }

    #[test]
    fn classes_met_in_turn_are_laid_out_again_from_their_memo() {
        let mut h = Holders::new(4);
        let a = raw(&[(1, BasicType::Object), (2, BasicType::Int)]);
        let b = raw(&[(3, BasicType::Object), (4, BasicType::Object)]);
        h.class(&class(0x10, 0, &a));
        h.class(&class(0x20, 0, &b));
        let id = |v: u32| v.to_be_bytes();
        for k in 0..3u32 {
            let ra = [id(0x100 + k), id(7)].concat();
            let rb = [id(0x200 + k), id(0x300 + k)].concat();
            assert!(h.instance(0x1000 + 16 * k as u64, 0x10, &ra));
            assert!(h.instance(0x1008 + 16 * k as u64, 0x20, &rb));
        }
        // Each class walked once, then laid out from its memo.
        assert_eq!(h.chain_steps, 2);
        assert!(h.deferred.is_empty());
        let want = [0x10, 0x20, 0x100, 0x101, 0x102, 0x200, 0x201, 0x202]
            .into_iter()
            .chain([0x300, 0x301, 0x302])
            .collect::<Vec<u64>>();
        assert_eq!(h.take_wanted(), want);
    }

    #[test]
    fn the_memo_keeps_up_to_max_memo_offsets_and_no_more() {
        let mut h = Holders::new(4);
        // A class of 65,535 references, and subclasses adding one: 65,536 offsets each, so
        // eight fill the memo's room exactly.
        let per = 1usize << 16;
        assert_eq!(MAX_MEMO_OFFSETS % per, 0);
        let fields: Vec<(u64, BasicType)> = (0..per as u64 - 1)
            .map(|i| (i + 1, BasicType::Object))
            .collect();
        let root = raw(&fields);
        h.class(&class(0x10, 0, &root));
        let one = raw(&[(1, BasicType::Object)]);
        let fit = (MAX_MEMO_OFFSETS / per) as u64;
        for i in 0..=fit {
            h.class(&class(0x100 + i, 0x10, &one));
        }
        for i in 0..=fit {
            assert!(h.layout(0x100 + i));
            assert_eq!(h.cache_offsets.len(), per);
        }
        for i in 0..fit {
            assert!(
                matches!(h.classes[&(0x100 + i)].memo, Memo::Ready { .. }),
                "{i}"
            );
        }
        assert_eq!(h.classes[&(0x100 + fit)].memo, Memo::None);
        assert_eq!(h.memo_offsets.len(), MAX_MEMO_OFFSETS);
    }

    #[test]
    fn only_reference_referent_is_a_weak_field() {
        let mut h = Holders::new(4);
        h.string(1, b"referent");
        h.string(2, b"queue");
        h.string(3, b"java/lang/ref/Reference");
        h.load_class(0x30, 3);
        let fields = raw(&[(1, BasicType::Object), (2, BasicType::Object)]);
        h.class(&class(0x30, 0, &fields));
        h.class(&class(0x40, 0, &fields));
        let refs = |a: u32, b: u32| [a.to_be_bytes(), b.to_be_bytes()].concat();
        assert!(h.instance(0x1000, 0x30, &refs(0x500, 0x600)));
        assert!(h.instance(0x1008, 0x40, &refs(0x700, 0x800)));
        assert_eq!(h.take_wanted(), vec![0x30, 0x40, 0x600, 0x700, 0x800]);
    }

    #[test]
    fn class_layouts_are_kept_up_to_max_field_bytes_and_no_more() {
        let mut h = Holders::new(4);
        let most = raw(&vec![(1, BasicType::Int); u16::MAX as usize]);
        let full = MAX_FIELD_BYTES / u16::MAX as usize;
        for i in 0..full as u64 {
            h.class(&class(0x100 + i, 0, &most));
        }
        let rest = raw(&vec![
            (1, BasicType::Int);
            MAX_FIELD_BYTES % u16::MAX as usize
        ]);
        h.class(&class(0x10, 0, &rest));
        assert_eq!(h.types.len(), MAX_FIELD_BYTES);
        assert!(h.classes.contains_key(&0x10));
        h.class(&class(0x20, 0, &raw(&[(1, BasicType::Int)])));
        assert!(!h.classes.contains_key(&0x20));
        assert_eq!(h.classes.len(), full + 1);
    }

    /// A waiting instance reserves room in the id table for as many references as its bytes
    /// hold (one per `id_size` bytes), besides its id and its class: it is taken while the
    /// table has exactly that room, and the next is refused once the reservations fill it,
    /// near the table's 1.5-million-entry bound.
    #[test]
    fn a_waiting_instance_reserves_room_for_every_window_of_its_bytes() {
        // 40 bytes of a class never described: 10 aligned references (0x9000..=0x9009), and as
        // a field may start at any byte, 37 id-sized windows to take for references.
        let data: Vec<u8> = (0..10u32)
            .flat_map(|i| (0x9000 + i).to_be_bytes())
            .collect();
        let near_the_bound = |room: usize| {
            let mut h = Holders::new(4);
            let bound = MAX_SLOTS / 4 * 3;
            for id in 1..=(bound - room) as u64 {
                h.table.mark((1 << 40) + id, DROPPED);
            }
            assert_eq!(h.table.room(0), room);
            h
        };
        // One entry short of its 37 windows, its id and its class: it is kept, not dropped
        // (reserving a room per aligned id, 12, it was dropped and 0x9003.. went unmarked).
        let mut h = near_the_bound(38);
        assert!(!h.instance(0x2000_0000, 0x60, &data));
        assert!(h.full);
        assert!(h.deferred.is_empty());

        let mut h = near_the_bound(39);
        assert!(h.instance(0x2000_0000, 0x60, &data));
        assert!(!h.full);
        assert_eq!((h.reserved, h.table.room(0)), (37, 37));
        // Another of the class, without fields, wants its id only: no room is left.
        assert!(!h.instance(0x2000_0008, 0x60, &[]));
        assert!(h.full);
        assert_eq!(h.deferred.len(), 1);
        // Its class never described, every window is a reference: the class and 37 windows,
        // each aligned reference among them.
        let wanted = h.take_wanted();
        assert_eq!(wanted.len(), 38, "{wanted:x?}");
        assert!(wanted.contains(&0x60));
        for r in 0x9000..=0x9009 {
            assert!(wanted.contains(&r), "{r:x} not wanted: {wanted:x?}");
        }
        assert_eq!(h.reserved, 0);
    }

    #[test]
    fn instances_waiting_for_their_class_may_fill_max_deferred_bytes_exactly() {
        // 16 bytes of fields and 24 bytes of head per instance: one with fields and 174,761
        // without fill the 4 MiB exactly (the table, 1.5 million entries, has room for all).
        let head = std::mem::size_of::<(u64, u64, u32)>();
        assert_eq!((MAX_DEFERRED_BYTES - 16) % head, 0);
        let mut h = Holders::new(4);
        assert!(h.instance(0x1000, 0x60, &[0x11; 16]));
        let mut id = 0x1008;
        for _ in 1..(MAX_DEFERRED_BYTES - 16) / head {
            assert!(h.instance(id, 0x60, &[]), "{id:x}");
            id += 8;
        }
        assert!(!h.full);
        assert!(!h.instance(id, 0x60, &[]));
        assert!(h.full);
    }
}
