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
//! - Each answer is classified by what it is about; the tus 1.0 core and creation specs tie
//!   only a few statuses to a request's content:
//!   - this incident's request: 400, 413 and 422 to the creation POST, which carries the
//!     incident's length and metadata. The incident is marked `rejected` with the reason (it
//!     is never sent again and stays until a quota evicts it); the pass goes on.
//!   - the upload expired: 404 and 410 to a HEAD or PATCH, and 403 to a HEAD (the spec allows
//!     it for an unknown upload), of an upload created in an earlier pass. It is created
//!     anew; the old URL is kept until the new one exists.
//!   - the offsets disagree: 409 to a PATCH. HEAD says the server's offset; resume there.
//!   - come back later: 429, and 503 with `Retry-After`. The pass stops; `Retry-After` (else
//!     `default_retry_after`), at most `max_retry_after`, is stored in `spool.json`, so a
//!     restart waits too. No attempt is counted.
//!   - the endpoint is wrong, not this incident (its URL, credentials, an auth proxy, a proxy's
//!     size or rate limits, the tus version): every other 4xx (401, 403, 404 and 405 to the
//!     creation, 407, 408, 412, 413 to a PATCH, 415, ...), a 3xx (redirects are not
//!     followed), an upload URL the server gives that is not https, and 404/410/403 for an
//!     upload created in this same pass (the URLs it hands out do not reach it).
//!   - an outage, handled like the endpoint being wrong: before the server has answered any
//!     request of the pass as tus says, a network error (refused, reset, timed out, DNS), a
//!     502, 503 (without `Retry-After`) or 504, or an answer no tus server gives (a captive
//!     portal's 200 page). A server down for days thus gives up no queued incident.
//!   - a failed attempt: 5xx (500 always; 502 to 504 once the pass had an answer), network
//!     errors and malformed tus answers once the pass had an answer, 460 to a PATCH (a
//!     checksum mismatch: oomguard sends no checksum, so bytes damaged on the way).
//! - An endpoint problem rejects nothing and counts no attempt: the pass stops, one warning
//!   names the answer and the endpoint, and nothing is sent before a wait stored in
//!   `spool.json` like `Retry-After`: `backoff_base`, doubling with each endpoint problem in a
//!   row (counted in this process), at most `backoff_cap`; longer if the answer carries a
//!   `Retry-After`; never more than `max_retry_after`. A release with a wrong URL or expired
//!   credentials thus costs one request per wait, loses no incident, and uploads everything
//!   once fixed.
//! - A failed attempt (also: a PATCH answered without progress after 8 rounds of asking HEAD,
//!   a planned file that cannot be read for a reason other than being gone, such as EMFILE or
//!   EIO) counts against the incident: the next is delayed by capped exponential backoff with
//!   jitter, stored in `incident.json`; after `max_attempts` the incident is marked `rejected`.
//! - A plan that cannot be made (a full disk while compressing the mini dump or writing
//!   `meta.json`) is retried after the same capped backoff, kept in memory (the record that
//!   would hold it cannot be written then), and counts no attempt.
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
use std::path::{Path, PathBuf};
use std::sync::Mutex;
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
    /// Failed attempts (see the module doc: 500, and other 5xx and network errors once the
    /// server answered in that pass) per incident before it is given up; endpoint problems,
    /// outages and 429 are not counted.
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// Used when a 429 has no readable `Retry-After`.
    pub default_retry_after: Duration,
    /// At most this many `Retry-After` seconds are obeyed; an endpoint problem's wait is no
    /// longer either.
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
    /// The server said 429 (or 503 with `Retry-After`), or the wait after an endpoint problem
    /// runs: not before this time (ms since the epoch).
    RetryAfter(u64),
    /// An answer said the endpoint is wrong, not an incident (a wrong URL, credentials, a
    /// proxy: see the module doc). Nothing was rejected or counted as an attempt; nothing is
    /// sent before this time (ms since the epoch, stored in `spool.json`).
    Endpoint {
        until_ms: u64,
        error: String,
    },
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
    /// 429, or 503 with `Retry-After` (seconds, when readable): come back later.
    ServerWait {
        status: u16,
        retry_after: Option<u64>,
    },
    /// The endpoint is wrong, not this incident.
    Endpoint {
        what: String,
        retry_after: Option<u64>,
    },
    Retryable(String),
    Rejected(String),
    /// A planned file no longer matches its plan (gone, or changed: bit rot, a torn write):
    /// that file is given up, the incident's others still go up.
    Gone {
        kind: FileKind,
        what: String,
    },
    Budget,
    Local(String),
    Spool(SpoolError),
}

impl From<SpoolError> for Fail {
    fn from(e: SpoolError) -> Fail {
        Fail::Spool(e)
    }
}

/// The request an answer came to: a status can mean something else on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Req {
    Create,
    Head,
    Patch,
}

impl std::fmt::Display for Req {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Req::Create => "creation POST",
            Req::Head => "HEAD",
            Req::Patch => "PATCH",
        })
    }
}

/// What an error of the tus client means (the table in the module doc). 404/410 (and 403 on
/// HEAD) of a known upload and 409 on PATCH are handled where they are met, never here.
/// `answered`: the endpoint has answered a request of this pass as tus says, so a failure now
/// may be this incident's; before that, a server that cannot be reached or answers as no tus
/// server does is the endpoint's problem.
fn classify(req: Req, e: TusError, answered: bool) -> Fail {
    let unreachable = |e: &TusError| Fail::Endpoint {
        what: format!("{e} (answer to the {req}, before any request of this pass was answered)"),
        retry_after: None,
    };
    let (status, retry_after) = match &e {
        TusError::Status {
            status,
            retry_after,
            ..
        } => (*status, *retry_after),
        // The server handed out an upload URL we may not contact: its configuration.
        TusError::Insecure(_) => {
            return Fail::Endpoint {
                what: format!("{e} (an upload URL the server gave)"),
                retry_after: None,
            }
        }
        TusError::Network { .. } | TusError::Protocol { .. } if !answered => {
            return unreachable(&e)
        }
        TusError::Network { .. } | TusError::Protocol { .. } => {
            return Fail::Retryable(e.to_string())
        }
    };
    match (req, status) {
        (_, 429) => Fail::ServerWait {
            status,
            retry_after,
        },
        (_, 503) if retry_after.is_some() => Fail::ServerWait {
            status,
            retry_after,
        },
        // The creation carries this incident's length and metadata.
        (Req::Create, 400 | 413 | 422) => Fail::Rejected(e.to_string()),
        (Req::Patch, 460) => Fail::Retryable(e.to_string()),
        (_, 300..=499) => Fail::Endpoint {
            what: format!("{e} (answer to the {req})"),
            retry_after,
        },
        // A gateway or a server saying it is down (502, 503, 504) before the endpoint has
        // answered anything: an outage, which must not use up queued incidents' attempts.
        (_, 502..=504) if !answered => unreachable(&e),
        _ => Fail::Retryable(e.to_string()),
    }
}

/// Failures in a row, in this process, per spool root and key, each with the time before
/// which the next try waits. Kept in memory: the record that would hold them may not be
/// writable then (a full disk), and a new process simply starts a streak afresh.
struct Streaks(Mutex<Vec<Streak>>);

struct Streak {
    root: PathBuf,
    key: String,
    failures: u32,
    until_ms: u64,
}

impl Streaks {
    const fn new() -> Streaks {
        Streaks(Mutex::new(Vec::new()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Streak>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One more failure of `key`: the streak's length and its [`backoff`]; the next try is
    /// not due before `now` plus that.
    fn failed(&self, root: &Path, key: &str, cfg: &Config, now: u64) -> (u32, Duration) {
        let mut v = self.lock();
        let at = match v.iter().position(|s| s.root == root && s.key == key) {
            Some(k) => k,
            None => {
                v.push(Streak {
                    root: root.to_path_buf(),
                    key: key.to_string(),
                    failures: 0,
                    until_ms: 0,
                });
                v.len() - 1
            }
        };
        let s = &mut v[at];
        s.failures = s.failures.saturating_add(1);
        let wait = backoff(cfg, s.failures);
        s.until_ms = now + wait.as_millis() as u64;
        (s.failures, wait)
    }

    /// A success ends `key`'s streak.
    fn ended(&self, root: &Path, key: &str) {
        self.lock().retain(|s| s.root != root || s.key != key);
    }

    /// Whether a try of `key` at `now` must still wait (a wait longer than `backoff_cap` means
    /// the clock was set back: it has expired).
    fn waits(&self, root: &Path, key: &str, now: u64, cfg: &Config) -> bool {
        let cap = cfg.backoff_cap.as_millis() as u64;
        self.lock()
            .iter()
            .any(|s| s.root == root && s.key == key && s.until_ms > now && s.until_ms - now <= cap)
    }
}

/// Endpoint problems in a row (key ""): each wait doubles. The wait itself is kept in
/// `spool.json`; the count is not, so a new process starts again from `backoff_base` once the
/// stored wait is over.
static ENDPOINT_PROBLEMS: Streaks = Streaks::new();

/// Incidents whose plan failed (key: the incident's id), a full disk while compressing or
/// writing meta.json: planning is retried after a backoff, not on every pass, since it redoes
/// the compression each time, and the incident's record cannot hold the wait on a full disk.
/// No attempt is counted: the server is not involved, and the spool's age quota bounds how
/// long it waits.
static PLAN_FAILURES: Streaks = Streaks::new();

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
            if PLAN_FAILURES.waits(spool.root(), &id, now, cfg) {
                sum.waiting += 1;
                continue;
            }
            match guard.plan_upload(&id) {
                Ok(i) => {
                    PLAN_FAILURES.ended(spool.root(), &id);
                    i
                }
                Err(SpoolError::NotFound(_)) => continue, // evicted by the quotas
                Err(e) => {
                    let (_, wait) = PLAN_FAILURES.failed(spool.root(), &id, cfg, now);
                    tracing::warn!("upload: planning {id}: {e}; next try in {wait:?}");
                    continue;
                }
            }
        } else {
            inc
        };
        match upload_incident(&guard, &client, cfg, &mut inc, &mut sum) {
            Ok(()) => {
                ENDPOINT_PROBLEMS.ended(spool.root(), "");
                match guard.delete(&id) {
                    Ok(()) => {
                        tracing::info!("upload: incident {id} acknowledged by the server; deleted");
                        sum.acknowledged.push(id);
                    }
                    Err(e) => tracing::warn!("upload: {id} acknowledged but not deleted: {e}"),
                }
            }
            Err(Fail::ServerWait {
                status,
                retry_after,
            }) => {
                let wait = retry_after
                    .map(Duration::from_secs)
                    .unwrap_or(cfg.default_retry_after)
                    .min(cfg.max_retry_after);
                tracing::warn!(
                    "upload: HTTP {status} from {}; waiting {wait:?} (kept across restarts)",
                    cfg.endpoint
                );
                let until = hold_sending(spool, wait);
                sum.stopped = Some(Stop::RetryAfter(until));
                break;
            }
            Err(Fail::Endpoint { what, retry_after }) => {
                // Not this incident's fault: nothing is rejected or counted against it, and
                // the pass stops; the wait grows while the problem lasts.
                let (_, mut wait) = ENDPOINT_PROBLEMS.failed(spool.root(), "", cfg, now);
                if let Some(secs) = retry_after {
                    wait = wait.max(Duration::from_secs(secs));
                }
                let wait = wait.min(cfg.max_retry_after);
                tracing::warn!(
                    "upload: endpoint {} is not usable: {what}; a problem of the endpoint (URL, credentials, proxy, limits), not of incident {id}: nothing rejected, no attempt counted; next try in {wait:?}",
                    cfg.endpoint
                );
                let until = hold_sending(spool, wait);
                sum.stopped = Some(Stop::Endpoint {
                    until_ms: until,
                    error: what,
                });
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
            Err(Fail::Rejected(reason)) => {
                ENDPOINT_PROBLEMS.ended(spool.root(), "");
                reject(&guard, &mut inc, reason, &mut sum)
            }
            Err(Fail::Local(what)) => {
                guard.quarantine(&spool.incident_dir(&id), &what);
                sum.quarantined.push(id);
            }
            Err(Fail::Gone { kind, what }) => {
                // Counted as a loss; the next pass sends the rest.
                if let Err(e) = guard.drop_planned(&mut inc, kind, &what) {
                    tracing::warn!("upload: {id}: dropping {kind:?} from its plan: {e}");
                }
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

/// Send nothing for `wait` (429, 503 with `Retry-After`, an endpoint problem): the time is kept
/// in `spool.json`, so a restart waits too. Returns it (ms since the epoch).
fn hold_sending(spool: &Spool, wait: Duration) -> u64 {
    let until = spool.now_ms() + wait.as_millis() as u64;
    if let Err(e) = spool.update_state(|s| s.retry_after_until_ms = until) {
        tracing::warn!("upload: could not persist the wait before sending again: {e}");
    }
    until
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
    // Never send bytes that differ from the plan (bit rot, a torn file): such a file is given
    // up (quarantined, counted as a loss), the others still go up.
    let mut changed = Vec::new();
    for u in inc.uploads.iter().filter(|u| !u.acked) {
        let path = dir.join(u.kind.file_name());
        match spool::hash_file(spool.fs(), &path) {
            Ok((s, n)) if s == u.sha256 && n == u.size => {}
            Ok((s, n)) => changed.push((
                u.kind,
                format!(
                    "planned file changed before its upload: {n} bytes with SHA-256 {s}, \
                     planned {} bytes with {}",
                    u.size, u.sha256
                ),
            )),
            Err(e) => match unreadable(&path, u.kind, e) {
                Fail::Gone { kind, what } => changed.push((kind, what)),
                f => return Err(f),
            },
        }
    }
    for (kind, what) in changed {
        guard.drop_planned(inc, kind, &what)?;
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
        // On disk before the next file's bytes go out: after a crash, an acknowledged file is
        // never sent again (HEAD could say it again, unless the server expired the upload).
        inc.uploads[i].acked = true;
        if let Err(e) = guard.save(inc) {
            // The upload goes on; only a crash before the next save would resend this file.
            tracing::warn!("upload: {}: saving an acknowledgement failed: {e}", inc.id);
        }
    }
    Ok(())
}

/// A planned file that cannot be read: gone, that file is given up (the incident's others
/// still go up); any other error (out of file descriptors, EIO, a permission) may pass, so it
/// is a failed attempt, retried with backoff, and never moves an intact incident into
/// quarantine.
fn unreadable(path: &std::path::Path, kind: FileKind, e: std::io::Error) -> Fail {
    if e.kind() == std::io::ErrorKind::NotFound {
        Fail::Gone {
            kind,
            what: "planned file gone before its upload".into(),
        }
    } else {
        Fail::Retryable(format!("{}: {e}", path.display()))
    }
}

fn create(client: &Client, inc: &Incident, i: usize) -> Result<String, Fail> {
    let u = &inc.uploads[i];
    client
        .create(
            u.size,
            &[
                ("incident", &inc.id),
                ("kind", u.kind.upload_kind()),
                ("sha256", &u.sha256),
                ("filename", u.kind.file_name()),
            ],
        )
        .map_err(|e| classify(Req::Create, e, client.answered()))
}

/// An upload created in this pass that the server says it does not know: the URLs it hands
/// out do not reach it (a proxy routing only the creation, a wrong base path). Creating it
/// again would only repeat that.
fn gone_at_once(url: &str, req: Req, answer: &str) -> Fail {
    Fail::Endpoint {
        what: format!("{url}: {answer} to the {req} of an upload created a moment ago"),
        retry_after: None,
    }
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
    // The URL was created in this pass (the server cannot have let it expire since).
    let mut created_here = fresh;
    // The server does not know the URL, or holds another length under it: create the upload
    // anew. The old URL stays (in memory and on disk) until the new one exists, so that a
    // creation refused by an endpoint problem leaves it to be asked about next time.
    let mut stale = false;
    for _round in 0..8 {
        let mut offset;
        match inc.uploads[i].url.clone().filter(|_| !stale) {
            None => {
                let url = create(client, inc, i)?;
                inc.uploads[i].url = Some(url);
                guard.save(inc)?;
                (stale, created_here) = (false, true);
                offset = 0;
            }
            Some(_) if fresh => {
                fresh = false;
                offset = 0;
            }
            Some(url) => match client
                .head(&url)
                .map_err(|e| classify(Req::Head, e, client.answered()))?
            {
                None if created_here => {
                    return Err(gone_at_once(&url, Req::Head, "404, 410 or 403"));
                }
                None => {
                    tracing::info!("upload: {url} unknown to the server; creating it again");
                    stale = true;
                    continue;
                }
                Some(h) => {
                    if h.length.is_some_and(|l| l != size) || h.offset > size {
                        tracing::warn!(
                            "upload: {url}: server has offset {} length {:?}, ours is {size}; starting again",
                            h.offset,
                            h.length
                        );
                        stale = true;
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
        let mut file = spool
            .fs()
            .open(&path)
            .map_err(|e| unreadable(&path, kind, e))?;
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
                    status: status @ (404 | 410),
                    ..
                }) => {
                    if created_here {
                        return Err(gone_at_once(&url, Req::Patch, &status.to_string()));
                    }
                    stale = true;
                    break 'send;
                }
                Err(e) => return Err(classify(Req::Patch, e, client.answered())),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16, retry_after: Option<u64>) -> TusError {
        TusError::Status {
            status,
            url: "https://x/files/".into(),
            retry_after,
            body: String::new(),
        }
    }

    fn kind(f: Fail) -> &'static str {
        match f {
            Fail::ServerWait { .. } => "wait",
            Fail::Endpoint { .. } => "endpoint",
            Fail::Retryable(_) => "attempt",
            Fail::Rejected(_) => "reject",
            Fail::Budget | Fail::Local(_) | Fail::Spool(_) | Fail::Gone { .. } => "other",
        }
    }

    /// The table of the module doc.
    #[test]
    fn answers_are_classified_by_what_they_are_about() {
        use Req::*;
        let table: &[(Req, u16, Option<u64>, &str)] = &[
            (Create, 400, None, "reject"),
            (Create, 413, None, "reject"),
            (Create, 422, None, "reject"),
            (Create, 401, None, "endpoint"),
            (Create, 403, None, "endpoint"),
            (Create, 404, None, "endpoint"),
            (Create, 405, None, "endpoint"),
            (Create, 407, None, "endpoint"),
            (Create, 408, None, "endpoint"),
            (Create, 410, None, "endpoint"),
            (Create, 412, None, "endpoint"),
            (Create, 415, None, "endpoint"),
            (Create, 418, None, "endpoint"),
            (Create, 451, None, "endpoint"),
            (Create, 301, None, "endpoint"),
            (Head, 400, None, "endpoint"),
            (Head, 401, None, "endpoint"),
            (Head, 413, None, "endpoint"),
            (Patch, 400, None, "endpoint"),
            (Patch, 403, None, "endpoint"),
            (Patch, 413, None, "endpoint"),
            (Patch, 415, None, "endpoint"),
            (Patch, 460, None, "attempt"),
            (Create, 429, None, "wait"),
            (Patch, 429, Some(5), "wait"),
            (Create, 503, Some(60), "wait"),
            (Create, 503, None, "attempt"),
            (Patch, 500, Some(60), "attempt"),
            (Head, 502, None, "attempt"),
        ];
        for &(req, code, ra, want) in table {
            assert_eq!(
                kind(classify(req, status(code, ra), true)),
                want,
                "{code} to {req}"
            );
            // Before anything was answered, only an outage (502 to 504) changes meaning.
            let before = match (code, want) {
                (502..=504, "attempt") => "endpoint",
                _ => want,
            };
            assert_eq!(
                kind(classify(req, status(code, ra), false)),
                before,
                "{code} to {req}, nothing answered yet"
            );
        }
        assert_eq!(kind(classify(Create, status(500, None), false)), "attempt");
        assert_eq!(kind(classify(Head, status(504, None), false)), "endpoint");
        let insecure = TusError::Insecure("http://example.com/files/1".into());
        assert_eq!(kind(classify(Create, insecure, true)), "endpoint");
        let net = || TusError::Network {
            url: "https://x/".into(),
            what: "reset".into(),
        };
        assert_eq!(kind(classify(Patch, net(), true)), "attempt");
        assert_eq!(kind(classify(Create, net(), false)), "endpoint");
        let odd = || TusError::Protocol {
            url: "https://x/".into(),
            what: "creation answer without Location".into(),
        };
        assert_eq!(kind(classify(Patch, odd(), true)), "attempt");
        assert_eq!(kind(classify(Create, odd(), false)), "endpoint");
    }

    #[test]
    fn endpoint_problems_in_a_row_are_counted_per_spool() {
        let (a, b) = (Path::new("/spool/a"), Path::new("/spool/b"));
        let cfg = Config::default();
        let problem = |root| ENDPOINT_PROBLEMS.failed(root, "", &cfg, 0).0;
        assert_eq!(problem(a), 1);
        assert_eq!(problem(a), 2);
        assert_eq!(problem(b), 1);
        ENDPOINT_PROBLEMS.ended(a, "");
        assert_eq!(problem(a), 1);
        assert_eq!(problem(b), 2);
    }
}
