//! Instance layouts from the class dumps: reference slots, field offsets, detector roles.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// The chain of class `c` and its superclasses, most derived first (cycles cut).
pub(super) fn chain(classes: &[Class], mut c: u32) -> Vec<u32> {
    let mut v = Vec::new();
    while c != NONE && v.len() < 256 && !v.contains(&c) {
        v.push(c);
        c = classes[c as usize].super_idx;
    }
    v
}

/// Strong reference slots and data length of an instance of class `c`.
pub(super) fn layout(classes: &[Class], c: u32, id_size: u32) -> (Vec<(u32, u32, u16)>, u32) {
    let mut off = 0u32;
    let mut slots = Vec::new();
    for k in chain(classes, c) {
        let cl = &classes[k as usize];
        let is_reference = cl.name == "java.lang.ref.Reference";
        for (fi, f) in cl.fields.iter().enumerate() {
            if f.ty == BasicType::Object && !(is_reference && f.name == "referent") {
                slots.push((off, k, fi as u16));
            }
            off = off.saturating_add(f.ty.size(id_size));
        }
    }
    (slots, off)
}

/// Offset in an instance of `c` of the field `name` declared by the class named `decl`.
pub(super) fn field_offset(
    classes: &[Class],
    c: u32,
    decl: &str,
    name: &str,
    id_size: u32,
) -> Option<u32> {
    let mut off = 0u32;
    for k in chain(classes, c) {
        let cl = &classes[k as usize];
        for f in &cl.fields {
            if cl.name == decl && f.name == name {
                return Some(off);
            }
            off = off.saturating_add(f.ty.size(id_size));
        }
    }
    None
}

/// The type of field `name` that class `c` itself declares.
fn field_type(classes: &[Class], c: u32, name: &str) -> Option<BasicType> {
    classes[c as usize]
        .fields
        .iter()
        .find(|f| f.name == name)
        .map(|f| f.ty)
}

pub(super) const FRAGMENTS: [&str; 3] = [
    "androidx.fragment.app.Fragment",
    "android.support.v4.app.Fragment",
    "android.app.Fragment",
];

pub(super) fn role(classes: &[Class], c: u32, id_size: u32) -> Role {
    let ch = chain(classes, c);
    let has = |n: &str| ch.iter().any(|&k| classes[k as usize].name == n);
    let off = |decl: &str, name: &str| field_offset(classes, c, decl, name, id_size);
    if has("android.app.Activity") {
        if let Some(destroyed) = off("android.app.Activity", "mDestroyed") {
            return Role::Activity { destroyed };
        }
    }
    for f in FRAGMENTS {
        if has(f) {
            if let (Some(manager), Some(called)) = (off(f, "mFragmentManager"), off(f, "mCalled")) {
                return Role::Fragment { manager, called };
            }
        }
    }
    if has("android.graphics.Bitmap") {
        if let (Some(width), Some(height)) = (
            off("android.graphics.Bitmap", "mWidth"),
            off("android.graphics.Bitmap", "mHeight"),
        ) {
            return Role::Bitmap { width, height };
        }
    }
    if has("android.view.Window") {
        return Role::Window;
    }
    if has("libcore.util.NativeAllocationRegistry") {
        return Role::NativeAllocationRegistry;
    }
    if let Some(&k) = ch
        .iter()
        .find(|&&k| classes[k as usize].name.ends_with(".KeyedWeakReference"))
    {
        if let Some(referent) = off("java.lang.ref.Reference", "referent") {
            let kwr = classes[k as usize].name.as_str();
            let retained = off(kwr, "retainedUptimeMillis").filter(|_| {
                field_type(classes, k, "retainedUptimeMillis") == Some(BasicType::Long)
            });
            return Role::Watched { referent, retained };
        }
    }
    Role::None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A class named `name` of superclass index `super_idx` declaring `fields`.
    fn class(name: &str, super_idx: u32, fields: &[(&str, BasicType)]) -> Class {
        let mut c = super::super::pseudo(name.to_string());
        c.super_idx = super_idx;
        c.fields = (fields.iter())
            .map(|&(n, ty)| Field { name: n.into(), ty })
            .collect();
        c
    }

    /// The `referent` that `java.lang.ref.Reference` declares is no strong slot; its other
    /// references are, and so is a field of that name another class declares.
    #[test]
    fn a_references_referent_is_no_strong_slot() {
        let obj = BasicType::Object;
        let reference = [("referent", obj), ("queue", obj), ("x", BasicType::Int)];
        let classes = [
            class("java.lang.ref.Reference", NONE, &reference),
            class("app.Weak", 0, &[("referent", obj), ("next", obj)]),
        ];
        // Weak's own fields first (at 0 and 4), then Reference's (at 8, 12 and 16).
        let slots = vec![(0, 1, 0), (4, 1, 1), (12, 0, 1)];
        assert_eq!(layout(&classes, 1, 4), (slots, 20));
    }

    /// A chain of superclasses is cut at 256 classes.
    #[test]
    fn a_chain_of_superclasses_stops_at_256_classes() {
        let classes: Vec<Class> = (0..300u32)
            .map(|i| class("c", if i < 299 { i + 1 } else { NONE }, &[]))
            .collect();
        assert_eq!(chain(&classes, 0), (0..256).collect::<Vec<u32>>());
    }
}
