//! A real child cgroup for a test's process: memory or pids limited. Included by the tests that
//! need it (`#[path = "common/cgroup.rs"] mod cgroup;`).
//!
//! cgroup v2 where its mount offers the controller (enabled in the root's `subtree_control`
//! if needed: the root is exempt from the no-internal-processes rule, so the child is made at
//! the mount's root); else the v1 hierarchy of that controller, the child made under this
//! process's own cgroup there (a hybrid host such as this project's VM, whose memory and pids
//! controllers are v1). `Err` says why neither is possible (not root, no controller, read-only).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

pub struct Cgroup {
    pub dir: PathBuf,
    pub version: Version,
}

fn mounts() -> Vec<(String, PathBuf, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split(' ').nth(4)?;
            let mut r = right.split(' ');
            let fs = r.next()?.to_string();
            let opts = r.nth(1).unwrap_or("").to_string();
            Some((fs, PathBuf::from(point.replace("\\040", " ")), opts))
        })
        .collect()
}

fn write(p: &Path, v: &str) -> Result<(), String> {
    std::fs::write(p, v).map_err(|e| format!("{}: {e}", p.display()))
}

impl Cgroup {
    /// A new child cgroup with `controller` ("memory" or "pids") available.
    pub fn new(controller: &str, name: &str) -> Result<Cgroup, String> {
        let leaf = format!("oomguard-test-{}-{name}", std::process::id());
        let mut why = Vec::new();
        for (fs, point, _) in mounts().iter().filter(|m| m.0 == "cgroup2") {
            let avail =
                std::fs::read_to_string(point.join("cgroup.controllers")).unwrap_or_default();
            if !avail.split_whitespace().any(|c| c == controller) {
                why.push(format!(
                    "{fs} at {} does not offer {controller} (its controllers: {:?})",
                    point.display(),
                    avail.trim()
                ));
                continue;
            }
            let sub = point.join("cgroup.subtree_control");
            let on = std::fs::read_to_string(&sub).unwrap_or_default();
            if !on.split_whitespace().any(|c| c == controller) {
                if let Err(e) = write(&sub, &format!("+{controller}")) {
                    why.push(e);
                    continue;
                }
            }
            let dir = point.join(&leaf);
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    return Ok(Cgroup {
                        dir,
                        version: Version::V2,
                    })
                }
                Err(e) => why.push(format!("{}: {e}", dir.display())),
            }
        }
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let path = own.lines().find_map(|l| {
            let mut it = l.splitn(3, ':');
            let (_, ctrls, p) = (it.next()?, it.next()?, it.next()?);
            ctrls
                .split(',')
                .any(|c| c == controller)
                .then(|| p.to_string())
        });
        let v1 = mounts()
            .into_iter()
            .find(|(fs, _, opts)| fs == "cgroup" && opts.split(',').any(|o| o == controller));
        match (v1, path) {
            (Some((_, point, _)), Some(p)) => {
                let dir = point.join(p.trim_start_matches('/')).join(&leaf);
                match std::fs::create_dir(&dir) {
                    Ok(()) => Ok(Cgroup {
                        dir,
                        version: Version::V1,
                    }),
                    Err(e) => {
                        why.push(format!("{}: {e}", dir.display()));
                        Err(why.join("; "))
                    }
                }
            }
            _ => {
                why.push(format!(
                    "no v1 hierarchy holds {controller} for this process"
                ));
                Err(why.join("; "))
            }
        }
    }

    pub fn set(&self, file: &str, value: &str) -> Result<(), String> {
        write(&self.dir.join(file), value)
    }

    /// Limit its memory to `bytes` (v2 `memory.max`, v1 `memory.limit_in_bytes`).
    pub fn limit_memory(&self, bytes: u64) -> Result<(), String> {
        match self.version {
            Version::V2 => self.set("memory.max", &bytes.to_string()),
            Version::V1 => self.set("memory.limit_in_bytes", &bytes.to_string()),
        }
    }

    /// A command that runs `program` inside this cgroup (the shell moves itself in, then
    /// execs it, so every page and thread of the program is charged here).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(self.dir.join("cgroup.procs"))
            .arg(program);
        c
    }
}

impl Cgroup {
    /// SIGKILL every process left in the cgroup (all the test's own: the program it ran and
    /// whatever that started, such as the agent's analyser).
    pub fn kill_all(&self) {
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let _ = Command::new("kill").args(["-9", pid]).status();
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill_all();
        // Killed processes leave the cgroup once reaped: retry meanwhile.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        eprintln!("could not remove the test cgroup {}", self.dir.display());
    }
}
