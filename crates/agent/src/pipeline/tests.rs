use super::*;
use crate::agent::ActionContext;
use crate::policy::StripLevel;
use crate::trigger::Device;
use crate::upload::Network;
use collector::{Collector, Config as CollectorConfig};
use std::time::Instant;

/// A runtime without a dumper: these tests start from an incident already in the spool.
struct Refuse;

impl Dumper for Refuse {
    fn name(&self) -> &'static str {
        "refuse"
    }
    fn check(&mut self) -> dump::Result<()> {
        Err(dump::Error::Unsupported("test".into()))
    }
    fn dump(&mut self, _: &DumpRequest) -> dump::Result<dump::DumpOutcome> {
        Err(dump::Error::Unsupported("test".into()))
    }
}

/// An executable `DIR/analyser.sh` that stands in for `oomguard analyze INPUT -o OUT ...`: it
/// writes an empty report to OUT. Callers hold `child::FORK_TEST_LOCK` while it may run.
pub(super) fn fake_analyser(dir: &Path) -> PathBuf {
    let analyser = dir.join("analyser.sh");
    std::fs::write(
        &analyser,
        "#!/bin/sh\n# analyze INPUT -o OUT ...\nprintf '{\"gcPaths\":[],\"dominators\":[]}' > \"$4\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &analyser,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    analyser
}

/// The context the agent hands its actions, for an app "1.0" showing no page.
fn context<'a>(policy: &'a Policy, data_dir: &'a Path) -> ActionContext<'a> {
    static DEVICE: std::sync::LazyLock<Device> = std::sync::LazyLock::new(Device::default);
    static FLIGHT: std::sync::LazyLock<Flight> = std::sync::LazyLock::new(Flight::default);
    ActionContext {
        policy,
        data_dir,
        app_version: "1.0",
        page: "",
        device: &DEVICE,
        flight: &FLIGHT,
        java_threads: &[],
    }
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The spool seals a body by its serialized SHA-256 and checks it by re-serializing what it
/// parsed; running info carries f64 times such as this one (seen in a demo run), which only
/// round-trip with serde_json's `float_roundtrip` (else the incident is quarantined as a
/// "bit flip").
#[test]
fn running_info_times_round_trip_through_json() {
    let text = br#"{"dumpMs":113.439998,"pauseMs":113.40608300000001}"#;
    let v: serde_json::Value = serde_json::from_slice(text).unwrap();
    assert_eq!(serde_json::to_vec(&v).unwrap(), text.to_vec());
}

#[test]
fn network_state_defaults_and_wakes_only_on_a_change_to_connected() {
    assert_eq!(default_network(0), Network::UNMETERED);
    assert_eq!(default_network(34), Network::METERED);
    let n = NetworkState::default();
    assert_eq!(n.get(), None);
    let (tx, rx) = sys::chan::channel();
    n.set_waker(tx);
    n.set(Network::METERED);
    assert_eq!(n.get(), Some(Network::METERED));
    assert!(matches!(rx.try_recv(), Ok(Work::Pass)));
    n.set(Network::METERED);
    n.set(Network::OFFLINE);
    assert_eq!(n.get(), Some(Network::OFFLINE));
    assert!(
        rx.try_recv().is_err(),
        "no pass for an unchanged or offline network"
    );
    n.set(Network::UNMETERED);
    assert!(matches!(rx.try_recv(), Ok(Work::Pass)));
}

/// A real pipeline, a real collector on loopback, an analyser child process: with
/// `unmetered_only`, the analysed incident stays in the spool while the app reports a metered
/// network, and goes up as soon as it reports an unmetered one (well before the 60 s retry).
#[test]
fn uploads_wait_while_metered_and_go_once_unmetered() {
    // This test writes a script and executes it: see FORK_TEST_LOCK.
    let _fork = crate::child::fork_test_lock();
    let data = tempfile::tempdir().unwrap();
    let received = tempfile::tempdir().unwrap();
    let collector = Collector::bind("127.0.0.1:0", CollectorConfig::new(received.path()))
        .unwrap()
        .spawn();
    let analyser = fake_analyser(data.path());
    let mut policy = Policy::default();
    policy.upload.url = Some(collector.endpoint());
    policy.upload.unmetered_only = true;

    // An incident as a verdict leaves it: dumped, not yet analysed.
    let spool = Spool::open(data.path().join(SPOOL_DIR), Quotas::from(&policy)).unwrap();
    let staging = spool.stage().unwrap();
    std::fs::write(staging.path(FileKind::MiniDump), vec![42u8; 64 << 10]).unwrap();
    let id = spool
        .commit(
            staging,
            NewIncident {
                reason: "test".into(),
                samples: serde_json::json!([]),
                running_info: serde_json::json!({}),
                policy_version: "1".into(),
            },
        )
        .unwrap();
    let report = spool.incident_dir(&id).join(FileKind::Report.file_name());

    let network = Arc::new(NetworkState::default());
    network.set(Network::METERED);
    let mut pipeline = Pipeline::new(data.path(), "1.0", Box::new(Refuse), None)
        .with_network(network.clone())
        .with_analyser(Some(analyser));
    pipeline.started(&context(&policy, data.path()));
    // The first pass analyses, then stops uploading because the network is metered.
    let gone = || !spool.incident_dir(&id).exists();
    wait_for("the analysis", Duration::from_secs(20), || {
        report.exists() || gone()
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        collector.stats().files_completed,
        0,
        "uploaded while metered"
    );
    assert!(spool.incident_dir(&id).exists());
    // The queue summary status.json shows says so (issue 39 item 6).
    let board = pipeline
        .queue_board()
        .expect("a pipeline publishes its queue");
    let q = board.newer(&mut 0).expect("published");
    assert_eq!((q.wired, q.pending, q.rejected), (true, 1, 0), "{q:?}");
    assert!(q.pending_bytes >= 64 << 10, "{q:?}");
    assert_eq!(q.next_attempt_ms, None, "{q:?}");
    assert!(
        q.waiting_for
            .as_deref()
            .unwrap_or_default()
            .contains("unmetered"),
        "{q:?}"
    );

    // Unmetered: the I/O thread is woken and uploads every file, then deletes the incident.
    network.set(Network::UNMETERED);
    wait_for("the upload", Duration::from_secs(20), || {
        !spool.incident_dir(&id).exists()
    });
    wait_for(
        "the summary of an empty queue",
        Duration::from_secs(5),
        || board.newer(&mut 0).is_some_and(|q| q.pending == 0),
    );
    drop(pipeline);
    let st = collector.stop();
    assert!(st.files_completed >= 2, "{st:?}");
    assert_eq!((st.corrupt, st.duplicates), (0, 0));
}

fn verdict(kind: Kind, heap_used: u64) -> Verdict {
    Verdict {
        kind,
        reason: format!("{kind:?} over its threshold"),
        threshold: 85,
        evidence: vec![crate::sample::Sample {
            seq: 1,
            heap_used,
            heap_max: 100,
            fds: 900,
            ..Default::default()
        }],
    }
}

/// A verdict whose dump cannot be taken (here: no dumper works on this runtime) is not lost:
/// its incident is committed without a dump and uploaded with its reason, samples,
/// inventory and `dumpError`. A second verdict of the same kind without a dump is only
/// logged, its staging directory removed (no loss counted); another kind is reported again.
#[test]
fn a_verdict_without_a_dump_is_still_reported_once_per_kind() {
    let data = tempfile::tempdir().unwrap();
    let received = tempfile::tempdir().unwrap();
    let collector = Collector::bind("127.0.0.1:0", CollectorConfig::new(received.path()))
        .unwrap()
        .spawn();
    let mut policy = Policy::default();
    policy.upload.url = Some(collector.endpoint());
    policy.upload.unmetered_only = false;
    let mut pipeline =
        Pipeline::new(data.path(), "1.0", Box::new(Refuse), None).with_analyser(None);
    let cx = ActionContext {
        page: "MainActivity",
        ..context(&policy, data.path())
    };
    pipeline.started(&cx);
    let inv = Inventory {
        kind: crate::trigger::InventoryKind::Fd,
        total: 900,
        groups: Vec::new(),
        more_groups: 0,
        java_stacks: Vec::new(),
    };
    let first = pipeline.on_verdict(&verdict(Kind::Fd, 10), Some(&inv), &cx);
    assert_eq!(first.action, "reported", "{first:?}");
    assert!(first.detail.contains("dump unsupported"), "{first:?}");
    let again = pipeline.on_verdict(&verdict(Kind::Fd, 11), Some(&inv), &cx);
    assert_eq!(again.action, "skipped", "{again:?}");
    assert!(again.detail.contains("already reported"), "{again:?}");
    let heap = pipeline.on_verdict(&verdict(Kind::Heap, 90), None, &cx);
    assert_eq!(heap.action, "reported", "{heap:?}");
    let staging = data.path().join(SPOOL_DIR).join("staging");
    let left: Vec<_> = std::fs::read_dir(&staging)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "staging left behind: {left:?}");

    // Both go up: meta.json (with dumpError and no missing file) and the fd inventory.
    let incidents = received.path().join("incidents");
    let metas = || -> Vec<serde_json::Value> {
        std::fs::read_dir(&incidents)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| std::fs::read(e.path().join("meta.json")).ok())
                    .filter_map(|b| serde_json::from_slice(&b).ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    wait_for("two incidents", Duration::from_secs(20), || {
        metas().len() == 2
            && std::fs::read_dir(data.path().join(SPOOL_DIR).join("incidents"))
                .map(|d| d.count() == 0)
                .unwrap_or(false)
    });
    drop(pipeline);
    let st = collector.stop();
    let mut ms = metas();
    ms.sort_by_key(|m| m["samples"][0]["heap_used"].as_u64());
    for m in &ms {
        let why = m["dumpError"].as_str().unwrap_or_default();
        assert!(why.contains("dump unsupported on this runtime"), "{m}");
        assert_eq!(m["missing"], serde_json::json!([]), "{m}");
        assert_eq!(m["runningInfo"]["dumper"], serde_json::Value::Null, "{m}");
        assert_eq!(m["runningInfo"]["currentPage"], "MainActivity", "{m}");
    }
    assert_eq!(ms[0]["reason"], "Fd over its threshold");
    assert_eq!(ms[1]["reason"], "Heap over its threshold");
    // meta + fds for the fd incident, meta alone for the heap one.
    assert_eq!(st.files_completed, 3, "{st:?}");
    let fd_dir = incidents.join(ms[0]["id"].as_str().unwrap());
    let fds = std::fs::read_to_string(fd_dir.join("fds.txt")).unwrap();
    assert!(fds.contains("\"total\": 900"), "{fds}");
}

#[test]
fn an_incidents_samples_are_the_last_minute_of_polls_with_the_verdicts_marked() {
    use crate::sample::Sample;
    let poll = |seq: u64, heap_used: u64| Sample {
        seq,
        at_ms: 1_000 + seq * 5_000,
        heap_used,
        ..Sample::default()
    };
    let recent: Vec<Sample> = (1..=6).map(|k| poll(k, k * 10)).collect();
    // The verdict was taken on the last three polls, the newest not yet in the ring.
    let evidence = [poll(5, 50), poll(6, 60), poll(7, 70)];
    let v = incident_samples(&evidence, recent);
    let seqs: Vec<u64> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6, 7]);
    let marked: Vec<u64> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["verdict"] == true)
        .map(|s| s["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(marked, [5, 6, 7]);
    assert_eq!(v[6]["heap_used"], 70);
    // No recorder: the evidence alone, each marked.
    let alone = incident_samples(&evidence, Vec::new());
    assert_eq!(alone.as_array().unwrap().len(), 3);
    assert!(alone
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["verdict"] == true));
}

/// A dumper that records the requests it is given and fails each dump.
struct Recording(Arc<std::sync::Mutex<Vec<DumpRequest>>>);

impl Dumper for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }
    fn check(&mut self) -> dump::Result<()> {
        Ok(())
    }
    fn dump(&mut self, req: &DumpRequest) -> dump::Result<dump::DumpOutcome> {
        self.0.lock().unwrap().push(req.clone());
        Err(dump::Error::Vm("recorded only".into()))
    }
}

/// The request a verdict's dump is taken with follows the policy: a mini file unless the strip
/// level is `none`, the full file kept when asked or when it is the only file, the child's
/// deadline, both files in the incident's staging directory.
#[test]
fn a_dumps_request_follows_the_policys_strip_level_and_keep_full() {
    let data = tempfile::tempdir().unwrap();
    let mut asked = Vec::new();
    for (level, keep_full) in [
        (StripLevel::Arrays, false),
        (StripLevel::App, true),
        (StripLevel::None, false),
    ] {
        let mut policy = Policy::default();
        policy.dump.strip_level = level;
        policy.dump.keep_full = keep_full;
        policy.dump.child_deadline_s = 17;
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut pipeline =
            Pipeline::new(data.path(), "1.0", Box::new(Recording(seen.clone())), None)
                .with_analyser(None);
        let cx = context(&policy, data.path());
        pipeline.started(&cx);
        let r = pipeline.on_verdict(&verdict(Kind::Heap, 90), None, &cx);
        assert_eq!(r.action, "reported", "{r:?}");
        assert!(r.detail.contains("recorded only"), "{r:?}");
        let req = seen.lock().unwrap().pop().expect("the dumper was asked");
        let staging = req.full_path.parent().unwrap().to_path_buf();
        assert_eq!(req.full_path, staging.join(FileKind::FullDump.file_name()));
        asked.push((
            req.mini_path
                .map(|m| m == staging.join(FileKind::MiniDump.file_name())),
            req.level,
            req.keep_full,
            req.deadline,
        ));
    }
    let s17 = Duration::from_secs(17);
    assert_eq!(
        asked,
        [
            (Some(true), Level::Arrays, false, s17),
            (Some(true), Level::App, true, s17),
            (None, Level::None, true, s17),
        ]
    );
}

/// A job that sends the name of the thread it runs on.
fn thread_name_job(tx: std::sync::mpsc::Sender<Option<String>>) -> IoJob {
    Box::new(move || {
        let _ = tx.send(std::thread::current().name().map(str::to_string));
    })
}

/// A pipeline without an analyser executable, started on the default policy.
fn started_without_analyser(data: &Path) -> Pipeline {
    let mut pipeline = Pipeline::new(data, "1.0", Box::new(Refuse), None).with_analyser(None);
    pipeline.started(&context(&Policy::default(), data));
    pipeline
}

/// Work handed to the I/O thread runs there; before the pipeline has started there is no such
/// thread and the work comes back to the caller.
#[test]
fn io_work_runs_on_the_io_thread_once_started() {
    let data = tempfile::tempdir().unwrap();
    let policy = Policy::default();
    let mut pipeline =
        Pipeline::new(data.path(), "1.0", Box::new(Refuse), None).with_analyser(None);
    let (tx, rx) = std::sync::mpsc::channel();
    let back = pipeline
        .run_io(thread_name_job(tx.clone()))
        .expect_err("no I/O thread yet");
    back();
    assert_eq!(rx.recv().unwrap().as_deref(), std::thread::current().name());
    pipeline.started(&context(&policy, data.path()));
    assert!(pipeline.run_io(thread_name_job(tx)).is_ok());
    let name = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the job ran");
    assert_eq!(name.as_deref(), Some("oomguard-io"));
    // Dropped, the pipeline waits (a while) for the work in flight to end.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let slow: IoJob = Box::new(move || {
        std::thread::sleep(Duration::from_millis(300));
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    assert!(pipeline.run_io(slow).is_ok());
    drop(pipeline);
    assert!(
        done.load(std::sync::atomic::Ordering::SeqCst),
        "the I/O thread was not waited for"
    );
}

/// Work that panics does not end the I/O thread: the work after it still runs there.
#[test]
fn a_panicking_job_leaves_the_io_thread_serving() {
    let data = tempfile::tempdir().unwrap();
    let mut pipeline = started_without_analyser(data.path());
    assert!(pipeline
        .run_io(Box::new(|| panic!(
            "a job that panics (expected in this test)"
        )))
        .is_ok());
    let (tx, rx) = std::sync::mpsc::channel();
    assert!(pipeline.run_io(thread_name_job(tx)).is_ok());
    let name = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the job after the panic ran");
    assert_eq!(name.as_deref(), Some("oomguard-io"));
}

/// Once the I/O thread has ended, work is handed back, for the agent to run on a thread of its
/// own.
#[test]
fn after_the_io_thread_ended_work_comes_back_to_the_caller() {
    let data = tempfile::tempdir().unwrap();
    let mut pipeline = started_without_analyser(data.path());
    let live = pipeline.live.as_ref().unwrap();
    live.io.tx.send(io::Work::Stop).ok().unwrap();
    live.io
        .done
        .recv_timeout(Duration::from_secs(20))
        .expect("the thread ended");
    let (tx, rx) = std::sync::mpsc::channel();
    let back = pipeline
        .run_io(Box::new(move || tx.send(()).unwrap()))
        .expect_err("no thread to take it");
    back();
    rx.recv_timeout(Duration::from_secs(1))
        .expect("the job handed back ran");
}

/// A pass that panics does not end the I/O thread. The panic is the queue summary's last
/// error, and the analysis is no longer marked in progress in the ring. A kick passes again, and
/// a pass that does not panic starts the count afresh; after `PANICKED_PASSES_MAX` in a row the
/// thread makes no more passes, but still runs the agent's jobs, panicking or not.
#[test]
fn passes_that_panic_leave_the_io_thread_running_jobs() {
    use super::io::{io_loop, Work, PANICKED_PASSES_MAX};
    assert_eq!(PANICKED_PASSES_MAX, 3);
    let data = tempfile::tempdir().unwrap();
    let cfg = super::fork_tests::io_config(data.path(), None);
    let ring = crate::recorder::ring_path(data.path(), "app");
    let id = crate::recorder::Identity {
        pid: 1,
        process_start_ms: 1,
        agent_start_ms: 2,
        app_version: "1.0".into(),
        policy_version: 1,
    };
    let recorder = crate::recorder::open(&ring).unwrap().start(&id).unwrap();
    cfg.flight.install(Some(recorder));
    let board = cfg.queue.clone();
    let (tx, rx) = chan::channel();
    let (passed, passes) = std::sync::mpsc::channel();
    // Each pass in turn: whether it panics. The 7th must never be made.
    let script = [true, true, false, true, true, true, false];
    let thread = std::thread::spawn(move || {
        let mut n = 0;
        io_loop(&cfg, &rx, |cfg, _| {
            n += 1;
            passed.send(n).unwrap();
            if script[n - 1] {
                cfg.flight.set_busy(crate::recorder::BUSY_ANALYSIS, true);
                panic!("pass {n} panics (expected in this test)");
            }
        });
    });
    let next = || passes.recv_timeout(Duration::from_secs(20)).unwrap();
    let analysing = || {
        let b = std::fs::read(&ring).unwrap();
        crate::recorder::parse(&ring, &b)
            .unwrap()
            .analysis_in_progress
    };
    let (done_tx, done) = std::sync::mpsc::channel();
    let mark = |n: u32| -> Work {
        let done_tx = done_tx.clone();
        Work::Run(Box::new(move || done_tx.send(n).unwrap()))
    };
    // Each kick, sent once the pass before has begun, makes exactly one pass.
    for n in 1..=6 {
        assert_eq!(next(), n, "pass {n} was made");
        tx.send(Work::Pass).ok().unwrap();
    }
    // Two jobs one after the other: by the time the second runs, the loop has come round
    // after the last kick, where a 7th pass would have been made.
    tx.send(Work::Run(Box::new(|| {
        panic!("a job that panics (expected in this test)")
    })))
    .ok()
    .unwrap();
    tx.send(mark(1)).ok().unwrap();
    assert_eq!(done.recv_timeout(Duration::from_secs(20)).unwrap(), 1);
    tx.send(mark(2)).ok().unwrap();
    assert_eq!(done.recv_timeout(Duration::from_secs(20)).unwrap(), 2);
    assert!(
        passes.try_recv().is_err(),
        "a pass after three panics in a row"
    );
    assert!(
        !analysing(),
        "the panicked analysis still marked in progress"
    );
    let mut seen = 0;
    let q = board.newer(&mut seen).expect("the summary was published");
    assert_eq!(
        q.last_error.as_deref(),
        Some("analysis or upload pass panicked: pass 6 panics (expected in this test)")
    );
    assert!(q.last_error_ms.is_some_and(|t| t > 1_700_000_000_000));
    tx.send(Work::Stop).ok().unwrap();
    thread.join().expect("the loop returned on Stop");
}

/// Scratch files are planned when 1.25 times the dump is more than half the budget, never
/// without a budget.
#[test]
fn scratch_is_planned_past_half_the_budget() {
    use super::analysis::needs_scratch;
    assert!(!needs_scratch(4, 10), "5 bytes is half of 10, not more");
    assert!(needs_scratch(4, 9));
    assert!(!needs_scratch(1 << 40, 0), "no budget");
    assert!(!needs_scratch(0, 1));
    assert!(needs_scratch(u64::MAX, u64::MAX), "no overflow");
}

/// What a killed process's ring says: running, two polls, last words.
fn previous_process() -> Previous {
    let slot = |seq: u64, heap_used: u64| crate::recorder::Slot {
        sample: crate::sample::Sample {
            seq,
            at_ms: 1_000 + seq * 5_000,
            heap_used,
            heap_max: 256 << 20,
            ..Default::default()
        },
        strikes: [seq as u8, 0, 0, 0, 0],
    };
    Previous {
        pid: 4321,
        process_start_ms: 5,
        agent_start_ms: 6,
        app_version: "0.9".into(),
        policy_version: 3,
        state: crate::recorder::State::Running,
        dump_in_progress: true,
        analysis_in_progress: false,
        page: "CartActivity".into(),
        samples: vec![slot(1, 100 << 20), slot(2, 160 << 20)],
        torn_slots: 1,
        last_words: None,
        torn_last_words: false,
        exit_info: None,
        exit_info_error: Some("no system record".into()),
    }
}

/// The previous process's death is committed as an incident of its own, without a dump: its
/// reason, its polls, the trend of its last minute and what was in progress, for the upload;
/// no more of them a day than the policy's `death.max_per_day`, and none when `death.report`
/// is off. The day's count is kept in the data dir.
#[test]
fn a_death_is_queued_with_what_the_ring_held_within_the_days_quota() {
    let data = tempfile::tempdir().unwrap();
    let mut policy = Policy::default();
    policy.death.max_per_day = 2;
    let cx = context(&policy, data.path());
    let prev = previous_process();
    let mut pipeline =
        Pipeline::new(data.path(), "1.0", Box::new(Refuse), None).with_analyser(None);
    let first = pipeline.on_death(&prev, &cx);
    assert_eq!(first.action, "reported", "{first:?}");
    assert!(
        first.detail.ends_with(": the death of pid 4321 goes up"),
        "{first:?}"
    );
    let second = pipeline.on_death(&prev, &cx);
    assert_eq!(second.action, "reported", "{second:?}");
    let third = pipeline.on_death(&prev, &cx);
    assert_eq!(third.action, "skipped", "{third:?}");
    assert!(
        third.detail.starts_with("2 deaths already reported today"),
        "{third:?}"
    );

    let spool = Spool::open(data.path().join(SPOOL_DIR), Quotas::from(&policy)).unwrap();
    let incidents = || {
        spool
            .lock_wait(Duration::from_secs(20))
            .unwrap()
            .incidents()
            .unwrap()
    };
    let listed = incidents();
    assert_eq!(listed.len(), 2);
    let inc = &listed[0];
    assert_eq!(inc.reason, prev.reason());
    assert_eq!(
        inc.dump_error.as_deref(),
        Some("no dump: the process died before one was taken")
    );
    assert_eq!(inc.samples, serde_json::to_value(&prev.samples).unwrap());
    let info = &inc.running_info;
    assert_eq!(info["kind"], "death");
    assert_eq!(
        (info["pid"].as_u64(), info["appVersion"].as_str()),
        (Some(4321), Some("0.9"))
    );
    assert_eq!(info["reportedByAppVersion"], "1.0");
    assert_eq!(
        (
            info["dumpInProgress"].as_bool(),
            info["analysisInProgress"].as_bool()
        ),
        (Some(true), Some(false))
    );
    assert_eq!(info["currentPage"], "CartActivity");
    assert_eq!(info["exit"], "running");
    assert_eq!(info["exitInfoError"], "no system record");
    assert_eq!(info["tornSamples"], 1);
    assert_eq!(info["policyVersionAtDeath"], 3);
    let heap = info["trend"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["figure"] == "heapUsed")
        .unwrap();
    assert_eq!(heap["perMinute"], 720 << 20, "{heap}");

    let today = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let quota = data.path().join("flight/deaths.json");
    let kept: serde_json::Value = serde_json::from_slice(&std::fs::read(&quota).unwrap()).unwrap();
    assert_eq!(
        kept,
        serde_json::json!({"day": today / 86_400_000, "count": 2})
    );

    // Another day's count, or one that cannot be read, is no count.
    for stale in [
        serde_json::json!({"day": today / 86_400_000 - 1, "count": 9}).to_string(),
        "not json".to_string(),
    ] {
        std::fs::write(&quota, stale).unwrap();
        let r = pipeline.on_death(&prev, &cx);
        assert_eq!(r.action, "reported", "{r:?}");
    }
    assert_eq!(incidents().len(), 4);

    // Off: logged only.
    let mut off_policy = policy.clone();
    off_policy.death.report = false;
    let cx = ActionContext {
        policy: &off_policy,
        ..cx
    };
    std::fs::remove_file(&quota).unwrap();
    let off = pipeline.on_death(&prev, &cx);
    assert_eq!(off.action, "skipped", "{off:?}");
    assert!(off.detail.contains("death.report is off"), "{off:?}");
    assert_eq!(incidents().len(), 4);
    assert!(!quota.exists());
}
