//! The development collector: a small tus 1.0 receiver (core + creation) on `std::net`, used by
//! `oomguard collect`, the tests and the demo.
//!
//! Layout of its directory:
//! ```text
//! DIR/uploads/UID.json   one tus upload: length, metadata, bytes received, completion
//! DIR/uploads/UID.bin    its bytes so far (the offset is this file's length)
//! DIR/incidents/ID/      completed files of incident ID, by kind (meta.json, report.json, ...)
//! DIR/index.html         the received reports with their top leaks and dominators
//! ```
//!
//! Invariants:
//! - Bodies are written to disk as they arrive, so a cut connection keeps every received byte
//!   and the client resumes from there; one PATCH per upload at a time (a per-upload lock).
//! - A completed upload is filed under its incident only if its SHA-256 equals the one in its
//!   metadata; the SHA-256 of the stored bytes is returned as `Upload-Sha256` on the final PATCH
//!   and on HEAD, so the client acknowledges only what was stored intact. A second complete
//!   copy of the same (incident, kind) is counted as a duplicate and not filed again.
//! - Request heads are bounded (16 KiB), bodies by `Upload-Length` and `max_upload_bytes`, every
//!   read and write by `io_timeout`, connections by `max_connections` (503 beyond).
//! - On stop (SIGINT/SIGTERM in `oomguard collect`) it stops accepting, lets requests in flight
//!   finish, fsyncs its directories and returns.
#![forbid(unsafe_code)]

use super::http::{self, Body, Framing, Request};
use super::tus::decode_metadata;
use crate::spool::{fs as sfs, FileKind, Fs, RealFs};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Errors of the collector.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("{0}: refusing to listen on a non-loopback address")]
    NotLoopback(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Collector settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub dir: PathBuf,
    pub max_upload_bytes: u64,
    pub io_timeout: Duration,
    /// A keep-alive connection idle this long is closed.
    pub idle_timeout: Duration,
    pub max_connections: usize,
    pub allow_non_loopback: bool,
    /// Print one line per received report on stdout.
    pub print: bool,
}

impl Config {
    pub fn new(dir: impl Into<PathBuf>) -> Config {
        Config {
            dir: dir.into(),
            max_upload_bytes: 1 << 30,
            io_timeout: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(30),
            max_connections: 32,
            allow_non_loopback: false,
            print: false,
        }
    }
}

/// Counters, readable while it runs.
#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    patch_bytes: AtomicU64,
    uploads_created: AtomicU64,
    files_completed: AtomicU64,
    duplicates: AtomicU64,
    corrupt: AtomicU64,
    reports: AtomicU64,
    busy_refused: AtomicU64,
}

/// A snapshot of the collector's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub requests: u64,
    /// PATCH body bytes received (and stored), over all uploads.
    pub patch_bytes: u64,
    pub uploads_created: u64,
    /// Uploads completed with a matching SHA-256 and filed.
    pub files_completed: u64,
    /// Complete uploads of an (incident, kind) already filed.
    pub duplicates: u64,
    /// Complete uploads whose SHA-256 did not match their metadata.
    pub corrupt: u64,
    pub reports: u64,
    pub busy_refused: u64,
}

impl Counters {
    fn snapshot(&self) -> Stats {
        let g = |a: &AtomicU64| a.load(Ordering::SeqCst);
        Stats {
            requests: g(&self.requests),
            patch_bytes: g(&self.patch_bytes),
            uploads_created: g(&self.uploads_created),
            files_completed: g(&self.files_completed),
            duplicates: g(&self.duplicates),
            corrupt: g(&self.corrupt),
            reports: g(&self.reports),
            busy_refused: g(&self.busy_refused),
        }
    }
}

/// What the collector keeps about one tus upload (`uploads/UID.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadInfo {
    pub length: u64,
    pub incident: String,
    pub kind: String,
    pub metadata: BTreeMap<String, String>,
    /// PATCH body bytes received for this upload, including any sent again.
    pub received: u64,
    pub complete: bool,
    /// SHA-256 of the stored bytes, once complete.
    pub sha256: Option<String>,
    pub corrupt: bool,
}

struct Shared {
    cfg: Config,
    counters: Counters,
    stop: Arc<AtomicBool>,
    locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    index: Mutex<()>,
    active: AtomicUsize,
}

/// A bound collector.
pub struct Collector {
    listener: TcpListener,
    shared: Arc<Shared>,
}

/// A collector serving on its own thread.
pub struct Running {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Result<Stats, Error>>>,
}

fn safe_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// The file name a received upload of `kind` is filed under.
pub fn file_name_for(kind: &str) -> String {
    FileKind::ALL
        .into_iter()
        .find(|k| k.upload_kind() == kind)
        .map(|k| k.file_name().to_string())
        .unwrap_or_else(|| format!("{kind}.bin"))
}

impl Collector {
    /// Bind `addr` (loopback only unless the config allows otherwise) and prepare `cfg.dir`.
    pub fn bind(addr: &str, cfg: Config) -> Result<Collector, Error> {
        let listener = TcpListener::bind(addr).map_err(|source| Error::Bind {
            addr: addr.to_string(),
            source,
        })?;
        let local = listener.local_addr().map_err(|source| Error::Bind {
            addr: addr.to_string(),
            source,
        })?;
        if !cfg.allow_non_loopback && !local.ip().is_loopback() {
            return Err(Error::NotLoopback(addr.to_string()));
        }
        for d in ["uploads", "incidents"] {
            let p = cfg.dir.join(d);
            std::fs::create_dir_all(&p).map_err(|source| Error::Io { path: p, source })?;
        }
        listener
            .set_nonblocking(true)
            .map_err(|source| Error::Bind {
                addr: addr.to_string(),
                source,
            })?;
        Ok(Collector {
            listener,
            shared: Arc::new(Shared {
                cfg,
                counters: Counters::default(),
                stop: Arc::new(AtomicBool::new(false)),
                locks: Mutex::new(HashMap::new()),
                index: Mutex::new(()),
                active: AtomicUsize::new(0),
            }),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// The tus creation endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://{}/files/", self.local_addr())
    }

    /// Setting this flag makes [`serve`](Self::serve) finish and return.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.shared.stop.clone()
    }

    /// Serve until the stop flag is set; then finish requests in flight, fsync, return counts.
    pub fn serve(self) -> Result<Stats, Error> {
        let mut workers: Vec<JoinHandle<()>> = Vec::new();
        let sh = self.shared.clone();
        while !sh.stop.load(Ordering::SeqCst) {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    workers.retain(|h| !h.is_finished());
                    if sh.active.load(Ordering::SeqCst) >= sh.cfg.max_connections {
                        sh.counters.busy_refused.fetch_add(1, Ordering::SeqCst);
                        let mut s = stream;
                        let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                        let _ = http::write_response(&mut s, 503, &tus_headers(), b"busy", false);
                        continue;
                    }
                    sh.active.fetch_add(1, Ordering::SeqCst);
                    let sh2 = sh.clone();
                    let spawned = std::thread::Builder::new()
                        .name("collector-conn".into())
                        .spawn(move || {
                            connection(stream, &sh2);
                            sh2.active.fetch_sub(1, Ordering::SeqCst);
                        });
                    match spawned {
                        Ok(h) => workers.push(h),
                        Err(e) => {
                            sh.active.fetch_sub(1, Ordering::SeqCst);
                            tracing::warn!("collector: cannot spawn a connection thread: {e}");
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => {
                    tracing::warn!("collector: accept: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        drop(self.listener);
        for h in workers {
            let _ = h.join();
        }
        for d in ["uploads", "incidents", ""] {
            let p = sh.cfg.dir.join(d);
            let _ = RealFs.sync_dir(&p);
        }
        Ok(sh.counters.snapshot())
    }

    /// Serve on a new thread.
    pub fn spawn(self) -> Running {
        let addr = self.local_addr();
        let shared = self.shared.clone();
        let thread = std::thread::Builder::new()
            .name("collector".into())
            .spawn(move || self.serve())
            .ok();
        Running {
            addr,
            shared,
            thread,
        }
    }
}

impl Running {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    pub fn endpoint(&self) -> String {
        format!("http://{}/files/", self.addr)
    }
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot()
    }
    pub fn dir(&self) -> &Path {
        &self.shared.cfg.dir
    }
    /// Stop accepting, finish requests in flight, and return the final counts.
    pub fn stop(mut self) -> Stats {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            if let Ok(Ok(s)) = t.join() {
                return s;
            }
        }
        self.shared.counters.snapshot()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn tus_headers() -> Vec<(&'static str, String)> {
    vec![("Tus-Resumable", "1.0.0".to_string())]
}

/// Serve one connection: requests one after another while it is kept alive.
fn connection(stream: TcpStream, sh: &Shared) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(sh.cfg.io_timeout));
    let Ok(wr) = stream.try_clone() else {
        return;
    };
    let mut w = io::BufWriter::new(wr);
    let mut r = BufReader::with_capacity(64 * 1024, stream);
    loop {
        // Wait for the next request, checking the stop flag.
        let _ = r
            .get_ref()
            .set_read_timeout(Some(Duration::from_millis(100)));
        let idle = Instant::now();
        loop {
            match r.fill_buf() {
                Ok([]) => return,
                Ok(_) => break,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    if sh.stop.load(Ordering::SeqCst) || idle.elapsed() > sh.cfg.idle_timeout {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
        let _ = r.get_ref().set_read_timeout(Some(sh.cfg.io_timeout));
        let req = match http::read_request(&mut r, 16 * 1024) {
            Ok(Some(q)) => q,
            Ok(None) => return,
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
        sh.counters.requests.fetch_add(1, Ordering::SeqCst);
        let keep = match handle(&req, &mut r, &mut w, sh) {
            Ok(k) => k && req.keep_alive(),
            Err(e) => {
                tracing::debug!("collector: {} {}: {e}", req.method, req.target);
                false
            }
        };
        if !keep || sh.stop.load(Ordering::SeqCst) {
            return;
        }
    }
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

fn upload_paths(sh: &Shared, uid: &str) -> (PathBuf, PathBuf) {
    let d = sh.cfg.dir.join("uploads");
    (d.join(format!("{uid}.json")), d.join(format!("{uid}.bin")))
}

fn load_info(p: &Path) -> io::Result<UploadInfo> {
    let b = std::fs::read(p)?;
    serde_json::from_slice(&b).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn save_info(p: &Path, i: &UploadInfo) -> io::Result<()> {
    let b = serde_json::to_vec_pretty(i).map_err(io::Error::other)?;
    sfs::write_atomic(&RealFs, p, &b)
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
            let html = render_index(&sh.cfg.dir);
            respond(
                w,
                200,
                &[("Content-Type", "text/html; charset=utf-8".into())],
                html.as_bytes(),
                ok,
            )
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
                (Some(id), Some(f), None) if safe_name(id) && safe_name(f) => {
                    match std::fs::read(sh.cfg.dir.join("incidents").join(id).join(f)) {
                        Ok(b) => respond(
                            w,
                            200,
                            &[("Content-Type", "application/octet-stream".into())],
                            &b,
                            ok,
                        ),
                        Err(_) => respond(w, 404, &[], b"not found", ok),
                    }
                }
                _ => respond(w, 404, &[], b"not found", ok),
            }
        }
        ("POST", "/files" | "/files/") => create(req, framing, r, w, sh),
        ("HEAD", _) if safe_name(uid) => {
            let ok = Body::new(r, framing).drain(64 * 1024)?;
            let (ip, bp) = upload_paths(sh, uid);
            let lock = upload_lock(sh, uid);
            let _g = lock.lock().unwrap_or_else(|p| p.into_inner());
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
        ("PATCH", _) if safe_name(uid) => patch(req, framing, uid, r, w, sh),
        _ => {
            let ok = Body::new(r, framing).drain(64 * 1024)?;
            respond(w, 404, &[], b"not found", ok)
        }
    }
}

fn upload_lock(sh: &Shared, uid: &str) -> Arc<Mutex<()>> {
    let mut m = sh.locks.lock().unwrap_or_else(|p| p.into_inner());
    m.entry(uid.to_string()).or_default().clone()
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
    let uid = format!(
        "{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    );
    let (ip, bp) = upload_paths(sh, &uid);
    std::fs::File::create(&bp)?;
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
    )?;
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
    let lock = upload_lock(sh, uid);
    let _g = lock.lock().unwrap_or_else(|p| p.into_inner());
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

/// An upload is complete: check its SHA-256 and file it under its incident ([`file`]). `info`
/// is marked complete (with the SHA-256 the answers then carry) only once that is done: if
/// filing fails (a full disk, a path that cannot be made), the upload stays incomplete with
/// every byte received, and the next HEAD or PATCH on it files it.
fn finish(info: &mut UploadInfo, bp: &Path, sh: &Shared) -> io::Result<String> {
    let mut h = Sha256::new();
    let mut f = std::fs::File::open(bp)?;
    io::copy(&mut f, &mut HashWriter(&mut h))?;
    let sha = hex::encode(h.finalize());
    file(info, bp, sh, &sha)?;
    info.complete = true;
    info.sha256 = Some(sha.clone());
    Ok(sha)
}

/// File the blob `bp` of a complete upload whose SHA-256 is `sha` under its incident: set
/// aside as corrupt if that is not the SHA-256 declared, dropped if the incident has that file
/// already.
fn file(info: &mut UploadInfo, bp: &Path, sh: &Shared, sha: &str) -> io::Result<()> {
    let expected = info.metadata.get("sha256").map(|s| s.to_ascii_lowercase());
    if expected.as_deref().is_some_and(|e| e != sha) {
        info.corrupt = true;
        sh.counters.corrupt.fetch_add(1, Ordering::SeqCst);
        tracing::warn!(
            "collector: {}/{}: SHA-256 {sha} differs from the declared {:?}; not filed",
            info.incident,
            info.kind,
            expected
        );
        let _ = std::fs::rename(bp, bp.with_extension("corrupt"));
        return Ok(());
    }
    let dir = sh.cfg.dir.join("incidents").join(&info.incident);
    std::fs::create_dir_all(&dir)?;
    let dst = dir.join(file_name_for(&info.kind));
    let _g = sh.index.lock().unwrap_or_else(|p| p.into_inner());
    if dst.exists() {
        sh.counters.duplicates.fetch_add(1, Ordering::SeqCst);
        tracing::warn!(
            "collector: duplicate {}/{} received; keeping the first",
            info.incident,
            info.kind
        );
        let _ = std::fs::remove_file(bp);
        return Ok(());
    }
    std::fs::rename(bp, &dst)?;
    let _ = std::fs::File::open(&dir).and_then(|d| d.sync_all());
    sh.counters.files_completed.fetch_add(1, Ordering::SeqCst);
    if info.kind == FileKind::Report.upload_kind() {
        sh.counters.reports.fetch_add(1, Ordering::SeqCst);
        if sh.cfg.print {
            println!("{}", report_line(&sh.cfg.dir, &info.incident));
            let _ = io::stdout().flush();
        }
        let html = render_index(&sh.cfg.dir);
        let _ = sfs::write_atomic(&RealFs, &sh.cfg.dir.join("index.html"), html.as_bytes());
    }
    Ok(())
}

struct HashWriter<'a>(&'a mut Sha256);
impl Write for HashWriter<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.update(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn read_json(p: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(p).ok()?).ok()
}

/// The top leaks of a report: (signature, reason, instances).
pub fn top_leaks(report: &Value, n: usize) -> Vec<(String, String, u64)> {
    let mut v: Vec<(String, String, u64)> = report
        .get("gcPaths")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|p| {
                    (
                        p.get("signature")
                            .and_then(Value::as_str)
                            .unwrap_or("?")
                            .to_string(),
                        p.get("leakReason")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        p.get("instanceCount").and_then(Value::as_u64).unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|e| std::cmp::Reverse(e.2));
    v.truncate(n);
    v
}

/// The top dominators of a report: (class, retained bytes).
pub fn top_dominators(report: &Value, n: usize) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = report
        .get("dominators")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|d| {
                    (
                        d.get("className")
                            .and_then(Value::as_str)
                            .unwrap_or("?")
                            .to_string(),
                        d.get("retainedSize").and_then(Value::as_u64).unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|e| std::cmp::Reverse(e.1));
    v.truncate(n);
    v
}

/// One line for a received report.
pub fn report_line(dir: &Path, id: &str) -> String {
    let d = dir.join("incidents").join(id);
    let meta = read_json(&d.join("meta.json")).unwrap_or(Value::Null);
    let report = read_json(&d.join("report.json")).unwrap_or(Value::Null);
    let reason = meta
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("(reason not received yet)");
    let leaks = top_leaks(&report, 1);
    let n = report
        .get("gcPaths")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let top = match leaks.first() {
        Some((sig, why, count)) => format!("; top leak: {sig} x{count} ({why})"),
        None => String::new(),
    };
    format!(
        "received report {id}: {reason}; {n} leak(s){top}; {}",
        d.join("report.json").display()
    )
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// Render the HTML index of every received incident, newest first.
pub fn render_index(dir: &Path) -> String {
    let mut ids: Vec<String> = std::fs::read_dir(dir.join("incidents"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| safe_name(n))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids.reverse();
    let mut h = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>oomguard reports</title>\n\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:.5em 0 1.5em}\
         td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left}th{background:#eee}\
         .num{text-align:right}</style></head><body>\n<h1>oomguard: received reports</h1>\n",
    );
    h.push_str(&format!("<p>{} incident(s)</p>\n", ids.len()));
    for id in ids {
        let d = dir.join("incidents").join(&id);
        let meta = read_json(&d.join("meta.json")).unwrap_or(Value::Null);
        let report = read_json(&d.join("report.json"));
        let reason = meta.get("reason").and_then(Value::as_str).unwrap_or("?");
        h.push_str(&format!(
            "<h2 id=\"{0}\">{0}</h2>\n<p>reason: <b>{1}</b>",
            esc(&id),
            esc(reason)
        ));
        if let Some(n) = meta
            .get("evictions")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
        {
            h.push_str(&format!("; {n} incident(s) evicted before this one"));
        }
        if let Some(n) = meta
            .get("losses")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
        {
            h.push_str(&format!("; {n} loss(es) on the device"));
        }
        h.push_str("</p>\n<p>files:");
        let mut files: Vec<String> = std::fs::read_dir(&d)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| safe_name(n))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        for f in files {
            h.push_str(&format!(
                " <a href=\"incidents/{0}/{1}\">{1}</a>",
                esc(&id),
                esc(&f)
            ));
        }
        h.push_str("</p>\n");
        let Some(report) = report else {
            h.push_str("<p>no report received (yet)</p>\n");
            continue;
        };
        h.push_str("<h3>top leaks</h3>\n<table><tr><th>signature</th><th>reason</th><th>instances</th></tr>\n");
        for (sig, why, n) in top_leaks(&report, 10) {
            h.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{n}</td></tr>\n",
                esc(&sig),
                esc(&why)
            ));
        }
        h.push_str("</table>\n<h3>dominators</h3>\n<table><tr><th>class</th><th>retained bytes</th></tr>\n");
        for (class, size) in top_dominators(&report, 10) {
            h.push_str(&format!(
                "<tr><td>{}</td><td class=\"num\">{size}</td></tr>\n",
                esc(&class)
            ));
        }
        h.push_str("</table>\n");
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upload::tus::{Client, TusError};

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

    #[test]
    fn index_escapes_and_orders() {
        let d = tempfile::tempdir().unwrap();
        let inc = d.path().join("incidents/1-a");
        std::fs::create_dir_all(&inc).unwrap();
        std::fs::write(
            inc.join("meta.json"),
            r#"{"reason":"heap <three strikes>"}"#,
        )
        .unwrap();
        std::fs::write(
            inc.join("report.json"),
            r#"{"gcPaths":[{"signature":"a.B","leakReason":"destroyed Activity","instanceCount":2},
                           {"signature":"<script>","leakReason":"x","instanceCount":9}],
                "dominators":[{"className":"byte[]","retainedSize":10},{"className":"java.lang.Object[]","retainedSize":99}]}"#,
        )
        .unwrap();
        let h = render_index(d.path());
        assert!(h.contains("heap &lt;three strikes&gt;"));
        assert!(h.contains("&lt;script&gt;"));
        assert!(!h.contains("<script>"));
        assert!(h.find("&lt;script&gt;").unwrap() < h.find("a.B").unwrap());
        assert!(h.find("java.lang.Object[]").unwrap() < h.find("byte[]").unwrap());
        let line = report_line(d.path(), "1-a");
        assert!(line.contains("2 leak(s); top leak: <script> x9"), "{line}");
    }
}
