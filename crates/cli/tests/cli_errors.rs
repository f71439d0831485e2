//! Bad input at the command line, run through the real `oomguard` binary: every case exits with
//! the documented status (2: the input or the command line is wrong; 1: the machine failed),
//! names the right file (the input, or the OUTPUT, never a temporary) with the OS's reason, and
//! leaves nothing behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a run of `oomguard` gave.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Run `oomguard ARGS` with no stdin; killed (and the test failed) after 60 s: bad input must
/// never hang it.
fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    let mut c = Command::new(env!("CARGO_BIN_EXE_oomguard"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while c.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = c.kill();
            let _ = c.wait();
            panic!(
                "oomguard hung: {:?}",
                args.iter().map(|a| a.as_ref()).collect::<Vec<_>>()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = c.wait_with_output().unwrap();
    Run {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A small valid ART-style dump, written by `oomguard testdata-art`.
fn dump(dir: &Path) -> PathBuf {
    let p = dir.join("small.hprof");
    let r = run(&[
        "testdata-art".as_ref(),
        p.as_os_str(),
        "--image".as_ref(),
        "20".as_ref(),
        "--zygote".as_ref(),
        "10".as_ref(),
        "--app".as_ref(),
        "40".as_ref(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    p
}

/// The files in `dir`, by name.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The four commands that read a dump, each writing to `out` (inspect writes nothing).
fn dump_commands(input: &Path, out: &Path) -> Vec<Vec<std::ffi::OsString>> {
    let (i, o) = (input.as_os_str().to_owned(), out.as_os_str().to_owned());
    vec![
        vec!["inspect".into(), i.clone()],
        vec!["strip".into(), i.clone(), "-o".into(), o.clone()],
        vec!["restore".into(), i.clone(), "-o".into(), o.clone()],
        vec!["analyze".into(), i, "-o".into(), o],
    ]
}

#[test]
fn a_missing_input_exits_2_naming_the_file_and_the_os_reason() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("no-such.hprof");
    let out = dir.path().join("out");
    for args in dump_commands(&input, &out) {
        let r = run(&args);
        let want = format!(
            "oomguard: {}: cannot open: No such file or directory",
            input.display()
        );
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with(&want), "{args:?}: {}", r.stderr);
    }
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    // The analyser's other inputs are inputs too.
    let good = dump(dir.path());
    for opt in ["--config", "--running-info"] {
        let r = run(&[
            "analyze".as_ref(),
            good.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            opt.as_ref(),
            input.as_os_str(),
        ]);
        assert_eq!(r.code, Some(2), "{opt}: {}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("{}: cannot open: No such file", input.display())),
            "{opt}: {}",
            r.stderr
        );
        assert!(!out.exists());
    }
}

#[test]
fn a_directory_or_a_pipe_as_input_exits_2_saying_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("a-directory");
    std::fs::create_dir(&sub).unwrap();
    let out = dir.path().join("out");
    for args in dump_commands(&sub, &out) {
        let r = run(&args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr
                .starts_with(&format!("oomguard: {}: is a directory", sub.display())),
            "{args:?}: {}",
            r.stderr
        );
    }
    // A named pipe with no writer: refused at once, not waited on.
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for args in dump_commands(&fifo, &out) {
        let r = run(&args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("{}: not a regular file", fifo.display())),
            "{args:?}: {}",
            r.stderr
        );
    }
    assert!(!out.exists());
}

/// A file that is a valid HPROF but holds no heap dump record: the header alone (31 bytes), or
/// the header and a string. `analyze`, `strip` and `restore` refuse it; `inspect` describes it
/// and warns.
#[test]
fn a_dump_without_heap_records_is_refused_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read(dump(dir.path())).unwrap();
    let header = &full[..31];
    let mut with_string = header.to_vec();
    // UTF8 record: tag, time, length 8: a 4-byte id (this dump's id size) and "abcd".
    with_string.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 7]);
    with_string.extend_from_slice(b"abcd");
    for (name, bytes, records) in [
        ("header-only.hprof", header.to_vec(), 0),
        ("strings-only.hprof", with_string, 1),
    ] {
        let input = dir.path().join(name);
        std::fs::write(&input, &bytes).unwrap();
        let out = dir.path().join(format!("{name}.out"));
        let want = format!(
            "{}: byte {}: no heap dump records: the file ends after its header and {records} other record(s)",
            input.display(),
            bytes.len()
        );
        for args in dump_commands(&input, &out) {
            let r = run(&args);
            if args[0] == "inspect" {
                assert_eq!(r.code, Some(0), "{name}: {args:?}: {}", r.stderr);
                assert!(r.stdout.contains("file header"), "{name}: {}", r.stdout);
                assert!(
                    r.stderr.starts_with(&format!("oomguard: warning: {want}")),
                    "{name}: {args:?}: {}",
                    r.stderr
                );
            } else {
                assert_eq!(r.code, Some(2), "{name}: {args:?}: {}", r.stderr);
                assert!(
                    r.stderr.starts_with(&format!("oomguard: {want}")),
                    "{name}: {args:?}: {}",
                    r.stderr
                );
                assert!(!out.exists(), "{name}: {args:?} wrote its output");
            }
        }
    }
    assert!(!names(dir.path()).iter().any(|n| n.contains(".tmp")));
}

/// An output in a directory that does not exist: the error names the OUTPUT path (not a
/// temporary beside it), exits 1, and nothing is written.
#[test]
fn an_output_in_a_missing_directory_names_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let input = dump(dir.path());
    let out = dir.path().join("no-such-dir/out.hprof");
    let mut cmds = dump_commands(&input, &out)[1..].to_vec();
    cmds.push(vec!["testdata-art".into(), out.as_os_str().to_owned()]);
    for args in cmds {
        let r = run(&args);
        assert_eq!(r.code, Some(1), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr
                .starts_with(&format!("oomguard: {}: cannot write: ", out.display())),
            "{args:?}: {}",
            r.stderr
        );
        // Not the temporary beside it, `.out.hprof.PID.SEQ.tmp`.
        assert!(!r.stderr.contains(".out.hprof."), "{args:?}: {}", r.stderr);
    }
    assert_eq!(names(dir.path()), ["small.hprof"]);
}

/// `analyze --html` into a missing directory fails before the analysis, and the JSON report,
/// whose directory exists, is not written either.
#[test]
fn analyze_html_in_a_missing_directory_writes_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let input = dump(dir.path());
    let report = dir.path().join("report.json");
    let page = dir.path().join("no-such-dir/page.html");
    let r = run(&[
        "analyze".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        report.as_os_str(),
        "--html".as_ref(),
        page.as_os_str(),
    ]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .starts_with(&format!("oomguard: {}: cannot write: ", page.display())),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty(), "the analysis ran: {}", r.stdout);
    assert_eq!(names(dir.path()), ["small.hprof"]);
    // Both in existing directories: both written.
    let page = dir.path().join("page.html");
    let r = run(&[
        "analyze".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        report.as_os_str(),
        "--html".as_ref(),
        page.as_os_str(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        names(dir.path()),
        ["page.html", "report.json", "small.hprof"]
    );
}

/// An output that is the input would replace the dump with its own strip or report.
#[test]
fn an_output_that_is_the_input_is_refused_and_the_input_kept() {
    let dir = tempfile::tempdir().unwrap();
    let input = dump(dir.path());
    let before = std::fs::read(&input).unwrap();
    // The same file under another name.
    let alias = dir.path().join(".").join("small.hprof");
    for args in dump_commands(&input, &alias)[1..].iter() {
        let r = run(args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("the output is the input"),
            "{args:?}: {}",
            r.stderr
        );
    }
    let report = dir.path().join("r.json");
    let r = run(&[
        "analyze".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        report.as_os_str(),
        "--html".as_ref(),
        report.as_os_str(),
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("--html and --output name the same file"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read(&input).unwrap(), before);
    assert_eq!(names(dir.path()), ["small.hprof"]);
}

/// Snapshots count from 1: `--snapshot 0` (or `"snapshot": 0` in a config) says so.
#[test]
fn snapshot_0_says_snapshots_count_from_1() {
    let dir = tempfile::tempdir().unwrap();
    let input = dump(dir.path());
    let out = dir.path().join("r.json");
    let base = [
        "analyze".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ];
    let r = run(&[&base[..], &["--snapshot".as_ref(), "0".as_ref()]].concat());
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("snapshots count from 1"), "{}", r.stderr);
    let cfg = dir.path().join("cfg.json");
    std::fs::write(&cfg, r#"{"snapshot": 0}"#).unwrap();
    let r = run(&[&base[..], &["--config".as_ref(), cfg.as_os_str()]].concat());
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "{}: snapshot 0: snapshots count from 1",
            cfg.display()
        )),
        "{}",
        r.stderr
    );
    assert!(!out.exists());
}

/// `collect --listen` with a bad address, or a non-loopback one without `--any-address`, is the
/// command line's fault.
#[test]
fn collect_with_a_bad_listen_address_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    for (addr, want) in [
        ("garbage", "--listen garbage: invalid socket address"),
        ("127.0.0.1:99999", "--listen 127.0.0.1:99999: invalid port"),
        ("0.0.0.0:0", "--any-address"),
    ] {
        let r = run(&[
            "collect".as_ref(),
            "--dir".as_ref(),
            dir.path().as_os_str(),
            "--listen".as_ref(),
            addr.as_ref(),
        ]);
        assert_eq!(r.code, Some(2), "{addr}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{addr}: {}", r.stderr);
    }
}

/// Run `bash scripts/adb-inspect.sh ARGS` with `PATH` set to `path`.
fn adb_inspect(args: &[&str], path: &Path) -> Run {
    let o = Command::new("/bin/bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/adb-inspect.sh"))
        .args(args)
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// `scripts/adb-inspect.sh` without a package prints its usage line and exits 2; without `adb`
/// on PATH it names Debian's package (and the SDK's platform-tools).
#[test]
fn adb_inspect_says_its_usage_and_where_adb_comes_from() {
    // A PATH with no adb on it (the script needs only bash's builtins before it looks for adb).
    let empty = tempfile::tempdir().unwrap();
    for args in [&[][..], &["-x"], &["a", "b", "c"]] {
        let r = adb_inspect(args, empty.path());
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("usage: scripts/adb-inspect.sh PKG [DATA_SUBDIR]"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("1: usage"), "{args:?}: {}", r.stderr);
    }
    let r = adb_inspect(&["--help"], empty.path());
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.starts_with("usage: "), "{}", r.stdout);
    let r = adb_inspect(&["com.example.app"], empty.path());
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("adb not found") && r.stderr.contains("Debian's adb package"),
        "{}",
        r.stderr
    );
}

/// `testdata-art` builds its dump in memory: a spec far over its bound is refused at once, not
/// run into the allocator's abort.
#[test]
fn testdata_art_refuses_a_dump_too_large_to_build() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("huge.hprof");
    let t0 = Instant::now();
    let r = run(&[
        "testdata-art".as_ref(),
        out.as_os_str(),
        "--app".as_ref(),
        "4000000000".as_ref(),
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("at most 2048 MB"), "{}", r.stderr);
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert!(names(dir.path()).is_empty());
}

/// An option file is read whole into memory: one larger than the documented bound (64 MiB) is
/// refused, naming it, instead of being read.
#[test]
fn an_option_file_over_its_bound_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dump(dir.path());
    let big = dir.path().join("info.json");
    // Sparse: 65 MiB of holes cost no disk.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(65 << 20)
        .unwrap();
    let out = dir.path().join("r.json");
    for opt in ["--running-info", "--config"] {
        let r = run(&[
            "analyze".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            opt.as_ref(),
            big.as_os_str(),
        ]);
        assert_eq!(r.code, Some(2), "{opt}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "{}: byte 67108864: larger than the 64 MiB",
                big.display()
            )),
            "{opt}: {}",
            r.stderr
        );
        assert!(!out.exists());
    }
}
