//! The loopback twin: plain HTTP/1.1 over `std::net::TcpStream`, for `http://` to a loopback
//! address only. It serves the tests that run without a JVM (the unit tests, the upload matrix,
//! the spool's footprint), the host tools, and an ART whose facade has no `http` method (the
//! ART tests: see [`super`]). Anything else (https, another host) is refused with an error
//! that says so: it never opens a connection off this machine.
//!
//! One connection per request (`Connection: close`); a response body by `Content-Length`,
//! `chunked`, or up to the close; a body from a file read in 64 KiB chunks as it is written.
//! Every read and write waits at most the request's read timeout and never past its deadline.
#![forbid(unsafe_code)]

use super::weburl::Host;
use super::{Body, NetError, Request, Response, Transport, USER_AGENT};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Longest response head read (status line and headers).
const MAX_HEAD: usize = 64 * 1024;
/// A file body is sent in chunks of this size.
const CHUNK: usize = 64 * 1024;

/// The loopback twin (see the module doc).
#[derive(Debug, Clone, Copy, Default)]
pub struct Loopback;

impl Transport for Loopback {
    fn name(&self) -> &'static str {
        "loopback"
    }

    fn exchange(&self, req: &Request<'_>) -> Result<Response, NetError> {
        let start = Instant::now();
        let (addrs, host, target) = target(req)?;
        let mut stream = connect(&addrs, req, start)?;
        let mut sent = 0;
        let wrote = send(&mut stream, req, &host, &target, start, &mut sent);
        // A server may answer before it has read the whole body (a 413), then close: its
        // answer counts over our write error.
        let read = receive(&stream, req, start);
        match (wrote, read) {
            (_, Ok(mut r)) => {
                r.sent = sent;
                Ok(r)
            }
            (Err(what), Err(_)) | (Ok(()), Err(what)) => Err(NetError { what, sent }),
        }
    }
}

/// The addresses to connect to, the `Host` header and the request target, for a URL the twin
/// may contact; else why not.
fn target(req: &Request<'_>) -> Result<(Vec<SocketAddr>, String, String), NetError> {
    let refuse = |why: &str| {
        NetError::new(format!(
            "{}: the built-in client {why}: it only speaks plain http:// to a loopback address (the platform's transport, OomGuard.http, is not installed)",
            req.url
        ))
    };
    let u = super::weburl::Url::parse(req.url)
        .map_err(|e| refuse(&format!("cannot parse it ({e})")))?;
    if u.scheme() != "http" {
        return Err(refuse(&format!("does not speak {}://", u.scheme())));
    }
    let port = u.port_or_default();
    let addrs = match u.host() {
        Host::Ipv4(ip) if ip.is_loopback() => vec![SocketAddr::from((*ip, port))],
        Host::Ipv6(ip) if ip.is_loopback() => vec![SocketAddr::from((*ip, port))],
        Host::Domain(d) if d == "localhost" => {
            crate::policy::url::resolve_within(&format!("localhost:{port}"), req.connect_timeout)
                .map_err(|e| NetError::new(format!("{}: {e}", req.url)))?
                .into_iter()
                .filter(|a| a.ip().is_loopback())
                .collect()
        }
        _ => return Err(refuse("will not reach a host that is not loopback")),
    };
    if addrs.is_empty() {
        return Err(refuse("found no loopback address for localhost"));
    }
    let host = match u.port() {
        Some(p) => format!("{}:{p}", u.host_str()),
        None => u.host_str().to_string(),
    };
    let path = u.path_and_query().to_string();
    Ok((addrs, host, path))
}

/// What is left of the deadline, capped at the read timeout; an error once it has passed.
fn budget(req: &Request<'_>, start: Instant, doing: &str) -> Result<Duration, String> {
    let left = req.deadline.saturating_sub(start.elapsed());
    if left.is_zero() {
        return Err(format!(
            "{}: {doing}: the deadline of {:?} passed",
            req.url, req.deadline
        ));
    }
    Ok(left.min(req.read_timeout).max(Duration::from_millis(1)))
}

fn connect(addrs: &[SocketAddr], req: &Request<'_>, start: Instant) -> Result<TcpStream, NetError> {
    let mut last = String::new();
    for a in addrs {
        let limit = budget(req, start, "connecting")
            .map_err(NetError::new)?
            .min(req.connect_timeout.max(Duration::from_millis(1)));
        match TcpStream::connect_timeout(a, limit) {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("{}: connecting to {a}: {e}", req.url),
        }
    }
    Err(NetError::new(last))
}

/// Write the head and the body; `sent` counts the body bytes written.
fn send(
    s: &mut TcpStream,
    req: &Request<'_>,
    host: &str,
    target: &str,
    start: Instant,
    sent: &mut u64,
) -> Result<(), String> {
    let mut head = format!(
        "{} {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {USER_AGENT}\r\nConnection: close\r\n",
        req.method
    );
    let len = req.body.len();
    if len > 0 || !matches!(req.method, "GET" | "HEAD") {
        head.push_str(&format!("Content-Length: {len}\r\n"));
    }
    for (k, v) in &req.headers {
        if ["host", "content-length", "connection"].contains(&k.to_ascii_lowercase().as_str()) {
            continue;
        }
        if k.contains(['\r', '\n', ':']) || v.contains(['\r', '\n']) {
            return Err(format!("{}: header {k:?} is not a valid header", req.url));
        }
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let io = |e: std::io::Error| format!("{}: sending the request: {e}", req.url);
    s.set_write_timeout(Some(budget(req, start, "sending")?))
        .map_err(io)?;
    s.write_all(head.as_bytes()).map_err(io)?;
    match req.body {
        Body::None => {}
        Body::Bytes(b) => {
            s.write_all(b).map_err(io)?;
            *sent = b.len() as u64;
        }
        Body::File { path, offset, len } => {
            let mut f = std::fs::File::open(path)
                .map_err(|e| format!("{}: opening {}: {e}", req.url, path.display()))?;
            f.seek(SeekFrom::Start(offset))
                .map_err(|e| format!("{}: seeking {}: {e}", req.url, path.display()))?;
            let mut buf = vec![0u8; CHUNK.min(len as usize).max(1)];
            while *sent < len {
                let want = buf.len().min((len - *sent) as usize);
                let k = f
                    .read(&mut buf[..want])
                    .map_err(|e| format!("{}: reading {}: {e}", req.url, path.display()))?;
                if k == 0 {
                    return Err(format!(
                        "{}: {} ended {} bytes early",
                        req.url,
                        path.display(),
                        len - *sent
                    ));
                }
                s.set_write_timeout(Some(budget(req, start, "sending")?))
                    .map_err(io)?;
                s.write_all(&buf[..k]).map_err(io)?;
                *sent += k as u64;
            }
        }
    }
    s.flush().map_err(io)
}

/// A reader that waits at most the read timeout per read and never past the deadline.
struct Timed<'a> {
    s: &'a TcpStream,
    req: &'a Request<'a>,
    start: Instant,
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let limit = budget(self.req, self.start, "reading the answer")
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::TimedOut, e))?;
        self.s.set_read_timeout(Some(limit))?;
        (&*self.s).read(buf)
    }
}

fn receive(s: &TcpStream, req: &Request<'_>, start: Instant) -> Result<Response, String> {
    let io = |e: std::io::Error| format!("{}: reading the answer: {e}", req.url);
    let mut r = BufReader::new(Timed { s, req, start });
    let (status, headers) = loop {
        let (status, headers) = read_head(&mut r, req).map_err(|e| match e {
            HeadError::Io(e) => io(e),
            HeadError::Bad(what) => format!("{}: {what}", req.url),
        })?;
        // 1xx: an interim answer; the real one follows.
        if !(100..200).contains(&status) {
            break (status, headers);
        }
    };
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    };
    let mut resp = Response {
        status,
        ..Response::default()
    };
    let no_body = req.method == "HEAD" || status == 204 || status == 304;
    if !no_body {
        let cap = req.max_body as u64 + 1;
        let mut body = Vec::new();
        if get("Transfer-Encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
            read_chunked(&mut r, cap, &mut body).map_err(io)?;
        } else if let Some(n) = get("Content-Length") {
            let n: u64 = n
                .parse()
                .map_err(|_| format!("{}: Content-Length {n:?} is not a number", req.url))?;
            (&mut r)
                .take(n.min(cap))
                .read_to_end(&mut body)
                .map_err(io)?;
        } else {
            (&mut r).take(cap).read_to_end(&mut body).map_err(io)?;
        }
        resp.truncated = body.len() > req.max_body;
        body.truncate(req.max_body);
        resp.body = body;
    }
    for (k, v) in headers {
        if let Some(w) = req.want.iter().find(|w| w.eq_ignore_ascii_case(&k)) {
            resp.headers.push((w.to_string(), v.trim().to_string()));
        }
    }
    Ok(resp)
}

enum HeadError {
    Io(std::io::Error),
    Bad(String),
}

/// One line of the head, without its line end.
fn line(r: &mut impl BufRead, used: &mut usize) -> Result<String, HeadError> {
    let mut buf = Vec::new();
    let k = r
        .take((MAX_HEAD - *used) as u64)
        .read_until(b'\n', &mut buf)
        .map_err(HeadError::Io)?;
    *used += k;
    if k == 0 {
        return Err(HeadError::Bad(
            "the server closed the connection without an answer".into(),
        ));
    }
    if !buf.ends_with(b"\n") {
        return Err(HeadError::Bad(format!(
            "the answer's head is longer than {MAX_HEAD} bytes or cut short"
        )));
    }
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    String::from_utf8(buf).map_err(|_| HeadError::Bad("the answer's head is not text".into()))
}

fn read_head(
    r: &mut impl BufRead,
    req: &Request<'_>,
) -> Result<(u16, Vec<(String, String)>), HeadError> {
    let mut used = 0;
    let first = line(r, &mut used)?;
    let mut parts = first.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let status = parts.next().and_then(|s| s.parse::<u16>().ok());
    let status = match status {
        Some(s) if version.starts_with("HTTP/1.") && (100..600).contains(&s) => s,
        _ => {
            return Err(HeadError::Bad(format!(
                "{} {}: the answer does not start with an HTTP/1.x status line: {:?}",
                req.method,
                req.url,
                first.chars().take(80).collect::<String>()
            )))
        }
    };
    let mut headers = Vec::new();
    loop {
        let l = line(r, &mut used)?;
        if l.is_empty() {
            return Ok((status, headers));
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
}

/// A chunked body, at most `cap` bytes of it kept (reading stops there).
fn read_chunked(r: &mut impl BufRead, cap: u64, out: &mut Vec<u8>) -> std::io::Result<()> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    loop {
        let mut size = String::new();
        r.take(1024).read_line(&mut size)?;
        let hex = size.trim().split(';').next().unwrap_or("");
        let n = u64::from_str_radix(hex, 16).map_err(|_| bad("a chunk size is not hex"))?;
        if n == 0 {
            return Ok(());
        }
        let room = cap.saturating_sub(out.len() as u64);
        r.take(n.min(room)).read_to_end(out)?;
        if out.len() as u64 >= cap {
            return Ok(());
        }
        let mut crlf = String::new();
        r.take(2).read_line(&mut crlf)?;
    }
}

#[cfg(test)]
pub(crate) mod tests;
