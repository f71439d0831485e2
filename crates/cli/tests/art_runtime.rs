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

/// `MonitorMain` (tests/art/app/MonitorMain.smali): `Object.wait()` blocks until another thread
/// calls `notifyAll` (ART's natives, not a body that returns at once), and a `synchronized`
/// method of the core library excludes: `Thread.start` of another thread stays blocked in
/// `ThreadGroup.add` while main holds the group's monitor, and goes through once it lets go.
/// (In dex, `declared-synchronized` locks nothing on a non-native method: the core's methods
/// must enter and exit the monitor themselves.)
#[test]
fn art_monitors_wait_notify_and_exclude() {
    if !harness::available("art_monitors_wait_notify_and_exclude") {
        return;
    }
    let work = support::tempdir();
    let run = harness::launch(
        work.path(),
        "MonitorMain",
        &["-Xmx64m"],
        &[],
        Duration::from_secs(60),
    );
    let why = run.describe();
    assert_eq!(run.code, Some(0), "{why}");
    assert_eq!(
        run.value("notified"),
        Some(1),
        "wait() returned before notifyAll\n{why}"
    );
    assert_eq!(
        run.value("started_while_held"),
        Some(0),
        "ThreadGroup.add ran while another thread held the group's monitor\n{why}"
    );
    assert_eq!(run.value("started_after_release"), Some(1), "{why}");
}

/// `DaemonsMain` (tests/art/app/DaemonsMain.smali) with the core library's daemons
/// (`java.lang.Daemons`, which ART starts at the end of its start-up): all 2000 dropped
/// finalizable objects get their `finalize()` run by the finalizer daemon, a `WeakReference`
/// comes off its queue through the reference-queue daemon, cleared, and the heap task daemon
/// runs the concurrent GCs that allocation requests: ART logs them (every GC is "long" with
/// `-XX:LongGCLogThreshold=0`) as
/// "Background concurrent copying GC" (without the daemon none of these happen: the requests
/// queue up and only allocation-time collections run). Then `Daemons.stop()`, which ART calls
/// when the runtime shuts down, ends the four daemon threads.
#[test]
fn art_daemons_finalize_enqueue_and_gc() {
    if !harness::available("art_daemons_finalize_enqueue_and_gc") {
        return;
    }
    let work = support::tempdir();
    let run = harness::launch(
        work.path(),
        "DaemonsMain",
        &["-Xmx64m", "-XX:LongGCLogThreshold=0"],
        &[],
        Duration::from_secs(90),
    );
    let why = run.describe();
    assert_eq!(run.code, Some(0), "{why}");
    assert_eq!(run.value("finalized"), Some(2000), "{why}");
    assert_eq!(run.value("weak_enqueued"), Some(1), "{why}");
    assert_eq!(run.value("weak_cleared"), Some(1), "{why}");
    assert!(
        run.stderr
            .contains("Background concurrent copying GC freed"),
        "no background GC in ART's log\n{why}"
    );
    // main and the four daemons, in the system group and its main group
    let threads = run.value("threads").unwrap_or(0);
    assert!(threads >= 5, "{why}");
    // Daemons.stop() (what ART calls at shutdown) ends all four.
    assert_eq!(run.value("after_stop"), Some(threads - 4), "{why}");
}
