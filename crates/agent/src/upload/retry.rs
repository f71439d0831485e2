//! Waits in memory: failures in a row per spool and key, and the capped, jittered backoff.

use super::*;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Failures in a row, in this process, per spool root and key, each with the time before
/// which the next try waits. Kept in memory: the record that would hold them may not be
/// writable then (a full disk), and a new process simply starts a streak afresh.
pub(super) struct Streaks(Mutex<Vec<Streak>>);

pub(super) struct Streak {
    root: PathBuf,
    key: String,
    failures: u32,
    until_ms: u64,
}

impl Streaks {
    const fn new() -> Streaks {
        Streaks(Mutex::new(Vec::new()))
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Streak>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One more failure of `key`: the streak's length and its [`backoff`]; the next try is
    /// not due before `now` plus that.
    pub(super) fn failed(&self, root: &Path, key: &str, cfg: &Config, now: u64) -> (u32, Duration) {
        let mut v = self.lock();
        let at = match v.iter().position(|s| s.root == root && s.key == key) {
            Some(k) => k,
            None => {
                v.push(Streak {
                    root: root.to_path_buf(),
                    key: key.to_string(),
                    failures: 0,
                    until_ms: 0,
                });
                v.len() - 1
            }
        };
        let s = &mut v[at];
        s.failures = s.failures.saturating_add(1);
        let wait = backoff(cfg, s.failures);
        s.until_ms = now + wait.as_millis() as u64;
        (s.failures, wait)
    }

    /// A success ends `key`'s streak.
    pub(super) fn ended(&self, root: &Path, key: &str) {
        self.lock().retain(|s| s.root != root || s.key != key);
    }

    /// Whether a try of `key` at `now` must still wait (a wait longer than `backoff_cap` means
    /// the clock was set back: it has expired).
    pub(super) fn waits(&self, root: &Path, key: &str, now: u64, cfg: &Config) -> bool {
        let cap = cfg.backoff_cap.as_millis() as u64;
        self.lock()
            .iter()
            .any(|s| s.root == root && s.key == key && still_waits(s.until_ms, now, cap))
    }
}

/// Whether a wait until `until` (ms) still holds at `now`: it is ahead, and at most `bound`
/// ahead. Further ahead than any wait we set or obey, the clock was set back since: it has
/// expired, rather than hold uploads back for as long as the clock jumped.
pub(super) fn still_waits(until: u64, now: u64, bound: u64) -> bool {
    until > now && until - now <= bound
}

/// Endpoint problems in a row (key ""): each wait doubles. The wait itself is kept in
/// `spool.json`; the count is not, so a new process starts again from `backoff_base` once the
/// stored wait is over.
pub(super) static ENDPOINT_PROBLEMS: Streaks = Streaks::new();

/// Incidents whose plan failed (key: the incident's id), a full disk while compressing or
/// writing meta.json: planning is retried after a backoff, not on every pass, since it redoes
/// the compression each time, and the incident's record cannot hold the wait on a full disk.
/// No attempt is counted: the server is not involved, and the spool's age quota bounds how
/// long it waits.
pub(super) static PLAN_FAILURES: Streaks = Streaks::new();

/// The delay before attempt `attempts + 1`: `base · 2^(attempts-1)`, capped, times a random
/// factor in [0.5, 1].
pub fn backoff(cfg: &Config, attempts: u32) -> Duration {
    let base = cfg.backoff_base.as_millis() as u64;
    let cap = cfg.backoff_cap.as_millis() as u64;
    let exp = attempts.saturating_sub(1).min(40);
    let d = base.saturating_mul(1u64 << exp).min(cap);
    let jitter = 0.5 + 0.5 * f64::from(crate::random_u32()) / f64::from(u32::MAX);
    Duration::from_millis((d as f64 * jitter) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn endpoint_problems_in_a_row_are_counted_per_spool() {
        let (a, b) = (Path::new("/spool/a"), Path::new("/spool/b"));
        let cfg = Config::default();
        let problem = |root| ENDPOINT_PROBLEMS.failed(root, "", &cfg, 0).0;
        assert_eq!(problem(a), 1);
        assert_eq!(problem(a), 2);
        assert_eq!(problem(b), 1);
        ENDPOINT_PROBLEMS.ended(a, "");
        assert_eq!(problem(a), 1);
        assert_eq!(problem(b), 2);
    }

    fn config(base_ms: u64, cap_ms: u64) -> Config {
        Config {
            backoff_base: Duration::from_millis(base_ms),
            backoff_cap: Duration::from_millis(cap_ms),
            ..Config::default()
        }
    }

    #[test]
    fn each_wait_doubles_up_to_the_cap_and_is_drawn_between_its_half_and_itself() {
        let cfg = config(1_000, 8_000);
        // (attempts, the wait before the random factor): 0 attempts waits as 1 does.
        let full = [
            (0, 1_000),
            (1, 1_000),
            (2, 2_000),
            (3, 4_000),
            (4, 8_000),
            (5, 8_000),
        ];
        for (attempts, full) in full.into_iter().chain([(40, 8_000), (u32::MAX, 8_000)]) {
            let drawn: Vec<u64> = (0..400)
                .map(|_| backoff(&cfg, attempts).as_millis() as u64)
                .collect();
            let (lo, hi) = (*drawn.iter().min().unwrap(), *drawn.iter().max().unwrap());
            assert!(
                lo >= full / 2 && hi <= full,
                "attempt {attempts}: waits {lo}..={hi} ms, not within {}..={full}",
                full / 2
            );
            // Spread over the range, not one value: 400 draws all in one half of it would
            // happen once in 2^399.
            assert!(
                lo < full * 3 / 4 && hi > full * 3 / 4,
                "attempt {attempts}: waits {lo}..={hi} ms, no spread"
            );
        }
        // A cap below the base caps the first wait too.
        assert!(backoff(&config(5_000, 2_000), 1) <= Duration::from_millis(2_000));
    }

    #[test]
    fn a_try_waits_until_its_streaks_time_unless_the_clock_went_back_further_than_the_cap() {
        let streaks = Streaks::new();
        let cfg = config(1_000, 8_000);
        let (a, b) = (Path::new("/spool/a"), Path::new("/spool/b"));
        let now = 1_000_000;
        assert!(!streaks.waits(a, "k", now, &cfg), "no failure yet");

        let (n, wait) = streaks.failed(a, "k", &cfg, now);
        let w = wait.as_millis() as u64;
        assert_eq!(n, 1);
        assert!((500..=1_000).contains(&w), "first wait {w} ms");
        assert!(streaks.waits(a, "k", now, &cfg));
        assert!(streaks.waits(a, "k", now + w - 1, &cfg));
        assert!(!streaks.waits(a, "k", now + w, &cfg), "due at its time");
        // Another key, another spool: their own streaks.
        assert!(!streaks.waits(a, "j", now, &cfg));
        assert!(!streaks.waits(b, "k", now, &cfg));
        // The clock set back: a wait of at most the cap still holds, a longer one has expired.
        let cap = 8_000;
        assert!(streaks.waits(a, "k", now + w - cap, &cfg));
        assert!(!streaks.waits(a, "k", now + w - cap - 1, &cfg));

        // A second failure in a row, later: the count goes on and the wait is from then.
        let later = now + w;
        let (n, wait) = streaks.failed(a, "k", &cfg, later);
        let w2 = wait.as_millis() as u64;
        assert_eq!(n, 2);
        assert!((1_000..=2_000).contains(&w2), "second wait {w2} ms");
        assert!(streaks.waits(a, "k", later + w2 - 1, &cfg));
        assert!(!streaks.waits(a, "k", later + w2, &cfg));

        // A success ends the streak: no wait, and the next failure counts from one.
        streaks.ended(a, "k");
        assert!(!streaks.waits(a, "k", later, &cfg));
        assert_eq!(streaks.failed(a, "k", &cfg, later).0, 1);
    }
}
