//! What the flight recorder adds to a poll: `cargo run --release --example flight_cost`.
//! Times, interleaved round by round, one full sample alone (outside any VM: the heap numbers
//! come from a scripted fake) and the same sample followed by its store into a real ring file
//! (`Flight::record`: a lock, a copy into the ring's image and one `pwrite` of the 128-byte slot;
//! the ring is in `$TMPDIR`, so set that to the file system to measure), and the store alone.
//! Prints the
//! medians in ns, one `name=value` a line, for `scripts/bench/agent.sh`. Also the memory
//! cgroup's share of a sample: the same sample from a sampler that reads no cgroup, interleaved
//! (where this process's memory cgroup is readable; `cgroup=` says what is read).
use oomguard::recorder::{self, Flight, Identity};
use oomguard::sample::{Heap, Sampler, ScriptedHeap};
use oomguard::trigger::Strikes;
use std::time::Instant;

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = recorder::ring_path(dir.path(), "bench");
    let rec = recorder::open(&path)
        .and_then(|c| c.start(&Identity::default()))
        .expect("ring");
    let flight = Flight::default();
    flight.install(Some(rec));
    let mut s = Sampler::new().expect("sampler");
    let mut bare = Sampler::new()
        .expect("sampler")
        .with_cgroup(Err("not read (bench)".into()));
    let mut heap = ScriptedHeap::new(vec![Heap {
        max: 1,
        total: 1,
        free: 0,
    }]);
    let strikes = Strikes::default();
    let rounds = 4000;
    let (mut alone, mut with, mut store, mut no_cg) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..rounds {
        let t = Instant::now();
        let x = s.take(&mut heap, i).expect("sample");
        alone.push(t.elapsed().as_nanos() as u64);
        let t = Instant::now();
        let y = s.take(&mut heap, i).expect("sample");
        flight.record(&y, &strikes);
        with.push(t.elapsed().as_nanos() as u64);
        let t = Instant::now();
        flight.record(&x, &strikes);
        store.push(t.elapsed().as_nanos() as u64);
        let t = Instant::now();
        let _ = bare.take(&mut heap, i).expect("sample");
        no_cg.push(t.elapsed().as_nanos() as u64);
    }
    println!("cgroup {}", s.cgroup_state());
    println!("sample-no-cgroup-ns={}", median(&mut no_cg));
    println!("sample-alone-ns={}", median(&mut alone));
    println!("sample-and-record-ns={}", median(&mut with));
    println!("record-alone-ns={}", median(&mut store));
}
