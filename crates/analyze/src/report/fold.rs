//! One leak, one card (issue 42): what is folded into a leak finding's group rather than shown
//! as a group of its own, the findings held only through a leak's objects (its consequences)
//! and the dominators that hold a leak's objects (its holders).
//!
//! Both follow dominator chains to their ends, at any depth, in time linear in the numbers
//! passed (each is walked once for all the findings below it) and with a bit a number, plus a
//! word for one number in [`STRIDE`] of those passed for the consequences.
#![forbid(unsafe_code)]

use super::{Dominators, Groups, Index, Named, Suspect, UNREACHED};
use crate::arrays::{bit, set_bit};
use std::collections::HashMap;

/// The dominator-tree numbers of the objects that dominate a leak finding's object (the leak
/// objects themselves included), as bits (see [`is_holder`]).
pub(super) fn leak_holders(dom: &Dominators, suspects: &[Suspect]) -> Vec<u64> {
    let leaks: Vec<u32> = suspects
        .iter()
        .filter(|s| is_leak(&s.reason))
        .map(|s| dom.number(s.node))
        .collect();
    holders_of(dom, &leaks)
}

/// [`leak_holders`] of the leak objects numbered `leaks` (none: no bits at all).
fn holders_of(dom: &Dominators, leaks: &[u32]) -> Vec<u64> {
    let mut held = Vec::new();
    for &start in leaks {
        if held.is_empty() {
            held = vec![0u64; dom.len().div_ceil(64)];
        }
        // Up to the super-root, or to a number another leak's walk passed (all above it are
        // set). A dominator's number is smaller than what it dominates: a chain that did not
        // descend would be cut there.
        let mut k = start;
        while k != 0 && k != UNREACHED && !bit(&held, k as usize) {
            set_bit(&mut held, k as usize);
            let up = dom.idom_at(k);
            if up >= k {
                break;
            }
            k = up;
        }
    }
    held
}

/// Whether dominator number `k` is set in [`leak_holders`]' bits.
pub(super) fn is_holder(holders: &[u64], k: u32) -> bool {
    k != UNREACHED && holders.get(k as usize / 64).is_some() && bit(holders, k as usize)
}

fn is_leak(reason: &str) -> bool {
    crate::index::LEAK_REASONS.contains(&reason)
}

/// One number in this many of those a walk passes first keeps its answer in [`Nearest`]'s
/// map (and the last it passes): a later walk that meets the chain goes at most this many
/// steps further.
const STRIDE: usize = 64;

/// The nearest leak object above each number (its dominator chain's first leak finding's
/// number), each chain walked once for all that lie below it.
struct Nearest<'a> {
    dom: &'a Dominators,
    /// The leak objects' numbers.
    leak: Vec<u64>,
    /// Numbers some walk passed: the answer of each is kept in `at`, or in that of a number at
    /// most [`STRIDE`] steps up its chain.
    passed: Vec<u64>,
    /// The answers kept: a leak object's number, or [`UNREACHED`] for none.
    at: HashMap<u32, u32>,
}

impl<'a> Nearest<'a> {
    fn new(dom: &'a Dominators, leaks: &[u32]) -> Nearest<'a> {
        let words = dom.len().div_ceil(64);
        let mut leak = vec![0u64; words];
        for &k in leaks {
            set_bit(&mut leak, k as usize);
        }
        Nearest {
            dom,
            leak,
            passed: vec![0u64; words],
            at: HashMap::new(),
        }
    }

    /// The number of the nearest leak object strictly above number `start` on its dominator
    /// chain, or [`UNREACHED`] if there is none.
    fn above(&mut self, start: u32) -> u32 {
        let dom = self.dom;
        if start == 0 || start == UNREACHED {
            return UNREACHED;
        }
        let first = dom.idom_at(start);
        if first >= start {
            return UNREACHED;
        }
        // Up to the super-root, a leak object or a kept answer; numbers passed for the first
        // time come first, so they are counted until the first number passed before.
        let (mut k, mut new) = (first, 0usize);
        let mut fresh = true;
        let answer = loop {
            if k == 0 {
                break UNREACHED;
            }
            if bit(&self.leak, k as usize) {
                break k;
            }
            if let Some(&a) = self.at.get(&k) {
                break a;
            }
            if bit(&self.passed, k as usize) {
                fresh = false;
            } else if fresh {
                new += 1;
            }
            let up = dom.idom_at(k);
            if up >= k {
                break UNREACHED;
            }
            k = up;
        };
        // The new numbers again: every STRIDE-th and the last keep the answer.
        let mut j = first;
        for i in 0..new {
            set_bit(&mut self.passed, j as usize);
            if i % STRIDE == 0 || i + 1 == new {
                self.at.insert(j, answer);
            }
            j = dom.idom_at(j);
        }
        answer
    }
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
    let numbers: Vec<u32> = leaks.iter().map(|&(k, _)| k).collect();
    let mut nearest = Nearest::new(dom, &numbers);
    suspects.retain(|s| {
        if is_leak(&s.reason) {
            return true;
        }
        let k = nearest.above(dom.number(s.node));
        let Ok(i) = leaks.binary_search_by_key(&k, |&(n, _)| n) else {
            return true;
        };
        folded.entry(leaks[i].1).or_default().push((
            s.reason.clone(),
            ix.class_name(s.node),
            dom.retained(s.node),
        ));
        false
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dominators::{compute, Csr};
    use proptest::prelude::*;

    /// Whole walks up the chain of number `k`: the nearest leak strictly above it.
    fn nearest_by_walk(dom: &Dominators, leak: &[u32], k: u32) -> u32 {
        let mut j = k;
        loop {
            if j == 0 || j == UNREACHED {
                return UNREACHED;
            }
            j = dom.idom_at(j);
            if j != 0 && leak.contains(&j) {
                return j;
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Over graphs of long chains (most objects' one referrer is the one before), with
        /// branches and extra edges: the nearest leak above each number, asked in any order,
        /// and the leaks' holders are what whole walks up the chains say.
        #[test]
        fn nearest_leaks_and_holders_equal_whole_walks(
            n in 2usize..700,
            jumps in proptest::collection::vec(prop::bool::weighted(0.03), 700),
            picks in proptest::collection::vec(0u32..700, 700),
            extra in proptest::collection::vec((0u32..700, 0u32..700), 0..40),
            leaks in proptest::collection::vec(0u32..700, 0..6),
            asked in proptest::collection::vec(0u32..700, 0..300),
        ) {
            let mut lists = vec![Vec::new(); n];
            for v in 1..n {
                let p = if jumps[v] { picks[v] as usize % v } else { v - 1 };
                lists[p].push(v as u32);
            }
            for (a, b) in extra {
                if (a as usize) < n && (b as usize) < n {
                    lists[a as usize].push(b);
                }
            }
            let dom = compute(&Csr::from_lists(&lists), |_| 1, &[0], &[]);
            let leak: Vec<u32> = leaks
                .iter()
                .filter(|&&v| (v as usize) < n)
                .map(|&v| dom.number(v))
                .filter(|&k| k != 0 && k != UNREACHED)
                .collect();
            let mut nearest = Nearest::new(&dom, &leak);
            let all = (0..dom.len() as u32).chain([UNREACHED]);
            for k in asked.iter().map(|&a| a % dom.len() as u32).chain(all) {
                prop_assert_eq!(nearest.above(k), nearest_by_walk(&dom, &leak, k), "number {}", k);
            }
            let held = holders_of(&dom, &leak);
            for k in 0..dom.len() as u32 {
                let above_a_leak = leak.iter().any(|&l| {
                    let mut j = l;
                    while j != 0 && j != k {
                        j = dom.idom_at(j);
                    }
                    j == k && k != 0
                });
                prop_assert_eq!(is_holder(&held, k), above_a_leak, "number {}", k);
            }
            prop_assert!(!is_holder(&held, UNREACHED));
        }
    }
}
