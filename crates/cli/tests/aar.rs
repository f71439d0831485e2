//! Issue 41, "an AAR": `scripts/build-android.sh --java-only` builds the AAR's Java part, and its
//! layout is what an Android build reads: `classes.jar` (every facade class, Java 8 bytecode:
//! class-file major version 52, and nothing from `testing/`), `AndroidManifest.xml` (package
//! `dev.oomguard`, minSdk 21), `proguard.txt` (the consumer rules, as in the tree), and no
//! `jni/` (no NDK here: the script says so when asked for the native part).

mod common;

use std::path::Path;
use std::process::Command;

/// Unpack zip `file` into `dir` with the JDK's `jar` (`jar xf` unpacks into the current dir).
fn unpack(file: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let st = Command::new("jar")
        .arg("xf")
        .arg(file)
        .current_dir(dir)
        .status()
        .expect("jar runs");
    assert!(st.success(), "jar xf {}", file.display());
}

fn files(dir: &Path, base: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, base, out);
        } else {
            out.push(p.strip_prefix(base).unwrap().display().to_string());
        }
    }
    out.sort();
}

#[test]
fn the_aar_holds_java_8_classes_the_manifest_and_the_consumer_rules() {
    let root = common::root();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("android");
    let o = Command::new("bash")
        .arg(root.join("scripts/build-android.sh"))
        .arg("--java-only")
        .arg("--out")
        .arg(&out)
        .output()
        .expect("bash runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let aar = work.path().join("aar");
    unpack(&out.join("oomguard.aar"), &aar);
    let mut top = Vec::new();
    files(&aar, &aar, &mut top);
    assert_eq!(top, ["AndroidManifest.xml", "classes.jar", "proguard.txt"]);

    let manifest = std::fs::read_to_string(aar.join("AndroidManifest.xml")).unwrap();
    assert!(manifest.contains(r#"package="dev.oomguard""#), "{manifest}");
    assert!(
        manifest.contains(r#"android:minSdkVersion="21""#),
        "{manifest}"
    );
    assert_eq!(
        std::fs::read(aar.join("proguard.txt")).unwrap(),
        std::fs::read(root.join("java/dev/oomguard/proguard.txt")).unwrap()
    );

    let classes = work.path().join("classes");
    unpack(&aar.join("classes.jar"), &classes);
    let mut names = Vec::new();
    files(&classes, &classes, &mut names);
    for want in [
        "dev/oomguard/OomGuard.class",
        "dev/oomguard/OomGuard$ExitInfoSource.class",
        "dev/oomguard/Keep.class",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    // One class per facade source at least, and only the facade's.
    let sources = common::facade_sources().len();
    assert!(names.len() >= sources, "{names:?}");
    for n in &names {
        assert!(
            n.starts_with("dev/oomguard/") && !n.starts_with("dev/oomguard/testing/"),
            "{n}"
        );
        assert!(n.ends_with(".class"), "{n}");
        let b = std::fs::read(classes.join(n)).unwrap();
        assert_eq!(&b[..4], &[0xca, 0xfe, 0xba, 0xbe], "{n}");
        let major = u16::from_be_bytes([b[6], b[7]]);
        assert_eq!(
            major, 52,
            "{n}: class-file version {major}, not Java 8's 52"
        );
    }
}

/// Asked for the native part where there is no NDK, the script still builds the AAR, without
/// `jni/`, names each thing missing, and with `--require-native` fails.
#[test]
fn without_an_ndk_the_script_says_what_is_missing() {
    let ndk = [
        "ANDROID_NDK_HOME",
        "ANDROID_NDK_ROOT",
        "ANDROID_HOME",
        "ANDROID_SDK_ROOT",
    ];
    if ndk.iter().any(|v| std::env::var_os(v).is_some())
        || Path::new("/usr/lib/android-sdk/ndk").exists()
    {
        eprintln!("skipped: an NDK may be here");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("android");
    let o = Command::new("bash")
        .arg(common::root().join("scripts/build-android.sh"))
        .arg("--require-native")
        .arg("--out")
        .arg(&out)
        .output()
        .expect("bash runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("INCOMPLETE AAR: no jni/"), "{err}");
    assert!(err.contains("an Android NDK"), "{err}");
    assert!(out.join("oomguard.aar").exists());
    assert!(!out.join("aar/jni").exists());
}
