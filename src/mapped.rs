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

/// Ask the CPU to start loading the cache line holding `b[at]` (nothing if `at` is past the
/// end). A hint only: it reads nothing the caller can see and cannot fault. The HPROF parser
/// calls it a little ahead of where it reads, because on a mapped dump it otherwise waits for
/// memory at nearly every record head.
#[inline(always)]
pub fn prefetch(b: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < b.len() {
        // SAFETY: `_mm_prefetch` is an SSE instruction (always present on x86_64) that only
        // hints the cache; the pointer is inside `b` and is never dereferenced.
        #[allow(unsafe_code)]
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                b.as_ptr().add(at) as *const i8,
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (b, at);
}
