//! A report made from an obfuscated build's dump, renamed afterwards (issue 42): the collector
//! receives reports the agent made on the device, where no mapping is, and turns their names back
//! with the build's renames when it shows them. Classes, fields (in path items and trace nodes;
//! a node's field under the class that declares it, `declaredClass`, when a superclass does),
//! stack frames and the object a root text names are renamed; each group's `signature` is
//! hashed again from its renamed path items, by the rule `report` hashes it with (the root, each
//! step as `Declaring.field`, `Class[]` for an array element, the leaking class), so a renamed
//! report's signatures are the ones `analyze --mapping` gives on the same dump, and the groups of
//! two builds meet. What needs the heap is not redone: a library leak is matched (or not) on the
//! names the report was made with.
#![forbid(unsafe_code)]

use crate::renames::Renames;
use crate::report::{DominatorGroup, GcPath, PathItem};
use crate::trace::Trace;
use serde_json::Value;
use sha1::{Digest, Sha1};
use std::collections::HashMap;

/// The step `item` adds to its path's signature.
fn step(item: &PathItem) -> String {
    match item.reference_type.as_str() {
        "INSTANCE_FIELD" => {
            let f = item.reference.rsplit_once('.').map_or("", |x| x.1);
            format!("{}.{f}", item.declared_class)
        }
        "ARRAY_ENTRY" => format!("{}[]", item.declared_class),
        _ => item.reference.clone(),
    }
}

/// A path's signature from its root name and items, as `report` hashes it.
pub fn signature(gc_root: &str, path: &[PathItem]) -> String {
    let mut h = Sha1::new();
    for s in std::iter::once(gc_root.to_string()).chain(path.iter().map(step)) {
        h.update(s.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

impl Renames {
    fn class_or(&self, name: &str) -> String {
        self.class(name).unwrap_or_else(|| name.to_string())
    }

    /// `item` with its names turned back.
    fn item(&self, item: &mut PathItem) {
        let decl = item.declared_class.clone();
        let r = &item.reference;
        item.reference = match item.reference_type.as_str() {
            "INSTANCE_FIELD" | "STATIC_FIELD" => {
                // `Owner.field`: the owner is the object's class (an instance field) or the
                // declaring class (a static one); the field is looked up on the declaring class.
                let (owner, f) = r.rsplit_once('.').unwrap_or((r.as_str(), ""));
                let f = self.field(&decl, f).unwrap_or(f);
                format!("{}.{f}", self.class_or(owner))
            }
            "ARRAY_ENTRY" | "CLASS" | "SUPERCLASS" | "CLASS_LOADER" | "UNKNOWN" => {
                match r.strip_prefix(decl.as_str()) {
                    Some(rest) if !decl.is_empty() => format!("{}{rest}", self.class_or(&decl)),
                    _ => r.clone(),
                }
            }
            "LEAKING_INSTANCE" => self.class_or(r),
            _ => r.clone(),
        };
        if !decl.is_empty() {
            item.declared_class = self.class_or(&decl);
        }
    }

    /// A trace with its names turned back (classes, the fields its nodes go through, the
    /// frame, the root text's class and frame).
    fn trace(&self, t: &mut Trace) {
        let mut root = t.root.clone();
        if let Some(th) = &mut t.thread {
            if let Some(f) = th.frame.clone() {
                if let Some(n) = self.frame(&f) {
                    root = root.replace(&f, &n);
                    th.frame = Some(n);
                }
            }
        }
        // "class C, static field f" or "… C @0x1f2e" (an object).
        if let Some(rest) = root.strip_prefix("class ") {
            let (c, tail) = rest.split_once(", static field ").unwrap_or((rest, ""));
            let f = self.field(c, tail).unwrap_or(tail).to_string();
            root = match rest.contains(", static field ") {
                true => format!("class {}, static field {f}", self.class_or(c)),
                false => format!("class {}", self.class_or(c)),
            };
        } else if let Some(at) = root.rfind(" @0x") {
            let start = root[..at].rfind([' ', '(']).map_or(0, |i| i + 1);
            let c = self.class_or(&root[start..at]);
            root = format!("{}{c}{}", &root[..start], &root[at..]);
        }
        t.root = root;
        for n in &mut t.nodes {
            // A field is named under the class that declares it (a superclass, if so said).
            let decl = match n.declared_class.is_empty() {
                true => n.class_name.clone(),
                false => n.declared_class.clone(),
            };
            if let Some(r) = &n.reference {
                if let Some(f) = self.field(&decl, r) {
                    n.reference = Some(f.to_string());
                }
            }
            n.class_name = self.class_or(&n.class_name);
            if !n.declared_class.is_empty() {
                n.declared_class = self.class_or(&n.declared_class);
            }
        }
    }

    /// A leak group with its names turned back and its signature hashed again.
    pub fn gc_path(&self, g: &mut GcPath) {
        g.class_name = self.class_or(&g.class_name);
        g.path.iter_mut().for_each(|i| self.item(i));
        g.signature = signature(&g.gc_root, &g.path);
        self.trace(&mut g.trace);
        for c in &mut g.consequences {
            c.class_name = self.class_or(&c.class_name);
        }
    }

    /// A dominator group with its names turned back and its signature hashed again.
    pub fn dominator(&self, d: &mut DominatorGroup) {
        d.class_name = self.class_or(&d.class_name);
        d.path.iter_mut().for_each(|i| self.item(i));
        if !d.signature.is_empty() {
            d.signature = signature(&d.gc_root, &d.path);
        }
        self.trace(&mut d.trace);
    }

    /// `report.json` as read (a JSON value) with its names turned back: `gcPaths`,
    /// `dominators`, `leakObjects` (their signatures follow their groups'), `classInfos` and
    /// `histogram` (a report of what fits a budget).
    /// An entry that does not read as its type is left as it is.
    pub fn report_json(&self, v: &mut Value) {
        let mut signatures: HashMap<String, String> = HashMap::new();
        if let Some(a) = v.get_mut("gcPaths").and_then(Value::as_array_mut) {
            for e in a {
                if let Ok(mut g) = serde_json::from_value::<GcPath>(e.clone()) {
                    let old = g.signature.clone();
                    self.gc_path(&mut g);
                    signatures.insert(old, g.signature.clone());
                    if let Ok(n) = serde_json::to_value(&g) {
                        *e = n;
                    }
                }
            }
        }
        if let Some(a) = v.get_mut("dominators").and_then(Value::as_array_mut) {
            for e in a {
                if let Ok(mut d) = serde_json::from_value::<DominatorGroup>(e.clone()) {
                    self.dominator(&mut d);
                    if let Ok(n) = serde_json::to_value(&d) {
                        *e = n;
                    }
                }
            }
        }
        for list in ["leakObjects", "classInfos", "histogram"] {
            let Some(a) = v.get_mut(list).and_then(Value::as_array_mut) else {
                continue;
            };
            for e in a.iter_mut().filter_map(Value::as_object_mut) {
                if let Some(Value::String(c)) = e.get_mut("className") {
                    *c = self.class_or(c);
                }
                if let Some(Value::String(s)) = e.get_mut("signature") {
                    if let Some(n) = signatures.get(s.as_str()) {
                        *s = n.clone();
                    }
                }
            }
        }
    }
}
