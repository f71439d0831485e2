//! Reading `incident.json` and `spool.json` back: the JSON parsed once into a
//! [`serde_json::Value`] (its syntax errors name their line and column), then each type read
//! from it by hand, as strictly as `#[derive(Deserialize)]` with `deny_unknown_fields` read it:
//! every field of the right JSON type, unknown fields refused, `Option` fields null or left
//! out, the fields added later (`written`, `dumpError`, `watch`, `firstSeen`) defaulted when left
//! out. An error names the field's path and, where it finds it, its byte offset in the file.
//!
//! Why by hand: the derived readers were one instantiation of serde_json's parser per type, 38 K
//! of the shipped `.so` (issue 41); the `Value` parser is in the library anyway. Writing still
//! goes through the derived `Serialize` (the seal hashes those bytes).

use super::*;
use crate::policy::parse::kind;
use serde_json::Map;

/// Why a value could not be read: the path of the field, and what is wrong with it.
pub(super) struct Bad {
    path: String,
    what: String,
}

type R<T> = std::result::Result<T, Bad>;

/// A value at a path of the document.
#[derive(Clone, Copy)]
pub(super) struct At<'a> {
    v: &'a Value,
    path: &'a str,
}

impl<'a> At<'a> {
    fn bad<T>(&self, want: &str) -> R<T> {
        Err(Bad {
            path: self.path.to_string(),
            what: format!("expected {want}, found {}", kind(self.v)),
        })
    }

    fn u64(self) -> R<u64> {
        self.v
            .as_u64()
            .map_or_else(|| self.bad("an unsigned integer"), Ok)
    }

    fn u32(self) -> R<u32> {
        match self.v.as_u64().map(u32::try_from) {
            Some(Ok(n)) => Ok(n),
            _ => self.bad("an unsigned 32-bit integer"),
        }
    }

    fn bool(self) -> R<bool> {
        self.v.as_bool().map_or_else(|| self.bad("a boolean"), Ok)
    }

    fn string(self) -> R<String> {
        match self.v {
            Value::String(s) => Ok(s.clone()),
            _ => self.bad("a string"),
        }
    }

    fn value(self) -> R<Value> {
        Ok(self.v.clone())
    }

    /// `null` as `None`, else `read`.
    fn opt<T>(self, read: impl Fn(At<'_>) -> R<T>) -> R<Option<T>> {
        match self.v {
            Value::Null => Ok(None),
            _ => read(self).map(Some),
        }
    }

    fn vec<T>(self, read: impl Fn(At<'_>) -> R<T>) -> R<Vec<T>> {
        let Value::Array(items) = self.v else {
            return self.bad("an array");
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                read(At {
                    v,
                    path: &format!("{}[{i}]", self.path),
                })
            })
            .collect()
    }

    /// One of `all`, by the name its `Serialize` writes.
    fn named<T: Serialize + Copy>(self, all: &[T], what: &str) -> R<T> {
        let Value::String(s) = self.v else {
            return self.bad(what);
        };
        all.iter()
            .copied()
            .find(|k| {
                serde_json::to_value(k)
                    .ok()
                    .as_ref()
                    .and_then(Value::as_str)
                    == Some(s)
            })
            .map_or_else(
                || {
                    Err(Bad {
                        path: self.path.to_string(),
                        what: format!("unknown {what} {s:?}"),
                    })
                },
                Ok,
            )
    }

    fn object(self) -> R<Obj<'a>> {
        match self.v {
            Value::Object(map) => Ok(Obj {
                map,
                path: self.path,
                used: Vec::new(),
            }),
            _ => self.bad("an object"),
        }
    }
}

/// An object being read: its fields are taken by name, and [`Obj::done`] refuses any left.
pub(super) struct Obj<'a> {
    map: &'a Map<String, Value>,
    path: &'a str,
    used: Vec<&'static str>,
}

impl Obj<'_> {
    fn path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The field `key`, read by `read`; a missing field is an error.
    fn req<T>(&mut self, key: &'static str, read: impl Fn(At<'_>) -> R<T>) -> R<T> {
        self.used.push(key);
        let path = self.path(key);
        match self.map.get(key) {
            Some(v) => read(At { v, path: &path }),
            None => Err(Bad {
                path,
                what: "missing".into(),
            }),
        }
    }

    /// The field `key`, read by `read`; missing or null: `None`.
    fn opt<T>(&mut self, key: &'static str, read: impl Fn(At<'_>) -> R<T>) -> R<Option<T>> {
        self.used.push(key);
        let path = self.path(key);
        match self.map.get(key) {
            Some(v) => At { v, path: &path }.opt(read),
            None => Ok(None),
        }
    }

    /// The field `key`, read by `read`; missing: `T::default()`.
    fn or_default<T: Default>(&mut self, key: &'static str, read: impl Fn(At<'_>) -> R<T>) -> R<T> {
        self.used.push(key);
        let path = self.path(key);
        match self.map.get(key) {
            Some(v) => read(At { v, path: &path }),
            None => Ok(T::default()),
        }
    }

    /// No field is left unread.
    fn done(self) -> R<()> {
        match self.map.keys().find(|k| !self.used.contains(&k.as_str())) {
            Some(k) => Err(Bad {
                path: self.path(k),
                what: "is not a known field".into(),
            }),
            None => Ok(()),
        }
    }
}

/// The sealed file's body (the [`state::seal`] envelope's `body`), read as `T`, and the
/// SHA-256 it names; an error names the field and its byte offset in `bytes`.
pub(super) fn envelope<T>(
    bytes: &[u8],
    read: impl Fn(At<'_>) -> R<T>,
) -> std::result::Result<(T, String), String> {
    let v: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not valid sealed JSON: {e}"))?;
    let read_all = || {
        let mut o = At { v: &v, path: "" }.object()?;
        let body = o.req("body", &read)?;
        let sha = o.req("sha256", text)?;
        o.done()?;
        Ok((body, sha))
    };
    read_all().map_err(|b: Bad| {
        let at = match crate::policy::locate::value_offset(bytes, &b.path) {
            Some(o) => format!(" (byte {o})"),
            None => String::new(),
        };
        let path = if b.path.is_empty() {
            "the file"
        } else {
            &b.path
        };
        format!("not valid sealed JSON: {path}: {}{at}", b.what)
    })
}

fn num(a: At<'_>) -> R<u64> {
    a.u64()
}

fn num32(a: At<'_>) -> R<u32> {
    a.u32()
}

fn flag(a: At<'_>) -> R<bool> {
    a.bool()
}

fn text(a: At<'_>) -> R<String> {
    a.string()
}

fn any(a: At<'_>) -> R<Value> {
    a.value()
}

fn accounting(a: At<'_>) -> R<Accounting> {
    let mut o = a.object()?;
    let r = Accounting {
        evictions: o.req("evictions", num)?,
        evicted_bytes: o.req("evictedBytes", num)?,
        losses: o.req("losses", num)?,
        eviction_records: o.req("evictionRecords", |a| a.vec(eviction))?,
        loss_records: o.req("lossRecords", |a| a.vec(loss))?,
    };
    o.done()?;
    Ok(r)
}

fn eviction(a: At<'_>) -> R<Eviction> {
    let mut o = a.object()?;
    let r = Eviction {
        id: o.req("id", text)?,
        quota: o.req("quota", text)?,
        bytes: o.req("bytes", num)?,
        created_ms: o.req("createdMs", num)?,
        at_ms: o.req("atMs", num)?,
    };
    o.done()?;
    Ok(r)
}

fn loss(a: At<'_>) -> R<Loss> {
    let mut o = a.object()?;
    let r = Loss {
        what: o.req("what", text)?,
        path: o.req("path", text)?,
        bytes: o.req("bytes", num)?,
        at_ms: o.req("atMs", num)?,
    };
    o.done()?;
    Ok(r)
}

fn file_kind(a: At<'_>) -> R<FileKind> {
    a.named(&FileKind::ALL, "file kind")
}

fn upload(a: At<'_>) -> R<Upload> {
    let mut o = a.object()?;
    let r = Upload {
        kind: o.req("kind", file_kind)?,
        size: o.req("size", num)?,
        sha256: o.req("sha256", text)?,
        url: o.opt("url", text)?,
        acked: o.req("acked", flag)?,
    };
    o.done()?;
    Ok(r)
}

/// `incident.json`'s body.
pub(super) fn incident(a: At<'_>) -> R<Incident> {
    let mut o = a.object()?;
    let states = [
        State::Dumped,
        State::Analysed,
        State::Uploading,
        State::Rejected,
    ];
    let r = Incident {
        version: o.req("version", num32)?,
        id: o.req("id", text)?,
        created_ms: o.req("createdMs", num)?,
        reason: o.req("reason", text)?,
        samples: o.req("samples", any)?,
        running_info: o.req("runningInfo", any)?,
        policy_version: o.req("policyVersion", text)?,
        state: o.req("state", |a| a.named(&states, "state"))?,
        analysis_attempts: o.req("analysisAttempts", num32)?,
        analysis_error: o.opt("analysisError", text)?,
        upload_attempts: o.req("uploadAttempts", num32)?,
        next_attempt_ms: o.req("nextAttemptMs", num)?,
        uploads: o.req("uploads", |a| a.vec(upload))?,
        rejected: o.opt("rejected", text)?,
        accounting: o.req("accounting", accounting)?,
        written: o.opt("written", |a| a.vec(file_kind))?,
        dump_error: o.opt("dumpError", text)?,
    };
    o.done()?;
    Ok(r)
}

/// `spool.json`'s body.
pub(super) fn spool_state(a: At<'_>) -> R<SpoolState> {
    let mut o = a.object()?;
    let r = SpoolState {
        retry_after_until_ms: o.req("retryAfterUntilMs", num)?,
        budget_day: o.req("budgetDay", num)?,
        bytes_sent_today: o.req("bytesSentToday", num)?,
        pending: o.req("pending", accounting)?,
        evictions_total: o.req("evictionsTotal", num)?,
        losses_total: o.req("lossesTotal", num)?,
        watch: o.opt("watch", |a| {
            let mut w = a.object()?;
            let r = Watch {
                wall_ms: w.req("wallMs", num)?,
                watched_ms: w.req("watchedMs", num)?,
            };
            w.done()?;
            Ok(r)
        })?,
        first_seen: o.or_default("firstSeen", |a| {
            let mut m = std::collections::BTreeMap::new();
            let obj = a.object()?;
            for (k, v) in obj.map {
                let path = obj.path(k);
                m.insert(k.clone(), At { v, path: &path }.u64()?);
            }
            Ok(m)
        })?,
    };
    o.done()?;
    Ok(r)
}
