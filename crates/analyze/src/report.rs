//! The leak report: detectors' findings grouped by reference-path signature, in KOOM's schema
//! (`runningInfo`, `classInfos[]`, `gcPaths[]`, `leakObjects[]`), plus `dominators[]` (the
//! generic top-N retained detector) and `analysis` (what was read and tolerated, and timings).
//!
//! Invariants:
//! - Numbers are JSON numbers (bytes, counts, ids), never strings with units.
//! - Only strongly reachable objects are reported: one held only through weak, soft, phantom or
//!   finalizer references is not a leak.
//! - oomguard's own objects are never findings: an object held only through a class of
//!   `dev.oomguard.` (the facade's last-words reserve, `OomGuard.reserve`) is no suspect; one
//!   the app holds too is (issue 42).
//! - One finding per object (`index::one_flag_per_node`): a watched, destroyed Activity is one
//!   "Activity Leak".
//! - One leak, one group: a finding of no leak reason (a large array, a Bitmap, a count) whose
//!   object a leak finding's object (Activity, Fragment, Service, watched) dominates is not a
//!   suspect of its own: the leak's group lists it in `gcPaths[i].consequences` (reason,
//!   class, count, retained bytes), and it is in no `leakObjects[]` entry nor `classInfos`
//!   leak count. A finding above a leak (the collection holding it) is still its own group,
//!   but a "Large Retained Size" group whose first object dominates a leak finding's object
//!   (the leaked object itself, or what holds it) is none: it is on the leak's path, with what
//!   it retains, and in `dominators[]` (`gc_path_groups`).
//! - A `signature` is the sha1 of the root type, the chain of `class.field` steps (array indices
//!   left out, so every element of an array has the same shape) and the leaking class.
//! - A path starts at a class object where it reaches the object through a static field (see
//!   `paths`): `gcRoot` is then "System Class" and `path[]` starts with the static field
//!   (issue 32; before, it started at the dump's root, often a class loader's list of classes,
//!   so the signatures of such paths changed with it).
//! - The report's size is bounded whatever the dump (issue 39): a path keeps at most
//!   `paths::PATH_HEAD` + `paths::PATH_TAIL` objects, its start and its end; `gcPaths[]` at most
//!   [`MAX_GC_PATHS`] entries, `leakObjects[]` [`MAX_LEAK_OBJECTS`], `classInfos[]`
//!   [`MAX_CLASS_INFOS`], `dominators[]` `Config::top_n`; what the lists leave out is counted in
//!   `analysis.leftOut` (absent when nothing is). Class and field names are the dump's, each
//!   kept to `index::MAX_STRING_BYTES` (1 KiB) and cut with `…[+N bytes]` past it.
//! - A cut path: `stepsLeftOut` (on the `gcPaths[]` or `dominators[]` entry) objects were left
//!   out; in `path[]` one item of `referenceType` `LEFT_OUT` (reference "… N steps left out …")
//!   stands for them, after the item of the reference to the first of them, and the signature
//!   hashes that item as a step. The trace says so in `leftOut` (see below).
//! - The report phase holds, besides the suspects, the union of the kept parts of their paths;
//!   only the groups kept have their paths named (items) and traced. A suspect's signature is
//!   hashed step by step from a fresh walk of its path (walked twice: for pass 3, then to group;
//!   paths through one object above their last `paths::PATH_TAIL` walk above it once, and
//!   paths all along one chain walk it about once, see `paths::Memo`).
//! - A full dump and its `arrays`-stripped twin give the same report: nothing here reads the
//!   contents of a primitive array (a thread's name, a string's text). Thread names come from
//!   the incident's `runningInfo.javaThreads`, which the agent lists at the verdict.
//!
//! Library leaks, our addition too: a `gcPaths[]` entry whose path goes through a known leak of
//! the Android framework or of a device maker's build (`crate::library`) carries
//! `"libraryLeak": {"pattern": "android.os.Message.obj", "description": "...", "tracked":
//! "https://...", "apiLevels": [0, 30], "manufacturer": "samsung"}` (`tracked` and
//! `manufacturer` only when known); absent otherwise, so KOOM's readers see the same report.
//!
//! Leak traces, our addition beside KOOM's fields (`crate::trace` says how the statuses
//! and suspects are decided). `gcPaths[i].trace` is the path of the group's largest instance,
//! `dominators[i].trace` that of the group's largest object:
//! ```text
//! trace = {
//!   "rootKind": "static field" | "thread" | "JNI global" | "JNI local" | "Java frame"
//!               | "native stack" | "system class" | "monitor" | "sticky class" | "other",
//!   "root": "class DemoApp$Session, static field sHistory",       // where the path starts
//!   "thread": {                      // only for a root on a thread (rootKind thread, Java
//!                                    // frame, JNI local, native stack, thread block, monitor)
//!     "objectId": 5678,              // the thread's object, null if the dump lists none
//!     "id": 12,                      // Thread.getId() (its `tid` field), null if unknown
//!     "name": "main",                // from runningInfo.javaThreads, null if not listed
//!     "frame": "DemoApp.main(DemoApp.java:42)"   // a Java frame's or JNI local's method,
//!                                    // null where the dump has no stack traces (ART)
//!   },
//!   "nodes": [ {                                                  // from the start to the object
//!     "className": "DemoApp$Session",        // for a class object, the class itself
//!     "objectId": 123,                       // the object's id in the dump
//!     "kind": "class" | "instance" | "array",
//!     "status": "NOT_LEAKING" | "LEAKING" | "UNKNOWN",
//!     "statusReason": "a class is never leaking",                 // "" when nothing is known
//!     "reference": "sHistory" | "elementData" | "[4]" | "<class>" | null,  // to the next node
//!     "referenceType": "static field" | "instance field" | "array element" | "other" | null,
//!     "suspect": true,                       // whether that reference is a suspect
//!     "retainedSize": 12345                  // bytes, as `retainedSize` elsewhere
//!   } ],
//!   "leftOut": { "after": 29, "steps": 99992 }   // only on a cut path: objects left out after
//!                                    // nodes[after], whose reference is to the first of them
//! }
//! ```
//! `root` names a class and its first static field, or the dump's root and the object it holds
//! ("JNI global reference to X @0x1234", `thread "main" (java.lang.Thread @0x5678)`, `local
//! variable in DemoApp.main(DemoApp.java:42) on thread "main": X @0x9abc`; a thread the list
//! lacks is `thread #12`); `reference` is `null` exactly on the last node.
#![forbid(unsafe_code)]

use super::dominators::{Dominators, UNREACHED};
use super::index::{Index, Role};
use super::library::{self, LibraryLeak};
use super::paths::{root_name, Kept, Memo, Pass3, Paths, Ref};
use super::trace::{self, Both, Fields, Inspector, Trace};
use super::{threads, Config, Error, Input, Timings};
use hprof::Visitor;
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};

mod cap;
mod device;
mod fold;
use cap::within_max_suspects;
use fold::{add_consequences, fold_consequences, is_holder, leak_holders};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Report {
    /// The incident's running info, as the caller gave it.
    pub running_info: serde_json::Value,
    pub analysis: AnalysisInfo,
    pub class_infos: Vec<ClassInfo>,
    pub gc_paths: Vec<GcPath>,
    pub leak_objects: Vec<LeakObject>,
    pub dominators: Vec<DominatorGroup>,
    /// The class histogram, only in a report made within a budget too small for the whole
    /// analysis (`analysis.budget` says so; see `crate::budget`). Absent otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub histogram: Vec<crate::budget::HistogramRow>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AnalysisInfo {
    pub format: String,
    pub id_size: u32,
    pub input_bytes: u64,
    pub objects: u64,
    pub reachable_objects: u64,
    /// References the objects hold to objects the dump has: fields, elements, statics, a
    /// class's superclass and loader, and every object's reference to its class. Those to a
    /// class that is a listed root count here though the graph leaves them out
    /// (`IndexStats::rooted_class_refs`), so the count is the same however the index was built.
    pub references: u64,
    pub gc_roots: u64,
    /// Bytes retained by all roots together: the super-root's retained size, the shallow sizes
    /// of every reachable object (objects that several roots reach count once).
    pub reachable_bytes: u64,
    pub missing_references: u64,
    pub missing_roots: u64,
    pub stripped_arrays: u64,
    /// Objects listed with an id an earlier object already had (each such id's first object is
    /// the one analysed).
    pub duplicate_ids: u64,
    pub unknown_class_instances: u64,
    pub short_instances: u64,
    /// Parts of the file parsed side by side (1: in one piece).
    pub parse_parts: u64,
    /// Heap dumps (snapshots) in the file, and the one analysed, counted from 1 (the others
    /// are not read: merged, they would make a heap that never existed).
    pub snapshots: u64,
    pub snapshot: u64,
    /// How shallow (and so retained) sizes were counted: the VM's object header, reference
    /// size, alignment, and whether references are compressed (decided from the dump as MAT
    /// does). `java.lang.ref.Reference.referent` is never a strong reference.
    pub sizes: crate::index::Conventions,
    /// Entries over the report's bounds, not listed; absent when nothing was left out.
    #[serde(skip_serializing_if = "LeftOut::is_empty")]
    pub left_out: LeftOut,
    pub timings: Timings,
    /// The thresholds the analysis ran with, when they are not the defaults (see
    /// [`crate::Thresholds`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<crate::Thresholds>,
    /// Only when the whole analysis did not fit its budget (`Config::budget_bytes`): the
    /// budget, what the analysis was estimated to need, and what this report leaves out (see
    /// `crate::budget`). Absent in a whole report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::budget::Budget>,
}

/// Entries left out of the report's lists by its bounds ([`MAX_GC_PATHS`],
/// [`MAX_LEAK_OBJECTS`], [`MAX_CLASS_INFOS`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct LeftOut {
    pub gc_paths: u64,
    pub leak_objects: u64,
    pub class_infos: u64,
    /// `histogram[]` rows past [`crate::budget::MAX_HISTOGRAM`] (absent when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub histogram: u64,
}

impl LeftOut {
    fn is_empty(&self) -> bool {
        *self == LeftOut::default()
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct ClassInfo {
    pub class_name: String,
    pub instance_count: u64,
    pub leak_instance_count: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct PathItem {
    pub reference: String,
    pub reference_type: String,
    pub declared_class: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct GcPath {
    pub instance_count: u64,
    pub leak_reason: String,
    pub gc_root: String,
    pub signature: String,
    pub path: Vec<PathItem>,
    /// Objects of a long path left out between its start and its end (see `paths::Kept`): in
    /// `path[]`, one `LEFT_OUT` item stands for them. Absent when none are.
    #[serde(skip_serializing_if = "is_zero")]
    pub steps_left_out: u64,
    /// Our additions: the leaking class and what the instances on this path retain together.
    pub class_name: String,
    pub retained_size: u64,
    /// The path of the largest instance as a leak trace (see the module documentation).
    pub trace: Trace,
    /// A known leak of the Android framework or of a device maker's build that the path goes
    /// through (see `crate::library`): shown apart from the app's own leaks. Absent if none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub library_leak: Option<LibraryLeak>,
    /// Other findings (a large array, a Bitmap) whose objects this group's leaking objects hold
    /// alone: part of this leak, not leaks of their own. Absent if none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub consequences: Vec<Consequence>,
}

/// `gcPaths[i].consequences[j]`: the findings of one reason and class held only through the
/// group's leaking objects.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct Consequence {
    pub leak_reason: String,
    pub class_name: String,
    pub instance_count: u64,
    pub retained_size: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct LeakObject {
    pub class_name: String,
    /// Shallow size in bytes.
    pub size: u64,
    pub retained_size: u64,
    pub object_id: u64,
    pub leak_reason: String,
    pub ext_detail: String,
    pub signature: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct DominatorGroup {
    pub class_name: String,
    pub retained_size: u64,
    pub count: u64,
    pub gc_root: String,
    pub signature: String,
    pub path: Vec<PathItem>,
    /// As `GcPath::steps_left_out`.
    #[serde(skip_serializing_if = "is_zero")]
    pub steps_left_out: u64,
    /// The path of the largest object of the group as a leak trace.
    pub trace: Trace,
}

/// The short human summary the command line prints.
pub struct Summary<'a>(pub &'a Report);

impl std::fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.0;
        let a = &r.analysis;
        if let Some(b) = &a.budget {
            writeln!(f, "{} objects; {}", a.objects, b.reason)?;
            writeln!(f, "left out: {}", b.left_out.join(", "))?;
            // The findings of objects alone (no retained sizes), by reason, and the path found
            // for each class and reason.
            let mut by: BTreeMap<&str, u64> = BTreeMap::new();
            for o in &r.leak_objects {
                *by.entry(&o.leak_reason).or_default() += 1;
            }
            for (reason, n) in by {
                writeln!(f, "found: {n} x {reason}")?;
            }
            for g in &r.gc_paths {
                let steps: Vec<&str> = g.path.iter().map(|i| i.reference.as_str()).collect();
                let (c, why, root) = (&g.class_name, &g.leak_reason, &g.gc_root);
                writeln!(f, "path of {c} ({why}): {root} > {}", steps.join(" > "))?;
            }
            if a.left_out.gc_paths > 0 {
                let n = a.left_out.gc_paths;
                writeln!(f, "no path found for {n} class(es) and reason(s)")?;
            }
            writeln!(f, "top classes (shallow MB, count, class):")?;
            for h in r.histogram.iter().take(10) {
                let (n, c) = (h.instance_count, &h.class_name);
                writeln!(f, "  {:>10.2} {n:>7}  {c}", mb(h.shallow_size))?;
            }
            return Ok(());
        }
        writeln!(
            f,
            "{} objects ({} reachable, {:.1} MB retained by roots), {} references, {} missing",
            a.objects,
            a.reachable_objects,
            mb(a.reachable_bytes),
            a.references,
            a.missing_references
        )?;
        // The library leaks (see `crate::library`) apart, by their group's signature.
        let library: HashMap<&str, &str> = r
            .gc_paths
            .iter()
            .filter_map(|g| {
                Some((
                    g.signature.as_str(),
                    g.library_leak.as_ref()?.pattern.as_str(),
                ))
            })
            .collect();
        let mut by: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        let mut lib: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for o in &r.leak_objects {
            let e = match library.get(o.signature.as_str()) {
                Some(p) => lib.entry(p).or_default(),
                None => by.entry(&o.leak_reason).or_default(),
            };
            e.0 += 1;
            e.1 += o.retained_size;
        }
        // Groups of the generic top-N detector have no leakObjects entries of their own.
        for g in &r.gc_paths {
            if g.leak_reason == LARGE_RETAINED {
                let e = match &g.library_leak {
                    Some(l) => lib.entry(&l.pattern).or_default(),
                    None => by.entry(&g.leak_reason).or_default(),
                };
                e.0 += g.instance_count;
                e.1 += g.retained_size;
            }
        }
        if by.is_empty() {
            writeln!(f, "leaks: none found")?;
        } else {
            writeln!(f, "leaks by reason:")?;
            for (reason, (n, ret)) in by {
                writeln!(f, "  {reason:<32} {n:>7}  {:>10.2} MB retained", mb(ret))?;
            }
        }
        if !lib.is_empty() {
            writeln!(
                f,
                "library leaks (known leaks of Android or the device maker's build):"
            )?;
            for (pattern, (n, ret)) in lib {
                writeln!(f, "  {pattern:<32} {n:>7}  {:>10.2} MB retained", mb(ret))?;
            }
        }
        if !r.gc_paths.is_empty() {
            write!(f, "{}", super::trace::LeakTraces { report: r, top: 3 })?;
        }
        writeln!(f, "top dominators (retained MB, count, class):")?;
        for d in r.dominators.iter().take(10) {
            writeln!(
                f,
                "  {:>10.2} {:>7}  {}",
                mb(d.retained_size),
                d.count,
                d.class_name
            )?;
        }
        Ok(())
    }
}

/// The reason given to top-N groups that retain at least `Config::large_retained_bytes`.
pub const LARGE_RETAINED: &str = "Large Retained Size";

fn mb(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

struct Suspect {
    node: u32,
    reason: String,
    detail: String,
}

/// A named path: the root's tag name, the items (if asked for), and the signature; the path
/// and the tag of its first node.
struct Named {
    gc_root: String,
    items: Vec<PathItem>,
    signature: String,
    path: Kept,
    tag: u8,
}

/// A group of objects with one path signature (of suspects, or of dominator candidates) before
/// its path is named: `rep` is its first (largest) object, `detail` that one's detector detail.
#[derive(Clone)]
struct Group {
    reason: String,
    class_name: String,
    gc_root: String,
    signature: String,
    count: u64,
    retained: u64,
    rep: u32,
    detail: String,
    /// Findings held only through this group's leaking objects, by (reason, class): count and
    /// retained bytes (see [`fold_consequences`]).
    consequences: BTreeMap<(String, String), (u64, u64)>,
}

/// `gcPaths[]` entries kept in all: the largest by instances, then retained size (see
/// `keep_largest`); the others are counted in `analysis.leftOut.gcPaths`.
pub const MAX_GC_PATHS: usize = 100;
/// `leakObjects[]` entries kept in all: the largest retained; the others are counted in
/// `analysis.leftOut.leakObjects` (their groups still count them). So are the suspects past
/// `Config::max_suspects_per_class` of one reason and class, which get no path and no group
/// (their class's `leakInstanceCount` counts them).
pub const MAX_LEAK_OBJECTS: usize = 1000;
/// Suspects given paths in all, whatever the classes: past it, each reason and class keeps the
/// same number of its largest (`within_max_suspects`), the others counted as the ones past
/// `Config::max_suspects_per_class` are. (The per-class cap alone let
/// the work grow with the classes: 100 classes of 1,000 destroyed activities, a 3.5 MB dump,
/// took 1.3 s to name their paths, and every class more adds as much.)
pub const MAX_SUSPECTS: usize = 10_000;
/// `classInfos[]` entries kept in all: the most leaking, then the most numerous classes.
pub const MAX_CLASS_INFOS: usize = 500;

/// The report of index `ix` and its dominators `dom`, whose tops were asked for with
/// [`candidates_wanted`] (its dominator candidates); `paths` gives the shortest paths to the
/// ends it is handed.
pub(crate) fn build(
    ix: &Index,
    dom: &Dominators,
    paths: impl FnOnce(&[u32]) -> Paths,
    cfg: &Config,
    input: Input<'_>,
    running_info: serde_json::Value,
) -> Result<Report, Error> {
    let (mut suspects, past_cap) = leak_suspects(ix, dom, cfg);
    // The dominator candidates (retained size, node), kept as the retained sizes were summed
    // (asked for by the caller: [`candidates_wanted`]).
    let cands = dom.tops();
    let folded = fold_consequences(ix, dom, &mut suspects);
    // The shortest paths, given the objects whose paths are named (all of them, or only as
    // far as these need).
    let ends: Vec<u32> = suspects
        .iter()
        .map(|s| s.node)
        .chain(cands.iter().map(|c| c.1))
        .collect();
    let bfs = &paths(&ends);

    // --- Name the paths (pass 3 over the file for the references along them). Each path is
    // walked here and again below, never kept: what this holds is the union of the kept parts
    // of the paths (at most PATH_HEAD + PATH_TAIL objects each), not a path per suspect.
    // Paths through one object above their ends (suspects in one collection) walk up once.
    let memo = RefCell::new(Memo::default());
    let walk = |v: u32| bfs.path_memo(ix, v, &mut memo.borrow_mut());
    let ends = suspects
        .iter()
        .map(|s| s.node)
        .chain(cands.iter().map(|c| c.1));
    let (p3, mut fields) = read_paths(ix, input, ends, &walk, threads(cfg))?;
    // A path's name and signature, without its items (grouping), or with them (the groups
    // kept: their first object's).
    let sign = |v: u32| name_path(ix, bfs, &p3, walk(v), v, false);
    let named = |v: u32| name_path(ix, bfs, &p3, walk(v), v, true);

    // --- gcPaths and leakObjects: suspects grouped by (reason, class, signature).
    let listed = listed_suspects(&suspects, dom, MAX_LEAK_OBJECTS);
    let mut left_out = LeftOut {
        leak_objects: (suspects.len() - listed.len()) as u64 + past_cap.values().sum::<u64>(),
        ..LeftOut::default()
    };
    let (mut groups, leak_objects, mut leak_counts) =
        group_suspects(ix, dom, &suspects, &listed, &sign);
    for (class, n) in past_cap {
        *leak_counts.entry(class).or_default() += n;
    }
    add_consequences(ix, &mut groups, &suspects, &folded, &sign);

    // --- dominators[]: candidates grouped by class and path shape, each with its first object.
    let dgroups = group_candidates(ix, cands, &sign, cfg.top_n);
    let holders = leak_holders(dom, &suspects);
    let gc_paths = gc_path_groups(groups, &dgroups, &holders, dom, cfg, &mut left_out);
    // Only the groups kept have their paths named.
    let gc_paths = name_gc_paths(gc_paths, &named);
    let dgroups = name_dominators(dgroups, &named);

    // --- Leak traces of the groups kept.
    let on_paths = gc_paths
        .iter()
        .map(|g| &g.1)
        .chain(dgroups.iter().map(|d| &d.1));
    read_trace_fields(ix, input, on_paths, &mut fields.got)?;
    let ins = Inspector::new(ix, &fields.got);
    let names = trace::thread_names(&running_info);
    let mut held = trace::Dominance::new(dom);
    let mut trace_of = |nm: &Named, end: Option<(&str, &str)>| {
        trace::build(ix, dom, &p3, &ins, &names, &mut held, &nm.path, nm.tag, end)
    };
    let device = device::device(ix, &input, &running_info)?;
    let mut gc_paths: Vec<GcPath> = gc_paths
        .into_iter()
        .map(|(mut g, nm, detail)| {
            g.trace = trace_of(&nm, Some((&g.leak_reason, &detail)));
            let first = g.trace.nodes.first().map_or("", |n| n.class_name.as_str());
            g.library_leak = library::find(&g.path, &g.trace.root_kind, first, &device);
            g
        })
        .collect();
    // One order for every view (the text, the page): the app's leaks, then the library
    // leaks; each by retained size, then instances, then (reason, class, signature).
    sys::order::sort_by(&mut gc_paths, |a, b| {
        (a.library_leak.is_some())
            .cmp(&b.library_leak.is_some())
            .then(b.retained_size.cmp(&a.retained_size))
            .then(b.instance_count.cmp(&a.instance_count))
            .then_with(|| {
                (&a.leak_reason, &a.class_name, &a.signature).cmp(&(
                    &b.leak_reason,
                    &b.class_name,
                    &b.signature,
                ))
            })
    });
    let dgroups: Vec<DominatorGroup> = dgroups
        .into_iter()
        .map(|(mut d, nm)| {
            d.trace = trace_of(&nm, None);
            d
        })
        .collect();

    // --- classInfos: every class a detector looks at, with its live and leaking counts.
    let mut class_infos = class_infos(ix, &leak_counts);
    left_out.class_infos = keep_largest(&mut class_infos, MAX_CLASS_INFOS, |c| {
        (c.leak_instance_count, c.instance_count)
    });

    Ok(Report {
        running_info,
        analysis: analysis_info(ix, dom, left_out),
        class_infos,
        gc_paths,
        leak_objects,
        dominators: dgroups,
        histogram: Vec::new(),
    })
}

/// Pass 3: the references along the paths that end at `ends` (each walked by `walk`), read
/// from just the pieces of the file that hold their objects, and the fields of the instances
/// on the paths that those pieces hold.
fn read_paths<'a>(
    ix: &'a Index,
    input: Input<'_>,
    ends: impl Iterator<Item = u32>,
    walk: &dyn Fn(u32) -> Kept,
    threads: usize,
) -> Result<(Pass3<'a>, Fields), Error> {
    let mut wanted: HashSet<(u64, u64)> = HashSet::new();
    let mut on_paths: HashSet<u64> = HashSet::new();
    for v in ends {
        let k = walk(v);
        wanted.extend(k.edges().map(|(x, y)| (ix.id(x), ix.id(y))));
        on_paths.extend(k.nodes.iter().map(|&v| ix.id(v)));
    }
    // Pass 3 also keeps the fields of the instances on the paths that its pieces hold. The
    // pieces are read on the analysis's threads, each with visitors of its own, then what each
    // found is joined in file order (the first object with an id is the one analysed).
    let (wanted, on_paths): (Vec<_>, Vec<_>) =
        (wanted.into_iter().collect(), on_paths.into_iter().collect());
    let mut p3 = Pass3::new(ix, wanted.clone());
    let mut fields = Fields::new(on_paths.clone());
    let mut more: Vec<(Pass3<'a>, Fields)> = (1..threads)
        .map(|_| {
            (
                Pass3::new(ix, wanted.clone()),
                Fields::new(on_paths.clone()),
            )
        })
        .collect();
    let mut parents: Vec<u64> = p3.wanted.iter().map(|w| w.0).collect();
    parents.dedup();
    {
        let mut first = Both(&mut p3, &mut fields);
        let mut boths: Vec<Both<'_, Pass3<'a>, Fields>> =
            more.iter_mut().map(|(p, f)| Both(p, f)).collect();
        let mut vs: Vec<&mut (dyn Visitor + Send)> = std::iter::once(&mut first)
            .chain(boths.iter_mut())
            .map(|b| b as &mut (dyn Visitor + Send))
            .collect();
        input.pass_segments_beside(&ix.segments, &parents, &mut vs, PASS3_BESIDE_MIN)?;
    }
    for (p, f) in more {
        p3.absorb(p);
        fields.absorb(f);
    }
    Ok((p3, fields))
}

/// Below this many bytes of pieces, pass 3 reads them all on one thread (a thread more costs
/// more than it saves on a few pieces). At 10 M objects it reads about 9 MB in 140 pieces: the
/// report phase took 19 ms on one thread and 13 on two (medians of 15 interleaved runs).
const PASS3_BESIDE_MIN: u64 = 1 << 20;

/// `gcPaths[]` before their paths are named: the suspects' `groups`, with the top-N groups
/// (`dgroups`) that retain at least `large_retained_bytes` as leaks too; at most
/// `max_paths_per_class` signatures per (reason, class), the most instances first, and at most
/// [`MAX_GC_PATHS`] in all (the others counted in `left_out`).
/// The `gcPaths[]` groups: the suspects' `groups`, and a "Large Retained Size" group for each
/// dominator group retaining `Config::large_retained_bytes` or more, but one whose first object
/// holds a leak finding's objects (`holders`, [`leak_holders`]): that one is the leak's holder,
/// on the leak's own path (its trace shows it, with what it retains), and in `dominators[]`;
/// a card of its own would show the one leak twice (issue 42).
fn gc_path_groups(
    mut groups: Groups,
    dgroups: &[Group],
    holders: &[u64],
    dom: &Dominators,
    cfg: &Config,
    left_out: &mut LeftOut,
) -> Vec<Group> {
    for d in dgroups {
        if d.retained >= cfg.large_retained_bytes && !is_holder(holders, dom.number(d.rep)) {
            let g = Group {
                reason: LARGE_RETAINED.into(),
                ..d.clone()
            };
            groups
                .entry((LARGE_RETAINED.into(), d.class_name.clone()))
                .or_default()
                .insert(d.signature.clone(), g);
        }
    }
    let mut gc_paths: Vec<Group> = Vec::new();
    for (_, sigs) in groups {
        let mut v: Vec<Group> = sigs.into_values().collect();
        sys::order::sort_by(&mut v, |a, b| {
            b.count.cmp(&a.count).then(b.retained.cmp(&a.retained))
        });
        v.truncate(cfg.max_paths_per_class);
        gc_paths.extend(v);
    }
    left_out.gc_paths = keep_largest(&mut gc_paths, MAX_GC_PATHS, |g| (g.count, g.retained));
    gc_paths
}

/// Each `gcPaths[]` group with its first object's path `named`, and its detector detail.
fn name_gc_paths(
    gc_paths: Vec<Group>,
    named: &dyn Fn(u32) -> Named,
) -> Vec<(GcPath, Named, String)> {
    gc_paths
        .into_iter()
        .map(|g| {
            let nm = named(g.rep);
            let p = GcPath {
                instance_count: g.count,
                leak_reason: g.reason,
                gc_root: g.gc_root,
                signature: g.signature,
                path: nm.items.clone(),
                steps_left_out: nm.path.left_out,
                class_name: g.class_name,
                retained_size: g.retained,
                trace: Trace::default(),
                library_leak: None,
                consequences: g
                    .consequences
                    .iter()
                    .map(|((reason, class), &(n, r))| Consequence {
                        leak_reason: reason.clone(),
                        class_name: class.clone(),
                        instance_count: n,
                        retained_size: r,
                    })
                    .collect(),
            };
            (p, nm, g.detail)
        })
        .collect()
}

/// Each `dominators[]` group with its first object's path `named`.
fn name_dominators(
    dgroups: Vec<Group>,
    named: &dyn Fn(u32) -> Named,
) -> Vec<(DominatorGroup, Named)> {
    dgroups
        .into_iter()
        .map(|g| {
            let nm = named(g.rep);
            let d = DominatorGroup {
                class_name: g.class_name,
                retained_size: g.retained,
                count: g.count,
                gc_root: g.gc_root,
                signature: g.signature,
                path: nm.items.clone(),
                steps_left_out: nm.path.left_out,
                trace: Trace::default(),
            };
            (d, nm)
        })
        .collect()
}

/// Into `got`, the fields the leak traces of `paths` need that pass 3 did not see (the last
/// object of a path is no parent): the few pieces they are in are read now. A View's context is
/// often a ContextWrapper around its Activity, seldom on the path: the wrappers' fields are read
/// hop by hop, again from just their pieces.
fn read_trace_fields<'n>(
    ix: &Index,
    input: Input<'_>,
    paths: impl Iterator<Item = &'n Named>,
    got: &mut HashMap<u64, (u64, Vec<u8>)>,
) -> Result<(), Error> {
    let on_traces: Vec<u32> = paths
        .flat_map(|nm| {
            // Each path's objects, and the thread a path on a thread starts on (its `tid`).
            let thread = nm
                .path
                .nodes
                .first()
                .and_then(|&s| trace::thread_object(ix, s, nm.tag));
            nm.path.nodes.iter().copied().chain(thread)
        })
        .collect();
    let read = |ids: Vec<u64>| -> Result<HashMap<u64, (u64, Vec<u8>)>, Error> {
        let mut more = Fields::new(ids);
        let ids = more.wanted().to_vec();
        input.pass_segments(&ix.segments, &ids, &mut more)?;
        Ok(more.got)
    };
    let mut missing: Vec<u64> = on_traces
        .iter()
        .copied()
        .filter(|&v| {
            ix.class_of_node(v).is_none()
                && !ix.classes[ix.class_of[v as usize] as usize]
                    .name
                    .ends_with("[]")
        })
        .map(|v| ix.id(v))
        .filter(|id| !got.contains_key(id))
        .collect();
    missing.sort_unstable();
    missing.dedup();
    if !missing.is_empty() {
        got.extend(read(missing)?);
    }
    Inspector::read_context_wrappers(ix, &on_traces, got, &read)?;
    Inspector::read_off_path(ix, &on_traces, got, read)
}

/// `analysis`: the index's and the dominators' figures; the caller fills in the input's size,
/// the parts, the snapshot, the timings and the thresholds.
fn analysis_info(ix: &Index, dom: &Dominators, left_out: LeftOut) -> AnalysisInfo {
    let st = &ix.stats;
    AnalysisInfo {
        format: ix.header.format.to_string(),
        id_size: ix.header.id_size,
        input_bytes: 0,
        objects: st.objects,
        reachable_objects: dom.reachable(),
        references: st.edges + st.rooted_class_refs,
        gc_roots: dom.roots_used.len() as u64,
        reachable_bytes: dom.retained_at(0),
        missing_references: st.missing_refs,
        missing_roots: st.missing_roots,
        stripped_arrays: st.stripped_arrays,
        duplicate_ids: st.duplicate_ids,
        unknown_class_instances: st.unknown_class,
        short_instances: st.short_instances,
        parse_parts: 1,
        snapshots: 1,
        snapshot: 1,
        sizes: ix.sizes,
        left_out,
        timings: Timings::default(),
        thresholds: None,
        budget: None,
    }
}

/// Groups by (reason, class) then signature, each with its first object.
type Groups = BTreeMap<(String, String), BTreeMap<String, Group>>;

/// The suspects grouped by (reason, class, signature), each group with its first (largest)
/// object and its detail; the `leakObjects[]` entries of the suspects `listed` (sorted
/// indices); the suspects per class.
fn group_suspects(
    ix: &Index,
    dom: &Dominators,
    suspects: &[Suspect],
    listed: &[usize],
    sign: &dyn Fn(u32) -> Named,
) -> (Groups, Vec<LeakObject>, HashMap<u32, u64>) {
    let mut groups: Groups = BTreeMap::new();
    let mut leak_objects = Vec::new();
    let mut leak_counts: HashMap<u32, u64> = HashMap::new();
    for (i, s) in suspects.iter().enumerate() {
        let nm = sign(s.node);
        let cname = ix.class_name(s.node);
        *leak_counts.entry(ix.class_of[s.node as usize]).or_default() += 1;
        let ret = dom.retained(s.node);
        let g = groups
            .entry((s.reason.clone(), cname.clone()))
            .or_default()
            .entry(nm.signature.clone())
            .or_insert_with(|| Group {
                reason: s.reason.clone(),
                class_name: cname.clone(),
                gc_root: nm.gc_root.clone(),
                signature: nm.signature.clone(),
                count: 0,
                retained: 0,
                rep: s.node,
                detail: s.detail.clone(),
                consequences: BTreeMap::new(),
            });
        g.count += 1;
        g.retained += ret;
        if listed.binary_search(&i).is_ok() {
            leak_objects.push(LeakObject {
                class_name: cname,
                size: ix.shallow[s.node as usize] as u64,
                retained_size: ret,
                object_id: ix.id(s.node),
                leak_reason: s.reason.clone(),
                ext_detail: s.detail.clone(),
                signature: nm.signature,
            });
        }
    }

    (groups, leak_objects, leak_counts)
}

/// The dominator candidates grouped by class and path signature, each with its first object;
/// the `top_n` that retain the most.
fn group_candidates(
    ix: &Index,
    cands: &[(u64, u32)],
    sign: &dyn Fn(u32) -> Named,
    top_n: usize,
) -> Vec<Group> {
    let mut dgroups: Vec<Group> = Vec::new();
    let mut dindex: HashMap<(String, String), usize> = HashMap::new();
    for &(r, v) in cands {
        let nm = sign(v);
        let cname = ix.class_name(v);
        let key = (cname.clone(), nm.signature.clone());
        match dindex.get(&key) {
            Some(&i) => {
                dgroups[i].retained += r;
                dgroups[i].count += 1;
            }
            None => {
                dindex.insert(key, dgroups.len());
                dgroups.push(Group {
                    reason: String::new(),
                    class_name: cname,
                    gc_root: nm.gc_root,
                    signature: nm.signature,
                    count: 1,
                    retained: r,
                    rep: v,
                    detail: String::new(),
                    consequences: BTreeMap::new(),
                });
            }
        }
    }
    sys::order::sort_by(&mut dgroups, |a, b| {
        b.retained
            .cmp(&a.retained)
            .then(a.class_name.cmp(&b.class_name))
    });
    dgroups.truncate(top_n);
    dgroups
}

/// `classInfos[]`: every class a detector looks at, with its live and leaking counts.
pub(crate) fn class_infos(ix: &Index, leak_counts: &HashMap<u32, u64>) -> Vec<ClassInfo> {
    let mut class_infos = Vec::new();
    let mut agg: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (ci, c) in ix.classes.iter().enumerate() {
        let leaks = leak_counts.get(&(ci as u32)).copied().unwrap_or(0);
        match c.role {
            Role::None | Role::Watched { .. } if leaks == 0 => continue,
            Role::Window => {
                let e = agg.entry("android.view.Window").or_default();
                e.0 += c.instances as u64;
                e.1 += leaks;
            }
            Role::NativeAllocationRegistry => {
                let e = agg
                    .entry("libcore.util.NativeAllocationRegistry")
                    .or_default();
                e.0 += c.instances as u64;
                e.1 += leaks;
            }
            _ => {}
        }
        if c.instances > 0 || leaks > 0 {
            class_infos.push(ClassInfo {
                class_name: c.name.clone(),
                instance_count: c.instances as u64,
                leak_instance_count: leaks,
            });
        }
    }
    for (name, (n, l)) in agg {
        if !class_infos.iter().any(|c| c.class_name == name) {
            class_infos.push(ClassInfo {
                class_name: name.into(),
                instance_count: n,
                leak_instance_count: l,
            });
        }
    }

    class_infos
}

/// The suspects kept, and per class how many were past `Config::max_suspects_per_class`.
type Suspects = (Vec<Suspect>, HashMap<u32, u64>);

/// The detectors' findings on reachable objects, plus the counted roles (windows, native
/// allocation registries) over their thresholds; per (reason, class) the largest first, at most
/// `max_suspects_per_class` of them, and at most [`MAX_SUSPECTS`] in all (the others counted
/// per class).
fn leak_suspects(ix: &Index, dom: &Dominators, cfg: &Config) -> Suspects {
    let live = |v: u32| dom.number(v) != UNREACHED;
    // --- Suspects from the detectors (reachable ones only).
    let mut suspects: Vec<Suspect> = ix
        .flags
        .iter()
        .filter(|f| live(f.node))
        .map(|f| Suspect {
            node: f.node,
            reason: f.reason.clone(),
            detail: f.detail.clone(),
        })
        .collect();
    // Counted roles: windows and native allocation registries. Per class, which of the two it
    // is (if any); the nodes are read only if some class is (HotSpot dumps have neither).
    let counted: Vec<u8> = ix
        .classes
        .iter()
        .map(|c| match c.role {
            Role::Window => 1,
            Role::NativeAllocationRegistry => 2,
            _ => 0,
        })
        .collect();
    let mut windows = Vec::new();
    let mut registries = Vec::new();
    if counted.iter().any(|&k| k != 0) {
        for (v, &c) in ix.class_of.iter().enumerate() {
            let k = counted.get(c as usize).copied().unwrap_or(0);
            if k == 0 || !live(v as u32) {
                continue;
            }
            if k == 1 {
                windows.push(v as u32);
            } else {
                registries.push(v as u32);
            }
        }
    }
    for (found, max, reason, what) in [
        (
            &windows,
            cfg.window_max_count,
            "Window Count Over Threshold",
            "windows",
        ),
        (
            &registries,
            cfg.native_allocation_registry_max_count,
            "NativeAllocationRegistry Count Over Threshold",
            "registries",
        ),
    ] {
        if found.len() as u64 > max {
            let d = format!("{} live {what}", found.len());
            for &v in found {
                suspects.push(Suspect {
                    node: v,
                    reason: reason.into(),
                    detail: d.clone(),
                });
            }
        }
    }
    // oomguard's own objects (the facade's last-words reserve) are never findings.
    if let Some(mut held) = super::own::held_by_own(ix, dom) {
        suspects.retain(|s| !held.holds_node(s.node));
    }
    // Per (reason, class): the largest first, at most max_suspects_per_class get paths.
    sys::order::sort_by(&mut suspects, |a, b| {
        (&a.reason, ix.class_of[a.node as usize])
            .cmp(&(&b.reason, ix.class_of[b.node as usize]))
            .then(dom.retained(b.node).cmp(&dom.retained(a.node)))
            .then(a.node.cmp(&b.node))
    });
    let mut keep = Vec::with_capacity(suspects.len());
    // Each kept suspect's place in its (reason, class), from 1.
    let mut places = Vec::with_capacity(suspects.len());
    let mut past_cap: HashMap<u32, u64> = HashMap::new();
    let mut last: Option<(String, u32)> = None;
    let mut run = 0usize;
    for s in suspects {
        let class = ix.class_of[s.node as usize];
        let key = (s.reason.clone(), class);
        if last.as_ref() != Some(&key) {
            last = Some(key);
            run = 0;
        }
        run += 1;
        if run <= cfg.max_suspects_per_class {
            keep.push(s);
            places.push(run);
        } else {
            *past_cap.entry(class).or_default() += 1;
        }
    }
    if keep.len() > MAX_SUSPECTS {
        keep = within_max_suspects(ix, dom, keep, &places, &mut past_cap);
    }
    (keep, past_cap)
}

/// Keep the `max` entries of `v` with the largest `key` (ties: the earlier), in their order;
/// the number dropped.
fn keep_largest<T, K: Ord>(v: &mut Vec<T>, max: usize, key: impl Fn(&T) -> K) -> u64 {
    if v.len() <= max {
        return 0;
    }
    let mut order: Vec<usize> = (0..v.len()).collect();
    sys::order::sort_by(&mut order, |&a, &b| {
        key(&v[b]).cmp(&key(&v[a])).then(a.cmp(&b))
    });
    let mut keep = vec![false; v.len()];
    for &i in &order[..max] {
        keep[i] = true;
    }
    let dropped = (v.len() - max) as u64;
    let mut i = 0;
    v.retain(|_| {
        i += 1;
        keep[i - 1]
    });
    dropped
}

/// The indices (sorted) of the suspects listed in `leakObjects[]`: all, or the `max` that
/// retain the most (ties: the earlier).
fn listed_suspects(suspects: &[Suspect], dom: &Dominators, max: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..suspects.len()).collect();
    if idx.len() > max {
        let key = |i: usize| (Reverse(dom.retained(suspects[i].node)), i);
        sys::order::sort_by_key(&mut idx, |&i| key(i));
        idx.truncate(max);
        // (Cold: the library's one sort, not an instantiation of its own.)
        sys::order::sort_by_key(&mut idx, |&i| i);
    }
    idx
}

/// What [`build`] asks the dominators for ([`crate::dominators::Prepared::want_tops`]): the
/// dominator candidates are the tops of the dominator tree cut at the "holders": class objects,
/// and every object that dominates one (class loaders, their class lists), whose static fields
/// act as roots, as they do for LeakCanary. The seeds are the classes' nodes; `top_n` groups
/// are made from eight times as many candidates (64 at least).
pub(crate) fn candidates_wanted(ix: &Index, cfg: &Config) -> (Vec<u32>, usize) {
    let seeds = ix.classes.iter().map(|c| c.node).collect();
    (seeds, cfg.top_n.saturating_mul(8).max(64))
}

/// Describe `path`, the path to `v`: its root's name, its signature (streamed: the steps are
/// hashed one at a time), and KOOM's items if `with_items`. Where objects are left out, one
/// `LEFT_OUT` item and step ("… N steps left out …") stands for them, after the reference to the
/// first of them.
fn name_path(
    ix: &Index,
    bfs: &Paths,
    p3: &Pass3<'_>,
    path: Kept,
    v: u32,
    with_items: bool,
) -> Named {
    let mut items = Vec::new();
    let mut h = Sha1::new();
    let mut shape = |s: &str| {
        h.update(s.as_bytes());
        h.update(b"\n");
    };
    let tag = path.nodes.first().map_or(0, |&r| bfs.start_tag(ix, r));
    let gc_root = match path.nodes.first() {
        Some(_) => root_name(tag).to_string(),
        None => "Unreachable".to_string(),
    };
    shape(&gc_root);
    for (j, (x, y)) in path.edges().enumerate() {
        let owner = ix.class_name(x);
        let r = p3.get(ix.id(x), ix.id(y));
        let (reference, kind, declared, step) = match r {
            Ref::Field(decl, fi) => {
                let dc = &ix.classes[decl as usize];
                let f = &dc.fields[fi as usize].name;
                (
                    format!("{owner}.{f}"),
                    "INSTANCE_FIELD",
                    dc.name.clone(),
                    format!("{}.{f}", dc.name),
                )
            }
            Ref::Static(name) => {
                let cname = ix
                    .class_of_node(x)
                    .map(|c| ix.classes[c as usize].name.clone())
                    .unwrap_or_else(|| owner.clone());
                (
                    format!("{cname}.{name}"),
                    "STATIC_FIELD",
                    cname.clone(),
                    format!("{cname}.{name}"),
                )
            }
            Ref::Element(i) => (
                format!("{owner}[{i}]"),
                "ARRAY_ENTRY",
                owner.clone(),
                format!("{owner}[]"),
            ),
            Ref::ClassOf => (
                format!("{owner}.<class>"),
                "CLASS",
                owner.clone(),
                format!("{owner}.<class>"),
            ),
            Ref::Super => (
                format!("{owner}.<super>"),
                "SUPERCLASS",
                owner.clone(),
                format!("{owner}.<super>"),
            ),
            Ref::Loader => (
                format!("{owner}.<loader>"),
                "CLASS_LOADER",
                owner.clone(),
                format!("{owner}.<loader>"),
            ),
            Ref::Unknown => (
                format!("{owner}.?"),
                "UNKNOWN",
                owner.clone(),
                format!("{owner}.?"),
            ),
        };
        shape(&step);
        if with_items {
            items.push(PathItem {
                reference,
                reference_type: kind.into(),
                declared_class: declared,
            });
        }
        if path.left_out > 0 && j + 1 == path.cut {
            let gap = format!("… {} steps left out …", path.left_out);
            shape(&gap);
            if with_items {
                items.push(PathItem {
                    reference: gap,
                    reference_type: "LEFT_OUT".into(),
                    declared_class: String::new(),
                });
            }
        }
    }
    let leak = ix.class_name(v);
    shape(&leak);
    if with_items {
        items.push(PathItem {
            reference: leak.clone(),
            reference_type: "LEAKING_INSTANCE".into(),
            declared_class: leak,
        });
    }
    Named {
        gc_root,
        items,
        signature: hex::encode(h.finalize()),
        path,
        tag,
    }
}

#[cfg(test)]
mod tests;
