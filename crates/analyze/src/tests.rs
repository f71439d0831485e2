use super::*;
use hprof::writer::Writer;
use hprof::{sub, tag, BasicType, Format};
use proptest::prelude::*;

mod caps;
mod census;
mod depth;
mod input;
mod pass2;
mod reports;
mod split;
mod workers;

/// The report `analyze` makes of `bytes` with the default config and no running info.
pub(crate) fn report_of(bytes: &[u8]) -> crate::report::Report {
    analyze(
        Input::Bytes(bytes),
        &Config::default(),
        serde_json::Value::Null,
    )
    .unwrap()
}

/// The path of a shared fixture (`../shared/fixtures/hprof/REL`).
pub(crate) fn fixture(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/hprof")
        .join(rel)
}

/// The cuts of `input` into about `parts` ranges, as the analysis makes them
/// (`snapshot::find_and_cut`); `None` if it is not cut or cannot be read.
pub(crate) fn split(input: &Input<'_>, parts: usize, min_bytes: u64) -> Option<index::Ranges> {
    snapshot::find_and_cut(input, parts, min_bytes).ok()?.1
}

/// The index of a shared fixture, built as `analyze` builds it.
fn fixture_index(rel: &str) -> index::Index {
    let path = fixture(rel);
    let mut tm = Timings::default();
    let (ix, _, _) = build_index(
        &Input::File(&path),
        &Config::default(),
        Instant::now(),
        &mut tm,
    )
    .unwrap();
    ix
}

#[test]
fn a_primitive_array_references_its_class() {
    for rel in [
        "jvm/openjdk_jdk11_04_x64.hprof",
        "android/leak_service_binder.hprof",
    ] {
        let ix = fixture_index(rel);
        let mut checked = 0;
        for n in 0..ix.len() as u32 {
            let c = ix.class_of[n as usize];
            if c < ix.prim_base || c >= ix.prim_base + 8 {
                continue;
            }
            let class_id = ix.prim_class_ids[(c - ix.prim_base) as usize];
            let Some(class_node) = ix.node(class_id).filter(|_| class_id != 0) else {
                continue;
            };
            // A class the dump lists as a root needs no edge (see `Class::rooted`).
            let rooted = ix.classes[ix.prim_classes[(c - ix.prim_base) as usize] as usize].rooted;
            assert!(
                rooted || ix.succ(n).contains(&class_node),
                "{rel}: the {} at node {n} has no edge to its class",
                ix.classes[c as usize].name
            );
            checked += 1;
        }
        assert!(checked > 1000, "{rel}: {checked} arrays checked");
    }
}

/// The full report of `bytes`, and its report of what fits (a budget the census finds too
/// small).
pub(crate) fn full_and_reduced(bytes: &[u8]) -> (report::Report, report::Report) {
    let run = |budget_bytes: u64| {
        let cfg = Config {
            budget_bytes,
            ..Config::default()
        };
        analyze(Input::Bytes(bytes), &cfg, serde_json::Value::Null).unwrap()
    };
    let (full, small) = (run(0), run(budget::FIXED_BYTES - 1));
    assert!(full.analysis.budget.is_none() && small.analysis.budget.is_some());
    (full, small)
}

/// The strings 1 to 5: `java.lang.Object`, `android.app.Activity`, `com.app.MainActivity`,
/// `mDestroyed`, `mFinished`; the first three classes loaded as 0x10, 0x20 and 0x30.
pub(crate) fn activity_strings(w: &mut Writer) {
    for (id, t) in [
        (1, "java.lang.Object"),
        (2, "android.app.Activity"),
        (3, "com.app.MainActivity"),
        (4, "mDestroyed"),
        (5, "mFinished"),
    ] {
        w.utf8(id, t);
    }
    w.load_class(1, 0x10, 1);
    w.load_class(2, 0x20, 2);
    w.load_class(3, 0x30, 3);
}

/// The rest of a dump whose strings and classes are [`activity_strings`]'s (or the caller's,
/// with the same ids): the class dumps and `n` destroyed Activities of class 0x30, each held by
/// a JNI global.
pub(crate) fn destroyed_activities_heap(mut w: Writer, n: u64) -> Vec<u8> {
    w.segment(tag::HEAP_DUMP_SEGMENT);
    activity_class_dumps(&mut w);
    for i in 0..n {
        w.instance(0x1000 + 16 * i, 0x30, &[1, 0]);
        w.root_jni_global(0x1000 + 16 * i, i + 1);
    }
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// The class dumps of [`activity_strings`]'s classes: `java.lang.Object` (0x10), Activity
/// ([`activity_class`]) and `com.app.MainActivity` (0x30, no fields of its own).
pub(crate) fn activity_class_dumps(w: &mut Writer) {
    w.class_dump(0x10, 0, 0, 0, &[], &[]);
    activity_class(w);
    w.class_dump(0x30, 0x20, 0, 10, &[], &[]);
}

/// The class dump of `android.app.Activity` (id 0x20, super 0x10) with its fields
/// `mDestroyed` and `mFinished` (names 4 and 5).
pub(crate) fn activity_class(w: &mut Writer) {
    w.class_dump(
        0x20,
        0x10,
        0,
        10,
        &[],
        &[(4, BasicType::Boolean), (5, BasicType::Boolean)],
    );
}

/// An Android-style dump (1.0.3, 4-byte ids) built by hand:
/// - class `com.app.MainActivity extends android.app.Activity` (fields mDestroyed, mFinished);
/// - `com.app.Leaks.sActivity` (static) -> destroyed activity 0x100 -> byte[] 0x200 (stripped,
///   0xC3, 1000 bytes) and -> 0x999 (not in the dump);
/// - a WeakReference 0x300 whose referent is another destroyed activity 0x110 (not a leak);
/// - a thread-frame root on 0x300.
fn android_dump() -> Vec<u8> {
    let mut w = Writer::new(Format::V103, 4, 0);
    let s = |w: &mut Writer, id: u64, t: &str| {
        w.utf8(id, t);
    };
    activity_strings(&mut w);
    for (id, t) in [
        (6, "mCache"),
        (7, "com.app.Leaks"),
        (8, "sActivity"),
        (9, "java.lang.ref.Reference"),
        (10, "referent"),
        (11, "java.lang.ref.WeakReference"),
        (12, "mMissing"),
        (13, "java.lang.Class"),
    ] {
        s(&mut w, id, t);
    }
    w.load_class(4, 0x40, 7);
    w.load_class(5, 0x50, 9);
    w.load_class(6, 0x60, 11);
    w.load_class(7, 0x70, 13);
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.class_dump(0x10, 0, 0, 8, &[], &[]);
    w.class_dump(0x70, 0x10, 0, 8, &[], &[]);
    activity_class(&mut w);
    w.class_dump(
        0x30,
        0x20,
        0,
        18,
        &[],
        &[(6, BasicType::Object), (12, BasicType::Object)],
    );
    w.class_dump(
        0x40,
        0x10,
        0,
        8,
        &[(8, BasicType::Object, 0x100u32.to_be_bytes().to_vec())],
        &[],
    );
    w.class_dump(0x50, 0x10, 0, 12, &[], &[(10, BasicType::Object)]);
    w.class_dump(0x60, 0x50, 0, 12, &[], &[]);
    // Activity 0x100: own fields first (mCache, mMissing), then Activity's (destroyed, finished).
    let mut v = Vec::new();
    v.extend_from_slice(&0x200u32.to_be_bytes());
    v.extend_from_slice(&0x999u32.to_be_bytes());
    v.extend_from_slice(&[1, 0]);
    w.instance(0x100, 0x30, &v);
    let mut v2 = Vec::new();
    v2.extend_from_slice(&0u32.to_be_bytes());
    v2.extend_from_slice(&0u32.to_be_bytes());
    v2.extend_from_slice(&[1, 1]);
    w.instance(0x110, 0x30, &v2);
    w.instance(0x300, 0x60, &0x110u32.to_be_bytes());
    w.primitive_array_nodata(0x200, BasicType::Byte, 1000);
    for c in [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70] {
        w.root(sub::ROOT_STICKY_CLASS, c);
    }
    w.root2(sub::ROOT_JAVA_FRAME, 0x300, 1, 0);
    w.root(sub::ROOT_UNREACHABLE, 0x110);
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// `java.lang.Object` (id `object`) and `com.app.Holder` (id `holder`, one reference field,
/// `ref`, 8 bytes): their names, their loads and their class dumps, which open a heap dump
/// segment.
pub(super) fn holder_classes(w: &mut Writer, object: u64, holder: u64) {
    w.utf8(1, "java.lang.Object");
    w.utf8(2, "com.app.Holder");
    w.utf8(3, "ref");
    w.load_class(1, object, 1);
    w.load_class(2, holder, 2);
    w.class_dump(object, 0, 0, 0, &[], &[]);
    w.class_dump(holder, object, 0, 8, &[], &[(3, BasicType::Object)]);
}

/// A HotSpot-style dump (1.0.2, 8-byte ids) of class `com.app.Holder extends
/// java.lang.Object` (one reference field, `ref`), with the objects and roots `body` writes.
pub(super) fn holder_dump(body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new(Format::V102, 8, 0);
    holder_classes(&mut w, 0x10, 0x20);
    body(&mut w);
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// A class named with 100 KB (a crafted dump): its 40 leaked, destroyed instances are
/// reported under the name cut to `index::MAX_STRING_BYTES`, so the report stays small
/// (the whole name stood in every leak, path and histogram row: 100 instances of a 100 KB
/// name made an 11 MB report).
#[test]
fn a_huge_class_name_is_cut_in_the_report() {
    let long = format!("com.app.{}", "X".repeat(100_000));
    let mut w = Writer::new(Format::V102, 8, 0);
    for (id, t) in [
        (1, "java.lang.Object"),
        (2, "android.app.Activity"),
        (3, long.as_str()),
        (4, "mDestroyed"),
        (5, "mFinished"),
    ] {
        w.utf8(id, t);
    }
    w.load_class(1, 0x10, 1);
    w.load_class(2, 0x20, 2);
    w.load_class(3, 0x30, 3);
    let bytes = destroyed_activities_heap(w, 40);
    let r = report_of(&bytes);
    let json = serde_json::to_string(&r).unwrap();
    let cut = format!(
        "com.app.{}…[+{} bytes]",
        "X".repeat(index::MAX_STRING_BYTES - 8),
        long.len() - index::MAX_STRING_BYTES
    );
    assert!(json.contains(&cut), "the cut name is reported");
    assert!(json.len() < 200_000, "report of {} bytes", json.len());
}

/// `report.json` reads back through the report's own types (the collector's pages and
/// summaries read it so): a report as written reads whole; an older one (fields missing: no
/// `trace`, no `analysis.sizes`) and a newer one (a field and a status this version does not
/// know) read too, what is missing as its default.
#[test]
fn reports_read_back_leniently() {
    let bytes = android_dump();
    let r = analyze(
        Input::Bytes(&bytes),
        &Config::default(),
        serde_json::json!({"appVersion": "1.0"}),
    )
    .unwrap();
    let json = serde_json::to_value(&r).unwrap();
    let back: report::Report = serde_json::from_value(json.clone()).unwrap();
    let mut again = serde_json::to_value(&back).unwrap();
    // `analysis.sizes.vm` is the one field not read back (a `&'static str`).
    again["analysis"]["sizes"]["vm"] = json["analysis"]["sizes"]["vm"].clone();
    assert_eq!(again, json);

    let older = serde_json::json!({
        "runningInfo": {"appVersion": "0.9"},
        "analysis": {"objects": 12},
        "gcPaths": [{"instanceCount": 2, "leakReason": "Activity Leak", "gcRoot": "System Class",
                     "signature": "ab", "className": "a.Main", "retainedSize": 100,
                     "path": [{"reference": "a.App.sList", "referenceType": "STATIC_FIELD",
                               "declaredClass": "a.App"}]}],
        "dominators": [{"className": "a.D", "retainedSize": 5, "count": 1}]
    });
    let o: report::Report = serde_json::from_value(older).unwrap();
    assert_eq!(o.analysis.objects, 12);
    assert_eq!(o.analysis.sizes, index::Conventions::default());
    assert_eq!(o.gc_paths[0].path[0].declared_class, "a.App");
    assert_eq!(o.gc_paths[0].trace, trace::Trace::default());
    assert_eq!(o.dominators[0].steps_left_out, 0);
    assert!(o.leak_objects.is_empty() && o.class_infos.is_empty());

    let newer = serde_json::json!({
        "futureField": {"x": [1, 2]},
        "gcPaths": [{"className": "a.Main", "newThing": 7,
                     "trace": {"rootKind": "thread", "nodes": [
                         {"className": "a.Main", "status": "MAYBE_LEAKING", "reference": null}]}}]
    });
    let n: report::Report = serde_json::from_value(newer).unwrap();
    let node = &n.gc_paths[0].trace.nodes[0];
    assert_eq!(node.status, trace::Status::Unknown);
    assert_eq!(
        (node.class_name.as_str(), node.reference.as_deref()),
        ("a.Main", None)
    );
}

/// A class is a root where the dump says so (a sticky class root) or where its loader is
/// reachable; a class whose loader nothing holds keeps neither the loader nor its statics.
#[test]
fn a_class_whose_loader_is_unreachable_is_no_root() {
    let plugin_class = |w: &mut Writer, class: u64, loader: u64, held: u64| {
        let statics = [(3, BasicType::Object, held.to_be_bytes().to_vec())];
        w.class_dump(class, 0x10, loader, 8, &statics, &[]);
        w.instance(loader, 0x20, &0u64.to_be_bytes());
        w.instance(held, 0x20, &0u64.to_be_bytes());
    };
    let bytes = holder_dump(|w| {
        w.root(sub::ROOT_STICKY_CLASS, 0x10);
        w.root(sub::ROOT_STICKY_CLASS, 0x20);
        // Loaded by 0x500, which nothing holds.
        plugin_class(w, 0x40, 0x500, 0x600);
        // Loaded by 0x700, which a JNI global holds.
        plugin_class(w, 0x50, 0x700, 0x800);
        w.root_jni_global(0x700, 1);
    });
    let r = report_of(&bytes);
    // 0x10 and 0x20 (sticky), 0x700 (JNI global), 0x50 (its loader is reachable) and the
    // 0x800 it holds; not 0x40, 0x500, 0x600.
    assert_eq!(r.analysis.reachable_objects, 5);
}

/// One pass keeps edge targets one word each while they fit (8-byte aligned ids below 32
/// GiB); an id that does not fit (unaligned, or above) switches the list to two words
/// without losing the targets kept so far.
#[test]
fn raw_targets_that_do_not_fit_one_word_give_the_same_graph() {
    let huge = 0x10_0000_0000u64;
    let bytes = holder_dump(|w| {
        w.instance(0x100, 0x20, &0x200u64.to_be_bytes());
        w.instance(0x200, 0x20, &0x20cu64.to_be_bytes());
        w.instance(0x20c, 0x20, &huge.to_be_bytes());
        w.instance(huge, 0x20, &0x100u64.to_be_bytes());
        w.root_jni_global(0x100, 1);
    });
    let (one, two, built) = one_and_two_passes(&bytes);
    assert!(built, "the one pass fell back to two");
    // 4 field edges, 4 class edges, Holder -> Object.
    assert_eq!(one["analysis"]["references"], 9);
    assert_eq!(one["analysis"]["missingReferences"], 0);
    assert_eq!(one["analysis"]["reachableObjects"], 6);
    assert_eq!(one, two);

    // The same in memory and in a scratch file.
    let dir = tempfile::tempdir().unwrap();
    let s = sys::scratch::Scratch::new(dir.path(), 1 << 30).unwrap();
    for scratch in [None, Some(&s)] {
        let mut raw = index::Raw::Narrow(index::Grow::new_in(scratch), 3);
        let ids = [0x100u64, 0x7_ffff_fff8, 0x20c, huge, 0x100];
        for (k, &id) in ids.iter().enumerate() {
            raw.push(id);
            assert_eq!(
                matches!(raw, index::Raw::Narrow(..)),
                k < 2,
                "after {id:#x}"
            );
        }
        let index::Raw::Wide(v) = raw else {
            unreachable!()
        };
        let kept: Vec<u64> = v.iter().map(|&[hi, lo]| arrays::pair(hi, lo)).collect();
        assert_eq!(kept, ids);
    }
}

/// Objects that two roots reach count in the bytes retained by the roots together: the
/// same objects, reached from one root or from two, give the same total.
#[test]
fn reachable_bytes_count_objects_shared_by_roots() {
    let reach = |shared: bool| {
        let bytes = holder_dump(|w| {
            w.instance(0x100, 0x20, &0x300u64.to_be_bytes());
            let b_ref: u64 = if shared { 0x300 } else { 0 };
            w.instance(0x200, 0x20, &b_ref.to_be_bytes());
            w.instance(0x300, 0x20, &0u64.to_be_bytes());
            w.root_jni_global(0x100, 1);
            w.root_jni_global(0x200, 2);
        });
        let r = report_of(&bytes);
        assert_eq!(r.analysis.reachable_objects, 5, "3 instances, 2 classes");
        r.analysis.reachable_bytes
    };
    let (alone, shared) = (reach(false), reach(true));
    assert!(alone > 0);
    assert_eq!(
        shared, alone,
        "0x300 (and the class) counted once either way"
    );
}

/// One object of [`cut_dump`], in file order: an instance of Holder and its reference, an
/// object array and its elements, or a run of primitive arrays (no references) from a
/// base id.
#[derive(Clone, Debug)]
enum CutObj {
    Inst(u64, u64),
    Arr(u64, Vec<u64>),
    Prims(u64, u16),
}

/// Object ids are drawn from a small set, so that some repeat; references from a larger one,
/// so that some name no object (and 0 is null).
fn cut_id(k: u64) -> u64 {
    0x1000 + 8 * k
}
fn cut_ref(k: u64) -> u64 {
    if k == 0 {
        0
    } else {
        cut_id(k - 1)
    }
}

fn cut_objs() -> impl Strategy<Value = Vec<CutObj>> {
    let obj = prop_oneof![
        4 => (0u64..48, 0u64..64).prop_map(|(i, r)| CutObj::Inst(cut_id(i), cut_ref(r))),
        2 => (0u64..48, proptest::collection::vec(0u64..64, 0..40)).prop_map(|(i, e)| {
            CutObj::Arr(cut_id(i), e.into_iter().map(cut_ref).collect())
        }),
        1 => (0u64..48, proptest::collection::vec(0u64..64, 900..2600)).prop_map(|(i, e)| {
            CutObj::Arr(cut_id(i), e.into_iter().map(cut_ref).collect())
        }),
        1 => (0u64..4, 1u16..1600).prop_map(|(b, n)| CutObj::Prims(b, n)),
    ];
    proptest::collection::vec(obj, 1..40)
}

fn prim_id(base: u64, j: u64) -> u64 {
    0x100_0000 + 8 * (base * 256 + j)
}

/// A Holder dump of `objs`, with a new heap dump segment every third object (the places
/// where a parallel pass may cut the file).
fn cut_dump(objs: &[CutObj]) -> Vec<u8> {
    holder_dump(|w| {
        for (i, o) in objs.iter().enumerate() {
            if i % 3 == 2 {
                w.end_segment();
            }
            match o {
                CutObj::Inst(id, r) => {
                    w.instance(*id, 0x20, &r.to_be_bytes());
                }
                CutObj::Arr(id, e) => {
                    w.object_array(*id, 0x10, e);
                }
                CutObj::Prims(b, n) => {
                    for j in 0..*n as u64 {
                        w.primitive_array(prim_id(*b, j), BasicType::Int, 1, &[0, 0, 0, 7]);
                    }
                }
            }
        }
    })
}

/// The thresholds the index tests build with: every Bitmap flagged, no array.
const LIMITS: index::IndexLimits = index::IndexLimits {
    bitmap_min_pixels: 1,
    array_min_bytes: 1 << 40,
};

/// `bytes` cut for `threads` parts (one part, the whole file after its header, if it cannot
/// be cut).
fn parts_of(bytes: &[u8], threads: usize) -> Vec<(u64, u64)> {
    let whole = vec![(hprof::HEADER_LEN as u64, bytes.len() as u64)];
    split(&Input::Bytes(bytes), threads, 0).unwrap_or(whole)
}

/// The index two passes build over `bytes`, their parse cut into up to `threads` parts,
/// and how many parts there were; its ids, node arrays and edges in `scratch` files if given.
fn two_pass_index(
    bytes: &[u8],
    threads: usize,
    scratch: Option<&sys::scratch::Scratch>,
) -> (index::Index, usize) {
    let input = Input::Bytes(bytes);
    let mut parts = split(&input, threads, 0);
    let mut ix = scan(&input, &mut parts, scratch).unwrap();
    two_pass_graph(&input, &parts, &mut ix, LIMITS, scratch).unwrap();
    if scratch.is_some() && !ix.is_empty() {
        assert!(ix.ids.in_file() && ix.class_of.in_file() && ix.adj.in_file());
        assert!(ix.edges.is_empty() || ix.edges.in_file());
    }
    (ix, parts.map_or(1, |p| p.len()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]
    /// Two-pass workers hand each object to the shared node arrays once its references
    /// are looked up, the ones the dump lacks dropped a batch at a time (a batch can end
    /// inside an array, or after a long run of arrays without references). However the
    /// file is cut, each node has the class, size and references of the first object the
    /// file lists with its id, and the counts are those of every object listed.
    #[test]
    fn two_pass_workers_give_each_node_its_first_object(objs in cut_objs()) {
        use std::collections::{BTreeSet, HashMap};
        let bytes = cut_dump(&objs);
        // What the dump says, read plainly.
        let mut present: BTreeSet<u64> = [0x10, 0x20].into();
        let mut listed = vec![(0x10u64, vec![]), (0x20, vec![0x10])];
        for o in &objs {
            match o {
                CutObj::Inst(id, r) => listed.push((*id, vec![0x20, *r])),
                CutObj::Arr(id, e) => {
                    listed.push((*id, [&[0x10][..], e].concat()))
                }
                CutObj::Prims(b, n) => {
                    listed.extend((0..*n as u64).map(|j| (prim_id(*b, j), vec![])))
                }
            }
        }
        present.extend(listed.iter().map(|o| o.0));
        let (mut edges, mut missing, mut first) = (0u64, 0u64, HashMap::new());
        for (id, targets) in &listed {
            for &t in targets.iter().filter(|&&t| t != 0) {
                if present.contains(&t) {
                    edges += 1;
                } else {
                    missing += 1;
                }
            }
            first.entry(*id).or_insert(targets);
        }
        // Every other run keeps the ids, the node arrays and the edge lists in scratch files.
        let dir = tempfile::tempdir().unwrap();
        let s = sys::scratch::Scratch::new(dir.path(), 1 << 30).unwrap();
        for threads in 1..=4 {
            let (ix, parts) = two_pass_index(&bytes, threads, (threads % 2 == 1).then_some(&s));
            if threads > 1 && objs.len() > 2 {
                prop_assert!(parts > 1, "{} parts with {} threads", parts, threads);
            }
            prop_assert_eq!(ix.len(), present.len());
            prop_assert_eq!(ix.stats.edges, edges);
            prop_assert_eq!(ix.stats.missing_refs, missing);
            prop_assert_eq!(ix.edges.len() as u64, edges);
            prop_assert_eq!(ix.stats.duplicate_ids, (listed.len() - present.len()) as u64);
            for (n, &id) in ix.ids.iter().enumerate() {
                let want: Vec<u64> = first[&id]
                    .iter()
                    .copied()
                    .filter(|t| present.contains(t))
                    .collect();
                let got: Vec<u64> =
                    ix.succ(n as u32).iter().map(|&m| ix.ids[m as usize]).collect();
                prop_assert_eq!(&got, &want, "node {} (id {:#x}), {} parts", n, id, parts);
                let class = ix.classes[ix.class_of[n] as usize].name.as_str();
                let (want_class, want_size) = match objs.iter().find(|o| match o {
                    CutObj::Inst(i, _) | CutObj::Arr(i, _) => *i == id,
                    CutObj::Prims(..) => false,
                }) {
                    Some(CutObj::Inst(..)) => ("com.app.Holder", 8),
                    Some(CutObj::Arr(_, e)) => ("java.lang.Object", e.len() as u32 * 8 + 16),
                    _ if id >= 0x100_0000 => ("int[]", 4 + 16),
                    _ => ("java.lang.Class", 0),
                };
                prop_assert_eq!(class, want_class, "node {} (id {:#x})", n, id);
                prop_assert_eq!(ix.shallow[n], want_size, "node {} (id {:#x})", n, id);
            }
        }
    }

    /// The one pass, over the same dumps cut into parts (ids out of order and repeated, so
    /// each worker keeps its ids; with repeats no worker writes the node arrays itself),
    /// builds the index two passes build. It gives up only where it must: a repeated id
    /// when the workers' ids are not kept.
    #[test]
    fn one_pass_workers_give_the_two_pass_index(objs in cut_objs()) {
        let bytes = cut_dump(&objs);
        let input = Input::Bytes(&bytes);
        // Every other run keeps the node arrays and the edges in scratch files: the same index.
        let dir = tempfile::tempdir().unwrap();
        let s = sys::scratch::Scratch::new(dir.path(), 1 << 30).unwrap();
        for threads in 1..=4 {
            let scratch = (threads % 2 == 0).then_some(&s);
            let parts = parts_of(&bytes, threads);
            // (The two-pass index in scratch when the one pass's is not.)
            let (two, _) = two_pass_index(&bytes, threads, (threads % 2 == 1).then_some(&s));
            let Some(OnePassResult::Graph(ix, placed, edges)) =
                one_pass(&input, &parts, LIMITS, scratch)
            else {
                prop_assert!(two.stats.duplicate_ids > 0, "{} parts: gave up", parts.len());
                continue;
            };
            let mut one = *ix;
            index::apply_placed(&mut one, placed, edges);
            // (The one pass in memory keeps only the rank map: its ids are selected from it.)
            prop_assert_eq!(one.each_id().collect::<Vec<_>>(), two.each_id().collect::<Vec<_>>());
            prop_assert_eq!(&one.class_of, &two.class_of, "{} parts", parts.len());
            prop_assert_eq!(&one.shallow, &two.shallow, "{} parts", parts.len());
            for n in 0..one.len() as u32 {
                prop_assert_eq!(one.succ(n), two.succ(n), "node {}, {} parts", n, parts.len());
            }
            prop_assert_eq!(one.stats.edges, two.stats.edges);
            prop_assert_eq!(one.stats.missing_refs, two.stats.missing_refs);
            prop_assert_eq!(one.stats.duplicate_ids, two.stats.duplicate_ids);
            prop_assert_eq!(one.edges.len() as u64, one.stats.edges);
        }
    }
}

/// One-pass workers write the objects of their own range of nodes into the node arrays and
/// leave the others (here the class dumps, listed first but with ids among the later
/// workers' objects) to `apply_placed`; each writes its edge lists into its own stretch of
/// the joined list. However many parts, the index is the one two passes build: the same
/// classes, sizes and references, references to absent objects and classes dropped and
/// counted, and no gap in the joined list.
#[test]
fn one_pass_workers_write_their_own_nodes() {
    let obj = |k: u64| 0x1000 + 16 * k;
    let (class_a, class_b) = (obj(1500) + 8, obj(2500) + 8);
    let mut w = Writer::new(Format::V102, 8, 0);
    holder_classes(&mut w, class_a, class_b);
    w.root_jni_global(obj(0), 1);
    for k in 0..3000u64 {
        if k % 40 == 39 {
            w.end_segment();
        }
        match k % 4 {
            // Some references name no object (ids past the last).
            0 | 1 => w.instance(obj(k), class_b, &obj((k * 7 + 3) % 3100).to_be_bytes()),
            2 => w.object_array(obj(k), class_a, &[obj(k / 2), 0, obj(3050), class_b]),
            // A class the dump lacks: no edge to it.
            _ => w.instance(obj(k), 0x77, &[]),
        };
    }
    w.end_segment();
    w.heap_dump_end();
    let bytes = w.finish();
    for threads in 2..=4 {
        let parts = split(&Input::Bytes(&bytes), threads, 0).unwrap();
        assert_eq!(parts.len(), threads);
        let (one, left) = one_pass_as_two(&bytes, &parts, threads);
        // Only the class dumps whose nodes lie past the first worker's range are left: each
        // worker takes the objects after the class dumps as its own (they ascend).
        assert!(
            (1..=2).contains(&left),
            "{threads} parts: {left} objects left, not only class dumps"
        );
        assert!(one.stats.missing_refs > 0);
    }
}

/// The index the one pass builds over `parts` (it must not give up), checked against the one
/// two passes build in `threads` parts; and how many objects its workers left to
/// `apply_placed`.
fn one_pass_as_two(bytes: &[u8], parts: &[(u64, u64)], threads: usize) -> (index::Index, usize) {
    let Some(OnePassResult::Graph(ix, placed, edges)) =
        one_pass(&Input::Bytes(bytes), parts, LIMITS, None)
    else {
        panic!("{threads} parts: the one pass gave up");
    };
    let left = placed.iter().map(|p| p.left()).sum();
    let mut one = *ix;
    index::apply_placed(&mut one, placed, edges);
    let (two, _) = two_pass_index(bytes, threads, None);
    assert!(one.each_id().eq(two.each_id()));
    assert_eq!(one.class_of, two.class_of, "{threads} parts");
    assert_eq!(one.shallow, two.shallow, "{threads} parts");
    for n in 0..one.len() as u32 {
        assert_eq!(one.succ(n), two.succ(n), "node {n}, {threads} parts");
    }
    assert_eq!(one.stats.edges, two.stats.edges);
    assert_eq!(one.stats.missing_refs, two.stats.missing_refs);
    assert_eq!(one.stats.rooted_class_refs, two.stats.rooted_class_refs);
    assert_eq!(one.edges.len() as u64, one.stats.edges);
    // The pieces the report's later passes read (`Input::pass_segments`): where each lies in
    // the file and which ids it holds.
    let pieces = |ix: &index::Index| {
        let s = ix.segments.iter();
        s.map(|s| (s.offset, s.len, s.tag, s.min_id, s.max_id))
            .collect::<Vec<_>>()
    };
    assert!(!one.segments.is_empty());
    assert_eq!(pieces(&one), pieces(&two), "{threads} parts");
    (one, left)
}

/// An object's edge to its class is left out where the class object is a root the dump lists
/// with a tag searched first (`Class::rooted`), and counted: in either index, and whether the
/// roots come before the objects or, as HotSpot writes them, after (the one pass then learns
/// them only once its workers are done: `place` leaves those edges out). A class rooted only
/// by a stack frame keeps its edges (a path may have to reach it through an object).
#[test]
fn edges_to_rooted_classes_are_left_out_whichever_comes_first() {
    let obj = |k: u64| 0x1000 + 16 * k;
    let (object, sticky, framed, plain, ints, longs) = (0x08, 0x10, 0x18, 0x20, 0x28, 0x30);
    for roots_last in [false, true] {
        let mut w = Writer::new(Format::V102, 8, 0);
        let names = [
            "java.lang.Object",
            "java.lang.Sticky",
            "com.app.Framed",
            "com.app.Plain",
        ];
        for (i, name) in names.iter().chain(&["[I", "[J"]).enumerate() {
            w.utf8(i as u64 + 1, name);
        }
        w.utf8(9, "ref");
        let classes = [object, sticky, framed, plain, ints, longs];
        for (serial, &id) in classes.iter().enumerate() {
            w.load_class(serial as u32 + 1, id, serial as u64 + 1);
        }
        w.class_dump(object, 0, 0, 0, &[], &[]);
        for c in [sticky, framed, plain] {
            w.class_dump(c, object, 0, 8, &[], &[(9, BasicType::Object)]);
        }
        w.class_dump(ints, object, 0, 0, &[], &[]);
        w.class_dump(longs, object, 0, 0, &[], &[]);
        let roots = |w: &mut Writer| {
            w.root(sub::ROOT_STICKY_CLASS, sticky);
            w.root(sub::ROOT_STICKY_CLASS, ints);
            w.root2(sub::ROOT_JAVA_FRAME, framed, 1, 0);
            w.root_jni_global(obj(0), 1);
        };
        if !roots_last {
            roots(&mut w);
        }
        for k in 0..600u64 {
            if k % 50 == 49 {
                w.end_segment();
            }
            let next = obj((k + 1) % 600).to_be_bytes();
            match k % 6 {
                0 => w.instance(obj(k), sticky, &next),
                1 => w.instance(obj(k), framed, &next),
                2 => w.instance(obj(k), plain, &next),
                3 => w.primitive_array(obj(k), BasicType::Int, 2, &[0; 8]),
                4 => w.primitive_array(obj(k), BasicType::Long, 1, &[0; 8]),
                _ => w.object_array(obj(k), object, &[obj(k / 2)]),
            };
        }
        if roots_last {
            roots(&mut w);
        }
        w.end_segment();
        w.heap_dump_end();
        let bytes = w.finish();
        for threads in 1..=3 {
            let parts = parts_of(&bytes, threads);
            let (one, _) = one_pass_as_two(&bytes, &parts, threads);
            let node = |id| one.node(id).unwrap();
            let at = |k: u64| one.succ(node(obj(k))).to_vec();
            let ctx = format!("roots last: {roots_last}, {threads} parts");
            // The sticky class's instances and the int[]s: 100 each, no edge to the class.
            assert_eq!(one.stats.rooted_class_refs, 200, "{ctx}");
            assert_eq!(at(0), [node(obj(1))], "{ctx}");
            assert!(at(3).is_empty(), "{ctx}");
            // The others keep theirs, first.
            assert_eq!(at(1), [node(framed), node(obj(2))], "{ctx}");
            assert_eq!(at(2), [node(plain), node(obj(3))], "{ctx}");
            assert_eq!(at(4), [node(longs)], "{ctx}");
            assert_eq!(at(5), [node(object), node(obj(2))], "{ctx}");
        }
    }
}

/// A one-pass entry is two words, its shallow size implied where it can be (see
/// `pass2::Out::nodes`): an instance's is its class's size, a primitive array's takes the
/// degree's word (its one edge, to its class object, a flag), and the others' (object arrays,
/// class objects, instances of a class of size 0, one whose size differs) are set aside in
/// order. With every kind, in parts, the one pass builds the graph itself, and it is the
/// graph two passes build.
#[test]
fn one_pass_entries_give_every_object_its_size_and_edges() {
    let obj = |k: u64| 0x1000 + 16 * k;
    let (object, holder, sizeless, ints, longs) = (obj(900) + 8, obj(901) + 8, 0x10, 0x18, 0x20);
    let mut w = Writer::new(Format::V102, 8, 0);
    for (i, name) in [
        "java.lang.Object",
        "com.app.Holder",
        "com.app.Sizeless",
        "[I",
        "[J",
    ]
    .iter()
    .enumerate()
    {
        w.utf8(i as u64 + 1, name);
    }
    w.utf8(9, "ref");
    for (serial, id) in [object, holder, sizeless, ints, longs]
        .into_iter()
        .enumerate()
    {
        w.load_class(serial as u32 + 1, id, serial as u64 + 1);
    }
    w.class_dump(object, 0, 0, 0, &[], &[]);
    // (A static: the class object's size is its statics' bytes.)
    let statics = [(9, BasicType::Object, obj(3).to_be_bytes().to_vec())];
    w.class_dump(holder, object, 0, 8, &statics, &[(9, BasicType::Object)]);
    w.class_dump(sizeless, object, 0, 0, &[], &[(9, BasicType::Object)]);
    w.class_dump(ints, object, 0, 0, &[], &[]);
    // `long[]`'s class object is a root: no edge to it (`Class::rooted`).
    w.class_dump(longs, object, 0, 0, &[], &[]);
    w.root_jni_global(longs, 1);
    w.root_jni_global(obj(0), 1);
    for k in 0..900u64 {
        if k % 50 == 49 {
            w.end_segment();
        }
        let next = obj((k + 1) % 900).to_be_bytes();
        match k % 6 {
            0 => w.instance(obj(k), holder, &next),
            1 => w.instance(obj(k), sizeless, &next),
            2 => w.object_array(obj(k), object, &[obj(k / 2), 0, obj(k / 3)]),
            3 => w.primitive_array(
                obj(k),
                BasicType::Int,
                (k % 7) as u32,
                &vec![0; (k % 7) as usize * 4],
            ),
            4 => w.primitive_array(obj(k), BasicType::Long, 3, &[0; 24]),
            // A class the dump lacks: its instance's size is its data's.
            _ => w.instance(obj(k), 0x77, &[0; 12]),
        };
    }
    w.end_segment();
    w.heap_dump_end();
    let bytes = w.finish();
    for threads in 1..=3 {
        let parts = parts_of(&bytes, threads);
        let (one, _) = one_pass_as_two(&bytes, &parts, threads);
        // Every kind is there: int[] with its class edge, long[] without, sizes set aside.
        let node = |id| one.node(id).unwrap();
        assert_eq!(one.succ(node(obj(3))), [node(ints)]);
        assert!(one.succ(node(obj(4))).is_empty());
        assert_eq!(one.shallow[node(obj(1)) as usize], 8);
        assert_eq!(one.shallow[node(obj(5)) as usize], 12);
        assert_eq!(one.shallow[node(holder) as usize], 9 + 8);
    }
}

/// The reports of one pass and of two passes (without timings), and whether the one pass
/// built the graph itself (it falls back to two passes on any trouble).
fn one_and_two_passes(bytes: &[u8]) -> (serde_json::Value, serde_json::Value, bool) {
    let run = |one_pass| {
        let cfg = Config {
            one_pass,
            ..Config::default()
        };
        let mut r = analyze(Input::Bytes(bytes), &cfg, serde_json::Value::Null).unwrap();
        r.analysis.timings = Timings::default();
        serde_json::to_value(&r).unwrap()
    };
    let whole = [(hprof::HEADER_LEN as u64, bytes.len() as u64)];
    let limits = index::IndexLimits {
        bitmap_min_pixels: 1,
        array_min_bytes: 1,
    };
    let built = matches!(
        one_pass(&Input::Bytes(bytes), &whole, limits, None),
        Some(OnePassResult::Graph(..))
    );
    (run(true), run(false), built)
}

/// One pass keeps an instance's edge to its class as a flag on the entry, not as a raw id
/// to look up, and maps its raw ids to nodes in their own memory, then moves them to make
/// room for the class edges. The graph and report are those of two passes:
/// - also for an instance whose class the dump lacks (that edge is missing, as before);
/// - also when most instances hold no reference of their own, so that the class edges
///   outnumber the raw ids and the list must grow.
#[test]
fn implied_class_edges_give_the_two_pass_graph() {
    let small = holder_dump(|w| {
        w.instance(0x100, 0x20, &0x200u64.to_be_bytes());
        w.instance(0x200, 0x20, &0u64.to_be_bytes());
        w.instance(0x300, 0xABC, &[]);
        w.root_jni_global(0x100, 1);
        w.root_jni_global(0x300, 2);
    });
    let mostly_empty = holder_dump(|w| {
        w.instance(0x100, 0x20, &0x200u64.to_be_bytes());
        w.instance(0x108, 0x20, &0x999u64.to_be_bytes());
        for k in 0..50u64 {
            w.instance(0x200 + 8 * k, 0x20, &0u64.to_be_bytes());
        }
        w.root_jni_global(0x100, 1);
        w.root_jni_global(0x108, 2);
    });
    // small: Holder -> Object (super); 0x100 -> Holder, -> 0x200; 0x200 -> Holder; 0x300's
    // class is not in the dump. mostly_empty: Holder -> Object, 52 instances -> Holder,
    // 0x100 -> 0x200; 0x999 is not in the dump.
    for (bytes, references) in [(small, 4), (mostly_empty, 54)] {
        let (one, two, built) = one_and_two_passes(&bytes);
        assert!(built, "the one pass fell back to two");
        assert_eq!(one["analysis"]["references"], references);
        assert_eq!(one["analysis"]["missingReferences"], 1);
        assert_eq!(one, two);
    }
}

#[test]
fn android_style_dump_by_hand() {
    let bytes = android_dump();
    let r = report_of(&bytes);
    assert_eq!(r.analysis.id_size, 4);
    assert_eq!(r.analysis.missing_references, 1, "0x999 is not in the dump");
    assert_eq!(r.analysis.stripped_arrays, 1);
    assert_eq!(r.gc_paths.len(), 1, "{:#?}", r.gc_paths);
    let g = &r.gc_paths[0];
    assert_eq!(g.leak_reason, "Activity Leak");
    assert_eq!(g.class_name, "com.app.MainActivity");
    assert_eq!(g.gc_root, "System Class");
    assert_eq!(g.path[0].reference, "com.app.Leaks.sActivity");
    assert_eq!(g.path[0].reference_type, "STATIC_FIELD");
    // Android's layout (the dump has ROOT_UNREACHABLE): the instance's 18 bytes to 24, and
    // the stripped byte[1000] at its full size, 12-byte header + 1000 to 1016.
    assert_eq!(g.retained_size, 24 + 1016);
    assert_eq!(r.analysis.sizes.vm, "Android");
    assert_eq!(r.leak_objects.len(), 1);
    assert_eq!(r.leak_objects[0].object_id, 0x100);
    // 0x110 is only weakly reachable: no leak, and not retained by the reference.
    let weak = r
        .dominators
        .iter()
        .find(|d| d.class_name == "java.lang.ref.WeakReference")
        .expect("the weak reference is a top-level object");
    // Its class's instance size, 12, to 16.
    assert_eq!(weak.retained_size, 16);
    assert_eq!(weak.gc_root, "Java Frame");
}

/// A destroyed activity held by element 4321 of an `Object[]` of 5000 under a JNI global
/// (element 4400 holds it too, element 7 holds another object), with ids of `id_size` bytes.
fn array_path_dump(id_size: u32) -> Vec<u8> {
    let format = if id_size == 4 {
        Format::V103
    } else {
        Format::V102
    };
    let mut w = Writer::new(format, id_size, 0);
    activity_strings(&mut w);
    w.utf8(6, "java.lang.Object[]");
    w.load_class(4, 0x80, 6);
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.class_dump(0x10, 0, 0, 8, &[], &[]);
    activity_class(&mut w);
    w.class_dump(0x30, 0x20, 0, 10, &[], &[]);
    w.class_dump(0x80, 0x10, 0, 8, &[], &[]);
    w.instance(0x100, 0x30, &[1, 0]);
    w.instance(0x200, 0x10, &[]);
    let mut elems = vec![0u64; 5000];
    elems[7] = 0x200;
    elems[4321] = 0x100;
    elems[4400] = 0x100;
    w.object_array(0x500, 0x80, &elems);
    for c in [0x10, 0x20, 0x30, 0x80] {
        w.root(sub::ROOT_STICKY_CLASS, c);
    }
    w.root_jni_global(0x500, 0x900);
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

#[test]
fn an_array_entry_on_a_path_names_its_first_index() {
    for id_size in [4, 8] {
        let bytes = array_path_dump(id_size);
        let r = report_of(&bytes);
        assert_eq!(r.gc_paths.len(), 1, "{id_size}: {:#?}", r.gc_paths);
        let g = &r.gc_paths[0];
        assert_eq!(g.leak_reason, "Activity Leak");
        assert_eq!(g.gc_root, "JNI Global", "{id_size}");
        assert_eq!(g.path[0].reference, "java.lang.Object[][4321]", "{id_size}");
        assert_eq!(g.path[0].reference_type, "ARRAY_ENTRY");

        // Pass 3 alone, its input cut every 3 bytes (array elements arrive in pieces).
        let ix = scan(&Input::Bytes(&bytes), &mut None, None).unwrap();
        let mut p3 = paths::Pass3::new(&ix, vec![(0x500, 0x100), (0x500, 0x200), (0x500, 0x80)]);
        let mut p = Parser::new();
        for c in bytes.chunks(3) {
            p.feed(c, &mut p3).unwrap();
        }
        p.finish().unwrap();
        assert_eq!(p3.get(0x500, 0x100), paths::Ref::Element(4321), "{id_size}");
        assert_eq!(p3.get(0x500, 0x200), paths::Ref::Element(7), "{id_size}");
        assert_eq!(p3.get(0x500, 0x80), paths::Ref::ClassOf, "{id_size}");
    }
}

/// Pass 3 read on several threads (`report::read_paths`): what a visitor of later pieces found
/// is joined only where the earlier ones found nothing, so a pair or an object met twice keeps
/// the earlier answer (the first object with an id is the one analysed), as one visitor would.
#[test]
fn pass3_finds_of_later_pieces_are_joined_after_the_earlier_ones() {
    let bytes = array_path_dump(4);
    let ix = scan(&Input::Bytes(&bytes), &mut None, None).unwrap();
    let wanted = vec![(0x500, 0x100), (0x500, 0x200), (0x500, 0x80)];
    let mut early = paths::Pass3::new(&ix, wanted.clone());
    let mut late = paths::Pass3::new(&ix, wanted);
    let mut p = Parser::new();
    p.feed(&bytes, &mut late).unwrap();
    p.finish().unwrap();
    early.found[0] = Some(paths::Ref::Unknown);
    early.absorb(late);
    assert_eq!(
        early.get(0x500, 0x80),
        paths::Ref::Unknown,
        "the earlier answer"
    );
    assert_eq!(early.get(0x500, 0x100), paths::Ref::Element(4321));
    assert_eq!(early.get(0x500, 0x200), paths::Ref::Element(7));
    let mut a = trace::Fields::new(vec![1, 2, 3]);
    let mut b = trace::Fields::new(vec![1, 2, 3]);
    a.got.insert(1, (10, vec![1]));
    b.got.insert(1, (20, vec![2]));
    b.got.insert(3, (30, vec![3]));
    a.absorb(b);
    let mut got: Vec<_> = a.got.into_iter().collect();
    got.sort_unstable();
    assert_eq!(got, [(1, (10, vec![1])), (3, (30, vec![3]))]);
}

#[test]
fn free_node_skips_the_taken_nodes() {
    for taken in [
        vec![],
        vec![0],
        vec![0, 1, 2],
        vec![1, 3, 4, 9],
        vec![5, 6, 20],
    ] {
        let free: Vec<u32> = (0..40).filter(|v| !taken.contains(v)).collect();
        let mut cur = FreeNodes::new(&taken);
        for (g, &want) in free.iter().enumerate().take(20) {
            assert_eq!(free_node(&taken, g as u32), want, "{taken:?} {g}");
            assert_eq!(cur.get(g as u32), want, "{taken:?} {g}");
        }
        assert_eq!(cur.get(2), free[2], "{taken:?}: back to an earlier one");
    }
}

#[test]
fn truncated_and_corrupt_dumps_are_errors_with_offsets() {
    let bytes = android_dump();
    for cut in [10, 40, bytes.len() / 2, bytes.len() - 3] {
        let e = analyze(
            Input::Bytes(&bytes[..cut]),
            &Config::default(),
            serde_json::Value::Null,
        )
        .unwrap_err();
        assert!(matches!(e, Error::Input { .. }), "{e}");
        assert!(e.to_string().starts_with("byte "), "{e}");
    }
    let mut bad = bytes.clone();
    bad[hprof::HEADER_LEN] = 0x77; // an unknown record tag
    let e = analyze(
        Input::Bytes(&bad),
        &Config::default(),
        serde_json::Value::Null,
    );
    assert!(e.is_err());
}
