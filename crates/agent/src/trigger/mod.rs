//! Deciding: pure state machines over [`Sample`]s that turn a run of bad polls into a
//! [`Verdict`], and the grouping of raw fd / thread lists into an [`Inventory`].
//!
//! Invariants:
//! - No I/O, no clock, no randomness: [`Triggers::observe`] is a function of the samples seen so
//!   far, the machines' [`Config`] and the device, so every rule is tested with tables.
//! - The machines read their own [`Config`], never the whole policy: `policy::configs` builds it
//!   from the policy (`Config::from(&policy)`), and it has no defaults of its own.
//! - A strike run counts consecutive polls over a threshold in which the value did not fall by more
//!   than the slack (heap: `slack_percent` of max heap, fd/threads: `tolerance`); a fall beyond it
//!   starts a new run at this poll, a poll under the threshold resets the run to zero.
//! - A verdict carries its reason and exactly the samples that made it; the machine that fired is
//!   reset, so the next verdict of that kind needs a whole new run. A run holds at most as many
//!   samples as its strikes: one that reached them but could not fire keeps its latest ones.
//! - At most one verdict per poll, in the order fast-huge, heap, cgroup memory, fd, threads,
//!   vm-size; a kind that
//!   fired but lost the poll to another keeps its run and goes first on the next poll (so a kind
//!   that fires on every poll cannot starve the others).
//! - A muted kind ([`Triggers::mute`]: the agent has acted on it for the rest of the process)
//!   never takes a poll's verdict; when its machine fires it is reset as if it had.
#![forbid(unsafe_code)]

pub mod cgroup;
#[cfg(test)]
mod edge_tests;
pub mod inventory;

pub use inventory::{fd_kind, fold_name, Group, Inventory, InventoryKind};

use crate::sample::Sample;
use serde::Serialize;

/// The settings of every machine, one section each (built from the policy's sections of the
/// same names in `policy::configs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub heap: HeapConfig,
    pub fd: FdConfig,
    pub threads: ThreadConfig,
    pub vm_size: VmSizeConfig,
    pub cgroup_memory: CgroupConfig,
}

/// One heap tier: applies when the max heap is at least `min_max_heap_mb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    pub min_max_heap_mb: u64,
    /// Used heap, in percent of the max heap, above which a poll is a strike.
    pub percent: u64,
}

/// The heap machines (the strike run and fast-huge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeapConfig {
    /// The tier with the largest `min_max_heap_mb` not above the max heap applies.
    pub thresholds: Vec<Tier>,
    pub strikes: u32,
    /// Used heap must not fall (by more than `slack_percent` of max heap) between strikes.
    pub ascending: bool,
    pub slack_percent: u64,
    /// Used heap above this percent of max heap is an immediate verdict.
    pub fast_huge_percent: u64,
    /// Growth above this (MB) between two polls is an immediate verdict.
    pub fast_huge_growth_mb: u64,
}

impl HeapConfig {
    /// The strike threshold (percent of max heap) for a heap of `max_heap_bytes`: the tier
    /// with the largest `min_max_heap_mb` not above it (100 when none applies).
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

/// The fd machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdConfig {
    pub max: u64,
    /// The threshold is also at most this percent of the soft limit.
    pub soft_limit_percent: u64,
    pub strikes: u32,
    /// How far the count may fall between strikes and still count.
    pub tolerance: u64,
}

/// The thread machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadConfig {
    pub max: u64,
    /// The limit on Huawei devices at or below `huawei_legacy_max_api`.
    pub huawei_legacy_max: u64,
    pub huawei_legacy_max_api: u32,
    /// The threshold is also at most this percent of `threads-max`.
    pub threads_max_percent: u64,
    pub strikes: u32,
    pub tolerance: u64,
}

/// The VmSize machine (32-bit processes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmSizeConfig {
    pub max_mb_32bit: u64,
    pub strikes: u32,
}

/// The memory-cgroup machine ([`cgroup`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupConfig {
    /// Working set above this percent of the limit is a strike.
    pub percent: u64,
    pub strikes: u32,
    pub ascending: bool,
    /// With `ascending`, how far it may fall (percent of the limit) and still count.
    pub slack_percent: u64,
}

/// The machines' settings from the default policy, for tests.
#[cfg(test)]
pub(crate) fn default_config() -> Config {
    Config::from(&crate::policy::Policy::default())
}

/// What a verdict is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Used heap over its threshold for `heap.strikes` ascending polls.
    Heap,
    /// Used heap over `fast_huge_percent`, or grown by more than `fast_huge_growth_mb` in one poll.
    FastHuge,
    /// Open fds over their threshold for `fd.strikes` polls.
    Fd,
    /// Threads over their threshold for `threads.strikes` polls.
    Threads,
    /// VmSize of a 32-bit process over `vm_size.max_mb_32bit` for `vm_size.strikes` polls.
    VmSize,
    /// The memory cgroup's working set over `cgroup_memory.percent` of its limit for
    /// `cgroup_memory.strikes` ascending polls.
    CgroupMemory,
    /// Asked for through `dumpNow`.
    Manual,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Heap => "heap",
            Kind::FastHuge => "fast_huge",
            Kind::Fd => "fd",
            Kind::Threads => "threads",
            Kind::VmSize => "vm_size",
            Kind::CgroupMemory => "cgroup_memory",
            Kind::Manual => "manual",
        }
    }
}

/// A decision to act, with its reason and evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub kind: Kind,
    /// One human line: what crossed which threshold for how long.
    pub reason: String,
    /// The threshold that was crossed, in the unit of the kind (heap: percent; fd, threads:
    /// count; vm_size: kB). 0 for manual.
    pub threshold: u64,
    /// The samples that made the verdict, oldest first.
    pub evidence: Vec<Sample>,
}

/// What is known about the device, fixed for the process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Device {
    /// `Build.MANUFACTURER` on Android, empty elsewhere.
    pub manufacturer: String,
    /// `Build.VERSION.SDK_INT` on Android, 0 elsewhere.
    pub api_level: u32,
    /// Whether the process is 32-bit (address space of 4 GB at most).
    pub is_32bit: bool,
}

impl Device {
    /// The device this code runs on, as far as Rust can tell without the VM.
    pub fn this(manufacturer: &str, api_level: u32) -> Self {
        Device {
            manufacturer: manufacturer.to_string(),
            api_level,
            is_32bit: cfg!(target_pointer_width = "32"),
        }
    }
}

/// Current strike counts, for `status.json`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Strikes {
    pub heap: u32,
    pub fd: u32,
    pub threads: u32,
    pub vm_size: u32,
    pub cgroup_memory: u32,
}

/// Thresholds in force for the last sample, for `status.json`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Thresholds {
    pub heap_percent: u64,
    pub fd: u64,
    pub threads: u64,
    /// Bytes of working set over which a poll is a cgroup-memory strike; `None` without a limit.
    pub cgroup_memory_bytes: Option<u64>,
}

/// The heap threshold in percent for a sample.
pub fn heap_threshold(p: &Config, s: &Sample) -> u64 {
    p.heap.threshold_percent(s.heap_max)
}

/// The fd threshold: `fd.max` or `soft_limit_percent` of the soft limit, whichever is lower.
pub fn fd_threshold(p: &Config, s: &Sample) -> u64 {
    let by_limit = match s.fd_soft_limit {
        0 | u64::MAX => u64::MAX,
        l => l.saturating_mul(p.fd.soft_limit_percent) / 100,
    };
    p.fd.max.min(by_limit)
}

/// The thread threshold: `threads.max` (Huawei at old API levels: `huawei_legacy_max`), and at
/// most `threads_max_percent` of `threads-max`.
pub fn thread_threshold(p: &Config, d: &Device, s: &Sample) -> u64 {
    let huawei = d.manufacturer.eq_ignore_ascii_case("huawei")
        && d.api_level > 0
        && d.api_level <= p.threads.huawei_legacy_max_api;
    let base = if huawei {
        p.threads.huawei_legacy_max
    } else {
        p.threads.max
    };
    match s.threads_max {
        0 => base,
        m => base.min(m.saturating_mul(p.threads.threads_max_percent) / 100),
    }
}

/// One strike run.
#[derive(Debug, Clone, Default)]
struct Run {
    evidence: Vec<Sample>,
    last_value: u64,
}

impl Run {
    /// Feed one poll; returns true when the run reached `need` strikes.
    fn step(
        &mut self,
        s: &Sample,
        over: bool,
        value: u64,
        slack: u64,
        ascending: bool,
        need: u32,
    ) -> bool {
        if !over {
            self.evidence.clear();
            return false;
        }
        if !self.evidence.is_empty() && ascending && value.saturating_add(slack) < self.last_value {
            self.evidence.clear();
        }
        let need = (need as usize).max(1);
        if self.evidence.len() >= need {
            // Reached before but could not fire (another kind took the poll): keep the latest.
            self.evidence.remove(0);
        }
        self.evidence.push(*s);
        self.last_value = value;
        self.evidence.len() >= need
    }

    fn take(&mut self) -> Vec<Sample> {
        std::mem::take(&mut self.evidence)
    }

    fn count(&self) -> u32 {
        self.evidence.len() as u32
    }
}

/// All trigger machines.
#[derive(Debug, Clone, Default)]
pub struct Triggers {
    heap: Run,
    fd: Run,
    threads: Run,
    vm: Run,
    cgroup: Run,
    last: Option<Sample>,
    /// Kinds that never take a poll's verdict ([`bit`]s); kept across [`Triggers::reset`].
    muted: u8,
    /// Kinds that fired on the last poll but lost it to another ([`bit`]s).
    deferred: u8,
}

/// A kind as a bit of [`Triggers::muted`] / [`Triggers::deferred`].
fn bit(k: Kind) -> u8 {
    match k {
        Kind::FastHuge => 1,
        Kind::Heap => 2,
        Kind::Fd => 4,
        Kind::Threads => 8,
        Kind::VmSize => 16,
        Kind::CgroupMemory => 32,
        Kind::Manual => 0,
    }
}

fn pct(used: u64, max: u64) -> f64 {
    if max == 0 {
        0.0
    } else {
        used as f64 * 100.0 / max as f64
    }
}

fn mb(b: u64) -> u64 {
    b >> 20
}

impl Triggers {
    pub fn new() -> Self {
        Self::default()
    }

    /// The strike counts now.
    pub fn strikes(&self) -> Strikes {
        Strikes {
            heap: self.heap.count(),
            fd: self.fd.count(),
            threads: self.threads.count(),
            vm_size: self.vm.count(),
            cgroup_memory: self.cgroup.count(),
        }
    }

    /// Forget every run (after a policy change); muted kinds stay muted.
    pub fn reset(&mut self) {
        let muted = self.muted;
        *self = Self::default();
        self.muted = muted;
    }

    /// Never give a verdict of kind `k` again (the agent acted on one for the rest of the
    /// process), so that it cannot take the poll of another kind.
    pub fn mute(&mut self, k: Kind) {
        self.muted |= bit(k);
    }

    fn run_mut(&mut self, k: Kind) -> Option<&mut Run> {
        match k {
            Kind::Heap => Some(&mut self.heap),
            Kind::Fd => Some(&mut self.fd),
            Kind::Threads => Some(&mut self.threads),
            Kind::VmSize => Some(&mut self.vm),
            Kind::CgroupMemory => Some(&mut self.cgroup),
            Kind::FastHuge | Kind::Manual => None,
        }
    }

    /// The poll's verdict among those that fired (in precedence order): the first one not
    /// muted that was deferred on the last poll, else the first one not muted. The others that
    /// are not muted get their samples back and are deferred; muted ones stay reset.
    fn choose(&mut self, fired: Vec<Verdict>) -> Option<Verdict> {
        let (muted, deferred) = (self.muted, self.deferred);
        let open = |v: &Verdict| muted & bit(v.kind) == 0;
        let pick = fired
            .iter()
            .position(|v| open(v) && deferred & bit(v.kind) != 0)
            .or_else(|| fired.iter().position(open));
        self.deferred = 0;
        let mut out = None;
        for (i, v) in fired.into_iter().enumerate() {
            if Some(i) == pick {
                out = Some(v);
            } else if open(&v) {
                self.deferred |= bit(v.kind);
                if let Some(run) = self.run_mut(v.kind) {
                    run.evidence = v.evidence;
                }
            }
        }
        out
    }

    /// Feed one sample; at most one verdict comes out.
    pub fn observe(&mut self, s: &Sample, p: &Config, d: &Device) -> Option<Verdict> {
        let prev = self.last.replace(*s);
        // Every verdict of this poll, in precedence order; `choose` keeps one.
        let mut fired = Vec::new();
        let mut fast_huge = false;

        // Heap: only meaningful when the VM reported a max.
        if s.heap_max > 0 {
            let fast_pct = s.heap_used.saturating_mul(100)
                > p.heap.fast_huge_percent.saturating_mul(s.heap_max);
            let growth = prev
                .map(|q| s.heap_used.saturating_sub(q.heap_used))
                .unwrap_or(0);
            let fast_growth = growth > p.heap.fast_huge_growth_mb << 20;
            if fast_pct || fast_growth {
                let reason = if fast_pct {
                    format!(
                        "java heap {:.1}% used ({} of {} MB), over the fast-huge {}%",
                        pct(s.heap_used, s.heap_max),
                        mb(s.heap_used),
                        mb(s.heap_max),
                        p.heap.fast_huge_percent
                    )
                } else {
                    format!(
                        "java heap grew {} MB in one poll, over the fast-huge {} MB",
                        mb(growth),
                        p.heap.fast_huge_growth_mb
                    )
                };
                let evidence = prev.into_iter().chain(std::iter::once(*s)).collect();
                self.heap.take();
                fast_huge = true;
                fired.push(Verdict {
                    kind: Kind::FastHuge,
                    reason,
                    threshold: p.heap.fast_huge_percent,
                    evidence,
                });
            }
            let thr = heap_threshold(p, s);
            let over = s.heap_used.saturating_mul(100) > thr.saturating_mul(s.heap_max);
            let slack = s.heap_max / 100 * p.heap.slack_percent;
            let full = self.heap.step(
                s,
                over,
                s.heap_used,
                slack,
                p.heap.ascending,
                p.heap.strikes,
            );
            // A fast-huge poll only restarts the run (it is the same heap, already reported).
            if full && !fast_huge {
                let ev = self.heap.take();
                let reason = format!(
                    "java heap over {}% of {} MB for {} polls{} ({:.1}% → {:.1}%)",
                    thr,
                    mb(s.heap_max),
                    ev.len(),
                    if p.heap.ascending {
                        " without falling"
                    } else {
                        ""
                    },
                    pct(ev[0].heap_used, ev[0].heap_max),
                    pct(s.heap_used, s.heap_max)
                );
                fired.push(Verdict {
                    kind: Kind::Heap,
                    reason,
                    threshold: thr,
                    evidence: ev,
                });
            }
        }

        fired.extend(cgroup::step(&mut self.cgroup, s, p));

        let thr = fd_threshold(p, s);
        let full = self
            .fd
            .step(s, s.fds > thr, s.fds, p.fd.tolerance, true, p.fd.strikes);
        if full {
            let ev = self.fd.take();
            let reason = format!(
                "{} open fds, over {} for {} polls (soft limit {})",
                s.fds,
                thr,
                ev.len(),
                limit_str(s.fd_soft_limit)
            );
            fired.push(Verdict {
                kind: Kind::Fd,
                reason,
                threshold: thr,
                evidence: ev,
            });
        }

        let thr = thread_threshold(p, d, s);
        let full = self.threads.step(
            s,
            s.threads > thr,
            s.threads,
            p.threads.tolerance,
            true,
            p.threads.strikes,
        );
        if full {
            let ev = self.threads.take();
            let reason = format!("{} threads, over {} for {} polls", s.threads, thr, ev.len());
            fired.push(Verdict {
                kind: Kind::Threads,
                reason,
                threshold: thr,
                evidence: ev,
            });
        }

        let thr = p.vm_size.max_mb_32bit * 1024;
        let over = d.is_32bit && s.vm_size_kb > thr;
        let full = self
            .vm
            .step(s, over, s.vm_size_kb, 0, false, p.vm_size.strikes);
        if full {
            let ev = self.vm.take();
            let reason = format!(
                "VmSize {} MB in a 32-bit process, over {} MB for {} polls",
                s.vm_size_kb / 1024,
                p.vm_size.max_mb_32bit,
                ev.len()
            );
            fired.push(Verdict {
                kind: Kind::VmSize,
                reason,
                threshold: thr,
                evidence: ev,
            });
        }
        self.choose(fired)
    }
}

fn limit_str(l: u64) -> String {
    match l {
        0 => "unknown".into(),
        u64::MAX => "unlimited".into(),
        n => n.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    fn heap(seq: u64, used_mb: u64, max_mb: u64) -> Sample {
        Sample {
            seq,
            heap_used: used_mb * MB,
            heap_max: max_mb * MB,
            fd_soft_limit: 32768,
            threads_max: 100_000,
            threads: 20,
            fds: 50,
            ..Sample::default()
        }
    }

    /// Run a list of used-heap values (MB) through fresh triggers with a 256 MB heap; return the
    /// poll (1-based) and kind of each verdict.
    fn heap_run(p: &Config, used: &[u64], max_mb: u64) -> Vec<(u64, Kind, usize)> {
        let mut t = Triggers::new();
        let d = Device::default();
        let mut out = Vec::new();
        for (i, &u) in used.iter().enumerate() {
            if let Some(v) = t.observe(&heap(i as u64 + 1, u, max_mb), p, &d) {
                out.push((i as u64 + 1, v.kind, v.evidence.len()));
            }
        }
        out
    }

    #[test]
    fn heap_strikes_table() {
        let p = default_config();
        // 256 MB heap: threshold 85% = 217.6 MB; fast-huge 90% = 230.4 MB.
        let table: &[(&[u64], &[(u64, Kind, usize)])] = &[
            (&[100, 150, 200], &[]),
            (&[218, 219, 220], &[(3, Kind::Heap, 3)]),
            (&[218, 218, 218], &[(3, Kind::Heap, 3)]), // not falling = equal is fine
            (&[218, 220, 219, 220, 221], &[(5, Kind::Heap, 3)]), // a fall starts a new run at that poll
            (&[218, 220, 200, 219, 220], &[]),                   // under the threshold resets
            (&[218, 220, 200, 219, 220, 221], &[(6, Kind::Heap, 3)]),
            (
                &[218, 219, 220, 221, 222, 223],
                &[(3, Kind::Heap, 3), (6, Kind::Heap, 3)],
            ),
            (&[218, 219, 231], &[(3, Kind::FastHuge, 2)]), // fast-huge wins the same poll
            (&[231], &[(1, Kind::FastHuge, 1)]),
            (&[100, 200], &[]),
            (&[217, 217, 217, 217], &[]), // 84.8%: never over
        ];
        for (used, want) in table {
            assert_eq!(heap_run(&p, used, 256), want.to_vec(), "used {used:?}");
        }
        // Big heap: 80% tier, growth rule.
        assert_eq!(
            heap_run(&p, &[820, 821, 822], 1024),
            vec![(3, Kind::Heap, 3)]
        );
        assert_eq!(
            heap_run(&p, &[100, 451], 1024),
            vec![(2, Kind::FastHuge, 2)]
        );
        assert_eq!(heap_run(&p, &[100, 450], 1024), vec![]);
        // Small heap: 90% tier, so only fast-huge (strictly over 90%) fires.
        assert_eq!(heap_run(&p, &[115, 115, 115], 128), vec![]);
        assert_eq!(
            heap_run(&p, &[110, 115, 116], 128),
            vec![(3, Kind::FastHuge, 2)]
        );
        // Slack: 1% of 256 MB may be lost between strikes.
        let mut slack = p.clone();
        slack.heap.slack_percent = 1;
        assert_eq!(
            heap_run(&slack, &[220, 218, 219], 256),
            vec![(3, Kind::Heap, 3)]
        );
        assert_eq!(heap_run(&p, &[220, 218, 219], 256), vec![]);
        // Not ascending: any three over.
        let mut flat = p.clone();
        flat.heap.ascending = false;
        assert_eq!(
            heap_run(&flat, &[222, 218, 219], 256),
            vec![(3, Kind::Heap, 3)]
        );
        // Strikes configurable.
        let mut five = p.clone();
        five.heap.strikes = 5;
        assert_eq!(
            heap_run(&five, &[218, 219, 220, 221, 222], 256),
            vec![(5, Kind::Heap, 5)]
        );
    }

    #[test]
    fn heap_verdict_carries_the_evidence() {
        let p = default_config();
        let mut t = Triggers::new();
        let d = Device::default();
        assert!(t.observe(&heap(1, 218, 256), &p, &d).is_none());
        assert_eq!(t.strikes().heap, 1);
        assert!(t.observe(&heap(2, 219, 256), &p, &d).is_none());
        let v = t.observe(&heap(3, 220, 256), &p, &d).unwrap();
        assert_eq!(v.kind, Kind::Heap);
        assert_eq!(v.threshold, 85);
        assert_eq!(
            v.evidence.iter().map(|s| s.seq).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert!(
            v.reason
                .starts_with("java heap over 85% of 256 MB for 3 polls without falling"),
            "{}",
            v.reason
        );
        assert_eq!(t.strikes().heap, 0);
    }

    fn counts(
        field: fn(&mut Sample, u64),
        values: &[u64],
        p: &Config,
        d: &Device,
        limit: u64,
    ) -> Vec<(u64, Kind)> {
        let mut t = Triggers::new();
        let mut out = Vec::new();
        for (i, &v) in values.iter().enumerate() {
            let mut s = heap(i as u64 + 1, 10, 256);
            s.fd_soft_limit = limit;
            field(&mut s, v);
            if let Some(v) = t.observe(&s, p, d) {
                out.push((i as u64 + 1, v.kind));
            }
        }
        out
    }

    #[test]
    fn fd_table() {
        let p = default_config();
        let d = Device::default();
        let fd = |s: &mut Sample, v| s.fds = v;
        let table: &[(u64, &[u64], &[(u64, Kind)])] = &[
            (32768, &[1001, 1001, 1001], &[(3, Kind::Fd)]),
            (32768, &[1000, 1000, 1000], &[]),
            (32768, &[1100, 1051, 1060], &[(3, Kind::Fd)]), // fell 49: within tolerance
            (32768, &[1100, 1049, 1060], &[]),              // fell 51: new run at poll 2
            (32768, &[1100, 1049, 1060, 1070], &[(4, Kind::Fd)]),
            (512, &[487, 490, 495], &[(3, Kind::Fd)]), // 95% of 512 = 486
            (512, &[486, 486, 486], &[]),
            (u64::MAX, &[1001, 1002, 1003], &[(3, Kind::Fd)]),
            (0, &[999, 999, 999], &[]),
        ];
        for (limit, vals, want) in table {
            assert_eq!(
                counts(fd, vals, &p, &d, *limit),
                want.to_vec(),
                "limit {limit} {vals:?}"
            );
        }
    }

    #[test]
    fn thread_table() {
        let p = default_config();
        let th = |s: &mut Sample, v| s.threads = v;
        let plain = Device::default();
        let old_huawei = Device {
            manufacturer: "HUAWEI".into(),
            api_level: 26,
            is_32bit: false,
        };
        let new_huawei = Device {
            manufacturer: "Huawei".into(),
            api_level: 27,
            is_32bit: false,
        };
        assert_eq!(
            counts(th, &[751, 800, 760], &p, &plain, 1024),
            vec![(3, Kind::Threads)]
        );
        assert_eq!(counts(th, &[800, 740, 800], &p, &plain, 1024), vec![]);
        assert_eq!(counts(th, &[800, 749, 800], &p, &plain, 1024), vec![]);
        assert_eq!(
            counts(th, &[451, 452, 453], &p, &old_huawei, 1024),
            vec![(3, Kind::Threads)]
        );
        assert_eq!(counts(th, &[451, 452, 453], &p, &new_huawei, 1024), vec![]);
        assert_eq!(counts(th, &[451, 452, 453], &p, &plain, 1024), vec![]);
        // threads-max caps the threshold.
        let mut s = heap(1, 10, 256);
        s.threads_max = 500;
        assert_eq!(thread_threshold(&p, &plain, &s), 450);
        s.threads_max = 0;
        assert_eq!(thread_threshold(&p, &plain, &s), 750);
    }

    #[test]
    fn vm_size_only_in_32bit() {
        let p = default_config();
        let vm = |s: &mut Sample, v| s.vm_size_kb = v;
        let b32 = Device {
            is_32bit: true,
            ..Device::default()
        };
        let b64 = Device::default();
        let over = 3651 * 1024;
        assert_eq!(
            counts(vm, &[over, over, over], &p, &b32, 1024),
            vec![(3, Kind::VmSize)]
        );
        assert_eq!(counts(vm, &[over, over, over], &p, &b64, 1024), vec![]);
        assert_eq!(
            counts(vm, &[over, 3650 * 1024, over], &p, &b32, 1024),
            vec![]
        );
    }

    #[test]
    fn one_verdict_per_poll_in_order() {
        let p = default_config();
        let mut t = Triggers::new();
        let d = Device::default();
        let mut kinds = Vec::new();
        for i in 1..=6 {
            let mut s = heap(i, 220, 256);
            s.fds = 2000;
            s.threads = 2000;
            if let Some(v) = t.observe(&s, &p, &d) {
                kinds.push((i, v.kind));
            }
        }
        // Heap fires first; fd and threads keep their runs and fire on later polls.
        assert_eq!(
            kinds,
            vec![
                (3, Kind::Heap),
                (4, Kind::Fd),
                (5, Kind::Threads),
                (6, Kind::Heap)
            ]
        );
    }

    /// A heap held over fast-huge fires on every poll; an fd leak at the same time must still
    /// get its verdict, and its run must not grow past its strikes meanwhile.
    #[test]
    fn a_kind_firing_every_poll_does_not_starve_the_others() {
        let p = default_config();
        let d = Device::default();
        let mut t = Triggers::new();
        let mut kinds = Vec::new();
        let mut most = 0;
        for i in 1..=12 {
            let mut s = heap(i, 231, 256);
            s.fds = 2000;
            if let Some(v) = t.observe(&s, &p, &d) {
                if v.kind == Kind::Fd {
                    assert_eq!(
                        v.evidence.iter().map(|s| s.seq).collect::<Vec<_>>(),
                        vec![i - 2, i - 1, i],
                        "the latest three polls"
                    );
                }
                kinds.push((i, v.kind));
            }
            most = most.max(t.strikes().fd);
        }
        let fd: Vec<u64> = kinds
            .iter()
            .filter(|(_, k)| *k == Kind::Fd)
            .map(|(i, _)| *i)
            .collect();
        // Fd reaches three strikes on poll 3, loses it to fast-huge, and goes first on poll 4;
        // then a new run of three, and so on.
        assert_eq!(fd, vec![4, 8, 12], "{kinds:?}");
        assert_eq!(kinds.len(), 12, "one verdict per poll: {kinds:?}");
        assert!(most <= p.fd.strikes, "fd run grew to {most}");
    }

    /// Once the agent muted a kind (it acted on it for the rest of the process), that kind
    /// no longer takes the poll: the fd verdict comes on its third strike. A policy change
    /// (reset) keeps the mute.
    #[test]
    fn a_muted_kind_never_takes_the_poll() {
        let p = default_config();
        let d = Device::default();
        let mut t = Triggers::new();
        t.mute(Kind::FastHuge);
        t.reset();
        let mut kinds = Vec::new();
        for i in 1..=6 {
            let mut s = heap(i, 231, 256);
            s.fds = 2000;
            if let Some(v) = t.observe(&s, &p, &d) {
                kinds.push((i, v.kind));
            }
            assert!(t.strikes().fd <= p.fd.strikes);
        }
        assert_eq!(kinds, vec![(3, Kind::Fd), (6, Kind::Fd)]);
    }

    fn any_value() -> impl proptest::strategy::Strategy<Value = u64> {
        use proptest::prelude::*;
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(u64::MAX),
            Just(i64::MAX as u64),
            any::<u64>(),
            0u64..5000,
            (0u64..100_000).prop_map(|x| x << 20),
        ]
    }

    /// Policies at the edges of their ranges.
    fn edge_policy() -> impl proptest::strategy::Strategy<Value = Config> {
        use proptest::prelude::*;
        (
            1u32..=3,
            any::<bool>(),
            0u64..=50,
            prop_oneof![Just(1u64), Just(100), 1u64..=100],
            prop_oneof![Just(1u64), Just(65_536)],
            prop_oneof![Just(1u64), Just(100)],
            prop_oneof![Just(16u64), Just(100_000)],
            prop_oneof![Just(0u64), Just(100_000)],
        )
            .prop_map(|(strikes, ascending, slack, fast, growth, pct, max, tol)| {
                let mut p = default_config();
                p.heap.strikes = strikes;
                p.heap.ascending = ascending;
                p.heap.slack_percent = slack;
                p.heap.fast_huge_percent = fast;
                p.heap.fast_huge_growth_mb = growth;
                p.heap.thresholds[0].percent = pct;
                p.fd.max = max;
                p.fd.tolerance = tol;
                p.fd.strikes = strikes;
                p.fd.soft_limit_percent = pct;
                p.threads.max = max;
                p.threads.tolerance = tol;
                p.threads.strikes = strikes;
                p.threads.threads_max_percent = pct;
                p.vm_size.strikes = strikes;
                p.cgroup_memory.strikes = strikes;
                p.cgroup_memory.ascending = ascending;
                p.cgroup_memory.slack_percent = slack;
                p.cgroup_memory.percent = pct;
                p
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 500,
            ..proptest::prelude::ProptestConfig::default()
        })]
        /// Any numbers (max heap 0 or Long.MAX_VALUE, used over max, limits 0 or unlimited,
        /// counts far over the limit) with any edge policy and any muted kinds: no panic, no
        /// empty evidence, no muted verdict, no run longer than its strikes.
        #[test]
        fn observe_keeps_its_bounds(
            p in edge_policy(),
            is_32bit in proptest::bool::ANY,
            mutes in 0u8..64,
            samples in proptest::collection::vec(
                [any_value(), any_value(), any_value(), any_value(), any_value(), any_value(), any_value()],
                1..12,
            ),
        ) {
            let d = Device { is_32bit, ..Device::default() };
            let mut t = Triggers::new();
            let kinds = [Kind::FastHuge, Kind::Heap, Kind::Fd, Kind::Threads, Kind::VmSize, Kind::CgroupMemory];
            for (b, k) in kinds.into_iter().enumerate() {
                if mutes & (1 << b) != 0 {
                    t.mute(k);
                }
            }
            for (i, [heap_used, heap_max, fds, fd_soft_limit, threads, threads_max, vm_size_kb]) in
                samples.into_iter().enumerate()
            {
                let s = Sample {
                    seq: i as u64 + 1,
                    heap_used,
                    heap_max,
                    fds,
                    fd_soft_limit,
                    threads,
                    threads_max,
                    vm_size_kb,
                    // Reused values: limits of 0 or u64::MAX, a working set over the limit.
                    cgroup_current: Some(heap_used),
                    cgroup_working_set: (threads % 3 != 0).then_some(threads_max),
                    cgroup_limit: (fds % 5 != 0).then_some(fd_soft_limit),
                    cgroup_swap: Some(fds),
                    ..Sample::default()
                };
                if let Some(v) = t.observe(&s, &p, &d) {
                    proptest::prop_assert!(!v.evidence.is_empty());
                    proptest::prop_assert!(mutes & bit(v.kind) == 0, "{:?} was muted", v.kind);
                }
                let st = t.strikes();
                proptest::prop_assert!(
                    st.heap <= p.heap.strikes
                        && st.fd <= p.fd.strikes
                        && st.threads <= p.threads.strikes
                        && st.vm_size <= p.vm_size.strikes
                        && st.cgroup_memory <= p.cgroup_memory.strikes,
                    "{st:?}"
                );
            }
        }
    }
}
