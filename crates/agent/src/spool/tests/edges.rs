//! Spool rules at their edges that `cargo mutants` found unpinned (issue 44).

use super::*;

/// A file of an incident that is there but cannot be read is an error of the plan (named by
/// path and operation), not a missing file: the incident stays analysed, to be planned again.
#[test]
fn an_unreadable_file_fails_the_plan_instead_of_being_called_missing() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    let st = spool.stage_with_id("heap1").unwrap();
    std::fs::write(st.path(FileKind::MiniDump), vec![7u8; 1000]).unwrap();
    spool.commit(st, info("heap")).unwrap();
    let g = spool.lock().unwrap();
    assert_eq!(g.recover(&mut good).unwrap().analysed, 1);
    // A directory where report.json should be: it opens, but reading it fails (EISDIR).
    let report = spool.incident_dir("heap1").join("report.json");
    std::fs::remove_file(&report).unwrap();
    std::fs::create_dir(&report).unwrap();
    match g.plan_upload("heap1") {
        Err(Error::Io { path, op, .. }) => assert_eq!((path, op), (report, "hash")),
        other => panic!("expected a hash error for report.json, got {other:?}"),
    }
    assert_eq!(spool.read_incident("heap1").unwrap().state, State::Analysed);
}

/// A quota pass saves the watched time when the clock moved a minute or more (or back), not on
/// every pass: the uploader runs one per attempt, and each save is a write, two fsyncs and a
/// rename.
#[test]
fn the_watched_time_is_saved_at_most_once_a_minute() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    add(&spool, "w1", 100);
    let g = spool.lock().unwrap();
    // Write points (creates, writes, fsyncs, renames) so far: a save adds some.
    let writes = || env.fs.points();
    g.enforce_quotas(0, 0).unwrap();
    let first = writes();
    g.enforce_quotas(0, 0).unwrap();
    assert_eq!(writes(), first, "saved again with the clock where it was");
    env.clock.advance(Duration::from_secs(30));
    g.enforce_quotas(0, 0).unwrap();
    assert_eq!(writes(), first, "saved again after 30 s");
    env.clock.advance(Duration::from_secs(30));
    g.enforce_quotas(0, 0).unwrap();
    assert!(writes() > first, "not saved a minute after the last save");
    assert_eq!(
        spool.state().watch.map(|w| (w.wall_ms, w.watched_ms)),
        Some((T0 + 60_000, 60_000))
    );
}

/// What the quotas count in `incidents/` is the committed incidents: a `.trash-ID` left by a
/// deletion cut short is neither counted nor evicted (its removal is recovery's job).
#[test]
fn a_deletion_left_in_incidents_is_not_an_incident_to_the_quotas() {
    let env = Env::new();
    let q = Quotas {
        max_count: 1,
        ..Quotas::default()
    };
    let spool = env.spool(q);
    add(&spool, "only", 100);
    let trash = spool.incidents_dir().join(".trash-gone");
    std::fs::create_dir_all(&trash).unwrap();
    std::fs::write(trash.join("incident.json"), b"{}").unwrap();
    let g = spool.lock().unwrap();
    assert_eq!(g.enforce_quotas(0, 0).unwrap(), 0);
    assert_eq!(g.ids().unwrap(), vec!["only"]);
    assert_eq!(spool.state().pending.evictions, 0);
}

/// "Over a quota" is strict: an incident watched for exactly `max_age` stays, one watched a
/// millisecond longer goes; a spool holding exactly `max_total_bytes` evicts nothing, one byte
/// more evicts the oldest.
#[test]
fn exactly_at_a_quota_is_not_over_it() {
    let env = Env::new();
    let q = Quotas {
        max_age: Duration::from_secs(3600),
        ..Quotas::default()
    };
    let spool = env.spool(q.clone());
    add(&spool, "aged", 100);
    let g = spool.lock().unwrap();
    g.enforce_quotas(0, 0).unwrap();
    env.clock.advance(Duration::from_secs(3600));
    assert_eq!(
        g.enforce_quotas(0, 0).unwrap(),
        0,
        "evicted at exactly max_age"
    );
    env.clock.advance(Duration::from_millis(1));
    assert_eq!(g.enforce_quotas(0, 0).unwrap(), 1);
    assert_eq!(spool.state().pending.eviction_records[0].quota, "age");
    // And spool.json no longer watches it.
    assert!(!spool.state().first_seen.contains_key("aged"));

    add(&spool, "sized", 100);
    let size = fs::dir_size(&RealFs, &spool.incident_dir("sized")).unwrap();
    let room = q.max_total_bytes - size;
    assert_eq!(
        g.enforce_quotas(room, 0).unwrap(),
        0,
        "evicted at exactly max_total_bytes"
    );
    assert_eq!(g.enforce_quotas(room + 1, 0).unwrap(), 1);
    assert_eq!(spool.state().pending.eviction_records[1].quota, "bytes");
}

/// `spool.json` read by two spools on one data dir (two processes): each sees the other's
/// changes; a deleted file reads as the empty state, an unreadable one as the last known state.
#[test]
fn spool_json_is_reread_when_it_changes_and_kept_when_unreadable() {
    let env = Env::new();
    let a = env.spool(Quotas::default());
    let b = env.spool(Quotas::default());
    a.update_state(|s| s.retry_after_until_ms = 1).unwrap();
    assert_eq!(b.state().retry_after_until_ms, 1);
    a.update_state(|s| s.retry_after_until_ms = 2).unwrap();
    assert_eq!(b.state().retry_after_until_ms, 2, "b kept a stale copy");
    // Unreadable (a directory in its place): the last known state, not an empty one.
    let p = env.root.join("spool.json");
    std::fs::remove_file(&p).unwrap();
    std::fs::create_dir(&p).unwrap();
    assert_eq!(b.state().retry_after_until_ms, 2, "unreadable");
    // Gone: the empty state.
    std::fs::remove_dir(&p).unwrap();
    assert_eq!(b.state().retry_after_until_ms, 0, "deleted");
}

/// Every loss counts in `losses_total`, the lifetime count `status.json` shows: a corrupt
/// `spool.json` and an incident too big for the spool.
#[test]
fn losses_count_in_the_lifetime_total() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    spool.update_state(|s| s.retry_after_until_ms = 42).unwrap();
    let p = env.root.join("spool.json");
    let mut body = std::fs::read(&p).unwrap();
    body[20] ^= 4;
    std::fs::write(&p, body).unwrap();
    let again = env.spool(Quotas {
        max_total_bytes: 10_000,
        ..Quotas::default()
    });
    assert_eq!(again.state().losses_total, 1, "corrupt spool.json");
    let st = stage_files(&again, "huge", 50_000);
    assert!(matches!(
        again.commit(st, info("x")),
        Err(Error::TooBig { .. })
    ));
    assert_eq!(again.state().losses_total, 2, "too big");
}
