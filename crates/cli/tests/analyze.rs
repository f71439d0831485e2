//! The heap analyser on real dumps: a real Java 17 program that plants every leak the detectors
//! know, LeakCanary's Android fixture, stripped twins of every fixture, and bad input on the
//! command line.

mod common;

use analyze::{self, Config, Input, Report};
use hprof::{strip_bytes, Level};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The dump of `tests/java/leakapp/LeakApp.java`, made once per test run.
fn leakapp_dump() -> &'static Path {
    static DUMP: OnceLock<PathBuf> = OnceLock::new();
    DUMP.get_or_init(|| {
        let dir = common::root().join(format!("target/test-dumps/leakapp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let src = common::root().join("crates/cli/tests/java/leakapp");
        let mut sources = Vec::new();
        let mut stack = vec![src];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "java") {
                    sources.push(p);
                }
            }
        }
        let refs: Vec<&Path> = sources.iter().map(|p| p.as_path()).collect();
        let classes = dir.join("classes");
        common::javac(&refs, &classes);
        let out = dir.join("leakapp.hprof");
        let st = Command::new("java")
            .arg("-Xmx256m")
            .arg("-cp")
            .arg(&classes)
            .arg("LeakApp")
            .arg(&out)
            .status()
            .expect("java runs");
        assert!(st.success(), "LeakApp failed");
        out
    })
}

fn test_config() -> Config {
    Config {
        window_max_count: 50,
        native_allocation_registry_max_count: 64,
        large_retained_bytes: 2 << 20,
        ..Config::default()
    }
}

fn run(input: Input<'_>, cfg: &Config) -> Report {
    analyze::analyze(input, cfg, serde_json::json!({"incident": "test"})).expect("analysis")
}

fn refs(p: &analyze::report::GcPath) -> Vec<&str> {
    p.path.iter().map(|i| i.reference.as_str()).collect()
}

/// (reason, class) -> instances, from the report's gcPaths.
fn findings(r: &Report) -> Vec<(String, String, u64)> {
    let mut v: Vec<(String, String, u64)> = Vec::new();
    for g in &r.gc_paths {
        match v
            .iter_mut()
            .find(|e| e.0 == g.leak_reason && e.1 == g.class_name)
        {
            Some(e) => e.2 += g.instance_count,
            None => v.push((
                g.leak_reason.clone(),
                g.class_name.clone(),
                g.instance_count,
            )),
        }
    }
    v.sort();
    v
}

#[test]
fn planted_static_leak_is_named_and_tops_the_dominators() {
    let r = run(Input::File(leakapp_dump()), &test_config());
    assert_eq!(r.running_info, serde_json::json!({"incident": "test"}));
    // The destroyed activity, held by the static field LeakApp$Registry.sLeaked.
    let g = r
        .gc_paths
        .iter()
        .find(|g| g.class_name == "LeakApp$MainActivity")
        .expect("a gcPath for the destroyed activity");
    assert_eq!(g.leak_reason, "Activity Leak");
    assert_eq!(g.instance_count, 1);
    let item = g
        .path
        .iter()
        .find(|i| i.reference == "LeakApp$Registry.sLeaked")
        .unwrap_or_else(|| panic!("path names the static field: {:?}", refs(g)));
    assert_eq!(item.reference_type, "STATIC_FIELD");
    assert_eq!(item.declared_class, "LeakApp$Registry");
    assert_eq!(g.path.last().unwrap().reference, "LeakApp$MainActivity");
    assert_eq!(g.signature.len(), 40);

    // It retains its 64 byte[65536] (each with a 16-byte header), an ArrayList, its
    // elementData, and itself: nothing else.
    let top = &r.dominators[0];
    assert_eq!(
        top.class_name,
        "LeakApp$MainActivity",
        "{:#?}",
        &r.dominators[..3]
    );
    assert_eq!(top.count, 1);
    let arrays = 64 * (65536 + 16);
    assert!(
        top.retained_size >= arrays && top.retained_size < arrays + 2048,
        "retained {} vs {arrays} of arrays",
        top.retained_size
    );
    assert!(top
        .path
        .iter()
        .any(|i| i.reference == "LeakApp$Registry.sLeaked"));
    let lo = r
        .leak_objects
        .iter()
        .find(|o| o.class_name == "LeakApp$MainActivity")
        .unwrap();
    assert_eq!(lo.retained_size, top.retained_size);
    assert_eq!(lo.ext_detail, "mDestroyed is true");
}

/// The leak traces of the planted leaks: from the static field that holds them, each object's
/// status, and the suspect references between the class and the leaking object.
#[test]
fn planted_leaks_have_traces_from_their_static_fields() {
    let r = run(Input::File(leakapp_dump()), &test_config());
    let trace = |reason: &str, class: &str| {
        let g = r
            .gc_paths
            .iter()
            .find(|g| g.leak_reason == reason && g.class_name == class)
            .unwrap_or_else(|| panic!("no {reason} {class}"));
        let rows: Vec<(String, &str, String, bool)> = g
            .trace
            .nodes
            .iter()
            .map(|n| {
                (
                    n.class_name.clone(),
                    n.status.as_str(),
                    n.status_reason.clone(),
                    n.suspect,
                )
            })
            .collect();
        (g.trace.root.clone(), rows)
    };
    let row =
        |c: &str, s: &'static str, why: &str, sus: bool| (c.to_string(), s, why.to_string(), sus);
    let class = "a class is never leaking";
    assert_eq!(
        trace("Activity Leak", "LeakApp$MainActivity"),
        (
            "class LeakApp$Registry, static field sLeaked".to_string(),
            vec![
                row("LeakApp$Registry", "NOT_LEAKING", class, true),
                row(
                    "LeakApp$MainActivity",
                    "LEAKING",
                    "mDestroyed is true",
                    false
                ),
            ]
        )
    );
    assert_eq!(
        trace("Fragment Leak", "LeakApp$DetailFragment"),
        (
            "class LeakApp$Holder, static field sThings".to_string(),
            vec![
                row("LeakApp$Holder", "NOT_LEAKING", class, true),
                row("java.lang.Object[]", "UNKNOWN", "", true),
                row(
                    "LeakApp$DetailFragment",
                    "LEAKING",
                    "mFragmentManager is null",
                    false
                ),
            ]
        )
    );
}

#[test]
fn each_detector_finds_its_planted_leak_and_only_it() {
    let r = run(Input::File(leakapp_dump()), &test_config());
    let f = findings(&r);
    let has = |reason: &str, class: &str, n: u64| {
        assert!(
            f.iter().any(|e| e.0 == reason && e.1 == class && e.2 == n),
            "want {n} x {reason} {class} in {f:#?}"
        )
    };
    has("Activity Leak", "LeakApp$MainActivity", 1);
    // A finishing activity (mFinished, not mDestroyed) is on its way out, not leaking (issue
    // 42): neither it nor the live one is a finding.
    assert!(
        !f.iter().any(|e| e.1 == "LeakApp$SettingsActivity"),
        "{f:#?}"
    );
    has("Fragment Leak", "LeakApp$DetailFragment", 1); // detached; the attached one is not
    has("Bitmap Size Over Threshold", "android.graphics.Bitmap", 1); // 1080x1920, not 100x100
    has("Array Size Over Threshold", "byte[]", 1); // 300 KB; 64 KB ones are not
    has("Window Count Over Threshold", "LeakApp$PhoneWindow", 60);
    // The generic top-N detector: the only group retaining 2 MB or more is the leaked activity
    // itself, a holder of a leak's objects: no card of its own (issue 42: one leak, one card),
    // but first among the dominators.
    assert_eq!(
        f.iter().filter(|e| e.0 == "Large Retained Size").count(),
        0,
        "{f:#?}"
    );
    assert_eq!(r.dominators[0].class_name, "LeakApp$MainActivity");
    has(
        "NativeAllocationRegistry Count Over Threshold",
        "libcore.util.NativeAllocationRegistry",
        70,
    );
    let bm = r
        .leak_objects
        .iter()
        .find(|o| o.leak_reason == "Bitmap Size Over Threshold")
        .unwrap();
    assert_eq!(bm.ext_detail, "1080x1920");
    let frag = r
        .gc_paths
        .iter()
        .find(|g| g.leak_reason == "Fragment Leak")
        .unwrap();
    assert!(
        refs(frag).contains(&"LeakApp$Holder.sThings"),
        "{:?}",
        refs(frag)
    );
    assert!(
        refs(frag).contains(&"java.lang.Object[][2]"),
        "{:?}",
        refs(frag)
    );
    let ci = |name: &str| {
        r.class_infos
            .iter()
            .find(|c| c.class_name == name)
            .unwrap_or_else(|| panic!("classInfo {name}"))
            .clone()
    };
    // Finishing, live, and destroyed but only weakly held: none leaks.
    assert_eq!(ci("LeakApp$SettingsActivity").leak_instance_count, 0);
    assert_eq!(ci("android.view.Window").instance_count, 60);
    assert_eq!(
        ci("libcore.util.NativeAllocationRegistry").instance_count,
        70
    );
    // Under their thresholds the counts are reported but are no leak.
    let cfg = Config {
        window_max_count: 60,
        native_allocation_registry_max_count: 70,
        ..Config::default()
    };
    let d = run(Input::File(leakapp_dump()), &cfg);
    assert!(!findings(&d).iter().any(|e| e.0.contains("Count Over")));
    assert_eq!(
        d.class_infos
            .iter()
            .find(|c| c.class_name == "android.view.Window")
            .map(|c| (c.instance_count, c.leak_instance_count)),
        Some((60, 0))
    );
}

#[test]
fn leak_service_binder_shows_the_service_path_from_a_gc_root() {
    let path = common::fixture("android/leak_service_binder.hprof");
    let r = run(Input::File(&path), &Config::default());
    let g = r
        .gc_paths
        .iter()
        .find(|g| g.class_name == "com.example.leakcanary.LeakyService")
        .unwrap_or_else(|| panic!("no path for the service: {:#?}", r.gc_paths));
    assert_eq!(g.gc_root, "JNI Global");
    assert_eq!(
        refs(g),
        [
            "com.example.leakcanary.LeakyService$MyBinder.service",
            "com.example.leakcanary.LeakyService"
        ]
    );
    assert_eq!(r.analysis.format, "JAVA PROFILE 1.0.3");
    assert_eq!(r.analysis.id_size, 4);
}

fn same_findings(name: &str, full: &Report, stripped: &Report) {
    assert_eq!(
        findings(full),
        findings(stripped),
        "{name}: findings differ"
    );
    let sigs = |r: &Report| {
        let mut v: Vec<(String, String, u64, u64)> = r
            .gc_paths
            .iter()
            .map(|g| {
                (
                    g.signature.clone(),
                    g.leak_reason.clone(),
                    g.instance_count,
                    g.retained_size,
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(sigs(full), sigs(stripped), "{name}: paths differ");
    // The leak traces too: no inspector reads what the strip removes.
    let traces = |r: &Report| {
        let mut v: Vec<String> = r
            .gc_paths
            .iter()
            .map(|g| serde_json::to_string(&g.trace).unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(traces(full), traces(stripped), "{name}: leak traces differ");
    let objs = |r: &Report| {
        let mut v: Vec<(u64, String, u64)> = r
            .leak_objects
            .iter()
            .map(|o| (o.object_id, o.leak_reason.clone(), o.retained_size))
            .collect();
        v.sort();
        v
    };
    assert_eq!(objs(full), objs(stripped), "{name}: leak objects differ");
    assert_eq!(
        full.dominators, stripped.dominators,
        "{name}: dominators differ"
    );
    assert_eq!(full.analysis.objects, stripped.analysis.objects);
    assert_eq!(
        full.analysis.reachable_bytes,
        stripped.analysis.reachable_bytes
    );
}

#[test]
fn stripped_twin_of_every_fixture_gives_the_same_findings() {
    let mut inputs = common::fixtures();
    inputs.push(leakapp_dump().to_path_buf());
    let cfg = test_config();
    for p in inputs {
        let name = p.display().to_string();
        let full = std::fs::read(&p).unwrap();
        let (mini, stats) = strip_bytes(&full, Level::Arrays).unwrap();
        assert!(mini.len() < full.len(), "{name}: stripping removed nothing");
        let a = run(Input::Bytes(&full), &cfg);
        let b = run(Input::Bytes(&mini), &cfg);
        assert!(
            b.analysis.stripped_arrays > 0 || a.analysis.stripped_arrays == 0,
            "{name}: {stats:?}"
        );
        same_findings(&name, &a, &b);
    }
}

#[test]
fn cli_writes_the_report_and_prints_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let info = dir.path().join("info.json");
    std::fs::write(&info, br#"{"appVersion":"1.2.3","usageSeconds":42}"#).unwrap();
    let o = Command::new(common::oomguard_bin())
        .arg("analyze")
        .arg(leakapp_dump())
        .arg("-o")
        .arg(&out)
        .args(["--top", "5", "--running-info"])
        .arg(&info)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("Activity Leak"), "{text}");
    assert!(text.contains("LeakApp$MainActivity"), "{text}");
    assert!(text.contains("peak memory:"), "{text}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["runningInfo"]["appVersion"], "1.2.3");
    assert_eq!(v["dominators"].as_array().unwrap().len(), 5);
    assert!(v["dominators"][0]["retainedSize"].is_u64());
    assert!(v["classInfos"][0]["instanceCount"].is_u64());
    assert!(v["gcPaths"][0]["path"][0]["referenceType"].is_string());
}

#[test]
fn cli_rejects_bad_and_truncated_input_with_exit_2_and_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read(common::fixture("jvm/heapdump_hashmap.hprof")).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated.hprof", full[..full.len() * 2 / 3].to_vec()),
        (
            "garbage.hprof",
            b"this is not a heap dump at all, not even close".to_vec(),
        ),
        ("empty.hprof", Vec::new()),
    ];
    for (name, bytes) in cases {
        let input = dir.path().join(name);
        std::fs::write(&input, &bytes).unwrap();
        let out = dir.path().join(format!("{name}.json"));
        let o = Command::new(common::oomguard_bin())
            .arg("analyze")
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        let want = format!("{}: byte ", input.display());
        assert!(err.contains(&want), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert!(!out.exists(), "{name}: a report was written");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
            .collect();
        assert!(left.is_empty(), "{name}: temporary files left");
    }
}

/// A pipe cannot be read more than once: the analyser says so instead of reporting the second
/// read's empty input as an "empty file".
#[test]
fn cli_refuses_a_pipe_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let dump = std::fs::File::open(common::fixture("jvm/heapdump_hashmap.hprof")).unwrap();
    let o = Command::new(common::oomguard_bin())
        .arg("analyze")
        .arg("/dev/stdin")
        .arg("-o")
        .arg(&out)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            let mut stdin = c.stdin.take().unwrap();
            let mut dump = dump;
            // The analyser may refuse before reading: a broken pipe here is expected.
            let _ = std::io::copy(&mut dump, &mut stdin);
            drop(stdin);
            c.wait_with_output()
        })
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("/dev/stdin: not a regular file"), "{err}");
    assert!(!out.exists());
}

#[test]
fn corrupted_dumps_give_errors_or_reports_never_panics() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x00C0_FFEE);
    for f in [
        "jvm/slurp_hprof-32.hprof",
        "android/leak_service_binder.hprof",
    ] {
        let orig = std::fs::read(common::fixture(f)).unwrap();
        for _ in 0..40 {
            let mut b = orig.clone();
            for _ in 0..rng.gen_range(1..8) {
                let at = rng.gen_range(0..b.len());
                b[at] = rng.gen();
            }
            if rng.gen_bool(0.3) {
                let cut = rng.gen_range(0..b.len());
                b.truncate(cut);
            }
            // Either outcome is fine; a panic fails the test.
            let _ = analyze::analyze(
                Input::Bytes(&b),
                &Config::default(),
                serde_json::Value::Null,
            );
        }
    }
}

/// The report without its timings.
fn comparable(r: &Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v["analysis"]["timings"] = serde_json::Value::Null;
    v
}

/// The one-pass graph (for dumps that list their classes first) and the two-pass one give the
/// same report, on every fixture (HotSpot, ART, old hprof agents) and a real Java 17 dump, in one
/// part and in several.
#[test]
fn one_pass_and_two_passes_give_the_same_report() {
    let mut inputs = common::fixtures();
    inputs.push(leakapp_dump().to_path_buf());
    for p in inputs {
        for threads in [1, 2] {
            let cfg = Config {
                threads,
                parallel_min_bytes: 0,
                ..test_config()
            };
            let two = Config {
                one_pass: false,
                ..cfg.clone()
            };
            let a = run(Input::File(&p), &two);
            let b = run(Input::File(&p), &cfg);
            assert_eq!(
                comparable(&a),
                comparable(&b),
                "{} with {threads} threads",
                p.display()
            );
        }
    }
}

/// With a scratch directory (the index's large arrays in mapped files: issue 43) the report is
/// the one made in memory, on every fixture and a real Java 17 dump, in one pass and in two, in
/// one part and in several; nothing is left in the directory.
#[test]
fn scratch_columns_give_the_same_report_on_every_fixture() {
    let mut inputs = common::fixtures();
    inputs.push(leakapp_dump().to_path_buf());
    let dir = tempfile::tempdir().unwrap();
    for p in inputs {
        for (threads, one_pass) in [(1, true), (2, true), (1, false), (2, false)] {
            let cfg = Config {
                threads,
                one_pass,
                parallel_min_bytes: 0,
                ..test_config()
            };
            let scratch = Config {
                scratch_dir: Some(dir.path().to_path_buf()),
                ..cfg.clone()
            };
            let a = run(Input::File(&p), &cfg);
            let b = run(Input::File(&p), &scratch);
            assert_eq!(
                comparable(&a),
                comparable(&b),
                "{} with {threads} threads, one pass {one_pass}",
                p.display()
            );
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // A scratch directory that does not exist is an error naming it, not a report made
    // some other way.
    let missing = dir.path().join("missing");
    let cfg = Config {
        scratch_dir: Some(missing.clone()),
        ..test_config()
    };
    let Err(e) = analyze::analyze(Input::File(leakapp_dump()), &cfg, serde_json::Value::Null)
    else {
        panic!("a missing scratch directory was accepted");
    };
    assert!(
        e.to_string().contains(&missing.display().to_string()),
        "{e}"
    );
}

/// `--scratch-dir`: the report is the one made without it; a directory that does not exist is
/// named, with exit 1 and no report.
#[test]
fn cli_scratch_dir_gives_the_same_report_and_names_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let input = leakapp_dump();
    let (plain, scratch) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let analyze = |out: &Path, extra: &[&std::ffi::OsStr]| {
        Command::new(common::oomguard_bin())
            .arg("analyze")
            .arg(input)
            .arg("-o")
            .arg(out)
            .args(extra)
            .output()
            .unwrap()
    };
    assert!(analyze(&plain, &[]).status.success());
    let flag = std::ffi::OsStr::new("--scratch-dir");
    assert!(analyze(&scratch, &[flag, work.as_os_str()])
        .status
        .success());
    let read = |p: &Path| -> Report { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    assert_eq!(comparable(&read(&plain)), comparable(&read(&scratch)));
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
    let missing = dir.path().join("missing");
    let third = dir.path().join("c.json");
    let out = analyze(&third, &[flag, missing.as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}: scratch directory", missing.display())),
        "{err}"
    );
    assert!(!third.exists());
}

#[test]
fn parsing_in_parts_side_by_side_gives_the_same_report() {
    let mut inputs = common::fixtures();
    inputs.push(leakapp_dump().to_path_buf());
    let one = Config {
        threads: 1,
        ..test_config()
    };
    let mut split = 0;
    let total = inputs.len();
    for p in inputs {
        let a = run(Input::File(&p), &one);
        for threads in [2, 3] {
            let cfg = Config {
                threads,
                parallel_min_bytes: 0,
                ..test_config()
            };
            let mut b = run(Input::File(&p), &cfg);
            if b.analysis.parse_parts >= 2 {
                split += 1;
            }
            b.analysis.parse_parts = 1;
            assert_eq!(
                comparable(&a),
                comparable(&b),
                "{} in {threads} parts",
                p.display()
            );
            let bytes = std::fs::read(&p).unwrap();
            let mut c = run(Input::Bytes(&bytes), &cfg);
            c.analysis.parse_parts = 1;
            assert_eq!(
                comparable(&a),
                comparable(&c),
                "{} in {threads} parts",
                p.display()
            );
        }
    }
    // Files with one heap dump record and nothing after it cannot be cut; most can.
    assert!(
        split > total,
        "only {split} of {} runs were split",
        total * 2
    );
}

/// The agent hands the policy's thresholds to `oomguard analyze --config`: they change what is
/// reported, and a bad file is named with its byte offset.
#[test]
fn cli_takes_the_policy_thresholds_from_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = leakapp_dump();
    let count_arrays = |config: Option<&Path>| -> usize {
        let out = dir.path().join("r.json");
        let mut c = Command::new(common::oomguard_bin());
        c.arg("analyze").arg(input).arg("-o").arg(&out);
        if let Some(p) = config {
            c.arg("--config").arg(p);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        // As findings of their own, or held alone by a leak and listed in it (issue 42).
        let groups = r["gcPaths"].as_array().unwrap();
        let within = groups
            .iter()
            .filter_map(|p| p["consequences"].as_array())
            .flatten();
        groups
            .iter()
            .chain(within)
            .filter(|p| p["leakReason"].as_str().unwrap_or("").starts_with("Array"))
            .map(|p| p["instanceCount"].as_u64().unwrap() as usize)
            .sum()
    };
    let default = count_arrays(None);
    let low = dir.path().join("low.json");
    std::fs::write(&low, r#"{"arrayMinBytes": 32768}"#).unwrap();
    let lowered = count_arrays(Some(&low));
    // LeakApp's activity holds 64 arrays of 64 KB: under the default 256 KB, over 32 KB.
    assert!(
        lowered >= default + 64,
        "default {default}, lowered {lowered}"
    );

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"arrayMinBytes": "big"}"#).unwrap();
    let o = Command::new(common::oomguard_bin())
        .arg("analyze")
        .arg(input)
        .arg("-o")
        .arg(dir.path().join("r2.json"))
        .arg("--config")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.json: byte "), "{err}");
    assert!(!dir.path().join("r2.json").exists());
}

// ---------------------------------------------------------------------------------------------
// Shallow sizes, computed here from the dump's own records (MAT's convention for HotSpot, the
// VM's layout for Android), independently of the analyser's code.

mod layouts {
    use hprof::{read_id, BasicType, Header, Parser, Record, Sub, Visitor};
    use std::collections::HashMap;

    #[derive(Default)]
    struct ClassRec {
        super_id: u64,
        instance_size: u32,
        fields: Vec<BasicType>,
        statics: Vec<BasicType>,
    }

    enum Obj {
        Plain { class_id: u64, data_len: u64 },
        Refs { class_id: u64, len: u64 },
        Prims { ty: BasicType, len: u64 },
        Class,
    }

    #[derive(Default)]
    pub struct Dump {
        header: Option<Header>,
        names: HashMap<u64, Vec<u8>>,
        class_names: HashMap<u64, u64>,
        classes: HashMap<u64, ClassRec>,
        /// Objects in file order (the first of a duplicated id is kept).
        objects: Vec<(u64, Obj)>,
        /// MAT's compressed-references rule, in file order: an object array that starts inside
        /// the previous object array's uncompressed extent.
        prev_array: Option<(u64, u64)>,
        pub compressed_seen: bool,
        /// Records only Android writes: HEAP_DUMP_INFO, ROOT_* 0x89-0x90.
        android_records: bool,
        /// A HEAP_DUMP_END passed: a heap record after it starts another snapshot, and the
        /// analyser reads the last one.
        ended: bool,
    }

    impl Visitor for Dump {
        fn header(&mut self, h: &Header, _raw: &[u8]) -> Result<(), String> {
            self.header = Some(*h);
            Ok(())
        }
        fn record(&mut self, _o: u64, r: &Record<'_>, _raw: &[u8]) -> Result<(), String> {
            if let Some((id, text)) = r.utf8() {
                self.names.insert(id, text.to_vec());
            } else if let Some((_, class_id, _, name_id)) = r.load_class() {
                self.class_names.insert(class_id, name_id);
            } else if r.tag == hprof::tag::HEAP_DUMP_END {
                self.ended = true;
            }
            Ok(())
        }
        fn sub(&mut self, _o: u64, s: &Sub<'_>, _raw: &[u8]) -> Result<(), String> {
            let id_size = self.header.map_or(4, |h| h.id_size);
            if std::mem::take(&mut self.ended) {
                self.classes.clear();
                self.objects.clear();
                (self.prev_array, self.compressed_seen) = (None, false);
            }
            match s {
                Sub::Class(c) => {
                    self.classes.entry(c.id).or_insert_with(|| ClassRec {
                        super_id: c.super_id,
                        instance_size: c.instance_size,
                        fields: c.fields().map(|f| f.1).collect(),
                        statics: c.statics().map(|f| f.1).collect(),
                    });
                    self.objects.push((c.id, Obj::Class));
                }
                Sub::Instance {
                    id, class_id, data, ..
                } => self.objects.push((
                    *id,
                    Obj::Plain {
                        class_id: *class_id,
                        data_len: data.len() as u64,
                    },
                )),
                Sub::ObjectArray {
                    id, len, class_id, ..
                } => {
                    let (id, len) = (*id, *len as u64);
                    if let Some((start, end)) = self.prev_array {
                        if id_size == 8 && id > start && id < end {
                            self.compressed_seen = true;
                        }
                    }
                    self.prev_array = Some((id, id + 16 + 8 * len));
                    self.objects.push((
                        id,
                        Obj::Refs {
                            class_id: *class_id,
                            len,
                        },
                    ));
                }
                Sub::HeapDumpInfo { .. } => self.android_records = true,
                Sub::Root { tag, .. } if (0x89..=0x90).contains(tag) => self.android_records = true,
                Sub::PrimitiveArray { id, len, ty, .. } => self.objects.push((
                    *id,
                    Obj::Prims {
                        ty: *ty,
                        len: *len as u64,
                    },
                )),
                _ => {}
            }
            Ok(())
        }
    }

    pub fn read(path: &std::path::Path) -> Dump {
        let bytes = std::fs::read(path).unwrap();
        let mut d = Dump::default();
        let mut p = Parser::new();
        p.feed(&bytes, &mut d).unwrap();
        p.finish().unwrap();
        let _ = read_id;
        d
    }

    fn up(n: u64, to: u64) -> u64 {
        n.div_ceil(to) * to
    }

    fn elem(ty: BasicType) -> u64 {
        match ty {
            BasicType::Boolean | BasicType::Byte => 1,
            BasicType::Char | BasicType::Short => 2,
            BasicType::Float | BasicType::Int => 4,
            BasicType::Double | BasicType::Long => 8,
            BasicType::Object => 4,
        }
    }

    impl Dump {
        pub fn android(&self) -> bool {
            self.android_records
        }
        pub fn id_size(&self) -> u64 {
            self.header.unwrap().id_size as u64
        }
        fn name(&self, class_id: u64) -> String {
            self.class_names
                .get(&class_id)
                .and_then(|n| self.names.get(n))
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default()
        }
        /// (header, reference size) for HotSpot.
        fn hotspot(&self) -> (u64, u64) {
            let p = self.id_size();
            let r = if p == 8 && self.compressed_seen { 4 } else { p };
            (p + r, r)
        }
        fn field_size(&self, ty: BasicType, r: u64) -> u64 {
            if ty == BasicType::Object {
                r
            } else {
                elem(ty)
            }
        }
        fn instance(&self, class_id: u64, data_len: u64) -> u64 {
            let Some(c) = self.classes.get(&class_id) else {
                let h = if self.android() { 8 } else { self.hotspot().0 };
                return up(h + data_len, 8);
            };
            if self.android() {
                let s = if c.instance_size > 0 {
                    c.instance_size as u64
                } else {
                    8 + c.fields.iter().map(|&t| self.field_size(t, 4)).sum::<u64>()
                };
                return up(s, 8).max(8);
            }
            let (h, r) = self.hotspot();
            // Superclasses first: java.lang.Object at the bottom of the list.
            let mut chain = vec![c];
            let mut cur = c;
            while let Some(s) = self.classes.get(&cur.super_id) {
                if chain.len() > 256 {
                    break;
                }
                chain.push(s);
                cur = s;
            }
            let mut size = h;
            for k in chain.iter().rev() {
                let own: u64 = k.fields.iter().map(|&t| self.field_size(t, r)).sum();
                if own > 0 || k.super_id != 0 {
                    size = up(size + own, r);
                }
            }
            up(size, 8)
        }
        /// Every object's expected shallow size, by id (the first object of an id).
        pub fn expected(&self) -> HashMap<u64, u64> {
            let android = self.android();
            let (h, r) = if android { (8, 4) } else { self.hotspot() };
            let mut m = HashMap::new();
            for (id, o) in &self.objects {
                let v = match o {
                    Obj::Class => {
                        let c = &self.classes[id];
                        up(c.statics.iter().map(|&t| self.field_size(t, r)).sum(), 8)
                    }
                    Obj::Plain { class_id, data_len } => self.instance(*class_id, *data_len),
                    Obj::Refs { class_id, len } => {
                        let _ = self.name(*class_id);
                        up(h + 4 + len * r, 8)
                    }
                    Obj::Prims { ty, len } => {
                        let e = elem(*ty);
                        let head = if android {
                            up(h + 4, e.max(4))
                        } else {
                            up(h + 4, r)
                        };
                        up(head + len * e, 8)
                    }
                };
                m.entry(*id).or_insert(v);
            }
            m
        }
    }
}

/// Compares every object's shallow size with the layouts computed above; returns the number
/// of objects and whether the analyser said references are compressed.
fn check_shallow_sizes(path: &Path) -> (usize, bool) {
    let dump = layouts::read(path);
    let want = dump.expected();
    let (conv, got) = analyze::shallow_sizes(Input::File(path), &test_config()).unwrap();
    let name = path.display();
    assert_eq!(got.len(), want.len(), "{name}: objects");
    let mut wrong = Vec::new();
    for &(id, size) in &got {
        let w = want[&id];
        if w != size as u64 {
            wrong.push((id, size, w));
        }
    }
    assert!(
        wrong.is_empty(),
        "{name}: {} of {} objects have another shallow size than the layout's, e.g. (id, ours, layout's) {:?}",
        wrong.len(),
        got.len(),
        &wrong[..wrong.len().min(5)]
    );
    assert_eq!(
        conv.vm,
        if dump.android() { "Android" } else { "HotSpot" },
        "{name}"
    );
    assert_eq!(
        conv.compressed_references,
        dump.id_size() == 8 && dump.compressed_seen && !dump.android(),
        "{name}: compressed references as MAT decides them"
    );
    (got.len(), conv.compressed_references)
}

#[test]
fn shallow_sizes_follow_the_vm_layout_on_every_fixture() {
    for f in common::fixtures() {
        check_shallow_sizes(&f);
    }
}

#[test]
fn shallow_sizes_follow_the_vm_layout_on_a_java_17_dump() {
    let dump = common::java_dump(4, "sizes-marker");
    let (n, compressed) = check_shallow_sizes(&dump);
    assert!(n > 10_000, "{n} objects");
    // Java 17 with a 1 GB heap uses compressed references by default.
    assert!(
        compressed,
        "a Java 17 dump with -Xmx1g has compressed references"
    );
}
