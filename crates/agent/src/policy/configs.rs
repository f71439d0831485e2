//! Each module's config, built from the policy: the one place where a policy field becomes a
//! setting of the code that obeys it. Modules keep no defaults of their own: where one keeps a
//! `Default` (for tests and tools), it is `(&Policy::default()).into()`.
//!
//! Invariants:
//! - Every setting that is a policy field comes from the policy here, with its unit converted
//!   (MB to bytes, days to a `Duration`, ...), and from nowhere else.
//! - The few settings that are not (yet) policy fields are named constants below, each saying
//!   why.
#![forbid(unsafe_code)]

use super::{Policy, StripLevel};
use crate::dump::guard::GuardPolicy;
use crate::pipeline::runner::AnalysisLimits;
use crate::spool::Quotas;
use crate::trigger;
use crate::upload;
use std::time::Duration;

const DAY: Duration = Duration::from_secs(86_400);

/// The uploader's connect timeout (TCP and TLS handshake), not a policy field: the request
/// timeout (`upload.timeout_ms`) bounds the rest.
pub const UPLOAD_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The slowest link the uploader assumes, bytes per second: a PATCH of n bytes may take
/// `upload.timeout_ms + n / UPLOAD_MIN_RATE`. Not a policy field.
pub const UPLOAD_MIN_RATE: u64 = 16 * 1024;
/// Bytes per PATCH. Not a policy field.
pub const UPLOAD_CHUNK_BYTES: u64 = 1024 * 1024;
/// The wait after a 429 without a readable `Retry-After`. Not a policy field.
pub const UPLOAD_DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(60);
/// At most this long a `Retry-After` is obeyed. Not a policy field.
pub const UPLOAD_MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The spool's quotas: `spool.*`, `analysis.max_attempts`, `dump.keep_full`.
impl From<&Policy> for Quotas {
    fn from(p: &Policy) -> Quotas {
        Quotas {
            max_total_bytes: p.spool.max_bytes,
            max_count: p.spool.max_count as usize,
            max_age: DAY * p.spool.max_age_days,
            max_analysis_attempts: p.analysis.max_attempts,
            keep_full_dump: p.dump.keep_full,
        }
    }
}

/// The dump guards: `dump.min_free_disk_*`, `once_per_process`, the per-version quota.
impl From<&Policy> for GuardPolicy {
    fn from(p: &Policy) -> GuardPolicy {
        GuardPolicy {
            min_free_bytes: p.dump.min_free_disk_mb << 20,
            heap_factor: p.dump.min_free_disk_heap_factor,
            once_per_process: p.dump.once_per_process,
            quota_per_version: p.dump.per_version_quota,
            window: DAY * p.dump.quota_window_days,
        }
    }
}

/// The uploader's settings: `upload.*` (an empty endpoint where the policy names none; see
/// [`upload_config`]).
impl From<&Policy> for upload::Config {
    fn from(p: &Policy) -> upload::Config {
        upload::Config {
            endpoint: p.upload.url.clone().unwrap_or_default(),
            connect_timeout: UPLOAD_CONNECT_TIMEOUT,
            io_timeout: Duration::from_millis(p.upload.timeout_ms),
            min_rate: UPLOAD_MIN_RATE,
            chunk_size: UPLOAD_CHUNK_BYTES,
            max_attempts: p.upload.max_attempts,
            backoff_base: Duration::from_millis(p.upload.backoff_base_ms),
            backoff_cap: Duration::from_millis(p.upload.backoff_cap_ms),
            default_retry_after: UPLOAD_DEFAULT_RETRY_AFTER,
            max_retry_after: UPLOAD_MAX_RETRY_AFTER,
            daily_byte_budget: p.upload.daily_byte_budget,
            unmetered_only: p.upload.unmetered_only,
        }
    }
}

/// The uploader's settings; `None` when the policy names no server (upload is off).
pub fn upload_config(p: &Policy) -> Option<upload::Config> {
    p.upload.url.is_some().then(|| p.into())
}

/// The analyser's thresholds: `analysis.*`. The analyser's other settings are its own
/// (`analyze::Config::default()`: the `analyze` crate cannot see the policy, and the command
/// line uses it without one).
impl From<&Policy> for analyze::Config {
    fn from(p: &Policy) -> analyze::Config {
        analyze::Config {
            bitmap_min_pixels: p.analysis.bitmap_min_pixels,
            array_min_bytes: p.analysis.big_array_bytes,
            top_n: p.analysis.top_dominators as usize,
            max_paths_per_class: p.analysis.max_paths_per_class as usize,
            // The cap of the scratch room `pipeline::analysis` gives an analysis (half the free
            // space at most).
            scratch_max_mb: p.analysis.scratch_max_mb,
            ..analyze::Config::default()
        }
    }
}

/// The analysis child's limits: `analysis.memory_limit_mb` and `max_attempts`; its priority and
/// deadline are `pipeline::runner`'s constants.
impl From<&Policy> for AnalysisLimits {
    fn from(p: &Policy) -> AnalysisLimits {
        use crate::pipeline::runner::{DEADLINE, NICE, OOM_SCORE_ADJ};
        AnalysisLimits {
            oom_score_adj: OOM_SCORE_ADJ,
            nice: NICE,
            memory: p.analysis.memory_limit_mb << 20,
            deadline: DEADLINE,
            max_attempts: p.analysis.max_attempts,
        }
    }
}

/// The stripper's level: `dump.strip_level`.
impl From<&Policy> for hprof::Level {
    fn from(p: &Policy) -> hprof::Level {
        match p.dump.strip_level {
            StripLevel::None => hprof::Level::None,
            StripLevel::Arrays => hprof::Level::Arrays,
            StripLevel::App => hprof::Level::App,
        }
    }
}

/// The trigger machines: `heap`, `fd`, `threads`, `vm_size`, `cgroup_memory`.
impl From<&Policy> for trigger::Config {
    fn from(p: &Policy) -> trigger::Config {
        trigger::Config {
            heap: (&p.heap).into(),
            fd: trigger::FdConfig {
                max: p.fd.max,
                soft_limit_percent: p.fd.soft_limit_percent,
                strikes: p.fd.strikes,
                tolerance: p.fd.tolerance,
            },
            threads: trigger::ThreadConfig {
                max: p.threads.max,
                huawei_legacy_max: p.threads.huawei_legacy_max,
                huawei_legacy_max_api: p.threads.huawei_legacy_max_api,
                threads_max_percent: p.threads.threads_max_percent,
                strikes: p.threads.strikes,
                tolerance: p.threads.tolerance,
            },
            vm_size: trigger::VmSizeConfig {
                max_mb_32bit: p.vm_size.max_mb_32bit,
                strikes: p.vm_size.strikes,
            },
            cgroup_memory: trigger::CgroupConfig {
                percent: p.cgroup_memory.percent,
                strikes: p.cgroup_memory.strikes,
                ascending: p.cgroup_memory.ascending,
                slack_percent: p.cgroup_memory.slack_percent,
            },
        }
    }
}

/// The heap machines: the policy's `heap` section.
impl From<&super::HeapPolicy> for trigger::HeapConfig {
    fn from(h: &super::HeapPolicy) -> trigger::HeapConfig {
        trigger::HeapConfig {
            thresholds: h
                .thresholds
                .iter()
                .map(|t| trigger::Tier {
                    min_max_heap_mb: t.min_max_heap_mb,
                    percent: t.percent,
                })
                .collect(),
            strikes: h.strikes,
            ascending: h.ascending,
            slack_percent: h.slack_percent,
            fast_huge_percent: h.fast_huge_percent,
            fast_huge_growth_mb: h.fast_huge_growth_mb,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Units are converted, and upload is off without a URL.
    #[test]
    fn configs_follow_the_policy() {
        let mut p = Policy::default();
        p.spool.max_age_days = 2;
        p.dump.min_free_disk_mb = 3;
        p.dump.quota_window_days = 4;
        p.upload.timeout_ms = 1500;
        p.analysis.memory_limit_mb = 64;
        p.dump.strip_level = StripLevel::App;
        let q = Quotas::from(&p);
        assert_eq!(q.max_age, Duration::from_secs(2 * 86_400));
        assert_eq!(q.max_count, 20);
        let g = GuardPolicy::from(&p);
        assert_eq!(g.min_free_bytes, 3 << 20);
        assert_eq!(g.window, Duration::from_secs(4 * 86_400));
        assert_eq!(upload_config(&p), None);
        p.upload.url = Some("https://c.example/files/".into());
        let u = upload_config(&p).unwrap();
        assert_eq!(u.endpoint, "https://c.example/files/");
        assert_eq!(u.io_timeout, Duration::from_millis(1500));
        assert_eq!(AnalysisLimits::from(&p).memory, 64 << 20);
        assert_eq!(hprof::Level::from(&p), hprof::Level::App);
        let t = trigger::Config::from(&p);
        assert_eq!(t.heap.thresholds.len(), 3);
        assert_eq!(t.heap.threshold_percent(300 << 20), 85);
    }

    /// Every policy field that is a setting reaches it, each set here to a value of its own
    /// (none the default), so that a field dropped or taken from a neighbour shows.
    #[test]
    fn every_policy_field_reaches_its_setting() {
        let mut p = Policy::default();
        (p.spool.max_bytes, p.spool.max_count, p.spool.max_age_days) = (5 << 20, 7, 9);
        (p.analysis.max_attempts, p.analysis.memory_limit_mb) = (4, 96);
        (p.analysis.bitmap_min_pixels, p.analysis.big_array_bytes) = (1001, 2002);
        (p.analysis.top_dominators, p.analysis.max_paths_per_class) = (11, 13);
        p.analysis.scratch_max_mb = 17;
        (p.dump.keep_full, p.dump.once_per_process) = (true, false);
        (p.dump.min_free_disk_mb, p.dump.min_free_disk_heap_factor) = (19, 3);
        (p.dump.per_version_quota, p.dump.quota_window_days) = (6, 8);
        p.upload.url = Some("https://c.example/files/".into());
        (p.upload.timeout_ms, p.upload.max_attempts) = (1234, 12);
        (p.upload.backoff_base_ms, p.upload.backoff_cap_ms) = (2345, 34_567);
        (p.upload.daily_byte_budget, p.upload.unmetered_only) = (4567, false);
        let q = Quotas::from(&p);
        assert_eq!(
            q,
            Quotas {
                max_total_bytes: 5 << 20,
                max_count: 7,
                max_age: DAY * 9,
                max_analysis_attempts: 4,
                keep_full_dump: true,
            }
        );
        let g = GuardPolicy::from(&p);
        assert_eq!((g.min_free_bytes, g.heap_factor), (19 << 20, 3));
        assert_eq!((g.once_per_process, g.quota_per_version), (false, 6));
        assert_eq!(g.window, DAY * 8);
        let u = upload_config(&p).unwrap();
        assert_eq!(u.endpoint, "https://c.example/files/");
        assert_eq!(
            (u.io_timeout, u.max_attempts),
            (Duration::from_millis(1234), 12)
        );
        assert_eq!(u.backoff_base, Duration::from_millis(2345));
        assert_eq!(u.backoff_cap, Duration::from_millis(34_567));
        assert_eq!((u.daily_byte_budget, u.unmetered_only), (4567, false));
        let a = analyze::Config::from(&p);
        assert_eq!((a.bitmap_min_pixels, a.array_min_bytes), (1001, 2002));
        assert_eq!(
            (a.top_n, a.max_paths_per_class, a.scratch_max_mb),
            (11, 13, 17)
        );
        let l = AnalysisLimits::from(&p);
        assert_eq!((l.memory, l.max_attempts), (96 << 20, 4));
        for (level, want) in [
            (StripLevel::None, hprof::Level::None),
            (StripLevel::Arrays, hprof::Level::Arrays),
            (StripLevel::App, hprof::Level::App),
        ] {
            p.dump.strip_level = level;
            assert_eq!(hprof::Level::from(&p), want);
        }
    }

    /// The trigger machines' settings, each field its own value.
    #[test]
    fn every_trigger_field_reaches_its_machine() {
        let mut p = Policy::default();
        let h = &mut p.heap;
        h.thresholds = vec![super::super::HeapThreshold::tier(300, 70)];
        (h.strikes, h.ascending, h.slack_percent) = (5, false, 7);
        (h.fast_huge_percent, h.fast_huge_growth_mb) = (95, 123);
        (
            p.fd.max,
            p.fd.soft_limit_percent,
            p.fd.strikes,
            p.fd.tolerance,
        ) = (900, 80, 4, 40);
        let t = &mut p.threads;
        (t.max, t.huawei_legacy_max, t.huawei_legacy_max_api) = (700, 400, 25);
        (t.threads_max_percent, t.strikes, t.tolerance) = (85, 6, 30);
        (p.vm_size.max_mb_32bit, p.vm_size.strikes) = (3000, 7);
        let c = &mut p.cgroup_memory;
        (c.percent, c.strikes, c.ascending, c.slack_percent) = (75, 8, false, 9);
        let t = trigger::Config::from(&p);
        let h = &t.heap;
        assert_eq!(
            h.thresholds
                .iter()
                .map(|t| (t.min_max_heap_mb, t.percent))
                .collect::<Vec<_>>(),
            [(300, 70)]
        );
        assert_eq!((h.strikes, h.ascending, h.slack_percent), (5, false, 7));
        assert_eq!((h.fast_huge_percent, h.fast_huge_growth_mb), (95, 123));
        let f = &t.fd;
        assert_eq!(
            (f.max, f.soft_limit_percent, f.strikes, f.tolerance),
            (900, 80, 4, 40)
        );
        let th = &t.threads;
        assert_eq!(
            (th.max, th.huawei_legacy_max, th.huawei_legacy_max_api),
            (700, 400, 25)
        );
        assert_eq!(
            (th.threads_max_percent, th.strikes, th.tolerance),
            (85, 6, 30)
        );
        assert_eq!((t.vm_size.max_mb_32bit, t.vm_size.strikes), (3000, 7));
        let c = &t.cgroup_memory;
        assert_eq!(
            (c.percent, c.strikes, c.ascending, c.slack_percent),
            (75, 8, false, 9)
        );
    }

    /// A module's `Default` that stays is the default policy's.
    #[test]
    fn module_defaults_are_the_policy_defaults() {
        let p = Policy::default();
        assert_eq!(Quotas::default(), Quotas::from(&p));
        assert_eq!(upload::Config::default(), upload::Config::from(&p));
    }
}
