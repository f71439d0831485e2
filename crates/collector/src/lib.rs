//! The development collector: a small tus 1.0 receiver (core + creation) on hyper 1 (HTTP/1.1,
//! `conn`; the routes in `server`), used by `oomguard collect`, the tests and the demo. Its
//! tokio runtime lives inside: [`Collector::serve`] blocks, [`Collector::spawn`] serves on a
//! thread. Reports are read through `analyze::report`'s types ([`html::lenient`]).
//!
//! Layout of its directory:
//! ```text
//! DIR/uploads/UID.json   one tus upload: length, metadata, bytes received, completion
//! DIR/uploads/UID.bin    its bytes so far (the offset is this file's length)
//! DIR/uploads/UID.corrupt  a complete upload whose SHA-256 differed from its metadata's
//! DIR/incidents/ID/      completed files of incident ID, by kind (meta.json, report.json, ...)
//! DIR/incidents/ID/.summary.json  what the index shows of it ([`summary`])
//! DIR/incidents/ID/report.server.json  the collector's whole analysis of the uploaded dump, when
//!                        the device's report holds only part of one ([`complete`])
//! DIR/incidents/ID/report.server.error.txt  why that analysis could not be made
//! DIR/incidents/ID/.analysis/  the inflated dump while it is analysed
//! DIR/index.html         the first page of the index: the newest reports, their top leaks
//! ```
//!
//! Served: `/` (the index, `?page=N`), `/leaks` (leaks grouped across incidents),
//! `/incidents/ID/` (an incident's page), `/incidents/ID/FILE`, `/stats`, and tus at `/files/`.
//!
//! Invariants:
//! - Bodies are written to disk as they arrive, so a cut connection keeps every received byte
//!   and the client resumes from there; one PATCH per upload at a time (a per-upload lock).
//! - A completed upload is filed under its incident only if its SHA-256 equals the one in its
//!   metadata; the SHA-256 of the stored bytes is returned as `Upload-Sha256` on the final PATCH
//!   and on HEAD, so the client acknowledges only what was stored intact. A second complete
//!   copy of the same (incident, kind) is counted as a duplicate and not filed again.
//! - Request heads are bounded (16 KiB, 100 headers) and `head_timeout`, request bodies by
//!   `request_timeout` from the end of their head, bodies by `Upload-Length` and
//!   `max_upload_bytes`, every wait for body bytes and every write by `io_timeout`, a
//!   kept-alive connection waiting for its next request by `min(head_timeout, idle_timeout)`,
//!   connections by `max_connections` (503 beyond), the directory by `max_disk_bytes` (an
//!   upload that does not fit is refused at creation: 503 with `Retry-After`), uploads left
//!   unfinished by `upload_expiry` (`limits`).
//! - Memory does not grow with what clients send: files are read and served as streams, the
//!   index is made of small summaries ([`summary`]), a page shows at most `index_page`
//!   incidents, and at most `index_incidents` summaries are kept in memory. An incident page
//!   reads its files as bounded streams, one page at a time (`pages`).
//! - On stop (SIGINT/SIGTERM in `oomguard collect`) it stops accepting, lets requests in flight
//!   finish, fsyncs its directories and returns.
#![forbid(unsafe_code)]

mod complete;
mod conn;
mod filing;
pub mod html;
mod index;
mod limits;
pub mod mapping;
pub mod metadata;
mod pages;
mod server;
pub mod summary;
#[cfg(test)]
mod testing;

pub use filing::{file_name_for, UploadInfo};

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use sys::fs::{Fs, RealFs};

/// Errors of the collector.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("{0}: refusing to listen on a non-loopback address")]
    NotLoopback(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Collector settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub dir: PathBuf,
    pub max_upload_bytes: u64,
    pub io_timeout: Duration,
    /// A keep-alive connection idle this long is closed (or after `head_timeout`, if shorter:
    /// hyper's head timer runs while it waits for the next request).
    pub idle_timeout: Duration,
    pub max_connections: usize,
    pub allow_non_loopback: bool,
    /// Print one line per received report on stdout.
    pub print: bool,
    /// Bytes the directory may hold, counting what open uploads may still bring; an upload
    /// that does not fit is refused at creation (503 with `Retry-After`).
    pub max_disk_bytes: u64,
    /// An upload without a request for this long is removed with its partial file.
    pub upload_expiry: Duration,
    /// A request head must arrive whole within this.
    pub head_timeout: Duration,
    /// A request's body must arrive whole within this from the end of its head (an upload
    /// keeps the bytes that came and the client resumes from there).
    pub request_timeout: Duration,
    /// The newest incidents whose summaries the index keeps in memory.
    pub index_incidents: usize,
    /// Incidents per page of the index.
    pub index_page: usize,
    /// The memory the collector's own analysis of an incident the device analysed only in part
    /// may take, in MiB, by the analysis's estimate (`complete`); 0: no such analysis.
    pub analysis_memory_mb: u64,
}

impl Config {
    pub fn new(dir: impl Into<PathBuf>) -> Config {
        Config {
            dir: dir.into(),
            max_upload_bytes: 1 << 30,
            io_timeout: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(30),
            max_connections: 32,
            allow_non_loopback: false,
            print: false,
            max_disk_bytes: 10 << 30,
            upload_expiry: Duration::from_secs(24 * 3600),
            head_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(300),
            index_incidents: 1000,
            index_page: 50,
            analysis_memory_mb: 1024,
        }
    }
}

/// Counters, readable while it runs.
#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    patch_bytes: AtomicU64,
    uploads_created: AtomicU64,
    files_completed: AtomicU64,
    duplicates: AtomicU64,
    corrupt: AtomicU64,
    reports: AtomicU64,
    busy_refused: AtomicU64,
}

/// A snapshot of the collector's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub requests: u64,
    /// PATCH body bytes received (and stored), over all uploads.
    pub patch_bytes: u64,
    pub uploads_created: u64,
    /// Uploads completed with a matching SHA-256 and filed.
    pub files_completed: u64,
    /// Complete uploads of an (incident, kind) already filed.
    pub duplicates: u64,
    /// Complete uploads whose SHA-256 did not match their metadata.
    pub corrupt: u64,
    pub reports: u64,
    pub busy_refused: u64,
}

impl Counters {
    fn snapshot(&self) -> Stats {
        let g = |a: &AtomicU64| a.load(Ordering::SeqCst);
        Stats {
            requests: g(&self.requests),
            patch_bytes: g(&self.patch_bytes),
            uploads_created: g(&self.uploads_created),
            files_completed: g(&self.files_completed),
            duplicates: g(&self.duplicates),
            corrupt: g(&self.corrupt),
            reports: g(&self.reports),
            busy_refused: g(&self.busy_refused),
        }
    }
}

struct Shared {
    cfg: Config,
    counters: Counters,
    stop: Arc<AtomicBool>,
    locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    index: Mutex<index::Index>,
    /// Held while an incident page is rendered: one at a time ([`pages`]).
    pages: Mutex<()>,
    /// The builds' mappings (`DIR/mappings/VERSION/mapping.txt`), applied when pages are made.
    mappings: Arc<mapping::Mappings>,
    quota: limits::Quota,
    active: AtomicUsize,
    /// Incidents the device analysed only in part, waiting for the collector's analysis.
    analyses: complete::Queue,
}

/// A bound collector.
pub struct Collector {
    listener: TcpListener,
    shared: Arc<Shared>,
}

/// A collector serving on its own thread.
pub struct Running {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Result<Stats, Error>>>,
}

fn safe_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

impl Collector {
    /// Bind `addr` (loopback only unless the config allows otherwise) and prepare `cfg.dir`.
    pub fn bind(addr: &str, cfg: Config) -> Result<Collector, Error> {
        let listener = TcpListener::bind(addr).map_err(|source| Error::Bind {
            addr: addr.to_string(),
            source,
        })?;
        let local = listener.local_addr().map_err(|source| Error::Bind {
            addr: addr.to_string(),
            source,
        })?;
        if !cfg.allow_non_loopback && !local.ip().is_loopback() {
            return Err(Error::NotLoopback(addr.to_string()));
        }
        for d in ["uploads", "incidents"] {
            let p = cfg.dir.join(d);
            std::fs::create_dir_all(&p).map_err(|source| Error::Io { path: p, source })?;
        }
        listener
            .set_nonblocking(true)
            .map_err(|source| Error::Bind {
                addr: addr.to_string(),
                source,
            })?;
        let index = index::Index::open(&cfg.dir, cfg.index_incidents);
        index.write(cfg.index_page).map_err(|source| Error::Io {
            path: cfg.dir.join("index.html"),
            source,
        })?;
        let quota = limits::Quota::scan(&cfg.dir, cfg.max_disk_bytes);
        if quota.used() > quota.max() {
            tracing::warn!(
                "collector: {} holds {} bytes, over the quota of {}: new uploads are refused until some are removed",
                cfg.dir.display(),
                quota.used(),
                quota.max()
            );
        }
        let mappings = index.mappings();
        let c = Collector {
            listener,
            shared: Arc::new(Shared {
                cfg,
                counters: Counters::default(),
                stop: Arc::new(AtomicBool::new(false)),
                locks: Mutex::new(HashMap::new()),
                index: Mutex::new(index),
                pages: Mutex::new(()),
                mappings,
                quota,
                active: AtomicUsize::new(0),
                analyses: complete::Queue::default(),
            }),
        };
        // What a stopped collector left to analyse.
        {
            let ix = c.shared.index.lock().unwrap_or_else(|p| p.into_inner());
            for s in ix.summaries() {
                complete::offer(&c.shared, s);
            }
        }
        Ok(c)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// The tus creation endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://{}/files/", self.local_addr())
    }

    /// Setting this flag makes [`serve`](Self::serve) finish and return.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.shared.stop.clone()
    }

    /// Serve until the stop flag is set; then finish requests in flight and the analysis in
    /// flight (`complete`), fsync, return counts.
    pub fn serve(self) -> Result<Stats, Error> {
        let sh = self.shared.clone();
        let addr = self.local_addr().to_string();
        let analyses = complete::spawn(sh.clone());
        let served = conn::serve(self.listener, sh.clone());
        sh.stop.store(true, Ordering::SeqCst);
        sh.analyses.wake();
        if let Some(t) = analyses {
            let _ = t.join();
        }
        served.map_err(|source| Error::Bind { addr, source })?;
        for d in ["uploads", "incidents", ""] {
            let p = sh.cfg.dir.join(d);
            let _ = RealFs.sync_dir(&p);
        }
        Ok(sh.counters.snapshot())
    }

    /// Serve on a new thread.
    pub fn spawn(self) -> Running {
        let addr = self.local_addr();
        let shared = self.shared.clone();
        let thread = std::thread::Builder::new()
            .name("collector".into())
            .spawn(move || self.serve())
            .ok();
        Running {
            addr,
            shared,
            thread,
        }
    }
}

impl Running {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    pub fn endpoint(&self) -> String {
        format!("http://{}/files/", self.addr)
    }
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot()
    }
    pub fn dir(&self) -> &Path {
        &self.shared.cfg.dir
    }
    /// Stop accepting, finish requests in flight, and return the final counts.
    pub fn stop(mut self) -> Stats {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            if let Ok(Ok(s)) = t.join() {
                return s;
            }
        }
        self.shared.counters.snapshot()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
