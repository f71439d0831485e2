//! Names turned back (issue 42): a release build's classes and fields are renamed by R8 or
//! ProGuard (`a.b.c` holds `x.y` through field `a`), and a leak's signature built from those
//! names changes with every build. Given the build's renames (read from its mapping file by the
//! caller: the collector's `mapping` module, with a well-kept parser), the index's class, field
//! and static field names are turned back before any path is named, so the report, its
//! signatures, the inspectors and the library leaks all see the original names, and a leak keeps
//! its group across builds. Names the renames do not know stay as the dump has them.
//!
//! This crate does not read mapping files (it ships inside the app, which never needs them).
#![forbid(unsafe_code)]

use crate::index::Index;
use std::collections::HashMap;

/// The renames of one build.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Renames {
    /// Obfuscated class name (dotted, `a.b`) → original (`com.app.Session`).
    pub classes: HashMap<String, String>,
    /// (obfuscated class name, obfuscated field name) → original field name.
    pub fields: HashMap<(String, String), String>,
    /// (obfuscated class name, obfuscated method name) → the methods renamed so, in file order
    /// (several: overloads given one name, or one method's line ranges, or inlined methods).
    pub methods: HashMap<(String, String), Vec<MethodRename>>,
}

/// One method line of a mapping: `12:14:void record(int):40:42 -> a`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MethodRename {
    /// The original name (`record`).
    pub original: String,
    /// The class it was declared by, when another (a method inlined from there).
    pub original_class: Option<String>,
    /// The obfuscated build's line range (`12..=14`), when the mapping has one.
    pub lines: Option<(u32, u32)>,
    /// The original first line (`40`), when the mapping has one.
    pub original_start: Option<u32>,
}

/// What turns an index's names back before the report is made (`Config::renames`): a
/// [`Renames`]. Behind a trait object so that a build whose analyses never rename (the shipped
/// library's: a mapping is the collector's and the command line's) holds none of its code.
pub trait Rename: Send + Sync + std::fmt::Debug {
    fn apply(&self, ix: &mut Index);
    /// A report made without the index (the report of what fits a budget: its histogram,
    /// findings and paths come from streaming passes) with its names turned back.
    fn report(&self, r: &mut crate::Report);
}

impl Rename for Renames {
    fn apply(&self, ix: &mut Index) {
        Renames::apply(self, ix);
    }
    fn report(&self, r: &mut crate::Report) {
        // (Through its JSON, as the collector renames a report it reads: one way for both.)
        let Ok(mut v) = serde_json::to_value(&*r) else {
            return;
        };
        self.report_json(&mut v);
        if let Ok(mut n) = serde_json::from_value::<crate::Report>(v) {
            // (The one field a report read back does not have: see `Conventions::vm`.)
            n.analysis.sizes.vm = r.analysis.sizes.vm;
            *r = n;
        }
    }
}

impl Renames {
    /// The original of class name `name` (arrays too: `a.b[][]` → `com.app.Session[][]`).
    pub fn class(&self, name: &str) -> Option<String> {
        let base = name.trim_end_matches("[]");
        let dims = &name[base.len()..];
        self.classes.get(base).map(|o| format!("{o}{dims}"))
    }

    /// The original of field `field` declared by the class obfuscated as `class`.
    pub fn field(&self, class: &str, field: &str) -> Option<&str> {
        self.fields
            .get(&(class.to_string(), field.to_string()))
            .map(String::as_str)
    }

    /// The original of stack frame `Class.method(File.java:12)` as the index writes it: class,
    /// method and line turned back, or `None` when the renames know neither class nor method.
    /// The line picks among the methods renamed alike (R8 and ProGuard give overloads one name
    /// and tell them apart by line ranges); with no line, or a line no range holds, the method
    /// is named only when all of them have one original name. An inlined line names the
    /// innermost method (the mapping's first).
    pub fn frame(&self, text: &str) -> Option<String> {
        let (head, at) = text.split_once('(')?;
        let (class, method) = head.rsplit_once('.')?;
        let at = at.strip_suffix(')')?;
        let (file, line) = match at.rsplit_once(':') {
            Some((f, l)) => match l.parse::<u32>() {
                Ok(l) => (f, Some(l)),
                Err(_) => (at, None),
            },
            None => (at, None),
        };
        let all = self
            .methods
            .get(&(class.to_string(), method.to_string()))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let by_line: Vec<&MethodRename> = all
            .iter()
            .filter(|m| matches!((m.lines, line), (Some((a, b)), Some(l)) if a <= l && l <= b))
            .collect();
        let picked = match by_line.first() {
            // ProGuard writes no original lines when it moved none: the line stays.
            Some(m) => Some((
                *m,
                line.map(|l| match (m.original_start, m.lines) {
                    (Some(o), Some((a, _))) => o + (l - a),
                    _ => l,
                }),
            )),
            None => all
                .first()
                .filter(|m| all.iter().all(|o| o.original == m.original))
                .map(|m| (m, line.filter(|_| all.iter().all(|o| o.lines.is_none())))),
        };
        let class_back = self.class(class);
        if picked.is_none() && class_back.is_none() {
            return None;
        }
        let (name, line) = match picked {
            Some((m, l)) => (m.original.as_str(), l),
            None => (method, line),
        };
        let class = picked
            .and_then(|(m, _)| m.original_class.clone())
            .or(class_back)
            .unwrap_or_else(|| class.to_string());
        Some(match line {
            Some(l) => format!("{class}.{name}({file}:{l})"),
            None => format!("{class}.{name}({file})"),
        })
    }

    /// Turns the index's names back (see the module documentation).
    pub(crate) fn apply(&self, ix: &mut Index) {
        if self.classes.is_empty() && self.fields.is_empty() && self.methods.is_empty() {
            return;
        }
        ix.threads.rename_frames(|t| self.frame(t));
        for c in &mut ix.classes {
            let obfuscated = c.name.clone();
            for f in &mut c.fields {
                if let Some(o) = self.field(&obfuscated, &f.name) {
                    f.name = o.to_string();
                }
            }
            for s in &mut c.statics {
                if let Some(o) = self.field(&obfuscated, &s.name) {
                    s.name = o.to_string();
                }
            }
            if let Some(o) = self.class(&obfuscated) {
                c.name = o;
            }
        }
    }
}
