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
mod tests {
    use super::*;
    use hprof::strip_bytes;

    /// A stand-in for the VM's dumper: opens the path with open64 and writes the bytes in
    /// chunks of varying size from several threads, one after the other (as HotSpot's writer
    /// threads do), then closes. `other` is written at the same time by an unrelated thread.
    const SRC: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <string.h>
struct job { int fd; const char *buf; size_t len; size_t pos; pthread_mutex_t mu; int chunk; };
static void *worker(void *p) {
    struct job *j = p;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        if (j->pos >= j->len) { pthread_mutex_unlock(&j->mu); return 0; }
        size_t n = (size_t)(j->chunk = j->chunk * 7 % 65521 + 1);
        if (n > j->len - j->pos) n = j->len - j->pos;
        while (n > 0) {
            ssize_t w = write(j->fd, j->buf + j->pos, n);
            if (w <= 0) { pthread_mutex_unlock(&j->mu); return 0; }
            j->pos += w; n -= w;
        }
        pthread_mutex_unlock(&j->mu);
    }
}
static void *noise(void *p) {
    int fd = *(int *)p;
    for (int i = 0; i < 2000; i++) write(fd, "x", 1);
    return 0;
}
int vm_dump(const char *path, const char *buf, size_t len, int other) {
    int fd = open64(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    struct job j = { fd, buf, len, 0, PTHREAD_MUTEX_INITIALIZER, 3 };
    pthread_t t[3], n;
    pthread_create(&n, 0, noise, &other);
    for (int i = 0; i < 3; i++) pthread_create(&t[i], 0, worker, &j);
    for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
    pthread_join(n, 0);
    return close(fd);
}
"#;

    type DumpFn = extern "C" fn(*const c_char, *const u8, usize, c_int) -> c_int;

    #[test]
    fn tee_copies_the_dump_and_strips_it_while_written() {
        let _one = test_lock();
        let dir = tempfile::tempdir().unwrap();
        let so = crate::hook::build_c_lib(dir.path(), "libteevm", SRC, &["-Wl,-z,now", "-pthread"]);
        // SAFETY: `vm_dump` has this signature in SRC.
        let vm_dump: DumpFn = unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "vm_dump")) };
        let input =
            std::fs::read(crate::hook::tests_fixture("jvm/heapdump_hashmap.hprof")).unwrap();
        let (want_mini, _) = strip_bytes(&input, Level::Arrays).unwrap();

        let tee = Tee::install(&["libnot-loaded.so", "libteevm.so"]).unwrap();
        assert!(matches!(
            Tee::install(&["libteevm.so"]),
            Err(Error::AlreadyInstalled)
        ));
        assert_eq!(tee.libraries().len(), 1);
        for round in 0..3 {
            let full = dir.path().join(format!("full{round}.hprof"));
            let mini = dir.path().join(format!("mini{round}.hprof"));
            let other = dir.path().join(format!("other{round}"));
            // Inline, then through rings small enough to wrap and fill many times.
            let cfg = TeeConfig {
                full_path: full.clone(),
                mini_path: Some(mini.clone()),
                level: Level::Arrays,
                keep_full: true,
                ring_bytes: [0, 4096, 256 << 10][round],
            };
            tee.arm(&cfg).unwrap();
            assert!(tee.arm(&cfg).is_err());
            let of = std::fs::File::create(&other).unwrap();
            let cpath = CString::new(full.to_str().unwrap()).unwrap();
            use std::os::fd::AsRawFd;
            assert_eq!(
                vm_dump(cpath.as_ptr(), input.as_ptr(), input.len(), of.as_raw_fd()),
                0
            );
            let rep = tee.disarm(Some(&mini));
            assert!(rep.opened && rep.closed, "{rep:?}");
            assert_eq!(rep.caught_by.len(), 1, "{rep:?}");
            assert!(rep.caught_by[0].ends_with("/libteevm.so"));
            assert_eq!(rep.full_bytes, input.len() as u64);
            let stats = rep.mini.unwrap().unwrap();
            assert!(stats.arrays_stripped > 0);
            assert!(std::fs::read(&full).unwrap() == input, "full file differs");
            assert!(
                std::fs::read(&mini).unwrap() == want_mini,
                "mini file differs"
            );
            assert_eq!(std::fs::read(&other).unwrap(), vec![b'x'; 2000]);
        }

        // A dump the stripper cannot parse: the mini file is abandoned, the full file is intact.
        let sink = std::fs::File::create(dir.path().join("noise")).unwrap();
        use std::os::fd::AsRawFd;
        let noise = sink.as_raw_fd();
        let full = dir.path().join("bad.hprof");
        let mini = dir.path().join("bad.mini.hprof");
        let mut bad = input.clone();
        bad[31] = 0x77; // an unknown top-level tag right after the 31-byte header
        tee.arm(&TeeConfig {
            full_path: full.clone(),
            mini_path: Some(mini.clone()),
            level: Level::Arrays,
            keep_full: true,
            ring_bytes: 8192,
        })
        .unwrap();
        let cpath = CString::new(full.to_str().unwrap()).unwrap();
        assert_eq!(vm_dump(cpath.as_ptr(), bad.as_ptr(), bad.len(), noise), 0);
        let rep = tee.disarm(Some(&mini));
        let why = rep.mini.unwrap().unwrap_err();
        assert!(why.starts_with("stripper: byte 31"), "{why}");
        assert!(!mini.exists());
        assert!(std::fs::read(&full).unwrap() == bad);

        // Not keeping the full file: the VM's file stays empty, the mini file is complete.
        let full = dir.path().join("nofull.hprof");
        let mini = dir.path().join("nofull.mini.hprof");
        tee.arm(&TeeConfig {
            full_path: full.clone(),
            mini_path: Some(mini.clone()),
            level: Level::Arrays,
            keep_full: false,
            ring_bytes: 1 << 20,
        })
        .unwrap();
        let cpath = CString::new(full.to_str().unwrap()).unwrap();
        assert_eq!(
            vm_dump(cpath.as_ptr(), input.as_ptr(), input.len(), noise),
            0
        );
        let rep = tee.disarm(Some(&mini));
        assert!(rep.mini.unwrap().is_ok());
        assert_eq!(std::fs::metadata(&full).unwrap().len(), 0);
        assert!(std::fs::read(&mini).unwrap() == want_mini);

        // After uninstall nothing is teed.
        tee.uninstall().unwrap();
        let full = dir.path().join("after.hprof");
        let cpath = CString::new(full.to_str().unwrap()).unwrap();
        assert_eq!(
            vm_dump(cpath.as_ptr(), input.as_ptr(), input.len(), noise),
            0
        );
        assert!(std::fs::read(&full).unwrap() == input);
    }

    /// bionic's fdsan close, which glibc lacks: a library of its own, as libc is on Android.
    const FDSAN_SHIM: &str = r#"
#include <stdint.h>
#include <unistd.h>
int android_fdsan_close_with_tag(int fd, uint64_t expected_tag) { (void)expected_tag; return close(fd); }
"#;

    /// A stand-in for ART's dumper: the dump file is closed through the fdsan close (as
    /// `art::hprof` does through `unique_fd`), then its number is reused for another file.
    /// The errno a successful write leaves must be what it was before the write.
    const SRC_FDSAN: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>
int android_fdsan_close_with_tag(int fd, uint64_t expected_tag);
int art_dump(const char *path, const char *buf, size_t len, const char *other, int *errno_after) {
    int fd = open64(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    size_t pos = 0;
    *errno_after = -1;
    while (pos < len) {
        size_t n = len - pos > 8192 ? 8192 : len - pos;
        errno = EINTR;
        ssize_t w = write(fd, buf + pos, n);
        if (w <= 0) return -2;
        if (*errno_after == -1 || errno != EINTR) *errno_after = errno;
        pos += (size_t)w;
    }
    if (android_fdsan_close_with_tag(fd, 0x1234) != 0) return -3;
    int o = open64(other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0) return -4;
    if (o != fd) { if (dup2(o, fd) != fd) return -5; close(o); }
    if (write(fd, "not the dump", 12) != 12) return -6;
    return close(fd);
}
"#;

    type ArtDumpFn =
        extern "C" fn(*const c_char, *const u8, usize, *const c_char, *mut c_int) -> c_int;

    #[test]
    fn fdsan_close_disarms_the_dump_fd_and_swallowed_writes_keep_errno() {
        let _one = test_lock();
        let dir = tempfile::tempdir().unwrap();
        crate::hook::build_c_lib(dir.path(), "libfdsan_shim", FDSAN_SHIM, &[]);
        let d = dir.path().to_str().unwrap();
        let so = crate::hook::build_c_lib(
            dir.path(),
            "libartvm",
            SRC_FDSAN,
            &[
                "-Wl,-z,now",
                "-L",
                d,
                "-lfdsan_shim",
                &format!("-Wl,-rpath,{d}"),
            ],
        );
        // SAFETY: `art_dump` has this signature in SRC_FDSAN.
        let art_dump: ArtDumpFn =
            unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "art_dump")) };
        let input =
            std::fs::read(crate::hook::tests_fixture("jvm/heapdump_hashmap.hprof")).unwrap();
        let (want_mini, _) = strip_bytes(&input, Level::Arrays).unwrap();
        let tee = Tee::install(&["libartvm.so"]).unwrap();
        let full = dir.path().join("art.hprof");
        let mini = dir.path().join("art.mini.hprof");
        let other = dir.path().join("other");
        tee.arm(&TeeConfig {
            full_path: full.clone(),
            mini_path: Some(mini.clone()),
            level: Level::Arrays,
            keep_full: false,
            ring_bytes: 0,
        })
        .unwrap();
        let cpath = CString::new(full.to_str().unwrap()).unwrap();
        let cother = CString::new(other.to_str().unwrap()).unwrap();
        let mut errno_after = 0;
        let r = art_dump(
            cpath.as_ptr(),
            input.as_ptr(),
            input.len(),
            cother.as_ptr(),
            &mut errno_after,
        );
        let rep = tee.disarm(Some(&mini));
        tee.uninstall().unwrap();
        assert_eq!(r, 0);
        assert_eq!(
            errno_after,
            libc::EINTR,
            "a swallowed write that succeeded changed errno"
        );
        assert_eq!(
            std::fs::read(&other).unwrap(),
            b"not the dump",
            "a write on the dump's reused fd number was swallowed"
        );
        assert!(rep.opened && rep.closed, "{rep:?}");
        assert_eq!(rep.full_bytes, input.len() as u64);
        assert!(rep.mini.unwrap().is_ok());
        assert!(std::fs::read(&mini).unwrap() == want_mini);
        assert_eq!(std::fs::metadata(&full).unwrap().len(), 0);
    }

    static CHAINED_WRITES: AtomicUsize = AtomicUsize::new(0);

    /// Another hooker's `write`, in the slot before the tee is installed.
    unsafe extern "C" fn chained_write(fd: c_int, buf: *const c_void, n: usize) -> isize {
        CHAINED_WRITES.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the caller's arguments, passed on.
        unsafe { libc::write(fd, buf, n) }
    }

    /// A dumper among other files: it writes nothing to stdout before and after the dump, opens
    /// and writes another file before it, fails to create the dump path once (it exists),
    /// closes the other file in the middle of the dump. Through `open` and `openat`, not
    /// `open64`.
    const SRC_AROUND: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
int dump_around(const char *path, const char *buf, size_t len, int *excl_errno) {
    (void)!write(1, buf, 0);
    int other = openat(AT_FDCWD, "/dev/null", O_WRONLY);
    if (other < 0) return -1;
    if (write(other, "noise", 5) != 5) return -9;
    errno = 0;
    if (open(path, O_WRONLY | O_CREAT | O_EXCL, 0644) >= 0) return -2;
    *excl_errno = errno;
    if (unlink(path) != 0) return -3;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -4;
    size_t half = len / 2;
    if (write(fd, buf, half) != (ssize_t)half) return -5;
    if (close(other) != 0) return -6;
    if (write(fd, buf + half, len - half) != (ssize_t)(len - half)) return -7;
    if (close(fd) != 0) return -8;
    (void)!write(1, buf, 0);
    return 0;
}
"#;

    type AroundFn = extern "C" fn(*const c_char, *const u8, usize, *mut c_int) -> c_int;

    /// The dump fd is the one a successful open of the dump path returned, from then until it
    /// is closed: not a file opened before it, not a failed open of the path, not stdout before
    /// or after it; closing another file does not end it. The tee forwards to the function the
    /// slot held, another hooker's here.
    #[test]
    fn the_dump_is_the_fd_its_open_returned_until_closed_and_writes_go_on_to_the_next_hooker() {
        let _one = test_lock();
        let dir = tempfile::tempdir().unwrap();
        let so = crate::hook::build_c_lib(dir.path(), "libteearound", SRC_AROUND, &["-Wl,-z,now"]);
        // SAFETY: `dump_around` has this signature in SRC_AROUND.
        let dump_around: AroundFn =
            unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "dump_around")) };
        let input =
            std::fs::read(crate::hook::tests_fixture("jvm/heapdump_hashmap.hprof")).unwrap();
        let (want_mini, _) = strip_bytes(&input, Level::Arrays).unwrap();
        let other = patch_library(
            "libteearound.so",
            &[Import {
                name: "write",
                replacement: chained_write as *const () as usize,
            }],
            &mut |_, _| {},
        )
        .unwrap();
        let tee = Tee::install(&["libteearound.so"]).unwrap();
        assert_eq!(tee.libraries(), vec![so.to_str().unwrap().to_string()]);
        let full = dir.path().join("around.hprof");
        let mini = dir.path().join("around.mini.hprof");
        std::fs::write(&full, b"").unwrap();
        tee.arm(&TeeConfig {
            full_path: full.clone(),
            mini_path: Some(mini.clone()),
            level: Level::Arrays,
            keep_full: true,
            ring_bytes: 0,
        })
        .unwrap();
        CHAINED_WRITES.store(0, Ordering::SeqCst);
        let cpath = CString::new(full.to_str().unwrap()).unwrap();
        let mut excl_errno = 0;
        let r = dump_around(cpath.as_ptr(), input.as_ptr(), input.len(), &mut excl_errno);
        let rep = tee.disarm(Some(&mini));
        let chained = CHAINED_WRITES.load(Ordering::SeqCst);
        tee.uninstall().unwrap();
        other.unpatch().unwrap();
        assert_eq!(r, 0);
        assert_eq!(excl_errno, libc::EEXIST, "the failed open's errno");
        assert_eq!(chained, 5, "every write reaches the other hooker");
        assert_eq!(rep.caught_by, vec![so.to_str().unwrap().to_string()]);
        assert!(rep.opened && rep.closed, "{rep:?}");
        assert_eq!(rep.writes, 2);
        assert_eq!(rep.full_bytes, input.len() as u64);
        assert!(rep.mini.unwrap().is_ok());
        assert!(std::fs::read(&full).unwrap() == input, "full file differs");
        assert!(
            std::fs::read(&mini).unwrap() == want_mini,
            "mini file differs"
        );
    }

    /// The smallest dumper: one `open64`, one `write`, one `close`.
    const SRC_ONE: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>
int dump(const char *path, const char *buf, size_t len) {
    int fd = open64(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    if (write(fd, buf, len) != (ssize_t)len) return -2;
    return close(fd);
}
"#;

    type OneFn = extern "C" fn(*const c_char, *const u8, usize) -> c_int;

    #[test]
    fn each_of_eight_libraries_has_hooks_of_its_own() {
        let _one = test_lock();
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        let mut dumps = Vec::new();
        for k in 0..MAX_LIBS {
            let so = crate::hook::build_c_lib(
                dir.path(),
                &format!("libteelib{k}"),
                SRC_ONE,
                &["-Wl,-z,now"],
            );
            // SAFETY: `dump` has this signature in SRC_ONE.
            dumps.push(unsafe {
                std::mem::transmute::<usize, OneFn>(crate::hook::dl_fn(&so, "dump"))
            });
            paths.push(so.to_str().unwrap().to_string());
        }
        let names: Vec<String> = (0..MAX_LIBS).map(|k| format!("libteelib{k}.so")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let tee = Tee::install(&names).unwrap();
        assert_eq!(tee.libraries(), paths);
        let input = b"JAVA PROFILE 1.0.2\0: no mini file, never parsed";
        for (k, dump) in dumps.iter().enumerate() {
            let full = dir.path().join(format!("full{k}"));
            tee.arm(&TeeConfig {
                full_path: full.clone(),
                mini_path: None,
                level: Level::Arrays,
                keep_full: true,
                ring_bytes: 0,
            })
            .unwrap();
            let cpath = CString::new(full.to_str().unwrap()).unwrap();
            assert_eq!(dump(cpath.as_ptr(), input.as_ptr(), input.len()), 0);
            let rep = tee.disarm(None);
            assert_eq!(rep.caught_by, vec![paths[k].clone()], "library {k}");
            assert_eq!(
                (rep.opened, rep.closed, rep.writes, rep.full_bytes),
                (true, true, 1, input.len() as u64)
            );
            assert!(rep.mini.is_none());
            assert_eq!(std::fs::read(&full).unwrap(), input);
        }
        tee.uninstall().unwrap();
    }

    /// How many threads of this process are named `name`, once `want` are or after 5 s.
    fn threads_named(name: &str, want: usize) -> usize {
        let count = || {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter(|t| {
                    let comm = t.as_ref().unwrap().path().join("comm");
                    std::fs::read_to_string(comm).is_ok_and(|c| c.trim_end() == name)
                })
                .count()
        };
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let n = count();
            if n == want || std::time::Instant::now() > until {
                return n;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// A ring strips on a thread of its own; a mini file armed but never opened is abandoned
    /// and removed.
    #[test]
    fn a_ring_strips_on_a_thread_of_its_own_and_an_unopened_dump_leaves_no_mini_file() {
        let _one = test_lock();
        let dir = tempfile::tempdir().unwrap();
        let tee = Tee { libs: Vec::new() };
        let mini = dir.path().join("mini.hprof");
        for ring_bytes in [1, 4096] {
            tee.arm(&TeeConfig {
                full_path: dir.path().join("full.hprof"),
                mini_path: Some(mini.clone()),
                level: Level::Arrays,
                keep_full: true,
                ring_bytes,
            })
            .unwrap();
            assert_eq!(threads_named("oomguard-strip", 1), 1, "{ring_bytes}");
            assert!(mini.exists());
            let rep = tee.disarm(Some(&mini));
            assert_eq!(
                rep.mini.unwrap().unwrap_err(),
                "no hooked library opened the dump path"
            );
            assert!(!mini.exists());
            assert_eq!(threads_named("oomguard-strip", 0), 0);
        }
    }

    /// The parent of a fork dumper drops the armed state and leaves the mini file to the child.
    #[test]
    fn discard_drops_the_armed_state_and_leaves_the_mini_file() {
        let _one = test_lock();
        let dir = tempfile::tempdir().unwrap();
        let tee = Tee { libs: Vec::new() };
        let mini = dir.path().join("mini.hprof");
        let cfg = TeeConfig {
            full_path: dir.path().join("full.hprof"),
            mini_path: Some(mini.clone()),
            level: Level::Arrays,
            keep_full: true,
            ring_bytes: 4096,
        };
        tee.arm(&cfg).unwrap();
        tee.discard();
        assert!(mini.exists());
        assert_eq!(threads_named("oomguard-strip", 0), 0);
        tee.arm(&cfg).unwrap();
        tee.discard();
        let rep = tee.disarm(Some(&mini));
        assert!(!rep.opened && rep.mini.is_none(), "{rep:?}");
        assert!(mini.exists());
    }

    /// A thread of the parent inside a hook at the fork leaves the child's copy of the spin
    /// flag held by a thread the child does not have: the child frees it first.
    #[test]
    fn a_forked_child_frees_the_spin_flag_a_thread_of_the_parent_held() {
        let _one = test_lock();
        let _fork = crate::child::fork_test_lock();
        let tee = Tee { libs: Vec::new() };
        // As if a hook were running on another thread at the fork.
        LOCK.store(true, Ordering::Release);
        // SAFETY: the child only touches atomics and calls alarm and _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: async-signal-safe calls in the forked child.
            unsafe { libc::alarm(5) };
            Tee::reset_lock_in_child();
            let code = tee.finish_in_child().code;
            // SAFETY: as above.
            unsafe { libc::_exit(code) };
        }
        LOCK.store(false, Ordering::Release);
        assert!(pid > 0);
        let mut status = 0;
        // SAFETY: our child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "status {status:#x}");
        assert_eq!(libc::WEXITSTATUS(status), 2, "no dump was armed");
    }

    /// ART's dumper: armed with no ring, then forked; the child's VM dumps through the hooks,
    /// here to fd 0 (a process that closed its stdin), and the child finishes the mini file
    /// itself, with no thread of its own to lose at the fork. The parent only discards.
    #[test]
    fn a_forked_child_strips_inside_the_hook_and_finishes_the_mini_file_on_fd_0() {
        let _one = test_lock();
        let _fork = crate::child::fork_test_lock();
        let dir = tempfile::tempdir().unwrap();
        let so = crate::hook::build_c_lib(dir.path(), "libteechild", SRC_ONE, &["-Wl,-z,now"]);
        // SAFETY: `dump` has this signature in SRC_ONE.
        let dump: OneFn = unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "dump")) };
        let input =
            std::fs::read(crate::hook::tests_fixture("jvm/heapdump_hashmap.hprof")).unwrap();
        let (want_mini, _) = strip_bytes(&input, Level::Arrays).unwrap();
        let tee = Tee::install(&["libteechild.so"]).unwrap();
        let full = dir.path().join("child.hprof");
        let mini = dir.path().join("child.mini.hprof");
        tee.arm(&TeeConfig {
            full_path: full.clone(),
            mini_path: Some(mini.clone()),
            level: Level::Arrays,
            keep_full: true,
            ring_bytes: 0,
        })
        .unwrap();
        let cpath = CString::new(full.to_str().unwrap()).unwrap();
        // SAFETY: the child closes fd 0, calls the stand-in dumper and the tee's child
        // functions (written for a forked child), and leaves by _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                libc::alarm(10);
                libc::close(0);
            }
            let r = dump(cpath.as_ptr(), input.as_ptr(), input.len());
            let f = tee.finish_in_child();
            let ok = r == 0 && f.full_bytes == input.len() as u64 && f.mini.is_some();
            // SAFETY: as above.
            unsafe { libc::_exit(if ok { f.code } else { 10 + f.code }) };
        }
        assert!(pid > 0);
        tee.discard();
        let mut status = 0;
        // SAFETY: our child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        tee.uninstall().unwrap();
        assert!(libc::WIFEXITED(status), "status {status:#x}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "the child's finish");
        assert!(std::fs::read(&full).unwrap() == input, "full file differs");
        assert!(
            std::fs::read(&mini).unwrap() == want_mini,
            "mini file differs"
        );
    }

    /// The spin flag held elsewhere (a hook on another thread): `with_state` spins, then
    /// yields, until it is free, and only then runs.
    #[test]
    fn the_state_is_reached_once_the_spin_flag_is_free() {
        let _one = test_lock();
        LOCK.store(true, Ordering::Release);
        let waiter = std::thread::spawn(|| with_state(|st| st.is_none()));
        std::thread::sleep(std::time::Duration::from_millis(50));
        let early = waiter.is_finished();
        LOCK.store(false, Ordering::Release);
        assert!(!early, "ran while the flag was held");
        assert!(waiter.join().unwrap(), "no dump is armed");
    }
}
