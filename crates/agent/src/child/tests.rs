//! `child`'s tests: fork against a snapshot while threads write, failures and the watchdog,
//! pidfd use by API level, a status the app took, the app's signal setup, death with the parent.

use super::*;
use std::ffi::CString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The name the tests' children show (the dumper's, as they stand in for dump children).
const DUMP_CHILD_NAME: &str = "oomguard-dump";

/// Wait for a dump-like child and turn anything but exit code 0 into an error, removing `files`
/// (what the dumpers do with a failed child).
fn finish(
    child: &mut Child,
    deadline: Duration,
    files: &[PathBuf],
) -> std::result::Result<Duration, String> {
    let r = child.wait(deadline);
    let ok = matches!(r, Ok(ChildEnd::Exited(0)));
    if !ok {
        for f in files {
            let _ = std::fs::remove_file(f);
        }
    }
    match r {
        Ok(ChildEnd::Exited(0)) => Ok(child.started.elapsed()),
        Ok(end) => Err(format!("dump child {} {end}", child.pid)),
        Err(e) => Err(e.to_string()),
    }
}

/// A little "VM": threads that keep writing to a shared heap and stop at a safepoint when
/// asked, like ART's suspend-all.
struct Vm {
    heap: Vec<AtomicU64>,
    suspend: AtomicBool,
    parked: AtomicUsize,
    stop: AtomicBool,
}

fn checksum(h: &[AtomicU64]) -> u64 {
    h.iter().fold(0xcbf29ce484222325u64, |a, v| {
        (a ^ v.load(Ordering::Relaxed)).wrapping_mul(0x100000001b3)
    })
}

/// Write `v` as 16 hex digits to `path` with raw syscalls (fork-safe: no allocation).
fn write_hex(path: &CString, v: u64) -> i32 {
    let mut b = [0u8; 16];
    for (i, c) in b.iter_mut().enumerate() {
        *c = b"0123456789abcdef"[((v >> (60 - 4 * i)) & 15) as usize];
    }
    // SAFETY: a valid path and buffer.
    unsafe {
        let fd = libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
            0o644,
        );
        if fd < 0 {
            return 3;
        }
        let ok = libc::write(fd, b.as_ptr() as *const libc::c_void, 16) == 16;
        libc::close(fd);
        if ok {
            0
        } else {
            4
        }
    }
}

fn gone(pid: libc::pid_t) -> bool {
    // A reaped child has no /proc entry (a zombie would).
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn child_sees_the_snapshot_as_of_the_fork_while_threads_write() {
    let _serial = super::fork_test_lock();
    let vm = Arc::new(Vm {
        heap: (0..(4 << 20)).map(AtomicU64::new).collect(),
        suspend: AtomicBool::new(false),
        parked: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    });
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let vm = vm.clone();
            std::thread::spawn(move || {
                let mut x = t + 1;
                while !vm.stop.load(Ordering::Relaxed) {
                    if vm.suspend.load(Ordering::Acquire) {
                        vm.parked.fetch_add(1, Ordering::AcqRel);
                        while vm.suspend.load(Ordering::Acquire) {
                            std::hint::spin_loop();
                        }
                        vm.parked.fetch_sub(1, Ordering::AcqRel);
                    }
                    for _ in 0..1000 {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let i = (x >> 20) as usize % vm.heap.len();
                        vm.heap[i].store(x, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    for round in 0..5 {
        std::thread::sleep(Duration::from_millis(20));
        // suspend ─ fork ─ resume
        vm.suspend.store(true, Ordering::Release);
        while vm.parked.load(Ordering::Acquire) < 4 {
            std::hint::spin_loop();
        }
        let expect = checksum(&vm.heap);
        let out = dir.path().join(format!("sum{round}"));
        let cout = CString::new(out.to_str().unwrap()).unwrap();
        let vm2 = vm.clone();
        let t0 = Instant::now();
        let mut child = spawn(DUMP_CHILD_NAME, 30, move || {
            // Slow on purpose: the parent's threads rewrite the heap meanwhile.
            // SAFETY: plain syscall.
            unsafe { libc::usleep(100_000) };
            write_hex(&cout, checksum(&vm2.heap))
        })
        .unwrap();
        vm.suspend.store(false, Ordering::Release);
        let pause = t0.elapsed();
        std::thread::sleep(Duration::from_millis(30));
        assert_ne!(
            checksum(&vm.heap),
            expect,
            "the parent's threads kept writing"
        );
        let pid = child.pid;
        finish(&mut child, Duration::from_secs(20), &[]).unwrap();
        let got = std::fs::read_to_string(&out).unwrap();
        assert_eq!(got, format!("{expect:016x}"), "round {round}");
        assert!(gone(pid));
        assert!(pause < Duration::from_millis(500), "{pause:?}");
    }
    vm.stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn crash_nonzero_exit_and_hang_are_failures_and_files_are_removed() {
    let _serial = super::fork_test_lock();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("partial.hprof");
    type Body = Box<dyn FnOnce() -> i32 + Send>;
    let cases: Vec<(Body, &str)> = vec![
        (
            // SAFETY: abort in the child only.
            Box::new(|| unsafe { libc::abort() }),
            "killed by signal 6",
        ),
        (Box::new(|| 3), "exited with code 3"),
        (
            Box::new(|| loop {
                // SAFETY: plain syscall.
                unsafe { libc::pause() };
            }),
            "passed its deadline",
        ),
    ];
    for (body, want) in cases {
        std::fs::write(&f, b"partial").unwrap();
        let t0 = Instant::now();
        let mut child = spawn(DUMP_CHILD_NAME, 60, body).unwrap();
        let pid = child.pid;
        let e = finish(
            &mut child,
            Duration::from_millis(400),
            std::slice::from_ref(&f),
        )
        .unwrap_err();
        let waited = t0.elapsed();
        assert!(e.to_string().contains(want), "{e} (want {want})");
        assert!(!f.exists(), "partial file removed");
        assert!(waited < Duration::from_millis(400 + 300), "{waited:?}");
        drop(child);
        assert!(gone(pid), "no zombie for {pid}");
    }
}

/// Run `f` in a forked copy of this test process (so that what it changes, signal
/// dispositions, a seccomp filter, the API level, stays there) and say how it ended.
fn in_process<F: FnOnce() -> i32>(f: F) -> ChildEnd {
    // SAFETY: the test child runs `f` and `_exit`s; the parent only waits for it.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(99);
        // SAFETY: end the test child without running the harness's exit handlers.
        unsafe { libc::_exit(code) };
    }
    waitpid(pid, 0).unwrap().unwrap()
}

/// Trap (SIGSYS, as Android 8-10 do) every system call of `nrs` in this thread and the
/// processes it forks.
fn trap_syscalls(nrs: &[libc::c_long]) {
    let mut prog = vec![libc::sock_filter {
        code: 0x20, // BPF_LD | BPF_W | BPF_ABS: the system call number
        jt: 0,
        jf: 0,
        k: 0,
    }];
    for &nr in nrs {
        prog.push(libc::sock_filter {
            code: 0x15, // BPF_JMP | BPF_JEQ | BPF_K
            jt: 0,
            jf: 1,
            k: nr as u32,
        });
        prog.push(libc::sock_filter {
            code: 0x06, // BPF_RET | BPF_K
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_TRAP,
        });
    }
    prog.push(libc::sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    });
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: a valid filter program that outlives the call.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &fprog as *const libc::sock_fprog
            ),
            0
        );
    }
}

/// Android 8-10 kill the app (SIGSYS) for `pidfd_open`: below API 30 a child is waited for
/// and killed at its deadline without any pidfd system call. The same filter kills the
/// process at API 30 and off Android, where the pidfd is used.
#[test]
fn below_api_30_no_pidfd_system_call_is_made() {
    let _serial = super::fork_test_lock();
    let cases = [
        (Some(26), ChildEnd::Exited(0)),
        (Some(29), ChildEnd::Exited(0)),
        (Some(30), ChildEnd::Signaled(libc::SIGSYS)),
        // Off Android a filtered process polls too (the filter here is seen in /proc).
        (None, ChildEnd::Exited(0)),
    ];
    for (api, want) in cases {
        let end = in_process(|| {
            set_api_level(api);
            trap_syscalls(&[libc::SYS_pidfd_open, libc::SYS_pidfd_send_signal]);
            let mut quick = spawn("quick", 0, || 0).unwrap();
            if quick.wait(Duration::from_secs(20)).unwrap() != ChildEnd::Exited(0) {
                return 2;
            }
            let mut hung = spawn("hung", 0, || loop {
                // SAFETY: plain syscall.
                unsafe { libc::pause() };
            })
            .unwrap();
            if hung.wait(Duration::from_millis(100)).unwrap() != ChildEnd::TimedOut {
                return 3;
            }
            0
        });
        assert_eq!(end, want, "API {api:?}");
    }
}

/// An app that ignores SIGCHLD, or reaps with `waitpid(-1)`, takes our child's status:
/// the child has ended, which is not an error of the wait.
#[test]
fn a_child_whose_status_the_app_took_is_reported_as_reaped() {
    let _serial = super::fork_test_lock();
    let end = in_process(|| {
        // SAFETY: in the test child only.
        unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
        let mut c = spawn("quick", 0, || 0).unwrap();
        match c.wait(Duration::from_secs(20)) {
            Ok(ChildEnd::Reaped) => 0,
            Ok(_) => 2,
            Err(_) => 3,
        }
    });
    assert_eq!(end, ChildEnd::Exited(0));
    let end = in_process(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || loop {
            let mut st = 0;
            // SAFETY: the app's reaper: any child.
            let r = unsafe { libc::waitpid(-1, &mut st, 0) };
            if r > 0 {
                let _ = tx.send(r);
            }
        });
        let mut c = spawn("slow", 0, || {
            // SAFETY: plain syscall.
            unsafe { libc::usleep(100_000) };
            0
        })
        .unwrap();
        match c.wait(Duration::from_secs(20)) {
            Ok(ChildEnd::Reaped) if rx.recv() == Ok(c.pid) => 0,
            Ok(ChildEnd::Exited(0)) => 0,
            Ok(_) => 2,
            Err(_) => 3,
        }
    });
    assert_eq!(end, ChildEnd::Exited(0));
}

static SEGV_HANDLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn crash_reporter(_: libc::c_int) {
    SEGV_HANDLED.store(true, Ordering::SeqCst);
    // SAFETY: what a crash reporter does after writing its report.
    unsafe { libc::_exit(42) };
}

/// The app's signal setup does not reach the child: SIGALRM ignored and blocked still ends
/// it at its alarm, and a crash in the child is not handled by the app's crash reporter.
#[test]
fn the_child_resets_the_apps_signal_setup() {
    let _serial = super::fork_test_lock();
    let end = in_process(|| {
        // SAFETY: in the test child only: the app's signal setup.
        unsafe {
            libc::signal(libc::SIGALRM, libc::SIG_IGN);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGALRM);
            libc::sigaddset(&mut set, libc::SIGSEGV);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            libc::signal(
                libc::SIGSEGV,
                crash_reporter as *const () as libc::sighandler_t,
            );
        }
        let mut hung = spawn("hung", 1, || loop {
            // SAFETY: plain syscall.
            unsafe { libc::pause() };
        })
        .unwrap();
        let alarm = hung.wait(Duration::from_secs(20)).unwrap();
        let mut crash = spawn("crash", 0, || {
            // SAFETY: a crash in the child only.
            unsafe { libc::raise(libc::SIGSEGV) };
            0
        })
        .unwrap();
        let crashed = crash.wait(Duration::from_secs(20)).unwrap();
        match (alarm, crashed) {
            (ChildEnd::Signaled(libc::SIGALRM), ChildEnd::Signaled(libc::SIGSEGV)) => 0,
            (ChildEnd::Signaled(libc::SIGALRM), _) => 2,
            _ => 3,
        }
    });
    assert_eq!(
        end,
        ChildEnd::Exited(0),
        "2: the app's handler ran in the child, 3: the alarm did not end it"
    );
}

/// A child whose parent dies is killed with it, even without an alarm.
#[test]
fn the_child_dies_with_its_parent() {
    let _serial = super::fork_test_lock();
    let mut fds = [0; 2];
    // SAFETY: a valid array for pipe.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let end = in_process(|| {
        let c = spawn("orphan", 0, || loop {
            // SAFETY: plain syscall.
            unsafe { libc::pause() };
        })
        .unwrap();
        let pid = c.pid.to_ne_bytes();
        std::mem::forget(c);
        // SAFETY: the pipe's write end and a 4-byte buffer.
        unsafe { libc::write(fds[1], pid.as_ptr() as *const libc::c_void, 4) };
        0
    });
    assert_eq!(end, ChildEnd::Exited(0));
    let mut pid = [0u8; 4];
    // SAFETY: the pipe's read end and a 4-byte buffer; then both ends closed.
    unsafe {
        assert_eq!(
            libc::read(fds[0], pid.as_mut_ptr() as *mut libc::c_void, 4),
            4
        );
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    let pid = libc::pid_t::from_ne_bytes(pid);
    let dead = |pid: libc::pid_t| match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z')),
    };
    let mut gone = false;
    for _ in 0..1000 {
        if dead(pid) {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if !gone {
        // SAFETY: the orphan this test made; clean up before failing.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(gone, "the child {pid} outlived its parent");
}

#[test]
fn the_alarm_ends_a_child_whose_parent_stopped_waiting() {
    let _serial = super::fork_test_lock();
    let mut child = spawn(DUMP_CHILD_NAME, 1, || loop {
        // SAFETY: plain syscall.
        unsafe { libc::pause() };
    })
    .unwrap();
    let mut comm = String::new();
    for _ in 0..200 {
        comm = std::fs::read_to_string(format!("/proc/{}/comm", child.pid)).unwrap();
        if comm.trim() == DUMP_CHILD_NAME {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(comm.trim(), DUMP_CHILD_NAME);
    let end = child.wait(Duration::from_secs(10)).unwrap();
    assert_eq!(end, ChildEnd::Signaled(libc::SIGALRM));
}

/// An exec'd child starts with no signal ignored or blocked, whatever the app ignores (SIGPIPE,
/// as ART does) or blocks. (That it holds no fd of the app's is the analysis runner's test.)
#[test]
fn an_exec_child_inherits_no_signal_setup_and_no_fd() {
    let _serial = super::fork_test_lock();
    let d = tempfile::tempdir().unwrap();
    let out_path = d.path().join("status");
    let end = in_process(|| {
        // SAFETY: in the test child only: the app's signal setup.
        let blocked = unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR1);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) == 0
        };
        let Ok(out) = std::fs::File::create(&out_path) else {
            return 2;
        };
        // grep, not a shell: a shell clears its mask itself.
        let Ok(exec) = Exec::new(
            Path::new("/bin/grep"),
            &[
                OsStr::new("-E"),
                OsStr::new("^Sig(Blk|Ign)"),
                OsStr::new("/proc/self/status"),
            ],
        ) else {
            return 3;
        };
        let limits = Limits::default();
        let Ok(mut c) = spawn_exec("exec", &limits, 0, &exec, out.as_fd()) else {
            return 4;
        };
        match c.wait(Duration::from_secs(20)) {
            Ok(ChildEnd::Exited(0)) if blocked => 0,
            _ => 5,
        }
    });
    assert_eq!(end, ChildEnd::Exited(0));
    let got = std::fs::read_to_string(&out_path).unwrap();
    let lines: Vec<&str> = got.lines().map(str::trim).collect();
    assert_eq!(
        lines,
        ["SigBlk:\t0000000000000000", "SigIgn:\t0000000000000000"],
        "{got}"
    );
}

/// Only an exit with code 0 is a child that went well; each end reads as what happened.
#[test]
fn only_an_exit_with_code_0_is_ok_and_each_end_says_what_happened() {
    let ends = [
        (ChildEnd::Exited(0), true, "exited with code 0"),
        (ChildEnd::Exited(3), false, "exited with code 3"),
        (ChildEnd::Signaled(9), false, "was killed by signal 9"),
        (
            ChildEnd::TimedOut,
            false,
            "passed its deadline and was killed",
        ),
        (ChildEnd::GaveUp, false, "was stuck and was killed"),
        (
            ChildEnd::Reaped,
            false,
            "ended, but its exit status was taken by another waiter",
        ),
    ];
    for (end, ok, says) in ends {
        assert_eq!(end.ok(), ok, "{end:?}");
        assert!(end.to_string().starts_with(says), "{end:?}: {end}");
    }
}

/// A child dropped without a wait is killed and reaped: nothing of it is left.
#[test]
fn a_child_dropped_unwaited_is_killed_and_reaped() {
    let _serial = fork_test_lock();
    let child = spawn(DUMP_CHILD_NAME, 0, || loop {
        // SAFETY: pause, async-signal-safe, is the child's only call.
        unsafe { libc::pause() };
    })
    .unwrap();
    let pid = child.pid;
    std::thread::sleep(Duration::from_millis(50));
    assert!(child.elapsed() >= Duration::from_millis(50));
    drop(child);
    let t0 = Instant::now();
    // SAFETY: signal 0 only asks whether `pid` exists.
    while unsafe { libc::kill(pid, 0) } == 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "{pid} still exists");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A pidfd is had for a process that exists, and none for one that does not.
#[test]
fn a_pidfd_is_had_only_for_a_process_that_exists() {
    if !pidfd_allowed() {
        println!("SKIPPED a_pidfd_is_had_only_for_a_process_that_exists: no pidfd_open here");
        return;
    }
    assert!(pidfd(std::process::id() as libc::pid_t).is_some());
    assert!(pidfd(-1).is_none());
}

/// This process's own data, in bytes: within a factor of two of what `statm` counts (its data
/// and stack, in pages), read a moment apart while other tests allocate.
#[test]
fn own_data_is_counted_in_bytes() {
    let own = own_data_bytes();
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(5).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let data = pages * page;
    assert!(own > 1 << 20, "{own}");
    assert!(
        own >= data / 2 && own <= data * 2,
        "VmData {own} bytes, statm's data {data}"
    );
}
