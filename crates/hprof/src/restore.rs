//! Restore: turn a stripped dump back into one that every HPROF tool opens.
//!
//! Each PRIMITIVE_ARRAY_NODATA (0xC3) record becomes a PRIMITIVE_ARRAY_DUMP (0x23) of the same
//! id, stack serial, length and type, with zero-filled contents, and each heap dump segment's
//! length is patched. The header is written as `JAVA PROFILE 1.0.2` and patched to 1.0.3 at the end
//! if the dump holds any record only Android defines (its roots 0x89–0x90, HEAP_DUMP_INFO), so a
//! JVM dump comes back as a plain JVM dump and an Android one as an Android one. A segment that
//! would outgrow 4 GiB once its arrays are filled is continued in a new HEAP_DUMP_SEGMENT.

use super::parser::{Parser, Record, Sub, Visitor};
use super::strip::{Out, Sink};
use super::{sub, tag, Error, Header, Result, VERSION_DIGIT_OFFSET};

/// Counts of what restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RestoreStats {
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub arrays_restored: u64,
    pub zero_bytes_written: u64,
    /// The output is 1.0.3 because the dump holds Android records.
    pub android: bool,
}

struct State<S: Sink> {
    out: Out<S>,
    seg_head: u64,
    in_segment: bool,
    id_size: u32,
    /// The most a segment's body may hold: [`SEGMENT_LIMIT`], lower in tests.
    seg_limit: u64,
    stats: RestoreStats,
}

/// The most bytes a heap dump segment's body can hold: its length is a u32.
const SEGMENT_LIMIT: u64 = u32::MAX as u64;

static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

impl<S: Sink> State<S> {
    fn close_segment(&mut self) -> std::result::Result<(), String> {
        let len = self.out.pos() - self.seg_head - 9;
        if len > self.seg_limit {
            // Only a single sub-record larger than a segment gets here: `room` starts a new
            // segment before any other would overflow.
            return Err(format!(
                "a heap dump segment would hold {len} bytes, more than the {} its length field can say",
                self.seg_limit
            ));
        }
        self.out
            .patch(self.seg_head + 5, &(len as u32).to_be_bytes())
    }

    /// Make room for `n` more bytes in the current segment.
    fn room(&mut self, n: u64) -> std::result::Result<(), String> {
        if self.out.pos() + n - self.seg_head - 9 > self.seg_limit {
            self.close_segment()?;
            self.seg_head = self.out.pos();
            let mut h = [0u8; 9];
            h[0] = tag::HEAP_DUMP_SEGMENT;
            self.out.write(&h)?;
        }
        Ok(())
    }
}

impl<S: Sink> Visitor for State<S> {
    fn header(&mut self, h: &Header, raw: &[u8]) -> std::result::Result<(), String> {
        self.id_size = h.id_size;
        let mut b = [0u8; super::HEADER_LEN];
        b.copy_from_slice(raw);
        b[VERSION_DIGIT_OFFSET] = b'2';
        self.out.write(&b)
    }

    fn record(&mut self, _at: u64, _r: &Record<'_>, raw: &[u8]) -> std::result::Result<(), String> {
        self.out.write(raw)
    }

    fn heap_dump_start(
        &mut self,
        _at: u64,
        _tag: u8,
        _len: u32,
        raw: &[u8],
    ) -> std::result::Result<(), String> {
        self.seg_head = self.out.pos();
        self.in_segment = true;
        self.out.write(raw)
    }

    fn heap_dump_end(&mut self) -> std::result::Result<(), String> {
        self.in_segment = false;
        self.close_segment()
    }

    fn sub(&mut self, _at: u64, s: &Sub<'_>, raw: &[u8]) -> std::result::Result<(), String> {
        match *s {
            Sub::PrimitiveArray {
                nodata: true,
                len,
                ty,
                ..
            } => {
                let mut bytes = len as u64 * ty.size(self.id_size) as u64;
                self.room(raw.len() as u64 + bytes)?;
                let mut h = [0u8; 18];
                h[..raw.len()].copy_from_slice(raw);
                h[0] = sub::PRIMITIVE_ARRAY_DUMP;
                self.out.write(&h[..raw.len()])?;
                self.stats.arrays_restored += 1;
                self.stats.zero_bytes_written += bytes;
                while bytes > 0 {
                    let k = bytes.min(ZEROS.len() as u64) as usize;
                    self.out.write(&ZEROS[..k])?;
                    bytes -= k as u64;
                }
                Ok(())
            }
            Sub::HeapDumpInfo { .. } => {
                self.stats.android = true;
                self.room(raw.len() as u64)?;
                self.out.write(raw)
            }
            Sub::Root { tag, .. } if tag >= 0x80 && tag != sub::ROOT_UNKNOWN => {
                self.stats.android = true;
                self.room(raw.len() as u64)?;
                self.out.write(raw)
            }
            Sub::ObjectArray { len, .. } => {
                self.room(raw.len() as u64 + len as u64 * self.id_size as u64)?;
                self.out.write(raw)
            }
            Sub::PrimitiveArray { len, ty, .. } => {
                self.room(raw.len() as u64 + len as u64 * ty.size(self.id_size) as u64)?;
                self.out.write(raw)
            }
            _ => {
                self.room(raw.len() as u64)?;
                self.out.write(raw)
            }
        }
    }

    fn array_data(&mut self, data: &[u8]) -> std::result::Result<(), String> {
        self.out.write(data)
    }
}

/// The streaming restorer: feed a stripped dump in chunks, then [`Restorer::finish`].
pub struct Restorer<S: Sink> {
    parser: Parser,
    state: State<S>,
}

impl<S: Sink> Restorer<S> {
    pub fn new(sink: S) -> Restorer<S> {
        Restorer {
            parser: Parser::new(),
            state: State {
                out: Out::new(sink, 256 << 10),
                seg_head: 0,
                in_segment: false,
                id_size: 4,
                seg_limit: SEGMENT_LIMIT,
                stats: RestoreStats::default(),
            },
        }
    }

    pub fn feed(&mut self, data: &[u8]) -> Result<()> {
        self.parser.feed(data, &mut self.state)
    }

    pub fn finish(mut self) -> Result<(S, RestoreStats)> {
        self.parser.finish()?;
        let end = self.parser.bytes_fed();
        let st = &mut self.state;
        debug_assert!(!st.in_segment);
        if st.stats.android {
            st.out
                .patch(VERSION_DIGIT_OFFSET as u64, b"3")
                .map_err(|e| Error::new(end, e))?;
        }
        st.out.flush().map_err(|e| Error::new(end, e))?;
        let mut stats = std::mem::take(&mut st.stats);
        stats.input_bytes = end;
        stats.output_bytes = st.out.pos();
        Ok((self.state.out.sink, stats))
    }
}

/// Restore a whole in-memory dump.
pub fn restore(input: &[u8]) -> Result<(Vec<u8>, RestoreStats)> {
    let mut r = Restorer::new(Vec::with_capacity(input.len() * 2));
    r.feed(input)?;
    r.finish()
}

#[cfg(test)]
mod tests;
