//! The files the commands read and write, checked before any work is done.
//!
//! Owns: opening inputs ([`input`], [`map_input`], [`read_input`]), the check that a dump holds
//! heap records at all ([`heap_records`]), the checks on outputs ([`check_output`]) and writing
//! them ([`Staged`]: a temporary beside OUT, named and committed by `sys::fs`'s one atomic
//! write: fsync, rename, directory fsync, only when complete).
//!
//! Invariants:
//! - An input that is missing, unreadable, a directory, or not a regular file (a pipe, a device)
//!   is the command line's fault: exit 2, `FILE: what is wrong` with the OS's reason.
//! - A failure about an output names the OUTPUT path (never its temporary) and exits 1; an output
//!   that is an input of the same command (the same file, by device and inode) exits 2 before
//!   anything is written.
//! - Outputs are checked (their directory exists, they are not a directory) before the input is
//!   read, so a long analysis is not thrown away for a typo; a command with several outputs
//!   writes all of them to temporaries first and renames them only when all were written.
//! - A temporary is removed whenever its [`Staged`] is dropped without being committed, so no
//!   half-written OUT and no temporary is left behind by any failure.
//! - An option file is read whole, up to [`MAX_OPTION_FILE`] bytes.
//! - [`heap_records`] reads at most the record heads before the first heap record, through one
//!   buffer of [`HEAD_BUF`] bytes. The commands call it after their parse succeeded (before any
//!   output is renamed into place), so every other error is the parser's, named at its offset.

use crate::Failure;
use hprof::{self, tag};
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use sys::mapped::Mapped;

/// The buffer [`heap_records`] reads record heads through.
pub const HEAD_BUF: usize = 64 << 10;

/// The largest option file (`--config`, `--running-info`) read; the agent's running info, with
/// its thread list, is a few hundred KiB.
pub const MAX_OPTION_FILE: u64 = 64 << 20;

fn fail(code: u8, message: String) -> Failure {
    Failure { code, message }
}

/// Open `path` to read it: it must be a regular file this process can open (exit 2 otherwise).
pub fn input(path: &Path) -> Result<File, Failure> {
    let cannot = |e: std::io::Error| fail(2, format!("{}: cannot open: {e}", path.display()));
    // Looked at before it is opened: opening a named pipe would wait for a writer.
    let m = std::fs::metadata(path).map_err(cannot)?;
    if m.is_dir() {
        return Err(fail(
            2,
            format!("{}: is a directory, not a file", path.display()),
        ));
    }
    if !m.is_file() {
        return Err(fail(
            2,
            format!(
                "{}: not a regular file (a pipe or a device): oomguard maps its input; save it to a file first",
                path.display()
            ),
        ));
    }
    File::open(path).map_err(cannot)
}

/// [`input`], then map it whole.
pub fn map_input(path: &Path) -> Result<Mapped, Failure> {
    input(path)?;
    Mapped::open(path).map_err(|e| fail(1, format!("{}: cannot map: {e}", path.display())))
}

/// [`input`], then read it whole: a small file (JSON options), of at most [`MAX_OPTION_FILE`]
/// bytes (exit 2 past it).
pub fn read_input(path: &Path) -> Result<Vec<u8>, Failure> {
    read_input_at_most(path, MAX_OPTION_FILE)
}

/// [`read_input`] with a bound of its own, `max` bytes (exit 2 past it).
pub fn read_input_at_most(path: &Path, max: u64) -> Result<Vec<u8>, Failure> {
    let f = input(path)?;
    let mut b = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut b)
        .map_err(|e| fail(2, format!("{}: cannot read: {e}", path.display())))?;
    if b.len() as u64 > max {
        return Err(fail(
            2,
            format!(
                "{}: byte {max}: larger than the {} MiB this file may hold",
                path.display(),
                max >> 20
            ),
        ));
    }
    Ok(b)
}

/// Whether the HPROF `f` holds a heap dump: an error (exit 2, `FILE: byte END: ...`) when its
/// record list runs from the header to the end of the file without one HEAP_DUMP or
/// HEAP_DUMP_SEGMENT record (a header alone, strings and classes only). Called after the parser
/// read the file without error, so that a wrong length or a truncation is reported as such;
/// a file that is not an HPROF, is truncated or has an unknown tag passes here anyway.
pub fn heap_records(path: &Path, f: &File) -> Result<(), Failure> {
    let io = |e: std::io::Error| fail(2, format!("{}: cannot read: {e}", path.display()));
    let len = f.metadata().map_err(io)?.len();
    let mut r = BufReader::with_capacity(HEAD_BUF, f);
    let mut header = [0u8; hprof::HEADER_LEN];
    if len < hprof::HEADER_LEN as u64
        || r.read_exact(&mut header).is_err()
        || !header.starts_with(b"JAVA PROFILE ")
    {
        return Ok(());
    }
    let mut pos = hprof::HEADER_LEN as u64;
    let mut records = 0u64;
    while pos < len {
        let mut h = [0u8; 9];
        if len - pos < 9 || r.read_exact(&mut h).is_err() {
            return Ok(());
        }
        if matches!(h[0], tag::HEAP_DUMP | tag::HEAP_DUMP_SEGMENT) || tag::name(h[0]).is_none() {
            return Ok(());
        }
        let body = hprof::read_u32(&h[5..]) as u64;
        pos += 9 + body;
        if pos > len || r.seek_relative(body as i64).is_err() {
            return Ok(());
        }
        records += 1;
    }
    Err(fail(
        2,
        format!(
            "{}: byte {len}: no heap dump records: the file ends after its header and {records} other record(s), none of them a HEAP_DUMP or HEAP_DUMP_SEGMENT",
            path.display()
        ),
    ))
}

/// Check `out` before any work: its directory exists, it is not a directory, and it is none of
/// `inputs`.
pub fn check_output(out: &Path, inputs: &[&Path]) -> Result<(), Failure> {
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(fail(
                1,
                format!(
                    "{}: cannot write: {} is not a directory",
                    out.display(),
                    parent.display()
                ),
            ))
        }
        Err(e) => {
            return Err(fail(
                1,
                format!(
                    "{}: cannot write: directory {}: {e}",
                    out.display(),
                    parent.display()
                ),
            ))
        }
    }
    let Ok(m) = std::fs::metadata(out) else {
        return Ok(());
    };
    if m.is_dir() {
        return Err(fail(
            1,
            format!("{}: cannot write: is a directory", out.display()),
        ));
    }
    for i in inputs {
        if std::fs::metadata(i).is_ok_and(|im| im.dev() == m.dev() && im.ino() == m.ino()) {
            return Err(fail(
                2,
                format!(
                    "{}: the output is the input {}: it would be overwritten; write elsewhere",
                    out.display(),
                    i.display()
                ),
            ));
        }
    }
    Ok(())
}

/// An output being written: a temporary beside OUT (or OUT itself when it is a device or a
/// pipe, say /dev/null, which a rename would replace). Dropped without [`Staged::commit`] or
/// [`commit_all`], the temporary is removed.
pub struct Staged {
    out: PathBuf,
    /// The temporary, `None` when OUT is written in place.
    tmp: Option<PathBuf>,
    file: Option<File>,
}

impl Staged {
    /// Create the temporary for `out` (call [`check_output`] first).
    pub fn new(out: &Path) -> Result<Staged, Failure> {
        let cannot = |e: std::io::Error| fail(1, format!("{}: cannot write: {e}", out.display()));
        if std::fs::metadata(out).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(out)
                .map_err(cannot)?;
            return Ok(Staged {
                out: out.to_path_buf(),
                tmp: None,
                file: Some(f),
            });
        }
        let tmp = sys::fs::tmp_path(out);
        let f = File::create(&tmp).map_err(cannot)?;
        Ok(Staged {
            out: out.to_path_buf(),
            tmp: Some(tmp),
            file: Some(f),
        })
    }

    /// The file to write to.
    pub fn file(&mut self) -> &mut File {
        self.file
            .as_mut()
            .expect("a staged file is open until committed")
    }

    /// Take the file out (for a writer that owns it); give it back with [`Staged::put`].
    pub fn take(&mut self) -> File {
        self.file
            .take()
            .expect("a staged file is open until committed")
    }

    pub fn put(&mut self, f: File) {
        self.file = Some(f);
    }

    /// Write `bytes` whole.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        let out = self.out.display().to_string();
        self.file()
            .write_all(bytes)
            .map_err(|e| fail(1, format!("{out}: cannot write: {e}")))
    }

    /// Flush the temporary to disk and close it (the rename is [`commit_all`]'s).
    fn finish(&mut self) -> Result<(), Failure> {
        if let (Some(f), Some(_)) = (self.file.take(), &self.tmp) {
            f.sync_all()
                .map_err(|e| fail(1, format!("{}: cannot write: {e}", self.out.display())))?;
        }
        Ok(())
    }

    /// [`commit_all`] of this one output.
    pub fn commit(self) -> Result<(), Failure> {
        commit_all(vec![self])
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(t) = &self.tmp {
            let _ = std::fs::remove_file(t);
        }
    }
}

/// Flush every output, then rename each into place: none is renamed unless all were written.
pub fn commit_all(mut staged: Vec<Staged>) -> Result<(), Failure> {
    for s in &mut staged {
        s.finish()?;
    }
    for s in &mut staged {
        if let Some(t) = s.tmp.take() {
            // The last step of the one atomic write: rename, directory fsync (the temporary is
            // removed if the rename fails).
            sys::fs::commit_tmp(&sys::fs::RealFs, &t, &s.out)
                .map_err(|e| fail(1, format!("{}: cannot write: {e}", s.out.display())))?;
        }
    }
    Ok(())
}
