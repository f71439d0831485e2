//! The policy seen by each module the pipeline wires: the spool's quotas, the dump guards, the
//! uploader, the analyser's thresholds, the strip level. One function per module's config,
//! each a plain translation of policy fields (the policy owns every default and range).

use crate::dump::guard::GuardPolicy;
use crate::policy::{Policy, StripLevel};
use crate::spool::Quotas;
use crate::upload;
use hprof::Level;
use std::time::Duration;

/// The spool's limits from the policy.
pub fn quotas(p: &Policy) -> Quotas {
    Quotas {
        max_total_bytes: p.spool.max_bytes,
        max_count: p.spool.max_count as usize,
        max_age: Duration::from_secs(p.spool.max_age_days as u64 * 86_400),
        max_analysis_attempts: p.analysis.max_attempts,
        keep_full_dump: p.dump.keep_full,
    }
}

/// The dump guards from the policy.
pub fn guard_policy(p: &Policy) -> GuardPolicy {
    GuardPolicy {
        min_free_bytes: p.dump.min_free_disk_mb << 20,
        heap_factor: p.dump.min_free_disk_heap_factor,
        once_per_process: p.dump.once_per_process,
        quota_per_version: p.dump.per_version_quota,
        window: Duration::from_secs(p.dump.quota_window_days as u64 * 86_400),
    }
}

/// The uploader's settings from the policy; `None` when the policy names no server.
pub fn upload_config(p: &Policy) -> Option<upload::Config> {
    let url = p.upload.url.clone()?;
    Some(upload::Config {
        endpoint: url,
        io_timeout: Duration::from_millis(p.upload.timeout_ms),
        max_attempts: p.upload.max_attempts,
        backoff_base: Duration::from_millis(p.upload.backoff_base_ms),
        backoff_cap: Duration::from_millis(p.upload.backoff_cap_ms),
        daily_byte_budget: p.upload.daily_byte_budget,
        unmetered_only: p.upload.unmetered_only,
        ..upload::Config::default()
    })
}

/// The analyser's thresholds from the policy.
pub fn analysis_config(p: &Policy) -> analyze::Config {
    analyze::Config {
        bitmap_min_pixels: p.analysis.bitmap_min_pixels,
        array_min_bytes: p.analysis.big_array_bytes,
        top_n: p.analysis.top_dominators as usize,
        max_paths_per_class: p.analysis.max_paths_per_class as usize,
        ..analyze::Config::default()
    }
}

pub(super) fn level(s: StripLevel) -> Level {
    match s {
        StripLevel::None => Level::None,
        StripLevel::Arrays => Level::Arrays,
        StripLevel::App => Level::App,
    }
}
