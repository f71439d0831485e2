//! Read-only memory maps of whole files, for the analyser and the command line.
//!
//! This is the one place outside `hook/`, `dump/` and `jni/` with an `unsafe` block (DESIGN.md
//! lists only those three): mapping a file is `unsafe` in Rust because another process could
//! truncate or rewrite the file while it is mapped. oomguard maps only dumps it wrote itself, in
//! its own data directory, or files a developer names on the command line; a truncation under the
//! map would end the analysing process (SIGBUS), which runs out of the app's process by design.

use std::fs::File;
use std::io;
use std::path::Path;

/// A file mapped read-only. Empty files are not mapped (a zero-length map is an error).
pub struct Mapped {
    map: Option<memmap2::Mmap>,
}

impl Mapped {
    pub fn open(path: &Path) -> io::Result<Mapped> {
        let f = File::open(path)?;
        if f.metadata()?.len() == 0 {
            return Ok(Mapped { map: None });
        }
        // SAFETY: the map is read-only and private to this process; see the module comment for
        // what happens if another process truncates the file meanwhile.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::MmapOptions::new().populate().map(&f)? };
        let _ = map.advise(memmap2::Advice::Sequential);
        Ok(Mapped { map: Some(map) })
    }

    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}
