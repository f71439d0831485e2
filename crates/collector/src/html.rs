//! The HTML pages of a report: one page per incident (its reason, the samples that led to the
//! verdict as a chart, each leak as a trace, the dominators as a treemap that opens into a
//! tree, the fd or thread inventory), made for `oomguard analyze --html` and for the
//! collector. Pure: values in, a `String` out; no file, no clock, no network.
//!
//! Invariants:
//! - Every text that comes from a report, a meta file or an inventory is escaped ([`esc`]);
//!   attribute values are always quoted. On top of that each page carries a
//!   Content-Security-Policy that lets only its own script run (by its SHA-256) and loads
//!   nothing from anywhere: no external script, font, style or image, no URL.
//! - The work and the page are bounded whatever the input: every list is cut to a fixed
//!   number of rows and the page says how many were left out ([`capped`] bounds the value read
//!   in the first place).
//! - A report is read through `analyze::report`'s types, leniently ([`lenient`]): a field
//!   missing or of another type reads as its default, so reports of older and newer versions
//!   render (with or without `gcPaths[].trace`, with no leaks at all). The documents that are
//!   not reports (`meta.json`, the inventories) and the free-form parts of a report
//!   (`runningInfo`, the `analysis` table) are read as `serde_json::Value`, a field missing or
//!   of another type shown as absent.
#![forbid(unsafe_code)]

pub mod capped;
mod chart;
mod incident;
pub mod lenient;
mod running;
pub mod trace;
mod treemap;

pub use incident::{incident_page, Inventory, PageInput};

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// Escape `s` for HTML text and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            // Control characters (but tab and newline) have no business in a page.
            c if c.is_control() && c != '\n' && c != '\t' => o.push('\u{fffd}'),
            c => o.push(c),
        }
    }
    o
}

/// `n` bytes for people: "12.3 MB", "512 B".
pub fn bytes(n: u64) -> String {
    const U: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else if v >= 100.0 {
        format!("{v:.0} {}", U[i])
    } else {
        format!("{v:.1} {}", U[i])
    }
}

/// Milliseconds since the epoch as "YYYY-MM-DD HH:MM:SS UTC".
pub fn utc(ms: u64) -> String {
    let (y, m, d, h, mi, s) = sys::time::civil(ms / 1000);
    format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

/// The text of `v[key]`, if it is one.
pub(crate) fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key)?.as_str()
}

/// The unsigned number `v[key]`, if it is one.
pub(crate) fn num(v: &Value, key: &str) -> Option<u64> {
    v.get(key)?.as_u64()
}

/// The entries of the list `v[key]` (none if it is not a list) and how many were left out
/// when it was read ([`capped`]).
pub(crate) fn list<'a>(v: &'a Value, key: &str) -> (Vec<&'a Value>, u64) {
    let Some(a) = v.get(key).and_then(Value::as_array) else {
        return (Vec::new(), 0);
    };
    let mut left = 0;
    let mut out = Vec::with_capacity(a.len());
    for e in a {
        match capped::omitted(e) {
            Some(n) => left += n,
            None => out.push(e),
        }
    }
    (out, left)
}

/// A line saying how many rows are not shown, if any.
pub(crate) fn more(h: &mut String, left: u64, what: &str) {
    if left > 0 {
        let _ = writeln!(h, "<p class=\"more\">{left} more {what} not shown.</p>");
    }
}

const STYLE: &str = "\
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em 2em;color:#222;max-width:78em}\
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;margin:1.6em 0 .4em;border-bottom:1px solid #ddd}\
h3{font-size:1em;margin:1em 0 .3em}small,.dim{color:#777}code{font-family:ui-monospace,monospace;font-size:.95em}\
table{border-collapse:collapse;margin:.4em 0 1em}td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top}\
th{background:#f3f3f3}.num{text-align:right;font-variant-numeric:tabular-nums}\
.reason{font-size:1.1em;background:#fff4e5;border-left:4px solid #f0a020;padding:.4em .7em}\
.error{background:#fde8e8;border-left:4px solid #d33;padding:.3em .7em}\
#errors{background:#fde8e8;border:2px solid #d33;padding:.3em 1.5em}\
.trace{list-style:none;padding:0;margin:.3em 0 .8em}.trace>li{margin:0;padding:.15em .6em;border-left:3px solid #bbb}\
.trace .root{border-left-color:#555;font-weight:600}.trace .LEAKING{border-left-color:#d33;background:#fff0f0}\
.trace .NOT_LEAKING{border-left-color:#3a3}.trace .UNKNOWN{border-left-color:#bbb}\
.status{font-size:.8em;padding:0 .35em;border-radius:3px;background:#eee}.LEAKING .status{background:#d33;color:#fff}\
.NOT_LEAKING .status{background:#3a3;color:#fff}.ref{color:#555;padding-left:1.2em}\
.ref.suspect code{text-decoration:underline wavy #d33;color:#b00}.ref.suspect::after{content:\" suspect\";color:#d33;font-size:.8em}\
.leak{border:1px solid #e3e3e3;border-radius:4px;padding:.2em .8em;margin:.6em 0}\
.library{background:#f4f4fa;border-left:3px solid #88a;padding:.3em .6em;margin:.3em 0}\
.consequence{margin:.2em 0;color:#444}\
.bar{display:inline-block;height:.8em;background:#6a8fd0;vertical-align:middle;margin-right:.4em}\
details{margin-left:1em}summary{cursor:pointer}details.top{margin-left:0}\
svg text{font:11px system-ui,sans-serif}.tm rect{stroke:#fff;stroke-width:1;cursor:pointer}\
.tm rect:hover{opacity:.8}.chart .line{fill:none;stroke:#36c;stroke-width:2}.chart .lim{stroke:#d33;stroke-dasharray:4 3}\
figure{display:inline-block;margin:0 1.5em .5em 0}.chart .axis{stroke:#999}.target{outline:2px solid #f0a020}\
";

/// The page's one script: errors into `#errors`, treemap cells that open their branch of the
/// dominator tree (as does a link to `#dom-N`), and `data-ready` on `<body>` once it ran (what
/// the browser test waits for).
const SCRIPT: &str = "(function(){\
var E=document.getElementById('errors');\
function err(m){E.hidden=false;var li=document.createElement('li');li.textContent=m;E.appendChild(li);}\
window.addEventListener('error',function(e){err('error: '+e.message);});\
try{\
var cells=document.querySelectorAll('[data-open]');\
function open(id){var d=document.getElementById(id);if(!d)return;\
for(var p=d;p;p=p.parentElement){if(p.tagName==='DETAILS')p.open=true;}\
var t=document.querySelectorAll('.target');for(var i=0;i<t.length;i++)t[i].classList.remove('target');\
d.classList.add('target');d.scrollIntoView({block:'center'});}\
for(var i=0;i<cells.length;i++){cells[i].addEventListener('click',function(){open(this.getAttribute('data-open'));});}\
if(location.hash.length>1)open(decodeURIComponent(location.hash.slice(1)));\
document.body.setAttribute('data-ready','cells='+cells.length+' charts='+document.querySelectorAll('svg.chart').length+' traces='+document.querySelectorAll('ol.trace').length);\
}catch(e){err('script: '+e);}\
})();";

/// The Content-Security-Policy of every page: nothing loaded from anywhere, inline styles,
/// and the page's own script alone (by its SHA-256).
pub fn csp() -> String {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT));
    format!("default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{hash}'; base-uri 'none'; form-action 'none'")
}

/// The page around `body`: head, style, the error list, the script, with a
/// Content-Security-Policy that allows that script alone.
pub(crate) fn page(title: &str, body: &str) -> String {
    let mut h = String::with_capacity(body.len() + 6000);
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n\
         <meta name=\"viewport\" content=\"width=device-width\">\n<title>{}</title>\n<style>{STYLE}</style></head>\n<body>\n\
         <ul id=\"errors\" hidden></ul>\n",
        csp(),
        esc(title)
    );
    h.push_str(body);
    let _ = write!(h, "\n<script>{SCRIPT}</script>\n</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(
            esc("<a href='x'>&\"\u{1b}"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;\u{fffd}"
        );
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(12 * 1024 * 1024 + 300_000), "12.3 MB");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(
            utc(1_795_737_600_000 + 3_723_000),
            "2026-11-27 01:02:03 UTC"
        );
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
    }
}
