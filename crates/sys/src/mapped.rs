//! Memory maps of files: read-only, for the analyser and the command line, of a whole file
//! ([`Mapped`]) or a bounded window of one ([`Window`]). No file is mapped writable here (the
//! analysis's scratch arrays are, in [`crate::scratch`]: blocks reserved first, in the analysing
//! process only): a store into a shared file map that needs a block a full disk cannot give (a
//! hole, or on f2fs any rewritten page) raises SIGBUS, which would kill the app; files are written
//! by `write` and `pwrite`, whose `ENOSPC` is an error return (the flight ring: `recorder`).
//!
//! `unsafe` here (the `sys` crate is one of the places DESIGN.md allows it, with `fd` beside this
//! module): mapping a file is `unsafe` in Rust because another process could truncate or rewrite
//! the file while it is mapped. oomguard maps only dumps it wrote itself, in its own data
//! directory, or files a developer names on the command line; a truncation under the map would end
//! the analysing process (SIGBUS), which runs out of the app's process by design. It also holds
//! [`prefetch`], a cache hint the HPROF parser gives a little ahead of where it reads (an `unsafe`
//! intrinsic that reads nothing and cannot fault), and [`HugePageAlloc`], the executable's
//! allocator, which advises huge pages for large blocks.
//!
//! Invariants: every map of a file is read-only and private; a [`Window`] never reaches past the
//! file's length as it was when the window was mapped, and is unmapped when dropped (its pages then
//! leave the process's RSS).

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

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
/// faulted in as they are first read (the kernel may map a few neighbours of each from the
/// page cache at once; on tmpfs here it maps one), so pages never read are never mapped; or,
/// made by [`Window::map_populated`], all mapped at once.
pub struct Window {
    map: Option<memmap2::Mmap>,
}

impl Window {
    /// Map `[offset, offset + len)` of `file`. Fails (mapping nothing) if that range is not
    /// wholly inside the file, or if the file cannot be mapped (a pipe, some special files).
    pub fn map(file: &File, offset: u64, len: usize) -> io::Result<Window> {
        Window::map_with(file, offset, len, false)
    }

    /// [`Window::map`], every page of the window mapped at once (`MAP_POPULATE`) instead of
    /// faulted in page by page as it is first read.
    pub fn map_populated(file: &File, offset: u64, len: usize) -> io::Result<Window> {
        Window::map_with(file, offset, len, true)
    }

    fn map_with(file: &File, offset: u64, len: usize, populate: bool) -> io::Result<Window> {
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
            let mut o = memmap2::MmapOptions::new();
            o.offset(offset).len(len);
            if populate {
                o.populate();
            }
            o.map(file)?
        };
        Ok(Window { map: Some(map) })
    }

    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// Write `file`'s changes to its device and drop its pages from the page cache
/// (`POSIX_FADV_DONTNEED`), as if nothing had read it since: for tests and benchmarks of what a
/// pass reads from a cold cache. A file system without a page cache of its own (tmpfs) keeps
/// them: see [`cached_bytes`].
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn drop_cached(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    file.sync_data()?;
    // SAFETY: an advice about an open file's pages; it reads or writes no memory of ours.
    #[allow(unsafe_code)]
    let r = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    match r {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// How many bytes of `[0, len)` of `file` lie in pages the page cache holds (`mincore` over a
/// mapping of them, through which nothing is read, so nothing is brought in): whole pages, the
/// last one cut at `len`.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn cached_bytes(file: &File, len: usize) -> io::Result<usize> {
    if len == 0 {
        return Ok(0);
    }
    // SAFETY: a read-only shared mapping of the file from its start, never read through: only
    // its address goes to `mincore`. Unmapped when `map` drops.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::MmapOptions::new().len(len).map(file)? };
    let page = page_size();
    Ok(resident(map.as_ptr(), len)?
        .iter()
        .enumerate()
        .filter(|&(_, &r)| r)
        .map(|(i, _)| (len - i * page).min(page))
        .sum())
}

/// [`drop_cached`] where there is no such advice: unsupported.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn drop_cached(_file: &File) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// [`cached_bytes`] where there is no `mincore`: unsupported.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn cached_bytes(_file: &File, _len: usize) -> io::Result<usize> {
    Err(io::ErrorKind::Unsupported.into())
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

/// Fault in, writable and at once, the whole pages inside `s` (memory about to be written from
/// start to end: a vector's spare capacity, say); whether the kernel did. A hint only: it
/// writes nothing the caller can see, and where the kernel has no `MADV_POPULATE_WRITE` (Linux
/// before 5.14, older Android kernels) or refuses it, the pages fault in one by one when
/// written, as without it.
///
/// Why: the analysis of 10 M objects faults in about 140,000 pages. Measured on the machine of
/// issue 43 (a page written whole after each way of bringing it in): a fault a page 1.46 us,
/// one call for 256 KiB of pages 1.14 us a page, one for 2 MiB 1.27 (the zeroed pages have
/// left the cache before they are written). Partial pages at either end are left alone: they
/// may hold another value's bytes, and are few.
pub fn prefault<T>(s: &mut [std::mem::MaybeUninit<T>]) -> bool {
    let page = page_size();
    let start = (s.as_ptr() as usize).next_multiple_of(page);
    let end = (s.as_ptr() as usize + std::mem::size_of_val(s)) & !(page - 1);
    if end <= start {
        return false;
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: the range is whole pages inside `s`, memory the caller holds mutably; the advice
    // changes no byte of it (it only maps the pages in).
    #[allow(unsafe_code)]
    let done = unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            end - start,
            libc::MADV_POPULATE_WRITE,
        )
    } == 0;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let done = false;
    done
}

/// Which pages of the mapping of `len` bytes at `p` (a page boundary) are in memory, one flag
/// a page (`mincore`: it reads nothing through the mapping, so brings nothing in).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn resident(p: *const u8, len: usize) -> io::Result<Vec<bool>> {
    let mut r = vec![0u8; len.div_ceil(page_size())];
    // SAFETY: `mincore` only reads the page tables of the range and writes a byte a page into
    // `r`, which has one for each.
    #[allow(unsafe_code)]
    let e = unsafe { libc::mincore(p as *mut libc::c_void, len, r.as_mut_ptr() as *mut _) };
    if e != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r.iter().map(|&b| b & 1 == 1).collect())
}

/// The system's page size (read once; 4 KiB where it cannot be read).
pub(crate) fn page_size() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        #[cfg(unix)]
        // SAFETY: `sysconf` reads a constant of the system; no memory is passed.
        #[allow(unsafe_code)]
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        #[cfg(not(unix))]
        let p = 4096;
        if p > 0 && (p as usize).is_power_of_two() {
            p as usize
        } else {
            4096
        }
    })
}

/// The `oomguard` executable's allocator: the system's for small blocks; blocks of 2 MiB or
/// more (with an alignment a page satisfies) get anonymous mappings of their own, advised to be
/// backed by transparent huge pages (`MADV_HUGEPAGE`) where those pay (see
/// [`huge_pages_pay`]), grown and shrunk in place or moved by `mremap` (no copy). Where they
/// are not huge pages, a freed block is kept for the next ones (`Spare`), which then need not
/// fault in fresh pages, as long as the live and kept blocks together stay within the most the
/// live ones ever took; beyond that, or at once with huge pages, it is unmapped and leaves the
/// process's RSS (glibc keeps freed blocks under its mmap threshold, which rises to 32 MiB, in
/// its heap, whatever comes next).
///
/// Why not the system allocator plus advice on its blocks: advice on part of a glibc mapping
/// splits it in two kernel areas, and `mremap` refuses a range over two areas (`EFAULT`), so
/// glibc's `realloc` then copied every growing vector into fresh memory. On the 540 MB dump the
/// analyser took 73,000 page faults, 51,000 of them in that copy. The analyser's arrays are a
/// few large blocks filled once. Where the kernel has no huge pages, or refuses the advice,
/// the blocks are plain mappings. Only the executable installs it (`#[global_allocator]`); the
/// library loaded into an app never does.
pub struct HugePageAlloc {
    /// [`UNDECIDED`] until the first large block asks [`huge_pages_pay`]; then [`HUGE`] or
    /// [`SMALL`].
    pages: AtomicU8,
    spare: std::sync::Mutex<Spare>,
    /// Nonzero: a failed allocation exits the process with this code and a line on stderr
    /// ([`HugePageAlloc::exit_on_failure`]).
    exit_code: AtomicU8,
}

const UNDECIDED: u8 = 0;
/// Large blocks are advised to be huge pages.
const HUGE: u8 = 1;
/// Large blocks are advised not to be (`MADV_NOHUGEPAGE`).
const SMALL: u8 = 2;

impl HugePageAlloc {
    /// Huge pages where they pay ([`huge_pages_pay`], asked once, at the first large block).
    pub const fn new() -> HugePageAlloc {
        HugePageAlloc {
            pages: AtomicU8::new(UNDECIDED),
            spare: std::sync::Mutex::new(Spare::EMPTY),
            exit_code: AtomicU8::new(0),
        }
    }

    /// From now on, an allocation that fails (under a data limit: `RLIMIT_DATA`) writes
    /// `oomguard: memory allocation of N bytes failed (over the process's data limit)` to
    /// stderr and exits with `code` at once, instead of std's handler, which aborts, and with
    /// `RUST_BACKTRACE` set may take the backtrace lock and then fail to allocate again while
    /// holding it (a hang, seen under `prlimit --data`). Nothing else runs: no destructor, no
    /// allocation.
    pub fn exit_on_failure(&self, code: u8) {
        self.exit_code.store(code, Ordering::Relaxed);
    }

    /// What a failed allocation of `size` bytes does: see [`HugePageAlloc::exit_on_failure`].
    #[cold]
    fn failed(&self, size: usize) -> *mut u8 {
        let code = self.exit_code.load(Ordering::Relaxed);
        if code != 0 {
            let mut line = [0u8; 128];
            let n = oom_line(size, &mut line);
            // SAFETY: writes `n` bytes of a live buffer to stderr, then ends the process
            // without running anything else (no allocation, no lock).
            #[allow(unsafe_code)]
            unsafe {
                libc::write(2, line.as_ptr().cast(), n);
                libc::_exit(code as i32);
            }
        }
        std::ptr::null_mut()
    }

    /// Huge pages for large blocks always (`true`) or never.
    pub const fn with_huge_pages(huge: bool) -> HugePageAlloc {
        HugePageAlloc {
            pages: AtomicU8::new(if huge { HUGE } else { SMALL }),
            spare: std::sync::Mutex::new(Spare::EMPTY),
            exit_code: AtomicU8::new(0),
        }
    }

    /// Whether large blocks are advised to be huge pages. (Deciding reads files and the
    /// environment, in small blocks only; two threads may both decide, alike.)
    pub fn huge_pages(&self) -> bool {
        match self.pages.load(Ordering::Relaxed) {
            HUGE => true,
            SMALL => false,
            _ => {
                let huge = huge_pages_pay();
                self.pages
                    .store(if huge { HUGE } else { SMALL }, Ordering::Relaxed);
                huge
            }
        }
    }

    fn spare(&self) -> std::sync::MutexGuard<'_, Spare> {
        // The lock guards plain numbers that every holder leaves consistent.
        self.spare.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A block of `size` bytes (a mapped one), zeroed if `zero`: cut from the smallest kept
    /// block that holds it (the rest stays kept); else the largest kept block grown to it;
    /// else a new mapping. Kept blocks beyond the bound are unmapped ([`Spare::grew`]).
    fn block(&self, size: usize, zero: bool) -> *mut u8 {
        let need = mapping_len(size);
        let huge = self.huge_pages();
        let mut spare = self.spare();
        if let Some(p) = spare.take(need) {
            // `live + kept` is unchanged and was within `peak`, so `live` still is: no new
            // most to record.
            spare.live += need;
            drop(spare);
            if zero {
                // SAFETY: `p` starts `need` bytes of a kept block, now this block and no one
                // else's.
                #[allow(unsafe_code)]
                unsafe {
                    std::ptr::write_bytes(p as *mut u8, 0, need)
                };
            }
            return p as *mut u8;
        }
        let mut p = std::ptr::null_mut();
        if let Some((q, len)) = spare.take_largest() {
            p = remap_block(q as *mut u8, len, need);
            if p.is_null() {
                unmap_block(q as *mut u8, len);
            } else if zero {
                // SAFETY: the block's first `len` bytes are the kept block's pages; the rest
                // are new and read as zero.
                #[allow(unsafe_code)]
                unsafe {
                    std::ptr::write_bytes(p, 0, len)
                };
            }
        }
        if p.is_null() {
            p = map_block(size, huge);
        }
        if !p.is_null() {
            spare.grew(need);
        }
        p
    }

    /// Keep the freed mapping `[p, p + len)` for a later block, or unmap it if there is no room
    /// or if blocks are huge pages. (Where huge pages pay, fresh ones are cheap; a kept block
    /// that grew by `mremap` may be partly 4 KiB pages, and an array read at random that is cut
    /// from it loses the huge pages' TLB reach: DEVELOPERS.md, "Benchmarks".)
    fn keep(&self, p: *mut u8, len: usize) {
        let huge = self.huge_pages();
        self.spare().freed(p as usize, len, huge);
    }

    /// Grow the block at `p` from `old` to `new` bytes (mappings of different lengths): moved
    /// into a kept block that holds it if there is one (its bytes copied; the old block is then
    /// kept in turn), so that no fresh page is faulted in; else grown by `mremap`, with kept
    /// blocks beyond the bound unmapped.
    #[cfg(target_os = "linux")]
    fn grow(&self, p: *mut u8, old: usize, new: usize) -> *mut u8 {
        let (old_len, new_len) = (mapping_len(old), mapping_len(new));
        let mut spare = self.spare();
        if let Some(q) = spare.take(new_len) {
            drop(spare);
            // SAFETY: `q` starts `new_len` bytes of a kept block, now this block's; `p` is the
            // caller's live block of `old` bytes; they do not overlap.
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::copy_nonoverlapping(p, q as *mut u8, old)
            };
            let huge = self.huge_pages();
            let mut spare = self.spare();
            // As in `block`: `live + kept` is unchanged, so `peak` needs no update.
            spare.live += new_len;
            spare.freed(p as usize, old_len, huge);
            return q as *mut u8;
        }
        let q = remap_block(p, old, new);
        if !q.is_null() {
            spare.grew(new_len - old_len);
        }
        q
    }

    /// Give every kept block back to the system, the pages' freeing shared by `threads`
    /// threads (this one and `threads - 1` more), then unmap them. For the end of a process:
    /// the kernel's teardown at exit frees the pages left mapped one at a time on one thread
    /// (about 20 ms for the analyser's 470 MB at 10 M objects), while `MADV_DONTNEED` over
    /// disjoint ranges holds the address space's lock for reading only, so the threads free
    /// side by side. Blocks taken later are new mappings.
    pub fn release_kept(&self, threads: usize) {
        let mut blocks = Vec::new();
        {
            let mut spare = self.spare();
            while let Some(b) = spare.take_largest() {
                blocks.push(b);
            }
        }
        let pieces = shares(&blocks, threads, page_size());
        let free = |v: &[(usize, usize)]| {
            for &(p, n) in v {
                // SAFETY: `[p, p + n)` is whole pages of a kept block, taken out of `Spare`
                // above: no one else holds it; its pages read as zeros after the advice.
                #[allow(unsafe_code)]
                unsafe {
                    libc::madvise(p as *mut libc::c_void, n, libc::MADV_DONTNEED)
                };
            }
        };
        std::thread::scope(|s| {
            for v in pieces.iter().skip(1) {
                let free = &free;
                // (A thread that cannot start leaves its pieces to the unmap below.)
                let _ = std::thread::Builder::new().spawn_scoped(s, move || free(v));
            }
            if let Some(v) = pieces.first() {
                free(v);
            }
        });
        for (p, len) in blocks {
            unmap_block(p as *mut u8, len);
        }
    }
}

/// `blocks` (address, length: whole pages of `page` bytes) cut into at most `threads` shares
/// of about equal bytes, each a list of ranges of whole pages, in order: every byte of every
/// block in one range of one share.
fn shares(blocks: &[(usize, usize)], threads: usize, page: usize) -> Vec<Vec<(usize, usize)>> {
    let total: usize = blocks.iter().map(|b| b.1).sum();
    let share = total
        .div_ceil(threads.max(1))
        .next_multiple_of(page)
        .max(page);
    let mut out: Vec<Vec<(usize, usize)>> = vec![Vec::new()];
    let mut room = share;
    for &(p, len) in blocks {
        let mut at = 0;
        while at < len {
            if room == 0 {
                out.push(Vec::new());
                room = share;
            }
            let n = (len - at).min(room);
            if let Some(v) = out.last_mut() {
                v.push((p + at, n));
            }
            (at, room) = (at + n, room - n);
        }
    }
    out
}

/// Freed blocks kept aside at most.
const SPARE_SLOTS: usize = 16;

/// Freed blocks' mappings kept for the next blocks: (address, length), length 0 in an empty
/// slot. Each is whole pages within one kernel area (a block's mapping, or the part of one left
/// after blocks were cut from its start), so that `mremap` can move or grow it.
///
/// The bound: the live blocks' mappings plus the kept ones never add up to more than the live
/// blocks' did at some moment (`peak`). A block that needs new memory raises the live total;
/// kept blocks are then unmapped, the smallest first, until the bound holds again.
struct Spare {
    slots: [(usize, usize); SPARE_SLOTS],
    /// Mapping bytes of the live large blocks.
    live: usize,
    /// The most `live` has been.
    peak: usize,
}

impl Spare {
    const EMPTY: Spare = Spare {
        slots: [(0, 0); SPARE_SLOTS],
        live: 0,
        peak: 0,
    };

    /// The start of `need` bytes cut from the smallest kept block that holds them (the rest
    /// stays kept); `None` if none does.
    fn take(&mut self, need: usize) -> Option<usize> {
        let i = (0..SPARE_SLOTS)
            .filter(|&i| self.slots[i].1 >= need)
            .min_by_key(|&i| self.slots[i].1)?;
        let (p, len) = self.slots[i];
        self.slots[i] = if len > need {
            (p + need, len - need)
        } else {
            (0, 0)
        };
        Some(p)
    }

    /// The largest kept block, no longer kept.
    fn take_largest(&mut self) -> Option<(usize, usize)> {
        let i = (0..SPARE_SLOTS).max_by_key(|&i| self.slots[i].1)?;
        let s = std::mem::take(&mut self.slots[i]);
        (s.1 > 0).then_some(s)
    }

    /// The live block `[p, p + len)` was freed: keep it, or unmap it if blocks are huge pages
    /// (`huge`) or every slot is taken.
    fn freed(&mut self, p: usize, len: usize, huge: bool) {
        self.live = self.live.saturating_sub(len);
        if huge || !self.put(p, len) {
            unmap_block(p as *mut u8, len);
        }
    }

    /// Keep `[p, p + len)`; false if every slot is taken.
    fn put(&mut self, p: usize, len: usize) -> bool {
        match self.slots.iter_mut().find(|s| s.1 == 0) {
            Some(s) => {
                *s = (p, len);
                true
            }
            None => false,
        }
    }

    /// Bytes kept.
    fn kept(&self) -> usize {
        self.slots.iter().map(|s| s.1).sum()
    }

    /// The live blocks took `more` bytes of new memory: unmap kept blocks, the smallest first,
    /// until the bound holds.
    fn grew(&mut self, more: usize) {
        self.live += more;
        self.peak = self.peak.max(self.live);
        while self.live + self.kept() > self.peak {
            let Some(i) = (0..SPARE_SLOTS)
                .filter(|&i| self.slots[i].1 > 0)
                .min_by_key(|&i| self.slots[i].1)
            else {
                break;
            };
            let (p, len) = std::mem::take(&mut self.slots[i]);
            unmap_block(p as *mut u8, len);
        }
    }
}

impl Default for HugePageAlloc {
    fn default() -> Self {
        HugePageAlloc::new()
    }
}

/// The environment variable that decides instead of [`huge_pages_pay`]'s probe: `on` or `off`.
pub const HUGE_PAGES_ENV: &str = "OOMGUARD_HUGE_PAGES";

/// Whether large blocks should be huge pages here: yes, unless [`HUGE_PAGES_ENV`] says `off`,
/// or (when it says neither `on` nor `off`) the machine is a virtual one whose kernel hands free
/// memory back to the host (`free_pages_reported`).
///
/// There, a free 2 MiB block is reported to the host about two seconds after it is freed and
/// the host drops its pages; a huge page faulted in later is such a block, which the host must
/// back anew. On this project's VM (2026-11-24, the 540 MB bench dump, `oomguard analyze` run
/// 4 s after the last one): with huge pages 0.45 to 0.47 s (system time 0.35 to 0.45 s), with
/// 4 KiB pages 0.31 s (0.14 to 0.19 s), which the guest keeps on its own lists. Back to back,
/// with the blocks the last run freed not yet reported, huge pages win (0.26 to 0.29 s): but a
/// command run once mostly starts after a pause.
pub fn huge_pages_pay() -> bool {
    let env = std::env::var(HUGE_PAGES_ENV).ok();
    pay(env.as_deref(), || {
        free_pages_reported(Path::new(BALLOON_DRIVER))
    })
}

/// [`huge_pages_pay`]'s rule: what [`HUGE_PAGES_ENV`] says (`env`), or when it says neither `on`
/// nor `off`, whether free pages are not `reported` to a host.
fn pay(env: Option<&str>, reported: impl FnOnce() -> bool) -> bool {
    match env {
        Some("on") => true,
        Some("off") => false,
        _ => !reported(),
    }
}

/// The sysfs directory of the virtio balloon driver, which holds a link per bound device.
const BALLOON_DRIVER: &str = "/sys/bus/virtio/drivers/virtio_balloon";

/// Whether a virtio balloon device bound to the driver at `driver` (a sysfs directory) has free
/// page reporting on: its `features` file, a `0` or `1` per feature bit from bit 0, sets bit 5
/// (`VIRTIO_BALLOON_F_REPORTING` in the virtio specification).
fn free_pages_reported(driver: &Path) -> bool {
    const REPORTING: usize = 5;
    let Ok(devices) = std::fs::read_dir(driver) else {
        return false;
    };
    devices.flatten().any(|d| {
        d.file_name().to_string_lossy().starts_with("virtio")
            && std::fs::read(d.path().join("features"))
                .is_ok_and(|f| f.get(REPORTING) == Some(&b'1'))
    })
}

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

// SAFETY: small blocks are forwarded to the system allocator unchanged. A large block is
// `mapping_len(size)` bytes of an anonymous private mapping, which only this allocator maps,
// moves, keeps and unmaps, always with the size of the layout it was made for (the caller's
// guarantee): `mapped_block` gives the same answer for the same layout at every call. A kept
// block belongs to no caller, and the blocks cut from it do not overlap.
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = if mapped_block(layout.size(), layout.align()) {
            self.block(layout.size(), false)
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { std::alloc::System.alloc(layout) }
        };
        if p.is_null() {
            return self.failed(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = if mapped_block(layout.size(), layout.align()) {
            self.block(layout.size(), true)
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { std::alloc::System.alloc_zeroed(layout) }
        };
        if p.is_null() {
            return self.failed(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        if mapped_block(layout.size(), layout.align()) {
            self.keep(ptr, mapping_len(layout.size()));
            return;
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { self.resize(ptr, layout, new_size) };
        if p.is_null() {
            return self.failed(new_size);
        }
        p
    }
}

impl HugePageAlloc {
    /// [`std::alloc::GlobalAlloc::realloc`], null on failure.
    ///
    /// # Safety
    /// As `GlobalAlloc::realloc`'s.
    #[allow(unsafe_code)]
    unsafe fn resize(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        use std::alloc::GlobalAlloc;
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
            (true, true) if new_size > layout.size() => self.grow(ptr, layout.size(), new_size),
            #[cfg(target_os = "linux")]
            (true, true) => {
                let q = remap_block(ptr, layout.size(), new_size);
                if !q.is_null() {
                    let mut spare = self.spare();
                    spare.live = spare
                        .live
                        .saturating_sub(mapping_len(layout.size()) - mapping_len(new_size));
                }
                q
            }
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

/// The line a failed allocation writes (see [`HugePageAlloc::exit_on_failure`]) into `buf`,
/// without allocating; returns its length.
fn oom_line(size: usize, buf: &mut [u8; 128]) -> usize {
    let mut w = 0;
    let mut put = |b: &[u8]| {
        let n = b.len().min(buf.len() - w);
        buf[w..w + n].copy_from_slice(&b[..n]);
        w += n;
    };
    put(b"oomguard: memory allocation of ");
    let mut digits = [0u8; 20];
    let (mut i, mut v) = (digits.len(), size);
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    put(&digits[i..]);
    put(b" bytes failed (over the process's data limit)\n");
    w
}

/// A new mapping for a block of `size` bytes, advised to be huge pages if `huge` (else not to
/// be); null if none.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn map_block(size: usize, huge: bool) -> *mut u8 {
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
        let advice = if huge {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        libc::madvise(p, len, advice);
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
    // SAFETY: `p` starts `mapping_len(old)` bytes this allocator mapped and no one else holds,
    // all in one kernel area (a block's mapping, or part of one; the advice covers all of it);
    // the kernel keeps their contents and their advice.
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

/// (The `libc` crate has no `mremap` for Android: kept blocks are not grown there.)
#[cfg(not(target_os = "linux"))]
fn remap_block(_: *mut u8, _: usize, _: usize) -> *mut u8 {
    std::ptr::null_mut()
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn map_block(_: usize, _: bool) -> *mut u8 {
    unreachable!("mapped_block is false off Linux")
}
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn unmap_block(_: *mut u8, _: usize) {
    unreachable!("mapped_block is false off Linux")
}

#[cfg(test)]
pub(crate) mod tests;
