//! The flight recorder inside a real Java 17 JVM: processes killed with `kill -9`, ended by an
//! `OutOfMemoryError` or by running out of fds, and ended cleanly; the next launch reports each
//! death exactly once (and no clean end) as a `death` incident in the spool. Each death carries
//! the exit record that the facade's (canned, as on a JVM) exit-info source gave for its pid.

#[path = "common/cgroup.rs"]
mod cgroup;
mod common;

use common::{cdylib_dir, test_app_classes};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Fast polls, no upload, room for every death the tests make.
const POLICY: &str = r#"{"version": 3, "poll_interval_ms": 100,
  "spool": {"max_count": 1000}, "death": {"max_per_day": 1000}}"#;

struct Dir {
    work: tempfile::TempDir,
    data: PathBuf,
}

impl Dir {
    fn new() -> Dir {
        let work = tempfile::Builder::new()
            .prefix("oomguard-flight-")
            .tempdir()
            .unwrap();
        std::fs::write(work.path().join("policy.json"), POLICY).unwrap();
        let data = work.path().join("data");
        Dir { work, data }
    }

    /// With the data directory at `data` instead.
    fn with_data(data: PathBuf) -> Dir {
        Dir { data, ..Dir::new() }
    }

    fn data(&self) -> PathBuf {
        self.data.clone()
    }

    fn java(&self, jvm: &[&str], limits: &[&str], mode: &str) -> Command {
        let c = if limits.is_empty() {
            Command::new("java")
        } else {
            let mut c = Command::new("prlimit");
            c.args(limits).arg("java");
            c
        };
        self.java_with(c, jvm, mode)
    }

    /// `c` (which runs `java`) with the JVM options, the class path and the mode.
    fn java_with(&self, mut c: Command, jvm: &[&str], mode: &str) -> Command {
        c.args(jvm)
            .arg(format!("-Djava.library.path={}", cdylib_dir().display()))
            .arg("-cp")
            .arg(test_app_classes("DyingApp"))
            .arg("DyingApp")
            .arg(mode)
            .arg(self.data())
            .arg(self.work.path().join("policy.json"));
        c
    }

    /// Run a mode to its end; (exit code, stdout, stderr).
    fn run(&self, jvm: &[&str], limits: &[&str], mode: &str) -> (Option<i32>, String, String) {
        self.output(self.java(jvm, limits, mode))
    }

    fn output(&self, mut c: Command) -> (Option<i32>, String, String) {
        let out = c.output().expect("java runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// A launch that only reports: its status.
    fn report(&self) -> Value {
        self.report_with(&[])
    }

    /// [`report`](Self::report) with these JVM options (`-Ddying.polls=N`: after N polls).
    fn report_with(&self, jvm: &[&str]) -> Value {
        let (code, out, err) = self.run(jvm, &[], "report");
        assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
        let json = out
            .split("STATUS-BEGIN\n")
            .nth(1)
            .and_then(|s| s.split("\nSTATUS-END").next())
            .unwrap_or("null");
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"))
    }

    /// The bodies of the spool's death incidents.
    fn deaths(&self) -> Vec<Value> {
        let dir = self.data().join("spool/incidents");
        let mut out = Vec::new();
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(b) = std::fs::read(e.path().join("incident.json")) else {
                continue;
            };
            let v: Value = serde_json::from_slice(&b).unwrap();
            let body = v["body"].clone();
            if body["runningInfo"]["kind"] == "death" {
                out.push(body);
            }
        }
        out
    }
}

/// Start `poll`, read its `polls=N` lines until `min` polls, then `kill -9` it after `extra`
/// more; returns (pid, the last poll count it printed).
fn kill_while_polling(dir: &Dir, min: u32, extra: Duration) -> (u32, u32) {
    let mut child: Child = dir
        .java(&[], &[], "poll")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("java starts");
    let pid = child.id();
    let stdout = child.stdout.take().unwrap();
    let last = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let reached = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let (l, r) = (last.clone(), reached.clone());
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("polls=").and_then(|n| n.parse().ok()) {
                l.store(n, std::sync::atomic::Ordering::SeqCst);
                if n >= min {
                    *r.0.lock().unwrap() = true;
                    r.1.notify_all();
                }
            }
        }
    });
    {
        let (m, cv) = &*reached;
        let g = cv
            .wait_timeout_while(m.lock().unwrap(), Duration::from_secs(30), |r| !*r)
            .unwrap()
            .0;
        assert!(*g, "pid {pid} never reached {min} polls");
    }
    std::thread::sleep(extra);
    child.kill().expect("kill -9");
    let _ = child.wait();
    reader.join().unwrap();
    (pid, last.load(std::sync::atomic::Ordering::SeqCst))
}

fn seq_of_last_sample(death: &Value) -> u64 {
    death["samples"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|s| s["seq"].as_u64())
        .unwrap_or(0)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn each_kill_9_is_reported_once_by_the_next_launch_with_its_last_polls() {
    let began_ms = now_ms();
    let dir = Dir::new();
    let mut killed = Vec::new();
    // A cheap pseudo-random spread of kill moments (no seed to keep: each run is a new spread).
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
        | 1;
    for _ in 0..50 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let extra = Duration::from_millis(x % 350);
        killed.push(kill_while_polling(&dir, 1, extra));
    }
    let status = dir.report();
    assert_eq!(status["previous_death"]["action"], "reported", "{status:#}");
    let deaths = dir.deaths();
    let spool_state =
        std::fs::read_to_string(dir.data().join("spool/spool.json")).unwrap_or_default();
    assert_eq!(
        deaths.len(),
        killed.len(),
        "one death per kill; spool.json: {spool_state}"
    );
    for (pid, printed) in &killed {
        let mine: Vec<&Value> = deaths
            .iter()
            .filter(|d| d["runningInfo"]["pid"].as_u64() == Some(*pid as u64))
            .collect();
        assert_eq!(mine.len(), 1, "pid {pid}: exactly one death incident");
        let d = mine[0];
        let last = seq_of_last_sample(d);
        assert!(
            last >= *printed as u64 && last > 0,
            "pid {pid}: the last recorded poll {last} is before the last one it printed, {printed}"
        );
        let seqs: Vec<u64> = d["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["seq"].as_u64().unwrap())
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "pid {pid}: samples up to the last poll, in order: {seqs:?}"
        );
        assert_eq!(d["runningInfo"]["lastWords"], Value::Null);
        // The exit record the facade's source gave is the one of this very pid.
        let exit = &d["runningInfo"]["exitInfo"];
        assert_eq!(exit["pid"].as_u64(), Some(*pid as u64), "{exit:#}");
        assert_eq!(exit["reasonName"], "REASON_LOW_MEMORY");
        assert_eq!(exit["pssKb"], 123_456);
        assert_eq!(exit["description"], "canned by DyingApp");
        assert!(
            exit["timestampMs"].as_u64().unwrap() >= began_ms,
            "{exit:#}"
        );
        assert!(
            d["reason"]
                .as_str()
                .unwrap()
                .contains("; the system says REASON_LOW_MEMORY: canned by DyingApp"),
            "{}",
            d["reason"]
        );
        assert_eq!(d["runningInfo"]["currentPage"], "Dyingpoll");
        assert_eq!(d["runningInfo"]["appVersion"], "7.0.1");
        assert!(
            d["reason"].as_str().unwrap().contains("no last words"),
            "{}",
            d["reason"]
        );
    }
}

/// Issue 39 item 2: pids are reused, so the next launch's exit record for a killed pid may be
/// an earlier process's. One dated an hour before the killed process started is not attached:
/// the death is reported without "the system says", and `exitInfoError` says why.
#[test]
fn a_stale_exit_record_does_not_explain_a_kill_9() {
    let dir = Dir::new();
    let before_ms = now_ms();
    let (pid, _) = kill_while_polling(&dir, 1, Duration::ZERO);
    let stale = format!("-Ddying.exitAt={}", before_ms - 3_600_000);
    let status = dir.report_with(&[&stale]);
    assert_eq!(status["previous_death"]["action"], "reported", "{status:#}");
    let deaths = dir.deaths();
    assert_eq!(deaths.len(), 1, "{deaths:#?}");
    let d = &deaths[0];
    assert_eq!(d["runningInfo"]["pid"].as_u64(), Some(pid as u64), "{d:#}");
    let reason = d["reason"].as_str().unwrap();
    assert!(!reason.contains("the system says"), "{reason}");
    assert!(reason.contains("no last words"), "{reason}");
    assert_eq!(d["runningInfo"]["exitInfo"], Value::Null, "{d:#}");
    let why = d["runningInfo"]["exitInfoError"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains(&format!("exit record of pid {pid} (REASON_LOW_MEMORY)"))
            && why.contains("before that process started"),
        "{d:#}"
    );
}

/// Issue 39 item 7: an exit-record source that sleeps 30 s does not hold the next launch: its
/// death report comes without the record (saying the system did not answer in time), and the
/// launch ends in seconds.
#[test]
fn a_stuck_exit_record_source_does_not_hold_the_next_launch() {
    let dir = Dir::new();
    let (pid, _) = kill_while_polling(&dir, 1, Duration::ZERO);
    let t0 = std::time::Instant::now();
    let status = dir.report_with(&["-Ddying.exitSleepMs=30000"]);
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(15), "the launch took {took:?}");
    assert_eq!(status["previous_death"]["action"], "reported", "{status:#}");
    let deaths = dir.deaths();
    assert_eq!(deaths.len(), 1, "{deaths:#?}");
    let d = &deaths[0];
    assert_eq!(d["runningInfo"]["pid"].as_u64(), Some(pid as u64), "{d:#}");
    assert_eq!(d["runningInfo"]["exitInfo"], Value::Null, "{d:#}");
    let why = d["runningInfo"]["exitInfoError"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains(&format!("did not say within 1000 ms why pid {pid} ended")),
        "{d:#}"
    );
}

#[test]
fn a_clean_stop_or_exit_reports_no_death() {
    let dir = Dir::new();
    for mode in ["stop", "exit"] {
        let (code, out, err) = dir.run(&[], &[], mode);
        assert_eq!(code, Some(0), "{mode}: {out}\n{err}");
        let status = dir.report();
        assert_eq!(status["previous_death"], Value::Null, "{mode}: {status:#}");
        assert!(
            status["flight"].as_str().unwrap().ends_with(".ring"),
            "{status:#}"
        );
    }
    assert!(dir.deaths().is_empty());
}

fn last_words_of_the_one_death(dir: &Dir) -> Value {
    let status = dir.report();
    assert_eq!(status["previous_death"]["action"], "reported", "{status:#}");
    let deaths = dir.deaths();
    assert_eq!(deaths.len(), 1, "{deaths:#?}");
    let w = deaths[0]["runningInfo"]["lastWords"].clone();
    assert!(w.is_object(), "{:#}", deaths[0]);
    assert!(seq_of_last_sample(&deaths[0]) >= 3, "{:#}", deaths[0]);
    w
}

#[test]
fn an_out_of_memory_error_is_reported_with_its_last_words() {
    let dir = Dir::new();
    let (code, out, err) = dir.run(&["-Xmx48m"], &[], "oom");
    assert_ne!(code, Some(0), "the OOM must end the JVM: {out}\n{err}");
    assert!(err.contains("java.lang.OutOfMemoryError"), "{err}");
    let w = last_words_of_the_one_death(&dir);
    assert_eq!(w["class"], "java.lang.OutOfMemoryError");
    assert_eq!(w["message"], "Java heap space");
    assert_eq!(w["thread"], "main");
    let frames: Vec<&str> = w["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        frames.iter().any(|f| f.starts_with("DyingApp.main(")),
        "{frames:?}"
    );
}

#[test]
fn running_out_of_fds_is_reported_with_its_last_words() {
    let dir = Dir::new();
    let (code, out, err) = dir.run(&[], &["--nofile=200:200"], "fds");
    assert_ne!(code, Some(0), "{out}\n{err}");
    let w = last_words_of_the_one_death(&dir);
    assert_eq!(w["class"], "java.io.FileNotFoundException");
    assert!(
        w["message"]
            .as_str()
            .unwrap()
            .contains("Too many open files"),
        "{w:#}"
    );
}

/// As root RLIMIT_NPROC does not bind, so the JVM runs in a cgroup whose `pids.max` leaves it
/// room for its own threads and its first polls only: it dies of "unable to create native
/// thread", and the next launch's death report names that error.
#[test]
fn running_out_of_threads_is_reported_with_its_last_words() {
    let cg = match cgroup::Cgroup::new("pids", "threads") {
        Ok(c) => c,
        Err(why) => {
            println!("SKIPPED running_out_of_threads_is_reported_with_its_last_words: no pids cgroup can be made here: {why}");
            return;
        }
    };
    cg.set("pids.max", "90").expect("pids.max");
    let dir = Dir::new();
    let (code, out, err) = dir.output(dir.java_with(cg.command("java"), &["-Xss256k"], "threads"));
    assert_ne!(code, Some(0), "{out}\n{err}");
    let events = std::fs::read_to_string(cg.dir.join("pids.events")).unwrap_or_default();
    let w = last_words_of_the_one_death(&dir);
    assert_eq!(w["class"], "java.lang.OutOfMemoryError", "{w:#}\n{err}");
    assert!(
        w["message"]
            .as_str()
            .unwrap()
            .contains("unable to create native thread"),
        "{w:#}\npids.events: {events}"
    );
    assert!(
        w["frames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str().unwrap().contains("java.lang.Thread.start")),
        "{w:#}"
    );
    let reason = dir.deaths()[0]["reason"].as_str().unwrap().to_string();
    assert!(
        reason.contains("after java.lang.OutOfMemoryError: unable to create native thread"),
        "{reason}"
    );
}

/// 20 polls at 100 ms: the app runs on and its agent keeps polling.
const POLLS: &[&str] = &["-Ddying.polls=20"];

fn assert_polled(status: &Value) {
    assert!(status["polls"].as_u64() >= Some(20), "{status:#}");
    assert_eq!(status["state"], "running", "{status:#}");
}

fn assert_off_for_no_space(status: &Value, ring: &std::path::Path) {
    let flight = status["flight"].as_str().unwrap_or_default();
    assert!(flight.starts_with("off: "), "{status:#}");
    assert!(flight.contains(&ring.display().to_string()), "{flight}");
    assert!(flight.contains("No space left on device"), "{flight}");
    assert_eq!(
        std::fs::metadata(ring).map(|m| m.len()).ok(),
        Some(0),
        "the ring is emptied"
    );
}

/// The JVM's process name, which names its ring.
fn ring_of(data: &std::path::Path) -> PathBuf {
    oomguard::recorder::ring_path(data, "java")
}

/// On a full disk, a first launch (no ring yet) and a launch after one that crashed while
/// starting its ring (a file of holes, `set_len` and nothing written) both run on and poll,
/// the recorder off with the reason in their status; when the disk has room again, the next
/// launch records again and reports no death. (Writing the ring through a shared map, both
/// JVMs died of SIGBUS in the agent's thread, exit 134.)
#[test]
fn a_full_disk_turns_the_recorder_off_and_the_app_runs_on() {
    let Some(disk) = testkit::disk::SmallDisk::mount("a_full_disk_turns_the_recorder_off", 256)
    else {
        return;
    };
    let data = disk.path().join("data");
    let ring = ring_of(&data);
    std::fs::create_dir_all(ring.parent().unwrap()).unwrap();
    let dir = Dir::with_data(data);
    disk.fill();
    let status = dir.report_with(POLLS);
    assert_polled(&status);
    assert_off_for_no_space(&status, &ring);
    // What a launch that died after `set_len` left: the ring's length, all holes.
    std::fs::File::options()
        .write(true)
        .open(&ring)
        .unwrap()
        .set_len(oomguard::recorder::FILE_LEN as u64)
        .unwrap();
    let status = dir.report_with(POLLS);
    assert_polled(&status);
    assert_off_for_no_space(&status, &ring);
    assert_eq!(status["previous_death"], Value::Null, "{status:#}");
    disk.free();
    let status = dir.report_with(POLLS);
    assert_eq!(status["flight"], ring.display().to_string(), "{status:#}");
    assert_eq!(status["previous_death"], Value::Null, "{status:#}");
}

/// A ring an earlier launch wrote keeps its blocks: a launch on the now full disk starts it
/// afresh over them, runs on, and records every poll in it.
#[test]
fn a_ring_written_before_the_disk_filled_keeps_recording() {
    let Some(disk) = testkit::disk::SmallDisk::mount("a_ring_written_before_the_disk_filled", 256)
    else {
        return;
    };
    let data = disk.path().join("data");
    let ring = ring_of(&data);
    let dir = Dir::with_data(data);
    let (code, out, err) = dir.run(&[], &[], "stop");
    assert_eq!(code, Some(0), "{out}\n{err}");
    disk.fill();
    let status = dir.report_with(POLLS);
    assert_polled(&status);
    assert_eq!(status["flight"], ring.display().to_string(), "{status:#}");
    let bytes = std::fs::read(&ring).unwrap();
    let p = oomguard::recorder::parse(&ring, &bytes).unwrap();
    assert_eq!(p.state, oomguard::recorder::State::Stopped, "{p:?}");
    assert!(p.samples.len() >= 20, "{} samples", p.samples.len());
}

/// A write that finds no block while the app runs (as a rewrite on f2fs may need one: here a
/// page of the ring punched out on a full disk) turns the recorder off for the process: the app
/// runs on and polls, its status says why and where, and the ring is emptied. (Through a shared
/// map, the store into that page was SIGBUS: exit 134.)
#[test]
fn a_write_that_finds_no_block_while_polling_turns_the_recorder_off() {
    use nix::fcntl::{fallocate, FallocateFlags};
    use std::os::fd::AsRawFd;
    let Some(disk) =
        testkit::disk::SmallDisk::mount("a_write_that_finds_no_block_while_polling", 256)
    else {
        return;
    };
    let data = disk.path().join("data");
    let ring = ring_of(&data);
    let dir = Dir::with_data(data);
    let child = dir
        .java(&["-Ddying.polls=45"], &[], "report")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("java starts");
    // Wait for the ring's first samples; slots 28 to 59 are on its second page.
    let mut recorded = 0;
    for _ in 0..600 {
        let now = std::fs::read(&ring)
            .ok()
            .and_then(|b| oomguard::recorder::parse(&ring, &b).ok())
            .map_or(0, |p| p.samples.len());
        if now >= 1 {
            recorded = now;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(recorded >= 1, "the ring never held a sample");
    disk.fill();
    let f = std::fs::File::options().write(true).open(&ring).unwrap();
    fallocate(
        f.as_raw_fd(),
        FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE,
        4096,
        4096,
    )
    .unwrap();
    drop(f);
    // The page freed goes to `fill` again: the disk is full once more.
    disk.fill();
    let before = oomguard::recorder::parse(&ring, &std::fs::read(&ring).unwrap()).unwrap();
    assert!(
        before.samples.len() < 28,
        "the second page was reached before the hole was punched: {} samples",
        before.samples.len()
    );
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let json = stdout
        .split("STATUS-BEGIN\n")
        .nth(1)
        .and_then(|s| s.split("\nSTATUS-END").next())
        .unwrap_or("null");
    let status: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert!(status["polls"].as_u64() >= Some(45), "{status:#}");
    let flight = status["flight"].as_str().unwrap_or_default();
    assert!(flight.starts_with("off: "), "{status:#}");
    assert!(
        flight.contains(&format!("{}: byte 4096: writing 128 bytes", ring.display())),
        "{flight}"
    );
    assert!(flight.contains("No space left on device"), "{flight}");
    assert!(
        stderr.contains("flight recorder off"),
        "the log says it: {stderr}"
    );
    assert_eq!(
        std::fs::metadata(&ring).unwrap().len(),
        0,
        "the ring is emptied"
    );
}
