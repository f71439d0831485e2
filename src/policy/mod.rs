//! The policy: every threshold and limit the agent and its helpers obey, as one versioned JSON
//! document.
//!
//! Owns the schema (one Rust struct per JSON section, every field documented with its range and
//! default), parsing and validation, and — in [`remote`] — the last-good copy on disk and the
//! refresh from a remote URL.
//!
//! Invariants:
//! - `Policy::default()` is exactly `config/policy.default.json` (a test checks it).
//! - A [`Policy`] value that exists has passed [`Policy::parse`]'s validation: every field is in
//!   its documented range. Bad documents are rejected as a whole, with every bad field named
//!   (`heap.strikes: 0 is out of range 1..=100`); nothing is half-applied.
//! - Unknown fields are reported (so they can be logged) and otherwise ignored, so an older agent
//!   reads a newer policy.
//! - Missing fields take their default, so a policy may say only what it changes.
//! - Nothing here triggers a dump or touches the VM.
#![forbid(unsafe_code)]

pub mod remote;

use serde::Serialize;
use serde_json::{Map, Value};
use std::ops::RangeInclusive;

/// The default policy, as shipped in the crate.
pub const DEFAULT_JSON: &str = include_str!("../../config/policy.default.json");

/// The largest policy document accepted, from any source.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// Errors of this module. Each says what was wrong and what the agent did about it (the caller
/// keeps the last good policy on every error).
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The document is not JSON (truncated, bad syntax) or not an object.
    #[error("policy is not a valid JSON object: {0}; the last good policy stays active")]
    Syntax(String),
    /// One or more fields have a wrong type or are out of range.
    #[error("policy rejected, the last good policy stays active: {}", join(.0))]
    Invalid(Vec<FieldError>),
    /// The document is larger than allowed.
    #[error("policy is {size} bytes, more than the limit of {max}; rejected, the last good policy stays active")]
    TooBig { size: usize, max: usize },
    /// A signature was required and is missing, malformed or does not match the body.
    #[error("policy signature {0}; rejected, the last good policy stays active")]
    Signature(String),
    /// The document's version is older than (or equal to, with other content) the active one.
    #[error("policy version {got} is not newer than the active version {active}; rejected, the last good policy stays active")]
    NotNewer { got: u64, active: u64 },
    /// The remote fetch failed.
    #[error("fetching policy from {url}: {what}; the last good policy stays active")]
    Fetch { url: String, what: String },
    /// Reading or writing the last-good cache failed.
    #[error("{path}: {what}")]
    Io { path: String, what: String },
}

fn join(v: &[FieldError]) -> String {
    v.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// One rejected field: its dotted path and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path, e.g. `heap.thresholds[1].percent`.
    pub field: String,
    /// What was wrong, e.g. `0 is out of range 1..=100`.
    pub what: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.what)
    }
}

/// A parsed, valid policy plus the unknown fields it carried (to be logged, then ignored).
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub policy: Policy,
    /// Dotted paths of fields this agent does not know.
    pub unknown: Vec<String>,
}

/// The whole policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policy {
    /// Version of this document; a refresh only activates a strictly newer one. Range 0..=2^53.
    /// Default 1.
    pub version: u64,
    /// Time between two samples, in ms. Range 100..=600000. Default 5000.
    pub poll_interval_ms: u64,
    /// The Java heap triggers.
    pub heap: HeapPolicy,
    /// The file-descriptor trigger.
    pub fd: FdPolicy,
    /// The thread-count trigger.
    pub threads: ThreadPolicy,
    /// The virtual-size trigger (32-bit processes only).
    pub vm_size: VmSizePolicy,
    /// How a dump is taken and how often it may be.
    pub dump: DumpPolicy,
    /// Limits of the analysis of a dump.
    pub analysis: AnalysisPolicy,
    /// Limits of the on-disk incident queue.
    pub spool: SpoolPolicy,
    /// Reports of the previous process's death, from the flight recorder.
    pub death: DeathPolicy,
    /// Upload of reports.
    pub upload: UploadPolicy,
    /// Where the next policy comes from.
    pub remote: RemotePolicy,
}

/// One heap tier: applies when the max heap is at least `min_max_heap_mb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HeapThreshold {
    /// Lower bound of the max heap (MB) this tier applies to. Range 0..=65536.
    pub min_max_heap_mb: u64,
    /// Used heap, in percent of the max heap, above which a poll is a strike. Range 1..=100.
    pub percent: u64,
}

/// The Java heap triggers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeapPolicy {
    /// Tiers by max heap; the tier with the largest `min_max_heap_mb` not above the max heap
    /// applies. 1..=8 tiers, one of which must have `min_max_heap_mb` 0. Default
    /// ≥512 MB → 80 %, ≥256 MB → 85 %, otherwise 90 %.
    pub thresholds: Vec<HeapThreshold>,
    /// Consecutive polls over the threshold that make a verdict. Range 1..=100. Default 3.
    pub strikes: u32,
    /// Whether used heap must not fall between strikes (falling resets the count). Default true.
    pub ascending: bool,
    /// With `ascending`, how far used heap may fall (percent of max heap) and still count as not
    /// falling. Range 0..=50. Default 0 (strict: any fall resets).
    pub slack_percent: u64,
    /// Used heap above this percent of max heap makes an immediate verdict. Range 1..=100.
    /// Default 90.
    pub fast_huge_percent: u64,
    /// Growth of used heap between two polls above this (MB) makes an immediate verdict.
    /// Range 1..=65536. Default 350.
    pub fast_huge_growth_mb: u64,
}

/// The file-descriptor trigger.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FdPolicy {
    /// Open fds above this count are a strike. Range 16..=1048576. Default 1000.
    pub max: u64,
    /// ... or above this percent of the soft `Max open files`, whichever is lower. Range 1..=100.
    /// Default 95.
    pub soft_limit_percent: u64,
    /// Consecutive polls over the threshold that make a verdict. Range 1..=100. Default 3.
    pub strikes: u32,
    /// How far the count may fall between strikes and still count. Range 0..=100000. Default 50.
    pub tolerance: u64,
}

/// The thread-count trigger.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadPolicy {
    /// Threads above this count are a strike. Range 16..=100000. Default 750.
    pub max: u64,
    /// The limit on Huawei devices at or below `huawei_legacy_max_api`. Range 16..=100000.
    /// Default 450.
    pub huawei_legacy_max: u64,
    /// Highest Android API level the Huawei limit applies to. Range 0..=100. Default 26.
    pub huawei_legacy_max_api: u32,
    /// The limit is also at most this percent of `/proc/sys/kernel/threads-max`. Range 1..=100.
    /// Default 90.
    pub threads_max_percent: u64,
    /// Consecutive polls over the threshold that make a verdict. Range 1..=100. Default 3.
    pub strikes: u32,
    /// How far the count may fall between strikes and still count. Range 0..=100000. Default 50.
    pub tolerance: u64,
}

/// The virtual-size trigger; only 32-bit processes run out of address space.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VmSizePolicy {
    /// VmSize above this (MB) is a strike in a 32-bit process. Range 256..=4096. Default 3650.
    pub max_mb_32bit: u64,
    /// Consecutive polls over the threshold that make a verdict. Range 1..=100. Default 3.
    pub strikes: u32,
}

/// How a dump is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DumpMode {
    /// Suspend the VM, fork, resume; the child dumps.
    Fork,
    /// Dump in the process itself (stop-the-world).
    InProcess,
}

/// What to do when the fork dump is not possible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DumpFallback {
    /// No dump.
    Skip,
    /// Dump in process.
    InProcess,
}

/// How much of a dump the stripper removes while it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StripLevel {
    /// Keep everything.
    None,
    /// Zero primitive array contents.
    Arrays,
    /// Also drop non-app heaps.
    App,
}

/// Dump settings and quotas.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DumpPolicy {
    /// `"fork"` or `"in_process"`. Default `"fork"`.
    pub mode: DumpMode,
    /// `"skip"` or `"in_process"`, used when fork is unavailable. Default `"skip"`.
    pub fallback: DumpFallback,
    /// `"none"`, `"arrays"` or `"app"`. Default `"arrays"`.
    pub strip_level: StripLevel,
    /// Keep the full (unstripped) dump beside the stripped one. Default false.
    pub keep_full: bool,
    /// Seconds the forked child may take before it is killed. Range 5..=3600. Default 60.
    pub child_deadline_s: u64,
    /// At most one dump per process lifetime. Default true.
    pub once_per_process: bool,
    /// Dumps per app version within `quota_window_days`. Range 0..=1000. Default 5.
    pub per_version_quota: u32,
    /// The quota window, in days. Range 1..=365. Default 15.
    pub quota_window_days: u32,
    /// Free disk needed before dumping, in MB. Range 0..=1048576. Default 200.
    pub min_free_disk_mb: u64,
    /// ... and at least this many times the used heap. Range 0..=16. Default 2.
    pub min_free_disk_heap_factor: u64,
}

/// Limits of the analysis of a dump.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnalysisPolicy {
    /// Bitmaps with at least this many pixels are reported. Range 1..=2^40. Default 768×1366.
    pub bitmap_min_pixels: u64,
    /// Arrays of at least this many bytes are reported. Range 1024..=2^40. Default 262144.
    pub big_array_bytes: u64,
    /// Largest dominators reported. Range 1..=1000. Default 20.
    pub top_dominators: u32,
    /// GC-root paths kept per leaking class. Range 1..=1000. Default 45.
    pub max_paths_per_class: u32,
    /// Attempts at analysing one dump before giving up. Range 1..=20. Default 3.
    pub max_attempts: u32,
    /// Memory the analysing process may use, MB. Range 32..=65536. Default 512.
    pub memory_limit_mb: u64,
}

/// Limits of the on-disk incident queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpoolPolicy {
    /// Total bytes of queued incidents. Range 1 MiB..=64 GiB. Default 256 MiB.
    pub max_bytes: u64,
    /// Queued incidents. Range 1..=10000. Default 20.
    pub max_count: u32,
    /// Incidents older than this are dropped. Range 1..=365. Default 14.
    pub max_age_days: u32,
}

/// Reports of the previous process's death (the flight recorder).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeathPolicy {
    /// Report a previous process that died without a clean exit. Default true.
    pub report: bool,
    /// Death incidents queued per day at most (a crash loop must not fill the spool). Range
    /// 0..=1000. Default 5.
    pub max_per_day: u32,
}

/// Upload of reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UploadPolicy {
    /// `http://` or `https://` URL, at most 2048 bytes; `null` disables upload. Default null.
    pub url: Option<String>,
    /// Upload only on unmetered networks. Default true.
    pub unmetered_only: bool,
    /// Bytes uploaded per day at most. Range 0..=2^40. Default 50 MiB.
    pub daily_byte_budget: u64,
    /// Attempts per report before it is dropped. Range 1..=1000. Default 10.
    pub max_attempts: u32,
    /// First retry delay, ms; doubles each attempt. Range 100..=86400000. Default 30000.
    pub backoff_base_ms: u64,
    /// Largest retry delay, ms. Range 100..=604800000. Default 21600000 (6 h).
    pub backoff_cap_ms: u64,
    /// Timeout of one request, ms. Range 100..=600000. Default 30000.
    pub timeout_ms: u64,
}

/// Where the next policy comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RemotePolicy {
    /// `http://` or `https://` URL, at most 2048 bytes; `null` disables refresh. Default null.
    pub url: Option<String>,
    /// Hours between two fetches at least. Range 1..=8760. Default 12.
    pub min_refresh_hours: u64,
    /// Largest policy body accepted, bytes. Range 256..=1048576. Default 65536.
    pub max_bytes: u64,
    /// Timeout of the fetch, ms. Range 100..=120000. Default 10000.
    pub timeout_ms: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            version: 1,
            poll_interval_ms: 5000,
            heap: HeapPolicy {
                thresholds: vec![
                    HeapThreshold {
                        min_max_heap_mb: 512,
                        percent: 80,
                    },
                    HeapThreshold {
                        min_max_heap_mb: 256,
                        percent: 85,
                    },
                    HeapThreshold {
                        min_max_heap_mb: 0,
                        percent: 90,
                    },
                ],
                strikes: 3,
                ascending: true,
                slack_percent: 0,
                fast_huge_percent: 90,
                fast_huge_growth_mb: 350,
            },
            fd: FdPolicy {
                max: 1000,
                soft_limit_percent: 95,
                strikes: 3,
                tolerance: 50,
            },
            threads: ThreadPolicy {
                max: 750,
                huawei_legacy_max: 450,
                huawei_legacy_max_api: 26,
                threads_max_percent: 90,
                strikes: 3,
                tolerance: 50,
            },
            vm_size: VmSizePolicy {
                max_mb_32bit: 3650,
                strikes: 3,
            },
            dump: DumpPolicy {
                mode: DumpMode::Fork,
                fallback: DumpFallback::Skip,
                strip_level: StripLevel::Arrays,
                keep_full: false,
                child_deadline_s: 60,
                once_per_process: true,
                per_version_quota: 5,
                quota_window_days: 15,
                min_free_disk_mb: 200,
                min_free_disk_heap_factor: 2,
            },
            analysis: AnalysisPolicy {
                bitmap_min_pixels: 768 * 1366,
                big_array_bytes: 262_144,
                top_dominators: 20,
                max_paths_per_class: 45,
                max_attempts: 3,
                memory_limit_mb: 512,
            },
            spool: SpoolPolicy {
                max_bytes: 256 << 20,
                max_count: 20,
                max_age_days: 14,
            },
            death: DeathPolicy {
                report: true,
                max_per_day: 5,
            },
            upload: UploadPolicy {
                url: None,
                unmetered_only: true,
                daily_byte_budget: 50 << 20,
                max_attempts: 10,
                backoff_base_ms: 30_000,
                backoff_cap_ms: 6 * 3600 * 1000,
                timeout_ms: 30_000,
            },
            remote: RemotePolicy {
                url: None,
                min_refresh_hours: 12,
                max_bytes: 65_536,
                timeout_ms: 10_000,
            },
        }
    }
}

impl HeapPolicy {
    /// The strike threshold (percent of max heap) for a heap of `max_heap_bytes`.
    pub fn threshold_percent(&self, max_heap_bytes: u64) -> u64 {
        let mb = max_heap_bytes >> 20;
        self.thresholds
            .iter()
            .filter(|t| t.min_max_heap_mb <= mb)
            .max_by_key(|t| t.min_max_heap_mb)
            .map(|t| t.percent)
            .unwrap_or(100)
    }
}

impl Policy {
    /// Parse and validate a policy document. Missing fields take their default; unknown fields
    /// are returned in [`Parsed::unknown`]; every bad field is named in the error.
    pub fn parse(text: &[u8]) -> Result<Parsed, PolicyError> {
        if text.len() > MAX_DOCUMENT_BYTES {
            return Err(PolicyError::TooBig {
                size: text.len(),
                max: MAX_DOCUMENT_BYTES,
            });
        }
        let v: Value =
            serde_json::from_slice(text).map_err(|e| PolicyError::Syntax(e.to_string()))?;
        let Value::Object(root) = v else {
            return Err(PolicyError::Syntax(format!(
                "the top level is {}",
                kind(&v)
            )));
        };
        let mut cx = Cx::default();
        let d = Policy::default();
        let mut r = Obj::new(&root, "");
        let p = Policy {
            version: r.u64(&mut cx, "version", d.version, 0..=(1 << 53)),
            poll_interval_ms: r.u64(
                &mut cx,
                "poll_interval_ms",
                d.poll_interval_ms,
                100..=600_000,
            ),
            heap: {
                let mut s = r.section(&mut cx, "heap");
                let h = &d.heap;
                let p = HeapPolicy {
                    thresholds: s.thresholds(&mut cx, "thresholds", &h.thresholds),
                    strikes: s.u32(&mut cx, "strikes", h.strikes, 1..=100),
                    ascending: s.bool(&mut cx, "ascending", h.ascending),
                    slack_percent: s.u64(&mut cx, "slack_percent", h.slack_percent, 0..=50),
                    fast_huge_percent: s.u64(
                        &mut cx,
                        "fast_huge_percent",
                        h.fast_huge_percent,
                        1..=100,
                    ),
                    fast_huge_growth_mb: s.u64(
                        &mut cx,
                        "fast_huge_growth_mb",
                        h.fast_huge_growth_mb,
                        1..=65_536,
                    ),
                };
                s.finish(&mut cx);
                p
            },
            fd: {
                let mut s = r.section(&mut cx, "fd");
                let f = &d.fd;
                let p = FdPolicy {
                    max: s.u64(&mut cx, "max", f.max, 16..=1_048_576),
                    soft_limit_percent: s.u64(
                        &mut cx,
                        "soft_limit_percent",
                        f.soft_limit_percent,
                        1..=100,
                    ),
                    strikes: s.u32(&mut cx, "strikes", f.strikes, 1..=100),
                    tolerance: s.u64(&mut cx, "tolerance", f.tolerance, 0..=100_000),
                };
                s.finish(&mut cx);
                p
            },
            threads: {
                let mut s = r.section(&mut cx, "threads");
                let t = &d.threads;
                let p = ThreadPolicy {
                    max: s.u64(&mut cx, "max", t.max, 16..=100_000),
                    huawei_legacy_max: s.u64(
                        &mut cx,
                        "huawei_legacy_max",
                        t.huawei_legacy_max,
                        16..=100_000,
                    ),
                    huawei_legacy_max_api: s.u32(
                        &mut cx,
                        "huawei_legacy_max_api",
                        t.huawei_legacy_max_api,
                        0..=100,
                    ),
                    threads_max_percent: s.u64(
                        &mut cx,
                        "threads_max_percent",
                        t.threads_max_percent,
                        1..=100,
                    ),
                    strikes: s.u32(&mut cx, "strikes", t.strikes, 1..=100),
                    tolerance: s.u64(&mut cx, "tolerance", t.tolerance, 0..=100_000),
                };
                s.finish(&mut cx);
                p
            },
            vm_size: {
                let mut s = r.section(&mut cx, "vm_size");
                let v = &d.vm_size;
                let p = VmSizePolicy {
                    max_mb_32bit: s.u64(&mut cx, "max_mb_32bit", v.max_mb_32bit, 256..=4096),
                    strikes: s.u32(&mut cx, "strikes", v.strikes, 1..=100),
                };
                s.finish(&mut cx);
                p
            },
            dump: {
                let mut s = r.section(&mut cx, "dump");
                let x = &d.dump;
                let p = DumpPolicy {
                    mode: s.choice(
                        &mut cx,
                        "mode",
                        x.mode,
                        &[
                            ("fork", DumpMode::Fork),
                            ("in_process", DumpMode::InProcess),
                        ],
                    ),
                    fallback: s.choice(
                        &mut cx,
                        "fallback",
                        x.fallback,
                        &[
                            ("skip", DumpFallback::Skip),
                            ("in_process", DumpFallback::InProcess),
                        ],
                    ),
                    strip_level: s.choice(
                        &mut cx,
                        "strip_level",
                        x.strip_level,
                        &[
                            ("none", StripLevel::None),
                            ("arrays", StripLevel::Arrays),
                            ("app", StripLevel::App),
                        ],
                    ),
                    keep_full: s.bool(&mut cx, "keep_full", x.keep_full),
                    child_deadline_s: s.u64(
                        &mut cx,
                        "child_deadline_s",
                        x.child_deadline_s,
                        5..=3600,
                    ),
                    once_per_process: s.bool(&mut cx, "once_per_process", x.once_per_process),
                    per_version_quota: s.u32(
                        &mut cx,
                        "per_version_quota",
                        x.per_version_quota,
                        0..=1000,
                    ),
                    quota_window_days: s.u32(
                        &mut cx,
                        "quota_window_days",
                        x.quota_window_days,
                        1..=365,
                    ),
                    min_free_disk_mb: s.u64(
                        &mut cx,
                        "min_free_disk_mb",
                        x.min_free_disk_mb,
                        0..=1_048_576,
                    ),
                    min_free_disk_heap_factor: s.u64(
                        &mut cx,
                        "min_free_disk_heap_factor",
                        x.min_free_disk_heap_factor,
                        0..=16,
                    ),
                };
                s.finish(&mut cx);
                p
            },
            analysis: {
                let mut s = r.section(&mut cx, "analysis");
                let a = &d.analysis;
                let p = AnalysisPolicy {
                    bitmap_min_pixels: s.u64(
                        &mut cx,
                        "bitmap_min_pixels",
                        a.bitmap_min_pixels,
                        1..=(1 << 40),
                    ),
                    big_array_bytes: s.u64(
                        &mut cx,
                        "big_array_bytes",
                        a.big_array_bytes,
                        1024..=(1 << 40),
                    ),
                    top_dominators: s.u32(&mut cx, "top_dominators", a.top_dominators, 1..=1000),
                    max_paths_per_class: s.u32(
                        &mut cx,
                        "max_paths_per_class",
                        a.max_paths_per_class,
                        1..=1000,
                    ),
                    max_attempts: s.u32(&mut cx, "max_attempts", a.max_attempts, 1..=20),
                    memory_limit_mb: s.u64(
                        &mut cx,
                        "memory_limit_mb",
                        a.memory_limit_mb,
                        32..=65_536,
                    ),
                };
                s.finish(&mut cx);
                p
            },
            spool: {
                let mut s = r.section(&mut cx, "spool");
                let x = &d.spool;
                let p = SpoolPolicy {
                    max_bytes: s.u64(&mut cx, "max_bytes", x.max_bytes, (1 << 20)..=(64 << 30)),
                    max_count: s.u32(&mut cx, "max_count", x.max_count, 1..=10_000),
                    max_age_days: s.u32(&mut cx, "max_age_days", x.max_age_days, 1..=365),
                };
                s.finish(&mut cx);
                p
            },
            death: {
                let mut s = r.section(&mut cx, "death");
                let x = &d.death;
                let p = DeathPolicy {
                    report: s.bool(&mut cx, "report", x.report),
                    max_per_day: s.u32(&mut cx, "max_per_day", x.max_per_day, 0..=1000),
                };
                s.finish(&mut cx);
                p
            },
            upload: {
                let mut s = r.section(&mut cx, "upload");
                let u = &d.upload;
                let p = UploadPolicy {
                    url: s.url(&mut cx, "url", &u.url),
                    unmetered_only: s.bool(&mut cx, "unmetered_only", u.unmetered_only),
                    daily_byte_budget: s.u64(
                        &mut cx,
                        "daily_byte_budget",
                        u.daily_byte_budget,
                        0..=(1 << 40),
                    ),
                    max_attempts: s.u32(&mut cx, "max_attempts", u.max_attempts, 1..=1000),
                    backoff_base_ms: s.u64(
                        &mut cx,
                        "backoff_base_ms",
                        u.backoff_base_ms,
                        100..=86_400_000,
                    ),
                    backoff_cap_ms: s.u64(
                        &mut cx,
                        "backoff_cap_ms",
                        u.backoff_cap_ms,
                        100..=604_800_000,
                    ),
                    timeout_ms: s.u64(&mut cx, "timeout_ms", u.timeout_ms, 100..=600_000),
                };
                s.finish(&mut cx);
                p
            },
            remote: {
                let mut s = r.section(&mut cx, "remote");
                let x = &d.remote;
                let p = RemotePolicy {
                    url: s.url(&mut cx, "url", &x.url),
                    min_refresh_hours: s.u64(
                        &mut cx,
                        "min_refresh_hours",
                        x.min_refresh_hours,
                        1..=8760,
                    ),
                    max_bytes: s.u64(
                        &mut cx,
                        "max_bytes",
                        x.max_bytes,
                        256..=(MAX_DOCUMENT_BYTES as u64),
                    ),
                    timeout_ms: s.u64(&mut cx, "timeout_ms", x.timeout_ms, 100..=120_000),
                };
                s.finish(&mut cx);
                p
            },
        };
        r.finish(&mut cx);
        // Cross-field rules.
        if p.upload.backoff_cap_ms < p.upload.backoff_base_ms {
            cx.err(
                "upload.backoff_cap_ms",
                format!(
                    "{} is below upload.backoff_base_ms {}",
                    p.upload.backoff_cap_ms, p.upload.backoff_base_ms
                ),
            );
        }
        if cx.errors.is_empty() {
            Ok(Parsed {
                policy: p,
                unknown: cx.unknown,
            })
        } else {
            Err(PolicyError::Invalid(cx.errors))
        }
    }

    /// The policy as compact JSON (the form cached on disk and shown in `status.json`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Errors and unknown fields collected while reading one document.
#[derive(Default)]
struct Cx {
    errors: Vec<FieldError>,
    unknown: Vec<String>,
}

impl Cx {
    fn err(&mut self, field: impl Into<String>, what: impl Into<String>) {
        self.errors.push(FieldError {
            field: field.into(),
            what: what.into(),
        });
    }
}

/// One JSON object being read: remembers which keys were used so the rest can be reported.
struct Obj<'a> {
    map: Option<&'a Map<String, Value>>,
    path: String,
    used: Vec<&'static str>,
}

impl<'a> Obj<'a> {
    fn new(map: &'a Map<String, Value>, path: &str) -> Self {
        Obj {
            map: Some(map),
            path: path.to_string(),
            used: Vec::new(),
        }
    }

    fn name(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.used.push(key);
        self.map.and_then(|m| m.get(key))
    }

    /// A nested object; a missing one reads as all defaults, a non-object is an error.
    fn section(&mut self, cx: &mut Cx, key: &'static str) -> Obj<'a> {
        let path = self.name(key);
        match self.get(key) {
            None => Obj {
                map: None,
                path,
                used: Vec::new(),
            },
            Some(Value::Object(m)) => Obj {
                map: Some(m),
                path,
                used: Vec::new(),
            },
            Some(v) => {
                cx.err(
                    path.clone(),
                    format!("expected an object, found {}", kind(v)),
                );
                Obj {
                    map: None,
                    path,
                    used: Vec::new(),
                }
            }
        }
    }

    fn finish(self, cx: &mut Cx) {
        if let Some(m) = self.map {
            for k in m.keys() {
                if !self.used.iter().any(|u| u == k) {
                    cx.unknown.push(self.name(k));
                }
            }
        }
    }

    fn u64(&mut self, cx: &mut Cx, key: &'static str, def: u64, range: RangeInclusive<u64>) -> u64 {
        let Some(v) = self.get(key) else { return def };
        let name = self.name(key);
        match v.as_u64() {
            Some(n) if range.contains(&n) => n,
            Some(n) => {
                cx.err(
                    name,
                    format!("{n} is out of range {}..={}", range.start(), range.end()),
                );
                def
            }
            None => {
                let what = match v {
                    Value::Number(n) => format!(
                        "{n} is not a whole number in range {}..={}",
                        range.start(),
                        range.end()
                    ),
                    _ => format!("expected a whole number, found {}", kind(v)),
                };
                cx.err(name, what);
                def
            }
        }
    }

    fn u32(&mut self, cx: &mut Cx, key: &'static str, def: u32, range: RangeInclusive<u32>) -> u32 {
        let r = u64::from(*range.start())..=u64::from(*range.end());
        // In range means it fits.
        u32::try_from(self.u64(cx, key, u64::from(def), r)).unwrap_or(def)
    }

    fn bool(&mut self, cx: &mut Cx, key: &'static str, def: bool) -> bool {
        match self.get(key) {
            None => def,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                cx.err(
                    self.name(key),
                    format!("expected true or false, found {}", kind(v)),
                );
                def
            }
        }
    }

    fn choice<T: Copy>(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
        def: T,
        options: &[(&str, T)],
    ) -> T {
        let Some(v) = self.get(key) else { return def };
        let names: Vec<String> = options.iter().map(|(n, _)| format!("\"{n}\"")).collect();
        match v {
            Value::String(s) => match options.iter().find(|(n, _)| n == s) {
                Some((_, t)) => *t,
                None => {
                    cx.err(
                        self.name(key),
                        format!("\"{s}\" is not one of {}", names.join(", ")),
                    );
                    def
                }
            },
            _ => {
                cx.err(
                    self.name(key),
                    format!("expected one of {}, found {}", names.join(", "), kind(v)),
                );
                def
            }
        }
    }

    fn url(&mut self, cx: &mut Cx, key: &'static str, def: &Option<String>) -> Option<String> {
        match self.get(key) {
            None => def.clone(),
            Some(Value::Null) => None,
            Some(Value::String(s)) if s.len() > 2048 => {
                cx.err(
                    self.name(key),
                    format!("is {} bytes long, more than 2048", s.len()),
                );
                def.clone()
            }
            Some(Value::String(s)) if s.starts_with("http://") || s.starts_with("https://") => {
                Some(s.clone())
            }
            Some(Value::String(s)) => {
                cx.err(
                    self.name(key),
                    format!(
                        "\"{}\" is not an http:// or https:// URL",
                        s.chars().take(64).collect::<String>()
                    ),
                );
                def.clone()
            }
            Some(v) => {
                cx.err(
                    self.name(key),
                    format!("expected a URL string or null, found {}", kind(v)),
                );
                def.clone()
            }
        }
    }

    fn thresholds(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
        def: &[HeapThreshold],
    ) -> Vec<HeapThreshold> {
        let Some(v) = self.get(key) else {
            return def.to_vec();
        };
        let name = self.name(key);
        let Value::Array(items) = v else {
            cx.err(
                name,
                format!("expected an array of tiers, found {}", kind(v)),
            );
            return def.to_vec();
        };
        if items.is_empty() || items.len() > 8 {
            cx.err(name, format!("has {} tiers, expected 1..=8", items.len()));
            return def.to_vec();
        }
        let before = cx.errors.len();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = format!("{name}[{i}]");
            let Value::Object(m) = item else {
                cx.err(path, format!("expected an object, found {}", kind(item)));
                continue;
            };
            let mut o = Obj::new(m, &path);
            let min = o.u64(cx, "min_max_heap_mb", u64::MAX, 0..=65_536);
            let pct = o.u64(cx, "percent", u64::MAX, 1..=100);
            if o.map.is_some_and(|m| !m.contains_key("min_max_heap_mb")) {
                cx.err(o.name("min_max_heap_mb"), "is missing");
            }
            if o.map.is_some_and(|m| !m.contains_key("percent")) {
                cx.err(o.name("percent"), "is missing");
            }
            o.finish(cx);
            out.push(HeapThreshold {
                min_max_heap_mb: min,
                percent: pct,
            });
        }
        if cx.errors.len() > before {
            return def.to_vec();
        }
        if !out.iter().any(|t| t.min_max_heap_mb == 0) {
            cx.err(
                name,
                "needs a tier with min_max_heap_mb 0, so every heap size has a threshold",
            );
            return def.to_vec();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(json: &str) -> Vec<String> {
        match Policy::parse(json.as_bytes()) {
            Err(PolicyError::Invalid(v)) => v.iter().map(|e| e.to_string()).collect(),
            other => panic!("expected Invalid for {json}, got {other:?}"),
        }
    }

    #[test]
    fn default_equals_the_shipped_file() {
        let p = Policy::parse(DEFAULT_JSON.as_bytes()).unwrap();
        assert!(p.unknown.is_empty(), "{:?}", p.unknown);
        assert_eq!(p.policy, Policy::default());
        // And the serialised form round-trips.
        let again = Policy::parse(Policy::default().to_json().as_bytes()).unwrap();
        assert_eq!(again.policy, Policy::default());
    }

    #[test]
    fn empty_object_is_all_defaults() {
        assert_eq!(Policy::parse(b"{}").unwrap().policy, Policy::default());
    }

    #[test]
    fn thresholds_by_max_heap() {
        let h = Policy::default().heap;
        assert_eq!(h.threshold_percent(1024 << 20), 80);
        assert_eq!(h.threshold_percent(512 << 20), 80);
        assert_eq!(h.threshold_percent(511 << 20), 85);
        assert_eq!(h.threshold_percent(256 << 20), 85);
        assert_eq!(h.threshold_percent(255 << 20), 90);
        assert_eq!(h.threshold_percent(64 << 20), 90);
    }

    #[test]
    fn unknown_fields_are_reported_and_ignored() {
        let p = Policy::parse(br#"{"version":7,"future":1,"heap":{"strikes":4,"colour":"red"}}"#)
            .unwrap();
        assert_eq!(p.policy.version, 7);
        assert_eq!(p.policy.heap.strikes, 4);
        assert_eq!(
            p.unknown,
            vec!["heap.colour".to_string(), "future".to_string()]
        );
    }

    #[test]
    fn each_bad_field_is_named() {
        let e = bad(
            r#"{"poll_interval_ms":5,"heap":{"strikes":0,"ascending":"yes"},"dump":{"mode":"magic"},"fd":{"max":-3}}"#,
        );
        assert_eq!(
            e,
            vec![
                "poll_interval_ms: 5 is out of range 100..=600000",
                "heap.strikes: 0 is out of range 1..=100",
                "heap.ascending: expected true or false, found a string",
                "fd.max: -3 is not a whole number in range 16..=1048576",
                "dump.mode: \"magic\" is not one of \"fork\", \"in_process\"",
            ]
        );
    }

    #[test]
    fn wrong_types_and_shapes() {
        assert_eq!(
            bad(r#"{"heap":3}"#),
            vec!["heap: expected an object, found a number"]
        );
        assert_eq!(
            bad(r#"{"version":"2"}"#),
            vec!["version: expected a whole number, found a string"]
        );
        assert_eq!(
            bad(r#"{"poll_interval_ms":1.5}"#),
            vec!["poll_interval_ms: 1.5 is not a whole number in range 100..=600000"]
        );
        assert_eq!(
            bad(r#"{"remote":{"url":"ftp://x"}}"#),
            vec!["remote.url: \"ftp://x\" is not an http:// or https:// URL"]
        );
        assert_eq!(
            bad(r#"{"heap":{"thresholds":[{"min_max_heap_mb":256,"percent":101}]}}"#),
            vec!["heap.thresholds[0].percent: 101 is out of range 1..=100"]
        );
        assert_eq!(
            bad(r#"{"heap":{"thresholds":[{"min_max_heap_mb":256,"percent":80}]}}"#),
            vec!["heap.thresholds: needs a tier with min_max_heap_mb 0, so every heap size has a threshold"]
        );
        assert_eq!(
            bad(r#"{"upload":{"backoff_base_ms":5000,"backoff_cap_ms":1000}}"#),
            vec!["upload.backoff_cap_ms: 1000 is below upload.backoff_base_ms 5000"]
        );
    }

    #[test]
    fn syntax_errors() {
        for t in [
            &b"{\"version\": 2, \"heap\": {"[..],
            b"",
            b"[1,2]",
            b"null",
            b"\xff\xfe",
        ] {
            let e = Policy::parse(t).unwrap_err();
            assert!(matches!(e, PolicyError::Syntax(_)), "{e}");
            assert!(e.to_string().contains("last good policy stays active"));
        }
        let big = vec![b' '; MAX_DOCUMENT_BYTES + 1];
        assert!(matches!(
            Policy::parse(&big),
            Err(PolicyError::TooBig { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".{0,400}") {
            let _ = Policy::parse(s.as_bytes());
        }
    }
}
