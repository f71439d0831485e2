//! Writing HPROF byte by byte, for tests and benches.
//!
//! [`Writer`] is the low-level layer: a header, records, and heap dump segments made of
//! sub-records. It checks nothing beyond what it must to compute lengths, so tests can also make
//! broken files with it.

use super::{sub, tag, BasicType, Format};

/// Builds a dump in memory.
pub struct Writer {
    pub buf: Vec<u8>,
    pub id_size: u32,
    /// Offset of the open heap dump segment's header.
    seg: Option<usize>,
}

impl Writer {
    pub fn new(format: Format, id_size: u32, timestamp_ms: u64) -> Writer {
        let mut buf = Vec::with_capacity(1 << 16);
        buf.extend_from_slice(format.magic().as_bytes());
        buf.push(0);
        buf.extend_from_slice(&id_size.to_be_bytes());
        buf.extend_from_slice(&timestamp_ms.to_be_bytes());
        Writer {
            buf,
            id_size,
            seg: None,
        }
    }

    pub fn id(&mut self, id: u64) -> &mut Self {
        if self.id_size == 4 {
            self.buf.extend_from_slice(&(id as u32).to_be_bytes());
        } else {
            self.buf.extend_from_slice(&id.to_be_bytes());
        }
        self
    }

    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }

    /// A top-level record; `body` writes its contents. Closes an open segment first.
    pub fn record(&mut self, t: u8, body: impl FnOnce(&mut Writer)) -> &mut Self {
        self.end_segment();
        self.buf.push(t);
        self.buf.extend_from_slice(&0u32.to_be_bytes());
        let len_at = self.buf.len();
        self.buf.extend_from_slice(&0u32.to_be_bytes());
        body(self);
        let len = (self.buf.len() - len_at - 4) as u32;
        self.buf[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
        self
    }

    pub fn utf8(&mut self, id: u64, text: &str) -> &mut Self {
        self.record(tag::UTF8, |w| {
            w.id(id).bytes(text.as_bytes());
        })
    }

    pub fn load_class(&mut self, serial: u32, class_id: u64, name_id: u64) -> &mut Self {
        self.record(tag::LOAD_CLASS, |w| {
            w.u32(serial).id(class_id).u32(0).id(name_id);
        })
    }

    /// An empty stack trace with the given serial.
    pub fn trace(&mut self, serial: u32) -> &mut Self {
        self.record(tag::TRACE, |w| {
            w.u32(serial).u32(0).u32(0);
        })
    }

    /// Open a heap dump segment (tag HEAP_DUMP_SEGMENT, or HEAP_DUMP for 1.0.1-style files) if
    /// none is open.
    pub fn segment(&mut self, t: u8) -> &mut Self {
        if self.seg.is_none() {
            self.seg = Some(self.buf.len());
            self.buf.push(t);
            self.buf.extend_from_slice(&[0; 8]);
        }
        self
    }

    fn in_segment(&mut self) -> &mut Self {
        self.segment(tag::HEAP_DUMP_SEGMENT)
    }

    /// Close the open segment, writing its length.
    pub fn end_segment(&mut self) -> &mut Self {
        if let Some(at) = self.seg.take() {
            let len = (self.buf.len() - at - 9) as u32;
            self.buf[at + 5..at + 9].copy_from_slice(&len.to_be_bytes());
        }
        self
    }

    /// A root with only an id (ROOT_UNKNOWN, STICKY_CLASS, MONITOR_USED, Android's 0x89–0x8D, 0x90).
    pub fn root(&mut self, t: u8, id: u64) -> &mut Self {
        self.in_segment().u8(t).id(id)
    }

    /// ROOT_THREAD_OBJECT / JNI_LOCAL / JAVA_FRAME / JNI_MONITOR: an id and two u32s.
    pub fn root2(&mut self, t: u8, id: u64, a: u32, b: u32) -> &mut Self {
        self.in_segment().u8(t).id(id).u32(a).u32(b)
    }

    pub fn root_jni_global(&mut self, id: u64, ref_id: u64) -> &mut Self {
        self.in_segment().u8(sub::ROOT_JNI_GLOBAL).id(id).id(ref_id)
    }

    pub fn heap_info(&mut self, heap_type: u32, name_id: u64) -> &mut Self {
        self.in_segment()
            .u8(sub::HEAP_DUMP_INFO)
            .u32(heap_type)
            .id(name_id)
    }

    /// A class dump. `statics` are (name id, type, value bytes); `fields` are (name id, type).
    pub fn class_dump(
        &mut self,
        id: u64,
        super_id: u64,
        loader_id: u64,
        instance_size: u32,
        statics: &[(u64, BasicType, Vec<u8>)],
        fields: &[(u64, BasicType)],
    ) -> &mut Self {
        self.in_segment()
            .u8(sub::CLASS_DUMP)
            .id(id)
            .u32(0)
            .id(super_id)
            .id(loader_id)
            .id(0)
            .id(0)
            .id(0)
            .id(0)
            .u32(instance_size)
            .u16(0)
            .u16(statics.len() as u16);
        for (name, ty, v) in statics {
            self.id(*name).u8(*ty as u8).bytes(v);
        }
        self.u16(fields.len() as u16);
        for (name, ty) in fields {
            self.id(*name).u8(*ty as u8);
        }
        self
    }

    pub fn instance(&mut self, id: u64, class_id: u64, values: &[u8]) -> &mut Self {
        self.in_segment()
            .u8(sub::INSTANCE_DUMP)
            .id(id)
            .u32(0)
            .id(class_id)
            .u32(values.len() as u32)
            .bytes(values)
    }

    pub fn object_array(&mut self, id: u64, class_id: u64, elems: &[u64]) -> &mut Self {
        self.in_segment()
            .u8(sub::OBJECT_ARRAY_DUMP)
            .id(id)
            .u32(0)
            .u32(elems.len() as u32)
            .id(class_id);
        for &e in elems {
            self.id(e);
        }
        self
    }

    /// A primitive array; `data` is its contents, big-endian, `len * size` bytes.
    pub fn primitive_array(&mut self, id: u64, ty: BasicType, len: u32, data: &[u8]) -> &mut Self {
        self.in_segment()
            .u8(sub::PRIMITIVE_ARRAY_DUMP)
            .id(id)
            .u32(0)
            .u32(len)
            .u8(ty as u8)
            .bytes(data)
    }

    pub fn primitive_array_nodata(&mut self, id: u64, ty: BasicType, len: u32) -> &mut Self {
        self.in_segment()
            .u8(sub::PRIMITIVE_ARRAY_NODATA_DUMP)
            .id(id)
            .u32(0)
            .u32(len)
            .u8(ty as u8)
    }

    /// Close any segment and write HEAP_DUMP_END.
    pub fn heap_dump_end(&mut self) -> &mut Self {
        self.record(tag::HEAP_DUMP_END, |_| {})
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.end_segment();
        self.buf
    }
}
