//! Issue 42, "release builds are obfuscated": a real ProGuard mapping. `tests/java/traces/
//! ThreadLeak.java` (destroyed activities held by a static field, a thread, and locals on two
//! threads' frames) is built twice, plain and minified by Debian's ProGuard 6.2
//! (`common::proguard`, with `-printmapping`), each run on the JVM to its heap dump, and the dumps
//! analysed by `oomguard analyze`, the minified one with `--mapping`: its report reads the
//! original names in traces (classes, fields, the frames' methods), dominators and the class
//! histogram, and each leak's signature equals the plain build's (a leak keeps its group across
//! builds). Without the mapping the same report reads the obfuscated names.
//!
//! The build is shrunk and obfuscated but not optimised (`-dontoptimize`): ProGuard's optimiser
//! removes write-only fields, and the leak through `Worker.target` with them, which changes the
//! heap itself, not its names.

mod common;

use common::proguard::{self, Rules};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Run `ThreadLeak` from `class_path`: its dump and running info (the thread list it writes).
fn dump(class_path: &str, dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join("threads.hprof");
    let st = Command::new("java")
        .arg("-cp")
        .arg(class_path)
        .arg("ThreadLeak")
        .arg(&out)
        .status()
        .expect("java runs");
    assert!(st.success(), "ThreadLeak failed");
    let info = dir.join("threads.hprof.threads.json");
    (out, info)
}

fn analyze(dump: &Path, info: &Path, mapping: Option<&Path>, out: &Path) -> Value {
    let mut c = Command::new(common::oomguard_bin());
    c.arg("analyze")
        .arg(dump)
        .arg("--running-info")
        .arg(info)
        .arg("-o")
        .arg(out);
    if let Some(m) = mapping {
        c.arg("--mapping").arg(m);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

/// Object ids (`@0x1f2e…`) differ between two runs: blanked.
fn no_ids(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("@0x") {
        out.push_str(&rest[..i + 3]);
        rest = rest[i + 3..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
    }
    out.push_str(rest);
    out
}

/// The leaks by signature: (class, reason, path references, root text, frame, node classes).
fn leaks(r: &Value) -> BTreeMap<String, Vec<String>> {
    let mut m = BTreeMap::new();
    for g in r["gcPaths"].as_array().unwrap() {
        let t = &g["trace"];
        let mut v = vec![
            g["className"].as_str().unwrap().to_string(),
            g["leakReason"].as_str().unwrap().to_string(),
            no_ids(t["root"].as_str().unwrap_or("")),
            t["thread"]["frame"].as_str().unwrap_or("-").to_string(),
        ];
        for i in g["path"].as_array().unwrap() {
            v.push(format!("{} {}", i["declaredClass"], i["reference"]));
        }
        for n in t["nodes"].as_array().into_iter().flatten() {
            v.push(format!("{} {}", n["className"], n["reference"]));
        }
        m.insert(g["signature"].as_str().unwrap().to_string(), v);
    }
    m
}

/// Class histogram rows of the app's classes: name → instances.
fn histogram(r: &Value) -> BTreeMap<String, u64> {
    r["classInfos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["className"].as_str().unwrap().to_string(),
                c["instanceCount"].as_u64().unwrap(),
            )
        })
        .filter(|(n, _)| n.starts_with("ThreadLeak"))
        .collect()
}

fn dominators(r: &Value) -> Vec<String> {
    let mut v: Vec<String> = r["dominators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["className"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn a_proguard_build_analysed_with_its_mapping_reads_as_the_plain_build() {
    if !proguard::available() {
        eprintln!("skipped: no proguard (apt install proguard)");
        return;
    }
    let root = common::root();
    let source = root.join("crates/cli/tests/java/traces/ThreadLeak.java");
    let m = proguard::minify(
        "threadleak",
        std::slice::from_ref(&source),
        &["ThreadLeak"],
        Rules::Shipped,
        "-dontoptimize\n-keepattributes SourceFile,LineNumberTable\n",
    );
    assert_ne!(m.class("ThreadLeak$Screen"), "ThreadLeak$Screen");
    assert_ne!(m.class("ThreadLeak$Holder"), "ThreadLeak$Holder");
    let work = tempfile::tempdir().unwrap();
    // The plain build: the same source and bytecode level, not minified.
    let plain_classes = work.path().join("plain-classes");
    proguard::javac8(&[source], Some(&m.android), &plain_classes);
    let plain_cp = format!("{}:{}", plain_classes.display(), m.android.display());
    let (d, i) = dump(&plain_cp, &work.path().join("plain"));
    let plain = analyze(&d, &i, None, &work.path().join("plain.json"));
    let (d, i) = dump(&m.class_path(), &work.path().join("min"));
    let mapped = analyze(&d, &i, Some(&m.mapping), &work.path().join("mapped.json"));
    let raw = analyze(&d, &i, None, &work.path().join("raw.json"));

    let (p, q) = (leaks(&plain), leaks(&mapped));
    let screens = |l: &BTreeMap<String, Vec<String>>| {
        l.values().filter(|v| v[0] == "ThreadLeak$Screen").count()
    };
    assert_eq!(screens(&p), 4, "{p:#?}");
    // Same leaks, same signatures, same words: classes, fields, roots and frames.
    assert_eq!(p, q);
    let frames: Vec<&String> = q.values().map(|v| &v[3]).filter(|f| *f != "-").collect();
    assert!(
        frames
            .iter()
            .any(|f| f.starts_with("ThreadLeak$Holder.run(ThreadLeak.java:")),
        "{frames:?}"
    );
    assert_eq!(histogram(&plain), histogram(&mapped));
    assert!(histogram(&plain).contains_key("ThreadLeak$Screen"));
    assert_eq!(dominators(&plain), dominators(&mapped));

    // Without the mapping: the obfuscated names, and other signatures.
    let r = leaks(&raw);
    assert_eq!(screens(&r), 0, "{r:#?}");
    let obfuscated = m.class("ThreadLeak$Screen");
    assert_eq!(r.values().filter(|v| v[0] == obfuscated).count(), 4);
    assert!(r.keys().all(|k| !p.contains_key(k)));

    // The collector's way (it receives reports the agent made without the mapping): the
    // minified build's report renamed afterwards reads as the plain one, signatures included.
    let renames =
        collector::mapping::parse(&std::fs::read(&m.mapping).unwrap()).expect("the mapping");
    let mut later = raw.clone();
    renames.report_json(&mut later);
    assert_eq!(leaks(&later), p);
    assert_eq!(histogram(&later), histogram(&plain));
    assert_eq!(dominators(&later), dominators(&plain));
    let objects = |r: &Value| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = r["leakObjects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["className"].to_string(), o["signature"].to_string()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(objects(&later), objects(&plain));
}
