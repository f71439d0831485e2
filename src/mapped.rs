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

/// The `oomguard` executable's allocator: the system's for small blocks; blocks of 2 MiB or
/// more (with an alignment a page satisfies) get anonymous mappings of their own, advised to be
/// backed by transparent huge pages (`MADV_HUGEPAGE`), grown and shrunk in place or moved by
/// `mremap` (no copy), and unmapped when freed: a freed array leaves the process's RSS at once
/// (glibc keeps freed blocks under its mmap threshold, which rises to 32 MiB, in its heap).
///
/// Why not the system allocator plus advice on its blocks: advice on part of a glibc mapping
/// splits it in two kernel areas, and `mremap` refuses a range over two areas (`EFAULT`), so
/// glibc's `realloc` then copied every growing vector into fresh memory. On the 540 MB dump the
/// analyser took 73,000 page faults, 51,000 of them in that copy. The analyser's arrays are a
/// few large blocks filled once. Where the kernel has no huge pages, or refuses the advice,
/// the blocks are plain mappings. Only the executable installs it (`#[global_allocator]`); the
/// library loaded into an app never does.
pub struct HugePageAlloc;

/// Blocks at least this large get mappings of their own: the size of an x86-64 or AArch64
/// (4 KiB pages) huge page.
const HUGE_MIN: usize = 2 << 20;
/// The largest alignment a mapping is sure to have (the smallest page size).
const MAP_ALIGN: usize = 4 << 10;

/// Whether a block of `size` bytes aligned to `align` is a mapping of its own.
fn mapped_block(size: usize, align: usize) -> bool {
    cfg!(any(target_os = "linux", target_os = "android")) && size >= HUGE_MIN && align <= MAP_ALIGN
}

/// A block's mapping length: whole pages. (Whole huge pages would make the kernel start every
/// block on a 2 MiB boundary, so that all of it can be huge; but then the same element of the
/// dominator computation's four arrays shares cache sets, and that phase took 20 % longer.)
fn mapping_len(size: usize) -> usize {
    size.next_multiple_of(MAP_ALIGN)
}

// SAFETY: small blocks are forwarded to the system allocator unchanged. A large block is an
// anonymous private mapping of `mapping_len(size)` bytes, which only this allocator maps,
// moves and unmaps, always with the size of the layout it was made for (the caller's
// guarantee): `mapped_block` gives the same answer for the same layout at every call.
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if mapped_block(layout.size(), layout.align()) {
            return map_block(layout.size());
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if mapped_block(layout.size(), layout.align()) {
            // Fresh anonymous pages read as zero.
            return map_block(layout.size());
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        if mapped_block(layout.size(), layout.align()) {
            unmap_block(ptr, layout.size());
            return;
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        match (
            mapped_block(layout.size(), align),
            mapped_block(new_size, align),
        ) {
            (false, false) => {
                // SAFETY: forwarded with the caller's guarantees.
                unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
            }
            (true, true) if mapping_len(layout.size()) == mapping_len(new_size) => ptr,
            #[cfg(target_os = "linux")]
            (true, true) => remap_block(ptr, layout.size(), new_size),
            // Across the threshold, or a mapping to resize where the `libc` crate has no
            // `mremap` (Android): a new block, the bytes both hold, the old block freed.
            _ => {
                // SAFETY: the caller guarantees `new_size` with `align` is a valid layout.
                let new = unsafe { std::alloc::Layout::from_size_align_unchecked(new_size, align) };
                // SAFETY: a valid, non-zero layout (`new_size` > 0 is the caller's guarantee).
                let q = unsafe { self.alloc(new) };
                if !q.is_null() {
                    // SAFETY: both blocks are live, distinct and at least this long.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                q
            }
        }
    }
}

/// A new mapping for a block of `size` bytes, advised to be huge pages; null if none.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn map_block(size: usize) -> *mut u8 {
    let len = mapping_len(size);
    // SAFETY: a new anonymous private mapping at an address the kernel picks; nothing else is
    // touched. The advice changes no data and its result is ignored (only a hint).
    #[allow(unsafe_code)]
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        libc::madvise(p, len, libc::MADV_HUGEPAGE);
        p as *mut u8
    }
}

/// Unmap a block [`map_block`] made for `size` bytes.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn unmap_block(p: *mut u8, size: usize) {
    // SAFETY: `p` is a mapping of `mapping_len(size)` bytes this allocator made; its owner
    // gave it back.
    #[allow(unsafe_code)]
    unsafe {
        libc::munmap(p as *mut libc::c_void, mapping_len(size));
    }
}

/// Grow or shrink a block [`map_block`] made for `old` bytes to `new` bytes (of another
/// mapping length): in place if the addresses after it are free, else moved by the kernel (its
/// pages, not its bytes); null (the block untouched) if neither works.
#[cfg(target_os = "linux")]
fn remap_block(p: *mut u8, old: usize, new: usize) -> *mut u8 {
    // SAFETY: `p` is one whole mapping of `mapping_len(old)` bytes this allocator made (one
    // kernel area, the advice covering all of it); the kernel keeps its contents and its advice.
    #[allow(unsafe_code)]
    unsafe {
        let q = libc::mremap(
            p as *mut libc::c_void,
            mapping_len(old),
            mapping_len(new),
            libc::MREMAP_MAYMOVE,
        );
        if q == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        q as *mut u8
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn map_block(_: usize) -> *mut u8 {
    unreachable!("mapped_block is false off Linux")
}
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn unmap_block(_: *mut u8, _: usize) {
    unreachable!("mapped_block is false off Linux")
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

    /// The kernel area (/proc/self/smaps) holding `addr`: its bounds and its `VmFlags`.
    fn area_of(addr: usize) -> Option<(usize, usize, String)> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = None;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        inside = (lo <= addr && addr < hi).then_some((lo, hi));
                        continue;
                    }
                }
            }
            if let (Some((lo, hi)), Some(f)) = (inside, line.strip_prefix("VmFlags:")) {
                return Some((lo, hi, f.to_string()));
            }
        }
        None
    }

    fn thp() -> bool {
        std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists()
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
        if thp() {
            let (_, _, flags) =
                area_of(p as usize + (4 << 20)).expect("the block's mapping is in smaps");
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

    /// A block that grows and shrinks across and above the 2 MiB threshold keeps its bytes at
    /// every step, and above it is one kernel area of its own, advised whole. (With advice on
    /// part of a glibc block, the area was split and `mremap` failed, so every growth copied.)
    #[test]
    fn huge_page_alloc_resizes_blocks_keeping_their_bytes() {
        use std::alloc::{GlobalAlloc, Layout};
        let a = HugePageAlloc;
        let byte = |i: usize| (i % 251) as u8;
        let sizes = [1 << 20, 3 << 20, 64 << 20, (5 << 20) + 123, 100 << 10];
        let mut layout = Layout::from_size_align(sizes[0], 8).unwrap();
        // SAFETY: a non-zero layout; every block is used within its size and freed with its
        // layout.
        #[allow(unsafe_code)]
        let mut p = unsafe { a.alloc(layout) };
        assert!(!p.is_null());
        #[allow(unsafe_code)]
        unsafe { std::slice::from_raw_parts_mut(p, layout.size()) }
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = byte(i));
        for &size in &sizes[1..] {
            #[allow(unsafe_code)]
            let q = unsafe { a.realloc(p, layout, size) };
            assert!(!q.is_null(), "realloc to {size}");
            let kept = layout.size().min(size);
            #[allow(unsafe_code)]
            let block = unsafe { std::slice::from_raw_parts_mut(q, size) };
            assert!(
                block[..kept].iter().enumerate().all(|(i, &b)| b == byte(i)),
                "bytes lost resizing {} -> {size}",
                layout.size()
            );
            for (i, b) in block.iter_mut().enumerate().skip(kept) {
                *b = byte(i);
            }
            if size >= HUGE_MIN && cfg!(target_os = "linux") {
                let (lo, hi, flags) = area_of(q as usize).expect("the block is in smaps");
                assert_eq!(
                    lo, q as usize,
                    "a block of {size} bytes starts its own area"
                );
                assert!(hi - lo >= size, "the area holds the whole block");
                if thp() {
                    assert!(
                        flags.split_whitespace().any(|f| f == "hg"),
                        "VmFlags:{flags}"
                    );
                }
            }
            p = q;
            layout = Layout::from_size_align(size, 8).unwrap();
        }
        #[allow(unsafe_code)]
        unsafe {
            a.dealloc(p, layout)
        };
    }
}
