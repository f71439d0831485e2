//! Leak traces of a View whose `mContext` is a ContextWrapper around the Activity: the
//! wrappers sit off the paths, so their fields are read hop by hop.

use super::*;

const W_OBJECT: u64 = 0x10;
const W_CONTEXT: u64 = 0x18;
const W_WRAPPER: u64 = 0x20;
const W_VIEW_THEMED: u64 = 0x28;
const W_APPCOMPAT: u64 = 0x30;
const W_HILT: u64 = 0x38;
const W_TWO: u64 = 0x40;
const W_ACTIVITY: u64 = 0x48;
const W_MAIN: u64 = 0x50;
const W_VIEW: u64 = 0x58;
const W_STATICS: u64 = 0x60;
const W_HOLDER: u64 = 0x68;

const APPCOMPAT: &str = "androidx.appcompat.view.ContextThemeWrapper";
const HILT: &str =
    "dagger.hilt.android.internal.managers.ViewComponentManager$FragmentContextWrapper";

/// A View held by static field `field` of `Statics`, and where its `mContext` leads.
struct Scene {
    field: &'static str,
    /// The View's `mContext` chain: (wrapper id, its class), each `mBase` the next; the last
    /// `mBase` is `base`.
    wrappers: Vec<(u64, u64)>,
    base: u64,
    attached: bool,
    /// What `mListener` holds: the destroyed activity the path leads to.
    target: u64,
}

/// A dump (1.0.3, 4-byte ids) of Views held by `Statics`, each reaching its destroyed activity
/// `target` through `mListener`, so that the shortest path skips the wrappers of its
/// `mContext`, which sit in a segment of their own, apart from everything on the paths.
/// `android.app.Activity` extends `android.view.ContextThemeWrapper`, as on Android.
fn wrapper_dump(scenes: &[Scene], live: &[u64], destroyed: &[u64]) -> Vec<u8> {
    use BasicType::*;
    let mut d = Dump {
        w: Writer::new(Format::V103, 4, 0),
        strings: Vec::new(),
    };
    let classes: Vec<(u64, &str, u64, Vec<&str>)> = vec![
        (W_OBJECT, "java.lang.Object", 0, vec![]),
        (W_CONTEXT, "android.content.Context", W_OBJECT, vec![]),
        (
            W_WRAPPER,
            "android.content.ContextWrapper",
            W_CONTEXT,
            vec!["mBase"],
        ),
        (
            W_VIEW_THEMED,
            "android.view.ContextThemeWrapper",
            W_WRAPPER,
            vec!["mTheme"],
        ),
        (
            W_APPCOMPAT,
            APPCOMPAT,
            W_WRAPPER,
            vec!["mTheme", "mInflater"],
        ),
        (W_HILT, HILT, W_WRAPPER, vec!["fragment", "baseInflater"]),
        (W_TWO, "com.app.TwoContexts", W_WRAPPER, vec!["mOld"]),
        (
            W_ACTIVITY,
            "android.app.Activity",
            W_VIEW_THEMED,
            vec!["mDestroyed", "mFinished"],
        ),
        (W_MAIN, "com.app.MainActivity", W_ACTIVITY, vec![]),
        (
            W_VIEW,
            "android.view.View",
            W_OBJECT,
            vec!["mContext", "mAttachInfo", "mListener"],
        ),
        (W_STATICS, "com.app.Statics", W_OBJECT, vec![]),
        (W_HOLDER, "com.app.Holder", W_OBJECT, vec!["ref"]),
    ];
    for (serial, (id, name, ..)) in classes.iter().enumerate() {
        let n = d.s(name);
        d.w.load_class(serial as u32 + 1, *id, n);
    }
    let mut resolved = Vec::new();
    for (id, _, sup, fs) in &classes {
        let fs: Vec<(u64, BasicType)> = fs
            .iter()
            .map(|&n| {
                let t = if n == "mDestroyed" || n == "mFinished" {
                    Boolean
                } else {
                    Object
                };
                (d.s(n), t)
            })
            .collect();
        let st: Vec<(u64, BasicType, Vec<u8>)> = if *id == W_STATICS {
            scenes
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let view = 0x2000 + i as u64 * 0x10;
                    (d.s(s.field), Object, (view as u32).to_be_bytes().to_vec())
                })
                .collect()
        } else {
            vec![]
        };
        resolved.push((*id, *sup, st, fs));
    }
    let app = d.s("app");
    let w = &mut d.w;
    let refs =
        |ids: &[u64]| -> Vec<u8> { ids.iter().flat_map(|&r| (r as u32).to_be_bytes()).collect() };
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.heap_info(b'A' as u32, app);
    for (id, sup, st, fs) in &resolved {
        w.class_dump(*id, *sup, 0, 16, st, fs);
        w.root(sub::ROOT_STICKY_CLASS, *id);
    }
    // An activity's fields, subclass first: MainActivity (none), Activity, the
    // ContextThemeWrapper's mTheme, the ContextWrapper's mBase.
    for (&a, dead) in live
        .iter()
        .map(|a| (a, false))
        .chain(destroyed.iter().map(|a| (a, true)))
    {
        let mut b = vec![dead as u8, 0];
        b.extend(refs(&[0, 0]));
        w.instance(a, W_MAIN, &b);
    }
    for (i, s) in scenes.iter().enumerate() {
        let view = 0x2000 + i as u64 * 0x10;
        let ctx = s.wrappers.first().map_or(s.base, |w| w.0);
        let attach = if s.attached { view + 8 } else { 0 };
        w.instance(view, W_VIEW, &refs(&[ctx, attach, s.target]));
        if s.attached {
            w.instance(view + 8, W_HOLDER, &refs(&[0]));
        }
    }
    w.end_segment();
    // The wrappers, in a segment of their own: own fields first, then mBase. The first
    // AppCompat wrapper's theme holds an array, which the strip empties.
    w.segment(tag::HEAP_DUMP_SEGMENT);
    let mut array = None;
    for s in scenes {
        for (k, &(id, class)) in s.wrappers.iter().enumerate() {
            let base = s.wrappers.get(k + 1).map_or(s.base, |w| w.0);
            let own = match class {
                W_VIEW_THEMED => vec![0],
                W_APPCOMPAT if array.is_none() => {
                    array = Some(id + 4);
                    vec![id + 4, 0]
                }
                W_APPCOMPAT | W_HILT => vec![0, 0],
                // TwoContexts: mOld, a context it keeps besides mBase.
                _ => vec![s.target],
            };
            let mut b = refs(&own);
            b.extend(refs(&[base]));
            w.instance(id, class, &b);
        }
    }
    if let Some(a) = array {
        w.primitive_array(a, BasicType::Byte, 4096, &[9u8; 4096]);
    }
    w.end_segment();
    w.heap_dump_end();
    d.w.finish()
}

fn scene(
    field: &'static str,
    wrappers: &[(u64, u64)],
    base: u64,
    attached: bool,
    target: u64,
) -> Scene {
    Scene {
        field,
        wrappers: wrappers.to_vec(),
        base,
        attached,
        target,
    }
}

/// The View's row in the path to `target`, which must be Statics -> View -> target.
fn view_row(r: &Report, target: u64) -> (String, &'static str, String, Option<String>, bool) {
    let g = path_to(r, target);
    assert_eq!(g.trace.nodes.len(), 3, "{:#?}", g.trace);
    rows(g).swap_remove(1)
}

const VIEW_CLASS: &str = "android.view.View";
const LIVE_W: u64 = 0x1000;
fn dead(k: u64) -> u64 {
    0x1100 + k * 0x10
}
fn wrap(k: u64) -> u64 {
    0x8000 + k * 0x100
}

#[test]
fn a_view_whose_context_wraps_a_destroyed_activity_is_leaking() {
    let bytes = wrapper_dump(
        &[
            scene(
                "sThemed",
                &[(wrap(1), W_APPCOMPAT)],
                dead(1),
                false,
                dead(1),
            ),
            // Attached, but its context is a wrapper around a destroyed activity all the same.
            scene(
                "sAttached",
                &[(wrap(2), W_VIEW_THEMED)],
                dead(2),
                true,
                dead(2),
            ),
            // The wrapper on the path: the View's only way to the activity.
            scene("sOnPath", &[(wrap(3), W_APPCOMPAT)], dead(3), false, 0),
        ],
        &[],
        &[dead(1), dead(2), dead(3)],
    );
    let r = report(&bytes);
    assert_eq!(
        view_row(&r, dead(1)),
        row(
            VIEW_CLASS,
            LEAK,
            "mContext wraps a destroyed Activity (ContextThemeWrapper.mBase; mDestroyed is true)",
            Some("mListener"),
            false
        )
    );
    assert_eq!(
        view_row(&r, dead(2)).2,
        "mContext wraps a destroyed Activity (ContextThemeWrapper.mBase; mDestroyed is true)"
    );
    let g = path_to(&r, dead(3));
    assert_eq!(
        rows(g),
        [
            row("com.app.Statics", NOT, CLASS, Some("sOnPath"), true),
            row(
                VIEW_CLASS,
                LEAK,
                "mContext wraps a destroyed Activity (ContextThemeWrapper.mBase; mDestroyed is true)",
                Some("mContext"),
                false
            ),
            row(APPCOMPAT, LEAK, "held only through a leaking object", Some("mBase"), false),
            row(A, LEAK, DESTROYED, None, false),
        ]
    );
    // The strip empties the array a wrapper holds, and changes no trace.
    let (mini, _) = strip_bytes(&bytes, Level::Arrays).unwrap();
    let m = report(&mini);
    assert_eq!(m.analysis.stripped_arrays, 1);
    let traces = |r: &Report| {
        let mut v: Vec<String> = r
            .gc_paths
            .iter()
            .map(|g| serde_json::to_string(&g.trace).unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(traces(&r), traces(&m));
}

#[test]
fn two_wrappers_deep_the_reason_names_both() {
    let r = report(&wrapper_dump(
        &[scene(
            "sHilt",
            &[(wrap(1), W_HILT), (wrap(1) + 0x10, W_APPCOMPAT)],
            dead(1),
            false,
            dead(1),
        )],
        &[],
        &[dead(1)],
    ));
    assert_eq!(
        view_row(&r, dead(1)).2,
        "mContext wraps a destroyed Activity (ViewComponentManager$FragmentContextWrapper.mBase \
         -> ContextThemeWrapper.mBase; mDestroyed is true)"
    );
}

#[test]
fn a_wrapper_around_a_live_activity_keeps_the_attached_rules() {
    // TwoContexts keeps a destroyed activity in mOld besides its mBase: only mBase counts.
    let r = report(&wrapper_dump(
        &[
            scene("sLiveAttached", &[(wrap(1), W_TWO)], LIVE_W, true, dead(1)),
            scene(
                "sLiveDetached",
                &[(wrap(2), W_APPCOMPAT)],
                LIVE_W,
                false,
                dead(2),
            ),
            // The same shapes around a destroyed activity.
            scene("sDeadAttached", &[(wrap(3), W_TWO)], dead(3), true, dead(3)),
            scene(
                "sDeadDetached",
                &[(wrap(4), W_APPCOMPAT)],
                dead(4),
                false,
                dead(4),
            ),
        ],
        &[LIVE_W],
        &[dead(1), dead(2), dead(3), dead(4)],
    ));
    let got: Vec<(&str, String)> = [1, 2, 3, 4]
        .iter()
        .map(|&k| {
            let (_, st, why, ..) = view_row(&r, dead(k));
            (st, why)
        })
        .collect();
    let wraps =
        |c: &str| format!("mContext wraps a destroyed Activity ({c}.mBase; mDestroyed is true)");
    let want = vec![
        (
            NOT,
            "mAttachInfo is not null (attached to a window)".to_string(),
        ),
        (
            UNK,
            "mAttachInfo is null (not attached to a window)".to_string(),
        ),
        (LEAK, wraps("TwoContexts")),
        (LEAK, wraps("ContextThemeWrapper")),
    ];
    assert_eq!(got, want);
}

#[test]
fn the_wrapper_walk_ends_on_a_loop_and_after_eight_wrappers() {
    let chain = |k: u64, n: u64| -> Vec<(u64, u64)> {
        (0..n)
            .map(|i| (wrap(k) + i * 0x10, W_VIEW_THEMED))
            .collect()
    };
    let r = report(&wrapper_dump(
        &[
            // mBase is the wrapper itself.
            scene("sSelf", &[(wrap(1), W_APPCOMPAT)], wrap(1), false, dead(1)),
            // Two wrappers, each the other's mBase.
            scene(
                "sPair",
                &[(wrap(2), W_APPCOMPAT), (wrap(2) + 0x10, W_HILT)],
                wrap(2),
                false,
                dead(2),
            ),
            scene("sEight", &chain(3, 8), dead(3), false, dead(3)),
            scene("sNine", &chain(4, 9), dead(4), false, dead(4)),
        ],
        &[],
        &[dead(1), dead(2), dead(3), dead(4)],
    ));
    let detached = "mAttachInfo is null (not attached to a window)";
    assert_eq!(view_row(&r, dead(1)).1, UNK);
    assert_eq!(view_row(&r, dead(1)).2, detached);
    assert_eq!(view_row(&r, dead(2)).2, detached);
    let eight = ["ContextThemeWrapper.mBase"; 8].join(" -> ");
    assert_eq!(
        view_row(&r, dead(3)).2,
        format!("mContext wraps a destroyed Activity ({eight}; mDestroyed is true)")
    );
    assert_eq!(view_row(&r, dead(4)).1, UNK);
    assert_eq!(view_row(&r, dead(4)).2, detached);
}
