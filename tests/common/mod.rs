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
    assert!(
        !v.is_empty(),
        "no fixtures found under {}",
        shared_dir().display()
    );
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
    let tmp = dir.join(format!(
        "makedump-{mb}-{marker}.{}.tmp.hprof",
        std::process::id()
    ));
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

/// The directory holding the `liboomguard.so` cargo built for this test run (`target/debug`).
pub fn cdylib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe path");
    // target/debug/deps/<test> → target/debug
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf();
    assert!(
        dir.join("liboomguard.so").exists(),
        "no liboomguard.so in {}",
        dir.display()
    );
    dir
}

/// Compile the Java facade and the leaky test program once per test process; returns the
/// classes directory.
pub fn agent_classes() -> PathBuf {
    static ONCE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let out = root().join(format!("target/test-java/agent-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        javac(
            &[
                &root().join("java/dev/oomguard/OomGuard.java"),
                &root().join("java/testapps/LeakyApp.java"),
            ],
            &out,
        );
        out
    })
    .clone()
}

/// What one run of `LeakyApp` printed.
pub struct LeakyRun {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The JSON `OomGuard.status()` returned at the end.
    pub status: serde_json::Value,
    pub data_dir: PathBuf,
}

/// Run `java -Xmx256m LeakyApp MODE DATA_DIR POLICY KEY SECONDS` on the real JVM with the agent.
/// `nofile` runs it under `prlimit --nofile=N:N`; `env` adds environment variables.
pub fn run_leaky(
    mode: &str,
    policy: Option<&str>,
    key: Option<&str>,
    seconds: u32,
    nofile: Option<u32>,
    env: &[(&str, &str)],
) -> LeakyRun {
    run_leaky_jvm(&[], mode, policy, key, seconds, nofile, env)
}

/// [`run_leaky`] with extra JVM options (e.g. `-Xcheck:jni`).
pub fn run_leaky_jvm(
    jvm_args: &[&str],
    mode: &str,
    policy: Option<&str>,
    key: Option<&str>,
    seconds: u32,
    nofile: Option<u32>,
    env: &[(&str, &str)],
) -> LeakyRun {
    let classes = agent_classes();
    let work = tempfile::Builder::new()
        .prefix("oomguard-agent-")
        .tempdir()
        .unwrap()
        .keep();
    let data_dir = work.join("data");
    let policy_arg = match policy {
        Some(p) => {
            let f = work.join("policy.json");
            std::fs::write(&f, p).unwrap();
            f.display().to_string()
        }
        None => "-".to_string(),
    };
    let mut cmd = match nofile {
        Some(n) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={n}:{n}")).arg("java");
            c
        }
        None => Command::new("java"),
    };
    cmd.args(jvm_args)
        .arg("-XX:+UseG1GC")
        .arg("-Xmx256m")
        .arg(format!("-Djava.library.path={}", cdylib_dir().display()))
        .arg("-cp")
        .arg(&classes)
        .arg("LeakyApp")
        .arg(mode)
        .arg(&data_dir)
        .arg(policy_arg)
        .arg(key.unwrap_or("-"))
        .arg(seconds.to_string());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("java runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = stdout
        .split("STATUS-BEGIN\n")
        .nth(1)
        .and_then(|s| s.split("\nSTATUS-END").next())
        .unwrap_or("null");
    let status = serde_json::from_str(json).unwrap_or_else(|e| {
        panic!("status is not JSON ({e}): {json}\nstdout:\n{stdout}\nstderr:\n{stderr}")
    });
    LeakyRun {
        code: out.status.code(),
        stdout,
        stderr,
        status,
        data_dir,
    }
}
