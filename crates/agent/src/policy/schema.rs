//! The policy's schema, declared once: every section and field of the document with its type,
//! default, accepted values and doc, in one `schema!` table (see [`super::field`]). The
//! structs, `Default`, the reading and validation of each field, and the reference
//! `config/POLICY.md` all come from this table; `config/policy.default.json` is checked against
//! it by a test. A new field is one line here (plus the JSON file and the reference, which the
//! tests say how to update); cross-field rules are in [`super::parse`].
#![forbid(unsafe_code)]

use super::field::{schema, Flag, Nested, OneOf, OrNull, Tiers, Url};
use serde::Serialize;
use std::ops::RangeInclusive;

schema! {
    /// The whole policy.
    pub struct Policy {
        /// Version of this document; a refresh only activates a strictly newer one (or the same
        /// one signed again later: same content, later `issued_at_s`).
        version: u64 = 1, 0..=(1 << 53);
        /// When the document was signed, in seconds since the epoch (UTC). A remote policy must
        /// carry it, and is refused while it lies more than a day ahead of the device's clock.
        /// The policy given at start needs none.
        issued_at_s: Option<u64> = None, OrNull(0..=(1 << 40));
        /// When the document stops being valid, in seconds since the epoch (UTC), after
        /// `issued_at_s`. A remote policy must carry it: once past, it is refused when fetched
        /// or loaded, and while active it gives way to the policy given at start.
        expires_at_s: Option<u64> = None, OrNull(0..=(1 << 40));
        /// Time between two samples, in ms.
        poll_interval_ms: u64 = 5000, 100..=600_000;
        /// The Java heap triggers.
        heap: HeapPolicy = HeapPolicy::default(), Nested;
        /// The file-descriptor trigger.
        fd: FdPolicy = FdPolicy::default(), Nested;
        /// The thread-count trigger.
        threads: ThreadPolicy = ThreadPolicy::default(), Nested;
        /// The virtual-size trigger (32-bit processes only).
        vm_size: VmSizePolicy = VmSizePolicy::default(), Nested;
        /// The memory-cgroup trigger (where the process's cgroup has a memory limit).
        cgroup_memory: CgroupMemoryPolicy = CgroupMemoryPolicy::default(), Nested;
        /// How a dump is taken and how often it may be.
        dump: DumpPolicy = DumpPolicy::default(), Nested;
        /// Limits of the analysis of a dump.
        analysis: AnalysisPolicy = AnalysisPolicy::default(), Nested;
        /// Limits of the on-disk incident queue.
        spool: SpoolPolicy = SpoolPolicy::default(), Nested;
        /// Reports of the previous process's death, from the flight recorder.
        death: DeathPolicy = DeathPolicy::default(), Nested;
        /// Upload of reports.
        upload: UploadPolicy = UploadPolicy::default(), Nested;
        /// Where the next policy comes from.
        remote: RemotePolicy = RemotePolicy::default(), Nested;
    }

    /// The Java heap triggers.
    pub struct HeapPolicy {
        /// Tiers by max heap; the tier with the largest `min_max_heap_mb` not above the max heap
        /// applies: used heap above its `percent` of the max heap is a strike. The default is
        /// ≥512 MB → 80 %, ≥256 MB → 85 %, otherwise 90 %.
        thresholds: Vec<HeapThreshold> = vec![
            HeapThreshold::tier(512, 80),
            HeapThreshold::tier(256, 85),
            HeapThreshold::tier(0, 90),
        ], Tiers;
        /// Consecutive polls over the threshold that make a verdict.
        strikes: u32 = 3, 1..=100;
        /// Whether used heap must not fall between strikes (falling resets the count).
        ascending: bool = true, Flag;
        /// With `ascending`, how far used heap may fall (percent of max heap) and still count as
        /// not falling; 0 is strict: any fall resets.
        slack_percent: u64 = 0, 0..=50;
        /// Used heap above this percent of max heap makes an immediate verdict.
        fast_huge_percent: u64 = 90, 1..=100;
        /// Growth of used heap between two polls above this (MB) makes an immediate verdict.
        fast_huge_growth_mb: u64 = 350, 1..=65_536;
    }

    /// The file-descriptor trigger.
    pub struct FdPolicy {
        /// Open fds above this count are a strike.
        max: u64 = 1000, 16..=1_048_576;
        /// ... or above this percent of the soft `Max open files`, whichever is lower.
        soft_limit_percent: u64 = 95, 1..=100;
        /// Consecutive polls over the threshold that make a verdict.
        strikes: u32 = 3, 1..=100;
        /// How far the count may fall between strikes and still count.
        tolerance: u64 = 50, 0..=100_000;
    }

    /// The thread-count trigger.
    pub struct ThreadPolicy {
        /// Threads above this count are a strike.
        max: u64 = 750, 16..=100_000;
        /// The limit on Huawei devices at or below `huawei_legacy_max_api`.
        huawei_legacy_max: u64 = 450, 16..=100_000;
        /// Highest Android API level the Huawei limit applies to.
        huawei_legacy_max_api: u32 = 26, 0..=100;
        /// The limit is also at most this percent of `/proc/sys/kernel/threads-max`.
        threads_max_percent: u64 = 90, 1..=100;
        /// Consecutive polls over the threshold that make a verdict.
        strikes: u32 = 3, 1..=100;
        /// How far the count may fall between strikes and still count.
        tolerance: u64 = 50, 0..=100_000;
    }

    /// The virtual-size trigger; only 32-bit processes run out of address space.
    pub struct VmSizePolicy {
        /// VmSize above this (MB) is a strike in a 32-bit process.
        max_mb_32bit: u64 = 3650, 256..=4096;
        /// Consecutive polls over the threshold that make a verdict.
        strikes: u32 = 3, 1..=100;
    }

    /// The memory-cgroup trigger: the cgroup's working set (usage less inactive page cache)
    /// against the limit that binds (cgroup v2: the lower of `memory.max` and `memory.high` of
    /// the process's cgroup and its ancestors; v1: `memory.limit_in_bytes`). Off where no memory
    /// cgroup is readable (`status.json`'s `cgroup_memory` says why).
    pub struct CgroupMemoryPolicy {
        /// Working set above this percent of the limit is a strike.
        percent: u64 = 85, 1..=100;
        /// Consecutive polls over the threshold that make a verdict.
        strikes: u32 = 3, 1..=100;
        /// Whether the working set must not fall between strikes (falling restarts the run).
        ascending: bool = true, Flag;
        /// With `ascending`, how far it may fall (percent of the limit) and still count as not
        /// falling.
        slack_percent: u64 = 0, 0..=50;
    }

    /// Dump settings and quotas.
    pub struct DumpPolicy {
        /// How a dump is taken: suspend, fork, resume and dump in the child, or in the process
        /// itself (stop-the-world).
        mode: DumpMode = DumpMode::Fork, OneOf(DumpMode::NAMES);
        /// What to do when the fork dump is not possible here: no dump, or dump in process.
        fallback: DumpFallback = DumpFallback::Skip, OneOf(DumpFallback::NAMES);
        /// How much the stripper removes while the dump is written: nothing, primitive array
        /// contents, or also the heaps that are not the app's.
        strip_level: StripLevel = StripLevel::Arrays, OneOf(StripLevel::NAMES);
        /// Keep the full (unstripped) dump beside the stripped one.
        keep_full: bool = false, Flag;
        /// Seconds the forked child may take before it is killed.
        child_deadline_s: u64 = 60, 5..=3600;
        /// At most one dump per process lifetime.
        once_per_process: bool = true, Flag;
        /// Dumps per app version within `quota_window_days`.
        per_version_quota: u32 = 5, 0..=1000;
        /// The quota window, in days.
        quota_window_days: u32 = 15, 1..=365;
        /// Free disk needed before dumping, in MB.
        min_free_disk_mb: u64 = 200, 0..=1_048_576;
        /// ... and at least this many times the used heap.
        min_free_disk_heap_factor: u64 = 2, 0..=16;
        /// The incident lists at most this many of the process's Java threads (id and name,
        /// `runningInfo.javaThreads`), which name the threads a report's paths start on; 0
        /// lists none.
        java_threads_max: u32 = 4096, 0..=65_536;
    }

    /// Limits of the analysis of a dump.
    pub struct AnalysisPolicy {
        /// Bitmaps with at least this many pixels are reported (768 × 1366 by default).
        bitmap_min_pixels: u64 = 768 * 1366, 1..=(1 << 40);
        /// Arrays of at least this many bytes are reported.
        big_array_bytes: u64 = 262_144, 1024..=(1 << 40);
        /// Largest dominators reported.
        top_dominators: u32 = 20, 1..=1000;
        /// GC-root paths kept per leaking class.
        max_paths_per_class: u32 = 45, 1..=1000;
        /// Attempts at analysing one dump before giving up.
        max_attempts: u32 = 3, 1..=20;
        /// Memory the analysing process may use, MB: its data limit (`RLIMIT_DATA`, its own private memory). A dump whose analysis could need more than half of it has the analysis keep its large arrays in scratch files under the agent's directory (see `scratch_max_mb`), which the limit does not count. A dump whose whole analysis would need more than the limit even so is reported as far as it fits: the class histogram, with `analysis.budget` saying what was left out.
        memory_limit_mb: u64 = 128, 32..=65_536;
        /// Scratch files an analysis may write while it runs, MB (0: none; the analysis then plans in memory): at most this and half the free space of the agent's file system. They last only as long as the analysis (each is unlinked as it is made, so a killed analysis leaves none) and are not counted in `spool.max_bytes`, which bounds what the agent keeps. About 60 bytes per object of the dump at their peak: 1024 MB holds a dump of some 15 M objects.
        scratch_max_mb: u64 = 1024, 0..=65_536;
    }

    /// Limits of the on-disk incident queue.
    pub struct SpoolPolicy {
        /// Total bytes of queued incidents (1 MiB..=64 GiB; 256 MiB by default); an analysis's scratch files, which last only while it runs, are bounded by `analysis.scratch_max_mb` instead.
        max_bytes: u64 = 256 << 20, (1 << 20)..=(64 << 30);
        /// Queued incidents.
        max_count: u32 = 20, 1..=10_000;
        /// Incidents older than this many days are dropped.
        max_age_days: u32 = 14, 1..=365;
    }

    /// Reports of the previous process's death (the flight recorder).
    pub struct DeathPolicy {
        /// Report a previous process that died without a clean exit.
        report: bool = true, Flag;
        /// Death incidents queued per day at most (a crash loop must not fill the spool).
        max_per_day: u32 = 5, 0..=1000;
    }

    /// Upload of reports.
    pub struct UploadPolicy {
        /// Where reports go (a tus endpoint); null disables upload. A remote policy must name it
        /// (null included).
        url: Option<String> = None, Url;
        /// Upload only on unmetered networks.
        unmetered_only: bool = true, Flag;
        /// Bytes uploaded per day at most (50 MiB by default).
        daily_byte_budget: u64 = 50 << 20, 0..=(1 << 40);
        /// Attempts per report before it is dropped.
        max_attempts: u32 = 10, 1..=1000;
        /// First retry delay, ms; doubles each attempt.
        backoff_base_ms: u64 = 30_000, 100..=86_400_000;
        /// Largest retry delay, ms (6 h by default); not below `backoff_base_ms`.
        backoff_cap_ms: u64 = 6 * 3600 * 1000, 100..=604_800_000;
        /// Timeout of one request, ms.
        timeout_ms: u64 = 30_000, 100..=600_000;
    }

    /// Where the next policy comes from.
    pub struct RemotePolicy {
        /// Where the next policy is fetched; null disables refresh. Set, it needs the public key
        /// given at start (remote policies are signed). A remote policy must name it (null
        /// included).
        url: Option<String> = None, Url;
        /// Hours between two fetches at least.
        min_refresh_hours: u64 = 12, 1..=8760;
        /// Largest policy body accepted, bytes.
        max_bytes: u64 = 65_536, 256..=(super::MAX_DOCUMENT_BYTES as u64);
        /// Timeout of the fetch, ms.
        timeout_ms: u64 = 10_000, 100..=120_000;
    }
}

/// One heap tier: applies when the max heap is at least `min_max_heap_mb`. Both fields are
/// required in a tier; what they accept is [`HeapThreshold::MIN_MAX_HEAP_MB`] and
/// [`HeapThreshold::PERCENT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HeapThreshold {
    /// Lower bound of the max heap (MB) this tier applies to.
    pub min_max_heap_mb: u64,
    /// Used heap, in percent of the max heap, above which a poll is a strike.
    pub percent: u64,
}

impl HeapThreshold {
    /// What `min_max_heap_mb` accepts.
    pub const MIN_MAX_HEAP_MB: RangeInclusive<u64> = 0..=65_536;
    /// What `percent` accepts.
    pub const PERCENT: RangeInclusive<u64> = 1..=100;
    /// How many tiers `heap.thresholds` has.
    pub const COUNT: RangeInclusive<usize> = 1..=8;

    /// A tier.
    pub const fn tier(min_max_heap_mb: u64, percent: u64) -> HeapThreshold {
        HeapThreshold {
            min_max_heap_mb,
            percent,
        }
    }
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

impl DumpMode {
    /// The names the document uses.
    pub const NAMES: &'static [(&'static str, DumpMode)] = &[
        ("fork", DumpMode::Fork),
        ("in_process", DumpMode::InProcess),
    ];
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

impl DumpFallback {
    /// The names the document uses.
    pub const NAMES: &'static [(&'static str, DumpFallback)] = &[
        ("skip", DumpFallback::Skip),
        ("in_process", DumpFallback::InProcess),
    ];
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

impl StripLevel {
    /// The names the document uses.
    pub const NAMES: &'static [(&'static str, StripLevel)] = &[
        ("none", StripLevel::None),
        ("arrays", StripLevel::Arrays),
        ("app", StripLevel::App),
    ];
}

impl HeapPolicy {
    /// The strike threshold (percent of max heap) for a heap of `max_heap_bytes` (the rule is
    /// the trigger's, [`crate::trigger::HeapConfig::threshold_percent`]).
    pub fn threshold_percent(&self, max_heap_bytes: u64) -> u64 {
        crate::trigger::HeapConfig::from(self).threshold_percent(max_heap_bytes)
    }
}
