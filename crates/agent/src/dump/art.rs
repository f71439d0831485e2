//! The ART fork dumper (Android): suspend the VM, fork, resume at once; the child, a frozen
//! copy-on-write snapshot of the heap, calls `art::hprof::DumpHeap` directly (no JNI in the
//! child) through the tee, reports how the dump went, and `_exit`s.
//!
//! The VM-control functions are not exported to apps, so they are looked up in `libart.so`'s
//! own symbol tables ([`super::elfsym`]), read from the file the loader mapped, plus the load
//! bias: no `dlopen` of a system library, which Android 7+ namespaces refuse. What is called
//! depends on the API level, one function per sequence ([`ArtForkDumper`]'s `fork_dbg` and
//! `fork_suspend_all`):
//! - 21–29: `art::Dbg::SuspendVM()` before the fork, `art::Dbg::ResumeVM()` after.
//! - 30+: a `gc::ScopedGCCriticalSection` (no GC may start while we suspend), a
//!   `ScopedSuspendAll`; the mutator lock is released before the fork (the child's own
//!   `DumpHeap` takes it again). The critical section stays open across the fork: threads that
//!   wait to start a GC count as suspended, and one would start its GC the moment the section
//!   closed, so that the child's copy of the heap would say a GC runs, by a thread the child
//!   does not have, and its `DumpHeap` would wait for it until the deadline. The child ends its
//!   copy of the section first (its one thread is ours, so the section is its own), then
//!   dumps; the parent ends it after the suspension, as `DumpHeap` does. `Locks::
//!   thread_list_lock_` and `Locks::thread_suspend_count_lock_` are held across the `fork()`
//!   call itself and released right after in both processes, wherever their symbols resolve,
//!   because the child's `DumpHeap` suspends all threads again, which takes both: a thread the
//!   suspension does not stop (a native thread attaching; a thread leaving a wait, which checks
//!   its suspend count under the second lock before it parks) holding one at the fork would
//!   leave the child's copy held for ever. Found on ART 11 (`tests/art_faults.rs`): with six
//!   threads allocating in a 16 MiB heap, one or two of 50 dump children hung in
//!   `ThreadList::SuspendAll` on the suspend count lock. ART's own perfetto heap profiler
//!   (`perfetto_hprof.cc`, Android 12 to 14) forks inside its `ScopedSuspendAll` instead and
//!   dumps in the child without suspending again, so it needs neither lock; `DumpHeap` does
//!   suspend. After the fork the parent retakes the mutator lock, ends the suspension, then the
//!   critical section.
//!
//! The child, before anything else, frees its copy of the tee's spin flag (a native thread of
//! the parent may have held it at the fork), dumps, and writes a completion record to a pipe:
//! its exit code, the dump's byte count (the tee's count: with `dump.keep_full` off the VM's
//! own file stays empty) and the mini file's stats. The parent judges the dump by that record
//! and the exit code, not by the full file's size. Where the app took the child's exit status
//! (SIGCHLD ignored, a `waitpid(-1)` reaper), the record alone says whether it finished.
//! Both ends of that pipe are `OwnedFd`s the parent holds and closes by dropping them (the write
//! end right after the fork, the read end once the record is read), on every path; the child
//! only borrows the write end and `_exit`s without running destructors.
//!
//! `ScopedGCCriticalSection` takes a `GcCause` and a `CollectorType`. `kGcCauseHprof` is 15 in
//! Android 11 to 14 (`gc_cause.h`). `kCollectorTypeHprof` moved as the mark-compact collector
//! was added: 13 without it (Android 11–13), 14 with `kCollectorTypeCMC`, 15 once
//! `kCollectorTypeCMCBackground` followed (Android 14). ART is updated through Play since API
//! 31, so the API level does not say which: the library is probed. The mark-compact collector
//! has a symbol (`MarkCompact::RunPhases`), and ART's generated `operator<<` for the enum keeps
//! each value's name as a string in `.rodata` (`CollectorTypeCMC`, `CollectorTypeCMCBackground`).
//!
//! A missing symbol is reported as "unsupported on this runtime" by [`Dumper::check`], before
//! anything is suspended or forked; [`super::take`] then falls back as the policy says.
//!
//! Tested on Linux against a stand-in for libart (`tests/art_standin.rs`): a C++ library built
//! in the test that exports these symbols under their real mangled names, with real locks
//! that record the order of the calls and a `DumpHeap` that writes a real HPROF through
//! `open64`/`write`; and in Debian's ART 11 (`tests/art_agent.rs`, `tests/art_faults.rs`):
//! the API-30 sequence against the real runtime, its locks, lock checks and scoped objects,
//! with Java threads allocating meanwhile, 50 dumps in a row, a dump child killed, hung or
//! exiting non-zero in the middle of its dump, and the incident uploaded to a collector.
//! What neither can show: API 21–29's `Dbg::SuspendVM` against a real debugger state; ART 12
//! to 16 (Play-updated modules, the mark-compact collector, other layouts of the scoped
//! objects: 256 bytes are reserved for each); compiled code (the test runtime runs
//! interpreted, without a boot image, JIT or the runtime's daemon threads); bionic,
//! `android_fdsan`, linker namespaces, SELinux and a device's seccomp filter; `libsigchain`;
//! a zygote-forked app process; a low-memory killer choosing the dump child (the tests kill it
//! themselves); and a thread holding ART's `gc_complete_lock_` at the fork, which no symbol
//! reaches (a thread holds it only between taking it and waiting on the GC, a few
//! instructions; the child's deadline ends such a child).

use super::elfsym::ElfSymbols;
use super::{DumpOutcome, DumpRequest, Dumper, Error, Result, DUMP_CHILD_NAME};
use crate::child::{self, ChildEnd};
use crate::hook::{got::find_loaded, tee::ART_LIBS, Tee, TeeConfig};
use hprof::StripStats;
use std::ffi::{c_char, c_int, c_void, CString};
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

const DBG_SUSPEND_VM: &str = "_ZN3art3Dbg9SuspendVMEv";
const DBG_RESUME_VM: &str = "_ZN3art3Dbg8ResumeVMEv";
const SGC_CTOR: &str =
    "_ZN3art2gc23ScopedGCCriticalSectionC1EPNS_6ThreadENS0_7GcCauseENS0_13CollectorTypeE";
const SGC_DTOR: &str = "_ZN3art2gc23ScopedGCCriticalSectionD1Ev";
const SSA_CTOR: &str = "_ZN3art16ScopedSuspendAllC1EPKcb";
const SSA_DTOR: &str = "_ZN3art16ScopedSuspendAllD1Ev";
const DUMP_HEAP: &str = "_ZN3art5hprof8DumpHeapEPKcib";
const THREAD_CURRENT: &str = "_ZN3art6Thread14CurrentFromGdbEv";
const MUTATOR_LOCK: &str = "_ZN3art5Locks13mutator_lock_E";
const RW_LOCK: &str = "_ZN3art17ReaderWriterMutex13ExclusiveLockEPNS_6ThreadE";
const RW_UNLOCK: &str = "_ZN3art17ReaderWriterMutex15ExclusiveUnlockEPNS_6ThreadE";
const THREAD_LIST_LOCK: &str = "_ZN3art5Locks17thread_list_lock_E";
const SUSPEND_COUNT_LOCK: &str = "_ZN3art5Locks26thread_suspend_count_lock_E";
const MUTEX_LOCK: &str = "_ZN3art5Mutex13ExclusiveLockEPNS_6ThreadE";
const MUTEX_UNLOCK: &str = "_ZN3art5Mutex15ExclusiveUnlockEPNS_6ThreadE";
/// `art::gc::collector::MarkCompact::RunPhases()`: the mark-compact collector is built in.
const MARK_COMPACT: &str = "_ZN3art2gc9collector11MarkCompact9RunPhasesEv";

/// `art::gc::kGcCauseHprof` (Android 11 to 14).
pub const GC_CAUSE_HPROF: c_int = 15;

/// The child's exit codes, shared with [`ArtForkDumper::dump`]'s judgement.
pub mod exit {
    /// The dump is complete, and so is the mini file if one was asked for.
    pub const DUMPED: i32 = 0;
    /// The VM's dump went through, the mini file was abandoned (the full file may be kept).
    pub const MINI_ABANDONED: i32 = 10;
    /// The VM's dumper returned, but no hooked library wrote the dump.
    pub const NOTHING_SEEN: i32 = 11;
}

/// The symbols each API level needs.
pub fn required_symbols(api: u32) -> Vec<&'static str> {
    let mut v = vec![DUMP_HEAP];
    if api < 30 {
        v.extend([DBG_SUSPEND_VM, DBG_RESUME_VM]);
    } else {
        v.extend([
            THREAD_CURRENT,
            SGC_CTOR,
            SGC_DTOR,
            SSA_CTOR,
            SSA_DTOR,
            MUTATOR_LOCK,
            RW_LOCK,
            RW_UNLOCK,
        ]);
    }
    v
}

/// The symbols used where they resolve: the thread list lock and the thread suspend count
/// lock held across the fork (API 30+), each with `Mutex`'s lock and unlock.
pub fn optional_symbols(api: u32) -> Vec<&'static str> {
    if api < 30 {
        Vec::new()
    } else {
        vec![
            THREAD_LIST_LOCK,
            SUSPEND_COUNT_LOCK,
            MUTEX_LOCK,
            MUTEX_UNLOCK,
        ]
    }
}

/// `kCollectorTypeHprof` in an ART that has (or not) the mark-compact collector and its
/// background twin.
pub fn collector_type_hprof(mark_compact: bool, cmc_background: bool) -> c_int {
    match (mark_compact, cmc_background) {
        (_, true) => 15,
        (true, false) => 14,
        (false, false) => 13,
    }
}

/// Resolved addresses (load bias added) and what the library's ART version needs.
#[derive(Debug, Clone)]
pub struct ArtSymbols {
    pub library: String,
    addrs: Vec<(&'static str, usize)>,
    /// `kCollectorTypeHprof` of this ART.
    pub collector_hprof: c_int,
}

impl ArtSymbols {
    /// The address of `name`, if it resolved.
    fn get(&self, name: &str) -> Option<usize> {
        self.addrs.iter().find(|(n, _)| *n == name).map(|&(_, a)| a)
    }

    fn must(&self, name: &str) -> usize {
        self.get(name).unwrap_or(0)
    }
}

/// Whether the file at `path` holds `needle` (an ART enum name with its NUL), read through a
/// read-only mapping (no copy of a library of tens of MB on the heap of an app short of it).
fn file_holds(path: &std::path::Path, needles: &[&[u8]]) -> Vec<bool> {
    let Ok(f) = std::fs::File::open(path) else {
        return vec![false; needles.len()];
    };
    // SAFETY: a read-only private mapping of a system library that nobody writes while it is
    // loaded; it is dropped before we return.
    let Ok(map) = (unsafe { memmap2::Mmap::map(&f) }) else {
        return vec![false; needles.len()];
    };
    needles
        .iter()
        .map(|n| !n.is_empty() && map.windows(n.len()).any(|w| w == *n))
        .collect()
}

/// Look the symbols for `api` up in the loaded library `lib` (by file name).
pub fn resolve(lib: &str, api: u32) -> Result<ArtSymbols> {
    let (path, bias) = find_loaded(lib)
        .ok_or_else(|| Error::Unsupported(format!("{lib} is not loaded in this process")))?;
    let elf = ElfSymbols::open(std::path::Path::new(&path))?;
    let names = required_symbols(api);
    let found = elf.lookup_many(&names)?;
    let missing: Vec<&str> = names
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.is_none())
        .map(|(n, _)| *n)
        .collect();
    if !missing.is_empty() {
        return Err(Error::Unsupported(format!(
            "{path} (API {api}) lacks {}",
            missing.join(", ")
        )));
    }
    let mut addrs: Vec<(&'static str, usize)> = names
        .iter()
        .zip(found)
        .map(|(n, f)| (*n, bias + f.map_or(0, |s| s.value as usize)))
        .collect();
    let optional = optional_symbols(api);
    // Optional: a section that cannot be read (a corrupt MiniDebugInfo) leaves them unresolved.
    let opt_found = elf.lookup_many(&optional).unwrap_or_else(|e| {
        tracing::warn!("{e}");
        vec![None; optional.len()]
    });
    for (n, f) in optional.iter().zip(opt_found) {
        match f {
            Some(f) => addrs.push((*n, bias + f.value as usize)),
            None => {
                tracing::warn!(library = %path, api, symbol = n, "does not resolve: the lock is not held across the fork (a dump child may then hang until its deadline)")
            }
        }
    }
    let mut collector_hprof = 0;
    if api >= 30 {
        let mark_compact_sym = elf.lookup(MARK_COMPACT).ok().flatten().is_some();
        let strings = file_holds(
            std::path::Path::new(&path),
            &[b"CollectorTypeCMC\0", b"CollectorTypeCMCBackground\0"],
        );
        collector_hprof = collector_type_hprof(mark_compact_sym || strings[0], strings[1]);
        tracing::info!(library = %path, mark_compact = mark_compact_sym || strings[0], cmc_background = strings[1], collector_hprof, "ART's kCollectorTypeHprof");
    }
    Ok(ArtSymbols {
        library: path,
        addrs,
        collector_hprof,
    })
}

/// Storage for one C++ scoped object ART constructs in place (larger than any version's).
#[repr(C, align(16))]
struct Opaque([u8; 256]);

/// The ART fork dumper.
pub struct ArtForkDumper {
    api: u32,
    syms: Option<ArtSymbols>,
    tee: Option<Tee>,
    sgc: Box<Opaque>,
    ssa: Box<Opaque>,
    phases: Option<PausePhases>,
}

/// Where the app's pause of the last API 30+ fork dump went (the benchmark prints it).
#[derive(Clone, Copy, Debug)]
pub struct PausePhases {
    /// From asking for the GC critical section to holding it: ART's `StartGC` waits there for
    /// a running GC or heap trim (the heap task daemon's) to finish. The app's threads run
    /// meanwhile (an allocating one blocks only if it needs a GC itself), so the dump reports
    /// it as `DumpOutcome::gc_wait`, apart from its pause.
    pub gc_wait: Duration,
    /// From holding the GC critical section to every Java thread suspended.
    pub suspend: Duration,
    /// `fork()` itself (the kernel copying the page tables), as the parent sees it.
    pub fork: Duration,
    /// From the fork's return to the suspension's end.
    pub resume: Duration,
}

type VoidFn = unsafe extern "C" fn();
type SelfFn = unsafe extern "C" fn() -> *mut c_void;
type SgcCtor = unsafe extern "C" fn(*mut c_void, *mut c_void, c_int, c_int);
type DtorFn = unsafe extern "C" fn(*mut c_void);
type SsaCtor = unsafe extern "C" fn(*mut c_void, *const c_char, bool);
type LockFn = unsafe extern "C" fn(*mut c_void, *mut c_void);
type DumpHeapFn = unsafe extern "C" fn(*const c_char, c_int, bool);

/// What the dump child reports through its pipe: magic, exit code, the dump's bytes, whether
/// the mini file is complete, then its [`StripStats`]. One write of less than `PIPE_BUF`.
const REPORT_WORDS: usize = 11;
const REPORT_MAGIC: u64 = 0x6f6f_6d67_6172_6401;

/// The child's completion record.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ChildReport {
    code: i32,
    full_bytes: u64,
    mini: Option<StripStats>,
}

impl ChildReport {
    fn encode(&self) -> [u64; REPORT_WORDS] {
        let m = self.mini.clone().unwrap_or_default();
        [
            REPORT_MAGIC,
            self.code as u64,
            self.full_bytes,
            self.mini.is_some() as u64,
            m.input_bytes,
            m.output_bytes,
            m.arrays_stripped,
            m.array_bytes_removed,
            m.objects_dropped,
            m.objects_kept_in_dropped_heaps,
            m.holder_roots,
        ]
    }

    fn decode(w: &[u64; REPORT_WORDS]) -> Option<ChildReport> {
        (w[0] == REPORT_MAGIC).then(|| ChildReport {
            code: w[1] as i32,
            full_bytes: w[2],
            mini: (w[3] != 0).then(|| StripStats {
                input_bytes: w[4],
                output_bytes: w[5],
                arrays_stripped: w[6],
                array_bytes_removed: w[7],
                objects_dropped: w[8],
                objects_kept_in_dropped_heaps: w[9],
                holder_roots: w[10],
            }),
        })
    }
}

/// A pipe for the child's record: both ends close on exec, each closed by its owner.
fn report_pipe() -> Result<(OwnedFd, OwnedFd)> {
    sys::fd::pipe().map_err(|e| Error::Sys(format!("pipe for the dump child's report: {e}")))
}

/// Read the child's record after it ended (whatever it wrote is in the pipe); `fd`, the read
/// end, is closed on return.
fn read_report(fd: OwnedFd) -> Option<ChildReport> {
    let mut words = [0u64; REPORT_WORDS];
    let len = std::mem::size_of_val(&words);
    // Non-blocking: a child killed before it wrote leaves nothing, and another process holding
    // a copy of the write end must not make us wait.
    if sys::fd::set_nonblocking(fd.as_fd()).is_err() {
        return None;
    }
    let mut f = std::fs::File::from(fd);
    let mut bytes = [0u8; REPORT_WORDS * 8];
    let mut got = 0usize;
    while got < len {
        match f.read(&mut bytes[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    if got != len {
        return None;
    }
    for (w, b) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *w = u64::from_ne_bytes(b.try_into().ok()?);
    }
    ChildReport::decode(&words)
}

/// What the dump child needs, prepared before the fork.
struct ChildJob<'a> {
    dump_heap: usize,
    path: &'a CString,
    keep_full: bool,
    tee: Option<&'a Tee>,
    /// The pipe's write end, borrowed: the parent owns it (the child `_exit`s without
    /// running destructors, so its copy is closed by the kernel at exit).
    report_fd: BorrowedFd<'a>,
}

impl ChildJob<'_> {
    /// In the child: dump, finish the mini file, write the completion record. Returns the
    /// exit code ([`exit`]). Only system calls and the tee's child path: no JNI, no locks of
    /// the app's.
    fn run(&self) -> i32 {
        Tee::reset_lock_in_child();
        // SAFETY: ART's own dumper, resolved for this process's libart, called with the
        // signature AOSP declares; it writes the file through the (inherited) tee.
        unsafe {
            std::mem::transmute::<usize, DumpHeapFn>(self.dump_heap)(self.path.as_ptr(), -1, false)
        };
        let file_bytes = || {
            // SAFETY: a zeroed stat buffer and a NUL-terminated path.
            unsafe {
                let mut st: libc::stat = std::mem::zeroed();
                if libc::stat(self.path.as_ptr(), &mut st) == 0 {
                    st.st_size as u64
                } else {
                    0
                }
            }
        };
        let report = match self.tee {
            None => ChildReport {
                code: exit::DUMPED,
                full_bytes: file_bytes(),
                mini: None,
            },
            Some(t) => {
                let f = t.finish_in_child();
                let full_bytes = if self.keep_full {
                    file_bytes()
                } else {
                    f.full_bytes
                };
                let code = match f.code {
                    0 => exit::DUMPED,
                    1 => exit::MINI_ABANDONED,
                    _ if self.keep_full && full_bytes > 0 => exit::MINI_ABANDONED,
                    _ => exit::NOTHING_SEEN,
                };
                ChildReport {
                    code,
                    full_bytes,
                    mini: f.mini,
                }
            }
        };
        let words = report.encode();
        // SAFETY: the pipe's write end and a buffer of the record's size.
        unsafe {
            libc::write(
                self.report_fd.as_raw_fd(),
                words.as_ptr() as *const c_void,
                std::mem::size_of_val(&words),
            )
        };
        report.code
    }
}

/// Run `art::hprof::DumpHeap(path, -1, false)` on the calling thread, in this process: what
/// `VMDebug.dumpHprofData(path)` does. ART suspends every Java thread for the whole dump. For
/// the benchmark of the fork dumper (`jni::probe_art`, `scripts/bench/dump/art.sh`).
///
/// # Safety
/// On a thread attached to ART and in its native state (inside a JNI native method), with
/// `syms` resolved for this process's libart.
pub unsafe fn dump_heap_in_process(syms: &ArtSymbols, path: &std::ffi::CStr) {
    // SAFETY: ART's own dumper, resolved for this process's libart (the caller's promise),
    // called with the signature AOSP declares, from a thread in the state its JNI natives have.
    unsafe {
        std::mem::transmute::<usize, DumpHeapFn>(syms.must(DUMP_HEAP))(path.as_ptr(), -1, false)
    }
}

impl ArtForkDumper {
    /// `api`: `Build.VERSION.SDK_INT`, read by the caller through JNI.
    pub fn new(api: u32) -> ArtForkDumper {
        ArtForkDumper {
            api,
            syms: None,
            tee: None,
            sgc: Box::new(Opaque([0; 256])),
            ssa: Box::new(Opaque([0; 256])),
            phases: None,
        }
    }

    /// The phases of the last API 30+ dump's pause.
    pub fn last_pause_phases(&self) -> Option<PausePhases> {
        self.phases
    }

    /// API 21–29: suspend the VM through the debugger's entry points, fork, resume. Returns
    /// the child and how long the app was stopped.
    ///
    /// # Safety
    /// On an attached Java thread, with this API level's symbols.
    unsafe fn fork_dbg(
        &mut self,
        s: &ArtSymbols,
        alarm: u32,
        child: impl FnOnce() -> i32,
    ) -> (child::Result<child::Child>, Duration) {
        // SAFETY: addresses resolved from this process's libart.so for this API level, called
        // with the signatures AOSP declares for them.
        unsafe {
            let paused = Instant::now();
            std::mem::transmute::<usize, VoidFn>(s.must(DBG_SUSPEND_VM))();
            let forked = child::spawn(DUMP_CHILD_NAME, alarm, child);
            std::mem::transmute::<usize, VoidFn>(s.must(DBG_RESUME_VM))();
            (forked, paused.elapsed())
        }
    }

    /// API 30+: stop the VM (no GC running, every Java thread suspended), fork with the GC
    /// critical section open and the thread list and suspend count locks held, resume. Returns
    /// the child and how long the app was stopped.
    ///
    /// # Safety
    /// On an attached Java thread, with this API level's symbols.
    unsafe fn fork_suspend_all(
        &mut self,
        s: &ArtSymbols,
        alarm: u32,
        child: impl FnOnce() -> i32,
    ) -> (child::Result<child::Child>, Duration) {
        let sgc = self.sgc.0.as_mut_ptr() as *mut c_void;
        let ssa = self.ssa.0.as_mut_ptr() as *mut c_void;
        let mutex_fns = s.get(MUTEX_LOCK).zip(s.get(MUTEX_UNLOCK));
        // In ART's lock order: the thread list lock before the suspend count lock.
        let locks: Vec<usize> = [THREAD_LIST_LOCK, SUSPEND_COUNT_LOCK]
            .iter()
            .filter_map(|n| s.get(n))
            .filter(|_| mutex_fns.is_some())
            .collect();
        // SAFETY: (all calls) addresses resolved from this process's libart.so for this API
        // level, called with the signatures AOSP declares for them; `Locks::*_lock_` are
        // pointers to the lock objects.
        unsafe {
            let me = std::mem::transmute::<usize, SelfFn>(s.must(THREAD_CURRENT))();
            // The app is paused from the moment its threads are asked to stop.
            let paused = Instant::now();
            // 1. No GC may start, then every Java thread suspended.
            std::mem::transmute::<usize, SgcCtor>(s.must(SGC_CTOR))(
                sgc,
                me,
                GC_CAUSE_HPROF,
                s.collector_hprof,
            );
            let section = Instant::now();
            std::mem::transmute::<usize, SsaCtor>(s.must(SSA_CTOR))(
                ssa,
                c"oomguard-dump".as_ptr(),
                true,
            );
            let suspended = Instant::now();
            // 2. Release the mutator lock, which the child's own DumpHeap takes again. The GC
            //    critical section stays open: a thread waiting to start a GC (it counts as
            //    suspended) would start it the moment the section closed, and the child's copy
            //    of the heap would then say a GC runs, by a thread it does not have.
            let mutator = *(s.must(MUTATOR_LOCK) as *const *mut c_void);
            std::mem::transmute::<usize, LockFn>(s.must(RW_UNLOCK))(mutator, me);
            // 3. The thread list and suspend count locks held by us across the fork, released
            //    in both processes: threads that count as suspended still take them (one
            //    attaching, one leaving a wait), and the child's DumpHeap takes both.
            let held: Vec<*mut c_void> =
                locks.iter().map(|&l| *(l as *const *mut c_void)).collect();
            let (lock, unlock) = mutex_fns.unwrap_or((0, 0));
            for &m in &held {
                std::mem::transmute::<usize, LockFn>(lock)(m, me);
            }
            let fork_start = Instant::now();
            let forked = child::spawn(DUMP_CHILD_NAME, alarm, || {
                for &m in held.iter().rev() {
                    std::mem::transmute::<usize, LockFn>(unlock)(m, me);
                }
                // The child ends its copy of the critical section (its thread is ours); its
                // DumpHeap opens one of its own.
                std::mem::transmute::<usize, DtorFn>(s.must(SGC_DTOR))(sgc);
                child()
            });
            let fork_end = Instant::now();
            for &m in held.iter().rev() {
                std::mem::transmute::<usize, LockFn>(unlock)(m, me);
            }
            // 4. Resume: the mutator lock back, the suspension ended, then the critical
            //    section closed (DumpHeap's order), so that waiting GCs start now.
            std::mem::transmute::<usize, LockFn>(s.must(RW_LOCK))(mutator, me);
            std::mem::transmute::<usize, DtorFn>(s.must(SSA_DTOR))(ssa);
            std::mem::transmute::<usize, DtorFn>(s.must(SGC_DTOR))(sgc);
            let end = Instant::now();
            self.phases = Some(PausePhases {
                gc_wait: section - paused,
                suspend: suspended - section,
                fork: fork_end - fork_start,
                resume: end - fork_end,
            });
            (forked, end - paused)
        }
    }
}

impl Dumper for ArtForkDumper {
    fn name(&self) -> &'static str {
        "art-fork"
    }

    fn check(&mut self) -> Result<()> {
        if self.syms.is_none() {
            self.syms = Some(resolve("libart.so", self.api)?);
        }
        Ok(())
    }

    fn dump(&mut self, req: &DumpRequest) -> Result<DumpOutcome> {
        self.check()?;
        let s = self
            .syms
            .clone()
            .ok_or_else(|| Error::Unsupported("no symbols".into()))?;
        let start = Instant::now();
        if req.mini_path.is_some() && self.tee.is_none() {
            self.tee = Some(Tee::install(ART_LIBS)?);
        }
        let path = CString::new(req.full_path.to_string_lossy().as_bytes())
            .map_err(|_| Error::Sys("dump path contains a NUL byte".into()))?;
        let (report_rd, report_wr) = report_pipe()?;
        if req.mini_path.is_some() {
            if let Some(t) = &self.tee {
                let armed = t.arm(&TeeConfig {
                    full_path: req.full_path.clone(),
                    mini_path: req.mini_path.clone(),
                    level: req.level,
                    keep_full: req.keep_full,
                    // the child has no thread but the dumping one: strip inside the hook
                    ring_bytes: 0,
                });
                // On error both ends of the pipe are closed by their owners.
                armed?;
            }
        }
        let alarm = req
            .deadline
            .as_secs()
            .saturating_add(2)
            .min(u32::MAX as u64) as u32;
        let tee_owned = self.tee.take();
        let job = ChildJob {
            dump_heap: s.must(DUMP_HEAP),
            path: &path,
            keep_full: req.keep_full,
            tee: tee_owned.as_ref().filter(|_| req.mini_path.is_some()),
            report_fd: report_wr.as_fd(),
        };
        // SAFETY: on an attached Java thread (the agent's), with this API level's symbols.
        let (forked, pause) = unsafe {
            if self.api < 30 {
                self.fork_dbg(&s, alarm, || job.run())
            } else {
                self.fork_suspend_all(&s, alarm, || job.run())
            }
        };
        // API 30+: the wait for a running GC came before any thread was asked to stop; the app
        // ran on meanwhile, so it is reported apart from the pause.
        let gc_wait = match (self.api >= 30, self.phases) {
            (true, Some(p)) => p.gc_wait,
            _ => Duration::ZERO,
        };
        let pause = pause.saturating_sub(gc_wait);
        // The parent's copy of the write end, closed now (the child holds its own): once the
        // child is gone, a read finds the end of the pipe.
        drop(report_wr);
        if let (Some(t), Some(_)) = (&tee_owned, &req.mini_path) {
            t.discard();
        }
        self.tee = tee_owned;
        let mut child = match forked {
            Ok(c) => c,
            Err(e) => {
                read_report(report_rd);
                super::remove_partial(req);
                return Err(e.into());
            }
        };
        let end = child.wait(req.deadline);
        let report = read_report(report_rd);
        let fail = |why: String| {
            super::remove_partial(req);
            Err(Error::Child(why))
        };
        let pid = child.pid;
        let report = match (end, report) {
            (Ok(ChildEnd::Exited(c)), Some(r)) if r.code == c => r,
            (Ok(ChildEnd::Reaped), Some(r)) => {
                tracing::info!(pid, "the app took the dump child's exit status (SIGCHLD ignored or reaped); its completion record says how the dump went");
                r
            }
            (Ok(ChildEnd::Exited(c)), _) => {
                return fail(format!(
                    "{pid} exited with code {c} without its completion record"
                ))
            }
            (Ok(end), _) => return fail(format!("{pid} {end}")),
            (Err(e), _) => {
                super::remove_partial(req);
                return Err(e.into());
            }
        };
        if report.code == exit::NOTHING_SEEN {
            return fail(format!(
                "{pid}: the VM's dumper returned, but no hooked library wrote the dump"
            ));
        }
        if report.full_bytes == 0 {
            // Without the full file kept, the count is the tee's: a dump the VM wrote where
            // the hooks did not see it counts nothing.
            return fail(format!(
                "{pid} wrote an empty dump, or one the tee did not see"
            ));
        }
        let mini = match (&req.mini_path, report.code, report.mini) {
            (None, _, _) => None,
            (Some(_), exit::DUMPED, Some(stats)) => Some(Ok(stats)),
            (Some(m), _, _) => {
                let _ = std::fs::remove_file(m);
                Some(Err("the stripper failed in the dump child".to_string()))
            }
        };
        let full = super::keep_or_remove_full(req);
        Ok(DumpOutcome {
            dumper: self.name(),
            full,
            full_bytes: report.full_bytes,
            mini,
            caught_by: Vec::new(),
            pause,
            gc_wait,
            total: start.elapsed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every figure of the mini file's strip comes through the child's pipe, `app`'s too.
    #[test]
    fn the_child_report_carries_every_strip_figure() {
        let r = ChildReport {
            code: 3,
            full_bytes: 1 << 33,
            mini: Some(StripStats {
                input_bytes: 11,
                output_bytes: 12,
                arrays_stripped: 13,
                array_bytes_removed: 14,
                objects_dropped: 15,
                objects_kept_in_dropped_heaps: 16,
                holder_roots: 17,
            }),
        };
        assert_eq!(ChildReport::decode(&r.encode()), Some(r.clone()));
        let none = ChildReport { mini: None, ..r };
        assert_eq!(ChildReport::decode(&none.encode()), Some(none.clone()));
        let mut bad = none.encode();
        bad[0] ^= 1;
        assert_eq!(ChildReport::decode(&bad), None);
        assert!(std::mem::size_of::<[u64; REPORT_WORDS]>() < libc::PIPE_BUF);
    }

    #[test]
    fn symbols_needed_grow_with_the_api_level() {
        assert!(required_symbols(29).contains(&DBG_SUSPEND_VM));
        assert!(!required_symbols(30).contains(&DBG_SUSPEND_VM));
        assert!(required_symbols(30).contains(&SSA_CTOR));
        assert!(optional_symbols(30).contains(&THREAD_LIST_LOCK));
        assert!(optional_symbols(30).contains(&SUSPEND_COUNT_LOCK));
        assert!(optional_symbols(35).contains(&THREAD_LIST_LOCK));
        assert!(optional_symbols(29).is_empty());
    }

    #[test]
    fn without_libart_the_dumper_is_unsupported_before_anything_happens() {
        let mut d = ArtForkDumper::new(33);
        let e = d.check().unwrap_err().to_string();
        assert!(
            e.contains("unsupported on this runtime") && e.contains("libart.so is not loaded"),
            "{e}"
        );
        let req = DumpRequest {
            full_path: "/nonexistent/x.hprof".into(),
            mini_path: None,
            level: hprof::Level::Arrays,
            keep_full: true,
            deadline: std::time::Duration::from_secs(1),
        };
        assert!(matches!(d.dump(&req), Err(Error::Unsupported(_))));
    }

    #[test]
    fn resolve_reports_each_missing_symbol_of_a_library_that_is_not_art() {
        // A real loaded library that has DumpHeap but not the suspend functions of API 29.
        let dir = tempfile::tempdir().unwrap();
        let src =
            "namespace art { namespace hprof { void DumpHeap(const char*, int, bool) {} } }\n";
        let cpp = dir.path().join("fakeart.cc");
        std::fs::write(&cpp, src).unwrap();
        let so = dir.path().join("libfakeart.so");
        let st = std::process::Command::new("c++")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&so)
            .arg(&cpp)
            .status()
            .unwrap();
        assert!(st.success());
        let dump_addr = crate::hook::dl_fn(&so, DUMP_HEAP);
        let e = resolve("libfakeart.so", 29).unwrap_err().to_string();
        assert!(
            e.contains(DBG_SUSPEND_VM) && e.contains(DBG_RESUME_VM),
            "{e}"
        );
        assert!(!e.contains(DUMP_HEAP), "{e}");
        // With only DumpHeap required, the address found equals dlsym's.
        let (path, bias) = find_loaded("libfakeart.so").unwrap();
        let sym = ElfSymbols::open(std::path::Path::new(&path))
            .unwrap()
            .lookup(DUMP_HEAP)
            .unwrap()
            .unwrap();
        assert_eq!(bias + sym.value as usize, dump_addr);
    }

    /// A library standing in for libart, built here: each name in `functions` an empty
    /// function, each in `data` an object, and `strings` in its read-only data (as ART's
    /// generated `operator<<` keeps the enum's names).
    fn fake_art(
        dir: &std::path::Path,
        name: &str,
        functions: &[&str],
        data: &[&str],
        strings: &[&str],
    ) -> std::path::PathBuf {
        let mut src = String::new();
        for (i, f) in functions.iter().enumerate() {
            src.push_str(&format!(
                "void f{i}(void) __asm__(\"{f}\");\nvoid f{i}(void) {{}}\n"
            ));
        }
        for (i, d) in data.iter().enumerate() {
            src.push_str(&format!("long d{i}[4] __asm__(\"{d}\");\nlong d{i}[4];\n"));
        }
        for (i, t) in strings.iter().enumerate() {
            src.push_str(&format!(
                "__attribute__((used)) const char s{i}[] = \"{t}\";\n"
            ));
        }
        let so = crate::hook::build_c_lib(dir, name, &src, &[]);
        // Loaded, as libart is in an app.
        crate::hook::dl_fn(&so, DUMP_HEAP);
        so
    }

    /// API 30's symbols resolve to the addresses the loader gave them, the optional ones only
    /// where present, and `kCollectorTypeHprof` follows what the library holds.
    #[test]
    fn resolve_finds_every_symbol_of_api_30_and_probes_the_collector() {
        let dir = tempfile::tempdir().unwrap();
        let functions = [
            DUMP_HEAP,
            THREAD_CURRENT,
            SGC_CTOR,
            SGC_DTOR,
            SSA_CTOR,
            SSA_DTOR,
            RW_LOCK,
            RW_UNLOCK,
        ];
        let so = fake_art(dir.path(), "libfakeart30", &functions, &[MUTATOR_LOCK], &[]);
        let syms = resolve("libfakeart30.so", 30).unwrap();
        assert_eq!(syms.library, so.display().to_string());
        for f in functions {
            assert_eq!(syms.get(f), Some(crate::hook::dl_fn(&so, f)), "{f}");
            assert_eq!(syms.must(f), crate::hook::dl_fn(&so, f), "{f}");
        }
        assert_eq!(
            syms.get(MUTATOR_LOCK),
            Some(crate::hook::dl_fn(&so, MUTATOR_LOCK))
        );
        for absent in [
            THREAD_LIST_LOCK,
            SUSPEND_COUNT_LOCK,
            MUTEX_LOCK,
            MUTEX_UNLOCK,
            DBG_SUSPEND_VM,
        ] {
            assert_eq!(syms.get(absent), None, "{absent}");
            assert_eq!(syms.must(absent), 0, "{absent}");
        }
        assert_eq!(
            syms.collector_hprof, 13,
            "no mark-compact collector: Android 11 to 13"
        );

        let optional = [THREAD_LIST_LOCK, SUSPEND_COUNT_LOCK];
        let with_locks = [&functions[..], &[MUTEX_LOCK, MUTEX_UNLOCK]].concat();
        let so = fake_art(
            dir.path(),
            "libfakeart30l",
            &with_locks,
            &[&[MUTATOR_LOCK][..], &optional].concat(),
            &["CollectorTypeCMC"],
        );
        let syms = resolve("libfakeart30l.so", 31).unwrap();
        for o in optional.into_iter().chain([MUTEX_LOCK, MUTEX_UNLOCK]) {
            assert_eq!(syms.get(o), Some(crate::hook::dl_fn(&so, o)), "{o}");
        }
        assert_eq!(
            syms.collector_hprof, 14,
            "the CMC collector's name in the library"
        );

        fake_art(
            dir.path(),
            "libfakeart34",
            &[&functions[..], &[MARK_COMPACT]].concat(),
            &[MUTATOR_LOCK],
            &["CollectorTypeCMCBackground"],
        );
        assert_eq!(resolve("libfakeart34.so", 34).unwrap().collector_hprof, 15);
        fake_art(
            dir.path(),
            "libfakeart33",
            &[&functions[..], &[MARK_COMPACT]].concat(),
            &[MUTATOR_LOCK],
            &[],
        );
        assert_eq!(
            resolve("libfakeart33.so", 33).unwrap().collector_hprof,
            14,
            "the collector's symbol alone"
        );
        // Below API 30 nothing is probed: the enum is not used.
        fake_art(
            dir.path(),
            "libfakeart29",
            &[DUMP_HEAP, DBG_SUSPEND_VM, DBG_RESUME_VM],
            &[],
            &["CollectorTypeCMCBackground"],
        );
        assert_eq!(resolve("libfakeart29.so", 29).unwrap().collector_hprof, 0);
    }

    #[test]
    fn the_hprof_collector_type_follows_the_collectors_built_in() {
        assert_eq!(collector_type_hprof(false, false), 13);
        assert_eq!(collector_type_hprof(true, false), 14);
        assert_eq!(collector_type_hprof(true, true), 15);
        assert_eq!(collector_type_hprof(false, true), 15);
    }

    #[test]
    fn a_file_is_searched_for_each_needle() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("lib.so");
        std::fs::write(&f, b"..CollectorTypeCMC\0..").unwrap();
        let needles: [&[u8]; 4] = [
            b"CollectorTypeCMC\0",
            b"CollectorTypeCMCBackground\0",
            b"",
            b"\0..",
        ];
        assert_eq!(file_holds(&f, &needles), [true, false, false, true]);
        assert_eq!(
            file_holds(&dir.path().join("absent.so"), &needles),
            [false; 4]
        );
        std::fs::write(&f, b"").unwrap();
        assert_eq!(
            file_holds(&f, &needles[..2]),
            [false; 2],
            "an empty file cannot be mapped"
        );
    }

    /// The parent reads the child's record from the pipe: whole, or not at all when the child
    /// wrote part of it or nothing, and without waiting when a copy of the write end is still
    /// open elsewhere.
    #[test]
    fn the_childs_record_is_read_whole_or_not_at_all() {
        use std::io::Write;
        let r = ChildReport {
            code: exit::MINI_ABANDONED,
            full_bytes: 12345,
            mini: None,
        };
        let bytes: Vec<u8> = r.encode().iter().flat_map(|w| w.to_ne_bytes()).collect();
        let send = |part: &[u8], close: bool| {
            let (rd, wr) = report_pipe().unwrap();
            let mut w = std::fs::File::from(wr);
            w.write_all(part).unwrap();
            let kept = (!close).then_some(w);
            let t = Instant::now();
            let got = read_report(rd);
            assert!(t.elapsed() < Duration::from_secs(5), "read_report waited");
            drop(kept);
            got
        };
        assert_eq!(send(&bytes, true), Some(r.clone()));
        assert_eq!(
            send(&bytes, false),
            Some(r.clone()),
            "the whole record, the writer still open"
        );
        assert_eq!(send(&bytes[..40], true), None, "part of the record");
        assert_eq!(
            send(&bytes[..40], false),
            None,
            "part, and the writer still open"
        );
        assert_eq!(send(&[], false), None, "nothing yet, the writer still open");
        assert_eq!(send(&[], true), None);
        let mut foreign = bytes.clone();
        foreign[0] ^= 1;
        assert_eq!(send(&foreign, true), None, "no magic");
    }
}
