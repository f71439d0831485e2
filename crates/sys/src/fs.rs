//! The file-system seam of the spool: every byte the spool reads or writes goes through [`Fs`],
//! so that tests can inject ENOSPC, EIO, torn writes and count write points ([`FaultFs`]).
//!
//! Invariants:
//! - [`write_atomic`] either leaves the old file in place or the whole new one: it writes a
//!   temporary sibling, fsyncs it, renames it over the target and fsyncs the directory. A failure
//!   at any step removes the temporary file (best effort) and returns the error.
//! - Nothing here panics on an I/O error.

use std::fmt;
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

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

/// Write `data` to `path` atomically: temporary sibling, fsync, rename, directory fsync.
pub fn write_atomic(fs: &dyn Fs, path: &Path, data: &[u8]) -> io::Result<()> {
    let tmp = tmp_path(path);
    let r = (|| {
        let mut f = fs.create(&tmp)?;
        f.write_all(data)?;
        f.sync()?;
        drop(f);
        fs.rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            fs.sync_dir(dir)?;
        }
        Ok(())
    })();
    if r.is_err() {
        let _ = fs.remove_file(&tmp);
    }
    r
}

/// The temporary sibling [`write_atomic`] uses for `path`: `.NAME.tmp`.
pub fn tmp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

/// Whether a file name is one of [`write_atomic`]'s temporaries.
pub fn is_tmp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
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
}
