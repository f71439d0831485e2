//! oomguard on ART 11 (the test runtime of `tests/art`): the facade as dex agrees with
//! `java/dev/oomguard/OomGuard.java`, and the agent starts through it the way an app starts it.

mod common;
#[path = "art/harness.rs"]
mod harness;
#[path = "art/support.rs"]
mod support;

use common::root;

/// The natives `OomGuard.java` declares, as (name, JNI descriptor), in file order.
fn java_natives(src: &str) -> Vec<(String, String)> {
    let flat = src.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    for decl in flat.split("private static native ").skip(1) {
        let decl = &decl[..decl.find(';').expect("native ends with ;")];
        let (ret, rest) = decl.split_once(' ').expect("return type");
        let (name, params) = rest.split_once('(').expect("parameters");
        let params = params.trim_end_matches(')');
        let mut sig = String::from("(");
        for p in params.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            sig.push_str(java_type(p.split_whitespace().next().expect("type")));
        }
        sig.push(')');
        sig.push_str(java_type(ret));
        out.push((name.trim().to_string(), sig));
    }
    out
}

fn java_type(t: &str) -> &'static str {
    match t {
        "int" => "I",
        "boolean" => "Z",
        "long" => "J",
        "void" => "V",
        "String" => "Ljava/lang/String;",
        "Thread" => "Ljava/lang/Thread;",
        "Throwable" => "Ljava/lang/Throwable;",
        other => panic!("OomGuard.java: native with a {other} parameter: teach java_type"),
    }
}

/// The natives the smali facade declares, as (name, descriptor), in file order.
fn smali_natives(src: &str) -> Vec<(String, String)> {
    src.lines()
        .filter_map(|l| l.strip_prefix(".method private static native "))
        .map(|m| {
            let i = m.find('(').expect("descriptor");
            (m[..i].to_string(), m[i..].to_string())
        })
        .collect()
}

/// The dex facade and the Java one must declare the same natives: liboomguard's
/// `Java_dev_oomguard_OomGuard_*` functions serve both.
#[test]
fn art_facade_declares_the_natives_of_oomguard_java() {
    let java = std::fs::read_to_string(root().join("java/dev/oomguard/OomGuard.java")).unwrap();
    let smali = std::fs::read_to_string(
        root().join("crates/cli/tests/art/app/dev/oomguard/OomGuard.smali"),
    )
    .unwrap();
    let j = java_natives(&java);
    let s = smali_natives(&smali);
    assert_eq!(j.len(), 8, "OomGuard.java's natives: {j:?}");
    assert_eq!(
        s, j,
        "tests/art/app/dev/oomguard/OomGuard.smali against OomGuard.java"
    );
    // The same public entry points and result codes.
    for code in [
        "OK:I = 0x0",
        "ALREADY_RUNNING:I = 0x1",
        "NOT_RUNNING:I = 0x2",
        "BAD_ARGUMENT:I = 0x3",
        "INTERNAL_ERROR:I = 0x4",
        "ERROR:I = 0x5",
        "LOAD_FAILED:I = 0x6",
    ] {
        let (name, value) = code.split_once(":I = ").unwrap();
        let v: i32 = i32::from_str_radix(value.trim_start_matches("0x"), 16).unwrap();
        assert!(smali.contains(code), "smali lacks {code}");
        assert!(
            java.contains(&format!("public static final int {name} = {v};")),
            "OomGuard.java lacks {name} = {v}"
        );
    }
    for m in [
        "start(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;)I",
        "start(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;)I",
        "stop()I",
        "dumpNow(Ljava/lang/String;)I",
        "status()Ljava/lang/String;",
        "setCurrentPage(Ljava/lang/String;)I",
        "setNetwork(ZZ)I",
    ] {
        assert!(
            smali.contains(&format!(".method public static {m}")),
            "smali lacks {m}"
        );
    }
}

/// `AgentMain` (tests/art/app/AgentMain.smali) starts the agent through the dex facade, as an
/// app's `Application.onCreate` does: `System.loadLibrary("oomguard")` goes through ART's own
/// `JavaVMExt::LoadNativeLibrary`, the natives bind by their `Java_dev_oomguard_OomGuard_*`
/// names, the agent's thread attaches to ART, and its first sample reads ART's heap through
/// `java.lang.Runtime`.
#[test]
fn art_agent_starts_through_the_facade_and_reads_the_heap() {
    if !harness::available("art_agent_starts_through_the_facade_and_reads_the_heap") {
        return;
    }
    let w = support::Workdir::new();
    let run = harness::launch(
        w.path(),
        "AgentMain",
        &["-Xmx64m", &w.data_option()],
        &[w.lib_env()],
        std::time::Duration::from_secs(60),
    );
    let why = run.describe();
    assert_eq!(run.code, Some(0), "{why}");
    assert_eq!(run.value("start"), Some(0), "OomGuard.OK\n{why}");
    assert_eq!(run.value("second_start"), Some(1), "ALREADY_RUNNING\n{why}");
    assert_eq!(run.value("stop"), Some(0), "{why}");
    assert_eq!(run.value("held"), Some(1000), "{why}");
    // The agent logs through liblog, tag OomGuard, as logcat would show it (Debian's liblog
    // prints to stderr: "OomGuard I <date> <time> <pid> <tid> <text>").
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with("OomGuard I ") && l.contains("heap numbers read through jni")),
        "{why}"
    );
    let status = run.status();
    assert_eq!(status["state"], "running", "{why}");
    let sample = &status["last_sample"];
    assert_eq!(sample["heap_max"], 64 << 20, "-Xmx64m\n{why}");
    let used = sample["heap_used"].as_u64().unwrap_or(0);
    // The 1000 arrays of 4 KiB are live when the agent samples.
    assert!(
        (4_096_000..64 << 20).contains(&used),
        "heap_used {used}\n{why}"
    );
}

/// Runs `AgentMain` with `OomGuard.dumpNow` and the default policy changed by `edit`; with
/// `api35` the app reports API 35. Returns the run and its directories.
fn run_incident(
    api35: bool,
    edit: impl FnOnce(&mut serde_json::Value),
) -> (harness::Run, support::Workdir) {
    run_app("AgentMain", api35, &["-Doomguard.dump_now=art-test"], edit)
}

/// Runs `main_class` (AgentMain, LeakyMain) with the agent's library and `oomguard` binary,
/// `-Xmx64m`, the data directory and the default policy changed by `edit`, plus `extra` VM
/// options.
fn run_app(
    main_class: &str,
    api35: bool,
    extra: &[&str],
    edit: impl FnOnce(&mut serde_json::Value),
) -> (harness::Run, support::Workdir) {
    let w = support::Workdir::new();
    let bin = common::oomguard_bin();
    let api35_dex = harness::runtime().api35_dex();
    let data_opt = w.data_option();
    let policy_opt = support::policy_option(edit);
    let mut options = vec!["-Xmx64m", data_opt.as_str(), policy_opt.as_str()];
    options.extend_from_slice(extra);
    let run = harness::launch_with(
        w.path(),
        main_class,
        api35.then_some(api35_dex.as_path()),
        &options,
        &[w.lib_env(), ("OOMGUARD_BIN", bin.to_str().unwrap())],
        std::time::Duration::from_secs(90),
    );
    (run, w)
}

/// The incident on ART with the full file kept: the facade reports API 30 (our
/// `android.os.Build$VERSION`), so the agent uses the ART fork dumper: it suspends ART, forks,
/// and the child runs libart's `hprof::DumpHeap` while the tee on libart's `open`/`write`
/// imports writes the stripped file; the analyser runs out of process and names the 4 leaked
/// Activities and their path. The mini file is exactly `oomguard strip` of the full one.
#[test]
fn art_fork_dump_keep_full_incident_names_the_activity_leak() {
    if !harness::available("art_fork_dump_keep_full_incident_names_the_activity_leak") {
        return;
    }
    let (run, w) = run_incident(false, |p| p["dump"]["keep_full"] = true.into());
    let why = run.describe();
    assert_eq!(run.code, Some(0), "{why}");
    assert_eq!(run.value("dump_now"), Some(0), "{why}");
    assert_eq!(run.value("stop"), Some(0), "{why}");
    assert!(
        run.stderr.contains("tee hooked library=") && run.stderr.contains("android/libart.so"),
        "the tee hooks libart itself\n{why}"
    );
    assert!(
        run.stderr.contains("heap dump taken dumper=\"art-fork\""),
        "{why}"
    );
    assert!(run.stderr.contains("hprof: heap dump completed"), "{why}");
    assert!(run.stderr.contains("analysis done out of process"), "{why}");

    let incidents = support::incidents(&w.data);
    assert_eq!(incidents.len(), 1, "{incidents:?}\n{why}");
    let dir = &incidents[0];
    let info = running_info(dir);
    assert_eq!(info["apiLevel"], 30, "{info:#}");
    assert_eq!(info["manufacturer"], "debian-art11", "{info:#}");
    assert_eq!(info["dumper"], "art-fork", "{info:#}");
    // The wait for a running GC (the heap task daemon's) is reported apart from the pause.
    let (pause, gc_wait) = (info["pauseMs"].as_f64(), info["gcWaitMs"].as_f64());
    assert!(
        pause.is_some_and(|p| p > 0.0) && gc_wait.is_some_and(|g| g >= 0.0),
        "{info:#}"
    );
    // The process's Java threads, listed through JNI (ThreadGroup.enumerate) on ART.
    let threads = common::java_threads(&info);
    let main = common::java_thread_id(&threads, "main");
    assert!(main >= 1, "{threads:?}");
    let full = std::fs::read(dir.join("dump.hprof")).expect("dump.hprof kept");
    assert!(full.starts_with(b"JAVA PROFILE 1.0.3\0"));
    let mini = std::fs::read(dir.join("mini.hprof")).expect("mini.hprof");
    support::assert_mini_is_strip_of_full(dir, &dir.join("strip.hprof"));
    assert!(
        mini.len() * 10 < full.len(),
        "{} / {}",
        mini.len(),
        full.len()
    );

    let report = support::incident_json(dir, "report.json");
    support::planted_activity_leak(&report);
    // The fifth, held by a register of main's frame: its trace names the thread, from the
    // thread object's tid and the incident's javaThreads (ART's dump has no stack traces, so
    // no method).
    let framed = report["gcPaths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["trace"]["rootKind"] == "Java frame")
        .unwrap_or_else(|| panic!("no Java frame path: {report:#}"));
    assert_eq!(framed["className"], "com.example.leaky.MainActivity");
    assert_eq!(framed["gcRoot"], "Java Frame");
    let root = framed["trace"]["root"].as_str().unwrap();
    assert!(
        root.starts_with(
            "local variable of a Java frame on thread \"main\": com.example.leaky.MainActivity @0x"
        ),
        "{root}"
    );
    assert_eq!(framed["trace"]["thread"]["id"], main, "{framed:#}");
}

/// `incident.json`'s `runningInfo` in the incident directory `dir`.
fn running_info(dir: &std::path::Path) -> serde_json::Value {
    support::incident_body(dir)["runningInfo"].clone()
}

/// The same incident with the app reporting API 35 (tests/art/app-api35 before app.dex): the
/// agent takes its API-35 sequence (the thread list lock held across `fork`, released in both
/// processes) on this API-30 ART; the child dumps, the parent goes on running Java.
#[test]
fn art_fork_dump_api35_sequence_dumps_and_the_app_goes_on() {
    if !harness::available("art_fork_dump_api35_sequence_dumps_and_the_app_goes_on") {
        return;
    }
    let (run, w) = run_incident(true, |p| p["dump"]["keep_full"] = true.into());
    let why = run.describe();
    assert_eq!(run.code, Some(0), "{why}");
    assert!(
        run.stderr.contains("heap dump taken dumper=\"art-fork\""),
        "{why}"
    );
    // Java ran after the fork: the program printed its last lines.
    assert_eq!(run.value("held"), Some(1000), "{why}");
    let dir = support::incidents(&w.data)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no incident\n{why}"));
    let info = running_info(&dir);
    assert_eq!(info["apiLevel"], 35, "{info:#}");
    assert_eq!(info["dumper"], "art-fork", "{info:#}");
    let full = std::fs::read(dir.join("dump.hprof")).expect("dump.hprof kept");
    assert!(full.starts_with(b"JAVA PROFILE 1.0.3\0"));
    assert!(dir.join("report.json").exists(), "analysed");
}

/// The leaky app on ART: `LeakyMain` leaks a destroyed 1 MiB Activity every 100 ms through a
/// static list in a 64 MiB heap; with a 100 ms poll and a 50 % heap threshold the heap verdict
/// fires after three ascending strikes, the ART fork dumper dumps while the app keeps
/// allocating, and the report names the Activity leak and its path. The dump policy is the
/// default one: only the stripped file is written, and it is what is analysed.
#[test]
fn art_leaky_app_heap_verdict_dumps_and_names_the_leak() {
    if !harness::available("art_leaky_app_heap_verdict_dumps_and_names_the_leak") {
        return;
    }
    let (run, w) = run_app("LeakyMain", false, &[], |p| {
        p["poll_interval_ms"] = 100.into();
        p["heap"]["thresholds"] = serde_json::json!([{ "min_max_heap_mb": 0, "percent": 50 }]);
        // The dump policy stays the default: keep_full off, so the tee swallows libart's
        // writes and only the stripped file is kept (issue 29 item 2 lost every such dump).
    });
    let why = run.describe();
    assert_eq!(run.code, Some(0), "{why}");
    assert_eq!(run.value("start"), Some(0), "{why}");
    assert_eq!(run.value("leaked"), Some(48), "{why}");
    assert_eq!(run.value("stop"), Some(0), "{why}");
    assert!(
        run.stderr
            .contains("verdict heap: java heap over 50% of 64 MB for 3 polls"),
        "{why}"
    );
    assert!(
        run.stderr.contains("heap dump taken dumper=\"art-fork\""),
        "{why}"
    );
    let dir = support::incidents(&w.data)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no incident\n{why}"));
    assert_eq!(running_info(&dir)["kind"], "Heap", "{why}");
    assert!(!dir.join("dump.hprof").exists(), "keep_full is off\n{why}");
    let mini = std::fs::read(dir.join("mini.hprof")).expect("the stripped dump is kept");
    assert!(mini.starts_with(b"JAVA PROFILE 1.0.3\0"), "{why}");
    let report = support::incident_json(&dir, "report.json");
    let leak = support::activity_leak(&report);
    // The verdict fires past 32 MiB: at least that many leaked Activities are in the dump.
    assert!(
        leak["instanceCount"].as_u64().unwrap_or(0) >= 30,
        "{leak:#}"
    );
}
