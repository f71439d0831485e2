//! The network as the app last reported it (`OomGuard.setNetwork(connected, metered)`), and
//! what is assumed before it says anything.
//!
//! Until the app reports, the network counts as connected and unmetered on a JVM (where nobody
//! calls `setNetwork`), and as connected but metered on Android (API level > 0), so that an app
//! which never reports its network never spends mobile data under `unmetered_only`. A change to
//! a connected network wakes the I/O thread for a pass.
//!
//! Invariant: reading is one atomic load; setting never does I/O on the caller's thread (at
//! most a message to the I/O thread).

use super::io::Work;
use crate::upload::Network;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use sys::chan;

/// The network as the app last reported it, shared by the JNI facade (any thread) and the
/// `oomguard-io` thread. Lock-free to read; setting it may wake the I/O thread.
#[derive(Debug, Default)]
pub struct NetworkState {
    /// 0: never set; else `SET | CONNECTED? | METERED?`.
    bits: AtomicU8,
    /// The I/O thread's queue, once it runs.
    waker: Mutex<Option<chan::Sender<Work>>>,
}

const NET_SET: u8 = 1;
const NET_CONNECTED: u8 = 2;
const NET_METERED: u8 = 4;

impl NetworkState {
    /// The network the app last reported; `None` if it never did.
    pub fn get(&self) -> Option<Network> {
        let b = self.bits.load(Ordering::Acquire);
        (b & NET_SET != 0).then_some(Network {
            connected: b & NET_CONNECTED != 0,
            metered: b & NET_METERED != 0,
        })
    }

    /// Record the app's report. A change to a connected network wakes the I/O thread for a
    /// pass (what it may upload on a metered one is the policy's call, in that pass).
    pub fn set(&self, n: Network) {
        let b = NET_SET
            | if n.connected { NET_CONNECTED } else { 0 }
            | if n.metered { NET_METERED } else { 0 };
        let old = self.bits.swap(b, Ordering::AcqRel);
        if old != b && n.connected {
            let w = self.waker.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(tx) = w.as_ref() {
                let _ = tx.send(Work::Pass);
            }
        }
    }

    pub(super) fn set_waker(&self, tx: chan::Sender<Work>) {
        *self.waker.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
    }
}

/// The network assumed until the app reports one: unmetered on a JVM (nobody calls
/// `setNetwork` there), metered on Android (`api_level > 0`), where an app that never reports
/// must not spend the user's mobile data.
pub fn default_network(api_level: u32) -> Network {
    if api_level > 0 {
        Network::METERED
    } else {
        Network::UNMETERED
    }
}
