//! One analysis of a dumped incident, for the I/O thread: with the `oomguard` executable
//! shipped beside the library (found through `/proc/self/maps`), or in a forked child where
//! there is none; both under the policy's limits ([`super::runner`]). The spool counts the
//! attempts across launches.
//!
//! Invariant: the analyser's logs, attempt counters and running-info files are written in the
//! analysis directory, never in the incident's (the spool moves unknown files aside).

use super::io::IoConfig;
use super::runner::{run_forked, run_limited, AnalysisLimits};
use crate::spool::AnalysisJob;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use tracing::info;

/// The forked analysis child's exit codes (where no executable is shipped).
pub mod exit {
    /// The report is written.
    pub const ANALYSED: i32 = 0;
    /// The report could not be serialized or written.
    pub const NOT_WRITTEN: i32 = 1;
    /// The analyser failed on the dump.
    pub const ANALYSIS_FAILED: i32 = 2;
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

/// One analysis, in a child process; the spool counts the attempts.
pub(super) fn analyse_out_of_process(cfg: &IoConfig, job: &AnalysisJob) -> Result<(), String> {
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
    let r = run_forked(&cfg.limits, move || {
        let Ok(report) = analyze::analyze(analyze::Input::File(&input), &acfg, running) else {
            return exit::ANALYSIS_FAILED;
        };
        match serde_json::to_vec(&report) {
            Ok(b) if std::fs::write(&out, &b).is_ok() => exit::ANALYSED,
            _ => exit::NOT_WRITTEN,
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
