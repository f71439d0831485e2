//! The server-answer matrix: a scripted tus server on 127.0.0.1 answers 200/201/204, 404 and
//! 403 on HEAD, 409 offset mismatch, 413/400/422 to a creation, 4xx and redirects that say the
//! endpoint is wrong (401, 403, 404, 405, 407, 408, 412, ...), 429 and 503 with Retry-After,
//! 500, a reset connection and a stalled response, and each gives the behaviour the upload
//! module promises.

mod common;
#[path = "upload_matrix/pass.rs"]
mod pass;
mod scripted;

use oomguard::spool::{
    AnalysisJob, Clock, FileKind, ManualClock, NewIncident, Quotas, RealFs, Spool, State,
};
use oomguard::upload::{self, Network, Stop};
use scripted::{Act, Hit, Scripted};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const T0: u64 = 1_800_000_000_000;

struct Env {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    clock: Arc<ManualClock>,
}

impl Env {
    fn new() -> Env {
        Env::with_incidents(1)
    }
    /// `n` analysed incidents, `{T0}-m` first, then `{T0}-m2`, `{T0}-m3`... (upload order).
    fn with_incidents(n: u64) -> Env {
        let tmp = common::fast_tmp();
        let root = tmp.path().join("spool");
        let env = Env {
            _tmp: tmp,
            root,
            clock: Arc::new(ManualClock::new(T0)),
        };
        let s = env.spool();
        for i in 1..=n {
            let st = s.stage_with_id(&Env::id(i)).unwrap();
            let mut mini = vec![0u8; 200_000];
            rand::Rng::fill(
                &mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(i),
                &mut mini[..],
            );
            std::fs::write(st.path(FileKind::MiniDump), mini).unwrap();
            s.commit(
                st,
                NewIncident {
                    reason: "matrix".into(),
                    ..NewIncident::default()
                },
            )
            .unwrap();
        }
        s.lock()
            .unwrap()
            .recover(&mut |j: &AnalysisJob| {
                std::fs::write(&j.report_out, b"{}").map_err(|e| e.to_string())
            })
            .unwrap();
        env
    }
    /// The id of the `i`-th incident (from 1).
    fn id(i: u64) -> String {
        if i == 1 {
            format!("{T0}-m")
        } else {
            format!("{T0}-m{i}")
        }
    }
    /// A new process on the same data dir.
    fn spool(&self) -> Spool {
        Spool::with(
            &self.root,
            Quotas::default(),
            Arc::new(RealFs),
            self.clock.clone(),
        )
        .unwrap()
    }
    fn incident(&self) -> oomguard::spool::Incident {
        self.spool().read_incident(&format!("{T0}-m")).unwrap()
    }
    /// The `i`-th incident's record (from 1), `None` once it is deleted.
    fn record(&self, i: u64) -> Option<oomguard::spool::Incident> {
        self.spool().read_incident(&Env::id(i)).ok()
    }
    /// The spool-wide "not before" (Retry-After, or an endpoint problem's wait).
    fn wait_until(&self) -> u64 {
        self.spool().state().retry_after_until_ms
    }
}

fn cfg(endpoint: String) -> upload::Config {
    upload::Config {
        endpoint,
        io_timeout: Duration::from_millis(700),
        chunk_size: 32 * 1024,
        max_attempts: 4,
        backoff_base: Duration::from_secs(10),
        backoff_cap: Duration::from_secs(25),
        ..upload::Config::default()
    }
}

fn run(env: &Env, s: &Scripted) -> upload::Summary {
    upload::run_once(&env.spool(), &cfg(s.endpoint()), Network::UNMETERED).unwrap()
}

#[test]
fn answers_200_201_204_complete_the_upload() {
    for patch_status in [204, 200] {
        let env = Env::new();
        let s = Scripted::new(move |h, _| {
            if h.method == "PATCH" {
                Act::NormalAs(patch_status)
            } else {
                Act::Normal
            }
        });
        let sum = run(&env, &s);
        assert_eq!(sum.acknowledged.len(), 1, "{sum:?}");
        let m = s.methods();
        assert_eq!(m.iter().filter(|x| *x == "POST").count(), 3); // meta, report, mini.hprof.gz
        assert!(
            !m.contains(&"HEAD".to_string()),
            "fresh uploads need no HEAD: {m:?}"
        );
    }
}

/// Each file's acknowledgement is on disk before the next file's bytes go out, so a crash
/// between two files never sends an acknowledged file again (a server that expired the
/// finished upload would get it twice). Seen from the server: when each PATCH arrives, the
/// incident record already marks every earlier file acknowledged.
#[test]
fn each_acknowledgement_is_saved_before_the_next_file_is_sent() {
    let env = Env::new();
    let record = env
        .root
        .join("incidents")
        .join(Env::id(1))
        .join("incident.json");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let s = Scripted::new(move |h, _| {
        if h.method == "PATCH" {
            let rec: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
            let acked = rec["body"]["uploads"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|u| u["acked"] == true)
                .count();
            seen2.lock().unwrap().push(acked);
        }
        Act::Normal
    });
    let sum = run(&env, &s);
    assert_eq!(sum.acknowledged.len(), 1, "{sum:?}");
    // meta, report, mini.hprof.gz, in order, each in one or more PATCHes.
    let mut files = seen.lock().unwrap().clone();
    files.dedup();
    assert_eq!(files, vec![0, 1, 2]);
}

#[test]
fn head_404_creates_the_upload_again() {
    let env = Env::new();
    // First pass: the connection resets in the first PATCH; URLs are persisted by then.
    let s = Scripted::new(|h, _| {
        if h.method == "PATCH" {
            Act::Reset
        } else {
            Act::Normal
        }
    });
    let sum = run(&env, &s);
    assert!(matches!(sum.stopped, Some(Stop::Backoff { .. })), "{sum:?}");
    let inc = env.incident();
    assert!(inc.uploads.iter().all(|u| u.url.is_some()));
    // A new server that knows none of them: HEAD → 404 → POST again → upload from 0.
    let s2 = Scripted::new(|_, _| Act::Normal);
    let mut c = cfg(s2.endpoint());
    // The persisted URLs point at the first server; re-point them to the second one.
    let spool = env.spool();
    {
        let g = spool.lock().unwrap();
        let mut inc = spool.read_incident(&inc.id).unwrap();
        for u in &mut inc.uploads {
            u.url = Some(format!("{}gone-{:?}", s2.endpoint(), u.kind));
        }
        g.save(&inc).unwrap();
    }
    env.clock.set(inc.next_attempt_ms);
    c.endpoint = s2.endpoint();
    let sum = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
    assert_eq!(sum.acknowledged.len(), 1, "{sum:?}");
    let m = s2.methods();
    assert_eq!(&m[..2], &["HEAD", "POST"], "{m:?}");
    assert!(s2
        .log()
        .iter()
        .filter(|h| h.method == "PATCH")
        .all(|h| h.offset.is_some()));
}

#[test]
fn patch_409_asks_head_and_resumes_from_the_server_offset() {
    let env = Env::new();
    let first = Arc::new(Mutex::new(true));
    let f2 = first.clone();
    let s = Scripted::new(move |h, _| {
        // The first PATCH of the mini dump meets a server that already has 4096 more bytes.
        if h.method == "PATCH" && h.body > 20_000 && std::mem::take(&mut *f2.lock().unwrap()) {
            Act::Conflict(4096)
        } else {
            Act::Normal
        }
    });
    let sum = run(&env, &s);
    assert_eq!(sum.acknowledged.len(), 1, "{sum:?}");
    let log = s.log();
    let i = log
        .iter()
        .position(|h| h.method == "PATCH" && h.body > 20_000)
        .unwrap();
    assert_eq!(log[i + 1].method, "HEAD", "{log:#?}");
    assert_eq!(log[i + 2].method, "PATCH");
    assert_eq!(
        log[i + 2].offset,
        Some(log[i].offset.unwrap() + 4096),
        "{log:#?}"
    );
}

#[test]
fn status_413_400_422_to_the_creation_reject_without_retry() {
    for code in [413, 400, 422] {
        let env = Env::new();
        let s = Scripted::new(move |h, _| {
            if h.method == "POST" {
                Act::Status(code, vec![])
            } else {
                Act::Normal
            }
        });
        let sum = run(&env, &s);
        assert_eq!(sum.rejected.len(), 1, "{sum:?}");
        assert!(sum.rejected[0].1.contains(&code.to_string()), "{sum:?}");
        let inc = env.incident();
        assert_eq!(inc.state, State::Rejected);
        assert!(inc.rejected.unwrap().contains(&format!("HTTP {code}")));
        let n = s.log().len();
        env.clock.set(T0 + 7 * 24 * 3600 * 1000);
        let sum = run(&env, &s);
        assert_eq!(
            (sum.acknowledged.len(), s.log().len()),
            (0, n),
            "a rejected incident is not retried"
        );
    }
}

#[test]
fn status_429_retry_after_is_obeyed_and_remembered_across_restarts() {
    let env = Env::new();
    let s = Scripted::new(|h, n| {
        if h.method == "POST" && n == 0 {
            Act::Status(429, vec![("Retry-After", "120".into())])
        } else {
            Act::Normal
        }
    });
    let sum = run(&env, &s);
    assert_eq!(sum.stopped, Some(Stop::RetryAfter(T0 + 120_000)));
    assert_eq!(
        env.incident().upload_attempts,
        0,
        "429 is not a failed attempt"
    );
    // A new process 119 s later sends nothing.
    env.clock.set(T0 + 119_000);
    let sum = run(&env, &s);
    assert_eq!(sum.stopped, Some(Stop::RetryAfter(T0 + 120_000)));
    assert_eq!(s.log().len(), 1);
    env.clock.set(T0 + 120_000);
    let sum = run(&env, &s);
    assert_eq!(sum.acknowledged.len(), 1, "{sum:?}");
}

/// A 5xx counts an attempt against the incident once the endpoint has shown it works in that
/// pass: always for 500 (the server may fail on this incident), and for 502 to 504 after an
/// earlier request of the pass was answered (here the creation, for a PATCH).
#[test]
fn status_5xx_retry_with_capped_backoff_then_give_up() {
    for (code, on) in [
        (500, "POST"),
        (502, "PATCH"),
        (503, "PATCH"),
        (504, "PATCH"),
    ] {
        let env = Env::new();
        let s = Scripted::new(move |h, _| {
            if h.method == on {
                Act::Status(code, vec![])
            } else {
                Act::Normal
            }
        });
        let mut delays = Vec::new();
        for attempt in 1..=4u32 {
            let sum = run(&env, &s);
            if attempt < 4 {
                let Some(Stop::Backoff { until_ms, .. }) = sum.stopped else {
                    panic!("{sum:?}")
                };
                let now = env.clock.now_ms();
                delays.push(until_ms - now);
                // Not before the backoff, even in a new process.
                let n = s.log().len();
                env.clock.set(until_ms - 1);
                assert_eq!(run(&env, &s).waiting, 1);
                assert_eq!(s.log().len(), n);
                env.clock.set(until_ms);
            } else {
                assert_eq!(sum.rejected.len(), 1, "{sum:?}");
                assert!(sum.rejected[0].1.contains("gave up after 4"));
            }
        }
        // base 10 s doubling, capped at 25 s, jitter in [50 %, 100 %].
        let caps = [10_000, 20_000, 25_000];
        for (d, cap) in delays.iter().zip(caps) {
            assert!(*d >= cap / 2 && *d <= cap, "{delays:?}");
        }
    }
}

#[test]
fn reset_connection_is_retried_and_resumes() {
    let env = Env::new();
    let resets = Arc::new(Mutex::new(0));
    let r2 = resets.clone();
    let s = Scripted::new(move |h, _| {
        let mut r = r2.lock().unwrap();
        if h.method == "PATCH" && h.body > 20_000 && *r == 0 {
            *r += 1;
            Act::Reset
        } else {
            Act::Normal
        }
    });
    let sum = run(&env, &s);
    assert!(
        matches!(&sum.stopped, Some(Stop::Backoff { error, .. }) if error.contains("network")),
        "{sum:?}"
    );
    env.clock.set(env.incident().next_attempt_ms);
    let sum = run(&env, &s);
    assert_eq!(sum.acknowledged.len(), 1, "{sum:?}");
    // It asked where to resume.
    assert!(s.methods().contains(&"HEAD".to_string()));
}

#[test]
fn stalled_response_times_out_and_is_retried() {
    let env = Env::new();
    let stalls = Arc::new(Mutex::new(0));
    let s2 = stalls.clone();
    let s = Scripted::new(move |h, _| {
        let mut n = s2.lock().unwrap();
        if h.method == "PATCH" && *n == 0 {
            *n += 1;
            Act::Stall(Duration::from_secs(10))
        } else {
            Act::Normal
        }
    });
    let t = Instant::now();
    let sum = run(&env, &s);
    let took = t.elapsed();
    assert!(matches!(sum.stopped, Some(Stop::Backoff { .. })), "{sum:?}");
    assert!(
        took < Duration::from_secs(4),
        "a stalled server held the uploader {took:?}"
    );
    env.clock.set(env.incident().next_attempt_ms);
    let sum = run(&env, &s);
    assert_eq!(sum.acknowledged.len(), 1, "{sum:?}");
}

#[test]
fn daily_byte_budget_spreads_an_upload_over_days_without_resending() {
    let env = Env::new();
    let s = Scripted::new(|_, _| Act::Normal);
    let mut c = cfg(s.endpoint());
    c.daily_byte_budget = 80_000;
    let mut days = 0;
    loop {
        let sum = upload::run_once(&env.spool(), &c, Network::UNMETERED).unwrap();
        let sent_today: u64 = s
            .log()
            .iter()
            .filter(|h| h.method == "PATCH")
            .map(|h| h.body)
            .sum::<u64>();
        assert!(
            sent_today <= 80_000 * (days + 1),
            "day {days}: {sent_today} bytes"
        );
        if !sum.acknowledged.is_empty() {
            break;
        }
        assert_eq!(sum.stopped, Some(Stop::BudgetExhausted), "{sum:?}");
        // Same day, new process: still nothing.
        let n = s.log().len();
        assert_eq!(
            upload::run_once(&env.spool(), &c, Network::UNMETERED)
                .unwrap()
                .stopped,
            Some(Stop::BudgetExhausted)
        );
        assert_eq!(s.log().len(), n);
        days += 1;
        env.clock.set(T0 + days * 24 * 3600 * 1000);
        assert!(days < 10);
    }
    // The 200 kB mini dump (random, so it does not compress) needed three days.
    assert_eq!(days, 2);
    let patched: u64 = s
        .log()
        .iter()
        .filter(|h| h.method == "PATCH")
        .map(|h| h.body)
        .sum();
    // Nothing was sent twice: every PATCH continued where the previous one stopped.
    let mut by_path: HashMap<String, u64> = HashMap::new();
    for h in s.log().iter().filter(|h| h.method == "PATCH") {
        let next = by_path.entry(h.path.clone()).or_insert(0);
        assert_eq!(h.offset, Some(*next), "{h:?}");
        *next += h.body;
    }
    assert_eq!(by_path.values().sum::<u64>(), patched);
}

#[test]
fn a_clock_set_back_does_not_freeze_backoff_or_retry_after() {
    let env = Env::new();
    let fail = Arc::new(Mutex::new(true));
    let f2 = fail.clone();
    let s = Scripted::new(move |h, _| {
        if h.method == "POST" && *f2.lock().unwrap() {
            Act::Status(500, vec![])
        } else {
            Act::Normal
        }
    });
    assert!(matches!(run(&env, &s).stopped, Some(Stop::Backoff { .. })));
    // The user sets the phone's clock back a day: the stored backoff now looks a day long.
    env.clock.set(T0 - 24 * 3600 * 1000);
    *fail.lock().unwrap() = false;
    let sum = run(&env, &s);
    assert_eq!(sum.acknowledged.len(), 1, "{sum:?}");
}

/// A server that answers every PATCH with success but the offset it was sent (it stored
/// nothing: a proxy that drops bodies, a broken backend) must not be fed the same chunk until
/// the day's byte budget is spent, every day: the client asks HEAD, gives up the pass after a
/// bounded number of rounds, and counts a failed attempt (so backoff and the attempt limit
/// apply).
#[test]
fn patch_answered_without_progress_is_a_failed_attempt_not_a_resend_loop() {
    let env = Env::new();
    let s = Scripted::new(|h, _| match (h.method.as_str(), h.offset) {
        ("PATCH", Some(off)) => Act::Status(200, vec![("Upload-Offset", off.to_string())]),
        _ => Act::Normal,
    });
    // A small budget, so that the loop this guards against ends (the default is 64 MB a day).
    let mut c = cfg(s.endpoint());
    c.daily_byte_budget = 20_000;
    let sum = upload::run_once(&env.spool(), &c, Network::UNMETERED).unwrap();
    let patches = s.methods().iter().filter(|m| *m == "PATCH").count();
    assert!(
        matches!(&sum.stopped, Some(Stop::Backoff { .. })),
        "{:?} after {patches} PATCHes, {} bytes",
        sum.stopped,
        sum.bytes_sent
    );
    assert!(patches <= 8, "{patches} PATCHes for no progress");
    assert_eq!(env.incident().upload_attempts, 1);
}

/// The real file system, except that the `fail`-th open of the compressed mini dump fails with
/// EMFILE, as in a process that is out of file descriptors (what an fd incident is about).
#[derive(Debug)]
struct OutOfFds {
    opens: std::sync::atomic::AtomicU32,
    fail: u32,
}

impl oomguard::spool::Fs for OutOfFds {
    fn create_dir_all(&self, p: &std::path::Path) -> std::io::Result<()> {
        RealFs.create_dir_all(p)
    }
    fn read(&self, p: &std::path::Path) -> std::io::Result<Vec<u8>> {
        RealFs.read(p)
    }
    fn create(&self, p: &std::path::Path) -> std::io::Result<Box<dyn oomguard::spool::FsFile>> {
        RealFs.create(p)
    }
    fn open(&self, p: &std::path::Path) -> std::io::Result<Box<dyn oomguard::spool::FsRead>> {
        if p.ends_with("mini.hprof.gz") {
            let n = self.opens.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            if n == self.fail {
                return Err(std::io::Error::from_raw_os_error(libc::EMFILE));
            }
        }
        RealFs.open(p)
    }
    fn rename(&self, a: &std::path::Path, b: &std::path::Path) -> std::io::Result<()> {
        RealFs.rename(a, b)
    }
    fn remove_file(&self, p: &std::path::Path) -> std::io::Result<()> {
        RealFs.remove_file(p)
    }
    fn remove_dir_all(&self, p: &std::path::Path) -> std::io::Result<()> {
        RealFs.remove_dir_all(p)
    }
    fn sync_dir(&self, p: &std::path::Path) -> std::io::Result<()> {
        RealFs.sync_dir(p)
    }
    fn sync_file(&self, p: &std::path::Path) -> std::io::Result<()> {
        RealFs.sync_file(p)
    }
    fn list(&self, p: &std::path::Path) -> std::io::Result<Vec<oomguard::spool::Entry>> {
        RealFs.list(p)
    }
    fn stat(&self, p: &std::path::Path) -> std::io::Result<oomguard::spool::Entry> {
        RealFs.stat(p)
    }
}

/// A file the uploader cannot open for a moment (EMFILE: the app is out of fds) is a failed
/// attempt, retried later; it is not a damaged incident. Before, the intact incident was moved to
/// quarantine, which is never uploaded.
#[test]
fn a_transient_error_opening_a_planned_file_retries_instead_of_quarantining() {
    for fail in [2, 3] {
        // Open 1: hashing while planning; 2: checking the plan before sending; 3: sending.
        let env = Env::new();
        let s = Scripted::new(|_, _| Act::Normal);
        let fs = Arc::new(OutOfFds {
            opens: Default::default(),
            fail,
        });
        let spool = Spool::with(&env.root, Quotas::default(), fs, env.clock.clone()).unwrap();
        let sum = upload::run_once(&spool, &cfg(s.endpoint()), Network::UNMETERED).unwrap();
        assert!(sum.quarantined.is_empty(), "open {fail}: {sum:?}");
        assert!(
            matches!(&sum.stopped, Some(Stop::Backoff { error, .. }) if error.contains("mini.hprof.gz")),
            "open {fail}: {sum:?}"
        );
        let inc = env.incident();
        assert_eq!((inc.state, inc.upload_attempts), (State::Uploading, 1));
        env.clock.set(inc.next_attempt_ms);
        let sum = run(&env, &s);
        assert_eq!(sum.acknowledged.len(), 1, "open {fail}: {sum:?}");
    }
}

/// A server whose every answer is `broken(hit)` while `on` holds, and a correct tus server after.
fn switchable(
    broken: impl Fn(&Hit) -> Option<Act> + Send + 'static,
) -> (Scripted, Arc<Mutex<bool>>) {
    let on = Arc::new(Mutex::new(true));
    let on2 = on.clone();
    let s = Scripted::new(move |h, _| {
        if *on2.lock().unwrap() {
            broken(h).unwrap_or(Act::Normal)
        } else {
            Act::Normal
        }
    });
    (s, on)
}

/// What `tracing` logs at warning level while `f` runs on this thread. (One global
/// subscriber that names the thread: scoped ones, set while other tests log from other
/// threads, can miss events.)
fn warnings<T>(f: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone)]
    struct Buf;
    static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            LOG.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        let sub = tracing_subscriber::fmt()
            .with_writer(|| Buf)
            .with_ansi(false)
            .with_thread_names(true)
            .with_max_level(tracing::Level::WARN)
            .finish();
        tracing::subscriber::set_global_default(sub).unwrap();
    });
    let me = std::thread::current();
    let me = format!(" {} ", me.name().unwrap_or("main"));
    let from = LOG.lock().unwrap().len();
    let r = f();
    let all = LOG.lock().unwrap()[from..].to_vec();
    let text = String::from_utf8_lossy(&all)
        .lines()
        .filter(|l| l.contains(&me))
        .map(|l| format!("{l}\n"))
        .collect();
    (r, text)
}

/// Checks that none of incidents 1..=n is rejected.
fn none_rejected(env: &Env, n: u64, sum: &upload::Summary, what: &str) {
    assert!(sum.rejected.is_empty(), "{what}: {sum:?}");
    for i in 1..=n {
        let inc = env.record(i).unwrap();
        assert_ne!(inc.state, State::Rejected, "{what}: {inc:?}");
        assert_eq!(inc.rejected, None, "{what}");
    }
}

/// An answer to the creation POST that says the endpoint is wrong, not the incident (a wrong
/// URL, an auth proxy or expired credentials, a method or tus version the server does not
/// take, a timeout, a redirect, an upload URL that is not https) rejects nothing and charges
/// no attempt: the pass stops at the first such answer and waits, also in a new process; once
/// the server answers properly every queued incident is uploaded. Before, every incident was
/// rejected in that one pass, for good (408 and the redirect: each charged an attempt).
#[test]
fn an_endpoint_answer_to_the_creation_post_rejects_no_incident() {
    let insecure = || vec![("Location", "http://example.com/files/x".to_string())];
    let cases: Vec<(u16, Vec<(&'static str, String)>)> = vec![
        (401, vec![("WWW-Authenticate", "Bearer".into())]),
        (404, vec![]),
        (403, vec![]),
        (405, vec![]),
        (407, vec![]),
        (408, vec![]),
        (412, vec![("Tus-Version", "2.0.0".into())]),
        (201, insecure()),
        (308, vec![("Location", "https://example.com/files/".into())]),
    ];
    for (code, headers) in cases {
        let env = Env::with_incidents(3);
        let (s, on) =
            switchable(move |h| (h.method == "POST").then(|| Act::Status(code, headers.clone())));
        let (sum, log) = warnings(|| run(&env, &s));
        none_rejected(&env, 3, &sum, &format!("{code}"));
        assert_eq!(s.log().len(), 1, "{code}: the pass went on: {:?}", s.log());
        assert_eq!(env.record(1).unwrap().upload_attempts, 0, "{code}");
        let until = env.wait_until();
        assert!(until > T0, "{code}: no wait: {sum:?}");
        assert!(
            matches!(&sum.stopped, Some(Stop::Endpoint { until_ms, .. }) if *until_ms == until),
            "{code}: {sum:?}"
        );
        // One warning, naming the endpoint and the status.
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 1, "{code}: {log}");
        let answer = if code == 201 {
            "http://example.com/files/x".to_string() // the Location
        } else {
            format!("HTTP {code}")
        };
        assert!(
            lines[0].contains(&s.endpoint()) && lines[0].contains(&answer),
            "{code}: {log}"
        );
        // Not before the wait, even in a new process.
        env.clock.set(until - 1);
        let sum = run(&env, &s);
        assert_eq!(sum.stopped, Some(Stop::RetryAfter(until)), "{code}");
        assert_eq!(s.log().len(), 1, "{code}: {sum:?}");
        // The server is fixed: everything goes.
        *on.lock().unwrap() = false;
        env.clock.set(until);
        let sum = run(&env, &s);
        assert_eq!(
            sum.acknowledged,
            vec![Env::id(1), Env::id(2), Env::id(3)],
            "{code}: {sum:?}"
        );
    }
}

/// Only an answer about this incident's own request (its length, its metadata) rejects it;
/// the pass goes on with the next incident.
#[test]
fn a_413_400_or_422_to_the_creation_post_rejects_only_that_incident() {
    for code in [413, 400, 422] {
        let env = Env::with_incidents(3);
        let bad = Env::id(2);
        let s = Scripted::new(move |h, _| {
            if h.method == "POST" && h.incident.as_deref() == Some(bad.as_str()) {
                Act::Status(code, vec![])
            } else {
                Act::Normal
            }
        });
        let sum = run(&env, &s);
        assert_eq!(sum.acknowledged, vec![Env::id(1), Env::id(3)], "{sum:?}");
        assert_eq!(sum.rejected.len(), 1, "{sum:?}");
        assert_eq!(sum.rejected[0].0, Env::id(2));
        assert!(
            sum.rejected[0].1.contains(&format!("HTTP {code}")),
            "{sum:?}"
        );
        assert_eq!(env.record(2).unwrap().state, State::Rejected);
        assert_eq!(sum.stopped, None, "{sum:?}");
    }
}

/// Expired credentials or a proxy in the middle of an upload: a PATCH or HEAD answered with an
/// endpoint problem rejects nothing, keeps the upload URLs, and the next pass resumes them.
#[test]
fn an_endpoint_answer_to_a_patch_or_head_rejects_nothing_and_keeps_the_uploads() {
    for (method, code) in [
        ("PATCH", 401),
        ("PATCH", 403),
        ("PATCH", 413),
        ("PATCH", 429),
        ("HEAD", 401),
        ("HEAD", 405),
    ] {
        let what = format!("{method} {code}");
        let env = Env::with_incidents(3);
        // Phase 0 (for HEAD): a reset in a PATCH leaves incident 1 with its URLs persisted.
        // Phase 1: the endpoint problem. Phase 2: a correct server.
        let phase = Arc::new(Mutex::new(if method == "HEAD" { 0 } else { 1 }));
        let p2 = phase.clone();
        let s = Scripted::new(move |h, _| match *p2.lock().unwrap() {
            0 if h.method == "PATCH" && h.body > 20_000 => Act::Reset,
            1 if h.method == method => Act::Status(code, vec![]),
            _ => Act::Normal,
        });
        let mut before = 0;
        if method == "HEAD" {
            let sum = run(&env, &s);
            assert!(matches!(sum.stopped, Some(Stop::Backoff { .. })), "{sum:?}");
            env.clock.set(env.record(1).unwrap().next_attempt_ms);
            *phase.lock().unwrap() = 1;
            before = 1;
        }
        let n = s.log().len();
        let sum = run(&env, &s);
        none_rejected(&env, 3, &sum, &what);
        let inc = env.record(1).unwrap();
        assert_eq!(inc.upload_attempts, before, "{what}: {sum:?} {:?}", s.log());
        assert!(
            inc.uploads.iter().all(|u| u.url.is_some()),
            "{what}: {inc:?}"
        );
        let sent = s.methods()[n..].to_vec();
        assert_eq!(
            sent.last().map(String::as_str),
            Some(method),
            "{what}: {sent:?}"
        );
        assert_eq!(
            sent.iter().filter(|m| *m == method).count(),
            1,
            "{what}: {sent:?}"
        );
        let until = env.wait_until();
        assert!(until > env.clock.now_ms(), "{what}: no wait: {sum:?}");
        if code == 429 {
            assert_eq!(sum.stopped, Some(Stop::RetryAfter(until)), "{what}");
        } else {
            assert!(
                matches!(&sum.stopped, Some(Stop::Endpoint { until_ms, .. }) if *until_ms == until),
                "{what}: {sum:?}"
            );
        }
        *phase.lock().unwrap() = 2;
        env.clock.set(until);
        let sum = run(&env, &s);
        assert_eq!(
            sum.acknowledged,
            vec![Env::id(1), Env::id(2), Env::id(3)],
            "{what}: {sum:?}"
        );
        // Incident 1's uploads were resumed, not created again: 3 POSTs per incident.
        let posts = s.log().iter().filter(|h| h.method == "POST").count();
        assert_eq!(posts, 9, "{what}");
    }
}

/// A lasting endpoint problem (a release shipped with a wrong URL) costs one request per pass
/// and waits longer each time, capped; it never uses up an incident's attempts, so no incident
/// is given up however long it lasts.
#[test]
fn a_lasting_endpoint_problem_waits_longer_each_time_and_burns_no_attempts() {
    let env = Env::with_incidents(2);
    let s = Scripted::new(|h, _| {
        if h.method == "POST" {
            Act::Status(401, vec![])
        } else {
            Act::Normal
        }
    });
    let mut waits = Vec::new();
    for pass in 1..=6 {
        // More passes than max_attempts (4).
        let sum = run(&env, &s);
        none_rejected(&env, 2, &sum, &format!("pass {pass}"));
        assert_eq!(s.log().len(), pass, "one request per pass");
        let until = env.wait_until();
        let now = env.clock.now_ms();
        assert!(until > now, "pass {pass}: no wait: {sum:?}");
        assert!(
            matches!(&sum.stopped, Some(Stop::Endpoint { until_ms, .. }) if *until_ms == until),
            "pass {pass}: {sum:?}"
        );
        waits.push(until - now);
        env.clock.set(until);
    }
    assert_eq!(env.record(1).unwrap().upload_attempts, 0);
    // base 10 s doubling, capped at 25 s, jitter in [50 %, 100 %].
    let caps = [10_000, 20_000, 25_000, 25_000, 25_000, 25_000];
    for (d, cap) in waits.iter().zip(caps) {
        assert!(*d >= cap / 2 && *d <= cap, "{waits:?}");
    }
}

/// A server that cannot be reached, or whose gateway says it is down (502, 503 without
/// `Retry-After`, 504), or that answers as no tus server does (a captive portal's 200 page),
/// before it has answered any request of the pass, is an outage: the pass stops and waits like
/// for an endpoint problem, charging no attempt, so an outage longer than `max_attempts`
/// backoffs gives up no queued incident; once the server is back every one is uploaded.
/// Before, each pass charged the first incident an attempt and gave it up after four.
#[test]
fn an_outage_before_any_answer_charges_no_attempt() {
    type Case = (&'static str, fn() -> Act);
    let cases: [Case; 5] = [
        ("502", || Act::Status(502, vec![])),
        ("503", || Act::Status(503, vec![])),
        ("504", || Act::Status(504, vec![])),
        ("reset", || Act::Reset),
        ("portal", || Act::Status(200, vec![])),
    ];
    for (what, act) in cases {
        let env = Env::with_incidents(3);
        let (s, on) = switchable(move |h| (h.method == "POST").then(act));
        for pass in 1..=6 {
            // More passes than max_attempts (4).
            let sum = run(&env, &s);
            let what = format!("{what}, pass {pass}");
            none_rejected(&env, 3, &sum, &what);
            assert!(
                matches!(&sum.stopped, Some(Stop::Endpoint { .. })),
                "{what}: {sum:?}"
            );
            for i in 1..=3 {
                assert_eq!(env.record(i).unwrap().upload_attempts, 0, "{what}");
            }
            env.clock.set(env.wait_until());
        }
        *on.lock().unwrap() = false;
        let sum = run(&env, &s);
        assert_eq!(sum.acknowledged.len(), 3, "{what}: {sum:?}");
    }
}

/// A 503 that says when to come back is obeyed like a 429 (kept across restarts, not a failed
/// attempt), and a `Retry-After` longer than `max_retry_after` is cut to it.
#[test]
fn status_503_with_retry_after_is_obeyed_and_capped() {
    for code in [503, 429] {
        for (secs, wait_ms) in [(600u64, 600_000u64), (10_000_000, 24 * 3600 * 1000)] {
            let env = Env::new();
            let s = Scripted::new(move |h, n| {
                if h.method == "POST" && n == 0 {
                    Act::Status(code, vec![("Retry-After", secs.to_string())])
                } else {
                    Act::Normal
                }
            });
            let sum = run(&env, &s);
            assert_eq!(
                sum.stopped,
                Some(Stop::RetryAfter(T0 + wait_ms)),
                "{code} {secs}"
            );
            assert_eq!(
                env.incident().upload_attempts,
                0,
                "{code}: not a failed attempt"
            );
            env.clock.set(T0 + wait_ms - 1);
            run(&env, &s);
            assert_eq!(s.log().len(), 1, "{code}");
            env.clock.set(T0 + wait_ms);
            let sum = run(&env, &s);
            assert_eq!(sum.acknowledged.len(), 1, "{code}: {sum:?}");
        }
    }
}

/// The tus spec lets a server answer a HEAD for an upload it does not know with 403, like 404
/// and 410: the upload is created again. If the creation is refused too (an auth proxy that
/// says 403 to everything), that is an endpoint problem and the old URLs are kept.
#[test]
fn head_403_creates_the_upload_again_and_keeps_it_if_creation_is_refused() {
    for post_too in [false, true] {
        let env = Env::new();
        let s = Scripted::new(|h, _| {
            if h.method == "PATCH" && h.body > 20_000 {
                Act::Reset
            } else {
                Act::Normal
            }
        });
        run(&env, &s);
        let inc = env.incident();
        assert!(inc.uploads.iter().any(|u| u.url.is_some() && !u.acked));
        env.clock.set(inc.next_attempt_ms);
        let urls: Vec<_> = inc.uploads.iter().map(|u| u.url.clone()).collect();
        let (s2, on) = switchable(move |h| match h.method.as_str() {
            "HEAD" => Some(Act::Status(403, vec![])),
            "POST" if post_too => Some(Act::Status(403, vec![])),
            _ => None,
        });
        let mut c = cfg(s.endpoint());
        c.endpoint = s2.endpoint();
        // The URLs point at the first server; re-point them (same paths) to the second one.
        let spool = env.spool();
        {
            let g = spool.lock().unwrap();
            let mut inc = env.incident();
            for u in &mut inc.uploads {
                u.url = u
                    .url
                    .as_ref()
                    .map(|x| x.replace(&s.endpoint(), &s2.endpoint()));
            }
            g.save(&inc).unwrap();
        }
        let urls: Vec<_> = urls
            .into_iter()
            .map(|u| u.map(|x| x.replace(&s.endpoint(), &s2.endpoint())))
            .collect();
        let sum = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
        if !post_too {
            assert_eq!(sum.acknowledged.len(), 1, "{sum:?}");
            assert_eq!(&s2.methods()[..2], &["HEAD", "POST"]);
            continue;
        }
        none_rejected(&env, 1, &sum, "HEAD and POST 403");
        assert!(
            matches!(&sum.stopped, Some(Stop::Endpoint { error, .. }) if error.contains("403")),
            "{sum:?}"
        );
        let inc = env.incident();
        assert_eq!(inc.upload_attempts, 1, "only the reset counted");
        let kept: Vec<_> = inc.uploads.iter().map(|u| u.url.clone()).collect();
        assert_eq!(kept, urls, "the old upload URLs are kept");
        *on.lock().unwrap() = false;
        env.clock.set(env.wait_until().max(inc.next_attempt_ms));
        let sum = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
        assert_eq!(sum.acknowledged.len(), 1, "{sum:?}");
    }
}

/// An upload created a moment ago that the server says it does not know (a proxy that routes
/// the creation but not the upload URLs it hands out) is the endpoint's problem: the pass
/// stops after one PATCH instead of creating the upload again and again, and no attempt is
/// charged.
#[test]
fn a_404_to_a_fresh_upload_is_an_endpoint_problem() {
    let env = Env::with_incidents(2);
    let (s, on) = switchable(|h| (h.method == "PATCH").then(|| Act::Status(404, vec![])));
    let sum = run(&env, &s);
    none_rejected(&env, 2, &sum, "PATCH 404");
    assert!(
        matches!(&sum.stopped, Some(Stop::Endpoint { error, .. }) if error.contains("404")),
        "{sum:?}"
    );
    assert_eq!(env.record(1).unwrap().upload_attempts, 0, "{sum:?}");
    let m = s.methods();
    assert_eq!(m.iter().filter(|x| *x == "PATCH").count(), 1, "{m:?}");
    assert_eq!(m.iter().filter(|x| *x == "POST").count(), 3, "{m:?}");
    *on.lock().unwrap() = false;
    env.clock.set(env.wait_until());
    let sum = run(&env, &s);
    assert_eq!(sum.acknowledged, vec![Env::id(1), Env::id(2)], "{sum:?}");
}
