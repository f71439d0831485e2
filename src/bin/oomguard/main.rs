//! The `oomguard` command line: strip, restore, inspect (and, as the other modules land, analyze,
//! collect, demo). It holds no logic of its own beyond reading files and printing: everything it
//! does is a library call.

mod hprof_cmds;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "oomguard", version, about = "An out-of-memory guard: heap dump tools")]
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
}

/// A failure the command reports: exit code and message.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Inspect(a) => hprof_cmds::inspect(a),
        Cmd::Strip(a) => hprof_cmds::strip(a),
        Cmd::Restore(a) => hprof_cmds::restore(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("oomguard: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}
