//! The queue summary of `status.json`, made on the `oomguard-io` thread from the spool and the
//! last upload pass, and published on the agent's [`QueueBoard`].
//!
//! Owns what "waiting", "next attempt" and "last error" mean to a person reading `status.json`
//! (`scripts/adb-inspect.sh` shows it):
//! - pending: incidents not yet acknowledged nor rejected, with their bytes on disk;
//! - next attempt: the I/O thread's first pass (every `retry_every`) at or after what they wait
//!   for: the server's `Retry-After` or an endpoint problem's wait (kept in `spool.json`), an
//!   incident's backoff, tomorrow's byte budget; null when nothing waits or they wait for a
//!   network or an upload URL (`waiting_for` says which);
//! - last error: the last failed attempt, endpoint problem, rejection or failed pass this
//!   process saw, kept across passes with its time.
//!
//! Invariants: read-only on the spool (under its lock, never waited for); nothing here blocks
//! the agent, which only loads the board's generation per poll. The one count made on the agent
//! thread is [`note_queued`], after a commit: a few `stat`s of the incident just written.

use crate::agent::{QueueBoard, QueueSummary};
use crate::spool::{fs::dir_size, SpoolGuard, State};
use crate::upload::{self, Stop};
use std::time::Duration;

const DAY_MS: u64 = 24 * 3600 * 1000;

/// What the last passes said went wrong, kept by the I/O thread.
#[derive(Debug, Default)]
pub(super) struct LastError {
    pub what: Option<String>,
    pub at_ms: Option<u64>,
}

impl LastError {
    /// Keep what the pass `r` says went wrong, if anything did.
    pub fn note(&mut self, r: &Result<upload::Summary, String>, now_ms: u64) {
        let what = match r {
            Err(e) => Some(format!("upload pass failed: {e}")),
            Ok(s) => match &s.stopped {
                Some(Stop::Endpoint { error, .. }) => Some(format!("endpoint: {error}")),
                Some(Stop::Backoff { id, error, .. }) => Some(format!("{id}: {error}")),
                _ => s
                    .rejected
                    .last()
                    .map(|(id, why)| format!("{id} rejected: {why}")),
            },
        };
        if let Some(w) = what {
            self.what = Some(w);
            self.at_ms = Some(now_ms);
        }
    }
}

/// The summary of the spool behind `guard`, after a pass that ended as `pass` (`None`: before
/// its uploads), the I/O thread passing again at `now_ms + every`.
pub(super) fn summarize(
    guard: &SpoolGuard<'_>,
    upload: Option<&upload::Config>,
    pass: Option<&Result<upload::Summary, String>>,
    last: &LastError,
    now_ms: u64,
    every: Duration,
) -> QueueSummary {
    let spool = guard.spool();
    let mut q = QueueSummary {
        wired: true,
        last_error: last.what.clone(),
        last_error_ms: last.at_ms,
        updated_ms: now_ms,
        ..QueueSummary::default()
    };
    let incidents = match guard.incidents() {
        Ok(i) => i,
        Err(e) => {
            q.waiting_for = Some(format!("the spool cannot be read: {e}"));
            return q;
        }
    };
    // The earliest an incident's own backoff lets it go.
    let mut backoff: Option<u64> = None;
    for inc in &incidents {
        if inc.state == State::Rejected {
            q.rejected += 1;
            continue;
        }
        q.pending += 1;
        q.pending_bytes += dir_size(spool.fs(), &spool.incident_dir(&inc.id)).unwrap_or(0);
        if inc.next_attempt_ms > now_ms {
            backoff = Some(backoff.map_or(inc.next_attempt_ms, |b| b.min(inc.next_attempt_ms)));
        }
    }
    if q.pending == 0 {
        return q;
    }
    if upload.is_none() {
        q.waiting_for = Some(NO_UPLOAD_URL.into());
        return q;
    }
    let stop = pass
        .and_then(|p| p.as_ref().ok())
        .and_then(|s| s.stopped.as_ref());
    let held = spool.state().retry_after_until_ms;
    let (gate, why) = match stop {
        Some(Stop::Offline) => (None, "a network (the app reports none)"),
        Some(Stop::Metered) => (None, "an unmetered network (upload.unmetered_only)"),
        Some(Stop::Busy) => (None, "another process, which holds the spool and uploads"),
        Some(Stop::BudgetExhausted) => (
            Some((now_ms / DAY_MS + 1) * DAY_MS),
            "tomorrow's byte budget (upload.daily_byte_budget)",
        ),
        Some(Stop::RetryAfter(until)) => (Some(*until), "the server's Retry-After"),
        Some(Stop::Endpoint { until_ms, .. }) => (
            Some(*until_ms),
            "the endpoint to answer (a wrong URL, credentials, a proxy)",
        ),
        Some(Stop::Backoff { until_ms, .. }) => {
            (Some(*until_ms), "the backoff after a failed attempt")
        }
        None if held > now_ms => (Some(held), "the server's Retry-After or an endpoint's wait"),
        None => match backoff {
            Some(b) => (Some(b), "the backoff after a failed attempt"),
            None => (Some(now_ms), ""),
        },
    };
    if !why.is_empty() {
        q.waiting_for = Some(why.to_string());
    }
    q.next_attempt_ms = gate.map(|g| next_pass_at(now_ms, every, g));
    q
}

/// The first pass at or after `gate`, passes coming at `now + every`, `now + 2 every`...
fn next_pass_at(now_ms: u64, every: Duration, gate: u64) -> u64 {
    let every = (every.as_millis() as u64).max(1);
    let first = now_ms + every;
    if gate <= first {
        first
    } else {
        first + (gate - first).div_ceil(every) * every
    }
}

/// What incidents wait for when the policy names no upload server.
const NO_UPLOAD_URL: &str = "an upload URL (the policy has no upload.url)";

/// Count the incident `id` just committed into `board`'s summary (on the agent thread, a few
/// `stat`s), so that the status written after its verdict shows it before the I/O thread's
/// next summary; with no upload server (`uploads` false) it says so at once too, which the
/// I/O thread's summary may not say before the app stops.
pub(super) fn note_queued(
    board: &QueueBoard,
    spool: &crate::spool::Spool,
    id: &str,
    uploads: bool,
) {
    let bytes = dir_size(spool.fs(), &spool.incident_dir(id)).unwrap_or(0);
    board.update(|q| {
        q.wired = true;
        q.pending += 1;
        q.pending_bytes += bytes;
        q.updated_ms = spool.now_ms();
        if !uploads {
            q.waiting_for = Some(NO_UPLOAD_URL.into());
        }
    });
}

/// Publish the summary of `guard`'s spool on `board`.
pub(super) fn publish(
    board: &QueueBoard,
    guard: &SpoolGuard<'_>,
    upload: Option<&upload::Config>,
    pass: Option<&Result<upload::Summary, String>>,
    last: &LastError,
    every: Duration,
) {
    let now = guard.spool().now_ms();
    board.publish(summarize(guard, upload, pass, last, now, every));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{Agent, Command, Config, Shared};
    use crate::pipeline::{Pipeline, SPOOL_DIR};
    use crate::sample::{Heap, NoStacks, ScriptedHeap};
    use crate::spool::{FileKind, NewIncident, Quotas, Spool};
    use std::sync::Arc;

    /// A runtime without a dumper: the incident is in the spool already.
    struct Refuse;

    impl crate::dump::Dumper for Refuse {
        fn name(&self) -> &'static str {
            "refuse"
        }
        fn check(&mut self) -> crate::dump::Result<()> {
            Err(crate::dump::Error::Unsupported("test".into()))
        }
        fn dump(
            &mut self,
            _: &crate::dump::DumpRequest,
        ) -> crate::dump::Result<crate::dump::DumpOutcome> {
            Err(crate::dump::Error::Unsupported("test".into()))
        }
    }

    /// Issue 39 item 6: with an incident waiting and an endpoint that refuses connections, the
    /// agent's status.json says so: one incident pending, its bytes, when the next attempt
    /// comes, what it waits for, and the last upload error.
    #[test]
    fn status_json_shows_the_incidents_waiting_and_the_last_upload_error() {
        // This test writes a script and executes it: see FORK_TEST_LOCK.
        let _fork = crate::child::fork_test_lock();
        let data = tempfile::tempdir().unwrap();
        let analyser = crate::pipeline::tests::fake_analyser(data.path());
        let spool = Spool::open(data.path().join(SPOOL_DIR), Quotas::default()).unwrap();
        let staging = spool.stage().unwrap();
        std::fs::write(staging.path(FileKind::MiniDump), vec![42u8; 64 << 10]).unwrap();
        let id = spool
            .commit(
                staging,
                NewIncident {
                    reason: "test".into(),
                    ..NewIncident::default()
                },
            )
            .unwrap();
        // Nothing listens on port 1 of loopback: the upload is refused, an outage.
        let policy = r#"{"poll_interval_ms": 100, "upload": {"url": "http://127.0.0.1:1/files/"}}"#;
        let (tx, rx) = crate::agent::inbox::channel();
        let t0 = std::time::Instant::now();
        let dir = data.path().to_path_buf();
        // Built on its thread: the pipeline's dumper is not Send.
        let run = std::thread::spawn(move || {
            let pipeline =
                Pipeline::new(&dir, "1.0", Box::new(Refuse), None).with_analyser(Some(analyser));
            let cfg = Config {
                policy_json: policy.into(),
                data_dir: dir,
                app_version: "1.0".into(),
                ..Config::default()
            };
            let heap = Heap {
                max: 256 << 20,
                total: 10 << 20,
                free: 0,
            };
            Agent::new(
                cfg,
                ScriptedHeap::new(vec![heap]),
                NoStacks,
                pipeline,
                Arc::new(Shared::default()),
            )
            .unwrap()
            .run(rx)
        });
        let status = data.path().join("status.json");
        let q = loop {
            let st: serde_json::Value = std::fs::read(&status)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default();
            if !st["queue"]["last_error"].is_null() {
                break st["queue"].clone();
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "no upload error in status.json: {st:#}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        tx.send(Command::Stop).unwrap();
        run.join().unwrap().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert_eq!(q["wired"], true, "{q:#}");
        assert_eq!(
            (q["pending"].as_u64(), q["rejected"].as_u64()),
            (Some(1), Some(0)),
            "{q:#}"
        );
        // Its files as they are now (the upload's plan compressed the mini dump).
        let on_disk: u64 = std::fs::read_dir(spool.incident_dir(&id))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert_eq!(q["pending_bytes"].as_u64(), Some(on_disk), "{q:#}");
        assert!(on_disk > 0);
        assert!(q["next_attempt_ms"].as_u64().unwrap() > now, "{q:#}");
        assert!(
            q["waiting_for"].as_str().unwrap().contains("endpoint"),
            "{q:#}"
        );
        assert!(
            q["last_error"].as_str().unwrap().starts_with("endpoint: "),
            "{q:#}"
        );
        assert!(q["last_error_ms"].as_u64().unwrap() <= now, "{q:#}");
    }

    #[test]
    fn the_next_attempt_is_the_first_pass_after_the_gate() {
        let m = Duration::from_secs(60);
        assert_eq!(next_pass_at(1_000, m, 0), 61_000);
        assert_eq!(next_pass_at(1_000, m, 61_000), 61_000);
        assert_eq!(next_pass_at(1_000, m, 61_001), 121_000);
        assert_eq!(next_pass_at(1_000, m, 300_000), 301_000);
    }
}
