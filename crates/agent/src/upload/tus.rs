//! A tus 1.0 client over the agent's [`Transport`] (core protocol +
//! creation): POST to create, HEAD for the offset, PATCH with `application/offset+octet-stream`
//! (a PATCH's body streamed from the spool file by the transport, never loaded whole).
//!
//! Invariants: every request carries `Tus-Resumable: 1.0.0`; no URL that is not HTTPS (or plain
//! HTTP to a loopback address) is ever contacted; no redirect is followed (a 3xx is an error
//! like a 4xx); each response body is read only up to a bound (4 KiB, for error messages);
//! nothing panics on a malformed answer. The URL rules are `policy::url`'s, shared with the
//! policy's own fetch; the connect, read and DNS deadlines are the transport's.

use crate::net::{Body, Request, Response, Transport};
use crate::policy::url::{allowed_url, resolve};
use base64::Engine;
use std::path::Path;
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

/// `Retry-After`, in seconds: as sent, or until the HTTP-date sent (0 once it is past); `None`
/// for anything else, and the caller's default applies.
fn retry_after(r: &Response) -> Option<u64> {
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

    #[test]
    fn every_month_and_each_fields_bounds_are_read() {
        // The first of each month of 2026 (Python's calendar.timegm; the weekday is not checked).
        let firsts = [
            ("Jan", 1_767_225_600),
            ("Feb", 1_769_904_000),
            ("Mar", 1_772_323_200),
            ("Apr", 1_775_001_600),
            ("May", 1_777_593_600),
            ("Jun", 1_780_272_000),
            ("Jul", 1_782_864_000),
            ("Aug", 1_785_542_400),
            ("Sep", 1_788_220_800),
            ("Oct", 1_790_812_800),
            ("Nov", 1_793_491_200),
            ("Dec", 1_796_083_200),
        ];
        for (month, at) in firsts {
            let s = format!("Thu, 01 {month} 2026 00:00:00 GMT");
            assert_eq!(http_date(&s), Some(at), "{s}");
        }
        // Each field at its last value, then each one past it alone.
        let last = 1_796_083_200 + 30 * 86_400 + 23 * 3_600 + 59 * 60 + 60;
        assert_eq!(http_date("Thu, 31 Dec 2026 23:59:60 GMT"), Some(last));
        for bad in [
            "Thu, 32 Dec 2026 23:59:59 GMT",
            "Thu, 00 Dec 2026 23:59:59 GMT",
            "Thu, 31 Dec 2026 24:59:59 GMT",
            "Thu, 31 Dec 2026 23:60:59 GMT",
            "Thu, 31 Dec 2026 23:59:61 GMT",
            "Thu, 31 Dec 2026 23:59:59 UTC",
        ] {
            assert_eq!(http_date(bad), None, "{bad}");
        }
    }
}

/// A tus client.
#[derive(Debug, Clone)]
pub struct Client {
    transport: Arc<dyn Transport>,
    endpoint: String,
    connect_timeout: Duration,
    io_timeout: Duration,
    min_rate: u64,
    /// The server has answered a request as tus says (shared by clones).
    answered: Arc<AtomicBool>,
}

/// The response headers the client reads.
const WANT: &[&str] = &[
    "Location",
    "Upload-Offset",
    "Upload-Length",
    "Upload-Sha256",
    "Retry-After",
];

/// Bytes of an answer's body kept (for an error message).
const MAX_BODY: usize = 4096;

impl Client {
    /// A client over the process's transport ([`crate::net::transport`]).
    pub fn new(
        endpoint: &str,
        connect_timeout: Duration,
        io_timeout: Duration,
        min_rate: u64,
    ) -> Client {
        Client::over(
            crate::net::transport(),
            endpoint,
            connect_timeout,
            io_timeout,
            min_rate,
        )
    }

    /// A client over `transport`; each request has a deadline of `io_timeout` plus its body at
    /// `min_rate` bytes per second, and each read or write at most `io_timeout`.
    pub fn over(
        transport: Arc<dyn Transport>,
        endpoint: &str,
        connect_timeout: Duration,
        io_timeout: Duration,
        min_rate: u64,
    ) -> Client {
        Client {
            transport,
            endpoint: endpoint.to_string(),
            connect_timeout,
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

    /// One tus request to `url` (checked first); the answer whatever its status, or the
    /// transport's error with the body bytes that went out.
    fn send(
        &self,
        method: &str,
        url: &str,
        headers: Vec<(&str, String)>,
        body: Body<'_>,
    ) -> Result<Response, (TusError, u64)> {
        self.check(url).map_err(|e| (e, 0))?;
        let mut req = Request::new(method, url, self.io_timeout);
        req.connect_timeout = self.connect_timeout;
        req.deadline = self.deadline(body.len());
        req.headers = headers;
        req.headers.push(("Tus-Resumable", "1.0.0".into()));
        req.body = body;
        req.want = WANT;
        req.max_body = MAX_BODY;
        self.transport.exchange(&req).map_err(|e| {
            let sent = e.sent;
            (
                TusError::Network {
                    url: url.to_string(),
                    what: e.what,
                },
                sent,
            )
        })
    }

    /// An answer that is an error: 4xx and 5xx as [`TusError::Status`]; a redirect is not
    /// followed (a tus request must not be replayed elsewhere unasked): it is an error naming
    /// where it pointed, like a 4xx.
    fn failed(url: &str, r: &Response) -> Option<TusError> {
        let status = r.status;
        let body = if (300..400).contains(&status) {
            format!(
                "redirect to {:?}, not followed",
                r.header("Location").unwrap_or("")
            )
        } else if status >= 400 {
            r.text(300)
        } else {
            return None;
        };
        Some(TusError::Status {
            status,
            url: url.to_string(),
            retry_after: if status >= 400 { retry_after(r) } else { None },
            body,
        })
    }

    /// Create an upload of `length` bytes; returns its absolute URL.
    pub fn create(&self, length: u64, metadata: &[(&str, &str)]) -> Result<String, TusError> {
        let url = &self.endpoint;
        let headers = vec![
            ("Upload-Length", length.to_string()),
            ("Upload-Metadata", encode_metadata(metadata)),
        ];
        let r = self
            .send("POST", url, headers, Body::None)
            .map_err(|(e, _)| e)?;
        if let Some(e) = Self::failed(url, &r) {
            return Err(e);
        }
        if r.status != 201 && r.status != 200 {
            return Err(TusError::Protocol {
                url: url.clone(),
                what: format!("creation answered {} instead of 201", r.status),
            });
        }
        let loc = r.header("Location").ok_or_else(|| TusError::Protocol {
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
        let r = self
            .send("HEAD", url, Vec::new(), Body::None)
            .map_err(|(e, _)| e)?;
        if matches!(r.status, 403 | 404 | 410) {
            return self.ok(None);
        }
        if let Some(e) = Self::failed(url, &r) {
            return Err(e);
        }
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
        self.ok(Some(Head {
            offset,
            length,
            sha256,
        }))
    }

    /// Send `body` at `offset`.
    pub fn patch(&self, url: &str, offset: u64, body: &[u8]) -> Result<Patched, TusError> {
        self.patch_body(url, offset, Body::Bytes(body)).1
    }

    /// Send `len` bytes of the file at `path` at `offset` (the file's bytes from `offset`,
    /// streamed by the transport); also says how many bytes went out, answered or not.
    pub fn patch_file(
        &self,
        url: &str,
        offset: u64,
        path: &Path,
        len: u64,
    ) -> (u64, Result<Patched, TusError>) {
        self.patch_body(url, offset, Body::File { path, offset, len })
    }

    fn patch_body(
        &self,
        url: &str,
        offset: u64,
        body: Body<'_>,
    ) -> (u64, Result<Patched, TusError>) {
        let headers = vec![
            ("Upload-Offset", offset.to_string()),
            ("Content-Type", "application/offset+octet-stream".into()),
        ];
        let r = match self.send("PATCH", url, headers, body) {
            Ok(r) => r,
            Err((e, sent)) => return (sent, Err(e)),
        };
        let sent = r.sent;
        if let Some(e) = Self::failed(url, &r) {
            return (sent, Err(e));
        }
        let Some(new) = r
            .header("Upload-Offset")
            .and_then(|v| v.trim().parse::<u64>().ok())
        else {
            return (
                sent,
                Err(TusError::Protocol {
                    url: url.to_string(),
                    what: format!("PATCH answer {} without a valid Upload-Offset", r.status),
                }),
            );
        };
        let sha256 = r.header("Upload-Sha256").map(|s| s.trim().to_string());
        (
            sent,
            self.ok(Patched {
                offset: new,
                sha256,
            }),
        )
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

    /// `net::loopback`'s test server, its requests as text.
    fn serve(answers: Vec<&'static str>, read_body: usize) -> (String, impl Fn() -> String) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let answers = answers.into_iter().map(str::as_bytes).collect();
        let (base, seen) = crate::net::loopback::tests::serve_each(l, answers, read_body);
        (base, move || {
            String::from_utf8_lossy(&seen.recv().unwrap()).into_owned()
        })
    }

    /// The loopback transport, noting each request's method and deadline.
    #[derive(Debug, Default)]
    struct Noted(std::sync::Mutex<Vec<(String, Duration)>>);

    impl Transport for Noted {
        fn name(&self) -> &'static str {
            "noted loopback"
        }
        fn exchange(
            &self,
            req: &crate::net::Request<'_>,
        ) -> Result<Response, crate::net::NetError> {
            let noted = (req.method.to_string(), req.deadline);
            self.0.lock().unwrap().push(noted);
            crate::net::loopback::Loopback.exchange(req)
        }
    }

    const IO: Duration = Duration::from_secs(5);

    fn client(endpoint: &str) -> (Client, Arc<Noted>) {
        let noted = Arc::new(Noted::default());
        let c = Client::over(noted.clone(), endpoint, Duration::from_secs(2), IO, 1_000);
        (c, noted)
    }

    #[test]
    fn a_creation_is_posted_with_its_length_and_gives_its_upload_an_absolute_url() {
        let (base, seen) = serve(
            vec!["HTTP/1.1 201 Created\r\nLocation: /files/abc\r\nContent-Length: 0\r\n\r\n"],
            0,
        );
        let endpoint = format!("{base}/files/");
        let (c, noted) = client(&endpoint);
        assert_eq!(c.endpoint(), endpoint);
        assert!(!c.answered());
        assert_eq!(
            c.create(1234, &[("incident", "1")]),
            Ok(format!("{base}/files/abc"))
        );
        assert!(c.answered(), "a creation with its Location is a tus answer");
        let seen = seen();
        assert!(seen.starts_with("POST /files/ HTTP/1.1\r\n"), "{seen}");
        for h in [
            "Upload-Length: 1234",
            "Upload-Metadata: incident MQ==",
            "Tus-Resumable: 1.0.0",
        ] {
            assert!(seen.contains(&format!("{h}\r\n")), "{h} not in {seen}");
        }
        // No body: the deadline is the I/O timeout.
        assert_eq!(*noted.0.lock().unwrap(), [("POST".to_string(), IO)]);
    }

    #[test]
    fn a_creation_answered_otherwise_than_tus_says_is_an_error_and_not_an_answer() {
        let (base, _seen) = serve(vec![
            "HTTP/1.1 204 No Content\r\nLocation: /files/a\r\n\r\n",
            "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 201 Created\r\nLocation: http://192.0.2.1/files/a\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/elsewhere\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 503 Busy\r\nRetry-After: 7\r\nContent-Length: 4\r\n\r\nbusy",
            "HTTP/1.1 200 OK\r\nLocation: http://127.0.0.1:9/files/b\r\nContent-Length: 0\r\n\r\n",
        ], 0);
        let url = format!("{base}/files/");
        let (c, _) = client(&url);
        let protocol = |what: &str| TusError::Protocol {
            url: url.clone(),
            what: what.into(),
        };
        assert_eq!(
            c.create(1, &[]),
            Err(protocol("creation answered 204 instead of 201"))
        );
        assert_eq!(
            c.create(1, &[]),
            Err(protocol("creation answer without Location"))
        );
        assert_eq!(
            c.create(1, &[]),
            Err(TusError::Insecure("http://192.0.2.1/files/a".into()))
        );
        // A redirect is not followed, and its Retry-After is not a wait.
        assert_eq!(
            c.create(1, &[]),
            Err(TusError::Status {
                status: 302,
                url: url.clone(),
                retry_after: None,
                body: "redirect to \"http://127.0.0.1:9/elsewhere\", not followed".into(),
            })
        );
        assert_eq!(
            c.create(1, &[]),
            Err(TusError::Status {
                status: 503,
                url: url.clone(),
                retry_after: Some(7),
                body: "busy".into(),
            })
        );
        assert!(!c.answered(), "none of those was a tus answer");
        // 200 is taken for 201.
        assert_eq!(c.create(1, &[]), Ok("http://127.0.0.1:9/files/b".into()));
        assert!(c.answered());
    }

    #[test]
    fn a_head_gives_the_offset_or_says_the_server_no_longer_knows_the_upload() {
        let (base, seen) = serve(vec![
            "HTTP/1.1 200 OK\r\nUpload-Offset: 10\r\nUpload-Length: 20\r\nUpload-Sha256: ab12 \r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nUpload-Length: 20\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 410 Gone\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n",
        ], 0);
        let url = format!("{base}/files/u1");
        let (c, _) = client(&url);
        assert_eq!(
            c.head(&url),
            Ok(Some(Head {
                offset: 10,
                length: Some(20),
                sha256: Some("ab12".into()),
            }))
        );
        assert!(seen().starts_with("HEAD /files/u1 HTTP/1.1\r\n"));
        let (c, _) = client(&url);
        assert_eq!(
            c.head(&url),
            Err(TusError::Protocol {
                url: url.clone(),
                what: "HEAD answer without a valid Upload-Offset".into(),
            })
        );
        assert!(!c.answered());
        for _ in 0..3 {
            let (c, _) = client(&url);
            assert_eq!(c.head(&url), Ok(None));
            assert!(c.answered(), "'not found' is a tus answer");
        }
    }

    #[test]
    fn a_patchs_deadline_allows_its_body_at_the_slowest_rate() {
        let (base, seen) = serve(
            vec!["HTTP/1.1 204 No Content\r\nUpload-Offset: 3005\r\nContent-Length: 0\r\n\r\n"],
            3000,
        );
        let url = format!("{base}/files/u1");
        let (c, noted) = client(&url);
        let r = c.patch(&url, 5, &[7u8; 3000]);
        assert_eq!(
            r,
            Ok(Patched {
                offset: 3005,
                sha256: None
            })
        );
        let seen = seen();
        assert!(seen.contains("Upload-Offset: 5\r\n"), "{seen}");
        assert!(
            seen.contains("Content-Type: application/offset+octet-stream\r\n"),
            "{seen}"
        );
        // 3,000 bytes at 1,000 bytes a second: 3 s beside the I/O timeout.
        let want = IO + Duration::from_secs(3);
        assert_eq!(*noted.0.lock().unwrap(), [("PATCH".to_string(), want)]);
    }

    fn answer(retry_after: Option<&str>) -> Response {
        Response {
            status: 503,
            headers: retry_after
                .map(|v| vec![("Retry-After".to_string(), v.to_string())])
                .unwrap_or_default(),
            ..Response::default()
        }
    }

    #[test]
    fn retry_after_is_read_in_seconds_or_as_a_date() {
        assert_eq!(retry_after(&answer(Some("120"))), Some(120));
        assert_eq!(retry_after(&answer(Some(" 7 "))), Some(7));
        assert_eq!(retry_after(&answer(Some("0"))), Some(0));
        // A date: the seconds until it, from now; a date gone by, none.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let until_2100 = retry_after(&answer(Some("Fri, 01 Jan 2100 00:00:00 GMT"))).unwrap();
        let want = 4_102_444_800 - now;
        assert!(
            (want.saturating_sub(5)..=want).contains(&until_2100),
            "{until_2100} s, not about {want}"
        );
        assert_eq!(
            retry_after(&answer(Some("Sun, 06 Nov 1994 08:49:37 GMT"))),
            Some(0)
        );
        // Unreadable or missing: the caller's default applies.
        for bad in [Some("soon"), Some("-1"), Some("1.5"), Some(""), None] {
            assert_eq!(retry_after(&answer(bad)), None, "{bad:?}");
        }
    }
}
