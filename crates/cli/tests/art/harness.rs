//! Builds and runs the ART test runtime (see `tests/art/README.md`): Debian's ART 11
//! (`android-libart`), our core library assembled from `tests/art/core` with smali, our three
//! start-up JNI libraries and the launcher, all built into `target/art/<hash of the inputs>/`
//! once (another test process that finds that directory uses it; those of older inputs are
//! removed an hour after they were built).
//!
//! Included by the `tests/art_*.rs` tests with `#[path = "art/harness.rs"] mod harness;`, and
//! by `examples/art_dump_bench.rs`. The tests also include `tests/art/support.rs` (`#[path =
//! "art/support.rs"] mod support;`), what they share around a run: it needs `mod common;` and
//! cargo's variables for tests, which the example has not (`cargo test --all-targets` builds
//! the example with `cfg(test)` too, so that cannot tell them apart).
#![allow(dead_code)]

use serde_json::Value;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// libart and the libraries the launcher loads before it; smali; Python for the generator.
const NEEDED: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/android/libart.so.0",
    "/usr/lib/x86_64-linux-gnu/android/libnativeloader.so.0",
    "/usr/lib/p7zip/7z.so",
    "/usr/share/java/smali.jar",
];

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Whether this machine has what the ART tests need. Under CI (`CI` set) a missing piece is a
/// failure, since `scripts/test.sh` installs it (`setup_art`); elsewhere the test says why it
/// does not run and passes.
pub fn available(test: &str) -> bool {
    let mut missing: Vec<String> = NEEDED
        .iter()
        .filter(|p| !Path::new(p).exists())
        .map(|p| p.to_string())
        .collect();
    for tool in ["smali", "clang", "python3"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false);
        if !found {
            missing.push(tool.to_string());
        }
    }
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "{test}: the ART test runtime needs {} (scripts/lib/setup.sh: setup_art)",
        missing.join(", ")
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("SKIPPED {why}");
    false
}

/// Every file under `dir`, sorted, for hashing.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The built runtime: launcher, boot class path, JNI library directory, and the test apps' dex.
pub struct Runtime {
    pub dir: PathBuf,
}

impl Runtime {
    pub fn launcher(&self) -> PathBuf {
        self.dir.join("art-launch")
    }
    pub fn core_dex(&self) -> PathBuf {
        self.dir.join("core.dex")
    }
    pub fn app_dex(&self) -> PathBuf {
        self.dir.join("app.dex")
    }
    /// `android.os.Build$VERSION` with `SDK_INT` 35 (tests/art/app-api35), to be placed before
    /// `app.dex`: the agent then takes its API-35 dump sequence.
    pub fn api35_dex(&self) -> PathBuf {
        self.dir.join("app-api35.dex")
    }
    pub fn lib_dir(&self) -> PathBuf {
        self.dir.join("lib")
    }
}

/// Builds the runtime once per set of inputs (everything under `tests/art/`).
pub fn runtime() -> &'static Runtime {
    static ONCE: std::sync::OnceLock<Runtime> = std::sync::OnceLock::new();
    ONCE.get_or_init(build)
}

/// Removes the runtimes of earlier contents of `tests/art/` built more than an hour ago (a
/// test process still using one has had it that long).
fn prune(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let old = std::fs::metadata(e.path().join("done"))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(3600));
        if name.len() == 16 && name.chars().all(|c| c.is_ascii_hexdigit()) && old {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn build() -> Runtime {
    let src = root().join("crates/cli/tests/art");
    let mut inputs = Vec::new();
    files_under(&src, &mut inputs);
    let mut h = DefaultHasher::new();
    for p in &inputs {
        p.strip_prefix(&src).expect("under src").hash(&mut h);
        std::fs::read(p).expect("read input").hash(&mut h);
    }
    let base = root().join("target/art");
    let dir = base.join(format!("{:016x}", h.finish()));
    if dir.join("done").exists() {
        return Runtime { dir };
    }
    prune(&base);
    let tmp = base.join(format!("build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(tmp.join("lib")).expect("mkdir target/art");

    // The core library: generated smali plus the hand-written classes, then the test apps.
    let smali_dir = tmp.join("core-smali");
    run(
        Command::new("python3")
            .arg(src.join("gen_core.py"))
            .arg(&smali_dir),
        "tests/art/gen_core.py",
    );
    let assemble = |from: &Path, to: &Path| {
        Command::new("smali")
            .args(["assemble", "-a", "30", "-o"])
            .arg(to)
            .arg(from)
            .stdin(Stdio::null())
            .output()
    };
    // smali is a JVM program: the two assemblies run side by side.
    std::thread::scope(|s| {
        let core = s.spawn(|| assemble(&smali_dir, &tmp.join("core.dex")));
        let app = assemble(&src.join("app"), &tmp.join("app.dex"));
        let api35 = assemble(&src.join("app-api35"), &tmp.join("app-api35.dex"));
        let core = core.join().expect("smali thread");
        for (what, out) in [("core", core), ("app", app), ("app-api35", api35)] {
            let out = out.unwrap_or_else(|e| panic!("smali: {e}"));
            assert!(
                out.status.success(),
                "smali ({what}) failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    });

    // The launcher and the three JNI libraries ART loads at start. jni.h: the JDK's (the ABI is
    // the same; Debian's ART packages ship no jni.h).
    let jdk = Path::new("/usr/lib/jvm/java-17-openjdk-amd64/include");
    let inc = [
        format!("-I{}", jdk.display()),
        format!("-I{}/linux", jdk.display()),
    ];
    run(
        Command::new("clang")
            .args(["-O1", "-Wall", "-Wextra", "-Werror"])
            .args(&inc)
            .arg("-o")
            .arg(tmp.join("art-launch"))
            .arg(src.join("launcher/launch.c"))
            .arg("-ldl"),
        "clang launch.c",
    );
    // libopenjdk.so's Runtime.nativeLoad calls libart's C++ JavaVMExt::LoadNativeLibrary; its
    // heap figures come from libart's C++ DDM report (heapinfo.cc).
    let mut cxx_objects = Vec::new();
    for name in ["nativeload", "heapinfo"] {
        let obj = tmp.join(format!("{name}.o"));
        run(
            Command::new("clang++")
                .args([
                    "-c",
                    "-fPIC",
                    "-O1",
                    "-std=c++17",
                    "-Wall",
                    "-Wextra",
                    "-Werror",
                ])
                .args(&inc)
                .arg("-o")
                .arg(&obj)
                .arg(src.join(format!("native/{name}.cc"))),
            &format!("clang++ {name}.cc"),
        );
        cxx_objects.push(obj);
    }
    for (lib, def) in [
        ("libjavacore.so", "-DLIB_JAVACORE"),
        ("libopenjdk.so", "-DLIB_OPENJDK"),
        ("libicu_jni.so", "-DLIB_ICU"),
    ] {
        let mut cc = Command::new("clang");
        cc.args(["-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror"])
            .arg("-Wno-unused-function")
            .args(&inc)
            .arg(def)
            .arg("-o")
            .arg(tmp.join("lib").join(lib))
            .arg(src.join("native/jnilib.c"));
        if lib == "libopenjdk.so" {
            cc.args(&cxx_objects).arg("-lstdc++");
        }
        run(&mut cc, &format!("clang {lib}"));
    }
    // The test programs' own libraries: ArtProbe's natives, and the dump child's fault
    // injector (LD_PRELOAD, tests/art_faults.rs).
    for (lib, src_file, libs) in [
        ("libartprobe.so", "native/artprobe.c", &[][..]),
        ("libchildfault.so", "native/childfault.c", &["-ldl"][..]),
    ] {
        run(
            Command::new("clang")
                .args(["-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror"])
                .args(&inc)
                .arg("-o")
                .arg(tmp.join("lib").join(lib))
                .arg(src.join(src_file))
                .args(libs),
            &format!("clang {lib}"),
        );
    }
    std::fs::write(tmp.join("done"), b"").expect("write done");
    if std::fs::rename(&tmp, &dir).is_err() {
        // Another process built the same inputs first: use its copy.
        let _ = std::fs::remove_dir_all(&tmp);
        assert!(dir.join("done").exists(), "no runtime in {}", dir.display());
    }
    Runtime { dir }
}

/// What one run of the launcher gave.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    /// ART's log (Debian's liblog writes to stderr) and the launcher's messages.
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// The JSON the app printed between `STATUS-BEGIN` and `STATUS-END` (`OomGuard.status()`);
    /// panics with [`Run::describe`] if there is none or it is not JSON.
    pub fn status(&self) -> Value {
        let why = self.describe();
        let text = self
            .stdout
            .split("STATUS-BEGIN\n")
            .nth(1)
            .and_then(|s| s.split("STATUS-END").next())
            .unwrap_or_else(|| panic!("no status\n{why}"));
        serde_json::from_str(text).unwrap_or_else(|e| panic!("status JSON: {e}\n{why}"))
    }

    /// The failure message's text: exit status, stdout, and ART's log.
    pub fn describe(&self) -> String {
        format!(
            "exit {:?} after {:?}\n--- stdout\n{}\n--- ART log (stderr)\n{}",
            self.code, self.elapsed, self.stdout, self.stderr
        )
    }

    /// The value of the last `NAME=VALUE` line on stdout.
    pub fn value(&self, name: &str) -> Option<i64> {
        let prefix = format!("{name}=");
        self.stdout
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
    }
}

/// Boots ART with the core library and the test apps on the boot class path, and runs
/// `main_class`'s `main`, killing it after `timeout`. `vm_options` are added (e.g. `-Xmx64m`);
/// `env` is set for the process, an `LD_LIBRARY_PATH` in it searched after our JNI libraries'
/// directory (`System.loadLibrary` finds libraries there, as in an app's native library
/// directory). ANDROID_DATA and the other roots are made under `work`.
pub fn launch(
    work: &Path,
    main_class: &str,
    vm_options: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> Run {
    launch_with(work, main_class, None, vm_options, env, timeout)
}

/// [`launch`] with `first_dex` on the boot class path before `app.dex` (its classes win).
pub fn launch_with(
    work: &Path,
    main_class: &str,
    first_dex: Option<&Path>,
    vm_options: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> Run {
    let rt = runtime();
    let mut boot = rt.core_dex().into_os_string();
    if let Some(d) = first_dex {
        boot.push(":");
        boot.push(d);
    }
    boot.push(":");
    boot.push(rt.app_dex());
    let mut lib_path = rt.lib_dir().into_os_string();
    for (_, v) in env.iter().filter(|(k, _)| *k == "LD_LIBRARY_PATH") {
        lib_path.push(":");
        lib_path.push(v);
    }
    let mut cmd = Command::new(rt.launcher());
    cmd.arg(work.join("android"))
        .arg(main_class)
        .args(["-Xnoimage-dex2oat", "-Xusejit:false", "-Xint"])
        .arg(format!("-Xbootclasspath:{}", boot.to_string_lossy()))
        .args(vm_options)
        .envs(env.iter().copied().filter(|(k, _)| *k != "LD_LIBRARY_PATH"))
        .env("LD_LIBRARY_PATH", lib_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::fs::create_dir_all(work.join("android")).expect("mkdir android root");
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn art-launch");
    let mut out_pipe = child.stdout.take().expect("stdout");
    let mut err_pipe = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out_pipe.read_to_end(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err_pipe.read_to_end(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait art-launch") {
            break Some(st);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let stdout = String::from_utf8_lossy(&out_t.join().expect("stdout reader")).into_owned();
    let mut stderr = String::from_utf8_lossy(&err_t.join().expect("stderr reader")).into_owned();
    if status.is_none() {
        stderr.push_str(&format!("\n(killed after {timeout:?})\n"));
    }
    Run {
        code: status.and_then(|s| s.code()),
        stdout,
        stderr,
        elapsed,
    }
}
