//! Test-support exports for class `dev.oomguard.testing.ArtDumpBench` (the smali program of
//! `tests/art/app`, run on Debian's ART 11 by `examples/art_dump_bench.rs` for
//! `scripts/bench.sh dump`): ART's in-process dump against the ART fork dumper, on one heap.
//!
//! `static native int parse(String)`: a decimal `int` (the test core library has no
//! `Integer.parseInt`); -1 if it is not one.
//!
//! `static native String run(String dir, int rounds)`: an untimed dump, then `rounds` rounds
//! (the order rotated each round) of three in-process
//! dumps (`art::hprof::DumpHeap` on the calling thread, as `VMDebug.dumpHprofData` does: ART
//! suspends every Java thread for the whole dump), plain (no hook), through the tee with the
//! stripper on a thread of its own (ring), and through the tee stripping inside the hook (as
//! in the fork dumper's child); then `rounds` dumps by [`ArtForkDumper`] (API 30 sequence,
//! tee and stripper in the child, full file kept). Files go to `dir`; every one is removed
//! except the last fork dump's `fork.hprof` and `fork.mini.hprof`. Returns one JSON object,
//! or `{"error": …}`. Nothing panics across this boundary.

use super::call;
use crate::dump::art::{dump_heap_in_process, resolve, ArtForkDumper, ArtSymbols};
use crate::dump::hotspot::RING_BYTES;
use crate::dump::{DumpRequest, Dumper};
use crate::hook::{tee::ART_LIBS, Tee, TeeConfig};
use hprof::Level;
use jni::objects::{JClass, JString};
use jni::sys::{jint, jstring};
use jni::JNIEnv;
use serde_json::{json, Value};
use std::ffi::CString;
use std::path::Path;
use std::time::{Duration, Instant};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// This process's resident set (kB), from /proc/self/status: what a fork copies page tables of.
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// One in-process dump; `ring`: `None` unhooked, `Some(bytes)` through the tee with that ring
/// (0: strip inside the hook).
fn in_process(syms: &ArtSymbols, dir: &Path, ring: Option<usize>) -> Result<Value, String> {
    let full = dir.join("inproc.hprof");
    let mini = dir.join("inproc.mini.hprof");
    let _ = std::fs::remove_file(&full);
    let _ = std::fs::remove_file(&mini);
    let tee = match ring {
        None => None,
        Some(ring_bytes) => {
            let t = Tee::install(ART_LIBS).map_err(|e| e.to_string())?;
            if let Err(e) = t.arm(&TeeConfig {
                full_path: full.clone(),
                mini_path: Some(mini.clone()),
                level: Level::Arrays,
                keep_full: true,
                ring_bytes,
            }) {
                let _ = t.uninstall();
                return Err(e.to_string());
            }
            Some(t)
        }
    };
    let path = CString::new(full.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
    let cpu0 = thread_cpu();
    let t0 = Instant::now();
    // SAFETY: called from a JNI native method (an attached thread in its native state), with
    // symbols resolved for this process's libart.
    unsafe { dump_heap_in_process(syms, &path) };
    let pause = t0.elapsed();
    let cpu = thread_cpu() - cpu0;
    let report = tee.as_ref().map(|t| t.disarm(Some(&mini)));
    let with_disarm = t0.elapsed();
    if let Some(t) = tee {
        t.uninstall().map_err(|e| e.to_string())?;
    }
    let full_bytes = file_len(&full);
    let mini_json = match &report {
        None => Value::Null,
        Some(r) => match &r.mini {
            Some(Ok(s)) => {
                json!({"ok": true, "output_bytes": s.output_bytes, "file_bytes": file_len(&mini),
                "caught_by": r.caught_by, "tee_full_bytes": r.full_bytes})
            }
            Some(Err(e)) => return Err(format!("the tee's mini file failed: {e}")),
            None => return Err("the tee wrote no mini file".into()),
        },
    };
    let _ = std::fs::remove_file(&full);
    let _ = std::fs::remove_file(&mini);
    if full_bytes == 0 {
        return Err("DumpHeap wrote nothing".into());
    }
    Ok(json!({
        "mode": match ring { None => "plain", Some(0) => "tee-inline", Some(_) => "tee-ring" },
        "pause_ms": ms(pause),
        "cpu_ms": ms(cpu),
        "with_disarm_ms": ms(with_disarm),
        "full_bytes": full_bytes,
        "mini": mini_json,
    }))
}

fn run(env: &mut JNIEnv, dir: &JString, rounds: jint) -> Result<Value, String> {
    let dir = call::string(env, dir).map_err(|e| e.to_string())?;
    let dir = Path::new(&dir);
    let rounds = rounds.max(1) as usize;
    let syms = resolve("libart.so", 30).map_err(|e| e.to_string())?;
    // One untimed dump first (ART's first dump in a process does one-time work), then the three
    // ways in an order rotated each round, so that none is always first.
    in_process(&syms, dir, None)?;
    let modes = [None, Some(RING_BYTES), Some(0)];
    let mut inproc = Vec::new();
    for r in 0..rounds {
        for i in 0..modes.len() {
            inproc.push(in_process(&syms, dir, modes[(r + i) % modes.len()])?);
        }
    }
    let mut forks = Vec::new();
    let mut dumper = ArtForkDumper::new(30);
    for r in 0..rounds {
        let req = DumpRequest {
            full_path: dir.join("fork.hprof"),
            mini_path: Some(dir.join("fork.mini.hprof")),
            level: Level::Arrays,
            keep_full: true,
            deadline: Duration::from_secs(900),
        };
        let rss = rss_kb();
        let out = dumper.dump(&req).map_err(|e| e.to_string())?;
        let mini = match &out.mini {
            Some(Ok(s)) => json!({"ok": true, "output_bytes": s.output_bytes}),
            Some(Err(e)) => return Err(format!("fork dump's mini file: {e}")),
            None => return Err("the fork dump wrote no mini file".into()),
        };
        let phases = dumper.last_pause_phases().ok_or("no pause phases")?;
        forks.push(json!({
            // From the request for the critical section, the wait for a running GC included
            // (the bench subtracts gc_wait_ms itself).
            "pause_ms": ms(out.pause + out.gc_wait),
            "gc_wait_ms": ms(phases.gc_wait),
            "suspend_ms": ms(phases.suspend),
            "fork_ms": ms(phases.fork),
            "resume_ms": ms(phases.resume),
            "total_ms": ms(out.total),
            "full_bytes": out.full_bytes,
            "rss_kb": rss,
            "mini": mini,
        }));
        if r + 1 < rounds {
            let _ = std::fs::remove_file(&req.full_path);
            let _ = std::fs::remove_file(dir.join("fork.mini.hprof"));
        }
    }
    Ok(json!({ "in_process": inproc, "fork": forks, "rss_kb": rss_kb() }))
}

/// `ArtDumpBench.run(String dir, int rounds)`.
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_testing_ArtDumpBench_run<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    dir: JString<'l>,
    rounds: jint,
) -> jstring {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut env, &dir, rounds)));
    let v = match r {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => json!({ "error": e }),
        Err(_) => json!({ "error": "panic in the probe" }),
    };
    env.new_string(v.to_string())
        .map(|s| s.into_raw())
        .unwrap_or(std::ptr::null_mut())
}

/// `ArtDumpBench.parse(String)`: a decimal `int`, or -1.
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_testing_ArtDumpBench_parse<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    s: JString<'l>,
) -> jint {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if s.is_null() {
            return -1;
        }
        call::string(&mut env, &s)
            .ok()
            .and_then(|v| v.trim().parse::<jint>().ok())
            .unwrap_or(-1)
    }))
    .unwrap_or(-1)
}
