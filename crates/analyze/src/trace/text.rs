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
        sys::order::sort_by(&mut order, |&a, &b| {
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
    use crate::report::GcPath;
    use crate::trace::{LeftOut, Status, TraceNode};

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(clean("a\u{1b}[31mb\n"), "a?[31mb?");
    }

    fn node(
        kind: &str,
        class: &str,
        status: Status,
        reason: &str,
        reference: Option<(&str, &str, bool)>,
    ) -> TraceNode {
        TraceNode {
            class_name: class.into(),
            kind: kind.into(),
            status,
            status_reason: reason.into(),
            reference: reference.map(|r| r.0.into()),
            reference_type: reference.map(|r| r.1.into()),
            suspect: reference.is_some_and(|r| r.2),
            ..TraceNode::default()
        }
    }

    fn leak(class: &str, count: u64, retained: u64, root: &str, nodes: Vec<TraceNode>) -> GcPath {
        GcPath {
            instance_count: count,
            leak_reason: "mDestroyed is true".into(),
            class_name: class.into(),
            retained_size: retained,
            trace: Trace {
                root_kind: "static field".into(),
                root: root.into(),
                nodes,
                ..Trace::default()
            },
            ..GcPath::default()
        }
    }

    /// Five leaks: sizes at the units' bounds, ties broken by count then order, left columns
    /// shorter than the status column, between it and its gutter, and past it; a class object
    /// first and later on a path; an array element; a cut path; a control character.
    fn report() -> Report {
        use Status::*;
        let act = "com.app.MainActivity";
        // 56 characters: with its indent, 60, past the column's 58.
        let long = "com.app.a.rather.long.package.name.of.Some$InnerHolder12";
        assert_eq!(long.len(), 56);
        let first = vec![
            node(
                "class",
                "com.app.Statics",
                NotLeaking,
                "a class is never leaking",
                Some(("sKept", "static field", false)),
            ),
            node(
                "array",
                "java.lang.Object[]",
                Unknown,
                "",
                Some(("[3]", "array element", true)),
            ),
            node(
                "instance",
                long,
                Unknown,
                "",
                Some(("mNext", "instance field", true)),
            ),
            node(
                "instance",
                "com.app.Holder",
                Unknown,
                "",
                Some(("ref\u{1b}", "instance field", false)),
            ),
            node("instance", act, Leaking, "mDestroyed is true", None),
        ];
        let second = vec![
            node(
                "instance",
                "com.app.Holder",
                Unknown,
                "",
                Some(("ref", "instance field", true)),
            ),
            node(
                "instance",
                "com.app.a.Loader.with.a.name.of.forty.chars",
                NotLeaking,
                "a class loader",
                Some(("classes", "instance field", false)),
            ),
            node(
                "class",
                "com.app.Late",
                NotLeaking,
                "a class is never leaking",
                Some(("sKept", "static field", true)),
            ),
            node("instance", act, Leaking, "mDestroyed is true", None),
        ];
        let one = |c| vec![node("instance", c, Leaking, "", None)];
        let mut cut = leak(
            act,
            1,
            1 << 20,
            "class com.app.Statics, static field sKept",
            first,
        );
        cut.trace.left_out = Some(LeftOut {
            after: 1,
            steps: 12,
        });
        Report {
            gc_paths: vec![
                leak(
                    "com.app.B",
                    2,
                    1 << 10,
                    "JNI global reference to com.app.Holder @0x2700",
                    second,
                ),
                leak(
                    "com.app.Tiny",
                    3,
                    (1 << 10) - 1,
                    "tiny",
                    one("com.app.Tiny"),
                ),
                cut,
                leak("com.app.C\u{7}", 5, 1 << 10, "c", one("com.app.C")),
                leak("com.app.E", 5, 1 << 10, "e", one("com.app.E")),
            ],
            ..Report::default()
        }
    }

    #[test]
    fn leaks_print_largest_first_one_object_a_line_with_the_status_column() {
        let r = report();
        let text = LeakTraces { report: &r, top: 5 }.to_string();
        let want = [
            "leak 1 of 5: com.app.MainActivity (mDestroyed is true), 1 instance, 1.0 MB retained",
            "    root: class com.app.Statics, static field sKept (static field)",
            "    class com.app.Statics                                   NOT_LEAKING (a class is never leaking)",
            "      ↓ com.app.Statics.sKept",
            "    java.lang.Object[]                                      UNKNOWN",
            "      ↓ java.lang.Object[][3]                               ~~~ suspect",
            "      … 12 steps left out …",
            "    com.app.a.rather.long.package.name.of.Some$InnerHolder12  UNKNOWN",
            "      ↓ com.app.a.rather.long.package.name.of.Some$InnerHolder12.mNext  ~~~ suspect",
            "    com.app.Holder                                          UNKNOWN",
            "      ↓ com.app.Holder.ref?",
            "    com.app.MainActivity                                    LEAKING (mDestroyed is true)",
            "leak 2 of 5: com.app.C? (mDestroyed is true), 5 instances, 1.0 KB retained",
            "    root: c (static field)",
            "    com.app.C                                               LEAKING",
            "leak 3 of 5: com.app.E (mDestroyed is true), 5 instances, 1.0 KB retained",
            "    root: e (static field)",
            "    com.app.E                                               LEAKING",
            "leak 4 of 5: com.app.B (mDestroyed is true), 2 instances, 1.0 KB retained",
            "    root: JNI global reference to com.app.Holder @0x2700 (static field)",
            "    com.app.Holder                                          UNKNOWN",
            "      ↓ com.app.Holder.ref                                  ~~~ suspect",
            "    com.app.a.Loader.with.a.name.of.forty.chars             NOT_LEAKING (a class loader)",
            "      ↓ com.app.a.Loader.with.a.name.of.forty.chars.classes",
            "    com.app.Late                                            NOT_LEAKING (a class is never leaking)",
            "      ↓ com.app.Late.sKept                                  ~~~ suspect",
            "    com.app.MainActivity                                    LEAKING (mDestroyed is true)",
            "leak 5 of 5: com.app.Tiny (mDestroyed is true), 3 instances, 1023 bytes retained",
            "    root: tiny (static field)",
            "    com.app.Tiny                                            LEAKING",
        ];
        assert_eq!(text.lines().collect::<Vec<_>>(), want, "{text}");
        assert!(text.ends_with('\n'));
        let top = LeakTraces { report: &r, top: 1 }.to_string();
        assert!(
            top.starts_with("leak 1 of 5: com.app.MainActivity"),
            "{top}"
        );
        assert!(!top.contains("leak 2"), "{top}");
    }

    #[test]
    fn statuses_print_as_the_report_spells_them() {
        for s in [Status::NotLeaking, Status::Leaking, Status::Unknown] {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, s.as_str());
        }
    }
}
