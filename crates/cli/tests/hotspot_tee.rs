//! The tee on a real Java 17 VM: heap dumps through `HotSpotDiagnosticMXBean.dumpHeap` with the
//! hooks on `libjvm.so`, compared with dumps of the same heap taken without any hook.
//!
//! HotSpot never writes the same bytes twice for an unchanged heap (see `normalize`), so the
//! comparison is of normalized copies: everything but the fields HotSpot itself changes from one
//! dump to the next must be equal, byte for byte.

mod common;

use hprof::{self, strip_bytes, Level, Parser, Record, Sub, Visitor};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Zero what HotSpot changes between two dumps of an unchanged heap in one process:
/// - the header's timestamp (milliseconds at the dump);
/// - LOAD_CLASS class serial numbers and the class serials in FRAME records: HotSpot keeps its
///   serial counter across dumps, so every dump numbers the classes anew (+ class count);
/// - the static `java.lang.ref.SoftReference.clock`: every GC (and `dumpHeap(live)` runs one)
///   stores the current time in it.
fn normalize(dump: &[u8]) -> Vec<u8> {
    struct N {
        zero: Vec<(usize, usize)>,
        clock_ids: HashSet<u64>,
    }
    impl Visitor for N {
        fn header(&mut self, _h: &hprof::Header, raw: &[u8]) -> Result<(), String> {
            self.zero.push((raw.len() - 8, 8));
            Ok(())
        }
        fn record(&mut self, offset: u64, rec: &Record<'_>, _raw: &[u8]) -> Result<(), String> {
            let o = offset as usize + 9;
            let n = rec.id_size as usize;
            match rec.tag {
                hprof::tag::UTF8 => {
                    if let Some((id, text)) = rec.utf8() {
                        if text == b"clock" {
                            self.clock_ids.insert(id);
                        }
                    }
                }
                hprof::tag::LOAD_CLASS => self.zero.push((o, 4)),
                hprof::tag::FRAME => self.zero.push((o + 4 * n, 4)),
                _ => {}
            }
            Ok(())
        }
        fn sub(&mut self, offset: u64, sub: &Sub<'_>, raw: &[u8]) -> Result<(), String> {
            if let Sub::Class(c) = sub {
                for (name, _ty, v) in c.statics() {
                    if self.clock_ids.contains(&name) {
                        let at = v.as_ptr() as usize - raw.as_ptr() as usize;
                        self.zero.push((offset as usize + at, v.len()));
                    }
                }
            }
            Ok(())
        }
    }
    let mut n = N {
        zero: Vec::new(),
        clock_ids: HashSet::new(),
    };
    let mut p = Parser::new();
    p.feed(dump, &mut n).expect("dump parses");
    p.finish().expect("dump is complete");
    let mut out = dump.to_vec();
    for (o, len) in n.zero {
        out[o..o + len].fill(0);
    }
    out
}

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// The crate as a JNI library (built by `common::cdylib_dir`).
fn jvm_lib() -> PathBuf {
    common::cdylib_dir().join("liboomguard.so")
}

/// Run the probe program: `pairs` (plain, hooked) pairs after a hooked warm-up, in `dir`.
fn run_probe(classes: &Path, dir: &Path, pairs: u32, mb: u32) -> Vec<serde_json::Value> {
    let mut child = Command::new("java")
        // Serial GC that compacts fully at every full GC: otherwise it leaves dead space as
        // filler arrays where the previous dump call's objects were, and the heap of two
        // consecutive dumps is not the same.
        .args([
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:MarkSweepDeadRatio=0",
            "-XX:MarkSweepAlwaysCompactCount=1",
            "-cp",
        ])
        .arg(classes)
        .arg("dev.oomguard.testing.DumpProbe")
        .arg(jvm_lib())
        .arg(dir)
        .arg(pairs.to_string())
        .arg(mb.to_string())
        .spawn()
        .expect("java runs");
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the JVM hung for 300 s while dumping");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let reports_path = dir.join("reports.jsonl");
    assert!(
        status.success(),
        "probe JVM failed: {status}: {}",
        std::fs::read_to_string(&reports_path).unwrap_or_default()
    );
    let reports = std::fs::read_to_string(dir.join("reports.jsonl")).unwrap();
    let _ = std::fs::remove_file(dir.join("reports.jsonl"));
    reports
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn hotspot_dumps_through_the_tee_equal_plain_dumps_and_their_strip_50_times() {
    let root = common::root();
    let classes = root.join(format!("target/test-classes-tee-{}", std::process::id()));
    common::javac(
        &[&root.join("java/dev/oomguard/testing/DumpProbe.java")],
        &classes,
    );
    let dir = tempfile::tempdir().unwrap();
    let mut pairs_checked = 0;
    for batch in 0..5 {
        let reports = run_probe(&classes, dir.path(), 10, 4);
        assert_eq!(reports.len(), 21, "batch {batch}: {reports:?}");
        for r in &reports {
            assert!(r.get("error").is_none(), "{r}");
        }
        // Every hooked dump: caught by libjvm.so, mini == `oomguard strip` of the full file.
        let mut analysed = batch > 0;
        for r in reports.iter().filter(|r| r["hooked"] == true) {
            let caught = r["caught_by"].as_array().unwrap();
            assert!(
                caught
                    .iter()
                    .any(|l| l.as_str().unwrap().ends_with("/libjvm.so")),
                "{r}"
            );
            let full = std::fs::read(r["full"].as_str().unwrap()).unwrap();
            assert_eq!(full.len() as u64, r["full_bytes"].as_u64().unwrap());
            let mini_path = r["mini"]["path"]
                .as_str()
                .unwrap_or_else(|| panic!("no mini: {r}"));
            let mini = std::fs::read(mini_path).unwrap();
            let (want, _) = strip_bytes(&full, Level::Arrays).unwrap();
            assert!(
                mini == want,
                "mini file differs from strip of the full file: {r}"
            );
            let cli = dir.path().join("cli-strip.hprof");
            // Its summary goes into the assertion, not the test log (50 runs).
            let o = Command::new(common::oomguard_bin())
                .arg("strip")
                .arg(r["full"].as_str().unwrap())
                .arg("-o")
                .arg(&cli)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "oomguard strip: {}\n{}{}",
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            assert_eq!(sha(&std::fs::read(&cli).unwrap()), sha(&mini), "{r}");
            let mut p = Parser::new();
            struct Nop;
            impl Visitor for Nop {}
            p.feed(&mini, &mut Nop).expect("mini parses");
            p.finish().expect("mini complete");
            // Both files open with `oomguard analyze`, and say the same about the heap.
            if !analysed {
                analysed = true;
                let mut found = Vec::new();
                for (name, path) in [("full", r["full"].as_str().unwrap()), ("mini", mini_path)] {
                    let out = dir.path().join(format!("report-{name}.json"));
                    let o = Command::new(common::oomguard_bin())
                        .arg("analyze")
                        .arg(path)
                        .arg("-o")
                        .arg(&out)
                        .output()
                        .unwrap();
                    assert!(
                        o.status.success(),
                        "analyze {name}: {}",
                        String::from_utf8_lossy(&o.stderr)
                    );
                    let rep: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
                    assert!(!rep["dominators"].as_array().unwrap().is_empty(), "{name}");
                    found.push((rep["gcPaths"].clone(), rep["classInfos"].clone()));
                    std::fs::remove_file(&out).unwrap();
                }
                assert_eq!(
                    found[0], found[1],
                    "full and mini dumps analyse differently"
                );
            }
        }
        // Each plain dump against the hooked dump that follows it (same heap, same call site).
        for w in reports.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            if a["hooked"] == true {
                continue;
            }
            let plain = std::fs::read(a["full"].as_str().unwrap()).unwrap();
            let hooked = std::fs::read(b["full"].as_str().unwrap()).unwrap();
            if plain.len() != hooked.len() {
                // Keep the pair for a look.
                let keep = common::root().join("target/tee-mismatch");
                std::fs::create_dir_all(&keep).unwrap();
                std::fs::write(keep.join("plain.hprof"), &plain).unwrap();
                std::fs::write(keep.join("hooked.hprof"), &hooked).unwrap();
            }
            assert_eq!(plain.len(), hooked.len(), "{a} {b}");
            assert_eq!(
                sha(&normalize(&plain)),
                sha(&normalize(&hooked)),
                "normalized dumps differ: {a} {b}"
            );
            pairs_checked += 1;
        }
        for e in std::fs::read_dir(dir.path()).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
    }
    assert_eq!(pairs_checked, 50);
    let _ = std::fs::remove_dir_all(&classes);
}

#[test]
fn normalize_keeps_real_differences() {
    // A dump normalizes to itself, and a changed array byte survives normalization.
    let d = common::java_dump(1, "normtest");
    let a = std::fs::read(d).unwrap();
    assert_eq!(normalize(&a), normalize(&a));
    let (_, stats) = strip_bytes(&a, Level::Arrays).unwrap();
    assert!(stats.arrays_stripped > 0);
    let mut b = a.clone();
    let last = b.len() - 20;
    b[last] ^= 0xff;
    assert_ne!(sha(&normalize(&a)), sha(&normalize(&b)));
}
