//! The verdicts that disagreed with LeakCanary on basic cases (issue 42, items 1 to 5), each on
//! a dump built with the `hprof` writer, and each checked on its `arrays`-stripped twin: only
//! instance fields are read, so the twin must give the same verdict.
//! 1. A `KeyedWeakReference` whose `retainedUptimeMillis` is -1 only watches its object.
//! 2. A watched, destroyed Activity is one leak, not two.
//! 3. A Dialog is UNKNOWN whether showing or not (its label says which).
//! 4. A finishing Activity that is not destroyed is not leaking.
//! 5. An object below a leaking one is LEAKING, also when it has another path.

use super::inspect_edges::{
    activity, dead, edge_dump, second, Cls, E_ACTIVITY, E_HOLDER, E_OBJECT, E_OWN, E_VIEW, F,
};
use super::*;

/// The reference classes' first id ([`reference_classes`]); LeakCanary 1's is the fourth.
const REFERENCE: u64 = E_OWN;
const LEGACY_KWR: u64 = REFERENCE + 0x18;
const DIALOG_C: u64 = E_OWN + 0x20;
const SCREEN: u64 = E_OWN + 0x28;

/// `java.lang.ref.Reference` (referent, queue), `WeakReference`, LeakCanary 2's
/// `leakcanary.KeyedWeakReference` (key, description, watchUptimeMillis,
/// retainedUptimeMillis) and LeakCanary 1's `com.squareup.leakcanary.KeyedWeakReference` (key,
/// name: no times).
fn reference_classes() -> Vec<Cls> {
    reference_classes_at(REFERENCE)
}

/// [`reference_classes`] with class ids from `base` on (`Reference` at `base`, then 8 apart).
pub(super) fn reference_classes_at(base: u64) -> Vec<Cls> {
    use BasicType::*;
    vec![
        (
            base,
            "java.lang.ref.Reference",
            E_OBJECT,
            vec![("referent", Object), ("queue", Object)],
        ),
        (base + 8, "java.lang.ref.WeakReference", base, vec![]),
        (
            base + 0x10,
            "leakcanary.KeyedWeakReference",
            base + 8,
            vec![
                ("key", Object),
                ("description", Object),
                ("watchUptimeMillis", Long),
                ("retainedUptimeMillis", Long),
            ],
        ),
        (
            base + 0x18,
            "com.squareup.leakcanary.KeyedWeakReference",
            base + 8,
            vec![("key", Object), ("name", Object)],
        ),
    ]
}

/// A LeakCanary 2 `KeyedWeakReference` to `referent`, retained at `retained` (-1: not yet).
fn kwr(id: u64, referent: u64, retained: i64) -> (u64, u64, Vec<F>) {
    kwr_at(REFERENCE, id, referent, retained)
}

/// [`kwr`] of the classes [`reference_classes_at`] made from `base`.
pub(super) fn kwr_at(base: u64, id: u64, referent: u64, retained: i64) -> (u64, u64, Vec<F>) {
    let fields = vec![
        F::L(0),
        F::L(0),
        F::J(1000),
        F::J(retained),
        F::L(referent),
        F::L(0),
    ];
    (id, base + 0x10, fields)
}

/// The report on `bytes` and on its `arrays`-stripped twin.
fn both(bytes: &[u8]) -> [Report; 2] {
    let (mini, _) = strip_bytes(bytes, Level::Arrays).unwrap();
    [report(bytes), report(&mini)]
}

/// (reason, object id) of each `leakObjects[]` entry, sorted.
fn leaks(r: &Report) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = r
        .leak_objects
        .iter()
        .map(|o| (o.leak_reason.clone(), o.object_id))
        .collect();
    v.sort();
    v
}

const WATCHED: &str = "Watched Object Retained";

#[test]
fn an_object_only_watched_is_no_leak_until_judged_retained() {
    // Three Holders, each held by a static and watched: not judged retained yet (-1), retained
    // (LeakCanary 2), and watched by LeakCanary 1's reference, which has no times (retained).
    let (pending, retained, legacy) = (0x3000, 0x3010, 0x3020);
    let bytes = edge_dump(
        &reference_classes(),
        &[
            ("sPending", pending),
            ("sRetained", retained),
            ("sLegacy", legacy),
            ("sW1", 0x4000),
            ("sW2", 0x4010),
            ("sW3", 0x4020),
        ],
        &[
            (pending, E_HOLDER, vec![F::L(0)]),
            (retained, E_HOLDER, vec![F::L(0)]),
            (legacy, E_HOLDER, vec![F::L(0)]),
            kwr(0x4000, pending, -1),
            kwr(0x4010, retained, 2000),
            (
                0x4020,
                LEGACY_KWR,
                vec![F::L(0), F::L(0), F::L(legacy), F::L(0)],
            ),
        ],
    );
    for r in both(&bytes) {
        assert_eq!(
            leaks(&r),
            [
                (WATCHED.to_string(), retained),
                (WATCHED.to_string(), legacy)
            ]
        );
        let watched: Vec<u64> = r
            .gc_paths
            .iter()
            .map(|g| g.trace.nodes.last().unwrap().object_id)
            .collect();
        assert!(!watched.contains(&pending), "{watched:x?}");
    }
}

#[test]
fn a_watched_destroyed_activity_is_one_leak() {
    // A destroyed Activity that LeakCanary watches (and judged retained), and a live one it
    // watches: one finding each, and classInfos counts no more leaks than instances.
    let (gone, live) = (dead(1), dead(2));
    let bytes = edge_dump(
        &reference_classes(),
        &[
            ("sGone", gone),
            ("sLive", live),
            ("sW1", 0x4000),
            ("sW2", 0x4010),
        ],
        &[
            activity(gone, true, 0),
            activity(live, false, 0),
            kwr(0x4000, gone, 2000),
            kwr(0x4010, live, 2000),
        ],
    );
    for r in both(&bytes) {
        assert_eq!(
            leaks(&r),
            [
                ("Activity Leak".to_string(), gone),
                (WATCHED.to_string(), live)
            ]
        );
        let mut paths: Vec<(&str, u64)> = r
            .gc_paths
            .iter()
            .filter(|g| g.class_name == "com.app.MainActivity")
            .map(|g| (g.leak_reason.as_str(), g.instance_count))
            .collect();
        paths.sort();
        assert_eq!(paths, [("Activity Leak", 1), (WATCHED, 1)]);
        let info = r
            .class_infos
            .iter()
            .find(|c| c.class_name == "com.app.MainActivity")
            .expect("MainActivity's classInfo");
        assert_eq!((info.instance_count, info.leak_instance_count), (2, 2));
    }
}

#[test]
fn a_watched_destroyed_activity_reached_through_a_view_reads_as_destroyed() {
    // The View's context is the watched, destroyed Activity: one finding, "Activity Leak", so
    // the View's inspector finds it destroyed.
    let gone = dead(1);
    let bytes = edge_dump(
        &reference_classes(),
        &[("sView", 0x2000), ("sW", 0x4000)],
        &[
            activity(gone, true, 0),
            (0x2000, E_VIEW, vec![F::L(gone), F::L(0), F::L(0)]),
            kwr(0x4000, gone, 2000),
        ],
    );
    for r in both(&bytes) {
        assert_eq!(leaks(&r), [("Activity Leak".to_string(), gone)]);
        assert_eq!(
            second(&r, gone),
            (
                "android.view.View".to_string(),
                LEAK,
                "mContext is a destroyed Activity (mDestroyed is true)".to_string()
            )
        );
    }
}

#[test]
fn a_dialog_is_unknown_showing_or_not_and_the_static_field_stays_a_suspect() {
    use BasicType::*;
    let dialog: Cls = (
        DIALOG_C,
        "android.app.Dialog",
        E_OBJECT,
        vec![
            ("mDecor", Object),
            ("mShowing", Boolean),
            ("mOwner", Object),
        ],
    );
    let decor = 0x2800;
    let bytes = edge_dump(
        &[dialog],
        &[
            ("sShowing", 0x2000),
            ("sNeverShown", 0x2010),
            ("sDecor", decor),
        ],
        &[
            (
                0x2000,
                DIALOG_C,
                vec![F::L(decor), F::Z(true), F::L(dead(1))],
            ),
            (0x2010, DIALOG_C, vec![F::L(0), F::Z(false), F::L(dead(2))]),
            (decor, E_HOLDER, vec![F::L(0)]),
            activity(dead(1), true, 0),
            activity(dead(2), true, 0),
        ],
    );
    let st = "com.app.Statics";
    let d = "android.app.Dialog";
    let a = "com.app.MainActivity";
    for r in both(&bytes) {
        assert_eq!(
            rows(path_to(&r, dead(1))),
            [
                row(st, NOT, CLASS, Some("sShowing"), true),
                row(
                    d,
                    UNK,
                    "mShowing is true (a dialog can stay showing after its Activity is destroyed)",
                    Some("mOwner"),
                    true
                ),
                row(a, LEAK, DESTROYED, None, false),
            ]
        );
        assert_eq!(
            rows(path_to(&r, dead(2))),
            [
                row(st, NOT, CLASS, Some("sNeverShown"), true),
                row(
                    d,
                    UNK,
                    "mDecor is null (dismissed, or never shown)",
                    Some("mOwner"),
                    true
                ),
                row(a, LEAK, DESTROYED, None, false),
            ]
        );
    }
}

/// `com.app.ScreenActivity extends android.app.Activity` with a reference of its own, `mNext`.
fn screen_class() -> Cls {
    (
        SCREEN,
        "com.app.ScreenActivity",
        E_ACTIVITY,
        vec![("mNext", BasicType::Object)],
    )
}

/// A `ScreenActivity`: mNext, then Activity's mDestroyed and mFinished, then mBase.
fn screen(id: u64, next: u64, destroyed: bool, finished: bool) -> (u64, u64, Vec<F>) {
    let fields = vec![F::L(next), F::Z(destroyed), F::Z(finished), F::L(0)];
    (id, SCREEN, fields)
}

#[test]
fn a_finishing_activity_is_not_leaking_until_destroyed() {
    // A finishing (not destroyed) activity, held by a static, holding a destroyed one.
    let finishing = 0x2000;
    let bytes = edge_dump(
        &[screen_class()],
        &[("sFinishing", finishing)],
        &[
            screen(finishing, dead(1), false, true),
            activity(dead(1), true, 0),
        ],
    );
    for r in both(&bytes) {
        assert_eq!(leaks(&r), [("Activity Leak".to_string(), dead(1))]);
        assert_eq!(
            rows(path_to(&r, dead(1))),
            [
                row("com.app.Statics", NOT, CLASS, Some("sFinishing"), false),
                row(
                    "com.app.ScreenActivity",
                    NOT,
                    "mDestroyed is false (mFinished is true: finishing)",
                    Some("mNext"),
                    true
                ),
                row("com.app.MainActivity", LEAK, DESTROYED, None, false),
            ]
        );
        let info = r
            .class_infos
            .iter()
            .find(|c| c.class_name == "com.app.ScreenActivity")
            .expect("ScreenActivity's classInfo");
        assert_eq!((info.instance_count, info.leak_instance_count), (1, 0));
    }
}

#[test]
fn an_object_below_a_leaking_one_is_leaking_also_with_another_path() {
    // Statics.sGone -> destroyed ScreenActivity -> mNext Holder -> ref -> destroyed activity;
    // the Holder is also held by a longer path (sOther -> Holder -> Holder -> it), so the
    // destroyed ScreenActivity does not hold it alone.
    let (gone, mid) = (0x2000, 0x2100);
    let bytes = edge_dump(
        &[screen_class()],
        &[("sGone", gone), ("sOther", 0x2200)],
        &[
            screen(gone, mid, true, false),
            (mid, E_HOLDER, vec![F::L(dead(1))]),
            (0x2200, E_HOLDER, vec![F::L(0x2210)]),
            (0x2210, E_HOLDER, vec![F::L(mid)]),
            activity(dead(1), true, 0),
        ],
    );
    for r in both(&bytes) {
        assert_eq!(
            rows(path_to(&r, dead(1))),
            [
                row("com.app.Statics", NOT, CLASS, Some("sGone"), true),
                row(
                    "com.app.ScreenActivity",
                    LEAK,
                    DESTROYED,
                    Some("mNext"),
                    false
                ),
                row(
                    "com.app.Holder",
                    LEAK,
                    "below a leaking object, reachable without it too",
                    Some("ref"),
                    false
                ),
                row("com.app.MainActivity", LEAK, DESTROYED, None, false),
            ]
        );
    }
}
