//! The memory-cgroup trigger in a real Java 17 JVM put into a real memory cgroup with a limit:
//! the JVM takes native memory until its cgroup's working set nears the limit, and the agent's
//! `cgroup_memory` verdict goes through the incident path. Skipped, with a printed reason,
//! where no memory cgroup can be made (not root, no controller, a read-only hierarchy).

#[path = "common/cgroup.rs"]
mod cgroup;
mod common;

use common::{cdylib_dir, test_app_classes};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Fast polls; the default cgroup thresholds (85 %, three ascending polls).
const POLICY: &str = r#"{"version": 3, "poll_interval_ms": 100, "dump": {"min_free_disk_mb": 0}}"#;

const LIMIT: u64 = 320 << 20;

#[test]
fn a_jvm_nearing_its_memory_cgroup_limit_gets_a_cgroup_memory_verdict() {
    let cg = match cgroup::Cgroup::new("memory", "grow") {
        Ok(c) => c,
        Err(why) => {
            println!("SKIPPED a_jvm_nearing_its_memory_cgroup_limit_gets_a_cgroup_memory_verdict: no memory cgroup can be made here: {why}");
            return;
        }
    };
    cg.limit_memory(LIMIT).expect("set the limit");
    let work = tempfile::Builder::new()
        .prefix("oomguard-cgroup-")
        .tempdir()
        .unwrap();
    let data = work.path().join("data");
    std::fs::write(work.path().join("policy.json"), POLICY).unwrap();
    let mut c = cg.command("java");
    c.args([
        "-Xmx64m",
        "-XX:MaxDirectMemorySize=1g",
        "-Ddying.growMb=600",
        "-Ddying.stepMs=150",
        "-Ddying.growPercent=90",
    ])
    .arg(format!("-Djava.library.path={}", cdylib_dir().display()))
    .arg("-cp")
    .arg(test_app_classes("DyingApp"))
    .args(["DyingApp", "grow"])
    .arg(&data)
    .arg(work.path().join("policy.json"))
    // Files, not pipes: the agent's analyser child inherits them and may outlive the JVM.
    .stdout(std::fs::File::create(work.path().join("stdout")).unwrap())
    .stderr(std::fs::File::create(work.path().join("stderr")).unwrap());
    let t0 = Instant::now();
    let mut child = c.spawn().expect("java starts");
    let status_file = data.join("status.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut status = Value::Null;
    while Instant::now() < deadline {
        if let Ok(b) = std::fs::read(&status_file) {
            if let Ok(v) = serde_json::from_slice::<Value>(&b) {
                status = v;
                if status["last_verdict"].is_object() {
                    break;
                }
            }
        }
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    cg.kill_all();
    let read = |n: &str| std::fs::read_to_string(work.path().join(n)).unwrap_or_default();
    let (stdout, stderr) = (read("stdout"), read("stderr"));
    let state = status["cgroup_memory"].as_str().unwrap_or("");
    assert!(
        state.starts_with("on: cgroup") && state.contains(&*cg.dir.to_string_lossy()),
        "the agent reads the test's cgroup: {state:?}\n{stdout}\n{stderr}"
    );
    assert!(state.ends_with("limit 320 MB"), "{state}");
    let v = &status["last_verdict"];
    assert_eq!(
        v["verdict"]["kind"], "cgroup_memory",
        "{status:#}\n{stdout}\n{stderr}"
    );
    let reason = v["verdict"]["reason"].as_str().unwrap();
    assert!(
        reason
            .starts_with("cgroup memory over 85% of its 320 MB limit for 3 polls without falling"),
        "{reason}"
    );
    let ev = v["verdict"]["evidence"].as_array().unwrap();
    assert_eq!(ev.len(), 3);
    for s in ev {
        assert_eq!(s["cgroup_limit"], LIMIT);
        assert!(
            s["cgroup_working_set"].as_u64().unwrap() * 100 > LIMIT * 85,
            "{s}"
        );
    }
    // The same incident path as a heap verdict: dumped (or reported without one, saying why).
    let action = v["action"]["action"].as_str().unwrap();
    assert!(
        action == "dumped" || action == "reported",
        "{:#}",
        v["action"]
    );
    let incidents: Vec<Value> = std::fs::read_dir(data.join("spool/incidents"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("incident.json")).ok())
        .map(|b| serde_json::from_slice::<Value>(&b).unwrap())
        .collect();
    assert!(
        incidents
            .iter()
            .any(|i| i["body"]["reason"].as_str() == Some(reason)),
        "{incidents:#?}"
    );
    println!(
        "{reason}; action: {}; {:.1} s after the JVM started",
        v["action"],
        t0.elapsed().as_secs_f64()
    );
}
