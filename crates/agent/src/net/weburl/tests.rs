//! The parser against the `url` crate (the URL standard's implementation the library used
//! before, kept for the command line): every case either parses alike in both, or is one of the
//! refusals the module doc lists.

use super::*;

/// Absolute URLs: ours and the `url` crate's give the same serialisation and host.
const SAME: &[&str] = &[
    "https://example.com/files/",
    "https://example.com",
    "http://127.0.0.1:8080/files/",
    "http://127.3.2.1/files/",
    "http://localhost:1/x",
    "http://[::1]:9/x",
    "http://vm:8080\\@127.0.0.1/../files/",
    "http://evil.example\\@localhost/files/",
    "http://evil.example\\127.0.0.1/files/",
    "http://127.0.0.1@evil.example/files/",
    "http://127.0.0.1:80@evil.example/files/",
    "http://[::1]@evil.example/files/",
    "http://localhost.:9/files/",
    "http://localhost.evil.example/files/",
    "http://evil.example#@127.0.0.1/",
    "http://evil.example?@127.0.0.1/",
    "http:evil.example/files/",
    "http:\\\\evil.example/files/",
    "http:///evil.example/files/",
    "http://[::ffff:10.0.0.1]/files/",
    "HTTP://evil.example/",
    "http://%31%32%37.0.0.1:9/files/",
    "http://[0:0:0:0:0:0:0:1]:9/files/",
    "http://[1:0:0:2:0:0:0:3]/",
    "http://[1:0:0:0:2:0:0:3]/",
    "http://[1:2:3:4:5:6:7:8]/",
    "http://[0:0:0:0:0:0:0:0]/",
    "http://[::FFFF:127.0.0.1]/",
    "http://LOCALHOST:9/files/",
    "http://user:pw@127.0.0.1:9/files/",
    "http://us@er:p:w@127.0.0.1:9/files/",
    "http://:pw@127.0.0.1/",
    "http://:@127.0.0.1/",
    "http://@127.0.0.1/",
    "http://u%20@h/",
    "HTTPS://collector.example/files/",
    "https://collector.example\\files/",
    "https://Collector.Example/r",
    "https://xn--bcher-kva.example/r",
    "http://127.1/",
    "http://0x7f.0.0.1/",
    "http://0177.0.0.1/",
    "http://2130706433/",
    "http://127.0.0.1./",
    "http://0x/",
    "http://1.2.3.0x10/",
    "http://h:80/",
    "https://h:443/",
    "https://h:80/",
    "http://h:0080/",
    "http://h:/",
    "http://h:00/",
    "  http://h/a\tb\nc  ",
    "http://h/a b/\"q\"/<x>/`y`/{z}/^/|",
    "http://h/a?b c'd\"e<f>g`h#i j`k<l>",
    "http://h/p/./q/../r/%2e/%2E%2e/s/.",
    "http://h/a/b/..",
    "http://h/..",
    "http://h/./",
    "http://h/a/%2e%2E",
    "http://h/caf\u{e9}?\u{e9}#\u{e9}",
    "http://h/%zz/%41",
    "http://h?q",
    "http://h#f",
    "http://h/a//b",
    "http://h/a;b=c,d!e$f&g(h)i*j+k",
    "http://a%2Eb/",
    // Each IPv4 part at its largest, by the number of parts; a last label that only looks hex.
    "http://255.255.255.255/",
    "http://255.0.0.1/",
    "http://1.16777215/",
    "http://1.2.65535/",
    "http://4294967295/",
    "http://a.0xg/",
    "http://h:0008080/",
    "https://h:80/",
    "http://h:443/",
    // IPv6 written back: the first of two longest zero runs as `::`, a lone zero piece kept.
    "http://[1:0:0:2:3:0:0:4]/",
    "http://[1:0:2:3:4:5:6:7]/",
];

/// Refused by both.
const BOTH_REFUSE: &[&str] = &[
    "https://",
    "http://",
    "http://h:65536/",
    "http://h:1x/",
    "http://h:999999999999999999999/",
    "http://[::1/",
    "http://[::1]x/",
    "http://[1:2:3:4:5:6:7:8:9]/",
    "http://[::1%25eth0]/",
    "http://1.2.3.4.5/",
    "http://256.0.0.1/",
    "http://1.2.3.256/",
    "http://1.2.65536/",
    "http://09/",
    "http://a b/",
    "http://a<b/",
    "http://a%20b/",
    "http://a%00b/",
    "http://a|b/",
    "http://a^b/",
    "http://%/",
    "http://@/",
    "127.0.0.1/files",
    "http://a%2Fb/",
    "http://1.16777216/",
    "http://4294967296/",
    "http://h:8a/",
];

fn theirs(s: &str) -> Option<(String, Option<String>)> {
    let u = url::Url::parse(s).ok()?;
    Some((u.as_str().to_string(), u.host_str().map(str::to_string)))
}

#[test]
fn absolute_urls_parse_as_the_url_standard_says() {
    for &s in SAME {
        let want = theirs(s).unwrap_or_else(|| panic!("the url crate refuses {s:?}"));
        let got = Url::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert_eq!(got.as_str(), want.0, "{s:?}");
        assert_eq!(Some(got.host_str().to_string()), want.1, "host of {s:?}");
        // Its serialisation parses to itself.
        assert_eq!(Url::parse(got.as_str()).unwrap(), got, "{s:?} again");
        let u = url::Url::parse(s).unwrap();
        assert_eq!(
            got.port_or_default(),
            u.port_or_known_default().unwrap(),
            "{s:?}"
        );
        let pq = match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        };
        assert_eq!(got.path_and_query(), pq, "{s:?}");
        assert_eq!(got.port(), u.port(), "port of {s:?}");
        let host_kind_agrees = match (got.host(), u.host().unwrap()) {
            (Host::Domain(a), url::Host::Domain(b)) => a == b,
            (Host::Ipv4(a), url::Host::Ipv4(b)) => *a == b,
            (Host::Ipv6(a), url::Host::Ipv6(b)) => *a == b,
            _ => false,
        };
        assert!(host_kind_agrees, "{s:?}: {:?}", got.host());
    }
    for &s in BOTH_REFUSE {
        assert!(theirs(s).is_none(), "the url crate takes {s:?}");
        assert!(Url::parse(s).is_err(), "{s:?} was taken");
    }
}

/// What this parser refuses and the standard would take: hosts outside ASCII (no IDNA here) and
/// other schemes, each with its own error.
#[test]
fn unicode_hosts_and_other_schemes_are_refused_with_a_reason() {
    for s in [
        "https://b\u{fc}cher.example/r",
        "https://b%C3%BCcher.example/r",
        "https://\u{ff21}.example/",
    ] {
        let e = Url::parse(s).unwrap_err();
        assert!(e.to_string().contains("outside ASCII"), "{s:?}: {e}");
    }
    for s in [
        "ftp://127.0.0.1/",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "x",
    ] {
        assert_eq!(Url::parse(s).unwrap_err(), Error::NotHttp, "{s:?}");
    }
    for (s, why) in [
        ("http://h:8a/", "the port is not a number"),
        ("http://h:+80/", "the port is not a number"),
        ("http://h:65536/", "the port is over 65535"),
        ("http://h:999999999999999999999/", "the port is over 65535"),
    ] {
        assert_eq!(Url::parse(s).unwrap_err(), Error::Invalid(why), "{s:?}");
    }
}

/// References resolved against a base as the `url` crate's `join` does.
#[test]
fn references_resolve_as_the_url_standard_says() {
    let bases = [
        "http://127.0.0.1:9/files/",
        "http://127.0.0.1:9/files/abc?q=1#f",
        "http://127.0.0.1:9",
        "https://u:p@collector.example/a/b/c",
        "https://[::1]:8443/x/y?z",
    ];
    let refs = [
        "/files/abc",
        "abc",
        "https://x/y",
        "http://vm:9\\@127.0.0.1/files/abc",
        "//vm:9\\@127.0.0.1/files/abc",
        "\\\\vm:9/files/abc",
        "\\files\\abc",
        "../up",
        "../../../../up",
        "./here",
        ".",
        "..",
        "",
        "?only",
        "#frag",
        "?q#f",
        "a/b/../c?x y#z w",
        "http:rel",
        "https:rel",
        "http:/abs",
        "HTTP://Other.Example",
        "  /trimmed  ",
        "/caf\u{e9}",
        "%2e%2e/x",
        "//h",
        // Not a scheme (a digit first, a character schemes lack): relative paths.
        "1a:b",
        "a_b:c",
    ];
    for b in bases {
        let ours = Url::parse(b).unwrap();
        let base = url::Url::parse(b).unwrap();
        for r in refs {
            let want = base.join(r).map(|u| u.to_string()).ok();
            let got = ours.join(r).map(|u| u.to_string()).ok();
            assert_eq!(got, want, "{r:?} against {b:?}");
        }
        for r in ["ftp://x/", "mailto:a@b", "//", "http://"] {
            assert!(ours.join(r).is_err(), "{r:?} against {b:?}");
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

    /// Any text: no panic; what we take, the `url` crate takes and writes alike, and its
    /// serialisation parses to itself; a reference against a base likewise.
    #[test]
    fn random_text_parses_as_the_url_crate_or_is_refused(
        scheme in "(http|HTTPS|https|ftp|)(:|://|:/|:\\\\\\\\)",
        rest in "[a-z0-9.:@/\\\\?#%\\[\\] \t\u{e9}x-]{0,24}",
        rel in "[a-z0-9.:@/\\\\?#%\\[\\] -]{0,12}",
    ) {
        let s = format!("{scheme}{rest}");
        if let Ok(u) = Url::parse(&s) {
            let theirs = url::Url::parse(&s).map(|t| t.to_string());
            proptest::prop_assert_eq!(Ok(u.to_string()), theirs, "{:?}", s);
            let again = Url::parse(u.as_str());
            proptest::prop_assert_eq!(again, Ok(u.clone()), "{:?}", s);
            if let Ok(j) = u.join(&rel) {
                let theirs = url::Url::parse(&s).unwrap().join(&rel).map(|t| t.to_string());
                proptest::prop_assert_eq!(Ok(j.to_string()), theirs, "{:?} + {:?}", s, rel);
            }
        }
    }
}
