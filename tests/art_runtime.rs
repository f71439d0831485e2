//! Debian's ART 11 (`android-libart`, API 30) booted with the test core library of
//! `tests/art/core` (see `tests/art/README.md`), the way an app process has it: the launcher
//! loads libart and the libraries it uses, calls `JNI_CreateJavaVM` image-less and interpreted,
//! and runs a static `main` from the boot class path.

mod common;
#[path = "art/harness.rs"]
mod harness;
#[path = "art/support.rs"]
mod support;

use std::time::Duration;

/// `Main` (tests/art/app/Main.smali) keeps 1000 objects holding 1 KiB arrays, churns through
/// 512 MiB of 256 KiB arrays in a 64 MiB heap (so allocation-time GCs must free them), walks
/// what it kept, and prints the heap figures `java.lang.Runtime` gives with a 16 MiB array live
/// (our libopenjdk.so's natives, from ART's DDM heap-info report: tests/art/native/heapinfo.cc).
#[test]
fn art_boots_and_runs_main_through_gcs() {
    if !harness::available("art_boots_and_runs_main_through_gcs") {
        return;
    }
    let work = support::tempdir();
    let run = harness::launch(
        work.path(),
        "Main",
        &["-Xmx64m"],
        &[],
        Duration::from_secs(60),
    );
    let why = run.describe();
    assert_eq!(run.code, Some(0), "{why}");
    assert!(run.stderr.contains("art-launch: VM created"), "{why}");
    // ART ran without a boot image, as the runtime here must.
    assert!(
        run.stderr
            .contains("Attempting to fall back to imageless running"),
        "{why}"
    );
    assert_eq!(run.value("kept"), Some(1000), "{why}");
    assert_eq!(run.value("corrupt"), Some(0), "{why}");
    // 512 MiB through a 64 MiB heap, the 1000 kept objects intact: the collector ran and moved
    // or kept them right. (ART logs a collection only when it is slow, so its log is no proof:
    // on a quiet machine it logs none of these.)
    assert_eq!(run.value("churned"), Some(512 << 20), "{why}");
    let max = run.value("max").expect("max");
    let total = run.value("total").expect("total");
    let free = run.value("free").expect("free");
    assert_eq!(max, 64 << 20, "maxMemory is -Xmx's growth limit\n{why}");
    assert!(
        total >= 1 << 20 && total <= max,
        "totalMemory {total} not within [1 MiB, max]\n{why}"
    );
    assert!(free >= 0 && free <= total, "freeMemory {free}\n{why}");
    // The 16 MiB array and the 1000 kept nodes (1 to 2 KiB each) are live as they are read.
    let used = total - free;
    assert!(
        used >= (16 << 20) + 1000 * 1024,
        "totalMemory - freeMemory {used} is less than what is live\n{why}"
    );
}

/// Without our core library the VM cannot even build the `NoClassDefFoundError` for
/// `java.lang.Object`: it must abort with that reason in the log the tests print, not hang or
/// exit quietly.
#[test]
fn art_without_core_library_reports_why() {
    if !harness::available("art_without_core_library_reports_why") {
        return;
    }
    let rt = harness::runtime();
    let work = support::tempdir();
    let out = std::process::Command::new(rt.launcher())
        .arg(work.path().join("android"))
        .arg("Main")
        .args(["-Xnoimage-dex2oat", "-Xusejit:false", "-Xint"])
        .arg(format!("-Xbootclasspath:{}", rt.app_dex().display()))
        .env("LD_LIBRARY_PATH", rt.lib_dir())
        .output()
        .expect("run art-launch");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("Runtime aborting") && stderr.contains("NoClassDefFoundError"),
        "the abort and its reason reach the log:\n{stderr}"
    );
}
