use super::*;
use std::io::Write;
use std::net::TcpListener;
use std::sync::mpsc;

/// A server on 127.0.0.1 that reads one request (head, then `read_body` bytes), sends `answer`
/// and closes; the request it saw comes back on the channel.
fn serve(answer: &'static [u8], read_body: usize) -> (String, mpsc::Receiver<Vec<u8>>) {
    serve_on(TcpListener::bind("127.0.0.1:0").unwrap(), answer, read_body)
}

/// [`serve`] on a listener of the caller's.
fn serve_on(
    l: TcpListener,
    answer: &'static [u8],
    read_body: usize,
) -> (String, mpsc::Receiver<Vec<u8>>) {
    let (base, seen) = serve_each(l, vec![answer], read_body);
    (format!("{base}/files/x?y=1"), seen)
}

/// A server on `l` that takes a connection for each answer in turn: it reads the request (its
/// head, then `read_body` bytes), sends the answer and closes. Each request it read comes back
/// on the channel. Returns `http://` and its address. (The tus client's tests use it too.)
pub(crate) fn serve_each(
    l: TcpListener,
    answers: Vec<&'static [u8]>,
    read_body: usize,
) -> (String, mpsc::Receiver<Vec<u8>>) {
    let base = format!("http://{}", l.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for answer in answers {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut seen = Vec::new();
            loop {
                let mut l = Vec::new();
                if r.read_until(b'\n', &mut l).unwrap_or(0) == 0 || l == b"\r\n" {
                    break;
                }
                seen.extend(l);
            }
            seen.extend(b"\r\n");
            let mut body = vec![0u8; read_body];
            let _ = r.read_exact(&mut body);
            seen.extend(body);
            let _ = (&s).write_all(answer);
            let _ = tx.send(seen);
        }
    });
    (base, rx)
}

fn req(url: &str) -> Request<'_> {
    Request::new("GET", url, Duration::from_secs(10))
}

#[test]
fn only_plain_http_to_loopback_is_contacted() {
    // The name the log lines give it.
    assert_eq!(Loopback.name(), "loopback");
    for url in [
        "https://127.0.0.1:9/x",
        "http://192.0.2.1:9/x",
        "http://collector.example/x",
        "ftp://127.0.0.1/x",
    ] {
        let e = Loopback.exchange(&req(url)).unwrap_err();
        assert!(
            e.what
                .contains("only speaks plain http:// to a loopback address"),
            "{url}: {e}"
        );
    }
}

#[test]
fn a_file_range_goes_out_and_the_wanted_headers_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("mini.gz");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&f, &data).unwrap();
    let (url, seen) = serve(
        b"HTTP/1.1 204 No Content\r\nUpload-Offset: 150100\r\nX-Other: 1\r\n\r\n",
        150_000,
    );
    let mut r = Request::new("PATCH", &url, Duration::from_secs(10))
        .header("Upload-Offset", "100")
        .header("Tus-Resumable", "1.0.0");
    r.body = Body::File {
        path: &f,
        offset: 100,
        len: 150_000,
    };
    r.want = &["upload-offset"];
    let resp = Loopback.exchange(&r).unwrap();
    assert_eq!(resp.status, 204);
    assert_eq!(resp.sent, 150_000);
    assert_eq!(resp.header("Upload-Offset"), Some("150100"));
    assert_eq!(resp.headers.len(), 1, "{:?}", resp.headers);
    let seen = seen.recv().unwrap();
    let head = head_of(&seen);
    assert!(
        head.starts_with("PATCH /files/x?y=1 HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(head.contains("Content-Length: 150000\r\n"), "{head}");
    assert!(head.contains("Tus-Resumable: 1.0.0\r\n"), "{head}");
    assert_eq!(&seen[head.len()..], &data[100..150_100]);
}

#[test]
fn bodies_are_read_by_length_chunks_or_close_and_capped() {
    let (url, _s) = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA", 0);
    assert_eq!(Loopback.exchange(&req(&url)).unwrap().body, b"hello");
    let (url, _s) = serve(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
        0,
    );
    assert_eq!(Loopback.exchange(&req(&url)).unwrap().body, b"abcde");
    let (url, _s) = serve(b"HTTP/1.0 500 Oops\r\n\r\nuntil the close", 0);
    let r = Loopback.exchange(&req(&url)).unwrap();
    assert_eq!(
        (r.status, r.body.as_slice()),
        (500, &b"until the close"[..])
    );
    let (url, _s) = serve(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789",
        0,
    );
    let mut capped = req(&url);
    capped.max_body = 4;
    let r = Loopback.exchange(&capped).unwrap();
    assert_eq!((r.body.as_slice(), r.truncated), (&b"0123"[..], true));
    let (url, _s) = serve(b"SSH-2.0-OpenSSH\r\n\r\n", 0);
    let e = Loopback.exchange(&req(&url)).unwrap_err();
    assert!(
        e.what
            .contains("does not start with an HTTP/1.x status line"),
        "{e}"
    );
}

/// A server that answers 413 after the head and closes without reading the body: its answer
/// is the result, not the write error, with the bytes that did go out.
#[test]
fn an_early_answer_beats_the_write_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("big");
    std::fs::write(&f, vec![7u8; 8 << 20]).unwrap();
    let (url, _s) = serve(b"HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\n\r\nbig", 0);
    let mut r = Request::new("PATCH", &url, Duration::from_secs(10));
    r.body = Body::File {
        path: &f,
        offset: 0,
        len: 8 << 20,
    };
    let resp = Loopback.exchange(&r).unwrap();
    assert_eq!(resp.status, 413);
    assert!(resp.sent < 8 << 20, "{}", resp.sent);
}

/// A server that accepts and never answers: the exchange ends at its deadline.
#[test]
fn a_silent_server_costs_the_deadline_and_no_more() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/p", l.local_addr().unwrap());
    let hold = std::thread::spawn(move || {
        let c = l.accept();
        std::thread::sleep(Duration::from_secs(2));
        drop(c);
    });
    let mut r = req(&url);
    r.deadline = Duration::from_millis(300);
    let t = Instant::now();
    let e = Loopback.exchange(&r).unwrap_err();
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    assert!(e.what.contains("reading the answer"), "{e}");
    hold.join().unwrap();
}

/// The head of a request [`serve`] saw (its ASCII bytes, the blank line included).
fn head_of(seen: &[u8]) -> String {
    let split = seen.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    String::from_utf8_lossy(&seen[..split]).into_owned()
}

/// The head says the body's length (none for a GET or HEAD without one), names the host with
/// its port, and keeps the twin's own Host, Content-Length and Connection over the caller's.
#[test]
fn the_head_says_the_length_and_the_host_and_keeps_its_own_framing() {
    let (url, seen) = serve(b"HTTP/1.1 204 No Content\r\n\r\n", 0);
    let port = url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let r = req(&url)
        .header("Host", "collector.example")
        .header("Content-Length", "99")
        .header("Connection", "keep-alive")
        .header("X-Kept", "1");
    assert_eq!(Loopback.exchange(&r).unwrap().status, 204);
    let head = head_of(&seen.recv().unwrap());
    assert!(head.starts_with("GET /files/x?y=1 HTTP/1.1\r\n"), "{head}");
    assert!(
        head.contains(&format!("\r\nHost: 127.0.0.1:{port}\r\n")),
        "{head}"
    );
    assert!(head.contains("\r\nConnection: close\r\n"), "{head}");
    assert!(head.contains("\r\nX-Kept: 1\r\n"), "{head}");
    for gone in ["collector.example", "Content-Length", "keep-alive"] {
        assert!(!head.contains(gone), "{gone} in {head}");
    }
    // A POST without a body says so; a GET with one says how long.
    let (url, seen) = serve(b"HTTP/1.1 204 No Content\r\n\r\n", 0);
    let mut r = req(&url);
    r.method = "POST";
    Loopback.exchange(&r).unwrap();
    assert!(head_of(&seen.recv().unwrap()).contains("\r\nContent-Length: 0\r\n"));
    let (url, seen) = serve(b"HTTP/1.1 204 No Content\r\n\r\n", 3);
    let mut r = req(&url);
    r.body = Body::Bytes(b"abc");
    assert_eq!(Loopback.exchange(&r).unwrap().sent, 3);
    let seen = seen.recv().unwrap();
    assert!(head_of(&seen).contains("\r\nContent-Length: 3\r\n"));
    assert!(seen.ends_with(b"\r\n\r\nabc"));
}

/// A header that would end its line, or a name with a colon, is refused before anything is
/// written: it could smuggle a second header or request.
#[test]
fn a_header_that_would_split_the_head_is_refused() {
    for (k, v) in [
        ("X-A", "1\r\nX-Injected: 2"),
        ("X-A", "1\nX-Injected: 2"),
        ("X-A\r\nX-Injected", "2"),
        ("X-A: 1\r\nX", "2"),
        ("X:A", "1"),
    ] {
        // A server that takes the connection and closes it unanswered.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/p", l.local_addr().unwrap());
        let t = std::thread::spawn(move || drop(l.accept()));
        let e = Loopback.exchange(&req(&url).header(k, v)).unwrap_err();
        assert!(
            e.what.contains("is not a valid header"),
            "{k:?}: {v:?}: {e}"
        );
        t.join().unwrap();
    }
}

/// IPv6's loopback and `localhost` are reached; an IPv6 address off this machine is refused
/// like an IPv4 one.
#[test]
fn ipv6_loopback_and_localhost_are_reached_and_other_ipv6_hosts_refused() {
    let e = Loopback
        .exchange(&req("http://[2001:db8::1]:9/x"))
        .unwrap_err();
    assert!(
        e.what
            .contains("will not reach a host that is not loopback"),
        "{e}"
    );
    let (url, _s) = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nv4", 0);
    let local = url.replace("127.0.0.1", "localhost");
    assert_eq!(Loopback.exchange(&req(&local)).unwrap().body, b"v4");
    match TcpListener::bind("[::1]:0") {
        Ok(l) => {
            let (url, _s) = serve_on(l, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nv6", 0);
            assert!(url.starts_with("http://[::1]:"), "{url}");
            assert_eq!(Loopback.exchange(&req(&url)).unwrap().body, b"v6");
        }
        // A host without IPv6 cannot serve the case: said, not hidden.
        Err(e) => eprintln!("no IPv6 loopback here ({e}): [::1] not tried"),
    }
}

/// A server that reads the whole body and closes without a word: the error says the answer is
/// missing, not that the file ran short.
#[test]
fn a_whole_body_sent_then_a_close_is_an_answer_missing() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("mini.gz");
    std::fs::write(&f, vec![1u8; 100_000]).unwrap();
    let (url, seen) = serve(b"", 100_000);
    let mut r = Request::new("PATCH", &url, Duration::from_secs(10));
    r.body = Body::File {
        path: &f,
        offset: 0,
        len: 100_000,
    };
    let e = Loopback.exchange(&r).unwrap_err();
    assert!(
        e.what
            .contains("the server closed the connection without an answer"),
        "{e}"
    );
    assert_eq!(e.sent, 100_000);
    assert!(seen.recv().unwrap().ends_with(&[1u8; 10]));
}

/// A long head is read up to 64 KiB; past that the answer is refused, not buffered on.
#[test]
fn a_head_is_read_up_to_64_kib() {
    let long: &'static [u8] = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nX-Long: {}\r\nContent-Length: 2\r\n\r\nok",
            "a".repeat(60_000)
        )
        .into_bytes()
        .into_boxed_slice(),
    );
    let (url, _s) = serve(long, 0);
    assert_eq!(Loopback.exchange(&req(&url)).unwrap().body, b"ok");
    let longer: &'static [u8] = Box::leak(
        format!("HTTP/1.1 200 OK\r\nX-Long: {}\r\n\r\n", "a".repeat(70_000))
            .into_bytes()
            .into_boxed_slice(),
    );
    let (url, _s) = serve(longer, 0);
    let e = Loopback.exchange(&req(&url)).unwrap_err();
    assert!(e.what.contains("head is longer than 65536 bytes"), "{e}");
    // The bound is the whole head's, not each line's: 20 lines of 4,000 bytes.
    let many: &'static [u8] = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\n{}\r\n",
            format!("X-Long: {}\r\n", "a".repeat(4_000)).repeat(20)
        )
        .into_bytes()
        .into_boxed_slice(),
    );
    let (url, _s) = serve(many, 0);
    let e = Loopback.exchange(&req(&url)).unwrap_err();
    assert!(e.what.contains("head is longer than 65536 bytes"), "{e}");
}

/// Only an HTTP/1.x status line with a status from 100 to 599 starts an answer.
#[test]
fn an_answer_starts_with_an_http_1_status_line() {
    for bad in [
        &b"HTTP/2 200 OK\r\n\r\n"[..],
        b"ICY 200 OK\r\n\r\n",
        b"HTTP/1.1 600 Odd\r\n\r\n",
        b"HTTP/1.1 99 Odd\r\n\r\n",
    ] {
        let (url, _s) = serve(bad, 0);
        let e = Loopback.exchange(&req(&url)).unwrap_err();
        assert!(
            e.what
                .contains("does not start with an HTTP/1.x status line"),
            "{}: {e}",
            String::from_utf8_lossy(bad)
        );
    }
    let (url, _s) = serve(b"HTTP/1.0 599 Last\r\n\r\n", 0);
    assert_eq!(Loopback.exchange(&req(&url)).unwrap().status, 599);
}

/// A body of exactly the most kept is whole, not cut short.
#[test]
fn a_body_of_exactly_the_most_kept_is_not_truncated() {
    let (url, _s) = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n0123", 0);
    let mut r = req(&url);
    r.max_body = 4;
    let r = Loopback.exchange(&r).unwrap();
    assert_eq!((r.body.as_slice(), r.truncated), (&b"0123"[..], false));
}

/// An answer to a HEAD, a 204 or a 304 has no body whatever its `Content-Length` says: the
/// exchange ends with its head, though the server keeps the connection open (until told the
/// exchange is over; a client waiting for the body would meet its deadline instead).
#[test]
fn answers_without_a_body_end_with_their_head() {
    for (method, answer) in [
        (
            "HEAD",
            "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nUpload-Offset: 7\r\n\r\n",
        ),
        (
            "GET",
            "HTTP/1.1 204 No Content\r\nContent-Length: 1000\r\nUpload-Offset: 7\r\n\r\n",
        ),
        (
            "GET",
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 1000\r\nUpload-Offset: 7\r\n\r\n",
        ),
    ] {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/p", l.local_addr().unwrap());
        let (over, told) = mpsc::channel::<()>();
        let hold = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 && !line.ends_with("\r\n\r\n") {}
            (&s).write_all(answer.as_bytes()).unwrap();
            let _ = told.recv_timeout(Duration::from_secs(10));
        });
        let mut r = req(&url);
        r.method = method;
        r.want = &["Upload-Offset"];
        r.deadline = Duration::from_secs(2);
        let resp = Loopback
            .exchange(&r)
            .unwrap_or_else(|e| panic!("{method}: {answer:?}: {e}"));
        assert_eq!(resp.header("Upload-Offset"), Some("7"));
        assert!(resp.body.is_empty());
        over.send(()).unwrap();
        hold.join().unwrap();
    }
}
