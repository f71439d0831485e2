//! The parser's tests: the same events whatever the chunking, bounded memory, errors at their byte.

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
    fn record(&mut self, at: u64, r: &Record<'_>, _raw: &[u8]) -> std::result::Result<(), String> {
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

/// Feed `b` to `p` in pieces of `step` bytes (at least one), then finish: the first error.
pub(crate) fn feed_in_pieces<V: Visitor + ?Sized>(
    p: &mut Parser,
    b: &[u8],
    step: usize,
    v: &mut V,
) -> Result<()> {
    b.chunks(step.max(1))
        .try_for_each(|c| p.feed(c, v))
        .and_then(|_| p.finish())
}

fn parse_chunked(b: &[u8], step: usize) -> (Log, Result<()>) {
    let mut log = Log::default();
    let r = feed_in_pieces(&mut Parser::new(), b, step, &mut log);
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
            let ra = feed_in_pieces(&mut Parser::new(), input, input.len(), &mut Nop);
            for step in [1, 2, 3, 5, 8, 13, 64, (d[0] as usize >> 2) + 1] {
                let rb = feed_in_pieces(&mut Parser::new(), input, step, &mut Nop);
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
