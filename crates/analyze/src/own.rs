//! oomguard's own objects are never findings (issue 42): what only a class of oomguard's
//! package holds (the facade's last-words reserve, `OomGuard.reserve`) is no suspect.
#![forbid(unsafe_code)]

use crate::dominators::{Dominators, UNREACHED};
use crate::index::{Index, NONE};

/// The package of oomguard's own Java classes (the facade, `dev.oomguard.OomGuard`).
const OWN_PACKAGE: &str = "dev.oomguard.";

/// The dominators' numbers of oomguard's own class objects (see [`OWN_PACKAGE`]), sorted.
pub(crate) fn own_classes(ix: &Index, dom: &Dominators) -> Vec<u32> {
    let mut own: Vec<u32> = ix
        .classes
        .iter()
        .filter(|c| c.node != NONE && c.name.starts_with(OWN_PACKAGE))
        .map(|c| dom.number(c.node))
        .filter(|&k| k != UNREACHED)
        .collect();
    own.sort_unstable();
    own
}

/// Whether node `v` is held only through one of the class objects numbered `own`: one of them
/// dominates it (its dominator chain is walked, at most 4,096 steps up).
pub(crate) fn held_by(dom: &Dominators, own: &[u32], v: u32) -> bool {
    let mut k = dom.number(v);
    for _ in 0..4096 {
        if k == 0 || k == UNREACHED {
            return false;
        }
        if own.binary_search(&k).is_ok() {
            return true;
        }
        k = dom.idom_at(k);
    }
    false
}
