//! What the tests of several modules share: a collector on loopback, and a raw PATCH head.

use super::{Collector, Config, Running};
use oomguard::upload::tus::Client;
use std::time::Duration;

/// A collector on loopback over a fresh directory, its config as `cfg` leaves it, and a client
/// of it.
pub(crate) fn started(cfg: impl FnOnce(&mut Config)) -> (tempfile::TempDir, Running, Client) {
    let d = tempfile::tempdir().unwrap();
    let mut c = Config::new(d.path());
    cfg(&mut c);
    let run = Collector::bind("127.0.0.1:0", c).unwrap().spawn();
    let t = Duration::from_secs(5);
    let client = Client::new(&run.endpoint(), t, t, 1 << 20);
    (d, run, client)
}

/// The head of a PATCH of upload `url` (as `create` answers it) from offset 0, declaring a body
/// of `len` bytes.
pub(crate) fn patch_head(url: &str, len: u64) -> String {
    let path = &url[url.find("/files/").unwrap()..];
    format!(
        "PATCH {path} HTTP/1.1\r\nTus-Resumable: 1.0.0\r\nUpload-Offset: 0\r\n\
         Content-Type: application/offset+octet-stream\r\nContent-Length: {len}\r\n\r\n"
    )
}
