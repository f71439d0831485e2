//! The ART part of `scripts/bench.sh dump` (run by `scripts/bench/dump/art.sh`): on Debian's
//! ART 11 (the test runtime of `tests/art`, built by its harness), `ArtDumpBench`
//! (tests/art/app/dev/oomguard/testing) builds a live heap of MB MiB and liboomguard's
//! `jni::probe_art` dumps it ROUNDS times each way:
//! - in process, `art::hprof::DumpHeap` (what `VMDebug.dumpHprofData` runs; ART suspends every
//!   Java thread for the whole dump): plain, through the tee with the stripper on its own
//!   thread (ring), and through the tee stripping inside the hook (as in the fork child);
//! - the ART fork dumper (API 30 sequence): the parent's pause from the suspension's start to
//!   its end (fork in between), and the child's dump time (not a pause of the app).
//!
//! Then `oomguard strip --level arrays|app` of the last fork dump, against its floor (the file
//! less its primitive array contents, from `oomguard inspect --json`); `arrays` must equal the
//! floor to the byte, and the tee's mini file must equal `strip --level arrays`: the bench
//! fails otherwise.
//!
//! A plain `fork()` of a process with the same resident set (python3) is timed beside it: on a
//! virtual machine the kernel's page-table copy is most of the fork dumper's pause.
//!
//! With CHURN > 0, that many app threads (`ArtBenchChurn`) allocate garbage throughout, so the
//! heap task daemon of the core library runs concurrent GCs all along and one is often in
//! flight when the fork dumper asks for the GC critical section, which waits for it: the table
//! then gives the worst pause and its phases, and the waits ART logged ("WaitForGcToComplete
//! blocked Hprof on ... for ..."; ART logs those over 5 ms, and every GC with
//! `-XX:LongGCLogThreshold=0`, which the bench sets).
//!
//! Usage: `art_dump_bench LIB_DIR OOMGUARD_BIN WORK_DIR MB SMALL_PCT ROUNDS XMX_MB CHURN`
//! (SMALL_PCT: the share of the heap in small objects, the rest in 1 MiB `int[]`; CHURN: how
//! many threads churn garbage).

#[path = "../tests/art/harness.rs"]
mod harness;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        f64::NAN
    } else {
        v[(v.len() - 1) / 2]
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

fn oomguard(bin: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(
        out.status.success(),
        "oomguard {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The median time of 5 `fork()`s of a python3 process that has `bytes` more of memory written
/// (its own resident set comes on top: about 9 MiB).
fn plain_fork_ms(bytes: u64) -> f64 {
    let script = "import os, sys, time\n\
        b = bytearray(int(sys.argv[1]))\n\
        for i in range(0, len(b), 4096): b[i] = 1\n\
        ts = []\n\
        for _ in range(5):\n\
        \x20   t = time.perf_counter(); pid = os.fork()\n\
        \x20   if pid == 0: os._exit(0)\n\
        \x20   ts.append((time.perf_counter() - t) * 1000); os.waitpid(pid, 0)\n\
        print(sorted(ts)[2])\n";
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(bytes.to_string())
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("python3's fork time")
}

/// ART's "WaitForGcToComplete blocked CAUSE on RUNNING for DURATION" lines of `log` whose
/// CAUSE is `cause`: (RUNNING, milliseconds). ART prints durations as e.g. 55.123ms, 812us, 1.2s.
fn gc_waits(log: &str, cause: &str) -> Vec<(String, f64)> {
    let head = format!("WaitForGcToComplete blocked {cause} on ");
    log.lines()
        .filter_map(|l| {
            let rest = &l[l.find(&head)? + head.len()..];
            let (on, d) = rest.split_once(" for ")?;
            let d = d.trim();
            let unit = d.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
            let v: f64 = d[..d.len() - unit.len()].parse().ok()?;
            let ms = match unit {
                "ms" => v,
                "us" => v / 1e3,
                "ns" => v / 1e6,
                "s" => v * 1e3,
                _ => return None,
            };
            Some((on.to_string(), ms))
        })
        .collect()
}

/// The command line: see the module doc.
struct Args {
    lib: PathBuf,
    bin: PathBuf,
    work: PathBuf,
    mb: u64,
    small_pct: u64,
    rounds: u64,
    xmx: u64,
    churn: u64,
}

fn args() -> Args {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 9 {
        eprintln!(
            "usage: art_dump_bench LIB_DIR OOMGUARD_BIN WORK_DIR MB SMALL_PCT ROUNDS XMX_MB CHURN"
        );
        std::process::exit(2);
    }
    let args = Args {
        lib: PathBuf::from(&a[1]),
        bin: PathBuf::from(&a[2]),
        work: PathBuf::from(&a[3]),
        mb: a[4].parse().expect("MB"),
        small_pct: a[5].parse().expect("SMALL_PCT"),
        rounds: a[6].parse().expect("ROUNDS"),
        xmx: a[7].parse().expect("XMX_MB"),
        churn: a[8].parse().expect("CHURN"),
    };
    assert!(args.small_pct <= 100, "SMALL_PCT is a percentage");
    args
}

fn main() {
    let a = args();
    if !harness::available("art dump bench") {
        std::process::exit(1);
    }
    let dir = a.work.join("dumps");
    std::fs::create_dir_all(&dir).expect("mkdir dumps");
    let (run, r) = run_bench(&a, &dir);
    let inproc = r["in_process"].as_array().expect("in_process");
    let forks = r["fork"].as_array().expect("fork");
    let sizes = strip_sizes(&a.bin, &dir);
    print_table(&a, &run, inproc, forks, &sizes);
    let mut failed = Vec::new();
    let (arrays, floor) = (sizes.arrays, sizes.floor);
    if arrays != floor {
        failed.push(format!(
            "strip --level arrays wrote {arrays} B, the floor is {floor} B"
        ));
    }
    if !sizes.tee_mini_same {
        failed.push("the tee's mini file differs from strip --level arrays".to_string());
    }
    if !failed.is_empty() {
        eprintln!("art dump bench: {}", failed.join("; "));
        std::process::exit(1);
    }
}

/// Run `ArtDumpBench` on ART with the arguments' heap, dumping into `dir`: the run, and its
/// `bench=` JSON (checked to hold no error).
fn run_bench(a: &Args, dir: &Path) -> (harness::Run, Value) {
    let (mb, small_pct, rounds, xmx, churn) = (a.mb, a.small_pct, a.rounds, a.xmx, a.churn);
    let opts = [
        format!("-Xmx{xmx}m"),
        // Start with the heap the program will fill: fewer allocation-time collections while
        // the interpreter builds it.
        format!("-Xms{}m", (mb + 64).min(xmx)),
        format!("-Dbench.mb={mb}"),
        format!("-Dbench.small_pct={small_pct}"),
        format!("-Dbench.rounds={rounds}"),
        format!("-Dbench.dir={}", dir.display()),
        format!("-Dbench.churn={churn}"),
        // Every GC in ART's log (the background ones among them).
        "-XX:LongGCLogThreshold=0".to_string(),
    ];
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    eprintln!(
        "art dump bench: building a {mb} MiB heap on ART 11 (-Xint, -Xmx{xmx}m), {rounds} rounds, {churn} churning threads"
    );
    let run = harness::launch(
        &a.work,
        "dev/oomguard/testing/ArtDumpBench",
        &opts,
        &[("LD_LIBRARY_PATH", a.lib.to_str().expect("utf-8 path"))],
        Duration::from_secs(7200),
    );
    let why = run.describe();
    assert_eq!(run.code, Some(0), "{why}");
    let json = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("bench="))
        .unwrap_or_else(|| panic!("no bench= line\n{why}"));
    let r: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert!(r.get("error").is_none(), "the probe failed: {r}\n{why}");
    (run, r)
}

/// The in-process dumps' walls (pauses) of `mode`, in ms.
fn pauses(inproc: &[Value], mode: &str) -> Vec<f64> {
    inproc
        .iter()
        .filter(|d| d["mode"] == mode)
        .map(|d| d["pause_ms"].as_f64().expect("pause_ms"))
        .collect()
}

/// The tee's cost, paired within each round (the three dumps of a round are adjacent, so a
/// change in the machine's load hits them alike): median of mode / plain of `key` (wall time
/// or the dumping thread's CPU time), in percent.
fn paired(inproc: &[Value], mode: &str, key: &str) -> f64 {
    let ratios = inproc
        .chunks(3)
        .map(|round| {
            let get = |m: &str| {
                round
                    .iter()
                    .find(|d| d["mode"] == m)
                    .and_then(|d| d[key].as_f64())
                    .expect("a dump of each mode in each round")
            };
            get(mode) / get("plain")
        })
        .collect();
    (median(ratios) - 1.0) * 100.0
}

/// The median CPU time of the in-process dumps of `mode`, in ms.
fn cpu(inproc: &[Value], mode: &str) -> f64 {
    median(
        inproc
            .iter()
            .filter(|d| d["mode"] == mode)
            .map(|d| d["cpu_ms"].as_f64().expect("cpu_ms"))
            .collect(),
    )
}

fn min(v: Vec<f64>) -> f64 {
    v.into_iter().fold(f64::INFINITY, f64::min)
}

/// The figure `k` of each fork dump.
fn of_forks(forks: &[Value], k: &str) -> Vec<f64> {
    forks.iter().map(|f| f[k].as_f64().expect(k)).collect()
}

/// Sizes of the last fork dump: its floor (the file less its primitive array contents), and
/// `strip --level arrays` (which must be the floor) and `app`.
struct Sizes {
    file_bytes: u64,
    floor: u64,
    arrays: u64,
    app: u64,
    /// The fork child's mini file is `strip --level arrays` of its dump, byte for byte.
    tee_mini_same: bool,
}

fn strip_sizes(bin: &Path, dir: &Path) -> Sizes {
    let full = dir.join("fork.hprof");
    let mini = dir.join("fork.mini.hprof");
    let full_s = full.to_str().expect("utf-8");
    let inspect: Value = serde_json::from_slice(&oomguard(bin, &["inspect", full_s, "--json"]))
        .expect("inspect --json");
    let file_bytes = inspect["file_bytes"].as_u64().expect("file_bytes");
    let contents = inspect["bytes"]["primitive_array_contents"]
        .as_u64()
        .expect("primitive_array_contents");
    let floor = file_bytes - contents;
    let mut sizes = Vec::new();
    for level in ["arrays", "app"] {
        let out = dir.join(format!("strip-{level}.hprof"));
        let out_s = out.to_str().expect("utf-8");
        oomguard(bin, &["strip", "--level", level, full_s, "-o", out_s]);
        sizes.push(std::fs::metadata(&out).expect("stripped").len());
    }
    let tee_mini_same = std::fs::read(&mini).expect("fork.mini.hprof")
        == std::fs::read(dir.join("strip-arrays.hprof")).unwrap();
    Sizes {
        file_bytes,
        floor,
        arrays: sizes[0],
        app: sizes[1],
        tee_mini_same,
    }
}

/// One row of the table.
fn row(k: &str, v: String) {
    println!("{k:<62} {v}");
}

/// The table: the in-process dumps, the fork dumper, the churn, and the sizes.
fn print_table(a: &Args, run: &harness::Run, inproc: &[Value], forks: &[Value], sizes: &Sizes) {
    eprintln!(
        "art dump bench: in-process walls (ms) plain {:?} ring {:?} inline {:?}",
        pauses(inproc, "plain"),
        pauses(inproc, "tee-ring"),
        pauses(inproc, "tee-inline")
    );
    let fork_pauses = of_forks(forks, "pause_ms");
    eprintln!("art dump bench: fork pauses (ms) {fork_pauses:?}");
    let waits: Vec<f64> = forks
        .iter()
        .map(|f| f["gc_wait_ms"].as_f64().unwrap_or(f64::NAN))
        .collect();
    eprintln!("art dump bench: fork dumps' GC waits (ms) {waits:?}");
    let rss = forks[0]["rss_kb"].as_u64().unwrap_or(0) << 10;
    let control = plain_fork_ms(rss);
    let hprof_waits = gc_waits(&run.stderr, "Hprof");
    let waits_on: Vec<String> = hprof_waits
        .iter()
        .map(|(on, ms)| format!("{ms:.1} on {on}"))
        .collect();
    eprintln!("art dump bench: Hprof's waits for a running GC (ms) {waits_on:?}");
    println!();
    println!(
        "{:<62} value",
        format!(
            "ART 11 (android-libart, -Xint, image-less), -Xmx{}m, dumps to {}",
            a.xmx,
            a.work.display()
        )
    );
    let live = run.value("live").expect("live=") as u64;
    let nodes = run.value("nodes").expect("nodes=");
    row(
        "live heap (Runtime total - free, after building it)",
        format!(
            "{:.0} MiB ({} MiB asked, {} % in {nodes} small objects, the rest in 1 MiB int[]); RSS {:.0} MiB",
            mib(live),
            a.mb,
            a.small_pct,
            mib(rss)
        ),
    );
    in_process_rows(a, inproc);
    fork_rows(a, forks);
    let background_gcs = run
        .stderr
        .matches("Background concurrent copying GC freed")
        .count();
    row(
        "churn: threads allocating garbage through the dumps",
        format!(
            "{} ({:.0} MiB allocated); {background_gcs} background GCs in ART's log",
            a.churn,
            mib(run.value("churned").unwrap_or(0) as u64)
        ),
    );
    let longest_wait = hprof_waits.iter().map(|w| w.1).fold(0.0, f64::max);
    row(
        "dumps' waits for a running GC (ART's log, > 5 ms; all dumps)",
        format!("{} waits, longest {longest_wait:.1} ms", hprof_waits.len()),
    );
    row(
        "control: fork() of python3 with as much memory written",
        format!("{control:.2} ms (median of 5; {:.0} MiB written)", mib(rss)),
    );
    let plain = median(pauses(inproc, "plain"));
    let fork_pause = median(fork_pauses.clone());
    let ratio = plain / fork_pause;
    row(
        "in-process pause / fork pause (target >= 100)",
        format!(
            "{ratio:.0} x (medians; fastest against fastest {:.0} x)",
            min(pauses(inproc, "plain")) / min(fork_pauses.clone())
        ),
    );
    let fork_total = median(of_forks(forks, "total_ms"));
    row(
        "fork dumper: child's dump + tee, parent waiting (no pause)",
        format!("{fork_total:.0} ms"),
    );
    size_rows(sizes);
}

/// The rows of the in-process dumps: plain, and through the tee both ways.
fn in_process_rows(a: &Args, inproc: &[Value]) {
    let plain = median(pauses(inproc, "plain"));
    let ring = median(pauses(inproc, "tee-ring"));
    let inline = median(pauses(inproc, "tee-inline"));
    let inproc_bytes = inproc[0]["full_bytes"].as_u64().unwrap_or(0);
    row(
        &format!(
            "in-process DumpHeap (VMDebug.dumpHprofData), median of {}",
            a.rounds
        ),
        format!(
            "{plain:.1} ms, min {:.1} (app paused throughout; {:.0} MiB); thread CPU {:.0} ms",
            min(pauses(inproc, "plain")),
            mib(inproc_bytes),
            cpu(inproc, "plain")
        ),
    );
    row(
        "  + tee + stripper on its own thread (ring)",
        format!(
            "{ring:.1} ms, min {:.1}; paired {:+.1} % wall; thread CPU {:.0} ms ({:+.1} %)",
            min(pauses(inproc, "tee-ring")),
            paired(inproc, "tee-ring", "pause_ms"),
            cpu(inproc, "tee-ring"),
            paired(inproc, "tee-ring", "cpu_ms")
        ),
    );
    row(
        "  + tee + stripper inside the hook (the fork child's way)",
        format!(
            "{inline:.1} ms, min {:.1}; paired {:+.1} % wall; thread CPU {:.0} ms ({:+.1} %)",
            min(pauses(inproc, "tee-inline")),
            paired(inproc, "tee-inline", "pause_ms"),
            cpu(inproc, "tee-inline"),
            paired(inproc, "tee-inline", "cpu_ms")
        ),
    );
}

/// The rows of the fork dumper: its pause, the pause's phases (median and worst), and the
/// pause less the wait for a running GC.
fn fork_rows(a: &Args, forks: &[Value]) {
    let fork_pauses = of_forks(forks, "pause_ms");
    let fork_pause = median(fork_pauses.clone());
    let phase = |k: &str| median(of_forks(forks, k));
    let (gc_wait, suspend, fork_call, resume) = (
        phase("gc_wait_ms"),
        phase("suspend_ms"),
        phase("fork_ms"),
        phase("resume_ms"),
    );
    // The pause less the wait for a running GC or trim (the app runs during that wait): from
    // holding the GC critical section to the suspension's end.
    let held: Vec<f64> = forks
        .iter()
        .map(|f| {
            f["pause_ms"].as_f64().expect("pause_ms") - f["gc_wait_ms"].as_f64().expect("gc_wait")
        })
        .collect();
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    // The worst fork pause and its phases.
    let worst = forks
        .iter()
        .max_by(|x, y| {
            let p = |f: &Value| f["pause_ms"].as_f64().unwrap_or(0.0);
            p(x).total_cmp(&p(y))
        })
        .expect("a fork dump");
    let phase_of = |k: &str| worst[k].as_f64().unwrap_or(f64::NAN);
    row(
        "fork dumper: parent's pause (suspend -> fork -> resume)",
        format!(
            "{fork_pause:.2} ms (median of {}), min {:.2}",
            a.rounds,
            min(fork_pauses.clone())
        ),
    );
    row(
        "  of which: wait for a running GC / suspend all / fork() / resume",
        format!("{gc_wait:.2} / {suspend:.2} / {fork_call:.2} / {resume:.2} ms (medians)"),
    );
    row(
        "  worst pause: GC wait / suspend all / fork() / resume",
        format!(
            "{:.2} ms: {:.2} / {:.2} / {:.2} / {:.2} ms",
            phase_of("pause_ms"),
            phase_of("gc_wait_ms"),
            phase_of("suspend_ms"),
            phase_of("fork_ms"),
            phase_of("resume_ms")
        ),
    );
    row(
        "  less the GC wait (critical section held -> resumed)",
        format!(
            "{:.2} ms median, worst {:.2} ms",
            median(held.clone()),
            max(&held)
        ),
    );
}

/// The rows of the last fork dump's sizes: the file, its floor, and both strip levels.
fn size_rows(sz: &Sizes) {
    let (file_bytes, floor, arrays, app) = (sz.file_bytes, sz.floor, sz.arrays, sz.app);
    row(
        "fork dump file (full)",
        format!("{:.1} MiB ({file_bytes} B)", mib(file_bytes)),
    );
    row(
        "floor: file less primitive array contents (inspect --json)",
        format!(
            "{:.1} MiB ({floor} B, {:.1} %)",
            mib(floor),
            100.0 * floor as f64 / file_bytes as f64
        ),
    );
    row(
        "oomguard strip --level arrays (must equal the floor)",
        format!(
            "{:.1} MiB ({arrays} B): {}",
            mib(arrays),
            if arrays == floor {
                "= floor to the byte"
            } else {
                "DIFFERS from the floor"
            }
        ),
    );
    row(
        "oomguard strip --level app (no image/zygote heap image-less)",
        format!(
            "{:.1} MiB ({app} B, {:.1} % of the floor)",
            mib(app),
            100.0 * app as f64 / floor as f64
        ),
    );
    row(
        "the fork child's mini file = strip --level arrays of its dump",
        if sz.tee_mini_same {
            "yes, byte for byte"
        } else {
            "NO"
        }
        .to_string(),
    );
}
