//! The analyser's runs out of process, so that a crash, a kill or an out-of-memory there never
//! touches the app: `oomguard analyze IN -o OUT` exec'd ([`run_limited`]), or, where no
//! executable is shipped, the analysis in a forked child ([`run_forked`]). The child machinery
//! (limits, watchdog, fds, signals) is `crate::child`'s; this module says which limits an
//! analysis gets, counts attempts and tells a run that failed for want of memory.
//!
//! The child raises its `oom_score_adj` (the kernel kills it before the app), takes the lowest
//! CPU priority (nice 19), limits its memory with `RLIMIT_DATA` (see `child`'s limits: an exec'd
//! analyser gets the budget, a forked one its data at the fork plus the budget), and is ended by
//! `alarm` a little after the deadline as a last resort; an exec'd one writes its stdout and
//! stderr to a log file and keeps no other fd of the app's. A run that fails for want of memory
//! is reported as over its budget (from its log, or a forked child's SIGABRT).
//!
//! Attempts are counted on disk before each start (`IN.attempts`), so an analysis that takes
//! the app down with it still counts, and a dump that always crashes the analyser is given up
//! after the policy's number of attempts. A failed run removes its partial output and keeps the
//! dump for the next launch.

use crate::child::{self, ChildEnd, Exec};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The name an analysis child shows in `ps`.
const ANALYSIS_CHILD_NAME: &str = "oomguard-analyze";

/// What went wrong running an analysis.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The attempts on this dump are used up.
    #[error("analysis refused: {0}")]
    Refused(String),
    /// The analysis child failed.
    #[error("analysis of {input} (attempt {attempt}) {why}")]
    Failed {
        input: String,
        attempt: u32,
        why: String,
    },
    /// A child could not be started or waited for.
    #[error(transparent)]
    Child(#[from] child::Error),
    #[error("{what} {path}: {err}")]
    Io {
        what: &'static str,
        path: String,
        err: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

/// Limits of the analysis child, from the policy.
#[derive(Clone, Debug)]
pub struct AnalysisLimits {
    /// Written to `/proc/self/oom_score_adj` (-1000..=1000; higher dies first).
    pub oom_score_adj: i32,
    /// `setpriority` niceness (19 is the lowest priority).
    pub nice: i32,
    /// The memory the analysis may use, in bytes (`RLIMIT_DATA`, see the module docs); 0 for
    /// no limit.
    pub memory: u64,
    pub deadline: Duration,
    /// Give up on a dump after this many attempts.
    pub max_attempts: u32,
}

/// What the child's limits are beside the policy's two (`analysis.memory_limit_mb`,
/// `analysis.max_attempts`): the first to die under memory pressure, the lowest priority, and
/// five minutes at most.
pub const OOM_SCORE_ADJ: i32 = 1000;
pub const NICE: i32 = 19;
pub const DEADLINE: Duration = Duration::from_secs(300);

/// The default policy's limits (the policy owns the defaults).
impl Default for AnalysisLimits {
    fn default() -> Self {
        (&crate::policy::Policy::default()).into()
    }
}

impl AnalysisLimits {
    /// The child's limits; `forked`: the child stays a fork of this process (its data counts),
    /// else it execs.
    fn child_limits(&self, forked: bool) -> child::Limits {
        let data_bytes = match (self.memory, forked) {
            (0, _) => 0,
            (m, false) => m,
            (m, true) => child::own_data_bytes().saturating_add(m),
        };
        child::Limits {
            oom_score_adj: Some(self.oom_score_adj),
            nice: Some(self.nice),
            data_bytes,
        }
    }

    /// Seconds until SIGALRM, the last-resort deadline.
    fn alarm_secs(&self) -> u32 {
        self.deadline
            .as_secs()
            .saturating_add(5)
            .min(u32::MAX as u64) as u32
    }
}

/// How one run ended.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    pub end: ChildEnd,
    pub elapsed: Duration,
    /// The attempt number of this run (1 for the first).
    pub attempt: u32,
    /// The run failed for want of memory within its budget (said so in its log).
    pub over_budget: bool,
}

impl RunOutcome {
    /// What a failed run's message adds when it failed for want of memory ("" otherwise).
    pub fn budget_note(&self, limits: &AnalysisLimits) -> String {
        if self.over_budget {
            format!(
                " for want of memory: it needs more than its budget of {} MiB (policy analysis.memory_limit_mb)",
                limits.memory >> 20
            )
        } else {
            String::new()
        }
    }
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
    let io = |err| Error::Io {
        what: "recording an analysis attempt in",
        path: path.display().to_string(),
        err,
    };
    sys::fs::write_file_atomic(&path, n.to_string().as_bytes()).map_err(io)?;
    Ok(n)
}

/// Whether a failed run's log says it ran out of memory: Rust's allocation failure message,
/// or a C runtime's / Python's. With `whole_lines`, only lines the child has ended count: std
/// writes its message in pieces ("memory allocation of ", the size, " bytes failed\n"), and a
/// child killed on the first piece would leave a log that no longer says how much it asked for.
fn log_says_out_of_memory(log: &Path, whole_lines: bool) -> bool {
    let Ok(mut text) = std::fs::read(log) else {
        return false;
    };
    if whole_lines {
        let ended = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        text.truncate(ended);
    }
    let tail = &text[text.len().saturating_sub(64 << 10)..];
    let tail = String::from_utf8_lossy(tail);
    [
        "memory allocation of",
        "MemoryError",
        "Cannot allocate memory",
        "out of memory",
    ]
    .iter()
    .any(|m| tail.contains(m))
}

/// The log a child's stdout and stderr go to, made empty.
fn create_log(log: &Path) -> Result<std::fs::File> {
    std::fs::File::create(log).map_err(|err| Error::Io {
        what: "creating the analysis log",
        path: log.display().to_string(),
        err,
    })
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
    let exec = Exec::new(program, args)?;
    let child_limits = limits.child_limits(false);
    let logf = create_log(log)?;
    let attempt = record_attempt(attempt_of)?;
    let mut child = child::spawn_exec(
        ANALYSIS_CHILD_NAME,
        &child_limits,
        limits.alarm_secs(),
        &exec,
        std::os::fd::AsFd::as_fd(&logf),
    )?;
    drop(logf);
    let end = child.wait(limits.deadline)?;
    let elapsed = child.elapsed();
    let over_budget = !end.ok() && limits.memory > 0 && log_says_out_of_memory(log, false);
    Ok(RunOutcome {
        end,
        elapsed,
        attempt,
        over_budget,
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
        } else if out.over_budget {
            format!(
                "{}{}; its log: {}",
                out.end,
                out.budget_note(limits),
                log.display()
            )
        } else {
            out.end.to_string()
        };
        tracing::warn!(input = %input.display(), attempt = out.attempt, reason = %why, "analysis failed; dump kept for a retry");
        Err(Error::Failed {
            input: input.display().to_string(),
            attempt: out.attempt,
            why,
        })
    }
}

/// Where no `oomguard` executable is shipped: run `f` (pure Rust, no JNI, no logging through
/// the app's logger) in a forked child with the same limits as [`run_limited`]: `oom_score_adj`
/// raised, nice 19, a data limit (its data at the fork plus the budget), a deadline; its stdout
/// and stderr go to `log`. `f` returns the child's exit code; an allocation over the budget
/// aborts it (SIGABRT).
///
/// A child forked from a multi-threaded process may find a lock held by a thread that does not
/// exist in it. glibc and bionic reinitialise malloc's locks across `fork`, so `f` may allocate;
/// it must not touch the VM or any lock of the app's. A child that hangs anyway is killed at the
/// deadline, and the dump stays queued for the next launch.
pub fn run_forked<F: FnOnce() -> i32>(
    limits: &AnalysisLimits,
    log: &Path,
    f: F,
) -> Result<RunOutcome> {
    let logf = create_log(log)?;
    let mut child = child::spawn_limited_to(
        ANALYSIS_CHILD_NAME,
        &limits.child_limits(true),
        limits.alarm_secs(),
        std::os::fd::AsFd::as_fd(&logf),
        f,
    )?;
    drop(logf);
    // A child whose allocation failed should abort; std's handler can instead wait forever for
    // its backtrace lock (notes/next-43.md): once its log says so in a whole line, it is not
    // waited for.
    let end = child.wait_or(limits.deadline, || log_says_out_of_memory(log, true))?;
    let over_budget = limits.memory > 0
        && !end.ok()
        && (end == ChildEnd::Signaled(libc::SIGABRT) || log_says_out_of_memory(log, false));
    Ok(RunOutcome {
        end,
        elapsed: child.elapsed(),
        attempt: 0,
        over_budget,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
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

    /// SIGALRM, the last resort, comes 5 s after the deadline, and a deadline too long for
    /// `alarm` gets the longest one.
    #[test]
    fn the_alarm_comes_five_seconds_after_the_deadline() {
        let with = |deadline| AnalysisLimits {
            deadline,
            ..AnalysisLimits::default()
        };
        assert_eq!(with(Duration::from_secs(60)).alarm_secs(), 65);
        assert_eq!(with(Duration::from_millis(1500)).alarm_secs(), 6);
        assert_eq!(with(Duration::from_secs(u64::MAX)).alarm_secs(), u32::MAX);
        assert_eq!(
            with(Duration::from_secs(u32::MAX as u64)).alarm_secs(),
            u32::MAX
        );
    }

    #[test]
    fn child_runs_with_raised_oom_score_lowest_priority_and_limited_memory() {
        let _serial = crate::child::fork_test_lock();
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let lim = AnalysisLimits {
            memory: 512 << 20,
            ..AnalysisLimits::default()
        };
        let script = format!(
            "cat /proc/self/oom_score_adj > {o}; nice >> {o}; ulimit -d >> {o}",
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
        let _serial = crate::child::fork_test_lock();
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
        let _serial = crate::child::fork_test_lock();
        let d = tempfile::tempdir().unwrap();
        let lim = AnalysisLimits {
            memory: 256 << 20,
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

    /// A pipe the app holds reaches end-of-file when the app closes its end, while the
    /// analyser still runs: the analyser did not inherit it.
    #[test]
    fn the_analyser_does_not_keep_the_apps_fds_open() {
        let _serial = crate::child::fork_test_lock();
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("release");
        let started = d.path().join("started");
        let cfifo = CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(cfifo.as_ptr(), 0o600) }, 0);
        let mut fds = [0; 2];
        // SAFETY: a valid array; an app's pipe, without O_CLOEXEC.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let script = format!(
            "echo > {s}; read x < {f}",
            s = started.display(),
            f = fifo.display()
        );
        let dir = d.path().to_path_buf();
        let runner = std::thread::spawn(move || sh(&script, &dir, &AnalysisLimits::default()));
        while !started.exists() {
            std::thread::sleep(Duration::from_millis(5));
        }
        // The app closes its write end: only the analyser's copy, if any, keeps the pipe open.
        let mut p = libc::pollfd {
            fd: fds[0],
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: our pipe's ends and one pollfd.
        let ready = unsafe {
            libc::close(fds[1]);
            libc::poll(&mut p, 1, 10_000)
        };
        // Let the analyser finish either way.
        std::fs::write(&fifo, b"\n").unwrap();
        let r = runner.join().unwrap().unwrap();
        // SAFETY: our pipe's read end.
        unsafe { libc::close(fds[0]) };
        assert_eq!(r.end, ChildEnd::Exited(0));
        assert!(
            ready == 1 && p.revents & libc::POLLHUP != 0,
            "no end-of-file while the analyser ran: it holds the app's pipe"
        );
    }

    /// A reservation of 16 GiB `PROT_NONE`, as an allocator such as scudo makes at start.
    fn reserve_16_gib() -> (*mut libc::c_void, usize) {
        let len = 16usize << 30;
        // SAFETY: a fresh anonymous mapping, inaccessible, not backed.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        (p, len)
    }

    /// An analyser that reserves a large address space at start works within its budget, and
    /// one that needs more than its budget is stopped with an error that says so.
    #[test]
    fn an_analyser_with_a_large_address_space_runs_within_its_memory_budget() {
        let _serial = crate::child::fork_test_lock();
        let d = tempfile::tempdir().unwrap();
        let lim = AnalysisLimits {
            memory: 512 << 20,
            ..AnalysisLimits::default()
        };
        let fake = d.path().join("fake-oomguard");
        let script = |mb: u32| {
            format!(
                "#!/usr/bin/python3\nimport ctypes, sys\n\
                 libc = ctypes.CDLL(None)\nlibc.mmap.restype = ctypes.c_void_p\n\
                 # 16 GiB PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE\n\
                 r = libc.mmap(None, ctypes.c_size_t(16 << 30), 0, 0x4022, -1, 0)\n\
                 assert r not in (None, ctypes.c_void_p(-1).value), 'reservation failed'\n\
                 x = bytearray({mb} << 20)\nopen(sys.argv[4], 'w').write('{{}}')\n"
            )
        };
        std::fs::write(&fake, script(100)).unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let input = d.path().join("in.hprof");
        std::fs::write(&input, b"dump").unwrap();
        let output = d.path().join("report.json");
        let r = analyze(&fake, &input, &output, &lim);
        let log = std::fs::read_to_string(output.with_extension("log")).unwrap_or_default();
        assert!(r.is_ok(), "{r:?}: {log}");
        std::fs::write(&fake, script(1024)).unwrap();
        let e = analyze(&fake, &input, &output, &lim)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("for want of memory") && e.contains("budget of 512 MiB"),
            "{e}"
        );
    }

    /// A forked analysis (no analyser executable) starts with the app's address space: from a
    /// process that reserved 16 GiB it still allocates within its budget, and is stopped past
    /// it.
    #[test]
    fn a_forked_analysis_from_a_large_address_space_runs_within_its_budget() {
        let _serial = crate::child::fork_test_lock();
        let (p, len) = reserve_16_gib();
        let lim = AnalysisLimits {
            memory: 512 << 20,
            ..AnalysisLimits::default()
        };
        let alloc = |mb: usize| {
            let v = vec![1u8; mb << 20];
            (v.iter().step_by(4096).map(|&b| b as usize).sum::<usize>() == 0) as i32
        };
        let d = tempfile::tempdir().unwrap();
        let within = run_forked(&lim, &d.path().join("within.log"), || alloc(100)).unwrap();
        // The child's stderr goes to its log, not the test log: Rust's allocator says there
        // what failed, with a backtrace when RUST_BACKTRACE is set.
        let err_path = d.path().join("over.log");
        let over = run_forked(&lim, &err_path, || alloc(1024)).unwrap();
        // SAFETY: the reservation made above.
        unsafe { libc::munmap(p, len) };
        assert_eq!(within.end, ChildEnd::Exited(0));
        assert!(!within.over_budget);
        let err = std::fs::read_to_string(&err_path).unwrap_or_default();
        // (Aborted by std's handler, or killed by the parent once the log said it failed.)
        assert!(
            [ChildEnd::Signaled(libc::SIGABRT), ChildEnd::GaveUp].contains(&over.end),
            "{:?} {err}",
            over.end
        );
        assert!(over.over_budget);
        assert!(
            err.starts_with("memory allocation of 1073741824 bytes failed"),
            "{err}"
        );
    }

    /// A forked child that runs out of memory a small block at a time, with backtraces on
    /// (`RUST_BACKTRACE=1`): std's allocation error handler says so in the child's log (with
    /// the backtrace it could print) and aborts; the run failed for want of memory.
    #[test]
    fn a_forked_child_out_of_memory_ends_at_once_for_want_of_memory() {
        let _serial = crate::child::fork_test_lock();
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("fork.log");
        let lim = AnalysisLimits {
            memory: 64 << 20,
            deadline: Duration::from_secs(60),
            ..AnalysisLimits::default()
        };
        let out = run_forked(&lim, &log, || {
            // (The forked child's own environment: backtraces on, as in a developer's shell.)
            std::env::set_var("RUST_BACKTRACE", "1");
            let _ = std::panic::catch_unwind(|| panic!("the backtrace style is read here"));
            let mut held: Vec<Vec<u8>> = Vec::new();
            loop {
                held.push(vec![1u8; 16 << 10]);
            }
        })
        .unwrap();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert_ne!(out.end, ChildEnd::TimedOut, "{text}");
        assert!(out.elapsed < Duration::from_secs(30), "{:?}", out.elapsed);
        assert!(out.over_budget, "{:?} {text}", out.end);
        assert!(text.contains("memory allocation of"), "{text}");
        assert!(out.budget_note(&lim).contains("for want of memory"));
    }

    /// A forked child whose allocation failed but that does not end: std's allocation error
    /// handler, with backtraces on, takes the backtrace lock to print one, and was seen to wait
    /// for it forever (notes/next-43.md; Rust 1.95 skips a nested backtrace, but a lock held by
    /// a thread the fork did not copy is never released). The child here says what std says,
    /// then waits forever. The parent reads the child's log while it waits, kills it at once
    /// and says the run failed for want of memory (it used to wait for the deadline and say
    /// "passed its deadline"). The child writes its line in two pieces, as std does, with a
    /// pause between them longer than the parent's poll: the parent waits for the whole line
    /// (the clean-clone CI on 1ab5d6c saw a log cut after "memory allocation of ").
    #[test]
    fn a_forked_child_stuck_after_a_failed_allocation_is_ended_at_once_for_want_of_memory() {
        let _serial = crate::child::fork_test_lock();
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("fork.log");
        let lim = AnalysisLimits {
            deadline: Duration::from_secs(20),
            ..AnalysisLimits::default()
        };
        let out = run_forked(&lim, &log, || {
            // (To fd 2 itself, as std's handler writes: the test harness captures `eprintln!`.)
            let _ = std::io::Write::write_all(&mut std::io::stderr(), b"memory allocation of ");
            std::thread::sleep(Duration::from_millis(1500));
            let _ = std::io::Write::write_all(&mut std::io::stderr(), b"6144 bytes failed\n");
            loop {
                std::thread::park();
            }
        })
        .unwrap();
        assert_ne!(out.end, ChildEnd::TimedOut);
        assert!(out.elapsed < Duration::from_secs(10), "{:?}", out.elapsed);
        assert!(out.over_budget, "{:?}", out.end);
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert_eq!(text, "memory allocation of 6144 bytes failed\n");
        let note = out.budget_note(&lim);
        assert!(
            note.contains("for want of memory")
                && note.contains(&format!("{} MiB", lim.memory >> 20)),
            "{note}"
        );
        // A child that only ends badly is not said to be out of memory.
        let out = run_forked(&lim, &log, || 2).unwrap();
        assert_eq!((out.end, out.over_budget), (ChildEnd::Exited(2), false));
    }

    /// A run is said to be out of memory only when it failed, had a budget, and its log says
    /// so; a forked one that aborted says so too, but only under a budget.
    #[test]
    fn out_of_memory_is_a_failed_run_under_a_budget_whose_log_says_so() {
        let _serial = crate::child::fork_test_lock();
        let d = tempfile::tempdir().unwrap();
        let budget = AnalysisLimits {
            max_attempts: 100,
            ..AnalysisLimits::default()
        };
        assert!(budget.memory > 0);
        let unlimited = AnalysisLimits {
            memory: 0,
            ..budget.clone()
        };
        let oom = "echo 'memory allocation of 4096 bytes failed' >&2";
        for (script, limits, want) in [
            (format!("{oom}; exit 1"), &budget, true),
            (format!("{oom}; exit 0"), &budget, false),
            (format!("{oom}; exit 1"), &unlimited, false),
            (
                "echo 'no such file' >&2; exit 1".to_string(),
                &budget,
                false,
            ),
        ] {
            let out = sh(&script, d.path(), limits).unwrap();
            assert_eq!(out.over_budget, want, "{script}, budget {}", limits.memory);
        }
        // Forked: an abort is taken for an allocation that failed, under a budget only.
        let log = d.path().join("forked.log");
        let out = run_forked(&budget, &log, || std::process::abort()).unwrap();
        assert_eq!(
            (out.end, out.over_budget),
            (ChildEnd::Signaled(libc::SIGABRT), true)
        );
        let out = run_forked(&unlimited, &log, || std::process::abort()).unwrap();
        assert_eq!(
            (out.end, out.over_budget),
            (ChildEnd::Signaled(libc::SIGABRT), false)
        );
    }

    /// Only what the log ends as whole lines counts, when asked: a message still being
    /// written, its end not yet there, does not.
    #[test]
    fn a_log_says_out_of_memory_in_its_whole_lines() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log");
        let says = |text: &str, whole: bool| {
            std::fs::write(&log, text).unwrap();
            log_says_out_of_memory(&log, whole)
        };
        assert!(says("fatal: out of memory\n", true));
        assert!(says("fatal: out of memory", false));
        assert!(!says("fatal: out of memory", true), "the line is not ended");
        assert!(says("Cannot allocate memory\nmore", true));
        assert!(says("MemoryError\n", true));
        assert!(!says("all well\n", false));
        // Only the last 64 KiB are read.
        let far = format!("out of memory\n{}", "x".repeat(64 << 10));
        assert!(!says(&far, false));
        assert!(!log_says_out_of_memory(&d.path().join("absent"), false));
    }

    #[test]
    fn analyze_removes_partial_output_and_keeps_the_dump() {
        let _serial = crate::child::fork_test_lock();
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
