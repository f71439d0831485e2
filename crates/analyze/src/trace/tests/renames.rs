//! Names turned back (`crate::renames`, issue 42): a dump whose app classes and fields are
//! renamed (as R8 does) analysed with the build's renames gives the report of the same dump
//! with its original names (names, paths, traces, signatures); without them it shows the
//! renamed names.

use super::inspect_edges::{edge_dump_statics, Cls, E_ACTIVITY, E_OBJECT, E_OWN, F};
use super::*;
use crate::renames::Renames;
use std::sync::Arc;

const HOLDER_C: u64 = E_OWN;
const SCREEN_C: u64 = E_OWN + 8;

const SPECIAL_C: u64 = E_OWN + 0x10;

/// `com.app.Registry` (static `sScreens`) -> `com.app.Screen extends Activity` (`mNext`) ->
/// another, destroyed; renamed: `a.a` (static `a`), `a.b` (field `b`).
fn dump(renamed: bool) -> Vec<u8> {
    dump_with(renamed, false)
}

/// [`dump`]; with `special`, the first screen is a `com.app.SpecialScreen extends Screen`
/// (renamed `a.c`, no fields of its own), whose `mNext` its superclass declares.
fn dump_with(renamed: bool, special: bool) -> Vec<u8> {
    let (registry, screen, special_name, st, next) = if renamed {
        ("a.a", "a.b", "a.c", "a", "b")
    } else {
        (
            "com.app.Registry",
            "com.app.Screen",
            "com.app.SpecialScreen",
            "sScreens",
            "mNext",
        )
    };
    let mut own: Vec<Cls> = vec![
        (HOLDER_C, registry, E_OBJECT, vec![]),
        (
            SCREEN_C,
            screen,
            E_ACTIVITY,
            vec![(next, BasicType::Object)],
        ),
    ];
    if special {
        own.push((SPECIAL_C, special_name, SCREEN_C, vec![]));
    }
    let statics = [(st, 0x2000u64)];
    // A Screen: its field, then Activity's mDestroyed and mFinished, then mBase.
    let screen = |id: u64, class: u64, next: u64, destroyed: bool| {
        (
            id,
            class,
            vec![F::L(next), F::Z(destroyed), F::Z(false), F::L(0)],
        )
    };
    let first = if special { SPECIAL_C } else { SCREEN_C };
    edge_dump_statics(
        &own,
        &[(HOLDER_C, &statics)],
        &[
            screen(0x2000, first, 0x2010, false),
            screen(0x2010, SCREEN_C, 0, true),
        ],
    )
}

fn renames() -> Renames {
    let mut r = Renames::default();
    r.classes.insert("a.a".into(), "com.app.Registry".into());
    r.classes.insert("a.b".into(), "com.app.Screen".into());
    r.fields
        .insert(("a.a".into(), "a".into()), "sScreens".into());
    r.fields.insert(("a.b".into(), "b".into()), "mNext".into());
    r
}

fn json(r: &Report) -> (String, String, String) {
    (
        serde_json::to_string(&r.gc_paths).unwrap(),
        serde_json::to_string(&r.leak_objects).unwrap(),
        serde_json::to_string(&r.class_infos).unwrap(),
    )
}

#[test]
fn a_renamed_dump_with_its_renames_reads_as_the_original() {
    let plain = report(&dump(false));
    let cfg = Config {
        renames: Some(Arc::new(renames()) as Arc<dyn crate::renames::Rename>),
        ..Config::default()
    };
    let mapped = analyze(Input::Bytes(&dump(true)), &cfg, serde_json::Value::Null).unwrap();
    assert_eq!(json(&mapped), json(&plain));
    let g = path_to(&plain, 0x2010);
    assert_eq!(
        g.trace.root,
        "class com.app.Registry, static field sScreens"
    );
    assert_eq!(g.trace.nodes[1].reference.as_deref(), Some("mNext"));
    // Without the renames: the dump's names, and another signature.
    let bare = report(&dump(true));
    let b = path_to(&bare, 0x2010);
    assert_eq!(b.trace.root, "class a.a, static field a");
    assert_eq!(b.class_name, "a.b");
    assert_ne!(b.signature, g.signature);
}

#[test]
fn array_classes_keep_their_dimensions() {
    let r = renames();
    assert_eq!(r.class("a.b[][]").as_deref(), Some("com.app.Screen[][]"));
    assert_eq!(r.class("a.c"), None);
    assert_eq!(r.field("a.b", "b"), Some("mNext"));
    assert_eq!(r.field("a.a", "b"), None);
}

/// A report made from the renamed dump and renamed afterwards (as the collector does) names a
/// field that a superclass declares under that class: the trace node says which class declares
/// it (`declaredClass`), since a mapping lists a field under its own class only.
#[test]
fn a_report_renamed_afterwards_finds_a_superclass_field_under_its_declaring_class() {
    let plain = report(&dump_with(false, true));
    let mut r = renames();
    r.classes
        .insert("a.c".into(), "com.app.SpecialScreen".into());
    let mut after = report(&dump_with(true, true));
    for g in &mut after.gc_paths {
        r.gc_path(g);
    }
    let (p, a) = (path_to(&plain, 0x2010), path_to(&after, 0x2010));
    // The SpecialScreen's reference is Screen's field: declared there, renamed from there.
    assert_eq!(p.trace.nodes[1].class_name, "com.app.SpecialScreen");
    assert_eq!(p.trace.nodes[1].declared_class, "com.app.Screen");
    assert_eq!(a.trace.nodes, p.trace.nodes);
    assert_eq!(a.signature, p.signature);
}
