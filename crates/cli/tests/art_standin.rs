//! The ART fork dumper run for real against a stand-in for libart (`art_standin/libart.cpp`):
//! a C++ library built here with `clang++`, exporting the ART symbols the dumper resolves under
//! their real mangled names, loaded with `dlopen` as `libart.so` and resolved by the same code
//! path as on a device (the loader's list, the file's symbol tables, the load bias). Its locks
//! are real, it records the order of the calls, and its `DumpHeap` writes a real Android HPROF
//! (a fixture) through `open64`/`write`, which the tee hooks.
//!
//! Each test runs in a process of its own (this executable again, with one test selected):
//! the tee is one per process, the stand-in is one `libart.so`, and some tests change the
//! process's SIGCHLD disposition or reap children.
//!
//! What the stand-in cannot show is listed in `src/dump/art.rs`'s module docs.

mod common;

use hprof::Level;
use oomguard::dump::art::ArtForkDumper;
use oomguard::dump::{DumpRequest, Dumper};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

const INNER: &str = "ART_STANDIN_INNER";
const LIB: &str = "ART_STANDIN_LIB";

/// Build the stand-in with `flags` (once per variant), into this target's temporary directory.
fn build(flags: &[&str]) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let key = flags.join(" ");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.get_or_insert_with(HashMap::new).get(&key) {
        return p.clone();
    }
    let variant = if key.is_empty() {
        "plain".to_string()
    } else {
        key.replace(['-', ' ', '='], "_")
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("art-standin")
        .join(variant);
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/art_standin/libart.cpp");
    let tmp = dir.join(format!("libart.so.{}", std::process::id()));
    let out = Command::new("clang++")
        .args(["-shared", "-fPIC", "-O1", "-fuse-ld=lld", "-o"])
        .arg(&tmp)
        .arg(&src)
        .args(flags)
        .arg("-lpthread")
        .output()
        .expect("clang++ runs");
    assert!(
        out.status.success(),
        "clang++ failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let so = dir.join("libart.so");
    std::fs::rename(&tmp, &so).unwrap();
    built.as_mut().unwrap().insert(key, so.clone());
    so
}

/// Run test `name` alone in a new process with the stand-in built with `flags`.
fn run_inner(name: &str, flags: &[&str]) {
    let so = build(flags);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(INNER, name)
        .env(LIB, &so)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{name} in its own process: {:?}\n{text}",
        out.status
    );
}

/// A test that runs in a process of its own: `$body(&StandIn)` there.
macro_rules! isolated {
    ($name:ident, $flags:expr, $body:expr) => {
        #[test]
        fn $name() {
            match std::env::var(INNER) {
                Ok(n) if n == stringify!($name) => {
                    let lib = std::env::var(LIB).unwrap();
                    let body: fn(&StandIn) = $body;
                    body(&StandIn::load(Path::new(&lib)));
                }
                Ok(_) => {}
                Err(_) => run_inner(stringify!($name), $flags),
            }
        }
    };
}

/// The loaded stand-in and its test controls.
struct StandIn {
    handle: *mut libc::c_void,
}

impl StandIn {
    fn load(path: &Path) -> StandIn {
        let p = CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: our test library; its initialiser only records the pid.
        let handle = unsafe { libc::dlopen(p.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        assert!(!handle.is_null(), "dlopen {}", path.display());
        let s = StandIn { handle };
        s.set_source(&common::fixture("android/leak_service_binder.hprof"));
        s
    }

    fn sym(&self, name: &str) -> *mut libc::c_void {
        let n = CString::new(name).unwrap();
        // SAFETY: a valid handle and name.
        let f = unsafe { libc::dlsym(self.handle, n.as_ptr()) };
        assert!(!f.is_null(), "dlsym {name}");
        f
    }

    fn set_source(&self, path: &Path) {
        let p = CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: `standin_set_source(const char*)`, which copies the path.
        unsafe {
            std::mem::transmute::<*mut libc::c_void, extern "C" fn(*const libc::c_char)>(
                self.sym("standin_set_source"),
            )(p.as_ptr())
        };
    }

    fn set_int(&self, f: &str, v: i32) {
        // SAFETY: the stand-in's `void f(int)` controls.
        unsafe {
            std::mem::transmute::<*mut libc::c_void, extern "C" fn(libc::c_int)>(self.sym(f))(v)
        };
    }

    /// The parent's record of calls, then cleared.
    fn events(&self) -> String {
        // SAFETY: `const char* standin_events()`, a NUL-terminated static buffer; then the
        // `void standin_clear_events()` control.
        unsafe {
            let e = std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> *const libc::c_char>(
                self.sym("standin_events"),
            )();
            let s = CStr::from_ptr(e).to_string_lossy().into_owned();
            std::mem::transmute::<*mut libc::c_void, extern "C" fn()>(
                self.sym("standin_clear_events"),
            )();
            s
        }
    }
}

fn source() -> Vec<u8> {
    std::fs::read(common::fixture("android/leak_service_binder.hprof")).unwrap()
}

fn request(dir: &Path, keep_full: bool, deadline: Duration) -> DumpRequest {
    DumpRequest {
        full_path: dir.join("d.hprof"),
        mini_path: Some(dir.join("d.mini.hprof")),
        level: Level::Arrays,
        keep_full,
        deadline,
    }
}

/// The child's record of calls (written beside the dump by the stand-in's DumpHeap).
fn child_events(req: &DumpRequest) -> String {
    let p = format!("{}.events", req.full_path.display());
    std::fs::read_to_string(p).unwrap_or_default()
}

/// A dump under the default policy (`keep_full` off) succeeds: the mini file is the stripped
/// dump, the byte count is the dump's, and the full file is gone. Checks the order of the
/// API-30+ sequence in both processes.
fn default_policy_keeps_the_mini_file(art: &StandIn, api: u32) {
    let d = tempfile::tempdir().unwrap();
    let req = request(d.path(), false, Duration::from_secs(30));
    let mut dumper = ArtForkDumper::new(api);
    dumper.check().unwrap();
    art.events();
    let o = dumper.dump(&req).unwrap();
    let src = source();
    let (want, _) = hprof::strip_bytes(&src, Level::Arrays).unwrap();
    assert_eq!(o.full_bytes, src.len() as u64);
    assert!(o.full.is_none());
    assert!(!req.full_path.exists(), "the full file is not kept");
    let mini = std::fs::read(req.mini_path.as_ref().unwrap()).unwrap();
    assert_eq!(mini, want, "the mini file is the stripped dump");
    match &o.mini {
        Some(Ok(s)) => {
            assert_eq!(s.output_bytes, mini.len() as u64);
            assert_eq!(s.input_bytes, src.len() as u64);
        }
        other => panic!("mini: {other:?}"),
    }
    // The GC critical section stays open across the fork (the child ends its copy itself),
    // and the thread list and suspend count locks are held across it, released in both.
    let parent = art.events();
    let locks = "thread_list_lock,thread_suspend_count_lock,";
    assert!(
        parent.starts_with("sgc_ctor(15;")
            && parent.ends_with(&format!(
                ",ssa_ctor,mutator_unlock,{locks}thread_suspend_count_unlock,thread_list_unlock,\
                 mutator_lock,ssa_dtor,sgc_dtor"
            )),
        "parent: {parent}"
    );
    let child = child_events(&req);
    assert!(
        child.contains(&format!(
            "mutator_unlock,{locks}child:thread_suspend_count_unlock,child:thread_list_unlock,\
             child:sgc_dtor,dump_heap,"
        )),
        "child: {child}"
    );
}

isolated!(the_default_policy_keeps_the_mini_file_api_33, &[], |art| {
    default_policy_keeps_the_mini_file(art, 33)
});

/// API 30 and 35 run the same sequence: the thread list lock is held across the fork, so a
/// native thread that holds it while the VM is suspended (one attaching to the runtime) cannot
/// leave the child's copy held. The stand-in has such a thread take the lock right after the
/// suspension and keep it 300 ms; the child's DumpHeap, which suspends all again, takes it.
fn thread_list_lock_held_across_the_fork(art: &StandIn, api: u32) {
    let d = tempfile::tempdir().unwrap();
    let req = request(d.path(), true, Duration::from_secs(10));
    let mut dumper = ArtForkDumper::new(api);
    art.set_int("standin_hold_thread_list_after_suspend", 300);
    let o = dumper.dump(&req).unwrap();
    assert_eq!(o.full_bytes, source().len() as u64);
    assert_eq!(std::fs::read(&req.full_path).unwrap(), source());
    let child = child_events(&req);
    assert!(
        child.contains("child:thread_list_unlock,child:sgc_dtor,dump_heap,"),
        "child: {child}"
    );
}

isolated!(
    the_thread_list_lock_is_held_across_the_fork_at_api_30,
    &[],
    |art| { thread_list_lock_held_across_the_fork(art, 30) }
);

isolated!(
    the_thread_list_lock_is_held_across_the_fork_at_api_35,
    &[],
    |art| { thread_list_lock_held_across_the_fork(art, 35) }
);

/// ART's threads take `Locks::thread_suspend_count_lock_` while the VM is suspended: a thread
/// leaving a wait (for a GC, a monitor, I/O) checks its suspend count under it before it parks.
/// Found on ART 11 (`tests/art_faults.rs`): a thread that held it at the fork left the child's
/// copy held, and the child's DumpHeap waited for it in `SuspendAll` until its deadline. It is
/// held across the fork like the thread list lock: the stand-in has another thread take it
/// right after the suspension and keep it 300 ms.
fn suspend_count_lock_held_across_the_fork(art: &StandIn, api: u32) {
    let d = tempfile::tempdir().unwrap();
    let req = request(d.path(), true, Duration::from_secs(5));
    let mut dumper = ArtForkDumper::new(api);
    art.set_int("standin_hold_suspend_count_after_suspend", 300);
    let o = dumper.dump(&req).unwrap();
    assert_eq!(std::fs::read(&req.full_path).unwrap(), source());
    assert_eq!(o.full_bytes, source().len() as u64);
    let child = child_events(&req);
    assert!(
        child.contains("child:thread_suspend_count_unlock,"),
        "child: {child}"
    );
}

isolated!(
    the_thread_suspend_count_lock_is_held_across_the_fork_at_api_30,
    &[],
    |art| { suspend_count_lock_held_across_the_fork(art, 30) }
);

isolated!(
    the_thread_suspend_count_lock_is_held_across_the_fork_at_api_35,
    &[],
    |art| { suspend_count_lock_held_across_the_fork(art, 35) }
);

// A thread that waits to start a GC (an allocation that found the heap full) is blocked by the
// dump's GC critical section and starts its GC the moment the section ends; its threads count
// as suspended meanwhile. Had the section ended before the fork, the child's copy of the heap
// would say a GC runs, by a thread the child does not have, and the child's DumpHeap would wait
// for it until its deadline. The section stays open across the fork: the child ends its own
// copy, the parent ends it after resuming the VM, and the waiting thread's GC then starts.
isolated!(
    a_gc_waiting_for_the_critical_section_does_not_hang_the_child,
    &[],
    |art| {
        let d = tempfile::tempdir().unwrap();
        let req = request(d.path(), false, Duration::from_secs(5));
        let mut dumper = ArtForkDumper::new(33);
        dumper.check().unwrap();
        art.events();
        art.set_int("standin_gc_waiting_at_suspend", 300);
        let o = dumper.dump(&req).unwrap();
        assert!(matches!(o.mini, Some(Ok(_))), "{:?}", o.mini);
        let parent = art.events();
        assert!(
            parent.ends_with(",ssa_dtor,sgc_dtor,gc_started_by_another_thread"),
            "parent: {parent}"
        );
    }
);

/// The collector type passed to ScopedGCCriticalSection is read from the library, not from
/// the API level: the same API 33 with three ART module versions.
fn collector_type(art: &StandIn, want: i32) {
    let d = tempfile::tempdir().unwrap();
    let req = request(d.path(), true, Duration::from_secs(30));
    let mut dumper = ArtForkDumper::new(33);
    art.events();
    dumper.dump(&req).unwrap();
    let parent = art.events();
    assert!(
        parent.starts_with(&format!("sgc_ctor(15;{want}),")),
        "want kCollectorTypeHprof = {want}: {parent}"
    );
}

isolated!(collector_type_without_mark_compact_is_13, &[], |art| {
    collector_type(art, 13)
});
isolated!(
    collector_type_with_mark_compact_is_14,
    &["-DSTANDIN_CMC"],
    |art| collector_type(art, 14)
);
isolated!(
    collector_type_with_mark_compact_background_is_15,
    &["-DSTANDIN_CMC", "-DSTANDIN_CMC_BACKGROUND"],
    |art| collector_type(art, 15)
);

// A GC running when the dump begins: ART's critical section waits for it while the app's
// threads run on, so that wait is the dump's `gc_wait`, apart from its pause.
isolated!(
    a_running_gc_is_waited_for_apart_from_the_pause,
    &[],
    |art| {
        let d = tempfile::tempdir().unwrap();
        let req = request(d.path(), false, Duration::from_secs(30));
        let mut dumper = ArtForkDumper::new(33);
        dumper.check().unwrap();
        assert!(dumper.last_pause_phases().is_none(), "no dump yet");
        art.set_int("standin_gc_running", 300);
        let o = dumper.dump(&req).unwrap();
        assert_eq!(o.dumper, "art-fork");
        let phases = dumper.last_pause_phases().expect("an API 33 dump's phases");
        assert!(o.gc_wait >= Duration::from_millis(200), "{o:?}");
        assert_eq!(o.gc_wait, phases.gc_wait);
        assert!(o.pause + o.gc_wait <= o.total, "{o:?}");
    }
);

isolated!(api_29_suspends_through_the_debugger, &[], |art| {
    let d = tempfile::tempdir().unwrap();
    let req = request(d.path(), false, Duration::from_secs(30));
    let mut dumper = ArtForkDumper::new(29);
    art.events();
    let o = dumper.dump(&req).unwrap();
    assert!(matches!(o.mini, Some(Ok(_))), "{:?}", o.mini);
    assert_eq!(art.events(), "suspend_vm,resume_vm");
    assert_eq!(o.gc_wait, Duration::ZERO);
    assert!(
        dumper.last_pause_phases().is_none(),
        "the debugger's sequence has no phases"
    );
});

// A child that crashes, exits non-zero, hangs past the deadline or dumps nothing is a failed
// dump, and leaves no file.
isolated!(
    a_child_that_fails_is_a_failed_dump_and_leaves_no_file,
    &[],
    |art| {
        let d = tempfile::tempdir().unwrap();
        let mut dumper = ArtForkDumper::new(33);
        let cases = [
            (1, "killed by signal 6"),
            (2, "exited with code 3"),
            (3, "passed its deadline"),
            (4, "wrote an empty dump"),
        ];
        for (mode, want) in cases {
            for keep_full in [false, true] {
                art.set_int("standin_set_mode", mode);
                let req = request(d.path(), keep_full, Duration::from_secs(2));
                let e = dumper.dump(&req).unwrap_err().to_string();
                assert!(e.contains(want), "mode {mode}, keep_full {keep_full}: {e}");
                assert!(!req.full_path.exists(), "mode {mode}: full file removed");
                assert!(
                    !req.mini_path.as_ref().unwrap().exists(),
                    "mode {mode}: mini file removed"
                );
            }
        }
        // The VM wrote its file where the tee saw nothing (a library the tee does not hook):
        // with the full file kept it is the dump, its mini file abandoned; without, a failed
        // dump.
        art.set_int("standin_set_mode", 5);
        let req = request(d.path(), false, Duration::from_secs(30));
        let e = dumper.dump(&req).unwrap_err().to_string();
        assert!(e.contains("one the tee did not see"), "{e}");
        assert!(!req.full_path.exists() && !req.mini_path.as_ref().unwrap().exists());
        let req = request(d.path(), true, Duration::from_secs(30));
        let o = dumper.dump(&req).unwrap();
        assert_eq!(o.full.as_deref(), Some(req.full_path.as_path()));
        assert_eq!(std::fs::read(&req.full_path).unwrap(), source());
        assert_eq!(o.full_bytes, source().len() as u64);
        assert_eq!(
            o.mini.as_ref().unwrap().as_ref().unwrap_err(),
            "the stripper failed in the dump child"
        );
        assert!(
            !req.mini_path.as_ref().unwrap().exists(),
            "the mini file removed"
        );
        std::fs::remove_file(&req.full_path).unwrap();
        // And the next dump goes through.
        art.set_int("standin_set_mode", 0);
        let req = request(d.path(), false, Duration::from_secs(30));
        assert!(dumper.dump(&req).is_ok());
    }
);

// An app that ignores SIGCHLD, or reaps every child with `waitpid(-1)`, takes the dump
// child's exit status: the child's completion record says the dump is complete, and it is
// kept.
isolated!(a_dump_whose_exit_status_the_app_took_is_kept, &[], |_art| {
    let d = tempfile::tempdir().unwrap();
    let mut dumper = ArtForkDumper::new(33);
    // SAFETY: this test's own process: the app's SIGCHLD setting.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
    let req = request(d.path(), false, Duration::from_secs(30));
    let o = dumper.dump(&req).unwrap();
    assert!(matches!(o.mini, Some(Ok(_))), "{:?}", o.mini);
    assert!(req.mini_path.as_ref().unwrap().exists());
    // SAFETY: as above.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
    // A reaper thread of the app's, waiting for any child.
    std::thread::spawn(|| loop {
        let mut st = 0;
        // SAFETY: the app's reaper.
        if unsafe { libc::waitpid(-1, &mut st, 0) } < 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    for _ in 0..5 {
        let req = request(d.path(), false, Duration::from_secs(30));
        let o = dumper.dump(&req).unwrap();
        assert!(matches!(o.mini, Some(Ok(_))), "{:?}", o.mini);
    }
});

/// The address of the tee's spin flag (`oomguard::hook::tee::LOCK`, private) in this test
/// executable: its symbol from `nm`, plus the executable's load bias.
fn tee_lock_address() -> usize {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("nm").arg(&exe).output().expect("nm runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("4hook3tee4LOCK"))
        .expect("the tee's LOCK in the symbol table");
    let value = usize::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap();
    // The executable is the first mapping of /proc/self/maps; its file offset 0 is vaddr 0.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let first = maps.lines().next().unwrap();
    let start = usize::from_str_radix(first.split('-').next().unwrap(), 16).unwrap();
    start + value
}

// A native thread (not stopped by the VM's suspension) inside one of the tee's hooks at the
// fork leaves the child's copy of the tee's spin flag held by a thread the child does not
// have: the child frees it first, and dumps. The stand-in stops such a thread inside the
// hook (a signal while it holds the flag) during the suspension, and lets it go on resuming.
isolated!(
    a_native_thread_inside_the_tee_at_the_fork_does_not_hang_the_child,
    &[],
    |art| {
        let lock = tee_lock_address();
        let d = tempfile::tempdir().unwrap();
        let mut dumper = ArtForkDumper::new(33);
        dumper.check().unwrap();
        // Install the tee (the first dump), then hold its lock during the next one.
        dumper
            .dump(&request(d.path(), false, Duration::from_secs(30)))
            .unwrap();
        // SAFETY: `void standin_hold_tee_lock_at_suspend(const unsigned char*)`; the address of a
        // static of this process.
        unsafe {
            std::mem::transmute::<*mut libc::c_void, extern "C" fn(usize)>(
                art.sym("standin_hold_tee_lock_at_suspend"),
            )(lock)
        };
        art.events();
        let req = request(d.path(), false, Duration::from_secs(5));
        let r = dumper.dump(&req);
        let parent = art.events();
        assert!(
            parent.contains("tee_lock_held_by_native_thread"),
            "{parent}"
        );
        let o = r.unwrap();
        assert!(matches!(o.mini, Some(Ok(_))), "{:?}", o.mini);
    }
);
