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
//! ROOT/staging/.new-ID-RAND/     a staging directory being built (or removed): it takes its
//!                                name only once its `.lock` is held, and leaves it before it is
//!                                removed, so that a recovery never takes a live writer's for a
//!                                dead one's; removed without a loss counted when found unlocked
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
//! - Every change of `incident.json` and `spool.json` is a [`fs::write_atomic`] (the workspace's
//!   one atomic write, also the gzip's, streaming): temporary file, fsync, rename, directory
//!   fsync. Recovery removes the temporaries ([`fs::is_tmp_name`]) any writer left. Both files
//!   carry the SHA-256 of their body: a flipped bit or a torn write is detected, never trusted.
//! - An incident enters `incidents/` by one rename of a complete staging directory, after its
//!   files (fsynced by the commit: the writer wrote them with plain writes) and then its
//!   `incident.json` are durable. A staging directory whose writer is gone (its `.lock` is free) is
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
//! - The age quota counts the time the spool watched an item (incident or quarantined entry),
//!   never its creation time: the wall clock can be wrong (an RTC reset to 2000 before network
//!   time, a date set days ahead). `spool.json` keeps a watched-time count ([`Watch`]): at each
//!   enforcement the wall clock's step since the last look is added, counted as 0 when the clock
//!   went back and as at most one day ([`MAX_WATCHED_STEP_MS`]) when it leapt forward. Each item
//!   is aged from the watched time when the quotas first saw it (`firstSeen`). So a clock set
//!   right, or jumping 14 days, ages an incident by at most a day, while an incident watched
//!   through 14 days of use (a pass a day or more often) is evicted. The price: on a device
//!   where the app does not run for a while, that while counts one day. Items already in a
//!   spool when this rule came are aged from their first enforcement under it.
//! - Quotas (bytes, count, age) are enforced oldest first, counting the incident about to be
//!   committed, so the spool never exceeds them after any public call returns (when the lock
//!   can be had; otherwise the holder enforces them on its next pass).
//! - All I/O of the spool's data goes through [`Fs`]; nothing here panics on bad input or an I/O
//!   error.
#![forbid(unsafe_code)]

pub use sys::fs;
mod gzip;
mod plan;
mod quotas;
mod read;
mod recover;
mod staging;
mod state;

use staging::try_flock;
pub use staging::Staging;
use state::{seal, unseal, CachedState};

pub use fs::{Entry, Fault, FaultFs, Fs, FsFile, FsRead, RealFs};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::{self, Read};
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

/// Limits of the spool, from the policy (`policy::configs`).
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

/// The default policy's quotas (built in `policy::configs`; the spool keeps no defaults of its
/// own).
impl Default for Quotas {
    fn default() -> Self {
        (&crate::policy::Policy::default()).into()
    }
}

pub use analyze::files::FileKind;

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
    /// The spool's own count of elapsed time, by which the age quota ages items (see the
    /// module doc). Left out of the JSON when `None`, so older files keep their seal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<Watch>,
    /// Per item (an incident's id, or `quarantine/NAME`): the watched time
    /// ([`Watch::watched_ms`]) when the quotas first saw it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub first_seen: std::collections::BTreeMap<String, u64>,
}

/// Time as the spool watched it pass: the wall clock's steps between two looks, each counted
/// from 0 (the clock went back) to [`MAX_WATCHED_STEP_MS`] (a jump forward, or a device or app
/// not running for a while, counts one day).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Watch {
    /// The wall clock at the last look (ms since the epoch).
    pub wall_ms: u64,
    /// Watched time up to then.
    pub watched_ms: u64,
}

/// The most one step between two looks at the clock adds to the watched time: a day.
pub const MAX_WATCHED_STEP_MS: u64 = 24 * 3600 * 1000;

impl Watch {
    /// The watch after a look at `now`.
    pub fn at(&self, now: u64) -> Watch {
        Watch {
            wall_ms: now,
            watched_ms: self.watched_ms + now.saturating_sub(self.wall_ms).min(MAX_WATCHED_STEP_MS),
        }
    }
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
        let inc: Incident = unseal(&bytes, read::incident).map_err(|what| Error::Corrupt {
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
}

/// Proof of holding the spool lock; every change to committed incidents goes through it.
#[derive(Debug)]
pub struct SpoolGuard<'a> {
    spool: &'a Spool,
    _lock: nix::fcntl::Flock<std::fs::File>,
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
        sys::order::sort_by(&mut v, |a, b| a.cmp(b));
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
        sys::order::sort_by(&mut v, |a, b| {
            (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id))
        });
        Ok(v)
    }

    /// Delete an acknowledged incident: rename to `.trash-ID`, then remove. Where the rename
    /// fails (a full disk can refuse it), the incident is removed in place, its files first and
    /// `incident.json` last: a kill in between leaves a record whose files are all acknowledged,
    /// which the next pass deletes again. Deleting is what frees a full disk.
    pub fn delete(&self, id: &str) -> Result<()> {
        let dir = self.spool.incident_dir(id);
        let trash = self.spool.incidents_dir().join(format!(".trash-{id}"));
        if let Err(e) = self.fs().rename(&dir, &trash) {
            if self.fs().stat(&dir).is_err() {
                return Err(Error::Io {
                    path: dir,
                    op: "rename",
                    source: e,
                });
            }
            tracing::warn!(
                "spool: {}: rename failed ({e}); removing it in place",
                dir.display()
            );
            for f in self.fs().list(&dir).map_err(io_err(&dir, "list"))? {
                if f.name != "incident.json" {
                    let p = dir.join(&f.name);
                    let r = if f.is_dir {
                        self.fs().remove_dir_all(&p)
                    } else {
                        self.fs().remove_file(&p)
                    };
                    r.map_err(io_err(&p, "remove"))?;
                }
            }
            let record = dir.join("incident.json");
            self.fs()
                .remove_file(&record)
                .map_err(io_err(&record, "remove"))?;
            return self
                .fs()
                .remove_dir_all(&dir)
                .map_err(io_err(&dir, "remove"));
        }
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
}
#[cfg(test)]
mod tests;
