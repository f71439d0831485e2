//! What the parser hands its [`Visitor`]: whole non-heap records ([`Record`]), class dumps
//! ([`ClassDump`]) and sub-record heads ([`Sub`]), each borrowing the input; and the check of a
//! known record's body length.
//!
//! Invariants: every accessor reads only within the borrowed bytes, which the parser measured
//! before handing them out; nothing here allocates.

use crate::{read_id, read_u32, tag, BasicType, Header};

/// A whole top-level record other than a heap dump segment.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    pub tag: u8,
    /// Microseconds since the header's timestamp.
    pub time: u32,
    pub body: &'a [u8],
    pub id_size: u32,
}

impl<'a> Record<'a> {
    /// A UTF8 record: (string id, bytes).
    pub fn utf8(&self) -> Option<(u64, &'a [u8])> {
        if self.tag != tag::UTF8 {
            return None;
        }
        let n = self.id_size as usize;
        Some((read_id(self.body, self.id_size), &self.body[n..]))
    }

    /// A LOAD_CLASS record: (class serial, class object id, stack trace serial, name string id).
    pub fn load_class(&self) -> Option<(u32, u64, u32, u64)> {
        if self.tag != tag::LOAD_CLASS {
            return None;
        }
        let n = self.id_size as usize;
        let b = self.body;
        Some((
            read_u32(b),
            read_id(&b[4..], self.id_size),
            read_u32(&b[4 + n..]),
            read_id(&b[8 + n..], self.id_size),
        ))
    }

    /// A FRAME (STACK FRAME) record: (frame id, method name string id, source file string id,
    /// class serial, line: > 0 a line, 0 none, -1 unknown, -2 compiled, -3 native).
    pub fn frame(&self) -> Option<(u64, u64, u64, u32, i32)> {
        let n = self.id_size as usize;
        let b = self.body;
        if self.tag != tag::FRAME || b.len() < 4 * n + 8 {
            return None;
        }
        Some((
            read_id(b, self.id_size),
            read_id(&b[n..], self.id_size),
            read_id(&b[3 * n..], self.id_size),
            read_u32(&b[4 * n..]),
            read_u32(&b[4 * n + 4..]) as i32,
        ))
    }

    /// A TRACE (STACK TRACE) record: (stack trace serial, thread serial, frame ids, innermost
    /// first).
    pub fn trace(&self) -> Option<(u32, u32, impl Iterator<Item = u64> + 'a)> {
        let b = self.body;
        if self.tag != tag::TRACE || b.len() < 12 {
            return None;
        }
        let id_size = self.id_size;
        let n = (read_u32(&b[8..]) as usize).min((b.len() - 12) / id_size as usize);
        let frames = b[12..12 + n * id_size as usize]
            .chunks_exact(id_size as usize)
            .map(move |c| read_id(c, id_size));
        Some((read_u32(b), read_u32(&b[4..]), frames))
    }
}

/// A class dump, with its variable parts left as slices to iterate.
#[derive(Clone, Copy, Debug)]
pub struct ClassDump<'a> {
    pub id: u64,
    pub stack_serial: u32,
    pub super_id: u64,
    pub loader_id: u64,
    /// Instance size in bytes as the VM reports it.
    pub instance_size: u32,
    pub constant_count: u16,
    pub static_count: u16,
    pub field_count: u16,
    /// Static fields: (name id u8 type, value) repeated `static_count` times.
    pub statics_raw: &'a [u8],
    /// Instance fields: (name id, u8 type) repeated `field_count` times.
    pub fields_raw: &'a [u8],
    pub id_size: u32,
}

impl<'a> ClassDump<'a> {
    /// Static fields: (name string id, type, value bytes).
    pub fn statics(&self) -> impl Iterator<Item = (u64, BasicType, &'a [u8])> + 'a {
        let n = self.id_size as usize;
        let id_size = self.id_size;
        let mut b = self.statics_raw;
        (0..self.static_count).filter_map(move |_| {
            let name = read_id(b, id_size);
            let ty = BasicType::from_u8(b[n])?;
            let sz = ty.size(id_size) as usize;
            let v = &b[n + 1..n + 1 + sz];
            b = &b[n + 1 + sz..];
            Some((name, ty, v))
        })
    }

    /// Instance fields declared by this class (not its superclasses): (name string id, type).
    pub fn fields(&self) -> impl Iterator<Item = (u64, BasicType)> + 'a {
        let n = self.id_size as usize;
        let id_size = self.id_size;
        self.fields_raw
            .chunks_exact(n + 1)
            .filter_map(move |c| Some((read_id(c, id_size), BasicType::from_u8(c[n])?)))
    }
}

/// The head of a heap dump sub-record.
#[derive(Clone, Copy, Debug)]
pub enum Sub<'a> {
    /// A GC root. `aux` holds what follows the id (thread serials, frame numbers, a JNI ref id).
    Root {
        tag: u8,
        id: u64,
        aux: &'a [u8],
    },
    Class(ClassDump<'a>),
    Instance {
        id: u64,
        stack_serial: u32,
        class_id: u64,
        /// Field values, superclass last, as the VM wrote them.
        data: &'a [u8],
    },
    /// Elements follow through [`Visitor::array_data`], then [`Visitor::array_end`].
    ObjectArray {
        id: u64,
        stack_serial: u32,
        len: u32,
        class_id: u64,
    },
    /// Elements follow through [`Visitor::array_data`] unless `nodata` (a 0xC3 record, whose
    /// contents were stripped); [`Visitor::array_end`] comes in both cases.
    PrimitiveArray {
        id: u64,
        stack_serial: u32,
        len: u32,
        ty: BasicType,
        nodata: bool,
    },
    /// Android: the objects that follow are in heap `heap_type` named by string `name_id`.
    HeapDumpInfo {
        heap_type: u32,
        name_id: u64,
    },
}

/// Receives what the parser finds. Every method has a default that does nothing. Returning an
/// error stops the parser; the error is reported at the offset of the unit being delivered.
#[allow(unused_variables)]
pub trait Visitor {
    /// The file header; `raw` is its bytes as read.
    fn header(&mut self, header: &Header, raw: &[u8]) -> std::result::Result<(), String> {
        Ok(())
    }
    /// A whole non-heap record; `raw` includes its 9-byte record header.
    fn record(
        &mut self,
        offset: u64,
        rec: &Record<'_>,
        raw: &[u8],
    ) -> std::result::Result<(), String> {
        Ok(())
    }
    /// The head of a HEAP_DUMP or HEAP_DUMP_SEGMENT record (9 bytes in `raw`).
    fn heap_dump_start(
        &mut self,
        offset: u64,
        tag: u8,
        length: u32,
        raw: &[u8],
    ) -> std::result::Result<(), String> {
        Ok(())
    }
    /// The head of a sub-record; `raw` is its bytes (without array elements).
    fn sub(&mut self, offset: u64, sub: &Sub<'_>, raw: &[u8]) -> std::result::Result<(), String> {
        Ok(())
    }
    /// Elements of the current array, cut only between elements.
    fn array_data(&mut self, data: &[u8]) -> std::result::Result<(), String> {
        Ok(())
    }
    /// The current array is complete.
    fn array_end(&mut self) -> std::result::Result<(), String> {
        Ok(())
    }
    /// The current heap dump segment is complete.
    fn heap_dump_end(&mut self) -> std::result::Result<(), String> {
        Ok(())
    }
}

/// Check the body length of a known non-heap record.
pub(super) fn check_record(r: &Record<'_>) -> std::result::Result<(), String> {
    let n = r.id_size as usize;
    let len = r.body.len();
    let want = match r.tag {
        tag::UTF8 => {
            if len < n {
                return Err(format!("UTF8 record of {len} bytes is shorter than its id"));
            }
            return Ok(());
        }
        tag::LOAD_CLASS => 8 + 2 * n,
        tag::UNLOAD_CLASS => 4,
        tag::FRAME => 4 * n + 8,
        tag::TRACE => {
            if len < 12 {
                return Err(format!("TRACE record of {len} bytes is shorter than 12"));
            }
            let frames = read_u32(&r.body[8..]) as usize;
            12 + frames * n
        }
        tag::START_THREAD => 8 + 4 * n,
        tag::END_THREAD => 4,
        tag::HEAP_SUMMARY => 24,
        tag::HEAP_DUMP_END => 0,
        // ALLOC_SITES, CPU_SAMPLES, CONTROL_SETTINGS: rare, variable; taken as they come.
        _ => return Ok(()),
    };
    if len != want {
        let name = tag::name(r.tag).unwrap_or("record");
        return Err(format!(
            "{name} record has a body of {len} bytes, expected {want}"
        ));
    }
    Ok(())
}
