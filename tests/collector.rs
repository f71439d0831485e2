//! The `oomguard collect` executable against what clients may send: a report far larger than
//! any the analyser writes (its memory stays bounded) and text meant for a terminal (`--print`
//! writes no control characters). A real process on loopback, spoken to over raw sockets.

mod common;

use oomguard::upload::tus::encode_metadata;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running `oomguard collect`, its stdout collected line by line.
struct Collect {
    child: Child,
    addr: String,
    out: Arc<Mutex<String>>,
}

impl Collect {
    fn start(dir: &Path, extra: &[&str]) -> Collect {
        let addr = format!("127.0.0.1:{}", common::free_port());
        let mut child = Command::new(common::oomguard_bin())
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
    fn wait_for(&self, what: &str) {
        for _ in 0..600 {
            if self.out.lock().unwrap().contains(what) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("no {what:?} on the collector's stdout: {}", self.out());
    }

    fn out(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// The process's peak resident set, in KiB.
    fn vm_hwm_kb(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// One request on its own connection: (status, response head, body).
    fn request(
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
    fn upload(&self, incident: &str, kind: &str, data: &[u8]) {
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
    fn stop(mut self) {
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

/// A report in the analyser's schema with `n` leak groups and as many dominators, each with
/// a reference path of five steps (about 1 KB per group).
fn big_report(n: usize) -> Vec<u8> {
    let mut o = Vec::with_capacity(n * 1100);
    o.extend_from_slice(br#"{"runningInfo":{"appVersion":"9.9.9"},"gcPaths":["#);
    let step = r#"{"reference":"com.example.Holder.field","referenceType":"instance field","declaredClass":"com.example.Holder"}"#;
    let path = [step; 5].join(",");
    for i in 0..n {
        if i > 0 {
            o.push(b',');
        }
        write!(
            o,
            r#"{{"instanceCount":{i},"leakReason":"destroyed Activity","gcRoot":"Local variable","signature":"sig{i:037}","path":[{path}],"className":"com.example.Leak{i}","retainedSize":{}}}"#,
            i * 100
        )
        .unwrap();
    }
    o.extend_from_slice(br#"],"dominators":["#);
    for i in 0..n {
        if i > 0 {
            o.push(b',');
        }
        write!(
            o,
            r#"{{"className":"com.example.Big{i}","retainedSize":{i},"count":1,"gcRoot":"Local variable","signature":"dom{i:037}","path":[{path}]}}"#
        )
        .unwrap();
    }
    o.extend_from_slice(b"]}");
    o
}

/// A 40 MB report.json, the index asked for four times and the report fetched whole: the
/// collector's peak RSS stays within a small multiple of what one small report took. (It
/// used to parse every report in full for each index, and read whole files for a GET: 1 GB
/// and more.)
#[test]
fn memory_stays_bounded_with_a_huge_report() {
    let tmp = common::fast_tmp();
    let c = Collect::start(tmp.path(), &[]);
    c.upload("1000-small", "meta", br#"{"reason":"heap three strikes"}"#);
    c.upload("1000-small", "report", &big_report(20));
    c.wait_for("received report 1000-small");
    let (st, _, page) = c.request("GET", "/", &[], &mut &b""[..], 0);
    assert_eq!(st, 200);
    assert!(String::from_utf8_lossy(&page).contains(&format!("sig{:037}", 19)));
    let baseline = c.vm_hwm_kb();

    let big = big_report(40_000);
    assert!(big.len() > 40 << 20, "{}", big.len());
    c.upload("2000-big", "report", &big);
    c.wait_for("received report 2000-big");
    for _ in 0..4 {
        let (st, _, page) = c.request("GET", "/", &[], &mut &b""[..], 0);
        assert_eq!(st, 200);
        let page = String::from_utf8_lossy(&page);
        // The largest groups of the big report are summarised, the small one is still listed.
        assert!(
            page.contains(&format!("sig{:037}", 39_999)),
            "{}",
            &page[..2000.min(page.len())]
        );
        assert!(page.contains("1000-small"));
    }
    let (st, _, got) = c.request(
        "GET",
        "/incidents/2000-big/report.json",
        &[],
        &mut &b""[..],
        0,
    );
    assert_eq!(st, 200);
    assert!(
        got == big,
        "the report served differs from the one uploaded"
    );
    let peak = c.vm_hwm_kb();
    eprintln!(
        "collector peak RSS: {baseline} KiB after a small report, {peak} KiB after the 40 MB one"
    );
    assert!(
        peak <= 3 * baseline,
        "peak RSS {peak} KiB, more than 3 x the {baseline} KiB after a small report"
    );
    c.stop();
}

/// `--print` writes a report's reason and signatures to a terminal: escape sequences and other
/// control characters in them (a title change, a screen clear, a C1 CSI) are not written.
#[test]
fn print_strips_control_characters() {
    let tmp = common::fast_tmp();
    let c = Collect::start(tmp.path(), &[]);
    c.upload(
        "3000-esc",
        "meta",
        "{\"reason\":\"heap \\u001b]0;owned\\u0007\\u001b[2Jred\\u009b31m\\r\\nfake line\"}"
            .as_bytes(),
    );
    c.upload(
        "3000-esc",
        "report",
        "{\"gcPaths\":[{\"signature\":\"sig\\u001b[8m\",\"leakReason\":\"why\\u001b[1A\",\"instanceCount\":3}]}"
            .as_bytes(),
    );
    c.wait_for("received report 3000-esc");
    let out = c.out();
    let line = out
        .lines()
        .find(|l| l.contains("received report 3000-esc"))
        .unwrap()
        .to_string();
    assert!(
        !line.chars().any(|ch| ch.is_control()),
        "control characters written: {line:?}"
    );
    assert!(
        line.contains("red") && line.contains("fake line") && line.contains("sig"),
        "{line:?}"
    );
    c.stop();
}
