//! The tus 1.0 protocol (core + creation) and the collector's few other routes, as plain
//! functions from a request to a [`Reply`]: uploads created and appended to, their offsets
//! answered, and finished uploads handed to [`filing`](super::filing). The HTTP/1.1 side
//! (hyper) is [`conn`](super::conn); a handler runs on a blocking thread and reads its body as
//! a [`BodyReader`], so file I/O never stalls the runtime.
//!
//! Invariants: a handler never reads more of a refused body than 64 KiB (16 MiB for a refused
//! PATCH) and answers `keep: false` if some was left; an upload's bytes are written to disk as
//! they arrive; a PATCH never stores bytes past the upload's `Upload-Length`.
#![forbid(unsafe_code)]

use super::conn::BodyReader;
use super::filing::{finish, load_info, save_info, upload_paths, UploadInfo};
use super::limits::with_upload;
use super::{pages, safe_name, Shared};
use crate::metadata::decode_metadata;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::Ordering;

/// The `Retry-After` of an upload refused for the disk quota, in seconds.
const QUOTA_RETRY_SECS: u64 = 300;

/// A request head, as the handlers see it.
#[derive(Debug, Clone)]
pub(super) struct Request {
    pub method: String,
    /// The request target (path and query).
    pub target: String,
    /// Header names lower-cased, in order (values that are not UTF-8 are left out).
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
}

/// A handler's answer.
pub(super) struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: ReplyBody,
    /// Whether the connection may serve another request (false when a body was left unread).
    pub keep: bool,
}

/// The body of a [`Reply`].
pub(super) enum ReplyBody {
    Bytes(Vec<u8>),
    /// A file streamed from disk, of this many bytes.
    File(std::fs::File, u64),
}

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

/// A whole answer with the tus headers and `extra`; `keep`: whether the connection may stay.
fn respond(
    status: u16,
    extra: &[(&'static str, String)],
    body: &[u8],
    keep: bool,
) -> io::Result<Reply> {
    let mut headers = tus_headers();
    headers.extend_from_slice(extra);
    Ok(Reply {
        status,
        headers,
        body: ReplyBody::Bytes(body.to_vec()),
        keep,
    })
}

/// Handle one request (its head read; its body in `r`).
pub(super) fn handle(req: &Request, r: &mut BodyReader, sh: &Shared) -> io::Result<Reply> {
    let path = req.path().to_string();
    let uid = path.strip_prefix("/files/").unwrap_or("");
    // tus 1.0: a POST with `X-HTTP-Method-Override` is handled as the method it names (for
    // clients that cannot send PATCH: Java's HttpURLConnection on HotSpot refuses it).
    let method = match (req.method.as_str(), req.header("X-HTTP-Method-Override")) {
        ("POST", Some(m)) if m.trim() == "PATCH" => "PATCH",
        (m, _) => m,
    };
    match (method, path.as_str()) {
        ("OPTIONS", _) => {
            let ok = r.drain(64 * 1024)?;
            respond(
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
            let ok = r.drain(64 * 1024)?;
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
            respond(200, &html_headers(), html.as_bytes(), ok)
        }
        ("GET", "/leaks") => {
            let ok = r.drain(64 * 1024)?;
            let html = pages::leaks(
                &sh.index.lock().unwrap_or_else(|p| p.into_inner()),
                &sh.mappings,
            );
            respond(200, &html_headers(), html.as_bytes(), ok)
        }
        ("GET", "/stats") => {
            let ok = r.drain(64 * 1024)?;
            let s = serde_json::to_vec(&sh.counters.snapshot()).unwrap_or_default();
            respond(200, &[("Content-Type", "application/json".into())], &s, ok)
        }
        ("GET", p) if p.starts_with("/incidents/") => {
            let ok = r.drain(64 * 1024)?;
            let mut parts = p["/incidents/".len()..].split('/');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(id), Some("" | "index.html"), None) => {
                    let page = {
                        let _one = sh.pages.lock().unwrap_or_else(|p| p.into_inner());
                        pages::incident(&sh.cfg.dir, id, &sh.mappings)
                    };
                    match page {
                        Some(html) => respond(200, &html_headers(), html.as_bytes(), ok),
                        None => respond(404, &[], b"not found", ok),
                    }
                }
                (Some(id), None, None) if safe_name(id) => {
                    respond(301, &[("Location", format!("/incidents/{id}/"))], b"", ok)
                }
                (Some(id), Some(f), None) if safe_name(id) && safe_name(f) => {
                    let p = sh.cfg.dir.join("incidents").join(id).join(f);
                    match std::fs::File::open(&p).and_then(|f| Ok((f.metadata()?.len(), f))) {
                        Ok((len, file)) => {
                            // Streamed: a large file never sits in memory whole (if it
                            // shrinks, the connection is cut: the announced length cannot be
                            // kept).
                            let mut headers = tus_headers();
                            headers.push(("Content-Type", "application/octet-stream".into()));
                            Ok(Reply {
                                status: 200,
                                headers,
                                body: ReplyBody::File(file, len),
                                keep: ok,
                            })
                        }
                        Err(_) => respond(404, &[], b"not found", ok),
                    }
                }
                _ => respond(404, &[], b"not found", ok),
            }
        }
        ("POST", "/files" | "/files/") => create(req, r, sh),
        ("HEAD", _) if safe_name(uid) => {
            let ok = r.drain(64 * 1024)?;
            with_upload(sh, uid, || head(uid, sh, ok))
        }
        ("PATCH", _) if safe_name(uid) => with_upload(sh, uid, || patch(req, uid, r, sh)),
        _ => {
            let ok = r.drain(64 * 1024)?;
            respond(404, &[], b"not found", ok)
        }
    }
}

/// HEAD of upload `uid`: its offset (and SHA-256 once filed). Under the upload's lock.
fn head(uid: &str, sh: &Shared, ok: bool) -> io::Result<Reply> {
    let (ip, bp) = upload_paths(sh, uid);
    let Ok(mut info) = load_info(&ip) else {
        return respond(404, &[], b"", ok);
    };
    let got = received(&info, &bp);
    if !info.complete && got == Some(info.length) {
        // Every byte arrived but filing failed when the last came: file it now. Only
        // then does an answer with the full offset carry the SHA-256 that says it is
        // filed; a client that saw the full offset alone would take the file as stored
        // and drop its copy of a file the collector never filed.
        if let Err(e) = finish(&mut info, &bp, sh).and_then(|_| save_info(&ip, &info)) {
            return not_filed(&info, e, ok, false);
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
    respond(200, &h, b"", ok)
}

fn create(req: &Request, r: &mut BodyReader, sh: &Shared) -> io::Result<Reply> {
    let ok = r.drain(64 * 1024)?;
    if req.header("tus-resumable") != Some("1.0.0") {
        return respond(412, &[("Tus-Version", "1.0.0".into())], b"", ok);
    }
    let Some(length) = req
        .header("upload-length")
        .and_then(|v| v.trim().parse::<u64>().ok())
    else {
        return respond(400, &[], b"Upload-Length required", ok);
    };
    if length > sh.cfg.max_upload_bytes {
        return respond(413, &[], b"upload too large", ok);
    }
    let md: BTreeMap<String, String> = match req.header("upload-metadata").map(decode_metadata) {
        Some(Some(v)) => v.into_iter().collect(),
        Some(None) => return respond(400, &[], b"bad Upload-Metadata", ok),
        None => BTreeMap::new(),
    };
    let incident = md.get("incident").cloned().unwrap_or_default();
    let kind = md.get("kind").cloned().unwrap_or_default();
    if !safe_name(&incident) || !safe_name(&kind) {
        return respond(400, &[], b"metadata needs incident and kind", ok);
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
        return respond(503, &wait, why.as_bytes(), ok);
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
    respond(201, &[("Location", format!("/files/{uid}"))], b"", ok)
}

/// Read and drop a refused PATCH's body (up to 16 MiB) so the client reads our answer rather
/// than a reset; keep the connection only if the whole body was read. The bytes count as
/// received (they crossed the wire) for the upload, if known.
fn refuse(
    b: &mut BodyReader,
    sh: &Shared,
    info: Option<(&Path, &mut UploadInfo)>,
    status: u16,
    extra: &[(&'static str, String)],
    body: &[u8],
) -> io::Result<Reply> {
    let limit = 16u64 << 20;
    let n = io::copy(&mut (&mut *b).take(limit), &mut io::sink()).unwrap_or(0);
    let mut one = [0u8; 1];
    let whole = n < limit && matches!(b.read(&mut one), Ok(0));
    sh.counters.patch_bytes.fetch_add(n, Ordering::SeqCst);
    if let Some((ip, info)) = info {
        if n > 0 {
            info.received += n;
            let _ = save_info(ip, info);
        }
    }
    respond(status, extra, body, whole)
}

fn patch(req: &Request, uid: &str, r: &mut BodyReader, sh: &Shared) -> io::Result<Reply> {
    let (ip, bp) = upload_paths(sh, uid);
    let Ok(mut info) = load_info(&ip) else {
        return refuse(r, sh, None, 404, &[], b"");
    };
    if req.header("content-type") != Some("application/offset+octet-stream") {
        return refuse(r, sh, Some((&ip, &mut info)), 415, &[], b"");
    }
    let Some(offset) = req
        .header("upload-offset")
        .and_then(|v| v.trim().parse::<u64>().ok())
    else {
        let why = b"Upload-Offset required";
        return refuse(r, sh, Some((&ip, &mut info)), 400, &[], why);
    };
    let current = received(&info, &bp).unwrap_or(0);
    if offset != current {
        let extra = [("Upload-Offset", current.to_string())];
        return refuse(r, sh, Some((&ip, &mut info)), 409, &extra, b"");
    }
    if let Some(n) = r.length() {
        if offset + n > info.length {
            let why = b"body past Upload-Length";
            return refuse(r, sh, Some((&ip, &mut info)), 413, &[], why);
        }
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(&bp)?;
    let body = r;
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
                return not_filed(&info, e, true, true);
            }
        }
    }
    save_info(&ip, &info)?;
    match res {
        Ok(()) => respond(204, &extra, b"", true),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            respond(400, &extra, e.to_string().as_bytes(), false)
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
fn not_filed(info: &UploadInfo, e: io::Error, keep: bool, body: bool) -> io::Result<Reply> {
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
    respond(500, &[], why, keep)
}

#[cfg(test)]
mod tests {
    use super::super::testing::started;
    use oomguard::upload::tus::{Client, TusError};
    use sha2::{Digest, Sha256};
    use std::time::Duration;

    #[test]
    fn protocol_answers() {
        let (d, run, c) = started(|_| {});
        let data = vec![7u8; 2 << 20];
        let sha = hex::encode(Sha256::digest(&data));
        let md = [
            ("incident", "i-1"),
            ("kind", "mini.gz"),
            ("sha256", &sha[..]),
        ];
        let url = c.create(data.len() as u64, &md).unwrap();
        // A wrong offset with a large body: a clean 409, not a reset.
        let e = c.patch(&url, 5, &data[..data.len() - 5]);
        assert!(
            matches!(e, Err(TusError::Status { status: 409, .. })),
            "{e:?}"
        );
        let p = c.patch(&url, 0, &data[..1000]).unwrap();
        assert_eq!((p.offset, p.sha256), (1000, None));
        let h = c.head(&url).unwrap().unwrap();
        assert_eq!((h.offset, h.length), (1000, Some(data.len() as u64)));
        let p = c.patch(&url, 1000, &data[1000..]).unwrap();
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
        let (d, run, c) = started(|_| {});
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
        let p = c.patch(&url, 0, &data[..]);
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
