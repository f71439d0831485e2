//! Analysis out of process: fork+exec of the `oomguard` binary (`oomguard analyze IN -o OUT`),
//! so that a crash, a kill or an out-of-memory there never touches the app.
//!
//! The child, between fork and exec, only makes system calls: it raises its `oom_score_adj` (the
//! kernel kills it before the app), sets the lowest CPU priority (nice 19), limits its address
//! space (`RLIMIT_AS`), arms `alarm` as a last-resort deadline, sends its stdout/stderr to a log
//! file, and execs. Everything it needs (paths, argv) is built before the fork: no allocation
//! after it. The parent waits for that one pid with a deadline (see [`super::fork`]).
//!
//! Attempts are counted on disk before each start (`IN.attempts`), so an analysis that takes
//! the app down with it still counts, and a dump that always crashes the analyser is given up
//! after the policy's number of attempts. A failed run removes its partial output and keeps the
//! dump for the next launch.

use super::fork::ChildEnd;
use super::{Error, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Limits of the analysis child, from the policy.
#[derive(Clone, Debug)]
pub struct AnalysisLimits {
    /// Written to `/proc/self/oom_score_adj` (-1000..=1000; higher dies first).
    pub oom_score_adj: i32,
    /// `setpriority` niceness (19 is the lowest priority).
    pub nice: i32,
    /// `RLIMIT_AS` in bytes; 0 for none.
    pub address_space: u64,
    pub deadline: Duration,
    /// Give up on a dump after this many attempts.
    pub max_attempts: u32,
}

impl Default for AnalysisLimits {
    fn default() -> Self {
        AnalysisLimits {
            oom_score_adj: 1000,
            nice: 19,
            address_space: 2 << 30,
            deadline: Duration::from_secs(300),
            max_attempts: 3,
        }
    }
}

/// How one run ended.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    pub end: ChildEnd,
    pub elapsed: Duration,
    /// The attempt number of this run (1 for the first).
    pub attempt: u32,
}

/// Attempts recorded so far for `input`.
pub fn attempts(input: &Path) -> u32 {
    std::fs::read_to_string(attempts_path(input))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

fn attempts_path(input: &Path) -> PathBuf {
    let mut p = input.as_os_str().to_owned();
    p.push(".attempts");
    PathBuf::from(p)
}

fn record_attempt(input: &Path) -> Result<u32> {
    let n = attempts(input) + 1;
    let path = attempts_path(input);
    let tmp = path.with_extension("attempts.tmp");
    let io = |err| Error::Io {
        what: "recording an analysis attempt in",
        path: path.display().to_string(),
        err,
    };
    let f = std::fs::File::create(&tmp).map_err(io)?;
    std::io::Write::write_all(&mut &f, n.to_string().as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    Ok(n)
}

fn cstr(p: &[u8]) -> Result<CString> {
    CString::new(p).map_err(|_| {
        Error::Sys(format!(
            "{:?} contains a NUL byte",
            String::from_utf8_lossy(p)
        ))
    })
}

/// The limits an analysis child puts on itself right after the fork, prepared before it.
struct ChildLimits {
    adj_path: CString,
    adj: String,
    nice: i32,
    address_space: u64,
    /// Seconds until SIGALRM, the last-resort deadline.
    alarm: u32,
}

impl ChildLimits {
    fn new(limits: &AnalysisLimits) -> Result<ChildLimits> {
        Ok(ChildLimits {
            adj_path: cstr(b"/proc/self/oom_score_adj")?,
            adj: format!("{}\n", limits.oom_score_adj.clamp(-1000, 1000)),
            nice: limits.nice,
            address_space: limits.address_space,
            alarm: limits
                .deadline
                .as_secs()
                .saturating_add(5)
                .min(u32::MAX as u64) as u32,
        })
    }

    /// In the child: raise `oom_score_adj`, lower the priority, cap the address space. Only
    /// system calls on data built before the fork.
    fn apply(&self) {
        // SAFETY: plain system calls on buffers owned by `self`, which outlives them.
        unsafe {
            let fd = libc::open(self.adj_path.as_ptr(), libc::O_WRONLY);
            if fd >= 0 {
                libc::write(fd, self.adj.as_ptr() as *const libc::c_void, self.adj.len());
                libc::close(fd);
            }
            libc::setpriority(libc::PRIO_PROCESS, 0, self.nice);
            if self.address_space > 0 {
                let rl = libc::rlimit {
                    rlim_cur: self.address_space as libc::rlim_t,
                    rlim_max: self.address_space as libc::rlim_t,
                };
                libc::setrlimit(libc::RLIMIT_AS, &rl);
            }
        }
    }
}

/// Run `program args…` as a limited child; `log` receives its stdout and stderr. Counts the
/// attempt against `attempt_of` first, refusing once `max_attempts` were made.
pub fn run_limited(
    program: &Path,
    args: &[&std::ffi::OsStr],
    log: &Path,
    attempt_of: &Path,
    limits: &AnalysisLimits,
) -> Result<RunOutcome> {
    let done = attempts(attempt_of);
    if done >= limits.max_attempts {
        return Err(Error::Refused(format!(
            "analysis of {} already failed {done} times (limit {}); not trying again",
            attempt_of.display(),
            limits.max_attempts
        )));
    }
    // Everything the child needs, built before the fork.
    let prog = cstr(program.as_os_str().as_bytes())?;
    let mut argv_c = vec![prog.clone()];
    for a in args {
        argv_c.push(cstr(a.as_bytes())?);
    }
    let mut argv: Vec<*const libc::c_char> = argv_c.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let child_limits = ChildLimits::new(limits)?;
    let logf = std::fs::File::create(log).map_err(|err| Error::Io {
        what: "creating the analysis log",
        path: log.display().to_string(),
        err,
    })?;
    let log_fd = std::os::fd::AsRawFd::as_raw_fd(&logf);
    let attempt = record_attempt(attempt_of)?;
    let mut child = super::fork::spawn("oomguard-analyze", child_limits.alarm, || {
        child_limits.apply();
        // SAFETY: only system calls on data built before the fork; `execv` replaces us or we
        // `_exit` with 127 (via the return value).
        unsafe {
            libc::dup2(log_fd, 1);
            libc::dup2(log_fd, 2);
            libc::execv(argv[0], argv.as_ptr());
        }
        127
    })?;
    drop(logf);
    let end = child.wait(limits.deadline)?;
    let elapsed = child.elapsed();
    Ok(RunOutcome {
        end,
        elapsed,
        attempt,
    })
}

/// `oomguard analyze INPUT -o OUTPUT` out of process. On success the attempts file is removed;
/// on failure the partial output is removed and the dump stays for a retry.
pub fn analyze(
    oomguard: &Path,
    input: &Path,
    output: &Path,
    limits: &AnalysisLimits,
) -> Result<RunOutcome> {
    let log = output.with_extension("log");
    let args = [
        std::ffi::OsStr::new("analyze"),
        input.as_os_str(),
        std::ffi::OsStr::new("-o"),
        output.as_os_str(),
    ];
    let out = run_limited(oomguard, &args, &log, input, limits)?;
    if out.end.ok() && output.exists() {
        let _ = std::fs::remove_file(attempts_path(input));
        tracing::info!(input = %input.display(), ms = out.elapsed.as_millis() as u64, "analysis done");
        Ok(out)
    } else {
        let _ = std::fs::remove_file(output);
        let why = if out.end.ok() {
            "exited 0 without writing its output".to_string()
        } else {
            out.end.to_string()
        };
        tracing::warn!(input = %input.display(), attempt = out.attempt, reason = %why, "analysis failed; dump kept for a retry");
        Err(Error::Child(format!(
            "analysis of {} (attempt {}) {why}",
            input.display(),
            out.attempt
        )))
    }
}

/// Where no `oomguard` executable is shipped: run `f` (pure Rust, no JNI, no logging through
/// the app's logger) in a forked child with the same limits as [`run_limited`]: `oom_score_adj`
/// raised, nice 19, `RLIMIT_AS`, a deadline. `f` returns the child's exit code.
///
/// A child forked from a multi-threaded process may find a lock held by a thread that does not
/// exist in it. glibc and bionic reinitialise malloc's locks across `fork`, so `f` may allocate;
/// it must not touch the VM or any lock of the app's. A child that hangs anyway is killed at the
/// deadline, and the dump stays queued for the next launch.
pub fn run_forked<F: FnOnce() -> i32>(limits: &AnalysisLimits, f: F) -> Result<RunOutcome> {
    let child_limits = ChildLimits::new(limits)?;
    let mut child = super::fork::spawn("oomguard-analyze", child_limits.alarm, move || {
        child_limits.apply();
        f()
    })?;
    let end = child.wait(limits.deadline)?;
    Ok(RunOutcome {
        end,
        elapsed: child.elapsed(),
        attempt: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    fn sh(script: &str, dir: &Path, limits: &AnalysisLimits) -> Result<RunOutcome> {
        let input = dir.join("dump.hprof");
        if !input.exists() {
            std::fs::write(&input, b"x").unwrap();
        }
        run_limited(
            Path::new("/bin/sh"),
            &[OsStr::new("-c"), OsStr::new(script)],
            &dir.join("log"),
            &input,
            limits,
        )
    }

    #[test]
    fn child_runs_with_raised_oom_score_lowest_priority_and_limited_memory() {
        let _serial = crate::dump::fork_test_lock();
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let lim = AnalysisLimits {
            address_space: 512 << 20,
            ..AnalysisLimits::default()
        };
        let script = format!(
            "cat /proc/self/oom_score_adj > {o}; nice >> {o}; ulimit -v >> {o}",
            o = out.display()
        );
        let r = sh(&script, d.path(), &lim).unwrap();
        assert_eq!(r.end, ChildEnd::Exited(0));
        assert_eq!(r.attempt, 1);
        let got = std::fs::read_to_string(&out).unwrap();
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines, ["1000", "19", &(512 * 1024).to_string()]);
        // Our own process is untouched.
        assert_ne!(
            std::fs::read_to_string("/proc/self/oom_score_adj")
                .unwrap()
                .trim(),
            "1000"
        );
    }

    #[test]
    fn failures_are_reported_counted_and_capped() {
        let _serial = crate::dump::fork_test_lock();
        let d = tempfile::tempdir().unwrap();
        let lim = AnalysisLimits {
            deadline: Duration::from_millis(500),
            max_attempts: 3,
            ..AnalysisLimits::default()
        };
        let r = sh("exit 3", d.path(), &lim).unwrap();
        assert_eq!(r.end, ChildEnd::Exited(3));
        let r = sh("kill -9 $$", d.path(), &lim).unwrap();
        assert_eq!(r.end, ChildEnd::Signaled(9));
        let t = std::time::Instant::now();
        let r = sh("sleep 30", d.path(), &lim).unwrap();
        assert_eq!(r.end, ChildEnd::TimedOut);
        assert!(t.elapsed() < Duration::from_secs(2));
        assert_eq!(attempts(&d.path().join("dump.hprof")), 3);
        let e = sh("exit 0", d.path(), &lim).unwrap_err().to_string();
        assert!(e.contains("already failed 3 times"), "{e}");
    }

    #[test]
    fn memory_limit_stops_a_greedy_child() {
        let _serial = crate::dump::fork_test_lock();
        let d = tempfile::tempdir().unwrap();
        let lim = AnalysisLimits {
            address_space: 256 << 20,
            ..AnalysisLimits::default()
        };
        // python3 asks for 1 GiB: refused under a 256 MiB address space limit.
        let r = run_limited(
            Path::new("/usr/bin/python3"),
            &[OsStr::new("-c"), OsStr::new("x = bytearray(1 << 30)")],
            &d.path().join("log"),
            &d.path().join("in"),
            &lim,
        )
        .unwrap();
        assert_eq!(r.end, ChildEnd::Exited(1));
        let log = std::fs::read_to_string(d.path().join("log")).unwrap();
        assert!(log.contains("MemoryError"), "{log}");
    }

    #[test]
    fn analyze_removes_partial_output_and_keeps_the_dump() {
        let _serial = crate::dump::fork_test_lock();
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("in.hprof");
        std::fs::write(&input, b"dump").unwrap();
        let output = d.path().join("report.json");
        // A stand-in analyser that writes half a report and crashes.
        let fake = d.path().join("fake-oomguard");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho '{\"half\":' > \"$4\"\nkill -SEGV $$\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let e = analyze(&fake, &input, &output, &AnalysisLimits::default()).unwrap_err();
        assert!(e.to_string().contains("signal 11"), "{e}");
        assert!(!output.exists());
        assert!(input.exists());
        assert_eq!(attempts(&input), 1);
        std::fs::write(&fake, "#!/bin/sh\necho '{}' > \"$4\"\n").unwrap();
        analyze(&fake, &input, &output, &AnalysisLimits::default()).unwrap();
        assert!(output.exists());
        assert_eq!(attempts(&input), 0);
    }
}
