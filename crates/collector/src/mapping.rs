//! R8 / ProGuard mapping files (issue 42): read with the `proguard` crate's line parser into the
//! renames the analyser applies (`analyze::renames::Renames`: classes, fields by their class,
//! and methods with their line ranges, for the stack frames of a HotSpot dump's threads).
//!
//! A mapping is machine-written: a line the parser rejects is an error naming its byte offset,
//! and so is a file over [`MAX_MAPPING_BYTES`] or a field line before any class line.
#![forbid(unsafe_code)]

use analyze::renames::{MethodRename, Renames};
use proguard::ProguardRecord;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The largest mapping file read (a large app's is tens of MB).
pub const MAX_MAPPING_BYTES: u64 = 512 << 20;

/// The renames of the mapping `text`; or the byte offset of the first bad line and what is
/// wrong with it.
pub fn parse(text: &[u8]) -> Result<Renames, (u64, String)> {
    if text.len() as u64 > MAX_MAPPING_BYTES {
        return Err((
            0,
            format!("larger than {MAX_MAPPING_BYTES} bytes: not read"),
        ));
    }
    let mut r = Renames::default();
    let mut class: Option<String> = None;
    let mut offset = 0u64;
    for raw in text.split_inclusive(|&b| b == b'\n') {
        let at = offset;
        offset += raw.len() as u64;
        let line = raw.strip_suffix(b"\n").unwrap_or(raw);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) || line.trim_ascii_start().starts_with(b"#") {
            continue;
        }
        match ProguardRecord::try_parse(line) {
            Ok(ProguardRecord::Class {
                original,
                obfuscated,
            }) => {
                if original != obfuscated {
                    r.classes.insert(obfuscated.into(), original.into());
                }
                class = Some(obfuscated.into());
            }
            Ok(ProguardRecord::Field {
                original,
                obfuscated,
                ..
            }) => {
                let Some(c) = &class else {
                    return Err((at, "a field before any class line".into()));
                };
                if original != obfuscated {
                    r.fields
                        .insert((c.clone(), obfuscated.into()), original.into());
                }
            }
            Ok(ProguardRecord::Method {
                original,
                obfuscated,
                original_class,
                line_mapping,
                ..
            }) => {
                let Some(c) = &class else {
                    return Err((at, "a method before any class line".into()));
                };
                let line = |v: Option<usize>| v.and_then(|l| u32::try_from(l).ok());
                let lines = line_mapping
                    .as_ref()
                    .and_then(|m| Some((line(m.startline)?, line(m.endline)?)));
                let original_start = line_mapping
                    .as_ref()
                    .and_then(|m| line(m.original_startline));
                let moved = original_start.is_some_and(|o| Some(o) != lines.map(|l| l.0));
                if original != obfuscated || original_class.is_some() || moved {
                    r.methods
                        .entry((c.clone(), obfuscated.into()))
                        .or_default()
                        .push(MethodRename {
                            original: original.into(),
                            original_class: original_class.map(Into::into),
                            lines,
                            original_start,
                        });
                }
            }
            Ok(_) => {}
            Err(e) => {
                let shown: String = String::from_utf8_lossy(line).chars().take(80).collect();
                return Err((
                    at,
                    format!(
                        "not a line of a ProGuard/R8 mapping ({:?}): {shown:?}",
                        e.kind()
                    ),
                ));
            }
        }
    }
    Ok(r)
}

/// Where the collector finds a build's mapping: `DIR/mappings/APP_VERSION/mapping.txt`, put there
/// by the build (or its release job) under the app version the agent reports
/// (`runningInfo.appVersion`).
pub const MAPPINGS_DIR: &str = "mappings";

/// Parsed mappings kept in memory, the newest used first (a large app's is tens of MB).
const MAX_CACHED: usize = 4;

/// What the collector has for one app version.
#[derive(Clone, Debug)]
pub enum Lookup {
    /// The report names no app version.
    NoVersion,
    /// No mapping file for this version (the relative path it would be at, or why none can be).
    Missing(String),
    /// The file is there but unreadable or not a mapping: which file, which byte, what.
    Bad(String),
    /// The renames, and the file's relative path.
    Found(Arc<Renames>, String),
}

/// The mappings under a collector's directory, parsed on first use and again when the file
/// changes (its length or modification time).
#[derive(Debug)]
pub struct Mappings {
    dir: PathBuf,
    cache: Mutex<Vec<Cached>>,
}

#[derive(Debug)]
struct Cached {
    version: String,
    stamp: (u64, Option<SystemTime>),
    parsed: Result<Arc<Renames>, String>,
}

impl Mappings {
    /// The mappings of the collector whose directory is `dir`.
    pub fn new(dir: &Path) -> Mappings {
        Mappings {
            dir: dir.to_path_buf(),
            cache: Mutex::new(Vec::new()),
        }
    }

    /// The mapping of app version `version`.
    pub fn get(&self, version: Option<&str>) -> Lookup {
        let Some(v) = version.filter(|v| !v.is_empty()) else {
            return Lookup::NoVersion;
        };
        if !crate::safe_name(v) {
            return Lookup::Missing(format!(
                "app version {v:?} cannot name a directory under {MAPPINGS_DIR}/ (letters, digits, '.', '-', '_')"
            ));
        }
        let rel = format!("{MAPPINGS_DIR}/{v}/mapping.txt");
        let path = self.dir.join(&rel);
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Missing(rel),
            Err(e) => return Lookup::Bad(format!("{rel}: {e}")),
        };
        let stamp = (meta.len(), meta.modified().ok());
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let parsed = match cache
            .iter()
            .position(|c| c.version == v && c.stamp == stamp)
        {
            Some(i) => cache.remove(i).parsed,
            None => read(&path, &rel),
        };
        cache.insert(
            0,
            Cached {
                version: v.to_string(),
                stamp,
                parsed: parsed.clone(),
            },
        );
        cache.truncate(MAX_CACHED);
        match parsed {
            Ok(r) => Lookup::Found(r, rel),
            Err(e) => Lookup::Bad(e),
        }
    }
}

/// Read and parse the mapping at `path` (`rel` in messages).
fn read(path: &Path, rel: &str) -> Result<Arc<Renames>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{rel}: {e}"))?;
    let mut b = Vec::new();
    f.take(MAX_MAPPING_BYTES + 1)
        .read_to_end(&mut b)
        .map_err(|e| format!("{rel}: {e}"))?;
    parse(&b).map(Arc::new).map_err(|(at, what)| {
        let line = b[..(at as usize).min(b.len())]
            .iter()
            .filter(|&&c| c == b'\n')
            .count()
            + 1;
        format!("{rel}: line {line} (byte {at}): {what}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPPING: &str = concat!(
        "# compiler: R8\n",
        "# {\"id\":\"com.android.tools.r8.mapping\",\"version\":\"2.0\"}\n",
        "com.app.Session -> a.a:\n",
        "    java.util.List history -> a\n",
        "    int count -> b\n",
        "    1:1:void record(java.lang.Object):42:42 -> a\n",
        "com.app.Kept -> com.app.Kept:\n",
        "    java.lang.Object kept -> kept\n",
        "\n",
        "com.app.CheckoutActivity -> a.b:\r\n",
        "    byte[] cache -> c\r\n",
    );

    #[test]
    fn frames_are_turned_back_by_method_and_line() {
        let text = concat!(
            "com.app.Session -> a.a:\n",
            "    1:3:void record(java.lang.Object):42:44 -> a\n",
            "    4:4:void clear():50:50 -> a\n",
            "    5:5:void inner():60:60 -> b\n",
            "    5:5:void outer():70:70 -> b\n",
            "    void run() -> run\n",
            "    void lonely() -> c\n",
        );
        let r = parse(text.as_bytes()).unwrap();
        let f = |t: &str| r.frame(t);
        assert_eq!(
            f("a.a.a(Session.java:2)").unwrap(),
            "com.app.Session.record(Session.java:43)"
        );
        assert_eq!(
            f("a.a.a(Session.java:4)").unwrap(),
            "com.app.Session.clear(Session.java:50)"
        );
        // Two methods named `a` and no line: the method name stays, the class is turned back.
        assert_eq!(
            f("a.a.a(Unknown Source)").unwrap(),
            "com.app.Session.a(Unknown Source)"
        );
        // Inlined: the innermost method (the mapping's first line for that range).
        assert_eq!(
            f("a.a.b(Session.java:5)").unwrap(),
            "com.app.Session.inner(Session.java:60)"
        );
        // A name kept is not listed; its line (no range) stays.
        assert_eq!(
            f("a.a.run(Session.java:9)").unwrap(),
            "com.app.Session.run(Session.java:9)"
        );
        assert_eq!(
            f("a.a.c(Session.java:9)").unwrap(),
            "com.app.Session.lonely(Session.java:9)"
        );
        assert_eq!(f("x.y.z(Native Method)"), None);
    }

    #[test]
    fn classes_and_fields_are_read() {
        let r = parse(MAPPING.as_bytes()).unwrap();
        assert_eq!(r.class("a.a").as_deref(), Some("com.app.Session"));
        assert_eq!(
            r.class("a.b[]").as_deref(),
            Some("com.app.CheckoutActivity[]")
        );
        assert_eq!(r.field("a.a", "a"), Some("history"));
        assert_eq!(r.field("a.a", "b"), Some("count"));
        assert_eq!(r.field("a.b", "c"), Some("cache"));
        // Names kept as they were are not listed.
        assert_eq!(r.classes.len(), 2);
        assert_eq!(r.fields.len(), 3);
    }

    #[test]
    fn a_bad_line_is_named_by_its_byte_offset() {
        let bad =
            "com.app.Session -> a.a:\n    java.util.List history -> a\nthis is not a mapping\n";
        let (at, what) = parse(bad.as_bytes()).unwrap_err();
        assert_eq!(at, bad.find("this").unwrap() as u64);
        assert!(what.contains("this is not a mapping"), "{what}");
        let early = "    int count -> b\n";
        assert_eq!(parse(early.as_bytes()).unwrap_err().0, 0);
    }
}
