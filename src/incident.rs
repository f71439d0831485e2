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
//! Invariants: the agent thread never analyses or uploads; a failed dump leaves no incident; an
//! incident is deleted only by the uploader after the server acknowledged every file.

use crate::agent::{ActionContext, ActionRecord, Actions};
use crate::dump::analysis::{run_limited, AnalysisLimits};
use crate::dump::guard::{GuardPolicy, Guards};
use crate::dump::{self, DumpRequest, Dumper};
use crate::hprof::Level;
use crate::policy::{Policy, StripLevel};
use crate::spool::{AnalysisJob, FileKind, NewIncident, Quotas, Spool};
use crate::trigger::{Inventory, Verdict};
use crate::upload::{self, Network};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;
use tracing::{info, warn};

/// Where the agent keeps its spool, under the data dir.
pub const SPOOL_DIR: &str = "spool";
/// Analysis logs, attempt counters and running-info files (outside the spool, which moves
/// unknown files aside).
pub const ANALYSIS_DIR: &str = "analysis";

/// The spool's limits from the policy.
pub fn quotas(p: &Policy) -> Quotas {
    Quotas {
        max_total_bytes: p.spool.max_bytes,
        max_count: p.spool.max_count as usize,
        max_age: Duration::from_secs(p.spool.max_age_days as u64 * 86_400),
        max_analysis_attempts: p.analysis.max_attempts,
        keep_full_dump: p.dump.keep_full,
    }
}

/// The dump guards from the policy.
pub fn guard_policy(p: &Policy) -> GuardPolicy {
    GuardPolicy {
        min_free_bytes: p.dump.min_free_disk_mb << 20,
        heap_factor: p.dump.min_free_disk_heap_factor,
        once_per_process: p.dump.once_per_process,
        quota_per_version: p.dump.per_version_quota,
        window: Duration::from_secs(p.dump.quota_window_days as u64 * 86_400),
    }
}

/// The uploader's settings from the policy; `None` when the policy names no server.
pub fn upload_config(p: &Policy) -> Option<upload::Config> {
    let url = p.upload.url.clone()?;
    Some(upload::Config {
        endpoint: url,
        io_timeout: Duration::from_millis(p.upload.timeout_ms),
        max_attempts: p.upload.max_attempts,
        backoff_base: Duration::from_millis(p.upload.backoff_base_ms),
        backoff_cap: Duration::from_millis(p.upload.backoff_cap_ms),
        daily_byte_budget: p.upload.daily_byte_budget,
        unmetered_only: p.upload.unmetered_only,
        ..upload::Config::default()
    })
}

fn level(s: StripLevel) -> Level {
    match s {
        StripLevel::None => Level::None,
        StripLevel::Arrays => Level::Arrays,
        StripLevel::App => Level::App,
    }
}

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

/// What the I/O thread is asked to do.
enum Work {
    /// Analyse what is dumped, upload what is analysed.
    Pass,
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
    upload: Option<upload::Config>,
    /// How long to wait before another pass while work is pending (backoff, no network).
    retry_every: Duration,
}

fn io_pass(cfg: &IoConfig) {
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
            let mut analyse = |job: &AnalysisJob| analyse_out_of_process(cfg, job);
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
        return;
    };
    match upload::run_once(&spool, up, Network::UNMETERED) {
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
    let mut args: Vec<&OsStr> = vec![
        OsStr::new("analyze"),
        input.as_os_str(),
        OsStr::new("-o"),
        job.report_out.as_os_str(),
    ];
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
            "analysis child {} (attempt {}); its log: {}",
            out.end,
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
    let acfg = crate::analyze::Config {
        threads: 1,
        ..crate::analyze::Config::default()
    };
    let r = crate::dump::analysis::run_forked(&cfg.limits, move || {
        let Ok(report) =
            crate::analyze::analyze(crate::analyze::Input::File(&input), &acfg, running)
        else {
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
        Err(format!("analysis child (forked, no executable) {}", r.end))
    }
}

fn io_thread(cfg: IoConfig, rx: mpsc::Receiver<Work>) {
    loop {
        io_pass(&cfg);
        match rx.recv_timeout(cfg.retry_every) {
            Ok(Work::Pass) | Err(mpsc::RecvTimeoutError::Timeout) => {
                // Coalesce kicks that came meanwhile.
                while let Ok(w) = rx.try_recv() {
                    if matches!(w, Work::Stop) {
                        return;
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
        }
    }

    /// Open the spool and start the `oomguard-io` thread, whose first pass resumes what
    /// earlier launches left.
    fn start(&mut self, policy: &Policy) -> Result<&mut Live, String> {
        if self.live.is_none() {
            let spool_root = self.data_dir.join(SPOOL_DIR);
            let spool = Spool::open(&spool_root, quotas(policy))
                .map_err(|e| format!("spool {}: {e}", spool_root.display()))?;
            let analyser = find_analyser();
            if analyser.is_none() {
                info!("no oomguard analyser executable (OOMGUARD_BIN, or beside liboomguard.so): dumps are analysed in a forked child");
            }
            let cfg = IoConfig {
                spool_root,
                quotas: quotas(policy),
                analysis_dir: self.data_dir.join(ANALYSIS_DIR),
                analyser,
                limits: AnalysisLimits {
                    address_space: policy.analysis.memory_limit_mb << 20,
                    max_attempts: policy.analysis.max_attempts,
                    ..AnalysisLimits::default()
                },
                upload: upload_config(policy),
                retry_every: Duration::from_secs(60),
            };
            let (tx, rx) = mpsc::channel();
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
                guards: Guards::new(guard_policy(policy), &self.data_dir, &self.app_version),
                io: IoThread {
                    tx,
                    done,
                    handle: Some(handle),
                },
            });
        }
        Ok(self.live.as_mut().expect("just started"))
    }

    fn incident(
        &mut self,
        v: &Verdict,
        inv: Option<&Inventory>,
        cx: &ActionContext<'_>,
    ) -> Result<String, String> {
        let p = cx.policy;
        self.start(p)?;
        let live = self.live.as_mut().expect("started");
        let staging = live.spool.stage().map_err(|e| e.to_string())?;
        let lvl = level(p.dump.strip_level);
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
        let outcome = dump::take(&live.guards, heap, &mut *self.dumper, fallback, &req)
            .map_err(|e| e.to_string())?;
        if let Some(Err(why)) = &outcome.mini {
            warn!("the mini dump was abandoned ({why}); the full dump stays for analysis");
        }
        if let Some(inv) = inv {
            let kind = match inv.kind {
                crate::trigger::InventoryKind::Fd => FileKind::Fds,
                crate::trigger::InventoryKind::Threads => FileKind::Threads,
            };
            let text = serde_json::to_string_pretty(inv).unwrap_or_default();
            std::fs::write(staging.path(kind), text)
                .map_err(|e| format!("writing the inventory: {e}"))?;
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
            "dumper": outcome.dumper,
            "pauseMs": outcome.pause.as_secs_f64() * 1000.0,
            "dumpMs": outcome.total.as_secs_f64() * 1000.0,
            "caughtBy": outcome.caught_by,
        });
        let id = live
            .spool
            .commit(
                staging,
                NewIncident {
                    reason: v.reason.clone(),
                    samples: serde_json::to_value(&v.evidence).unwrap_or_default(),
                    running_info,
                    policy_version: p.version.to_string(),
                },
            )
            .map_err(|e| format!("the dump was taken but could not be queued: {e}"))?;
        let _ = live.io.tx.send(Work::Pass);
        Ok(format!(
            "incident {id}: {} dump, app paused {} ms, {} bytes full{}",
            outcome.dumper,
            outcome.pause.as_millis(),
            outcome.full_bytes,
            match &outcome.mini {
                Some(Ok(s)) => format!(", {} bytes stripped", s.output_bytes),
                _ => String::new(),
            }
        ))
    }
}

impl Actions for Pipeline {
    fn started(&mut self, cx: &ActionContext<'_>) {
        if let Err(e) = self.start(cx.policy) {
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
            Ok(detail) => {
                info!("{detail}");
                ActionRecord {
                    action: "dumped".into(),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spool::State;

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/fixtures/hprof/android/leak_service_binder.hprof")
    }

    /// A dumped incident in a fresh spool, its mini dump made by the stripper.
    fn dumped(root: &Path) -> String {
        let spool = Spool::open(root.join(SPOOL_DIR), Quotas::default()).unwrap();
        let staging = spool.stage().unwrap();
        let input = std::fs::read(fixture()).unwrap();
        let (mini, _) = crate::hprof::strip_bytes(&input, Level::Arrays).unwrap();
        std::fs::write(staging.path(FileKind::MiniDump), mini).unwrap();
        spool
            .commit(
                staging,
                NewIncident {
                    reason: "test".into(),
                    running_info: serde_json::json!({"appVersion": "t-1"}),
                    ..NewIncident::default()
                },
            )
            .unwrap()
    }

    fn io_config(root: &Path, analyser: Option<PathBuf>) -> IoConfig {
        IoConfig {
            spool_root: root.join(SPOOL_DIR),
            quotas: Quotas::default(),
            analysis_dir: root.join(ANALYSIS_DIR),
            analyser,
            limits: AnalysisLimits {
                deadline: Duration::from_secs(60),
                ..AnalysisLimits::default()
            },
            upload: None,
            retry_every: Duration::from_secs(60),
        }
    }

    fn analysed_report(root: &Path, id: &str) -> serde_json::Value {
        let spool = Spool::open(root.join(SPOOL_DIR), Quotas::default()).unwrap();
        let inc = spool.read_incident(id).unwrap();
        assert_eq!(inc.state, State::Analysed, "{inc:?}");
        let b = std::fs::read(spool.incident_dir(id).join("report.json")).unwrap();
        serde_json::from_slice(&b).unwrap()
    }

    #[test]
    fn without_an_executable_the_dump_is_analysed_in_a_forked_child() {
        let dir = tempfile::tempdir().unwrap();
        let id = dumped(dir.path());
        io_pass(&io_config(dir.path(), None));
        let report = analysed_report(dir.path(), &id);
        // The running info comes from the incident, not from the analysing process.
        assert_eq!(report["runningInfo"]["appVersion"], "t-1");
        assert!(
            !report["gcPaths"].as_array().unwrap().is_empty(),
            "{report}"
        );
        // Nothing of ours is left in the incident for the spool to move aside.
        let names: Vec<String> = std::fs::read_dir(dir.path().join(ANALYSIS_DIR))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert!(names.is_empty(), "{names:?}");
    }

    #[test]
    fn a_crashing_analyser_is_counted_and_the_dump_kept() {
        let dir = tempfile::tempdir().unwrap();
        let id = dumped(dir.path());
        // An "analyser" that dies like an OOM-killed process would.
        let bad = dir.path().join("crash.sh");
        std::fs::write(&bad, "#!/bin/sh\nkill -9 $$\n").unwrap();
        std::fs::set_permissions(&bad, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        io_pass(&io_config(dir.path(), Some(bad)));
        let spool = Spool::open(dir.path().join(SPOOL_DIR), Quotas::default()).unwrap();
        let inc = spool.read_incident(&id).unwrap();
        assert_eq!(inc.state, State::Dumped);
        assert_eq!(inc.analysis_attempts, 1);
        assert!(
            inc.analysis_error
                .as_deref()
                .unwrap_or("")
                .contains("signal 9"),
            "{inc:?}"
        );
        assert!(spool.incident_dir(&id).join("mini.hprof").exists());
        // The next launch, with a working analyser (the fork fallback), finishes it.
        io_pass(&io_config(dir.path(), None));
        analysed_report(dir.path(), &id);
    }
}
