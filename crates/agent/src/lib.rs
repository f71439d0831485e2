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
