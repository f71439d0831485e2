//! Uploads that lose nothing and stall on nothing: the daily byte budget is charged with what
//! was sent, a full disk does not stop uploads (nor leave orphan uploads on the server), a
//! zero-byte file is uploaded like any other, and a network that turns metered mid-pass stops
//! the pass before its next chunk. Against the real collector on loopback.

mod common;

use collector::{self, Collector};
use oomguard::spool::{
    Fault, FaultFs, FileKind, ManualClock, NewIncident, Quotas, RealFs, Spool, State,
};
use oomguard::upload::{self, Network, Stop};
use rand::RngCore;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

const T0: u64 = 1_800_000_000_000;

fn random(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rand::thread_rng().fill_bytes(&mut v);
    v
}

fn commit(spool: &Spool, id: &str, files: &[(FileKind, &[u8])]) {
    let st = spool.stage_with_id(id).unwrap();
    for (k, b) in files {
        std::fs::write(st.path(*k), b).unwrap();
    }
    spool
        .commit(
            st,
            NewIncident {
                reason: id.into(),
                ..Default::default()
            },
        )
        .unwrap();
}

/// A link that cuts every connection after 400 KiB: each pass sends part of a 3 MiB file. The
/// budget (5 MiB a day) must be charged with the bytes that went out, not with the rest of the
/// file before each PATCH (two passes used to spend it all for 0.8 MB received, and the day's
/// later passes sent nothing): the file gets through within the day's budget.
#[test]
fn the_daily_budget_is_charged_with_what_was_sent_on_a_flaky_link() {
    let d = tempfile::tempdir().unwrap();
    let cd = tempfile::tempdir().unwrap();
    let run = Collector::bind("127.0.0.1:0", collector::Config::new(cd.path()))
        .unwrap()
        .spawn();
    let port = common::relay(
        run.addr(),
        400 * 1024,
        Arc::new(AtomicBool::new(true)),
        Duration::ZERO,
    );
    let clock = Arc::new(ManualClock::new(T0));
    let spool = Spool::with(d.path(), Quotas::default(), Arc::new(RealFs), clock.clone()).unwrap();
    commit(
        &spool,
        "1800000000000-1-a",
        &[
            (FileKind::MiniDump, &random(3 << 20)),
            (FileKind::Report, b"{}"),
        ],
    );
    let chunk = 64 * 1024;
    let cfg = upload::Config {
        endpoint: format!("http://127.0.0.1:{port}/files/"),
        io_timeout: Duration::from_secs(5),
        chunk_size: chunk,
        max_attempts: 100,
        backoff_base: Duration::from_secs(1),
        backoff_cap: Duration::from_secs(2),
        daily_byte_budget: 5 << 20,
        ..upload::Config::default()
    };
    let mut passes = 0u64;
    let mut stops = Vec::new();
    loop {
        let s = upload::run_once(&spool, &cfg, Network::UNMETERED).unwrap();
        passes += 1;
        if !s.acknowledged.is_empty() {
            break;
        }
        stops.push(format!("{:?}", s.stopped));
        assert!(
            s.stopped != Some(Stop::BudgetExhausted) && passes < 40,
            "pass {passes}: {:?}; charged {} of 5 MiB, the collector has {} bytes; stops: {stops:?}",
            s.stopped,
            spool.state().bytes_sent_today,
            run.stats().patch_bytes,
        );
        clock.advance(Duration::from_secs(5));
    }
    let received = run.stats().patch_bytes;
    let charged = spool.state().bytes_sent_today;
    // At least what arrived; at most that plus what each cut PATCH had on the wire.
    assert!(
        charged >= received && charged <= received + passes * chunk,
        "charged {charged}, received {received}, {passes} passes"
    );
}

/// A disk full from before the pass (the plan was made earlier): saving the upload URLs, the
/// acknowledgements and the budget fails with ENOSPC. The pass goes on with that state in
/// memory: each file is created once (no orphan upload per pass), sent, acknowledged, and the
/// incident deleted, which frees the disk.
#[test]
fn a_full_disk_does_not_stop_uploads_nor_leave_orphan_uploads() {
    let d = tempfile::tempdir().unwrap();
    let cd = tempfile::tempdir().unwrap();
    let run = Collector::bind("127.0.0.1:0", collector::Config::new(cd.path()))
        .unwrap()
        .spawn();
    let fs = FaultFs::new();
    let clock = Arc::new(ManualClock::new(T0));
    let spool = Spool::with(
        d.path(),
        Quotas::default(),
        Arc::new(fs.clone()),
        clock.clone(),
    )
    .unwrap();
    let id = "1800000000000-1-a";
    commit(
        &spool,
        id,
        &[(FileKind::Report, b"{}"), (FileKind::Fds, b"fd 3\n")],
    );
    let planned = spool.lock().unwrap().plan_upload(id).unwrap();
    let files = planned.uploads.len() as u64;
    let cfg = upload::Config {
        endpoint: run.endpoint(),
        io_timeout: Duration::from_secs(5),
        ..Default::default()
    };
    fs.fail_at(0, Fault::NoSpace, true); // full from now on (removals still work)
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let r = upload::run_once(&spool, &cfg, Network::UNMETERED);
        outcomes.push(format!("{:?}", r.map(|s| (s.acknowledged, s.stopped))));
        clock.advance(Duration::from_secs(3600));
    }
    assert!(fs.tripped(), "the disk was never full");
    let st = run.stop();
    assert_eq!(
        (st.uploads_created, st.files_completed, st.duplicates),
        (files, files, 0),
        "{st:?}; passes: {outcomes:?}"
    );
    assert!(
        !spool.incident_dir(id).exists(),
        "acknowledged but not deleted; passes: {outcomes:?}"
    );
}

/// An incident whose planned inventory is empty (a zero-byte `fds.txt`) goes up like any other,
/// and the pass goes on to the next incident: it used to stop the pass as if the day's budget
/// were spent, every pass, every day.
#[test]
fn a_zero_byte_file_is_uploaded_and_stops_nothing() {
    let d = tempfile::tempdir().unwrap();
    let cd = tempfile::tempdir().unwrap();
    let run = Collector::bind("127.0.0.1:0", collector::Config::new(cd.path()))
        .unwrap()
        .spawn();
    let clock = Arc::new(ManualClock::new(T0));
    let spool = Spool::with(d.path(), Quotas::default(), Arc::new(RealFs), clock.clone()).unwrap();
    for (id, fds) in [("1800000000000-1-a", ""), ("1800000000001-1-b", "fd 3\n")] {
        commit(
            &spool,
            id,
            &[
                (FileKind::Report, b"{\"gcPaths\":[]}"),
                (FileKind::Fds, fds.as_bytes()),
            ],
        );
        clock.advance(Duration::from_millis(1));
    }
    let cfg = upload::Config {
        endpoint: run.endpoint(),
        io_timeout: Duration::from_secs(5),
        ..upload::Config::default()
    };
    let s = upload::run_once(&spool, &cfg, Network::UNMETERED).unwrap();
    assert_eq!(
        (s.acknowledged.len(), &s.stopped),
        (2, &None),
        "{s:?}; spool.json: {:?}",
        spool.state()
    );
    let st = run.stop();
    assert_eq!((st.files_completed, st.corrupt), (6, 0), "{st:?}");
    let empty = cd.path().join("incidents/1800000000000-1-a/fds.txt");
    assert_eq!(std::fs::read(&empty).unwrap(), b"");
}

/// Wi-Fi gives way to mobile data during a pass: with `unmetered_only`, the pass stops before
/// its next chunk (the network is asked before each incident and each PATCH), counts no
/// attempt, and the next pass on Wi-Fi resumes where it stopped.
#[test]
fn a_network_that_turns_metered_mid_pass_stops_before_the_next_chunk() {
    let d = tempfile::tempdir().unwrap();
    let cd = tempfile::tempdir().unwrap();
    let run = Collector::bind("127.0.0.1:0", collector::Config::new(cd.path()))
        .unwrap()
        .spawn();
    let clock = Arc::new(ManualClock::new(T0));
    let spool = Spool::with(d.path(), Quotas::default(), Arc::new(RealFs), clock.clone()).unwrap();
    let id = "1800000000000-1-a";
    commit(
        &spool,
        id,
        &[
            (FileKind::MiniDump, &random(512 << 10)),
            (FileKind::Report, b"{}"),
        ],
    );
    let cfg = upload::Config {
        endpoint: run.endpoint(),
        io_timeout: Duration::from_secs(5),
        chunk_size: 64 * 1024,
        unmetered_only: true,
        ..upload::Config::default()
    };
    // Metered as soon as the collector has received any PATCH bytes.
    let network = || {
        if run.stats().patch_bytes > 0 {
            Network::METERED
        } else {
            Network::UNMETERED
        }
    };
    let s = upload::run_once_with(&spool, &cfg, &network).unwrap();
    assert_eq!(s.stopped, Some(Stop::Metered), "{s:?}");
    let st = run.stats();
    assert_eq!(st.files_completed, 1, "one PATCH, then stop: {st:?}");
    let inc = spool.read_incident(id).unwrap();
    assert_eq!(
        (inc.state, inc.upload_attempts),
        (State::Uploading, 0),
        "{inc:?}"
    );
    // Back on Wi-Fi: the rest goes up, nothing twice.
    let s = upload::run_once(&spool, &cfg, Network::UNMETERED).unwrap();
    assert_eq!(s.acknowledged, vec![id.to_string()], "{s:?}");
    let st = run.stop();
    assert_eq!((st.files_completed, st.duplicates), (3, 0), "{st:?}");
}
