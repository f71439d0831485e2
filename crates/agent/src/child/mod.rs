//! A child process of the app's, with limits, a watchdog, no inherited fds and no inherited
//! signal setup: forked to run a closure against the copy-on-write snapshot (the ART dumper,
//! an analysis where no analyser executable is shipped), or forked and exec'd (the analyser).
//! `child` knows nothing about what the child does; its callers (`dump`, `pipeline`) do.
//!
//! Owns:
//! - [`spawn`]: fork; the child first undoes what it inherited from the app that would defeat it
//!   (SIGALRM and the fatal signals back to their default action and unblocked, so that an app
//!   that ignores or blocks SIGALRM cannot void the last-resort deadline, and a crash reporter's
//!   SIGSEGV/SIGABRT handler never runs in our child and reports an app crash), asks the kernel
//!   to kill it when the thread that forked it dies (`PR_SET_PDEATHSIG`), names itself, arms
//!   `alarm`, runs its closure and `_exit`s with the closure's code (a panic is [`EXIT_PANIC`]).
//!   [`spawn_limited`] first applies [`Limits`] (`oom_score_adj`, nice, `RLIMIT_DATA`);
//!   [`spawn_exec`] applies them, sends stdout/stderr to a file, puts every signal back to its
//!   default action with none blocked (an exec keeps what the app ignores and blocks), closes
//!   every other fd and execs an [`Exec`] prepared before the fork ([`EXIT_EXEC_FAILED`] when
//!   `execv` fails).
//! - [`Child`]: the parent gets it back at once, so the caller can resume the VM before waiting.
//!   [`Child::wait`] waits for that one pid (a pidfd where the API level allows `pidfd_open`,
//!   else `waitpid` with `WNOHANG` and short sleeps), never past the deadline: at the deadline
//!   the child is killed with SIGKILL (through the pidfd where there is one, so a pid already
//!   reaped and reused is never signalled) and reaped. `waitpid` is retried on EINTR. No SIGCHLD
//!   handler is installed and no pid but ours is ever waited for, so the app's own children are
//!   untouched. A child still not reapable a moment after SIGKILL (stuck in uninterruptible I/O)
//!   is handed to a reaper thread: the caller returns, no zombie is left.
//! - The exit codes the child machinery itself uses ([`EXIT_PANIC`], [`EXIT_ORPHANED`],
//!   [`EXIT_EXEC_FAILED`]); a caller's own codes are named constants beside its child's code.
//!
//! An app that sets SIGCHLD to `SIG_IGN` (or `SA_NOCLDWAIT`), or runs a thread that reaps with
//! `waitpid(-1)`, takes our child's status before we can: `waitpid` says ECHILD. The child has
//! ended then, but how is unknown: [`ChildEnd::Reaped`]. Callers that must know whether the
//! child's work is complete have the child report it (the ART dumper's completion record).
//!
//! Async-signal-safety (the rule of every closure run by [`spawn`]): a child forked from a
//! multi-threaded process holds copies of every lock as it was at the fork, some held by threads
//! that do not exist in it. Between the fork and `_exit` or `execv`, the child's own steps here
//! make only system calls on data built before the fork (names, argv, limits, the `oom_score_adj`
//! text, the fd scan's buffer on the stack): no allocation, no lock, no logging, no JNI. A
//! closure must keep to the same rule when the child stays a frozen fork of the app (the ART
//! dump child: the VM's threads were suspended holding whatever they held). The one exception is
//! a child whose closure only runs pure Rust on its own data ([`spawn_limited`] for an analysis
//! without an executable): glibc and bionic reinitialise malloc's locks across `fork`, so it may
//! allocate; it still must not touch the VM, the logger or any lock of the app's, and a child
//! that hangs anyway is killed at its deadline.
//!
//! Fds: a pidfd and the scan's directory are [`OwnedFd`]s, the output of an exec'd child a
//! [`BorrowedFd`]; the fds closed in the child are the numbers `/proc/self/fd` lists (the app's,
//! which we do not own), closed only in the child, never in the app.
//!
//! System calls by API level: Android 8 to 10 kill an app that makes a call outside their
//! seccomp allowlist, and `pidfd_open`/`pidfd_send_signal` are only allowed from Android 11 (API
//! 30). [`api_level`] says which level this process runs at (`ro.build.version.sdk` on Android,
//! none elsewhere; [`set_api_level`] overrides it), and [`pidfd_allowed`] decides.

mod api;
mod hygiene;
mod limits;

pub use api::{api_level, pidfd_allowed, set_api_level};
pub use limits::{own_data_bytes, Limits};

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// What went wrong starting or waiting for a child.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `fork` failed (no child was made).
    #[error("fork: {0}")]
    Fork(std::io::Error),
    /// `waitpid` failed with something else than EINTR or ECHILD; the child is no longer ours
    /// to wait for.
    #[error("{pid} could not be waited for: {err}")]
    Wait {
        pid: libc::pid_t,
        err: std::io::Error,
    },
    /// A path or argument for an exec'd child holds a NUL byte.
    #[error("{0:?} contains a NUL byte")]
    Nul(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildEnd {
    Exited(i32),
    Signaled(i32),
    /// Killed by us at the deadline.
    TimedOut,
    /// Killed by us before the deadline, when what we watched said it would not end well
    /// ([`Child::wait_or`]).
    GaveUp,
    /// Ended, but its status was taken by someone else (`waitpid` said ECHILD: the app ignores
    /// SIGCHLD or reaps with `waitpid(-1)`), so how it ended is unknown.
    Reaped,
}

impl ChildEnd {
    pub fn ok(&self) -> bool {
        *self == ChildEnd::Exited(0)
    }
}

impl std::fmt::Display for ChildEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildEnd::Exited(c) => write!(f, "exited with code {c}"),
            ChildEnd::Signaled(s) => write!(f, "was killed by signal {s}"),
            ChildEnd::TimedOut => write!(f, "passed its deadline and was killed"),
            ChildEnd::GaveUp => write!(f, "was stuck and was killed"),
            ChildEnd::Reaped => write!(
                f,
                "ended, but its exit status was taken by another waiter (is SIGCHLD ignored or reaped by the app?)"
            ),
        }
    }
}

/// The exit code of a child whose closure panicked.
pub const EXIT_PANIC: i32 = 101;
/// The exit code of a child whose parent was gone before it could ask to die with it.
pub const EXIT_ORPHANED: i32 = 102;
/// The exit code of an exec'd child whose `execv` failed (the shell's "cannot execute").
pub const EXIT_EXEC_FAILED: i32 = 127;

/// A forked child of ours.
#[derive(Debug)]
pub struct Child {
    pub pid: libc::pid_t,
    started: Instant,
    reaped: bool,
    /// A pidfd for the child, opened right after the fork where the API level allows it.
    pidfd: Option<OwnedFd>,
}

/// Fork a child that runs `f` and exits with its code. `alarm_secs` (0: none) kills the child
/// by SIGALRM even if the parent is gone; the child is also killed (SIGKILL) when the thread
/// that forked it ends. `f` keeps to the module's async-signal-safety rule.
pub fn spawn<F: FnOnce() -> i32>(name: &str, alarm_secs: u32, f: F) -> Result<Child> {
    let cname = CString::new(name).unwrap_or_default();
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: after fork the child only calls async-signal-safe functions (raw signal system
    // calls, prctl, getppid, alarm, _exit) and `f`, whose callers promise it is fork-safe.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Error::Fork(std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: in the freshly forked child: reset the inherited signal setup.
        unsafe { hygiene::reset_signals() };
        // SAFETY: in the child: die with the parent, name ourselves, arm the deadline, run, and
        // never return.
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            if libc::getppid() != parent {
                // The parent died before the request took effect.
                libc::_exit(EXIT_ORPHANED);
            }
            libc::prctl(libc::PR_SET_NAME, cname.as_ptr() as libc::c_ulong, 0, 0, 0);
            if alarm_secs > 0 {
                libc::alarm(alarm_secs);
            }
            let code =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(EXIT_PANIC);
            libc::_exit(code);
        }
    }
    let pidfd = if pidfd_allowed() { pidfd(pid) } else { None };
    Ok(Child {
        pid,
        started: Instant::now(),
        reaped: false,
        pidfd,
    })
}

/// [`spawn`] a child that first puts `limits` on itself.
pub fn spawn_limited<F: FnOnce() -> i32>(
    name: &str,
    limits: &Limits,
    alarm_secs: u32,
    f: F,
) -> Result<Child> {
    let prepared = limits.prepare();
    spawn(name, alarm_secs, move || {
        prepared.apply();
        f()
    })
}

/// [`spawn_limited`] with the child's stdout and stderr on `output` (a log the parent may
/// read while it waits: [`Child::wait_or`]).
pub fn spawn_limited_to<F: FnOnce() -> i32>(
    name: &str,
    limits: &Limits,
    alarm_secs: u32,
    output: BorrowedFd<'_>,
    f: F,
) -> Result<Child> {
    let out = output.as_raw_fd();
    spawn_limited(name, limits, alarm_secs, move || {
        // SAFETY: two system calls on an fd the parent opened before the fork.
        unsafe {
            libc::dup2(out, 1);
            libc::dup2(out, 2);
        }
        f()
    })
}

/// A program and its arguments, made C strings before the fork (no allocation after it).
#[derive(Debug)]
pub struct Exec {
    /// Keeps the strings `argv` points into.
    _strings: Vec<CString>,
    /// NUL-terminated.
    argv: Vec<*const libc::c_char>,
}

// SAFETY: `argv` only points into `_strings`, owned alongside it and never changed.
unsafe impl Send for Exec {}

impl Exec {
    /// `program` run with `args` (its `argv[0]` is `program`).
    pub fn new(program: &Path, args: &[&OsStr]) -> Result<Exec> {
        let mut strings = vec![cstr(program.as_os_str().as_bytes())?];
        for a in args {
            strings.push(cstr(a.as_bytes())?);
        }
        let mut argv: Vec<*const libc::c_char> = strings.iter().map(|c| c.as_ptr()).collect();
        argv.push(std::ptr::null());
        Ok(Exec {
            _strings: strings,
            argv,
        })
    }
}

fn cstr(p: &[u8]) -> Result<CString> {
    CString::new(p).map_err(|_| Error::Nul(String::from_utf8_lossy(p).into_owned()))
}

/// Fork and exec `exec` under `limits`, with stdout and stderr on `output` and no other fd of
/// the app's inherited (a pipe the app holds must see its end-of-file when the app closes it, a
/// lock on a file must go with the app's fd). An `execv` that fails ends the child with
/// [`EXIT_EXEC_FAILED`].
pub fn spawn_exec(
    name: &str,
    limits: &Limits,
    alarm_secs: u32,
    exec: &Exec,
    output: BorrowedFd<'_>,
) -> Result<Child> {
    let out = output.as_raw_fd();
    spawn_limited(name, limits, alarm_secs, || {
        // SAFETY: only system calls on data built before the fork; `execv` replaces us, or we
        // `_exit` with EXIT_EXEC_FAILED (via the return value).
        unsafe {
            libc::dup2(out, 1);
            libc::dup2(out, 2);
            hygiene::reset_all_signals();
            hygiene::close_inherited_fds();
            libc::execv(exec.argv[0], exec.argv.as_ptr());
        }
        EXIT_EXEC_FAILED
    })
}

fn decode(status: libc::c_int) -> ChildEnd {
    if libc::WIFEXITED(status) {
        ChildEnd::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        ChildEnd::Signaled(libc::WTERMSIG(status))
    } else {
        ChildEnd::Signaled(0)
    }
}

/// `waitpid(pid, flags)` retried on EINTR: `Ok(None)` if still running (WNOHANG); ECHILD (the
/// status was taken by someone else) is [`ChildEnd::Reaped`].
fn waitpid(pid: libc::pid_t, flags: libc::c_int) -> std::io::Result<Option<ChildEnd>> {
    loop {
        let mut status = 0;
        // SAFETY: waiting for our own child only.
        let r = unsafe { libc::waitpid(pid, &mut status, flags) };
        if r == pid {
            return Ok(Some(decode(status)));
        }
        if r == 0 {
            return Ok(None);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::ECHILD) => return Ok(Some(ChildEnd::Reaped)),
            _ => return Err(e),
        }
    }
}

/// A pidfd for `pid` (Linux 5.3+). Only where [`pidfd_allowed`].
fn pidfd(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: a plain syscall with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a fresh fd that nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

impl Child {
    /// Time since the fork.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Wait until the child ends or `deadline` after it was forked; at the deadline, kill it.
    pub fn wait(&mut self, deadline: Duration) -> Result<ChildEnd> {
        self.wait_or(deadline, || false)
    }

    /// [`Child::wait`], but also asking `give_up` about once a second (more often without a
    /// pidfd): when it says so, the child is killed at once and [`ChildEnd::GaveUp`] returned.
    pub fn wait_or(
        &mut self,
        deadline: Duration,
        mut give_up: impl FnMut() -> bool,
    ) -> Result<ChildEnd> {
        let end_at = self.started + deadline;
        loop {
            match waitpid(self.pid, libc::WNOHANG) {
                Ok(Some(end)) => {
                    self.reaped = true;
                    self.pidfd = None;
                    return Ok(end);
                }
                Ok(None) => {}
                Err(err) => {
                    self.reaped = true;
                    self.pidfd = None;
                    return Err(Error::Wait { pid: self.pid, err });
                }
            }
            if give_up() {
                self.kill_and_reap();
                return Ok(ChildEnd::GaveUp);
            }
            let now = Instant::now();
            if now >= end_at {
                break;
            }
            let step = if self.pidfd.is_some() { 1000 } else { 20 };
            let left = (end_at - now).min(Duration::from_millis(step));
            match &self.pidfd {
                Some(fd) => {
                    let mut p = libc::pollfd {
                        fd: fd.as_fd().as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd on an fd we own; EINTR just loops.
                    unsafe { libc::poll(&mut p, 1, left.as_millis().max(1) as libc::c_int) };
                }
                None => std::thread::sleep(left),
            }
        }
        self.kill_and_reap();
        Ok(ChildEnd::TimedOut)
    }

    /// SIGKILL the child and reap it; if it cannot be reaped within a moment, a thread does it.
    /// Through the pidfd where there is one: if someone else reaped the child meanwhile, its pid
    /// may name another process by now, which a pidfd never does.
    pub fn kill_and_reap(&mut self) {
        if self.reaped {
            self.pidfd = None;
            return;
        }
        match self.pidfd.take() {
            // SAFETY: a pidfd of our child; a gone process gives ESRCH.
            Some(fd) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            },
            // SAFETY: our own child, not reaped by us; without a pidfd (Android before 11) a
            // reaper of the app's could have taken it a moment ago, the pid reused: that window
            // is the poll interval's, and cannot be closed without one.
            None => unsafe {
                libc::kill(self.pid, libc::SIGKILL);
            },
        }
        self.reaped = true;
        for _ in 0..50 {
            match waitpid(self.pid, libc::WNOHANG) {
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                _ => return,
            }
        }
        let pid = self.pid;
        let _ = std::thread::Builder::new()
            .name("oomguard-reap".into())
            .spawn(move || {
                let _ = waitpid(pid, 0);
            });
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

/// Tests that fork long-lived children and tests that exec a file they just wrote must not
/// overlap: a forked child holds copies of every open fd, and exec of a file still open for
/// writing elsewhere fails with ETXTBSY.
#[cfg(test)]
pub(crate) static FORK_TEST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
pub(crate) fn fork_test_lock() -> std::sync::MutexGuard<'static, ()> {
    FORK_TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
