//! What a report says about how it was made: its thresholds, and its fields through a rename.

use super::*;

/// A report says which thresholds it ran with when they are not the defaults, whole or in
/// part (a budget too small), and only then; thresholds from elsewhere are kept within a
/// policy's bounds.
#[test]
fn a_report_carries_its_thresholds_when_they_are_not_the_defaults() {
    let bytes = std::fs::read(fixture("android/leak_service_binder.hprof")).unwrap();
    let run = |cfg: &Config| {
        let r = analyze(Input::Bytes(&bytes), cfg, serde_json::Value::Null).unwrap();
        serde_json::to_value(r).unwrap()
    };
    let plain = run(&Config::default());
    assert!(plain["analysis"].get("thresholds").is_none());
    let cfg = Config {
        array_min_bytes: 4096,
        top_n: 3,
        ..Config::default()
    };
    for budget_bytes in [0, budget::FIXED_BYTES - 1] {
        let v = run(&Config {
            budget_bytes,
            ..cfg.clone()
        });
        assert_eq!(v["analysis"]["budget"].is_object(), budget_bytes > 0);
        let t: Thresholds = serde_json::from_value(v["analysis"]["thresholds"].clone()).unwrap();
        assert_eq!(t, cfg.thresholds());
        assert_eq!(Config::default().with_thresholds(&t).thresholds(), t);
    }
    let wild = Thresholds {
        bitmap_min_pixels: 0,
        array_min_bytes: 1,
        top_n: usize::MAX,
        max_paths_per_class: 0,
        max_suspects_per_class: 1 << 40,
        window_max_count: 7,
        ..Thresholds::default()
    };
    let b = wild.bounded();
    assert_eq!(
        (b.bitmap_min_pixels, b.array_min_bytes, b.top_n),
        (1, 1024, 1000)
    );
    assert_eq!((b.max_paths_per_class, b.max_suspects_per_class), (1, 1000));
    assert_eq!(b.window_max_count, 7);
    assert_eq!(Thresholds::default().bounded(), Thresholds::default());
}

/// Renaming a report of what fits goes through its JSON (`renames::Rename::report`): with no
/// names to turn back, every field comes back as it was.
#[test]
fn renaming_a_report_of_what_fits_keeps_every_other_field() {
    for rel in [
        "android/leak_service_binder.hprof",
        "jvm/openjdk_jdk11_04_x64.hprof",
    ] {
        let (_, small) = full_and_reduced(&std::fs::read(fixture(rel)).unwrap());
        let mut renamed = small.clone();
        renames::Rename::report(&renames::Renames::default(), &mut renamed);
        assert_eq!(
            serde_json::to_value(&renamed).unwrap(),
            serde_json::to_value(&small).unwrap(),
            "{rel}"
        );
    }
}

/// On one thread the shortest paths are searched only as far as the report's ends
/// (`paths::shortest_until`); the report is the one the whole search gives beside the
/// dominators on more threads: on every fixture, with the default thresholds and with
/// thresholds that name many more paths. (A path asked of the stopped search for any other
/// object fails a debug assertion.)
#[test]
fn one_thread_gives_the_report_of_several() {
    let names = [
        "android/leak_service_binder.hprof",
        "android/leak_service_binder_ignored.hprof",
        "jvm/ahat_RI.hprof",
        "jvm/heapdump_hashmap.hprof",
        "jvm/heapdump_string.hprof",
        "jvm/openjdk_jdk11_04_x64.hprof",
        "jvm/oracle_jdk8_05_x64.hprof",
        "jvm/slurp_hprof-32.hprof",
        "jvm/sun_jdk6_31_hprofagent_compressedOops.hprof",
        "jvm/sun_jdk6_32bit.hprof",
    ];
    let many = Config {
        array_min_bytes: 1024,
        top_n: 100,
        ..Config::default()
    };
    for rel in names {
        let path = fixture(rel);
        for cfg in [Config::default(), many.clone()] {
            let run = |threads| {
                let cfg = Config {
                    threads,
                    ..cfg.clone()
                };
                let mut r = analyze(Input::File(&path), &cfg, serde_json::Value::Null).unwrap();
                r.analysis.timings = Timings::default();
                r.analysis.parse_parts = 0;
                serde_json::to_value(r).unwrap()
            };
            assert_eq!(run(1), run(2), "{rel}, top {}", cfg.top_n);
        }
    }
}
