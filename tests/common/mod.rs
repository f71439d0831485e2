//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared` beside the checkout (or `$SHARED_DIR`).
pub fn shared_dir() -> PathBuf {
    std::env::var_os("SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("..").join("shared"))
}

/// Every fixture dump in `../shared/fixtures/hprof/`, sorted.
pub fn fixtures() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for sub in ["android", "jvm"] {
        let d = shared_dir().join("fixtures/hprof").join(sub);
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "hprof") {
                v.push(p);
            }
        }
    }
    v.sort();
    assert!(!v.is_empty(), "no fixtures found under {}", shared_dir().display());
    v
}

pub fn fixture(rel: &str) -> PathBuf {
    shared_dir().join("fixtures/hprof").join(rel)
}

/// The `oomguard` binary cargo built for this test run.
pub fn oomguard_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_oomguard"))
}

/// Compile Java sources into `out` with the machine's javac.
pub fn javac(sources: &[&Path], out: &Path) {
    std::fs::create_dir_all(out).unwrap();
    let st = Command::new("javac")
        .arg("-d")
        .arg(out)
        .args(sources)
        .status()
        .expect("javac runs");
    assert!(st.success(), "javac failed");
}

/// Make a real Java 17 heap dump of about `mb` MB of live data with `marker` planted, cached
/// by (mb, marker) under `target/test-dumps/`.
pub fn java_dump(mb: u32, marker: &str) -> PathBuf {
    let dir = root().join("target/test-dumps");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("makedump-{mb}-{marker}.hprof"));
    if out.exists() {
        return out;
    }
    let classes = dir.join(format!("classes-{}", std::process::id()));
    javac(&[&root().join("java/tools/MakeDump.java")], &classes);
    let tmp = dir.join(format!("makedump-{mb}-{marker}.{}.tmp.hprof", std::process::id()));
    let st = Command::new("java")
        .arg("-Xmx1g")
        .arg("-cp")
        .arg(&classes)
        .arg("MakeDump")
        .arg(&tmp)
        .arg(mb.to_string())
        .arg(marker)
        .status()
        .expect("java runs");
    assert!(st.success(), "MakeDump failed");
    std::fs::rename(&tmp, &out).unwrap();
    let _ = std::fs::remove_dir_all(&classes);
    out
}
