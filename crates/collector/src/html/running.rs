//! The running info of an incident for people: each field the agent writes by a name a person
//! reads, with its unit (bytes, milliseconds, a date), and nothing that is unknown (null, empty,
//! an API level of 0). A field this version does not know is shown as it came, under its key.
#![forbid(unsafe_code)]

use super::{bytes, esc, utc};
use serde_json::Value;
use std::fmt::Write as _;

/// How a known field is shown.
#[derive(Clone, Copy)]
enum Unit {
    Text,
    Count,
    Bytes,
    KiB,
    Ms,
    Date,
    YesNo,
    /// The API level: 0 is unknown.
    Level,
}

/// The known fields, in the order shown: key, name, unit.
const KNOWN: [(&str, &str, Unit); 27] = [
    ("kind", "trigger", Unit::Text),
    ("appVersion", "app version", Unit::Text),
    ("currentPage", "page on screen", Unit::Text),
    ("manufacturer", "device maker", Unit::Text),
    ("apiLevel", "Android API level", Unit::Level),
    ("is32bit", "32-bit process", Unit::YesNo),
    ("heapUsed", "Java heap used", Unit::Bytes),
    ("heapMax", "Java heap maximum", Unit::Bytes),
    ("fds", "open file descriptors", Unit::Count),
    ("threads", "threads", Unit::Count),
    ("vmRssKb", "resident memory (VmRSS)", Unit::KiB),
    ("dumper", "dumped by", Unit::Text),
    ("pauseMs", "app paused for the dump", Unit::Ms),
    ("gcWaitMs", "waited for the GC", Unit::Ms),
    ("dumpMs", "dump took", Unit::Ms),
    ("caughtBy", "caught by", Unit::Text),
    ("pid", "process id", Unit::Count),
    ("processStartMs", "process started", Unit::Date),
    ("agentStartMs", "agent started", Unit::Date),
    (
        "policyVersionAtDeath",
        "policy version at death",
        Unit::Count,
    ),
    ("exit", "how the process ended", Unit::Text),
    ("dumpInProgress", "a dump was running", Unit::YesNo),
    ("analysisInProgress", "an analysis was running", Unit::YesNo),
    ("tornSamples", "samples lost to a torn write", Unit::Count),
    (
        "tornLastWords",
        "last words lost to a torn write",
        Unit::YesNo,
    ),
    (
        "reportedByAppVersion",
        "reported by app version",
        Unit::Text,
    ),
    ("reason", "reason", Unit::Text),
];

/// Rows shown at most (the known ones first, then the others as they come).
const MAX_ROWS: usize = 60;

/// `v` shown in `unit`, or `None` when it says nothing (unknown, empty, not of the unit).
fn shown(v: &Value, unit: Unit) -> Option<String> {
    match (unit, v) {
        (_, Value::Null) => None,
        (Unit::Text, Value::String(s)) if s.trim().is_empty() => None,
        (Unit::Text, Value::String(s)) => Some(s.clone()),
        (Unit::Count, v) => v.as_u64().map(|n| n.to_string()),
        (Unit::Level, v) => v.as_u64().filter(|&n| n > 0).map(|n| n.to_string()),
        (Unit::Bytes, v) => v.as_u64().map(bytes),
        (Unit::KiB, v) => v.as_u64().map(|n| bytes(n.saturating_mul(1024))),
        (Unit::Ms, v) => v.as_f64().map(|ms| {
            if ms >= 1000.0 {
                format!("{:.2} s", ms / 1000.0)
            } else {
                format!("{ms:.1} ms")
            }
        }),
        (Unit::Date, v) => v.as_u64().filter(|&ms| ms > 0).map(utc),
        (Unit::YesNo, Value::Bool(b)) => Some(if *b { "yes" } else { "no" }.into()),
        (_, other) => Some(raw(other)),
    }
}

/// A value this page has no unit for: text as it is, a list of named things as "N: a, b", the
/// rest as compact JSON, cut (also the incident page's other tables).
pub(super) fn raw(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => super::capped::cut(&names(other).unwrap_or_else(|| other.to_string()), 300),
    }
}

/// A list of named things (`javaThreads`: `[{"id": 1, "name": "main"}, …]`) as "N: main, …".
fn names(v: &Value) -> Option<String> {
    let a = v.as_array().filter(|a| !a.is_empty())?;
    let n: Option<Vec<&str>> = a.iter().map(|e| e.get("name")?.as_str()).collect();
    Some(format!("{}: {}", a.len(), n?.join(", ")))
}

/// The running info `ri` as a two-column table: known fields by name and unit, unknown values
/// left out; then the fields this version does not know, under their keys.
pub(crate) fn table(h: &mut String, ri: &Value) {
    let Some(o) = ri.as_object() else { return };
    let mut rows: Vec<(String, String)> = Vec::new();
    for (key, name, unit) in KNOWN {
        if let Some(s) = o.get(key).and_then(|v| shown(v, unit)) {
            rows.push((name.to_string(), s));
        }
    }
    for (k, v) in o {
        if k == super::capped::OMITTED || KNOWN.iter().any(|(key, ..)| key == k) {
            continue;
        }
        let named = match k.as_str() {
            "javaThreads" => "Java threads",
            "lastWords" => "last words",
            "exitInfo" => "what the system says of the exit",
            "exitInfoError" => "why the system could not be asked",
            "trend" => "trend over the last minute",
            _ => k.as_str(),
        };
        match v {
            Value::Null => {}
            Value::String(s) if s.trim().is_empty() => {}
            Value::Array(a) if a.is_empty() => {}
            other => rows.push((named.to_string(), raw(other))),
        }
    }
    h.push_str("<table class=\"running\">\n");
    for (name, value) in rows.iter().take(MAX_ROWS) {
        let _ = writeln!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(name), esc(value));
    }
    h.push_str("</table>\n");
    if rows.len() > MAX_ROWS {
        let _ = writeln!(
            h,
            "<p class=\"more\">{} more field(s) not shown.</p>",
            rows.len() - MAX_ROWS
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rows(ri: &Value) -> Vec<(String, String)> {
        let mut h = String::new();
        table(&mut h, ri);
        h.lines()
            .filter_map(|l| {
                let l = l.strip_prefix("<tr><th>")?.strip_suffix("</td></tr>")?;
                let (k, v) = l.split_once("</th><td>")?;
                Some((k.to_string(), v.to_string()))
            })
            .collect()
    }

    #[test]
    fn known_fields_have_names_and_units_and_unknown_values_are_left_out() {
        let ri = json!({
            "appVersion": "1.4.2", "currentPage": "", "manufacturer": null, "apiLevel": 0,
            "is32bit": false, "heapMax": 268435456u64, "heapUsed": 254803968u64,
            "vmRssKb": 524288, "pauseMs": 177.968869, "dumpMs": 2466.5, "fds": 57,
            "processStartMs": 1795737600000u64, "javaThreads": [{"id": 1, "name": "main"}],
            "futureField": {"a": 1}, "emptyList": [],
        });
        let r = rows(&ri);
        let get = |k: &str| r.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("app version"), Some("1.4.2"));
        assert_eq!(get("Java heap maximum"), Some("256 MB"));
        assert_eq!(get("Java heap used"), Some("243 MB"));
        assert_eq!(get("resident memory (VmRSS)"), Some("512 MB"));
        assert_eq!(get("app paused for the dump"), Some("178.0 ms"));
        assert_eq!(get("dump took"), Some("2.47 s"));
        assert_eq!(get("open file descriptors"), Some("57"));
        assert_eq!(get("32-bit process"), Some("no"));
        assert_eq!(get("process started"), Some("2026-11-27 00:00:00 UTC"));
        assert_eq!(get("Java threads"), Some("1: main"));
        // Shown as it came, under its key (escaped).
        assert_eq!(get("futureField"), Some("{&quot;a&quot;:1}"));
        // Unknown: an empty page, no maker, API level 0, an empty list.
        for gone in [
            "page on screen",
            "device maker",
            "Android API level",
            "emptyList",
        ] {
            assert_eq!(get(gone), None, "{gone}: {r:?}");
        }
        // No raw key of a known field is shown.
        assert!(
            r.iter().all(|(n, _)| n != "heapMax" && n != "pauseMs"),
            "{r:?}"
        );
        // The known first, in their order.
        assert_eq!(r[0].0, "app version");
    }
}
