//! Heap dump sub-records: how long the head of one is (or how many bytes are needed to tell),
//! the fixed lengths of roots, and the one walk of a class dump behind both measuring it and
//! reading it in place.
//!
//! Invariants: a head is judged only on the bytes it is given, so a cut head gives the same
//! verdict, at the same byte offset, as the whole one would; nothing here allocates except an
//! error's message.

use super::records::ClassDump;
use super::Measure;
use crate::{read_id, read_u16, read_u32, sub, BasicType, Error, Result};

/// Measure a sub-record head starting at `b[0]`; `at` is its offset, for errors.
pub(super) fn measure_sub(b: &[u8], id_size: u32, at: u64) -> Result<Measure> {
    let n = id_size as usize;
    if b.is_empty() {
        return Ok(Measure::Need(1));
    }
    let fixed = |len: usize| -> Result<Measure> {
        Ok(if b.len() < len {
            Measure::Need(len)
        } else {
            Measure::Len(len)
        })
    };
    if let Some(len) = fixed_sub_len(b[0], n) {
        return fixed(len);
    }
    match b[0] {
        sub::INSTANCE_DUMP => {
            let h = 1 + 2 * n + 8;
            if b.len() < h {
                return Ok(Measure::Need(h));
            }
            fixed(h + read_u32(&b[h - 4..]) as usize)
        }
        sub::OBJECT_ARRAY_DUMP => fixed(1 + 2 * n + 8),
        sub::PRIMITIVE_ARRAY_DUMP | sub::PRIMITIVE_ARRAY_NODATA_DUMP => {
            let h = 1 + n + 9;
            if b.len() < h {
                return Ok(Measure::Need(h));
            }
            match BasicType::from_u8(b[h - 1]) {
                Some(BasicType::Object) | None => Err(Error::new(
                    at + h as u64 - 1,
                    format!("primitive array has an invalid element type {}", b[h - 1]),
                )),
                Some(_) => Ok(Measure::Len(h)),
            }
        }
        sub::CLASS_DUMP => measure_class(b, id_size, at),
        t => Err(Error::new(
            at,
            format!("unknown heap dump sub-record tag 0x{t:02X}"),
        )),
    }
}

/// The length of a root or HEAP_DUMP_INFO sub-record (the sub-records of fixed length), with
/// identifiers of `n` bytes; `None` for any other tag.
pub(super) fn fixed_sub_len(t: u8, n: usize) -> Option<usize> {
    Some(match t {
        sub::ROOT_UNKNOWN
        | sub::ROOT_STICKY_CLASS
        | sub::ROOT_MONITOR_USED
        | sub::ROOT_INTERNED_STRING
        | sub::ROOT_FINALIZING
        | sub::ROOT_DEBUGGER
        | sub::ROOT_REFERENCE_CLEANUP
        | sub::ROOT_VM_INTERNAL
        | sub::ROOT_UNREACHABLE => 1 + n,
        sub::ROOT_JNI_GLOBAL => 1 + 2 * n,
        sub::ROOT_JNI_LOCAL
        | sub::ROOT_JAVA_FRAME
        | sub::ROOT_THREAD_OBJECT
        | sub::ROOT_JNI_MONITOR => 1 + n + 8,
        sub::ROOT_NATIVE_STACK | sub::ROOT_THREAD_BLOCK => 1 + n + 4,
        sub::HEAP_DUMP_INFO => 1 + 4 + n,
        _ => return None,
    })
}

/// Walk a class dump as far as `b` allows.
fn measure_class(b: &[u8], id_size: u32, at: u64) -> Result<Measure> {
    match walk_class(b, id_size as usize) {
        Ok(w) => Ok(Measure::Len(w.end)),
        Err(ClassStop::Need(k)) => Ok(Measure::Need(k)),
        Err(ClassStop::BadType(off)) => Err(Error::new(
            at + off as u64,
            format!("class dump has an invalid value type {}", b[off]),
        )),
    }
}

/// Where [`walk_class`] stopped short.
enum ClassStop {
    /// At least this many bytes are needed to go on.
    Need(usize),
    /// The byte at this offset is not a value type.
    BadType(usize),
}

/// What [`walk_class`] found: the counts, where the statics lie and where the dump ends.
struct ClassWalk {
    constant_count: u16,
    static_count: u16,
    field_count: u16,
    statics: (usize, usize),
    end: usize,
}

/// The size of one value of the type whose tag is `t`, with identifiers of `n` bytes; 0 if `t`
/// is not a value type.
#[inline]
fn value_size(t: u8, n: usize) -> usize {
    BasicType::from_u8(t).map_or(0, |ty| ty.size(n as u32) as usize)
}

/// Walk the class dump at the start of `b`, with identifiers of `n` bytes: the one walk behind
/// both [`measure_class`] (cut or malformed dumps, reported where they go wrong) and
/// [`class_at`] (the fast path's).
#[inline(always)]
fn walk_class(b: &[u8], n: usize) -> std::result::Result<ClassWalk, ClassStop> {
    let need = |k: usize| {
        if b.len() < k {
            Err(ClassStop::Need(k))
        } else {
            Ok(())
        }
    };
    let size_at = |off: usize| match value_size(b[off], n) {
        0 => Err(ClassStop::BadType(off)),
        sz => Ok(sz),
    };
    // tag, id, u4 stack, super, loader, signers, domain, reserved x2, u4 instance size, u2 cp count
    let mut p = 1 + 7 * n + 8;
    need(p + 2)?;
    let constant_count = read_u16(&b[p..]);
    p += 2;
    for _ in 0..constant_count {
        need(p + 3)?;
        p += 3 + size_at(p + 2)?;
    }
    need(p + 2)?;
    let static_count = read_u16(&b[p..]);
    p += 2;
    let s0 = p;
    for _ in 0..static_count {
        need(p + n + 1)?;
        p += n + 1 + size_at(p + n)?;
    }
    let statics = (s0, p);
    need(p + 2)?;
    let field_count = read_u16(&b[p..]);
    p += 2;
    let end = p + field_count as usize * (n + 1);
    need(end)?;
    for off in (p + n..end).step_by(n + 1) {
        size_at(off)?;
    }
    Ok(ClassWalk {
        constant_count,
        static_count,
        field_count,
        statics,
        end,
    })
}

/// A class dump that lies whole at the start of `b`, and its length; `None` if it is cut by the
/// end of `b` or malformed ([`measure_class`] then says which, and where).
#[inline]
pub(super) fn class_at(b: &[u8], id_size: u32) -> Option<(ClassDump<'_>, usize)> {
    let n = id_size as usize;
    let w = walk_class(b, n).ok()?;
    let c = ClassDump {
        id: read_id(&b[1..], id_size),
        stack_serial: read_u32(&b[1 + n..]),
        super_id: read_id(&b[5 + n..], id_size),
        loader_id: read_id(&b[5 + 2 * n..], id_size),
        instance_size: read_u32(&b[5 + 7 * n..]),
        constant_count: w.constant_count,
        static_count: w.static_count,
        field_count: w.field_count,
        statics_raw: &b[w.statics.0..w.statics.1],
        fields_raw: &b[w.statics.1 + 2..w.end],
        id_size,
    };
    Some((c, w.end))
}
