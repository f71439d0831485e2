//! Filing: where an upload's bytes and record live (`uploads/UID.json`, `uploads/UID.bin`),
//! and how a complete one is checked against its declared SHA-256 and moved under its incident.
#![forbid(unsafe_code)]

use super::index::{report_line, Index};
use super::Shared;
use analyze::files::FileKind;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use sys::fs::{self as sfs, RealFs};

/// What the collector keeps about one tus upload (`uploads/UID.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadInfo {
    pub length: u64,
    pub incident: String,
    pub kind: String,
    pub metadata: BTreeMap<String, String>,
    /// PATCH body bytes received for this upload, including any sent again.
    pub received: u64,
    pub complete: bool,
    /// SHA-256 of the stored bytes, once complete.
    pub sha256: Option<String>,
    pub corrupt: bool,
}

/// The file name a received upload of `kind` is filed under.
pub fn file_name_for(kind: &str) -> String {
    FileKind::ALL
        .into_iter()
        .find(|k| k.upload_kind() == kind)
        .map(|k| k.file_name().to_string())
        .unwrap_or_else(|| format!("{kind}.bin"))
}

pub(super) fn upload_paths(sh: &Shared, uid: &str) -> (PathBuf, PathBuf) {
    let d = sh.cfg.dir.join("uploads");
    (d.join(format!("{uid}.json")), d.join(format!("{uid}.bin")))
}

pub(super) fn load_info(p: &Path) -> io::Result<UploadInfo> {
    let b = std::fs::read(p)?;
    serde_json::from_slice(&b).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

pub(super) fn save_info(p: &Path, i: &UploadInfo) -> io::Result<()> {
    let b = serde_json::to_vec_pretty(i).map_err(io::Error::other)?;
    sfs::write_atomic(&RealFs, p, &b)
}

/// An upload is complete: check its SHA-256 and file it under its incident ([`file`]). `info`
/// is marked complete (with the SHA-256 the answers then carry) only once that is done: if
/// filing fails (a full disk, a path that cannot be made), the upload stays incomplete with
/// every byte received, and the next HEAD or PATCH on it files it.
pub(super) fn finish(info: &mut UploadInfo, bp: &Path, sh: &Shared) -> io::Result<String> {
    let mut h = Sha256::new();
    let mut f = std::fs::File::open(bp)?;
    io::copy(&mut f, &mut HashWriter(&mut h))?;
    let sha = hex::encode(h.finalize());
    file(info, bp, sh, &sha)?;
    info.complete = true;
    info.sha256 = Some(sha.clone());
    Ok(sha)
}

/// File the blob `bp` of a complete upload whose SHA-256 is `sha` under its incident: set
/// aside as corrupt if that is not the SHA-256 declared, dropped if the incident has that file
/// already.
fn file(info: &mut UploadInfo, bp: &Path, sh: &Shared, sha: &str) -> io::Result<()> {
    let expected = info.metadata.get("sha256").map(|s| s.to_ascii_lowercase());
    if expected.as_deref().is_some_and(|e| e != sha) {
        info.corrupt = true;
        sh.counters.corrupt.fetch_add(1, Ordering::SeqCst);
        tracing::warn!(
            "collector: {}/{}: SHA-256 {sha} differs from the declared {:?}; not filed",
            info.incident,
            info.kind,
            expected
        );
        let _ = std::fs::rename(bp, bp.with_extension("corrupt"));
        return Ok(());
    }
    let dir = sh.cfg.dir.join("incidents").join(&info.incident);
    std::fs::create_dir_all(&dir)?;
    let dst = dir.join(file_name_for(&info.kind));
    let mut ix = sh.index.lock().unwrap_or_else(|p| p.into_inner());
    if dst.exists() {
        sh.counters.duplicates.fetch_add(1, Ordering::SeqCst);
        tracing::warn!(
            "collector: duplicate {}/{} received; keeping the first",
            info.incident,
            info.kind
        );
        if std::fs::remove_file(bp).is_ok() {
            sh.quota.release(info.length);
        }
        return Ok(());
    }
    std::fs::rename(bp, &dst)?;
    let _ = std::fs::File::open(&dir).and_then(|d| d.sync_all());
    sh.counters.files_completed.fetch_add(1, Ordering::SeqCst);
    let name = file_name_for(&info.kind);
    let report = info.kind == FileKind::Report.upload_kind();
    if report {
        sh.counters.reports.fetch_add(1, Ordering::SeqCst);
    }
    took_in(sh, &mut ix, &info.incident, &name, &dst, report);
    Ok(())
}

/// Take in file `name` of incident `id`, just filed at `path` (an upload, or the collector's
/// own analysis): its summary, the collector's analysis if the incident is now ready for one
/// (`complete`), the report's line on stdout if `report` and `--print`, and `index.html` again.
pub(super) fn took_in(
    sh: &Shared,
    ix: &mut Index,
    id: &str,
    name: &str,
    path: &Path,
    report: bool,
) {
    let summary = ix.filed(id, name, path);
    super::complete::offer(sh, &summary);
    if report && sh.cfg.print {
        println!("{}", report_line(&sh.cfg.dir, &summary));
        let _ = io::stdout().flush();
    }
    if let Err(e) = ix.write(sh.cfg.index_page) {
        tracing::warn!(
            "collector: {}: {e}; the index is served at / all the same",
            sh.cfg.dir.join("index.html").display()
        );
    }
}

struct HashWriter<'a>(&'a mut Sha256);
impl Write for HashWriter<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.update(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
