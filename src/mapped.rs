//! Read-only memory maps of files, for the analyser and the command line: a whole file
//! ([`Mapped`]) or a bounded window of one ([`Window`]).
//!
//! This is the one place outside `hook/`, `dump/` and `jni/` with `unsafe` blocks (DESIGN.md
//! lists only those three): mapping a file is `unsafe` in Rust because another process could
//! truncate or rewrite the file while it is mapped. oomguard maps only dumps it wrote itself, in
//! its own data directory, or files a developer names on the command line; a truncation under the
//! map would end the analysing process (SIGBUS), which runs out of the app's process by design.
//! It also holds [`prefetch`], a cache hint the HPROF parser gives a little ahead of where it
//! reads (an `unsafe` intrinsic that reads nothing and cannot fault), and [`HugePageAlloc`], the
//! executable's allocator, which advises huge pages for large blocks.
//!
//! Invariants: maps are read-only and private; a [`Window`] never reaches past the file's length
//! as it was when the window was mapped, and is unmapped when dropped (its pages then leave the
//! process's RSS).

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

/// Bytes `[offset, offset + len)` of a file, mapped read-only and unmapped on drop. Pages are
/// faulted in as they are first read (the kernel maps a few neighbours of each from the page
/// cache at once), so pages never read are never mapped.
pub struct Window {
    map: Option<memmap2::Mmap>,
}

impl Window {
    /// Map `[offset, offset + len)` of `file`. Fails (mapping nothing) if that range is not
    /// wholly inside the file, or if the file cannot be mapped (a pipe, some special files).
    pub fn map(file: &File, offset: u64, len: usize) -> io::Result<Window> {
        let size = file.metadata()?.len();
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|e| e > size) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("window [{offset}, +{len}) runs past the end of the file ({size} bytes)"),
            ));
        }
        if len == 0 {
            return Ok(Window { map: None });
        }
        // SAFETY: the map is read-only and private to this process and lies within the file as
        // it is now; see the module comment for what happens if another process truncates the
        // file meanwhile.
        #[allow(unsafe_code)]
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(offset)
                .len(len)
                .map(file)?
        };
        Ok(Window { map: Some(map) })
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
    prefetch_at(b, at)
}

/// [`prefetch`] for `b[at]` of any slice (x86_64 and AArch64; elsewhere nothing).
#[inline(always)]
pub fn prefetch_at<T>(b: &[T], at: usize) {
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
    #[cfg(target_arch = "aarch64")]
    if at < b.len() {
        // SAFETY: `prfm` (a prefetch hint, part of every AArch64 core) reads and writes nothing
        // visible and cannot fault, whatever the address; the pointer is inside `b`.
        #[allow(unsafe_code)]
        unsafe {
            std::arch::asm!(
                "prfm pldl1keep, [{p}]",
                p = in(reg) b.as_ptr().add(at),
                options(nostack, readonly, preserves_flags)
            );
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = (b, at);
}

/// The `oomguard` executable's allocator: the system's, plus the advice that blocks of 2 MiB or
/// more be backed by transparent huge pages (`MADV_HUGEPAGE`). The analyser's arrays are a few
/// large blocks filled once; with 4 KiB pages it spends about a tenth of its time in page faults
/// (107,000 of them on a 540 MB dump, about 72,000 with this advice; peak RSS within 4 %). Where the
/// kernel has no huge pages, or the advice is refused, nothing changes. Only the executable
/// installs it (`#[global_allocator]`); the library loaded into an app never does.
pub struct HugePageAlloc;

/// Blocks at least this large are advised.
const HUGE_MIN: usize = 2 << 20;
/// Advice starts and ends on this alignment, a multiple of every page size Linux uses.
const ADVICE_ALIGN: usize = 64 << 10;

fn advise_huge(p: *mut u8, len: usize) {
    if p.is_null() || len < HUGE_MIN {
        return;
    }
    let start = (p as usize).next_multiple_of(ADVICE_ALIGN);
    let end = (p as usize + len) & !(ADVICE_ALIGN - 1);
    if end > start {
        // SAFETY: advice on whole pages inside a block this allocator just handed out; it
        // changes no data and the result is ignored (only a hint).
        #[allow(unsafe_code)]
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; the only addition is
// `madvise` advice on memory the block owns.
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { std::alloc::System.alloc(layout) };
        advise_huge(p, layout.size());
        p
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { std::alloc::System.alloc_zeroed(layout) };
        advise_huge(p, layout.size());
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { std::alloc::System.realloc(ptr, layout, new_size) };
        advise_huge(p, new_size);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn windows_read_the_bytes_of_their_range() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        f.write_all(&data).unwrap();
        for (off, len) in [
            (0, 20_000),
            (1, 4095),
            (4096, 8192),
            (12_345, 7_655),
            (19_999, 1),
            (7, 0),
        ] {
            let w = Window::map(&f, off as u64, len).unwrap();
            assert_eq!(w.bytes(), &data[off..off + len], "{off} {len}");
        }
        assert!(Window::map(&f, 19_000, 1_001).is_err());
        assert!(Window::map(&f, u64::MAX, 2).is_err());
    }

    /// A large block from [`HugePageAlloc`] holds its data, and its mapping carries the huge
    /// page advice (`hg` in /proc/self/smaps), where the kernel has transparent huge pages.
    #[test]
    fn huge_page_alloc_advises_large_blocks() {
        use std::alloc::{GlobalAlloc, Layout};
        let a = HugePageAlloc;
        let layout = Layout::from_size_align(8 << 20, 16).unwrap();
        // SAFETY: a non-zero layout; the block is written within bounds and freed with it.
        #[allow(unsafe_code)]
        let p = unsafe { a.alloc_zeroed(layout) };
        assert!(!p.is_null());
        #[allow(unsafe_code)]
        let block = unsafe { std::slice::from_raw_parts_mut(p, layout.size()) };
        assert!(block.iter().all(|&b| b == 0));
        block[12_345] = 7;
        let addr = p as usize + (4 << 20);
        let flags = std::fs::read_to_string("/proc/self/smaps")
            .ok()
            .and_then(|smaps| {
                let mut inside = false;
                for line in smaps.lines() {
                    if let Some((range, _)) = line.split_once(' ') {
                        if let Some((lo, hi)) = range.split_once('-') {
                            if let (Ok(lo), Ok(hi)) =
                                (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                            {
                                inside = lo <= addr && addr < hi;
                                continue;
                            }
                        }
                    }
                    if inside {
                        if let Some(f) = line.strip_prefix("VmFlags:") {
                            return Some(f.to_string());
                        }
                    }
                }
                None
            });
        let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists();
        if thp {
            let flags = flags.expect("the block's mapping is in /proc/self/smaps");
            assert!(
                flags.split_whitespace().any(|f| f == "hg"),
                "VmFlags:{flags}"
            );
        }
        assert_eq!(block[12_345], 7);
        // SAFETY: allocated above with this layout.
        #[allow(unsafe_code)]
        unsafe {
            a.dealloc(p, layout)
        };
    }
}
