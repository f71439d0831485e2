//! One analysis of a dumped incident, for the I/O thread: with the `oomguard` executable
//! shipped beside the library (found through `/proc/self/maps`), or in a forked child where
//! there is none; both under the policy's limits ([`super::runner`]). The spool counts the
//! attempts across launches.
//!
//! Invariant: the analyser's logs, attempt counters and running-info files are written in the
//! analysis directory, never in the incident's (the spool moves unknown files aside).

use super::io::IoConfig;
use super::runner::{run_forked, run_limited, AnalysisLimits, RunOutcome};
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

/// The analysis's scratch directory, under the analysis directory (the app's own files).
pub const SCRATCH_DIR: &str = "scratch";
/// Less room than this for scratch files (half the free space): none are used.
const SCRATCH_MIN_BYTES: u64 = 64 << 20;

/// The analyser's configuration for `input`: the policy's, with the budget
/// (`analysis.memory_limit_mb`) and a scratch directory when the analysis in memory could need more
/// than half the budget (`analysis.memory_limit_mb`, the child's data limit), so that its large
/// arrays are file pages the kernel may write back instead of the child's own memory. The directory
/// is `<analysis dir>/scratch`, emptied first of anything a killed child left (the child's files
/// are unlinked as they are made, so none outlives it). Its files stay within the policy's
/// `analysis.scratch_max_mb` (the `scratch_max_mb` of the configuration the policy made) and within
/// half the free space of its file system (f2fs writes every rewritten page to a new block: the
/// other half is the margin), together [`scratch_room`]. They are not counted in the spool's quota
/// (`spool.max_bytes`): that bounds what the agent keeps, and these last only while the analysis
/// runs (about as many bytes as a stripped dump: counted there, a 256 MiB spool would have no room
/// for the scratch of a dump over some 2 M objects). Where it cannot be made, or there is too
/// little room, the analysis plans in memory: within its budget it reports what fits
/// (`analyze::budget`), and a run over the budget says so
/// ([`super::runner::RunOutcome::budget_note`]).
pub(super) fn analyser_config(cfg: &IoConfig, input: &Path) -> analyze::Config {
    let mut acfg = cfg.analysis.clone();
    // The analyser plans within the budget: a dump too large for it is reported as far as it
    // fits (`analyze::budget`), never by an allocation that fails.
    acfg.budget_bytes = cfg.limits.memory;
    let bytes = std::fs::metadata(input).map(|m| m.len()).unwrap_or(0);
    if !needs_scratch(bytes, cfg.limits.memory) {
        return acfg;
    }
    let dir = cfg.analysis_dir.join(SCRATCH_DIR);
    if std::fs::create_dir_all(&dir).is_err() {
        return acfg;
    }
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let free = crate::dump::guard::free_bytes(&dir).unwrap_or(0);
    let room = scratch_room(free, cfg.analysis.scratch_max_mb.saturating_mul(1 << 20));
    if room >= SCRATCH_MIN_BYTES {
        acfg.scratch_dir = Some(dir);
        acfg.scratch_max_mb = room >> 20;
    }
    acfg
}

/// The bytes the analysis's scratch files may take: half the `free` bytes of their file
/// system, and no more than `cap` (`analysis.scratch_max_mb`).
pub(super) fn scratch_room(free: u64, cap: u64) -> u64 {
    (free / 2).min(cap)
}

/// Whether the analysis of a dump of `bytes` may need more than half of `budget` bytes in
/// memory (0: no budget). The need is about 60 bytes per object, and a stripped dump holds an
/// object in as few as ~55 bytes of file (the bench dump stripped: 3.5 M objects in 193 MB,
/// 212 MiB of RssAnon): so 1.25 times the file, a bound for full dumps too (0.4 times there).
pub(super) fn needs_scratch(bytes: u64, budget: u64) -> bool {
    budget > 0 && bytes.saturating_add(bytes / 4) > budget / 2
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
    let run = |census_only: bool| -> Result<RunOutcome, String> {
        let acfg = analyze::Config {
            census_only,
            ..analyser_config(cfg, input)
        };
        let config = serde_json::to_vec(&acfg).map_err(|e| e.to_string())?;
        std::fs::write(&thresholds, config)
            .map_err(|e| format!("{}: {e}", thresholds.display()))?;
        run_limited(bin, &args, &log, &attempts, &limits).map_err(|e| e.to_string())
    };
    let r = run_then_census(run, &limits, &job.id);
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
        Err(e) => Err(e),
    }
}

/// `run(false)`, the whole analysis; if it ran out of memory within its budget all the same
/// (the estimate fell short), `run(true)`: the report of what fits in any budget
/// (`analyze::Config::census_only`), which says why. The first run's outcome if the second
/// fails too.
fn run_then_census(
    run: impl Fn(bool) -> Result<RunOutcome, String>,
    limits: &AnalysisLimits,
    incident: &str,
) -> Result<RunOutcome, String> {
    let first = run(false)?;
    if first.end.ok() || !first.over_budget {
        return Ok(first);
    }
    tracing::warn!(incident, reason = %format!("{}{}", first.end, first.budget_note(limits)), "analysis ran out of memory within its budget; reporting what fits");
    match run(true) {
        Ok(second) if second.end.ok() => Ok(second),
        _ => Ok(first),
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
        ..analyser_config(cfg, &input)
    };
    std::fs::create_dir_all(&cfg.analysis_dir)
        .map_err(|e| format!("{}: {e}", cfg.analysis_dir.display()))?;
    let log = cfg.analysis_dir.join(format!("{}.log", job.id));
    let run = |census_only: bool| {
        let acfg = analyze::Config {
            census_only,
            ..acfg.clone()
        };
        let (input, out, running) = (&input, &out, running.clone());
        run_forked(&cfg.limits, &log, move || {
            let Ok(report) = analyze::analyze(analyze::Input::File(input), &acfg, running) else {
                return exit::ANALYSIS_FAILED;
            };
            match serde_json::to_vec(&report) {
                Ok(b) if std::fs::write(out, &b).is_ok() => exit::ANALYSED,
                _ => exit::NOT_WRITTEN,
            }
        })
        .map_err(|e| e.to_string())
    };
    let r = run_then_census(run, &cfg.limits, &job.id)?;
    if r.end.ok() {
        info!(incident = %job.id, ms = r.elapsed.as_millis() as u64, "analysis done in a forked child (no analyser executable shipped)");
        let _ = std::fs::remove_file(&log);
        Ok(())
    } else {
        let _ = std::fs::remove_file(&job.report_out);
        Err(format!(
            "analysis child (forked, no executable) {}{}; its log: {}",
            r.end,
            r.budget_note(&cfg.limits),
            log.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::child::ChildEnd;
    use std::cell::RefCell;
    use std::time::Duration;

    fn outcome(end: ChildEnd, attempt: u32, over_budget: bool) -> RunOutcome {
        RunOutcome {
            end,
            elapsed: Duration::ZERO,
            attempt,
            over_budget,
        }
    }

    /// The census runs only after a whole analysis that ran out of memory within its budget,
    /// and its outcome is kept only when it succeeded.
    #[test]
    fn the_census_follows_only_a_run_out_of_memory_and_is_kept_only_when_it_succeeds() {
        let limits = AnalysisLimits::default();
        let oom = || outcome(ChildEnd::Signaled(6), 1, true);
        // (case, the runs' answers, the runs asked for (census or not), the attempt kept)
        type Case = (
            &'static str,
            Vec<Result<RunOutcome, String>>,
            Vec<bool>,
            Option<u32>,
        );
        let cases: Vec<Case> = vec![
            (
                "done",
                vec![Ok(outcome(ChildEnd::Exited(0), 1, false))],
                vec![false],
                Some(1),
            ),
            (
                "failed, not for memory",
                vec![Ok(outcome(ChildEnd::Signaled(11), 1, false))],
                vec![false],
                Some(1),
            ),
            (
                "not started",
                vec![Err("no such file".into())],
                vec![false],
                None,
            ),
            (
                "out of memory, census done",
                vec![Ok(oom()), Ok(outcome(ChildEnd::Exited(0), 2, false))],
                vec![false, true],
                Some(2),
            ),
            (
                "out of memory, census failed",
                vec![Ok(oom()), Ok(outcome(ChildEnd::Exited(2), 2, false))],
                vec![false, true],
                Some(1),
            ),
            (
                "out of memory, census not started",
                vec![Ok(oom()), Err("gone".into())],
                vec![false, true],
                Some(1),
            ),
        ];
        for (name, answers, want_calls, want_attempt) in cases {
            let answers = RefCell::new(answers.into_iter());
            let calls = RefCell::new(Vec::new());
            let r = run_then_census(
                |census| {
                    calls.borrow_mut().push(census);
                    answers.borrow_mut().next().expect("no more runs")
                },
                &limits,
                "i",
            );
            assert_eq!(*calls.borrow(), want_calls, "{name}");
            assert_eq!(r.ok().map(|o| o.attempt), want_attempt, "{name}");
        }
    }
}
