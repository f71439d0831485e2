//! sys: the few OS wrappers more than one of oomguard's crates needs (DESIGN.md, "Crates").
//!
//! - [`mapped`]: read-only maps of files and windows of them, the cache-prefetch hint, the
//!   executable's huge-page allocator.
//! - [`fs`]: the file-system seam ([`fs::Fs`], with a fault-injecting twin for tests) and the one
//!   durable atomic write ([`fs::write_atomic`]).
//!
//! It holds no policy and no logic of the agent's: only what wraps the OS. Unsafe code lives here
//! (each block with a `// SAFETY:` comment), in the agent's `hook`, `dump`, `child` and `jni`, and
//! nowhere else.

pub mod fs;
pub mod mapped;
