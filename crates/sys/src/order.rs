//! One stable sort for the library's small, cold sorts (lists of incidents, leaks, groups of
//! threads), so that the shipped `.so` holds one copy of the standard library's stable sort
//! instead of one per element type and comparison (issue 41: each `sort_by` on a new type or
//! closure added 4 to 11 KB of code, with its unwind tables).
//!
//! [`sort_by`] sorts the indices `0..len` once, with the comparison behind a `dyn`, then moves the
//! elements into that order in place: the only code made per element type is the moves. It gives
//! exactly what `slice::sort_by` gives (stable: equal elements keep their order). The comparison
//! costs an indirect call, so hot sorts of millions of ids keep `sort_unstable` on their plain
//! types.

use std::cmp::Ordering;

/// Sorts `v` stably by `cmp`: the same order as `v.sort_by(cmp)`.
pub fn sort_by<T>(v: &mut [T], cmp: impl Fn(&T, &T) -> Ordering) {
    let order = indices_by(v.len(), &|a, b| cmp(&v[a], &v[b]));
    permute(v, &order);
}

/// Sorts `v` stably by `key`: the same order as `v.sort_by_key(key)`.
pub fn sort_by_key<T, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    sort_by(v, |a, b| key(a).cmp(&key(b)))
}

/// The indices `0..n` in the stable order of `cmp` (the one instantiation of the stable sort).
fn indices_by(n: usize, cmp: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| cmp(a, b));
    order
}

/// Moves `v[order[i]]` to `v[i]` for every `i`, cycle by cycle, by swaps (`order` is a
/// permutation of `0..v.len()`).
fn permute<T>(v: &mut [T], order: &[usize]) {
    let mut placed = vec![false; v.len()];
    for start in 0..v.len() {
        let mut at = start;
        while !placed[at] {
            placed[at] = true;
            let from = order[at];
            if from == start {
                break;
            }
            v.swap(at, from);
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{sort_by, sort_by_key};

    /// Every permutation of a few elements with repeated keys comes out as the standard
    /// library's stable sort puts it: the same order, ties in their first order.
    #[test]
    fn sorts_as_the_standard_stable_sort_does() {
        let mut seed = 0x9e37_79b9_u32;
        for len in 0..40usize {
            for _ in 0..25 {
                let v: Vec<(u8, usize)> = (0..len)
                    .map(|i| {
                        seed ^= seed << 13;
                        seed ^= seed >> 17;
                        seed ^= seed << 5;
                        ((seed % 5) as u8, i)
                    })
                    .collect();
                let mut want = v.clone();
                want.sort_by_key(|e| e.0);
                let mut got = v.clone();
                sort_by_key(&mut got, |e| e.0);
                assert_eq!(got, want, "{v:?}");
                let mut want = v.clone();
                let odd_first_then_down = |a: &(u8, usize), b: &(u8, usize)| {
                    (b.0 % 2).cmp(&(a.0 % 2)).then(b.0.cmp(&a.0))
                };
                want.sort_by(odd_first_then_down);
                let mut got = v;
                sort_by(&mut got, odd_first_then_down);
                assert_eq!(got, want);
            }
        }
    }

    /// Elements that own memory are moved, not copied: nothing is dropped twice or lost.
    #[test]
    fn owned_elements_are_moved_whole() {
        let mut v: Vec<String> = ["d", "b", "a", "c", "b"].map(String::from).to_vec();
        sort_by(&mut v, |a, b| a.cmp(b));
        assert_eq!(v, ["a", "b", "b", "c", "d"]);
    }
}
