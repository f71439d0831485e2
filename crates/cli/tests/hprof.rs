//! The HPROF engine on real dumps: every fixture, generated ART-style dumps, and dumps made by the
//! machine's Java 17.

mod common;

use hprof::writer::{art_dump, ArtSpec};
use hprof::{self, restore, strip_bytes, Level, Parser, Record, Sub, Visitor};
use proptest::prelude::*;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::process::Command;

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Strip `input` fed in chunks cut at `cuts` (sorted offsets).
fn strip_chunked(input: &[u8], level: Level, cuts: &[usize]) -> Vec<u8> {
    let mut s = hprof::Stripper::new(level, Vec::new());
    let mut at = 0;
    for &c in cuts.iter().chain(std::iter::once(&input.len())) {
        let c = c.clamp(at, input.len());
        s.feed(&input[at..c]).unwrap();
        at = c;
    }
    s.finish().unwrap().0
}

/// A canonical digest of what a dump says about the heap: every object (id, class, kind, length,
/// type, field values, array elements), class (its whole record), root, heap and string, but not
/// primitive array contents, which stripping removes.
#[derive(Default)]
struct Shape {
    h: Sha256,
    objects: u64,
    classes: u64,
    roots: u64,
    refs: u64,
    in_obj_array: bool,
}

impl Visitor for Shape {
    fn record(&mut self, _at: u64, r: &Record<'_>, raw: &[u8]) -> Result<(), String> {
        if r.tag != hprof::tag::HEAP_DUMP_END {
            self.h.update(raw);
        }
        Ok(())
    }
    fn sub(&mut self, _at: u64, s: &Sub<'_>, raw: &[u8]) -> Result<(), String> {
        self.in_obj_array = false;
        match *s {
            Sub::PrimitiveArray {
                id,
                stack_serial,
                len,
                ty,
                ..
            } => {
                self.objects += 1;
                self.h.update(b"P");
                self.h.update(id.to_be_bytes());
                self.h.update(stack_serial.to_be_bytes());
                self.h.update(len.to_be_bytes());
                self.h.update([ty as u8]);
            }
            Sub::Root { .. } => {
                self.roots += 1;
                self.h.update(raw);
            }
            Sub::Class(_) => {
                self.classes += 1;
                self.h.update(raw);
            }
            Sub::ObjectArray { .. } => {
                self.objects += 1;
                self.in_obj_array = true;
                self.h.update(raw);
            }
            _ => {
                if matches!(s, Sub::Instance { .. }) {
                    self.objects += 1;
                }
                self.h.update(raw);
            }
        }
        Ok(())
    }
    fn array_data(&mut self, d: &[u8]) -> Result<(), String> {
        if self.in_obj_array {
            self.refs += 1;
            self.h.update(d);
        }
        Ok(())
    }
}

fn shape(b: &[u8]) -> (String, u64, u64, u64) {
    let mut v = Shape::default();
    let mut p = Parser::new();
    p.feed(b, &mut v).unwrap();
    p.finish().unwrap();
    (hex::encode(v.h.finalize()), v.objects, v.classes, v.roots)
}

#[test]
fn level_none_is_a_byte_identical_copy_of_every_fixture() {
    for f in common::fixtures() {
        let input = read(&f);
        let (out, stats) = strip_bytes(&input, Level::None).unwrap();
        assert!(
            out == input,
            "{}: level none changed the bytes",
            f.display()
        );
        assert_eq!(stats.output_bytes, input.len() as u64);
    }
}

#[test]
fn the_mapped_stripper_writes_the_same_bytes_as_the_streaming_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs: Vec<Vec<u8>> = common::fixtures().iter().map(|f| read(f)).collect();
    inputs.push(art_dump(&ArtSpec::default()));
    for (i, input) in inputs.iter().enumerate() {
        for level in [Level::None, Level::Arrays, Level::App] {
            let (want, want_stats) = strip_bytes(input, level).unwrap();
            // strip_mapped writes these small inputs on the parsing thread; workers = 1 is
            // the writer thread that larger ones get.
            let (got, got_stats) = hprof::strip_mapped(input, level, Vec::new()).unwrap();
            assert!(got == want, "input {i} level {level}");
            assert_eq!(got_stats, want_stats);
            let (got, got_stats) =
                hprof::strip_mapped_parts(input, level, Vec::new(), 0, 1).unwrap();
            assert!(got == want, "writer thread: input {i} level {level}");
            assert_eq!(got_stats, want_stats);
            // Through a real file, with writev and pwrite patches, both ways.
            for workers in [0, 1] {
                let path = dir.path().join(format!("{i}-{level}-{workers}"));
                let file = std::fs::File::create(&path).unwrap();
                hprof::strip_mapped_parts(input, level, hprof::FileSink { file }, 0, workers)
                    .unwrap();
                assert!(
                    read(&path) == want,
                    "file: input {i} level {level} workers {workers}"
                );
            }
            // The streaming stripper into a file (its buffer written with write, the segment
            // lengths patched with pwrite), as the agent's tee writes one.
            let path = dir.path().join(format!("{i}-{level}-stream"));
            let file = std::fs::File::create(&path).unwrap();
            let mut s = hprof::Stripper::new(level, hprof::FileSink { file });
            for c in input.chunks(40_000) {
                s.feed(c).unwrap();
            }
            assert_eq!(s.finish().unwrap().1, want_stats);
            assert!(
                read(&path) == want,
                "stream to a file: input {i} level {level}"
            );
        }
    }
}

/// The parallel stripper (parts stripped side by side, written in order) against the sequential
/// one: parts of one record, of a few KB, and of 64 KB, on two and three threads (level `app` is
/// stripped sequentially whatever the arguments).
#[test]
fn the_parallel_stripper_writes_the_same_bytes_as_the_sequential_one() {
    let mut inputs: Vec<Vec<u8>> = common::fixtures().iter().map(|f| read(f)).collect();
    inputs.push(art_dump(&ArtSpec::default()));
    inputs.push(art_dump(&ArtSpec {
        seed: 7,
        image_objects: 500,
        zygote_objects: 40_000,
        app_objects: 2_000,
        mean_array_bytes: 64,
        planted: vec!["planted-\u{e9}t\u{e9}".into(), "\u{4e2d}\u{6587}".into()],
    }));
    for (i, input) in inputs.iter().enumerate() {
        for level in [Level::None, Level::Arrays, Level::App] {
            let (want, want_stats) = strip_bytes(input, level).unwrap();
            for (part, workers) in [(1, 2), (4096, 3), (65536, 2)] {
                let (got, got_stats) =
                    hprof::strip_mapped_parts(input, level, Vec::new(), part, workers).unwrap();
                assert!(
                    got == want,
                    "input {i} level {level} parts of {part} bytes on {workers} threads"
                );
                assert_eq!(
                    got_stats, want_stats,
                    "input {i} level {level} parts {part}"
                );
            }
        }
    }
}

/// Which way `strip_mapped_parts` strips is its arguments' to choose, and each way is seen by
/// who writes: parts side by side (two or more workers, a part size, not level `app`) are written
/// by the calling thread; one worker, or no part size, or level `app`: parsed here and written by
/// the writer thread; no worker at all: parsed and written here. The bytes are the same each way.
#[test]
fn the_stripper_takes_the_way_its_arguments_ask_for() {
    let input = art_dump(&ArtSpec::default());
    let me = std::thread::current().name().unwrap_or("?").to_string();
    let writer = "oomguard-write".to_string();
    for (level, part, workers, by) in [
        (Level::Arrays, 4096, 2, &me),
        (Level::None, 4096, 3, &me),
        (Level::Arrays, 4096, 1, &writer),
        (Level::Arrays, 0, 2, &writer),
        (Level::App, 4096, 2, &writer),
        (Level::Arrays, 4096, 0, &me),
    ] {
        let (want, _) = strip_bytes(&input, level).unwrap();
        let (got, _) =
            hprof::strip_mapped_parts(&input, level, Writers::default(), part, workers).unwrap();
        assert!(
            got.out == want,
            "level {level} part {part} workers {workers}"
        );
        assert_eq!(
            got.threads,
            [by.clone()].into(),
            "level {level} part {part} workers {workers}"
        );
    }
    // strip_mapped itself: an input under 16 MiB (this one) is parsed and written here, with no
    // writer thread, which costs it more than it overlaps.
    let (got, _) = hprof::strip_mapped(&input, Level::Arrays, Writers::default()).unwrap();
    assert!(input.len() < 16 << 20);
    assert_eq!(got.threads, [me].into());
}

/// Primitive arrays in a dump: (with contents: count, content bytes; without (0xC3): bytes).
fn arrays(b: &[u8]) -> (u64, u64, u64) {
    #[derive(Default)]
    struct Arrays(u64, u64, u64);
    impl Visitor for Arrays {
        fn sub(&mut self, _: u64, s: &Sub<'_>, _: &[u8]) -> Result<(), String> {
            if let Sub::PrimitiveArray {
                len, ty, nodata, ..
            } = *s
            {
                let bytes = len as u64 * ty.size(4) as u64;
                if nodata {
                    self.2 += bytes;
                } else {
                    self.0 += 1;
                    self.1 += bytes;
                }
            }
            Ok(())
        }
    }
    let mut a = Arrays::default();
    let mut p = Parser::new();
    p.feed(b, &mut a).unwrap();
    p.finish().unwrap();
    (a.0, a.1, a.2)
}

/// The stats count what stripping removed: at level `arrays` the output is shorter by exactly
/// the arrays' contents (a 0xC3 head is as long as a 0x23 one, and so is the header); at level
/// `app` the arrays kept lose their contents and are counted the same way.
#[test]
fn the_stats_count_the_array_contents_removed() {
    let mut inputs: Vec<(String, Vec<u8>)> = common::fixtures()
        .iter()
        .map(|f| (f.display().to_string(), read(f)))
        .collect();
    inputs.push(("ART-style dump".into(), art_dump(&ArtSpec::default())));
    for (name, input) in &inputs {
        let (count, bytes, nodata) = arrays(input);
        let (out, stats) = strip_bytes(input, Level::Arrays).unwrap();
        assert_eq!(stats.arrays_stripped, count, "{name}");
        assert_eq!(stats.array_bytes_removed, bytes, "{name}");
        assert_eq!(out.len() as u64, input.len() as u64 - bytes, "{name}");
        assert_eq!(
            (stats.input_bytes, stats.output_bytes),
            (input.len() as u64, out.len() as u64)
        );
        assert_eq!(arrays(&out), (0, 0, bytes + nodata), "{name}");
        assert!(count > 0, "{name}: no array to strip");
        if nodata > 0 {
            continue;
        }
        let (twin, stats) = strip_bytes(input, Level::App).unwrap();
        let (left, _, removed) = arrays(&twin);
        assert_eq!(left, 0, "{name}");
        assert_eq!(stats.array_bytes_removed, removed, "{name} at level app");
        assert_eq!(stats.output_bytes, twin.len() as u64);
    }
}

/// A sink that notes the threads that write to it.
#[derive(Default)]
struct Writers {
    out: Vec<u8>,
    threads: std::collections::BTreeSet<String>,
}

impl Writers {
    fn note(&mut self) {
        let t = std::thread::current();
        self.threads.insert(t.name().unwrap_or("?").to_string());
    }
}

impl hprof::Sink for Writers {
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.note();
        self.out.extend_from_slice(buf);
        Ok(())
    }
    fn write_all_vectored(&mut self, bufs: &[&[u8]]) -> std::io::Result<()> {
        self.note();
        bufs.iter().for_each(|b| self.out.extend_from_slice(b));
        Ok(())
    }
    fn patch(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        hprof::Sink::patch(&mut self.out, offset, bytes)
    }
}

/// `strip_mapped` on a dump of 16 MiB or more: at level `arrays`, cut into parts stripped side by
/// side and written by the calling thread (given two cores); at level `app`, whose roots depend
/// on the whole heap dump, parsed on the calling thread and written by a writer thread. Both
/// write what the streaming stripper writes.
#[test]
fn a_large_mapped_dump_is_stripped_in_parts_except_at_level_app() {
    let input = art_dump(&ArtSpec {
        seed: 11,
        image_objects: 25_000,
        zygote_objects: 25_000,
        app_objects: 25_000,
        mean_array_bytes: 600,
        planted: Vec::new(),
    });
    assert!(input.len() >= 16 << 20, "{} bytes", input.len());
    let me = std::thread::current().name().unwrap_or("?").to_string();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for level in [Level::Arrays, Level::App] {
        let (want, want_stats) = strip_bytes(&input, level).unwrap();
        let (got, stats) = hprof::strip_mapped(&input, level, Writers::default()).unwrap();
        assert!(got.out == want, "level {level}");
        assert_eq!(stats, want_stats, "level {level}");
        let writer = match level {
            Level::Arrays if cores > 1 => me.clone(),
            _ => "oomguard-write".to_string(),
        };
        assert_eq!(got.threads, [writer].into(), "level {level}");
    }
}

/// A large dump whose first heap dump segment is most of the file (HotSpot before 17 writes one
/// segment) is not cut into parts: one part would hold over half the input and the other threads
/// would idle, so it goes the sequential way, parsed on the calling thread and written by the
/// writer thread, with the same bytes.
#[test]
fn a_large_dump_that_cannot_be_cut_evenly_is_stripped_sequentially() {
    use hprof::{writer::Writer, BasicType, Format};
    let mut w = Writer::new(Format::V102, 8, 0);
    w.utf8(1, "[B");
    w.segment(hprof::tag::HEAP_DUMP_SEGMENT);
    w.primitive_array(0x100, BasicType::Byte, 17 << 20, &vec![7u8; 17 << 20]);
    w.end_segment();
    for i in 0..64u64 {
        w.segment(hprof::tag::HEAP_DUMP_SEGMENT);
        w.primitive_array(0x200 + 8 * i, BasicType::Byte, 16 << 10, &[1u8; 16 << 10]);
        w.end_segment();
    }
    w.heap_dump_end();
    let input = w.finish();
    assert!(input.len() >= 16 << 20, "{} bytes", input.len());
    let (want, want_stats) = strip_bytes(&input, Level::Arrays).unwrap();
    let (got, stats) = hprof::strip_mapped(&input, Level::Arrays, Writers::default()).unwrap();
    assert!(got.out == want);
    assert_eq!(stats, want_stats);
    assert_eq!(got.threads, ["oomguard-write".to_string()].into());
}

/// A damaged dump fails the parallel stripper at the same offset, with the same message, as the
/// sequential one, wherever the damage is: an unknown sub-record tag, or an array whose length
/// runs past its segment (a message that quotes the segment's end offset).
#[test]
fn the_parallel_stripper_reports_errors_where_the_sequential_one_does() {
    #[derive(Default)]
    struct Arrays(Vec<(u64, usize)>);
    impl Visitor for Arrays {
        fn sub(&mut self, at: u64, s: &Sub<'_>, raw: &[u8]) -> Result<(), String> {
            if let Sub::PrimitiveArray { .. } | Sub::ObjectArray { .. } = s {
                self.0.push((at, raw.len()));
            }
            Ok(())
        }
    }
    // Several 1 MB heap dump segments, so that most arrays are in a part of their own.
    let good = art_dump(&ArtSpec {
        app_objects: 20_000,
        ..ArtSpec::default()
    });
    let mut arrays = Arrays::default();
    let mut p = Parser::new();
    p.feed(&good, &mut arrays).unwrap();
    let n = arrays.0.len();
    assert!(n > 100);
    for k in [n / 7, n / 3, n / 2, n - 1] {
        let (at, _) = arrays.0[k];
        let at = at as usize;
        let mut unknown_tag = good.clone();
        unknown_tag[at] = 0xEE;
        let mut too_long = good.clone();
        too_long[at + 9..at + 13].copy_from_slice(&0x00ff_ffffu32.to_be_bytes());
        for (what, bad) in [("unknown tag", &unknown_tag), ("length", &too_long)] {
            for level in [Level::Arrays, Level::App] {
                let want = strip_bytes(bad, level).err().map(|e| e.to_string());
                assert!(want.is_some(), "{what} at byte {at} did not fail");
                let got = hprof::strip_mapped_parts(bad, level, Vec::new(), 4096, 2)
                    .err()
                    .map(|e| e.to_string());
                assert_eq!(got, want, "{what} at byte {at}, level {level}");
            }
        }
    }
}

#[test]
fn stripping_keeps_every_object_class_and_root() {
    for f in common::fixtures() {
        let input = read(&f);
        let (stripped, stats) = strip_bytes(&input, Level::Arrays).unwrap();
        assert!(stripped.len() < input.len(), "{}", f.display());
        assert!(stats.arrays_stripped > 0);
        // The stripped file is itself a valid dump, and says 1.0.3.
        assert_eq!(&stripped[..18], b"JAVA PROFILE 1.0.3");
        assert_eq!(shape(&input), shape(&stripped), "{}", f.display());
    }
}

#[test]
fn restore_gives_back_the_same_heap_with_zeroed_arrays() {
    for f in common::fixtures() {
        let input = read(&f);
        let (stripped, _) = strip_bytes(&input, Level::Arrays).unwrap();
        let (restored, rs) = restore(&stripped).unwrap();
        // Same length as the original: every array is back at its full size.
        assert_eq!(restored.len(), input.len(), "{}", f.display());
        assert_eq!(shape(&restored), shape(&input), "{}", f.display());
        let android = input[17] == b'3';
        assert_eq!(rs.android, android, "{}", f.display());
        assert_eq!(restored[17], if android { b'3' } else { b'2' });
        // Restoring an unstripped file is the identity (up to the version digit).
        let (again, _) = restore(&restored).unwrap();
        assert!(again == restored, "{}", f.display());
    }
}

#[test]
fn restored_android_fixtures_convert_with_hprof_conv() {
    let conv = Path::new("/usr/lib/android-sdk/platform-tools/hprof-conv");
    assert!(
        conv.exists(),
        "hprof-conv is missing: scripts/test.sh installs Debian's hprof-conv"
    );
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "leak_service_binder.hprof",
        "leak_service_binder_ignored.hprof",
    ] {
        let input = read(&common::fixture(&format!("android/{name}")));
        for level in [Level::Arrays, Level::App] {
            let (stripped, _) = strip_bytes(&input, level).unwrap();
            let (restored, _) = restore(&stripped).unwrap();
            let r = dir.path().join(format!("{name}.{level}.restored"));
            let out = dir.path().join(format!("{name}.{level}.converted"));
            std::fs::write(&r, &restored).unwrap();
            let o = Command::new(conv).arg(&r).arg(&out).output().unwrap();
            assert!(
                o.status.success(),
                "hprof-conv failed on restored {name} ({level}): {}",
                String::from_utf8_lossy(&o.stderr)
            );
            // hprof-conv writes a 1.0.2 file our parser reads back.
            let conv_bytes = read(&out);
            assert_eq!(&conv_bytes[..18], b"JAVA PROFILE 1.0.2");
            let mut p = Parser::new();
            p.feed(&conv_bytes, &mut Shape::default()).unwrap();
            p.finish().unwrap();
        }
    }
}

#[test]
fn one_byte_chunks_give_the_same_output() {
    let art = art_dump(&ArtSpec::default());
    let mut inputs = vec![
        read(&common::fixture("jvm/slurp_hprof-32.hprof")),
        read(&common::fixture(
            "jvm/sun_jdk6_31_hprofagent_compressedOops.hprof",
        )),
        art,
    ];
    inputs.push(read(&common::fixture("android/leak_service_binder.hprof")));
    for input in &inputs {
        for level in [Level::None, Level::Arrays, Level::App] {
            let whole = strip_bytes(input, level).unwrap().0;
            let mut s = hprof::Stripper::new(level, Vec::new());
            for b in input.chunks(1) {
                s.feed(b).unwrap();
            }
            assert!(s.finish().unwrap().0 == whole, "level {level}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Random cut points (many close together, to cut record heads) never change the output.
    #[test]
    fn any_chunking_gives_the_same_output(
        which in 0usize..10,
        level in prop_oneof![Just(Level::None), Just(Level::Arrays), Just(Level::App)],
        mut cuts in proptest::collection::vec(any::<prop::sample::Index>(), 1..400),
        small in proptest::collection::vec(1usize..40, 0..200),
    ) {
        let files = common::fixtures();
        let input = if which < files.len() {
            read(&files[which])
        } else {
            art_dump(&ArtSpec { seed: which as u64, ..ArtSpec::default() })
        };
        let whole = strip_bytes(&input, level).unwrap().0;
        let mut offs: Vec<usize> = cuts.drain(..).map(|i| i.index(input.len())).collect();
        // Bursts of tiny chunks after some cut points.
        let mut extra = Vec::new();
        for (k, s) in small.iter().enumerate() {
            if let Some(&o) = offs.get(k % offs.len().max(1)) {
                extra.push(o + s);
            }
        }
        offs.extend(extra);
        offs.sort_unstable();
        let chunked = strip_chunked(&input, level, &offs);
        prop_assert!(chunked == whole);
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn utf16be(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|c| c.to_be_bytes()).collect()
}

#[test]
fn no_planted_string_survives_in_a_stripped_java17_dump() {
    let marker = "OomGuardPrivacyMarker4711";
    let dump = common::java_dump(4, marker);
    let input = read(&dump);
    // The test can fail: the marker is there before stripping, in both encodings.
    assert!(
        contains(&input, marker.as_bytes()),
        "Latin-1 marker not planted"
    );
    assert!(
        contains(&input, &utf16be(marker)),
        "UTF-16 marker not planted"
    );
    for level in [Level::Arrays, Level::App] {
        let (out, _) = strip_bytes(&input, level).unwrap();
        assert!(
            !contains(&out, marker.as_bytes()),
            "{level}: Latin-1 marker survived"
        );
        assert!(
            !contains(&out, &utf16be(marker)),
            "{level}: UTF-16 marker survived"
        );
        // Partial markers (a prefix long enough to identify) are gone too.
        assert!(
            !contains(&out, &marker.as_bytes()[..12]),
            "{level}: marker prefix survived"
        );
    }
}

#[test]
fn no_planted_string_survives_in_a_stripped_art_dump() {
    let latin = "secret-token-Zq81";
    let wide = "\u{4f60}\u{597d}-password-\u{20ac}99";
    let spec = ArtSpec {
        planted: vec![latin.into(), wide.into()],
        ..ArtSpec::default()
    };
    let input = art_dump(&spec);
    assert!(contains(&input, latin.as_bytes()));
    assert!(contains(&input, &utf16be(wide)));
    for level in [Level::Arrays, Level::App] {
        let (out, _) = strip_bytes(&input, level).unwrap();
        assert!(!contains(&out, latin.as_bytes()), "{level}");
        assert!(!contains(&out, &utf16be(wide)), "{level}");
        assert!(!contains(&out, &utf16be("password")), "{level}");
    }
}

/// Objects per heap, by walking HEAP_DUMP_INFO.
#[derive(Default)]
struct Heaps {
    names: std::collections::HashMap<u64, String>,
    cur: String,
    objects: std::collections::BTreeMap<String, u64>,
    classes: u64,
    roots: u64,
}

impl Visitor for Heaps {
    fn record(&mut self, _at: u64, r: &Record<'_>, _raw: &[u8]) -> Result<(), String> {
        if let Some((id, t)) = r.utf8() {
            self.names.insert(id, String::from_utf8_lossy(t).into());
        }
        Ok(())
    }
    fn sub(&mut self, _at: u64, s: &Sub<'_>, _raw: &[u8]) -> Result<(), String> {
        match *s {
            Sub::HeapDumpInfo { name_id, .. } => self.cur = self.names[&name_id].clone(),
            Sub::Class(_) => self.classes += 1,
            Sub::Root { .. } => self.roots += 1,
            _ => *self.objects.entry(self.cur.clone()).or_default() += 1,
        }
        Ok(())
    }
}

fn heaps(b: &[u8]) -> Heaps {
    let mut h = Heaps::default();
    let mut p = Parser::new();
    p.feed(b, &mut h).unwrap();
    p.finish().unwrap();
    h
}

#[test]
fn app_level_drops_zygote_and_image_objects_but_keeps_classes_and_roots() {
    let spec = ArtSpec::default();
    let input = art_dump(&spec);
    let before = heaps(&input);
    assert_eq!(before.objects["image"], spec.image_objects as u64);
    assert_eq!(before.objects["zygote"], spec.zygote_objects as u64);
    assert_eq!(before.objects["app"], spec.app_objects as u64);
    let (out, stats) = strip_bytes(&input, Level::App).unwrap();
    let after = heaps(&out);
    assert_eq!(after.objects.get("image"), None);
    assert_eq!(after.objects.get("zygote"), None);
    assert_eq!(after.objects["app"], spec.app_objects as u64);
    assert_eq!(after.classes, before.classes);
    // The roots, and one for each object a dropped one referenced (see app_strip.rs).
    assert!(stats.holder_roots > 0);
    assert_eq!(after.roots, before.roots + stats.holder_roots);
    assert_eq!(
        stats.objects_dropped,
        (spec.image_objects + spec.zygote_objects) as u64
    );
    // Every class dump is still inside a heap that is kept (the image's framework classes come
    // back with their HEAP_DUMP_INFO).
    assert!(contains(&out, &[0xFE, 0, 0, 0, b'I']));
    // The fixtures (Dalvik era) have zygote objects too.
    let input = read(&common::fixture("android/leak_service_binder.hprof"));
    let (out, stats) = strip_bytes(&input, Level::App).unwrap();
    assert!(stats.objects_dropped > 0);
    assert!(out.len() < strip_bytes(&input, Level::Arrays).unwrap().0.len());
    assert_eq!(heaps(&out).objects.get("zygote"), None);
}

/// Runs `oomguard` and returns (status code, stderr).
fn run(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let o = Command::new(common::oomguard_bin())
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn bad_input_exits_2_naming_file_and_offset_and_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let good = read(&common::fixture("jvm/slurp_hprof-32.hprof"));
    let mut cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "byte 0: empty file"),
        (
            "not-hprof",
            b"PK\x03\x04 this is a zip file, not a dump".to_vec(),
            "byte 0: not an HPROF",
        ),
        ("truncated", good[..good.len() / 2].to_vec(), "truncated"),
        (
            "header-only",
            good[..20].to_vec(),
            "truncated: the file header",
        ),
    ];
    // An unknown tag right after the header.
    let mut unknown = good[..31].to_vec();
    unknown.extend_from_slice(&[0x77, 0, 0, 0, 0, 0, 0, 0, 0]);
    cases.push(("unknown-tag", unknown, "byte 31: unknown record tag 0x77"));
    // A wrong length: a LOAD_CLASS record that claims 3 bytes.
    let mut w = hprof::writer::Writer::new(hprof::Format::V102, 4, 0);
    w.record(hprof::tag::LOAD_CLASS, |w| {
        w.u8(1).u8(2).u8(3);
    });
    cases.push((
        "wrong-length",
        w.finish(),
        "byte 31: LOAD_CLASS record has a body of 3 bytes",
    ));
    // A segment whose length is larger than what follows.
    let mut w = hprof::writer::Writer::new(hprof::Format::V102, 4, 0);
    w.root(hprof::sub::ROOT_UNKNOWN, 5);
    let mut seg = w.finish();
    seg[31 + 5..31 + 9].copy_from_slice(&1000u32.to_be_bytes());
    cases.push(("segment-too-long", seg, "truncated: the heap dump segment"));
    // A sub-record that runs past its segment's end.
    let mut w = hprof::writer::Writer::new(hprof::Format::V102, 4, 0);
    w.instance(1, 2, &[0; 16]);
    let mut seg = w.finish();
    seg[31 + 5..31 + 9].copy_from_slice(&10u32.to_be_bytes());
    cases.push(("past-segment", seg, "byte 40: INSTANCE_DUMP of at least"));
    for (name, bytes, want) in cases {
        let input = dir.path().join(format!("{name}.hprof"));
        std::fs::write(&input, &bytes).unwrap();
        for cmd in ["strip", "restore"] {
            let out = dir.path().join(format!("{name}.{cmd}.out"));
            let (code, err) = run(&[
                cmd.as_ref(),
                input.as_os_str(),
                "-o".as_ref(),
                out.as_os_str(),
            ]);
            assert_eq!(code, 2, "{cmd} {name}: {err}");
            let prefix = format!("oomguard: {}: byte ", input.display());
            assert!(err.starts_with(&prefix), "{cmd} {name}: {err}");
            assert!(
                err.contains(want),
                "{cmd} {name}: expected {want:?} in {err}"
            );
            assert!(!out.exists(), "{cmd} {name}: left a half-written output");
            let leftovers: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| sys::fs::is_tmp_name(&e.file_name().to_string_lossy()))
                .collect();
            assert!(
                leftovers.is_empty(),
                "{cmd} {name}: temporary file left behind"
            );
        }
        let (code, err) = run(&["inspect".as_ref(), input.as_os_str()]);
        assert_eq!(code, 2, "inspect {name}: {err}");
        assert!(err.contains(want), "inspect {name}: {err}");
    }
}

#[test]
fn cli_strip_restore_inspect_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let input = common::fixture("android/leak_service_binder.hprof");
    let mini = dir.path().join("mini.hprof");
    let back = dir.path().join("back.hprof");
    let (code, err) = run(&[
        "strip".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        mini.as_os_str(),
        "--level".as_ref(),
        "app".as_ref(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, err) = run(&[
        "restore".as_ref(),
        mini.as_os_str(),
        "-o".as_ref(),
        back.as_os_str(),
    ]);
    assert_eq!(code, 0, "{err}");
    let o = Command::new(common::oomguard_bin())
        .args(["inspect".as_ref(), mini.as_os_str(), "--json".as_ref()])
        .output()
        .unwrap();
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], "JAVA PROFILE 1.0.3");
    assert_eq!(v["id_size"], 4);
    assert!(
        v["sub_records"]["PRIMITIVE_ARRAY_NODATA_DUMP"]["count"]
            .as_u64()
            .unwrap()
            > 500
    );
    assert!(v["sub_records"].get("PRIMITIVE_ARRAY_DUMP").is_none());
    // What is left of the zygote heap is its class dumps, kept for the app objects' layouts.
    let zygote = v["heaps"]["zygote"]["objects"].as_u64().unwrap();
    assert!(zygote <= v["sub_records"]["CLASS_DUMP"]["count"].as_u64().unwrap());
    assert!(
        v["bytes"]["primitive_array_contents_stripped"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[test]
fn a_full_disk_names_the_output_and_exits_1() {
    let full = Path::new("/dev/full");
    assert!(full.exists(), "/dev/full is missing");
    let input = common::fixture("jvm/slurp_hprof-32.hprof");
    for cmd in ["strip", "restore"] {
        let (code, err) = run(&[
            cmd.as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            full.as_os_str(),
        ]);
        assert_eq!(code, 1, "{cmd}: {err}");
        assert!(
            err.starts_with("oomguard: /dev/full: writing the output failed: No space left"),
            "{cmd}: {err}"
        );
    }
}
