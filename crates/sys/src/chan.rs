//! A channel of many senders and one receiver, for the few messages the library's threads pass
//! (the agent's inbox, the I/O thread's work, a lookup's answer, the parallel stripper's parts).
//!
//! The standard library's `mpsc` does the same, but each message type made its own copy of its
//! three channel flavours (list, array, zero-capacity): about 95 KB of the shipped `.so` for
//! seven types (issue 41). This one is a queue under a mutex with a condition variable: what is
//! made per message type is a few pushes and pops. It keeps `mpsc`'s rules and error types:
//! - a send fails, handing the value back, once the receiver is gone;
//! - a receive returns the messages already sent even after every sender is gone, then fails
//!   (`Disconnected`);
//! - `recv_timeout` waits at most its time (a time too long to add to now waits for ever);
//! - a channel made by [`sync_channel`] holds at most its bound: a send waits for room (the
//!   writer threads' back-pressure), or fails once the receiver is gone.
//!
//! Messages left when the receiver is dropped are dropped then, outside the lock.

use std::collections::VecDeque;
use std::sync::mpsc::{RecvError, RecvTimeoutError, SendError, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

struct Shared<T> {
    state: Mutex<State<T>>,
    /// A message came, or the last sender left.
    ready: Condvar,
    /// A message was taken from a bounded channel, or the receiver left.
    room: Condvar,
    /// Most messages queued (`usize::MAX`: no bound).
    bound: usize,
}

struct State<T> {
    queue: VecDeque<T>,
    senders: usize,
    receiver: bool,
}

impl<T> Shared<T> {
    /// The state; a panic elsewhere while it was held (none of this module's code can panic
    /// under it but an allocation) leaves it consistent, so a poisoned lock is taken as is.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The sending end; clone it for more senders.
pub struct Sender<T>(Arc<Shared<T>>);

/// The receiving end.
pub struct Receiver<T>(Arc<Shared<T>>);

/// A new channel with no bound.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    with_bound(usize::MAX)
}

/// A new channel that holds at most `bound` messages (at least 1): a send waits for room.
pub fn sync_channel<T>(bound: usize) -> (Sender<T>, Receiver<T>) {
    with_bound(bound.max(1))
}

fn with_bound<T>(bound: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            senders: 1,
            receiver: true,
        }),
        ready: Condvar::new(),
        room: Condvar::new(),
        bound,
    });
    (Sender(shared.clone()), Receiver(shared))
}

impl<T> Sender<T> {
    /// Queues `v` for the receiver (on a bounded channel, once there is room); `Err` with `v` if
    /// the receiver is gone.
    pub fn send(&self, v: T) -> Result<(), SendError<T>> {
        let mut s = self.0.lock();
        loop {
            if !s.receiver {
                return Err(SendError(v));
            }
            if s.queue.len() < self.0.bound {
                break;
            }
            s = self.0.room.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.queue.push_back(v);
        drop(s);
        self.0.ready.notify_one();
        Ok(())
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sender { .. }")
    }
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Receiver { .. }")
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.0.lock().senders += 1;
        Sender(self.0.clone())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.senders -= 1;
        let last = s.senders == 0;
        drop(s);
        if last {
            self.0.ready.notify_all();
        }
    }
}

impl<T> Receiver<T> {
    /// The first message queued, telling a sender that waits for room.
    fn take(&self, s: &mut State<T>) -> Option<T> {
        let v = s.queue.pop_front()?;
        if self.0.bound != usize::MAX {
            self.0.room.notify_one();
        }
        Some(v)
    }

    /// The messages as they come, until every sender is gone.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(|| self.recv().ok())
    }

    /// The next message, waiting for it; `Err` once every sender is gone and none is left.
    pub fn recv(&self) -> Result<T, RecvError> {
        let mut s = self.0.lock();
        loop {
            if let Some(v) = self.take(&mut s) {
                return Ok(v);
            }
            if s.senders == 0 {
                return Err(RecvError);
            }
            s = self.0.ready.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The next message, waiting at most `wait` for it.
    pub fn recv_timeout(&self, wait: Duration) -> Result<T, RecvTimeoutError> {
        let Some(deadline) = Instant::now().checked_add(wait) else {
            return self.recv().map_err(|_| RecvTimeoutError::Disconnected);
        };
        let mut s = self.0.lock();
        loop {
            if let Some(v) = self.take(&mut s) {
                return Ok(v);
            }
            if s.senders == 0 {
                return Err(RecvTimeoutError::Disconnected);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RecvTimeoutError::Timeout);
            }
            s = match self.0.ready.wait_timeout(s, left) {
                Ok((s, _)) => s,
                Err(e) => e.into_inner().0,
            };
        }
    }

    /// The next message if one is there.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut s = self.0.lock();
        match self.take(&mut s) {
            Some(v) => Ok(v),
            None if s.senders == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.receiver = false;
        let left = std::mem::take(&mut s.queue);
        drop(s);
        self.0.room.notify_all();
        drop(left);
    }
}

/// The messages of a receiver as they come, until every sender is gone.
pub struct IntoIter<T>(Receiver<T>);

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.0.recv().ok()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        IntoIter(self)
    }
}

#[cfg(test)]
mod tests {
    use super::channel;
    use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
    use std::time::{Duration, Instant};

    /// Messages arrive in order, from several senders on other threads; what was sent before the
    /// last sender left is still received, then the channel says it is disconnected.
    #[test]
    fn messages_arrive_in_order_and_outlive_their_senders() {
        let (tx, rx) = channel();
        let handles: Vec<_> = (0..4u32)
            .map(|t| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for i in 0..500u32 {
                        tx.send((t, i)).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let mut next = [0u32; 4];
        let mut n = 0;
        while let Ok((t, i)) = rx.recv() {
            assert_eq!(i, next[t as usize], "sender {t}'s messages in order");
            next[t as usize] += 1;
            n += 1;
        }
        assert_eq!(n, 2000);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    }

    /// `recv_timeout` returns a message sent while it waits, times out when none comes, and says
    /// disconnected (without waiting its time) when the senders are gone.
    #[test]
    fn a_receive_waits_its_time_and_no_longer() {
        let (tx, rx) = channel::<u8>();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        let t0 = Instant::now();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(50)),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(t0.elapsed() >= Duration::from_millis(50));
        let late = tx.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            late.send(7).unwrap();
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(7));
        h.join().unwrap();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            drop(tx);
        });
        let t0 = Instant::now();
        assert_eq!(
            rx.recv_timeout(Duration::MAX),
            Err(RecvTimeoutError::Disconnected)
        );
        assert!(t0.elapsed() < Duration::from_secs(30));
        h.join().unwrap();
    }

    /// Once the receiver is gone a send hands its value back, and what was queued is dropped.
    #[test]
    fn a_send_to_a_dropped_receiver_hands_the_value_back() {
        let (tx, rx) = channel();
        let queued = std::sync::Arc::new(());
        tx.send(queued.clone()).unwrap();
        assert_eq!(std::sync::Arc::strong_count(&queued), 2);
        drop(rx);
        assert_eq!(
            std::sync::Arc::strong_count(&queued),
            1,
            "dropped with the receiver"
        );
        let back = tx.send(queued.clone()).unwrap_err().0;
        assert!(std::sync::Arc::ptr_eq(&back, &queued));
    }

    /// A bounded channel holds its bound: a send past it waits until the receiver takes one, and
    /// a sender that waits is let go, with its value, when the receiver leaves.
    #[test]
    fn a_bounded_channel_makes_a_sender_wait_for_room() {
        let (tx, rx) = super::sync_channel(2);
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let h = {
            let (tx, sent) = (tx.clone(), sent.clone());
            std::thread::spawn(move || {
                tx.send(3).unwrap();
                sent.store(true, std::sync::atomic::Ordering::SeqCst);
                tx.send(4)
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !sent.load(std::sync::atomic::Ordering::SeqCst),
            "no room for a third"
        );
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(2));
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(3));
        // The fourth is queued or waiting; the receiver leaves: the send ends either way.
        drop(rx);
        let r = h.join().unwrap();
        assert!(r.is_ok() || r.unwrap_err().0 == 4);
        assert!(tx.send(5).is_err());
    }

    /// Both iterators give every message in order and end when the last sender is gone, the
    /// borrowing one leaving the receiver usable; the ends print without their contents.
    #[test]
    fn iterators_take_the_messages_until_the_senders_are_gone() {
        let (tx, rx) = channel();
        assert_eq!(format!("{tx:?} {rx:?}"), "Sender { .. } Receiver { .. }");
        let send = |tx: super::Sender<u32>, from: u32| {
            std::thread::spawn(move || (from..from + 100).for_each(|i| tx.send(i).unwrap()))
        };
        let h = send(tx, 0);
        assert_eq!(rx.iter().collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());
        h.join().unwrap();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
        let (tx, rx) = channel();
        let h = send(tx, 7);
        assert_eq!(
            rx.into_iter().collect::<Vec<_>>(),
            (7..107).collect::<Vec<_>>()
        );
        h.join().unwrap();
    }
}
