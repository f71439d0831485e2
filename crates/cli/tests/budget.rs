//! Issue 43's memory budget through the `oomguard` executable under a data limit
//! (`prlimit --data`, RLIMIT_DATA: what the agent's analysis child runs under): the report of
//! what fits in memory, the whole report with scratch files, and the estimate the analyser plans
//! with covering what it needs, on dumps of both shapes (one pass and two).

mod common;

use analyze::Report;
use std::path::Path;
use std::process::Command;

/// The report without its timings.
fn comparable(r: &Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v["analysis"]["timings"] = serde_json::Value::Null;
    v
}

/// Issue 43's budget: a Java 17 dump (137 MB, ~1 M objects) whose analysis in memory needs
/// more than a 40 MiB data limit (`prlimit --data`, RLIMIT_DATA: the process's private
/// writable memory; 73 MiB measured). Under it, the analyser takes the limit as its budget: in
/// memory it reports what fits (the class histogram, `analysis.budget` naming what was left
/// out), and with a scratch directory the whole report, the one made without any limit (19 MiB
/// measured). Told to ignore the limit (`--budget-mb 0`), it runs out of memory and says so
/// with its own exit code.
#[test]
fn a_scratch_directory_analyses_within_a_data_limit_the_memory_analysis_exceeds() {
    const LIMIT: u64 = 40 << 20;
    let dump = common::java_dump(100, "budget");
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("scratch");
    std::fs::create_dir(&work).unwrap();
    // Arrays of 64 KiB or more are findings (the customers' HashMap's table is one).
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"arrayMinBytes": 65536}"#).unwrap();
    let run = |out: &Path, limit: Option<u64>, args: &[&str]| {
        let mut c = match limit {
            Some(l) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--data={l}")).arg(common::oomguard_bin());
                c
            }
            None => Command::new(common::oomguard_bin()),
        };
        c.arg("analyze").arg(&dump).arg("-o").arg(out).args(args);
        c.arg("--config").arg(&config);
        // (A failed allocation exits with its own code, even where std's handler would take
        // the backtrace lock and hang: see notes/next-43.md.)
        c.env("RUST_BACKTRACE", "1")
            .output()
            .expect("prlimit (util-linux) runs")
    };
    let free = dir.path().join("free.json");
    assert!(run(&free, None, &[]).status.success());
    let read = |p: &Path| -> Report { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let full = read(&free);
    assert!(full.analysis.budget.is_none() && full.histogram.is_empty());

    // In memory under the limit: the report of what fits.
    let in_memory = dir.path().join("memory.json");
    let o = run(&in_memory, Some(LIMIT), &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("more than its budget of 40 MiB"), "{err}");
    let small = read(&in_memory);
    let b = small.analysis.budget.as_ref().expect("analysis.budget");
    assert_eq!(b.budget_bytes, LIMIT);
    assert!(b.needed_bytes > LIMIT, "{b:?}");
    assert!(b.left_out.iter().any(|s| s.starts_with("gcPaths")), "{b:?}");
    assert!(small.dominators.is_empty());
    // Paths found backwards within the same limit: each one of the full report's, by signature.
    assert!(!small.gc_paths.is_empty(), "{:?}", small.leak_objects);
    for g in &small.gc_paths {
        let sig = &g.signature;
        let found = full.gc_paths.iter().any(|f| &f.signature == sig);
        assert!(found, "{g:#?} not in {:#?}", full.gc_paths);
    }
    // Every object is in the histogram once; the detectors' classes count as the full report's.
    let counted: u64 = small.histogram.iter().map(|h| h.instance_count).sum();
    assert_eq!(counted, full.analysis.objects);
    assert_eq!(small.analysis.objects, full.analysis.objects);
    assert!(small
        .histogram
        .iter()
        .any(|h| h.class_name == "java.lang.String"));
    for c in &small.class_infos {
        let f = full
            .class_infos
            .iter()
            .find(|f| f.class_name == c.class_name);
        assert_eq!(f.map(|f| f.instance_count), Some(c.instance_count));
    }
    // The detectors' findings of objects alone: the full report's (object, reason, class,
    // detail, shallow size), without retained sizes.
    let named = |r: &Report| {
        let mut v: Vec<_> = (r.leak_objects.iter())
            .map(|o| {
                let (c, d) = (o.class_name.clone(), o.ext_detail.clone());
                (o.object_id, o.leak_reason.clone(), c, d, o.size)
            })
            .collect();
        v.sort();
        v
    };
    assert!(!full.leak_objects.is_empty(), "{:?}", full.leak_objects);
    assert_eq!(named(&small), named(&full));
    assert!(small.leak_objects.iter().all(|o| o.retained_size == 0));
    assert!(!b.left_out.iter().any(|s| s == "leakObjects"), "{b:?}");

    // Told to take no budget: the allocator's named exit, no report.
    let unbudgeted = dir.path().join("unbudgeted.json");
    let o = run(&unbudgeted, Some(LIMIT), &["--budget-mb", "0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("memory allocation of") && err.contains("over the process's data limit"),
        "{err}"
    );
    assert!(!unbudgeted.exists(), "no report is written");

    // With scratch files the whole analysis fits: the report made without a limit.
    let budgeted = dir.path().join("budgeted.json");
    let scratch = work.to_str().unwrap();
    let o = run(&budgeted, Some(LIMIT), &["--scratch-dir", scratch]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(comparable(&full), comparable(&read(&budgeted)));
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}

/// Issue 43's estimate errs high, never low, on dumps of both shapes (one pass: a Java 17 dump
/// of ~1 M objects; two passes: an ART-style dump of 400,000), in memory and with scratch
/// files, on as many threads as the machine gives and on one (where the graph is kept through
/// the dominators' second half: a child confined to one core): under a data limit of the
/// estimate (`analysis.budget.neededBytes`, what the analyser compares with its budget) the
/// whole analysis runs, told to take no budget, and gives the report made without a limit.
#[test]
fn the_estimate_covers_the_need_of_both_shapes_under_a_data_limit() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("scratch");
    std::fs::create_dir(&work).unwrap();
    let art = dir.path().join("art.hprof");
    let made = Command::new(common::oomguard_bin())
        .arg("testdata-art")
        .arg(&art)
        .args(["--image", "20000", "--zygote", "10000", "--app", "370000"])
        .args(["--mean-array-bytes", "64"])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let read = |p: &Path| -> Report { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    for (dump, shape) in [
        (common::java_dump(100, "budget"), "one pass"),
        (art, "two passes"),
    ] {
        let run = |out: &Path, limit: Option<u64>, args: &[&str]| {
            let mut c = Command::new("prlimit");
            if let Some(l) = limit {
                c.arg(format!("--data={l}"));
            }
            c.arg(common::oomguard_bin()).arg("analyze").arg(&dump);
            c.arg("-o").arg(out).args(args).env("RUST_BACKTRACE", "0");
            c.output().expect("prlimit (util-linux) runs")
        };
        let free = dir.path().join("free.json");
        assert!(run(&free, None, &[]).status.success());
        let full = read(&free);
        for scratch in [None, Some(work.to_str().unwrap())] {
            let extra: Vec<&str> = scratch.map_or(vec![], |d| vec!["--scratch-dir", d]);
            let est = dir.path().join("estimate.json");
            let o = run(&est, None, &[&["--budget-mb", "1"], &extra[..]].concat());
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let b = read(&est).analysis.budget.expect("the census's estimate");
            assert!(b.estimate.contains(shape), "{b:?}");
            for threads in ["0", "1"] {
                let out = dir.path().join("limited.json");
                let args = [&["--budget-mb", "0", "--threads", threads], &extra[..]].concat();
                let o = run(&out, Some(b.needed_bytes), &args);
                assert!(
                    o.status.success(),
                    "{shape}, scratch {scratch:?}, threads {threads}: not within the estimate \
                     of {} bytes: {}",
                    b.needed_bytes,
                    String::from_utf8_lossy(&o.stderr)
                );
                let mut r = read(&out);
                if threads == "1" {
                    // (On one thread the file is parsed in one part.)
                    r.analysis.parse_parts = full.analysis.parse_parts;
                }
                assert_eq!(comparable(&full), comparable(&r), "{shape}, {threads}");
            }
        }
    }
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}
