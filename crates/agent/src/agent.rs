//! The agent: one thread named `oomguard` whose loop loads the policy, samples every
//! `poll_interval_ms`, feeds the triggers, and hands each verdict to an [`Actions`] implementation.
//!
//! Owns the loop, the active policy and its refresh, the verdict log line, `status.json`, and the
//! panic fence around every poll.
//!
//! Invariants:
//! - No JNI here: the VM is reached only through `sample::{HeapSource, StackSource}`, which `jni`
//!   implements; so the whole loop is tested on Linux with fakes.
//! - One log line per verdict and one per policy change (plus one naming, cut short, the fields it
//!   carried that this agent does not know); per poll only at debug level.
//! - The queue summary comes from the I/O thread through a [`QueueBoard`]: a poll costs one atomic
//!   load for it, and never waits on the spool.
//! - `status.json` in the data dir is rewritten atomically (tmp, fsync, rename) whenever the strike
//!   counts, the policy, the last verdict or the queue summary change, and otherwise at most every
//!   ten minutes (so its last sample is at most ten minutes old without wearing flash with a write
//!   per poll); `status()` over JNI is always current.
//! - A panic inside a poll or a command is caught, logged at error level and counted; after
//!   [`MAX_PANICS`] consecutive panics the agent stops sampling (state `disabled`) but keeps
//!   answering `status` and `stop`. Nothing propagates to the host.
//! - After a verdict of some kind, that kind is muted for the rest of the process when
//!   `dump.once_per_process` is set (the dumper could not act on it again anyway).
//! - The agent thread never waits on the network: a due policy fetch is handed to the I/O thread
//!   ([`Actions::run_io`]; a thread of its own where there is none), at most one at a time, and its
//!   outcome comes back to the loop as a message. On `stop`, a fetch still queued is cancelled; one
//!   under way is waited for (it is bounded by `remote.timeout_ms`).
//! - The first poll comes at most [`exit_info::ASK_WAIT`] (1 s) after the start's own work: the
//!   system's word on a previous process's death (an app's `ExitInfoSource`, a binder call) is
//!   asked on a thread of its own and waited for no longer; past that the death is reported without
//!   it (`exitInfoError` says why). The death is still committed before this process's ring
//!   replaces the dead one's, so a kill during the wait loses nothing.
//! - A `remote.url` without a public key is a start-up error. A remote policy (fetched or cached)
//!   that expires gives way to the policy given at start, with a log line saying why.
#![forbid(unsafe_code)]

pub mod inbox;
mod policy;
#[cfg(test)]
mod tests;

use crate::policy::remote::{self, Cache, Refresher};
use crate::policy::Policy;
use crate::recorder::{self, exit_info, ExitInfoSource, Flight, NoExitInfo, Previous};
use crate::sample::{HeapSource, Sample, SampleParts, Sampler, StackSource};
use crate::trigger::{
    self, inventory, Device, Inventory, Kind, Strikes, Thresholds, Triggers, Verdict,
};
use inbox::{Inbox, Msg};
use policy::{initial_policy, refresher_key, shipped_policy, FETCH_CANCELLED, FETCH_QUEUED};
use serde::Serialize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tracing::{debug, error, info, warn};

/// Consecutive panics after which the agent stops sampling.
pub const MAX_PANICS: u32 = 3;

/// A temporary file of `write_atomic` older than this at start-up was left by a killed writer.
const STALE_TEMPORARY: std::time::Duration = std::time::Duration::from_secs(600);

/// How often `status.json` is rewritten when nothing else changed.
const STATUS_REFRESH_MS: u64 = 600_000;

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The data directory cannot be created.
    #[error("data dir {path}: {what}; the agent does not start")]
    DataDir { path: String, what: String },
    /// The sampler could not open `/proc`.
    #[error("{0}; the agent does not start")]
    Sample(#[from] crate::sample::SampleError),
    /// The public key given at start is unusable (so no remote policy could be checked).
    #[error("the public key given at start {0}; the agent does not start")]
    Key(String),
    /// The policy names a `remote.url` but no key was given to check what it serves.
    #[error("remote.url is set ({0}) but no public key was given at start: a remote policy could not be checked, so whoever answers there could set it; give OomGuard.start the base64 ed25519 public key that signs the policies, or set remote.url to null; the agent does not start")]
    NoKey(String),
}

/// What `start` was given.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The policy the app ships (empty: the built-in default).
    pub policy_json: String,
    /// Where `status.json` and the policy cache live (`files/oomguard` on Android).
    pub data_dir: PathBuf,
    /// The app's version name, for quotas and reports.
    pub app_version: String,
    /// Base64 ed25519 public key; when given, remote policies must be signed with it.
    pub public_key: Option<String>,
    /// Manufacturer, API level, bitness.
    pub device: Device,
}

/// Commands sent to the agent thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Act now, as on a verdict of kind `manual`.
    DumpNow(String),
    /// Leave the loop.
    Stop,
}

/// State shared between the agent thread and the callers of `status` / `setCurrentPage`.
#[derive(Debug, Default)]
pub struct Shared {
    status: Mutex<String>,
    page: Mutex<String>,
    flight: Flight,
}

impl Shared {
    /// Record into `flight` (the process's recorder, which the JNI entries also reach).
    pub fn with_flight(mut self, flight: Flight) -> Shared {
        self.flight = flight;
        self
    }

    /// The flight recorder (empty until the agent has opened its ring).
    pub fn flight(&self) -> &Flight {
        &self.flight
    }

    /// The last status, as JSON.
    pub fn status_json(&self) -> String {
        match self.status.lock() {
            Ok(s) if !s.is_empty() => s.clone(),
            Ok(_) => r#"{"state":"starting"}"#.to_string(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Replace the status snapshot (used by `jni` when the agent could not start).
    pub fn set_status_json(&self, json: String) {
        self.set_status(json);
    }

    fn set_status(&self, json: String) {
        match self.status.lock() {
            Ok(mut s) => *s = json,
            Err(p) => *p.into_inner() = json,
        }
    }

    /// The page (screen) the app says it is showing, recorded with each verdict.
    pub fn set_page(&self, page: &str) {
        let mut g = self.page.lock().unwrap_or_else(|p| p.into_inner());
        g.clear();
        g.push_str(page);
        self.flight.set_page(page);
    }

    pub fn page(&self) -> String {
        self.page.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// What the agent knows when it asks for action.
#[derive(Debug)]
pub struct ActionContext<'a> {
    pub policy: &'a Policy,
    pub data_dir: &'a Path,
    pub app_version: &'a str,
    pub page: &'a str,
    pub device: &'a Device,
    /// The process's flight recorder: the pipeline marks a dump or an analysis in progress.
    pub flight: &'a Flight,
    /// The process's Java threads when the verdict came (empty elsewhere): the incident's
    /// `runningInfo.javaThreads`, which names the threads a report's paths start on.
    pub java_threads: &'a [crate::sample::JavaThread],
}

/// What an [`Actions`] implementation did, shown in `status.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActionRecord {
    /// Short name: `recorded`, `dumped`, `reported` (an incident without a dump), `skipped`...
    pub action: String,
    /// One line of detail.
    pub detail: String,
}

/// Work that may block on the network, handed off the agent thread.
pub type IoJob = Box<dyn FnOnce() + Send + 'static>;

/// The seam where the agent acts on a verdict: dump, enqueue, upload. Runs on the agent thread.
pub trait Actions {
    /// Run `job` on the I/O thread, off the agent thread; `Err(job)` back when there is none
    /// (the agent then runs it on a thread of its own).
    fn run_io(&mut self, job: IoJob) -> Result<(), IoJob> {
        Err(job)
    }
    /// Called once on the agent thread after the policy is loaded, before the first poll:
    /// resume what earlier launches left.
    fn started(&mut self, _cx: &ActionContext<'_>) {}
    fn on_verdict(
        &mut self,
        v: &Verdict,
        inv: Option<&Inventory>,
        cx: &ActionContext<'_>,
    ) -> ActionRecord;
    /// Where the spool's queue summary is published (read by the agent at every poll, shown in
    /// `status.json`); `None`: no spool wired.
    fn queue_board(&self) -> Option<Arc<QueueBoard>> {
        None
    }
    /// Called once at start, after [`started`](Self::started), when the previous process of
    /// this name died without a clean exit (its flight ring says so): report it.
    fn on_death(&mut self, _previous: &Previous, _cx: &ActionContext<'_>) -> ActionRecord {
        ActionRecord {
            action: "recorded".into(),
            detail: "no pipeline wired in this build: the death is logged only".into(),
        }
    }
}

/// The implementation used until the dumper and the spool are wired in: the verdict is logged
/// (by the agent) and recorded in `status.json`; no dump, no incident.
#[derive(Debug, Default, Clone, Copy)]
pub struct RecordOnly;

impl Actions for RecordOnly {
    fn on_verdict(
        &mut self,
        _: &Verdict,
        _: Option<&Inventory>,
        _: &ActionContext<'_>,
    ) -> ActionRecord {
        ActionRecord {
            action: "recorded".into(),
            detail: "no dumper wired in this build: verdict recorded in status.json only".into(),
        }
    }
}

/// A verdict as kept in `status.json`.
#[derive(Debug, Clone, Serialize)]
pub struct VerdictRecord {
    pub at_ms: u64,
    pub page: String,
    pub verdict: Verdict,
    pub inventory: Option<Inventory>,
    pub action: ActionRecord,
}

/// The queue in `status.json`: what the spool holds and when it goes out, as the I/O thread
/// last saw it (after each of its passes, and before the analyses of one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueueSummary {
    /// Whether a spool is wired (the actions publish a [`QueueBoard`]).
    pub wired: bool,
    /// Incidents waiting to be sent: dumped, analysed, or part uploaded.
    pub pending: u64,
    /// Their bytes on disk.
    pub pending_bytes: u64,
    /// Incidents the server refused, or whose attempts ran out: kept until a quota evicts them.
    pub rejected: u64,
    /// When the I/O thread next tries to send them (ms since the epoch): its first pass after
    /// what they wait for. Null when nothing waits, or when they wait for something other than
    /// time (`waiting_for`: a network, an upload URL).
    pub next_attempt_ms: Option<u64>,
    /// What the pending incidents wait for, when not just the next pass.
    pub waiting_for: Option<String>,
    /// The last upload error this process saw, and when (ms since the epoch).
    pub last_error: Option<String>,
    pub last_error_ms: Option<u64>,
    /// When this summary was made (ms since the epoch); 0: not yet.
    pub updated_ms: u64,
}

/// Where the I/O thread publishes the [`QueueSummary`] and the agent takes it from: a
/// generation count read with one atomic load per poll, the summary copied only when it moved.
#[derive(Debug, Default)]
pub struct QueueBoard {
    generation: AtomicU64,
    summary: Mutex<QueueSummary>,
}

impl QueueBoard {
    /// Publish `s` (any thread).
    pub fn publish(&self, s: QueueSummary) {
        *self.summary.lock().unwrap_or_else(|p| p.into_inner()) = s;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Change the summary in place (any thread): e.g. one more incident queued, before the
    /// I/O thread's next summary.
    pub fn update(&self, f: impl FnOnce(&mut QueueSummary)) {
        f(&mut self.summary.lock().unwrap_or_else(|p| p.into_inner()));
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The summary, if it was published since generation `*seen` (which is then updated).
    pub fn newer(&self, seen: &mut u64) -> Option<QueueSummary> {
        let g = self.generation.load(Ordering::Acquire);
        if g == *seen {
            return None;
        }
        *seen = g;
        Some(
            self.summary
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}

/// How many recent sample costs [`SampleCost`] keeps for its median.
const RECENT_COSTS: usize = 128;

/// What sampling costs, measured around every [`Sampler::take`] (two clock reads per poll,
/// plus the sampler's own split by part).
#[derive(Debug, Clone, Default, Serialize)]
pub struct SampleCost {
    pub samples: u64,
    pub last_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub total_ns: u64,
    /// Median of the last (up to) 128 samples.
    pub median_ns: u64,
    /// Of `total_ns`, the time spent asking the VM for heap numbers.
    pub heap_total_ns: u64,
    /// Of `total_ns`, the time spent counting fds.
    pub fds_total_ns: u64,
    /// Of `total_ns`, the time spent reading threads, memory sizes and limits.
    pub proc_total_ns: u64,
    /// Ring of recent costs (allocated once, on the first sample) and scratch for the median.
    #[serde(skip)]
    recent: Vec<u64>,
    #[serde(skip)]
    scratch: Vec<u64>,
}

impl SampleCost {
    fn add(&mut self, ns: u64, parts: SampleParts) {
        self.min_ns = if self.samples == 0 {
            ns
        } else {
            self.min_ns.min(ns)
        };
        if self.recent.capacity() == 0 {
            self.recent.reserve_exact(RECENT_COSTS);
            self.scratch.reserve_exact(RECENT_COSTS);
        }
        if self.recent.len() < RECENT_COSTS {
            self.recent.push(ns);
        } else {
            self.recent[(self.samples % RECENT_COSTS as u64) as usize] = ns;
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.recent);
        let mid = self.scratch.len() / 2;
        self.median_ns = *self.scratch.select_nth_unstable(mid).1;
        self.samples += 1;
        self.last_ns = ns;
        self.max_ns = self.max_ns.max(ns);
        self.total_ns = self.total_ns.saturating_add(ns);
        self.heap_total_ns = self.heap_total_ns.saturating_add(parts.heap_ns);
        self.fds_total_ns = self.fds_total_ns.saturating_add(parts.fds_ns);
        self.proc_total_ns = self.proc_total_ns.saturating_add(parts.proc_ns);
    }
}

/// Everything `status.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub state: &'static str,
    pub pid: u32,
    pub app_version: String,
    pub policy_version: u64,
    pub policy_source: String,
    pub poll_interval_ms: u64,
    pub polls: u64,
    pub last_sample: Option<Sample>,
    pub strikes: Strikes,
    pub thresholds: Thresholds,
    pub verdicts: u64,
    pub muted: Vec<Kind>,
    pub last_verdict: Option<VerdictRecord>,
    pub queue: QueueSummary,
    pub page: String,
    pub errors: u64,
    pub last_error: Option<String>,
    pub panics: u64,
    pub sample_cost: SampleCost,
    /// The flight recorder's ring file, or why this process records nothing.
    pub flight: String,
    /// The memory cgroup the `cgroup_memory` trigger reads and its limit, or why it is off.
    pub cgroup_memory: String,
    /// What was done about the previous process's death, when it died.
    pub previous_death: Option<ActionRecord>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The agent's state. Generic over where heap numbers and stacks come from and how it acts.
pub struct Agent<H, S, A> {
    policy: Policy,
    device: Device,
    data_dir: PathBuf,
    app_version: String,
    sampler: Sampler,
    heap: H,
    stacks: S,
    actions: A,
    triggers: Triggers,
    /// The triggers' settings, from `policy` (made again only when the policy changes).
    trigger_config: trigger::Config,
    /// Shared with the fetch on the I/O thread; locked only by one of them at a time.
    refresher: Arc<Mutex<Refresher>>,
    /// The fetch handed off and not yet answered.
    fetch: Option<Arc<AtomicU8>>,
    /// Where a fetch handed off sends its outcome: the inbox's, from `run` on.
    fetch_tx: Option<sys::chan::Sender<inbox::Msg>>,
    /// The policy given at start (or the default), which an expired remote policy gives way to.
    shipped: Policy,
    /// Whether the active policy came from remote (fetched or cached), so it can expire.
    remote_active: bool,
    shared: Arc<Shared>,
    status: Status,
    last_status_write_ms: u64,
    consecutive_panics: u32,
    test_panic: Option<String>,
    /// The actions' queue summary, and the generation of it last taken.
    queue: Option<Arc<QueueBoard>>,
    queue_seen: u64,
}

impl<H: HeapSource, S: StackSource, A: Actions> Agent<H, S, A> {
    /// Load the policy (shipped → last good on disk) and open the sampler. No network here.
    pub fn new(
        cfg: Config,
        heap: H,
        stacks: S,
        actions: A,
        shared: Arc<Shared>,
    ) -> Result<Self, AgentError> {
        std::fs::create_dir_all(&cfg.data_dir).map_err(|e| AgentError::DataDir {
            path: cfg.data_dir.display().to_string(),
            what: e.to_string(),
        })?;
        // What a writer killed between its temporary file and the rename left behind.
        for (dir, name) in [
            (cfg.data_dir.clone(), "status.json"),
            (cfg.data_dir.clone(), crate::policy::remote::CACHE_FILE),
            (cfg.data_dir.join("flight"), "deaths.json"),
        ] {
            let n = sys::fs::remove_stale_temporaries(&dir, name, STALE_TEMPORARY);
            if n > 0 {
                info!("removed {n} temporary file(s) of {name} left by a killed writer");
            }
        }
        let key = match cfg.public_key.as_deref().filter(|k| !k.trim().is_empty()) {
            Some(k) => Some(remote::parse_public_key(k).map_err(AgentError::Key)?),
            None => None,
        };
        let sampler = Sampler::new()?;
        // The last good policy on disk, read and checked once for both.
        let cache = Cache::new(&cfg.data_dir);
        let cached = cache.load(key.as_ref(), now_ms() / 1000);
        let refresher = Refresher::with_cached(cache, key, matches!(cached, Ok(Some(_))));
        let (shipped, shipped_source) = shipped_policy(&cfg.policy_json);
        let (policy, source, remote_active) = initial_policy(&shipped, shipped_source, cached);
        if let (None, Some(url)) = (refresher_key(&cfg), &policy.remote.url) {
            return Err(AgentError::NoKey(url.clone()));
        }
        info!(version = policy.version, source = %source, poll_ms = policy.poll_interval_ms, "policy v{} active (from {source})", policy.version);
        info!("memory cgroup: {}", sampler.cgroup_state());
        let status = Status {
            state: "running",
            pid: std::process::id(),
            app_version: cfg.app_version.clone(),
            policy_version: policy.version,
            policy_source: source,
            poll_interval_ms: policy.poll_interval_ms,
            polls: 0,
            last_sample: None,
            strikes: Strikes::default(),
            thresholds: Thresholds::default(),
            verdicts: 0,
            muted: Vec::new(),
            last_verdict: None,
            queue: QueueSummary {
                wired: actions.queue_board().is_some(),
                ..QueueSummary::default()
            },
            page: String::new(),
            errors: 0,
            last_error: None,
            panics: 0,
            sample_cost: SampleCost::default(),
            flight: "not opened yet".into(),
            cgroup_memory: sampler.cgroup_state(),
            previous_death: None,
        };
        let test_panic = if cfg!(debug_assertions) {
            std::env::var("OOMGUARD_TEST_PANIC").ok()
        } else {
            None
        };
        let queue = actions.queue_board();
        let mut a = Agent {
            trigger_config: trigger::Config::from(&policy),
            policy,
            device: cfg.device,
            data_dir: cfg.data_dir,
            app_version: cfg.app_version,
            sampler,
            heap,
            stacks,
            actions,
            triggers: Triggers::new(),
            refresher: Arc::new(Mutex::new(refresher)),
            fetch: None,
            fetch_tx: None,
            shipped,
            remote_active,
            shared,
            status,
            last_status_write_ms: 0,
            consecutive_panics: 0,
            test_panic,
            queue,
            queue_seen: 0,
        };
        a.publish(true);
        Ok(a)
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub fn status(&self) -> &Status {
        &self.status
    }

    /// Test-only: panic at `site` when `OOMGUARD_TEST_PANIC` names it (debug builds only).
    fn maybe_panic(&self, site: &str) {
        if self.test_panic.as_deref() == Some(site) {
            panic!("forced panic at {site} (OOMGUARD_TEST_PANIC)");
        }
    }

    /// One poll: sample, observe, act on a verdict, publish. Returns the verdict acted upon.
    pub fn poll(&mut self, now: u64) -> Option<Verdict> {
        if self.status.polls >= 1 {
            self.maybe_panic("poll");
        }
        let t0 = std::time::Instant::now();
        self.sampler
            .set_cgroup_percent(self.policy.cgroup_memory.percent);
        let taken = self.sampler.take(&mut self.heap, now);
        let parts = self.sampler.last_parts();
        self.status
            .sample_cost
            .add(t0.elapsed().as_nanos() as u64, parts);
        let s = match taken {
            Ok(s) => s,
            Err(e) => {
                self.note_error(e.to_string());
                return None;
            }
        };
        let before = self.triggers.strikes();
        let tc = &self.trigger_config;
        let verdict = self.triggers.observe(&s, tc, &self.device);
        self.status.polls += 1;
        self.status.last_sample = Some(s);
        self.status.strikes = self.triggers.strikes();
        self.shared.flight.record(&s, &self.status.strikes);
        // A failed write (a full disk) turned the recorder off, here or in a JNI entry.
        if let Some(why) = self.shared.flight.take_off_reason() {
            self.status.flight = format!("off: {why}");
        }
        self.status.thresholds = Thresholds {
            heap_percent: trigger::heap_threshold(tc, &s),
            fd: trigger::fd_threshold(tc, &s),
            threads: trigger::thread_threshold(tc, &self.device, &s),
            cgroup_memory_bytes: trigger::cgroup::threshold_bytes(tc, &s),
        };
        // The limit is re-read with the slow figures.
        if s.seq % crate::sample::SLOW_EVERY == 1 {
            self.status.cgroup_memory = self.sampler.cgroup_state();
        }
        debug!(seq = s.seq, heap_used = s.heap_used, heap_max = s.heap_max, fds = s.fds, threads = s.threads, strikes = ?self.status.strikes, "poll");
        let mut changed = self.status.strikes != before;
        let acted = match verdict {
            Some(v) if self.status.muted.contains(&v.kind) => {
                debug!(kind = v.kind.as_str(), "verdict muted: {}", v.reason);
                None
            }
            Some(v) => {
                changed = true;
                self.act(v, now)
            }
            None => None,
        };
        // The I/O thread's word on the queue (after the verdict: with an incident it queued).
        changed |= self.take_queue();
        self.publish(changed || now.saturating_sub(self.last_status_write_ms) >= STATUS_REFRESH_MS);
        acted
    }

    /// Act as on a verdict of kind `manual`.
    pub fn dump_now(&mut self, reason: &str, now: u64) -> Option<Verdict> {
        let v = Verdict {
            kind: Kind::Manual,
            reason: format!("dump requested by the app: {reason}"),
            threshold: 0,
            evidence: self.status.last_sample.into_iter().collect(),
        };
        let r = self.act(v, now);
        self.take_queue();
        self.publish(true);
        r
    }

    /// Take the queue summary the actions published since the last look; whether it changed.
    fn take_queue(&mut self) -> bool {
        match self
            .queue
            .as_ref()
            .and_then(|b| b.newer(&mut self.queue_seen))
        {
            Some(q) => {
                let q = QueueSummary { wired: true, ..q };
                let changed = q != self.status.queue;
                self.status.queue = q;
                changed
            }
            None => false,
        }
    }

    fn act(&mut self, v: Verdict, now: u64) -> Option<Verdict> {
        let inv = match v.kind {
            Kind::Fd => match crate::sample::fd_targets() {
                Ok(t) => Some(inventory::fds(&t)),
                Err(e) => {
                    self.note_error(e.to_string());
                    None
                }
            },
            Kind::Threads => match crate::sample::thread_names() {
                Ok(names) => {
                    let mut inv = inventory::threads(&names);
                    if let Some(top) = inv.groups.first().map(|g| g.name.clone()) {
                        let wanted = |java_name: &str| comm_fold(java_name) == top;
                        match self.stacks.stacks(&wanted, 256, 32) {
                            Ok(st) => inv.java_stacks = inventory::stack_groups(st),
                            Err(e) => self.note_error(e.to_string()),
                        }
                    }
                    Some(inv)
                }
                Err(e) => {
                    self.note_error(e.to_string());
                    None
                }
            },
            _ => None,
        };
        let top = inv
            .as_ref()
            .map(|i| {
                let g: Vec<String> = i
                    .groups
                    .iter()
                    .take(5)
                    .map(|g| format!("{} ×{}", g.name, g.count))
                    .collect();
                format!("; top: {}", g.join(", "))
            })
            .unwrap_or_default();
        warn!(
            kind = v.kind.as_str(),
            "verdict {}: {}{top}",
            v.kind.as_str(),
            v.reason
        );
        let page = self.shared.page();
        let max_threads = self.policy.dump.java_threads_max as usize;
        let t0 = std::time::Instant::now();
        let java_threads = match self.stacks.threads(max_threads) {
            Ok(t) => {
                if max_threads > 0 {
                    info!(
                        threads = t.len(),
                        us = t0.elapsed().as_micros() as u64,
                        "Java threads listed for the incident"
                    );
                }
                t
            }
            Err(e) => {
                self.note_error(e.to_string());
                Vec::new()
            }
        };
        let cx = ActionContext {
            policy: &self.policy,
            data_dir: &self.data_dir,
            app_version: &self.app_version,
            page: &page,
            device: &self.device,
            flight: &self.shared.flight,
            java_threads: &java_threads,
        };
        self.shared.flight.set_busy(recorder::BUSY_DUMP, true);
        let action = self.actions.on_verdict(&v, inv.as_ref(), &cx);
        self.shared.flight.set_busy(recorder::BUSY_DUMP, false);
        if v.kind != Kind::Manual
            && self.policy.dump.once_per_process
            && !self.status.muted.contains(&v.kind)
        {
            self.status.muted.push(v.kind);
            // Else a kind that keeps firing would take every poll from the others.
            self.triggers.mute(v.kind);
        }
        self.status.verdicts += 1;
        self.status.page = page.clone();
        self.status.last_verdict = Some(VerdictRecord {
            at_ms: now,
            page,
            verdict: v.clone(),
            inventory: inv,
            action,
        });
        Some(v)
    }

    fn note_error(&mut self, what: String) {
        warn!("{what}");
        self.status.errors += 1;
        self.status.last_error = Some(what);
    }

    /// Update the shared snapshot; rewrite `status.json` when `write`.
    fn publish(&mut self, write: bool) {
        let json = serde_json::to_string_pretty(&self.status).unwrap_or_default();
        // The snapshot `OomGuard.status()` returns is set before the file is written: whoever
        // sees the file change (a test app waiting for its verdict, `adb-inspect.sh`) and then
        // asks the facade must not get the older snapshot.
        self.shared.set_status(json.clone());
        if write {
            let path = self.data_dir.join("status.json");
            match sys::fs::write_file_atomic(&path, json.as_bytes()) {
                Ok(()) => self.last_status_write_ms = now_ms(),
                Err(e) => {
                    // Counted, logged at debug only: a full disk must not flood the log.
                    self.status.errors += 1;
                    debug!("{}: {e}", path.display());
                }
            }
        }
    }

    /// Run `f` with a panic fence. Returns false when it panicked.
    fn fenced(&mut self, what: &str, f: impl FnOnce(&mut Self)) -> bool {
        match catch_unwind(AssertUnwindSafe(|| f(self))) {
            Ok(()) => {
                self.consecutive_panics = 0;
                true
            }
            Err(p) => {
                let msg = panic_message(&*p);
                self.consecutive_panics += 1;
                self.status.panics += 1;
                self.status.last_error = Some(format!("panic in {what}: {msg}"));
                if self.consecutive_panics >= MAX_PANICS {
                    self.status.state = "disabled";
                    error!("agent {what} panicked: {msg}; {MAX_PANICS} panics in a row, sampling stopped (the app is unaffected)");
                } else {
                    error!("agent {what} panicked: {msg}; caught, the app is unaffected");
                }
                self.publish(true);
                false
            }
        }
    }

    /// Open this process's flight ring: report the previous process's death if its ring says
    /// it died (before the ring is started afresh, so that nothing is lost before it is
    /// committed), then start recording. Never fails the agent: a ring that cannot be kept
    /// turns the recorder off, with the reason in `status.json`.
    fn open_flight(&mut self, exits: Box<dyn ExitInfoSource + Send>) {
        let path = recorder::ring_path(&self.data_dir, &crate::sample::process_name());
        let claimed = match recorder::open(&path) {
            Ok(c) => c,
            Err(e) => {
                warn!("flight recorder off: {e}");
                self.status.flight = format!("off: {e}");
                return;
            }
        };
        match &claimed.previous {
            None => {}
            Some(Err(e)) => warn!("the previous flight ring is not trusted: {e}"),
            Some(Ok(p)) if p.died() => {
                let mut p = p.clone();
                // The ring of a recorder that could not read its start knows the agent's.
                let started = Some(p.process_start_ms)
                    .filter(|&t| t > 0)
                    .unwrap_or(p.agent_start_ms);
                // On a thread of its own, waited for at most ASK_WAIT: app code, binder.
                match exit_info::ask_within(exits, p.pid, started, exit_info::ASK_WAIT) {
                    Ok(e) => p.exit_info = e,
                    Err(e) => {
                        warn!("the system's word on pid {}'s end: {e}", p.pid);
                        p.exit_info_error = Some(e);
                    }
                }
                let p = &p;
                warn!("{}", p.reason());
                let page = self.shared.page();
                let cx = ActionContext {
                    policy: &self.policy,
                    data_dir: &self.data_dir,
                    app_version: &self.app_version,
                    page: &page,
                    device: &self.device,
                    flight: &self.shared.flight,
                    java_threads: &[],
                };
                let record = self.actions.on_death(p, &cx);
                info!(
                    "previous process's death: {}: {}",
                    record.action, record.detail
                );
                self.status.previous_death = Some(record);
            }
            Some(Ok(p)) => debug!(state = ?p.state, "the previous process ended cleanly"),
        }
        let id = recorder::Identity {
            pid: std::process::id(),
            process_start_ms: crate::sample::process_start_ms().unwrap_or(0),
            agent_start_ms: now_ms(),
            app_version: self.app_version.clone(),
            policy_version: self.policy.version,
        };
        match claimed.start(&id) {
            Ok(r) => {
                self.status.flight = r.path().display().to_string();
                self.shared.flight.install(Some(r));
                let page = self.shared.page();
                self.shared.flight.set_page(&page);
            }
            Err(e) => {
                warn!("flight recorder off: {e}");
                self.status.flight = format!("off: {e}");
            }
        }
        self.take_queue();
        self.publish(true);
    }

    /// The loop, until `Stop` or the [`inbox::Commands`] end is dropped.
    pub fn run(self, inbox: Inbox) -> Result<(), AgentError> {
        self.run_with(inbox, Box::new(NoExitInfo))
    }

    /// [`run`](Self::run), asking `exits` what the system says of the previous process's end
    /// when its flight ring says it died (Android's `ApplicationExitInfo`, through the facade):
    /// asked on a thread of its own that owns `exits`, and waited for at most
    /// [`exit_info::ASK_WAIT`] before the first poll.
    pub fn run_with(
        mut self,
        inbox: Inbox,
        exits: Box<dyn ExitInfoSource + Send>,
    ) -> Result<(), AgentError> {
        self.fetch_tx = Some(inbox.tx.clone());
        self.fenced("start", |a| {
            let page = a.shared.page();
            let cx = ActionContext {
                policy: &a.policy,
                data_dir: &a.data_dir,
                app_version: &a.app_version,
                page: &page,
                device: &a.device,
                flight: &a.shared.flight,
                java_threads: &[],
            };
            a.actions.started(&cx);
        });
        self.fenced("flight", |a| a.open_flight(exits));
        let mut next = Instant::now();
        loop {
            // While not running (disabled) there is no poll to wait for, only messages.
            let msg = if self.status.state != "running" {
                inbox.rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                inbox
                    .rx
                    .recv_timeout(next.saturating_duration_since(Instant::now()))
            };
            match msg {
                Ok(Msg::Command(Command::Stop) | Msg::Closed)
                | Err(RecvTimeoutError::Disconnected) => break,
                Ok(Msg::Command(Command::DumpNow(reason))) => {
                    self.fenced("dumpNow", |a| {
                        a.dump_now(&reason, now_ms());
                    });
                }
                Ok(Msg::Fetched(reply)) => {
                    self.fenced("policy", |a| a.fetched(reply));
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.fenced("poll", |a| {
                        let now = now_ms();
                        a.expire_policy(now);
                        a.start_fetch(now);
                        a.poll(now);
                    });
                    let interval = Duration::from_millis(self.policy.poll_interval_ms);
                    let t = Instant::now();
                    next += interval;
                    if next <= t {
                        next = t + interval;
                    }
                }
            }
        }
        // A fetch still queued is cancelled; one under way ends within its timeout, and is
        // waited for so that two agents never fetch at once (`start` is refused meanwhile).
        let running = self.fetch.as_ref().is_some_and(|st| {
            st.compare_exchange(
                FETCH_QUEUED,
                FETCH_CANCELLED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        });
        if running {
            // Its reply always comes (a reply dropped unsent says `None`); commands sent
            // meanwhile are dropped.
            while let Ok(msg) = inbox.rx.recv() {
                if let Msg::Fetched(reply) = msg {
                    self.fenced("policy", |a| a.fetched(reply));
                    break;
                }
            }
        }
        self.status.state = "stopped";
        self.shared.flight.finish(recorder::State::Stopped);
        // The last status holds the I/O thread's newest queue summary.
        self.take_queue();
        self.publish(true);
        info!("agent stopped after {} polls", self.status.polls);
        Ok(())
    }
}

/// A Java thread name as the kernel shows it (`comm`: at most 15 bytes), folded.
fn comm_fold(java_name: &str) -> String {
    let mut end = java_name.len().min(15);
    while !java_name.is_char_boundary(end) {
        end -= 1;
    }
    inventory::fold_name(&java_name[..end])
}

/// The text of a panic payload.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}
