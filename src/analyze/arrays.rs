//! Small helpers over flat arrays, shared by the analyser's phases: bitsets held in `u64`
//! words, and prefix sums for CSR layouts.
#![forbid(unsafe_code)]

/// Set bit `i`.
#[inline]
pub(crate) fn set_bit(bits: &mut [u64], i: usize) {
    bits[i / 64] |= 1 << (i % 64);
}

/// Whether bit `i` is set.
#[inline]
pub(crate) fn bit(bits: &[u64], i: usize) -> bool {
    bits[i / 64] >> (i % 64) & 1 == 1
}

/// Call `f` with each set bit's number in `lo..hi`.
#[inline]
pub(crate) fn for_each_bit(bits: &[u64], lo: usize, hi: usize, mut f: impl FnMut(usize)) {
    let mut wi = lo / 64;
    while wi * 64 < hi {
        let mut word = bits[wi];
        if wi == lo / 64 {
            word &= u64::MAX << (lo % 64);
        }
        if (wi + 1) * 64 > hi {
            word &= u64::MAX >> ((wi + 1) * 64 - hi);
        }
        while word != 0 {
            f(wi * 64 + word.trailing_zeros() as usize);
            word &= word - 1;
        }
        wi += 1;
    }
}

/// Replace each count with the running total up to and including it (the total is kept in a
/// register: a loop of `v[k + 1] += v[k]` waits on each store).
#[inline]
pub(crate) fn prefix_sums(v: &mut [u32]) {
    let mut acc = 0u32;
    for c in v.iter_mut() {
        acc += *c;
        *c = acc;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_and_sums() {
        let mut b = vec![0u64; 3];
        for i in [0, 5, 63, 64, 130, 191] {
            set_bit(&mut b, i);
        }
        assert!(bit(&b, 63) && bit(&b, 64) && !bit(&b, 62));
        let mut seen = Vec::new();
        for_each_bit(&b, 5, 131, |i| seen.push(i));
        assert_eq!(seen, vec![5, 63, 64, 130]);
        seen.clear();
        for_each_bit(&b, 0, 192, |i| seen.push(i));
        assert_eq!(seen, vec![0, 5, 63, 64, 130, 191]);
        let mut v = vec![1, 0, 2, 3];
        prefix_sums(&mut v);
        assert_eq!(v, vec![1, 1, 3, 6]);
    }
}
