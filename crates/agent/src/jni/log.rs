//! The library's log: a `tracing` subscriber of its own that writes each event as one line,
//! through liblog on Android (and wherever the process has liblog loaded: ART off Android), else
//! to stderr; filtered by `OOMGUARD_LOG`.
//!
//! Why not `tracing-subscriber`: the agent records no spans and needs one line per event; the
//! subscriber crate's registry, span store and formatter were about 60 KB of the shipped `.so`
//! (issue 41). What it read of `OOMGUARD_LOG` is read here the same way (a default level and
//! `target=level` directives, a target matching by prefix, the longest directive winning).
//!
//! A line: `LEVEL thread: message key=value ...` (the thread's name when it has one), with the
//! UTC time in front on stderr (liblog stamps time, level and the tag `OomGuard` itself, as
//! `adb logcat -s OomGuard` shows them).

use std::ffi::{c_char, c_int, CString};
use std::fmt::Write as _;
use std::io::Write as _;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata};

/// Set the subscriber up once for the process (a second call, or one after another subscriber
/// was set, changes nothing).
pub(super) fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = Filter::parse(std::env::var("OOMGUARD_LOG").ok().as_deref());
        let out = match Liblog::find() {
            Some(l) => Out::Liblog(l),
            None => Out::Stderr,
        };
        let _ = tracing::subscriber::set_global_default(Logger { filter, out });
    });
}

/// What `OOMGUARD_LOG` asks for: a level (`debug`) and/or `target=level` directives
/// (`info,oomguard::upload=trace`); `info` when unset, empty, or when any directive cannot be
/// read. (`EnvFilter`'s span and field directives were never read: they need `regex`.)
#[derive(Debug, PartialEq)]
pub(super) struct Filter {
    default: LevelFilter,
    /// Target prefix and level, longest prefix first.
    targets: Vec<(String, LevelFilter)>,
}

impl Filter {
    pub(super) fn parse(value: Option<&str>) -> Filter {
        let info = Filter {
            default: LevelFilter::INFO,
            targets: Vec::new(),
        };
        let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return info;
        };
        let mut f = Filter {
            default: LevelFilter::OFF,
            targets: Vec::new(),
        };
        for d in v.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            match d.split_once('=') {
                Some((t, l)) if !t.trim().is_empty() => match l.trim().parse::<LevelFilter>() {
                    Ok(l) => f.targets.push((t.trim().to_string(), l)),
                    Err(_) => return info,
                },
                Some(_) => return info,
                // A bare level is the default; a bare target turns it on at every level.
                None => match d.parse::<LevelFilter>() {
                    Ok(l) => f.default = l,
                    Err(_)
                        if d.bytes()
                            .all(|c| c.is_ascii_alphanumeric() || b"_:".contains(&c)) =>
                    {
                        f.targets.push((d.to_string(), LevelFilter::TRACE))
                    }
                    Err(_) => return info,
                },
            }
        }
        sys::order::sort_by_key(&mut f.targets, |(t, _)| std::cmp::Reverse(t.len()));
        f
    }

    /// Whether an event of `target` at `level` is written.
    pub(super) fn would_enable(&self, target: &str, level: &Level) -> bool {
        let most = self
            .targets
            .iter()
            .find(|(t, _)| target.starts_with(t.as_str()))
            .map_or(self.default, |(_, l)| *l);
        *level <= most
    }

    /// The most verbose level any target may write.
    fn max(&self) -> LevelFilter {
        self.targets
            .iter()
            .map(|(_, l)| *l)
            .fold(self.default, std::cmp::max)
    }
}

enum Out {
    Liblog(Liblog),
    Stderr,
}

struct Logger {
    filter: Filter,
    out: Out,
}

impl tracing::Subscriber for Logger {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        self.filter.would_enable(m.target(), m.level())
    }
    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.filter.max())
    }
    // The agent records no spans: they get one id and are not kept.
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}

    fn event(&self, e: &Event<'_>) {
        let level = *e.metadata().level();
        let mut line = self.line(e);
        match &self.out {
            Out::Liblog(l) => l.write(level, line),
            Out::Stderr => {
                line.push('\n');
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
            }
        }
    }
}

impl Logger {
    /// The line `event` writes of `e`: on stderr, with the time and the level in front.
    fn line(&self, e: &Event<'_>) -> String {
        let level = *e.metadata().level();
        let mut line = String::new();
        if matches!(self.out, Out::Stderr) {
            line.push_str(&utc_now());
            let _ = write!(line, " {level:>5} ");
        }
        // Threads the VM made (the app's, calling in) have no name of ours: no prefix.
        if let Some(name) = std::thread::current().name() {
            line.push_str(name);
            line.push_str(": ");
        }
        e.record(&mut Fields(&mut line));
        line
    }
}

/// Writes an event's fields: the message as it is, the others as ` key=value`.
struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_str(&mut self, f: &Field, v: &str) {
        if f.name() == "message" {
            self.0.push_str(v);
        } else {
            let _ = write!(self.0, " {}={v:?}", f.name());
        }
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        if f.name() == "message" {
            let _ = write!(self.0, "{v:?}");
        } else {
            let _ = write!(self.0, " {}={v:?}", f.name());
        }
    }
}

/// The time now, UTC, as `2026-11-28T11:00:00.123Z`.
fn utc_now() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    utc(d.as_secs(), d.subsec_millis())
}

/// `secs` since 1970 as a UTC date and time.
fn utc(secs: u64, millis: u32) -> String {
    let (y, mo, d, h, mi, s) = sys::time::civil(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{millis:03}Z")
}

/// `int __android_log_write(int prio, const char* tag, const char* text)`.
type LogWrite = unsafe extern "C" fn(c_int, *const c_char, *const c_char) -> c_int;

#[cfg(target_os = "android")]
#[link(name = "log")]
extern "C" {
    fn __android_log_write(prio: c_int, tag: *const c_char, text: *const c_char) -> c_int;
}

/// Log lines through liblog's `__android_log_write`, one call per event, with its level: on
/// Android linked (liblog is a public NDK library since API 3); elsewhere where the process has
/// liblog loaded (ART off Android: Debian's libart runs with it). A line longer than liblog's
/// limit (about 4 KB) is cut short by liblog.
#[derive(Clone, Copy)]
struct Liblog {
    write: LogWrite,
}

impl Liblog {
    /// liblog's writer: always on Android.
    #[cfg(target_os = "android")]
    fn find() -> Option<Liblog> {
        Some(Liblog {
            write: __android_log_write,
        })
    }

    /// liblog's writer, when the process has loaded it.
    #[cfg(not(target_os = "android"))]
    fn find() -> Option<Liblog> {
        // SAFETY: a lookup by a NUL-terminated name in the libraries already loaded.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__android_log_write".as_ptr()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: the symbol is liblog's `__android_log_write`, whose C signature `LogWrite`
        // spells out; a function pointer has the size of a data pointer here.
        let write = unsafe { std::mem::transmute::<*mut libc::c_void, LogWrite>(p) };
        Some(Liblog { write })
    }

    /// One line at `level`'s priority (liblog's DEBUG 3, INFO 4, WARN 5, ERROR 6); NULs are
    /// dropped, trailing newlines too, an empty line is not written.
    fn write(&self, level: Level, line: String) {
        let prio: c_int = match level {
            Level::ERROR => 6,
            Level::WARN => 5,
            Level::INFO => 4,
            _ => 3,
        };
        let mut b = line.into_bytes();
        b.retain(|&c| c != 0);
        while b.last() == Some(&b'\n') {
            b.pop();
        }
        if b.is_empty() {
            return;
        }
        let Ok(text) = CString::new(b) else {
            return;
        };
        // SAFETY: liblog's writer with a NUL-terminated tag and text that outlive the call.
        unsafe { (self.write)(prio, c"OomGuard".as_ptr(), text.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::{utc, Fields, Filter, Liblog, Logger, Out};
    use std::ffi::{c_char, c_int, CStr};
    use tracing::Level;

    #[test]
    fn log_filter_reads_levels_and_targets() {
        let on = |v: Option<&str>, target: &str, level: Level| {
            Filter::parse(v).would_enable(target, &level)
        };
        // Unset, empty or unreadable: info.
        for v in [
            None,
            Some(""),
            Some("  "),
            Some("oomguard=loud"),
            Some("=debug"),
            Some("debug,not a target!"),
        ] {
            assert!(on(v, "oomguard::agent", Level::INFO), "{v:?}");
            assert!(!on(v, "oomguard::agent", Level::DEBUG), "{v:?}");
        }
        assert!(on(Some("debug"), "oomguard::agent", Level::DEBUG));
        assert!(!on(Some("debug"), "oomguard::agent", Level::TRACE));
        assert!(!on(Some("warn"), "oomguard::agent", Level::INFO));
        assert!(on(Some("warn"), "oomguard::agent", Level::ERROR));
        assert!(!on(Some("off"), "oomguard::agent", Level::ERROR));
        let v = Some("info,oomguard::upload=trace");
        assert!(on(v, "oomguard::upload::tus", Level::TRACE));
        assert!(!on(v, "oomguard::agent", Level::DEBUG));
        assert!(on(v, "hprof::strip", Level::INFO));
        // Directives alone: nothing else is written; the longest prefix wins.
        let v = Some("oomguard=warn, oomguard::spool=debug");
        assert!(!on(v, "hprof::strip", Level::ERROR));
        assert!(!on(v, "oomguard::agent", Level::INFO));
        assert!(on(v, "oomguard::spool::quotas", Level::DEBUG));
        assert!(!on(v, "oomguard::spool::quotas", Level::TRACE));
        // A bare target: every level of it.
        assert!(on(
            Some("warn,oomguard::upload"),
            "oomguard::upload",
            Level::TRACE
        ));
        assert_eq!(
            Filter::parse(Some("warn,oomguard=debug")).max(),
            tracing::level_filters::LevelFilter::DEBUG
        );
    }

    /// The stderr time stamp, at the epoch, a leap day, and the last second of a year.
    #[test]
    fn times_are_written_as_utc_dates() {
        assert_eq!(utc(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(951_782_400 + 3_661, 7), "2000-02-29T01:01:01.007Z");
        assert_eq!(utc(1_798_761_599, 999), "2026-12-31T23:59:59.999Z");
    }

    /// An event's message comes as it is, its other fields as ` key=value`.
    #[test]
    fn an_event_is_one_line_of_its_message_and_fields() {
        use tracing::field::Visit;
        let fields = tracing::field::FieldSet::new(
            &["message", "bytes", "path"],
            tracing::callsite::Identifier(&CALLSITE),
        );
        struct Cs;
        impl tracing::callsite::Callsite for Cs {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &tracing::Metadata<'_> {
                unreachable!()
            }
        }
        static CALLSITE: Cs = Cs;
        let mut line = String::new();
        let mut v = Fields(&mut line);
        let f = |n: &str| fields.field(n).unwrap();
        v.record_debug(&f("message"), &format_args!("spool: {} kept", 3));
        v.record_u64(&f("bytes"), 42);
        v.record_str(&f("path"), "/data/x");
        assert_eq!(line, "spool: 3 kept bytes=42 path=\"/data/x\"");
    }

    /// On stderr a line starts with the UTC time and the level, right-aligned in five columns.
    #[test]
    fn stderr_lines_start_with_the_time_and_level() {
        use tracing::span::{Attributes, Id, Record};
        /// Keeps the lines the stderr logger would write.
        struct Lines(Logger, std::sync::Mutex<Vec<String>>);
        impl tracing::Subscriber for Lines {
            fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
                tracing::Subscriber::enabled(&self.0, m)
            }
            fn new_span(&self, _: &Attributes<'_>) -> Id {
                Id::from_u64(1)
            }
            fn record(&self, _: &Id, _: &Record<'_>) {}
            fn record_follows_from(&self, _: &Id, _: &Id) {}
            fn event(&self, e: &tracing::Event<'_>) {
                self.1.lock().unwrap().push(self.0.line(e));
            }
            fn enter(&self, _: &Id) {}
            fn exit(&self, _: &Id) {}
        }
        let lines = std::sync::Arc::new(Lines(
            Logger {
                filter: Filter::parse(None),
                out: Out::Stderr,
            },
            Default::default(),
        ));
        let sub = lines.clone();
        let before = std::time::SystemTime::now();
        std::thread::Builder::new()
            .name("oomguard".into())
            .spawn(move || {
                tracing::subscriber::with_default(sub, || {
                    tracing::warn!(target: "oomguard::spool", "spool full");
                    tracing::error!(target: "oomguard::agent", "dump failed");
                })
            })
            .unwrap()
            .join()
            .unwrap();
        let secs =
            |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let (from, to) = (secs(before), secs(std::time::SystemTime::now()));
        let got = lines.1.lock().unwrap().clone();
        assert_eq!(got.len(), 2, "{got:?}");
        for (line, rest) in got.iter().zip([
            "  WARN oomguard: spool full",
            " ERROR oomguard: dump failed",
        ]) {
            // The stamp is one of the seconds the test ran in (the millisecond aside).
            let stamp = &line[..24];
            assert!(
                (from..=to).any(|t| stamp[..20] == utc(t, 0)[..20]) && stamp.ends_with('Z'),
                "{line}"
            );
            assert_eq!(&line[24..], rest);
        }
    }

    /// What the fake liblog below was handed: priority, tag and text of each call.
    static WRITTEN: std::sync::Mutex<Vec<(i32, String, String)>> =
        std::sync::Mutex::new(Vec::new());

    /// A stand-in for liblog's `__android_log_write` that keeps what it is handed; only the
    /// test below writes through it.
    unsafe extern "C" fn fake_liblog(
        prio: c_int,
        tag: *const c_char,
        text: *const c_char,
    ) -> c_int {
        // SAFETY: `Liblog::write` passes NUL-terminated strings that outlive the call.
        let (tag, text) = unsafe { (CStr::from_ptr(tag), CStr::from_ptr(text)) };
        let (tag, text) = (tag.to_string_lossy(), text.to_string_lossy());
        WRITTEN
            .lock()
            .unwrap()
            .push((prio, tag.into_owned(), text.into_owned()));
        1
    }

    /// Events go to liblog one call each: liblog's priority for the level, the tag `OomGuard`,
    /// the thread's name (when it has one) and the event's fields; the filter holds back what
    /// it does not enable. A line loses its NULs and trailing newlines, and an empty one is not
    /// written.
    #[test]
    fn events_go_to_liblog_with_their_priority_tag_and_thread() {
        let liblog = Liblog { write: fake_liblog };
        let logger = move || Logger {
            filter: Filter::parse(Some("info,oomguard::upload=trace")),
            out: Out::Liblog(liblog),
        };
        let named = std::thread::Builder::new().name("oomguard".into());
        named
            .spawn(move || {
                tracing::subscriber::with_default(logger(), || {
                    tracing::error!(target: "oomguard::agent", bytes = 42, "dump failed: {}", 28);
                    tracing::warn!(target: "oomguard::agent", "spool full");
                    tracing::info!(target: "oomguard::agent", path = "/data/x", "kept");
                    tracing::debug!(target: "oomguard::agent", "held back");
                    tracing::trace!(target: "oomguard::upload::tus", "offset 0\n\n");
                    tracing::trace!(target: "oomguard::spool", "held back");
                })
            })
            .unwrap()
            .join()
            .unwrap();
        // Unnamed threads (the app's, calling in) get no prefix.
        std::thread::spawn(move || {
            tracing::subscriber::with_default(logger(), || tracing::warn!(target: "hprof", "a\0b"))
        })
        .join()
        .unwrap();
        liblog.write(Level::INFO, "\n\n".into());
        liblog.write(Level::INFO, "\0".into());
        liblog.write(Level::TRACE, "x\n".into());
        let tag = |p: i32, t: &str| (p, "OomGuard".to_string(), t.to_string());
        assert_eq!(
            *WRITTEN.lock().unwrap(),
            [
                tag(6, "oomguard: dump failed: 28 bytes=42"),
                tag(5, "oomguard: spool full"),
                tag(4, "oomguard: kept path=\"/data/x\""),
                tag(3, "oomguard: offset 0"),
                tag(5, "ab"),
                tag(3, "x"),
            ]
        );
    }
}
