//! Strip one dump many times in this process, to a sink that only counts bytes: the stripper's
//! own time, without the process start, the mapping of the input or the storing of the output
//! that `oomguard strip` adds. `scripts/bench.sh strip` prints it for the few-MB fixtures, whose
//! process-level figures are mostly those other costs.
//!
//! `cargo run --release --example strip_repeat -- FILE [RUNS]` prints, per level, the best and
//! the median time of RUNS strips (500 by default), after 20 untimed ones.
use hprof::{strip_mapped, Level, Sink};
use std::time::Instant;

/// Counts what it is given; writes nothing.
#[derive(Default)]
struct Count(u64);

impl Sink for Count {
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0 += buf.len() as u64;
        Ok(())
    }
    fn write_all_vectored(&mut self, bufs: &[&[u8]]) -> std::io::Result<()> {
        self.0 += bufs.iter().map(|b| b.len() as u64).sum::<u64>();
        Ok(())
    }
    fn patch(&mut self, _offset: u64, _bytes: &[u8]) -> std::io::Result<()> {
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: strip_repeat FILE [RUNS]")?;
    let runs: usize = match args.next() {
        Some(r) => r.parse().map_err(|_| format!("RUNS: not a number: {r}"))?,
        None => 500,
    };
    let data = std::fs::read(&path).map_err(|e| format!("{path}: {e}"))?;
    for level in [Level::None, Level::Arrays, Level::App] {
        let mut ms = Vec::with_capacity(runs);
        let mut out = 0;
        for i in 0..runs.max(1) + 20 {
            let t = Instant::now();
            let (sink, _) =
                strip_mapped(&data, level, Count(0)).map_err(|e| format!("{path}: {e}"))?;
            let e = t.elapsed().as_secs_f64() * 1e3;
            out = sink.0;
            if i >= 20 {
                ms.push(e);
            }
        }
        ms.sort_by(f64::total_cmp);
        println!(
            "{:<6} {:>8.3} ms best {:>8.3} ms median  ({} -> {} bytes, {} runs)",
            level.to_string(),
            ms[0],
            ms[ms.len() / 2],
            data.len(),
            out,
            ms.len()
        );
    }
    Ok(())
}
