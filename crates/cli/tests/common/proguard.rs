//! Debian's ProGuard 6.2 (`proguard`, the rule language R8 reads) on test programs: shrinks and
//! obfuscates a classes directory with the facade's consumer rules (`java/dev/oomguard/
//! proguard.txt`), with none, or with only AGP's native-method rule, and writes the mapping.
//! Each (name, rules) jar is made once per test process and shared by the tests that run it.
//!
//! ProGuard 6.2 reads class files up to Java 13: the inputs are compiled with `--release 8`
//! (what an AAR's `classes.jar` carries) and the JDK's own classes, which ProGuard needs as the
//! library the program extends, are copied out of the running JDK with their version lowered
//! (`tests/java/proguard/JdkLibrary.java`).

use super::{facade_sources, root};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Which consumer rules the minified build gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rules {
    /// `java/dev/oomguard/proguard.txt`, as the AAR ships it.
    Shipped,
    /// None at all.
    Nothing,
    /// Only AGP's default `-keepclasseswithmembernames class * { native <methods>; }`.
    AgpNative,
}

/// AGP's default rule for native methods (proguard-android-optimize.txt).
pub const AGP_NATIVE_RULE: &str =
    "-keepclasseswithmembernames,includedescriptorclasses class * {\n    native <methods>;\n}\n";

/// A minified build: the jar, ProGuard's mapping (original -> obfuscated) and the library jar
/// of Android stand-ins it runs with (not minified: on a phone they are the framework's).
#[derive(Clone, Debug)]
pub struct Minified {
    pub jar: PathBuf,
    pub mapping: PathBuf,
    pub android: PathBuf,
}

impl Minified {
    /// The class path to run it: the jar and the Android stand-ins.
    pub fn class_path(&self) -> String {
        format!("{}:{}", self.jar.display(), self.android.display())
    }

    /// The obfuscated name of class `original` (itself when kept).
    pub fn class(&self, original: &str) -> String {
        let text = std::fs::read_to_string(&self.mapping).unwrap();
        text.lines()
            .filter(|l| !l.starts_with(' ') && !l.starts_with('#'))
            .find_map(|l| {
                let (from, to) = l.strip_suffix(':')?.split_once(" -> ")?;
                (from == original).then(|| to.to_string())
            })
            .unwrap_or_else(|| panic!("{original} is not in {}", self.mapping.display()))
    }
}

/// Whether Debian's `proguard` is installed (scripts/lib/setup.sh installs it).
pub fn available() -> bool {
    // Without arguments it prints its version and usage, and exits 0.
    Command::new("proguard")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("ProGuard, version"))
}

fn work_dir() -> PathBuf {
    let d = root().join(format!("target/test-proguard/{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// javac `--release 8` of `sources` into `out`, with `class_path` to compile against.
pub fn javac8(sources: &[PathBuf], class_path: Option<&Path>, out: &Path) {
    std::fs::create_dir_all(out).unwrap();
    let mut c = Command::new("javac");
    c.args(["--release", "8", "-nowarn", "-d"]).arg(out);
    if let Some(cp) = class_path {
        c.arg("-cp").arg(cp);
    }
    let st = c.args(sources).status().expect("javac runs");
    assert!(st.success(), "javac --release 8 failed");
}

fn jar(dir: &Path, out: &Path) {
    let st = Command::new("jar")
        .arg("cf")
        .arg(out)
        .arg("-C")
        .arg(dir)
        .arg(".")
        .status()
        .expect("jar runs");
    assert!(st.success(), "jar failed");
}

/// The running JDK's `java.base`, `java.management` and `jdk.management` as a library jar
/// ProGuard 6.2 reads (27 MB), made once per JDK (named by a hash of `java -version`) and
/// shared by test processes under `target/test-proguard/`.
pub fn jdk_library() -> PathBuf {
    static MADE: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = made.as_ref() {
        return p.clone();
    }
    let version = Command::new("java")
        .arg("-version")
        .output()
        .expect("java runs");
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(&version.stderr, &mut h);
    let out = root().join(format!(
        "target/test-proguard/jdk-library-{:016x}.jar",
        std::hash::Hasher::finish(&h)
    ));
    if !out.exists() {
        let work = work_dir();
        let tool = work.join("jdk-tool");
        super::javac(
            &[&root().join("crates/cli/tests/java/proguard/JdkLibrary.java")],
            &tool,
        );
        // Written aside, then renamed: another test process may be making it too.
        let tmp = work.join("jdk-library.jar");
        let st = Command::new("java")
            .arg("-cp")
            .arg(&tool)
            .arg("JdkLibrary")
            .arg(&tmp)
            .args(["java.base", "java.management", "jdk.management"])
            .status()
            .expect("java runs");
        assert!(st.success(), "JdkLibrary failed");
        std::fs::rename(&tmp, &out).unwrap();
    }
    *made = Some(out.clone());
    out
}

/// The Android stand-ins of `tests/java/leakapp` (android.*, androidx.*, libcore.*) as a jar:
/// the library an app is minified against and runs with.
pub fn android_library() -> PathBuf {
    static MADE: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = made.as_ref() {
        return p.clone();
    }
    let base = root().join("crates/cli/tests/java/leakapp");
    let mut sources = Vec::new();
    for top in ["android", "androidx", "libcore"] {
        collect_java(&base.join(top), &mut sources);
    }
    let work = work_dir();
    let classes = work.join("android-classes");
    javac8(&sources, None, &classes);
    let out = work.join("android.jar");
    jar(&classes, &out);
    *made = Some(out.clone());
    out
}

fn collect_java(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_java(&p, out);
        } else if p.extension().is_some_and(|x| x == "java") {
            out.push(p);
        }
    }
    out.sort();
}

/// The facade and `app_sources` compiled for Java 8 and minified with `rules`, keeping the
/// `main` of each class in `mains` (an app's entry points), once per (name, rules) and process.
/// `app_sources` compile against the Android stand-ins; `extra` is more configuration (e.g.
/// `-dontoptimize`).
pub fn minify(
    name: &str,
    app_sources: &[PathBuf],
    mains: &[&str],
    rules: Rules,
    extra: &str,
) -> Minified {
    static MADE: Mutex<BTreeMap<(String, Rules), Minified>> = Mutex::new(BTreeMap::new());
    let key = (name.to_string(), rules);
    // Held while building: two tests asking for one jar wait for one build.
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(m) = made.get(&key) {
        return m.clone();
    }
    let android = android_library();
    let jdk = jdk_library();
    let work = work_dir().join(format!("{name}-{rules:?}"));
    let _ = std::fs::remove_dir_all(&work);
    let classes = work.join("classes");
    let mut sources = facade_sources();
    sources.extend(app_sources.iter().cloned());
    javac8(&sources, Some(&android), &classes);
    let mut conf = format!(
        "-injars {}\n-outjars {}\n-libraryjars {}\n-libraryjars {}\n-printmapping {}\n",
        classes.display(),
        work.join("app.jar").display(),
        jdk.display(),
        android.display(),
        work.join("mapping.txt").display(),
    );
    // The app's own rules: its entry points, as an Android app's manifest keeps its components.
    for m in mains {
        conf.push_str(&format!(
            "-keep public class {m} {{ public static void main(java.lang.String[]); }}\n"
        ));
    }
    // ProGuard notes reflection it cannot resolve (the facade's reflective Android calls,
    // the JDK's copied classes): expected, and not what the test checks.
    conf.push_str("-dontnote\n");
    conf.push_str(extra);
    conf.push('\n');
    match rules {
        Rules::Shipped => {
            let shipped = root().join("java/dev/oomguard/proguard.txt");
            conf.push_str(&format!("-include {}\n", shipped.display()));
        }
        Rules::Nothing => {}
        Rules::AgpNative => conf.push_str(AGP_NATIVE_RULE),
    }
    let pro = work.join("rules.pro");
    std::fs::write(&pro, conf).unwrap();
    let out = Command::new("proguard")
        .arg(format!("@{}", pro.display()))
        .output()
        .expect("proguard runs (apt install proguard)");
    assert!(
        out.status.success(),
        "proguard failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let m = Minified {
        jar: work.join("app.jar"),
        mapping: work.join("mapping.txt"),
        android,
    };
    made.insert(key, m.clone());
    m
}
