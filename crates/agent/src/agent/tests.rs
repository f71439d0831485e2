//! The agent's tests: the loop with scripted heaps, the policy at start and its expiry, the
//! fetch handed off the sampling thread.

use super::*;
use crate::sample::{Heap, NoStacks, ScriptedHeap};

mod status;

const MB: u64 = 1 << 20;

fn heap(used_mb: u64) -> Heap {
    Heap {
        max: 256 * MB,
        total: used_mb * MB,
        free: 0,
    }
}

/// Whether the status's last error holds `what`.
fn last_error_has(status: &Status, what: &str) -> bool {
    status
        .last_error
        .as_deref()
        .is_some_and(|e| e.contains(what))
}

fn agent(dir: &Path, policy: &str, script: Vec<Heap>) -> Agent<ScriptedHeap, NoStacks, RecordOnly> {
    agent_with(dir, policy, ScriptedHeap::new(script), NoStacks, RecordOnly)
}

/// [`agent`] with these sources and actions.
fn agent_with<H: HeapSource, S: StackSource, A: Actions>(
    dir: &Path,
    policy: &str,
    heap: H,
    stacks: S,
    actions: A,
) -> Agent<H, S, A> {
    let cfg = Config {
        policy_json: policy.into(),
        data_dir: dir.into(),
        app_version: "1.2.3".into(),
        public_key: Some(test_key().1),
        ..Config::default()
    };
    Agent::new(cfg, heap, stacks, actions, Arc::new(Shared::default())).unwrap()
}

#[test]
fn heap_verdict_after_three_ascending_polls_and_status_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(
        dir.path(),
        "",
        vec![
            heap(100),
            heap(218),
            heap(219),
            heap(220),
            heap(221),
            heap(222),
            heap(223),
        ],
    );
    let mut fired = Vec::new();
    for i in 1..=7 {
        if let Some(v) = a.poll(i * 1000) {
            fired.push((i, v.kind));
        }
    }
    // Muted after the first (once per process).
    assert_eq!(fired, vec![(4, Kind::Heap)]);
    let st: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("status.json")).unwrap()).unwrap();
    assert_eq!(st["verdicts"], 1);
    assert_eq!(st["last_verdict"]["verdict"]["kind"], "heap");
    assert_eq!(
        st["last_verdict"]["verdict"]["evidence"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(st["last_verdict"]["action"]["action"], "recorded");
    assert_eq!(st["app_version"], "1.2.3");
    assert_eq!(st["policy_version"], 1);
    assert_eq!(st["muted"][0], "heap");
    assert!(st["last_sample"]["fds"].as_u64().unwrap() > 0);
}

#[test]
fn bad_start_policy_falls_back_and_cache_wins_when_newer() {
    let dir = tempfile::tempdir().unwrap();
    let a = agent(
        dir.path(),
        r#"{"version":2,"heap":{"strikes":0}}"#,
        vec![heap(1)],
    );
    assert_eq!(a.policy(), &Policy::default());
    assert!(a.status().policy_source.contains("rejected"));
    let now_s = now_ms() / 1000;
    save_signed(dir.path(), &remote_body(5, now_s - 60, now_s + 86_400));
    let a = agent(dir.path(), r#"{"version":3}"#, vec![heap(1)]);
    assert_eq!((a.policy().version, a.policy().poll_interval_ms), (5, 1000));
    let a = agent(dir.path(), r#"{"version":6}"#, vec![heap(1)]);
    assert_eq!(a.policy().version, 6);
}

/// A signed remote policy as a server sends it (polls every second, refresh off).
fn remote_body(version: u64, issued: u64, expires: u64) -> String {
    format!(
        r#"{{"version":{version},"issued_at_s":{issued},"expires_at_s":{expires},"poll_interval_ms":1000,"remote":{{"url":null}},"upload":{{"url":null}}}}"#
    )
}

/// Cache `body` as the last good policy, signed with the test key.
fn save_signed(dir: &Path, body: &str) {
    use base64::Engine as _;
    use ed25519_dalek::Signer;
    let sig = base64::engine::general_purpose::STANDARD
        .encode(test_key().0.sign(body.as_bytes()).to_bytes());
    let meta = remote::Meta {
        signature: Some(sig),
        ..remote::Meta::default()
    };
    Cache::new(dir).save(body.as_bytes(), &meta).unwrap();
}

/// The remote policy in force expires while the process runs: the policy given at start
/// takes over, and says so.
#[test]
fn a_remote_policy_that_expires_while_active_gives_way_to_the_shipped_one() {
    let dir = tempfile::tempdir().unwrap();
    let now_s = now_ms() / 1000;
    save_signed(dir.path(), &remote_body(5, now_s - 60, now_s + 3600));
    let mut a = agent(dir.path(), r#"{"version":3}"#, vec![heap(1)]);
    assert_eq!(a.policy().version, 5);
    a.expire_policy((now_s + 3599) * 1000);
    assert_eq!(a.policy().version, 5);
    let ((), log) = testkit::warnings(|| a.expire_policy((now_s + 3600) * 1000));
    assert_eq!((a.policy().version, a.policy().poll_interval_ms), (3, 5000));
    assert_eq!(
        a.status().policy_source,
        "start (the remote policy expired)"
    );
    assert!(log.contains("policy v5 expired"), "{log}");
    // The shipped policy never expires.
    a.expire_policy((now_s + 10 * 86_400) * 1000);
    assert_eq!(a.policy().version, 3);
}

/// An agent (heap at 10 MB, verdicts recorded only) running its loop on a thread of its own,
/// as `start` runs it; the sender stops it.
fn run_agent(
    cfg: Config,
    shared: Arc<Shared>,
) -> (
    crate::agent::inbox::Commands,
    std::thread::JoinHandle<Result<(), AgentError>>,
) {
    let a = Agent::new(
        cfg,
        ScriptedHeap::new(vec![heap(10)]),
        NoStacks,
        RecordOnly,
        shared,
    )
    .unwrap();
    let (tx, rx) = crate::agent::inbox::channel();
    (tx, std::thread::spawn(move || a.run(rx)))
}

#[test]
fn loop_runs_dump_now_and_stops_and_survives_panics() {
    let dir = tempfile::tempdir().unwrap();
    let shared = Arc::new(Shared::default());
    let cfg = Config {
        policy_json: r#"{"poll_interval_ms":100}"#.into(),
        data_dir: dir.path().into(),
        ..Config::default()
    };
    let (tx, h) = run_agent(cfg, shared.clone());
    std::thread::sleep(Duration::from_millis(350));
    shared.set_page("CheckoutActivity");
    tx.send(Command::DumpNow("button".into())).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    tx.send(Command::Stop).unwrap();
    h.join().unwrap().unwrap();
    let st: serde_json::Value = serde_json::from_str(&shared.status_json()).unwrap();
    assert_eq!(st["state"], "stopped");
    assert!(st["polls"].as_u64().unwrap() >= 3, "{st}");
    assert_eq!(st["last_verdict"]["verdict"]["kind"], "manual");
    assert_eq!(st["last_verdict"]["page"], "CheckoutActivity");

    // A panicking action is fenced.
    struct Boom;
    impl Actions for Boom {
        fn on_verdict(
            &mut self,
            _: &Verdict,
            _: Option<&Inventory>,
            _: &ActionContext<'_>,
        ) -> ActionRecord {
            panic!("boom")
        }
    }
    let cfg = Config {
        data_dir: dir.path().into(),
        ..Config::default()
    };
    let mut a = Agent::new(
        cfg,
        ScriptedHeap::new(vec![heap(10)]),
        NoStacks,
        Boom,
        Arc::new(Shared::default()),
    )
    .unwrap();
    for i in 0..MAX_PANICS {
        assert!(!a.fenced("dumpNow", |a| {
            a.dump_now("x", 1);
        }));
        assert_eq!(a.status().panics, u64::from(i) + 1);
    }
    assert_eq!(a.status().state, "disabled");
    assert!(a.status().last_error.as_deref().unwrap().contains("boom"));
}

/// The heap stays over fast-huge after its verdict (muted: once per process) while fds
/// leak: the fd verdict must come on the fd run's third strike, not be swallowed every poll
/// by the muted fast-huge one.
#[test]
fn a_muted_verdict_does_not_hide_a_later_one_of_another_kind() {
    let dir = tempfile::tempdir().unwrap();
    let over = Heap {
        max: 256 * MB,
        total: 231 * MB,
        free: 0,
    };
    // Any 17 open fds are a strike; other tests' files coming and going never reset the run.
    let mut a = agent(
        dir.path(),
        r#"{"fd":{"max":16,"tolerance":100000}}"#,
        vec![over],
    );
    let _held: Vec<_> = (0..40)
        .map(|_| std::fs::File::open("/proc/self/status").unwrap())
        .collect();
    let fired: Vec<(u64, Kind)> = (1..=4)
        .filter_map(|i| a.poll(i * 1000).map(|v| (i, v.kind)))
        .collect();
    assert_eq!(fired, vec![(1, Kind::FastHuge), (3, Kind::Fd)]);
    assert_eq!(a.status().muted, vec![Kind::FastHuge, Kind::Fd]);
}

/// A policy with thousands of fields this agent does not know (a 64 KB remote body holds
/// about 8,000) must not write a log line for each: on Android that floods logcat and pushes
/// the app's own lines out of its buffer.
#[test]
fn many_unknown_policy_fields_make_one_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let fields: Vec<String> = (0..5000)
        .map(|i| format!(r#""field_{i}_{}":0"#, "x".repeat(i % 300)))
        .collect();
    let policy = format!(r#"{{"version":4,{}}}"#, fields.join(","));
    let (a, log) = testkit::warnings(|| agent(dir.path(), &policy, vec![heap(1)]));
    assert_eq!(a.policy().version, 4);
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("unknown to this agent"))
        .collect();
    assert_eq!(lines.len(), 1, "{} lines", lines.len());
    assert!(lines[0].len() < 1500, "{}", lines[0]);
    assert!(lines[0].contains("field_0_") && lines[0].contains("and 4990 more"));
}

/// A public key that cannot be used stops the agent from starting; the log must say that,
/// not also that a policy was rejected and the last good one stays active.
#[test]
fn an_unusable_public_key_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    for (key, what) in [
        ("nope!", "is not base64"),
        ("AAAA", "is 3 bytes, expected 32"),
    ] {
        let cfg = Config {
            data_dir: dir.path().into(),
            public_key: Some(key.into()),
            ..Config::default()
        };
        let e = Agent::new(
            cfg,
            ScriptedHeap::default(),
            NoStacks,
            RecordOnly,
            Arc::new(Shared::default()),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.starts_with("the public key given at start ") && e.contains(what),
            "{e}"
        );
        assert!(e.ends_with("; the agent does not start"), "{e}");
        assert!(!e.contains("stays active"), "{e}");
    }
}

fn test_key() -> (ed25519_dalek::SigningKey, String) {
    use base64::Engine as _;
    let k = ed25519_dalek::SigningKey::from_bytes(&[9u8; 32]);
    let b64 = base64::engine::general_purpose::STANDARD.encode(k.verifying_key().to_bytes());
    (k, b64)
}

/// A policy URL without a key to check what it serves: whoever answers there (or on the
/// way) would set the policy. The agent does not start, and says which field and why.
#[test]
fn a_remote_url_without_a_key_is_a_start_up_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        policy_json: r#"{"remote":{"url":"https://p.example/p.json"}}"#.into(),
        data_dir: dir.path().into(),
        ..Config::default()
    };
    let e = Agent::new(
        cfg,
        ScriptedHeap::default(),
        NoStacks,
        RecordOnly,
        Arc::new(Shared::default()),
    )
    .err()
    .map(|e| e.to_string());
    let e = e.expect("the agent started");
    assert!(
        e.contains(
            "remote.url is set (https://p.example/p.json) but no public key was given at start"
        ),
        "{e}"
    );
    assert!(e.ends_with("; the agent does not start"), "{e}");
}

/// The cached remote policy has expired: the agent starts on the policy given at start and
/// says why, instead of running on an old signed policy for ever.
#[test]
fn an_expired_cached_policy_gives_way_to_the_shipped_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_, public) = test_key();
    let now_s = now_ms() / 1000;
    save_signed(
        dir.path(),
        &remote_body(5, now_s - 40 * 86_400, now_s - 86_400),
    );
    let cfg = Config {
        policy_json: r#"{"version":2,"remote":{"url":"https://p.example/p.json"}}"#.into(),
        data_dir: dir.path().into(),
        public_key: Some(public),
        ..Config::default()
    };
    let (a, log) = testkit::warnings(|| {
        Agent::new(
            cfg,
            ScriptedHeap::new(vec![heap(1)]),
            NoStacks,
            RecordOnly,
            Arc::new(Shared::default()),
        )
        .unwrap()
    });
    assert_eq!(a.policy().version, 2, "{log}");
    assert_eq!(a.status().policy_source, "start");
    assert!(log.contains("v5 expired 1 day ago"), "{log}");
}

/// The policy host accepts the connection and never answers (black-holed): samples must
/// keep coming while the fetch waits (it may wait `remote.timeout_ms`, here 120 s). The
/// server holds the request until the test has seen three more polls, then checks that the
/// client is still waiting for its answer.
#[test]
fn samples_keep_coming_while_the_policy_fetch_hangs() {
    use std::io::{BufRead, Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let (_, public) = test_key();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/policy.json", l.local_addr().unwrap());
    let (accepted_tx, accepted) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut r = std::io::BufReader::new(s.try_clone().unwrap());
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                break;
            }
        }
        accepted_tx.send(()).unwrap();
        let _ = released.recv();
        s.set_nonblocking(true).unwrap();
        let waiting =
            matches!(s.read(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        let _ = s.write_all(b"HTTP/1.1 503 X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        waiting
    });
    let shared = Arc::new(Shared::default());
    let cfg = Config {
        policy_json: format!(
            r#"{{"poll_interval_ms":100,"remote":{{"url":"{url}","timeout_ms":120000}}}}"#
        ),
        data_dir: dir.path().into(),
        public_key: Some(public),
        ..Config::default()
    };
    let (tx, h) = run_agent(cfg, shared.clone());
    accepted
        .recv_timeout(Duration::from_secs(60))
        .expect("the fetch never reached the server");
    let polls = || {
        serde_json::from_str::<serde_json::Value>(&shared.status_json()).unwrap()["polls"]
            .as_u64()
            .unwrap_or(0)
    };
    let p0 = polls();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while polls() < p0 + 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let p1 = polls();
    release.send(()).unwrap();
    let still_waiting = server.join().unwrap();
    tx.send(Command::Stop).unwrap();
    h.join().unwrap().unwrap();
    assert!(
        p1 >= p0 + 3,
        "polls stayed at {p1} (from {p0}) while the fetch hung"
    );
    assert!(still_waiting, "the fetch had ended before the polls came");
}

#[test]
fn comm_folding_matches_kernel_truncation() {
    assert_eq!(comm_fold("leaky-worker-123"), "leaky-worker-N");
    assert_eq!(comm_fold("OkHttp ConnectionPool"), "OkHttp Connecti");
    assert_eq!(comm_fold("ééééééééé"), "ééééééé");
}

/// What `on_death` was handed, kept for the test.
struct Keep(Arc<Mutex<Option<Previous>>>);

impl Actions for Keep {
    fn on_verdict(
        &mut self,
        _: &Verdict,
        _: Option<&Inventory>,
        _: &ActionContext<'_>,
    ) -> ActionRecord {
        unreachable!("no verdict in these tests")
    }
    fn on_death(&mut self, p: &Previous, _: &ActionContext<'_>) -> ActionRecord {
        *self.0.lock().unwrap() = Some(p.clone());
        ActionRecord {
            action: "reported".into(),
            detail: String::new(),
        }
    }
}

/// What a [`Keep`] was handed.
type Seen = Arc<Mutex<Option<Previous>>>;

/// When the dead process of [`died_in`] started (wall-clock ms).
const DEAD_STARTED_MS: u64 = 1_800_000_000_000;

/// A data dir whose flight ring says pid 4000001 (started at [`DEAD_STARTED_MS`]) died, and an
/// agent on it whose `on_death` keeps what it is handed.
fn died_in(dir: &Path) -> (Agent<ScriptedHeap, NoStacks, Keep>, Seen) {
    let ring = recorder::ring_path(dir, &crate::sample::process_name());
    let dead = recorder::Identity {
        pid: 4_000_001,
        process_start_ms: DEAD_STARTED_MS,
        agent_start_ms: DEAD_STARTED_MS + 300,
        app_version: "0.9".into(),
        ..recorder::Identity::default()
    };
    // Started, never finished: what a killed process leaves.
    drop(recorder::open(&ring).unwrap().start(&dead).unwrap());
    keeping(dir)
}

/// An agent on `dir` whose `on_death` keeps what it is handed.
fn keeping(dir: &Path) -> (Agent<ScriptedHeap, NoStacks, Keep>, Seen) {
    let seen = Arc::new(Mutex::new(None));
    let cfg = Config {
        policy_json: r#"{"poll_interval_ms":100}"#.into(),
        data_dir: dir.into(),
        ..Config::default()
    };
    let a = Agent::new(
        cfg,
        ScriptedHeap::new(vec![heap(10)]),
        NoStacks,
        Keep(seen.clone()),
        Arc::new(Shared::default()),
    )
    .unwrap();
    (a, seen)
}

/// An exit record of `pid`, a kill by the low-memory killer dated `at_ms`.
fn lmk_record(pid: u32, at_ms: u64) -> recorder::exit_info::ExitInfo {
    recorder::exit_info::parse_record(&format!(
        "pid={pid}\nreason=3\ndescription=lmk\ntimestamp={at_ms}\n"
    ))
    .unwrap()
}

/// Start `a` and stop it at once, the system's exit records asked of `exits`.
fn start_and_stop(
    a: Agent<ScriptedHeap, NoStacks, Keep>,
    exits: recorder::exit_info::CannedExitInfo,
) {
    let (tx, rx) = crate::agent::inbox::channel();
    tx.send(Command::Stop).unwrap();
    a.run_with(rx, Box::new(exits)).unwrap();
}

/// A previous process that died (its ring still says running): the agent asks the exit-info
/// source for exactly its pid and hands the record to `on_death` with the ring's content.
#[test]
fn a_death_carries_the_systems_exit_record_of_its_pid() {
    let dir = tempfile::tempdir().unwrap();
    let (a, seen) = died_in(dir.path());
    let canned = recorder::exit_info::CannedExitInfo {
        records: vec![
            recorder::exit_info::parse_record("pid=17\nreason=4\n").unwrap(),
            recorder::exit_info::parse_record(&format!(
                "pid=4000001\nreason=13\ndescription=MemoryLimiter:AnonSwap\npss=200000\ntimestamp={}\n",
                DEAD_STARTED_MS + 90_000
            ))
            .unwrap(),
        ],
        ..Default::default()
    };
    start_and_stop(a, canned.clone());
    assert_eq!(*canned.asked.lock().unwrap(), vec![4_000_001]);
    let p = seen.lock().unwrap().clone().expect("on_death was called");
    let e = p.exit_info.as_ref().expect("the record of pid 4000001");
    assert_eq!((e.pid, e.reason_name.as_str()), (4_000_001, "REASON_OTHER"));
    assert!(e.memory_related());
    assert!(
        p.reason()
            .contains("; the system says REASON_OTHER: MemoryLimiter:AnonSwap"),
        "{}",
        p.reason()
    );
}

/// Issue 39 item 2: a record of the dead pid but dated before that process started is an
/// earlier process's (pids are reused): the death is reported without it, and says why.
#[test]
fn a_stale_exit_record_of_a_reused_pid_is_not_attached() {
    let dir = tempfile::tempdir().unwrap();
    let (a, seen) = died_in(dir.path());
    stale_record_not_attached(a, seen, 4_000_001);
}

/// Start `a` with the system's one exit record of `pid` dated a day before
/// [`DEAD_STARTED_MS`]: the death is reported without it, saying why.
fn stale_record_not_attached(a: Agent<ScriptedHeap, NoStacks, Keep>, seen: Seen, pid: u32) {
    let canned = recorder::exit_info::CannedExitInfo {
        records: vec![lmk_record(pid, DEAD_STARTED_MS - 86_400_000)],
        ..Default::default()
    };
    start_and_stop(a, canned);
    let p = seen.lock().unwrap().clone().expect("on_death was called");
    assert_eq!(p.pid, pid);
    assert_eq!(p.exit_info, None, "{}", p.reason());
    assert!(!p.reason().contains("the system says"), "{}", p.reason());
    let why = p.exit_info_error.as_deref().unwrap_or_default();
    assert!(
        why.contains("86400000 ms before that process started"),
        "{why}"
    );
}

/// Issue 39 item 7: an exit-record source that takes 30 s (an app's, a stuck binder call)
/// delays the first poll by at most `ASK_WAIT`, and the death is still reported, without the
/// record, saying why; `stop` does not wait for the source either.
#[test]
fn a_slow_exit_record_source_does_not_hold_the_first_poll() {
    struct Sleeps;
    impl ExitInfoSource for Sleeps {
        fn exit_info(&mut self, pid: u32) -> Result<Option<exit_info::ExitInfo>, String> {
            std::thread::sleep(Duration::from_secs(30));
            exit_info::parse_record(&format!("pid={pid}\nreason=3\n")).map(Some)
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let ring = recorder::ring_path(dir.path(), &crate::sample::process_name());
    let dead = recorder::Identity {
        pid: 4_000_002,
        process_start_ms: DEAD_STARTED_MS,
        ..recorder::Identity::default()
    };
    drop(recorder::open(&ring).unwrap().start(&dead).unwrap());
    let seen = Arc::new(Mutex::new(None));
    let shared = Arc::new(Shared::default());
    let cfg = Config {
        policy_json: r#"{"poll_interval_ms":100}"#.into(),
        data_dir: dir.path().into(),
        ..Config::default()
    };
    let a = Agent::new(
        cfg,
        ScriptedHeap::new(vec![heap(10)]),
        NoStacks,
        Keep(seen.clone()),
        shared.clone(),
    )
    .unwrap();
    let (tx, rx) = crate::agent::inbox::channel();
    let t0 = std::time::Instant::now();
    let agent = std::thread::spawn(move || a.run_with(rx, Box::new(Sleeps)));
    let polled = loop {
        let st: serde_json::Value = serde_json::from_str(&shared.status_json()).unwrap();
        if st["polls"].as_u64().unwrap_or(0) >= 1 {
            break t0.elapsed();
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no poll: {st:#}");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(
        polled < exit_info::ASK_WAIT + Duration::from_millis(1_500),
        "the first poll came {polled:?} after start"
    );
    let p = seen
        .lock()
        .unwrap()
        .clone()
        .expect("the death was reported");
    assert_eq!(p.pid, 4_000_002);
    assert_eq!(p.exit_info, None);
    let why = p.exit_info_error.unwrap_or_default();
    assert!(
        why.contains("did not say within 1000 ms why pid 4000002 ended"),
        "{why}"
    );
    tx.send(Command::Stop).unwrap();
    let t1 = std::time::Instant::now();
    agent.join().unwrap().unwrap();
    assert!(t1.elapsed() < Duration::from_secs(5), "{:?}", t1.elapsed());
}

/// A verdict's context carries the process's Java threads, asked of the stack source with the
/// policy's `dump.java_threads_max` (0: none); a source that fails is an error in the status,
/// not a lost verdict.
#[test]
fn a_verdict_lists_the_java_threads_up_to_the_policy_s_maximum() {
    use crate::sample::{JavaStack, JavaThread, SampleError, StackSource};
    struct Listed {
        asked: Arc<Mutex<Vec<usize>>>,
        fail: bool,
    }
    impl StackSource for Listed {
        fn stacks(
            &mut self,
            _: &dyn Fn(&str) -> bool,
            _: usize,
            _: usize,
        ) -> Result<Vec<JavaStack>, SampleError> {
            Ok(Vec::new())
        }
        fn threads(&mut self, max: usize) -> Result<Vec<JavaThread>, SampleError> {
            self.asked.lock().unwrap().push(max);
            if self.fail {
                return Err(SampleError::Vm {
                    what: "ThreadGroup.enumerate",
                    why: "OutOfMemoryError".into(),
                });
            }
            Ok((1..=3)
                .take(max)
                .map(|id| JavaThread {
                    id,
                    name: format!("t{id}"),
                })
                .collect())
        }
    }
    struct Seen(Arc<Mutex<Vec<Vec<JavaThread>>>>);
    impl Actions for Seen {
        fn on_verdict(
            &mut self,
            _: &Verdict,
            _: Option<&Inventory>,
            cx: &ActionContext<'_>,
        ) -> ActionRecord {
            self.0.lock().unwrap().push(cx.java_threads.to_vec());
            ActionRecord {
                action: "recorded".into(),
                detail: String::new(),
            }
        }
    }
    for (policy, fail, asked, names) in [
        ("{}", false, 4096, vec!["t1", "t2", "t3"]),
        (
            r#"{"dump":{"java_threads_max":2}}"#,
            false,
            2,
            vec!["t1", "t2"],
        ),
        (r#"{"dump":{"java_threads_max":0}}"#, false, 0, vec![]),
        ("{}", true, 4096, vec![]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let max = Arc::new(Mutex::new(Vec::new()));
        let cfg = Config {
            policy_json: policy.into(),
            data_dir: dir.path().into(),
            ..Config::default()
        };
        let mut a = Agent::new(
            cfg,
            ScriptedHeap::new(vec![heap(10)]),
            Listed {
                asked: max.clone(),
                fail,
            },
            Seen(seen.clone()),
            Arc::new(Shared::default()),
        )
        .unwrap();
        assert!(a.dump_now("test", 1).is_some());
        assert_eq!(*max.lock().unwrap(), [asked], "{policy}");
        let got = seen.lock().unwrap().clone();
        assert_eq!(got.len(), 1, "{policy}");
        let got: Vec<&str> = got[0].iter().map(|t| t.name.as_str()).collect();
        assert_eq!(got, names, "{policy}");
        if fail {
            assert!(last_error_has(&a.status, "ThreadGroup.enumerate"));
        }
    }
}
