//! The dump tee: hooks on the VM's `open`, `open64`, `openat`, `openat64`, `write`, `close` and
//! `android_fdsan_close_with_tag`.
//!
//! Life cycle: [`Tee::install`] patches the imports of every listed library that is loaded;
//! [`Tee::arm`] names the dump path and sets up the mini file and its [`Stripper`] (all buffers
//! allocated here); the VM dumps; [`Tee::disarm`] finishes the mini file and reports; and
//! [`Tee::uninstall`] puts the original imports back.
//!
//! While armed, an `open*` of exactly the dump path records the fd it returned. A `write` on that
//! fd calls the real `write` (or, when the full file is not kept, pretends it wrote) and feeds the
//! bytes that were written to the stripper. HotSpot writes from several threads (GC workers and
//! the VM thread) inside a safepoint, so the state is behind a spin flag of our own; no VM lock,
//! no allocation, no logging inside the hooks. Errors are kept in the state and reported by
//! `disarm`, once.
//!
//! Each library gets its own instance of the hook functions (a const generic index), so the
//! report says which libraries' calls caught the dump.
//!
//! Fds: every fd a hook sees (`DUMP_FD`, the arguments of `write`, `close` and the fdsan close)
//! is the VM's, not ours: it stays a raw `c_int`, compared and passed through, and is never
//! wrapped in an `OwnedFd` (whose `Drop` would close a fd the VM still owns). The hooked
//! `close` calls the real one by hand, on the VM's behalf. The one fd the tee owns, the mini
//! file's, is a `std::fs::File` created by `arm` (outside any hook) and closed by its owner;
//! in a forked child it is deliberately leaked to the kernel (see `finish_in_child`).

use super::got::{patch_library, Import, Patched};
use super::ring::Ring;
use super::Error;
use hprof::{FileSink, Level, ParserLimits, StripStats, Stripper};
use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;

/// Most libraries hooked at once.
pub const MAX_LIBS: usize = 8;

const OPEN: usize = 0;
const OPEN64: usize = 1;
const OPENAT: usize = 2;
const OPENAT64: usize = 3;
const WRITE: usize = 4;
const CLOSE: usize = 5;
const FDSAN_CLOSE: usize = 6;
const NSYM: usize = 7;
/// ART closes the dump through `unique_fd`, i.e. bionic's `android_fdsan_close_with_tag`
/// (API 29+), not `close`: both are hooked so the dump fd is disarmed before its number can be
/// reused.
const NAMES: [&str; NSYM] = [
    "open",
    "open64",
    "openat",
    "openat64",
    "write",
    "close",
    "android_fdsan_close_with_tag",
];

/// Libraries whose imports catch the VM's heap dump, by runtime.
pub const HOTSPOT_LIBS: &[&str] = &["libjvm.so"];
pub const ART_LIBS: &[&str] = &["libart.so", "libartbase.so", "libbase.so", "libc.so"];

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicUsize = AtomicUsize::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const ROW: [AtomicUsize; NSYM] = [ZERO; NSYM];
/// The real function behind each (library, symbol).
static REAL: [[AtomicUsize; NSYM]; MAX_LIBS] = [ROW; MAX_LIBS];
#[allow(clippy::declare_interior_mutable_const)]
const NO: AtomicBool = AtomicBool::new(false);
/// Which library's hooks wrote to the dump fd since arming.
static CAUGHT: [AtomicBool; MAX_LIBS] = [NO; MAX_LIBS];

static INSTALLED: AtomicBool = AtomicBool::new(false);
static ARMED: AtomicBool = AtomicBool::new(false);
/// The dump's fd, -1 when none: read without the lock on every hooked write.
static DUMP_FD: AtomicI32 = AtomicI32::new(-1);
static LOCK: AtomicBool = AtomicBool::new(false);

struct Cell(UnsafeCell<Option<Armed>>);
// SAFETY: the contents are only touched while LOCK is held (see `with_state`).
unsafe impl Sync for Cell {}
static STATE: Cell = Cell(UnsafeCell::new(None));

/// What the hooks share while armed.
struct Armed {
    path: CString,
    keep_full: bool,
    /// The stripper, when it runs inside the hook (no helper thread: a forked child).
    stripper: Option<Stripper<FileSink>>,
    /// The ring to the stripper thread, when stripping is offloaded.
    ring: Option<Arc<Ring>>,
    worker: Option<std::thread::JoinHandle<Result<Stripper<FileSink>, String>>>,
    /// Why the mini file was abandoned (the first reason).
    abandoned: Option<String>,
    opened: bool,
    closed: bool,
    /// Bytes of the dump that went through the hooks (the full file's length).
    bytes: u64,
    /// Writes on the dump fd.
    writes: u64,
}

/// Run `f` on the shared state under our spin flag.
fn with_state<R>(f: impl FnOnce(&mut Option<Armed>) -> R) -> R {
    let mut spins = 0u32;
    while LOCK
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        spins += 1;
        if spins < 256 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    struct Unlock;
    impl Drop for Unlock {
        fn drop(&mut self) {
            LOCK.store(false, Ordering::Release);
        }
    }
    let _u = Unlock;
    // SAFETY: LOCK is held until `_u` drops, so this is the only reference to the state.
    f(unsafe { &mut *STATE.0.get() })
}

#[cfg(target_os = "android")]
fn errno_ptr() -> *mut c_int {
    // SAFETY: bionic's per-thread errno location, always valid.
    unsafe { libc::__errno() }
}
#[cfg(not(target_os = "android"))]
fn errno_ptr() -> *mut c_int {
    // SAFETY: glibc's per-thread errno location, always valid.
    unsafe { libc::__errno_location() }
}

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, c_uint) -> c_int;
type OpenatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint) -> c_int;
type WriteFn = unsafe extern "C" fn(c_int, *const c_void, usize) -> isize;
type CloseFn = unsafe extern "C" fn(c_int) -> c_int;
type FdsanCloseFn = unsafe extern "C" fn(c_int, u64) -> c_int;

fn real(lib: usize, sym: usize) -> usize {
    REAL[lib][sym].load(Ordering::Acquire)
}

/// Called after a successful open of `path` returned `fd`.
fn opened(path: *const c_char, fd: c_int) {
    if fd < 0 || path.is_null() || !ARMED.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: the VM passed a NUL-terminated path to open, which just succeeded with it.
    let p = unsafe { CStr::from_ptr(path) };
    with_state(|st| {
        if let Some(a) = st.as_mut() {
            if !a.opened && a.path.as_c_str() == p {
                a.opened = true;
                DUMP_FD.store(fd, Ordering::Release);
            }
        }
    });
}

/// [`opened`], with errno kept as the real call left it; returns `fd`.
fn after_open(path: *const c_char, fd: c_int) -> c_int {
    // SAFETY: errno of this thread, saved across our own work.
    let e = unsafe { *errno_ptr() };
    opened(path, fd);
    // SAFETY: restore errno as the real call left it.
    unsafe { *errno_ptr() = e };
    fd
}

/// The hook of `open` and of `open64` (`S`: which one's real function to call).
unsafe extern "C" fn h_open<const L: usize, const S: usize>(
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    let f = real(L, S);
    // SAFETY: REAL holds the resolved `open` or `open64` (set before the slot was patched); the
    // mode argument is passed in the same register whether or not the caller used the variadic
    // form.
    let fd = unsafe {
        if f == 0 {
            libc::open(path, flags, mode)
        } else {
            std::mem::transmute::<usize, OpenFn>(f)(path, flags, mode)
        }
    };
    after_open(path, fd)
}

/// The hook of `openat` and of `openat64` (`S`: which one's real function to call).
unsafe extern "C" fn h_openat<const L: usize, const S: usize>(
    dir: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    let f = real(L, S);
    // SAFETY: as in `h_open`.
    let fd = unsafe {
        if f == 0 {
            libc::openat(dir, path, flags, mode)
        } else {
            std::mem::transmute::<usize, OpenatFn>(f)(dir, path, flags, mode)
        }
    };
    after_open(path, fd)
}

/// Called before the real close of `fd`: once closed, its number can be reused for another file.
fn closing(fd: c_int) {
    if fd >= 0 && fd == DUMP_FD.load(Ordering::Acquire) {
        with_state(|st| {
            if let Some(a) = st.as_mut() {
                a.closed = true;
            }
            DUMP_FD.store(-1, Ordering::Release);
        });
    }
}

/// The VM's `close`, passed through: `fd` is the VM's (never an `OwnedFd` of ours), closed by
/// hand on its behalf after [`closing`] forgot it.
unsafe extern "C" fn h_close<const L: usize>(fd: c_int) -> c_int {
    closing(fd);
    let f = real(L, CLOSE);
    // SAFETY: REAL holds the resolved `close`.
    unsafe {
        if f == 0 {
            libc::close(fd)
        } else {
            std::mem::transmute::<usize, CloseFn>(f)(fd)
        }
    }
}

/// As [`h_close`], for bionic's tagged close.
unsafe extern "C" fn h_fdsan_close<const L: usize>(fd: c_int, tag: u64) -> c_int {
    closing(fd);
    let f = real(L, FDSAN_CLOSE);
    // SAFETY: REAL holds the resolved `android_fdsan_close_with_tag` (set before the slot was
    // patched, so never 0 for a patched slot; plain close is the last resort).
    unsafe {
        if f == 0 {
            libc::close(fd)
        } else {
            std::mem::transmute::<usize, FdsanCloseFn>(f)(fd, tag)
        }
    }
}

unsafe extern "C" fn h_write<const L: usize>(fd: c_int, buf: *const c_void, count: usize) -> isize {
    let f = real(L, WRITE);
    let call = |fd: c_int, buf: *const c_void, count: usize| -> isize {
        // SAFETY: REAL holds the resolved `write`; the arguments are the VM's own.
        unsafe {
            if f == 0 {
                libc::write(fd, buf, count)
            } else {
                std::mem::transmute::<usize, WriteFn>(f)(fd, buf, count)
            }
        }
    };
    if fd < 0 || fd != DUMP_FD.load(Ordering::Acquire) {
        return call(fd, buf, count);
    }
    CAUGHT[L].store(true, Ordering::Relaxed);
    let mut ret = 0isize;
    // A write we swallow succeeds and so leaves errno as it was; a real call sets `err`.
    // SAFETY: errno of this thread.
    let mut err = unsafe { *errno_ptr() };
    with_state(|st| {
        let Some(a) = st.as_mut() else {
            ret = call(fd, buf, count);
            // SAFETY: errno of this thread.
            err = unsafe { *errno_ptr() };
            return;
        };
        if DUMP_FD.load(Ordering::Acquire) != fd {
            // closed meanwhile: the fd now names something else
            ret = call(fd, buf, count);
            // SAFETY: errno of this thread.
            err = unsafe { *errno_ptr() };
            return;
        }
        if a.keep_full {
            if a.abandoned.is_none() && (a.stripper.is_some() || a.ring.is_some()) {
                // The tee is only right if the VM writes the file front to back.
                // SAFETY: lseek on the VM's open fd only reads its position.
                let pos = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) };
                if pos >= 0 && pos as u64 != a.bytes {
                    a.stripper = None;
                    a.abandoned.get_or_insert_with(|| {
                        format!(
                            "the VM wrote at offset {pos}, expected {}: not a sequential write",
                            a.bytes
                        )
                    });
                }
            }
            ret = call(fd, buf, count);
            // SAFETY: errno of this thread.
            err = unsafe { *errno_ptr() };
        } else {
            ret = count as isize;
        }
        a.writes += 1;
        if ret > 0 {
            let n = ret as usize;
            a.bytes += n as u64;
            if let (Some(r), None) = (a.ring.as_ref(), a.abandoned.as_ref()) {
                // SAFETY: `buf` holds `count >= n` readable bytes (the VM's write buffer).
                let data = unsafe { std::slice::from_raw_parts(buf as *const u8, n) };
                if !r.push(data) {
                    a.abandoned = Some("the stripper thread stopped".into());
                }
            }
            if let Some(s) = a.stripper.as_mut() {
                // SAFETY: `buf` holds `count >= n` readable bytes (the VM's write buffer).
                let data = unsafe { std::slice::from_raw_parts(buf as *const u8, n) };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.feed(data)));
                let why = match r {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(format!("stripper: {e}")),
                    Err(_) => Some("stripper panicked".to_string()),
                };
                if let Some(why) = why {
                    a.stripper = None;
                    a.abandoned.get_or_insert(why);
                }
            }
        }
    });
    // SAFETY: errno of this thread, as the real write left it.
    unsafe { *errno_ptr() = err };
    ret
}

fn table<const L: usize>() -> [usize; NSYM] {
    [
        h_open::<L, OPEN> as *const () as usize,
        h_open::<L, OPEN64> as *const () as usize,
        h_openat::<L, OPENAT> as *const () as usize,
        h_openat::<L, OPENAT64> as *const () as usize,
        h_write::<L> as *const () as usize,
        h_close::<L> as *const () as usize,
        h_fdsan_close::<L> as *const () as usize,
    ]
}

fn hooks(lib: usize) -> [usize; NSYM] {
    match lib {
        0 => table::<0>(),
        1 => table::<1>(),
        2 => table::<2>(),
        3 => table::<3>(),
        4 => table::<4>(),
        5 => table::<5>(),
        6 => table::<6>(),
        _ => table::<7>(),
    }
}

/// How one dump goes through the tee.
#[derive(Clone, Debug)]
pub struct TeeConfig {
    /// The path the VM is asked to dump to.
    pub full_path: PathBuf,
    /// Where the stripped copy goes; `None` for no mini file.
    pub mini_path: Option<PathBuf>,
    pub level: Level,
    /// Whether the VM's own file is written; if not, writes on it are swallowed (the VM still
    /// creates it, empty: the caller removes it).
    pub keep_full: bool,
    /// Strip on a thread of our own, fed through a ring of this many bytes (the hook only
    /// copies); 0 strips inside the hook (the only choice in a forked child, which has no
    /// other thread).
    pub ring_bytes: usize,
}

/// What the tee saw of one dump.
#[derive(Clone, Debug)]
pub struct TeeReport {
    /// The libraries whose hooks opened or wrote the dump.
    pub caught_by: Vec<String>,
    /// Whether a hooked `open` of the dump path was seen.
    pub opened: bool,
    pub closed: bool,
    /// Bytes the VM wrote to the dump.
    pub full_bytes: u64,
    pub writes: u64,
    /// The mini file's stats, or why it was abandoned (the file is then removed).
    pub mini: Option<Result<StripStats, String>>,
}

/// What [`Tee::finish_in_child`] found.
#[derive(Clone, Debug)]
pub struct ChildFinish {
    pub code: i32,
    pub full_bytes: u64,
    /// The complete mini file's stats.
    pub mini: Option<StripStats>,
}

/// The installed hooks. One per process.
#[derive(Debug)]
pub struct Tee {
    libs: Vec<Patched>,
}

impl Tee {
    /// Hook every library of `libs` that is loaded. Fails if none of them is.
    pub fn install(libs: &[&str]) -> Result<Tee, Error> {
        if INSTALLED.swap(true, Ordering::AcqRel) {
            return Err(Error::AlreadyInstalled);
        }
        let mut patched = Vec::new();
        let mut last_err = None;
        for name in libs {
            let idx = patched.len();
            if idx >= MAX_LIBS {
                break;
            }
            let hk = hooks(idx);
            let imports: Vec<Import> = (0..NSYM)
                .map(|i| Import {
                    name: NAMES[i],
                    replacement: hk[i],
                })
                .collect();
            let mut on_real = |n: &'static str, addr: usize| {
                if let Some(i) = NAMES.iter().position(|x| *x == n) {
                    REAL[idx][i].store(addr, Ordering::Release);
                }
            };
            match patch_library(name, &imports, &mut on_real) {
                Ok(p) => {
                    tracing::info!(library = %p.library, slots = p.slots.len(), "tee hooked");
                    patched.push(p)
                }
                Err(e) => {
                    tracing::debug!(library = %name, error = %e, "tee: not hooked");
                    last_err = Some(e);
                }
            }
        }
        if patched.is_empty() {
            INSTALLED.store(false, Ordering::Release);
            return Err(last_err.unwrap_or_else(|| Error::NotLoaded(libs.join(","))));
        }
        Ok(Tee { libs: patched })
    }

    /// The hooked libraries, as the loader names them.
    pub fn libraries(&self) -> Vec<String> {
        self.libs.iter().map(|p| p.library.clone()).collect()
    }

    /// Prepare for a dump to `cfg.full_path`: create the mini file and its stripper.
    pub fn arm(&self, cfg: &TeeConfig) -> Result<(), Error> {
        let path = cfg.full_path.to_string_lossy().into_owned();
        let c = CString::new(path.clone()).map_err(|_| Error::BadPath(path.clone()))?;
        let stripper = match &cfg.mini_path {
            Some(m) => {
                let file = std::fs::File::create(m).map_err(|err| Error::MiniFile {
                    path: m.display().to_string(),
                    err,
                })?;
                let limits = ParserLimits {
                    initial_head: 4 << 20,
                    ..ParserLimits::default()
                };
                Some(Stripper::with_buffers(
                    cfg.level,
                    FileSink { file },
                    limits,
                    1 << 20,
                ))
            }
            None => None,
        };
        let (stripper, ring, worker) = match stripper {
            Some(st) if cfg.ring_bytes > 0 => {
                let ring = Arc::new(Ring::new(cfg.ring_bytes));
                let r2 = ring.clone();
                let worker = std::thread::Builder::new()
                    .name("oomguard-strip".into())
                    .spawn(move || r2.run(st))
                    .map_err(|err| Error::MiniFile {
                        path: "(stripper thread)".into(),
                        err,
                    })?;
                (None, Some(ring), Some(worker))
            }
            other => (other, None, None),
        };
        let armed = Armed {
            path: c,
            keep_full: cfg.keep_full,
            stripper,
            ring,
            worker,
            abandoned: None,
            opened: false,
            closed: false,
            bytes: 0,
            writes: 0,
        };
        with_state(|st| {
            if let Some(a) = st.as_ref() {
                return Err(Error::AlreadyArmed(a.path.to_string_lossy().into_owned()));
            }
            for c in &CAUGHT {
                c.store(false, Ordering::Relaxed);
            }
            DUMP_FD.store(-1, Ordering::Release);
            *st = Some(armed);
            ARMED.store(true, Ordering::Release);
            Ok(())
        })
    }

    /// The dump is over: stop teeing, finish (or remove) the mini file and say what happened.
    pub fn disarm(&self, mini_path: Option<&Path>) -> TeeReport {
        let armed = with_state(|st| {
            ARMED.store(false, Ordering::Release);
            DUMP_FD.store(-1, Ordering::Release);
            st.take()
        });
        let caught_by = self
            .libs
            .iter()
            .enumerate()
            .filter(|(i, _)| CAUGHT[*i].load(Ordering::Relaxed))
            .map(|(_, p)| p.library.clone())
            .collect();
        let Some(a) = armed else {
            return TeeReport {
                caught_by,
                opened: false,
                closed: false,
                full_bytes: 0,
                writes: 0,
                mini: None,
            };
        };
        let mut a = a;
        if let Some(r) = &a.ring {
            r.closed.store(true, Ordering::Release);
        }
        if let Some(w) = a.worker.take() {
            match w.join() {
                Ok(Ok(st)) => a.stripper = Some(st),
                Ok(Err(why)) => {
                    // The thread's own reason says more than the hook's "thread stopped".
                    a.abandoned = Some(why);
                }
                Err(_) => {
                    a.abandoned
                        .get_or_insert("the stripper thread panicked".into());
                }
            }
        }
        let mini = match (a.stripper, a.abandoned) {
            (_, Some(why)) => Some(Err(why)),
            (None, None) => None,
            (Some(_), None) if !a.opened => {
                Some(Err("no hooked library opened the dump path".to_string()))
            }
            (Some(s), None) => match s.finish() {
                Ok((sink, stats)) => match sink.file.sync_all() {
                    Ok(()) => Some(Ok(stats)),
                    Err(e) => Some(Err(format!("fsync of the mini file: {e}"))),
                },
                Err(e) => Some(Err(format!("stripper at the end: {e}"))),
            },
        };
        if let Some(Err(why)) = &mini {
            if a.keep_full {
                tracing::warn!(dump = %a.path.to_string_lossy(), reason = %why, "mini file abandoned; the full dump is unaffected");
            } else {
                tracing::warn!(dump = %a.path.to_string_lossy(), reason = %why, "mini file abandoned, and the full dump is not kept: this dump leaves no file");
            }
            if let Some(m) = mini_path {
                let _ = std::fs::remove_file(m);
            }
        }
        TeeReport {
            caught_by,
            opened: a.opened,
            closed: a.closed,
            full_bytes: a.bytes,
            writes: a.writes,
            mini,
        }
    }

    /// In a forked dump child, after the VM's dumper returned: finish the mini file this
    /// process's copy of the tee was writing. `code` is 0 if the mini file is complete, 1 if it
    /// was abandoned (the caller then removes it), 2 if there was no mini file or no dump was
    /// seen; `full_bytes` counts the dump's bytes that went through the hooks (written or, with
    /// `keep_full` off, swallowed). Nothing is freed (the memory goes with the child): `free` in
    /// a forked child of a multi-threaded process could wait for a lock held by a thread that
    /// does not exist here.
    pub fn finish_in_child(&self) -> ChildFinish {
        let armed = with_state(|st| {
            ARMED.store(false, Ordering::Release);
            DUMP_FD.store(-1, Ordering::Release);
            st.take()
        });
        let Some(mut a) = armed else {
            return ChildFinish {
                code: 2,
                full_bytes: 0,
                mini: None,
            };
        };
        let full_bytes = a.bytes;
        if a.ring.is_some() {
            // The stripper thread was not forked with us: the mini file cannot be finished.
            std::mem::forget(a);
            return ChildFinish {
                code: 1,
                full_bytes,
                mini: None,
            };
        }
        let (code, mini) = match (a.stripper.take(), a.abandoned.is_some(), a.opened) {
            (Some(s), false, true) => match s.finish() {
                Ok((sink, stats)) => {
                    let ok = sink.file.sync_all().is_ok();
                    // Its buffers are not freed here; its fd is closed by the kernel when
                    // the child `_exit`s.
                    std::mem::forget(sink);
                    if ok {
                        (0, Some(stats))
                    } else {
                        (1, None)
                    }
                }
                Err(e) => {
                    std::mem::forget(e);
                    (1, None)
                }
            },
            (Some(s), _, _) => {
                std::mem::forget(s);
                (1, None)
            }
            (None, true, _) => (1, None),
            (None, false, _) => (2, None),
        };
        std::mem::forget(a);
        ChildFinish {
            code,
            full_bytes,
            mini,
        }
    }

    /// In a forked child, which has one thread, before anything else touches the tee: a
    /// thread of the parent that was inside a hook at the fork (a native thread opening a file
    /// while the tee was armed; the VM's suspension does not stop it) left the child's copy of
    /// the spin flag held by a thread that does not exist here. Before the fork no hook had
    /// the dump's fd yet, so such a holder only compared a path and changed nothing.
    pub fn reset_lock_in_child() {
        LOCK.store(false, Ordering::Release);
    }

    /// In the parent of a fork dumper: drop the armed state without touching the mini file
    /// (the child wrote it).
    pub fn discard(&self) {
        let armed = with_state(|st| {
            ARMED.store(false, Ordering::Release);
            DUMP_FD.store(-1, Ordering::Release);
            st.take()
        });
        if let Some(mut a) = armed {
            if let Some(r) = &a.ring {
                r.closed.store(true, Ordering::Release);
            }
            if let Some(w) = a.worker.take() {
                let _ = w.join();
            }
            // Dropping the stripper drops its FileSink: that only closes our fd.
            a.stripper = None;
        }
    }

    /// Put every original import back.
    pub fn uninstall(self) -> Result<(), Error> {
        let mut first = None;
        for p in self.libs {
            if let Err(e) = p.unpatch() {
                tracing::warn!(error = %e, "tee unhook");
                first.get_or_insert(e);
            }
        }
        INSTALLED.store(false, Ordering::Release);
        first.map_or(Ok(()), Err)
    }
}

/// Tests that install the tee (one per process) take this first.
#[cfg(test)]
pub(crate) fn test_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
