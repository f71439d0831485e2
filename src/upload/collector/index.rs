//! The HTML index of received incidents and the one-line summary `--print` writes.
#![forbid(unsafe_code)]

use super::safe_name;
use serde_json::Value;
use std::path::Path;

fn read_json(p: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(p).ok()?).ok()
}

/// The top leaks of a report: (signature, reason, instances).
pub fn top_leaks(report: &Value, n: usize) -> Vec<(String, String, u64)> {
    let mut v: Vec<(String, String, u64)> = report
        .get("gcPaths")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|p| {
                    (
                        p.get("signature")
                            .and_then(Value::as_str)
                            .unwrap_or("?")
                            .to_string(),
                        p.get("leakReason")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        p.get("instanceCount").and_then(Value::as_u64).unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|e| std::cmp::Reverse(e.2));
    v.truncate(n);
    v
}

/// The top dominators of a report: (class, retained bytes).
pub fn top_dominators(report: &Value, n: usize) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = report
        .get("dominators")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|d| {
                    (
                        d.get("className")
                            .and_then(Value::as_str)
                            .unwrap_or("?")
                            .to_string(),
                        d.get("retainedSize").and_then(Value::as_u64).unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|e| std::cmp::Reverse(e.1));
    v.truncate(n);
    v
}

/// One line for a received report.
pub fn report_line(dir: &Path, id: &str) -> String {
    let d = dir.join("incidents").join(id);
    let meta = read_json(&d.join("meta.json")).unwrap_or(Value::Null);
    let report = read_json(&d.join("report.json")).unwrap_or(Value::Null);
    let reason = meta
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("(reason not received yet)");
    let leaks = top_leaks(&report, 1);
    let n = report
        .get("gcPaths")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let top = match leaks.first() {
        Some((sig, why, count)) => format!("; top leak: {sig} x{count} ({why})"),
        None => String::new(),
    };
    format!(
        "received report {id}: {reason}; {n} leak(s){top}; {}",
        d.join("report.json").display()
    )
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// Render the HTML index of every received incident, newest first.
pub fn render_index(dir: &Path) -> String {
    let mut ids: Vec<String> = std::fs::read_dir(dir.join("incidents"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| safe_name(n))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids.reverse();
    let mut h = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>oomguard reports</title>\n\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:.5em 0 1.5em}\
         td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left}th{background:#eee}\
         .num{text-align:right}</style></head><body>\n<h1>oomguard: received reports</h1>\n",
    );
    h.push_str(&format!("<p>{} incident(s)</p>\n", ids.len()));
    for id in ids {
        let d = dir.join("incidents").join(&id);
        let meta = read_json(&d.join("meta.json")).unwrap_or(Value::Null);
        let report = read_json(&d.join("report.json"));
        let reason = meta.get("reason").and_then(Value::as_str).unwrap_or("?");
        h.push_str(&format!(
            "<h2 id=\"{0}\">{0}</h2>\n<p>reason: <b>{1}</b>",
            esc(&id),
            esc(reason)
        ));
        if let Some(n) = meta
            .get("evictions")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
        {
            h.push_str(&format!("; {n} incident(s) evicted before this one"));
        }
        if let Some(n) = meta
            .get("losses")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
        {
            h.push_str(&format!("; {n} loss(es) on the device"));
        }
        h.push_str("</p>\n<p>files:");
        let mut files: Vec<String> = std::fs::read_dir(&d)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| safe_name(n))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        for f in files {
            h.push_str(&format!(
                " <a href=\"incidents/{0}/{1}\">{1}</a>",
                esc(&id),
                esc(&f)
            ));
        }
        h.push_str("</p>\n");
        let Some(report) = report else {
            h.push_str("<p>no report received (yet)</p>\n");
            continue;
        };
        h.push_str("<h3>top leaks</h3>\n<table><tr><th>signature</th><th>reason</th><th>instances</th></tr>\n");
        for (sig, why, n) in top_leaks(&report, 10) {
            h.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{n}</td></tr>\n",
                esc(&sig),
                esc(&why)
            ));
        }
        h.push_str("</table>\n<h3>dominators</h3>\n<table><tr><th>class</th><th>retained bytes</th></tr>\n");
        for (class, size) in top_dominators(&report, 10) {
            h.push_str(&format!(
                "<tr><td>{}</td><td class=\"num\">{size}</td></tr>\n",
                esc(&class)
            ));
        }
        h.push_str("</table>\n");
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_escapes_and_orders() {
        let d = tempfile::tempdir().unwrap();
        let inc = d.path().join("incidents/1-a");
        std::fs::create_dir_all(&inc).unwrap();
        std::fs::write(
            inc.join("meta.json"),
            r#"{"reason":"heap <three strikes>"}"#,
        )
        .unwrap();
        std::fs::write(
            inc.join("report.json"),
            r#"{"gcPaths":[{"signature":"a.B","leakReason":"destroyed Activity","instanceCount":2},
                           {"signature":"<script>","leakReason":"x","instanceCount":9}],
                "dominators":[{"className":"byte[]","retainedSize":10},{"className":"java.lang.Object[]","retainedSize":99}]}"#,
        )
        .unwrap();
        let h = render_index(d.path());
        assert!(h.contains("heap &lt;three strikes&gt;"));
        assert!(h.contains("&lt;script&gt;"));
        assert!(!h.contains("<script>"));
        assert!(h.find("&lt;script&gt;").unwrap() < h.find("a.B").unwrap());
        assert!(h.find("java.lang.Object[]").unwrap() < h.find("byte[]").unwrap());
        let line = report_line(d.path(), "1-a");
        assert!(line.contains("2 leak(s); top leak: <script> x9"), "{line}");
    }
}
