//! A tus 1.0 client over `ureq` (core protocol + creation): POST to create, HEAD for the offset,
//! PATCH with `application/offset+octet-stream`.
//!
//! Invariants: every request carries `Tus-Resumable: 1.0.0`; no URL that is not HTTPS (or plain
//! HTTP to a loopback address) is ever contacted; no redirect is followed (a 3xx is an error
//! like a 4xx); each response body is read (bounded) so that the connection can be reused;
//! nothing panics on a malformed answer.

use base64::Engine;
use std::io::{self, Read};
use std::net::{SocketAddr, ToSocketAddrs};
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

/// Whether `url` may be contacted, and why not: `https://` to any host, or plain `http://` to a
/// loopback address (127.0.0.0/8, `localhost`, `[::1]`). Judged on the host the URL parser
/// finds, the same parser (the `url` crate) ureq connects by, never on the text: in
/// `http://vm\@127.0.0.1/` the host is `vm` (a backslash ends the authority in an http URL),
/// in `http://127.0.0.1@vm/` it is `vm` too. `localhost.` is refused: a resolver may ask DNS.
pub fn check_url(url: &str) -> Result<url::Url, String> {
    let u = url::Url::parse(url).map_err(|e| format!("is not a URL ({e})"))?;
    match (u.scheme(), u.host()) {
        ("https", Some(_)) => Ok(u),
        ("http", Some(url::Host::Domain(d))) if d.eq_ignore_ascii_case("localhost") => Ok(u),
        ("http", Some(url::Host::Ipv4(ip))) if ip.is_loopback() => Ok(u),
        ("http", Some(url::Host::Ipv6(ip))) if ip.is_loopback() => Ok(u),
        ("http", _) => Err("is plain http to a host that is not loopback; use https://".into()),
        _ => Err("is not an http:// or https:// URL".into()),
    }
}

/// Whether `url` may be contacted (see [`check_url`]).
pub fn allowed_url(url: &str) -> bool {
    check_url(url).is_ok()
}

/// Resolve a `Location` header against the endpoint, as a URL parser does (RFC 3986 with the
/// WHATWG rules ureq follows). What cannot be resolved comes back as it is, for
/// [`allowed_url`] to refuse.
pub fn resolve(endpoint: &str, location: &str) -> String {
    match url::Url::parse(endpoint).and_then(|base| base.join(location)) {
        Ok(u) => u.into(),
        Err(_) => location.to_string(),
    }
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

/// The system's lookup of `host:port` (getaddrinfo), which can block far longer than any
/// timeout of ours when DNS does not answer.
fn std_lookup(netloc: String) -> io::Result<Vec<SocketAddr>> {
    netloc.to_socket_addrs().map(|a| a.collect())
}

/// Resolve `netloc` ("host:port") in a thread of its own and wait at most `limit`: ureq 2 puts
/// no deadline on DNS, so a lookup that hangs would hold the calling thread until the system's
/// resolver gives up. For `ureq::AgentBuilder::resolver`.
pub(crate) fn resolve_within(netloc: &str, limit: Duration) -> io::Result<Vec<SocketAddr>> {
    resolve_with(netloc, limit, std_lookup)
}

/// [`resolve_within`] with the lookup given. A lookup past the limit is left to finish on its
/// own and its answer dropped. An address that is already numeric needs no lookup.
fn resolve_with(
    netloc: &str,
    limit: Duration,
    lookup: fn(String) -> io::Result<Vec<SocketAddr>>,
) -> io::Result<Vec<SocketAddr>> {
    if let Ok(a) = netloc.parse::<SocketAddr>() {
        return Ok(vec![a]);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = netloc.to_string();
    std::thread::Builder::new()
        .name("oomguard-dns".into())
        .spawn(move || {
            let _ = tx.send(lookup(owned));
        })?;
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("DNS lookup of {netloc} took more than {limit:?}"),
        )),
    }
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

    /// A lookup that never answers (DNS that does not reply): the caller gets a timeout, not
    /// a hang; a numeric address needs no lookup; a lookup's own error comes through.
    #[test]
    fn a_dns_lookup_that_hangs_is_given_up_at_the_limit() {
        fn hang(_: String) -> io::Result<Vec<SocketAddr>> {
            loop {
                std::thread::park();
            }
        }
        fn fail(n: String) -> io::Result<Vec<SocketAddr>> {
            Err(io::Error::new(io::ErrorKind::NotFound, format!("no {n}")))
        }
        let limit = Duration::from_millis(50);
        let e = resolve_with("collector.example:443", limit, hang).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(e.to_string().contains("collector.example:443"), "{e}");
        let a = resolve_with("127.0.0.1:8080", limit, hang).unwrap();
        assert_eq!(a, vec!["127.0.0.1:8080".parse().unwrap()]);
        let e = resolve_with("x.example:1", Duration::from_secs(60), fail).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        let a = resolve_within("localhost:9", Duration::from_secs(60)).unwrap();
        assert!(
            a.iter().all(|a| a.ip().is_loopback() && a.port() == 9),
            "{a:?}"
        );
    }

    #[test]
    fn only_https_or_loopback() {
        assert!(allowed_url("https://example.com/files/"));
        assert!(allowed_url("http://127.0.0.1:8080/files/"));
        assert!(allowed_url("http://127.3.2.1/files/"));
        assert!(allowed_url("http://localhost:1/x"));
        assert!(allowed_url("http://[::1]:9/x"));
        assert!(!allowed_url("http://example.com/files/"));
        assert!(!allowed_url("http://10.0.0.1/files/"));
        assert!(!allowed_url("http://127.0.0.1.evil.com/x"));
        assert!(!allowed_url("http://user@evil.com/x"));
        assert!(!allowed_url("ftp://127.0.0.1/"));
        assert!(!allowed_url("127.0.0.1/files"));
    }

    /// The host is the one a URL parser (ureq's) would contact, not a guess from the text: the
    /// backslash form ends the authority at `\\` (plain http to `vm`), userinfo is not the host,
    /// `localhost.` is a name a resolver may answer for, percent-encoded and long IPv6 forms of
    /// loopback are loopback. The same for a `Location` the server returns.
    #[test]
    fn urls_are_judged_by_the_host_a_client_contacts() {
        for refused in [
            "http://vm:8080\\@127.0.0.1/../files/",
            "http://evil.example\\@localhost/files/",
            "http://evil.example\\127.0.0.1/files/",
            "http://127.0.0.1@evil.example/files/",
            "http://127.0.0.1:80@evil.example/files/",
            "http://[::1]@evil.example/files/",
            "http://localhost.:9/files/",
            "http://localhost.evil.example/files/",
            "http://evil.example#@127.0.0.1/",
            "http://evil.example?@127.0.0.1/",
            "http:evil.example/files/",
            "http://[::ffff:10.0.0.1]/files/",
            "https://",
            "HTTP://evil.example/",
        ] {
            assert!(!allowed_url(refused), "{refused} was allowed");
        }
        for allowed in [
            "http://%31%32%37.0.0.1:9/files/",
            "http://[0:0:0:0:0:0:0:1]:9/files/",
            "http://LOCALHOST:9/files/",
            "http://user:pw@127.0.0.1:9/files/",
            "HTTPS://collector.example/files/",
            "https://collector.example\\files/",
        ] {
            assert!(allowed_url(allowed), "{allowed} was refused");
        }
        let e = "http://127.0.0.1:9/files/";
        for loc in [
            "http://vm:9\\@127.0.0.1/files/abc",
            "//vm:9\\@127.0.0.1/files/abc",
            "\\\\vm:9/files/abc",
        ] {
            assert!(!allowed_url(&resolve(e, loc)), "Location {loc} was allowed");
        }
    }

    #[test]
    fn locations_resolve() {
        let e = "http://127.0.0.1:9/files/";
        assert_eq!(resolve(e, "/files/abc"), "http://127.0.0.1:9/files/abc");
        assert_eq!(resolve(e, "abc"), "http://127.0.0.1:9/files/abc");
        assert_eq!(resolve(e, "https://x/y"), "https://x/y");
        assert_eq!(resolve("http://127.0.0.1:9", "/a"), "http://127.0.0.1:9/a");
    }

    #[test]
    fn metadata_encodes() {
        let m = encode_metadata(&[("incident", "123-4"), ("kind", "mini.gz"), ("e", "")]);
        assert_eq!(m, "incident MTIzLTQ=,kind bWluaS5neg==,e ");
        // Decoding is the collector's (collector::metadata's tests decode this very string).
    }
}
