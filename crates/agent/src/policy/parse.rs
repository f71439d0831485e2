//! Reading a policy document: [`Policy::parse`] checks every field against what its declaration
//! ([`super::schema`]) accepts and names each bad one; what is missing takes its default, what
//! is unknown is reported. Here are the readers of each kind of value ([`Obj`]) and the rules
//! that tie fields together; which field is read how is the declaration's.
#![forbid(unsafe_code)]

use super::field::Section;
use super::{FieldError, HeapThreshold, Parsed, Policy, PolicyError, MAX_DOCUMENT_BYTES};
use serde_json::{Map, Value};
use std::ops::RangeInclusive;

impl Policy {
    /// Parse and validate a policy document. Missing fields take their default; unknown fields
    /// are returned in [`Parsed::unknown`]; every bad field is named in the error.
    pub fn parse(text: &[u8]) -> Result<Parsed, PolicyError> {
        if text.len() > MAX_DOCUMENT_BYTES {
            return Err(PolicyError::TooBig {
                size: text.len(),
                max: MAX_DOCUMENT_BYTES,
            });
        }
        let v: Value = serde_json::from_slice(text).map_err(|e| {
            match super::locate::line_column_offset(text, e.line(), e.column()) {
                Some(at) => PolicyError::Syntax(format!("{e} (byte {at})")),
                None => PolicyError::Syntax(e.to_string()),
            }
        })?;
        let Value::Object(root) = v else {
            return Err(PolicyError::Syntax(format!(
                "the top level is {}",
                kind(&v)
            )));
        };
        let mut cx = Cx::default();
        let mut r = Obj::new(&root, "");
        let p = Policy::read_fields(&mut r, &mut cx, Policy::default());
        r.finish(&mut cx);
        // Cross-field rules.
        if p.upload.backoff_cap_ms < p.upload.backoff_base_ms {
            cx.err(
                "upload.backoff_cap_ms",
                format!(
                    "{} is below upload.backoff_base_ms {}",
                    p.upload.backoff_cap_ms, p.upload.backoff_base_ms
                ),
            );
        }
        match (p.issued_at_s, p.expires_at_s) {
            (Some(_), None) => cx.err(
                "issued_at_s",
                "is given without expires_at_s; a signed policy says both",
            ),
            (None, Some(_)) => cx.err(
                "expires_at_s",
                "is given without issued_at_s; a signed policy says both",
            ),
            (Some(i), Some(e)) if e <= i => {
                cx.err("expires_at_s", format!("{e} is not after issued_at_s {i}"))
            }
            _ => {}
        }
        // Which URLs the document leaves out (as opposed to naming them, null included).
        let names = |section: &str| {
            root.get(section)
                .and_then(Value::as_object)
                .is_some_and(|m| m.contains_key("url"))
        };
        let left_out = [("remote", "remote.url"), ("upload", "upload.url")]
            .into_iter()
            .filter(|(s, _)| !names(s))
            .map(|(_, f)| f)
            .collect();
        if cx.errors.is_empty() {
            Ok(Parsed {
                policy: p,
                unknown: cx.unknown,
                left_out,
            })
        } else {
            let mut errors = cx.errors;
            for e in &mut errors {
                e.at = super::locate::value_offset(text, &e.field);
            }
            Err(PolicyError::Invalid(errors))
        }
    }

    /// The policy as compact JSON (the form cached on disk and shown in `status.json`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// What JSON type `v` is, for an error ("expected ..., found a string"); the spool's readers
/// say it the same way.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Errors and unknown fields collected while reading one document.
#[derive(Default)]
pub(crate) struct Cx {
    errors: Vec<FieldError>,
    unknown: Vec<String>,
}

impl Cx {
    fn err(&mut self, field: impl Into<String>, what: impl Into<String>) {
        self.errors.push(FieldError {
            field: field.into(),
            what: what.into(),
            at: None,
        });
    }
}

/// One JSON object being read: remembers which keys were used so the rest can be reported.
pub(crate) struct Obj<'a> {
    map: Option<&'a Map<String, Value>>,
    path: String,
    used: Vec<&'static str>,
}

impl<'a> Obj<'a> {
    fn new(map: &'a Map<String, Value>, path: &str) -> Self {
        Obj {
            map: Some(map),
            path: path.to_string(),
            used: Vec::new(),
        }
    }

    fn name(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.used.push(key);
        self.map.and_then(|m| m.get(key))
    }

    /// A nested object; a missing one reads as all defaults, a non-object is an error.
    pub(crate) fn section(&mut self, cx: &mut Cx, key: &'static str) -> Obj<'a> {
        let path = self.name(key);
        match self.get(key) {
            None => Obj {
                map: None,
                path,
                used: Vec::new(),
            },
            Some(Value::Object(m)) => Obj {
                map: Some(m),
                path,
                used: Vec::new(),
            },
            Some(v) => {
                cx.err(
                    path.clone(),
                    format!("expected an object, found {}", kind(v)),
                );
                Obj {
                    map: None,
                    path,
                    used: Vec::new(),
                }
            }
        }
    }

    pub(crate) fn finish(self, cx: &mut Cx) {
        if let Some(m) = self.map {
            for k in m.keys() {
                if !self.used.iter().any(|u| u == k) {
                    cx.unknown.push(self.name(k));
                }
            }
        }
    }

    pub(crate) fn u64(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
        def: u64,
        range: RangeInclusive<u64>,
    ) -> u64 {
        let Some(v) = self.get(key) else { return def };
        let name = self.name(key);
        match v.as_u64() {
            Some(n) if range.contains(&n) => n,
            Some(n) => {
                cx.err(
                    name,
                    format!("{n} is out of range {}..={}", range.start(), range.end()),
                );
                def
            }
            None => {
                let what = match v {
                    Value::Number(n) => format!(
                        "{n} is not a whole number in range {}..={}",
                        range.start(),
                        range.end()
                    ),
                    _ => format!("expected a whole number, found {}", kind(v)),
                };
                cx.err(name, what);
                def
            }
        }
    }

    /// A whole number in `range`, or null (`None`); `def` when missing.
    pub(crate) fn opt_u64(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
        def: Option<u64>,
        range: RangeInclusive<u64>,
    ) -> Option<u64> {
        match self.map.and_then(|m| m.get(key)) {
            None => {
                self.used.push(key);
                def
            }
            Some(Value::Null) => {
                self.used.push(key);
                None
            }
            Some(_) => Some(self.u64(cx, key, 0, range)),
        }
    }

    pub(crate) fn u32(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
        def: u32,
        range: RangeInclusive<u32>,
    ) -> u32 {
        let r = u64::from(*range.start())..=u64::from(*range.end());
        // In range means it fits.
        u32::try_from(self.u64(cx, key, u64::from(def), r)).unwrap_or(def)
    }

    pub(crate) fn bool(&mut self, cx: &mut Cx, key: &'static str, def: bool) -> bool {
        match self.get(key) {
            None => def,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                cx.err(
                    self.name(key),
                    format!("expected true or false, found {}", kind(v)),
                );
                def
            }
        }
    }

    pub(crate) fn choice<T: Copy>(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
        def: T,
        options: &[(&str, T)],
    ) -> T {
        let Some(v) = self.get(key) else { return def };
        let names: Vec<String> = options.iter().map(|(n, _)| format!("\"{n}\"")).collect();
        match v {
            Value::String(s) => match options.iter().find(|(n, _)| n == s) {
                Some((_, t)) => *t,
                None => {
                    cx.err(
                        self.name(key),
                        format!("\"{s}\" is not one of {}", names.join(", ")),
                    );
                    def
                }
            },
            _ => {
                cx.err(
                    self.name(key),
                    format!("expected one of {}, found {}", names.join(", "), kind(v)),
                );
                def
            }
        }
    }

    /// A URL the agent may contact, of at most `max` bytes, or null.
    pub(crate) fn url(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
        def: Option<String>,
        max: usize,
    ) -> Option<String> {
        match self.get(key) {
            None => def,
            Some(Value::Null) => None,
            Some(Value::String(s)) if s.len() > max => {
                cx.err(
                    self.name(key),
                    format!("is {} bytes long, more than {max}", s.len()),
                );
                def
            }
            Some(Value::String(s)) => match super::url::check_url(s) {
                Ok(_) => Some(s.clone()),
                Err(why) => {
                    cx.err(
                        self.name(key),
                        format!("\"{}\" {why}", s.chars().take(64).collect::<String>()),
                    );
                    def
                }
            },
            Some(v) => {
                cx.err(
                    self.name(key),
                    format!("expected a URL string or null, found {}", kind(v)),
                );
                def
            }
        }
    }

    pub(crate) fn thresholds(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
        def: Vec<HeapThreshold>,
    ) -> Vec<HeapThreshold> {
        let Some(v) = self.get(key) else {
            return def;
        };
        let name = self.name(key);
        let Value::Array(items) = v else {
            cx.err(
                name,
                format!("expected an array of tiers, found {}", kind(v)),
            );
            return def;
        };
        let count = HeapThreshold::COUNT;
        if !count.contains(&items.len()) {
            cx.err(
                name,
                format!(
                    "has {} tiers, expected {}..={}",
                    items.len(),
                    count.start(),
                    count.end()
                ),
            );
            return def;
        }
        let before = cx.errors.len();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = format!("{name}[{i}]");
            let Value::Object(m) = item else {
                cx.err(path, format!("expected an object, found {}", kind(item)));
                continue;
            };
            let mut o = Obj::new(m, &path);
            let min = o.u64(
                cx,
                "min_max_heap_mb",
                u64::MAX,
                HeapThreshold::MIN_MAX_HEAP_MB,
            );
            let pct = o.u64(cx, "percent", u64::MAX, HeapThreshold::PERCENT);
            if o.map.is_some_and(|m| !m.contains_key("min_max_heap_mb")) {
                cx.err(o.name("min_max_heap_mb"), "is missing");
            }
            if o.map.is_some_and(|m| !m.contains_key("percent")) {
                cx.err(o.name("percent"), "is missing");
            }
            o.finish(cx);
            out.push(HeapThreshold {
                min_max_heap_mb: min,
                percent: pct,
            });
        }
        if cx.errors.len() > before {
            return def;
        }
        if !out.iter().any(|t| t.min_max_heap_mb == 0) {
            cx.err(
                name,
                "needs a tier with min_max_heap_mb 0, so every heap size has a threshold",
            );
            return def;
        }
        out
    }
}
