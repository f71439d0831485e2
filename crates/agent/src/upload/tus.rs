//! A tus 1.0 client over `ureq` (core protocol + creation): POST to create, HEAD for the offset,
//! PATCH with `application/offset+octet-stream`.
//!
//! Invariants: every request carries `Tus-Resumable: 1.0.0`; no URL that is not HTTPS (or plain
//! HTTP to a loopback address) is ever contacted; no redirect is followed (a 3xx is an error
//! like a 4xx); each response body is read (bounded) so that the connection can be reused;
//! nothing panics on a malformed answer. The URL rules and the bounded DNS lookup are
//! `policy::url`'s, shared with the policy's own fetch.

use crate::policy::url::{allowed_url, resolve, resolve_within};
use base64::Engine;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What went wrong talking to the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TusError {
    #[error("HTTP {status} from {url}: {body}")]
    Status {
        status: u16,
        url: String,
        /// `Retry-After`, in seconds, when the server sent one we could read.
        retry_after: Option<u64>,
        body: String,
    },
    #[error("{url}: network: {what}")]
    Network { url: String, what: String },
    #[error("{url}: protocol: {what}")]
    Protocol { url: String, what: String },
    #[error("{0}: refused: only https:// or http:// to a loopback address")]
    Insecure(String),
}

/// The answer to a HEAD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub offset: u64,
    pub length: Option<u64>,
    /// Hex SHA-256 of the stored bytes, when the server says it (`Upload-Sha256`, an oomguard
    /// collector extension).
    pub sha256: Option<String>,
}

/// The answer to a PATCH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patched {
    pub offset: u64,
    pub sha256: Option<String>,
}

/// Encode tus `Upload-Metadata`: `key base64(value)` pairs separated by commas.
pub fn encode_metadata(pairs: &[(&str, &str)]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    pairs
        .iter()
        .map(|(k, v)| format!("{k} {}", b64.encode(v.as_bytes())))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parse `Retry-After` seconds (an HTTP-date is not parsed: the caller's default applies).
fn retry_after(r: &ureq::Response) -> Option<u64> {
    let v = r.header("Retry-After")?.trim();
    if let Ok(secs) = v.parse() {
        return Some(secs);
    }
    // The other form RFC 9110 allows: an HTTP-date.
    let at = http_date(v)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    Some(at.saturating_sub(now))
}

/// Seconds since the epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the HTTP-date
/// form servers send; `None` for anything else.
pub(crate) fn http_date(s: &str) -> Option<u64> {
    let mut it = s.split_whitespace();
    let _weekday = it.next()?;
    let day: u64 = it.next()?.parse().ok()?;
    let month = match it.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = it.next()?.parse().ok()?;
    let mut hms = it.next()?.split(':').map(|x| x.parse::<u64>().ok());
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    if it.next()? != "GMT" || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    // Days from 1970-01-01 to the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days)
        .ok()
        .map(|d| d * 86_400 + h * 3600 + m * 60 + sec)
}

#[cfg(test)]
mod date_tests {
    use super::http_date;

    #[test]
    fn http_dates_parse_to_epoch_seconds() {
        assert_eq!(
            http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            http_date("Sun, 22 Nov 2026 02:30:00 GMT"),
            Some(1_795_314_600)
        );
        assert_eq!(
            http_date("Tue, 29 Feb 2028 12:00:00 GMT"),
            Some(1_835_438_400)
        );
        for bad in [
            "",
            "120",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 06 Nov 1994 08:49:37 PST",
        ] {
            assert_eq!(http_date(bad), None, "{bad}");
        }
    }
}

fn read_small(r: ureq::Response) -> String {
    let mut s = String::new();
    let _ = r.into_reader().take(4096).read_to_string(&mut s);
    s.chars().take(300).collect()
}

/// A tus client.
#[derive(Debug, Clone)]
pub struct Client {
    agent: ureq::Agent,
    endpoint: String,
    io_timeout: Duration,
    min_rate: u64,
    /// The server has answered a request as tus says (shared by clones).
    answered: Arc<AtomicBool>,
}

impl Client {
    /// A client; each request has a deadline of `io_timeout` plus its body at `min_rate`
    /// bytes per second (ureq 2 drops the read timeout of pooled connections, a deadline it
    /// keeps).
    pub fn new(
        endpoint: &str,
        connect_timeout: Duration,
        io_timeout: Duration,
        min_rate: u64,
    ) -> Client {
        let agent = ureq::AgentBuilder::new()
            .resolver(move |netloc: &str| resolve_within(netloc, connect_timeout))
            .timeout_connect(connect_timeout)
            .timeout_read(io_timeout)
            .timeout_write(io_timeout)
            .redirects(0)
            .user_agent(concat!("oomguard/", env!("CARGO_PKG_VERSION")))
            .build();
        Client {
            agent,
            endpoint: endpoint.to_string(),
            io_timeout,
            min_rate: min_rate.max(1),
            answered: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether this client's server has answered a request as tus says (a creation with its
    /// `Location`, a HEAD with an offset or "unknown", a PATCH with its new offset): whether
    /// the endpoint has shown it works.
    pub fn answered(&self) -> bool {
        self.answered.load(Ordering::Relaxed)
    }

    fn ok<T>(&self, v: T) -> Result<T, TusError> {
        self.answered.store(true, Ordering::Relaxed);
        Ok(v)
    }

    fn deadline(&self, body: u64) -> Duration {
        self.io_timeout + Duration::from_millis(body.saturating_mul(1000) / self.min_rate)
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn check(&self, url: &str) -> Result<(), TusError> {
        if allowed_url(url) {
            Ok(())
        } else {
            Err(TusError::Insecure(url.to_string()))
        }
    }

    fn map(url: &str, e: ureq::Error) -> TusError {
        match e {
            ureq::Error::Status(status, r) => TusError::Status {
                status,
                url: url.to_string(),
                retry_after: retry_after(&r),
                body: read_small(r),
            },
            ureq::Error::Transport(t) => TusError::Network {
                url: url.to_string(),
                what: t.to_string(),
            },
        }
    }

    /// A redirect is not followed (a tus request must not be replayed elsewhere unasked): it
    /// is an error naming where it pointed, like a 4xx.
    fn no_redirect(url: &str, r: ureq::Response) -> Result<ureq::Response, TusError> {
        if !(300..400).contains(&r.status()) {
            return Ok(r);
        }
        let status = r.status();
        let to = r.header("Location").unwrap_or("").to_string();
        let _ = read_small(r);
        Err(TusError::Status {
            status,
            url: url.to_string(),
            retry_after: None,
            body: format!("redirect to {to:?}, not followed"),
        })
    }

    /// Create an upload of `length` bytes; returns its absolute URL.
    pub fn create(&self, length: u64, metadata: &[(&str, &str)]) -> Result<String, TusError> {
        let url = &self.endpoint;
        self.check(url)?;
        let r = self
            .agent
            .post(url)
            .timeout(self.deadline(0))
            .set("Tus-Resumable", "1.0.0")
            .set("Upload-Length", &length.to_string())
            .set("Upload-Metadata", &encode_metadata(metadata))
            .set("Content-Length", "0")
            .call()
            .map_err(|e| Self::map(url, e))?;
        let r = Self::no_redirect(url, r)?;
        if r.status() != 201 && r.status() != 200 {
            return Err(TusError::Protocol {
                url: url.clone(),
                what: format!("creation answered {} instead of 201", r.status()),
            });
        }
        let loc = r.header("Location").map(str::to_string);
        let _ = read_small(r);
        let loc = loc.ok_or_else(|| TusError::Protocol {
            url: url.clone(),
            what: "creation answer without Location".into(),
        })?;
        let abs = resolve(url, loc.trim());
        self.check(&abs)?;
        self.ok(abs)
    }

    /// The server's offset for an upload; `None` if the server no longer knows it (404, 410,
    /// or 403, which the tus spec also allows for an upload that is not found).
    pub fn head(&self, url: &str) -> Result<Option<Head>, TusError> {
        self.check(url)?;
        let r = match self
            .agent
            .head(url)
            .timeout(self.deadline(0))
            .set("Tus-Resumable", "1.0.0")
            .call()
        {
            Ok(r) => Self::no_redirect(url, r)?,
            Err(ureq::Error::Status(403 | 404 | 410, _)) => return self.ok(None),
            Err(e) => return Err(Self::map(url, e)),
        };
        let offset = r
            .header("Upload-Offset")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| TusError::Protocol {
                url: url.to_string(),
                what: "HEAD answer without a valid Upload-Offset".into(),
            })?;
        let length = r
            .header("Upload-Length")
            .and_then(|v| v.trim().parse::<u64>().ok());
        let sha256 = r.header("Upload-Sha256").map(|s| s.trim().to_string());
        let _ = read_small(r);
        self.ok(Some(Head {
            offset,
            length,
            sha256,
        }))
    }

    /// Send `len` bytes from `body` at `offset`.
    pub fn patch(
        &self,
        url: &str,
        offset: u64,
        body: &mut dyn Read,
        len: u64,
    ) -> Result<Patched, TusError> {
        self.check(url)?;
        let r = self
            .agent
            .request("PATCH", url)
            .timeout(self.deadline(len))
            .set("Tus-Resumable", "1.0.0")
            .set("Upload-Offset", &offset.to_string())
            .set("Content-Type", "application/offset+octet-stream")
            .set("Content-Length", &len.to_string())
            .send(body.take(len))
            .map_err(|e| Self::map(url, e))?;
        let r = Self::no_redirect(url, r)?;
        let new = r
            .header("Upload-Offset")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| TusError::Protocol {
                url: url.to_string(),
                what: format!("PATCH answer {} without a valid Upload-Offset", r.status()),
            })?;
        let sha256 = r.header("Upload-Sha256").map(|s| s.trim().to_string());
        let _ = read_small(r);
        self.ok(Patched {
            offset: new,
            sha256,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_encodes() {
        let m = encode_metadata(&[("incident", "123-4"), ("kind", "mini.gz"), ("e", "")]);
        assert_eq!(m, "incident MTIzLTQ=,kind bWluaS5neg==,e ");
        // Decoding is the collector's (collector::metadata's tests decode this very string).
    }
}
