//! Which system calls a child's parent may make here, by API level: Android 8 to 10 kill an
//! app for a call outside their seccomp allowlist (SIGSYS), and `pidfd_open` and
//! `pidfd_send_signal` are only on it from Android 11 (API 30).
//!
//! Invariant: [`pidfd_allowed`] is false wherever a pidfd call could kill the app.

use std::sync::atomic::{AtomicU32, Ordering};

/// "Not set" for [`API_OVERRIDE`].
const API_UNSET: u32 = u32::MAX;
/// The API level set by [`set_api_level`] (0: not Android), or [`API_UNSET`].
static API_OVERRIDE: AtomicU32 = AtomicU32::new(API_UNSET);

/// Override the API level [`api_level`] reports: `Some(level)` for an Android level, `None` for
/// a system that is not Android. Tests use it to reach the code paths of old Android versions.
pub fn set_api_level(api: Option<u32>) {
    API_OVERRIDE.store(api.unwrap_or(0), Ordering::Release);
}

/// The Android API level of this process: `None` on a system that is not Android. On Android,
/// `ro.build.version.sdk`; a property that cannot be read counts as level 0 (the oldest).
pub fn api_level() -> Option<u32> {
    match API_OVERRIDE.load(Ordering::Acquire) {
        API_UNSET => platform_api_level(),
        0 => None,
        n => Some(n),
    }
}

#[cfg(target_os = "android")]
fn platform_api_level() -> Option<u32> {
    // PROP_VALUE_MAX bytes.
    let mut buf = [0 as libc::c_char; 92];
    // SAFETY: a NUL-terminated name and a buffer of PROP_VALUE_MAX bytes, as bionic asks.
    let n =
        unsafe { libc::__system_property_get(c"ro.build.version.sdk".as_ptr(), buf.as_mut_ptr()) };
    if n <= 0 {
        return Some(0);
    }
    // SAFETY: bionic wrote a NUL-terminated value of at most PROP_VALUE_MAX bytes.
    let text = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Some(
        text.to_str()
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0),
    )
}

#[cfg(not(target_os = "android"))]
fn platform_api_level() -> Option<u32> {
    None
}

/// Whether `pidfd_open` and `pidfd_send_signal` may be called: everywhere but Android below 11
/// (API 30), whose seccomp filter kills the app for them (SIGSYS).
pub fn pidfd_allowed() -> bool {
    match api_level() {
        Some(api) => api >= 30,
        // Off Android, the kernel decides (Linux 5.3+), unless a seccomp filter judges this
        // process's calls: one may kill for `pidfd_open`, as Android 8-10's does (the tests run
        // the JVM under that very allowlist), so such a process polls instead.
        None => !under_seccomp_filter(),
    }
}

/// Whether a seccomp filter judges this process's system calls (`Seccomp: 2` in
/// `/proc/self/status`). Read on each call: a filter may be installed at any time, and this is
/// asked once per child.
fn under_seccomp_filter() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.strip_prefix("Seccomp:").is_some_and(|v| v.trim() == "2"))
    })
}

#[cfg(test)]
mod tests {
    /// Off Android there is no API level: the kernel and any seccomp filter decide instead.
    #[cfg(not(target_os = "android"))]
    #[test]
    fn off_android_there_is_no_api_level() {
        assert_eq!(super::platform_api_level(), None);
    }
}
