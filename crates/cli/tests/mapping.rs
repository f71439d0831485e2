//! `oomguard analyze --mapping` (issue 42): the build's R8/ProGuard mapping turns names back in
//! the report, on a real dump (LeakCanary's `leak_service_binder.hprof`, read as if its
//! `com.example.leakcanary` classes were the obfuscated names of a build); a bad mapping is
//! refused with its byte offset and no report.

mod common;

use std::path::Path;
use std::process::Command;

/// A mapping under which the fixture's service classes are renamed names of `com.real.*`.
const MAPPING: &str = "# compiler: R8\n\
com.real.SyncService -> com.example.leakcanary.LeakyService:\n\
com.real.SyncService$Binder -> com.example.leakcanary.LeakyService$MyBinder:\n";

fn analyze(dir: &Path, mapping: Option<&str>) -> (std::process::Output, Option<serde_json::Value>) {
    analyze_with(dir, mapping, &[])
}

/// [`analyze`] with more arguments.
fn analyze_with(
    dir: &Path,
    mapping: Option<&str>,
    args: &[&str],
) -> (std::process::Output, Option<serde_json::Value>) {
    let out = dir.join("report.json");
    let _ = std::fs::remove_file(&out);
    let mut c = Command::new(common::oomguard_bin());
    c.arg("analyze")
        .arg(common::fixture("android/leak_service_binder.hprof"))
        .arg("-o")
        .arg(&out)
        .args(args);
    if let Some(m) = mapping {
        let p = dir.join("mapping.txt");
        std::fs::write(&p, m).unwrap();
        c.arg("--mapping").arg(&p);
    }
    let o = c.output().unwrap();
    let v = std::fs::read(&out)
        .ok()
        .map(|b| serde_json::from_slice(&b).unwrap());
    (o, v)
}

fn classes(v: &serde_json::Value) -> Vec<String> {
    let mut c: Vec<String> = v["gcPaths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["className"].as_str().unwrap().to_string())
        .collect();
    c.sort();
    c
}

#[test]
fn the_mapping_turns_the_reports_names_back() {
    let dir = tempfile::tempdir().unwrap();
    let (o, plain) = analyze(dir.path(), None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plain = plain.unwrap();
    assert!(classes(&plain)
        .iter()
        .all(|c| c == "com.example.leakcanary.LeakyService"));
    let mapping = format!("{MAPPING}    com.real.SyncService service -> service\n");
    let (o, mapped) = analyze(dir.path(), Some(&mapping));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mapped = mapped.unwrap();
    assert!(
        classes(&mapped).iter().all(|c| c == "com.real.SyncService"),
        "{mapped:#}"
    );
    assert_eq!(classes(&mapped).len(), classes(&plain).len());
    assert!(text.contains("com.real.SyncService$Binder"), "{text}");
    assert!(!text.contains("com.example.leakcanary"), "{text}");
    // The same paths under other names: other signatures, as many groups.
    let sigs = |v: &serde_json::Value| -> Vec<String> {
        v["gcPaths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["signature"].as_str().unwrap().to_string())
            .collect()
    };
    assert_ne!(sigs(&plain), sigs(&mapped));
}

/// The report of what fits a budget (no index: its histogram, findings and paths come from
/// streaming passes) has its names turned back too: in `histogram[]`, `classInfos[]`,
/// `leakObjects[]` and `gcPaths[]`, and in the printed summary.
#[test]
fn a_report_of_what_fits_is_renamed_too() {
    let dir = tempfile::tempdir().unwrap();
    let budget = ["--budget-mb", "1"];
    let (o, plain) = analyze_with(dir.path(), None, &budget);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plain = plain.unwrap();
    assert!(plain["analysis"]["budget"].is_object(), "{plain:#}");
    let (o, mapped) = analyze_with(dir.path(), Some(MAPPING), &budget);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mapped = mapped.unwrap();
    let text = mapped.to_string();
    // (The mapping renames the service's two classes, not the app's others.)
    assert!(plain
        .to_string()
        .contains("com.example.leakcanary.LeakyService"));
    assert!(
        !text.contains("com.example.leakcanary.LeakyService"),
        "{mapped:#}"
    );
    let named = |list: &str| {
        mapped[list]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["className"] == "com.real.SyncService")
    };
    for list in ["histogram", "leakObjects", "gcPaths"] {
        assert!(named(list), "{list}: {mapped:#}");
    }
    assert_eq!(classes(&mapped).len(), classes(&plain).len());
    assert_eq!(mapped["analysis"]["sizes"], plain["analysis"]["sizes"]);
    assert_eq!(mapped["analysis"]["sizes"]["vm"], "Android");
    let printed = String::from_utf8_lossy(&o.stdout);
    assert!(printed.contains("com.real.SyncService"), "{printed}");
    assert!(
        !printed.contains("com.example.leakcanary.LeakyService"),
        "{printed}"
    );
}

#[test]
fn a_bad_mapping_is_refused_with_its_byte_offset() {
    let dir = tempfile::tempdir().unwrap();
    let bad = format!("{MAPPING}this line is no mapping\n");
    let (o, report) = analyze(dir.path(), Some(&bad));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    let at = bad.find("this line").unwrap();
    assert!(err.contains(&format!("mapping.txt: byte {at}: ")), "{err}");
    assert!(report.is_none());
}
