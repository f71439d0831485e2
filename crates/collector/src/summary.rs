//! What the index shows of one incident, read once when its files are filed: a small summary
//! (`incidents/ID/.summary.json`), so that no page of the index, no `--print` line and no
//! start-up ever parses a report in full.
//!
//! Invariants:
//! - `meta.json` and `report.json` are read as a stream ([`Guarded`], a 64 KiB buffer): fields
//!   the summary does not keep are skipped without being stored; of the lists only the
//!   [`TOP`] largest entries are kept; every text is cut to [`MAX_TEXT`] characters; a JSON
//!   string longer than [`MAX_STRING`] bytes stops the read. So reading a file of any size
//!   takes a bounded amount of memory, and a summary file is small.
//! - A report's entries (`gcPaths[]`, `dominators[]`) are read through `analyze::report`'s
//!   types: each as a value within `ENTRY` (its path's first `MAX_STEPS` steps), then
//!   leniently ([`lenient`]: a field missing or of another type is its default, an entry that
//!   is not an object is read past). `meta.json` (the agent's, not a report) and `runningInfo`
//!   (free-form in the schema) are read field by field, leniently too.
//! - A file that cannot be read whole (not JSON, a wrong type, a string too long) leaves its
//!   part of the summary empty with the reason, naming the file and the byte offset.
//! - The summary carries what grouping incidents by leak signature needs: each leak's
//!   signature, class, reason, instances and retained size, the app version, the device, and
//!   when the collector received the incident.
#![forbid(unsafe_code)]

use crate::html::capped::{Limits, Within};
use crate::html::lenient::{self, Omitted};
use crate::html::trace::{short_path, steps, Left};
use analyze::renames::Renames;
use analyze::report::{DominatorGroup, GcPath};
use analyze::trace::Trace;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::fmt;
use std::io::{self, BufReader, Read};
use std::path::Path;

/// Entries kept of each list of a report (leaks, dominators).
pub const TOP: usize = 10;
/// Characters kept of any text.
pub const MAX_TEXT: usize = 300;
/// A JSON string longer than this (in bytes) stops the read of a file.
pub const MAX_STRING: u64 = 1 << 20;
/// The largest summary file read back.
const MAX_SUMMARY_FILE: u64 = 256 << 10;
/// File names kept per incident.
const MAX_FILES: usize = 32;

/// How summaries are made: raised when what a summary keeps, or how it is made from the
/// incident's files, changes (2: leaks in the report's order, with their root and path; the
/// device without unknown parts; 3: whether the analysis was only partial; 4: the collector's
/// own analysis of a partial one, `report.server.json`). Summaries of another format are made
/// again.
pub const SUMMARY_FORMAT: u32 = 4;

/// The summary of one received incident.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Summary {
    /// The way this summary was made ([`SUMMARY_FORMAT`]): one made by an older collector is
    /// made again from the incident's files when the index opens.
    pub format: u32,
    pub id: String,
    /// When the collector received this incident, ms since the epoch: the modification time of
    /// its directory when its summary was first made (as its first file was filed, or at the
    /// first start after an older collector filed it).
    pub received_ms: u64,
    /// The files filed, by name.
    pub files: Vec<String>,
    /// From `meta.json`.
    pub reason: Option<String>,
    pub evictions: u64,
    pub losses: u64,
    /// From `runningInfo` (of `meta.json`, else of `report.json`).
    pub app_version: Option<String>,
    /// `runningInfo.deviceId`, when the app sends one.
    pub device_id: Option<String>,
    /// `runningInfo.manufacturer`, `model` and `apiLevel`, as "maker model, API n".
    pub device: Option<String>,
    /// Why `meta.json` could not be read whole.
    pub meta_error: Option<String>,
    pub report: Option<ReportSummary>,
}

/// The part of a summary that comes from `report.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReportSummary {
    /// Entries of `gcPaths` (leak groups).
    pub leak_groups: u64,
    /// The first [`TOP`] groups in the report's order: the app's leaks, then the library
    /// leaks, each by retained size, then instances.
    pub leaks: Vec<Leak>,
    /// The [`TOP`] dominator groups retaining most, most first.
    pub dominators: Vec<Dominator>,
    /// Why `report.json` could not be read whole (the lists then hold what was read before).
    pub error: Option<String>,
    /// Why the report holds only part of an analysis (`analysis.budget.reason`: the device gave
    /// the analysis too little memory for the whole of it; its leaks are one path per class and
    /// reason, without retained sizes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
    /// Read from `report.server.json`: the device analysed only part of the dump, the collector
    /// the whole of its upload (`complete`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub completed: bool,
}

/// One leak group of a report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Leak {
    pub signature: String,
    pub class_name: String,
    /// The path's short form (`root › Owner.field › … › Leaking`,
    /// [`crate::html::trace::short_path`]), from `trace` when the report has it, else from KOOM's
    /// `gcRoot` and `path`.
    pub short_path: String,
    pub reason: String,
    pub instances: u64,
    pub retained_size: u64,
    /// The known library leak the path goes through (`gcPaths[].libraryLeak.pattern`), if any:
    /// such groups are shown apart from the app's own leaks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// KOOM's `gcRoot` and `path` (at most `MAX_STEPS` items), which the signature is hashed
    /// from: `/leaks` hashes it again when it turns an obfuscated build's names back.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub gc_root: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<analyze::report::PathItem>,
}

impl Leak {
    /// A leak of an obfuscated build with its names turned back: class, short path, and the
    /// signature hashed again from the renamed path (all kept as they were when the summary has no
    /// path).
    pub(crate) fn renamed(&self, m: &Renames) -> Leak {
        let l = self;
        let mut g = GcPath {
            class_name: l.class_name.clone(),
            gc_root: l.gc_root.clone(),
            path: l.path.clone(),
            ..GcPath::default()
        };
        m.gc_path(&mut g);
        // From the renamed path (the summary keeps no trace): KOOM's short form.
        let short_path = match l.path.is_empty() {
            true => l.short_path.clone(),
            false => koom_short_path(&g.gc_root, &g.path),
        };
        Leak {
            signature: match l.path.is_empty() {
                true => l.signature.clone(),
                false => g.signature,
            },
            class_name: g.class_name,
            short_path,
            path: g.path,
            ..l.clone()
        }
    }
}

/// One dominator group of a report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Dominator {
    pub class_name: String,
    pub retained_size: u64,
}

impl Summary {
    pub fn new(id: &str, received_ms: u64) -> Summary {
        Summary {
            format: SUMMARY_FORMAT,
            id: id.to_string(),
            received_ms,
            ..Summary::default()
        }
    }

    /// Take in `name`, just filed at `path`.
    pub fn add_file(&mut self, name: &str, path: &Path) {
        if !self.files.iter().any(|f| f == name) && self.files.len() < MAX_FILES {
            self.files.push(name.to_string());
            self.files.sort();
        }
        match name {
            "meta.json" => self.read_meta(path),
            "report.json" => self.read_report(path),
            crate::complete::SERVER_REPORT => {
                self.read_report(path);
                if let Some(r) = &mut self.report {
                    r.completed = true;
                }
            }
            _ => {}
        }
    }

    fn read_meta(&mut self, path: &Path) {
        let m: Result<MetaFields, String> = read_stream(path);
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                self.meta_error = Some(e);
                return;
            }
        };
        self.meta_error = None;
        self.reason = m.reason.0;
        self.evictions = m.evictions.0.unwrap_or(0);
        self.losses = m.losses.0.unwrap_or(0);
        self.running(m.running_info);
    }

    fn running(&mut self, r: Option<Running>) {
        let Some(r) = r else { return };
        self.app_version = r.app_version.0.or(self.app_version.take());
        self.device_id = r.device_id.0.or(self.device_id.take());
        // What is unknown is left out: an empty maker or model, an API level of 0.
        let known = |t: Option<String>| t.map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
        let maker = match (known(r.manufacturer.0), known(r.model.0)) {
            (Some(m), Some(d)) => Some(format!("{m} {d}")),
            (m, d) => m.or(d),
        };
        let api = r.api_level.0.filter(|&a| a > 0);
        let device = match (maker, api) {
            (Some(m), Some(a)) => Some(format!("{m}, API {a}")),
            (Some(m), None) => Some(m),
            (None, Some(a)) => Some(format!("API {a}")),
            (None, None) => None,
        };
        self.device = device.or(self.device.take());
    }

    fn read_report(&mut self, path: &Path) {
        let mut rep = ReportSummary::default();
        let mut running = None;
        let res = read_with(path, |de| {
            ReportSeed {
                rep: &mut rep,
                running: &mut running,
            }
            .deserialize(de)
        });
        rep.error = res.err();
        // The meta's running info, when it came first, wins.
        if self.app_version.is_none() && self.device_id.is_none() && self.device.is_none() {
            self.running(running);
        }
        self.report = Some(rep);
    }

    /// Read back a summary file; `None` if it is missing, too large or not one.
    pub fn load(path: &Path) -> Option<Summary> {
        let f = std::fs::File::open(path).ok()?;
        if f.metadata().ok()?.len() > MAX_SUMMARY_FILE {
            return None;
        }
        serde_json::from_reader(BufReader::new(f.take(MAX_SUMMARY_FILE))).ok()
    }
}

/// Read `path` as a stream through `f`; an error names the file and the byte offset.
fn read_with<T>(
    path: &Path,
    f: impl FnOnce(
        &mut serde_json::Deserializer<serde_json::de::IoRead<Guarded<BufReader<std::fs::File>>>>,
    ) -> serde_json::Result<T>,
) -> Result<T, String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let g = Guarded::new(BufReader::with_capacity(64 << 10, file));
    let offset = g.offset.clone();
    let mut de = serde_json::Deserializer::from_reader(g);
    let r = f(&mut de).and_then(|v| de.end().map(|()| v));
    r.map_err(|e| {
        let at = offset.get();
        // An error of the guard itself carries its own text (and offset).
        format!("{name}: byte {at}: {e}")
    })
}

fn read_stream<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, String> {
    read_with(path, |de| T::deserialize(de))
}

/// A reader that counts the bytes read (the offset errors name) and stops at a JSON string
/// longer than [`MAX_STRING`] bytes, so the parser never buffers one.
pub struct Guarded<R> {
    inner: R,
    offset: std::rc::Rc<std::cell::Cell<u64>>,
    in_string: bool,
    escaped: bool,
    string_len: u64,
}

impl<R> Guarded<R> {
    /// The bytes read so far, as they are read.
    pub fn offset(&self) -> std::rc::Rc<std::cell::Cell<u64>> {
        self.offset.clone()
    }

    pub fn new(inner: R) -> Guarded<R> {
        Guarded {
            inner,
            offset: Default::default(),
            in_string: false,
            escaped: false,
            string_len: 0,
        }
    }
}

impl<R: Read> Read for Guarded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let start = self.offset.get();
        for (i, &b) in buf[..n].iter().enumerate() {
            if !self.in_string {
                if b == b'"' {
                    self.in_string = true;
                    self.string_len = 0;
                }
                continue;
            }
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                continue;
            }
            self.string_len += 1;
            if self.string_len > MAX_STRING {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "a string longer than {MAX_STRING} bytes, at byte {}; not read further",
                        start + i as u64
                    ),
                ));
            }
        }
        self.offset.set(start + n as u64);
        Ok(n)
    }
}

/// Cut `s` to [`MAX_TEXT`] characters.
fn cut(s: &str) -> String {
    match s.char_indices().nth(MAX_TEXT) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A text field: a string (cut), anything else read past as absent.
#[derive(Default)]
struct Text(Option<String>);
/// A count field: an unsigned integer, anything else read past as absent.
#[derive(Default)]
struct Count(Option<u64>);

struct Lenient<T>(std::marker::PhantomData<T>);

/// A visitor's answers to a bool, a signed or float number and a null: read past, as absent.
macro_rules! skip_scalars {
    () => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
    };
}

/// [`skip_scalars`], and a list or an object read past too.
macro_rules! skip_other {
    () => {
        skip_scalars!();
        fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }
    };
}

impl<'de> Visitor<'de> for Lenient<Text> {
    type Value = Text;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Text, E> {
        Ok(Text(Some(cut(s))))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Text, E> {
        Ok(Text(None))
    }
    skip_other!();
}

impl<'de> Visitor<'de> for Lenient<Count> {
    type Value = Count;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a count")
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Count, E> {
        Ok(Count(Some(n)))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Count, E> {
        Ok(Count(None))
    }
    skip_other!();
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        d.deserialize_any(Lenient::<Text>(Default::default()))
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
        d.deserialize_any(Lenient::<Count>(Default::default()))
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Running {
    app_version: Text,
    device_id: Text,
    manufacturer: Text,
    model: Text,
    api_level: Count,
}

/// Of a report's `analysis`, only `budget`: present when the analysis did not fit its budget.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct AnalysisFields {
    budget: Option<BudgetFields>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct BudgetFields {
    reason: Text,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct MetaFields {
    reason: Text,
    evictions: Count,
    losses: Count,
    running_info: Option<Running>,
}

/// What one entry of a report's lists may hold when it is read: its path's first
/// [`MAX_STEPS`] steps (the rest counted), texts of [`MAX_TEXT`] characters.
const ENTRY: Limits = Limits {
    max_items: MAX_STEPS,
    max_values: 4096,
    max_depth: 8,
    max_text: MAX_TEXT,
};

/// Steps kept of a path: the first [`MAX_STEPS`]; the others counted.
const MAX_STEPS: usize = 64;

/// A leak group (an entry of `gcPaths`, read within [`ENTRY`]) as the summary keeps it.
fn leak(v: &Value) -> Leak {
    let g: GcPath = lenient::read(v);
    let left = Left::at(&Omitted::of(v), "");
    // The trace's path if it has one, else KOOM's.
    let none = Trace::default();
    let trace = if g.trace.nodes.is_empty() {
        &none
    } else {
        &g.trace
    };
    let (root, steps, more) = steps(&g.gc_root, &g.path, trace, left);
    Leak {
        short_path: cut(&short_path(&root, &steps, more)),
        signature: g.signature,
        class_name: g.class_name,
        reason: g.leak_reason,
        instances: g.instance_count,
        retained_size: g.retained_size,
        library: g.library_leak.map(|l| l.pattern),
        // A path cut short could not be hashed again: then none is kept.
        path: match g.path.len() <= MAX_STEPS {
            true => g.path,
            false => Vec::new(),
        },
        gc_root: g.gc_root,
    }
}

/// The short form of KOOM's path (`gcRoot` and `path`), as a summary keeps it.
pub(crate) fn koom_short_path(gc_root: &str, path: &[analyze::report::PathItem]) -> String {
    let (root, steps, more) = steps(gc_root, path, &Trace::default(), Left::default());
    cut(&short_path(&root, &steps, more))
}

/// Keep `e` among the [`TOP`] largest of `v` by `key`, largest first.
fn keep_top<T, K: Ord>(v: &mut Vec<T>, e: T, key: impl Fn(&T) -> K) {
    let k = key(&e);
    if v.len() == TOP && v.last().is_some_and(|l| key(l) >= k) {
        return;
    }
    let at = v.partition_point(|x| key(x) >= k);
    v.insert(at, e);
    v.truncate(TOP);
}

/// Reads a report's top level: `gcPaths` and `dominators` element by element, `runningInfo`.
struct ReportSeed<'a> {
    rep: &'a mut ReportSummary,
    running: &'a mut Option<Running>,
}

impl<'de> DeserializeSeed<'de> for ReportSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ReportSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a report object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        while let Some(k) = a.next_key::<Text>()? {
            match k.0.as_deref() {
                Some("gcPaths") => a.next_value_seed(ListSeed {
                    each: |v: Value, rep: &mut ReportSummary| {
                        rep.leak_groups += 1;
                        // The report's own order (`analyze::report`): the app's leaks, then
                        // the library leaks, each by retained size, then instances.
                        keep_top(&mut rep.leaks, leak(&v), |l| {
                            (l.library.is_none(), l.retained_size, l.instances)
                        });
                    },
                    rep: &mut *self.rep,
                })?,
                Some("dominators") => a.next_value_seed(ListSeed {
                    each: |v: Value, rep: &mut ReportSummary| {
                        let d: DominatorGroup = lenient::read(&v);
                        let dom = Dominator {
                            class_name: d.class_name,
                            retained_size: d.retained_size,
                        };
                        keep_top(&mut rep.dominators, dom, |d| d.retained_size);
                    },
                    rep: &mut *self.rep,
                })?,
                Some("runningInfo") => *self.running = a.next_value::<Option<Running>>()?,
                Some("analysis") => {
                    let an = a.next_value::<Option<AnalysisFields>>()?;
                    self.rep.partial = an.and_then(|an| an.budget).map(|b| {
                        let reason = b.reason.0.unwrap_or_default();
                        reason.chars().take(MAX_TEXT).collect()
                    });
                }
                _ => {
                    a.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A list read element by element, each within [`ENTRY`] and, if it is an object (a list of
/// entries reads past what is not one, as [`lenient`] does), handed to `each` and dropped.
struct ListSeed<'a, F> {
    each: F,
    rep: &'a mut ReportSummary,
}

impl<'de, F: FnMut(Value, &mut ReportSummary)> DeserializeSeed<'de> for ListSeed<'_, F> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, F: FnMut(Value, &mut ReportSummary)> Visitor<'de> for ListSeed<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut a: A) -> Result<(), A::Error> {
        while let Some(e) = a.next_element_seed(Within(ENTRY))? {
            if e.is_object() {
                (self.each)(e, self.rep);
            }
        }
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary of incident "i" whose only file is a `report.json` of `body`, written at `p`.
    fn with_report(p: &Path, body: impl AsRef<[u8]>) -> Summary {
        std::fs::write(p, body).unwrap();
        let mut sum = Summary::new("i", 1);
        sum.add_file("report.json", p);
        sum
    }

    #[test]
    fn keeps_the_largest_and_cuts_text() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("report.json");
        let mut s = String::from(r#"{"analysis":{"x":[1,2,{"y":"z"}]},"gcPaths":["#);
        for i in 0..100 {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&format!(
                r#"{{"signature":"s{i}","leakReason":"r","instanceCount":{},"className":"{}","path":[{{"a":1}}]}}"#,
                (i * 37) % 100,
                "C".repeat(if i == 99 { 5000 } else { 3 })
            ));
        }
        s.push_str(r#"],"dominators":[{"className":"a","retainedSize":5},{"className":"b","retainedSize":"x"}],"runningInfo":{"appVersion":"1.0","apiLevel":30,"manufacturer":7}}"#);
        let sum = with_report(&p, s);
        let r = sum.report.as_ref().unwrap();
        assert_eq!(r.error, None);
        assert_eq!(r.leak_groups, 100);
        assert_eq!(r.leaks.len(), TOP);
        let counts: Vec<u64> = r.leaks.iter().map(|l| l.instances).collect();
        assert_eq!(counts, (90..100).rev().collect::<Vec<u64>>());
        // i = 99 has 99 * 37 % 100 = 63 instances: not kept; every class name kept is short.
        assert!(r.leaks.iter().all(|l| l.class_name == "CCC"));
        assert_eq!(r.dominators[0].class_name, "a");
        assert_eq!(r.dominators[1].retained_size, 0);
        assert_eq!(sum.app_version.as_deref(), Some("1.0"));
        assert_eq!(sum.device.as_deref(), Some("API 30"));
        assert_eq!(cut(&"é".repeat(400)).chars().count(), MAX_TEXT + 1);
    }

    /// The top leaks follow the report's order: the app's own, then the library leaks, each by
    /// retained size, then instances (not by instances alone).
    #[test]
    fn top_leaks_are_the_apps_first_then_library_leaks_each_by_retained_size() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("report.json");
        let lib = r#""libraryLeak":{"pattern":"android.view.inputmethod.InputMethodManager.mNextServedView"}"#;
        let sum = with_report(
            &p,
            format!(
                r#"{{"gcPaths":[
                  {{"signature":"many","instanceCount":90,"retainedSize":1000}},
                  {{"signature":"lib","instanceCount":1,"retainedSize":900000000,{lib}}},
                  {{"signature":"big","instanceCount":2,"retainedSize":5000000}},
                  {{"signature":"tie","instanceCount":3,"retainedSize":1000}}]}}"#
            ),
        );
        let r = sum.report.unwrap();
        let order: Vec<&str> = r.leaks.iter().map(|l| l.signature.as_str()).collect();
        assert_eq!(order, ["big", "many", "tie", "lib"]);
    }

    /// The device is what is known of it: an empty maker and an API level of 0 are left out,
    /// and nothing known is no device at all (the demo's index said "device , API 0").
    #[test]
    fn the_device_leaves_out_what_is_unknown() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("report.json");
        let device =
            |ri: &str| with_report(&p, format!(r#"{{"gcPaths":[],"runningInfo":{ri}}}"#)).device;
        assert_eq!(device(r#"{"manufacturer":"","apiLevel":0}"#), None);
        assert_eq!(
            device(r#"{"manufacturer":" ","apiLevel":30}"#).as_deref(),
            Some("API 30")
        );
        assert_eq!(
            device(r#"{"manufacturer":"HUAWEI","apiLevel":0}"#).as_deref(),
            Some("HUAWEI")
        );
        assert_eq!(
            device(r#"{"manufacturer":"HUAWEI","model":"P30","apiLevel":29}"#).as_deref(),
            Some("HUAWEI P30, API 29")
        );
    }

    /// Each leak's short path comes from its `trace` when it has one, else from KOOM's
    /// `gcRoot` and `path`; a `trace` or a step of another shape is read past, not an error.
    #[test]
    fn short_paths_from_either_shape() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("report.json");
        let path = r#"[{"reference":"a.App.sList","referenceType":"STATIC_FIELD","declaredClass":"a.App"},
                       "odd", {"reference":"a.Main","referenceType":"LEAKING_INSTANCE","declaredClass":"a.Main"}]"#;
        let nodes = r#"[{"className":"a.App","kind":"class","reference":"sList","referenceType":"static field"},
                        {"className":"a.Main","kind":"instance","reference":null}]"#;
        let sum = with_report(
            &p,
            format!(
                r#"{{"gcPaths":[{{"signature":"t","instanceCount":3,"gcRoot":"System Class","path":{path},"trace":{{"rootKind":"static field","nodes":{nodes}}}}},
                               {{"signature":"k","instanceCount":2,"gcRoot":"System Class","path":{path},"trace":"not one"}},
                               {{"signature":"n","instanceCount":1}}]}}"#
            ),
        );
        let r = sum.report.unwrap();
        assert_eq!(r.error, None);
        let paths: Vec<&str> = r.leaks.iter().map(|l| l.short_path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "static field › App.sList › Main",
                "System Class › App.sList › Main",
                ""
            ]
        );
    }

    /// A file is listed once however often it is filed, and at most MAX_FILES are listed.
    #[test]
    fn files_are_listed_once_and_at_most_max_files() {
        let mut sum = Summary::new("i", 1);
        let nowhere = Path::new("/nonexistent");
        sum.add_file("a.bin", nowhere);
        sum.add_file("a.bin", nowhere);
        assert_eq!(sum.files, ["a.bin"]);
        for i in 0..MAX_FILES + 5 {
            sum.add_file(&format!("f{i:02}.bin"), nowhere);
        }
        assert_eq!(sum.files.len(), MAX_FILES);
        assert_eq!(sum.files[0], "a.bin");
        assert_eq!(
            sum.files[MAX_FILES - 1],
            format!("f{:02}.bin", MAX_FILES - 2)
        );
    }

    /// The collector's own report is read as the report, marked as the whole analysis; the
    /// device's is not marked.
    #[test]
    fn the_collector_s_report_is_read_and_marked_whole() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(crate::complete::SERVER_REPORT);
        std::fs::write(&p, r#"{"gcPaths":[{"signature":"s","instanceCount":4}]}"#).unwrap();
        let mut sum = Summary::new("i", 1);
        sum.add_file(crate::complete::SERVER_REPORT, &p);
        let r = sum.report.as_ref().unwrap();
        assert!(r.completed);
        assert_eq!(r.leaks[0].instances, 4);
        sum.add_file("report.json", &p);
        assert!(!sum.report.unwrap().completed);
    }

    /// When the meta came first with any of the running info (the app version, the device id or
    /// the device), the report's running info is not read over it.
    #[test]
    fn the_meta_s_running_info_wins_over_the_report_s() {
        let d = tempfile::tempdir().unwrap();
        let (meta, report) = (d.path().join("meta.json"), d.path().join("report.json"));
        let theirs = r#"{"appVersion":"2.0","deviceId":"d2","manufacturer":"X","apiLevel":30}"#;
        std::fs::write(&report, format!(r#"{{"runningInfo":{theirs}}}"#)).unwrap();
        let after_meta = |ri: &str| {
            std::fs::write(&meta, format!(r#"{{"runningInfo":{ri}}}"#)).unwrap();
            let mut sum = Summary::new("i", 1);
            sum.add_file("meta.json", &meta);
            sum.add_file("report.json", &report);
            (sum.app_version, sum.device_id, sum.device)
        };
        let s = |t: &str| Some(t.to_string());
        assert_eq!(
            after_meta(r#"{"appVersion":"1.0"}"#),
            (s("1.0"), None, None)
        );
        assert_eq!(after_meta(r#"{"deviceId":"d1"}"#), (None, s("d1"), None));
        assert_eq!(after_meta(r#"{"manufacturer":"M"}"#), (None, None, s("M")));
        assert_eq!(after_meta("{}"), (s("2.0"), s("d2"), s("X, API 30")));
    }

    /// A summary file of exactly MAX_SUMMARY_FILE bytes is read back; one byte more is not.
    #[test]
    fn a_summary_file_is_read_back_up_to_its_bound() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("summary.json");
        let mut b = serde_json::to_vec(&Summary::new("i", 7)).unwrap();
        b.resize(MAX_SUMMARY_FILE as usize, b' ');
        std::fs::write(&p, &b).unwrap();
        assert_eq!(Summary::load(&p).map(|s| s.received_ms), Some(7));
        b.push(b' ');
        std::fs::write(&p, &b).unwrap();
        assert!(Summary::load(&p).is_none());
    }

    /// The guard counts the bytes of strings alone (a megabyte of numbers is read), lets a
    /// string of exactly MAX_STRING bytes through and stops at the byte past it; an error far
    /// into the file names its byte.
    #[test]
    fn the_guard_bounds_strings_alone_and_names_the_byte() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("report.json");
        let error = |body: &str| with_report(&p, body).report.unwrap().error;
        let nums = vec!["7"; 600_000].join(",");
        assert_eq!(error(&format!(r#"{{"analysis":{{"x":[{nums}]}}}}"#)), None);
        let text = "x".repeat(MAX_STRING as usize);
        let head = r#"{"analysis":{"note":""#;
        assert_eq!(error(&format!(r#"{head}{text}"}}}}"#)), None);
        let e = error(&format!(r#"{head}{text}x"}}}}"#)).unwrap();
        let past = head.len() as u64 + MAX_STRING;
        assert!(
            e.contains(&format!("longer than {MAX_STRING} bytes, at byte {past};")),
            "{e}"
        );
        let body = format!(r#"{{"analysis":{{"x":[{nums}]}},oops"#);
        let e = error(&body).unwrap();
        assert!(
            e.starts_with(&format!("report.json: byte {}: ", body.len() - 3)),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_file_and_offset() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("report.json");
        let sum = with_report(
            &p,
            r#"{"gcPaths":[{"signature":"a","instanceCount":1}], oops"#,
        );
        let r = sum.report.unwrap();
        assert_eq!(r.leaks.len(), 1);
        let e = r.error.unwrap();
        assert!(e.starts_with("report.json: byte "), "{e}");
        // A string longer than MAX_STRING stops the read, whatever field it is in.
        let mut big = br#"{"analysis":{"note":""#.to_vec();
        big.extend(vec![b'x'; MAX_STRING as usize + 10]);
        big.extend_from_slice(br#""}}"#);
        let mut sum = with_report(&p, big);
        let e = sum.report.take().unwrap().error.unwrap();
        assert!(e.contains("a string longer than"), "{e}");
        // A report of the wrong shape, or with a list of the wrong shape, says what was wanted.
        for (body, want) in [
            (
                "[1]",
                "report.json: byte 1: invalid type: sequence, expected a report object",
            ),
            (
                r#"{"gcPaths":5}"#,
                "report.json: byte 13: invalid type: integer `5`, expected a list",
            ),
        ] {
            let e = with_report(&p, body).report.unwrap().error.unwrap();
            assert!(e.starts_with(want), "{e}");
        }
        std::fs::write(d.path().join("meta.json"), "\"text\"").unwrap();
        sum.add_file("meta.json", &d.path().join("meta.json"));
        assert!(sum.meta_error.unwrap().starts_with("meta.json: byte "));
        assert_eq!(sum.files, ["meta.json", "report.json"]);
    }
}
