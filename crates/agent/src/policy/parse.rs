//! Reading a policy document: [`Policy::parse`] checks every field against its range and
//! names each bad one; what is missing takes its default, what is unknown is reported.
#![forbid(unsafe_code)]

use super::{
    AnalysisPolicy, CgroupMemoryPolicy, DeathPolicy, DumpFallback, DumpMode, DumpPolicy, FdPolicy,
    FieldError, HeapPolicy, HeapThreshold, Parsed, Policy, PolicyError, RemotePolicy, SpoolPolicy,
    StripLevel, ThreadPolicy, UploadPolicy, VmSizePolicy, MAX_DOCUMENT_BYTES,
};
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
        let v: Value =
            serde_json::from_slice(text).map_err(|e| PolicyError::Syntax(e.to_string()))?;
        let Value::Object(root) = v else {
            return Err(PolicyError::Syntax(format!(
                "the top level is {}",
                kind(&v)
            )));
        };
        let mut cx = Cx::default();
        let d = Policy::default();
        let mut r = Obj::new(&root, "");
        let p = Policy {
            version: r.u64(&mut cx, "version", d.version, 0..=(1 << 53)),
            issued_at_s: r.opt_u64(&mut cx, "issued_at_s", 0..=(1 << 40)),
            expires_at_s: r.opt_u64(&mut cx, "expires_at_s", 0..=(1 << 40)),
            poll_interval_ms: r.u64(
                &mut cx,
                "poll_interval_ms",
                d.poll_interval_ms,
                100..=600_000,
            ),
            heap: {
                let mut s = r.section(&mut cx, "heap");
                let h = &d.heap;
                let p = HeapPolicy {
                    thresholds: s.thresholds(&mut cx, "thresholds", &h.thresholds),
                    strikes: s.u32(&mut cx, "strikes", h.strikes, 1..=100),
                    ascending: s.bool(&mut cx, "ascending", h.ascending),
                    slack_percent: s.u64(&mut cx, "slack_percent", h.slack_percent, 0..=50),
                    fast_huge_percent: s.u64(
                        &mut cx,
                        "fast_huge_percent",
                        h.fast_huge_percent,
                        1..=100,
                    ),
                    fast_huge_growth_mb: s.u64(
                        &mut cx,
                        "fast_huge_growth_mb",
                        h.fast_huge_growth_mb,
                        1..=65_536,
                    ),
                };
                s.finish(&mut cx);
                p
            },
            fd: {
                let mut s = r.section(&mut cx, "fd");
                let f = &d.fd;
                let p = FdPolicy {
                    max: s.u64(&mut cx, "max", f.max, 16..=1_048_576),
                    soft_limit_percent: s.u64(
                        &mut cx,
                        "soft_limit_percent",
                        f.soft_limit_percent,
                        1..=100,
                    ),
                    strikes: s.u32(&mut cx, "strikes", f.strikes, 1..=100),
                    tolerance: s.u64(&mut cx, "tolerance", f.tolerance, 0..=100_000),
                };
                s.finish(&mut cx);
                p
            },
            threads: {
                let mut s = r.section(&mut cx, "threads");
                let t = &d.threads;
                let p = ThreadPolicy {
                    max: s.u64(&mut cx, "max", t.max, 16..=100_000),
                    huawei_legacy_max: s.u64(
                        &mut cx,
                        "huawei_legacy_max",
                        t.huawei_legacy_max,
                        16..=100_000,
                    ),
                    huawei_legacy_max_api: s.u32(
                        &mut cx,
                        "huawei_legacy_max_api",
                        t.huawei_legacy_max_api,
                        0..=100,
                    ),
                    threads_max_percent: s.u64(
                        &mut cx,
                        "threads_max_percent",
                        t.threads_max_percent,
                        1..=100,
                    ),
                    strikes: s.u32(&mut cx, "strikes", t.strikes, 1..=100),
                    tolerance: s.u64(&mut cx, "tolerance", t.tolerance, 0..=100_000),
                };
                s.finish(&mut cx);
                p
            },
            vm_size: {
                let mut s = r.section(&mut cx, "vm_size");
                let v = &d.vm_size;
                let p = VmSizePolicy {
                    max_mb_32bit: s.u64(&mut cx, "max_mb_32bit", v.max_mb_32bit, 256..=4096),
                    strikes: s.u32(&mut cx, "strikes", v.strikes, 1..=100),
                };
                s.finish(&mut cx);
                p
            },
            cgroup_memory: {
                let mut s = r.section(&mut cx, "cgroup_memory");
                let c = &d.cgroup_memory;
                let p = CgroupMemoryPolicy {
                    percent: s.u64(&mut cx, "percent", c.percent, 1..=100),
                    strikes: s.u32(&mut cx, "strikes", c.strikes, 1..=100),
                    ascending: s.bool(&mut cx, "ascending", c.ascending),
                    slack_percent: s.u64(&mut cx, "slack_percent", c.slack_percent, 0..=50),
                };
                s.finish(&mut cx);
                p
            },
            dump: {
                let mut s = r.section(&mut cx, "dump");
                let x = &d.dump;
                let p = DumpPolicy {
                    mode: s.choice(
                        &mut cx,
                        "mode",
                        x.mode,
                        &[
                            ("fork", DumpMode::Fork),
                            ("in_process", DumpMode::InProcess),
                        ],
                    ),
                    fallback: s.choice(
                        &mut cx,
                        "fallback",
                        x.fallback,
                        &[
                            ("skip", DumpFallback::Skip),
                            ("in_process", DumpFallback::InProcess),
                        ],
                    ),
                    strip_level: s.choice(
                        &mut cx,
                        "strip_level",
                        x.strip_level,
                        &[
                            ("none", StripLevel::None),
                            ("arrays", StripLevel::Arrays),
                            ("app", StripLevel::App),
                        ],
                    ),
                    keep_full: s.bool(&mut cx, "keep_full", x.keep_full),
                    child_deadline_s: s.u64(
                        &mut cx,
                        "child_deadline_s",
                        x.child_deadline_s,
                        5..=3600,
                    ),
                    once_per_process: s.bool(&mut cx, "once_per_process", x.once_per_process),
                    per_version_quota: s.u32(
                        &mut cx,
                        "per_version_quota",
                        x.per_version_quota,
                        0..=1000,
                    ),
                    quota_window_days: s.u32(
                        &mut cx,
                        "quota_window_days",
                        x.quota_window_days,
                        1..=365,
                    ),
                    min_free_disk_mb: s.u64(
                        &mut cx,
                        "min_free_disk_mb",
                        x.min_free_disk_mb,
                        0..=1_048_576,
                    ),
                    min_free_disk_heap_factor: s.u64(
                        &mut cx,
                        "min_free_disk_heap_factor",
                        x.min_free_disk_heap_factor,
                        0..=16,
                    ),
                    java_threads_max: s.u32(
                        &mut cx,
                        "java_threads_max",
                        x.java_threads_max,
                        0..=65_536,
                    ),
                };
                s.finish(&mut cx);
                p
            },
            analysis: {
                let mut s = r.section(&mut cx, "analysis");
                let a = &d.analysis;
                let p = AnalysisPolicy {
                    bitmap_min_pixels: s.u64(
                        &mut cx,
                        "bitmap_min_pixels",
                        a.bitmap_min_pixels,
                        1..=(1 << 40),
                    ),
                    big_array_bytes: s.u64(
                        &mut cx,
                        "big_array_bytes",
                        a.big_array_bytes,
                        1024..=(1 << 40),
                    ),
                    top_dominators: s.u32(&mut cx, "top_dominators", a.top_dominators, 1..=1000),
                    max_paths_per_class: s.u32(
                        &mut cx,
                        "max_paths_per_class",
                        a.max_paths_per_class,
                        1..=1000,
                    ),
                    max_attempts: s.u32(&mut cx, "max_attempts", a.max_attempts, 1..=20),
                    memory_limit_mb: s.u64(
                        &mut cx,
                        "memory_limit_mb",
                        a.memory_limit_mb,
                        32..=65_536,
                    ),
                };
                s.finish(&mut cx);
                p
            },
            spool: {
                let mut s = r.section(&mut cx, "spool");
                let x = &d.spool;
                let p = SpoolPolicy {
                    max_bytes: s.u64(&mut cx, "max_bytes", x.max_bytes, (1 << 20)..=(64 << 30)),
                    max_count: s.u32(&mut cx, "max_count", x.max_count, 1..=10_000),
                    max_age_days: s.u32(&mut cx, "max_age_days", x.max_age_days, 1..=365),
                };
                s.finish(&mut cx);
                p
            },
            death: {
                let mut s = r.section(&mut cx, "death");
                let x = &d.death;
                let p = DeathPolicy {
                    report: s.bool(&mut cx, "report", x.report),
                    max_per_day: s.u32(&mut cx, "max_per_day", x.max_per_day, 0..=1000),
                };
                s.finish(&mut cx);
                p
            },
            upload: {
                let mut s = r.section(&mut cx, "upload");
                let u = &d.upload;
                let p = UploadPolicy {
                    url: s.url(&mut cx, "url", &u.url),
                    unmetered_only: s.bool(&mut cx, "unmetered_only", u.unmetered_only),
                    daily_byte_budget: s.u64(
                        &mut cx,
                        "daily_byte_budget",
                        u.daily_byte_budget,
                        0..=(1 << 40),
                    ),
                    max_attempts: s.u32(&mut cx, "max_attempts", u.max_attempts, 1..=1000),
                    backoff_base_ms: s.u64(
                        &mut cx,
                        "backoff_base_ms",
                        u.backoff_base_ms,
                        100..=86_400_000,
                    ),
                    backoff_cap_ms: s.u64(
                        &mut cx,
                        "backoff_cap_ms",
                        u.backoff_cap_ms,
                        100..=604_800_000,
                    ),
                    timeout_ms: s.u64(&mut cx, "timeout_ms", u.timeout_ms, 100..=600_000),
                };
                s.finish(&mut cx);
                p
            },
            remote: {
                let mut s = r.section(&mut cx, "remote");
                let x = &d.remote;
                let p = RemotePolicy {
                    url: s.url(&mut cx, "url", &x.url),
                    min_refresh_hours: s.u64(
                        &mut cx,
                        "min_refresh_hours",
                        x.min_refresh_hours,
                        1..=8760,
                    ),
                    max_bytes: s.u64(
                        &mut cx,
                        "max_bytes",
                        x.max_bytes,
                        256..=(MAX_DOCUMENT_BYTES as u64),
                    ),
                    timeout_ms: s.u64(&mut cx, "timeout_ms", x.timeout_ms, 100..=120_000),
                };
                s.finish(&mut cx);
                p
            },
        };
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
            Err(PolicyError::Invalid(cx.errors))
        }
    }

    /// The policy as compact JSON (the form cached on disk and shown in `status.json`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

fn kind(v: &Value) -> &'static str {
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
struct Cx {
    errors: Vec<FieldError>,
    unknown: Vec<String>,
}

impl Cx {
    fn err(&mut self, field: impl Into<String>, what: impl Into<String>) {
        self.errors.push(FieldError {
            field: field.into(),
            what: what.into(),
        });
    }
}

/// One JSON object being read: remembers which keys were used so the rest can be reported.
struct Obj<'a> {
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
    fn section(&mut self, cx: &mut Cx, key: &'static str) -> Obj<'a> {
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

    fn finish(self, cx: &mut Cx) {
        if let Some(m) = self.map {
            for k in m.keys() {
                if !self.used.iter().any(|u| u == k) {
                    cx.unknown.push(self.name(k));
                }
            }
        }
    }

    fn u64(&mut self, cx: &mut Cx, key: &'static str, def: u64, range: RangeInclusive<u64>) -> u64 {
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

    /// A whole number in `range`, or null / missing (`None`).
    fn opt_u64(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
        range: RangeInclusive<u64>,
    ) -> Option<u64> {
        match self.map.and_then(|m| m.get(key)) {
            None | Some(Value::Null) => {
                self.used.push(key);
                None
            }
            Some(_) => Some(self.u64(cx, key, 0, range)),
        }
    }

    fn u32(&mut self, cx: &mut Cx, key: &'static str, def: u32, range: RangeInclusive<u32>) -> u32 {
        let r = u64::from(*range.start())..=u64::from(*range.end());
        // In range means it fits.
        u32::try_from(self.u64(cx, key, u64::from(def), r)).unwrap_or(def)
    }

    fn bool(&mut self, cx: &mut Cx, key: &'static str, def: bool) -> bool {
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

    fn choice<T: Copy>(
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

    fn url(&mut self, cx: &mut Cx, key: &'static str, def: &Option<String>) -> Option<String> {
        match self.get(key) {
            None => def.clone(),
            Some(Value::Null) => None,
            Some(Value::String(s)) if s.len() > 2048 => {
                cx.err(
                    self.name(key),
                    format!("is {} bytes long, more than 2048", s.len()),
                );
                def.clone()
            }
            Some(Value::String(s)) => match crate::upload::tus::check_url(s) {
                Ok(_) => Some(s.clone()),
                Err(why) => {
                    cx.err(
                        self.name(key),
                        format!("\"{}\" {why}", s.chars().take(64).collect::<String>()),
                    );
                    def.clone()
                }
            },
            Some(v) => {
                cx.err(
                    self.name(key),
                    format!("expected a URL string or null, found {}", kind(v)),
                );
                def.clone()
            }
        }
    }

    fn thresholds(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
        def: &[HeapThreshold],
    ) -> Vec<HeapThreshold> {
        let Some(v) = self.get(key) else {
            return def.to_vec();
        };
        let name = self.name(key);
        let Value::Array(items) = v else {
            cx.err(
                name,
                format!("expected an array of tiers, found {}", kind(v)),
            );
            return def.to_vec();
        };
        if items.is_empty() || items.len() > 8 {
            cx.err(name, format!("has {} tiers, expected 1..=8", items.len()));
            return def.to_vec();
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
            let min = o.u64(cx, "min_max_heap_mb", u64::MAX, 0..=65_536);
            let pct = o.u64(cx, "percent", u64::MAX, 1..=100);
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
            return def.to_vec();
        }
        if !out.iter().any(|t| t.min_max_heap_mb == 0) {
            cx.err(
                name,
                "needs a tier with min_max_heap_mb 0, so every heap size has a threshold",
            );
            return def.to_vec();
        }
        out
    }
}
