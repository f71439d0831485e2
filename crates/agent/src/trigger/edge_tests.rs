//! Tests of the trigger rules at their edges: "over" is strict for every threshold, an unknown
//! max heap or API level gives no special verdict, `reset` forgets runs, and the verdict texts
//! users read. Each pins a behaviour that `cargo mutants` found unpinned (issue 44).

use super::inventory::{stack_groups, StackGroup};
use super::*;
use crate::sample::JavaStack;

const MB: u64 = 1 << 20;

/// A quiet sample (nothing near a threshold) with `used_mb` of a `max_mb` heap.
fn quiet(seq: u64, used_mb: u64, max_mb: u64) -> Sample {
    Sample {
        seq,
        heap_used: used_mb * MB,
        heap_max: max_mb * MB,
        fd_soft_limit: 32768,
        threads_max: 100_000,
        threads: 20,
        fds: 50,
        ..Sample::default()
    }
}

/// Feed `samples` to fresh triggers; (poll, kind) of each verdict.
fn verdicts(samples: &[Sample], p: &Config, d: &Device) -> Vec<(u64, Kind)> {
    let mut t = Triggers::new();
    samples
        .iter()
        .filter_map(|s| t.observe(s, p, d).map(|v| (s.seq, v.kind)))
        .collect()
}

fn heap_polls(used_mb: &[u64], max_mb: u64) -> Vec<Sample> {
    used_mb
        .iter()
        .enumerate()
        .map(|(i, &u)| quiet(i as u64 + 1, u, max_mb))
        .collect()
}

/// Exactly at a threshold is not over it: heap at 85 % of 400 MB, fast-huge at exactly 90 % of
/// 100 MB, threads at exactly 750; one more is.
#[test]
fn exactly_at_a_threshold_is_not_over_it() {
    let p = default_config();
    let d = Device::default();
    // 400 MB heap: the 85 % tier, 340 MB exactly.
    assert_eq!(verdicts(&heap_polls(&[340, 340, 340], 400), &p, &d), vec![]);
    assert_eq!(
        verdicts(&heap_polls(&[341, 341, 341], 400), &p, &d),
        vec![(3, Kind::Heap)]
    );
    // 100 MB heap: the 90 % tier and fast-huge at 90 %: 90 MB exactly is neither.
    assert_eq!(verdicts(&heap_polls(&[90, 90, 90], 100), &p, &d), vec![]);
    assert_eq!(
        verdicts(&heap_polls(&[91], 100), &p, &d),
        vec![(1, Kind::FastHuge)]
    );
    // Growth of exactly fast_huge_growth_mb (350 MB) in one poll is not over it.
    assert_eq!(verdicts(&heap_polls(&[100, 450], 1024), &p, &d), vec![]);
    // Threads: 750 exactly, three times.
    let threads = |n: u64| -> Vec<Sample> {
        (1..=3)
            .map(|i| Sample {
                threads: n,
                ..quiet(i, 10, 256)
            })
            .collect()
    };
    assert_eq!(verdicts(&threads(750), &p, &d), vec![]);
    assert_eq!(verdicts(&threads(751), &p, &d), vec![(3, Kind::Threads)]);
}

/// A max heap of 0 means the VM did not say: no heap or fast-huge verdict whatever is used.
#[test]
fn an_unknown_max_heap_gives_no_heap_verdict() {
    let p = default_config();
    let d = Device::default();
    let polls: Vec<Sample> = (1..=4)
        .map(|i| Sample {
            heap_max: 0,
            ..quiet(i, 100 * i, 0)
        })
        .collect();
    assert_eq!(verdicts(&polls, &p, &d), vec![]);
    let mut t = Triggers::new();
    for s in &polls {
        t.observe(s, &p, &d);
    }
    assert_eq!(t.strikes().heap, 0);
}

/// `reset` (a policy change) forgets every run: strikes are zero, the next verdict needs a whole
/// new run, and the growth rule does not compare with a poll from before the reset.
#[test]
fn reset_forgets_the_runs() {
    let p = default_config();
    let d = Device::default();
    let mut t = Triggers::new();
    let over = |seq| Sample {
        fds: 2000,
        threads: 2000,
        ..quiet(seq, 220, 256)
    };
    assert!(t.observe(&over(1), &p, &d).is_none());
    assert!(t.observe(&over(2), &p, &d).is_none());
    let before = t.strikes();
    assert_eq!((before.heap, before.fd, before.threads), (2, 2, 2));
    t.reset();
    assert_eq!(t.strikes(), Strikes::default());
    assert!(t.observe(&over(3), &p, &d).is_none());
    assert!(t.observe(&over(4), &p, &d).is_none());
    assert_eq!(
        t.observe(&over(5), &p, &d).map(|v| v.kind),
        Some(Kind::Heap)
    );

    // Growth: 10 MB before the reset, 400 MB after: not a jump of 390 MB in one poll.
    let mut t = Triggers::new();
    assert!(t.observe(&quiet(1, 10, 1024), &p, &d).is_none());
    t.reset();
    assert!(t.observe(&quiet(2, 400, 1024), &p, &d).is_none());
}

/// Huawei's legacy limit applies at known API levels up to `huawei_legacy_max_api`; an API
/// level of 0 (unknown, as off Android) keeps the ordinary limit.
#[test]
fn huawei_limit_needs_a_known_api_level() {
    let p = default_config();
    let s = quiet(1, 10, 256);
    let huawei = |api_level| Device {
        manufacturer: "huawei".into(),
        api_level,
        is_32bit: false,
    };
    assert_eq!(thread_threshold(&p, &huawei(0), &s), 750);
    assert_eq!(thread_threshold(&p, &huawei(1), &s), 450);
    assert_eq!(thread_threshold(&p, &huawei(26), &s), 450);
    assert_eq!(thread_threshold(&p, &huawei(27), &s), 750);
}

/// The fd verdict names the soft limit: a number, "unknown" (0) or "unlimited" (u64::MAX).
#[test]
fn the_fd_verdict_names_the_soft_limit() {
    let p = default_config();
    let d = Device::default();
    for (limit, said) in [(0, "unknown"), (u64::MAX, "unlimited"), (4096, "4096")] {
        let mut t = Triggers::new();
        let mut last = None;
        for i in 1..=3 {
            let s = Sample {
                fds: 1001,
                fd_soft_limit: limit,
                ..quiet(i, 10, 256)
            };
            last = t.observe(&s, &p, &d);
        }
        let v = last.expect("three fd strikes");
        assert_eq!(v.kind, Kind::Fd);
        assert_eq!(
            v.reason,
            format!("1001 open fds, over 1000 for 3 polls (soft limit {said})")
        );
    }
}

/// Threads with the same Java stack fold into one group (counted, first thread as example);
/// different stacks stay apart; most common first.
#[test]
fn stack_groups_fold_equal_stacks_only() {
    let st = |t: &str, f: &[&str]| JavaStack {
        thread: t.into(),
        frames: f.iter().map(|x| x.to_string()).collect(),
    };
    let g = stack_groups(vec![
        st("w-1", &["a", "b"]),
        st("w-2", &["a", "b"]),
        st("w-3", &["c"]),
        st("w-4", &["a", "b"]),
    ]);
    let sg = |count, t: &str, f: &[&str]| StackGroup {
        count,
        example_thread: t.into(),
        frames: f.iter().map(|x| x.to_string()).collect(),
    };
    assert_eq!(g, vec![sg(3, "w-1", &["a", "b"]), sg(1, "w-3", &["c"])]);
}

/// The slack forgives a fall up to `slack_percent` of the max heap (heap) or of the limit
/// (cgroup), and no more: a fall past it starts a new run.
#[test]
fn a_fall_past_the_slack_starts_a_new_run() {
    let d = Device::default();
    let mut p = default_config();
    p.heap.slack_percent = 1; // 2.56 MB of 256 MB
    assert_eq!(
        verdicts(&heap_polls(&[220, 218, 219], 256), &p, &d),
        vec![(3, Kind::Heap)]
    );
    assert_eq!(verdicts(&heap_polls(&[221, 218, 219], 256), &p, &d), vec![]);
    // Cgroup: 2 % of a 200 MB limit is 4 MB; working sets over 170 MB (85 %).
    p.cgroup_memory.slack_percent = 2;
    let cgroup = |ws: &[u64]| -> Vec<Sample> {
        ws.iter()
            .enumerate()
            .map(|(i, &w)| Sample {
                cgroup_current: Some(w * MB),
                cgroup_working_set: Some(w * MB),
                cgroup_limit: Some(200 * MB),
                ..quiet(i as u64 + 1, 10, 256)
            })
            .collect()
    };
    assert_eq!(
        verdicts(&cgroup(&[176, 172, 173]), &p, &d),
        vec![(3, Kind::CgroupMemory)]
    );
    assert_eq!(verdicts(&cgroup(&[177, 172, 173]), &p, &d), vec![]);
}

/// The names of the kinds, as `status.json`, logs and reports spell them.
#[test]
fn kind_names() {
    let names: Vec<&str> = [
        Kind::Heap,
        Kind::FastHuge,
        Kind::Fd,
        Kind::Threads,
        Kind::VmSize,
        Kind::CgroupMemory,
        Kind::Manual,
    ]
    .iter()
    .map(|k| k.as_str())
    .collect();
    assert_eq!(
        names,
        [
            "heap",
            "fast_huge",
            "fd",
            "threads",
            "vm_size",
            "cgroup_memory",
            "manual"
        ]
    );
    // And serde says the same.
    assert_eq!(
        serde_json::to_string(&Kind::CgroupMemory).unwrap(),
        "\"cgroup_memory\""
    );
}

/// `Device::this` keeps what the VM said and knows the pointer width.
#[test]
fn device_this_keeps_what_it_is_told() {
    let d = Device::this("HUAWEI", 26);
    assert_eq!(
        d,
        Device {
            manufacturer: "HUAWEI".into(),
            api_level: 26,
            is_32bit: cfg!(target_pointer_width = "32"),
        }
    );
}
