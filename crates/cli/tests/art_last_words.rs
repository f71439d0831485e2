//! The flight recorder's last words on ART 11: the dex facade installs its uncaught-exception
//! handler as the Java one does, an app dies of a real `OutOfMemoryError` on its main thread,
//! and the next launch reports the death with the error's class, message and thread.

mod common;
#[path = "art/harness.rs"]
mod harness;
#[path = "art/support.rs"]
mod support;

use serde_json::Value;
use std::time::Duration;

#[test]
fn art_out_of_memory_error_is_reported_with_its_last_words() {
    if !harness::available("art_out_of_memory_error_is_reported_with_its_last_words") {
        return;
    }
    let w = support::Workdir::new();
    let policy = r#"{"poll_interval_ms": 100, "dump": {"keep_full": true}}"#;
    let data_opt = w.data_option();
    let policy_opt = format!("-Doomguard.policy={policy}");
    // Both launches share the data directory: the second reports the first's death.
    let launch = |main_class: &str, heap: &str| {
        harness::launch(
            w.path(),
            main_class,
            &[heap, data_opt.as_str(), policy_opt.as_str()],
            &[w.lib_env()],
            Duration::from_secs(60),
        )
    };
    let run = launch("DyingMain", "-Xmx32m");
    let why = run.describe();
    assert_eq!(run.value("start"), Some(0), "{why}");
    assert_eq!(run.code, Some(3), "main must die of the error\n{why}");
    assert!(run.stderr.contains("java.lang.OutOfMemoryError"), "{why}");

    let run = launch("AgentMain", "-Xmx64m");
    let why = run.describe();
    assert_eq!(run.code, Some(0), "{why}");
    let status = run.status();
    assert_eq!(
        status["previous_death"]["action"], "reported",
        "{status:#}\n{why}"
    );
    let deaths: Vec<Value> = support::incidents(&w.data)
        .iter()
        .map(|d| support::incident_body(d))
        .filter(|b| b["runningInfo"]["kind"] == "death")
        .collect();
    assert_eq!(deaths.len(), 1, "{deaths:#?}");
    // The facade was asked for the dead pid's exit record from the agent's lookup thread,
    // attached to ART for it, and answered (none off Android): no error.
    assert_eq!(
        deaths[0]["runningInfo"]["exitInfoError"],
        Value::Null,
        "{:#}",
        deaths[0]
    );
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
