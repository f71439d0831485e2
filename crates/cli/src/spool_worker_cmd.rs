//! `oomguard spool-worker` (hidden): a test harness that drives the spool and the uploader the
//! way the agent does (recover, analyse, enqueue, upload), so tests can `kill -9` it at random
//! points and restart it on the same data dir.

use crate::Failure;
use clap::Args;
use oomguard::spool::{AnalysisJob, FileKind, NewIncident, Quotas, Spool, State};
use oomguard::upload::{self, Network};
use rand::{Rng, SeedableRng};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct WorkerArgs {
    /// The data dir (the spool is DIR/spool).
    #[arg(long)]
    dir: PathBuf,
    /// tus endpoint.
    #[arg(long)]
    endpoint: String,
    /// Incidents to create in this run.
    #[arg(long, default_value_t = 1)]
    new: u32,
    /// Incident id prefix (after the time stamp).
    #[arg(long, default_value = "w")]
    prefix: String,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Mini dump size in bytes.
    #[arg(long, default_value_t = 65536)]
    mini_bytes: usize,
    /// Spool count quota.
    #[arg(long, default_value_t = 10)]
    max_count: usize,
    /// Milliseconds the fake analyser takes.
    #[arg(long, default_value_t = 2)]
    analyse_ms: u64,
    /// Bytes per PATCH.
    #[arg(long, default_value_t = 16384)]
    chunk: u64,
    /// Append "committed ID" lines here (fsynced; see `open_log`).
    #[arg(long)]
    log: Option<PathBuf>,
    /// Do not upload.
    #[arg(long)]
    no_upload: bool,
}

/// Open the "committed ID" log to append to it. A worker killed inside its write of a line
/// leaves that line without its newline ("committed " or "committed 17955663"); the next line
/// appended was glued onto it ("committed committed 1795566350704-r192-0"), naming an incident
/// that does not exist while the one committed went unnamed. A line without its newline was
/// never announced whole, as if the kill had come just before it: it is cut off here. The log
/// has one writer at a time (the tests run one worker at a time on it).
fn open_log(p: &Path) -> io::Result<File> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(p)?;
    let mut b = Vec::new();
    f.read_to_end(&mut b)?;
    let whole = b.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
    if whole < b.len() {
        f.set_len(whole as u64)?;
        f.sync_all()?;
    }
    Ok(f)
}

/// Append one "committed ID" line with one write (a kill lands before it, after it, or, at a
/// page boundary, inside it: `open_log` cuts such a line off), then fsync.
fn log_committed(f: &mut File, id: &str) -> io::Result<()> {
    f.write_all(format!("committed {id}\n").as_bytes())?;
    f.sync_all()
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure {
        code: 1,
        message: format!("spool-worker: {e}"),
    }
}

pub fn run(a: WorkerArgs) -> Result<(), Failure> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
    let quotas = Quotas {
        max_count: a.max_count,
        ..Quotas::default()
    };
    let spool = Spool::open(a.dir.join("spool"), quotas).map_err(fail)?;
    let analyse_ms = a.analyse_ms;
    let mut analyser = move |job: &AnalysisJob| -> Result<(), String> {
        let mini = job.mini_dump.as_ref().ok_or("no mini dump")?;
        let len = std::fs::metadata(mini).map_err(|e| e.to_string())?.len();
        std::thread::sleep(Duration::from_millis(analyse_ms));
        let report = serde_json::json!({
            "gcPaths": [{"signature": format!("test.Leak{}", job.id), "leakReason": "spool-worker",
                         "instanceCount": len}],
            "dominators": [{"className": "byte[]", "retainedSize": len}],
        });
        std::fs::write(&job.report_out, report.to_string()).map_err(|e| e.to_string())
    };
    // Recover what a previous run left.
    if let Ok(g) = spool.lock_wait(Duration::from_secs(5)) {
        g.recover(&mut analyser).map_err(fail)?;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.seed);
    let mut log = match &a.log {
        Some(p) => Some(open_log(p).map_err(fail)?),
        None => None,
    };
    for i in 0..a.new {
        let id = format!("{:013}-{}-{i}", spool.now_ms(), a.prefix);
        let st = spool.stage_with_id(&id).map_err(fail)?;
        // Half random, half zeros: compressible like a real stripped dump.
        let mut mini = vec![0u8; a.mini_bytes];
        rng.fill(&mut mini[..a.mini_bytes / 2]);
        let mut f = std::fs::File::create(st.path(FileKind::MiniDump)).map_err(fail)?;
        for c in mini.chunks(8192) {
            f.write_all(c).map_err(fail)?;
        }
        f.sync_all().map_err(fail)?;
        std::fs::write(
            st.path(FileKind::Fds),
            format!("0 /dev/null\n1 pipe:[{i}]\n"),
        )
        .map_err(fail)?;
        std::fs::write(st.path(FileKind::Threads), "main\nFinalizerDaemon\n").map_err(fail)?;
        let id = spool
            .commit(
                st,
                NewIncident {
                    reason: format!("test incident {i}"),
                    samples: serde_json::json!([{"heapUsed": i}]),
                    running_info: serde_json::json!({"worker": std::process::id()}),
                    policy_version: "test".into(),
                },
            )
            .map_err(fail)?;
        if let Some(l) = &mut log {
            log_committed(l, &id).map_err(fail)?;
        }
    }
    if let Ok(g) = spool.lock_wait(Duration::from_secs(5)) {
        g.recover(&mut analyser).map_err(fail)?;
    }
    if a.no_upload {
        return Ok(());
    }
    let cfg = upload::Config {
        endpoint: a.endpoint.clone(),
        io_timeout: Duration::from_secs(5),
        chunk_size: a.chunk,
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_millis(200),
        max_attempts: 1000,
        ..upload::Config::default()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = upload::run_once(&spool, &cfg, Network::UNMETERED).map_err(fail)?;
        for id in &s.acknowledged {
            say!("acknowledged {id}");
        }
        let left = match spool.lock_wait(Duration::from_secs(5)) {
            Ok(g) => g
                .incidents()
                .map_err(fail)?
                .into_iter()
                .filter(|i| matches!(i.state, State::Analysed | State::Uploading | State::Dumped))
                .count(),
            Err(_) => 0, // another worker has it: it drains the rest
        };
        if left == 0 || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
