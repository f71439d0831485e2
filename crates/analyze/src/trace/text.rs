//! The leak traces as plain text for a terminal: no colour, one object per line with its status,
//! and between two objects the reference, marked `~~~ suspect` where it is one; where a long
//! path was cut, a line "… N steps left out …" after the reference to the first. Text from the
//! dump (class and field names) has its control characters replaced by `?`, so a dump cannot
//! send escape sequences to the terminal.
#![forbid(unsafe_code)]

use super::Trace;
use crate::report::Report;
use std::fmt;

/// The `top` largest leaks of a report (by retained size), each with its trace.
pub struct LeakTraces<'a> {
    pub report: &'a Report,
    pub top: usize,
}

/// The text with control characters replaced by `?`.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

fn mb(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MB", b as f64 / (1024.0 * 1024.0))
    } else if b >= 1 << 10 {
        format!("{:.1} KB", b as f64 / 1024.0)
    } else {
        format!("{b} bytes")
    }
}

/// A left column padded to `w` characters (at least two spaces before the right one).
fn col(f: &mut fmt::Formatter<'_>, left: &str, right: &str, w: usize) -> fmt::Result {
    let n = left.chars().count();
    if right.is_empty() {
        return writeln!(f, "{left}");
    }
    let pad = if n + 2 > w { 2 } else { w - n };
    writeln!(f, "{left}{:pad$}{right}", "")
}

/// One trace, indented by four spaces.
pub fn write_trace(f: &mut fmt::Formatter<'_>, t: &Trace) -> fmt::Result {
    const W: usize = 60;
    writeln!(f, "    root: {} ({})", clean(&t.root), t.root_kind)?;
    for (i, n) in t.nodes.iter().enumerate() {
        let left = if i == 0 && n.kind == "class" {
            format!("    class {}", clean(&n.class_name))
        } else {
            format!("    {}", clean(&n.class_name))
        };
        let right = match (n.status, n.status_reason.is_empty()) {
            (s, true) => s.as_str().to_string(),
            (s, false) => format!("{} ({})", s.as_str(), clean(&n.status_reason)),
        };
        col(f, &left, &right, W)?;
        if let (Some(r), Some(ty)) = (&n.reference, &n.reference_type) {
            let owner = clean(&n.class_name);
            let step = match ty.as_str() {
                "array element" => format!("      ↓ {owner}{}", clean(r)),
                _ => format!("      ↓ {owner}.{}", clean(r)),
            };
            let mark = if n.suspect { "~~~ suspect" } else { "" };
            col(f, &step, mark, W)?;
        }
        if let Some(cut) = t.left_out.as_ref().filter(|c| c.after == i) {
            writeln!(f, "      … {} steps left out …", cut.steps)?;
        }
    }
    Ok(())
}

impl fmt::Display for LeakTraces<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.report;
        let mut order: Vec<usize> = (0..r.gc_paths.len()).collect();
        // The report's own order (see `report::build`), kept here for reports written
        // before it: the app's own leaks first, then the library leaks (`crate::library`).
        order.sort_by(|&a, &b| {
            let (x, y) = (&r.gc_paths[a], &r.gc_paths[b]);
            (x.library_leak.is_some())
                .cmp(&y.library_leak.is_some())
                .then(y.retained_size.cmp(&x.retained_size))
                .then(y.instance_count.cmp(&x.instance_count))
                .then(a.cmp(&b))
        });
        let total = order.len();
        for (k, &i) in order.iter().take(self.top).enumerate() {
            let g = &r.gc_paths[i];
            writeln!(
                f,
                "leak {} of {total}: {} ({}), {} instance{}, {} retained",
                k + 1,
                clean(&g.class_name),
                clean(&g.leak_reason),
                g.instance_count,
                if g.instance_count == 1 { "" } else { "s" },
                mb(g.retained_size),
            )?;
            for c in &g.consequences {
                writeln!(
                    f,
                    "    holds alone: {} × {} ({}), {}",
                    c.instance_count,
                    clean(&c.class_name),
                    clean(&c.leak_reason),
                    mb(c.retained_size)
                )?;
            }
            if let Some(l) = &g.library_leak {
                writeln!(
                    f,
                    "    library leak (Android or the device maker's code, not the app's): {}",
                    clean(&l.pattern)
                )?;
                writeln!(f, "    {}", clean(&l.description))?;
                if !l.tracked.is_empty() {
                    writeln!(f, "    tracked: {}", clean(&l.tracked))?;
                }
            }
            write_trace(f, &g.trace)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Status;

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(clean("a\u{1b}[31mb\n"), "a?[31mb?");
    }

    #[test]
    fn statuses_print_as_the_report_spells_them() {
        for s in [Status::NotLeaking, Status::Leaking, Status::Unknown] {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, s.as_str());
        }
    }
}
