//! Log capture for the tests of oomguard's crates (a dev-dependency only), and a small disk to
//! fill ([`disk`]).
//!
//! A test that installs its own scoped subscriber (`tracing::subscriber::with_default`) can miss
//! its own events when tests run in parallel: `tracing` caches each callsite's interest once for
//! the whole process, and while exactly one dispatcher is registered it computes that interest
//! from the default of whichever thread reaches the callsite first. A sibling test without a
//! subscriber that reaches the same `warn!` first turns it off everywhere.
//!
//! So there is one global subscriber, installed once, that every thread's events reach; it
//! writes an event into a buffer only on a thread that is capturing ([`warnings`]).
#![forbid(unsafe_code)]

pub mod disk;

use std::cell::RefCell;
use std::io::{self, Write};
use std::sync::Once;

thread_local! {
    /// This thread's capture, while [`warnings`] runs.
    static BUF: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
}

/// Appends to this thread's capture, if any; else discards.
struct ThreadBuf;

impl Write for ThreadBuf {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        BUF.with(|c| {
            if let Some(v) = c.borrow_mut().as_mut() {
                v.extend_from_slice(b);
            }
        });
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let sub = tracing_subscriber::fmt()
            .with_writer(|| ThreadBuf)
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .finish();
        // Another global subscriber (none is set in these tests) would keep its own.
        let _ = tracing::subscriber::set_global_default(sub);
    });
}

/// What is logged at warning level and above on this thread while `f` runs.
pub fn warnings<T>(f: impl FnOnce() -> T) -> (T, String) {
    install();
    BUF.with(|c| *c.borrow_mut() = Some(Vec::new()));
    let r = f();
    let bytes = BUF.with(|c| c.borrow_mut().take()).unwrap_or_default();
    (r, String::from_utf8_lossy(&bytes).into_owned())
}
