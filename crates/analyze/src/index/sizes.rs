//! Shallow sizes as the VM lays objects out, decided per dump, and the conventions used (the
//! report's `analysis.sizes`, so that a difference from another tool can be explained).
//!
//! Pass 2 writes a raw size per object, from the dump alone: an instance its class's instance size
//! as the dump states it (or its field bytes), an array its length times the element size in the
//! dump (references as ids) plus [`array_header`], a class its static records. Once the graph is
//! built, [`plan_sizes`] decides the layout and [`convert_sizes`] turns each raw size into the
//! VM's:
//!
//! - **HotSpot** (dumps without Android's records), as Eclipse MAT counts it: an object header of a
//!   pointer (the mark word: the id size) and a reference (the class word); references of 4 bytes
//!   where the id size is 4, and with id size 8 where the dump shows compressed references, else 8.
//!   An instance: the header, then each class's own fields from `java.lang.Object` down, each
//!   class's end rounded up to the reference size, the whole to 8 bytes. An object array: header +
//!   a 4-byte length + length × reference, to 8. A primitive array: header + the length word
//!   rounded up to the reference size, + length × element size, to 8. Compressed references are
//!   decided as MAT does: an object array whose next object (by address) starts before the array's
//!   end with 8-byte references and a 16-byte header cannot have 8-byte references.
//! - **Android** (Dalvik and ART: dumps with HEAP_DUMP_INFO or ROOT_* 0x89-0x90 records; the 1.0.3
//!   header alone does not tell, a stripped HotSpot dump has it too): 4-byte references, an 8-byte
//!   object header (class and lock words), 8-byte alignment. An instance: its class's instance size
//!   as the VM records it in the dump (which counts the header; ART writes the object size), to 8;
//!   when the dump gives none, header + field bytes. An array: header + 4-byte length (+ 4 of
//!   padding before 8-byte elements) + length × element size, to 8.
//! - A class object, on both: its static fields' values (references at the reference size), to 8
//!   bytes, as MAT counts it (not the records' bytes, which hold each field's name id and type).
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// How shallow sizes were counted. See the module documentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Conventions {
    /// `"HotSpot"` or `"Android"`. (Not read back: a `&'static str`; a report read reads it
    /// as "".)
    #[serde(skip_deserializing)]
    pub vm: &'static str,
    /// Bytes of an instance's header (mark and class words).
    pub object_header: u32,
    /// Bytes of an array's header before its elements (before the padding of 8-byte elements).
    pub array_header: u32,
    /// Bytes of a reference field or element.
    pub reference_size: u32,
    /// Whether references are compressed (4 bytes in a dump with 8-byte ids).
    pub compressed_references: bool,
    /// Every object's size is rounded up to a multiple of this.
    pub alignment: u32,
}

const ALIGN: u64 = 8;

pub(crate) fn align(n: u64, to: u64) -> u64 {
    n.div_ceil(to) * to
}

/// What a class's raw sizes are (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// Instances: their size, or 0 where it comes from the raw size (field bytes).
    Instance(u64),
    ObjectArray,
    PrimitiveArray(u64),
}

/// What is decided from the graph, once it is complete, before any size is converted: the
/// layout of the dump, and each class's conversion from raw sizes to the VM's. In three
/// steps: [`plan_sizes`] decides; [`convert_sizes`] writes each object's shallow size as the
/// VM lays it out; [`finish_sizes`] sizes the class objects and drops the array-size
/// findings made on the raw sizes that the VM's fall short of `array_min_bytes`.
pub(crate) struct Sizing {
    sizers: Vec<Sizer>,
    conv: Conventions,
    array_min_bytes: u64,
}

/// [`Sizing`]'s first step: the layout of `ix`'s dump (read from its raw sizes).
pub(crate) fn plan_sizes(ix: &Index, array_min_bytes: u64) -> Sizing {
    let id_size = ix.header.id_size;
    let android = ix.android || ix.roots.iter().any(|r| android_root(r.tag));
    let raw_header = array_header(id_size);
    let kinds = |ix: &Index, c: &Conventions| -> Vec<Kind> {
        (0..ix.classes.len() as u32)
            .map(|k| kind(ix, k, c, android))
            .collect()
    };
    let mut conv = conventions(android, id_size, false);
    if !android && id_size == 8 {
        let k = kinds(ix, &conv);
        if shows_compressed(ix, &k, raw_header) {
            conv = conventions(false, id_size, true);
        }
    }
    let sizers: Vec<Sizer> = kinds(ix, &conv)
        .into_iter()
        .map(|k| Sizer::new(k, &conv, id_size, android))
        .collect();
    Sizing {
        sizers,
        conv,
        array_min_bytes,
    }
}

/// [`Sizing`]'s second step: every object's raw size (`shallow`, by node, beside its class)
/// converted, in two halves side by side if `two` (the loop is memory-bound: 13 ms on two
/// threads at 10 M objects).
pub(crate) fn convert_sizes(class_of: &[u32], shallow: &mut [u32], s: &Sizing, two: bool) {
    let convert = |class: u32, raw: u32| -> u32 {
        match s.sizers.get(class as usize) {
            Some(z) => z.size(raw),
            None => raw,
        }
    };
    let mid = if two { shallow.len() / 2 } else { 0 };
    let (a, b) = shallow.split_at_mut(mid);
    let (ca, cb) = class_of.split_at(mid.min(class_of.len()));
    // (One loop for both halves, so that `convert` has one caller and is inlined into it at the
    // shipped library's opt-level "s" too: with a loop each it was a call per object there.)
    let half =
        |v: &mut [u32], c: &[u32]| v.iter_mut().zip(c).for_each(|(v, &c)| *v = convert(c, *v));
    std::thread::scope(|sc| {
        if !a.is_empty() {
            sc.spawn(|| half(a, ca));
        }
        half(b, cb);
    });
}

/// [`Sizing`]'s last step, once the objects' sizes are converted: the class objects' sizes
/// (their statics), the array findings that fall short dropped, then one finding kept per
/// object ([`super::one_flag_per_node`]).
pub(crate) fn finish_sizes(ix: &mut Index, s: Sizing) {
    let r = s.conv.reference_size as u64;
    for c in &ix.classes {
        if let Some(v) = ix.shallow.get_mut(c.node as usize) {
            let bytes = c.static_prim_bytes as u64 + c.statics.len() as u64 * r;
            *v = align(bytes, ALIGN).min(u32::MAX as u64) as u32;
        }
    }
    let shallow = &ix.shallow;
    ix.flags.retain(|f| {
        f.reason != ARRAY_FINDING
            || shallow
                .get(f.node as usize)
                .is_some_and(|&v| v as u64 >= s.array_min_bytes)
    });
    ix.sizes = s.conv;
    super::one_flag_per_node(ix);
}

/// The conventions of an Android dump, or of a HotSpot one with `id_size`-byte ids and
/// references `compressed` or not (see the module documentation).
pub(crate) fn conventions(android: bool, id_size: u32, compressed: bool) -> Conventions {
    match (android, compressed) {
        (true, _) => Conventions {
            vm: "Android",
            object_header: 8,
            array_header: 12,
            reference_size: 4,
            compressed_references: false,
            alignment: ALIGN as u32,
        },
        (false, false) => Conventions {
            vm: "HotSpot",
            object_header: 2 * id_size,
            array_header: 2 * id_size + 4,
            reference_size: id_size,
            compressed_references: false,
            alignment: ALIGN as u32,
        },
        (false, true) => Conventions {
            vm: "HotSpot",
            object_header: 12,
            array_header: 16,
            reference_size: 4,
            compressed_references: true,
            alignment: ALIGN as u32,
        },
    }
}

/// The VM's size of an object of kind `k` whose raw size (pass 2's) is `raw`, under `conv`
/// (an `android` dump's, or HotSpot's).
#[inline(always)]
pub(crate) fn vm_size(k: Kind, raw: u64, conv: &Conventions, id_size: u32, android: bool) -> u32 {
    let (r, h) = (conv.reference_size as u64, conv.object_header as u64);
    let raw_header = array_header(id_size);
    let v = match k {
        Kind::Instance(0) => align(h + raw, ALIGN),
        Kind::Instance(s) => s,
        Kind::ObjectArray => {
            let len = raw.saturating_sub(raw_header) / id_size as u64;
            align(h + 4 + len * r, ALIGN)
        }
        Kind::PrimitiveArray(e) => {
            let len = raw.saturating_sub(raw_header) / e;
            let head = if android {
                align(h + 4, e.max(4))
            } else {
                align(h + 4, r)
            };
            align(head + len * e, ALIGN)
        }
    };
    v.min(u32::MAX as u64) as u32
}

/// [`vm_size`] for one class's objects, worked out once so that [`convert_sizes`] turns each raw
/// size into the VM's without a division: `align(base + ((raw - sub) >> from << to) & mask, 8)`,
/// capped at `u32::MAX` (an array's raw bytes to its length, then to the VM's bytes; `mask`
/// 0 where every object has the same size). The divisions of [`vm_size`] by the id, element
/// and reference sizes, all powers of two in a real dump, were most of the conversion's time.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Sizer {
    Shifts {
        base: u64,
        sub: u64,
        from: u32,
        to: u32,
        mask: u64,
    },
    /// A size that is not a power of two somewhere: [`vm_size`] as it is.
    Divide(Kind, Conventions, u32, bool),
}

impl Sizer {
    /// The sizer of kind `k` under `conv` (see [`vm_size`]).
    pub(crate) fn new(k: Kind, conv: &Conventions, id_size: u32, android: bool) -> Sizer {
        let (r, h) = (conv.reference_size as u64, conv.object_header as u64);
        // Raw bytes `per` an element in, `to` an element out: shifts where both are powers of
        // two.
        let shifts = |base: u64, sub: u64, per: u64, to: u64, mask: u64| {
            (per.is_power_of_two() && to.is_power_of_two()).then(|| Sizer::Shifts {
                base,
                sub,
                from: per.trailing_zeros(),
                to: to.trailing_zeros(),
                mask,
            })
        };
        let raw_header = array_header(id_size);
        let z = match k {
            Kind::Instance(0) => shifts(h, 0, 1, 1, u64::MAX),
            // ([`kind`]'s sizes are aligned; one that is not is kept as it is.)
            Kind::Instance(s) if s % ALIGN == 0 => shifts(s, 0, 1, 1, 0),
            Kind::Instance(_) => None,
            Kind::ObjectArray => shifts(h + 4, raw_header, id_size as u64, r, u64::MAX),
            Kind::PrimitiveArray(e) => {
                let head = if android {
                    align(h + 4, e.max(4))
                } else {
                    align(h + 4, r)
                };
                shifts(head, raw_header, e, e, u64::MAX)
            }
        };
        z.unwrap_or(Sizer::Divide(k, *conv, id_size, android))
    }

    /// The VM's size of an object whose raw size is `raw`: [`vm_size`]'s.
    #[inline(always)]
    pub(crate) fn size(&self, raw: u32) -> u32 {
        match *self {
            Sizer::Shifts {
                base,
                sub,
                from,
                to,
                mask,
            } => {
                let n = (((raw as u64).saturating_sub(sub) >> from) << to) & mask;
                // (At most 2^32 << 3 plus a header: no overflow.)
                align(base + n, ALIGN).min(u32::MAX as u64) as u32
            }
            Sizer::Divide(k, conv, id_size, android) => {
                vm_size(k, raw as u64, &conv, id_size, android)
            }
        }
    }
}

/// The finding of a large array, made on raw sizes in pass 2 and checked by [`finish_sizes`].
pub(crate) const ARRAY_FINDING: &str = "Array Size Over Threshold";

/// Raw sizes can fall short of the VM's by at most this much (an array's header and padding):
/// pass 2 flags arrays this close to the threshold, and [`finish_sizes`] decides.
pub(crate) const RAW_SLACK: u64 = 16;

pub(crate) fn kind(ix: &Index, k: u32, c: &Conventions, android: bool) -> Kind {
    if k >= ix.prim_base && k < ix.prim_base + PRIMS.len() as u32 {
        let ty = PRIMS[(k - ix.prim_base) as usize];
        return Kind::PrimitiveArray(ty.size(4) as u64);
    }
    let cl = &ix.classes[k as usize];
    if k < ix.prim_base && cl.name.ends_with("[]") {
        return Kind::ObjectArray;
    }
    if cl.id == 0 {
        // A pseudo-class (`<unknown class>`, a missing `java.lang.Class`): field bytes.
        return Kind::Instance(0);
    }
    if android {
        let s = if cl.instance_size > 0 {
            cl.instance_size as u64
        } else {
            c.object_header as u64 + field_bytes(cl, 4)
        };
        return Kind::Instance(align(s, ALIGN).max(ALIGN));
    }
    // HotSpot, as MAT lays it out: from the root class down, each class's fields after its
    // superclass's, rounded up to the reference size.
    let r = c.reference_size as u64;
    let mut size = c.object_header as u64;
    for &j in super::chain(&ix.classes, k).iter().rev() {
        let cj = &ix.classes[j as usize];
        let own = field_bytes(cj, c.reference_size);
        if own > 0 || cj.super_id != 0 {
            size = align(size + own, r);
        }
    }
    Kind::Instance(align(size, ALIGN))
}

/// Bytes of the fields class `cl` declares, references at `ref_size`.
fn field_bytes(cl: &Class, ref_size: u32) -> u64 {
    cl.fields.iter().map(|f| f.ty.size(ref_size) as u64).sum()
}

/// Whether an object at `next` starts inside an object array at `array` of `len` elements,
/// were the array laid out with 8-byte references (a 16-byte header and 8 bytes an element):
/// then the dump's references are 4 bytes. (The census asks it too, in file order.)
pub(crate) fn inside_wide_array(array: u64, len: u64, next: u64) -> bool {
    next > array && next - array < 16 + 8 * len
}

/// Whether an object array's next object, by address, starts inside it (see
/// [`inside_wide_array`]).
fn shows_compressed(ix: &Index, kinds: &[Kind], raw_header: u64) -> bool {
    let n = ix.len().min(ix.class_of.len()).min(ix.shallow.len());
    let mut ids = ix.each_id();
    let Some(mut id) = ids.next() else {
        return false;
    };
    for (i, next) in (0..n.saturating_sub(1)).zip(ids) {
        if matches!(kinds.get(ix.class_of[i] as usize), Some(Kind::ObjectArray)) {
            let len = (ix.shallow[i] as u64).saturating_sub(raw_header) / 8;
            if inside_wide_array(id, len, next) {
                return true;
            }
        }
        id = next;
    }
    false
}

/// Whether a root tag is one only Android writes (ROOT_INTERNED_STRING .. ROOT_UNREACHABLE).
pub(crate) fn android_root(tag: u8) -> bool {
    (0x89..=0x90).contains(&tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sizer gives [`vm_size`]'s answer for every kind, convention and id size, over raw
    /// sizes from 0 (below an array's header) to `u32::MAX`; element sizes that are not powers
    /// of two take the division.
    #[test]
    fn sizers_give_vm_size() {
        let raws = (0..300u32)
            .chain((0..32).map(|b| 1u32 << b))
            .chain((0..32).map(|b| (1u32 << b).wrapping_sub(1)))
            .chain([u32::MAX, u32::MAX - 7, 0x8000_0003, 123_456_789]);
        let raws: Vec<u32> = raws.collect();
        let mut checked = 0;
        for id_size in [4u32, 8, 2, 3] {
            for (android, compressed) in [(false, false), (false, true), (true, false)] {
                let conv = conventions(android, id_size, compressed);
                let kinds = [
                    Kind::Instance(0),
                    Kind::Instance(16),
                    Kind::Instance(24),
                    Kind::Instance(20),
                    Kind::Instance(u32::MAX as u64 + 8),
                    Kind::ObjectArray,
                    Kind::PrimitiveArray(1),
                    Kind::PrimitiveArray(2),
                    Kind::PrimitiveArray(4),
                    Kind::PrimitiveArray(8),
                    Kind::PrimitiveArray(3),
                ];
                for k in kinds {
                    let z = Sizer::new(k, &conv, id_size, android);
                    let divides = matches!(z, Sizer::Divide(..));
                    let odd = match k {
                        Kind::Instance(s) => s % 8 != 0,
                        Kind::ObjectArray => !id_size.is_power_of_two(),
                        Kind::PrimitiveArray(e) => !e.is_power_of_two(),
                    };
                    assert_eq!(divides, odd, "{k:?} id {id_size}");
                    for &raw in &raws {
                        let want = vm_size(k, raw as u64, &conv, id_size, android);
                        assert_eq!(z.size(raw), want, "{k:?} {conv:?} id {id_size} raw {raw}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 10_000);
    }
}
