//! Incident records the disk could not take: on a full disk, saving an upload's URL, an
//! acknowledgement or a backoff fails with ENOSPC. Uploading is what frees the disk, so the pass
//! goes on with the record kept here, in memory, per spool root, and later passes of this
//! process start from it instead of the older record on disk: an upload created once is never
//! created again by this process (no orphan upload on the server each pass). Each record is
//! written to disk again with the next change that fits, and forgotten once that works or the
//! incident is gone. A new process starts from the disk (at most one orphan upload per file
//! and process, which the server's expiry removes).

use super::*;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub(super) struct Unsaved(Mutex<Vec<(PathBuf, Incident)>>);

pub(super) static UNSAVED: Unsaved = Unsaved(Mutex::new(Vec::new()));

impl Unsaved {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(PathBuf, Incident)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Save `inc` through `guard`; on a failure other than the incident being gone, keep it
    /// in memory and go on.
    pub(super) fn save(&self, guard: &SpoolGuard<'_>, inc: &Incident) -> Result<(), SpoolError> {
        let root = guard.spool().root();
        let mut v = self.lock();
        v.retain(|(r, i)| r != root || i.id != inc.id);
        match guard.save(inc) {
            Ok(()) => Ok(()),
            Err(e @ SpoolError::NotFound(_)) => Err(e),
            Err(e) => {
                tracing::warn!(
                    "upload: {}: {e}; the record is kept in memory and the upload goes on",
                    inc.id
                );
                v.push((root.to_path_buf(), inc.clone()));
                Ok(())
            }
        }
    }

    /// The record of `inc` this process kept in memory, if any, else `inc` as read from disk.
    pub(super) fn newest(&self, root: &Path, inc: Incident) -> Incident {
        self.lock()
            .iter()
            .find(|(r, i)| r == root && i.id == inc.id)
            .map(|(_, i)| i.clone())
            .unwrap_or(inc)
    }

    /// Forget the records of `root` whose incident is not in `ids` (deleted, evicted).
    pub(super) fn keep_only(&self, root: &Path, ids: &[String]) {
        self.lock()
            .retain(|(r, i)| r != root || ids.contains(&i.id));
    }
}
