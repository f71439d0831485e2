//! Uploads: the tus 1.0 protocol, retries, backoff, network conditions, and a development
//! collector (`collector`).
//!
//! Owns getting spooled incidents to the server once and intact:
//! - [`run_once`] takes the spool lock, plans each analysed incident (mini dump gzip-compressed
//!   once, `meta.json` frozen), and uploads its files small first (meta, report, inventories,
//!   then the compressed mini dump) with tus: POST (creation) → URL persisted in
//!   `incident.json` → PATCH; after a restart, HEAD gives the server's offset and the upload
//!   resumes from there.
//! - An incident is deleted only after every file is acknowledged: the final offset equals the
//!   size, and the SHA-256 the server reports (when it reports one, as `collector` does) equals
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
//! - A daily byte budget and "unmetered only" bound what is spent. The budget, counted in
//!   `spool.json`, is charged after each PATCH with the bytes it put on the wire (a PATCH cut
//!   short charges only what went out; a kill during one forgets at most that chunk); a PATCH
//!   is never larger than what is left of it, and a zero-byte file needs none. The network is
//!   asked (the caller passes a function: the app's latest word) before each incident and each
//!   PATCH: a change to mobile data stops the pass before its next chunk, counting no attempt.
//! - A full disk does not stop uploads, which are what frees it: an upload URL, an
//!   acknowledgement or a backoff that cannot be saved is kept in memory for this process's
//!   later passes (`unsaved.rs`), the budget likewise (the spool keeps its state in memory), and
//!   an acknowledged incident is deleted even where the disk refuses the rename to `.trash-`.
//! - Only `https://` URLs, or `http://` to a loopback address, are contacted.
//! - [`run_once`] blocks: the agent calls it from a blocking worker thread, never from the
//!   sampling loop or the app's main thread.
#![forbid(unsafe_code)]

mod classify;
mod retry;
mod send;
pub mod tus;
mod unsaved;

use classify::{classify, gone_at_once, Fail, Req};
pub use retry::backoff;
use retry::{ENDPOINT_PROBLEMS, PLAN_FAILURES};
use send::{budget_left, upload_incident};
use unsaved::UNSAVED;

use crate::spool::{self, Error as SpoolError, FileKind, Incident, Spool, SpoolGuard, State};
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

/// Upload settings, from the policy (`policy::configs`).
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

/// The default policy's settings, with no endpoint (built in `policy::configs`; the uploader
/// keeps no defaults of its own).
impl Default for Config {
    fn default() -> Self {
        (&crate::policy::Policy::default()).into()
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

/// Upload what the spool holds, once, then return. Blocking: call it from a worker thread.
pub fn run_once(spool: &Spool, cfg: &Config, net: Network) -> Result<Summary, Error> {
    run_once_with(spool, cfg, &|| net)
}

/// [`run_once`] on a network that may change during the pass: `network` says what it is now
/// (on Android, the app's latest word through `OomGuard.setNetwork`).
pub fn run_once_with(
    spool: &Spool,
    cfg: &Config,
    network: &dyn Fn() -> Network,
) -> Result<Summary, Error> {
    let net = network();
    if !crate::policy::url::allowed_url(&cfg.endpoint) {
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
    if let Some(stop) = pass_stop(spool, cfg, net) {
        sum.stopped = Some(stop);
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
    let incidents = guard.incidents()?;
    let ids: Vec<String> = incidents.iter().map(|i| i.id.clone()).collect();
    UNSAVED.keep_only(spool.root(), &ids);
    for (n, inc) in incidents.into_iter().enumerate() {
        // The network may have changed since the last incident (Wi-Fi to mobile data).
        if n > 0 {
            if let Some(stop) = network_stop(cfg, network()) {
                sum.stopped = Some(stop);
                break;
            }
        }
        let inc = UNSAVED.newest(spool.root(), inc);
        if n > 0 {
            // Incidents committed meanwhile (commits do not wait for this lock) count too.
            if let Err(e) = guard.enforce_quotas(0, 0) {
                tracing::warn!("upload: quota enforcement failed: {e}");
            }
        }
        let now = spool.now_ms();
        let mut inc = match ready(&guard, cfg, inc, now, &mut sum) {
            Ready::Go(inc) => *inc,
            Ready::Skip => continue,
            Ready::Stop => break,
        };
        let r = upload_incident(&guard, &client, cfg, network, &mut inc, &mut sum);
        if settle(&guard, cfg, &mut inc, r, now, &mut sum)? == Flow::Stop {
            break;
        }
    }
    Ok(sum)
}

/// Why the pass may not start on `net` (before any incident), if it may not.
fn pass_stop(spool: &Spool, cfg: &Config, net: Network) -> Option<Stop> {
    if let Some(stop) = network_stop(cfg, net) {
        return Some(stop);
    }
    let now = spool.now_ms();
    let until = spool.state().retry_after_until_ms;
    if retry::still_waits(until, now, cfg.max_retry_after.as_millis() as u64) {
        return Some(Stop::RetryAfter(until));
    }
    None
}

/// What [`ready`] says of an incident.
enum Ready {
    /// Send it (planned, if it was only analysed).
    Go(Box<Incident>),
    /// Not now: not ready, evicted, waiting, or its plan failed.
    Skip,
    /// The daily byte budget is spent (`sum.stopped` says so).
    Stop,
}

/// Whether `inc` is to be sent in this pass at `now`; plans its upload if it was only analysed.
fn ready(
    guard: &SpoolGuard<'_>,
    cfg: &Config,
    inc: Incident,
    now: u64,
    sum: &mut Summary,
) -> Ready {
    let spool = guard.spool();
    if !matches!(inc.state, State::Analysed | State::Uploading)
        || spool.fs().stat(&spool.incident_dir(&inc.id)).is_err()
    {
        return Ready::Skip; // not ready, or evicted meanwhile
    }
    if retry::still_waits(inc.next_attempt_ms, now, cfg.backoff_cap.as_millis() as u64) {
        sum.waiting += 1;
        return Ready::Skip;
    }
    if budget_left(spool, cfg) == 0 {
        sum.stopped = Some(Stop::BudgetExhausted);
        return Ready::Stop;
    }
    if inc.state != State::Analysed {
        return Ready::Go(Box::new(inc));
    }
    let id = inc.id.clone();
    if PLAN_FAILURES.waits(spool.root(), &id, now, cfg) {
        sum.waiting += 1;
        return Ready::Skip;
    }
    match guard.plan_upload(&id) {
        Ok(i) => {
            PLAN_FAILURES.ended(spool.root(), &id);
            Ready::Go(Box::new(i))
        }
        Err(SpoolError::NotFound(_)) => Ready::Skip, // evicted by the quotas
        Err(e) => {
            let (_, wait) = PLAN_FAILURES.failed(spool.root(), &id, cfg, now);
            tracing::warn!("upload: planning {id}: {e}; next try in {wait:?}");
            Ready::Skip
        }
    }
}

/// After an incident's upload: go on to the next incident, or stop the pass.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Next,
    Stop,
}

/// Act on how the upload of `inc` (tried at `now`) ended: delete it once acknowledged, wait,
/// back off, reject, quarantine or drop a file, and say whether the pass goes on.
fn settle(
    guard: &SpoolGuard<'_>,
    cfg: &Config,
    inc: &mut Incident,
    r: Result<(), Fail>,
    now: u64,
    sum: &mut Summary,
) -> Result<Flow, Error> {
    let spool = guard.spool();
    let id = inc.id.clone();
    match r {
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
            return Ok(Flow::Stop);
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
            return Ok(Flow::Stop);
        }
        Err(Fail::Network(stop)) => {
            tracing::info!("upload: the network changed ({stop:?}); stopping this pass");
            sum.stopped = Some(stop);
            return Ok(Flow::Stop);
        }
        Err(Fail::Budget) => {
            tracing::info!("upload: daily byte budget spent; resuming tomorrow");
            sum.stopped = Some(Stop::BudgetExhausted);
            return Ok(Flow::Stop);
        }
        Err(Fail::Retryable(error)) => {
            inc.upload_attempts += 1;
            if inc.upload_attempts >= cfg.max_attempts {
                let reason = format!(
                    "gave up after {} failed attempts; last: {error}",
                    inc.upload_attempts
                );
                reject(guard, inc, reason, sum);
                return Ok(Flow::Next);
            }
            let until_ms = spool.now_ms() + backoff(cfg, inc.upload_attempts).as_millis() as u64;
            inc.next_attempt_ms = until_ms;
            tracing::warn!(
                "upload: {id}: attempt {} of {} failed: {error}; next after {until_ms}",
                inc.upload_attempts,
                cfg.max_attempts
            );
            if let Err(e) = UNSAVED.save(guard, inc) {
                tracing::warn!("upload: {id}: could not persist the backoff: {e}");
            }
            sum.stopped = Some(Stop::Backoff {
                id,
                until_ms,
                error,
            });
            return Ok(Flow::Stop);
        }
        Err(Fail::Rejected(reason)) => {
            ENDPOINT_PROBLEMS.ended(spool.root(), "");
            reject(guard, inc, reason, sum)
        }
        Err(Fail::Gone { kind, what }) => {
            // Counted as a loss; the next pass sends the rest.
            if let Err(e) = guard.drop_planned(inc, kind, &what) {
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
    Ok(Flow::Next)
}

/// Why the pass may not send on `net`, if it may not.
fn network_stop(cfg: &Config, net: Network) -> Option<Stop> {
    if !net.connected {
        Some(Stop::Offline)
    } else if cfg.unmetered_only && net.metered {
        Some(Stop::Metered)
    } else {
        None
    }
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
    if let Err(e) = UNSAVED.save(guard, inc) {
        tracing::warn!("upload: {}: could not persist the rejection: {e}", inc.id);
    }
    sum.rejected.push((inc.id.clone(), reason));
}
