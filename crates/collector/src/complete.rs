//! What a device analysed only in part, analysed whole on the collector.
//!
//! A device whose analysis had too little memory for the whole of it (`analysis.budget` in its
//! `report.json`: the issue-43 budget, with no room for scratch files) reports what fits: the
//! class histogram, what the detectors find without the graph and a path per class and reason,
//! but no retained sizes or traces, so `/leaks` counts its leaks without their sizes. When such
//! an incident also brought its stripped dump (`mini.hprof.gz`), the collector, which has the
//! memory, analyses the dump whole and files the result beside the device's as
//! `report.server.json`. Summaries, `/leaks` and the
//! incident's page then read that report (the page says so); the device's `report.json` is kept
//! as it came.
//!
//! Invariants:
//! - One analysis at a time, on the `collector-analysis` thread, in the order incidents became
//!   ready (both files filed; at start, the listed incidents that are ready and have neither
//!   result, so what a stopped collector left is done at its next start).
//! - Bounded: the dump is inflated into the incident's hidden work directory (`.analysis/`) no
//!   further than the disk quota leaves room for (reserved as it is written, released when the
//!   file is removed); the analysis takes at most [`Config::analysis_memory_mb`] by its own
//!   estimate, in memory (no scratch files: the disk is the uploads'), and a dump that would need
//!   more is refused with the reason. The work directory is removed when the analysis ends, and at
//!   the next attempt if a stop cut it short.
//! - Nothing half: the report is written whole or not at all (a temporary file, then renamed).
//!   A dump that cannot be analysed (a bad gzip stream, a truncated dump, no room, a panic of the
//!   analysis, caught) gets a one-line
//!   `report.server.error.txt` naming the file and the byte offset, and is not tried again.
//! - Stopping waits for the analysis in flight (an analysis cannot be cut short); none starts
//!   after the stop flag is set.
//!
//! [`Config::analysis_memory_mb`]: super::Config::analysis_memory_mb
#![forbid(unsafe_code)]

use super::html::capped;
use super::Shared;
use analyze::files::FileKind;
use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use sys::fs::{self as sfs, RealFs};

/// The collector's whole analysis of an incident the device analysed only in part.
pub const SERVER_REPORT: &str = "report.server.json";
/// Why that analysis could not be made (one line).
pub const SERVER_ERROR: &str = "report.server.error.txt";
/// The incident's hidden work directory while it is analysed.
const WORK: &str = ".analysis";

/// The incidents waiting for an analysis, and the signal that one is added (or the stop).
#[derive(Default)]
pub(super) struct Queue {
    ids: Mutex<VecDeque<String>>,
    added: Condvar,
}

impl Queue {
    /// Add `id` unless it waits already.
    pub(super) fn push(&self, id: &str) {
        let mut q = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        if !q.iter().any(|x| x == id) {
            q.push_back(id.to_string());
            self.added.notify_one();
        }
    }

    /// Wake the thread (to see the stop flag).
    pub(super) fn wake(&self) {
        self.added.notify_all();
    }
}

/// Whether an incident with these files waits for an analysis here: its report is partial
/// (`partial`), its stripped dump is filed, and neither result is.
pub(super) fn ready(files: &[String], partial: bool) -> bool {
    let has = |n: &str| files.iter().any(|f| f == n);
    partial
        && has(FileKind::MiniDumpGz.file_name())
        && has(FileKind::Report.file_name())
        && !has(SERVER_REPORT)
        && !has(SERVER_ERROR)
}

/// Queue the incident `id`, whose summary is `s`, if it is ready ([`ready`]) and analyses are on.
pub(super) fn offer(sh: &Shared, s: &super::summary::Summary) {
    let partial = s.report.as_ref().is_some_and(|r| r.partial.is_some());
    if sh.cfg.analysis_memory_mb > 0 && ready(&s.files, partial) {
        sh.analyses.push(&s.id);
    }
}

/// The `collector-analysis` thread: analyses queued incidents until the stop flag is set.
pub(super) fn spawn(sh: Arc<Shared>) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("collector-analysis".into())
        .spawn(move || loop {
            let id = {
                let mut q = sh.analyses.ids.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if sh.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Some(id) = q.pop_front() {
                        break id;
                    }
                    q = (sh.analyses.added)
                        .wait_timeout(q, Duration::from_millis(500))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            };
            run(&sh, &id);
        })
        .map_err(|e| {
            tracing::warn!("collector: no analysis thread ({e}); partial reports stay as they are")
        })
        .ok()
}

/// Analyse incident `id` and file the result (a report, or the reason there is none).
fn run(sh: &Shared, id: &str) {
    let d = sh.cfg.dir.join("incidents").join(id);
    let work = d.join(WORK);
    let _ = std::fs::remove_dir_all(&work);
    let (name, body) = match std::fs::create_dir(&work)
        .map_err(|e| format!("{}: {e}", work.display()))
        .and_then(|()| analyse(sh, &d, &work))
    {
        Ok(json) => (SERVER_REPORT, json),
        Err(e) => {
            tracing::warn!("collector: {id}: the uploaded dump could not be analysed: {e}");
            (
                SERVER_ERROR,
                format!("{}\n", e.replace('\n', " ")).into_bytes(),
            )
        }
    };
    let _ = std::fs::remove_dir_all(&work);
    let dst = d.join(name);
    if let Err(e) = sfs::write_atomic(&RealFs, &dst, &body) {
        // Nothing filed: tried again at the next start.
        tracing::warn!("collector: {}: {e}", dst.display());
        return;
    }
    let _ = sh.quota.reserve(body.len() as u64);
    let mut ix = sh.index.lock().unwrap_or_else(|p| p.into_inner());
    super::filing::took_in(sh, &mut ix, id, name, &dst, name == SERVER_REPORT);
}

/// The report of the whole analysis of incident directory `d`'s stripped dump, as JSON.
fn analyse(sh: &Shared, d: &Path, work: &Path) -> Result<Vec<u8>, String> {
    let gz = d.join(FileKind::MiniDumpGz.file_name());
    let dump = work.join(FileKind::MiniDump.file_name());
    let mut taken = 0u64;
    let inflated = inflate(sh, &gz, &dump, &mut taken);
    let res = inflated.and_then(|()| {
        // In memory only: a dump whose whole analysis needs more than the collector's budget is
        // refused with the reason, rather than spilled to a disk the uploads share. With the
        // device's thresholds (its policy's), so that it finds what the device looked for.
        let (running, thresholds) = from_device(&d.join(FileKind::Report.file_name()));
        let cfg = analyze::Config {
            budget_bytes: sh.cfg.analysis_memory_mb.saturating_mul(1 << 20),
            ..analyze::Config::default()
        }
        .with_thresholds(&thresholds);
        // (Nothing the analysis shares outlives it: a panic leaves no state behind.)
        let analysed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            analyze::analyze(analyze::Input::File(&dump), &cfg, running)
        }));
        let report = analysed
            .map_err(|_| format!("{}: the analysis panicked", dump.display()))?
            .map_err(|e| format!("{} (inflated from {}): {e}", dump.display(), gz.display()))?;
        if let Some(b) = &report.analysis.budget {
            return Err(format!(
                "the whole analysis would need more than the collector's {} MiB as well ({}): raise --analysis-memory-mb",
                sh.cfg.analysis_memory_mb, b.reason
            ));
        }
        serde_json::to_vec_pretty(&report).map_err(|e| format!("report: {e}"))
    });
    let _ = std::fs::remove_file(&dump);
    sh.quota.release(taken);
    res
}

/// Inflate `gz` into `out`, taking its bytes from the quota as they are written (`taken`).
fn inflate(sh: &Shared, gz: &Path, out: &Path, taken: &mut u64) -> Result<(), String> {
    let name = gz.display();
    let f = std::fs::File::open(gz).map_err(|e| format!("{name}: {e}"))?;
    let counted = Counted {
        inner: BufReader::with_capacity(1 << 16, f),
        read: 0,
    };
    let mut z = flate2::bufread::MultiGzDecoder::new(counted);
    let mut w = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut buf = vec![0u8; 1 << 16];
    let mut written = 0u64;
    loop {
        let n = match z.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let at = z.get_ref().read;
                return Err(format!("{name}: byte {at}: not a whole gzip stream: {e}"));
            }
        };
        sh.quota.reserve(n as u64).map_err(|f| {
            format!(
                "{name}: the dump inflates to more than the collector's directory has room for ({} of {} bytes used, {written} bytes of the dump written)",
                f.used, f.max
            )
        })?;
        *taken += n as u64;
        w.write_all(&buf[..n])
            .map_err(|e| format!("{}: {e}", out.display()))?;
        written += n as u64;
    }
    Ok(())
}

/// A buffered reader that counts the bytes its reader consumed (the offset an error names).
struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: BufRead> Read for Counted<R> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(b)?;
        self.read += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counted<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.read += n as u64;
        self.inner.consume(n);
    }
}

/// Of the device's report: its `runningInfo` (null if it cannot be read), which the collector's
/// report keeps (the device, the app version and the rest); and the thresholds its analysis ran
/// with (`analysis.thresholds`, within a policy's bounds; the defaults where the report has
/// none, or cannot be read).
fn from_device(report: &Path) -> (serde_json::Value, analyze::Thresholds) {
    let v = std::fs::File::open(report)
        .ok()
        .and_then(|f| capped::read(BufReader::new(f), capped::Limits::PAGE).ok());
    let Some(mut v) = v else {
        return (serde_json::Value::Null, analyze::Thresholds::default());
    };
    let thresholds = (v.pointer("/analysis/thresholds"))
        .and_then(|t| serde_json::from_value::<analyze::Thresholds>(t.clone()).ok())
        .map(|t| t.bounded())
        .unwrap_or_default();
    let running =
        (v.get_mut("runningInfo").map(serde_json::Value::take)).unwrap_or(serde_json::Value::Null);
    (running, thresholds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Incidents wait in the order they were offered, each once.
    #[test]
    fn the_queue_keeps_the_order_and_each_incident_once() {
        let q = Queue::default();
        for id in ["b-2", "a-1", "b-2", "c-3", "a-1"] {
            q.push(id);
        }
        assert_eq!(*q.ids.lock().unwrap(), ["b-2", "a-1", "c-3"]);
    }

    /// An incident waits for the collector's analysis only with a partial report and its
    /// stripped dump filed, and neither result.
    #[test]
    fn ready_needs_a_partial_report_the_dump_and_no_result() {
        let files = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let both = ["mini.hprof.gz", "report.json", "meta.json"];
        assert!(ready(&files(&both), true));
        assert!(!ready(&files(&both), false), "a whole report");
        assert!(!ready(&files(&["report.json"]), true), "no dump");
        assert!(!ready(&files(&["mini.hprof.gz"]), true), "no report");
        for done in [SERVER_REPORT, SERVER_ERROR] {
            let mut f = files(&both);
            f.push(done.to_string());
            assert!(!ready(&f, true), "{done}");
        }
    }

    /// The reader counts the bytes taken by `read` and by `consume` alike.
    #[test]
    fn counted_counts_what_is_read_and_consumed() {
        let mut c = Counted {
            inner: BufReader::with_capacity(4, &b"0123456789"[..]),
            read: 0,
        };
        let mut three = [0u8; 3];
        c.read_exact(&mut three).unwrap();
        assert_eq!(c.read, 3);
        assert_eq!(c.fill_buf().unwrap(), b"3");
        c.consume(1);
        assert_eq!(c.fill_buf().unwrap(), b"4567");
        c.consume(2);
        assert_eq!(c.read, 6);
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).unwrap();
        assert_eq!((rest.as_slice(), c.read), (&b"6789"[..], 10));
    }
}
