//! Time the parts of one sample with N open fds, outside any VM (the heap numbers come from a
//! scripted fake): `cargo run --release --example sample_cost -- [N] [cold]`.
//! With `cold`, 40 full samples 100 ms apart (caches cold, as in the agent) instead of tight loops.
//! The sampler's own methods (fd count by `fstat` of `/proc/self/fd`, threads by the link count
//! of `/proc/self/task`, sizes from `statm`) are timed against the fallbacks (readdir, `status`).
use oomguard::sample::{Heap, Sampler, ScriptedHeap};
use std::time::{Duration, Instant};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let cold = std::env::args().nth(2).is_some_and(|a| a == "cold");
    let files: Vec<_> = (0..n)
        .map(|_| std::fs::File::open("/proc/self/status").unwrap())
        .collect();
    let mut s = Sampler::new().unwrap();
    let mut heap = ScriptedHeap::new(vec![Heap {
        max: 1,
        total: 1,
        free: 0,
    }]);
    if cold {
        let mut v: Vec<u64> = (0..40)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(100));
                let t = Instant::now();
                s.take(&mut heap, 0).unwrap();
                t.elapsed().as_nanos() as u64
            })
            .collect();
        v.sort_unstable();
        println!(
            "cold-sample-no-jni-us min={:.1} median={:.1} fds={}",
            v[0] as f64 / 1e3,
            v[20] as f64 / 1e3,
            s.count_fds().unwrap()
        );
        return;
    }
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
    println!(
        "fd count method: {:?}; threads/memory method: {:?}",
        s.fd_count_method(),
        s.thread_count_method()
    );
    time("count_fds", &mut || {
        s.count_fds().unwrap();
    });
    let mut slow = Sampler::with_readdir().unwrap();
    time("count_fds (readdir)", &mut || {
        slow.count_fds().unwrap();
    });
    time("read /proc/self/status", &mut || {
        std::hint::black_box(std::fs::read("/proc/self/status").unwrap());
    });
    time("read /proc/self/limits", &mut || {
        std::hint::black_box(std::fs::read("/proc/self/limits").unwrap());
    });
    time("read /proc/self/statm", &mut || {
        std::hint::black_box(std::fs::read("/proc/self/statm").unwrap());
    });
    time("stat /proc/self/task", &mut || {
        std::hint::black_box(std::fs::metadata("/proc/self/task").unwrap());
    });
    time("full take (no JNI)", &mut || {
        s.take(&mut heap, 0).unwrap();
    });
    let mut by_status = Sampler::with_status().unwrap();
    time("full take, status method", &mut || {
        by_status.take(&mut heap, 0).unwrap();
    });
    drop(files);
}
