//! The path of one incident, from a verdict to the server: the real [`Actions`] of the agent.
//!
//! On a verdict, on the agent thread: stage an incident in the spool, take the dump through
//! [`dump::take`] (which enforces the guards: free disk, once per process, per-version quota, one
//! dump at a time) with the stripper teed onto the VM's writes, write the fd and thread
//! inventories beside it, and commit the incident (crash-safe). Then the `oomguard-io` thread is
//! woken: it runs the spool's recovery, which analyses every dumped incident in a separate
//! process (`oomguard analyze`, with `oom_score_adj` raised, nice 19 and a memory limit), and
//! then uploads what is analysed. The same pass runs once at start-up, so whatever a previous
//! launch left (a dump not analysed, an upload cut short) resumes.
//!
//! Uploads go by the app's latest word on the network ([`NetworkState`], set through
//! `OomGuard.setNetwork(connected, metered)`). Until the app says anything, the network counts
//! as connected and unmetered on a JVM (where nobody calls it), and as connected but metered on
//! Android (API level > 0), so that an app which never reports its network never spends mobile
//! data under `unmetered_only`. A change to a connected network wakes the I/O thread for a pass.
//!
//! The agent's policy fetch runs here too, between passes ([`Actions::run_io`]).
//!
//! Before each pass's analyses and after its uploads, the I/O thread publishes the queue summary
//! of `status.json` (incidents waiting, their bytes, the next attempt, the last upload error:
//! `queue.rs`) on the agent's [`QueueBoard`]; the agent never reads the spool for it.
//!
//! Invariants: the agent thread never analyses or uploads; a failed dump leaves no incident; an
//! incident is deleted only by the uploader after the server acknowledged every file.

mod queue;

use crate::agent::{ActionContext, ActionRecord, Actions, IoJob, QueueBoard};
use crate::dump::analysis::{run_limited, AnalysisLimits};
use crate::dump::guard::{GuardPolicy, Guards};
use crate::dump::{self, DumpRequest, Dumper};
use crate::policy::{upload_config, Policy};
use crate::recorder::{self, Flight, Previous};
use crate::spool::{AnalysisJob, FileKind, NewIncident, Quotas, Spool};
use crate::trigger::{Inventory, Kind, Verdict};
use crate::upload::{self, Network};
use hprof::Level;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tracing::{info, warn};

/// Where the agent keeps its spool, under the data dir.
pub const SPOOL_DIR: &str = "spool";
/// Analysis logs, attempt counters and running-info files (outside the spool, which moves
/// unknown files aside).
pub const ANALYSIS_DIR: &str = "analysis";

/// The `oomguard` executable that analyses dumps out of process: `$OOMGUARD_BIN`, else an
/// `oomguard` (Linux) or `liboomguard_exe.so` (Android's native library directory) beside the
/// loaded `liboomguard.so`.
pub fn find_analyser() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("OOMGUARD_BIN").map(PathBuf::from) {
        return p.is_file().then_some(p);
    }
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let lib = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with("/liboomguard.so"))?;
    let dir = Path::new(lib).parent()?;
    ["oomguard", "liboomguard_exe.so"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// The network as the app last reported it, shared by the JNI facade (any thread) and the
/// `oomguard-io` thread. Lock-free to read; setting it may wake the I/O thread.
#[derive(Debug, Default)]
pub struct NetworkState {
    /// 0: never set; else `SET | CONNECTED? | METERED?`.
    bits: AtomicU8,
    /// The I/O thread's queue, once it runs.
    waker: Mutex<Option<mpsc::Sender<Work>>>,
}

const NET_SET: u8 = 1;
const NET_CONNECTED: u8 = 2;
const NET_METERED: u8 = 4;

impl NetworkState {
    /// The network the app last reported; `None` if it never did.
    pub fn get(&self) -> Option<Network> {
        let b = self.bits.load(Ordering::Acquire);
        (b & NET_SET != 0).then_some(Network {
            connected: b & NET_CONNECTED != 0,
            metered: b & NET_METERED != 0,
        })
    }

    /// Record the app's report. A change to a connected network wakes the I/O thread for a
    /// pass (what it may upload on a metered one is the policy's call, in that pass).
    pub fn set(&self, n: Network) {
        let b = NET_SET
            | if n.connected { NET_CONNECTED } else { 0 }
            | if n.metered { NET_METERED } else { 0 };
        let old = self.bits.swap(b, Ordering::AcqRel);
        if old != b && n.connected {
            let w = self.waker.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(tx) = w.as_ref() {
                let _ = tx.send(Work::Pass);
            }
        }
    }

    fn set_waker(&self, tx: mpsc::Sender<Work>) {
        *self.waker.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
    }
}

/// The network assumed until the app reports one: unmetered on a JVM (nobody calls
/// `setNetwork` there), metered on Android (`api_level > 0`), where an app that never reports
/// must not spend the user's mobile data.
pub fn default_network(api_level: u32) -> Network {
    if api_level > 0 {
        Network::METERED
    } else {
        Network::UNMETERED
    }
}

/// What the I/O thread is asked to do.
enum Work {
    /// Analyse what is dumped, upload what is analysed.
    Pass,
    /// The agent's work that may block on the network (its policy fetch).
    Run(IoJob),
    Stop,
}

/// The `oomguard-io` thread: analysis and upload, off the agent thread.
struct IoThread {
    tx: mpsc::Sender<Work>,
    /// Says when the thread has ended.
    done: mpsc::Receiver<()>,
    handle: Option<std::thread::JoinHandle<()>>,
}

/// How long `stop` waits for an analysis or upload pass in flight.
const IO_STOP_WAIT: Duration = Duration::from_secs(3);

impl Drop for IoThread {
    fn drop(&mut self) {
        let _ = self.tx.send(Work::Stop);
        match self.done.recv_timeout(IO_STOP_WAIT) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Some(h) = self.handle.take() {
                    let _ = h.join();
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                info!("an analysis or upload pass is still running; it finishes in the background, or resumes on the next launch");
            }
        }
    }
}

/// Everything the I/O thread needs, fixed at start.
struct IoConfig {
    spool_root: PathBuf,
    quotas: Quotas,
    analysis_dir: PathBuf,
    analyser: Option<PathBuf>,
    limits: AnalysisLimits,
    /// The detectors' thresholds, from the policy.
    analysis: analyze::Config,
    upload: Option<upload::Config>,
    /// How long to wait before another pass while work is pending (backoff, no network).
    retry_every: Duration,
    /// The app's latest report, and what to assume before one.
    network: Arc<NetworkState>,
    default_network: Network,
    flight: Flight,
    /// Where the queue summary is published for `status.json`.
    queue: Arc<QueueBoard>,
}

/// One pass: recover and analyse, then upload; the queue summary is published before the
/// analyses and after the uploads.
fn io_pass(cfg: &IoConfig, last: &mut queue::LastError) {
    let spool = match Spool::open(&cfg.spool_root, cfg.quotas.clone()) {
        Ok(s) => s,
        Err(e) => {
            warn!(
                "spool {}: {e}; nothing analysed or uploaded",
                cfg.spool_root.display()
            );
            return;
        }
    };
    match spool.lock() {
        Ok(guard) => {
            let up = cfg.upload.as_ref();
            queue::publish(&cfg.queue, &guard, up, None, last, cfg.retry_every);
            let mut analyse = |job: &AnalysisJob| {
                cfg.flight.set_busy(recorder::BUSY_ANALYSIS, true);
                let r = analyse_out_of_process(cfg, job);
                cfg.flight.set_busy(recorder::BUSY_ANALYSIS, false);
                r
            };
            match guard.recover(&mut analyse) {
                Ok(r) => {
                    if r != Default::default() {
                        info!(
                            analysed = r.analysed,
                            failed = r.analysis_failed,
                            given_up = r.analysis_given_up,
                            deleted_half_written = r.half_written_deleted,
                            quarantined = r.quarantined,
                            evicted = r.evicted,
                            incidents = r.incidents,
                            "spool recovered"
                        );
                    }
                }
                Err(e) => warn!("spool recovery failed: {e}"),
            }
        }
        Err(e) => {
            info!("spool busy ({e}); another process analyses and uploads");
            return;
        }
    }
    let Some(up) = &cfg.upload else {
        if let Ok(guard) = spool.lock() {
            queue::publish(&cfg.queue, &guard, None, None, last, cfg.retry_every);
        }
        return;
    };
    // Asked before each incident and each chunk: the app may report another network meanwhile.
    let net = || cfg.network.get().unwrap_or(cfg.default_network);
    let pass = upload::run_once_with(&spool, up, &net).map_err(|e| e.to_string());
    last.note(&pass, spool.now_ms());
    if let Ok(guard) = spool.lock() {
        queue::publish(
            &cfg.queue,
            &guard,
            Some(up),
            Some(&pass),
            last,
            cfg.retry_every,
        );
    }
    match pass {
        Ok(s) => {
            for id in &s.acknowledged {
                info!(incident = %id, "report acknowledged by the server; incident deleted");
            }
            for (id, why) in &s.rejected {
                warn!(incident = %id, reason = %why, "report rejected by the server");
            }
            if let Some(stop) = &s.stopped {
                info!("upload paused: {stop:?}");
            }
        }
        Err(e) => warn!("upload pass failed: {e}"),
    }
}

/// One analysis, in a child process; the spool counts the attempts.
fn analyse_out_of_process(cfg: &IoConfig, job: &AnalysisJob) -> Result<(), String> {
    let input = job
        .full_dump
        .as_ref()
        .or(job.mini_dump.as_ref())
        .ok_or("the incident holds no dump")?;
    let running = std::fs::read(job.dir.join("incident.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .map(|v| v["body"]["runningInfo"].clone())
        .unwrap_or_default();
    let Some(bin) = &cfg.analyser else {
        return analyse_in_fork(cfg, job, input, running);
    };
    std::fs::create_dir_all(&cfg.analysis_dir)
        .map_err(|e| format!("{}: {e}", cfg.analysis_dir.display()))?;
    let log = cfg.analysis_dir.join(format!("{}.log", job.id));
    let attempts = cfg.analysis_dir.join(format!("{}.dump", job.id));
    let top = cfg.analysis.top_n.to_string();
    let mut args: Vec<&OsStr> = vec![
        OsStr::new("analyze"),
        input.as_os_str(),
        OsStr::new("-o"),
        job.report_out.as_os_str(),
    ];
    // The policy's thresholds (the command line's --top would override the file's topN).
    let thresholds = cfg.analysis_dir.join(format!("{}.config.json", job.id));
    let config = serde_json::to_vec(&cfg.analysis).map_err(|e| e.to_string())?;
    std::fs::write(&thresholds, config).map_err(|e| format!("{}: {e}", thresholds.display()))?;
    args.extend([
        OsStr::new("--config"),
        thresholds.as_os_str(),
        OsStr::new("--top"),
        top.as_ref(),
    ]);
    let info = cfg.analysis_dir.join(format!("{}.running.json", job.id));
    if !running.is_null() && std::fs::write(&info, running.to_string()).is_ok() {
        args.push(OsStr::new("--running-info"));
        args.push(info.as_os_str());
    }
    // The spool counts attempts across launches; the runner's own counter is kept out of the
    // incident directory and never stops a run.
    let limits = AnalysisLimits {
        max_attempts: u32::MAX,
        ..cfg.limits.clone()
    };
    let r = run_limited(bin, &args, &log, &attempts, &limits);
    let _ = std::fs::remove_file(&info);
    let _ = std::fs::remove_file(&thresholds);
    let mut counter = attempts.into_os_string();
    counter.push(".attempts");
    let _ = std::fs::remove_file(counter);
    match r {
        Ok(out) if out.end.ok() => {
            info!(incident = %job.id, ms = out.elapsed.as_millis() as u64, "analysis done out of process");
            let _ = std::fs::remove_file(&log);
            Ok(())
        }
        Ok(out) => Err(format!(
            "analysis child {}{} (attempt {}); its log: {}",
            out.end,
            out.budget_note(&limits),
            job.attempt,
            log.display()
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Where no analyser executable is shipped: the analyser runs in a forked child (pure Rust, no
/// JNI, no logging), under the same limits.
fn analyse_in_fork(
    cfg: &IoConfig,
    job: &AnalysisJob,
    input: &Path,
    running: serde_json::Value,
) -> Result<(), String> {
    let out = job.report_out.clone();
    let input = input.to_path_buf();
    let acfg = analyze::Config {
        threads: 1,
        ..cfg.analysis.clone()
    };
    let r = crate::dump::analysis::run_forked(&cfg.limits, move || {
        let Ok(report) = analyze::analyze(analyze::Input::File(&input), &acfg, running) else {
            return 2;
        };
        match serde_json::to_vec(&report) {
            Ok(b) if std::fs::write(&out, &b).is_ok() => 0,
            _ => 1,
        }
    })
    .map_err(|e| e.to_string())?;
    if r.end.ok() {
        info!(incident = %job.id, ms = r.elapsed.as_millis() as u64, "analysis done in a forked child (no analyser executable shipped)");
        Ok(())
    } else {
        let _ = std::fs::remove_file(&job.report_out);
        Err(format!(
            "analysis child (forked, no executable) {}{}",
            r.end,
            r.budget_note(&cfg.limits)
        ))
    }
}

fn io_thread(cfg: IoConfig, rx: mpsc::Receiver<Work>) {
    let mut pass = true;
    let mut last = queue::LastError::default();
    loop {
        if pass {
            io_pass(&cfg, &mut last);
        }
        pass = true;
        match rx.recv_timeout(cfg.retry_every) {
            Ok(Work::Run(job)) => {
                job();
                pass = false;
            }
            Ok(Work::Pass) | Err(mpsc::RecvTimeoutError::Timeout) => {
                // Coalesce kicks that came meanwhile.
                while let Ok(w) = rx.try_recv() {
                    match w {
                        Work::Stop => return,
                        Work::Run(job) => job(),
                        Work::Pass => {}
                    }
                }
            }
            Ok(Work::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
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
                upload: upload_config(policy),
                retry_every: Duration::from_secs(60),
                network: self.network.clone(),
                default_network: default_network(api_level),
                flight: self.flight.clone(),
                queue: self.queue.clone(),
            };
            let (tx, rx) = mpsc::channel();
            self.network.set_waker(tx.clone());
            let (done_tx, done) = mpsc::channel();
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
            samples: serde_json::to_value(&v.evidence).unwrap_or_default(),
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

impl Pipeline {
    /// Commit a `death` incident for the previous process, whose flight ring says it died: its
    /// last samples, the trend of each figure over its last minute, its last words, what was in
    /// progress. It holds no dump (`dumpError` says why) and goes up like any other incident,
    /// within its own daily quota (the policy's `death.max_per_day`).
    fn death(
        &mut self,
        prev: &Previous,
        cx: &ActionContext<'_>,
    ) -> Result<(&'static str, String), String> {
        let p = cx.policy;
        let quota = self.data_dir.join(DEATH_QUOTA_FILE);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        if !p.death.report {
            return Err("the policy's death.report is off: the death is logged only".into());
        }
        let count = deaths_today(&quota, now);
        if count >= p.death.max_per_day {
            return Err(format!(
                "{count} deaths already reported today (the policy's death.max_per_day): this one is logged only"
            ));
        }
        self.start(p, cx.device.api_level)?;
        let live = self.live.as_mut().expect("started");
        let staging = live.spool.stage().map_err(|e| e.to_string())?;
        let reason = prev.reason();
        let running_info = serde_json::json!({
            "kind": "death",
            "appVersion": prev.app_version,
            "currentPage": prev.page,
            "manufacturer": cx.device.manufacturer,
            "apiLevel": cx.device.api_level,
            "is32bit": cx.device.is_32bit,
            "reason": reason,
            "pid": prev.pid,
            "processStartMs": prev.process_start_ms,
            "agentStartMs": prev.agent_start_ms,
            "policyVersionAtDeath": prev.policy_version,
            "exit": prev.state,
            "dumpInProgress": prev.dump_in_progress,
            "analysisInProgress": prev.analysis_in_progress,
            "lastWords": prev.last_words,
            "exitInfo": prev.exit_info,
            "exitInfoError": prev.exit_info_error,
            "trend": prev.trend(60_000),
            "tornSamples": prev.torn_slots,
            "tornLastWords": prev.torn_last_words,
            "reportedByAppVersion": cx.app_version,
        });
        let info = NewIncident {
            reason,
            samples: serde_json::to_value(&prev.samples).unwrap_or_default(),
            running_info,
            policy_version: p.version.to_string(),
        };
        let id = live
            .spool
            .commit_without_dump(
                staging,
                info,
                "no dump: the process died before one was taken".into(),
            )
            .map_err(|e| format!("the death could not be queued: {e}"))?;
        queue::note_queued(&self.queue, &live.spool, &id, p.upload.url.is_some());
        if let Err(e) = save_deaths_today(&quota, now, count + 1) {
            warn!(
                "{}: {e}; the death quota may let one more through",
                quota.display()
            );
        }
        let _ = live.io.tx.send(Work::Pass);
        Ok((
            "reported",
            format!("incident {id}: the death of pid {} goes up", prev.pid),
        ))
    }
}

/// Where the count of deaths reported today is kept, in the data dir.
const DEATH_QUOTA_FILE: &str = "flight/deaths.json";

/// Deaths reported on the day of `now_ms` (0 when the file is missing, unreadable or of
/// another day).
fn deaths_today(path: &Path, now_ms: u64) -> u32 {
    let day = now_ms / 86_400_000;
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .filter(|v| v["day"].as_u64() == Some(day))
        .and_then(|v| v["count"].as_u64())
        .map_or(0, |c| c.min(u32::MAX as u64) as u32)
}

fn save_deaths_today(path: &Path, now_ms: u64, count: u32) -> std::io::Result<()> {
    let body = serde_json::json!({"day": now_ms / 86_400_000, "count": count});
    sys::fs::write_file_atomic(path, body.to_string().as_bytes())
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
