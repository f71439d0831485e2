//! The index of received incidents: their [`Summary`]s in memory (the newest
//! `index_incidents`), the HTML pages rendered from them, and the one line `--print` writes.
//!
//! Invariants:
//! - Rendering reads no file: a page is made of summaries, at most `index_page` incidents.
//! - At start the summaries of the newest `index_incidents` incidents are read back (each file
//!   a few KB at most); an incident filed by an older collector gets one made from its files.
//! - Nothing a client sent reaches the terminal with a control character, nor the HTML
//!   unescaped.
#![forbid(unsafe_code)]

use super::safe_name;
use super::summary::{Summary, SUMMARY_FORMAT};
use crate::html::esc;
use crate::mapping::{Lookup, Mappings};
use crate::summary::Leak;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use sys::fs::{self as sfs, RealFs};

/// The summary file of an incident, in its directory (a dot name: never listed nor served).
pub const SUMMARY_FILE: &str = ".summary.json";

/// The received incidents the index shows.
pub(super) struct Index {
    dir: PathBuf,
    /// The newest incidents' summaries, by id.
    kept: BTreeMap<String, Summary>,
    /// Incidents in the directory, kept or not.
    total: usize,
    cap: usize,
    /// The builds' mappings (shared with the pages): an incident's leaks are listed with their
    /// version's original names.
    mappings: Arc<Mappings>,
}

impl Index {
    /// Read back the summaries of the newest `cap` incidents under `dir/incidents`.
    pub fn open(dir: &Path, cap: usize) -> Index {
        let root = dir.join("incidents");
        let mut ids: Vec<String> = std::fs::read_dir(&root)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| safe_name(n))
                    .collect()
            })
            .unwrap_or_default();
        let total = ids.len();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        ids.truncate(cap);
        let mut kept = BTreeMap::new();
        for id in ids {
            let d = root.join(&id);
            let s = saved(&d, &id).unwrap_or_else(|received| rebuild(&d, &id, received));
            kept.insert(id, s);
        }
        Index {
            dir: dir.to_path_buf(),
            kept,
            total,
            cap,
            mappings: Arc::new(Mappings::new(dir)),
        }
    }

    /// Take in file `name`, just filed at `path` under incident `id`; returns its summary.
    pub fn filed(&mut self, id: &str, name: &str, path: &Path) -> Summary {
        let d = self.dir.join("incidents").join(id);
        let known = match self.kept.remove(id) {
            Some(s) => Ok(s),
            None => saved(&d, id),
        };
        let s = match known {
            Ok(mut s) => {
                s.add_file(name, path);
                save(&d, &s);
                s
            }
            // A new incident, or one whose summary is missing or of an older collector: made
            // from its files, this one among them.
            Err(received) => {
                let s = rebuild(&d, id, received);
                if s.files.len() <= 1 {
                    self.total += 1;
                }
                s
            }
        };
        self.kept.insert(id.to_string(), s.clone());
        while self.kept.len() > self.cap {
            self.kept.pop_first();
        }
        s
    }

    /// The builds' mappings of this directory.
    pub fn mappings(&self) -> Arc<Mappings> {
        self.mappings.clone()
    }

    /// The summaries kept, oldest first.
    pub fn summaries(&self) -> impl Iterator<Item = &Summary> {
        self.kept.values()
    }

    /// Page `page` (0: the newest) of `per_page` incidents.
    pub fn render(&self, page: usize, per_page: usize) -> String {
        let per_page = per_page.max(1);
        let mut h = String::from(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>oomguard reports</title>\n\
             <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:.5em 0 1.5em}\
             td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left}th{background:#eee}\
             .num{text-align:right}small{color:#777}</style></head><body>\n<h1>oomguard: received reports</h1>\n\
             <p><a href=\"leaks\">leaks grouped across incidents</a> (pages served by the collector)</p>\n",
        );
        let first = page.saturating_mul(per_page);
        let shown: Vec<&Summary> = self
            .kept
            .values()
            .rev()
            .skip(first)
            .take(per_page)
            .collect();
        let _ = write!(h, "<p>{} incident(s)", self.total);
        if !shown.is_empty() {
            let _ = write!(
                h,
                "; newest first, {} to {}",
                first + 1,
                first + shown.len()
            );
        }
        if self.total > self.kept.len() {
            let _ = write!(
                h,
                "; the oldest {} are not listed (see --index-incidents)",
                self.total - self.kept.len()
            );
        }
        h.push_str("</p>\n");
        let nav = nav(page, first + shown.len() < self.kept.len());
        h.push_str(&nav);
        for s in shown {
            incident(&mut h, s, &self.mappings);
        }
        h.push_str(&nav);
        h.push_str("</body></html>\n");
        h
    }

    /// Write page 0 to `dir/index.html`.
    pub fn write(&self, per_page: usize) -> std::io::Result<PathBuf> {
        let p = self.dir.join("index.html");
        sfs::write_atomic(&RealFs, &p, self.render(0, per_page).as_bytes())?;
        Ok(p)
    }
}

/// The summary saved for incident `id` in `d` if it is of this format; if not, when it was
/// received as far as a summary of an older collector says (`None`: no summary of this id).
fn saved(d: &Path, id: &str) -> Result<Summary, Option<u64>> {
    match Summary::load(&d.join(SUMMARY_FILE)) {
        Some(s) if s.id == id && s.format == SUMMARY_FORMAT => Ok(s),
        Some(old) if old.id == id => Err(Some(old.received_ms)),
        _ => Err(None),
    }
}

/// A summary made from the files of an incident (filed before summaries were kept, or whose
/// summary an older collector made), received at `received_ms` when that is known, else at
/// the directory's modification time.
fn rebuild(d: &Path, id: &str, received_ms: Option<u64>) -> Summary {
    let received = received_ms.unwrap_or_else(|| {
        std::fs::metadata(d)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |t| t.as_millis() as u64)
    });
    let mut s = Summary::new(id, received);
    let mut names: Vec<String> = std::fs::read_dir(d)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| safe_name(n))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    for n in names {
        s.add_file(&n, &d.join(&n));
    }
    save(d, &s);
    s
}

fn save(d: &Path, s: &Summary) {
    let p = d.join(SUMMARY_FILE);
    let b = serde_json::to_vec(s).unwrap_or_default();
    if let Err(e) = sfs::write_atomic(&RealFs, &p, &b) {
        tracing::warn!(
            "collector: {}: {e}; the index keeps this incident's summary in memory only",
            p.display()
        );
    }
}

fn nav(page: usize, older: bool) -> String {
    let mut n = String::from("<p>");
    if page > 0 {
        let _ = write!(n, "<a href=\"/?page={}\">newer</a> ", page - 1);
    }
    if older {
        let _ = write!(n, "<a href=\"/?page={}\">older</a>", page + 1);
    }
    n.push_str("</p>\n");
    n
}

fn incident(h: &mut String, s: &Summary, mappings: &Mappings) {
    let id = esc(&s.id);
    let _ = write!(
        h,
        "<h2 id=\"{id}\"><a href=\"incidents/{id}/\">{id}</a></h2>\n<p>reason: <b>{}</b>",
        esc(s.reason.as_deref().unwrap_or("?"))
    );
    for (what, v) in [
        ("app version", &s.app_version),
        ("device", &s.device),
        ("device id", &s.device_id),
    ] {
        if let Some(v) = v {
            let _ = write!(h, "; {what} {}", esc(v));
        }
    }
    if s.evictions > 0 {
        let _ = write!(h, "; {} incident(s) evicted before this one", s.evictions);
    }
    if s.losses > 0 {
        let _ = write!(h, "; {} loss(es) on the device", s.losses);
    }
    h.push_str("</p>\n<p>files:");
    for f in &s.files {
        let _ = write!(h, " <a href=\"incidents/{id}/{0}\">{0}</a>", esc(f));
    }
    h.push_str("</p>\n");
    if let Some(e) = &s.meta_error {
        let _ = writeln!(h, "<p>{}</p>", esc(e));
    }
    let Some(r) = &s.report else {
        h.push_str("<p>no report received (yet)</p>\n");
        return;
    };
    if let Some(e) = &r.error {
        let _ = writeln!(h, "<p>{}</p>", esc(e));
    }
    if let Some(why) = &r.partial {
        let _ = writeln!(
            h,
            "<p class=\"error partial\">Only part of the analysis (its leaks by the one path found for each class, without retained sizes): {}</p>",
            esc(why)
        );
    }
    // An obfuscated build's names turned back, when its version has a mapping.
    let renames = match mappings.get(s.app_version.as_deref()) {
        Lookup::Found(m, _) => Some(m),
        _ => None,
    };
    let leaks: Vec<Leak> = match &renames {
        Some(m) => r.leaks.iter().map(|l| l.renamed(m)).collect(),
        None => r.leaks.clone(),
    };
    let _ = write!(
        h,
        "<h3>top leaks ({} group(s))</h3>\n<table><tr><th>leak</th><th>reason</th><th>instances</th><th>retained</th></tr>\n",
        r.leak_groups
    );
    for l in &leaks {
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code><br>{}<br><small title=\"{}\">{}</small></td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&l.class_name),
            esc(&l.short_path),
            esc(&l.signature),
            esc(&l.signature.chars().take(12).collect::<String>()),
            match &l.library {
                Some(p) => format!("{} <small>(library leak: <code>{}</code>)</small>", esc(&l.reason), esc(p)),
                None => esc(&l.reason),
            },
            l.instances,
            crate::html::bytes(l.retained_size)
        );
    }
    h.push_str("</table>\n<h3>dominators</h3>\n<table><tr><th>class</th><th>retained</th></tr>\n");
    for d in &r.dominators {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"num\">{}</td></tr>",
            esc(&renames
                .as_ref()
                .and_then(|m| m.class(&d.class_name))
                .unwrap_or_else(|| d.class_name.clone())),
            crate::html::bytes(d.retained_size)
        );
    }
    h.push_str("</table>\n");
}

/// One line for a received report, for a terminal: no control characters.
pub fn report_line(dir: &Path, s: &Summary) -> String {
    let reason = s.reason.as_deref().unwrap_or("(reason not received yet)");
    let (n, top) = match &s.report {
        Some(r) => (
            r.leak_groups,
            r.leaks
                .first()
                .map(|l| {
                    format!(
                        "; top leak: {} x{} ({})",
                        l.signature, l.instances, l.reason
                    )
                })
                .unwrap_or_default(),
        ),
        None => (0, String::new()),
    };
    let top = match s.report.as_ref().and_then(|r| r.partial.as_deref()) {
        Some(why) => format!("{top}; only part of the analysis: {why}"),
        None => top,
    };
    // The collector's own analysis of a dump the device analysed only in part.
    let (what, file) = match s.report.as_ref().is_some_and(|r| r.completed) {
        true => ("analysed on the collector", crate::complete::SERVER_REPORT),
        false => ("received report", "report.json"),
    };
    printable(&format!(
        "{what} {}: {reason}; {n} leak(s){top}; {}",
        s.id,
        dir.join("incidents").join(&s.id).join(file).display()
    ))
}

/// `s` with every control character (C0, DEL, C1) and bidirectional override replaced by `?`.
pub fn printable(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') {
                '?'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_escapes_and_orders() {
        let d = tempfile::tempdir().unwrap();
        let inc = d.path().join("incidents/1-a");
        std::fs::create_dir_all(&inc).unwrap();
        std::fs::write(
            inc.join("meta.json"),
            r#"{"reason":"heap <three strikes>"}"#,
        )
        .unwrap();
        std::fs::write(
            inc.join("report.json"),
            r#"{"gcPaths":[{"signature":"a.B","leakReason":"destroyed Activity","instanceCount":2},
                           {"signature":"<script>","leakReason":"x","instanceCount":9}],
                "dominators":[{"className":"byte[]","retainedSize":10},{"className":"java.lang.Object[]","retainedSize":99}]}"#,
        )
        .unwrap();
        // Filed before summaries were kept: made from its files at start.
        let ix = Index::open(d.path(), 10);
        let h = ix.render(0, 10);
        assert!(h.contains("heap &lt;three strikes&gt;"));
        assert!(h.contains("&lt;script&gt;"));
        assert!(!h.contains("<script>"));
        assert!(h.find("&lt;script&gt;").unwrap() < h.find("a.B").unwrap());
        assert!(h.find("java.lang.Object[]").unwrap() < h.find("byte[]").unwrap());
        assert!(inc.join(SUMMARY_FILE).exists());
        let line = report_line(d.path(), &ix.kept["1-a"]);
        assert!(line.contains("2 leak(s); top leak: <script> x9"), "{line}");
    }

    /// A summary an older collector made (another format) is made again from the incident's
    /// files when the index opens, keeping when it was received; one of this format is used.
    #[test]
    fn a_summary_of_an_older_format_is_made_again() {
        let d = tempfile::tempdir().unwrap();
        let inc = d.path().join("incidents/1-a");
        std::fs::create_dir_all(&inc).unwrap();
        std::fs::write(
            inc.join("meta.json"),
            r#"{"reason":"r","runningInfo":{"manufacturer":"","apiLevel":0}}"#,
        )
        .unwrap();
        // What the collector before format 2 kept: no format, the device as it was written.
        std::fs::write(
            inc.join(SUMMARY_FILE),
            r#"{"id":"1-a","receivedMs":1234,"files":["meta.json"],"reason":"r","device":", API 0"}"#,
        )
        .unwrap();
        let ix = Index::open(d.path(), 10);
        let s = &ix.kept["1-a"];
        assert_eq!((s.format, s.received_ms), (SUMMARY_FORMAT, 1234));
        assert_eq!(s.device, None, "{s:?}");
        // Saved in this format: used as it is at the next start.
        let again = Summary::load(&inc.join(SUMMARY_FILE)).unwrap();
        assert_eq!(again.format, SUMMARY_FORMAT);
        std::fs::write(
            inc.join(SUMMARY_FILE),
            serde_json::to_vec(&Summary {
                device: Some("kept".into()),
                ..again
            })
            .unwrap(),
        )
        .unwrap();
        let ix = Index::open(d.path(), 10);
        assert_eq!(ix.kept["1-a"].device.as_deref(), Some("kept"));
        // An incident past the ones kept in memory, whose summary is of an older format, gets a
        // file: made again, still received when the old summary said.
        std::fs::write(
            inc.join(SUMMARY_FILE),
            r#"{"id":"1-a","receivedMs":1234,"files":["meta.json"],"reason":"r"}"#,
        )
        .unwrap();
        let mut ix = Index::open(d.path(), 0);
        std::fs::write(inc.join("fds.txt"), "fd 3").unwrap();
        let s = ix.filed("1-a", "fds.txt", &inc.join("fds.txt"));
        assert_eq!((s.format, s.received_ms), (SUMMARY_FORMAT, 1234));
    }

    /// A page shows at most `per_page` incidents, newest first, with links to the others;
    /// only the newest `cap` are kept in memory, also when more are filed.
    #[test]
    fn pages_are_capped() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..30 {
            std::fs::create_dir_all(d.path().join(format!("incidents/{i:03}"))).unwrap();
        }
        let mut ix = Index::open(d.path(), 25);
        assert_eq!((ix.total, ix.kept.len()), (30, 25));
        let p0 = ix.render(0, 10);
        assert!(
            p0.contains("id=\"029\"") && p0.contains("id=\"020\"") && !p0.contains("id=\"019\"")
        );
        assert!(p0.contains("?page=1\">older") && !p0.contains("newer"));
        assert!(p0.contains("the oldest 5 are not listed"));
        let p2 = ix.render(2, 10);
        assert!(
            p2.contains("id=\"009\"") && p2.contains("id=\"005\"") && !p2.contains("id=\"004\"")
        );
        assert!(!p2.contains("older") && p2.contains("?page=1\">newer"));
        let f = d.path().join("incidents/100/meta.json");
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, r#"{"reason":"r"}"#).unwrap();
        ix.filed("100", "meta.json", &f);
        assert_eq!((ix.total, ix.kept.len()), (31, 25));
        assert!(ix.render(0, 10).contains("id=\"100\""));
        assert!(!ix.kept.contains_key("005"));
    }

    #[test]
    fn printable_strips_control_characters() {
        assert_eq!(
            printable("a\u{1b}[2Jb\r\n\u{9b}c\u{202e}d\té"),
            "a?[2Jb???c?d?é"
        );
    }
}
