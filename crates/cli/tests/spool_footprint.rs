//! Footprint: 10,000 incidents over 30 simulated days never exceed the spool's quotas (bytes,
//! count, age), measured independently by walking the directory after every call.

mod common;

use oomguard::spool::{AnalysisJob, FileKind, ManualClock, NewIncident, Quotas, RealFs, Spool};
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const T0: u64 = 1_800_000_000_000;

/// Total bytes and entries under the spool's incidents/ and quarantine/, by walking them.
fn measure(root: &Path) -> (u64, usize) {
    fn walk(p: &Path) -> u64 {
        let md = std::fs::symlink_metadata(p).unwrap();
        if md.is_dir() {
            std::fs::read_dir(p)
                .unwrap()
                .map(|e| walk(&e.unwrap().path()))
                .sum()
        } else {
            md.len()
        }
    }
    let mut bytes = 0;
    let mut count = 0;
    for d in ["incidents", "quarantine", "staging"] {
        for e in std::fs::read_dir(root.join(d)).unwrap() {
            let e = e.unwrap();
            bytes += walk(&e.path());
            count += 1;
        }
    }
    (bytes, count)
}

#[test]
fn ten_thousand_incidents_over_thirty_days_stay_within_quotas() {
    let tmp = common::fast_tmp();
    let root = tmp.path().join("spool");
    let clock = Arc::new(ManualClock::new(T0));
    // The default quotas scaled down 1000× in bytes so 10,000 incidents run in seconds; count
    // and age as in production.
    let q = Quotas {
        max_total_bytes: 256 * 1024,
        ..Quotas::default()
    };
    let spool = Spool::with(&root, q.clone(), Arc::new(RealFs), clock.clone()).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(30);
    let step = Duration::from_millis(30 * 24 * 3600 * 1000 / 10_000);
    let mut analyse = |j: &AnalysisJob| {
        std::fs::write(&j.report_out, b"{\"gcPaths\":[]}").map_err(|e| e.to_string())
    };
    let (mut max_bytes, mut max_count) = (0, 0);
    let mut kept = 0;
    for i in 0..10_000u32 {
        // Bursts: sometimes many incidents within minutes, sometimes days of quiet.
        if rng.gen_bool(0.01) {
            clock.advance(Duration::from_secs(rng.gen_range(0..3 * 24 * 3600)));
        } else {
            clock.advance(step / 2);
        }
        let st = spool.stage().unwrap();
        let size = if rng.gen_bool(0.02) {
            300 * 1024
        } else {
            rng.gen_range(1_000..60_000)
        };
        std::fs::write(st.path(FileKind::MiniDump), vec![b'x'; size]).unwrap();
        std::fs::write(st.path(FileKind::Fds), b"fds").unwrap();
        match spool.commit(
            st,
            NewIncident {
                reason: format!("i{i}"),
                ..NewIncident::default()
            },
        ) {
            Ok(_) => kept += 1,
            Err(oomguard::spool::Error::TooBig { .. }) => {} // bigger than the whole quota
            Err(e) => panic!("{e}"),
        }
        if i % 97 == 0 {
            // Now and then the agent recovers / analyses / plans, as on a launch.
            let g = spool.lock().unwrap();
            g.recover(&mut analyse).unwrap();
            if let Some(id) = g.ids().unwrap().first() {
                match g.plan_upload(id) {
                    Ok(_) | Err(oomguard::spool::Error::NotFound(_)) => {} // evicted: oldest, spool full
                    Err(e) => panic!("{e}"),
                }
            }
        }
        let (bytes, count) = measure(&root);
        max_bytes = max_bytes.max(bytes);
        max_count = max_count.max(count);
        assert!(
            bytes <= q.max_total_bytes,
            "incident {i}: {bytes} bytes on disk"
        );
        assert!(count <= q.max_count, "incident {i}: {count} entries");
        // Age: nothing the spool watched for more than 14 days (the age quota counts watched
        // time: each clock step at most a day, so the 3-day jumps here count one day each).
        let st = spool.state();
        let watched = st.watch.as_ref().map_or(0, |w| w.watched_ms);
        for e in std::fs::read_dir(root.join("incidents")).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if let Some(seen) = st.first_seen.get(&name) {
                assert!(
                    watched - seen <= q.max_age.as_millis() as u64,
                    "incident {i}: {name} is too old"
                );
            }
        }
    }
    let st = spool.state();
    eprintln!(
        "footprint: 10000 incidents ({kept} fit the quota), at most {max_bytes} bytes and {max_count} entries; {} evictions",
        st.evictions_total
    );
    assert!(st.evictions_total >= kept - q.max_count as u64);
}
