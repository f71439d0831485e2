use super::*;
use crate::spool::{Quotas, State};
use crate::upload::Network;
use io::io_pass;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/hprof/android/leak_service_binder.hprof")
}

/// A dumped incident in a fresh spool, its mini dump made by the stripper.
fn dumped(root: &Path) -> String {
    let input = std::fs::read(fixture()).unwrap();
    let (mini, _) = hprof::strip_bytes(&input, Level::Arrays).unwrap();
    dumped_as(root, &mini)
}

/// A dumped incident in a fresh spool whose mini dump is `mini`.
fn dumped_as(root: &Path, mini: &[u8]) -> String {
    dumped_with(root, mini, serde_json::json!({"appVersion": "t-1"}))
}

/// A dumped incident whose mini dump is `mini` and whose running info is `running_info`.
fn dumped_with(root: &Path, mini: &[u8], running_info: serde_json::Value) -> String {
    let spool = Spool::open(root.join(SPOOL_DIR), Quotas::default()).unwrap();
    let staging = spool.stage().unwrap();
    std::fs::write(staging.path(FileKind::MiniDump), mini).unwrap();
    spool
        .commit(
            staging,
            NewIncident {
                reason: "test".into(),
                running_info,
                ..NewIncident::default()
            },
        )
        .unwrap()
}

pub(super) fn io_config(root: &Path, analyser: Option<PathBuf>) -> IoConfig {
    IoConfig {
        spool_root: root.join(SPOOL_DIR),
        quotas: Quotas::default(),
        analysis_dir: root.join(ANALYSIS_DIR),
        analyser,
        limits: AnalysisLimits {
            deadline: Duration::from_secs(60),
            ..AnalysisLimits::default()
        },
        analysis: analyze::Config::default(),
        upload: None,
        retry_every: Duration::from_secs(60),
        network: Arc::new(NetworkState::default()),
        default_network: Network::UNMETERED,
        flight: Flight::default(),
        queue: Arc::new(QueueBoard::default()),
    }
}

fn analysed_report(root: &Path, id: &str) -> serde_json::Value {
    let spool = Spool::open(root.join(SPOOL_DIR), Quotas::default()).unwrap();
    let inc = spool.read_incident(id).unwrap();
    assert_eq!(inc.state, State::Analysed, "{inc:?}");
    let b = std::fs::read(spool.incident_dir(id).join("report.json")).unwrap();
    serde_json::from_slice(&b).unwrap()
}

#[test]
fn without_an_executable_the_dump_is_analysed_in_a_forked_child() {
    let dir = tempfile::tempdir().unwrap();
    let id = dumped(dir.path());
    io_pass(
        &io_config(dir.path(), None),
        &mut queue::LastError::default(),
    );
    let report = analysed_report(dir.path(), &id);
    // The running info comes from the incident, not from the analysing process.
    assert_eq!(report["runningInfo"]["appVersion"], "t-1");
    assert!(
        !report["gcPaths"].as_array().unwrap().is_empty(),
        "{report}"
    );
    // Nothing of ours is left in the incident for the spool to move aside.
    let names: Vec<String> = std::fs::read_dir(dir.path().join(ANALYSIS_DIR))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(names.is_empty(), "{names:?}");
}

#[test]
fn a_crashing_analyser_is_counted_and_the_dump_kept() {
    let dir = tempfile::tempdir().unwrap();
    let id = dumped(dir.path());
    // An "analyser" that dies like an OOM-killed process would.
    let bad = dir.path().join("crash.sh");
    std::fs::write(&bad, "#!/bin/sh\nkill -9 $$\n").unwrap();
    std::fs::set_permissions(&bad, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    io_pass(
        &io_config(dir.path(), Some(bad)),
        &mut queue::LastError::default(),
    );
    let spool = Spool::open(dir.path().join(SPOOL_DIR), Quotas::default()).unwrap();
    let inc = spool.read_incident(&id).unwrap();
    assert_eq!(inc.state, State::Dumped);
    assert_eq!(inc.analysis_attempts, 1);
    assert!(
        inc.analysis_error
            .as_deref()
            .unwrap_or("")
            .contains("signal 9"),
        "{inc:?}"
    );
    assert!(spool.incident_dir(&id).join("mini.hprof").exists());
    // The next launch, with a working analyser (the fork fallback), finishes it.
    io_pass(
        &io_config(dir.path(), None),
        &mut queue::LastError::default(),
    );
    analysed_report(dir.path(), &id);
}

#[test]
fn an_analyser_out_of_memory_is_said_to_exceed_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let id = dumped(dir.path());
    // An analyser that fails as Rust's allocator does when its data limit is reached.
    let bad = dir.path().join("oom.sh");
    std::fs::write(
        &bad,
        "#!/bin/sh\necho 'memory allocation of 1073741824 bytes failed' >&2\nkill -6 $$\n",
    )
    .unwrap();
    std::fs::set_permissions(&bad, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    io_pass(
        &io_config(dir.path(), Some(bad)),
        &mut queue::LastError::default(),
    );
    let spool = Spool::open(dir.path().join(SPOOL_DIR), Quotas::default()).unwrap();
    let inc = spool.read_incident(&id).unwrap();
    let why = inc.analysis_error.as_deref().unwrap_or("");
    assert!(
        why.contains("for want of memory")
            && why.contains(&format!(
                "budget of {} MiB",
                crate::policy::Policy::default().analysis.memory_limit_mb
            )),
        "{why}"
    );
    assert!(spool.incident_dir(&id).join("mini.hprof").exists());
}

#[test]
fn a_dump_near_its_budget_is_analysed_with_scratch_files_under_the_analysis_directory() {
    let dir = tempfile::tempdir().unwrap();
    let id = dumped(dir.path());
    let spool = Spool::open(dir.path().join(SPOOL_DIR), Quotas::default()).unwrap();
    let mini = spool.incident_dir(&id).join("mini.hprof");
    let size = std::fs::metadata(&mini).unwrap().len();
    let mut cfg = io_config(dir.path(), None);
    // A file a killed child left behind.
    let scratch = dir.path().join(ANALYSIS_DIR).join(analysis::SCRATCH_DIR);
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::write(scratch.join("left"), b"x").unwrap();
    // A budget 2.25 times the dump: the analysis in memory might need more than
    // half of it.
    cfg.limits.memory = 2 * size + size / 4;
    assert!(analysis::needs_scratch(size, cfg.limits.memory));
    assert!(!analysis::needs_scratch(size, 8 * size));
    let acfg = analysis::analyser_config(&cfg, &mini);
    assert_eq!(acfg.scratch_dir.as_deref(), Some(scratch.as_path()));
    // The policy's cap, far below half the free space here.
    assert!(
        crate::dump::guard::free_bytes(&scratch).unwrap() / 2 > cfg.analysis.scratch_max_mb << 20
    );
    assert_eq!(acfg.scratch_max_mb, cfg.analysis.scratch_max_mb);
    assert!(acfg.scratch_max_mb > 0);
    assert!(!scratch.join("left").exists(), "emptied before the run");
    // (A budget this small is too small for the analysis of this small dump: the analyser's
    // own memory, strings and classes, is more. The forked child runs under the policy's
    // smallest budget, with the scratch directory the agent's configuration names.)
    cfg.limits.memory = 32 << 20;
    cfg.analysis.scratch_dir = Some(scratch.clone());
    io_pass(&cfg, &mut queue::LastError::default());
    // The same report as in memory, without a budget.
    assert_the_unbudgeted_report(analysed_report(dir.path(), &id), &mini);
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
}

/// `got` is the report the analyser makes of `mini` in-process, without a budget (timings
/// aside).
fn assert_the_unbudgeted_report(mut got: serde_json::Value, mini: &Path) {
    let running = serde_json::json!({"appVersion": "t-1"});
    let cfg = analyze::Config::default();
    let full = analyze::analyze(analyze::Input::File(mini), &cfg, running).unwrap();
    let mut want = serde_json::to_value(&full).unwrap();
    for r in [&mut got, &mut want] {
        r["analysis"]["timings"] = serde_json::Value::Null;
    }
    assert_eq!(got, want);
}

/// Issue 43's honest limits through the forked child (no executable): a budget too small for
/// the whole analysis of the dump gives the report of what fits, written and analysed, not a
/// child that fails (or hangs): the class histogram, the same as the analyser makes in-process
/// within that budget, and `analysis.budget` naming what was left out.
#[test]
fn a_dump_too_large_for_its_budget_is_reported_as_far_as_it_fits_by_the_forked_child() {
    let dir = tempfile::tempdir().unwrap();
    let id = dumped(dir.path());
    let spool = Spool::open(dir.path().join(SPOOL_DIR), Quotas::default()).unwrap();
    let mini = spool.incident_dir(&id).join("mini.hprof");
    let mut cfg = io_config(dir.path(), None);
    cfg.limits.memory = 16 << 20;
    let acfg = analysis::analyser_config(&cfg, &mini);
    assert_eq!(acfg.budget_bytes, 16 << 20);
    io_pass(&cfg, &mut queue::LastError::default());
    let got = analysed_report(dir.path(), &id);
    let budget = &got["analysis"]["budget"];
    assert_eq!(budget["budgetBytes"], 16 << 20, "{budget}");
    assert!(
        budget["neededBytes"].as_u64().unwrap() > 16 << 20,
        "{budget}"
    );
    let left = budget["leftOut"].as_array().unwrap();
    assert!(left
        .iter()
        .any(|s| s.as_str().unwrap().starts_with("gcPaths")));
    // The histogram and the paths found backwards are the in-process analyser's within the
    // same budget, and the histogram counts every object the whole analysis counts.
    let running = serde_json::json!({"appVersion": "t-1"});
    let small = analyze::analyze(
        analyze::Input::File(&mini),
        &analyze::Config {
            budget_bytes: 16 << 20,
            ..analyze::Config::default()
        },
        running.clone(),
    )
    .unwrap();
    assert_eq!(
        got["histogram"],
        serde_json::to_value(&small.histogram).unwrap()
    );
    assert_eq!(
        got["gcPaths"],
        serde_json::to_value(&small.gc_paths).unwrap()
    );
    let full = analyze::analyze(
        analyze::Input::File(&mini),
        &analyze::Config::default(),
        running,
    )
    .unwrap();
    let counted: u64 = small.histogram.iter().map(|h| h.instance_count).sum();
    assert_eq!(counted, full.analysis.objects);
    assert_eq!(got["analysis"]["objects"], full.analysis.objects);
}

/// An analyser that runs out of memory within its budget all the same (the estimate fell
/// short) is run once more for the report of what fits in any budget (`censusOnly`), which is
/// kept: the incident is analysed, not failed.
#[test]
fn an_analysis_out_of_memory_within_its_budget_is_followed_by_the_report_of_what_fits() {
    let dir = tempfile::tempdir().unwrap();
    let id = dumped(dir.path());
    // `analyze IN -o OUT --config CFG ...`: out of memory, unless the config asks for the
    // census only; then a report.
    let bad = dir.path().join("oom-then-census.sh");
    let runs = dir.path().join("runs");
    std::fs::write(
        &bad,
        format!(
            "#!/bin/sh\necho run >> {runs}\nif grep -q '\"censusOnly\":true' \"$6\"; then\n  \
             echo '{{\"histogram\":[{{\"className\":\"X\",\"instanceCount\":1,\"shallowSize\":8}}]}}' > \"$4\"\n  \
             exit 0\nfi\necho 'memory allocation of 4096 bytes failed' >&2\nkill -6 $$\n",
            runs = runs.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&bad, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut cfg = io_config(dir.path(), Some(bad));
    // One attempt allowed: the census is part of it, not a second one.
    cfg.limits.max_attempts = 1;
    io_pass(&cfg, &mut queue::LastError::default());
    let report = analysed_report(dir.path(), &id);
    assert_eq!(report["histogram"][0]["className"], "X", "{report}");
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\nrun\n");
}

/// Issue 43's budget through the forked child (no executable), the agent choosing scratch files
/// by itself: a two-pass (ART-style) dump whose analysis in memory needs more than the budget
/// gets the whole report, the one made in-process without a budget, its large arrays in scratch
/// files under the analysis directory (empty after). With its scratch files capped below what
/// is worth it (`analysis.scratch_max_mb`), the same dump is planned in memory and gets the
/// report of what fits.
#[test]
fn a_dump_whose_analysis_needs_scratch_files_gets_the_whole_report_from_the_forked_child() {
    const BUDGET: u64 = 32 << 20;
    let dir = tempfile::tempdir().unwrap();
    let art = hprof::writer::art_dump(&hprof::writer::ArtSpec {
        image_objects: 20_000,
        zygote_objects: 10_000,
        app_objects: 370_000,
        mean_array_bytes: 64,
        ..hprof::writer::ArtSpec::default()
    });
    let id = dumped_as(dir.path(), &art);
    let spool = Spool::open(dir.path().join(SPOOL_DIR), Quotas::default()).unwrap();
    let mini = spool.incident_dir(&id).join("mini.hprof");
    let mut cfg = io_config(dir.path(), None);
    cfg.limits.memory = BUDGET;
    let acfg = analysis::analyser_config(&cfg, &mini);
    let scratch = dir.path().join(ANALYSIS_DIR).join(analysis::SCRATCH_DIR);
    assert_eq!(acfg.scratch_dir.as_deref(), Some(scratch.as_path()));
    // In memory the budget is too small for the whole analysis.
    let running = serde_json::json!({"appVersion": "t-1"});
    let in_memory = analyze::Config {
        budget_bytes: BUDGET,
        ..analyze::Config::default()
    };
    let small = analyze::analyze(analyze::Input::File(&mini), &in_memory, running).unwrap();
    let b = small.analysis.budget.expect("over the budget in memory");
    assert!(b.estimate.contains("two passes"), "{b:?}");
    io_pass(&cfg, &mut queue::LastError::default());
    let got = analysed_report(dir.path(), &id);
    assert!(got["analysis"]["budget"].is_null(), "{}", got["analysis"]);
    assert_the_unbudgeted_report(got, &mini);
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
    // Scratch files capped below what is worth it (`analysis.scratch_max_mb`): none, the
    // analysis plans in memory.
    let again = dumped_as(dir.path(), &art);
    cfg.analysis.scratch_max_mb = 1;
    assert!(analysis::analyser_config(&cfg, &mini).scratch_dir.is_none());
    io_pass(&cfg, &mut queue::LastError::default());
    let cut = analysed_report(dir.path(), &again);
    assert_eq!(cut["analysis"]["budget"]["neededBytes"], b.needed_bytes);
    assert_eq!(
        cut["histogram"],
        serde_json::to_value(&small.histogram).unwrap()
    );
    assert_eq!(analysis::scratch_room(10 << 30, 5), 5);
    assert_eq!(analysis::scratch_room(10, 500), 5);
    assert_eq!(analysis::scratch_room(10 << 30, 0), 0);
}

/// The analyser executable is given the incident's running info in a file of its own, and
/// nothing of the kind when the incident has none.
#[test]
fn the_analyser_executable_is_given_the_incidents_running_info() {
    let _fork = crate::child::fork_test_lock();
    let dir = tempfile::tempdir().unwrap();
    let args = dir.path().join("args.txt");
    let script = dir.path().join("analyser.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n# analyze INPUT -o OUT ...\nout=\"$4\"\necho \"$@\" >> {log}\n\
             while [ $# -gt 0 ]; do\n  if [ \"$1\" = --running-info ]; then cat \"$2\" >> {log}; echo >> {log}; fi\n  shift\ndone\n\
             printf '{{\"gcPaths\":[],\"dominators\":[]}}' > \"$out\"\n",
            log = args.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cfg = io_config(dir.path(), Some(script));
    let with = dumped(dir.path());
    io_pass(&cfg, &mut queue::LastError::default());
    analysed_report(dir.path(), &with);
    let seen = std::fs::read_to_string(&args).unwrap();
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(lines.len(), 2, "{seen}");
    assert!(lines[0].contains(" --running-info "), "{seen}");
    assert_eq!(lines[1], r#"{"appVersion":"t-1"}"#, "{seen}");

    std::fs::remove_file(&args).unwrap();
    let spool = Spool::open(dir.path().join(SPOOL_DIR), Quotas::default()).unwrap();
    let mini = std::fs::read(spool.incident_dir(&with).join("mini.hprof")).unwrap();
    let without = dumped_with(dir.path(), &mini, serde_json::Value::Null);
    io_pass(&cfg, &mut queue::LastError::default());
    analysed_report(dir.path(), &without);
    let seen = std::fs::read_to_string(&args).unwrap();
    assert_eq!(seen.lines().count(), 1, "{seen}");
    assert!(!seen.contains("--running-info"), "{seen}");
}
