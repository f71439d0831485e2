//! `inspect`, `strip` and `restore`.

use crate::Failure;
use oomguard::hprof::{stats::Inspector, strip_mapped, FileSink, Level, Restorer};
use oomguard::mapped::Mapped;
use std::fs::File;
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

fn io_fail(path: &Path, what: &str, e: std::io::Error) -> Failure {
    Failure {
        code: 1,
        message: format!("{}: {what}: {e}", path.display()),
    }
}

fn bad_input(path: &Path, e: oomguard::hprof::Error) -> Failure {
    Failure {
        code: 2,
        message: format!("{}: {e}", path.display()),
    }
}

/// An error of a command that reads `input` and writes `output`: a failed write (a full disk)
/// names the output and exits 1; anything else is the input's fault, exit 2.
fn in_or_out(input: &Path, output: &Path, e: oomguard::hprof::Error) -> Failure {
    if e.is_output() {
        Failure {
            code: 1,
            message: format!("{}: {}", output.display(), e.what),
        }
    } else {
        bad_input(input, e)
    }
}

/// Map `path` and hand it to `feed` in chunks of [`CHUNK`] bytes; `fail` turns a parse error
/// into the command's failure.
fn stream(
    path: &Path,
    mut feed: impl FnMut(&[u8]) -> Result<(), oomguard::hprof::Error>,
    fail: impl Fn(oomguard::hprof::Error) -> Failure,
) -> Result<(), Failure> {
    let m = Mapped::open(path).map_err(|e| io_fail(path, "cannot open", e))?;
    for c in m.bytes().chunks(CHUNK) {
        feed(c).map_err(&fail)?;
    }
    Ok(())
}

/// Write `out` through a temporary file beside it, renamed into place only on success; on any
/// failure the temporary is removed, so no half-written OUT is ever left behind.
fn write_atomically<T>(
    out: &Path,
    work: impl FnOnce(File) -> Result<(File, T), Failure>,
) -> Result<T, Failure> {
    // A device or a pipe (say /dev/null) is written in place: renaming over it would replace it.
    if std::fs::metadata(out).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(out)
            .map_err(|e| io_fail(out, "cannot open", e))?;
        return work(f).map(|(_, t)| t);
    }
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = out.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let f = File::create(&tmp).map_err(|e| io_fail(&tmp, "cannot create", e))?;
    let r = work(f).and_then(|(f, t)| {
        f.sync_all().map_err(|e| io_fail(&tmp, "fsync failed", e))?;
        drop(f);
        std::fs::rename(&tmp, out).map_err(|e| io_fail(out, "cannot rename into place", e))?;
        Ok(t)
    });
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

fn mb(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

pub fn inspect(a: InspectArgs) -> Result<(), Failure> {
    let mut ins = Inspector::new();
    stream(&a.file, |c| ins.feed(c), |e| bad_input(&a.file, e))?;
    let st = ins.finish().map_err(|e| bad_input(&a.file, e))?;
    if a.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&st).expect("stats serialise")
        );
        return Ok(());
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
    Ok(())
}

pub fn strip(a: StripArgs) -> Result<(), Failure> {
    let t0 = Instant::now();
    let stats = write_atomically(&a.output, |f| {
        let m = Mapped::open(&a.input).map_err(|e| io_fail(&a.input, "cannot open", e))?;
        let (sink, stats) = strip_mapped(m.bytes(), a.level, FileSink { file: f })
            .map_err(|e| in_or_out(&a.input, &a.output, e))?;
        Ok((sink.file, stats))
    })?;
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
    let stats = write_atomically(&a.output, |f| {
        let mut r = Restorer::new(FileSink { file: f });
        stream(
            &a.input,
            |c| r.feed(c),
            |e| in_or_out(&a.input, &a.output, e),
        )?;
        let (sink, stats) = r.finish().map_err(|e| in_or_out(&a.input, &a.output, e))?;
        Ok((sink.file, stats))
    })?;
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
