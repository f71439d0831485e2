//! The ART fork dumper (Android): suspend the VM, fork, resume at once; the child, a frozen
//! copy-on-write snapshot of the heap, calls `art::hprof::DumpHeap` directly (no JNI in the
//! child) through the tee, and `_exit`s.
//!
//! The VM-control functions are not exported to apps, so they are looked up in `libart.so`'s
//! own symbol tables ([`super::elfsym`]), read from the file the loader mapped, plus the load
//! bias: no `dlopen` of a system library, which Android 7+ namespaces refuse. What is called
//! depends on the API level:
//! - 21–29: `art::Dbg::SuspendVM()` before the fork, `art::Dbg::ResumeVM()` after.
//! - 30–34: a `gc::ScopedGCCriticalSection` (no GC may start while we suspend), a
//!   `ScopedSuspendAll`; the critical section is closed and the mutator lock released before
//!   the fork (the child's own `DumpHeap` takes both again: in the child, a copy of a lock held
//!   by our thread would never be released); after the fork the parent retakes the mutator
//!   lock and ends the suspension.
//! - 35+: as 30–34, and `Locks::thread_list_lock_` is held across the `fork()` call itself
//!   (released right after in both processes), as ART's own perfetto heap profiler does.
//!
//! A missing symbol is reported as "unsupported on this runtime" by [`Dumper::check`], before
//! anything is suspended or forked; [`super::take`] then falls back as the policy says.
//!
//! Not run on a device in this repository's tests (there is none here): it compiles for
//! aarch64 and armv7 Android, and its symbol resolution is tested on Linux against a real ELF
//! library. The enum values passed to `ScopedGCCriticalSection` are those of the AOSP headers
//! for the API levels named in [`gc_enums`] and must be checked on each new Android release.

use super::elfsym::ElfSymbols;
use super::fork::{self, DUMP_CHILD_NAME};
use super::{DumpOutcome, DumpRequest, Dumper, Error, Result};
use crate::hook::{got::find_loaded, tee::ART_LIBS, Tee, TeeConfig};
use std::ffi::{c_char, c_int, c_void, CString};
use std::time::Instant;

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
const MUTEX_LOCK: &str = "_ZN3art5Mutex13ExclusiveLockEPNS_6ThreadE";
const MUTEX_UNLOCK: &str = "_ZN3art5Mutex15ExclusiveUnlockEPNS_6ThreadE";

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
        if api >= 35 {
            v.extend([THREAD_LIST_LOCK, MUTEX_LOCK, MUTEX_UNLOCK]);
        }
    }
    v
}

/// `(GcCause::kGcCauseHprof, CollectorType::kCollectorTypeHprof)` for an API level, as declared
/// in AOSP's `gc_cause.h` and `collector_type.h` of that release.
pub fn gc_enums(api: u32) -> (c_int, c_int) {
    match api {
        0..=30 => (15, 13),
        _ => (15, 14),
    }
}

/// Resolved addresses (load bias added), by the name order of [`required_symbols`].
#[derive(Debug, Clone)]
pub struct ArtSymbols {
    pub library: String,
    addrs: Vec<(&'static str, usize)>,
}

impl ArtSymbols {
    fn get(&self, name: &str) -> usize {
        self.addrs
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |&(_, a)| a)
    }
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
    Ok(ArtSymbols {
        library: path,
        addrs: names
            .iter()
            .zip(found)
            .map(|(n, f)| (*n, bias + f.map_or(0, |s| s.value as usize)))
            .collect(),
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
}

type VoidFn = unsafe extern "C" fn();
type SelfFn = unsafe extern "C" fn() -> *mut c_void;
type SgcCtor = unsafe extern "C" fn(*mut c_void, *mut c_void, c_int, c_int);
type DtorFn = unsafe extern "C" fn(*mut c_void);
type SsaCtor = unsafe extern "C" fn(*mut c_void, *const c_char, bool);
type LockFn = unsafe extern "C" fn(*mut c_void, *mut c_void);
type DumpHeapFn = unsafe extern "C" fn(*const c_char, c_int, bool);

impl ArtForkDumper {
    /// `api`: `Build.VERSION.SDK_INT`, read by the caller through JNI.
    pub fn new(api: u32) -> ArtForkDumper {
        ArtForkDumper {
            api,
            syms: None,
            tee: None,
            sgc: Box::new(Opaque([0; 256])),
            ssa: Box::new(Opaque([0; 256])),
        }
    }

    /// Stop the VM: every Java thread suspended, no GC running. Returns the `art::Thread*`.
    ///
    /// # Safety
    /// Must be called on an attached Java thread with the symbols of this API level.
    unsafe fn suspend(&mut self, s: &ArtSymbols) -> *mut c_void {
        // SAFETY (all calls): addresses resolved from this process's libart.so for this API
        // level, called with the signatures AOSP declares for them.
        unsafe {
            if self.api < 30 {
                std::mem::transmute::<usize, VoidFn>(s.get(DBG_SUSPEND_VM))();
                return std::ptr::null_mut();
            }
            let me = std::mem::transmute::<usize, SelfFn>(s.get(THREAD_CURRENT))();
            let (cause, collector) = gc_enums(self.api);
            let sgc = self.sgc.0.as_mut_ptr() as *mut c_void;
            let ssa = self.ssa.0.as_mut_ptr() as *mut c_void;
            std::mem::transmute::<usize, SgcCtor>(s.get(SGC_CTOR))(sgc, me, cause, collector);
            std::mem::transmute::<usize, SsaCtor>(s.get(SSA_CTOR))(
                ssa,
                c"oomguard-dump".as_ptr(),
                true,
            );
            // All suspended: no GC can start. Close the critical section and release the
            // mutator lock so that the child's own DumpHeap can take both.
            std::mem::transmute::<usize, DtorFn>(s.get(SGC_DTOR))(sgc);
            let mutator = *(s.get(MUTATOR_LOCK) as *const *mut c_void);
            std::mem::transmute::<usize, LockFn>(s.get(RW_UNLOCK))(mutator, me);
            me
        }
    }

    /// Undo [`Self::suspend`] in the parent.
    ///
    /// # Safety
    /// Only after `suspend` on the same thread.
    unsafe fn resume(&mut self, s: &ArtSymbols, me: *mut c_void) {
        // SAFETY: as in `suspend`.
        unsafe {
            if self.api < 30 {
                std::mem::transmute::<usize, VoidFn>(s.get(DBG_RESUME_VM))();
                return;
            }
            let mutator = *(s.get(MUTATOR_LOCK) as *const *mut c_void);
            std::mem::transmute::<usize, LockFn>(s.get(RW_LOCK))(mutator, me);
            let ssa = self.ssa.0.as_mut_ptr() as *mut c_void;
            std::mem::transmute::<usize, DtorFn>(s.get(SSA_DTOR))(ssa);
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
        if req.mini_path.is_some() {
            if let Some(t) = &self.tee {
                t.arm(&TeeConfig {
                    full_path: req.full_path.clone(),
                    mini_path: req.mini_path.clone(),
                    level: req.level,
                    keep_full: req.keep_full,
                    // the child has no thread but the dumping one: strip inside the hook
                    ring_bytes: 0,
                })?;
            }
        }
        let path = CString::new(req.full_path.to_string_lossy().as_bytes())
            .map_err(|_| Error::Sys("dump path contains a NUL byte".into()))?;
        let dump_heap = s.get(DUMP_HEAP);
        let alarm = req
            .deadline
            .as_secs()
            .saturating_add(2)
            .min(u32::MAX as u64) as u32;
        let tee_owned = self.tee.take();
        let tee = tee_owned.as_ref();
        let hold_thread_list = self.api >= 35;
        let (tl_lock, m_lock, m_unlock) = (
            s.get(THREAD_LIST_LOCK),
            s.get(MUTEX_LOCK),
            s.get(MUTEX_UNLOCK),
        );
        // SAFETY: on an attached Java thread (the agent's), with this API level's symbols.
        let me = unsafe { self.suspend(&s) };
        let pause_start = Instant::now();
        let tl = if hold_thread_list {
            // SAFETY: Locks::thread_list_lock_ is a `Mutex*`; held only across fork().
            unsafe {
                let m = *(tl_lock as *const *mut c_void);
                std::mem::transmute::<usize, LockFn>(m_lock)(m, me);
                m
            }
        } else {
            std::ptr::null_mut()
        };
        let child = fork::spawn(DUMP_CHILD_NAME, alarm, || {
            // SAFETY: in the child: release the copy of thread_list_lock_, then ART's own
            // dumper writes the file through the (inherited) tee; no JNI.
            unsafe {
                if !tl.is_null() {
                    std::mem::transmute::<usize, LockFn>(m_unlock)(tl, me);
                }
                std::mem::transmute::<usize, DumpHeapFn>(dump_heap)(path.as_ptr(), -1, false);
            }
            match tee.map(|t| t.finish_in_child()) {
                Some(1) => 10, // full file written, mini file abandoned
                _ => 0,
            }
        });
        // SAFETY: parent side of the same calls.
        unsafe {
            if !tl.is_null() {
                std::mem::transmute::<usize, LockFn>(m_unlock)(tl, me);
            }
            self.resume(&s, me);
        }
        let pause = pause_start.elapsed();
        if let Some(t) = &tee_owned {
            t.discard();
        }
        self.tee = tee_owned;
        let mut child = child?;
        let mut files = vec![req.full_path.clone()];
        files.extend(req.mini_path.clone());
        let r = child.wait(req.deadline);
        let mini = match (&r, &req.mini_path) {
            (Ok(fork::ChildEnd::Exited(0)), Some(m)) => Some(
                std::fs::metadata(m)
                    .map(|md| crate::hprof::StripStats {
                        output_bytes: md.len(),
                        ..Default::default()
                    })
                    .map_err(|e| e.to_string()),
            ),
            (Ok(fork::ChildEnd::Exited(10)), Some(m)) => {
                let _ = std::fs::remove_file(m);
                Some(Err("the stripper failed in the dump child".into()))
            }
            _ => None,
        };
        match r {
            Ok(fork::ChildEnd::Exited(0 | 10)) => {}
            Ok(end) => {
                super::remove_partial(req);
                return Err(Error::Child(format!("{} {end}", child.pid)));
            }
            Err(e) => {
                super::remove_partial(req);
                return Err(e);
            }
        }
        let full_bytes = std::fs::metadata(&req.full_path)
            .map(|m| m.len())
            .unwrap_or(0);
        if full_bytes == 0 {
            super::remove_partial(req);
            return Err(Error::Child("wrote an empty dump".into()));
        }
        let full = super::keep_or_remove_full(req);
        Ok(DumpOutcome {
            dumper: self.name(),
            full,
            full_bytes,
            mini,
            caught_by: Vec::new(),
            pause,
            total: start.elapsed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_needed_grow_with_the_api_level() {
        assert!(required_symbols(29).contains(&DBG_SUSPEND_VM));
        assert!(!required_symbols(30).contains(&DBG_SUSPEND_VM));
        assert!(required_symbols(30).contains(&SSA_CTOR));
        assert!(!required_symbols(34).contains(&THREAD_LIST_LOCK));
        assert!(required_symbols(35).contains(&THREAD_LIST_LOCK));
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
            level: crate::hprof::Level::Arrays,
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
}
