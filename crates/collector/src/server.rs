//! The tus 1.0 protocol (core + creation) and the collector's few other routes, one connection
//! per thread: request heads and bodies read with [`http`], uploads created and appended to,
//! their offsets answered, and finished uploads handed to [`filing`](super::filing).
#![forbid(unsafe_code)]

use super::filing::{finish, load_info, save_info, upload_paths, UploadInfo};
use super::limits::{with_upload, Deadline};
use super::{http, pages, safe_name, Shared};
use crate::http::{Body, Framing, Request};
use crate::metadata::decode_metadata;
use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The `Retry-After` of an upload refused for the disk quota, in seconds.
const QUOTA_RETRY_SECS: u64 = 300;

pub(super) fn tus_headers() -> Vec<(&'static str, String)> {
    vec![("Tus-Resumable", "1.0.0".to_string())]
}

/// The headers of an HTML page: its type, and a policy that lets it load nothing (the page
/// carries the same in a `<meta>`, for a copy opened from disk).
fn html_headers() -> Vec<(&'static str, String)> {
    vec![
        ("Content-Type", "text/html; charset=utf-8".into()),
        ("X-Content-Type-Options", "nosniff".into()),
        ("Content-Security-Policy", crate::html::csp()),
    ]
}

/// Serve one connection: requests one after another while it is kept alive, each within its
/// deadlines ([`Deadline`]).
pub(super) fn connection(stream: TcpStream, sh: &Shared) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(sh.cfg.io_timeout));
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "a client".to_string(), |a| a.to_string());
    let Ok(wr) = stream.try_clone() else {
        return;
    };
    let mut w = io::BufWriter::new(wr);
    let wait = Duration::from_millis(100);
    let mut r = BufReader::with_capacity(64 * 1024, Deadline::new(stream, wait));
    loop {
        // Wait for the next request, checking the stop flag.
        r.get_mut().set(wait, None);
        let idle = Instant::now();
        loop {
            match r.fill_buf() {
                Ok([]) => return,
                Ok(_) => break,
                Err(e) if timed_out(&e) => {
                    if sh.stop.load(Ordering::SeqCst) || idle.elapsed() > sh.cfg.idle_timeout {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
        let start = Instant::now();
        let head_by = start + sh.cfg.head_timeout.min(sh.cfg.request_timeout);
        r.get_mut().set(sh.cfg.io_timeout, Some(head_by));
        let req = match http::read_request(&mut r, 16 * 1024) {
            Ok(Some(q)) => q,
            Ok(None) => return,
            Err(e) if timed_out(&e) => {
                tracing::info!(
                    "collector: {peer}: no whole request head within {} s; connection closed",
                    sh.cfg.head_timeout.as_secs_f64()
                );
                return;
            }
            Err(e) => {
                let _ = http::write_response(
                    &mut w,
                    400,
                    &tus_headers(),
                    e.to_string().as_bytes(),
                    false,
                );
                return;
            }
        };
        r.get_mut()
            .set(sh.cfg.io_timeout, Some(start + sh.cfg.request_timeout));
        sh.counters.requests.fetch_add(1, Ordering::SeqCst);
        let keep = match handle(&req, &mut r, &mut w, sh) {
            Ok(k) => k && req.keep_alive(),
            Err(e) => {
                if timed_out(&e) {
                    tracing::info!(
                        "collector: {peer}: {} {} not whole within {} s ({e}); connection closed, an upload keeps what came",
                        req.method,
                        req.target,
                        sh.cfg.request_timeout.as_secs_f64()
                    );
                } else {
                    tracing::debug!("collector: {peer}: {} {}: {e}", req.method, req.target);
                }
                false
            }
        };
        if !keep || sh.stop.load(Ordering::SeqCst) {
            return;
        }
    }
}

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn respond(
    w: &mut impl Write,
    status: u16,
    extra: &[(&'static str, String)],
    body: &[u8],
    keep: bool,
) -> io::Result<bool> {
    let mut h = tus_headers();
    h.extend_from_slice(extra);
    http::write_response(w, status, &h, body, keep)?;
    Ok(keep)
}

/// Handle one request; Ok(keep-alive).
fn handle<R: BufRead, W: Write>(
    req: &Request,
    r: &mut R,
    w: &mut W,
    sh: &Shared,
) -> io::Result<bool> {
    let framing = match req.framing() {
        Ok(f) => f,
        Err(e) => return respond(w, 400, &[], e.to_string().as_bytes(), false),
    };
    let path = req.path().to_string();
    let uid = path.strip_prefix("/files/").unwrap_or("");
    match (req.method.as_str(), path.as_str()) {
        ("OPTIONS", _) => {
            let ok = Body::new(r, framing).drain(64 * 1024)?;
            respond(
                w,
                204,
                &[
                    ("Tus-Version", "1.0.0".into()),
                    ("Tus-Extension", "creation".into()),
                    ("Tus-Max-Size", sh.cfg.max_upload_bytes.to_string()),
                ],
                b"",
                ok,
            )
        }
        ("GET", "/" | "/index.html") => {
            let ok = Body::new(r, framing).drain(64 * 1024)?;
            let page = req
                .target
                .split_once('?')
                .and_then(|(_, q)| q.split('&').find_map(|kv| kv.strip_prefix("page=")))
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            let html = sh
                .index
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .render(page, sh.cfg.index_page);
            respond(w, 200, &html_headers(), html.as_bytes(), ok)
        }
        ("GET", "/leaks") => {
            let ok = Body::new(r, framing).drain(64 * 1024)?;
            let html = pages::leaks(&sh.index.lock().unwrap_or_else(|p| p.into_inner()));
            respond(w, 200, &html_headers(), html.as_bytes(), ok)
        }
        ("GET", "/stats") => {
            let ok = Body::new(r, framing).drain(64 * 1024)?;
            let s = serde_json::to_vec(&sh.counters.snapshot()).unwrap_or_default();
            respond(
                w,
                200,
                &[("Content-Type", "application/json".into())],
                &s,
                ok,
            )
        }
        ("GET", p) if p.starts_with("/incidents/") => {
            let ok = Body::new(r, framing).drain(64 * 1024)?;
            let mut parts = p["/incidents/".len()..].split('/');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(id), Some("" | "index.html"), None) => {
                    let page = {
                        let _one = sh.pages.lock().unwrap_or_else(|p| p.into_inner());
                        pages::incident(&sh.cfg.dir, id)
                    };
                    match page {
                        Some(html) => respond(w, 200, &html_headers(), html.as_bytes(), ok),
                        None => respond(w, 404, &[], b"not found", ok),
                    }
                }
                (Some(id), None, None) if safe_name(id) => respond(
                    w,
                    301,
                    &[("Location", format!("/incidents/{id}/"))],
                    b"",
                    ok,
                ),
                (Some(id), Some(f), None) if safe_name(id) && safe_name(f) => {
                    let p = sh.cfg.dir.join("incidents").join(id).join(f);
                    match std::fs::File::open(&p).and_then(|f| Ok((f.metadata()?.len(), f))) {
                        Ok((len, file)) => {
                            // Streamed: a large file never sits in memory whole.
                            let mut h = tus_headers();
                            h.push(("Content-Type", "application/octet-stream".into()));
                            http::write_head(w, 200, &h, len, ok)?;
                            let sent = io::copy(&mut file.take(len), w)?;
                            w.flush()?;
                            if sent < len {
                                // The file shrank: the announced length cannot be kept.
                                return Err(io::Error::new(
                                    io::ErrorKind::UnexpectedEof,
                                    format!("{}: {sent} of {len} bytes could be read", p.display()),
                                ));
                            }
                            Ok(ok)
                        }
                        Err(_) => respond(w, 404, &[], b"not found", ok),
                    }
                }
                _ => respond(w, 404, &[], b"not found", ok),
            }
        }
        ("POST", "/files" | "/files/") => create(req, framing, r, w, sh),
        ("HEAD", _) if safe_name(uid) => {
            let ok = Body::new(r, framing).drain(64 * 1024)?;
            with_upload(sh, uid, || head(uid, w, sh, ok))
        }
        ("PATCH", _) if safe_name(uid) => {
            with_upload(sh, uid, || patch(req, framing, uid, r, w, sh))
        }
        _ => {
            let ok = Body::new(r, framing).drain(64 * 1024)?;
            respond(w, 404, &[], b"not found", ok)
        }
    }
}

/// HEAD of upload `uid`: its offset (and SHA-256 once filed). Under the upload's lock.
fn head(uid: &str, w: &mut impl Write, sh: &Shared, ok: bool) -> io::Result<bool> {
    let (ip, bp) = upload_paths(sh, uid);
    let Ok(mut info) = load_info(&ip) else {
        return respond(w, 404, &[], b"", ok);
    };
    let got = received(&info, &bp);
    if !info.complete && got == Some(info.length) {
        // Every byte arrived but filing failed when the last came: file it now. Only
        // then does an answer with the full offset carry the SHA-256 that says it is
        // filed; a client that saw the full offset alone would take the file as stored
        // and drop its copy of a file the collector never filed.
        if let Err(e) = finish(&mut info, &bp, sh).and_then(|_| save_info(&ip, &info)) {
            return not_filed(w, &info, e, ok, false);
        }
    }
    let offset = got.unwrap_or(0);
    let mut h = vec![
        ("Upload-Offset", offset.to_string()),
        ("Upload-Length", info.length.to_string()),
        ("Cache-Control", "no-store".to_string()),
    ];
    if let Some(s) = info.sha256 {
        h.push(("Upload-Sha256", s));
    }
    respond(w, 200, &h, b"", ok)
}

fn create<R: BufRead, W: Write>(
    req: &Request,
    framing: Framing,
    r: &mut R,
    w: &mut W,
    sh: &Shared,
) -> io::Result<bool> {
    let ok = Body::new(r, framing).drain(64 * 1024)?;
    if req.header("tus-resumable") != Some("1.0.0") {
        return respond(w, 412, &[("Tus-Version", "1.0.0".into())], b"", ok);
    }
    let Some(length) = req
        .header("upload-length")
        .and_then(|v| v.trim().parse::<u64>().ok())
    else {
        return respond(w, 400, &[], b"Upload-Length required", ok);
    };
    if length > sh.cfg.max_upload_bytes {
        return respond(w, 413, &[], b"upload too large", ok);
    }
    let md: BTreeMap<String, String> = match req.header("upload-metadata").map(decode_metadata) {
        Some(Some(v)) => v.into_iter().collect(),
        Some(None) => return respond(w, 400, &[], b"bad Upload-Metadata", ok),
        None => BTreeMap::new(),
    };
    let incident = md.get("incident").cloned().unwrap_or_default();
    let kind = md.get("kind").cloned().unwrap_or_default();
    if !safe_name(&incident) || !safe_name(&kind) {
        return respond(w, 400, &[], b"metadata needs incident and kind", ok);
    }
    if let Err(full) = sh.quota.reserve(length) {
        // 503 with Retry-After: the client keeps its files and comes back (a 413 would make
        // it give the incident up).
        tracing::warn!(
            "collector: disk quota reached: {} holds or awaits {} of {} bytes (--max-disk-bytes); \
             the upload of {length} bytes for {incident}/{kind} is refused (503, Retry-After {QUOTA_RETRY_SECS} s), nothing stored",
            sh.cfg.dir.display(),
            full.used,
            full.max
        );
        let why = format!(
            "the collector's disk quota is reached ({} of {} bytes used or awaited; this upload needs {length}); try again later",
            full.used, full.max
        );
        let wait = [("Retry-After", QUOTA_RETRY_SECS.to_string())];
        return respond(w, 503, &wait, why.as_bytes(), ok);
    }
    let uid = format!(
        "{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    );
    let (ip, bp) = upload_paths(sh, &uid);
    let made = std::fs::File::create(&bp).and_then(|_| {
        save_info(
            &ip,
            &UploadInfo {
                length,
                incident,
                kind,
                metadata: md,
                received: 0,
                complete: false,
                sha256: None,
                corrupt: false,
            },
        )
    });
    if let Err(e) = made {
        let _ = std::fs::remove_file(&bp);
        sh.quota.release(length);
        return Err(e);
    }
    sh.counters.uploads_created.fetch_add(1, Ordering::SeqCst);
    respond(w, 201, &[("Location", format!("/files/{uid}"))], b"", ok)
}

/// Read and drop a refused PATCH's body (up to 16 MiB) so the client reads our answer rather
/// than a reset; keep the connection only if the whole body was read. The bytes count as
/// received (they crossed the wire) for the upload, if known.
#[allow(clippy::too_many_arguments)]
fn refuse<R: BufRead, W: Write>(
    r: &mut R,
    framing: Framing,
    w: &mut W,
    sh: &Shared,
    info: Option<(&Path, &mut UploadInfo)>,
    status: u16,
    extra: &[(&'static str, String)],
    body: &[u8],
) -> io::Result<bool> {
    let mut b = Body::new(r, framing);
    let limit = 16u64 << 20;
    let n = io::copy(&mut (&mut b).take(limit), &mut io::sink()).unwrap_or(0);
    let mut one = [0u8; 1];
    let whole = n < limit && matches!(b.read(&mut one), Ok(0));
    sh.counters.patch_bytes.fetch_add(n, Ordering::SeqCst);
    if let Some((ip, info)) = info {
        if n > 0 {
            info.received += n;
            let _ = save_info(ip, info);
        }
    }
    respond(w, status, extra, body, whole)
}

fn patch<R: BufRead, W: Write>(
    req: &Request,
    framing: Framing,
    uid: &str,
    r: &mut R,
    w: &mut W,
    sh: &Shared,
) -> io::Result<bool> {
    let (ip, bp) = upload_paths(sh, uid);
    let Ok(mut info) = load_info(&ip) else {
        return refuse(r, framing, w, sh, None, 404, &[], b"");
    };
    if req.header("content-type") != Some("application/offset+octet-stream") {
        return refuse(r, framing, w, sh, Some((&ip, &mut info)), 415, &[], b"");
    }
    let Some(offset) = req
        .header("upload-offset")
        .and_then(|v| v.trim().parse::<u64>().ok())
    else {
        let why = b"Upload-Offset required";
        return refuse(r, framing, w, sh, Some((&ip, &mut info)), 400, &[], why);
    };
    let current = received(&info, &bp).unwrap_or(0);
    if offset != current {
        let extra = [("Upload-Offset", current.to_string())];
        return refuse(r, framing, w, sh, Some((&ip, &mut info)), 409, &extra, b"");
    }
    if let Framing::Length(n) = framing {
        if offset + n > info.length {
            let why = b"body past Upload-Length";
            return refuse(r, framing, w, sh, Some((&ip, &mut info)), 413, &[], why);
        }
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(&bp)?;
    let mut body = Body::new(r, framing);
    let mut buf = vec![0u8; 64 * 1024];
    let mut written = 0u64;
    let room = info.length - offset;
    let res: io::Result<()> = loop {
        let want = buf
            .len()
            .min((room - written + 1).min(buf.len() as u64) as usize);
        match body.read(&mut buf[..want]) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                if written + n as u64 > room {
                    break Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "body past Upload-Length",
                    ));
                }
                if let Err(e) = f.write_all(&buf[..n]) {
                    break Err(e);
                }
                written += n as u64;
                sh.counters
                    .patch_bytes
                    .fetch_add(n as u64, Ordering::SeqCst);
            }
            Err(e) => break Err(e),
        }
    };
    // Keep every byte that arrived, even if the connection was cut.
    let _ = f.sync_data();
    drop(f);
    info.received += written;
    let new_offset = offset + written;
    let mut extra = vec![("Upload-Offset", new_offset.to_string())];
    if new_offset == info.length && res.is_ok() {
        match finish(&mut info, &bp, sh) {
            Ok(sha) => extra.push(("Upload-Sha256", sha)),
            Err(e) => {
                save_info(&ip, &info)?;
                return not_filed(w, &info, e, true, true);
            }
        }
    }
    save_info(&ip, &info)?;
    match res {
        Ok(()) => respond(w, 204, &extra, b"", true),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            respond(w, 400, &extra, e.to_string().as_bytes(), false)
        }
        Err(e) => Err(e),
    }
}

/// The bytes of an upload received so far: all of them once it is filed, else its blob's
/// length (`None` if the blob is missing).
fn received(info: &UploadInfo, bp: &Path) -> Option<u64> {
    if info.complete {
        Some(info.length)
    } else {
        std::fs::metadata(bp).map(|m| m.len()).ok()
    }
}

/// Answer 500 for an upload that has every byte but could not be filed: the client keeps its
/// copy and asks again later. (`body`: whether the answer may have one; a HEAD's may not.)
fn not_filed(
    w: &mut impl Write,
    info: &UploadInfo,
    e: io::Error,
    keep: bool,
    body: bool,
) -> io::Result<bool> {
    tracing::warn!(
        "collector: {}/{}: every byte received but not filed: {e}; filed when the client asks again",
        info.incident,
        info.kind
    );
    let why: &[u8] = if body {
        b"received but not filed yet; ask again later"
    } else {
        b""
    };
    respond(w, 500, &[], why, keep)
}

#[cfg(test)]
mod tests {
    use super::super::{Collector, Config, Running};
    use super::*;
    use oomguard::upload::tus::{Client, TusError};
    use sha2::{Digest, Sha256};

    /// A collector on loopback over a fresh directory, and a client of it.
    fn started() -> (tempfile::TempDir, Running, Client) {
        let d = tempfile::tempdir().unwrap();
        let run = Collector::bind("127.0.0.1:0", Config::new(d.path()))
            .unwrap()
            .spawn();
        let t = Duration::from_secs(5);
        let c = Client::new(&run.endpoint(), t, t, 1 << 20);
        (d, run, c)
    }

    #[test]
    fn protocol_answers() {
        let (d, run, c) = started();
        let data = vec![7u8; 2 << 20];
        let sha = hex::encode(Sha256::digest(&data));
        let md = [
            ("incident", "i-1"),
            ("kind", "mini.gz"),
            ("sha256", &sha[..]),
        ];
        let url = c.create(data.len() as u64, &md).unwrap();
        // A wrong offset with a large body: a clean 409, not a reset.
        let e = c.patch(&url, 5, &mut &data[..], data.len() as u64 - 5);
        assert!(
            matches!(e, Err(TusError::Status { status: 409, .. })),
            "{e:?}"
        );
        let p = c.patch(&url, 0, &mut &data[..1000], 1000).unwrap();
        assert_eq!((p.offset, p.sha256), (1000, None));
        let h = c.head(&url).unwrap().unwrap();
        assert_eq!((h.offset, h.length), (1000, Some(data.len() as u64)));
        let p = c
            .patch(&url, 1000, &mut &data[1000..], data.len() as u64 - 1000)
            .unwrap();
        assert_eq!(p.offset, data.len() as u64);
        assert_eq!(p.sha256.as_deref(), Some(&sha[..]));
        assert!(d.path().join("incidents/i-1/mini.hprof.gz").exists());
        // Unknown upload, oversized upload, bad metadata.
        assert_eq!(c.head(&format!("{}nope", run.endpoint())).unwrap(), None);
        let t = Duration::from_secs(5);
        let e = Client::new(&run.endpoint(), t, t, 1).create(2 << 30, &md);
        assert!(
            matches!(e, Err(TusError::Status { status: 413, .. })),
            "{e:?}"
        );
        let e = c.create(1, &[("incident", "../x"), ("kind", "k")]);
        assert!(
            matches!(e, Err(TusError::Status { status: 400, .. })),
            "{e:?}"
        );
        let st = run.stop();
        assert_eq!((st.files_completed, st.corrupt, st.duplicates), (1, 0, 0));
        // The refused body crossed the wire too: it is counted.
        assert_eq!(st.patch_bytes, 2 * data.len() as u64 - 5);
    }

    /// Every byte of an upload arrived but filing it failed (here its incident's directory
    /// cannot be made: a file holds its name). Neither the PATCH that brought the last byte nor
    /// a HEAD may then say the full offset: a client takes that as stored and drops its copy.
    /// Both answer 500 until filing works; then the HEAD files it and says its SHA-256.
    #[test]
    fn an_upload_not_filed_is_never_acknowledged() {
        let (d, run, c) = started();
        let data = vec![9u8; 100_000];
        let sha = hex::encode(Sha256::digest(&data));
        let md = [
            ("incident", "i-2"),
            ("kind", "mini.gz"),
            ("sha256", &sha[..]),
        ];
        let blocker = d.path().join("incidents/i-2");
        std::fs::create_dir_all(blocker.parent().unwrap()).unwrap();
        std::fs::write(&blocker, b"in the way").unwrap();
        let url = c.create(data.len() as u64, &md).unwrap();
        let p = c.patch(&url, 0, &mut &data[..], data.len() as u64);
        assert!(
            matches!(p, Err(TusError::Status { status: 500, .. })),
            "{p:?}"
        );
        for _ in 0..2 {
            let h = c.head(&url);
            assert!(
                matches!(h, Err(TusError::Status { status: 500, .. })),
                "{h:?}"
            );
        }
        std::fs::remove_file(&blocker).unwrap();
        let h = c.head(&url).unwrap().unwrap();
        assert_eq!(h.offset, data.len() as u64);
        assert_eq!(h.sha256.as_deref(), Some(&sha[..]));
        assert_eq!(
            std::fs::read(d.path().join("incidents/i-2/mini.hprof.gz")).unwrap(),
            data
        );
        let st = run.stop();
        assert_eq!((st.files_completed, st.corrupt, st.duplicates), (1, 0, 0));
    }
}
