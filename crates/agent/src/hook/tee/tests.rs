//! The tee's tests: stand-in dumpers in C, built and loaded by the tests, write through the
//! hooks as a VM would.

use super::*;
use hprof::strip_bytes;

/// A stand-in for the VM's dumper: opens the path with open64 and writes the bytes in
/// chunks of varying size from several threads, one after the other (as HotSpot's writer
/// threads do), then closes. `other` is written at the same time by an unrelated thread.
const SRC: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <string.h>
struct job { int fd; const char *buf; size_t len; size_t pos; pthread_mutex_t mu; int chunk; };
static void *worker(void *p) {
    struct job *j = p;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        if (j->pos >= j->len) { pthread_mutex_unlock(&j->mu); return 0; }
        size_t n = (size_t)(j->chunk = j->chunk * 7 % 65521 + 1);
        if (n > j->len - j->pos) n = j->len - j->pos;
        while (n > 0) {
            ssize_t w = write(j->fd, j->buf + j->pos, n);
            if (w <= 0) { pthread_mutex_unlock(&j->mu); return 0; }
            j->pos += w; n -= w;
        }
        pthread_mutex_unlock(&j->mu);
    }
}
static void *noise(void *p) {
    int fd = *(int *)p;
    for (int i = 0; i < 2000; i++) write(fd, "x", 1);
    return 0;
}
int vm_dump(const char *path, const char *buf, size_t len, int other) {
    int fd = open64(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    struct job j = { fd, buf, len, 0, PTHREAD_MUTEX_INITIALIZER, 3 };
    pthread_t t[3], n;
    pthread_create(&n, 0, noise, &other);
    for (int i = 0; i < 3; i++) pthread_create(&t[i], 0, worker, &j);
    for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
    pthread_join(n, 0);
    return close(fd);
}
"#;

type DumpFn = extern "C" fn(*const c_char, *const u8, usize, c_int) -> c_int;

/// The dump the stand-in dumpers write, and the mini file the tee must make of it.
fn dump_and_mini() -> (Vec<u8>, Vec<u8>) {
    let input = std::fs::read(crate::hook::tests_fixture("jvm/heapdump_hashmap.hprof")).unwrap();
    let (want_mini, _) = strip_bytes(&input, Level::Arrays).unwrap();
    (input, want_mini)
}

/// Arm `tee` for the dump `dir/NAME.hprof` and its mini file `dir/NAME.mini.hprof` (arrays
/// stripped); returns the two paths.
fn arm_named(
    tee: &Tee,
    dir: &std::path::Path,
    name: &str,
    keep_full: bool,
    ring_bytes: usize,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let full = dir.join(format!("{name}.hprof"));
    let mini = dir.join(format!("{name}.mini.hprof"));
    tee.arm(&TeeConfig {
        full_path: full.clone(),
        mini_path: Some(mini.clone()),
        level: Level::Arrays,
        keep_full,
        ring_bytes,
    })
    .unwrap();
    (full, mini)
}

#[test]
fn tee_copies_the_dump_and_strips_it_while_written() {
    let _one = test_lock();
    let dir = tempfile::tempdir().unwrap();
    let so = crate::hook::build_c_lib(dir.path(), "libteevm", SRC, &["-Wl,-z,now", "-pthread"]);
    // SAFETY: `vm_dump` has this signature in SRC.
    let vm_dump: DumpFn = unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "vm_dump")) };
    let (input, want_mini) = dump_and_mini();

    let tee = Tee::install(&["libnot-loaded.so", "libteevm.so"]).unwrap();
    assert!(matches!(
        Tee::install(&["libteevm.so"]),
        Err(Error::AlreadyInstalled)
    ));
    assert_eq!(tee.libraries().len(), 1);
    for round in 0..3 {
        let full = dir.path().join(format!("full{round}.hprof"));
        let mini = dir.path().join(format!("mini{round}.hprof"));
        let other = dir.path().join(format!("other{round}"));
        // Inline, then through rings small enough to wrap and fill many times.
        let cfg = TeeConfig {
            full_path: full.clone(),
            mini_path: Some(mini.clone()),
            level: Level::Arrays,
            keep_full: true,
            ring_bytes: [0, 4096, 256 << 10][round],
        };
        tee.arm(&cfg).unwrap();
        assert!(tee.arm(&cfg).is_err());
        let of = std::fs::File::create(&other).unwrap();
        let cpath = CString::new(full.to_str().unwrap()).unwrap();
        use std::os::fd::AsRawFd;
        assert_eq!(
            vm_dump(cpath.as_ptr(), input.as_ptr(), input.len(), of.as_raw_fd()),
            0
        );
        let rep = tee.disarm(Some(&mini));
        assert!(rep.opened && rep.closed, "{rep:?}");
        assert_eq!(rep.caught_by.len(), 1, "{rep:?}");
        assert!(rep.caught_by[0].ends_with("/libteevm.so"));
        assert_eq!(rep.full_bytes, input.len() as u64);
        let stats = rep.mini.unwrap().unwrap();
        assert!(stats.arrays_stripped > 0);
        assert!(std::fs::read(&full).unwrap() == input, "full file differs");
        assert!(
            std::fs::read(&mini).unwrap() == want_mini,
            "mini file differs"
        );
        assert_eq!(std::fs::read(&other).unwrap(), vec![b'x'; 2000]);
    }

    // A dump the stripper cannot parse: the mini file is abandoned, the full file is intact.
    let sink = std::fs::File::create(dir.path().join("noise")).unwrap();
    use std::os::fd::AsRawFd;
    let noise = sink.as_raw_fd();
    let mut bad = input.clone();
    bad[31] = 0x77; // an unknown top-level tag right after the 31-byte header
    let (full, mini) = arm_named(&tee, dir.path(), "bad", true, 8192);
    let cpath = CString::new(full.to_str().unwrap()).unwrap();
    assert_eq!(vm_dump(cpath.as_ptr(), bad.as_ptr(), bad.len(), noise), 0);
    let rep = tee.disarm(Some(&mini));
    let why = rep.mini.unwrap().unwrap_err();
    assert!(why.starts_with("stripper: byte 31"), "{why}");
    assert!(!mini.exists());
    assert!(std::fs::read(&full).unwrap() == bad);

    // Not keeping the full file: the VM's file stays empty, the mini file is complete.
    let (full, mini) = arm_named(&tee, dir.path(), "nofull", false, 1 << 20);
    let cpath = CString::new(full.to_str().unwrap()).unwrap();
    assert_eq!(
        vm_dump(cpath.as_ptr(), input.as_ptr(), input.len(), noise),
        0
    );
    let rep = tee.disarm(Some(&mini));
    assert!(rep.mini.unwrap().is_ok());
    assert_eq!(std::fs::metadata(&full).unwrap().len(), 0);
    assert!(std::fs::read(&mini).unwrap() == want_mini);

    // After uninstall nothing is teed.
    tee.uninstall().unwrap();
    let full = dir.path().join("after.hprof");
    let cpath = CString::new(full.to_str().unwrap()).unwrap();
    assert_eq!(
        vm_dump(cpath.as_ptr(), input.as_ptr(), input.len(), noise),
        0
    );
    assert!(std::fs::read(&full).unwrap() == input);
}

/// bionic's fdsan close, which glibc lacks: a library of its own, as libc is on Android.
const FDSAN_SHIM: &str = r#"
#include <stdint.h>
#include <unistd.h>
int android_fdsan_close_with_tag(int fd, uint64_t expected_tag) { (void)expected_tag; return close(fd); }
"#;

/// A stand-in for ART's dumper: the dump file is closed through the fdsan close (as
/// `art::hprof` does through `unique_fd`), then its number is reused for another file.
/// The errno a successful write leaves must be what it was before the write.
const SRC_FDSAN: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>
int android_fdsan_close_with_tag(int fd, uint64_t expected_tag);
int art_dump(const char *path, const char *buf, size_t len, const char *other, int *errno_after) {
    int fd = open64(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    size_t pos = 0;
    *errno_after = -1;
    while (pos < len) {
        size_t n = len - pos > 8192 ? 8192 : len - pos;
        errno = EINTR;
        ssize_t w = write(fd, buf + pos, n);
        if (w <= 0) return -2;
        if (*errno_after == -1 || errno != EINTR) *errno_after = errno;
        pos += (size_t)w;
    }
    if (android_fdsan_close_with_tag(fd, 0x1234) != 0) return -3;
    int o = open64(other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0) return -4;
    if (o != fd) { if (dup2(o, fd) != fd) return -5; close(o); }
    if (write(fd, "not the dump", 12) != 12) return -6;
    return close(fd);
}
"#;

type ArtDumpFn = extern "C" fn(*const c_char, *const u8, usize, *const c_char, *mut c_int) -> c_int;

#[test]
fn fdsan_close_disarms_the_dump_fd_and_swallowed_writes_keep_errno() {
    let _one = test_lock();
    let dir = tempfile::tempdir().unwrap();
    crate::hook::build_c_lib(dir.path(), "libfdsan_shim", FDSAN_SHIM, &[]);
    let d = dir.path().to_str().unwrap();
    let so = crate::hook::build_c_lib(
        dir.path(),
        "libartvm",
        SRC_FDSAN,
        &[
            "-Wl,-z,now",
            "-L",
            d,
            "-lfdsan_shim",
            &format!("-Wl,-rpath,{d}"),
        ],
    );
    // SAFETY: `art_dump` has this signature in SRC_FDSAN.
    let art_dump: ArtDumpFn = unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "art_dump")) };
    let (input, want_mini) = dump_and_mini();
    let tee = Tee::install(&["libartvm.so"]).unwrap();
    let other = dir.path().join("other");
    let (full, mini) = arm_named(&tee, dir.path(), "art", false, 0);
    let cpath = CString::new(full.to_str().unwrap()).unwrap();
    let cother = CString::new(other.to_str().unwrap()).unwrap();
    let mut errno_after = 0;
    let r = art_dump(
        cpath.as_ptr(),
        input.as_ptr(),
        input.len(),
        cother.as_ptr(),
        &mut errno_after,
    );
    let rep = tee.disarm(Some(&mini));
    tee.uninstall().unwrap();
    assert_eq!(r, 0);
    assert_eq!(
        errno_after,
        libc::EINTR,
        "a swallowed write that succeeded changed errno"
    );
    assert_eq!(
        std::fs::read(&other).unwrap(),
        b"not the dump",
        "a write on the dump's reused fd number was swallowed"
    );
    assert!(rep.opened && rep.closed, "{rep:?}");
    assert_eq!(rep.full_bytes, input.len() as u64);
    assert!(rep.mini.unwrap().is_ok());
    assert!(std::fs::read(&mini).unwrap() == want_mini);
    assert_eq!(std::fs::metadata(&full).unwrap().len(), 0);
}

static CHAINED_WRITES: AtomicUsize = AtomicUsize::new(0);

/// Another hooker's `write`, in the slot before the tee is installed.
unsafe extern "C" fn chained_write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    CHAINED_WRITES.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the caller's arguments, passed on.
    unsafe { libc::write(fd, buf, n) }
}

/// A dumper among other files: it writes nothing to stdout before and after the dump, opens
/// and writes another file before it, fails to create the dump path once (it exists),
/// closes the other file in the middle of the dump. Through `open` and `openat`, not
/// `open64`.
const SRC_AROUND: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
int dump_around(const char *path, const char *buf, size_t len, int *excl_errno) {
    (void)!write(1, buf, 0);
    int other = openat(AT_FDCWD, "/dev/null", O_WRONLY);
    if (other < 0) return -1;
    if (write(other, "noise", 5) != 5) return -9;
    errno = 0;
    if (open(path, O_WRONLY | O_CREAT | O_EXCL, 0644) >= 0) return -2;
    *excl_errno = errno;
    if (unlink(path) != 0) return -3;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -4;
    size_t half = len / 2;
    if (write(fd, buf, half) != (ssize_t)half) return -5;
    if (close(other) != 0) return -6;
    if (write(fd, buf + half, len - half) != (ssize_t)(len - half)) return -7;
    if (close(fd) != 0) return -8;
    (void)!write(1, buf, 0);
    return 0;
}
"#;

type AroundFn = extern "C" fn(*const c_char, *const u8, usize, *mut c_int) -> c_int;

/// The dump fd is the one a successful open of the dump path returned, from then until it
/// is closed: not a file opened before it, not a failed open of the path, not stdout before
/// or after it; closing another file does not end it. The tee forwards to the function the
/// slot held, another hooker's here.
#[test]
fn the_dump_is_the_fd_its_open_returned_until_closed_and_writes_go_on_to_the_next_hooker() {
    let _one = test_lock();
    let dir = tempfile::tempdir().unwrap();
    let so = crate::hook::build_c_lib(dir.path(), "libteearound", SRC_AROUND, &["-Wl,-z,now"]);
    // SAFETY: `dump_around` has this signature in SRC_AROUND.
    let dump_around: AroundFn =
        unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "dump_around")) };
    let (input, want_mini) = dump_and_mini();
    let other = patch_library(
        "libteearound.so",
        &[Import {
            name: "write",
            replacement: chained_write as *const () as usize,
        }],
        &mut |_, _| {},
    )
    .unwrap();
    let tee = Tee::install(&["libteearound.so"]).unwrap();
    assert_eq!(tee.libraries(), vec![so.to_str().unwrap().to_string()]);
    let full = dir.path().join("around.hprof");
    let mini = dir.path().join("around.mini.hprof");
    std::fs::write(&full, b"").unwrap();
    tee.arm(&TeeConfig {
        full_path: full.clone(),
        mini_path: Some(mini.clone()),
        level: Level::Arrays,
        keep_full: true,
        ring_bytes: 0,
    })
    .unwrap();
    CHAINED_WRITES.store(0, Ordering::SeqCst);
    let cpath = CString::new(full.to_str().unwrap()).unwrap();
    let mut excl_errno = 0;
    let r = dump_around(cpath.as_ptr(), input.as_ptr(), input.len(), &mut excl_errno);
    let rep = tee.disarm(Some(&mini));
    let chained = CHAINED_WRITES.load(Ordering::SeqCst);
    tee.uninstall().unwrap();
    other.unpatch().unwrap();
    assert_eq!(r, 0);
    assert_eq!(excl_errno, libc::EEXIST, "the failed open's errno");
    assert_eq!(chained, 5, "every write reaches the other hooker");
    assert_eq!(rep.caught_by, vec![so.to_str().unwrap().to_string()]);
    assert!(rep.opened && rep.closed, "{rep:?}");
    assert_eq!(rep.writes, 2);
    assert_eq!(rep.full_bytes, input.len() as u64);
    assert!(rep.mini.unwrap().is_ok());
    assert!(std::fs::read(&full).unwrap() == input, "full file differs");
    assert!(
        std::fs::read(&mini).unwrap() == want_mini,
        "mini file differs"
    );
}

/// The smallest dumper: one `open64`, one `write`, one `close`.
const SRC_ONE: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>
int dump(const char *path, const char *buf, size_t len) {
    int fd = open64(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    if (write(fd, buf, len) != (ssize_t)len) return -2;
    return close(fd);
}
"#;

type OneFn = extern "C" fn(*const c_char, *const u8, usize) -> c_int;

#[test]
fn each_of_eight_libraries_has_hooks_of_its_own() {
    let _one = test_lock();
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    let mut dumps = Vec::new();
    for k in 0..MAX_LIBS {
        let so = crate::hook::build_c_lib(
            dir.path(),
            &format!("libteelib{k}"),
            SRC_ONE,
            &["-Wl,-z,now"],
        );
        // SAFETY: `dump` has this signature in SRC_ONE.
        dumps.push(unsafe { std::mem::transmute::<usize, OneFn>(crate::hook::dl_fn(&so, "dump")) });
        paths.push(so.to_str().unwrap().to_string());
    }
    let names: Vec<String> = (0..MAX_LIBS).map(|k| format!("libteelib{k}.so")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let tee = Tee::install(&names).unwrap();
    assert_eq!(tee.libraries(), paths);
    let input = b"JAVA PROFILE 1.0.2\0: no mini file, never parsed";
    for (k, dump) in dumps.iter().enumerate() {
        let full = dir.path().join(format!("full{k}"));
        tee.arm(&TeeConfig {
            full_path: full.clone(),
            mini_path: None,
            level: Level::Arrays,
            keep_full: true,
            ring_bytes: 0,
        })
        .unwrap();
        let cpath = CString::new(full.to_str().unwrap()).unwrap();
        assert_eq!(dump(cpath.as_ptr(), input.as_ptr(), input.len()), 0);
        let rep = tee.disarm(None);
        assert_eq!(rep.caught_by, vec![paths[k].clone()], "library {k}");
        assert_eq!(
            (rep.opened, rep.closed, rep.writes, rep.full_bytes),
            (true, true, 1, input.len() as u64)
        );
        assert!(rep.mini.is_none());
        assert_eq!(std::fs::read(&full).unwrap(), input);
    }
    tee.uninstall().unwrap();
}

/// How many threads of this process are named `name`, once `want` are or after 5 s.
fn threads_named(name: &str, want: usize) -> usize {
    let count = || {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter(|t| {
                let comm = t.as_ref().unwrap().path().join("comm");
                std::fs::read_to_string(comm).is_ok_and(|c| c.trim_end() == name)
            })
            .count()
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let n = count();
        if n == want || std::time::Instant::now() > until {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A ring strips on a thread of its own; a mini file armed but never opened is abandoned
/// and removed.
#[test]
fn a_ring_strips_on_a_thread_of_its_own_and_an_unopened_dump_leaves_no_mini_file() {
    let _one = test_lock();
    let dir = tempfile::tempdir().unwrap();
    let tee = Tee { libs: Vec::new() };
    let mini = dir.path().join("mini.hprof");
    for ring_bytes in [1, 4096] {
        tee.arm(&TeeConfig {
            full_path: dir.path().join("full.hprof"),
            mini_path: Some(mini.clone()),
            level: Level::Arrays,
            keep_full: true,
            ring_bytes,
        })
        .unwrap();
        assert_eq!(threads_named("oomguard-strip", 1), 1, "{ring_bytes}");
        assert!(mini.exists());
        let rep = tee.disarm(Some(&mini));
        assert_eq!(
            rep.mini.unwrap().unwrap_err(),
            "no hooked library opened the dump path"
        );
        assert!(!mini.exists());
        assert_eq!(threads_named("oomguard-strip", 0), 0);
    }
}

/// The parent of a fork dumper drops the armed state and leaves the mini file to the child.
#[test]
fn discard_drops_the_armed_state_and_leaves_the_mini_file() {
    let _one = test_lock();
    let dir = tempfile::tempdir().unwrap();
    let tee = Tee { libs: Vec::new() };
    let mini = dir.path().join("mini.hprof");
    let cfg = TeeConfig {
        full_path: dir.path().join("full.hprof"),
        mini_path: Some(mini.clone()),
        level: Level::Arrays,
        keep_full: true,
        ring_bytes: 4096,
    };
    tee.arm(&cfg).unwrap();
    tee.discard();
    assert!(mini.exists());
    assert_eq!(threads_named("oomguard-strip", 0), 0);
    tee.arm(&cfg).unwrap();
    tee.discard();
    let rep = tee.disarm(Some(&mini));
    assert!(!rep.opened && rep.mini.is_none(), "{rep:?}");
    assert!(mini.exists());
}

/// A thread of the parent inside a hook at the fork leaves the child's copy of the spin
/// flag held by a thread the child does not have: the child frees it first.
#[test]
fn a_forked_child_frees_the_spin_flag_a_thread_of_the_parent_held() {
    let _one = test_lock();
    let _fork = crate::child::fork_test_lock();
    let tee = Tee { libs: Vec::new() };
    // As if a hook were running on another thread at the fork.
    LOCK.store(true, Ordering::Release);
    // SAFETY: the child only touches atomics and calls alarm and _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: async-signal-safe calls in the forked child.
        unsafe { libc::alarm(5) };
        Tee::reset_lock_in_child();
        let code = tee.finish_in_child().code;
        // SAFETY: as above.
        unsafe { libc::_exit(code) };
    }
    LOCK.store(false, Ordering::Release);
    assert!(pid > 0);
    let mut status = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "status {status:#x}");
    assert_eq!(libc::WEXITSTATUS(status), 2, "no dump was armed");
}

/// ART's dumper: armed with no ring, then forked; the child's VM dumps through the hooks,
/// here to fd 0 (a process that closed its stdin), and the child finishes the mini file
/// itself, with no thread of its own to lose at the fork. The parent only discards.
#[test]
fn a_forked_child_strips_inside_the_hook_and_finishes_the_mini_file_on_fd_0() {
    let _one = test_lock();
    let _fork = crate::child::fork_test_lock();
    let dir = tempfile::tempdir().unwrap();
    let so = crate::hook::build_c_lib(dir.path(), "libteechild", SRC_ONE, &["-Wl,-z,now"]);
    // SAFETY: `dump` has this signature in SRC_ONE.
    let dump: OneFn = unsafe { std::mem::transmute(crate::hook::dl_fn(&so, "dump")) };
    let (input, want_mini) = dump_and_mini();
    let tee = Tee::install(&["libteechild.so"]).unwrap();
    let (full, mini) = arm_named(&tee, dir.path(), "child", true, 0);
    let cpath = CString::new(full.to_str().unwrap()).unwrap();
    // SAFETY: the child closes fd 0, calls the stand-in dumper and the tee's child
    // functions (written for a forked child), and leaves by _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::alarm(10);
            libc::close(0);
        }
        let r = dump(cpath.as_ptr(), input.as_ptr(), input.len());
        let f = tee.finish_in_child();
        let ok = r == 0 && f.full_bytes == input.len() as u64 && f.mini.is_some();
        // SAFETY: as above.
        unsafe { libc::_exit(if ok { f.code } else { 10 + f.code }) };
    }
    assert!(pid > 0);
    tee.discard();
    let mut status = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    tee.uninstall().unwrap();
    assert!(libc::WIFEXITED(status), "status {status:#x}");
    assert_eq!(libc::WEXITSTATUS(status), 0, "the child's finish");
    assert!(std::fs::read(&full).unwrap() == input, "full file differs");
    assert!(
        std::fs::read(&mini).unwrap() == want_mini,
        "mini file differs"
    );
}

/// The spin flag held elsewhere (a hook on another thread): `with_state` spins, then
/// yields, until it is free, and only then runs.
#[test]
fn the_state_is_reached_once_the_spin_flag_is_free() {
    let _one = test_lock();
    LOCK.store(true, Ordering::Release);
    let waiter = std::thread::spawn(|| with_state(|st| st.is_none()));
    std::thread::sleep(std::time::Duration::from_millis(50));
    let early = waiter.is_finished();
    LOCK.store(false, Ordering::Release);
    assert!(!early, "ran while the flag was held");
    assert!(waiter.join().unwrap(), "no dump is armed");
}
