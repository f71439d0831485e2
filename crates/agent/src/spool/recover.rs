//! Recovery after a crash: half-written dumps, the shape of each committed incident, and the
//! analysis of what was never analysed.

use super::*;

impl SpoolGuard<'_> {
    /// Put every incident in its right state after a crash, analyse what was never analysed,
    /// and enforce the quotas.
    pub fn recover(&self, analyser: &mut dyn Analyser) -> Result<Recovery> {
        let mut rec = Recovery::default();
        let fs = self.fs();
        // 1. Half-written dumps: staging directories whose writer is gone.
        let staging = self.spool.root.join("staging");
        for e in fs.list(&staging).map_err(io_err(&staging, "list"))? {
            let p = staging.join(&e.name);
            if !e.is_dir {
                self.quarantine(&p, "unknown file in staging/");
                rec.quarantined += 1;
                continue;
            }
            // A directory still being built (see `stage_with_id`) holds nothing yet: when its
            // lock is free, it goes without a loss counted, and its writer builds another.
            let building = e.name.starts_with(staging::NEW_PREFIX);
            match try_flock(&p.join(".lock")) {
                Ok(Some(_l)) => {
                    let bytes = fs::dir_size(fs, &p).unwrap_or(0);
                    match fs.remove_dir_all(&p) {
                        Ok(()) if building => {}
                        Ok(()) => {
                            rec.half_written_deleted += 1;
                            self.spool.record_loss(Loss {
                                what: "half-written dump deleted".into(),
                                path: format!("staging/{}", e.name),
                                bytes,
                                at_ms: self.spool.now_ms(),
                            });
                        }
                        // Committed or discarded since the listing.
                        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                        Err(err) => tracing::warn!("spool: {}: remove failed: {err}", p.display()),
                    }
                }
                Ok(None) => {} // still being written by a live process
                // Committed, discarded or removed since the listing.
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => tracing::warn!("spool: {}: {err}", p.display()),
            }
        }
        // 2. Committed incidents.
        let inc_dir = self.spool.incidents_dir();
        for e in fs.list(&inc_dir).map_err(io_err(&inc_dir, "list"))? {
            let p = inc_dir.join(&e.name);
            if e.name.starts_with(".trash-") {
                let _ = fs.remove_dir_all(&p);
                continue;
            }
            if fs::is_tmp_name(&e.name) {
                let _ = fs.remove_file(&p);
                continue;
            }
            if !e.is_dir || !valid_id(&e.name) {
                self.quarantine(&p, "unknown entry in incidents/");
                rec.quarantined += 1;
                continue;
            }
            match self.check_incident(&e.name) {
                Ok(true) => rec.incidents += 1,
                Ok(false) => rec.quarantined += 1,
                Err(err) => tracing::warn!("spool: {}: {err}", p.display()),
            }
        }
        // 3. Analyse what was never analysed.
        for id in self.ids()? {
            let Ok(inc) = self.spool.read_incident(&id) else {
                continue;
            };
            if inc.state == State::Dumped {
                match self.analyse(inc, analyser) {
                    Ok(AnalysisOutcome::Done) => rec.analysed += 1,
                    Ok(AnalysisOutcome::Failed) => rec.analysis_failed += 1,
                    Ok(AnalysisOutcome::GaveUp) => rec.analysis_given_up += 1,
                    Err(err) => tracing::warn!("spool: analysing {id}: {err}"),
                }
            }
        }
        // 4. Quotas.
        rec.evicted = self.enforce_quotas(0, 0)?;
        Ok(rec)
    }

    /// Check one committed incident's shape; quarantine what does not fit. Ok(false) if the
    /// whole incident was quarantined.
    pub(super) fn check_incident(&self, id: &str) -> Result<bool> {
        let fs = self.fs();
        let dir = self.spool.incident_dir(id);
        let mut inc = match self.spool.read_incident(id) {
            Ok(i) => i,
            Err(Error::Corrupt { what, .. }) => {
                self.quarantine(&dir, &format!("incident.json unreadable: {what}"));
                return Ok(false);
            }
            Err(Error::NotFound(_)) => {
                self.quarantine(&dir, "incident directory without incident.json");
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
        let mut present = Vec::new();
        for e in fs.list(&dir).map_err(io_err(&dir, "list"))? {
            let p = dir.join(&e.name);
            if e.name == "incident.json" {
                continue;
            }
            if fs::is_tmp_name(&e.name) || e.name == ".lock" || e.name == ".report.out" {
                let _ = fs.remove_file(&p);
                continue;
            }
            match FileKind::from_name(&e.name) {
                Some(k) if !e.is_dir => present.push((k, e.len)),
                _ => {
                    self.quarantine(&p, "unknown file in an incident");
                }
            }
        }
        let has = |k: FileKind| present.iter().any(|(p, _)| *p == k);
        let bad = match inc.state {
            State::Dumped => !has(FileKind::MiniDump) && !has(FileKind::FullDump),
            // Even without a report or a dump, the reason, samples and inventories go up.
            State::Analysed => false,
            // A planned file gone or changed is given up alone; the others still go up.
            State::Uploading => {
                let gone: Vec<FileKind> = inc
                    .uploads
                    .iter()
                    .filter(|u| {
                        !u.acked
                            && !present
                                .iter()
                                .any(|(k, len)| *k == u.kind && *len == u.size)
                    })
                    .map(|u| u.kind)
                    .collect();
                for k in gone {
                    let what = "planned file gone or changed before its upload";
                    if let Err(e) = self.drop_planned(&mut inc, k, what) {
                        // The next recovery tries again; the rest of this one goes on.
                        tracing::warn!("spool: {id}: dropping {k:?} from its plan: {e}");
                    }
                }
                false
            }
            State::Rejected => false,
        };
        if bad {
            self.quarantine(
                &dir,
                &format!("incident in state {:?} lacks the files it needs", inc.state),
            );
            return Ok(false);
        }
        Ok(true)
    }

    pub(super) fn analyse(
        &self,
        mut inc: Incident,
        analyser: &mut dyn Analyser,
    ) -> Result<AnalysisOutcome> {
        let fs = self.fs();
        let dir = self.spool.incident_dir(&inc.id);
        let max = self.spool.quotas.max_analysis_attempts;
        if inc.analysis_attempts >= max {
            tracing::warn!(
                "spool: {}: analysis failed {} times; uploading it without a report",
                inc.id,
                inc.analysis_attempts
            );
            self.finish_analysis(&mut inc)?;
            return Ok(AnalysisOutcome::GaveUp);
        }
        // Count the attempt before making it: a crash during analysis counts.
        inc.analysis_attempts += 1;
        self.save(&inc)?;
        let exists = |k: FileKind| {
            let p = dir.join(k.file_name());
            fs.stat(&p).ok().map(|_| p)
        };
        let job = AnalysisJob {
            id: inc.id.clone(),
            dir: dir.clone(),
            full_dump: exists(FileKind::FullDump),
            mini_dump: exists(FileKind::MiniDump),
            report_out: dir.join(".report.out"),
            attempt: inc.analysis_attempts,
        };
        let _ = fs.remove_file(&job.report_out);
        let r = analyser.analyse(&job).and_then(|()| {
            let b = fs
                .read(&job.report_out)
                .map_err(|e| format!("{}: {e}", job.report_out.display()))?;
            serde_json::from_slice::<Value>(&b)
                .map_err(|e| format!("{}: not JSON: {e}", job.report_out.display()))?;
            Ok(b)
        });
        let _ = fs.remove_file(&job.report_out);
        match r {
            Ok(report) => {
                let p = dir.join(FileKind::Report.file_name());
                fs::write_atomic(fs, &p, &report).map_err(io_err(&p, "write"))?;
                inc.analysis_error = None;
                // (A record from before the file list stays without one: nothing is checked.)
                if let Some(w) = inc
                    .written
                    .as_mut()
                    .filter(|w| !w.contains(&FileKind::Report))
                {
                    w.push(FileKind::Report);
                }
                self.finish_analysis(&mut inc)?;
                Ok(AnalysisOutcome::Done)
            }
            Err(what) => {
                tracing::warn!(
                    "spool: {}: analysis attempt {} of {max} failed: {what}",
                    inc.id,
                    inc.analysis_attempts
                );
                inc.analysis_error = Some(what);
                if inc.analysis_attempts >= max {
                    self.finish_analysis(&mut inc)?;
                    return Ok(AnalysisOutcome::GaveUp);
                }
                self.save(&inc)?;
                Ok(AnalysisOutcome::Failed)
            }
        }
    }

    pub(super) fn finish_analysis(&self, inc: &mut Incident) -> Result<()> {
        inc.state = State::Analysed;
        self.save(inc)?;
        if !self.spool.quotas.keep_full_dump {
            let p = self
                .spool
                .incident_dir(&inc.id)
                .join(FileKind::FullDump.file_name());
            let _ = self.fs().remove_file(&p);
        }
        Ok(())
    }
}

pub(super) enum AnalysisOutcome {
    Done,
    Failed,
    GaveUp,
}
