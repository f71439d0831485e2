//! The collector's HTTP/1.1 side, on hyper 1 (with hyper-util's tokio glue): the accept loop,
//! one hyper connection per client, and the bridge to the handlers of [`server`](super::server),
//! which run on blocking threads (they write files and take per-upload locks).
//!
//! Why hyper rather than axum: the collector has seven routes and matches them itself; what it
//! needs from a library is HTTP/1.1 framing with bounds (head size, header count, head
//! deadline), which hyper's `http1::Builder` gives directly. axum would add a router and
//! tower's layers for no bound hyper lacks.
//!
//! The tokio runtime lives here: [`serve`] builds it and blocks until the stop flag is set, so
//! the collector's API stays blocking.
//!
//! Invariants (the bounds of the crate doc):
//! - A request head is at most [`MAX_HEAD`] bytes and 100 headers (else 431), and must arrive
//!   whole within `head_timeout` (hyper's header timer; it also runs while a kept-alive
//!   connection waits for its next request, so an idle connection goes after
//!   `min(head_timeout, idle_timeout)`).
//! - A body is read by its handler through [`BodyReader`]: each wait for bytes at most
//!   `io_timeout`, and none after `request_timeout` from the end of the head.
//! - Every write waits at most `io_timeout` ([`Timed`]); a client that stops reading is cut.
//! - Memory per connection is bounded: a read buffer of at most [`MAX_BUF`], a body frame
//!   at a time in [`BodyReader`], a served file read 64 KiB at a time ([`Out`]).
//! - At most `max_connections` connections are served; one beyond gets a 503 and is closed
//!   (at most as many refusals at once, each within a second; others are closed unanswered).
//! - On stop: the listener is closed, every connection is told to finish the request in
//!   flight and close (hyper's graceful shutdown), all are awaited, then the caller fsyncs.
#![forbid(unsafe_code)]

use super::server::{self, Reply, ReplyBody, Request};
use super::{limits, Shared};
use http_body_util::BodyExt;
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// The largest request head (request line and headers) accepted.
pub(super) const MAX_HEAD: usize = 16 * 1024;

/// The most headers a request may have.
const MAX_HEADERS: usize = 100;

/// The largest read buffer of a connection (hyper's default is about 400 KB).
const MAX_BUF: usize = 64 * 1024;

/// Run the collector on `listener` until `sh.stop` is set; returns once every connection is
/// closed.
pub(super) fn serve(listener: std::net::TcpListener, sh: Arc<Shared>) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // One handler per connection at most, as many reads of files being served, and the
        // sweep of expired uploads.
        .max_blocking_threads(2 * sh.cfg.max_connections.max(1) + 2)
        .thread_name("collector")
        .enable_all()
        .build()?;
    rt.block_on(accept_loop(listener, sh))
}

async fn accept_loop(listener: std::net::TcpListener, sh: Arc<Shared>) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut conns = tokio::task::JoinSet::new();
    let refusing = Arc::new(AtomicUsize::new(0));
    let sweep_every =
        (sh.cfg.upload_expiry / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
    let mut swept: Option<Instant> = None;
    while !sh.stop.load(Ordering::SeqCst) {
        if swept.is_none_or(|t| t.elapsed() >= sweep_every) {
            let sh2 = sh.clone();
            let _ = tokio::task::spawn_blocking(move || {
                limits::expire(&sh2, SystemTime::now());
            })
            .await;
            swept = Some(Instant::now());
        }
        while conns.try_join_next().is_some() {}
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = tokio::time::sleep(Duration::from_millis(50)) => continue,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!("collector: accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if sh.active.load(Ordering::SeqCst) >= sh.cfg.max_connections {
            sh.counters.busy_refused.fetch_add(1, Ordering::SeqCst);
            if refusing.load(Ordering::SeqCst) < sh.cfg.max_connections {
                refusing.fetch_add(1, Ordering::SeqCst);
                let refusing = refusing.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_secs(1), busy(stream)).await;
                    refusing.fetch_sub(1, Ordering::SeqCst);
                });
            }
            continue;
        }
        sh.active.fetch_add(1, Ordering::SeqCst);
        let (sh2, stop) = (sh.clone(), stop_rx.clone());
        conns.spawn(async move {
            connection(stream, peer, sh2.clone(), stop).await;
            sh2.active.fetch_sub(1, Ordering::SeqCst);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    while conns.join_next().await.is_some() {}
    Ok(())
}

/// hyper's HTTP/1.1 settings: the head bounds of the module doc.
fn builder(sh: &Shared) -> http1::Builder {
    let c = &sh.cfg;
    let mut b = http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(c.head_timeout.min(c.request_timeout).min(c.idle_timeout))
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .max_buf_size(MAX_BUF)
        // Header names as the hand-written server sent them (`Upload-Offset`), for clients
        // that match them by case.
        .title_case_headers(true)
        .keep_alive(true);
    b
}

/// Serve one connection until it closes, or until the stop (then after its request in flight).
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    sh: Arc<Shared>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(Timed::new(stream, sh.cfg.io_timeout));
    let sh2 = sh.clone();
    let svc = service_fn(move |req| request(req, peer, sh2.clone()));
    let conn = builder(&sh).serve_connection(io, svc);
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    if e.is_timeout() {
                        // An idle kept-alive connection ends so too: not worth an info line.
                        tracing::debug!(
                            "collector: {peer}: no whole request head within {} s (idle, or a slow client); connection closed",
                            sh.cfg.head_timeout.min(sh.cfg.idle_timeout).as_secs_f64()
                        );
                    } else {
                        tracing::debug!("collector: {peer}: {e}");
                    }
                }
                return;
            }
            _ = stop.changed(), if !stopping => {
                conn.as_mut().graceful_shutdown();
                stopping = true;
            }
        }
    }
}

/// Answer a connection beyond `max_connections`: 503, then close.
async fn busy(stream: TcpStream) {
    let svc = service_fn(|_req| async {
        let mut headers = server::tus_headers();
        headers.push(("Connection", "close".into()));
        let reply = Reply {
            status: 503,
            headers,
            body: ReplyBody::Bytes(b"busy".to_vec()),
            keep: false,
        };
        Ok::<_, io::Error>(response(reply))
    });
    let mut b = http1::Builder::new();
    b.max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .title_case_headers(true);
    let _ = b.serve_connection(TokioIo::new(stream), svc).await;
}

/// One request: its handler runs on a blocking thread; an error closes the connection
/// unanswered (an upload keeps the bytes that came).
async fn request(
    req: hyper::Request<Incoming>,
    peer: SocketAddr,
    sh: Arc<Shared>,
) -> io::Result<hyper::Response<Out>> {
    let deadline = Instant::now() + sh.cfg.request_timeout;
    sh.counters.requests.fetch_add(1, Ordering::SeqCst);
    let (parts, body) = req.into_parts();
    let q = Request {
        method: parts.method.as_str().to_string(),
        target: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_string(), |p| p.as_str().to_string()),
        headers: parts
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect(),
    };
    let rt = tokio::runtime::Handle::current();
    let (q2, sh2) = (q.clone(), sh.clone());
    let out = tokio::task::spawn_blocking(move || {
        let mut r = BodyReader {
            body,
            rt,
            io_timeout: sh2.cfg.io_timeout,
            deadline,
            buf: Bytes::new(),
            done: false,
        };
        server::handle(&q2, &mut r, &sh2)
    })
    .await
    .map_err(io::Error::other)?;
    match out {
        Ok(reply) => Ok(response(reply)),
        Err(e) => {
            if timed_out(&e) {
                tracing::info!(
                    "collector: {peer}: {} {} not whole within {} s ({e}); connection closed, an upload keeps what came",
                    q.method,
                    q.target,
                    sh.cfg.request_timeout.as_secs_f64()
                );
            } else {
                tracing::debug!("collector: {peer}: {} {}: {e}", q.method, q.target);
            }
            Err(e)
        }
    }
}

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// A [`Reply`] as hyper's response.
fn response(r: Reply) -> hyper::Response<Out> {
    let body = match r.body {
        ReplyBody::Bytes(b) => Out::Bytes(Some(Bytes::from(b))),
        ReplyBody::File(f, len) => Out::File {
            file: tokio::fs::File::from_std(f),
            left: len,
        },
    };
    let mut resp = hyper::Response::new(body);
    *resp.status_mut() =
        hyper::StatusCode::from_u16(r.status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    for (k, v) in r.headers {
        if let Ok(v) = hyper::header::HeaderValue::from_str(&v) {
            h.append(k, v);
        }
    }
    if !r.keep {
        h.insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    resp
}

/// A response body: bytes in memory, or a file streamed in pieces of 64 KiB.
pub(super) enum Out {
    Bytes(Option<Bytes>),
    File { file: tokio::fs::File, left: u64 },
}

impl Body for Out {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            Out::Bytes(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Out::File { left: 0, .. } => Poll::Ready(None),
            Out::File { file, left } => {
                let mut buf = vec![0u8; (*left).min(64 * 1024) as usize];
                let mut rb = ReadBuf::new(&mut buf);
                match Pin::new(file).poll_read(cx, &mut rb) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
                    Poll::Ready(Ok(())) => {
                        let n = rb.filled().len();
                        if n == 0 {
                            return Poll::Ready(Some(Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                format!("a served file shrank: {left} bytes could not be read"),
                            ))));
                        }
                        *left -= n as u64;
                        buf.truncate(n);
                        Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Out::Bytes(b) => b.is_none(),
            Out::File { left, .. } => *left == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Out::Bytes(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Out::File { left, .. } => SizeHint::with_exact(*left),
        }
    }
}

/// A request body as a blocking [`Read`], for a handler on a blocking thread: each wait for
/// bytes at most `io_timeout`, none after `deadline` (then `TimedOut`); a body cut short is an
/// `UnexpectedEof`.
pub(super) struct BodyReader {
    body: Incoming,
    rt: tokio::runtime::Handle,
    io_timeout: Duration,
    deadline: Instant,
    buf: Bytes,
    done: bool,
}

impl BodyReader {
    /// The body's length, if its head declared one (`Content-Length`, or none: 0).
    pub fn length(&self) -> Option<u64> {
        self.body.size_hint().exact()
    }

    /// Read and drop the rest of the body, up to `limit` bytes; false if more remained.
    pub fn drain(&mut self, limit: u64) -> io::Result<bool> {
        io::copy(&mut (&mut *self).take(limit), &mut io::sink())?;
        let mut one = [0u8; 1];
        Ok(self.read(&mut one)? == 0)
    }
}

impl Read for BodyReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.buf.is_empty() {
            if self.done || out.is_empty() {
                return Ok(0);
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the request did not arrive whole within its deadline",
                ));
            }
            let wait = left.min(self.io_timeout);
            let next = self
                .rt
                .block_on(tokio::time::timeout(wait, self.body.frame()));
            match next {
                Err(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no byte of the body within {} s", wait.as_secs_f64()),
                    ))
                }
                Ok(None) => self.done = true,
                Ok(Some(Ok(f))) => {
                    if let Ok(d) = f.into_data() {
                        self.buf = d;
                    }
                }
                Ok(Some(Err(e))) => {
                    let kind = if e.is_parse() {
                        io::ErrorKind::InvalidData
                    } else {
                        io::ErrorKind::UnexpectedEof
                    };
                    return Err(io::Error::new(kind, e));
                }
            }
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf.split_to(n));
        Ok(n)
    }
}

/// A connection whose writes each wait at most `io_timeout` (then `TimedOut`): a client that
/// stops reading cannot hold its slot. Reads are bounded by hyper's head timer and by
/// [`BodyReader`].
pub(super) struct Timed {
    s: TcpStream,
    io_timeout: Duration,
    wsleep: Option<Pin<Box<Sleep>>>,
}

impl Timed {
    fn new(s: TcpStream, io_timeout: Duration) -> Timed {
        Timed {
            s,
            io_timeout,
            wsleep: None,
        }
    }

    /// `Pending` from a write: time it out once it has waited `io_timeout`.
    fn stalled<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let t = self.io_timeout;
        let sleep = self
            .wsleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(t)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.wsleep = None;
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the client read nothing for {} s", t.as_secs_f64()),
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Timed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().s).poll_read(cx, buf)
    }
}

impl AsyncWrite for Timed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        match Pin::new(&mut me.s).poll_write(cx, buf) {
            Poll::Pending => me.stalled(cx),
            done => {
                me.wsleep = None;
                done
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        match Pin::new(&mut me.s).poll_write_vectored(cx, bufs) {
            Poll::Pending => me.stalled(cx),
            done => {
                me.wsleep = None;
                done
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.s.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        match Pin::new(&mut me.s).poll_flush(cx) {
            Poll::Pending => me.stalled(cx),
            done => {
                me.wsleep = None;
                done
            }
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().s).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{patch_head, started};
    use super::super::Running;
    use super::timed_out;
    use std::io::{BufRead, BufReader, Error, ErrorKind, Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    /// One response read off `s`: its head (lines, lower-cased) and its body, by
    /// `Content-Length`.
    fn response(s: &mut BufReader<TcpStream>) -> (String, Vec<u8>) {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            s.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line.to_ascii_lowercase());
        }
        let len = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "));
        let mut body = vec![0; len.map_or(0, |n| n.trim().parse().unwrap())];
        s.read_exact(&mut body).unwrap();
        (head, body)
    }

    fn connect(run: &Running) -> BufReader<TcpStream> {
        let s = TcpStream::connect(run.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        BufReader::new(s)
    }

    /// A request whose body the handler does not want is drained: a small one keeps the
    /// connection for the next request; one over 64 KiB is answered, then the connection is
    /// closed.
    #[test]
    fn a_drained_body_keeps_the_connection_unless_it_is_too_large() {
        let (_d, run, _c) = started(|_| {});
        let mut s = connect(&run);
        for _ in 0..2 {
            let req = "GET /stats HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
            s.get_mut().write_all(req.as_bytes()).unwrap();
            let (head, body) = response(&mut s);
            assert!(head.starts_with("http/1.1 200"), "{head}");
            assert!(!head.contains("connection: close"), "{head}");
            assert!(body.starts_with(b"{"), "{body:?}");
        }
        let big = 100 << 10;
        let req = format!("GET /stats HTTP/1.1\r\nContent-Length: {big}\r\n\r\n");
        s.get_mut().write_all(req.as_bytes()).unwrap();
        s.get_mut().write_all(&vec![b'x'; big]).unwrap();
        let (head, _) = response(&mut s);
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(head.contains("connection: close"), "{head}");
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty(), "{rest:?}");
    }

    /// A filed file is streamed whole, with its length announced, in pieces of 64 KiB.
    #[test]
    fn a_served_file_comes_whole_with_its_length() {
        let (d, run, _c) = started(|_| {});
        let inc = d.path().join("incidents/1-a");
        std::fs::create_dir_all(&inc).unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(inc.join("dump.bin"), &data).unwrap();
        let mut s = connect(&run);
        let req = "GET /incidents/1-a/dump.bin HTTP/1.1\r\n\r\n";
        s.get_mut().write_all(req.as_bytes()).unwrap();
        let (head, body) = response(&mut s);
        assert!(head.contains("content-length: 200000\r\n"), "{head}");
        assert!(body == data);
        s.get_mut().write_all(req.as_bytes()).unwrap();
        assert!(
            response(&mut s).1 == data,
            "the connection serves the next request"
        );
    }

    /// A PATCH whose declared body would go past the upload's length is refused (413) by its
    /// `Content-Length`, and none of it is stored (read as it came, it would have been cut at
    /// the tenth byte, with those ten stored).
    #[test]
    fn a_patch_declared_past_the_upload_length_is_refused_at_once() {
        let (_d, run, c) = started(|_| {});
        let url = c
            .create(10, &[("incident", "p-1"), ("kind", "mini.gz")])
            .unwrap();
        let mut s = connect(&run);
        s.get_mut()
            .write_all(patch_head(&url, 11).as_bytes())
            .unwrap();
        s.get_mut().write_all(b"0123456789+").unwrap();
        let (head, body) = response(&mut s);
        assert!(head.starts_with("http/1.1 413"), "{head}");
        assert_eq!(body, b"body past Upload-Length");
        assert_eq!(c.head(&url).unwrap().unwrap().offset, 0);
    }

    /// A body that stopped coming (a read's deadline) is logged as a timeout; other errors are not.
    #[test]
    fn only_a_deadline_s_errors_are_timeouts() {
        for k in [
            ErrorKind::WouldBlock,
            ErrorKind::TimedOut,
            ErrorKind::Interrupted,
        ] {
            assert!(timed_out(&Error::from(k)), "{k:?}");
        }
        for k in [
            ErrorKind::Other,
            ErrorKind::UnexpectedEof,
            ErrorKind::InvalidData,
        ] {
            assert!(!timed_out(&Error::from(k)), "{k:?}");
        }
    }
}
