//! Hooks on a loaded library's imports: GOT patching ([`got`]) and the dump tee ([`tee`]).
//!
//! Owns:
//! - [`got::patch_library`]: redirect named imports (`JUMP_SLOT` and `GLOB_DAT` relocations) of
//!   one loaded library to our functions, and put them back. Pure Rust, 64- and 32-bit ELF.
//! - [`tee::Tee`]: the `open`/`open64`/`openat`/`write`/`close`/`android_fdsan_close_with_tag`
//!   hooks that recognise the dump file the VM opens and copy its bytes into
//!   [`hprof::Stripper`], which writes the mini file while the VM writes the full one.
//!
//! Invariants:
//! - Inside a hook: no allocation, no lock the VM could hold (our own spin flag only), `errno` as
//!   the real call left it (a swallowed write, which succeeds, leaves it as it was), and any fd
//!   but the dump's goes straight to the real function. The fds a hook sees are the VM's: raw,
//!   never owned nor closed by us but through the real `close` the VM called.
//! - A failure of ours (stripper error, panic, seek on the dump fd) abandons the mini file only;
//!   the VM's own file is written exactly as without the hook.

pub mod elf;
pub mod got;
mod ring;
pub mod tee;

pub use got::{loaded_libraries, patch_library, Import, Patched};
pub use tee::{Tee, TeeConfig, TeeReport};

/// What went wrong while hooking.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("library {0} is not loaded in this process: nothing hooked")]
    NotLoaded(String),
    #[error("library {library} imports none of {imports}: nothing hooked")]
    NoImports { library: String, imports: String },
    #[error("library {library}: {what}; nothing hooked")]
    Malformed { library: String, what: String },
    #[error("import {0} points back into its library and dlsym cannot resolve it: not hooked")]
    Unresolved(String),
    #[error("mprotect of the page holding GOT slot {addr:#x}: {err}")]
    Protect { addr: usize, err: std::io::Error },
    #[error("library {library}: slots of {symbols} were changed by someone else since we hooked them; left as they are")]
    SlotChanged { library: String, symbols: String },
    #[error("the tee is already installed in this process")]
    AlreadyInstalled,
    #[error("the tee is not installed")]
    NotInstalled,
    #[error("the tee is already armed for {0}")]
    AlreadyArmed(String),
    #[error("dump path {0:?} contains a NUL byte")]
    BadPath(String),
    #[error("creating the mini file {path}: {err}")]
    MiniFile { path: String, err: std::io::Error },
}

/// Test support: build a shared library from C source with the machine's `cc`.
#[cfg(test)]
pub(crate) fn build_c_lib(
    dir: &std::path::Path,
    name: &str,
    src: &str,
    flags: &[&str],
) -> std::path::PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let so = dir.join(format!("{name}.so"));
    let st = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&so)
        .arg(&c)
        .args(flags)
        .status()
        .expect("cc runs");
    assert!(st.success(), "cc failed for {name}");
    so
}

/// Test support: dlopen a library and look up a function in it.
#[cfg(test)]
pub(crate) fn dl_fn(so: &std::path::Path, sym: &str) -> usize {
    let p = std::ffi::CString::new(so.to_str().unwrap()).unwrap();
    // SAFETY: a test library we just built, whose initialisers are empty.
    let h = unsafe { libc::dlopen(p.as_ptr(), libc::RTLD_NOW) };
    assert!(!h.is_null(), "dlopen {}", so.display());
    let s = std::ffi::CString::new(sym).unwrap();
    // SAFETY: a valid handle and name.
    let f = unsafe { libc::dlsym(h, s.as_ptr()) };
    assert!(!f.is_null(), "dlsym {sym}");
    f as usize
}

/// Test support: a fixture dump from `../shared/fixtures/hprof/`.
#[cfg(test)]
pub(crate) fn tests_fixture(rel: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/hprof")
        .join(rel)
}
