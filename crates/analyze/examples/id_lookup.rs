//! Id lookups, the analyser's step from an edge's target id to its node: the rank map against
//! the bucket map, on the same ids and queries, single-threaded. `scripts/bench.sh analyze`
//! prints its table.
//!
//! Usage: cargo run --release --example id_lookup [RUNS]
//!
//! The ids are laid out like a heap (objects 16 to 72 bytes apart, every twentieth a larger
//! array), 3.5 million of them as in the 540 MB bench dump, and the queries are edge targets:
//! four in five near the referring object, the rest anywhere.
use analyze::index::IdMap;
use std::time::Instant;

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(9);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let n = 3_500_000usize;
    let mut ids = Vec::with_capacity(n);
    let mut at = 0x7_0000_0000u64;
    for _ in 0..n {
        ids.push(at);
        let r = rnd();
        at += if r % 20 == 0 {
            1024 + 8 * (r >> 40 & 127)
        } else {
            16 + 8 * (r >> 50 & 7)
        };
    }
    let queries = 2 * n;
    let q: Vec<u64> = (0..queries)
        .map(|k| {
            let r = rnd();
            let i = if r % 5 != 0 {
                (k / 2 + (r >> 8) as usize % 2000).saturating_sub(1000)
            } else {
                (r >> 16) as usize
            };
            ids[i % n]
        })
        .collect();
    println!(
        "id lookups: {} ids, {} queries, builds and lookups best of {runs} runs (examples/id_lookup)",
        n, queries
    );
    let mut answers = Vec::new();
    for (name, make) in [
        ("rank map", IdMap::new as fn(&[u64]) -> IdMap),
        ("bucket map", IdMap::buckets),
    ] {
        let mut build = f64::MAX;
        let mut m = make(&ids);
        for _ in 0..runs {
            let t = Instant::now();
            m = make(&ids);
            build = build.min(t.elapsed().as_secs_f64());
        }
        let mut out = vec![0u32; q.len()];
        let mut best = f64::MAX;
        for _ in 0..runs {
            let t = Instant::now();
            for (c, o) in q.chunks(1 << 20).zip(out.chunks_mut(1 << 20)) {
                m.find_batch(&ids, c, o);
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "  {name:<10} build {:6.1} ms   lookups {:6.1} ms  ({:.1} ns each)   {:5.1} MB",
            build * 1e3,
            best * 1e3,
            best * 1e9 / queries as f64,
            m.bytes() as f64 / 1048576.0
        );
        answers.push(out);
    }
    assert!(
        answers.windows(2).all(|w| w[0] == w[1]),
        "the two maps disagree"
    );
}
