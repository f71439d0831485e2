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

    /// Turns the index's names back (see the module documentation).
    pub(crate) fn apply(&self, ix: &mut Index) {
        if self.classes.is_empty() && self.fields.is_empty() {
            return;
        }
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
