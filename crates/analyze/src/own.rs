//! oomguard's own objects are never findings (issue 42): what only a class of oomguard's
//! package holds (the facade's last-words reserve, `OomGuard.reserve`) is no suspect.
#![forbid(unsafe_code)]

use crate::dominators::{Dominators, UNREACHED};
use crate::held::HeldBy;
use crate::index::{Index, NONE};

/// The package of oomguard's own Java classes (the facade, `dev.oomguard.OomGuard`).
const OWN_PACKAGE: &str = "dev.oomguard.";

/// The dominators' numbers of oomguard's own class objects (see [`OWN_PACKAGE`]).
fn own_classes(ix: &Index, dom: &Dominators) -> Vec<u32> {
    ix.classes
        .iter()
        .filter(|c| c.node != NONE && c.name.starts_with(OWN_PACKAGE))
        .map(|c| dom.number(c.node))
        .filter(|&k| k != UNREACHED)
        .collect()
}

/// Whether nodes are held only through one of oomguard's own class objects (one of them
/// dominates the node); `None` if none of the classes of `ix` is oomguard's.
pub(crate) fn held_by_own<'a>(ix: &Index, dom: &'a Dominators) -> Option<HeldBy<'a>> {
    let own = own_classes(ix, dom);
    (!own.is_empty()).then(|| HeldBy::new(dom, own))
}
