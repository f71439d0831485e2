//! The https-only rule of uploads against URL tricks (issue 33 item 2, from the reviewer's
//! `rv_url.rs`): the rule judged the host after the last `@`, while ureq's parser ends the
//! authority at a backslash, so `http://vm:PORT\@127.0.0.1/../files/` passed as loopback and
//! the creation POST went in plain http to `vm`. Such an endpoint is refused before any request.
use collector::{self, Collector};
use oomguard::spool::{FileKind, NewIncident, Quotas, Spool};
use oomguard::upload::{self, Network};
use std::time::Duration;

#[test]
fn an_endpoint_that_only_looks_like_loopback_is_refused_before_any_request() {
    let cd = tempfile::tempdir().unwrap();
    let run = Collector::bind("127.0.0.1:0", collector::Config::new(cd.path()))
        .unwrap()
        .spawn();
    let port = run.addr().port();
    let d = tempfile::tempdir().unwrap();
    let spool = Spool::open(d.path(), Quotas::default()).unwrap();
    let st = spool.stage().unwrap();
    std::fs::write(st.path(FileKind::Report), b"{\"secret\":1}").unwrap();
    spool
        .commit(
            st,
            NewIncident {
                reason: "r".into(),
                ..Default::default()
            },
        )
        .unwrap();
    for trick in [
        format!("http://vm:{port}\\@127.0.0.1/../files/"),
        format!("http://localhost.:{port}/files/"),
        format!("http://127.0.0.1:{port}@vm/files/"),
    ] {
        let cfg = upload::Config {
            endpoint: trick.clone(),
            io_timeout: Duration::from_secs(5),
            ..Default::default()
        };
        match upload::run_once(&spool, &cfg, Network::UNMETERED) {
            Err(upload::Error::Insecure(u)) => assert_eq!(u, trick),
            other => panic!("{trick}: {other:?}"),
        }
    }
    let stats = run.stop();
    assert_eq!(stats.requests, 0, "{stats:?}");
}
