//! What the processor offers beyond the target's baseline, used where this machine has it.
//!
//! Invariants: code run through [`with_popcnt`] is compiled with the `popcnt` instruction, and
//! runs so only where the processor has it (checked at run time, once; elsewhere the same code
//! runs compiled for the baseline, with the same results).

/// Run `f` compiled with the `popcnt` instruction where the processor has it (x86_64: the
/// baseline target counts bits in software, a dozen dependent instructions per `count_ones`),
/// else as it is. For a hot loop that counts bits, given as a closure marked
/// `#[inline(always)]`: it is then inlined into the function compiled for the feature, and the
/// loop with it (unmarked, it stays a function of its own, compiled for the baseline, since it
/// is called from both branches). AArch64's baseline counts bits in hardware already.
#[inline(always)]
pub fn with_popcnt<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the processor has `popcnt` (checked just above), the one feature the function
        // is compiled for; it only calls `f`.
        #[allow(unsafe_code)]
        return unsafe { popcnt(f) };
    }
    f()
}

/// `f()`, compiled with `popcnt` (see [`with_popcnt`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
#[allow(unsafe_code)]
unsafe fn popcnt<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_counted_alike_with_and_without_the_instruction() {
        let words = [
            0u64,
            1,
            u64::MAX,
            0x8000_0000_0000_0001,
            0x0123_4567_89ab_cdef,
        ];
        let plain: Vec<u32> = words.iter().map(|w| w.count_ones()).collect();
        let fast = with_popcnt(|| words.iter().map(|w| w.count_ones()).collect::<Vec<u32>>());
        assert_eq!(plain, vec![0, 1, 64, 2, 32]);
        assert_eq!(fast, plain);
    }
}
