//! The `oomguard collect` executable against what clients may send: a report far larger than
//! any the analyser writes (its memory stays bounded) and text meant for a terminal (`--print`
//! writes no control characters). A real process on loopback, spoken to over raw sockets.

mod common;

use common::collect::Collect;
use std::io::Write;
use std::time::Duration;

/// A report in the analyser's schema with `n` leak groups and as many dominators, each with
/// a reference path of five steps (about 1 KB per group).
fn big_report(n: usize) -> Vec<u8> {
    let mut o = Vec::with_capacity(n * 1100);
    o.extend_from_slice(br#"{"runningInfo":{"appVersion":"9.9.9"},"gcPaths":["#);
    let step = r#"{"reference":"com.example.Holder.field","referenceType":"instance field","declaredClass":"com.example.Holder"}"#;
    let path = [step; 5].join(",");
    for i in 0..n {
        if i > 0 {
            o.push(b',');
        }
        write!(
            o,
            r#"{{"instanceCount":{i},"leakReason":"destroyed Activity","gcRoot":"Local variable","signature":"sig{i:037}","path":[{path}],"className":"com.example.Leak{i}","retainedSize":{}}}"#,
            i * 100
        )
        .unwrap();
    }
    o.extend_from_slice(br#"],"dominators":["#);
    for i in 0..n {
        if i > 0 {
            o.push(b',');
        }
        write!(
            o,
            r#"{{"className":"com.example.Big{i}","retainedSize":{i},"count":1,"gcRoot":"Local variable","signature":"dom{i:037}","path":[{path}]}}"#
        )
        .unwrap();
    }
    o.extend_from_slice(b"]}");
    o
}

/// A 40 MB report.json, the index asked for four times, its page and the grouped leaks twice,
/// and the report fetched whole: the
/// collector's peak RSS stays within a small multiple of what one small report took. (It
/// used to parse every report in full for each index, and read whole files for a GET: 1 GB
/// and more.)
#[test]
fn memory_stays_bounded_with_a_huge_report() {
    let tmp = common::fast_tmp();
    let c = Collect::start(tmp.path(), &[]);
    c.upload("1000-small", "meta", br#"{"reason":"heap three strikes"}"#);
    c.upload("1000-small", "report", &big_report(20));
    c.wait_for("received report 1000-small");
    let (st, _, page) = c.request("GET", "/", &[], &mut &b""[..], 0);
    assert_eq!(st, 200);
    assert!(String::from_utf8_lossy(&page).contains(&format!("sig{:037}", 19)));
    let baseline = c.vm_hwm_kb();

    let big = big_report(40_000);
    assert!(big.len() > 40 << 20, "{}", big.len());
    c.upload("2000-big", "report", &big);
    c.wait_for("received report 2000-big");
    for _ in 0..4 {
        let (st, _, page) = c.request("GET", "/", &[], &mut &b""[..], 0);
        assert_eq!(st, 200);
        let page = String::from_utf8_lossy(&page);
        // The largest groups of the big report are summarised, the small one is still listed.
        assert!(
            page.contains(&format!("sig{:037}", 39_999)),
            "{}",
            &page[..2000.min(page.len())]
        );
        assert!(page.contains("1000-small"));
    }
    // Its page reads the report as a bounded stream, and the grouped leaks come from the
    // summaries.
    for _ in 0..2 {
        let (st, _, page) = c.request("GET", "/incidents/2000-big/", &[], &mut &b""[..], 0);
        assert_eq!(st, 200);
        let page = String::from_utf8_lossy(&page);
        assert!(
            page.contains("39950 more leak group(s) not shown"),
            "{}",
            page.len()
        );
        assert!(page.len() < 1 << 20, "{}", page.len());
        let (st, _, page) = c.request("GET", "/leaks", &[], &mut &b""[..], 0);
        assert_eq!(st, 200);
        assert!(String::from_utf8_lossy(&page).contains("com.example.Leak39999"));
    }
    let (st, _, got) = c.request(
        "GET",
        "/incidents/2000-big/report.json",
        &[],
        &mut &b""[..],
        0,
    );
    assert_eq!(st, 200);
    assert!(
        got == big,
        "the report served differs from the one uploaded"
    );
    let peak = c.vm_hwm_kb();
    eprintln!(
        "collector peak RSS: {baseline} KiB after a small report, {peak} KiB after the 40 MB one"
    );
    assert!(
        peak <= 3 * baseline,
        "peak RSS {peak} KiB, more than 3 x the {baseline} KiB after a small report"
    );
    c.stop();
}

/// `--print` writes a report's reason and signatures to a terminal: escape sequences and other
/// control characters in them (a title change, a screen clear, a C1 CSI) are not written.
#[test]
fn print_strips_control_characters() {
    let tmp = common::fast_tmp();
    let c = Collect::start(tmp.path(), &[]);
    c.upload(
        "3000-esc",
        "meta",
        "{\"reason\":\"heap \\u001b]0;owned\\u0007\\u001b[2Jred\\u009b31m\\r\\nfake line\"}"
            .as_bytes(),
    );
    c.upload(
        "3000-esc",
        "report",
        "{\"gcPaths\":[{\"signature\":\"sig\\u001b[8m\",\"leakReason\":\"why\\u001b[1A\",\"instanceCount\":3}]}"
            .as_bytes(),
    );
    c.wait_for("received report 3000-esc");
    let out = c.out();
    let line = out
        .lines()
        .find(|l| l.contains("received report 3000-esc"))
        .unwrap()
        .to_string();
    assert!(
        !line.chars().any(|ch| ch.is_control()),
        "control characters written: {line:?}"
    );
    assert!(
        line.contains("red") && line.contains("fake line") && line.contains("sig"),
        "{line:?}"
    );
    c.stop();
}

/// `path` (a fixture) gzip-compressed, as the agent uploads a stripped dump.
fn gzip(path: &std::path::Path) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(&std::fs::read(path).unwrap()).unwrap();
    z.finish().unwrap()
}

/// The text of `p` once it is there (at most 60 s).
fn read_when_there(p: &std::path::Path) -> String {
    for _ in 0..600 {
        if let Ok(t) = std::fs::read_to_string(p) {
            return t;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{} not written within 60 s", p.display());
}

/// A report's JSON without its `analysis` table (timings, the run's own figures).
fn without_analysis(json: &[u8]) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(json).unwrap();
    v.as_object_mut().unwrap().remove("analysis");
    v
}

/// Incidents the device analysed only in part (a budget too small for the whole analysis: no
/// retained sizes, a path per class and reason) whose stripped dump came with the report: the
/// collector analyses the dump whole into `report.server.json`, equal field for field
/// (timings aside) to `oomguard analyze`'s report of the same dump with the device's running
/// info; `/leaks` counts its leaks and the incident's page shows them. A dump cut short gets
/// `report.server.error.txt` naming the file and the byte, and stays marked as analysed in
/// part. An incident that became ready while analyses were off is analysed at the next start.
/// The fixture whose device report is partial: (its stripped dump's bytes gzip-compressed, the
/// report of a budget too small for the whole analysis, the whole report without `analysis`).
fn partial_incident() -> (Vec<u8>, Vec<u8>, serde_json::Value) {
    let (gz, partial, full) = partial_incident_with(&analyze::Thresholds::default());
    let p: serde_json::Value = serde_json::from_slice(&partial).unwrap();
    // The device's report: one path found backwards, without retained size; the whole
    // analysis: the Service Leak groups too.
    assert_eq!(p["gcPaths"].as_array().unwrap().len(), 1, "{p}");
    assert_eq!(p["gcPaths"][0]["retainedSize"], 0, "{p}");
    assert!(full["gcPaths"].as_array().unwrap().len() >= 2, "{full}");
    (gz, partial, full)
}

/// [`partial_incident`] of a device whose policy set thresholds `t`.
fn partial_incident_with(t: &analyze::Thresholds) -> (Vec<u8>, Vec<u8>, serde_json::Value) {
    let dump = common::fixture("android/leak_service_binder.hprof");
    let running = serde_json::json!({"appVersion": "4.5.6", "deviceId": "phone-1"});
    let run = |budget_bytes| {
        let cfg = analyze::Config {
            budget_bytes,
            ..analyze::Config::default()
        }
        .with_thresholds(t);
        let r = analyze::analyze(analyze::Input::File(&dump), &cfg, running.clone()).unwrap();
        serde_json::to_vec(&r).unwrap()
    };
    let (partial, full) = (run(1 << 20), run(0));
    let p: serde_json::Value = serde_json::from_slice(&partial).unwrap();
    assert!(p["analysis"]["budget"].is_object(), "{p}");
    (gzip(&dump), partial, without_analysis(&full))
}

/// Incidents the device analysed only in part (a budget too small for the whole analysis: no
/// retained sizes, a path per class and reason) whose stripped dump came with the report: the
/// collector analyses the dump whole into `report.server.json`, equal field for field
/// (timings aside) to `oomguard analyze`'s report of the same dump with the device's running
/// info; `/leaks` counts its leaks and the incident's page shows them. A dump cut short gets
/// `report.server.error.txt` naming the file and the byte, and stays marked as analysed in
/// part. An incident that became ready while analyses were off is analysed at the next start.
#[test]
fn a_dump_the_device_analysed_in_part_is_analysed_whole_on_the_collector() {
    let (gz, partial, full_v) = partial_incident();
    let tmp = common::fast_tmp();
    let c = Collect::start(tmp.path(), &[]);
    c.upload("1000-part", "report", &partial);
    c.upload("1000-part", "mini.gz", &gz);
    c.wait_for("analysed on the collector 1000-part");
    let inc = tmp.path().join("incidents/1000-part");
    let got = std::fs::read(inc.join("report.server.json")).unwrap();
    assert_eq!(without_analysis(&got), full_v);
    assert_eq!(std::fs::read(inc.join("report.json")).unwrap(), partial);
    assert!(!inc.join(".analysis").exists());
    let (st, _, page) = c.request("GET", "/leaks", &[], &mut &b""[..], 0);
    assert_eq!(st, 200);
    let page = String::from_utf8_lossy(&page);
    assert!(
        page.contains("com.example.leakcanary.LeakyService"),
        "{page}"
    );
    assert!(!page.contains("analysed only in part"), "{page}");
    let (st, _, page) = c.request("GET", "/incidents/1000-part/", &[], &mut &b""[..], 0);
    assert_eq!(st, 200);
    let page = String::from_utf8_lossy(&page);
    assert!(
        page.contains("the collector&#39;s analysis of the whole uploaded dump")
            || page.contains("the collector's analysis of the whole uploaded dump"),
        "{page}"
    );
    assert!(page.contains("com.example.leakcanary.LeakyService"));

    // A dump cut short: the reason, with the byte, and the incident stays partial.
    c.upload("2000-cut", "report", &partial);
    c.upload("2000-cut", "mini.gz", &gz[..gz.len() / 2]);
    let err = tmp
        .path()
        .join("incidents/2000-cut/report.server.error.txt");
    let why = read_when_there(&err);
    assert!(
        why.contains(&format!(
            "mini.hprof.gz: byte {}: not a whole gzip stream",
            gz.len() / 2
        )),
        "{why}"
    );
    assert!(!tmp.path().join("incidents/2000-cut/.analysis").exists());
    let (_, _, page) = c.request("GET", "/leaks", &[], &mut &b""[..], 0);
    let page = String::from_utf8_lossy(&page);
    assert!(page.contains("1 of them analysed only in part"), "{page}");
    c.stop();

    // Analyses off: the incident waits; on at the next start: analysed then.
    let c = Collect::start(tmp.path(), &["--analysis-memory-mb", "0"]);
    c.upload("3000-later", "report", &partial);
    c.upload("3000-later", "mini.gz", &gz);
    c.wait_for("received report 3000-later");
    std::thread::sleep(Duration::from_millis(500));
    assert!(!tmp
        .path()
        .join("incidents/3000-later/report.server.json")
        .exists());
    c.stop();
    let c = Collect::start(tmp.path(), &[]);
    c.wait_for("analysed on the collector 3000-later");
    assert!(!c.out().contains("analysed on the collector 2000-cut"));
    c.stop();
}

/// The collector analyses a partial incident's dump with the thresholds the device's policy
/// set (`analysis.thresholds` of its report: here arrays from 1 KiB and one path per class),
/// not its own defaults, which find less; within a policy's bounds (a report asking for no
/// paths at all gets one per class).
#[test]
fn the_collector_analyses_with_the_device_s_thresholds() {
    let t = analyze::Thresholds {
        array_min_bytes: 1024,
        max_paths_per_class: 1,
        ..analyze::Thresholds::default()
    };
    let (gz, partial, full) = partial_incident_with(&t);
    let (_, _, full_default) = partial_incident();
    assert_ne!(full, full_default, "the thresholds change the whole report");
    let p: serde_json::Value = serde_json::from_slice(&partial).unwrap();
    assert_eq!(p["analysis"]["thresholds"]["arrayMinBytes"], 1024, "{p}");
    let tmp = common::fast_tmp();
    let c = Collect::start(tmp.path(), &[]);
    c.upload("1000-policy", "report", &partial);
    c.upload("1000-policy", "mini.gz", &gz);
    c.wait_for("analysed on the collector 1000-policy");
    let got = std::fs::read(tmp.path().join("incidents/1000-policy/report.server.json")).unwrap();
    assert_eq!(without_analysis(&got), full);
    let got: serde_json::Value = serde_json::from_slice(&got).unwrap();
    assert_eq!(got["analysis"]["thresholds"], p["analysis"]["thresholds"]);

    // A report's thresholds are kept within a policy's bounds: no paths at all is one.
    let none = analyze::Thresholds {
        max_paths_per_class: 0,
        ..analyze::Thresholds::default()
    };
    let one = analyze::Thresholds {
        max_paths_per_class: 1,
        ..analyze::Thresholds::default()
    };
    let (_, partial, _) = partial_incident_with(&none);
    let (_, _, full_one) = partial_incident_with(&one);
    c.upload("2000-bounded", "report", &partial);
    c.upload("2000-bounded", "mini.gz", &gz);
    c.wait_for("analysed on the collector 2000-bounded");
    let got = std::fs::read(tmp.path().join("incidents/2000-bounded/report.server.json")).unwrap();
    assert_eq!(without_analysis(&got), full_one);
    assert!(!full_one["gcPaths"].as_array().unwrap().is_empty());
    c.stop();
}

/// A dump that inflates to more than the collector's disk quota has room for: refused with the
/// reason (the quota's figures), its bytes given back to the quota (a later upload fits).
#[test]
fn a_dump_too_large_for_the_disk_quota_is_refused_and_its_room_given_back() {
    let (gz, partial, _) = partial_incident();
    let tmp = common::fast_tmp();
    // Room for the uploads and a little more, not for the 3.7 MB dump inflated.
    let quota = (partial.len() + gz.len() + 200_000).to_string();
    let c = Collect::start(tmp.path(), &["--max-disk-bytes", &quota]);
    c.upload("1000-big", "report", &partial);
    c.upload("1000-big", "mini.gz", &gz);
    let err = tmp
        .path()
        .join("incidents/1000-big/report.server.error.txt");
    let why = read_when_there(&err);
    assert!(
        why.contains(
            "mini.hprof.gz: the dump inflates to more than the collector's directory has room for"
        ),
        "{why}"
    );
    // It says how much of the dump was written before the room ran out: some of it was.
    let written = why
        .split(" bytes of the dump written")
        .next()
        .and_then(|h| h.rsplit(' ').next())
        .and_then(|n| n.parse::<u64>().ok());
    assert!(written.is_some_and(|w| w > 0), "{why}");
    assert!(!tmp.path().join("incidents/1000-big/.analysis").exists());
    // What the inflated part had taken is free again.
    c.upload("2000-next", "meta", &vec![b' '; 150_000]);
    c.stop();
}

/// A dump whose whole analysis needs more memory than the collector gives it
/// (`--analysis-memory-mb`) is refused with that reason, and not analysed in part again.
#[test]
fn a_dump_too_large_for_the_collector_s_memory_is_refused_with_the_reason() {
    let (gz, partial, _) = partial_incident();
    let tmp = common::fast_tmp();
    let c = Collect::start(tmp.path(), &["--analysis-memory-mb", "1"]);
    c.upload("1000-mem", "report", &partial);
    c.upload("1000-mem", "mini.gz", &gz);
    let inc = tmp.path().join("incidents/1000-mem");
    let why = read_when_there(&inc.join("report.server.error.txt"));
    assert!(
        why.starts_with("the whole analysis would need more than the collector's 1 MiB as well (")
            && why.trim_end().ends_with("): raise --analysis-memory-mb"),
        "{why}"
    );
    assert!(!inc.join("report.server.json").exists());
    assert!(!inc.join(".analysis").exists());
    c.stop();
}
