//! The quotas: bytes, count and age, enforced oldest first.

use super::*;

/// One item the quotas count: an incident or a quarantined entry.
#[derive(Debug)]
pub(super) struct Item {
    path: PathBuf,
    id: String,
    created_ms: u64,
    bytes: u64,
}

/// The watched time is saved when the wall clock moved back or by at least this much (or the
/// items changed): between saves, the next look counts from the last saved one.
const WATCH_SAVE_STEP_MS: u64 = 60 * 1000;

impl SpoolGuard<'_> {
    /// Evict oldest first until the spool plus an incoming incident of `incoming_bytes` and
    /// `incoming_count` fits the quotas. Returns how many items were evicted.
    pub fn enforce_quotas(&self, incoming_bytes: u64, incoming_count: usize) -> Result<u32> {
        let q = &self.spool.quotas;
        let now = self.spool.now_ms();
        let items = self.quota_items()?;
        let (watch, mut first_seen) = self.watched(&items, now);
        let mut total: u64 = items.iter().map(|i| i.bytes).sum::<u64>() + incoming_bytes;
        let mut count = items.len() + incoming_count;
        let max_age = q.max_age.as_millis() as u64;
        let mut evicted = 0;
        for it in items {
            let age = watch
                .watched_ms
                .saturating_sub(first_seen.get(&it.id).copied().unwrap_or(watch.watched_ms));
            let quota = if age > max_age {
                "age"
            } else if count > q.max_count {
                "count"
            } else if total > q.max_total_bytes {
                "bytes"
            } else {
                continue;
            };
            if self.evict(&it, quota, now) {
                first_seen.remove(&it.id);
                total -= it.bytes;
                count -= 1;
                evicted += 1;
            }
        }
        if evicted > 0 {
            if let Err(e) = self.spool.update_state(|s| s.first_seen = first_seen) {
                tracing::warn!("spool: the watched items could not be saved: {e}; kept in memory");
            }
        }
        Ok(evicted)
    }

    /// What the quotas count, oldest first: the incidents and the quarantined entries (the
    /// leftovers of an eviction cut short are removed on the way, uncounted).
    fn quota_items(&self) -> Result<Vec<Item>> {
        let fs = self.fs();
        let mut items = Vec::new();
        let inc_dir = self.spool.incidents_dir();
        for e in fs.list(&inc_dir).map_err(io_err(&inc_dir, "list"))? {
            if !e.is_dir || !valid_id(&e.name) {
                continue;
            }
            let path = inc_dir.join(&e.name);
            // Ids made by `Spool::stage` start with their creation time: no need to parse
            // incident.json for those.
            let created_ms = match id_time(&e.name) {
                Some(t) => t,
                None => match self.spool.read_incident(&e.name) {
                    Ok(i) => i.created_ms,
                    Err(_) => e.mtime_ms,
                },
            };
            items.push(Item {
                bytes: fs::dir_size(fs, &path).unwrap_or(0),
                path,
                id: e.name,
                created_ms,
            });
        }
        let qd = self.spool.quarantine_dir();
        for e in fs.list(&qd).map_err(io_err(&qd, "list"))? {
            let path = qd.join(&e.name);
            if e.name.starts_with(".trash-") {
                // An eviction below that a kill cut short between its rename and the removal:
                // it is recorded already, so the leftover goes without being counted again.
                let _ = if e.is_dir {
                    fs.remove_dir_all(&path)
                } else {
                    fs.remove_file(&path)
                };
                continue;
            }
            // Quarantined names start with the time they were moved aside.
            let created_ms = e
                .name
                .get(..13)
                .and_then(|s| s.parse().ok())
                .unwrap_or(e.mtime_ms);
            items.push(Item {
                bytes: fs::dir_size(fs, &path).unwrap_or(0),
                path,
                id: format!("quarantine/{}", e.name),
                created_ms,
            });
        }
        sys::order::sort_by(&mut items, |a, b| {
            (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id))
        });
        Ok(items)
    }

    /// The watched time at `now` and, per item, when it was first seen in watched time (the
    /// module doc's rule for ages); saved when the clock stepped or the items changed.
    fn watched(
        &self,
        items: &[Item],
        now: u64,
    ) -> (Watch, std::collections::BTreeMap<String, u64>) {
        let st = self.spool.state();
        let watch = st
            .watch
            .clone()
            .unwrap_or(Watch {
                wall_ms: now,
                watched_ms: 0,
            })
            .at(now);
        // Inserted one by one: `collect` into a map sorts its input first, and that sort would
        // be one more copy of the stable sort in the library (issue 41).
        let mut first_seen = std::collections::BTreeMap::new();
        for it in items {
            let seen = st.first_seen.get(&it.id).copied();
            first_seen.insert(it.id.clone(), seen.unwrap_or(watch.watched_ms));
        }
        let stepped = st
            .watch
            .as_ref()
            .is_none_or(|w| now < w.wall_ms || now - w.wall_ms >= WATCH_SAVE_STEP_MS);
        if stepped || first_seen != st.first_seen {
            let (w, seen) = (watch.clone(), first_seen.clone());
            if let Err(e) = self.spool.update_state(|s| {
                s.watch = Some(w);
                s.first_seen = seen;
            }) {
                tracing::warn!("spool: the watched time could not be saved: {e}; kept in memory");
            }
        }
        (watch, first_seen)
    }

    /// Evict `it` over `quota` at `now`: record the eviction, then delete it. `false` if it was
    /// kept (the record or the deletion failed).
    fn evict(&self, it: &Item, quota: &str, now: u64) -> bool {
        let fs = self.fs();
        // Counts that were to travel with this incident's meta.json, not yet acknowledged,
        // go back to pending so the next report carries them.
        let carried = self.unsent_accounting(&it.id);
        // Record the eviction before deleting: a crash in between leaves an incident that
        // is reported as evicted and may still be uploaded, never one that vanished
        // without a trace.
        let ev = Eviction {
            id: it.id.clone(),
            quota: quota.to_string(),
            bytes: it.bytes,
            created_ms: it.created_ms,
            at_ms: now,
        };
        if let Err(e) = self.spool.update_state(|s| {
            if let Some(c) = carried {
                s.pending.merge(c);
            }
            s.pending.add_eviction(ev);
            s.evictions_total += 1;
        }) {
            tracing::warn!("spool: cannot record the eviction of {}: {e}; kept", it.id);
            return false;
        }
        let r = if fs.stat(&it.path).map(|e| e.is_dir).unwrap_or(false) {
            let trash = it.path.with_file_name(format!(
                ".trash-{}",
                it.path
                    .file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default()
            ));
            fs.rename(&it.path, &trash)
                .and_then(|()| fs.remove_dir_all(&trash))
        } else {
            fs.remove_file(&it.path)
        };
        match r {
            Ok(()) => {
                tracing::warn!(
                    "spool: evicted {} ({} bytes, created {} ms ago): {quota} quota",
                    it.id,
                    it.bytes,
                    now.saturating_sub(it.created_ms)
                );
                true
            }
            Err(e) => {
                tracing::warn!("spool: evicting {}: {e}", it.path.display());
                false
            }
        }
    }
}
