//! The guards every dump passes first: enough free disk (the policy's minimum and twice the
//! heap), at most one dump per process, a per-app-version quota over a rolling window (persisted
//! in the data dir, so it survives restarts and crashes), and one dump at a time.
//!
//! A dump is counted against the quota when it is allowed, before it starts: a dump that crashes
//! the process still counts, so a crash loop cannot dump forever. The quota file is replaced by
//! the one atomic write (`sys::fs::write_file_atomic`), whose temporaries a killed writer left
//! are removed at the next write.

use super::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The limits, from the policy (`policy::configs`; no defaults of their own).
#[derive(Clone, Debug)]
pub struct GuardPolicy {
    /// Free bytes that must remain on the dump's file system, at least.
    pub min_free_bytes: u64,
    /// Free bytes must also be at least this many times the heap's size.
    pub heap_factor: u64,
    pub once_per_process: bool,
    /// Dumps allowed per app version within `window`.
    pub quota_per_version: u32,
    pub window: Duration,
}

/// The guards of one process.
#[derive(Debug)]
pub struct Guards {
    policy: GuardPolicy,
    /// Where the quota file lives.
    data_dir: PathBuf,
    version: String,
    taken: AtomicBool,
    running: AtomicBool,
}

/// Permission for one dump; while it lives no other dump may start.
#[derive(Debug)]
pub struct Permit<'a> {
    guards: &'a Guards,
}

impl Permit<'_> {
    /// The dump went through (kept for the record; the quota was counted at `allow`).
    pub fn succeeded(&self) {}
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.guards.running.store(false, Ordering::Release);
    }
}

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct QuotaFile {
    version: String,
    /// Unix seconds of each counted dump.
    dumps: Vec<u64>,
}

const QUOTA_FILE: &str = "dump-quota.json";
/// A temporary of [`QUOTA_FILE`] older than this was left by a killed writer.
const STALE_TEMPORARY: Duration = Duration::from_secs(600);

/// Free bytes for an unprivileged writer on the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> Result<u64> {
    let st = nix::sys::statvfs::statvfs(dir).map_err(|e| Error::Io {
        what: "statvfs",
        path: dir.display().to_string(),
        err: std::io::Error::from(e),
    })?;
    Ok((st.blocks_available() as u64).saturating_mul(st.fragment_size() as u64))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Guards {
    pub fn new(policy: GuardPolicy, data_dir: &Path, app_version: &str) -> Guards {
        Guards {
            policy,
            data_dir: data_dir.to_path_buf(),
            version: app_version.to_string(),
            taken: AtomicBool::new(false),
            running: AtomicBool::new(false),
        }
    }

    /// Dumps counted for this version within the window, as on disk now.
    pub fn counted(&self) -> u32 {
        self.load().dumps.len() as u32
    }

    fn load(&self) -> QuotaFile {
        let path = self.data_dir.join(QUOTA_FILE);
        let q: QuotaFile = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
                tracing::warn!(file = %path.display(), error = %e, "dump quota file unreadable; starting it afresh");
                QuotaFile::default()
            }),
            Err(_) => QuotaFile::default(),
        };
        if q.version != self.version {
            return QuotaFile {
                version: self.version.clone(),
                dumps: Vec::new(),
            };
        }
        let now = now_secs();
        let since = now.saturating_sub(self.policy.window.as_secs());
        // A dump recorded after now was counted before the clock was set back: when it really
        // was is unknown, and kept it would hold the quota until the clock caught up (months,
        // after a reset to a default date). It no longer counts.
        QuotaFile {
            version: q.version,
            dumps: q
                .dumps
                .into_iter()
                .filter(|&t| t >= since && t <= now)
                .collect(),
        }
    }

    fn store(&self, q: &QuotaFile) -> Result<()> {
        let path = self.data_dir.join(QUOTA_FILE);
        let io = |what, err| Error::Io {
            what,
            path: path.display().to_string(),
            err,
        };
        std::fs::create_dir_all(&self.data_dir).map_err(|e| io("creating the data dir of", e))?;
        let bytes = serde_json::to_vec(q).map_err(|e| Error::Sys(e.to_string()))?;
        // What a writer killed between its temporary and the rename left (rare: once per dump).
        sys::fs::remove_stale_temporaries(&self.data_dir, QUOTA_FILE, STALE_TEMPORARY);
        sys::fs::write_file_atomic(&path, &bytes).map_err(|e| io("writing", e))
    }

    /// May a dump of a `heap_bytes` heap be written into `dir` now? Every refusal names its
    /// reason; an allowance is counted against the quota at once.
    pub fn allow(&self, dir: &Path, heap_bytes: u64) -> Result<Permit<'_>> {
        if self.running.swap(true, Ordering::AcqRel) {
            return Err(Error::Refused("a dump is already running".into()));
        }
        let permit = Permit { guards: self };
        if self.policy.once_per_process && self.taken.load(Ordering::Acquire) {
            return Err(Error::Refused(
                "a dump was already taken by this process (once per process)".into(),
            ));
        }
        let need = self
            .policy
            .min_free_bytes
            .max(heap_bytes.saturating_mul(self.policy.heap_factor));
        let free = free_bytes(dir)?;
        if free < need {
            return Err(Error::Refused(format!(
                "{free} bytes free in {}, need {need} (minimum {} and {} x heap of {heap_bytes})",
                dir.display(),
                self.policy.min_free_bytes,
                self.policy.heap_factor
            )));
        }
        let mut q = self.load();
        if q.dumps.len() as u32 >= self.policy.quota_per_version {
            return Err(Error::Refused(format!(
                "quota: {} dumps of version {} within {} s (limit {})",
                q.dumps.len(),
                self.version,
                self.policy.window.as_secs(),
                self.policy.quota_per_version
            )));
        }
        q.dumps.push(now_secs());
        self.store(&q)?;
        self.taken.store(true, Ordering::Release);
        Ok(permit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> GuardPolicy {
        GuardPolicy {
            min_free_bytes: 1,
            heap_factor: 2,
            once_per_process: false,
            quota_per_version: 2,
            window: Duration::from_secs(3600),
        }
    }

    #[test]
    fn quota_is_per_version_persisted_and_counted() {
        let d = tempfile::tempdir().unwrap();
        let g = Guards::new(policy(), d.path(), "1.0");
        drop(g.allow(d.path(), 1).unwrap());
        drop(g.allow(d.path(), 1).unwrap());
        let e = g.allow(d.path(), 1).unwrap_err().to_string();
        assert!(e.contains("quota: 2 dumps of version 1.0"), "{e}");
        // A new process of the same version reads the same quota.
        let g2 = Guards::new(policy(), d.path(), "1.0");
        assert_eq!(g2.counted(), 2);
        assert!(g2.allow(d.path(), 1).is_err());
        // A new version starts afresh.
        let g3 = Guards::new(policy(), d.path(), "1.1");
        assert!(g3.allow(d.path(), 1).is_ok());
    }

    #[test]
    fn window_expires_old_dumps() {
        let d = tempfile::tempdir().unwrap();
        let old = QuotaFile {
            version: "1.0".into(),
            dumps: vec![now_secs() - 7200, now_secs() - 7300],
        };
        std::fs::write(d.path().join(QUOTA_FILE), serde_json::to_vec(&old).unwrap()).unwrap();
        let g = Guards::new(policy(), d.path(), "1.0");
        assert_eq!(g.counted(), 0);
        assert!(g.allow(d.path(), 1).is_ok());
    }

    /// Dumps recorded in the future (the clock was set back since) do not hold the quota.
    #[test]
    fn a_clock_set_back_does_not_hold_the_quota() {
        let d = tempfile::tempdir().unwrap();
        let ahead = QuotaFile {
            version: "1.0".into(),
            dumps: vec![now_secs() + 180 * 24 * 3600, now_secs() + 3600],
        };
        std::fs::write(
            d.path().join(QUOTA_FILE),
            serde_json::to_vec(&ahead).unwrap(),
        )
        .unwrap();
        let g = Guards::new(policy(), d.path(), "1.0");
        assert_eq!(g.counted(), 0);
        drop(g.allow(d.path(), 1).unwrap());
        assert_eq!(
            g.counted(),
            1,
            "the future entries are gone from the file too"
        );
    }

    #[test]
    fn once_per_process_and_one_at_a_time() {
        let d = tempfile::tempdir().unwrap();
        let mut p = policy();
        p.quota_per_version = 10;
        let g = Guards::new(p.clone(), d.path(), "v");
        let permit = g.allow(d.path(), 1).unwrap();
        let e = g.allow(d.path(), 1).unwrap_err().to_string();
        assert!(e.contains("already running"), "{e}");
        drop(permit);
        assert!(g.allow(d.path(), 1).is_ok());
        p.once_per_process = true;
        let g = Guards::new(p, d.path(), "w");
        drop(g.allow(d.path(), 1).unwrap());
        let e = g.allow(d.path(), 1).unwrap_err().to_string();
        assert!(e.contains("once per process"), "{e}");
    }

    #[test]
    fn free_disk_is_checked_against_minimum_and_twice_the_heap() {
        let d = tempfile::tempdir().unwrap();
        let free = free_bytes(d.path()).unwrap();
        assert!(free > 0);
        let g = Guards::new(policy(), d.path(), "v");
        let e = g.allow(d.path(), free).unwrap_err().to_string();
        assert!(e.contains("2 x heap"), "{e}");
        let mut p = policy();
        p.min_free_bytes = free.saturating_mul(4);
        let g = Guards::new(p, d.path(), "v");
        assert!(g
            .allow(d.path(), 1)
            .unwrap_err()
            .to_string()
            .contains("need"));
        // Refusals do not count against the quota.
        assert_eq!(g.counted(), 0);
        let g = Guards::new(policy(), d.path(), "v");
        assert!(g.allow(d.path(), free / 4).is_ok());
    }

    /// Exactly the bytes needed free is enough; one byte fewer is not. On a small file system
    /// of its own, whose free space nothing else changes.
    #[test]
    fn free_bytes_equal_to_the_need_are_enough() {
        let Some(disk) = testkit::disk::SmallDisk::mount("free_bytes_equal_to_the_need", 256)
        else {
            return;
        };
        let data = tempfile::tempdir().unwrap();
        let free = free_bytes(disk.path()).unwrap();
        assert!(free > 0);
        let with_min = |min: u64| {
            let mut p = policy();
            p.min_free_bytes = min;
            Guards::new(p, data.path(), "v")
                .allow(disk.path(), 1)
                .map(|_| ())
        };
        assert!(with_min(free).is_ok());
        let e = with_min(free + 1).unwrap_err().to_string();
        assert!(e.contains(&format!("{free} bytes free")), "{e}");
    }
}
