//! Level `app` loses sizes, never paths: every object a GC root reaches in a full Android dump is
//! reached in its app-stripped twin, and every finding of the full dump is in the twin's report.
//! Reachability is computed here from the records, independently of the analyser.

mod common;

use analyze::{self, Config, Input};
use hprof::writer::{art_dump, ArtSpec};
use hprof::{read_id, strip_bytes, sub, BasicType, Level, Parser, Record, Sub, Visitor};
use std::collections::{HashMap, HashSet, VecDeque};

/// The objects of a dump and their strong references, as the records say.
#[derive(Default)]
struct Graph {
    id_size: u32,
    strings: HashMap<u64, String>,
    class_names: HashMap<u64, u64>,
    /// Class id -> (super id, own fields (name, type)).
    classes: HashMap<u64, (u64, Vec<(u64, BasicType)>)>,
    instances: Vec<(u64, u64, Vec<u8>)>,
    edges: HashMap<u64, Vec<u64>>,
    objects: HashSet<u64>,
    roots: Vec<u64>,
    array: Option<u64>,
}

impl Visitor for Graph {
    fn header(&mut self, h: &hprof::Header, _: &[u8]) -> Result<(), String> {
        self.id_size = h.id_size;
        Ok(())
    }
    fn record(&mut self, _: u64, r: &Record<'_>, _: &[u8]) -> Result<(), String> {
        if let Some((id, t)) = r.utf8() {
            self.strings
                .insert(id, String::from_utf8_lossy(t).replace('/', "."));
        } else if let Some((_, c, _, name)) = r.load_class() {
            self.class_names.insert(c, name);
        }
        Ok(())
    }
    fn sub(&mut self, _: u64, s: &Sub<'_>, _: &[u8]) -> Result<(), String> {
        self.array = None;
        match s {
            Sub::Root { tag, id, .. } if *tag != sub::ROOT_UNREACHABLE => self.roots.push(*id),
            Sub::Class(c) => {
                self.objects.insert(c.id);
                let mut e = vec![c.super_id, c.loader_id];
                for (_, ty, v) in c.statics() {
                    if ty == BasicType::Object {
                        e.push(read_id(v, self.id_size));
                    }
                }
                self.edges.entry(c.id).or_default().extend(e);
                self.classes
                    .insert(c.id, (c.super_id, c.fields().collect::<Vec<_>>()));
            }
            Sub::Instance {
                id, class_id, data, ..
            } => {
                self.objects.insert(*id);
                self.instances.push((*id, *class_id, data.to_vec()));
            }
            Sub::ObjectArray { id, class_id, .. } => {
                self.objects.insert(*id);
                self.edges.entry(*id).or_default().push(*class_id);
                self.array = Some(*id);
            }
            Sub::PrimitiveArray { id, .. } => {
                self.objects.insert(*id);
            }
            _ => {}
        }
        Ok(())
    }
    fn array_data(&mut self, d: &[u8]) -> Result<(), String> {
        if let Some(a) = self.array {
            let n = self.id_size as usize;
            let ids: Vec<u64> = d.chunks_exact(n).map(|c| read_id(c, n as u32)).collect();
            self.edges.entry(a).or_default().extend(ids);
        }
        Ok(())
    }
}

impl Graph {
    fn of(bytes: &[u8]) -> Graph {
        let mut g = Graph::default();
        let mut p = Parser::new();
        p.feed(bytes, &mut g).unwrap();
        p.finish().unwrap();
        let name = |g: &Graph, c: u64| {
            g.class_names
                .get(&c)
                .and_then(|n| g.strings.get(n))
                .cloned()
                .unwrap_or_default()
        };
        for (id, class_id, data) in std::mem::take(&mut g.instances) {
            let mut e = vec![class_id];
            let (mut c, mut at) = (class_id, 0usize);
            while let Some((sup, fields)) = g.classes.get(&c) {
                let weak = name(&g, c) == "java.lang.ref.Reference";
                for (f, ty) in fields {
                    let sz = ty.size(g.id_size) as usize;
                    let referent = g.strings.get(f).is_some_and(|s| s == "referent");
                    if *ty == BasicType::Object && !(weak && referent) && at + sz <= data.len() {
                        e.push(read_id(&data[at..], g.id_size));
                    }
                    at += sz;
                }
                c = *sup;
            }
            g.edges.entry(id).or_default().extend(e);
        }
        g
    }

    /// Objects reached from the roots; every class counts as a root too (the twin keeps them
    /// all, so this only makes both sides reach more).
    fn reachable(&self) -> HashSet<u64> {
        let mut seen = HashSet::new();
        let mut q: VecDeque<u64> = self.roots.iter().copied().collect();
        q.extend(self.classes.keys());
        while let Some(v) = q.pop_front() {
            if v == 0 || !self.objects.contains(&v) || !seen.insert(v) {
                continue;
            }
            if let Some(e) = self.edges.get(&v) {
                q.extend(e);
            }
        }
        seen
    }
}

fn inputs() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = common::fixtures()
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/android/"))
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    assert!(v.len() >= 2, "the Android fixtures are missing");
    let spec = ArtSpec {
        image_objects: 4_000,
        zygote_objects: 2_000,
        app_objects: 6_000,
        ..ArtSpec::default()
    };
    v.push(("ART-style dump".into(), art_dump(&spec)));
    v
}

#[test]
fn app_strip_keeps_every_path_to_an_app_object() {
    for (name, full) in inputs() {
        let (twin, stats) = strip_bytes(&full, Level::App).unwrap();
        assert!(stats.objects_dropped > 0, "{name}: nothing dropped");
        let (g, t) = (Graph::of(&full), Graph::of(&twin));
        let (rg, rt) = (g.reachable(), t.reachable());
        let lost: Vec<u64> = t
            .objects
            .iter()
            .filter(|id| rg.contains(id) && !rt.contains(id))
            .copied()
            .collect();
        assert!(
            lost.is_empty(),
            "{name}: {} of {} objects reachable in the full dump are not in the app twin \
             (first: {:#x}); {stats:?}",
            lost.len(),
            t.objects.len(),
            lost[0],
        );
        // A dropped object that was garbage still holds what it referenced: the twin may reach
        // a little more than the full dump (sizes, not paths).
        let extra = t
            .objects
            .iter()
            .filter(|id| rt.contains(id) && !rg.contains(id))
            .count();
        eprintln!(
            "{name}: {} objects in the twin, {} reachable, {extra} reachable only in the twin, \
             {} holder roots",
            t.objects.len(),
            rt.len(),
            stats.holder_roots
        );
    }
}

#[test]
fn app_strip_keeps_every_finding() {
    // Every Bitmap is a finding (the fixtures' are small), and every array of 64 KB.
    let cfg = Config {
        top_n: 10,
        threads: 1,
        bitmap_min_pixels: 1,
        array_min_bytes: 64 << 10,
        ..Config::default()
    };
    for (name, full) in inputs() {
        let (twin, stats) = strip_bytes(&full, Level::App).unwrap();
        let a = analyze::analyze(Input::Bytes(&full), &cfg, serde_json::Value::Null).unwrap();
        let b = analyze::analyze(Input::Bytes(&twin), &cfg, serde_json::Value::Null).unwrap();
        let found: HashSet<(u64, &str)> = b
            .leak_objects
            .iter()
            .map(|l| (l.object_id, l.leak_reason.as_str()))
            .collect();
        let twin_objects = Graph::of(&twin).objects;
        eprintln!(
            "{name}: {} findings in the full dump, {} in the twin",
            a.leak_objects.len(),
            b.leak_objects.len()
        );
        for l in &a.leak_objects {
            if !twin_objects.contains(&l.object_id) {
                continue;
            }
            assert!(
                found.contains(&(l.object_id, l.leak_reason.as_str())),
                "{name}: {} {:#x} ({}) is not found in the app twin; {stats:?}",
                l.class_name,
                l.object_id,
                l.leak_reason
            );
        }
        assert!(
            b.analysis.reachable_objects >= a.analysis.reachable_objects - stats.objects_dropped,
            "{name}: {} reachable in the twin, {} in the full dump, {} dropped",
            b.analysis.reachable_objects,
            a.analysis.reachable_objects,
            stats.objects_dropped
        );
    }
}

/// The roots the app strip adds are exactly the objects the dropped ones strongly referenced
/// (their classes, reference fields but `Reference.referent`, object array elements) that are
/// neither dropped nor a root already: no path lost, and no root made up (a class layout not
/// kept, or an array's state left over, would make the bytes of other objects into roots).
#[test]
fn app_strip_roots_exactly_what_the_dropped_objects_referenced() {
    for (name, full) in inputs() {
        let (twin, stats) = strip_bytes(&full, Level::App).unwrap();
        let (g, t) = (Graph::of(&full), Graph::of(&twin));
        let dropped: HashSet<u64> = g.objects.difference(&t.objects).copied().collect();
        assert_eq!(dropped.len() as u64, stats.objects_dropped, "{name}");
        let rooted: HashSet<u64> = g.roots.iter().copied().collect();
        let mut want: Vec<u64> = dropped
            .iter()
            .flat_map(|d| g.edges.get(d).into_iter().flatten())
            .filter(|r| **r != 0 && !dropped.contains(r) && !rooted.contains(r))
            .copied()
            .collect::<HashSet<u64>>()
            .into_iter()
            .collect();
        want.sort_unstable();
        let mut added: Vec<u64> = t
            .roots
            .iter()
            .filter(|r| !rooted.contains(r))
            .copied()
            .collect();
        added.sort_unstable();
        assert_eq!(
            t.roots.len() as u64,
            g.roots.len() as u64 + stats.holder_roots
        );
        // One root for each, and none for what is a root already (a second root of an object
        // adds nothing but bytes).
        assert_eq!(stats.holder_roots, want.len() as u64, "{name}");
        let missing: Vec<_> = want.iter().filter(|r| !added.contains(r)).collect();
        let made_up: Vec<_> = added.iter().filter(|r| !want.contains(r)).collect();
        assert!(
            missing.is_empty() && made_up.is_empty(),
            "{name}: {} roots expected, {} added; {} missing (first {:x?}), {} made up (first \
             {:x?})",
            want.len(),
            added.len(),
            missing.len(),
            missing.first(),
            made_up.len(),
            made_up.first()
        );
        assert!(!want.is_empty(), "{name}: no holder roots to check");
    }
}

/// Objects of a dropped heap the stripper cannot account for (here: instances of a class never
/// described, past the bytes it keeps for them) are kept, after their heap's HEAP_DUMP_INFO,
/// arrays stripped of their contents as at level `arrays`, and counted.
#[test]
fn objects_of_a_dropped_heap_the_stripper_cannot_account_for_are_kept_in_their_heap() {
    use hprof::{writer::Writer, Format};
    let mut w = Writer::new(Format::V103, 4, 0);
    w.utf8(1, "zygote").utf8(2, "app").utf8(3, "C");
    w.segment(hprof::tag::HEAP_DUMP_SEGMENT);
    w.root(sub::ROOT_STICKY_CLASS, 0x50);
    w.class_dump(0x50, 0, 0, 0, &[], &[]);
    w.heap_info(b'Z' as u32, 1);
    // Instances of class 0x60, never described: set aside, each id-sized window of their bytes
    // reserved in the table of ids (1.5 million entries): four of 350,000 bytes fit, the fifth
    // does not, and is kept with all that follows in the dropped heap.
    let big = vec![0u8; 350_000];
    for i in 0..5u64 {
        w.instance(0x1000 + 8 * i, 0x60, &big);
    }
    w.primitive_array(0x2000, BasicType::Int, 10, &[7; 40]);
    w.object_array(0x3000, 0x50, &[0x1000, 0x4000]);
    w.heap_info(b'A' as u32, 2);
    w.instance(0x4000, 0x50, &[]);
    w.heap_dump_end();
    let full = w.finish();
    let (twin, stats) = strip_bytes(&full, Level::App).unwrap();
    assert_eq!(stats.objects_dropped, 4, "{stats:?}");
    assert_eq!(stats.objects_kept_in_dropped_heaps, 3, "{stats:?}");
    assert_eq!(stats.arrays_stripped, 1, "{stats:?}");
    assert_eq!(stats.array_bytes_removed, 40, "{stats:?}");
    // The roots of what the dropped ones referenced: their class (0x60, never described).
    assert_eq!(stats.holder_roots, 1, "{stats:?}");
    let t = Graph::of(&twin);
    let kept: HashSet<u64> = [0x50, 0x1020, 0x2000, 0x3000, 0x4000].into();
    assert_eq!(t.objects, kept);
    // One zygote HEAP_DUMP_INFO, in front of the first object kept, then the app's.
    let infos: Vec<usize> = (0..twin.len() - 8)
        .filter(|&i| twin[i] == 0xFE && twin[i + 1..i + 5] == [0, 0, 0, b'Z'])
        .collect();
    assert_eq!(infos.len(), 1);
    let kept_at = (0..twin.len() - 5)
        .find(|&i| twin[i] == sub::INSTANCE_DUMP && twin[i + 1..i + 5] == [0, 0, 0x10, 0x20])
        .unwrap();
    assert_eq!(
        kept_at,
        infos[0] + 9,
        "the HEAP_DUMP_INFO is right before the kept instance"
    );
    // The kept array lost its contents: a 0xC3 record with its length and type.
    let nodata = (0..twin.len() - 5)
        .find(|&i| {
            twin[i] == sub::PRIMITIVE_ARRAY_NODATA_DUMP && twin[i + 1..i + 5] == [0, 0, 0x20, 0]
        })
        .expect("the kept int[] is a PRIMITIVE_ARRAY_NODATA record");
    assert_eq!(
        twin[nodata + 9..nodata + 14],
        [0, 0, 0, 10, BasicType::Int as u8]
    );
}
