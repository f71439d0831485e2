//! The inspectors' edge cases, each written to fail under one mutation of `inspect.rs` that the
//! other trace tests let through: HotSpot threads (`threadStatus`), ART threads that never
//! started or still run natively, a boolean field the dump declares as an int, a View whose
//! context is a live Activity or the Application (no wrapper to see through, though both are
//! `ContextWrapper`s with an `mBase`), a chain of more wrappers than [`WRAPPER_HOPS`], and a
//! field declared beyond the 256 classes a field search walks up a superclass chain.

use super::*;
use crate::trace::inspect::WRAPPER_HOPS;

/// A field value, in layout order.
pub(super) enum F {
    L(u64),
    Z(bool),
    I(i32),
    J(i64),
}

/// A class: (id, name, superclass id, instance fields).
pub(super) type Cls = (u64, &'static str, u64, Fs);

pub(super) const E_OBJECT: u64 = 0x10;
pub(super) const E_CONTEXT: u64 = 0x18;
pub(super) const E_WRAPPER: u64 = 0x20;
pub(super) const E_THEMED: u64 = 0x28;
pub(super) const E_ACTIVITY: u64 = 0x30;
pub(super) const E_MAIN: u64 = 0x38;
pub(super) const E_APP: u64 = 0x40;
pub(super) const E_VIEW: u64 = 0x48;
pub(super) const E_STATICS: u64 = 0x50;
pub(super) const E_HOLDER: u64 = 0x58;
/// The first id free for a test's own classes.
pub(super) const E_OWN: u64 = 0x100;

/// The classes every dump here has: `Activity` and `Application` extend `ContextWrapper`
/// (through `ContextThemeWrapper` for the Activity), as on Android.
fn base_classes() -> Vec<Cls> {
    use BasicType::*;
    vec![
        (E_OBJECT, "java.lang.Object", 0, vec![]),
        (E_CONTEXT, "android.content.Context", E_OBJECT, vec![]),
        (
            E_WRAPPER,
            "android.content.ContextWrapper",
            E_CONTEXT,
            vec![("mBase", Object)],
        ),
        (
            E_THEMED,
            "android.view.ContextThemeWrapper",
            E_WRAPPER,
            vec![],
        ),
        (
            E_ACTIVITY,
            "android.app.Activity",
            E_THEMED,
            vec![("mDestroyed", Boolean), ("mFinished", Boolean)],
        ),
        (E_MAIN, "com.app.MainActivity", E_ACTIVITY, vec![]),
        (E_APP, "android.app.Application", E_WRAPPER, vec![]),
        (
            E_VIEW,
            "android.view.View",
            E_OBJECT,
            vec![
                ("mContext", Object),
                ("mAttachInfo", Object),
                ("mListener", Object),
            ],
        ),
        (E_STATICS, "com.app.Statics", E_OBJECT, vec![]),
        (E_HOLDER, "com.app.Holder", E_OBJECT, vec![("ref", Object)]),
    ]
}

/// A dump (1.0.3, 4-byte ids) of the base classes and `own`, with `Statics`' static fields
/// `statics` (name, object id) and the `instances` (id, class, field values subclass first).
pub(super) fn edge_dump(
    own: &[Cls],
    statics: &[(&str, u64)],
    instances: &[(u64, u64, Vec<F>)],
) -> Vec<u8> {
    edge_dump_statics(own, &[(E_STATICS, statics)], instances)
}

/// [`edge_dump`] with static fields (name, object id) on any classes, by class id.
pub(super) fn edge_dump_statics(
    own: &[Cls],
    statics: &[(u64, &[(&str, u64)])],
    instances: &[(u64, u64, Vec<F>)],
) -> Vec<u8> {
    edge_dump_arrays(own, statics, instances, &[])
}

/// [`edge_dump_statics`] with object arrays (id, array class id, elements) too.
pub(super) fn edge_dump_arrays(
    own: &[Cls],
    statics: &[(u64, &[(&str, u64)])],
    instances: &[(u64, u64, Vec<F>)],
    arrays: &[(u64, u64, Vec<u64>)],
) -> Vec<u8> {
    edge_dump_ints(own, statics, &[], instances, arrays)
}

/// [`edge_dump_arrays`] with static int fields (name, value) too, by class id.
pub(super) fn edge_dump_ints(
    own: &[Cls],
    statics: &[(u64, &[(&str, u64)])],
    ints: &[(u64, &[(&str, i32)])],
    instances: &[(u64, u64, Vec<F>)],
    arrays: &[(u64, u64, Vec<u64>)],
) -> Vec<u8> {
    let mut d = Dump {
        w: Writer::new(Format::V103, 4, 0),
        strings: Vec::new(),
    };
    let classes: Vec<Cls> = base_classes()
        .into_iter()
        .chain(own.iter().cloned())
        .collect();
    for (serial, (id, name, ..)) in classes.iter().enumerate() {
        let n = d.s(name);
        d.w.load_class(serial as u32 + 1, *id, n);
    }
    let mut resolved = Vec::new();
    for (id, _, sup, fs) in &classes {
        let fs: Vec<(u64, BasicType)> = fs.iter().map(|&(n, t)| (d.s(n), t)).collect();
        let st: Vec<(u64, BasicType, Vec<u8>)> = statics
            .iter()
            .filter(|(c, _)| c == id)
            .flat_map(|(_, fs)| fs.iter())
            .map(|&(n, v)| (n, BasicType::Object, (v as u32).to_be_bytes().to_vec()))
            .chain(
                ints.iter()
                    .filter(|(c, _)| c == id)
                    .flat_map(|(_, fs)| fs.iter())
                    .map(|&(n, v)| (n, BasicType::Int, v.to_be_bytes().to_vec())),
            )
            .collect::<Vec<_>>()
            .into_iter()
            .map(|(n, t, v)| (d.s(n), t, v))
            .collect();
        resolved.push((*id, *sup, st, fs));
    }
    let app = d.s("app");
    let w = &mut d.w;
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.heap_info(b'A' as u32, app);
    for (id, sup, st, fs) in &resolved {
        w.class_dump(*id, *sup, 0, 16, st, fs);
        w.root(sub::ROOT_STICKY_CLASS, *id);
    }
    for (id, class, vals) in instances {
        let mut b = Vec::new();
        for v in vals {
            match *v {
                F::L(r) => b.extend((r as u32).to_be_bytes()),
                F::Z(z) => b.push(z as u8),
                F::I(i) => b.extend(i.to_be_bytes()),
                F::J(j) => b.extend(j.to_be_bytes()),
            }
        }
        w.instance(*id, *class, &b);
    }
    for (id, class, elems) in arrays {
        w.object_array(*id, *class, elems);
    }
    w.end_segment();
    w.heap_dump_end();
    d.w.finish()
}

/// An activity (`MainActivity`): mDestroyed, mFinished, then the wrapper's mBase.
pub(super) fn activity(id: u64, destroyed: bool, base: u64) -> (u64, u64, Vec<F>) {
    (id, E_MAIN, vec![F::Z(destroyed), F::Z(false), F::L(base)])
}

/// The (class, status, reason) of the second object on the path to `target`.
pub(super) fn second(r: &Report, target: u64) -> (String, &'static str, String) {
    let g = path_to(r, target);
    let (class, status, reason, ..) = rows(g).swap_remove(1);
    (class, status, reason)
}

pub(super) fn dead(k: u64) -> u64 {
    0x1100 + k * 0x10
}

#[test]
fn a_hotspot_thread_has_ended_only_when_its_status_says_terminated() {
    use BasicType::*;
    const T: u64 = E_OWN;
    let thread = vec![("threadStatus", Int), ("mTarget", Object), ("tid", Long)];
    // JVMTI states: 0 NEW, 5 RUNNABLE (alive), 2 TERMINATED; 0x402 is TERMINATED with the
    // interrupted bit beside it. None of these threads is a GC root.
    let states: [(&str, i32, &'static str, &str); 4] = [
        ("sNew", 0, UNK, ""),
        ("sRunnable", 5, UNK, ""),
        ("sEnded", 2, LEAK, "the thread has ended"),
        ("sEndedFlags", 0x402, LEAK, "the thread has ended"),
    ];
    let mut statics = Vec::new();
    let mut inst = Vec::new();
    for (k, &(name, s, ..)) in states.iter().enumerate() {
        let t = 0x2000 + k as u64 * 0x10;
        statics.push((name, t));
        inst.push((
            t,
            T,
            vec![F::I(s), F::L(dead(k as u64)), F::J(k as i64 + 10)],
        ));
        inst.push(activity(dead(k as u64), true, 0));
    }
    let bytes = edge_dump(
        &[(T, "java.lang.Thread", E_OBJECT, thread)],
        &statics,
        &inst,
    );
    let r = report(&bytes);
    for (k, &(name, s, status, why)) in states.iter().enumerate() {
        assert_eq!(
            second(&r, dead(k as u64)),
            ("java.lang.Thread".to_string(), status, why.to_string()),
            "{name}: threadStatus {s}"
        );
    }
}

#[test]
fn an_art_thread_has_ended_only_when_started_and_without_a_native_peer() {
    use BasicType::*;
    const T: u64 = E_OWN;
    let thread = vec![
        ("nativePeer", Long),
        ("started", Boolean),
        ("mTarget", Object),
        ("tid", Long),
    ];
    let ended = "the thread has ended (nativePeer is 0)";
    // (static, nativePeer, started, status, reason); none of them is a GC root.
    let cases: [(&str, i64, bool, &'static str, &str); 4] = [
        ("sNeverStarted", 0, false, UNK, ""),
        ("sRunningNatively", 0x7f00_1234, true, UNK, ""),
        ("sOddPeer", 0x7f00_1234, false, UNK, ""),
        ("sEnded", 0, true, LEAK, ended),
    ];
    let mut statics = Vec::new();
    let mut inst = Vec::new();
    for (k, &(name, peer, started, ..)) in cases.iter().enumerate() {
        let t = 0x2000 + k as u64 * 0x10;
        statics.push((name, t));
        inst.push((
            t,
            T,
            vec![
                F::J(peer),
                F::Z(started),
                F::L(dead(k as u64)),
                F::J(k as i64 + 10),
            ],
        ));
        inst.push(activity(dead(k as u64), true, 0));
    }
    let bytes = edge_dump(
        &[(T, "java.lang.Thread", E_OBJECT, thread)],
        &statics,
        &inst,
    );
    let r = report(&bytes);
    for (k, &(name, _, _, status, why)) in cases.iter().enumerate() {
        assert_eq!(
            second(&r, dead(k as u64)),
            ("java.lang.Thread".to_string(), status, why.to_string()),
            "{name}"
        );
    }
}

#[test]
fn a_boolean_field_the_dump_declares_as_an_int_reads_as_its_value() {
    use BasicType::*;
    const WIN: u64 = E_OWN;
    // A Window whose mDestroyed the dump declares as an int: 1 is true, 0 false.
    let window = vec![("mDestroyed", Int), ("mCallback", Object)];
    let bytes = edge_dump(
        &[(WIN, "android.view.Window", E_OBJECT, window)],
        &[("sGone", 0x2000), ("sShown", 0x2010)],
        &[
            (0x2000, WIN, vec![F::I(1), F::L(dead(1))]),
            (0x2010, WIN, vec![F::I(0), F::L(dead(2))]),
            activity(dead(1), true, 0),
            activity(dead(2), true, 0),
        ],
    );
    let r = report(&bytes);
    let w = "android.view.Window".to_string();
    assert_eq!(second(&r, dead(1)), (w.clone(), LEAK, DESTROYED.into()));
    assert_eq!(second(&r, dead(2)), (w, NOT, "mDestroyed is false".into()));
}

/// A View (not attached) whose `mContext` is `context`, and whose `mListener` is `target`.
fn view(id: u64, context: u64, target: u64) -> (u64, u64, Vec<F>) {
    (id, E_VIEW, vec![F::L(context), F::L(0), F::L(target)])
}

#[test]
fn a_live_activity_or_the_application_ends_a_views_context_chain() {
    // Both are ContextWrappers whose mBase here is (oddly) a destroyed activity; neither is a
    // wrapper to see through, so the View's context is a live object: not attached, UNKNOWN.
    let live = 0x1000;
    let app = 0x1008;
    let bytes = edge_dump(
        &[],
        &[("sOnLive", 0x2000), ("sOnApp", 0x2010)],
        &[
            activity(live, false, dead(1)),
            (app, E_APP, vec![F::L(dead(2))]),
            activity(dead(1), true, 0),
            activity(dead(2), true, 0),
            view(0x2000, live, dead(1)),
            view(0x2010, app, dead(2)),
        ],
    );
    let r = report(&bytes);
    let unattached = "mAttachInfo is null (not attached to a window)";
    for k in [1, 2] {
        assert_eq!(
            second(&r, dead(k)),
            ("android.view.View".into(), UNK, unattached.into()),
            "view {k}"
        );
    }
}

#[test]
fn a_views_context_is_followed_through_at_most_wrapper_hops_wrappers() {
    // Two Views, each on the only path to its destroyed activity through its wrappers:
    // one through WRAPPER_HOPS wrappers (seen through), one through one more (not).
    let chain = |first: u64, n: usize, target: u64| -> Vec<(u64, u64, Vec<F>)> {
        (0..n as u64)
            .map(|i| {
                let next = if i + 1 == n as u64 {
                    target
                } else {
                    first + (i + 1) * 8
                };
                (first + i * 8, E_THEMED, vec![F::L(next)])
            })
            .collect()
    };
    let mut inst = vec![
        activity(dead(1), true, 0),
        activity(dead(2), true, 0),
        view(0x2000, 0x3000, 0),
        view(0x2010, 0x4000, 0),
    ];
    inst.extend(chain(0x3000, WRAPPER_HOPS, dead(1)));
    inst.extend(chain(0x4000, WRAPPER_HOPS + 1, dead(2)));
    let bytes = edge_dump(&[], &[("sFar", 0x2000), ("sTooFar", 0x2010)], &inst);
    let r = report(&bytes);
    let through = ["ContextThemeWrapper.mBase"; WRAPPER_HOPS].join(" -> ");
    assert_eq!(
        second(&r, dead(1)),
        (
            "android.view.View".into(),
            LEAK,
            format!("mContext wraps a destroyed Activity ({through}; {DESTROYED})")
        )
    );
    assert_eq!(
        second(&r, dead(2)),
        (
            "android.view.View".into(),
            UNK,
            "mAttachInfo is null (not attached to a window)".into()
        )
    );
}

#[test]
fn a_field_is_looked_for_in_the_first_256_classes_of_the_chain() {
    use BasicType::*;
    // Window `com.app.Deep0` -> a field-less "android.view.Window" -> Deep2 .. Deep255 -> a
    // second "android.view.Window" (another loader's), 257 classes in all, the last the one
    // that declares mDestroyed. The Window inspector applies (the first Window is in reach),
    // but the field search stops after 256 classes: mDestroyed is not read, and the Window
    // gets no status of its own. A search one class longer (or unbounded) would read it.
    const DEPTH: u64 = 256;
    let class = |k: u64| E_OWN + k * 8;
    let names: Vec<&'static str> = (0..=DEPTH)
        .map(|k| match k {
            1 | DEPTH => "android.view.Window",
            _ => Box::leak(format!("com.app.Deep{k}").into_boxed_str()) as &'static str,
        })
        .collect();
    let own: Vec<Cls> = (0..=DEPTH)
        .map(|k| {
            let sup = if k == DEPTH { E_OBJECT } else { class(k + 1) };
            let fs: Fs = match k {
                0 => vec![("mCallback", Object)],
                DEPTH => vec![("mDestroyed", Boolean)],
                _ => vec![],
            };
            (class(k), names[k as usize], sup, fs)
        })
        .collect();
    let bytes = edge_dump(
        &own,
        &[("sDeep", 0x2000)],
        &[
            (0x2000, class(0), vec![F::L(dead(1)), F::Z(true)]),
            activity(dead(1), true, 0),
        ],
    );
    let r = report(&bytes);
    assert_eq!(
        second(&r, dead(1)),
        ("com.app.Deep0".into(), UNK, String::new())
    );
}

#[test]
fn a_superclass_cycle_ends_the_field_search() {
    use BasicType::*;
    // A malformed dump: Window's superclass is Y, Y's is Window, and neither declares
    // mDestroyed. The search for it goes round the cycle for 256 classes and gives up; the
    // analysis runs on a thread of its own so that a search that never ends fails the test.
    let (x, y) = (E_OWN, E_OWN + 8);
    let bytes = edge_dump(
        &[
            (x, "android.view.Window", y, vec![("mCallback", Object)]),
            (y, "com.app.Y", x, vec![]),
        ],
        &[("sLoop", 0x2000)],
        &[(0x2000, x, vec![F::L(dead(1))]), activity(dead(1), true, 0)],
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = report(&bytes);
        let _ = tx.send(second(&r, dead(1)));
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the analysis of a dump with a superclass cycle did not end within 60 s");
    assert_eq!(got, ("android.view.Window".into(), UNK, String::new()));
}
