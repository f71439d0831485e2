//! The status and the loop's own rules: what `status.json` holds and when it is written, the
//! sample cost, the queue board, errors and panics counted, muting, inventories, the poll
//! schedule, the fetch's answer, and the edges of a death's report.

use super::*;

/// The sample cost: min, max, last and totals of every sample, and the median of the last 128,
/// kept in a ring allocated once for 128 (the 129th replaces the first).
#[test]
fn the_sample_cost_keeps_the_median_of_the_last_128_in_a_ring_of_128() {
    let parts = |n: u64| crate::sample::SampleParts {
        heap_ns: n,
        fds_ns: 2 * n,
        proc_ns: 3 * n,
    };
    let mut c = SampleCost::default();
    c.add(5, parts(1));
    assert_eq!(c.recent.capacity(), RECENT_COSTS, "allocated once, whole");
    c.add(3, parts(1));
    c.add(9, parts(1));
    assert_eq!(
        (
            c.samples,
            c.min_ns,
            c.max_ns,
            c.last_ns,
            c.total_ns,
            c.median_ns
        ),
        (3, 3, 9, 9, 17, 5)
    );
    assert_eq!(
        (c.heap_total_ns, c.fds_total_ns, c.proc_total_ns),
        (3, 6, 9)
    );
    // 0 first, then 127 of 1,000 fill the ring; 64 of 5,000 replace its first 64 (the 0 among
    // them): the median of the last 128 is 5,000.
    let mut c = SampleCost::default();
    c.add(0, parts(0));
    for _ in 0..127 {
        c.add(1_000, parts(0));
    }
    assert_eq!((c.recent.len(), c.median_ns), (128, 1_000));
    for _ in 0..64 {
        c.add(5_000, parts(0));
    }
    assert_eq!(c.recent.len(), 128);
    assert!(c.recent[..64].iter().all(|&x| x == 5_000));
    assert!(c.recent[64..].iter().all(|&x| x == 1_000));
    assert_eq!(
        (c.samples, c.min_ns, c.max_ns, c.median_ns),
        (192, 0, 5_000, 5_000)
    );
}

/// The board hands a summary out once per publication or update, and nothing before the first.
#[test]
fn the_queue_board_hands_out_each_new_summary_once() {
    let board = QueueBoard::default();
    let mut seen = 0;
    assert_eq!(board.newer(&mut seen), None, "nothing published yet");
    board.publish(QueueSummary {
        pending: 2,
        ..QueueSummary::default()
    });
    assert_eq!(board.newer(&mut seen).map(|q| q.pending), Some(2));
    assert_eq!(board.newer(&mut seen), None, "already taken");
    board.update(|q| q.pending += 1);
    assert_eq!(board.newer(&mut seen).map(|q| q.pending), Some(3));
    assert_eq!(board.newer(&mut seen), None);
    // Another reader that has seen nothing gets the latest.
    assert_eq!(board.newer(&mut 0).map(|q| q.pending), Some(3));
}

/// `status()` says "starting" until a status is set, then the status; the shared flight
/// recorder is the one given.
#[test]
fn the_shared_status_and_flight_are_the_ones_set() {
    let dir = tempfile::tempdir().unwrap();
    let shared = Shared::default();
    assert_eq!(shared.status_json(), r#"{"state":"starting"}"#);
    shared.set_status_json(r#"{"state":"failed"}"#.into());
    assert_eq!(shared.status_json(), r#"{"state":"failed"}"#);
    shared.set_status_json(String::new());
    assert_eq!(shared.status_json(), r#"{"state":"starting"}"#);

    let flight = Flight::default();
    let ring = recorder::ring_path(dir.path(), "app");
    let id = recorder::Identity {
        pid: 1,
        app_version: "1".into(),
        ..recorder::Identity::default()
    };
    flight.install(Some(recorder::open(&ring).unwrap().start(&id).unwrap()));
    let shared = Shared::default().with_flight(flight);
    let s = crate::sample::Sample {
        seq: 1,
        at_ms: now_ms(),
        ..crate::sample::Sample::default()
    };
    shared.flight().record(&s, &Strikes::default());
    assert_eq!(shared.flight().recent(60_000).len(), 1);
}

/// Errors are counted one by one, and a status file that cannot be written is one of them.
#[test]
fn errors_are_counted_and_a_status_file_that_cannot_be_written_is_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "", vec![heap(10)]);
    let errors = a.status.errors;
    a.note_error("one".into());
    a.note_error("two".into());
    assert_eq!(a.status.errors, errors + 2);
    assert_eq!(a.status.last_error.as_deref(), Some("two"));
    std::fs::remove_file(dir.path().join("status.json")).unwrap();
    std::fs::create_dir(dir.path().join("status.json")).unwrap();
    a.publish(true);
    assert_eq!(a.status.errors, errors + 3);
}

/// A panic fenced is counted; the agent is disabled at the `MAX_PANICS`th in a row, not
/// before; one that does not panic starts the count again.
#[test]
fn the_agent_is_disabled_at_the_third_panic_in_a_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "", vec![heap(10)]);
    let boom = |_: &mut Agent<ScriptedHeap, NoStacks, RecordOnly>| panic!("expected in this test");
    assert!(!a.fenced("poll", boom));
    assert!(!a.fenced("poll", boom));
    assert!(a.fenced("poll", |_| {}));
    assert!(!a.fenced("poll", boom));
    assert!(!a.fenced("poll", boom));
    assert_eq!((a.status.state, a.status.panics), ("running", 4));
    assert!(!a.fenced("poll", boom));
    assert_eq!((a.status.state, a.status.panics), ("disabled", 5));
    assert_eq!(
        a.status.last_error.as_deref(),
        Some("panic in poll: expected in this test")
    );
}

/// The forced panic of the test hook (`OOMGUARD_TEST_PANIC=poll`) comes at the second poll,
/// never the first.
#[test]
fn the_test_panic_at_poll_comes_after_the_first_poll() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "", vec![heap(10), heap(10), heap(10)]);
    a.test_panic = Some("poll".into());
    assert!(a.fenced("poll", |a| {
        a.poll(1_000);
    }));
    assert!(!a.fenced("poll", |a| {
        a.poll(2_000);
    }));
    assert!(last_error_has(&a.status, "forced panic at poll"));
}

/// `status.json` is rewritten when the strikes change or a verdict comes, and otherwise only
/// every `STATUS_REFRESH_MS`.
#[test]
fn the_status_file_is_rewritten_on_a_change_or_after_its_refresh_time() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("status.json");
    let mut a = agent(
        dir.path(),
        "",
        vec![heap(10), heap(10), heap(218), heap(10), heap(10), heap(10)],
    );
    let start = a.last_status_write_ms;
    assert!(start > 0);
    a.poll(start + 1);
    std::fs::remove_file(&file).unwrap();
    a.poll(start + 2);
    assert!(!file.exists(), "rewritten with nothing changed");
    a.poll(start + 3);
    assert!(file.exists(), "a strike was not written");
    a.poll(start + 4);
    std::fs::remove_file(&file).unwrap();
    a.poll(start + 5);
    assert!(!file.exists(), "rewritten with nothing changed");
    let later = a.last_status_write_ms + STATUS_REFRESH_MS;
    a.poll(later);
    assert!(file.exists(), "not rewritten after its refresh time");
}

/// What the actions publish on their board reaches the status (as wired), and a new summary
/// rewrites the file.
#[test]
fn the_actions_queue_summary_reaches_the_status_file() {
    struct Board(Arc<QueueBoard>);
    impl Actions for Board {
        fn on_verdict(
            &mut self,
            _: &Verdict,
            _: Option<&Inventory>,
            _: &ActionContext<'_>,
        ) -> ActionRecord {
            unreachable!("no verdict in this test")
        }
        fn queue_board(&self) -> Option<Arc<QueueBoard>> {
            Some(self.0.clone())
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let without = agent(dir.path(), "", vec![heap(10)]);
    assert!(!without.status.queue.wired, "actions without a board");
    drop(without);
    let file = dir.path().join("status.json");
    let board = Arc::new(QueueBoard::default());
    let script = ScriptedHeap::new(vec![heap(10); 4]);
    let mut a = agent_with(dir.path(), "", script, NoStacks, Board(board.clone()));
    assert!(a.status.queue.wired);
    let t = a.last_status_write_ms;
    a.poll(t + 1);
    std::fs::remove_file(&file).unwrap();
    a.poll(t + 2);
    assert!(!file.exists(), "rewritten with no new summary");
    board.publish(QueueSummary {
        pending: 4,
        ..QueueSummary::default()
    });
    a.poll(t + 3);
    let st: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        (
            st["queue"]["pending"].as_u64(),
            st["queue"]["wired"].as_bool()
        ),
        (Some(4), Some(true))
    );
    // The same summary published again is no change.
    std::fs::remove_file(&file).unwrap();
    board.publish(QueueSummary {
        pending: 4,
        ..QueueSummary::default()
    });
    a.poll(t + 4);
    assert!(!file.exists(), "rewritten for the same summary");
}

/// An fd or thread verdict carries the inventory of this process; for threads, the Java
/// stacks asked for are those of the largest group's name only.
#[test]
fn fd_and_thread_verdicts_carry_their_inventories() {
    use crate::sample::{JavaStack, JavaThread, SampleError, StackSource};
    use crate::trigger::inventory::InventoryKind;
    struct Named;
    impl StackSource for Named {
        fn stacks(
            &mut self,
            wanted: &dyn Fn(&str) -> bool,
            _: usize,
            _: usize,
        ) -> Result<Vec<JavaStack>, SampleError> {
            let names = crate::sample::thread_names().unwrap();
            let top = inventory::threads(&names).groups[0].name.clone();
            let names = [top, "not a thread of this process".into()];
            Ok(names
                .into_iter()
                .filter(|n| wanted(n))
                .map(|thread| JavaStack {
                    thread,
                    frames: vec!["f".into()],
                })
                .collect())
        }
        fn threads(&mut self, _: usize) -> Result<Vec<JavaThread>, SampleError> {
            Ok(Vec::new())
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let script = ScriptedHeap::new(vec![heap(10)]);
    let mut a = agent_with(dir.path(), "", script, Named, RecordOnly);
    let verdict = |kind| Verdict {
        kind,
        reason: "test".into(),
        threshold: 0,
        evidence: Vec::new(),
    };
    a.act(verdict(Kind::Fd), 1);
    let inv = a.status.last_verdict.as_ref().unwrap().inventory.clone();
    let inv = inv.expect("an fd verdict's inventory");
    assert_eq!(inv.kind, InventoryKind::Fd);
    assert!(inv.total > 0 && !inv.groups.is_empty());
    a.act(verdict(Kind::Threads), 2);
    let inv = a.status.last_verdict.as_ref().unwrap().inventory.clone();
    let inv = inv.expect("a thread verdict's inventory");
    assert_eq!(inv.kind, InventoryKind::Threads);
    let top = inv.groups[0].name.clone();
    assert_eq!(inv.java_stacks.len(), 1, "{:?}", inv.java_stacks);
    assert_eq!(comm_fold(&inv.java_stacks[0].example_thread), top);
    a.act(verdict(Kind::Heap), 3);
    assert!(a.status.last_verdict.as_ref().unwrap().inventory.is_none());
}

/// Once per process: a kind that fired is muted, a manual dump never is; with
/// `once_per_process` off nothing is.
#[test]
fn verdicts_are_muted_once_per_process_but_manual_dumps_never() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "", vec![heap(10)]);
    assert!(a.policy.dump.once_per_process);
    a.dump_now("first", 1);
    a.dump_now("second", 2);
    assert_eq!(a.status.muted, Vec::<Kind>::new());
    assert_eq!(a.status.verdicts, 2);
    let verdict = Verdict {
        kind: Kind::Heap,
        reason: "test".into(),
        threshold: 0,
        evidence: Vec::new(),
    };
    a.act(verdict.clone(), 3);
    assert_eq!(a.status.muted, vec![Kind::Heap]);
    a.act(verdict.clone(), 4);
    assert_eq!(a.status.muted, vec![Kind::Heap], "muted once");

    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(
        dir.path(),
        r#"{"dump":{"once_per_process":false}}"#,
        vec![heap(10)],
    );
    a.act(verdict, 1);
    assert_eq!(a.status.muted, Vec::<Kind>::new());
}

/// A previous process that exited cleanly did not die: nothing is reported and the system is
/// not asked about it.
#[test]
fn a_clean_exit_is_not_reported_as_a_death() {
    let dir = tempfile::tempdir().unwrap();
    let ring = recorder::ring_path(dir.path(), &crate::sample::process_name());
    let gone = recorder::Identity {
        pid: 4_000_003,
        process_start_ms: DEAD_STARTED_MS,
        ..recorder::Identity::default()
    };
    let mut r = recorder::open(&ring).unwrap().start(&gone).unwrap();
    r.set_state(recorder::State::Exited).unwrap();
    drop(r);
    let (a, seen) = keeping(dir.path());
    let canned = recorder::exit_info::CannedExitInfo::default();
    start_and_stop(a, canned.clone());
    assert!(seen.lock().unwrap().is_none(), "a clean exit reported");
    assert!(canned.asked.lock().unwrap().is_empty());
}

/// A ring that could not say when its process started (0) dates the process by the agent's
/// start: a record of that pid from before it is stale.
#[test]
fn a_death_without_its_process_start_is_dated_by_the_agents_start() {
    let dir = tempfile::tempdir().unwrap();
    let ring = recorder::ring_path(dir.path(), &crate::sample::process_name());
    let dead = recorder::Identity {
        pid: 4_000_004,
        process_start_ms: 0,
        agent_start_ms: DEAD_STARTED_MS,
        ..recorder::Identity::default()
    };
    drop(recorder::open(&ring).unwrap().start(&dead).unwrap());
    let (a, seen) = keeping(dir.path());
    // Dated by the agent's start, the record is a day early (by 0, the start would be unknown).
    stale_record_not_attached(a, seen, 4_000_004);
}

/// A fetch that failed is an error in the status, counted once.
#[test]
fn a_failed_fetch_is_one_error_in_the_status() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "", vec![heap(10)]);
    let errors = a.status.errors;
    a.fetched(Some(Err(crate::policy::PolicyError::Fetch {
        url: "http://127.0.0.1:9/p".into(),
        what: "refused".into(),
    })));
    assert_eq!(a.status.errors, errors + 1);
    assert!(last_error_has(&a.status, "refused"));
}

/// Dropping the commands' end ends the loop, as `Stop` does.
#[test]
fn dropping_the_commands_end_stops_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        data_dir: dir.path().into(),
        ..Config::default()
    };
    let (tx, h) = run_agent(cfg, Arc::new(Shared::default()));
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || done_tx.send(h.join().unwrap().is_ok()).unwrap());
    drop(tx);
    assert_eq!(
        done.recv_timeout(Duration::from_secs(20)),
        Ok(true),
        "the loop went on"
    );
}

/// A poll that overran its interval is not made up for: the next comes an interval after it,
/// not in a burst of the polls missed.
#[test]
fn a_slow_poll_is_not_made_up_for_with_a_burst() {
    struct Slow(Arc<std::sync::atomic::AtomicU64>);
    impl crate::sample::HeapSource for Slow {
        fn heap(&mut self) -> Result<Heap, crate::sample::SampleError> {
            let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n == 1 {
                std::thread::sleep(Duration::from_millis(1_050));
            }
            Ok(heap(10))
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let policy = r#"{"poll_interval_ms":100}"#;
    let a = agent_with(
        dir.path(),
        policy,
        Slow(calls.clone()),
        NoStacks,
        RecordOnly,
    );
    let (tx, rx) = crate::agent::inbox::channel();
    let h = std::thread::spawn(move || a.run(rx));
    // The second poll sleeps 1,050 ms; about 250 ms after it, the loop is stopped.
    let t0 = std::time::Instant::now();
    while calls.load(std::sync::atomic::Ordering::SeqCst) < 2 {
        assert!(t0.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(5));
    }
    let slow = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(1_050 + 250));
    tx.send(Command::Stop).unwrap();
    h.join().unwrap().unwrap();
    // One poll an interval after the slow one ended, at most, and two for slack. A burst
    // would make up about ten polls missed in the slow one's 1,050 ms.
    let after = (slow.elapsed().as_millis() as u64).saturating_sub(1_050);
    let most = 2 + after / 100 + 2;
    let n = calls.load(std::sync::atomic::Ordering::SeqCst);
    assert!((2..=most).contains(&n), "{n} polls, {most} at most");
}

/// A fetch handed off and dropped unrun (an I/O thread that stopped) still answers, so the
/// agent hands off the next one instead of waiting for it for good.
#[test]
fn a_fetch_dropped_unrun_does_not_hold_back_the_next() {
    struct Drops(Arc<std::sync::atomic::AtomicU64>);
    impl Actions for Drops {
        fn on_verdict(
            &mut self,
            _: &Verdict,
            _: Option<&Inventory>,
            _: &ActionContext<'_>,
        ) -> ActionRecord {
            unreachable!("no verdict in this test")
        }
        fn run_io(&mut self, job: IoJob) -> Result<(), IoJob> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(job);
            Ok(())
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let handed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let policy = r#"{"poll_interval_ms":100,"remote":{"url":"http://127.0.0.1:9/policy.json"}}"#;
    let script = ScriptedHeap::new(vec![heap(10)]);
    let a = agent_with(dir.path(), policy, script, NoStacks, Drops(handed.clone()));
    let (tx, rx) = crate::agent::inbox::channel();
    let h = std::thread::spawn(move || a.run(rx));
    let t0 = std::time::Instant::now();
    while handed.load(std::sync::atomic::Ordering::SeqCst) < 2
        && t0.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    tx.send(Command::Stop).unwrap();
    h.join().unwrap().unwrap();
    assert!(
        handed.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "one fetch held back the next"
    );
}
