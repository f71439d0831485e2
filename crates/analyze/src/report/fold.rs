//! One leak, one card (issue 42): what is folded into a leak finding's group rather than shown
//! as a group of its own, the findings held only through a leak's objects (its consequences)
//! and the dominators that hold a leak's objects (its holders).
#![forbid(unsafe_code)]

use super::{Dominators, Groups, Index, Named, Suspect, UNREACHED};
use std::collections::{HashMap, HashSet};

/// The dominator-tree numbers of the objects that dominate a leak finding's object (the leak
/// objects themselves included), walked up at most 4,096 levels from each.
pub(super) fn leak_holders(dom: &Dominators, suspects: &[Suspect]) -> HashSet<u32> {
    let mut held = HashSet::new();
    for s in suspects
        .iter()
        .filter(|s| crate::index::LEAK_REASONS.contains(&s.reason.as_str()))
    {
        let mut k = dom.number(s.node);
        for _ in 0..4096 {
            if k == 0 || k == UNREACHED || !held.insert(k) {
                break;
            }
            k = dom.idom_at(k);
        }
    }
    held
}

/// Findings held only through a leak finding's objects (issue 42: one leak, one card): each
/// suspect whose reason is no leak reason (a size or count finding) and that a leak suspect's
/// object dominates is taken out of `suspects`; returned by that leak object's node, as
/// (reason, class name, retained bytes).
pub(super) fn fold_consequences(
    ix: &Index,
    dom: &Dominators,
    suspects: &mut Vec<Suspect>,
) -> HashMap<u32, Vec<(String, String, u64)>> {
    let is_leak = |r: &str| crate::index::LEAK_REASONS.contains(&r);
    let mut leaks: Vec<(u32, u32)> = suspects
        .iter()
        .filter(|s| is_leak(&s.reason))
        .map(|s| (dom.number(s.node), s.node))
        .filter(|&(k, _)| k != UNREACHED)
        .collect();
    let mut folded: HashMap<u32, Vec<(String, String, u64)>> = HashMap::new();
    if leaks.is_empty() {
        return folded;
    }
    leaks.sort_unstable();
    suspects.retain(|s| {
        if is_leak(&s.reason) {
            return true;
        }
        let mut k = dom.number(s.node);
        for _ in 0..4096 {
            if k == 0 || k == UNREACHED {
                return true;
            }
            k = dom.idom_at(k);
            if let Ok(i) = leaks.binary_search_by_key(&k, |&(n, _)| n) {
                folded.entry(leaks[i].1).or_default().push((
                    s.reason.clone(),
                    ix.class_name(s.node),
                    dom.retained(s.node),
                ));
                return false;
            }
        }
        true
    });
    folded
}

/// Adds to each group the findings [`fold_consequences`] took out under its objects.
pub(super) fn add_consequences(
    ix: &Index,
    groups: &mut Groups,
    suspects: &[Suspect],
    folded: &HashMap<u32, Vec<(String, String, u64)>>,
    sign: &dyn Fn(u32) -> Named,
) {
    if folded.is_empty() {
        return;
    }
    for s in suspects {
        let Some(list) = folded.get(&s.node) else {
            continue;
        };
        let key = (s.reason.clone(), ix.class_name(s.node));
        let sig = sign(s.node).signature;
        if let Some(g) = groups.get_mut(&key).and_then(|m| m.get_mut(&sig)) {
            for (reason, class, r) in list {
                let e = g
                    .consequences
                    .entry((reason.clone(), class.clone()))
                    .or_default();
                e.0 += 1;
                e.1 += r;
            }
        }
    }
}
