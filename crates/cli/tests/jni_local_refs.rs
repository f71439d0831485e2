//! The HotSpot dumper's JNI calls leave no local references behind: on the agent's thread,
//! attached for good, each would stay until the thread ends. Measured by the JVM itself:
//! `-Xcheck:jni` warns when the local references of a native frame exceed its capacity.

mod common;

use std::process::Command;

#[test]
fn the_hotspot_dumper_leaves_no_local_references() {
    let root = common::root();
    let classes = root.join(format!("target/test-classes-refs-{}", std::process::id()));
    common::javac(
        &[&root.join("java/dev/oomguard/testing/LocalRefs.java")],
        &classes,
    );
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("java")
        .args(["-Xcheck:jni", "-Xmx64m", "-cp"])
        .arg(&classes)
        .arg("dev.oomguard.testing.LocalRefs")
        .arg(common::cdylib_dir().join("liboomguard.so"))
        .arg(dir.path())
        .output()
        .expect("java runs");
    let _ = std::fs::remove_dir_all(&classes);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.contains("ok"), "{text}");
    assert!(
        !text.contains("JNI local refs"),
        "local references leaked:\n{text}"
    );
}
