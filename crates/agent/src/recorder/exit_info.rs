//! What the system says of a process's end: Android's `ApplicationExitInfo` (API 30+), asked for
//! the previous process's pid when its ring says it died, and attached to the death report.
//!
//! Owns the record ([`ExitInfo`]), the names of the reason codes, the text form in which the
//! Java facade hands a record over (`key=value` lines, [`parse_record`]), and the
//! [`ExitInfoSource`] seam: `jni` implements it by calling the facade's `exitRecord(pid)`
//! (which asks `ActivityManager.getHistoricalProcessExitReasons(package, pid, 1)` on API 30+,
//! or an app-supplied source); [`NoExitInfo`] is the twin where there is no such system, and
//! [`CannedExitInfo`] the stand-in of tests.
//!
//! Invariants:
//! - A record is attached only when its pid is the one asked for *and* its time
//!   (`getTimestamp()`, wall-clock ms) is not before that process started, less
//!   [`START_TOLERANCE_MS`]: the system keeps the exits of earlier processes too, pids are
//!   reused, and a stale record must not explain this death. A record without a time, or a
//!   process whose start time is unknown (0), cannot be told from a stale one: not attached.
//! - The agent never waits on a source for more than [`ASK_WAIT`] ([`ask_within`]): the source
//!   (app code, a binder call) runs on a thread of its own, `oomguard-exit`, which owns it; one
//!   that does not answer in time leaves that thread blocked in it, and the death is reported
//!   without a record, saying so. Such a thread is started only by an agent start that finds a
//!   death in the ring, which the ring allows once per process (it is then this process's).
//! - Parsing never panics: a missing or malformed field reads as unknown (`None` or empty), a
//!   record without a pid or a reason is refused with what is missing.
#![forbid(unsafe_code)]

use serde::Serialize;
use std::time::Duration;

/// One `ApplicationExitInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitInfo {
    pub pid: u32,
    /// `getReason()`.
    pub reason: i32,
    /// Its constant's name, e.g. `REASON_LOW_MEMORY` (`REASON_#n` for a code this agent does
    /// not know).
    pub reason_name: String,
    /// The sub-reason, where the system gives one (hidden API; not every device answers).
    pub sub_reason: Option<i32>,
    /// `getStatus()`: the exit code, or the signal number for `REASON_SIGNALED`.
    pub status: Option<i32>,
    /// `getImportance()` at the time of death.
    pub importance: Option<i32>,
    /// `getDescription()`, e.g. `MemoryLimiter:AnonSwap` under `REASON_OTHER`.
    pub description: String,
    /// `getPss()` / `getRss()` at death, kB.
    pub pss_kb: Option<u64>,
    pub rss_kb: Option<u64>,
    /// `getTimestamp()`, ms since the epoch.
    pub timestamp_ms: Option<u64>,
    pub process_name: String,
}

/// The name of an `ApplicationExitInfo.REASON_*` code (values from the Android reference:
/// 0..=13 since API 30, 14 FREEZER since 33, 15 and 16 since 34, 17 and 18 since 37.2).
pub fn reason_name(code: i32) -> String {
    let name = match code {
        0 => "REASON_UNKNOWN",
        1 => "REASON_EXIT_SELF",
        2 => "REASON_SIGNALED",
        3 => "REASON_LOW_MEMORY",
        4 => "REASON_CRASH",
        5 => "REASON_CRASH_NATIVE",
        6 => "REASON_ANR",
        7 => "REASON_INITIALIZATION_FAILURE",
        8 => "REASON_PERMISSION_CHANGE",
        9 => "REASON_EXCESSIVE_RESOURCE_USAGE",
        10 => "REASON_USER_REQUESTED",
        11 => "REASON_USER_STOPPED",
        12 => "REASON_DEPENDENCY_DIED",
        13 => "REASON_OTHER",
        14 => "REASON_FREEZER",
        15 => "REASON_PACKAGE_STATE_CHANGE",
        16 => "REASON_PACKAGE_UPDATED",
        17 => "REASON_MEMORY_LIMITER",
        18 => "REASON_ANOMALY",
        n => return format!("REASON_#{n}"),
    };
    name.to_string()
}

impl ExitInfo {
    /// Whether the system says memory ended the process: the low-memory killer, the memory
    /// limiter (its own reason on 37.2+, before that `REASON_OTHER` with a `MemoryLimiter`
    /// description), or excessive resource use.
    pub fn memory_related(&self) -> bool {
        matches!(self.reason, 3 | 9 | 17)
            || (self.reason == 13 && self.description.starts_with("MemoryLimiter"))
    }

    /// One line for the death's reason.
    pub fn summary(&self) -> String {
        let mut s = self.reason_name.clone();
        if let Some(sub) = self.sub_reason.filter(|&n| n != 0) {
            s.push_str(&format!(" (sub-reason {sub})"));
        }
        if !self.description.is_empty() {
            s.push_str(&format!(": {}", self.description));
        }
        if let Some(st) = self.status.filter(|_| self.reason == 2) {
            s.push_str(&format!(", signal {st}"));
        }
        s
    }
}

/// Parse the facade's text form of one record: `key=value` lines with the keys `pid`,
/// `reason`, `subReason`, `status`, `importance`, `pss`, `rss` (kB), `timestamp` (ms),
/// `process` and `description`; unknown keys are ignored.
pub fn parse_record(text: &str) -> Result<ExitInfo, String> {
    let mut pid = None;
    let mut reason = None;
    let mut info = ExitInfo {
        pid: 0,
        reason: 0,
        reason_name: String::new(),
        sub_reason: None,
        status: None,
        importance: None,
        description: String::new(),
        pss_kb: None,
        rss_kb: None,
        timestamp_ms: None,
        process_name: String::new(),
    };
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let int = || v.trim().parse::<i32>().ok();
        let long = || {
            v.trim()
                .parse::<i64>()
                .ok()
                .and_then(|x| u64::try_from(x).ok())
        };
        match k.trim() {
            "pid" => pid = v.trim().parse::<u32>().ok(),
            "reason" => reason = int(),
            "subReason" => info.sub_reason = int().filter(|&n| n >= 0),
            "status" => info.status = int(),
            "importance" => info.importance = int(),
            "pss" => info.pss_kb = long(),
            "rss" => info.rss_kb = long(),
            "timestamp" => info.timestamp_ms = long(),
            "process" => info.process_name = v.to_string(),
            "description" => info.description = v.to_string(),
            _ => {}
        }
    }
    match (pid, reason) {
        (Some(p), Some(r)) => {
            info.pid = p;
            info.reason = r;
            info.reason_name = reason_name(r);
            Ok(info)
        }
        (None, _) => Err(format!("exit record without a pid: {:?}", cut(text))),
        (_, None) => Err(format!("exit record without a reason: {:?}", cut(text))),
    }
}

fn cut(s: &str) -> &str {
    let mut n = s.len().min(200);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

/// Where the system's word on a process's end comes from.
pub trait ExitInfoSource {
    /// The record of the process `pid`, `Ok(None)` when the system has none (or there is no
    /// such system); `Err` says why it could not be asked.
    fn exit_info(&mut self, pid: u32) -> Result<Option<ExitInfo>, String>;
}

/// No system to ask (Linux, Android before API 30).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoExitInfo;

impl ExitInfoSource for NoExitInfo {
    fn exit_info(&mut self, _: u32) -> Result<Option<ExitInfo>, String> {
        Ok(None)
    }
}

/// Canned records (tests): answers the one whose pid is asked for.
#[derive(Debug, Clone, Default)]
pub struct CannedExitInfo {
    pub records: Vec<ExitInfo>,
    /// The pids asked for, in order (shared: the agent asks from a thread of its own).
    pub asked: std::sync::Arc<std::sync::Mutex<Vec<u32>>>,
}

impl ExitInfoSource for CannedExitInfo {
    fn exit_info(&mut self, pid: u32) -> Result<Option<ExitInfo>, String> {
        self.asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(pid);
        Ok(self.records.iter().find(|r| r.pid == pid).cloned())
    }
}

/// How long before the dead process's recorded start an exit record may be dated and still be
/// taken as its own: 1 s. Both times are wall-clock ms (the record's `getTimestamp()`, taken by
/// the system at the death; the ring's `process_start_ms`, the kernel's boot time `btime` plus the
/// process's start ticks, read when its agent started). `btime` is whole seconds, rounded down,
/// so the recorded start errs early, never late; what this allows for is the wall clock being
/// stepped back between that start and the death (an NTP correction). A pid reused within this
/// second is the price.
pub const START_TOLERANCE_MS: u64 = 1_000;

/// Ask `source` for the record of process `pid`, which started at `started_ms` (wall-clock ms,
/// 0: unknown), and keep it only when it names that pid and is dated after that start (less
/// [`START_TOLERANCE_MS`]); a record refused says why in the `Err`.
pub fn ask(
    source: &mut dyn ExitInfoSource,
    pid: u32,
    started_ms: u64,
) -> Result<Option<ExitInfo>, String> {
    let Some(r) = source.exit_info(pid)? else {
        return Ok(None);
    };
    if r.pid != pid {
        return Err(format!(
            "the system's exit record is of pid {}, not {pid}: not attached",
            r.pid
        ));
    }
    match r.timestamp_ms {
        None => Err(format!(
            "the system's exit record of pid {pid} ({}) has no time: it cannot be told from an earlier process's with the same pid; not attached",
            r.reason_name
        )),
        Some(_) if started_ms == 0 => Err(format!(
            "the start of pid {pid} is unknown: its exit record ({}) cannot be told from an earlier process's with the same pid; not attached",
            r.reason_name
        )),
        Some(t) if t.saturating_add(START_TOLERANCE_MS) < started_ms => Err(format!(
            "the system's exit record of pid {pid} ({}) is dated {t} ms, {} ms before that process started ({started_ms} ms): an earlier process with the same pid; not attached",
            r.reason_name,
            started_ms - t
        )),
        Some(_) => Ok(Some(r)),
    }
}

/// How long the agent waits for the system's word on the previous process's end before it
/// reports the death without it, and polls: 1 s, the most the first poll can be delayed by a
/// slow source. `getHistoricalProcessExitReasons` is one binder call, which answers in
/// milliseconds even at a busy start; a source slower than this is a stuck one.
pub const ASK_WAIT: Duration = Duration::from_millis(1_000);

/// [`ask`], on a thread of its own (`oomguard-exit`, which owns `source`), waiting at most
/// `wait` for its answer. Past that the thread is left to the source (its answer is dropped)
/// and the `Err` says the system did not answer in time; a source that panics is an `Err` too.
pub fn ask_within(
    source: Box<dyn ExitInfoSource + Send>,
    pid: u32,
    started_ms: u64,
    wait: Duration,
) -> Result<Option<ExitInfo>, String> {
    let (tx, rx) = sys::chan::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("oomguard-exit".into())
        .spawn(move || {
            let mut source = source;
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                ask(&mut *source, pid, started_ms)
            }))
            .unwrap_or_else(|_| {
                Err(format!(
                    "the exit-record source panicked when asked for pid {pid}"
                ))
            });
            let _ = tx.send(r);
        });
    if let Err(e) = spawned {
        return Err(format!(
            "no thread to ask the system why pid {pid} ended ({e}): not asked"
        ));
    }
    match rx.recv_timeout(wait) {
        Ok(r) => r,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(format!(
            "the system did not say within {} ms why pid {pid} ended (a slow exit-record source or binder call): not waited for",
            wait.as_millis()
        )),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(format!(
            "the lookup of pid {pid}'s exit record ended without an answer"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_with_their_reason_names() {
        let r = parse_record(
            "pid=4321\nreason=3\nsubReason=0\nstatus=9\nimportance=400\npss=183000\nrss=251000\ntimestamp=1700000000123\nprocess=com.example\ndescription=lmk: low memory\nnew=ignored\n",
        )
        .unwrap();
        assert_eq!(r.pid, 4321);
        assert_eq!(r.reason_name, "REASON_LOW_MEMORY");
        assert_eq!(
            (r.sub_reason, r.status, r.importance),
            (Some(0), Some(9), Some(400))
        );
        assert_eq!((r.pss_kb, r.rss_kb), (Some(183_000), Some(251_000)));
        assert_eq!(r.timestamp_ms, Some(1_700_000_000_123));
        assert_eq!(r.description, "lmk: low memory");
        assert_eq!(r.process_name, "com.example");
        assert!(r.memory_related());
        assert_eq!(r.summary(), "REASON_LOW_MEMORY: lmk: low memory");

        let other = parse_record(
            "pid=7\nreason=13\ndescription=MemoryLimiter:AnonSwap\nsubReason=-1\npss=x\n",
        )
        .unwrap();
        assert_eq!(other.reason_name, "REASON_OTHER");
        assert_eq!((other.sub_reason, other.pss_kb), (None, None));
        assert!(other.memory_related());
        let plain_other = parse_record("pid=7\nreason=13\ndescription=updated\n").unwrap();
        assert!(!plain_other.memory_related());
        let limiter = parse_record("pid=7\nreason=17\n").unwrap();
        assert_eq!(limiter.reason_name, "REASON_MEMORY_LIMITER");
        assert!(limiter.memory_related());
        let signaled = parse_record("pid=7\nreason=2\nstatus=9\nsubReason=5").unwrap();
        assert_eq!(
            signaled.summary(),
            "REASON_SIGNALED (sub-reason 5), signal 9"
        );
        assert!(!signaled.memory_related());
        assert_eq!(
            parse_record("pid=7\nreason=99\n").unwrap().reason_name,
            "REASON_#99"
        );
        for (code, name) in [
            (0, "REASON_UNKNOWN"),
            (14, "REASON_FREEZER"),
            (16, "REASON_PACKAGE_UPDATED"),
            (18, "REASON_ANOMALY"),
        ] {
            assert_eq!(reason_name(code), name);
        }
    }

    #[test]
    fn records_without_pid_or_reason_are_refused() {
        assert!(parse_record("reason=3\n")
            .unwrap_err()
            .contains("without a pid"));
        assert!(parse_record("pid=3\n")
            .unwrap_err()
            .contains("without a reason"));
        assert!(parse_record("pid=-3\nreason=3")
            .unwrap_err()
            .contains("without a pid"));
        assert!(parse_record("").is_err());
        // The record is quoted in the error, its first 200 bytes at most, cut at a char
        // boundary.
        assert_eq!(
            parse_record("reason=3\n").unwrap_err(),
            "exit record without a pid: \"reason=3\\n\""
        );
        let long = format!("reason=3\n{}", "\u{e9}".repeat(150));
        assert_eq!(
            parse_record(&long).unwrap_err(),
            format!("exit record without a pid: {:?}", &long[..199])
        );
    }

    const STARTED: u64 = 1_800_000_000_000;

    #[test]
    fn only_the_record_of_the_pid_asked_for_is_kept() {
        let rec = |pid| {
            parse_record(&format!("pid={pid}\nreason=3\ntimestamp={}\n", STARTED + 5)).unwrap()
        };
        let mut c = CannedExitInfo {
            records: vec![rec(10), rec(11)],
            ..CannedExitInfo::default()
        };
        assert_eq!(ask(&mut c, 11, STARTED).unwrap().unwrap().pid, 11);
        assert_eq!(ask(&mut c, 12, STARTED).unwrap(), None);
        assert_eq!(*c.asked.lock().unwrap(), vec![11, 12]);
        /// A source that answers another pid's record (a stale one).
        struct Stale;
        impl ExitInfoSource for Stale {
            fn exit_info(&mut self, _: u32) -> Result<Option<ExitInfo>, String> {
                Ok(Some(parse_record("pid=1\nreason=4\n").unwrap()))
            }
        }
        assert!(ask(&mut Stale, 2, STARTED)
            .unwrap_err()
            .contains("pid 1, not 2"));
        assert_eq!(ask(&mut NoExitInfo, 2, STARTED).unwrap(), None);
    }

    /// A source that sleeps `0` before answering `1`.
    struct Slow(Duration, Option<ExitInfo>);
    impl ExitInfoSource for Slow {
        fn exit_info(&mut self, _: u32) -> Result<Option<ExitInfo>, String> {
            std::thread::sleep(self.0);
            Ok(self.1.clone())
        }
    }

    /// Issue 39 item 7: a source that does not answer within the wait is not waited for; one
    /// that answers in time, or panics, is heard.
    #[test]
    fn a_slow_source_is_not_waited_for_beyond_the_wait() {
        let rec = parse_record(&format!("pid=9\nreason=3\ntimestamp={STARTED}\n")).unwrap();
        let t0 = std::time::Instant::now();
        let slow = Box::new(Slow(Duration::from_secs(30), Some(rec.clone())));
        let e = ask_within(slow, 9, STARTED, Duration::from_millis(200)).unwrap_err();
        let took = t0.elapsed();
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert!(
            e.contains("did not say within 200 ms why pid 9 ended"),
            "{e}"
        );
        let quick = Box::new(Slow(Duration::from_millis(10), Some(rec.clone())));
        assert_eq!(ask_within(quick, 9, STARTED, ASK_WAIT).unwrap(), Some(rec));
        struct Panics;
        impl ExitInfoSource for Panics {
            fn exit_info(&mut self, _: u32) -> Result<Option<ExitInfo>, String> {
                panic!("an app's source failed")
            }
        }
        assert!(ask_within(Box::new(Panics), 9, STARTED, ASK_WAIT)
            .unwrap_err()
            .contains("panicked"));
    }

    /// Pids are reused: a record of the pid asked for but dated before that process started is
    /// an earlier process's, and is refused; within the documented tolerance (a wall clock
    /// stepped back) it is kept; without a time, or without a start to compare with, it
    /// cannot be told from a stale one.
    #[test]
    fn a_record_dated_before_the_process_started_is_refused() {
        let at = |t: u64| {
            let mut c = CannedExitInfo {
                records: vec![parse_record(&format!("pid=9\nreason=3\ntimestamp={t}\n")).unwrap()],
                ..CannedExitInfo::default()
            };
            ask(&mut c, 9, STARTED)
        };
        let stale = at(STARTED - 3_600_000).unwrap_err();
        assert!(
            stale.contains("3600000 ms before that process started")
                && stale.contains("REASON_LOW_MEMORY")
                && stale.contains("not attached"),
            "{stale}"
        );
        assert!(at(STARTED - START_TOLERANCE_MS - 1).is_err());
        assert_eq!(
            at(STARTED - START_TOLERANCE_MS)
                .unwrap()
                .unwrap()
                .timestamp_ms,
            Some(STARTED - START_TOLERANCE_MS)
        );
        assert!(at(STARTED + 60_000).unwrap().is_some());
        let mut untimed = CannedExitInfo {
            records: vec![parse_record("pid=9\nreason=3\n").unwrap()],
            ..CannedExitInfo::default()
        };
        assert!(ask(&mut untimed, 9, STARTED)
            .unwrap_err()
            .contains("has no time"));
        let mut timed = CannedExitInfo {
            records: vec![parse_record("pid=9\nreason=3\ntimestamp=5\n").unwrap()],
            ..CannedExitInfo::default()
        };
        assert!(ask(&mut timed, 9, 0)
            .unwrap_err()
            .contains("start of pid 9 is unknown"));
    }
}
