//! Owned file descriptors: the few fd-making calls std does not offer (within the workspace's
//! Rust 1.85), each returning [`OwnedFd`], so that every fd the code makes has one owner and is
//! closed once, by `Drop`, on every path (an early return included).
//!
//! Invariants:
//! - Every fd made here is close-on-exec: a child the agent execs inherits none of them.
//! - Nothing here panics; errors are the OS's, as [`io::Error`].
//! - Closing is `OwnedFd`'s `Drop`, a bare `close(2)`: it neither allocates nor locks, so it
//!   may run anywhere, a forked child included. Where a fd must outlive its owner on purpose (a
//!   forked child that `_exit`s without running destructors, a hook that passes the VM's own
//!   fds through), the code says so where it happens.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A pipe, both ends close-on-exec: `(read end, write end)`.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two fds into a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: both are open fds that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Make `fd` non-blocking (`O_NONBLOCK`), keeping its other status flags.
pub fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl on an open fd (borrowed for the call) only reads and sets its flags.
    unsafe {
        let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    /// Whether `fd` is open in this process.
    fn is_open(fd: i32) -> bool {
        // SAFETY: F_GETFD only asks about the number.
        unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
    }

    #[test]
    fn a_pipe_carries_bytes_and_is_closed_by_its_owners() {
        let (r, w) = pipe().unwrap();
        let (rn, wn) = (r.as_raw_fd(), w.as_raw_fd());
        for fd in [rn, wn] {
            // SAFETY: F_GETFD only reads the fd's flags.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
            assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC, "fd {fd}");
        }
        let mut w = std::fs::File::from(w);
        w.write_all(b"hello").unwrap();
        drop(w);
        let mut got = Vec::new();
        std::fs::File::from(r).read_to_end(&mut got).unwrap();
        assert_eq!(got, b"hello");
        assert!(!is_open(rn) && !is_open(wn), "both ends closed by drop");
    }

    #[test]
    fn a_non_blocking_read_end_does_not_wait_for_a_writer() {
        let (r, w) = pipe().unwrap();
        set_nonblocking(r.as_fd()).unwrap();
        let mut r = std::fs::File::from(r);
        let e = r.read(&mut [0u8; 8]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        drop(w);
        assert_eq!(
            r.read(&mut [0u8; 8]).unwrap(),
            0,
            "end of file once the writer is gone"
        );
    }

    /// A write end (whose access mode is not 0) and a file opened to append: each keeps its
    /// other flags, and a second call leaves it non-blocking.
    #[test]
    fn non_blocking_keeps_the_other_flags_and_stays_set() {
        let status = |fd: BorrowedFd<'_>| {
            // SAFETY: F_GETFL only reads the fd's status flags.
            unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) }
        };
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(dir.path().join("log"))
            .unwrap();
        let (_r, w) = pipe().unwrap();
        for (fd, kept) in [
            (w.as_fd(), libc::O_WRONLY),
            (log.as_fd(), libc::O_WRONLY | libc::O_APPEND),
        ] {
            for _ in 0..2 {
                set_nonblocking(fd).unwrap();
                let fl = status(fd);
                assert_eq!(fl & libc::O_NONBLOCK, libc::O_NONBLOCK, "{fl:#o}");
                assert_eq!(fl & kept, kept, "{fl:#o}");
            }
        }
    }
}
