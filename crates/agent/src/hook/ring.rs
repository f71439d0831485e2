//! The byte ring from the tee's write hook to its stripper thread.
//!
//! One producer (a write hook, under the tee's spin flag) and one consumer (the
//! `oomguard-strip` thread). The producer never allocates or locks: it copies into free space,
//! spinning then yielding while the ring is full, and gives up if the consumer has stopped.

use hprof::{FileSink, Stripper};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A single-producer single-consumer byte ring from the write hook to the stripper thread.
/// The producer (a hook, under our spin flag) writes only to `[head, tail + cap)`, the consumer
/// reads only `[tail, head)`; both counters only grow.
///
/// The buffer is held as a raw pointer and a length, never as a `Box<[u8]>` or a reference to
/// the whole of it: a `&[u8]`/`&mut [u8]` over the whole buffer would assert that no other
/// thread writes any byte of it while it lives, which the producer does (in its own region)
/// while the consumer holds a slice of the published region. Each side only ever creates a
/// slice or a pointer range over the bytes it owns at that moment.
pub(crate) struct Ring {
    /// The start of `cap` bytes allocated by `new` and freed by `drop`.
    buf: *mut u8,
    cap: usize,
    head: AtomicU64,
    tail: AtomicU64,
    /// No more bytes will come (set by `disarm`).
    pub(crate) closed: AtomicBool,
    /// The stripper thread stopped (error or panic): the producer must not wait for it.
    failed: AtomicBool,
}

// SAFETY: the regions each side touches are disjoint by the head/tail protocol above, and the
// pointer is only freed by `drop`, when no other side holds the ring (`Arc`).
unsafe impl Sync for Ring {}
// SAFETY: as above.
unsafe impl Send for Ring {}

impl Ring {
    pub(crate) fn new(cap: usize) -> Ring {
        let cap = cap.max(4096);
        let buf = Box::into_raw(vec![0u8; cap].into_boxed_slice()) as *mut u8;
        Ring {
            buf,
            cap,
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            failed: AtomicBool::new(false),
        }
    }

    fn cap(&self) -> u64 {
        self.cap as u64
    }

    /// Copy `data` in, waiting (spin, then yield) while the ring is full. `false` if the
    /// consumer has stopped. Allocates nothing.
    pub(crate) fn push(&self, mut data: &[u8]) -> bool {
        let cap = self.cap();
        let mut spins = 0u32;
        while !data.is_empty() {
            if self.failed.load(Ordering::Acquire) {
                return false;
            }
            let head = self.head.load(Ordering::Relaxed);
            let tail = self.tail.load(Ordering::Acquire);
            let free = cap - (head - tail);
            if free == 0 {
                spins += 1;
                if spins < 128 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
                continue;
            }
            let at = head % cap;
            let n = (free.min(data.len() as u64)).min(cap - at) as usize;
            // SAFETY: `at + n <= cap`, so the range is inside the allocation; [at, at + n) is
            // free space owned by the producer (see the protocol): the consumer holds no slice
            // of it, and `data` (the VM's buffer) cannot overlap our allocation.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.buf.add(at as usize), n) };
            self.head.store(head + n as u64, Ordering::Release);
            data = &data[n..];
        }
        true
    }

    /// The stripper thread: feed everything that arrives until closed and drained.
    pub(crate) fn run(&self, mut s: Stripper<FileSink>) -> Result<Stripper<FileSink>, String> {
        let cap = self.cap();
        loop {
            let tail = self.tail.load(Ordering::Relaxed);
            let head = self.head.load(Ordering::Acquire);
            if head == tail {
                if self.closed.load(Ordering::Acquire) && self.head.load(Ordering::Acquire) == tail
                {
                    return Ok(s);
                }
                std::thread::sleep(std::time::Duration::from_micros(50));
                continue;
            }
            let at = tail % cap;
            let n = (head - tail).min(cap - at) as usize;
            // SAFETY: `at + n <= cap`, inside the allocation; [at, at + n) holds bytes the
            // producer published with `head` (Acquire above) and will not touch again until
            // `tail` moves past them, after this slice's last use below. The slice covers only
            // those bytes, never the producer's region.
            let chunk = unsafe { std::slice::from_raw_parts(self.buf.add(at as usize), n) };
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.feed(chunk)));
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    self.failed.store(true, Ordering::Release);
                    return Err(format!("stripper: {e}"));
                }
                Err(_) => {
                    self.failed.store(true, Ordering::Release);
                    return Err("stripper panicked".into());
                }
            }
            self.tail.store(tail + n as u64, Ordering::Release);
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `buf` and `cap` are the boxed slice `new` leaked; `&mut self` means no other
        // side holds the ring any more, so no slice of it is alive.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.buf, self.cap)) });
    }
}
