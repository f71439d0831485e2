//! The parser's reading of each field: every record and sub-record kind, with distinct values in
//! every field (serials, superclass, loader, constant pool, each root's extra words), read alike
//! whole (the fast paths) and in pieces (the general path); each known record's exact length;
//! where a cut file and a failing visitor are reported.

use super::tests::feed_in_pieces;
use super::*;
use crate::writer::Writer;

/// Everything the visitor can learn, through the accessors a user calls, as text. Array
/// elements are gathered and shown whole at the array's end, so the chunking does not show.
#[derive(Default)]
struct Fields {
    lines: Vec<String>,
    elems: Vec<u8>,
    /// Array pieces handed over that held no bytes.
    empty_pieces: usize,
}

impl Visitor for Fields {
    fn header(&mut self, h: &Header, raw: &[u8]) -> std::result::Result<(), String> {
        let l = format!(
            "header {} {} {} ({} bytes)",
            h.format,
            h.id_size,
            h.timestamp_ms,
            raw.len()
        );
        self.lines.push(l);
        Ok(())
    }
    fn record(&mut self, at: u64, r: &Record<'_>, raw: &[u8]) -> std::result::Result<(), String> {
        let what = if let Some((id, text)) = r.utf8() {
            format!("utf8 {id:#x} {:?}", String::from_utf8_lossy(text))
        } else if let Some(c) = r.load_class() {
            format!("load_class {c:x?}")
        } else if let Some(f) = r.frame() {
            format!("frame {f:x?}")
        } else if let Some((serial, thread, frames)) = r.trace() {
            format!("trace {serial} {thread} {:x?}", frames.collect::<Vec<_>>())
        } else {
            format!("body {:?}", r.body)
        };
        let l = format!(
            "record@{at} {:#x} t{} {what} ({} bytes)",
            r.tag,
            r.time,
            raw.len()
        );
        self.lines.push(l);
        Ok(())
    }
    fn heap_dump_start(
        &mut self,
        at: u64,
        t: u8,
        len: u32,
        raw: &[u8],
    ) -> std::result::Result<(), String> {
        let l = format!("segment@{at} {t:#x} {len} ({} bytes)", raw.len());
        self.lines.push(l);
        Ok(())
    }
    fn sub(&mut self, at: u64, s: &Sub<'_>, raw: &[u8]) -> std::result::Result<(), String> {
        let l = match s {
            Sub::Class(c) => format!(
                "sub@{at} class {:#x} serial {} super {:#x} loader {:#x} size {} counts {} {} {} \
                 statics {:x?} fields {:x?} ({} bytes)",
                c.id,
                c.stack_serial,
                c.super_id,
                c.loader_id,
                c.instance_size,
                c.constant_count,
                c.static_count,
                c.field_count,
                c.statics().collect::<Vec<_>>(),
                c.fields().collect::<Vec<_>>(),
                raw.len()
            ),
            _ => format!("sub@{at} {s:x?} ({} bytes)", raw.len()),
        };
        self.lines.push(l);
        Ok(())
    }
    fn array_data(&mut self, d: &[u8]) -> std::result::Result<(), String> {
        self.empty_pieces += d.is_empty() as usize;
        self.elems.extend_from_slice(d);
        Ok(())
    }
    fn array_end(&mut self) -> std::result::Result<(), String> {
        let l = format!("elements {:x?}", std::mem::take(&mut self.elems));
        self.lines.push(l);
        Ok(())
    }
    fn heap_dump_end(&mut self) -> std::result::Result<(), String> {
        self.lines.push("segment end".into());
        Ok(())
    }
}

/// Fed in pieces of `step` bytes (the whole file if `step` is its length), then finished.
fn fields(b: &[u8], step: usize) -> (Fields, Result<()>) {
    let mut v = Fields::default();
    let r = feed_in_pieces(&mut Parser::new(), b, step, &mut v);
    (v, r)
}

/// An id of `n` bytes whose high bytes are set too (so that a read at the wrong width or place
/// shows), ending in `k`.
fn oid(n: u32, k: u64) -> u64 {
    match n {
        4 => 0x5100_0000 | k,
        _ => 0x5152_5354_0000_0000 | k,
    }
}

/// A dump with every record and sub-record kind the parser knows, every field distinct and
/// none zero where a value can be: format `f`, identifiers of `n` bytes, a heap dump of tag
/// `seg` (HEAP_DUMP_SEGMENT, or 1.0.1's HEAP_DUMP), and no HEAP_DUMP_END after it when
/// `open_end` (the file ends with the segment).
fn rich(f: Format, n: u32, seg: u8, open_end: bool) -> Vec<u8> {
    let id = |k| oid(n, k);
    let mut w = Writer::new(f, n, 0x0102_0304_0506);
    w.utf8(id(0x11), "com.example.Thing");
    w.record(tag::LOAD_CLASS, |w| {
        w.u32(7).id(id(0x100)).u32(9).id(id(0x11));
    });
    w.record(tag::FRAME, |w| {
        w.id(id(0x21)).id(id(0x22)).id(id(0x23)).id(id(0x24));
        w.u32(7).u32((-2i32) as u32);
    });
    w.record(tag::TRACE, |w| {
        w.u32(5).u32(6).u32(2).id(id(0x21)).id(id(0x31));
    });
    w.record(tag::UNLOAD_CLASS, |w| {
        w.u32(8);
    });
    w.record(tag::START_THREAD, |w| {
        w.u32(6)
            .id(id(0x40))
            .u32(5)
            .id(id(0x41))
            .id(id(0x42))
            .id(id(0x43));
    });
    w.record(tag::END_THREAD, |w| {
        w.u32(6);
    });
    w.record(tag::HEAP_SUMMARY, |w| {
        w.u32(1).u32(2).u64(3).u64(4);
    });
    // Variable records, taken as they come.
    w.record(tag::CONTROL_SETTINGS, |w| {
        w.u32(3).u16(4);
    });
    w.segment(seg);
    w.u8(sub::ROOT_UNKNOWN).id(id(0x50));
    w.u8(sub::ROOT_JNI_GLOBAL).id(id(0x51)).id(id(0x52));
    w.u8(sub::ROOT_JNI_LOCAL).id(id(0x53)).u32(11).u32(12);
    w.u8(sub::ROOT_JAVA_FRAME).id(id(0x54)).u32(13).u32(14);
    w.u8(sub::ROOT_NATIVE_STACK).id(id(0x55)).u32(15);
    w.u8(sub::ROOT_STICKY_CLASS).id(id(0x100));
    w.u8(sub::ROOT_THREAD_BLOCK).id(id(0x56)).u32(16);
    w.u8(sub::ROOT_MONITOR_USED).id(id(0x57));
    w.u8(sub::ROOT_THREAD_OBJECT).id(id(0x58)).u32(17).u32(18);
    for (k, t) in [
        sub::ROOT_INTERNED_STRING,
        sub::ROOT_FINALIZING,
        sub::ROOT_DEBUGGER,
        sub::ROOT_REFERENCE_CLEANUP,
        sub::ROOT_VM_INTERNAL,
        sub::ROOT_UNREACHABLE,
    ]
    .into_iter()
    .enumerate()
    {
        w.u8(t).id(id(0x60 + k as u64));
    }
    w.u8(sub::ROOT_JNI_MONITOR).id(id(0x59)).u32(19).u32(20);
    w.u8(sub::HEAP_DUMP_INFO).u32(3).id(id(0x12));
    // The class dump, with a constant pool of an int and an object.
    w.u8(sub::CLASS_DUMP)
        .id(id(0x100))
        .u32(3)
        .id(id(0x101))
        .id(id(0x102));
    w.id(id(0x103)).id(id(0x104)).id(id(0x105)).id(id(0x106));
    w.u32(24).u16(2);
    w.u16(1).u8(BasicType::Int as u8).u32(0x0a0b_0c0d);
    w.u16(2).u8(BasicType::Object as u8).id(id(0x107));
    w.u16(2);
    w.id(id(0x13))
        .u8(BasicType::Long as u8)
        .u64(0x0102_0304_0506_0708);
    w.id(id(0x14)).u8(BasicType::Object as u8).id(id(0x108));
    w.u16(2);
    w.id(id(0x15)).u8(BasicType::Int as u8);
    w.id(id(0x16)).u8(BasicType::Object as u8);
    // Instances of 4 + n, 0 and 1 bytes of fields.
    w.u8(sub::INSTANCE_DUMP).id(id(0x200)).u32(4).id(id(0x100));
    w.u32(4 + n).u32(0x0a0b_0c0d).id(id(0x201));
    w.u8(sub::INSTANCE_DUMP)
        .id(id(0x202))
        .u32(5)
        .id(id(0x100))
        .u32(0);
    w.u8(sub::INSTANCE_DUMP)
        .id(id(0x203))
        .u32(6)
        .id(id(0x100))
        .u32(1)
        .u8(0x0a);
    // An object array, a byte array full of a valid type tag (so a misplaced type read finds
    // one), another byte array, an empty int array, and a stripped long array.
    w.u8(sub::OBJECT_ARRAY_DUMP)
        .id(id(0x300))
        .u32(7)
        .u32(2)
        .id(id(0x101));
    w.id(id(0x200)).id(id(0x202));
    w.u8(sub::PRIMITIVE_ARRAY_DUMP).id(id(0x301)).u32(8).u32(96);
    w.u8(BasicType::Byte as u8)
        .bytes(&[BasicType::Int as u8; 96]);
    // (And enough bytes after it for a misread count of ints to fit in the segment.)
    w.u8(sub::PRIMITIVE_ARRAY_DUMP)
        .id(id(0x304))
        .u32(11)
        .u32(FILLER as u32);
    w.u8(BasicType::Byte as u8).bytes(&[0x33; FILLER]);
    w.u8(sub::PRIMITIVE_ARRAY_DUMP).id(id(0x302)).u32(9).u32(0);
    w.u8(BasicType::Int as u8);
    w.u8(sub::PRIMITIVE_ARRAY_NODATA_DUMP)
        .id(id(0x303))
        .u32(10)
        .u32(5);
    w.u8(BasicType::Long as u8);
    w.end_segment();
    if !open_end {
        w.heap_dump_end();
    }
    w.finish()
}

/// [`rich_lines`]' first part: the header, the records, and the segment's head; and where
/// the sub-records start.
fn rich_record_lines(b: &[u8], f: Format, n: u32, seg: u8) -> (Vec<String>, usize) {
    let id = |k| oid(n, k);
    let mut at = HEADER_LEN;
    let mut out = vec![format!(
        "header {f} {n} {} ({HEADER_LEN} bytes)",
        0x0102_0304_0506u64
    )];
    let rec = |out: &mut Vec<String>, at: &mut usize, t: u8, what: String| {
        let len = 9 + read_u32(&b[*at + 5..]) as usize;
        out.push(format!("record@{at} {t:#x} t0 {what} ({len} bytes)"));
        *at += len;
    };
    rec(
        &mut out,
        &mut at,
        tag::UTF8,
        format!("utf8 {:#x} \"com.example.Thing\"", id(0x11)),
    );
    let load = (7u32, id(0x100), 9u32, id(0x11));
    rec(
        &mut out,
        &mut at,
        tag::LOAD_CLASS,
        format!("load_class {load:x?}"),
    );
    let frame = (id(0x21), id(0x22), id(0x24), 7u32, -2i32);
    rec(&mut out, &mut at, tag::FRAME, format!("frame {frame:x?}"));
    let frames = [id(0x21), id(0x31)];
    rec(
        &mut out,
        &mut at,
        tag::TRACE,
        format!("trace 5 6 {frames:x?}"),
    );
    for t in [
        tag::UNLOAD_CLASS,
        tag::START_THREAD,
        tag::END_THREAD,
        tag::HEAP_SUMMARY,
        tag::CONTROL_SETTINGS,
    ] {
        let len = read_u32(&b[at + 5..]) as usize;
        let body = format!("body {:?}", &b[at + 9..at + 9 + len]);
        rec(&mut out, &mut at, t, body);
    }
    let seg_len = read_u32(&b[at + 5..]);
    out.push(format!("segment@{at} {seg:#x} {seg_len} (9 bytes)"));
    at += 9;
    (out, at)
}

/// What [`rich`] holds, as [`Fields`] shows it: the values written, found at their offsets.
fn rich_lines(f: Format, n: u32, seg: u8, open_end: bool) -> Vec<String> {
    let id = |k| oid(n, k);
    let ns = n as usize;
    let b = rich(f, n, seg, open_end);
    let (mut out, mut at) = rich_record_lines(&b, f, n, seg);
    let subs = |out: &mut Vec<String>, at: &mut usize, s: Sub<'_>, len: usize| {
        out.push(format!("sub@{at} {s:x?} ({len} bytes)"));
        *at += len;
    };
    let ids = |ks: &[u64]| ks.iter().flat_map(|&k| be(id(k), ns)).collect::<Vec<u8>>();
    let two = |a: u32, c: u32| [a.to_be_bytes(), c.to_be_bytes()].concat();
    let roots: Vec<(u8, u64, Vec<u8>)> = vec![
        (sub::ROOT_UNKNOWN, 0x50, vec![]),
        (sub::ROOT_JNI_GLOBAL, 0x51, ids(&[0x52])),
        (sub::ROOT_JNI_LOCAL, 0x53, two(11, 12)),
        (sub::ROOT_JAVA_FRAME, 0x54, two(13, 14)),
        (sub::ROOT_NATIVE_STACK, 0x55, 15u32.to_be_bytes().to_vec()),
        (sub::ROOT_STICKY_CLASS, 0x100, vec![]),
        (sub::ROOT_THREAD_BLOCK, 0x56, 16u32.to_be_bytes().to_vec()),
        (sub::ROOT_MONITOR_USED, 0x57, vec![]),
        (sub::ROOT_THREAD_OBJECT, 0x58, two(17, 18)),
        (sub::ROOT_INTERNED_STRING, 0x60, vec![]),
        (sub::ROOT_FINALIZING, 0x61, vec![]),
        (sub::ROOT_DEBUGGER, 0x62, vec![]),
        (sub::ROOT_REFERENCE_CLEANUP, 0x63, vec![]),
        (sub::ROOT_VM_INTERNAL, 0x64, vec![]),
        (sub::ROOT_UNREACHABLE, 0x65, vec![]),
        (sub::ROOT_JNI_MONITOR, 0x59, two(19, 20)),
    ];
    for (t, k, aux) in &roots {
        let s = Sub::Root {
            tag: *t,
            id: id(*k),
            aux,
        };
        subs(&mut out, &mut at, s, 1 + ns + aux.len());
    }
    let info = Sub::HeapDumpInfo {
        heap_type: 3,
        name_id: id(0x12),
    };
    subs(&mut out, &mut at, info, 5 + ns);
    // Tag, seven ids, serial and size; the constant pool (a count, then an index and a type
    // before each value: an int and an id); the statics (a count, then a name and a type before
    // each value: a long and an id); the fields (a count, then a name and a type each).
    let head = 1 + 7 * ns + 4 + 4;
    let pool = 2 + (3 + 4) + (3 + ns);
    let statics_len = 2 + (ns + 1 + 8) + (ns + 1 + ns);
    let class_len = head + pool + statics_len + 2 + 2 * (ns + 1);
    let statics = [
        (
            id(0x13),
            BasicType::Long,
            0x0102_0304_0506_0708u64.to_be_bytes().to_vec(),
        ),
        (id(0x14), BasicType::Object, be(id(0x108), ns)),
    ];
    let fields = [(id(0x15), BasicType::Int), (id(0x16), BasicType::Object)];
    out.push(format!(
        "sub@{at} class {:#x} serial 3 super {:#x} loader {:#x} size 24 counts 2 2 2 \
         statics {statics:x?} fields {fields:x?} ({class_len} bytes)",
        id(0x100),
        id(0x101),
        id(0x102)
    ));
    at += class_len;
    let inst0 = [0x0a0b_0c0du32.to_be_bytes().to_vec(), be(id(0x201), ns)].concat();
    let empty: &[u8] = &[];
    for (k, serial, data) in [
        (0x200, 4, &inst0[..]),
        (0x202, 5, empty),
        (0x203, 6, &[0x0a][..]),
    ] {
        let s = Sub::Instance {
            id: id(k),
            stack_serial: serial,
            class_id: id(0x100),
            data,
        };
        subs(&mut out, &mut at, s, 9 + 2 * ns + data.len());
    }
    let arr = Sub::ObjectArray {
        id: id(0x300),
        stack_serial: 7,
        len: 2,
        class_id: id(0x101),
    };
    subs(&mut out, &mut at, arr, 9 + 2 * ns);
    out.push(format!("elements {:x?}", ids(&[0x200, 0x202])));
    at += 2 * ns;
    let prim = |k, serial, len, ty, nodata| Sub::PrimitiveArray {
        id: id(k),
        stack_serial: serial,
        len,
        ty,
        nodata,
    };
    subs(
        &mut out,
        &mut at,
        prim(0x301, 8, 96, BasicType::Byte, false),
        10 + ns,
    );
    out.push(format!("elements {:x?}", vec![BasicType::Int as u8; 96]));
    at += 96;
    let filler = prim(0x304, 11, FILLER as u32, BasicType::Byte, false);
    subs(&mut out, &mut at, filler, 10 + ns);
    out.push(format!("elements {:x?}", vec![0x33u8; FILLER]));
    at += FILLER;
    for s in [
        prim(0x302, 9, 0, BasicType::Int, false),
        prim(0x303, 10, 5, BasicType::Long, true),
    ] {
        subs(&mut out, &mut at, s, 10 + ns);
        out.push("elements []".into());
    }
    out.push("segment end".into());
    if !open_end {
        out.push(format!(
            "record@{at} {:#x} t0 body [] (9 bytes)",
            tag::HEAP_DUMP_END
        ));
        at += 9;
    }
    assert_eq!(at, b.len(), "the expected lines cover the whole file");
    out
}

/// The bytes of [`rich`]'s last byte array.
const FILLER: usize = 512;

/// Where the elements of [`rich`]'s object array start, in a dump of `len` bytes with ids of
/// `n` bytes and a HEAP_DUMP_END: before the second element, the three arrays after it and the
/// end record.
fn rich_elements_at(len: usize, n: usize) -> usize {
    len - 9 - 4 * (10 + n) - 96 - FILLER - 2 * n
}

/// `v`'s `n` low bytes, big-endian.
fn be(v: u64, n: usize) -> Vec<u8> {
    v.to_be_bytes()[8 - n..].to_vec()
}

#[test]
fn every_field_of_every_kind_is_read_at_its_place_whole_and_in_pieces() {
    for f in [Format::V101, Format::V102, Format::V103] {
        for n in [4u32, 8] {
            for seg in [tag::HEAP_DUMP_SEGMENT, tag::HEAP_DUMP] {
                for open_end in [false, true] {
                    let b = rich(f, n, seg, open_end);
                    let want = rich_lines(f, n, seg, open_end);
                    for step in [b.len(), 1, 2, 3, 7, 64] {
                        let (v, r) = fields(&b, step);
                        let case =
                            format!("{f} id {n} segment {seg:#x} open {open_end} step {step}");
                        r.unwrap_or_else(|e| panic!("{case}: {e}"));
                        assert_eq!(v.lines, want, "{case}");
                        assert_eq!(v.empty_pieces, 0, "{case}: an empty array piece");
                    }
                }
            }
        }
    }
}

#[test]
fn the_header_is_kept_and_bytes_fed_counts_a_cut_element() {
    let b = rich(Format::V103, 8, tag::HEAP_DUMP_SEGMENT, false);
    let mut p = Parser::new();
    let mut v = Fields::default();
    assert!(p.header().is_none());
    p.feed(&b[..HEADER_LEN], &mut v).unwrap();
    let h = p.header().copied().expect("the header, once read");
    assert_eq!(
        (h.format, h.id_size, h.timestamp_ms),
        (Format::V103, 8, 0x0102_0304_0506)
    );
    // Stop three bytes into the object array's second element: the parser holds them.
    let cut = rich_elements_at(b.len(), 8) + 8 + 3;
    p.feed(&b[HEADER_LEN..cut], &mut v).unwrap();
    assert_eq!(p.bytes_fed(), cut as u64);
    let e = p.finish().unwrap_err();
    assert_eq!(e.offset, cut as u64, "{e}");
    assert!(e.what.contains("truncated: the heap dump segment"), "{e}");
}

#[test]
fn a_file_cut_inside_a_record_is_truncated_where_it_ends() {
    let b = rich(Format::V102, 4, tag::HEAP_DUMP_SEGMENT, false);
    // Into the LOAD_CLASS record, which follows the UTF8 one.
    let load_at = HEADER_LEN + 9 + 4 + "com.example.Thing".len();
    for cut in [load_at + 1, load_at + 9, load_at + 12] {
        for step in [cut, 1] {
            let (_, r) = fields(&b[..cut], step);
            let e = r.unwrap_err();
            assert_eq!(e.offset, cut as u64, "cut {cut} step {step}: {e}");
            let want = format!(
                "the record that starts at byte {load_at} is cut off after {} bytes",
                cut - load_at
            );
            assert!(e.what.contains(&want), "cut {cut} step {step}: {e}");
        }
    }
}

/// One record of tag `t` with `body`, after the header of a dump with ids of `n` bytes.
fn one_record(n: u32, t: u8, body: &[u8]) -> Vec<u8> {
    let mut w = Writer::new(Format::V102, n, 0);
    w.record(t, |w| {
        w.bytes(body);
    });
    w.finish()
}

#[test]
fn each_known_record_must_have_its_exact_length() {
    for n in [4usize, 8] {
        let cases = [
            (tag::LOAD_CLASS, "LOAD_CLASS", 8 + 2 * n),
            (tag::UNLOAD_CLASS, "UNLOAD_CLASS", 4),
            (tag::FRAME, "FRAME", 4 * n + 8),
            (tag::START_THREAD, "START_THREAD", 8 + 4 * n),
            (tag::END_THREAD, "END_THREAD", 4),
            (tag::HEAP_SUMMARY, "HEAP_SUMMARY", 24),
            (tag::HEAP_DUMP_END, "HEAP_DUMP_END", 0),
        ];
        for (t, name, len) in cases {
            for body in [len.wrapping_sub(1), len, len + 1] {
                if body > len + 1 {
                    continue;
                }
                let b = one_record(n as u32, t, &vec![1; body]);
                for step in [b.len(), 1] {
                    let (v, r) = fields(&b, step);
                    let case = format!("{name} id {n} body {body} step {step}");
                    if body == len {
                        r.unwrap_or_else(|e| panic!("{case}: {e}"));
                        assert_eq!(v.lines.len(), 2, "{case}");
                    } else {
                        let e = r.unwrap_err();
                        assert_eq!(e.offset, HEADER_LEN as u64, "{case}: {e}");
                        let want =
                            format!("{name} record has a body of {body} bytes, expected {len}");
                        assert!(e.what.contains(&want), "{case}: {e}");
                        assert_eq!(v.lines.len(), 1, "{case}: nothing after the header");
                    }
                }
            }
        }
        // A TRACE's length follows from its frame count; it has 12 bytes at least.
        let traces = [
            (2u32, 12 + 2 * n, true),
            (0, 12, true),
            (2, 12 + n, false),
            (0, 11, false),
        ];
        for (frames, body, ok) in traces {
            let mut t = vec![0u8; body.max(12)];
            t[8..12].copy_from_slice(&frames.to_be_bytes());
            t.truncate(body);
            let b = one_record(n as u32, tag::TRACE, &t);
            for step in [b.len(), 1] {
                let (_, r) = fields(&b, step);
                assert_eq!(r.is_ok(), ok, "TRACE id {n} body {body} step {step}: {r:?}");
                if let Err(e) = r {
                    assert!(e.what.contains("TRACE record"), "{e}");
                    assert_eq!(e.offset, HEADER_LEN as u64);
                }
            }
        }
        // A UTF8 record holds its id at least; the variable records are taken as they come.
        for (t, body, ok) in [
            (tag::UTF8, n - 1, false),
            (tag::UTF8, n, true),
            (tag::ALLOC_SITES, 3, true),
            (tag::CPU_SAMPLES, 0, true),
            (tag::CONTROL_SETTINGS, 1, true),
        ] {
            let b = one_record(n as u32, t, &vec![2; body]);
            for step in [b.len(), 1] {
                let (v, r) = fields(&b, step);
                assert_eq!(
                    r.is_ok(),
                    ok,
                    "tag {t:#x} id {n} body {body} step {step}: {r:?}"
                );
                match r {
                    Ok(()) => assert_eq!(v.lines.len(), 2),
                    Err(e) => {
                        assert!(e.what.contains("UTF8 record of"), "{e}");
                        assert_eq!(e.offset, HEADER_LEN as u64);
                    }
                }
            }
        }
        // A tag HPROF does not define.
        let b = one_record(n as u32, 0x33, &[0; 4]);
        for step in [b.len(), 1] {
            let e = fields(&b, step).1.unwrap_err();
            assert_eq!(e.offset, HEADER_LEN as u64);
            assert!(e.what.contains("unknown record tag 0x33"), "{e}");
        }
    }
}

#[test]
fn a_unit_of_exactly_the_limit_is_gathered_and_one_byte_more_is_not() {
    for extra in [0usize, 1] {
        let max_head = 512;
        let mut w = Writer::new(Format::V102, 4, 0);
        // The instance's head and fields make one unit: 1 + 4 + 4 + 4 + 4 bytes, then fields.
        w.instance(1, 2, &vec![0; max_head - 17 + extra]);
        let b = w.finish();
        let mut p = Parser::with_limits(ParserLimits {
            max_head,
            initial_head: 16,
        });
        let r = feed_in_pieces(&mut p, &b, 50, &mut Fields::default());
        match extra {
            0 => r.unwrap(),
            _ => {
                let e = r.unwrap_err();
                assert!(e.what.contains("exceeds the parser's limit of 512"), "{e}");
            }
        }
    }
}

/// Fails at the first array piece.
struct FailElements;
impl Visitor for FailElements {
    fn array_data(&mut self, _d: &[u8]) -> std::result::Result<(), String> {
        Err("no elements here".into())
    }
}

#[test]
fn a_visitor_that_fails_on_elements_is_reported_where_they_start() {
    for n in [4u32, 8] {
        let b = rich(Format::V102, n, tag::HEAP_DUMP_SEGMENT, false);
        let elems = rich_elements_at(b.len(), n as usize);
        for step in [b.len(), 1, 5] {
            let e = feed_in_pieces(&mut Parser::new(), &b, step, &mut FailElements).unwrap_err();
            assert_eq!(e.offset, elems as u64, "id {n} step {step}: {e}");
            assert!(e.what.contains("no elements here"));
        }
    }
}

/// The accessors of a record built by hand (its body not checked by a parser): a FRAME or a
/// TRACE too short for its fixed part is none; a TRACE's frames are cut to the ids it holds.
#[test]
fn accessors_refuse_short_bodies_and_cut_a_trace_to_its_ids() {
    fn record(tag: u8, body: &[u8], n: usize) -> Record<'_> {
        Record {
            tag,
            time: 0,
            body,
            id_size: n as u32,
        }
    }
    for n in [4usize, 8] {
        let rec = |tag, body| record(tag, body, n);
        let frame = vec![3; 4 * n + 8];
        assert!(rec(tag::FRAME, &frame).frame().is_some());
        assert!(rec(tag::FRAME, &frame[1..]).frame().is_none());
        assert!(rec(tag::TRACE, &frame).frame().is_none(), "not a FRAME");
        let mut trace = vec![0u8; 12 + 2 * n + 3];
        trace[8..12].copy_from_slice(&5u32.to_be_bytes());
        trace[12..12 + 2 * n].fill(7);
        let (_, _, frames) = rec(tag::TRACE, &trace).trace().unwrap();
        let want = u64::from_be_bytes([7; 8]) >> (64 - 8 * n);
        assert_eq!(frames.collect::<Vec<_>>(), vec![want; 2], "id {n}");
        let (_, _, frames) = rec(tag::TRACE, &trace[..12]).trace().unwrap();
        assert_eq!(frames.count(), 0);
        assert!(rec(tag::TRACE, &trace[..11]).trace().is_none());
        assert!(rec(tag::FRAME, &trace).trace().is_none(), "not a TRACE");
    }
}
