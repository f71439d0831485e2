//! The samples before a verdict as small line charts (inline SVG): the Java heap used against
//! its maximum, the open fds against their limit, the threads, the resident memory. The agent
//! sends the polls of the last minute its flight recorder holds, those the verdict was taken on
//! marked (`"verdict": true`, drawn larger and red). A chart is drawn only for a figure the
//! samples carry that moved or came near its limit; at most [`MAX_POINTS`] points (the
//! newest), each with its value as a tooltip.
#![forbid(unsafe_code)]

use super::{bytes, esc, num};
use serde_json::Value;
use std::fmt::Write as _;

/// Samples drawn per chart (the newest).
pub const MAX_POINTS: usize = 600;

const W: f64 = 560.0;
const H: f64 = 150.0;
const LEFT: f64 = 70.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 22.0;

struct Series {
    name: &'static str,
    key: &'static str,
    limit: Option<&'static str>,
    fmt: fn(u64) -> String,
}

fn count(n: u64) -> String {
    n.to_string()
}
fn kb(n: u64) -> String {
    bytes(n.saturating_mul(1024))
}

const SERIES: [Series; 4] = [
    Series {
        name: "Java heap used",
        key: "heap_used",
        limit: Some("heap_max"),
        fmt: bytes,
    },
    Series {
        name: "open file descriptors",
        key: "fds",
        limit: Some("fd_soft_limit"),
        fmt: count,
    },
    Series {
        name: "threads",
        key: "threads",
        limit: None,
        fmt: count,
    },
    Series {
        name: "resident memory (VmRSS)",
        key: "vm_rss_kb",
        limit: None,
        fmt: kb,
    },
];

/// Charts of `samples` (a list of the agent's samples, oldest first).
pub(crate) fn samples(h: &mut String, samples: &[&Value]) {
    let from = samples.len().saturating_sub(MAX_POINTS);
    let s = &samples[from..];
    if s.is_empty() {
        h.push_str("<p>No samples.</p>\n");
        return;
    }
    if from > 0 {
        let _ = writeln!(
            h,
            "<p class=\"more\">The oldest {from} sample(s) are not drawn.</p>"
        );
    }
    let t0 = s.iter().filter_map(|v| num(v, "at_ms")).min().unwrap_or(0);
    let mut drawn = 0;
    for ser in &SERIES {
        let pts: Vec<Point> = s
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                let y = num(v, ser.key)?;
                let x = num(v, "at_ms").map_or(i as u64 * 1000, |t| t.saturating_sub(t0));
                // A limit of 0 (unknown) or u64::MAX (unlimited) is not drawn.
                let lim = ser
                    .limit
                    .and_then(|k| num(v, k))
                    .filter(|&l| l > 0 && l < u64::MAX / 2);
                let verdict = v.get("verdict").and_then(Value::as_bool) == Some(true);
                Some((x, y, lim, verdict))
            })
            .collect();
        // A figure that stayed put far from its limit says nothing about the verdict.
        let lo = pts.iter().map(|p| p.1).min().unwrap_or(0);
        let hi = pts.iter().map(|p| p.1).max().unwrap_or(0);
        let near_limit = pts.iter().any(|p| p.2.is_some_and(|l| p.1 >= l / 2));
        if hi == 0 || (lo == hi && !near_limit) {
            continue;
        }
        chart(h, ser, &pts);
        drawn += 1;
    }
    if drawn == 0 {
        h.push_str("<p>No figure of the samples moved.</p>\n");
    }
}

/// A point: ms from the first sample, the value, the limit (if known), a poll of the verdict.
type Point = (u64, u64, Option<u64>, bool);

fn chart(h: &mut String, ser: &Series, pts: &[Point]) {
    let xmax = pts.iter().map(|p| p.0).max().unwrap_or(0).max(1) as f64;
    let lim = pts.iter().filter_map(|p| p.2).max();
    let ymax_v = pts
        .iter()
        .map(|p| p.1)
        .max()
        .unwrap_or(0)
        .max(lim.unwrap_or(0));
    // The axis starts below the lowest sample by half the span up to the top (the limit, if
    // higher), at least a tenth of the top, not at zero: a rise of a few percent near a limit
    // stays visible, and a change of a few bytes does not look like one.
    let lo = pts.iter().map(|p| p.1).min().unwrap_or(0);
    let ymin_v = lo.saturating_sub(((ymax_v - lo) / 2).max(ymax_v / 10));
    let ymax = ymax_v.max(ymin_v + 1) as f64 + (ymax_v - ymin_v) as f64 * 0.05 + 1.0;
    let ymin = ymin_v as f64;
    let px = |x: u64| LEFT + (W - LEFT - 10.0) * (x as f64 / xmax);
    let py = |y: u64| TOP + (H - TOP - BOTTOM) * (1.0 - (y as f64 - ymin) / (ymax - ymin));
    let _ = write!(
        h,
        "<figure><svg class=\"chart\" data-series=\"{}\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{}\">\
         <line class=\"axis\" x1=\"{LEFT}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\"/><line class=\"axis\" x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{b}\"/>\
         <text x=\"{tx}\" y=\"{ty0}\" text-anchor=\"end\">{}</text><text x=\"{tx}\" y=\"{b}\" text-anchor=\"end\">{}</text>\
         <text x=\"{LEFT}\" y=\"{H}\" dy=\"-4\">0 s</text><text x=\"{r}\" y=\"{H}\" dy=\"-4\" text-anchor=\"end\">{:.1} s</text>",
        ser.key,
        esc(ser.name),
        esc(&(ser.fmt)(ymax_v)),
        esc(&(ser.fmt)(ymin_v)),
        xmax / 1000.0,
        b = H - BOTTOM,
        r = W - 10.0,
        tx = LEFT - 4.0,
        ty0 = py(ymax_v) + 4.0,
    );
    if let Some(l) = lim {
        let _ = write!(
            h,
            "<line class=\"lim\" x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\"><title>limit {}</title></line>",
            W - 10.0,
            esc(&(ser.fmt)(l)),
            y = py(l)
        );
    }
    h.push_str("<polyline class=\"line\" points=\"");
    for p in pts {
        let _ = write!(h, "{:.1},{:.1} ", px(p.0), py(p.1));
    }
    h.push_str("\"/>");
    for p in pts {
        let (r, fill, what) = if p.3 {
            ("4.5", "#c33", " (the verdict's)")
        } else {
            ("3", "#36c", "")
        };
        let _ = write!(
            h,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{r}\" fill=\"{fill}\"><title>{:.1} s: {}{what}</title></circle>",
            px(p.0),
            py(p.1),
            p.0 as f64 / 1000.0,
            esc(&(ser.fmt)(p.1))
        );
    }
    let _ = writeln!(
        h,
        "</svg><figcaption>{}{}{}</figcaption></figure>",
        esc(ser.name),
        if lim.is_some() {
            " (dashed: its limit)"
        } else {
            ""
        },
        if pts.iter().any(|p| p.3) {
            "; red: the polls the verdict was taken on"
        } else {
            ""
        }
    );
}
