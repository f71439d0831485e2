//! The URL parser of the agent's HTTP: `http://` and `https://` URLs only, parsed and resolved by
//! the URL standard's rules for those ("special") schemes (WHATWG URL), and written back in the
//! standard's form. The rules (`policy::url`) judge a URL by the host found here, and the
//! transports connect by, or are handed, this same parse.
//!
//! Why our own: the `url` crate (with `idna` and `percent-encoding`) was about 45 K of the
//! shipped `.so` (issue 41), for the one thing the library does with URLs. The command line and
//! the collector keep the `url` crate, and this parser's tests compare it with the `url` crate on
//! every case they run.
//!
//! What the standard does that is kept: leading and trailing spaces and C0 controls trimmed, tabs
//! and newlines removed anywhere; scheme case folded; `\` read as `/`; any number of slashes after
//! `http:`; user info (the last `@` ends it); the host percent-decoded, then ASCII case folded;
//! IPv4 in every form the standard reads (`127.1`, `0x7f.0.0.1`, `0177.0.0.1`) and IPv6 (written
//! back compressed, IPv4-mapped ones in hex); the default port dropped; `.` and `..` segments
//! (also as `%2e`) resolved; the characters the standard percent-encodes in user info, path,
//! query and fragment encoded; relative references (`//host/..`, `/path`, `path`, `?q`, `#f`,
//! `http:path` against an http base) resolved against a base.
//!
//! What is refused, with an error that says so, where the standard would go on:
//! - a host with a character outside ASCII (before or after percent-decoding): the standard would
//!   map it through IDNA (Unicode to punycode); the library has no IDNA tables, so a Unicode host
//!   must be written in its punycode form (`xn--...`), which is what a client sends anyway;
//! - any scheme but `http` and `https` (the agent contacts nothing else).
//!
//! Invariants: a parse either fails or gives a URL whose serialisation parses to itself; the host
//! a URL is judged by is the one its serialisation names (`java.net.URL` reads that form alike).
#![forbid(unsafe_code)]

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A parsed `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// The standard's serialisation.
    text: String,
    https: bool,
    host: Host,
    /// Where the host ends in `text` (and the port or the path begins).
    host_end: usize,
    /// Where the path begins in `text`.
    path_start: usize,
    /// The port written, when it is not the scheme's default.
    port: Option<u16>,
}

/// A URL's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A name, ASCII, lower case.
    Domain(String),
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
}

/// Why a text is not a URL here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A scheme other than `http` or `https`, or none.
    NotHttp,
    /// Anything else, said in words.
    Invalid(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotHttp => f.write_str("not an http:// or https:// URL"),
            Error::Invalid(why) => f.write_str(why),
        }
    }
}

type Result<T> = std::result::Result<T, Error>;

impl Url {
    /// Parse an absolute URL.
    pub fn parse(input: &str) -> Result<Url> {
        let s = clean(input);
        let (https, rest) = scheme(&s).ok_or(Error::NotHttp)?;
        Self::after_scheme(https, rest)
    }

    /// Resolve `input` (a URL, or a reference relative to this one) against this URL.
    pub fn join(&self, input: &str) -> Result<Url> {
        let s = clean(input);
        if let Some((https, rest)) = scheme(&s) {
            // With the base's scheme, the rest is read as a reference: `http:path` and
            // `http:/path` are relative, `http://host` names its authority.
            if https != self.https {
                return Self::after_scheme(https, rest);
            }
            return self.relative(rest);
        }
        if has_scheme(&s) {
            return Err(Error::NotHttp);
        }
        self.relative(&s)
    }

    /// A reference with no scheme, against this URL.
    fn relative(&self, r: &str) -> Result<Url> {
        let b = &self.text;
        let authority = &b[..self.path_start];
        let (base_path, base_query) = match b[self.path_start..].split_once('#') {
            Some((pq, _)) => split_query(pq),
            None => split_query(&b[self.path_start..]),
        };
        let mut chars = r.chars();
        let (c0, c1) = (chars.next(), chars.next());
        let slash = |c: Option<char>| matches!(c, Some('/' | '\\'));
        if slash(c0) && slash(c1) {
            return Self::after_scheme(self.https, r);
        }
        let (path, query_fragment) = split_path(r);
        let merged;
        let path = if slash(c0) {
            path
        } else if path.is_empty() {
            // Only a query or a fragment (or nothing): the base's path, and its query too when
            // only a fragment is given.
            let mut tail = String::from(base_path);
            if !query_fragment.starts_with('?') {
                if let Some(q) = base_query {
                    tail.push('?');
                    tail.push_str(q);
                }
            }
            let text = format!("{authority}{tail}{}", encode_query_fragment(query_fragment));
            return Ok(Url {
                text,
                ..self.clone()
            });
        } else {
            let dir = &base_path[..base_path.rfind('/').map_or(0, |i| i + 1)];
            merged = format!("{dir}{path}");
            &merged
        };
        let text = format!(
            "{authority}{}{}",
            normalise_path(path),
            encode_query_fragment(query_fragment)
        );
        Ok(Url {
            text,
            ..self.clone()
        })
    }

    /// Everything after `http:` or `https:`: the slashes, the authority, the rest.
    fn after_scheme(https: bool, rest: &str) -> Result<Url> {
        let rest = rest.trim_start_matches(['/', '\\']);
        let end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let (host_text, port_text) = split_port(hostport)?;
        let host = parse_host(host_text)?;
        let port = match port_text {
            None | Some("") => None,
            Some(p) if p.bytes().all(|b| b.is_ascii_digit()) => {
                let digits = p.trim_start_matches('0');
                let n: u32 = match digits.len() {
                    0 => 0,
                    1..=5 => digits.parse().unwrap_or(u32::MAX),
                    _ => u32::MAX,
                };
                Some(u16::try_from(n).map_err(|_| Error::Invalid("the port is over 65535"))?)
            }
            Some(_) => return Err(Error::Invalid("the port is not a number")),
        };
        let port = port.filter(|&p| p != if https { 443 } else { 80 });
        let mut text = String::from(if https { "https://" } else { "http://" });
        let (user, pass) = match userinfo.map(|ui| ui.split_once(':').unwrap_or((ui, ""))) {
            Some((u, p)) => (u, p),
            None => ("", ""),
        };
        if !user.is_empty() || !pass.is_empty() {
            encode_into(&mut text, user, USERINFO);
            if !pass.is_empty() {
                text.push(':');
                encode_into(&mut text, pass, USERINFO);
            }
            text.push('@');
        }
        write_host(&mut text, &host);
        let host_end = text.len();
        if let Some(p) = port {
            text.push(':');
            text.push_str(&p.to_string());
        }
        let path_start = text.len();
        let (path, query_fragment) = split_path(tail);
        text.push_str(&normalise_path(path));
        text.push_str(&encode_query_fragment(query_fragment));
        Ok(Url {
            text,
            https,
            host,
            host_end,
            path_start,
            port,
        })
    }

    /// The URL as the standard writes it.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.https {
            "https"
        } else {
            "http"
        }
    }

    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The host as written in the URL (an IPv6 address in brackets).
    pub fn host_str(&self) -> &str {
        let start = self.text[..self.host_end]
            .rfind('@')
            .map_or(self.scheme().len() + 3, |i| i + 1);
        &self.text[start..self.host_end]
    }

    /// The port written, when it is not the scheme's default.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The port to connect to: the one written, else the scheme's default.
    pub fn port_or_default(&self) -> u16 {
        self.port.unwrap_or(if self.https { 443 } else { 80 })
    }

    /// The path and the query (what an HTTP request line names), without the fragment.
    pub fn path_and_query(&self) -> &str {
        let pq = &self.text[self.path_start..];
        pq.split_once('#').map_or(pq, |(p, _)| p)
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<Url> for String {
    fn from(u: Url) -> String {
        u.text
    }
}

/// The input as the standard reads it: C0 controls and spaces trimmed at both ends, tabs and
/// newlines removed.
fn clean(input: &str) -> String {
    input
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect()
}

/// Whether `s` starts with a scheme (`alpha *(alnum / + / - / .) :`).
fn has_scheme(s: &str) -> bool {
    let Some(colon) = s.find(':') else {
        return false;
    };
    let name = &s[..colon];
    name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// `http:` or `https:` (any case) at the start of `s`: whether it is https, and the rest.
fn scheme(s: &str) -> Option<(bool, &str)> {
    if !has_scheme(s) {
        return None;
    }
    let (name, rest) = s.split_once(':')?;
    if name.eq_ignore_ascii_case("http") {
        Some((false, rest))
    } else if name.eq_ignore_ascii_case("https") {
        Some((true, rest))
    } else {
        None
    }
}

/// `host[:port]`, the port's text apart (the colon inside an IPv6 address's brackets is not it).
fn split_port(hostport: &str) -> Result<(&str, Option<&str>)> {
    if hostport.starts_with('[') {
        let close = hostport.find(']').ok_or(Error::Invalid(
            "an IPv6 address without its closing bracket",
        ))?;
        let (h, after) = hostport.split_at(close + 1);
        return match after.strip_prefix(':') {
            Some(p) => Ok((h, Some(p))),
            None if after.is_empty() => Ok((h, None)),
            None => Err(Error::Invalid(
                "text after an IPv6 address's closing bracket",
            )),
        };
    }
    Ok(match hostport.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (hostport, None),
    })
}

/// The host, as the standard reads it for http and https.
fn parse_host(text: &str) -> Result<Host> {
    if text.is_empty() {
        return Err(Error::Invalid("empty host"));
    }
    if let Some(inner) = text.strip_prefix('[') {
        let inner = inner.strip_suffix(']').unwrap_or(inner);
        return inner
            .parse::<Ipv6Addr>()
            .map(Host::Ipv6)
            .map_err(|_| Error::Invalid("invalid IPv6 address"));
    }
    if !text.is_ascii() {
        return Err(Error::Invalid(
            "a host name outside ASCII (write it in punycode, xn--...)",
        ));
    }
    let decoded = percent_decode(text);
    if !decoded.is_ascii() {
        return Err(Error::Invalid(
            "a host name outside ASCII (write it in punycode, xn--...)",
        ));
    }
    let name = String::from_utf8(decoded)
        .map_err(|_| Error::Invalid("a host that is not UTF-8"))?
        .to_ascii_lowercase();
    if name.is_empty() {
        return Err(Error::Invalid("empty host"));
    }
    if name.bytes().any(|b| {
        b <= b' '
            || b == 0x7f
            || matches!(
                b,
                b'#' | b'%'
                    | b'/'
                    | b':'
                    | b'<'
                    | b'>'
                    | b'?'
                    | b'@'
                    | b'['
                    | b'\\'
                    | b']'
                    | b'^'
                    | b'|'
            )
    }) {
        return Err(Error::Invalid("invalid character in the host"));
    }
    if ends_in_a_number(&name) {
        return ipv4(&name).map(Host::Ipv4);
    }
    Ok(Host::Domain(name))
}

/// The standard's test for a host that must be an IPv4 address: its last label (a trailing dot
/// aside) is a number.
fn ends_in_a_number(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    let last = name.rsplit('.').next().unwrap_or("");
    !last.is_empty()
        && (last.bytes().all(|b| b.is_ascii_digit())
            || ipv4_number(last).is_some() && (last.starts_with("0x") || last.starts_with("0X")))
}

/// One part of an IPv4 address: decimal, `0x` hex or `0` octal.
fn ipv4_number(p: &str) -> Option<u64> {
    let (digits, radix) = if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
        (h, 16)
    } else if p.len() > 1 && p.starts_with('0') {
        (&p[1..], 8)
    } else {
        (p, 10)
    };
    if digits.is_empty() {
        return Some(0);
    }
    if !digits.bytes().all(|b| (b as char).is_digit(radix)) {
        return None;
    }
    // Longer than any 32-bit value: kept as too large rather than overflowing.
    Some(u64::from_str_radix(digits, radix).unwrap_or(u64::MAX))
}

fn ipv4(name: &str) -> Result<Ipv4Addr> {
    let name = name.strip_suffix('.').unwrap_or(name);
    let parts: Vec<&str> = name.split('.').collect();
    let bad = Error::Invalid("invalid IPv4 address");
    if parts.len() > 4 || parts.iter().any(|p| p.is_empty()) {
        return Err(bad);
    }
    let nums = parts
        .iter()
        .map(|p| ipv4_number(p))
        .collect::<Option<Vec<u64>>>()
        .ok_or(bad.clone())?;
    let (last, first) = nums.split_last().ok_or(bad.clone())?;
    if first.iter().any(|&n| n > 255) || *last >= 256u64.pow(5 - nums.len() as u32) {
        return Err(bad);
    }
    let mut v = *last;
    for (i, &n) in first.iter().enumerate() {
        v += n << (8 * (3 - i));
    }
    Ok(Ipv4Addr::from(v as u32))
}

fn write_host(out: &mut String, host: &Host) {
    match host {
        Host::Domain(d) => out.push_str(d),
        Host::Ipv4(a) => out.push_str(&a.to_string()),
        Host::Ipv6(a) => {
            // The standard's form: the first longest run of two or more zero pieces as `::`,
            // every piece in lower-case hex (an IPv4-mapped address too).
            let p = a.segments();
            let (mut best, mut best_len, mut i) = (8, 1, 0);
            while i < 8 {
                let run = p[i..].iter().take_while(|&&x| x == 0).count();
                if run > best_len {
                    (best, best_len) = (i, run);
                }
                i += run.max(1);
            }
            out.push('[');
            let mut i = 0;
            while i < 8 {
                if i == best {
                    out.push_str(if i == 0 { "::" } else { ":" });
                    i += best_len;
                    continue;
                }
                out.push_str(&format!("{:x}", p[i]));
                if i < 7 {
                    out.push(':');
                }
                i += 1;
            }
            out.push(']');
        }
    }
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// `path` and what follows it (`?...` and/or `#...`).
fn split_path(s: &str) -> (&str, &str) {
    s.split_at(s.find(['?', '#']).unwrap_or(s.len()))
}

/// A path-and-query's path and its query (without `?`).
fn split_query(pq: &str) -> (&str, Option<&str>) {
    match pq.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (pq, None),
    }
}

/// Which characters a part percent-encodes besides C0 controls, space and everything outside
/// ASCII (the standard's encode sets).
const PATH: &[u8] = b"\"#<>?`{}";
const QUERY: &[u8] = b"\"#<>'";
const FRAGMENT: &[u8] = b"\"<>`";
const USERINFO: &[u8] = b"\"#<>?`{}/:;=@[\\]^|";

fn encode_into(out: &mut String, s: &str, set: &[u8]) {
    for &b in s.as_bytes() {
        if b <= b' ' || b >= 0x7f || set.contains(&b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
}

/// `?query#fragment` (either may be absent), encoded.
fn encode_query_fragment(s: &str) -> String {
    let mut out = String::new();
    let (qf, fragment) = match s.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (s, None),
    };
    if let Some(q) = qf.strip_prefix('?') {
        out.push('?');
        encode_into(&mut out, q, QUERY);
    }
    if let Some(f) = fragment {
        out.push('#');
        encode_into(&mut out, f, FRAGMENT);
    }
    out
}

/// The path as the standard writes it for http and https: `\` as `/`, `.` and `..` segments
/// (also percent-encoded) resolved, characters encoded; at least `/`.
fn normalise_path(path: &str) -> String {
    let mut segs: Vec<String> = Vec::new();
    let path = path.strip_prefix(['/', '\\']).unwrap_or(path);
    let parts: Vec<&str> = path.split(['/', '\\']).collect();
    for (i, seg) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let lower = seg.to_ascii_lowercase();
        let single = matches!(lower.as_str(), "." | "%2e");
        let double = matches!(lower.as_str(), ".." | ".%2e" | "%2e." | "%2e%2e");
        if double {
            segs.pop();
            if last {
                segs.push(String::new());
            }
        } else if single {
            if last {
                segs.push(String::new());
            }
        } else {
            let mut e = String::new();
            encode_into(&mut e, seg, PATH);
            segs.push(e);
        }
    }
    let mut out = String::new();
    for s in &segs {
        out.push('/');
        out.push_str(s);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests;
