//! oomguard: an out-of-memory guard that lives inside an app's process.
//!
//! The map of the crate is `../shared/DESIGN.md`: one module per concern, unsafe code only in
//! `hook`, `dump` and `jni`. The pure modules forbid unsafe code with a module attribute.

pub mod agent;
pub mod child;
pub mod dump;
pub mod hook;
pub mod jni;
pub mod pipeline;
pub mod policy;
pub mod recorder;
pub mod sample;
pub mod spool;
pub mod trigger;
pub mod upload;
