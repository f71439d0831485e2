//! sys: the few OS wrappers more than one of oomguard's crates needs (DESIGN.md, "Crates").
//!
//! - [`mapped`]: read-only maps of files and windows of them, the cache-prefetch hint, the
//!   executable's huge-page allocator.
//! - [`cpu`]: code compiled for an instruction the processor has beyond the target's baseline
//!   (`popcnt` for the analyser's id lookups), checked at run time.
//! - [`crc32`]: gzip's CRC-32 for the spool's compressed mini dump (arm64's CRC instructions where
//!   the processor has them, checked at run time; else a 1 K table).
//! - [`fs`]: the file-system seam ([`fs::Fs`], with a fault-injecting twin for tests) and the one
//!   durable atomic write of the workspace ([`fs::write_atomic_from`]: temporary sibling named by
//!   one rule, fsync, rename, directory fsync; [`fs::write_file_atomic`] on the real file system),
//!   which every writer that replaces a file whole uses.
//! - [`scratch`]: file-backed scratch arrays for the analysis child (issue 43's memory budget),
//!   and arrays its threads fill in stretches without writing zeros first ([`scratch::Stretched`]).
//! - [`fd`]: owned file descriptors for what std does not make (a close-on-exec pipe), so that fds
//!   are [`std::os::fd::OwnedFd`]s closed once by their owner, never raw integers.
//! - [`chan`]: the channel the library's threads pass messages on (the `.so`'s size again: std's
//!   `mpsc` made three channel flavours per message type).
//! - [`time`]: the civil date of the clock's seconds (log lines, pages).
//! - [`order`]: the one stable sort the library's cold sorts share (the shipped `.so`'s size: one
//!   copy of the standard library's stable sort, not one per element type).
//!
//! It holds no policy and no logic of the agent's: only what wraps the OS (and that sort, channel,
//! date and the stretched arrays, which need `unsafe`). Unsafe code lives here (each block with
//! a `// SAFETY:` comment), in the agent's `hook`, `dump`, `child` and `jni`, and nowhere else.

pub mod chan;
pub mod cpu;
pub mod crc32;
pub mod fd;
pub mod fs;
pub mod mapped;
pub mod order;
pub mod scratch;
pub mod time;

/// The process's data limit (`RLIMIT_DATA`'s soft limit) in bytes; `None` when there is none
/// (or it cannot be read).
pub fn data_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit for the call to fill in.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_DATA, &mut r) } == 0;
    // (`rlim_t` is 32 bits wide on some 32-bit targets.)
    #[allow(clippy::unnecessary_cast)]
    let cur = r.rlim_cur as u64;
    (ok && r.rlim_cur != libc::RLIM_INFINITY).then_some(cur)
}

/// What tests read of the process's own maps.
#[cfg(test)]
pub(crate) mod smaps {
    /// The kernel area (`/proc/self/smaps`) holding `addr`: its bounds and its lines (`Rss:`,
    /// `Anonymous:`, `VmFlags:` ...).
    pub(crate) fn area_of(addr: usize) -> Option<(usize, usize, Vec<String>)> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut area: Option<(usize, usize, Vec<String>)> = None;
        for line in smaps.lines() {
            let head = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = head.split_once('-').filter(|_| !head.ends_with(':')) {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    if area.is_some() {
                        break;
                    }
                    area = (lo <= addr && addr < hi).then(|| (lo, hi, Vec::new()));
                    continue;
                }
            }
            if let Some((_, _, lines)) = area.as_mut() {
                lines.push(line.to_string());
            }
        }
        area
    }

    /// The kB after `key` (as `"Rss:"`) in the area holding `addr`.
    pub(crate) fn kb(addr: usize, key: &str) -> Option<u64> {
        let (_, _, lines) = area_of(addr)?;
        lines
            .iter()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    }
}
