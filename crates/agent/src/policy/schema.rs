//! The policy's schema: one struct per JSON section, every field documented with its range
//! and default, and the defaults themselves (equal to `config/policy.default.json`).
#![forbid(unsafe_code)]

use serde::Serialize;

/// The whole policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policy {
    /// Version of this document; a refresh only activates a strictly newer one (or the same
    /// one signed again later: same content, later `issued_at_s`). Range 0..=2^53. Default 1.
    pub version: u64,
    /// When the document was signed, in seconds since the epoch (UTC). A remote policy must
    /// carry it, and is refused while it lies more than a day ahead of the device's clock.
    /// Range 0..=2^40. Default null (the policy given at start needs none).
    pub issued_at_s: Option<u64>,
    /// When the document stops being valid, in seconds since the epoch (UTC), after
    /// `issued_at_s`. A remote policy must carry it: once past, it is refused when fetched or
    /// loaded, and while active it gives way to the policy given at start. Range 0..=2^40.
    /// Default null.
    pub expires_at_s: Option<u64>,
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
    /// The memory-cgroup trigger (where the process's cgroup has a memory limit).
    pub cgroup_memory: CgroupMemoryPolicy,
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

/// The memory-cgroup trigger: the cgroup's working set (usage less inactive page cache)
/// against the limit that binds (cgroup v2: the lower of `memory.max` and `memory.high` of the
/// process's cgroup and its ancestors; v1: `memory.limit_in_bytes`). Off where no memory cgroup
/// is readable (`status.json`'s `cgroup_memory` says why).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CgroupMemoryPolicy {
    /// Working set above this percent of the limit is a strike. Range 1..=100. Default 85.
    pub percent: u64,
    /// Consecutive polls over the threshold that make a verdict. Range 1..=100. Default 3.
    pub strikes: u32,
    /// Whether the working set must not fall between strikes (falling restarts the run).
    /// Default true.
    pub ascending: bool,
    /// With `ascending`, how far it may fall (percent of the limit) and still count as not
    /// falling. Range 0..=50. Default 0.
    pub slack_percent: u64,
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
    /// The incident lists at most this many of the process's Java threads (id and name,
    /// `runningInfo.javaThreads`), which name the threads a report's paths start on; 0 lists
    /// none. Range 0..=65536. Default 4096.
    pub java_threads_max: u32,
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
    /// `https://` URL (plain `http://` only to a loopback address), at most 2048 bytes; `null`
    /// disables upload. A remote policy must name it (null included). Default null.
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
    /// `https://` URL (plain `http://` only to a loopback address), at most 2048 bytes; `null`
    /// disables refresh. Set, it needs the public key given at start (remote policies are
    /// signed). A remote policy must name it (null included). Default null.
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
            issued_at_s: None,
            expires_at_s: None,
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
            cgroup_memory: CgroupMemoryPolicy {
                percent: 85,
                strikes: 3,
                ascending: true,
                slack_percent: 0,
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
                java_threads_max: 4096,
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
