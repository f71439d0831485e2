//! The spool's small parts at their edges (issue 44: survivors of `cargo mutants` in
//! `spool/mod.rs`): the counts of evictions and losses and their capped records, the time an
//! id starts with, the clocks.

use super::*;

fn eviction(n: u64, bytes: u64) -> Eviction {
    Eviction {
        id: format!("e{n}"),
        quota: "age".into(),
        bytes,
        created_ms: n,
        at_ms: n,
    }
}

fn loss(n: u64) -> Loss {
    Loss {
        what: "lost".into(),
        path: format!("l{n}"),
        bytes: n,
        at_ms: n,
    }
}

/// Every eviction and loss counts (and its bytes add up); the records stop at MAX_RECORDS,
/// the first ones kept.
#[test]
fn evictions_and_losses_count_all_and_keep_the_first_max_records() {
    let mut a = Accounting::default();
    assert!(a.is_empty());
    let n = MAX_RECORDS as u64 + 1;
    for i in 0..n {
        a.add_eviction(eviction(i, 100 + i));
    }
    assert!(!a.is_empty());
    assert_eq!(a.evictions, n);
    assert_eq!(a.evicted_bytes, (0..n).map(|i| 100 + i).sum::<u64>());
    assert_eq!(a.eviction_records.len(), MAX_RECORDS);
    assert_eq!(
        a.eviction_records[MAX_RECORDS - 1].id,
        format!("e{}", n - 2)
    );
    let mut b = Accounting::default();
    for i in 0..n {
        b.add_loss(loss(i));
    }
    assert!(!b.is_empty());
    assert_eq!((b.losses, b.evictions), (n, 0));
    assert_eq!(b.loss_records.len(), MAX_RECORDS);
    assert_eq!(b.loss_records[0].path, "l0");
}

/// Merging adds the counts and the bytes, and appends records up to MAX_RECORDS.
#[test]
fn merged_accountings_add_up_and_their_records_stay_capped() {
    let mut a = Accounting::default();
    a.add_eviction(eviction(1, 1000));
    a.add_loss(loss(1));
    let mut b = Accounting::default();
    b.add_eviction(eviction(2, 24));
    b.add_loss(loss(2));
    b.add_loss(loss(3));
    a.merge(b);
    assert_eq!(
        (a.evictions, a.evicted_bytes, a.losses),
        (2, 1024, 3),
        "{a:?}"
    );
    let ids: Vec<&str> = a.eviction_records.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["e1", "e2"]);
    let paths: Vec<&str> = a.loss_records.iter().map(|l| l.path.as_str()).collect();
    assert_eq!(paths, ["l1", "l2", "l3"]);

    // One short of the cap on each side; the other brings two of each: one fits.
    let mut full = Accounting::default();
    for i in 0..MAX_RECORDS as u64 - 1 {
        full.add_eviction(eviction(i, 1));
        full.add_loss(loss(i));
    }
    let mut two = Accounting::default();
    for i in 100..102 {
        two.add_eviction(eviction(i, 1));
        two.add_loss(loss(i));
    }
    full.merge(two);
    assert_eq!(
        (full.evictions, full.losses),
        (MAX_RECORDS as u64 + 1, MAX_RECORDS as u64 + 1)
    );
    assert_eq!(full.eviction_records.len(), MAX_RECORDS);
    assert_eq!(full.loss_records.len(), MAX_RECORDS);
    assert_eq!(full.eviction_records[MAX_RECORDS - 1].id, "e100");
    assert_eq!(full.loss_records[MAX_RECORDS - 1].path, "l100");
}

/// An accounting with only evictions, or only losses, is not empty.
#[test]
fn an_accounting_is_empty_only_without_evictions_and_losses() {
    let mut a = Accounting::default();
    a.add_eviction(eviction(1, 0));
    assert!(!a.is_empty());
    let mut b = Accounting::default();
    b.add_loss(loss(1));
    assert!(!b.is_empty());
}

/// An id made by `Spool::stage` gives its creation time (the age quota's, without reading
/// incident.json); any other id gives none.
#[test]
fn the_time_an_id_starts_with() {
    assert_eq!(
        id_time("1800000000123-4242-0badcafe"),
        Some(1_800_000_000_123)
    );
    assert_eq!(id_time("0000000000007-1-00000000"), Some(7));
    for other in [
        "1800000000123x4242-0badcafe",
        "18000000001x3-4242-0badcafe",
        "1800000000123",
        "heap1",
        "",
    ] {
        assert_eq!(id_time(other), None, "{other:?}");
    }
}

#[test]
fn the_system_clock_reads_the_time_and_the_manual_one_what_it_was_set_to() {
    let since = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    let before = since(SystemTime::now());
    let now = SystemClock.now_ms();
    let after = since(SystemTime::now());
    assert!(before <= now && now <= after, "{before} {now} {after}");
    let c = ManualClock::new(5);
    c.set(1_800_000_000_000);
    assert_eq!(c.now_ms(), 1_800_000_000_000);
    c.advance(Duration::from_millis(7));
    assert_eq!(c.now_ms(), 1_800_000_000_007);
}

/// Incident ids are letters, digits, `-`, `_` and `.`, not first: anything else could name
/// another directory.
#[test]
fn incident_ids_are_letters_digits_dashes_underscores_and_dots() {
    for ok in [
        "a",
        "heap_1",
        "heap-1",
        "heap.1",
        "A.b_c-9",
        &"x".repeat(100),
    ] {
        assert!(valid_id(ok), "{ok:?}");
    }
    for bad in [
        "",
        ".hidden",
        "a/b",
        "a b",
        "a\\b",
        "é",
        "..",
        &"x".repeat(101),
    ] {
        assert!(!valid_id(bad), "{bad:?}");
    }
}

#[test]
fn a_spool_keeps_the_quotas_it_was_opened_with() {
    let env = Env::new();
    let q = Quotas {
        max_count: 3,
        max_total_bytes: 12345,
        ..Quotas::default()
    };
    let spool = env.spool(q.clone());
    assert_eq!(spool.quotas(), &q);
}

/// `lock_wait` waits for a holder to let go, up to its limit, then says the spool is locked.
#[test]
fn lock_wait_waits_for_the_holder_then_gives_up() {
    let env = Env::new();
    let spool = Arc::new(env.spool(Quotas::default()));
    let held = spool.lock().unwrap();
    let start = std::time::Instant::now();
    match spool.lock_wait(Duration::from_millis(50)) {
        Err(Error::Locked(_)) => {}
        Err(e) => panic!("expected locked, got {e}"),
        Ok(_) => panic!("a held lock was taken"),
    }
    assert!(start.elapsed() >= Duration::from_millis(50));
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let spool = spool.clone();
        std::thread::spawn(move || {
            tx.send(()).unwrap();
            spool.lock_wait(Duration::from_secs(30)).map(|_| ())
        })
    };
    rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(30));
    drop(held);
    waiter
        .join()
        .unwrap()
        .expect("the lock once its holder let go");
}

/// The incidents the uploader walks: every readable one, oldest first (ties by id); an
/// unreadable one is skipped with a warning.
#[test]
fn incidents_lists_the_readable_ones_oldest_first() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    env.clock.set(T0 + 2000);
    add(&spool, "b-late", 10);
    env.clock.set(T0 + 1000);
    add(&spool, "z-early", 10);
    add(&spool, "a-early", 10);
    add(&spool, "torn", 10);
    std::fs::write(spool.incident_dir("torn").join("incident.json"), b"{").unwrap();
    let g = spool.lock().unwrap();
    let (list, logged) = warnings(|| g.incidents().unwrap());
    let ids: Vec<&str> = list.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["a-early", "z-early", "b-late"]);
    assert!(logged.contains("skipping torn"), "{logged}");
}

/// An incident moved aside hands back the counts its meta.json was to report, unless the
/// server acknowledged that file (another acknowledged file does not count).
#[test]
fn counts_go_back_to_pending_unless_their_meta_json_was_acknowledged() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    add(&spool, "m", 100);
    add(&spool, "n", 100);
    let g = spool.lock().unwrap();
    g.recover(&mut good).unwrap();
    let ack = |id: &str, kind: FileKind| {
        spool.record_loss(loss(1));
        let mut inc = g.plan_upload(id).unwrap();
        assert_eq!(inc.accounting.losses, 1);
        inc.uploads
            .iter_mut()
            .find(|u| u.kind == kind)
            .unwrap()
            .acked = true;
        g.save(&inc).unwrap();
    };
    ack("m", FileKind::Meta);
    ack("n", FileKind::Report);
    assert_eq!(spool.state().pending.losses, 0);
    // Each quarantine counts a loss of its own.
    g.quarantine(&spool.incident_dir("m"), "test");
    assert_eq!(spool.state().pending.losses, 1);
    g.quarantine(&spool.incident_dir("n"), "test");
    assert_eq!(spool.state().pending.losses, 3);
}

/// Where the disk refuses the rename to `.trash-ID`, the incident is removed in place, its
/// record last.
#[test]
fn an_incident_that_cannot_be_renamed_is_deleted_in_place() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    add(&spool, "full", 100);
    let g = spool.lock().unwrap();
    env.fs.fail_at(0, Fault::NoSpace, false);
    let (r, logged) = warnings(|| g.delete("full"));
    r.unwrap();
    assert!(env.fs.tripped());
    assert!(logged.contains("removing it in place"), "{logged}");
    assert!(names(&spool.incidents_dir()).is_empty());
}
