//! Fork mechanics shared by the fork dumper and the analysis runner.
//!
//! [`spawn`] forks; the child names itself, arms `alarm` as a last-resort deadline, runs its
//! closure (which must only do fork-safe things: no allocation, no locks, no JNI) and `_exit`s
//! with the closure's code (a panic is exit 101). The parent gets a [`Child`] back at once, so
//! the caller can resume the VM before waiting.
//!
//! [`Child::wait`] waits for that one pid (a pidfd where the kernel has one, else `waitpid` with
//! `WNOHANG` and short sleeps), never past the deadline: at the deadline the child is killed
//! with SIGKILL and reaped. `waitpid` is retried on EINTR. No SIGCHLD handler is installed and no
//! pid but ours is ever waited for, so the app's own children are untouched. A child still not
//! reapable a moment after SIGKILL (stuck in uninterruptible I/O) is handed to a reaper thread:
//! the caller returns, no zombie is left.

use super::{Error, Result};
use std::ffi::CString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildEnd {
    Exited(i32),
    Signaled(i32),
    /// Killed by us at the deadline.
    TimedOut,
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
        }
    }
}

/// A forked child of ours.
#[derive(Debug)]
pub struct Child {
    pub pid: libc::pid_t,
    started: Instant,
    reaped: bool,
}

/// The name a dump child shows in `ps` and crash reports.
pub const DUMP_CHILD_NAME: &str = "oomguard-dump";

/// Fork a child that runs `f` and exits with its code. `alarm_secs` (0: none) kills the child
/// by SIGALRM even if the parent is gone.
pub fn spawn<F: FnOnce() -> i32>(name: &str, alarm_secs: u32, f: F) -> Result<Child> {
    let cname = CString::new(name).unwrap_or_default();
    // SAFETY: after fork the child only calls async-signal-safe functions (prctl, alarm,
    // _exit) and `f`, whose callers promise it is fork-safe.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Error::Sys(format!(
            "fork: {}",
            std::io::Error::last_os_error()
        )));
    }
    if pid == 0 {
        // SAFETY: in the child: name ourselves, arm the deadline, run, and never return.
        unsafe {
            libc::prctl(libc::PR_SET_NAME, cname.as_ptr() as libc::c_ulong, 0, 0, 0);
            if alarm_secs > 0 {
                libc::alarm(alarm_secs);
            }
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
            libc::_exit(code);
        }
    }
    Ok(Child {
        pid,
        started: Instant::now(),
        reaped: false,
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

/// `waitpid(pid, flags)` retried on EINTR: `Ok(None)` if still running (WNOHANG).
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
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// A pidfd for `pid`, where the kernel has `pidfd_open` (Linux 5.3+).
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
        let fd = pidfd(self.pid);
        loop {
            match waitpid(self.pid, libc::WNOHANG) {
                Ok(Some(end)) => {
                    self.reaped = true;
                    close_opt(fd);
                    return Ok(end);
                }
                Ok(None) => {}
                Err(e) => {
                    self.reaped = true;
                    close_opt(fd);
                    return Err(Error::Child(format!(
                        "{} could not be waited for ({e}): is SIGCHLD ignored by the app?",
                        self.pid
                    )));
                }
            }
            let now = Instant::now();
            if now >= end_at {
                break;
            }
            let left =
                (end_at - now).min(Duration::from_millis(if fd.is_some() { 1000 } else { 20 }));
            match fd {
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
        close_opt(fd);
        self.kill_and_reap();
        Ok(ChildEnd::TimedOut)
    }

    /// SIGKILL the child and reap it; if it cannot be reaped within a moment, a thread does it.
    pub fn kill_and_reap(&mut self) {
        if self.reaped {
            return;
        }
        // SAFETY: our own child, not yet reaped, so the pid cannot have been reused.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
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

fn close_opt(fd: Option<libc::c_int>) {
    if let Some(fd) = fd {
        // SAFETY: the pidfd we opened.
        unsafe { libc::close(fd) };
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
