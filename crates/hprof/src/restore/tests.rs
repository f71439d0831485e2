//! Restore's output, byte for byte: a stripped dump comes back as its full twin with zeroed
//! arrays, Android's records make it 1.0.3, and segments are continued before they overflow.

use super::*;
use crate::parser::tests::feed_in_pieces;
use crate::writer::Writer;
use crate::{BasicType, Format, Header};

/// The primitive arrays of the test dumps: every type, an empty one, and (`big`) two whose
/// contents are larger than restore's block of zeros.
fn arrays(big: bool) -> Vec<(BasicType, u32)> {
    let mut a = vec![
        (BasicType::Boolean, 3),
        (BasicType::Char, 5),
        (BasicType::Float, 2),
        (BasicType::Double, 7),
        (BasicType::Byte, 11),
        (BasicType::Short, 0),
        (BasicType::Int, 13),
        (BasicType::Long, 4),
    ];
    if big {
        a.extend([(BasicType::Long, 10_000), (BasicType::Byte, 70_000)]);
    }
    a
}

/// The Android records a test dump may end its second segment with.
#[derive(Clone, Copy, Debug)]
enum Extra {
    None,
    /// A root with this tag.
    Root(u8),
    HeapInfo,
}

/// A dump in `f` with `n`-byte ids: two heap dump segments with a UTF8 record between them, each
/// with half of `arrays(big)`, stripped (0xC3 heads) or full with zeroed contents, then `extra`.
/// Every sub-record kind is there: roots (ROOT_UNKNOWN too, which is no Android root), a class,
/// an instance, an object array and an array that keeps its contents when stripped.
fn dump(f: Format, n: u32, stripped: bool, big: bool, extra: Extra) -> Vec<u8> {
    let mut w = Writer::new(f, n, 0x0123_4567_89AB);
    w.utf8(1, "a.B").load_class(1, 0x100, 1);
    w.root(sub::ROOT_UNKNOWN, 0x200)
        .root2(sub::ROOT_THREAD_OBJECT, 0x210, 1, 2)
        .class_dump(0x100, 0, 0, n, &[], &[(1, BasicType::Object)])
        .instance(0x200, 0x100, &vec![7; n as usize])
        .object_array(0x300, 0x100, &[0x200, 0x300, 0]);
    let a = arrays(big);
    let (first, second) = a.split_at(a.len() / 2);
    let mut id = 0x1000;
    let mut put = |w: &mut Writer, part: &[(BasicType, u32)]| {
        for &(ty, len) in part {
            id += 0x10;
            if stripped {
                w.primitive_array_nodata(id, ty, len);
            } else {
                let zeros = vec![0; (len * ty.size(n)) as usize];
                w.primitive_array(id, ty, len, &zeros);
            }
        }
    };
    put(&mut w, first);
    w.utf8(2, "between the segments");
    put(&mut w, second);
    w.primitive_array(0x400, BasicType::Int, 2, &[0, 0, 0, 9, 0, 0, 1, 0]);
    match extra {
        Extra::None => {}
        Extra::Root(t) => {
            w.root(t, 0x200);
        }
        Extra::HeapInfo => {
            w.heap_info(3, 2);
        }
    }
    w.heap_dump_end();
    w.finish()
}

/// The contents restore writes for the stripped arrays of `arrays(big)`.
fn zero_bytes(n: u32, big: bool) -> u64 {
    arrays(big)
        .iter()
        .map(|&(ty, len)| len as u64 * ty.size(n) as u64)
        .sum()
}

#[test]
fn a_stripped_dump_comes_back_as_its_full_twin_with_zeroed_arrays() {
    for n in [4, 8] {
        for input in [Format::V102, Format::V103] {
            let stripped = dump(input, n, true, true, Extra::None);
            let full = dump(Format::V102, n, false, true, Extra::None);
            let want = RestoreStats {
                input_bytes: stripped.len() as u64,
                output_bytes: full.len() as u64,
                arrays_restored: arrays(true).len() as u64,
                zero_bytes_written: zero_bytes(n, true),
                android: false,
            };
            assert!(want.zero_bytes_written > 2 * ZEROS.len() as u64);
            let (out, stats) = restore(&stripped).unwrap();
            assert!(out == full, "{n}-byte ids, {input}");
            assert_eq!(stats, want, "{n}-byte ids, {input}");
            for step in [1, 3, 4096] {
                let mut r = Restorer::new(Vec::new());
                for piece in stripped.chunks(step) {
                    r.feed(piece).unwrap();
                }
                let (out, stats) = r.finish().unwrap();
                assert!(out == full, "{n}-byte ids, {input}, pieces of {step}");
                assert_eq!(stats, want, "{n}-byte ids, {input}, pieces of {step}");
            }
        }
    }
}

#[test]
fn a_full_dump_comes_back_as_it_was() {
    for n in [4, 8] {
        let full = dump(Format::V102, n, false, true, Extra::None);
        let (out, stats) = restore(&full).unwrap();
        assert!(out == full, "{n}-byte ids");
        let len = full.len() as u64;
        assert_eq!(
            stats,
            RestoreStats {
                input_bytes: len,
                output_bytes: len,
                ..RestoreStats::default()
            }
        );
    }
}

#[test]
fn android_roots_and_heap_names_make_the_output_1_0_3() {
    let android = [
        Extra::Root(sub::ROOT_INTERNED_STRING),
        Extra::Root(sub::ROOT_UNREACHABLE),
        Extra::HeapInfo,
    ];
    for n in [4, 8] {
        for extra in android {
            let stripped = dump(Format::V102, n, true, false, extra);
            let (out, stats) = restore(&stripped).unwrap();
            assert!(
                out == dump(Format::V103, n, false, false, extra),
                "{n}-byte ids, {extra:?}"
            );
            assert!(stats.android, "{n}-byte ids, {extra:?}");
        }
        // The JVM's roots, ROOT_UNKNOWN (0xFF) among them, are no Android records.
        let jvm = Extra::Root(sub::ROOT_STICKY_CLASS);
        let (out, stats) = restore(&dump(Format::V103, n, true, false, jvm)).unwrap();
        assert!(
            out == dump(Format::V102, n, false, false, jvm),
            "{n}-byte ids"
        );
        assert!(!stats.android);
    }
}

/// What a dump is made of, as the parser reports it: each sub-record with its elements.
#[derive(Clone, Debug, PartialEq)]
enum Unit {
    Header(Vec<u8>),
    Record(Vec<u8>),
    Segment(u8, u32),
    Sub(Vec<u8>),
}

#[derive(Default)]
struct Units(Vec<Unit>);

impl Visitor for Units {
    fn header(&mut self, _h: &Header, raw: &[u8]) -> std::result::Result<(), String> {
        self.0.push(Unit::Header(raw.to_vec()));
        Ok(())
    }
    fn record(&mut self, _at: u64, _r: &Record<'_>, raw: &[u8]) -> std::result::Result<(), String> {
        self.0.push(Unit::Record(raw.to_vec()));
        Ok(())
    }
    fn heap_dump_start(
        &mut self,
        _at: u64,
        t: u8,
        len: u32,
        _raw: &[u8],
    ) -> std::result::Result<(), String> {
        self.0.push(Unit::Segment(t, len));
        Ok(())
    }
    fn sub(&mut self, _at: u64, _s: &Sub<'_>, raw: &[u8]) -> std::result::Result<(), String> {
        self.0.push(Unit::Sub(raw.to_vec()));
        Ok(())
    }
    fn array_data(&mut self, d: &[u8]) -> std::result::Result<(), String> {
        match self.0.last_mut() {
            Some(Unit::Sub(b)) => b.extend_from_slice(d),
            _ => unreachable!("elements outside a sub-record"),
        }
        Ok(())
    }
}

fn units(b: &[u8]) -> Vec<Unit> {
    let mut u = Units::default();
    feed_in_pieces(&mut Parser::new(), b, b.len(), &mut u).unwrap();
    u.0
}

/// `units` with every segment cut where the next sub-record would take its body over `limit`
/// bytes: what restore must write.
fn continued(units: &[Unit], limit: u64) -> Vec<Unit> {
    let mut out = Vec::new();
    // Where the open segment's head is in `out`, and its body's length so far.
    let mut seg: Option<(usize, u64)> = None;
    let close = |out: &mut Vec<Unit>, seg: Option<(usize, u64)>| {
        if let Some((at, len)) = seg {
            if let Unit::Segment(_, l) = &mut out[at] {
                *l = len as u32;
            }
        }
    };
    for u in units {
        match u {
            &Unit::Segment(t, _) => {
                close(&mut out, seg);
                seg = Some((out.len(), 0));
                out.push(Unit::Segment(t, 0));
            }
            Unit::Sub(b) => {
                let (mut at, mut len) = seg.expect("a sub-record in a segment");
                if len + b.len() as u64 > limit {
                    close(&mut out, seg);
                    (at, len) = (out.len(), 0);
                    out.push(Unit::Segment(tag::HEAP_DUMP_SEGMENT, 0));
                }
                seg = Some((at, len + b.len() as u64));
                out.push(Unit::Sub(b.clone()));
            }
            other => {
                close(&mut out, seg.take());
                out.push(other.clone());
            }
        }
    }
    close(&mut out, seg);
    out
}

fn restore_with_limit(b: &[u8], limit: u64) -> Result<(Vec<u8>, RestoreStats)> {
    let mut r = Restorer::new(Vec::new());
    r.state.seg_limit = limit;
    r.feed(b)?;
    r.finish()
}

/// Each limit from the largest sub-record to past the largest segment, so that each kind of
/// sub-record is at some limit the one that does not fit.
#[test]
fn a_segment_is_continued_in_a_new_one_before_it_would_overflow() {
    for n in [4, 8] {
        for extra in [Extra::Root(sub::ROOT_DEBUGGER), Extra::HeapInfo] {
            let stripped = dump(Format::V102, n, true, false, extra);
            let full = units(&dump(Format::V103, n, false, false, extra));
            let largest = full.iter().filter_map(|u| match u {
                Unit::Sub(b) => Some(b.len()),
                _ => None,
            });
            let largest = largest.max().unwrap() as u64;
            let whole = full.iter().filter_map(|u| match u {
                Unit::Segment(_, l) => Some(*l),
                _ => None,
            });
            let whole = whole.max().unwrap() as u64;
            let mut segments = Vec::new();
            for limit in largest..=whole + 1 {
                let (out, _) = restore_with_limit(&stripped, limit).unwrap();
                let got = units(&out);
                let want = continued(&full, limit);
                assert_eq!(got, want, "{n}-byte ids, {extra:?}, limit {limit}");
                segments.push(
                    got.iter()
                        .filter(|u| matches!(u, Unit::Segment(..)))
                        .count(),
                );
            }
            // From several segments down to the dump's own two.
            assert!(segments[0] > 4, "{segments:?}");
            assert_eq!(segments.last(), Some(&2), "{segments:?}");
        }
    }
}

/// The class dump (48 bytes with 4-byte ids) gets a segment of its own, which it overflows: that
/// is found when the next sub-record asks for room, at the class dump's end.
#[test]
fn a_sub_record_larger_than_a_segment_is_an_error_where_it_ends() {
    let stripped = dump(Format::V102, 4, true, false, Extra::None);
    let err = restore_with_limit(&stripped, 40).unwrap_err();
    assert_eq!(
        err.what,
        "a heap dump segment would hold 48 bytes, more than the 40 its length field can say"
    );
    // The header, UTF8, LOAD_CLASS, the segment's head, the two roots, the class dump.
    assert_eq!(err.offset, 31 + 16 + 25 + 9 + 5 + 13 + 48);
}

#[test]
fn a_cut_dump_is_an_error_where_it_ends() {
    let stripped = dump(Format::V102, 8, true, false, Extra::None);
    let cut = &stripped[..stripped.len() - 20];
    let err = restore(cut).unwrap_err();
    assert_eq!(err.offset, cut.len() as u64, "{err}");
}
