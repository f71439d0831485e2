//! `spool.json`, the spool-wide state, and the seal (a SHA-256 of the body) that both
//! `spool.json` and `incident.json` carry.

use super::*;

/// Serialize `body` with a SHA-256 of its canonical bytes.
pub(super) fn seal<T: Serialize>(body: &T) -> Vec<u8> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let sha = hex::encode(Sha256::digest(&bytes));
    // Build the envelope by hand so the body bytes are exactly the hashed ones.
    let mut out = Vec::with_capacity(bytes.len() + 96);
    out.extend_from_slice(b"{\"body\":");
    out.extend_from_slice(&bytes);
    out.extend_from_slice(b",\"sha256\":\"");
    out.extend_from_slice(sha.as_bytes());
    out.extend_from_slice(b"\"}");
    out
}

/// Parse a sealed file, its body read by `read` ([`super::read`]); any flipped bit or torn write
/// is an error naming the field and its byte offset (or the line and column of a syntax error).
pub(super) fn unseal<T: Serialize>(
    bytes: &[u8],
    read: impl Fn(super::read::At<'_>) -> std::result::Result<T, super::read::Bad>,
) -> std::result::Result<T, String> {
    let (body, sealed) = super::read::envelope(bytes, read)?;
    let again = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
    let sha = hex::encode(Sha256::digest(&again));
    if sha != sealed {
        return Err(format!(
            "SHA-256 of the body is {sha}, the file says {sealed} (bit flip or torn write)"
        ));
    }
    Ok(body)
}

/// spool.json as last read or written: the state, whether it is newer than the disk, and the
/// bytes it was read from or written as (equal bytes on disk need no parsing).
#[derive(Debug)]
pub(super) struct CachedState {
    state: SpoolState,
    dirty: bool,
    raw: Vec<u8>,
}

impl Spool {
    /// The spool-wide state (from memory, or spool.json, or defaults if that is corrupt).
    pub fn state(&self) -> SpoolState {
        let mut g = match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        self.load_state(&mut g)
    }

    /// The current state: the in-memory copy if it is newer than the disk, else spool.json
    /// (re-read each time: another process sharing the data dir may have changed it).
    pub(super) fn load_state(&self, cache: &mut Option<CachedState>) -> SpoolState {
        if let Some(c) = cache.as_ref().filter(|c| c.dirty) {
            return c.state.clone();
        }
        let p = self.root.join("spool.json");
        let (s, raw) = match self.fs.read(&p) {
            Ok(b) if cache.as_ref().is_some_and(|c| c.raw == b) => {
                return cache.as_ref().map(|c| c.state.clone()).unwrap_or_default();
            }
            Ok(b) => match unseal(&b, super::read::spool_state) {
                Ok(s) => (s, b),
                Err(what) => {
                    tracing::warn!("spool: {}: {what}; starting from empty state", p.display());
                    let mut s = SpoolState::default();
                    s.pending.add_loss(Loss {
                        what: format!("spool.json corrupt: {what}"),
                        path: "spool.json".into(),
                        bytes: b.len() as u64,
                        at_ms: self.clock.now_ms(),
                    });
                    s.losses_total += 1;
                    // Newer than the disk: counted once, written with the next change.
                    *cache = Some(CachedState {
                        state: s.clone(),
                        dirty: true,
                        raw: Vec::new(),
                    });
                    return s;
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => (SpoolState::default(), Vec::new()),
            Err(e) => {
                tracing::warn!("spool: {}: {e}; using the last known state", p.display());
                return cache.as_ref().map(|c| c.state.clone()).unwrap_or_default();
            }
        };
        *cache = Some(CachedState {
            state: s.clone(),
            dirty: false,
            raw,
        });
        s
    }

    /// Change the spool-wide state and persist it (the in-memory copy changes even if the
    /// write fails; the write is retried with the next change).
    pub fn update_state(&self, f: impl FnOnce(&mut SpoolState)) -> Result<()> {
        let mut g = match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let mut s = self.load_state(&mut g);
        f(&mut s);
        let bytes = seal(&s);
        let p = self.root.join("spool.json");
        let r = fs::write_atomic(&*self.fs, &p, &bytes).map_err(io_err(&p, "write"));
        *g = Some(CachedState {
            state: s,
            dirty: r.is_err(),
            raw: if r.is_ok() { bytes } else { Vec::new() },
        });
        r
    }

    pub(super) fn record_loss(&self, l: Loss) {
        tracing::warn!("spool: loss: {} ({}, {} bytes)", l.what, l.path, l.bytes);
        if let Err(e) = self.update_state(|s| {
            s.pending.add_loss(l);
            s.losses_total += 1;
        }) {
            tracing::warn!("spool: could not persist the loss count: {e}");
        }
    }
}
