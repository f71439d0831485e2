//! The ART fork dumper under faults, in a row, and the incident's upload, all on ART 11 (the
//! test runtime of `tests/art`), through the dex facade as an app calls it.
//!
//! The app is `DumpLoopMain` (tests/art/app): it starts the agent, leaks 4 destroyed
//! Activities, runs two other threads that allocate all along (`AllocThread`, started with
//! `Thread.start`), then calls `OomGuard.dumpNow` and waits until the agent's `status.json`
//! counts the verdict, then runs Java again, as often as asked.
//!
//! The faults come from `libchildfault.so` (tests/art/native/childfault.c), preloaded into the
//! ART process: it interposes `write` and its twins, so in the dump child (and only there) a
//! chosen write never returns, or ends the child with exit code 3: with `dump.keep_full` on,
//! the third of libart's own writes of the dump (which the tee's hooks pass on to `write`), in
//! the middle of `DumpHeap`; with it off, the stripper's first write of the mini file, after
//! `DumpHeap` and before the completion record. The shipped library is untouched: the child is
//! stopped inside the real dump, and the parent's real wait, deadline and clean-up judge it.

mod common;
#[path = "art/harness.rs"]
mod harness;
#[path = "art/support.rs"]
mod support;

use collector::{Collector, Config, Stats};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{incident_body, incident_json};

/// One run of `DumpLoopMain`.
struct App {
    run: harness::Run,
    w: support::Workdir,
}

impl App {
    fn why(&self) -> String {
        self.run.describe()
    }

    /// The per-dump lines: `dump=I verdicts=V children=C allocated=A java=J`.
    fn dumps(&self) -> Vec<HashMap<String, i64>> {
        self.run
            .stdout
            .lines()
            .filter(|l| l.starts_with("dump="))
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.parse().unwrap_or(i64::MIN)))
                    .collect()
            })
            .collect()
    }

    /// The spool's incident directories, oldest first.
    fn incidents(&self) -> Vec<PathBuf> {
        support::incidents(&self.w.data)
    }

    /// Files in the spool's staging directory (what an unfinished incident left).
    fn staged(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let Ok(d) = std::fs::read_dir(self.w.data.join("spool/staging")) else {
            return out;
        };
        for e in d.flatten() {
            out.push(e.path());
            if let Ok(inner) = std::fs::read_dir(e.path()) {
                out.extend(inner.flatten().map(|f| f.path()));
            }
        }
        out
    }
}

/// Runs `DumpLoopMain` with the agent's library, the default policy changed by `edit` (plus a
/// poll interval long enough that only `dumpNow` acts), `extra` VM options and `env`; unless
/// `extra` says otherwise, `-Xmx64m` and two allocating threads.
fn run_loop(
    extra: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
    edit: impl FnOnce(&mut serde_json::Value),
) -> App {
    let w = support::Workdir::new();
    let bin = common::oomguard_bin();
    let data_opt = w.data_option();
    let policy_opt = support::policy_option(|p| {
        p["poll_interval_ms"] = 600_000.into();
        edit(p);
    });
    let mut options = vec![data_opt.as_str(), policy_opt.as_str()];
    if !extra.iter().any(|o| o.starts_with("-Xmx")) {
        options.push("-Xmx64m");
    }
    if !extra.iter().any(|o| o.starts_with("-Doomguard.threads=")) {
        options.push("-Doomguard.threads=2");
    }
    options.extend_from_slice(extra);
    let mut envs = vec![w.lib_env(), ("OOMGUARD_BIN", bin.to_str().unwrap())];
    envs.extend_from_slice(env);
    let run = harness::launch(w.path(), "DumpLoopMain", &options, &envs, timeout);
    App { run, w }
}

/// The pid of a process named `oomguard-dump` whose parent has `tag` in its command line
/// (this test's ART process), if there is one.
fn dump_child_of(tag: &Path) -> Option<i32> {
    let tag = tag.to_string_lossy().into_owned();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if &stat[open + 1..close] != "oomguard-dump" {
            continue;
        }
        let ppid: i32 = stat[close + 2..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{ppid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&tag) {
            return Some(pid);
        }
    }
    None
}

/// The fault `mode` ("hang" or "exit") at the write after `after_writes` in the dump child of one
/// `dumpNow`, with the policy's `keep_full` and `child_deadline_s`. With `kill`, a thread here
/// waits until the child is stuck in its fault, then kills it with SIGKILL, as the kernel's
/// low-memory killer would. Returns the run and the pid killed.
fn fault_run(
    mode: &str,
    after_writes: u32,
    keep_full: bool,
    deadline_s: u64,
    kill: bool,
) -> (App, Option<i32>) {
    let lib_dir = harness::runtime().lib_dir();
    let preload = lib_dir.join("libchildfault.so");
    let mark_dir = support::tempdir();
    let mark = mark_dir.path().join("fault.mark");
    // The ART process is told the marker's directory as a VM option nobody reads: its command
    // line then names it, which is how the killer finds this test's ART process.
    let tag = mark_dir.path().to_string_lossy().into_owned();
    let mark_opt = format!("-Doomguard.test_tag={tag}");
    let mark_s = mark.to_string_lossy().into_owned();
    let after = after_writes.to_string();
    let killer = kill.then(|| {
        let mark = mark.clone();
        let tag = PathBuf::from(&tag);
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(90) {
                if mark.exists() {
                    if let Some(pid) = dump_child_of(&tag) {
                        // SAFETY: a plain kill(2) of the dump child found just above.
                        let r = unsafe { libc::kill(pid, libc::SIGKILL) };
                        return (r == 0).then_some(pid);
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            None
        })
    });
    let app = run_loop(
        &[mark_opt.as_str()],
        &[
            ("LD_PRELOAD", preload.to_str().unwrap()),
            ("OOMGUARD_TEST_CHILD_FAULT", mode),
            ("OOMGUARD_TEST_CHILD_FAULT_AFTER", &after),
            ("OOMGUARD_TEST_CHILD_FAULT_MARK", &mark_s),
        ],
        Duration::from_secs(120),
        |p| {
            p["dump"]["keep_full"] = keep_full.into();
            p["dump"]["child_deadline_s"] = deadline_s.into();
        },
    );
    let killed = killer.and_then(|h| h.join().expect("killer thread"));
    let why = app.why();
    assert!(
        mark.exists(),
        "the fault was never injected: the dump child made no more than {after_writes} writes\n{why}"
    );
    (app, killed)
}

/// What every failed dump must show: the verdict reported without a dump (its `dumpError`
/// saying `want`), no dump file left anywhere in the spool, nothing analysed, no dump child
/// left, and the app running Java afterwards (the other threads too).
fn assert_failed_dump(app: &App, want: &str) {
    let why = app.why();
    assert_eq!(app.run.code, Some(0), "{why}");
    assert_eq!(app.run.value("start"), Some(0), "{why}");
    assert!(
        app.run
            .stderr
            .contains("heap dump failed dumper=\"art-fork\""),
        "{why}"
    );
    assert!(!app.run.stderr.contains("heap dump taken"), "{why}");
    let dumps = app.dumps();
    assert_eq!(dumps.len(), 1, "{why}");
    let d = &dumps[0];
    assert_eq!(d["verdicts"], 1, "the verdict's action ended\n{why}");
    assert_eq!(d["children"], 0, "no dump child left behind\n{why}");
    assert_eq!(d["java"], 256, "Java ran after the failed dump\n{why}");
    assert!(d["allocated"] > 0, "the other threads allocated\n{why}");
    assert_eq!(app.run.value("threads_finished"), Some(2), "{why}");
    assert_eq!(app.run.value("stop"), Some(0), "{why}");
    assert_eq!(app.run.value("zombies"), Some(0), "{why}");
    assert_eq!(app.run.value("end"), Some(1), "{why}");

    let incidents = app.incidents();
    let bodies: Vec<serde_json::Value> = incidents.iter().map(|d| incident_body(d)).collect();
    assert_eq!(incidents.len(), 1, "{bodies:#?}\n{why}");
    let dir = &incidents[0];
    let files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for f in ["dump.hprof", "mini.hprof", "mini.hprof.gz", "report.json"] {
        assert!(!files.contains(&f.to_string()), "{f} in {files:?}\n{why}");
    }
    assert!(app.staged().is_empty(), "{:?}\n{why}", app.staged());
    let body = incident_body(dir);
    let err = body["dumpError"].as_str().unwrap_or_default();
    assert!(
        err.starts_with("dump child ")
            && err.contains(want)
            && err.contains("partial files removed"),
        "dumpError {err:?}, want {want:?}\n{body:#}"
    );
    assert_eq!(
        body["runningInfo"]["dumper"],
        serde_json::Value::Null,
        "{body:#}"
    );
    // Never analysed: no analysis ran, none was asked for.
    assert!(!app.run.stderr.contains("analysis done"), "{why}");
    let analysed: Vec<_> = std::fs::read_dir(app.w.data.join("analysis"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(analysed.is_empty(), "{analysed:?}\n{why}");
    let status = app.run.status();
    assert_eq!(
        status["last_verdict"]["action"]["action"], "reported",
        "{status:#}\n{why}"
    );
    // The whole data directory holds no .hprof file.
    let mut hprofs = Vec::new();
    find_files(&app.w.data, ".hprof", &mut hprofs);
    assert!(hprofs.is_empty(), "{hprofs:?}");
}

/// Every file under `dir` whose name ends with `suffix`.
fn find_files(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
    let Ok(d) = std::fs::read_dir(dir) else {
        return;
    };
    for e in d.flatten() {
        let p = e.path();
        if p.is_dir() {
            find_files(&p, suffix, out);
        } else if p.to_string_lossy().ends_with(suffix) {
            out.push(p);
        }
    }
}

/// A dump child killed with SIGKILL in the middle of its dump (the full file kept, so libart's
/// own writes reach the file): a failed dump, its files removed, never analysed, the verdict
/// still reported; the app goes on.
#[test]
fn art_dump_child_killed_mid_dump_is_a_failed_dump() {
    if !harness::available("art_dump_child_killed_mid_dump_is_a_failed_dump") {
        return;
    }
    let (app, killed) = fault_run("hang", 2, true, 60, true);
    let why = app.why();
    let pid = killed.unwrap_or_else(|| panic!("no dump child was found to kill\n{why}"));
    assert_failed_dump(&app, &format!("{pid} was killed by signal 9"));
}

/// A dump child that hangs in the middle of its dump (the full file kept) is killed at the
/// policy's deadline (5 s, the least it allows): a failed dump like any other.
#[test]
fn art_dump_child_hung_past_its_deadline_is_a_failed_dump() {
    if !harness::available("art_dump_child_hung_past_its_deadline_is_a_failed_dump") {
        return;
    }
    let (app, _) = fault_run("hang", 2, true, 5, false);
    assert_failed_dump(&app, "passed its deadline and was killed");
}

/// A dump child that exits with code 3 as it writes the mini file (the default policy: only the
/// stripped file is written), before its completion record: a failed dump.
#[test]
fn art_dump_child_exiting_non_zero_is_a_failed_dump() {
    if !harness::available("art_dump_child_exiting_non_zero_is_a_failed_dump") {
        return;
    }
    let (app, _) = fault_run("exit", 0, false, 60, false);
    assert_failed_dump(&app, "exited with code 3 without its completion record");
}

/// `oomguard ARGS`, which must succeed.
fn oomguard(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let out = Command::new(common::oomguard_bin())
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "oomguard {args:?}: {out:?}");
    out
}

/// 50 fork dumps in a row on ART while six other threads allocate 1 KiB arrays in a 16 MiB heap
/// (so that garbage collections for allocation keep starting, and threads wait for them while
/// the dump's GC critical section holds them off): each one taken (none hangs: the child's
/// deadline is 20 s, the whole run has one), no dump child left after any, the app running
/// Java after each, no zombie at the end; every mini file parses (`oomguard inspect`) and equals
/// `oomguard strip` of its full twin. Before the dumper held the thread suspend count lock and
/// the GC critical section across the fork, one or two of 50 such children hung until their
/// deadline (a thread leaving its wait for the GC held the lock at the fork).
#[test]
fn art_fifty_fork_dumps_in_a_row() {
    if !harness::available("art_fifty_fork_dumps_in_a_row") {
        return;
    }
    const N: i64 = 50;
    let t0 = Instant::now();
    let app = run_loop(
        &[
            "-Doomguard.dumps=50",
            "-Xmx16m",
            "-Doomguard.threads=6",
            "-Doomguard.alloc_bytes=1024",
        ],
        &[],
        Duration::from_secs(300),
        |p| {
            p["dump"]["keep_full"] = true.into();
            p["dump"]["child_deadline_s"] = 20.into();
            p["dump"]["once_per_process"] = false.into();
            p["dump"]["per_version_quota"] = 1000.into();
            p["dump"]["min_free_disk_mb"] = 0.into();
            p["spool"]["max_count"] = 1000.into();
            p["spool"]["max_bytes"] = (8u64 << 30).into();
        },
    );
    let took = t0.elapsed();
    let why = app.why();
    eprintln!("art_fifty_fork_dumps_in_a_row: the ART run took {took:?}");
    assert_eq!(app.run.code, Some(0), "{why}");
    let dumps = app.dumps();
    assert_eq!(dumps.len() as i64, N, "{why}");
    for (i, d) in dumps.iter().enumerate() {
        let i = i as i64 + 1;
        assert_eq!(d["dump"], i, "{why}");
        assert_eq!(d["verdicts"], i, "dump {i}\n{why}");
        assert_eq!(d["children"], 0, "dump {i} left a dump child\n{why}");
        assert_eq!(d["java"], 256, "dump {i}\n{why}");
        assert!(
            d["allocated"] > 0,
            "dump {i}: the other threads stood still\n{why}"
        );
    }
    assert_eq!(
        app.run
            .stderr
            .matches("heap dump taken dumper=\"art-fork\"")
            .count() as i64,
        N,
        "{why}"
    );
    assert!(!app.run.stderr.contains("heap dump failed"), "{why}");
    // Every lock the dumper holds across the fork resolves in this libart.
    assert!(!app.run.stderr.contains("does not resolve"), "{why}");
    assert_eq!(app.run.value("threads_finished"), Some(6), "{why}");
    assert_eq!(app.run.value("stop"), Some(0), "{why}");
    assert_eq!(app.run.value("zombies"), Some(0), "{why}");
    assert_eq!(app.run.value("end"), Some(1), "{why}");

    let incidents = app.incidents();
    assert_eq!(incidents.len() as i64, N, "{why}");
    assert!(app.staged().is_empty(), "{:?}", app.staged());
    let t1 = Instant::now();
    for dir in &incidents {
        let mini = dir.join("mini.hprof");
        let out = oomguard(&["inspect".as_ref(), mini.as_os_str(), "--json".as_ref()]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{}: inspect --json: {e}", mini.display()));
        assert!(v.is_object(), "{v}");
        support::assert_mini_is_strip_of_full(dir, &app.w.path().join("strip.hprof"));
    }
    eprintln!(
        "art_fifty_fork_dumps_in_a_row: {} incidents checked in {:?}",
        incidents.len(),
        t1.elapsed()
    );
}

/// [`run_loop`] with `extra` VM options while an in-process collector on loopback receives
/// into a [`support::tempdir`], the policy's `upload.url` naming it (the default policy
/// otherwise: `unmetered_only`, `keep_full` off). Returns the run, the collector's final
/// counts, and the directory it received into.
fn run_uploading(extra: &[&str]) -> (App, Stats, tempfile::TempDir) {
    let received = support::tempdir();
    let collector = Collector::bind("127.0.0.1:0", Config::new(received.path()))
        .unwrap()
        .spawn();
    let endpoint = collector.endpoint();
    let app = run_loop(extra, &[], Duration::from_secs(120), |p| {
        p["upload"]["url"] = endpoint.into();
    });
    (app, collector.stop(), received)
}

/// The whole incident on ART up to a real collector on loopback (through the loopback twin:
/// the ART facade has no `OomGuard.http`, its core library no `java.net`): the app reports an unmetered
/// network through the facade's `setNetwork` (as its `NetworkCallback` would; until then the
/// agent assumes a metered one on Android), `dumpNow` dumps through the ART fork dumper, the
/// analyser runs out of process, and the uploader sends the incident over tus. The collector
/// receives `meta.json`, `report.json` and the compressed mini dump; the received report names
/// the planted Activity leak, and the app's spool is empty (every file acknowledged).
#[test]
fn art_incident_is_uploaded_to_a_collector() {
    if !harness::available("art_incident_is_uploaded_to_a_collector") {
        return;
    }
    let (app, stats, received) = run_uploading(&[
        "-Doomguard.network=unmetered",
        "-Doomguard.await_upload=60000",
    ]);
    let why = app.why();
    assert_eq!(app.run.code, Some(0), "{why}");
    assert_eq!(app.run.value("set_network"), Some(0), "{why}");
    assert_eq!(app.run.value("uploaded"), Some(1), "{why}\n{stats:?}");
    assert!(
        app.run
            .stderr
            .contains("heap dump taken dumper=\"art-fork\""),
        "{why}"
    );
    assert!(
        app.run.stderr.contains("report acknowledged by the server"),
        "{why}"
    );
    // The test core library has no java.net, and the smali facade no `http`: the bytes went
    // through the loopback twin (`net` module doc), to the real collector over TCP.
    assert!(
        app.run
            .stderr
            .contains("network: the facade has no OomGuard.http"),
        "{why}"
    );
    assert_eq!(app.run.value("end"), Some(1), "{why}");

    let incidents: Vec<PathBuf> = std::fs::read_dir(received.path().join("incidents"))
        .unwrap_or_else(|e| panic!("the collector received nothing: {e}\n{why}"))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(incidents.len(), 1, "{incidents:?}\n{why}");
    let dir = &incidents[0];
    let meta = incident_json(dir, "meta.json");
    assert_eq!(meta["runningInfo"]["dumper"], "art-fork", "{meta:#}");
    assert_eq!(meta["runningInfo"]["apiLevel"], 30, "{meta:#}");
    assert_eq!(meta["runningInfo"]["kind"], "Manual", "{meta:#}");
    assert_eq!(meta["dumpError"], serde_json::Value::Null, "{meta:#}");
    assert_eq!(meta["missing"], serde_json::json!([]), "{meta:#}");
    support::planted_activity_leak(&incident_json(dir, "report.json"));
    // The mini dump as received: gzip of a stripped HPROF that parses.
    let gz = dir.join("mini.hprof.gz");
    let mut mini = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).expect("mini.hprof.gz")),
        &mut mini,
    )
    .unwrap();
    assert!(mini.starts_with(b"JAVA PROFILE 1.0.3\0"));
    let unzipped = app.w.path().join("received.hprof");
    std::fs::write(&unzipped, &mini).unwrap();
    oomguard(&["inspect".as_ref(), unzipped.as_os_str()]);
}

/// Until the app reports its network the agent on Android assumes a metered one, and the
/// default policy uploads only on unmetered networks: the incident stays in the spool and the
/// collector receives nothing.
#[test]
fn art_incident_waits_for_an_unmetered_network() {
    if !harness::available("art_incident_waits_for_an_unmetered_network") {
        return;
    }
    let (app, stats, _received) = run_uploading(&["-Doomguard.await_upload=5000"]);
    let why = app.why();
    assert_eq!(app.run.code, Some(0), "{why}");
    assert_eq!(app.run.value("uploaded"), Some(0), "{why}");
    assert!(
        app.run
            .stderr
            .contains("heap dump taken dumper=\"art-fork\""),
        "{why}"
    );
    assert_eq!(stats.files_completed, 0, "{stats:?}");
    let incidents = app.incidents();
    assert_eq!(incidents.len(), 1, "{why}");
    assert!(incidents[0].join("report.json").exists(), "analysed\n{why}");
}
