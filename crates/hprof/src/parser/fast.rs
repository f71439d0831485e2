//! The parser's fast paths: the common records and sub-records that lie whole in the chunk being
//! fed, parsed in one tight loop each.
//!
//! Invariants: they tell the visitor exactly what the general path (`Parser::unit`) would, at the
//! same offsets; they stop, consuming nothing more, at the first unit that is cut, ends a segment,
//! or must be judged (malformed, unknown), and leave it to the general path, which reports it.

use super::records::{check_record, Record, Sub, Visitor};
use super::subs::{class_at, fixed_sub_len};
use super::{Parser, State};
use crate::{read_id, read_u32, sub, tag, BasicType, Error, Result};

/// How far ahead of the record it parses the fast path asks for the cache line it will soon
/// need: about a dozen records of a HotSpot dump, within the same 4 KiB page most of the time.
const PREFETCH_AHEAD: usize = 2048;

impl Parser {
    /// Parse the sub-records that lie whole in `data` (and inside the segment) in one tight loop,
    /// telling the visitor exactly what the general path would. Stops at the first record that
    /// is cut, ends the segment, or is malformed (the general path then reports it). Returns the
    /// bytes consumed.
    pub(super) fn fast_subs<V: Visitor + ?Sized>(
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
    pub(super) fn fast_records<V: Visitor + ?Sized>(
        &mut self,
        data: &[u8],
        v: &mut V,
    ) -> Result<usize> {
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
}
