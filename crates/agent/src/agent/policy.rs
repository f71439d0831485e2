//! The agent's policy: the one given at start, the last good one on disk, and the remote
//! refresh handed to the I/O thread (the agent thread never waits on the network). See the
//! invariants in the parent module.

use super::inbox::Msg;
use super::{now_ms, panic_message, Actions, Agent, Config, IoJob};
use crate::policy::remote::Outcome;
use crate::policy::{Parsed, Policy, PolicyError};
use crate::sample::{HeapSource, StackSource};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use tracing::{debug, info, warn};

impl<H: HeapSource, S: StackSource, A: Actions> Agent<H, S, A> {
    /// Hand a policy fetch to the I/O thread if one is due and none is under way. Never waits
    /// on the network.
    pub fn start_fetch(&mut self, now: u64) {
        if self.fetch.is_some() {
            return;
        }
        {
            let r = self.refresher.lock().unwrap_or_else(|p| p.into_inner());
            if r.not_due(&self.policy, now).is_some() {
                return;
            }
        }
        let Some(tx) = self.fetch_tx.clone() else {
            return; // not running yet: nowhere to bring the outcome back to
        };
        let state = Arc::new(AtomicU8::new(FETCH_QUEUED));
        let reply = Reply(Some(tx));
        let (refresher, active, st) = (self.refresher.clone(), self.policy.clone(), state.clone());
        let job: IoJob = Box::new(move || {
            let mut reply = reply;
            if st
                .compare_exchange(
                    FETCH_QUEUED,
                    FETCH_RUNNING,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_err()
            {
                return; // cancelled by stop before it began
            }
            let out = catch_unwind(AssertUnwindSafe(|| {
                let mut r = refresher.lock().unwrap_or_else(|p| p.into_inner());
                r.refresh(&active, now_ms())
            }));
            if let Some(tx) = reply.0.take() {
                let _ = tx.send(Msg::Fetched(match out {
                    Ok(r) => Some(r),
                    Err(p) => Some(Err(PolicyError::Fetch {
                        url: active.remote.url.clone().unwrap_or_default(),
                        what: format!("the fetch panicked: {}", panic_message(&*p)),
                    })),
                }));
            }
        });
        if let Err(job) = self.actions.run_io(job) {
            // No I/O thread (none started, or gone): a short-lived thread of our own. Should
            // it not start, the job is dropped and its reply says the fetch did not run.
            if let Err(e) = std::thread::Builder::new()
                .name("oomguard-policy".into())
                .spawn(job)
            {
                self.note_error(format!("cannot start a thread for the policy fetch: {e}"));
            }
        }
        self.fetch = Some(state);
    }

    /// Apply what a fetch handed off by [`start_fetch`](Self::start_fetch) brought back.
    pub(super) fn fetched(&mut self, reply: FetchReply) {
        self.fetch = None;
        match reply {
            Some(Ok(Outcome::Activated(parsed))) => self.activate(*parsed, "remote", true),
            Some(Ok(Outcome::NotModified)) => debug!("policy not modified"),
            Some(Ok(Outcome::Unchanged)) => debug!("policy unchanged"),
            Some(Ok(Outcome::Disabled | Outcome::NotDue { .. })) => {}
            Some(Err(e)) => {
                warn!("{e}");
                self.status.errors += 1;
                self.status.last_error = Some(e.to_string());
                self.publish(true);
            }
            None => debug!("the policy fetch did not run (stopped or cancelled)"),
        }
    }

    /// Once the active remote policy has expired, the policy given at start takes over again.
    pub fn expire_policy(&mut self, now: u64) {
        let Some(expires) = self.policy.expires_at_s.filter(|_| self.remote_active) else {
            return;
        };
        let now_s = now / 1000;
        if now_s < expires {
            return;
        }
        warn!(
            "policy v{} expired (expires_at_s {expires}, the device's clock {now_s}); the policy given at start (v{}) is active again until a newer one is fetched",
            self.policy.version, self.shipped.version
        );
        let shipped = Parsed {
            policy: self.shipped.clone(),
            unknown: Vec::new(),
            left_out: Vec::new(),
        };
        self.activate(shipped, "start (the remote policy expired)", false);
    }

    pub(super) fn activate(&mut self, parsed: Parsed, source: &str, remote: bool) {
        warn_unknown(&parsed.unknown);
        let old = self.policy.version;
        self.policy = parsed.policy;
        self.trigger_config = crate::trigger::Config::from(&self.policy);
        self.remote_active = remote;
        self.triggers.reset();
        self.status.policy_version = self.policy.version;
        self.status.policy_source = source.to_string();
        self.shared.flight().set_policy_version(self.policy.version);
        self.status.poll_interval_ms = self.policy.poll_interval_ms;
        info!(
            version = self.policy.version,
            "policy v{} active (from {source}, was v{old})", self.policy.version
        );
        self.publish(true);
    }
}

/// What a fetch handed off sends back: its outcome, or `None` when it did not run.
pub(super) type FetchReply = Option<Result<Outcome, PolicyError>>;

pub(super) const FETCH_QUEUED: u8 = 0;
pub(super) const FETCH_RUNNING: u8 = 1;
pub(super) const FETCH_CANCELLED: u8 = 2;

/// The reply channel of a fetch handed off: says `None` when dropped unsent (the job was
/// cancelled, or dropped by an I/O thread that stopped), so the agent never waits for it.
struct Reply(Option<sys::chan::Sender<Msg>>);

impl Drop for Reply {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(Msg::Fetched(None));
        }
    }
}

/// Whether `start` was given a public key (already checked by then).
pub(super) fn refresher_key(cfg: &Config) -> Option<&str> {
    cfg.public_key.as_deref().filter(|k| !k.trim().is_empty())
}

/// The policy given at start, or the default when it is empty or rejected (logged), and its
/// source's name.
pub(super) fn shipped_policy(shipped: &str) -> (Policy, String) {
    if shipped.trim().is_empty() {
        return (Policy::default(), "built-in default".to_string());
    }
    match Policy::parse(shipped.as_bytes()) {
        Ok(p) => {
            warn_unknown(&p.unknown);
            (p.policy, "start".to_string())
        }
        Err(e) => {
            warn!("policy given at start: {e}");
            (
                Policy::default(),
                "built-in default (the policy given at start was rejected)".to_string(),
            )
        }
    }
}

/// The shipped policy, replaced by the last good cached one when that is at least as new (then
/// `true`: it came from remote). Every rejection is logged; something valid always comes out.
pub(super) fn initial_policy(
    shipped: &Policy,
    source: String,
    cached: Result<Option<Parsed>, PolicyError>,
) -> (Policy, String, bool) {
    match cached {
        Ok(Some(p)) if p.policy.version >= shipped.version => {
            (p.policy, "last good on disk".to_string(), true)
        }
        Ok(_) => (shipped.clone(), source, false),
        Err(e) => {
            warn!("the policy cached on disk is not used ({e}); the policy from {source} is");
            (shipped.clone(), source, false)
        }
    }
}

/// Unknown field names a log line names at most, and the characters kept of each.
const UNKNOWN_NAMED: usize = 10;
const UNKNOWN_NAME_CHARS: usize = 64;

/// Log a policy's unknown fields in one line: a policy may carry thousands.
pub(super) fn warn_unknown(unknown: &[String]) {
    let short = |u: &String| -> String {
        match u.char_indices().nth(UNKNOWN_NAME_CHARS) {
            Some((i, _)) => format!("{}…", &u[..i]),
            None => u.clone(),
        }
    };
    match unknown {
        [] => {}
        [one] => warn!(
            "policy field {} is unknown to this agent; ignored",
            short(one)
        ),
        many => {
            let named: Vec<String> = many.iter().take(UNKNOWN_NAMED).map(short).collect();
            let more = match many.len() - named.len() {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            warn!(
                "policy fields {}{more} are unknown to this agent; ignored",
                named.join(", ")
            );
        }
    }
}
