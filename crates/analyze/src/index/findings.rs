//! The detectors' findings in the report of what fits (`crate::budget::reduced`): what an
//! object shows alone, without the graph, found by a streaming pass over the dump after the
//! census, with the census's classes (their layouts and roles: `fields::role`) and the
//! detectors' own rules (`pass2::role_finding`, the large arrays' threshold as `finish_sizes`
//! applies it, `flag_rank`).
//!
//! Found: destroyed Activities, Fragments detached from their manager, Bitmaps of the policy's
//! pixels or more, arrays of `Config::array_min_bytes` or more, and the objects LeakCanary's
//! watcher judged retained (their referents: a second pass over the dump finds their classes,
//! only if some were watched). Not found: what needs the graph (a running Service no
//! ActivityThread holds, the Window and NativeAllocationRegistry counts, which count live
//! objects; retained sizes; paths). Each finding's object is listed whether reachable or not
//! (the full analysis lists reachable ones only), and the findings a leak's object holds alone
//! are not folded into the leak (the full report's `consequences`).
//!
//! Invariants:
//! - Memory: the census's classes and strings (the index `ix`, without objects), at most
//!   [`MAX_LEAK_OBJECTS`] findings and as many watched referents; nothing per object. Findings
//!   past the cap are counted (`left`), in file order.
//! - One finding per object, the best by `flag_rank` (as `one_flag_per_node`).
//! - Sizes and class names are the full analysis's (the census's conventions, `sizes::kind`).
#![forbid(unsafe_code)]

use super::sizes::{align, kind, vm_size, Kind};
use super::*;
use crate::report::{LeakObject, MAX_LEAK_OBJECTS};
use std::collections::HashSet;

/// The findings pass's visitor (see the module documentation).
struct Pass<'a> {
    ix: &'a Index,
    conv: Conventions,
    android: bool,
    limits: IndexLimits,
    /// Findings in file order, at most [`MAX_LEAK_OBJECTS`]; `left` counts the others.
    found: Vec<LeakObject>,
    left: u64,
    /// The watched referents (at most [`MAX_LEAK_OBJECTS`]; `watched_left` counts the others).
    watched: HashSet<u64>,
    watched_left: u64,
    /// The second pass: the watched referents sought, sorted (their objects become findings).
    want: Vec<u64>,
}

/// The findings of a dump (see the module documentation): at most [`MAX_LEAK_OBJECTS`]
/// `leakObjects[]` entries, without retained size or signature, and how many more were found.
pub struct Found {
    pub objects: Vec<LeakObject>,
    pub left: u64,
}

impl Pass<'_> {
    fn push(&mut self, id: u64, class_name: String, size: u64, reason: &str, detail: String) {
        if self.found.len() >= MAX_LEAK_OBJECTS {
            self.left += 1;
            return;
        }
        self.found.push(LeakObject {
            class_name,
            size,
            object_id: id,
            leak_reason: reason.into(),
            ext_detail: detail,
            ..LeakObject::default()
        });
    }

    /// An object of class `ci` and raw size `raw` (its field data, or its array's bytes with
    /// the header): its shallow size as the full analysis counts it.
    fn size(&self, ci: u32, raw: u64) -> u64 {
        let id_size = self.ix.header.id_size;
        match kind(self.ix, ci, &self.conv, self.android) {
            Kind::Instance(s) if s > 0 => s,
            Kind::Instance(_) => align(self.conv.object_header as u64 + raw, 8),
            k => vm_size(k, raw, &self.conv, id_size, self.android) as u64,
        }
    }

    /// In the second pass: the object `id` (class `ci`, raw size `raw`) if it is watched.
    fn sought(&mut self, id: u64, ci: u32, raw: u64) {
        if self.want.binary_search(&id).is_ok() {
            let name = self.ix.classes[ci as usize].name.clone();
            let size = self.size(ci, raw);
            self.push(id, name, size, WATCHED_FINDING, WATCHED_DETAIL.into());
        }
    }

    fn array(&mut self, id: u64, ci: u32, raw: u64, detail: impl FnOnce() -> String) {
        let size = self.size(ci, raw);
        if size >= self.limits.array_min_bytes {
            let name = self.ix.classes[ci as usize].name.clone();
            self.push(id, name, size, ARRAY_FINDING, detail());
        }
    }
}

impl Visitor for Pass<'_> {
    fn sub(&mut self, _: u64, s: &Sub<'_>, _: &[u8]) -> Result<(), String> {
        let id_size = self.ix.header.id_size;
        let second = !self.want.is_empty();
        match *s {
            Sub::Class(ref c) if second && self.want.binary_search(&c.id).is_ok() => {
                let ix = self.ix;
                let Some(k) = ix.class_by_id(c.id) else {
                    return Ok(());
                };
                let cl = &ix.classes[k as usize];
                let r = self.conv.reference_size as u64;
                let bytes = cl.static_prim_bytes as u64 + cl.statics.len() as u64 * r;
                let name = format!("class {}", cl.name);
                self.push(
                    c.id,
                    name,
                    align(bytes, 8),
                    WATCHED_FINDING,
                    WATCHED_DETAIL.into(),
                );
            }
            Sub::Instance {
                id, class_id, data, ..
            } => {
                let ci = self.ix.class_or_unknown(class_id);
                if second {
                    self.sought(id, ci, data.len() as u64);
                    return Ok(());
                }
                let ix = self.ix;
                let cl = &ix.classes[ci as usize];
                let pixels = self.limits.bitmap_min_pixels;
                match role_finding(cl.role, data, id_size, pixels) {
                    None => {}
                    Some(RoleFinding::Flag(reason, detail)) => {
                        let (name, size) = (cl.name.clone(), self.size(ci, data.len() as u64));
                        self.push(id, name, size, reason, detail);
                    }
                    Some(RoleFinding::Watched(r)) => {
                        if self.watched.len() < MAX_LEAK_OBJECTS {
                            self.watched.insert(r);
                        } else if !self.watched.contains(&r) {
                            self.watched_left += 1;
                        }
                    }
                }
            }
            Sub::ObjectArray {
                id, len, class_id, ..
            } => {
                let ci = self.ix.class_or_unknown(class_id);
                let raw = array_bytes(len, id_size, id_size);
                match second {
                    true => self.sought(id, ci, raw),
                    false => {
                        let ix = self.ix;
                        let name = &ix.classes[ci as usize].name;
                        self.array(id, ci, raw, || format!("{name} of {len}"));
                    }
                }
            }
            Sub::PrimitiveArray { id, len, ty, .. } => {
                let ci = self.ix.prim_base + prim_index(ty) as u32;
                let raw = array_bytes(len, ty.size(id_size), id_size);
                match second {
                    true => self.sought(id, ci, raw),
                    false => self.array(id, ci, raw, || format!("{} of {len}", prim_name(ty))),
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// The findings of `input` (see the module documentation), with the census's classes `ix`
/// and conventions `conv`.
pub(crate) fn findings(
    input: &Input<'_>,
    ix: &Index,
    conv: Conventions,
    limits: IndexLimits,
) -> Result<Found, crate::Error> {
    let mut p = Pass {
        ix,
        conv,
        android: conv.vm == "Android",
        limits,
        found: Vec::new(),
        left: 0,
        watched: HashSet::new(),
        watched_left: 0,
        want: Vec::new(),
    };
    input.pass_cold(&mut p)?;
    if p.watched.is_empty() {
        return Ok(Found {
            objects: p.found,
            left: p.left,
        });
    }
    // The watched referents: their objects, found by a second pass (one finding per object).
    let first = std::mem::take(&mut p.found);
    let (left, watched_left) = (p.left, p.watched_left);
    p.want = p.watched.drain().collect();
    p.want.sort_unstable();
    p.left = 0;
    input.pass_cold(&mut p)?;
    let mut objects = first;
    let at: HashMap<u64, usize> = (objects.iter().enumerate())
        .map(|(i, o)| (o.object_id, i))
        .collect();
    let mut more = 0u64;
    for w in p.found {
        match at.get(&w.object_id) {
            Some(&i) if flag_rank(&objects[i].leak_reason) <= flag_rank(&w.leak_reason) => {}
            Some(&i) => objects[i] = w,
            None if objects.len() < MAX_LEAK_OBJECTS => objects.push(w),
            None => more += 1,
        }
    }
    Ok(Found {
        objects,
        left: left + watched_left + p.left + more,
    })
}

#[cfg(test)]
mod tests {
    use crate::report::{LeakObject, MAX_LEAK_OBJECTS};
    use crate::tests::full_and_reduced;
    use crate::{analyze, Config, Input};
    use hprof::writer::Writer;
    use hprof::{sub, tag, BasicType, Format};

    /// Each entry's object, reason, class, detail and shallow size, sorted.
    fn named(v: &[LeakObject]) -> Vec<(u64, String, String, String, u64)> {
        let mut v: Vec<_> = (v.iter())
            .map(|o| {
                let (r, c, d) = (&o.leak_reason, &o.class_name, &o.ext_detail);
                (o.object_id, r.clone(), c.clone(), d.clone(), o.size)
            })
            .collect();
        v.sort();
        v
    }

    /// A dump (1.0.3, 4-byte ids) whose statics hold, each alone: a destroyed Activity 0x100 (also
    /// watched), a live one 0x120, a detached Fragment 0x140, a Bitmap of 2000x1000 0x400 and one
    /// of 10x10 0x410, a byte[] of 300,000 0x500, an object watched and judged retained 0x600
    /// (listed before its KeyedWeakReference), one watched not yet judged 0x610, and an Object[]
    /// holding the three KeyedWeakReferences (0x800, 0x810, 0x820).
    fn findings_dump() -> Vec<u8> {
        let mut w = Writer::new(Format::V103, 4, 0);
        let names = [
            "java.lang.Object",
            "android.app.Activity",
            "com.app.MainActivity",
            "mDestroyed",
            "mFinished",
            "com.app.Leaks",
            "android.graphics.Bitmap",
            "mWidth",
            "mHeight",
            "java.lang.ref.Reference",
            "referent",
            "java.lang.ref.WeakReference",
            "leakcanary.KeyedWeakReference",
            "retainedUptimeMillis",
            "com.app.Thing",
            "java.lang.Object[]",
            "sActivity",
            "sLive",
            "sBitmap",
            "sSmall",
            "sArray",
            "sThing",
            "sWaiting",
            "sRefs",
            "androidx.fragment.app.Fragment",
            "mFragmentManager",
            "mCalled",
            "sFragment",
        ];
        for (i, t) in names.iter().enumerate() {
            w.utf8(i as u64 + 1, t);
        }
        // Classes 0x10.. by their names' order (the classes among them).
        let classes = [(1, 0x10), (2, 0x20), (3, 0x30), (6, 0x40), (7, 0x50)];
        let more = [
            (10, 0x60),
            (12, 0x70),
            (13, 0x80),
            (15, 0x90),
            (16, 0xA0),
            (25, 0xB0),
        ];
        for (serial, &(name, id)) in classes.iter().chain(&more).enumerate() {
            w.load_class(serial as u32 + 1, id, name);
        }
        w.segment(tag::HEAP_DUMP_SEGMENT);
        let (obj, int, long, boolean) = (
            BasicType::Object,
            BasicType::Int,
            BasicType::Long,
            BasicType::Boolean,
        );
        w.class_dump(0x10, 0, 0, 8, &[], &[]);
        w.class_dump(0x20, 0x10, 0, 10, &[], &[(4, boolean), (5, boolean)]);
        w.class_dump(0x30, 0x20, 0, 10, &[], &[]);
        let statics: Vec<(u64, BasicType, Vec<u8>)> = [
            (17, 0x100u32),
            (18, 0x120),
            (19, 0x400),
            (20, 0x410),
            (21, 0x500),
            (22, 0x600),
            (23, 0x610),
            (24, 0x700),
            (28, 0x140),
        ]
        .iter()
        .map(|&(n, v)| (n, obj, v.to_be_bytes().to_vec()))
        .collect();
        w.class_dump(0x40, 0x10, 0, 8, &statics, &[]);
        w.class_dump(0x50, 0x10, 0, 16, &[], &[(8, int), (9, int)]);
        w.class_dump(0x60, 0x10, 0, 12, &[], &[(11, obj)]);
        w.class_dump(0x70, 0x60, 0, 12, &[], &[]);
        w.class_dump(0x80, 0x70, 0, 20, &[], &[(14, long)]);
        w.class_dump(0x90, 0x10, 0, 8, &[], &[]);
        w.class_dump(0xA0, 0x10, 0, 8, &[], &[]);
        w.class_dump(0xB0, 0x10, 0, 13, &[], &[(26, obj), (27, boolean)]);
        w.instance(0x100, 0x30, &[1, 0]);
        w.instance(0x120, 0x30, &[0, 0]);
        // A Fragment detached from its manager (null) after its onDestroy (mCalled).
        w.instance(0x140, 0xB0, &[0, 0, 0, 0, 1]);
        let bitmap = |w: &mut Writer, id: u64, x: u32, y: u32| {
            let v: Vec<u8> = x.to_be_bytes().into_iter().chain(y.to_be_bytes()).collect();
            w.instance(id, 0x50, &v);
        };
        bitmap(&mut w, 0x400, 2000, 1000);
        bitmap(&mut w, 0x410, 10, 10);
        w.primitive_array_nodata(0x500, BasicType::Byte, 300_000);
        w.instance(0x600, 0x90, &[]);
        w.instance(0x610, 0x90, &[]);
        // KeyedWeakReference: its own field (retainedUptimeMillis), then Reference's referent.
        for (id, retained, referent) in [
            (0x800, 5i64, 0x600u32),
            (0x810, 7, 0x100),
            (0x820, -1, 0x610),
        ] {
            let v: Vec<u8> = retained
                .to_be_bytes()
                .into_iter()
                .chain(referent.to_be_bytes())
                .collect();
            w.instance(id, 0x80, &v);
        }
        w.object_array(0x700, 0xA0, &[0x800, 0x810, 0x820]);
        for c in [
            0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0,
        ] {
            w.root(sub::ROOT_STICKY_CLASS, c);
        }
        w.end_segment();
        w.heap_dump_end();
        w.finish()
    }

    /// Issue 43: the report of what fits lists the findings the full report lists, by object,
    /// reason, class, detail and shallow size (without retained size or signature), and no
    /// longer says it leaves `leakObjects` out.
    #[test]
    fn the_report_of_what_fits_lists_the_findings_of_objects_alone() {
        let (full, small) = full_and_reduced(&findings_dump());
        let want = named(&full.leak_objects);
        let ids: Vec<(u64, &str)> = (want.iter()).map(|o| (o.0, o.1.as_str())).collect();
        assert_eq!(
            ids,
            [
                (0x100, "Activity Leak"),
                (0x140, "Fragment Leak"),
                (0x400, "Bitmap Size Over Threshold"),
                (0x500, "Array Size Over Threshold"),
                (0x600, "Watched Object Retained"),
            ],
            "{:?}",
            full.leak_objects
        );
        assert_eq!(named(&small.leak_objects), want);
        for o in &small.leak_objects {
            assert_eq!((o.retained_size, o.signature.as_str()), (0, ""), "{o:?}");
        }
        assert_eq!(small.analysis.left_out.leak_objects, 0);
        let b = small.analysis.budget.unwrap();
        assert!(!b.left_out.iter().any(|s| s == "leakObjects"), "{b:?}");
        assert!(
            b.left_out.iter().any(|s| s.contains("retainedSize")),
            "{b:?}"
        );
        assert!(b.left_out.iter().any(|s| s.starts_with("gcPaths")), "{b:?}");
        assert!(
            b.left_out.iter().any(|s| s.starts_with("dominators")),
            "{b:?}"
        );
    }

    /// Past [`MAX_LEAK_OBJECTS`] findings, the report of what fits lists that many and counts
    /// the others in `analysis.leftOut.leakObjects`, as the full report does.
    #[test]
    fn the_findings_of_the_report_of_what_fits_are_capped_and_counted() {
        let (full, small) = full_and_reduced(&destroyed_activities(MAX_LEAK_OBJECTS as u64 + 5));
        assert_eq!(full.leak_objects.len(), MAX_LEAK_OBJECTS);
        assert_eq!(small.leak_objects.len(), MAX_LEAK_OBJECTS);
        assert_eq!(full.analysis.left_out.leak_objects, 5);
        assert_eq!(small.analysis.left_out.leak_objects, 5);
        assert!(small
            .leak_objects
            .iter()
            .all(|o| o.leak_reason == "Activity Leak"));
    }

    /// `n` destroyed Activities of one class, each held by a JNI global.
    fn destroyed_activities(n: u64) -> Vec<u8> {
        let mut w = Writer::new(Format::V102, 8, 0);
        crate::tests::activity_strings(&mut w);
        crate::tests::destroyed_activities_heap(w, n)
    }

    /// The full report's suspects past `max_suspects_per_class` of one reason and class get no
    /// path, but are counted: in `analysis.leftOut.leakObjects` and in their class's
    /// `leakInstanceCount` (they were dropped uncounted before).
    #[test]
    fn suspects_past_the_per_class_cap_are_counted() {
        let cfg = Config {
            max_suspects_per_class: 10,
            ..Config::default()
        };
        let r = analyze(
            Input::Bytes(&destroyed_activities(25)),
            &cfg,
            serde_json::Value::Null,
        )
        .unwrap();
        assert_eq!(r.leak_objects.len(), 10);
        assert_eq!(r.gc_paths.iter().map(|g| g.instance_count).sum::<u64>(), 10);
        assert_eq!(r.analysis.left_out.leak_objects, 15);
        let info = r
            .class_infos
            .iter()
            .find(|c| c.class_name == "com.app.MainActivity");
        assert_eq!(
            info.map(|c| c.leak_instance_count),
            Some(25),
            "{:?}",
            r.class_infos
        );
    }

    /// The report of what fits only (the budget is too small for the whole analysis).
    fn reduced(bytes: &[u8]) -> crate::report::Report {
        let cfg = Config {
            budget_bytes: crate::budget::FIXED_BYTES - 1,
            ..Config::default()
        };
        let r = analyze(Input::Bytes(bytes), &cfg, serde_json::Value::Null).unwrap();
        assert!(r.analysis.budget.is_some());
        r
    }

    /// The strings and classes of a KeyedWeakReference (`java.lang.ref.Reference` 0x60 with its
    /// `referent`, `WeakReference` 0x70, `leakcanary.KeyedWeakReference` 0x80 with its
    /// `retainedUptimeMillis`), names 6 to 10, classes loaded as serials 4 to 6.
    fn kwr_strings(w: &mut Writer) {
        let names = [
            "java.lang.ref.Reference",
            "referent",
            "java.lang.ref.WeakReference",
            "leakcanary.KeyedWeakReference",
            "retainedUptimeMillis",
        ];
        for (i, t) in names.iter().enumerate() {
            w.utf8(6 + i as u64, t);
        }
        w.load_class(4, 0x60, 6);
        w.load_class(5, 0x70, 8);
        w.load_class(6, 0x80, 9);
    }

    /// The class dumps of [`kwr_strings`]'s classes (superclass `java.lang.Object` 0x10).
    fn kwr_classes(w: &mut Writer) {
        w.class_dump(0x60, 0x10, 0, 12, &[], &[(7, BasicType::Object)]);
        w.class_dump(0x70, 0x60, 0, 12, &[], &[]);
        w.class_dump(0x80, 0x70, 0, 20, &[], &[(10, BasicType::Long)]);
    }

    /// A KeyedWeakReference `id` judged retained, its referent `referent` (`id_size`-byte ids).
    fn kwr(w: &mut Writer, id: u64, referent: u64, id_size: usize) {
        let mut v = 5i64.to_be_bytes().to_vec();
        v.extend_from_slice(&referent.to_be_bytes()[8 - id_size..]);
        w.instance(id, 0x80, &v);
    }

    /// A dump (1.0.3, 4-byte ids) whose watched referents are each of another kind: the class
    /// `com.app.Leaks` 0x40 (statics: three references and a long), a `java.lang.Object[]` 0x500
    /// of 65,536 (a large array too), and an object 0x600 of a class the dump lacks (5 bytes of
    /// fields); each held by a static of 0x40.
    fn watched_kinds_dump() -> Vec<u8> {
        let mut w = Writer::new(Format::V103, 4, 0);
        w.utf8(1, "java.lang.Object");
        w.load_class(1, 0x10, 1);
        kwr_strings(&mut w);
        for (i, t) in [
            "com.app.Leaks",
            "java.lang.Object[]",
            "sA",
            "sB",
            "sC",
            "sD",
        ]
        .iter()
        .enumerate()
        {
            w.utf8(11 + i as u64, t);
        }
        w.load_class(7, 0x40, 11);
        w.load_class(8, 0xA0, 12);
        w.segment(tag::HEAP_DUMP_SEGMENT);
        w.class_dump(0x10, 0, 0, 8, &[], &[]);
        kwr_classes(&mut w);
        let obj = |v: u32| v.to_be_bytes().to_vec();
        let statics: Vec<(u64, BasicType, Vec<u8>)> = vec![
            (13, BasicType::Object, obj(0x500)),
            (14, BasicType::Object, obj(0x600)),
            (15, BasicType::Object, obj(0x700)),
            (16, BasicType::Long, 7i64.to_be_bytes().to_vec()),
        ];
        w.class_dump(0x40, 0x10, 0, 8, &statics, &[]);
        w.class_dump(0xA0, 0x10, 0, 8, &[], &[]);
        w.object_array(0x500, 0xA0, &vec![0; 65_536]);
        w.instance(0x600, 0x999, &[1, 2, 3, 4, 5]);
        for (id, referent) in [(0x800, 0x40), (0x810, 0x500), (0x820, 0x600)] {
            kwr(&mut w, id, referent, 4);
        }
        w.object_array(0x700, 0xA0, &[0x800, 0x810, 0x820]);
        for c in [0x10, 0x40, 0x60, 0x70, 0x80, 0xA0] {
            w.root(sub::ROOT_STICKY_CLASS, c);
        }
        w.end_segment();
        w.heap_dump_end();
        w.finish()
    }

    /// A watched class object is found as `class NAME` of its statics' size (a long and three
    /// references: 8 + 3 x 4 bytes, aligned); a watched large array is one finding, a watched
    /// one; a watched object of a missing class is the header and its field bytes, aligned; all
    /// as the full report lists them.
    #[test]
    fn watched_class_objects_arrays_and_objects_of_missing_classes_are_found() {
        let (full, small) = full_and_reduced(&watched_kinds_dump());
        assert_eq!(named(&small.leak_objects), named(&full.leak_objects));
        let watched = (
            "Watched Object Retained",
            "referent of a KeyedWeakReference",
        );
        let got: Vec<_> = named(&small.leak_objects);
        let want = [
            (0x40, "class com.app.Leaks", 24),
            (0x500, "java.lang.Object[]", 262_160),
            (0x600, "<unknown class>", 16),
        ];
        let want: Vec<_> = (want.iter())
            .map(|&(id, c, s)| (id, watched.0.into(), c.into(), watched.1.into(), s))
            .collect();
        assert_eq!(got, want);
        assert_eq!(small.analysis.left_out.leak_objects, 0);
    }

    /// An Android dump (a VM_INTERNAL root) whose destroyed Activity's class gives its instances
    /// 40 bytes: the finding's size is the class's, as the full report's, not the fields'.
    #[test]
    fn an_android_findings_size_is_its_classes_instance_size() {
        let mut w = Writer::new(Format::V102, 4, 0);
        crate::tests::activity_strings(&mut w);
        w.segment(tag::HEAP_DUMP_SEGMENT);
        w.class_dump(0x10, 0, 0, 0, &[], &[]);
        crate::tests::activity_class(&mut w);
        w.class_dump(0x30, 0x20, 0, 40, &[], &[]);
        w.instance(0x1000, 0x30, &[1, 0]);
        w.root_jni_global(0x1000, 1);
        w.root(sub::ROOT_VM_INTERNAL, 0x10);
        w.end_segment();
        w.heap_dump_end();
        let (full, small) = full_and_reduced(&w.finish());
        let got: Vec<_> = (small.leak_objects.iter())
            .map(|o| (o.object_id, o.size))
            .collect();
        assert_eq!(got, [(0x1000, 40)]);
        assert_eq!(named(&small.leak_objects), named(&full.leak_objects));
    }

    /// `activities` destroyed Activities (0x1000..), then 1,001 KeyedWeakReferences to
    /// 1,001 referents (0x100000 + 16 j), of which the first is missing from the dump, then two
    /// more to the second referent (8-byte ids).
    fn watched_past_the_cap(activities: u64) -> Vec<u8> {
        let mut w = Writer::new(Format::V102, 8, 0);
        crate::tests::activity_strings(&mut w);
        kwr_strings(&mut w);
        w.utf8(11, "com.app.Thing");
        w.load_class(7, 0x90, 11);
        w.segment(tag::HEAP_DUMP_SEGMENT);
        crate::tests::activity_class_dumps(&mut w);
        kwr_classes(&mut w);
        w.class_dump(0x90, 0x10, 0, 8, &[], &[]);
        for i in 0..activities {
            w.instance(0x1000 + 16 * i, 0x30, &[1, 0]);
        }
        let referent = |j: u64| 0x100000 + 16 * j;
        for j in 1..=1000 {
            w.instance(referent(j), 0x90, &[]);
        }
        let refs = (0..=1000).chain([1, 1]).map(referent);
        for (k, r) in refs.enumerate() {
            kwr(&mut w, 0x200000 + 16 * k as u64, r, 8);
        }
        w.end_segment();
        w.heap_dump_end();
        w.finish()
    }

    /// Of more than [`MAX_LEAK_OBJECTS`] watched referents the first that many (in file order)
    /// are sought, and only each other referent is counted, once (a referent watched again is
    /// not): 999 found (the first is missing), one counted.
    #[test]
    fn watched_referents_past_the_cap_are_counted_once_each() {
        let small = reduced(&watched_past_the_cap(0));
        let ids: Vec<u64> = named(&small.leak_objects).iter().map(|o| o.0).collect();
        let want: Vec<u64> = (1..1000).map(|j| 0x100000 + 16 * j).collect();
        assert_eq!(ids, want);
        assert!(small
            .leak_objects
            .iter()
            .all(|o| o.leak_reason == "Watched Object Retained"));
        assert_eq!(small.analysis.left_out.leak_objects, 1);
    }

    /// With [`MAX_LEAK_OBJECTS`] + 1 destroyed Activities, the watched objects found past the
    /// cap are counted with the Activity left and the watched referent left: 1 + 1 + 999.
    #[test]
    fn findings_and_watched_objects_past_the_cap_are_all_counted() {
        let small = reduced(&watched_past_the_cap(MAX_LEAK_OBJECTS as u64 + 1));
        assert_eq!(small.leak_objects.len(), MAX_LEAK_OBJECTS);
        assert!(small
            .leak_objects
            .iter()
            .all(|o| o.leak_reason == "Activity Leak"));
        assert_eq!(small.analysis.left_out.leak_objects, 1 + 1 + 999);
    }
}
