//! Tests of the spool: states, recovery, analysis attempts, quarantine, faults, quotas, lock.

use super::*;
use std::sync::Arc;

const T0: u64 = 1_800_000_000_000;

struct Env {
    _dir: tempfile::TempDir,
    root: PathBuf,
    clock: Arc<ManualClock>,
    fs: FaultFs,
}

impl Env {
    fn new() -> Env {
        // tmpfs when there is one: these tests are about error paths, not power loss, and
        // thousands of fsyncs on a disk would make them slow.
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        let root = dir.path().join("spool");
        Env {
            _dir: dir,
            root,
            clock: Arc::new(ManualClock::new(T0)),
            fs: FaultFs::new(),
        }
    }
    fn spool(&self, q: Quotas) -> Spool {
        Spool::with(&self.root, q, Arc::new(self.fs.clone()), self.clock.clone()).unwrap()
    }
}

fn stage_files(spool: &Spool, id: &str, mini: usize) -> Staging {
    let st = spool.stage_with_id(id).unwrap();
    let body: Vec<u8> = (0..mini).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(st.path(FileKind::MiniDump), body).unwrap();
    std::fs::write(st.path(FileKind::Fds), b"0 /dev/null\n").unwrap();
    std::fs::write(st.path(FileKind::Threads), b"main\n").unwrap();
    st
}

fn info(reason: &str) -> NewIncident {
    NewIncident {
        reason: reason.into(),
        samples: serde_json::json!([{"heap": 1.5, "fd": 3}]),
        running_info: serde_json::json!({"pid": 1}),
        policy_version: "p1".into(),
    }
}

fn add(spool: &Spool, id: &str, mini: usize) -> String {
    let st = stage_files(spool, id, mini);
    spool.commit(st, info("heap")).unwrap()
}

fn good(job: &AnalysisJob) -> std::result::Result<(), String> {
    std::fs::write(&job.report_out, br#"{"gcPaths":[],"dominators":[]}"#).map_err(|e| e.to_string())
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn lifecycle_dumped_analysed_uploading() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    let id = add(&spool, "a1", 10_000);
    assert_eq!(spool.read_incident(&id).unwrap().state, State::Dumped);
    let g = spool.lock().unwrap();
    let mut calls = 0;
    let rec = g
        .recover(&mut |j: &AnalysisJob| {
            calls += 1;
            assert!(j.mini_dump.is_some() && j.full_dump.is_none());
            good(j)
        })
        .unwrap();
    assert_eq!((rec.analysed, calls), (1, 1));
    let inc = spool.read_incident(&id).unwrap();
    assert_eq!((inc.state, inc.analysis_attempts), (State::Analysed, 1));
    let inc = g.plan_upload(&id).unwrap();
    assert_eq!(inc.state, State::Uploading);
    let kinds: Vec<_> = inc.uploads.iter().map(|u| u.kind).collect();
    assert_eq!(
        kinds,
        vec![
            FileKind::Meta,
            FileKind::Report,
            FileKind::Fds,
            FileKind::Threads,
            FileKind::MiniDumpGz
        ]
    );
    // The mini dump was replaced by its compressed copy, which decompresses to it.
    let d = spool.incident_dir(&id);
    assert!(!d.join("mini.hprof").exists());
    let mut gz =
        flate2::read::GzDecoder::new(std::fs::File::open(d.join("mini.hprof.gz")).unwrap());
    let mut back = Vec::new();
    gz.read_to_end(&mut back).unwrap();
    assert_eq!(back.len(), 10_000);
    assert_eq!(back[33], (33 * 31 % 251) as u8);
    // Re-planning an uploading incident changes nothing (resume offsets stay valid).
    assert_eq!(g.plan_upload(&id).unwrap(), inc);
    g.delete(&id).unwrap();
    assert!(names(&spool.incidents_dir()).is_empty());
}

#[test]
fn half_written_dump_is_deleted_only_when_its_writer_is_gone() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    let live = stage_files(&spool, "live", 100);
    let dead = stage_files(&spool, "dead", 100);
    drop(dead); // the writer died: its lock is released
    let g = spool.lock().unwrap();
    let rec = g.recover(&mut good).unwrap();
    assert_eq!(rec.half_written_deleted, 1);
    assert_eq!(names(&env.root.join("staging")), vec!["live".to_string()]);
    assert_eq!(spool.state().pending.losses, 1);
    drop(g);
    spool.commit(live, info("x")).unwrap();
    assert!(spool.incident_dir("live").join("incident.json").exists());
}

#[test]
fn analysis_attempts_count_across_launches_then_upload_without_report() {
    let env = Env::new();
    let q = Quotas {
        max_analysis_attempts: 3,
        ..Quotas::default()
    };
    add(&env.spool(q.clone()), "b1", 100);
    let mut calls = 0;
    for launch in 1..=5 {
        let spool = env.spool(q.clone()); // a new process
        let g = spool.lock().unwrap();
        g.recover(&mut |_: &AnalysisJob| {
            calls += 1;
            Err("analyser crashed".to_string())
        })
        .unwrap();
        let inc = spool.read_incident("b1").unwrap();
        if launch < 3 {
            assert_eq!((inc.state, inc.analysis_attempts), (State::Dumped, launch));
        } else {
            assert_eq!((inc.state, inc.analysis_attempts), (State::Analysed, 3));
            assert_eq!(inc.analysis_error.as_deref(), Some("analyser crashed"));
        }
    }
    assert_eq!(calls, 3);
    // A crash *during* analysis (the attempt is counted before it starts).
    add(&env.spool(q.clone()), "b2", 100);
    let spool = env.spool(q.clone());
    let g = spool.lock().unwrap();
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        g.recover(&mut |_: &AnalysisJob| -> std::result::Result<(), String> {
            panic!("simulated crash inside the analyser")
        })
    }));
    assert_eq!(spool.read_incident("b2").unwrap().analysis_attempts, 1);
    let inc = g.plan_upload("b1").unwrap();
    assert!(inc.uploads.iter().all(|u| u.kind != FileKind::Report));
    assert!(inc.uploads.iter().any(|u| u.kind == FileKind::MiniDumpGz));
}

#[test]
fn unknown_files_are_quarantined_and_logged_never_deleted() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    add(&spool, "c1", 100);
    std::fs::write(spool.incident_dir("c1").join("surprise.bin"), b"keep me").unwrap();
    std::fs::write(spool.incidents_dir().join("stray.txt"), b"stray").unwrap();
    std::fs::create_dir_all(spool.incidents_dir().join("no-meta")).unwrap();
    std::fs::write(spool.incidents_dir().join("no-meta/mini.hprof"), b"x").unwrap();
    let g = spool.lock().unwrap();
    let rec = g.recover(&mut good).unwrap();
    assert_eq!(rec.quarantined, 2, "{rec:?}");
    assert_eq!(names(&spool.incidents_dir()), vec!["c1".to_string()]);
    let q = names(&spool.quarantine_dir());
    assert_eq!(q.len(), 3, "{q:?}");
    assert!(q.iter().any(|n| n.ends_with("c1-surprise.bin")));
    let kept = std::fs::read(
        spool
            .quarantine_dir()
            .join(q.iter().find(|n| n.ends_with("surprise.bin")).unwrap()),
    )
    .unwrap();
    assert_eq!(kept, b"keep me");
    assert_eq!(spool.state().pending.losses, 3);
    assert_eq!(spool.read_incident("c1").unwrap().state, State::Analysed);
}

#[test]
fn flipped_bits_in_incident_json_are_detected_and_counted() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    add(&spool, "old", 100);
    add(&spool, "victim", 100);
    let p = spool.incident_dir("victim").join("incident.json");
    let orig = std::fs::read(&p).unwrap();
    let old_before = std::fs::read(spool.incident_dir("old").join("incident.json")).unwrap();
    let total_bits = orig.len() * 8;
    let mut detected = 0;
    for bit in (0..total_bits).step_by(3) {
        let mut b = orig.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        std::fs::write(&p, &b).unwrap();
        match spool.read_incident("victim") {
            Err(Error::Corrupt { .. }) => detected += 1,
            Ok(i) => panic!("bit {bit} flipped and still read as {i:?}"),
            Err(e) => panic!("bit {bit}: unexpected {e}"),
        }
    }
    assert_eq!(detected, total_bits.div_ceil(3));
    // Recovery moves the corrupt incident aside, counts the loss, leaves the old one intact.
    let mut b = orig.clone();
    b[orig.len() / 2] ^= 0x10;
    std::fs::write(&p, &b).unwrap();
    let g = spool.lock().unwrap();
    let rec = g.recover(&mut good).unwrap();
    assert_eq!(rec.quarantined, 1);
    assert_eq!(g.ids().unwrap(), vec!["old".to_string()]);
    assert_eq!(spool.state().pending.losses, 1);
    assert!(spool.state().pending.loss_records[0]
        .what
        .contains("unreadable"));
    assert_eq!(spool.read_incident("old").unwrap().state, State::Analysed);
    let _ = old_before;
}

#[test]
fn torn_incident_json_is_corrupt_not_trusted() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    add(&spool, "t1", 100);
    let p = spool.incident_dir("t1").join("incident.json");
    let orig = std::fs::read(&p).unwrap();
    for cut in [0, 1, orig.len() / 3, orig.len() - 1] {
        std::fs::write(&p, &orig[..cut]).unwrap();
        assert!(matches!(
            spool.read_incident("t1"),
            Err(Error::Corrupt { .. })
        ));
    }
}

/// Run `op` with a fault at every write point it has; after each, a clean recovery must leave
/// the old incidents intact and the spool consistent, and nothing may panic.
fn every_write_point(
    name: &str,
    setup: impl Fn(&Spool, &ManualClock),
    op: impl Fn(&Spool) -> std::result::Result<(), String>,
) {
    for fault in [Fault::NoSpace, Fault::Io, Fault::Torn] {
        for sticky in [false, true] {
            let mut i = 0;
            loop {
                let env = Env::new();
                let q = Quotas::default();
                let spool = env.spool(q.clone());
                add(&spool, "old-0", 3000);
                {
                    let g = spool.lock().unwrap();
                    g.recover(&mut good).unwrap();
                    g.plan_upload("old-0").unwrap();
                }
                add(&spool, "old-1", 3000);
                setup(&spool, &env.clock);
                let before0 =
                    std::fs::read(spool.incident_dir("old-0").join("incident.json")).unwrap();
                env.fs.fail_at(i, fault, sticky);
                let _ = op(&spool);
                let tripped = env.fs.tripped();
                env.fs.heal();
                // A new launch on a healthy disk.
                let spool2 = env.spool(q.clone());
                let g = spool2.lock().unwrap();
                g.recover(&mut good).unwrap();
                let ids = g.ids().unwrap();
                assert!(
                    ids.contains(&"old-0".to_string()) && ids.contains(&"old-1".to_string()),
                    "{name} {fault:?} sticky={sticky} point {i}: old incidents lost: {ids:?}"
                );
                let after0 =
                    std::fs::read(spool2.incident_dir("old-0").join("incident.json")).unwrap();
                assert_eq!(before0, after0, "{name}: old-0 changed at point {i}");
                for id in &ids {
                    let inc = spool2.read_incident(id).unwrap();
                    if inc.state == State::Uploading {
                        // Every planned file is present and matches its hash.
                        for u in &inc.uploads {
                            let (sha, n) = hash_file(
                                &RealFs,
                                &spool2.incident_dir(id).join(u.kind.file_name()),
                            )
                            .unwrap();
                            assert_eq!(
                                (sha, n),
                                (u.sha256.clone(), u.size),
                                "{name} {id} point {i}"
                            );
                        }
                    }
                    let plan = g.plan_upload(id);
                    assert!(
                        plan.is_ok() || inc.state == State::Rejected,
                        "{name} {id}: {plan:?}"
                    );
                }
                if !tripped {
                    break;
                }
                i += 1;
                assert!(i < 500, "{name}: too many write points");
            }
            assert!(i > 3, "{name}: only {i} write points found");
        }
    }
}

#[test]
fn faults_at_every_write_point_of_commit() {
    every_write_point(
        "commit",
        |_, _| {},
        |s| {
            let st = s.stage_with_id("new").map_err(|e| e.to_string())?;
            std::fs::write(st.path(FileKind::MiniDump), vec![7u8; 3000]).unwrap();
            s.commit(st, info("new"))
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
    );
}

#[test]
fn faults_at_every_write_point_of_recovery_and_analysis() {
    every_write_point(
        "recover",
        |_, _| {},
        |s| {
            let g = s.lock().map_err(|e| e.to_string())?;
            g.recover(&mut good).map(|_| ()).map_err(|e| e.to_string())
        },
    );
}

#[test]
fn faults_at_every_write_point_of_planning_and_eviction() {
    every_write_point(
        "plan",
        |s, clock| {
            // An incident old enough for the age quota to evict: watched for 15 days, the
            // others just now.
            clock.set(T0 - 15 * 24 * 3600 * 1000);
            add(s, "ancient", 2000);
            clock.set(T0);
            let days = 15 * 24 * 3600 * 1000;
            s.update_state(|st| {
                let w = st.watch.get_or_insert_with(Watch::default);
                w.wall_ms = T0;
                w.watched_ms += days;
                for v in st.first_seen.values_mut() {
                    *v += days;
                }
                st.first_seen.insert("ancient".into(), w.watched_ms - days);
            })
            .unwrap();
            let g = s.lock().unwrap();
            g.recover(&mut good).unwrap();
            assert!(!s.incident_dir("ancient").exists(), "not evicted by age");
        },
        |s| {
            let g = s.lock().map_err(|e| e.to_string())?;
            g.plan_upload("old-1").map_err(|e| e.to_string())?;
            g.enforce_quotas(0, 0).map_err(|e| e.to_string())?;
            Ok(())
        },
    );
}

#[test]
fn commit_failure_counts_the_loss_and_keeps_old_incidents() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    add(&spool, "keep", 100);
    let st = stage_files(&spool, "lost", 100);
    env.fs.fail_at(0, Fault::NoSpace, true);
    let e = spool.commit(st, info("x")).unwrap_err();
    assert!(e.to_string().contains("No space left"), "{e}");
    env.fs.heal();
    // The loss is in memory even though spool.json could not be written then.
    assert_eq!(spool.state().pending.losses, 1);
    assert!(!env.root.join("staging/lost").exists());
    let g = spool.lock().unwrap();
    g.recover(&mut good).unwrap();
    assert_eq!(g.ids().unwrap(), vec!["keep".to_string()]);
    drop(g);
    // Persisted with the next state change.
    spool.update_state(|_| {}).unwrap();
    let again = env.spool(Quotas::default());
    assert_eq!(again.state().pending.losses, 1);
}

#[test]
fn quotas_evict_oldest_first_and_count_it_in_the_next_report() {
    let env = Env::new();
    let q = Quotas {
        max_count: 3,
        max_total_bytes: 30_000,
        ..Quotas::default()
    };
    let spool = env.spool(q);
    for i in 0..5 {
        add(&spool, &format!("q{i}"), 5000);
        env.clock.advance(Duration::from_secs(60));
    }
    let g = spool.lock().unwrap();
    assert_eq!(g.ids().unwrap(), vec!["q2", "q3", "q4"]);
    let st = spool.state();
    assert_eq!(st.pending.evictions, 2);
    assert_eq!(st.pending.eviction_records[0].id, "q0");
    assert_eq!(st.pending.eviction_records[0].quota, "count");
    drop(g);
    // Bytes: a 20 kB incident pushes out the two oldest.
    add(&spool, "big", 20_000);
    let g = spool.lock().unwrap();
    assert_eq!(g.ids().unwrap(), vec!["big", "q4"]);
    // Age: 14 days later (watched: a pass each day, the first right after the commit, as the
    // uploader's is) everything older goes.
    g.enforce_quotas(0, 0).unwrap();
    for _ in 0..14 {
        env.clock.advance(Duration::from_secs(24 * 3600));
        g.enforce_quotas(0, 0).unwrap();
    }
    env.clock.advance(Duration::from_secs(1));
    drop(g);
    add(&spool, "fresh", 100);
    let g = spool.lock().unwrap();
    assert_eq!(g.ids().unwrap(), vec!["fresh"]);
    let st = spool.state();
    assert_eq!(st.pending.evictions, 6);
    assert!(st.pending.eviction_records.iter().any(|e| e.quota == "age"));
    assert!(st
        .pending
        .eviction_records
        .iter()
        .any(|e| e.quota == "bytes"));
    // The counts go out with the next planned report, then start again from zero.
    g.recover(&mut good).unwrap();
    let inc = g.plan_upload("fresh").unwrap();
    assert_eq!(inc.accounting.evictions, 6);
    let meta: Value = serde_json::from_slice(
        &std::fs::read(spool.incident_dir("fresh").join("meta.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["evictions"], 6);
    assert_eq!(meta["evicted"][0]["id"], "q0");
    assert_eq!(spool.state().pending.evictions, 0);
    assert_eq!(spool.state().evictions_total, 6);
    // Too big for the spool at all: refused, counted.
    drop(g);
    let st = stage_files(&spool, "huge", 50_000);
    assert!(matches!(
        spool.commit(st, info("x")),
        Err(Error::TooBig { .. })
    ));
    assert_eq!(spool.state().pending.losses, 1);
}

/// A kill between an eviction's rename of a quarantined item to `.trash-NAME` and its removal
/// leaves that entry behind, its eviction already recorded. The next quota check removes it
/// without taking it for a quarantined item to evict (and count) a second time.
#[test]
fn an_eviction_cut_short_in_quarantine_is_not_counted_twice() {
    let env = Env::new();
    let spool = env.spool(Quotas {
        max_count: 1,
        ..Quotas::default()
    });
    add(&spool, "keep", 100);
    let trash = spool
        .quarantine_dir()
        .join(".trash-1700000000000-x-mini.hprof");
    std::fs::create_dir_all(&trash).unwrap();
    std::fs::write(trash.join("mini.hprof"), b"x").unwrap();
    let before = spool.state();
    let g = spool.lock().unwrap();
    assert_eq!(g.enforce_quotas(0, 0).unwrap(), 0);
    assert!(!trash.exists());
    assert_eq!(g.ids().unwrap(), vec!["keep"]);
    let after = spool.state();
    assert_eq!(after.evictions_total, before.evictions_total);
    assert_eq!(after.pending.evictions, before.pending.evictions);
}

/// Counts frozen into a planned incident's meta.json are not lost when that incident goes
/// before the server acknowledged the file: evicted, it hands them back to pending, and the
/// next planned report carries them. A planned file gone before its upload is given up alone.
#[test]
fn counts_a_planned_incident_carried_come_back_when_it_is_evicted() {
    let env = Env::new();
    let q = Quotas {
        max_count: 2,
        ..Quotas::default()
    };
    let spool = env.spool(q);
    for id in ["c0", "c1", "c2"] {
        add(&spool, id, 1000);
        env.clock.advance(Duration::from_secs(1));
    }
    let g = spool.lock().unwrap();
    g.recover(&mut good).unwrap();
    assert_eq!(spool.state().pending.evictions, 1, "c0 evicted");
    // c1 freezes that eviction into its meta.json; pending is empty again.
    let c1 = g.plan_upload("c1").unwrap();
    assert_eq!(c1.accounting.evictions, 1);
    assert_eq!(spool.state().pending.evictions, 0);
    // A planned file vanishes: recovery gives up that file alone (a loss); c1 keeps its other
    // files and the counts frozen into its meta.json.
    std::fs::remove_file(spool.incident_dir("c1").join(FileKind::Fds.file_name())).unwrap();
    g.recover(&mut good).unwrap();
    assert_eq!(g.ids().unwrap(), vec!["c1", "c2"]);
    let c1 = spool.read_incident("c1").unwrap();
    assert!(c1.uploads.iter().all(|u| u.kind != FileKind::Fds), "{c1:?}");
    assert_eq!(c1.accounting.evictions, 1);
    let st = spool.state();
    assert_eq!((st.pending.evictions, st.pending.losses), (0, 1));
    // c2 carries the loss; then newer incidents push c1 and c2 out before they are sent, and
    // what each had frozen comes back.
    let c2 = g.plan_upload("c2").unwrap();
    assert_eq!((c2.accounting.evictions, c2.accounting.losses), (0, 1));
    drop(g);
    for id in ["c3", "c4"] {
        env.clock.advance(Duration::from_secs(1));
        add(&spool, id, 1000);
    }
    let st = spool.state();
    assert!(!spool.incident_dir("c1").exists());
    assert!(!spool.incident_dir("c2").exists());
    // c0 comes back from c1, the loss from c2, and c1 and c2 themselves go.
    assert_eq!(st.pending.evictions, 3);
    assert_eq!(st.pending.losses, 1);
    let ids: Vec<&str> = st
        .pending
        .eviction_records
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    assert_eq!(ids, ["c0", "c1", "c2"]);
}

#[test]
fn one_lock_holder_at_a_time() {
    let env = Env::new();
    let a = env.spool(Quotas::default());
    let b = env.spool(Quotas::default());
    let g = a.lock().unwrap();
    assert!(matches!(b.lock(), Err(Error::Locked(_))));
    // Committing needs no lock.
    add(&b, "while-locked", 10);
    drop(g);
    let g = b.lock().unwrap();
    assert_eq!(g.ids().unwrap(), vec!["while-locked"]);
}

#[test]
fn corrupt_spool_json_resets_and_counts() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    spool.update_state(|s| s.retry_after_until_ms = 42).unwrap();
    let p = env.root.join("spool.json");
    let mut b = std::fs::read(&p).unwrap();
    b[20] ^= 4;
    std::fs::write(&p, b).unwrap();
    let again = env.spool(Quotas::default());
    let st = again.state();
    assert_eq!(st.retry_after_until_ms, 0);
    assert_eq!(st.pending.losses, 1);
}

#[test]
fn spool_is_shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Spool>();
    send_sync::<Quotas>();
}

/// incident.json exactly as the spool wrote it before it recorded the files it saw written
/// (no `written` field): it must still load, keep its seal, and plan without a `missing` list.
#[test]
fn records_written_before_the_file_list_still_load_and_plan() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    let dir = spool.incident_dir("legacy");
    std::fs::create_dir_all(&dir).unwrap();
    let body = concat!(
        r#"{"version":1,"id":"legacy","createdMs":1800000000000,"reason":"heap","samples":[],"#,
        r#""runningInfo":{},"policyVersion":"p1","state":"analysed","analysisAttempts":1,"#,
        r#""analysisError":null,"uploadAttempts":0,"nextAttemptMs":0,"uploads":[],"#,
        r#""rejected":null,"accounting":{"evictions":0,"evictedBytes":0,"losses":0,"#,
        r#""evictionRecords":[],"lossRecords":[]}}"#
    );
    let sha = hex::encode(Sha256::digest(body.as_bytes()));
    let sealed = format!(r#"{{"body":{body},"sha256":"{sha}"}}"#);
    std::fs::write(dir.join("incident.json"), &sealed).unwrap();
    std::fs::write(dir.join("fds.txt"), b"0 /dev/null\n").unwrap();
    let inc = spool.read_incident("legacy").unwrap();
    assert_eq!(inc.state, State::Analysed);
    let g = spool.lock().unwrap();
    assert_eq!(g.recover(&mut good).unwrap().quarantined, 0);
    let inc = g.plan_upload("legacy").unwrap();
    let kinds: Vec<_> = inc.uploads.iter().map(|u| u.kind).collect();
    assert_eq!(kinds, vec![FileKind::Meta, FileKind::Fds]);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
    // Nothing is known to be expected: not checked, which is not the same as nothing missing.
    assert!(meta["missing"].is_null(), "{meta}");
    assert_eq!(spool.read_incident("legacy").unwrap(), inc);
}

use testkit::warnings;

fn meta_of(spool: &Spool, id: &str) -> Value {
    let p = spool.incident_dir(id).join("meta.json");
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn kinds(inc: &Incident) -> Vec<FileKind> {
    inc.uploads.iter().map(|u| u.kind).collect()
}

/// A heap incident (a mini dump, no inventory) analysed, then its report deleted before the
/// upload is planned: it still goes up, and meta.json and a warning say the report is missing.
#[test]
fn a_report_lost_after_analysis_is_named_missing_in_meta() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    let st = spool.stage_with_id("heap1").unwrap();
    std::fs::write(st.path(FileKind::MiniDump), vec![7u8; 1000]).unwrap();
    spool.commit(st, info("heap")).unwrap();
    let g = spool.lock().unwrap();
    assert_eq!(g.recover(&mut good).unwrap().analysed, 1);
    std::fs::remove_file(spool.incident_dir("heap1").join("report.json")).unwrap();
    let (inc, logs) = warnings(|| g.plan_upload("heap1").unwrap());
    assert_eq!(inc.state, State::Uploading);
    assert_eq!(kinds(&inc), vec![FileKind::Meta, FileKind::MiniDumpGz]);
    assert_eq!(
        meta_of(&spool, "heap1")["missing"],
        serde_json::json!(["report.json"])
    );
    assert!(
        logs.contains("WARN") && logs.contains("heap1") && logs.contains("report.json"),
        "{logs}"
    );
}

/// A thread incident whose mini dump and inventory vanished after analysis: both are named, by
/// the names the server would have received.
#[test]
fn a_lost_mini_dump_and_inventory_are_named_missing_in_meta() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    let st = spool.stage_with_id("thr1").unwrap();
    std::fs::write(st.path(FileKind::MiniDump), vec![7u8; 1000]).unwrap();
    std::fs::write(st.path(FileKind::Threads), b"main\n").unwrap();
    spool.commit(st, info("threads")).unwrap();
    let g = spool.lock().unwrap();
    g.recover(&mut good).unwrap();
    let d = spool.incident_dir("thr1");
    std::fs::remove_file(d.join("mini.hprof")).unwrap();
    std::fs::remove_file(d.join("threads.txt")).unwrap();
    let (inc, logs) = warnings(|| g.plan_upload("thr1").unwrap());
    assert_eq!(kinds(&inc), vec![FileKind::Meta, FileKind::Report]);
    assert_eq!(
        meta_of(&spool, "thr1")["missing"],
        serde_json::json!(["threads.txt", "mini.hprof.gz"])
    );
    assert!(
        logs.contains("WARN") && logs.contains("mini.hprof.gz"),
        "{logs}"
    );
}

/// Files an incident never had are not missing: an fd incident whose mini dump was abandoned
/// (only the full dump, analysed and then deleted, never uploaded), and an incident whose
/// analysis gave up (no report).
#[test]
fn files_an_incident_never_had_are_not_missing() {
    let env = Env::new();
    let q = Quotas {
        max_analysis_attempts: 1,
        ..Quotas::default()
    };
    let spool = env.spool(q);
    let st = spool.stage_with_id("fd1").unwrap();
    std::fs::write(st.path(FileKind::FullDump), vec![7u8; 1000]).unwrap();
    std::fs::write(st.path(FileKind::Fds), b"0 /dev/null\n").unwrap();
    spool.commit(st, info("fd")).unwrap();
    let st = spool.stage_with_id("gaveup").unwrap();
    std::fs::write(st.path(FileKind::MiniDump), vec![7u8; 1000]).unwrap();
    spool.commit(st, info("heap")).unwrap();
    let g = spool.lock().unwrap();
    let rec = g
        .recover(&mut |j: &AnalysisJob| {
            if j.id == "fd1" {
                good(j)
            } else {
                Err("analyser crashed".to_string())
            }
        })
        .unwrap();
    assert_eq!((rec.analysed, rec.analysis_given_up), (1, 1));
    assert!(!spool.incident_dir("fd1").join("dump.hprof").exists());
    let (plans, logs) = warnings(|| {
        (
            g.plan_upload("fd1").unwrap(),
            g.plan_upload("gaveup").unwrap(),
        )
    });
    assert_eq!(
        kinds(&plans.0),
        vec![FileKind::Meta, FileKind::Report, FileKind::Fds]
    );
    assert_eq!(kinds(&plans.1), vec![FileKind::Meta, FileKind::MiniDumpGz]);
    for id in ["fd1", "gaveup"] {
        assert_eq!(
            meta_of(&spool, id)["missing"],
            serde_json::json!([]),
            "{id}"
        );
    }
    assert!(!logs.contains("missing"), "{logs}");
}

/// An incident committed without a dump, with the reason why, goes straight to `analysed`: no
/// analysis is attempted, recovery (in this process or a later one) keeps it, and its plan
/// uploads meta.json (saying why there is no dump) and its inventory. Without a reason, a
/// staging with neither a dump nor a report is still refused.
#[test]
fn an_incident_without_a_dump_goes_up_with_the_reason_why() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    let st = spool.stage_with_id("nodump").unwrap();
    std::fs::write(st.path(FileKind::Fds), b"0 /dev/null\n").unwrap();
    spool
        .commit_without_dump(st, info("fd"), "dump refused: 40 MB free".into())
        .unwrap();
    let st = spool.stage_with_id("empty").unwrap();
    std::fs::write(st.path(FileKind::Fds), b"0 /dev/null\n").unwrap();
    let e = spool.commit(st, info("fd")).unwrap_err().to_string();
    assert!(e.contains("why there is no dump"), "{e}");
    assert!(!spool.incident_dir("empty").exists());

    let inc = spool.read_incident("nodump").unwrap();
    assert_eq!(inc.state, State::Analysed);
    assert_eq!(inc.dump_error.as_deref(), Some("dump refused: 40 MB free"));
    // A later launch's recovery: nothing to analyse, nothing quarantined.
    let spool = env.spool(Quotas::default());
    let g = spool.lock().unwrap();
    let rec = g
        .recover(&mut |j: &AnalysisJob| Err(format!("analysed {}", j.id)))
        .unwrap();
    assert_eq!(
        (rec.analysed, rec.analysis_failed, rec.quarantined),
        (0, 0, 0),
        "{rec:?}"
    );
    let plan = g.plan_upload("nodump").unwrap();
    assert_eq!(kinds(&plan), vec![FileKind::Meta, FileKind::Fds]);
    let meta = meta_of(&spool, "nodump");
    assert_eq!(meta["dumpError"], "dump refused: 40 MB free");
    assert_eq!(meta["missing"], serde_json::json!([]));
    assert_eq!(meta["analysisAttempts"], 0);
}

/// A file system that runs a recovery (as another thread or process of the app would, on a
/// spool of its own over the same directory) right after the first directory is created in
/// `staging/`: between a writer's mkdir and its lock.
#[derive(Debug)]
struct RecoverAfterStagingMkdir {
    root: PathBuf,
    clock: Arc<ManualClock>,
    fired: std::sync::atomic::AtomicBool,
}

impl Fs for RecoverAfterStagingMkdir {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.create_dir_all(path)?;
        if path.parent() == Some(self.root.join("staging").as_path())
            && !self.fired.swap(true, Ordering::SeqCst)
        {
            let other = Spool::with(
                &self.root,
                Quotas::default(),
                Arc::new(RealFs),
                self.clock.clone(),
            )
            .unwrap();
            other.lock().unwrap().recover(&mut good).unwrap();
        }
        Ok(())
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        RealFs.read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        RealFs.create(path)
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn FsRead>> {
        RealFs.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        RealFs.sync_dir(path)
    }
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        RealFs.sync_file(path)
    }
    fn list(&self, path: &Path) -> io::Result<Vec<Entry>> {
        RealFs.list(path)
    }
    fn stat(&self, path: &Path) -> io::Result<Entry> {
        RealFs.stat(path)
    }
}

/// The race behind a flaky pipeline test ("staging/ID/.lock: flock failed: No such file or
/// directory"): a recovery that lists `staging/` after a writer created its directory and
/// before the writer locked it took the directory for a dead writer's and deleted it (counting
/// a loss), so the writer's stage failed. Staging must succeed, and nothing is counted lost.
#[test]
fn a_recovery_between_a_stagings_mkdir_and_its_lock_takes_nothing_from_the_writer() {
    let env = Env::new();
    let fs = RecoverAfterStagingMkdir {
        root: env.root.clone(),
        clock: env.clock.clone(),
        fired: false.into(),
    };
    let spool = Spool::with(
        &env.root,
        Quotas::default(),
        Arc::new(fs),
        env.clock.clone(),
    )
    .unwrap();
    let st = spool.stage().expect("staging while a recovery runs");
    std::fs::write(st.path(FileKind::MiniDump), b"mini").unwrap();
    let id = spool.commit(st, info("heap")).unwrap();
    assert!(spool.incident_dir(&id).join("mini.hprof").exists());
    assert_eq!(
        spool.state().pending.losses,
        0,
        "{:?}",
        spool.state().pending
    );
}

/// The same race, undirected: one thread stages and commits while another recovers in a loop.
#[test]
fn staging_while_another_spool_recovers_in_a_loop_never_fails() {
    let env = Env::new();
    let spool = Spool::with(
        &env.root,
        Quotas {
            max_count: 1000,
            ..Quotas::default()
        },
        Arc::new(RealFs),
        env.clock.clone(),
    )
    .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let recoverer = {
        let (root, clock, stop) = (env.root.clone(), env.clock.clone(), stop.clone());
        std::thread::spawn(move || {
            let other = Spool::with(
                &root,
                Quotas {
                    max_count: 1000,
                    ..Quotas::default()
                },
                Arc::new(RealFs),
                clock,
            )
            .unwrap();
            let mut passes = 0u32;
            while !stop.load(Ordering::SeqCst) {
                if let Ok(g) = other.lock() {
                    g.recover(&mut good).unwrap();
                    passes += 1;
                }
            }
            passes
        })
    };
    let mut failures = Vec::new();
    for _ in 0..300 {
        match spool.stage() {
            Ok(st) => spool.discard(st),
            Err(e) => failures.push(e.to_string()),
        }
    }
    stop.store(true, Ordering::SeqCst);
    let passes = recoverer.join().unwrap();
    assert!(
        failures.is_empty(),
        "{} of 300 stagings failed ({passes} recoveries), first: {}",
        failures.len(),
        failures[0]
    );
    assert_eq!(spool.state().pending.losses, 0);
}

/// A file system that records the creations and file fsyncs it is asked for, in order.
#[derive(Debug, Default)]
struct Recording(Mutex<Vec<(&'static str, PathBuf)>>);

impl Recording {
    fn log(&self, op: &'static str, p: &Path) {
        self.0.lock().unwrap().push((op, p.to_path_buf()));
    }
}

impl Fs for Recording {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.create_dir_all(path)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        RealFs.read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.log("create", path);
        RealFs.create(path)
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn FsRead>> {
        RealFs.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        RealFs.sync_dir(path)
    }
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        self.log("sync", path);
        RealFs.sync_file(path)
    }
    fn list(&self, path: &Path) -> io::Result<Vec<Entry>> {
        RealFs.list(path)
    }
    fn stat(&self, path: &Path) -> io::Result<Entry> {
        RealFs.stat(path)
    }
}

/// The files a writer staged (a dump, `fds.txt`, `threads.txt`, written with plain writes) are
/// fsynced before the `incident.json` that makes them part of a committed incident: after a
/// power cut they could otherwise be empty beside a durable record.
#[test]
fn staged_files_are_fsynced_before_the_record_that_commits_them() {
    let env = Env::new();
    let fs = Arc::new(Recording::default());
    let spool = Spool::with(&env.root, Quotas::default(), fs.clone(), env.clock.clone()).unwrap();
    let st = stage_files(&spool, "synced", 100);
    spool.commit(st, info("heap")).unwrap();
    let ops = fs.0.lock().unwrap().clone();
    let record = ops
        .iter()
        .position(|(op, p)| {
            *op == "create"
                && p.file_name()
                    .is_some_and(|n| fs::is_tmp_of(&n.to_string_lossy(), "incident.json"))
        })
        .expect("incident.json written");
    for name in ["mini.hprof", "fds.txt", "threads.txt"] {
        let synced = ops
            .iter()
            .position(|(op, p)| *op == "sync" && p.file_name().is_some_and(|n| n == name));
        assert!(
            synced.is_some_and(|k| k < record),
            "{name} not fsynced before incident.json: {ops:?}"
        );
    }
}

/// The age quota and a wrong clock. An incident committed while the clock said 2000 (an RTC
/// reset before network time) must not be evicted as 26 years old when the clock is set right,
/// nor must everything queued when the date jumps 14 days forward. Time the spool watched
/// still ages an incident out: 15 days of daily passes evict it.
#[test]
fn a_clock_set_right_or_jumping_forward_evicts_nothing_but_watched_days_do() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    env.clock.set(946_684_800_000); // 2000-01-01, before network time
    let st = spool.stage().unwrap();
    std::fs::write(st.path(FileKind::Report), b"{}").unwrap();
    let early = spool.commit(st, info("early")).unwrap();
    env.clock.set(T0); // network time arrives
    let g = spool.lock().unwrap();
    assert_eq!(
        g.enforce_quotas(0, 0).unwrap(),
        0,
        "set right: {:?}",
        spool.state().pending
    );
    drop(g);
    add(&spool, "queued", 100);
    env.clock.set(T0 + 14 * 86_400_000 + 3_600_000); // the date jumps 14 days and an hour
    let g = spool.lock().unwrap();
    assert_eq!(
        g.enforce_quotas(0, 0).unwrap(),
        0,
        "jump: {:?}",
        spool.state().pending
    );
    assert_eq!(g.ids().unwrap().len(), 2);
    // Fifteen days, watched by a pass each day: both go.
    let mut evicted = 0;
    for _ in 0..15 {
        env.clock.advance(Duration::from_secs(86_400));
        evicted += g.enforce_quotas(0, 0).unwrap();
    }
    assert_eq!(evicted, 2, "{:?}", g.ids().unwrap());
    let quotas: Vec<_> = spool
        .state()
        .pending
        .eviction_records
        .iter()
        .map(|e| (e.id.clone(), e.quota.clone()))
        .collect();
    assert!(quotas.contains(&(early, "age".into())), "{quotas:?}");
}

mod accounting;
mod edges;
mod read;
mod recovery;
