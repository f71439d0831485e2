//! [`Buf`]: one array type over a vector's memory or a scratch file, read through one pointer
//! and one length whichever holds it, so that the analysis's hot loops cost the same with
//! scratch or without (issue 43: an enum matched at every access or push made the analysis
//! without scratch 9 % slower).
//!
//! Invariants: `ptr` points at `cap` values owned by `home` (the vector's buffer, whose
//! capacity is `cap`, or the file's map, `cap` values long), of which the first `len` are the
//! array's; `len <= cap`. Only this type changes `home`, and every change sets `ptr` and `cap`
//! again. The vector's own length is not kept up to date (its values are [`Plain`]: nothing to
//! drop); it is set to `len` before the vector is used as one.

use super::{Plain, ScratchVec};
use std::ptr::NonNull;

/// See the module documentation.
pub struct Buf<T: Plain> {
    ptr: NonNull<T>,
    len: usize,
    cap: usize,
    home: Home<T>,
}

enum Home<T: Plain> {
    Heap(Vec<T>),
    File(ScratchVec<T>),
}

// SAFETY: a `Buf` owns its memory as a `Vec` or a `ScratchVec` does (the pointer is into it and
// no other value holds it), and `Plain` types are `Send` and `Sync`.
#[allow(unsafe_code)]
unsafe impl<T: Plain> Send for Buf<T> {}
// SAFETY: as for `Send`: a shared `Buf` gives only shared slices of `Plain` values.
#[allow(unsafe_code)]
unsafe impl<T: Plain> Sync for Buf<T> {}

/// The least a list in a file grows by, in values (the file is mapped again at each growth).
pub const GROW_MIN: usize = 1 << 18;

impl<T: Plain> Default for Buf<T> {
    fn default() -> Self {
        Buf::from(Vec::new())
    }
}

impl<T: Plain> From<Vec<T>> for Buf<T> {
    fn from(mut v: Vec<T>) -> Self {
        Buf {
            ptr: NonNull::new(v.as_mut_ptr()).unwrap_or(NonNull::dangling()),
            len: v.len(),
            cap: v.capacity(),
            home: Home::Heap(v),
        }
    }
}

impl<T: Plain> From<ScratchVec<T>> for Buf<T> {
    /// The file's values, all of them (a list pushed from empty: [`Buf::truncate`] to 0).
    fn from(mut f: ScratchVec<T>) -> Self {
        Buf {
            ptr: NonNull::new(f.as_mut_ptr()).unwrap_or(NonNull::dangling()),
            len: f.len(),
            cap: f.len(),
            home: Home::File(f),
        }
    }
}

impl<T: Plain> Buf<T> {
    /// Whether the values are in a scratch file.
    pub fn in_file(&self) -> bool {
        matches!(self.home, Home::File(_))
    }

    /// How many values fit before the array must grow.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Append `x`: a store and a count while there is room, in memory or in a file alike. A
    /// full file grows by half (at least [`GROW_MIN`] values); if it cannot (its cap, a full
    /// disk), the values move into memory: never lost.
    #[inline(always)]
    pub fn push(&mut self, x: T) {
        if self.len < self.cap {
            // SAFETY: `len < cap`: the slot is inside the memory `home` owns (invariants).
            #[allow(unsafe_code)]
            unsafe {
                self.ptr.as_ptr().add(self.len).write(x)
            };
            self.len += 1;
        } else {
            self.push_grown(x);
        }
    }

    #[inline(never)]
    fn push_grown(&mut self, x: T) {
        if let Home::File(f) = &mut self.home {
            let more = self.cap + (self.cap / 2).max(GROW_MIN);
            // (A file of no values has no map to grow: `grow` leaves it as it is.)
            if f.grow(more).is_ok() && f.len() > self.cap {
                self.reset();
                return self.push(x);
            }
        }
        let v = self.vec();
        v.push(x);
        self.reset();
    }

    /// The vector in memory, its length set to the array's (moved into memory from a file).
    fn vec(&mut self) -> &mut Vec<T> {
        if let Home::File(_) = self.home {
            self.home = Home::Heap(self[..].to_vec());
        }
        let len = self.len;
        match &mut self.home {
            Home::Heap(v) => {
                // SAFETY: the first `len <= cap` values of the buffer are the array's, written
                // (invariants); `T` is `Plain`.
                #[allow(unsafe_code)]
                unsafe {
                    v.set_len(len)
                };
                v
            }
            Home::File(_) => unreachable!("moved into memory above"),
        }
    }

    /// `ptr`, `len` and `cap` from `home` after it changed (a vector's length is the array's).
    fn reset(&mut self) {
        let (ptr, len, cap) = match &mut self.home {
            Home::Heap(v) => (v.as_mut_ptr(), v.len(), v.capacity()),
            Home::File(f) => (f.as_mut_ptr(), self.len.min(f.len()), f.len()),
        };
        self.ptr = NonNull::new(ptr).unwrap_or(NonNull::dangling());
        self.len = len;
        self.cap = cap;
    }

    /// Keep the first `n` values (a file keeps its size).
    pub fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n);
    }

    /// Append the values of `s` (a vector grows once).
    pub fn extend_from_slice(&mut self, s: &[T]) {
        match self.home {
            Home::Heap(_) => {
                self.vec().extend_from_slice(s);
                self.reset();
            }
            Home::File(_) => s.iter().for_each(|&x| self.push(x)),
        }
    }

    /// Append the values of `it` (a vector grows as `Vec::extend` grows it).
    pub fn extend(&mut self, it: impl Iterator<Item = T>) {
        match self.home {
            Home::Heap(_) => {
                self.vec().extend(it);
                self.reset();
            }
            Home::File(_) => it.for_each(|x| self.push(x)),
        }
    }

    /// Room for `n` more values in memory (a file grows when it must).
    pub fn reserve_exact(&mut self, n: usize) {
        if let Home::Heap(_) = self.home {
            self.vec().reserve_exact(n);
            self.reset();
        }
    }

    /// Free the memory a vector holds beyond the array's length.
    pub fn shrink_to_fit(&mut self) {
        if let Home::Heap(_) = self.home {
            self.vec().shrink_to_fit();
            self.reset();
        }
    }

    /// The values as a vector (moved out of memory, copied out of a file).
    pub fn into_vec(mut self) -> Vec<T> {
        std::mem::take(self.vec())
    }
}

impl<T: Plain> std::ops::Deref for Buf<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: the first `len` values at `ptr` are the array's, in memory `home` owns and
        // keeps in place while `self` is borrowed (invariants).
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(self.ptr.as_ptr(), self.len)
        }
    }
}

impl<T: Plain> std::ops::DerefMut for Buf<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only view.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Scratch;
    use super::*;

    #[test]
    fn a_buf_in_memory_or_in_a_file_keeps_its_values_through_every_change() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 30).unwrap();
        for file in [false, true] {
            let mut b: Buf<u64> = if file {
                let mut b = Buf::from(s.zeroed::<u64>(3).unwrap());
                b.truncate(0);
                b
            } else {
                Buf::from(Vec::with_capacity(3))
            };
            let n = GROW_MIN as u64 * 2 + 5;
            for x in 0..n {
                b.push(x * 3);
            }
            assert_eq!(b.in_file(), file);
            assert_eq!(b.len(), n as usize);
            assert!(b.iter().enumerate().all(|(i, &x)| x == i as u64 * 3));
            b[1] = 7;
            b.truncate(4);
            b.extend_from_slice(&[1, 2]);
            b.extend([5u64, 6].into_iter());
            b.shrink_to_fit();
            b.reserve_exact(10);
            assert_eq!(&b[..], &[0, 7, 6, 9, 1, 2, 5, 6]);
            assert_eq!(b.into_vec(), vec![0, 7, 6, 9, 1, 2, 5, 6]);
        }
    }

    /// An array made with no values in a file (no map) takes pushes in memory; it once
    /// recursed, `grow` having nothing to grow.
    #[test]
    fn an_empty_file_array_takes_pushes() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 30).unwrap();
        let mut b = Buf::from(s.zeroed::<u32>(0).unwrap());
        for x in 0..10u32 {
            b.push(x);
        }
        assert!(b.iter().copied().eq(0..10));
    }

    #[test]
    fn a_file_that_cannot_grow_moves_its_values_into_memory() {
        let d = tempfile::tempdir().unwrap();
        // Room for one page: the first growth is refused by the cap.
        let s = Scratch::new(d.path(), 4096).unwrap();
        let mut b = Buf::from(s.zeroed::<u32>(1024).unwrap());
        b.truncate(0);
        for x in 0..5000u32 {
            b.push(x);
        }
        assert!(!b.in_file());
        assert!(b.iter().enumerate().all(|(i, &x)| x == i as u32));
    }

    /// A full list in a file grows by half its length, and by [`GROW_MIN`] values at least,
    /// staying in its file; in memory, `reserve_exact` and `shrink_to_fit` set the room.
    #[test]
    fn a_full_file_grows_by_half_or_the_least_step_and_memory_by_what_is_asked() {
        let d = tempfile::tempdir().unwrap();
        let s = Scratch::new(d.path(), 1 << 30).unwrap();
        for (len, grown) in [(10, 10 + GROW_MIN), (4 * GROW_MIN, 6 * GROW_MIN)] {
            let mut b = Buf::from(s.zeroed::<u32>(len).unwrap());
            assert_eq!(b.capacity(), len);
            b.push(1);
            assert!(b.in_file());
            assert_eq!((b.len(), b.capacity()), (len + 1, grown), "from {len}");
            assert_eq!(b[len], 1);
        }
        let mut b: Buf<u32> = Buf::from(Vec::with_capacity(5));
        assert_eq!(b.capacity(), 5);
        b.extend_from_slice(&[1, 2]);
        b.reserve_exact(1000);
        assert!(b.capacity() >= 1002, "{}", b.capacity());
        b.shrink_to_fit();
        assert_eq!(b.capacity(), 2);
        assert_eq!(&b[..], &[1, 2]);
    }
}
