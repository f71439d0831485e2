//! File-backed scratch arrays for the analysis child: large arrays whose pages live in a file in
//! a directory the caller names (the app's cache directory on a phone), mapped shared, so that
//! the kernel can write them back and drop them under memory pressure instead of counting them
//! as the process's own anonymous memory (issue 43: the analysis's budget counts `RssAnon`;
//! `RLIMIT_DATA` does not count shared file maps either).
//!
//! Writable file maps: `mapped` maps no file writable because a store into a page a full disk
//! cannot back raises SIGBUS, which would kill the app. Scratch arrays are for the analysis
//! child only (a process of its own: the command line, or the agent's forked analyser), and each
//! file's blocks are reserved with `fallocate` (or written with zeros where the file system
//! cannot reserve) before it is mapped, so a full disk is an error return here, not a signal
//! later. (A copy-on-write file system may still need a block at a rewrite; the child would then
//! die of SIGBUS, which the agent counts as a failed analysis, never the app's death.)
//!
//! Invariants:
//! - Each file is unlinked before it is mapped (created with `O_TMPFILE` where the file system
//!   allows, else named, then removed at once): nothing is left behind, even if the process is
//!   killed.
//! - A [`Scratch`] counts the bytes it has handed out and refuses past its cap
//!   ([`Scratch::new`]), with an error naming the directory.
//! - Arrays hold only [`Plain`] types (every bit pattern a value, no padding, no pointers), so a
//!   slice over the file's bytes is always valid; a new array reads as zeros.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

mod buf;
pub use buf::{Buf, GROW_MIN};

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
    used: AtomicU64,
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
                used: AtomicU64::new(0),
            }),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Bytes of the live scratch arrays (each rounded up to whole pages).
    pub fn used(&self) -> u64 {
        self.inner.used.load(Ordering::Relaxed)
    }

    /// The most bytes the arrays may take together.
    pub fn cap(&self) -> u64 {
        self.inner.cap
    }

    /// A new array of `len` zeros.
    pub fn zeroed<T: Plain>(&self, len: usize) -> io::Result<ScratchVec<T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| io::Error::other("scratch array: length overflows"))?;
        let pages = (bytes as u64).div_ceil(4096) * 4096;
        let before = self.inner.used.fetch_add(pages, Ordering::Relaxed);
        if before + pages > self.inner.cap {
            self.inner.used.fetch_sub(pages, Ordering::Relaxed);
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "{}: scratch arrays would take {} bytes, over their cap of {}",
                    self.inner.dir.display(),
                    before + pages,
                    self.inner.cap
                ),
            ));
        }
        let made = self.map(len, bytes);
        if made.is_err() {
            self.inner.used.fetch_sub(pages, Ordering::Relaxed);
        }
        made.map(|(file, map)| ScratchVec {
            file,
            map,
            len,
            pages,
            owner: self.inner.clone(),
            _t: std::marker::PhantomData,
        })
    }

    /// A new array holding a copy of `v`.
    pub fn copy_of<T: Plain>(&self, v: &[T]) -> io::Result<ScratchVec<T>> {
        let mut s = self.zeroed::<T>(v.len())?;
        s.copy_from_slice(v);
        Ok(s)
    }

    #[allow(clippy::type_complexity)]
    fn map(
        &self,
        len: usize,
        bytes: usize,
    ) -> io::Result<(Option<File>, Option<memmap2::MmapMut>)> {
        if len == 0 || bytes == 0 {
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
    // A file system without O_TMPFILE: a fresh name, removed at once.
    static SEQ: AtomicU64 = AtomicU64::new(0);
    for _ in 0..100 {
        let k = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".oomguard-scratch-{}-{k}", std::process::id()));
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

/// Give `f` `len` bytes whose blocks are on disk: `fallocate`, else zeros written.
fn reserve(f: &File, len: u64) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // (fallocate64: `off_t` is 32 bits on 32-bit Android and glibc.)
        let len64 = libc::off64_t::try_from(len).map_err(io::Error::other)?;
        // SAFETY: plain system call on an fd this function borrows; no memory is passed.
        #[allow(unsafe_code)]
        let r = unsafe { libc::fallocate64(f.as_raw_fd(), 0, 0, len64) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if !matches!(
            e.raw_os_error(),
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS)
        ) {
            return Err(e);
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = f.as_raw_fd();
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

/// A fixed-length array of `T` in a scratch file (see the module documentation). Dropping it
/// unmaps the file, which the file system then frees.
pub struct ScratchVec<T: Plain> {
    file: Option<File>,
    map: Option<memmap2::MmapMut>,
    len: usize,
    pages: u64,
    owner: Arc<Inner>,
    _t: std::marker::PhantomData<T>,
}

impl<T: Plain> ScratchVec<T> {
    /// Grow to `len` elements (the new ones read as zeros): the file is extended (its new
    /// blocks reserved) and mapped again whole; the values stay in the file, nothing is copied.
    /// On failure (the cap, a full disk) the array is as it was.
    pub fn grow(&mut self, len: usize) -> io::Result<()> {
        let file = match &self.file {
            Some(f) if len > self.len => f,
            _ => return Ok(()),
        };
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| io::Error::other("scratch array: length overflows"))?;
        let pages = (bytes as u64).div_ceil(4096) * 4096;
        let more = pages.saturating_sub(self.pages);
        let before = self.owner.used.fetch_add(more, Ordering::Relaxed);
        if before + more > self.owner.cap {
            self.owner.used.fetch_sub(more, Ordering::Relaxed);
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "{}: scratch arrays would take {} bytes, over their cap of {}",
                    self.owner.dir.display(),
                    before + more,
                    self.owner.cap
                ),
            ));
        }
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
                self.len = len;
                self.pages = self.pages.max(pages);
                Ok(())
            }
            Err(e) => {
                self.owner.used.fetch_sub(more, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// Keep the first `len` elements (nothing if `len` is not shorter). The file keeps its
    /// size, and the cap counts it whole until the array is dropped.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Advise the kernel that the pages are not needed soon (written back if dirty, then
    /// dropped from this process's RSS; their contents are kept).
    pub fn page_out(&self) {
        if let Some(m) = &self.map {
            // SAFETY: the map is a shared file map: after MADV_DONTNEED its pages read back
            // from the file (dirty ones are written there first), so no value changes.
            #[allow(unsafe_code)]
            let _ = unsafe { m.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }
}

impl<T: Plain> std::ops::Deref for ScratchVec<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        match &self.map {
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
        match &mut self.map {
            None => &mut [],
            // SAFETY: as in `deref`, and `&mut self` makes this the only view.
            #[allow(unsafe_code)]
            Some(m) => unsafe {
                std::slice::from_raw_parts_mut(m.as_mut_ptr() as *mut T, self.len)
            },
        }
    }
}

impl<T: Plain> Drop for ScratchVec<T> {
    fn drop(&mut self) {
        self.owner.used.fetch_sub(self.pages, Ordering::Relaxed);
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

    /// The `Rss` and `Anonymous` kB of the mapping that holds address `at`, from
    /// `/proc/self/smaps`: this mapping's pages only, whatever other tests' threads allocate.
    fn mapping_kb(at: usize) -> (u64, u64) {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        let (mut rss, mut anon) = (None, None);
        for l in smaps.lines() {
            let head = l.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = head.split_once('-').filter(|_| !head.ends_with(':')) {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    if inside {
                        break;
                    }
                    inside = a <= at && at < b;
                    continue;
                }
            }
            if inside {
                let kb = || l.split_whitespace().nth(1).and_then(|v| v.parse().ok());
                if l.starts_with("Rss:") {
                    rss = kb();
                } else if l.starts_with("Anonymous:") {
                    anon = kb();
                }
            }
        }
        (rss.unwrap(), anon.unwrap())
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
}
