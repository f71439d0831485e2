//! The file-system seam and the one durable atomic write.
//!
//! Owns: [`Fs`], the seam every byte of the spool goes through, so that tests can inject
//! ENOSPC, EIO, torn writes and count write points ([`FaultFs`]); and the one atomic write of
//! the workspace ([`write_atomic_from`], with [`write_atomic`] over a seam and
//! [`write_file_atomic`] on the real file system), its one temporary-name rule ([`tmp_path`],
//! recognised by [`is_tmp_name`] and [`is_tmp_of`]) and the clean-up of what a killed writer
//! left ([`remove_stale_temporaries`]). Every writer that replaces a file whole (the spool, the
//! policy cache, `status.json`, the dump quota, the analysis attempts, the death counter, the
//! CLI's outputs, the collector's records) goes through it; there is no other.
//!
//! Invariants:
//! - An atomic write either leaves the old file in place or the whole new one: it writes a
//!   temporary sibling, fsyncs it, renames it over the target and fsyncs the directory. A
//!   failure at any step removes the temporary file (best effort) and returns the error as the
//!   OS gave it (its `raw_os_error` intact). Only a failing directory fsync, after the rename,
//!   leaves the new file in place while reporting an error.
//! - A temporary is named `.NAME.PID.SEQ.tmp`: a writer's own, so concurrent writers of one
//!   path never rename each other's half-written file.
//! - Nothing here panics on an I/O error.

use std::fmt;
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

/// A file open for writing through an [`Fs`].
pub trait FsFile: Write + Send {
    /// Flush the file's data and metadata to the device (fsync).
    fn sync(&mut self) -> io::Result<()>;
}

/// A file open for reading through an [`Fs`].
pub trait FsRead: Read + Seek + Send {}
impl<T: Read + Seek + Send> FsRead for T {}

/// One directory entry as [`Fs::list`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub is_dir: bool,
    /// Bytes for a file; for a directory, 0 (use [`dir_size`]).
    pub len: u64,
    /// Modification time, milliseconds since the Unix epoch (0 if unknown).
    pub mtime_ms: u64,
}

/// The operations the spool needs. Implementations: [`RealFs`], [`FaultFs`].
pub trait Fs: Send + Sync + fmt::Debug {
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Create (or truncate) a file for writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    fn open(&self, path: &Path) -> io::Result<Box<dyn FsRead>>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// fsync a directory, so that renames and creations inside it are durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// fsync a file someone else wrote (a staged dump or inventory), so that its bytes are
    /// durable before a record that names it is.
    fn sync_file(&self, path: &Path) -> io::Result<()>;
    /// The entries of a directory, in no particular order.
    fn list(&self, path: &Path) -> io::Result<Vec<Entry>>;
    /// The entry for one path (name is the last component).
    fn stat(&self, path: &Path) -> io::Result<Entry>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

struct RealFile(std::fs::File);

impl Write for RealFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl FsFile for RealFile {
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_all()
    }
}

fn entry_of(name: String, md: &std::fs::Metadata) -> Entry {
    let mtime_ms = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    Entry {
        name,
        is_dir: md.is_dir(),
        len: if md.is_dir() { 0 } else { md.len() },
        mtime_ms,
    }
}

impl Fs for RealFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(RealFile(std::fs::File::create(path)?)))
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn FsRead>> {
        Ok(Box::new(std::fs::File::open(path)?))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::File::open(path)?.sync_all()
    }
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        std::fs::File::open(path)?.sync_all()
    }
    fn list(&self, path: &Path) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(path)? {
            let e = e?;
            let md = match e.metadata() {
                Ok(m) => m,
                // Removed between readdir and stat: skip it.
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => return Err(err),
            };
            out.push(entry_of(e.file_name().to_string_lossy().into_owned(), &md));
        }
        Ok(out)
    }
    fn stat(&self, path: &Path) -> io::Result<Entry> {
        let md = std::fs::metadata(path)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(entry_of(name, &md))
    }
}

/// Write `data` to `path` atomically through `fs`: [`write_atomic_from`] with one write.
pub fn write_atomic(fs: &dyn Fs, path: &Path, data: &[u8]) -> io::Result<()> {
    write_atomic_from(fs, path, |f| f.write_all(data))
}

/// [`write_atomic`] on the real file system: what every writer outside the spool's tests calls
/// (the policy cache, `status.json`, the dump quota, the death counter, the CLI's outputs...).
pub fn write_file_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    write_atomic(&RealFs, path, data)
}

/// The one durable atomic write: create the temporary sibling [`tmp_path`] of `path`, let
/// `fill` write the new contents into it, flush and fsync it, then [`commit_tmp`] (rename over
/// `path`, fsync the directory). On any failure the temporary is removed and the error
/// returned; the old file, if any, is then still in place (unless only the directory fsync
/// failed, after the rename: the new file is in place, its durability unknown).
pub fn write_atomic_from(
    fs: &dyn Fs,
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = tmp_path(path);
    let written = (|| {
        let mut f = fs.create(&tmp)?;
        fill(&mut f)?;
        f.flush()?;
        f.sync()
    })();
    if let Err(e) = written {
        let _ = fs.remove_file(&tmp);
        return Err(e);
    }
    commit_tmp(fs, &tmp, path)
}

/// The last step of an atomic write, for a writer that filled (and fsynced) a temporary of
/// [`tmp_path`] itself (the CLI, which renames several outputs only once all are written):
/// rename `tmp` over `path`, then fsync `path`'s directory so that the rename is durable. When
/// the rename fails, `tmp` is removed and the error returned.
pub fn commit_tmp(fs: &dyn Fs, tmp: &Path, path: &Path) -> io::Result<()> {
    if let Err(e) = fs.rename(tmp, path) {
        let _ = fs.remove_file(tmp);
        return Err(e);
    }
    match path.parent() {
        // `Path::parent` of a bare name is "": the current directory.
        Some(dir) if dir.as_os_str().is_empty() => fs.sync_dir(Path::new(".")),
        Some(dir) => fs.sync_dir(dir),
        None => Ok(()),
    }
}

/// The one naming rule of temporaries: `.NAME.PID.SEQ.tmp` beside `path` (hidden, and ending in
/// `.tmp`, so [`is_tmp_name`] knows it). The process id and a per-process sequence number make
/// it a writer's own: two writers of one path at once (two threads, or two processes of the
/// app sharing the data dir) each rename a whole file of their own and the last rename wins,
/// where with one fixed name a writer could rename the other's half-written file into place or
/// find its own gone.
pub fn tmp_path(path: &Path) -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{seq}.tmp", std::process::id()))
}

/// Whether a file name is a temporary of [`tmp_path`] (of any writer, any target): the spool's
/// recovery removes those it finds. Also true of the older fixed names (`.NAME.tmp`).
pub fn is_tmp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// Whether `name` is a temporary of [`tmp_path`] for a file named `target` (`.TARGET.PID.SEQ.tmp`,
/// or the older fixed `.TARGET.tmp`).
pub fn is_tmp_of(name: &str, target: &str) -> bool {
    let Some(rest) = name
        .strip_prefix('.')
        .and_then(|n| n.strip_prefix(target))
        .and_then(|n| n.strip_suffix(".tmp"))
    else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    rest.is_empty()
        || rest
            .strip_prefix('.')
            .and_then(|r| r.split_once('.'))
            .is_some_and(|(pid, seq)| digits(pid) && digits(seq))
}

/// Remove the temporaries of [`tmp_path`] for `name` in `dir` that a writer killed between
/// creating one and renaming it left behind: those at least `min_age` old, so that a live
/// writer's file is left alone. Returns how many were removed; errors are not reported (a
/// directory that cannot be read has nothing to remove).
pub fn remove_stale_temporaries(dir: &Path, name: &str, min_age: Duration) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in rd.flatten() {
        if !is_tmp_of(&e.file_name().to_string_lossy(), name) {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= min_age);
        if old && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Total bytes of the files under `path` (a file: its length).
pub fn dir_size(fs: &dyn Fs, path: &Path) -> io::Result<u64> {
    let e = fs.stat(path)?;
    if !e.is_dir {
        return Ok(e.len);
    }
    let mut total = 0u64;
    for e in fs.list(path)? {
        total += if e.is_dir {
            dir_size(fs, &path.join(&e.name)).unwrap_or(0)
        } else {
            e.len
        };
    }
    Ok(total)
}

/// What [`FaultFs`] does at its chosen write point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// ENOSPC: the disk is full.
    NoSpace,
    /// EIO: the device failed.
    Io,
    /// A write puts down only the first half of its buffer, then fails with EIO (other
    /// operations at that point fail with EIO).
    Torn,
}

impl Fault {
    fn error(self) -> io::Error {
        match self {
            Fault::NoSpace => io::Error::from_raw_os_error(libc::ENOSPC),
            Fault::Io | Fault::Torn => io::Error::from_raw_os_error(libc::EIO),
        }
    }
}

#[derive(Debug, Default)]
struct Plan {
    /// Fail the write point with this index (0-based), if any.
    at: Option<(u64, Fault)>,
    /// Keep failing every write point after the first fault (a disk that stays full).
    sticky: bool,
}

/// A [`Fs`] over [`RealFs`] that counts write points (create, each write, fsync, rename,
/// remove, directory and file fsync, mkdir) and fails the chosen one.
#[derive(Debug, Clone)]
pub struct FaultFs {
    inner: Arc<dyn Fs>,
    points: Arc<AtomicU64>,
    plan: Arc<Mutex<Plan>>,
    tripped: Arc<AtomicBool>,
}

impl Default for FaultFs {
    fn default() -> Self {
        Self::new()
    }
}

impl FaultFs {
    pub fn new() -> FaultFs {
        FaultFs {
            inner: Arc::new(RealFs),
            points: Arc::new(AtomicU64::new(0)),
            plan: Arc::new(Mutex::new(Plan::default())),
            tripped: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Fail write point `index` (counted from now) with `fault`; with `sticky`, fail every
    /// later one too.
    pub fn fail_at(&self, index: u64, fault: Fault, sticky: bool) {
        self.points.store(0, Ordering::SeqCst);
        self.tripped.store(false, Ordering::SeqCst);
        if let Ok(mut p) = self.plan.lock() {
            *p = Plan {
                at: Some((index, fault)),
                sticky,
            };
        }
    }

    /// Stop injecting faults and reset the counter.
    pub fn heal(&self) {
        self.points.store(0, Ordering::SeqCst);
        self.tripped.store(false, Ordering::SeqCst);
        if let Ok(mut p) = self.plan.lock() {
            *p = Plan::default();
        }
    }

    /// Write points passed since the last [`fail_at`](Self::fail_at) / [`heal`](Self::heal).
    pub fn points(&self) -> u64 {
        self.points.load(Ordering::SeqCst)
    }

    /// Whether the planned fault has fired.
    pub fn tripped(&self) -> bool {
        self.tripped.load(Ordering::SeqCst)
    }

    /// Count one write point; the fault to inject there, if any.
    fn point(&self) -> Option<Fault> {
        let n = self.points.fetch_add(1, Ordering::SeqCst);
        let p = self.plan.lock().ok()?;
        let (at, fault) = p.at?;
        if n == at || (p.sticky && n > at) {
            self.tripped.store(true, Ordering::SeqCst);
            Some(fault)
        } else {
            None
        }
    }

    fn check(&self) -> io::Result<()> {
        match self.point() {
            Some(f) => Err(f.error()),
            None => Ok(()),
        }
    }

    /// Removing frees space: a full disk does not stop it (EIO still does).
    fn check_remove(&self) -> io::Result<()> {
        match self.point() {
            Some(Fault::NoSpace) | None => Ok(()),
            Some(f) => Err(f.error()),
        }
    }
}

struct FaultFile {
    inner: Box<dyn FsFile>,
    fs: FaultFs,
}

impl Write for FaultFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.fs.point() {
            None => self.inner.write(buf),
            Some(Fault::Torn) => {
                let half = buf.len() / 2;
                self.inner.write_all(&buf[..half])?;
                Err(Fault::Torn.error())
            }
            Some(f) => Err(f.error()),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl FsFile for FaultFile {
    fn sync(&mut self) -> io::Result<()> {
        self.fs.check()?;
        self.inner.sync()
    }
}

impl Fs for FaultFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.check()?;
        self.inner.create_dir_all(path)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.check()?;
        Ok(Box::new(FaultFile {
            inner: self.inner.create(path)?,
            fs: self.clone(),
        }))
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn FsRead>> {
        self.inner.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.check()?;
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.check_remove()?;
        self.inner.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.check_remove()?;
        self.inner.remove_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.check()?;
        self.inner.sync_dir(path)
    }
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        self.check()?;
        self.inner.sync_file(path)
    }
    fn list(&self, path: &Path) -> io::Result<Vec<Entry>> {
        self.inner.list(path)
    }
    fn stat(&self, path: &Path) -> io::Result<Entry> {
        self.inner.stat(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_keeps_old_file_on_every_fault() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.json");
        let fs = FaultFs::new();
        write_atomic(&fs, &p, b"old contents").unwrap();
        let n = {
            fs.heal();
            write_atomic(&fs, &p, b"new contents!").unwrap();
            fs.points()
        };
        write_atomic(&fs, &p, b"old contents").unwrap();
        for fault in [Fault::NoSpace, Fault::Io, Fault::Torn] {
            for i in 0..n {
                fs.fail_at(i, fault, false);
                let r = write_atomic(&fs, &p, b"new contents!");
                let got = std::fs::read(&p).unwrap();
                if r.is_err() {
                    // The rename may have happened before a failing directory fsync.
                    assert!(
                        got == b"old contents" || got == b"new contents!",
                        "point {i} {fault:?}: {got:?}"
                    );
                } else {
                    assert_eq!(got, b"new contents!");
                }
                fs.heal();
                write_atomic(&fs, &p, b"old contents").unwrap();
            }
        }
        // No temporaries left behind.
        let names: Vec<_> = RealFs
            .list(d.path())
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, vec!["x.json".to_string()]);
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<_> = RealFs
            .list(dir)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        v.sort();
        v
    }

    /// A full disk at any write point of the write: the error is ENOSPC as the OS gave it, the
    /// old file is whole, and no temporary is left.
    #[test]
    fn a_full_disk_returns_enospc_and_leaves_the_old_file_and_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("status.json");
        write_file_atomic(&p, b"old").unwrap();
        let fs = FaultFs::new();
        // create, write, fsync, rename: a disk that stays full from each of them on.
        for at in 0..4 {
            fs.fail_at(at, Fault::NoSpace, true);
            let e = write_atomic(&fs, &p, b"new contents").unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "point {at}: {e}");
            assert_eq!(std::fs::read(&p).unwrap(), b"old", "point {at}");
            assert_eq!(names(d.path()), vec!["status.json"], "point {at}");
        }
        fs.heal();
        write_atomic(&fs, &p, b"new contents").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new contents");
    }

    /// A directory that does not exist: an error naming nothing new, nothing created.
    #[test]
    fn a_missing_directory_is_an_error_and_creates_nothing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("gone").join("x.json");
        let e = write_file_atomic(&p, b"x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert!(!d.path().join("gone").exists());
        assert!(names(d.path()).is_empty());
    }

    /// A streaming writer that fails midway (a gzip of a file that cannot be read) leaves the
    /// old file and no temporary; one that succeeds puts every byte in place.
    #[test]
    fn a_streaming_write_that_fails_leaves_the_old_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("mini.hprof.gz");
        write_file_atomic(&p, b"old").unwrap();
        let e = write_atomic_from(&RealFs, &p, |w| {
            w.write_all(b"half of it")?;
            Err(io::Error::from_raw_os_error(libc::EIO))
        })
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(names(d.path()), vec!["mini.hprof.gz"]);
        write_atomic_from(&RealFs, &p, |w| {
            for c in [b"ab", b"cd"] {
                w.write_all(c)?;
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"abcd");
    }

    /// [`commit_tmp`] of a temporary that cannot be renamed (its target is a directory):
    /// the temporary is removed, the error returned.
    #[test]
    fn a_failed_commit_removes_the_temporary() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("inside"), b"x").unwrap();
        let tmp = tmp_path(&out);
        std::fs::write(&tmp, b"new").unwrap();
        assert!(commit_tmp(&RealFs, &tmp, &out).is_err());
        assert!(!tmp.exists());
        assert_eq!(names(d.path()), vec!["out"]);
    }

    /// A commit is two write points: the rename and the directory's fsync.
    #[test]
    fn a_commit_renames_and_fsyncs_the_directory() {
        let fs = FaultFs::new();
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("x");
        let tmp = tmp_path(&target);
        std::fs::write(&tmp, b"x").unwrap();
        commit_tmp(&fs, &tmp, &target).unwrap();
        assert_eq!(fs.points(), 2);
        assert_eq!(names(d.path()), vec!["x"]);
        // The directory fsync fails after the rename: the error is returned, the file is new.
        let tmp = tmp_path(&target);
        std::fs::write(&tmp, b"y").unwrap();
        fs.fail_at(1, Fault::Io, false);
        let e = commit_tmp(&fs, &tmp, &target).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        assert_eq!(std::fs::read(&target).unwrap(), b"y");
        assert_eq!(names(d.path()), vec!["x"]);
    }

    /// One naming rule: every temporary is a writer's own, hidden, and known to the recovery.
    #[test]
    fn temporaries_follow_one_naming_rule() {
        let p = Path::new("/data/status.json");
        let (a, b) = (tmp_path(p), tmp_path(p));
        assert_ne!(a, b, "each write has a temporary of its own");
        for t in [&a, &b] {
            assert_eq!(t.parent(), p.parent());
            let n = t.file_name().unwrap().to_str().unwrap();
            assert!(
                n.starts_with(&format!(".status.json.{}.", std::process::id())),
                "{n}"
            );
            assert!(is_tmp_name(n), "{n}");
            assert!(is_tmp_of(n, "status.json"), "{n}");
            assert!(!is_tmp_of(n, "status"), "{n}");
            assert!(!is_tmp_of(n, "json"), "{n}");
        }
        assert!(is_tmp_of(".status.json.tmp", "status.json"));
        assert!(!is_tmp_of(".status.json.x.0.tmp", "status.json"));
        assert!(!is_tmp_of("status.json", "status.json"));
        assert!(!is_tmp_name("mini.hprof"));
        assert!(!is_tmp_name("report.json.tmp"), "not hidden: not ours");
    }

    /// Writer `w`'s body: long, and of its own bytes throughout, so a mix of two bodies, a
    /// short one or a hole shows.
    fn body_of(w: u8) -> Vec<u8> {
        vec![b'a' + w; 64 * 1024]
    }

    /// Two writers of one file at once (the agent's thread and the I/O thread, or two processes
    /// of the app) each put a whole file in place, and a reader never sees a torn one. With one
    /// fixed temporary name, a writer renamed the other's half-written file or found its own
    /// gone ("No such file or directory").
    #[test]
    fn two_writers_of_one_file_never_tear_it_nor_fail() {
        use std::sync::atomic::AtomicBool;
        let dir = tempfile::tempdir().unwrap();
        let path = Arc::new(dir.path().join("status.json"));
        write_file_atomic(&path, b"{}").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2u8)
            .map(|w| {
                let path = Arc::clone(&path);
                std::thread::spawn(move || {
                    let body = body_of(w);
                    let mut errors = Vec::new();
                    for _ in 0..300 {
                        if let Err(e) = write_file_atomic(&path, &body) {
                            errors.push(e.to_string());
                        }
                    }
                    errors
                })
            })
            .collect();
        let reader = {
            let (path, stop) = (Arc::clone(&path), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut torn = 0;
                let whole = [b"{}".to_vec(), body_of(0), body_of(1)];
                while !stop.load(Ordering::Relaxed) {
                    let b = std::fs::read(&*path).unwrap();
                    if !whole.contains(&b) {
                        torn += 1;
                    }
                }
                torn
            })
        };
        let errors: Vec<String> = writers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        stop.store(true, Ordering::Relaxed);
        let torn = reader.join().unwrap();
        assert!(
            errors.is_empty(),
            "writes failed: {:?}",
            &errors[..errors.len().min(3)]
        );
        assert_eq!(torn, 0, "a reader saw {torn} torn files");
        assert_eq!(names(dir.path()), vec!["status.json"], "temporaries left");
    }

    #[test]
    fn stale_temporaries_are_removed_and_fresh_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".status.json.41.0.tmp"), b"half").unwrap();
        std::fs::write(dir.path().join(".status.json.tmp"), b"older rule").unwrap();
        std::fs::write(dir.path().join(".other.json.41.0.tmp"), b"not ours").unwrap();
        let zero = Duration::ZERO;
        let hour = Duration::from_secs(3600);
        assert_eq!(remove_stale_temporaries(dir.path(), "status.json", hour), 0);
        assert_eq!(remove_stale_temporaries(dir.path(), "status.json", zero), 2);
        assert_eq!(names(dir.path()), vec![".other.json.41.0.tmp"]);
        assert_eq!(
            remove_stale_temporaries(&dir.path().join("none"), "x", zero),
            0
        );
    }

    /// An fsync that cannot be done is an error, never a silent success: a directory or file
    /// that is gone cannot be made durable, and the caller (a commit, an atomic write) must
    /// know.
    #[test]
    fn syncing_what_is_not_there_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let gone = d.path().join("gone");
        for r in [RealFs.sync_dir(&gone), RealFs.sync_file(&gone)] {
            let e = r.expect_err("fsync of a missing path");
            assert_eq!(e.kind(), io::ErrorKind::NotFound);
        }
        RealFs.sync_dir(d.path()).unwrap();
        std::fs::write(d.path().join("f"), b"x").unwrap();
        RealFs.sync_file(&d.path().join("f")).unwrap();
    }

    /// [`RealFs`], noting the directories it is asked to fsync.
    #[derive(Debug, Default)]
    struct DirSyncs(std::sync::Mutex<Vec<PathBuf>>);

    impl Fs for DirSyncs {
        fn create_dir_all(&self, path: &Path) -> io::Result<()> {
            RealFs.create_dir_all(path)
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
            RealFs.rename(from, to)
        }
        fn remove_file(&self, path: &Path) -> io::Result<()> {
            RealFs.remove_file(path)
        }
        fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
            RealFs.remove_dir_all(path)
        }
        fn sync_dir(&self, path: &Path) -> io::Result<()> {
            self.0.lock().unwrap().push(path.to_path_buf());
            RealFs.sync_dir(path)
        }
        fn sync_file(&self, path: &Path) -> io::Result<()> {
            RealFs.sync_file(path)
        }
        fn list(&self, path: &Path) -> io::Result<Vec<Entry>> {
            RealFs.list(path)
        }
        fn stat(&self, path: &Path) -> io::Result<Entry> {
            RealFs.stat(path)
        }
    }

    /// A commit fsyncs the directory of the file it renamed into place, not the current one.
    #[test]
    fn a_commit_fsyncs_the_files_own_directory() {
        let d = tempfile::tempdir().unwrap();
        let fs = DirSyncs::default();
        write_atomic(&fs, &d.path().join("x.json"), b"x").unwrap();
        assert_eq!(*fs.0.lock().unwrap(), vec![d.path().to_path_buf()]);
    }
}
