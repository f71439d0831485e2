//! A leak as a trace: from its GC root through each object on the path to the leaking one,
//! with class names, the reference followed out of each, the status of each node (leaking,
//! not leaking, unknown, and why), the suspect references marked, and retained sizes.
//!
//! Two shapes are read: `gcPaths[i].trace` (`rootKind`, `root`, `nodes[]`) when the report has
//! it, else KOOM's `gcRoot` and `path[]` (each step `reference`, `referenceType`,
//! `declaredClass`; the last the leaking instance), which every report has. [`short_path`] is the
//! one-line form the collector groups and lists leaks by.
#![forbid(unsafe_code)]

use super::{bytes, esc, list, more, num, text};
use serde_json::Value;
use std::fmt::Write as _;

/// Nodes of one trace shown; the rest are counted.
pub const MAX_NODES: usize = 60;

/// One step of a path, in either shape: the class of the object and the reference followed
/// out of it (none for the last object).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Step {
    pub class_name: String,
    pub reference: Option<String>,
}

/// `com.example.Foo$Bar` → `Foo$Bar`; `java.lang.Object[]` → `Object[]`.
pub fn simple(class: &str) -> &str {
    class.rsplit('.').next().unwrap_or(class)
}

/// The field of a KOOM step: `reference` without its `declaredClass.` prefix
/// (`a.B.mField` → `mField`, `a.B[3]` → `[3]`).
pub fn koom_field<'a>(reference: &'a str, declared: &str) -> &'a str {
    match reference.strip_prefix(declared) {
        Some(rest) if !rest.is_empty() => rest.strip_prefix('.').unwrap_or(rest),
        _ => reference,
    }
}

/// The short form of a path: `root › Owner.field › Owner.field › … › Leaking`, at most the
/// first step and the last three with a count of those left out between.
pub fn short_path(root: &str, steps: &[Step], more_steps: u64) -> String {
    let part = |s: &Step| match &s.reference {
        Some(r) if r.starts_with('[') => format!("{}{r}", simple(&s.class_name)),
        Some(r) => format!("{}.{r}", simple(&s.class_name)),
        None => simple(&s.class_name).to_string(),
    };
    let mut parts: Vec<String> = Vec::new();
    if !root.is_empty() {
        parts.push(root.to_string());
    }
    let n = steps.len();
    if n == 0 {
        return parts.join(" › ");
    }
    if n <= 4 && more_steps == 0 {
        parts.extend(steps.iter().map(part));
    } else {
        parts.push(part(&steps[0]));
        let hidden = n.saturating_sub(4) as u64 + more_steps;
        parts.push(format!("… {hidden} more …"));
        parts.extend(steps[n.saturating_sub(3).max(1)..].iter().map(part));
    }
    parts.join(" › ")
}

/// The steps of a leak group's path (`trace.nodes` if present, else KOOM's `path`), and how
/// many were left out when it was read or by the analyser (`trace.leftOut`).
pub fn steps(leak: &Value) -> (String, Vec<Step>, u64) {
    if let Some(t) = leak.get("trace").filter(|t| t.is_object()) {
        let (nodes, left) = list(t, "nodes");
        let root = text(t, "rootKind").unwrap_or("").to_string();
        let steps = nodes
            .iter()
            .map(|n| Step {
                class_name: text(n, "className").unwrap_or("?").to_string(),
                reference: text(n, "reference").map(str::to_string),
            })
            .collect();
        let cut = t.get("leftOut").and_then(|c| num(c, "steps")).unwrap_or(0);
        return (root, steps, left + cut);
    }
    let (items, left) = list(leak, "path");
    let root = text(leak, "gcRoot").unwrap_or("").to_string();
    let steps = items
        .iter()
        .map(|i| {
            let declared = text(i, "declaredClass").unwrap_or("?");
            let leaking = text(i, "referenceType") == Some("LEAKING_INSTANCE");
            Step {
                class_name: declared.to_string(),
                reference: match (leaking, text(i, "reference")) {
                    (false, Some(r)) => Some(koom_field(r, declared).to_string()),
                    _ => None,
                },
            }
        })
        .collect();
    (root, steps, left)
}

/// Render leak group `leak` (an entry of `gcPaths`) as a trace, with `id` as its anchor.
pub(crate) fn leak(h: &mut String, leak: &Value, id: &str) {
    let class = text(leak, "className").unwrap_or("?");
    let _ = write!(
        h,
        "<div class=\"leak\" id=\"{}\"><h3><code>{}</code> <small>{}",
        esc(id),
        esc(class),
        esc(text(leak, "leakReason").unwrap_or("")),
    );
    if let Some(n) = num(leak, "instanceCount") {
        let _ = write!(h, " · {n} instance(s)");
    }
    if let Some(r) = num(leak, "retainedSize") {
        let _ = write!(h, " · retains {}", bytes(r));
    }
    h.push_str("</small></h3>\n<ol class=\"trace\">\n");
    match leak.get("trace").filter(|t| t.is_object()) {
        Some(t) => with_trace(h, t),
        None => koom(h, leak, class),
    }
    h.push_str("</ol>\n");
    if let Some(s) = text(leak, "signature") {
        let _ = writeln!(h, "<small>signature <code>{}</code></small>", esc(s));
    }
    h.push_str("</div>\n");
}

fn with_trace(h: &mut String, t: &Value) {
    let _ = writeln!(
        h,
        "<li class=\"root\">GC root: {} <span class=\"dim\">{}</span></li>",
        esc(text(t, "rootKind").unwrap_or("?")),
        esc(text(t, "root").unwrap_or(""))
    );
    let (nodes, left) = list(t, "nodes");
    let shown = nodes.len().min(MAX_NODES);
    // A long path's middle, left out by the analyser after node `after`.
    let cut = t
        .get("leftOut")
        .and_then(|c| Some((num(c, "after")?, num(c, "steps")?)));
    for (i, n) in nodes[..shown].iter().enumerate() {
        // Only a known status becomes a class name.
        let status = ["LEAKING", "NOT_LEAKING"]
            .into_iter()
            .find(|s| text(n, "status") == Some(*s))
            .unwrap_or("UNKNOWN");
        let _ = write!(
            h,
            "<li class=\"node {status}\"><code class=\"cls\">{}</code> <span class=\"dim\">{}</span> <span class=\"status\">{status}</span>",
            esc(text(n, "className").unwrap_or("?")),
            esc(text(n, "kind").unwrap_or("")),
        );
        if let Some(why) = text(n, "statusReason").filter(|w| !w.is_empty()) {
            let _ = write!(h, " <span class=\"why\">{}</span>", esc(why));
        }
        if let Some(r) = num(n, "retainedSize") {
            let _ = write!(h, " <span class=\"dim\">retains {}</span>", bytes(r));
        }
        if let Some(r) = text(n, "reference") {
            let suspect = n.get("suspect").and_then(Value::as_bool) == Some(true);
            let _ = write!(
                h,
                "<div class=\"ref{}\">↓ {} <code>{}</code></div>",
                if suspect { " suspect" } else { "" },
                esc(text(n, "referenceType").unwrap_or("")),
                esc(r)
            );
        }
        h.push_str("</li>\n");
        if let Some((_, steps)) = cut.filter(|&(after, _)| after == i as u64) {
            let _ = writeln!(h, "<li class=\"more\">… {steps} steps left out …</li>");
        }
    }
    let left = left + (nodes.len() - shown) as u64;
    if left > 0 {
        let _ = writeln!(h, "<li class=\"more\">{left} more node(s) not shown</li>");
    }
}

fn koom(h: &mut String, leak: &Value, class: &str) {
    let _ = writeln!(
        h,
        "<li class=\"root\">GC root: {}</li>",
        esc(text(leak, "gcRoot").unwrap_or("?"))
    );
    let (items, left) = list(leak, "path");
    let shown = items.len().min(MAX_NODES);
    for i in &items[..shown] {
        let declared = text(i, "declaredClass").unwrap_or("?");
        let kind = text(i, "referenceType").unwrap_or("");
        if kind == "LEAKING_INSTANCE" {
            let _ = writeln!(
                h,
                "<li class=\"node LEAKING\"><code class=\"cls\">{}</code> <span class=\"status\">LEAKING</span> <span class=\"why\">{}</span></li>",
                esc(declared),
                esc(text(leak, "leakReason").unwrap_or(""))
            );
            continue;
        }
        let field = koom_field(text(i, "reference").unwrap_or("?"), declared);
        let _ = writeln!(
            h,
            "<li class=\"node UNKNOWN\"><code class=\"cls\">{}</code><div class=\"ref\">↓ {} <code>{}</code></div></li>",
            esc(declared),
            esc(&kind.to_ascii_lowercase().replace('_', " ")),
            esc(field)
        );
    }
    let left = left + (items.len() - shown) as u64;
    if left > 0 {
        let _ = writeln!(h, "<li class=\"more\">{left} more step(s) not shown</li>");
    }
    if items.is_empty() {
        let _ = writeln!(
            h,
            "<li class=\"node LEAKING\"><code class=\"cls\">{}</code> <span class=\"status\">LEAKING</span></li>",
            esc(class)
        );
    }
}

/// Render the list of leak groups, at most `max` of them.
pub(crate) fn leaks(h: &mut String, report: &Value, max: usize) {
    let (all, left) = list(report, "gcPaths");
    if all.is_empty() && left == 0 {
        h.push_str("<p>No leak found.</p>\n");
        return;
    }
    let shown = all.len().min(max);
    for (i, l) in all[..shown].iter().enumerate() {
        leak(h, l, &format!("leak-{i}"));
    }
    more(h, left + (all.len() - shown) as u64, "leak group(s)");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(c: &str, r: Option<&str>) -> Step {
        Step {
            class_name: c.into(),
            reference: r.map(Into::into),
        }
    }

    #[test]
    fn short_paths() {
        let s = [
            st("a.Demo$Session", Some("sHistory")),
            st("java.util.ArrayList", Some("elementData")),
            st("java.lang.Object[]", Some("[4]")),
            st("a.MainActivity", None),
        ];
        assert_eq!(
            short_path("static field", &s, 0),
            "static field › Demo$Session.sHistory › ArrayList.elementData › Object[][4] › MainActivity"
        );
        let long: Vec<Step> = (0..9).map(|i| st(&format!("C{i}"), Some("f"))).collect();
        assert_eq!(
            short_path("", &long, 2),
            "C0.f › … 7 more … › C6.f › C7.f › C8.f"
        );
        assert_eq!(koom_field("a.B.mField", "a.B"), "mField");
        assert_eq!(koom_field("a.B[3]", "a.B"), "[3]");
        let koom = serde_json::json!({"gcRoot":"Local variable","path":[
            {"reference":"a.B.mX","referenceType":"INSTANCE_FIELD","declaredClass":"a.B"},
            {"reference":"a.Act","referenceType":"LEAKING_INSTANCE","declaredClass":"a.Act"}]});
        let (root, steps, _) = steps(&koom);
        assert_eq!(short_path(&root, &steps, 0), "Local variable › B.mX › Act");
    }

    /// A path the analyser cut shows where and how much it left out, on the page and in the
    /// short form.
    #[test]
    fn a_cut_path_says_what_was_left_out() {
        let n = |c: &str, r: Option<&str>| serde_json::json!({"className": c, "reference": r});
        let g = serde_json::json!({"className": "a.Act", "trace": {
            "rootKind": "JNI global", "root": "r",
            "nodes": [n("a.Node", Some("next")), n("a.Node", Some("next")), n("a.Act", None)],
            "leftOut": {"after": 0, "steps": 5}}});
        let mut h = String::new();
        leak(&mut h, &g, "x");
        let first = h.find("<code class=\"cls\">a.Node").unwrap();
        let gap = h.find("… 5 steps left out …").expect(&h);
        let second = h[first + 1..].find("<code class=\"cls\">a.Node").unwrap() + first + 1;
        assert!(first < gap && gap < second, "{h}");
        let (root, st, left) = steps(&g);
        assert_eq!(left, 5);
        assert_eq!(
            short_path(&root, &st, left),
            "JNI global › Node.next › … 5 more … › Node.next › Act"
        );
    }
}
