//! Test-support exports for class `dev.oomguard.testing.DumpProbe`: take a HotSpot dump through
//! the tee (or without any hook) from a real JVM, so that tests can compare the files.
//!
//! `static native String dump(String fullPath, String miniPath, String level, boolean hooked)`
//! dumps the heap (`live`) to `fullPath`; if `hooked`, with the tee on `libjvm.so` writing the
//! mini file, else with every hook removed. The files are then renamed to
//! `fullPath.N.hooked|plain` and `miniPath.N` (N counts the calls), so that the Java side passes
//! the same strings every time and the heaps of consecutive dumps stay alike. It appends a JSON
//! report to `reports.jsonl` in the dump's directory and returns null, or the report if it is an
//! error (`{"error": …}`). Nothing panics across this boundary.

use super::call;
use crate::dump::hotspot::HotSpotDumper;
use crate::dump::{DumpRequest, Dumper};
use hprof::Level;
use jni::objects::{JClass, JString};
use jni::sys::{jboolean, jstring};
use jni::JNIEnv;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

static DUMPER: Mutex<Option<HotSpotDumper>> = Mutex::new(None);
static COUNT: Mutex<u64> = Mutex::new(0);

fn run(
    env: &mut JNIEnv,
    full: &JString,
    mini: &JString,
    level: &JString,
    hooked: bool,
) -> Result<serde_json::Value, String> {
    let full = call::string(env, full).map_err(|e| e.to_string())?;
    let mini = call::string(env, mini).map_err(|e| e.to_string())?;
    let level: Level = call::string(env, level)
        .map_err(|e| e.to_string())?
        .parse()?;
    let mut guard = DUMPER
        .lock()
        .map_err(|_| "probe state poisoned".to_string())?;
    if guard.is_none() {
        let vm = env.get_java_vm().map_err(|e| e.to_string())?;
        *guard = Some(HotSpotDumper::new(vm));
    }
    let d = guard.as_mut().ok_or("no dumper")?;
    if !hooked {
        d.unhook().map_err(|e| e.to_string())?;
    }
    let req = DumpRequest {
        full_path: PathBuf::from(&full),
        mini_path: hooked.then(|| PathBuf::from(&mini)),
        level,
        keep_full: true,
        deadline: Duration::from_secs(600),
    };
    let out = d.dump(&req).map_err(|e| e.to_string())?;
    let n = {
        let mut c = COUNT
            .lock()
            .map_err(|_| "probe counter poisoned".to_string())?;
        *c += 1;
        *c
    };
    let full_to = format!("{full}.{n}.{}", if hooked { "hooked" } else { "plain" });
    std::fs::rename(&full, &full_to).map_err(|e| format!("rename {full}: {e}"))?;
    let mini_to = format!("{mini}.{n}");
    let mini_json = match &out.mini {
        Some(Ok(s)) => {
            std::fs::rename(&mini, &mini_to).map_err(|e| format!("rename {mini}: {e}"))?;
            serde_json::json!({"ok": true, "path": mini_to, "output_bytes": s.output_bytes,
                "arrays_stripped": s.arrays_stripped})
        }
        Some(Err(why)) => serde_json::json!({"ok": false, "error": why}),
        None => serde_json::Value::Null,
    };
    Ok(serde_json::json!({
        "n": n,
        "hooked": hooked,
        "full": full_to,
        "full_bytes": out.full_bytes,
        "mini": mini_json,
        "caught_by": out.caught_by,
        "pause_ms": out.pause.as_secs_f64() * 1000.0,
    }))
}

/// Append a report line to `reports.jsonl` beside the dump (outside the Java heap, so that
/// reports do not change the heap between dumps).
fn log_report(full: &str, v: &serde_json::Value) {
    let dir = std::path::Path::new(full)
        .parent()
        .unwrap_or(std::path::Path::new("."));
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("reports.jsonl"))
    {
        let _ = std::io::Write::write_all(&mut f, format!("{v}\n").as_bytes());
    }
}

/// `DumpProbe.dump(String fullPath, String miniPath, String level, boolean hooked)`.
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_testing_DumpProbe_dump<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    full: JString<'l>,
    mini: JString<'l>,
    level: JString<'l>,
    hooked: jboolean,
) -> jstring {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(&mut env, &full, &mini, &level, hooked != 0)
    }));
    let v = match r {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => serde_json::json!({ "error": e }),
        Err(_) => serde_json::json!({ "error": "panic in the probe" }),
    };
    if let Ok(f) = call::string(&mut env, &full) {
        log_report(&f, &v);
    }
    if v.get("error").is_none() {
        // Success allocates nothing in the Java heap: the two dumps compared see the same heap.
        return std::ptr::null_mut();
    }
    env.new_string(v.to_string())
        .map(|s| s.into_raw())
        .unwrap_or(std::ptr::null_mut())
}

/// `DumpProbe.forkFrozen(int seconds)`: fork a child that only waits (a frozen copy-on-write
/// snapshot of this JVM, for an outside dumper such as `jhsdb jmap --binaryheap`), killed by
/// `alarm` after `seconds`. Returns `{"pid": …, "fork_us": …}` (the parent's pause), or
/// `{"error": …}`. The child runs no JNI and no Java: it sleeps in `pause()`.
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_testing_DumpProbe_forkFrozen<'l>(
    env: JNIEnv<'l>,
    _class: JClass<'l>,
    seconds: jni::sys::jint,
) -> jstring {
    let r = std::panic::catch_unwind(|| {
        let t0 = std::time::Instant::now();
        let child =
            crate::child::spawn(crate::dump::DUMP_CHILD_NAME, seconds.max(1) as u32, || {
                loop {
                    // SAFETY: a plain system call; the alarm ends the child.
                    unsafe { libc::pause() };
                }
            });
        let us = t0.elapsed().as_secs_f64() * 1e6;
        match child {
            Ok(c) => {
                let pid = c.pid;
                // The caller (a benchmark) kills and reaps it through its pid; keep the Child
                // from killing it on drop.
                std::mem::forget(c);
                serde_json::json!({ "pid": pid, "fork_us": us })
            }
            Err(e) => serde_json::json!({ "error": e.to_string() }),
        }
    })
    .unwrap_or_else(|_| serde_json::json!({ "error": "panic in the probe" }));
    env.new_string(r.to_string())
        .map(|s| s.into_raw())
        .unwrap_or(std::ptr::null_mut())
}

/// `DumpProbe.reap(int pid)`: kill (SIGKILL) and reap a child made by `forkFrozen`. Returns
/// true if it was ours and is gone.
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_testing_DumpProbe_reap<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
    pid: jni::sys::jint,
) -> jboolean {
    if pid <= 0 {
        return 0;
    }
    // SAFETY: signalling and waiting for one pid this process forked.
    let ok = unsafe {
        libc::kill(pid, libc::SIGKILL);
        let mut st = 0;
        loop {
            let r = libc::waitpid(pid, &mut st, 0);
            if r == pid {
                break true;
            }
            if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break false;
            }
        }
    };
    ok as jboolean
}

/// `LocalRefs.exercise(String dir, int checks, int dumps)`: call the HotSpot dumper's `check`
/// `checks` times and `dumpHeap` `dumps` times (to `dir/refs.hprof`, removed after each) from
/// this one native call, so that local references they leak pile up in its frame, where
/// `-Xcheck:jni` reports them. Returns null, or the error.
#[no_mangle]
pub extern "system" fn Java_dev_oomguard_testing_LocalRefs_exercise<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    dir: JString<'l>,
    checks: jni::sys::jint,
    dumps: jni::sys::jint,
) -> jstring {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<(), String> {
        let dir = call::string(&mut env, &dir).map_err(|e| e.to_string())?;
        let vm = env.get_java_vm().map_err(|e| e.to_string())?;
        let mut d = HotSpotDumper::new(vm);
        for _ in 0..checks {
            d.check().map_err(|e| e.to_string())?;
        }
        let path = format!("{dir}/refs.hprof");
        for _ in 0..dumps {
            crate::dump::hotspot::dump_heap(&mut env, &path, false).map_err(|e| e.to_string())?;
            std::fs::remove_file(&path).map_err(|e| e.to_string())?;
        }
        Ok(())
    }));
    let err = match r {
        Ok(Ok(())) => return std::ptr::null_mut(),
        Ok(Err(e)) => e,
        Err(_) => "panic in the probe".to_string(),
    };
    env.new_string(err)
        .map(|s| s.into_raw())
        .unwrap_or(std::ptr::null_mut())
}
