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
        r.record(&sample(seq, 100 + seq * 10), &strikes).unwrap();
    }
    r.set_page("CheckoutActivity").unwrap();
    r.set_busy(BUSY_DUMP, true).unwrap();
    r.set_policy_version(9).unwrap();
    r.last_words(&LastWords {
        at_ms: 5,
        class: "java.lang.OutOfMemoryError".into(),
        message: "Failed to allocate a 16 byte allocation".into(),
        thread: "main".into(),
        frames: vec!["a.B.c(B.java:1)".into(), "d.E.f(E.java:2)".into()],
    })
    .unwrap();
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
        r.record(&sample(seq, seq), &Strikes::default()).unwrap();
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
        r.record(&sample(1, 50), &Strikes::default()).unwrap();
        // Dropped without a state change: the process "died".
    }
    let claimed = open(&path).unwrap();
    let p = claimed.previous.as_ref().unwrap().as_ref().unwrap().clone();
    assert!(p.died());
    assert_eq!(p.samples.len(), 1);
    assert!(p.reason().contains("pid 4242, app 2.1"), "{}", p.reason());
    assert!(p.reason().contains("no last words"), "{}", p.reason());
    let mut r = claimed.start(&id("2.2")).unwrap();
    r.set_state(State::Stopped).unwrap();
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
    r.record(&sample(1, 10), &Strikes::default()).unwrap();
    r.record(&sample(2, 20), &Strikes::default()).unwrap();
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
    r.record(&sample(1, 10), &Strikes::default()).unwrap();
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
    r.set_page(&long).unwrap();
    r.last_words(&LastWords {
        at_ms: 1,
        class: long.clone(),
        message: long.clone(),
        thread: long.clone(),
        frames: vec![long.clone(); 10],
    })
    .unwrap();
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
        r.record(&sample(seq, seq * 2), &Strikes::default())
            .unwrap();
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
        r.record(&s, &strikes).unwrap();
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

use testkit::disk::SmallDisk;

fn no_space(e: &RingError) -> bool {
    e.to_string().contains("No space left on device")
}

/// On a full disk, starting a ring with no blocks of its own (no file yet, or the holes a
/// launch that died after `set_len` left) is an error naming the file and byte 0, never a
/// signal (with the ring written through a shared map, this test process died of SIGBUS); the
/// file is left empty, so the next launch, on a freed disk, starts it and sees no death.
#[test]
fn a_full_disk_at_start_is_an_error_and_leaves_the_ring_empty() {
    let Some(disk) = SmallDisk::mount("a_full_disk_at_start_is_an_error", 64) else {
        return;
    };
    let path = ring_path(disk.path(), "app");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let holes = ring_path(disk.path(), "crashed");
    File::create(&holes)
        .unwrap()
        .set_len(FILE_LEN as u64)
        .unwrap();
    disk.fill();
    for p in [&path, &holes] {
        let claimed = open(p).unwrap();
        let err = claimed.start(&id("1.0")).unwrap_err();
        assert!(no_space(&err), "{err}");
        let text = err.to_string();
        assert!(text.contains(&p.display().to_string()), "{text}");
        assert!(
            text.contains("byte 0") && text.contains("emptied"),
            "{text}"
        );
        assert_eq!(std::fs::metadata(p).unwrap().len(), 0, "{}", p.display());
    }
    disk.free();
    let claimed = open(&holes).unwrap();
    assert!(
        claimed.previous.is_none(),
        "an empty file has no previous owner"
    );
    let mut r = claimed.start(&id("1.1")).unwrap();
    r.record(&sample(1, 10), &Strikes::default()).unwrap();
    assert_eq!(r.snapshot().unwrap().samples.len(), 1);
}

/// A ring an earlier launch wrote is started afresh over its own blocks, so a full disk does
/// not stop the recorder of the next launch.
#[test]
fn a_ring_written_before_the_disk_filled_keeps_recording() {
    let Some(disk) = SmallDisk::mount("a_ring_written_before_the_disk_filled", 64) else {
        return;
    };
    let path = ring_path(disk.path(), "app");
    let mut r = open(&path).unwrap().start(&id("1.0")).unwrap();
    r.record(&sample(1, 10), &Strikes::default()).unwrap();
    drop(r);
    disk.fill();
    let claimed = open(&path).unwrap();
    assert!(claimed.previous.as_ref().unwrap().as_ref().unwrap().died());
    let mut r = claimed.start(&id("1.1")).unwrap();
    for seq in 1..=SLOTS as u64 + 3 {
        r.record(&sample(seq, 10), &Strikes::default()).unwrap();
    }
    r.set_state(State::Stopped).unwrap();
    let p = r.snapshot().unwrap();
    assert_eq!((p.app_version.as_str(), p.samples.len()), ("1.1", SLOTS));
}

/// A write that finds no block (here a page of the ring punched out on a full disk, as an f2fs
/// rewrite may need a new block) turns the recorder off for the process: the reason, with the
/// file and byte, is kept once for the agent's status, the file is emptied, and every later
/// call is a no-op (no signal, no panic).
#[test]
fn a_failed_write_turns_the_recorder_off_and_empties_the_ring() {
    use nix::fcntl::{fallocate, FallocateFlags};
    let Some(disk) = SmallDisk::mount("a_failed_write_turns_the_recorder_off", 64) else {
        return;
    };
    let path = ring_path(disk.path(), "app");
    let flight = Flight::default();
    flight.install(Some(open(&path).unwrap().start(&id("1.0")).unwrap()));
    for seq in 1..=3 {
        flight.record(&sample(seq, 10), &Strikes::default());
    }
    assert_eq!(flight.take_off_reason(), None);
    disk.fill();
    // The second page holds slots 28 to 59.
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    fallocate(
        std::os::fd::AsRawFd::as_raw_fd(&f),
        FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE,
        4096,
        4096,
    )
    .unwrap();
    drop(f);
    // The page freed goes to `fill` again: the disk is full once more.
    disk.fill();
    for seq in 4..=28 {
        flight.record(&sample(seq, 10), &Strikes::default());
        assert_eq!(
            flight.take_off_reason(),
            None,
            "slot {} is on page 0",
            seq - 1
        );
    }
    flight.record(&sample(29, 10), &Strikes::default());
    let why = flight
        .take_off_reason()
        .expect("the recorder turned itself off");
    assert!(why.contains("No space left on device"), "{why}");
    assert!(
        why.contains(&format!("{}: byte 4096: writing 128 bytes", path.display())),
        "{why}"
    );
    assert!(why.contains("the file is emptied"), "{why}");
    assert_eq!(flight.take_off_reason(), None, "said once");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    flight.record(&sample(30, 10), &Strikes::default());
    flight.set_page("After");
    flight.finish(State::Stopped);
    assert!(!flight.last_words(&LastWords {
        at_ms: 1,
        class: "java.lang.OutOfMemoryError".into(),
        message: String::new(),
        thread: "main".into(),
        frames: Vec::new(),
    }));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    // The lock went with the recorder: the next launch takes the file and finds no ring.
    disk.free();
    assert!(open(&path).unwrap().previous.is_none());
}

#[test]
fn recent_polls_are_those_of_the_window_before_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.ring");
    let mut r = open(&path).unwrap().start(&id("3.0")).unwrap();
    for seq in 1..=20u64 {
        let s = Sample {
            seq,
            at_ms: seq * 5_000,
            heap_used: seq,
            ..Sample::default()
        };
        r.record(&s, &Strikes::default()).unwrap();
    }
    let seqs: Vec<u64> = r.recent(60_000).iter().map(|s| s.seq).collect();
    // The newest at 100 s: the polls from 40 s on.
    assert_eq!(seqs, (8..=20).collect::<Vec<u64>>());
    let flight = Flight::default();
    assert!(flight.recent(60_000).is_empty(), "no recorder, no polls");
    flight.install(Some(r));
    assert_eq!(flight.recent(10_000).len(), 3);
}

/// The file's layout, as the module comment draws it and as the next launch reads it (perhaps
/// a later release of the agent, after an update): each field at its byte, with the offsets
/// written out here as numbers, so that moving a field without a new format version fails
/// here even though this code would still read back what it wrote.
#[test]
fn each_field_sits_at_its_documented_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.ring");
    let who = Identity {
        pid: 0x0102_0304,
        process_start_ms: 0x1111_2222_3333,
        agent_start_ms: 0x4444_5555_6666,
        app_version: "v".repeat(100),
        policy_version: 5,
    };
    let mut r = open(&path).unwrap().start(&who).unwrap();
    assert_eq!(
        format!("{r:?}"),
        format!("Recorder({}, next slot 0)", path.display())
    );
    let figures: Vec<u64> = (1..=9).map(|i| i * 1_000 + i).collect();
    let s = Sample {
        seq: 0,
        at_ms: figures[0],
        heap_used: figures[1],
        heap_max: figures[2],
        fds: figures[3],
        fd_soft_limit: figures[4],
        threads: figures[5],
        threads_max: figures[6],
        vm_size_kb: figures[7],
        vm_rss_kb: figures[8],
        cgroup_current: None,
        cgroup_working_set: Some(1),
        cgroup_limit: Some(77),
        cgroup_swap: Some(0),
    };
    let strikes = Strikes {
        heap: 3,
        fd: 300,
        threads: 1,
        vm_size: 2,
        cgroup_memory: 4,
    };
    r.record(&s, &strikes).unwrap();
    assert_eq!(
        format!("{r:?}"),
        format!("Recorder({}, next slot 1)", path.display())
    );
    r.set_busy(BUSY_ANALYSIS, true).unwrap();
    r.set_policy_version(0x0a0b).unwrap();
    r.set_page("Home").unwrap();
    r.set_state(State::Exited).unwrap();
    r.last_words(&LastWords {
        at_ms: 0x7777,
        class: "Cls".into(),
        message: "Message".into(),
        thread: "T1".into(),
        frames: vec!["f1".into(), "f2\nf3".into()],
    })
    .unwrap();
    drop(r);
    let b = std::fs::read(&path).unwrap();
    let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let zero = |r: Range<usize>| b[r].iter().all(|&x| x == 0);
    // FNV-1a's published values, so that the checksum is that function and no other.
    assert_eq!(
        (fnv(b""), fnv(b"a"), fnv(b"foobar")),
        (0x811c_9dc5, 0xe40c_292c, 0xbf9c_f968)
    );

    assert_eq!(b.len(), 512 + 64 * 128 + 2048);
    // The sealed header.
    assert_eq!(&b[0..8], b"OOMGRING");
    assert_eq!(
        [u32_at(8), u32_at(12), u32_at(16), u32_at(20), u32_at(24)],
        [1, 512, 128, 64, 2048]
    );
    assert_eq!(u32_at(28), 0x0102_0304);
    assert_eq!(
        (u64_at(32), u64_at(40)),
        (0x1111_2222_3333, 0x4444_5555_6666)
    );
    assert_eq!(
        &b[48..111],
        "v".repeat(63).as_bytes(),
        "the app version, cut to 63 bytes"
    );
    assert!(zero(111..112));
    assert_eq!(u32_at(112), fnv(&b[..112]));
    assert!(zero(116..128));
    // The changing part.
    assert_eq!([u32_at(128), u32_at(132)], [3, 2], "exited; busy: analysis");
    assert_eq!(u64_at(136), 0x0a0b);
    assert_eq!((b[144], &b[145..149]), (4, &b"Home"[..]));
    assert!(zero(149..512));
    // The slot written, the first: sequence 0 stored as 1, the nine figures, the cgroup's
    // three (`u64::MAX` for none; the working set is not kept), the strikes (clamped to a
    // byte), the checksum.
    let s0 = 512;
    assert_eq!(u64_at(s0), 1);
    let stored: Vec<u64> = (0..12).map(|i| u64_at(s0 + 8 + 8 * i)).collect();
    assert_eq!(&stored[..9], &figures[..]);
    assert_eq!(&stored[9..], &[u64::MAX, 77, 0]);
    assert_eq!(&b[s0 + 104..s0 + 112], &[3, 255, 1, 2, 4, 0, 0, 0]);
    assert_eq!(u32_at(s0 + 112), fnv(&b[s0..s0 + 112]));
    assert!(zero(s0 + 116..s0 + 128));
    assert!(zero(640..512 + 64 * 128), "the other slots are empty");
    // The trailer: magic, the four lengths (class, message, thread, frames), the time, then
    // class (192 bytes), thread (64), message (512), frames (whole lines), checksum.
    let t = 512 + 64 * 128;
    assert_eq!(&b[t..t + 4], b"LAST");
    let lens: Vec<u16> = (0..4)
        .map(|i| u16::from_le_bytes([b[t + 4 + 2 * i], b[t + 5 + 2 * i]]))
        .collect();
    assert_eq!(lens, [3, 7, 2, 9]);
    assert!(zero(t + 12..t + 16));
    assert_eq!(u64_at(t + 16), 0x7777);
    assert_eq!(&b[t + 24..t + 27], b"Cls");
    assert_eq!(&b[t + 216..t + 218], b"T1");
    assert_eq!(&b[t + 280..t + 287], b"Message");
    assert_eq!(&b[t + 792..t + 801], b"f1\nf2 f3\n", "a frame is one line");
    assert!(zero(t + 801..t + 2040));
    assert_eq!(u32_at(t + 2040), fnv(&b[t + 4..t + 2040]));
    assert!(zero(t + 2044..t + 2048));

    // And read back, as the next launch does.
    let p = parse(&path, &b).unwrap();
    assert_eq!(p.state, State::Exited);
    assert!(
        p.died(),
        "an exit after last words: the fatal error came first"
    );
    assert!(p.analysis_in_progress && !p.dump_in_progress);
    assert_eq!(p.samples[0].sample.seq, 1);
    assert_eq!(p.app_version, "v".repeat(63));
}

#[test]
fn busy_flags_are_set_and_cleared_each_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = started(dir.path());
    let busy = |r: &Recorder| {
        let p = r.snapshot().unwrap();
        (p.dump_in_progress, p.analysis_in_progress)
    };
    assert_eq!(busy(&r), (false, false));
    r.set_busy(BUSY_DUMP, true).unwrap();
    r.set_busy(BUSY_DUMP, true).unwrap();
    assert_eq!(busy(&r), (true, false), "set twice is still set");
    r.set_busy(BUSY_ANALYSIS, true).unwrap();
    assert_eq!(busy(&r), (true, true));
    r.set_busy(BUSY_DUMP, false).unwrap();
    assert_eq!(busy(&r), (false, true), "clearing one leaves the other");
    r.set_busy(BUSY_DUMP, false).unwrap();
    assert_eq!(busy(&r), (false, true), "cleared twice is still clear");
    r.set_busy(BUSY_ANALYSIS, false).unwrap();
    assert_eq!(busy(&r), (false, false));
}

/// Frames are kept whole while they fit the trailer's room (1,248 bytes, each line with its
/// newline), and the first that does not fit ends them.
#[test]
fn frames_fill_their_room_to_the_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = started(dir.path());
    assert_eq!(FRAMES_LEN, 1248);
    let words = |frames: Vec<String>| LastWords {
        at_ms: 1,
        class: "E".into(),
        message: String::new(),
        thread: "main".into(),
        frames,
    };
    let frames_of = |r: &mut Recorder, frames: Vec<String>| {
        r.last_words(&words(frames)).unwrap();
        r.snapshot().unwrap().last_words.unwrap().frames
    };
    let line = |n: usize| "x".repeat(n);
    assert_eq!(
        frames_of(&mut r, vec![line(1247)]),
        [line(1247)],
        "exactly the room"
    );
    assert!(
        frames_of(&mut r, vec![line(1248)]).is_empty(),
        "one byte over"
    );
    assert_eq!(
        frames_of(&mut r, vec![line(600), line(646), line(1)]),
        [line(600), line(646)],
        "the second ends at the last byte; the third has no room"
    );
    assert_eq!(
        frames_of(&mut r, vec![line(600), line(647), line(1)]),
        [line(600)],
        "the second is a byte over, and ends the frames"
    );
}

/// A page length the writer never wrote (a length byte over the field's 127), or an app version
/// with no NUL, reads no further than its field.
#[test]
fn a_page_or_app_version_fills_no_more_than_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut b) = written(dir.path());
    b[H_PAGE] = 255;
    b[H_PAGE + 1..HEADER_LEN].fill(b'p');
    let p = previous_of(&path, &b).unwrap();
    assert_eq!(p.page, "p".repeat(127));
    // An app version that fills its 64 bytes with no NUL (sealed so) ends with the field.
    b[H_APP_VERSION..H_APP_VERSION + APP_VERSION_LEN].fill(b'v');
    let seal = fnv(&b[..H_SEAL]);
    put_u32(&mut b, H_SEAL, seal);
    assert_ne!(
        seal & 0xff,
        0,
        "a NUL after the field would hide a longer read"
    );
    let p = previous_of(&path, &b).unwrap();
    assert_eq!(p.app_version, "v".repeat(64));
}

#[test]
fn a_ring_is_named_after_its_process() {
    let dir = Path::new("/data/app");
    let name = |process: &str| {
        let p = ring_path(dir, process);
        assert_eq!(p.parent().unwrap(), dir.join("flight"));
        p.file_name().unwrap().to_str().unwrap().to_string()
    };
    assert_eq!(
        name("com.example.app:remote"),
        "com.example.app:remote.ring"
    );
    assert_eq!(name("a_b-C9"), "a_b-C9.ring");
    assert_eq!(name("a/b c\u{e9}"), "a_b_c_.ring");
    assert_eq!(name("../x"), ".._x.ring");
    assert_eq!(name(""), "process.ring");
    assert_eq!(name(&"p".repeat(150)), format!("{}.ring", "p".repeat(100)));
}

#[test]
fn the_reason_names_the_error_its_message_and_its_thread() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = started(dir.path());
    r.record(&sample(1, 100), &Strikes::default()).unwrap();
    let mut words = LastWords {
        at_ms: 1,
        class: "java.lang.OutOfMemoryError".into(),
        message: "Failed to allocate".into(),
        thread: "worker-3".into(),
        frames: Vec::new(),
    };
    r.last_words(&words).unwrap();
    let last_poll = "; last poll: heap 100 of 256 MB, 101 fds, 40 threads, VmRSS 300 MB";
    assert_eq!(
        r.snapshot().unwrap().reason(),
        format!("the previous process (pid 4242, app 1.0) died after java.lang.OutOfMemoryError: Failed to allocate on thread \"worker-3\"{last_poll}")
    );
    words.message.clear();
    r.last_words(&words).unwrap();
    assert_eq!(
        r.snapshot().unwrap().reason(),
        format!("the previous process (pid 4242, app 1.0) died after java.lang.OutOfMemoryError on thread \"worker-3\"{last_poll}")
    );
}

/// The shared recorder's calls reach the file: what the pipeline, the poll and the JNI entries
/// write through [`Flight`] is what the next launch reads.
#[test]
fn the_shared_recorder_writes_through_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = ring_path(dir.path(), "app");
    let flight = Flight::default();
    flight.install(Some(open(&path).unwrap().start(&id("4.0")).unwrap()));
    let read = || parse(&path, &std::fs::read(&path).unwrap()).unwrap();
    flight.set_busy(BUSY_DUMP, true);
    flight.set_page("Cart");
    flight.set_policy_version(12);
    flight.set_state(State::Exited);
    let p = read();
    assert!(p.dump_in_progress);
    assert_eq!(
        (p.page.as_str(), p.policy_version, p.state),
        ("Cart", 12, State::Exited)
    );
    flight.set_busy(BUSY_DUMP, false);
    assert!(!read().dump_in_progress);
    assert!(flight.last_words(&LastWords {
        at_ms: 3,
        class: "java.lang.OutOfMemoryError".into(),
        message: String::new(),
        thread: "main".into(),
        frames: Vec::new(),
    }));
    assert_eq!(read().last_words.unwrap().thread, "main");
    flight.finish(State::Stopped);
    let claimed = open(&path).expect("the recorder's lock went with it");
    assert_eq!(claimed.previous.unwrap().unwrap().state, State::Stopped);
    assert!(
        flight.recent(60_000).is_empty(),
        "no recorder after the finish"
    );
}
