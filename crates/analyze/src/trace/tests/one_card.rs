//! One leak, one card (issue 42): an object that holds a leak finding's objects is no "Large
//! Retained Size" finding of its own, however much it retains; it is on the leak's path, and
//! in `dominators[]`. A holder of nothing leaking still is one.

use super::inspect_edges::{activity, dead, edge_dump, E_HOLDER, F};
use super::*;
use crate::report::LARGE_RETAINED;

#[test]
fn a_holder_of_a_leaks_objects_is_no_card_of_its_own() {
    const OF_LEAK: u64 = 0x2000;
    const OF_LIVE: u64 = 0x2010;
    const LIVE: u64 = 0x1000;
    let bytes = edge_dump(
        &[],
        &[("sLeaked", OF_LEAK), ("sLive", OF_LIVE)],
        &[
            (OF_LEAK, E_HOLDER, vec![F::L(dead(0))]),
            activity(dead(0), true, 0),
            (OF_LIVE, E_HOLDER, vec![F::L(LIVE)]),
            activity(LIVE, false, 0),
        ],
    );
    // Every dominator group is large here.
    let cfg = Config {
        large_retained_bytes: 1,
        ..Config::default()
    };
    let (mini, _) = strip_bytes(&bytes, Level::Arrays).unwrap();
    for b in [&bytes, &mini] {
        let r = analyze(Input::Bytes(b), &cfg, serde_json::Value::Null).unwrap();
        let cards: Vec<(&str, &str, String)> = r
            .gc_paths
            .iter()
            .map(|g| {
                let start = g
                    .path
                    .first()
                    .map_or(String::new(), |p| p.reference.clone());
                (g.leak_reason.as_str(), g.class_name.as_str(), start)
            })
            .collect();
        let large: Vec<&(&str, &str, String)> =
            cards.iter().filter(|c| c.0 == LARGE_RETAINED).collect();
        // The leak's holder and the leaked activity: no card; the live one's holder: one.
        assert!(cards.iter().any(|c| c.0 == "Activity Leak"), "{cards:#?}");
        assert!(
            large.iter().all(|c| c.1 != "com.app.MainActivity"),
            "{cards:#?}"
        );
        assert!(large.iter().all(|c| !c.2.contains("sLeaked")), "{cards:#?}");
        assert!(
            large
                .iter()
                .any(|c| c.1 == "com.app.Holder" && c.2.contains("sLive")),
            "{cards:#?}"
        );
        // The holder is still a dominator.
        assert!(
            r.dominators
                .iter()
                .any(|d| d.class_name == "com.app.Holder"),
            "{:#?}",
            r.dominators
        );
    }
}
