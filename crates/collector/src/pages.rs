//! The collector's pages beyond the index: one per incident (`/incidents/ID/`, rendered by
//! [`crate::html`] from the incident's files), and the leaks of every listed incident grouped
//! by signature (`/leaks`, made of the summaries alone).
//!
//! Invariants:
//! - An incident page reads its files as bounded streams (`html::capped`, and strings bounded
//!   by [`Guarded`]); one page is rendered at a time (the caller holds `Shared::pages`), so the
//!   memory pages take does not grow with the number of connections.
//! - `/leaks` reads no file: it groups the summaries the index keeps in memory (at most
//!   `index_incidents` incidents of [`TOP`](super::summary::TOP) leaks each), and shows at
//!   most [`MAX_GROUPS`] groups of [`MAX_LINKS`] incident links each.
#![forbid(unsafe_code)]

use super::complete::{SERVER_ERROR, SERVER_REPORT};
use super::index::Index;
use super::safe_name;
use super::summary::{Guarded, Leak};
use crate::html::{self, capped, esc, Inventory, PageInput};
use crate::mapping::{Lookup, Mappings};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{BufReader, Read};
use std::path::Path;

/// Leak groups on `/leaks`.
pub const MAX_GROUPS: usize = 200;
/// Incident links per group on `/leaks`.
pub const MAX_LINKS: usize = 20;
/// App versions named per group on `/leaks`.
const MAX_VERSIONS: usize = 10;
/// Incidents analysed only in part that `/leaks` links to by name (the rest are counted).
const MAX_PARTIAL: usize = MAX_LINKS;
/// Bytes of a text inventory shown.
const MAX_INVENTORY_TEXT: u64 = 64 << 10;

/// Read `path` as a bounded JSON value; an error names the file and the byte offset.
fn read(path: &Path) -> Result<Option<Value>, String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{name}: {e}")),
    };
    let g = Guarded::new(BufReader::with_capacity(64 << 10, f));
    let at = g.offset();
    capped::read(g, capped::Limits::PAGE)
        .map(Some)
        .map_err(|e| format!("{name}: byte {}: {e}", at.get()))
}

/// The page of incident `id` under `dir/incidents`, or `None` if there is no such incident.
/// The report's names are turned back with the mapping of its app version, when there is one.
pub(super) fn incident(dir: &Path, id: &str, mappings: &Mappings) -> Option<String> {
    if !safe_name(id) {
        return None;
    }
    let d = dir.join("incidents").join(id);
    if !d.is_dir() {
        return None;
    }
    let mut errors = Vec::new();
    let mut load = |name: &str| match read(&d.join(name)) {
        Ok(v) => v,
        Err(e) => {
            errors.push(e);
            None
        }
    };
    let meta = load("meta.json");
    let mut notes = Vec::new();
    // The collector's whole analysis of a dump the device analysed only in part, if made.
    let mut report = match load(SERVER_REPORT) {
        Some(r) => {
            notes.push(format!("The device analysed only part of this dump (its report.json says why); this page shows the collector's analysis of the whole uploaded dump, {SERVER_REPORT}."));
            Some(r)
        }
        None => load("report.json"),
    };
    let mut why = String::new();
    let _ =
        std::fs::File::open(d.join(SERVER_ERROR)).map(|f| f.take(4096).read_to_string(&mut why));
    if !why.is_empty() {
        errors.push(format!("The device analysed only part of this dump, and the collector could not analyse the uploaded one ({SERVER_ERROR}): {}", why.trim_end()));
    }
    if let Some(r) = report.as_mut() {
        let version = [meta.as_ref(), Some(&*r)]
            .into_iter()
            .flatten()
            .find_map(|v| {
                v.pointer("/runningInfo/appVersion")?
                    .as_str()
                    .map(String::from)
            });
        match mappings.get(version.as_deref()) {
            Lookup::Found(m, rel) => {
                m.report_json(r);
                notes.push(format!("Names turned back with the build's mapping, {rel}."));
            }
            Lookup::Missing(rel) => notes.push(format!(
                "No mapping for app version {:?} ({rel}): names are as the build has them (obfuscated, if it was).",
                version.unwrap_or_default()
            )),
            Lookup::Bad(e) => errors.push(format!("the build's mapping: {e}")),
            Lookup::NoVersion => {}
        }
    }
    let mut inv_json = None;
    let mut inv_text = None;
    for name in ["fds.txt", "threads.txt"] {
        let p = d.join(name);
        if !p.exists() {
            continue;
        }
        match read(&p) {
            Ok(Some(v)) => inv_json = Some((name, v)),
            _ => {
                let mut t = String::new();
                let _ = std::fs::File::open(&p)
                    .map(|f| f.take(MAX_INVENTORY_TEXT).read_to_string(&mut t));
                inv_text = Some((name, t));
            }
        }
        break;
    }
    let mut files: Vec<(String, u64)> = std::fs::read_dir(&d)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    let len = e.metadata().ok().filter(|m| m.is_file())?.len();
                    safe_name(&n).then_some((n, len))
                })
                .take(64)
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let inventory = match (&inv_json, &inv_text) {
        (Some((name, v)), _) => Some(Inventory::Json { name, value: v }),
        (None, Some((name, t))) => Some(Inventory::Text { name, text: t }),
        _ => None,
    };
    Some(html::incident_page(&PageInput {
        title: id,
        meta: meta.as_ref(),
        report: report.as_ref(),
        errors,
        notes,
        inventory,
        files,
        back: Some("../../"),
    }))
}

#[derive(Default)]
struct Group<'a> {
    class: &'a str,
    short_path: &'a str,
    reason: &'a str,
    /// The known library leak's pattern (`analyze::library`), if the group is one.
    library: Option<&'a str>,
    /// (received ms, incident id), newest first once sorted.
    incidents: Vec<(u64, &'a str)>,
    devices: BTreeSet<&'a str>,
    versions: BTreeSet<&'a str>,
    first: u64,
    last: u64,
    max_retained: u64,
}

/// `/leaks`: the leaks of the listed incidents grouped by signature, the groups seen in the
/// most incidents first.
pub(super) fn leaks(ix: &Index, mappings: &Mappings) -> String {
    let mut groups: BTreeMap<&str, Group> = BTreeMap::new();
    let mut incidents = 0;
    // Incidents whose report holds only part of an analysis: they add no leaks, and say so.
    let mut partial: Vec<&str> = Vec::new();
    // Each version's mapping, looked up once; the leaks of a version that has one, renamed.
    let mut by_version: BTreeMap<Option<&str>, Lookup> = BTreeMap::new();
    let renamed: Vec<Option<Vec<Leak>>> = ix
        .summaries()
        .map(|s| {
            let r = s.report.as_ref()?;
            let v = s.app_version.as_deref();
            let lookup = by_version.entry(v).or_insert_with(|| mappings.get(v));
            let Lookup::Found(m, _) = lookup else {
                return None;
            };
            Some(r.leaks.iter().map(|l| l.renamed(m)).collect())
        })
        .collect();
    for (s, renamed) in ix.summaries().zip(&renamed) {
        let Some(r) = &s.report else { continue };
        let leaks = renamed.as_deref().unwrap_or(&r.leaks);
        incidents += 1;
        if r.partial.is_some() {
            partial.push(&s.id);
        }
        let device = s
            .device_id
            .as_deref()
            .or(s.device.as_deref())
            .unwrap_or("(unknown device)");
        for l in leaks {
            let key = if l.signature.is_empty() {
                l.class_name.as_str()
            } else {
                l.signature.as_str()
            };
            let g = groups.entry(key).or_insert_with(|| Group {
                class: &l.class_name,
                short_path: &l.short_path,
                reason: &l.reason,
                library: l.library.as_deref(),
                first: u64::MAX,
                ..Group::default()
            });
            if g.incidents.last().map(|i| i.1) != Some(s.id.as_str()) {
                g.incidents.push((s.received_ms, &s.id));
            }
            g.devices.insert(device);
            g.versions.insert(s.app_version.as_deref().unwrap_or("?"));
            g.first = g.first.min(s.received_ms);
            g.last = g.last.max(s.received_ms);
            g.max_retained = g.max_retained.max(l.retained_size);
        }
    }
    let mut list: Vec<(&str, Group)> = groups.into_iter().collect();
    list.sort_by(|a, b| {
        (b.1.incidents.len(), b.1.devices.len(), b.1.last).cmp(&(
            a.1.incidents.len(),
            a.1.devices.len(),
            a.1.last,
        ))
    });
    let mut h = String::from(
        "<p><a href=\"/\">← all incidents</a></p>\n<h1>oomguard: leaks across incidents</h1>\n",
    );
    let _ = writeln!(
        h,
        "<p>{} leak signature(s) in the {incidents} listed incident(s) with a report (each incident's {} largest leak groups; see <code>--index-incidents</code>).</p>",
        list.len(),
        super::summary::TOP
    );
    if !partial.is_empty() {
        let more = partial.len().saturating_sub(MAX_PARTIAL);
        let links: Vec<String> = partial[..partial.len().min(MAX_PARTIAL)]
            .iter()
            .map(|id| format!("<a href=\"/incidents/{0}/\">{0}</a>", esc(id)))
            .collect();
        let _ = writeln!(
            h,
            "<p class=\"error note\" id=\"partial\">{} of them analysed only in part (the device gave the analysis too little memory for the whole of it), so their leaks count here by the one path found for each class and reason, without retained sizes (the collector analyses the dump of such an incident whole when it comes with it; its page says why it could not): {}{}.</p>",
            partial.len(),
            links.join(", "),
            match more {
                0 => String::new(),
                n => format!(" and {n} more"),
            }
        );
    }
    mapping_notes(&mut h, &by_version);
    // The app's own leaks, then the library leaks apart (`analyze::library`).
    let (mut lib, mut app): (Vec<_>, Vec<_>) =
        list.into_iter().partition(|g| g.1.library.is_some());
    group_table(&mut h, "leak-groups", &mut app);
    if !lib.is_empty() {
        h.push_str("<h2 id=\"library-leaks\">Library leaks</h2>\n<p class=\"dim\">Known leaks of the Android framework or of the device maker's build: not in the app's code, though the app may work around them.</p>\n");
        group_table(&mut h, "library-leak-groups", &mut lib);
    }
    html::page("oomguard: leaks across incidents", &h)
}

/// What `/leaks` says of the builds' mappings: the versions whose names were turned back,
/// those with none, and mapping files it could not read (at most [`MAX_VERSIONS`] each).
fn mapping_notes(h: &mut String, by_version: &BTreeMap<Option<&str>, Lookup>) {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for (v, l) in by_version {
        match l {
            Lookup::Found(_, rel) => found.push(esc(rel)),
            Lookup::Missing(_) => missing.push(esc(v.unwrap_or("?"))),
            Lookup::Bad(e) => {
                let _ = writeln!(h, "<p class=\"error\">the build's mapping: {}</p>", esc(e));
            }
            Lookup::NoVersion => {}
        }
    }
    let list = |v: &[String]| {
        let more = v.len().saturating_sub(MAX_VERSIONS);
        let mut s = v[..v.len().min(MAX_VERSIONS)].join(", ");
        if more > 0 {
            let _ = write!(s, " and {more} more");
        }
        s
    };
    if !found.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"dim note\" id=\"mappings\">Names turned back with {}.</p>",
            list(&found)
        );
    }
    if !missing.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"dim note\" id=\"no-mappings\">No mapping for app version(s) {} (put it at <code>{}/VERSION/mapping.txt</code>): their names are as the build has them.</p>",
            list(&missing),
            crate::mapping::MAPPINGS_DIR
        );
    }
}

/// One table of `/leaks`: at most [`MAX_GROUPS`] of `list`'s groups (signature, group).
fn group_table(h: &mut String, id: &str, list: &mut [(&str, Group<'_>)]) {
    let _ = writeln!(h, "<table id=\"{id}\"><tr><th>leak</th><th>incidents</th><th>devices</th><th>app versions</th><th>first seen</th><th>last seen</th><th>largest retained</th><th>incidents</th></tr>");
    for (sig, g) in list.iter_mut().take(MAX_GROUPS) {
        g.incidents.sort_by(|a, b| b.cmp(a));
        let versions: Vec<String> = g
            .versions
            .iter()
            .take(MAX_VERSIONS)
            .map(|v| esc(v))
            .collect();
        let _ = write!(
            h,
            "<tr class=\"group\"><td><code>{}</code> <small>{}</small><br><span class=\"dim\">{}</span><br><small title=\"{}\">{}</small></td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>",
            esc(g.class),
            match g.library {
                Some(p) => format!("{} (library leak: <code>{}</code>)", esc(g.reason), esc(p)),
                None => esc(g.reason),
            },
            esc(g.short_path),
            esc(sig),
            esc(&sig.chars().take(12).collect::<String>()),
            g.incidents.len(),
            g.devices.len(),
            versions.join(", "),
            if g.versions.len() > MAX_VERSIONS { ", …" } else { "" },
            html::utc(g.first),
            html::utc(g.last),
            html::bytes(g.max_retained),
        );
        for (_, id) in g.incidents.iter().take(MAX_LINKS) {
            let _ = write!(h, "<a href=\"/incidents/{0}/\">{0}</a> ", esc(id));
        }
        if g.incidents.len() > MAX_LINKS {
            let _ = write!(h, "and {} more", g.incidents.len() - MAX_LINKS);
        }
        h.push_str("</td></tr>\n");
    }
    h.push_str("</table>\n");
    if list.len() > MAX_GROUPS {
        let _ = writeln!(
            h,
            "<p class=\"more\">{} more signature(s) not shown.</p>",
            list.len() - MAX_GROUPS
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, id: &str, device: &str, version: &str, report: &str) {
        let d = root.join("incidents").join(id);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("meta.json"),
            format!(r#"{{"reason":"heap","runningInfo":{{"deviceId":"{device}","appVersion":"{version}","manufacturer":"Google","model":"Pixel 7","apiLevel":34}}}}"#),
        )
        .unwrap();
        std::fs::write(d.join("report.json"), report).unwrap();
    }

    const KOOM: &str = r#"{"gcPaths":[{"signature":"s1","className":"a.Main","leakReason":"Activity Leak","instanceCount":1,"retainedSize":RET,"gcRoot":"System Class",
        "path":[{"reference":"a.App.sList","referenceType":"STATIC_FIELD","declaredClass":"a.App"},{"reference":"a.Main","referenceType":"LEAKING_INSTANCE","declaredClass":"a.Main"}]}]}"#;

    /// KOOM's one leak (its `gcPaths` entry), with signature `sig` and retained size `ret`.
    fn koom_leak(sig: &str, ret: u64) -> String {
        let one = &KOOM[r#"{"gcPaths":["#.len()..KOOM.len() - 2];
        one.replace("s1", sig).replace("RET", &ret.to_string())
    }

    /// Three incidents, two devices, two versions, one signature: one group, with the largest
    /// retained size and a link to each; the index's leak rows are class and short path.
    #[test]
    fn leaks_are_grouped_by_signature() {
        let d = tempfile::tempdir().unwrap();
        put(
            d.path(),
            "100-a",
            "dev-1",
            "1.0",
            &KOOM.replace("RET", "1000"),
        );
        put(
            d.path(),
            "200-b",
            "dev-2",
            "1.1",
            &KOOM.replace("RET", "3000000"),
        );
        put(d.path(), "300-c", "dev-1", "1.1", &KOOM.replace("RET", "5"));
        put(d.path(), "400-d", "dev-1", "1.1", r#"{"gcPaths":[]}"#);
        let ix = Index::open(d.path(), 100);
        let s = ix.summaries().next().unwrap();
        assert_eq!(s.device.as_deref(), Some("Google Pixel 7, API 34"));
        let h = leaks(&ix, &Mappings::new(d.path()));
        assert!(
            h.contains("1 leak signature(s) in the 4 listed incident(s)"),
            "{h}"
        );
        let row = h.split("<tr class=\"group\">").nth(1).unwrap();
        assert!(
            row.contains("<td class=\"num\">3</td><td class=\"num\">2</td><td>1.0, 1.1</td>"),
            "{row}"
        );
        assert!(row.contains("System Class › App.sList › Main"), "{row}");
        assert!(row.contains("2.9 MB"), "{row}");
        for id in ["100-a", "200-b", "300-c"] {
            assert!(row.contains(&format!("/incidents/{id}/")), "{row}");
        }
        let index = ix.render(0, 10);
        assert!(
            index.contains("<code>a.Main</code><br>System Class › App.sList › Main<br><small title=\"s1\">s1</small>"),
            "{index}"
        );
    }

    /// A group row names its reason and the span it was seen in, and says what it leaves out:
    /// the versions past ten (one group has ten, the other eleven) and the links past twenty
    /// (20 and 21 incidents); the note on mappings says how many versions it does not name.
    #[test]
    fn group_rows_and_notes_say_what_they_leave_out() {
        let d = tempfile::tempdir().unwrap();
        let day = std::time::Duration::from_secs(86_400);
        for (sig, n, versions) in [("s1", 20, 10), ("s2", 21, 11)] {
            for i in 0..n {
                let id = format!("{sig}-{i:02}");
                let v = format!("v{:02}", i % versions);
                let report = KOOM.replace("s1", sig).replace("RET", "10");
                put(d.path(), &id, &format!("dev-{i}"), &v, &report);
                // Received on day i + 1 (the summary is made from the directory's time).
                let at = std::time::UNIX_EPOCH + day * (i + 1);
                let dir = std::fs::File::open(d.path().join("incidents").join(&id)).unwrap();
                dir.set_modified(at).unwrap();
            }
        }
        let ix = Index::open(d.path(), 100);
        let h = leaks(&ix, &Mappings::new(d.path()));
        let row = |sig: &str| {
            let row = h
                .split("<tr class=\"group\">")
                .find(|r| r.contains(&format!("title=\"{sig}\"")));
            row.unwrap_or_else(|| panic!("{sig}: {h}")).to_string()
        };
        let (s1, s2) = (row("s1"), row("s2"));
        for (r, n, last) in [(&s1, 20, 20), (&s2, 21, 21)] {
            assert!(r.contains("<small>Activity Leak</small>"), "{r}");
            assert!(r.contains(&format!("<td class=\"num\">{n}</td>")), "{r}");
            let (first, last) = (html::utc(86_400_000), html::utc(last * 86_400_000));
            assert!(
                r.contains(&format!("<td>{first}</td><td>{last}</td>")),
                "{r}"
            );
        }
        assert!(s1.contains("v08, v09</td>") && !s1.contains("more"), "{s1}");
        assert!(
            s2.contains("v08, v09, …</td>") && s2.contains("</a> and 1 more</td>"),
            "{s2}"
        );
        assert!(
            h.contains("No mapping for app version(s) v00, v01, v02, v03, v04, v05, v06, v07, v08, v09 and 1 more (put it"),
            "{h}"
        );
    }

    /// `/leaks` lists at most MAX_GROUPS groups and says how many it leaves out: 200 groups
    /// (twenty incidents of ten signatures each) are all listed, the 201st is counted.
    #[test]
    fn at_most_max_groups_are_listed() {
        let d = tempfile::tempdir().unwrap();
        let leak = |sig: usize| koom_leak(&format!("g{sig:03}"), 5);
        let listed = |incidents: usize| {
            let ix = Index::open(d.path(), 1000);
            let h = leaks(&ix, &Mappings::new(d.path()));
            let rows = h.matches("<tr class=\"group\">").count();
            assert!(
                h.contains(&format!("in the {incidents} listed incident(s)")),
                "{h}"
            );
            (rows, h.contains("more signature(s) not shown"), h)
        };
        for i in 0..20 {
            let ten: Vec<String> = (0..10).map(|k| leak(10 * i + k)).collect();
            let report = format!(r#"{{"gcPaths":[{}]}}"#, ten.join(","));
            put(d.path(), &format!("{i:02}-x"), "dev-1", "1.0", &report);
        }
        let (rows, more, h) = listed(20);
        assert_eq!((rows, more), (MAX_GROUPS, false), "{h}");
        put(
            d.path(),
            "99-x",
            "dev-1",
            "1.0",
            &format!(r#"{{"gcPaths":[{}]}}"#, leak(200)),
        );
        let (rows, _, h) = listed(21);
        assert_eq!(rows, MAX_GROUPS);
        assert!(
            h.contains("<p class=\"more\">1 more signature(s) not shown.</p>"),
            "{h}"
        );
    }

    /// An incident whose report holds only part of an analysis (too little memory on the
    /// device) is named on `/leaks` and marked in the index and its terminal line; a whole
    /// report is not.
    #[test]
    fn an_incident_analysed_only_in_part_is_marked_on_leaks_and_the_index() {
        let d = tempfile::tempdir().unwrap();
        put(
            d.path(),
            "100-a",
            "dev-1",
            "1.0",
            &KOOM.replace("RET", "1000"),
        );
        let partial = r#"{"analysis":{"objects":5,"budget":{"budgetBytes":1048576,"neededBytes":99,"reason":"the whole analysis would need 99 MiB, more than its budget of 1 MiB","leftOut":["gcPaths"]}},"histogram":[{"className":"a.B","instanceCount":3,"shallowSize":48}],"gcPaths":[]}"#;
        put(d.path(), "200-b", "dev-2", "1.0", partial);
        let ix = Index::open(d.path(), 100);
        let h = leaks(&ix, &Mappings::new(d.path()));
        let note = h.split("id=\"partial\">").nth(1).expect(&h);
        assert!(
            note.starts_with("1 of them analysed only in part")
                && note.contains("/incidents/200-b/"),
            "{note}"
        );
        assert!(
            !note.split("</p>").next().unwrap().contains("100-a"),
            "{note}"
        );
        // Still one signature: the whole report's.
        assert!(
            h.contains("1 leak signature(s) in the 2 listed incident(s)"),
            "{h}"
        );
        let index = ix.render(0, 10);
        assert_eq!(
            index.matches("Only part of the analysis").count(),
            1,
            "{index}"
        );
        assert!(
            index.contains("Only part of the analysis (its leaks by the one path found for each class, without retained sizes): the whole analysis would need 99 MiB"),
            "{index}"
        );
        let lines: Vec<String> = ix
            .summaries()
            .map(|s| crate::index::report_line(d.path(), s))
            .collect();
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains("only part of the analysis: the whole"))
                .count(),
            1,
            "{lines:?}"
        );
        // None of it when every report is whole.
        let d2 = tempfile::tempdir().unwrap();
        put(
            d2.path(),
            "100-a",
            "dev-1",
            "1.0",
            &KOOM.replace("RET", "1000"),
        );
        let ix2 = Index::open(d2.path(), 100);
        assert!(!leaks(&ix2, &Mappings::new(d2.path())).contains("id=\"partial\""));
        assert!(!ix2.render(0, 10).contains("Only part of the analysis"));
    }

    /// An incident page reads a report too large to hold (here 20,000 groups) and says how
    /// much it left out; an unknown incident has no page; a bad report is named with its
    /// byte offset.
    #[test]
    fn incident_pages_are_bounded() {
        let d = tempfile::tempdir().unwrap();
        let one = koom_leak("s1", 7);
        let big = format!(r#"{{"gcPaths":[{}]}}"#, vec![one; 20_000].join(","));
        put(d.path(), "500-big", "dev-1", "1.0", &big);
        let h = incident(d.path(), "500-big", &Mappings::new(d.path())).unwrap();
        assert!(
            h.contains("19950 more leak group(s) not shown"),
            "{}",
            h.len()
        );
        assert!(incident(d.path(), "nope", &Mappings::new(d.path())).is_none());
        assert!(incident(d.path(), "..", &Mappings::new(d.path())).is_none());
        std::fs::write(
            d.path().join("incidents/500-big/report.json"),
            r#"{"gcPaths":[1,"#,
        )
        .unwrap();
        let h = incident(d.path(), "500-big", &Mappings::new(d.path())).unwrap();
        assert!(h.contains("report.json: byte "), "{h}");
    }

    /// The incident page shows the first inventory there is, `fds.txt` before `threads.txt`: a
    /// JSON one as a table, a text one as it is, up to 64 KiB; none when neither is there.
    #[test]
    fn the_incident_page_shows_its_inventory() {
        let d = tempfile::tempdir().unwrap();
        let page = |id: &str, files: &[(&str, &str)]| {
            put(d.path(), id, "dev-1", "1.0", &KOOM.replace("RET", "7"));
            for (name, body) in files {
                std::fs::write(d.path().join("incidents").join(id).join(name), body).unwrap();
            }
            incident(d.path(), id, &Mappings::new(d.path())).unwrap()
        };
        let fds = r#"{"kind":"fd","total":3,"groups":[{"name":"socket","count":3}]}"#;
        let h = page("1-json", &[("fds.txt", fds), ("threads.txt", "main\n")]);
        assert!(
            h.contains("File descriptors <small>fds.txt: 3 listed</small>"),
            "{h}"
        );
        assert!(!h.contains("<small>threads.txt</small>"), "{h}");
        let text = "t".repeat(100 << 10);
        let h = page("2-text", &[("threads.txt", &text)]);
        let shown = h
            .split("Inventory <small>threads.txt</small></h2>\n<pre>")
            .nth(1);
        let shown = shown.and_then(|p| p.split("</pre>").next()).expect(&h);
        assert_eq!(shown.len(), 64 << 10);
        let h = page("3-none", &[]);
        assert!(!h.contains("id=\"inventory\""), "{h}");
    }

    /// A report that is there but cannot be opened is named on the page with the reason, not
    /// taken for a missing one (a link to itself: `ELOOP`).
    #[test]
    fn a_report_that_cannot_be_opened_is_named_on_the_page() {
        let d = tempfile::tempdir().unwrap();
        put(d.path(), "1-loop", "dev-1", "1.0", "{}");
        let p = d.path().join("incidents/1-loop/report.json");
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&p, &p).unwrap();
        let h = incident(d.path(), "1-loop", &Mappings::new(d.path())).unwrap();
        assert!(
            h.contains("report.json: Too many levels of symbolic links"),
            "{h}"
        );
    }

    /// A report with an app leak and a library leak (issue 42): `/leaks`, the incident page and
    /// the index show the library leak apart, after the app's own, with what is known of it.
    #[test]
    fn library_leaks_are_shown_apart() {
        let d = tempfile::tempdir().unwrap();
        let lib = r#"{"signature":"s2","className":"a.Other","leakReason":"Activity Leak","instanceCount":1,"retainedSize":9000000,"gcRoot":"System Class",
            "path":[{"reference":"android.os.Message.obj","referenceType":"INSTANCE_FIELD","declaredClass":"android.os.Message"},{"reference":"a.Other","referenceType":"LEAKING_INSTANCE","declaredClass":"a.Other"}],
            "consequences":[{"leakReason":"Array Size Over Threshold","className":"byte[]","instanceCount":40,"retainedSize":10485760}],
            "libraryLeak":{"pattern":"android.os.Message.obj","description":"An idle HandlerThread keeps its last message.","tracked":"https://issuetracker.google.com/issues/146144484","apiLevels":[0,30]}}"#;
        let koom = KOOM.replace("RET", "1000");
        let both = format!("{},{lib}]}}", &koom[..koom.len() - 2]);
        put(d.path(), "100-a", "dev-1", "1.0", &both);
        let ix = Index::open(d.path(), 100);
        let h = leaks(&ix, &Mappings::new(d.path()));
        let (app, library) = h.split_once("<h2 id=\"library-leaks\">").expect(&h);
        assert!(
            app.contains("<code>a.Main</code>") && !app.contains("a.Other"),
            "{h}"
        );
        assert!(
            library.contains("<table id=\"library-leak-groups\">"),
            "{h}"
        );
        assert!(library.contains("<code>a.Other</code>"), "{h}");
        assert!(
            library.contains("(library leak: <code>android.os.Message.obj</code>)"),
            "{h}"
        );
        let page = incident(d.path(), "100-a", &Mappings::new(d.path())).unwrap();
        let (app, library) = page.split_once("<h3 id=\"library-leaks\">").expect(&page);
        assert!(app.contains("a.Main") && !app.contains("a.Other"), "{page}");
        assert!(
            library.contains("Library leak through <code>android.os.Message.obj</code>: An idle HandlerThread keeps its last message. Tracked at https://issuetracker.google.com/issues/146144484."),
            "{page}"
        );
        // What the leak alone holds is listed in its card (issue 42: one leak, one card).
        assert!(
            library.contains("Holds alone: 40 × <code>byte[]</code> <small>Array Size Over Threshold</small>, 10.0 MB"),
            "{page}"
        );
        let index = ix.render(0, 10);
        assert!(
            index.contains("(library leak: <code>android.os.Message.obj</code>)"),
            "{index}"
        );
    }

    /// A KOOM report of one leak: `holder.field` (static) holds `leaking`; its signature hashed
    /// as `analyze` hashes it.
    fn one_leak(holder: &str, field: &str, leaking: &str) -> String {
        let path = vec![
            analyze::report::PathItem {
                reference: format!("{holder}.{field}"),
                reference_type: "STATIC_FIELD".into(),
                declared_class: holder.into(),
            },
            analyze::report::PathItem {
                reference: leaking.into(),
                reference_type: "LEAKING_INSTANCE".into(),
                declared_class: leaking.into(),
            },
        ];
        let sig = analyze::renamed::signature("System Class", &path);
        serde_json::json!({"gcPaths": [{"signature": sig, "className": leaking,
            "leakReason": "Activity Leak", "instanceCount": 1, "retainedSize": 100,
            "gcRoot": "System Class", "path": path}],
            "classInfos": [{"className": leaking, "instanceCount": 1, "leakInstanceCount": 1}]})
        .to_string()
    }

    /// Issue 42: a mapping per app version in `mappings/VERSION/mapping.txt`. The obfuscated
    /// build's leak reads with its original names on its page and on `/leaks`, where it joins
    /// the plain build's group (same signature); a version without a mapping is said so on the
    /// page (no error); a malformed mapping is an error naming the file, line and byte.
    #[test]
    fn a_versions_mapping_turns_its_names_back_on_the_pages() {
        let d = tempfile::tempdir().unwrap();
        put(
            d.path(),
            "100-plain",
            "dev-1",
            "1.0",
            &one_leak("com.app.App", "sList", "com.app.Main"),
        );
        for (id, v) in [("200-min", "2.0"), ("300-nomap", "3.0"), ("400-bad", "4.0")] {
            put(d.path(), id, "dev-2", v, &one_leak("a.a", "b", "a.b"));
        }
        let put_mapping = |v: &str, text: &str| {
            let m = d.path().join(crate::mapping::MAPPINGS_DIR).join(v);
            std::fs::create_dir_all(&m).unwrap();
            std::fs::write(m.join("mapping.txt"), text).unwrap();
        };
        put_mapping(
            "2.0",
            "com.app.App -> a.a:\n    java.util.List sList -> b\ncom.app.Main -> a.b:\n",
        );
        put_mapping("4.0", "com.app.App -> a.a:\nnot a mapping line\n");
        let mappings = Mappings::new(d.path());

        let page = incident(d.path(), "200-min", &mappings).unwrap();
        assert!(
            page.contains(
                "Names turned back with the build&#39;s mapping, mappings/2.0/mapping.txt"
            ) || page
                .contains("Names turned back with the build's mapping, mappings/2.0/mapping.txt"),
            "{page}"
        );
        assert!(page.contains("com.app.Main"), "{page}");
        assert!(page.contains("sList"), "{page}");
        assert!(!page.contains("class=\"error\""), "{page}");

        let page = incident(d.path(), "300-nomap", &mappings).unwrap();
        assert!(
            page.contains("No mapping for app version &quot;3.0&quot; (mappings/3.0/mapping.txt)")
                || page.contains("No mapping for app version \"3.0\" (mappings/3.0/mapping.txt)"),
            "{page}"
        );
        assert!(!page.contains("class=\"error\""), "{page}");
        assert!(!page.contains("com.app.Main"));

        let page = incident(d.path(), "400-bad", &mappings).unwrap();
        let at = "com.app.App -> a.a:\n".len();
        assert!(
            page.contains(&format!(
                "the build&#39;s mapping: mappings/4.0/mapping.txt: line 2 (byte {at}):"
            )) || page.contains(&format!(
                "the build's mapping: mappings/4.0/mapping.txt: line 2 (byte {at}):"
            )),
            "{page}"
        );

        let ix = Index::open(d.path(), 100);
        let h = leaks(&ix, &mappings);
        // The plain 1.0 and the renamed 2.0 are one group; 3.0 and 4.0 keep the obfuscated one.
        assert!(
            h.contains("2 leak signature(s) in the 4 listed incident(s)"),
            "{h}"
        );
        let plain = h
            .split("<tr class=\"group\">")
            .find(|r| r.contains("<code>com.app.Main</code>"))
            .unwrap_or_else(|| panic!("{h}"));
        assert!(
            plain.contains("/incidents/100-plain/") && plain.contains("/incidents/200-min/"),
            "{plain}"
        );
        assert!(plain.contains("System Class › App.sList › Main"), "{plain}");
        // The obfuscated group of 3.0 and 4.0, apart.
        assert!(h.contains("<code>a.b</code>"), "{h}");
        // The renamed leak alone (as /leaks makes it) reads as the plain one.
        let mapped = match mappings.get(Some("2.0")) {
            Lookup::Found(m, _) => m,
            other => panic!("{other:?}"),
        };
        let (mut sums, mut want) = (Vec::new(), Vec::new());
        for (id, out) in [("200-min", &mut sums), ("100-plain", &mut want)] {
            let s = ix.summaries().find(|s| s.id == id).unwrap();
            out.extend(s.report.as_ref().unwrap().leaks.iter().cloned());
        }
        let renamed = sums[0].renamed(&mapped);
        assert_eq!(
            (&renamed.signature, &renamed.class_name, &renamed.short_path),
            (&want[0].signature, &want[0].class_name, &want[0].short_path)
        );
        assert_eq!(renamed.path, want[0].path);
        assert_ne!(
            renamed.path, sums[0].path,
            "the path's own names are turned back too"
        );
        assert!(h.contains("id=\"mappings\""), "{h}");
        assert!(
            h.contains("No mapping for app version(s) 1.0, 3.0 (put it"),
            "{h}"
        );
        assert!(h.contains("mappings/4.0/mapping.txt: line 2"), "{h}");
        // The index lists each incident's leaks with its version's names too.
        let index = ix.render(0, 10);
        let part = |id: &str| {
            index
                .split(&format!("<h2 id=\"{id}\">"))
                .nth(1)
                .and_then(|p| p.split("<h2").next())
                .unwrap_or_else(|| panic!("{id}: {index}"))
                .to_string()
        };
        assert!(
            part("200-min").contains("<code>com.app.Main</code>"),
            "{index}"
        );
        assert!(part("300-nomap").contains("<code>a.b</code>"), "{index}");
    }
}
