//! Time the parts of one sample with N open fds: `cargo run --release --example sample_cost [N]`.
use oomguard::sample::{Heap, Sampler, ScriptedHeap};
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let files: Vec<_> = (0..n)
        .map(|_| std::fs::File::open("/proc/self/status").unwrap())
        .collect();
    let mut s = Sampler::new().unwrap();
    let mut heap = ScriptedHeap::new(vec![Heap {
        max: 1,
        total: 1,
        free: 0,
    }]);
    let rounds = 2000;
    let time = |name: &str, f: &mut dyn FnMut()| {
        let mut v: Vec<u64> = (0..rounds)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_nanos() as u64
            })
            .collect();
        v.sort_unstable();
        println!(
            "{name:<28} median {:>7.1} µs  p10 {:>7.1} µs  p90 {:>7.1} µs",
            v[rounds / 2] as f64 / 1e3,
            v[rounds / 10] as f64 / 1e3,
            v[rounds * 9 / 10] as f64 / 1e3
        );
    };
    time("count_fds (stat size)", &mut || {
        s.count_fds().unwrap();
    });
    let mut slow = Sampler::with_readdir().unwrap();
    time("count_fds (readdir)", &mut || {
        slow.count_fds().unwrap();
    });
    println!(
        "fds: stat {} readdir {} ({:?})",
        s.count_fds().unwrap(),
        slow.count_fds().unwrap(),
        s.fd_count_method()
    );
    time("read /proc/self/status", &mut || {
        std::hint::black_box(std::fs::read("/proc/self/status").unwrap());
    });
    time("read /proc/self/limits", &mut || {
        std::hint::black_box(std::fs::read("/proc/self/limits").unwrap());
    });
    time("stat /proc/self/fd", &mut || {
        std::hint::black_box(std::fs::metadata("/proc/self/fd").unwrap().len());
    });
    time("full take", &mut || {
        s.take(&mut heap, 0).unwrap();
    });
    drop(files);
}
