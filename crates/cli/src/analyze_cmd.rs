//! `analyze`: run the heap analyser on a dump, write the JSON report (and the HTML page)
//! atomically, print a summary.
//!
//! Invariants: every input (the dump, `--config`, `--running-info`, `--mapping`) and both outputs
//! are checked by [`files`] before the analysis starts; the report and the page are written to
//! temporaries and renamed into place only when both were written, so a failure leaves neither
//! behind. `--snapshot` (and a config's `snapshot`) counts from 1: 0 is refused as a usage error.

use crate::{files, Failure};
use analyze::{self, Config, Input, Summary};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct AnalyzeArgs {
    /// The dump to analyse (full or stripped).
    input: PathBuf,
    /// Where to write the JSON report.
    #[arg(short, long)]
    output: PathBuf,
    /// Also write the report as an HTML page (the collector's incident page, without the
    /// parts that come from the device): leaks as traces, dominators as a treemap.
    #[arg(long)]
    html: Option<PathBuf>,
    /// How many dominator groups to keep in the report.
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// The incident's running info (JSON), copied into the report's `runningInfo`.
    #[arg(long)]
    running_info: Option<PathBuf>,
    /// Threads parsing parts of the file side by side (0: one per core, at most 4).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Detector thresholds as JSON (`analyze::Config`, camelCase; missing fields keep their
    /// defaults). The agent writes this from the policy's `analysis` section. `--top` and
    /// `--threads` given on the command line win.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Of a file that holds several heap dumps (the JDK 8 hprof agent's), the one to analyse,
    /// counted from 1 (default: the last). The report's `analysis.snapshots` says how many
    /// there are.
    #[arg(long, value_parser = snapshot_number)]
    snapshot: Option<u32>,
    /// The build's R8/ProGuard mapping file (`mapping.txt`): class, field and method names
    /// (stack frames too) are turned back before the report is made, so its names and
    /// signatures are the original ones.
    #[arg(long)]
    mapping: Option<PathBuf>,
    /// A directory for the analysis's scratch files: the index's large arrays are kept there,
    /// mapped, so that their pages are file pages the kernel can write back, not the process's
    /// own memory (the files are unlinked at once). Default: none, all in memory.
    #[arg(long)]
    scratch_dir: Option<PathBuf>,
    /// The memory the analysis may take, in MiB (0: no limit). A dump whose whole analysis
    /// would need more is reported as far as it fits: the class histogram (`histogram[]`) and
    /// `analysis.budget`, which says what was left out. Default: the config's `budgetBytes`,
    /// else the process's data limit (`RLIMIT_DATA`, as `prlimit --data` sets it), else none.
    #[arg(long)]
    budget_mb: Option<u64>,
}

/// What is wrong with a snapshot number of 0.
const SNAPSHOT_FROM_1: &str =
    "snapshots count from 1 (the first heap dump in the file is 1; 0 names none)";

/// `--snapshot N`: a number counted from 1.
fn snapshot_number(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(0) => Err(SNAPSHOT_FROM_1.into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}: a snapshot number, counted from 1")),
    }
}

/// Read a JSON file, or say which file and byte are wrong.
fn read_json<T: serde::de::DeserializeOwned>(p: &Path) -> Result<T, Failure> {
    let text = files::read_input(p)?;
    serde_json::from_slice(&text).map_err(|e| {
        fail(
            2,
            format!(
                "{}: byte {}: not valid: {e}",
                p.display(),
                json_offset(&text, &e)
            ),
        )
    })
}

fn fail(code: u8, message: String) -> Failure {
    Failure { code, message }
}

/// The checks before the analysis: both outputs can be written, differ, and are none of the
/// inputs; the dump is a regular file.
fn check_files(a: &AnalyzeArgs) -> Result<(), Failure> {
    let mut inputs = vec![a.input.as_path()];
    inputs.extend(a.running_info.as_deref());
    inputs.extend(a.config.as_deref());
    inputs.extend(a.mapping.as_deref());
    files::check_output(&a.output, &inputs)?;
    if let Some(html) = &a.html {
        let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        if abs(html) == abs(&a.output) {
            return Err(fail(
                2,
                format!("{}: --html and --output name the same file", html.display()),
            ));
        }
        inputs.push(&a.output);
        files::check_output(html, &inputs)?;
    }
    files::input(&a.input).map(drop)
}

pub fn run(a: AnalyzeArgs) -> Result<(), Failure> {
    let running_info = match &a.running_info {
        None => serde_json::Value::Null,
        Some(p) => read_json(p)?,
    };
    let base: Config = match &a.config {
        None => Config::default(),
        Some(p) => read_json(p)?,
    };
    if let (None, Some(0), Some(p)) = (a.snapshot, base.snapshot, &a.config) {
        return Err(fail(
            2,
            format!("{}: snapshot 0: {SNAPSHOT_FROM_1}", p.display()),
        ));
    }
    check_files(&a)?;
    let renames: Option<std::sync::Arc<dyn analyze::renames::Rename>> = match &a.mapping {
        None => None,
        Some(p) => {
            let text = files::read_input_at_most(p, collector::mapping::MAX_MAPPING_BYTES)?;
            let r = collector::mapping::parse(&text)
                .map_err(|(at, what)| fail(2, format!("{}: byte {at}: {what}", p.display())))?;
            Some(std::sync::Arc::new(r))
        }
    };
    let cfg = Config {
        top_n: a.top,
        threads: a.threads,
        snapshot: a.snapshot.or(base.snapshot),
        renames,
        scratch_dir: a.scratch_dir.clone().or(base.scratch_dir.clone()),
        budget_bytes: match (a.budget_mb, base.budget_bytes) {
            (Some(mb), _) => mb.saturating_mul(1 << 20),
            (None, 0) => sys::data_limit().unwrap_or(0),
            (None, b) => b,
        },
        ..base
    };
    if let Some(d) = &cfg.scratch_dir {
        // Like an output's directory: it must exist (the files in it are made and removed by
        // the analysis).
        match std::fs::metadata(d) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                let what = format!("{}: scratch directory: not a directory", d.display());
                return Err(fail(1, what));
            }
            Err(e) => return Err(fail(1, format!("{}: scratch directory: {e}", d.display()))),
        }
    }
    let report =
        analyze::analyze(Input::File(&a.input), &cfg, running_info).map_err(|e| match e {
            analyze::Error::Input { .. } => fail(2, format!("{}: {e}", a.input.display())),
            analyze::Error::Io { .. } => fail(1, format!("{}: {e}", a.input.display())),
        })?;
    // Parsed without error, but perhaps without a heap dump in it (a header alone): the
    // analysis found no snapshot then (a snapshot is a span of heap records).
    if report.analysis.snapshots == 0 {
        files::heap_records(&a.input, &files::input(&a.input)?)?;
    }
    let json = serde_json::to_vec_pretty(&report).map_err(|e| fail(1, format!("report: {e}")))?;
    let mut staged = vec![files::Staged::new(&a.output)?];
    staged[0].write_all(&json)?;
    if let Some(out) = &a.html {
        let value = serde_json::to_value(&report).map_err(|e| fail(1, format!("report: {e}")))?;
        let title = a.input.file_name().map_or_else(
            || a.input.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let page = collector::html::incident_page(&collector::html::PageInput {
            title: &title,
            report: Some(&value),
            ..Default::default()
        });
        let mut s = files::Staged::new(out)?;
        s.write_all(page.as_bytes())?;
        staged.push(s);
    }
    files::commit_all(staged)?;
    if let Some(b) = &report.analysis.budget {
        eprintln!("oomguard: {}: {}", a.input.display(), b.reason);
    }
    // The report is written; a closed stdout (`| head`) must not turn that into a panic.
    let t = &report.analysis.timings;
    let pages = match crate::ALLOC.huge_pages() {
        true => "large arrays on huge pages",
        false => "large arrays on 4 KiB pages",
    };
    let peak = match peak_rss_kb() {
        Some(kb) => format!("peak memory: {:.1} MB (VmHWM), {pages}", kb as f64 / 1024.0),
        None => format!("peak memory: unknown (/proc/self/status has no VmHWM), {pages}"),
    };
    let text = format!(
        "{}time: {:.2} s (scan {} ms, graph {} ms, paths {} ms, dominators {} ms, report {} ms)\n{peak}\nreport: {}{}\n",
        Summary(&report),
        t.total_ms as f64 / 1000.0,
        t.scan_ms,
        t.graph_ms,
        t.paths_ms,
        t.dominators_ms,
        t.report_ms,
        a.output.display(),
        a.html
            .as_ref()
            .map(|p| format!("\npage: {}", p.display()))
            .unwrap_or_default()
    );
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    // The analysis's freed arrays are kept by the allocator to the end; their pages are freed
    // here on the analysis's threads, not one at a time by the exit's teardown (at 10 M
    // objects 26-31 ms from the report's end to the process's, 16-21 this way).
    drop(report);
    crate::ALLOC.release_kept(cfg.threads_used());
    Ok(())
}

/// Byte offset of a JSON error (serde_json reports line and column).
fn json_offset(text: &[u8], e: &serde_json::Error) -> usize {
    let mut line = 1;
    let mut off = 0;
    for (i, &b) in text.iter().enumerate() {
        if line == e.line() {
            off = i;
            break;
        }
        if b == b'\n' {
            line += 1;
        }
    }
    off + e.column().saturating_sub(1)
}

fn peak_rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    l.split_whitespace().nth(1)?.parse().ok()
}
