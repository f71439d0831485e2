//! The cap on suspects given paths in all ([`MAX_SUSPECTS`]), shared out among the reasons
//! and classes.
#![forbid(unsafe_code)]

use super::{Dominators, Index, Suspect, MAX_SUSPECTS};
use std::collections::HashMap;

/// At most [`MAX_SUSPECTS`] of `keep` (grouped by reason and class, the largest first in each
/// group; `places[i]` is `keep[i]`'s place in its group, from 1): the same number from each
/// group where it has that many (the most that fits), so that every group keeps some; then, if
/// there are more groups than that allows, those that retain the most (ties: the earlier). The
/// others are counted per class in `past_cap`.
pub(super) fn within_max_suspects(
    ix: &Index,
    dom: &Dominators,
    keep: Vec<Suspect>,
    places: &[usize],
    past_cap: &mut HashMap<u32, u64>,
) -> Vec<Suspect> {
    // A group's size is the place of its last suspect (the next one starts again at 1).
    let mut sizes: Vec<usize> = (0..places.len())
        .filter(|&i| places.get(i + 1).is_none_or(|&n| n == 1))
        .map(|i| places[i])
        .collect();
    // The largest per-group quota within the cap (at least one).
    sizes.sort_unstable();
    let (mut room, mut quota) = (MAX_SUSPECTS, usize::MAX);
    for (i, &n) in sizes.iter().enumerate() {
        let groups = sizes.len() - i;
        if n.saturating_mul(groups) > room {
            quota = (room / groups).max(1);
            break;
        }
        room -= n;
    }
    let mut kept: Vec<bool> = places.iter().map(|&p| p <= quota).collect();
    let mut order: Vec<usize> = (0..keep.len()).filter(|&i| kept[i]).collect();
    if order.len() > MAX_SUSPECTS {
        let retained = |i: usize| dom.retained(keep[i].node);
        sys::order::sort_by(&mut order, |&a, &b| {
            retained(b).cmp(&retained(a)).then(a.cmp(&b))
        });
        for &i in &order[MAX_SUSPECTS..] {
            kept[i] = false;
        }
    }
    let mut out = Vec::with_capacity(MAX_SUSPECTS);
    for (s, k) in keep.into_iter().zip(kept) {
        match k {
            true => out.push(s),
            false => *past_cap.entry(ix.class_of[s.node as usize]).or_default() += 1,
        }
    }
    out
}
