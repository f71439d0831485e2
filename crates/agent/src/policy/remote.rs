//! The refresh of the policy from a remote URL, and the rules a remote policy must pass.
//!
//! Invariants:
//! - A body becomes active only after it passed, in order: the size bound, the ed25519 signature
//!   (a public key is required: without one nothing remote is trusted, and the agent refuses to
//!   start with a `remote.url`), [`Policy::parse`], the rules of remote policies
//!   ([`check_remote`]: `issued_at_s` and `expires_at_s` given, not expired, not issued more
//!   than [`MAX_CLOCK_AHEAD_S`] ahead of the device's clock; `remote.url` and `upload.url`
//!   named, null included), and the version check (strictly newer than the active one; the same
//!   version only with the same content, or signed again later). Any failure leaves the active
//!   policy and the cache untouched and is returned as an error for the caller to log.
//! - Only `https://` is fetched, or plain `http://` to a loopback address; a redirect is
//!   followed (at most [`MAX_REDIRECTS`]) only to a URL that passes the same rule, and never
//!   from https to http.
//! - The cache ([`super::cache`]) only ever holds a body that passed those checks.
//! - At most one fetch per `remote.min_refresh_hours`, failed or not; the time of the last attempt
//!   is persisted so restarts do not bypass it. A last attempt later than now (the clock was set
//!   back) makes a fetch due at once, rather than when the clock catches up.
//! - `If-None-Match` carries the ETag of the cached body, and only while that body passes its
//!   checks on load: a 304 must never keep out a policy the agent does not hold.
//! - The signature travels in the `X-Oomguard-Signature` response header: base64 of the 64-byte
//!   ed25519 signature over the exact body bytes.
//! - A fetch blocks its thread for up to `remote.timeout_ms` per step: the agent runs it on the
//!   I/O thread, never on the sampling thread.
#![forbid(unsafe_code)]

pub use super::cache::{Cache, Meta, CACHE_FILE};
use super::{Parsed, Policy, PolicyError};
use base64::Engine as _;
use ed25519_dalek::{Signature, VerifyingKey};
use std::time::Duration;

/// Response header that carries the signature.
pub const SIGNATURE_HEADER: &str = "X-Oomguard-Signature";

/// How far ahead of the device's clock a remote policy's `issued_at_s` may lie (the server's
/// and the device's clocks differ).
pub const MAX_CLOCK_AHEAD_S: u64 = 86_400;

/// Redirects followed at most by one fetch.
pub const MAX_REDIRECTS: u32 = 2;

/// Decode a base64 ed25519 public key (32 bytes); the error says what is wrong with the key
/// ("is not base64: …", "is 3 bytes, expected 32").
pub fn parse_public_key(b64: &str) -> Result<VerifyingKey, String> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| format!("is not base64: {e}"))?;
    let arr: [u8; 32] = raw
        .as_slice()
        .try_into()
        .map_err(|_| format!("is {} bytes, expected 32", raw.len()))?;
    VerifyingKey::from_bytes(&arr).map_err(|e| format!("is not a valid ed25519 point: {e}"))
}

/// Check `sig_b64` over `body` with `key`. Without a key nothing passes: a remote policy is
/// trusted only for its signature.
pub fn verify(
    body: &[u8],
    sig_b64: Option<&str>,
    key: Option<&VerifyingKey>,
) -> Result<(), PolicyError> {
    let Some(key) = key else {
        return Err(PolicyError::Signature(
            "cannot be checked: no public key was given at start".into(),
        ));
    };
    let Some(sig_b64) = sig_b64 else {
        return Err(PolicyError::Signature(
            "is missing (a public key was given at start)".into(),
        ));
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(sig_b64.trim())
        .map_err(|e| PolicyError::Signature(format!("is not base64: {e}")))?;
    let sig = Signature::from_slice(&raw)
        .map_err(|_| PolicyError::Signature(format!("is {} bytes, expected 64", raw.len())))?;
    key.verify_strict(body, &sig).map_err(|_| {
        PolicyError::Signature(
            "does not match the body (tampered or signed with another key)".into(),
        )
    })
}

/// A span of seconds for a log line: "1 day", "3 days", "5 h", "12 min", "40 s".
fn span(s: u64) -> String {
    if s < 120 {
        format!("{s} s")
    } else if s < 7200 {
        format!("{} min", s / 60)
    } else if s < 86_400 {
        format!("{} h", s / 3600)
    } else if s < 2 * 86_400 {
        "1 day".to_string()
    } else {
        format!("{} days", s / 86_400)
    }
}

/// The rules a remote policy (fetched, or cached from a fetch) passes beyond validation, at
/// `now_s` (seconds since the epoch): dated, within its validity, naming both URLs.
///
/// Why both URLs must be named: a field left out takes its built-in default, and both URLs
/// default to null, so a signed policy that only says what it changes would switch refresh and
/// upload off on every device, for as long as it is cached. Filling the gaps from the policy
/// active on the device instead would make one signed document mean different things on
/// different devices (and again at the next start, against whatever policy that app version
/// ships), so it is refused with its reason; null is accepted when it is written.
pub fn check_remote(parsed: &Parsed, now_s: u64) -> Result<(), PolicyError> {
    let p = &parsed.policy;
    let v = p.version;
    if let Some(field) = parsed.left_out.first() {
        return Err(PolicyError::Remote(format!(
            "v{v} leaves out {field}: a remote policy names remote.url and upload.url (null to switch one off), or every device would take the built-in null"
        )));
    }
    let (Some(issued), Some(expires)) = (p.issued_at_s, p.expires_at_s) else {
        return Err(PolicyError::Remote(format!(
            "v{v} is not dated: a remote policy carries issued_at_s and expires_at_s (seconds since the epoch)"
        )));
    };
    if issued > now_s.saturating_add(MAX_CLOCK_AHEAD_S) {
        return Err(PolicyError::Remote(format!(
            "v{v} is issued {} in the future (issued_at_s {issued}, the device's clock {now_s})",
            span(issued - now_s)
        )));
    }
    if expires <= now_s {
        return Err(PolicyError::Remote(format!(
            "v{v} expired {} ago (expires_at_s {expires}, the device's clock {now_s})",
            span(now_s - expires)
        )));
    }
    Ok(())
}

/// `p` without its signing times: what a renewal (the same version signed again) must keep.
fn undated(p: &Policy) -> Policy {
    Policy {
        issued_at_s: None,
        expires_at_s: None,
        ..p.clone()
    }
}

/// Validate a candidate body against the active policy at `now_s` (seconds since the epoch).
/// `Ok(None)` means it is the active policy again (same version, same content): nothing to do.
pub fn accept(
    body: &[u8],
    sig_b64: Option<&str>,
    key: Option<&VerifyingKey>,
    active: &Policy,
    max_bytes: u64,
    now_s: u64,
) -> Result<Option<Parsed>, PolicyError> {
    if body.len() as u64 > max_bytes {
        return Err(PolicyError::TooBig {
            size: body.len(),
            max: max_bytes as usize,
        });
    }
    verify(body, sig_b64, key)?;
    let parsed = Policy::parse(body)?;
    check_remote(&parsed, now_s)?;
    let v = parsed.policy.version;
    if v == active.version && parsed.policy == *active {
        return Ok(None);
    }
    // The same version signed again later (a new expiry) replaces the active one.
    let renewed = v == active.version
        && undated(&parsed.policy) == undated(active)
        && parsed.policy.issued_at_s > active.issued_at_s;
    if v < active.version || (v == active.version && !renewed) {
        return Err(PolicyError::NotNewer {
            got: v,
            active: active.version,
        });
    }
    Ok(Some(parsed))
}

/// Where a redirect from `from` to `location` leads, if it may be followed: the same rule as the
/// policy URL itself (https, or http to loopback), and never from https down to http.
pub fn redirect_target(from: &str, location: &str) -> Result<String, String> {
    let next = crate::net::weburl::Url::parse(from)
        .and_then(|base| base.join(location.trim()))
        .map_err(|e| format!("redirect to {location:?} is not a URL ({e})"))?;
    if let Err(why) = super::url::check_url(next.as_str()) {
        return Err(format!("redirect to {:?} refused: it {why}", next.as_str()));
    }
    if from.starts_with("https:") && next.scheme() != "https" {
        return Err(format!(
            "redirect to {:?} refused: from https down to plain http",
            next.as_str()
        ));
    }
    Ok(next.into())
}

/// What a refresh did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// No `remote.url` in the active policy.
    Disabled,
    /// The last attempt was less than `min_refresh_hours` ago.
    NotDue { due_in_ms: u64 },
    /// The server answered 304 Not Modified.
    NotModified,
    /// The server sent the active policy again.
    Unchanged,
    /// A newer valid policy: now cached; the caller activates it.
    Activated(Box<Parsed>),
}

/// Fetches, validates and caches remote policies.
#[derive(Debug)]
pub struct Refresher {
    cache: Cache,
    key: Option<VerifyingKey>,
    meta: Meta,
}

impl Refresher {
    pub fn new(cache: Cache, key: Option<VerifyingKey>) -> Self {
        let now_s = super::cache::now_ms() / 1000;
        let cached = matches!(cache.load(key.as_ref(), now_s), Ok(Some(_)));
        Self::with_cached(cache, key, cached)
    }

    /// [`new`](Self::new) for a caller that has loaded the cache already: `cached` says whether
    /// its body passed its checks.
    pub fn with_cached(cache: Cache, key: Option<VerifyingKey>, cached: bool) -> Self {
        let mut meta = cache.meta();
        if !cached {
            // The body that ETag names is gone or rejected (the agent logs why when it loads the
            // cache): ask for the whole policy.
            meta.etag = None;
        }
        Refresher { cache, key, meta }
    }

    /// Why no fetch is due now: `Some(Disabled)` or `Some(NotDue)`; `None` when one is. Reads
    /// nothing but memory.
    pub fn not_due(&self, active: &Policy, now_ms: u64) -> Option<Outcome> {
        if active.remote.url.is_none() {
            return Some(Outcome::Disabled);
        }
        let period = active.remote.min_refresh_hours * 3600 * 1000;
        let last = self.meta.last_attempt_ms;
        // A last attempt in the future (the clock was set back since) does not count.
        if last != 0 && last <= now_ms && now_ms - last < period {
            return Some(Outcome::NotDue {
                due_in_ms: period - (now_ms - last),
            });
        }
        None
    }

    /// Fetch the policy at `active.remote.url` if due. Blocks for at most
    /// `active.remote.timeout_ms` per connect, read and DNS lookup, and per redirect.
    pub fn refresh(&mut self, active: &Policy, now_ms: u64) -> Result<Outcome, PolicyError> {
        if let Some(o) = self.not_due(active, now_ms) {
            return Ok(o);
        }
        let Some(url) = active.remote.url.clone() else {
            return Ok(Outcome::Disabled);
        };
        let fetch_err = |what: String| PolicyError::Fetch {
            url: url.clone(),
            what,
        };
        if self.key.is_none() {
            return Err(fetch_err(
                "not fetched: no public key was given at start to check what it serves".into(),
            ));
        }
        self.meta.last_attempt_ms = now_ms;
        // Persist the attempt first: a crash or failure must not cause a fetch storm.
        self.cache.save_meta(&self.meta)?;
        if let Err(why) = super::url::check_url(&url) {
            return Err(fetch_err(format!("not fetched: it {why}")));
        }
        let limit = Duration::from_millis(active.remote.timeout_ms);
        let max = active.remote.max_bytes;
        let transport = crate::net::transport();
        let mut at = url.clone();
        let mut hops = 0;
        let resp = loop {
            // Each request: connect, DNS, every read and the whole exchange within `limit`.
            let mut req = crate::net::Request::new("GET", &at, limit);
            if let Some(etag) = &self.meta.etag {
                req = req.header("If-None-Match", etag.clone());
            }
            req.want = &["Location", "Content-Length", "ETag", SIGNATURE_HEADER];
            req.max_body = usize::try_from(max).unwrap_or(usize::MAX - 1);
            let resp = transport.exchange(&req).map_err(|e| fetch_err(e.what))?;
            // Redirects are followed here, each one checked (see `redirect_target`).
            if !(300..400).contains(&resp.status) || resp.status == 304 {
                break resp;
            }
            let location = resp.header("Location").unwrap_or("").to_string();
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(fetch_err(format!(
                    "more than {MAX_REDIRECTS} redirects (the last to {location:?})"
                )));
            }
            at = redirect_target(&at, &location).map_err(fetch_err)?;
        };
        if resp.status == 304 {
            return Ok(Outcome::NotModified);
        }
        if resp.status != 200 {
            return Err(fetch_err(format!("HTTP status {}", resp.status)));
        }
        if let Some(len) = resp
            .header("Content-Length")
            .and_then(|l| l.parse::<u64>().ok())
        {
            if len > max {
                return Err(PolicyError::TooBig {
                    size: len as usize,
                    max: max as usize,
                });
            }
        }
        if resp.truncated {
            return Err(PolicyError::TooBig {
                size: resp.body.len() + 1,
                max: max as usize,
            });
        }
        let etag = resp.header("ETag").map(str::to_string);
        let sig = resp.header(SIGNATURE_HEADER).map(str::to_string);
        let body = resp.body;
        let now_s = now_ms / 1000;
        let accepted = accept(&body, sig.as_deref(), self.key.as_ref(), active, max, now_s)?;
        self.meta.etag = etag;
        self.meta.signature = sig;
        self.cache.save(&body, &self.meta)?;
        Ok(match accepted {
            None => Outcome::Unchanged,
            Some(parsed) => Outcome::Activated(Box::new(parsed)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};
    use std::net::TcpListener;
    use std::path::Path;
    use std::sync::Arc;

    type Response = (u16, Vec<(&'static str, String)>, String);

    fn signing_key() -> SigningKey {
        SigningKey::from_bytes(&[7u8; 32])
    }

    fn sign(body: &str) -> String {
        base64::engine::general_purpose::STANDARD
            .encode(signing_key().sign(body.as_bytes()).to_bytes())
    }

    /// `net::loopback`'s test server on 127.0.0.1, answering each request with the next
    /// scripted response (the script may name the server's own URL); it sends back the head of
    /// each request it answered.
    struct Server {
        url: String,
        seen: std::sync::mpsc::Receiver<Vec<u8>>,
    }

    impl Server {
        /// The head of the next request the server answered, waiting for it.
        fn next_request(&self) -> String {
            String::from_utf8_lossy(&self.seen.recv().unwrap()).into_owned()
        }
    }

    fn serve(script: impl FnOnce(&str) -> Vec<Response>) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/policy.json", l.local_addr().unwrap());
        let answers = script(&url)
            .into_iter()
            .map(|(status, headers, body)| {
                let mut out = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                    body.len()
                );
                for (k, v) in headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                out.push_str(&body);
                &*Box::leak(out.into_bytes().into_boxed_slice())
            })
            .collect();
        let (_, seen) = crate::net::loopback::tests::serve_each(l, answers, 0);
        Server { url, seen }
    }

    fn active_with(url: &str, version: u64) -> Policy {
        let mut p = Policy {
            version,
            ..Policy::default()
        };
        p.remote.url = Some(url.to_string());
        p
    }

    /// A remote policy as a server sends it: dated around [`NOW_S`], naming both URLs.
    fn body(url: &str, version: u64, strikes: u32) -> String {
        format!(
            r#"{{"version":{version},"issued_at_s":{},"expires_at_s":{},"heap":{{"strikes":{strikes}}},"remote":{{"url":"{url}"}},"upload":{{"url":null}}}}"#,
            NOW_S - 3600,
            NOW_S + 30 * DAY_S
        )
    }

    /// `body` with its signature header.
    fn signed(body: String, mut headers: Vec<(&'static str, String)>) -> Response {
        headers.push((SIGNATURE_HEADER, sign(&body)));
        (200, headers, body)
    }

    /// Replace the body in the cache file, as something other than the agent might.
    fn tamper(dir: &Path, body: &str) {
        let p = dir.join(super::super::cache::CACHE_FILE);
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        v["body"] = body.into();
        std::fs::write(&p, v.to_string()).unwrap();
    }

    const H: u64 = 3600 * 1000;

    #[test]
    fn etag_not_modified_min_interval_and_cache() {
        let dir = tempfile::tempdir().unwrap();
        let srv = serve(|url| {
            vec![
                signed(body(url, 2, 4), vec![("ETag", "\"v2\"".into())]),
                (304, vec![], String::new()),
            ]
        });
        let mut r = Refresher::new(Cache::new(dir.path()), Some(signing_key().verifying_key()));
        let active = active_with(&srv.url, 1);
        let t0 = NOW_S * 1000;
        let Outcome::Activated(p) = r.refresh(&active, t0).unwrap() else {
            panic!("not activated")
        };
        assert_eq!(p.policy.version, 2);
        assert_eq!(p.policy.heap.strikes, 4);
        // Within 12 h: not fetched.
        assert!(matches!(
            r.refresh(&p.policy, t0 + 11 * H).unwrap(),
            Outcome::NotDue { .. }
        ));
        // After 12 h: If-None-Match sent, 304.
        assert_eq!(
            r.refresh(&p.policy, t0 + 12 * H).unwrap(),
            Outcome::NotModified
        );
        let seen = [srv.next_request(), srv.next_request()];
        assert!(!seen[0].to_lowercase().contains("if-none-match"));
        assert!(
            seen[1].to_lowercase().contains("if-none-match: \"v2\""),
            "{}",
            seen[1]
        );
        // The cache holds the new policy, and a restart honours the interval.
        let cached = Cache::new(dir.path())
            .load(Some(&signing_key().verifying_key()), NOW_S)
            .unwrap()
            .unwrap();
        assert_eq!(cached.policy, p.policy);
        let mut r2 = Refresher::new(Cache::new(dir.path()), Some(signing_key().verifying_key()));
        assert!(matches!(
            r2.refresh(&p.policy, t0 + 13 * H).unwrap(),
            Outcome::NotDue { .. }
        ));
    }

    #[test]
    fn signatures_versions_and_bad_bodies_are_rejected_and_cache_kept() {
        let dir = tempfile::tempdir().unwrap();
        let srv = serve(|url| {
            let good = body(url, 3, 5);
            let tampered = body(url, 3, 6);
            let older = body(url, 1, 5);
            vec![
                // Unsigned.
                (200, vec![], body(url, 3, 5)),
                // Tampered: signature of another body.
                (200, vec![(SIGNATURE_HEADER, sign(&good))], tampered),
                // Signed but older.
                (200, vec![(SIGNATURE_HEADER, sign(&older))], older.clone()),
                // Signed but out of range.
                (
                    200,
                    vec![(
                        SIGNATURE_HEADER,
                        sign(r#"{"version":9,"heap":{"strikes":0}}"#),
                    )],
                    r#"{"version":9,"heap":{"strikes":0}}"#.into(),
                ),
                // Signed, truncated.
                (
                    200,
                    vec![(SIGNATURE_HEADER, sign(r#"{"version":9"#))],
                    r#"{"version":9"#.into(),
                ),
                // Too big.
                (
                    200,
                    vec![],
                    format!("{{\"version\":9,\"pad\":\"{}\"}}", "x".repeat(70_000)),
                ),
                // Server error.
                (500, vec![], String::new()),
                // Good.
                (200, vec![(SIGNATURE_HEADER, sign(&good))], good),
            ]
        });
        let vk = signing_key().verifying_key();
        let mut r = Refresher::new(Cache::new(dir.path()), Some(vk));
        let active = active_with(&srv.url, 2);
        let mut t = NOW_S * 1000;
        let mut errors = Vec::new();
        for _ in 0..7 {
            errors.push(r.refresh(&active, t).unwrap_err().to_string());
            t += 12 * H;
            assert!(
                Cache::new(dir.path())
                    .load(Some(&vk), NOW_S)
                    .unwrap()
                    .is_none(),
                "a bad body was cached"
            );
        }
        assert!(errors[0].contains("signature is missing"), "{}", errors[0]);
        assert!(
            errors[1].contains("does not match the body"),
            "{}",
            errors[1]
        );
        assert!(
            errors[2].contains("version 1 is not newer than the active version 2"),
            "{}",
            errors[2]
        );
        assert!(
            errors[3].contains("heap.strikes: 0 is out of range"),
            "{}",
            errors[3]
        );
        assert!(
            errors[4].contains("not a valid JSON object"),
            "{}",
            errors[4]
        );
        assert!(
            errors[5].contains("more than the limit of 65536"),
            "{}",
            errors[5]
        );
        assert!(errors[6].contains("HTTP status 500"), "{}", errors[6]);
        for e in &errors {
            assert!(e.contains("last good policy stays active"), "{e}");
        }
        let Outcome::Activated(p) = r.refresh(&active, t).unwrap() else {
            panic!("not activated")
        };
        assert_eq!(p.policy.heap.strikes, 5);
        assert_eq!(
            Cache::new(dir.path())
                .load(Some(&vk), NOW_S)
                .unwrap()
                .unwrap()
                .policy,
            p.policy
        );
        // Tampering with the cache on disk is caught on load.
        tamper(dir.path(), &body(&srv.url, 3, 9));
        assert!(Cache::new(dir.path()).load(Some(&vk), NOW_S).is_err());
    }

    /// The cached body is rejected on load (here: tampered on disk; as well: unsigned once a
    /// key is given), so the built-in policy is active; its ETag must not be sent, or the
    /// server's 304 would keep its policy out for as long as it does not change.
    #[test]
    fn the_etag_of_a_rejected_cached_body_is_not_sent() {
        let dir = tempfile::tempdir().unwrap();
        let srv = serve(|url| vec![signed(body(url, 2, 4), vec![("ETag", "\"v2\"".into())])]);
        let cache = Cache::new(dir.path());
        let meta = Meta {
            etag: Some("\"v2\"".into()),
            ..Meta::default()
        };
        cache.save(body(&srv.url, 2, 4).as_bytes(), &meta).unwrap();
        tamper(dir.path(), "{\"version\":2,");
        assert!(cache
            .load(Some(&signing_key().verifying_key()), NOW_S)
            .is_err());
        let mut r = Refresher::new(Cache::new(dir.path()), Some(signing_key().verifying_key()));
        let active = active_with(&srv.url, 1);
        let Outcome::Activated(p) = r.refresh(&active, NOW_S * 1000).unwrap() else {
            panic!("not activated")
        };
        assert_eq!(p.policy.version, 2);
        let seen = srv.next_request();
        assert!(!seen.to_lowercase().contains("if-none-match"), "{seen}");
        // Cached again, with its ETag.
        assert_eq!(
            Cache::new(dir.path())
                .load(Some(&signing_key().verifying_key()), NOW_S)
                .unwrap()
                .unwrap()
                .policy,
            p.policy
        );
        assert_eq!(
            Cache::new(dir.path()).meta().etag.as_deref(),
            Some("\"v2\"")
        );
    }

    /// The last attempt is recorded in the future (the clock was set back since, e.g. after
    /// it had run ahead): the refresh is due now, not once the clock has caught up.
    #[test]
    fn a_last_attempt_in_the_future_does_not_suspend_refreshes() {
        let dir = tempfile::tempdir().unwrap();
        let srv = serve(|url| vec![signed(body(url, 2, 4), vec![])]);
        let now = NOW_S * 1000;
        Cache::new(dir.path())
            .save_meta(&Meta {
                last_attempt_ms: now + 400 * 24 * H,
                ..Meta::default()
            })
            .unwrap();
        let mut r = Refresher::new(Cache::new(dir.path()), Some(signing_key().verifying_key()));
        let active = active_with(&srv.url, 1);
        let out = r.refresh(&active, now).unwrap();
        assert!(matches!(out, Outcome::Activated(_)), "{out:?}");
        // The attempt is now recorded at the present time: the next is 12 h away.
        assert_eq!(Cache::new(dir.path()).meta().last_attempt_ms, now);
        assert!(matches!(
            r.refresh(&active, now + H).unwrap(),
            Outcome::NotDue { .. }
        ));
    }

    /// Now, in the tests of dated policies (seconds since the epoch).
    const NOW_S: u64 = 1_795_000_000;
    const DAY_S: u64 = 86_400;
    const URLS: &str = r#""remote":{"url":"https://p.example/p.json"},"upload":{"url":"https://c.example/files/"}"#;

    fn dated(version: u64, issued: u64, expires: u64) -> String {
        format!(r#"{{"version":{version},"issued_at_s":{issued},"expires_at_s":{expires},{URLS}}}"#)
    }

    /// What a remote policy must be: signed (no key, no trust), dated and not expired, and
    /// naming both URLs (left out, they would take the built-in null and switch refresh and
    /// upload off on every device).
    #[test]
    fn a_remote_policy_must_be_signed_dated_and_name_its_urls() {
        let vk = signing_key().verifying_key();
        let active = Policy::default();
        let good = dated(2, NOW_S - 3600, NOW_S + 30 * DAY_S);
        let cases = [
            (
                format!(r#"{{"version":2,{URLS}}}"#),
                "v2 is not dated: a remote policy carries issued_at_s and expires_at_s",
            ),
            (
                dated(2, NOW_S - 40 * DAY_S, NOW_S - DAY_S),
                "v2 expired 1 day ago",
            ),
            (
                dated(2, NOW_S + 3 * DAY_S, NOW_S + 30 * DAY_S),
                "v2 is issued 3 days in the future",
            ),
            (
                format!(
                    r#"{{"version":2,"issued_at_s":{},"expires_at_s":{},"upload":{{"url":null}}}}"#,
                    NOW_S,
                    NOW_S + DAY_S
                ),
                "v2 leaves out remote.url",
            ),
            (
                format!(
                    r#"{{"version":2,"issued_at_s":{},"expires_at_s":{},"remote":{{"url":"https://p.example/p.json"}}}}"#,
                    NOW_S,
                    NOW_S + DAY_S
                ),
                "v2 leaves out upload.url",
            ),
        ];
        let mut failures = Vec::new();
        for (body, want) in &cases {
            match accept(
                body.as_bytes(),
                Some(&sign(body)),
                Some(&vk),
                &active,
                65_536,
                NOW_S,
            ) {
                Err(e) if e.to_string().contains(want) => {}
                other => failures.push(format!("{body}: wanted {want:?}, got {other:?}")),
            }
        }
        match accept(good.as_bytes(), None, None, &active, 65_536, NOW_S) {
            Err(e) if e.to_string().contains("no public key was given at start") => {}
            other => failures.push(format!("without a key: {other:?}")),
        }
        match accept(
            good.as_bytes(),
            Some(&sign(&good)),
            Some(&vk),
            &active,
            65_536,
            NOW_S,
        ) {
            Ok(Some(p)) if p.policy.version == 2 => {}
            other => failures.push(format!("good: {other:?}")),
        }
        // Explicit nulls are a choice, not an omission; a clock a few hours behind is fine.
        let off = format!(
            r#"{{"version":2,"issued_at_s":{},"expires_at_s":{},"remote":{{"url":null}},"upload":{{"url":null}}}}"#,
            NOW_S + 3600,
            NOW_S + DAY_S
        );
        if let Err(e) = accept(
            off.as_bytes(),
            Some(&sign(&off)),
            Some(&vk),
            &active,
            65_536,
            NOW_S,
        ) {
            failures.push(format!("explicit nulls: {e}"));
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }

    /// A redirect is followed only where the URL itself could point: never to plain http off
    /// loopback (here an unroutable address: had it been followed, the error would be a
    /// connection failure, not a refusal).
    #[test]
    fn a_redirect_to_plain_http_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let srv = serve(|_| {
            vec![(
                302,
                vec![("Location", "http://192.0.2.1:9/policy.json".into())],
                String::new(),
            )]
        });
        let vk = signing_key().verifying_key();
        let mut r = Refresher::new(Cache::new(dir.path()), Some(vk));
        let mut active = active_with(&srv.url, 1);
        active.remote.timeout_ms = 500;
        let e = r.refresh(&active, NOW_S * 1000).unwrap_err().to_string();
        assert!(
            e.contains("redirect to \"http://192.0.2.1:9/policy.json\" refused"),
            "{e}"
        );
    }

    /// A save cut short (the two-file cache wrote the body, then was killed before the file
    /// holding its signature) or two processes of the app saving at once must never leave a
    /// cache that fails its checks: the last good policy survives.
    #[test]
    fn a_save_cut_short_or_two_savers_at_once_keep_the_last_good_policy() {
        let dir = tempfile::tempdir().unwrap();
        let vk = signing_key().verifying_key();
        let v3 = dated(3, NOW_S, NOW_S + 30 * DAY_S);
        let v4 = dated(4, NOW_S, NOW_S + 30 * DAY_S);
        let meta = |b: &str| Meta {
            signature: Some(sign(b)),
            ..Meta::default()
        };
        let c = Cache::new(dir.path());
        c.save(v3.as_bytes(), &meta(&v3)).unwrap();
        sys::fs::write_file_atomic(&dir.path().join("policy.json"), v4.as_bytes()).unwrap();
        match c.load(Some(&vk), NOW_S) {
            Ok(Some(p)) => assert_eq!(p.policy.version, 3),
            other => panic!("after a save cut short: {other:?}"),
        }
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let savers: Vec<_> = [(v3.clone(), v4.clone()), (v4.clone(), v3.clone())]
            .into_iter()
            .map(|(a, b)| {
                let c = Cache::new(dir.path());
                let (ma, mb) = (meta(&a), meta(&b));
                std::thread::spawn(move || {
                    for i in 0..40 {
                        let (body, m) = if i % 2 == 0 { (&a, &ma) } else { (&b, &mb) };
                        c.save(body.as_bytes(), m).unwrap();
                    }
                })
            })
            .collect();
        let reader = {
            let done = done.clone();
            let c = Cache::new(dir.path());
            std::thread::spawn(move || {
                let mut bad = Vec::new();
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    match c.load(Some(&vk), NOW_S) {
                        Ok(Some(_)) => {}
                        other => bad.push(format!("{other:?}")),
                    }
                }
                bad
            })
        };
        for s in savers {
            s.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let bad = reader.join().unwrap();
        assert!(
            bad.is_empty(),
            "{} failed loads, first: {}",
            bad.len(),
            bad[0]
        );
    }

    /// The active policy again is nothing to do; other content under the same version is
    /// refused, unless it is the same policy signed again later (a renewal of its expiry).
    #[test]
    fn same_version_same_body_is_unchanged_and_a_later_signature_renews() {
        let vk = signing_key().verifying_key();
        let v2 = dated(2, NOW_S - DAY_S, NOW_S + DAY_S);
        let a = Policy::parse(v2.as_bytes()).unwrap().policy;
        let check = |b: &str| accept(b.as_bytes(), Some(&sign(b)), Some(&vk), &a, 65_536, NOW_S);
        assert!(check(&v2).unwrap().is_none());
        let other = v2.replace(r#""version":2,"#, r#""version":2,"poll_interval_ms":1000,"#);
        assert!(matches!(
            check(&other),
            Err(PolicyError::NotNewer { got: 2, active: 2 })
        ));
        let renewed = dated(2, NOW_S - 60, NOW_S + 30 * DAY_S);
        let p = check(&renewed).unwrap().unwrap().policy;
        assert_eq!(p.expires_at_s, Some(NOW_S + 30 * DAY_S));
        let older = dated(2, NOW_S - 2 * DAY_S, NOW_S + 30 * DAY_S);
        assert!(matches!(
            check(&older),
            Err(PolicyError::NotNewer { got: 2, active: 2 })
        ));
    }

    /// The recipe in README.md: a key made and a policy signed with OpenSSL 3 (`genpkey
    /// -algorithm ed25519`, the DER public key's last 32 bytes, `pkeyutl -sign -rawin`).
    #[test]
    fn a_policy_signed_with_openssl_is_accepted() {
        let body = r#"{"version":2,"issued_at_s":1795000000,"expires_at_s":1795086400,"remote":{"url":null},"upload":{"url":null}}"#;
        let vk = parse_public_key("9maPDS4juz2Sww+AcYIeneTNUEkbEYA9ZV2KiYI+9Tk=").unwrap();
        let sig = "CV6tFtHEbNzmc9W7qtW7gr5sgjWsdWTV3NuNmdyG2EbYXxn8gvExebDw6WR75p7yQbRqOr6GsuwotLnNd38OCw==";
        let p = accept(
            body.as_bytes(),
            Some(sig),
            Some(&vk),
            &Policy::default(),
            65_536,
            NOW_S,
        );
        assert_eq!(p.unwrap().unwrap().policy.version, 2);
    }

    #[test]
    fn public_keys() {
        let vk = signing_key().verifying_key();
        let b64 = base64::engine::general_purpose::STANDARD.encode(vk.to_bytes());
        assert_eq!(parse_public_key(&b64).unwrap(), vk);
        assert!(parse_public_key("nope!").is_err());
        assert!(parse_public_key("AAAA")
            .unwrap_err()
            .to_string()
            .contains("3 bytes, expected 32"));
    }

    /// Each unit of a log line's span starts at its first whole second: 2 min at 120 s, 2 h at
    /// 7,200 s, 1 day at 86,400 s, 2 days at 172,800 s.
    #[test]
    fn a_span_changes_unit_at_the_second_it_reaches_two_of_the_next() {
        let cases = [
            (0, "0 s"),
            (119, "119 s"),
            (120, "2 min"),
            (7_199, "119 min"),
            (7_200, "2 h"),
            (86_399, "23 h"),
            (86_400, "1 day"),
            (172_799, "1 day"),
            (172_800, "2 days"),
        ];
        let got: Vec<(u64, String)> = cases.iter().map(|&(s, _)| (s, span(s))).collect();
        let want: Vec<(u64, String)> = cases.iter().map(|&(s, w)| (s, w.to_string())).collect();
        assert_eq!(got, want);
    }

    /// A policy issued exactly [`MAX_CLOCK_AHEAD_S`] ahead of the device's clock passes; one
    /// second more is refused.
    #[test]
    fn a_policy_issued_exactly_a_day_ahead_passes_and_a_second_more_does_not() {
        let at = |issued: u64| {
            let parsed = Policy::parse(dated(2, issued, NOW_S + 30 * DAY_S).as_bytes()).unwrap();
            check_remote(&parsed, NOW_S).map_err(|e| e.to_string())
        };
        assert_eq!(at(NOW_S + MAX_CLOCK_AHEAD_S), Ok(()));
        let e = at(NOW_S + MAX_CLOCK_AHEAD_S + 1).unwrap_err();
        assert!(
            e.contains("v2 is issued 1 day in the future (issued_at_s 1795086401"),
            "{e}"
        );
    }

    /// `max_bytes` is the largest body accepted: a body of exactly that size passes, and one
    /// byte over is refused with its size.
    #[test]
    fn a_body_of_exactly_max_bytes_is_accepted_and_one_byte_more_is_too_big() {
        let vk = signing_key().verifying_key();
        let good = dated(2, NOW_S - 3600, NOW_S + 30 * DAY_S);
        let n = good.len() as u64;
        let check = |max: u64| {
            accept(
                good.as_bytes(),
                Some(&sign(&good)),
                Some(&vk),
                &Policy::default(),
                max,
                NOW_S,
            )
        };
        assert_eq!(check(n).unwrap().unwrap().policy.version, 2);
        match check(n - 1) {
            Err(PolicyError::TooBig { size, max }) => {
                assert_eq!((size as u64, max as u64), (n, n - 1))
            }
            other => panic!("{other:?}"),
        }
    }

    /// A renewal is the same content signed strictly later: the same issue time with another
    /// expiry, or other content signed later, is not one.
    #[test]
    fn a_renewal_keeps_the_content_and_is_issued_strictly_later() {
        let vk = signing_key().verifying_key();
        let v2 = dated(2, NOW_S - DAY_S, NOW_S + DAY_S);
        let a = Policy::parse(v2.as_bytes()).unwrap().policy;
        let check = |b: &str| accept(b.as_bytes(), Some(&sign(b)), Some(&vk), &a, 65_536, NOW_S);
        let same_time = dated(2, NOW_S - DAY_S, NOW_S + 30 * DAY_S);
        let other_later = dated(2, NOW_S - 60, NOW_S + 30 * DAY_S)
            .replace(r#""version":2,"#, r#""version":2,"poll_interval_ms":1000,"#);
        for b in [&same_time, &other_later] {
            assert!(
                matches!(check(b), Err(PolicyError::NotNewer { got: 2, active: 2 })),
                "{b}: {:?}",
                check(b)
            );
        }
    }

    /// A redirect may stay on plain http to loopback when it came from there, and go from https
    /// to https; from https it never goes down to http, not even to loopback.
    #[test]
    fn a_redirect_keeps_http_on_loopback_and_https_from_https() {
        assert_eq!(
            redirect_target("http://127.0.0.1:8080/p.json", "/q.json"),
            Ok("http://127.0.0.1:8080/q.json".to_string())
        );
        assert_eq!(
            redirect_target("https://p.example/p.json", "https://q.example/q.json"),
            Ok("https://q.example/q.json".to_string())
        );
        assert_eq!(
            redirect_target("https://p.example/p.json", "http://127.0.0.1:8080/q.json"),
            Err(
                "redirect to \"http://127.0.0.1:8080/q.json\" refused: from https down to plain http"
                    .to_string()
            )
        );
    }

    /// `NotDue` says how long until the next fetch: the period less the time since the last
    /// attempt.
    #[test]
    fn not_due_says_how_long_until_the_next_fetch() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = NOW_S * 1000;
        let cache = Cache::new(dir.path());
        cache
            .save_meta(&Meta {
                last_attempt_ms: t0,
                ..Meta::default()
            })
            .unwrap();
        let r = Refresher::with_cached(cache, None, false);
        let active = active_with("https://p.example/p.json", 1);
        assert_eq!(
            r.not_due(&active, t0 + 11 * H + 5 * 60_000),
            Some(Outcome::NotDue {
                due_in_ms: 55 * 60_000
            })
        );
        assert_eq!(r.not_due(&active, t0 + 12 * H), None);
    }

    /// [`MAX_REDIRECTS`] redirects are followed; one more is refused, naming where it led.
    #[test]
    fn two_redirects_are_followed_and_a_third_is_refused() {
        let to = |path: &str| (302, vec![("Location", path.to_string())], String::new());
        let vk = signing_key().verifying_key();
        let dir = tempfile::tempdir().unwrap();
        let srv = serve(|url| vec![to("/a"), to("/b"), signed(body(url, 2, 4), vec![])]);
        let mut r = Refresher::new(Cache::new(dir.path()), Some(vk));
        let out = r.refresh(&active_with(&srv.url, 1), NOW_S * 1000).unwrap();
        assert!(matches!(out, Outcome::Activated(_)), "{out:?}");
        let heads: Vec<String> = (0..3).map(|_| srv.next_request()).collect();
        assert!(heads[2].starts_with("GET /b HTTP/1.1\r\n"), "{}", heads[2]);

        let dir = tempfile::tempdir().unwrap();
        let srv = serve(|_| vec![to("/a"), to("/b"), to("/c")]);
        let mut r = Refresher::new(Cache::new(dir.path()), Some(vk));
        let mut active = active_with(&srv.url, 1);
        active.remote.timeout_ms = 2_000;
        let e = r.refresh(&active, NOW_S * 1000).unwrap_err().to_string();
        assert!(
            e.contains("more than 2 redirects (the last to \"/c\")"),
            "{e}"
        );
    }

    /// A body of exactly `remote.max_bytes` is fetched; a longer one is refused by its
    /// `Content-Length`, with that length, before it is read.
    #[test]
    fn a_fetched_body_of_exactly_max_bytes_passes_and_a_longer_one_is_refused_by_its_length() {
        let vk = signing_key().verifying_key();
        let dir = tempfile::tempdir().unwrap();
        let srv = serve(|url| {
            vec![
                signed(body(url, 2, 4), vec![]),
                signed(body(url, 2, 4), vec![]),
            ]
        });
        let n = body(&srv.url, 2, 4).len() as u64;
        let mut r = Refresher::new(Cache::new(dir.path()), Some(vk));
        let mut active = active_with(&srv.url, 1);
        active.remote.max_bytes = n;
        let out = r.refresh(&active, NOW_S * 1000).unwrap();
        assert!(matches!(out, Outcome::Activated(_)), "{out:?}");
        active.remote.max_bytes = n - 10;
        match r.refresh(&active, NOW_S * 1000 + 12 * H) {
            Err(PolicyError::TooBig { size, max }) => {
                assert_eq!((size as u64, max as u64), (n, n - 10))
            }
            other => panic!("{other:?}"),
        }
    }

    /// A body sent without a length is read up to `remote.max_bytes` and one byte more: a
    /// longer one is refused as that one byte over the limit.
    #[test]
    fn a_body_without_a_length_is_refused_as_one_byte_over_the_limit() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/policy.json", l.local_addr().unwrap());
        let answer = format!(
            "HTTP/1.1 200 X\r\nConnection: close\r\n\r\n{}",
            "x".repeat(300)
        );
        let answer = &*Box::leak(answer.into_bytes().into_boxed_slice());
        let _seen = crate::net::loopback::tests::serve_each(l, vec![answer], 0);
        let dir = tempfile::tempdir().unwrap();
        let mut r = Refresher::new(Cache::new(dir.path()), Some(signing_key().verifying_key()));
        let mut active = active_with(&url, 1);
        active.remote.max_bytes = 256;
        match r.refresh(&active, NOW_S * 1000) {
            Err(PolicyError::TooBig { size, max }) => assert_eq!((size, max), (257, 256)),
            other => panic!("{other:?}"),
        }
    }

    /// Cache a dated body, signed with the test key.
    fn save_dated(c: &Cache, version: u64, issued: u64, expires: u64) {
        let b = dated(version, issued, expires);
        let meta = Meta {
            signature: Some(sign(&b)),
            ..Meta::default()
        };
        c.save(b.as_bytes(), &meta).unwrap();
    }

    /// Against the device's clock: a body of a lower version does not replace a higher one
    /// that is still valid, but does replace one that has expired (its expiry this very second
    /// included); the same version signed again replaces itself.
    #[test]
    fn a_lower_version_replaces_a_cached_higher_one_only_once_that_expired() {
        let vk = signing_key().verifying_key();
        let now_s = super::super::cache::now_ms() / 1000;
        let cached = |c: &Cache| {
            let p = c.load(Some(&vk), now_s).unwrap().unwrap().policy;
            (p.version, p.expires_at_s.unwrap() - now_s)
        };
        let cases = [
            // (on disk: version, expiry from now), kept?
            ((4, DAY_S as i64), true),
            ((5, 0), false),
            ((5, -(DAY_S as i64)), false),
        ];
        for ((version, expires_in), kept) in cases {
            let dir = tempfile::tempdir().unwrap();
            let c = Cache::new(dir.path());
            let expires = now_s.checked_add_signed(expires_in).unwrap();
            save_dated(&c, version, expires - 2 * DAY_S, expires);
            save_dated(&c, 3, now_s - 60, now_s + 2 * DAY_S);
            let (v, _) = cached(&c);
            let want = if kept { version } else { 3 };
            assert_eq!(v, want, "v{version} expiring at now + {expires_in} s");
        }
        let dir = tempfile::tempdir().unwrap();
        let c = Cache::new(dir.path());
        save_dated(&c, 3, now_s - 120, now_s + DAY_S);
        save_dated(&c, 3, now_s - 60, now_s + 2 * DAY_S);
        assert_eq!(cached(&c), (3, 2 * DAY_S));
    }

    /// No cache file is no policy; a cache file that cannot be read is an error, not an empty
    /// cache.
    #[test]
    fn a_missing_cache_is_none_and_an_unreadable_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let c = Cache::new(dir.path());
        assert!(matches!(c.load(None, NOW_S), Ok(None)));
        std::fs::create_dir(dir.path().join(CACHE_FILE)).unwrap();
        match c.load(None, NOW_S) {
            Err(PolicyError::Io { path, .. }) => {
                assert_eq!(path, dir.path().join(CACHE_FILE).display().to_string())
            }
            other => panic!("{other:?}"),
        }
    }

    /// The two files of an earlier version's cache are removed when the cache is loaded.
    #[test]
    fn the_cache_of_an_earlier_version_is_removed_on_load() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["policy.json", "policy.meta.json"] {
            std::fs::write(dir.path().join(name), "{}").unwrap();
        }
        assert!(matches!(Cache::new(dir.path()).load(None, NOW_S), Ok(None)));
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, Vec::<std::ffi::OsString>::new());
    }
}
