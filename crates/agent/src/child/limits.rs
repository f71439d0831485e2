//! What a child puts on itself right after the fork: `oom_score_adj` (the kernel kills it
//! before the app), a CPU priority, and a memory limit.
//!
//! The memory limit is `RLIMIT_DATA`, not `RLIMIT_AS`: a fork of the app starts with the app's
//! address space (several GB on a phone), and allocators such as scudo reserve large ranges
//! `PROT_NONE` at start; under an address-space limit every allocation would fail. The data
//! limit counts only private writable memory; a child that stays the app's fork starts with the
//! app's data already counted ([`own_data_bytes`] says how much). Kernels before 4.7 apply
//! `RLIMIT_DATA` to `brk` only.
//!
//! Invariant: everything the child writes is built in [`Limits::prepare`], before the fork;
//! [`Prepared::apply`] makes only system calls.

use std::ffi::CStr;

/// Limits a child puts on itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Written to `/proc/self/oom_score_adj` (clamped to -1000..=1000; higher dies first);
    /// `None` leaves the app's.
    pub oom_score_adj: Option<i32>,
    /// `setpriority` niceness (19 is the lowest priority); `None` leaves the app's.
    pub nice: Option<i32>,
    /// `RLIMIT_DATA` in bytes; 0 for none.
    pub data_bytes: u64,
}

/// [`Limits`] made ready for the child: the text it writes, built before the fork.
pub(super) struct Prepared {
    /// `oom_score_adj` as the file takes it ("1000\n"), and its length; empty: leave it.
    adj: [u8; 8],
    adj_len: usize,
    nice: Option<i32>,
    data_bytes: u64,
}

const OOM_SCORE_ADJ: &CStr = c"/proc/self/oom_score_adj";

impl Limits {
    pub(super) fn prepare(&self) -> Prepared {
        let mut adj = [0u8; 8];
        let mut adj_len = 0;
        if let Some(v) = self.oom_score_adj {
            let text = format!("{}\n", v.clamp(-1000, 1000));
            adj[..text.len()].copy_from_slice(text.as_bytes());
            adj_len = text.len();
        }
        Prepared {
            adj,
            adj_len,
            nice: self.nice,
            data_bytes: self.data_bytes,
        }
    }
}

impl Prepared {
    /// In the child: raise `oom_score_adj`, lower the priority, cap the data. Only system
    /// calls on data built before the fork.
    pub(super) fn apply(&self) {
        if self.adj_len > 0 {
            // SAFETY: a NUL-terminated path; the fd is closed right after the write.
            unsafe {
                let fd = libc::open(OOM_SCORE_ADJ.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    libc::write(fd, self.adj.as_ptr() as *const libc::c_void, self.adj_len);
                    libc::close(fd);
                }
            }
        }
        if let Some(nice) = self.nice {
            // SAFETY: a plain system call on this process.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
        }
        if self.data_bytes > 0 {
            let rl = libc::rlimit {
                rlim_cur: self.data_bytes as libc::rlim_t,
                rlim_max: self.data_bytes as libc::rlim_t,
            };
            // SAFETY: a valid rlimit that outlives the call.
            unsafe { libc::setrlimit(libc::RLIMIT_DATA, &rl) };
        }
    }
}

/// This process's private writable memory (`VmData` in `/proc/self/status`), in bytes; 0 if
/// unknown. A child that stays this process's fork starts with that much data.
pub fn own_data_bytes() -> u64 {
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
