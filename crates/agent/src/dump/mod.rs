//! Taking a heap dump without freezing the app: the dumpers and the guards before any dump.
//!
//! Owns:
//! - [`Dumper`]: one implementation per runtime. [`hotspot::HotSpotDumper`] dumps in process
//!   through `HotSpotDiagnosticMXBean.dumpHeap` with the tee on `libjvm.so`;
//!   [`art::ArtForkDumper`] suspends ART, forks, resumes, and lets the child dump (Android).
//!   Which one runs is the caller's choice, by the runtime that is loaded (`pipeline`).
//! - [`guard::Guards`]: free disk, once per process, per-version quota and window, one dump at a
//!   time. [`take`] checks them before every dump: no caller can skip them.
//! - [`elfsym`]: symbols from an ELF file's `.dynsym`/`.symtab` (no `dlopen`).
//!
//! The fork itself (signal setup undone, a deadline, a watchdog kill, no zombie) is
//! `crate::child`'s; the dump child's exit codes are [`art::exit`]'s.
//!
//! Invariants: a failed dump leaves no partial file behind and is never handed to analysis;
//! every refusal and failure is logged once with its reason; no JNI in a forked child.

pub mod art;
pub mod elfsym;
pub mod guard;
pub mod hotspot;

use hprof::{Level, StripStats};
use std::path::PathBuf;
use std::time::Duration;

/// What went wrong with a dump.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("dump refused: {0}")]
    Refused(String),
    #[error("dump unsupported on this runtime: {0}")]
    Unsupported(String),
    #[error("the VM's dumper failed: {0}; partial files removed")]
    Vm(String),
    #[error("dump child {0}; partial files removed")]
    Child(String),
    /// The VM dumped, but no file is left to analyse: the mini file was abandoned and the full
    /// one is not kept.
    #[error("the dump left no file: the mini file was abandoned ({0}) and the full dump is not kept (dump.keep_full is off)")]
    NoFile(String),
    #[error("hook: {0}")]
    Hook(#[from] crate::hook::Error),
    #[error("{what} {path}: {err}")]
    Io {
        what: &'static str,
        path: String,
        err: std::io::Error,
    },
    #[error("{0}")]
    Sys(String),
}

/// A child's failure in a dump's words (the messages dumps always had).
impl From<crate::child::Error> for Error {
    fn from(e: crate::child::Error) -> Error {
        match e {
            crate::child::Error::Wait { .. } => Error::Child(e.to_string()),
            crate::child::Error::Fork(_) | crate::child::Error::Nul(_) => Error::Sys(e.to_string()),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// One dump to take.
#[derive(Clone, Debug)]
pub struct DumpRequest {
    /// Where the VM writes the full dump (must end in `.hprof` on HotSpot).
    pub full_path: PathBuf,
    /// Where the stripped copy goes, written while the VM dumps; `None`: no tee.
    pub mini_path: Option<PathBuf>,
    pub level: Level,
    /// Keep the full file (for local analysis); if not, only the mini file is written.
    pub keep_full: bool,
    /// How long the dump may take before it is abandoned (fork dumpers: the child is killed).
    pub deadline: Duration,
}

/// What a dump produced.
#[derive(Clone, Debug)]
pub struct DumpOutcome {
    pub dumper: &'static str,
    /// The full file, if kept.
    pub full: Option<PathBuf>,
    pub full_bytes: u64,
    /// The mini file's stats, or why it was abandoned.
    pub mini: Option<std::result::Result<StripStats, String>>,
    /// Libraries whose hooks caught the dump.
    pub caught_by: Vec<String>,
    /// How long the app's threads were stopped.
    pub pause: Duration,
    /// Before the pause, how long the dumper waited for a GC or heap trim already running to
    /// end (ART 11+: taking the GC critical section waits for it while the app's threads run
    /// on; zero elsewhere). Not part of [`pause`](Self::pause).
    pub gc_wait: Duration,
    /// Wall time of the whole dump.
    pub total: Duration,
}

/// A way to dump the heap of the runtime we are in.
pub trait Dumper {
    fn name(&self) -> &'static str;
    /// Say why this dumper cannot work here, before anything is stopped or forked.
    fn check(&mut self) -> Result<()>;
    /// Dump. Called by [`take`] after the guards allowed it.
    fn dump(&mut self, req: &DumpRequest) -> Result<DumpOutcome>;
}

/// The name a dump child shows in `ps` and crash reports.
pub const DUMP_CHILD_NAME: &str = "oomguard-dump";

/// After a successful dump: the full file if the request keeps it, else remove it.
pub(crate) fn keep_or_remove_full(req: &DumpRequest) -> Option<PathBuf> {
    if req.keep_full {
        Some(req.full_path.clone())
    } else {
        let _ = std::fs::remove_file(&req.full_path);
        None
    }
}

/// Remove what a failed dump left.
pub(crate) fn remove_partial(req: &DumpRequest) {
    let _ = std::fs::remove_file(&req.full_path);
    if let Some(m) = &req.mini_path {
        let _ = std::fs::remove_file(m);
    }
}

/// Take a dump: pick the dumper (the fallback when the first one says it is unsupported here;
/// policy: `None` means skip), then the guards (an unsupported runtime uses no quota), then dump.
pub fn take(
    guards: &guard::Guards,
    heap_bytes: u64,
    dumper: &mut dyn Dumper,
    fallback: Option<&mut dyn Dumper>,
    req: &DumpRequest,
) -> Result<DumpOutcome> {
    let dir = req
        .full_path
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let chosen: &mut dyn Dumper = match dumper.check() {
        Ok(()) => dumper,
        Err(e) => match fallback {
            Some(f) => {
                tracing::warn!(dumper = dumper.name(), fallback = f.name(), reason = %e, "dumper unsupported, falling back");
                f.check()?;
                f
            }
            None => {
                tracing::warn!(dumper = dumper.name(), reason = %e, "dumper unsupported, dump skipped by policy");
                return Err(e);
            }
        },
    };
    let permit = guards.allow(&dir, heap_bytes).inspect_err(|e| {
        tracing::warn!(reason = %e, "heap dump refused");
    })?;
    let r = chosen.dump(req).and_then(|o| match (&o.full, &o.mini) {
        (None, Some(Err(why))) => Err(Error::NoFile(why.clone())),
        _ => Ok(o),
    });
    match &r {
        Ok(o) => {
            permit.succeeded();
            tracing::info!(
                dumper = o.dumper,
                bytes = o.full_bytes,
                pause_ms = o.pause.as_millis() as u64,
                gc_wait_ms = o.gc_wait.as_millis() as u64,
                "heap dump taken"
            );
        }
        Err(e) => {
            remove_partial(req);
            tracing::warn!(dumper = chosen.name(), error = %e, "heap dump failed");
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use guard::{GuardPolicy, Guards};

    /// A dumper that is unsupported, or writes a fixed file, or fails after writing part of it.
    struct Fake {
        supported: bool,
        fail: bool,
        calls: u32,
    }

    impl Dumper for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn check(&mut self) -> Result<()> {
            if self.supported {
                Ok(())
            } else {
                Err(Error::Unsupported("fake runtime".into()))
            }
        }
        fn dump(&mut self, req: &DumpRequest) -> Result<DumpOutcome> {
            self.calls += 1;
            std::fs::write(&req.full_path, b"partial").unwrap();
            if self.fail {
                return Err(Error::Child("fake child crashed".into()));
            }
            Ok(DumpOutcome {
                dumper: "fake",
                full: Some(req.full_path.clone()),
                full_bytes: 7,
                mini: None,
                caught_by: vec![],
                pause: Duration::ZERO,
                gc_wait: Duration::ZERO,
                total: Duration::ZERO,
            })
        }
    }

    fn req(dir: &std::path::Path) -> DumpRequest {
        DumpRequest {
            full_path: dir.join("d.hprof"),
            mini_path: Some(dir.join("d.mini.hprof")),
            level: Level::Arrays,
            keep_full: true,
            deadline: Duration::from_secs(5),
        }
    }

    /// A dumper whose VM dump went through while its mini file was abandoned (a full disk): it
    /// writes part of the mini file, and the full file only if the request keeps it.
    struct Abandoned;

    impl Dumper for Abandoned {
        fn name(&self) -> &'static str {
            "abandoned"
        }
        fn check(&mut self) -> Result<()> {
            Ok(())
        }
        fn dump(&mut self, req: &DumpRequest) -> Result<DumpOutcome> {
            std::fs::write(req.mini_path.as_ref().unwrap(), b"part").unwrap();
            if req.keep_full {
                std::fs::write(&req.full_path, b"full").unwrap();
            }
            Ok(DumpOutcome {
                dumper: "abandoned",
                full: req.keep_full.then(|| req.full_path.clone()),
                full_bytes: 1 << 20,
                mini: Some(Err("No space left on device".into())),
                caught_by: vec![],
                pause: Duration::ZERO,
                gc_wait: Duration::ZERO,
                total: Duration::ZERO,
            })
        }
    }

    /// A dump that leaves no file (mini file abandoned, full dump not kept) is a failed dump,
    /// not one taken: an error naming why, and nothing left behind.
    #[test]
    fn a_dump_that_leaves_no_file_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let policy = GuardPolicy {
            min_free_bytes: 1,
            once_per_process: false,
            quota_per_version: 5,
            ..GuardPolicy::from(&crate::policy::Policy::default())
        };
        let g = Guards::new(policy, d.path(), "1");
        let r = DumpRequest {
            keep_full: false,
            ..req(d.path())
        };
        let e = take(&g, 1, &mut Abandoned, None, &r).unwrap_err();
        assert!(matches!(e, Error::NoFile(_)), "{e}");
        assert!(e.to_string().contains("No space left on device"), "{e}");
        assert!(!d.path().join("d.mini.hprof").exists());
        // With the full dump kept, an abandoned mini file is only a lesser dump.
        let o = take(&g, 1, &mut Abandoned, None, &req(d.path())).unwrap();
        assert!(matches!(o.mini, Some(Err(_))));
    }

    #[test]
    fn take_checks_guards_falls_back_and_cleans_up_failures() {
        let d = tempfile::tempdir().unwrap();
        let policy = GuardPolicy {
            min_free_bytes: 1,
            once_per_process: false,
            quota_per_version: 2,
            ..GuardPolicy::from(&crate::policy::Policy::default())
        };
        let g = Guards::new(policy, d.path(), "1");
        let mut unsupported = Fake {
            supported: false,
            fail: false,
            calls: 0,
        };
        let mut ok = Fake {
            supported: true,
            fail: false,
            calls: 0,
        };
        // Unsupported without fallback: skipped (policy "skip"), nothing written.
        let e = take(&g, 1, &mut unsupported, None, &req(d.path())).unwrap_err();
        assert!(matches!(e, Error::Unsupported(_)), "{e}");
        assert_eq!(unsupported.calls, 0);
        // Unsupported with fallback: the fallback dumps.
        let o = take(&g, 1, &mut unsupported, Some(&mut ok), &req(d.path())).unwrap();
        assert_eq!(o.full_bytes, 7);
        assert_eq!(ok.calls, 1);
        // A failing dumper: its partial file is removed.
        let mut bad = Fake {
            supported: true,
            fail: true,
            calls: 0,
        };
        assert!(take(&g, 1, &mut bad, None, &req(d.path())).is_err());
        assert!(!d.path().join("d.hprof").exists());
        // Quota (2) used up (the unsupported attempt did not count): refused before the dumper is
        // called.
        let e = take(&g, 1, &mut ok, None, &req(d.path())).unwrap_err();
        assert!(matches!(e, Error::Refused(_)), "{e}");
        assert_eq!(ok.calls, 1);
    }

    /// After a dump, the full file is handed on when the request keeps it, and removed when not.
    #[test]
    fn the_full_file_is_kept_only_when_asked() {
        let d = tempfile::tempdir().unwrap();
        let r = req(d.path());
        std::fs::write(&r.full_path, b"full").unwrap();
        assert_eq!(keep_or_remove_full(&r), Some(r.full_path.clone()));
        assert!(r.full_path.exists());
        let r = DumpRequest {
            keep_full: false,
            ..r
        };
        assert_eq!(keep_or_remove_full(&r), None);
        assert!(!r.full_path.exists());
        assert_eq!(keep_or_remove_full(&r), None, "already gone: no error");
    }
}
