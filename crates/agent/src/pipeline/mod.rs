//! The wiring layer: from the policy and a verdict to the server. It builds the agent and its
//! actions at start ([`start()`]), and is the real [`Actions`] of the agent ([`Pipeline`]).
//!
//! On a verdict, on the agent thread: stage an incident in the spool, take the dump through
//! [`dump::take`] (which enforces the guards: free disk, once per process, per-version quota, one
//! dump at a time) with the stripper teed onto the VM's writes, write the fd and thread
//! inventories beside it, and commit the incident (crash-safe). Then the `oomguard-io` thread is
//! woken (`io`): it runs the spool's recovery, which analyses every dumped incident in a separate
//! process (`analysis`, `runner`: `oomguard analyze`, with `oom_score_adj` raised, nice 19 and a
//! memory limit), and then uploads what is analysed. The same pass runs once at start-up, so
//! whatever a previous launch left (a dump not analysed, an upload cut short) resumes. The
//! previous process's death is reported at start (`deaths`).
//!
//! Uploads go by the app's latest word on the network ([`NetworkState`], `network`). The agent's
//! policy fetch runs on the I/O thread too, between passes ([`Actions::run_io`]).
//!
//! Each module's config comes from the policy (`From<&Policy>` in `policy::configs`). Modules:
//! `start` (the object graph: which
//! dumper, the agent thread), `io`, `analysis`, `runner`, `network`, `queue` (the queue summary
//! of `status.json`), `deaths`.
//!
//! Invariants: the agent thread never analyses or uploads; a failed dump leaves no incident; an
//! incident is deleted only by the uploader after the server acknowledged every file; `agent`
//! does not know this module (it only defines [`Actions`]); no unsafe code (forbidden in the
//! library; only its tests set up fds and mappings through libc).
#![cfg_attr(not(test), forbid(unsafe_code))]

mod analysis;
mod deaths;
mod io;
mod network;
mod queue;
pub mod runner;
pub mod start;

pub use analysis::find_analyser;
pub use network::{default_network, NetworkState};
pub use start::{start, Handle, StartArgs, Vm};

use crate::agent::{ActionContext, ActionRecord, Actions, IoJob, QueueBoard};
use crate::dump::guard::{GuardPolicy, Guards};
use crate::dump::{self, DumpRequest, Dumper};
use crate::policy::Policy;
use crate::recorder::{Flight, Previous};
use crate::spool::{FileKind, NewIncident, Quotas, Spool};
use crate::trigger::{Inventory, Kind, Verdict};
use hprof::Level;
use io::{io_thread, IoConfig, IoThread, Work};
use runner::AnalysisLimits;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use sys::chan;
use tracing::{info, warn};

/// Where the agent keeps its spool, under the data dir.
pub const SPOOL_DIR: &str = "spool";
/// Analysis logs, attempt counters and running-info files (outside the spool, which moves
/// unknown files aside).
pub const ANALYSIS_DIR: &str = "analysis";

/// An incident's `samples` cover the polls of this last stretch before it (from the flight
/// recorder), not only those the verdict was taken on.
pub const RECENT_MS: u64 = 60_000;

/// An incident's `samples`: the `recent` polls (the flight recorder's last minute) and the
/// verdict's `evidence`, one per poll (`seq`), oldest first; those of the evidence marked
/// `"verdict": true`. Without a recorder (off, or its file lost) the evidence alone.
fn incident_samples(
    evidence: &[crate::sample::Sample],
    recent: Vec<crate::sample::Sample>,
) -> serde_json::Value {
    let mut all = recent;
    all.extend_from_slice(evidence);
    // One per poll: the sort is stable, so a poll the ring holds is taken from it.
    sys::order::sort_by_key(&mut all, |s| s.seq);
    all.dedup_by_key(|s| s.seq);
    let out: Vec<serde_json::Value> = all
        .iter()
        .map(|s| {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            if evidence.iter().any(|e| e.seq == s.seq) {
                v["verdict"] = serde_json::Value::Bool(true);
            }
            v
        })
        .collect();
    serde_json::Value::Array(out)
}

/// The real actions: dump, spool, and hand over to the I/O thread. Its spool and I/O thread
/// start with the first policy the agent loads ([`Actions::started`]).
pub struct Pipeline {
    data_dir: PathBuf,
    app_version: String,
    dumper: Box<dyn Dumper>,
    fallback: Option<Box<dyn Dumper>>,
    live: Option<Live>,
    network: Arc<NetworkState>,
    analyser: Option<Option<PathBuf>>,
    /// Kinds whose verdict this process already reported without a dump: a later one of the
    /// same kind without a dump is only logged (with `dump.once_per_process` off, a heap that
    /// stays high would otherwise queue one such incident every few polls).
    dumpless: HashSet<Kind>,
    /// The process's flight recorder, for the analysis-in-progress flag.
    flight: Flight,
    /// The queue summary the I/O thread publishes for the agent's `status.json`.
    queue: Arc<QueueBoard>,
}

struct Live {
    spool: Spool,
    guards: Guards,
    io: IoThread,
}

impl Pipeline {
    /// A pipeline for the runtime's dumpers (`fallback`: the policy's choice when the first one
    /// is unsupported here; `None` skips the dump).
    pub fn new(
        data_dir: &Path,
        app_version: &str,
        dumper: Box<dyn Dumper>,
        fallback: Option<Box<dyn Dumper>>,
    ) -> Pipeline {
        Pipeline {
            data_dir: data_dir.to_path_buf(),
            app_version: app_version.to_string(),
            dumper,
            fallback,
            live: None,
            network: Arc::new(NetworkState::default()),
            analyser: None,
            dumpless: HashSet::new(),
            flight: Flight::default(),
            queue: Arc::new(QueueBoard::default()),
        }
    }

    /// Take uploads' network state from `network` (the one `OomGuard.setNetwork` feeds).
    pub fn with_network(mut self, network: Arc<NetworkState>) -> Pipeline {
        self.network = network;
        self
    }

    /// Use `analyser` (or none) instead of [`find_analyser`].
    pub fn with_analyser(mut self, analyser: Option<PathBuf>) -> Pipeline {
        self.analyser = Some(analyser);
        self
    }

    /// Open the spool and start the `oomguard-io` thread, whose first pass resumes what
    /// earlier launches left.
    fn start(&mut self, policy: &Policy, api_level: u32) -> Result<&mut Live, String> {
        if self.live.is_none() {
            let spool_root = self.data_dir.join(SPOOL_DIR);
            let spool = Spool::open(&spool_root, Quotas::from(policy))
                .map_err(|e| format!("spool {}: {e}", spool_root.display()))?;
            let analyser = self.analyser.clone().unwrap_or_else(find_analyser);
            if analyser.is_none() {
                info!("no oomguard analyser executable (OOMGUARD_BIN, or beside liboomguard.so): dumps are analysed in a forked child");
            }
            let cfg = IoConfig {
                spool_root,
                quotas: Quotas::from(policy),
                analysis_dir: self.data_dir.join(ANALYSIS_DIR),
                analyser,
                limits: AnalysisLimits::from(policy),
                analysis: analyze::Config::from(policy),
                upload: crate::policy::upload_config(policy),
                retry_every: Duration::from_secs(60),
                network: self.network.clone(),
                default_network: default_network(api_level),
                flight: self.flight.clone(),
                queue: self.queue.clone(),
            };
            let (tx, rx) = chan::channel();
            self.network.set_waker(tx.clone());
            let (done_tx, done) = chan::channel();
            let handle = std::thread::Builder::new()
                .name("oomguard-io".into())
                .spawn(move || {
                    io_thread(cfg, rx);
                    let _ = done_tx.send(());
                })
                .map_err(|e| format!("cannot start the oomguard-io thread: {e}"))?;
            self.live = Some(Live {
                spool,
                guards: Guards::new(GuardPolicy::from(policy), &self.data_dir, &self.app_version),
                io: IoThread {
                    tx,
                    done,
                    handle: Some(handle),
                },
            });
        }
        Ok(self.live.as_mut().expect("just started"))
    }

    /// Stage, dump and commit the incident of verdict `v`: the action taken and what it did.
    /// A dump that is refused, fails or leaves no file does not lose the verdict: the incident
    /// is committed without a dump (its reason, samples, inventory and `dumpError`), once per
    /// kind and process.
    fn incident(
        &mut self,
        v: &Verdict,
        inv: Option<&Inventory>,
        cx: &ActionContext<'_>,
    ) -> Result<(&'static str, String), String> {
        let p = cx.policy;
        self.start(p, cx.device.api_level)?;
        let live = self.live.as_mut().expect("started");
        let staging = live.spool.stage().map_err(|e| e.to_string())?;
        let lvl = Level::from(p);
        let req = DumpRequest {
            full_path: staging.path(FileKind::FullDump),
            mini_path: (lvl != Level::None).then(|| staging.path(FileKind::MiniDump)),
            level: lvl,
            keep_full: p.dump.keep_full || lvl == Level::None,
            deadline: Duration::from_secs(p.dump.child_deadline_s),
        };
        let heap = v.evidence.last().map_or(0, |s| s.heap_used);
        let fallback: Option<&mut dyn Dumper> = match &mut self.fallback {
            Some(f) => Some(&mut **f),
            None => None,
        };
        let dump = dump::take(&live.guards, heap, &mut *self.dumper, fallback, &req)
            .map_err(|e| e.to_string());
        if let Err(why) = &dump {
            if !self.dumpless.insert(v.kind) {
                live.spool.discard(staging);
                return Err(format!(
                    "{why}; this process already reported a {} verdict without a dump",
                    v.kind.as_str()
                ));
            }
        }
        let outcome = dump.as_ref().ok();
        if let Some(Err(why)) = outcome.and_then(|o| o.mini.as_ref()) {
            warn!("the mini dump was abandoned ({why}); the full dump stays for analysis");
        }
        if let Some(inv) = inv {
            let kind = match inv.kind {
                crate::trigger::InventoryKind::Fd => FileKind::Fds,
                crate::trigger::InventoryKind::Threads => FileKind::Threads,
            };
            let text = serde_json::to_string_pretty(inv).unwrap_or_default();
            // Without it the incident still has its dump, reason and samples.
            if let Err(e) = std::fs::write(staging.path(kind), text) {
                warn!("the {kind:?} inventory could not be written: {e}");
                let _ = std::fs::remove_file(staging.path(kind));
            }
        }
        let last = v.evidence.last();
        let running_info = serde_json::json!({
            "appVersion": cx.app_version,
            "currentPage": cx.page,
            "manufacturer": cx.device.manufacturer,
            "apiLevel": cx.device.api_level,
            "is32bit": cx.device.is_32bit,
            "reason": v.reason,
            "kind": format!("{:?}", v.kind),
            "heapUsed": last.map(|s| s.heap_used),
            "heapMax": last.map(|s| s.heap_max),
            "fds": last.map(|s| s.fds),
            "threads": last.map(|s| s.threads),
            "vmRssKb": last.map(|s| s.vm_rss_kb),
            "dumper": outcome.map(|o| o.dumper),
            "pauseMs": outcome.map(|o| o.pause.as_secs_f64() * 1000.0),
            "gcWaitMs": outcome.map(|o| o.gc_wait.as_secs_f64() * 1000.0),
            "dumpMs": outcome.map(|o| o.total.as_secs_f64() * 1000.0),
            "caughtBy": outcome.map(|o| &o.caught_by),
            "javaThreads": cx.java_threads,
        });
        let info = NewIncident {
            reason: v.reason.clone(),
            samples: incident_samples(&v.evidence, cx.flight.recent(RECENT_MS)),
            running_info,
            policy_version: p.version.to_string(),
        };
        let id = match &dump {
            Ok(_) => live.spool.commit(staging, info),
            Err(why) => live.spool.commit_without_dump(staging, info, why.clone()),
        }
        .map_err(|e| match &dump {
            Ok(_) => format!("the dump was taken but could not be queued: {e}"),
            Err(_) => format!("the incident could not be queued: {e}"),
        })?;
        queue::note_queued(&self.queue, &live.spool, &id, p.upload.url.is_some());
        let _ = live.io.tx.send(Work::Pass);
        Ok(match &dump {
            Ok(o) => (
                "dumped",
                format!(
                    "incident {id}: {} dump, app paused {} ms, {} bytes full{}",
                    o.dumper,
                    o.pause.as_millis(),
                    o.full_bytes,
                    match &o.mini {
                        Some(Ok(s)) => format!(", {} bytes stripped", s.output_bytes),
                        _ => String::new(),
                    }
                ),
            ),
            Err(why) => (
                "reported",
                format!(
                    "incident {id} without a dump ({why}): its reason, samples and inventory go up"
                ),
            ),
        })
    }
}

impl Actions for Pipeline {
    fn run_io(&mut self, job: IoJob) -> Result<(), IoJob> {
        let Some(live) = &self.live else {
            return Err(job);
        };
        match live.io.tx.send(Work::Run(job)) {
            Err(mpsc::SendError(Work::Run(job))) => Err(job),
            _ => Ok(()),
        }
    }

    fn queue_board(&self) -> Option<Arc<QueueBoard>> {
        Some(self.queue.clone())
    }

    fn started(&mut self, cx: &ActionContext<'_>) {
        self.flight = cx.flight.clone();
        if let Err(e) = self.start(cx.policy, cx.device.api_level) {
            warn!("incident pipeline not started: {e}; verdicts will be recorded only");
        }
    }

    fn on_verdict(
        &mut self,
        v: &Verdict,
        inv: Option<&Inventory>,
        cx: &ActionContext<'_>,
    ) -> ActionRecord {
        match self.incident(v, inv, cx) {
            Ok((action, detail)) => {
                info!("{detail}");
                ActionRecord {
                    action: action.into(),
                    detail,
                }
            }
            Err(detail) => {
                warn!("no incident for this verdict: {detail}");
                ActionRecord {
                    action: "skipped".into(),
                    detail,
                }
            }
        }
    }

    fn on_death(&mut self, prev: &Previous, cx: &ActionContext<'_>) -> ActionRecord {
        match self.death(prev, cx) {
            Ok((action, detail)) => ActionRecord {
                action: action.into(),
                detail,
            },
            Err(detail) => {
                warn!("the previous process's death is not reported: {detail}");
                ActionRecord {
                    action: "skipped".into(),
                    detail,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod fork_tests;
