//! Small helpers over flat arrays, shared by the analyser's phases: bitsets held in `u64`
//! words, two `u32` in one `u64`, prefix sums for CSR layouts, and the merge of two sorted runs.
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

/// One word of two halves, `hi` above `lo`: a 64-bit id held as two `u32` (the one-pass
/// parse's raw targets), a search record's target and source numbers, a vertex's label and
/// semi-dominator (see `dominators`).
#[inline]
pub(crate) fn pair(hi: u32, lo: u32) -> u64 {
    ((hi as u64) << 32) | lo as u64
}

/// The halves of a [`pair`], high first.
#[inline]
pub(crate) fn halves(e: u64) -> (u32, u32) {
    ((e >> 32) as u32, e as u32)
}

/// The number of runs of equal values in `keys` (its distinct values, if they come sorted).
#[inline]
pub(crate) fn runs<T: PartialEq>(keys: impl Iterator<Item = T>) -> usize {
    let mut n = 0;
    let mut last = None;
    for k in keys {
        if last.as_ref() != Some(&k) {
            n += 1;
            last = Some(k);
        }
    }
    n
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

/// The number of leading elements of `v` that satisfy `pred` (which holds for a prefix of
/// `v`), found by galloping from the front: `O(log k)` for an answer `k`, so that copying
/// runs of `k` costs about what reading them does.
#[inline]
pub(crate) fn gallop<T>(v: &[T], pred: impl Fn(&T) -> bool) -> usize {
    let mut hi = 1;
    while hi < v.len() && pred(&v[hi]) {
        hi *= 2;
    }
    let lo = hi / 2;
    let hi = hi.min(v.len());
    lo + v[lo..hi].partition_point(pred)
}

/// `b` (sorted) merged into `a` (sorted), equal elements of `a` first; returns whether an
/// element of `b` equals one of `a`. The elements of `a` up to `b`'s first stay where they are
/// and `a` grows after them; only those above it are moved aside. HotSpot's workers' ids are
/// two long runs, the first with a few class ids beyond the second's start: `a` mostly grows in
/// place (a large block is remapped, not copied), where a merge into new memory would write
/// both runs to fresh pages.
///
/// The answer costs a comparison per run copied, not per element: an element `q` of `b` equal
/// to some of `a` stays at `b`'s front until `a`'s elements up to it are copied, and the last
/// of those is then equal to it.
pub(crate) fn merge_into<T: Ord + Copy, A>(a: &mut A, b: &[T]) -> bool
where
    A: super::column::Append<T> + std::ops::Deref<Target = [T]>,
{
    let Some(first) = b.first() else {
        return false;
    };
    let at = a.partition_point(|x| x <= first);
    // (Equal by the order: `x >= y` where `x <= y` is known.)
    let mut common = at > 0 && a[at - 1] >= *first;
    let tail = a.split_tail(at);
    a.reserve_more(tail.len() + b.len());
    let (mut x, mut y) = (&tail[..], b);
    // Runs that lie wholly between two elements of the other side are copied whole.
    while let (Some(p), Some(q)) = (x.first(), y.first()) {
        if p <= q {
            let k = gallop(x, |v| v <= q);
            common |= x[k - 1] >= *q;
            a.append_slice(&x[..k]);
            x = &x[k..];
        } else {
            let k = gallop(y, |v| v < p);
            a.append_slice(&y[..k]);
            y = &y[k..];
        }
    }
    a.append_slice(x);
    a.append_slice(y);
    common
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The merge is the sorted concatenation, whatever the runs look like, and says whether
        /// the two held a value in common.
        #[test]
        fn merge_into_sorts_the_concatenation(
            mut a in proptest::collection::vec(0u64..50, 0..200),
            mut b in proptest::collection::vec(0u64..50, 0..200),
            spread in 1u64..1000,
        ) {
            a.iter_mut().for_each(|x| *x *= spread);
            a.sort_unstable();
            b.sort_unstable();
            let mut want = [a.clone(), b.clone()].concat();
            want.sort_unstable();
            let common = b.iter().any(|x| a.binary_search(x).is_ok());
            prop_assert_eq!(merge_into(&mut a, &b), common);
            prop_assert_eq!(a, want);
        }
    }

    #[test]
    fn gallop_counts_the_prefix() {
        let v: Vec<u32> = (0..1000).collect();
        for k in [0, 1, 2, 3, 7, 8, 9, 511, 512, 999, 1000] {
            assert_eq!(gallop(&v, |&x| x < k), k as usize, "{k}");
        }
        assert_eq!(gallop::<u32>(&[], |_| true), 0);
    }

    #[test]
    fn bits_and_sums() {
        let mut b = vec![0u64; 3];
        for i in [0, 5, 63, 64, 130, 191] {
            set_bit(&mut b, i);
        }
        assert!(bit(&b, 63) && bit(&b, 64) && !bit(&b, 62));
        let seen: Vec<usize> = (0..192).filter(|&i| bit(&b, i)).collect();
        assert_eq!(seen, vec![0, 5, 63, 64, 130, 191]);
        let mut v = vec![1, 0, 2, 3];
        prefix_sums(&mut v);
        assert_eq!(v, vec![1, 1, 3, 6]);
    }

    #[test]
    fn a_pair_holds_both_halves_high_first() {
        let e = pair(0x8765_4321, 0xfedc_ba98);
        assert_eq!(e, 0x8765_4321_fedc_ba98);
        assert_eq!(halves(e), (0x8765_4321, 0xfedc_ba98));
        assert_eq!(halves(pair(1, 0)), (1, 0));
        assert_eq!(halves(pair(0, 1)), (0, 1));
    }

    #[test]
    fn runs_counts_the_runs_of_equal_values() {
        assert_eq!(runs([3, 3, 1, 1, 1, 3, 7].into_iter()), 4);
        assert_eq!(runs([5].into_iter()), 1);
        assert_eq!(runs(std::iter::empty::<u8>()), 0);
    }

    /// A whole array that satisfies the predicate, of a power-of-two length: the gallop stops
    /// at its end without reading past it.
    #[test]
    fn gallop_stops_at_the_end_of_a_power_of_two() {
        for len in [1usize, 2, 8, 64] {
            let v: Vec<u32> = (0..len as u32).collect();
            assert_eq!(gallop(&v, |_| true), len, "{len}");
        }
    }

    /// A value ordered by its key alone, so that which side an element came from shows.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Keyed(u32, char);

    impl PartialOrd for Keyed {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }

    impl Ord for Keyed {
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            self.0.cmp(&o.0)
        }
    }

    #[test]
    fn merge_into_puts_equal_elements_of_a_first() {
        let k = |v: &[(u32, char)]| v.iter().map(|&(n, c)| Keyed(n, c)).collect::<Vec<_>>();
        let mut a = k(&[(1, 'a'), (3, 'a'), (3, 'a'), (5, 'a')]);
        assert!(merge_into(
            &mut a,
            &k(&[(0, 'b'), (3, 'b'), (5, 'b'), (6, 'b')])
        ));
        let want = [
            (0, 'b'),
            (1, 'a'),
            (3, 'a'),
            (3, 'a'),
            (3, 'b'),
            (5, 'a'),
            (5, 'b'),
            (6, 'b'),
        ];
        assert_eq!(a, k(&want));
    }
}
