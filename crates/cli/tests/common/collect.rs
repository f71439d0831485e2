//! A real `oomguard collect` process on loopback for the tests, spoken to over raw sockets:
//! its stdout collected line by line, uploads put through the tus protocol by hand.

use super::{free_port, oomguard_bin};
use oomguard::upload::tus::encode_metadata;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running `oomguard collect`, its stdout collected line by line.
pub struct Collect {
    child: Child,
    pub addr: String,
    out: Arc<Mutex<String>>,
}

impl Collect {
    pub fn start(dir: &Path, extra: &[&str]) -> Collect {
        let addr = format!("127.0.0.1:{}", free_port());
        let mut child = Command::new(oomguard_bin())
            .args(["collect", "--listen", &addr, "--dir"])
            .arg(dir)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().unwrap();
        let o = out.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n') {
                let Ok(line) = line else { break };
                let mut o = o.lock().unwrap();
                o.push_str(&String::from_utf8_lossy(&line));
                o.push('\n');
            }
        });
        let c = Collect { child, addr, out };
        c.wait_for("collector listening");
        c
    }

    /// Wait (at most 60 s) until stdout holds `what`.
    pub fn wait_for(&self, what: &str) {
        for _ in 0..600 {
            if self.out.lock().unwrap().contains(what) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("no {what:?} on the collector's stdout: {}", self.out());
    }

    pub fn out(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// The process's peak resident set, in KiB.
    pub fn vm_hwm_kb(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// One request on its own connection: (status, response head, body).
    pub fn request(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, String)],
        body: &mut dyn Read,
        len: u64,
    ) -> (u16, String, Vec<u8>) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut head = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {len}\r\n",
            self.addr
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes()).unwrap();
        std::io::copy(&mut body.take(len), &mut s).unwrap();
        let mut r = BufReader::new(s);
        let mut head = String::new();
        loop {
            let mut l = String::new();
            r.read_line(&mut l).unwrap();
            if l == "\r\n" || l.is_empty() {
                break;
            }
            head.push_str(&l);
        }
        let status = head[9..12].parse().unwrap();
        let mut body = Vec::new();
        r.read_to_end(&mut body).unwrap();
        (status, head, body)
    }

    /// Upload `data` as file `kind` of `incident`; panics unless it is filed.
    pub fn upload(&self, incident: &str, kind: &str, data: &[u8]) {
        let sha = hex::encode(Sha256::digest(data));
        let md = encode_metadata(&[("incident", incident), ("kind", kind), ("sha256", &sha)]);
        let (st, head, _) = self.request(
            "POST",
            "/files/",
            &[
                ("Tus-Resumable", "1.0.0".into()),
                ("Upload-Length", data.len().to_string()),
                ("Upload-Metadata", md),
            ],
            &mut &b""[..],
            0,
        );
        assert_eq!(st, 201, "{head}");
        let loc = head
            .lines()
            .find_map(|l| l.strip_prefix("Location: "))
            .unwrap()
            .trim()
            .to_string();
        let (st, head, _) = self.request(
            "PATCH",
            &loc,
            &[
                ("Tus-Resumable", "1.0.0".into()),
                ("Upload-Offset", "0".into()),
                ("Content-Type", "application/offset+octet-stream".into()),
            ],
            &mut &data[..],
            data.len() as u64,
        );
        assert_eq!(st, 204, "{head}");
        assert!(head.contains(&format!("Upload-Sha256: {sha}")), "{head}");
    }

    /// Stop it as a user would (SIGTERM) and wait for it.
    pub fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

impl Drop for Collect {
    /// A test that fails leaves no collector behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
