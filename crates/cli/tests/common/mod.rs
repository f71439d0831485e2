//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod collect;
pub mod proguard;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The project root.
/// An incident's `runningInfo.javaThreads` (the agent's list of the process's Java threads) as
/// (id, name) pairs, checked: one entry per thread id, and the agent's own thread, `oomguard`,
/// among them.
pub fn java_threads(running_info: &serde_json::Value) -> Vec<(i64, String)> {
    let list = running_info["javaThreads"]
        .as_array()
        .unwrap_or_else(|| panic!("no javaThreads: {running_info:#}"));
    let threads: Vec<(i64, String)> = list
        .iter()
        .map(|t| match (t["id"].as_i64(), t["name"].as_str()) {
            (Some(id), Some(name)) => (id, name.to_string()),
            _ => panic!("not {{id, name}}: {t}"),
        })
        .collect();
    let mut ids: Vec<i64> = threads.iter().map(|t| t.0).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids.len(),
        threads.len(),
        "one entry per thread: {threads:?}"
    );
    assert!(
        threads.iter().any(|t| t.1 == "oomguard"),
        "the agent's own thread is named: {threads:?}"
    );
    threads
}

/// The id of thread `name` in `threads` (from [`java_threads`]).
pub fn java_thread_id(threads: &[(i64, String)], name: &str) -> i64 {
    threads
        .iter()
        .find(|t| t.1 == name)
        .unwrap_or_else(|| panic!("no thread {name:?} in {threads:?}"))
        .0
}

/// The workspace's root (this crate is `crates/cli`).
pub fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
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

/// The Java facade's sources: every `java/dev/oomguard/*.java` (not `testing/`), in name order.
pub fn facade_sources() -> Vec<PathBuf> {
    let dir = root().join("java/dev/oomguard");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "java"))
        .collect();
    v.sort();
    v
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
    // One maker at a time in this process: two tests of one binary asking for the same dump
    // wrote the same temporary file (named by the process id) from two JVMs at once, and one
    // analysed the file the other was still writing into (a clean clone's first run, where no
    // cached dump exists yet).
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MAKING.lock().unwrap_or_else(|p| p.into_inner());
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

/// A temporary directory on tmpfs when there is one (fsync is free there: for tests about
/// process crashes, not power loss), else under the system temp dir.
pub fn fast_tmp() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}

/// A free TCP port on 127.0.0.1 (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A TCP relay on 127.0.0.1 to `target`. While `cutting` is set, each connection is cut once
/// `cut_after` bytes of requests have passed. Each piece of up to 64 KiB client → server waits
/// `pause` first (a slow link). Returns the relay's port; it runs until the test ends.
pub fn relay(
    target: std::net::SocketAddr,
    cut_after: u64,
    cutting: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pause: std::time::Duration,
) -> u16 {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::atomic::Ordering;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut client) = c else { return };
            let Ok(mut server) = TcpStream::connect(target) else {
                continue;
            };
            let cutting = cutting.clone();
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s2, &mut c2);
                let _ = c2.shutdown(Shutdown::Both);
            });
            std::thread::spawn(move || {
                let mut n = 0u64;
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let k = match client.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(k) => k,
                    };
                    let k = if cutting.load(Ordering::SeqCst) {
                        (k as u64).min(cut_after.saturating_sub(n)) as usize
                    } else {
                        k
                    };
                    if !pause.is_zero() {
                        std::thread::sleep(pause);
                    }
                    if k == 0 || server.write_all(&buf[..k]).is_err() {
                        break;
                    }
                    n += k as u64;
                }
                let _ = server.shutdown(Shutdown::Both);
                let _ = client.shutdown(Shutdown::Both);
            });
        }
    });
    port
}

/// `target/tus-server/` with `@tus/server` and `@tus/file-store` installed (by
/// `setup_tus_server` in scripts/lib/setup.sh, run here if needed).
pub fn tus_server_dir() -> PathBuf {
    let dir = root().join("target/tus-server");
    if !dir.join("node_modules/@tus/server/package.json").exists()
        || !dir
            .join("node_modules/@tus/file-store/package.json")
            .exists()
    {
        let st = Command::new("bash")
            .arg("-c")
            .arg("source scripts/lib/setup.sh && setup_tus_server")
            .current_dir(root())
            .status()
            .expect("bash runs");
        assert!(st.success(), "setup_tus_server failed");
    }
    std::fs::copy(
        root().join("crates/cli/tests/tus-server/server.mjs"),
        dir.join("server.mjs"),
    )
    .unwrap();
    dir
}
/// The directory holding `liboomguard.so` for this test run (`target/debug`). `cargo test`
/// builds the library as an rlib only, so the cdylib is built here (once per test process, same
/// profile and target dir): a stale or missing `.so` would test old code.
pub fn cdylib_dir() -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    let bin = oomguard_bin();
    let dir = bin.parent().expect("target dir").to_path_buf();
    BUILT.call_once(|| {
        let mut c = Command::new(env!("CARGO"));
        // The tests' library carries the test-only exports (jni::probe).
        c.args([
            "build",
            "-p",
            "oomguard",
            "--lib",
            "--quiet",
            "--features",
            "test-probe",
        ])
        .current_dir(root());
        if dir.ends_with("release") {
            c.arg("--release");
        }
        let st = c.status().expect("cargo runs");
        assert!(st.success(), "cargo build --lib failed");
    });
    assert!(
        dir.join("liboomguard.so").exists(),
        "no liboomguard.so in {}",
        dir.display()
    );
    dir
}

/// Compile the Java facade and the test program `java/testapps/APP.java` once per test process
/// and program, into `target/test-java/APP-PID`; returns that classes directory.
pub fn test_app_classes(app: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<std::collections::BTreeMap<String, PathBuf>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(out) = built.get(app) {
        return out.clone();
    }
    let out = root().join(format!("target/test-java/{app}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut sources = facade_sources();
    sources.push(root().join(format!("java/testapps/{app}.java")));
    let refs: Vec<&Path> = sources.iter().map(|p| p.as_path()).collect();
    javac(&refs, &out);
    built.insert(app.to_string(), out.clone());
    out
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
    let limits: Vec<String> = nofile.iter().map(|n| format!("--nofile={n}:{n}")).collect();
    run_leaky_limited(jvm_args, &limits, mode, policy, key, seconds, env)
}

/// [`run_leaky_jvm`] under `prlimit LIMITS` (e.g. `--fsize=N`; none: no prlimit).
pub fn run_leaky_limited(
    jvm_args: &[&str],
    limits: &[String],
    mode: &str,
    policy: Option<&str>,
    key: Option<&str>,
    seconds: u32,
    env: &[(&str, &str)],
) -> LeakyRun {
    let classes = test_app_classes("LeakyApp");
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
    let mut cmd = if limits.is_empty() {
        Command::new("java")
    } else {
        let mut c = Command::new("prlimit");
        c.args(limits).arg("java");
        c
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
