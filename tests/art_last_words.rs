//! The flight recorder's last words on ART 11: the dex facade installs its uncaught-exception
//! handler as the Java one does, an app dies of a real `OutOfMemoryError` on its main thread,
//! and the next launch reports the death with the error's class, message and thread.

mod common;
#[path = "art/harness.rs"]
mod harness;

use serde_json::Value;
use std::time::Duration;

#[test]
fn art_out_of_memory_error_is_reported_with_its_last_words() {
    if !harness::available("art_out_of_memory_error_is_reported_with_its_last_words") {
        return;
    }
    let lib = common::cdylib_dir();
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let data = work.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let policy = r#"{"poll_interval_ms": 100, "dump": {"keep_full": true}}"#;
    let opts = |heap: &str| {
        vec![
            heap.to_string(),
            format!("-Doomguard.data={}", data.display()),
            format!("-Doomguard.policy={policy}"),
        ]
    };
    let env = [("LD_LIBRARY_PATH", lib.to_str().unwrap())];
    let dying = opts("-Xmx32m");
    let dying: Vec<&str> = dying.iter().map(String::as_str).collect();
    let run = harness::launch(
        work.path(),
        "DyingMain",
        &dying,
        &env,
        Duration::from_secs(60),
    );
    let why = run.describe();
    assert_eq!(run.value("start"), Some(0), "{why}");
    assert_eq!(run.code, Some(3), "main must die of the error\n{why}");
    assert!(run.stderr.contains("java.lang.OutOfMemoryError"), "{why}");

    let next = opts("-Xmx64m");
    let next: Vec<&str> = next.iter().map(String::as_str).collect();
    let run = harness::launch(
        work.path(),
        "AgentMain",
        &next,
        &env,
        Duration::from_secs(60),
    );
    let why = run.describe();
    assert_eq!(run.code, Some(0), "{why}");
    let status = run
        .stdout
        .split("STATUS-BEGIN\n")
        .nth(1)
        .and_then(|s| s.split("STATUS-END").next())
        .unwrap_or_else(|| panic!("no status\n{why}"));
    let status: Value = serde_json::from_str(status).unwrap_or_else(|e| panic!("{e}\n{why}"));
    assert_eq!(
        status["previous_death"]["action"], "reported",
        "{status:#}\n{why}"
    );
    let deaths: Vec<Value> = std::fs::read_dir(data.join("spool/incidents"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("incident.json")).ok())
        .map(|b| serde_json::from_slice::<Value>(&b).unwrap()["body"].clone())
        .filter(|b| b["runningInfo"]["kind"] == "death")
        .collect();
    assert_eq!(deaths.len(), 1, "{deaths:#?}");
    let w = &deaths[0]["runningInfo"]["lastWords"];
    assert_eq!(w["class"], "java.lang.OutOfMemoryError", "{:#}", deaths[0]);
    assert_eq!(w["thread"], "main", "{w:#}");
    let reason = deaths[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("after java.lang.OutOfMemoryError"),
        "{reason}"
    );
    println!("{reason}\nlast words: {w}");
}
