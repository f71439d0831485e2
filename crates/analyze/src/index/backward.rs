//! Paths in the report of what fits (`crate::budget::reduced`), found backwards without the
//! graph: from the detectors' findings ([`super::findings`]), each pass over the dump takes one
//! step from the objects the pass before reached to the objects that reference them, until a
//! root is among them. Breadth first, so a path found is a shortest one on the references it
//! follows.
//!
//! What it follows and where it stops, as the full analysis's paths (`crate::paths`) as far as
//! the census's classes allow:
//! - References: instance fields by the class layouts' strong slots (`Reference.referent` is
//!   not one), object array elements, static fields and a class's loader. A class object starts
//!   a path ("System Class", as `CLASS_ROOT` in the full analysis) and is never passed through;
//!   the references from an instance to its class are not followed.
//! - Roots: the dump's GC roots of the kinds that hold objects for the life of the process
//!   end a search at once; a transient one (a stack frame, a JNI local, ...) only if nothing
//!   else is found (the first found is kept while the search goes on).
//! - Ties at one distance go to the dump's roots, then the classes, each the lowest id first.
//!   So a path may differ from the full analysis's where several shortest paths exist, and
//!   its signature with it.
//!
//! One path per class and reason of the findings (its first object's, in file order), at most
//! [`MAX_TARGETS`]; `instanceCount` counts that class's findings of that reason;
//! `retainedSize` is 0 and there is no trace.
//!
//! Invariants:
//! - Memory: at most [`MAX_STEPS`] steps kept (an object on some target's way and the reference
//!   it takes toward it, 40 bytes), [`MAX_ROOTS`] roots, and the objects of the last and next
//!   levels among them; nothing per object of the dump. At the caps, about 15 MiB: four maps of
//!   at most 100,000 ids (2.2 MiB each as the census's maps grow), the roots' (2.2 MiB), the
//!   steps (4 MiB) and the filter (2 MiB). A search over these caps stops; the paths found are
//!   kept and the others counted.
//! - Passes: at most [`MAX_PASSES`] over the dump, one per step; a target whose objects reach
//!   nothing new in a pass (no root references it) is unreachable and gets no path.
#![forbid(unsafe_code)]

use super::census::ById;
use super::*;
use crate::paths::{high_priority, root_name, CLASS_ROOT};
use crate::report::{GcPath, LeakObject, PathItem};

/// Classes and reasons given a path.
pub const MAX_TARGETS: usize = 32;
/// Steps kept over all targets (an object on a target's way, and its reference toward it).
pub const MAX_STEPS: usize = 100_000;
/// GC roots kept (the first ones of the dump; the others are not seen as roots).
pub const MAX_ROOTS: usize = 100_000;
/// Passes over the dump, each one step longer.
pub const MAX_PASSES: u32 = 24;

/// How an object references the next one toward the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Field `field` declared by class `decl` (class indices).
    Field {
        decl: u32,
        field: u16,
    },
    Element(u32),
}

/// A step kept: its target, the object after it, the reference, the class of the object it
/// starts at, and the object's next step kept (for another target), if any.
#[derive(Clone, Copy)]
struct Kept {
    target: u8,
    to: u64,
    step: Step,
    class: u32,
    next: usize,
}

/// No step (the end of an object's list in [`Search::kept`]).
const NO_STEP: usize = usize::MAX;

/// Where a target's path starts: a dump root (its tag) or a class object, then `first`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Start {
    /// A dump root of tag `tag` at object `id` (ordered before classes: ties go to the roots).
    Root { id: u64, tag: u8 },
    /// A class (index `class`) whose static field or loader holds `id`.
    Class { id: u64, class: u32 },
}

/// The paths found and what was not.
pub struct Traced {
    pub paths: Vec<GcPath>,
    /// Classes and reasons of findings without a path: unreachable, past the caps, or past
    /// [`MAX_TARGETS`].
    pub left: u64,
}

/// The search's visitor (see the module documentation). Every map is the census's map of ids
/// (one instantiation of its code in the library).
struct Search<'a> {
    ix: &'a Index,
    id_size: u32,
    /// Objects reached in the last pass, by the targets (bits) whose search reached them then.
    frontier: ById<usize>,
    /// A bit per hash of the frontier's ids ([`slot`]): most references are ruled out here,
    /// without a lookup.
    filter: Vec<u64>,
    /// Objects reached in this pass.
    next: ById<usize>,
    /// Every object reached, by the targets that reached it.
    reached: ById<usize>,
    /// Each object's first step kept in `kept`.
    first: ById<usize>,
    kept: Vec<Kept>,
    /// Targets still searched for.
    pending: usize,
    /// The dump's roots and their preferred tags (the first pass gathers them).
    roots: ById<usize>,
    gather_roots: bool,
    /// A cap was reached: the search stops after this pass.
    full: bool,
    /// The object array being read: its id, class, and the index of the next element.
    array: Option<(u64, u32, u32)>,
}

impl Search<'_> {
    /// Object `o` (of class `class`) references `r` by `step`: the targets that reached `r` in
    /// the last pass reach `o` now.
    fn hit(&mut self, o: u64, class: u32, r: u64, step: Step) {
        let (w, b) = slot(r);
        if self.filter[w] & b == 0 {
            return;
        }
        let Some(&m) = self.frontier.get(&r) else {
            return;
        };
        let have = self.reached.get(&o).copied().unwrap_or(0);
        let new = m & self.pending & !have;
        if new == 0 {
            return;
        }
        if self.kept.len() + new.count_ones() as usize > MAX_STEPS {
            self.full = true;
            return;
        }
        let mut next = self.first.get(&o).copied().unwrap_or(NO_STEP);
        for target in bits(new) {
            self.kept.push(Kept {
                target,
                to: r,
                step,
                class,
                next,
            });
            next = self.kept.len() - 1;
        }
        self.first.insert(o, next);
        self.reached.insert(o, have | new);
        let was = self.next.get(&o).copied().unwrap_or(0);
        self.next.insert(o, was | new);
    }

    /// The frontier becomes `next`'s objects, and the filter theirs.
    fn advance(&mut self) {
        self.frontier = std::mem::take(&mut self.next);
        self.filter.fill(0);
        for &id in self.frontier.keys() {
            let (w, b) = slot(id);
            self.filter[w] |= b;
        }
    }

    /// The step kept from object `o` toward target `t`.
    fn step(&self, o: u64, t: u8) -> Option<&Kept> {
        let mut k = self.first.get(&o).copied().unwrap_or(NO_STEP);
        while let Some(e) = self.kept.get(k) {
            if e.target == t {
                return Some(e);
            }
            k = e.next;
        }
        None
    }
}

/// Bits in [`Search::filter`].
const FILTER_BITS: u32 = 24;

/// The word and bit of `id` in [`Search::filter`].
fn slot(id: u64) -> (usize, u64) {
    let h = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FILTER_BITS);
    ((h >> 6) as usize, 1 << (h & 63))
}

/// The set bits of `m` (targets), lowest first.
fn bits(m: usize) -> impl Iterator<Item = u8> {
    (0..MAX_TARGETS as u8).filter(move |&t| m & (1 << t) != 0)
}

impl Visitor for Search<'_> {
    fn sub(&mut self, _: u64, s: &Sub<'_>, _: &[u8]) -> Result<(), String> {
        self.array = None;
        let id_size = self.id_size;
        match *s {
            Sub::Root { tag, id, .. } if self.gather_roots && id != 0 => {
                // The preferred tag, as the full analysis's: one that holds for the process's
                // life first, then the smaller.
                let key = |t: usize| (!high_priority(t as u8), t);
                let tag = tag as usize;
                match self.roots.get(&id).copied() {
                    Some(t) if key(tag) >= key(t) => {}
                    Some(_) => {
                        self.roots.insert(id, tag);
                    }
                    None if self.roots.len() < MAX_ROOTS => {
                        self.roots.insert(id, tag);
                    }
                    None => {}
                }
            }
            Sub::Instance {
                id, class_id, data, ..
            } => {
                let Some(ci) = self.ix.class_by_id(class_id) else {
                    return Ok(());
                };
                let ix = self.ix;
                for &(off, decl, field) in &ix.classes[ci as usize].ref_slots {
                    let o = off as usize;
                    if let Some(b) = data.get(o..o + id_size as usize) {
                        let r = read_id(b, id_size);
                        if r != 0 {
                            self.hit(id, ci, r, Step::Field { decl, field });
                        }
                    }
                }
            }
            Sub::ObjectArray { id, class_id, .. } => {
                self.array = Some((id, self.ix.class_or_unknown(class_id), 0));
            }
            _ => {}
        }
        Ok(())
    }

    fn array_data(&mut self, data: &[u8]) -> Result<(), String> {
        let Some((id, ci, first)) = self.array else {
            return Ok(());
        };
        let n = self.id_size as usize;
        for (j, e) in data.chunks_exact(n).enumerate() {
            let r = read_id(e, self.id_size);
            if r != 0 {
                self.hit(id, ci, r, Step::Element(first.saturating_add(j as u32)));
            }
        }
        let after = first.saturating_add((data.len() / n) as u32);
        self.array = Some((id, ci, after));
        Ok(())
    }

    fn array_end(&mut self) -> Result<(), String> {
        self.array = None;
        Ok(())
    }
}

/// The paths to `found`'s objects (see the module documentation), with the census's classes.
#[inline(never)]
pub(crate) fn paths(
    input: &Input<'_>,
    ix: &Index,
    found: &[LeakObject],
) -> Result<Traced, crate::Error> {
    // One target per class and reason, the first object of each, in report order.
    let mut groups: Vec<(&str, &str, u64, u64)> = Vec::new();
    for o in found {
        match (groups.iter_mut()).find(|g| g.0 == o.class_name && g.1 == o.leak_reason) {
            Some(g) => g.3 += 1,
            None => groups.push((&o.class_name, &o.leak_reason, o.object_id, 1)),
        }
    }
    let over = groups.len().saturating_sub(MAX_TARGETS) as u64;
    groups.truncate(MAX_TARGETS);
    let mut s = Search {
        ix,
        id_size: ix.header.id_size,
        frontier: ById::default(),
        filter: vec![0; 1 << (FILTER_BITS - 6)],
        next: ById::default(),
        reached: ById::default(),
        first: ById::default(),
        kept: Vec::new(),
        pending: 0,
        roots: ById::default(),
        gather_roots: true,
        full: false,
        array: None,
    };
    for (t, g) in groups.iter().enumerate() {
        let was = s.next.get(&g.2).copied().unwrap_or(0);
        s.next.insert(g.2, was | 1 << t);
        s.reached.insert(g.2, was | 1 << t);
        s.pending |= 1 << t;
    }
    s.advance();
    // Each target's start: the least found at the least distance; a transient root is kept as
    // `fallback` while the search looks further for another.
    let mut start: Vec<Option<Start>> = vec![None; groups.len()];
    let mut fallback: Vec<Option<Start>> = vec![None; groups.len()];
    let mut passes = 0;
    loop {
        if passes > 0 {
            // The objects of the last level (distance `passes`): a start among them ends their
            // targets' search.
            settle(&mut s, ix, &mut start, &mut fallback);
        }
        if s.pending == 0 || s.full || passes == MAX_PASSES {
            break;
        }
        s.next.clear();
        input.pass_cold(&mut s)?;
        s.gather_roots = false;
        passes += 1;
        if passes == 1 {
            // The targets themselves (distance 0), now that the roots are known.
            settle(&mut s, ix, &mut start, &mut fallback);
        }
        // A target whose search reached nothing new is done: unreachable, or its transient root.
        s.pending &= s.next.values().fold(0, |a, &m| a | m);
        s.advance();
    }
    let mut paths = Vec::new();
    let mut left = over;
    for (t, g) in groups.iter().enumerate() {
        match start[t].or(fallback[t]) {
            Some(st) => paths.push(path(ix, &s, st, t as u8, g.0, g.1, g.3)),
            None => left += 1,
        }
    }
    Ok(Traced { paths, left })
}

/// Record the starts among the last level's objects (`s.frontier`): for each pending target,
/// the least by [`Start`]'s order of its dump roots and of the classes that hold one of them
/// (the target is then no longer pending; a transient root is only its fallback).
fn settle(
    s: &mut Search<'_>,
    ix: &Index,
    start: &mut [Option<Start>],
    fallback: &mut [Option<Start>],
) {
    let mut best: Vec<Option<Start>> = vec![None; start.len()];
    let mut low: Vec<Option<Start>> = vec![None; start.len()];
    let offer = |v: &mut Vec<Option<Start>>, m: usize, st: Start| {
        for t in bits(m & s.pending) {
            let e = &mut v[t as usize];
            if e.is_none_or(|e| st < e) {
                *e = Some(st);
            }
        }
    };
    for (&id, &m) in &s.frontier {
        if let Some(&tag) = s.roots.get(&id) {
            let tag = tag as u8;
            let st = Start::Root { id, tag };
            match high_priority(tag) {
                true => offer(&mut best, m, st),
                false => offer(&mut low, m, st),
            }
        }
    }
    // Classes: their static fields and loaders that hold an object of the level.
    for (ci, cl) in ix.classes.iter().enumerate() {
        if cl.id == 0 {
            continue;
        }
        let held = (cl.statics.iter().map(|st| st.value)).chain(std::iter::once(cl.loader_id));
        for id in held {
            if let Some(&m) = s.frontier.get(&id) {
                offer(
                    &mut best,
                    m,
                    Start::Class {
                        id,
                        class: ci as u32,
                    },
                );
            }
        }
    }
    for t in 0..start.len() {
        if start[t].is_none() && best[t].is_some() {
            start[t] = best[t];
            s.pending &= !(1 << t);
        }
        if fallback[t].is_none() {
            fallback[t] = low[t];
        }
    }
}

/// The group of target `t`: its path from `st` in the full analysis's form (`report`'s
/// `name_path`: the items, the root's name, the signature hashed from them).
fn path(
    ix: &Index,
    s: &Search<'_>,
    st: Start,
    t: u8,
    class_name: &str,
    reason: &str,
    count: u64,
) -> GcPath {
    let mut items = Vec::new();
    let (gc_root, mut at) = match st {
        Start::Root { id, tag } => (root_name(tag).to_string(), id),
        Start::Class { id, class } => {
            let cl = &ix.classes[class as usize];
            let item = match cl.statics.iter().find(|x| x.value == id) {
                Some(x) => PathItem {
                    reference: format!("{}.{}", cl.name, x.name),
                    reference_type: "STATIC_FIELD".into(),
                    declared_class: cl.name.clone(),
                },
                None => PathItem {
                    reference: format!("{}.<loader>", cl.name),
                    reference_type: "CLASS_LOADER".into(),
                    declared_class: cl.name.clone(),
                },
            };
            items.push(item);
            // The class's own root tag if the dump lists it as one.
            let tag = s.roots.get(&cl.id).map_or(CLASS_ROOT, |&t| t as u8);
            (root_name(tag).to_string(), id)
        }
    };
    // Down the kept steps to the target (at most one step per pass).
    while let Some(k) = s.step(at, t) {
        let owner = &ix.classes[k.class as usize].name;
        items.push(match k.step {
            Step::Field { decl, field } => {
                let dc = &ix.classes[decl as usize];
                PathItem {
                    reference: format!("{owner}.{}", dc.fields[field as usize].name),
                    reference_type: "INSTANCE_FIELD".into(),
                    declared_class: dc.name.clone(),
                }
            }
            Step::Element(i) => PathItem {
                reference: format!("{owner}[{i}]"),
                reference_type: "ARRAY_ENTRY".into(),
                declared_class: owner.clone(),
            },
        });
        at = k.to;
    }
    items.push(PathItem {
        reference: class_name.to_string(),
        reference_type: "LEAKING_INSTANCE".into(),
        declared_class: class_name.to_string(),
    });
    GcPath {
        instance_count: count,
        leak_reason: reason.to_string(),
        signature: crate::renamed::signature(&gc_root, &items),
        gc_root,
        path: items,
        class_name: class_name.to_string(),
        ..GcPath::default()
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_PASSES, MAX_ROOTS, MAX_STEPS};
    use crate::report::GcPath;
    use crate::tests::full_and_reduced;
    use hprof::writer::Writer;
    use hprof::{sub, tag, BasicType, Format};

    /// A dump (1.0.3, 4-byte ids), every class a sticky root:
    /// - destroyed `MainActivity`s 0x100, held by the static `Holder.sActivity`, and 0x110, held
    ///   by element 1 of the `Object[]` 0x700 of the static `Holder.sArray`;
    /// - a `byte[]` of 300,000 0x500, held by a Java frame (a transient root) and by the chain
    ///   of `Node`s 0x200 -> 0x210 -> 0x220 (`next`) from a JNI global on 0x200;
    /// - a destroyed `OtherActivity` 0x600 nothing holds;
    /// - an `int[]` of 100,000 0x900 at the end of a chain of `deep` `Node`s from a JNI global.
    fn paths_dump(deep: u64) -> Vec<u8> {
        let mut w = Writer::new(Format::V103, 4, 0);
        crate::tests::activity_strings(&mut w);
        let names = [
            (6, "com.app.Holder"),
            (7, "sActivity"),
            (8, "sArray"),
            (9, "com.app.Node"),
            (10, "next"),
            (11, "com.app.OtherActivity"),
            (12, "java.lang.Object[]"),
        ];
        for (id, t) in names {
            w.utf8(id, t);
        }
        for (serial, (class, name)) in [(0x40, 6), (0x50, 9), (0x60, 11), (0x70, 12)]
            .into_iter()
            .enumerate()
        {
            w.load_class(serial as u32 + 4, class, name);
        }
        w.segment(tag::HEAP_DUMP_SEGMENT);
        let obj = BasicType::Object;
        crate::tests::activity_class_dumps(&mut w);
        let id = |v: u32| v.to_be_bytes().to_vec();
        w.class_dump(
            0x40,
            0x10,
            0,
            0,
            &[(7, obj, id(0x100)), (8, obj, id(0x700))],
            &[],
        );
        w.class_dump(0x50, 0x10, 0, 12, &[], &[(10, obj)]);
        w.class_dump(0x60, 0x20, 0, 10, &[], &[]);
        w.class_dump(0x70, 0x10, 0, 0, &[], &[]);
        w.instance(0x100, 0x30, &[1, 0]);
        w.instance(0x110, 0x30, &[1, 0]);
        w.object_array(0x700, 0x70, &[0, 0x110]);
        w.primitive_array_nodata(0x500, BasicType::Byte, 300_000);
        for (node, next) in [(0x200u32, 0x210u32), (0x210, 0x220), (0x220, 0x500)] {
            w.instance(node as u64, 0x50, &id(next));
        }
        w.root_jni_global(0x200, 1);
        w.root2(sub::ROOT_JAVA_FRAME, 0x500, 1, 0);
        w.instance(0x600, 0x60, &[1, 0]);
        for i in 0..deep {
            let (node, next) = (0x1000 + 16 * i, 0x1000 + 16 * (i + 1));
            let next = if i + 1 == deep { 0x900 } else { next };
            w.instance(node, 0x50, &id(next as u32));
        }
        w.root_jni_global(0x1000, 2);
        w.primitive_array_nodata(0x900, BasicType::Int, 100_000);
        for c in [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70] {
            w.root(sub::ROOT_STICKY_CLASS, c);
        }
        w.end_segment();
        w.heap_dump_end();
        w.finish()
    }

    /// Each group's root, path items (reference, type) and instance count.
    fn shape(g: &GcPath) -> (&str, Vec<(&str, &str)>, u64) {
        let items = (g.path.iter())
            .map(|i| (i.reference.as_str(), i.reference_type.as_str()))
            .collect();
        (g.gc_root.as_str(), items, g.instance_count)
    }

    /// Issue 43: the report of what fits gives each class and reason of its findings a shortest
    /// path from a root, found backwards: through a static field and through an array element
    /// (one group for both Activities, the first one's path), from a JNI global rather than
    /// from the nearer Java frame (a transient root), and none for an object nothing holds or
    /// one past [`MAX_PASSES`] steps (counted). Each path found is the full analysis's, by
    /// signature.
    #[test]
    fn the_report_of_what_fits_gives_each_class_of_findings_a_shortest_path() {
        let deep = MAX_PASSES as u64 + 1;
        let (full, small) = full_and_reduced(&paths_dump(deep));
        assert!(small.analysis.budget.is_some());
        let got: Vec<_> = small.gc_paths.iter().map(shape).collect();
        let holder = "com.app.Holder.sActivity";
        let activity = "com.app.MainActivity";
        let node = "com.app.Node.next";
        assert_eq!(
            got,
            [
                (
                    "System Class",
                    vec![(holder, "STATIC_FIELD"), (activity, "LEAKING_INSTANCE")],
                    2
                ),
                (
                    "JNI Global",
                    vec![
                        (node, "INSTANCE_FIELD"),
                        (node, "INSTANCE_FIELD"),
                        (node, "INSTANCE_FIELD"),
                        ("byte[]", "LEAKING_INSTANCE")
                    ],
                    1
                ),
            ],
            "{:#?}",
            small.gc_paths
        );
        assert_eq!(small.analysis.left_out.gc_paths, 2);
        for g in &small.gc_paths {
            assert!(
                full.gc_paths.iter().any(|f| f.signature == g.signature),
                "{g:#?} not in {:#?}",
                full.gc_paths
            );
            assert_eq!((g.retained_size, g.trace.nodes.len()), (0, 0));
        }
        // The full analysis finds the deep one: the search stopped at its cap, not at a root.
        let int = full.gc_paths.iter().find(|g| g.class_name == "int[]");
        assert_eq!(int.map(|g| g.path.len()), Some(deep as usize + 1));
    }

    /// A path of [`MAX_PASSES`] steps is found, whole (one more is not: above).
    #[test]
    fn a_path_of_max_passes_steps_is_found() {
        let deep = MAX_PASSES as u64;
        let (full, small) = full_and_reduced(&paths_dump(deep));
        let int = small.gc_paths.iter().find(|g| g.class_name == "int[]");
        assert_eq!(int.map(|g| g.path.len()), Some(deep as usize + 1));
        let sig = int.map(|g| g.signature.as_str());
        assert!(full
            .gc_paths
            .iter()
            .any(|g| Some(g.signature.as_str()) == sig));
        assert_eq!(small.analysis.left_out.gc_paths, 1);
    }

    /// A destroyed Activity 0x100 referenced by `n` `Node`s (field `next`), only the last of
    /// them held by a JNI global.
    fn many_referrers(n: u64) -> Vec<u8> {
        let mut w = Writer::new(Format::V103, 4, 0);
        crate::tests::activity_strings(&mut w);
        w.utf8(9, "com.app.Node").utf8(10, "next");
        w.load_class(4, 0x50, 9);
        w.segment(tag::HEAP_DUMP_SEGMENT);
        crate::tests::activity_class_dumps(&mut w);
        w.class_dump(0x50, 0x10, 0, 4, &[], &[(10, BasicType::Object)]);
        w.instance(0x100, 0x30, &[1, 0]);
        for i in 0..n {
            w.instance(0x1000 + 16 * i, 0x50, &0x100u32.to_be_bytes());
        }
        w.root_jni_global(0x1000 + 16 * (n - 1), 1);
        for c in [0x10, 0x20, 0x30, 0x50] {
            w.root(sub::ROOT_STICKY_CLASS, c);
        }
        w.end_segment();
        w.heap_dump_end();
        w.finish()
    }

    /// The search keeps at most [`MAX_STEPS`] steps: past them it stops, and the class without
    /// a path is counted; within them, the same shape of dump gets its path.
    #[test]
    fn the_search_stops_at_its_step_cap_and_counts_what_it_did_not_find() {
        let (_, small) = full_and_reduced(&many_referrers(MAX_STEPS as u64 + 1));
        assert!(small.gc_paths.is_empty(), "{:#?}", small.gc_paths);
        assert_eq!(small.analysis.left_out.gc_paths, 1);
        let (_, small) = full_and_reduced(&many_referrers(MAX_STEPS as u64));
        let got: Vec<_> = small.gc_paths.iter().map(shape).collect();
        let via = vec![
            ("com.app.Node.next", "INSTANCE_FIELD"),
            ("com.app.MainActivity", "LEAKING_INSTANCE"),
        ];
        assert_eq!(got, [("JNI Global", via, 1)]);
    }

    /// A group's root, path items (reference, type) and instance count, owned.
    type Shape = (String, Vec<(String, String)>, u64);

    /// Each group's shape ([`shape`]) in the report of what fits of `bytes` (only), and the
    /// groups left without a path. Every group here is of Activities.
    fn reduced(bytes: &[u8]) -> (Vec<Shape>, u64) {
        let cfg = crate::Config {
            budget_bytes: crate::budget::FIXED_BYTES - 1,
            ..crate::Config::default()
        };
        let small = crate::analyze(crate::Input::Bytes(bytes), &cfg, serde_json::Value::Null);
        let small = small.unwrap();
        assert!(small.analysis.budget.is_some());
        let got = (small.gc_paths.iter())
            .inspect(|g| assert_eq!(g.leak_reason, "Activity Leak"))
            .map(owned)
            .collect();
        (got, small.analysis.left_out.gc_paths)
    }

    /// [`shape`], owned.
    fn owned(g: &GcPath) -> Shape {
        let (root, items, n) = shape(g);
        let items = (items.into_iter())
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        (root.to_string(), items, n)
    }

    /// One path's shape from `root` through `via` (reference, type) to an instance of `class`.
    fn path_to(class: &str, root: &str, via: &[(&str, &str)]) -> Shape {
        let mut items: Vec<_> = (via.iter())
            .map(|&(a, b)| (a.to_string(), b.to_string()))
            .collect();
        items.push((class.into(), "LEAKING_INSTANCE".into()));
        (root.to_string(), items, 1)
    }

    /// [`path_to`] a `com.app.MainActivity`.
    fn to_activity(root: &str, via: &[(&str, &str)]) -> Shape {
        path_to("com.app.MainActivity", root, via)
    }

    /// A dump (1.0.3, 4-byte ids) of a destroyed `MainActivity` 0x100, the classes `Node`
    /// 0x50 (field `next`, name 10), `Pair` 0x60 (fields `a`, `b`: names 13, 14),
    /// `java.lang.Object[]` 0x70, `LoopActivity` 0x80 (an Activity with a field `next`) and
    /// `Holder` 0x40 (static `sActivity`, name 7, on `s_activity`), each a sticky root, and
    /// `more`'s records.
    fn activity_dump(s_activity: u32, more: impl FnOnce(&mut Writer)) -> Vec<u8> {
        let mut w = Writer::new(Format::V103, 4, 0);
        crate::tests::activity_strings(&mut w);
        let names = [
            (6, "com.app.Holder"),
            (7, "sActivity"),
            (9, "com.app.Node"),
            (10, "next"),
            (11, "com.app.Pair"),
            (12, "java.lang.Object[]"),
            (13, "a"),
            (14, "b"),
            (15, "com.app.LoopActivity"),
        ];
        for (id, t) in names {
            w.utf8(id, t);
        }
        for (serial, class, name) in [
            (4, 0x40, 6),
            (5, 0x50, 9),
            (6, 0x60, 11),
            (7, 0x70, 12),
            (8, 0x80, 15),
        ] {
            w.load_class(serial, class, name);
        }
        w.segment(tag::HEAP_DUMP_SEGMENT);
        let obj = BasicType::Object;
        crate::tests::activity_class_dumps(&mut w);
        w.class_dump(
            0x40,
            0x10,
            0,
            0,
            &[(7, obj, s_activity.to_be_bytes().to_vec())],
            &[],
        );
        w.class_dump(0x50, 0x10, 0, 4, &[], &[(10, obj)]);
        w.class_dump(0x60, 0x10, 0, 8, &[], &[(13, obj), (14, obj)]);
        w.class_dump(0x70, 0x10, 0, 0, &[], &[]);
        w.class_dump(0x80, 0x20, 0, 14, &[], &[(10, obj)]);
        w.instance(0x100, 0x30, &[1, 0]);
        more(&mut w);
        for c in [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80] {
            w.root(sub::ROOT_STICKY_CLASS, c);
        }
        w.end_segment();
        w.heap_dump_end();
        w.finish()
    }

    /// A target that is itself a dump root starts its path there, before the class whose
    /// static field holds it (found at the same distance): the roots are gathered before the
    /// targets themselves are settled.
    #[test]
    fn a_target_that_is_a_root_starts_its_own_path() {
        let got = reduced(&activity_dump(0x100, |w| {
            w.root_jni_global(0x100, 1);
        }));
        assert_eq!(got, (vec![to_activity("JNI Global", &[])], 0));
        // Without the root, the class's static field.
        let got = reduced(&activity_dump(0x100, |_| {}));
        let holder = ("com.app.Holder.sActivity", "STATIC_FIELD");
        assert_eq!(got, (vec![to_activity("System Class", &[holder])], 0));
    }

    /// An object listed as several roots is the root of the preferred tag, whatever their
    /// order: one that holds for the process's life before a transient one (a Java frame),
    /// then the smaller tag (a JNI global, 1, before a monitor in use, 7).
    #[test]
    fn a_root_listed_twice_takes_the_preferred_tag_in_either_order() {
        let frame = |w: &mut Writer| {
            w.root2(sub::ROOT_JAVA_FRAME, 0x200, 1, 0);
        };
        let global = |w: &mut Writer| {
            w.root_jni_global(0x200, 1);
        };
        let monitor = |w: &mut Writer| {
            w.root(sub::ROOT_MONITOR_USED, 0x200);
        };
        let via = [("com.app.Node.next", "INSTANCE_FIELD")];
        let want = (vec![to_activity("JNI Global", &via)], 0);
        type Add = fn(&mut Writer);
        let pairs: [(Add, Add); 4] = [
            (frame, global),
            (global, frame),
            (monitor, global),
            (global, monitor),
        ];
        for (i, (one, two)) in pairs.into_iter().enumerate() {
            let got = reduced(&activity_dump(0, |w| {
                w.instance(0x200, 0x50, &0x100u32.to_be_bytes());
                one(w);
                two(w);
            }));
            assert_eq!(got, want, "order {i}");
        }
    }

    /// A path through an object array names the element's index.
    #[test]
    fn a_path_through_an_array_names_the_element() {
        let got = reduced(&activity_dump(0, |w| {
            w.object_array(0x700, 0x70, &[0, 0x100]);
            w.root_jni_global(0x700, 1);
        }));
        let via = [("java.lang.Object[][1]", "ARRAY_ENTRY")];
        assert_eq!(got, (vec![to_activity("JNI Global", &via)], 0));
    }

    /// An array read from a file in several pieces (it spans the reader's chunks) counts its
    /// elements on from one piece to the next.
    #[test]
    fn an_element_past_the_first_chunk_keeps_its_index() {
        let n = crate::index::CHUNK / 4 + 1000;
        let bytes = activity_dump(0, |w| {
            let mut e = vec![0u64; n];
            e[n - 1] = 0x100;
            w.object_array(0x700, 0x70, &e);
            w.root_jni_global(0x700, 1);
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.hprof");
        std::fs::write(&path, &bytes).unwrap();
        let cfg = crate::Config {
            budget_bytes: crate::budget::FIXED_BYTES - 1,
            ..crate::Config::default()
        };
        let small = crate::analyze(crate::Input::File(&path), &cfg, serde_json::Value::Null);
        let small = small.unwrap();
        assert!(small.analysis.budget.is_some());
        let act = (small.gc_paths.iter()).find(|g| g.class_name == "com.app.MainActivity");
        let elem = format!("java.lang.Object[][{}]", n - 1);
        let via = [(elem.as_str(), "ARRAY_ENTRY")];
        assert_eq!(act.map(owned), Some(to_activity("JNI Global", &via)));
    }

    /// An object that references a target twice takes its path through its first reference
    /// (the first one reached is kept).
    #[test]
    fn an_object_referencing_a_target_twice_keeps_its_first_reference() {
        let got = reduced(&activity_dump(0, |w| {
            let a = 0x100u32.to_be_bytes();
            w.instance(0x200, 0x60, &[a, a].concat());
            w.root_jni_global(0x200, 1);
        }));
        let via = [("com.app.Pair.a", "INSTANCE_FIELD")];
        assert_eq!(got, (vec![to_activity("JNI Global", &via)], 0));
    }

    /// The Activity held by a JNI global after `fillers` roots of no object, and after a root
    /// of id 0 if `zero`.
    fn after_roots(fillers: u64, zero: bool) -> Vec<u8> {
        activity_dump(0, |w| {
            for i in 0..fillers {
                w.root(sub::ROOT_UNKNOWN, 0x10_0000 + 8 * i);
            }
            if zero {
                w.root(sub::ROOT_UNKNOWN, 0);
            }
            w.root_jni_global(0x100, 1);
        })
    }

    /// The search sees the dump's first [`MAX_ROOTS`] roots (a root of id 0 is not one): one
    /// past them is not seen, and its target gets no path.
    #[test]
    fn roots_past_the_cap_are_not_seen_and_id_0_is_no_root() {
        let got = reduced(&after_roots(MAX_ROOTS as u64 - 1, true));
        assert_eq!(got, (vec![to_activity("JNI Global", &[])], 0));
        let got = reduced(&after_roots(MAX_ROOTS as u64, false));
        assert_eq!(got, (vec![], 1));
    }

    /// A cycle through a target (the Activity references back the `Node` that holds it) does
    /// not extend its path: the target ends it. (The second target, so that each target's own
    /// bit is marked reached, not only the first's.)
    #[test]
    fn a_cycle_through_a_target_ends_its_path_at_the_target() {
        let got = reduced(&activity_dump(0, |w| {
            w.root_jni_global(0x100, 1);
            w.instance(0x300, 0x50, &0x200u32.to_be_bytes());
            w.instance(0x200, 0x50, &0x600u32.to_be_bytes());
            w.instance(0x600, 0x80, &[0, 0, 2, 0, 1, 0]);
            w.root_jni_global(0x300, 2);
        }));
        let node = ("com.app.Node.next", "INSTANCE_FIELD");
        let looped = path_to("com.app.LoopActivity", "JNI Global", &[node, node]);
        assert_eq!(got, (vec![to_activity("JNI Global", &[]), looped], 0));
    }

    /// Of several starts at one distance the least is kept: a root before a class, then the
    /// lowest id (here a `Pair` under a JNI global and a `Node` under a monitor in use, at
    /// 0x200 and another id, each way round), whatever the order they are met in.
    #[test]
    fn of_starts_at_one_distance_the_lowest_id_wins() {
        let pair = ("com.app.Pair.a", "INSTANCE_FIELD");
        let node = ("com.app.Node.next", "INSTANCE_FIELD");
        let a = 0x100u32.to_be_bytes();
        for other in (0x300..0x400).step_by(16) {
            for (at_pair, at_node) in [(0x200, other), (other, 0x200)] {
                let got = reduced(&activity_dump(0, |w| {
                    w.instance(at_pair, 0x60, &[a, [0; 4]].concat());
                    w.root_jni_global(at_pair, 1);
                    w.instance(at_node, 0x50, &a);
                    w.root(sub::ROOT_MONITOR_USED, at_node);
                }));
                let want = match at_pair < at_node {
                    true => to_activity("JNI Global", &[pair]),
                    false => to_activity("Monitor Used", &[node]),
                };
                assert_eq!(got, (vec![want], 0), "Pair at {at_pair:#x}");
            }
        }
    }

    /// A target found stops being searched for: the steps of `MAX_STEPS` objects that
    /// reference the holder of the first one found (the second target) are not kept, so the
    /// search goes on to the first target, three steps from its root.
    #[test]
    fn a_target_found_is_searched_no_further() {
        let got = reduced(&activity_dump(0, |w| {
            for (node, next) in [(0x200u32, 0x100u32), (0x210, 0x200), (0x220, 0x210)] {
                w.instance(node as u64, 0x50, &next.to_be_bytes());
            }
            w.root_jni_global(0x220, 1);
            w.instance(0x600, 0x80, &[0, 0, 0, 0, 1, 0]);
            w.instance(0x300, 0x50, &0x600u32.to_be_bytes());
            w.root_jni_global(0x300, 2);
            for i in 0..MAX_STEPS as u64 {
                w.instance(0x10_0000 + 16 * i, 0x50, &0x300u32.to_be_bytes());
            }
        }));
        let node = ("com.app.Node.next", "INSTANCE_FIELD");
        let other = path_to("com.app.LoopActivity", "JNI Global", &[node]);
        let first = to_activity("JNI Global", &[node, node, node]);
        assert_eq!(got, (vec![first, other], 0));
    }
}
