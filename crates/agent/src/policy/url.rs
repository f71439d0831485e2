//! The rules for the URLs the agent contacts (the policy's `remote.url` and `upload.url`, a
//! redirect, a tus `Location`): `https://`, or plain `http://` to a loopback address only, judged
//! on the host a client would contact; and a DNS lookup with a deadline. Used by the policy's
//! parser and fetch and by the uploader (`upload::tus`), so that neither reaches into the other.
//!
//! Invariants: a URL is judged by the URL standard's parse ([`crate::net::weburl`]), never by its
//! text, and the transports connect by that same parse (the loopback twin parses with it; the platform transport is handed
//! its serialisation, in which `java.net.URL` finds the same host); a lookup never holds its
//! caller longer than the limit given.
#![forbid(unsafe_code)]

use crate::net::weburl::{Error, Host, Url};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// Whether `url` may be contacted, and why not: `https://` to any host, or plain `http://` to a
/// loopback address (127.0.0.0/8, `localhost`, `[::1]`). Judged on the host the URL parser
/// finds ([`crate::net::weburl`], whose parse the transports connect by), never on the text: in
/// `http://vm\@127.0.0.1/` the host is `vm` (a backslash ends the authority in an http URL),
/// in `http://127.0.0.1@vm/` it is `vm` too. `localhost.` is refused: a resolver may ask DNS.
pub fn check_url(url: &str) -> Result<Url, String> {
    let u = match Url::parse(url) {
        Ok(u) => u,
        Err(Error::NotHttp) => return Err("is not an http:// or https:// URL".into()),
        Err(e) => return Err(format!("is not a URL ({e})")),
    };
    match (u.scheme(), u.host()) {
        ("https", _) => Ok(u),
        ("http", Host::Domain(d)) if d == "localhost" => Ok(u),
        ("http", Host::Ipv4(ip)) if ip.is_loopback() => Ok(u),
        ("http", Host::Ipv6(ip)) if ip.is_loopback() => Ok(u),
        _ => Err("is plain http to a host that is not loopback; use https://".into()),
    }
}

/// Whether `url` may be contacted (see [`check_url`]).
pub fn allowed_url(url: &str) -> bool {
    check_url(url).is_ok()
}

/// Resolve a `Location` header against the endpoint, as a URL parser does (the URL standard's
/// rules, [`crate::net::weburl`]). What cannot be resolved comes back as it is, for
/// [`allowed_url`] to refuse.
pub fn resolve(endpoint: &str, location: &str) -> String {
    match Url::parse(endpoint).and_then(|base| base.join(location)) {
        Ok(u) => u.into(),
        Err(_) => location.to_string(),
    }
}

/// The system's lookup of `host:port` (getaddrinfo), which can block far longer than any
/// timeout of ours when DNS does not answer.
fn std_lookup(netloc: String) -> io::Result<Vec<SocketAddr>> {
    netloc.to_socket_addrs().map(|a| a.collect())
}

/// Resolve `netloc` ("host:port") in a thread of its own and wait at most `limit`: the system's
/// lookup has no deadline, so a lookup that hangs would hold the calling thread until the
/// system's resolver gives up. For the loopback twin (`net::loopback`).
pub fn resolve_within(netloc: &str, limit: Duration) -> io::Result<Vec<SocketAddr>> {
    resolve_with(netloc, limit, std_lookup)
}

/// [`resolve_within`] with the lookup given. A lookup past the limit is left to finish on its
/// own and its answer dropped. An address that is already numeric needs no lookup.
fn resolve_with(
    netloc: &str,
    limit: Duration,
    lookup: fn(String) -> io::Result<Vec<SocketAddr>>,
) -> io::Result<Vec<SocketAddr>> {
    if let Ok(a) = netloc.parse::<SocketAddr>() {
        return Ok(vec![a]);
    }
    let (tx, rx) = sys::chan::channel();
    let owned = netloc.to_string();
    std::thread::Builder::new()
        .name("oomguard-dns".into())
        .spawn(move || {
            let _ = tx.send(lookup(owned));
        })?;
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("DNS lookup of {netloc} took more than {limit:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Host names are ASCII: a Unicode host is refused with the parser's reason (the library has
    /// no IDNA, see `net::weburl`), its punycode form is what is accepted,
    /// and an ASCII host keeps its case folded as before.
    #[test]
    fn a_unicode_host_is_refused_and_its_punycode_form_accepted() {
        let e = check_url("https://b\u{fc}cher.example/r").unwrap_err();
        assert!(e.starts_with("is not a URL ("), "{e}");
        let u = check_url("https://xn--bcher-kva.example/r").unwrap();
        assert_eq!(u.host_str(), "xn--bcher-kva.example");
        let u = check_url("https://Collector.Example/r").unwrap();
        assert_eq!(u.as_str(), "https://collector.example/r");
    }

    /// A lookup that never answers (DNS that does not reply): the caller gets a timeout, not
    /// a hang; a numeric address needs no lookup; a lookup's own error comes through.
    #[test]
    fn a_dns_lookup_that_hangs_is_given_up_at_the_limit() {
        fn hang(_: String) -> io::Result<Vec<SocketAddr>> {
            loop {
                std::thread::park();
            }
        }
        fn fail(n: String) -> io::Result<Vec<SocketAddr>> {
            Err(io::Error::new(io::ErrorKind::NotFound, format!("no {n}")))
        }
        let limit = Duration::from_millis(50);
        let e = resolve_with("collector.example:443", limit, hang).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(e.to_string().contains("collector.example:443"), "{e}");
        let a = resolve_with("127.0.0.1:8080", limit, hang).unwrap();
        assert_eq!(a, vec!["127.0.0.1:8080".parse().unwrap()]);
        let e = resolve_with("x.example:1", Duration::from_secs(60), fail).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        let a = resolve_within("localhost:9", Duration::from_secs(60)).unwrap();
        assert!(
            a.iter().all(|a| a.ip().is_loopback() && a.port() == 9),
            "{a:?}"
        );
    }

    #[test]
    fn only_https_or_loopback() {
        assert!(allowed_url("https://example.com/files/"));
        assert!(allowed_url("http://127.0.0.1:8080/files/"));
        assert!(allowed_url("http://127.3.2.1/files/"));
        assert!(allowed_url("http://localhost:1/x"));
        assert!(allowed_url("http://[::1]:9/x"));
        assert!(!allowed_url("http://example.com/files/"));
        assert!(!allowed_url("http://10.0.0.1/files/"));
        assert!(!allowed_url("http://127.0.0.1.evil.com/x"));
        assert!(!allowed_url("http://user@evil.com/x"));
        assert!(!allowed_url("ftp://127.0.0.1/"));
        assert!(!allowed_url("127.0.0.1/files"));
    }

    /// The host is the one a URL parser (the standard's) would contact, not a guess from the
    /// text: the backslash form ends the authority at `\\` (plain http to `vm`), userinfo is not
    /// the host, `localhost.` is a name a resolver may answer for, percent-encoded and long IPv6
    /// forms of loopback are loopback. The same for a `Location` the server returns.
    #[test]
    fn urls_are_judged_by_the_host_a_client_contacts() {
        for refused in [
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
            "http://[::ffff:10.0.0.1]/files/",
            "https://",
            "HTTP://evil.example/",
        ] {
            assert!(!allowed_url(refused), "{refused} was allowed");
        }
        for allowed in [
            "http://%31%32%37.0.0.1:9/files/",
            "http://[0:0:0:0:0:0:0:1]:9/files/",
            "http://LOCALHOST:9/files/",
            "http://user:pw@127.0.0.1:9/files/",
            "HTTPS://collector.example/files/",
            "https://collector.example\\files/",
        ] {
            assert!(allowed_url(allowed), "{allowed} was refused");
        }
        let e = "http://127.0.0.1:9/files/";
        for loc in [
            "http://vm:9\\@127.0.0.1/files/abc",
            "//vm:9\\@127.0.0.1/files/abc",
            "\\\\vm:9/files/abc",
        ] {
            assert!(!allowed_url(&resolve(e, loc)), "Location {loc} was allowed");
        }
    }

    #[test]
    fn locations_resolve() {
        let e = "http://127.0.0.1:9/files/";
        assert_eq!(resolve(e, "/files/abc"), "http://127.0.0.1:9/files/abc");
        assert_eq!(resolve(e, "abc"), "http://127.0.0.1:9/files/abc");
        assert_eq!(resolve(e, "https://x/y"), "https://x/y");
        assert_eq!(resolve("http://127.0.0.1:9", "/a"), "http://127.0.0.1:9/a");
    }
}
