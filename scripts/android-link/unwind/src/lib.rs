//! The `_Unwind_*` functions for the Android link check (see `Cargo.toml`): this archive only
//! re-exports the `unwinding` crate's unwinder. A fault inside the unwinder itself aborts, as
//! the NDK's libunwind does.
#![no_std]

extern crate unwinding;

unsafe extern "C" {
    fn abort() -> !;
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: bionic's abort takes no arguments and does not return.
    unsafe { abort() }
}
