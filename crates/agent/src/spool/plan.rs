//! Planning an analysed incident's upload: the compressed mini dump, `meta.json`, the hashes.

use super::*;

impl SpoolGuard<'_> {
    /// Freeze an analysed incident for upload: compress the mini dump once, hash every file,
    /// write meta.json (with the evictions and losses since the last report, and the files the
    /// incident held that are gone, each also logged as a warning: the rest still goes up), and
    /// record the plan (state `uploading`). Idempotent for an incident already uploading.
    pub fn plan_upload(&self, id: &str) -> Result<Incident> {
        let fs = self.fs();
        let mut inc = self.spool.read_incident(id)?;
        if inc.state != State::Analysed {
            return Ok(inc);
        }
        let dir = self.spool.incident_dir(id);
        let mini = dir.join(FileKind::MiniDump.file_name());
        let gz = dir.join(FileKind::MiniDumpGz.file_name());
        if fs.stat(&mini).is_ok() {
            compress(fs, &mini, &gz).map_err(io_err(&gz, "compress"))?;
        }
        // Every file but meta.json first: meta.json names those that should be here and are not.
        let mut uploads = Vec::new();
        let mut missing = Vec::new();
        for k in [
            FileKind::Report,
            FileKind::Fds,
            FileKind::Threads,
            FileKind::MiniDumpGz,
        ] {
            let p = dir.join(k.file_name());
            match hash_file(fs, &p) {
                Ok((sha256, size)) => uploads.push(Upload::planned(k, sha256, size)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if expected(&inc, k) {
                        missing.push(k.file_name());
                    }
                }
                Err(e) => {
                    return Err(Error::Io {
                        path: p,
                        op: "hash",
                        source: e,
                    })
                }
            }
        }
        if !missing.is_empty() {
            tracing::warn!(
                "spool: {id}: {} should be here and {} not; uploading what is left, with meta.json \
                 naming what is missing",
                missing.join(", "),
                if missing.len() == 1 { "is" } else { "are" }
            );
        }
        let pending = self.spool.state().pending;
        let meta = serde_json::json!({
            "id": inc.id,
            "createdMs": inc.created_ms,
            "reason": inc.reason,
            "samples": inc.samples,
            "runningInfo": inc.running_info,
            "policyVersion": inc.policy_version,
            "analysisAttempts": inc.analysis_attempts,
            "analysisError": inc.analysis_error,
            "dumpError": inc.dump_error,
            // null: an incident recorded before the spool listed its files (nothing checked).
            "missing": inc.written.as_ref().map(|_| &missing),
            "evictions": pending.evictions,
            "evictedBytes": pending.evicted_bytes,
            "losses": pending.losses,
            "evicted": pending.eviction_records,
            "lost": pending.loss_records,
        });
        let mp = dir.join(FileKind::Meta.file_name());
        let mbytes = serde_json::to_vec_pretty(&meta).unwrap_or_default();
        fs::write_atomic(fs, &mp, &mbytes).map_err(io_err(&mp, "write"))?;
        let (sha256, size) = hash_file(fs, &mp).map_err(io_err(&mp, "hash"))?;
        uploads.insert(0, Upload::planned(FileKind::Meta, sha256, size));
        inc.uploads = uploads;
        inc.accounting = pending.clone();
        inc.state = State::Uploading;
        self.save(&inc)?;
        // The plan is durable: the counts now travel with this incident.
        if !pending.is_empty() {
            let _ = self.spool.update_state(|s| {
                if s.pending == pending {
                    s.pending = Accounting::default();
                }
            });
        }
        let _ = fs.remove_file(&mini);
        // The plan added meta.json and the compressed copy: back under the quotas (this may
        // evict the incident itself if it is the oldest and the spool is full).
        if let Err(e) = self.enforce_quotas(0, 0) {
            tracing::warn!("spool: quota enforcement failed: {e}");
        }
        if fs.stat(&dir).is_err() {
            return Err(Error::NotFound(id.to_string()));
        }
        Ok(inc)
    }
}

/// Whether `kind` should be in `inc`'s directory when its upload is planned: it was seen written
/// (the mini dump counts for its compressed copy, made by the planning itself). The full dump is
/// never uploaded, and a record without a file list expects nothing.
pub(super) fn expected(inc: &Incident, kind: FileKind) -> bool {
    let seen = |k| inc.written.as_ref().is_some_and(|w| w.contains(&k));
    match kind {
        FileKind::MiniDumpGz => seen(FileKind::MiniDump) || seen(FileKind::MiniDumpGz),
        FileKind::Report | FileKind::Fds | FileKind::Threads => seen(kind),
        FileKind::Meta | FileKind::FullDump | FileKind::MiniDump => false,
    }
}

/// gzip `src` into `dst` through `fs`, by the one atomic write (temporary file, fsync, rename,
/// directory fsync): done once per incident, so resumed uploads see the same bytes.
pub(super) fn compress(fs: &dyn Fs, src: &Path, dst: &Path) -> io::Result<()> {
    let mut input = fs.open(src)?;
    fs::write_atomic_from(fs, dst, |out| {
        let mut enc = super::gzip::GzWriter::new(out, 6)?;
        io::copy(&mut input, &mut enc)?;
        enc.finish().map(drop)
    })
}
