//! `oomguard collect`: the development tus receiver (the server is `upload::collector`).

use crate::Failure;
use clap::Args;
use oomguard::upload::collector::{self, Collector};
use std::path::PathBuf;

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
    let c = Collector::bind(&a.listen, cfg).map_err(|e| Failure {
        code: 1,
        message: format!("collect: {e}"),
    })?;
    let stop = c.stop_flag();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| Failure {
            code: 1,
            message: format!("collect: cannot handle signal {sig}: {e}"),
        })?;
    }
    let index = a.dir.join("index.html");
    let html = collector::render_index(&a.dir);
    std::fs::write(&index, html).map_err(|e| Failure {
        code: 1,
        message: format!("collect: {}: {e}", index.display()),
    })?;
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
