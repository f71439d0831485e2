//! The agent inside a real Java 17 JVM: `java/dev/oomguard/OomGuard.java` and
//! `java/testapps/LeakyApp.java` compiled with javac, run with `-Xmx256m` and the
//! `liboomguard.so` of this build.

mod common;

use common::{run_leaky, run_leaky_jvm, run_leaky_limited, LeakyRun};
use serde_json::Value;

fn verdict(r: &LeakyRun) -> &Value {
    &r.status["last_verdict"]["verdict"]
}

fn done(r: LeakyRun) {
    if let Some(p) = r.data_dir.parent() {
        let _ = std::fs::remove_dir_all(p);
    }
}

fn assert_clean_run(r: &LeakyRun) {
    assert_eq!(
        r.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    assert!(r.stdout.contains("start rc=0"), "{}", r.stdout);
    assert!(r.stdout.contains("second start rc=1"), "{}", r.stdout);
    assert!(r.stdout.contains("network rc=0"), "{}", r.stdout);
    assert!(
        r.stderr
            .contains("start refused: the agent is already running"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.contains("stop rc=0") && r.stdout.contains("stop again rc=2"),
        "{}",
        r.stdout
    );
}

#[test]
fn heap_verdict_after_exactly_three_ascending_polls_over_85_percent() {
    heap_verdict(&[], "hotspot");
}

/// The same through JNI `CallLongMethodA` on `Runtime`, the path ART uses.
#[test]
fn heap_verdict_with_heap_numbers_through_jni() {
    heap_verdict(&[("OOMGUARD_HEAP_VIA_JNI", "1")], "jni");
}

fn heap_verdict(env: &[(&str, &str)], method: &str) {
    let r = run_leaky(
        "heap",
        Some(r#"{"poll_interval_ms":200}"#),
        None,
        20,
        None,
        env,
    );
    assert_clean_run(&r);
    assert!(
        r.stderr
            .contains(&format!("heap numbers read through {method}")),
        "{}",
        r.stderr
    );
    let v = verdict(&r);
    assert_eq!(v["kind"], "heap", "{}\n{}", r.status, r.stderr);
    assert_eq!(v["threshold"], 85);
    let ev = v["evidence"].as_array().unwrap();
    assert_eq!(ev.len(), 3, "{v}");
    let max = ev[0]["heap_max"].as_u64().unwrap();
    assert_eq!(max, 256 << 20, "-Xmx256m on G1 reports 256 MB");
    let mut prev = 0;
    for (i, s) in ev.iter().enumerate() {
        let used = s["heap_used"].as_u64().unwrap();
        assert!(used * 100 > 85 * max, "sample {i} not over 85%: {s}");
        assert!(
            used * 100 <= 90 * max,
            "sample {i} over the fast-huge 90%: {s}"
        );
        assert!(used >= prev, "sample {i} fell: {v}");
        prev = used;
        if i > 0 {
            assert_eq!(
                s["seq"].as_u64().unwrap(),
                ev[i - 1]["seq"].as_u64().unwrap() + 1,
                "polls not consecutive"
            );
        }
    }
    // The verdict fired on the third strike: its poll is the last evidence poll.
    assert_eq!(r.status["verdicts"], 1);
    assert_eq!(r.status["last_verdict"]["page"], "LeakyActivity");
    assert_eq!(r.stderr.matches("verdict heap:").count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("for 3 polls without falling"),
        "{}",
        r.stderr
    );
    // status.json on disk, rewritten atomically, says the same (state "stopped" after stop).
    let disk: Value =
        serde_json::from_slice(&std::fs::read(r.data_dir.join("status.json")).unwrap()).unwrap();
    assert_eq!(disk["state"], "stopped");
    assert_eq!(disk["last_verdict"]["verdict"], *v);
    let temporaries: Vec<_> = std::fs::read_dir(&r.data_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| sys::fs::is_tmp_of(n, "status.json"))
        .collect();
    assert!(temporaries.is_empty(), "{temporaries:?}");
    done(r);
}

#[test]
fn fd_verdict_names_the_planted_kind_under_a_lowered_limit() {
    let r = run_leaky(
        "fd",
        Some(r#"{"poll_interval_ms":200}"#),
        None,
        20,
        Some(512),
        &[],
    );
    assert_clean_run(&r);
    let v = verdict(&r);
    assert_eq!(v["kind"], "fd", "{}\n{}", r.status, r.stderr);
    // 95 % of the soft limit 512, lower than 1000.
    assert_eq!(v["threshold"], 486);
    assert_eq!(v["evidence"].as_array().unwrap().len(), 3);
    let inv = &r.status["last_verdict"]["inventory"];
    assert_eq!(inv["kind"], "fd");
    let top = &inv["groups"][0];
    assert!(
        top["name"].as_str().unwrap().ends_with("/planted-leak.dat"),
        "{inv}"
    );
    assert!(top["count"].as_u64().unwrap() > 450, "{inv}");
    assert!(
        r.stderr.contains("verdict fd:") && r.stderr.contains("planted-leak.dat ×"),
        "{}",
        r.stderr
    );
    done(r);
}

#[test]
fn thread_verdict_names_leaky_worker_n_with_java_stacks() {
    // -Xcheck:jni: HotSpot warns about leaked local references, unchecked exceptions and bad
    // JNI use; the stack listing on 800 threads must cause none of it.
    let r = run_leaky_jvm(
        &["-Xcheck:jni"],
        "threads",
        Some(r#"{"poll_interval_ms":200}"#),
        None,
        20,
        None,
        &[],
    );
    assert_clean_run(&r);
    let jni_warnings: Vec<&str> = r
        .stdout
        .lines()
        .chain(r.stderr.lines())
        .filter(|l| l.contains("WARNING") && l.contains("JNI"))
        .collect();
    assert!(jni_warnings.is_empty(), "{jni_warnings:?}");
    let v = verdict(&r);
    assert_eq!(v["kind"], "threads", "{}\n{}", r.status, r.stderr);
    // The Java threads were listed for the incident (under -Xcheck:jni, 800 of them and more).
    let listed = r
        .stderr
        .lines()
        .find(|l| l.contains("Java threads listed for the incident"))
        .unwrap_or_else(|| panic!("no listing logged:\n{}", r.stderr));
    let field = |k: &str| -> u64 {
        listed
            .split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.parse().ok())
            .unwrap_or_else(|| panic!("no {k} in {listed}"))
    };
    assert!(field("threads=") > 800, "{listed}");
    eprintln!("{listed}");
    assert_eq!(v["threshold"], 750);
    let inv = &r.status["last_verdict"]["inventory"];
    assert_eq!(inv["groups"][0]["name"], "leaky-worker-N", "{inv}");
    assert_eq!(inv["groups"][0]["count"], 800, "{inv}");
    let stacks = inv["java_stacks"].as_array().unwrap();
    assert!(!stacks.is_empty(), "{inv}");
    assert!(stacks[0]["example_thread"]
        .as_str()
        .unwrap()
        .starts_with("leaky-worker-"));
    let frames: Vec<&str> = stacks[0]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(frames.iter().any(|f| f.contains("LeakyApp")), "{frames:?}");
    // The workers park 41 calls of `LeakyApp.parkDeep` deep (`WORKER_DEPTH` 40, and the one
    // that waits): a listing keeps its top 32 frames and then says how many it left out.
    assert_eq!(frames.len(), 33, "{frames:?}");
    assert!(frames[31].contains("LeakyApp.parkDeep"), "{frames:?}");
    let more: usize = frames[32]
        .strip_prefix("... ")
        .and_then(|m| m.strip_suffix(" more"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of the frames left out: {frames:?}"));
    // At least the parkDeep calls past the 32nd line, then the lambda and `Thread.run`.
    let deep_listed = frames
        .iter()
        .filter(|f| f.contains("LeakyApp.parkDeep"))
        .count();
    assert!(
        more >= 41 - deep_listed + 2,
        "{more} more, {deep_listed} listed: {frames:?}"
    );
    assert!(
        r.stderr.contains("top: leaky-worker-N ×800"),
        "{}",
        r.stderr
    );
    done(r);
}

#[test]
fn dump_now_is_a_manual_verdict() {
    let r = run_leaky(
        "dump",
        Some(r#"{"poll_interval_ms":200}"#),
        None,
        10,
        None,
        &[],
    );
    assert_clean_run(&r);
    assert!(r.stdout.contains("dumpNow rc=0"));
    assert_eq!(verdict(&r)["kind"], "manual");
    assert!(verdict(&r)["reason"]
        .as_str()
        .unwrap()
        .contains("button pressed"));
    // The incident lists the process's Java threads by id and name (the names of the threads
    // a report's paths start on), read through JNI when the verdict came.
    let incidents: Vec<_> = std::fs::read_dir(r.data_dir.join("spool/incidents"))
        .expect("an incident")
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    let inc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(incidents[0].join("incident.json")).unwrap())
            .unwrap();
    // HotSpot's dumper took it (the name the incident's readers filter by).
    assert_eq!(inc["body"]["runningInfo"]["dumper"], "hotspot-in-process");
    let threads = common::java_threads(&inc["body"]["runningInfo"]);
    assert_eq!(common::java_thread_id(&threads, "main"), 1, "{threads:?}");
    let helper: i64 = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("helper id="))
        .and_then(|v| v.parse().ok())
        .expect("the helper's id");
    assert_eq!(common::java_thread_id(&threads, "leaky-helper"), helper);
    done(r);
}

/// The dump cannot be written (every file the JVM writes is limited to 1.5 MB, so the mini
/// file's writes through the hook fail with EFBIG, as on a full disk) and the full dump is not
/// kept: the app runs on, nothing is left in staging, and the verdict becomes an incident
/// without a dump whose `dumpError` says why.
#[test]
fn a_dump_that_cannot_be_written_still_reports_the_verdict() {
    let r = run_leaky_limited(
        &[],
        &["--fsize=1500000".to_string()],
        "dump",
        Some(
            r#"{"poll_interval_ms":200,"dump":{"min_free_disk_mb":0,"min_free_disk_heap_factor":0}}"#,
        ),
        None,
        10,
        &[],
    );
    assert_clean_run(&r);
    let action = &r.status["last_verdict"]["action"];
    assert_eq!(action["action"], "reported", "{}\n{}", r.status, r.stderr);
    let detail = action["detail"].as_str().unwrap();
    assert!(detail.contains("File too large"), "{detail}");
    assert!(
        r.stderr.contains("this dump leaves no file"),
        "{}",
        r.stderr
    );
    let spool = r.data_dir.join("spool");
    let staged: Vec<_> = std::fs::read_dir(spool.join("staging"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(staged.is_empty(), "left in staging: {staged:?}");
    // No upload URL: the incident waits in the spool, analysed (nothing to analyse).
    let incidents: Vec<_> = std::fs::read_dir(spool.join("incidents"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(incidents.len(), 1);
    let rec: Value =
        serde_json::from_slice(&std::fs::read(incidents[0].path().join("incident.json")).unwrap())
            .unwrap();
    let body = &rec["body"];
    assert_eq!(body["state"], "analysed", "{rec}");
    // status.json's queue says so (issue 39 item 6).
    let q = &r.status["queue"];
    assert_eq!(
        (q["wired"].as_bool(), q["pending"].as_u64()),
        (Some(true), Some(1)),
        "{q:#}"
    );
    assert!(q["pending_bytes"].as_u64().unwrap_or(0) > 0, "{q:#}");
    assert!(
        q["waiting_for"]
            .as_str()
            .unwrap_or_default()
            .contains("upload URL"),
        "{q:#}"
    );
    assert!(
        body["dumpError"]
            .as_str()
            .unwrap_or_default()
            .contains("the dump left no file"),
        "{rec}"
    );
    assert!(!incidents[0].path().join("mini.hprof").exists());
    done(r);
}

#[test]
fn panic_in_the_agent_loop_leaves_the_jvm_running() {
    let r = run_leaky(
        "idle",
        Some(r#"{"poll_interval_ms":100}"#),
        None,
        2,
        None,
        &[("OOMGUARD_TEST_PANIC", "poll")],
    );
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("ALIVE after idle"));
    assert!(
        r.stderr
            .contains("agent poll panicked: forced panic at poll"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("sampling stopped (the app is unaffected)"),
        "{}",
        r.stderr
    );
    assert_eq!(r.status["state"], "disabled");
    assert_eq!(r.status["panics"], 3);
    assert!(r.stdout.contains("stop rc=0"));
    done(r);
}

#[test]
fn panic_in_jni_entries_becomes_an_error_code() {
    let r = run_leaky(
        "idle",
        None,
        None,
        1,
        None,
        &[("OOMGUARD_TEST_PANIC", "status")],
    );
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.status, serde_json::json!({"state": "error"}));
    assert!(
        r.stderr.contains("status panicked: forced panic in status"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.contains("ALIVE after idle") && r.stdout.contains("stop rc=0"));
    done(r);

    let r = run_leaky(
        "idle",
        None,
        None,
        1,
        None,
        &[("OOMGUARD_TEST_PANIC", "start")],
    );
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("start rc=4"), "{}", r.stdout);
    assert!(r.stdout.contains("stop rc=2"), "{}", r.stdout);
    assert!(r.stderr.contains("start panicked"), "{}", r.stderr);
    done(r);

    let r = run_leaky(
        "idle",
        None,
        None,
        1,
        None,
        &[("OOMGUARD_TEST_PANIC", "setNetwork")],
    );
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("network rc=4"), "{}", r.stdout);
    assert!(r.stdout.contains("ALIVE after idle") && r.stdout.contains("stop rc=0"));
    assert!(r.stderr.contains("setNetwork panicked"), "{}", r.stderr);
    done(r);
}

#[test]
fn bad_policies_at_start_are_rejected_with_the_reason() {
    let cases = [
        (r#"{"version": 2, "heap": {"strikes": 3"#, "policy is not a valid JSON object: EOF while parsing"),
        (r#"{"heap": {"ascending": "yes"}}"#, "heap.ascending: expected true or false, found a string"),
        (r#"{"fd": {"max": 3}, "poll_interval_ms": 0}"#, "poll_interval_ms: 0 is out of range 100..=600000 (byte 39); fd.max: 3 is out of range 16..=1048576 (byte 15)"),
    ];
    for (policy, reason) in cases {
        let r = run_leaky("idle", Some(policy), None, 1, None, &[]);
        assert_eq!(r.code, Some(0));
        assert!(r.stderr.contains(reason), "{policy}: {}", r.stderr);
        assert!(
            r.stderr.contains("the last good policy stays active"),
            "{}",
            r.stderr
        );
        assert_eq!(
            r.status["policy_version"], 1,
            "the built-in default is active"
        );
        assert!(r.status["policy_source"]
            .as_str()
            .unwrap()
            .contains("rejected"));
        done(r);
    }
    // Unknown fields are logged and ignored.
    let r = run_leaky(
        "idle",
        Some(r#"{"version": 3, "shiny": true}"#),
        None,
        1,
        None,
        &[],
    );
    assert!(
        r.stderr
            .contains("policy field shiny is unknown to this agent; ignored"),
        "{}",
        r.stderr
    );
    assert_eq!(r.status["policy_version"], 3);
    done(r);
}

/// Read an HTTP request's head from `s` (up to its blank line, or until the peer closes).
fn skip_request_head(s: &std::net::TcpStream) {
    use std::io::BufRead;
    let mut r = std::io::BufReader::new(s);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
    }
}

/// One scripted HTTP response from a server on 127.0.0.1; returns the URL.
fn serve_once(body: String, signature: Option<String>) -> String {
    use std::io::Write;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/policy.json", l.local_addr().unwrap());
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        skip_request_head(&s);
        let mut out = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nETag: \"e1\"\r\nConnection: close\r\n",
            body.len()
        );
        if let Some(sig) = signature {
            out.push_str(&format!("X-Oomguard-Signature: {sig}\r\n"));
        }
        out.push_str("\r\n");
        out.push_str(&body);
        let _ = s.write_all(out.as_bytes());
    });
    url
}

/// The public key the tests' remote policies are signed with (base64, as `OomGuard.start`
/// takes it).
fn test_public_key() -> String {
    use base64::Engine as _;
    let key = ed25519_dalek::SigningKey::from_bytes(&[42u8; 32]);
    base64::engine::general_purpose::STANDARD.encode(key.verifying_key().to_bytes())
}

/// Seconds since the epoch.
fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The last good policy's body in the agent's cache file, if any.
fn cached_body(data_dir: &std::path::Path) -> Option<String> {
    let raw = std::fs::read(data_dir.join("policy.cache.json")).ok()?;
    let v: Value = serde_json::from_slice(&raw).ok()?;
    v["body"].as_str().map(str::to_string)
}

#[test]
fn remote_policy_must_be_signed_newer_and_valid() {
    use base64::Engine as _;
    use ed25519_dalek::{Signer, SigningKey};
    let key = SigningKey::from_bytes(&[42u8; 32]);
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let public = test_public_key();
    let sign = |body: &str| Some(b64(&key.sign(body.as_bytes()).to_bytes()));
    let now = now_s();
    let remote_body = |version: u32| {
        format!(
            r#"{{"version":{version},"issued_at_s":{},"expires_at_s":{},"poll_interval_ms":150,"heap":{{"strikes":4}},"remote":{{"url":null}},"upload":{{"url":null}}}}"#,
            now - 60,
            now + 86_400
        )
    };

    // (what the server sends, the log line expected, the policy version active at the end)
    let good = remote_body(7);
    let older = remote_body(1);
    let cases: Vec<(String, Option<String>, &str, u64)> = vec![
        (good.clone(), None, "policy signature is missing", 2),
        (
            remote_body(8),
            sign(&good),
            "policy signature does not match the body",
            2,
        ),
        (
            older.clone(),
            sign(&older),
            "policy version 1 is not newer than the active version 2",
            2,
        ),
        (
            r#"{"version":9,"heap":{"strikes":0}}"#.into(),
            sign(r#"{"version":9,"heap":{"strikes":0}}"#),
            "heap.strikes: 0 is out of range",
            2,
        ),
        (
            good.clone(),
            sign(&good),
            "policy v7 active (from remote, was v2)",
            7,
        ),
    ];
    for (body, sig, line, version) in cases {
        let url = serve_once(body, sig);
        let start = format!(r#"{{"version":2,"poll_interval_ms":200,"remote":{{"url":"{url}"}}}}"#);
        let r = run_leaky("idle", Some(&start), Some(&public), 1, None, &[]);
        assert_eq!(r.code, Some(0));
        assert!(
            r.stderr.contains(line),
            "expected {line:?} in:\n{}",
            r.stderr
        );
        assert_eq!(r.status["policy_version"], version, "{}", r.status);
        let cached = cached_body(&r.data_dir);
        if version == 7 {
            assert_eq!(r.status["policy_source"], "remote");
            assert_eq!(r.status["poll_interval_ms"], 150);
            assert!(cached.unwrap().contains("\"version\":7"));
        } else {
            assert_eq!(cached, None, "a rejected policy was cached");
        }
        done(r);
    }
}

/// `stop` from the app while the agent is stuck in a policy fetch (the server holds it open; the
/// policy allows 120 s) must return without waiting for the fetch, and the stopping agent must
/// not be joined by a second one: `start` is refused until it has ended, and works after.
/// The server answers only once the app has written the release file, after its `stop` and
/// `start` returned: if `stop` waited for the fetch, the server gives up after a minute instead.
#[test]
fn stop_does_not_wait_for_a_hung_policy_fetch_and_start_waits_for_the_old_agent() {
    use std::io::{Read, Write};
    let marks = tempfile::tempdir().unwrap();
    let started = marks.path().join("fetch-started");
    let release = marks.path().join("release");
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/policy.json", l.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let (started2, release2) = (started.clone(), release.clone());
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        skip_request_head(&s);
        std::fs::write(&started2, b"").unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_millis(20)))
            .unwrap();
        let mut outcome = "the server gave up: stop waited for the fetch";
        for _ in 0..3000 {
            if release2.exists() {
                outcome = "released after stop returned";
                break;
            }
            match s.read(&mut [0u8; 1]) {
                Ok(0) => {
                    outcome = "the client went away";
                    break;
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                _ => {
                    outcome = "the client went away";
                    break;
                }
            }
        }
        let _ = s.write_all(b"HTTP/1.1 503 X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        let _ = tx.send(outcome);
    });
    let policy =
        format!(r#"{{"poll_interval_ms":200,"remote":{{"url":"{url}","timeout_ms":120000}}}}"#);
    let r = run_leaky_jvm(
        &[
            &format!("-Dleaky.fetchStarted={}", started.display()),
            &format!("-Dleaky.release={}", release.display()),
        ],
        "restart",
        Some(&policy),
        Some(&test_public_key()),
        1,
        None,
        &[],
    );
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        rx.recv().unwrap(),
        "released after stop returned",
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    for line in [
        "fetch started=true",
        "first stop rc=0",
        "stop while stopping rc=2",
        "restart rc=1",
        "dumpNow after stop rc=2",
        "start once the fetch ended rc=0",
        "stop rc=0",
        "stop again rc=2",
    ] {
        assert!(r.stdout.contains(line), "{line:?} in:\n{}", r.stdout);
    }
    assert!(
        r.stderr
            .contains("start refused: the agent is still stopping"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("HTTP status 503"), "{}", r.stderr);
    done(r);
}

/// The policy host accepts the fetch and never answers (black-holed; the policy allows it
/// 120 s): the agent, whose fetch runs on its `oomguard-io` thread, keeps sampling meanwhile.
/// Before, the fetch ran on the sampling thread and no poll was taken until it gave up.
#[test]
fn samples_keep_coming_while_the_policy_host_does_not_answer() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/policy.json", l.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Ok((s, _)) = l.accept() else { return };
        skip_request_head(&s);
        let _ = tx.send(());
        // Never answer; hold the connection until the test process ends.
        std::thread::sleep(std::time::Duration::from_secs(3600));
        drop(s);
    });
    let policy =
        format!(r#"{{"poll_interval_ms":200,"remote":{{"url":"{url}","timeout_ms":120000}}}}"#);
    let r = run_leaky(
        "idle",
        Some(&policy),
        Some(&test_public_key()),
        3,
        None,
        &[],
    );
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert!(rx.try_recv().is_ok(), "the fetch never reached the server");
    let polls = r.status["polls"].as_u64().unwrap_or(0);
    assert!(
        polls >= 3,
        "{polls} polls while the fetch hung:\n{}",
        r.status
    );
    done(r);
}
