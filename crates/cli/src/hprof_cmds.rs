//! `inspect`, `strip` and `restore`. Their input and output are checked by `files` before any
//! work (see its invariants); the output is written to a temporary renamed into place only when
//! complete. A valid file without heap records is refused by `strip` and `restore` and described
//! with a warning by `inspect`.

use crate::{files, Failure};
use hprof::{stats::Inspector, strip_mapped, FileSink, Level, Restorer};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args)]
pub struct InspectArgs {
    /// The dump to read.
    file: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct StripArgs {
    /// The dump to strip.
    input: PathBuf,
    /// Where to write the stripped dump.
    #[arg(short, long)]
    output: PathBuf,
    /// none: a validated copy; arrays: primitive array contents removed; app: arrays, and the
    /// zygote and image heaps' objects dropped.
    #[arg(long, default_value = "arrays")]
    level: Level,
}

#[derive(clap::Args)]
pub struct RestoreArgs {
    /// The stripped dump.
    input: PathBuf,
    /// Where to write the restored dump.
    #[arg(short, long)]
    output: PathBuf,
}

/// Feed size.
const CHUNK: usize = 1 << 20;

fn bad_input(path: &Path, e: hprof::Error) -> Failure {
    Failure {
        code: 2,
        message: format!("{}: {e}", path.display()),
    }
}

/// An error of a command that reads `input` and writes `output`: a failed write (a full disk)
/// names the output and exits 1; anything else is the input's fault, exit 2.
fn in_or_out(input: &Path, output: &Path, e: hprof::Error) -> Failure {
    if e.is_output() {
        Failure {
            code: 1,
            message: format!("{}: {}", output.display(), e.what),
        }
    } else {
        bad_input(input, e)
    }
}

/// Map `path` (checked by [`files::input`]) and hand it to `feed` in chunks of [`CHUNK`] bytes;
/// `fail` turns a parse error into the command's failure.
fn stream(
    path: &Path,
    mut feed: impl FnMut(&[u8]) -> Result<(), hprof::Error>,
    fail: impl Fn(hprof::Error) -> Failure,
) -> Result<(), Failure> {
    let m = files::map_input(path)?;
    for c in m.bytes().chunks(CHUNK) {
        feed(c).map_err(&fail)?;
    }
    Ok(())
}

/// The checks of a command that reads the dump `input` and writes `output`, before any work:
/// the output can be written and is not the input, the input is a regular file.
fn check_in_out(input: &Path, output: &Path) -> Result<(), Failure> {
    files::check_output(output, &[input])?;
    files::input(input).map(drop)
}

/// After a parse without error: the input held heap records (else exit 2, and the output,
/// still a temporary, is removed).
fn has_heaps(input: &Path) -> Result<(), Failure> {
    files::heap_records(input, &files::input(input)?)
}

fn mb(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

pub fn inspect(a: InspectArgs) -> Result<(), Failure> {
    let mut ins = Inspector::new();
    stream(&a.file, |c| ins.feed(c), |e| bad_input(&a.file, e))?;
    let st = ins.finish().map_err(|e| bad_input(&a.file, e))?;
    print_stats(&a, &st);
    // A valid file without a heap dump (a header alone) is described, and said to be none.
    if let Err(w) = has_heaps(&a.file) {
        eprintln!("oomguard: warning: {}", w.message);
    }
    Ok(())
}

fn print_stats(a: &InspectArgs, st: &hprof::stats::Stats) {
    if a.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&st).expect("stats serialise")
        );
        return;
    }
    say!("{}", a.file.display());
    say!("  format     {}", st.format);
    say!("  id size    {}", st.id_size);
    say!("  timestamp  {} ms", st.timestamp_ms);
    say!(
        "  size       {} bytes ({:.1} MB)",
        st.file_bytes,
        mb(st.file_bytes)
    );
    say!("  records");
    for (name, c) in &st.records {
        say!("    {name:<24} {:>10}  {:>12} bytes", c.count, c.bytes);
    }
    say!("  heap sub-records");
    for (name, c) in &st.sub_records {
        say!("    {name:<28} {:>10}  {:>12} bytes", c.count, c.bytes);
    }
    if !st.heaps.is_empty() {
        say!("  heaps");
        for (name, h) in &st.heaps {
            say!(
                "    {name:<24} {:>10} objects  {:>12} bytes",
                h.objects,
                h.bytes
            );
        }
    }
    let b = &st.bytes;
    say!("  bytes by category");
    for (k, v) in [
        ("instances", b.instances),
        ("object arrays", b.object_arrays),
        ("primitive array contents", b.primitive_array_contents),
        (
            "  (stripped, not in file)",
            b.primitive_array_contents_stripped,
        ),
        ("primitive array heads", b.primitive_array_heads),
        ("classes", b.classes),
        ("strings", b.strings),
        ("roots", b.roots),
        ("other records", b.other_records),
        ("heap info", b.heap_info),
        ("segment headers", b.segment_headers),
        ("file header", b.header),
    ] {
        say!(
            "    {k:<28} {v:>12}  {:>6.1} %",
            100.0 * v as f64 / st.file_bytes.max(1) as f64
        );
    }
}

pub fn strip(a: StripArgs) -> Result<(), Failure> {
    let t0 = Instant::now();
    check_in_out(&a.input, &a.output)?;
    let m = files::map_input(&a.input)?;
    let mut out = files::Staged::new(&a.output)?;
    let (sink, stats) = strip_mapped(m.bytes(), a.level, FileSink { file: out.take() })
        .map_err(|e| in_or_out(&a.input, &a.output, e))?;
    out.put(sink.file);
    has_heaps(&a.input)?;
    out.commit()?;
    let secs = t0.elapsed().as_secs_f64();
    say!(
        "{} -> {} (level {}): {} -> {} bytes ({:.1} MB -> {:.1} MB), {:.1} % of the original, {:.0} MB/s",
        a.input.display(),
        a.output.display(),
        a.level,
        stats.input_bytes,
        stats.output_bytes,
        mb(stats.input_bytes),
        mb(stats.output_bytes),
        100.0 * stats.output_bytes as f64 / stats.input_bytes.max(1) as f64,
        mb(stats.input_bytes) / secs.max(1e-9)
    );
    say!(
        "  {} primitive arrays emptied ({:.1} MB of contents), {} objects dropped",
        stats.arrays_stripped,
        mb(stats.array_bytes_removed),
        stats.objects_dropped
    );
    if stats.holder_roots > 0 || stats.objects_kept_in_dropped_heaps > 0 {
        say!(
            "  {} GC roots kept for the app objects they referenced; {} objects of those heaps kept",
            stats.holder_roots,
            stats.objects_kept_in_dropped_heaps
        );
    }
    Ok(())
}

pub fn restore(a: RestoreArgs) -> Result<(), Failure> {
    check_in_out(&a.input, &a.output)?;
    let mut out = files::Staged::new(&a.output)?;
    let mut r = Restorer::new(FileSink { file: out.take() });
    stream(
        &a.input,
        |c| r.feed(c),
        |e| in_or_out(&a.input, &a.output, e),
    )?;
    let (sink, stats) = r.finish().map_err(|e| in_or_out(&a.input, &a.output, e))?;
    out.put(sink.file);
    has_heaps(&a.input)?;
    out.commit()?;
    say!(
        "{} -> {}: {} -> {} bytes, {} arrays restored with {} zero bytes ({})",
        a.input.display(),
        a.output.display(),
        stats.input_bytes,
        stats.output_bytes,
        stats.arrays_restored,
        stats.zero_bytes_written,
        if stats.android {
            "JAVA PROFILE 1.0.3"
        } else {
            "JAVA PROFILE 1.0.2"
        }
    );
    Ok(())
}
