//! "Service not held by ActivityThread" (issue 42, item 6): the framework keeps each service it
//! runs in `ActivityThread.mServices` (a map from its token to the `android.app.Service`) from
//! its creation until `onDestroy`. A Service the dump holds that no map of an ActivityThread
//! does is destroyed (or was never run by the framework): a leak, "Service Leak".
//!
//! Read from the graph (instance fields survive every strip, so a stripped dump gives the same
//! answer): the Service instances reached from an `android.app.ActivityThread` through at most
//! [`DEPTH`] references, each through an object of a map's parts ([`MAP_PARTS`]: `ArrayMap` and
//! its `Object[]`, `HashMap`, its entries and their arrays). The other maps of ActivityThread
//! hold records (activities, providers), not services. No check is made (nothing flagged) when
//! the dump holds no ActivityThread, or when the walk passes [`MAX_VISITED`] objects.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use std::collections::HashSet;

/// The classes a map of services is made of.
const MAP_PARTS: [&str; 8] = [
    "android.util.ArrayMap",
    "java.lang.Object[]",
    "java.util.HashMap",
    "java.util.HashMap$HashMapEntry",
    "java.util.HashMap$HashMapEntry[]",
    "java.util.HashMap$Node",
    "java.util.HashMap$Node[]",
    "java.util.HashMap$TreeNode",
];

/// ActivityThread -> map -> its array -> (an entry ->) the Service.
const DEPTH: usize = 4;

/// Objects the walk may pass before it gives up (no check is made then).
pub(crate) const MAX_VISITED: usize = 1 << 20;

const SERVICE: &str = "android.app.Service";

/// The finding's reason.
pub(crate) const SERVICE_LEAK: &str = "Service Leak";

/// Flags each Service instance that no ActivityThread holds (see the module documentation) and
/// keeps the held ones in `ix.held_services` (sorted).
pub(crate) fn flag_services(ix: &mut Index) {
    let is_service: Vec<bool> = (0..ix.classes.len() as u32)
        .map(|c| ix.classes[c as usize].instances > 0 && ix.is_subclass(c, SERVICE))
        .collect();
    if !is_service.contains(&true) {
        return;
    }
    let is_thread: Vec<bool> = (0..ix.classes.len() as u32)
        .map(|c| ix.is_subclass(c, "android.app.ActivityThread"))
        .collect();
    let is_part: Vec<bool> = ix
        .classes
        .iter()
        .map(|c| MAP_PARTS.contains(&c.name.as_str()))
        .collect();
    let mut threads = Vec::new();
    let mut services = Vec::new();
    for (v, &c) in ix.class_of.iter().enumerate() {
        if is_thread.get(c as usize) == Some(&true) {
            threads.push(v as u32);
        } else if is_service.get(c as usize) == Some(&true) {
            services.push(v as u32);
        }
    }
    if threads.is_empty() {
        return;
    }
    let Some(mut held) = held_by(ix, &threads, &is_service, &is_part) else {
        return;
    };
    held.sort_unstable();
    held.dedup();
    for s in services {
        if held.binary_search(&s).is_err() {
            ix.flags.push(Flag {
                node: s,
                reason: SERVICE_LEAK.into(),
                detail: "not held by ActivityThread".into(),
            });
        }
    }
    ix.held_services = held;
}

/// The services reached from `threads` through map parts; `None` past [`MAX_VISITED`].
fn held_by(ix: &Index, threads: &[u32], is_service: &[bool], is_part: &[bool]) -> Option<Vec<u32>> {
    let mut held = Vec::new();
    let mut seen: HashSet<u32> = threads.iter().copied().collect();
    let mut frontier = threads.to_vec();
    for _ in 0..DEPTH {
        let mut next = Vec::new();
        for &v in &frontier {
            for &w in ix.succ(v) {
                let c = ix.class_of[w as usize] as usize;
                if is_service.get(c) == Some(&true) {
                    held.push(w);
                } else if is_part.get(c) == Some(&true) && seen.insert(w) {
                    if seen.len() > MAX_VISITED {
                        return None;
                    }
                    next.push(w);
                }
            }
        }
        frontier = next;
    }
    Some(held)
}
