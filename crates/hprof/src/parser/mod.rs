//! The incremental (push) parser.
//!
//! Input is cut into *units*: the file header, a whole non-heap record, the 9-byte head of a heap
//! dump segment, and the head of each heap sub-record (for an instance dump, its field values too).
//! A unit that lies whole inside the chunk being fed is parsed in place; one that is cut by the end
//! of a chunk is gathered in `carry`, a buffer whose size is bounded by [`ParserLimits::max_head`].
//! The elements of object and primitive arrays are never gathered: they are handed to the visitor
//! as they arrive, cut only at element boundaries (a partial element waits in an 8-byte buffer).
//!
//! The parser is in four rooms: this driver (the state machine, `feed`, gathering cut units, the
//! general path of one unit, streaming array elements), [`records`] (what the visitor is handed:
//! records, class dumps, sub-record heads, and the [`Visitor`] trait), `subs` (measuring and
//! reading heap dump sub-record heads), and `fast` (the tight loops over whole records and
//! sub-records, which must tell the visitor exactly what the general path would).

mod fast;
#[cfg(test)]
mod record_tests;
mod records;
mod subs;
#[cfg(test)]
pub(crate) mod tests;

pub use records::{ClassDump, Record, Sub, Visitor};

use super::{read_id, read_u32, sub, tag, BasicType, Error, Format, Header, Result};
use super::{HEADER_LEN, MAGIC_LEN};
use records::check_record;
use subs::{class_at, measure_sub};

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
        match self.state {
            State::Header => self.unit_header(u, v),
            State::Record => self.unit_record(u, v),
            State::Sub { seg_end } => self.unit_sub(u, seg_end, v),
            State::Array { .. } => unreachable!(),
        }
    }

    /// The file header: its format and identifier size; records come next.
    fn unit_header<V: Visitor + ?Sized>(&mut self, u: &[u8], v: &mut V) -> Result<()> {
        let at = self.pos;
        let vis = |r: std::result::Result<(), String>| r.map_err(|e| Error::new(at, e));
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

    /// A whole non-heap record, or the 9-byte head of a heap dump segment (which opens it).
    fn unit_record<V: Visitor + ?Sized>(&mut self, u: &[u8], v: &mut V) -> Result<()> {
        let at = self.pos;
        let vis = |r: std::result::Result<(), String>| r.map_err(|e| Error::new(at, e));
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

    /// The head of a sub-record of the segment that ends at `seg_end`; an array's elements are
    /// streamed next.
    fn unit_sub<V: Visitor + ?Sized>(&mut self, u: &[u8], seg_end: u64, v: &mut V) -> Result<()> {
        let at = self.pos;
        let vis = |r: std::result::Result<(), String>| r.map_err(|e| Error::new(at, e));
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
