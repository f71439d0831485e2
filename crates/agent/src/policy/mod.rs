//! The policy: every threshold and limit the agent and its helpers obey, as one versioned JSON
//! document.
//!
//! Owns the schema (`schema`: each field declared once, in one `schema!` table, with its
//! name, type, default, accepted values and doc; the structs, `Default`, validation and the
//! reference `config/POLICY.md` come from it, by `field`'s macro), parsing and the rules
//! between fields (`parse`), each module's config built from the policy ([`configs`]:
//! `From<&Policy>` for the spool's quotas, the dump guards, the uploader, the analyser and its
//! child, the stripper's level and the trigger machines), the rules for the URLs the agent
//! contacts ([`url`], shared with the uploader), the last-good copy on disk ([`cache`]) and the
//! signed refresh from a remote URL ([`remote`]).
//!
//! To add a field: one line in `schema.rs`'s table, the field in `config/policy.default.json`
//! (a test checks the file against the table), the reference regenerated
//! (`OOMGUARD_BLESS=1 cargo test -p oomguard --lib policy::reference`), and, where a module
//! obeys it, its mapping in `configs.rs`.
//!
//! Invariants:
//! - `Policy::default()` is exactly `config/policy.default.json`, which names every declared
//!   field and nothing else (tests check both).
//! - Modules keep no defaults of their own: their configs come from a policy through
//!   [`configs`], and a module `Default` that stays is the default policy's.
//! - A [`Policy`] value that exists has passed [`Policy::parse`]'s validation: every field is in
//!   its documented range. Bad documents are rejected as a whole, with every bad field named
//!   with the byte its value starts at (`heap.strikes: 0 is out of range 1..=100 (byte 21)`; a
//!   field left out, the byte of the object that lacks it: `locate`), and a syntax error with
//!   its line, column and byte; nothing is half-applied.
//! - Unknown fields are reported (so they can be logged) and otherwise ignored, so an older agent
//!   reads a newer policy.
//! - Missing fields take their default, so a policy may say only what it changes; except that a
//!   remote policy must name both URLs (see [`remote`]).
//! - A policy URL is `https://`, or plain `http://` to a loopback address only.
//! - Nothing here triggers a dump or touches the VM, and nothing here calls into `upload` (it
//!   names its config type, to build it).
#![forbid(unsafe_code)]

pub mod cache;
pub mod configs;
mod field;
pub(crate) mod locate;
pub(crate) mod parse;
#[cfg(test)]
mod reference;
pub mod remote;
mod schema;
pub mod url;

pub use configs::upload_config;
pub use schema::*;

/// The default policy, as shipped in the crate.
pub const DEFAULT_JSON: &str = include_str!("../../../../config/policy.default.json");

/// The largest policy document accepted, from any source.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// Errors of this module. Each says what was wrong and what the agent did about it (the caller
/// keeps the last good policy on every error).
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The document is not JSON (truncated, bad syntax) or not an object.
    #[error("policy is not a valid JSON object: {0}; the last good policy stays active")]
    Syntax(String),
    /// One or more fields have a wrong type or are out of range.
    #[error("policy rejected, the last good policy stays active: {}", join(.0))]
    Invalid(Vec<FieldError>),
    /// The document is larger than allowed.
    #[error("policy is {size} bytes, more than the limit of {max}; rejected, the last good policy stays active")]
    TooBig { size: usize, max: usize },
    /// A remote policy breaks a rule of remote policies: not dated, expired, issued in the
    /// future, or leaving out one of its URLs.
    #[error("remote policy {0}; rejected, the last good policy stays active")]
    Remote(String),
    /// A signature was required and is missing, malformed or does not match the body.
    #[error("policy signature {0}; rejected, the last good policy stays active")]
    Signature(String),
    /// The document's version is older than (or equal to, with other content) the active one.
    #[error("policy version {got} is not newer than the active version {active}; rejected, the last good policy stays active")]
    NotNewer { got: u64, active: u64 },
    /// The remote fetch failed.
    #[error("fetching policy from {url}: {what}; the last good policy stays active")]
    Fetch { url: String, what: String },
    /// Reading or writing the last-good cache failed.
    #[error("{path}: {what}")]
    Io { path: String, what: String },
}

fn join(v: &[FieldError]) -> String {
    v.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// One rejected field: its dotted path and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path, e.g. `heap.thresholds[1].percent`.
    pub field: String,
    /// What was wrong, e.g. `0 is out of range 1..=100`.
    pub what: String,
    /// The byte offset of the field's value in the document, where it is in it.
    pub at: Option<usize>,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.what)?;
        match self.at {
            Some(at) => write!(f, " (byte {at})"),
            None => Ok(()),
        }
    }
}

/// A parsed, valid policy plus the unknown fields it carried (to be logged, then ignored).
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub policy: Policy,
    /// Dotted paths of fields this agent does not know.
    pub unknown: Vec<String>,
    /// Of `remote.url` and `upload.url`, those the document leaves out (rather than naming
    /// them, null included): a remote policy must name both.
    pub left_out: Vec<&'static str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The errors of a rejected document as `field: what`; each byte offset an error names is
    /// checked to be where that field's value starts (the value read from there is the one at
    /// the field's path).
    fn bad(json: &str) -> Vec<String> {
        match Policy::parse(json.as_bytes()) {
            Err(PolicyError::Invalid(v)) => v
                .iter()
                .map(|e| {
                    if let Some(at) = e.at {
                        let here = serde_json::Deserializer::from_str(&json[at..])
                            .into_iter::<serde_json::Value>()
                            .next()
                            .unwrap_or_else(|| panic!("no value at byte {at} for {e}"))
                            .unwrap_or_else(|x| panic!("{e}: byte {at}: {x}"));
                        assert_eq!(Some(here), value_at(json, &e.field), "{e}");
                        assert!(e.to_string().ends_with(&format!(" (byte {at})")), "{e}");
                    }
                    format!("{}: {}", e.field, e.what)
                })
                .collect(),
            other => panic!("expected Invalid for {json}, got {other:?}"),
        }
    }

    /// The value at a dotted path (`a.b[2].c`) of a document, by serde_json's own reading.
    fn value_at(json: &str, path: &str) -> Option<serde_json::Value> {
        let mut v: serde_json::Value = serde_json::from_str(json).ok()?;
        for part in path.split('.') {
            let (key, idx) = match part.split_once('[') {
                Some((k, i)) => (k, Some(i.trim_end_matches(']').parse::<usize>().ok()?)),
                None => (part, None),
            };
            v = v.get(key)?.clone();
            if let Some(i) = idx {
                v = v.get(i)?.clone();
            }
        }
        Some(v)
    }

    #[test]
    fn each_bad_field_names_its_byte() {
        let doc = r#"{"poll_interval_ms":5,
  "heap": {"strikes": 0, "thresholds": [{"percent": 300}]},
  "fd": {"max": -3}}"#;
        let Err(PolicyError::Invalid(v)) = Policy::parse(doc.as_bytes()) else {
            panic!("rejected");
        };
        let at: Vec<(&str, Option<usize>)> = v.iter().map(|e| (&*e.field, e.at)).collect();
        assert_eq!(at[0], ("poll_interval_ms", Some(20)));
        assert_eq!(&doc[20..21], "5");
        let strikes = doc.find("0,").unwrap();
        assert!(at.contains(&("heap.strikes", Some(strikes))), "{at:?}");
        let max = doc.find("-3").unwrap();
        assert!(at.contains(&("fd.max", Some(max))), "{at:?}");
        assert!(v.iter().all(|e| e.at.is_some()), "{v:?}");
        // A missing field is placed at the object that lacks it.
        let tier = doc.find("{\"percent").unwrap();
        assert!(
            at.contains(&("heap.thresholds[0].min_max_heap_mb", Some(tier))),
            "{at:?}"
        );
        // The message carries it.
        let msg = PolicyError::Invalid(v).to_string();
        assert!(
            msg.contains("poll_interval_ms: 5 is out of range 100..=600000 (byte 20)"),
            "{msg}"
        );
        // A syntax error names its byte too.
        let e = Policy::parse(b"{\"version\": 2,\n \"heap\": x}").unwrap_err();
        assert!(e.to_string().contains("line 2 column 10 (byte 24)"), "{e}");
    }

    #[test]
    fn default_equals_the_shipped_file() {
        let p = Policy::parse(DEFAULT_JSON.as_bytes()).unwrap();
        assert!(p.unknown.is_empty(), "{:?}", p.unknown);
        assert_eq!(p.policy, Policy::default());
        // And the serialised form round-trips.
        let again = Policy::parse(Policy::default().to_json().as_bytes()).unwrap();
        assert_eq!(again.policy, Policy::default());
    }

    #[test]
    fn empty_object_is_all_defaults() {
        assert_eq!(Policy::parse(b"{}").unwrap().policy, Policy::default());
    }

    #[test]
    fn thresholds_by_max_heap() {
        let h = Policy::default().heap;
        assert_eq!(h.threshold_percent(1024 << 20), 80);
        assert_eq!(h.threshold_percent(512 << 20), 80);
        assert_eq!(h.threshold_percent(511 << 20), 85);
        assert_eq!(h.threshold_percent(256 << 20), 85);
        assert_eq!(h.threshold_percent(255 << 20), 90);
        assert_eq!(h.threshold_percent(64 << 20), 90);
    }

    #[test]
    fn unknown_fields_are_reported_and_ignored() {
        let p = Policy::parse(br#"{"version":7,"future":1,"heap":{"strikes":4,"colour":"red"}}"#)
            .unwrap();
        assert_eq!(p.policy.version, 7);
        assert_eq!(p.policy.heap.strikes, 4);
        assert_eq!(
            p.unknown,
            vec!["heap.colour".to_string(), "future".to_string()]
        );
    }

    #[test]
    fn each_bad_field_is_named() {
        let e = bad(
            r#"{"poll_interval_ms":5,"heap":{"strikes":0,"ascending":"yes"},"dump":{"mode":"magic"},"fd":{"max":-3}}"#,
        );
        assert_eq!(
            e,
            vec![
                "poll_interval_ms: 5 is out of range 100..=600000",
                "heap.strikes: 0 is out of range 1..=100",
                "heap.ascending: expected true or false, found a string",
                "fd.max: -3 is not a whole number in range 16..=1048576",
                "dump.mode: \"magic\" is not one of \"fork\", \"in_process\"",
            ]
        );
    }

    #[test]
    fn the_cgroup_memory_section_is_read_and_checked() {
        let p = Policy::parse(
            br#"{"cgroup_memory":{"percent":70,"strikes":2,"ascending":false,"slack_percent":5}}"#,
        )
        .unwrap()
        .policy;
        assert_eq!(
            p.cgroup_memory,
            CgroupMemoryPolicy {
                percent: 70,
                strikes: 2,
                ascending: false,
                slack_percent: 5
            }
        );
        assert_eq!(
            bad(r#"{"cgroup_memory":{"percent":0,"strikes":101,"slack_percent":51,"x":1}}"#),
            vec![
                "cgroup_memory.percent: 0 is out of range 1..=100",
                "cgroup_memory.strikes: 101 is out of range 1..=100",
                "cgroup_memory.slack_percent: 51 is out of range 0..=50",
            ]
        );
    }

    #[test]
    fn wrong_types_and_shapes() {
        assert_eq!(
            bad(r#"{"heap":3}"#),
            vec!["heap: expected an object, found a number"]
        );
        assert_eq!(
            bad(r#"{"version":"2"}"#),
            vec!["version: expected a whole number, found a string"]
        );
        assert_eq!(
            bad(r#"{"poll_interval_ms":1.5}"#),
            vec!["poll_interval_ms: 1.5 is not a whole number in range 100..=600000"]
        );
        assert_eq!(
            bad(r#"{"remote":{"url":"ftp://x"}}"#),
            vec!["remote.url: \"ftp://x\" is not an http:// or https:// URL"]
        );
        assert_eq!(
            bad(r#"{"heap":{"thresholds":[{"min_max_heap_mb":256,"percent":101}]}}"#),
            vec!["heap.thresholds[0].percent: 101 is out of range 1..=100"]
        );
        assert_eq!(
            bad(r#"{"heap":{"thresholds":[{"min_max_heap_mb":256,"percent":80}]}}"#),
            vec!["heap.thresholds: needs a tier with min_max_heap_mb 0, so every heap size has a threshold"]
        );
        assert_eq!(
            bad(r#"{"upload":{"backoff_base_ms":5000,"backoff_cap_ms":1000}}"#),
            vec!["upload.backoff_cap_ms: 1000 is below upload.backoff_base_ms 5000"]
        );
    }

    /// A policy URL in plain http is only for loopback (tests, a collector on the device); any
    /// other host is reached over https, for both URLs. The signed times come as a pair.
    #[test]
    fn plain_http_off_loopback_and_half_dated_policies_are_rejected() {
        let mut failures = Vec::new();
        for (json, want) in [
            (
                r#"{"remote":{"url":"http://policy.example.com/p.json"}}"#,
                "remote.url: \"http://policy.example.com/p.json\" is plain http to a host that is not loopback; use https://",
            ),
            (
                r#"{"upload":{"url":"http://vm:8080\\@127.0.0.1/files/"}}"#,
                "upload.url: \"http://vm:8080\\@127.0.0.1/files/\" is plain http to a host that is not loopback; use https://",
            ),
            (
                r#"{"issued_at_s":1795000000}"#,
                "issued_at_s: is given without expires_at_s; a signed policy says both",
            ),
            (
                r#"{"issued_at_s":1795000000,"expires_at_s":1795000000}"#,
                "expires_at_s: 1795000000 is not after issued_at_s 1795000000",
            ),
        ] {
            match Policy::parse(json.as_bytes()) {
                Err(PolicyError::Invalid(v))
                    if v.len() == 1
                        && format!("{}: {}", v[0].field, v[0].what) == want
                        && v[0].at.is_some() => {}
                other => failures.push(format!("{json}: {other:?}")),
            }
        }
        for ok in [
            r#"{"remote":{"url":"http://127.0.0.1:9/p.json"},"upload":{"url":"http://[::1]:9/files/"}}"#,
            r#"{"remote":{"url":"https://policy.example.com/p.json"}}"#,
            r#"{"issued_at_s":1795000000,"expires_at_s":1795086400}"#,
        ] {
            if let Err(e) = Policy::parse(ok.as_bytes()) {
                failures.push(format!("{ok}: {e}"));
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }

    #[test]
    fn syntax_errors() {
        for t in [
            &b"{\"version\": 2, \"heap\": {"[..],
            b"",
            b"[1,2]",
            b"null",
            b"\xff\xfe",
        ] {
            let e = Policy::parse(t).unwrap_err();
            assert!(matches!(e, PolicyError::Syntax(_)), "{e}");
            assert!(e.to_string().contains("last good policy stays active"));
        }
        let big = vec![b' '; MAX_DOCUMENT_BYTES + 1];
        assert!(matches!(
            Policy::parse(&big),
            Err(PolicyError::TooBig { .. })
        ));
    }

    /// `expires_at_s` alone is as half-dated as `issued_at_s` alone.
    #[test]
    fn an_expiry_without_an_issue_time_is_rejected() {
        assert_eq!(
            bad(r#"{"expires_at_s":1795086400}"#),
            vec!["expires_at_s: is given without issued_at_s; a signed policy says both"]
        );
    }

    /// A URL of 2,048 bytes is read; one of 2,049 is refused by its length.
    #[test]
    fn urls_are_at_most_2048_bytes() {
        let url = |len: usize| {
            let head = "https://policy.example.com/";
            format!("{head}{}", "p".repeat(len - head.len()))
        };
        let doc = |u: &str| format!(r#"{{"remote":{{"url":"{u}"}}}}"#);
        let p = Policy::parse(doc(&url(2048)).as_bytes()).unwrap().policy;
        assert_eq!(p.remote.url.as_deref(), Some(url(2048).as_str()));
        assert_eq!(
            bad(&doc(&url(2049))),
            vec!["remote.url: is 2049 bytes long, more than 2048"]
        );
    }

    /// Heap tiers: 1..=8 of them.
    #[test]
    fn heap_tiers_number_one_to_eight() {
        let tiers = |n: u64| {
            let t: Vec<String> = (0..n)
                .map(|i| format!(r#"{{"min_max_heap_mb":{},"percent":{}}}"#, i * 64, 90 - i))
                .collect();
            format!(r#"{{"heap":{{"thresholds":[{}]}}}}"#, t.join(","))
        };
        for n in [1, 8] {
            let p = Policy::parse(tiers(n).as_bytes()).unwrap().policy;
            assert_eq!(p.heap.thresholds.len(), n as usize);
        }
        assert_eq!(
            bad(&tiers(9)),
            vec!["heap.thresholds: has 9 tiers, expected 1..=8"]
        );
        assert_eq!(
            bad(&tiers(0)),
            vec!["heap.thresholds: has 0 tiers, expected 1..=8"]
        );
    }

    /// The spool holds at least 1 MiB.
    #[test]
    fn the_spool_is_at_least_one_mib() {
        let doc = |n: u64| format!(r#"{{"spool":{{"max_bytes":{n}}}}}"#);
        let p = Policy::parse(doc(1 << 20).as_bytes()).unwrap().policy;
        assert_eq!(p.spool.max_bytes, 1 << 20);
        assert_eq!(
            bad(&doc((1 << 20) - 1)),
            vec!["spool.max_bytes: 1048575 is out of range 1048576..=68719476736"]
        );
    }

    /// The backoff cap may equal the base (a constant backoff); only below it is an error.
    #[test]
    fn a_backoff_cap_equal_to_the_base_is_read() {
        let p = Policy::parse(br#"{"upload":{"backoff_base_ms":5000,"backoff_cap_ms":5000}}"#)
            .unwrap()
            .policy;
        assert_eq!(
            (p.upload.backoff_base_ms, p.upload.backoff_cap_ms),
            (5000, 5000)
        );
    }

    /// A document of exactly `MAX_DOCUMENT_BYTES` is read; one byte more is refused.
    #[test]
    fn a_document_of_exactly_the_limit_is_read() {
        let mut doc = br#"{"version":3}"#.to_vec();
        doc.resize(MAX_DOCUMENT_BYTES, b' ');
        assert_eq!(Policy::parse(&doc).unwrap().policy.version, 3);
        doc.push(b' ');
        assert!(matches!(
            Policy::parse(&doc),
            Err(PolicyError::TooBig { size, max }) if size == MAX_DOCUMENT_BYTES + 1 && max == MAX_DOCUMENT_BYTES
        ));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".{0,400}") {
            let _ = Policy::parse(s.as_bytes());
        }
    }
}
