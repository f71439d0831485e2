//! Analysis out of process: fork+exec of the `oomguard` binary (`oomguard analyze IN -o OUT`),
//! so that a crash, a kill or an out-of-memory there never touches the app.
//!
//! The child, between fork and exec, only makes system calls: it raises its `oom_score_adj` (the
//! kernel kills it before the app), sets the lowest CPU priority (nice 19), limits the memory it
//! may use, arms `alarm` as a last-resort deadline, sends its stdout/stderr to a log file, closes
//! every other fd it inherited from the app (a pipe the app holds must see its end-of-file when
//! the app closes it, a lock on a file must go with the app's fd, not live on for the 300 s of an
//! analysis; a plain `close` loop over `/proc/self/fd`, as `close_range` is not allowed on older
//! Android), and execs. Everything it needs (paths, argv) is built before the fork: no
//! allocation after it. The parent waits for that one pid with a deadline (see [`super::fork`]).
//!
//! The memory limit is `RLIMIT_DATA`, not `RLIMIT_AS`: a fork of the app starts with the app's
//! address space (several GB on a phone), and allocators such as scudo reserve large ranges
//! `PROT_NONE` at start; under an address-space limit every allocation would fail. The data
//! limit counts only private writable memory. A child that stays the app's fork
//! ([`run_forked`]) is allowed its data at the fork plus the budget; an exec'd analyser starts
//! afresh and gets the budget. A run that fails for want of memory is reported as over its
//! budget (from its log). Kernels before 4.7 apply `RLIMIT_DATA` to `brk` only.
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
    /// The memory the analysis may use, in bytes (`RLIMIT_DATA`, see the module docs); 0 for
    /// no limit.
    pub memory: u64,
    pub deadline: Duration,
    /// Give up on a dump after this many attempts.
    pub max_attempts: u32,
}

impl Default for AnalysisLimits {
    fn default() -> Self {
        AnalysisLimits {
            oom_score_adj: 1000,
            nice: 19,
            memory: 2 << 30,
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
    /// `RLIMIT_DATA` to set; 0 for none.
    data_limit: u64,
    /// Seconds until SIGALRM, the last-resort deadline.
    alarm: u32,
}

impl ChildLimits {
    /// `forked`: the child stays a fork of this process (its data counts), else it execs.
    fn new(limits: &AnalysisLimits, forked: bool) -> Result<ChildLimits> {
        let data_limit = match (limits.memory, forked) {
            (0, _) => 0,
            (m, false) => m,
            (m, true) => own_data_bytes().saturating_add(m),
        };
        Ok(ChildLimits {
            adj_path: cstr(b"/proc/self/oom_score_adj")?,
            adj: format!("{}\n", limits.oom_score_adj.clamp(-1000, 1000)),
            nice: limits.nice,
            data_limit,
            alarm: limits
                .deadline
                .as_secs()
                .saturating_add(5)
                .min(u32::MAX as u64) as u32,
        })
    }

    /// In the child: raise `oom_score_adj`, lower the priority, cap the data. Only system
    /// calls on data built before the fork.
    fn apply(&self) {
        // SAFETY: plain system calls on buffers owned by `self`, which outlives them.
        unsafe {
            let fd = libc::open(self.adj_path.as_ptr(), libc::O_WRONLY);
            if fd >= 0 {
                libc::write(fd, self.adj.as_ptr() as *const libc::c_void, self.adj.len());
                libc::close(fd);
            }
            libc::setpriority(libc::PRIO_PROCESS, 0, self.nice);
            if self.data_limit > 0 {
                let rl = libc::rlimit {
                    rlim_cur: self.data_limit as libc::rlim_t,
                    rlim_max: self.data_limit as libc::rlim_t,
                };
                libc::setrlimit(libc::RLIMIT_DATA, &rl);
            }
        }
    }
}

/// This process's private writable memory (`VmData` in `/proc/self/status`), in bytes; 0 if
/// unknown.
fn own_data_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmData:")
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
        })
        .map_or(0, |kb| kb << 10)
}

/// Whether a failed run's log says it ran out of memory: Rust's allocation failure message,
/// or a C runtime's / Python's.
fn log_says_out_of_memory(log: &Path) -> bool {
    let Ok(text) = std::fs::read(log) else {
        return false;
    };
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

/// In the analyser child before `execv`: close every fd but 0, 1 and 2. The numbers are read
/// from `/proc/self/fd` with `getdents64` into a buffer on the stack (no allocation after the
/// fork), and the scan is repeated until it finds nothing more to close (closing while
/// reading may skip entries); without `/proc`, every number below the fd limit is closed.
///
/// # Safety
/// Only in a forked child about to exec.
unsafe fn close_inherited_fds() {
    // SAFETY: plain system calls on our own fds and a stack buffer.
    unsafe {
        loop {
            let dir = libc::open(
                c"/proc/self/fd".as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            );
            if dir < 0 {
                let mut rl: libc::rlimit = std::mem::zeroed();
                let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 {
                    (rl.rlim_cur as u64).min(1 << 20) as libc::c_int
                } else {
                    1024
                };
                for fd in 3..max {
                    libc::close(fd);
                }
                return;
            }
            let mut closed = 0;
            let mut buf = [0u64; 512];
            loop {
                let n = libc::syscall(
                    libc::SYS_getdents64,
                    dir,
                    buf.as_mut_ptr() as *mut libc::c_void,
                    std::mem::size_of_val(&buf),
                );
                if n <= 0 {
                    break;
                }
                let bytes = buf.as_ptr() as *const u8;
                let mut off = 0usize;
                while off < n as usize {
                    // struct linux_dirent64: ino u64, off i64, reclen u16, type u8, name[]
                    let reclen = u16::from_ne_bytes([*bytes.add(off + 16), *bytes.add(off + 17)]);
                    let mut fd: libc::c_int = 0;
                    let mut digits = 0;
                    let mut p = bytes.add(off + 19);
                    while (*p).is_ascii_digit() {
                        fd = fd * 10 + (*p - b'0') as libc::c_int;
                        digits += 1;
                        p = p.add(1);
                    }
                    if digits > 0 && fd > 2 && fd != dir {
                        libc::close(fd);
                        closed += 1;
                    }
                    off += reclen as usize;
                }
            }
            libc::close(dir);
            if closed == 0 {
                return;
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
    let child_limits = ChildLimits::new(limits, false)?;
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
            close_inherited_fds();
            libc::execv(argv[0], argv.as_ptr());
        }
        127
    })?;
    drop(logf);
    let end = child.wait(limits.deadline)?;
    let elapsed = child.elapsed();
    let over_budget = !end.ok() && limits.memory > 0 && log_says_out_of_memory(log);
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
        Err(Error::Child(format!(
            "analysis of {} (attempt {}) {why}",
            input.display(),
            out.attempt
        )))
    }
}

/// Where no `oomguard` executable is shipped: run `f` (pure Rust, no JNI, no logging through
/// the app's logger) in a forked child with the same limits as [`run_limited`]: `oom_score_adj`
/// raised, nice 19, a data limit (its data at the fork plus the budget), a deadline. `f` returns
/// the child's exit code; an allocation over the budget aborts it (SIGABRT).
///
/// A child forked from a multi-threaded process may find a lock held by a thread that does not
/// exist in it. glibc and bionic reinitialise malloc's locks across `fork`, so `f` may allocate;
/// it must not touch the VM or any lock of the app's. A child that hangs anyway is killed at the
/// deadline, and the dump stays queued for the next launch.
pub fn run_forked<F: FnOnce() -> i32>(limits: &AnalysisLimits, f: F) -> Result<RunOutcome> {
    let child_limits = ChildLimits::new(limits, true)?;
    let mut child = super::fork::spawn("oomguard-analyze", child_limits.alarm, move || {
        child_limits.apply();
        f()
    })?;
    let end = child.wait(limits.deadline)?;
    Ok(RunOutcome {
        end,
        elapsed: child.elapsed(),
        attempt: 0,
        over_budget: limits.memory > 0 && end == ChildEnd::Signaled(libc::SIGABRT),
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
        let _serial = crate::dump::fork_test_lock();
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
        let _serial = crate::dump::fork_test_lock();
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
        let _serial = crate::dump::fork_test_lock();
        let (p, len) = reserve_16_gib();
        let lim = AnalysisLimits {
            memory: 512 << 20,
            ..AnalysisLimits::default()
        };
        let alloc = |mb: usize| {
            let v = vec![1u8; mb << 20];
            (v.iter().step_by(4096).map(|&b| b as usize).sum::<usize>() == 0) as i32
        };
        let within = run_forked(&lim, || alloc(100)).unwrap();
        // The child's stderr goes to a file, not the test log: Rust's allocator says there what
        // failed, with a backtrace when RUST_BACKTRACE is set.
        let d = tempfile::tempdir().unwrap();
        let err_path = d.path().join("stderr");
        let c_err = CString::new(err_path.as_os_str().as_bytes()).unwrap();
        let over = run_forked(&lim, || {
            // SAFETY: a valid path; fd 2 of the forked child only.
            unsafe {
                let fd = libc::open(c_err.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o600);
                if fd < 0 || libc::dup2(fd, 2) < 0 {
                    return 3;
                }
            }
            alloc(1024)
        })
        .unwrap();
        // SAFETY: the reservation made above.
        unsafe { libc::munmap(p, len) };
        assert_eq!(within.end, ChildEnd::Exited(0));
        assert!(!within.over_budget);
        let err = std::fs::read_to_string(&err_path).unwrap_or_default();
        assert_eq!(over.end, ChildEnd::Signaled(libc::SIGABRT), "{err}");
        assert!(over.over_budget);
        assert!(
            err.starts_with("memory allocation of 1073741824 bytes failed"),
            "{err}"
        );
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
