//! Staging and committing: an incident being written lives in `staging/ID/`, whose `.lock` its
//! writer holds; one rename moves it into `incidents/` once its `incident.json` is durable.

use super::*;

/// An incident being written: its directory and the lock that says its writer is alive.
#[derive(Debug)]
pub struct Staging {
    pub id: String,
    pub dir: PathBuf,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl Staging {
    /// Where the writer puts a file of this kind.
    pub fn path(&self, kind: FileKind) -> PathBuf {
        self.dir.join(kind.file_name())
    }
}

/// Staging directories being built carry this prefix until their `.lock` is held.
pub(super) const NEW_PREFIX: &str = ".new-";

/// Tries to build a staging directory before giving up (each lost only to a recovery that
/// found it unlocked in the moment between its creation and its lock).
const STAGING_TRIES: u32 = 8;

pub(super) fn try_flock(path: &Path) -> io::Result<Option<nix::fcntl::Flock<std::fs::File>>> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)?;
    match nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(l) => Ok(Some(l)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(io::Error::from_raw_os_error(e as i32)),
    }
}

impl Spool {
    /// Give up a staging directory the caller chose not to commit (nothing in it is lost: the
    /// caller knows why it is not needed). Unlike a writer that died, this counts no loss.
    pub fn discard(&self, staging: Staging) {
        if let Err(e) = self.remove_staging(&staging) {
            // Recovery deletes it once its lock is free.
            tracing::warn!("spool: discarding {} failed: {e}", staging.dir.display());
        }
    }

    /// Remove a staging directory whose lock the caller holds. It first leaves its name for a
    /// `.new-…` one, in one rename: a recovery that listed it must not find it half removed, its
    /// `.lock` gone, and take it for a dead writer's (counting a loss). A directory that cannot
    /// be renamed (a fault) is removed where it is.
    fn remove_staging(&self, staging: &Staging) -> io::Result<()> {
        let gone = staging.dir.with_file_name(format!(
            "{NEW_PREFIX}{}-{:08x}",
            staging.id,
            crate::random_u32()
        ));
        match self.fs.rename(&staging.dir, &gone) {
            Ok(()) => self.fs.remove_dir_all(&gone),
            Err(_) => self.fs.remove_dir_all(&staging.dir),
        }
    }

    /// Start writing a new incident: a staging directory the dumper writes into.
    pub fn stage(&self) -> Result<Staging> {
        let now = self.clock.now_ms();
        let id = format!(
            "{now:013}-{}-{:08x}",
            std::process::id(),
            crate::random_u32()
        );
        self.stage_with_id(&id)
    }

    /// [`stage`](Self::stage) with a chosen id (tests, tools): `[A-Za-z0-9._-]`, ≤ 100 bytes.
    pub fn stage_with_id(&self, id: &str) -> Result<Staging> {
        if !valid_id(id) {
            return Err(Error::BadStaging {
                path: self.root.join("staging").join(id),
                what: "invalid incident id".into(),
            });
        }
        let staging = self.root.join("staging");
        let dir = staging.join(id);
        // The directory gets its name only once its `.lock` is held: a recovery (another thread
        // or process of the app) that sees `staging/ID` and can take its lock knows its writer
        // is gone. It is built under a name of its own (`.new-…`), which a recovery may remove
        // whenever it finds its lock free; then the next try uses a new name.
        for _ in 0..STAGING_TRIES {
            let tmp = staging.join(format!("{NEW_PREFIX}{id}-{:08x}", crate::random_u32()));
            self.fs
                .create_dir_all(&tmp)
                .map_err(io_err(&tmp, "mkdir"))?;
            let lp = tmp.join(".lock");
            let lock = match try_flock(&lp) {
                Ok(Some(l)) => l,
                // A recovery holds it, or removed the directory: it was not ours yet.
                Ok(None) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    let _ = self.fs.remove_dir_all(&tmp);
                    return Err(Error::Io {
                        path: lp,
                        op: "flock",
                        source: e,
                    });
                }
            };
            match self.fs.rename(&tmp, &dir) {
                Ok(()) => {
                    return Ok(Staging {
                        id: id.to_string(),
                        dir,
                        _lock: lock,
                    })
                }
                // Removed by a recovery between our open of `.lock` and our lock.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    let _ = self.fs.remove_dir_all(&tmp);
                    let exists = self.fs.stat(&dir).is_ok();
                    return Err(if exists {
                        Error::BadStaging {
                            path: dir,
                            what: "already staged (being written, or left by a writer that \
                                   died: recovery removes it)"
                                .into(),
                        }
                    } else {
                        Error::Io {
                            path: tmp,
                            op: "rename",
                            source: e,
                        }
                    });
                }
            }
        }
        Err(Error::BadStaging {
            path: dir,
            what: format!(
                "its directory was taken away {STAGING_TRIES} times before it could be locked"
            ),
        })
    }

    /// Commit a staged incident: write its `incident.json`, make room under the quotas (when
    /// the lock can be had), and move it into `incidents/` with one rename. On error the staging
    /// directory is deleted and the loss counted; incidents already in the spool are untouched.
    pub fn commit(&self, staging: Staging, info: NewIncident) -> Result<String> {
        self.commit_with(staging, info, None)
    }

    /// [`commit`](Self::commit) an incident that holds no dump, saying why (`dump_error`: the
    /// dump was refused, failed or left no file). It goes straight to `analysed`: its reason,
    /// samples and inventories are uploaded, with `dumpError` in `meta.json`.
    pub fn commit_without_dump(
        &self,
        staging: Staging,
        info: NewIncident,
        dump_error: String,
    ) -> Result<String> {
        self.commit_with(staging, info, Some(dump_error))
    }

    pub(super) fn commit_with(
        &self,
        staging: Staging,
        info: NewIncident,
        dump_error: Option<String>,
    ) -> Result<String> {
        let r = self.commit_inner(&staging, info, dump_error);
        if let Err(e) = &r {
            tracing::warn!("spool: commit of {} failed: {e}", staging.id);
            let bytes = fs::dir_size(&*self.fs, &staging.dir).unwrap_or(0);
            let _ = self.remove_staging(&staging);
            self.record_loss(Loss {
                what: format!("commit failed: {e}"),
                path: format!("staging/{}", staging.id),
                bytes,
                at_ms: self.clock.now_ms(),
            });
        }
        r
    }

    pub(super) fn commit_inner(
        &self,
        staging: &Staging,
        info: NewIncident,
        dump_error: Option<String>,
    ) -> Result<String> {
        let mut bytes = 0;
        let mut seen = Vec::new();
        for e in self
            .fs
            .list(&staging.dir)
            .map_err(io_err(&staging.dir, "list"))?
        {
            if e.name == ".lock" {
                continue;
            }
            match FileKind::from_name(&e.name) {
                Some(
                    k @ (FileKind::FullDump
                    | FileKind::MiniDump
                    | FileKind::Fds
                    | FileKind::Threads
                    | FileKind::Report),
                ) if !e.is_dir => {
                    bytes += e.len;
                    seen.push(k);
                }
                _ => {
                    return Err(Error::BadStaging {
                        path: staging.dir.join(&e.name),
                        what: "unexpected file in a staged incident".into(),
                    })
                }
            }
        }
        let has_dump = seen.contains(&FileKind::FullDump) || seen.contains(&FileKind::MiniDump);
        let has_report = seen.contains(&FileKind::Report);
        if !has_dump && !has_report && dump_error.is_none() {
            return Err(Error::BadStaging {
                path: staging.dir.clone(),
                what: "neither a dump, a report nor why there is no dump to commit".into(),
            });
        }
        let inc = Incident {
            version: 1,
            id: staging.id.clone(),
            created_ms: self.clock.now_ms(),
            reason: info.reason,
            samples: info.samples,
            running_info: info.running_info,
            policy_version: info.policy_version,
            // Without a dump there is nothing to analyse.
            state: if has_report || !has_dump {
                State::Analysed
            } else {
                State::Dumped
            },
            analysis_attempts: 0,
            analysis_error: None,
            upload_attempts: 0,
            next_attempt_ms: 0,
            uploads: Vec::new(),
            rejected: None,
            accounting: Accounting::default(),
            written: Some(
                FileKind::ALL
                    .into_iter()
                    .filter(|k| seen.contains(k))
                    .collect(),
            ),
            dump_error,
        };
        let meta = seal(&inc);
        bytes += meta.len() as u64;
        if bytes > self.quotas.max_total_bytes {
            return Err(Error::TooBig {
                bytes,
                quota: self.quotas.max_total_bytes,
            });
        }
        // The writer's files (dumps, inventories: plain writes) are durable before the record
        // that makes them an incident; the record's own write then makes their names durable
        // (it fsyncs the directory).
        for k in &seen {
            let f = staging.dir.join(k.file_name());
            self.fs.sync_file(&f).map_err(io_err(&f, "fsync"))?;
        }
        let p = staging.dir.join("incident.json");
        fs::write_atomic(&*self.fs, &p, &meta).map_err(io_err(&p, "write"))?;
        // Make room first, so the spool never holds more than the quotas.
        if let Ok(g) = self.lock() {
            if let Err(e) = g.enforce_quotas(bytes, 1) {
                tracing::warn!("spool: quota enforcement failed: {e}");
            }
        }
        let dst = self.incident_dir(&staging.id);
        self.fs
            .rename(&staging.dir, &dst)
            .map_err(io_err(&staging.dir, "rename"))?;
        // The staging lock file travels with the directory; remove it (harmless if it stays:
        // recovery treats a stray `.lock` as ours).
        let _ = self.fs.remove_file(&dst.join(".lock"));
        for d in [self.incidents_dir(), self.root.join("staging")] {
            self.fs.sync_dir(&d).map_err(io_err(&d, "fsync dir"))?;
        }
        tracing::info!("spool: committed incident {} ({bytes} bytes)", staging.id);
        Ok(staging.id.clone())
    }
}
