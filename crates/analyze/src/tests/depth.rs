//! One leak, one card (issue 42) however deep the dominator chains: what a leak's object holds
//! is its consequence, and what holds a leak's object is its holder, at any number of levels
//! between them (both were walked at most 4,096 levels up).

use super::*;

/// A HotSpot-style dump of `com.app.Node`s (`next`, `extra`: 32 bytes each) and destroyed
/// `com.app.MainActivity`s (`mChain`), whose objects and roots `heap` writes.
fn node_dump(heap: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new(Format::V102, 8, 0);
    activity_strings(&mut w);
    for (id, t) in [
        (6, "com.app.Node"),
        (7, "next"),
        (8, "mChain"),
        (9, "extra"),
    ] {
        w.utf8(id, t);
    }
    w.load_class(4, 0x40, 6);
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.class_dump(0x10, 0, 0, 8, &[], &[]);
    activity_class(&mut w);
    w.class_dump(0x30, 0x20, 0, 18, &[], &[(8, BasicType::Object)]);
    let fields = [(7, BasicType::Object), (9, BasicType::Object)];
    w.class_dump(0x40, 0x10, 0, 16, &[], &fields);
    for class in [0x10, 0x20, 0x30, 0x40] {
        w.root(sub::ROOT_STICKY_CLASS, class);
    }
    heap(&mut w);
    w.end_segment();
    w.heap_dump_end();
    w.finish()
}

/// `len` Nodes from `head` on, 32 bytes apart, each the `next` of the one before; the last's
/// `next` is `end`, node `i`'s `extra` is `extra(i)`.
fn chain(w: &mut Writer, head: u64, len: u64, end: u64, extra: impl Fn(u64) -> u64) {
    for i in 0..len {
        let next = if i + 1 < len {
            head + 32 * (i + 1)
        } else {
            end
        };
        let mut v = next.to_be_bytes().to_vec();
        v.extend_from_slice(&extra(i).to_be_bytes());
        w.instance(head + 32 * i, 0x40, &v);
    }
}

/// A destroyed MainActivity whose `mChain` is `chain`.
fn destroyed_activity(w: &mut Writer, id: u64, chain: u64) {
    // The Activity's own field first (mChain), then Activity's (mDestroyed, mFinished).
    let mut v = chain.to_be_bytes().to_vec();
    v.extend_from_slice(&[1, 0]);
    w.instance(id, 0x30, &v);
}

/// Chains of `LEN` nodes (`com.app.Node`: `next`, `extra`), 2 MiB `byte[]`s, and:
/// - a JNI global -> chain A -> a destroyed Activity, whose `mChain` -> chain B -> a byte[];
///   B's nodes 1,000, 2,500 and 4,200 hold a byte[] each in `extra`;
/// - a stack frame -> chain C -> a byte[].
///
/// The four byte[]s under the Activity are one consequence of its leak, not a card; A's first
/// node, which retains the leak, is its holder (in `dominators[]`), not a "Large Retained Size"
/// card. C's byte[] is a card of its own, and C's first node, which holds no leak, one too.
#[test]
fn a_leak_holds_its_consequences_and_its_holders_hold_it_however_deep() {
    const LEN: u64 = 5000;
    let (activity, end_b, end_c) = (0x100u64, 0x200u64, 0x300u64);
    let extras = [(1000u64, 0x400u64), (2500, 0x500), (4200, 0x600)];
    let (a, b, c) = (0x10_0000u64, 0x20_0000u64, 0x30_0000u64);
    let bytes = node_dump(|w| {
        for (head, end) in [(a, activity), (b, end_b), (c, end_c)] {
            let extra = |i| match extras.iter().find(|e| e.0 == i) {
                Some(&(_, array)) if head == b => array,
                _ => 0,
            };
            chain(w, head, LEN, end, extra);
        }
        destroyed_activity(w, activity, b);
        for array in [end_b, end_c, 0x400, 0x500, 0x600] {
            w.primitive_array_nodata(array, BasicType::Byte, 2 << 20);
        }
        w.root_jni_global(a, 0x900);
        w.root2(sub::ROOT_JAVA_FRAME, c, 1, 0);
    });
    let cfg = Config {
        array_min_bytes: 1 << 20,
        large_retained_bytes: 1 << 20,
        ..Config::default()
    };
    let r = analyze(Input::Bytes(&bytes), &cfg, serde_json::Value::Null).unwrap();
    let mut cards: Vec<(&str, &str, u64, u64)> = r
        .gc_paths
        .iter()
        .map(|g| {
            let last = g.trace.nodes.last().map_or(0, |n| n.object_id);
            (
                g.leak_reason.as_str(),
                g.class_name.as_str(),
                g.instance_count,
                last,
            )
        })
        .collect();
    cards.sort();
    assert_eq!(
        cards,
        [
            ("Activity Leak", "com.app.MainActivity", 1, activity),
            ("Array Size Over Threshold", "byte[]", 1, end_c),
            ("Large Retained Size", "com.app.Node", 1, c),
        ]
    );
    let g = r.gc_paths.iter().find(|g| g.leak_reason == "Activity Leak");
    let consequences = &g.unwrap().consequences;
    assert_eq!(consequences.len(), 1, "{consequences:?}");
    assert_eq!(consequences[0].class_name, "byte[]");
    assert_eq!(consequences[0].instance_count, 4);
    // A's first node, the leak's holder, retains both chains, four byte[]s and the Activity.
    let holder = r.dominators.iter().max_by_key(|d| d.retained_size).unwrap();
    assert_eq!(holder.class_name, "com.app.Node");
    assert!(holder.retained_size >= 4 * (2 << 20) + 2 * 32 * LEN);
}

/// A trace's objects below its leaking object read "held only through a leaking object" while
/// that object dominates them, however many levels down (the walk stopped at 4,096, and every
/// object past it read "reachable without it too").
///
/// A JNI global -> a destroyed Activity -> `mChain` -> a chain of 5,000 Nodes -> a byte[]; a
/// second JNI global -> a longer chain -> the chain's Node 4,995. The byte[]'s card has its path
/// through the Activity (the shorter), which holds the chain's first 4,995 Nodes alone, and not
/// the last five.
#[test]
fn a_leaking_object_holds_alone_what_it_dominates_however_deep() {
    const LEN: u64 = 5000;
    let (activity, array) = (0x100u64, 0x200u64);
    let (b, y) = (0x10_0000u64, 0x30_0000u64);
    let bytes = node_dump(|w| {
        chain(w, b, LEN, array, |_| 0);
        chain(w, y, LEN + 10, b + 32 * (LEN - 5), |_| 0);
        destroyed_activity(w, activity, b);
        w.primitive_array_nodata(array, BasicType::Byte, 2 << 20);
        w.root_jni_global(activity, 0x900);
        w.root_jni_global(y, 0x901);
    });
    let cfg = Config {
        array_min_bytes: 1 << 20,
        ..Config::default()
    };
    let r = analyze(Input::Bytes(&bytes), &cfg, serde_json::Value::Null).unwrap();
    let g = r
        .gc_paths
        .iter()
        .find(|g| g.class_name == "byte[]")
        .unwrap();
    let t = &g.trace;
    let left_out = t.left_out.as_ref().expect("a long path comes cut");
    assert_eq!(left_out.steps as usize + t.nodes.len(), LEN as usize + 2);
    assert_eq!(t.nodes[0].object_id, activity);
    assert_eq!(t.nodes[0].status, trace::Status::Leaking);
    let (array_node, nodes) = t.nodes[1..].split_last().unwrap();
    for n in nodes {
        assert_eq!(n.class_name, "com.app.Node");
        let alone = n.object_id < b + 32 * (LEN - 5);
        let reason = match alone {
            true => "held only through a leaking object",
            false => "below a leaking object, reachable without it too",
        };
        assert_eq!(
            (n.status, n.status_reason.as_str()),
            (trace::Status::Leaking, reason),
            "node {:#x}",
            n.object_id
        );
    }
    assert_eq!(array_node.object_id, array);
}
