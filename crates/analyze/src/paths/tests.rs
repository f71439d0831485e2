//! The shortest paths' tests: whole searches, stopped ones, the memo's walks, the gated
//! class roots.

use super::*;
use crate::{build_index, Config, Input, Timings};
use hprof::writer::Writer;
use hprof::{tag, BasicType, Format};

const DEPTH: u64 = 2000;
const LEAVES: u64 = 200;
/// Chain nodes that also hold a leaf of their own.
const SIDES: [u64; 4] = [10, 100, 500, 1500];

/// The classes of the test dumps: `a/Node` (`NODE_C`) with the reference fields `fields`,
/// `a/Leaf` (`LEAF_C`) and `Object[]` (`ARR_C`); a heap dump segment open after them.
const NODE_C: u64 = 0x108;
const LEAF_C: u64 = 0x110;
const ARR_C: u64 = 0x118;
fn with_classes(fields: &[&str]) -> Writer {
    let obj = 0x100;
    let mut w = Writer::new(Format::V102, 8, 0);
    w.utf8(1, "java/lang/Object")
        .utf8(2, "a/Node")
        .utf8(3, "a/Leaf")
        .utf8(4, "[Ljava/lang/Object;");
    let fields: Vec<(u64, BasicType)> = (5..)
        .zip(fields)
        .map(|(k, name)| {
            w.utf8(k, name);
            (k, BasicType::Object)
        })
        .collect();
    for (k, c) in [obj, NODE_C, LEAF_C, ARR_C].into_iter().enumerate() {
        w.load_class(k as u32 + 1, c, k as u64 + 1);
    }
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.class_dump(obj, 0, 0, 0, &[], &[]);
    w.class_dump(NODE_C, obj, 0, 8 * fields.len() as u32, &[], &fields);
    w.class_dump(LEAF_C, obj, 0, 0, &[], &[]);
    w.class_dump(ARR_C, obj, 0, 0, &[], &[]);
    w
}

/// A JNI global holds a chain of `DEPTH` nodes (`next`), the last of which holds an array of
/// `LEAVES` leaves; the nodes of `SIDES` hold one more leaf each (`side`).
fn chain() -> (Vec<u8>, Vec<u64>) {
    let node = |i: u64| 0x1000_0000 + 16 * i;
    let arr = node(DEPTH);
    let leaf = |j: u64| arr + 16 + 16 * j;
    let mut w = with_classes(&["next", "side"]);
    w.root_jni_global(node(0), 1);
    let mut leaves: Vec<u64> = (0..LEAVES).map(leaf).collect();
    for i in 0..DEPTH {
        let next = if i + 1 < DEPTH { node(i + 1) } else { arr };
        let side = match SIDES.iter().position(|&s| s == i) {
            Some(k) => leaf(LEAVES + k as u64),
            None => 0,
        };
        let mut v = next.to_be_bytes().to_vec();
        v.extend_from_slice(&side.to_be_bytes());
        w.instance(node(i), NODE_C, &v);
    }
    w.object_array(arr, ARR_C, &leaves);
    for k in 0..SIDES.len() as u64 {
        leaves.push(leaf(LEAVES + k));
    }
    for &l in &leaves {
        w.instance(l, LEAF_C, &[]);
    }
    w.end_segment();
    w.heap_dump_end();
    (w.finish(), leaves)
}

/// The whole path to `v` from its root, by the parents (no class object is on these).
fn whole(bfs: &Paths, v: u32) -> Vec<u32> {
    let mut c = vec![v];
    while bfs.parent[*c.last().unwrap() as usize] != SUPER {
        c.push(bfs.parent[*c.last().unwrap() as usize]);
    }
    c.reverse();
    c
}

/// Cut paths keep their ends and count the rest, with or without the memo, and the memo
/// walks above the ends of the paths through one object once: the leaves in one array
/// share one walk (without it: `LEAVES` walks of the whole chain).
#[test]
fn paths_keep_their_ends_and_walk_a_shared_chain_once() {
    let (ix, bfs, leaves) = chain_paths();
    let mut memo = Memo::default();
    let ends: Vec<u32> = leaves.iter().map(|&id| ix.node(id).unwrap()).collect();
    walk_all(&ix, &bfs, &ends, &mut memo);
    let once: u64 = DEPTH + SIDES.iter().sum::<u64>();
    assert!(
        memo.hops <= once,
        "{} steps walked above the ends of {} paths ({once} would do)",
        memo.hops,
        leaves.len()
    );
}

/// Paths to objects all along one chain, asked deepest first (each walk reaches objects
/// no walk reached before only at its start) and in a shuffled order, keep their ends as
/// whole walks say, and the walks above their ends stop within a checkpoint's distance of
/// what was walked before: without the checkpoints, deepest first, each walked to the
/// chain's start (about 2 M steps here).
#[test]
fn paths_all_along_a_chain_walk_it_about_once() {
    let (ix, bfs, _) = chain_paths();
    let every = 64;
    let deepest_first: Vec<u64> = (0..DEPTH).rev().collect();
    let shuffled: Vec<u64> = (0..DEPTH).map(|i| i * 1297 % DEPTH).collect();
    for order in [deepest_first, shuffled] {
        let mut memo = Memo {
            every,
            ..Memo::default()
        };
        let ends: Vec<u32> = order
            .iter()
            .map(|&i| ix.node(0x1000_0000 + 16 * i).unwrap())
            .collect();
        walk_all(&ix, &bfs, &ends, &mut memo);
        let bound = DEPTH + ends.len() as u64 * (every + PATH_HEAD as u64);
        assert!(memo.hops <= bound, "{} steps, {bound} at most", memo.hops);
    }
}

/// The index of a test dump, built as the analysis builds it.
fn index_of(bytes: &[u8]) -> Index {
    let mut tm = Timings::default();
    let start = std::time::Instant::now();
    build_index(&Input::Bytes(bytes), &Config::default(), start, &mut tm)
        .unwrap()
        .0
}

/// [`chain`]'s index, its shortest paths and its leaves' ids.
fn chain_paths() -> (Index, Paths, Vec<u64>) {
    let (bytes, leaves) = chain();
    let ix = index_of(&bytes);
    let bfs = shortest(&ix, &ix.roots, &[]);
    (ix, bfs, leaves)
}

/// Leaves of the array in [`wide_and_deep`], and the chain's nodes, and one leaf no root
/// holds.
const WIDE: u64 = 3 * WATCH_EVERY as u64;
const ARRAY: u64 = 0x2000_0000;
const LOST: u64 = 0x5000_0000;
fn wide_leaf(j: u64) -> u64 {
    0x3000_0000 + 16 * j
}
fn deep_node(i: u64) -> u64 {
    0x4000_0000 + 16 * i
}

/// Two JNI globals: an array of [`WIDE`] leaves, and the first of a chain of [`WIDE`]
/// nodes (`next`); and a leaf no root holds ([`LOST`]).
fn wide_and_deep() -> Vec<u8> {
    let mut w = with_classes(&["next"]);
    w.root_jni_global(ARRAY, 1);
    w.root_jni_global(deep_node(0), 2);
    let leaves: Vec<u64> = (0..WIDE).map(wide_leaf).collect();
    w.object_array(ARRAY, ARR_C, &leaves);
    for &l in leaves.iter().chain([LOST].iter()) {
        w.instance(l, LEAF_C, &[]);
    }
    for i in 0..WIDE {
        let next = if i + 1 < WIDE { deep_node(i + 1) } else { 0 };
        w.instance(deep_node(i), NODE_C, &next.to_be_bytes());
    }
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// A search stopped once its ends have parents gives them the paths the whole search
/// gives, and stops early when they are reached early: here by its first look at its ends,
/// when the array's leaves are all reached and the chain's second node is, but not the
/// rest of the chain. Ends at the chain's end, or one no root reaches, make it run whole.
#[test]
fn a_search_stopped_at_its_ends_gives_them_the_whole_searchs_paths() {
    let ix = index_of(&wide_and_deep());
    let full = shortest(&ix, &ix.roots, &[]);
    let reached = |p: &Paths| p.parent.iter().filter(|&&x| x != UNREACHED).count();
    let all = reached(&full);
    let node = |id: u64| ix.node(id).unwrap();
    let early = vec![
        node(wide_leaf(WIDE - 1)),
        node(wide_leaf(0)),
        node(deep_node(1)),
    ];
    let last = vec![node(wide_leaf(7)), node(deep_node(WIDE - 1))];
    let lost = vec![node(wide_leaf(7)), node(LOST)];
    for (ends, stops_early) in [(early, true), (last, false), (lost, false)] {
        let p = shortest_until(&ix, &ix.roots, &[], &ends);
        for &v in &ends {
            assert_eq!(p.path(&ix, v), full.path(&ix, v), "the path to {v}");
        }
        if stops_early {
            assert!(
                reached(&p) + WIDE as usize / 2 <= all,
                "{} of {all} objects reached",
                reached(&p)
            );
            assert!(ends.iter().all(|v| p.ends.binary_search(v).is_ok()));
        } else {
            assert_eq!(reached(&p), all);
        }
    }
    // The chain's end is WIDE steps from its root, and the lost leaf has no path.
    assert_eq!(whole(&full, node(deep_node(WIDE - 1))).len(), WIDE as usize);
    assert!(full.path(&ix, node(LOST)).nodes.is_empty());
}

/// Classes whose loaders are objects: `LIVE_C` (loaded by `LOADER`, which a JNI global
/// holds through a node) holds `HELD` in a static, which is itself the loader of `NEXT_C`,
/// whose static holds `LAST`; `DEAD_C` (loaded by `DEAD_LOADER`, which nothing holds)
/// holds `ORPHAN`. Nothing else holds any of them, and no root names the classes.
const LIVE_C: u64 = 0x130;
const NEXT_C: u64 = 0x138;
const DEAD_C: u64 = 0x140;
const LOADER: u64 = 0x6000_0000;
const HELD: u64 = 0x6000_0010;
const LAST: u64 = 0x6000_0020;
const DEAD_LOADER: u64 = 0x6000_0030;
const ORPHAN: u64 = 0x6000_0040;
const HOLDER: u64 = 0x6000_0050;
fn loaded_classes() -> Vec<u8> {
    let mut w = with_classes(&["next"]);
    w.utf8(20, "a/Live")
        .utf8(21, "a/Next")
        .utf8(22, "a/Dead")
        .utf8(23, "s");
    for (k, c) in [LIVE_C, NEXT_C, DEAD_C].into_iter().enumerate() {
        w.load_class(k as u32 + 10, c, k as u64 + 20);
    }
    w.segment(tag::HEAP_DUMP_SEGMENT);
    let statics = |v: u64| [(23, BasicType::Object, v.to_be_bytes().to_vec())];
    w.class_dump(LIVE_C, 0x100, LOADER, 0, &statics(HELD), &[]);
    w.class_dump(NEXT_C, 0x100, HELD, 0, &statics(LAST), &[]);
    w.class_dump(DEAD_C, 0x100, DEAD_LOADER, 0, &statics(ORPHAN), &[]);
    w.root_jni_global(HOLDER, 1);
    w.instance(HOLDER, NODE_C, &LOADER.to_be_bytes());
    for id in [LOADER, HELD, LAST, DEAD_LOADER, ORPHAN] {
        w.instance(id, LEAF_C, &[]);
    }
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// A class whose loader is reached becomes a root of its own, and the paths to what its
/// statics alone hold start there, also where the loader is reached only through another
/// such class; a class whose loader nothing holds keeps nothing. So say the whole search,
/// a search stopped at those objects, and the dominators.
#[test]
fn a_class_is_a_root_once_its_loader_is_reached() {
    let ix = index_of(&loaded_classes());
    let node = |id: u64| ix.node(id).unwrap();
    let late = crate::late_roots(&ix);
    let (held, last, orphan) = (node(HELD), node(LAST), node(ORPHAN));
    let full = shortest(&ix, &ix.roots, &late);
    let stopped = shortest_until(&ix, &ix.roots, &late, &[held, last]);
    for p in [&full, &stopped] {
        assert_eq!(p.path(&ix, held).nodes, vec![node(LIVE_C), held]);
        assert_eq!(p.path(&ix, last).nodes, vec![node(NEXT_C), last]);
        assert_eq!(p.root_tag(node(LIVE_C)), LATE_ROOT);
        assert_eq!(p.root_tag(node(NEXT_C)), LATE_ROOT);
    }
    assert!(full.path(&ix, orphan).nodes.is_empty());
    assert!(
        full.path(&ix, node(DEAD_C)).nodes.is_empty(),
        "an unreached class"
    );
    let roots: Vec<u32> = ix.roots.iter().map(|r| r.node).collect();
    let prep = crate::dominators::prepare_gated(&ix, &roots, &late);
    let dom = crate::dominators::finish(prep, |_| 1, 1);
    // (`HELD` is also `NEXT_C`'s loader, which the class holds: two roots hold it.)
    assert_eq!(dom.idom(held), SUPER);
    assert_eq!(dom.idom(last), node(NEXT_C));
    assert_eq!(dom.idom(node(NEXT_C)), SUPER);
    assert_eq!(dom.idom(node(LIVE_C)), SUPER);
    assert_eq!(dom.idom(orphan), UNREACHED);
    assert_eq!(dom.idom(node(DEAD_C)), UNREACHED);
}

/// The paths to `ends` through `memo` are the paths made without it, and keep the ends of
/// the whole paths, and count the rest.
fn walk_all(ix: &Index, bfs: &Paths, ends: &[u32], memo: &mut Memo) {
    for &v in ends {
        let kept = bfs.path_memo(ix, v, memo);
        assert_eq!(kept, bfs.path(ix, v));
        let all = whole(bfs, v);
        let n = all.len();
        let (h, t) = (PATH_HEAD, PATH_TAIL);
        if n <= h + t {
            assert_eq!((&kept.nodes, kept.left_out), (&all, 0));
        } else {
            let mut want = all[..h].to_vec();
            want.extend_from_slice(&all[n - t..]);
            assert_eq!(kept.nodes, want, "path to depth {n}");
            assert_eq!((kept.cut, kept.left_out), (h, (n - h - t) as u64));
            assert_eq!(kept.first_left_out, all[h], "path to depth {n}");
        }
    }
}

/// Pass 3 names each wanted (parent, child) reference as the rule says, however many
/// children one object has and however the input is cut: an instance's first reference
/// field holding the child, else its class; an array's class, else its first element
/// holding the child; a class's first static, else its super, else its loader; else
/// unknown. Objects hold ids
/// drawn from a small pool, so a child is often held twice, or not at all; one array has
/// 3,000 elements and many children (looked up through the Bloom filter), others a few
/// (without), one of them 500 elements (its data arrives in pieces).
#[test]
fn pass3_names_the_first_reference_to_each_wanted_child() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let (obj_c, holder_c, arr_c, loader) = (0x10u64, 0x30u64, 0x80u64, 0x90u64);
    let pool: Vec<u64> = (0..24u64)
        .map(|i| 0x1000 + 8 * i)
        .chain([0, obj_c, holder_c, arr_c, loader, 0x7777])
        .collect();
    for round in 0..6 {
        let mut w = Writer::new(Format::V102, 8, 0);
        w.utf8(1, "java.lang.Object");
        w.utf8(2, "com.app.Holder");
        w.utf8(3, "java.lang.Object[]");
        w.utf8(4, "java.lang.ClassLoader");
        for f in 0..6 {
            w.utf8(10 + f, &format!("f{f}"));
        }
        w.utf8(20, "s0");
        w.utf8(21, "s1");
        w.load_class(1, obj_c, 1);
        w.load_class(2, holder_c, 2);
        w.load_class(3, arr_c, 3);
        w.load_class(4, loader, 4);
        w.segment(tag::HEAP_DUMP_SEGMENT);
        w.class_dump(obj_c, 0, 0, 0, &[], &[]);
        let statics: Vec<(u64, BasicType, Vec<u8>)> = (20..22)
            .map(|n| {
                (
                    n,
                    BasicType::Object,
                    pool[rnd(pool.len() as u64) as usize].to_be_bytes().to_vec(),
                )
            })
            .collect();
        let fields: Vec<(u64, BasicType)> = (10..16).map(|f| (f, BasicType::Object)).collect();
        w.class_dump(holder_c, obj_c, loader, 48, &statics, &fields);
        w.class_dump(arr_c, obj_c, 0, 0, &[], &[]);
        w.class_dump(loader, obj_c, 0, 0, &[], &[]);
        w.instance(loader, loader, &[]);
        // Parents: 8 holders, 5 arrays (one long); their references, in order.
        let mut refs: Vec<(u64, u64, Vec<u64>)> = Vec::new();
        for h in 0..8u64 {
            let vals: Vec<u64> = (0..6)
                .map(|_| pool[rnd(pool.len() as u64) as usize])
                .collect();
            let data: Vec<u8> = vals.iter().flat_map(|v| v.to_be_bytes()).collect();
            w.instance(0x2000 + 8 * h, holder_c, &data);
            refs.push((0x2000 + 8 * h, holder_c, vals));
        }
        for a in 0..5u64 {
            let len = match a {
                2 => 3000,
                3 => 500,
                _ => rnd(12) as usize,
            };
            let elems: Vec<u64> = (0..len)
                .map(|_| match rnd(10) {
                    0..=7 => 0,
                    _ => pool[rnd(pool.len() as u64) as usize],
                })
                .collect();
            w.object_array(0x3000 + 8 * a, arr_c, &elems);
            refs.push((0x3000 + 8 * a, arr_c, elems));
        }
        for &v in &pool[..24] {
            w.instance(v, obj_c, &[]);
        }
        w.root_jni_global(0x2000, 1);
        w.end_segment();
        w.heap_dump_end();
        let bytes = w.finish();
        let ix = index_of(&bytes);
        // Wanted: of each parent (the class too), some children: the long array all of
        // them, the other arrays about three (a scan each), the holders about ten.
        let mut wanted = Vec::new();
        for (p, class, _) in &refs {
            let one_in = if *class == holder_c { 3 } else { 10 };
            for &c in &pool {
                if *p == 0x3010 || rnd(one_in) == 0 {
                    wanted.push((*p, c));
                }
            }
        }
        for &c in &pool {
            wanted.push((holder_c, c));
        }
        let mut p3 = Pass3::new(&ix, wanted.clone());
        let mut parser = hprof::Parser::new();
        let mut at = 0;
        while at < bytes.len() {
            let n = (1 + rnd(700) as usize).min(bytes.len() - at);
            parser.feed(&bytes[at..at + n], &mut p3).unwrap();
            at += n;
        }
        parser.finish().unwrap();
        // The rule, read off the objects as written.
        let holder = &ix.classes[ix.class_by_id(holder_c).unwrap() as usize];
        for &(p, c) in &wanted {
            let want = if p == holder_c {
                match statics.iter().position(|st| st.2 == c.to_be_bytes()) {
                    Some(i) => Ref::Static(format!("s{i}")),
                    None if c == obj_c => Ref::Super,
                    None if c == loader => Ref::Loader,
                    None => Ref::Unknown,
                }
            } else {
                let (_, class, vals) = refs.iter().find(|r| r.0 == p).unwrap();
                let first = vals
                    .iter()
                    .position(|&v| v == c && (v != 0 || class == &holder_c));
                match (first, *class == holder_c) {
                    // (An instance's field comes before its class; an array's class first.)
                    (None, true) | (_, false) if c == *class => Ref::ClassOf,
                    (Some(i), true) => {
                        let slot = holder
                            .ref_slots
                            .iter()
                            .find(|s| s.0 as usize == 8 * i)
                            .unwrap();
                        Ref::Field(slot.1, slot.2)
                    }
                    (Some(i), false) => Ref::Element(i as u32),
                    (None, _) => Ref::Unknown,
                }
            };
            assert_eq!(
                p3.get(p, c),
                want,
                "round {round}: parent {p:#x}, child {c:#x}"
            );
        }
    }
}

/// Every root tag's name, and whether what it holds is reached first: the transient roots
/// (frames, JNI locals, native stacks, blocked threads, unknown) are not; the pseudo tags
/// name the class roots and the stripped holders.
#[test]
fn each_root_tag_has_its_name_and_priority() {
    use crate::index::STRIPPED_HOLDER_ROOT;
    let table = [
        (sub::ROOT_JNI_GLOBAL, "JNI Global", true),
        (sub::ROOT_JNI_LOCAL, "JNI Local", false),
        (sub::ROOT_JAVA_FRAME, "Java Frame", false),
        (sub::ROOT_NATIVE_STACK, "Native Stack", false),
        (sub::ROOT_STICKY_CLASS, "System Class", true),
        (sub::ROOT_THREAD_BLOCK, "Thread Block", false),
        (sub::ROOT_MONITOR_USED, "Monitor Used", true),
        (sub::ROOT_THREAD_OBJECT, "Thread Object", true),
        (sub::ROOT_INTERNED_STRING, "Interned String", true),
        (sub::ROOT_FINALIZING, "Finalizing", true),
        (sub::ROOT_DEBUGGER, "Debugger", true),
        (sub::ROOT_REFERENCE_CLEANUP, "Reference Cleanup", true),
        (sub::ROOT_VM_INTERNAL, "VM Internal", true),
        (sub::ROOT_JNI_MONITOR, "JNI Monitor", true),
        (sub::ROOT_UNKNOWN, "Unknown", false),
        (LATE_ROOT, "Class (unreferenced)", true),
        (CLASS_ROOT, "System Class", true),
        (
            STRIPPED_HOLDER_ROOT,
            "Held by a stripped zygote/image object",
            true,
        ),
        (sub::ROOT_UNREACHABLE, "Unknown", true),
    ];
    for (tag, name, first) in table {
        assert_eq!(
            (root_name(tag), high_priority(tag)),
            (name, first),
            "tag {tag:#x}"
        );
    }
}

/// A kept path's references: between neighbours, and across its gap from the last node
/// before it to the first left out; without a gap, `cut` and `first_left_out` say nothing.
#[test]
fn a_kept_paths_edges_cross_its_gap_to_the_first_left_out() {
    let cut = Kept {
        nodes: vec![1, 2, 3, 4],
        left_out: 5,
        cut: 2,
        first_left_out: 9,
    };
    assert_eq!(cut.edges().collect::<Vec<_>>(), [(1, 2), (2, 9), (3, 4)]);
    let whole = Kept {
        left_out: 0,
        ..cut.clone()
    };
    assert_eq!(whole.edges().collect::<Vec<_>>(), [(1, 2), (2, 3), (3, 4)]);
    assert_eq!(Kept::default().edges().count(), 0);
}

/// Paths to the first objects of a chain, deepest first, with a walk's entries kept at every
/// object and at every few: each is the path made without the memo, also for the objects
/// within `PATH_HEAD` of the start, whose paths above them keep no entry (an entry holds the
/// top of a path longer than what it keeps).
#[test]
fn a_walks_entries_near_the_start_give_whole_paths() {
    let (ix, bfs, _) = chain_paths();
    for every in [1, 2, 3, 4, 5, 7] {
        let mut memo = Memo {
            every,
            ..Memo::default()
        };
        let ends: Vec<u32> = (0..100u64)
            .rev()
            .map(|i| ix.node(0x1000_0000 + 16 * i).unwrap())
            .collect();
        walk_all(&ix, &bfs, &ends, &mut memo);
    }
}

/// A walk counts each object it passes above the end of a path, keeps an entry at every
/// `every`-th of them (none at the first, which is the caller's, nor within `PATH_HEAD` of
/// the start), and the path's own entry: the memo is the one documented, not one entry an
/// object.
#[test]
fn a_walk_counts_its_steps_and_keeps_an_entry_every_few() {
    let (ix, bfs, _) = chain_paths();
    let node = |i: u64| ix.node(0x1000_0000 + 16 * i).unwrap();
    // The path to node 1000: 1,001 objects, the last PATH_TAIL below the walk, which passes
    // the other 971 (the first, node 970, the caller's entry).
    let mut memo = Memo {
        every: 100,
        ..Memo::default()
    };
    let p = bfs.path_memo(&ix, node(1000), &mut memo);
    assert_eq!(p.left_out, 1001 - (PATH_HEAD + PATH_TAIL) as u64);
    assert_eq!(memo.hops, 971);
    // Entries at 100, 200, …, 900 objects above node 970 (nodes 870, …, 70; the path above
    // node 70 is 71 objects long), and node 970's.
    let mut keys: Vec<u32> = memo.map.keys().copied().collect();
    keys.sort_unstable();
    let want: Vec<u32> = (0..10).map(|k| node(70 + 100 * k)).collect();
    assert_eq!(keys, want);
    // Again through node 1000: no walk; through node 1001, a walk of one step (node 971).
    bfs.path_memo(&ix, node(1000), &mut memo);
    bfs.path_memo(&ix, node(1001), &mut memo);
    assert_eq!(memo.hops, 972);
}

/// A root's tag is the dump's; a class object no root names starts its path as a class root;
/// any other object reads as an unknown root.
#[test]
fn root_and_start_tags_are_the_dumps_or_a_class_roots() {
    let ix = index_of(&loaded_classes());
    let node = |id: u64| ix.node(id).unwrap();
    let p = shortest(&ix, &ix.roots, &[]);
    let holder = node(HOLDER);
    assert_eq!(p.root_tag(holder), sub::ROOT_JNI_GLOBAL);
    assert_eq!(p.start_tag(&ix, holder), sub::ROOT_JNI_GLOBAL);
    assert_eq!(p.root_tag(node(LOADER)), sub::ROOT_UNKNOWN);
    assert_eq!(p.start_tag(&ix, node(LOADER)), sub::ROOT_UNKNOWN);
    assert_eq!(p.root_tag(node(LIVE_C)), sub::ROOT_UNKNOWN);
    assert_eq!(p.start_tag(&ix, node(LIVE_C)), CLASS_ROOT);
}

/// A walk above the end of a path that meets an object no root reaches (parents no search
/// gives: here cut by hand) finds no path, as does one that runs round a loop.
#[test]
fn a_walk_that_meets_no_root_gives_no_path() {
    let (ix, mut bfs, _) = chain_paths();
    let node = |i: u64| ix.node(0x1000_0000 + 16 * i).unwrap();
    bfs.parent[node(40) as usize] = UNREACHED;
    assert_eq!(bfs.path(&ix, node(100)), Kept::default());
    bfs.parent[node(40) as usize] = node(60);
    assert_eq!(bfs.path(&ix, node(100)), Kept::default());
}

/// What high-priority roots reach is reached from them, however near a transient root holds
/// it; what only a transient root reaches is reached from that; a node listed as several
/// roots keeps its high-priority tag, the smaller of two such.
#[test]
fn high_priority_roots_reach_first_and_name_their_nodes() {
    let (ix, _, _) = chain_paths();
    let node = |i: u64| ix.node(0x1000_0000 + 16 * i).unwrap();
    let root = |i, tag| Root { node: node(i), tag };
    let roots = [
        root(5, sub::ROOT_JAVA_FRAME),
        root(0, sub::ROOT_JNI_LOCAL),
        root(0, sub::ROOT_JNI_GLOBAL),
        root(7, sub::ROOT_JAVA_FRAME),
        root(7, sub::ROOT_THREAD_OBJECT),
        root(7, sub::ROOT_MONITOR_USED),
    ];
    let p = shortest(&ix, &roots, &[]);
    let from = |a: u64, b: u64| (a..=b).map(node).collect::<Vec<_>>();
    assert_eq!(p.path(&ix, node(5)).nodes, from(0, 5));
    assert_eq!(p.path(&ix, node(7)).nodes, from(7, 7));
    assert_eq!(p.root_tag(node(0)), sub::ROOT_JNI_GLOBAL);
    assert_eq!(p.root_tag(node(5)), sub::ROOT_JAVA_FRAME);
    assert_eq!(p.root_tag(node(7)), sub::ROOT_MONITOR_USED);
    let low = shortest(&ix, &[root(5, sub::ROOT_JAVA_FRAME)], &[]);
    assert_eq!(low.path(&ix, node(9)).nodes, from(5, 9));
    assert!(low.path(&ix, node(4)).nodes.is_empty());
}

/// A class whose gate is open from the start (no loader to wait for, or a root) is a class
/// root from the start; one whose gate is reached later is a late root.
#[test]
fn a_class_open_from_the_start_is_a_class_root() {
    let ix = index_of(&loaded_classes());
    let node = |id: u64| ix.node(id).unwrap();
    let late = [
        (node(LIVE_C), UNGATED),
        (node(NEXT_C), node(HOLDER)),
        (node(DEAD_C), node(LOADER)),
    ];
    let p = shortest(&ix, &ix.roots, &late);
    assert_eq!(p.root_tag(node(LIVE_C)), CLASS_ROOT);
    assert_eq!(p.root_tag(node(NEXT_C)), CLASS_ROOT);
    assert_eq!(p.root_tag(node(DEAD_C)), LATE_ROOT);
    assert_eq!(
        p.path(&ix, node(ORPHAN)).nodes,
        [node(DEAD_C), node(ORPHAN)]
    );
}

/// The whole search marks what it reaches in a bitmap and writes the parents after, from its
/// queues ([`reached`]); a search that may stop writes them as it goes. Run whole (an end no
/// root reaches), the second gives the first's parents and tags: with late roots, high- and
/// low-priority roots, and a chain.
#[test]
fn both_ways_of_marking_give_the_same_parents() {
    let check = |ix: &Index, roots: &[Root], late: &[(u32, u32)], lost: u32, what: &str| {
        let whole = shortest(ix, roots, late);
        let stopping = shortest_until(ix, roots, late, &[lost]);
        assert!(stopping.ends.is_empty(), "{what}: the search ran whole");
        assert_eq!(whole.parent[lost as usize], UNREACHED, "{what}");
        assert_eq!(&whole.parent[..], &stopping.parent[..], "{what}: parents");
        assert_eq!(whole.root_tags, stopping.root_tags, "{what}: tags");
        assert!(whole.ends.is_empty());
        let r = reached(ix, roots, late).parents();
        assert_eq!(&r.parent[..], &whole.parent[..], "{what}");
    };
    let ix = index_of(&wide_and_deep());
    check(&ix, &ix.roots, &[], ix.node(LOST).unwrap(), "wide and deep");
    let ix = index_of(&loaded_classes());
    let node = |id: u64| ix.node(id).unwrap();
    let late = crate::late_roots(&ix);
    check(&ix, &ix.roots, &late, node(ORPHAN), "late roots");
    let (ix, roots) = chain_with_roots_of_both_priorities();
    let node = |i: u64| ix.node(0x1000_0000 + 16 * i).unwrap();
    check(&ix, &roots, &[], node(1), "roots of both priorities");
    check(&ix, &roots[..1], &[], node(4), "a low one alone");
}

/// [`chain`]'s index, with a Java frame at its node 5 and a JNI local at its node 7 (low
/// priority), and a JNI global at its node 2 (high).
fn chain_with_roots_of_both_priorities() -> (Index, [Root; 3]) {
    let (ix, _, _) = chain_paths();
    let node = |i: u64| ix.node(0x1000_0000 + 16 * i).unwrap();
    let root = |i, tag| Root { node: node(i), tag };
    let roots = [
        root(5, sub::ROOT_JAVA_FRAME),
        root(7, sub::ROOT_JNI_LOCAL),
        root(2, sub::ROOT_JNI_GLOBAL),
    ];
    (ix, roots)
}

/// A queue's [`Steps`] say where each node it holds came from, whatever each node taken out
/// put in (none, a few, [`u8::MAX`] or more), across many of [`Steps::blocks`]' blocks: read
/// from the front ([`Fifo::each_parent`]) and one at a time ([`Steps::came_from`]), with the
/// sums of every block and with those up to the node's own place.
#[test]
fn steps_say_where_each_node_came_from() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut q = Fifo::with_capacity(0, true, None);
    // Where each node came from, as the queue fills: a start, then what each node taken out
    // puts in (the queue never empties before the last node is taken out).
    let mut from = vec![SUPER];
    q.start(0);
    let mut taken = 0;
    while taken < from.len() && from.len() < 3 * STEP_BLOCK * 2 {
        let k = match next() % 16 {
            0..=5 => 0,
            6..=12 => 1 + next() % 3,
            13 => u8::MAX as u64 - 1 + next() % 3,
            _ => 300 + next() % 700,
        } as usize;
        for _ in 0..k {
            q.v.push(from.len() as u32);
            from.push(taken as u32);
        }
        q.steps.took(k);
        taken += 1;
    }
    // The rest are taken out and put nothing in.
    while taken < from.len() {
        q.steps.took(0);
        taken += 1;
    }
    assert!(q.steps.big.len() > 4 && q.steps.counts.len() > 2 * STEP_BLOCK);
    let mut got = Vec::new();
    q.each_parent(|w, v| got.push((w, v)));
    let want: Vec<(u32, u32)> = (0..from.len() as u32)
        .map(|w| (w, from[w as usize]))
        .collect();
    assert_eq!(got, want);
    let blocks = q.steps.blocks(usize::MAX);
    for (k, &f) in from[1..].iter().enumerate() {
        assert_eq!(q.steps.came_from(&blocks, k), f as usize, "node {}", k + 1);
        // The sums up to the node's own place (here, its number) are enough.
        let upto = q.steps.blocks(k + 1);
        assert!(upto.len() <= (k + 1) / STEP_BLOCK + 1);
        assert_eq!(q.steps.came_from(&upto, k), f as usize, "node {}", k + 1);
    }
    assert!(q.steps.blocks(1).len() == 1 && q.steps.blocks(STEP_BLOCK).len() == 2);
}

/// The parents read off a whole search for its ends alone give the ends the whole search's
/// paths, keep only the nodes on those paths, and give every node's parents once they would
/// keep more than their bound ([`SPARSE_MIN`] here, on small graphs); an end no root reaches
/// has no path.
#[test]
fn parents_read_for_the_ends_give_their_paths() {
    let check = |ix: &Index, roots: &[Root], late: &[(u32, u32)], ends: &[u32], what: &str| {
        let whole = shortest(ix, roots, late);
        let on_paths: std::collections::HashSet<u32> = ends
            .iter()
            .flat_map(|&v| {
                let mut up = vec![v];
                while let Some(&x) = up.last().filter(|&&x| whole.parent[x as usize] < SUPER) {
                    up.push(whole.parent[x as usize]);
                }
                up
            })
            .filter(|&x| whole.parent[x as usize] != UNREACHED)
            .collect();
        let some = reached(ix, roots, late).paths_to_at_most(ends, on_paths.len());
        let kept = some.sparse.as_ref().expect("the ends' parents alone");
        assert_eq!(kept.len(), on_paths.len(), "{what}");
        let tight = reached(ix, roots, late).paths_to_at_most(ends, on_paths.len() - 1);
        assert!(tight.sparse.is_none(), "{what}");
        assert_eq!(&tight.parent[..], &whole.parent[..], "{what}");
        for p in [&some, &tight] {
            assert_eq!(p.root_tags, whole.root_tags, "{what}");
            for &v in ends {
                assert_eq!(p.path(ix, v), whole.path(ix, v), "{what}: the path to {v}");
            }
        }
    };
    let ix = index_of(&wide_and_deep());
    let node = |id: u64| ix.node(id).unwrap();
    let ends = [
        node(wide_leaf(WIDE - 1)),
        node(deep_node(WIDE - 1)),
        node(deep_node(7)),
        node(LOST),
    ];
    check(&ix, &ix.roots, &[], &ends, "wide and deep");
    // Every end queued (the pass from the front then stops at the last of them).
    let near = [node(deep_node(2)), node(wide_leaf(3)), node(deep_node(1))];
    check(&ix, &ix.roots, &[], &near, "wide and deep, all reached");
    let near_paths = reached(&ix, &ix.roots, &[]).paths_to(&near);
    assert!(near_paths.sparse.is_some_and(|s| s.len() <= SPARSE_MIN));
    // The chain's end has WIDE (above SPARSE_MIN) nodes above it: every node's parents.
    let deep = reached(&ix, &ix.roots, &[]).paths_to(&ends);
    assert!(deep.sparse.is_none());
    assert!(deep.path(&ix, node(LOST)).nodes.is_empty());
    let ix = index_of(&loaded_classes());
    let node = |id: u64| ix.node(id).unwrap();
    let late = crate::late_roots(&ix);
    check(
        &ix,
        &ix.roots,
        &late,
        &[node(ORPHAN), node(LAST)],
        "late roots",
    );
    let (ix, roots) = chain_with_roots_of_both_priorities();
    let node = |i: u64| ix.node(0x1000_0000 + 16 * i).unwrap();
    check(
        &ix,
        &roots,
        &[],
        &[node(1), node(6), node(90)],
        "roots of both priorities",
    );
    check(&ix, &roots, &[], &[node(4), node(3)], "high-priority ends");
    check(
        &ix,
        &roots,
        &[],
        &[node(9), node(6), node(3)],
        "ends of both priorities",
    );
}
