//! The last good remote policy on disk: one file, `policy.cache.json` in the data dir, holding
//! the exact signed body, its signature and ETag, and the time of the last fetch attempt.
//!
//! Invariants:
//! - The body and the signature that covers it are written together, in one file, by the one
//!   atomic write (`sys::fs::write_file_atomic`: a temporary file, fsync, rename, fsync of the
//!   directory): a kill at any moment leaves the old file or the new one, never a body beside
//!   another body's signature.
//! - Writers take an exclusive `flock` on `policy.cache.lock` and read the file again under it
//!   before writing: two processes of the app saving at once neither interleave their bytes
//!   nor undo each other (recording a fetch attempt keeps the body on disk; a body never
//!   replaces one of a higher version).
//! - Whatever is read is checked again before use ([`Cache::load`]): signature, validation and
//!   the rules of remote policies (dated, not expired, both URLs named).
//! - The two-file cache of earlier versions (`policy.json` + `policy.meta.json`) is removed,
//!   once, with a log line, and not migrated: its body carries no issue time or expiry, which a
//!   remote policy needs now, so it could never pass; the policy is fetched again instead.
#![forbid(unsafe_code)]

use super::remote::{check_remote, verify};
use super::{Parsed, Policy, PolicyError};
use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tracing::info;

/// The cache file, in the data dir.
pub const CACHE_FILE: &str = "policy.cache.json";
/// The lock the writers of [`CACHE_FILE`] take.
const LOCK_FILE: &str = "policy.cache.lock";
/// The files of the two-file cache of earlier versions.
const LEGACY_FILES: [&str; 2] = ["policy.json", "policy.meta.json"];

/// What is remembered about the cached policy and the last fetch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// ETag of the cached body, sent back as `If-None-Match`.
    pub etag: Option<String>,
    /// Wall-clock ms of the last fetch attempt (successful or not).
    #[serde(default)]
    pub last_attempt_ms: u64,
    /// The signature of the cached body, base64.
    pub signature: Option<String>,
}

/// The file's content: the body, [`Meta`]'s fields at the same level, the time it was saved.
/// [`Meta`]'s fields are written out here rather than `#[serde(flatten)]`ed: a flattened
/// field's reader buffers the whole object into serde's generic `Content` first, and that
/// machinery was several K of the shipped `.so` (issue 41). The JSON is the same.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    /// The exact body the signature covers (a policy is JSON, so UTF-8).
    #[serde(default)]
    body: Option<String>,
    /// [`Meta::etag`].
    #[serde(default)]
    etag: Option<String>,
    /// [`Meta::last_attempt_ms`].
    #[serde(default)]
    last_attempt_ms: u64,
    /// [`Meta::signature`].
    #[serde(default)]
    signature: Option<String>,
    /// Wall-clock ms when the body was saved.
    #[serde(default)]
    saved_at_ms: u64,
}

impl Stored {
    fn meta(&self) -> Meta {
        Meta {
            etag: self.etag.clone(),
            last_attempt_ms: self.last_attempt_ms,
            signature: self.signature.clone(),
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
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

    fn path(&self) -> PathBuf {
        self.dir.join(CACHE_FILE)
    }

    fn io(path: &Path, e: impl std::fmt::Display) -> PolicyError {
        PolicyError::Io {
            path: path.display().to_string(),
            what: e.to_string(),
        }
    }

    /// The file as it is; a missing or unreadable one reads as empty.
    fn read(&self) -> Stored {
        std::fs::read(self.path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Under the writers' lock: read the file, let `change` edit it, write it atomically.
    fn update(&self, change: impl FnOnce(&mut Stored)) -> Result<(), PolicyError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Self::io(&self.dir, e))?;
        let lock_path = self.dir.join(LOCK_FILE);
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Self::io(&lock_path, e))?;
        // Held only while one small file is written; the kernel drops it if its holder dies.
        let _lock = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| Self::io(&lock_path, e))?;
        let mut stored = self.read();
        change(&mut stored);
        let p = self.path();
        let bytes = serde_json::to_vec_pretty(&stored).map_err(|e| Self::io(&p, e))?;
        sys::fs::write_file_atomic(&p, &bytes).map_err(|e| Self::io(&p, e))
    }

    /// The remembered fetch state; a missing or unreadable file reads as empty.
    pub fn meta(&self) -> Meta {
        self.read().meta()
    }

    /// Record `meta.last_attempt_ms`; the body on disk keeps its own signature and ETag.
    pub fn save_meta(&self, meta: &Meta) -> Result<(), PolicyError> {
        let at = meta.last_attempt_ms;
        self.update(|s| s.last_attempt_ms = at)
    }

    /// The cached policy, checked again: signature (a key is required), validation, and the
    /// rules of remote policies at `now_s` (seconds since the epoch). `Ok(None)` when there is
    /// none. The cache of an earlier version is removed here, with a log line.
    pub fn load(
        &self,
        key: Option<&VerifyingKey>,
        now_s: u64,
    ) -> Result<Option<Parsed>, PolicyError> {
        self.drop_legacy();
        let p = self.path();
        let bytes = match std::fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Self::io(&p, e)),
        };
        let stored: Stored = serde_json::from_slice(&bytes)
            .map_err(|e| Self::io(&p, format!("not a policy cache: {e}")))?;
        let Some(body) = stored.body else {
            return Ok(None);
        };
        verify(body.as_bytes(), stored.signature.as_deref(), key)?;
        let parsed = Policy::parse(body.as_bytes())?;
        check_remote(&parsed, now_s)?;
        Ok(Some(parsed))
    }

    /// Store a body that passed [`accept`](super::remote::accept), with its signature and ETag,
    /// and `meta.last_attempt_ms`. A body of a higher version that another process saved
    /// meanwhile is kept.
    pub fn save(&self, body: &[u8], meta: &Meta) -> Result<(), PolicyError> {
        let p = self.path();
        let text = std::str::from_utf8(body)
            .map_err(|e| Self::io(&p, format!("the body is not UTF-8: {e}")))?
            .to_string();
        let now_s = now_ms() / 1000;
        let new = Policy::parse(body).ok().map(|p| p.policy.version);
        // The version of a body on disk that has not expired.
        let live = |b: &str| {
            Policy::parse(b.as_bytes())
                .ok()
                .filter(|p| p.policy.expires_at_s.is_some_and(|e| e > now_s))
                .map(|p| p.policy.version)
        };
        self.update(|s| {
            s.last_attempt_ms = meta.last_attempt_ms;
            if s.body.as_deref().and_then(live) > new {
                return;
            }
            s.body = Some(text);
            s.signature = meta.signature.clone();
            s.etag = meta.etag.clone();
            s.saved_at_ms = now_ms();
        })
    }

    /// Remove the two files of an earlier version's cache, saying so once.
    fn drop_legacy(&self) {
        let mut gone = Vec::new();
        for name in LEGACY_FILES {
            let p = self.dir.join(name);
            if std::fs::remove_file(&p).is_ok() {
                gone.push(name);
            }
        }
        if !gone.is_empty() {
            info!(
                "removed the policy cache of an earlier version ({}): its body carries no issue time or expiry, which a remote policy needs now; the policy is fetched again",
                gone.join(", ")
            );
        }
    }
}
