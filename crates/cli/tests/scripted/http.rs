//! Test-only HTTP/1.1 framing for the scripted server: request heads (bounded), bodies by
//! `Content-Length` or chunked encoding (bounded), and responses. (The collector itself is on
//! hyper; this stays hand-written so the scripted server can cut a body or stall at will.)
//!
//! Invariants: a request head is never read past `max_head` bytes; a body never yields more
//! than it declared; nothing panics on malformed input (errors are `io::ErrorKind::InvalidData`).

use std::io::{self, BufRead, Read, Write};

/// A request head.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The request target (path and query).
    pub target: String,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// How the body is framed.
    pub fn framing(&self) -> io::Result<Framing> {
        if let Some(te) = self.header("transfer-encoding") {
            if te.trim().eq_ignore_ascii_case("chunked") {
                return Ok(Framing::Chunked);
            }
            return Err(bad(format!("unsupported Transfer-Encoding {te:?}")));
        }
        match self.header("content-length") {
            Some(v) => v
                .trim()
                .parse::<u64>()
                .map(Framing::Length)
                .map_err(|_| bad(format!("bad Content-Length {v:?}"))),
            None => Ok(Framing::Length(0)),
        }
    }

    /// Whether the client wants the connection kept open.
    pub fn keep_alive(&self) -> bool {
        !self
            .header("connection")
            .is_some_and(|c| c.to_ascii_lowercase().contains("close"))
    }
}

/// Body framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Length(u64),
    Chunked,
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn read_line(r: &mut impl BufRead, budget: &mut usize) -> io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = r.take(*budget as u64 + 1).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if n > *budget {
        return Err(bad("request head too large".into()));
    }
    *budget -= n;
    if !buf.ends_with(b"\n") {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed inside a request head",
        ));
    }
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| bad("request head is not UTF-8".into()))
}

/// Read one request head; `None` on a clean end of stream before it starts.
pub fn read_request(r: &mut impl BufRead, max_head: usize) -> io::Result<Option<Request>> {
    let mut budget = max_head;
    let line = loop {
        match read_line(r, &mut budget)? {
            None => return Ok(None),
            Some(l) if l.is_empty() => continue, // tolerate stray CRLF between requests
            Some(l) => break l,
        }
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(bad(format!("bad request line {line:?}")));
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Err(bad(format!("bad request line {line:?}")));
    }
    let mut headers = Vec::new();
    loop {
        let Some(l) = read_line(r, &mut budget)? else {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed inside a request head",
            ));
        };
        if l.is_empty() {
            break;
        }
        let Some((k, v)) = l.split_once(':') else {
            return Err(bad(format!("bad header line {l:?}")));
        };
        if headers.len() >= 100 {
            return Err(bad("too many headers".into()));
        }
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    Ok(Some(Request {
        method: method.to_string(),
        target: target.to_string(),
        headers,
    }))
}

/// A request body reader: yields exactly the framed bytes, then end of stream.
pub struct Body<'a, R: BufRead> {
    r: &'a mut R,
    framing: Framing,
    /// Bytes left in the body (Length) or the current chunk (Chunked).
    left: u64,
    done: bool,
}

impl<'a, R: BufRead> Body<'a, R> {
    pub fn new(r: &'a mut R, framing: Framing) -> Body<'a, R> {
        let left = match framing {
            Framing::Length(n) => n,
            Framing::Chunked => 0,
        };
        Body {
            r,
            framing,
            left,
            done: matches!(framing, Framing::Length(0)),
        }
    }

    fn next_chunk(&mut self) -> io::Result<()> {
        let mut budget = 1024;
        let line = read_line(self.r, &mut budget)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "body cut short"))?;
        let size = line.split(';').next().unwrap_or("").trim();
        let n =
            u64::from_str_radix(size, 16).map_err(|_| bad(format!("bad chunk size {line:?}")))?;
        if n == 0 {
            // Trailers until an empty line.
            loop {
                let mut budget = 8192;
                match read_line(self.r, &mut budget)? {
                    Some(l) if l.is_empty() => break,
                    Some(_) => continue,
                    None => break,
                }
            }
            self.done = true;
        }
        self.left = n;
        Ok(())
    }

    /// Read and drop the rest of the body, up to `limit` bytes; false if more remained.
    pub fn drain(&mut self, limit: u64) -> io::Result<bool> {
        io::copy(&mut (&mut *self).take(limit), &mut io::sink())?;
        let mut one = [0u8; 1];
        Ok(self.read(&mut one)? == 0)
    }
}

impl<R: BufRead> Read for Body<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            match self.framing {
                Framing::Length(_) => {
                    self.done = true;
                    return Ok(0);
                }
                Framing::Chunked => {
                    self.next_chunk()?;
                    if self.done {
                        return Ok(0);
                    }
                }
            }
        }
        let want = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = self.r.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed inside a request body",
            ));
        }
        self.left -= n as u64;
        if self.left == 0 && self.framing == Framing::Chunked {
            let mut crlf = Vec::new();
            (&mut *self.r).take(2).read_until(b'\n', &mut crlf)?;
            if crlf != b"\r\n" && crlf != b"\n" {
                return Err(bad("chunk not followed by CRLF".into()));
            }
        } else if self.left == 0 {
            self.done = true;
        }
        Ok(n)
    }
}

/// The reason phrase of a status code.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        412 => "Precondition Failed",
        413 => "Request Entity Too Large",
        415 => "Unsupported Media Type",
        429 => "Too Many Requests",
        460 => "Checksum Mismatch",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Write a whole response.
pub fn write_response(
    w: &mut impl Write,
    status: u16,
    headers: &[(&str, String)],
    body: &[u8],
    keep_alive: bool,
) -> io::Result<()> {
    write_head(w, status, headers, body.len() as u64, keep_alive)?;
    w.write_all(body)?;
    w.flush()
}

/// Write a response head announcing a body of `len` bytes, which the caller then writes.
pub fn write_head(
    w: &mut impl Write,
    status: u16,
    headers: &[(&str, String)],
    len: u64,
    keep_alive: bool,
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (k, v) in headers {
        head.push_str(k);
        head.push_str(": ");
        head.push_str(v);
        head.push_str("\r\n");
    }
    head.push_str(&format!("Content-Length: {len}\r\n"));
    if !keep_alive {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    #[test]
    fn parses_heads_and_bodies() {
        let raw = b"PATCH /files/x HTTP/1.1\r\nContent-Length: 5\r\nUpload-Offset: 3\r\n\r\nhelloGET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        let mut r = BufReader::new(&raw[..]);
        let q = read_request(&mut r, 1024).unwrap().unwrap();
        assert_eq!(q.method, "PATCH");
        assert_eq!(q.path(), "/files/x");
        assert_eq!(q.header("upload-offset"), Some("3"));
        let mut s = String::new();
        Body::new(&mut r, q.framing().unwrap())
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "hello");
        let q = read_request(&mut r, 1024).unwrap().unwrap();
        assert_eq!(q.framing().unwrap(), Framing::Chunked);
        let mut s = String::new();
        Body::new(&mut r, Framing::Chunked)
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "abcde");
        assert!(read_request(&mut r, 1024).unwrap().is_none());
    }

    #[test]
    fn bounds_and_garbage() {
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(5000));
        let mut r = BufReader::new(big.as_bytes());
        assert!(read_request(&mut r, 1024).is_err());
        for g in [
            &b"\x00\x01\x02\r\n\r\n"[..],
            b"GET\r\n\r\n",
            b"GET / HTTP/1.1\r\nno colon\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        ] {
            let mut r = BufReader::new(g);
            let q = read_request(&mut r, 1024);
            assert!(q.is_err() || q.unwrap().unwrap().framing().is_err());
        }
        // A body cut short is an error, not a short success.
        let mut r = BufReader::new(&b"abc"[..]);
        let mut v = Vec::new();
        assert!(Body::new(&mut r, Framing::Length(10))
            .read_to_end(&mut v)
            .is_err());
    }
}
