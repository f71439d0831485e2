//! The scripted tus server of `upload_matrix`: on 127.0.0.1, it answers each request as a rule
//! says (a correct tus server, a given status, a reset, a stall, a conflict), and logs what it
//! was asked. It frames HTTP/1.1 by hand ([`http`]) because it must misbehave at the byte level
//! (reset a body half read, stall after a head), which a server library does not offer.
#![allow(dead_code)]

mod http;

use http::Body;
use std::collections::HashMap;
use std::io::{BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub method: String,
    pub path: String,
    pub offset: Option<u64>,
    pub body: u64,
    /// The `incident` of a POST's `Upload-Metadata`.
    pub incident: Option<String>,
}

#[allow(dead_code)]
pub enum Act {
    /// Behave like a correct tus server.
    Normal,
    /// Answer this status (with headers) without touching the upload.
    Status(u16, Vec<(&'static str, String)>),
    /// Like Normal, but answer this status instead of 201/204.
    NormalAs(u16),
    /// Read a little of the body, then drop the connection with data unread (a reset).
    Reset,
    /// Read the request, then say nothing for this long.
    Stall(Duration),
    /// The server already holds this many more bytes than the client thinks: 409.
    Conflict(u64),
}

pub type Rule = Box<dyn FnMut(&Hit, usize) -> Act + Send>;

struct State_ {
    uploads: HashMap<String, (u64, u64)>,
    next: u32,
    log: Vec<Hit>,
    rule: Rule,
}

pub struct Scripted {
    port: u16,
    st: Arc<Mutex<State_>>,
}

impl Scripted {
    pub fn new(rule: impl FnMut(&Hit, usize) -> Act + Send + 'static) -> Scripted {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let st = Arc::new(Mutex::new(State_ {
            uploads: HashMap::new(),
            next: 0,
            log: Vec::new(),
            rule: Box::new(rule),
        }));
        let st2 = st.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { return };
                let st = st2.clone();
                std::thread::spawn(move || serve(c, &st));
            }
        });
        Scripted { port, st }
    }
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/files/", self.port)
    }
    pub fn log(&self) -> Vec<Hit> {
        self.st.lock().unwrap().log.clone()
    }
    pub fn methods(&self) -> Vec<String> {
        self.log().into_iter().map(|h| h.method).collect()
    }
}

fn serve(c: TcpStream, st: &Mutex<State_>) {
    let mut w = c.try_clone().unwrap();
    let mut r = BufReader::new(c);
    loop {
        let Ok(Some(req)) = http::read_request(&mut r, 16384) else {
            return;
        };
        let framing = req.framing().unwrap();
        let mut hit = Hit {
            method: req.method.clone(),
            path: req.path().to_string(),
            offset: req.header("upload-offset").and_then(|v| v.parse().ok()),
            body: match framing {
                http::Framing::Length(n) => n,
                http::Framing::Chunked => 0,
            },
            incident: req
                .header("upload-metadata")
                .and_then(collector::metadata::decode_metadata)
                .and_then(|m| m.into_iter().find(|(k, _)| k == "incident"))
                .map(|(_, v)| v),
        };
        let act = {
            let mut g = st.lock().unwrap();
            let n = g.log.len();
            g.log.push(hit.clone());
            (g.rule)(&hit, n)
        };
        let mut body = Body::new(&mut r, framing);
        let normal_status = match act {
            Act::Reset => {
                let mut b = vec![0u8; 1000.min(hit.body as usize)];
                let _ = body.read_exact(&mut b);
                return; // dropped with unread data: the peer sees a reset
            }
            Act::Stall(d) => {
                std::thread::sleep(d);
                return;
            }
            Act::Status(code, h) => {
                let _ = body.drain(1 << 30);
                let mut hs = vec![("Tus-Resumable", "1.0.0".to_string())];
                hs.extend(h);
                // (An answer to a HEAD has no body.)
                let text: &[u8] = if req.method == "HEAD" {
                    b""
                } else {
                    b"scripted"
                };
                let _ = http::write_response(&mut w, code, &hs, text, true);
                continue;
            }
            Act::Conflict(more) => {
                let _ = body.drain(1 << 30);
                let mut g = st.lock().unwrap();
                let up = g
                    .uploads
                    .get_mut(req.path().trim_start_matches("/files/"))
                    .unwrap();
                up.1 = (up.1 + more).min(up.0);
                let off = up.1;
                drop(g);
                let hs = vec![
                    ("Tus-Resumable", "1.0.0".to_string()),
                    ("Upload-Offset", off.to_string()),
                ];
                let _ = http::write_response(&mut w, 409, &hs, b"", true);
                continue;
            }
            Act::Normal => None,
            Act::NormalAs(s) => Some(s),
        };
        let mut data = Vec::new();
        body.read_to_end(&mut data).unwrap();
        hit.body = data.len() as u64;
        let mut g = st.lock().unwrap();
        let (code, hs): (u16, Vec<(&str, String)>) = match req.method.as_str() {
            "POST" => {
                let len: u64 = req.header("upload-length").unwrap().parse().unwrap();
                g.next += 1;
                let id = format!("u{}", g.next);
                g.uploads.insert(id.clone(), (len, 0));
                (201, vec![("Location", format!("/files/{id}"))])
            }
            "HEAD" => match g.uploads.get(req.path().trim_start_matches("/files/")) {
                Some((len, off)) => (
                    200,
                    vec![
                        ("Upload-Offset", off.to_string()),
                        ("Upload-Length", len.to_string()),
                    ],
                ),
                None => (404, vec![]),
            },
            "PATCH" => match g.uploads.get_mut(req.path().trim_start_matches("/files/")) {
                Some((len, off)) if Some(*off) == hit.offset && *off + hit.body <= *len => {
                    *off += hit.body;
                    (204, vec![("Upload-Offset", off.to_string())])
                }
                Some((_, off)) => (409, vec![("Upload-Offset", off.to_string())]),
                None => (404, vec![]),
            },
            _ => (405, vec![]),
        };
        drop(g);
        let code = match normal_status {
            Some(s) if code < 300 => s,
            _ => code,
        };
        let mut all = vec![("Tus-Resumable", "1.0.0".to_string())];
        all.extend(hs);
        if http::write_response(&mut w, code, &all, b"", true).is_err() {
            return;
        }
    }
}
