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
    /// Where a push stops taking the fast path (`len <= room <= cap`): `cap`, except in a
    /// large vector, whose spare capacity is faulted in [`PREFAULT_BYTES`] at a time
    /// ([`crate::mapped::prefault`]) as pushes reach it.
    room: usize,
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

/// A vector of at least this many bytes of capacity has its spare capacity faulted in ahead
/// of its pushes, [`PREFAULT_BYTES`] at a time (one system call where a page fault each would
/// cost about half as much again: [`crate::mapped::prefault`]).
const PREFAULT_MIN: usize = 1 << 20;
/// How much of a large vector's spare capacity is faulted in at once.
pub const PREFAULT_BYTES: usize = 256 << 10;

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
            room: heap_room(v.len(), v.capacity(), std::mem::size_of::<T>()),
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
            room: f.len(),
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
        if self.len < self.room {
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
        if self.len < self.cap {
            // A large vector with room left: fault in the next part of it first.
            self.prefault_ahead();
            return self.push(x);
        }
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

    /// `ptr`, `len`, `cap` and `room` from `home` after it changed (a vector's length is the
    /// array's).
    fn reset(&mut self) {
        let (ptr, len, cap, room) = match &mut self.home {
            Home::Heap(v) => {
                let room = heap_room(v.len(), v.capacity(), std::mem::size_of::<T>());
                (v.as_mut_ptr(), v.len(), v.capacity(), room)
            }
            Home::File(f) => (f.as_mut_ptr(), self.len.min(f.len()), f.len(), f.len()),
        };
        self.ptr = NonNull::new(ptr).unwrap_or(NonNull::dangling());
        self.len = len;
        self.cap = cap;
        self.room = room;
    }

    /// Fault in up to [`PREFAULT_BYTES`] of the spare capacity from `len` on, and let pushes
    /// fill it on the fast path.
    fn prefault_ahead(&mut self) {
        let end = self.cap.min(self.len + prefault_step::<T>());
        // SAFETY: `len..end` lies within the `cap` values `home` owns (invariants), which no
        // one else can see while `self` is borrowed mutably; as `MaybeUninit` nothing is read.
        #[allow(unsafe_code)]
        let spare = unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr
                    .as_ptr()
                    .add(self.len)
                    .cast::<std::mem::MaybeUninit<T>>(),
                end - self.len,
            )
        };
        crate::mapped::prefault(spare);
        self.room = end;
    }

    /// Keep the first `n` values (a file keeps its size).
    pub fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n);
    }

    /// Append the values of `s` (a vector grows once).
    pub fn extend_from_slice(&mut self, s: &[T]) {
        match self.home {
            Home::Heap(_) => {
                let v = self.vec();
                v.reserve(s.len());
                if v.capacity() * std::mem::size_of::<T>() < PREFAULT_MIN {
                    v.extend_from_slice(s);
                } else {
                    extend_in_parts(v, s.len(), |v, r| v.extend_from_slice(&s[r]));
                }
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

/// How many values of `T` [`PREFAULT_BYTES`] hold (at least one).
fn prefault_step<T>() -> usize {
    (PREFAULT_BYTES / std::mem::size_of::<T>().max(1)).max(1)
}

/// Append `n` values to `v` a part of [`PREFAULT_BYTES`] at a time, each part faulted in
/// ([`crate::mapped::prefault`]) just before `write(v, range)` appends the values `range` of
/// the `n` (so that the zeroed pages are still in the cache when they are written).
pub fn extend_in_parts<T>(
    v: &mut Vec<T>,
    n: usize,
    mut write: impl FnMut(&mut Vec<T>, std::ops::Range<usize>),
) {
    v.reserve(n);
    let step = prefault_step::<T>();
    let mut at = 0;
    while at < n {
        let k = step.min(n - at);
        crate::mapped::prefault(&mut v.spare_capacity_mut()[..k]);
        write(v, at..at + k);
        at += k;
    }
}

/// Where a vector of `len` values and room for `cap` of `size` bytes each stops taking the
/// fast path: at its capacity if it is small, else at its length (the next push faults in the
/// next part: [`Buf::prefault_ahead`]).
fn heap_room(len: usize, cap: usize, size: usize) -> usize {
    if cap.saturating_mul(size) >= PREFAULT_MIN {
        len
    } else {
        cap
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

    /// A large vector in memory faults in its spare capacity [`PREFAULT_BYTES`] ahead of its
    /// pushes, and no further; a small one has its whole capacity for the fast path; a large
    /// slice appended keeps its values.
    #[test]
    fn a_large_vector_is_faulted_in_a_part_ahead_of_its_pushes() {
        use crate::mapped::{page_size, tests::resident};
        let small: Buf<u64> = Buf::from(Vec::with_capacity(1000));
        assert_eq!((small.room, small.capacity()), (1000, 1000));
        // 64 MiB: above any threshold of the system allocator's, so a fresh mapping that
        // nothing has touched.
        let cap = (64 << 20) / 8;
        let mut b: Buf<u64> = Buf::from(Vec::with_capacity(cap));
        assert_eq!((b.room, b.capacity()), (0, cap));
        let per = PREFAULT_BYTES / 8;
        let page = page_size();
        let base = b.ptr.as_ptr() as usize & !(page - 1);
        // Pages holding bytes `0..in_bytes` of the values all in memory, and none of those
        // from a page past `out_bytes` up to 4 parts on.
        let check = |in_bytes: usize, out_bytes: usize, at: usize| {
            let r = resident(base as *const u8, (at - base) + 4 * PREFAULT_BYTES + page);
            let page_of = |byte: usize| (at + byte - base) / page;
            assert!(r[page_of(0) + 1..page_of(in_bytes)].iter().all(|&x| x));
            assert!(r[page_of(out_bytes) + 1..].iter().all(|&x| !x));
        };
        b.push(1);
        assert_eq!((b.len(), b.room, b.capacity()), (1, per, cap));
        let done = crate::mapped::prefault::<u8>(&mut []);
        assert!(!done, "an empty slice has no page to fault in");
        let at = b.ptr.as_ptr() as usize;
        let kernel_has_it = crate::mapped::tests::kernel_populates();
        if kernel_has_it {
            check(PREFAULT_BYTES, PREFAULT_BYTES, at);
        } else {
            eprintln!("no MADV_POPULATE_WRITE on this kernel: the pages are not checked");
        }
        for x in 1..per as u64 + 1 {
            b.push(x);
        }
        assert_eq!((b.len(), b.room), (per + 1, 2 * per));
        if kernel_has_it {
            check(2 * PREFAULT_BYTES, 2 * PREFAULT_BYTES + 8, at);
        }
        assert!(b
            .iter()
            .copied()
            .eq([1].into_iter().chain(1..per as u64 + 1)));
        let more: Vec<u64> = (0..3 * per as u64 + 7).collect();
        b.truncate(0);
        b.extend_from_slice(&more);
        assert_eq!(&b[..], &more[..]);
        assert_eq!(b.capacity(), cap);
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
