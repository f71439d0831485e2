//! The last-good policy on disk and its refresh from a remote URL.
//!
//! Invariants:
//! - A body becomes active only after it passed, in order: the size bound, the ed25519 signature
//!   (required whenever a public key was given at start), [`Policy::parse`], and the version check
//!   (strictly newer than the active one; the same version is accepted only with the same body).
//!   Any failure leaves the active policy and the cache untouched and is returned as an error for
//!   the caller to log.
//! - The cache (`policy.json` + `policy.meta.json` in the data dir) only ever holds a body that
//!   passed those checks, written atomically (tmp, fsync, rename). On load it is checked again.
//! - At most one fetch per `remote.min_refresh_hours`, failed or not; the time of the last attempt
//!   is persisted so restarts do not bypass it. A last attempt later than now (the clock was set
//!   back) makes a fetch due at once, rather than when the clock catches up.
//! - `If-None-Match` carries the ETag of the cached body, and only while that body passes its
//!   checks on load: a 304 must never keep out a policy the agent does not hold.
//! - The signature travels in the `X-Oomguard-Signature` response header: base64 of the 64-byte
//!   ed25519 signature over the exact body bytes.
#![forbid(unsafe_code)]

use super::{Parsed, Policy, PolicyError};
use base64::Engine as _;
use ed25519_dalek::{Signature, VerifyingKey};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Response header that carries the signature.
pub const SIGNATURE_HEADER: &str = "X-Oomguard-Signature";

/// What is remembered about the cached policy and the last fetch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// ETag of the cached body, sent back as `If-None-Match`.
    pub etag: Option<String>,
    /// Wall-clock ms of the last fetch attempt (successful or not).
    pub last_attempt_ms: u64,
    /// The signature of the cached body, base64, when it came signed.
    pub signature: Option<String>,
}

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

/// Check `sig_b64` over `body` when a key is given; without a key anything passes.
pub fn verify(
    body: &[u8],
    sig_b64: Option<&str>,
    key: Option<&VerifyingKey>,
) -> Result<(), PolicyError> {
    let Some(key) = key else { return Ok(()) };
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

/// Validate a candidate body against the active policy. `Ok(None)` means it is the active policy
/// again (same version, same content): nothing to do.
pub fn accept(
    body: &[u8],
    sig_b64: Option<&str>,
    key: Option<&VerifyingKey>,
    active: &Policy,
    max_bytes: u64,
) -> Result<Option<Parsed>, PolicyError> {
    if body.len() as u64 > max_bytes {
        return Err(PolicyError::TooBig {
            size: body.len(),
            max: max_bytes as usize,
        });
    }
    verify(body, sig_b64, key)?;
    let parsed = Policy::parse(body)?;
    let v = parsed.policy.version;
    if v < active.version || (v == active.version && parsed.policy != *active) {
        return Err(PolicyError::NotNewer {
            got: v,
            active: active.version,
        });
    }
    if v == active.version {
        return Ok(None);
    }
    Ok(Some(parsed))
}

/// Write `bytes` to `path` atomically: a temporary file beside it, fsync, rename, fsync the dir.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// The last-good cache in a directory.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Cache { dir: dir.into() }
    }

    fn body_path(&self) -> PathBuf {
        self.dir.join("policy.json")
    }

    fn meta_path(&self) -> PathBuf {
        self.dir.join("policy.meta.json")
    }

    fn io(path: &Path, e: impl std::fmt::Display) -> PolicyError {
        PolicyError::Io {
            path: path.display().to_string(),
            what: e.to_string(),
        }
    }

    /// The remembered fetch state; a missing or unreadable file reads as empty.
    pub fn meta(&self) -> Meta {
        std::fs::read(self.meta_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    pub fn save_meta(&self, meta: &Meta) -> Result<(), PolicyError> {
        let p = self.meta_path();
        let bytes = serde_json::to_vec(meta).map_err(|e| Self::io(&p, e))?;
        write_atomic(&p, &bytes).map_err(|e| Self::io(&p, e))
    }

    /// The cached policy, checked again (signature when a key is given, then validation).
    /// `Ok(None)` when there is none.
    pub fn load(&self, key: Option<&VerifyingKey>) -> Result<Option<Parsed>, PolicyError> {
        let p = self.body_path();
        let body = match std::fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Self::io(&p, e)),
        };
        let meta = self.meta();
        verify(&body, meta.signature.as_deref(), key)?;
        Policy::parse(&body).map(Some)
    }

    /// Store a body that passed [`accept`].
    pub fn save(&self, body: &[u8], meta: &Meta) -> Result<(), PolicyError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Self::io(&self.dir, e))?;
        let p = self.body_path();
        write_atomic(&p, body).map_err(|e| Self::io(&p, e))?;
        self.save_meta(meta)
    }
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
        let cached = matches!(cache.load(key.as_ref()), Ok(Some(_)));
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

    /// Fetch the policy at `active.remote.url` if due. Blocks for at most
    /// `active.remote.timeout_ms` (per connect/read).
    pub fn refresh(&mut self, active: &Policy, now_ms: u64) -> Result<Outcome, PolicyError> {
        let Some(url) = active.remote.url.clone() else {
            return Ok(Outcome::Disabled);
        };
        let period = active.remote.min_refresh_hours * 3600 * 1000;
        let last = self.meta.last_attempt_ms;
        // A last attempt in the future (the clock was set back since) does not count.
        if last != 0 && last <= now_ms && now_ms - last < period {
            return Ok(Outcome::NotDue {
                due_in_ms: period - (now_ms - last),
            });
        }
        self.meta.last_attempt_ms = now_ms;
        // Persist the attempt first: a crash or failure must not cause a fetch storm.
        self.cache.save_meta(&self.meta)?;
        let fetch_err = |what: String| PolicyError::Fetch {
            url: url.clone(),
            what,
        };
        let limit = Duration::from_millis(active.remote.timeout_ms);
        let agent = ureq::AgentBuilder::new()
            .timeout(limit)
            // ureq's timeout does not cover DNS: without this, a lookup that hangs holds the
            // agent's thread (and its sampling) until the system's resolver gives up.
            .resolver(move |netloc: &str| crate::upload::tus::resolve_within(netloc, limit))
            .redirects(2)
            .build();
        let mut req = agent.get(&url);
        if let Some(etag) = &self.meta.etag {
            req = req.set("If-None-Match", etag);
        }
        let resp = match req.call() {
            Ok(r) => r,
            Err(ureq::Error::Status(code, _)) => {
                return Err(fetch_err(format!("HTTP status {code}")))
            }
            Err(e) => return Err(fetch_err(e.to_string())),
        };
        if resp.status() == 304 {
            return Ok(Outcome::NotModified);
        }
        if resp.status() != 200 {
            return Err(fetch_err(format!("HTTP status {}", resp.status())));
        }
        let max = active.remote.max_bytes;
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
        let etag = resp.header("ETag").map(str::to_string);
        let sig = resp.header(SIGNATURE_HEADER).map(str::to_string);
        let mut body = Vec::new();
        resp.into_reader()
            .take(max + 1)
            .read_to_end(&mut body)
            .map_err(|e| fetch_err(format!("reading the body: {e}")))?;
        match accept(&body, sig.as_deref(), self.key.as_ref(), active, max)? {
            None => {
                self.meta.etag = etag;
                self.meta.signature = sig;
                self.cache.save(&body, &self.meta)?;
                Ok(Outcome::Unchanged)
            }
            Some(parsed) => {
                self.meta.etag = etag;
                self.meta.signature = sig;
                self.cache.save(&body, &self.meta)?;
                Ok(Outcome::Activated(Box::new(parsed)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    type Response = (u16, Vec<(&'static str, String)>, String);

    fn signing_key() -> SigningKey {
        SigningKey::from_bytes(&[7u8; 32])
    }

    fn sign(body: &str) -> String {
        base64::engine::general_purpose::STANDARD
            .encode(signing_key().sign(body.as_bytes()).to_bytes())
    }

    /// A tiny HTTP/1.1 server on 127.0.0.1 answering each request with the next scripted response
    /// (the script may name the server's own URL); it records the request heads it saw.
    struct Server {
        url: String,
        seen: Arc<Mutex<Vec<String>>>,
    }

    fn serve(script: impl FnOnce(&str) -> Vec<Response>) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/policy.json", l.local_addr().unwrap());
        let responses = script(&url);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        std::thread::spawn(move || {
            for (status, headers, body) in responses {
                let Ok((mut s, _)) = l.accept() else { return };
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut req = String::new();
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    req.push_str(&line);
                }
                seen2.lock().unwrap().push(req);
                let mut out = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                    body.len()
                );
                for (k, v) in headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                out.push_str(&body);
                let _ = s.write_all(out.as_bytes());
            }
        });
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

    fn body(url: &str, version: u64, strikes: u32) -> String {
        format!(
            r#"{{"version":{version},"heap":{{"strikes":{strikes}}},"remote":{{"url":"{url}"}}}}"#
        )
    }

    const H: u64 = 3600 * 1000;

    #[test]
    fn etag_not_modified_min_interval_and_cache() {
        let dir = tempfile::tempdir().unwrap();
        let srv = serve(|url| {
            vec![
                (200, vec![("ETag", "\"v2\"".into())], body(url, 2, 4)),
                (304, vec![], String::new()),
            ]
        });
        let mut r = Refresher::new(Cache::new(dir.path()), None);
        let active = active_with(&srv.url, 1);
        let t0 = 1_000 * H;
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
        let seen = srv.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2);
        assert!(!seen[0].to_lowercase().contains("if-none-match"));
        assert!(
            seen[1].to_lowercase().contains("if-none-match: \"v2\""),
            "{}",
            seen[1]
        );
        // The cache holds the new policy, and a restart honours the interval.
        let cached = Cache::new(dir.path()).load(None).unwrap().unwrap();
        assert_eq!(cached.policy, p.policy);
        let mut r2 = Refresher::new(Cache::new(dir.path()), None);
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
        let mut t = 1_000 * H;
        let mut errors = Vec::new();
        for _ in 0..7 {
            errors.push(r.refresh(&active, t).unwrap_err().to_string());
            t += 12 * H;
            assert!(
                Cache::new(dir.path()).load(Some(&vk)).unwrap().is_none(),
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
                .load(Some(&vk))
                .unwrap()
                .unwrap()
                .policy,
            p.policy
        );
        // Tampering with the cache on disk is caught on load.
        std::fs::write(dir.path().join("policy.json"), body(&srv.url, 3, 9)).unwrap();
        assert!(Cache::new(dir.path()).load(Some(&vk)).is_err());
    }

    /// The cached body is rejected on load (here: tampered on disk; as well: unsigned once a
    /// key is given), so the built-in policy is active; its ETag must not be sent, or the
    /// server's 304 would keep its policy out for as long as it does not change.
    #[test]
    fn the_etag_of_a_rejected_cached_body_is_not_sent() {
        let dir = tempfile::tempdir().unwrap();
        let srv = serve(|url| vec![(200, vec![("ETag", "\"v2\"".into())], body(url, 2, 4))]);
        let cache = Cache::new(dir.path());
        let meta = Meta {
            etag: Some("\"v2\"".into()),
            ..Meta::default()
        };
        cache.save(body(&srv.url, 2, 4).as_bytes(), &meta).unwrap();
        std::fs::write(dir.path().join("policy.json"), b"{\"version\":2,").unwrap();
        assert!(cache.load(None).is_err());
        let mut r = Refresher::new(Cache::new(dir.path()), None);
        let active = active_with(&srv.url, 1);
        let Outcome::Activated(p) = r.refresh(&active, 1_000 * H).unwrap() else {
            panic!("not activated")
        };
        assert_eq!(p.policy.version, 2);
        let seen = srv.seen.lock().unwrap().clone();
        assert!(
            !seen[0].to_lowercase().contains("if-none-match"),
            "{}",
            seen[0]
        );
        // Cached again, with its ETag.
        assert_eq!(
            Cache::new(dir.path()).load(None).unwrap().unwrap().policy,
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
        let srv = serve(|url| vec![(200, vec![], body(url, 2, 4))]);
        let now = 1_000 * H;
        Cache::new(dir.path())
            .save_meta(&Meta {
                last_attempt_ms: now + 400 * 24 * H,
                ..Meta::default()
            })
            .unwrap();
        let mut r = Refresher::new(Cache::new(dir.path()), None);
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

    #[test]
    fn same_version_same_body_is_unchanged() {
        let a = Policy::default();
        assert!(accept(a.to_json().as_bytes(), None, None, &a, 65_536)
            .unwrap()
            .is_none());
        let mut other = a.clone();
        other.heap.strikes = 9;
        assert!(matches!(
            accept(other.to_json().as_bytes(), None, None, &a, 65_536),
            Err(PolicyError::NotNewer { got: 1, active: 1 })
        ));
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
}
