//! Whole paths through the spool, the tus client and the collector, on loopback: uploads,
//! resume after a cut connection, two processes on one data dir, faults through `Fs` during
//! uploads, the `oomguard collect` command, and the kill -9 loop.

mod common;

use collector::{self, Collector, UploadInfo};
use oomguard::spool::{
    AnalysisJob, Fault, FaultFs, FileKind, ManualClock, NewIncident, Quotas, Spool, State,
};
use oomguard::upload::{self, Network, Stop};
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const T0: u64 = 1_800_000_000_000;

fn collector(dir: &Path) -> collector::Running {
    Collector::bind("127.0.0.1:0", collector::Config::new(dir))
        .unwrap()
        .spawn()
}

fn good(job: &AnalysisJob) -> Result<(), String> {
    let n = std::fs::metadata(job.mini_dump.as_ref().unwrap())
        .unwrap()
        .len();
    let r = serde_json::json!({"gcPaths": [{"signature": format!("Leak{}", job.id), "leakReason": "t", "instanceCount": n}],
                               "dominators": [{"className": "byte[]", "retainedSize": n}]});
    std::fs::write(&job.report_out, r.to_string()).map_err(|e| e.to_string())
}

fn mini_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut v = vec![0u8; n];
    rng.fill(&mut v[..n / 2]);
    v
}

fn add(spool: &Spool, id: &str, mini: &[u8]) {
    let st = spool.stage_with_id(id).unwrap();
    std::fs::write(st.path(FileKind::MiniDump), mini).unwrap();
    std::fs::write(st.path(FileKind::Fds), format!("fds of {id}\n")).unwrap();
    std::fs::write(st.path(FileKind::Threads), "main\n").unwrap();
    spool
        .commit(
            st,
            NewIncident {
                reason: format!("reason {id}"),
                samples: serde_json::json!([1, 2, 3]),
                running_info: serde_json::json!({}),
                policy_version: "t".into(),
            },
        )
        .unwrap();
    spool.lock().unwrap().recover(&mut good).unwrap();
}

fn cfg(endpoint: &str) -> upload::Config {
    upload::Config {
        endpoint: endpoint.to_string(),
        io_timeout: Duration::from_secs(5),
        chunk_size: 64 * 1024,
        backoff_base: Duration::from_secs(1),
        backoff_cap: Duration::from_secs(8),
        ..upload::Config::default()
    }
}

fn gunzip(p: &Path) -> Vec<u8> {
    let mut v = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_end(&mut v)
        .unwrap();
    v
}

/// Every upload the collector knows: (incident, kind) → (length, bytes received over all tries).
fn wire(dir: &Path) -> BTreeMap<(String, String), (u64, u64)> {
    let mut m: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for e in std::fs::read_dir(dir.join("uploads")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let i: UploadInfo = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            let v = m.entry((i.incident, i.kind)).or_insert((i.length, 0));
            v.1 += i.received;
        }
    }
    m
}

#[test]
fn uploads_complete_and_stored_files_match() {
    let tmp = common::fast_tmp();
    let col = collector(&tmp.path().join("col"));
    let spool = Spool::open(tmp.path().join("spool"), Quotas::default()).unwrap();
    let minis: Vec<Vec<u8>> = (0..3)
        .map(|i| mini_bytes(i, 200_000 + i as usize))
        .collect();
    for (i, m) in minis.iter().enumerate() {
        add(&spool, &format!("{}-inc-{i}", T0 + i as u64), m);
    }
    // Planned files, to compare with what the server stored.
    let planned: Vec<_> = {
        let g = spool.lock().unwrap();
        g.ids()
            .unwrap()
            .iter()
            .map(|id| g.plan_upload(id).unwrap())
            .collect()
    };
    let s = upload::run_once(&spool, &cfg(&col.endpoint()), Network::UNMETERED).unwrap();
    assert_eq!(s.acknowledged.len(), 3, "{s:?}");
    assert_eq!(s.stopped, None);
    assert!(spool.lock().unwrap().ids().unwrap().is_empty());
    let st = col.stats();
    assert_eq!(
        (st.files_completed, st.duplicates, st.corrupt, st.reports),
        (15, 0, 0, 3)
    );
    for (i, inc) in planned.iter().enumerate() {
        let d = col.dir().join("incidents").join(&inc.id);
        assert_eq!(gunzip(&d.join("mini.hprof.gz")), minis[i]);
        for u in &inc.uploads {
            let (sha, n) =
                oomguard::spool::hash_file(&oomguard::spool::RealFs, &d.join(u.kind.file_name()))
                    .unwrap();
            assert_eq!((sha, n), (u.sha256.clone(), u.size));
        }
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["reason"], format!("reason {}", inc.id));
    }
    // Small files go first: the report arrives before the mini dump.
    let html = std::fs::read_to_string(col.dir().join("index.html")).unwrap();
    assert!(html.contains(&format!("Leak{}", planned[0].id)));
    // Nothing sent twice.
    for ((_, kind), (len, got)) in wire(col.dir()) {
        assert_eq!(got, len, "{kind}");
    }
}

#[test]
fn upload_cut_short_resumes_from_the_server_offset() {
    let tmp = common::fast_tmp();
    let col = collector(&tmp.path().join("col"));
    let clock = Arc::new(ManualClock::new(T0));
    let spool = Spool::with(
        tmp.path().join("spool"),
        Quotas::default(),
        Arc::new(oomguard::spool::RealFs),
        clock.clone(),
    )
    .unwrap();
    let mini = mini_bytes(7, 3_000_000);
    add(&spool, &format!("{T0}-big"), &mini);
    let cutting = Arc::new(AtomicBool::new(true));
    let port = common::relay(col.addr(), 1_000_000, cutting.clone(), Duration::ZERO);
    let mut c = cfg(&format!("http://127.0.0.1:{port}/files/"));
    c.chunk_size = 8 << 20; // one PATCH for the whole file: the cut lands inside it
    let s = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
    assert!(s.acknowledged.is_empty(), "{s:?}");
    let Some(Stop::Backoff { until_ms, .. }) = s.stopped else {
        panic!("expected a backoff: {s:?}")
    };
    let inc = spool.read_incident(&format!("{T0}-big")).unwrap();
    assert_eq!((inc.state, inc.upload_attempts), (State::Uploading, 1));
    let gz = inc
        .uploads
        .iter()
        .find(|u| u.kind == FileKind::MiniDumpGz)
        .unwrap()
        .clone();
    assert!(gz.url.is_some(), "the upload URL is persisted");
    // Backoff holds: nothing is sent before it expires, even by a new process.
    cutting.store(false, Ordering::SeqCst);
    let spool = Spool::with(
        tmp.path().join("spool"),
        Quotas::default(),
        Arc::new(oomguard::spool::RealFs),
        clock.clone(),
    )
    .unwrap();
    let before = col.stats().requests;
    let s = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
    assert_eq!((s.waiting, col.stats().requests), (1, before));
    clock.set(until_ms);
    let s = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
    assert_eq!(s.acknowledged.len(), 1, "{s:?}");
    let resumed = s
        .resumed
        .iter()
        .find(|r| r.1 == "mini.gz")
        .expect("resumed");
    assert!(resumed.2 > 0 && resumed.2 < gz.size, "{resumed:?}");
    assert_eq!(
        gunzip(
            &col.dir()
                .join("incidents")
                .join(format!("{T0}-big"))
                .join("mini.hprof.gz")
        ),
        mini
    );
    for ((_, kind), (len, got)) in wire(col.dir()) {
        assert!(
            got as f64 <= 1.1 * len as f64,
            "{kind}: {got} bytes over the wire for {len}"
        );
    }
}

#[test]
fn refuses_plain_http_to_other_hosts_and_respects_network_state() {
    let tmp = common::fast_tmp();
    let spool = Spool::open(tmp.path().join("spool"), Quotas::default()).unwrap();
    add(&spool, &format!("{T0}-n"), &mini_bytes(1, 1000));
    let e = upload::run_once(
        &spool,
        &cfg("http://example.com/files/"),
        Network::UNMETERED,
    );
    assert!(matches!(e, Err(upload::Error::Insecure(_))));
    let col = collector(&tmp.path().join("col"));
    let c = cfg(&col.endpoint());
    assert_eq!(
        upload::run_once(&spool, &c, Network::OFFLINE)
            .unwrap()
            .stopped,
        Some(Stop::Offline)
    );
    assert_eq!(
        upload::run_once(&spool, &c, Network::METERED)
            .unwrap()
            .stopped,
        Some(Stop::Metered)
    );
    assert_eq!(col.stats().requests, 0);
    let mut metered_ok = c.clone();
    metered_ok.unmetered_only = false;
    // Daily budget: smaller than the mini dump → it stops, and resumes the next day.
    metered_ok.daily_byte_budget = 600;
    let s = upload::run_once(&spool, &metered_ok, Network::METERED).unwrap();
    assert_eq!(s.stopped, Some(Stop::BudgetExhausted), "{s:?}");
    assert!(col.stats().patch_bytes <= 600);
}

#[test]
fn two_processes_on_one_data_dir_never_upload_twice() {
    let tmp = common::fast_tmp();
    let col = collector(&tmp.path().join("col"));
    let data = tmp.path().join("data");
    let st = Command::new(common::oomguard_bin())
        .args([
            "spool-worker",
            "--new",
            "8",
            "--no-upload",
            "--endpoint",
            &col.endpoint(),
            "--dir",
        ])
        .arg(&data)
        .status()
        .unwrap();
    assert!(st.success());
    let spawn = || {
        Command::new(common::oomguard_bin())
            .args([
                "spool-worker",
                "--new",
                "0",
                "--endpoint",
                &col.endpoint(),
                "--dir",
            ])
            .arg(&data)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success() && b.status.success());
    let acked = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).lines().count();
    assert_eq!(acked(&a) + acked(&b), 8);
    let st = col.stats();
    assert_eq!((st.duplicates, st.corrupt, st.reports), (0, 0, 8), "{st:?}");
}

/// A worker killed inside its write of a "committed ID" line leaves the line without its
/// newline. The next worker's line must not be glued onto it: kill_9_loop read
/// "committed committed ID" as an incident that never reached the server (and the incident
/// committed, whose line was torn, went unchecked). Each torn tail a kill can leave, then one
/// worker that commits one incident: the log holds the whole lines only, each naming an incident
/// in the spool or the one before.
#[test]
fn a_committed_line_torn_by_a_kill_is_not_glued_to_the_next() {
    let earlier = format!("{T0}-r1-0");
    for torn in [
        "committed ",
        "committed 18000",
        &format!("committed {earlier}"),
    ] {
        let tmp = common::fast_tmp();
        let data = tmp.path().join("data");
        let log = tmp.path().join("committed.log");
        std::fs::write(&log, format!("committed {earlier}\n{torn}")).unwrap();
        let st = Command::new(common::oomguard_bin())
            .args(["spool-worker", "--new", "1", "--no-upload", "--prefix", "t"])
            .args(["--endpoint", "http://127.0.0.1:9/files/", "--log"])
            .arg(&log)
            .arg("--dir")
            .arg(&data)
            .status()
            .unwrap();
        assert!(st.success());
        let spool = Spool::open(data.join("spool"), Quotas::default()).unwrap();
        let ids = spool.lock().unwrap().ids().unwrap();
        assert_eq!(ids.len(), 1, "{ids:?}");
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            text,
            format!("committed {earlier}\ncommitted {}\n", ids[0]),
            "torn tail {torn:?}"
        );
    }
}

#[test]
fn faults_during_upload_never_corrupt_an_upload_or_lose_an_incident() {
    let mut points = 0;
    let mut i = 0;
    loop {
        let tmp = common::fast_tmp();
        let col = collector(&tmp.path().join("col"));
        let fs = FaultFs::new();
        let clock = Arc::new(ManualClock::new(T0));
        let open = || {
            Spool::with(
                tmp.path().join("spool"),
                Quotas::default(),
                Arc::new(fs.clone()),
                clock.clone(),
            )
            .unwrap()
        };
        let spool = open();
        let ids: Vec<String> = (0..2).map(|k| format!("{T0}-f{k}")).collect();
        for (k, id) in ids.iter().enumerate() {
            add(&spool, id, &mini_bytes(k as u64, 50_000));
        }
        let fault = [Fault::NoSpace, Fault::Io, Fault::Torn][i % 3];
        fs.fail_at(i as u64, fault, false);
        let _ = upload::run_once(&spool, &cfg(&col.endpoint()), Network::UNMETERED);
        let tripped = fs.tripped();
        if !tripped {
            points = fs.points();
        }
        fs.heal();
        // Next launch: recover, then upload until done.
        let spool = open();
        spool.lock().unwrap().recover(&mut good).unwrap();
        clock.set(T0 + 3_600_000);
        let s = upload::run_once(&spool, &cfg(&col.endpoint()), Network::UNMETERED).unwrap();
        let st = col.stats();
        assert_eq!(
            (st.corrupt, st.duplicates),
            (0, 0),
            "point {i} {fault:?}: {st:?} {s:?}"
        );
        let left = spool.lock().unwrap().ids().unwrap();
        let loss = spool.state().losses_total;
        for id in &ids {
            let arrived = col
                .dir()
                .join("incidents")
                .join(id)
                .join("mini.hprof.gz")
                .exists();
            assert!(
                arrived || left.contains(id) || loss > 0,
                "point {i} {fault:?}: {id} neither uploaded, kept nor counted as lost"
            );
        }
        if !tripped {
            break;
        }
        i += 1;
        assert!(i < 400);
    }
    assert!(points > 10, "only {points} write points");
}

/// A planned file whose bytes changed on disk (bit rot, a torn write) is never sent: it is
/// moved to quarantine and counted as a loss, and the incident's other files still go up.
/// Before, the whole incident was quarantined, its intact report and inventories with it.
#[test]
fn a_file_that_rotted_after_planning_is_never_uploaded() {
    let tmp = common::fast_tmp();
    let col = collector(&tmp.path().join("col"));
    let spool = Spool::open(tmp.path().join("spool"), Quotas::default()).unwrap();
    let id = format!("{T0}-rot");
    add(&spool, &id, &mini_bytes(3, 40_000));
    spool.lock().unwrap().plan_upload(&id).unwrap();
    let p = spool.incident_dir(&id).join("mini.hprof.gz");
    let mut b = std::fs::read(&p).unwrap();
    b[1000] ^= 0x01;
    std::fs::write(&p, b).unwrap();
    let s = upload::run_once(&spool, &cfg(&col.endpoint()), Network::UNMETERED).unwrap();
    assert!(s.quarantined.is_empty(), "{s:?}");
    assert_eq!(s.acknowledged, vec![id.clone()], "{s:?}");
    assert_eq!(spool.state().pending.losses, 1);
    let got = col.dir().join("incidents").join(&id);
    for f in ["meta.json", "report.json", "fds.txt", "threads.txt"] {
        assert!(got.join(f).exists(), "{f} not received");
    }
    assert!(!got.join("mini.hprof.gz").exists());
    let st = col.stats();
    assert_eq!((st.corrupt, st.duplicates), (0, 0), "{st:?}");
    // The rotted file is kept aside, not deleted.
    let aside: Vec<_> = std::fs::read_dir(spool.quarantine_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        aside.iter().any(|n| n.ends_with("-mini.hprof.gz")),
        "{aside:?}"
    );
}

#[test]
fn collect_command_receives_renders_and_exits_cleanly_on_sigterm() {
    let tmp = common::fast_tmp();
    let port = common::free_port();
    let dir = tmp.path().join("col");
    let mut child = Command::new(common::oomguard_bin())
        .args(["collect", "--listen", &format!("127.0.0.1:{port}"), "--dir"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 20];
    out.read_exact(&mut first).unwrap(); // it listens once it printed
    let endpoint = format!("http://127.0.0.1:{port}/files/");
    let st = Command::new(common::oomguard_bin())
        .args([
            "spool-worker",
            "--new",
            "2",
            "--endpoint",
            &endpoint,
            "--dir",
        ])
        .arg(tmp.path().join("data"))
        .status()
        .unwrap();
    assert!(st.success());
    // The index and the received files are served too.
    let index = ureq::get(&format!("http://127.0.0.1:{port}/"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    // The first incident's link (the index also links to the grouped leaks page, /leaks).
    let link = index
        .split("href=\"")
        .skip(1)
        .filter_map(|h| h.split('"').next())
        .find(|h| h.starts_with("incidents/"))
        .unwrap_or_else(|| panic!("no incident link in the index: {index}"))
        .to_string();
    assert!(link.starts_with("incidents/"), "{link}");
    let got = ureq::get(&format!("http://127.0.0.1:{port}/{link}"))
        .call()
        .unwrap();
    assert_eq!(got.status(), 200);
    let missing = ureq::get(&format!("http://127.0.0.1:{port}/incidents/../x")).call();
    assert!(matches!(missing, Err(ureq::Error::Status(404, _))));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert_eq!(
        rest.lines()
            .filter(|l| l.starts_with("received report"))
            .count(),
        2,
        "{rest}"
    );
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(
        html.contains("test.Leak") && html.contains("byte[]"),
        "{html}"
    );
}

/// A temporary directory kept (and its path printed) if the test panics, so that a rare failure
/// leaves its data dir, collector dir and worker logs to look at.
struct KeptOnFailure(Option<tempfile::TempDir>);

impl KeptOnFailure {
    fn path(&self) -> &Path {
        self.0.as_ref().map(|t| t.path()).unwrap_or(Path::new("/"))
    }
}

impl Drop for KeptOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(t) = self.0.take() {
                eprintln!("test failed: its files are kept in {}", t.keep().display());
            }
        }
    }
}

/// Kill a process that is writing to the spool, analysing, uploading or evicting at random
/// points, ≥ 200 times; restart it on the same data dir. Every committed incident reaches the
/// server exactly once or is reported as evicted; no file crosses the wire more than 1.1×.
#[test]
fn kill_9_loop() {
    let tmp = KeptOnFailure(Some(common::fast_tmp()));
    let col = collector(&tmp.path().join("col"));
    let data = tmp.path().join("data");
    let log = tmp.path().join("committed.log");
    let errlog = tmp.path().join("workers.log");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x0dd_ba11);
    // OOMG_ROUNDS=2000 makes a stress run (its time check below then fails, as it should: it
    // is sized for 200 rounds).
    let rounds: u32 = std::env::var("OOMG_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let start = Instant::now();
    let worker = Worker {
        endpoint: col.endpoint(),
        log: &log,
        errlog: &errlog,
        data: &data,
    };
    let killed = kill_rounds(&worker, rounds, &mut rng);
    // A last run, not killed, drains the spool.
    let mut last = worker.spawn(rounds, 0, 10, &mut rng);
    assert!(last.wait().unwrap().success());
    let elapsed = start.elapsed();
    let committed = committed_ids(&log);
    let inc_dir = col.dir().join("incidents");
    let received: BTreeSet<String> = std::fs::read_dir(&inc_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let complete = |id: &String| {
        ["meta.json", "fds.txt", "threads.txt", "mini.hprof.gz"]
            .iter()
            .all(|f| inc_dir.join(id).join(f).exists())
    };
    let spool = Spool::open(data.join("spool"), Quotas::default()).unwrap();
    let ev = evictions(&inc_dir, &received, &spool);
    let (evicted, counted, recorded) = (&ev.named, ev.counted, ev.recorded);
    let st = col.stats();
    eprintln!(
        "kill -9 loop: {rounds} rounds in {elapsed:?}, {killed} killed mid-run; {} committed, {} complete on the server, {counted} evictions counted ({} named, {} of them still pending in spool.json); {st:?}",
        committed.len(),
        received.iter().filter(|i| complete(i)).count(),
        evicted.len(),
        ev.pending
    );
    assert!(
        killed >= rounds / 2,
        "only {killed} rounds killed a running worker"
    );
    assert!(committed.len() >= 100, "{}", committed.len());
    assert_eq!((st.duplicates, st.corrupt), (0, 0), "{st:?}");
    // Every committed incident is on the server, or named as evicted, or among the evictions
    // counted beyond the records a report holds.
    let unnamed: Vec<&String> = committed
        .iter()
        .filter(|id| !(complete(id) || evicted.contains(*id)))
        .collect();
    if unnamed.len() as u64 > counted - recorded {
        explain_unnamed(&unnamed, &errlog, &inc_dir, col.dir(), &spool);
        panic!(
            "{} incidents neither received nor reported as evicted ({counted} evictions counted, {recorded} named)",
            unnamed.len()
        );
    }
    assert!(
        !evicted.is_empty(),
        "the loop never evicted: it does not test eviction"
    );
    let spool_left: Vec<_> = std::fs::read_dir(spool.incidents_dir()).unwrap().collect();
    assert!(spool_left.is_empty(), "{spool_left:?} left in the spool");
    check_wire(col.dir());
    assert!(elapsed < Duration::from_secs(120));
}

/// How [`kill_9_loop`] starts a spool worker on its data dir.
struct Worker<'a> {
    endpoint: String,
    log: &'a Path,
    errlog: &'a Path,
    data: &'a Path,
}

impl Worker<'_> {
    /// A worker for `round` that commits `new` incidents under a count quota of `max_count`.
    fn spawn(
        &self,
        round: u32,
        new: u32,
        max_count: u32,
        rng: &mut rand::rngs::StdRng,
    ) -> std::process::Child {
        let (log, errlog, data) = (self.log, self.errlog, self.data);
        Command::new(common::oomguard_bin())
            .args([
                "spool-worker",
                "--endpoint",
                &self.endpoint,
                "--chunk",
                "8192",
                "--analyse-ms",
                "3",
            ])
            .args(["--new", &new.to_string(), "--prefix", &format!("r{round}")])
            .args([
                "--max-count",
                &max_count.to_string(),
                "--seed",
                &round.to_string(),
            ])
            .args(["--mini-bytes", &rng.gen_range(10_000..120_000).to_string()])
            .arg("--log")
            .arg(log)
            .arg("--dir")
            .arg(data)
            // OOMG_WORKER_LOG=info makes the workers log every commit, upload and deletion.
            .env(
                "RUST_LOG",
                std::env::var("OOMG_WORKER_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(errlog)
                    .unwrap(),
            )
            .spawn()
            .unwrap()
    }
}

/// `rounds` workers, each killed (SIGKILL) after a random sleep; returns how many were still
/// running when killed.
fn kill_rounds(worker: &Worker<'_>, rounds: u32, rng: &mut rand::rngs::StdRng) -> u32 {
    let mut killed = 0;
    let mut max_sleep_us: u64 = 150_000;
    for round in 0..rounds {
        let (new, max_count) = if round % 10 == 9 {
            (4, 3)
        } else {
            (rng.gen_range(0..3), 10)
        };
        let mut child = worker.spawn(round, new, max_count, rng);
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..max_sleep_us)));
        // The kill point adapts to how fast workers run on this machine right now: mostly
        // inside a run, whatever the load.
        if child.try_wait().unwrap().is_none() {
            killed += 1;
            max_sleep_us = (max_sleep_us * 21 / 20).min(150_000);
        } else {
            max_sleep_us = (max_sleep_us * 3 / 4).max(2_000);
        }
        let _ = child.kill(); // SIGKILL
        child.wait().unwrap();
    }
    killed
}

/// The incidents the workers' log says were committed, each checked to be an incident id.
fn committed_ids(log: &Path) -> BTreeSet<String> {
    let committed: BTreeSet<String> = std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("committed ").map(str::to_string))
        .collect();
    // Each line names one incident of a round (`{ms:013}-r{round}-{i}`): anything else is a
    // line torn by a kill and glued to the next, not an incident to look for.
    for id in &committed {
        let parts: Vec<&str> = id.split('-').collect();
        let well_formed = matches!(parts.as_slice(), [t, r, i]
            if t.len() == 13 && t.bytes().all(|b| b.is_ascii_digit())
                && r.strip_prefix('r').is_some_and(|n| n.parse::<u32>().is_ok())
                && i.parse::<u32>().is_ok());
        assert!(well_formed, "the log names {id:?}: not an incident id");
    }
    committed
}

/// The evictions [`kill_9_loop`] can account for.
struct Evictions {
    /// Ids named in eviction records.
    named: BTreeSet<String>,
    /// Evictions counted, named or not.
    counted: u64,
    /// Eviction records.
    recorded: u64,
    /// Evictions still pending in spool.json.
    pending: u64,
}

/// The evictions reported to the server (in the meta.json of the incidents `received`) and
/// those still waiting in the spool for the next report.
fn evictions(inc_dir: &Path, received: &BTreeSet<String>, spool: &Spool) -> Evictions {
    // Evictions reported to the server: ids in the records (capped per report) and counts.
    let mut evicted = BTreeSet::new();
    let (mut counted, mut recorded) = (0u64, 0u64);
    for id in received {
        if let Ok(b) = std::fs::read(inc_dir.join(id).join("meta.json")) {
            let m: serde_json::Value = serde_json::from_slice(&b).unwrap();
            counted += m["evictions"].as_u64().unwrap();
            for e in m["evicted"].as_array().unwrap() {
                recorded += 1;
                evicted.insert(e["id"].as_str().unwrap().to_string());
            }
        }
    }
    // Evictions after the last report was planned wait in spool.json for the next report (the
    // next incident, or the next launch's): recorded on disk, not lost, but not on the server
    // yet. The drain run creates no incident, so an eviction late in the loop ends up here.
    let pending = spool.state().pending;
    counted += pending.evictions;
    recorded += pending.eviction_records.len() as u64;
    for e in &pending.eviction_records {
        evicted.insert(e.id.clone());
    }
    Evictions {
        named: evicted,
        counted,
        recorded,
        pending: pending.evictions,
    }
}

/// Print what is known of each incident in `unnamed` (neither received nor reported as
/// evicted): the workers' log lines, its files on the server, its uploads, its spool record.
fn explain_unnamed(
    unnamed: &[&String],
    errlog: &Path,
    inc_dir: &Path,
    col_dir: &Path,
    spool: &Spool,
) {
    let logs = std::fs::read_to_string(errlog).unwrap_or_default();
    for id in unnamed {
        let mine: Vec<&str> = logs.lines().filter(|l| l.contains(id.as_str())).collect();
        eprintln!("{id}: {mine:#?}");
        // Partly on the server? Which files, and which uploads the collector knows for it.
        if let Ok(rd) = std::fs::read_dir(inc_dir.join(id.as_str())) {
            let files: Vec<String> = rd
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            eprintln!("{id}: on the server, incomplete: {files:?}");
        }
        for e in std::fs::read_dir(col_dir.join("uploads")).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "json") {
                let b = std::fs::read(&p).unwrap();
                let i: UploadInfo = serde_json::from_slice(&b).unwrap();
                if i.incident == **id {
                    eprintln!("{id}: upload {}: {i:?}", p.display());
                }
            }
        }
        // Still in the spool (rejected, or left by the drain run)? Its record says why.
        let rec = spool.incident_dir(id).join("incident.json");
        if let Ok(t) = std::fs::read_to_string(&rec) {
            eprintln!("{id}: still in the spool: {t}");
        }
        for e in std::fs::read_dir(spool.quarantine_dir())
            .into_iter()
            .flatten()
        {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if name.contains(id.as_str()) {
                eprintln!("{id}: moved to quarantine as {name}");
            }
        }
    }
}

/// Bytes over the wire, per file, over the whole loop: at most 1.1 times each file's length.
fn check_wire(col_dir: &Path) {
    let mut total = (0u64, 0u64);
    for ((id, kind), (len, got)) in wire(col_dir) {
        total.0 += len;
        total.1 += got;
        assert!(
            got as f64 <= 1.1 * len as f64 + 0.5,
            "{id}/{kind}: {got} bytes sent for {len}"
        );
    }
    eprintln!(
        "bytes over the wire {} for files of {} bytes",
        total.1, total.0
    );
}

#[test]
fn collect_command_finishes_the_upload_in_flight_on_sigterm() {
    let tmp = common::fast_tmp();
    let port = common::free_port();
    let dir = tmp.path().join("col");
    let mut child = Command::new(common::oomguard_bin())
        .args(["collect", "--listen", &format!("127.0.0.1:{port}"), "--dir"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 20];
    out.read_exact(&mut first).unwrap();
    // A slow link, so that the signal lands inside the PATCH of the mini dump.
    let relay = common::relay(
        std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        u64::MAX,
        Arc::new(AtomicBool::new(false)),
        Duration::from_millis(5),
    );
    let spool = Spool::open(tmp.path().join("spool"), Quotas::default()).unwrap();
    let mut mini = vec![0u8; 3_000_000];
    rand::rngs::StdRng::seed_from_u64(11).fill(&mut mini[..]);
    let id = format!("{T0}-inflight");
    add(&spool, &id, &mini);
    let mut c = cfg(&format!("http://127.0.0.1:{relay}/files/"));
    c.chunk_size = 64 << 20;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let uploads = dir.join("uploads");
    let signaller = std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            let partial = std::fs::read_dir(&uploads).unwrap().any(|e| {
                let p = e.unwrap().path();
                p.extension().is_some_and(|x| x == "bin")
                    && std::fs::metadata(&p)
                        .map(|m| m.len() > 500_000)
                        .unwrap_or(false)
            });
            if partial {
                nix::sys::signal::kill(pid, nix::sys::signal::SIGTERM).unwrap();
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    });
    let s = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
    assert!(signaller.join().unwrap(), "the upload never got going");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    // The PATCH in flight when the signal came was finished and stored whole.
    assert_eq!(
        gunzip(&dir.join("incidents").join(&id).join("mini.hprof.gz")),
        mini
    );
    assert_eq!(s.acknowledged, vec![id], "{s:?}");
}

/// A plan that fails (a full disk while compressing the mini dump) is retried after a backoff,
/// not on every pass: each try redoes the compression and logs a warning, and the incident's
/// record, which would hold a wait, cannot be written on a full disk either. No attempt is
/// counted; once the disk has room the incident goes up.
#[test]
fn a_plan_that_fails_on_a_full_disk_waits_before_it_is_tried_again() {
    let tmp = common::fast_tmp();
    let col = collector(&tmp.path().join("col"));
    let fs = FaultFs::new();
    let clock = Arc::new(ManualClock::new(T0));
    let spool = Spool::with(
        tmp.path().join("spool"),
        Quotas::default(),
        Arc::new(fs.clone()),
        clock.clone(),
    )
    .unwrap();
    let id = format!("{T0}-full");
    add(&spool, &id, &mini_bytes(7, 50_000));
    spool.lock().unwrap().recover(&mut good).unwrap();
    let c = cfg(&col.endpoint());
    fs.fail_at(0, Fault::NoSpace, true);
    let s = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
    assert!(fs.tripped(), "the plan wrote nothing: {s:?}");
    assert!(s.acknowledged.is_empty(), "{s:?}");
    let tried = fs.points();
    // The next pass, a moment later: the plan waits, and nothing is written.
    clock.set(T0 + 100);
    let s = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
    assert_eq!(s.waiting, 1, "{s:?}");
    assert_eq!(fs.points(), tried, "planning was tried again at once");
    // After the backoff (at most the 8 s cap) it is tried again, and fails again.
    clock.set(T0 + 8_200);
    upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
    assert!(fs.points() > tried, "planning was not tried after the wait");
    // The disk has room again: after the next wait, it goes up; no attempt was counted.
    fs.heal();
    clock.set(T0 + 3_600_000);
    let inc = spool.read_incident(&id).unwrap();
    assert_eq!(inc.upload_attempts, 0);
    let s = upload::run_once(&spool, &c, Network::UNMETERED).unwrap();
    assert_eq!(s.acknowledged, vec![id.clone()], "{s:?}");
}
