//! A heap dump written by ART 11 itself (`art::hprof::DumpHeap`, reached through its
//! `VMDebug.dumpHprofData` native) in the test runtime of `tests/art`, opened by
//! `oomguard analyze`: the planted Activity leak and its path come out of a real ART-era dump.

mod common;
#[path = "art/harness.rs"]
mod harness;
#[path = "art/support.rs"]
mod support;

use std::process::Command;

/// `DumpMain` (tests/art/app/DumpMain.smali) keeps 8 destroyed `MainActivity` objects of 1 MiB
/// each in `Registry.sListeners` (a static `Object[]`) and dumps the heap in-process.
#[test]
fn art_in_process_dump_opens_in_analyze_with_the_activity_leak() {
    if !harness::available("art_in_process_dump_opens_in_analyze_with_the_activity_leak") {
        return;
    }
    let work = support::tempdir();
    let dump = work.path().join("art.hprof");
    let run = harness::launch(
        work.path(),
        "DumpMain",
        &["-Xmx64m", &format!("-Doomguard.dump={}", dump.display())],
        &[],
        std::time::Duration::from_secs(60),
    );
    let why = run.describe();
    assert_eq!(run.code, Some(0), "{why}");
    assert!(run.stdout.contains("dumped=1"), "{why}");
    assert!(run.stderr.contains("hprof: heap dump completed"), "{why}");
    let bytes = std::fs::read(&dump).unwrap_or_else(|e| panic!("{}: {e}\n{why}", dump.display()));
    assert!(
        bytes.starts_with(b"JAVA PROFILE 1.0.3\0"),
        "ART writes the Android flavour of HPROF"
    );
    // 8 MiB of leaked buffers are in it.
    assert!(bytes.len() > 8 << 20, "{} bytes", bytes.len());

    let report = work.path().join("report.json");
    let out = Command::new(common::oomguard_bin())
        .arg("analyze")
        .arg(&dump)
        .arg("-o")
        .arg(&report)
        .output()
        .expect("run oomguard analyze");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Activity Leak"), "{text}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let leak = support::activity_leak(&report);
    assert_eq!(leak["instanceCount"], 8, "{leak:#}");
    let leaked = report["leakObjects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["leakReason"] == "Activity Leak" && o["extDetail"] == "mDestroyed is true")
        .count();
    assert_eq!(leaked, 8, "{report:#}");
}
