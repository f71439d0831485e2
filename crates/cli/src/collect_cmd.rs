//! `oomguard collect`: the development tus receiver (the server is `upload::collector`). A bad
//! `--listen` (not an address, or not loopback without `--any-address`) exits 2; a failure of
//! the machine (the port taken, DIR not writable) exits 1.

use crate::Failure;
use clap::Args;
use collector::{self, Collector};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args)]
pub struct CollectArgs {
    /// Address to listen on (loopback only unless --any-address).
    #[arg(long, default_value = "127.0.0.1:8370")]
    listen: String,
    /// Where uploads, received incidents and index.html go.
    #[arg(long)]
    dir: PathBuf,
    /// Largest upload accepted (bytes); bigger ones get 413.
    #[arg(long, default_value_t = 1 << 30)]
    max_upload_bytes: u64,
    /// Allow listening on a non-loopback address (a phone on the same network).
    #[arg(long)]
    any_address: bool,
    /// Bytes DIR may hold, counting what unfinished uploads may still bring; beyond it new
    /// uploads are refused (503, Retry-After) and the client keeps its files.
    #[arg(long, default_value_t = 10 << 30)]
    max_disk_bytes: u64,
    /// Seconds an upload may go without receiving a byte before it is removed with its
    /// partial file.
    #[arg(long, default_value_t = 24 * 3600)]
    upload_expiry_secs: u64,
    /// Seconds a request (head and body) may take to arrive; a request head must arrive
    /// within 10 s or this, whichever is shorter. An upload keeps what came.
    #[arg(long, default_value_t = 300)]
    request_timeout_secs: u64,
    /// Incidents per page of the index (`/?page=N`).
    #[arg(long, default_value_t = 50)]
    index_page: usize,
    /// The newest incidents the index lists (their summaries are kept in memory).
    #[arg(long, default_value_t = 1000)]
    index_incidents: usize,
    /// The memory, in MiB, the collector's own analysis of an uploaded dump may take when the
    /// device could analyse only part of it (its result: `report.server.json`); 0: none.
    #[arg(long, default_value_t = 1024)]
    analysis_memory_mb: u64,
}

pub fn collect(a: CollectArgs) -> Result<(), Failure> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
    let mut cfg = collector::Config::new(&a.dir);
    cfg.print = true;
    cfg.max_upload_bytes = a.max_upload_bytes;
    cfg.allow_non_loopback = a.any_address;
    cfg.max_disk_bytes = a.max_disk_bytes;
    cfg.upload_expiry = Duration::from_secs(a.upload_expiry_secs);
    cfg.request_timeout = Duration::from_secs(a.request_timeout_secs.max(1));
    cfg.index_page = a.index_page.max(1);
    cfg.index_incidents = a.index_incidents.max(1);
    cfg.analysis_memory_mb = a.analysis_memory_mb;
    let c = Collector::bind(&a.listen, cfg).map_err(|e| match e {
        // The command line's fault: exit 2, saying which option to change.
        collector::Error::NotLoopback(addr) => Failure {
            code: 2,
            message: format!(
                "collect: --listen {addr}: not a loopback address (add --any-address to listen on it)"
            ),
        },
        collector::Error::Bind { addr, source }
            if source.kind() == std::io::ErrorKind::InvalidInput =>
        {
            Failure {
                code: 2,
                message: format!(
                    "collect: --listen {addr}: {source} (an address and a port, say 127.0.0.1:8370)"
                ),
            }
        }
        e => Failure {
            code: 1,
            message: format!("collect: {e}"),
        },
    })?;
    let stop = c.stop_flag();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| Failure {
            code: 1,
            message: format!("collect: cannot handle signal {sig}: {e}"),
        })?;
    }
    let index = a.dir.join("index.html");
    say!(
        "collector listening: tus endpoint {}  index {}",
        c.endpoint(),
        index.display()
    );
    let stats = c.serve().map_err(|e| Failure {
        code: 1,
        message: format!("collect: {e}"),
    })?;
    eprintln!(
        "collector stopped: {} file(s) received, {} report(s), {} duplicate(s), {} corrupt, {} PATCH bytes",
        stats.files_completed, stats.reports, stats.duplicates, stats.corrupt, stats.patch_bytes
    );
    Ok(())
}
