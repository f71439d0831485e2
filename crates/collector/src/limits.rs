//! The collector's limits against what clients may do: a disk quota, the expiry of uploads
//! never finished, per-upload locks that go when unused, and a deadline per request.
//!
//! Invariants:
//! - [`Quota`] counts the bytes of the directory's files plus the bytes every open upload may
//!   still bring (its `Upload-Length` less what arrived). An upload is created only if its whole
//!   length fits, so one that is accepted can always be finished, and nothing is filed half.
//! - An upload with no byte and no request for `upload_expiry` is removed with its partial
//!   file (and a corrupt copy set aside, and the record of a finished one); its bytes leave the
//!   quota. Removal takes the upload's lock, so it never races a PATCH.
//! - A per-upload lock lives in the map only while some request holds or waits for it.
//! - A request head must arrive whole within `head_timeout`, its body within `request_timeout`
//!   after it, whatever pace the client keeps up: a slow client cannot hold a connection slot
//!   for longer (enforced in [`conn`](super::conn)).
#![forbid(unsafe_code)]

use super::filing::{load_info, upload_paths};
use super::Shared;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The disk quota of the collector's directory.
pub(super) struct Quota {
    max: u64,
    used: Mutex<u64>,
}

/// Refused: `used` of `max` bytes are taken.
#[derive(Debug)]
pub(super) struct Full {
    pub used: u64,
    pub max: u64,
}

impl Quota {
    /// Count what `dir` holds and what its open uploads may still bring.
    pub fn scan(dir: &Path, max: u64) -> Quota {
        let mut used = 0u64;
        for d in ["incidents", "uploads"] {
            used += tree_bytes(&dir.join(d), 2);
        }
        if let Ok(rd) = std::fs::read_dir(dir.join("uploads")) {
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "json") {
                    if let Ok(i) = load_info(&p) {
                        if !i.complete && !i.corrupt {
                            let have =
                                std::fs::metadata(p.with_extension("bin")).map_or(0, |m| m.len());
                            used += i.length.saturating_sub(have);
                        }
                    }
                }
            }
        }
        Quota {
            max,
            used: Mutex::new(used),
        }
    }

    pub fn used(&self) -> u64 {
        *self.used.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// Take `n` bytes, if they fit.
    pub fn reserve(&self, n: u64) -> Result<(), Full> {
        let mut u = self.used.lock().unwrap_or_else(|p| p.into_inner());
        match u.checked_add(n).filter(|t| *t <= self.max) {
            Some(t) => {
                *u = t;
                Ok(())
            }
            None => Err(Full {
                used: *u,
                max: self.max,
            }),
        }
    }

    pub fn release(&self, n: u64) {
        let mut u = self.used.lock().unwrap_or_else(|p| p.into_inner());
        *u = u.saturating_sub(n);
    }
}

/// Bytes of the files under `p`, `depth` levels down.
fn tree_bytes(p: &Path, depth: u32) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    let mut n = 0;
    for e in rd.flatten() {
        match e.metadata() {
            Ok(m) if m.is_file() => n += m.len(),
            Ok(m) if m.is_dir() && depth > 1 => n += tree_bytes(&e.path(), depth - 1),
            _ => {}
        }
    }
    n
}

/// Run `f` holding upload `uid`'s lock; the lock leaves the map once nobody holds or awaits it.
pub(super) fn with_upload<T>(sh: &Shared, uid: &str, f: impl FnOnce() -> T) -> T {
    let lock = {
        let mut m = sh.locks.lock().unwrap_or_else(|p| p.into_inner());
        m.entry(uid.to_string()).or_default().clone()
    };
    let out = {
        let _g = lock.lock().unwrap_or_else(|p| p.into_inner());
        f()
    };
    // Clones are made only under the map's lock: two strong counts (the map's and ours) mean
    // no other request holds or waits for it.
    let mut m = sh.locks.lock().unwrap_or_else(|p| p.into_inner());
    if Arc::strong_count(&lock) == 2 {
        m.remove(uid);
    }
    out
}

/// Remove the uploads idle for longer than `cfg.upload_expiry` at `now` (see the module doc);
/// returns how many.
pub(super) fn expire(sh: &Shared, now: SystemTime) -> usize {
    let dir = sh.cfg.dir.join("uploads");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let idle = |p: &Path| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .ok()
            .map(|t| now.duration_since(t).unwrap_or(Duration::ZERO))
    };
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((uid, ext)) = name.rsplit_once('.') else {
            continue;
        };
        if !super::safe_name(uid) || !matches!(ext, "json" | "bin" | "corrupt") {
            continue;
        }
        let (ip, bp) = upload_paths(sh, uid);
        let cp = bp.with_extension("corrupt");
        if ext != "json" && ip.exists() {
            continue; // handled with its record
        }
        with_upload(sh, uid, || {
            let last = [&ip, &bp, &cp].into_iter().filter_map(|p| idle(p)).min();
            if last.is_none_or(|l| l <= sh.cfg.upload_expiry) {
                return;
            }
            let info = load_info(&ip).ok();
            let have = std::fs::metadata(&bp).map_or(0, |m| m.len());
            let corrupt = std::fs::metadata(&cp).map_or(0, |m| m.len());
            // What the quota counted: an open upload its whole length, else the bytes there.
            let held = match &info {
                Some(i) if !i.complete && !i.corrupt => i.length.max(have),
                _ => have,
            } + corrupt;
            for p in [&bp, &cp, &ip] {
                let _ = std::fs::remove_file(p);
            }
            sh.quota.release(held);
            removed += 1;
            match info {
                Some(i) if !i.complete => tracing::warn!(
                    "collector: upload {uid} ({}/{}) expired after {} s without a request, {have} of {} bytes received{}; removed, and the client starts it anew",
                    i.incident,
                    i.kind,
                    sh.cfg.upload_expiry.as_secs(),
                    i.length,
                    if i.corrupt { ", corrupt" } else { "" }
                ),
                Some(i) => tracing::info!(
                    "collector: the record of finished upload {uid} ({}/{}) expired; removed",
                    i.incident,
                    i.kind
                ),
                None => tracing::warn!(
                    "collector: {}: a file without an upload record, idle for over {} s; removed",
                    dir.join(&name).display(),
                    sh.cfg.upload_expiry.as_secs()
                ),
            }
        });
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::super::testing::{patch_head, started};
    use super::super::Running;
    use super::*;
    use oomguard::upload::tus::TusError;
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};

    fn md(incident: &str) -> [(&str, &str); 2] {
        [("incident", incident), ("kind", "mini.gz")]
    }

    fn uploads(d: &Path) -> usize {
        std::fs::read_dir(d.join("uploads")).unwrap().count()
    }

    /// The connections being served, once they are `n` (waiting at most 5 s for that).
    fn active_when(run: &Running, n: usize) -> usize {
        let active = || run.shared.active.load(std::sync::atomic::Ordering::SeqCst);
        for _ in 0..250 {
            if active() == n {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        active()
    }

    /// A new connection with a PATCH of upload `url` from offset 0 whose head declares 1000
    /// bytes of body, of which only `first` are sent.
    fn stalled_patch(run: &Running, url: &str, first: &[u8]) -> TcpStream {
        let mut s = TcpStream::connect(run.addr()).unwrap();
        s.write_all(patch_head(url, 1000).as_bytes()).unwrap();
        s.write_all(first).unwrap();
        s
    }

    /// What the collector at `addr` answers `request` on a new connection, read until it closes
    /// (at most 5 s). A write the collector cuts short is not an error here: its answer says
    /// what happened.
    fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(request);
        let mut got = String::new();
        let _ = s.read_to_string(&mut got);
        got
    }

    /// Every file under `uploads/` last touched an hour and a second ago (past an expiry of an
    /// hour).
    fn age_uploads(d: &Path) {
        let hour_ago = SystemTime::now() - Duration::from_secs(3601);
        for e in std::fs::read_dir(d.join("uploads")).unwrap() {
            let f = std::fs::File::options().write(true).open(e.unwrap().path());
            f.unwrap().set_modified(hour_ago).unwrap();
        }
    }

    /// Over the disk quota a new upload is refused at creation, with a 503 and `Retry-After`
    /// (the client keeps its files and comes back), and nothing of it is stored; an upload
    /// accepted can always be finished, and what leaves (a duplicate) frees its room.
    #[test]
    fn the_disk_quota_refuses_new_uploads_whole() {
        let (d, run, c) = started(|c| c.max_disk_bytes = 1_000_000);
        let a = c.create(600_000, &md("q-1")).unwrap();
        let e = c.create(500_000, &md("q-2"));
        match e {
            Err(TusError::Status {
                status: 503,
                retry_after,
                ref body,
                ..
            }) => {
                assert_eq!(retry_after, Some(300), "{e:?}");
                assert!(body.contains("disk quota"), "{e:?}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            uploads(d.path()),
            2,
            "only the first upload's record and blob"
        );
        let data = vec![1u8; 600_000];
        let p = c.patch(&a, 0, &data[..600_000]).unwrap();
        assert_eq!(p.offset, 600_000);
        // 600,000 bytes held: 400,000 fit, 400,001 do not.
        assert!(matches!(
            c.create(400_001, &md("q-3")),
            Err(TusError::Status { status: 503, .. })
        ));
        // A second copy of the filed file is dropped and its room given back.
        let b = c.create(300_000, &md("q-1")).unwrap();
        c.patch(&b, 0, &data[..300_000]).unwrap();
        c.create(400_000, &md("q-4")).unwrap();
        let st = run.stop();
        assert_eq!(st.uploads_created, 3);
    }

    /// At start the quota counts the files of `incidents/` (two levels down) and `uploads/`, and
    /// what each open upload may still bring; a filed upload brings nothing more.
    #[test]
    fn the_quota_at_start_counts_the_files_and_what_open_uploads_may_bring() {
        let (d, run, c) = started(|_| {});
        let open = c.create(1000, &md("o-1")).unwrap();
        c.patch(&open, 0, &[1u8; 300]).unwrap();
        let filed = c.create(50, &md("f-1")).unwrap();
        c.patch(&filed, 0, &[2u8; 50]).unwrap();
        drop(run);
        // Three levels down is not counted.
        let deep = d.path().join("incidents/f-1/.analysis");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("work"), [0u8; 4096]).unwrap();
        let mut files = 0;
        for sub in ["incidents/f-1", "uploads"] {
            for e in std::fs::read_dir(d.path().join(sub)).unwrap() {
                let m = e.unwrap().metadata().unwrap();
                files += if m.is_file() { m.len() } else { 0 };
            }
        }
        assert!(files > 350, "{files}");
        let q = Quota::scan(d.path(), 1 << 30);
        assert_eq!((q.used(), q.max()), (files + 700, 1 << 30));
    }

    /// An upload no request has touched for `upload_expiry` is removed with its partial file,
    /// with a warning; its room goes back to the quota; a recent one stays.
    #[test]
    fn unfinished_uploads_expire() {
        let (d, run, c) = started(|c| {
            c.max_disk_bytes = 10_000;
            c.upload_expiry = Duration::from_secs(3600);
        });
        let a = c.create(8_000, &md("e-1")).unwrap();
        c.patch(&a, 0, &[5u8; 1000]).unwrap();
        let sh = &run.shared;
        assert_eq!(expire(sh, SystemTime::now()), 0);
        assert_eq!(uploads(d.path()), 2);
        assert!(
            c.create(8_000, &md("e-2")).is_err(),
            "the quota holds the first"
        );
        let later = SystemTime::now() + Duration::from_secs(3601);
        let (n, log) = testkit::warnings(|| expire(sh, later));
        assert_eq!(n, 1);
        assert!(
            log.contains("e-1/mini.gz) expired after 3600 s") && log.contains("1000 of 8000 bytes"),
            "{log}"
        );
        assert_eq!(uploads(d.path()), 0, "record and partial file removed");
        assert_eq!(c.head(&a).unwrap(), None);
        c.create(8_000, &md("e-2")).unwrap();
        drop(run);
    }

    /// What expires and what the quota gets back: an open upload gives back its whole length
    /// (what it may still bring and what came), a finished one's record goes quietly and gives
    /// back nothing (its file is filed), a corrupt copy gives back its bytes; files that are no
    /// upload's (another extension, a name no upload has) stay.
    #[test]
    fn expiry_gives_back_what_the_quota_counted_and_leaves_other_files() {
        let (d, run, c) = started(|c| c.upload_expiry = Duration::from_secs(3600));
        let sh = &run.shared;
        let open = c.create(8_000, &md("x-1")).unwrap();
        c.patch(&open, 0, &[5u8; 1000]).unwrap();
        let done = c.create(40, &md("x-2")).unwrap();
        c.patch(&done, 0, &[6u8; 40]).unwrap();
        let up = d.path().join("uploads");
        std::fs::write(up.join("orphan.corrupt"), [7u8; 300]).unwrap();
        sh.quota.reserve(300).unwrap();
        for stray in ["notes.txt", "bad name.json"] {
            std::fs::write(up.join(stray), "{}").unwrap();
        }
        age_uploads(d.path());
        let before = sh.quota.used();
        let (n, log) = testkit::warnings(|| expire(sh, SystemTime::now()));
        assert_eq!(n, 3, "{log}");
        assert_eq!(before - sh.quota.used(), 8_000 + 300, "{log}");
        assert_eq!(log.matches("expired after").count(), 1, "{log}");
        assert!(
            log.contains("orphan.corrupt: a file without an upload record"),
            "{log}"
        );
        let mut left: Vec<String> = std::fs::read_dir(&up)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["bad name.json", "notes.txt"]);
        let filed = crate::filing::file_name_for("mini.gz");
        assert!(d.path().join("incidents/x-2").join(filed).exists());
    }

    /// The server sweeps expired uploads by itself, every quarter of `upload_expiry` (here
    /// 4 s, so every second): an upload whose files have been idle for an hour is gone within
    /// a few seconds, without a call to `expire`.
    #[test]
    fn the_server_sweeps_expired_uploads_by_itself() {
        let (d, run, c) = started(|c| c.upload_expiry = Duration::from_secs(4));
        let a = c.create(100, &md("w-1")).unwrap();
        assert_eq!(uploads(d.path()), 2);
        age_uploads(d.path());
        let t = std::time::Instant::now();
        while uploads(d.path()) > 0 && t.elapsed() < Duration::from_secs(8) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(uploads(d.path()), 0, "not swept after {:?}", t.elapsed());
        assert_eq!(c.head(&a).unwrap(), None);
        drop(run);
    }

    /// Handlers run on blocking threads, enough for one per connection slot: three uploads
    /// whose bodies stall (each holding its handler's thread) do not keep a fourth client from
    /// being served.
    #[test]
    fn stalled_bodies_do_not_starve_the_other_connections() {
        let (_d, run, c) = started(|c| {
            c.max_connections = 4;
            c.io_timeout = Duration::from_secs(30);
        });
        let stalled: Vec<TcpStream> = (0..3)
            .map(|i| {
                let url = c.create(1000, &md(&format!("b-{i}"))).unwrap();
                stalled_patch(&run, &url, &[1u8; 10])
            })
            .collect();
        assert_eq!(active_when(&run, 3), 3);
        std::thread::sleep(Duration::from_millis(200));
        let got = exchange(
            run.addr(),
            b"GET /stats HTTP/1.1\r\nConnection: close\r\n\r\n",
        );
        assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
        drop(stalled);
    }

    /// With every connection slot taken, one more client is answered 503 ("busy") and counted,
    /// not left waiting.
    #[test]
    fn a_client_beyond_the_connection_limit_is_told_busy() {
        let (_d, run, _c) = started(|c| c.max_connections = 1);
        let mut held = TcpStream::connect(run.addr()).unwrap();
        held.write_all(b"GET /stats HTTP/1.1\r\nX-Slow: ").unwrap();
        assert_eq!(active_when(&run, 1), 1, "the first client holds the slot");
        let got = exchange(run.addr(), b"GET /stats HTTP/1.1\r\n\r\n");
        assert!(got.starts_with("HTTP/1.1 503"), "{got:?}");
        assert!(got.ends_with("busy"), "{got:?}");
        assert_eq!(run.stats().busy_refused, 1);
        drop(held);
    }

    /// The per-upload lock map holds only locks in use. A handler writes its response while it
    /// holds the upload's lock and leaves the map just after, so the client may read the last
    /// answer a moment before: the map is watched until it is empty (it flaked once, under
    /// load, when read at once).
    #[test]
    fn the_lock_map_is_pruned() {
        let (_d, run, c) = started(|_| {});
        for i in 0..20 {
            let u = c.create(10, &md(&format!("l-{i}"))).unwrap();
            c.head(&u).unwrap().unwrap();
            c.patch(&u, 0, &[0u8; 10]).unwrap();
            c.head(&u).unwrap().unwrap();
        }
        let left = || run.shared.locks.lock().unwrap().len();
        for _ in 0..500 {
            if left() == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(left(), 0);
    }

    /// A request head over 16 KiB is refused (431) and its connection closed; one just under
    /// is served.
    #[test]
    fn request_heads_are_bounded() {
        let (_d, run, _c) = started(|_| {});
        let ask = |pad: usize| {
            let head = format!(
                "GET /stats HTTP/1.1\r\nX-Pad: {}\r\nConnection: close\r\n\r\n",
                "a".repeat(pad)
            );
            exchange(run.addr(), head.as_bytes())
        };
        assert!(ask(15 * 1024).starts_with("HTTP/1.1 200"));
        assert!(ask(17 * 1024).starts_with("HTTP/1.1 431"));
    }

    /// A PATCH whose body stops coming is cut after `io_timeout`, unanswered, and the upload
    /// keeps the bytes that came: the client resumes from there.
    #[test]
    fn a_stalled_body_is_cut_and_its_bytes_kept() {
        let (_d, run, c) = started(|c| c.io_timeout = Duration::from_secs(1));
        let url = c.create(1000, &md("s-1")).unwrap();
        let mut s = stalled_patch(&run, &url, &[7u8; 10]);
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let t = std::time::Instant::now();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert_eq!(c.head(&url).unwrap().unwrap().offset, 10);
    }

    /// A client that asks for a large file and then reads nothing holds its connection for no
    /// longer than `io_timeout`: the stalled write ends it and frees its slot.
    #[test]
    fn a_client_that_stops_reading_is_cut() {
        let (d, run, _c) = started(|c| c.io_timeout = Duration::from_secs(1));
        let inc = d.path().join("incidents/r-1");
        std::fs::create_dir_all(&inc).unwrap();
        std::fs::write(inc.join("big.bin"), vec![3u8; 64 << 20]).unwrap();
        let mut s = TcpStream::connect(run.addr()).unwrap();
        s.write_all(b"GET /incidents/r-1/big.bin HTTP/1.1\r\n\r\n")
            .unwrap();
        assert_eq!(active_when(&run, 1), 1, "the request is being answered");
        let active = || run.shared.active.load(std::sync::atomic::Ordering::SeqCst);
        let t = std::time::Instant::now();
        while active() > 0 && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(
            active(),
            0,
            "the connection is still held after {:?}",
            t.elapsed()
        );
        drop(s);
    }

    /// 32 clients that send their request heads a byte at a time take every connection slot
    /// for no longer than the head deadline: a real request is served while they go on.
    #[test]
    fn slow_clients_do_not_hold_every_slot() {
        let (_d, run, _c) = started(|c| {
            c.head_timeout = Duration::from_secs(1);
            c.io_timeout = Duration::from_secs(2);
        });
        let addr = run.addr();
        let mut slow: Vec<TcpStream> = (0..32)
            .map(|_| {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(b"GET /stats HTTP/1.1\r\nX-Slow: ").unwrap();
                s
            })
            .collect();
        active_when(&run, 32);
        // They trickle one byte each per 200 ms for 10 s (each read well within io_timeout).
        let trickle = std::thread::spawn(move || {
            for _ in 0..50 {
                for s in &mut slow {
                    let _ = s.write_all(b"x");
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        let mut served = None;
        for _ in 0..30 {
            let got = exchange(addr, b"GET /stats HTTP/1.1\r\nConnection: close\r\n\r\n");
            if got.starts_with("HTTP/1.1 200") {
                served = Some(got);
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(
            served.is_some(),
            "every try was refused while slow clients held the slots"
        );
        trickle.join().unwrap();
    }
}
