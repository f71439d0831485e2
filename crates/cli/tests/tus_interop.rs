//! Interop with a real tus 1.0 server: `@tus/server` with `@tus/file-store` (npm), on loopback.
//! Uploads complete, resume after the server is killed mid-upload and restarted, and the stored
//! files match ours byte for byte.

mod common;

use oomguard::spool::{AnalysisJob, FileKind, ManualClock, NewIncident, Quotas, RealFs, Spool};
use oomguard::upload::{self, Network, Stop};
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const T0: u64 = 1_800_000_000_000;

struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_node(port: u16, store: &Path) -> Node {
    let dir = common::tus_server_dir();
    let mut child = Command::new("node")
        .arg("server.mjs")
        .arg(port.to_string())
        .arg(store)
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .spawn()
        .expect("node runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening"), "node server said {line:?}");
    Node(child)
}

fn good(job: &AnalysisJob) -> Result<(), String> {
    std::fs::write(&job.report_out, br#"{"gcPaths":[],"dominators":[]}"#).map_err(|e| e.to_string())
}

fn add(spool: &Spool, id: &str, mini: &[u8]) {
    let st = spool.stage_with_id(id).unwrap();
    std::fs::write(st.path(FileKind::MiniDump), mini).unwrap();
    std::fs::write(st.path(FileKind::Threads), "main\n").unwrap();
    spool
        .commit(
            st,
            NewIncident {
                reason: "interop".into(),
                ..NewIncident::default()
            },
        )
        .unwrap();
    let g = spool.lock().unwrap();
    g.recover(&mut good).unwrap();
    g.plan_upload(id).unwrap();
}

/// The files @tus/file-store holds: (incident, kind) → (sha256 of the stored bytes, size).
fn stored(store: &Path) -> Vec<((String, String), (String, u64))> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(store).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let info: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            let md = &info["metadata"];
            let data = p.with_extension("");
            let (sha, n) = oomguard::spool::hash_file(&RealFs, &data).unwrap();
            v.push((
                (
                    md["incident"].as_str().unwrap().to_string(),
                    md["kind"].as_str().unwrap().to_string(),
                ),
                (sha, n),
            ));
            assert_eq!(md["sha256"].as_str().unwrap().len(), 64);
        }
    }
    v.sort();
    v
}

fn config(port: u16) -> upload::Config {
    upload::Config {
        endpoint: format!("http://127.0.0.1:{port}/files/"),
        io_timeout: Duration::from_secs(5),
        backoff_base: Duration::from_secs(1),
        ..upload::Config::default()
    }
}

#[test]
fn uploads_to_tus_server_and_stored_files_match() {
    let tmp = common::fast_tmp();
    let store = tmp.path().join("store");
    let port = common::free_port();
    let _node = start_node(port, &store);
    let spool = Spool::open(tmp.path().join("spool"), Quotas::default()).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut planned = Vec::new();
    for i in 0..3 {
        let mut mini = vec![0u8; 300_000 + i];
        rng.fill(&mut mini[..150_000]);
        let id = format!("{}-interop-{i}", T0 + i as u64);
        add(&spool, &id, &mini);
        planned.push(spool.read_incident(&id).unwrap());
    }
    let s = upload::run_once(&spool, &config(port), Network::UNMETERED).unwrap();
    assert_eq!(s.acknowledged.len(), 3, "{s:?}");
    let got = stored(&store);
    let mut want = Vec::new();
    for inc in &planned {
        for u in &inc.uploads {
            want.push((
                (inc.id.clone(), u.kind.upload_kind().to_string()),
                (u.sha256.clone(), u.size),
            ));
        }
    }
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn tus_server_killed_mid_upload_then_restarted_resumes() {
    let tmp = common::fast_tmp();
    let store = tmp.path().join("store");
    let port = common::free_port();
    let node = start_node(port, &store);
    // A slow link in front of the server, so the kill lands mid-upload.
    let relay = common::relay(
        std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        u64::MAX,
        Arc::new(std::sync::atomic::AtomicBool::new(false)),
        Duration::from_millis(4),
    );
    let clock = Arc::new(ManualClock::new(T0));
    let spool = Spool::with(
        tmp.path().join("spool"),
        Quotas::default(),
        Arc::new(RealFs),
        clock.clone(),
    )
    .unwrap();
    let mut mini = vec![0u8; 4_000_000];
    rand::rngs::StdRng::seed_from_u64(9).fill(&mut mini[..]);
    let id = format!("{T0}-resume");
    add(&spool, &id, &mini);
    let gz = spool
        .read_incident(&id)
        .unwrap()
        .uploads
        .into_iter()
        .find(|u| u.kind == FileKind::MiniDumpGz)
        .unwrap();
    let mut cfg = config(relay);
    cfg.chunk_size = 64 << 20; // one PATCH
    let store2 = store.clone();
    let size = gz.size;
    let killer = std::thread::spawn(move || {
        // Kill -9 the server once it holds more than a quarter of the mini dump.
        let start = Instant::now();
        let mut node = node;
        loop {
            let big = std::fs::read_dir(&store2)
                .ok()
                .into_iter()
                .flatten()
                .any(|e| {
                    let e = e.unwrap();
                    e.path().extension().is_none()
                        && e.metadata().map(|m| m.len() > size / 4).unwrap_or(false)
                });
            if big {
                node.0.kill().unwrap();
                node.0.wait().unwrap();
                return true;
            }
            if start.elapsed() > Duration::from_secs(30) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let s = upload::run_once(&spool, &cfg, Network::UNMETERED).unwrap();
    assert!(
        killer.join().unwrap(),
        "the upload never got far enough to cut"
    );
    assert!(s.acknowledged.is_empty(), "{s:?}");
    let Some(Stop::Backoff { until_ms, .. }) = s.stopped else {
        panic!("{s:?}")
    };
    let partial = stored(&store)
        .into_iter()
        .find(|((_, k), _)| k == "mini.gz")
        .map(|(_, (_, n))| n)
        .unwrap();
    assert!(
        partial > 0 && partial < size,
        "server kept {partial} of {size}"
    );
    // Restart the server on the same store; a new process resumes after the backoff.
    let _node = start_node(port, &store);
    let spool = Spool::with(
        tmp.path().join("spool"),
        Quotas::default(),
        Arc::new(RealFs),
        clock.clone(),
    )
    .unwrap();
    clock.set(until_ms);
    let s = upload::run_once(&spool, &config(port), Network::UNMETERED).unwrap();
    assert_eq!(s.acknowledged, vec![id.clone()], "{s:?}");
    let resumed = s
        .resumed
        .iter()
        .find(|r| r.1 == "mini.gz")
        .expect("resumed with HEAD");
    assert_eq!(resumed.2, partial);
    assert!(
        s.bytes_sent <= size - partial + 4096,
        "sent {} after the restart",
        s.bytes_sent
    );
    let got = stored(&store);
    let mini_gz = got.iter().find(|((_, k), _)| k == "mini.gz").unwrap();
    assert_eq!(mini_gz.1, (gz.sha256.clone(), gz.size));
    assert_eq!(got.iter().filter(|((_, k), _)| k == "mini.gz").count(), 1);
}
