//! JNI exports.
pub mod probe;
