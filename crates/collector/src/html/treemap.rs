//! The dominators as a picture: a treemap (inline SVG) of the largest dominator groups by
//! retained size, each cell opening its place in a tree below (nested `<details>`) that
//! groups the same groups by the path they hang from: GC root, then each reference, then the
//! group itself, every branch with the bytes retained beneath it.
//!
//! Bounded: at most [`MAX_GROUPS`] groups, [`MAX_DEPTH`] levels (longer paths keep their first
//! and last steps), so the tree has at most a few thousand nodes.
#![forbid(unsafe_code)]

use super::lenient::Omitted;
use super::trace::{simple, steps, Left};
use super::{bytes, esc, more};
use analyze::report::{DominatorGroup, Report};
use std::fmt::Write as _;

/// Dominator groups drawn.
pub const MAX_GROUPS: usize = 80;
/// Levels of the tree below the root.
pub const MAX_DEPTH: usize = 12;

const W: f64 = 900.0;
const H: f64 = 300.0;
const COLORS: [&str; 8] = [
    "#5b8bd0", "#e08a3c", "#5aa56a", "#c2555a", "#8c6bb8", "#3fa3a8", "#b8913a", "#7a8793",
];

/// x, y, width, height.
type Rect = (f64, f64, f64, f64);

#[derive(Default)]
struct Node {
    label: String,
    size: u64,
    children: Vec<usize>,
    /// The dominator group this node is (a leaf).
    group: Option<usize>,
}

/// Render `report.dominators` as a treemap and a tree.
pub(crate) fn dominators(h: &mut String, report: &Report, om: &Omitted) {
    let all: Vec<&DominatorGroup> = report.dominators.iter().collect();
    let left = om.at("/dominators");
    if all.is_empty() {
        h.push_str("<p>No dominator in the report.</p>\n");
        more(h, left, "dominator group(s)");
        return;
    }
    let groups = &all[..all.len().min(MAX_GROUPS)];
    let sizes: Vec<u64> = groups.iter().map(|d| d.retained_size).collect();
    let total: u64 = sizes.iter().sum();
    // (0: a report that does not say.)
    let reachable = Some(report.analysis.reachable_bytes).filter(|&r| r > 0 && r >= total);
    let _ = write!(
        h,
        "<p>The {} largest dominator group(s) retain {}",
        groups.len(),
        bytes(total)
    );
    if let Some(r) = reachable {
        let _ = write!(
            h,
            " of the {} reachable ({:.0} %)",
            bytes(r),
            100.0 * total as f64 / r.max(1) as f64
        );
    }
    h.push_str(". Click a cell to open its path below.</p>\n");

    let (nodes, roots_of) = tree(groups, &sizes, om);
    let mut kinds: Vec<&str> = Vec::new();
    for r in &roots_of {
        if !kinds.contains(&r.as_str()) {
            kinds.push(r);
        }
    }
    let color = |gi: usize| {
        let k = kinds.iter().position(|k| *k == roots_of[gi]).unwrap_or(0);
        COLORS[k % COLORS.len()]
    };

    cells_svg(h, groups, &sizes, &roots_of, &color);
    h.push_str("\n<div class=\"tree\">\n");
    branch(h, &nodes, 0, nodes[0].size.max(1), groups, 0);
    h.push_str("</div>\n");
    more(
        h,
        left + (all.len() - groups.len()) as u64,
        "dominator group(s)",
    );
}

/// The tree of the groups' paths: root → GC root → references → group; and each group's root.
fn tree(groups: &[&DominatorGroup], sizes: &[u64], om: &Omitted) -> (Vec<Node>, Vec<String>) {
    let mut nodes = vec![Node {
        label: "all groups".into(),
        ..Node::default()
    }];
    let mut roots_of = Vec::with_capacity(groups.len());
    for (gi, d) in groups.iter().enumerate() {
        let left = Left::at(om, &format!("/dominators/{gi}"));
        let (root, st, _) = steps(&d.gc_root, &d.path, &d.trace, left);
        let mut labels = vec![if root.is_empty() {
            "(unknown root)".to_string()
        } else {
            root.clone()
        }];
        let inner = st.len().saturating_sub(1);
        for (i, s) in st[..inner].iter().enumerate() {
            if inner > MAX_DEPTH && i == MAX_DEPTH / 2 {
                labels.push(format!("… {} step(s) …", inner - MAX_DEPTH + 1));
            }
            if inner > MAX_DEPTH && i >= MAX_DEPTH / 2 && i < inner - MAX_DEPTH / 2 + 1 {
                continue;
            }
            labels.push(match &s.reference {
                Some(r) if r.starts_with('[') => format!("{}{r}", s.class_name),
                Some(r) => format!("{}.{r}", s.class_name),
                None => s.class_name.clone(),
            });
        }
        roots_of.push(labels[0].clone());
        let size = sizes[gi];
        nodes[0].size += size;
        let mut at = 0;
        for l in labels {
            let found = nodes[at]
                .children
                .iter()
                .copied()
                .find(|&c| nodes[c].group.is_none() && nodes[c].label == l);
            at = match found {
                Some(c) => c,
                None => {
                    nodes.push(Node {
                        label: l,
                        ..Node::default()
                    });
                    let c = nodes.len() - 1;
                    nodes[at].children.push(c);
                    c
                }
            };
            nodes[at].size += size;
        }
        nodes.push(Node {
            label: class_of(d).to_string(),
            size,
            children: Vec::new(),
            group: Some(gi),
        });
        let leaf = nodes.len() - 1;
        nodes[at].children.push(leaf);
    }
    (nodes, roots_of)
}

/// The treemap of the groups, biggest first, coloured by their root.
fn cells_svg(
    h: &mut String,
    groups: &[&DominatorGroup],
    sizes: &[u64],
    roots_of: &[String],
    color: &dyn Fn(usize) -> &'static str,
) {
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    let mut cells = Vec::new();
    let items: Vec<(usize, u64)> = order.iter().map(|&i| (i, sizes[i].max(1))).collect();
    layout(&items, (0.0, 0.0, W, H), &mut cells);
    let _ = write!(
        h,
        "<svg class=\"tm\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"dominators by retained size\">"
    );
    for (gi, (x, y, w, ht)) in cells {
        let d = groups[gi];
        let class = class_of(d);
        let _ = write!(
            h,
            "<g><rect data-open=\"dom-{gi}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{ht:.1}\" fill=\"{}\"><title>{} × {}: {} ({})</title></rect>",
            color(gi),
            esc(class),
            count_of(d),
            bytes(sizes[gi]),
            esc(&roots_of[gi])
        );
        if w > 40.0 && ht > 16.0 {
            // A nested <svg> clips its labels to the cell.
            let _ = write!(
                h,
                "<svg x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{ht:.1}\" pointer-events=\"none\"><text x=\"3\" y=\"13\" fill=\"#fff\">{}</text>",
                (w - 2.0).max(0.0),
                esc(simple(class))
            );
            if ht > 30.0 {
                let _ = write!(
                    h,
                    "<text x=\"3\" y=\"26\" fill=\"#fff\">{}</text>",
                    esc(&bytes(sizes[gi]))
                );
            }
            h.push_str("</svg>");
        }
        h.push_str("</g>");
    }
    h.push_str("</svg>");
}

/// A group's class ("?" when the report has none).
fn class_of(d: &DominatorGroup) -> &str {
    if d.class_name.is_empty() {
        "?"
    } else {
        &d.class_name
    }
}

/// A group's count (1 when the report has none).
fn count_of(d: &DominatorGroup) -> u64 {
    if d.count == 0 {
        1
    } else {
        d.count
    }
}

fn branch(
    h: &mut String,
    nodes: &[Node],
    at: usize,
    total: u64,
    groups: &[&DominatorGroup],
    depth: usize,
) {
    let n = &nodes[at];
    let width = (200.0 * n.size as f64 / total as f64).max(1.0);
    let pct = 100.0 * n.size as f64 / total as f64;
    if let Some(gi) = n.group {
        let d = groups[gi];
        let _ = writeln!(
            h,
            "<div class=\"group\" id=\"dom-{gi}\"><span class=\"bar\" style=\"width:{width:.0}px\"></span><code>{}</code> × {} <b>{}</b> <span class=\"dim\">{pct:.1} %</span></div>",
            esc(&n.label),
            count_of(d),
            bytes(n.size)
        );
        return;
    }
    let mut kids = n.children.clone();
    kids.sort_by_key(|&c| std::cmp::Reverse(nodes[c].size));
    let _ = writeln!(
        h,
        "<details class=\"{}\"{}><summary><span class=\"bar\" style=\"width:{width:.0}px\"></span><code>{}</code> <b>{}</b> <span class=\"dim\">{pct:.1} %</span></summary>",
        if depth == 0 { "top" } else { "branch" },
        if depth == 0 { " open" } else { "" },
        esc(&n.label),
        bytes(n.size)
    );
    for c in kids {
        branch(h, nodes, c, total, groups, depth + 1);
    }
    h.push_str("</details>\n");
}

/// A binary treemap: `items` (largest first) split in two of about equal weight, along the
/// longer side of the rectangle, until each is alone.
fn layout(items: &[(usize, u64)], r: Rect, out: &mut Vec<(usize, Rect)>) {
    match items {
        [] => {}
        [(i, _)] => out.push((*i, r)),
        _ => {
            let total: u64 = items.iter().map(|i| i.1).sum();
            let mut acc = 0;
            let mut cut = 1;
            for (k, it) in items.iter().enumerate() {
                acc += it.1;
                if acc * 2 >= total {
                    cut = (k + 1).clamp(1, items.len() - 1);
                    break;
                }
            }
            let a: u64 = items[..cut].iter().map(|i| i.1).sum();
            let f = a as f64 / total as f64;
            let (x, y, w, h) = r;
            let (ra, rb) = if w >= h {
                ((x, y, w * f, h), (x + w * f, y, w * (1.0 - f), h))
            } else {
                ((x, y, w, h * f), (x, y + h * f, w, h * (1.0 - f)))
            };
            layout(&items[..cut], ra, out);
            layout(&items[cut..], rb, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cover_the_area_in_proportion() {
        let items = [(0, 50), (1, 30), (2, 15), (3, 5)];
        let mut out = Vec::new();
        layout(&items, (0.0, 0.0, 100.0, 100.0), &mut out);
        assert_eq!(out.len(), 4);
        for (i, (_, _, w, h)) in &out {
            let want = items[*i].1 as f64 * 100.0;
            assert!((w * h - want).abs() < 1e-6, "{i}: {}", w * h);
        }
    }
}
