//! A `death` incident for the previous process, whose flight ring says it died, and the count
//! of deaths reported per day (the policy's `death.max_per_day`).
//!
//! Invariant: the day's count is written (atomically) after the incident is committed; a count
//! that cannot be written lets at most one more through, a file unreadable or of another day
//! counts as 0.

use super::io::Work;
use super::{queue, Pipeline};
use crate::agent::ActionContext;
use crate::recorder::Previous;
use crate::spool::NewIncident;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};
use tracing::warn;

impl Pipeline {
    /// Commit a `death` incident for the previous process, whose flight ring says it died: its
    /// last samples, the trend of each figure over its last minute, its last words, what was in
    /// progress. It holds no dump (`dumpError` says why) and goes up like any other incident,
    /// within its own daily quota (the policy's `death.max_per_day`).
    pub(super) fn death(
        &mut self,
        prev: &Previous,
        cx: &ActionContext<'_>,
    ) -> Result<(&'static str, String), String> {
        let p = cx.policy;
        let quota = self.data_dir.join(DEATH_QUOTA_FILE);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        if !p.death.report {
            return Err("the policy's death.report is off: the death is logged only".into());
        }
        let count = deaths_today(&quota, now);
        if count >= p.death.max_per_day {
            return Err(format!(
                "{count} deaths already reported today (the policy's death.max_per_day): this one is logged only"
            ));
        }
        self.start(p, cx.device.api_level)?;
        let live = self.live.as_mut().expect("started");
        let staging = live.spool.stage().map_err(|e| e.to_string())?;
        let reason = prev.reason();
        let running_info = serde_json::json!({
            "kind": "death",
            "appVersion": prev.app_version,
            "currentPage": prev.page,
            "manufacturer": cx.device.manufacturer,
            "apiLevel": cx.device.api_level,
            "is32bit": cx.device.is_32bit,
            "reason": reason,
            "pid": prev.pid,
            "processStartMs": prev.process_start_ms,
            "agentStartMs": prev.agent_start_ms,
            "policyVersionAtDeath": prev.policy_version,
            "exit": prev.state,
            "dumpInProgress": prev.dump_in_progress,
            "analysisInProgress": prev.analysis_in_progress,
            "lastWords": prev.last_words,
            "exitInfo": prev.exit_info,
            "exitInfoError": prev.exit_info_error,
            "trend": prev.trend(60_000),
            "tornSamples": prev.torn_slots,
            "tornLastWords": prev.torn_last_words,
            "reportedByAppVersion": cx.app_version,
        });
        let info = NewIncident {
            reason,
            samples: serde_json::to_value(&prev.samples).unwrap_or_default(),
            running_info,
            policy_version: p.version.to_string(),
        };
        let id = live
            .spool
            .commit_without_dump(
                staging,
                info,
                "no dump: the process died before one was taken".into(),
            )
            .map_err(|e| format!("the death could not be queued: {e}"))?;
        queue::note_queued(&self.queue, &live.spool, &id, p.upload.url.is_some());
        if let Err(e) = save_deaths_today(&quota, now, count + 1) {
            warn!(
                "{}: {e}; the death quota may let one more through",
                quota.display()
            );
        }
        let _ = live.io.tx.send(Work::Pass);
        Ok((
            "reported",
            format!("incident {id}: the death of pid {} goes up", prev.pid),
        ))
    }
}

/// Where the count of deaths reported today is kept, in the data dir.
const DEATH_QUOTA_FILE: &str = "flight/deaths.json";

/// Deaths reported on the day of `now_ms` (0 when the file is missing, unreadable or of
/// another day).
fn deaths_today(path: &Path, now_ms: u64) -> u32 {
    let day = now_ms / 86_400_000;
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .filter(|v| v["day"].as_u64() == Some(day))
        .and_then(|v| v["count"].as_u64())
        .map_or(0, |c| c.min(u32::MAX as u64) as u32)
}

/// Keep the day's count, making its directory if need be (the flight ring's, which the
/// recorder normally made).
fn save_deaths_today(path: &Path, now_ms: u64, count: u32) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let body = serde_json::json!({"day": now_ms / 86_400_000, "count": count});
    sys::fs::write_file_atomic(path, body.to_string().as_bytes())
}
