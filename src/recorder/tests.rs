use super::*;

fn id(version: &str) -> Identity {
    Identity {
        pid: 4242,
        process_start_ms: 1_700_000_000_000,
        agent_start_ms: 1_700_000_000_100,
        app_version: version.into(),
        policy_version: 7,
    }
}

fn sample(seq: u64, heap_mb: u64) -> Sample {
    Sample {
        seq,
        at_ms: 1_700_000_000_000 + seq * 5_000,
        heap_used: heap_mb << 20,
        heap_max: 256 << 20,
        fds: 100 + seq,
        fd_soft_limit: 32768,
        threads: 40,
        threads_max: 100_000,
        vm_size_kb: 4 << 20,
        vm_rss_kb: 300 << 10,
        ..Sample::default()
    }
}

fn started(dir: &Path) -> Recorder {
    let path = ring_path(dir, "com.example.app:remote");
    let claimed = open(&path).expect("open");
    assert!(
        claimed.previous.is_none(),
        "a new file has no previous owner"
    );
    claimed.start(&id("1.0")).expect("start")
}

#[test]
fn a_ring_round_trips_its_samples_state_and_last_words() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = started(dir.path());
    let strikes = Strikes {
        heap: 2,
        fd: 0,
        threads: 1,
        vm_size: 0,
        cgroup_memory: 0,
    };
    for seq in 1..=3 {
        r.record(&sample(seq, 100 + seq * 10), &strikes);
    }
    r.set_page("CheckoutActivity");
    r.set_busy(BUSY_DUMP, true);
    r.set_policy_version(9);
    r.last_words(&LastWords {
        at_ms: 5,
        class: "java.lang.OutOfMemoryError".into(),
        message: "Failed to allocate a 16 byte allocation".into(),
        thread: "main".into(),
        frames: vec!["a.B.c(B.java:1)".into(), "d.E.f(E.java:2)".into()],
    });
    let p = r.snapshot().unwrap();
    assert_eq!(p.pid, 4242);
    assert_eq!(p.app_version, "1.0");
    assert_eq!(p.policy_version, 9);
    assert_eq!(p.state, State::Running);
    assert!(p.dump_in_progress && !p.analysis_in_progress);
    assert_eq!(p.page, "CheckoutActivity");
    assert_eq!(p.samples.len(), 3);
    assert_eq!(p.samples[2].sample.heap_used, 130 << 20);
    assert_eq!(p.samples[0].strikes, [2, 0, 1, 0, 0]);
    assert_eq!(p.samples[0].sample.cgroup_current, None);
    let w = p.last_words.as_ref().unwrap();
    assert_eq!(w.class, "java.lang.OutOfMemoryError");
    assert_eq!(w.frames, vec!["a.B.c(B.java:1)", "d.E.f(E.java:2)"]);
    assert!(p.died());
}

#[test]
fn the_ring_keeps_the_last_slots_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = started(dir.path());
    let total = SLOTS as u64 * 2 + 5;
    for seq in 1..=total {
        r.record(&sample(seq, seq), &Strikes::default());
    }
    let p = r.snapshot().unwrap();
    let seqs: Vec<u64> = p.samples.iter().map(|s| s.sample.seq).collect();
    let want: Vec<u64> = (total - SLOTS as u64 + 1..=total).collect();
    assert_eq!(seqs, want);
}

#[test]
fn the_next_launch_reads_what_a_killed_owner_left_and_a_clean_one_is_not_a_death() {
    let dir = tempfile::tempdir().unwrap();
    let path = ring_path(dir.path(), "app");
    {
        let mut r = open(&path).unwrap().start(&id("2.1")).unwrap();
        r.record(&sample(1, 50), &Strikes::default());
        // Dropped without a state change: the process "died".
    }
    let claimed = open(&path).unwrap();
    let p = claimed.previous.as_ref().unwrap().as_ref().unwrap().clone();
    assert!(p.died());
    assert_eq!(p.samples.len(), 1);
    assert!(p.reason().contains("pid 4242, app 2.1"), "{}", p.reason());
    assert!(p.reason().contains("no last words"), "{}", p.reason());
    let mut r = claimed.start(&id("2.2")).unwrap();
    r.set_state(State::Stopped);
    drop(r);
    let p = open(&path).unwrap().previous.unwrap().unwrap();
    assert_eq!(p.state, State::Stopped);
    assert!(
        p.samples.is_empty(),
        "starting afresh clears the old samples"
    );
    assert!(!p.died());
}

#[test]
fn a_second_live_writer_of_the_same_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = ring_path(dir.path(), "app");
    let _first = open(&path).unwrap().start(&id("1")).unwrap();
    let err = open(&path).unwrap_err().to_string();
    assert!(err.contains("locked by another live process"), "{err}");
}

fn written(dir: &Path) -> (PathBuf, Vec<u8>) {
    let path = ring_path(dir, "app");
    let mut r = open(&path).unwrap().start(&id("1.0")).unwrap();
    r.record(&sample(1, 10), &Strikes::default());
    r.record(&sample(2, 20), &Strikes::default());
    drop(r);
    let b = std::fs::read(&path).unwrap();
    (path, b)
}

fn previous_of(path: &Path, bytes: &[u8]) -> Result<Previous, RingError> {
    std::fs::write(path, bytes).unwrap();
    open(path).unwrap().previous.unwrap()
}

#[test]
fn bad_rings_are_named_with_their_byte_and_never_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let (path, good) = written(dir.path());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated", good[..FILE_LEN - 100].to_vec(), "truncated"),
        (
            "oversized",
            [good.clone(), vec![0; 10]].concat(),
            "oversized",
        ),
        ("zeroed", vec![0; FILE_LEN], "byte 0: zeroed"),
        (
            "foreign",
            {
                let mut b = good.clone();
                b[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x00");
                b
            },
            "byte 0: not a flight ring",
        ),
        (
            "another format version",
            {
                let mut b = good.clone();
                put_u32(&mut b, H_VERSION, 2);
                b
            },
            "byte 8: format version 2",
        ),
        (
            "torn header",
            {
                let mut b = good.clone();
                b[H_APP_VERSION] ^= 0xff;
                b
            },
            "byte 112: the header's seal",
        ),
        (
            "unknown state",
            {
                let mut b = good.clone();
                put_u32(&mut b, H_STATE, 77);
                b
            },
            "byte 128: unknown state 77",
        ),
    ];
    for (name, bytes, want) in cases {
        let err = previous_of(&path, &bytes).expect_err(name).to_string();
        assert!(err.contains(want), "{name}: {err}");
        assert!(err.contains(&path.display().to_string()), "{name}: {err}");
    }
    // A huge file is not read into memory at all.
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(1 << 40).unwrap();
    drop(f);
    let err = open(&path).unwrap().previous.unwrap().unwrap_err();
    assert!(err.to_string().contains("oversized"), "{err}");
}

#[test]
fn a_torn_slot_or_trailer_is_dropped_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut b) = written(dir.path());
    b[slot_range(0).start + 20] ^= 1;
    let t = trailer_range().start;
    put_u32(&mut b, t, T_MAGIC);
    b[t + T_CLASS] = b'x';
    let p = previous_of(&path, &b).unwrap();
    assert_eq!(p.torn_slots, 1);
    assert_eq!(p.samples.len(), 1);
    assert_eq!(p.samples[0].sample.seq, 2);
    assert!(p.torn_last_words && p.last_words.is_none());
    assert!(p.died(), "still running when it vanished");
}

#[test]
fn a_ring_from_another_app_version_is_read_as_that_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = ring_path(dir.path(), "app");
    let mut r = open(&path).unwrap().start(&id("0.9-old")).unwrap();
    r.record(&sample(1, 10), &Strikes::default());
    drop(r);
    let p = open(&path).unwrap().previous.unwrap().unwrap();
    assert_eq!(p.app_version, "0.9-old");
    assert!(p.died());
}

#[test]
fn long_strings_are_cut_at_char_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = started(dir.path());
    let long = "é".repeat(1000);
    r.set_page(&long);
    r.last_words(&LastWords {
        at_ms: 1,
        class: long.clone(),
        message: long.clone(),
        thread: long.clone(),
        frames: vec![long.clone(); 10],
    });
    let p = r.snapshot().unwrap();
    assert!(p.page.len() <= PAGE_LEN && p.page.chars().all(|c| c == 'é'));
    let w = p.last_words.unwrap();
    assert!(w.class.len() <= CLASS_LEN && w.class.chars().all(|c| c == 'é'));
    assert!(w.message.len() <= MESSAGE_LEN);
    assert!(
        w.frames.is_empty(),
        "a frame longer than the room is left out whole"
    );
}

#[test]
fn the_trend_covers_the_last_minute() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = started(dir.path());
    for seq in 1..=30 {
        r.record(&sample(seq, seq * 2), &Strikes::default());
    }
    let p = r.snapshot().unwrap();
    let t = p.trend(60_000);
    let heap = t.iter().find(|t| t.figure == "heapUsed").unwrap();
    // 5 s apart: the last minute holds 13 samples (seq 18..=30).
    assert_eq!(heap.samples, 13);
    assert_eq!(heap.first, 36 << 20);
    assert_eq!(heap.last, 60 << 20);
    assert_eq!(heap.per_minute, 24 << 20);
    assert!(t.iter().all(|t| t.figure != "cgroupCurrent"), "not sampled");
}

#[test]
fn cgroup_figures_and_their_strikes_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = started(dir.path());
    let strikes = Strikes {
        cgroup_memory: 2,
        ..Strikes::default()
    };
    for seq in 1..=13 {
        let s = Sample {
            cgroup_current: Some((100 + seq) << 20),
            cgroup_working_set: Some(seq << 20),
            cgroup_limit: Some(256 << 20),
            cgroup_swap: Some(0),
            ..sample(seq, 10)
        };
        r.record(&s, &strikes);
    }
    let p = r.snapshot().unwrap();
    let last = p.samples.last().unwrap();
    assert_eq!(last.strikes, [0, 0, 0, 0, 2]);
    assert_eq!(last.sample.cgroup_current, Some(113 << 20));
    assert_eq!(last.sample.cgroup_limit, Some(256 << 20));
    assert_eq!(last.sample.cgroup_swap, Some(0));
    assert_eq!(last.sample.cgroup_working_set, None, "not kept in the ring");
    let t = p.trend(60_000);
    let cg = t.iter().find(|t| t.figure == "cgroupCurrent").unwrap();
    assert_eq!(
        (cg.first, cg.last, cg.per_minute),
        (101 << 20, 113 << 20, 12 << 20)
    );
    let json = serde_json::to_value(last).unwrap();
    assert_eq!(json["cgroup_limit"], 256 << 20);
    assert_eq!(json["strikes"][4], 2);
}
