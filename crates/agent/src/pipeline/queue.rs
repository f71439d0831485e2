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
        let on_disk = bytes_on_disk(&spool, &id);
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

    /// A spool of three incidents: one rejected, two pending whose backoffs end 150 s and
    /// 200 s after `now`.
    fn three_incidents(dir: &std::path::Path, now: u64) -> (Spool, Vec<String>) {
        let spool = Spool::open(dir.join(SPOOL_DIR), Quotas::default()).unwrap();
        let ids: Vec<String> = (0..3)
            .map(|i| {
                let staging = spool.stage().unwrap();
                std::fs::write(staging.path(FileKind::MiniDump), vec![7u8; 1000 * (i + 1)])
                    .unwrap();
                let info = NewIncident {
                    reason: format!("test {i}"),
                    ..NewIncident::default()
                };
                spool.commit(staging, info).unwrap()
            })
            .collect();
        edit(&spool, &ids[..1], |inc| {
            inc.state = State::Rejected;
            inc.rejected = Some("400".into());
        });
        edit(&spool, &ids[1..2], |inc| {
            inc.next_attempt_ms = now + 150_000
        });
        edit(&spool, &ids[2..], |inc| inc.next_attempt_ms = now + 200_000);
        (spool, ids)
    }

    /// Change the records of the incidents `ids` by `f`, under the spool's lock.
    fn edit(spool: &Spool, ids: &[String], f: impl Fn(&mut crate::spool::Incident)) {
        let guard = spool.lock().unwrap();
        for id in ids {
            let mut inc = spool.read_incident(id).unwrap();
            f(&mut inc);
            guard.save(&inc).unwrap();
        }
    }

    /// The bytes of the files in the incident `id`'s directory, as they are now.
    fn bytes_on_disk(spool: &Spool, id: &str) -> u64 {
        std::fs::read_dir(spool.incident_dir(id))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum()
    }

    /// What status.json's queue says, for each way a pass can end: what the pending incidents
    /// wait for and the I/O thread's first pass after it (its passes a minute apart).
    #[test]
    fn the_summary_says_what_the_pending_incidents_wait_for_and_when() {
        let data = tempfile::tempdir().unwrap();
        let now = 1_800_000_000_000 + 12_345;
        let (spool, ids) = three_incidents(data.path(), now);
        let every = Duration::from_secs(60);
        let upload = upload::Config::from(&crate::policy::Policy::default());
        let bytes = bytes_on_disk(&spool, &ids[1]) + bytes_on_disk(&spool, &ids[2]);
        let last = LastError {
            what: Some("x".into()),
            at_ms: Some(9),
        };
        let summary = |upload: Option<&upload::Config>, stop: Option<Stop>| {
            let pass = stop.map(|s| {
                Ok(upload::Summary {
                    stopped: Some(s),
                    ..upload::Summary::default()
                })
            });
            let guard = spool.lock().unwrap();
            summarize(&guard, upload, pass.as_ref(), &last, now, every)
        };
        let q = summary(None, None);
        assert!(q.wired);
        assert_eq!((q.pending, q.rejected, q.pending_bytes), (2, 1, bytes));
        assert_eq!(
            (q.last_error.as_deref(), q.last_error_ms, q.updated_ms),
            (Some("x"), Some(9), now)
        );
        assert_eq!(
            (q.waiting_for.as_deref(), q.next_attempt_ms),
            (Some(NO_UPLOAD_URL), None)
        );

        let first_pass = now + 60_000;
        let day = 86_400_000;
        let tomorrow = (now / day + 1) * day;
        let cases: Vec<(Option<Stop>, Option<&str>, Option<u64>)> = vec![
            // The earlier backoff (150 s): the pass at 180 s.
            (
                None,
                Some("the backoff after a failed attempt"),
                Some(first_pass + 120_000),
            ),
            (
                Some(Stop::Offline),
                Some("a network (the app reports none)"),
                None,
            ),
            (
                Some(Stop::Metered),
                Some("an unmetered network (upload.unmetered_only)"),
                None,
            ),
            (
                Some(Stop::Busy),
                Some("another process, which holds the spool and uploads"),
                None,
            ),
            (
                Some(Stop::BudgetExhausted),
                Some("tomorrow's byte budget (upload.daily_byte_budget)"),
                Some(first_pass + (tomorrow - first_pass).div_ceil(60_000) * 60_000),
            ),
            (
                Some(Stop::RetryAfter(now + 61_000)),
                Some("the server's Retry-After"),
                Some(first_pass + 60_000),
            ),
            (
                Some(Stop::Endpoint {
                    until_ms: now + 30_000,
                    error: "401".into(),
                }),
                Some("the endpoint to answer (a wrong URL, credentials, a proxy)"),
                Some(first_pass),
            ),
            (
                Some(Stop::Backoff {
                    id: ids[1].clone(),
                    until_ms: now + 500_000,
                    error: "500".into(),
                }),
                Some("the backoff after a failed attempt"),
                Some(first_pass + 480_000),
            ),
        ];
        for (stop, why, next) in cases {
            let name = format!("{stop:?}");
            let q = summary(Some(&upload), stop);
            assert_eq!(
                (q.waiting_for.as_deref(), q.next_attempt_ms),
                (why, next),
                "{name}"
            );
            assert_eq!(q.pending, 2, "{name}");
        }

        // A Retry-After or an endpoint's wait kept in spool.json holds every incident; one
        // that ended at this very moment holds none.
        spool
            .update_state(|s| s.retry_after_until_ms = now + 90_000)
            .unwrap();
        let q = summary(Some(&upload), None);
        assert_eq!(
            (q.waiting_for.as_deref(), q.next_attempt_ms),
            (
                Some("the server's Retry-After or an endpoint's wait"),
                Some(first_pass + 60_000)
            )
        );
        spool
            .update_state(|s| s.retry_after_until_ms = now)
            .unwrap();
        assert_eq!(
            summary(Some(&upload), None).next_attempt_ms,
            Some(first_pass + 120_000)
        );

        // Backoffs over (or ending now): the next pass, waiting for nothing in particular.
        edit(&spool, &ids[1..2], |inc| inc.next_attempt_ms = now);
        edit(&spool, &ids[2..], |inc| inc.next_attempt_ms = now - 1);
        let q = summary(Some(&upload), None);
        assert_eq!((q.waiting_for, q.next_attempt_ms), (None, Some(first_pass)));

        // Only rejected incidents: nothing pending, nothing to wait for.
        edit(&spool, &ids[1..], |inc| inc.state = State::Rejected);
        let q = summary(Some(&upload), Some(Stop::Offline));
        assert_eq!((q.pending, q.rejected, q.pending_bytes), (0, 3, 0));
        assert_eq!((q.waiting_for, q.next_attempt_ms), (None, None));
    }

    /// What a pass's end leaves as the last error: its failure, an endpoint problem, a
    /// backoff's cause, the last rejection; a pass that went well keeps the earlier one.
    #[test]
    fn the_last_error_is_the_last_thing_a_pass_said_went_wrong() {
        let mut last = LastError::default();
        let ok = |stopped: Option<Stop>,
                  rejected: Vec<(String, String)>|
         -> Result<upload::Summary, String> {
            Ok(upload::Summary {
                stopped,
                rejected,
                ..upload::Summary::default()
            })
        };
        last.note(&ok(None, Vec::new()), 1);
        assert_eq!((last.what.as_deref(), last.at_ms), (None, None));
        last.note(&Err("spool locked".into()), 2);
        assert_eq!(
            (last.what.as_deref(), last.at_ms),
            (Some("upload pass failed: spool locked"), Some(2))
        );
        last.note(
            &ok(
                Some(Stop::Endpoint {
                    until_ms: 0,
                    error: "401 Unauthorized".into(),
                }),
                Vec::new(),
            ),
            3,
        );
        assert_eq!(last.what.as_deref(), Some("endpoint: 401 Unauthorized"));
        last.note(
            &ok(
                Some(Stop::Backoff {
                    id: "i1".into(),
                    until_ms: 0,
                    error: "503".into(),
                }),
                Vec::new(),
            ),
            4,
        );
        assert_eq!(last.what.as_deref(), Some("i1: 503"));
        let rejected = vec![
            ("i2".to_string(), "400".to_string()),
            ("i3".to_string(), "413".to_string()),
        ];
        last.note(&ok(Some(Stop::Offline), rejected), 5);
        assert_eq!(
            (last.what.as_deref(), last.at_ms),
            (Some("i3 rejected: 413"), Some(5))
        );
        last.note(&ok(Some(Stop::Metered), Vec::new()), 6);
        assert_eq!(
            (last.what.as_deref(), last.at_ms),
            (Some("i3 rejected: 413"), Some(5))
        );
    }

    /// An incident just committed is counted on the board at once, with its bytes; with no
    /// upload server the board says so.
    #[test]
    fn a_committed_incident_is_counted_at_once() {
        let data = tempfile::tempdir().unwrap();
        let (spool, ids) = three_incidents(data.path(), 0);
        let board = QueueBoard::default();
        let size = |id: &str| bytes_on_disk(&spool, id);
        let before = spool.now_ms();
        note_queued(&board, &spool, &ids[0], true);
        let q = board.newer(&mut 0).unwrap();
        assert!(q.wired);
        assert_eq!(
            (q.pending, q.pending_bytes, q.waiting_for),
            (1, size(&ids[0]), None)
        );
        assert!(q.updated_ms >= before && q.updated_ms <= spool.now_ms());
        note_queued(&board, &spool, &ids[1], false);
        let q = board.newer(&mut 0).unwrap();
        assert_eq!(
            (q.pending, q.pending_bytes),
            (2, size(&ids[0]) + size(&ids[1]))
        );
        assert_eq!(q.waiting_for.as_deref(), Some(NO_UPLOAD_URL));
    }
}
