//! The incremental (push) parser.
//!
//! Input is cut into *units*: the file header, a whole non-heap record, the 9-byte head of a heap
//! dump segment, and the head of each heap sub-record (for an instance dump, its field values too).
//! A unit that lies whole inside the chunk being fed is parsed in place; one that is cut by the end
//! of a chunk is gathered in `carry`, a buffer whose size is bounded by [`ParserLimits::max_head`].
//! The elements of object and primitive arrays are never gathered: they are handed to the visitor
//! as they arrive, cut only at element boundaries (a partial element waits in an 8-byte buffer).

use super::{read_id, read_u16, read_u32, sub, tag, BasicType, Error, Format, Header, Result};
use super::{HEADER_LEN, MAGIC_LEN};

/// How far ahead of the record it parses the fast path asks for the cache line it will soon
/// need: about a dozen records of a HotSpot dump, within the same 4 KiB page most of the time.
const PREFETCH_AHEAD: usize = 2048;

/// Bounds on the parser's memory.
#[derive(Clone, Copy, Debug)]
pub struct ParserLimits {
    /// The largest unit the parser will gather across chunks: a class dump, an instance's field
    /// values, or a whole non-heap record. Larger ones are an error naming their offset.
    pub max_head: usize,
    /// Bytes preallocated for gathering (grown on demand up to `max_head`).
    pub initial_head: usize,
}

impl Default for ParserLimits {
    fn default() -> Self {
        ParserLimits {
            max_head: 64 << 20,
            initial_head: 64 << 10,
        }
    }
}

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Header,
    Record,
    /// Inside a heap dump segment that ends at `seg_end`.
    Sub {
        seg_end: u64,
    },
    /// Streaming `remaining` bytes of array elements of `elem` bytes each.
    Array {
        seg_end: u64,
        remaining: u64,
        elem: u8,
    },
}

enum Measure {
    /// The unit is this many bytes long.
    Len(usize),
    /// At least this many bytes are needed to know more.
    Need(usize),
}

/// The incremental parser. See the module documentation.
pub struct Parser {
    state: State,
    id_size: u32,
    header: Option<Header>,
    /// Absolute offset of the next byte not yet consumed (the start of `carry` if it holds any).
    pos: u64,
    carry: Vec<u8>,
    /// A partial array element.
    elem_buf: [u8; 8],
    elem_len: u8,
    limits: ParserLimits,
    failed: Option<Error>,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

impl Parser {
    pub fn new() -> Parser {
        Parser::with_limits(ParserLimits::default())
    }

    pub fn with_limits(limits: ParserLimits) -> Parser {
        Parser {
            state: State::Header,
            id_size: 0,
            header: None,
            pos: 0,
            carry: Vec::with_capacity(limits.initial_head.min(limits.max_head)),
            elem_buf: [0; 8],
            elem_len: 0,
            limits,
            failed: None,
        }
    }

    /// The header, once read.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    /// Bytes fed so far.
    pub fn bytes_fed(&self) -> u64 {
        self.pos + self.carry.len() as u64 + self.elem_len as u64
    }

    /// Feed the next chunk. After an error the parser stays failed and returns the same error.
    pub fn feed<V: Visitor + ?Sized>(&mut self, data: &[u8], v: &mut V) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.feed_inner(data, v);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    /// The input is complete: fails if it ended inside a record, or was empty.
    pub fn finish(&mut self) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let end = self.bytes_fed();
        let r = match self.state {
            State::Header if end == 0 => Err(Error::new(0, "empty file: not an HPROF heap dump")),
            State::Header => Err(Error::new(
                end,
                format!("truncated: the file header needs at least {HEADER_LEN} bytes, the file has {end}"),
            )),
            State::Record if self.carry.is_empty() => Ok(()),
            State::Record => Err(Error::new(
                end,
                format!(
                    "truncated: the record that starts at byte {} is cut off after {} bytes",
                    self.pos,
                    self.carry.len()
                ),
            )),
            State::Sub { seg_end } | State::Array { seg_end, .. } => Err(Error::new(
                end,
                format!(
                    "truncated: the heap dump segment should run to byte {seg_end}, the input ends {} bytes short",
                    seg_end.saturating_sub(end)
                ),
            )),
        };
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn feed_inner<V: Visitor + ?Sized>(&mut self, mut data: &[u8], v: &mut V) -> Result<()> {
        while !data.is_empty() {
            if let State::Array {
                seg_end,
                remaining,
                elem,
            } = self.state
            {
                data = self.stream_array(data, seg_end, remaining, elem, v)?;
                continue;
            }
            if self.carry.is_empty() {
                // Fastest paths: the common records and sub-records, whole in `data`.
                let k = match self.state {
                    State::Sub { seg_end } => self.fast_subs(data, seg_end, v)?,
                    State::Record => self.fast_records(data, v)?,
                    _ => 0,
                };
                if k > 0 {
                    data = &data[k..];
                    continue;
                }
                // Fast path: parse units in place while they lie whole in `data`.
                match self.measure(data)? {
                    Measure::Len(n) if n <= data.len() => {
                        let (unit, rest) = data.split_at(n);
                        self.unit(unit, v)?;
                        self.pos += n as u64;
                        data = rest;
                    }
                    Measure::Len(n) | Measure::Need(n) => {
                        self.check_head(n)?;
                        self.carry.extend_from_slice(data);
                        return Ok(());
                    }
                }
            } else {
                // Gather the cut unit, a step at a time, without taking more than it needs.
                loop {
                    let m = self.measure(&self.carry)?;
                    let n = match m {
                        Measure::Len(n) | Measure::Need(n) => n,
                    };
                    self.check_head(n)?;
                    if self.carry.len() >= n {
                        if let Measure::Len(n) = m {
                            debug_assert_eq!(n, self.carry.len());
                            let unit = std::mem::take(&mut self.carry);
                            let r = self.unit(&unit, v);
                            self.carry = unit;
                            self.carry.clear();
                            r?;
                            self.pos += n as u64;
                            break;
                        }
                        unreachable!("measure asked for bytes it already has");
                    }
                    let take = (n - self.carry.len()).min(data.len());
                    self.carry.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    if self.carry.len() < n {
                        // Judge what has come so far, so bad input fails as soon as it would
                        // have fed whole.
                        self.measure(&self.carry)?;
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    fn check_head(&self, n: usize) -> Result<()> {
        if n > self.limits.max_head {
            return Err(Error::new(
                self.pos,
                format!(
                    "a record head of at least {n} bytes exceeds the parser's limit of {} bytes",
                    self.limits.max_head
                ),
            ));
        }
        Ok(())
    }

    /// How long the unit that starts at `b[0]` is, or how many bytes are needed to tell.
    fn measure(&self, b: &[u8]) -> Result<Measure> {
        match self.state {
            State::Header => {
                if b.len() < HEADER_LEN {
                    // Reject garbage early, before waiting for more.
                    if !b
                        .iter()
                        .zip(b"JAVA PROFILE 1.0.".iter())
                        .all(|(a, c)| a == c)
                    {
                        return Err(Error::new(0, "not an HPROF heap dump: the file does not start with \"JAVA PROFILE 1.0.\""));
                    }
                    return Ok(Measure::Need(HEADER_LEN));
                }
                Ok(Measure::Len(HEADER_LEN))
            }
            State::Record => {
                if b.len() < 9 {
                    return Ok(Measure::Need(9));
                }
                let t = b[0];
                let len = read_u32(&b[5..]) as usize;
                match t {
                    tag::HEAP_DUMP | tag::HEAP_DUMP_SEGMENT => Ok(Measure::Len(9)),
                    _ if tag::name(t).is_some() => Ok(Measure::Len(9 + len)),
                    _ => Err(Error::new(
                        self.pos,
                        format!("unknown record tag 0x{t:02X}"),
                    )),
                }
            }
            State::Sub { seg_end } => {
                // Only the segment's own bytes count, however much input follows it.
                let inside = (seg_end - self.pos).min(b.len() as u64) as usize;
                let b = &b[..inside];
                let m = measure_sub(b, self.id_size, self.pos)?;
                let n = match m {
                    Measure::Len(n) | Measure::Need(n) => n,
                };
                if self.pos + n as u64 > seg_end {
                    let what = sub::name(b[0]).unwrap_or("sub-record");
                    return Err(Error::new(
                        self.pos,
                        format!(
                            "{what} of at least {n} bytes runs past the end of its heap dump segment at byte {seg_end}"
                        ),
                    ));
                }
                Ok(m)
            }
            State::Array { .. } => unreachable!("arrays are streamed, not measured"),
        }
    }

    /// Parse one whole unit and tell the visitor.
    fn unit<V: Visitor + ?Sized>(&mut self, u: &[u8], v: &mut V) -> Result<()> {
        let at = self.pos;
        let vis = |r: std::result::Result<(), String>| r.map_err(|e| Error::new(at, e));
        match self.state {
            State::Header => {
                let format = match &u[..MAGIC_LEN] {
                    b"JAVA PROFILE 1.0.1" => Format::V101,
                    b"JAVA PROFILE 1.0.2" => Format::V102,
                    b"JAVA PROFILE 1.0.3" => Format::V103,
                    _ => {
                        return Err(Error::new(
                            0,
                            "not an HPROF heap dump: unknown format (expected JAVA PROFILE 1.0.1, 1.0.2 or 1.0.3)",
                        ))
                    }
                };
                if u[MAGIC_LEN] != 0 {
                    return Err(Error::new(
                        MAGIC_LEN as u64,
                        "the format string is not NUL-terminated",
                    ));
                }
                let id_size = read_u32(&u[MAGIC_LEN + 1..]);
                if id_size != 4 && id_size != 8 {
                    return Err(Error::new(
                        MAGIC_LEN as u64 + 1,
                        format!("identifier size {id_size} is not supported (only 4 and 8)"),
                    ));
                }
                let ts = u64::from_be_bytes(u[MAGIC_LEN + 5..HEADER_LEN].try_into().unwrap());
                let h = Header {
                    format,
                    id_size,
                    timestamp_ms: ts,
                };
                self.id_size = id_size;
                self.header = Some(h);
                self.state = State::Record;
                vis(v.header(&h, u))
            }
            State::Record => {
                let t = u[0];
                let time = read_u32(&u[1..]);
                let len = read_u32(&u[5..]);
                if t == tag::HEAP_DUMP || t == tag::HEAP_DUMP_SEGMENT {
                    vis(v.heap_dump_start(at, t, len, u))?;
                    if len == 0 {
                        vis(v.heap_dump_end())
                    } else {
                        self.state = State::Sub {
                            seg_end: at + 9 + len as u64,
                        };
                        Ok(())
                    }
                } else {
                    let rec = Record {
                        tag: t,
                        time,
                        body: &u[9..],
                        id_size: self.id_size,
                    };
                    check_record(&rec).map_err(|e| Error::new(at, e))?;
                    vis(v.record(at, &rec, u))
                }
            }
            State::Sub { seg_end } => {
                let n = self.id_size as usize;
                let idsz = self.id_size;
                let t = u[0];
                let id = || read_id(&u[1..], idsz);
                let s = match t {
                    sub::CLASS_DUMP => match class_at(u, idsz) {
                        Some((c, _)) => Sub::Class(c),
                        // measure_class accepted it: cannot happen.
                        None => {
                            return Err(Error::new(
                                at,
                                "internal: a measured class dump did not parse",
                            ))
                        }
                    },
                    sub::INSTANCE_DUMP => Sub::Instance {
                        id: id(),
                        stack_serial: read_u32(&u[1 + n..]),
                        class_id: read_id(&u[5 + n..], idsz),
                        data: &u[9 + 2 * n..],
                    },
                    sub::OBJECT_ARRAY_DUMP => Sub::ObjectArray {
                        id: id(),
                        stack_serial: read_u32(&u[1 + n..]),
                        len: read_u32(&u[5 + n..]),
                        class_id: read_id(&u[9 + n..], idsz),
                    },
                    sub::PRIMITIVE_ARRAY_DUMP | sub::PRIMITIVE_ARRAY_NODATA_DUMP => {
                        Sub::PrimitiveArray {
                            id: id(),
                            stack_serial: read_u32(&u[1 + n..]),
                            len: read_u32(&u[5 + n..]),
                            // measure_sub checked the type
                            ty: BasicType::from_u8(u[9 + n]).unwrap_or(BasicType::Byte),
                            nodata: t == sub::PRIMITIVE_ARRAY_NODATA_DUMP,
                        }
                    }
                    sub::HEAP_DUMP_INFO => Sub::HeapDumpInfo {
                        heap_type: read_u32(&u[1..]),
                        name_id: read_id(&u[5..], idsz),
                    },
                    _ => Sub::Root {
                        tag: t,
                        id: id(),
                        aux: &u[1 + n..],
                    },
                };
                let end = at + u.len() as u64;
                let (bytes, elem) = match s {
                    Sub::ObjectArray { len, .. } => (len as u64 * idsz as u64, idsz as u8),
                    Sub::PrimitiveArray {
                        len,
                        ty,
                        nodata: false,
                        ..
                    } => (len as u64 * ty.size(idsz) as u64, ty.size(idsz) as u8),
                    Sub::PrimitiveArray { nodata: true, .. } => (0, 1),
                    _ => {
                        vis(v.sub(at, &s, u))?;
                        return self.after_sub(end, seg_end, v);
                    }
                };
                if end + bytes > seg_end {
                    return Err(Error::new(
                        at,
                        format!(
                            "{} with {bytes} bytes of elements runs past the end of its heap dump segment at byte {seg_end}",
                            sub::name(t).unwrap_or("array")
                        ),
                    ));
                }
                vis(v.sub(at, &s, u))?;
                if bytes == 0 {
                    vis(v.array_end())?;
                    self.after_sub(end, seg_end, v)
                } else {
                    self.state = State::Array {
                        seg_end,
                        remaining: bytes,
                        elem,
                    };
                    Ok(())
                }
            }
            State::Array { .. } => unreachable!(),
        }
    }

    /// Parse the sub-records that lie whole in `data` (and inside the segment) in one tight loop,
    /// telling the visitor exactly what the general path would. Stops at the first record that
    /// is cut, ends the segment, or is malformed (the general path then reports it). Returns the
    /// bytes consumed.
    fn fast_subs<V: Visitor + ?Sized>(
        &mut self,
        data: &[u8],
        seg_end: u64,
        v: &mut V,
    ) -> Result<usize> {
        let n = self.id_size as usize;
        let idsz = self.id_size;
        let limit = (seg_end - self.pos).min(data.len() as u64) as usize;
        let d = &data[..limit];
        let base = self.pos;
        let mut p = 0usize;
        let fail = |at: u64| move |e: String| Error::new(at, e);
        while p < d.len() {
            let b = &d[p..];
            let at = base + p as u64;
            // Ahead in the whole chunk, not only this segment: ART's segments are a few KiB, so
            // the next one's records are most of what lies ahead.
            sys::mapped::prefetch(data, p + PREFETCH_AHEAD);
            match b[0] {
                sub::INSTANCE_DUMP => {
                    let h = 9 + 2 * n;
                    if b.len() < h {
                        break;
                    }
                    let len = h + read_u32(&b[h - 4..]) as usize;
                    if b.len() < len {
                        break;
                    }
                    let s = Sub::Instance {
                        id: read_id(&b[1..], idsz),
                        stack_serial: read_u32(&b[1 + n..]),
                        class_id: read_id(&b[5 + n..], idsz),
                        data: &b[h..len],
                    };
                    v.sub(at, &s, &b[..len]).map_err(fail(at))?;
                    p += len;
                }
                sub::CLASS_DUMP => {
                    let Some((c, len)) = class_at(b, idsz) else {
                        break;
                    };
                    v.sub(at, &Sub::Class(c), &b[..len]).map_err(fail(at))?;
                    p += len;
                }
                t @ (sub::PRIMITIVE_ARRAY_DUMP
                | sub::PRIMITIVE_ARRAY_NODATA_DUMP
                | sub::OBJECT_ARRAY_DUMP) => {
                    let h = if t == sub::OBJECT_ARRAY_DUMP {
                        9 + 2 * n
                    } else {
                        10 + n
                    };
                    if b.len() < h {
                        break;
                    }
                    let count = read_u32(&b[5 + n..]);
                    let (s, elem) = if t == sub::OBJECT_ARRAY_DUMP {
                        let s = Sub::ObjectArray {
                            id: read_id(&b[1..], idsz),
                            stack_serial: read_u32(&b[1 + n..]),
                            len: count,
                            class_id: read_id(&b[9 + n..], idsz),
                        };
                        (s, n)
                    } else {
                        let ty = match BasicType::from_u8(b[h - 1]) {
                            Some(BasicType::Object) | None => break,
                            Some(ty) => ty,
                        };
                        // A stripped array (0xC3) has no elements.
                        let nodata = t == sub::PRIMITIVE_ARRAY_NODATA_DUMP;
                        let s = Sub::PrimitiveArray {
                            id: read_id(&b[1..], idsz),
                            stack_serial: read_u32(&b[1 + n..]),
                            len: count,
                            ty,
                            nodata,
                        };
                        (s, if nodata { 0 } else { ty.size(idsz) as usize })
                    };
                    let end = h as u64 + count as u64 * elem as u64;
                    if (b.len() as u64) < end {
                        break;
                    }
                    let end = end as usize;
                    v.sub(at, &s, &b[..h]).map_err(fail(at))?;
                    if end > h {
                        v.array_data(&b[h..end]).map_err(fail(at + h as u64))?;
                    }
                    v.array_end().map_err(fail(at))?;
                    p += end;
                }
                t => {
                    let Some(len) = fixed_sub_len(t, n) else {
                        break;
                    };
                    let Some(raw) = b.get(..len) else {
                        break;
                    };
                    let s = if t == sub::HEAP_DUMP_INFO {
                        Sub::HeapDumpInfo {
                            heap_type: read_u32(&raw[1..]),
                            name_id: read_id(&raw[5..], idsz),
                        }
                    } else {
                        Sub::Root {
                            tag: t,
                            id: read_id(&raw[1..], idsz),
                            aux: &raw[1 + n..],
                        }
                    };
                    v.sub(at, &s, raw).map_err(fail(at))?;
                    p += len;
                }
            }
        }
        self.pos += p as u64;
        if p > 0 && self.pos == seg_end {
            self.state = State::Record;
            v.heap_dump_end().map_err(|e| Error::new(seg_end, e))?;
        }
        Ok(p)
    }

    /// Parse top-level records other than heap dump segments that lie whole in `data` in one
    /// tight loop, telling the visitor exactly what the general path would. Stops at a segment,
    /// a cut record, or anything the general path must judge (an unknown tag, a bad length).
    /// Returns the bytes consumed.
    fn fast_records<V: Visitor + ?Sized>(&mut self, data: &[u8], v: &mut V) -> Result<usize> {
        let base = self.pos;
        let mut p = 0usize;
        while let Some(h) = data.get(p..p + 9) {
            let t = h[0];
            if t == tag::HEAP_DUMP || t == tag::HEAP_DUMP_SEGMENT || tag::name(t).is_none() {
                break;
            }
            let len = 9 + read_u32(&h[5..]) as usize;
            let Some(raw) = data.get(p..p + len) else {
                break;
            };
            let rec = Record {
                tag: t,
                time: read_u32(&h[1..]),
                body: &raw[9..],
                id_size: self.id_size,
            };
            // Most records are strings, whose only rule is to hold their id: judged here, without
            // a call that may build an error message.
            let ok = if t == tag::UTF8 {
                rec.body.len() >= self.id_size as usize
            } else {
                check_record(&rec).is_ok()
            };
            if !ok {
                break;
            }
            let at = base + p as u64;
            v.record(at, &rec, raw).map_err(|e| Error::new(at, e))?;
            p += len;
        }
        self.pos += p as u64;
        Ok(p)
    }

    /// After a sub-record that ends at `end`: close the segment if it ends there too.
    fn after_sub<V: Visitor + ?Sized>(&mut self, end: u64, seg_end: u64, v: &mut V) -> Result<()> {
        if end == seg_end {
            self.state = State::Record;
            v.heap_dump_end().map_err(|e| Error::new(end, e))
        } else {
            self.state = State::Sub { seg_end };
            Ok(())
        }
    }

    /// Hand array elements to the visitor; returns what is left of `data`.
    fn stream_array<'d, V: Visitor + ?Sized>(
        &mut self,
        data: &'d [u8],
        seg_end: u64,
        mut remaining: u64,
        elem: u8,
        v: &mut V,
    ) -> Result<&'d [u8]> {
        let at = self.pos;
        let vis = |r: std::result::Result<(), String>| r.map_err(|e| Error::new(at, e));
        let take = (remaining.min(data.len() as u64)) as usize;
        let (mut mine, rest) = data.split_at(take);
        remaining -= take as u64;
        let e = elem as usize;
        if self.elem_len > 0 {
            let k = (e - self.elem_len as usize).min(mine.len());
            let l = self.elem_len as usize;
            self.elem_buf[l..l + k].copy_from_slice(&mine[..k]);
            self.elem_len += k as u8;
            mine = &mine[k..];
            if self.elem_len as usize == e {
                self.elem_len = 0;
                let b = self.elem_buf;
                vis(v.array_data(&b[..e]))?;
                self.pos += e as u64;
            }
        }
        let whole = mine.len() / e * e;
        if whole > 0 {
            vis(v.array_data(&mine[..whole]))?;
            self.pos += whole as u64;
        }
        let part = &mine[whole..];
        if !part.is_empty() {
            let l = self.elem_len as usize;
            self.elem_buf[l..l + part.len()].copy_from_slice(part);
            self.elem_len += part.len() as u8;
        }
        if remaining == 0 {
            debug_assert_eq!(self.elem_len, 0);
            vis(v.array_end())?;
            self.after_sub(self.pos, seg_end, v)?;
        } else {
            self.state = State::Array {
                seg_end,
                remaining,
                elem,
            };
        }
        Ok(rest)
    }
}

/// Check the body length of a known non-heap record.
fn check_record(r: &Record<'_>) -> std::result::Result<(), String> {
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

/// Measure a sub-record head starting at `b[0]`; `at` is its offset, for errors.
fn measure_sub(b: &[u8], id_size: u32, at: u64) -> Result<Measure> {
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
fn fixed_sub_len(t: u8, n: usize) -> Option<usize> {
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
fn class_at(b: &[u8], id_size: u32) -> Option<(ClassDump<'_>, usize)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::Writer;

    /// Records what the parser reports, as text.
    #[derive(Default)]
    struct Log(Vec<String>);
    impl Visitor for Log {
        fn header(&mut self, h: &Header, _raw: &[u8]) -> std::result::Result<(), String> {
            self.0.push(format!("header {} {}", h.format, h.id_size));
            Ok(())
        }
        fn record(
            &mut self,
            at: u64,
            r: &Record<'_>,
            _raw: &[u8],
        ) -> std::result::Result<(), String> {
            self.0
                .push(format!("record@{at} {:#x} {}", r.tag, r.body.len()));
            Ok(())
        }
        fn heap_dump_start(
            &mut self,
            at: u64,
            t: u8,
            l: u32,
            _raw: &[u8],
        ) -> std::result::Result<(), String> {
            self.0.push(format!("segment@{at} {t:#x} {l}"));
            Ok(())
        }
        fn sub(&mut self, at: u64, s: &Sub<'_>, raw: &[u8]) -> std::result::Result<(), String> {
            // Everything the visitor is told, so that the fast and general paths must agree.
            let class = match s {
                Sub::Class(c) => format!(
                    " statics {:?} fields {:?}",
                    c.statics().collect::<Vec<_>>(),
                    c.fields().collect::<Vec<_>>()
                ),
                _ => String::new(),
            };
            self.0.push(format!("sub@{at} {s:?}{class} raw {raw:?}"));
            Ok(())
        }
        fn array_data(&mut self, d: &[u8]) -> std::result::Result<(), String> {
            self.0.push(format!("data {}", d.len()));
            Ok(())
        }
        fn array_end(&mut self) -> std::result::Result<(), String> {
            self.0.push("end".into());
            Ok(())
        }
        fn heap_dump_end(&mut self) -> std::result::Result<(), String> {
            self.0.push("segment end".into());
            Ok(())
        }
    }

    fn sample(id_size: u32) -> Vec<u8> {
        let mut w = Writer::new(Format::V102, id_size, 7);
        w.utf8(1, "a.B").load_class(1, 0x100, 1);
        w.class_dump(
            0x100,
            0,
            0,
            8,
            &[
                (2, BasicType::Long, vec![0; 8]),
                (3, BasicType::Object, vec![0; id_size as usize]),
            ],
            &[(4, BasicType::Int), (5, BasicType::Object)],
        );
        w.instance(0x200, 0x100, &[1; 12]);
        w.primitive_array(0x300, BasicType::Char, 3, &[0, 65, 0, 66, 0, 67]);
        w.primitive_array(0x310, BasicType::Int, 0, &[]);
        w.object_array(0x400, 0x100, &[0x200, 0x300]);
        w.primitive_array_nodata(0x320, BasicType::Long, 5);
        w.heap_info(3, 1);
        w.root(crate::sub::ROOT_STICKY_CLASS, 0x100);
        w.heap_dump_end();
        w.finish()
    }

    fn parse_chunked(b: &[u8], step: usize) -> (Log, Result<()>) {
        let mut log = Log::default();
        let mut p = Parser::new();
        for c in b.chunks(step) {
            if let Err(e) = p.feed(c, &mut log) {
                return (log, Err(e));
            }
        }
        let r = p.finish();
        (log, r)
    }

    #[test]
    fn reports_the_same_events_whatever_the_chunking_except_array_pieces() {
        for id in [4, 8] {
            let b = sample(id);
            let (whole, r) = parse_chunked(&b, b.len());
            r.unwrap();
            let text = whole.0.join("\n");
            assert!(text.contains("Class(ClassDump { id: 256"), "{text}");
            assert!(text.contains("fields [(4, Int), (5, Object)]"), "{text}");
            assert!(text.contains("Instance { id: 512"), "{text}");
            assert!(text.contains("data 6"), "{text}");
            assert!(text.contains("len: 5, ty: Long, nodata: true"), "{text}");
            assert!(
                text.contains("HeapDumpInfo { heap_type: 3, name_id: 1 }"),
                "{text}"
            );
            for step in [1, 2, 3, 5, 7, 13] {
                let (log, r) = parse_chunked(&b, step);
                r.unwrap();
                // Array contents may come in element-aligned pieces; everything else is identical.
                let squash = |l: &Log| {
                    l.0.iter()
                        .filter(|s| !s.starts_with("data"))
                        .cloned()
                        .collect::<Vec<_>>()
                };
                assert_eq!(squash(&log), squash(&whole), "id {id} step {step}");
                for d in log.0.iter().filter(|s| s.starts_with("data ")) {
                    let n: usize = d[5..].parse().unwrap();
                    assert!(
                        n % 2 == 0 || n % id as usize == 0,
                        "piece of {n} bytes is not aligned"
                    );
                }
            }
        }
    }

    #[test]
    fn a_record_head_over_the_limit_is_an_error_not_an_allocation() {
        let mut w = Writer::new(Format::V102, 4, 0);
        w.instance(1, 2, &vec![0; 4096]);
        let b = w.finish();
        let mut p = Parser::with_limits(ParserLimits {
            max_head: 1024,
            initial_head: 256,
        });
        // Fed in pieces, the instance would have to be gathered: refused.
        let mut log = Log::default();
        let r = b.chunks(100).try_for_each(|c| p.feed(c, &mut log));
        let e = r.unwrap_err();
        assert_eq!(e.offset, 40);
        assert!(e.what.contains("exceeds the parser's limit of 1024"), "{e}");
        // The parser stays failed.
        assert_eq!(p.feed(&[0], &mut log).unwrap_err(), e);
        assert_eq!(p.finish().unwrap_err(), e);
    }

    #[test]
    fn big_arrays_stream_through_a_small_buffer() {
        let mut w = Writer::new(Format::V102, 8, 0);
        let data = vec![7u8; 8 << 20];
        w.primitive_array(1, BasicType::Long, 1 << 20, &data);
        let b = w.finish();
        let mut p = Parser::with_limits(ParserLimits {
            max_head: 64,
            initial_head: 64,
        });
        let mut log = Log::default();
        for c in b.chunks(1000) {
            p.feed(c, &mut log).unwrap();
        }
        p.finish().unwrap();
        let total: usize = log
            .0
            .iter()
            .filter_map(|s| s.strip_prefix("data "))
            .map(|n| n.parse::<usize>().unwrap())
            .sum();
        assert_eq!(total, 8 << 20);
        assert!(p.carry.capacity() <= 64);
    }

    #[test]
    fn header_errors_name_the_problem() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "byte 0: empty file"),
            (b"JAVA PROFILE 1.0.", "truncated: the file header"),
            (b"GIF89a", "not an HPROF"),
            (
                b"JAVA PROFILE 1.0.9\0\0\0\0\x04\0\0\0\0\0\0\0\0",
                "unknown format",
            ),
            (
                b"JAVA PROFILE 1.0.2\0\0\0\0\x06\0\0\0\0\0\0\0\0",
                "byte 19: identifier size 6",
            ),
        ];
        for (b, want) in cases {
            let (_, r) = parse_chunked(b, b.len().max(1));
            let e = r.unwrap_err();
            assert!(e.to_string().contains(want), "{e} should contain {want}");
        }
    }

    #[test]
    fn a_bad_primitive_type_is_reported_at_its_byte() {
        let mut w = Writer::new(Format::V102, 4, 0);
        w.primitive_array(1, BasicType::Byte, 1, &[0]);
        let mut b = w.finish();
        let type_at = 31 + 9 + 1 + 4 + 4 + 4;
        b[type_at] = 3;
        let (_, r) = parse_chunked(&b, b.len());
        let e = r.unwrap_err();
        assert_eq!(e.offset, type_at as u64);
        assert!(e.what.contains("invalid element type 3"));
    }

    /// A class dump whole in the chunk takes the fast path, one cut by the chunk the general
    /// path: both must report a bad value type at its byte, and a class dump running past its
    /// segment at the class dump.
    #[test]
    fn a_bad_class_dump_is_reported_alike_whole_and_bytewise() {
        for id_size in [4u32, 8] {
            let n = id_size as usize;
            let good = sample(id_size);
            // The class dump follows the header, the UTF8 and LOAD_CLASS records and a segment head.
            let utf8 = 9 + n + 3;
            let class_at = HEADER_LEN + utf8 + 9 + 8 + 2 * n + 9;
            let statics = class_at + 1 + 7 * n + 8 + 2 + 2;
            let first_static_type = statics + n;
            let second_static_type = first_static_type + 1 + 8 + n;
            let fields = second_static_type + 1 + n + 2;
            let second_field_type = fields + (n + 1) + n;
            for at in [first_static_type, second_static_type, second_field_type] {
                let mut b = good.clone();
                b[at] = 12;
                let whole = parse_chunked(&b, b.len());
                let bytewise = parse_chunked(&b, 1);
                let e = whole.1.clone().unwrap_err();
                assert_eq!(e.offset, at as u64, "id size {id_size}: {e}");
                assert!(e.what.contains("invalid value type 12"), "{e}");
                assert_eq!(whole.1, bytewise.1);
                assert_eq!(whole.0 .0, bytewise.0 .0);
            }
            // The segment ends inside the class dump.
            let seg_len_at = class_at - 9 + 5;
            let mut b = good.clone();
            let short = (class_at - (seg_len_at + 4) + 20) as u32;
            b[seg_len_at..seg_len_at + 4].copy_from_slice(&short.to_be_bytes());
            let whole = parse_chunked(&b, b.len());
            let e = whole.1.clone().unwrap_err();
            assert_eq!(e.offset, class_at as u64, "{e}");
            assert!(e.what.contains("runs past the end"), "{e}");
            assert_eq!(whole.1, parse_chunked(&b, 1).1);
        }
    }
}
#[cfg(test)]
mod fuzz_regressions {
    use super::*;

    struct Nop;
    impl Visitor for Nop {}

    /// Inputs the fuzzer found; each must give the same result fed whole and byte by byte.
    #[test]
    fn fuzz_found_inputs_parse_the_same_whole_and_bytewise() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if !p
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("fuzz-")
            {
                continue;
            }
            let d = std::fs::read(&p).unwrap();
            let input = &d[1..];
            let mut a = Parser::new();
            let ra = a.feed(input, &mut Nop).and_then(|_| a.finish());
            for step in [1, 2, 3, 5, 8, 13, 64, (d[0] as usize >> 2) + 1] {
                let mut b = Parser::new();
                let rb = input
                    .chunks(step)
                    .try_for_each(|c| b.feed(c, &mut Nop))
                    .and_then(|_| b.finish());
                assert_eq!(
                    ra.as_ref().map_err(|e| e.offset),
                    rb.as_ref().map_err(|e| e.offset),
                    "{} step {step}: {ra:?} vs {rb:?}",
                    p.display()
                );
            }
        }
    }
}
