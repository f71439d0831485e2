//! Library leaks (`crate::library`, issue 42 item 6) on dumps built with the `hprof` writer: a
//! path through a known reference is marked, by the API level and the maker the running info
//! names, and the command line's text lists it apart from the app's leaks; the stripped twin
//! gives the same answer.

use super::inspect_edges::{
    activity, dead, edge_dump_ints, Cls, E_OBJECT, E_OWN, E_STATICS, E_VIEW, F,
};
use super::*;
use crate::report::Summary;

const IMM_C: u64 = E_OWN;
const BOOST: u64 = E_OWN + 8;
const GROUP: u64 = E_OWN + 0x10;
const LINEAR: u64 = E_OWN + 0x18;
const VERSION: u64 = E_OWN + 0x20;
const COMPAT: u64 = E_OWN + 0x28;
const IMM: &str = "android.view.inputmethod.InputMethodManager";

/// The dump:
/// - `Statics.sImm` -> InputMethodManager -> `mNextServedView` -> a detached View -> `mContext`
///   -> destroyed activity 1 (AOSP, API 15 to 33);
/// - `GestureBoostManager.mContext` (static) -> destroyed activity 2 (HUAWEI, API 24 and 25);
/// - `Statics.sLayout` -> a LinearLayout -> `mPreSortedChildren` (declared by ViewGroup) ->
///   destroyed activity 3 (API 30);
/// - `Statics.sMine` -> destroyed activity 4: the app's own leak.
fn library_dump() -> Vec<u8> {
    dump_with_sdk_int(None)
}

/// [`library_dump`], with `android.os.Build$VERSION.SDK_INT` (a static int) if `sdk` is given.
fn dump_with_sdk_int(sdk: Option<i32>) -> Vec<u8> {
    let sdk_int: Vec<(&str, i32)> = sdk.map(|n| ("SDK_INT", n)).into_iter().collect();
    dump_with_static_ints(&sdk_int, &[])
}

/// [`library_dump`], with the static ints `version` in `android.os.Build$VERSION`, and `app` in
/// an app class, `com.app.Compat` (whose class dump comes after VERSION's).
fn dump_with_static_ints(version: &[(&str, i32)], app: &[(&str, i32)]) -> Vec<u8> {
    use BasicType::*;
    let own: Vec<Cls> = vec![
        (IMM_C, IMM, E_OBJECT, vec![("mNextServedView", Object)]),
        (
            BOOST,
            "android.gestureboost.GestureBoostManager",
            E_OBJECT,
            vec![],
        ),
        (
            GROUP,
            "android.view.ViewGroup",
            E_VIEW,
            vec![("mPreSortedChildren", Object)],
        ),
        (LINEAR, "android.widget.LinearLayout", GROUP, vec![]),
        (VERSION, "android.os.Build$VERSION", E_OBJECT, vec![]),
        (COMPAT, "com.app.Compat", E_OBJECT, vec![]),
    ];
    let statics: [(&str, u64); 3] = [("sImm", 0x2000), ("sLayout", 0x2200), ("sMine", dead(4))];
    let boost: [(&str, u64); 1] = [("mContext", dead(2))];
    edge_dump_ints(
        &own,
        &[(E_STATICS, &statics), (BOOST, &boost)],
        &[(VERSION, version), (COMPAT, app)],
        &[
            (0x2000, IMM_C, vec![F::L(0x2010)]),
            (0x2010, E_VIEW, vec![F::L(dead(1)), F::L(0), F::L(0)]),
            // LinearLayout: ViewGroup's field, then View's three.
            (
                0x2200,
                LINEAR,
                vec![F::L(dead(3)), F::L(0), F::L(0x2210), F::L(0)],
            ),
            (0x2210, E_VIEW, vec![F::L(0), F::L(0), F::L(0)]),
            activity(dead(1), true, 0),
            activity(dead(2), true, 0),
            activity(dead(3), true, 0),
            activity(dead(4), true, 0),
        ],
        &[],
    )
}

/// The pattern of the library leak on the path to each destroyed activity 1 to 4.
fn patterns(r: &Report) -> Vec<Option<String>> {
    (1..=4)
        .map(|k| {
            path_to(r, dead(k))
                .library_leak
                .as_ref()
                .map(|l| l.pattern.clone())
        })
        .collect()
}

fn on(api: u32, maker: &str) -> serde_json::Value {
    serde_json::json!({"apiLevel": api, "manufacturer": maker})
}

#[test]
fn a_path_through_a_known_reference_is_a_library_leak_where_it_applies() {
    let full = library_dump();
    let (mini, _) = strip_bytes(&full, Level::Arrays).unwrap();
    let imm = Some(format!("{IMM}.mNextServedView"));
    let boost = Some("android.gestureboost.GestureBoostManager.mContext".to_string());
    let sorted = Some("android.view.ViewGroup.mPreSortedChildren".to_string());
    for bytes in [&full, &mini] {
        // HUAWEI on API 24: the AOSP leak and HUAWEI's; not API 30's.
        let r = report_with(bytes, on(24, "HUAWEI"));
        assert_eq!(patterns(&r), [imm.clone(), boost.clone(), None, None]);
        // API 30, another maker: the ViewGroup field (declared by the superclass) and the
        // input method manager's, not HUAWEI's.
        let r = report_with(bytes, on(30, "samsung"));
        assert_eq!(patterns(&r), [imm.clone(), None, sorted.clone(), None]);
        // API 34: none of them leaks there any more.
        let r = report_with(bytes, on(34, "HUAWEI"));
        assert_eq!(patterns(&r), [None, None, None, None]);
        // Unknown device (apiLevel 0, no maker): every API level, but no maker's own leak.
        let r = report_with(bytes, on(0, ""));
        assert_eq!(patterns(&r), [imm.clone(), None, sorted.clone(), None]);
    }
    let r = report_with(&full, on(24, "huawei"));
    let l = path_to(&r, dead(1)).library_leak.clone().unwrap();
    assert_eq!(l.api_levels, [15, 33]);
    assert!(l.tracked.starts_with("https://"), "{l:?}");
    let json = serde_json::to_value(path_to(&r, dead(4))).unwrap();
    assert!(json.get("libraryLeak").is_none(), "{json}");
}

#[test]
fn the_text_lists_library_leaks_after_the_apps_own() {
    let r = report_with(&library_dump(), on(24, "HUAWEI"));
    // The report's own order, which every view follows: the app's leaks, then the library
    // leaks, each by retained size.
    let order: Vec<(bool, u64)> = r
        .gc_paths
        .iter()
        .map(|g| (g.library_leak.is_some(), u64::MAX - g.retained_size))
        .collect();
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
    assert_eq!(order.iter().filter(|o| o.0).count(), 2);
    let text = Summary(&r).to_string();
    let app = text.find("leaks by reason:").expect(&text);
    let lib = text
        .find("library leaks (known leaks of Android or the device maker's build):")
        .expect(&text);
    assert!(app < lib, "{text}");
    // Two activities are the app's own leaks by reason (3 and 4), two are library leaks.
    let line = |from: usize, what: &str| {
        text[from..]
            .lines()
            .find(|l| l.trim_start().starts_with(what))
            .unwrap_or_else(|| panic!("{what} in {text}"))
            .split_whitespace()
            .nth(if what == "Activity Leak" { 2 } else { 1 })
            .unwrap()
            .to_string()
    };
    assert_eq!(line(app, "Activity Leak"), "2");
    assert_eq!(line(lib, &format!("{IMM}.mNextServedView")), "1");
    // The traces: the app's leaks first; a library leak says what is known of it.
    let leak_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("leak ")).collect();
    assert_eq!(leak_lines.len(), 3, "{text}");
    let first_lib = text.find("    library leak (").expect(&text);
    let before: Vec<&str> = text[..first_lib].lines().collect();
    assert!(
        before.last().unwrap().starts_with("leak 3 of 4: "),
        "{text}"
    );
    assert_eq!(before.iter().filter(|l| l.starts_with("leak ")).count(), 3);
}

/// A dump analysed on its own (no running info) takes its API level from
/// `Build.VERSION.SDK_INT`, which the strip keeps: API 34 is past every entry of the dump's
/// paths; API 30 has two of them; without the field every API level is taken.
#[test]
fn without_running_info_the_api_level_is_the_dumps_sdk_int() {
    let imm = Some(format!("{IMM}.mNextServedView"));
    let sorted = Some("android.view.ViewGroup.mPreSortedChildren".to_string());
    for (sdk, want) in [
        (Some(34), vec![None, None, None, None]),
        (Some(30), vec![imm.clone(), None, sorted.clone(), None]),
        (Some(24), vec![imm.clone(), None, None, None]),
        (Some(9_999), vec![None, None, None, None]),
        (None, vec![imm.clone(), None, sorted.clone(), None]),
        // No API level: as without the field.
        (Some(0), vec![imm.clone(), None, sorted.clone(), None]),
        (Some(-1), vec![imm.clone(), None, sorted.clone(), None]),
        (Some(10_000), vec![imm.clone(), None, sorted.clone(), None]),
    ] {
        let full = dump_with_sdk_int(sdk);
        let (mini, _) = strip_bytes(&full, Level::Arrays).unwrap();
        for bytes in [&full, &mini] {
            assert_eq!(patterns(&report(bytes)), want, "SDK_INT {sdk:?}");
        }
        // The running info's level comes first.
        assert_eq!(
            patterns(&report_with(&full, on(24, "HUAWEI")))[1],
            Some("android.gestureboost.GestureBoostManager.mContext".to_string())
        );
    }
}

/// Only `Build.VERSION`'s field named `SDK_INT` is the API level: not another int static of that
/// class before it (`RESOURCES_SDK_INT`), nor an app class's own `SDK_INT`.
#[test]
fn the_api_level_is_build_version_s_sdk_int_and_no_other_int() {
    let imm = Some(format!("{IMM}.mNextServedView"));
    let sorted = Some("android.view.ViewGroup.mPreSortedChildren".to_string());
    let past_every_entry = vec![None, None, None, None];
    let dump = dump_with_static_ints(&[("RESOURCES_SDK_INT", 24), ("SDK_INT", 34)], &[]);
    assert_eq!(patterns(&report(&dump)), past_every_entry);
    let dump = dump_with_static_ints(&[("RESOURCES_SDK_INT", 24)], &[("SDK_INT", 34)]);
    assert_eq!(
        patterns(&report(&dump)),
        vec![imm, None, sorted, None],
        "no level: every entry"
    );
}
