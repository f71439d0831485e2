//! A per-node or per-edge array of the index, held in the process's memory or in a file-backed
//! scratch array ([`sys::scratch`]), read and written alike through a slice (issue 43: the
//! analysis's own anonymous memory stays within a budget whatever the dump; the index's large
//! arrays go to a scratch directory the caller names, whose pages the kernel can write back and
//! drop).
//!
//! Invariants: both forms hold the same values; moving one to a file ([`Column::spill`]) keeps
//! every value and frees the memory; a scratch array that cannot be made (a full disk, the cap)
//! leaves the column in memory and says why, never loses it.
#![forbid(unsafe_code)]

use sys::scratch::{Buf, Plain, Scratch, GROW_MIN};

/// See the module documentation. (Both forms are one [`Buf`]: a pointer and a length, read
/// without a branch on where the values are.)
pub struct Column<T: Plain>(Buf<T>);

impl<T: Plain> Default for Column<T> {
    fn default() -> Self {
        Column(Buf::default())
    }
}

impl<T: Plain + PartialEq> PartialEq for Column<T> {
    fn eq(&self, o: &Self) -> bool {
        self[..] == o[..]
    }
}

impl<T: Plain + std::fmt::Debug> std::fmt::Debug for Column<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self[..].fmt(f)
    }
}

impl<T: Plain> From<Vec<T>> for Column<T> {
    fn from(v: Vec<T>) -> Self {
        Column(Buf::from(v))
    }
}

impl<T: Plain> std::ops::Deref for Column<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T: Plain> std::ops::DerefMut for Column<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<T: Plain> Column<T> {
    /// `n` copies of `x`: in a scratch array if `scratch` is given and one can be made (the
    /// error says why not), else in memory: written here (faulted in a part at a time first:
    /// [`sys::mapped::prefault`]), but zeros, which take pages the kernel zeroes when first
    /// touched, by whichever threads then write them ([`Column::filled_written`] writes them
    /// here too).
    pub fn filled(n: usize, x: T, scratch: Option<&Scratch>) -> (Self, Option<String>) {
        let Some(s) = scratch else {
            return match sys::scratch::is_zero(&x) {
                true => (vec![x; n].into(), None),
                false => (filled_vec(n, x).into(), None),
            };
        };
        match s.zeroed::<T>(n) {
            Ok(mut f) => {
                f.fill(x);
                (Column(f.into()), None)
            }
            Err(e) => (filled_vec(n, x).into(), Some(e.to_string())),
        }
    }

    /// `n` zeros in a scratch array if `scratch` is given and one can be made (a fresh file:
    /// no page is touched until it is written); `None` otherwise.
    fn zeroed_file(n: usize, scratch: Option<&Scratch>) -> Option<Self> {
        Some(Column(scratch?.zeroed::<T>(n).ok()?.into()))
    }

    /// [`Column::filled`], but in memory every page is written here, zeros too (so that the
    /// thread that makes the array faults its pages in, not the one that fills it later).
    pub fn filled_written(n: usize, x: T, scratch: Option<&Scratch>) -> (Self, Option<String>) {
        match scratch {
            Some(_) => Column::filled(n, x, scratch),
            None => (filled_vec(n, x).into(), None),
        }
    }

    /// Whether the values are in a scratch file.
    pub fn in_file(&self) -> bool {
        self.0.in_file()
    }

    /// Move the values into a scratch array (nothing if they are there already); on failure
    /// they stay in memory, and the error says why.
    pub fn spill(&mut self, scratch: &Scratch) -> Result<(), String> {
        if !self.in_file() {
            let f = scratch.copy_of(self).map_err(|e| e.to_string())?;
            self.0 = f.into();
        }
        Ok(())
    }

    /// Keep the first `n` values.
    pub fn truncate(&mut self, n: usize) {
        self.0.truncate(n)
    }

    /// The values as a vector (moved out of memory, copied out of a file).
    pub fn into_vec(self) -> Vec<T> {
        self.0.into_vec()
    }

    /// Free memory the vector holds beyond its length.
    pub fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit()
    }
}

/// A list that grows by [`Grow::push`]: in a scratch array if one could be made (its file grows
/// by half when full; if it cannot, the list moves into memory: never lost, never a panic),
/// else a vector in memory. A push is a store and a count while there is room, either way.
pub struct Grow<T: Plain>(Buf<T>);

impl<T: Plain> Grow<T> {
    /// Room for `cap` values (in memory: the vector's capacity).
    pub fn with_capacity(cap: usize, scratch: Option<&Scratch>) -> Self {
        let mut b = match Column::zeroed_file(cap, scratch) {
            Some(Column(f)) => f,
            None => Buf::from(Vec::with_capacity(cap)),
        };
        b.truncate(0);
        Grow(b)
    }

    #[inline(always)]
    pub fn push(&mut self, x: T) {
        self.0.push(x)
    }

    /// An empty list that grows in a scratch file if `scratch` is given.
    pub fn new_in(scratch: Option<&Scratch>) -> Self {
        Grow::with_capacity(if scratch.is_some() { GROW_MIN } else { 0 }, scratch)
    }

    /// Keep the first `n` values.
    pub fn truncate(&mut self, n: usize) {
        self.0.truncate(n)
    }

    /// Free memory a vector holds beyond its length.
    pub fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit()
    }

    /// Whether the values are in a scratch file.
    pub fn in_file(&self) -> bool {
        self.0.in_file()
    }

    /// Replace the values by those of `it` (a vector keeps its memory).
    pub fn refill(&mut self, it: impl Iterator<Item = T>) {
        self.truncate(0);
        self.0.extend(it)
    }

    /// Make it `n` long: cut, or `x` appended (the values kept are not written again).
    pub fn set_len_with(&mut self, n: usize, x: T) {
        match n.checked_sub(self.len()) {
            None => self.truncate(n),
            Some(more) => self.0.extend(std::iter::repeat_n(x, more)),
        }
    }

    /// Append the values of `s`.
    pub fn extend_from_slice(&mut self, s: &[T]) {
        self.0.extend_from_slice(s)
    }

    /// Drop consecutive repeats (as `Vec::dedup`).
    pub fn dedup(&mut self)
    where
        T: PartialEq,
    {
        let s: &mut [T] = self;
        // Nothing is written before the first repeat: a list with none (the ids of a heap)
        // is only read (at 10 M objects, 80 MB written back as they were took 13 ms).
        let Some(first) = s.windows(2).position(|p| p[0] == p[1]) else {
            return;
        };
        let mut w = first + 1;
        for r in first + 2..s.len() {
            if s[r] != s[w - 1] {
                s[w] = s[r];
                w += 1;
            }
        }
        self.truncate(w);
    }

    /// The values as a fixed-length [`Column`] (a file stays the file).
    pub fn into_column(self) -> Column<T> {
        Column(self.0)
    }
}

/// What [`crate::arrays::merge_into`] merges into: a vector or a [`Grow`].
pub(crate) trait Append<T> {
    /// Remove the values from `at` on and return them.
    fn split_tail(&mut self, at: usize) -> Vec<T>;
    fn append_slice(&mut self, s: &[T]);
    /// Room for `n` more values, if that saves growing step by step.
    fn reserve_more(&mut self, n: usize);
}

impl<T: Clone> Append<T> for Vec<T> {
    fn split_tail(&mut self, at: usize) -> Vec<T> {
        self.split_off(at)
    }
    fn append_slice(&mut self, s: &[T]) {
        self.extend_from_slice(s)
    }
    fn reserve_more(&mut self, n: usize) {
        self.reserve_exact(n)
    }
}

impl<T: Plain> Append<T> for Grow<T> {
    fn split_tail(&mut self, at: usize) -> Vec<T> {
        let tail = self[at.min(self.len())..].to_vec();
        self.truncate(at);
        tail
    }
    fn append_slice(&mut self, s: &[T]) {
        self.extend_from_slice(s)
    }
    fn reserve_more(&mut self, n: usize) {
        self.0.reserve_exact(n)
    }
}

impl<T: Plain> Default for Grow<T> {
    fn default() -> Self {
        Grow(Buf::default())
    }
}

impl<T: Plain> From<Vec<T>> for Grow<T> {
    fn from(v: Vec<T>) -> Self {
        Grow(Buf::from(v))
    }
}

impl<T: Plain> std::ops::Deref for Grow<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T: Plain> std::ops::DerefMut for Grow<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<T: Plain + PartialEq> PartialEq for Grow<T> {
    fn eq(&self, o: &Self) -> bool {
        self[..] == o[..]
    }
}

impl<T: Plain + std::fmt::Debug> std::fmt::Debug for Grow<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self[..].fmt(f)
    }
}

fn filled_vec<T: Plain>(n: usize, x: T) -> Vec<T> {
    // (Written here, not allocated as zeros: see `index::node_arrays`; faulted in first, in
    // one call a few MiB at a time rather than a fault a page.)
    let mut v = Vec::with_capacity(n);
    sys::scratch::extend_in_parts(&mut v, n, |v, r| v.extend(std::iter::repeat_n(x, r.len())));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_hold_the_same_values_and_a_spill_keeps_them() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 20).unwrap();
        let (mut a, e) = Column::filled(1000, [7u32, 9], Some(&s));
        assert!(e.is_none() && a.in_file());
        a[3] = [1, 2];
        let (mut b, _) = Column::filled(1000, [7u32, 9], None);
        assert!(!b.in_file());
        b[3] = [1, 2];
        assert_eq!(&a[..], &b[..]);
        b.spill(&s).unwrap();
        assert!(b.in_file());
        assert_eq!(&a[..], &b[..]);
        b.truncate(4);
        assert_eq!(b.len(), 4);
        assert_eq!(b.into_vec()[3], [1, 2]);
    }

    #[test]
    fn a_grown_list_keeps_its_values_in_a_file_and_past_its_capacity() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 26).unwrap();
        for scratch in [Some(&s), None] {
            let mut g = Grow::with_capacity(3, scratch);
            for x in 0..10u32 {
                g.push(x * 2);
            }
            g[1] = 7;
            assert_eq!(&g[..], &[0, 7, 4, 6, 8, 10, 12, 14, 16, 18]);
            assert_eq!(g.in_file(), scratch.is_some());
            g.truncate(2);
            assert_eq!(&g[..], &[0, 7]);
        }
        // Past its first file's size, in the file still.
        let mut g = Grow::new_in(Some(&s));
        for x in 0..(GROW_MIN as u64 * 2 + 3) {
            g.push(x);
        }
        assert!(g.in_file());
        assert_eq!(
            (g.len(), g[GROW_MIN * 2 + 2]),
            (GROW_MIN * 2 + 3, GROW_MIN as u64 * 2 + 2)
        );
        let mut d = Grow::new_in(Some(&s));
        d.extend_from_slice(&[1u64, 1, 2, 3, 3, 3, 4]);
        d.dedup();
        assert_eq!(&d[..], &[1, 2, 3, 4]);
        let tail = d.split_tail(2);
        assert_eq!((&d[..], tail), (&[1u64, 2][..], vec![3, 4]));
        let c = d.into_column();
        assert!(c.in_file() && c[..] == [1, 2]);
        let z: Column<u64> = Column::zeroed_file(5, Some(&s)).unwrap();
        assert!(z.in_file() && z.iter().all(|&x| x == 0));
    }

    #[test]
    fn a_column_the_cap_refuses_stays_in_memory_and_says_why() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 4096).unwrap();
        let (a, e) = Column::filled(2000, 5u32, Some(&s));
        assert!(!a.in_file());
        assert!(e.unwrap().contains("over their cap"));
        assert!(a.iter().all(|&x| x == 5));
        let mut b: Column<u64> = vec![1u64; 1000].into();
        let e = b.spill(&s).unwrap_err();
        assert!(e.contains("over their cap"), "{e}");
        assert!(!b.in_file() && b.iter().all(|&x| x == 1));
    }

    #[test]
    fn columns_and_lists_compare_and_print_as_their_values() {
        let a: Column<u32> = vec![1, 2].into();
        assert!(a == Column::from(vec![1, 2]) && a != Column::from(vec![1, 3]));
        assert_eq!(format!("{a:?}"), "[1, 2]");
        let g: Grow<u32> = vec![1, 2].into();
        assert!(g == Grow::from(vec![1, 2]) && g != Grow::from(vec![2, 2]));
        assert_eq!(format!("{g:?}"), "[1, 2]");
    }

    /// `filled` and `filled_written`: `n` copies in memory without scratch (zeros too, and a
    /// column of several prefaulted parts); `filled_written` in memory, in a file and in
    /// memory with the reason when the cap refuses the file.
    #[test]
    fn filled_and_filled_written_hold_n_copies_in_memory_or_in_a_file() {
        for f in [Column::filled, Column::filled_written] {
            let (z, _) = f(5, 0u64, None);
            assert_eq!(&z[..], &[0; 5]);
        }
        let n = 3 * sys::scratch::PREFAULT_BYTES / 8 + 5;
        for f in [Column::filled, Column::filled_written] {
            let (big, _) = f(n, [9u32, 4], None);
            assert!(big.len() == n && big.iter().all(|&x| x == [9, 4]));
        }
        let (a, e) = Column::filled_written(3, 7u32, None);
        assert_eq!((&a[..], e, a.in_file()), (&[7, 7, 7][..], None, false));
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 20).unwrap();
        let (b, e) = Column::filled_written(3, 7u32, Some(&s));
        assert_eq!((&b[..], e, b.in_file()), (&[7, 7, 7][..], None, true));
        let small = Scratch::new(d.path(), 4096).unwrap();
        let (c, e) = Column::filled_written(2000, 5u32, Some(&small));
        assert!(!c.in_file() && c.len() == 2000 && c.iter().all(|&x| x == 5));
        assert!(e.unwrap().contains("over their cap"));
    }

    /// `shrink_to_fit` gives back a vector's room beyond its values (what the budget counts),
    /// and keeps the values.
    #[test]
    fn shrink_to_fit_frees_a_vectors_spare_room() {
        let mut v = Vec::with_capacity(1000);
        v.extend([1u32, 2, 3]);
        let mut c = Column::from(v);
        assert!(c.0.capacity() >= 1000);
        c.shrink_to_fit();
        assert!(c.0.capacity() < 1000 && c[..] == [1, 2, 3]);
        let mut g = Grow::with_capacity(1000, None);
        g.extend_from_slice(&[1u32, 2, 3]);
        assert!(g.0.capacity() >= 1000);
        g.shrink_to_fit();
        assert!(g.0.capacity() < 1000 && g[..] == [1, 2, 3]);
    }

    #[test]
    fn refill_and_set_len_with_replace_cut_or_pad_the_values() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 26).unwrap();
        for scratch in [Some(&s), None] {
            let mut g = Grow::new_in(scratch);
            g.extend_from_slice(&[1u32, 2, 3]);
            g.refill([7, 8].into_iter());
            assert_eq!(&g[..], &[7, 8]);
            g.set_len_with(4, 9);
            assert_eq!(&g[..], &[7, 8, 9, 9]);
            g.set_len_with(1, 0);
            assert_eq!(&g[..], &[7]);
            g.set_len_with(1, 5);
            assert_eq!(&g[..], &[7]);
            assert_eq!(g.in_file(), scratch.is_some());
            // `dedup` keeps a value unlike the one before it, repeats apart.
            g.refill([1, 2, 2, 3, 1].into_iter());
            g.dedup();
            assert_eq!(&g[..], &[1, 2, 3, 1]);
            // A repeat at the start, at the end, after a few values then one more, a run of
            // them, none.
            for (from, to) in [
                (&[4u32, 4, 5][..], &[4u32, 5][..]),
                (&[4, 5, 5], &[4, 5]),
                (&[1, 2, 3, 4, 4, 5], &[1, 2, 3, 4, 5]),
                (&[4, 5, 5, 5, 6, 7, 7], &[4, 5, 6, 7]),
                (&[4, 5, 6], &[4, 5, 6]),
                (&[4], &[4]),
            ] {
                g.refill(from.iter().copied());
                g.dedup();
                assert_eq!(&g[..], to, "{from:?}");
            }
            g.truncate(0);
            g.dedup();
            assert!(g.is_empty());
        }
    }

    /// `arrays::merge_into` into a list, in a file or in memory: the sorted values.
    #[test]
    fn a_list_merges_a_sorted_run_into_its_own() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 26).unwrap();
        for scratch in [Some(&s), None] {
            let mut g = Grow::new_in(scratch);
            g.extend_from_slice(&[1u64, 4, 9]);
            assert!(crate::arrays::merge_into(&mut g, &[2, 4, 10]));
            assert_eq!(&g[..], &[1, 2, 4, 4, 9, 10]);
            assert!(!crate::arrays::merge_into(&mut g, &[3, 11]));
            assert_eq!(&g[..], &[1, 2, 3, 4, 4, 9, 10, 11]);
            assert_eq!(g.in_file(), scratch.is_some());
        }
    }
}
