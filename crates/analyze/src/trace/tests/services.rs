//! "Service not held by ActivityThread" (`index::flag_services`, issue 42 item 6) on dumps
//! built with the `hprof` writer: a running service (in `ActivityThread.mServices`, an
//! `ArrayMap` whose `mArray` holds it) is no leak and reads NOT_LEAKING on a path; a destroyed
//! one (in no map of ActivityThread) is a "Service Leak", also when it is watched; without an
//! ActivityThread no check is made; the stripped twin agrees.

use super::inspect_edges::{
    activity, edge_dump_arrays, Cls, E_HOLDER, E_OBJECT, E_OWN, E_STATICS, F,
};
use super::verdicts::{kwr_at, reference_classes_at};
use super::*;

const THREAD: u64 = E_OWN;
const SERVICE: u64 = E_OWN + 8;
const MINE: u64 = E_OWN + 0x10;
const ARRAY_MAP: u64 = E_OWN + 0x18;
const OBJECTS: u64 = E_OWN + 0x20;
/// The reference classes (`reference_classes_at`), for a LeakCanary watch.
const REFS: u64 = E_OWN + 0x40;

fn classes() -> Vec<Cls> {
    use BasicType::*;
    vec![
        (
            THREAD,
            "android.app.ActivityThread",
            E_OBJECT,
            vec![("mServices", Object), ("mActivities", Object)],
        ),
        (SERVICE, "android.app.Service", E_OBJECT, vec![]),
        (
            MINE,
            "com.app.SyncService",
            SERVICE,
            vec![("mBinder", Object)],
        ),
        (
            ARRAY_MAP,
            "android.util.ArrayMap",
            E_OBJECT,
            vec![("mArray", Object)],
        ),
        (OBJECTS, "java.lang.Object[]", E_OBJECT, vec![]),
    ]
    .into_iter()
    .chain(reference_classes_at(REFS))
    .collect()
}

const RUNNING: u64 = 0x5000;
const GONE: u64 = 0x5010;
/// A service held by a map of ActivityThread's that is not a map of services' parts: through
/// a record (as activities are), so not "held".
const IN_RECORD: u64 = 0x5020;
const DEAD: u64 = 0x6000;

/// The dump, with or without the ActivityThread (`sThread`).
fn dump(with_thread: bool) -> Vec<u8> {
    dump_watching(with_thread, &[])
}

/// [`dump`], with a LeakCanary `KeyedWeakReference` (retained) to each of `watched`, held by
/// `sWatches` (neither when nothing is watched).
fn dump_watching(with_thread: bool, watched: &[u64]) -> Vec<u8> {
    let mut statics: Vec<(&str, u64)> = if with_thread {
        vec![("sThread", 0x4000), ("sAll", 0x4100)]
    } else {
        vec![("sAll", 0x4100)]
    };
    let mut instances = vec![
        (0x4010, ARRAY_MAP, vec![F::L(0x4020)]),
        (0x4030, ARRAY_MAP, vec![F::L(0x4040)]),
        (0x4050, E_HOLDER, vec![F::L(IN_RECORD)]),
        // The running service holds a destroyed activity: its path passes the service.
        (RUNNING, MINE, vec![F::L(DEAD)]),
        (GONE, MINE, vec![F::L(0)]),
        (IN_RECORD, MINE, vec![F::L(0)]),
        activity(DEAD, true, 0),
    ];
    if with_thread {
        instances.push((0x4000, THREAD, vec![F::L(0x4010), F::L(0x4030)]));
    }
    let mut arrays = vec![
        // mServices: token, service.
        (0x4020, OBJECTS, vec![0x4001, RUNNING]),
        // mActivities: token, record (a Holder) -> service.
        (0x4040, OBJECTS, vec![0x4002, 0x4050]),
        // The app's own list of all three.
        (0x4100, OBJECTS, vec![RUNNING, GONE, IN_RECORD]),
    ];
    if !watched.is_empty() {
        let refs: Vec<u64> = (0..watched.len() as u64).map(|k| 0x4300 + 16 * k).collect();
        for (&r, &w) in refs.iter().zip(watched) {
            instances.push(kwr_at(REFS, r, w, 2000));
        }
        statics.push(("sWatches", 0x4200));
        arrays.push((0x4200, OBJECTS, refs));
    }
    edge_dump_arrays(&classes(), &[(E_STATICS, &statics)], &instances, &arrays)
}

fn service_leaks(r: &Report) -> Vec<u64> {
    let mut v: Vec<u64> = r
        .leak_objects
        .iter()
        .filter(|o| o.leak_reason == "Service Leak")
        .map(|o| o.object_id)
        .collect();
    v.sort();
    v
}

#[test]
fn a_service_no_activity_thread_holds_is_leaking() {
    let full = dump(true);
    let (mini, _) = strip_bytes(&full, Level::Arrays).unwrap();
    for bytes in [&full, &mini] {
        let r = report(bytes);
        assert_eq!(service_leaks(&r), [GONE, IN_RECORD]);
        let last = path_to(&r, GONE).trace.nodes.last().unwrap().clone();
        assert_eq!(
            (last.status, last.status_reason.as_str()),
            (Status::Leaking, "not held by ActivityThread (destroyed)")
        );
        let info = r
            .class_infos
            .iter()
            .find(|c| c.class_name == "com.app.SyncService")
            .unwrap();
        assert_eq!((info.instance_count, info.leak_instance_count), (3, 2));
        let rows = rows(path_to(&r, DEAD));
        assert_eq!(
            rows[2],
            row(
                "com.app.SyncService",
                NOT,
                "held by ActivityThread (the service runs)",
                Some("mBinder"),
                true
            )
        );
    }
}

#[test]
fn without_an_activity_thread_no_service_is_judged() {
    let r = report(&dump(false));
    assert_eq!(service_leaks(&r), Vec::<u64>::new());
    // A watched service is a watched object, not a destroyed service: nothing checked it.
    let r = report(&dump_watching(false, &[GONE]));
    assert_eq!(service_leaks(&r), Vec::<u64>::new());
    let last = path_to(&r, GONE).trace.nodes.last().unwrap().clone();
    assert_eq!(
        (last.status, last.status_reason.as_str()),
        (
            Status::Leaking,
            "Watched Object Retained: referent of a KeyedWeakReference"
        )
    );
}
