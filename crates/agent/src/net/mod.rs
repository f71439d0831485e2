//! The transport the agent's HTTP goes through: one request, one response, nothing else. The
//! policy fetch (`policy::remote`) and the tus client (`upload::tus`) build their requests here
//! and keep every rule of theirs in Rust (https only off loopback, which redirects are followed,
//! signatures, byte budgets, 413/429/5xx and `Retry-After`, resumable PATCH offsets); a
//! transport only carries bytes.
//!
//! Why the platform's stack: an Android app's reports must leave the way the app's own traffic
//! does: through the trust store the device holds (user and enterprise CAs, as the app's Network
//! Security Config allows), the system proxy, and the app's cleartext policy. A TLS stack and
//! root list of our own (ureq + rustls + ring + webpki-roots, 0.8 MB of the shipped library by
//! symbol) ignored all of it, so on a corporate device behind an inspecting proxy nothing left.
//! The choice was between the facade's `HttpURLConnection` and rustls with the platform's
//! verifier; the verifier still leaves the proxy, the Network Security Config's cleartext rules
//! and the size to us, so the exchange moved to Java: [`crate::jni`]'s `JniTransport` calls
//! the facade's `OomGuard.http` (`java.net.HttpURLConnection`: Android's and HotSpot's, so the
//! JVM tests run it for real). It is installed by `nativeStart` ([`install`]).
//!
//! Where no platform transport is installed (the unit and spool tests, the host tools, an ART
//! whose facade has no `http` method), the [`loopback`] twin is used: a plain HTTP/1.1 client
//! over `std::net::TcpStream` that refuses anything but `http://` to a loopback address, with a
//! clear error. It is not in the Android library (`target_os = "android"`): a phone always has
//! the facade's `HttpURLConnection`, and there the fallback is `Missing`, which refuses every
//! exchange and says why (`nativeStart` logs which transport is in use). Issue 41: the twin was
//! 13 K of the shipped `.so` for a path that could reach nothing on a phone.
//!
//! The ART tests boot ART 11 with a core library of our own that has no `java.net`, and their
//! facade is smali without `http`; so there the agent falls back to the twin, and the ART upload
//! test (`art_faults`) sends its incident through it to a real collector process over loopback
//! TCP, and checks the log line that names the twin. A transport written in smali for that test
//! would test itself, not `OomGuard.http`, which the JVM tests (`net_jvm`) run on HotSpot's
//! `HttpURLConnection`, the same API Android's implements.
//!
//! Deadlines on the platform transport: `setConnectTimeout`/`setReadTimeout`, a timer that
//! disconnects an exchange past its deadline (a write has no timeout of its own), and the DNS
//! lookup made first on a thread of its own within the connect timeout (the connect timeout does
//! not cover it). Streaming: a PATCH's body is read by `OomGuard.http` from the spool file by
//! path, offset and length, 64 KiB at a time, into a fixed-length streaming request: never whole
//! in the Java heap of an app near its limit.
//!
//! Invariants: a request's body never lies whole in memory when it comes from a file (the
//! transport streams `Body::File` from its path, in chunks); a response body is read up to
//! `max_body` bytes and no more (`truncated` says the rest was dropped); a transport follows no
//! redirect; every request has a connect timeout, a read timeout and an overall deadline; an
//! error says how many bytes of the request body went out (the byte budget is charged with
//! them).

#[cfg(not(target_os = "android"))]
pub mod loopback;
pub mod weburl;

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// What a request sends after its head.
#[derive(Debug, Clone, Copy)]
pub enum Body<'a> {
    None,
    Bytes(&'a [u8]),
    /// `len` bytes of the file at `path` from `offset`, read in chunks as they are sent.
    File {
        path: &'a Path,
        offset: u64,
        len: u64,
    },
}

impl Body<'_> {
    /// Bytes the body holds (its `Content-Length`).
    pub fn len(&self) -> u64 {
        match self {
            Body::None => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One HTTP request.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub method: &'a str,
    pub url: &'a str,
    /// Request headers (the transport adds `Host`, `Content-Length` and `User-Agent`).
    pub headers: Vec<(&'a str, String)>,
    pub body: Body<'a>,
    /// Connecting (and, where the transport resolves names, the DNS lookup) at most this long.
    pub connect_timeout: Duration,
    /// A read or write that makes no progress for this long fails.
    pub read_timeout: Duration,
    /// The whole exchange, body included, at most this long.
    pub deadline: Duration,
    /// Response headers the caller reads (case-insensitive); others are dropped.
    pub want: &'a [&'a str],
    /// Response body bytes kept at most; the rest is dropped (`truncated`).
    pub max_body: usize,
}

impl<'a> Request<'a> {
    /// A request with no headers or body, every timeout `limit`, a body of at most 4 KiB kept.
    pub fn new(method: &'a str, url: &'a str, limit: Duration) -> Self {
        Request {
            method,
            url,
            headers: Vec::new(),
            body: Body::None,
            connect_timeout: limit,
            read_timeout: limit,
            deadline: limit,
            want: &[],
            max_body: 4096,
        }
    }

    pub fn header(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

/// The answer to a request (any status: 3xx, 4xx and 5xx are answers, not errors).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// The wanted headers the server sent, names as the request spelt them.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was longer than `max_body`.
    pub truncated: bool,
    /// Request body bytes that went out.
    pub sent: u64,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text, at most `max` characters (for an error message).
    pub fn text(&self, max: usize) -> String {
        String::from_utf8_lossy(&self.body)
            .chars()
            .take(max)
            .collect()
    }
}

/// No answer: the exchange failed (refused, reset, timed out, DNS, TLS, a refused URL).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}")]
pub struct NetError {
    pub what: String,
    /// Request body bytes that went out before it failed.
    pub sent: u64,
}

impl NetError {
    pub fn new(what: impl Into<String>) -> Self {
        NetError {
            what: what.into(),
            sent: 0,
        }
    }
}

/// Carries one request to its server and brings the answer back.
pub trait Transport: Send + Sync + std::fmt::Debug {
    /// Which transport this is, for log lines ("platform", "loopback").
    fn name(&self) -> &'static str;
    /// One exchange; blocks for at most the request's deadline (plus the transport's own
    /// bounded set-up, e.g. attaching the thread to the VM).
    fn exchange(&self, req: &Request<'_>) -> Result<Response, NetError>;
}

/// The transport `nativeStart` installed (the platform's), for the whole process.
static INSTALLED: RwLock<Option<Arc<dyn Transport>>> = RwLock::new(None);

/// Make `t` the process's transport (`None`: back to the fallback, [`transport`]).
pub fn install(t: Option<Arc<dyn Transport>>) {
    *INSTALLED.write().unwrap_or_else(|p| p.into_inner()) = t;
}

/// The process's transport: the installed one, else the loopback twin (on Android: `Missing`).
pub fn transport() -> Arc<dyn Transport> {
    let installed = INSTALLED.read().unwrap_or_else(|p| p.into_inner()).clone();
    #[cfg(not(target_os = "android"))]
    return installed.unwrap_or_else(|| Arc::new(loopback::Loopback));
    #[cfg(target_os = "android")]
    return installed.unwrap_or_else(|| Arc::new(Missing));
}

/// The Android library's fallback when `nativeStart` found no `OomGuard.http` (a facade minified
/// without the consumer rules): every exchange is refused with an error that says so.
#[cfg(target_os = "android")]
#[derive(Debug, Clone, Copy)]
pub struct Missing;

#[cfg(target_os = "android")]
impl Transport for Missing {
    fn name(&self) -> &'static str {
        "none"
    }

    fn exchange(&self, req: &Request<'_>) -> Result<Response, NetError> {
        Err(NetError::new(format!(
            "{}: no transport: the facade's OomGuard.http was not found at start (minified away without the consumer rules?), and the Android library has no HTTP client of its own",
            req.url
        )))
    }
}

/// The `User-Agent` every transport sends.
pub const USER_AGENT: &str = concat!("oomguard/", env!("CARGO_PKG_VERSION"));
