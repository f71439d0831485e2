//! Names turned back (`crate::renames`, issue 42): a dump whose app classes and fields are
//! renamed (as R8 does) analysed with the build's renames gives the report of the same dump
//! with its original names (names, paths, traces, signatures); without them it shows the
//! renamed names.

use super::inspect_edges::{edge_dump_statics, Cls, E_ACTIVITY, E_OBJECT, E_OWN, F};
use super::*;
use crate::renames::{MethodRename, Renames};
use crate::report::{DominatorGroup, PathItem};
use crate::trace::Trace;
use sha1::Digest;
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

/// A path's items renamed afterwards (`Renames::gc_path`): an array entry and a class object
/// keep what follows their class's name, and the signature is hashed again by `report`'s rule,
/// where an array entry's step is its class with `[]` (whatever its index).
#[test]
fn array_entries_and_class_objects_are_renamed_and_hashed_by_their_class() {
    let item = |reference: &str, ty: &str, declared: &str| PathItem {
        reference: reference.into(),
        reference_type: ty.into(),
        declared_class: declared.into(),
    };
    let mut g = GcPath {
        gc_root: "Sticky class".into(),
        path: vec![
            item("a.b.<class>", "CLASS", "a.b"),
            item("a.b[][3]", "ARRAY_ENTRY", "a.b[]"),
            item("a.b", "LEAKING_INSTANCE", ""),
        ],
        ..GcPath::default()
    };
    renames().gc_path(&mut g);
    let shown: Vec<(&str, &str)> = g
        .path
        .iter()
        .map(|i| (i.reference.as_str(), i.declared_class.as_str()))
        .collect();
    assert_eq!(
        shown,
        [
            ("com.app.Screen.<class>", "com.app.Screen"),
            ("com.app.Screen[][3]", "com.app.Screen[]"),
            ("com.app.Screen", ""),
        ]
    );
    let mut h = sha1::Sha1::new();
    h.update(b"Sticky class\ncom.app.Screen.<class>\ncom.app.Screen[][]\ncom.app.Screen\n");
    assert_eq!(g.signature, hex::encode(h.finalize()));
}

/// A dominator group renamed afterwards (`Renames::dominator`): its class, path and trace's
/// root object are turned back, and its signature is hashed again from the renamed path, unless
/// it has none (then it stays empty).
#[test]
fn a_dominator_group_is_renamed_and_its_signature_hashed_again_if_it_has_one() {
    let item = |reference: &str, ty: &str, declared: &str| PathItem {
        reference: reference.into(),
        reference_type: ty.into(),
        declared_class: declared.into(),
    };
    let group = |signature: &str| DominatorGroup {
        class_name: "a.b".into(),
        gc_root: "JNI global".into(),
        signature: signature.into(),
        path: vec![
            item("a.a.a", "STATIC_FIELD", "a.a"),
            item("a.b", "LEAKING_INSTANCE", ""),
        ],
        trace: Trace {
            root: "JNI global (a.b @0x2000)".into(),
            ..Trace::default()
        },
        ..DominatorGroup::default()
    };
    let r = renames();
    let mut d = group("old");
    r.dominator(&mut d);
    assert_eq!(d.class_name, "com.app.Screen");
    assert_eq!(d.path[0].reference, "com.app.Registry.sScreens");
    assert_eq!(d.trace.root, "JNI global (com.app.Screen @0x2000)");
    let mut h = sha1::Sha1::new();
    h.update(b"JNI global\ncom.app.Registry.sScreens\ncom.app.Screen\n");
    assert_eq!(d.signature, hex::encode(h.finalize()));
    let mut unsigned = group("");
    r.dominator(&mut unsigned);
    assert_eq!(unsigned.class_name, "com.app.Screen");
    assert_eq!(unsigned.signature, "");
}

/// A whole report made from the renamed dump and renamed afterwards (`Rename::report`, through
/// its JSON as the collector does) gives the plain dump's groups, objects and classes.
#[test]
fn a_report_renamed_afterwards_reads_as_the_plain_dumps() {
    let plain = report(&dump(false));
    let mut after = report(&dump(true));
    assert_ne!(json(&after), json(&plain));
    crate::renames::Rename::report(&renames(), &mut after);
    assert_eq!(json(&after), json(&plain));
}

fn method(
    original: &str,
    class: Option<&str>,
    lines: Option<(u32, u32)>,
    start: Option<u32>,
) -> MethodRename {
    MethodRename {
        original: original.into(),
        original_class: class.map(String::from),
        lines,
        original_start: start,
    }
}

/// A stack frame turned back (`Renames::frame`): the line picks among the methods renamed alike
/// and is moved to the original's lines when the mapping moved it; with no range that holds the
/// line, the method is named only when all of them have one name (and the line is dropped when
/// they have ranges); an inlined method names its own class; a frame of which the renames know
/// neither class nor method is left alone.
#[test]
fn a_frame_is_named_by_the_method_whose_lines_hold_its_line() {
    let mut r = renames();
    r.methods.insert(
        ("a.b".into(), "a".into()),
        vec![
            method("onCreate", None, Some((1, 5)), Some(40)),
            method("onStop", None, Some((6, 9)), None),
        ],
    );
    r.methods.insert(
        ("a.b".into(), "c".into()),
        vec![
            method("save", None, Some((1, 2)), None),
            method("save", None, Some((3, 4)), None),
        ],
    );
    r.methods.insert(
        ("z.q".into(), "a".into()),
        vec![method("run", Some("com.app.Other"), None, None)],
    );
    let cases = [
        (
            "a.b.a(SourceFile:3)",
            Some("com.app.Screen.onCreate(SourceFile:42)"),
        ),
        (
            "a.b.a(SourceFile:7)",
            Some("com.app.Screen.onStop(SourceFile:7)"),
        ),
        // No range holds line 12, and the two methods have two names: the class only.
        (
            "a.b.a(SourceFile:12)",
            Some("com.app.Screen.a(SourceFile:12)"),
        ),
        // One name for both: named, the line (which no range holds) dropped.
        (
            "a.b.c(SourceFile:9)",
            Some("com.app.Screen.save(SourceFile)"),
        ),
        (
            "z.q.a(Unknown Source)",
            Some("com.app.Other.run(Unknown Source)"),
        ),
        (
            "a.b.x(SourceFile:3)",
            Some("com.app.Screen.x(SourceFile:3)"),
        ),
        ("x.y.z(F.java:1)", None),
        ("no frame", None),
    ];
    for (frame, back) in cases {
        assert_eq!(r.frame(frame).as_deref(), back, "{frame}");
    }
}

/// Renames of fields alone (no class renamed) still turn the index's field names back.
#[test]
fn renames_of_fields_alone_are_applied() {
    let mut fields_only = renames();
    fields_only.classes.clear();
    let cfg = Config {
        renames: Some(Arc::new(fields_only) as Arc<dyn crate::renames::Rename>),
        ..Config::default()
    };
    let r = analyze(Input::Bytes(&dump(true)), &cfg, serde_json::Value::Null).unwrap();
    let g = path_to(&r, 0x2010);
    assert_eq!(g.trace.root, "class a.a, static field sScreens");
    assert_eq!(g.trace.nodes[1].reference.as_deref(), Some("mNext"));
    assert_eq!(g.class_name, "a.b");
}
