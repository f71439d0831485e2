//! The analysis's memory budget (`Config::budget_bytes`, issue 43's honest limits): whether the
//! whole analysis fits, and the report of what fits when it does not.
//!
//! How: a dump small for its budget is analysed at once ([`may_exceed`]: an upper bound from its
//! file size alone). Otherwise the census (`index::census`, one streaming pass in memory that grows
//! with the classes and strings, not the objects) counts its objects and the references they may
//! hold, and [`need`] estimates from those counts what the analysis would take: if that is within
//! the budget, the analysis runs as always (its report is the same); if not, the report is the
//! census's: the class histogram (`histogram[]`, shallow sizes as the full analysis counts them),
//! the detectors' classes with their instance counts (`classInfos[]`), what the detectors find in
//! an object alone (`leakObjects[]`, a second streaming pass: `index::findings`), a path per class
//! and reason of those (`gcPaths[]`, a streaming pass per step: `index::backward`), and
//! `analysis.budget` saying what the budget was, what the analysis was estimated to need, and what
//! the report leaves out. Never an allocation that fails (the process would abort), never a silent
//! failure.
//!
//! The estimate is the process's data (what `RLIMIT_DATA` counts: its private writable memory,
//! thread stacks and capacities included), measured with `prlimit --data` on the bench dump (3.5 M
//! objects) and the 10 M- and 30 M-object dumps of `scripts/bench.sh analyze` (notes/next-43.md),
//! and the generated ART-style dumps of 1.4 M and 5.4 M objects (two passes), and rounded up: per
//! object and per reference, and per class and per string byte beside a fixed part. The census
//! counts the references that are not null (the graph's edges, and those to objects the dump
//! lacks), so the estimate errs high by the constants' margins alone (1.06 to 2.2 times the
//! measured need: the fixed part allows for a phone's threads, more than the 2 of the machine
//! measured).
#![forbid(unsafe_code)]

use crate::index::backward::Traced;
use crate::index::{Counts, Found};
use crate::report::{AnalysisInfo, LeftOut, Report};
use serde::{Deserialize, Serialize};

const MIB: u64 = 1 << 20;
/// What the analysis takes beside its per-object and per-reference arrays: thread stacks, the
/// allocator's slack, the parsers' buffers, the report's own.
pub const FIXED_BYTES: u64 = 24 * MIB;

/// `analysis.budget`: only in a report made within a budget too small for the whole analysis.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct Budget {
    /// The memory the analysis was given, in bytes (`Config::budget_bytes`).
    pub budget_bytes: u64,
    /// What the whole analysis was estimated to need, in bytes.
    pub needed_bytes: u64,
    /// What the estimate was made from.
    pub estimate: String,
    /// The parts of a report this one lacks.
    pub left_out: Vec<String>,
    /// Why, in words.
    pub reason: String,
}

/// `histogram[]`: one class's objects (by name: classes of one name from several loaders
/// together) and their shallow bytes. Only in a report made within a budget too small for the
/// whole analysis (see [`Budget`]), largest first, at most [`MAX_HISTOGRAM`] rows.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct HistogramRow {
    pub class_name: String,
    pub instance_count: u64,
    pub shallow_size: u64,
}

/// `histogram[]` rows kept (the most bytes, then the most objects); the others are counted in
/// `analysis.leftOut.histogram`.
pub const MAX_HISTOGRAM: usize = 1000;

/// What a report made within too small a budget leaves out. Its `leakObjects[]` are what the
/// detectors find in an object alone (`index::findings`): the rest is left out.
const LEFT_OUT: [&str; 5] = [
    "gcPaths' retained sizes, traces and groups by path: gcPaths[] holds one path per class and \
     reason of leakObjects[] (its first object's, a shortest path found backwards, which may \
     differ from the whole analysis's where several are as short), leftOut.gcPaths counts those \
     without one (unreachable, or past the search's caps)",
    "the retainedSize and signature of leakObjects[], and the findings that need the graph \
     (Service Leak, the Window and NativeAllocationRegistry counts, Large Retained Size): \
     leakObjects[] lists what the detectors find in each object alone, reachable or not",
    "dominators (retained sizes)",
    "reachability (every object is counted, reachable or not)",
    "classInfos' leak counts",
];

/// Whether the analysis of a dump of `bytes` may need more than `budget`: then the census
/// runs first (about a fifth of the analysis's time) to estimate it. From the file's size
/// alone, with twice the margin of the most measured per byte of file: 1.2 bytes in memory
/// (the bench dump stripped: 3.5 M objects in 193 MB, 212 MiB), 0.13 with `scratch` files
/// (the same: 24 MiB in all), so a quarter. A dump of smaller
/// objects than these may still run out of memory without a census; the agent then asks for
/// the census alone (`Config::census_only`), and the executable exits with its own code.
pub fn may_exceed(bytes: u64, scratch: bool, budget: u64) -> bool {
    let per_byte = if scratch {
        bytes / 4
    } else {
        bytes.saturating_mul(3) / 2
    };
    FIXED_BYTES.saturating_add(per_byte) > budget
}

/// Whether scratch files of at most `cap` bytes surely hold the analysis's large arrays for a
/// dump of `bytes`, from its size alone: the most measured per byte of file is 1.2 (the bench
/// dump stripped: 3.5 M objects in 193 MB, 223 MB of scratch files at their peak), so a cap of
/// 1.5 times the file. Otherwise the census tells ([`scratch_bytes`]).
pub fn scratch_surely_fits(bytes: u64, cap: u64) -> bool {
    cap >= bytes.saturating_add(bytes / 2)
}

/// What the analysis's scratch files of a dump with these counts take at their peak, about, in
/// bytes (rounded up from the measured peaks: 59 bytes an object with its references on the
/// ART-style dump of 1.4 M objects, 63 on the bench dump).
pub fn scratch_bytes(c: &Counts) -> u64 {
    (64 * c.objects).saturating_add(8 * c.references_at_most)
}

/// What the whole analysis of a dump with these counts is estimated to need, in bytes (see the
/// module documentation), with its large arrays in `scratch` files or not.
pub fn need(c: &Counts, scratch: bool) -> u64 {
    let (n, m) = (c.objects, c.references_at_most);
    // The id map (kept in memory, whatever the scratch files).
    let id_map = c.id_map_bytes;
    let per = match (scratch, c.two_passes) {
        // One pass in memory: measured 243 MiB at 3.5 M objects and 8.1 M references, 723 at
        // 10 M and 22.9 M (estimates 289 and 764).
        (false, false) => 50 * n + 12 * m,
        // Two passes in memory: measured 90 MiB at 1.4 M objects and 3.6 M references counted,
        // 299 at 5.4 M and 13.8 M (ART-style; estimates 110 and 356).
        (false, true) => 44 * n + 8 * m,
        // One pass over scratch files: the id map, and a byte an object for the rest (the
        // measured need does not grow beyond the id map: 24-25 MiB at 3.5 M and at 10 M
        // objects).
        (true, false) => id_map + n,
        // Two passes over scratch files: the same and each node's worker byte (measured 13 MiB
        // at 1.4 M objects, 26 at 5.4 M).
        (true, true) => id_map + 2 * n,
    };
    FIXED_BYTES
        .saturating_add(2 * c.string_bytes)
        .saturating_add(512 * c.classes)
        .saturating_add(per)
}

/// Why a report holds only what fits: the budget and the estimate, whether the large arrays
/// were to be in scratch files, and whether an analysis within that budget already ran out of
/// memory (`Config::census_only`).
pub struct Why {
    pub budget: u64,
    pub need: u64,
    pub scratch: bool,
    pub ran_out: bool,
}

/// The report of what fits: the census's histogram and detector classes, what the detectors
/// `found` in objects alone (`leakObjects[]`, without retained sizes or signatures), and why
/// the rest is missing.
pub fn reduced(
    c: Counts,
    found: Found,
    traced: Traced,
    why: Why,
    input_bytes: u64,
    running_info: serde_json::Value,
) -> Report {
    let mut rows: Vec<HistogramRow> = c
        .histogram
        .iter()
        .map(|(name, &(n, bytes))| HistogramRow {
            class_name: name.clone(),
            instance_count: n,
            shallow_size: bytes,
        })
        .collect();
    sys::order::sort_by(&mut rows, |a, b| {
        (b.shallow_size, b.instance_count, &a.class_name).cmp(&(
            a.shallow_size,
            a.instance_count,
            &b.class_name,
        ))
    });
    let left = rows.len().saturating_sub(MAX_HISTOGRAM) as u64;
    rows.truncate(MAX_HISTOGRAM);
    let estimate = format!(
        "{} objects, at most {} references, {} classes, {} bytes of strings; {}, {}",
        c.objects,
        c.references_at_most,
        c.classes,
        c.string_bytes,
        if c.two_passes {
            "two passes"
        } else {
            "one pass"
        },
        if why.scratch {
            "large arrays in scratch files"
        } else {
            "in memory (no scratch directory, or too little room in it)"
        },
    );
    let header = c.header;
    Report {
        running_info,
        analysis: AnalysisInfo {
            format: header.format.to_string(),
            id_size: header.id_size,
            input_bytes,
            objects: c.objects,
            gc_roots: c.gc_roots,
            parse_parts: 1,
            sizes: c.sizes,
            left_out: LeftOut {
                histogram: left,
                leak_objects: found.left,
                gc_paths: traced.left,
                ..LeftOut::default()
            },
            budget: Some(Budget {
                budget_bytes: why.budget,
                needed_bytes: why.need,
                estimate,
                left_out: LEFT_OUT.iter().map(|s| s.to_string()).collect(),
                reason: reason(&why),
            }),
            ..AnalysisInfo::default()
        },
        class_infos: c.class_infos,
        leak_objects: found.objects,
        gc_paths: traced.paths,
        histogram: rows,
        ..Report::default()
    }
}

/// `analysis.budget.reason`.
fn reason(w: &Why) -> String {
    let (need, budget) = (w.need.div_ceil(MIB), w.budget / MIB);
    let what = "this report holds what streaming passes over the dump find in memory that \
                does not grow with its objects";
    match (w.ran_out, w.budget) {
        (true, 0) => format!("the whole analysis ran out of memory before: {what}"),
        (true, _) => format!(
            "the whole analysis ran out of memory within its budget of {budget} MiB before \
             (estimated to need about {need} MiB): {what}"
        ),
        (false, _) => format!(
            "the whole analysis would need about {need} MiB, more than its budget of {budget} \
             MiB: {what}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::fixture;
    use crate::{Config, Input};
    use std::collections::BTreeMap;

    const FIXTURES: [&str; 10] = [
        "jvm/openjdk_jdk11_04_x64.hprof",
        "jvm/oracle_jdk8_05_x64.hprof",
        "jvm/heapdump_hashmap.hprof",
        "jvm/heapdump_string.hprof",
        "jvm/ahat_RI.hprof",
        "jvm/slurp_hprof-32.hprof",
        "jvm/sun_jdk6_31_hprofagent_compressedOops.hprof",
        "jvm/sun_jdk6_32bit.hprof",
        "android/leak_service_binder.hprof",
        "android/leak_service_binder_ignored.hprof",
    ];

    /// The histogram the full index makes: objects and shallow bytes by class name.
    fn index_histogram(input: &Input<'_>) -> BTreeMap<String, (u64, u64)> {
        index_counts(input).0
    }

    /// [`index_histogram`], and the edges of the graph with the references to rooted classes
    /// it leaves out, and the references it dropped (to objects the dump lacks).
    fn index_counts(input: &Input<'_>) -> (BTreeMap<String, (u64, u64)>, u64, u64) {
        let mut tm = crate::Timings::default();
        let (ix, _, _) = crate::index::build_index(
            input,
            &Config::default(),
            std::time::Instant::now(),
            &mut tm,
        )
        .unwrap();
        let mut h: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for v in 0..ix.len() {
            let e = h
                .entry(ix.classes[ix.class_of[v] as usize].name.clone())
                .or_default();
            e.0 += 1;
            e.1 += ix.shallow[v] as u64;
        }
        (
            h,
            ix.stats.edges + ix.stats.rooted_class_refs,
            ix.stats.missing_refs,
        )
    }

    #[test]
    fn the_census_counts_every_class_as_the_full_index_does() {
        for rel in FIXTURES {
            let path = fixture(rel);
            let file = Input::File(&path);
            // The heap dump the analysis reads, of a file that holds several.
            let spans = crate::snapshot::find(&file).unwrap();
            let (_, skip) = crate::snapshot::choose(&spans, None).unwrap();
            let input = match skip.is_empty() {
                true => Input::File(&path),
                false => Input::Snapshot(crate::Picked {
                    base: &file,
                    skip: &skip,
                }),
            };
            let c = crate::index::census(&input).unwrap();
            // Reading the reference fields' offsets alone counts what reading every offset does.
            let every = crate::index::census::census_of_every_offset(&input).unwrap();
            assert_eq!(c.references_at_most, every.references_at_most, "{rel}");
            let (want, edges, dropped) = index_counts(&input);
            // The references are a bound of the graph's edges: those and the references to
            // objects the dump lacks, but for null implicit ones (a class's superclass or
            // loader, a primitive array's class when the dump roots or lacks it). Null fields
            // are not counted.
            assert!(c.references_at_most >= edges, "{rel}: {c:?} {edges}");
            let prims: u64 = (c.histogram.iter())
                .filter(|(k, _)| k.ends_with("[]") && !k.contains('.') && !k.ends_with("[][]"))
                .map(|(_, v)| v.0)
                .sum();
            let slack = dropped + 2 * c.classes + prims;
            assert!(
                c.references_at_most <= edges + slack,
                "{rel}: {} references counted, {edges} edges, {slack} slack",
                c.references_at_most
            );
            let keys: std::collections::BTreeSet<&String> =
                c.histogram.keys().chain(want.keys()).collect();
            let differ: Vec<_> = keys
                .into_iter()
                .filter(|k| c.histogram.get(*k) != want.get(*k))
                .map(|k| (k, c.histogram.get(k), want.get(k)))
                .collect();
            assert!(
                differ.is_empty(),
                "{rel}: (class, census, index): {differ:?}"
            );
            assert_eq!(c.objects, c.histogram.values().map(|e| e.0).sum::<u64>());
        }
    }

    fn without_timings(r: &Report) -> serde_json::Value {
        let mut v = serde_json::to_value(r).unwrap();
        v["analysis"]["timings"] = serde_json::Value::Null;
        v
    }

    #[test]
    fn within_too_small_a_budget_the_report_keeps_the_histogram_and_says_what_it_left_out() {
        for rel in [
            "jvm/openjdk_jdk11_04_x64.hprof",
            "android/leak_service_binder.hprof",
        ] {
            let path = fixture(rel);
            let run = |budget_bytes: u64| {
                let cfg = Config {
                    budget_bytes,
                    ..Config::default()
                };
                crate::analyze(Input::File(&path), &cfg, serde_json::json!({"t": 1})).unwrap()
            };
            let full = run(0);
            assert!(full.analysis.budget.is_none() && full.histogram.is_empty());
            assert!(!full.dominators.is_empty(), "{rel}");
            // A budget the census finds too small: the reduced report.
            let counts = crate::index::census(&Input::File(&path)).unwrap();
            let need = need(&counts, false);
            let small = run(FIXED_BYTES - 1);
            let b = small.analysis.budget.as_ref().expect("analysis.budget");
            assert_eq!(
                (b.budget_bytes, b.needed_bytes),
                (FIXED_BYTES - 1, need),
                "{rel}"
            );
            assert!(b.left_out.iter().any(|s| s.starts_with("gcPaths")), "{b:?}");
            assert!(b.reason.contains("budget of"), "{b:?}");
            assert!(small.dominators.is_empty(), "{rel}");
            // Paths (found backwards), without retained sizes or traces.
            for g in &small.gc_paths {
                assert_eq!((g.retained_size, g.trace.nodes.len()), (0, 0), "{rel}");
            }
            assert_eq!(small.running_info, serde_json::json!({"t": 1}));
            // The histogram is the full analysis's, by class, largest first.
            let want = index_histogram(&Input::File(&path));
            let got: BTreeMap<String, (u64, u64)> = small
                .histogram
                .iter()
                .map(|r| (r.class_name.clone(), (r.instance_count, r.shallow_size)))
                .collect();
            assert_eq!(got, want, "{rel}");
            assert!(small
                .histogram
                .windows(2)
                .all(|w| w[0].shallow_size >= w[1].shallow_size));
            assert_eq!(small.analysis.objects, full.analysis.objects, "{rel}");
            assert_eq!(small.analysis.sizes, full.analysis.sizes, "{rel}");
            // The detectors' classes with the full report's instance counts (those a leak
            // alone lists there are missing: no leaks are found here).
            for c in &small.class_infos {
                assert_eq!(c.leak_instance_count, 0);
                let f = full
                    .class_infos
                    .iter()
                    .find(|f| f.class_name == c.class_name);
                assert_eq!(f.map(|f| f.instance_count), Some(c.instance_count), "{rel}");
            }
            let listed = |f: &&crate::report::ClassInfo| f.leak_instance_count == 0;
            assert_eq!(
                full.class_infos.iter().filter(listed).count(),
                small.class_infos.len(),
                "{rel}"
            );
            // A budget the whole analysis fits: the census ran, the report is the same.
            // (Whether the census runs there or not: the census runs and the analysis fits in
            // `cli`'s `a_scratch_directory_analyses_within_a_data_limit_...`.)
            assert_eq!(without_timings(&run(need)), without_timings(&full), "{rel}");
            assert_eq!(without_timings(&run(1 << 40)), without_timings(&full));
            // After a run that ran out of memory within a budget the estimate allowed: only
            // what the census counts, and why.
            let cfg = Config {
                budget_bytes: 1 << 40,
                census_only: true,
                ..Config::default()
            };
            let again = crate::analyze(Input::File(&path), &cfg, serde_json::Value::Null).unwrap();
            assert_eq!(again.histogram, small.histogram, "{rel}");
            let b = again.analysis.budget.unwrap();
            assert!(
                b.reason.contains("ran out of memory within its budget"),
                "{b:?}"
            );
        }
    }

    /// On every fixture, each finding of the full report that needs no graph (not a Service
    /// Leak, a count or a large retained size) is in the report of what fits, with its reason,
    /// class, detail and size; and each path the report of what fits found is the full
    /// report's.
    #[test]
    fn the_report_of_what_fits_holds_the_full_reports_findings_of_objects_alone() {
        let graph = [
            crate::index::SERVICE_LEAK,
            "Window Count Over Threshold",
            "NativeAllocationRegistry Count Over Threshold",
        ];
        let (mut seen, mut paths) = (0, 0);
        for rel in FIXTURES {
            let path = fixture(rel);
            let run = |budget_bytes: u64| {
                let cfg = Config {
                    budget_bytes,
                    ..Config::default()
                };
                crate::analyze(Input::File(&path), &cfg, serde_json::Value::Null).unwrap()
            };
            let (full, small) = (run(0), run(FIXED_BYTES - 1));
            assert!(small.analysis.budget.is_some(), "{rel}");
            let key = |o: &crate::report::LeakObject| {
                let (r, c, d) = (&o.leak_reason, &o.class_name, &o.ext_detail);
                (o.object_id, r.clone(), c.clone(), d.clone(), o.size)
            };
            let got: std::collections::BTreeSet<_> = small.leak_objects.iter().map(key).collect();
            for o in &full.leak_objects {
                if !graph.contains(&o.leak_reason.as_str()) {
                    assert!(got.contains(&key(o)), "{rel}: {o:?} not in {got:?}");
                    seen += 1;
                }
            }
            // Each path found backwards is one of the full report's, by signature.
            for g in &small.gc_paths {
                let sig = &g.signature;
                let found = full.gc_paths.iter().any(|f| &f.signature == sig);
                assert!(found, "{rel}: {g:#?} not in {:#?}", full.gc_paths);
                paths += 1;
            }
        }
        assert!(seen > 0, "no fixture has a finding of an object alone");
        assert!(paths >= 2, "{paths} path(s) found backwards");
    }

    /// Scratch files are planned on only within their cap: a budget the analysis fits with its
    /// large arrays in scratch files gives the whole report when the cap holds them, and the
    /// report of what fits, planned in memory, when it does not.
    #[test]
    fn scratch_files_over_their_cap_are_planned_in_memory() {
        let path = fixture("jvm/openjdk_jdk11_04_x64.hprof");
        let dir = tempfile::tempdir().unwrap();
        let counts = crate::index::census(&Input::File(&path)).unwrap();
        let (with, without) = (need(&counts, true), need(&counts, false));
        assert!(with < without, "{with} {without}");
        let run = |scratch_max_mb: u64| {
            let cfg = Config {
                budget_bytes: with,
                scratch_dir: Some(dir.path().to_path_buf()),
                scratch_max_mb,
                ..Config::default()
            };
            crate::analyze(Input::File(&path), &cfg, serde_json::Value::Null).unwrap()
        };
        let mib = scratch_bytes(&counts).div_ceil(MIB);
        let whole = run(mib);
        assert!(whole.analysis.budget.is_none() && !whole.dominators.is_empty());
        let cut = run(mib - 1);
        let b = cut.analysis.budget.expect("analysis.budget");
        assert_eq!((b.budget_bytes, b.needed_bytes), (with, without));
        assert!(b.estimate.contains("in memory"), "{b:?}");
        assert!(cut.dominators.is_empty() && !cut.histogram.is_empty());
    }

    /// The census's counts of a fixture, its objects, references, id map, strings and classes
    /// set to numbers whose every product and sum differs.
    fn counts_of(objects: u64, references: u64) -> Counts {
        let path = fixture("jvm/openjdk_jdk11_04_x64.hprof");
        let mut c = crate::index::census(&Input::File(&path)).unwrap();
        (c.objects, c.references_at_most) = (objects, references);
        (c.id_map_bytes, c.string_bytes, c.classes) = (7777, 11, 13);
        c
    }

    /// `need`: the fixed 24 MiB, 2 bytes a byte of strings, 512 a class, and per object and
    /// reference as the pass and the scratch files have it; `scratch_bytes`: 64 an object and
    /// 8 a reference.
    #[test]
    fn the_estimate_is_the_fixed_part_and_so_much_a_count() {
        assert_eq!(FIXED_BYTES, 25_165_824);
        let mut c = counts_of(1000, 3000);
        // 24 MiB, 22 bytes of strings, 6,656 of classes.
        let base = 25_172_502;
        for (scratch, two_passes, per) in [
            (false, false, 50 * 1000 + 12 * 3000),
            (false, true, 44 * 1000 + 8 * 3000),
            (true, false, 7777 + 1000),
            (true, true, 7777 + 2 * 1000),
        ] {
            c.two_passes = two_passes;
            assert_eq!(need(&c, scratch), base + per, "{scratch} {two_passes}");
        }
        assert_eq!(scratch_bytes(&c), 64 * 1000 + 8 * 3000);
    }

    /// `may_exceed` and `scratch_surely_fits` at their bounds: 1.5 bytes a byte of file in
    /// memory, a quarter with scratch files, beside the fixed part; scratch files of 1.5 times
    /// the file.
    #[test]
    fn the_file_size_alone_decides_at_its_bounds() {
        let f = FIXED_BYTES;
        assert!(!may_exceed(4, false, f + 6) && may_exceed(4, false, f + 5));
        assert!(!may_exceed(8, true, f + 2) && may_exceed(8, true, f + 1));
        assert!(!may_exceed(0, false, f) && may_exceed(0, true, f - 1));
        assert!(scratch_surely_fits(4, 6) && !scratch_surely_fits(4, 5));
    }

    #[test]
    fn the_reason_gives_the_estimate_rounded_up_and_the_budget_down_in_mib() {
        let what = "this report holds what streaming passes over the dump find in memory that \
                    does not grow with its objects";
        let why = |ran_out, budget| Why {
            budget,
            need: 3 * MIB + 1,
            scratch: false,
            ran_out,
        };
        assert_eq!(
            reason(&why(false, 2 * MIB + 5)),
            format!(
                "the whole analysis would need about 4 MiB, more than its budget of 2 MiB: {what}"
            )
        );
        assert_eq!(
            reason(&why(true, 2 * MIB + 5)),
            format!(
                "the whole analysis ran out of memory within its budget of 2 MiB before \
                 (estimated to need about 4 MiB): {what}"
            )
        );
        assert_eq!(
            reason(&why(true, 0)),
            format!("the whole analysis ran out of memory before: {what}")
        );
    }

    /// The report of what fits holds each part it is given, and the histogram's largest rows
    /// (the most bytes, then the most objects, then by name), the others counted.
    #[test]
    fn the_report_of_what_fits_holds_each_part_it_is_given() {
        let mut c = counts_of(1000, 3000);
        (c.gc_roots, c.two_passes) = (17, true);
        let class_infos = vec![crate::report::ClassInfo {
            class_name: "X".into(),
            instance_count: 4,
            ..Default::default()
        }];
        c.class_infos = class_infos.clone();
        let (header, sizes) = (c.header, c.sizes);
        let row = |n: &str, count, bytes| (n.to_string(), (count, bytes));
        let mut h: BTreeMap<String, (u64, u64)> =
            [row("A", 1, 500), row("C", 2, 500), row("B", 2, 500)].into();
        h.extend((0..MAX_HISTOGRAM).map(|i| row(&format!("Z{i:04}"), 1, 10)));
        c.histogram = h;
        let leak = crate::report::LeakObject {
            class_name: "X".into(),
            object_id: 9,
            ..Default::default()
        };
        let found = Found {
            objects: vec![leak.clone()],
            left: 5,
        };
        let path = crate::report::GcPath {
            class_name: "X".into(),
            ..Default::default()
        };
        let traced = Traced {
            paths: vec![path.clone()],
            left: 7,
        };
        let why = Why {
            budget: 40 * MIB,
            need: 3 * MIB + 1,
            scratch: true,
            ran_out: false,
        };
        let why_reason = reason(&why);
        let r = reduced(c, found, traced, why, 12345, serde_json::json!({"r": 2}));
        assert_eq!(r.running_info, serde_json::json!({"r": 2}));
        let a = &r.analysis;
        assert_eq!(
            (
                a.format.as_str(),
                a.id_size,
                a.input_bytes,
                a.objects,
                a.gc_roots
            ),
            (
                header.format.to_string().as_str(),
                header.id_size,
                12345,
                1000,
                17
            )
        );
        assert!(!a.format.is_empty() && a.id_size > 0);
        assert_eq!((a.parse_parts, a.sizes), (1, sizes));
        let left_out = LeftOut {
            histogram: 3,
            leak_objects: 5,
            gc_paths: 7,
            class_infos: 0,
        };
        assert_eq!(a.left_out, left_out);
        let want = Budget {
            budget_bytes: 40 * MIB,
            needed_bytes: 3 * MIB + 1,
            estimate: "1000 objects, at most 3000 references, 13 classes, 11 bytes of strings; \
                       two passes, large arrays in scratch files"
                .into(),
            left_out: LEFT_OUT.iter().map(|s| s.to_string()).collect(),
            reason: why_reason,
        };
        assert_eq!(a.budget.as_ref(), Some(&want));
        assert_eq!((r.class_infos, r.leak_objects), (class_infos, vec![leak]));
        assert_eq!(r.gc_paths, vec![path]);
        let names: Vec<&str> = r.histogram.iter().map(|h| h.class_name.as_str()).collect();
        assert_eq!(names.len(), MAX_HISTOGRAM);
        assert_eq!(&names[..5], &["B", "C", "A", "Z0000", "Z0001"]);
        assert_eq!(names[MAX_HISTOGRAM - 1], "Z0996");
        let b = &r.histogram[0];
        assert_eq!((b.instance_count, b.shallow_size), (2, 500));
    }
}
