//! The `oomguard-io` thread: analysis and upload, off the agent thread.
//!
//! Each pass runs the spool's recovery, which analyses every dumped incident in a separate
//! process (`analysis`), then uploads what is analysed. The first pass runs at start-up, so
//! whatever a previous launch left (a dump not analysed, an upload cut short) resumes; a verdict,
//! a change to a connected network, or [`IoConfig::retry_every`] start the next. The agent's
//! work that may block on the network (its policy fetch) runs here too, between passes.
//!
//! Before each pass's analyses and after its uploads, the thread publishes the queue summary of
//! `status.json` (incidents waiting, their bytes, the next attempt, the last upload error:
//! `queue.rs`) on the agent's [`QueueBoard`]; the agent never reads the spool for it.
//!
//! A pass or a job that panics does not end the thread: the panic is caught, logged and kept as
//! the queue summary's last error, and the thread goes on. After [`PANICKED_PASSES_MAX`] passes
//! in a row have panicked, it makes no more passes until the next launch (each would likely
//! panic again on the same incident) but still runs the agent's jobs. The spool is crash-safe,
//! so a pass cut short by a panic leaves it as a killed process would, for recovery to take up.
//!
//! Invariants: the agent thread never analyses or uploads; stopping waits at most
//! [`IO_STOP_WAIT`] for a pass in flight, which otherwise finishes in the background (or resumes
//! on the next launch); a panic on this thread never ends it.

use super::analysis::analyse_out_of_process;
use super::network::NetworkState;
use super::queue;
use super::runner::AnalysisLimits;
use crate::agent::{panic_message, IoJob, QueueBoard};
use crate::recorder::{self, Flight};
use crate::spool::{AnalysisJob, Clock, Quotas, Spool};
use crate::upload::{self, Network};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::Duration;
use sys::chan;
use tracing::{info, warn};

/// What the I/O thread is asked to do.
pub(super) enum Work {
    /// Analyse what is dumped, upload what is analysed.
    Pass,
    /// The agent's work that may block on the network (its policy fetch).
    Run(IoJob),
    Stop,
}

/// The `oomguard-io` thread: analysis and upload, off the agent thread.
pub(super) struct IoThread {
    pub(super) tx: chan::Sender<Work>,
    /// Says when the thread has ended.
    pub(super) done: chan::Receiver<()>,
    pub(super) handle: Option<std::thread::JoinHandle<()>>,
}

/// How long `stop` waits for an analysis or upload pass in flight.
pub(super) const IO_STOP_WAIT: Duration = Duration::from_secs(3);

/// Passes that panic one after the other before the I/O thread makes no more of them until the
/// next launch.
pub(super) const PANICKED_PASSES_MAX: u32 = 3;

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
pub(super) struct IoConfig {
    pub(super) spool_root: PathBuf,
    pub(super) quotas: Quotas,
    pub(super) analysis_dir: PathBuf,
    pub(super) analyser: Option<PathBuf>,
    pub(super) limits: AnalysisLimits,
    /// The detectors' thresholds, from the policy.
    pub(super) analysis: analyze::Config,
    pub(super) upload: Option<upload::Config>,
    /// How long to wait before another pass while work is pending (backoff, no network).
    pub(super) retry_every: Duration,
    /// The app's latest report, and what to assume before one.
    pub(super) network: Arc<NetworkState>,
    pub(super) default_network: Network,
    pub(super) flight: Flight,
    /// Where the queue summary is published for `status.json`.
    pub(super) queue: Arc<QueueBoard>,
}

/// One pass: recover and analyse, then upload; the queue summary is published before the
/// analyses and after the uploads.
pub(super) fn io_pass(cfg: &IoConfig, last: &mut queue::LastError) {
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

pub(super) fn io_thread(cfg: IoConfig, rx: chan::Receiver<Work>) {
    io_loop(&cfg, &rx, io_pass);
}

/// The I/O thread's loop, each pass made by `pass` (`io_pass`; another in tests).
pub(super) fn io_loop(
    cfg: &IoConfig,
    rx: &chan::Receiver<Work>,
    mut pass: impl FnMut(&IoConfig, &mut queue::LastError),
) {
    let mut due = true;
    let mut last = queue::LastError::default();
    // Passes that panicked since the last one that did not.
    let mut panicked = 0;
    loop {
        if due && panicked < PANICKED_PASSES_MAX {
            match catch_unwind(AssertUnwindSafe(|| pass(cfg, &mut last))) {
                Ok(()) => panicked = 0,
                Err(p) => {
                    panicked += 1;
                    after_panicked_pass(cfg, &mut last, &panic_message(&*p), panicked);
                }
            }
        }
        due = true;
        match rx.recv_timeout(cfg.retry_every) {
            Ok(Work::Run(job)) => {
                run_job(job);
                due = false;
            }
            Ok(Work::Pass) | Err(mpsc::RecvTimeoutError::Timeout) => {
                // Coalesce kicks that came meanwhile.
                while let Ok(w) = rx.try_recv() {
                    match w {
                        Work::Stop => return,
                        Work::Run(job) => run_job(job),
                        Work::Pass => {}
                    }
                }
            }
            Ok(Work::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Run one of the agent's jobs; a panic is logged, and the thread goes on.
fn run_job(job: IoJob) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(job)) {
        warn!(
            "a job on the oomguard-io thread panicked: {}; the thread goes on",
            panic_message(&*p)
        );
    }
}

/// After the `n`th pass in a row panicked with `why`: the analysis is no longer in progress, the
/// panic is the last error, and the queue summary says so.
fn after_panicked_pass(cfg: &IoConfig, last: &mut queue::LastError, why: &str, n: u32) {
    cfg.flight.set_busy(recorder::BUSY_ANALYSIS, false);
    if n < PANICKED_PASSES_MAX {
        warn!("an analysis or upload pass panicked: {why}; the next pass tries again");
    } else {
        warn!(
            "an analysis or upload pass panicked: {why}; {n} in a row, so no more passes until \
             the next launch"
        );
    }
    last.what = Some(format!("analysis or upload pass panicked: {why}"));
    last.at_ms = Some(crate::spool::SystemClock.now_ms());
    if let Ok(spool) = Spool::open(&cfg.spool_root, cfg.quotas.clone()) {
        if let Ok(guard) = spool.lock() {
            let up = cfg.upload.as_ref();
            queue::publish(&cfg.queue, &guard, up, None, last, cfg.retry_every);
        }
    }
}
