//! `analyze`: run the heap analyser on a dump, write the JSON report atomically, print a summary.

use crate::Failure;
use oomguard::analyze::{self, Config, Input, Summary};
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
    #[arg(long)]
    snapshot: Option<u32>,
}

/// Read a JSON file, or say which file and byte are wrong.
fn read_json<T: serde::de::DeserializeOwned>(p: &Path) -> Result<T, Failure> {
    let text =
        std::fs::read(p).map_err(|e| fail(1, format!("{}: cannot read: {e}", p.display())))?;
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

pub fn run(a: AnalyzeArgs) -> Result<(), Failure> {
    let running_info = match &a.running_info {
        None => serde_json::Value::Null,
        Some(p) => read_json(p)?,
    };
    let base: Config = match &a.config {
        None => Config::default(),
        Some(p) => read_json(p)?,
    };
    let cfg = Config {
        top_n: a.top,
        threads: a.threads,
        snapshot: a.snapshot.or(base.snapshot),
        ..base
    };
    let report =
        analyze::analyze(Input::File(&a.input), &cfg, running_info).map_err(|e| match e {
            analyze::Error::Input { .. } => fail(2, format!("{}: {e}", a.input.display())),
            analyze::Error::Io { .. } => fail(1, format!("{}: {e}", a.input.display())),
        })?;
    let json = serde_json::to_vec_pretty(&report).map_err(|e| fail(1, format!("report: {e}")))?;
    write_atomically(&a.output, &json)?;
    if let Some(out) = &a.html {
        let value = serde_json::to_value(&report).map_err(|e| fail(1, format!("report: {e}")))?;
        let title = a.input.file_name().map_or_else(
            || a.input.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let page = oomguard::html::incident_page(&oomguard::html::PageInput {
            title: &title,
            report: Some(&value),
            ..Default::default()
        });
        write_atomically(out, page.as_bytes())?;
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

/// Write through a temporary file beside `out`, renamed into place only when complete.
fn write_atomically(out: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report.json".into());
    let tmp = out.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let r = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, out)
    })();
    r.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(1, format!("{}: cannot write: {e}", out.display()))
    })
}
