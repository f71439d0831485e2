//! Recovery and staging at their edges: the counts a recovery reports, the entries it takes
//! out of the way or leaves, and the races it must stay quiet about (issue 44: the mutants
//! `cargo mutants` found no test for in `recover.rs` and `staging.rs`).

use super::*;

/// What a [`Hooked`] file system does before (or instead of) an operation on a path.
type Hook = Box<dyn Fn(&Path) -> Option<io::Result<()>> + Send + Sync>;

/// [`RealFs`] with hooks: one for `remove_dir_all`, one run after `create_dir_all`, one for
/// `rename` (by the source path), and extra entries for `list` of one directory. A hook that
/// returns `Some(r)` answers with `r`; `None` lets the real operation run.
#[derive(Default)]
struct Hooked {
    remove_dir_all: Option<Hook>,
    after_mkdir: Option<Hook>,
    rename: Option<Hook>,
    extra_entries: Option<(PathBuf, Vec<Entry>)>,
}

impl std::fmt::Debug for Hooked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hooked")
    }
}

impl Fs for Hooked {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.create_dir_all(path)?;
        match self.after_mkdir.as_ref().and_then(|h| h(path)) {
            Some(r) => r,
            None => Ok(()),
        }
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        RealFs.read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        RealFs.create(path)
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn FsRead>> {
        RealFs.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        match self.rename.as_ref().and_then(|h| h(from)) {
            Some(r) => r,
            None => RealFs.rename(from, to),
        }
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        match self.remove_dir_all.as_ref().and_then(|h| h(path)) {
            Some(r) => r,
            None => RealFs.remove_dir_all(path),
        }
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        RealFs.sync_dir(path)
    }
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        RealFs.sync_file(path)
    }
    fn list(&self, path: &Path) -> io::Result<Vec<Entry>> {
        let mut v = RealFs.list(path)?;
        if let Some((dir, extra)) = &self.extra_entries {
            if dir == path {
                v.extend(extra.iter().cloned());
            }
        }
        Ok(v)
    }
    fn stat(&self, path: &Path) -> io::Result<Entry> {
        RealFs.stat(path)
    }
}

fn hooked_spool(env: &Env, fs: Hooked) -> Spool {
    Spool::with(
        &env.root,
        Quotas::default(),
        Arc::new(fs),
        env.clock.clone(),
    )
    .unwrap()
}

fn in_staging(path: &Path) -> bool {
    path.parent()
        .and_then(|p| p.file_name())
        .is_some_and(|n| n == "staging")
}

fn is_building(path: &Path) -> bool {
    in_staging(path)
        && path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(staging::NEW_PREFIX))
}

/// Each count of a recovery is the number of entries it found of that kind: a stray file in
/// `staging/` quarantined, the incidents that are well, the analyses that failed.
#[test]
fn a_recovery_counts_each_thing_it_found() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    add(&spool, "well1", 100);
    add(&spool, "well2", 100);
    add(&spool, "fails", 100);
    std::fs::write(env.root.join("staging/stray.bin"), b"stray").unwrap();
    let g = spool.lock().unwrap();
    let rec = g
        .recover(&mut |j: &AnalysisJob| {
            if j.id == "fails" {
                Err("the analyser gave up".to_string())
            } else {
                good(j)
            }
        })
        .unwrap();
    assert_eq!(
        (
            rec.quarantined,
            rec.incidents,
            rec.analysed,
            rec.analysis_failed
        ),
        (1, 3, 2, 1),
        "{rec:?}"
    );
    assert!(names(&env.root.join("staging")).is_empty());
    let q = names(&spool.quarantine_dir());
    assert!(q.len() == 1 && q[0].ends_with("staging-stray.bin"), "{q:?}");
    let inc = spool.read_incident("fails").unwrap();
    assert_eq!((inc.state, inc.analysis_attempts), (State::Dumped, 1));
}

/// A dead writer's staging directory that is gone by the time the recovery removes it
/// (committed or discarded since the listing) is nothing to warn about; a removal that fails
/// otherwise is, and the directory stays for the next recovery, with no loss counted.
#[test]
fn a_staging_directory_gone_before_its_removal_is_no_warning_but_a_failed_removal_is() {
    let env = Env::new();
    let fs = Hooked {
        remove_dir_all: Some(Box::new(|p: &Path| {
            if !in_staging(p) || is_building(p) {
                return None;
            }
            if p.ends_with("gone") {
                // Another process got there first.
                Some(
                    RealFs
                        .remove_dir_all(p)
                        .and_then(|()| RealFs.remove_dir_all(p)),
                )
            } else {
                Some(Err(io::Error::from_raw_os_error(libc::EIO)))
            }
        })),
        ..Hooked::default()
    };
    let spool = hooked_spool(&env, fs);
    drop(stage_files(&spool, "gone", 10));
    let g = spool.lock().unwrap();
    let (rec, logged) = warnings(|| g.recover(&mut good).unwrap());
    assert_eq!(rec.half_written_deleted, 0, "{rec:?}");
    assert!(!logged.contains("remove failed"), "{logged}");
    assert!(names(&env.root.join("staging")).is_empty());
    drop(g);

    drop(stage_files(&spool, "stuck", 10));
    let g = spool.lock().unwrap();
    let (rec, logged) = warnings(|| g.recover(&mut good).unwrap());
    assert_eq!(rec.half_written_deleted, 0, "{rec:?}");
    assert!(
        logged.contains("staging/stuck: remove failed"),
        "no warning for the failed removal: {logged}"
    );
    assert_eq!(names(&env.root.join("staging")), vec!["stuck".to_string()]);
    assert_eq!(spool.state().pending.losses, 0);
}

/// A staging directory listed but gone before its lock could be tried is passed over in
/// silence; a lock that cannot be tried for another reason (here `.lock` is a directory) is
/// warned about, and the directory is left alone.
#[test]
fn a_staging_directory_gone_before_its_lock_is_no_warning_but_an_unlockable_one_is() {
    let env = Env::new();
    let ghost = Entry {
        name: "ghost".into(),
        is_dir: true,
        len: 0,
        mtime_ms: 0,
    };
    let fs = Hooked {
        extra_entries: Some((env.root.join("staging"), vec![ghost])),
        ..Hooked::default()
    };
    let spool = hooked_spool(&env, fs);
    let g = spool.lock().unwrap();
    let (rec, logged) = warnings(|| g.recover(&mut good).unwrap());
    assert_eq!(
        (rec.half_written_deleted, rec.quarantined),
        (0, 0),
        "{rec:?}"
    );
    assert!(!logged.contains("ghost"), "{logged}");

    std::fs::create_dir_all(env.root.join("staging/odd/.lock")).unwrap();
    let (rec, logged) = warnings(|| g.recover(&mut good).unwrap());
    assert_eq!(
        (rec.half_written_deleted, rec.quarantined),
        (0, 0),
        "{rec:?}"
    );
    assert!(
        logged.contains("staging/odd: "),
        "no warning for odd: {logged}"
    );
    assert!(env.root.join("staging/odd/.lock").is_dir());
}

/// In a committed incident, a writer's temporary file, a stray `.lock` and a leftover
/// `.report.out` are removed, not quarantined; a directory with the name of a file of the
/// incident is not that file, and is quarantined.
#[test]
fn leftovers_in_an_incident_are_removed_and_a_directory_named_like_a_file_is_quarantined() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    let st = spool.stage_with_id("left").unwrap();
    std::fs::write(st.path(FileKind::MiniDump), b"mini").unwrap();
    spool.commit(st, info("heap")).unwrap();
    let dir = spool.incident_dir("left");
    for f in [".report.json.1.2.tmp", ".lock", ".report.out"] {
        std::fs::write(dir.join(f), b"x").unwrap();
    }
    std::fs::create_dir(dir.join("fds.txt")).unwrap();
    let g = spool.lock().unwrap();
    let rec = g.recover(&mut good).unwrap();
    assert_eq!((rec.quarantined, rec.incidents), (0, 1), "{rec:?}");
    let q = names(&spool.quarantine_dir());
    assert!(q.len() == 1 && q[0].ends_with("left-fds.txt"), "{q:?}");
    assert_eq!(
        names(&dir),
        vec!["incident.json", "mini.hprof", "report.json"]
    );
    assert_eq!(spool.read_incident("left").unwrap().state, State::Analysed);
}

/// An incident recorded as dumped whose dump is gone is quarantined whole, even with its
/// inventories still there: there is nothing to analyse.
#[test]
fn a_dumped_incident_without_its_dump_is_quarantined_though_its_inventories_remain() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    add(&spool, "nodump", 100);
    std::fs::remove_file(spool.incident_dir("nodump").join("mini.hprof")).unwrap();
    let g = spool.lock().unwrap();
    let rec = g.recover(&mut good).unwrap();
    assert_eq!((rec.quarantined, rec.incidents), (1, 0), "{rec:?}");
    assert!(names(&spool.incidents_dir()).is_empty());
    let q = names(&spool.quarantine_dir());
    assert!(q.len() == 1 && q[0].ends_with("incidents-nodump"), "{q:?}");
}

/// In an uploading incident, a planned file whose size changed is given up alone (moved to
/// quarantine, dropped from the plan); the files as planned stay planned.
#[test]
fn a_planned_file_that_changed_size_is_dropped_from_the_plan_alone() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    add(&spool, "up", 1000);
    let g = spool.lock().unwrap();
    g.recover(&mut good).unwrap();
    let planned = kinds(&g.plan_upload("up").unwrap());
    assert_eq!(
        planned,
        vec![
            FileKind::Meta,
            FileKind::Report,
            FileKind::Fds,
            FileKind::Threads,
            FileKind::MiniDumpGz
        ]
    );
    let fds = spool.incident_dir("up").join("fds.txt");
    let mut grown = std::fs::read(&fds).unwrap();
    grown.extend_from_slice(b"1 /dev/zero\n");
    std::fs::write(&fds, grown).unwrap();
    let rec = g.recover(&mut good).unwrap();
    assert_eq!((rec.quarantined, rec.incidents), (0, 1), "{rec:?}");
    let inc = spool.read_incident("up").unwrap();
    assert_eq!(inc.state, State::Uploading);
    assert_eq!(
        kinds(&inc),
        vec![
            FileKind::Meta,
            FileKind::Report,
            FileKind::Threads,
            FileKind::MiniDumpGz
        ]
    );
    assert!(!fds.exists());
    let q = names(&spool.quarantine_dir());
    assert!(q.len() == 1 && q[0].ends_with("up-fds.txt"), "{q:?}");
}

/// A staging directory that a recovery removed before its writer could lock it is built again
/// under a new name; a lock that fails for another reason fails the staging at once, naming
/// the lock file, and leaves nothing behind.
#[test]
fn staging_retries_a_directory_taken_away_but_not_a_lock_that_fails() {
    let env = Env::new();
    let taken = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let fs = Hooked {
        after_mkdir: Some(Box::new({
            let taken = taken.clone();
            move |p: &Path| {
                if !is_building(p) {
                    return None;
                }
                let name = p.file_name()?.to_string_lossy().into_owned();
                if name.contains("taken") && taken.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Some(RealFs.remove_dir_all(p));
                }
                if name.contains("badlock") {
                    return Some(RealFs.create_dir_all(&p.join(".lock")));
                }
                None
            }
        })),
        ..Hooked::default()
    };
    let spool = hooked_spool(&env, fs);
    let st = spool.stage_with_id("taken").expect("a second try");
    assert_eq!(taken.load(Ordering::SeqCst), 2);
    drop(st);
    match spool.stage_with_id("badlock") {
        Err(Error::Io { path, op, .. }) => {
            assert_eq!(op, "flock");
            assert!(path.ends_with(".lock"), "{}", path.display());
        }
        other => panic!("expected the lock's error, got {other:?}"),
    }
    assert_eq!(names(&env.root.join("staging")), vec!["taken".to_string()]);
}

/// A staging directory removed between its lock and its rename is built again; a rename that
/// fails for another reason fails the staging at once with that error.
#[test]
fn staging_retries_a_directory_removed_before_its_rename_but_not_a_rename_that_fails() {
    let env = Env::new();
    let removed = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let fs = Hooked {
        rename: Some(Box::new({
            let removed = removed.clone();
            move |from: &Path| {
                if !is_building(from) {
                    return None;
                }
                let name = from.file_name()?.to_string_lossy().into_owned();
                if name.contains("removed") && removed.fetch_add(1, Ordering::SeqCst) == 0 {
                    RealFs.remove_dir_all(from).unwrap();
                    return None;
                }
                if name.contains("eio") {
                    return Some(Err(io::Error::from_raw_os_error(libc::EIO)));
                }
                None
            }
        })),
        ..Hooked::default()
    };
    let spool = hooked_spool(&env, fs);
    let st = spool.stage_with_id("removed").expect("a second try");
    assert_eq!(removed.load(Ordering::SeqCst), 2);
    assert!(st.dir.join(".lock").exists());
    drop(st);
    match spool.stage_with_id("eio") {
        Err(Error::Io { path, op, source }) => {
            assert_eq!((op, source.raw_os_error()), ("rename", Some(libc::EIO)));
            assert!(is_building(&path), "{}", path.display());
        }
        other => panic!("expected the rename's error, got {other:?}"),
    }
    assert_eq!(
        names(&env.root.join("staging")),
        vec!["removed".to_string()]
    );
}

/// Staging an id already staged fails at once, saying so.
#[test]
fn staging_an_id_twice_says_it_is_already_staged() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    let st = stage_files(&spool, "twice", 10);
    match spool.stage_with_id("twice") {
        Err(Error::BadStaging { what, .. }) => assert!(what.contains("already staged"), "{what}"),
        other => panic!("expected already staged, got {other:?}"),
    }
    drop(st);
}

/// A directory in a staged incident with the name of one of its files is not that file: the
/// commit refuses it.
#[test]
fn a_directory_named_like_a_staged_file_fails_the_commit() {
    let env = Env::new();
    let spool = env.spool(Quotas::default());
    let st = spool.stage_with_id("dirfile").unwrap();
    std::fs::write(st.path(FileKind::MiniDump), b"mini").unwrap();
    std::fs::create_dir(st.path(FileKind::Fds)).unwrap();
    match spool.commit(st, info("heap")) {
        Err(Error::BadStaging { path, what }) => {
            assert!(path.ends_with("fds.txt"), "{}", path.display());
            assert!(what.contains("unexpected file"), "{what}");
        }
        other => panic!("expected the directory refused, got {other:?}"),
    }
    assert!(names(&spool.incidents_dir()).is_empty());
}

/// An incident of exactly the total quota (its files and its record) is committed; one byte
/// less of quota refuses it.
#[test]
fn an_incident_of_exactly_the_total_quota_is_committed() {
    let commit = |quota: u64| {
        let env = Env::new();
        let q = Quotas {
            max_total_bytes: quota,
            ..Quotas::default()
        };
        let spool = env.spool(q);
        let st = stage_files(&spool, "exact", 1000);
        spool.commit(st, info("heap"))
    };
    let size = match commit(1) {
        Err(Error::TooBig { bytes, quota: 1 }) => bytes,
        other => panic!("expected too big, got {other:?}"),
    };
    assert!(size > 1000, "{size}");
    assert_eq!(commit(size).unwrap(), "exact");
    match commit(size - 1) {
        Err(Error::TooBig { bytes, .. }) => assert_eq!(bytes, size),
        other => panic!("expected too big at {}, got {other:?}", size - 1),
    }
}
