//! What the ART tests (`tests/art_*.rs`) share around a run of the runtime of `harness.rs`: the
//! directories of one ([`Workdir`]), the agent's policy option, the spool's incidents and their
//! files, the planted Activity leak their reports must name, and the check that a kept dump's
//! mini file is its strip. Included by each of those tests beside `harness.rs`, as `mod
//! support;`; uses `tests/common`, which each of them includes as `mod common;`.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A temporary directory in this target's `CARGO_TARGET_TMPDIR`, removed when dropped.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir")
}

/// The directories of one run of a test app with the agent.
pub struct Workdir {
    /// The directory holding the `liboomguard.so` built for this test run
    /// (`common::cdylib_dir`).
    pub lib: PathBuf,
    /// A [`tempdir`], the `work` of [`launch`](crate::harness::launch) (ANDROID_DATA and the other
    /// roots go under it).
    pub work: tempfile::TempDir,
    /// The agent's data directory, `data` in `work`, made here.
    pub data: PathBuf,
}

impl Workdir {
    pub fn new() -> Workdir {
        let lib = crate::common::cdylib_dir();
        let work = tempdir();
        let data = work.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        Workdir { lib, work, data }
    }

    /// The `work` directory's path.
    pub fn path(&self) -> &Path {
        self.work.path()
    }

    /// `-Doomguard.data=DATA`: the test apps start the agent with `data` as its data directory.
    pub fn data_option(&self) -> String {
        format!("-Doomguard.data={}", self.data.display())
    }

    /// `LD_LIBRARY_PATH` set to `lib`, for [`launch`](crate::harness::launch)'s `env`: the app's
    /// `System.loadLibrary("oomguard")` finds the agent there.
    pub fn lib_env(&self) -> (&'static str, &str) {
        ("LD_LIBRARY_PATH", self.lib.to_str().unwrap())
    }
}

/// `-Doomguard.policy=POLICY`, POLICY being `config/policy.default.json` changed by `edit`.
pub fn policy_option(edit: impl FnOnce(&mut Value)) -> String {
    let path = crate::common::root().join("config/policy.default.json");
    let mut policy: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut policy);
    format!("-Doomguard.policy={policy}")
}

/// The incident directories in the spool of the agent's data directory `data`, sorted (oldest
/// first: their names start with the time); none if the spool has no `incidents` directory.
pub fn incidents(data: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data.join("spool/incidents"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The JSON file `name` in the incident directory `dir` (`incident.json`, `report.json`, or a
/// collector's `meta.json`), parsed; panics naming the file if it cannot be read or parsed.
pub fn incident_json(dir: &Path, name: &str) -> Value {
    let path = dir.join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `incident.json`'s `body` in the incident directory `dir`.
pub fn incident_body(dir: &Path) -> Value {
    incident_json(dir, "incident.json")["body"].clone()
}

/// The `Activity Leak` entry of a report's `gcPaths`, checked: its class is the test apps'
/// `com.example.leaky.MainActivity`, and its path starts at the static list they leak the
/// destroyed Activities into, `com.example.leaky.Registry.sListeners`.
pub fn activity_leak(report: &Value) -> &Value {
    let leak = report["gcPaths"]
        .as_array()
        .unwrap_or_else(|| panic!("no gcPaths: {report:#}"))
        .iter()
        .find(|p| p["leakReason"] == "Activity Leak")
        .unwrap_or_else(|| panic!("no Activity Leak: {report:#}"));
    assert_eq!(
        leak["className"], "com.example.leaky.MainActivity",
        "{leak:#}"
    );
    assert_eq!(
        leak["path"][0]["reference"], "com.example.leaky.Registry.sListeners",
        "{leak:#}"
    );
    leak
}

/// [`activity_leak`] with the 4 instances that `AgentMain` and `DumpLoopMain` leak.
pub fn planted_activity_leak(report: &Value) -> &Value {
    let leak = activity_leak(report);
    assert_eq!(leak["instanceCount"], 4, "{leak:#}");
    leak
}

/// Checks that the incident directory `dir`'s `mini.hprof` (written by the tee as libart
/// writes `dump.hprof`) is byte for byte what `oomguard strip --level arrays` makes of its
/// `dump.hprof`; the strip writes to `stripped`.
pub fn assert_mini_is_strip_of_full(dir: &Path, stripped: &Path) {
    let out = Command::new(crate::common::oomguard_bin())
        .args(["strip", "--level", "arrays"])
        .arg(dir.join("dump.hprof"))
        .arg("-o")
        .arg(stripped)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: oomguard strip: {out:?}",
        dir.display()
    );
    assert!(
        std::fs::read(stripped).unwrap() == std::fs::read(dir.join("mini.hprof")).unwrap(),
        "{}: the tee's mini file differs from oomguard strip of the full dump",
        dir.display()
    );
}
