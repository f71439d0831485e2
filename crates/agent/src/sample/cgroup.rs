//! The memory cgroup the process is charged to: its usage, swap and limit, read each poll.
//!
//! Owns finding the cgroup (`/proc/self/cgroup` and the mounts in `/proc/self/mountinfo`) and
//! reading its files. cgroup v2 first (`memory.current`, `memory.max`, `memory.high`,
//! `memory.swap.current`, `memory.stat`); where the memory controller is a v1 hierarchy (a
//! hybrid host, older Android's memcg) its twins (`memory.usage_in_bytes`,
//! `memory.limit_in_bytes`, `memory.memsw.usage_in_bytes`, `memory.stat`'s `total_*`).
//!
//! Invariants:
//! - The limit that binds is the lowest over the process's cgroup and its ancestors up to the
//!   mount's root (v2: the lower of `memory.max` and `memory.high`), found at open; the usage,
//!   swap and `memory.stat` of that same cgroup are read, so the ratio compares one cgroup's
//!   figures. With no limit anywhere the process's own cgroup is read (the figures still go to
//!   the flight recorder; the trigger has nothing to compare them with).
//! - The working set is the usage less `inactive_file` (page cache the kernel reclaims before
//!   it kills anything, such as a dump's own writes): that is what the trigger compares.
//! - Every file is opened once and re-read with `pread` at offset 0 into a buffer allocated at
//!   open: one to three system calls per poll, no allocation. `memory.stat` costs most (about
//!   10 µs on a v1 hierarchy here, against 1 µs for the usage), so it is read only when there is
//!   a limit and the usage is over the caller's threshold: under it the working set, never more
//!   than the usage, is under it too, and stays unknown (`None`). A read that fails leaves that
//!   poll's figures unknown; nothing here panics on what the kernel writes.
//! - "max", and v1's "unlimited" (any value from 2^62 up), read as no limit.
#![forbid(unsafe_code)]

use std::fs::File;
use std::path::{Path, PathBuf};

/// Which cgroup hierarchy holds the memory controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// One poll's figures, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// `memory.current` (v1: `memory.usage_in_bytes`).
    pub current: u64,
    /// The usage less `inactive_file`; `None` when `memory.stat` could not be read.
    pub working_set: Option<u64>,
    /// The limit that binds; `None` when there is none.
    pub limit: Option<u64>,
    /// `memory.swap.current` (v1: memsw less usage); `None` where not accounted.
    pub swap: Option<u64>,
}

/// The cgroup lines of `/proc/self/cgroup`: the v2 path (`0::/path`) and the v1 memory
/// controller's path (`N:...memory...:/path`), when present.
pub fn parse_proc_cgroup(text: &str) -> (Option<String>, Option<String>) {
    let (mut v2, mut v1) = (None, None);
    for line in text.lines() {
        let mut it = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if id == "0" && ctrls.is_empty() {
            v2 = Some(path.to_string());
        } else if ctrls.split(',').any(|c| c == "memory") {
            v1 = Some(path.to_string());
        }
    }
    (v2, v1)
}

/// A cgroup mount: the cgroup path it shows (`root`) and where (`point`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub root: String,
    pub point: PathBuf,
}

/// `\040`-style escapes of mountinfo's paths undone (three octal digits, at most `\377`;
/// anything else is kept as written).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && (b'0'..=b'3').contains(&b[i + 1])
            && b[i + 2..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup2 mount and the v1 mount holding the memory controller, from
/// `/proc/self/mountinfo` text (first of each).
pub fn parse_mountinfo(text: &str) -> (Option<Mount>, Option<Mount>) {
    let (mut v2, mut v1) = (None, None);
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let f: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if f.len() < 5 || r.is_empty() {
            continue;
        }
        let m = Mount {
            root: unescape(f[3]),
            point: PathBuf::from(unescape(f[4])),
        };
        match r[0] {
            "cgroup2" if v2.is_none() => v2 = Some(m),
            "cgroup"
                if v1.is_none()
                    && r.get(2)
                        .is_some_and(|o| o.split(',').any(|x| x == "memory")) =>
            {
                v1 = Some(m)
            }
            _ => {}
        }
    }
    (v2, v1)
}

/// The directory of cgroup `path` under mount `m`, and its ancestors up to the mount's root,
/// leaf first. `None` when the path is not under the mount's root (another namespace's).
pub fn chain(m: &Mount, path: &str) -> Option<Vec<PathBuf>> {
    let root = m.root.trim_end_matches('/');
    let rel = if root.is_empty() {
        path
    } else {
        path.strip_prefix(root)?
    };
    if !(rel.is_empty() || rel.starts_with('/')) {
        return None;
    }
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    if parts.contains(&"..") {
        return None;
    }
    let mut out = Vec::new();
    for n in (0..=parts.len()).rev() {
        let mut d = m.point.clone();
        for p in &parts[..n] {
            d.push(p);
        }
        out.push(d);
    }
    Some(out)
}

/// From 2^62 up a v1 limit means none (the kernel writes `PAGE_COUNTER_MAX` pages in bytes).
const UNLIMITED_FROM: u64 = 1 << 62;

/// A limit file's value: `None` for `max` or unlimited, or text that is not a number.
pub fn parse_limit(text: &[u8]) -> Option<u64> {
    let t = std::str::from_utf8(text).ok()?.trim();
    if t == "max" {
        return None;
    }
    t.parse::<u64>().ok().filter(|&v| v < UNLIMITED_FROM)
}

/// A plain number file (`memory.current`...).
pub fn parse_number(text: &[u8]) -> Option<u64> {
    std::str::from_utf8(text).ok()?.trim().parse().ok()
}

/// The value of `key` in `memory.stat` text (`key value` lines).
pub fn stat_field(text: &[u8], key: &[u8]) -> Option<u64> {
    text.split(|&c| c == b'\n').find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(b" ")?;
        parse_number(rest)
    })
}

/// The files of the cgroup read each poll.
pub struct CgroupMemory {
    version: Version,
    dir: PathBuf,
    current: File,
    /// v2: `memory.max`, `memory.high`; v1: `memory.limit_in_bytes`.
    limits: Vec<File>,
    /// v2: `memory.swap.current`; v1: `memory.memsw.usage_in_bytes` (memory plus swap).
    swap: Option<File>,
    stat: Option<File>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for CgroupMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CgroupMemory({:?} {})", self.version, self.dir.display())
    }
}

fn read_into(f: &File, buf: &mut Vec<u8>) -> Option<usize> {
    super::pread_whole(f, buf).ok()
}

impl CgroupMemory {
    /// The memory cgroup of this process, or why there is none to read.
    pub fn open() -> Result<CgroupMemory, String> {
        let cg = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let mi = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
        let (v2_path, v1_path) = parse_proc_cgroup(&cg);
        let (v2_mount, v1_mount) = parse_mountinfo(&mi);
        let mut why = Vec::new();
        match (&v2_path, &v2_mount) {
            (Some(p), Some(m)) => match chain(m, p) {
                Some(dirs) => match Self::open_chain(Version::V2, &dirs) {
                    Ok(c) => return Ok(c),
                    Err(e) => why.push(e),
                },
                None => why.push(format!(
                    "cgroup v2 path {p} is outside the mount at {} (root {})",
                    m.point.display(),
                    m.root
                )),
            },
            (None, _) => why.push("/proc/self/cgroup names no cgroup v2".into()),
            (Some(_), None) => why.push("no cgroup2 file system is mounted".into()),
        }
        match (&v1_path, &v1_mount) {
            (Some(p), Some(m)) => match chain(m, p).map(|d| Self::open_chain(Version::V1, &d)) {
                Some(Ok(c)) => return Ok(c),
                Some(Err(e)) => why.push(e),
                None => why.push(format!("memory cgroup v1 path {p} is outside its mount")),
            },
            (None, _) => why.push("and no v1 memory controller".into()),
            (Some(_), None) => why.push("the v1 memory controller is not mounted".into()),
        }
        Err(why.join("; "))
    }

    /// Open the cgroup of `dirs` (leaf first, then its ancestors) whose limit is lowest; the
    /// leaf when none has a limit.
    pub fn open_chain(version: Version, dirs: &[PathBuf]) -> Result<CgroupMemory, String> {
        let (cur_name, limit_names): (&str, &[&str]) = match version {
            Version::V2 => ("memory.current", &["memory.max", "memory.high"]),
            Version::V1 => ("memory.usage_in_bytes", &["memory.limit_in_bytes"]),
        };
        let leaf = dirs.first().ok_or("no cgroup directory")?;
        if let Err(e) = File::open(leaf.join(cur_name)) {
            return Err(format!("{}: {e}", leaf.join(cur_name).display()));
        }
        let mut best: Option<(u64, &PathBuf)> = None;
        for d in dirs {
            // The root of a v2 hierarchy has no memory.current nor limits.
            for n in limit_names {
                let lim = std::fs::read(d.join(n)).ok().and_then(|b| parse_limit(&b));
                if let Some(l) = lim {
                    if best.is_none_or(|(b, _)| l < b) {
                        best = Some((l, d));
                    }
                }
            }
        }
        let dir = best.map_or(leaf, |(_, d)| d).clone();
        let open = |n: &str| {
            File::open(dir.join(n)).map_err(|e| format!("{}: {e}", dir.join(n).display()))
        };
        let current = open(cur_name)?;
        let limits = limit_names.iter().filter_map(|n| open(n).ok()).collect();
        let swap = match version {
            Version::V2 => open("memory.swap.current").ok(),
            Version::V1 => open("memory.memsw.usage_in_bytes").ok(),
        };
        let stat = open("memory.stat").ok();
        Ok(CgroupMemory {
            version,
            dir,
            current,
            limits,
            swap,
            stat,
            buf: vec![0; 8192],
        })
    }

    pub fn version(&self) -> Version {
        self.version
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The limit that binds now (`None`: none).
    pub fn limit(&mut self) -> Option<u64> {
        let mut lowest: Option<u64> = None;
        for i in 0..self.limits.len() {
            let n = read_into(&self.limits[i], &mut self.buf)?;
            if let Some(l) = parse_limit(&self.buf[..n]) {
                lowest = Some(lowest.map_or(l, |x| x.min(l)));
            }
        }
        lowest
    }

    /// One poll's figures; `limit` is the last known limit (re-read by the caller now and then).
    /// The working set is read only when the usage is over `stat_percent` of the limit. `None`
    /// when the usage cannot be read.
    pub fn read(&mut self, limit: Option<u64>, stat_percent: u64) -> Option<Figures> {
        let n = read_into(&self.current, &mut self.buf)?;
        let current = parse_number(&self.buf[..n])?;
        let swap = match &self.swap {
            Some(f) => read_into(f, &mut self.buf)
                .and_then(|n| parse_number(&self.buf[..n]))
                .map(|v| match self.version {
                    Version::V2 => v,
                    Version::V1 => v.saturating_sub(current),
                }),
            None => None,
        };
        let key: &[u8] = match self.version {
            Version::V2 => b"inactive_file",
            Version::V1 => b"total_inactive_file",
        };
        let over = limit
            .is_some_and(|l| current as u128 * 100 > l as u128 * stat_percent.min(100) as u128);
        let working_set = match &self.stat {
            Some(f) if over => read_into(f, &mut self.buf)
                .and_then(|n| stat_field(&self.buf[..n], key))
                .map(|inactive| current.saturating_sub(inactive)),
            _ => None,
        };
        Some(Figures {
            current,
            working_set,
            limit,
            swap,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_cgroup_lines() {
        let hybrid = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/73fd\n1:cpu:/\n0::/\n";
        assert_eq!(
            parse_proc_cgroup(hybrid),
            (Some("/".into()), Some("/process_api/73fd".into()))
        );
        assert_eq!(
            parse_proc_cgroup("0::/user.slice/app.scope\n"),
            (Some("/user.slice/app.scope".into()), None)
        );
        assert_eq!(
            parse_proc_cgroup("5:cpu,memory:/a\ngarbage\n"),
            (None, Some("/a".into()))
        );
        assert_eq!(parse_proc_cgroup(""), (None, None));
        // v2's line is hierarchy 0 with no controller, both.
        assert_eq!(parse_proc_cgroup("3::/odd\n0:cpu:/x\n"), (None, None));
    }

    #[test]
    fn mountinfo_escapes_are_undone_and_nothing_else() {
        assert_eq!(unescape(r"a\040b\011c\012d\134e"), "a b\tc\nd\\e");
        assert_eq!(unescape(r"\040"), " ");
        // Short, not octal, or over a byte: kept as written.
        for kept in [r"x\04", r"\4", r"\", r"\08a", r"\400", r"\777"] {
            assert_eq!(unescape(kept), kept);
        }
    }

    #[test]
    fn mountinfo_lines() {
        let t = "24 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
                 31 24 0:27 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n\
                 32 24 0:28 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n\
                 40 24 0:35 /sub /sys/fs/cgroup/uni\\040fied rw - cgroup2 cgroup2 rw\n";
        let (v2, v1) = parse_mountinfo(t);
        assert_eq!(
            v2,
            Some(Mount {
                root: "/sub".into(),
                point: "/sys/fs/cgroup/uni fied".into()
            })
        );
        assert_eq!(
            v1,
            Some(Mount {
                root: "/".into(),
                point: "/sys/fs/cgroup/memory".into()
            })
        );
        assert_eq!(parse_mountinfo("nonsense\n - \n"), (None, None));
        // The first of each kind; a v1 mount counts only with the memory controller; five
        // fields before the separator are enough.
        let t = "1 2 0:1 /a /cg/a - cgroup2 cgroup2 rw\n\
                 1 2 0:2 /b /cg/b - cgroup2 cgroup2 rw\n\
                 1 2 0:3 / /cg/cpu - cgroup cgroup rw,cpu\n\
                 1 2 0:4 / /cg/mem - cgroup cgroup rw,memory\n\
                 1 2 0:5 / /cg/mem2 - cgroup cgroup memory\n";
        let (v2, v1) = parse_mountinfo(t);
        assert_eq!(v2.map(|m| m.point), Some("/cg/a".into()));
        assert_eq!(v1.map(|m| m.point), Some("/cg/mem".into()));
        assert_eq!(
            parse_mountinfo("1 2 0:1 /a - cgroup2 cgroup2 rw\n"),
            (None, None)
        );
    }

    #[test]
    fn chains_run_from_the_leaf_to_the_mount_root() {
        let m = Mount {
            root: "/".into(),
            point: "/cg".into(),
        };
        assert_eq!(
            chain(&m, "/a/b").unwrap(),
            vec![
                PathBuf::from("/cg/a/b"),
                PathBuf::from("/cg/a"),
                PathBuf::from("/cg")
            ]
        );
        assert_eq!(chain(&m, "/").unwrap(), vec![PathBuf::from("/cg")]);
        let ns = Mount {
            root: "/c1".into(),
            point: "/cg".into(),
        };
        assert_eq!(
            chain(&ns, "/c1/x").unwrap(),
            vec![PathBuf::from("/cg/x"), PathBuf::from("/cg")]
        );
        assert_eq!(chain(&ns, "/c10/x"), None);
        assert_eq!(chain(&ns, "/other"), None);
        assert_eq!(chain(&m, "/a/../../etc"), None);
    }

    #[test]
    fn limits_and_numbers() {
        assert_eq!(parse_limit(b"max\n"), None);
        assert_eq!(parse_limit(b"268435456\n"), Some(268_435_456));
        assert_eq!(parse_limit(b"9223372036854771712\n"), None);
        assert_eq!(parse_limit(b"junk"), None);
        assert_eq!(parse_limit(b"4611686018427387904"), None, "2^62: none");
        assert_eq!(parse_limit(b"4611686018427387903"), Some((1 << 62) - 1));
        assert_eq!(parse_number(b"123\n"), Some(123));
        assert_eq!(parse_number(b""), None);
        let stat = b"anon 100\nfile 50\nactive_file 10\ninactive_file 40\ntotal_inactive_file 7\n";
        assert_eq!(stat_field(stat, b"inactive_file"), Some(40));
        assert_eq!(stat_field(stat, b"total_inactive_file"), Some(7));
        assert_eq!(stat_field(stat, b"file"), Some(50));
        assert_eq!(stat_field(stat, b"shmem"), None);
    }

    /// Of several limits up the chain the lowest binds; of equal ones, the one nearest the
    /// leaf.
    #[test]
    fn the_lowest_limit_wins_and_a_tie_goes_to_the_leaf() {
        let t = tempfile::tempdir().unwrap();
        let (leaf, mid, top) = (
            t.path().join("a/b/c"),
            t.path().join("a/b"),
            t.path().join("a"),
        );
        std::fs::create_dir_all(&leaf).unwrap();
        let put = |d: &Path, n: &str, v: &str| std::fs::write(d.join(n), v).unwrap();
        for d in [&leaf, &mid, &top] {
            put(d, "memory.current", "100\n");
        }
        let dirs = vec![leaf.clone(), mid.clone(), top.clone()];
        let bound = |maxes: [&str; 3]| {
            for (d, m) in dirs.iter().zip(maxes) {
                put(d, "memory.max", m);
            }
            CgroupMemory::open_chain(Version::V2, &dirs)
                .unwrap()
                .dir()
                .to_path_buf()
        };
        assert_eq!(bound(["9000", "5000", "7000"]), mid);
        assert_eq!(bound(["5000", "9000", "4000"]), top);
        assert_eq!(bound(["5000", "5000", "5000"]), leaf);
        assert_eq!(bound(["max", "6000", "6000"]), mid);
    }

    /// A `memory.stat` longer than the reader's buffer (8 KiB) is read whole: its
    /// `inactive_file` may come last.
    #[test]
    fn a_stat_file_longer_than_the_buffer_is_read_whole() {
        let t = tempfile::tempdir().unwrap();
        let put = |n: &str, v: String| std::fs::write(t.path().join(n), v).unwrap();
        put("memory.current", "5000\n".into());
        put("memory.max", "9000\n".into());
        let filler: String = (0..3_000).map(|i| format!("field_{i} {i}\n")).collect();
        assert!(filler.len() > 4 * 8192, "{}", filler.len());
        put("memory.stat", format!("{filler}inactive_file 1000\n"));
        let mut c = CgroupMemory::open_chain(Version::V2, &[t.path().into()]).unwrap();
        let f = c.read(Some(9000), 0).unwrap();
        assert_eq!((f.current, f.working_set), (5000, Some(4000)));
    }

    /// A chain of real directories with the files a v2 cgroup shows: the lowest limit binds,
    /// and its cgroup's usage and stat are read.
    #[test]
    fn the_lowest_limit_of_the_chain_binds() {
        let t = tempfile::tempdir().unwrap();
        let leaf = t.path().join("a/b");
        let mid = t.path().join("a");
        std::fs::create_dir_all(&leaf).unwrap();
        let put = |d: &Path, n: &str, v: &str| std::fs::write(d.join(n), v).unwrap();
        put(&leaf, "memory.current", "100\n");
        put(&leaf, "memory.max", "max\n");
        put(&leaf, "memory.high", "max\n");
        put(&mid, "memory.current", "5000\n");
        put(&mid, "memory.max", "9000\n");
        put(&mid, "memory.high", "8000\n");
        put(&mid, "memory.swap.current", "12\n");
        put(&mid, "memory.stat", "anon 1\ninactive_file 1000\n");
        let dirs = vec![leaf.clone(), mid.clone(), t.path().to_path_buf()];
        let mut c = CgroupMemory::open_chain(Version::V2, &dirs).unwrap();
        assert_eq!(c.dir(), mid);
        let lim = c.limit();
        assert_eq!(lim, Some(8000));
        assert_eq!(
            c.read(lim, 0),
            Some(Figures {
                current: 5000,
                working_set: Some(4000),
                limit: Some(8000),
                swap: Some(12)
            })
        );
        put(&mid, "memory.current", "6000\n");
        assert_eq!(c.read(lim, 0).unwrap().current, 6000, "re-read each poll");
        // memory.stat only over the threshold: 6000 is 75 % of 8000.
        assert_eq!(c.read(lim, 75).unwrap().working_set, None);
        assert_eq!(c.read(lim, 74).unwrap().working_set, Some(5000));
        // No limit anywhere: the leaf is read.
        put(&mid, "memory.max", "max\n");
        put(&mid, "memory.high", "max\n");
        let mut c = CgroupMemory::open_chain(Version::V2, &dirs).unwrap();
        assert_eq!(c.dir(), leaf);
        assert_eq!(c.limit(), None);
        assert_eq!(c.read(None, 0).unwrap().working_set, None);
        // v1: memsw counts memory and swap.
        put(&leaf, "memory.usage_in_bytes", "700\n");
        put(&leaf, "memory.limit_in_bytes", "1000\n");
        put(&leaf, "memory.memsw.usage_in_bytes", "750\n");
        put(&leaf, "memory.stat", "total_inactive_file 100\n");
        let mut c = CgroupMemory::open_chain(Version::V1, &dirs).unwrap();
        let lim = c.limit();
        assert_eq!(
            c.read(lim, 0),
            Some(Figures {
                current: 700,
                working_set: Some(600),
                limit: Some(1000),
                swap: Some(50)
            })
        );
        let err = CgroupMemory::open_chain(Version::V2, &[t.path().join("none")]).unwrap_err();
        assert!(err.contains("memory.current"), "{err}");
    }
}
