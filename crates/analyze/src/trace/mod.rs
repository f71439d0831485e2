//! Leak traces (issue 32): a reported path as people read it. Where it starts, in words ("class
//! DemoApp$Session, static field sHistory"); per object on it, whether it is leaking and why; and
//! which references are the suspects, the ones to look at first.
//!
//! Status of the objects on a path, from the start (index 0) to the reported object:
//! 1. Each object is inspected by itself (`inspect`): NOT_LEAKING, LEAKING or UNKNOWN, with a
//!    reason. The reported object of a leak (`gcPaths[]`) is LEAKING with its detector's reason
//!    when no inspector says LEAKING already (the generic top-N and the size detectors
//!    included: the report calls it a leak). A dominator's (`dominators[]`) is only inspected.
//! 2. Above a not-leaking object: every object before the last NOT_LEAKING one is NOT_LEAKING
//!    ("above a not-leaking object"; one an inspector found LEAKING keeps its reason, with
//!    "but an object below it is not leaking" added).
//! 3. Below a leaking object: every object after the first LEAKING object that follows the last
//!    NOT_LEAKING one is LEAKING, LeakCanary's rule (issue 42). Its reason says whether the
//!    leaking object holds it alone (dominates it: "held only through a leaking object", freed
//!    with it) or not ("below a leaking object, reachable without it too": another path, not
//!    through it, keeps it alive). The status is the peer's; the reason keeps what dominance
//!    knows. An inspector's own LEAKING reason is kept.
//!
//!    Why the peer's rule: the suspects (step 4) end at the first LEAKING object whichever rule
//!    runs, so the rule changes no suspect and no signature; it decides only how the objects
//!    past the culprit read. Before, an object the leaking one did not dominate stayed UNKNOWN,
//!    and a reader took it for a place to look, below the leak that explains it. On this path it
//!    is reached only through a leaking object, so it is one of the leak's consequences; where it
//!    also has other holders the reason says so, which is what the old UNKNOWN hinted at.
//! 4. The suspect references are the outgoing references of the objects from the last
//!    NOT_LEAKING one (or the start, if none is) up to the one before the first LEAKING one (or
//!    the end). One of them is the reference that should not be there.
//!
//! An object's kind is `class` (a class object: its static fields), `array` or `instance`.
//! References are named `sHistory` (`static field`), `elementData` (`instance field`), `[4]`
//! (`array element`); an object's reference to its class, its superclass or its loader is
//! `<class>`, `<super>`, `<loader>` of type `other`, an unknown one `?`.
//!
//! A long path comes cut (`paths::Kept`): its nodes are its start and its end, and `leftOut`
//! says after which node how many objects were left out; that node's reference is the real one,
//! to the first of them. The steps above run over the nodes kept.
#![forbid(unsafe_code)]

mod inspect;
mod root;
#[cfg(test)]
mod tests;
mod text;

pub(crate) use inspect::{detector_reason, Inspector};
pub use root::TraceThread;
pub(crate) use root::{thread_names, thread_object};
pub use text::LeakTraces;

use super::arrays::bit;
use super::dominators::{Dominators, UNREACHED};
use super::held::HeldBy;
use super::index::Index;
use super::paths::{bloom_bit, fill_bloom, Kept, Pass3, Ref};
use hprof::{Sub, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Whether an object on a path is leaking.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    NotLeaking,
    Leaking,
    /// Also what a status this version does not know reads as.
    #[default]
    #[serde(other)]
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::NotLeaking => "NOT_LEAKING",
            Status::Leaking => "LEAKING",
            Status::Unknown => "UNKNOWN",
        }
    }
}

/// `gcPaths[i].trace` and `dominators[i].trace` (see the report's module documentation).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct Trace {
    pub root_kind: String,
    pub root: String,
    /// The thread the path starts on, for a root on a thread (see `root`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<TraceThread>,
    pub nodes: Vec<TraceNode>,
    /// Where a long path was cut (see `paths::Kept`); absent when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_out: Option<LeftOut>,
}

/// Objects of a long path left out of `nodes`: `steps` of them after `nodes[after]` (whose
/// `reference` is to the first of them).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct LeftOut {
    pub after: usize,
    pub steps: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct TraceNode {
    /// The object's class (for a class object, the class itself).
    pub class_name: String,
    pub object_id: u64,
    /// `class`, `instance` or `array`.
    pub kind: String,
    pub status: Status,
    pub status_reason: String,
    /// The outgoing reference to the next object; `None` on the last.
    pub reference: Option<String>,
    /// `static field`, `instance field`, `array element` or `other`; `None` on the last.
    pub reference_type: Option<String>,
    /// The class that declares the instance field `reference` names, when it is not
    /// `class_name` (a field of a superclass): what a mapping file names the field under.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub declared_class: String,
    /// Whether the outgoing reference is a suspect.
    pub suspect: bool,
    pub retained_size: u64,
}

/// Pass 3's second job: the class id and field bytes of the instances on the paths, by id.
pub(crate) struct Fields {
    /// Sorted.
    wanted: Vec<u64>,
    /// A one-hash Bloom filter of `wanted` (most instances of the pieces read are not wanted,
    /// and are passed after one bit test instead of a search).
    bloom: Vec<u64>,
    pub(crate) got: HashMap<u64, (u64, Vec<u8>)>,
}

impl Fields {
    pub(crate) fn new(mut wanted: Vec<u64>) -> Self {
        wanted.sort_unstable();
        wanted.dedup();
        let mut bloom = Vec::new();
        fill_bloom(&mut bloom, wanted.iter().copied());
        Fields {
            wanted,
            bloom,
            got: HashMap::new(),
        }
    }
    /// The ids whose fields are wanted, sorted.
    pub(crate) fn wanted(&self) -> &[u64] {
        &self.wanted
    }
    /// Take the objects `other` got that this did not (`other` read later pieces).
    pub(crate) fn absorb(&mut self, other: Fields) {
        for (id, v) in other.got {
            self.got.entry(id).or_insert(v);
        }
    }
}

impl Visitor for Fields {
    fn sub(&mut self, _offset: u64, s: &Sub<'_>, _raw: &[u8]) -> Result<(), String> {
        if let Sub::Instance {
            id, class_id, data, ..
        } = *s
        {
            if bit(&self.bloom, bloom_bit(id)) && self.wanted.binary_search(&id).is_ok() {
                // The first object with an id is the one analysed (see the index).
                self.got
                    .entry(id)
                    .or_insert_with(|| (class_id, data.to_vec()));
            }
        }
        Ok(())
    }
}

/// Two visitors fed the same records (pass 3: names of references, fields of objects).
pub(crate) struct Both<'a, A, B>(pub &'a mut A, pub &'a mut B);

impl<A: Visitor, B: Visitor> Visitor for Both<'_, A, B> {
    fn sub(&mut self, offset: u64, s: &Sub<'_>, raw: &[u8]) -> Result<(), String> {
        self.0.sub(offset, s, raw)?;
        self.1.sub(offset, s, raw)
    }
    fn array_data(&mut self, data: &[u8]) -> Result<(), String> {
        self.0.array_data(data)?;
        self.1.array_data(data)
    }
    fn array_end(&mut self) -> Result<(), String> {
        self.0.array_end()?;
        self.1.array_end()
    }
}

/// How a reference is written in a trace: its name and type.
fn reference(ix: &Index, r: &Ref) -> (String, &'static str) {
    match r {
        Ref::Field(decl, fi) => (
            ix.classes[*decl as usize].fields[*fi as usize].name.clone(),
            "instance field",
        ),
        Ref::Static(name) => (name.clone(), "static field"),
        Ref::Element(i) => (format!("[{i}]"), "array element"),
        Ref::ClassOf => ("<class>".into(), "other"),
        Ref::Super => ("<super>".into(), "other"),
        Ref::Loader => ("<loader>".into(), "other"),
        Ref::Unknown => ("?".into(), "other"),
    }
}

/// The trace of `path` (from [`crate::paths::Paths::path`], maybe cut), whose start has tag
/// `tag`. `end` is the detector's (reason, detail) for a leak, `None` for a dominator;
/// `names` the process's thread names by Java thread id ([`thread_names`]); `held` what the
/// report's traces found of dominance so far (one for all of them).
#[allow(clippy::too_many_arguments)]
pub(crate) fn build(
    ix: &Index,
    dom: &Dominators,
    p3: &Pass3<'_>,
    ins: &Inspector<'_>,
    names: &HashMap<i64, String>,
    held: &mut Dominance<'_>,
    kept: &Kept,
    tag: u8,
    end: Option<(&str, &str)>,
) -> Trace {
    let path = &kept.nodes;
    let refs: Vec<Ref> = kept
        .edges()
        .map(|(x, y)| p3.get(ix.id(x), ix.id(y)))
        .collect();
    let (root_kind, root, thread) = match path.first() {
        Some(&s) => root::root_words(ix, ins, names, s, tag, refs.first()),
        None => ("other".into(), "unreachable".into(), None),
    };
    let mut nodes: Vec<TraceNode> = path
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let (status, status_reason) = ins.inspect(v);
            let (reference, reference_type) = match refs.get(i) {
                Some(r) => {
                    let (name, ty) = reference(ix, r);
                    (Some(name), Some(ty.to_string()))
                }
                None => (None, None),
            };
            let kind = if ix.class_of_node(v).is_some() {
                "class"
            } else if ix.classes[ix.class_of[v as usize] as usize]
                .name
                .ends_with("[]")
            {
                "array"
            } else {
                "instance"
            };
            let class_name = match ix.class_of_node(v) {
                Some(c) => ix.classes[c as usize].name.clone(),
                None => ix.class_name(v),
            };
            let declared_class = match refs.get(i) {
                Some(Ref::Field(decl, _)) => {
                    let d = &ix.classes[*decl as usize].name;
                    match *d == class_name {
                        true => String::new(),
                        false => d.clone(),
                    }
                }
                _ => String::new(),
            };
            TraceNode {
                declared_class,
                class_name,
                object_id: ix.id(v),
                kind: kind.into(),
                status,
                status_reason,
                reference,
                reference_type,
                suspect: false,
                retained_size: dom.retained(v),
            }
        })
        .collect();
    if let (Some((reason, detail)), Some(last)) = (end, nodes.last_mut()) {
        if last.status != Status::Leaking {
            last.status = Status::Leaking;
            last.status_reason = detector_reason(reason, detail);
        }
    }
    propagate(&mut nodes, |a, b| held.dominates(path[a], path[b]));
    let left_out = (kept.left_out > 0).then(|| LeftOut {
        after: kept.cut - 1,
        steps: kept.left_out,
    });
    Trace {
        root_kind,
        root,
        thread,
        nodes,
        left_out,
    }
}

/// Whether one object of a path dominates the objects after it, asked for each in turn (step 3
/// of the module documentation), exact at any depth: a [`HeldBy`] of that object, whose
/// answers are kept while the object asked about stays the same (over one trace, and over the
/// next traces with the same leaking object), so each dominator is walked once for it.
pub(crate) struct Dominance<'a> {
    held: HeldBy<'a>,
}

impl<'a> Dominance<'a> {
    pub(crate) fn new(dom: &'a Dominators) -> Dominance<'a> {
        Dominance {
            held: HeldBy::new(dom, Vec::new()),
        }
    }

    /// Whether node `a` dominates node `b` (a node dominates itself).
    fn dominates(&mut self, a: u32, b: u32) -> bool {
        let ka = self.held.dominators().number(a);
        if ka == UNREACHED {
            return false;
        }
        if self.held.by() != [ka] {
            self.held.reset(vec![ka]);
        }
        self.held.holds_node(b)
    }
}

/// Steps 2 to 4 of the module documentation over inspected nodes. `dominates(i, j)`: whether
/// node `i` of the path holds node `j` alone.
pub(crate) fn propagate(nodes: &mut [TraceNode], mut dominates: impl FnMut(usize, usize) -> bool) {
    let last_not = nodes.iter().rposition(|n| n.status == Status::NotLeaking);
    if let Some(l) = last_not {
        for n in &mut nodes[..l] {
            match n.status {
                Status::NotLeaking => {}
                Status::Unknown => {
                    n.status = Status::NotLeaking;
                    n.status_reason = "above a not-leaking object".into();
                }
                Status::Leaking => {
                    n.status = Status::NotLeaking;
                    n.status_reason =
                        format!("{}, but an object below it is not leaking", n.status_reason);
                }
            }
        }
    }
    let from = last_not.map_or(0, |l| l + 1);
    let first_leak = nodes[from.min(nodes.len())..]
        .iter()
        .position(|n| n.status == Status::Leaking)
        .map(|i| i + from);
    if let Some(f) = first_leak {
        // Dominance is a run from `f`: once `f` does not hold a node alone, it holds none below.
        let mut alone = true;
        for (j, n) in nodes.iter_mut().enumerate().skip(f + 1) {
            alone = alone && dominates(f, j);
            if n.status != Status::Leaking {
                n.status = Status::Leaking;
                n.status_reason = if alone {
                    "held only through a leaking object"
                } else {
                    "below a leaking object, reachable without it too"
                }
                .into();
            }
        }
    }
    let start = last_not.unwrap_or(0);
    let stop = first_leak.unwrap_or(nodes.len());
    let len = nodes.len();
    for (i, n) in nodes.iter_mut().enumerate() {
        n.suspect = i >= start && i < stop && i + 1 < len;
    }
}
