//! Where a trace starts, for each kind of root (issue 44: `cargo mutants` found the words of
//! most root kinds unpinned in `root.rs`): [`art_dump`] plus one destroyed activity per kind of
//! root, each held by a `Holder` (or a class's loader) that root holds.

use super::*;

/// Classes whose loader is a `Holder` (0x2b60, 0x2b70): one a sticky class root, one a JNI
/// global's.
const STICKY_LOADED: u64 = 0x80;
const GLOBAL_LOADED: u64 = 0x88;

/// [`art_dump`] with activities 11 to 20 held from the roots of [`expected`], which ART's
/// thread serial 1 (thread #7, `0x2400`) holds where the root kind has a thread; its stack
/// (a trace of one frame, HotSpot-style) names the method of a Java frame or JNI local root.
fn roots_dump() -> Vec<u8> {
    let mut d = Dump {
        w: Writer::new(Format::V103, 4, 0),
        strings: Vec::new(),
    };
    let resolved = art_classes(&mut d);
    let sticky = d.s("com.app.StickyLoaded");
    let global = d.s("com.app.GlobalLoaded");
    d.w.load_class(100, STICKY_LOADED, sticky);
    d.w.load_class(101, GLOBAL_LOADED, global);
    // Thread serial 1's stack: one frame, `MainActivity.leak` (class serial 3) at line 12.
    let (method, sig, file) = (d.s("leak"), d.s("()V"), d.s("Main.java"));
    d.w.record(tag::FRAME, |w| {
        w.id(0x7000).id(method).id(sig).id(file).u32(3).u32(12);
    });
    d.w.record(tag::TRACE, |w| {
        w.u32(9).u32(1).u32(1).id(0x7000);
    });
    let app = d.s("app");
    let w = &mut d.w;
    w.segment(tag::HEAP_DUMP_SEGMENT);
    w.heap_info(b'A' as u32, app);
    for (id, sup, st, fs) in &resolved {
        let loader = if *id == LATE { 0x2a10 } else { 0 };
        w.class_dump(*id, *sup, loader, 16, st, fs);
        if *id != LATE {
            w.root(sub::ROOT_STICKY_CLASS, *id);
        }
    }
    w.class_dump(STICKY_LOADED, OBJECT, 0x2b60, 16, &[], &[]);
    w.root(sub::ROOT_STICKY_CLASS, STICKY_LOADED);
    w.class_dump(GLOBAL_LOADED, OBJECT, 0x2b70, 16, &[], &[]);
    w.root_jni_global(GLOBAL_LOADED, 0x9100);
    art_objects(w);
    for k in 11..=19 {
        w.instance(act(k), MAIN, &[1, 0]);
        let holder = 0x2b00 + (k - 11) * 0x10;
        w.instance(holder, HOLDER, &(act(k) as u32).to_be_bytes());
    }
    // An array, not a Holder: a Holder's path from a Java frame would be grouped with the
    // one of activity 8.
    w.instance(act(20), MAIN, &[1, 0]);
    w.object_array(0x2b90, OBJECT_ARRAY, &[act(20)]);
    w.root2(sub::ROOT_JNI_LOCAL, 0x2b00, 1, 0);
    w.root(sub::ROOT_NATIVE_STACK, 0x2b10).u32(1);
    w.root(sub::ROOT_THREAD_BLOCK, 0x2b20).u32(1);
    w.root2(sub::ROOT_JNI_MONITOR, 0x2b30, 1, 0);
    w.root(sub::ROOT_MONITOR_USED, 0x2b40);
    w.root(sub::ROOT_STICKY_CLASS, 0x2b50);
    w.root(sub::ROOT_VM_INTERNAL, 0x2b80);
    w.root2(sub::ROOT_JAVA_FRAME, 0x2b90, 1, 0);
    w.end_segment();
    w.heap_dump_end();
    d.w.finish()
}

/// Per activity of [`roots_dump`]: the trace's root kind and root.
fn expected() -> [(u64, &'static str, &'static str); 10] {
    [
        (
            11,
            "JNI local",
            "JNI local reference in com.app.MainActivity.leak(Main.java:12) on thread #7 to \
             com.app.Holder @0x2b00",
        ),
        (
            12,
            "native stack",
            "native stack reference on thread #7 to com.app.Holder @0x2b10",
        ),
        (
            13,
            "thread block",
            "thread block on thread #7 on com.app.Holder @0x2b20",
        ),
        (
            14,
            "monitor",
            "JNI monitor held on thread #7 on com.app.Holder @0x2b30",
        ),
        (15, "monitor", "monitor held on com.app.Holder @0x2b40"),
        (
            16,
            "sticky class",
            "sticky class root com.app.Holder @0x2b50",
        ),
        (17, "sticky class", "class com.app.StickyLoaded"),
        (18, "system class", "class com.app.GlobalLoaded"),
        (19, "other", "VM Internal root on com.app.Holder @0x2b80"),
        (
            20,
            "Java frame",
            "local variable in com.app.MainActivity.leak(Main.java:12) on thread #7: \
             java.lang.Object[] @0x2b90",
        ),
    ]
}

#[test]
fn each_kind_of_root_has_its_words() {
    let r = report(&roots_dump());
    for (k, kind, root) in expected() {
        let g = path_to(&r, act(k));
        assert_eq!(
            (k, g.trace.root_kind.as_str(), g.trace.root.as_str()),
            (k, kind, root)
        );
        let holder = g.trace.nodes.iter().rev().nth(1).expect("a holder");
        let class = if k == 20 {
            "java.lang.Object[]"
        } else {
            "com.app.Holder"
        };
        assert_eq!(holder.class_name, class, "activity {k}");
        assert_eq!(g.instance_count, 1, "activity {k}");
    }
    // The classes' paths go through their loader, and start on no thread.
    for k in [17, 18] {
        let g = path_to(&r, act(k));
        assert_eq!(g.trace.nodes[0].kind, "class");
        assert!(g.trace.thread.is_none());
    }
}
