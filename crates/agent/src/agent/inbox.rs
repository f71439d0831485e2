//! The agent's inbox: the app's commands and the outcomes of the policy fetches handed off
//! arrive on one std channel, so the loop waits for either, or for its next poll, in one
//! `recv_timeout`: the library needs no async runtime for it.

use super::policy::FetchReply;
use super::Command;
use sys::chan;

/// One message to the agent's loop.
pub(super) enum Msg {
    Command(Command),
    /// What a fetch handed off brought back (`None`: it did not run).
    Fetched(FetchReply),
    /// The [`Commands`] end was dropped: the loop ends, as on [`Command::Stop`].
    Closed,
}

/// The agent is gone: a command could not be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;

/// The end the app's side holds (the start's `Handle`, a test). Not `Clone`: dropping it tells
/// the agent to leave its loop, as dropping the last sender of a channel would (the agent holds
/// a sender of its own, for the fetches' outcomes, so the channel itself never closes).
pub struct Commands(chan::Sender<Msg>);

impl Commands {
    /// Queue `c` for the agent; [`Gone`] when its loop has ended.
    pub fn send(&self, c: Command) -> Result<(), Gone> {
        self.0.send(Msg::Command(c)).map_err(|_| Gone)
    }
}

impl Drop for Commands {
    fn drop(&mut self) {
        let _ = self.0.send(Msg::Closed);
    }
}

/// The agent's end: what [`Agent::run`](super::Agent::run) reads, and a sender for the
/// outcomes of its fetches.
pub struct Inbox {
    pub(super) rx: chan::Receiver<Msg>,
    pub(super) tx: chan::Sender<Msg>,
}

/// A new inbox and the commands' end of it.
pub fn channel() -> (Commands, Inbox) {
    let (tx, rx) = chan::channel();
    (Commands(tx.clone()), Inbox { rx, tx })
}
