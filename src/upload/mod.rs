//! Uploads: the tus 1.0 protocol, retries, backoff, network conditions, and a development
//! collector ([`collector`]).
//!
//! Owns getting spooled incidents to the server once and intact:
//! - [`run_once`] takes the spool lock, plans each analysed incident (mini dump gzip-compressed
//!   once, `meta.json` frozen), and uploads its files small first (meta, report, inventories,
//!   then the compressed mini dump) with tus: POST (creation) → URL persisted in
//!   `incident.json` → PATCH; after a restart, HEAD gives the server's offset and the upload
//!   resumes from there.
//! - An incident is deleted only after every file is acknowledged: the final offset equals the
//!   size, and the SHA-256 the server reports (when it reports one, as [`collector`] does) equals
//!   ours. A mismatch throws the upload away and starts it again.
//! - 413 and other 4xx (except 408 and 429) are final: the incident is marked `rejected` with
//!   the reason. 429 stops the pass and its `Retry-After` is stored in `spool.json`, so a restart
//!   waits too. 408, 5xx, network errors, a PATCH answered without progress (after 8 rounds
//!   of asking HEAD) and a planned file that cannot be read for a reason other than being gone
//!   (EMFILE, EIO) count one attempt; the next is delayed by capped exponential backoff with
//!   jitter, stored in `incident.json`; after `max_attempts` the incident is marked `rejected`.
//! - A daily byte budget (counted in `spool.json` before bytes are sent) and "unmetered only"
//!   (the caller says what the network is) bound what is spent.
//! - Only `https://` URLs, or `http://` to a loopback address, are contacted.
//! - [`run_once`] blocks: the agent calls it from a blocking worker thread, never from the
//!   sampling loop or the app's main thread.
#![forbid(unsafe_code)]

pub mod collector;
pub mod http;
pub mod tus;

use crate::spool::{self, Error as SpoolError, FileKind, Incident, Spool, SpoolGuard, State};
use rand::Rng;
use std::io::{Seek, SeekFrom};
use std::time::Duration;
use tus::{Client, TusError};

const DAY_MS: u64 = 24 * 3600 * 1000;

/// Errors of the upload module (the per-incident outcomes are in [`Summary`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("upload endpoint {0:?} refused: only https:// or http:// to a loopback address")]
    Insecure(String),
    #[error(transparent)]
    Spool(#[from] SpoolError),
}

/// Upload settings (the policy maps onto this).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The tus creation endpoint, e.g. `https://reports.example.com/files/`.
    pub endpoint: String,
    pub connect_timeout: Duration,
    /// Read/write timeout of one request: a stalled server costs at most this (plus the
    /// body's time at `min_rate`).
    pub io_timeout: Duration,
    /// Slowest link assumed, bytes per second: a PATCH of n bytes may take
    /// `io_timeout + n / min_rate`.
    pub min_rate: u64,
    /// Bytes per PATCH.
    pub chunk_size: u64,
    /// Failed attempts (408, 5xx, network) per incident before it is given up.
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// Used when a 429 has no readable `Retry-After`.
    pub default_retry_after: Duration,
    /// At most this many `Retry-After` seconds are obeyed.
    pub max_retry_after: Duration,
    /// Bytes sent per UTC day, all incidents together.
    pub daily_byte_budget: u64,
    /// Upload only on unmetered networks.
    pub unmetered_only: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            endpoint: String::new(),
            connect_timeout: Duration::from_secs(10),
            io_timeout: Duration::from_secs(30),
            min_rate: 16 * 1024,
            chunk_size: 1024 * 1024,
            max_attempts: 10,
            backoff_base: Duration::from_secs(30),
            backoff_cap: Duration::from_secs(6 * 3600),
            default_retry_after: Duration::from_secs(60),
            max_retry_after: Duration::from_secs(24 * 3600),
            daily_byte_budget: 64 * 1024 * 1024,
            unmetered_only: true,
        }
    }
}

/// The network as the app sees it (on Android the facade passes ConnectivityManager's view).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    pub connected: bool,
    pub metered: bool,
}

impl Network {
    pub const UNMETERED: Network = Network {
        connected: true,
        metered: false,
    };
    pub const METERED: Network = Network {
        connected: true,
        metered: true,
    };
    pub const OFFLINE: Network = Network {
        connected: false,
        metered: false,
    };
}

/// Why a pass stopped before the spool was empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// Another process or thread holds the spool lock (it uploads instead).
    Busy,
    Offline,
    /// Metered network and `unmetered_only`.
    Metered,
    /// The server said 429; not before this time (ms since the epoch).
    RetryAfter(u64),
    /// The daily byte budget is spent.
    BudgetExhausted,
    /// A retryable failure; the incident waits until this time (ms since the epoch).
    Backoff {
        id: String,
        until_ms: u64,
        error: String,
    },
}

/// What a pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Incidents acknowledged (and deleted), in order.
    pub acknowledged: Vec<String>,
    /// Incidents marked rejected in this pass: (id, reason).
    pub rejected: Vec<(String, String)>,
    /// Incidents moved to quarantine because their files no longer matched the plan.
    pub quarantined: Vec<String>,
    /// Body bytes sent in PATCH requests.
    pub bytes_sent: u64,
    /// Resumed uploads: (id, kind, offset the server had).
    pub resumed: Vec<(String, &'static str, u64)>,
    /// Incidents skipped because their backoff has not expired.
    pub waiting: u32,
    pub stopped: Option<Stop>,
}

/// One incident's upload failed.
enum Fail {
    RetryAfter(Option<u64>),
    Retryable(String),
    Rejected(String),
    Budget,
    Local(String),
    Spool(SpoolError),
}

impl From<SpoolError> for Fail {
    fn from(e: SpoolError) -> Fail {
        Fail::Spool(e)
    }
}

impl From<TusError> for Fail {
    fn from(e: TusError) -> Fail {
        match &e {
            TusError::Status {
                status: 429,
                retry_after,
                ..
            } => Fail::RetryAfter(*retry_after),
            TusError::Status { status: 408, .. } => Fail::Retryable(e.to_string()),
            TusError::Status { status, .. } if (400..500).contains(status) => {
                Fail::Rejected(e.to_string())
            }
            TusError::Insecure(_) => Fail::Rejected(e.to_string()),
            _ => Fail::Retryable(e.to_string()),
        }
    }
}

/// The delay before attempt `attempts + 1`: `base · 2^(attempts-1)`, capped, times a random
/// factor in [0.5, 1].
pub fn backoff(cfg: &Config, attempts: u32) -> Duration {
    let base = cfg.backoff_base.as_millis() as u64;
    let cap = cfg.backoff_cap.as_millis() as u64;
    let exp = attempts.saturating_sub(1).min(40);
    let d = base.saturating_mul(1u64 << exp).min(cap);
    let jitter = rand::thread_rng().gen_range(0.5..=1.0);
    Duration::from_millis((d as f64 * jitter) as u64)
}

/// Upload what the spool holds, once, then return. Blocking: call it from a worker thread.
pub fn run_once(spool: &Spool, cfg: &Config, net: Network) -> Result<Summary, Error> {
    if !tus::allowed_url(&cfg.endpoint) {
        return Err(Error::Insecure(cfg.endpoint.clone()));
    }
    let mut sum = Summary::default();
    let guard = match spool.lock() {
        Ok(g) => g,
        Err(SpoolError::Locked(_)) => {
            sum.stopped = Some(Stop::Busy);
            return Ok(sum);
        }
        Err(e) => return Err(e.into()),
    };
    if !net.connected {
        sum.stopped = Some(Stop::Offline);
        return Ok(sum);
    }
    if cfg.unmetered_only && net.metered {
        sum.stopped = Some(Stop::Metered);
        return Ok(sum);
    }
    let now = spool.now_ms();
    let until = spool.state().retry_after_until_ms;
    // A wait longer than any we would accept means the clock was set back: ignore it.
    if now < until && until - now <= cfg.max_retry_after.as_millis() as u64 {
        sum.stopped = Some(Stop::RetryAfter(until));
        return Ok(sum);
    }
    if let Err(e) = guard.enforce_quotas(0, 0) {
        tracing::warn!("upload: quota enforcement failed: {e}");
    }
    let client = Client::new(
        &cfg.endpoint,
        cfg.connect_timeout,
        cfg.io_timeout,
        cfg.min_rate,
    );
    for (n, inc) in guard.incidents()?.into_iter().enumerate() {
        if n > 0 {
            // Incidents committed meanwhile (commits do not wait for this lock) count too.
            if let Err(e) = guard.enforce_quotas(0, 0) {
                tracing::warn!("upload: quota enforcement failed: {e}");
            }
        }
        if !matches!(inc.state, State::Analysed | State::Uploading)
            || spool.fs().stat(&spool.incident_dir(&inc.id)).is_err()
        {
            continue; // not ready, or evicted meanwhile
        }
        let now = spool.now_ms();
        // (A backoff longer than the cap means the clock was set back: it has expired.)
        if inc.next_attempt_ms > now
            && inc.next_attempt_ms - now <= cfg.backoff_cap.as_millis() as u64
        {
            sum.waiting += 1;
            continue;
        }
        if budget_left(spool, cfg) == 0 {
            sum.stopped = Some(Stop::BudgetExhausted);
            break;
        }
        let id = inc.id.clone();
        let mut inc = if inc.state == State::Analysed {
            match guard.plan_upload(&id) {
                Ok(i) => i,
                Err(SpoolError::NotFound(_)) => continue, // evicted by the quotas
                Err(e) => {
                    tracing::warn!("upload: planning {id}: {e}");
                    continue;
                }
            }
        } else {
            inc
        };
        match upload_incident(&guard, &client, cfg, &mut inc, &mut sum) {
            Ok(()) => match guard.delete(&id) {
                Ok(()) => {
                    tracing::info!("upload: incident {id} acknowledged by the server; deleted");
                    sum.acknowledged.push(id);
                }
                Err(e) => tracing::warn!("upload: {id} acknowledged but not deleted: {e}"),
            },
            Err(Fail::RetryAfter(secs)) => {
                let wait = secs
                    .map(Duration::from_secs)
                    .unwrap_or(cfg.default_retry_after)
                    .min(cfg.max_retry_after);
                let until = spool.now_ms() + wait.as_millis() as u64;
                tracing::warn!(
                    "upload: 429 from the server; waiting {wait:?} (kept across restarts)"
                );
                if let Err(e) = spool.update_state(|s| s.retry_after_until_ms = until) {
                    tracing::warn!("upload: could not persist Retry-After: {e}");
                }
                sum.stopped = Some(Stop::RetryAfter(until));
                break;
            }
            Err(Fail::Budget) => {
                tracing::info!("upload: daily byte budget spent; resuming tomorrow");
                sum.stopped = Some(Stop::BudgetExhausted);
                break;
            }
            Err(Fail::Retryable(error)) => {
                inc.upload_attempts += 1;
                if inc.upload_attempts >= cfg.max_attempts {
                    let reason = format!(
                        "gave up after {} failed attempts; last: {error}",
                        inc.upload_attempts
                    );
                    reject(&guard, &mut inc, reason, &mut sum);
                    continue;
                }
                let until_ms =
                    spool.now_ms() + backoff(cfg, inc.upload_attempts).as_millis() as u64;
                inc.next_attempt_ms = until_ms;
                tracing::warn!(
                    "upload: {id}: attempt {} of {} failed: {error}; next after {until_ms}",
                    inc.upload_attempts,
                    cfg.max_attempts
                );
                if let Err(e) = guard.save(&inc) {
                    tracing::warn!("upload: {id}: could not persist the backoff: {e}");
                }
                sum.stopped = Some(Stop::Backoff {
                    id,
                    until_ms,
                    error,
                });
                break;
            }
            Err(Fail::Rejected(reason)) => reject(&guard, &mut inc, reason, &mut sum),
            Err(Fail::Local(what)) => {
                guard.quarantine(&spool.incident_dir(&id), &what);
                sum.quarantined.push(id);
            }
            Err(Fail::Spool(SpoolError::NotFound(_))) => {
                tracing::warn!("upload: {id} vanished (evicted) during its upload");
            }
            Err(Fail::Spool(e)) => {
                tracing::warn!("upload: {id}: spool error: {e}; stopping this pass");
                return Err(e.into());
            }
        }
    }
    Ok(sum)
}

fn reject(guard: &SpoolGuard<'_>, inc: &mut Incident, reason: String, sum: &mut Summary) {
    tracing::warn!("upload: incident {} rejected: {reason}", inc.id);
    inc.state = State::Rejected;
    inc.rejected = Some(reason.clone());
    // Evictions and losses this incident's meta.json was to report go to the next one.
    let meta_sent = inc
        .uploads
        .iter()
        .any(|u| u.kind == FileKind::Meta && u.acked);
    if !meta_sent && !inc.accounting.is_empty() {
        let carried = std::mem::take(&mut inc.accounting);
        if let Err(e) = guard.spool().update_state(|s| s.pending.merge(carried)) {
            tracing::warn!("upload: could not carry the counts of {} over: {e}", inc.id);
        }
    }
    if let Err(e) = guard.save(inc) {
        tracing::warn!("upload: {}: could not persist the rejection: {e}", inc.id);
    }
    sum.rejected.push((inc.id.clone(), reason));
}

fn upload_incident(
    guard: &SpoolGuard<'_>,
    client: &Client,
    cfg: &Config,
    inc: &mut Incident,
    sum: &mut Summary,
) -> Result<(), Fail> {
    let spool = guard.spool();
    let dir = spool.incident_dir(&inc.id);
    // Never send bytes that differ from the plan (bit rot, a torn file).
    for u in inc.uploads.iter().filter(|u| !u.acked) {
        let path = dir.join(u.kind.file_name());
        match spool::hash_file(spool.fs(), &path) {
            Ok((s, n)) if s == u.sha256 && n == u.size => {}
            Ok((s, n)) => {
                return Err(Fail::Local(format!(
                    "{}: {n} bytes with SHA-256 {s}, planned {} bytes with {}",
                    path.display(),
                    u.size,
                    u.sha256
                )))
            }
            Err(e) => return Err(unreadable(&path, e)),
        }
    }
    // Create every missing upload, then persist all URLs with one write, before any byte of
    // content goes out: a restart resumes them with HEAD.
    let mut fresh = vec![false; inc.uploads.len()];
    let mut created = Ok(());
    for (i, f) in fresh.iter_mut().enumerate() {
        let u = &inc.uploads[i];
        if u.acked || u.url.is_some() {
            continue;
        }
        match create(client, inc, i) {
            Ok(url) => {
                inc.uploads[i].url = Some(url);
                *f = true;
            }
            Err(e) => {
                created = Err(e);
                break;
            }
        }
    }
    if fresh.iter().any(|f| *f) {
        guard.save(inc)?;
    }
    created?;
    for (i, f) in fresh.into_iter().enumerate() {
        if inc.uploads[i].acked {
            continue;
        }
        upload_file(guard, client, cfg, inc, i, f, sum)?;
        // Kept in memory: persisted with the next save; after a crash, HEAD says it again.
        inc.uploads[i].acked = true;
    }
    Ok(())
}

/// A planned file that cannot be read: gone, the incident no longer matches its plan (moved
/// aside); any other error (out of file descriptors, EIO, a permission) may pass, so it is a
/// failed attempt, retried with backoff, and never moves an intact incident into quarantine.
fn unreadable(path: &std::path::Path, e: std::io::Error) -> Fail {
    let what = format!("{}: {e}", path.display());
    if e.kind() == std::io::ErrorKind::NotFound {
        Fail::Local(what)
    } else {
        Fail::Retryable(what)
    }
}

fn create(client: &Client, inc: &Incident, i: usize) -> Result<String, Fail> {
    let u = &inc.uploads[i];
    Ok(client.create(
        u.size,
        &[
            ("incident", &inc.id),
            ("kind", u.kind.upload_kind()),
            ("sha256", &u.sha256),
            ("filename", u.kind.file_name()),
        ],
    )?)
}

/// Bytes left in today's budget.
fn budget_left(spool: &Spool, cfg: &Config) -> u64 {
    let st = spool.state();
    let used = if st.budget_day == spool.now_ms() / DAY_MS {
        st.bytes_sent_today
    } else {
        0
    };
    cfg.daily_byte_budget.saturating_sub(used)
}

/// Reserve up to `want` bytes of today's budget; returns how many may be sent.
fn reserve(spool: &Spool, cfg: &Config, want: u64) -> Result<u64, Fail> {
    let day = spool.now_ms() / DAY_MS;
    let n = want.min(budget_left(spool, cfg));
    if n == 0 {
        return Err(Fail::Budget);
    }
    spool.update_state(|s| {
        if s.budget_day != day {
            s.budget_day = day;
            s.bytes_sent_today = 0;
        }
        s.bytes_sent_today += n;
    })?;
    Ok(n)
}

fn upload_file(
    guard: &SpoolGuard<'_>,
    client: &Client,
    cfg: &Config,
    inc: &mut Incident,
    i: usize,
    mut fresh: bool,
    sum: &mut Summary,
) -> Result<(), Fail> {
    let spool = guard.spool();
    let kind: FileKind = inc.uploads[i].kind;
    let path = spool.incident_dir(&inc.id).join(kind.file_name());
    let size = inc.uploads[i].size;
    let upload_kind = kind.upload_kind();
    for _round in 0..8 {
        let mut offset;
        match inc.uploads[i].url.clone() {
            None => {
                let url = create(client, inc, i)?;
                inc.uploads[i].url = Some(url);
                guard.save(inc)?;
                offset = 0;
            }
            Some(_) if fresh => {
                fresh = false;
                offset = 0;
            }
            Some(url) => match client.head(&url)? {
                None => {
                    tracing::info!("upload: {url} unknown to the server; creating it again");
                    inc.uploads[i].url = None;
                    guard.save(inc)?;
                    continue;
                }
                Some(h) => {
                    if h.length.is_some_and(|l| l != size) || h.offset > size {
                        tracing::warn!(
                            "upload: {url}: server has offset {} length {:?}, ours is {size}; starting again",
                            h.offset,
                            h.length
                        );
                        inc.uploads[i].url = None;
                        guard.save(inc)?;
                        continue;
                    }
                    offset = h.offset;
                    if offset > 0 {
                        sum.resumed.push((inc.id.clone(), upload_kind, offset));
                    }
                    if offset == size {
                        return verify(guard, inc, i, h.sha256.as_deref());
                    }
                }
            },
        }
        let url = inc.uploads[i].url.clone().unwrap_or_default();
        let mut file = spool.fs().open(&path).map_err(|e| unreadable(&path, e))?;
        // One budget reservation for what is left of the file (counted before it is sent).
        let mut allowed = reserve(spool, cfg, size - offset)?;
        'send: while offset < size {
            if allowed == 0 {
                allowed = reserve(spool, cfg, size - offset)?;
            }
            let n = (size - offset).min(cfg.chunk_size.max(1)).min(allowed);
            file.seek(SeekFrom::Start(offset))
                .map_err(|e| Fail::Local(format!("{}: {e}", path.display())))?;
            match client.patch(&url, offset, &mut file, n) {
                Ok(p) => {
                    sum.bytes_sent += n;
                    allowed -= n;
                    // An offset that did not move (the server kept none of the bytes) is no
                    // better than one that moved back: sending the same chunk again would
                    // spend the byte budget on nothing, every day. Ask with HEAD; the rounds
                    // are bounded, and then the attempt counts as failed.
                    if p.offset > size || p.offset <= offset {
                        tracing::warn!(
                            "upload: {url}: PATCH of {n} bytes at offset {offset} answered offset {}",
                            p.offset
                        );
                        break 'send; // ask with HEAD
                    }
                    offset = p.offset;
                    if offset == size {
                        return verify(guard, inc, i, p.sha256.as_deref());
                    }
                }
                Err(TusError::Status { status: 409, .. }) => break 'send,
                Err(TusError::Status {
                    status: 404 | 410, ..
                }) => {
                    inc.uploads[i].url = None;
                    guard.save(inc)?;
                    break 'send;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Err(Fail::Retryable(format!(
        "{}: the server's offsets kept disagreeing with ours",
        path.display()
    )))
}

/// The server has every byte: accept it if its SHA-256 (when it says one) is ours.
fn verify(
    guard: &SpoolGuard<'_>,
    inc: &mut Incident,
    i: usize,
    server_sha: Option<&str>,
) -> Result<(), Fail> {
    match server_sha {
        Some(s) if !s.eq_ignore_ascii_case(&inc.uploads[i].sha256) => {
            let what = format!(
                "{}: the server stored SHA-256 {s}, ours is {}; uploading it again",
                inc.uploads[i].kind.file_name(),
                inc.uploads[i].sha256
            );
            inc.uploads[i].url = None;
            guard.save(inc)?;
            Err(Fail::Retryable(what))
        }
        _ => Ok(()),
    }
}
