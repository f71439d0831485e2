//! A leak as a trace: from its GC root through each object on the path to the leaking one,
//! with class names, the reference followed out of each, the status of each node (leaking,
//! not leaking, unknown, and why), the suspect references marked, and retained sizes.
//!
//! Two shapes are read: `gcPaths[i].trace` (`rootKind`, `root`, `nodes[]`) when the report has
//! it, else KOOM's `gcRoot` and `path[]` (each step `reference`, `referenceType`,
//! `declaredClass`; the last the leaking instance), which every report has. [`short_path`] is the
//! one-line form the collector groups and lists leaks by.
#![forbid(unsafe_code)]

use super::lenient::Omitted;
use super::{bytes, esc, more};
use analyze::report::{GcPath, PathItem, Report};
use analyze::trace::Trace;
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

/// What the capped reader left out of an entry's two path lists ([`Omitted`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    /// Of KOOM's `path`.
    pub path: u64,
    /// Of `trace.nodes`.
    pub nodes: u64,
}

impl Left {
    /// The counts of the entry at JSON pointer `at` (`/gcPaths/3`, `/dominators/0`).
    pub fn at(om: &Omitted, at: &str) -> Left {
        Left {
            path: om.at(&format!("{at}/path")),
            nodes: om.at(&format!("{at}/trace/nodes")),
        }
    }
}

/// Whether an entry has a trace (older reports have none).
pub fn has_trace(t: &Trace) -> bool {
    !t.nodes.is_empty() || !t.root_kind.is_empty() || !t.root.is_empty()
}

/// `s`, or `or` when it is empty (a field missing reads as "").
fn or<'a>(s: &'a str, or: &'a str) -> &'a str {
    if s.is_empty() {
        or
    } else {
        s
    }
}

/// The steps of an entry's path (`trace.nodes` if it has a trace, else KOOM's `gcRoot` and
/// `path`), and how many were left out when it was read or by the analyser (`trace.leftOut`).
pub fn steps(
    gc_root: &str,
    path: &[PathItem],
    trace: &Trace,
    left: Left,
) -> (String, Vec<Step>, u64) {
    if has_trace(trace) {
        let steps = trace
            .nodes
            .iter()
            .map(|n| Step {
                class_name: or(&n.class_name, "?").to_string(),
                reference: n.reference.clone(),
            })
            .collect();
        let cut = trace.left_out.as_ref().map_or(0, |c| c.steps);
        return (trace.root_kind.clone(), steps, left.nodes + cut);
    }
    let steps = path
        .iter()
        .map(|i| {
            let declared = or(&i.declared_class, "?");
            let leaking = i.reference_type == "LEAKING_INSTANCE";
            Step {
                class_name: declared.to_string(),
                reference: match (leaking, i.reference.as_str()) {
                    (false, r) if !r.is_empty() => Some(koom_field(r, declared).to_string()),
                    _ => None,
                },
            }
        })
        .collect();
    (gc_root.to_string(), steps, left.path)
}

/// Render leak group `leak` (an entry of `gcPaths`) as a trace, with `id` as its anchor.
pub(crate) fn leak(h: &mut String, leak: &GcPath, left: Left, id: &str) {
    let class = or(&leak.class_name, "?");
    let _ = write!(
        h,
        "<div class=\"leak\" id=\"{}\"><h3><code>{}</code> <small>{}",
        esc(id),
        esc(class),
        esc(&leak.leak_reason),
    );
    let _ = write!(h, " · {} instance(s)", leak.instance_count);
    let _ = write!(h, " · retains {}", bytes(leak.retained_size));
    h.push_str("</small></h3>\n");
    for c in leak.consequences.iter().take(MAX_NODES) {
        let _ = writeln!(
            h,
            "<p class=\"consequence\">Holds alone: {} × <code>{}</code> <small>{}</small>, {}</p>",
            c.instance_count,
            esc(or(&c.class_name, "?")),
            esc(&c.leak_reason),
            bytes(c.retained_size)
        );
    }
    if let Some(l) = &leak.library_leak {
        let _ = write!(
            h,
            "<p class=\"library\">Library leak through <code>{}</code>: {}",
            esc(&l.pattern),
            esc(&l.description)
        );
        if !l.tracked.is_empty() {
            let _ = write!(h, " Tracked at {}.", esc(&l.tracked));
        }
        h.push_str("</p>\n");
    }
    h.push_str("<ol class=\"trace\">\n");
    if has_trace(&leak.trace) {
        with_trace(h, &leak.trace, left.nodes);
    } else {
        koom(h, leak, left.path, class);
    }
    h.push_str("</ol>\n");
    if !leak.signature.is_empty() {
        let _ = writeln!(
            h,
            "<small>signature <code>{}</code></small>",
            esc(&leak.signature)
        );
    }
    h.push_str("</div>\n");
}

fn with_trace(h: &mut String, t: &Trace, left: u64) {
    let _ = writeln!(
        h,
        "<li class=\"root\">GC root: {} <span class=\"dim\">{}</span></li>",
        esc(or(&t.root_kind, "?")),
        esc(&t.root)
    );
    let nodes = &t.nodes;
    let shown = nodes.len().min(MAX_NODES);
    // A long path's middle, left out by the analyser after node `after`.
    let cut = t.left_out.as_ref().map(|c| (c.after, c.steps));
    for (i, n) in nodes[..shown].iter().enumerate() {
        let status = n.status.as_str();
        let _ = write!(
            h,
            "<li class=\"node {status}\"><code class=\"cls\">{}</code> <span class=\"dim\">{}</span> <span class=\"status\">{status}</span>",
            esc(or(&n.class_name, "?")),
            esc(&n.kind),
        );
        if !n.status_reason.is_empty() {
            let _ = write!(h, " <span class=\"why\">{}</span>", esc(&n.status_reason));
        }
        let _ = write!(
            h,
            " <span class=\"dim\">retains {}</span>",
            bytes(n.retained_size)
        );
        if let Some(r) = &n.reference {
            let _ = write!(
                h,
                "<div class=\"ref{}\">↓ {} <code>{}</code></div>",
                if n.suspect { " suspect" } else { "" },
                esc(n.reference_type.as_deref().unwrap_or("")),
                esc(r)
            );
        }
        h.push_str("</li>\n");
        if let Some((_, steps)) = cut.filter(|&(after, _)| after == i) {
            let _ = writeln!(h, "<li class=\"more\">… {steps} steps left out …</li>");
        }
    }
    let left = left + (nodes.len() - shown) as u64;
    if left > 0 {
        let _ = writeln!(h, "<li class=\"more\">{left} more node(s) not shown</li>");
    }
}

fn koom(h: &mut String, leak: &GcPath, left: u64, class: &str) {
    let _ = writeln!(
        h,
        "<li class=\"root\">GC root: {}</li>",
        esc(or(&leak.gc_root, "?"))
    );
    let items = &leak.path;
    let shown = items.len().min(MAX_NODES);
    for i in &items[..shown] {
        let declared = or(&i.declared_class, "?");
        let kind = i.reference_type.as_str();
        if kind == "LEAKING_INSTANCE" {
            let _ = writeln!(
                h,
                "<li class=\"node LEAKING\"><code class=\"cls\">{}</code> <span class=\"status\">LEAKING</span> <span class=\"why\">{}</span></li>",
                esc(declared),
                esc(&leak.leak_reason)
            );
            continue;
        }
        let field = koom_field(or(&i.reference, "?"), declared);
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
pub(crate) fn leaks(h: &mut String, report: &Report, om: &Omitted, max: usize) {
    let all = &report.gc_paths;
    let left = om.at("/gcPaths");
    if all.is_empty() && left == 0 {
        h.push_str("<p>No leak found.</p>\n");
        return;
    }
    let shown = all.len().min(max);
    // The app's own leaks, then the library leaks apart (`analyze::library`).
    for library in [false, true] {
        let mut first = true;
        for (i, l) in all[..shown].iter().enumerate() {
            if l.library_leak.is_some() != library {
                continue;
            }
            if library && first {
                h.push_str("<h3 id=\"library-leaks\">Library leaks</h3>\n<p class=\"dim\">Known leaks of the Android framework or of the device maker's build, on this device's API level: not in the app's code, though the app may work around them.</p>\n");
            }
            first = false;
            leak(
                h,
                l,
                Left::at(om, &format!("/gcPaths/{i}")),
                &format!("leak-{i}"),
            );
        }
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
        let koom: GcPath = super::super::lenient::read(&koom);
        let (root, steps, _) = steps(&koom.gc_root, &koom.path, &koom.trace, Left::default());
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
        let g: GcPath = super::super::lenient::read(&g);
        let mut h = String::new();
        leak(&mut h, &g, Left::default(), "x");
        let first = h.find("<code class=\"cls\">a.Node").unwrap();
        let gap = h.find("… 5 steps left out …").expect(&h);
        let second = h[first + 1..].find("<code class=\"cls\">a.Node").unwrap() + first + 1;
        assert!(first < gap && gap < second, "{h}");
        let (root, st, left) = steps(&g.gc_root, &g.path, &g.trace, Left::default());
        assert_eq!(left, 5);
        assert_eq!(
            short_path(&root, &st, left),
            "JNI global › Node.next › … 5 more … › Node.next › Act"
        );
    }
}
