//! `oomguard testdata-art OUT`: write a generated ART-style dump (for benches and tests).
//!
//! Invariant: the dump is built in memory, so a spec whose estimated size is over
//! [`MAX_BYTES`] is refused (exit 2) before anything is allocated; the output is written to a
//! temporary renamed into place only when complete.

use crate::{files, Failure};
use hprof::writer::{art_dump, ArtSpec};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct TestdataArgs {
    /// Where to write the ART-style dump.
    output: PathBuf,
    /// Objects in the image heap.
    #[arg(long, default_value_t = 2_000)]
    image: u32,
    /// Objects in the zygote heap.
    #[arg(long, default_value_t = 1_000)]
    zygote: u32,
    /// Objects in the app heap.
    #[arg(long, default_value_t = 3_000)]
    app: u32,
    /// Mean primitive array contents, in bytes.
    #[arg(long, default_value_t = 256)]
    mean_array_bytes: u32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// The largest dump `testdata-art` builds, estimated before building it (it is held in memory,
/// twice while its buffer grows).
pub const MAX_BYTES: u64 = 2 << 30;

/// A generous estimate of the dump's size: four objects in ten are primitive arrays whose
/// contents average `--mean-array-bytes`, so half of it per object, and a head of at most 64
/// bytes (100,000 app objects with a mean of 4096 bytes: 167 MB written, 211 MB estimated).
fn estimated_bytes(a: &TestdataArgs) -> u64 {
    let objects = u64::from(a.image) + u64::from(a.zygote) + u64::from(a.app);
    objects * (u64::from(a.mean_array_bytes) / 2 + 64)
}

pub fn run(a: TestdataArgs) -> Result<(), Failure> {
    let est = estimated_bytes(&a);
    if est > MAX_BYTES {
        return Err(Failure {
            code: 2,
            message: format!(
                "testdata-art: about {} MB asked for ((--image + --zygote + --app) x (--mean-array-bytes / 2 + 64)); at most {} MB",
                est >> 20,
                MAX_BYTES >> 20
            ),
        });
    }
    let bytes = art_dump(&ArtSpec {
        seed: a.seed,
        image_objects: a.image,
        zygote_objects: a.zygote,
        app_objects: a.app,
        mean_array_bytes: a.mean_array_bytes,
        planted: Vec::new(),
    });
    files::check_output(&a.output, &[])?;
    let mut out = files::Staged::new(&a.output)?;
    out.write_all(&bytes)?;
    out.commit()?;
    say!("{}: {} bytes", a.output.display(), bytes.len());
    Ok(())
}
