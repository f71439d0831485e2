//! File-backed scratch arrays for the analysis child: large arrays whose pages live in a file in
//! a directory the caller names (the app's cache directory on a phone), mapped shared, so that
//! the kernel can write them back and drop them under memory pressure instead of counting them
//! as the process's own anonymous memory (issue 43: the analysis's budget counts `RssAnon`;
//! `RLIMIT_DATA` does not count shared file maps either).
//!
//! Writable file maps: `mapped` maps no file writable because a store into a page a full disk
//! cannot back raises SIGBUS, which would kill the app. Scratch arrays are for the analysis
//! child only (a process of its own: the command line, or the agent's forked analyser), and each
//! file's blocks are written with zeros before it is mapped (see `reserve`), so a full disk is
//! an error return here, not a signal later. (A copy-on-write file system may still need a
//! block at a rewrite; the child would then die of SIGBUS, which the agent counts as a failed
//! analysis, never the app's death.)
//!
//! Invariants:
//! - Each file is unlinked before it is mapped (created with `O_TMPFILE` where the file system
//!   allows, else named, then removed at once): nothing is left behind, even if the process is
//!   killed.
//! - A [`Scratch`] counts the bytes it has handed out and refuses past its cap
//!   ([`Scratch::new`]), with an error naming the directory. The files of dropped arrays it
//!   keeps for the next ones (`Kept`) count against the cap too, and are given up before a
//!   request is refused.
//! - Arrays hold only [`Plain`] types (every bit pattern a value, no padding, no pointers), so a
//!   slice over the file's bytes is always valid; a new array reads as zeros.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

mod buf;
mod stretched;
pub use buf::{extend_in_parts, Buf, GROW_MIN, PREFAULT_BYTES};
pub use stretched::{Stretched, Writer};

/// Types a scratch array may hold: plain numbers and arrays of them.
///
/// # Safety
/// Every bit pattern of `size_of::<Self>()` bytes must be a valid value, the type must have no
/// padding and no pointers, and its alignment must be at most 4096 (a page).
pub unsafe trait Plain: Copy + Send + Sync + 'static {}

// SAFETY: integers: every bit pattern is a value, no padding, alignment at most 8.
unsafe impl Plain for u8 {}
// SAFETY: as above.
unsafe impl Plain for u16 {}
// SAFETY: as above.
unsafe impl Plain for u32 {}
// SAFETY: as above.
unsafe impl Plain for u64 {}
// SAFETY: arrays of a plain type without padding between elements (size is a multiple of the
// alignment for these) are plain.
unsafe impl<const N: usize> Plain for [u32; N] {}
// SAFETY: as above.
unsafe impl<const N: usize> Plain for [u64; N] {}

/// Whether every byte of `x` is zero (a [`Plain`] value has no padding to ask about).
pub fn is_zero<T: Plain>(x: &T) -> bool {
    // SAFETY: `x` is `size_of::<T>()` readable bytes, every one of them initialised (`Plain`:
    // no padding), borrowed for the call.
    #[allow(unsafe_code)]
    let bytes = unsafe {
        std::slice::from_raw_parts((x as *const T).cast::<u8>(), std::mem::size_of::<T>())
    };
    bytes.iter().all(|&b| b == 0)
}

// (The views below rely on these: std's `from_mut_slice` asks the same, and is not stable.)
const _: () = assert!(
    std::mem::align_of::<AtomicU32>() == std::mem::align_of::<u32>()
        && std::mem::size_of::<AtomicU32>() == std::mem::size_of::<u32>()
        && std::mem::align_of::<AtomicU8>() == std::mem::align_of::<u8>()
);

/// `s` as atomics, for threads that write its values side by side (the two-pass index's node
/// arrays, in memory or in a scratch file): while the view lives, `s` is reached only through
/// it.
pub fn atomic_u32s(s: &mut [u32]) -> &[AtomicU32] {
    // SAFETY: `AtomicU32` has the size, alignment and bit validity of `u32` (asserted above);
    // the exclusive borrow of `s` lasts as long as the view, so no plain access races an
    // atomic one.
    #[allow(unsafe_code)]
    unsafe {
        std::slice::from_raw_parts(s.as_mut_ptr() as *const AtomicU32, s.len())
    }
}

/// [`atomic_u32s`] for bytes.
pub fn atomic_u8s(s: &mut [u8]) -> &[AtomicU8] {
    // SAFETY: as in `atomic_u32s`, for `AtomicU8` and `u8`.
    #[allow(unsafe_code)]
    unsafe {
        std::slice::from_raw_parts(s.as_mut_ptr() as *const AtomicU8, s.len())
    }
}

/// Where scratch files go, and how many bytes they may take together.
#[derive(Clone)]
pub struct Scratch {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    cap: u64,
    books: Mutex<Kept>,
}

/// The bytes of the live arrays, and the mapped files of dropped arrays kept for the next ones.
///
/// Why: a page of a new scratch file costs a fault, a page the file system allocates and zeroes
/// (a hole read back), and a write fault that marks it dirty (`page_mkwrite`), several times an
/// anonymous page's fault; a dropped file's pages are then truncated. The analysis drops arrays
/// and makes others of like sizes at each phase (the scan's buffers, then the searches' arrays,
/// then the dominators'): 913 MB of files made for a peak of 560 MB live on a 10 M-object dump.
/// A kept file's pages are still mapped, so a new array over it is only written (zeros), with no
/// fault (as `mapped::HugePageAlloc` keeps freed blocks in memory).
///
/// The bound: the live arrays plus the kept files never take more than the live arrays did at
/// some moment (`peak`); a file made afresh gives up kept files, the smallest first, until that
/// holds. So the files take no more disk and page cache than the analysis's peak did.
struct Kept {
    /// Bytes (whole pages) of the live arrays.
    live: u64,
    /// The most `live` has been.
    peak: u64,
    /// The files kept, each with its map and its size in bytes (whole pages).
    files: Vec<(File, memmap2::MmapMut, u64)>,
}

impl Kept {
    /// Bytes of the files kept (a few files: added up when asked).
    fn kept(&self) -> u64 {
        self.files.iter().map(|f| f.2).sum()
    }

    /// The smallest kept file mapped over at least `bytes` bytes, no longer kept (its bytes
    /// now live).
    fn take(&mut self, bytes: usize) -> Option<(File, memmap2::MmapMut, u64)> {
        let i = (0..self.files.len())
            .filter(|&i| self.files[i].1.len() >= bytes)
            .min_by_key(|&i| self.files[i].2)?;
        let f = self.files.swap_remove(i);
        self.live += f.2;
        Some(f)
    }

    /// Count `more` live bytes (a new file or a grown one) within `cap`, giving up kept files
    /// if that makes room; `false` (nothing counted) if even that does not.
    fn add(&mut self, more: u64, cap: u64) -> bool {
        if self.live + more > cap {
            return false;
        }
        self.live += more;
        self.peak = self.peak.max(self.live);
        let bound = self.peak.min(cap);
        while self.live + self.kept() > bound {
            let Some(i) = (0..self.files.len()).min_by_key(|&i| self.files[i].2) else {
                break;
            };
            drop(self.files.swap_remove(i));
        }
        true
    }
}

impl Scratch {
    /// Scratch files in `dir` (which must exist and be writable), `cap` bytes at most in all.
    pub fn new(dir: &Path, cap: u64) -> io::Result<Scratch> {
        let meta = std::fs::metadata(dir)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a directory", dir.display()),
            ));
        }
        Ok(Scratch {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                cap,
                books: Mutex::new(Kept {
                    live: 0,
                    peak: 0,
                    files: Vec::new(),
                }),
            }),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Bytes of the live scratch arrays (each rounded up to whole pages).
    pub fn used(&self) -> u64 {
        self.inner.books().live
    }

    /// Bytes of the files of dropped arrays kept for the next ones (see `Kept`).
    pub fn kept(&self) -> u64 {
        self.inner.books().kept()
    }

    /// The most bytes the arrays may take together.
    pub fn cap(&self) -> u64 {
        self.inner.cap
    }

    /// A new array of `len` zeros.
    pub fn zeroed<T: Plain>(&self, len: usize) -> io::Result<ScratchVec<T>> {
        let raw = self.raw(bytes_of::<T>(len)?)?;
        Ok(ScratchVec {
            raw,
            len,
            _t: std::marker::PhantomData,
        })
    }

    /// `bytes` zeros: over a kept file if one is mapped over that many, else in a new file.
    /// (Not generic: one copy of this code in the library, whatever the arrays' types.)
    fn raw(&self, bytes: usize) -> io::Result<Raw> {
        let pages = whole_pages(bytes);
        let owner = self.inner.clone();
        if bytes > 0 {
            let kept = self.inner.books().take(bytes);
            if let Some((file, mut map, size)) = kept {
                // A new array reads as zeros: only its own bytes are written (a growth zeroes
                // what it adds).
                map[..bytes].fill(0);
                return Ok(Raw {
                    file: Some(file),
                    map: Some(map),
                    pages: size,
                    owner,
                });
            }
        }
        self.inner.count(pages)?;
        let made = self.map(bytes);
        if made.is_err() {
            self.inner.books().live -= pages;
        }
        made.map(|(file, map)| Raw {
            file,
            map,
            pages,
            owner,
        })
    }

    /// A new array holding a copy of `v`.
    pub fn copy_of<T: Plain>(&self, v: &[T]) -> io::Result<ScratchVec<T>> {
        let mut s = self.zeroed::<T>(v.len())?;
        s.copy_from_slice(v);
        Ok(s)
    }

    #[allow(clippy::type_complexity)]
    fn map(&self, bytes: usize) -> io::Result<(Option<File>, Option<memmap2::MmapMut>)> {
        if bytes == 0 {
            return Ok((None, None));
        }
        let dir = &self.inner.dir;
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", dir.display()));
        let f = unlinked_file(dir).map_err(named)?;
        reserve(&f, bytes as u64).map_err(named)?;
        // SAFETY: the file is this process's own, unlinked before it was mapped (no other
        // process can open it by name), its blocks reserved above; the map is shared with no
        // one else. Its bytes are only ever viewed as `Plain` values.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::MmapOptions::new().len(bytes).map_mut(&f) }.map_err(named)?;
        Ok((Some(f), Some(map)))
    }
}

impl Inner {
    fn books(&self) -> MutexGuard<'_, Kept> {
        self.books.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Count `more` bytes of live arrays, or say why they are refused (over the cap, once no
    /// kept file is left to give up).
    fn count(&self, more: u64) -> io::Result<()> {
        let mut b = self.books();
        if b.add(more, self.cap) {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!(
                "{}: scratch arrays would take {} bytes, over their cap of {}",
                self.dir.display(),
                b.live + more,
                self.cap
            ),
        ))
    }
}

/// A file of its own in `dir`, already unlinked.
fn unlinked_file(dir: &Path) -> io::Result<File> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let tmp = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
            .mode(0o600)
            .open(dir);
        if let Ok(f) = tmp {
            return Ok(f);
        }
    }
    named_unlinked_file(dir)
}

/// Names of the files [`named_unlinked_file`] makes, in turn.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// The name [`named_unlinked_file`] gives its `k`-th file (this process's id in it).
fn scratch_name(k: u64) -> String {
    format!("{SCRATCH_PREFIX}{}-{k}", std::process::id())
}

/// What [`scratch_name`]s start with.
const SCRATCH_PREFIX: &str = ".oomguard-scratch-";

/// A file of its own in `dir` where there is no `O_TMPFILE`: made under a fresh name (the next
/// of [`SEQ`] that is free), removed at once.
fn named_unlinked_file(dir: &Path) -> io::Result<File> {
    for _ in 0..100 {
        let path = dir.join(scratch_name(SEQ.fetch_add(1, Ordering::Relaxed)));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => {
                std::fs::remove_file(&path)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free scratch file name"))
}

/// Give `f` `len` bytes (it has at most that many) whose blocks the file system has granted:
/// zeros written from its end, so that a full disk is this call's error, not a signal at a
/// store through the map later. Written, not `fallocate`d: a reserved but unwritten extent reads
/// as a hole, and each page of it then costs the map a read fault that zero-fills it and a
/// write fault that marks it dirty; written pages are in the page cache already, in large
/// folios where the file system has them, which the map's faults take whole. On a 712 MB dump
/// (10 M objects) with scratch on ext4: page faults 147 K -> 72 K, the analysis's wall 0.90x.
fn reserve(f: &File, len: u64) -> io::Result<()> {
    let zeros = vec![0u8; 1 << 20];
    let mut w = f;
    let have = f.metadata()?.len().min(len);
    std::io::Seek::seek(&mut w, std::io::SeekFrom::Start(have))?;
    let mut left = len - have;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        w.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// `bytes` rounded up to whole 4 KiB pages: what an array of that many bytes is counted for.
fn whole_pages(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4096) * 4096
}

/// `len` values of `T` in bytes, or an error if that overflows.
fn bytes_of<T>(len: usize) -> io::Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| io::Error::other("scratch array: length overflows"))
}

/// A fixed-length array of `T` in a scratch file (see the module documentation). Dropping it
/// gives its file to the [`Scratch`] to keep for the next array, or unmaps it, and the file
/// system then frees it.
pub struct ScratchVec<T: Plain> {
    raw: Raw,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

/// A scratch array's file, its map and its size in bytes (whole pages), whatever the type of
/// its values.
struct Raw {
    file: Option<File>,
    map: Option<memmap2::MmapMut>,
    pages: u64,
    owner: Arc<Inner>,
}

impl<T: Plain> ScratchVec<T> {
    /// Grow to `len` elements (the new ones read as zeros): the file is extended (its new
    /// blocks reserved) and mapped again whole; the values stay in the file, nothing is copied.
    /// On failure (the cap, a full disk) the array is as it was.
    pub fn grow(&mut self, len: usize) -> io::Result<()> {
        if len <= self.len {
            return Ok(());
        }
        let size = std::mem::size_of::<T>();
        if self.raw.grow(self.len * size, bytes_of::<T>(len)?)? {
            self.len = len;
        }
        Ok(())
    }

    /// Keep the first `len` elements (nothing if `len` is not shorter). The file keeps its
    /// size, and the cap counts it whole until the array is dropped.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Advise the kernel that the pages are not needed soon (written back if dirty, then
    /// dropped from this process's RSS; their contents are kept).
    pub fn page_out(&self) {
        if let Some(m) = &self.raw.map {
            // SAFETY: the map is a shared file map: after MADV_DONTNEED its pages read back
            // from the file (dirty ones are written there first), so no value changes.
            #[allow(unsafe_code)]
            let _ = unsafe { m.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }
}

impl Raw {
    /// [`ScratchVec::grow`] from `had` bytes to `bytes`: whether the map now holds them (not
    /// an array without a file, which has nothing to grow).
    fn grow(&mut self, had: usize, bytes: usize) -> io::Result<bool> {
        let Some(file) = &self.file else {
            return Ok(false);
        };
        let pages = whole_pages(bytes);
        if let Some(m) = self.map.as_mut().filter(|m| m.len() >= bytes) {
            // A kept file larger than the array was (see `Kept`): its map holds the new values
            // already; they read as zeros once written so.
            m[had..bytes].fill(0);
            return Ok(true);
        }
        let more = pages.saturating_sub(self.pages);
        self.owner.count(more)?;
        let mapped = reserve(file, bytes as u64).and_then(|()| {
            // SAFETY: as in `Scratch::map`: this process's own unlinked file, its blocks
            // reserved above; the old map is dropped when this one replaces it, and nothing
            // borrows it (`&mut self`).
            #[allow(unsafe_code)]
            unsafe {
                memmap2::MmapOptions::new().len(bytes).map_mut(file)
            }
        });
        match mapped {
            Ok(m) => {
                self.map = Some(m);
                self.pages = self.pages.max(pages);
                Ok(true)
            }
            Err(e) => {
                self.owner.books().live -= more;
                Err(io::Error::new(
                    e.kind(),
                    format!("{}: {e}", self.owner.dir.display()),
                ))
            }
        }
    }
}

impl<T: Plain> std::ops::Deref for ScratchVec<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        match &self.raw.map {
            None => &[],
            // SAFETY: the map is page-aligned (so aligned for `T`), `len * size_of::<T>()`
            // bytes long, and lives as long as `self`; `T` is `Plain`, so any bytes are values.
            #[allow(unsafe_code)]
            Some(m) => unsafe { std::slice::from_raw_parts(m.as_ptr() as *const T, self.len) },
        }
    }
}

impl<T: Plain> std::ops::DerefMut for ScratchVec<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.raw.map {
            None => &mut [],
            // SAFETY: as in `deref`, and `&mut self` makes this the only view.
            #[allow(unsafe_code)]
            Some(m) => unsafe {
                std::slice::from_raw_parts_mut(m.as_mut_ptr() as *mut T, self.len)
            },
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let mut b = self.owner.books();
        b.live -= self.pages;
        // Kept for the next array (see `Kept`): the live bytes and the kept ones add up to what
        // they did, within the bound.
        if let (Some(f), Some(m)) = (self.file.take(), self.map.take()) {
            b.files.push((f, m, self.pages));
        }
    }
}

impl<T: Plain + std::fmt::Debug> std::fmt::Debug for ScratchVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScratchVec(len {})", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_zero_looks_at_every_byte() {
        assert!(is_zero(&0u8) && is_zero(&0u64) && is_zero(&[0u32; 3]));
        assert!(!is_zero(&1u8) && !is_zero(&(1u64 << 63)) && !is_zero(&[0u32, 0, 1]));
        assert!(!is_zero(&[1u64 << 40, 0]) && !is_zero(&u16::MAX));
    }

    /// The `Rss` and `Anonymous` kB of the mapping that holds address `at`, from
    /// `/proc/self/smaps`: this mapping's pages only, whatever other tests' threads allocate.
    fn mapping_kb(at: usize) -> (u64, u64) {
        let kb = |key| crate::smaps::kb(at, key).unwrap();
        (kb("Rss:"), kb("Anonymous:"))
    }

    #[test]
    fn arrays_read_zero_keep_what_is_written_and_leave_no_file() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 30).unwrap();
        let mut a = s.zeroed::<u32>(100_000).unwrap();
        assert!(a.iter().all(|&x| x == 0));
        for (i, x) in a.iter_mut().enumerate() {
            *x = i as u32 * 3;
        }
        a.page_out();
        assert_eq!(a[99_999], 99_999 * 3);
        let b = s.copy_of(&[[1u32, 2], [3, 4]]).unwrap();
        assert_eq!(&b[..], &[[1, 2], [3, 4]]);
        assert_eq!(s.used(), 401_408 + 4096);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "unlinked");
        drop(a);
        drop(b);
        assert_eq!(s.used(), 0);
        let e = s.zeroed::<u8>(0).unwrap();
        assert!(e.is_empty());
    }

    /// A dropped array's file is kept and mapped (see `Kept`): the next array that fits takes
    /// it and reads as zeros, its growth within the file too; a larger one made afresh past the
    /// peak gives the kept files up; and a file is taken only where its map holds the array.
    #[test]
    fn a_dropped_array_s_file_serves_the_next_one_which_reads_as_zeros() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 30).unwrap();
        let mut a = s.zeroed::<u32>(10_000).unwrap();
        a.fill(7);
        let at = a.as_ptr() as usize;
        drop(a);
        assert_eq!((s.used(), s.kept()), (0, 40_960));
        // Smaller, of another type: over the same pages, zeros.
        let mut b = s.zeroed::<u64>(1000).unwrap();
        assert_eq!(b.as_ptr() as usize, at, "the kept file was not taken");
        assert!(b.iter().all(|&x| x == 0), "old values show through");
        assert_eq!((s.used(), s.kept()), (40_960, 0));
        b[999] = 9;
        // Growing within the file: the values kept, the new ones zeros.
        b.grow(5000).unwrap();
        assert_eq!(b.as_ptr() as usize, at);
        assert_eq!((b[999], b.len()), (9, 5000));
        assert!(b[1000..].iter().all(|&x| x == 0), "old values show through");
        drop(b);
        // The peak was 40,960 bytes live: a new 1 MiB array goes past it, and the kept file is
        // given up.
        let big = s.zeroed::<u8>(1 << 20).unwrap();
        assert_eq!((s.used(), s.kept()), (1 << 20, 0));
        drop(big);
        assert_eq!(s.kept(), 1 << 20);
        // A file mapped over 5,000 bytes (two pages) is no room for 6,000 (also two pages).
        let s = Scratch::new(d.path(), 1 << 30).unwrap();
        let mut c = s.zeroed::<u8>(5000).unwrap();
        c.fill(1);
        drop(c);
        let e = s.zeroed::<u8>(6000).unwrap();
        assert!(e.iter().all(|&x| x == 0));
        assert_eq!((s.used(), s.kept()), (8192, 0));
    }

    #[test]
    fn an_array_grows_in_its_file_keeping_its_values() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 40 * 4096).unwrap();
        let mut a = s.zeroed::<u32>(1000).unwrap();
        a[999] = 5;
        a.grow(5000).unwrap();
        assert_eq!((a.len(), a[999], a[4999]), (5000, 5, 0));
        a[4999] = 6;
        assert_eq!(s.used(), 5 * 4096);
        let e = a.grow(1 << 20).unwrap_err();
        assert!(e.to_string().contains("over their cap"), "{e}");
        assert_eq!((a.len(), a[4999], s.used()), (5000, 6, 5 * 4096));
    }

    /// A full disk refuses an array (or its growth) with an error naming the directory, before
    /// anything is mapped: the pages of an array that was made are all backed, so stores into
    /// them never meet a full disk (SIGBUS).
    #[test]
    fn a_full_disk_refuses_an_array_before_it_is_mapped() {
        let test = "a_full_disk_refuses_an_array_before_it_is_mapped";
        let Some(disk) = testkit::disk::SmallDisk::mount(test, 1024) else {
            return;
        };
        let s = Scratch::new(disk.path(), 1 << 30).unwrap();
        let e = s.zeroed::<u8>(2 << 20).unwrap_err();
        assert!(
            e.to_string().contains(&disk.path().display().to_string()),
            "{e}"
        );
        assert_eq!(s.used(), 0, "a refused array is not counted");
        // The refused one's blocks are free again: an array of most of the disk is made, and
        // every page of it takes a store.
        let mut a = s.zeroed::<u8>(768 << 10).unwrap();
        disk.fill();
        a.fill(7);
        assert!(a.iter().all(|&b| b == 7));
        let e = a.grow(2 << 20).unwrap_err();
        assert!(
            e.to_string().contains(&disk.path().display().to_string()),
            "{e}"
        );
        assert_eq!((a.len(), a[0], s.used()), (768 << 10, 7, 768 << 10));
        disk.free();
        a.grow(900 << 10).unwrap();
        assert_eq!((a[(768 << 10) - 1], a[(900 << 10) - 1]), (7, 0));
    }

    #[test]
    fn the_cap_is_counted_and_refused_past_with_the_directory_named() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 3 * 4096).unwrap();
        let a = s.zeroed::<u8>(2 * 4096).unwrap();
        let e = s.zeroed::<u8>(4097).unwrap_err();
        assert!(
            e.to_string().contains(&d.path().display().to_string()),
            "{e}"
        );
        assert!(e.to_string().contains("over their cap"), "{e}");
        drop(a);
        s.zeroed::<u8>(3 * 4096).unwrap();
        let missing = d.path().join("nope");
        let e = Scratch::new(&missing, 1).err().unwrap();
        assert!(e.to_string().contains("nope"), "{e}");
    }

    /// The pages a scratch array fills are not the process's anonymous memory.
    #[test]
    fn filled_pages_are_not_anonymous_memory() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 30).unwrap();
        let mut a = s.zeroed::<u64>(32 << 20 >> 3).unwrap();
        for x in a.iter_mut() {
            *x = 7;
        }
        // The mapping's own pages (the process's RssAnon also counts what tests running beside
        // this one allocate): resident, and none of them anonymous.
        let (rss, anon) = mapping_kb(a.as_ptr() as usize);
        assert!(
            rss >= 16 << 10,
            "only {rss} KiB of 32 MiB written are resident"
        );
        assert_eq!(anon, 0, "{anon} KiB of the scratch mapping are anonymous");
        assert!(a.iter().all(|&x| x == 7));
    }

    /// Threads writing a scratch array's values through its atomic view side by side: each
    /// value lands, and the array reads them back once the view is gone.
    #[test]
    fn an_atomic_view_writes_into_the_array_from_several_threads() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 30).unwrap();
        let mut a = s.zeroed::<u32>(100_000).unwrap();
        let mut b = s.zeroed::<u8>(100_000).unwrap();
        {
            let (va, vb) = (atomic_u32s(&mut a), atomic_u8s(&mut b));
            std::thread::scope(|sc| {
                for t in 0..4u32 {
                    sc.spawn(move || {
                        for i in (t as usize..va.len()).step_by(4) {
                            va[i].store(i as u32 * 3, Ordering::Relaxed);
                            // (Every thread tries each byte: one wins.)
                            let _ = vb[i / 4 * 4].compare_exchange(
                                0,
                                1 + t as u8,
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            );
                        }
                    });
                }
            });
        }
        assert!(a.iter().enumerate().all(|(i, &x)| x == i as u32 * 3));
        assert!(b.iter().enumerate().all(|(i, &x)| (x != 0) == (i % 4 == 0)));
    }

    /// The books' cap: live bytes may reach it exactly, and not pass it by a byte, however few
    /// bytes are live.
    #[test]
    fn live_bytes_may_reach_the_cap_and_not_pass_it() {
        let mut k = Kept {
            live: 0,
            peak: 0,
            files: Vec::new(),
        };
        assert!(!k.add(4097, 4096), "one byte over the cap from nothing");
        assert!(k.add(4096, 4096), "the cap exactly");
        assert_eq!((k.live, k.peak), (4096, 4096));
        assert!(!k.add(1, 4096));
        assert_eq!(k.live, 4096, "a refused addition is not counted");
        let d = tempfile::tempdir().unwrap();
        assert_eq!(Scratch::new(d.path(), 12_345).unwrap().cap(), 12_345);
    }

    /// An array of no values takes no kept file: the file stays for an array that needs it.
    #[test]
    fn an_empty_array_leaves_the_kept_files_alone() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 30).unwrap();
        drop(s.zeroed::<u32>(2048).unwrap());
        assert_eq!(s.kept(), 8192);
        let e = s.zeroed::<u32>(0).unwrap();
        assert!(e.is_empty());
        assert_eq!((s.used(), s.kept()), (0, 8192));
    }

    /// Where the file system can make a file with no name (`O_TMPFILE`: tmpfs, ext4), a
    /// scratch file never has one, even for a moment (so nothing is left behind if the process
    /// is killed between making and removing it); elsewhere it gets a name that is removed.
    #[test]
    fn a_scratch_file_has_no_name_where_the_file_system_allows() {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let d = tempfile::tempdir().unwrap();
        let target = |f: &File| std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd()));
        let named = named_unlinked_file(d.path()).unwrap();
        let named = target(&named).unwrap().display().to_string();
        assert!(named.contains(SCRATCH_PREFIX), "{named}");
        let probe = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .open(d.path());
        if probe.is_err() {
            eprintln!("skipped: {} has no O_TMPFILE", d.path().display());
            return;
        }
        let f = unlinked_file(d.path()).unwrap();
        let unnamed = target(&f).unwrap().display().to_string();
        assert!(!unnamed.contains(SCRATCH_PREFIX), "{unnamed}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    /// Without `O_TMPFILE`, a name that is taken is passed over for the next; another error is
    /// the call's.
    #[test]
    fn a_named_scratch_file_passes_over_taken_names() {
        let d = tempfile::tempdir().unwrap();
        let next = SEQ.load(Ordering::Relaxed);
        let name = |k: u64| d.path().join(scratch_name(k));
        for k in next..next + 3 {
            std::fs::write(name(k), b"taken").unwrap();
        }
        let mut f = named_unlinked_file(d.path()).unwrap();
        f.write_all(b"mine").unwrap();
        for k in next..next + 3 {
            assert_eq!(std::fs::read(name(k)).unwrap(), b"taken");
        }
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 3);
        let e = named_unlinked_file(&d.path().join("missing")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    /// `truncate` keeps the first values and never lengthens; `page_out` gives the pages up
    /// (their values read back from the file); the debug form shows the length.
    #[test]
    fn truncating_paging_out_and_showing_an_array() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 30).unwrap();
        let mut a = s.zeroed::<u64>(1 << 20).unwrap();
        for (i, x) in a.iter_mut().enumerate() {
            *x = i as u64 + 1;
        }
        let (rss, _) = mapping_kb(a.as_ptr() as usize);
        assert!(rss >= 4 << 10, "{rss} KiB of 8 MiB written are resident");
        a.page_out();
        let (rss, _) = mapping_kb(a.as_ptr() as usize);
        assert!(rss < 1 << 10, "{rss} KiB stay resident after page_out");
        assert!(a.iter().enumerate().all(|(i, &x)| x == i as u64 + 1));
        a.truncate(3);
        assert_eq!(&a[..], &[1, 2, 3]);
        a.truncate(10);
        assert_eq!(a.len(), 3);
        assert_eq!(format!("{a:?}"), "ScratchVec(len 3)");
    }
}
