//! `Dominance::dominates`, which decides how far "held only through a leaking object" reaches:
//! on a small graph, a node holds alone what only it reaches, not what another path reaches too,
//! and an unreached node holds nothing and is held by nothing.

use super::super::Dominance;
use crate::dominators::{compute, Csr};

#[test]
fn a_node_dominates_only_what_it_holds_alone() {
    // 0 -> 1 -> 2 -> 3 and 0 -> 4 -> 3: 3 is reached through 2 and through 4.
    // 1 -> 5: 5 only through 1. 6: unreached.
    let lists = vec![
        vec![1, 4],
        vec![2, 5],
        vec![3],
        vec![],
        vec![3],
        vec![],
        vec![],
    ];
    let g = Csr::from_lists(&lists);
    let d = compute(&g, |_| 1, &[0], &[]);
    // One `Dominance` for every question, as a trace asks them, each asked twice: the answers
    // stay exact when the object asked about changes (its memo is then cleared) and when it
    // does not (what a walk that found no dominator passed is not remembered as dominated).
    let mut held = Dominance::new(&d);
    let mut dominates = |a, b| held.dominates(a, b);
    let yes = [(0, 3), (1, 2), (1, 5), (2, 2), (0, 5), (4, 4)];
    let no = [(1, 3), (2, 3), (4, 3), (2, 1), (5, 1), (1, 4)];
    for (a, b) in yes.into_iter().flat_map(|q| [q, q]) {
        assert!(dominates(a, b), "{a} dominates {b}");
    }
    for (a, b) in no.into_iter().flat_map(|q| [q, q]) {
        assert!(!dominates(a, b), "{a} does not dominate {b}");
    }
    for (a, b) in [(0, 6), (6, 1), (6, 6)] {
        assert!(!dominates(a, b), "unreached: {a}, {b}");
    }
}
