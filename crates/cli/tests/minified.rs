//! Issue 41: a minified release build keeps what liboomguard.so reaches by name. The facade, the
//! demo app (`java/demo/DemoApp.java`) and the dying app of the death tests
//! (`java/testapps/DyingApp.java`) are shrunk and obfuscated together by Debian's ProGuard 6.2
//! (`common::proguard`), then run on the JVM with the agent:
//! - with the consumer rules the facade ships (`java/dev/oomguard/proguard.txt`), the demo's
//!   whole incident (heap verdict, dump, analysis, report in the spool) runs, and a `kill -9`
//!   followed by a relaunch reports the death with the exit record the app's `ExitInfoSource`
//!   gave (asked by native code through `OomGuard.exitRecord(int)`, which no Java code calls);
//! - with no rules the natives cannot be bound (the class is renamed): the agent never starts;
//! - with only AGP's native-method rule the agent runs, but `exitRecord` is shrunk away and every
//!   death is reported without the system's record.
//!
//! The last two are the proof that the shipped rules matter.

mod common;

use common::cdylib_dir;
use common::proguard::{self, Minified, Rules};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The demo and the dying app, minified together with the facade.
fn apps(rules: Rules) -> Minified {
    let root = common::root();
    proguard::minify(
        "apps",
        &[
            root.join("java/demo/DemoApp.java"),
            root.join("java/testapps/DyingApp.java"),
        ],
        &["DemoApp", "DyingApp"],
        rules,
        "",
    )
}

fn java(m: &Minified) -> Command {
    let mut c = Command::new("java");
    c.arg("-XX:+UseG1GC")
        .arg(format!("-Djava.library.path={}", cdylib_dir().display()))
        .arg("-cp")
        .arg(m.class_path());
    c
}

/// The spool's incidents: (directory, incident.json's body).
fn incidents(data: &Path) -> Vec<(PathBuf, Value)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(data.join("spool/incidents"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let Ok(b) = std::fs::read(e.path().join("incident.json")) else {
            continue;
        };
        let v: Value = serde_json::from_slice(&b).unwrap();
        out.push((e.path(), v["body"].clone()));
    }
    out
}

/// The demo as `scripts/demo.sh` runs it (a smaller heap with the 256 MB heap's strike line, fast
/// polls, no upload): it leaks CheckoutActivity screens until the heap verdict; once the analysed
/// report is in the spool the test lets it stop. Returns (stdout and the agent's log, the
/// report), or None if no report came within `wait`.
fn run_demo(m: &Minified, work: &Path, wait: Duration) -> (String, Option<Value>) {
    let data = work.join("data");
    let policy = work.join("policy.json");
    // The demo stops growing, for good, once its heap is at 88 % (see DemoApp.java); a screen
    // is 2 MB, 3 % of this heap, so it stops anywhere from 88 to 91 %. Below 256 MB the default
    // strike line is 90 %, the fast-huge line: this heap gets the 256 MB heap's line (85 %), so a
    // verdict comes wherever it stops (three strikes, or fast-huge over 90 %).
    std::fs::write(
        &policy,
        r#"{"version": 1, "poll_interval_ms": 200,
            "heap": {"thresholds": [{"min_max_heap_mb": 0, "percent": 85}]}}"#,
    )
    .unwrap();
    let done = work.join("done");
    let mut child = java(m)
        .arg("-Xmx64m")
        .arg("DemoApp")
        .arg(&data)
        .arg(&policy)
        .arg(&done)
        .arg(wait.as_secs().to_string())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(work.join("stderr.log")).unwrap())
        .spawn()
        .expect("java starts");
    let end = Instant::now() + wait;
    let mut report = None;
    while Instant::now() < end && report.is_none() {
        report = incidents(&data)
            .into_iter()
            .find_map(|(dir, _)| std::fs::read(dir.join("report.json")).ok())
            .map(|b| serde_json::from_slice::<Value>(&b).unwrap());
        if report.is_none() {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    std::fs::write(&done, "").unwrap();
    let out = child.wait_with_output().unwrap();
    // stdout, then the agent's log (stderr, kept in a file: a pipe could fill while it runs).
    let log = std::fs::read_to_string(work.join("stderr.log")).unwrap_or_default();
    (
        String::from_utf8_lossy(&out.stdout).into_owned() + &log,
        report,
    )
}

/// `DyingApp poll` killed with `kill -9` after its second poll, then `DyingApp report`: the
/// death incidents of the spool (and the report launch's stdout and log).
fn kill_and_relaunch(m: &Minified, work: &Path) -> (u32, Vec<Value>, String) {
    let data = work.join("data");
    let policy = work.join("policy.json");
    std::fs::write(
        &policy,
        r#"{"version": 3, "poll_interval_ms": 100, "death": {"max_per_day": 100}}"#,
    )
    .unwrap();
    let run = |mode: &str| {
        let mut c = java(m);
        c.arg("DyingApp").arg(mode).arg(&data).arg(&policy);
        c
    };
    let mut child = run("poll")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("java starts");
    let pid = child.id();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut polled = false;
    for line in lines.map_while(Result::ok) {
        // The agent refused to start (the natives are gone): no poll will come.
        if line.starts_with("start rc=") && line != "start rc=0" {
            break;
        }
        if line == "polls=2" {
            polled = true;
            break;
        }
    }
    child.kill().expect("kill -9");
    let _ = child.wait();
    let out = run("report").output().expect("java runs");
    // The report launch's stdout, then its log (the agent writes it to stderr).
    let stdout =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let deaths = if polled {
        incidents(&data)
            .into_iter()
            .map(|(_, b)| b)
            .filter(|b| b["runningInfo"]["kind"] == "death")
            .collect()
    } else {
        Vec::new()
    };
    (pid, deaths, stdout)
}

fn skip() -> bool {
    if proguard::available() {
        return false;
    }
    // scripts/test.sh installs it (scripts/lib/setup.sh): CI never skips.
    eprintln!("skipped: no proguard (apt install proguard)");
    true
}

#[test]
fn with_the_shipped_rules_the_minified_demo_reports_its_leak_and_a_kill_its_exit_record() {
    if skip() {
        return;
    }
    let m = apps(Rules::Shipped);
    // Minified for real: the app's classes and the facade's private parts are renamed, the
    // natives' class and names are not, and exitRecord(int) is kept by name.
    let activity = m.class("DemoApp$CheckoutActivity");
    assert_ne!(activity, "DemoApp$CheckoutActivity");
    assert_eq!(m.class("dev.oomguard.OomGuard"), "dev.oomguard.OomGuard");
    let mapping = std::fs::read_to_string(&m.mapping).unwrap();
    assert!(
        mapping.contains("java.lang.String exitRecord(int) -> exitRecord"),
        "{mapping}"
    );
    assert!(mapping.contains("int nativeStart(java.lang.String,java.lang.String,java.lang.String,java.lang.String,java.lang.String,int) -> nativeStart"));
    // The agent's HTTP exchange, which native code calls by name, keeps its name.
    assert!(
        mapping.contains("byte[] http(") && mapping.contains(") -> http\n"),
        "{mapping}"
    );

    let work = tempfile::tempdir().unwrap();
    let (out, report) = run_demo(&m, work.path(), Duration::from_secs(180));
    assert!(out.contains("OomGuard.start rc=0"), "{out}");
    assert!(
        out.contains("network: the platform's HttpURLConnection (OomGuard.http)"),
        "{out}"
    );
    let report = report.unwrap_or_else(|| panic!("no report in the spool:\n{out}"));
    let leak = report["gcPaths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["leakReason"] == "Activity Leak")
        .unwrap_or_else(|| panic!("no Activity Leak: {:#}", report["gcPaths"]));
    // The report reads the minified names (issue 42's --mapping turns them back).
    assert_eq!(leak["className"], activity.as_str(), "{leak:#}");
    assert!(leak["instanceCount"].as_u64().unwrap() >= 3, "{leak:#}");
    // The collector, given this build's mapping, shows the original names (issue 42).
    let renames = collector::mapping::parse(&std::fs::read(&m.mapping).unwrap()).unwrap();
    let mut shown = report.clone();
    renames.report_json(&mut shown);
    let leak = shown["gcPaths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["leakReason"] == "Activity Leak")
        .unwrap();
    assert_eq!(leak["className"], "DemoApp$CheckoutActivity", "{leak:#}");
    assert_eq!(
        leak["path"][0]["reference"], "DemoApp$Session.sHistory",
        "{leak:#}"
    );

    let work = tempfile::tempdir().unwrap();
    let (pid, deaths, out) = kill_and_relaunch(&m, work.path());
    assert_eq!(deaths.len(), 1, "one death: {deaths:#?}\n{out}");
    let exit = &deaths[0]["runningInfo"]["exitInfo"];
    assert_eq!(exit["pid"].as_u64(), Some(pid as u64), "{exit:#}");
    assert_eq!(exit["reasonName"], "REASON_LOW_MEMORY");
    assert_eq!(exit["description"], "canned by DyingApp");
}

#[test]
fn with_no_rules_the_natives_are_renamed_and_the_agent_never_starts() {
    if skip() {
        return;
    }
    let m = apps(Rules::Nothing);
    assert_ne!(m.class("dev.oomguard.OomGuard"), "dev.oomguard.OomGuard");
    let work = tempfile::tempdir().unwrap();
    let (out, report) = run_demo(&m, work.path(), Duration::from_secs(3));
    // OomGuard.ERROR: nativeStart threw UnsatisfiedLinkError (caught by the facade).
    assert!(out.contains("OomGuard.start rc=5"), "{out}");
    assert!(report.is_none());
    let (_, deaths, out) = kill_and_relaunch(&m, work.path());
    assert!(deaths.is_empty(), "{deaths:#?}");
    assert!(out.contains("start rc=5"), "{out}");
}

#[test]
fn with_only_agps_native_rule_a_death_loses_its_exit_record() {
    if skip() {
        return;
    }
    let m = apps(Rules::AgpNative);
    let mapping = std::fs::read_to_string(&m.mapping).unwrap();
    assert!(mapping.contains("-> nativeStart"), "{mapping}");
    assert!(
        !mapping.contains("exitRecord(int) -> exitRecord"),
        "{mapping}"
    );
    let work = tempfile::tempdir().unwrap();
    let (pid, deaths, out) = kill_and_relaunch(&m, work.path());
    assert_eq!(deaths.len(), 1, "the death itself is still seen: {out}");
    let d = &deaths[0];
    assert_eq!(d["runningInfo"]["pid"].as_u64(), Some(pid as u64));
    assert_eq!(d["runningInfo"]["exitInfo"], Value::Null, "{d:#}");
    let why = d["runningInfo"]["exitInfoError"].as_str().unwrap_or("");
    assert!(why.contains("exitRecord"), "{d:#}");
    // Nor is the HTTP exchange kept: the agent falls back to its loopback-only client.
    assert!(!mapping.contains(") -> http\n"), "{mapping}");
    assert!(out.contains("the facade has no OomGuard.http"), "{out}");
}
