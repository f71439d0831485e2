//! The `oomguard` command line: strip, restore, inspect (and, as the other modules land, analyze,
//! collect, demo). It holds no logic of its own beyond reading files and printing: everything it
//! does is a library call.
//!
//! Invariants: a command fails with a [`Failure`] (never a panic): exit 2 for bad input or a bad
//! command line (the input's name and what is wrong, `FILE: byte OFFSET: ...` for a dump), exit
//! 1 for a failure of the machine (a full disk, an output directory that does not exist, named
//! by the OUTPUT path). `files` checks every input and output before the work starts.
#![forbid(unsafe_code)]

/// `println!` that ignores a closed stdout (`oomguard inspect x | head` must not panic).
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

mod analyze_cmd;
mod collect_cmd;
mod files;
mod hprof_cmds;
mod spool_worker_cmd;
mod testdata_cmd;

use clap::{Parser, Subcommand};

/// Large blocks on transparent huge pages where those pay, for the analyser (see
/// `mapped::HugePageAlloc`).
#[global_allocator]
static ALLOC: sys::mapped::HugePageAlloc = sys::mapped::HugePageAlloc::new();
use std::process::ExitCode;

/// The exit code of a run whose allocation failed (over its data limit, `RLIMIT_DATA`: the
/// agent runs the analyser under its budget): it says so on stderr and exits at once.
pub const EXIT_OUT_OF_MEMORY: u8 = 3;

#[derive(Parser)]
#[command(
    name = "oomguard",
    version,
    about = "An out-of-memory guard: heap dump tools"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Format, id size, counts per tag and sub-tag, heaps, and bytes by category.
    Inspect(hprof_cmds::InspectArgs),
    /// Write a smaller, still valid HPROF: primitive array contents removed (and more).
    Strip(hprof_cmds::StripArgs),
    /// Turn a stripped dump back into one that every HPROF tool opens.
    Restore(hprof_cmds::RestoreArgs),
    /// Write a generated ART-style (Android 8+) heap dump, for benches and tests.
    #[command(name = "testdata-art")]
    TestdataArt(testdata_cmd::TestdataArgs),
    /// A development tus receiver: stores incidents, verifies sha256, renders index.html.
    Collect(collect_cmd::CollectArgs),
    /// Test harness: drive the spool and uploader (for kill -9 tests).
    #[command(hide = true)]
    SpoolWorker(spool_worker_cmd::WorkerArgs),
    /// Analyse a (full or stripped) dump: leaks, GC paths, dominators; writes a JSON report.
    Analyze(analyze_cmd::AnalyzeArgs),
}

/// A failure the command reports: exit code and message.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

fn main() -> ExitCode {
    ALLOC.exit_on_failure(EXIT_OUT_OF_MEMORY);
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Inspect(a) => hprof_cmds::inspect(a),
        Cmd::Strip(a) => hprof_cmds::strip(a),
        Cmd::Restore(a) => hprof_cmds::restore(a),
        Cmd::TestdataArt(a) => testdata_cmd::run(a),
        Cmd::Collect(a) => collect_cmd::collect(a),
        Cmd::SpoolWorker(a) => spool_worker_cmd::run(a),
        Cmd::Analyze(a) => analyze_cmd::run(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("oomguard: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}
