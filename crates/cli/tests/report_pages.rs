//! The report pages in a real browser: a real `oomguard collect` on loopback receives three
//! incidents (a heap incident whose report has `trace`s and a class named like a script, an
//! older app version's report without `trace`, a thread incident whose report found no leak),
//! and Debian's Chromium, headless, opens each incident's page, the leaks grouped across
//! incidents, the index, and an `oomguard analyze --html` page of a real dump. Each must render
//! with its script run (`data-ready` on `<body>`), no error recorded by the page, no console
//! message, and nothing injected; a screenshot of each is kept under `target/report-pages/`.
//!
//! Chromium runs with `--no-sandbox`: as root (the CI machines and this one) it refuses to
//! start otherwise. Without a `chromium` on the PATH the test says SKIPPED and passes, except
//! under `CI`, where it fails (`scripts/lib/setup.sh` installs it).

mod common;

use common::collect::Collect;
use serde_json::json;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EVIL: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>";

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
}

/// What Chromium made of a page: the DOM after its scripts ran, and its log (console
/// messages are logged as `CONSOLE`).
struct Rendered {
    dom: String,
    log: String,
}

/// Open `url` in headless Chromium; keep a screenshot at `shot`.
fn render(chrome: &Path, url: &str, shot: &Path, height: u32) -> Rendered {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size=1280,{height}"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--dump-dom")
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", chrome.display()));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {url} within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let dom = o.join().unwrap();
    let log = e.join().unwrap();
    assert!(status.success(), "chromium on {url}: {status}\n{log}");
    assert!(
        dom.contains("</html>"),
        "chromium gave no DOM for {url}:\n{log}"
    );
    Rendered { dom, log }
}

/// The checks every page passes: its script ran, it recorded no error, the browser logged no
/// console message (a CSP violation or a script error would be one), nothing was injected.
fn check_page(what: &str, r: &Rendered) -> String {
    let consoles: Vec<&str> = r.log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(
        consoles.is_empty(),
        "{what}: console messages: {consoles:#?}"
    );
    let ready = r
        .dom
        .split("data-ready=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("{what}: the page's script did not run:\n{}", r.dom))
        .to_string();
    assert!(
        r.dom.contains("<ul id=\"errors\" hidden=\"\"></ul>"),
        "{what}: the page recorded errors:\n{}",
        r.dom
    );
    assert_eq!(r.dom.matches("<script").count(), 1, "{what}: {}", r.dom);
    assert!(!r.dom.contains("<img"), "{what}: {}", r.dom);
    ready
}

fn samples(n: u64, key: &str) -> serde_json::Value {
    let v: Vec<_> = (0..n)
        .map(|i| {
            json!({"seq": i + 1, "at_ms": 1_795_737_600_000u64 + i * 5000,
                   "heap_used": (200 + 15 * i) << 20, "heap_max": 256u64 << 20,
                   "fds": if key == "fds" { 900 + 30 * i } else { 120 }, "fd_soft_limit": 1024,
                   "threads": if key == "threads" { 300 + 80 * i } else { 40 }, "threads_max": 0,
                   "vm_size_kb": 4_000_000, "vm_rss_kb": 300_000 + 10_000 * i})
        })
        .collect();
    json!(v)
}

fn meta(reason: &str, key: &str, device: &str, version: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": "x", "createdMs": 1_795_737_600_000u64, "reason": reason, "samples": samples(4, key),
        "runningInfo": {"appVersion": version, "deviceId": device, "manufacturer": "Google",
                        "model": "Pixel 7", "apiLevel": 34, "currentPage": "MainActivity"},
        "policyVersion": "1", "dumpError": null, "missing": []
    }))
    .unwrap()
}

/// The leak every incident of the test shares, as KOOM's fields.
fn activity_leak() -> serde_json::Value {
    json!({"instanceCount": 3, "leakReason": "Activity Leak", "gcRoot": "System Class",
           "signature": "1111111111111111111111111111111111111111",
           "className": "com.example.MainActivity", "retainedSize": 5_400_000,
           "path": [
             {"reference": "com.example.DemoApp$Session.sHistory", "referenceType": "STATIC_FIELD", "declaredClass": "com.example.DemoApp$Session"},
             {"reference": "java.util.ArrayList.elementData", "referenceType": "INSTANCE_FIELD", "declaredClass": "java.util.ArrayList"},
             {"reference": "java.lang.Object[][4]", "referenceType": "ARRAY_ENTRY", "declaredClass": "java.lang.Object[]"},
             {"reference": "com.example.MainActivity", "referenceType": "LEAKING_INSTANCE", "declaredClass": "com.example.MainActivity"}]})
}

fn node(
    class: &str,
    kind: &str,
    status: &str,
    why: &str,
    reference: Option<(&str, &str)>,
    suspect: bool,
    ret: u64,
) -> serde_json::Value {
    json!({"className": class, "objectId": 4096, "kind": kind, "status": status, "statusReason": why,
           "reference": reference.map(|r| r.0), "referenceType": reference.map(|r| r.1),
           "suspect": suspect, "retainedSize": ret})
}

fn dominators() -> serde_json::Value {
    let d = |c: &str, n: u64, root: &str, via: &str| {
        json!({"className": c, "retainedSize": n, "count": 1, "gcRoot": root, "signature": "d",
               "path": [{"reference": format!("com.example.Holder.{via}"), "referenceType": "INSTANCE_FIELD", "declaredClass": "com.example.Holder"},
                        {"reference": c, "referenceType": "LEAKING_INSTANCE", "declaredClass": c}]})
    };
    json!([
        d("byte[]", 90 << 20, "System Class", "cache"),
        d(
            "com.example.MainActivity",
            40 << 20,
            "System Class",
            "activities"
        ),
        d("java.lang.Object[]", 25 << 20, "Thread", "queue"),
        d(EVIL, 8 << 20, "JNI Global", "x"),
        d("android.graphics.Bitmap", 5 << 20, "Thread", "queue")
    ])
}

/// A report with `trace`s (the app's newer version), one leak's class an attempt at HTML.
fn report_with_traces() -> Vec<u8> {
    let mut leak = activity_leak();
    leak["trace"] = json!({
        "rootKind": "static field", "root": "class com.example.DemoApp$Session, static field sHistory",
        "nodes": [
            node("com.example.DemoApp$Session", "class", "NOT_LEAKING", "a class is never leaking", Some(("sHistory", "static field")), false, 5_500_000),
            node("java.util.ArrayList", "instance", "UNKNOWN", "", Some(("elementData", "instance field")), true, 5_450_000),
            node("java.lang.Object[]", "array", "UNKNOWN", "", Some(("[4]", "array element")), true, 5_420_000),
            node("com.example.MainActivity", "instance", "LEAKING", "Activity#mDestroyed is true", None, false, 5_400_000)]});
    let mut evil = activity_leak();
    evil["className"] = json!(EVIL);
    evil["signature"] = json!("2222222222222222222222222222222222222222");
    evil["leakReason"] = json!(EVIL);
    evil["trace"] = json!({"rootKind": EVIL, "root": EVIL, "nodes": [
        node(EVIL, "instance", "LEAKING", EVIL, Some((EVIL, EVIL)), true, 100)]});
    serde_json::to_vec(&json!({
        "runningInfo": {"appVersion": "2.0"},
        "analysis": {"format": "JAVA PROFILE 1.0.3", "objects": 1_000_000, "reachableBytes": 200u64 << 20},
        "classInfos": [], "gcPaths": [leak, evil], "leakObjects": [], "dominators": dominators()}))
    .unwrap()
}

#[test]
fn pages_render_in_chromium() {
    let Some(chrome) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no chromium on the PATH (scripts/lib/setup.sh installs Debian's chromium)"
        );
        eprintln!("SKIPPED: no chromium on the PATH (apt-get install chromium; scripts/lib/setup.sh does)");
        return;
    };
    let shots = common::root().join("target/report-pages");
    std::fs::create_dir_all(&shots).unwrap();
    let tmp = common::fast_tmp();
    let c = Collect::start(tmp.path(), &[]);

    let (a, b, t) = upload_incidents(&c);
    let base = format!("http://{}", c.addr);
    check_incident_with_traces(&chrome, &base, &shots, a);
    check_older_and_thread_incidents(&chrome, &base, &shots, b, t);
    check_leaks_and_index(&chrome, &base, &shots, a, b);
    c.stop();
    check_analyze_html(&chrome, &shots);
    for f in [
        "incident-traces",
        "incident-koom",
        "incident-threads",
        "leaks",
        "index",
        "analyze",
    ] {
        let p = shots.join(format!("{f}.png"));
        let len = std::fs::metadata(&p).map_or(0, |m| m.len());
        assert!(len > 10_000, "{}: {len} bytes", p.display());
    }
    eprintln!("screenshots in {}", shots.display());
}

/// Three incidents sent to the collector `c`: a heap incident of app version 2.0 on device A
/// (with traces), the same leak from version 1.9 on device B (without), and a thread incident
/// whose report found no leak. Returns their ids, once the last one's report is in.
fn upload_incidents(c: &Collect) -> (&'static str, &'static str, &'static str) {
    // A heap incident of app version 2.0 on device A: traces, a script for a class name.
    let a = "1795737600000-a";
    c.upload(
        a,
        "meta",
        &meta(
            "heap: 3 ascending polls over 85 % of the max heap",
            "heap",
            "dev-A",
            "2.0",
        ),
    );
    c.upload(a, "report", &report_with_traces());
    // The same leak from app version 1.9 on device B, whose reports have no trace.
    let b = "1795737700000-b";
    c.upload(
        b,
        "meta",
        &meta(
            "heap: 3 ascending polls over 85 % of the max heap",
            "heap",
            "dev-B",
            "1.9",
        ),
    );
    let old = json!({"runningInfo": {"appVersion": "1.9"}, "gcPaths": [activity_leak()], "dominators": dominators()});
    c.upload(b, "report", &serde_json::to_vec(&old).unwrap());
    // A thread incident with its inventory, and a report that found no leak.
    let t = "1795737800000-c";
    c.upload(
        t,
        "meta",
        &meta("threads: 540 of 600", "threads", "dev-A", "2.0"),
    );
    let inv = json!({"kind": "threads", "total": 540, "more_groups": 0,
        "groups": [{"name": "OkHttp Dispatcher", "count": 400}, {"name": EVIL, "count": 100}, {"name": "main", "count": 1}],
        "java_stacks": [{"count": 400, "example_thread": "OkHttp Dispatcher #1",
                         "frames": ["java.lang.Object.wait(Native Method)", "okhttp3.Dispatcher.run(Dispatcher.java:42)"]}]});
    c.upload(t, "threads", &serde_json::to_vec_pretty(&inv).unwrap());
    c.upload(
        t,
        "report",
        br#"{"runningInfo":{},"gcPaths":[],"dominators":[]}"#,
    );
    c.wait_for(&format!("received report {t}"));
    (a, b, t)
}

/// The newer version's incident: traces, a chart, the treemap opening into its tree.
fn check_incident_with_traces(chrome: &Path, base: &str, shots: &Path, a: &str) {
    let r = render(
        chrome,
        &format!("{base}/incidents/{a}/"),
        &shots.join("incident-traces.png"),
        2600,
    );
    let ready = check_page("incident a", &r);
    assert_eq!(ready, "cells=5 charts=2 traces=2", "{}", r.dom);
    for want in [
        "<code class=\"cls\">com.example.DemoApp$Session</code>",
        "<div class=\"ref suspect\">↓ instance field <code>elementData</code></div>",
        "Activity#mDestroyed is true",
        "&lt;script&gt;alert(1)&lt;/script&gt;",
        "data-series=\"heap_used\"",
        "id=\"dom-3\"",
    ] {
        assert!(
            r.dom.contains(want),
            "incident a: no {want:?} in\n{}",
            r.dom
        );
    }
    // A link to a dominator group opens its branch of the tree (the script walks up the
    // <details> from the group, as a click on its treemap cell does).
    let r = render(
        chrome,
        &format!("{base}/incidents/{a}/#dom-3"),
        &shots.join("incident-dom-3.png"),
        1000,
    );
    check_page("incident a, #dom-3", &r);
    let before = &r.dom[..r
        .dom
        .find("<div class=\"group target\" id=\"dom-3\">")
        .unwrap_or_else(|| panic!("dom-3 not marked:\n{}", r.dom))];
    // The group's branch (com.example.Holder.x) and the one above it (JNI Global) are open.
    for label in ["com.example.Holder.x", "JNI Global"] {
        let at = before.rfind(&format!("<code>{label}</code>")).unwrap();
        let branch = &before[before[..at].rfind("<details").unwrap()..];
        assert!(
            branch.starts_with("<details class=\"branch\" open=\"\">"),
            "{branch}"
        );
    }
}

/// The older version's incident, whose report has no trace, and the thread incident.
fn check_older_and_thread_incidents(chrome: &Path, base: &str, shots: &Path, b: &str, t: &str) {
    // The older version's report, without trace: drawn from gcRoot and path.
    let r = render(
        chrome,
        &format!("{base}/incidents/{b}/"),
        &shots.join("incident-koom.png"),
        1800,
    );
    assert_eq!(check_page("incident b", &r), "cells=5 charts=2 traces=1");
    assert!(
        r.dom
            .contains("<div class=\"ref\">↓ static field <code>sHistory</code></div>"),
        "{}",
        r.dom
    );
    // No leak, a thread inventory.
    let r = render(
        chrome,
        &format!("{base}/incidents/{t}/"),
        &shots.join("incident-threads.png"),
        1600,
    );
    assert_eq!(check_page("incident c", &r), "cells=0 charts=3 traces=0");
    assert!(
        r.dom.contains("No leak found.") && r.dom.contains("OkHttp Dispatcher #1"),
        "{}",
        r.dom
    );
}

/// The leaks page (the leak both versions share is one group) and the index.
fn check_leaks_and_index(chrome: &Path, base: &str, shots: &Path, a: &str, b: &str) {
    // The leak both versions share is one group: two incidents, two devices, two versions.
    let r = render(
        chrome,
        &format!("{base}/leaks"),
        &shots.join("leaks.png"),
        900,
    );
    check_page("leaks", &r);
    let row = r
        .dom
        .split("<tr class=\"group\">")
        .find(|row| row.contains("1111111111111111111111111111111111111111"))
        .unwrap_or_else(|| panic!("no group of the shared leak:\n{}", r.dom));
    assert!(
        row.contains("<td class=\"num\">2</td><td class=\"num\">2</td><td>1.9, 2.0</td>"),
        "{row}"
    );
    assert!(
        row.contains(
            "DemoApp$Session.sHistory › ArrayList.elementData › Object[][4] › MainActivity"
        ),
        "{row}"
    );
    assert!(
        row.contains(&format!("/incidents/{a}/")) && row.contains(&format!("/incidents/{b}/")),
        "{row}"
    );
    assert!(row.contains("5.1 MB"), "{row}");

    // The index: readable leaks, links to the pages.
    let r = render(chrome, &format!("{base}/"), &shots.join("index.png"), 1200);
    assert!(
        r.dom.contains(&format!("href=\"incidents/{a}/\"")),
        "{}",
        r.dom
    );
    assert!(
        r.dom
            .contains("com.example.MainActivity</code><br>System Class › DemoApp$Session.sHistory"),
        "{}",
        r.dom
    );
}

/// `analyze --html` on a real dump, opened from disk.
fn check_analyze_html(chrome: &Path, shots: &Path) {
    let out = tempfile::tempdir().unwrap();
    let page = out.path().join("page.html");
    let st = Command::new(common::oomguard_bin())
        .arg("analyze")
        .arg(common::fixture("android/leak_service_binder.hprof"))
        .arg("-o")
        .arg(out.path().join("report.json"))
        .arg("--html")
        .arg(&page)
        .status()
        .unwrap();
    assert!(st.success());
    let r = render(
        chrome,
        &format!("file://{}", page.display()),
        &shots.join("analyze.png"),
        2000,
    );
    let ready = check_page("analyze --html", &r);
    assert!(ready.starts_with("cells="), "{ready}");
    assert!(r.dom.contains("<svg class=\"tm\""), "{}", r.dom);
}
