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

    /// A root with only an id (ROOT_UNKNOWN, STICKY_CLASS, MONITOR_USED, Android's 0x89–0x8D,
    /// 0x90).
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

/// What an ART-style dump holds. See [`art_dump`].
#[derive(Clone, Debug)]
pub struct ArtSpec {
    /// Seeds the pseudo-random sizes and links, so a spec always gives the same bytes.
    pub seed: u64,
    /// Objects (instances and arrays) in the `image` heap.
    pub image_objects: u32,
    /// Objects in the `zygote` heap.
    pub zygote_objects: u32,
    /// Objects in the `app` heap.
    pub app_objects: u32,
    /// Mean length of a primitive array's contents, in bytes.
    pub mean_array_bytes: u32,
    /// Strings planted in the app heap as `java.lang.String` instances: a Latin-1 string's value is
    /// a compressed `byte[]`, any other string's a UTF-16 `char[]`, as ART 8+ writes them.
    pub planted: Vec<String>,
}

impl Default for ArtSpec {
    fn default() -> Self {
        ArtSpec {
            seed: 1,
            image_objects: 2_000,
            zygote_objects: 1_000,
            app_objects: 3_000,
            mean_array_bytes: 256,
            planted: Vec::new(),
        }
    }
}

/// Well-known ids in an [`art_dump`], for tests.
pub mod art_ids {
    pub const CLASS_OBJECT: u64 = 0x7000_0008;
    pub const CLASS_CLASS: u64 = 0x7000_0010;
    pub const CLASS_STRING: u64 = 0x7000_0018;
    pub const CLASS_REFERENCE: u64 = 0x7000_0020;
    pub const CLASS_WEAK_REFERENCE: u64 = 0x7000_0028;
    pub const CLASS_NODE: u64 = 0x7000_0030;
    pub const CLASS_BYTE_ARRAY: u64 = 0x7000_0038;
    pub const CLASS_CHAR_ARRAY: u64 = 0x7000_0040;
    pub const CLASS_INT_ARRAY: u64 = 0x7000_0048;
    pub const CLASS_OBJECT_ARRAY: u64 = 0x7000_0050;
    /// First object id of each heap.
    pub const IMAGE_BASE: u64 = 0x7010_0000;
    pub const ZYGOTE_BASE: u64 = 0x12c0_0000;
    pub const APP_BASE: u64 = 0x1400_0000;
}

/// A small deterministic generator (splitmix64), so dumps need no `rand` and never change.
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// ART's limits on a heap dump segment (`kMaxObjectsPerSegment`, `kMaxBytesPerSegment`).
const ART_SEGMENT_OBJECTS: u32 = 128;
const ART_SEGMENT_BYTES: usize = 4096;

/// An ART-style (Android 8+) heap dump, laid out as ART's `hprof.cc` writes one: a
/// `JAVA PROFILE 1.0.3` header with 4-byte ids; the string table and LOAD_CLASS records first; a
/// stack trace; then heap dump segments that start with the GC roots (ROOT_INTERNED_STRING 0x89,
/// STICKY_CLASS, THREAD_OBJECT, JAVA_FRAME, JNI_GLOBAL, FINALIZING 0x8A, DEBUGGER 0x8B,
/// REFERENCE_CLEANUP 0x8C, VM_INTERNAL 0x8D, JNI_MONITOR 0x8E, UNREACHABLE 0x90), followed by the
/// objects of the `image`, `zygote` and `app` heaps, each run introduced by a HEAP_DUMP_INFO
/// (0xFE) record. A `java.lang.String`'s characters are not inline: the instance has a `value`
/// field that points at a separate `byte[]` (compressed, Latin-1) or `char[]` (UTF-16) dumped right
/// after it, as ART does. As in ART, a new segment starts once the current one holds 128 objects
/// or 4 KiB, and a new segment resets the heap, so each one that holds objects opens with its
/// heap's HEAP_DUMP_INFO again.
pub fn art_dump(spec: &ArtSpec) -> Vec<u8> {
    let mut m = Mix(spec.seed);
    let mut w = Writer::new(Format::V103, 4, 1_700_000_000_000);
    art_preamble(&mut w);
    // Plan objects per heap, so that references can point anywhere.
    let plan = ArtPlan {
        counts: [
            spec.image_objects as u64,
            spec.zygote_objects as u64,
            spec.app_objects as u64,
        ],
    };
    art_roots(&mut w, &mut m, &plan);
    let heap_types = [b'I' as u32, b'Z' as u32, b'A' as u32];
    let heap_names = [30u64, 31, 32];
    let mut planted = spec.planted.iter();
    for h in 0..3 {
        if plan.counts[h] == 0 {
            continue;
        }
        w.heap_info(heap_types[h], heap_names[h]);
        art_heap_classes(&mut w, h, &plan);
        let mut i = 0u64;
        let mut in_segment = 0;
        while i < plan.counts[h] {
            let id = plan.obj_id(h, i);
            if in_segment >= ART_SEGMENT_OBJECTS
                || w.seg.is_some_and(|s| w.buf.len() - s >= ART_SEGMENT_BYTES)
            {
                w.end_segment();
                w.segment(super::tag::HEAP_DUMP_SEGMENT);
                w.heap_info(heap_types[h], heap_names[h]);
                in_segment = 0;
            }
            in_segment += 1;
            // A planted string takes two slots: the String and its value array.
            if h == 2 && i + 1 < plan.counts[h] && i >= 2 {
                if let Some(s) = planted.next() {
                    art_string(&mut w, id, plan.obj_id(h, i + 1), s);
                    i += 2;
                    continue;
                }
            }
            art_object(&mut w, &mut m, &plan, spec, id, i);
            i += 1;
        }
    }
    w.heap_dump_end();
    w.finish()
}

/// The ids of an [`art_dump`]'s objects: `counts[h]` objects in heap `h` (image, zygote, app),
/// 16 bytes apart from the heap's base.
struct ArtPlan {
    counts: [u64; 3],
}

impl ArtPlan {
    fn obj_id(&self, h: usize, i: u64) -> u64 {
        use art_ids::*;
        [IMAGE_BASE, ZYGOTE_BASE, APP_BASE][h] + i * 16
    }

    /// Any object of any heap, drawn from `m`; 0 when there are none.
    fn any_obj(&self, m: &mut Mix) -> u64 {
        let total: u64 = self.counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let mut k = m.below(total);
        for (h, &c) in self.counts.iter().enumerate() {
            if k < c {
                return self.obj_id(h, k);
            }
            k -= c;
        }
        0
    }
}

/// The classes of an [`art_dump`], with the string id of each one's name.
const ART_CLASSES: &[(u64, u64)] = &[
    (art_ids::CLASS_OBJECT, 1),
    (art_ids::CLASS_CLASS, 2),
    (art_ids::CLASS_STRING, 3),
    (art_ids::CLASS_REFERENCE, 4),
    (art_ids::CLASS_WEAK_REFERENCE, 5),
    (art_ids::CLASS_NODE, 6),
    (art_ids::CLASS_BYTE_ARRAY, 7),
    (art_ids::CLASS_CHAR_ARRAY, 8),
    (art_ids::CLASS_INT_ARRAY, 9),
    (art_ids::CLASS_OBJECT_ARRAY, 10),
];

/// What comes before an [`art_dump`]'s heap: the strings (1.. are names), the LOAD_CLASS
/// records, and one stack trace.
fn art_preamble(w: &mut Writer) {
    let names: &[(u64, &str)] = &[
        (1, "java.lang.Object"),
        (2, "java.lang.Class"),
        (3, "java.lang.String"),
        (4, "java.lang.ref.Reference"),
        (5, "java.lang.ref.WeakReference"),
        (6, "com.example.app.Node"),
        (7, "byte[]"),
        (8, "char[]"),
        (9, "int[]"),
        (10, "java.lang.Object[]"),
        (20, "count"),
        (21, "hash"),
        (22, "value"),
        (23, "referent"),
        (24, "next"),
        (25, "payload"),
        (26, "label"),
        (27, "id"),
        (28, "sInstances"),
        (30, "image"),
        (31, "zygote"),
        (32, "app"),
        (33, "main"),
        (34, "run"),
        (35, "()V"),
        (36, "Main.java"),
    ];
    for (id, s) in names {
        w.utf8(*id, s);
    }
    for (i, (cid, name)) in ART_CLASSES.iter().enumerate() {
        w.load_class(i as u32 + 1, *cid, *name);
    }
    w.record(super::tag::FRAME, |w| {
        w.id(0x1).id(34).id(35).id(36).u32(1).u32(42);
    });
    w.record(super::tag::TRACE, |w| {
        w.u32(1).u32(1).u32(1).id(0x1);
    });
}

/// The first heap dump segment of an [`art_dump`] and its GC roots: the main thread, its frame,
/// the classes, and 16 roots of the other kinds at objects drawn from `m`.
fn art_roots(w: &mut Writer, m: &mut Mix, plan: &ArtPlan) {
    let thread = plan.obj_id(2, 0);
    w.segment(super::tag::HEAP_DUMP_SEGMENT);
    w.root2(sub::ROOT_THREAD_OBJECT, thread, 1, 1);
    w.root2(
        sub::ROOT_JAVA_FRAME,
        plan.obj_id(2, 1 % plan.counts[2].max(1)),
        1,
        0,
    );
    for (cid, _) in ART_CLASSES {
        w.root(sub::ROOT_STICKY_CLASS, *cid);
    }
    for k in 0..16u64 {
        let target = plan.any_obj(m);
        match k % 8 {
            0 => w.root(sub::ROOT_INTERNED_STRING, target),
            1 => w.root(sub::ROOT_VM_INTERNAL, target),
            2 => w.root(sub::ROOT_FINALIZING, target),
            3 => w.root(sub::ROOT_DEBUGGER, target),
            4 => w.root(sub::ROOT_REFERENCE_CLEANUP, target),
            5 => w.root2(sub::ROOT_JNI_MONITOR, target, 1, 0),
            6 => w.root_jni_global(target, 0x5000 + k),
            _ => w.root(sub::ROOT_UNREACHABLE, target),
        };
    }
}

/// The class dumps at the start of heap `h`: the framework's in the boot image (0), the app's
/// own class, with a static that holds the first app object, in the app heap (2).
fn art_heap_classes(w: &mut Writer, h: usize, plan: &ArtPlan) {
    use art_ids::*;
    if h == 0 {
        let obj = 0u64;
        w.class_dump(CLASS_OBJECT, 0, 0, 8, &[], &[]);
        w.class_dump(CLASS_CLASS, CLASS_OBJECT, 0, 120, &[], &[]);
        w.class_dump(
            CLASS_STRING,
            CLASS_OBJECT,
            0,
            16,
            &[],
            &[
                (20, BasicType::Int),
                (21, BasicType::Int),
                (22, BasicType::Object),
            ],
        );
        w.class_dump(
            CLASS_REFERENCE,
            CLASS_OBJECT,
            0,
            24,
            &[],
            &[(23, BasicType::Object)],
        );
        w.class_dump(CLASS_WEAK_REFERENCE, CLASS_REFERENCE, 0, 24, &[], &[]);
        for c in [
            CLASS_BYTE_ARRAY,
            CLASS_CHAR_ARRAY,
            CLASS_INT_ARRAY,
            CLASS_OBJECT_ARRAY,
        ] {
            w.class_dump(c, CLASS_OBJECT, obj, 0, &[], &[]);
        }
    }
    if h == 2 {
        w.class_dump(
            CLASS_NODE,
            CLASS_OBJECT,
            0x1300_0000,
            20,
            &[(
                28,
                BasicType::Object,
                (plan.obj_id(2, 0) as u32).to_be_bytes().to_vec(),
            )],
            &[
                (24, BasicType::Object),
                (25, BasicType::Object),
                (26, BasicType::Object),
                (27, BasicType::Int),
            ],
        );
    }
}

/// A planted `java.lang.String` `id` holding `s`, and its value array `value` right after it:
/// a `byte[]` if `s` is Latin-1, else a `char[]` of UTF-16.
fn art_string(w: &mut Writer, id: u64, value: u64, s: &str) {
    let latin1 = s.chars().all(|c| (c as u32) < 256);
    let mut v = (s.chars().count() as u32 * 2 + u32::from(!latin1))
        .to_be_bytes()
        .to_vec();
    v.extend(0u32.to_be_bytes());
    v.extend((value as u32).to_be_bytes());
    w.instance(id, art_ids::CLASS_STRING, &v);
    if latin1 {
        let b: Vec<u8> = s.chars().map(|c| c as u8).collect();
        w.primitive_array(value, BasicType::Byte, b.len() as u32, &b);
    } else {
        let u: Vec<u16> = s.encode_utf16().collect();
        let b: Vec<u8> = u.iter().flat_map(|c| c.to_be_bytes()).collect();
        w.primitive_array(value, BasicType::Char, u.len() as u32, &b);
    }
}

/// The `i`-th object `id` of a heap, of a kind drawn from `m`.
fn art_object(w: &mut Writer, m: &mut Mix, plan: &ArtPlan, spec: &ArtSpec, id: u64, i: u64) {
    use art_ids::*;
    match m.below(10) {
        // Nodes: a linked structure with payload arrays.
        0..=3 => {
            let mut v = Vec::with_capacity(16);
            v.extend((plan.any_obj(m) as u32).to_be_bytes());
            v.extend((plan.any_obj(m) as u32).to_be_bytes());
            v.extend((plan.any_obj(m) as u32).to_be_bytes());
            v.extend((i as u32).to_be_bytes());
            w.instance(id, CLASS_NODE, &v);
        }
        // Strings with a separate value array would need two slots: plain byte[] here.
        4..=6 => {
            let n = m.below(2 * spec.mean_array_bytes as u64 + 1) as usize;
            let data: Vec<u8> = (0..n).map(|_| (m.next() & 0x7f) as u8).collect();
            w.primitive_array(id, BasicType::Byte, n as u32, &data);
        }
        7 => {
            let n = m.below(spec.mean_array_bytes as u64 / 2 + 1) as usize;
            let data: Vec<u8> = (0..n * 4).map(|_| m.next() as u8).collect();
            w.primitive_array(id, BasicType::Int, n as u32, &data);
        }
        8 => {
            let n = m.below(8) as usize;
            let elems: Vec<u64> = (0..n).map(|_| plan.any_obj(m)).collect();
            w.object_array(id, CLASS_OBJECT_ARRAY, &elems);
        }
        _ => {
            let mut v = (plan.any_obj(m) as u32).to_be_bytes().to_vec();
            v.truncate(4);
            w.instance(id, CLASS_WEAK_REFERENCE, &v);
        }
    }
}
