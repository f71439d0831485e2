//! `oomguard testdata art OUT`: write a generated ART-style dump (for benches and tests).

use crate::{files, Failure};
use oomguard::hprof::writer::{art_dump, ArtSpec};
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

pub fn run(a: TestdataArgs) -> Result<(), Failure> {
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
