//! The memory-cgroup trigger: the cgroup's working set (usage less reclaimable page cache)
//! over `cgroup_memory.percent` of its limit for `cgroup_memory.strikes` polls, not falling
//! (by more than `slack_percent` of the limit) between them: the heap's rule, applied to the
//! limit the kernel enforces on the whole process (native memory, thread stacks, the heap).
//!
//! A sample without a limit (none set, or nothing readable) is never a strike: the run resets.
#![forbid(unsafe_code)]

use super::{mb, pct, Config, Kind, Run, Verdict};
use crate::sample::Sample;

/// The threshold in bytes for this sample; `None` when it has no limit or no working set.
pub fn threshold_bytes(p: &Config, s: &Sample) -> Option<u64> {
    let limit = s.cgroup_limit?;
    s.cgroup_working_set?;
    Some(((limit as u128 * p.cgroup_memory.percent as u128) / 100) as u64)
}

/// Feed one sample into the cgroup run; a verdict when it reached its strikes.
pub(super) fn step(run: &mut Run, s: &Sample, p: &Config) -> Option<Verdict> {
    let c = &p.cgroup_memory;
    let (limit, ws, thr) = match (s.cgroup_limit, s.cgroup_working_set, threshold_bytes(p, s)) {
        (Some(l), Some(w), Some(t)) => (l, w, t),
        _ => {
            run.step(s, false, 0, 0, c.ascending, c.strikes);
            return None;
        }
    };
    let slack = limit / 100 * c.slack_percent;
    if !run.step(s, ws > thr, ws, slack, c.ascending, c.strikes) {
        return None;
    }
    let ev = run.take();
    let first = ev[0].cgroup_working_set.unwrap_or(0);
    let reason = format!(
        "cgroup memory over {}% of its {} MB limit for {} polls{} ({:.1}% → {:.1}%; working set {} MB, usage {} MB{})",
        c.percent,
        mb(limit),
        ev.len(),
        if c.ascending { " without falling" } else { "" },
        pct(first, limit),
        pct(ws, limit),
        mb(ws),
        mb(s.cgroup_current.unwrap_or(0)),
        match s.cgroup_swap {
            Some(sw) if sw > 0 => format!(", swap {} MB", mb(sw)),
            _ => String::new(),
        }
    );
    Some(Verdict {
        kind: Kind::CgroupMemory,
        reason,
        threshold: c.percent,
        evidence: ev,
    })
}

#[cfg(test)]
mod tests {
    use crate::sample::Sample;
    use crate::trigger::{default_config, Config, Device, Kind, Triggers};

    const MB: u64 = 1 << 20;

    /// Working sets (MB) under a `limit_mb` limit (`None`: no limit), fed to fresh triggers with
    /// a heap far below its thresholds: (poll, evidence length) of each cgroup verdict.
    fn run(p: &Config, ws: &[u64], limit_mb: Option<u64>) -> Vec<(u64, usize)> {
        let mut t = Triggers::new();
        let d = Device::default();
        let mut out = Vec::new();
        for (i, &w) in ws.iter().enumerate() {
            let s = Sample {
                seq: i as u64 + 1,
                heap_used: 10 * MB,
                heap_max: 256 * MB,
                fd_soft_limit: 32768,
                threads: 20,
                fds: 50,
                cgroup_current: Some(w * MB + 5 * MB),
                cgroup_working_set: Some(w * MB),
                cgroup_limit: limit_mb.map(|l| l * MB),
                cgroup_swap: Some(0),
                ..Sample::default()
            };
            if let Some(v) = t.observe(&s, p, &d) {
                assert_eq!(v.kind, Kind::CgroupMemory);
                out.push((i as u64 + 1, v.evidence.len()));
            }
        }
        out
    }

    #[test]
    fn cgroup_strikes_table() {
        let p = default_config();
        // 200 MB limit: 85% = 170 MB; a strike is strictly over it.
        type Row<'a> = (&'a [u64], Option<u64>, &'a [(u64, usize)]);
        let table: &[Row] = &[
            (&[100, 150, 169], Some(200), &[]),
            (&[171, 172, 173], Some(200), &[(3, 3)]),
            (&[170, 170, 170], Some(200), &[]), // at the threshold, not over
            (&[171, 171, 171], Some(200), &[(3, 3)]), // not falling: equal counts
            (&[171, 175, 172, 173, 174], Some(200), &[(5, 3)]), // a fall restarts the run there
            (&[171, 175, 100, 172, 173], Some(200), &[]), // under the threshold resets
            (
                &[171, 172, 173, 174, 175, 176],
                Some(200),
                &[(3, 3), (6, 3)],
            ),
            (&[190, 195, 199], None, &[]), // no limit: never a strike
            (&[171, 172, 173], Some(1000), &[]),
        ];
        for (ws, limit, want) in table {
            assert_eq!(run(&p, ws, *limit), want.to_vec(), "{ws:?} under {limit:?}");
        }
        let mut slack = p.clone();
        slack.cgroup_memory.slack_percent = 2; // 4 MB of a 200 MB limit
        assert_eq!(run(&slack, &[175, 172, 173], Some(200)), vec![(3, 3)]);
        assert_eq!(run(&p, &[175, 172, 173], Some(200)), vec![]);
        let mut flat = p.clone();
        flat.cgroup_memory.ascending = false;
        assert_eq!(run(&flat, &[190, 171, 180], Some(200)), vec![(3, 3)]);
        let mut five = p.clone();
        five.cgroup_memory.strikes = 5;
        five.cgroup_memory.percent = 50;
        assert_eq!(run(&five, &[101, 102, 103, 104], Some(200)), vec![]);
        assert_eq!(
            run(&five, &[101, 102, 103, 104, 105], Some(200)),
            vec![(5, 5)]
        );
    }

    #[test]
    fn a_lost_limit_or_working_set_resets_the_run() {
        let p = default_config();
        let mut t = Triggers::new();
        let d = Device::default();
        let over = Sample {
            cgroup_current: Some(190 * MB),
            cgroup_working_set: Some(180 * MB),
            cgroup_limit: Some(200 * MB),
            ..Sample::default()
        };
        assert!(t.observe(&over, &p, &d).is_none());
        assert!(t.observe(&over, &p, &d).is_none());
        assert_eq!(t.strikes().cgroup_memory, 2);
        let unread = Sample {
            cgroup_working_set: None,
            ..over
        };
        assert!(t.observe(&unread, &p, &d).is_none());
        assert_eq!(t.strikes().cgroup_memory, 0);
        assert!(t.observe(&over, &p, &d).is_none());
        assert!(t.observe(&over, &p, &d).is_none());
        let v = t.observe(&over, &p, &d).expect("three strikes");
        assert_eq!(v.kind, Kind::CgroupMemory);
        assert_eq!(v.threshold, 85);
        assert!(
            v.reason.starts_with(
                "cgroup memory over 85% of its 200 MB limit for 3 polls without falling (90.0% → 90.0%; working set 180 MB, usage 190 MB)"
            ),
            "{}",
            v.reason
        );
    }
}
