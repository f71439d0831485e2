//! One incident's page: what the meta file says (reason, samples as a chart, running info,
//! why there is no dump), the report (leaks as traces, dominators as a treemap, what was
//! read), and the fd or thread inventory. Each part is optional: `analyze --html` has only a
//! report, an incident without a dump has no report.
#![forbid(unsafe_code)]

use super::lenient::{self, Omitted};
use super::{bytes, chart, esc, list, more, num, page, text, trace, treemap, utc};
use analyze::report::Report;
use serde_json::Value;
use std::fmt::Write as _;

/// Leak groups shown as traces.
pub const MAX_LEAKS: usize = 50;
/// Rows of an inventory, frames of a stack, stacks shown.
const MAX_ROWS: usize = 60;

/// An fd or thread inventory as the collector received it: the agent's JSON, or (from
/// something else) text shown as it is.
pub enum Inventory<'a> {
    Json { name: &'a str, value: &'a Value },
    Text { name: &'a str, text: &'a str },
}

/// What one page shows.
#[derive(Default)]
pub struct PageInput<'a> {
    /// The incident's id, or the dump's file name.
    pub title: &'a str,
    pub meta: Option<&'a Value>,
    /// `report.json` as read ([`capped`](super::capped)); the page reads it through
    /// `analyze::report`'s types ([`lenient`]).
    pub report: Option<&'a Value>,
    /// Why a part could not be read (a file, its byte offset and what was wrong).
    pub errors: Vec<String>,
    /// What the page says about how it was made (e.g. the build's mapping used, or missing).
    pub notes: Vec<String>,
    pub inventory: Option<Inventory<'a>>,
    /// Files to link to (relative links), with their sizes.
    pub files: Vec<(String, u64)>,
    /// A link back to the index, if there is one.
    pub back: Option<&'a str>,
}

/// The page of one incident.
pub fn incident_page(p: &PageInput<'_>) -> String {
    let mut h = String::new();
    if let Some(b) = p.back {
        let _ = writeln!(h, "<p><a href=\"{}\">← all incidents</a></p>", esc(b));
    }
    let _ = writeln!(h, "<h1>oomguard: <code>{}</code></h1>", esc(p.title));
    let report: Option<(Report, Omitted)> = p.report.map(|v| (lenient::read(v), Omitted::of(v)));
    let report_running = report
        .as_ref()
        .map(|(r, _)| &r.running_info)
        .filter(|ri| ri.is_object());
    let reason = p
        .meta
        .and_then(|m| text(m, "reason"))
        .or_else(|| report_running.and_then(|ri| text(ri, "reason")));
    if let Some(r) = reason {
        let _ = writeln!(h, "<p class=\"reason\" id=\"reason\">{}</p>", esc(r));
    }
    for e in &p.errors {
        let _ = writeln!(h, "<p class=\"error\">{}</p>", esc(e));
    }
    for n in &p.notes {
        let _ = writeln!(h, "<p class=\"dim note\">{}</p>", esc(n));
    }
    if let Some(m) = p.meta {
        for (k, what) in [
            ("dumpError", "no dump"),
            ("analysisError", "the analysis failed"),
        ] {
            if let Some(e) = text(m, k) {
                let _ = writeln!(h, "<p class=\"error\">{what}: {}</p>", esc(e));
            }
        }
        if let Some(ms) = num(m, "createdMs") {
            let _ = writeln!(h, "<p class=\"dim\">created on the device {}</p>", utc(ms));
        }
        h.push_str("<h2 id=\"samples\">The last minute of polls before the verdict</h2>\n");
        let (s, left) = list(m, "samples");
        chart::samples(&mut h, &s);
        more(&mut h, left, "sample(s)");
    }
    let running = p
        .meta
        .and_then(|m| m.get("runningInfo"))
        .or(report_running)
        .filter(|r| r.is_object());
    match &report {
        Some((r, om)) => {
            if let Some(b) = &r.analysis.budget {
                reduced(&mut h, b, r, om);
            }
            h.push_str("<h2 id=\"leaks\">Leaks</h2>\n");
            trace::leaks(&mut h, r, om, MAX_LEAKS);
            h.push_str("<h2 id=\"dominators\">Dominators</h2>\n");
            treemap::dominators(&mut h, r, om);
        }
        None if p.meta.is_some() => h.push_str("<h2>Leaks</h2>\n<p>No report received.</p>\n"),
        None => {}
    }
    if let Some(inv) = &p.inventory {
        inventory(&mut h, inv);
    }
    if let Some(ri) = running {
        h.push_str("<h2 id=\"running\">Running info</h2>\n");
        super::running::table(&mut h, ri);
    }
    // The analysis section as the file has it, every field shown, those this version does not
    // know too (like `runningInfo`, a table of what is there rather than of the schema).
    if let Some(a) = p
        .report
        .and_then(|r| r.get("analysis"))
        .filter(|a| a.is_object())
    {
        h.push_str("<h2 id=\"analysis\">What the analyser read</h2>\n");
        table(&mut h, a);
    }
    if let Some(m) = p.meta {
        let (missing, _) = list(m, "missing");
        if !missing.is_empty() {
            h.push_str("<p class=\"error\">Files the device no longer had:");
            for f in missing {
                let _ = write!(h, " <code>{}</code>", esc(f.as_str().unwrap_or("?")));
            }
            h.push_str("</p>\n");
        }
    }
    if !p.files.is_empty() {
        h.push_str("<h2 id=\"files\">Files</h2>\n<ul>\n");
        for (f, n) in &p.files {
            let _ = writeln!(
                h,
                "<li><a href=\"{0}\">{0}</a> <span class=\"dim\">{1}</span></li>",
                esc(f),
                bytes(*n)
            );
        }
        h.push_str("</ul>\n");
    }
    page(&format!("oomguard: {}", p.title), &h)
}

/// A two-column table of an object's scalar fields (nested values as compact JSON, cut).
fn table(h: &mut String, v: &Value) {
    let Some(o) = v.as_object() else { return };
    h.push_str("<table>\n");
    for (k, v) in o.iter().take(MAX_ROWS) {
        if k == super::capped::OMITTED {
            continue;
        }
        let shown = match v {
            Value::Null => "—".into(),
            other => super::running::raw(other),
        };
        let _ = writeln!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&shown));
    }
    h.push_str("</table>\n");
}

fn inventory(h: &mut String, inv: &Inventory<'_>) {
    match inv {
        Inventory::Text { name, text } => {
            let _ = writeln!(
                h,
                "<h2 id=\"inventory\">Inventory <small>{}</small></h2>\n<pre>{}</pre>",
                esc(name),
                esc(text)
            );
        }
        Inventory::Json { name, value } => {
            let kind = match text(value, "kind") {
                Some("threads") => "Threads",
                Some("fd") => "File descriptors",
                _ => "Inventory",
            };
            let _ = writeln!(
                h,
                "<h2 id=\"inventory\">{kind} <small>{}: {} listed</small></h2>",
                esc(name),
                num(value, "total").unwrap_or(0)
            );
            let (groups, left) = list(value, "groups");
            let top = groups
                .iter()
                .filter_map(|g| num(g, "count"))
                .max()
                .unwrap_or(1)
                .max(1);
            h.push_str("<table><tr><th>group</th><th>count</th></tr>\n");
            for g in groups.iter().take(MAX_ROWS) {
                let c = num(g, "count").unwrap_or(0);
                let _ = writeln!(
                    h,
                    "<tr><td><code>{}</code></td><td class=\"num\"><span class=\"bar\" style=\"width:{:.0}px\"></span>{c}</td></tr>",
                    esc(text(g, "name").unwrap_or("?")),
                    (150.0 * c as f64 / top as f64).max(1.0)
                );
            }
            h.push_str("</table>\n");
            let left = left
                + num(value, "more_groups").unwrap_or(0)
                + groups.len().saturating_sub(MAX_ROWS) as u64;
            more(h, left, "group(s)");
            let (stacks, sleft) = list(value, "java_stacks");
            if !stacks.is_empty() {
                h.push_str("<h3>Java stacks of the largest group</h3>\n");
            }
            for s in stacks.iter().take(MAX_ROWS) {
                let _ = writeln!(
                    h,
                    "<details><summary>{} thread(s), e.g. <code>{}</code></summary><pre>",
                    num(s, "count").unwrap_or(0),
                    esc(text(s, "example_thread").unwrap_or("?"))
                );
                let (frames, fleft) = list(s, "frames");
                for f in frames.iter().take(MAX_ROWS) {
                    let _ = writeln!(h, "  at {}", esc(f.as_str().unwrap_or("?")));
                }
                let fl = fleft + frames.len().saturating_sub(MAX_ROWS) as u64;
                if fl > 0 {
                    let _ = writeln!(h, "  … {fl} more frame(s)");
                }
                h.push_str("</pre></details>\n");
            }
            more(
                h,
                sleft + stacks.len().saturating_sub(MAX_ROWS) as u64,
                "stack(s)",
            );
        }
    }
}

/// A report made within a budget too small for the whole analysis (`analysis.budget`): why,
/// what it left out, and its class histogram.
fn reduced(h: &mut String, b: &analyze::budget::Budget, r: &Report, om: &Omitted) {
    let rows = &r.histogram;
    let _ = writeln!(
        h,
        "<p class=\"error\" id=\"budget\">Only part of the analysis: {}</p>",
        esc(&b.reason)
    );
    let _ = writeln!(
        h,
        "<p class=\"dim\">Left out: {}.</p>",
        esc(&b.left_out.join(", "))
    );
    h.push_str("<h2 id=\"histogram\">Classes by shallow size</h2>\n<table>\n");
    h.push_str("<tr><th>class</th><th>objects</th><th>shallow size</th></tr>\n");
    for r in rows.iter().take(MAX_ROWS) {
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            esc(&r.class_name),
            r.instance_count,
            bytes(r.shallow_size)
        );
    }
    h.push_str("</table>\n");
    let left = rows.len().saturating_sub(MAX_ROWS) as u64 + om.at("/histogram");
    more(h, left, "class(es)");
    // The findings of objects alone (no retained size: see `analysis.budget`; the path of each
    // class and reason is among the leaks).
    let found = &r.leak_objects;
    if found.is_empty() {
        return;
    }
    h.push_str("<h2 id=\"found\">Found in each object alone</h2>\n<table>\n");
    h.push_str("<tr><th>reason</th><th>class</th><th>object</th><th>detail</th></tr>\n");
    for o in found.iter().take(MAX_ROWS) {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td><code>{}</code></td><td><code>{:#x}</code></td><td>{}</td></tr>",
            esc(&o.leak_reason),
            esc(&o.class_name),
            o.object_id,
            esc(&o.ext_detail)
        );
    }
    h.push_str("</table>\n");
    let left = found.len().saturating_sub(MAX_ROWS) as u64
        + r.analysis.left_out.leak_objects
        + om.at("/leakObjects");
    more(h, left, "finding(s)");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(class: &str, with_trace: bool) -> Value {
        let mut leak = json!({
            "instanceCount": 2, "leakReason": "Activity Leak", "gcRoot": "System Class",
            "signature": "0123456789abcdef0123456789abcdef01234567",
            "path": [
                {"reference": "a.Demo$Session.sHistory", "referenceType": "STATIC_FIELD", "declaredClass": "a.Demo$Session"},
                {"reference": class, "referenceType": "LEAKING_INSTANCE", "declaredClass": class}],
            "className": class, "retainedSize": 123456
        });
        if with_trace {
            leak["trace"] = json!({
                "rootKind": "static field", "root": "class a.Demo$Session, static field sHistory",
                "nodes": [
                    {"className": "a.Demo$Session", "objectId": 1, "kind": "class", "status": "NOT_LEAKING",
                     "statusReason": "a class is never leaking", "reference": "sHistory",
                     "referenceType": "static field", "suspect": true, "retainedSize": 200000},
                    {"className": class, "objectId": 2, "kind": "instance", "status": "LEAKING",
                     "statusReason": "mDestroyed is true", "reference": null, "referenceType": null,
                     "suspect": false, "retainedSize": 123456}]
            });
        }
        json!({"runningInfo": {"appVersion": "1.0"}, "analysis": {"reachableBytes": 1000000},
               "gcPaths": [leak],
               "dominators": [{"className": class, "retainedSize": 5000, "count": 3, "gcRoot": "Thread",
                               "path": [{"reference": "a.T.x", "referenceType": "INSTANCE_FIELD", "declaredClass": "a.T"},
                                        {"reference": class, "referenceType": "LEAKING_INSTANCE", "declaredClass": class}]}]})
    }

    /// A report made within too small a budget says so, what it left out, and shows its
    /// histogram (escaped).
    #[test]
    fn a_report_within_too_small_a_budget_says_so_and_shows_its_histogram() {
        let r = json!({"analysis": {"objects": 3, "budget": {
                           "budgetBytes": 1, "neededBytes": 2, "estimate": "e",
                           "leftOut": ["gcPaths (leaks and their paths)", "dominators"],
                           "reason": "the whole analysis would need <more>"}},
                       "histogram": [{"className": "a.<B>", "instanceCount": 3, "shallowSize": 2048}],
                       "leakObjects": [{"className": "a.<Act>", "objectId": 256,
                                        "leakReason": "Activity Leak",
                                        "extDetail": "mDestroyed is true"}]});
        let page = incident_page(&PageInput {
            title: "t",
            report: Some(&r),
            ..PageInput::default()
        });
        assert!(
            page.contains("Only part of the analysis: the whole analysis would need &lt;more&gt;"),
            "{page}"
        );
        assert!(
            page.contains("Left out: gcPaths (leaks and their paths), dominators."),
            "{page}"
        );
        assert!(
            page.contains("<td><code>a.&lt;B&gt;</code></td><td>3</td><td>2.0 KB</td>"),
            "{page}"
        );
        // The findings of objects alone, under their own heading.
        assert!(
            page.contains(
                "<tr><td>Activity Leak</td><td><code>a.&lt;Act&gt;</code></td>\
                 <td><code>0x100</code></td><td>mDestroyed is true</td></tr>"
            ),
            "{page}"
        );
        // A whole report has neither.
        let page = incident_page(&PageInput {
            title: "t",
            report: Some(&report("a.C", true)),
            ..PageInput::default()
        });
        assert!(!page.contains("id=\"budget\"") && !page.contains("id=\"histogram\""));
        assert!(!page.contains("id=\"found\""));
    }

    /// A class name, a reason, an inventory group and a running-info value that are HTML
    /// (`<script>`, an attribute break-out) appear only as text.
    #[test]
    fn everything_from_the_report_is_escaped() {
        let evil = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>";
        for with_trace in [true, false] {
            let r = report(evil, with_trace);
            let meta = json!({"reason": evil, "runningInfo": {"x": evil},
                              "samples": [{"at_ms": 1, "heap_used": 5}, {"at_ms": 2000, "heap_used": 9, "heap_max": 10}]});
            let inv = json!({"kind": "fd", "total": 3, "groups": [{"name": evil, "count": 3}]});
            let page = incident_page(&PageInput {
                title: evil,
                meta: Some(&meta),
                report: Some(&r),
                inventory: Some(Inventory::Json {
                    name: "fds.txt",
                    value: &inv,
                }),
                files: vec![(evil.into(), 1)],
                ..PageInput::default()
            });
            assert_eq!(page.matches("<script").count(), 1, "{page}");
            assert!(!page.contains("<img"), "{page}");
            assert!(!page.contains("'>"));
            assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
            assert!(page.contains("<ol class=\"trace\">"));
            assert!(page.contains("<svg class=\"chart\""));
            assert!(page.contains("data-open=\"dom-0\""));
            assert_eq!(
                page.contains("class=\"ref suspect\""),
                with_trace,
                "{with_trace}"
            );
        }
    }

    /// The incident's list of Java threads reads as a count and names, not as JSON.
    #[test]
    fn the_java_threads_are_listed_by_name() {
        let threads: Vec<Value> = (1..=200)
            .map(|i| json!({"id": i, "name": format!("worker-{i}")}))
            .collect();
        let meta = json!({"reason": "r", "runningInfo": {"javaThreads": threads,
                          "other": [{"id": 1}], "empty": []}});
        let page = incident_page(&PageInput {
            title: "x",
            meta: Some(&meta),
            ..PageInput::default()
        });
        assert!(
            page.contains("<th>Java threads</th><td>200: worker-1, worker-2, "),
            "{page}"
        );
        assert!(
            page.contains("…</td>") && !page.contains("worker-200"),
            "cut at 300 characters: {page}"
        );
        assert!(
            page.contains("<th>other</th><td>[{&quot;id&quot;:1}]</td>"),
            "{page}"
        );
        // An empty list says nothing: left out.
        assert!(!page.contains("<th>empty</th>"), "{page}");
    }

    /// The last minute of polls is drawn, those of the verdict in red and said so.
    #[test]
    fn the_polls_of_the_verdict_stand_out_among_the_last_minutes() {
        let samples: Vec<Value> = (0..12u64)
            .map(|k| {
                let mut s = json!({"seq": k + 1, "at_ms": k * 5000, "heap_used": 100 + k * 10,
                                   "heap_max": 300});
                if k >= 9 {
                    s["verdict"] = json!(true);
                }
                s
            })
            .collect();
        let meta = json!({"reason": "r", "samples": samples});
        let page = incident_page(&PageInput {
            title: "x",
            meta: Some(&meta),
            ..PageInput::default()
        });
        assert!(
            page.contains("The last minute of polls before the verdict"),
            "{page}"
        );
        assert_eq!(page.matches("<svg class=\"chart\"").count(), 1, "{page}");
        assert_eq!(page.matches("<circle ").count(), 12, "{page}");
        assert_eq!(page.matches("fill=\"#c33\"").count(), 3, "{page}");
        assert!(page.contains("55.0 s: 210 B (the verdict's)"), "{page}");
        assert!(
            page.contains("red: the polls the verdict was taken on"),
            "{page}"
        );
    }

    #[test]
    fn no_leaks_and_no_report_render() {
        let r = json!({"gcPaths": [], "dominators": []});
        let page = incident_page(&PageInput {
            title: "x",
            report: Some(&r),
            ..PageInput::default()
        });
        assert!(page.contains("No leak found."));
        let meta = json!({"reason": "fd", "dumpError": "no dump: fd verdict"});
        let page = incident_page(&PageInput {
            title: "x",
            meta: Some(&meta),
            ..PageInput::default()
        });
        assert!(page.contains("No report received.") && page.contains("No samples."));
    }

    /// A report of 5,000 leak groups with paths of 100 nodes: the page shows 50 groups of 60
    /// nodes each and says how many were left out; it stays small.
    #[test]
    fn huge_reports_make_bounded_pages() {
        let node = json!({"className": "a.B", "status": "UNKNOWN", "reference": "f", "referenceType": "instance field"});
        let leak =
            json!({"className": "a.L", "trace": {"rootKind": "thread", "nodes": vec![node; 100]}});
        let dom = json!({"className": "a.D", "retainedSize": 10, "path": []});
        let r = json!({"gcPaths": vec![leak; 5000], "dominators": vec![dom; 5000]});
        let text = serde_json::to_vec(&r).unwrap();
        let v = crate::html::capped::from_slice(&text, crate::html::capped::Limits::PAGE).unwrap();
        let page = incident_page(&PageInput {
            title: "x",
            report: Some(&v),
            ..PageInput::default()
        });
        assert_eq!(page.matches("<ol class=\"trace\">").count(), MAX_LEAKS);
        assert!(
            page.contains("4950 more leak group(s) not shown"),
            "{}",
            &page[page.len() - 3000..]
        );
        assert!(page.contains("40 more node(s) not shown"));
        assert!(page.contains("4920 more dominator group(s) not shown"));
        assert!(page.len() < 1 << 20, "{}", page.len());
    }
}
