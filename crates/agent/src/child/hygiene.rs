//! What a child undoes of the app's before it runs: the dispositions and mask of the signals
//! that would defeat it (every signal, before an exec), and (before an exec) every inherited fd.
//!
//! Invariant: both run only in a freshly forked child, and make only system calls on data on
//! the stack (no allocation, no lock): see the async-signal-safety rule in the module above.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

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
pub(super) unsafe fn reset_signals() {
    let mut mask: u64 = 0;
    for s in RESET_SIGNALS {
        mask |= 1u64 << (s - 1);
        // SAFETY: the caller is a freshly forked child.
        unsafe { default_action(s) };
    }
    // SAFETY: the caller is a freshly forked child.
    unsafe { sigprocmask(libc::SIG_UNBLOCK, mask) };
}

/// In a child before `execv`: every signal back to its default action and none blocked. An
/// `execv` resets handled signals itself, but keeps what is ignored (an app's `SIGPIPE`) and
/// the mask (the signals the forking thread blocks): the exec'd program starts as from a shell.
///
/// # Safety
/// Only in a forked child about to exec (it changes process-wide signal state).
pub(super) unsafe fn reset_all_signals() {
    for s in 1..=64 {
        if s == libc::SIGKILL || s == libc::SIGSTOP {
            continue;
        }
        // SAFETY: the caller is a forked child about to exec; numbers the kernel refuses
        // (none here on Linux) just fail with EINVAL.
        unsafe { default_action(s) };
    }
    // SAFETY: the caller is a forked child about to exec.
    unsafe { sigprocmask(libc::SIG_SETMASK, 0) };
}

/// Signal `s` to its default action, by the raw system call (past `libsigchain`). The kernel's
/// `struct sigaction` all zero is SIG_DFL, no flags, an empty mask, whatever the order of its
/// fields on this architecture.
///
/// # Safety
/// Only in a forked child (it changes process-wide signal state).
unsafe fn default_action(s: libc::c_int) {
    let dfl = [0u64; 4];
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

/// `rt_sigprocmask(how, set)` by the raw system call, on an 8-byte kernel sigset.
///
/// # Safety
/// Only in a forked child (it changes the calling thread's mask, the only thread there).
unsafe fn sigprocmask(how: libc::c_int, set: u64) {
    // SAFETY: a valid 8-byte kernel sigset; the old mask is not asked for.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            how,
            &set as *const u64,
            std::ptr::null_mut::<u64>(),
            8usize,
        )
    };
}

/// In a child before `execv`: close every fd but 0, 1 and 2. The numbers are read from
/// `/proc/self/fd` with `getdents64` into a buffer on the stack (no allocation after the fork),
/// and the scan is repeated until it finds nothing more to close (closing while reading may
/// skip entries); without `/proc`, every number below the fd limit is closed. (`close_range` is
/// not on older Android's seccomp allowlist.)
///
/// # Safety
/// Only in a forked child about to exec: it closes fds that other owners in the app's copy
/// think they hold.
pub(super) unsafe fn close_inherited_fds() {
    loop {
        // SAFETY: a NUL-terminated path; the fd, if any, is ours alone.
        let raw = unsafe {
            libc::open(
                c"/proc/self/fd".as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            // SAFETY: the caller's promise: a child about to exec.
            unsafe { close_below_limit() };
            return;
        }
        // SAFETY: a fresh fd that nothing else owns; closed when dropped (a plain `close`).
        let dir = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut closed = 0;
        let mut buf = [0u64; 512];
        loop {
            // SAFETY: a directory fd we own and a buffer on the stack of the size given.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_getdents64,
                    dir.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    std::mem::size_of_val(&buf),
                )
            };
            if n <= 0 {
                break;
            }
            let bytes = buf.as_ptr() as *const u8;
            let mut off = 0usize;
            while off < n as usize {
                // SAFETY: the kernel wrote `n` bytes of `struct linux_dirent64` records (ino
                // u64, off i64, reclen u16, type u8, a NUL-terminated name) into `buf`.
                let (reclen, fd) = unsafe { dirent_fd(bytes.add(off)) };
                if let Some(fd) = fd.filter(|&fd| fd > 2 && fd != dir.as_raw_fd()) {
                    // SAFETY: the caller's promise: a child about to exec, whose inherited fds
                    // are closed so that the exec'd program does not hold them.
                    unsafe { libc::close(fd) };
                    closed += 1;
                }
                off += reclen as usize;
            }
        }
        drop(dir);
        if closed == 0 {
            return;
        }
    }
}

/// One `linux_dirent64` record at `p`: its length, and the fd its name spells, if a number.
///
/// # Safety
/// `p` points to a whole record written by `getdents64`.
unsafe fn dirent_fd(p: *const u8) -> (u16, Option<libc::c_int>) {
    // SAFETY: within the record, as the caller promises.
    unsafe {
        let reclen = u16::from_ne_bytes([*p.add(16), *p.add(17)]);
        let mut fd: libc::c_int = 0;
        let mut digits = 0;
        let mut q = p.add(19);
        while (*q).is_ascii_digit() {
            fd = fd
                .saturating_mul(10)
                .saturating_add((*q - b'0') as libc::c_int);
            digits += 1;
            q = q.add(1);
        }
        (reclen, (digits > 0).then_some(fd))
    }
}

/// Without `/proc`: close every number from 3 below the fd limit (at most 2^20).
///
/// # Safety
/// Only in a forked child about to exec.
unsafe fn close_below_limit() {
    // SAFETY: a zeroed rlimit is a valid out-parameter; plain system calls on our own fds.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 {
            (rl.rlim_cur as u64).min(1 << 20) as libc::c_int
        } else {
            1024
        };
        for fd in 3..max {
            libc::close(fd);
        }
    }
}
