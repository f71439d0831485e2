//! An array written by several threads side by side, each over a stretch of its own, front to
//! back, without the pass that writes every value first (`vec![0; n]`): in a block the
//! allocator had kept (its pages already faulted in), that pass is a `memset` of the whole
//! array on one thread while the writers wait (issue 43: about 10 ms for the analyser's 67 MiB
//! of edges at 10 M objects).
//!
//! Invariants: a [`Writer`] writes its stretch's slots in order, each once, and says on drop how
//! many it wrote; [`Stretched::finish`] writes the slots no writer reached before it makes the
//! vector that long, so every value in it has been written (with the writers' values, or the
//! filler).

use super::Plain;
use std::mem::MaybeUninit;

/// A vector of `T` being filled in stretches (see the module's docs).
pub struct Stretched<T: Plain> {
    /// Room for every stretch, none of it counted as written.
    v: Vec<T>,
    /// The stretches' lengths, in order.
    sizes: Vec<usize>,
    /// How many slots of each stretch its last writer wrote (from its start).
    done: Vec<usize>,
}

impl<T: Plain> Stretched<T> {
    /// Room for stretches of `sizes` values, one after the other; `None` if they add up to
    /// more than a vector can hold.
    pub fn new(sizes: &[usize]) -> Option<Self> {
        let total = sizes.iter().try_fold(0usize, |a, &s| a.checked_add(s))?;
        if total.checked_mul(std::mem::size_of::<T>())? > isize::MAX as usize {
            return None;
        }
        Some(Stretched {
            v: Vec::with_capacity(total),
            sizes: sizes.to_vec(),
            done: vec![0; sizes.len()],
        })
    }

    /// A writer for each stretch, in order.
    pub fn writers(&mut self) -> Vec<Writer<'_, T>> {
        let mut rest = &mut self.v.spare_capacity_mut()[..];
        let mut out = Vec::with_capacity(self.sizes.len());
        for (&size, done) in self.sizes.iter().zip(self.done.iter_mut()) {
            let (slots, r) = std::mem::take(&mut rest).split_at_mut(size);
            rest = r;
            out.push(Writer {
                slots,
                n: 0,
                done: Some(done),
            });
        }
        out
    }

    /// The vector, every stretch written whole: the slots past the last one its writer wrote
    /// hold `fill`. True with it if every writer filled its stretch.
    pub fn finish(mut self, fill: T) -> (Vec<T>, bool) {
        let mut whole = true;
        let mut at = 0;
        let total: usize = self.sizes.iter().sum();
        let spare = self.v.spare_capacity_mut();
        for (&size, &done) in self.sizes.iter().zip(&self.done) {
            whole &= done == size;
            for slot in &mut spare[at + done.min(size)..at + size] {
                slot.write(fill);
            }
            at += size;
        }
        // SAFETY: the capacity holds `total` (`new`), and each of the first `total` slots has
        // been written: those a writer reached by it (a writer writes its stretch from the
        // start, in order, and reports the count on drop; a writer forgotten reported 0), the
        // rest of each stretch just above. `T` is `Plain`, so written slots are valid values.
        #[allow(unsafe_code)]
        unsafe {
            self.v.set_len(total)
        };
        (self.v, whole)
    }
}

/// One stretch of a [`Stretched`] (or of a slice: [`Writer::over`]), written front to back.
pub struct Writer<'a, T: Plain> {
    slots: &'a mut [MaybeUninit<T>],
    /// Slots written.
    n: usize,
    /// Where the count goes on drop (a [`Stretched`]'s).
    done: Option<&'a mut usize>,
}

impl<'a, T: Plain> Writer<'a, T> {
    /// A writer over values already there (overwritten from the start).
    pub fn over(values: &'a mut [T]) -> Self {
        let len = values.len();
        // SAFETY: `MaybeUninit<T>` has `T`'s size and alignment, and the slice is borrowed
        // mutably for the writer's life. Only initialised values are ever written through it
        // (`push`), so the slots stay valid `T`s for the owner when the borrow ends.
        #[allow(unsafe_code)]
        let slots = unsafe {
            std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<MaybeUninit<T>>(), len)
        };
        Writer {
            slots,
            n: 0,
            done: None,
        }
    }

    /// Write the next slot; `None` if the stretch is full.
    #[inline(always)]
    pub fn push(&mut self, x: T) -> Option<()> {
        self.slots.get_mut(self.n)?.write(x);
        self.n += 1;
        Some(())
    }

    /// Slots written.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether none is written.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The stretch's length.
    pub fn room(&self) -> usize {
        self.slots.len()
    }
}

impl<T: Plain> Drop for Writer<'_, T> {
    fn drop(&mut self) {
        if let Some(d) = self.done.take() {
            *d = self.n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Writers on threads of their own fill their stretches; the vector holds what each wrote,
    /// in order, and the filler where one stopped short (or was forgotten).
    #[test]
    fn stretches_hold_what_their_writers_wrote_and_the_filler_past_it() {
        let mut s = Stretched::<u32>::new(&[3, 0, 4, 2]).unwrap();
        std::thread::scope(|sc| {
            for (w, mut wr) in s.writers().into_iter().enumerate() {
                sc.spawn(move || {
                    assert_eq!(wr.room(), [3, 0, 4, 2][w]);
                    let upto = if w == 2 { 2 } else { wr.room() };
                    for i in 0..upto {
                        wr.push(10 * w as u32 + i as u32).unwrap();
                    }
                    assert_eq!(wr.len(), upto);
                    if w == 3 {
                        std::mem::forget(wr);
                    }
                });
            }
        });
        let (v, whole) = s.finish(7);
        assert_eq!(v, [0, 1, 2, 20, 21, 7, 7, 7, 7]);
        assert!(!whole);
    }

    #[test]
    fn a_full_stretch_takes_no_more_and_a_whole_fill_says_so() {
        let mut s = Stretched::<u64>::new(&[1, 2]).unwrap();
        {
            let mut ws = s.writers();
            assert_eq!(ws[0].push(5), Some(()));
            assert_eq!(ws[0].push(6), None);
            assert!(ws[1].is_empty());
            ws[1].push(8).unwrap();
            ws[1].push(9).unwrap();
            assert_eq!(ws[1].push(10), None);
        }
        assert_eq!(s.finish(0), (vec![5, 8, 9], true));
        assert!(Stretched::<u64>::new(&[usize::MAX, 1]).is_none());
        assert!(Stretched::<u64>::new(&[usize::MAX / 4]).is_none());
        assert_eq!(
            Stretched::<u32>::new(&[]).unwrap().finish(1),
            (vec![], true)
        );
    }

    #[test]
    fn a_writer_over_values_overwrites_them_from_the_start() {
        let mut v = [1u32, 2, 3];
        let mut w = Writer::over(&mut v[1..]);
        w.push(9).unwrap();
        assert_eq!((w.len(), w.room()), (1, 2));
        drop(w);
        assert_eq!(v, [1, 9, 3]);
    }

    proptest! {
        /// Any stretch lengths and any counts written, on one thread: the vector is each
        /// stretch's values then its filler.
        #[test]
        fn any_stretches_any_counts(
            plan in proptest::collection::vec((0usize..40, 0usize..50), 0..8),
        ) {
            let sizes: Vec<usize> = plan.iter().map(|p| p.0).collect();
            let mut s = Stretched::<u32>::new(&sizes).unwrap();
            for (w, (mut wr, &(size, k))) in s.writers().into_iter().zip(&plan).enumerate() {
                for i in 0..k {
                    let pushed = wr.push((w * 100 + i) as u32).is_some();
                    prop_assert_eq!(pushed, i < size);
                }
            }
            let (v, whole) = s.finish(u32::MAX);
            let want: Vec<u32> = plan
                .iter()
                .enumerate()
                .flat_map(|(w, &(size, k))| {
                    (0..size).map(move |i| if i < k { (w * 100 + i) as u32 } else { u32::MAX })
                })
                .collect();
            prop_assert_eq!(v, want);
            prop_assert_eq!(whole, plan.iter().all(|&(size, k)| k >= size));
        }
    }
}
