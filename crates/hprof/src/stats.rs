//! Counting what a dump holds, for `oomguard inspect`: records and sub-records by tag, heaps, and
//! bytes by category.

use super::parser::{Parser, Record, Sub, Visitor};
use super::{sub, tag, Header, Result};
use serde::Serialize;
use std::collections::BTreeMap;

/// Bytes by category.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Bytes {
    pub header: u64,
    /// UTF8 records.
    pub strings: u64,
    /// Other non-heap records (LOAD_CLASS, FRAME, TRACE, ...).
    pub other_records: u64,
    /// Heap dump segment record headers.
    pub segment_headers: u64,
    pub roots: u64,
    pub classes: u64,
    pub instances: u64,
    /// Object array records, elements included.
    pub object_arrays: u64,
    /// Primitive array record heads.
    pub primitive_array_heads: u64,
    /// Primitive array contents present in the file.
    pub primitive_array_contents: u64,
    /// Contents that 0xC3 records stand for but the file does not hold.
    pub primitive_array_contents_stripped: u64,
    /// HEAP_DUMP_INFO records.
    pub heap_info: u64,
}

/// Objects and bytes in one heap (Android's HEAP_DUMP_INFO; "default" before any).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HeapStats {
    pub objects: u64,
    pub bytes: u64,
}

/// What `inspect` prints.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub format: String,
    pub id_size: u32,
    pub timestamp_ms: u64,
    pub file_bytes: u64,
    /// Record count and bytes by tag name.
    pub records: BTreeMap<String, TagCount>,
    /// Sub-record count and bytes by tag name.
    pub sub_records: BTreeMap<String, TagCount>,
    pub heaps: BTreeMap<String, HeapStats>,
    pub bytes: Bytes,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TagCount {
    pub count: u64,
    pub bytes: u64,
}

struct Counter {
    header: Option<Header>,
    rec: [(u64, u64); 256],
    sub: [(u64, u64); 256],
    bytes: Bytes,
    /// Texts of strings that name heaps, by id (only short strings are kept).
    names: BTreeMap<u64, String>,
    heap_name: u64,
    heaps: BTreeMap<u64, HeapStats>,
    /// The current sub-record's index and its array bytes, added at array_end.
    cur_sub: u8,
    cur_array: u64,
}

impl Visitor for Counter {
    fn header(&mut self, h: &Header, raw: &[u8]) -> std::result::Result<(), String> {
        self.header = Some(*h);
        self.bytes.header = raw.len() as u64;
        Ok(())
    }
    fn record(&mut self, _at: u64, r: &Record<'_>, raw: &[u8]) -> std::result::Result<(), String> {
        let e = &mut self.rec[r.tag as usize];
        e.0 += 1;
        e.1 += raw.len() as u64;
        if let Some((id, text)) = r.utf8() {
            self.bytes.strings += raw.len() as u64;
            if text.len() <= 32 && matches!(text, b"app" | b"image" | b"zygote" | b"default") {
                self.names
                    .insert(id, String::from_utf8_lossy(text).into_owned());
            }
        } else {
            self.bytes.other_records += raw.len() as u64;
        }
        Ok(())
    }
    fn heap_dump_start(
        &mut self,
        _at: u64,
        t: u8,
        _l: u32,
        raw: &[u8],
    ) -> std::result::Result<(), String> {
        let e = &mut self.rec[t as usize];
        e.0 += 1;
        e.1 += raw.len() as u64;
        self.bytes.segment_headers += raw.len() as u64;
        Ok(())
    }
    fn sub(&mut self, _at: u64, s: &Sub<'_>, raw: &[u8]) -> std::result::Result<(), String> {
        let t = raw[0];
        self.cur_sub = t;
        self.cur_array = 0;
        let n = raw.len() as u64;
        let e = &mut self.sub[t as usize];
        e.0 += 1;
        e.1 += n;
        let b = &mut self.bytes;
        match *s {
            Sub::Root { .. } => b.roots += n,
            Sub::Class(_) => b.classes += n,
            Sub::Instance { .. } => b.instances += n,
            Sub::ObjectArray { .. } => b.object_arrays += n,
            Sub::PrimitiveArray {
                nodata, len, ty, ..
            } => {
                b.primitive_array_heads += n;
                if nodata {
                    let id = self.header.map_or(4, |h| h.id_size);
                    b.primitive_array_contents_stripped += len as u64 * ty.size(id) as u64;
                }
            }
            Sub::HeapDumpInfo { name_id, .. } => {
                b.heap_info += n;
                self.heap_name = name_id;
                // The info record itself is not an object.
                return Ok(());
            }
        }
        if !matches!(s, Sub::Root { .. }) {
            let h = self.heaps.entry(self.heap_name).or_default();
            h.objects += 1;
            h.bytes += n;
        }
        Ok(())
    }
    fn array_data(&mut self, data: &[u8]) -> std::result::Result<(), String> {
        self.cur_array += data.len() as u64;
        Ok(())
    }
    fn array_end(&mut self) -> std::result::Result<(), String> {
        let n = self.cur_array;
        self.sub[self.cur_sub as usize].1 += n;
        if self.cur_sub == sub::OBJECT_ARRAY_DUMP {
            self.bytes.object_arrays += n;
        } else {
            self.bytes.primitive_array_contents += n;
        }
        self.heaps.entry(self.heap_name).or_default().bytes += n;
        Ok(())
    }
}

/// Counts what a dump holds, fed in chunks.
pub struct Inspector {
    parser: Parser,
    counter: Box<Counter>,
}

impl Default for Inspector {
    fn default() -> Self {
        Inspector::new()
    }
}

impl Inspector {
    pub fn new() -> Inspector {
        Inspector {
            parser: Parser::new(),
            counter: Box::new(Counter {
                header: None,
                rec: [(0, 0); 256],
                sub: [(0, 0); 256],
                bytes: Bytes::default(),
                names: BTreeMap::new(),
                heap_name: u64::MAX,
                heaps: BTreeMap::new(),
                cur_sub: 0,
                cur_array: 0,
            }),
        }
    }

    pub fn feed(&mut self, data: &[u8]) -> Result<()> {
        self.parser.feed(data, &mut *self.counter)
    }

    pub fn finish(mut self) -> Result<Stats> {
        self.parser.finish()?;
        let c = &self.counter;
        let h = c.header.expect("a finished parse has a header");
        let mut st = Stats {
            format: h.format.magic().to_string(),
            id_size: h.id_size,
            timestamp_ms: h.timestamp_ms,
            file_bytes: self.parser.bytes_fed(),
            bytes: c.bytes.clone(),
            ..Stats::default()
        };
        for (t, &(count, bytes)) in c.rec.iter().enumerate() {
            if count > 0 {
                let name = tag::name(t as u8).unwrap_or("?").to_string();
                st.records.insert(name, TagCount { count, bytes });
            }
        }
        for (t, &(count, bytes)) in c.sub.iter().enumerate() {
            if count > 0 {
                let name = sub::name(t as u8).unwrap_or("?").to_string();
                st.sub_records.insert(name, TagCount { count, bytes });
            }
        }
        for (id, hs) in &c.heaps {
            let name = if *id == u64::MAX {
                "default".to_string()
            } else {
                c.names
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| format!("string#{id:x}"))
            };
            let e = st.heaps.entry(name).or_default();
            e.objects += hs.objects;
            e.bytes += hs.bytes;
        }
        Ok(st)
    }
}

#[cfg(test)]
mod tests;
