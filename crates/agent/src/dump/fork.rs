//! Fork mechanics shared by the fork dumper and the analysis runner.
//!
//! [`spawn`] forks; the child first undoes what it inherited from the app that would defeat it
//! (SIGALRM and the fatal signals back to their default action and unblocked, so that an app
//! that ignores or blocks SIGALRM cannot void the last-resort deadline, and a crash reporter's
//! SIGSEGV/SIGABRT handler never runs in our child and reports an app crash), asks the kernel to
//! kill it when the thread that forked it dies (`PR_SET_PDEATHSIG`), names itself, arms `alarm`,
//! runs its closure (which must only do fork-safe things: no allocation, no locks, no JNI) and
//! `_exit`s with the closure's code (a panic is [`EXIT_PANIC`]).
//!
//! The parent gets a [`Child`] back at once, so the caller can resume the VM before waiting.
//! [`Child::wait`] waits for that one pid (a pidfd where the API level allows `pidfd_open`, else
//! `waitpid` with `WNOHANG` and short sleeps), never past the deadline: at the deadline the child
//! is killed with SIGKILL (through the pidfd where there is one, so a pid already reaped and
//! reused is never signalled) and reaped. `waitpid` is retried on EINTR. No SIGCHLD handler is
//! installed and no pid but ours is ever waited for, so the app's own children are untouched. A
//! child still not reapable a moment after SIGKILL (stuck in uninterruptible I/O) is handed to a
//! reaper thread: the caller returns, no zombie is left.
//!
//! An app that sets SIGCHLD to `SIG_IGN` (or `SA_NOCLDWAIT`), or runs a thread that reaps with
//! `waitpid(-1)`, takes our child's status before we can: `waitpid` says ECHILD. The child has
//! ended then, but how is unknown: [`ChildEnd::Reaped`]. Callers that must know whether the
//! child's work is complete have the child report it (the ART dumper's completion record).
//!
//! System calls by API level: Android 8 to 10 kill an app that makes a call outside their
//! seccomp allowlist, and `pidfd_open`/`pidfd_send_signal` are only allowed from Android 11 (API
//! 30). [`api_level`] says which level this process runs at (`ro.build.version.sdk` on Android,
//! none elsewhere; [`set_api_level`] overrides it), and [`pidfd_allowed`] decides.

use super::{Error, Result};
use std::ffi::CString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildEnd {
    Exited(i32),
    Signaled(i32),
    /// Killed by us at the deadline.
    TimedOut,
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

/// "Not set" for [`API_OVERRIDE`].
const API_UNSET: u32 = u32::MAX;
/// The API level set by [`set_api_level`] (0: not Android), or [`API_UNSET`].
static API_OVERRIDE: AtomicU32 = AtomicU32::new(API_UNSET);

/// Override the API level [`api_level`] reports: `Some(level)` for an Android level, `None` for
/// a system that is not Android. Tests use it to reach the code paths of old Android versions.
pub fn set_api_level(api: Option<u32>) {
    API_OVERRIDE.store(api.unwrap_or(0), Ordering::Release);
}

/// The Android API level of this process: `None` on a system that is not Android. On Android,
/// `ro.build.version.sdk`; a property that cannot be read counts as level 0 (the oldest).
pub fn api_level() -> Option<u32> {
    match API_OVERRIDE.load(Ordering::Acquire) {
        API_UNSET => platform_api_level(),
        0 => None,
        n => Some(n),
    }
}

#[cfg(target_os = "android")]
fn platform_api_level() -> Option<u32> {
    // PROP_VALUE_MAX bytes.
    let mut buf = [0 as libc::c_char; 92];
    // SAFETY: a NUL-terminated name and a buffer of PROP_VALUE_MAX bytes, as bionic asks.
    let n =
        unsafe { libc::__system_property_get(c"ro.build.version.sdk".as_ptr(), buf.as_mut_ptr()) };
    if n <= 0 {
        return Some(0);
    }
    // SAFETY: bionic wrote a NUL-terminated value of at most PROP_VALUE_MAX bytes.
    let text = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Some(
        text.to_str()
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0),
    )
}

#[cfg(not(target_os = "android"))]
fn platform_api_level() -> Option<u32> {
    None
}

/// Whether `pidfd_open` and `pidfd_send_signal` may be called: everywhere but Android below 11
/// (API 30), whose seccomp filter kills the app for them (SIGSYS).
pub fn pidfd_allowed() -> bool {
    match api_level() {
        Some(api) => api >= 30,
        // Off Android, the kernel decides (Linux 5.3+), unless a seccomp filter judges this
        // process's calls: one may kill for `pidfd_open`, as Android 8-10's does (the tests run
        // the JVM under that very allowlist), so such a process polls instead.
        None => !under_seccomp_filter(),
    }
}

/// Whether a seccomp filter judges this process's system calls (`Seccomp: 2` in
/// `/proc/self/status`). Read on each call: a filter may be installed at any time, and this is
/// asked once per child.
fn under_seccomp_filter() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.strip_prefix("Seccomp:").is_some_and(|v| v.trim() == "2"))
    })
}

/// A forked child of ours.
#[derive(Debug)]
pub struct Child {
    pub pid: libc::pid_t,
    started: Instant,
    reaped: bool,
    /// A pidfd for the child, opened right after the fork where the API level allows it.
    pidfd: Option<libc::c_int>,
}

/// The name a dump child shows in `ps` and crash reports.
pub const DUMP_CHILD_NAME: &str = "oomguard-dump";

/// The signals a child puts back to their default action and unblocks: the last-resort
/// deadline's, and those a crash reporter of the app may handle.
const RESET_SIGNALS: [libc::c_int; 8] = [
    libc::SIGALRM,
    libc::SIGSEGV,
    libc::SIGABRT,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGSYS,
    libc::SIGTRAP,
];

/// In a child: [`RESET_SIGNALS`] to their default action, unblocked. Raw system calls: on
/// Android, ART's `libsigchain` intercepts the libc `sigaction`/`sigprocmask` of the signals it
/// claims and would keep its own handler installed in the kernel.
///
/// # Safety
/// Only in a freshly forked child (it changes process-wide signal state).
unsafe fn reset_signals() {
    // The kernel's `struct sigaction` all zero is SIG_DFL, no flags, an empty mask, whatever
    // the order of its fields on this architecture.
    let dfl = [0u64; 4];
    let mut mask: u64 = 0;
    for s in RESET_SIGNALS {
        mask |= 1u64 << (s - 1);
        // SAFETY: a valid, zeroed kernel sigaction; the old action is not asked for.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                s,
                dfl.as_ptr(),
                std::ptr::null_mut::<u64>(),
                8usize,
            )
        };
    }
    // SAFETY: a valid 8-byte kernel sigset.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_UNBLOCK,
            &mask as *const u64,
            std::ptr::null_mut::<u64>(),
            8usize,
        )
    };
}

/// Fork a child that runs `f` and exits with its code. `alarm_secs` (0: none) kills the child
/// by SIGALRM even if the parent is gone; the child is also killed (SIGKILL) when the thread
/// that forked it ends.
pub fn spawn<F: FnOnce() -> i32>(name: &str, alarm_secs: u32, f: F) -> Result<Child> {
    let cname = CString::new(name).unwrap_or_default();
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: after fork the child only calls async-signal-safe functions (raw signal system
    // calls, prctl, getppid, alarm, _exit) and `f`, whose callers promise it is fork-safe.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Error::Sys(format!(
            "fork: {}",
            std::io::Error::last_os_error()
        )));
    }
    if pid == 0 {
        // SAFETY: in the child: reset the inherited signal setup, die with the parent, name
        // ourselves, arm the deadline, run, and never return.
        unsafe {
            reset_signals();
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
fn pidfd(pid: libc::pid_t) -> Option<libc::c_int> {
    // SAFETY: a plain syscall with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    (fd >= 0).then_some(fd as libc::c_int)
}

impl Child {
    /// Time since the fork.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Wait until the child ends or `deadline` after it was forked; at the deadline, kill it.
    pub fn wait(&mut self, deadline: Duration) -> Result<ChildEnd> {
        let end_at = self.started + deadline;
        loop {
            match waitpid(self.pid, libc::WNOHANG) {
                Ok(Some(end)) => {
                    self.reaped = true;
                    self.close_pidfd();
                    return Ok(end);
                }
                Ok(None) => {}
                Err(e) => {
                    self.reaped = true;
                    self.close_pidfd();
                    return Err(Error::Child(format!(
                        "{} could not be waited for: {e}",
                        self.pid
                    )));
                }
            }
            let now = Instant::now();
            if now >= end_at {
                break;
            }
            let left = (end_at - now).min(Duration::from_millis(if self.pidfd.is_some() {
                1000
            } else {
                20
            }));
            match self.pidfd {
                Some(fd) => {
                    let mut p = libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd; EINTR just loops.
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
            self.close_pidfd();
            return;
        }
        match self.pidfd {
            // SAFETY: a pidfd of our child; a gone process gives ESRCH.
            Some(fd) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd,
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
        self.close_pidfd();
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

    fn close_pidfd(&mut self) {
        if let Some(fd) = self.pidfd.take() {
            // SAFETY: the pidfd we opened.
            unsafe { libc::close(fd) };
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

/// Wait for a dump child and turn anything but exit code 0 into an error, removing `files`.
pub fn finish(child: &mut Child, deadline: Duration, files: &[PathBuf]) -> Result<Duration> {
    let r = child.wait(deadline);
    let ok = matches!(r, Ok(ChildEnd::Exited(0)));
    if !ok {
        for f in files {
            let _ = std::fs::remove_file(f);
        }
    }
    match r {
        Ok(ChildEnd::Exited(0)) => Ok(child.started.elapsed()),
        Ok(end) => Err(Error::Child(format!("{} {end}", child.pid))),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A little "VM": threads that keep writing to a shared heap and stop at a safepoint when
    /// asked, like ART's suspend-all.
    struct Vm {
        heap: Vec<AtomicU64>,
        suspend: AtomicBool,
        parked: AtomicUsize,
        stop: AtomicBool,
    }

    fn checksum(h: &[AtomicU64]) -> u64 {
        h.iter().fold(0xcbf29ce484222325u64, |a, v| {
            (a ^ v.load(Ordering::Relaxed)).wrapping_mul(0x100000001b3)
        })
    }

    /// Write `v` as 16 hex digits to `path` with raw syscalls (fork-safe: no allocation).
    fn write_hex(path: &CString, v: u64) -> i32 {
        let mut b = [0u8; 16];
        for (i, c) in b.iter_mut().enumerate() {
            *c = b"0123456789abcdef"[((v >> (60 - 4 * i)) & 15) as usize];
        }
        // SAFETY: a valid path and buffer.
        unsafe {
            let fd = libc::open(
                path.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                0o644,
            );
            if fd < 0 {
                return 3;
            }
            let ok = libc::write(fd, b.as_ptr() as *const libc::c_void, 16) == 16;
            libc::close(fd);
            if ok {
                0
            } else {
                4
            }
        }
    }

    fn gone(pid: libc::pid_t) -> bool {
        // A reaped child has no /proc entry (a zombie would).
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn child_sees_the_snapshot_as_of_the_fork_while_threads_write() {
        let _serial = crate::dump::fork_test_lock();
        let vm = Arc::new(Vm {
            heap: (0..(4 << 20)).map(AtomicU64::new).collect(),
            suspend: AtomicBool::new(false),
            parked: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let vm = vm.clone();
                std::thread::spawn(move || {
                    let mut x = t + 1;
                    while !vm.stop.load(Ordering::Relaxed) {
                        if vm.suspend.load(Ordering::Acquire) {
                            vm.parked.fetch_add(1, Ordering::AcqRel);
                            while vm.suspend.load(Ordering::Acquire) {
                                std::hint::spin_loop();
                            }
                            vm.parked.fetch_sub(1, Ordering::AcqRel);
                        }
                        for _ in 0..1000 {
                            x = x
                                .wrapping_mul(6364136223846793005)
                                .wrapping_add(1442695040888963407);
                            let i = (x >> 20) as usize % vm.heap.len();
                            vm.heap[i].store(x, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        for round in 0..5 {
            std::thread::sleep(Duration::from_millis(20));
            // suspend ─ fork ─ resume
            vm.suspend.store(true, Ordering::Release);
            while vm.parked.load(Ordering::Acquire) < 4 {
                std::hint::spin_loop();
            }
            let expect = checksum(&vm.heap);
            let out = dir.path().join(format!("sum{round}"));
            let cout = CString::new(out.to_str().unwrap()).unwrap();
            let vm2 = vm.clone();
            let t0 = Instant::now();
            let mut child = spawn(DUMP_CHILD_NAME, 30, move || {
                // Slow on purpose: the parent's threads rewrite the heap meanwhile.
                // SAFETY: plain syscall.
                unsafe { libc::usleep(100_000) };
                write_hex(&cout, checksum(&vm2.heap))
            })
            .unwrap();
            vm.suspend.store(false, Ordering::Release);
            let pause = t0.elapsed();
            std::thread::sleep(Duration::from_millis(30));
            assert_ne!(
                checksum(&vm.heap),
                expect,
                "the parent's threads kept writing"
            );
            let pid = child.pid;
            finish(&mut child, Duration::from_secs(20), &[]).unwrap();
            let got = std::fs::read_to_string(&out).unwrap();
            assert_eq!(got, format!("{expect:016x}"), "round {round}");
            assert!(gone(pid));
            assert!(pause < Duration::from_millis(500), "{pause:?}");
        }
        vm.stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn crash_nonzero_exit_and_hang_are_failures_and_files_are_removed() {
        let _serial = crate::dump::fork_test_lock();
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("partial.hprof");
        type Body = Box<dyn FnOnce() -> i32 + Send>;
        let cases: Vec<(Body, &str)> = vec![
            (
                // SAFETY: abort in the child only.
                Box::new(|| unsafe { libc::abort() }),
                "killed by signal 6",
            ),
            (Box::new(|| 3), "exited with code 3"),
            (
                Box::new(|| loop {
                    // SAFETY: plain syscall.
                    unsafe { libc::pause() };
                }),
                "passed its deadline",
            ),
        ];
        for (body, want) in cases {
            std::fs::write(&f, b"partial").unwrap();
            let t0 = Instant::now();
            let mut child = spawn(DUMP_CHILD_NAME, 60, body).unwrap();
            let pid = child.pid;
            let e = finish(
                &mut child,
                Duration::from_millis(400),
                std::slice::from_ref(&f),
            )
            .unwrap_err();
            let waited = t0.elapsed();
            assert!(e.to_string().contains(want), "{e} (want {want})");
            assert!(!f.exists(), "partial file removed");
            assert!(waited < Duration::from_millis(400 + 300), "{waited:?}");
            drop(child);
            assert!(gone(pid), "no zombie for {pid}");
        }
    }

    /// Run `f` in a forked copy of this test process (so that what it changes, signal
    /// dispositions, a seccomp filter, the API level, stays there) and say how it ended.
    fn in_process<F: FnOnce() -> i32>(f: F) -> ChildEnd {
        // SAFETY: the test child runs `f` and `_exit`s; the parent only waits for it.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(99);
            // SAFETY: end the test child without running the harness's exit handlers.
            unsafe { libc::_exit(code) };
        }
        waitpid(pid, 0).unwrap().unwrap()
    }

    /// Trap (SIGSYS, as Android 8-10 do) every system call of `nrs` in this thread and the
    /// processes it forks.
    fn trap_syscalls(nrs: &[libc::c_long]) {
        let mut prog = vec![libc::sock_filter {
            code: 0x20, // BPF_LD | BPF_W | BPF_ABS: the system call number
            jt: 0,
            jf: 0,
            k: 0,
        }];
        for &nr in nrs {
            prog.push(libc::sock_filter {
                code: 0x15, // BPF_JMP | BPF_JEQ | BPF_K
                jt: 0,
                jf: 1,
                k: nr as u32,
            });
            prog.push(libc::sock_filter {
                code: 0x06, // BPF_RET | BPF_K
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_TRAP,
            });
        }
        prog.push(libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        });
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_mut_ptr(),
        };
        // SAFETY: a valid filter program that outlives the call.
        unsafe {
            assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
            assert_eq!(
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &fprog as *const libc::sock_fprog
                ),
                0
            );
        }
    }

    /// Android 8-10 kill the app (SIGSYS) for `pidfd_open`: below API 30 a child is waited for
    /// and killed at its deadline without any pidfd system call. The same filter kills the
    /// process at API 30 and off Android, where the pidfd is used.
    #[test]
    fn below_api_30_no_pidfd_system_call_is_made() {
        let _serial = crate::dump::fork_test_lock();
        let cases = [
            (Some(26), ChildEnd::Exited(0)),
            (Some(29), ChildEnd::Exited(0)),
            (Some(30), ChildEnd::Signaled(libc::SIGSYS)),
            // Off Android a filtered process polls too (the filter here is seen in /proc).
            (None, ChildEnd::Exited(0)),
        ];
        for (api, want) in cases {
            let end = in_process(|| {
                set_api_level(api);
                trap_syscalls(&[libc::SYS_pidfd_open, libc::SYS_pidfd_send_signal]);
                let mut quick = spawn("quick", 0, || 0).unwrap();
                if quick.wait(Duration::from_secs(20)).unwrap() != ChildEnd::Exited(0) {
                    return 2;
                }
                let mut hung = spawn("hung", 0, || loop {
                    // SAFETY: plain syscall.
                    unsafe { libc::pause() };
                })
                .unwrap();
                if hung.wait(Duration::from_millis(100)).unwrap() != ChildEnd::TimedOut {
                    return 3;
                }
                0
            });
            assert_eq!(end, want, "API {api:?}");
        }
    }

    /// An app that ignores SIGCHLD, or reaps with `waitpid(-1)`, takes our child's status:
    /// the child has ended, which is not an error of the wait.
    #[test]
    fn a_child_whose_status_the_app_took_is_reported_as_reaped() {
        let _serial = crate::dump::fork_test_lock();
        let end = in_process(|| {
            // SAFETY: in the test child only.
            unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
            let mut c = spawn("quick", 0, || 0).unwrap();
            match c.wait(Duration::from_secs(20)) {
                Ok(ChildEnd::Reaped) => 0,
                Ok(_) => 2,
                Err(_) => 3,
            }
        });
        assert_eq!(end, ChildEnd::Exited(0));
        let end = in_process(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || loop {
                let mut st = 0;
                // SAFETY: the app's reaper: any child.
                let r = unsafe { libc::waitpid(-1, &mut st, 0) };
                if r > 0 {
                    let _ = tx.send(r);
                }
            });
            let mut c = spawn("slow", 0, || {
                // SAFETY: plain syscall.
                unsafe { libc::usleep(100_000) };
                0
            })
            .unwrap();
            match c.wait(Duration::from_secs(20)) {
                Ok(ChildEnd::Reaped) if rx.recv() == Ok(c.pid) => 0,
                Ok(ChildEnd::Exited(0)) => 0,
                Ok(_) => 2,
                Err(_) => 3,
            }
        });
        assert_eq!(end, ChildEnd::Exited(0));
    }

    static SEGV_HANDLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    extern "C" fn crash_reporter(_: libc::c_int) {
        SEGV_HANDLED.store(true, Ordering::SeqCst);
        // SAFETY: what a crash reporter does after writing its report.
        unsafe { libc::_exit(42) };
    }

    /// The app's signal setup does not reach the child: SIGALRM ignored and blocked still ends
    /// it at its alarm, and a crash in the child is not handled by the app's crash reporter.
    #[test]
    fn the_child_resets_the_apps_signal_setup() {
        let _serial = crate::dump::fork_test_lock();
        let end = in_process(|| {
            // SAFETY: in the test child only: the app's signal setup.
            unsafe {
                libc::signal(libc::SIGALRM, libc::SIG_IGN);
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGALRM);
                libc::sigaddset(&mut set, libc::SIGSEGV);
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                libc::signal(
                    libc::SIGSEGV,
                    crash_reporter as *const () as libc::sighandler_t,
                );
            }
            let mut hung = spawn("hung", 1, || loop {
                // SAFETY: plain syscall.
                unsafe { libc::pause() };
            })
            .unwrap();
            let alarm = hung.wait(Duration::from_secs(20)).unwrap();
            let mut crash = spawn("crash", 0, || {
                // SAFETY: a crash in the child only.
                unsafe { libc::raise(libc::SIGSEGV) };
                0
            })
            .unwrap();
            let crashed = crash.wait(Duration::from_secs(20)).unwrap();
            match (alarm, crashed) {
                (ChildEnd::Signaled(libc::SIGALRM), ChildEnd::Signaled(libc::SIGSEGV)) => 0,
                (ChildEnd::Signaled(libc::SIGALRM), _) => 2,
                _ => 3,
            }
        });
        assert_eq!(
            end,
            ChildEnd::Exited(0),
            "2: the app's handler ran in the child, 3: the alarm did not end it"
        );
    }

    /// A child whose parent dies is killed with it, even without an alarm.
    #[test]
    fn the_child_dies_with_its_parent() {
        let _serial = crate::dump::fork_test_lock();
        let mut fds = [0; 2];
        // SAFETY: a valid array for pipe.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let end = in_process(|| {
            let c = spawn("orphan", 0, || loop {
                // SAFETY: plain syscall.
                unsafe { libc::pause() };
            })
            .unwrap();
            let pid = c.pid.to_ne_bytes();
            std::mem::forget(c);
            // SAFETY: the pipe's write end and a 4-byte buffer.
            unsafe { libc::write(fds[1], pid.as_ptr() as *const libc::c_void, 4) };
            0
        });
        assert_eq!(end, ChildEnd::Exited(0));
        let mut pid = [0u8; 4];
        // SAFETY: the pipe's read end and a 4-byte buffer; then both ends closed.
        unsafe {
            assert_eq!(
                libc::read(fds[0], pid.as_mut_ptr() as *mut libc::c_void, 4),
                4
            );
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        let pid = libc::pid_t::from_ne_bytes(pid);
        let dead = |pid: libc::pid_t| match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(s) => s
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z')),
        };
        let mut gone = false;
        for _ in 0..1000 {
            if dead(pid) {
                gone = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if !gone {
            // SAFETY: the orphan this test made; clean up before failing.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        assert!(gone, "the child {pid} outlived its parent");
    }

    #[test]
    fn the_alarm_ends_a_child_whose_parent_stopped_waiting() {
        let _serial = crate::dump::fork_test_lock();
        let mut child = spawn(DUMP_CHILD_NAME, 1, || loop {
            // SAFETY: plain syscall.
            unsafe { libc::pause() };
        })
        .unwrap();
        let mut comm = String::new();
        for _ in 0..200 {
            comm = std::fs::read_to_string(format!("/proc/{}/comm", child.pid)).unwrap();
            if comm.trim() == DUMP_CHILD_NAME {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(comm.trim(), DUMP_CHILD_NAME);
        let end = child.wait(Duration::from_secs(10)).unwrap();
        assert_eq!(end, ChildEnd::Signaled(libc::SIGALRM));
    }
}
