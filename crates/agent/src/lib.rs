//! oomguard: an out-of-memory guard that lives inside an app's process.
//!
//! The map of the crate is `../shared/DESIGN.md`: one module per concern. `jni` converts the
//! Java calls and makes one call to start; `pipeline` wires the rest (the agent, the dumper for
//! the runtime that is loaded, the I/O thread, analysis and upload); `agent` samples and asks
//! `trigger`; `child` forks and execs with limits for `dump` and `pipeline`. Unsafe code only in
//! `hook`, `dump`, `child` and `jni`, each block with a `// SAFETY:` comment; the pure modules
//! forbid unsafe code with a module attribute.

pub mod agent;
pub mod child;
pub mod dump;
pub mod hook;
pub mod jni;
pub mod net;
pub mod pipeline;
pub mod policy;
pub mod recorder;
pub mod sample;
pub mod spool;
pub mod trigger;
pub mod upload;

/// A random 32-bit number, for names that must not collide between threads and processes
/// (staging directories, incident ids) and for the retry delay's jitter: never for a secret.
/// Taken from the standard library's random hash keys (drawn from the OS once per thread, then
/// stepped at each call), so the library needs no random number crate (issue 41, its size).
pub(crate) fn random_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    let v = h.finish();
    (v ^ (v >> 32)) as u32
}

#[cfg(test)]
mod random_tests {
    /// Numbers drawn in a row differ (a repeat among 1,000 draws of 32 bits is a 1-in-10,000
    /// chance), and their bits are spread over the whole range.
    #[test]
    fn draws_differ_and_spread_over_the_range() {
        let v: Vec<u32> = (0..1000).map(|_| super::random_u32()).collect();
        let distinct: std::collections::HashSet<u32> = v.iter().copied().collect();
        assert!(distinct.len() >= 999, "{} distinct", distinct.len());
        assert!(v.iter().any(|&x| x >= 1 << 31) && v.iter().any(|&x| x < 1 << 31));
        assert!(v.iter().any(|&x| x & 1 == 1) && v.iter().any(|&x| x & 1 == 0));
    }
}
