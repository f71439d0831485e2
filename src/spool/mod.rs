//! The spool: incidents on disk, their states, recovery after a crash, quotas.
//!
//! Layout of a spool directory `ROOT`:
//! ```text
//! ROOT/lock                      flock'd by the one process that recovers, analyses, uploads, evicts
//! ROOT/spool.json                spool-wide state: the wait before sending again (Retry-After, an
//!                                endpoint problem), daily byte budget, pending
//!                                eviction and loss records (attached to the next uploaded report)
//! ROOT/staging/ID/               an incident being written (dump, mini dump, inventories); its
//!                                `.lock` is flock'd by the writer for as long as it writes
//! ROOT/incidents/ID/             a committed incident: incident.json + its files (see FileKind)
//! ROOT/incidents/.trash-ID/      an incident being deleted
//! ROOT/quarantine/               files and directories of unknown shape, moved aside, never
//!                                deleted silently (they count against the byte quota and age out)
//! ROOT/quarantine/.trash-NAME    a quarantined item being evicted (its eviction recorded first)
//! ```
//!
//! `meta.json`, written once when an incident's upload is planned and uploaded first (camelCase):
//! `id`, `createdMs`, `reason`, `samples`, `runningInfo`, `policyVersion`; `analysisAttempts` and
//! `analysisError` (the last failure, null once an analysis succeeded); `dumpError` (why the
//! incident holds no dump, when it was committed without one; else null); `missing`, the files this
//! incident held (committed with it, or the report an analysis wrote) that are gone when the
//! upload is planned, by the names the server would have received (`report.json`, `fds.txt`,
//! `threads.txt`, `mini.hprof.gz`): `[]` when none is, `null` for an incident recorded before the
//! spool listed its files (nothing checked); a file an incident never had (no report after the
//! analysis gave up, no inventory for a heap incident, no mini dump when the stripper abandoned
//! it) is not missing; and the spool's `evictions`, `evictedBytes`, `losses`, `evicted` and `lost`
//! records since the last report.
//!
//! States of an incident: `dumped` → `analysed` → `uploading` → acknowledged (deleted), or
//! `rejected` (the server refused it, or the attempt budget ran out; kept until a quota evicts it).
//!
//! Invariants:
//! - Every change of `incident.json` and `spool.json` is a [`fs::write_atomic`]: temporary file,
//!   fsync, rename, directory fsync. Both files carry the SHA-256 of their body: a flipped bit or a
//!   torn write is detected, never trusted.
//! - An incident enters `incidents/` by one rename of a complete staging directory, after its
//!   `incident.json` is durable. A staging directory whose writer is gone (its `.lock` is free) is
//!   a half-written dump: recovery deletes it and counts the loss.
//! - A file that has not been acknowledged is never deleted, except by a quota eviction, which is
//!   logged and counted in the next uploaded report (`meta.json`), or when it is replaced by its
//!   compressed copy (`mini.hprof` → `mini.hprof.gz`) after the plan naming the copy is durable.
//!   Anything of unknown shape goes to `quarantine/`.
//! - Analysis attempts are counted in `incident.json` *before* each attempt, so a crash during
//!   analysis counts and an incident is analysed at most `max_analysis_attempts` times across
//!   launches; after that it is uploaded without a report.
//! - Only the holder of `ROOT/lock` (a [`SpoolGuard`]) changes committed incidents, so two
//!   processes sharing a data dir never upload the same incident twice. Committing a new incident
//!   needs no lock (it is one rename of a directory nobody else knows about).
//! - Quotas (bytes, count, age) are enforced oldest first, counting the incident about to be
//!   committed, so the spool never exceeds them after any public call returns (when the lock
//!   can be had; otherwise the holder enforces them on its next pass).
//! - All I/O of the spool's data goes through [`Fs`]; nothing here panics on bad input or an I/O
//!   error.
#![forbid(unsafe_code)]

pub mod fs;

pub use fs::{Entry, Fault, FaultFs, Fs, FsFile, FsRead, RealFs};

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How many eviction / loss records spool.json and meta.json keep (counters keep counting).
const MAX_RECORDS: usize = 32;

/// Errors of the spool.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {op} failed: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{path}: {what}; the file is moved to quarantine/ and the loss counted")]
    Corrupt { path: PathBuf, what: String },
    #[error("spool {0}: locked by another process (or thread); it recovers and uploads instead")]
    Locked(PathBuf),
    #[error("incident {0}: not in the spool (evicted or acknowledged meanwhile)")]
    NotFound(String),
    #[error("incident of {bytes} bytes exceeds the spool's byte quota of {quota}: not kept")]
    TooBig { bytes: u64, quota: u64 },
    #[error("staging {path}: {what}; the staging directory is deleted")]
    BadStaging { path: PathBuf, what: String },
}

pub type Result<T> = std::result::Result<T, Error>;

fn io_err<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// A source of wall-clock time, in milliseconds since the Unix epoch (injected by tests).
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// A clock that moves only when told (tests, simulations).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(ms: u64) -> ManualClock {
        ManualClock(AtomicU64::new(ms))
    }
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst)
    }
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Limits of the spool (the policy maps onto this).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quotas {
    /// Total bytes of incidents and quarantine.
    pub max_total_bytes: u64,
    /// Incidents (and quarantined items) kept at once.
    pub max_count: usize,
    /// Oldest incident kept.
    pub max_age: Duration,
    /// Analysis attempts per incident, across launches.
    pub max_analysis_attempts: u32,
    /// Keep the full dump after analysis (it is never uploaded).
    pub keep_full_dump: bool,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            max_total_bytes: 256 * 1024 * 1024,
            max_count: 10,
            max_age: Duration::from_secs(14 * 24 * 3600),
            max_analysis_attempts: 3,
            keep_full_dump: false,
        }
    }
}

/// The files an incident may hold; each has one fixed name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FileKind {
    /// The full heap dump (kept only for analysis, never uploaded).
    FullDump,
    /// The stripped dump.
    MiniDump,
    /// The stripped dump, gzip-compressed once for upload.
    MiniDumpGz,
    /// The analyser's report.
    Report,
    /// Open file descriptors at the time of the incident.
    Fds,
    /// Threads at the time of the incident.
    Threads,
    /// The frozen metadata uploaded with the incident (reason, samples, evictions, losses).
    Meta,
}

impl FileKind {
    pub const ALL: [FileKind; 7] = [
        FileKind::FullDump,
        FileKind::MiniDump,
        FileKind::MiniDumpGz,
        FileKind::Report,
        FileKind::Fds,
        FileKind::Threads,
        FileKind::Meta,
    ];

    pub fn file_name(self) -> &'static str {
        match self {
            FileKind::FullDump => "dump.hprof",
            FileKind::MiniDump => "mini.hprof",
            FileKind::MiniDumpGz => "mini.hprof.gz",
            FileKind::Report => "report.json",
            FileKind::Fds => "fds.txt",
            FileKind::Threads => "threads.txt",
            FileKind::Meta => "meta.json",
        }
    }

    /// The name sent as the tus `kind` metadata.
    pub fn upload_kind(self) -> &'static str {
        match self {
            FileKind::FullDump => "dump",
            FileKind::MiniDump => "mini",
            FileKind::MiniDumpGz => "mini.gz",
            FileKind::Report => "report",
            FileKind::Fds => "fds",
            FileKind::Threads => "threads",
            FileKind::Meta => "meta",
        }
    }

    pub fn from_name(name: &str) -> Option<FileKind> {
        FileKind::ALL.into_iter().find(|k| k.file_name() == name)
    }
}

/// Where an incident is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum State {
    Dumped,
    Analysed,
    Uploading,
    Rejected,
}

/// One file planned for upload, with its tus upload URL once created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Upload {
    pub kind: FileKind,
    pub size: u64,
    /// Hex SHA-256 of the file.
    pub sha256: String,
    /// The tus upload URL, persisted before the first byte is sent.
    pub url: Option<String>,
    /// The server acknowledged it: final offset == size and (if it said) the same SHA-256.
    pub acked: bool,
}

impl Upload {
    /// A file planned for upload, not yet sent.
    fn planned(kind: FileKind, sha256: String, size: u64) -> Upload {
        Upload {
            kind,
            size,
            sha256,
            url: None,
            acked: false,
        }
    }
}

/// One incident evicted by a quota.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Eviction {
    pub id: String,
    /// `age`, `count` or `bytes`.
    pub quota: String,
    pub bytes: u64,
    pub created_ms: u64,
    pub at_ms: u64,
}

/// One thing lost or moved aside (a half-written dump, corrupt metadata, unknown files, a
/// failed commit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Loss {
    pub what: String,
    pub path: String,
    pub bytes: u64,
    pub at_ms: u64,
}

/// Evictions and losses since the last report was planned for upload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Accounting {
    pub evictions: u64,
    pub evicted_bytes: u64,
    pub losses: u64,
    pub eviction_records: Vec<Eviction>,
    pub loss_records: Vec<Loss>,
}

impl Accounting {
    fn add_eviction(&mut self, e: Eviction) {
        self.evictions += 1;
        self.evicted_bytes += e.bytes;
        if self.eviction_records.len() < MAX_RECORDS {
            self.eviction_records.push(e);
        }
    }
    fn add_loss(&mut self, l: Loss) {
        self.losses += 1;
        if self.loss_records.len() < MAX_RECORDS {
            self.loss_records.push(l);
        }
    }
    /// Add another accounting's counts and records (records stay capped).
    pub fn merge(&mut self, o: Accounting) {
        self.evictions += o.evictions;
        self.evicted_bytes += o.evicted_bytes;
        self.losses += o.losses;
        for e in o.eviction_records {
            if self.eviction_records.len() < MAX_RECORDS {
                self.eviction_records.push(e);
            }
        }
        for l in o.loss_records {
            if self.loss_records.len() < MAX_RECORDS {
                self.loss_records.push(l);
            }
        }
    }
    pub fn is_empty(&self) -> bool {
        self.evictions == 0 && self.losses == 0
    }
}

/// The body of `incident.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Incident {
    pub version: u32,
    pub id: String,
    pub created_ms: u64,
    pub reason: String,
    pub samples: Value,
    pub running_info: Value,
    pub policy_version: String,
    pub state: State,
    pub analysis_attempts: u32,
    pub analysis_error: Option<String>,
    pub upload_attempts: u32,
    /// Do not try to upload before this time (backoff), ms since the epoch.
    pub next_attempt_ms: u64,
    pub uploads: Vec<Upload>,
    pub rejected: Option<String>,
    /// Evictions and losses reported with this incident (attached when its upload is planned).
    pub accounting: Accounting,
    /// The files the spool saw this incident hold: those it was committed with, plus the report
    /// once an analysis wrote one. [`SpoolGuard::plan_upload`] expects each of them that is
    /// uploaded (the mini dump as its compressed copy) and names any that has gone missing in
    /// `meta.json`. `None` in records written before this field existed, where nothing is known
    /// to be expected; left out of the JSON then, so those records keep their seal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<Vec<FileKind>>,
    /// Why this incident holds no dump (the dump was refused, failed, or left no file): it was
    /// committed without one, straight to `analysed`, so that its reason, samples and
    /// inventories still go up. Left out of the JSON when `None`, so older records keep their
    /// seal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dump_error: Option<String>,
}

/// What the caller knows about a new incident.
#[derive(Debug, Clone, Default)]
pub struct NewIncident {
    pub reason: String,
    pub samples: Value,
    pub running_info: Value,
    pub policy_version: String,
}

/// The body of `spool.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpoolState {
    /// Nothing is sent before this time: the server asked us to wait (429, or 503 with
    /// `Retry-After`), or the endpoint answered that it is wrong (see `upload`'s module doc).
    pub retry_after_until_ms: u64,
    /// The day (ms / 86_400_000) `bytes_sent_today` counts.
    pub budget_day: u64,
    pub bytes_sent_today: u64,
    /// Not yet attached to a report.
    pub pending: Accounting,
    /// Since the spool was created.
    pub evictions_total: u64,
    pub losses_total: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<T> {
    body: T,
    sha256: String,
}

/// Serialize `body` with a SHA-256 of its canonical bytes.
fn seal<T: Serialize>(body: &T) -> Vec<u8> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let sha = hex::encode(Sha256::digest(&bytes));
    // Build the envelope by hand so the body bytes are exactly the hashed ones.
    let mut out = Vec::with_capacity(bytes.len() + 96);
    out.extend_from_slice(b"{\"body\":");
    out.extend_from_slice(&bytes);
    out.extend_from_slice(b",\"sha256\":\"");
    out.extend_from_slice(sha.as_bytes());
    out.extend_from_slice(b"\"}");
    out
}

/// Parse a sealed file; any flipped bit or torn write is an error naming the byte offset.
fn unseal<T: Serialize + DeserializeOwned>(bytes: &[u8]) -> std::result::Result<T, String> {
    let env: Envelope<T> =
        serde_json::from_slice(bytes).map_err(|e| format!("not valid sealed JSON: {e}"))?;
    let again = serde_json::to_vec(&env.body).map_err(|e| e.to_string())?;
    let sha = hex::encode(Sha256::digest(&again));
    if sha != env.sha256 {
        return Err(format!(
            "SHA-256 of the body is {sha}, the file says {} (bit flip or torn write)",
            env.sha256
        ));
    }
    Ok(env.body)
}

/// Hex SHA-256 and size of a file read through `fs`.
pub fn hash_file(fs: &dyn Fs, path: &Path) -> io::Result<(String, u64)> {
    let mut f = fs.open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((hex::encode(h.finalize()), n))
}

/// What [`SpoolGuard::recover`] asks the analyser to do.
#[derive(Debug, Clone)]
pub struct AnalysisJob {
    pub id: String,
    pub dir: PathBuf,
    /// The full dump, if present.
    pub full_dump: Option<PathBuf>,
    /// The stripped dump, if present.
    pub mini_dump: Option<PathBuf>,
    /// Where the analyser writes its report (the spool makes it durable and names it
    /// `report.json`).
    pub report_out: PathBuf,
    /// 1-based attempt number, across launches.
    pub attempt: u32,
}

/// Analyses one incident (in production: a child process running the analyser).
pub trait Analyser {
    fn analyse(&mut self, job: &AnalysisJob) -> std::result::Result<(), String>;
}

impl<F: FnMut(&AnalysisJob) -> std::result::Result<(), String>> Analyser for F {
    fn analyse(&mut self, job: &AnalysisJob) -> std::result::Result<(), String> {
        self(job)
    }
}

/// What a recovery pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    pub half_written_deleted: u32,
    pub quarantined: u32,
    pub analysed: u32,
    pub analysis_failed: u32,
    pub analysis_given_up: u32,
    pub evicted: u32,
    pub incidents: u32,
}

/// A spool directory.
#[derive(Debug)]
pub struct Spool {
    root: PathBuf,
    fs: Arc<dyn Fs>,
    clock: Arc<dyn Clock>,
    quotas: Quotas,
    /// spool.json as last read or written, and whether it is newer than the disk (a write
    /// failed: counts survive in memory until the disk has room again).
    state: Mutex<Option<CachedState>>,
}

/// spool.json as last read or written: the state, whether it is newer than the disk, and the
/// bytes it was read from or written as (equal bytes on disk need no parsing).
#[derive(Debug)]
struct CachedState {
    state: SpoolState,
    dirty: bool,
    raw: Vec<u8>,
}

/// An incident being written: its directory and the lock that says its writer is alive.
#[derive(Debug)]
pub struct Staging {
    pub id: String,
    pub dir: PathBuf,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl Staging {
    /// Where the writer puts a file of this kind.
    pub fn path(&self, kind: FileKind) -> PathBuf {
        self.dir.join(kind.file_name())
    }
}

/// The creation time a `Spool::stage` id starts with (`{ms:013}-...`).
fn id_time(id: &str) -> Option<u64> {
    let (t, rest) = id.split_at_checked(13)?;
    if !rest.starts_with('-') || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 100
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

fn try_flock(path: &Path) -> io::Result<Option<nix::fcntl::Flock<std::fs::File>>> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)?;
    match nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(l) => Ok(Some(l)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(io::Error::from_raw_os_error(e as i32)),
    }
}

impl Spool {
    /// Open (creating if needed) the spool at `root` on the real file system and clock.
    pub fn open(root: impl Into<PathBuf>, quotas: Quotas) -> Result<Spool> {
        Spool::with(root, quotas, Arc::new(RealFs), Arc::new(SystemClock))
    }

    /// Open with an injected file system and clock.
    pub fn with(
        root: impl Into<PathBuf>,
        quotas: Quotas,
        fs: Arc<dyn Fs>,
        clock: Arc<dyn Clock>,
    ) -> Result<Spool> {
        let root = root.into();
        for d in ["staging", "incidents", "quarantine"] {
            let p = root.join(d);
            fs.create_dir_all(&p).map_err(io_err(&p, "mkdir"))?;
        }
        Ok(Spool {
            root,
            fs,
            clock,
            quotas,
            state: Mutex::new(None),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn fs(&self) -> &dyn Fs {
        &*self.fs
    }
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }
    pub fn quotas(&self) -> &Quotas {
        &self.quotas
    }
    pub fn incidents_dir(&self) -> PathBuf {
        self.root.join("incidents")
    }
    pub fn quarantine_dir(&self) -> PathBuf {
        self.root.join("quarantine")
    }
    pub fn incident_dir(&self, id: &str) -> PathBuf {
        self.incidents_dir().join(id)
    }

    /// Take the spool lock without waiting; [`Error::Locked`] if another holder has it.
    pub fn lock(&self) -> Result<SpoolGuard<'_>> {
        let p = self.root.join("lock");
        match try_flock(&p).map_err(io_err(&p, "flock"))? {
            Some(l) => Ok(SpoolGuard {
                spool: self,
                _lock: l,
            }),
            None => Err(Error::Locked(self.root.clone())),
        }
    }

    /// Take the spool lock, waiting up to `wait`.
    pub fn lock_wait(&self, wait: Duration) -> Result<SpoolGuard<'_>> {
        let start = std::time::Instant::now();
        loop {
            match self.lock() {
                Err(Error::Locked(p)) if start.elapsed() >= wait => return Err(Error::Locked(p)),
                Err(Error::Locked(_)) => std::thread::sleep(Duration::from_millis(10)),
                r => return r,
            }
        }
    }

    /// Give up a staging directory the caller chose not to commit (nothing in it is lost: the
    /// caller knows why it is not needed). Unlike a writer that died, this counts no loss.
    pub fn discard(&self, staging: Staging) {
        if let Err(e) = self.fs.remove_dir_all(&staging.dir) {
            // Recovery deletes it once its lock is free, and counts it then.
            tracing::warn!("spool: discarding {} failed: {e}", staging.dir.display());
        }
    }

    /// Start writing a new incident: a staging directory the dumper writes into.
    pub fn stage(&self) -> Result<Staging> {
        let now = self.clock.now_ms();
        let id = format!(
            "{now:013}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        );
        self.stage_with_id(&id)
    }

    /// [`stage`](Self::stage) with a chosen id (tests, tools): `[A-Za-z0-9._-]`, ≤ 100 bytes.
    pub fn stage_with_id(&self, id: &str) -> Result<Staging> {
        if !valid_id(id) {
            return Err(Error::BadStaging {
                path: self.root.join("staging").join(id),
                what: "invalid incident id".into(),
            });
        }
        let dir = self.root.join("staging").join(id);
        self.fs
            .create_dir_all(&dir)
            .map_err(io_err(&dir, "mkdir"))?;
        let lp = dir.join(".lock");
        let lock = match try_flock(&lp) {
            Ok(Some(l)) => l,
            Ok(None) => {
                return Err(Error::BadStaging {
                    path: dir,
                    what: "already being written by someone else".into(),
                })
            }
            Err(e) => {
                let _ = self.fs.remove_dir_all(&dir);
                return Err(Error::Io {
                    path: lp,
                    op: "flock",
                    source: e,
                });
            }
        };
        Ok(Staging {
            id: id.to_string(),
            dir,
            _lock: lock,
        })
    }

    /// Commit a staged incident: write its `incident.json`, make room under the quotas (when
    /// the lock can be had), and move it into `incidents/` with one rename. On error the staging
    /// directory is deleted and the loss counted; incidents already in the spool are untouched.
    pub fn commit(&self, staging: Staging, info: NewIncident) -> Result<String> {
        self.commit_with(staging, info, None)
    }

    /// [`commit`](Self::commit) an incident that holds no dump, saying why (`dump_error`: the
    /// dump was refused, failed or left no file). It goes straight to `analysed`: its reason,
    /// samples and inventories are uploaded, with `dumpError` in `meta.json`.
    pub fn commit_without_dump(
        &self,
        staging: Staging,
        info: NewIncident,
        dump_error: String,
    ) -> Result<String> {
        self.commit_with(staging, info, Some(dump_error))
    }

    fn commit_with(
        &self,
        staging: Staging,
        info: NewIncident,
        dump_error: Option<String>,
    ) -> Result<String> {
        let r = self.commit_inner(&staging, info, dump_error);
        if let Err(e) = &r {
            tracing::warn!("spool: commit of {} failed: {e}", staging.id);
            let bytes = fs::dir_size(&*self.fs, &staging.dir).unwrap_or(0);
            let _ = self.fs.remove_dir_all(&staging.dir);
            self.record_loss(Loss {
                what: format!("commit failed: {e}"),
                path: format!("staging/{}", staging.id),
                bytes,
                at_ms: self.clock.now_ms(),
            });
        }
        r
    }

    fn commit_inner(
        &self,
        staging: &Staging,
        info: NewIncident,
        dump_error: Option<String>,
    ) -> Result<String> {
        let mut bytes = 0;
        let mut seen = Vec::new();
        for e in self
            .fs
            .list(&staging.dir)
            .map_err(io_err(&staging.dir, "list"))?
        {
            if e.name == ".lock" {
                continue;
            }
            match FileKind::from_name(&e.name) {
                Some(
                    k @ (FileKind::FullDump
                    | FileKind::MiniDump
                    | FileKind::Fds
                    | FileKind::Threads
                    | FileKind::Report),
                ) if !e.is_dir => {
                    bytes += e.len;
                    seen.push(k);
                }
                _ => {
                    return Err(Error::BadStaging {
                        path: staging.dir.join(&e.name),
                        what: "unexpected file in a staged incident".into(),
                    })
                }
            }
        }
        let has_dump = seen.contains(&FileKind::FullDump) || seen.contains(&FileKind::MiniDump);
        let has_report = seen.contains(&FileKind::Report);
        if !has_dump && !has_report && dump_error.is_none() {
            return Err(Error::BadStaging {
                path: staging.dir.clone(),
                what: "neither a dump, a report nor why there is no dump to commit".into(),
            });
        }
        let inc = Incident {
            version: 1,
            id: staging.id.clone(),
            created_ms: self.clock.now_ms(),
            reason: info.reason,
            samples: info.samples,
            running_info: info.running_info,
            policy_version: info.policy_version,
            // Without a dump there is nothing to analyse.
            state: if has_report || !has_dump {
                State::Analysed
            } else {
                State::Dumped
            },
            analysis_attempts: 0,
            analysis_error: None,
            upload_attempts: 0,
            next_attempt_ms: 0,
            uploads: Vec::new(),
            rejected: None,
            accounting: Accounting::default(),
            written: Some(
                FileKind::ALL
                    .into_iter()
                    .filter(|k| seen.contains(k))
                    .collect(),
            ),
            dump_error,
        };
        let meta = seal(&inc);
        bytes += meta.len() as u64;
        if bytes > self.quotas.max_total_bytes {
            return Err(Error::TooBig {
                bytes,
                quota: self.quotas.max_total_bytes,
            });
        }
        let p = staging.dir.join("incident.json");
        fs::write_atomic(&*self.fs, &p, &meta).map_err(io_err(&p, "write"))?;
        // Make room first, so the spool never holds more than the quotas.
        if let Ok(g) = self.lock() {
            if let Err(e) = g.enforce_quotas(bytes, 1) {
                tracing::warn!("spool: quota enforcement failed: {e}");
            }
        }
        let dst = self.incident_dir(&staging.id);
        self.fs
            .rename(&staging.dir, &dst)
            .map_err(io_err(&staging.dir, "rename"))?;
        // The staging lock file travels with the directory; remove it (harmless if it stays:
        // recovery treats a stray `.lock` as ours).
        let _ = self.fs.remove_file(&dst.join(".lock"));
        for d in [self.incidents_dir(), self.root.join("staging")] {
            self.fs.sync_dir(&d).map_err(io_err(&d, "fsync dir"))?;
        }
        tracing::info!("spool: committed incident {} ({bytes} bytes)", staging.id);
        Ok(staging.id.clone())
    }

    /// Read one incident's `incident.json`.
    pub fn read_incident(&self, id: &str) -> Result<Incident> {
        let p = self.incident_dir(id).join("incident.json");
        let bytes = self.fs.read(&p).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                Error::NotFound(id.to_string())
            } else {
                Error::Io {
                    path: p.clone(),
                    op: "read",
                    source: e,
                }
            }
        })?;
        let inc: Incident = unseal(&bytes).map_err(|what| Error::Corrupt {
            path: p.clone(),
            what,
        })?;
        if inc.id != id {
            return Err(Error::Corrupt {
                path: p,
                what: format!("id {:?} does not match its directory", inc.id),
            });
        }
        Ok(inc)
    }

    /// The spool-wide state (from memory, or spool.json, or defaults if that is corrupt).
    pub fn state(&self) -> SpoolState {
        let mut g = match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        self.load_state(&mut g)
    }

    /// The current state: the in-memory copy if it is newer than the disk, else spool.json
    /// (re-read each time: another process sharing the data dir may have changed it).
    fn load_state(&self, cache: &mut Option<CachedState>) -> SpoolState {
        if let Some(c) = cache.as_ref().filter(|c| c.dirty) {
            return c.state.clone();
        }
        let p = self.root.join("spool.json");
        let (s, raw) = match self.fs.read(&p) {
            Ok(b) if cache.as_ref().is_some_and(|c| c.raw == b) => {
                return cache.as_ref().map(|c| c.state.clone()).unwrap_or_default();
            }
            Ok(b) => match unseal::<SpoolState>(&b) {
                Ok(s) => (s, b),
                Err(what) => {
                    tracing::warn!("spool: {}: {what}; starting from empty state", p.display());
                    let mut s = SpoolState::default();
                    s.pending.add_loss(Loss {
                        what: format!("spool.json corrupt: {what}"),
                        path: "spool.json".into(),
                        bytes: b.len() as u64,
                        at_ms: self.clock.now_ms(),
                    });
                    s.losses_total += 1;
                    // Newer than the disk: counted once, written with the next change.
                    *cache = Some(CachedState {
                        state: s.clone(),
                        dirty: true,
                        raw: Vec::new(),
                    });
                    return s;
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => (SpoolState::default(), Vec::new()),
            Err(e) => {
                tracing::warn!("spool: {}: {e}; using the last known state", p.display());
                return cache.as_ref().map(|c| c.state.clone()).unwrap_or_default();
            }
        };
        *cache = Some(CachedState {
            state: s.clone(),
            dirty: false,
            raw,
        });
        s
    }

    /// Change the spool-wide state and persist it (the in-memory copy changes even if the
    /// write fails; the write is retried with the next change).
    pub fn update_state(&self, f: impl FnOnce(&mut SpoolState)) -> Result<()> {
        let mut g = match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let mut s = self.load_state(&mut g);
        f(&mut s);
        let bytes = seal(&s);
        let p = self.root.join("spool.json");
        let r = fs::write_atomic(&*self.fs, &p, &bytes).map_err(io_err(&p, "write"));
        *g = Some(CachedState {
            state: s,
            dirty: r.is_err(),
            raw: if r.is_ok() { bytes } else { Vec::new() },
        });
        r
    }

    fn record_loss(&self, l: Loss) {
        tracing::warn!("spool: loss: {} ({}, {} bytes)", l.what, l.path, l.bytes);
        if let Err(e) = self.update_state(|s| {
            s.pending.add_loss(l);
            s.losses_total += 1;
        }) {
            tracing::warn!("spool: could not persist the loss count: {e}");
        }
    }
}

/// Proof of holding the spool lock; every change to committed incidents goes through it.
#[derive(Debug)]
pub struct SpoolGuard<'a> {
    spool: &'a Spool,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// One item the quotas count: an incident or a quarantined entry.
#[derive(Debug)]
struct Item {
    path: PathBuf,
    id: String,
    created_ms: u64,
    bytes: u64,
}

impl<'a> SpoolGuard<'a> {
    pub fn spool(&self) -> &'a Spool {
        self.spool
    }
    fn fs(&self) -> &'a dyn Fs {
        &*self.spool.fs
    }

    /// Persist an incident's `incident.json` (atomically).
    pub fn save(&self, inc: &Incident) -> Result<()> {
        let dir = self.spool.incident_dir(&inc.id);
        if self.fs().stat(&dir).is_err() {
            return Err(Error::NotFound(inc.id.clone()));
        }
        let p = dir.join("incident.json");
        fs::write_atomic(self.fs(), &p, &seal(inc)).map_err(io_err(&p, "write"))
    }

    /// The ids of committed incidents, oldest first (ids start with their creation time).
    pub fn ids(&self) -> Result<Vec<String>> {
        let d = self.spool.incidents_dir();
        let mut v: Vec<String> = self
            .fs()
            .list(&d)
            .map_err(io_err(&d, "list"))?
            .into_iter()
            .filter(|e| e.is_dir && valid_id(&e.name))
            .map(|e| e.name)
            .collect();
        v.sort();
        Ok(v)
    }

    /// Every readable incident, oldest first.
    pub fn incidents(&self) -> Result<Vec<Incident>> {
        let mut v = Vec::new();
        for id in self.ids()? {
            match self.spool.read_incident(&id) {
                Ok(i) => v.push(i),
                Err(e) => tracing::warn!("spool: skipping {id}: {e}"),
            }
        }
        v.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        Ok(v)
    }

    /// Delete an acknowledged incident: rename to `.trash-ID`, then remove.
    pub fn delete(&self, id: &str) -> Result<()> {
        let dir = self.spool.incident_dir(id);
        let trash = self.spool.incidents_dir().join(format!(".trash-{id}"));
        self.fs()
            .rename(&dir, &trash)
            .map_err(io_err(&dir, "rename"))?;
        let d = self.spool.incidents_dir();
        let _ = self.fs().sync_dir(&d);
        self.fs()
            .remove_dir_all(&trash)
            .map_err(io_err(&trash, "remove"))?;
        Ok(())
    }

    /// The evictions and losses incident `id`'s meta.json was to report, if the server has not
    /// acknowledged that file: whoever deletes or moves the incident hands them back to pending.
    fn unsent_accounting(&self, id: &str) -> Option<Accounting> {
        self.spool
            .read_incident(id)
            .ok()
            .filter(|i| {
                !i.accounting.is_empty()
                    && !i
                        .uploads
                        .iter()
                        .any(|u| u.kind == FileKind::Meta && u.acked)
            })
            .map(|i| i.accounting)
    }

    /// Give up one planned, unacknowledged file of an uploading incident that no longer
    /// matches its plan (gone, or changed: bit rot, a torn write): it is moved to quarantine if
    /// it is still there, counted as a loss (`what`), and dropped from the plan, so that the
    /// incident's other files still go up.
    pub fn drop_planned(&self, inc: &mut Incident, kind: FileKind, what: &str) -> Result<()> {
        let p = self.spool.incident_dir(&inc.id).join(kind.file_name());
        self.quarantine(&p, what);
        inc.uploads.retain(|u| u.kind != kind || u.acked);
        self.save(inc)
    }

    /// Move an entry (file or directory) into `quarantine/`, log it and count the loss.
    pub fn quarantine(&self, path: &Path, what: &str) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "unnamed".into());
        let parent = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let now = self.spool.now_ms();
        let dst = self.spool.quarantine_dir().join(format!(
            "{now:013}-{}-{}",
            parent.trim_start_matches('.'),
            name.trim_start_matches('.')
        ));
        let bytes = fs::dir_size(self.fs(), path).unwrap_or(0);
        // A whole incident moved aside: the counts it was to report go to the next report (its
        // own loss is recorded below). Carried before the move, as an eviction is recorded
        // before the delete: a crash in between may report them twice, never not at all.
        if path.parent() == Some(self.spool.incidents_dir().as_path()) {
            if let Some(c) = self.unsent_accounting(&name) {
                if let Err(e) = self.spool.update_state(|s| s.pending.merge(c)) {
                    tracing::warn!("spool: could not carry the counts of {name} over: {e}");
                }
            }
        }
        match self.fs().rename(path, &dst) {
            Ok(()) => {
                let _ = self.fs().sync_dir(&self.spool.quarantine_dir());
                tracing::warn!(
                    "spool: {} moved to {}: {what}",
                    path.display(),
                    dst.display()
                );
            }
            Err(e) => tracing::warn!(
                "spool: {}: {what}; could not move it to quarantine: {e}",
                path.display()
            ),
        }
        self.spool.record_loss(Loss {
            what: what.to_string(),
            path: format!("{parent}/{name}"),
            bytes,
            at_ms: now,
        });
    }

    /// Put every incident in its right state after a crash, analyse what was never analysed,
    /// and enforce the quotas.
    pub fn recover(&self, analyser: &mut dyn Analyser) -> Result<Recovery> {
        let mut rec = Recovery::default();
        let fs = self.fs();
        // 1. Half-written dumps: staging directories whose writer is gone.
        let staging = self.spool.root.join("staging");
        for e in fs.list(&staging).map_err(io_err(&staging, "list"))? {
            let p = staging.join(&e.name);
            if !e.is_dir {
                self.quarantine(&p, "unknown file in staging/");
                rec.quarantined += 1;
                continue;
            }
            match try_flock(&p.join(".lock")) {
                Ok(Some(_l)) => {
                    let bytes = fs::dir_size(fs, &p).unwrap_or(0);
                    match fs.remove_dir_all(&p) {
                        Ok(()) => {
                            rec.half_written_deleted += 1;
                            self.spool.record_loss(Loss {
                                what: "half-written dump deleted".into(),
                                path: format!("staging/{}", e.name),
                                bytes,
                                at_ms: self.spool.now_ms(),
                            });
                        }
                        Err(err) => tracing::warn!("spool: {}: remove failed: {err}", p.display()),
                    }
                }
                Ok(None) => {} // still being written by a live process
                Err(err) => tracing::warn!("spool: {}: {err}", p.display()),
            }
        }
        // 2. Committed incidents.
        let inc_dir = self.spool.incidents_dir();
        for e in fs.list(&inc_dir).map_err(io_err(&inc_dir, "list"))? {
            let p = inc_dir.join(&e.name);
            if e.name.starts_with(".trash-") {
                let _ = fs.remove_dir_all(&p);
                continue;
            }
            if fs::is_tmp_name(&e.name) {
                let _ = fs.remove_file(&p);
                continue;
            }
            if !e.is_dir || !valid_id(&e.name) {
                self.quarantine(&p, "unknown entry in incidents/");
                rec.quarantined += 1;
                continue;
            }
            match self.check_incident(&e.name) {
                Ok(true) => rec.incidents += 1,
                Ok(false) => rec.quarantined += 1,
                Err(err) => tracing::warn!("spool: {}: {err}", p.display()),
            }
        }
        // 3. Analyse what was never analysed.
        for id in self.ids()? {
            let Ok(inc) = self.spool.read_incident(&id) else {
                continue;
            };
            if inc.state == State::Dumped {
                match self.analyse(inc, analyser) {
                    Ok(AnalysisOutcome::Done) => rec.analysed += 1,
                    Ok(AnalysisOutcome::Failed) => rec.analysis_failed += 1,
                    Ok(AnalysisOutcome::GaveUp) => rec.analysis_given_up += 1,
                    Err(err) => tracing::warn!("spool: analysing {id}: {err}"),
                }
            }
        }
        // 4. Quotas.
        rec.evicted = self.enforce_quotas(0, 0)?;
        Ok(rec)
    }

    /// Check one committed incident's shape; quarantine what does not fit. Ok(false) if the
    /// whole incident was quarantined.
    fn check_incident(&self, id: &str) -> Result<bool> {
        let fs = self.fs();
        let dir = self.spool.incident_dir(id);
        let mut inc = match self.spool.read_incident(id) {
            Ok(i) => i,
            Err(Error::Corrupt { what, .. }) => {
                self.quarantine(&dir, &format!("incident.json unreadable: {what}"));
                return Ok(false);
            }
            Err(Error::NotFound(_)) => {
                self.quarantine(&dir, "incident directory without incident.json");
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
        let mut present = Vec::new();
        for e in fs.list(&dir).map_err(io_err(&dir, "list"))? {
            let p = dir.join(&e.name);
            if e.name == "incident.json" {
                continue;
            }
            if fs::is_tmp_name(&e.name) || e.name == ".lock" || e.name == ".report.out" {
                let _ = fs.remove_file(&p);
                continue;
            }
            match FileKind::from_name(&e.name) {
                Some(k) if !e.is_dir => present.push((k, e.len)),
                _ => {
                    self.quarantine(&p, "unknown file in an incident");
                }
            }
        }
        let has = |k: FileKind| present.iter().any(|(p, _)| *p == k);
        let bad = match inc.state {
            State::Dumped => !has(FileKind::MiniDump) && !has(FileKind::FullDump),
            // Even without a report or a dump, the reason, samples and inventories go up.
            State::Analysed => false,
            // A planned file gone or changed is given up alone; the others still go up.
            State::Uploading => {
                let gone: Vec<FileKind> = inc
                    .uploads
                    .iter()
                    .filter(|u| {
                        !u.acked
                            && !present
                                .iter()
                                .any(|(k, len)| *k == u.kind && *len == u.size)
                    })
                    .map(|u| u.kind)
                    .collect();
                for k in gone {
                    let what = "planned file gone or changed before its upload";
                    if let Err(e) = self.drop_planned(&mut inc, k, what) {
                        // The next recovery tries again; the rest of this one goes on.
                        tracing::warn!("spool: {id}: dropping {k:?} from its plan: {e}");
                    }
                }
                false
            }
            State::Rejected => false,
        };
        if bad {
            self.quarantine(
                &dir,
                &format!("incident in state {:?} lacks the files it needs", inc.state),
            );
            return Ok(false);
        }
        Ok(true)
    }

    fn analyse(&self, mut inc: Incident, analyser: &mut dyn Analyser) -> Result<AnalysisOutcome> {
        let fs = self.fs();
        let dir = self.spool.incident_dir(&inc.id);
        let max = self.spool.quotas.max_analysis_attempts;
        if inc.analysis_attempts >= max {
            tracing::warn!(
                "spool: {}: analysis failed {} times; uploading it without a report",
                inc.id,
                inc.analysis_attempts
            );
            self.finish_analysis(&mut inc)?;
            return Ok(AnalysisOutcome::GaveUp);
        }
        // Count the attempt before making it: a crash during analysis counts.
        inc.analysis_attempts += 1;
        self.save(&inc)?;
        let exists = |k: FileKind| {
            let p = dir.join(k.file_name());
            fs.stat(&p).ok().map(|_| p)
        };
        let job = AnalysisJob {
            id: inc.id.clone(),
            dir: dir.clone(),
            full_dump: exists(FileKind::FullDump),
            mini_dump: exists(FileKind::MiniDump),
            report_out: dir.join(".report.out"),
            attempt: inc.analysis_attempts,
        };
        let _ = fs.remove_file(&job.report_out);
        let r = analyser.analyse(&job).and_then(|()| {
            let b = fs
                .read(&job.report_out)
                .map_err(|e| format!("{}: {e}", job.report_out.display()))?;
            serde_json::from_slice::<Value>(&b)
                .map_err(|e| format!("{}: not JSON: {e}", job.report_out.display()))?;
            Ok(b)
        });
        let _ = fs.remove_file(&job.report_out);
        match r {
            Ok(report) => {
                let p = dir.join(FileKind::Report.file_name());
                fs::write_atomic(fs, &p, &report).map_err(io_err(&p, "write"))?;
                inc.analysis_error = None;
                // (A record from before the file list stays without one: nothing is checked.)
                if let Some(w) = inc
                    .written
                    .as_mut()
                    .filter(|w| !w.contains(&FileKind::Report))
                {
                    w.push(FileKind::Report);
                }
                self.finish_analysis(&mut inc)?;
                Ok(AnalysisOutcome::Done)
            }
            Err(what) => {
                tracing::warn!(
                    "spool: {}: analysis attempt {} of {max} failed: {what}",
                    inc.id,
                    inc.analysis_attempts
                );
                inc.analysis_error = Some(what);
                if inc.analysis_attempts >= max {
                    self.finish_analysis(&mut inc)?;
                    return Ok(AnalysisOutcome::GaveUp);
                }
                self.save(&inc)?;
                Ok(AnalysisOutcome::Failed)
            }
        }
    }

    fn finish_analysis(&self, inc: &mut Incident) -> Result<()> {
        inc.state = State::Analysed;
        self.save(inc)?;
        if !self.spool.quotas.keep_full_dump {
            let p = self
                .spool
                .incident_dir(&inc.id)
                .join(FileKind::FullDump.file_name());
            let _ = self.fs().remove_file(&p);
        }
        Ok(())
    }

    /// Freeze an analysed incident for upload: compress the mini dump once, hash every file,
    /// write meta.json (with the evictions and losses since the last report, and the files the
    /// incident held that are gone, each also logged as a warning: the rest still goes up), and
    /// record the plan (state `uploading`). Idempotent for an incident already uploading.
    pub fn plan_upload(&self, id: &str) -> Result<Incident> {
        let fs = self.fs();
        let mut inc = self.spool.read_incident(id)?;
        if inc.state != State::Analysed {
            return Ok(inc);
        }
        let dir = self.spool.incident_dir(id);
        let mini = dir.join(FileKind::MiniDump.file_name());
        let gz = dir.join(FileKind::MiniDumpGz.file_name());
        if fs.stat(&mini).is_ok() {
            compress(fs, &mini, &gz).map_err(io_err(&gz, "compress"))?;
        }
        // Every file but meta.json first: meta.json names those that should be here and are not.
        let mut uploads = Vec::new();
        let mut missing = Vec::new();
        for k in [
            FileKind::Report,
            FileKind::Fds,
            FileKind::Threads,
            FileKind::MiniDumpGz,
        ] {
            let p = dir.join(k.file_name());
            match hash_file(fs, &p) {
                Ok((sha256, size)) => uploads.push(Upload::planned(k, sha256, size)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if expected(&inc, k) {
                        missing.push(k.file_name());
                    }
                }
                Err(e) => {
                    return Err(Error::Io {
                        path: p,
                        op: "hash",
                        source: e,
                    })
                }
            }
        }
        if !missing.is_empty() {
            tracing::warn!(
                "spool: {id}: {} should be here and {} not; uploading what is left, with meta.json \
                 naming what is missing",
                missing.join(", "),
                if missing.len() == 1 { "is" } else { "are" }
            );
        }
        let pending = self.spool.state().pending;
        let meta = serde_json::json!({
            "id": inc.id,
            "createdMs": inc.created_ms,
            "reason": inc.reason,
            "samples": inc.samples,
            "runningInfo": inc.running_info,
            "policyVersion": inc.policy_version,
            "analysisAttempts": inc.analysis_attempts,
            "analysisError": inc.analysis_error,
            "dumpError": inc.dump_error,
            // null: an incident recorded before the spool listed its files (nothing checked).
            "missing": inc.written.as_ref().map(|_| &missing),
            "evictions": pending.evictions,
            "evictedBytes": pending.evicted_bytes,
            "losses": pending.losses,
            "evicted": pending.eviction_records,
            "lost": pending.loss_records,
        });
        let mp = dir.join(FileKind::Meta.file_name());
        let mbytes = serde_json::to_vec_pretty(&meta).unwrap_or_default();
        fs::write_atomic(fs, &mp, &mbytes).map_err(io_err(&mp, "write"))?;
        let (sha256, size) = hash_file(fs, &mp).map_err(io_err(&mp, "hash"))?;
        uploads.insert(0, Upload::planned(FileKind::Meta, sha256, size));
        inc.uploads = uploads;
        inc.accounting = pending.clone();
        inc.state = State::Uploading;
        self.save(&inc)?;
        // The plan is durable: the counts now travel with this incident.
        if !pending.is_empty() {
            let _ = self.spool.update_state(|s| {
                if s.pending == pending {
                    s.pending = Accounting::default();
                }
            });
        }
        let _ = fs.remove_file(&mini);
        // The plan added meta.json and the compressed copy: back under the quotas (this may
        // evict the incident itself if it is the oldest and the spool is full).
        if let Err(e) = self.enforce_quotas(0, 0) {
            tracing::warn!("spool: quota enforcement failed: {e}");
        }
        if fs.stat(&dir).is_err() {
            return Err(Error::NotFound(id.to_string()));
        }
        Ok(inc)
    }

    /// Evict oldest first until the spool plus an incoming incident of `incoming_bytes` and
    /// `incoming_count` fits the quotas. Returns how many items were evicted.
    pub fn enforce_quotas(&self, incoming_bytes: u64, incoming_count: usize) -> Result<u32> {
        let fs = self.fs();
        let q = &self.spool.quotas;
        let now = self.spool.now_ms();
        let mut items = Vec::new();
        let inc_dir = self.spool.incidents_dir();
        for e in fs.list(&inc_dir).map_err(io_err(&inc_dir, "list"))? {
            if !e.is_dir || !valid_id(&e.name) {
                continue;
            }
            let path = inc_dir.join(&e.name);
            // Ids made by `Spool::stage` start with their creation time: no need to parse
            // incident.json for those.
            let created_ms = match id_time(&e.name) {
                Some(t) => t,
                None => match self.spool.read_incident(&e.name) {
                    Ok(i) => i.created_ms,
                    Err(_) => e.mtime_ms,
                },
            };
            items.push(Item {
                bytes: fs::dir_size(fs, &path).unwrap_or(0),
                path,
                id: e.name,
                created_ms,
            });
        }
        let qd = self.spool.quarantine_dir();
        for e in fs.list(&qd).map_err(io_err(&qd, "list"))? {
            let path = qd.join(&e.name);
            if e.name.starts_with(".trash-") {
                // An eviction below that a kill cut short between its rename and the removal:
                // it is recorded already, so the leftover goes without being counted again.
                let _ = if e.is_dir {
                    fs.remove_dir_all(&path)
                } else {
                    fs.remove_file(&path)
                };
                continue;
            }
            // Quarantined names start with the time they were moved aside.
            let created_ms = e
                .name
                .get(..13)
                .and_then(|s| s.parse().ok())
                .unwrap_or(e.mtime_ms);
            items.push(Item {
                bytes: fs::dir_size(fs, &path).unwrap_or(0),
                path,
                id: format!("quarantine/{}", e.name),
                created_ms,
            });
        }
        items.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        let mut total: u64 = items.iter().map(|i| i.bytes).sum::<u64>() + incoming_bytes;
        let mut count = items.len() + incoming_count;
        let max_age = q.max_age.as_millis() as u64;
        let mut evicted = 0;
        for it in items {
            let quota = if now.saturating_sub(it.created_ms) > max_age {
                "age"
            } else if count > q.max_count {
                "count"
            } else if total > q.max_total_bytes {
                "bytes"
            } else {
                continue;
            };
            // Counts that were to travel with this incident's meta.json, not yet acknowledged,
            // go back to pending so the next report carries them.
            let carried = self.unsent_accounting(&it.id);
            // Record the eviction before deleting: a crash in between leaves an incident that
            // is reported as evicted and may still be uploaded, never one that vanished
            // without a trace.
            let ev = Eviction {
                id: it.id.clone(),
                quota: quota.to_string(),
                bytes: it.bytes,
                created_ms: it.created_ms,
                at_ms: now,
            };
            if let Err(e) = self.spool.update_state(|s| {
                if let Some(c) = carried {
                    s.pending.merge(c);
                }
                s.pending.add_eviction(ev);
                s.evictions_total += 1;
            }) {
                tracing::warn!("spool: cannot record the eviction of {}: {e}; kept", it.id);
                continue;
            }
            let r = if fs.stat(&it.path).map(|e| e.is_dir).unwrap_or(false) {
                let trash = it.path.with_file_name(format!(
                    ".trash-{}",
                    it.path
                        .file_name()
                        .map(|n| n.to_string_lossy())
                        .unwrap_or_default()
                ));
                fs.rename(&it.path, &trash)
                    .and_then(|()| fs.remove_dir_all(&trash))
            } else {
                fs.remove_file(&it.path)
            };
            match r {
                Ok(()) => {
                    tracing::warn!(
                        "spool: evicted {} ({} bytes, created {} ms ago): {quota} quota",
                        it.id,
                        it.bytes,
                        now.saturating_sub(it.created_ms)
                    );
                    total -= it.bytes;
                    count -= 1;
                    evicted += 1;
                }
                Err(e) => tracing::warn!("spool: evicting {}: {e}", it.path.display()),
            }
        }
        Ok(evicted)
    }
}

/// Whether `kind` should be in `inc`'s directory when its upload is planned: it was seen written
/// (the mini dump counts for its compressed copy, made by the planning itself). The full dump is
/// never uploaded, and a record without a file list expects nothing.
fn expected(inc: &Incident, kind: FileKind) -> bool {
    let seen = |k| inc.written.as_ref().is_some_and(|w| w.contains(&k));
    match kind {
        FileKind::MiniDumpGz => seen(FileKind::MiniDump) || seen(FileKind::MiniDumpGz),
        FileKind::Report | FileKind::Fds | FileKind::Threads => seen(kind),
        FileKind::Meta | FileKind::FullDump | FileKind::MiniDump => false,
    }
}

enum AnalysisOutcome {
    Done,
    Failed,
    GaveUp,
}

/// gzip `src` into `dst` through `fs` (temporary file, fsync, rename): done once per incident,
/// so resumed uploads see the same bytes.
fn compress(fs: &dyn Fs, src: &Path, dst: &Path) -> io::Result<()> {
    let tmp = fs::tmp_path(dst);
    let r = (|| {
        let mut input = fs.open(src)?;
        let out = fs.create(&tmp)?;
        let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::new(6));
        io::copy(&mut input, &mut enc)?;
        let mut out = enc.finish()?;
        out.flush()?;
        out.sync()?;
        drop(out);
        fs.rename(&tmp, dst)?;
        if let Some(d) = dst.parent() {
            fs.sync_dir(d)?;
        }
        Ok(())
    })();
    if r.is_err() {
        let _ = fs.remove_file(&tmp);
    }
    r
}

#[cfg(test)]
mod tests;
